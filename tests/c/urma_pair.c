/*
 * urma_pair.c - a two-process URMA program pair over the public URMA API only.
 *
 *   urma_pair server poll|event            prints "port <n>" and waits for the client
 *   urma_pair client poll|event <port>     connects to 127.0.0.1:<port>
 *
 * Each process opens the device loopback0, creates a JFC (a JFCE in event mode), an RC jetty
 * with its own JFR (token JETTY_TOKEN) and registers a segment (token SEG_TOKEN). They exchange
 * their endpoint information over TCP on 127.0.0.1 (ufx_peer_info_t: EID, uasid, jetty id and
 * token, segment address, length, token id and token value), import each other's jetty (RC,
 * bound) and the client imports the server's segment. The client then WRITEs LEN bytes of a
 * pattern into the server's segment and SENDs an immediate on the same jetty (one post, WRITE
 * then SEND_IMM), and waits for both send completions. The server waits for the receive
 * completion of its posted recv WR and checks its opcode, immediate, length, sender ({uasid, id}
 * of the client's jetty) and the bytes the WRITE put into its segment, then tells the client
 * over TCP that it is done. Exit 0 and "urma-pair <role> <mode> ok" only when all of that held.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ub/umdk/urma/urma_api.h>

#include "urma_fixture.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "urma-pair %s: FAILED %s:%d: %s\n", role, __FILE__, __LINE__, #c);   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define LEN (3u * 1024 * 1024 + 5)
#define JETTY_TOKEN 0x4A3Bu
#define SEG_TOKEN 0x5E6Du
#define IMM 0x0123456789ABCDEFULL
#define TIMEOUT_MS 10000

static const char *role = "?";

static unsigned char pattern(size_t i)
{
    return (unsigned char)((i * 131u + (i >> 12) * 7u + 0x5Au) & 0xFFu);
}

struct side {
    urma_context_t *ctx;
    urma_jfce_t *jfce;
    urma_jfc_t *jfc;
    urma_jfr_cfg_t jfr_cfg;
    urma_jetty_t *jetty;
    unsigned char *buf;
    urma_target_seg_t *seg;
    urma_target_jetty_t *peer;
};

static void open_side(struct side *s, int event_mode)
{
    urma_jfs_cfg_t jfs_cfg;
    CHECK(urma_init(NULL) == URMA_SUCCESS);
    s->ctx = ufx_open("loopback0");
    CHECK(s->ctx != NULL);
    s->jfce = event_mode ? urma_create_jfce(s->ctx) : NULL;
    CHECK(!event_mode || s->jfce != NULL);
    s->jfc = ufx_jfc(s->ctx, 64, s->jfce);
    CHECK(s->jfc != NULL);
    if (event_mode) {
        CHECK(urma_rearm_jfc(s->jfc, false) == URMA_SUCCESS);
    }
    jfs_cfg = ufx_jfs_cfg(64, s->jfc);
    jfs_cfg.trans_mode = URMA_TM_RC;
    s->jfr_cfg = ufx_jfr_cfg(16, s->jfc);
    s->jfr_cfg.trans_mode = URMA_TM_RC;
    s->jfr_cfg.flag.bs.token_policy = URMA_TOKEN_PLAIN_TEXT;
    s->jfr_cfg.token_value.token = JETTY_TOKEN;
    s->jetty = ufx_jetty(s->ctx, &jfs_cfg, &s->jfr_cfg);
    CHECK(s->jetty != NULL);
    s->buf = aligned_alloc(4096, ((size_t)LEN + 4095) / 4096 * 4096);
    CHECK(s->buf != NULL);
    memset(s->buf, 0, LEN);
    s->seg = ufx_reg_seg_token(s->ctx, s->buf, LEN, SEG_TOKEN);
    CHECK(s->seg != NULL);
}

/* Imports and binds the peer's jetty (RC: one peer per jetty). */
static void connect_peer(struct side *s, const ufx_peer_info_t *peer)
{
    urma_token_t tok = { .token = peer->jetty_token };
    s->peer = ufx_import_jetty_id(s->ctx, &peer->jetty_id, URMA_TM_RC, &tok);
    CHECK(s->peer != NULL);
    CHECK(urma_bind_jetty(s->jetty, s->peer) == URMA_SUCCESS);
}

