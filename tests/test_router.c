/* test_router.c - the routing transport (tfrdv_router_create): one manager, several transports,
   each call sent to the transport whose worker pattern its source worker matches (or the one the
   pick hook names); its cancellation follows it there; destroy reaches each distinct transport
   once; a bad route is refused at creation and names itself, an unroutable call fails INTERNAL.
   Here the routes are two loopbacks (a worker registered on only one of them fails if the call
   is misrouted) and counting providers that hold their calls. */
#define _POSIX_C_SOURCE 200809L
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"

#define WA "/job:a/replica:0/task:0"
#define WB "/job:b/replica:0/task:0"
#define WC "/job:c/replica:0/task:3"
#define WD "/job:d/replica:0/task:0"
#define A0 WA "/device:CPU:0"
#define B0 WB "/device:CPU:0"
#define C0 WC "/device:CPU:0"
#define D0 WD "/device:CPU:0"
#define STEP 7

/* ---- a provider that holds its calls and counts what the router sends it ---- */
typedef struct holder {
    int starts, cancels, destroys;
    tfrdv_call* held[4];
    int nheld;
} holder;
static void h_start(void* u, tfrdv_call* call) {
    holder* h = (holder*)u;
    h->starts++;
    if (h->nheld < 4) h->held[h->nheld++] = call;
    else tfrdv_call_finish(call, TFRDV_INTERNAL, "holder full", 0, 0);
}
static void h_cancel(void* u, tfrdv_call* call) {
    holder* h = (holder*)u;
    int i;
    h->cancels++;
    for (i = 0; i < h->nheld; i++) {
        if (h->held[i] != call) continue;
        h->held[i] = h->held[--h->nheld];
        tfrdv_call_finish(call, TFRDV_CANCELLED, "cancelled by the holder", 0, 0);
        return;
    }
}
static void h_destroy(void* u) { ((holder*)u)->destroys++; }
static tfrdv_transport holder_transport(holder* h) {
    tfrdv_transport t;
    memset(h, 0, sizeof *h);
    memset(&t, 0, sizeof t); /* fields may be added: start from zero */
    t.user = h;
    t.start_call = h_start;
    t.cancel_call = h_cancel;
    t.destroy = h_destroy;
    return t;
}

static tfrdv_rendezvous* init_step(tfrdv_mgr* m) {
    tfrdv_rendezvous* r = 0;
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, STEP, &r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, 0), TFRDV_OK);
    return r;
}
static tfrdv_mgr* mk_routed(fx_alloc* a, const tfrdv_route* routes, size_t n) {
    tfrdv_router_config rc = tfrdv_router_config_init();
    tfrdv_mgr_config c = fx_mgr_config(WA, 0xa1u, a);
    tfrdv_status st;
    rc.hooks = fx_hooks(a);
    rc.routes = routes;
    rc.num_routes = n;
    TT_CHECK_EQ_INT(tfrdv_router_create(&rc, &c.transport, &st), TFRDV_OK);
    return mk(&c);
}

/* B is reachable only over lb1 and C only over lb2: both fetches succeed only if each call went
   to its own route; a worker no route names fails INTERNAL naming it */
