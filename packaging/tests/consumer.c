/*
 * consumer.c - install test of mlcachedirect-devel (`make rpm-test`).
 *
 * A plain C program of the kind a user of libos_transport.so.1 writes, built only with the
 * installed files:  cc consumer.c $(pkg-config --cflags --libs os-transport)
 * It uses nothing but os_transport.h and the URMA API: it creates a context, a JFC, a JFS (sender),
 * a jetty (receiver), registers a source and a destination buffer, imports the destination segment
 * and the jetty as the remote side (one process, loopback device), then moves LEN bytes with
 * os_transport_recv() + os_transport_send(), polling the JFC on its own thread and handing every
 * completion to os_transport_wake_up_task(), and checks every byte that arrived.
 *
 * Exit status 0 = the bytes arrived intact, both requests succeeded and every chunk was notified.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <os_transport.h>

/* 2 MiB + 1 byte: two chunks, the second one a single byte. */
#define LEN ((uint32_t)DEFAULT_CHUNK_SIZE + 1u)
#define SERVER_KEY 7u
#define CLIENT_KEY 8u
#define DEVICE_NAME "loopback0"

static atomic_int g_stop;
static atomic_int g_chunks;
static atomic_long g_crs;

#define CHECK(cond, ...)                                                                            \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "consumer: FAIL %s:%d: ", __FILE__, __LINE__);                         \
            fprintf(stderr, __VA_ARGS__);                                                           \
            fputc('\n', stderr);                                                                    \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

struct poller {
    urma_jfc_t *jfc;
    void *handle;
};

/* The library has no poller: the application polls its JFC and forwards each CR. */
static void *poll_loop(void *arg)
{
    struct poller *p = arg;
    urma_cr_t cr[16];
    while (!atomic_load(&g_stop)) {
        int n = urma_poll_jfc(p->jfc, 16, cr);
        if (n < 0) {
            fprintf(stderr, "consumer: urma_poll_jfc returned %d\n", n);
            break;
        }
        for (int i = 0; i < n; i++) {
            if (cr[i].status != URMA_CR_SUCCESS) {
                fprintf(stderr, "consumer: CR status %u\n", (unsigned)cr[i].status);
            }
            atomic_fetch_add(&g_crs, 1);
            (void)os_transport_wake_up_task(p->handle, &cr[i]);
        }
        if (n == 0) {
            sched_yield();
        }
    }
    return NULL;
}

static int on_chunk(void *user_data)
{
    os_transport_user_data_t *ud = user_data;
    CHECK(ud->bs.request_id == CLIENT_KEY, "notify for request %llu",
          (unsigned long long)ud->bs.request_id);
    atomic_fetch_add(&g_chunks, 1);
    return 0;
}

static void on_log(int level, const char *msg)
{
    if ((level & 0xFF) == 2) { /* errors only */
        fprintf(stderr, "consumer: library: %s", msg);
    }
}

static const char *where(const void *sym)
{
    Dl_info info;
    return dladdr(sym, &info) && info.dli_fname ? info.dli_fname : "?";
}

static urma_target_seg_t *register_buffer(urma_context_t *ctx, void *buf, uint64_t len)
{
    urma_seg_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.va = (uint64_t)(uintptr_t)buf;
    cfg.len = len;
    cfg.flag.bs.token_policy = URMA_TOKEN_NONE;
    cfg.flag.bs.cacheable = URMA_NON_CACHEABLE;
    cfg.flag.bs.access = URMA_ACCESS_READ | URMA_ACCESS_WRITE;
    return urma_register_seg(ctx, &cfg);
}

