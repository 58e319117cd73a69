/*
 * consumer.c - an ordinary C application of libos_transport.so.1, used to check the drop-in claim.
 *
 * Built once against include/os_transport.h and the bundled URMA header, linked with
 * -los_transport -lurma, then run unchanged against the Rust library and against the legacy C
 * library (the test switches LD_LIBRARY_PATH). It only uses the public URMA API (here served by
 * the loopback liburma.so.0): one context, a send JFC + JFS, a receive JFC + jetty, registered
 * source/destination segments and an imported destination, and one poller thread per JFC that
 * hands every completion record to os_transport_wake_up_task().
 *
 * It transfers LEN bytes (> 2 MiB, so the legacy library accepts it: N = 3 chunks) with
 * os_transport_send / os_transport_recv, checks the bytes, the notify_callback arguments, both
 * waits, and a few return codes, then prints "consumer ok: <path of the libos_transport in use>".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os_transport.h"

#define ERR32 ((uint32_t)-1)
#define LEN (5U * 1024U * 1024U + 3U) /* 3 chunks: 2 MiB, 2 MiB, 1 MiB + 3 */
#define NCHUNK 3
#define SK 0x123456789AULL
#define CK 0xABCDE12345ULL

static int g_failures;
#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "consumer.c:%d: CHECK failed: %s\n", __LINE__, #cond); \
            g_failures++;                                                     \
        }                                                                     \
    } while (0)

struct poller {
    urma_jfc_t *jfc;
    pthread_t th;
    int crs;
    int cr_errors;
    int wake_errors;
};

static void *g_handle;
static volatile int g_stop;
static uint64_t g_notified[8];
static int g_nnotified;
static int g_log_lines;

static void *poll_loop(void *arg)
{
    struct poller *p = arg;
    urma_cr_t crs[16];
    for (;;) {
        int stop = __atomic_load_n(&g_stop, __ATOMIC_ACQUIRE);
        int i, n = urma_poll_jfc(p->jfc, 16, crs);
        if (n < 0) {
            p->cr_errors++;
            n = 0;
        }
        for (i = 0; i < n; i++) {
            p->crs++;
            if (crs[i].status != URMA_CR_SUCCESS) {
                p->cr_errors++;
            }
            if (os_transport_wake_up_task(g_handle, &crs[i]) != 0) {
                p->wake_errors++;
            }
        }
        if (stop && n == 0) {
            break;
        }
        if (n == 0) {
            sched_yield();
        }
    }
    return NULL;
}

static int notify_cb(void *user_data)
{
    int i = __atomic_fetch_add(&g_nnotified, 1, __ATOMIC_SEQ_CST);
    if (i < 8) {
        g_notified[i] = ((os_transport_user_data_t *)user_data)->user_ctx;
    }
    return 0;
}

static void log_cb(int level, const char *msg)
{
    (void)level;
    if (msg != NULL && strstr(msg, "[PIPLN RH2D] ") != NULL) {
        __atomic_fetch_add(&g_log_lines, 1, __ATOMIC_SEQ_CST);
    }
}

static urma_target_seg_t *reg_seg(urma_context_t *ctx, void *buf, uint64_t len)
{
    urma_seg_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.va = (uint64_t)(uintptr_t)buf;
    cfg.len = len;
    cfg.flag.bs.token_policy = URMA_TOKEN_NONE;
    cfg.flag.bs.access = URMA_ACCESS_READ | URMA_ACCESS_WRITE;
    return urma_register_seg(ctx, &cfg);
}

