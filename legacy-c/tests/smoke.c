/*
 * smoke.c - C-level smoke test of the legacy reference library against the recording URMA fake
 * (tests/fake_urma.c, a test double). Checks the exact WR sequence of a 2 MiB + 1 send (N = 2,
 * docs/contract.md §3.3), a 2 MiB + 1 recv with out-of-order completions (§4), and a few
 * defects observable through the API. Completions are built by hand and fed to wake_up_task.
 *
 * Scenarios that leak by design run only with SMOKE_LEAKY=1 (use ASAN_OPTIONS=detect_leaks=0).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_urma.h"
#include "os_transport.h"

#define ERR32 ((uint32_t)-1)
#define MIB (1024U * 1024U)

static int g_failures;
#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "smoke.c:%d: CHECK failed: %s\n", __LINE__, #cond);       \
            g_failures++;                                                             \
        }                                                                             \
    } while (0)
#define CHECK_EQ(a, b)                                                                                       \
    do {                                                                                                     \
        unsigned long long va_ = (unsigned long long)(a), vb_ = (unsigned long long)(b);                      \
        if (va_ != vb_) {                                                                                    \
            fprintf(stderr, "smoke.c:%d: CHECK_EQ failed: %s = 0x%llx, expected %s = 0x%llx\n", __LINE__, #a, \
                    va_, #b, vb_);                                                                           \
            g_failures++;                                                                                    \
        }                                                                                                    \
    } while (0)

/* ---- log capture */
static int g_levels[4096];
static int g_nlevels;
static char g_last_msg[2048];
static void log_cb(int level, const char *msg)
{
    if (g_nlevels < 4096) {
        g_levels[__atomic_fetch_add(&g_nlevels, 1, __ATOMIC_SEQ_CST)] = level;
    }
    snprintf(g_last_msg, sizeof(g_last_msg), "%s", msg);
}
static int count_level(int level)
{
    int i, n = 0;
    for (i = 0; i < g_nlevels && i < 4096; i++) {
        n += g_levels[i] == level;
    }
    return n;
}

/* ---- notify callback capture: a value is stored before the count that publishes it grows
 * (wait_notified reads g_notified[i] once the count passes i) */
static uint64_t g_notified[16];
static int g_nnotified;
static int g_notify_ret;
static pthread_mutex_t g_notify_lock = PTHREAD_MUTEX_INITIALIZER;
static int notify_cb(void *ud)
{
    int i;
    pthread_mutex_lock(&g_notify_lock);
    i = __atomic_load_n(&g_nnotified, __ATOMIC_RELAXED);
    g_notified[i & 15] = *(uint64_t *)ud;
    __atomic_store_n(&g_nnotified, i + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_notify_lock);
    return g_notify_ret;
}
static int wait_notified(int n)
{
    int i;
    for (i = 0; i < 2000 && __atomic_load_n(&g_nnotified, __ATOMIC_SEQ_CST) < n; i++) {
        fake_urma_wait_count(1 << 30, 1);
    }
    return __atomic_load_n(&g_nnotified, __ATOMIC_SEQ_CST);
}

static urma_cr_t send_cr(uint64_t user_ctx)
{
    urma_cr_t cr;
    memset(&cr, 0, sizeof(cr));
    cr.status = URMA_CR_SUCCESS;
    cr.user_ctx = user_ctx;
    cr.flag.bs.s_r = 0;
    return cr;
}

static urma_cr_t recv_cr(uint64_t imm, uint32_t opcode)
{
    urma_cr_t cr;
    memset(&cr, 0, sizeof(cr));
    cr.status = URMA_CR_SUCCESS;
    cr.opcode = opcode;
    cr.flag.bs.s_r = 1;
    cr.imm_data = imm;
    return cr;
}

/* fake queue objects: only their addresses matter to the fake */
static char g_jfs_obj[256], g_jetty_obj[512], g_tjetty_obj[64], g_jfr_obj[512];
static char g_lseg_obj[88], g_rseg_obj[88];