static void close_side(struct side *s)
{
    CHECK(urma_unbind_jetty(s->jetty) == URMA_SUCCESS);
    CHECK(urma_unimport_jetty(s->peer) == URMA_SUCCESS);
    CHECK(urma_unregister_seg(s->seg) == URMA_SUCCESS);
    CHECK(ufx_delete_jetty(s->jetty) == URMA_SUCCESS);
    CHECK(urma_delete_jfc(s->jfc) == URMA_SUCCESS);
    if (s->jfce != NULL) {
        CHECK(urma_delete_jfce(s->jfce) == URMA_SUCCESS);
    }
    CHECK(urma_delete_context(s->ctx) == URMA_SUCCESS);
    CHECK(urma_uninit() == URMA_SUCCESS);
    free(s->buf);
}

static int server(int event_mode)
{
    struct side s;
    ufx_peer_info_t mine, peer;
    urma_jfr_wr_t rwr;
    urma_jfr_wr_t *rbad = NULL;
    urma_cr_t cr;
    uint16_t port = 0;
    int lfd, fd;
    size_t i;
    char done = 'D';

    memset(&s, 0, sizeof(s));
    open_side(&s, event_mode);
    memset(&rwr, 0, sizeof(rwr));
    rwr.user_ctx = 0x5151;
    CHECK(urma_post_jetty_recv_wr(s.jetty, &rwr, &rbad) == URMA_SUCCESS);

    lfd = ufx_tcp_listen(&port);
    CHECK(lfd >= 0);
    printf("port %u\n", (unsigned)port);
    fflush(stdout);
    fd = ufx_tcp_accept(lfd, TIMEOUT_MS);
    CHECK(fd >= 0);
    ufx_peer_info(&mine, s.ctx, s.jetty, JETTY_TOKEN, s.seg, SEG_TOKEN);
    CHECK(ufx_exchange(fd, &mine, &peer, TIMEOUT_MS) == 0);
    CHECK(peer.uasid != mine.uasid);
    connect_peer(&s, &peer);

    /* The client's SEND_IMM consumes the recv WR; its WRITE landed before it. */
    CHECK(ufx_wait_crs(s.jfc, s.jfce, &cr, 1, TIMEOUT_MS) == 1);
    CHECK(cr.status == URMA_CR_SUCCESS);
    CHECK(cr.flag.bs.s_r == 1);
    CHECK(cr.opcode == URMA_CR_OPC_SEND_WITH_IMM);
    CHECK(cr.imm_data == IMM);
    CHECK(cr.user_ctx == 0x5151);
    CHECK(cr.completion_len == 0);
    CHECK(cr.local_id == s.jetty->jetty_id.id);
    CHECK(cr.remote_id.uasid == peer.jetty_id.uasid && cr.remote_id.id == peer.jetty_id.id);
    for (i = 0; i < LEN; i++) {
        if (s.buf[i] != pattern(i)) {
            fprintf(stderr, "urma-pair server: byte %zu is 0x%02x, expected 0x%02x\n", i, s.buf[i],
                    pattern(i));
            exit(1);
        }
    }
    CHECK(ufx_tcp_send(fd, &done, 1) == 0);
    /* The client closes first: its imports of our objects go before our objects do. */
    CHECK(ufx_tcp_recv(fd, &done, 1, TIMEOUT_MS) == 0 && done == 'C');
    close(fd);
    close(lfd);
    close_side(&s);
    printf("urma-pair server %s ok: %u bytes and immediate 0x%016llx from uasid %u jetty %u\n",
           event_mode ? "event" : "poll", LEN, (unsigned long long)IMM, peer.jetty_id.uasid,
           peer.jetty_id.id);
    return 0;
}

