/*
 * ost_urma.c - work-request builders and posting (docs/contract.md §2.4, §3.2, §4.1).
 *
 * Every send-side WR: tjetty from the jetty info, flag 0 except complete_enable = 1
 * (inline_flag 0), next NULL. Posting target: urma_post_jfs_wr(jfs) when jfs is set, else
 * urma_post_jetty_send_wr(jetty), else no post and URMA_FAIL. Scatter lists live on the stack;
 * the provider copies them at post time.
 */
#include "ost_urma.h"

#include <stddef.h>
#include <string.h>
#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT
#include "os_transport_inject.h"
#endif

static urma_status_t ost_urma_post_send(const ost_write_info_t *info, urma_jfs_wr_t *wr)
{
    urma_jfs_wr_t *bad_wr = NULL;

    if (info->jfs != NULL) {
        return urma_post_jfs_wr(info->jfs, wr, &bad_wr);
    }
    if (info->jetty != NULL) {
        return urma_post_jetty_send_wr(info->jetty, wr, &bad_wr);
    }
    return URMA_FAIL;
}

static void ost_urma_init_send_wr(urma_jfs_wr_t *wr, const ost_write_info_t *info, urma_opcode_t opcode,
                                  uint64_t user_ctx)
{
    memset(wr, 0, sizeof(*wr));
    wr->opcode = opcode;
    wr->flag.value = 0;
    wr->flag.bs.complete_enable = 1;
    wr->flag.bs.inline_flag = 0;
    wr->tjetty = info->tjetty;
    wr->user_ctx = user_ctx;
    wr->next = NULL;
}

urma_status_t ost_urma_write_chunk(const ost_write_info_t *info, const ost_chunk_t *chunk, uint64_t user_ctx)
{
    urma_jfs_wr_t wr;
    urma_sge_t src_sge;
    urma_sge_t dst_sge;

#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT
    {
        urma_status_t injected = URMA_SUCCESS;
        OS_TRANSPORT_INJECT_POINT(OS_TRANSPORT_INJECT_URMA_WRITE, injected);
    }
#endif

    if (info == NULL || chunk == NULL || (info->jfs == NULL && info->jetty == NULL)) {
        return URMA_FAIL;
    }
    memset(&src_sge, 0, sizeof(src_sge));
    memset(&dst_sge, 0, sizeof(dst_sge));
    src_sge.addr = chunk->src;
    src_sge.len = chunk->len;
    src_sge.tseg = info->src_tseg;
    dst_sge.addr = chunk->dst;
    dst_sge.len = chunk->len;
    dst_sge.tseg = info->dst_tseg;

    ost_urma_init_send_wr(&wr, info, URMA_OPC_WRITE, user_ctx);
    wr.rw.src.sge = &src_sge;
    wr.rw.src.num_sge = 1;
    wr.rw.dst.sge = &dst_sge;
    wr.rw.dst.num_sge = 1;
    wr.rw.notify_data = 0;
    return ost_urma_post_send(info, &wr);
}

urma_status_t ost_urma_write_notify(const ost_write_info_t *info, uint64_t user_ctx, uint64_t imm_data)
{
    urma_jfs_wr_t wr;

#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT
    {
        urma_status_t injected = URMA_SUCCESS;
        OS_TRANSPORT_INJECT_POINT(OS_TRANSPORT_INJECT_URMA_WRITE, injected);
    }
#endif

    if (info == NULL || (info->jfs == NULL && info->jetty == NULL)) {
        return URMA_FAIL;
    }
    ost_urma_init_send_wr(&wr, info, URMA_OPC_SEND_IMM, user_ctx);
    wr.send.src.sge = NULL;
    wr.send.src.num_sge = 0;
    wr.send.tseg = NULL;
    wr.send.imm_data = imm_data;
    return ost_urma_post_send(info, &wr);
}

urma_status_t ost_urma_recv_with_notify(urma_jetty_t *jetty, urma_jfr_t *jfr, urma_target_seg_t *tseg,
                                        uint64_t user_ctx)
{
    urma_jfr_wr_t wr;
    urma_jfr_wr_t *bad_wr = NULL;
    urma_sge_t sge;

#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT
    {
        urma_status_t injected = URMA_SUCCESS;
        OS_TRANSPORT_INJECT_POINT(OS_TRANSPORT_INJECT_URMA_RECV, injected);
    }
#endif

    if (jetty == NULL && jfr == NULL) {
        return URMA_FAIL;
    }
    memset(&sge, 0, sizeof(sge));
    sge.addr = 0;
    sge.len = 0;
    sge.tseg = tseg;
    memset(&wr, 0, sizeof(wr));
    wr.src.sge = &sge;
    wr.src.num_sge = 1;
    wr.user_ctx = user_ctx;
    wr.next = NULL;
    if (jetty != NULL) {
        return urma_post_jetty_recv_wr(jetty, &wr, &bad_wr);
    }
    return urma_post_jfr_wr(jfr, &wr, &bad_wr);
}
