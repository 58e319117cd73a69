/*
 * fake_urma.h - TEST DOUBLE ONLY. A tiny recording URMA fake used by legacy-c/tests/smoke.c when
 * the loopback provider is not available. It is built as its own liburma.so.0 and implements
 * just the four post functions the library calls; it records every posted WR and never moves
 * data or produces completions (the test builds the CRs itself).
 */
#ifndef FAKE_URMA_H
#define FAKE_URMA_H

#include <stdint.h>

#include <ub/umdk/urma/urma_api.h>

typedef enum { FAKE_VIA_JFS = 1, FAKE_VIA_JETTY_SEND = 2, FAKE_VIA_JETTY_RECV = 3, FAKE_VIA_JFR = 4 } fake_via_t;

typedef struct {
    fake_via_t via;
    const void *queue;
    uint32_t opcode;
    uint32_t flag;
    const void *tjetty;
    uint64_t user_ctx;
    uint32_t num_src;
    uint64_t src_addr;
    uint32_t src_len;
    const void *src_tseg;
    uint32_t num_dst;
    uint64_t dst_addr;
    uint32_t dst_len;
    const void *dst_tseg;
    uint64_t imm_or_notify; /* send.imm_data (SEND_IMM) or rw.notify_data (WRITE) */
    const void *send_tseg;
    int has_next;
} fake_wr_t;

void fake_urma_reset(void);
/* Posts after the next `skip` successful ones return `status` (0 disables). */
void fake_urma_fail_send(urma_status_t status, int skip);
void fake_urma_fail_recv(urma_status_t status, int skip);
int fake_urma_count(void);
/* Copies record i (all posts, send and recv, in order); returns 0 or -1. */
int fake_urma_get(int i, fake_wr_t *out);
/* Waits up to ms milliseconds until at least n records exist; returns the count. */
int fake_urma_wait_count(int n, int ms);

#endif
