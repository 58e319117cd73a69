/*
 * cr_fuzz.c - coverage-guided fuzz target (libFuzzer, clang -fsanitize=fuzzer) for the Rust
 * libos_transport.so: arbitrary completion records (docs/reliability.md).
 *
 * The input is a small program: each step is an opcode byte followed by its operands. Steps
 * register receives and sends over the loopback liburma.so.0 (no-copy mode, ids from a small set
 * so that fuzzed completions collide with live requests), feed arbitrary urma_cr_t values built
 * from the input to os_transport_wake_up_task, feed (possibly duplicated or dropped) real
 * completions polled from the JFC, wait with timeout 0, cancel by id or by sync, and pass forged
 * sync values. After every input all syncs are consumed and the library's live-sync count
 * (OST_DEBUG_LIVE_SYNCS log line) must drop back to 0, otherwise the target aborts (leak).
 * A crash, a Rust panic (the library is built with panic=abort for fuzzing) or a hang is a finding.
 *
 * The library is loaded with dlopen from $OST_FUZZ_LIB (default: OST_FUZZ_LIB_DEFAULT, set by
 * `cargo xtask fuzz`), so it can be built separately with sancov instrumentation.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os_transport.h"
#include "urma_fixture.h"
#include "urma_loopback.h"

#ifndef OST_FUZZ_LIB_DEFAULT
#define OST_FUZZ_LIB_DEFAULT "libos_transport.so"
#endif

static struct {
    int (*log_reg)(int, log_callback_t);
    uint32_t (*init)(urma_context_t *, os_transport_cfg_t *, void **);
    uint32_t (*send)(void *, urma_jetty_info_t *, ost_buffer_info_t *, ost_buffer_info_t *, uint32_t,
                     uint64_t, uint64_t, task_sync_t **, urma_status_t *);
    uint32_t (*recv)(void *, ost_buffer_info_t *, ost_device_info_t *, uint32_t, uint64_t,
                     task_sync_t **, notify_callback_t);
    int (*wake)(void *, void *);
    uint32_t (*wait_t)(void *, task_sync_t *, int64_t, urma_status_t *);
    uint32_t (*cancel)(void *, task_sync_t **, uint64_t);
    uint32_t (*destroy)(void *);
} L;

static void *g_h;
static urma_jfc_t *g_jfc;
static urma_jetty_info_t g_ji;
static ost_buffer_info_t g_src, g_dst, g_host;
static ost_device_info_t g_dev;
static volatile long g_live = -1;

#define NSYNC 16
static task_sync_t *g_sync[NSYNC];
static uint64_t g_sync_id[NSYNC];

static void on_log(int level, const char *msg)
{
    (void)level;
    const char *p = strstr(msg, "live syncs: ");
    if (p)
        g_live = strtol(p + 12, NULL, 10);
}

static int cb_ok(void *ud) { (void)ud; return 0; }
static int cb_fail(void *ud) { (void)ud; return 1; }

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "cr_fuzz: missing %s\n", name);
        abort();
    }
    return p;
}

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "cr_fuzz: setup failed: %s\n", #x); abort(); } } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    setenv("OST_DEBUG_LIVE_SYNCS", "1", 1);
    const char *path = getenv("OST_FUZZ_LIB");
    void *lib = dlopen(path ? path : OST_FUZZ_LIB_DEFAULT, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cr_fuzz: dlopen: %s\n", dlerror());
        abort();
    }
    L.log_reg = sym(lib, "os_transport_log_reg");
    L.init = sym(lib, "os_transport_init");
    L.send = sym(lib, "os_transport_send");
    L.recv = sym(lib, "os_transport_recv");
    L.wake = sym(lib, "os_transport_wake_up_task");
    L.wait_t = sym(lib, "wait_and_free_sync_timeout");
    L.cancel = sym(lib, "os_transport_cancel_tasks");
    L.destroy = sym(lib, "os_transport_destroy");
    CHECK(L.log_reg(-1, on_log) == 0);

    CHECK(urma_init(NULL) == URMA_SUCCESS);
    urma_context_t *ctx = ufx_open(NULL);
    CHECK(ctx);
    g_jfc = ufx_jfc(ctx, 4096, NULL);
    CHECK(g_jfc);
    urma_jfs_cfg_t sc = ufx_jfs_cfg(1024, g_jfc);
    urma_jfs_t *jfs = urma_create_jfs(ctx, &sc);
    CHECK(jfs);
    urma_jfr_cfg_t rc = ufx_jfr_cfg(1024, g_jfc);
    urma_jfr_t *jfr = urma_create_jfr(ctx, &rc);
    CHECK(jfr);
    urma_jetty_t *jetty = ufx_jetty_shared(ctx, &sc, jfr, g_jfc);
    CHECK(jetty);
    urma_target_jetty_t *tj = ufx_import_jetty(ctx, jetty, NULL);
    CHECK(tj);
    size_t len = 14u << 20;
    void *mem = calloc(1, len);
    CHECK(mem);
    urma_target_seg_t *seg = ufx_reg_seg(ctx, mem, len);
    CHECK(seg);
    urma_target_seg_t *iseg = ufx_import_seg(ctx, seg, 0);
    CHECK(iseg);
    urma_loopback_set_nocopy(true);
    g_ji = (urma_jetty_info_t){ .jfs = jfs, .jetty = NULL, .tjetty = tj, .jetty_mode = JETTY_MODE_DUPLEX };
    g_src = (ost_buffer_info_t){ .addr = (uint64_t)(uintptr_t)mem, .tseg = seg };
    g_dst = (ost_buffer_info_t){ .addr = (uint64_t)(uintptr_t)mem, .tseg = iseg };
    g_host = g_src;
    g_dev = (ost_device_info_t){ .jfr = jfr, .jetty = jetty, .dst = mem };
    os_transport_cfg_t cfg = {0};
    cfg.worker_thread_num = 2;
    cfg.recv_queue_capacity = 64;
    CHECK(L.init(NULL, &cfg, &g_h) == 0 && g_h);
    return 0;
}

/* Input reader: returns 0 past the end. */
typedef struct { const uint8_t *p; size_t n; } rd_t;
static uint8_t u8(rd_t *r) { if (!r->n) return 0; r->n--; return *r->p++; }
static uint64_t u64(rd_t *r) { uint64_t v = 0; for (int i = 0; i < 8; i++) v |= (uint64_t)u8(r) << (8 * i); return v; }
static uint32_t u32(rd_t *r) { uint32_t v = 0; for (int i = 0; i < 4; i++) v |= (uint32_t)u8(r) << (8 * i); return v; }