int main(void)
{
    urma_device_t **devs;
    int ndev = 0;
    urma_context_t *ctx;
    urma_jfc_cfg_t jfc_cfg;
    urma_jfs_cfg_t jfs_cfg;
    urma_jfr_cfg_t jfr_cfg;
    urma_jetty_cfg_t jetty_cfg;
    urma_jfs_t *jfs;
    urma_jetty_t *rx;
    urma_rjetty_t rj;
    urma_target_jetty_t *tjetty;
    urma_target_seg_t *src_seg, *dst_seg, *dst_imported;
    urma_import_seg_flag_t iflag;
    unsigned char *src, *dst;
    os_transport_cfg_t cfg;
    urma_jetty_info_t ji;
    ost_buffer_info_t lsrc, rdst, host;
    ost_device_info_t dev;
    task_sync_t *send_sync = NULL, *recv_sync = NULL;
    urma_status_t st = -1;
    struct poller sp, rp;
    void *h2 = (void *)1;
    Dl_info info;
    void *sym;
    uint32_t i;
    int k;

    CHECK(os_transport_log_reg(0, log_cb) == 0);
    CHECK(os_transport_log_reg(0, NULL) == -1);

    CHECK(urma_init(NULL) == URMA_SUCCESS);
    devs = urma_get_device_list(&ndev);
    if (devs == NULL || ndev < 1) {
        fprintf(stderr, "no URMA device\n");
        return 1;
    }
    ctx = urma_create_context(devs[0], 0);
    urma_free_device_list(devs);
    if (ctx == NULL) {
        fprintf(stderr, "urma_create_context failed\n");
        return 1;
    }
    memset(&jfc_cfg, 0, sizeof(jfc_cfg));
    jfc_cfg.depth = 1024;
    sp.jfc = urma_create_jfc(ctx, &jfc_cfg);
    rp.jfc = urma_create_jfc(ctx, &jfc_cfg);
    CHECK(sp.jfc != NULL && rp.jfc != NULL);
    sp.crs = sp.cr_errors = sp.wake_errors = 0;
    rp.crs = rp.cr_errors = rp.wake_errors = 0;

    memset(&jfs_cfg, 0, sizeof(jfs_cfg));
    jfs_cfg.depth = 256;
    jfs_cfg.trans_mode = URMA_TM_RM;
    jfs_cfg.max_sge = 1;
    jfs_cfg.jfc = sp.jfc;
    jfs = urma_create_jfs(ctx, &jfs_cfg);
    CHECK(jfs != NULL);

    memset(&jfr_cfg, 0, sizeof(jfr_cfg));
    jfr_cfg.depth = 256;
    jfr_cfg.trans_mode = URMA_TM_RM;
    jfr_cfg.max_sge = 1;
    jfr_cfg.jfc = rp.jfc;
    memset(&jetty_cfg, 0, sizeof(jetty_cfg));
    jetty_cfg.jfs_cfg = jfs_cfg;
    jetty_cfg.jfs_cfg.jfc = rp.jfc;
    jetty_cfg.jfr_cfg = &jfr_cfg;
    rx = urma_create_jetty(ctx, &jetty_cfg);
    CHECK(rx != NULL);
    memset(&rj, 0, sizeof(rj));
    rj.jetty_id = rx->jetty_id;
    rj.trans_mode = URMA_TM_RM;
    rj.type = URMA_JETTY;
    tjetty = urma_import_jetty(ctx, &rj, NULL);
    CHECK(tjetty != NULL);

    src = malloc(LEN);
    dst = calloc(1, LEN);
    if (src == NULL || dst == NULL || jfs == NULL || rx == NULL || tjetty == NULL) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    for (i = 0; i < LEN; i++) {
        src[i] = (unsigned char)((i * 131U) ^ (i >> 11));
    }
    src_seg = reg_seg(ctx, src, LEN);
    dst_seg = reg_seg(ctx, dst, LEN);
    CHECK(src_seg != NULL && dst_seg != NULL);
    memset(&iflag, 0, sizeof(iflag));
    iflag.bs.access = URMA_ACCESS_READ | URMA_ACCESS_WRITE;
    dst_imported = urma_import_seg(ctx, &dst_seg->seg, NULL, 0, iflag);
    CHECK(dst_imported != NULL);

    memset(&cfg, 0, sizeof(cfg));
    cfg.worker_thread_num = 2;
    cfg.recv_queue_capacity = 4;
    cfg.jfc = rp.jfc;
    CHECK(os_transport_init(ctx, &cfg, &g_handle) == 0 && g_handle != NULL);
    /* one instance per process */
    CHECK(os_transport_init(ctx, &cfg, &h2) == ERR32 && h2 == NULL);
    CHECK(os_transport_reg_jfc(NULL, rp.jfc, g_handle) == 0);

    CHECK(pthread_create(&sp.th, NULL, poll_loop, &sp) == 0);
    CHECK(pthread_create(&rp.th, NULL, poll_loop, &rp) == 0);

    host.addr = (uint64_t)(uintptr_t)dst;
    host.tseg = dst_seg;
    dev.jfr = NULL;
    dev.jetty = rx;
    dev.dst = dst;
    CHECK(os_transport_recv(g_handle, &host, &dev, LEN, CK, &recv_sync, notify_cb) == 0);
    CHECK(recv_sync != NULL);

    memset(&ji, 0, sizeof(ji));
    ji.jfs = jfs;
    ji.jetty = NULL;
    ji.tjetty = tjetty;
    ji.jetty_mode = JETTY_MODE_SIMPLEX;
    lsrc.addr = (uint64_t)(uintptr_t)src;
    lsrc.tseg = src_seg;
    rdst.addr = (uint64_t)(uintptr_t)dst;
    rdst.tseg = dst_imported;
    CHECK(os_transport_send(g_handle, &ji, &lsrc, &rdst, LEN, SK, CK, &send_sync, &st) == 0);
    CHECK(st == URMA_SUCCESS && send_sync != NULL);

    st = -1;
    CHECK(wait_and_free_sync_timeout(g_handle, send_sync, 10000, &st) == 0);
    CHECK(st == URMA_SUCCESS);
    st = -1;
    CHECK(wait_and_free_sync_timeout(g_handle, recv_sync, 10000, &st) == 0);
    CHECK(st == URMA_SUCCESS);
    CHECK(memcmp(src, dst, LEN) == 0);

    /* one callback per chunk, {ck, last, k}, in chunk order here (one sender, FIFO poller) */
    CHECK(g_nnotified == NCHUNK);
    for (k = 0; k < NCHUNK && k < g_nnotified; k++) {
        uint64_t want = CK | ((uint64_t)(k == NCHUNK - 1) << 60) | ((uint64_t)k << 61);
        CHECK(g_notified[k] == want);
    }

    /* a wait with nothing to wait for times out (1) and releases the sync */
    CHECK(os_transport_recv(g_handle, &host, &dev, 4096, CK + 1, &recv_sync, notify_cb) == 0);
    CHECK(wait_and_free_sync_timeout(g_handle, recv_sync, 0, &st) == 1 && st == URMA_SUCCESS);
    /* keys beyond 40 bits are refused */
    CHECK(os_transport_send(g_handle, &ji, &lsrc, &rdst, LEN, 1ULL << 40, CK, &send_sync, &st) == ERR32);
    CHECK(send_sync == NULL);
    CHECK(os_transport_cancel_tasks(g_handle, NULL, 0x777) == 0);

    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    pthread_join(sp.th, NULL);
    pthread_join(rp.th, NULL);
    /* 3 WRITE + 3 SEND_IMM local CRs; 3 SEND_WITH_IMM receive CRs */
    CHECK(sp.crs == 2 * NCHUNK && rp.crs == NCHUNK);
    CHECK(sp.cr_errors == 0 && rp.cr_errors == 0);
    CHECK(sp.wake_errors == 0 && rp.wake_errors == 0);

    CHECK(os_transport_destroy(g_handle) == 0);
    CHECK(os_transport_destroy(g_handle) == ERR32);
    CHECK(g_log_lines > 0);

    CHECK(urma_unimport_seg(dst_imported) == URMA_SUCCESS);
    CHECK(urma_unregister_seg(src_seg) == URMA_SUCCESS);
    CHECK(urma_unregister_seg(dst_seg) == URMA_SUCCESS);
    CHECK(urma_unimport_jetty(tjetty) == URMA_SUCCESS);
    CHECK(urma_delete_jetty(rx) == URMA_SUCCESS);
    CHECK(urma_delete_jfs(jfs) == URMA_SUCCESS);
    CHECK(urma_delete_jfc(sp.jfc) == URMA_SUCCESS);
    CHECK(urma_delete_jfc(rp.jfc) == URMA_SUCCESS);
    CHECK(urma_delete_context(ctx) == URMA_SUCCESS);
    free(src);
    free(dst);

    /* which libos_transport.so.1 the loader picked (dlsym gives the definition, not a PLT slot) */
    sym = dlsym(RTLD_DEFAULT, "os_transport_init");
    if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL) {
        fprintf(stderr, "cannot locate os_transport_init\n");
        return 1;
    }
    if (g_failures != 0) {
        fprintf(stderr, "consumer: %d check(s) failed (library %s)\n", g_failures, info.dli_fname);
        return 1;
    }
    printf("consumer ok: %s\n", info.dli_fname);
    return 0;
}
