/*
 * urma_fixture.c - the URMA set-up every C test program shares (see urma_fixture.h).
 */
#define _GNU_SOURCE
#include "urma_fixture.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

urma_context_t *ufx_open(const char *dev_name)
{
    urma_device_t **devs;
    urma_device_t *dev = NULL;
    urma_context_t *ctx;
    int i, ndev = 0;

    devs = urma_get_device_list(&ndev);
    if (devs == NULL || ndev < 1) {
        fprintf(stderr, "urma_fixture: no URMA device\n");
        return NULL;
    }
    for (i = 0; i < ndev && dev == NULL; i++) {
        if (dev_name == NULL || strcmp(devs[i]->name, dev_name) == 0) {
            dev = devs[i];
        }
    }
    if (dev == NULL) {
        fprintf(stderr, "urma_fixture: no URMA device called %s\n", dev_name);
        urma_free_device_list(devs);
        return NULL;
    }
    ctx = urma_create_context(dev, 0);
    urma_free_device_list(devs);
    if (ctx == NULL) {
        fprintf(stderr, "urma_fixture: urma_create_context failed\n");
    }
    return ctx;
}

urma_jfc_t *ufx_jfc(urma_context_t *ctx, uint32_t depth, urma_jfce_t *jfce)
{
    urma_jfc_cfg_t c;
    memset(&c, 0, sizeof(c));
    c.depth = depth;
    c.jfce = jfce;
    return urma_create_jfc(ctx, &c);
}

urma_jfs_cfg_t ufx_jfs_cfg(uint32_t depth, urma_jfc_t *jfc)
{
    urma_jfs_cfg_t c;
    memset(&c, 0, sizeof(c));
    c.depth = depth;
    c.trans_mode = URMA_TM_RM;
    c.max_sge = 1;
    c.jfc = jfc;
    return c;
}

urma_jfr_cfg_t ufx_jfr_cfg(uint32_t depth, urma_jfc_t *jfc)
{
    urma_jfr_cfg_t c;
    memset(&c, 0, sizeof(c));
    c.depth = depth;
    c.trans_mode = URMA_TM_RM;
    c.max_sge = 1;
    c.jfc = jfc;
    return c;
}

urma_jetty_t *ufx_jetty(urma_context_t *ctx, const urma_jfs_cfg_t *jfs_cfg, urma_jfr_cfg_t *jfr_cfg)
{
    urma_jetty_cfg_t c;
    memset(&c, 0, sizeof(c));
    c.flag.bs.share_jfr = URMA_NO_SHARE_JFR;
    c.jfs_cfg = *jfs_cfg;
    c.jfr_cfg = jfr_cfg;
    return urma_create_jetty(ctx, &c);
}

urma_jetty_t *ufx_jetty_shared(urma_context_t *ctx, const urma_jfs_cfg_t *jfs_cfg, urma_jfr_t *jfr,
                               urma_jfc_t *jfc)
{
    urma_jetty_cfg_t c;
    memset(&c, 0, sizeof(c));
    c.flag.bs.share_jfr = 1;
    c.jfs_cfg = *jfs_cfg;
    c.shared.jfr = jfr;
    c.shared.jfc = jfc;
    return urma_create_jetty(ctx, &c);
}

urma_target_jetty_t *ufx_import_jetty(urma_context_t *ctx, const urma_jetty_t *peer, urma_token_t *token)
{
    urma_rjetty_t rj;
    memset(&rj, 0, sizeof(rj));
    rj.jetty_id = peer->jetty_id;
    rj.trans_mode = URMA_TM_RM;
    rj.type = URMA_JETTY;
    return urma_import_jetty(ctx, &rj, token);
}

urma_target_seg_t *ufx_reg_seg(urma_context_t *ctx, void *buf, uint64_t len)
{
    urma_seg_cfg_t c;
    memset(&c, 0, sizeof(c));
    c.va = (uint64_t)(uintptr_t)buf;
    c.len = len;
    c.flag.bs.token_policy = URMA_TOKEN_NONE;
    c.flag.bs.access = URMA_ACCESS_READ | URMA_ACCESS_WRITE;
    return urma_register_seg(ctx, &c);
}

urma_target_seg_t *ufx_import_seg(urma_context_t *ctx, urma_target_seg_t *seg, uint32_t access)
{
    urma_import_seg_flag_t f;
    if (seg == NULL) {
        return NULL;
    }
    memset(&f, 0, sizeof(f));
    f.bs.access = access;
    return urma_import_seg(ctx, &seg->seg, NULL, 0, f);
}

/* ---- poller ---- */

static int hand_over(ufx_poller_t *p, urma_cr_t *cr)
{
    return p->hand_over != NULL ? p->hand_over(p, cr) : p->wake(p->handle, cr);
}

int ufx_drain(ufx_poller_t *p)
{
    urma_cr_t crs[64];
    int batch = p->batch > 0 && p->batch <= 64 ? p->batch : 16;
    int total = 0;
    for (;;) {
        int i, n = urma_poll_jfc(p->jfc, batch, crs);
        if (n < 0) {
            __atomic_fetch_add(&p->cr_errors, 1, __ATOMIC_SEQ_CST);
            return total;
        }
        if (n == 0) {
            return total;
        }
        for (i = 0; i < n; i++) {
            __atomic_fetch_add(&p->crs, 1, __ATOMIC_SEQ_CST);
            if (crs[i].status != URMA_CR_SUCCESS) {
                __atomic_fetch_add(&p->cr_errors, 1, __ATOMIC_SEQ_CST);
            }
            if (hand_over(p, &crs[i]) != 0) {
                __atomic_fetch_add(&p->wake_errors, 1, __ATOMIC_SEQ_CST);
            }
        }
        total += n;
    }
}

static void *poll_main(void *arg)
{
    ufx_poller_t *p = arg;
    if (p->jfce != NULL) {
        urma_rearm_jfc(p->jfc, false);
    }
    for (;;) {
        int stop = __atomic_load_n(&p->stop, __ATOMIC_ACQUIRE);
        if (p->jfce != NULL) {
            urma_jfc_t *got[1];
            int n = urma_wait_jfc(p->jfce, 1, 20, got);
            if (n > 0) {
                uint32_t nev = (uint32_t)n;
                ufx_drain(p);
                urma_ack_jfc(got, &nev, 1);
                urma_rearm_jfc(p->jfc, false);
            }
            ufx_drain(p);
        } else if (ufx_drain(p) == 0 && !stop) {
            if (p->idle_ns > 0) {
                struct timespec ts;
                ts.tv_sec = p->idle_ns / 1000000000L;
                ts.tv_nsec = p->idle_ns % 1000000000L;
                nanosleep(&ts, NULL);
            } else {
                sched_yield();
            }
        }
        if (stop) {
            ufx_drain(p);
            return NULL;
        }
    }
}

int ufx_poller_start(ufx_poller_t *p)
{
    p->crs = p->cr_errors = p->wake_errors = 0;
    p->stop = 0;
    if (p->wake == NULL && p->hand_over == NULL) {
        fprintf(stderr, "urma_fixture: poller without a wake-up function\n");
        return -1;
    }
    if (pthread_create(&p->th, NULL, poll_main, p) != 0) {
        fprintf(stderr, "urma_fixture: pthread_create failed\n");
        return -1;
    }
    return 0;
}

void ufx_poller_stop(ufx_poller_t *p)
{
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    pthread_join(p->th, NULL);
}