static int client(int event_mode, uint16_t port)
{
    struct side s;
    ufx_peer_info_t mine, peer;
    urma_target_seg_t *rseg;
    urma_sge_t src, dst;
    urma_jfs_wr_t w, imm;
    urma_jfs_wr_t *bad = NULL;
    urma_cr_t cr[2];
    size_t i;
    int fd;
    char done = 0;

    memset(&s, 0, sizeof(s));
    open_side(&s, event_mode);
    for (i = 0; i < LEN; i++) {
        s.buf[i] = pattern(i);
    }
    fd = ufx_tcp_connect(port);
    CHECK(fd >= 0);
    ufx_peer_info(&mine, s.ctx, s.jetty, JETTY_TOKEN, s.seg, SEG_TOKEN);
    CHECK(ufx_exchange(fd, &mine, &peer, TIMEOUT_MS) == 0);
    CHECK(peer.uasid != mine.uasid && peer.seg_len == LEN);
    connect_peer(&s, &peer);
    rseg = ufx_import_peer_seg(s.ctx, &peer);
    CHECK(rseg != NULL);

    memset(&src, 0, sizeof(src));
    src.addr = (uint64_t)(uintptr_t)s.buf;
    src.len = LEN;
    src.tseg = s.seg;
    memset(&dst, 0, sizeof(dst));
    dst.addr = peer.seg_va;
    dst.len = LEN;
    dst.tseg = rseg;
    memset(&imm, 0, sizeof(imm));
    imm.opcode = URMA_OPC_SEND_IMM;
    imm.tjetty = s.peer;
    imm.user_ctx = 0x2222;
    imm.flag.bs.complete_enable = 1;
    imm.send.imm_data = IMM;
    memset(&w, 0, sizeof(w));
    w.opcode = URMA_OPC_WRITE;
    w.tjetty = s.peer;
    w.user_ctx = 0x1111;
    w.flag.bs.complete_enable = 1;
    w.rw.src.sge = &src;
    w.rw.src.num_sge = 1;
    w.rw.dst.sge = &dst;
    w.rw.dst.num_sge = 1;
    w.next = &imm;
    CHECK(urma_post_jetty_send_wr(s.jetty, &w, &bad) == URMA_SUCCESS);

    CHECK(ufx_wait_crs(s.jfc, s.jfce, cr, 2, TIMEOUT_MS) == 2);
    CHECK(cr[0].status == URMA_CR_SUCCESS && cr[0].flag.bs.s_r == 0 && cr[0].user_ctx == 0x1111);
    CHECK(cr[0].completion_len == LEN);
    CHECK(cr[1].status == URMA_CR_SUCCESS && cr[1].flag.bs.s_r == 0 && cr[1].user_ctx == 0x2222);
    CHECK(cr[0].local_id == s.jetty->jetty_id.id && cr[1].local_id == s.jetty->jetty_id.id);

    CHECK(ufx_tcp_recv(fd, &done, 1, TIMEOUT_MS) == 0 && done == 'D');
    CHECK(urma_unimport_seg(rseg) == URMA_SUCCESS);
    close_side(&s);
    done = 'C';
    CHECK(ufx_tcp_send(fd, &done, 1) == 0);
    close(fd);
    printf("urma-pair client %s ok: WRITE %u bytes + SEND_IMM to uasid %u jetty %u\n",
           event_mode ? "event" : "poll", LEN, peer.jetty_id.uasid, peer.jetty_id.id);
    return 0;
}

int main(int argc, char **argv)
{
    int event_mode;
    if (argc < 3 || (strcmp(argv[2], "poll") != 0 && strcmp(argv[2], "event") != 0)) {
        fprintf(stderr, "usage: urma_pair server poll|event | client poll|event <port>\n");
        return 2;
    }
    role = argv[1];
    event_mode = strcmp(argv[2], "event") == 0;
    if (strcmp(argv[1], "server") == 0) {
        return server(event_mode);
    }
    if (strcmp(argv[1], "client") == 0 && argc == 4) {
        return client(event_mode, (uint16_t)atoi(argv[3]));
    }
    fprintf(stderr, "usage: urma_pair server poll|event | client poll|event <port>\n");
    return 2;
}
