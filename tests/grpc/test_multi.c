/* test_multi.c - per-peer routing (tfrdv_router_create) with two servers on one manager, in one
   process: worker W has ONE manager whose transport is a router ("/job:tf" -> tfrdv_grpc.h,
   "*" -> tfrdv_tcp.h) and is served by a tfrdv_grpc server and a tfrdv_tcp server at once. Its
   peers: T, a "TensorFlow-like" worker on tfrdv_grpc (TensorFlow's WorkerService wire), and P, a
   tfrdv worker on tfrdv_tcp (a Unix socket or 127.0.0.1). In one step W serves T over gRPC and P
   over TCP while it fetches from both; every value is checked byte for byte and the companions'
   counters say which wire carried what. Every object's memory comes from one counting allocator,
   which returns to zero after teardown in either order (transports before or after managers).
   Bounded: every wait has a deadline, and alarm() ends a hung run. Built by tests/grpc/grpc.mk
   when the gRPC C core is there; TSan/LSan reports inside libgrpc are suppressed by the files
   tests/run.sh passes (tests/sanitizer.supp.*). */
#define _GNU_SOURCE
#define TFRDV_IMPLEMENTATION
#define TFRDV_GRPC_IMPLEMENTATION
#define TFRDV_TCP_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_grpc.h"
#include "tfrdv_tcp.h"
#include "tt.h"
#include "fixtures.h"
#include "countwait.h"
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define W "/job:w/replica:0/task:0"
#define T "/job:tf/replica:0/task:0"
#define P "/job:p/replica:0/task:0"
#define Q "/job:q/replica:0/task:0" /* a worker no route of the no-"*" world matches */
#define W_DEV W "/device:CPU:0"
#define T_DEV T "/device:CPU:0"
#define P_DEV P "/device:CPU:0"
#define Q_DEV Q "/device:CPU:0"
#define W_INC 0x1111ULL
#define T_INC 0x2222ULL
#define P_INC 0x3333ULL
#define SEC 1000000000LL
#define STEP 77
#define BURST 32 /* keys per direction in test_step_burst */

static char tmpdir[64];
static void sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, 0);
}

/* ---- values: byte i of seed s, from the counting allocator ---- */
static uint8_t vbyte(uint64_t i, unsigned s) { return (uint8_t)(i * 131u + s * 17u + 1u); }
static tfrdv_value* mkval(fx_alloc* a, uint64_t n, unsigned s) {
    tfrdv_allocator al = fx_alloc_hooks(a).allocator;
    int64_t d[1];
    tfrdv_value* v;
    uint64_t i;
    d[0] = (int64_t)n;
    v = tfrdv_value_new(&al, 4 /* DT_UINT8 */, 1, d, 0, n);
    if (v)
        for (i = 0; i < n; i++) ((uint8_t*)v->data)[i] = vbyte(i, s);
    return v;
}
/* v is value seed s of n bytes, intact */
static int vok(const tfrdv_value* v, uint64_t n, unsigned s) {
    uint64_t i;
    if (!v || v->dtype != 4 || v->rank != 1 || v->dims[0] != (int64_t)n || v->size != n) return 0;
    for (i = 0; i < n; i++)
        if (((const uint8_t*)v->data)[i] != vbyte(i, s)) return 0;
    return 1;
}

/* ---- asynchronous receives, waited for with a deadline ---- */
typedef struct slot {
    int calls;
    tfrdv_status st;
    tfrdv_value* v;
    int dead;
} slot;
typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    slot s[4 * BURST];
} waiter;
typedef struct wref {
    waiter* w;
    int i;
} wref;
static void waiter_init(waiter* w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, 0);
    pthread_cond_init(&w->cv, 0);
}
static void waiter_fini(waiter* w) {
    int i;
    for (i = 0; i < 4 * BURST; i++) tfrdv_value_release(w->s[i].v);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}
static void on_recv(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                    tfrdv_value* v, int dead) {
    wref* r = (wref*)u;
    waiter* w = r->w;
    (void)sa;
    (void)ra;
    pthread_mutex_lock(&w->mu);
    w->s[r->i].calls++;
    w->s[r->i].st = *st;
    if (w->s[r->i].v) tfrdv_value_release(w->s[r->i].v); /* a second completion: counted, not kept */
    w->s[r->i].v = v;
    w->s[r->i].dead = dead;
    w->done++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}
/* 1 when n completions arrived within timeout_ns */
static int waiter_wait(waiter* w, int n, int64_t timeout_ns) { return count_wait(&w->mu, &w->cv, &w->done, n, timeout_ns); }

/* ---- the three workers ---- */
typedef struct world {
    fx_alloc a;
    tfrdv_mgr *w, *t, *p;
    tfrdv_grpc *wg, *tg; /* W's and T's gRPC companions (client and server each) */
    tfrdv_tcp *wt, *pt;  /* W's and P's socket companions */
    char wg_addr[64], tg_addr[64];
    tfrdv_rendezvous *rw, *rt, *rp; /* step STEP on W, T and P */
} world;
static tfrdv_logger world_logger; /* the next world's gRPC companions and managers log here, but
                                     T's manager (it logs the abort of its own step, its own text) */
