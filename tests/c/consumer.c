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
 *
 * `consumer pattern GETS` runs the usage pattern of a real cache client instead (run_pattern below):
 * many gets whose receive syncs are never collected, on one JFC shared with the application's own
 * URMA work, and prints "consumer pattern ok: ...".
 *
 * `consumer install` is the install test of mlcachedirect-devel (run_install below, `make rpm-test`):
 * built only with the installed files, 2 MiB + 1 byte over the loopback device, "consumer: OK".
 *
 * The URMA set-up and the pollers are the C test programs' shared fixture (urma_fixture.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "os_transport.h"
#include "urma_fixture.h"

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

static void *g_handle;
static uint64_t g_notified[8];
static int g_nnotified;
static int g_log_lines;

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

/*
 * ---- The consumer pattern ------------------------------------------------------------------
 *
 * How a real cache client drives the library (run by `consumer pattern GETS`):
 *  - init with 64 workers, recv_queue_capacity 256 and urma_event_mode set, although it polls;
 *  - one thread busy-polls the one JFC shared by everything (8 CRs per poll, 1 us sleep when
 *    empty) and hands every CR to os_transport_wake_up_task, its own plain WRITE/READ work too:
 *    -1 means "not a pipeline completion", anything else "handled";
 *  - sends with jfs = NULL and a jetty (RM, on a shared JFR), receives on a shared JFR;
 *  - request ids come from one 40-bit counter shared by sends, receives and plain URMA work;
 *  - a get (object > 2 MiB, <= 14 MiB) is a recv plus the peer's send; the client learns that it
 *    succeeded from its notify_callback and never waits on nor cancels the receive sync;
 *  - some callbacks cancel their own request (cancel_tasks with a non-NULL sync), some block for a
 *    second; waits use short deadlines (0 included) and treat the sync as released on timeout;
 *  - a recv of more than 14 MiB is refused (the client then falls back).
 * Every get must be served (no refusal ever), every completion of the plain work must return -1,
 * and the memory growth per uncollected get (RSS) is printed and bounded.
 */
#define P_CHUNK (2U << 20)
#define P_MAX_LEN (14U << 20)
#define P_THREADS 4
#define P_PLAIN_LEN 4096U
#define P_ID_MASK ((1ULL << 40) - 1)

enum { M_UNCOLLECTED, M_CANCEL_IN_CB, M_BLOCK_IN_CB, M_WAIT_ZERO, M_WAIT_SHORT, M_WAIT_LATE, M_KEEP };

struct pget {
    uint32_t expect;       /* chunks */
    int mode;
    int seen;              /* callbacks so far (atomic) */
    int cb_done;           /* the special callback finished (atomic) */
    uint32_t cancel_ret;   /* what cancel_tasks returned inside the callback */
    task_sync_t *sync;     /* the receive sync (never collected in M_UNCOLLECTED) */
};

static struct {
    urma_jetty_t *tx;                    /* sender's jetty: library sends and plain work */
    urma_target_jetty_t *tj;             /* the receiver's jetty, imported */
    urma_jetty_t *rx;                    /* receiver's jetty, on the shared JFR */
    urma_jfr_t *jfr;
    urma_target_seg_t *src_seg, *dst_seg, *dst_imp;
    unsigned char *src, *dst;
    uint64_t next_id;                    /* the one 40-bit request id counter */
    uint64_t max_ids;
    struct pget *gets;                   /* by request id */
    unsigned char *plain;                /* by request id: 1 = id of plain URMA work */
    uint64_t plain_ctx;                  /* a pointer-valued user_ctx of plain work */
    long plain_posted, plain_crs, plain_bad, pipeline_crs;
    long ok_gets, refusals, kept_n, failures_in_cb, refusal_logs, blocked;
    int unblocked;
    task_sync_t *kept[64];
    uint64_t kept_id[64];
} P;

static uint64_t p_next_id(void)
{
    return __atomic_fetch_add(&P.next_id, 1, __ATOMIC_RELAXED) & P_ID_MASK;
}

static int p_is_plain(uint64_t user_ctx)
{
    return user_ctx == P.plain_ctx || (user_ctx < P.max_ids && P.plain[user_ctx] != 0);
}

static double p_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long p_rss_bytes(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2) {
            rss = 0;
        }
        fclose(f);
    }
    return rss * 4096L;
}

/* The poller's hand-over (tests/c/urma_fixture.h): every CR goes to the library, which
 * answers -1 for the application's own work. */
