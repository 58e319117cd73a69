/*
 * runner.c - the conformance harness's C consumer of libos_transport.so.1.
 *
 * An ordinary application: compiled against include/os_transport.h and the URMA headers, linked
 * with -los_transport -lurma, and pointed at one implementation or the other only through
 * LD_LIBRARY_PATH (<dir holding libos_transport.so.1>:<dir holding the loopback liburma.so.0>).
 * It runs one scenario (argv[1]) over the loopback URMA provider with application-style pollers
 * and prints its trace as JSON lines on stdout, in the harness's raw trace format (see
 * docs/compat.md): {"k":"api"|"wake"|"notify"|"log"|"data"|"urma"|"lib", ...}.
 *
 *   runner c-basic-2m+1 | c-basic-6m+5-event | c-basic-14m | c-len-1 | c-bad-inputs | c-timeout
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "os_transport.h"
#include "urma_fixture.h"
#include "urma_loopback.h"

#define ERR32 ((uint32_t)-1)
#define MIB (1024U * 1024U)

static pthread_mutex_t g_out = PTHREAD_MUTEX_INITIALIZER;

static void emit(const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&g_out);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
    pthread_mutex_unlock(&g_out);
}

static const char *r32(uint32_t v, char *buf)
{
    if (v == ERR32) {
        return "ERR";
    }
    sprintf(buf, "%u", v);
    return buf;
}

static void api(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    emit("{\"k\":\"api\",\"line\":\"%s\"}", line);
}

static void ud_str(uint64_t v, char *out)
{
    sprintf(out, "{rid=0x%llx,t=%u,id=%u}", (unsigned long long)(v & ((1ULL << 60) - 1)),
            (unsigned)((v >> 60) & 1), (unsigned)((v >> 61) & 7));
}

/* ---- callbacks ---- */

static int prefix_ok(const char *m)
{
    const char *p, *q;
    if (strncmp(m, "[ost:", 5) != 0) {
        return 0;
    }
    p = strstr(m, "] [PIPLN RH2D] ");
    if (p == NULL) {
        return 0;
    }
    q = p;
    while (q > m + 5 && q[-1] >= '0' && q[-1] <= '9') {
        q--;
    }
    return q < p && q > m + 5 && q[-1] == ':';
}

static void log_cb(int level, const char *msg)
{
    emit("{\"k\":\"log\",\"lib\":0,\"level\":%d,\"ok\":%s}", level,
         msg != NULL && prefix_ok(msg) ? "true" : "false");
}

static int g_notifies;

static int notify_cb(void *user_data)
{
    char u[96];
    uint64_t v = *(uint64_t *)user_data;
    ud_str(v, u);
    emit("{\"k\":\"notify\",\"rid\":%llu,\"line\":\"notify %s -> 0\"}",
         (unsigned long long)(v & ((1ULL << 60) - 1)), u);
    __atomic_fetch_add(&g_notifies, 1, __ATOMIC_SEQ_CST);
    return 0;
}

/* ---- pollers ---- */

static int hand_over(ufx_poller_t *p, urma_cr_t *cr)
{
    char u[96];
    int r = os_transport_wake_up_task(p->handle, cr);
    if (cr->flag.bs.s_r) {
        uint64_t imm = cr->imm_data;
        uint64_t d = (imm & ~((1ULL << 60) - 1)) | ufx_dec(imm & ((1ULL << 60) - 1));
        ud_str(d, u);
        emit("{\"k\":\"wake\",\"key\":\"req:0x%llx\",\"line\":\"wake recv opc=%d status=%d imm=%s -> %d\"}",
             (unsigned long long)(d & ((1ULL << 60) - 1)), (int)cr->opcode, (int)cr->status, u, r);
    } else {
        ud_str(cr->user_ctx, u);
        emit("{\"k\":\"wake\",\"key\":\"req:0x%llx\",\"line\":\"wake send opc=%d status=%d uctx=%s -> %d\"}",
             (unsigned long long)(cr->user_ctx & ((1ULL << 60) - 1)), (int)cr->opcode, (int)cr->status, u, r);
    }
    return r;
}

