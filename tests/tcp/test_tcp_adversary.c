/* test_tcp_adversary.c - tfrdv_tcp.h attacked: hostile peers of the same-host TCP upgrade (raw
   side-socket clients with bad tokens, garbage, silence and floods; a raw server that offers its
   side socket and then answers as another worker, stalls, grants nothing or offers twice; a raw
   client that asks twice), give-ups racing the switch from TCP to the side connection (a
   callback that destroys the transport, a cancellation of 2,000 receives), floods of 1 ms
   receives racing their answers on every path (TCP, the upgraded ring, by address) and 3,000
   request deadlines at once. Every check is on behaviour (each call completes once, every
   value is received once or still buffered, a hostile peer gets a CLOSE naming what was wrong);
   waits are condition waits with generous bounds, and every test is bounded by alarm(). Both
   ends run in this process. Built by tests/tcp/tcp.mk as part of `make test`. */
#define _GNU_SOURCE
#define TFRDV_IMPLEMENTATION
#define TFRDV_TCP_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_tcp.h"
#include "tt.h"
#include "logcap.h"
#include "rawframe.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PS1 "/job:ps/replica:0/task:1"

static void key_for(tfrdv_key* k, const char* edge) {
    tfrdv_frame_iter fi = {0, 0};
    tfrdv_status st;
    (void)tfrdv_key_make(k, PS_DEV, PS_INC, WK_DEV, edge, fi, &st);
}
static tfrdv_tcp_stats tstats(tfrdv_tcp* t) {
    tfrdv_tcp_stats ts;
    tfrdv_tcp_get_stats(t, &ts);
    return ts;
}

/* ---- the two ends, in this process ---- */
typedef struct end {
    tfrdv_tcp* t;
    tfrdv_mgr* m;
    char addr[128];
} end;
/* a server on listen (worker PS), or a client of ps_addr (worker WK); with the options given */
static int end_open(end* e, const char* listen, const char* ps_addr, int64_t same_host, int64_t timeout_ns) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_worker w;
    tfrdv_status st;
    memset(e, 0, sizeof *e);
    tc.listen_address = listen;
    tc.same_host = same_host;
    tc.handshake_timeout_ns = timeout_ns;
    tc.connect_timeout_ns = timeout_ns;
    tc.hooks.logger.fn = log_capture;
    if (ps_addr) {
        w.name = PS;
        w.address = ps_addr;
        tc.workers = &w;
        tc.num_workers = 1;
    }
    if (tfrdv_tcp_create(&tc, &e->t, &st) != TFRDV_OK) { printf("    create: %s\n", st.msg); return 0; }
    mc.worker_name = ps_addr ? WK : PS;
    mc.incarnation = ps_addr ? 0x77ULL : PS_INC;
    mc.transport = tfrdv_tcp_transport(e->t);
    if (tfrdv_mgr_create(&mc, &e->m, &st) != TFRDV_OK) { printf("    mgr: %s\n", st.msg); tfrdv_tcp_destroy(e->t); return 0; }
    (void)tfrdv_tcp_attach(e->t, e->m, &st);
    snprintf(e->addr, sizeof e->addr, "%s", tfrdv_tcp_address(e->t));
    return 1;
}
static void end_close(end* e) {
    tfrdv_tcp_destroy(e->t);
    tfrdv_mgr_destroy(e->m);
}
static void val_free(tfrdv_value* v) { free(v); }
static uint8_t vbyte(int id, uint64_t i) { return (uint8_t)((uint64_t)id * 2654435761u + i * 40503u); }
/* value id: its id in the first 4 bytes; its size from the size class (ring / socket / by address) */
static uint64_t vsize(int id, int classes) {
    static const uint64_t sz[3] = {40, 3000, 80000};
    return sz[id % classes];
}
static tfrdv_value* mkval(int id, int classes) {
    uint64_t n = vsize(id, classes), i;
    tfrdv_value* v = (tfrdv_value*)malloc(sizeof *v + 8 + n);
    int64_t* dims = (int64_t*)(v + 1);
    uint8_t* d = (uint8_t*)(dims + 1);
    dims[0] = (int64_t)n;
    for (i = 0; i < n; i++) d[i] = vbyte(id, i);
    memcpy(d, &id, sizeof id);
    *v = tfrdv_value_make(4 /* DT_UINT8 */, 1, dims, d, n, val_free, 0);
    return v;
}
/* the id of an intact value of ours, else -1 */
static int vid(const tfrdv_value* v, int classes) {
    int id;
    uint64_t i;
    if (!v || v->rank != 1 || v->size < sizeof id) return -1;
    memcpy(&id, v->data, sizeof id);
    if (id < 0 || v->size != vsize(id, classes)) return -1;
    for (i = sizeof id; i < v->size; i++)
        if (((const uint8_t*)v->data)[i] != vbyte(id, i)) return -1;
    return id;
}
/* three values sent on rs and fetched on rc (keys prefix0..2), each checked; after each, a
   bounded wait for the client transport ct to have upgraded */