static int p_hand_over(ufx_poller_t *p, urma_cr_t *cr)
{
    int r = os_transport_wake_up_task(p->handle, cr);
    if (cr->flag.bs.s_r == 0 && p_is_plain(cr->user_ctx)) {
        __atomic_fetch_add(&P.plain_crs, 1, __ATOMIC_RELAXED);
        if (r != -1) {
            __atomic_fetch_add(&P.plain_bad, 1, __ATOMIC_RELAXED);
        }
    } else {
        __atomic_fetch_add(&P.pipeline_crs, 1, __ATOMIC_RELAXED);
    }
    return r;
}

static int p_notify(void *user_data)
{
    uint64_t ck = ((os_transport_user_data_t *)user_data)->user_ctx & P_ID_MASK;
    struct pget *g;
    if (ck >= P.max_ids) {
        return -1; /* not one of ours */
    }
    g = &P.gets[ck];
    if (__atomic_fetch_add(&g->seen, 1, __ATOMIC_ACQ_REL) == 0) {
        if (g->mode == M_CANCEL_IN_CB) {
            task_sync_t *s = __atomic_load_n(&g->sync, __ATOMIC_ACQUIRE);
            g->cancel_ret = os_transport_cancel_tasks(g_handle, &s, ck);
            if (g->cancel_ret != 0 || s != NULL) {
                __atomic_fetch_add(&P.failures_in_cb, 1, __ATOMIC_RELAXED);
            }
            __atomic_store_n(&g->cb_done, 1, __ATOMIC_RELEASE);
        } else if (g->mode == M_BLOCK_IN_CB) {
            const struct timespec one_s = { 1, 0 };
            nanosleep(&one_s, NULL);
            __atomic_fetch_add(&P.unblocked, 1, __ATOMIC_RELEASE);
        }
    }
    return 0;
}

static void p_log(int level, const char *msg)
{
    (void)level;
    if (msg != NULL && (strstr(msg, "refused") != NULL || strstr(msg, "in flight") != NULL)) {
        __atomic_fetch_add(&P.refusal_logs, 1, __ATOMIC_RELAXED);
    }
}

/* Waits (yielding) until *flag >= want or `secs` passed; returns whether it got there. */
static int p_await(int *flag, int want, double secs)
{
    double end = p_now() + secs;
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < want) {
        if (p_now() > end) {
            return 0;
        }
        sched_yield();
    }
    return 1;
}

/* The application's own URMA work on the pipeline's jetty: a WRITE or a READ, its user_ctx an
 * id from the shared counter or a pointer. */
static void p_plain(unsigned seq)
{
    urma_jfs_wr_t wr, *bad = NULL;
    urma_sge_t l, r;
    uint64_t id = 0;
    memset(&wr, 0, sizeof(wr));
    if (seq & 2) {
        wr.user_ctx = P.plain_ctx;
    } else {
        id = p_next_id();
        P.plain[id] = 1;
        wr.user_ctx = id;
    }
    l.addr = (uint64_t)(uintptr_t)P.src;
    l.len = P_PLAIN_LEN;
    l.tseg = P.src_seg;
    r.addr = (uint64_t)(uintptr_t)P.dst;
    r.len = P_PLAIN_LEN;
    r.tseg = P.dst_imp;
    wr.opcode = (seq & 1) ? URMA_OPC_READ : URMA_OPC_WRITE;
    wr.flag.bs.complete_enable = 1;
    wr.tjetty = P.tj;
    wr.rw.src.sge = (seq & 1) ? &r : &l;
    wr.rw.src.num_sge = 1;
    wr.rw.dst.sge = (seq & 1) ? &l : &r;
    wr.rw.dst.num_sge = 1;
    CHECK(urma_post_jetty_send_wr(P.tx, &wr, &bad) == URMA_SUCCESS);
    __atomic_fetch_add(&P.plain_posted, 1, __ATOMIC_RELAXED);
}

/* What get number k does besides the plain uncollected get. */
static int p_mode(long k)
{
    return k % 25000 == 321   ? M_BLOCK_IN_CB
           : k % 5000 == 17   ? M_CANCEL_IN_CB
           : k % 1000 == 500  ? M_WAIT_ZERO
           : k % 1000 == 700  ? M_WAIT_SHORT
           : k % 1000 == 900  ? M_WAIT_LATE
           : k % 2500 == 234  ? M_KEEP
                              : M_UNCOLLECTED;
}

struct pthread_arg {
    long gets;    /* gets this thread serves */
    unsigned seed;
    long first;   /* global index of its first get (selects the special modes) */
};