/* An application-style poller (tests/c/urma_fixture.h) that traces every hand-over. */
static void poller_start(ufx_poller_t *p, urma_jfc_t *jfc, urma_jfce_t *jfce, void *handle)
{
    memset(p, 0, sizeof(*p));
    p->jfc = jfc;
    p->jfce = jfce;
    p->handle = handle;
    p->hand_over = hand_over;
    p->idle_ns = 50000;
    if (ufx_poller_start(p) != 0) {
        exit(3);
    }
}

/* ---- URMA set-up ---- */

typedef struct {
    urma_context_t *ctx;
    urma_jfce_t *sjfce, *rjfce;
    urma_jfc_t *sjfc, *rjfc;
    urma_jfs_t *jfs;
    urma_jetty_t *rx;
    urma_jfr_cfg_t rx_jfr_cfg;
    urma_target_jetty_t *tjetty;
    unsigned char *src, *dst;
    size_t len;
    urma_target_seg_t *src_seg, *dst_seg, *dst_imp;
} env_t;

/* The loopback's control functions the runner uses, found with ufx_loopback_symbol after
 * urma_init (the loopback may be the liburma.so.0 of the process or a plugin of the genuine
 * core, which is not in the global scope). */
static struct {
    __typeof__(urma_loopback_reset) *reset;
    __typeof__(urma_loopback_trace_capture) *trace_capture;
    __typeof__(urma_loopback_trace_take) *trace_take;
    __typeof__(urma_loopback_free) *free;
} lb;

static void lb_resolve(void)
{
    *(void **)&lb.reset = ufx_loopback_symbol("urma_loopback_reset");
    *(void **)&lb.trace_capture = ufx_loopback_symbol("urma_loopback_trace_capture");
    *(void **)&lb.trace_take = ufx_loopback_symbol("urma_loopback_trace_take");
    *(void **)&lb.free = ufx_loopback_symbol("urma_loopback_free");
    if (lb.reset == NULL || lb.trace_capture == NULL || lb.trace_take == NULL || lb.free == NULL) {
        fprintf(stderr, "runner: the loopback's control API (urma_loopback_*) was not found\n");
        exit(3);
    }
}

static void env_init(env_t *e, size_t len, int event_mode)
{
    urma_jfs_cfg_t sc;
    size_t i;

    memset(e, 0, sizeof(*e));
    if (urma_init(NULL) != URMA_SUCCESS) {
        fprintf(stderr, "runner: urma_init failed\n");
        exit(3);
    }
    lb_resolve();
    lb.reset();
    lb.trace_capture(true);
    e->ctx = ufx_open(NULL);
    if (e->ctx == NULL) {
        exit(3);
    }
    if (event_mode) {
        e->sjfce = urma_create_jfce(e->ctx);
        e->rjfce = urma_create_jfce(e->ctx);
    }
    e->sjfc = ufx_jfc(e->ctx, 4096, e->sjfce);
    e->rjfc = ufx_jfc(e->ctx, 4096, e->rjfce);
    sc = ufx_jfs_cfg(1024, e->sjfc);
    e->jfs = urma_create_jfs(e->ctx, &sc);
    e->rx_jfr_cfg = ufx_jfr_cfg(1024, e->rjfc);
    sc.jfc = e->rjfc;
    e->rx = ufx_jetty(e->ctx, &sc, &e->rx_jfr_cfg);
    if (e->sjfc == NULL || e->rjfc == NULL || e->jfs == NULL || e->rx == NULL) {
        fprintf(stderr, "runner: queue creation failed\n");
        exit(3);
    }
    e->tjetty = ufx_import_jetty(e->ctx, e->rx, NULL);
    e->len = len < 4 * MIB ? 4 * MIB : len;
    e->src = malloc(e->len + 4096);
    e->dst = calloc(1, e->len + 4096);
    if (e->tjetty == NULL || e->src == NULL || e->dst == NULL) {
        fprintf(stderr, "runner: import/alloc failed\n");
        exit(3);
    }
    for (i = 0; i < e->len + 4096; i++) {
        e->src[i] = (unsigned char)((i * 2654435761U) >> 13);
    }
    e->src_seg = ufx_reg_seg(e->ctx, e->src, e->len + 4096);
    e->dst_seg = ufx_reg_seg(e->ctx, e->dst, e->len + 4096);
    e->dst_imp = ufx_import_seg(e->ctx, e->dst_seg, 0);
    if (e->src_seg == NULL || e->dst_imp == NULL) {
        fprintf(stderr, "runner: segment registration failed\n");
        exit(3);
    }
}