static void fetch_three(tfrdv_rendezvous* rs, tfrdv_rendezvous* rc, tfrdv_tcp* ct, const char* prefix) {
    tfrdv_status st;
    tfrdv_key key;
    tfrdv_value* v = 0;
    int i, j, dead = 0;
    for (i = 0; i < 3; i++) {
        char e[32];
        snprintf(e, sizeof e, "%s%d", prefix, i);
        key_for(&key, e);
        TT_CHECK_EQ_INT(tfrdv_send(rs, &key.parsed, 0, mkval(i, 3), 0, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_recv(rc, &key.parsed, 0, 30 * SEC, &v, &dead, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(vid(v, 3), i);
        tfrdv_value_release(v);
        v = 0;
        for (j = 0; j < 2000 && !tstats(ct).tcp_upgrades; j++) sleep_ms(5);
    }
}
/* waits (bounded) until neither end has a call, a served request or an unacknowledged value */
static void settle(end* c, end* s) {
    int i;
    for (i = 0; i < 4000; i++) {
        tfrdv_tcp_stats a = tstats(c->t), b = tstats(s->t);
        if (a.client_calls_live == 0 && b.server_requests_live == 0 && b.values_unacked == 0) break;
        sleep_ms(5);
    }
    TT_CHECK_EQ_INT(tstats(c->t).client_calls_live, 0);
    TT_CHECK_EQ_INT(tstats(s->t).values_unacked, 0);
}

/* ---- raw frames (rawframe.h) ---- */
/* the frames a peer sends until it closes: the CLOSE's message ("" if none), 1 if EOF came (0 if
   wait_ms passed first) */
static int raw_until_end(int fd, char* close_msg, size_t cap, int wait_ms) {
    rawbuf* rb = (rawbuf*)calloc(1, sizeof *rb);
    tfrdv_tcp_frame g;
    char keep[512];
    int eof = 0;
    close_msg[0] = 0;
    for (;;) {
        struct pollfd pf;
        if (raw_next(fd, rb, &g, keep, sizeof keep, 0)) {
            if (g.type == TFRDV_TCP_CLOSE) snprintf(close_msg, cap, "%s", keep);
            continue;
        }
        pf.fd = fd;
        pf.events = POLLIN;
        pf.revents = 0;
        if (poll(&pf, 1, wait_ms) <= 0) break;
        {
            ssize_t k = recv(fd, rb->b + rb->len, sizeof rb->b - rb->len, 0);
            if (k <= 0) { eof = 1; break; }
            rb->len += (size_t)k;
        }
    }
    free(rb);
    return eof;
}
#ifdef TFRDV_TCP__UPGRADE
/* ============================================================================================
   Hostile clients of a server's side socket
   ============================================================================================ */
/* asks over a raw TCP connection: the token and the side address of the offer (1), or 0 */
static int raw_offer_of(const char* addr, uint8_t* tok, char* at, size_t cap) {
    rawbuf* rb = (rawbuf*)calloc(1, sizeof *rb);
    tfrdv_tcp_frame g;
    char keep[256], id[160], why[200];
    int fd = raw_tcp(addr), ok = 0;
    if (fd < 0 || tfrdv_tcp__sh_host_id(id, sizeof id, why, sizeof why) != 0) { free(rb); if (fd >= 0) close(fd); return 0; }
    raw_hello(fd, 5, WK, 1);
    raw_sh(fd, TFRDV_TCP_SH_TCP_ASK, id, strlen(id));
    while (raw_next(fd, rb, &g, keep, sizeof keep, 20000))
        if (g.type == TFRDV_TCP_SAMEHOST) {
            if (g.sh_flags == TFRDV_TCP_SH_TCP_OFFER && g.message.len > 16 && g.message.len - 16 < cap) {
                memcpy(tok, keep, 16);
                memcpy(at, keep + 16, g.message.len - 16);
                at[g.message.len - 16] = 0;
                ok = 1;
            }
            break;
        }
    close(fd);
    free(rb);
    return ok;
}
/* what a side-socket client that sends bytes (n of them) then waits gets: the CLOSE's message */
/* a version 5 HELLO from WK, encoded into b; its length */
static size_t hello_bytes(uint8_t* b, size_t cap) {
    tfrdv_tcp_frame f;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_HELLO;
    f.version = 5;
    f.name.ptr = WK;
    f.name.len = strlen(WK);
    return tfrdv_tcp_encode(&f, b, cap);
}
static void side_sends(const char* at, const void* bytes, size_t n, char* close_msg, size_t cap) {
    int fd = raw_abstract(at);
    TT_CHECK(fd >= 0);
    if (fd < 0) return;
    if (n) (void)wr_full(fd, bytes, n);
    TT_CHECK(raw_until_end(fd, close_msg, cap, 30000)); /* the server closes it */
    close(fd);
}
/* a token of 15 bytes, bytes that are no frame, a HELLO then a token cut mid-frame, a HELLO then
   the TCP question (flag 32) instead of the token, and the right token presented twice over one
   connection: each connection is closed with a CLOSE naming what was wrong, and none takes a
   token that a real client needs after them */
static void test_side_socket_malformed_tokens(void) {
    end s, c;
    uint8_t tok[16], b[512];
    char at[TFRDV_TCP_SH_ADDR_MAX + 1], cm[512];
    tfrdv_tcp_frame f;
    size_t n, k;
    int fd;
    alarm(120);
    if (!end_open(&s, "127.0.0.1:0", 0, 0, 300000000)) { TT_CHECK(0); return; }
    TT_CHECK(raw_offer_of(s.addr, tok, at, sizeof at));
    /* a HELLO then a token of 15 bytes (the codec's limits) */
    n = hello_bytes(b, sizeof b);
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_SAMEHOST;
    f.sh_flags = TFRDV_TCP_SH_TCP_TOKEN;
    f.message.ptr = (const char*)tok;
    f.message.len = 15;
    k = tfrdv_tcp_encode(&f, b + n, sizeof b - n);
    side_sends(at, b, n + k, cm, sizeof cm);
    TT_CHECK_CONTAINS(cm, "SAMEHOST flags 0x80 with 15 bytes");
    /* garbage first */
    memset(b, 0xee, 64);
    side_sends(at, b, 64, cm, sizeof cm);
    TT_CHECK_CONTAINS(cm, "unknown frame type 238");
    /* a HELLO and half a token frame, then silence: closed at handshake_timeout_ns */
    n = hello_bytes(b, sizeof b); /* (the garbage above overwrote the first one) */
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_SAMEHOST;
    f.sh_flags = TFRDV_TCP_SH_TCP_TOKEN;
    f.message.ptr = (const char*)tok;
    f.message.len = 16;
    k = tfrdv_tcp_encode(&f, b + n, sizeof b - n);
    side_sends(at, b, n + k / 2, cm, sizeof cm);
    TT_CHECK_EQ_INT(tstats(s.t).accepted >= 4, 1);
    /* the TCP question on the side socket */
    {
        char id[160], why[200];
        n = hello_bytes(b, sizeof b);
        TT_CHECK_EQ_INT(tfrdv_tcp__sh_host_id(id, sizeof id, why, sizeof why), 0);
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_SAMEHOST;
        f.sh_flags = TFRDV_TCP_SH_TCP_ASK;
        f.message.ptr = id;
        f.message.len = strlen(id);
        k = tfrdv_tcp_encode(&f, b + n, sizeof b - n);
        side_sends(at, b, n + k, cm, sizeof cm);
        TT_CHECK_CONTAINS(cm, "SAMEHOST flags 0x20 on the side socket before its token");
    }
    /* the token on the TCP listener (not the side socket) */
    fd = raw_tcp(s.addr);
    TT_CHECK(fd >= 0);
    if (fd >= 0) {
        raw_hello(fd, 5, WK, 1);
        raw_sh(fd, TFRDV_TCP_SH_TCP_TOKEN, tok, 16);
        TT_CHECK(raw_until_end(fd, cm, sizeof cm, 30000));
        TT_CHECK_CONTAINS(cm, "SAMEHOST flags 0x80 on a TCP connection from a version 5 client");
        close(fd);
    }
    /* the right token twice over one connection: the second is a question no client asks */
    fd = raw_abstract(at);
    TT_CHECK(fd >= 0);
    if (fd >= 0) {
        raw_hello(fd, 5, WK, 1);
        raw_sh(fd, TFRDV_TCP_SH_TCP_TOKEN, tok, 16);
        raw_sh(fd, TFRDV_TCP_SH_TCP_TOKEN, tok, 16);
        TT_CHECK(raw_until_end(fd, cm, sizeof cm, 30000));
        TT_CHECK_CONTAINS(cm, "SAMEHOST from a version 5 client with flags 0x80");
        close(fd);
    }
    TT_CHECK_EQ_INT(tstats(s.t).tcp_upgrades, 1); /* that one token, once */
    /* each hostile connection above but the silent one (a handshake timeout, not a bad frame) */
    TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 5);
    /* a real client after all that: it upgrades and fetches */
    log_reset();
    if (!end_open(&c, 0, s.addr, 0, 0)) { TT_CHECK(0); end_close(&s); return; }
    {
        tfrdv_rendezvous *rs = 0, *rc = 0;
        tfrdv_status st;
        (void)tfrdv_mgr_start_step(s.m, 1, &rs, &st);
        (void)tfrdv_mgr_start_step(c.m, 1, &rc, &st);
        fetch_three(rs, rc, c.t, "after");
        TT_CHECK_EQ_INT(tstats(c.t).tcp_upgrades, 1);
        TT_CHECK_EQ_INT(log_count("stay on TCP"), 0);
        tfrdv_unref(rs);
        tfrdv_unref(rc);
    }
    end_close(&c);
    end_close(&s);
}
/* 200 connections to the side socket that never speak (max_connections 1024): each is closed at
   handshake_timeout_ns; meanwhile and after, a real client upgrades and fetches */
static void test_side_socket_silent_flood(void) {
    enum { N = 200 };
    static int fds[N];
    end s, c;
    uint8_t tok[16];
    char at[TFRDV_TCP_SH_ADDR_MAX + 1], cm[256];
    tfrdv_rendezvous *rs = 0, *rc = 0;
    tfrdv_status st;
    int i, closed = 0;
    alarm(120);
    if (!end_open(&s, "127.0.0.1:0", 0, 0, 500000000)) { TT_CHECK(0); return; }
    TT_CHECK(raw_offer_of(s.addr, tok, at, sizeof at));
    for (i = 0; i < N; i++) fds[i] = raw_abstract(at);
    log_reset();
    if (!end_open(&c, 0, s.addr, 0, 0)) { TT_CHECK(0); end_close(&s); return; }
    (void)tfrdv_mgr_start_step(s.m, 1, &rs, &st);
    (void)tfrdv_mgr_start_step(c.m, 1, &rc, &st);
    fetch_three(rs, rc, c.t, "fl");
    TT_CHECK_EQ_INT(tstats(c.t).tcp_upgrades, 1);
    for (i = 0; i < N; i++) {
        if (fds[i] < 0) continue;
        closed += raw_until_end(fds[i], cm, sizeof cm, 30000);
        close(fds[i]);
    }
    TT_CHECK_EQ_INT(closed, N);
    TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 0);
    tfrdv_unref(rs);
    tfrdv_unref(rc);
    end_close(&c);
    end_close(&s);
}

/* ============================================================================================
   A hostile server: a raw TCP listener that offers its own "@tfrdv-..." side socket
   ============================================================================================ */
typedef struct evil {
    int lfd, sfd;               /* TCP listener, side listener */
    int mode;                   /* 0: the side socket answers as another worker; 1: HELLO, then
                                   silence; 2: the same worker, another incarnation; 3: the offer
                                   comes twice on TCP (the side socket as 1); 4: the side socket
                                   grants nothing (SAMEHOST flags 0); 5: the offer twice, the side
                                   socket grants by address */
    char at[64];
    pthread_mutex_t mu;
    int side_accepted, side_eof, tcp_requests, stop;
    char close_msg[512];        /* the CLOSE the client sent on TCP, if any */
} evil;
static void evil_response(int fd, uint64_t id, int vidn) {
    tfrdv_value* v = mkval(vidn, 1);
    tfrdv_tcp_frame f;
    uint8_t b[256];
    size_t n;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RESPONSE;
    f.id = id;
    f.dtype = 4;
    f.rank = 1;
    f.dims[0] = (int64_t)v->size;
    f.bytes = v->size;
    f.data_len = v->size;
    n = tfrdv_tcp_encode(&f, b, sizeof b);
    (void)wr_full(fd, b, n);
    (void)wr_full(fd, v->data, (size_t)v->size);
    tfrdv_value_release(v);
}
static void* evil_server(void* p) {
    evil* h = (evil*)p;
    rawbuf* rb = (rawbuf*)calloc(1, sizeof *rb);
    rawbuf* sb = (rawbuf*)calloc(1, sizeof *sb);
    tfrdv_tcp_frame g;
    char keep[512];
    int fd = accept(h->lfd, 0, 0), side = -1, nreq = 0, tcp_end = 0, side_due = 0;
    if (fd < 0) { free(rb); free(sb); return 0; }
    raw_hello(fd, 5, PS, PS_INC);
    for (;;) {
        struct pollfd pf[3];
        int np = 0, i;
        pf[np].fd = tcp_end ? -1 : fd; pf[np].events = POLLIN; pf[np].revents = 0; np++;
        pf[np].fd = side < 0 ? h->sfd : side; pf[np].events = POLLIN; pf[np].revents = 0; np++;
        if (poll(pf, (nfds_t)np, 100) < 0) break;
        pthread_mutex_lock(&h->mu);
        i = h->stop;
        pthread_mutex_unlock(&h->mu);
        if (i) break;
        if (pf[1].revents) {
            if (side < 0) {
                side = accept(h->sfd, 0, 0);
                pthread_mutex_lock(&h->mu);
                h->side_accepted++;
                pthread_mutex_unlock(&h->mu);
                if (side >= 0) raw_hello(side, 5, h->mode == 0 ? PS1 : PS, h->mode == 2 ? PS_INC + 1 : PS_INC);
            } else {
                ssize_t k = recv(side, sb->b, sizeof sb->b, 0); /* its HELLO, token, question: answered but in modes 1 and 3 */
                if (k <= 0) {
                    pthread_mutex_lock(&h->mu);
                    h->side_eof = 1;
                    pthread_mutex_unlock(&h->mu);
                    close(side);
                    side = -2; /* no more */
                } else if (h->mode == 5) { /* answered once the client closed the TCP connection */
                    side_due = 1;
                } else if (h->mode != 1 && h->mode != 3) { /* "granted": the switch would follow; mode 4: "nothing" */
                    raw_sh(side, h->mode == 4 ? 0u : TFRDV_TCP_SH_CMA_GRANT, 0, 0);
                }
            }
        }
        if (pf[0].revents) {
            int more = 1;
            while (more && raw_next(fd, rb, &g, keep, sizeof keep, 0)) {
                if (g.type == TFRDV_TCP_SAMEHOST && g.sh_flags == TFRDV_TCP_SH_TCP_ASK) {
                    uint8_t body[16 + 64];
                    memset(body, 0x5a, 16);
                    memcpy(body + 16, h->at, strlen(h->at));
                    tfrdv_tcp_frame o;
                    uint8_t two[2 * (24 + 16 + 64)];
                    size_t n;
                    memset(&o, 0, sizeof o);
                    o.type = TFRDV_TCP_SAMEHOST;
                    o.sh_flags = TFRDV_TCP_SH_TCP_OFFER;
                    o.message.ptr = (const char*)body;
                    o.message.len = 16 + strlen(h->at);
                    n = tfrdv_tcp_encode(&o, two, sizeof two);
                    if (h->mode == 3 || h->mode == 5) { /* twice, in one write: read together */
                        memcpy(two + n, two, n);
                        n *= 2;
                    }
                    (void)wr_full(fd, two, n);
                } else if (g.type == TFRDV_TCP_CLOSE) {
                    pthread_mutex_lock(&h->mu);
                    snprintf(h->close_msg, sizeof h->close_msg, "%s", keep);
                    pthread_mutex_unlock(&h->mu);
                } else if (g.type == TFRDV_TCP_REQUEST) {
                    evil_response(fd, g.id, nreq++);
                    pthread_mutex_lock(&h->mu);
                    h->tcp_requests++;
                    pthread_mutex_unlock(&h->mu);
                }
            }
            {
                char c1;
                ssize_t k = recv(fd, &c1, 1, MSG_PEEK | MSG_DONTWAIT);
                if (k == 0 && h->mode != 5) break; /* the client closed the TCP connection */
                if (k == 0) tcp_end = 1; /* mode 5: the side socket still answers */
            }
        }
        if (side_due && tcp_end && side >= 0) { /* mode 5: the answer comes after the TCP connection's end */
            raw_sh(side, TFRDV_TCP_SH_CMA_GRANT, 0, 0);
            side_due = 0;
        }
    }
    if (side >= 0) close(side);
    close(fd);
    free(rb);
    free(sb);
    return 0;
}
static int evil_open(evil* h, int mode, char* addr, size_t cap) {
    struct sockaddr_un un;
    socklen_t l;
    memset(h, 0, sizeof *h);
    h->mode = mode;
    pthread_mutex_init(&h->mu, 0);
    snprintf(h->at, sizeof h->at, "@tfrdv-%d-adv%d", (int)getpid(), mode);
    l = abstract_addr(&un, h->at);
    h->sfd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (h->sfd < 0 || bind(h->sfd, (struct sockaddr*)&un, l) != 0 || listen(h->sfd, 4) != 0) return 0;
    h->lfd = loop_listen(addr, cap);
    return h->lfd >= 0;
}
static int evil_get(evil* h, int* field) {
    int v;
    pthread_mutex_lock(&h->mu);
    v = *field;
    pthread_mutex_unlock(&h->mu);
    return v;
}
/* fetches n values of the evil server over its TCP connection: each OK, intact */
static void evil_fetch(end* c, int n) {
    tfrdv_rendezvous* rc = 0;
    tfrdv_status st;
    int i;
    (void)tfrdv_mgr_start_step(c->m, 1, &rc, &st);
    for (i = 0; i < n; i++) {
        tfrdv_key key;
        tfrdv_value* v = 0;
        int dead = 0;
        char e[16];
        snprintf(e, sizeof e, "ev%d", i);
        key_for(&key, e);
        TT_CHECK_EQ_INT(tfrdv_recv(rc, &key.parsed, 0, 30 * SEC, &v, &dead, &st), TFRDV_OK);
        TT_CHECK(vid(v, 1) >= 0); /* the evil server numbers its answers itself */
        tfrdv_value_release(v);
    }
    tfrdv_unref(rc);
}
/* stops the raw server's thread and closes what it opened */
static void evil_close(evil* h, pthread_t th) {
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_mutex_unlock(&h->mu);
    pthread_join(th, 0);
    close(h->lfd);
    close(h->sfd);
    pthread_mutex_destroy(&h->mu);
}
/* the raw server in that mode on its thread (th), and a client of it (c; connect_timeout_ns
   timeout_ns, 0: the default) that fetched one value over TCP; 0 (a failed check) if either
   could not be made */
static int evil_start(evil* h, int mode, pthread_t* th, end* c, int64_t timeout_ns) {
    char addr[64];
    if (!evil_open(h, mode, addr, sizeof addr)) { TT_CHECK(0); return 0; }
    pthread_create(th, 0, evil_server, h);
    log_reset();
    if (!end_open(c, 0, addr, 0, timeout_ns)) { TT_CHECK(0); evil_close(h, *th); return 0; }
    evil_fetch(c, 1);
    return 1;
}
/* 1 once the client closed the raw server's side connection (a bounded wait: 20 s) */
static int evil_side_closed(evil* h) {
    int i;
    for (i = 0; i < 4000 && !evil_get(h, &h->side_eof); i++) sleep_ms(5);
    return evil_get(h, &h->side_eof);
}
/* its side socket answers as another worker, or as another incarnation of the same one: the
   client does not switch, says why once, and its calls go on over TCP */
static void evil_impostor_side(int mode) {
    evil h;
    end c;
    pthread_t th;
    int i;
    if (!evil_start(&h, mode, &th, &c, 0)) return;
    for (i = 0; i < 4000 && !log_count("stay on TCP"); i++) sleep_ms(5);
    TT_CHECK_EQ_INT(evil_get(&h, &h.side_accepted), 1);
    TT_CHECK_EQ_INT(log_count("stay on TCP"), 1);
    TT_CHECK(log_count("answered as another worker (or incarnation)") >= 1);
    evil_fetch(&c, 3);
    TT_CHECK_EQ_INT(evil_get(&h, &h.tcp_requests), 4);
    TT_CHECK_EQ_INT(tstats(c.t).tcp_upgrades, 0);
    TT_CHECK_EQ_INT(tstats(c.t).calls_ok, 4);
    end_close(&c);
    evil_close(&h, th);
}
static void test_hostile_server_side_impostor(void) {
    alarm(120);
    evil_impostor_side(0);
    evil_impostor_side(2);
}
/* its side socket sends a HELLO and then nothing (no answer to the SAMEHOST question): the client
   gives the side connection up after connect_timeout_ns (it closes it), says why once, and its
   calls go on over TCP */
static void test_hostile_server_side_stalls(void) {
    evil h;
    end c;
    pthread_t th;
    int i;
    alarm(120);
    if (!evil_start(&h, 1, &th, &c, 300000000)) return;
    TT_CHECK(evil_side_closed(&h));
    TT_CHECK_EQ_INT(evil_get(&h, &h.side_accepted), 1);
    for (i = 0; i < 4000 && !log_count("stay on TCP"); i++) sleep_ms(5);
    TT_CHECK_EQ_INT(log_count("stay on TCP"), 1);
    TT_CHECK_EQ_INT(log_count("no answer to its SAMEHOST question within connect_timeout_ns"), 1);
    evil_fetch(&c, 3);
    TT_CHECK_EQ_INT(tstats(c.t).tcp_upgrades, 0);
    TT_CHECK_EQ_INT(tstats(c.t).connections, 1);
    end_close(&c);
    evil_close(&h, th);
}
/* the server offers its side socket twice on one TCP connection: a protocol error naming it (the
   CLOSE and the log say "a second SAMEHOST upgrade offer"), not the misleading "on a TCP
   connection"; the fetch answered before it completed OK */
static void test_hostile_server_offers_twice(void) {
    evil h;
    end c;
    pthread_t th;
    char cm[512];
    int i;
    alarm(120);
    if (!evil_start(&h, 3, &th, &c, 0)) return;
    for (i = 0; i < 4000 && !tstats(c.t).protocol_errors; i++) sleep_ms(5);
    TT_CHECK_EQ_INT(tstats(c.t).protocol_errors, 1);
    for (i = 0; i < 4000; i++) { /* the client's CLOSE reaches the raw server */
        pthread_mutex_lock(&h.mu);
        snprintf(cm, sizeof cm, "%s", h.close_msg);
        pthread_mutex_unlock(&h.mu);
        if (cm[0]) break;
        sleep_ms(5);
    }
    TT_CHECK_CONTAINS(cm, "a second SAMEHOST upgrade offer (flags 0x40) on one TCP connection");
    TT_CHECK_EQ_INT(log_count("a second SAMEHOST upgrade offer"), 1);
    TT_CHECK_EQ_INT(log_count("on a TCP connection that"), 0);
    TT_CHECK_EQ_INT(tstats(c.t).tcp_upgrades, 0);
    TT_CHECK_EQ_INT(tstats(c.t).calls_ok, 1);
    end_close(&c);
    evil_close(&h, th);
}
/* the same, and the side socket the first offer named answers (after the TCP connection was
   closed for the repeat) granting by address: the side connection of a connection closed as
   malformed goes with it: the client does not switch to it */
static void test_hostile_server_offers_twice_side_answers(void) {
    evil h;
    end c;
    pthread_t th;
    alarm(120);
    if (!evil_start(&h, 5, &th, &c, 0)) return;
    TT_CHECK(evil_side_closed(&h)); /* the client closed the side connection */
    TT_CHECK_EQ_INT(evil_get(&h, &h.side_accepted), 1);
    TT_CHECK_EQ_INT(tstats(c.t).protocol_errors, 1);
    TT_CHECK_EQ_INT(tstats(c.t).tcp_upgrades, 0);
    TT_CHECK_EQ_INT(log_count("a second SAMEHOST upgrade offer"), 1); /* the cause, said once */
    end_close(&c);
    evil_close(&h, th);
}
/* a raw client asks twice on one TCP connection: the server closes it naming the second question;
   the same server still offers the upgrade to the next connection */
static void test_client_asks_twice(void) {
    end s;
    char id[160], why[200], cm[512];
    uint8_t tok[16];
    char at[TFRDV_TCP_SH_ADDR_MAX + 1];
    int fd;
    alarm(60);
    if (!end_open(&s, "127.0.0.1:0", 0, 0, 0)) { TT_CHECK(0); return; }
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_host_id(id, sizeof id, why, sizeof why), 0);
    fd = raw_tcp(s.addr);
    TT_CHECK(fd >= 0);
    if (fd >= 0) {
        raw_hello(fd, 5, WK, 1);
        raw_sh(fd, TFRDV_TCP_SH_TCP_ASK, id, strlen(id));
        raw_sh(fd, TFRDV_TCP_SH_TCP_ASK, id, strlen(id));
        TT_CHECK(raw_until_end(fd, cm, sizeof cm, 30000));
        TT_CHECK_CONTAINS(cm, "a second SAMEHOST upgrade question (flags 0x20) on one TCP connection");
        close(fd);
    }
    TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 1);
    TT_CHECK(raw_offer_of(s.addr, tok, at, sizeof at));
    end_close(&s);
}
/* the side socket answers the SAMEHOST question granting nothing (neither by address nor the
   ring): the client does not switch to a path no better than TCP; it closes the side connection,
   says why once, and its calls go on over TCP */