static void *p_client(void *arg)
{
    struct pthread_arg *a = arg;
    urma_jetty_info_t ji;
    ost_buffer_info_t lsrc, rdst, host;
    ost_device_info_t dev;
    long i;

    memset(&ji, 0, sizeof(ji));
    ji.jfs = NULL;
    ji.jetty = P.tx;
    ji.tjetty = P.tj;
    ji.jetty_mode = JETTY_MODE_DUPLEX;
    lsrc.addr = (uint64_t)(uintptr_t)P.src;
    lsrc.tseg = P.src_seg;
    rdst.addr = (uint64_t)(uintptr_t)P.dst;
    rdst.tseg = P.dst_imp;
    host.addr = (uint64_t)(uintptr_t)P.dst;
    host.tseg = P.dst_seg;
    dev.jfr = P.jfr;
    dev.jetty = P.rx;
    dev.dst = P.dst;

    for (i = 0; i < a->gets; i++) {
        long k = a->first + i;
        uint64_t len = P_CHUNK + 1 + (uint64_t)(rand_r(&a->seed) % (P_MAX_LEN - P_CHUNK));
        uint64_t ck = p_next_id(), sk = p_next_id();
        struct pget *g;
        task_sync_t *ss = NULL;
        urma_status_t st = -1;
        uint32_t r;
        int mode = p_mode(k);
        if (ck >= P.max_ids || sk >= P.max_ids) {
            CHECK(!"request id counter beyond the table");
            break;
        }
        if (i % 8 == 3) {
            p_plain((unsigned)(k / 8));
        }
        g = &P.gets[ck];
        g->expect = (uint32_t)((len + P_CHUNK - 1) / P_CHUNK);
        g->mode = mode;
        /* the 64-bit object size goes to the 32-bit parameter, as in the real client */
        r = os_transport_recv(g_handle, &host, &dev, len, ck, &g->sync, p_notify);
        if (r != 0) {
            __atomic_fetch_add(&P.refusals, 1, __ATOMIC_RELAXED);
            continue;
        }
        r = os_transport_send(g_handle, &ji, &lsrc, &rdst, len, sk, ck, &ss, &st);
        CHECK(r == 0 && st == URMA_SUCCESS);
        if (r != 0) {
            __atomic_fetch_add(&P.refusals, 1, __ATOMIC_RELAXED);
            continue;
        }
        CHECK(wait_and_free_sync_timeout(g_handle, ss, 10000, &st) == 0 && st == URMA_SUCCESS);
        switch (mode) {
        case M_UNCOLLECTED:
        case M_KEEP:
            if (p_await(&g->seen, (int)g->expect, 10.0)) {
                __atomic_fetch_add(&P.ok_gets, 1, __ATOMIC_RELAXED);
            } else {
                CHECK(!"a get never completed");
            }
            if (mode == M_KEEP) {
                long n = __atomic_fetch_add(&P.kept_n, 1, __ATOMIC_RELAXED);
                if (n < 64) {
                    P.kept[n] = g->sync;
                    P.kept_id[n] = ck;
                }
            }
            break; /* the receive sync is never collected */
        case M_CANCEL_IN_CB:
            CHECK(p_await(&g->cb_done, 1, 10.0));
            break; /* the callback cancelled the request and released its sync */
        case M_BLOCK_IN_CB:
            /* the RPC deadline passes while the callback blocks: timeout (1), sync released;
             * the callback finishes a second later on its worker */
            st = -1;
            CHECK(wait_and_free_sync_timeout(g_handle, g->sync, 50, &st) == 1);
            CHECK(st == URMA_SUCCESS);
            __atomic_fetch_add(&P.blocked, 1, __ATOMIC_RELAXED);
            break;
        case M_WAIT_ZERO:
            /* deadline already reached: an immediate check, done or timed out, sync released */
            r = wait_and_free_sync_timeout(g_handle, g->sync, 0, &st);
            CHECK(r == 0 || r == 1);
            break;
        case M_WAIT_SHORT:
            /* a few milliseconds left: done, or timed out with the sync released */
            r = wait_and_free_sync_timeout(g_handle, g->sync, 5, &st);
            CHECK(r == 0 || r == 1);
            break;
        case M_WAIT_LATE:
            /* every chunk was delivered; the rest of the RPC deadline is plenty */
            CHECK(p_await(&g->seen, (int)g->expect, 10.0));
            CHECK(wait_and_free_sync_timeout(g_handle, g->sync, 1000, &st) == 0 && st == URMA_SUCCESS);
            __atomic_fetch_add(&P.ok_gets, 1, __ATOMIC_RELAXED);
            break;
        }
    }
    return NULL;
}

