/*
 * urma_loopback.h - test-control API of the software loopback URMA provider (liburma.so.0 built
 * from urma-loopback). Not part of URMA: only the loopback exports these symbols.
 *
 * Counting conventions: "the Nth send WR" counts every send WR reaching urma_post_jfs_wr /
 * urma_post_jetty_send_wr (1-based, since process start or urma_loopback_reset); "the Nth recv
 * WR" likewise for urma_post_jfr_wr / urma_post_jetty_recv_wr; "the Nth CR" counts every
 * completion record generated (send and receive side together, before drop/duplicate).
 * Every rule fires once.
 *
 * Environment (read once, at the first urma_init):
 *   URMA_LOOPBACK_TRACE=/path   write the JSON-lines trace to /path (truncated)
 *   URMA_LOOPBACK_KNOBS=spec    same syntax as urma_loopback_apply_knobs()
 * and at the first urma_create_context:
 *   URMA_LOOPBACK_DIR=/dir      the host registry that processes sharing loopback0 use
 *                               (default /dev/shm/urma-loopback-<uid>; docs/loopback.md,
 *                               "Multiple processes")
 */
#ifndef URMA_LOOPBACK_H
#define URMA_LOOPBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define URMA_LOOPBACK_Q_SEND 1
#define URMA_LOOPBACK_Q_RECV 2

#define URMA_LOOPBACK_CR_DROP 1
#define URMA_LOOPBACK_CR_DUP 2

#define URMA_LOOPBACK_ORDER_FIFO 0
#define URMA_LOOPBACK_ORDER_REVERSE 1
#define URMA_LOOPBACK_ORDER_SHUFFLE 2

typedef struct urma_loopback_counters {
    uint64_t send_wrs;          /* send WRs accepted by post calls */
    uint64_t recv_wrs;          /* recv WRs accepted by post calls */
    uint64_t post_errors;       /* post calls that failed (one per failing call) */
    uint64_t crs_generated;     /* CRs generated (before drop/dup) */
    uint64_t crs_polled;        /* CRs returned by urma_poll_jfc */
    uint64_t crs_dropped;       /* CRs dropped by urma_loopback_cr_action */
    uint64_t crs_duplicated;    /* CRs delivered twice by urma_loopback_cr_action */
    uint64_t crs_held;          /* CRs currently held (urma_loopback_hold_crs) */
    uint64_t crs_overflow;      /* CRs pushed into a JFC already holding `depth` CRs (kept) */
    uint64_t crs_error;         /* generated CRs with status != URMA_CR_SUCCESS */
    uint64_t rnr_errors;        /* sends/write-imms failed with RNR_RETRY_CNT_EXC (immediate or expired) */
    uint64_t bytes_copied;      /* payload bytes actually copied */
    uint64_t bytes_transferred; /* payload bytes of successful transfers (also in no-copy mode) */
    uint64_t events_reported;   /* completion events returned by urma_wait_jfc */
    uint64_t events_acked;      /* events acknowledged with urma_ack_jfc */
    uint64_t crs_in_flight;     /* CRs held or waiting for a delay (not yet in a JFC) */
    uint64_t live_contexts;
    uint64_t live_jfce;
    uint64_t live_jfc;
    uint64_t live_jfs;
    uint64_t live_jfr;
    uint64_t live_jetty;
    uint64_t live_tjetty;       /* imported jetties and JFRs */
    uint64_t live_segs;         /* registered segments */
    uint64_t live_imported_segs;
    uint64_t live_token_ids;
    uint64_t rnr_parked;        /* sends/write-imms parked because no recv WR was posted */
    uint64_t rnr_delivered_late; /* parked messages delivered by a later recv post */
    uint64_t rnr_expired;       /* parked messages failed (RNR CR) after the RNR timeout */
    uint64_t peer_refusals;     /* requests of other processes refused by a token check (each closed its connection) */
    uint64_t peer_refused_objects; /* objects refused at least once (each logged once) */
    uint64_t lock_order_violations; /* lock-order inversions found by a debug build since load (never reset) */
} urma_loopback_counters_t;

