/*
 * urma_fixture.c - the URMA set-up every C test program shares (see urma_fixture.h).
 */
#define _GNU_SOURCE
#include "urma_fixture.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* dl_iterate_phdr callback: copies the path of the loaded plugin into `data` (PATH_MAX bytes). */
static int ufx_find_plugin(struct dl_phdr_info *info, size_t size, void *data)
{
    const char *name = info->dlpi_name;
    const char *base;
    (void)size;
    if (name == NULL) {
        return 0;
    }
    base = strrchr(name, '/');
    base = base == NULL ? name : base + 1;
    if (strcmp(base, "liburma-loopback.so") != 0 || strlen(name) >= 4096) {
        return 0;
    }
    strcpy((char *)data, name);
    return 1;
}

void *ufx_loopback_symbol(const char *name)
{
    static void *plugin;
    char path[4096];
    void *p = dlsym(RTLD_DEFAULT, name);
    if (p != NULL) {
        return p;
    }
    if (plugin == NULL) {
        path[0] = '\0';
        if (dl_iterate_phdr(ufx_find_plugin, path) == 0) {
            return NULL;
        }
        /* The handle is kept: the functions found in it stay valid. */
        plugin = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        if (plugin == NULL) {
            return NULL;
        }
    }
    return dlsym(plugin, name);
}

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
    urma_jfr_t *jfr = urma_create_jfr(ctx, jfr_cfg);
    urma_jetty_t *jetty;
    if (jfr == NULL) {
        return NULL;
    }
    jetty = ufx_jetty_shared(ctx, jfs_cfg, jfr, jfr_cfg->jfc);
    if (jetty == NULL) {
        (void)urma_delete_jfr(jfr);
    }
    return jetty;
}

urma_status_t ufx_delete_jetty(urma_jetty_t *jetty)
{
    urma_jfr_t *jfr = jetty == NULL ? NULL : jetty->jetty_cfg.shared.jfr;
    urma_status_t s = urma_delete_jetty(jetty);
    if (s != URMA_SUCCESS || jfr == NULL) {
        return s;
    }
    return urma_delete_jfr(jfr);
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
    return ufx_import_jetty_id(ctx, &peer->jetty_id, URMA_TM_RM, token);
}

urma_target_jetty_t *ufx_import_jetty_id(urma_context_t *ctx, const urma_jetty_id_t *id,
                                         urma_transport_mode_t tm, urma_token_t *token)
{
    urma_rjetty_t rj;
    memset(&rj, 0, sizeof(rj));
    rj.jetty_id = *id;
    rj.trans_mode = tm;
    rj.type = URMA_JETTY;
    return urma_import_jetty(ctx, &rj, token);
}

static urma_target_seg_t *reg_seg(urma_context_t *ctx, void *buf, uint64_t len, uint32_t policy,
                                  uint32_t token)
{
    urma_seg_cfg_t c;
    memset(&c, 0, sizeof(c));
    c.va = (uint64_t)(uintptr_t)buf;
    c.len = len;
    c.flag.bs.token_policy = policy;
    c.flag.bs.access = URMA_ACCESS_READ | URMA_ACCESS_WRITE;
    c.token_value.token = token;
    return urma_register_seg(ctx, &c);
}

urma_target_seg_t *ufx_reg_seg(urma_context_t *ctx, void *buf, uint64_t len)
{
    return reg_seg(ctx, buf, len, URMA_TOKEN_NONE, 0);
}

