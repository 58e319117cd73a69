/*
 * fake_urma.c - TEST DOUBLE ONLY (see fake_urma.h). Not a URMA provider: it records posted work
 * requests for legacy-c/tests/smoke.c and returns scripted statuses.
 */
#define _GNU_SOURCE
#include "fake_urma.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#define FAKE_MAX 4096

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static fake_wr_t g_rec[FAKE_MAX];
static int g_n;
static urma_status_t g_send_fail, g_recv_fail;
static int g_send_skip, g_recv_skip;

void fake_urma_reset(void)
{
    pthread_mutex_lock(&g_mu);
    g_n = 0;
    g_send_fail = g_recv_fail = 0;
    g_send_skip = g_recv_skip = 0;
    pthread_mutex_unlock(&g_mu);
}

void fake_urma_fail_send(urma_status_t status, int skip)
{
    pthread_mutex_lock(&g_mu);
    g_send_fail = status;
    g_send_skip = skip;
    pthread_mutex_unlock(&g_mu);
}

void fake_urma_fail_recv(urma_status_t status, int skip)
{
    pthread_mutex_lock(&g_mu);
    g_recv_fail = status;
    g_recv_skip = skip;
    pthread_mutex_unlock(&g_mu);
}

int fake_urma_count(void)
{
    int n;
    pthread_mutex_lock(&g_mu);
    n = g_n;
    pthread_mutex_unlock(&g_mu);
    return n;
}

int fake_urma_get(int i, fake_wr_t *out)
{
    int rc = -1;
    pthread_mutex_lock(&g_mu);
    if (i >= 0 && i < g_n) {
        *out = g_rec[i];
        rc = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int fake_urma_wait_count(int n, int ms)
{
    int waited = 0;
    struct timespec ts = {0, 1000000};
    while (fake_urma_count() < n && waited < ms) {
        nanosleep(&ts, NULL);
        waited++;
    }
    return fake_urma_count();
}

static urma_status_t fake_record_send(fake_via_t via, const void *q, urma_jfs_wr_t *wr, urma_jfs_wr_t **bad)
{
    fake_wr_t r;
    urma_status_t st = URMA_SUCCESS;

    if (q == NULL || wr == NULL || bad == NULL) {
        return URMA_EINVAL;
    }
    memset(&r, 0, sizeof(r));
    r.via = via;
    r.queue = q;
    r.opcode = wr->opcode;
    r.flag = wr->flag.value;
    r.tjetty = wr->tjetty;
    r.user_ctx = wr->user_ctx;
    r.has_next = wr->next != NULL;
    if (wr->opcode == URMA_OPC_SEND_IMM) {
        r.num_src = wr->send.src.num_sge;
        if (wr->send.src.sge != NULL && r.num_src > 0) {
            r.src_addr = wr->send.src.sge[0].addr;
            r.src_len = wr->send.src.sge[0].len;
        }
        r.imm_or_notify = wr->send.imm_data;
        r.send_tseg = wr->send.tseg;
    } else {
        r.num_src = wr->rw.src.num_sge;
        r.num_dst = wr->rw.dst.num_sge;
        if (wr->rw.src.sge != NULL) {
            r.src_addr = wr->rw.src.sge[0].addr;
            r.src_len = wr->rw.src.sge[0].len;
            r.src_tseg = wr->rw.src.sge[0].tseg;
        }
        if (wr->rw.dst.sge != NULL) {
            r.dst_addr = wr->rw.dst.sge[0].addr;
            r.dst_len = wr->rw.dst.sge[0].len;
            r.dst_tseg = wr->rw.dst.sge[0].tseg;
        }
        r.imm_or_notify = wr->rw.notify_data;
    }
    pthread_mutex_lock(&g_mu);
    if (g_send_fail != 0 && g_send_skip-- <= 0) {
        st = g_send_fail;
        *bad = wr;
    } else if (g_n < FAKE_MAX) {
        g_rec[g_n++] = r;
    }
    pthread_mutex_unlock(&g_mu);
    return st;
}

static urma_status_t fake_record_recv(fake_via_t via, const void *q, urma_jfr_wr_t *wr, urma_jfr_wr_t **bad)
{
    fake_wr_t r;
    urma_status_t st = URMA_SUCCESS;

    if (q == NULL || wr == NULL || bad == NULL) {
        return URMA_EINVAL;
    }
    memset(&r, 0, sizeof(r));
    r.via = via;
    r.queue = q;
    r.user_ctx = wr->user_ctx;
    r.num_src = wr->src.num_sge;
    r.has_next = wr->next != NULL;
    if (wr->src.sge != NULL && r.num_src > 0) {
        r.src_addr = wr->src.sge[0].addr;
        r.src_len = wr->src.sge[0].len;
        r.src_tseg = wr->src.sge[0].tseg;
    }
    pthread_mutex_lock(&g_mu);
    if (g_recv_fail != 0 && g_recv_skip-- <= 0) {
        st = g_recv_fail;
        *bad = wr;
    } else if (g_n < FAKE_MAX) {
        g_rec[g_n++] = r;
    }
    pthread_mutex_unlock(&g_mu);
    return st;
}

urma_status_t urma_post_jfs_wr(urma_jfs_t *jfs, urma_jfs_wr_t *wr, urma_jfs_wr_t **bad_wr)
{
    return fake_record_send(FAKE_VIA_JFS, jfs, wr, bad_wr);
}

urma_status_t urma_post_jetty_send_wr(urma_jetty_t *jetty, urma_jfs_wr_t *wr, urma_jfs_wr_t **bad_wr)
{
    return fake_record_send(FAKE_VIA_JETTY_SEND, jetty, wr, bad_wr);
}

urma_status_t urma_post_jetty_recv_wr(urma_jetty_t *jetty, urma_jfr_wr_t *wr, urma_jfr_wr_t **bad_wr)
{
    return fake_record_recv(FAKE_VIA_JETTY_RECV, jetty, wr, bad_wr);
}

urma_status_t urma_post_jfr_wr(urma_jfr_t *jfr, urma_jfr_wr_t *wr, urma_jfr_wr_t **bad_wr)
{
    return fake_record_recv(FAKE_VIA_JFR, jfr, wr, bad_wr);
}