static void test_hostile_server_side_grants_nothing(void) {
    evil h;
    end c;
    pthread_t th;
    int i;
    alarm(120);
    if (!evil_start(&h, 4, &th, &c, 0)) return;
    for (i = 0; i < 4000 && !log_count("stay on TCP") && !tstats(c.t).tcp_upgrades; i++) sleep_ms(5);
    TT_CHECK_EQ_INT(tstats(c.t).tcp_upgrades, 0);
    TT_CHECK_EQ_INT(log_count("stay on TCP"), 1);
    TT_CHECK_EQ_INT(log_count("granted neither values by address nor the ring on the side socket (asked for both"), 1);
    TT_CHECK(evil_side_closed(&h)); /* the client closed the side connection */
    if (!tstats(c.t).tcp_upgrades) { /* (switched, the fetches would wait for a side socket that serves nothing) */
        evil_fetch(&c, 3);
        TT_CHECK_EQ_INT(evil_get(&h, &h.tcp_requests), 4);
        TT_CHECK_EQ_INT(tstats(c.t).calls_ok, 4);
    }
    TT_CHECK_EQ_INT(tstats(c.t).protocol_errors, 0);
    end_close(&c);
    evil_close(&h, th);
}
/* a second client of server s fetches every value prefix<i> (i < n) with !got[i], each intact
   (it must still be in s's table); how many it fetched */