/* Request ids: small set so fuzzed CRs and real requests collide. */
static uint64_t id_of(uint8_t b) { return 1 + (b & 15); }
static uint32_t len_of(uint8_t b)
{
    static const uint32_t lens[8] = { 1, 4096, 2u << 20, (2u << 20) + 1, 3u << 20, 5u << 20, 14u << 20, 14680064 };
    return lens[b & 7];
}

static void keep(task_sync_t *s, uint64_t id)
{
    if (!s)
        return;
    for (int i = 0; i < NSYNC; i++)
        if (!g_sync[i]) { g_sync[i] = s; g_sync_id[i] = id; return; }
    urma_status_t st;
    L.wait_t(g_h, s, 0, &st); /* table full: consume at once */
}

static void poll_feed(uint8_t mode)
{
    urma_cr_t crs[16];
    int n = urma_poll_jfc(g_jfc, 16, crs);
    for (int i = 0; i < n; i++) {
        switch (mode & 3) {
        case 1: break;                                 /* drop */
        case 2: L.wake(g_h, &crs[i]); /* fallthrough */ /* duplicate */
        default: L.wake(g_h, &crs[i]);
        }
    }
}

/* Destroys the instance (replay driver and valgrind runs; libFuzzer never calls it). */
int cr_fuzz_teardown(void)
{
    return L.destroy(g_h) == 0 && L.destroy(g_h) == (uint32_t)-1 ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rd_t r = { data, size };
    urma_status_t st;
    for (int step = 0; r.n && step < 64; step++) {
        uint8_t op = u8(&r) % 9;
        switch (op) {
        case 0: { /* recv */
            uint8_t a = u8(&r), b = u8(&r);
            task_sync_t *s = NULL;
            if (L.recv(g_h, &g_host, &g_dev, len_of(b), id_of(a), &s, (b & 0x80) ? cb_fail : cb_ok) == 0)
                keep(s, id_of(a));
            break;
        }
        case 1: { /* send */
            uint8_t a = u8(&r), c = u8(&r), b = u8(&r);
            task_sync_t *s = NULL;
            L.send(g_h, &g_ji, &g_src, &g_dst, len_of(b), id_of(a), id_of(c), &s, &st);
            keep(s, id_of(a));
            break;
        }
        case 2: case 3: { /* arbitrary CR */
            urma_cr_t cr;
            memset(&cr, 0, sizeof cr);
            uint8_t sel = u8(&r);
            cr.status = (sel & 1) ? u32(&r) : (sel & 2) ? (uint32_t)u8(&r) % 24 : 0;
            cr.opcode = (sel & 4) ? u32(&r) : URMA_CR_OPC_SEND_WITH_IMM;
            cr.flag.value = u8(&r);
            uint8_t ids = u8(&r);
            uint64_t ud = ((uint64_t)(ids >> 4) << 60) | id_of(ids); /* type + chunk id from the high nibble */
            cr.user_ctx = (sel & 8) ? u64(&r) : ud;
            cr.imm_data = (sel & 16) ? u64(&r) : (ud & ~0x0FFFFFFFFFFFFFFFull) | ufx_enc(id_of(ids));
            cr.completion_len = u32(&r);
            cr.local_id = u32(&r);
            cr.user_data = (uintptr_t)u64(&r);
            L.wake(g_h, &cr);
            break;
        }
        case 4: poll_feed(u8(&r)); break;
        case 5: { /* timed wait, timeout 0 */
            uint8_t i = u8(&r) % NSYNC;
            if (g_sync[i]) { L.wait_t(g_h, g_sync[i], 0, &st); g_sync[i] = NULL; }
            break;
        }
        case 6: { /* cancel by id, maybe with its sync */
            uint8_t i = u8(&r) % NSYNC;
            if (g_sync[i] && (i & 1)) { L.cancel(g_h, &g_sync[i], g_sync_id[i]); g_sync[i] = NULL; }
            else L.cancel(g_h, NULL, id_of(u8(&r)));
            break;
        }
        case 7: { /* forged / stale sync values: must be refused */
            task_sync_t *f = (task_sync_t *)(uintptr_t)u64(&r);
            L.wait_t(g_h, f, 0, &st);
            task_sync_t *g = f;
            L.cancel(g_h, &g, 99);
            break;
        }
        case 8: usleep(u8(&r) & 63); break; /* let the workers run */
        }
    }
    /* Drain: feed what is left, consume every sync, and require the live count to reach 0. */
    for (int k = 0; k < 4; k++) { usleep(50); poll_feed(0); }
    for (int i = 0; i < NSYNC; i++)
        if (g_sync[i]) { L.wait_t(g_h, g_sync[i], 0, &st); g_sync[i] = NULL; }
    for (int k = 0; k < 20000; k++) {
        g_live = -1;
        L.cancel(g_h, NULL, 0xFFFFFFFFFull);
        if (g_live == 0)
            return 0;
        poll_feed(0);
        usleep(100);
    }
    fprintf(stderr, "cr_fuzz: %ld syncs still live after every sync was consumed (leak)\n", g_live);
    abort();
}