/* Clears knobs (held CRs are first released in FIFO order), counters, the trace (file closed,
 * capture stopped and emptied) and restarts the symbolic names (jfs1, seg1, ...). Live objects
 * are kept. */
void urma_loopback_reset(void);

/* Copies the counters. Returns 0, or -1 when out is NULL. */
int urma_loopback_get_counters(urma_loopback_counters_t *out);

/* The Nth WR of queue (URMA_LOOPBACK_Q_SEND / _Q_RECV) is rejected by its post call, which
 * returns status and sets *bad_wr to it. Returns 0, or -1 on bad arguments. */
int urma_loopback_fail_post(int queue, uint64_t nth, int status);

/* The Nth send WR is accepted but completes with cr_status (a urma_cr_status_t): no data moves,
 * no recv WR is consumed, and the send CR is generated even without complete_enable. */
int urma_loopback_fail_completion(uint64_t nth, uint32_t cr_status);

/* The Nth CR generated is dropped (URMA_LOOPBACK_CR_DROP) or delivered twice (_CR_DUP). */
int urma_loopback_cr_action(uint64_t nth, int action);

/* While hold is true, generated CRs are kept aside instead of entering their JFC. */
void urma_loopback_hold_crs(bool hold);

/* Releases the held CRs in order (URMA_LOOPBACK_ORDER_*; SHUFFLE is deterministic from seed),
 * now (delay_ms = 0, from the calling thread) or after delay_ms from a background thread.
 * Returns how many were released. */
uint64_t urma_loopback_release_crs(int order, uint64_t seed, uint32_t delay_ms);

/* Every CR generated from now on becomes visible ms milliseconds later (0 = off); order kept. */
void urma_loopback_set_cr_delay(uint32_t ms);

/* No-copy mode: WRs are validated and completed normally but no payload byte is copied. */
void urma_loopback_set_nocopy(bool on);

/* Bound of urma_delete_jfc waiting for unacked completion events (default 2000 ms). After it,
 * urma_delete_jfc returns URMA_EAGAIN and the JFC stays alive. */
void urma_loopback_set_delete_timeout(uint32_t ms);

/* Receiver-not-ready retry: a SEND/SEND_IMM/WRITE_IMM finding no recv WR at its target is parked
 * (FIFO per receive queue) and delivered by the next recv post there; after ms milliseconds
 * (default 200, or URMA_LOOPBACK_RNR_TIMEOUT_MS; urma_loopback_reset goes back to it) it fails
 * with URMA_CR_RNR_RETRY_CNT_EXC_ERR at the sender. 0 = fail at once. */
void urma_loopback_set_rnr_timeout(uint32_t ms);

/* Applies a knob spec: comma-separated items
 *   fail_post=N:STATUS  fail_recv_post=N:STATUS  fail_cr=N:CR_STATUS  drop_cr=N  dup_cr=N
 *   hold=0|1  delay_ms=N  nocopy=0|1  delete_timeout_ms=N  rnr_timeout_ms=N
 * (numbers decimal or 0x-hex; STATUS is an int like the function's argument, so "-1" is
 * accepted; a value out of range is rejected, never truncated). Returns the number of items applied, or -1 at the first item that
 * does not parse (earlier items stay applied). */
int urma_loopback_apply_knobs(const char *spec);

/* Opens a trace file: created with mode 0600, or emptied if it is a regular file of the effective
 * user with one link; a link, another user's file, a FIFO or a device is refused (-1) and left as
 * it was. NULL closes it. Returns 0 or -1. */
int urma_loopback_trace_open(const char *path);

/* Starts (discarding lines not yet taken) or stops the in-memory trace capture. */
void urma_loopback_trace_capture(bool on);

/* Takes the captured lines: one malloc'd NUL-terminated string, one JSON object per line, each
 * line ending with '\n' (empty string if none). *len (if not NULL) receives strlen. Free with
 * urma_loopback_free() or free(). NULL only when out of memory. */
char *urma_loopback_trace_take(size_t *len);

/* Frees memory returned by urma_loopback_trace_take. */
void urma_loopback_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* URMA_LOOPBACK_H */
