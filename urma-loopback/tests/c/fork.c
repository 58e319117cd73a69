/* The DMA engine after fork(): the child, which inherits the parent's objects but not its engine
 * thread, posts on them and must see its WRs executed (its own engine starts); the parent's engine
 * keeps working. A hang in the child ends with SIGALRM, which the parent reports. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ub/umdk/urma/urma_api.h>
#include "urma_fixture.h"
#include "urma_loopback.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #c); return 1; } } while (0)

static char src[65536], dst[65536];

/* One WRITE of src into dst (byte pattern `fill`), its CR polled at once, the data checked. */
static int write_once(urma_jfs_t *jfs, urma_jfc_t *jfc, urma_target_jetty_t *tj, urma_target_seg_t *ssrc,
                      urma_target_seg_t *rdst, int fill, uint64_t uctx)
{
    memset(src, fill, sizeof(src));
    urma_sge_t s = { .addr = (uint64_t)(uintptr_t)src, .len = sizeof(src), .tseg = ssrc };
    urma_sge_t d = { .addr = (uint64_t)(uintptr_t)dst, .len = sizeof(dst), .tseg = rdst };
    urma_jfs_wr_t w = { .opcode = URMA_OPC_WRITE, .tjetty = tj, .user_ctx = uctx };
    w.flag.bs.complete_enable = 1;
    w.rw.src.sge = &s; w.rw.src.num_sge = 1;
    w.rw.dst.sge = &d; w.rw.dst.num_sge = 1;
    urma_jfs_wr_t *bad = NULL;
    CHECK(urma_post_jfs_wr(jfs, &w, &bad) == URMA_SUCCESS);
    urma_cr_t cr;
    memset(&cr, 0, sizeof(cr));
    CHECK(urma_poll_jfc(jfc, 1, &cr) == 1);
    CHECK(cr.status == URMA_CR_SUCCESS && cr.user_ctx == uctx && cr.completion_len == sizeof(src));
    CHECK(memcmp(src, dst, sizeof(src)) == 0);
    return 0;
}

int main(void)
{
    CHECK(urma_init(NULL) == URMA_SUCCESS);
    urma_context_t *ctx = ufx_open("loopback0");
    CHECK(ctx != NULL);
    urma_jfc_t *sjfc = ufx_jfc(ctx, 64, NULL);
    urma_jfc_t *rjfc = ufx_jfc(ctx, 64, NULL);
    CHECK(sjfc && rjfc);
    urma_jfs_cfg_t sc = ufx_jfs_cfg(64, sjfc);
    urma_jfs_t *jfs = urma_create_jfs(ctx, &sc);
    CHECK(jfs != NULL);
    urma_jfr_cfg_t rc = ufx_jfr_cfg(8, rjfc);
    sc.jfc = rjfc;
    urma_jetty_t *jetty = ufx_jetty(ctx, &sc, &rc);
    CHECK(jetty != NULL);
    urma_token_t tok = { .token = 0 };
    urma_target_jetty_t *tj = ufx_import_jetty(ctx, jetty, &tok);
    CHECK(tj != NULL);
    urma_target_seg_t *ssrc = ufx_reg_seg(ctx, src, sizeof(src));
    urma_target_seg_t *sdst = ufx_reg_seg(ctx, dst, sizeof(dst));
    CHECK(ssrc && sdst);
    urma_target_seg_t *rdst = ufx_import_seg(ctx, sdst, 0);
    CHECK(rdst != NULL);

    /* The parent's engine thread runs before the fork. */
    CHECK(write_once(jfs, sjfc, tj, ssrc, rdst, 0x11, 1) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(10);
        int r = write_once(jfs, sjfc, tj, ssrc, rdst, 0x22, 2) || write_once(jfs, sjfc, tj, ssrc, rdst, 0x33, 3);
        fflush(NULL);
        _exit(r);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (WIFSIGNALED(st))
        fprintf(stderr, "child killed by signal %d (hung: no engine after fork?)\n", WTERMSIG(st));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* The child's writes went to its own copy of the memory; the parent's engine goes on. */
    CHECK(dst[0] == 0x11);
    CHECK(write_once(jfs, sjfc, tj, ssrc, rdst, 0x44, 4) == 0);

    CHECK(urma_unimport_seg(rdst) == 0 && urma_unregister_seg(ssrc) == 0 && urma_unregister_seg(sdst) == 0);
    CHECK(urma_unimport_jetty(tj) == 0 && ufx_delete_jetty(jetty) == 0 && urma_delete_jfs(jfs) == 0);
    CHECK(urma_delete_jfc(sjfc) == 0 && urma_delete_jfc(rjfc) == 0);
    CHECK(urma_delete_context(ctx) == 0);
    CHECK(urma_uninit() == 0);
    printf("c-fork ok\n");
    return 0;
}