static void test_each_call_goes_to_the_route_its_source_worker_matches(void) {
    fx_alloc a = {0};
    tfrdv_hooks hk = fx_hooks(&a);
    tfrdv_loopback *lb1, *lb2;
    tfrdv_mgr *ma, *mb, *mc;
    tfrdv_rendezvous *ra, *rb, *rc;
    tfrdv_route routes[2];
    tfrdv_mgr_config cb = fx_mgr_config(WB, 0xb7u, &a), cc = fx_mgr_config(WC, 0xc3u, &a);
    fx_key kb, kc, kd;
    fx_value vb, vc;
    fx_recv rb_out, rc_out, rd_out;
    memset(&rb_out, 0, sizeof rb_out);
    memset(&rc_out, 0, sizeof rc_out);
    memset(&rd_out, 0, sizeof rd_out);
    TT_CHECK_EQ_INT(tfrdv_loopback_create(&hk, &lb1, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_loopback_create(&hk, &lb2, 0), TFRDV_OK);
    routes[0].workers = "/job:b";
    routes[0].transport = tfrdv_loopback_transport(lb1);
    routes[1].workers = "/job:c/task:3";
    routes[1].transport = tfrdv_loopback_transport(lb2);
    ma = mk_routed(&a, routes, 2);
    mb = mk(&cb);
    mc = mk(&cc);
    TT_CHECK_EQ_INT(tfrdv_loopback_register(lb1, WB, mb, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_loopback_register(lb2, WC, mc, 0), TFRDV_OK);
    ra = init_step(ma);
    rb = init_step(mb);
    rc = init_step(mc);
    key(&kb, B0, 0xb7u, A0, "from-b");
    key(&kc, C0, 0xc3u, A0, "from-c");
    key(&kd, D0, 0xd1u, A0, "from-d");
    TT_CHECK_EQ_INT(tfrdv_send(rb, &kb.pk, 0, fx_value_init(&vb, 11), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(rc, &kc.pk, 0, fx_value_init(&vc, 12), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(ra, &kb.pk, 0, fx_recv_done, &rb_out, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(ra, &kc.pk, 0, fx_recv_done, &rc_out, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(ra, &kd.pk, 0, fx_recv_done, &rd_out, 0), TFRDV_OK);
    TT_CHECK(rb_out.calls == 1 && rb_out.st.code == TFRDV_OK && fx_recv_matches(&rb_out, 11));
    TT_CHECK(rc_out.calls == 1 && rc_out.st.code == TFRDV_OK && fx_recv_matches(&rc_out, 12));
    TT_CHECK_EQ_INT(rd_out.calls, 1);
    TT_CHECK_EQ_INT(rd_out.st.code, TFRDV_INTERNAL);
    TT_CHECK_CONTAINS(rd_out.st.msg, "no route for worker " WD);
    tfrdv_unref(ra);
    tfrdv_unref(rb);
    tfrdv_unref(rc);
    tfrdv_mgr_destroy(ma);
    tfrdv_mgr_destroy(mb);
    tfrdv_mgr_destroy(mc);
    tfrdv_loopback_destroy(lb1);
    tfrdv_loopback_destroy(lb2);
    FX_CHECK_EMPTY(&a);
}

/* a cancelled receive's cancel_call reaches the transport that started it, not another; the
   router's destroy reaches each distinct transport once (one transport may serve two routes) */
static void test_cancel_follows_the_call_and_destroy_reaches_each_transport_once(void) {
    fx_alloc a = {0};
    tfrdv_hooks hk = fx_hooks(&a);
    holder h1, h2;
    tfrdv_route routes[3];
    tfrdv_mgr* ma;
    tfrdv_rendezvous* ra;
    tfrdv_cancel_mgr *cm1, *cm2;
    tfrdv_args a1, a2;
    fx_key kb, kc;
    fx_recv o1, o2;
    memset(&o1, 0, sizeof o1);
    memset(&o2, 0, sizeof o2);
    routes[0].workers = "/job:b";
    routes[0].transport = holder_transport(&h1);
    routes[1].workers = "*";
    routes[1].transport = holder_transport(&h2);
    routes[2].workers = "/job:c"; /* never reached ("*" matches first): the same transport again */
    routes[2].transport = routes[0].transport;
    ma = mk_routed(&a, routes, 3);
    ra = init_step(ma);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&hk, &cm1, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&hk, &cm2, 0), TFRDV_OK);
    a1 = cancel_args(cm1);
    a2 = cancel_args(cm2);
    key(&kb, B0, 0xb7u, A0, "held-b");
    key(&kc, C0, 0xc3u, A0, "held-c");
    TT_CHECK_EQ_INT(tfrdv_recv_async(ra, &kb.pk, &a1, fx_recv_done, &o1, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(ra, &kc.pk, &a2, fx_recv_done, &o2, 0), TFRDV_OK);
    TT_CHECK(h1.starts == 1 && h2.starts == 1);
    tfrdv_cancel_start(cm2);
    TT_CHECK_EQ_INT(o2.calls, 1);
    TT_CHECK_EQ_INT(o2.st.code, TFRDV_CANCELLED);
    TT_CHECK(h2.cancels == 1 && h1.cancels == 0 && h2.nheld == 0 && h1.nheld == 1);
    tfrdv_cancel_start(cm1);
    TT_CHECK(o1.calls == 1 && h1.cancels == 1 && h1.nheld == 0);
    tfrdv_unref(ra);
    tfrdv_mgr_destroy(ma);
    TT_CHECK_EQ_INT(h1.destroys, 1);
    TT_CHECK_EQ_INT(h2.destroys, 1);
    tfrdv_cancel_mgr_destroy(cm1);
    tfrdv_cancel_mgr_destroy(cm2);
    FX_CHECK_EMPTY(&a);
}

/* the pick hook is asked first: -1 falls back to the patterns, an index out of range fails the
   call INTERNAL naming the answer */
static int pick_answer;
static int pick_asked;
static int pick(void* u, const char* worker, size_t len) {
    (void)u;
    pick_asked += len > 0 && worker[0] == '/';
    return pick_answer;
}
static void test_pick_hook_chooses_first_and_its_bad_answers_fail_the_call(void) {
    fx_alloc a = {0};
    holder h1, h2;
    tfrdv_route routes[2];
    tfrdv_router_config rc = tfrdv_router_config_init();
    tfrdv_mgr_config c = fx_mgr_config(WA, 0xa1u, &a);
    tfrdv_mgr* ma;
    tfrdv_rendezvous* ra;
    fx_key kb;
    fx_recv o;
    int i;
    routes[0].workers = "/job:b";
    routes[0].transport = holder_transport(&h1);
    routes[1].workers = "/job:zzz";
    routes[1].transport = holder_transport(&h2);
    rc.hooks = fx_hooks(&a);
    rc.routes = routes;
    rc.num_routes = 2;
    rc.pick = pick;
    pick_asked = 0;
    TT_CHECK_EQ_INT(tfrdv_router_create(&rc, &c.transport, 0), TFRDV_OK);
    ma = mk(&c);
    ra = init_step(ma);
    key(&kb, B0, 0xb7u, A0, "picked");
    for (i = 0; i < 3; i++) {
        static const int answers[3] = {1, -1, 5};
        memset(&o, 0, sizeof o);
        pick_answer = answers[i];
        TT_CHECK_EQ_INT(tfrdv_recv_async(ra, &kb.pk, 0, fx_recv_done, &o, 0), TFRDV_OK);
    }
    TT_CHECK_EQ_INT(pick_asked, 3);
    TT_CHECK(h2.starts == 1 && h1.starts == 1); /* pick 1 -> route 1; -1 -> the pattern of B */
    TT_CHECK_EQ_INT(o.calls, 1);                /* the last: route 5 of 2 */
    TT_CHECK_EQ_INT(o.st.code, TFRDV_INTERNAL);
    TT_CHECK_CONTAINS(o.st.msg, "pick answered route 5");
    tfrdv_unref(ra);
    tfrdv_mgr_destroy(ma); /* the held calls are cancelled (the holders finish them) */
    TT_CHECK(h1.nheld == 0 && h2.nheld == 0);
    FX_CHECK_EMPTY(&a);
}

/* refused configurations name what is wrong and take nothing (no transport destroyed) */
static void test_bad_routes_are_refused_naming_the_route(void) {
    fx_alloc a = {0};
    holder h;
    tfrdv_route routes[2];
    tfrdv_router_config rc = tfrdv_router_config_init();
    tfrdv_transport t;
    tfrdv_status st;
    routes[0].workers = "/job:b";
    routes[0].transport = holder_transport(&h);
    routes[1].workers = "/job:b/task:x";
    routes[1].transport = routes[0].transport;
    rc.hooks = fx_hooks(&a);
    rc.routes = routes;
    rc.num_routes = 2;
    TT_CHECK_EQ_INT(tfrdv_router_create(&rc, &t, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "route 1");
    TT_CHECK_CONTAINS(st.msg, "/job:b/task:x");
    routes[1].workers = "/job:c";
    routes[1].transport.cancel_call = 0;
    TT_CHECK_EQ_INT(tfrdv_router_create(&rc, &t, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "route 1 (\"/job:c\") has no start_call or cancel_call");
    rc.num_routes = 0;
    TT_CHECK_EQ_INT(tfrdv_router_create(&rc, &t, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "num_routes");
    rc.routes = 0;
    rc.num_routes = 2;
    TT_CHECK_EQ_INT(tfrdv_router_create(&rc, &t, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "NULL routes (num_routes 2)");
    TT_CHECK_EQ_INT(tfrdv_router_create(0, &t, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(h.destroys, 0);
    FX_CHECK_EMPTY(&a);
}

/* out of memory while copying the routes: nothing leaks, nothing is taken */
typedef struct failing {
    fx_alloc a;
    int left; /* allocations that succeed before the next fails */
} failing;
static void* failing_alloc(void* u, size_t n) {
    failing* f = (failing*)u;
    if (f->left-- <= 0) return 0;
    return fx_alloc_fn(&f->a, n);
}
static void failing_free(void* u, void* p, size_t n) { fx_free_fn(&((failing*)u)->a, p, n); }
static void test_router_create_out_of_memory_takes_nothing(void) {
    failing f;
    holder h;
    tfrdv_route routes[2];
    tfrdv_router_config rc = tfrdv_router_config_init();
    tfrdv_transport t;
    tfrdv_status st;
    int ok_after, refused = 0;
    memset(&f, 0, sizeof f);
    routes[0].workers = "/job:b";
    routes[0].transport = holder_transport(&h);
    routes[1].workers = "*";
    routes[1].transport = routes[0].transport;
    rc.hooks.allocator.alloc_fn = failing_alloc;
    rc.hooks.allocator.free_fn = failing_free;
    rc.hooks.allocator.user = &f;
    rc.routes = routes;
    rc.num_routes = 2;
    for (ok_after = 0; ok_after < 3; ok_after++) { /* the router, then each pattern */
        f.left = ok_after;
        if (tfrdv_router_create(&rc, &t, &st) == TFRDV_RESOURCE_EXHAUSTED) refused++;
        else t.destroy(t.user);
        TT_CHECK_EQ_INT(fx_live(&f.a), 0);
    }
    TT_CHECK_EQ_INT(refused, 3);
    TT_CHECK_CONTAINS(st.msg, "out of memory");
    TT_CHECK_EQ_INT(h.destroys, 0);
    f.left = 3; /* enough: it works */
    TT_CHECK_EQ_INT(tfrdv_router_create(&rc, &t, &st), TFRDV_OK);
    t.destroy(t.user);
    TT_CHECK_EQ_INT(h.destroys, 1);
    FX_CHECK_EMPTY(&f.a);
}


/* ---- the control entries: a worker's incarnation through the manager's transport (the router
   asks the route of that worker), and every manager announced to each distinct transport ---- */
typedef struct binder { int binds, unbinds; tfrdv_mgr* last; uint64_t inc; int asked; } binder;
static void b_bind(void* u, tfrdv_mgr* m, int bound) {
    binder* b = (binder*)u;
    if (bound) b->binds++;
    else b->unbinds++;
    b->last = m;
}
static tfrdv_code b_peer(void* u, tfrdv_mgr* m, tfrdv_str w, int64_t timeout_ns, uint64_t* inc, tfrdv_status* st) {
    binder* b = (binder*)u;
    (void)m;
    (void)timeout_ns;
    b->asked++;
    if (w.len == strlen(WD) && memcmp(w.ptr, WD, w.len) == 0) {
        *inc = b->inc;
        return tfrdv_status_set(st, TFRDV_OK, "");
    }
    return tfrdv_status_set(st, TFRDV_UNAVAILABLE, "binder: unreachable");
}
static void test_peer_incarnation_and_bind_go_through_the_routes(void) {
    fx_alloc a = {0};
    tfrdv_hooks hk = fx_hooks(&a);
    tfrdv_loopback* lb = 0;
    tfrdv_mgr *m, *mb = 0;
    tfrdv_route routes[3];
    holder h;
    binder bd;
    tfrdv_status st;
    uint64_t inc = 1;
    tfrdv_mgr_config cb = fx_mgr_config(WB, 0xb0b0u, &a);
    TT_CHECK_EQ_INT(tfrdv_loopback_create(&hk, &lb, &st), TFRDV_OK);
    cb.transport = tfrdv_loopback_transport(lb);
    mb = mk(&cb);
    TT_CHECK_EQ_INT(tfrdv_loopback_register(lb, WB, mb, &st), TFRDV_OK);
    memset(&bd, 0, sizeof bd);
    bd.inc = 0xd00du;
    routes[0].workers = "/job:b";
    routes[0].transport = tfrdv_loopback_transport(lb);
    routes[1].workers = "/job:d";
    routes[1].transport = holder_transport(&h);
    routes[1].transport.user = &bd; /* a transport of control entries only (never started) */
    routes[1].transport.bind = b_bind;
    routes[1].transport.peer_incarnation = b_peer;
    routes[1].transport.destroy = 0;
    routes[2].workers = "/job:c";
    routes[2].transport = routes[1].transport; /* the same transport: announced once */
    m = mk_routed(&a, routes, 3);
    TT_CHECK_EQ_INT(bd.binds, 1);
    TT_CHECK(bd.last == m);
    /* over the loopback: the registered worker's own incarnation */
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(m, WB, 0, &inc, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(inc, 0xb0b0u);
    /* over the binder's route */
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(m, WD, 1000, &inc, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(inc, 0xd00du);
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(m, WC, 1000, &inc, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_EQ_INT(inc, 0);
    TT_CHECK_EQ_INT(bd.asked, 2);
    /* its own name: its own incarnation, asking nobody */
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(m, WA, 0, &inc, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(inc, 0xa1u);
    /* no route, not registered, not a worker name */
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(m, "/job:zz/replica:0/task:0", 0, &inc, &st), TFRDV_NOT_FOUND);
    TT_CHECK_CONTAINS(st.msg, "/job:zz/replica:0/task:0");
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(m, "/job:b/replica:0/task:9", 0, &inc, &st), TFRDV_NOT_FOUND);
    TT_CHECK_CONTAINS(st.msg, "/job:b/replica:0/task:9");
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(m, WB "/device:CPU:0", 0, &inc, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "not a worker name");
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(m, "/job:b\n/replica:0/task:0", 0, &inc, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK(strchr(st.msg, '\n') == NULL);
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(m, 0, 0, &inc, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(bd.asked, 2);
    /* a transport without the entry */
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(mb, WA, 0, &inc, &st), TFRDV_NOT_FOUND); /* the loopback: not registered */
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(mb, WB, 0, &inc, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(inc, 0xb0b0u);
    {
        holder h2;
        tfrdv_mgr_config c2 = fx_mgr_config(WC, 0xc3u, &a);
        tfrdv_mgr* m2;
        c2.transport = holder_transport(&h2);
        m2 = mk(&c2);
        TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(m2, WA, 0, &inc, &st), TFRDV_UNIMPLEMENTED);
        tfrdv_mgr_destroy(m2);
    }
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(bd.unbinds, 1);
    TT_CHECK(bd.last == m);
    tfrdv_loopback_destroy(lb);
    tfrdv_mgr_destroy(mb);
    FX_CHECK_EMPTY(&a);
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_each_call_goes_to_the_route_its_source_worker_matches);
    TT_RUN(test_cancel_follows_the_call_and_destroy_reaches_each_transport_once);
    TT_RUN(test_pick_hook_chooses_first_and_its_bad_answers_fail_the_call);
    TT_RUN(test_bad_routes_are_refused_naming_the_route);
    TT_RUN(test_router_create_out_of_memory_takes_nothing);
    TT_RUN(test_peer_incarnation_and_bind_go_through_the_routes);
    TT_CHECK_EQ_INT(tt_asserts, 0);
    return TT_MAIN_END();
}
