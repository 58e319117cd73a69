/* C consumer of the loopback: compiled against urma-sys's bundled header and linked with -lurma. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ub/umdk/urma/urma_api.h>
#include "urma_fixture.h"
#include "urma_loopback.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #c); return 1; } } while (0)

int main(void)
{
    CHECK(urma_init(NULL) == URMA_SUCCESS);
    int n = 0;
    urma_device_t **list = urma_get_device_list(&n);
    CHECK(list != NULL && n == 1);
    urma_device_t *dev = list[0];
    CHECK(strcmp(dev->name, "loopback0") == 0);
    urma_free_device_list(list);
    urma_context_t *ctx = urma_create_context(dev, 0);
    CHECK(ctx != NULL);

    urma_jfc_t *sjfc = ufx_jfc(ctx, 64, NULL);
    urma_jfc_t *rjfc = ufx_jfc(ctx, 64, NULL);
    CHECK(sjfc && rjfc && sjfc->jfc_cfg.depth == 64);
    urma_jfs_cfg_t sc = ufx_jfs_cfg(64, sjfc);
    urma_jfs_t *jfs = urma_create_jfs(ctx, &sc);
    CHECK(jfs != NULL);
    urma_jfr_cfg_t rc = { .depth = 8, .max_sge = 1, .trans_mode = URMA_TM_RM, .jfc = rjfc, .token_value = { .token = 7 } };
    rc.flag.bs.token_policy = URMA_TOKEN_PLAIN_TEXT;
    sc.jfc = rjfc;
    urma_jetty_t *jetty = ufx_jetty(ctx, &sc, &rc);
    CHECK(jetty != NULL);
    urma_token_t tok = { .token = 7 };
    urma_target_jetty_t *tj = ufx_import_jetty(ctx, jetty, &tok);
    CHECK(tj != NULL);

    static char src[4096], dst[4096];
    memset(src, 0x3C, sizeof(src));
    urma_seg_cfg_t segc = { .va = (uint64_t)(uintptr_t)src, .len = sizeof(src), .token_value = { .token = 9 } };
    segc.flag.bs.token_policy = URMA_TOKEN_PLAIN_TEXT;
    segc.flag.bs.access = URMA_ACCESS_READ | URMA_ACCESS_WRITE;
    urma_target_seg_t *ssrc = urma_register_seg(ctx, &segc);
    segc.va = (uint64_t)(uintptr_t)dst;
    urma_target_seg_t *sdst = urma_register_seg(ctx, &segc);
    CHECK(ssrc && sdst && ssrc->seg.len == sizeof(src));
    urma_import_seg_flag_t ifl = { .value = 0 };
    urma_token_t stok = { .token = 9 };
    urma_target_seg_t *rdst = urma_import_seg(ctx, &sdst->seg, &stok, 0, ifl);
    CHECK(rdst != NULL);

    urma_jfr_wr_t rwr = { .user_ctx = 0x1111 };
    urma_jfr_wr_t *rbad = NULL;
    CHECK(urma_post_jetty_recv_wr(jetty, &rwr, &rbad) == URMA_SUCCESS);

    urma_sge_t s = { .addr = (uint64_t)(uintptr_t)src, .len = 4096, .tseg = ssrc };
    urma_sge_t d = { .addr = (uint64_t)(uintptr_t)dst, .len = 4096, .tseg = rdst };
    urma_jfs_wr_t imm = { .opcode = URMA_OPC_SEND_IMM, .tjetty = tj, .user_ctx = 0x2222 };
    imm.flag.bs.complete_enable = 1;
    imm.send.imm_data = 0x0ABCDE0000012345ULL;
    urma_jfs_wr_t w = { .opcode = URMA_OPC_WRITE, .tjetty = tj, .user_ctx = 0x3333, .next = &imm };
    w.flag.bs.complete_enable = 1;
    w.rw.src.sge = &s; w.rw.src.num_sge = 1;
    w.rw.dst.sge = &d; w.rw.dst.num_sge = 1;
    urma_jfs_wr_t *bad = NULL;
    CHECK(urma_post_jfs_wr(jfs, &w, &bad) == URMA_SUCCESS);

    urma_cr_t cr[4];
    memset(cr, 0, sizeof(cr));
    CHECK(urma_poll_jfc(sjfc, 4, cr) == 2);
    CHECK(cr[0].user_ctx == 0x3333 && cr[1].user_ctx == 0x2222 && cr[0].flag.bs.s_r == 0);
    CHECK(urma_poll_jfc(rjfc, 4, cr) == 1);
    CHECK(cr[0].status == URMA_CR_SUCCESS && cr[0].flag.bs.s_r == 1 && cr[0].flag.bs.jetty == 1);
    CHECK(cr[0].opcode == URMA_CR_OPC_SEND_WITH_IMM && cr[0].imm_data == 0x0ABCDE0000012345ULL);
    CHECK(cr[0].user_ctx == 0x1111 && cr[0].local_id == jetty->jetty_id.id);
    CHECK(cr[0].remote_id.id == jfs->jfs_id.id);
    CHECK(memcmp(src, dst, sizeof(src)) == 0);

    urma_loopback_counters_t c;
    CHECK(urma_loopback_get_counters(&c) == 0);
    CHECK(c.crs_polled == 3 && c.bytes_copied == 4096);

    CHECK(urma_unimport_seg(rdst) == 0 && urma_unregister_seg(ssrc) == 0 && urma_unregister_seg(sdst) == 0);
    CHECK(urma_unimport_jetty(tj) == 0 && ufx_delete_jetty(jetty) == 0 && urma_delete_jfs(jfs) == 0);
    CHECK(urma_delete_jfc(sjfc) == 0 && urma_delete_jfc(rjfc) == 0);
    CHECK(urma_delete_context(ctx) == 0);
    CHECK(urma_uninit() == 0);
    printf("c-smoke ok\n");
    return 0;
}