/* Runs gets number first .. first + gets - 1 on P_THREADS client threads. */
static void p_run(long gets, long first, unsigned seed)
{
    pthread_t th[P_THREADS];
    struct pthread_arg a[P_THREADS];
    int t;
    for (t = 0; t < P_THREADS; t++) {
        a[t].gets = gets / P_THREADS + (t < gets % P_THREADS);
        a[t].first = first + (gets / P_THREADS) * t + (t < gets % P_THREADS ? t : gets % P_THREADS);
        a[t].seed = seed + (unsigned)t;
        CHECK(pthread_create(&th[t], NULL, p_client, &a[t]) == 0);
    }
    for (t = 0; t < P_THREADS; t++) {
        pthread_join(th[t], NULL);
    }
}

/* `gets` uncollected gets; with rss_bound > 0 the RSS growth per get must stay within it. */
static int run_pattern(long gets, long rss_bound)
{
    urma_context_t *ctx;
    urma_jfce_t *jfce;
    urma_jfc_t *jfc;
    urma_jfr_cfg_t jfr_cfg;
    urma_jfs_cfg_t jfs_cfg;
    os_transport_cfg_t cfg;
    ost_buffer_info_t host;
    ost_device_info_t dev;
    task_sync_t *sy = NULL;
    urma_status_t st;
    ufx_poller_t poller;
    long total, warm, rss_mid, rss_end, k, expect_ok = 0;
    double t0, per_get;
    Dl_info info;
    void *sym;

    if (gets < 100) {
        fprintf(stderr, "pattern: at least 100 gets\n");
        return 2;
    }
    CHECK(os_transport_log_reg(1, p_log) == 0); /* WARN and above */
    CHECK(urma_init(NULL) == URMA_SUCCESS);
    ctx = ufx_open(NULL);
    if (ctx == NULL) {
        return 1;
    }
    jfce = urma_create_jfce(ctx);
    jfc = ufx_jfc(ctx, 8192, jfce);
    CHECK(jfce != NULL && jfc != NULL);

    jfr_cfg = ufx_jfr_cfg(4096, jfc);
    P.jfr = urma_create_jfr(ctx, &jfr_cfg);
    CHECK(P.jfr != NULL);
    jfs_cfg = ufx_jfs_cfg(4096, jfc);
    P.tx = ufx_jetty_shared(ctx, &jfs_cfg, P.jfr, jfc);
    P.rx = ufx_jetty_shared(ctx, &jfs_cfg, P.jfr, jfc);
    CHECK(P.tx != NULL && P.rx != NULL);
    if (P.tx == NULL || P.rx == NULL || P.jfr == NULL || jfc == NULL) {
        return 1;
    }
    P.tj = ufx_import_jetty(ctx, P.rx, NULL);
    /* never touched: with the loopback's no-copy mode the transfers move no bytes */
    P.src = malloc(P_MAX_LEN);
    P.dst = malloc(P_MAX_LEN);
    P.max_ids = (uint64_t)gets * 3 + 4096;
    P.gets = calloc(P.max_ids, sizeof(*P.gets));
    P.plain = calloc(P.max_ids, 1);
    if (P.tj == NULL || P.src == NULL || P.dst == NULL || P.gets == NULL || P.plain == NULL) {
        fprintf(stderr, "pattern: setup failed\n");
        return 1;
    }
    /* touch the bookkeeping now, so that it does not count as growth per get */
    memset(P.gets, 0, P.max_ids * sizeof(*P.gets));
    memset(P.plain, 0, P.max_ids);
    P.plain_ctx = (uint64_t)(uintptr_t)&P.plain_ctx;
    P.src_seg = ufx_reg_seg(ctx, P.src, P_MAX_LEN);
    P.dst_seg = ufx_reg_seg(ctx, P.dst, P_MAX_LEN);
    P.dst_imp = ufx_import_seg(ctx, P.dst_seg, URMA_ACCESS_READ | URMA_ACCESS_WRITE);
    CHECK(P.src_seg != NULL && P.dst_seg != NULL && P.dst_imp != NULL);

    memset(&cfg, 0, sizeof(cfg));
    cfg.worker_thread_num = 64;
    cfg.recv_queue_capacity = 256;
    cfg.urma_event_mode = true;
    cfg.jfce = jfce;
    cfg.jfc = jfc;
    CHECK(os_transport_init(ctx, &cfg, &g_handle) == 0 && g_handle != NULL);
    /* one thread busy-polls the shared JFC: 8 CRs per poll, 1 us sleep when it is empty */
    memset(&poller, 0, sizeof(poller));
    poller.jfc = jfc;
    poller.handle = g_handle;
    poller.hand_over = p_hand_over;
    poller.batch = 8;
    poller.idle_ns = 1000;
    CHECK(ufx_poller_start(&poller) == 0);

    host.addr = (uint64_t)(uintptr_t)P.dst;
    host.tseg = P.dst_seg;
    dev.jfr = P.jfr;
    dev.jetty = P.rx;
    dev.dst = P.dst;
    /* more than 14 MiB is refused: the client falls back */
    CHECK(os_transport_recv(g_handle, &host, &dev, P_MAX_LEN + 1, p_next_id(), &sy, p_notify) == ERR32);
    CHECK(sy == NULL);

    /* `gets` plain uncollected gets, plus the special ones among them */
    for (total = 0, k = 0; k < gets; total++) {
        k += p_mode(total) == M_UNCOLLECTED;
        expect_ok += p_mode(total) == M_UNCOLLECTED || p_mode(total) == M_KEEP ||
                     p_mode(total) == M_WAIT_LATE;
    }
    warm = total / 10;
    t0 = p_now();
    p_run(warm, 0, 1);
    rss_mid = p_rss_bytes();
    p_run(total - warm, warm, 1000);
    rss_end = p_rss_bytes();
    per_get = (double)(rss_end - rss_mid) / (double)(total - warm);

    /* the application's own work drains: every one of its completions returned -1 */
    for (k = 0; k < 10000 && __atomic_load_n(&P.plain_crs, __ATOMIC_ACQUIRE) < P.plain_posted; k++) {
        const struct timespec ms1 = { 0, 1000000 };
        nanosleep(&ms1, NULL);
    }
    CHECK(P.plain_crs == P.plain_posted && P.plain_posted > 0);
    CHECK(P.plain_bad == 0);
    CHECK(__atomic_load_n(&poller.cr_errors, __ATOMIC_ACQUIRE) == 0);
    CHECK(P.failures_in_cb == 0);
    /* every get was served: no refusal, nothing logged about one */
    CHECK(P.refusals == 0);
    CHECK(P.refusal_logs == 0);
    CHECK(P.ok_gets == expect_ok);
    /* callbacks that blocked for a second all returned (before destroy) */
    CHECK(p_await(&P.unblocked, (int)P.blocked, 10.0));

    /* syncs of finished gets kept uncollected for a long time are still valid: half of them are
     * waited for (success, released), half cancelled (0, released) */
    for (k = 0; k < P.kept_n && k < 64; k++) {
        if (k % 2 == 0) {
            st = -1;
            CHECK(wait_and_free_sync_timeout(g_handle, P.kept[k], 1000, &st) == 0 && st == URMA_SUCCESS);
        } else {
            CHECK(os_transport_cancel_tasks(g_handle, &P.kept[k], P.kept_id[k]) == 0 && P.kept[k] == NULL);
        }
    }
    CHECK(P.kept_n > 0);
    CHECK(os_transport_recv(g_handle, &host, &dev, P_MAX_LEN + 1, p_next_id(), &sy, p_notify) == ERR32);

    ufx_poller_stop(&poller);
    /* destroy releases every sync that was never collected */
    CHECK(os_transport_destroy(g_handle) == 0);

    CHECK(urma_unimport_seg(P.dst_imp) == URMA_SUCCESS);
    CHECK(urma_unregister_seg(P.src_seg) == URMA_SUCCESS);
    CHECK(urma_unregister_seg(P.dst_seg) == URMA_SUCCESS);
    CHECK(urma_unimport_jetty(P.tj) == URMA_SUCCESS);
    CHECK(urma_delete_jetty(P.tx) == URMA_SUCCESS);
    CHECK(urma_delete_jetty(P.rx) == URMA_SUCCESS);
    CHECK(urma_delete_jfr(P.jfr) == URMA_SUCCESS);
    CHECK(urma_delete_jfc(jfc) == URMA_SUCCESS);
    CHECK(urma_delete_jfce(jfce) == URMA_SUCCESS);
    CHECK(urma_delete_context(ctx) == URMA_SUCCESS);
    free(P.src);
    free(P.dst);
    free(P.gets);
    free(P.plain);

    sym = dlsym(RTLD_DEFAULT, "os_transport_init");
    if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL) {
        fprintf(stderr, "cannot locate os_transport_init\n");
        return 1;
    }
    printf("consumer pattern: library %s: %ld gets in %.2f s (%ld receive syncs never collected, "
           "%ld gets served), %ld plain completions (all -1), RSS growth %.0f bytes per get "
           "(bound %ld, 0 = not checked)\n",
           info.dli_fname, total, p_now() - t0, gets, P.ok_gets, P.plain_crs, per_get, rss_bound);
    if (rss_bound > 0) {
        CHECK(per_get <= (double)rss_bound);
    }
    if (g_failures != 0) {
        fprintf(stderr, "consumer pattern: %d check(s) failed (library %s)\n", g_failures, info.dli_fname);
        return 1;
    }
    printf("consumer pattern ok: %s\n", info.dli_fname);
    return 0;
}

