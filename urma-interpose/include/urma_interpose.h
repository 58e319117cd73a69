/* urma_interpose.h: control API of the URMA interposition layer (urma-interpose).
 *
 * The layer is a liburma.so.0 that forwards every URMA call to the real library named by
 * URMA_INTERPOSE_REAL (a path), tracing WRs and CRs and injecting faults on the way. Reach these
 * functions with dlsym(RTLD_DEFAULT, "urma_interpose_...") (or from the liburma.so.0 handle).
 * Numbering: "the Nth send / recv WR" counts WRs that reached a post call through the layer,
 * "the Nth CR" the CRs the provider returned from polls; 1-based, since load or reset.
 */
#ifndef URMA_INTERPOSE_H
#define URMA_INTERPOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define URMA_INTERPOSE_Q_SEND 1
#define URMA_INTERPOSE_Q_RECV 2
#define URMA_INTERPOSE_CR_DROP 1
#define URMA_INTERPOSE_CR_DUP 2
#define URMA_INTERPOSE_ORDER_FIFO 0
#define URMA_INTERPOSE_ORDER_REVERSE 1
#define URMA_INTERPOSE_ORDER_SHUFFLE 2

typedef struct urma_interpose_counters {
    uint64_t send_wrs;              /* send WRs posted to the provider */
    uint64_t recv_wrs;              /* recv WRs posted to the provider */
    uint64_t posts_failed_injected; /* WRs failed by fail_post (not forwarded) */
    uint64_t crs_from_provider;     /* CRs the provider returned from polls */
    uint64_t crs_to_app;            /* CRs handed to the application */
    uint64_t crs_rewritten;         /* CRs given an error status by fail_completion */
    uint64_t crs_dropped;
    uint64_t crs_duplicated;
    uint64_t crs_in_layer;          /* held, delayed or ready CRs kept by the layer now */
    uint64_t synthetic_events;      /* urma_wait_jfc results for CRs kept by the layer */
} urma_interpose_counters_t;

/* true when the real library is loaded (otherwise every URMA call fails). */
bool urma_interpose_active(void);
/* Clears faults (held CRs become ready, FIFO), numbering, counters, trace sinks; restarts names. */
void urma_interpose_reset(void);
/* The Nth WR of queue (Q_SEND / Q_RECV) fails with status, not forwarded. 0 or -1. */
int urma_interpose_fail_post(int queue, uint64_t nth, int status);
/* The Nth send WR is forwarded as a NOP (completion requested) whose CR gets cr_status:
 * nothing is executed. 0 or -1. */
int urma_interpose_fail_completion(uint64_t nth, uint32_t cr_status);
/* The Nth CR is dropped (CR_DROP) or handed over twice (CR_DUP). 0 or -1. */
int urma_interpose_cr_action(uint64_t nth, int action);
/* The CR of the Nth send WR is dropped (CR_DROP) or handed over twice (CR_DUP). 0 or -1. */
int urma_interpose_send_cr_action(uint64_t nth, int action);
/* The Nth receive-side CR polled is dropped or handed over twice. 0 or -1. */
int urma_interpose_recv_cr_action(uint64_t nth, int action);
/* Hold every CR polled from now on, until urma_interpose_release_crs. */
void urma_interpose_hold_crs(bool on);
/* Hand the held CRs over (order, seed for SHUFFLE) after delay_ms. Count, or UINT64_MAX. */
uint64_t urma_interpose_release_crs(int order, uint64_t seed, uint32_t delay_ms);
/* Hand every CR polled from now on over at least ms later (0: off). */
void urma_interpose_set_cr_delay(uint32_t ms);
/* "fail_post=N:ST,fail_recv_post=N:ST,fail_cr=N:CR_ST,drop_cr=N,dup_cr=N,drop_send_cr=N,
 *  dup_send_cr=N,drop_recv_cr=N,dup_recv_cr=N,hold=0|1,delay_ms=N" (the loopback's value
 * rules: ST a signed int, CR_ST a uint32_t, out of range rejected). Number of items applied,
 * or -1. */
int urma_interpose_apply_knobs(const char *spec);
int urma_interpose_get_counters(urma_interpose_counters_t *out);
/* Trace file (truncated); NULL closes it. 0 or -1. */
int urma_interpose_trace_open(const char *path);
/* Start (clearing) or stop the in-memory capture. */
void urma_interpose_trace_capture(bool on);
/* The captured lines, malloc'd, '\n'-terminated; free with urma_interpose_free. */
char *urma_interpose_trace_take(size_t *len);
void urma_interpose_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* URMA_INTERPOSE_H */