static int fetch_rest(end* s, const char* prefix, const int* got, int n) {
    end c2;
    tfrdv_rendezvous* rc2 = 0;
    tfrdv_status st;
    int i, again = 0;
    if (!end_open(&c2, 0, s->addr, 0, 0)) { TT_CHECK(0); return 0; }
    (void)tfrdv_mgr_start_step(c2.m, 1, &rc2, &st);
    for (i = 0; i < n; i++) {
        tfrdv_key key;
        tfrdv_value* v = 0;
        int dead = 0;
        char e[32];
        if (got[i]) continue;
        snprintf(e, sizeof e, "%s%d", prefix, i);
        key_for(&key, e);
        again++;
        if (tfrdv_recv(rc2, &key.parsed, 0, 10 * SEC, &v, &dead, &st) != TFRDV_OK || vid(v, 3) != i) {
            TT_CHECK(0);
            printf("    value %s%d: %s\n", prefix, i, st.msg);
            tfrdv_value_release(v);
            break;
        }
        tfrdv_value_release(v);
    }
    tfrdv_unref(rc2);
    end_close(&c2);
    return again;
}
/* ============================================================================================
   A receive callback destroys the client transport while its TCP connection moves to the side
   socket (values on TCP, through the ring, by address)
   ============================================================================================ */
