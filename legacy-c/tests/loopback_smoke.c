/*
 * loopback_smoke.c - end-to-end smoke test of the legacy reference library over a real URMA
 * provider (the mlcachedirect software loopback liburma.so.0; it uses only the public URMA API,
 * so it would also run on UMDK hardware with one device).
 *
 * One process, one context, one JFC, two jetties (tx, rx), set up with the shared C fixture
 * (tests/c/urma_fixture.h). A poller thread polls the JFC and feeds every CR to
 * os_transport_wake_up_task(). It transfers 2 MiB + 1 bytes (N = 2) from src to dst
 * with os_transport_send / os_transport_recv, then checks the data, the callbacks and both waits.
 * When the loopback's control API is present (looked up with dlsym, so the program still links
 * against any liburma), it also shows two 1.0 defects end to end: an error CR advances the
 * pipeline like a success (§10 #7), and a SEND_WITH_IMM that arrives before its recv is
 * registered is dropped, so that recv times out (§4.3, §10 #8).
 *
 *   make -C legacy-c loopback-smoke LOOPBACK_DIR=$CARGO_TARGET_DIR/debug
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os_transport.h"
#include "urma_fixture.h"

#define ERR32 ((uint32_t)-1)
#define LEN (2U * 1024U * 1024U + 1U)

static int g_failures;
#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "loopback_smoke.c:%d: CHECK failed: %s\n", __LINE__, #cond); \
            g_failures++;                                                             \
        }                                                                             \
    } while (0)

static void *g_handle;
static uint64_t g_notified[8];
static int g_nnotified;

static int notify_cb(void *ud)
{
    int i = __atomic_fetch_add(&g_nnotified, 1, __ATOMIC_SEQ_CST);
    if (i < 8) {
        g_notified[i] = *(uint64_t *)ud;
    }
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

static int wait_counter(int *counter, int value, int ms)
{
    int i;
    for (i = 0; i < ms && __atomic_load_n(counter, __ATOMIC_SEQ_CST) < value; i++) {
        sleep_ms(1);
    }
    return __atomic_load_n(counter, __ATOMIC_SEQ_CST);
}

int main(void)
{
    const uint64_t sk = 0x123456789AULL, ck = 0xABCDE12345ULL;
    urma_context_t *ctx;
    urma_jfc_t *jfc;
    urma_jfs_cfg_t jfs_cfg;
    urma_jfr_cfg_t tx_jfr_cfg, rx_jfr_cfg;
    urma_jetty_t *tx, *rx;
    urma_target_seg_t *src_seg, *dst_seg, *dst_imported;
    urma_target_jetty_t *tjetty;
    unsigned char *src, *dst;
    os_transport_cfg_t cfg;
    urma_jetty_info_t ji;
    ost_buffer_info_t lsrc, rdst, host;
    ost_device_info_t dev;
    task_sync_t *send_sync = NULL, *recv_sync = NULL;
    urma_status_t st = 1;
    ufx_poller_t p;
    uint32_t i;

    CHECK(urma_init(NULL) == URMA_SUCCESS);
    ctx = ufx_open(NULL);
    CHECK(ctx != NULL);
    if (ctx == NULL) {
        return 1;
    }
    jfc = ufx_jfc(ctx, 1024, NULL);
    CHECK(jfc != NULL);
    jfs_cfg = ufx_jfs_cfg(256, jfc);
    tx_jfr_cfg = ufx_jfr_cfg(256, jfc);
    rx_jfr_cfg = ufx_jfr_cfg(256, jfc);
    tx = ufx_jetty(ctx, &jfs_cfg, &tx_jfr_cfg);
    rx = ufx_jetty(ctx, &jfs_cfg, &rx_jfr_cfg);
    CHECK(tx != NULL && rx != NULL);

    src = malloc(LEN);
    dst = calloc(1, LEN);
    CHECK(src != NULL && dst != NULL);
    for (i = 0; i < LEN; i++) {
        src[i] = (unsigned char)(i * 7 + 3);
    }
    src_seg = ufx_reg_seg(ctx, src, LEN);
    dst_seg = ufx_reg_seg(ctx, dst, LEN);
    CHECK(src_seg != NULL && dst_seg != NULL);
    dst_imported = ufx_import_seg(ctx, dst_seg, 0);
    CHECK(dst_imported != NULL);
    tjetty = ufx_import_jetty(ctx, rx, NULL);
    CHECK(tjetty != NULL);

    memset(&cfg, 0, sizeof(cfg));
    cfg.worker_thread_num = 2;
    cfg.recv_queue_capacity = 2;
    cfg.jfc = jfc;
    CHECK(os_transport_init(ctx, &cfg, &g_handle) == 0 && g_handle != NULL);
    memset(&p, 0, sizeof(p));
    p.jfc = jfc;
    p.wake = os_transport_wake_up_task;
    p.handle = g_handle;
    CHECK(ufx_poller_start(&p) == 0);

    host.addr = (uint64_t)(uintptr_t)dst;
    host.tseg = dst_seg;
    dev.jfr = NULL;
    dev.jetty = rx;
    dev.dst = dst;
    CHECK(os_transport_recv(g_handle, &host, &dev, LEN, ck, &recv_sync, notify_cb) == 0);

    memset(&ji, 0, sizeof(ji));
    ji.jetty = tx;
    ji.tjetty = tjetty;
    lsrc.addr = (uint64_t)(uintptr_t)src;
    lsrc.tseg = src_seg;
    rdst.addr = (uint64_t)(uintptr_t)dst;
    rdst.tseg = dst_imported;
    CHECK(os_transport_send(g_handle, &ji, &lsrc, &rdst, LEN, sk, ck, &send_sync, &st) == 0);
    CHECK(st == URMA_SUCCESS && send_sync != NULL);

    CHECK(wait_and_free_sync_timeout(g_handle, send_sync, 10000, &st) == 0);
    CHECK(st == URMA_SUCCESS);
    CHECK(wait_and_free_sync_timeout(g_handle, recv_sync, 10000, &st) == 0);
    CHECK(memcmp(src, dst, LEN) == 0);
    CHECK(g_nnotified == 2);
    CHECK(g_notified[0] == ck);                                 /* {ck, 0, 0} */
    CHECK(g_notified[1] == (ck | (1ULL << 60) | (1ULL << 61))); /* {ck, 1, 1} */
    CHECK(__atomic_load_n(&p.cr_errors, __ATOMIC_SEQ_CST) == 0);

    /* a second transfer of <= 2 MiB cannot be sent (§3.3) */
    CHECK(os_transport_send(g_handle, &ji, &lsrc, &rdst, 4096, sk + 1, ck + 1, &send_sync, &st) == ERR32);
    CHECK(send_sync == NULL);
    /* 2 WRITE + 2 SEND_IMM local CRs, 2 SEND_WITH_IMM receive CRs */
    CHECK(wait_counter(&p.crs, 6, 2000) == 6);
    CHECK(__atomic_load_n(&p.wake_errors, __ATOMIC_SEQ_CST) == 0);

    {
        void (*lb_reset)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "urma_loopback_reset");
        int (*lb_fail_cr)(uint64_t, uint32_t) =
            (int (*)(uint64_t, uint32_t))dlsym(RTLD_DEFAULT, "urma_loopback_fail_completion");
        if (lb_reset != NULL && lb_fail_cr != NULL) {
            /* §10 #7: the first CR (the WRITE of chunk 0) fails; the status is never read. */
            lb_reset();
            CHECK(lb_fail_cr(1, URMA_CR_REM_ACCESS_ABORT_ERR) == 0);
            g_nnotified = 0;
            CHECK(os_transport_recv(g_handle, &host, &dev, LEN, ck + 2, &recv_sync, notify_cb) == 0);
            CHECK(os_transport_send(g_handle, &ji, &lsrc, &rdst, LEN, sk + 2, ck + 2, &send_sync, &st) == 0);
            CHECK(wait_and_free_sync_timeout(g_handle, send_sync, 10000, &st) == 0);
            CHECK(st == URMA_SUCCESS);
            CHECK(wait_and_free_sync_timeout(g_handle, recv_sync, 10000, &st) == 0);
            CHECK(g_nnotified == 2);
            CHECK(__atomic_load_n(&p.cr_errors, __ATOMIC_SEQ_CST) == 1);

            /* §4.3: both SEND_WITH_IMM arrive before the recv exists: dropped, recv times out. */
            sleep_ms(20); /* let the last SEND_IMM local CR drain */
            __atomic_store_n(&p.wake_errors, 0, __ATOMIC_SEQ_CST);
            CHECK(os_transport_send(g_handle, &ji, &lsrc, &rdst, LEN, sk + 3, ck + 3, &send_sync, &st) == 0);
            CHECK(wait_and_free_sync_timeout(g_handle, send_sync, 10000, &st) == 0);
            CHECK(wait_counter(&p.wake_errors, 2, 2000) == 2);
            CHECK(os_transport_recv(g_handle, &host, &dev, LEN, ck + 3, &recv_sync, notify_cb) == 0);
            CHECK(wait_and_free_sync_timeout(g_handle, recv_sync, 50, &st) == 1);
            CHECK(st == URMA_SUCCESS);
            printf("loopback_smoke: defect scenarios (error CR ignored, early wake-up dropped) checked\n");
        }
    }

    sleep_ms(20); /* drain the last SEND_IMM local CR before stopping the poller */
    ufx_poller_stop(&p);
    CHECK(os_transport_destroy(g_handle) == 0);

    CHECK(urma_unimport_jetty(tjetty) == URMA_SUCCESS);
    CHECK(urma_unimport_seg(dst_imported) == URMA_SUCCESS);
    CHECK(urma_unregister_seg(src_seg) == URMA_SUCCESS);
    CHECK(urma_unregister_seg(dst_seg) == URMA_SUCCESS);
    CHECK(ufx_delete_jetty(tx) == URMA_SUCCESS);
    CHECK(ufx_delete_jetty(rx) == URMA_SUCCESS);
    CHECK(urma_delete_jfc(jfc) == URMA_SUCCESS);
    CHECK(urma_delete_context(ctx) == URMA_SUCCESS);
    CHECK(urma_uninit() == URMA_SUCCESS);
    free(src);
    free(dst);

    if (g_failures != 0) {
        fprintf(stderr, "loopback_smoke: %d check(s) failed\n", g_failures);
        return 1;
    }
    printf("loopback_smoke: 2 MiB + 1 transferred, all checks passed\n");
    return 0;
}
