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
#include <stddef.h>
#include <stdint.h>

#include <ub/umdk/urma/urma_api.h>

/* A context on the device called `dev_name` (NULL: the first device there is), after the
 * caller's urma_init (which the caller pairs with urma_uninit). */
urma_context_t *ufx_open(const char *dev_name);

/* The loopback's control function `name` (urma_loopback_*), wherever the loopback is: the
 * liburma.so.0 of the process (standalone face), or liburma-loopback.so, the plugin a genuine
 * URMA core loaded (with RTLD_LOCAL, so not in the global scope). NULL if neither has it.
 * Call it after urma_init (the core loads its plugins there). Link with -ldl. */
void *ufx_loopback_symbol(const char *name);

/* A JFC of `depth` entries; in event mode when `jfce` is not NULL. */
urma_jfc_t *ufx_jfc(urma_context_t *ctx, uint32_t depth, urma_jfce_t *jfce);

/* Queue configurations: reliable message (RM) transport, one SGE, completions on `jfc`. */
urma_jfs_cfg_t ufx_jfs_cfg(uint32_t depth, urma_jfc_t *jfc);
urma_jfr_cfg_t ufx_jfr_cfg(uint32_t depth, urma_jfc_t *jfc);

/* A jetty receiving through a JFR of its own, made here from `*jfr_cfg` and shared by the jetty
 * (on a UB device the URMA core refuses a jetty whose receive queue is not a shared JFR).
 * Delete it with ufx_delete_jetty. */
urma_jetty_t *ufx_jetty(urma_context_t *ctx, const urma_jfs_cfg_t *jfs_cfg, urma_jfr_cfg_t *jfr_cfg);

/* Deletes a jetty made by ufx_jetty, then its JFR; the status of the first failing delete. */
urma_status_t ufx_delete_jetty(urma_jetty_t *jetty);

/* A jetty on the shared receive queue `jfr` (receive completions on `jfc`). */
urma_jetty_t *ufx_jetty_shared(urma_context_t *ctx, const urma_jfs_cfg_t *jfs_cfg, urma_jfr_t *jfr,
                               urma_jfc_t *jfc);

/* The peer's jetty as the target of this side's work requests (RM). */
urma_target_jetty_t *ufx_import_jetty(urma_context_t *ctx, const urma_jetty_t *peer, urma_token_t *token);

/* The jetty named `id` (possibly another process's) imported with transport mode `tm`. */
urma_target_jetty_t *ufx_import_jetty_id(urma_context_t *ctx, const urma_jetty_id_t *id,
                                         urma_transport_mode_t tm, urma_token_t *token);

/* `len` bytes at `buf`, registered without a token for local and remote read and write. */
urma_target_seg_t *ufx_reg_seg(urma_context_t *ctx, void *buf, uint64_t len);

/* The same with a plain-text token `token` (importers must present it). */
urma_target_seg_t *ufx_reg_seg_token(urma_context_t *ctx, void *buf, uint64_t len, uint32_t token);

/* The peer's segment `seg` imported (no token) with the import access flags `access`. */
urma_target_seg_t *ufx_import_seg(urma_context_t *ctx, urma_target_seg_t *seg, uint32_t access);

/* Waits for `n` CRs of `jfc` (event mode through `jfce` when not NULL: wait, poll, ack, rearm)
 * into `out`, at most `timeout_ms`; returns the number of CRs (fewer on timeout), -1 on a
 * poll or wait error. In event mode the JFC must have been armed (urma_rearm_jfc) first. */
int ufx_wait_crs(urma_jfc_t *jfc, urma_jfce_t *jfce, urma_cr_t *out, int n, int timeout_ms);

/* ---- two processes: endpoint information over TCP on 127.0.0.1 ------------------------------ */

/* What one process tells the other so that the peer can import its jetty and segment: the
 * context's EID and uasid, the jetty's id and token, the segment's address, length, token id
 * and token value. Sent as is (both processes run on the same host). */
typedef struct ufx_peer_info {
    uint32_t magic; /* UFX_PEER_MAGIC */
    uint32_t uasid;
    urma_eid_t eid;
    urma_jetty_id_t jetty_id;
    uint32_t jetty_token;
    uint32_t seg_token_id;
    uint32_t seg_token;
    uint64_t seg_va;
    uint64_t seg_len;
} ufx_peer_info_t;

#define UFX_PEER_MAGIC 0x55465850u /* "UFXP" */

/* Fills `info` from a context, a jetty (with its token) and a registered segment (with its
 * token; NULL: no segment). */
void ufx_peer_info(ufx_peer_info_t *info, const urma_context_t *ctx, const urma_jetty_t *jetty,
                   uint32_t jetty_token, const urma_target_seg_t *seg, uint32_t seg_token);

/* The peer's segment described by `info`, imported with its token for remote write. */
urma_target_seg_t *ufx_import_peer_seg(urma_context_t *ctx, const ufx_peer_info_t *info);

/* A listening TCP socket on 127.0.0.1 with an ephemeral port (stored in *port); -1 on error. */
int ufx_tcp_listen(uint16_t *port);
/* Accepts one connection within `timeout_ms`; -1 on error or timeout. */
int ufx_tcp_accept(int lfd, int timeout_ms);
/* Connects to 127.0.0.1:`port`; -1 on error. */
int ufx_tcp_connect(uint16_t port);
/* Writes / reads exactly `len` bytes (reads give up after `timeout_ms`); 0 or -1. */
int ufx_tcp_send(int fd, const void *buf, size_t len);
int ufx_tcp_recv(int fd, void *buf, size_t len, int timeout_ms);
/* Sends `mine`, receives the peer's into `peer` and checks its magic; 0 or -1. */
int ufx_exchange(int fd, const ufx_peer_info_t *mine, ufx_peer_info_t *peer, int timeout_ms);

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
