/* Shared by the C test programs: the CHECK macro and a sender/receiver pair on loopback0
 * (context, send and receive JFCs of depth 64, a JFS, a jetty with its own JFR and its import). */
#ifndef LB_PAIR_H
#define LB_PAIR_H
#include <stdio.h>
#include <string.h>
#include <ub/umdk/urma/urma_api.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #c); return 1; } } while (0)

struct lb_pair {
    urma_context_t *ctx;
    urma_jfc_t *sjfc, *rjfc;
    urma_jfs_t *jfs;
    urma_jetty_t *jetty;
    urma_target_jetty_t *tj;
};

/* urma_init, the device, and the pair; `token` != 0 gives the jetty a plain-text token policy. */
static int lb_pair_open(struct lb_pair *p, uint32_t token)
{
    CHECK(urma_init(NULL) == URMA_SUCCESS);
    int n = 0;
    urma_device_t **list = urma_get_device_list(&n);
    CHECK(list != NULL && n == 1);
    urma_device_t *dev = list[0];
    CHECK(strcmp(dev->name, "loopback0") == 0);
    urma_free_device_list(list);
    p->ctx = urma_create_context(dev, 0);
    CHECK(p->ctx != NULL);
    urma_jfc_cfg_t jc = { .depth = 64 };
    p->sjfc = urma_create_jfc(p->ctx, &jc);
    p->rjfc = urma_create_jfc(p->ctx, &jc);
    CHECK(p->sjfc && p->rjfc);
    urma_jfs_cfg_t sc = { .depth = 64, .max_sge = 1, .jfc = p->sjfc, .trans_mode = URMA_TM_RM };
    p->jfs = urma_create_jfs(p->ctx, &sc);
    CHECK(p->jfs != NULL);
    urma_jfr_cfg_t rc = { .depth = 8, .max_sge = 1, .jfc = p->rjfc, .token_value = { .token = token } };
    if (token != 0)
        rc.flag.bs.token_policy = URMA_TOKEN_PLAIN_TEXT;
    urma_jetty_cfg_t jtc = { .jfs_cfg = sc, .jfr_cfg = &rc };
    jtc.jfs_cfg.jfc = p->rjfc;
    p->jetty = urma_create_jetty(p->ctx, &jtc);
    CHECK(p->jetty != NULL);
    urma_rjetty_t rj = { .jetty_id = p->jetty->jetty_id, .trans_mode = URMA_TM_RM, .type = URMA_JETTY };
    urma_token_t tok = { .token = token };
    p->tj = urma_import_jetty(p->ctx, &rj, &tok);
    CHECK(p->tj != NULL);
    return 0;
}

/* Deletes the pair and the context, then urma_uninit. */
static int lb_pair_close(struct lb_pair *p)
{
    CHECK(urma_unimport_jetty(p->tj) == 0 && urma_delete_jetty(p->jetty) == 0 && urma_delete_jfs(p->jfs) == 0);
    CHECK(urma_delete_jfc(p->sjfc) == 0 && urma_delete_jfc(p->rjfc) == 0);
    CHECK(urma_delete_context(p->ctx) == 0);
    CHECK(urma_uninit() == 0);
    return 0;
}
#endif
