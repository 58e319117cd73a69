/*
 * urma_fixture.h - the URMA set-up every C test program of this repository shares.
 *
 * One context on a named device, completion queues in poll or event mode, a sender JFS, jetties
 * (with their own JFR or on a shared one), registered and imported segments, the peer's jetty
 * imported as the target, and a poller thread that hands every completion record to
 * os_transport_wake_up_task() the way an application does (the library has no poller of its own).
 *
 * It uses nothing but the public URMA API, so it runs over the loopback liburma.so.0 as over UMDK.
 * It does not link libos_transport: the poller calls the wake-up function it is given (the
 * linked os_transport_wake_up_task, or one found with dlsym). Compile urma_fixture.c with the
 * program: cc -Itests/c ... prog.c tests/c/urma_fixture.c -lurma -pthread
 *
 * The set-up functions return NULL on failure (with a message on stderr); the caller checks.
 */
#ifndef URMA_FIXTURE_H
#define URMA_FIXTURE_H

#include <pthread.h>
#include <stdint.h>

#include <ub/umdk/urma/urma_api.h>

/* A context on the device called `dev_name` (NULL: the first device there is), after the
 * caller's urma_init (which the caller pairs with urma_uninit). */
urma_context_t *ufx_open(const char *dev_name);

/* A JFC of `depth` entries; in event mode when `jfce` is not NULL. */
urma_jfc_t *ufx_jfc(urma_context_t *ctx, uint32_t depth, urma_jfce_t *jfce);

/* Queue configurations: reliable message (RM) transport, one SGE, completions on `jfc`. */
urma_jfs_cfg_t ufx_jfs_cfg(uint32_t depth, urma_jfc_t *jfc);
urma_jfr_cfg_t ufx_jfr_cfg(uint32_t depth, urma_jfc_t *jfc);

/* A jetty with its own JFR: `*jfr_cfg` is referenced by the jetty and must outlive it. */
urma_jetty_t *ufx_jetty(urma_context_t *ctx, const urma_jfs_cfg_t *jfs_cfg, urma_jfr_cfg_t *jfr_cfg);

/* A jetty on the shared receive queue `jfr` (receive completions on `jfc`). */
urma_jetty_t *ufx_jetty_shared(urma_context_t *ctx, const urma_jfs_cfg_t *jfs_cfg, urma_jfr_t *jfr,
                               urma_jfc_t *jfc);

/* The peer's jetty as the target of this side's work requests (RM). */
urma_target_jetty_t *ufx_import_jetty(urma_context_t *ctx, const urma_jetty_t *peer, urma_token_t *token);

/* `len` bytes at `buf`, registered without a token for local and remote read and write. */
urma_target_seg_t *ufx_reg_seg(urma_context_t *ctx, void *buf, uint64_t len);

/* The peer's segment `seg` imported (no token) with the import access flags `access`. */
urma_target_seg_t *ufx_import_seg(urma_context_t *ctx, urma_target_seg_t *seg, uint32_t access);

/* ---- the application's poller ---------------------------------------------------------------- */

/* os_transport_wake_up_task's prototype. */
typedef int (*ufx_wake_fn)(void *handle, void *cr);

typedef struct ufx_poller ufx_poller_t;

struct ufx_poller {
    /* set before ufx_poller_start */
    urma_jfc_t *jfc;
    urma_jfce_t *jfce;      /* event mode (wait, drain, ack, rearm) when not NULL */
    ufx_wake_fn wake;       /* called as wake(handle, cr) for every CR */
    void *handle;
    /* optional: replaces wake(handle, cr) (it calls the wake function itself); returns its result */
    int (*hand_over)(ufx_poller_t *p, urma_cr_t *cr);
    void *arg;              /* for hand_over */
    int batch;              /* CRs per urma_poll_jfc (0: 16) */
    long idle_ns;           /* poll mode: sleep when the JFC is empty (0: sched_yield) */
    /* counted by the thread (read them after ufx_poller_stop) */
    int crs;                /* CRs handed over */
    int cr_errors;          /* CRs with a status other than URMA_CR_SUCCESS, and poll errors */
    int wake_errors;        /* hand-overs that returned non-zero */
    /* private */
    int stop;
    pthread_t th;
};

/* Starts the poller thread (0, or -1 with a message). */
int ufx_poller_start(ufx_poller_t *p);
/* Stops it: it drains the JFC once more, then the thread is joined. */
void ufx_poller_stop(ufx_poller_t *p);
/* Polls and hands over until the JFC is empty; returns the number of CRs. */
int ufx_drain(ufx_poller_t *p);

/* ---- the tests' model of the request-id transport encoding (contract §2.3) ------------------- */

/* enc(): bits 19:0 of a 40-bit key stay, bits 39:20 move to 59:40. */
static inline uint64_t ufx_enc(uint64_t x)
{
    return (x & 0xFFFFFULL) | (((x >> 20) & 0xFFFFFULL) << 40);
}

/* dec(): the inverse of enc(); bits 39:20 of the input are ignored. */
static inline uint64_t ufx_dec(uint64_t y)
{
    return (y & 0xFFFFFULL) | (((y >> 40) & 0xFFFFFULL) << 20);
}

#endif