int main(void)
{
    printf("consumer: os_transport.h %d, libos_transport from %s, liburma from %s\n",
           OS_TRANSPORT_VERSION, where((void *)os_transport_init), where((void *)urma_init));

    CHECK(os_transport_log_reg(0, on_log) == 0, "os_transport_log_reg");
    CHECK(urma_init(NULL) == URMA_SUCCESS, "urma_init");

    /* The loopback device, or the first device there is. */
    int ndev = 0;
    urma_device_t **devs = urma_get_device_list(&ndev);
    CHECK(devs != NULL && ndev > 0, "no URMA device (urma_get_device_list: %d)", ndev);
    urma_device_t *dev = devs[0];
    for (int i = 0; i < ndev; i++) {
        if (strcmp(devs[i]->name, DEVICE_NAME) == 0) {
            dev = devs[i];
        }
    }
    printf("consumer: URMA device %s\n", dev->name);
    urma_context_t *ctx = urma_create_context(dev, 0);
    CHECK(ctx != NULL, "urma_create_context");

    urma_jfc_cfg_t jfc_cfg;
    memset(&jfc_cfg, 0, sizeof(jfc_cfg));
    jfc_cfg.depth = 1024;
    urma_jfc_t *jfc = urma_create_jfc(ctx, &jfc_cfg);
    CHECK(jfc != NULL, "urma_create_jfc");

    /* Sender queue. */
    urma_jfs_cfg_t jfs_cfg;
    memset(&jfs_cfg, 0, sizeof(jfs_cfg));
    jfs_cfg.depth = 256;
    jfs_cfg.trans_mode = URMA_TM_RM;
    jfs_cfg.priority = 0;
    jfs_cfg.max_sge = 1;
    jfs_cfg.rnr_retry = URMA_TYPICAL_RNR_RETRY;
    jfs_cfg.err_timeout = URMA_TYPICAL_ERR_TIMEOUT;
    jfs_cfg.jfc = jfc;
    urma_jfs_t *jfs = urma_create_jfs(ctx, &jfs_cfg);
    CHECK(jfs != NULL, "urma_create_jfs");

    /* Receiver: a jetty with its own JFR. */
    urma_jfr_cfg_t jfr_cfg;
    memset(&jfr_cfg, 0, sizeof(jfr_cfg));
    jfr_cfg.depth = 256;
    jfr_cfg.trans_mode = URMA_TM_RM;
    jfr_cfg.max_sge = 1;
    jfr_cfg.min_rnr_timer = URMA_TYPICAL_MIN_RNR_TIMER;
    jfr_cfg.jfc = jfc;
    urma_jetty_cfg_t jetty_cfg;
    memset(&jetty_cfg, 0, sizeof(jetty_cfg));
    jetty_cfg.flag.bs.share_jfr = URMA_NO_SHARE_JFR;
    jetty_cfg.jfs_cfg = jfs_cfg;
    jetty_cfg.jfr_cfg = &jfr_cfg;
    urma_jetty_t *jetty = urma_create_jetty(ctx, &jetty_cfg);
    CHECK(jetty != NULL, "urma_create_jetty");

    /* The receiver's jetty as the sender's target. */
    urma_token_t token = {.token = 0};
    urma_rjetty_t rjetty;
    memset(&rjetty, 0, sizeof(rjetty));
    rjetty.jetty_id = jetty->jetty_id;
    rjetty.trans_mode = URMA_TM_RM;
    rjetty.type = URMA_JETTY;
    rjetty.tp_type = URMA_RTP;
    urma_target_jetty_t *tjetty = urma_import_jetty(ctx, &rjetty, &token);
    CHECK(tjetty != NULL, "urma_import_jetty");

    /* Buffers: the source, and the destination seen locally and (imported) as the remote. */
    uint8_t *src = malloc(LEN);
    uint8_t *dst = malloc(LEN);
    CHECK(src != NULL && dst != NULL, "malloc");
    for (uint32_t i = 0; i < LEN; i++) {
        src[i] = (uint8_t)(i * 131u + 7u + (i >> 16));
    }
    memset(dst, 0, LEN);
    urma_target_seg_t *src_seg = register_buffer(ctx, src, LEN);
    urma_target_seg_t *dst_seg = register_buffer(ctx, dst, LEN);
    CHECK(src_seg != NULL && dst_seg != NULL, "urma_register_seg");
    urma_import_seg_flag_t imp;
    memset(&imp, 0, sizeof(imp));
    imp.bs.cacheable = URMA_NON_CACHEABLE;
    imp.bs.access = URMA_ACCESS_READ | URMA_ACCESS_WRITE;
    imp.bs.mapping = URMA_SEG_NOMAP;
    urma_target_seg_t *remote_seg =
        urma_import_seg(ctx, &dst_seg->seg, &token, (uint64_t)(uintptr_t)dst, imp);
    CHECK(remote_seg != NULL, "urma_import_seg");

    os_transport_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.worker_thread_num = 2;
    cfg.jfc = jfc;
    cfg.recv_queue_capacity = 16;
    void *handle = NULL;
    CHECK(os_transport_init(ctx, &cfg, &handle) == 0 && handle != NULL, "os_transport_init");
    CHECK(os_transport_reg_jfc(NULL, jfc, handle) == 0, "os_transport_reg_jfc");

    struct poller p = {.jfc = jfc, .handle = handle};
    pthread_t poller;
    CHECK(pthread_create(&poller, NULL, poll_loop, &p) == 0, "pthread_create");

    /* host_src: where the data comes from (the sender's buffer); device_dst->dst: where it lands. */
    ost_buffer_info_t host_src = {.addr = (uint64_t)(uintptr_t)src, .tseg = src_seg};
    ost_device_info_t device_dst = {.jfr = NULL, .jetty = jetty, .dst = dst};
    task_sync_t *recv_sync = NULL;
    CHECK(os_transport_recv(handle, &host_src, &device_dst, LEN, CLIENT_KEY, &recv_sync, on_chunk) == 0,
          "os_transport_recv");

    urma_jetty_info_t jetty_info = {.jfs = jfs, .jetty = NULL, .tjetty = tjetty, .jetty_mode = JETTY_MODE_SIMPLEX};
    ost_buffer_info_t local_src = {.addr = (uint64_t)(uintptr_t)src, .tseg = src_seg};
    ost_buffer_info_t remote_dst = {.addr = (uint64_t)(uintptr_t)dst, .tseg = remote_seg};
    task_sync_t *send_sync = NULL;
    urma_status_t st = URMA_SUCCESS;
    CHECK(os_transport_send(handle, &jetty_info, &local_src, &remote_dst, LEN, SERVER_KEY, CLIENT_KEY,
                            &send_sync, &st) == 0,
          "os_transport_send (urma status %d)", st);

    urma_status_t send_st = URMA_FAIL, recv_st = URMA_FAIL;
    uint32_t send_rc = wait_and_free_sync_timeout(handle, send_sync, 20000, &send_st);
    uint32_t recv_rc = wait_and_free_sync_timeout(handle, recv_sync, 20000, &recv_st);
    CHECK(send_rc == 0, "send wait returned %u (urma status %d)", send_rc, send_st);
    CHECK(recv_rc == 0, "recv wait returned %u (urma status %d)", recv_rc, recv_st);

    atomic_store(&g_stop, 1);
    pthread_join(poller, NULL);
    CHECK(atomic_load(&g_chunks) == 2, "%d chunks notified, expected 2", atomic_load(&g_chunks));
    for (uint32_t i = 0; i < LEN; i++) {
        CHECK(dst[i] == src[i], "byte %u differs: %u != %u", i, dst[i], src[i]);
    }
    printf("consumer: sent and received %u bytes in %d chunks, all bytes equal (%ld CRs polled)\n", LEN,
           atomic_load(&g_chunks), atomic_load(&g_crs));

    CHECK(os_transport_destroy(handle) == 0, "os_transport_destroy");
    CHECK(urma_unimport_seg(remote_seg) == URMA_SUCCESS, "urma_unimport_seg");
    CHECK(urma_unregister_seg(dst_seg) == URMA_SUCCESS, "urma_unregister_seg dst");
    CHECK(urma_unregister_seg(src_seg) == URMA_SUCCESS, "urma_unregister_seg src");
    CHECK(urma_unimport_jetty(tjetty) == URMA_SUCCESS, "urma_unimport_jetty");
    CHECK(urma_delete_jetty(jetty) == URMA_SUCCESS, "urma_delete_jetty");
    CHECK(urma_delete_jfs(jfs) == URMA_SUCCESS, "urma_delete_jfs");
    CHECK(urma_delete_jfc(jfc) == URMA_SUCCESS, "urma_delete_jfc");
    CHECK(urma_delete_context(ctx) == URMA_SUCCESS, "urma_delete_context");
    urma_free_device_list(devs);
    CHECK(urma_uninit() == URMA_SUCCESS, "urma_uninit");
    free(src);
    free(dst);
    printf("consumer: OK\n");
    return 0;
}