enum { DU_N = 90, DU_AT = 12 };
typedef struct du {
    tfrdv_tcp* t;
    int calls[DU_N], ok[DU_N], corrupt, destroyed, completed;
} du;
typedef struct du_one { du* d; int i; } du_one;
static void du_cb(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    du_one* o = (du_one*)u;
    du* d = o->d;
    (void)sa; (void)ra; (void)dead;
    __atomic_add_fetch(&d->calls[o->i], 1, __ATOMIC_SEQ_CST);
    if (st->code == TFRDV_OK) {
        if (vid(v, 3) != o->i) __atomic_add_fetch(&d->corrupt, 1, __ATOMIC_SEQ_CST);
        else __atomic_store_n(&d->ok[o->i], 1, __ATOMIC_SEQ_CST);
    }
    tfrdv_value_release(v);
    if (st->code == TFRDV_OK && __atomic_add_fetch(&d->completed, 1, __ATOMIC_SEQ_CST) == DU_AT) {
        tfrdv_tcp_destroy(d->t); /* on the thread that read the response: returns at once */
        __atomic_store_n(&d->destroyed, 1, __ATOMIC_SEQ_CST);
    }
}
static void test_destroy_from_callback_across_upgrade(void) {
    static du d;
    static du_one one[DU_N];
    end s, c;
    tfrdv_rendezvous *rs = 0, *rc = 0;
    tfrdv_status st;
    int i, calls = 0, ok = 0, again = 0;
    alarm(120);
    memset(&d, 0, sizeof d);
    if (!end_open(&s, "127.0.0.1:0", 0, 0, 0)) { TT_CHECK(0); return; }
    if (!end_open(&c, 0, s.addr, 0, 0)) { TT_CHECK(0); end_close(&s); return; }
    d.t = c.t;
    (void)tfrdv_mgr_start_step(s.m, 1, &rs, &st);
    (void)tfrdv_mgr_start_step(c.m, 1, &rc, &st);
    for (i = 0; i < DU_N; i++) { /* every receive first: some go on TCP, some wait for the switch */
        tfrdv_key key;
        char e[16];
        snprintf(e, sizeof e, "du%d", i);
        key_for(&key, e);
        one[i].d = &d;
        one[i].i = i;
        TT_CHECK_EQ_INT(tfrdv_recv_async(rc, &key.parsed, 0, du_cb, &one[i], &st), TFRDV_OK);
        if (i % 10 == 9) sleep_ms(2);
    }
    for (i = 0; i < DU_N; i++) { /* 40 B (the ring), 3000 B, 80 KB (by address) */
        tfrdv_key key;
        char e[16];
        snprintf(e, sizeof e, "du%d", i);
        key_for(&key, e);
        TT_CHECK_EQ_INT(tfrdv_send(rs, &key.parsed, 0, mkval(i, 3), 0, &st), TFRDV_OK);
        if (i % 10 == 9) sleep_ms(1);
    }
    for (i = 0; i < 4000; i++) { /* every callback, once */
        int j, n = 0;
        for (j = 0; j < DU_N; j++) n += __atomic_load_n(&d.calls[j], __ATOMIC_SEQ_CST) != 0;
        if (n == DU_N) break;
        sleep_ms(5);
    }
    tfrdv_unref(rc);
    tfrdv_mgr_destroy(c.m); /* (the transport went in the callback) */
    for (i = 0; i < DU_N; i++) {
        calls += d.calls[i] == 1;
        ok += d.ok[i];
    }
    printf("    %d values received before and after the destroy, %d receives cancelled (server: %d upgrade)\n", ok, DU_N - ok,
           (int)tstats(s.t).tcp_upgrades);
    TT_CHECK_EQ_INT(d.destroyed, 1);
    TT_CHECK_EQ_INT(calls, DU_N);
    TT_CHECK_EQ_INT(d.corrupt, 0);
    /* every value not received is still in the server's table: a second client fetches each */
    for (i = 0; i < 4000 && (tstats(s.t).values_unacked || tstats(s.t).server_requests_live); i++) sleep_ms(5);
    again = fetch_rest(&s, "du", d.ok, DU_N);
    TT_CHECK_EQ_INT(ok + again, DU_N);
    TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 0);
    tfrdv_unref(rs);
    end_close(&s);
}
/* 2,000 receives over the upgraded connection (values through the ring, on the socket, by
   address) cancelled together (one cancellation manager) while the server answers them: each
   completes once, OK and intact or CANCELLED, and every value not received is still in the
   server's table (a second client fetches each) */
