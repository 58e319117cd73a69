/*
 * ost_urma.h - work-request builders and posting (docs/contract.md §2.4, §3.2, §4.1).
 *
 * The original exported these as urma_write_chunk / urma_write_notify / urma_recv_with_notify,
 * squatting on the URMA SDK namespace; here they are internal and carry the ost_ prefix.
 */
#ifndef OST_URMA_H
#define OST_URMA_H

#include <stdint.h>

#include "os_transport.h"

/* One chunk of a request (§3.1). Only the last chunk can be short. */
typedef struct ost_chunk {
    uint64_t src;
    uint64_t dst;
    uint32_t len;
    uint32_t chunk_id;
} ost_chunk_t;

/* Everything a send-side post needs, copied out of the caller's structs at send time. */
typedef struct ost_write_info {
    urma_jfs_t *jfs;           /* preferred */
    urma_jetty_t *jetty;       /* fallback */
    urma_target_jetty_t *tjetty;
    urma_target_seg_t *src_tseg;
    urma_target_seg_t *dst_tseg;
    urma_jfs_wr_flag_t flag;   /* value 0; never copied into a WR */
} ost_write_info_t;

/* URMA_OPC_WRITE of one chunk, user_ctx as given, notify_data 0. URMA_FAIL without queue or chunk. */
urma_status_t ost_urma_write_chunk(const ost_write_info_t *info, const ost_chunk_t *chunk, uint64_t user_ctx);
/* Zero-length URMA_OPC_SEND_IMM carrying imm_data. URMA_FAIL without queue. */
urma_status_t ost_urma_write_notify(const ost_write_info_t *info, uint64_t user_ctx, uint64_t imm_data);
/* One zero-length recv WR {addr 0, len 0, tseg}: jetty if non-NULL, else jfr, else URMA_FAIL. */
urma_status_t ost_urma_recv_with_notify(urma_jetty_t *jetty, urma_jfr_t *jfr, urma_target_seg_t *tseg,
                                        uint64_t user_ctx);

#endif /* OST_URMA_H */