/* File backend (§8): child process with OST_LOG_FILE_PATH set and no callback. */
static void check_file_backend(void)
{
    char path[] = "/tmp/ost_smoke_log_XXXXXX";
    char buf[4096];
    int fd = mkstemp(path);
    pid_t pid;
    ssize_t n;
    int status = 0;

    CHECK(fd >= 0);
    close(fd);
    pid = fork();
    if (pid == 0) {
        void *hh = NULL;
        setenv("OST_LOG_FILE_PATH", path, 1);
        (void)os_transport_init(NULL, NULL, &hh); /* INFO + ERROR */
        _exit(0);
    }
    waitpid(pid, &status, 0);
    fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    unlink(path);
    CHECK(n > 0);
    buf[n > 0 ? n : 0] = '\0';
    /* "YYYY-MM-DDTHH:MM:SS.mmm [INFO] [pid=P tid=T] [ost:os_transport.c:L] [PIPLN RH2D] ..." */
    CHECK(n > 24 && buf[4] == '-' && buf[10] == 'T' && buf[19] == '.' && buf[23] == ' ');
    CHECK(strncmp(buf + 24, "[INFO] [pid=", 12) == 0);
    CHECK(strstr(buf, "] [ost:os_transport.c:") != NULL);
    CHECK(strstr(buf, "] [PIPLN RH2D] os_transport_init") != NULL);
    CHECK(strstr(buf, "\n") != NULL && strstr(buf, " [ERROR] [pid=") != NULL);
}

/* Runs fn in a child; true when the child died of SIGABRT after printing the legacy abort message. */
static int child_aborts_with_message(void (*fn)(void *), void *arg)
{
    int fds[2];
    char buf[1024];
    ssize_t n;
    int status = 0;
    pid_t pid;

    if (pipe(fds) != 0) {
        return 0;
    }
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    n = read(fds[0], buf, sizeof(buf) - 1);
    close(fds[0]);
    waitpid(pid, &status, 0);
    buf[n > 0 ? n : 0] = '\0';
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
           strstr(buf, "libos_transport (legacy C reference): ") != NULL &&
           strstr(buf, "is not the live instance") != NULL;
}

static void *g_stale_handle;
static task_sync_t *g_orphan_sync;
static void wake_write_cr_after_destroy(void *unused)
{
    urma_cr_t cr = send_cr(0x000000123456789AULL);
    (void)unused;
    (void)os_transport_wake_up_task(g_stale_handle, &cr);
}
static void timed_wait_after_destroy(void *unused)
{
    urma_status_t s;
    (void)unused;
    (void)wait_and_free_sync_timeout(g_stale_handle, g_orphan_sync, 0, &s);
}