enum { CR_N = 2000 };
typedef struct cr {
    int calls[CR_N], ok[CR_N], corrupt, other;
} cr;
typedef struct cr_one { cr* x; int i; } cr_one;
static void cr_cb(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    cr_one* o = (cr_one*)u;
    (void)sa; (void)ra; (void)dead;
    if (st->code == TFRDV_OK) {
        if (vid(v, 3) != o->i) __atomic_add_fetch(&o->x->corrupt, 1, __ATOMIC_SEQ_CST);
        else __atomic_store_n(&o->x->ok[o->i], 1, __ATOMIC_SEQ_CST);
    } else if (st->code != TFRDV_CANCELLED) {
        __atomic_add_fetch(&o->x->other, 1, __ATOMIC_SEQ_CST);
    }
    tfrdv_value_release(v);
    __atomic_add_fetch(&o->x->calls[o->i], 1, __ATOMIC_SEQ_CST);
}
static void test_cancel_races_answers_across_upgrade(void) {
    static cr x;
    static cr_one one[CR_N];
    end s, c;
    tfrdv_rendezvous *rs = 0, *rc = 0;
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_args a;
    tfrdv_status st;
    int i, calls = 0, ok = 0, again = 0;
    alarm(180);
    memset(&x, 0, sizeof x);
    if (!end_open(&s, "127.0.0.1:0", 0, 0, 0)) { TT_CHECK(0); return; }
    if (!end_open(&c, 0, s.addr, 0, 0)) { TT_CHECK(0); end_close(&s); return; }
    (void)tfrdv_mgr_start_step(s.m, 1, &rs, &st);
    (void)tfrdv_mgr_start_step(c.m, 1, &rc, &st);
    fetch_three(rs, rc, c.t, "crw"); /* upgraded first */
    TT_CHECK_EQ_INT(tstats(c.t).tcp_upgrades, 1);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm, &st), TFRDV_OK);
    memset(&a, 0, sizeof a);
    a.cancel = cm;
    for (i = 0; i < CR_N; i++) {
        tfrdv_key key;
        char e[16];
        snprintf(e, sizeof e, "cr%d", i);
        key_for(&key, e);
        one[i].x = &x;
        one[i].i = i;
        TT_CHECK_EQ_INT(tfrdv_recv_async(rc, &key.parsed, &a, cr_cb, &one[i], &st), TFRDV_OK);
    }
    for (i = 0; i < CR_N; i++) { /* the answers, and halfway the cancel of every receive */
        tfrdv_key key;
        char e[16];
        snprintf(e, sizeof e, "cr%d", i);
        key_for(&key, e);
        TT_CHECK_EQ_INT(tfrdv_send(rs, &key.parsed, 0, mkval(i, 3), 0, &st), TFRDV_OK);
        if (i == CR_N / 2) tfrdv_cancel_start(cm);
    }
    for (i = 0; i < 6000; i++) {
        int j, n = 0;
        for (j = 0; j < CR_N; j++) n += __atomic_load_n(&x.calls[j], __ATOMIC_SEQ_CST) != 0;
        if (n == CR_N) break;
        sleep_ms(5);
    }
    sleep_ms(20); /* a second completion would show now */
    for (i = 0; i < CR_N; i++) {
        calls += x.calls[i] == 1;
        ok += x.ok[i];
    }
    printf("    %d of %d received before the cancel took them\n", ok, CR_N);
    TT_CHECK_EQ_INT(calls, CR_N);
    TT_CHECK_EQ_INT(x.corrupt, 0);
    TT_CHECK_EQ_INT(x.other, 0);
    settle(&c, &s);
    tfrdv_unref(rc);
    end_close(&c);
    tfrdv_cancel_mgr_destroy(cm);
    again = fetch_rest(&s, "cr", x.ok, CR_N);
    TT_CHECK_EQ_INT(ok + again, CR_N);
    TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 0);
    tfrdv_unref(rs);
    end_close(&s);
}
#endif