static tfrdv_mgr* mgr_on(world* x, const char* name, uint64_t inc, tfrdv_transport tr) {
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    mc.hooks = fx_alloc_hooks(&x->a);
    if (strcmp(name, T) != 0) mc.hooks.logger = world_logger;
    mc.worker_name = name;
    mc.incarnation = inc;
    mc.transport = tr;
    return mk(&mc);
}
/* the next world's gRPC companions: 0 default config (DELIVERY RECEIPTS between tfrdv peers),
   EO_ACK require_ack on (every answer), EO_OFF receipts TFRDV_OFF (TensorFlow's protocol as is) */
enum { EO_DEFAULT = 0, EO_ACK, EO_OFF };
static int grpc_mode;
static tfrdv_grpc* grpc_on(world* x, tfrdv_status* st) {
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_grpc* g = 0;
    gc.hooks = fx_alloc_hooks(&x->a);
    gc.hooks.logger = world_logger;
    gc.require_ack = grpc_mode == EO_ACK;
    if (grpc_mode == EO_OFF) gc.receipts = TFRDV_OFF;
    gc.listen_address = "127.0.0.1:0";
    if (tfrdv_grpc_create(&gc, &g, st) != TFRDV_OK) printf("    tfrdv_grpc_create: %s\n", st->msg);
    return g;
}
static tfrdv_tcp* tcp_on(world* x, const char* addr, tfrdv_status* st) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp* t = 0;
    tc.hooks = fx_alloc_hooks(&x->a);
    tc.listen_address = addr;
    if (tfrdv_tcp_create(&tc, &t, st) != TFRDV_OK) printf("    tfrdv_tcp_create %s: %s\n", addr, st->msg);
    return t;
}
/* W with a router over routes[0..n) (transport fields filled here: 'g' gRPC, 't' TCP), T and P;
   every server attached, every address known, step STEP started on the three. 1 on success; a
   failure is printed and what was built is torn down. */
static void world_close(world* x, int order);
static int world_build(world* x, const char* const* patterns, const char* kinds, size_t n, const char* tcp_kind,
                      int (*pick)(void*, const char*, size_t), void* pick_user) {
    tfrdv_status st;
    tfrdv_route routes[4];
    tfrdv_router_config rc = tfrdv_router_config_init();
    tfrdv_transport rt, gv, tv;
    char waddr[128], paddr[128];
    size_t i;
    memset(x, 0, sizeof *x);
    memset(&gv, 0, sizeof gv);
    memset(&tv, 0, sizeof tv);
    if (strcmp(tcp_kind, "unix") == 0) {
        snprintf(waddr, sizeof waddr, "unix:%s/w.sock", tmpdir);
        snprintf(paddr, sizeof paddr, "unix:%s/p.sock", tmpdir);
    } else {
        snprintf(waddr, sizeof waddr, "127.0.0.1:0");
        snprintf(paddr, sizeof paddr, "127.0.0.1:0");
    }
    if (!(x->wg = grpc_on(x, &st)) || !(x->tg = grpc_on(x, &st)) || !(x->wt = tcp_on(x, waddr, &st)) ||
        !(x->pt = tcp_on(x, paddr, &st)))
        return 0;
    /* one vtable per companion, copied into every route that uses it (the router holds each
       distinct transport once) */
    for (i = 0; i < n; i++) {
        routes[i].workers = patterns[i];
        if (kinds[i] == 'g' && !gv.start_call) gv = tfrdv_grpc_transport(x->wg);
        if (kinds[i] == 't' && !tv.start_call) tv = tfrdv_tcp_transport(x->wt);
        routes[i].transport = kinds[i] == 'g' ? gv : tv;
    }
    rc.hooks = fx_alloc_hooks(&x->a);
    rc.routes = routes;
    rc.num_routes = n;
    rc.pick = pick;
    rc.pick_user = pick_user;
    if (tfrdv_router_create(&rc, &rt, &st) != TFRDV_OK) {
        printf("    tfrdv_router_create: %s\n", st.msg);
        return 0;
    }
    if (!(x->w = mgr_on(x, W, W_INC, rt)) || !(x->t = mgr_on(x, T, T_INC, tfrdv_grpc_transport(x->tg))) ||
        !(x->p = mgr_on(x, P, P_INC, tfrdv_tcp_transport(x->pt))))
        return 0;
    /* W's manager is served by both servers at once */
    if (tfrdv_grpc_attach(x->wg, x->w, &st) != TFRDV_OK || tfrdv_tcp_attach(x->wt, x->w, &st) != TFRDV_OK ||
        tfrdv_grpc_attach(x->tg, x->t, &st) != TFRDV_OK || tfrdv_tcp_attach(x->pt, x->p, &st) != TFRDV_OK) {
        printf("    attach: %s\n", st.msg);
        return 0;
    }
    snprintf(x->wg_addr, sizeof x->wg_addr, "127.0.0.1:%d", tfrdv_grpc_port(x->wg));
    snprintf(x->tg_addr, sizeof x->tg_addr, "127.0.0.1:%d", tfrdv_grpc_port(x->tg));
    if (tfrdv_grpc_set_worker(x->wg, T, x->tg_addr, &st) != TFRDV_OK || tfrdv_grpc_set_worker(x->tg, W, x->wg_addr, &st) != TFRDV_OK ||
        tfrdv_tcp_set_worker(x->wt, P, tfrdv_tcp_address(x->pt), &st) != TFRDV_OK ||
        tfrdv_tcp_set_worker(x->pt, W, tfrdv_tcp_address(x->wt), &st) != TFRDV_OK) {
        printf("    set_worker: %s\n", st.msg);
        return 0;
    }
    if (tfrdv_mgr_start_step(x->w, STEP, &x->rw, &st) != TFRDV_OK || tfrdv_mgr_start_step(x->t, STEP, &x->rt, &st) != TFRDV_OK ||
        tfrdv_mgr_start_step(x->p, STEP, &x->rp, &st) != TFRDV_OK) {
        printf("    start_step: %s\n", st.msg);
        return 0;
    }
    return 1;
}
static int world_open(world* x, const char* const* patterns, const char* kinds, size_t n, const char* tcp_kind,
                      int (*pick)(void*, const char*, size_t), void* pick_user) {
    if (world_build(x, patterns, kinds, n, tcp_kind, pick, pick_user)) return 1;
    world_close(x, 0);
    return 0;
}
/* transports first (order 0) or managers first (order 1); NULL members are skipped */
static void world_close(world* x, int order) {
    if (x->rw) tfrdv_unref(x->rw);
    if (x->rt) tfrdv_unref(x->rt);
    if (x->rp) tfrdv_unref(x->rp);
    x->rw = x->rt = x->rp = 0;
    if (order == 1) {
        if (x->w) tfrdv_mgr_destroy(x->w);
        if (x->t) tfrdv_mgr_destroy(x->t);
        if (x->p) tfrdv_mgr_destroy(x->p);
    }
    if (x->wg) tfrdv_grpc_destroy(x->wg);
    if (x->wt) tfrdv_tcp_destroy(x->wt);
    if (x->tg) tfrdv_grpc_destroy(x->tg);
    if (x->pt) tfrdv_tcp_destroy(x->pt);
    if (order == 0) {
        if (x->w) tfrdv_mgr_destroy(x->w);
        if (x->t) tfrdv_mgr_destroy(x->t);
        if (x->p) tfrdv_mgr_destroy(x->p);
    }
}
static void mkkey(tfrdv_key* k, const char* src, uint64_t inc, const char* dst, const char* edge) {
    tfrdv_frame_iter fi = {0, 0};
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_key_make(k, src, inc, dst, edge, fi, &st), TFRDV_OK);
}
static tfrdv_grpc_stats gstats(tfrdv_grpc* g) {
    tfrdv_grpc_stats s;
    tfrdv_grpc_get_stats(g, &s);
    return s;
}
static tfrdv_tcp_stats tstats(tfrdv_tcp* t) {
    tfrdv_tcp_stats s;
    tfrdv_tcp_get_stats(t, &s);
    return s;
}
/* one line per counter that differs; 1 when a companion carried exactly `calls` fetches of
   `received` bytes in total (client) and `served` requests of `sent` bytes (server), all OK */