urma_target_seg_t *ufx_reg_seg_token(urma_context_t *ctx, void *buf, uint64_t len, uint32_t token)
{
    return reg_seg(ctx, buf, len, URMA_TOKEN_PLAIN_TEXT, token);
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

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ufx_wait_crs(urma_jfc_t *jfc, urma_jfce_t *jfce, urma_cr_t *out, int n, int timeout_ms)
{
    long long end = now_ms() + timeout_ms;
    int got = 0;
    while (got < n) {
        int r = urma_poll_jfc(jfc, n - got, out + got);
        if (r < 0) {
            return -1;
        }
        got += r;
        if (got >= n || now_ms() >= end) {
            break;
        }
        if (r > 0) {
            continue;
        }
        if (jfce != NULL) {
            urma_jfc_t *ev[1];
            int w = urma_wait_jfc(jfce, 1, 20, ev);
            if (w < 0) {
                return -1;
            }
            if (w > 0) {
                uint32_t nev = (uint32_t)w;
                urma_ack_jfc(ev, &nev, 1);
                if (urma_rearm_jfc(jfc, false) != URMA_SUCCESS) {
                    return -1;
                }
            }
        } else {
            struct timespec ts = { 0, 200000 };
            nanosleep(&ts, NULL);
        }
    }
    return got;
}

/* ---- two processes ---- */

void ufx_peer_info(ufx_peer_info_t *info, const urma_context_t *ctx, const urma_jetty_t *jetty,
                   uint32_t jetty_token, const urma_target_seg_t *seg, uint32_t seg_token)
{
    memset(info, 0, sizeof(*info));
    info->magic = UFX_PEER_MAGIC;
    info->eid = ctx->eid;
    info->uasid = ctx->uasid;
    info->jetty_id = jetty->jetty_id;
    info->jetty_token = jetty_token;
    if (seg != NULL) {
        info->seg_token_id = seg->seg.token_id;
        info->seg_token = seg_token;
        info->seg_va = seg->seg.ubva.va;
        info->seg_len = seg->seg.len;
    }
}

urma_target_seg_t *ufx_import_peer_seg(urma_context_t *ctx, const ufx_peer_info_t *info)
{
    urma_seg_t s;
    urma_token_t tok;
    urma_import_seg_flag_t f;
    memset(&s, 0, sizeof(s));
    s.ubva.eid = info->eid;
    s.ubva.uasid = info->uasid;
    s.ubva.va = info->seg_va;
    s.len = info->seg_len;
    s.token_id = info->seg_token_id;
    tok.token = info->seg_token;
    memset(&f, 0, sizeof(f));
    f.bs.access = URMA_ACCESS_WRITE;
    return urma_import_seg(ctx, &s, &tok, 0, f);
}

int ufx_tcp_listen(uint16_t *port)
{
    struct sockaddr_in a;
    socklen_t al = sizeof(a);
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        perror("urma_fixture: socket");
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 4) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        perror("urma_fixture: bind/listen");
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int ufx_tcp_accept(int lfd, int timeout_ms)
{
    struct pollfd p = { .fd = lfd, .events = POLLIN };
    if (poll(&p, 1, timeout_ms) != 1) {
        fprintf(stderr, "urma_fixture: no connection within %d ms\n", timeout_ms);
        return -1;
    }
    return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

int ufx_tcp_connect(uint16_t port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        perror("urma_fixture: socket");
        return -1;
    }
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        perror("urma_fixture: connect");
        close(fd);
        return -1;
    }
    return fd;
}

int ufx_tcp_send(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int ufx_tcp_recv(int fd, void *buf, size_t len, int timeout_ms)
{
    char *p = buf;
    long long end = now_ms() + timeout_ms;
    while (len > 0) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        long long left = end - now_ms();
        ssize_t r;
        if (left <= 0 || poll(&pf, 1, (int)left) != 1) {
            return -1;
        }
        r = recv(fd, p, len, 0);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return -1;
        }
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

int ufx_exchange(int fd, const ufx_peer_info_t *mine, ufx_peer_info_t *peer, int timeout_ms)
{
    if (ufx_tcp_send(fd, mine, sizeof(*mine)) != 0 ||
        ufx_tcp_recv(fd, peer, sizeof(*peer), timeout_ms) != 0) {
        fprintf(stderr, "urma_fixture: endpoint exchange failed\n");
        return -1;
    }
    if (peer->magic != UFX_PEER_MAGIC) {
        fprintf(stderr, "urma_fixture: bad endpoint information (magic 0x%x)\n", peer->magic);
        return -1;
    }
    return 0;
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