static int run_basic(void)
{
    urma_context_t *ctx;
    urma_jfs_cfg_t jfs_cfg;
    urma_jfr_cfg_t jfr_cfg;
    urma_jfs_t *jfs;
    urma_jetty_t *rx;
    urma_target_jetty_t *tjetty;
    urma_target_seg_t *src_seg, *dst_seg, *dst_imported;
    unsigned char *src, *dst;
    os_transport_cfg_t cfg;
    urma_jetty_info_t ji;
    ost_buffer_info_t lsrc, rdst, host;
    ost_device_info_t dev;
    task_sync_t *send_sync = NULL, *recv_sync = NULL;
    urma_status_t st = -1;
    ufx_poller_t sp, rp;
    void *h2 = (void *)1;
    Dl_info info;
    void *sym;
    uint32_t i;
    int k;

    CHECK(os_transport_log_reg(0, log_cb) == 0);
    CHECK(os_transport_log_reg(0, NULL) == -1);

    CHECK(urma_init(NULL) == URMA_SUCCESS);
    ctx = ufx_open(NULL);
    if (ctx == NULL) {
        return 1;
    }
    memset(&sp, 0, sizeof(sp));
    memset(&rp, 0, sizeof(rp));
    sp.jfc = ufx_jfc(ctx, 1024, NULL);
    rp.jfc = ufx_jfc(ctx, 1024, NULL);
    CHECK(sp.jfc != NULL && rp.jfc != NULL);

    jfs_cfg = ufx_jfs_cfg(256, sp.jfc);
    jfs = urma_create_jfs(ctx, &jfs_cfg);
    CHECK(jfs != NULL);

    jfr_cfg = ufx_jfr_cfg(256, rp.jfc);
    jfs_cfg.jfc = rp.jfc;
    rx = ufx_jetty(ctx, &jfs_cfg, &jfr_cfg);
    CHECK(rx != NULL);
    tjetty = ufx_import_jetty(ctx, rx, NULL);
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
    src_seg = ufx_reg_seg(ctx, src, LEN);
    dst_seg = ufx_reg_seg(ctx, dst, LEN);
    CHECK(src_seg != NULL && dst_seg != NULL);
    dst_imported = ufx_import_seg(ctx, dst_seg, URMA_ACCESS_READ | URMA_ACCESS_WRITE);
    CHECK(dst_imported != NULL);

    memset(&cfg, 0, sizeof(cfg));
    cfg.worker_thread_num = 2;
    cfg.recv_queue_capacity = 4;
    cfg.jfc = rp.jfc;
    CHECK(os_transport_init(ctx, &cfg, &g_handle) == 0 && g_handle != NULL);
    /* one instance per process */
    CHECK(os_transport_init(ctx, &cfg, &h2) == ERR32 && h2 == NULL);
    CHECK(os_transport_reg_jfc(NULL, rp.jfc, g_handle) == 0);

    sp.wake = rp.wake = os_transport_wake_up_task;
    sp.handle = rp.handle = g_handle;
    CHECK(ufx_poller_start(&sp) == 0);
    CHECK(ufx_poller_start(&rp) == 0);

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

    ufx_poller_stop(&sp);
    ufx_poller_stop(&rp);
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
    CHECK(ufx_delete_jetty(rx) == URMA_SUCCESS);
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

/*
 * ---- The install test -----------------------------------------------------------------------
 *
 * `consumer install` (`make rpm-test`, built only with the installed files:
 * cc consumer.c urma_fixture.c $(pkg-config --cflags --libs os-transport), and by CMake with
 * find_package(os-transport)): the loopback device by name, one JFC, a JFS (sender), a jetty
 * (receiver), a source and a destination buffer, the destination segment and the jetty imported
 * as the remote side; moves I_LEN bytes with os_transport_recv() + os_transport_send() and checks
 * every byte that arrived. It stops at the first failed check; "consumer: OK" at the end.
 */
#define I_LEN ((uint32_t)DEFAULT_CHUNK_SIZE + 1u) /* two chunks, the second one a single byte */
#define I_SERVER_KEY 7u
#define I_CLIENT_KEY 8u
#define I_DEVICE_NAME "loopback0"

#define REQUIRE(cond, ...)                                                                          \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "consumer: FAIL %s:%d: ", __FILE__, __LINE__);                         \
            fprintf(stderr, __VA_ARGS__);                                                           \
            fputc('\n', stderr);                                                                    \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

static int i_chunks;

static int i_on_chunk(void *user_data)
{
    os_transport_user_data_t *ud = user_data;
    REQUIRE(ud->bs.request_id == I_CLIENT_KEY, "notify for request %llu",
            (unsigned long long)ud->bs.request_id);
    __atomic_fetch_add(&i_chunks, 1, __ATOMIC_SEQ_CST);
    return 0;
}

static void i_on_log(int level, const char *msg)
{
    if ((level & 0xFF) == 2) { /* errors only */
        fprintf(stderr, "consumer: library: %s", msg);
    }
}

static const char *i_where(const void *sym)
{
    Dl_info info;
    return dladdr(sym, &info) && info.dli_fname ? info.dli_fname : "?";
}

static int run_install(void)
{
    urma_context_t *ctx;
    urma_jfc_t *jfc;
    urma_jfs_cfg_t jfs_cfg;
    urma_jfr_cfg_t jfr_cfg;
    urma_jfs_t *jfs;
    urma_jetty_t *jetty;
    urma_token_t token = {.token = 0};
    urma_target_jetty_t *tjetty;
    urma_target_seg_t *src_seg, *dst_seg, *remote_seg;
    uint8_t *src, *dst;
    os_transport_cfg_t cfg;
    void *handle = NULL;
    ufx_poller_t p;
    task_sync_t *recv_sync = NULL, *send_sync = NULL;
    urma_status_t st = URMA_SUCCESS, send_st = URMA_FAIL, recv_st = URMA_FAIL;
    uint32_t i, send_rc, recv_rc;

    printf("consumer: os_transport.h %d, libos_transport from %s, liburma from %s\n",
           OS_TRANSPORT_VERSION, i_where((void *)os_transport_init), i_where((void *)urma_init));

    REQUIRE(os_transport_log_reg(0, i_on_log) == 0, "os_transport_log_reg");
    REQUIRE(urma_init(NULL) == URMA_SUCCESS, "urma_init");
    /* The loopback device, or the first device there is. */
    ctx = ufx_open(I_DEVICE_NAME);
    if (ctx == NULL) {
        ctx = ufx_open(NULL);
    }
    REQUIRE(ctx != NULL, "no URMA device");
    printf("consumer: URMA device %s\n", ctx->dev->name);

    jfc = ufx_jfc(ctx, 1024, NULL);
    REQUIRE(jfc != NULL, "urma_create_jfc");
    /* Sender queue. */
    jfs_cfg = ufx_jfs_cfg(256, jfc);
    jfs_cfg.rnr_retry = URMA_TYPICAL_RNR_RETRY;
    jfs_cfg.err_timeout = URMA_TYPICAL_ERR_TIMEOUT;
    jfs = urma_create_jfs(ctx, &jfs_cfg);
    REQUIRE(jfs != NULL, "urma_create_jfs");
    /* Receiver: a jetty with its own JFR. */
    jfr_cfg = ufx_jfr_cfg(256, jfc);
    jfr_cfg.min_rnr_timer = URMA_TYPICAL_MIN_RNR_TIMER;
    jetty = ufx_jetty(ctx, &jfs_cfg, &jfr_cfg);
    REQUIRE(jetty != NULL, "urma_create_jetty");
    /* The receiver's jetty as the sender's target. */
    tjetty = ufx_import_jetty(ctx, jetty, &token);
    REQUIRE(tjetty != NULL, "urma_import_jetty");

    /* Buffers: the source, and the destination seen locally and (imported) as the remote. */
    src = malloc(I_LEN);
    dst = malloc(I_LEN);
    REQUIRE(src != NULL && dst != NULL, "malloc");
    for (i = 0; i < I_LEN; i++) {
        src[i] = (uint8_t)(i * 131u + 7u + (i >> 16));
    }
    memset(dst, 0, I_LEN);
    src_seg = ufx_reg_seg(ctx, src, I_LEN);
    dst_seg = ufx_reg_seg(ctx, dst, I_LEN);
    REQUIRE(src_seg != NULL && dst_seg != NULL, "urma_register_seg");
    remote_seg = ufx_import_seg(ctx, dst_seg, URMA_ACCESS_READ | URMA_ACCESS_WRITE);
    REQUIRE(remote_seg != NULL, "urma_import_seg");

    memset(&cfg, 0, sizeof(cfg));
    cfg.worker_thread_num = 2;
    cfg.jfc = jfc;
    cfg.recv_queue_capacity = 16;
    REQUIRE(os_transport_init(ctx, &cfg, &handle) == 0 && handle != NULL, "os_transport_init");
    REQUIRE(os_transport_reg_jfc(NULL, jfc, handle) == 0, "os_transport_reg_jfc");

    /* The library has no poller: the application polls its JFC and forwards each CR. */
    memset(&p, 0, sizeof(p));
    p.jfc = jfc;
    p.wake = os_transport_wake_up_task;
    p.handle = handle;
    REQUIRE(ufx_poller_start(&p) == 0, "poller");

    {
        /* host_src: where the data comes from (the sender's buffer); device_dst->dst: where it lands. */
        ost_buffer_info_t host_src = {.addr = (uint64_t)(uintptr_t)src, .tseg = src_seg};
        ost_device_info_t device_dst = {.jfr = NULL, .jetty = jetty, .dst = dst};
        urma_jetty_info_t jetty_info = {.jfs = jfs, .jetty = NULL, .tjetty = tjetty, .jetty_mode = JETTY_MODE_SIMPLEX};
        ost_buffer_info_t local_src = {.addr = (uint64_t)(uintptr_t)src, .tseg = src_seg};
        ost_buffer_info_t remote_dst = {.addr = (uint64_t)(uintptr_t)dst, .tseg = remote_seg};
        REQUIRE(os_transport_recv(handle, &host_src, &device_dst, I_LEN, I_CLIENT_KEY, &recv_sync,
                                  i_on_chunk) == 0,
                "os_transport_recv");
        REQUIRE(os_transport_send(handle, &jetty_info, &local_src, &remote_dst, I_LEN, I_SERVER_KEY,
                                  I_CLIENT_KEY, &send_sync, &st) == 0,
                "os_transport_send (urma status %d)", st);
    }
    send_rc = wait_and_free_sync_timeout(handle, send_sync, 20000, &send_st);
    recv_rc = wait_and_free_sync_timeout(handle, recv_sync, 20000, &recv_st);
    REQUIRE(send_rc == 0, "send wait returned %u (urma status %d)", send_rc, send_st);
    REQUIRE(recv_rc == 0, "recv wait returned %u (urma status %d)", recv_rc, recv_st);

    ufx_poller_stop(&p);
    REQUIRE(i_chunks == 2, "%d chunks notified, expected 2", i_chunks);
    for (i = 0; i < I_LEN; i++) {
        REQUIRE(dst[i] == src[i], "byte %u differs: %u != %u", i, dst[i], src[i]);
    }
    printf("consumer: sent and received %u bytes in %d chunks, all bytes equal (%d CRs polled)\n", I_LEN,
           i_chunks, p.crs);

    REQUIRE(os_transport_destroy(handle) == 0, "os_transport_destroy");
    REQUIRE(urma_unimport_seg(remote_seg) == URMA_SUCCESS, "urma_unimport_seg");
    REQUIRE(urma_unregister_seg(dst_seg) == URMA_SUCCESS, "urma_unregister_seg dst");
    REQUIRE(urma_unregister_seg(src_seg) == URMA_SUCCESS, "urma_unregister_seg src");
    REQUIRE(urma_unimport_jetty(tjetty) == URMA_SUCCESS, "urma_unimport_jetty");
    REQUIRE(ufx_delete_jetty(jetty) == URMA_SUCCESS, "ufx_delete_jetty");
    REQUIRE(urma_delete_jfs(jfs) == URMA_SUCCESS, "urma_delete_jfs");
    REQUIRE(urma_delete_jfc(jfc) == URMA_SUCCESS, "urma_delete_jfc");
    REQUIRE(urma_delete_context(ctx) == URMA_SUCCESS, "urma_delete_context");
    REQUIRE(urma_uninit() == URMA_SUCCESS, "urma_uninit");
    free(src);
    free(dst);
    printf("consumer: OK\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "install") == 0) {
        return run_install();
    }
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "pattern") == 0) {
        return run_pattern(strtol(argv[2], NULL, 10), argc == 4 ? strtol(argv[3], NULL, 10) : 0);
    }
    if (argc != 1) {
        fprintf(stderr, "usage: consumer [install | pattern GETS [RSS_BOUND]]\n");
        return 2;
    }
    return run_basic();
}