static int want(const char* who, const char* what, uint64_t got, uint64_t expect) {
    if (got == expect) return 1;
    printf("    %s: %s %llu, want %llu\n", who, what, (unsigned long long)got, (unsigned long long)expect);
    return 0;
}
static int carried_grpc(const char* who, tfrdv_grpc* g, uint64_t calls, uint64_t received, uint64_t served, uint64_t sent) {
    tfrdv_grpc_stats s = gstats(g);
    return want(who, "calls_started", s.calls_started, calls) & want(who, "calls_ok", s.calls_ok, calls) &
           want(who, "calls_failed", s.calls_failed, 0) & want(who, "bytes_received", s.bytes_received, received) &
           want(who, "served", s.served, served) & want(who, "serve_ok", s.serve_ok, served) &
           want(who, "bytes_sent", s.bytes_sent, sent);
}
static int carried_tcp(const char* who, tfrdv_tcp* t, uint64_t calls, uint64_t received, uint64_t served, uint64_t sent) {
    tfrdv_tcp_stats s = tstats(t);
    return want(who, "calls_started", s.calls_started, calls) & want(who, "calls_ok", s.calls_ok, calls) &
           want(who, "calls_failed", s.calls_failed, 0) & want(who, "bytes_received", s.bytes_received, received) &
           want(who, "served", s.served, served) & want(who, "serve_ok", s.serve_ok, served) &
           want(who, "bytes_sent", s.bytes_sent, sent) & want(who, "protocol_errors", s.protocol_errors, 0);
}
/* polls until cond holds (bounded: 10 s) */
#define UNTIL(cond) \
    do { int u_; for (u_ = 0; u_ < 2000 && !(cond); u_++) sleep_ms(5); } while (0)

static const char* const MAIN_PAT[2] = {"/job:tf", "*"};