/* ============================================================================================
   Floods of 1 ms receives racing their answers
   ============================================================================================ */
enum { FL_T = 4, FL_N = 1200 };
typedef struct flood {
    end *c, *s;
    tfrdv_rendezvous *rc, *rs;
    int classes;
    int seen[FL_N];             /* receptions per value id (atomic) */
    int corrupt, timed_out, other;
    tfrdv_status other_st;
} flood;
typedef struct flood_arg { flood* x; int t; } flood_arg;
static void fl_edge(char* e, size_t cap, int id) { snprintf(e, cap, "fl_%d", id); }
static void fl_take(flood* x, tfrdv_value* v) {
    int id = vid(v, x->classes);
    if (id < 0 || id >= FL_N) __atomic_add_fetch(&x->corrupt, 1, __ATOMIC_SEQ_CST);
    else __atomic_add_fetch(&x->seen[id], 1, __ATOMIC_SEQ_CST);
    tfrdv_value_release(v);
}
static void* fl_consumer(void* p) {
    flood_arg* a = (flood_arg*)p;
    flood* x = a->x;
    int id;
    for (id = a->t; id < FL_N; id += FL_T) { /* each key once, 1 ms */
        tfrdv_key key;
        tfrdv_value* v = 0;
        tfrdv_status st;
        int dead = 0;
        char e[32];
        tfrdv_code rc;
        fl_edge(e, sizeof e, id);
        key_for(&key, e);
        rc = tfrdv_recv(x->rc, &key.parsed, 0, 1000000, &v, &dead, &st);
        if (rc == TFRDV_OK) fl_take(x, v);
        else {
            tfrdv_value_release(v);
            if (rc == TFRDV_DEADLINE_EXCEEDED) __atomic_add_fetch(&x->timed_out, 1, __ATOMIC_SEQ_CST);
            else if (__atomic_add_fetch(&x->other, 1, __ATOMIC_SEQ_CST) == 1) x->other_st = st;
        }
    }
    return 0;
}
static void* fl_producer(void* p) {
    flood* x = (flood*)p;
    int id;
    for (id = 0; id < FL_N; id++) {
        tfrdv_key key;
        tfrdv_status st;
        char e[32];
        tfrdv_value* v = mkval(id, x->classes);
        fl_edge(e, sizeof e, id);
        key_for(&key, e);
        if (tfrdv_send(x->rs, &key.parsed, 0, v, 0, &st) != TFRDV_OK) {
            printf("    send: %s\n", st.msg);
            tfrdv_value_release(v);
        }
    }
    return 0;
}
typedef struct fl_slot { int done; tfrdv_code code; tfrdv_value* v; } fl_slot;
static void fl_drained(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    fl_slot* sl = (fl_slot*)u;
    (void)sa; (void)ra; (void)dead;
    sl->v = v;
    sl->code = st->code;
    __atomic_add_fetch(&sl->done, 1, __ATOMIC_SEQ_CST);
}
/* FL_T threads receive FL_N keys once each with a 1 ms timeout while the server sends their
   values; then every value not received is fetched again (it must still be in the server's
   table): each value is received exactly once, intact; every receive completes once */