static void env_trace_dump(void)
{
    size_t n = 0;
    char *all, *line, *save = NULL;
    lb.trace_capture(false);
    all = lb.trace_take(&n);
    if (all == NULL) {
        return;
    }
    for (line = strtok_r(all, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        emit("{\"k\":\"urma\",\"raw\":%s}", line);
    }
    lb.free(all);
}

static void *lib_init(env_t *e, uint32_t workers, uint32_t cap, int event_mode)
{
    os_transport_cfg_t cfg;
    void *h = NULL;
    uint32_t r;
    char b[16];
    memset(&cfg, 0, sizeof(cfg));
    cfg.urma_event_mode = event_mode != 0;
    cfg.worker_thread_num = workers;
    cfg.recv_queue_capacity = cap;
    cfg.jfce = e->rjfce;
    cfg.jfc = e->rjfc;
    r = os_transport_init(e->ctx, &cfg, &h);
    api("init(ctx, {workers=%u, cap=%u, event=%s}) = %s handle=%s", workers, cap,
        event_mode ? "true" : "false", r32(r, b), h ? "set" : "NULL");
    return r == 0 ? h : NULL;
}

static uint32_t do_send(void *h, env_t *e, uint32_t len, uint64_t sk, uint64_t ck, task_sync_t **sync)
{
    urma_jetty_info_t ji;
    ost_buffer_info_t s, d;
    urma_status_t st = -77;
    uint32_t r;
    char b[16];
    memset(&ji, 0, sizeof(ji));
    ji.jfs = e->jfs;
    ji.tjetty = e->tjetty;
    ji.jetty_mode = JETTY_MODE_SIMPLEX;
    s.addr = (uint64_t)(uintptr_t)e->src;
    s.tseg = e->src_seg;
    d.addr = (uint64_t)(uintptr_t)e->dst;
    d.tseg = e->dst_imp;
    *sync = (task_sync_t *)1;
    r = os_transport_send(h, &ji, &s, &d, len, sk, ck, sync, &st);
    api("send(H, ji[jfs], src+0, dst+0, len=%u, sk=0x%llx, ck=0x%llx) = %s sync=%s status=%d", len,
        (unsigned long long)sk, (unsigned long long)ck, r32(r, b),
        *sync == (task_sync_t *)1 ? "untouched" : (*sync ? "S" : "NULL"), st);
    return r;
}

static uint32_t do_recv(void *h, env_t *e, uint32_t len, uint64_t ck, task_sync_t **sync)
{
    ost_buffer_info_t host;
    ost_device_info_t dev;
    uint32_t r;
    char b[16];
    host.addr = (uint64_t)(uintptr_t)e->dst;
    host.tseg = e->dst_seg;
    dev.jfr = NULL;
    dev.jetty = e->rx;
    dev.dst = e->dst;
    *sync = (task_sync_t *)1;
    r = os_transport_recv(h, &host, &dev, len, ck, sync, notify_cb);
    api("recv(H, dst+0, dev[jetty], len=%u, ck=0x%llx, cb) = %s sync=%s", len, (unsigned long long)ck,
        r32(r, b), *sync == (task_sync_t *)1 ? "untouched" : (*sync ? "R" : "NULL"));
    return r;
}

static uint32_t do_wait(void *h, task_sync_t *s, int64_t ms, const char *name)
{
    urma_status_t st = -77;
    uint32_t r;
    char b[16];
    if (ms < 0) {
        r = wait_and_free_sync(h, s, &st);
        api("wait_and_free_sync(H, %s) = %s status=%d", name, r32(r, b), st);
    } else {
        r = wait_and_free_sync_timeout(h, s, ms, &st);
        api("wait_and_free_sync_timeout(.., %lld ms)(H, %s) = %s status=%d", (long long)ms, name,
            r32(r, b), st);
    }
    return r;
}

static void check_data(env_t *e, uint32_t len)
{
    uint32_t i;
    for (i = 0; i < len; i++) {
        if (e->src[i] != e->dst[i]) {
            emit("{\"k\":\"data\",\"line\":\"data: mismatch from byte %u\"}", i);
            return;
        }
    }
    emit("{\"k\":\"data\",\"line\":\"data: %u bytes match%s\"}", len,
         e->dst[len] == 0 ? "" : ", byte after the end written");
}

static void report_lib(void)
{
    Dl_info info;
    if (dladdr((void *)os_transport_init, &info) != 0 && info.dli_fname != NULL) {
        emit("{\"k\":\"lib\",\"path\":\"%s\"}", info.dli_fname);
    }
}

/* ---- scenarios ---- */

static int sc_basic(uint32_t len, int event_mode)
{
    env_t e;
    ufx_poller_t sp, rp;
    task_sync_t *rs = NULL, *ss = NULL;
    uint32_t rr, sr;
    void *h;
    char b[16];

    env_init(&e, len, event_mode);
    h = lib_init(&e, 2, 16, event_mode);
    if (h == NULL) {
        env_trace_dump();
        return 0;
    }
    api("reg_jfc(jfce, jfc, H) = %s", r32(os_transport_reg_jfc(e.rjfce, e.rjfc, h), b));
    poller_start(&sp, e.sjfc, e.sjfce, h);
    poller_start(&rp, e.rjfc, e.rjfce, h);
    rr = do_recv(h, &e, len, 0xABCDE12345ULL, &rs);
    sr = do_send(h, &e, len, 0x123456789AULL, 0xABCDE12345ULL, &ss);
    if (sr == 0 || (ss != NULL && ss != (task_sync_t *)1)) {
        do_wait(h, ss, sr == 0 ? -1 : 100, "S");
    }
    if (rr == 0) {
        do_wait(h, rs, sr == 0 ? 10000 : 50, "R");
    }
    if (sr == 0) {
        check_data(&e, len);
    }
    ufx_poller_stop(&sp);
    ufx_poller_stop(&rp);
    api("destroy(H) = %s", r32(os_transport_destroy(h), b));
    env_trace_dump();
    return 0;
}

static int sc_bad_inputs(void)
{
    env_t e;
    void *h;
    task_sync_t *s = NULL;
    urma_status_t st = -77;
    os_transport_cfg_t cfg;
    ost_buffer_info_t host;
    ost_device_info_t dev;
    char b[16];

    env_init(&e, 4 * MIB, 0);
    api("destroy(NULL) = %s", r32(os_transport_destroy(NULL), b));
    memset(&cfg, 0, sizeof(cfg));
    cfg.worker_thread_num = 1;
    api("init(ctx, NULL, &h) = %s", r32(os_transport_init(e.ctx, NULL, &h), b));
    api("init(ctx, cfg, NULL) = %s", r32(os_transport_init(e.ctx, &cfg, NULL), b));
    h = lib_init(&e, 2, 4, 0);
    if (h == NULL) {
        env_trace_dump();
        return 0;
    }
    api("send(NULL, ...) = %s", r32(os_transport_send(NULL, NULL, NULL, NULL, 4 * MIB, 1, 2, &s, &st), b));
    api("send(H, len=0) = %s", r32(os_transport_send(h, NULL, NULL, NULL, 0, 1, 2, &s, &st), b));
    do_send(h, &e, 4 * MIB, 1ULL << 40, 2, &s);
    do_send(h, &e, 4 * MIB, 3, 1ULL << 40, &s);
    do_send(h, &e, 14 * MIB + 1, 4, 5, &s);
    host.addr = (uint64_t)(uintptr_t)e.dst;
    host.tseg = e.dst_seg;
    dev.jfr = NULL;
    dev.jetty = NULL;
    dev.dst = e.dst;
    s = (task_sync_t *)1;
    api("recv(H, no queue) = %s sync=%s", r32(os_transport_recv(h, &host, &dev, 4 * MIB, 6, &s, notify_cb), b),
        s == (task_sync_t *)1 ? "untouched" : (s ? "R" : "NULL"));
    dev.jetty = e.rx;
    api("recv(H, NULL cb) = %s", r32(os_transport_recv(h, &host, &dev, 4 * MIB, 7, &s, NULL), b));
    do_recv(h, &e, 0, 8, &s);
    do_recv(h, &e, 4 * MIB, 1ULL << 40, &s);
    api("wake_up_task(H, NULL) = %d", os_transport_wake_up_task(h, NULL));
    api("wait_and_free_sync(NULL sync) = %s", r32(wait_and_free_sync(h, NULL, &st), b));
    api("cancel_tasks(NULL) = %s", r32(os_transport_cancel_tasks(NULL, NULL, 1), b));
    api("cancel_tasks(H, NULL, unknown) = %s", r32(os_transport_cancel_tasks(h, NULL, 0x777), b));
    api("log_reg(0, NULL) = %d", os_transport_log_reg(0, NULL));
    api("destroy(H) = %s", r32(os_transport_destroy(h), b));
    api("destroy(H) again = %s", r32(os_transport_destroy(h), b));
    env_trace_dump();
    return 0;
}

static int sc_timeout(void)
{
    env_t e;
    void *h;
    task_sync_t *rs = NULL;
    char b[16];

    env_init(&e, 4 * MIB, 0);
    h = lib_init(&e, 2, 4, 0);
    if (h == NULL) {
        env_trace_dump();
        return 0;
    }
    if (do_recv(h, &e, 4 * MIB, 0x51, &rs) == 0) {
        do_wait(h, rs, 0, "R1");
    }
    if (do_recv(h, &e, 6 * MIB, 0x52, &rs) == 0) {
        do_wait(h, rs, 20, "R2");
    }
    api("cancel_tasks(H, NULL, 0x52) = %s", r32(os_transport_cancel_tasks(h, NULL, 0x52), b));
    api("destroy(H) = %s", r32(os_transport_destroy(h), b));
    env_trace_dump();
    return 0;
}

int main(int argc, char **argv)
{
    const char *sc = argc > 1 ? argv[1] : "";
    if (os_transport_log_reg(-1, log_cb) != 0) {
        fprintf(stderr, "runner: os_transport_log_reg failed\n");
        return 3;
    }
    report_lib();
    if (strcmp(sc, "c-basic-2m+1") == 0) {
        return sc_basic(2 * MIB + 1, 0);
    }
    if (strcmp(sc, "c-basic-6m+5-event") == 0) {
        return sc_basic(6 * MIB + 5, 1);
    }
    if (strcmp(sc, "c-basic-14m") == 0) {
        return sc_basic(14 * MIB, 0);
    }
    if (strcmp(sc, "c-len-1") == 0) {
        return sc_basic(1, 0);
    }
    if (strcmp(sc, "c-bad-inputs") == 0) {
        return sc_bad_inputs();
    }
    if (strcmp(sc, "c-timeout") == 0) {
        return sc_timeout();
    }
    fprintf(stderr, "usage: runner c-basic-2m+1|c-basic-6m+5-event|c-basic-14m|c-len-1|c-bad-inputs|c-timeout\n");
    return 2;
}