/* ---- one step: W serves T over gRPC and P over TCP while it fetches from both ---- */
#define N1 ((uint64_t)4099)      /* W -> T over gRPC (zero-copy slice: above 1 KiB) */
#define N2 ((uint64_t)300001)    /* W -> P over TCP (two frames: above 256 KiB) */
#define N3 ((uint64_t)(1u << 20) + 7) /* T -> W over gRPC */
#define N4 ((uint64_t)17)        /* P -> W over TCP */
static void one_step(const char* tcp_kind, int order) {
    world x;
    waiter wt;
    wref refs[4];
    tfrdv_key k1, k2, k3, k4;
    tfrdv_status st;
    tfrdv_mgr_stats ms;
    int i;
    alarm(120);
    waiter_init(&wt);
    if (!world_open(&x, MAIN_PAT, "gt", 2, tcp_kind, 0, 0)) {
        TT_CHECK(0);
        waiter_fini(&wt);
        return;
    }
    mkkey(&k1, W_DEV, W_INC, T_DEV, "k1");
    mkkey(&k2, W_DEV, W_INC, P_DEV, "k2");
    mkkey(&k3, T_DEV, T_INC, W_DEV, "k3");
    mkkey(&k4, P_DEV, P_INC, W_DEV, "k4");
    for (i = 0; i < 4; i++) { refs[i].w = &wt; refs[i].i = i; }
    /* all four receives are in flight before any value exists: each server holds a pending serve */
    TT_CHECK_EQ_INT(tfrdv_recv_async(x.rt, &k1.parsed, 0, on_recv, &refs[0], 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(x.rp, &k2.parsed, 0, on_recv, &refs[1], 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(x.rw, &k3.parsed, 0, on_recv, &refs[2], 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(x.rw, &k4.parsed, 0, on_recv, &refs[3], 0), TFRDV_OK);
    UNTIL(gstats(x.wg).served >= 1 && tstats(x.wt).served >= 1 && gstats(x.tg).served >= 1 && tstats(x.pt).served >= 1);
    TT_CHECK_EQ_INT(wt.done, 0);
    /* then the values: W's two, T's and P's */
    TT_CHECK_EQ_INT(tfrdv_send(x.rw, &k1.parsed, 0, mkval(&x.a, N1, 1), 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(x.rw, &k2.parsed, 0, mkval(&x.a, N2, 2), 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(x.rt, &k3.parsed, 0, mkval(&x.a, N3, 3), 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(x.rp, &k4.parsed, 0, mkval(&x.a, N4, 4), 0, &st), TFRDV_OK);
    TT_CHECK(waiter_wait(&wt, 4, 30 * SEC));
    pthread_mutex_lock(&wt.mu);
    for (i = 0; i < 4; i++) {
        static const uint64_t sizes[4] = {N1, N2, N3, N4};
        TT_CHECK_EQ_INT(wt.s[i].calls, 1);
        TT_CHECK_EQ_INT(wt.s[i].st.code, TFRDV_OK);
        if (wt.s[i].st.code != TFRDV_OK) printf("    receive %d: %s\n", i + 1, wt.s[i].st.msg);
        TT_CHECK_EQ_INT(wt.s[i].dead, 0);
        TT_CHECK(vok(wt.s[i].v, sizes[i], (unsigned)(i + 1)));
    }
    pthread_mutex_unlock(&wt.mu);
    /* which wire carried what: W's gRPC side served k1 and fetched k3, its TCP side served k2 and
       fetched k4, and neither carried anything else */
    /* (a server counts its bytes once the reply left, the manager its call after the receive's
       callback: both may trail the completion seen here) */
    UNTIL(gstats(x.wg).bytes_sent >= N1 && tstats(x.wt).bytes_sent >= N2 && gstats(x.tg).bytes_sent >= N3 &&
          tstats(x.pt).bytes_sent >= N4 && stats(x.w).calls_completed >= 2 && gstats(x.wg).calls_ok >= 1 &&
          tstats(x.wt).calls_ok >= 1 && gstats(x.tg).calls_ok >= 1 && tstats(x.pt).calls_ok >= 1);
    TT_CHECK(carried_grpc("W's gRPC", x.wg, 1, N3, 1, N1));
    TT_CHECK(carried_tcp("W's TCP", x.wt, 1, N4, 1, N2));
    TT_CHECK(carried_grpc("T's gRPC", x.tg, 1, N1, 1, N3));
    TT_CHECK(carried_tcp("P's TCP", x.pt, 1, N2, 1, N4));
    /* W's manager: two remote fetches started and completed, two requests served */
    ms = stats(x.w);
    TT_CHECK_EQ_INT(ms.calls_started, 2);
    TT_CHECK_EQ_INT(ms.calls_completed, 2);
    TT_CHECK_EQ_INT(ms.calls_in_flight, 0);
    TT_CHECK_EQ_INT(ms.requests_served, 2);
    TT_CHECK_EQ_INT(ms.double_finishes, 0);
    world_close(&x, order);
    waiter_fini(&wt);
    FX_CHECK_EMPTY(&x.a);
}
static void test_step_tcp_transports_first(void) { one_step("tcp", 0); }
static void test_step_tcp_managers_first(void) { one_step("tcp", 1); }
static void test_step_unix_transports_first(void) { one_step("unix", 0); }
static void test_step_unix_managers_first(void) { one_step("unix", 1); }

/* ---- BURST keys each way in one step, sent by three threads at once (W's, T's, P's), while
   both of W's servers and both of its clients are busy ---- */
typedef struct sender {
    fx_alloc* a;
    tfrdv_rendezvous* r;
    tfrdv_key* keys; /* n keys, value seed = index + base */
    int n, base, errors;
} sender;
static uint64_t burst_size(int i) { return (uint64_t)((i * 7919) % 70000 + (i % 3 == 0 ? 0 : 1)); }
static void* send_all(void* u) {
    sender* s = (sender*)u;
    tfrdv_status st;
    int i;
    for (i = 0; i < s->n; i++)
        if (tfrdv_send(s->r, &s->keys[i].parsed, 0, mkval(s->a, burst_size(s->base + i), (unsigned)(s->base + i)), 0, &st) != TFRDV_OK)
            s->errors++;
    return 0;
}
static void test_step_burst(void) {
    static tfrdv_key keys[4 * BURST]; /* W->T, W->P, T->W, P->W */
    world x;
    waiter wt;
    wref refs[4 * BURST];
    sender snd[3];
    pthread_t th[3];
    uint64_t bytes[4] = {0, 0, 0, 0};
    int i, bad = 0;
    alarm(120);
    waiter_init(&wt);
    if (!world_open(&x, MAIN_PAT, "gt", 2, "unix", 0, 0)) {
        TT_CHECK(0);
        waiter_fini(&wt);
        return;
    }
    for (i = 0; i < 4 * BURST; i++) {
        static const char* const src[4] = {W_DEV, W_DEV, T_DEV, P_DEV};
        static const char* const dst[4] = {T_DEV, P_DEV, W_DEV, W_DEV};
        static const uint64_t inc[4] = {W_INC, W_INC, T_INC, P_INC};
        tfrdv_rendezvous* const rcv_on[4] = {x.rt, x.rp, x.rw, x.rw};
        char edge[16];
        int d = i / BURST;
        snprintf(edge, sizeof edge, "b%d", i);
        mkkey(&keys[i], src[d], inc[d], dst[d], edge);
        bytes[d] += burst_size(i);
        refs[i].w = &wt;
        refs[i].i = i;
        TT_CHECK_EQ_INT(tfrdv_recv_async(rcv_on[d], &keys[i].parsed, 0, on_recv, &refs[i], 0), TFRDV_OK);
    }
    for (i = 0; i < 3; i++) {
        snd[i].a = &x.a;
        snd[i].errors = 0;
    }
    snd[0].r = x.rw; snd[0].keys = keys; snd[0].n = 2 * BURST; snd[0].base = 0;
    snd[1].r = x.rt; snd[1].keys = keys + 2 * BURST; snd[1].n = BURST; snd[1].base = 2 * BURST;
    snd[2].r = x.rp; snd[2].keys = keys + 3 * BURST; snd[2].n = BURST; snd[2].base = 3 * BURST;
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(pthread_create(&th[i], 0, send_all, &snd[i]), 0);
    for (i = 0; i < 3; i++) pthread_join(th[i], 0);
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(snd[i].errors, 0);
    TT_CHECK(waiter_wait(&wt, 4 * BURST, 60 * SEC));
    pthread_mutex_lock(&wt.mu);
    for (i = 0; i < 4 * BURST; i++)
        if (wt.s[i].calls != 1 || wt.s[i].st.code != TFRDV_OK || !vok(wt.s[i].v, burst_size(i), (unsigned)i)) {
            if (bad++ < 3) printf("    key b%d: %d completions, code %d %s\n", i, wt.s[i].calls, (int)wt.s[i].st.code, wt.s[i].st.msg);
        }
    pthread_mutex_unlock(&wt.mu);
    TT_CHECK_EQ_INT(bad, 0);
    UNTIL(gstats(x.wg).bytes_sent >= bytes[0] && tstats(x.wt).bytes_sent >= bytes[1] && gstats(x.tg).bytes_sent >= bytes[2] &&
          tstats(x.pt).bytes_sent >= bytes[3] &&
          gstats(x.wg).calls_ok >= BURST && tstats(x.wt).calls_ok >= BURST && gstats(x.tg).calls_ok >= BURST &&
          tstats(x.pt).calls_ok >= BURST);
    TT_CHECK(carried_grpc("W's gRPC", x.wg, BURST, bytes[2], BURST, bytes[0]));
    TT_CHECK(carried_tcp("W's TCP", x.wt, BURST, bytes[3], BURST, bytes[1]));
    TT_CHECK(carried_grpc("T's gRPC", x.tg, BURST, bytes[0], BURST, bytes[2]));
    TT_CHECK(carried_tcp("P's TCP", x.pt, BURST, bytes[1], BURST, bytes[3]));
    world_close(&x, 0);
    waiter_fini(&wt);
    FX_CHECK_EMPTY(&x.a);
}

/* ---- a source no route matches: INTERNAL naming the worker, no transport touched (routes
   without "*", two of them to the same TCP companion) ---- */
static void test_no_route(void) {
    static const char* const pat[3] = {"/job:tf", "/job:p/task:0", "/job:p/task:1"};
    world x;
    tfrdv_key kq, kp;
    tfrdv_status st;
    tfrdv_value* v = 0;
    int dead = 0;
    alarm(60);
    if (!world_open(&x, pat, "gtt", 3, "tcp", 0, 0)) {
        TT_CHECK(0);
        return;
    }
    mkkey(&kq, Q_DEV, 9, W_DEV, "kq");
    TT_CHECK_EQ_INT(tfrdv_recv(x.rw, &kq.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_INTERNAL);
    TT_CHECK_CONTAINS(st.msg, "no route for worker " Q);
    TT_CHECK(v == 0);
    TT_CHECK_EQ_INT(gstats(x.wg).calls_started, 0);
    TT_CHECK_EQ_INT(tstats(x.wt).calls_started, 0);
    /* the routes that match still work: "/job:p" goes over TCP */
    mkkey(&kp, P_DEV, P_INC, W_DEV, "kp");
    TT_CHECK_EQ_INT(tfrdv_send(x.rp, &kp.parsed, 0, mkval(&x.a, 5, 9), 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv(x.rw, &kp.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(vok(v, 5, 9));
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(tstats(x.wt).calls_ok, 1);
    TT_CHECK_EQ_INT(gstats(x.wg).calls_started, 0);
    world_close(&x, 0);
    FX_CHECK_EMPTY(&x.a);
}

/* ---- the pick callback is asked before the patterns: -1 falls back to them, an index wins over
   them, an index out of range fails the call INTERNAL naming the answer and the worker ---- */
static int pick_fn(void* u, const char* worker, size_t len) {
    int mode = __atomic_load_n((int*)u, __ATOMIC_SEQ_CST); /* asked on whichever thread starts the call */
    if (mode == 1 && len >= 7 && memcmp(worker, "/job:tf", 7) == 0) return 1; /* T over TCP */
    if (mode == 2) return 5;
    return -1;
}
static void test_pick(void) {
    world x;
    int mode = 0;
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_value* v = 0;
    int dead = 0;
    alarm(60);
    if (!world_open(&x, MAIN_PAT, "gt", 2, "tcp", pick_fn, &mode)) {
        TT_CHECK(0);
        return;
    }
    mkkey(&k, T_DEV, T_INC, W_DEV, "kt");
    TT_CHECK_EQ_INT(tfrdv_send(x.rt, &k.parsed, 0, mkval(&x.a, 2048, 7), 0, &st), TFRDV_OK);
    /* -1: the patterns send T over gRPC */
    TT_CHECK_EQ_INT(tfrdv_recv(x.rw, &k.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(vok(v, 2048, 7));
    tfrdv_value_release(v);
    v = 0;
    TT_CHECK_EQ_INT(gstats(x.wg).calls_ok, 1);
    /* 1: T over TCP, where W has no address for it */
    __atomic_store_n(&mode, 1, __ATOMIC_SEQ_CST);
    TT_CHECK_EQ_INT(tfrdv_send(x.rt, &k.parsed, 0, mkval(&x.a, 2048, 8), 0, &st), TFRDV_OK);
    TT_CHECK(tfrdv_recv(x.rw, &k.parsed, 0, 10 * SEC, &v, &dead, &st) != TFRDV_OK);
    TT_CHECK_CONTAINS(st.msg, "tfrdv_tcp");
    TT_CHECK(v == 0);
    TT_CHECK_EQ_INT(gstats(x.wg).calls_started, 1);
    /* 5 of 2 routes: INTERNAL */
    __atomic_store_n(&mode, 2, __ATOMIC_SEQ_CST);
    TT_CHECK_EQ_INT(tfrdv_recv(x.rw, &k.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_INTERNAL);
    TT_CHECK_CONTAINS(st.msg, "pick answered route 5 for worker " T);
    TT_CHECK(v == 0);
    TT_CHECK_EQ_INT(gstats(x.wg).calls_started, 1);
    /* the value sent for the two failed fetches is still on T: back to the patterns */
    __atomic_store_n(&mode, 0, __ATOMIC_SEQ_CST);
    TT_CHECK_EQ_INT(tfrdv_recv(x.rw, &k.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(vok(v, 2048, 8));
    tfrdv_value_release(v);
    world_close(&x, 1);
    FX_CHECK_EMPTY(&x.a);
}

/* ---- a cancelled receive on W is cancelled on the transport its route picked: the serving
   peer withdraws, the value sent afterwards stays there and a second fetch gets it ---- */
static void cancel_over(int grpc) {
    world x;
    waiter wt;
    wref ref;
    tfrdv_rendezvous* rs;
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_args a;
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_hooks h;
    tfrdv_value* v = 0;
    int dead = 0;
    const char* src = grpc ? T_DEV : P_DEV;
    uint64_t inc = grpc ? T_INC : P_INC;
    uint64_t started_other;
    alarm(60);
    waiter_init(&wt);
    if (!world_open(&x, MAIN_PAT, "gt", 2, "unix", 0, 0)) {
        TT_CHECK(0);
        waiter_fini(&wt);
        return;
    }
    h = fx_alloc_hooks(&x.a);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&h, &cm, &st), TFRDV_OK);
    rs = grpc ? x.rt : x.rp;
    mkkey(&k, src, inc, W_DEV, "late");
    memset(&a, 0, sizeof a);
    a.cancel = cm;
    ref.w = &wt;
    ref.i = 0;
    TT_CHECK_EQ_INT(tfrdv_recv_async(x.rw, &k.parsed, &a, on_recv, &ref, 0), TFRDV_OK);
    /* the request reached the peer's server once its serve is pending there */
    if (grpc) UNTIL(gstats(x.tg).served >= 1);
    else UNTIL(tstats(x.pt).served >= 1);
    TT_CHECK_EQ_INT(grpc ? gstats(x.tg).served : tstats(x.pt).served, 1);
    tfrdv_cancel_start(cm);
    TT_CHECK(waiter_wait(&wt, 1, 10 * SEC));
    TT_CHECK_EQ_INT(wt.s[0].calls, 1);
    TT_CHECK_EQ_INT(wt.s[0].st.code, TFRDV_CANCELLED);
    TT_CHECK(wt.s[0].v == 0);
    /* the peer's server withdrew its serve request */
    if (grpc) {
        UNTIL(gstats(x.tg).serve_cancelled >= 1 && gstats(x.tg).server_calls_live == 0);
        TT_CHECK_EQ_INT(gstats(x.tg).serve_cancelled, 1);
        TT_CHECK_EQ_INT(gstats(x.tg).server_calls_live, 0);
        /* the RecvTensor, then the MarkRecvFinished saying its answer (if any) was not taken */
        UNTIL(gstats(x.wg).nacks_sent >= 1 && gstats(x.wg).client_calls_live == 0);
        TT_CHECK_EQ_INT(gstats(x.wg).calls_started, 1);
        TT_CHECK_EQ_INT(gstats(x.wg).nacks_sent, 1);
        started_other = tstats(x.wt).calls_started;
    } else {
        UNTIL(tstats(x.pt).serve_cancelled >= 1 && tstats(x.pt).server_requests_live == 0);
        TT_CHECK_EQ_INT(tstats(x.pt).serve_cancelled, 1);
        TT_CHECK_EQ_INT(tstats(x.pt).server_requests_live, 0);
        TT_CHECK_EQ_INT(tstats(x.wt).calls_cancelled, 1);
        started_other = gstats(x.wg).calls_started;
    }
    TT_CHECK_EQ_INT(started_other, 0);
    /* the value sent now stays buffered for the next receiver, which gets it */
    TT_CHECK_EQ_INT(tfrdv_send(rs, &k.parsed, 0, mkval(&x.a, 3000, 5), 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv(x.rw, &k.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(vok(v, 3000, 5));
    tfrdv_value_release(v);
    if (grpc) TT_CHECK_EQ_INT(gstats(x.wg).calls_ok, 1);
    else TT_CHECK_EQ_INT(tstats(x.wt).calls_ok, 1);
    TT_CHECK_EQ_INT(wt.s[0].calls, 1); /* the cancelled receive completed once */
    tfrdv_cancel_mgr_destroy(cm);
    world_close(&x, 1);
    waiter_fini(&wt);
    FX_CHECK_EMPTY(&x.a);
}
static void test_cancel_over_grpc(void) { cancel_over(1); }
static void test_cancel_over_tcp(void) { cancel_over(0); }

#include "exactly_once.h"

static void eo_grpc_settle(void* u) {
    world* x = (world*)u;
    UNTIL(gstats(x->wg).client_calls_live == 0 && gstats(x->tg).server_calls_live == 0);
    TT_CHECK_EQ_INT(gstats(x->wg).client_calls_live, 0);
    TT_CHECK_EQ_INT(gstats(x->tg).server_calls_live, 0);
}
/* W fetches from T over gRPC (TensorFlow's RecvTensor) while its receives time out and are
   cancelled (the exactly-once workload above) */
static void exactly_once_grpc(int mode) {
    world x;
    tfrdv_key k[EO_T];
    tfrdv_parsed_key pk[EO_T];
    tfrdv_grpc_stats gw, gt;
    int t;
    alarm(120);
    grpc_mode = mode;
    if (!world_open(&x, MAIN_PAT, "gt", 2, "unix", 0, 0)) {
        grpc_mode = EO_DEFAULT;
        TT_CHECK(0);
        return;
    }
    grpc_mode = EO_DEFAULT;
    for (t = 0; t < EO_T; t++) {
        char e[16];
        snprintf(e, sizeof e, "eo%d", t);
        mkkey(&k[t], T_DEV, T_INC, W_DEV, e);
        pk[t] = k[t].parsed;
    }
    eo_workload(mode == EO_ACK ? "gRPC, require_ack" : mode == EO_OFF ? "gRPC, receipts off" : "gRPC, default config", x.rw, x.rt, x.t,
                STEP, pk, eo_grpc_settle, &x, mode != EO_OFF);
    gw = gstats(x.wg);
    gt = gstats(x.tg);
    printf("    client: %llu calls, %llu ok, %llu failed, %llu acks (%llu inline), %llu not-taken receipts; server: %llu served, %llu ok, "
           "%llu cancelled, %llu given back (%llu on a receipt), %llu receipts expired, %llu unmatched\n",
           (unsigned long long)gw.calls_started, (unsigned long long)gw.calls_ok, (unsigned long long)gw.calls_failed,
           (unsigned long long)gw.acks_sent, (unsigned long long)gw.acks_inline, (unsigned long long)gw.nacks_sent, (unsigned long long)gt.served,
           (unsigned long long)gt.serve_ok, (unsigned long long)gt.serve_cancelled, (unsigned long long)gt.serve_returned,
           (unsigned long long)gt.receipts_returned, (unsigned long long)gt.receipts_expired,
           (unsigned long long)gt.receipts_unmatched);
    TT_CHECK_EQ_INT(gt.receipts_expired, 0);
    if (mode == EO_OFF) { /* nothing marked, nothing held: TensorFlow's protocol */
        TT_CHECK_EQ_INT(gt.receipts_returned, 0);
        TT_CHECK_EQ_INT(gw.acks_sent, 0);
    } else { /* every answer delivered was acknowledged */
        TT_CHECK(gw.acks_sent > 0);
    }
    world_close(&x, 1);
    FX_CHECK_EMPTY(&x.a);
}
/* default configuration on both sides: the client marks its requests, the server holds each
   answer until its receipt (DELIVERY RECEIPTS in tfrdv_grpc.h): nothing is lost */
static void test_exactly_once_grpc_default(void) { exactly_once_grpc(EO_DEFAULT); }
/* require_ack on the server (every answer held, as for a TensorFlow client): nothing is lost */
static void test_exactly_once_grpc_require_ack(void) { exactly_once_grpc(EO_ACK); }
/* receipts TFRDV_OFF on both sides, TensorFlow's protocol as it is: an answer that reaches a
   client after its receive gave up is dropped there (the window the header documents). Not a
   contract about losses: the counts are printed; every receive completes once, nothing arrives
   twice or corrupt, and the table holds exactly what the drain finds */
static void test_exactly_once_grpc_receipts_off(void) { exactly_once_grpc(EO_OFF); }

/* ---- bytes a peer chose reach statuses and log lines escaped (tfrdv_escape): T's step is
   aborted with a message holding a line break and an escape sequence, and W's fetch of it
   reports that message (T's reply carries it as gRPC status details); a key with such bytes is
   fetched too. No status and no log line (W's manager and both companions log into one hook)
   holds a byte outside 0x20..0x7e. ---- */
static pthread_mutex_t esc_mu = PTHREAD_MUTEX_INITIALIZER;
static int esc_lines, esc_raw;
static int esc_has_raw(const char* m) {
    for (; *m; m++)
        if ((unsigned char)*m < 0x20 || (unsigned char)*m > 0x7e) return 1;
    return 0;
}
static void esc_log(void* u, int level, const char* msg) {
    (void)u;
    (void)level;
    pthread_mutex_lock(&esc_mu);
    esc_lines++;
    if (esc_has_raw(msg)) {
        esc_raw++;
        printf("    raw control byte in a log line: %s\n", msg);
    }
    pthread_mutex_unlock(&esc_mu);
}
static void test_hostile_bytes_escaped_grpc(void) {
    world x;
    tfrdv_key k1, k2;
    tfrdv_value* v = 0;
    tfrdv_status st;
    int dead = 0, lines, raw;
    const char* why = "bye\n2026-01-01 FAKE LINE \x1b[31mred";
    alarm(60);
    world_logger.fn = esc_log;
    if (!world_open(&x, MAIN_PAT, "gt", 2, "unix", 0, 0)) {
        memset(&world_logger, 0, sizeof world_logger);
        TT_CHECK(0);
        return;
    }
    memset(&world_logger, 0, sizeof world_logger);
    /* a key holding the bytes, with a stale incarnation: T answers ABORTED */
    mkkey(&k2, T_DEV, T_INC + 1, W_DEV, "evil\nFAKE\x1b[31m");
    TT_CHECK_EQ_INT(tfrdv_recv(x.rw, &k2.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_ABORTED);
    TT_CHECK(!esc_has_raw(st.msg));
    /* T's step aborted with the message: W's fetch reports it */
    TT_CHECK_EQ_INT(tfrdv_abort(x.rt, TFRDV_ABORTED, why), TFRDV_OK);
    mkkey(&k1, T_DEV, T_INC, W_DEV, "aborted");
    TT_CHECK_EQ_INT(tfrdv_recv(x.rw, &k1.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_ABORTED);
    printf("    aborted step: %s\n", st.msg);
    TT_CHECK(!esc_has_raw(st.msg));
    TT_CHECK_CONTAINS(st.msg, "bye\\x0a2026-01-01 FAKE LINE \\x1b[31mred");
    world_close(&x, 1);
    FX_CHECK_EMPTY(&x.a);
    pthread_mutex_lock(&esc_mu);
    lines = esc_lines;
    raw = esc_raw;
    pthread_mutex_unlock(&esc_mu);
    printf("    %d log lines\n", lines);
    TT_CHECK_EQ_INT(raw, 0);
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    if (!getenv("GRPC_VERBOSITY")) setenv("GRPC_VERBOSITY", "NONE", 1);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tfrdv_multi_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("mkdtemp failed\n");
        return 1;
    }
    TT_RUN(test_step_tcp_transports_first);
    TT_RUN(test_step_tcp_managers_first);
    TT_RUN(test_step_unix_transports_first);
    TT_RUN(test_step_unix_managers_first);
    TT_RUN(test_step_burst);
    TT_RUN(test_no_route);
    TT_RUN(test_pick);
    TT_RUN(test_cancel_over_grpc);
    TT_RUN(test_cancel_over_tcp);
    TT_RUN(test_exactly_once_grpc_default);
    TT_RUN(test_exactly_once_grpc_require_ack);
    TT_RUN(test_exactly_once_grpc_receipts_off);
    TT_RUN(test_hostile_bytes_escaped_grpc);
    rmdir(tmpdir);
    return TT_MAIN_END();
}