static void flood_over(const char* listen, int64_t same_host, int classes, int want_upgrade) {
    static flood x;
    static fl_slot drain[FL_N];
    flood_arg args[FL_T];
    pthread_t th[FL_T], pt;
    end s, c;
    tfrdv_status st;
    int i, t, received = 0, again = 0, lost = 0, dups = 0, twice = 0, waiting;
    alarm(180);
    memset(&x, 0, sizeof x);
    memset(drain, 0, sizeof drain);
    if (!end_open(&s, listen, 0, same_host, 0)) { TT_CHECK(0); return; }
    if (!end_open(&c, 0, s.addr, same_host, 0)) { TT_CHECK(0); end_close(&s); return; }
    x.c = &c;
    x.s = &s;
    x.classes = classes;
    (void)tfrdv_mgr_start_step(s.m, 1, &x.rs, &st);
    (void)tfrdv_mgr_start_step(c.m, 1, &x.rc, &st);
    for (t = 0; t < FL_T; t++) {
        args[t].x = &x;
        args[t].t = t;
        pthread_create(&th[t], 0, fl_consumer, &args[t]);
    }
    pthread_create(&pt, 0, fl_producer, &x);
    pthread_join(pt, 0);
    for (t = 0; t < FL_T; t++) pthread_join(th[t], 0);
    settle(&c, &s);
    for (i = 0; i < FL_N; i++) {
        tfrdv_key key;
        char e[32];
        if (x.seen[i]) continue;
        fl_edge(e, sizeof e, i);
        key_for(&key, e);
        again++;
        if (tfrdv_recv_async(x.rc, &key.parsed, 0, fl_drained, &drain[i], &st) != TFRDV_OK) drain[i].done = 1;
    }
    for (i = 0; i < 6000; i++) { /* up to 30 s */
        int j;
        waiting = 0;
        for (j = 0; j < FL_N; j++) waiting += !x.seen[j] && !__atomic_load_n(&drain[j].done, __ATOMIC_SEQ_CST);
        if (!waiting) break;
        sleep_ms(5);
    }
    for (i = 0; i < FL_N; i++) received += x.seen[i];
    tfrdv_unref(x.rc);
    end_close(&c); /* receives still waiting complete CANCELLED now */
    for (i = 0; i < FL_N; i++) {
        if (drain[i].done > 1) twice++;
        if (drain[i].done && drain[i].code == TFRDV_OK) fl_take(&x, drain[i].v);
        else tfrdv_value_release(drain[i].v);
    }
    for (i = 0; i < FL_N; i++) {
        if (x.seen[i] > 1) dups += x.seen[i] - 1;
        if (x.seen[i] == 0) lost++;
    }
    printf("    %s: %d values, %d received by 1 ms receives (%d timed out), %d fetched again, %d lost, %d duplicated, %d corrupt\n",
           listen, FL_N, received, x.timed_out, again, lost, dups, x.corrupt);
    if (x.other) printf("    %d receives failed otherwise, first: %s\n", x.other, x.other_st.msg);
    TT_CHECK_EQ_INT(x.other, 0);
    TT_CHECK_EQ_INT(lost, 0);
    TT_CHECK_EQ_INT(dups, 0);
    TT_CHECK_EQ_INT(twice, 0);
    TT_CHECK_EQ_INT(x.corrupt, 0);
    TT_CHECK_EQ_INT(received + x.timed_out, FL_N); /* each 1 ms receive completed once */
    TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 0);
    if (want_upgrade) TT_CHECK_EQ_INT(tstats(s.t).tcp_upgrades, 1);
    tfrdv_unref(x.rs);
    end_close(&s);
}
static void test_flood_1ms_receives_tcp(void) { flood_over("127.0.0.1:0", TFRDV_OFF, 2, 0); }
#ifdef TFRDV_TCP__UPGRADE
/* the same over a TCP connection that moves to the side socket during the flood (ring, by
   address, the socket): the switch races the give-ups */
static void test_flood_1ms_receives_across_upgrade(void) { flood_over("127.0.0.1:0", 0, 3, 1); }
#endif

/* ============================================================================================
   Thousands of request deadlines under a flood
   ============================================================================================ */
/* a raw client writes 3,000 REQUESTs for keys nobody sends, each with its own deadline of 1 to 8
   ms, in one burst (a thread of its own) while it reads the answers: each raw request is
   answered exactly once, ERROR DEADLINE_EXCEEDED; the server's 3,000 timers all fire
   (serve_expired) and nothing stays in flight */
enum { TM_N = 3000 };
typedef struct tm_w { int fd; } tm_w;
static void* tm_writer(void* p) {
    tm_w* w = (tm_w*)p;
    int i;
    for (i = 0; i < TM_N; i++) {
        tfrdv_tcp_frame f;
        tfrdv_key key;
        char e[32];
        snprintf(e, sizeof e, "tm_none_%d", i);
        key_for(&key, e);
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_REQUEST;
        f.id = (uint64_t)i + 1;
        f.step_id = 1;
        f.request_id = 900000 + i;
        f.deadline_ns = (int64_t)(1 + i % 8) * 1000000;
        f.key.ptr = key.buf;
        f.key.len = key.len;
        raw_put(w->fd, &f);
    }
    return 0;
}
static void test_request_deadlines_flood(void) {
    static uint8_t seen[TM_N + 1];
    rawbuf* rb = (rawbuf*)calloc(1, sizeof *rb);
    end s;
    tm_w w;
    pthread_t th;
    tfrdv_rendezvous* rs = 0;
    tfrdv_status st;
    tfrdv_tcp_frame g;
    int errors = 0, expired = 0, twice = 0, other = 0, i;
    alarm(120);
    memset(seen, 0, sizeof seen);
    if (!end_open(&s, "127.0.0.1:0", 0, 0, 0)) { TT_CHECK(0); free(rb); return; }
    (void)tfrdv_mgr_start_step(s.m, 1, &rs, &st);
    w.fd = raw_tcp(s.addr);
    TT_CHECK(w.fd >= 0);
    if (w.fd < 0) { tfrdv_unref(rs); end_close(&s); free(rb); return; }
    raw_hello(w.fd, 5, WK, 1);
    pthread_create(&th, 0, tm_writer, &w);
    while (errors < TM_N && raw_next(w.fd, rb, &g, 0, 0, 20000)) {
        if (g.type != TFRDV_TCP_ERROR) continue;
        errors++;
        if (g.id < 1 || g.id > TM_N) other++;
        else if (seen[g.id]++) twice++;
        if (g.code == TFRDV_DEADLINE_EXCEEDED) expired++;
        else if (other++ == 0) printf("    request %llu: code %u\n", (unsigned long long)g.id, g.code);
    }
    pthread_join(th, 0);
    TT_CHECK_EQ_INT(errors, TM_N);
    TT_CHECK_EQ_INT(expired, TM_N);
    TT_CHECK_EQ_INT(twice, 0);
    TT_CHECK_EQ_INT(other, 0);
    TT_CHECK_EQ_INT(tstats(s.t).serve_expired, TM_N);
    for (i = 0; i < 2000 && tstats(s.t).server_requests_live; i++) sleep_ms(5);
    TT_CHECK_EQ_INT(tstats(s.t).server_requests_live, 0);
    TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 0);
    close(w.fd);
    free(rb);
    tfrdv_unref(rs);
    end_close(&s);
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
#ifdef TFRDV_TCP__UPGRADE
    TT_RUN(test_side_socket_malformed_tokens);
    TT_RUN(test_side_socket_silent_flood);
    TT_RUN(test_hostile_server_side_impostor);
    TT_RUN(test_hostile_server_side_stalls);
    TT_RUN(test_hostile_server_offers_twice);
    TT_RUN(test_hostile_server_offers_twice_side_answers);
    TT_RUN(test_client_asks_twice);
    TT_RUN(test_hostile_server_side_grants_nothing);
    TT_RUN(test_destroy_from_callback_across_upgrade);
    TT_RUN(test_cancel_races_answers_across_upgrade);
#endif
    TT_RUN(test_flood_1ms_receives_tcp);
    TT_RUN(test_request_deadlines_flood);
#ifdef TFRDV_TCP__UPGRADE
    TT_RUN(test_flood_1ms_receives_across_upgrade);
#endif
    alarm(0);
    return TT_MAIN_END();
}