int main(void)
{
    const uint64_t sk = 0x123456789AULL, ck = 0xABCDE12345ULL, enc_ck = 0x0ABCDE0000012345ULL;
    os_transport_cfg_t cfg;
    void *h = NULL, *h2 = (void *)1;
    urma_jetty_info_t ji;
    ost_buffer_info_t lsrc, rdst, host;
    ost_device_info_t dev;
    task_sync_t *sync = NULL;
    urma_status_t st = 12345;
    fake_wr_t w;
    urma_cr_t cr;
    int base;

    check_file_backend();
    CHECK_EQ(sizeof(urma_cr_t), 80);
    CHECK_EQ(sizeof(urma_jfs_wr_t), 80);
    CHECK(os_transport_log_reg(-1, NULL) == -1);
    CHECK_EQ(os_transport_log_reg(-1, log_cb), 0);

    memset(&cfg, 0, sizeof(cfg));
    cfg.worker_thread_num = 2;
    cfg.recv_queue_capacity = 1;
    CHECK_EQ(os_transport_init(NULL, &cfg, &h), 0);
    CHECK(h != NULL);
    CHECK_EQ(count_level(0xFF00), 2); /* INFO: init + reg_jfc */
    CHECK_EQ(os_transport_init(NULL, &cfg, &h2), ERR32);
    CHECK(h2 == NULL);

    memset(&ji, 0, sizeof(ji));
    ji.jfs = (urma_jfs_t *)g_jfs_obj;
    ji.tjetty = (urma_target_jetty_t *)g_tjetty_obj;
    lsrc.addr = 0x10000000ULL;
    lsrc.tseg = (urma_target_seg_t *)g_lseg_obj;
    rdst.addr = 0x70000000ULL;
    rdst.tseg = (urma_target_seg_t *)g_rseg_obj;

    /* ---- send of <= 2 MiB is rejected (§3.3 N = 1) */
    fake_urma_reset();
    CHECK_EQ(os_transport_send(h, &ji, &lsrc, &rdst, 2 * MIB, sk, ck, &sync, &st), ERR32);
    CHECK(sync == NULL);
    CHECK_EQ(st, URMA_SUCCESS);
    CHECK_EQ(fake_urma_count(), 0);
    CHECK(strstr(g_last_msg, "[PIPLN RH2D] chunk_num must be >= 2") != NULL);
    CHECK(strncmp(g_last_msg, "[ost:os_transport.c:", 20) == 0);
    /* > 7 chunks and oversized keys */
    CHECK_EQ(os_transport_send(h, &ji, &lsrc, &rdst, 7 * 2 * MIB + 1, sk, ck, &sync, &st), ERR32);
    CHECK_EQ(os_transport_send(h, &ji, &lsrc, &rdst, 3 * MIB, 1ULL << 40, ck, &sync, &st), ERR32);

    /* ---- N = 2 send: the exact WR sequence of §3.3 */
    fake_urma_reset();
    CHECK_EQ(os_transport_send(h, &ji, &lsrc, &rdst, 2 * MIB + 1, sk, ck, &sync, &st), 0);
    CHECK(sync != NULL);
    CHECK_EQ(fake_urma_count(), 1);
    CHECK_EQ(fake_urma_get(0, &w), 0);
    CHECK_EQ(w.via, FAKE_VIA_JFS);
    CHECK(w.queue == g_jfs_obj && w.tjetty == g_tjetty_obj);
    CHECK_EQ(w.opcode, URMA_OPC_WRITE);
    CHECK_EQ(w.flag, 0x20);
    CHECK_EQ(w.user_ctx, 0x000000123456789AULL);
    CHECK_EQ(w.src_addr, lsrc.addr);
    CHECK_EQ(w.dst_addr, rdst.addr);
    CHECK_EQ(w.src_len, 2 * MIB);
    CHECK(w.src_tseg == g_lseg_obj && w.dst_tseg == g_rseg_obj);
    CHECK_EQ(w.imm_or_notify, 0);
    CHECK(!w.has_next);

    cr = send_cr(w.user_ctx);
    CHECK_EQ(os_transport_wake_up_task(h, &cr), 0);
    CHECK_EQ(fake_urma_wait_count(3, 2000), 3);
    CHECK_EQ(fake_urma_get(1, &w), 0);
    CHECK_EQ(w.opcode, URMA_OPC_SEND_IMM);
    CHECK_EQ(w.user_ctx, 0xF00000123456789AULL);
    CHECK_EQ(w.imm_or_notify, enc_ck);
    CHECK_EQ(w.num_src, 0);
    CHECK(w.send_tseg == NULL);
    CHECK_EQ(w.flag, 0x20);
    CHECK_EQ(fake_urma_get(2, &w), 0);
    CHECK_EQ(w.opcode, URMA_OPC_WRITE);
    CHECK_EQ(w.user_ctx, 0x300000123456789AULL);
    CHECK_EQ(w.src_addr, lsrc.addr + 2 * MIB);
    CHECK_EQ(w.dst_addr, rdst.addr + 2 * MIB);
    CHECK_EQ(w.src_len, 1);

    cr = send_cr(0xF00000123456789AULL); /* local completion of the SEND_IMM: ignored */
    CHECK_EQ(os_transport_wake_up_task(h, &cr), 0);
    cr = send_cr(w.user_ctx);
    cr.status = URMA_CR_WR_FLUSH_ERR; /* status is ignored (§10 #7) */
    CHECK_EQ(os_transport_wake_up_task(h, &cr), 0);
    CHECK_EQ(fake_urma_wait_count(4, 2000), 4);
    CHECK_EQ(fake_urma_get(3, &w), 0);
    CHECK_EQ(w.opcode, URMA_OPC_SEND_IMM);
    CHECK_EQ(w.user_ctx, 0xF00000123456789AULL);
    CHECK_EQ(w.imm_or_notify, 0x3ABCDE0000012345ULL);
    st = 12345;
    CHECK_EQ(wait_and_free_sync(h, sync, &st), 0);
    CHECK_EQ(st, URMA_SUCCESS);
    /* a CR for the finished request finds no context */
    cr = send_cr(0x300000123456789AULL);
    CHECK_EQ(os_transport_wake_up_task(h, &cr), -1);

    /* ---- N = 7 send: 14 WRs, each step triggered by the WRITE completion of the same k (§3.3) */
    {
        int k, warns = count_level(0xFF01);
        fake_urma_reset();
        CHECK_EQ(os_transport_send(h, &ji, &lsrc, &rdst, 7 * 2 * MIB, sk, ck, &sync, &st), 0);
        CHECK(count_level(0xFF01) > warns); /* the bogus "chunk_id ... truncated" warning (§10 #18) */
        for (k = 0; k < 7; k++) {
            uint64_t wctx;
            CHECK_EQ(fake_urma_wait_count(1 + 2 * k, 2000), 1 + 2 * k);
            CHECK_EQ(fake_urma_get(2 * k, &w), 0);
            CHECK_EQ(w.opcode, URMA_OPC_WRITE);
            wctx = sk | ((uint64_t)(k == 6) << 60) | ((uint64_t)k << 61);
            CHECK_EQ(w.user_ctx, wctx);
            CHECK_EQ(w.src_addr, lsrc.addr + (uint64_t)k * 2 * MIB);
            CHECK_EQ(w.src_len, 2 * MIB);
            cr = send_cr(wctx);
            CHECK_EQ(os_transport_wake_up_task(h, &cr), 0);
            CHECK_EQ(fake_urma_wait_count(2 + 2 * k + (k < 6), 2000), 2 + 2 * k + (k < 6));
            CHECK_EQ(fake_urma_get(2 * k + 1, &w), 0);
            CHECK_EQ(w.opcode, URMA_OPC_SEND_IMM);
            CHECK_EQ(w.user_ctx, sk | ((uint64_t)(k >= 5) << 60) | (7ULL << 61));
            CHECK_EQ(w.imm_or_notify, enc_ck | ((uint64_t)(k == 6) << 60) | ((uint64_t)k << 61));
        }
        CHECK_EQ(wait_and_free_sync(h, sync, &st), 0);
        CHECK_EQ(fake_urma_count(), 14);
    }

    /* ---- N = 2 recv on a jetty, completions out of order */
    fake_urma_reset();
    host.addr = 0x20000000ULL;
    host.tseg = (urma_target_seg_t *)g_lseg_obj;
    dev.jfr = NULL;
    dev.jetty = (urma_jetty_t *)g_jetty_obj;
    dev.dst = (void *)0x30000000ULL;
    g_nnotified = 0;
    g_notify_ret = 0;
    CHECK_EQ(os_transport_recv(h, &host, &dev, 2 * MIB + 1, ck, &sync, notify_cb), 0);
    CHECK(sync != NULL);
    CHECK_EQ(fake_urma_count(), 4); /* prefill: capacity 1 x 4 */
    CHECK_EQ(fake_urma_get(3, &w), 0);
    CHECK_EQ(w.via, FAKE_VIA_JETTY_RECV);
    CHECK_EQ(w.user_ctx, ck);
    CHECK(w.src_tseg == g_lseg_obj && w.src_addr == 0 && w.src_len == 0 && w.num_src == 1);
    cr = recv_cr(0x3ABCDE0000012345ULL, URMA_CR_OPC_SEND_WITH_IMM);
    CHECK_EQ(os_transport_wake_up_task(h, &cr), 0);
    CHECK_EQ(wait_notified(1), 1);
    CHECK_EQ(g_notified[0], ck | (1ULL << 60) | (1ULL << 61));
    cr = recv_cr(0x3ABCDE0000012345ULL, URMA_CR_OPC_WRITE_WITH_IMM); /* unknown opcode: -1, no re-post */
    CHECK_EQ(os_transport_wake_up_task(h, &cr), -1);
    cr = recv_cr(enc_ck, URMA_CR_OPC_SEND_WITH_IMM);
    CHECK_EQ(os_transport_wake_up_task(h, &cr), 0);
    CHECK_EQ(wait_notified(2), 2);
    CHECK_EQ(g_notified[1], ck);
    CHECK_EQ(wait_and_free_sync_timeout(h, sync, 5000, &st), 0);
    CHECK_EQ(fake_urma_count(), 6); /* two re-posts */
    CHECK_EQ(fake_urma_get(5, &w), 0);
    CHECK_EQ(w.via, FAKE_VIA_JETTY_RECV);
    CHECK(w.queue == g_jetty_obj && w.user_ctx == 0 && w.src_tseg == NULL);
    /* early wake-up (no recv registered): dropped, but its recv WR is replenished */
    base = fake_urma_count();
    cr = recv_cr(enc_ck, URMA_CR_OPC_SEND_WITH_IMM);
    CHECK_EQ(os_transport_wake_up_task(h, &cr), -1);
    CHECK_EQ(fake_urma_count(), base + 1);
    /* second recv on the same jetty: no prefill; N = 1 is accepted */
    CHECK_EQ(os_transport_recv(h, &host, &dev, 100, ck, &sync, notify_cb), 0);
    CHECK_EQ(fake_urma_count(), base + 1);
    cr = recv_cr(enc_ck | (1ULL << 60), URMA_CR_OPC_SEND_WITH_IMM);
    CHECK_EQ(os_transport_wake_up_task(h, &cr), 0);
    CHECK_EQ(wait_and_free_sync(h, sync, &st), 0);

    /* ---- first-chunk failure: ERR with a sync; wait returns ERR with SUCCESS status (§6.5) */
    fake_urma_reset();
    fake_urma_fail_send(URMA_FAIL, 0);
    st = 0;
    CHECK_EQ(os_transport_send(h, &ji, &lsrc, &rdst, 3 * MIB, sk, ck, &sync, &st), ERR32);
    CHECK(sync != NULL);
    CHECK_EQ(st, URMA_FAIL);
    CHECK_EQ(wait_and_free_sync(h, sync, &st), ERR32);
    CHECK_EQ(st, URMA_SUCCESS);
    fake_urma_fail_send(0, 0);
    /* no queue at all: URMA_FAIL from the first post */
    ji.jfs = NULL;
    CHECK_EQ(os_transport_send(h, &ji, &lsrc, &rdst, 3 * MIB, sk, ck, &sync, &st), ERR32);
    CHECK_EQ(st, URMA_FAIL);
    CHECK_EQ(os_transport_cancel_tasks(h, &sync, sk), 0);
    CHECK(sync == NULL);
    /* jetty fallback */
    ji.jetty = (urma_jetty_t *)g_jetty_obj;
    fake_urma_reset();
    CHECK_EQ(os_transport_send(h, &ji, &lsrc, &rdst, 3 * MIB, sk, ck, &sync, &st), 0);
    CHECK_EQ(fake_urma_get(0, &w), 0);
    CHECK_EQ(w.via, FAKE_VIA_JETTY_SEND);
    /* ---- timeout: nothing fed back */
    CHECK_EQ(wait_and_free_sync_timeout(h, sync, 20, &st), 1);
    CHECK_EQ(st, URMA_SUCCESS);
    cr = send_cr(0x000000123456789AULL);
    CHECK_EQ(os_transport_wake_up_task(h, &cr), -1); /* context gone after the cancel */

    /* ---- jfr-only recv: no prefill, re-post fails (jetty slot is still the old jetty though) */
    fake_urma_reset();
    dev.jetty = NULL;
    dev.jfr = (urma_jfr_t *)g_jfr_obj;
    CHECK_EQ(os_transport_recv(h, &host, &dev, 5 * MIB, 77, &sync, notify_cb), 0);
    /* the slot held g_jetty_obj, so NULL differs: prefill goes to the jfr this once */
    CHECK_EQ(fake_urma_count(), 4);
    CHECK_EQ(fake_urma_get(0, &w), 0);
    CHECK_EQ(w.via, FAKE_VIA_JFR);
    CHECK_EQ(os_transport_cancel_tasks(h, &sync, 77), 0);
    CHECK_EQ(os_transport_recv(h, &host, &dev, 5 * MIB, 78, &sync, notify_cb), 0);
    CHECK_EQ(fake_urma_count(), 4); /* slot is NULL now: never again */
    base = fake_urma_count();
    cr = recv_cr(78, URMA_CR_OPC_SEND_WITH_IMM);
    CHECK_EQ(os_transport_wake_up_task(h, &cr), 0); /* re-post fails (no jetty recorded) */
    CHECK_EQ(fake_urma_count(), base);
    CHECK_EQ(wait_notified(4), 4);
    CHECK_EQ(wait_and_free_sync_timeout(h, sync, 0, &st), 1);

    if (getenv("SMOKE_LEAKY") != NULL) {
        /* ---- callback failure: ERR, and the sync leaks by design (§10 #3) */
        dev.jetty = (urma_jetty_t *)g_jetty_obj;
        g_notify_ret = 5;
        CHECK_EQ(os_transport_recv(h, &host, &dev, 5 * MIB, 99, &sync, notify_cb), 0);
        cr = recv_cr(99 | (1ULL << 61), URMA_CR_OPC_SEND_WITH_IMM);
        CHECK_EQ(os_transport_wake_up_task(h, &cr), 0);
        CHECK_EQ(wait_and_free_sync(h, sync, &st), ERR32);
        CHECK_EQ(st, URMA_SUCCESS);
        CHECK(count_level(0xFF01) >= 1);
        /* ---- worker post failure: status recorded, ERR, leak */
        ji.jfs = (urma_jfs_t *)g_jfs_obj;
        fake_urma_reset();
        CHECK_EQ(os_transport_send(h, &ji, &lsrc, &rdst, 5 * MIB, 5, 6, &sync, &st), 0);
        fake_urma_fail_send(URMA_EAGAIN, 0);
        cr = send_cr(5);
        CHECK_EQ(os_transport_wake_up_task(h, &cr), 0);
        CHECK_EQ(wait_and_free_sync(h, sync, &st), ERR32);
        CHECK_EQ(st, URMA_EAGAIN);
        fake_urma_fail_send(0, 0);
    }

    /* ---- destroy leaves a pending sync behind; touching the dead handle aborts (README) */
    ji.jfs = (urma_jfs_t *)g_jfs_obj;
    fake_urma_fail_send(0, 0);
    CHECK_EQ(os_transport_send(h, &ji, &lsrc, &rdst, 3 * MIB, 4242, 4243, &g_orphan_sync, &st), 0);

    CHECK(count_level(0x01FF) > 0); /* DEBUG v1 */
    CHECK(count_level(0x02FF) > 0); /* DEBUG v2 */
    CHECK(count_level(0xFF02) > 0); /* ERROR */
    CHECK_EQ(os_transport_destroy(h), 0);
    CHECK_EQ(os_transport_destroy(h), ERR32); /* g_inited is clear: no dereference */
    CHECK_EQ(os_transport_send(h, &ji, &lsrc, &rdst, 3 * MIB, sk, ck, &sync, &st), ERR32);
    g_stale_handle = h;
    cr = send_cr(0xF00000123456789AULL);
    CHECK_EQ(os_transport_wake_up_task(h, &cr), 0); /* chunk_id 7: returns before touching the handle */
    CHECK(child_aborts_with_message(wake_write_cr_after_destroy, NULL));
    CHECK(child_aborts_with_message(timed_wait_after_destroy, NULL));

    /* worker_thread_num == 0: success without a handle */
    cfg.worker_thread_num = 0;
    h = (void *)1;
    CHECK_EQ(os_transport_init(NULL, &cfg, &h), 0);
    CHECK(h == NULL);
    CHECK_EQ(count_level(0xFF01) >= 1, 1);

    if (g_failures != 0) {
        fprintf(stderr, "smoke: %d check(s) failed\n", g_failures);
        return 1;
    }
    printf("smoke: all checks passed\n");
    return 0;
}
