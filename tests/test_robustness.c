/* test_robustness.c - callbacks that destroy, allocations that fail, clocks and providers kept out
   of library locks, memory that comes back, and the API network transports build on (these began
   as regressions for eight defects an outside adversarial suite found):
     D1 tfrdv_pending / tfrdv_mgr_pending callbacks may destroy what they report on
     D2 a same-worker copy completing after the last reference went (threaded build here; the
        single-threaded build is in test_nothreads.c)
     D3 a value sent after a remote receive gave up (timeout, call deadline, cancel) is not lost
     D4 cleanup-all and manager teardown work when every allocation fails
     D5 no decision depends on status text (the TFRDV_STATUS_MSG_MAX=16 build is test_msgmax.c)
     D6 the clock hook never runs under a library lock
     D7 the provider's cancel_call never runs under a library lock
     D8 memory comes back after a burst; caps on free lists, key length, deferred requests
   plus: withdrawable serve (and its races with send, abort, cleanup), tfrdv_mgr_ref after destroy
   started, tfrdv_call_deadline, the sender's args on the serving side, the trace hook, the
   response cache keyed by request id only, destroy of a step from tfrdv_mgr_find, re-creating a
   cleaned step, turning the dedup window and the call free list off, tfrdv_cancel_mgr_reset. */
#define _POSIX_C_SOURCE 200809L
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"
#include <pthread.h>
#include <time.h>

#define WA "/job:a/replica:0/task:0"
#define WB "/job:b/replica:0/task:0"
#define A0 WA "/device:CPU:0"
#define A1 WA "/device:CPU:1"
#define B0 WB "/device:CPU:0"
#define INC_A 0xa1u
#define INC_B 0xb7u

static void sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, 0);
}

/* ---- lock-aware sync hooks: count the library locks this thread holds ---- */
static __thread int held_locks;
static long hook_violations; /* a hook (clock, cancel_call) ran while a library lock was held */
static int lk_mutex_init(void* u, void** m) {
    pthread_mutex_t* p = (pthread_mutex_t*)malloc(sizeof *p);
    (void)u;
    if (!p) return 1;
    pthread_mutex_init(p, 0);
    *m = p;
    return 0;
}
static void lk_mutex_destroy(void* u, void* m) {
    (void)u;
    if (!m) return;
    pthread_mutex_destroy((pthread_mutex_t*)m);
    free(m);
}
static void lk_lock(void* u, void* m) {
    (void)u;
    pthread_mutex_lock((pthread_mutex_t*)m);
    held_locks++;
}
static void lk_unlock(void* u, void* m) {
    (void)u;
    held_locks--;
    pthread_mutex_unlock((pthread_mutex_t*)m);
}
typedef struct lk_event {
    pthread_mutex_t m;
    pthread_cond_t c;
    unsigned count;
} lk_event;
static int lk_event_init(void* u, void** e) {
    lk_event* x = (lk_event*)calloc(1, sizeof *x);
    (void)u;
    if (!x) return 1;
    pthread_mutex_init(&x->m, 0);
    pthread_cond_init(&x->c, 0);
    *e = x;
    return 0;
}
static void lk_event_destroy(void* u, void* e) {
    lk_event* x = (lk_event*)e;
    (void)u;
    if (!x) return;
    pthread_cond_destroy(&x->c);
    pthread_mutex_destroy(&x->m);
    free(x);
}
static int lk_event_wait(void* u, void* e, int64_t timeout_ns) {
    lk_event* x = (lk_event*)e;
    int ok = 1;
    (void)u;
    pthread_mutex_lock(&x->m);
    if (timeout_ns < 0) {
        while (!x->count) pthread_cond_wait(&x->c, &x->m);
    } else {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += (time_t)(timeout_ns / 1000000000);
        dl.tv_nsec += (long)(timeout_ns % 1000000000);
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        while (!x->count)
            if (pthread_cond_timedwait(&x->c, &x->m, &dl) != 0) break;
        ok = x->count != 0;
    }
    if (ok) x->count--;
    pthread_mutex_unlock(&x->m);
    return ok;
}
static void lk_event_signal(void* u, void* e) {
    lk_event* x = (lk_event*)e;
    (void)u;
    pthread_mutex_lock(&x->m);
    x->count++;
    pthread_cond_signal(&x->c);
    pthread_mutex_unlock(&x->m);
}
static const tfrdv_sync lk_sync = {0, lk_mutex_init, lk_mutex_destroy, lk_lock, lk_unlock,
                                   lk_event_init, lk_event_destroy, lk_event_wait, lk_event_signal};
/* a clock that checks it is read outside every library lock, and counts its reads */
static long clock_reads;
static int64_t lk_clock(void* u) {
    (void)u;
    __atomic_add_fetch(&clock_reads, 1, __ATOMIC_SEQ_CST);
    if (held_locks) __atomic_add_fetch(&hook_violations, 1, __ATOMIC_SEQ_CST);
    return tfrdv_now_ns();
}

/* ---- a loopback world: managers A and B, a step on each, optional config tweaks ---- */
typedef struct world {
    fx_alloc a;
    tfrdv_loopback* lb;
    tfrdv_mgr* ma;
    tfrdv_mgr* mb;
    tfrdv_rendezvous* ra;
    tfrdv_rendezvous* rb;
    tfrdv_transport inner; /* the loopback's vtable (wrapped by tests that watch cancel_call) */
} world;
#define STEP 500
static void world_up(world* w, void (*tweak)(tfrdv_mgr_config* ca, tfrdv_mgr_config* cb, world* w)) {
    tfrdv_hooks h;
    tfrdv_mgr_config ca, cb;
    memset(w, 0, sizeof *w);
    h = fx_alloc_hooks(&w->a);
    TT_CHECK_EQ_INT(tfrdv_loopback_create(&h, &w->lb, 0), TFRDV_OK);
    w->inner = tfrdv_loopback_transport(w->lb);
    ca = tfrdv_mgr_config_init();
    ca.hooks = h;
    ca.worker_name = WA;
    ca.incarnation = INC_A;
    ca.transport = w->inner;
    cb = ca;
    cb.worker_name = WB;
    cb.incarnation = INC_B;
    if (tweak) tweak(&ca, &cb, w);
    w->ma = mk(&ca);
    w->mb = mk(&cb);
    tfrdv_loopback_register(w->lb, WA, w->ma, 0);
    tfrdv_loopback_register(w->lb, WB, w->mb, 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_find(w->ma, STEP, &w->ra, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_find(w->mb, STEP, &w->rb, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(w->ra, 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(w->rb, 0, 0), TFRDV_OK);
}
static void world_down(world* w) {
    tfrdv_unref(w->ra);
    tfrdv_unref(w->rb);
    tfrdv_mgr_destroy(w->ma);
    tfrdv_mgr_destroy(w->mb);
    tfrdv_loopback_destroy(w->lb);
    FX_CHECK_EMPTY(&w->a);
}
static void send_v(tfrdv_rendezvous* r, const fx_key* k, tfrdv_value* v) {
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_send(r, &k->pk, 0, v, 0, &st), TFRDV_OK);
}
static void recv_into(tfrdv_rendezvous* r, const fx_key* k, const tfrdv_args* args, fx_recv* out) {
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k->pk, args, fx_recv_done, out, 0), TFRDV_OK);
}

/* ============================================================================================
   D1: the pending callback may destroy the object it reports on
   ============================================================================================ */
typedef struct destroyer {
    tfrdv_rendezvous* r;
    tfrdv_mgr* m;
    int calls;
} destroyer;
static void destroy_in_pending(void* u, int64_t step, tfrdv_pending_kind kind, const char* key, size_t len, size_t n) {
    destroyer* d = (destroyer*)u;
    (void)step;
    (void)kind;
    (void)key;
    (void)len;
    (void)n;
    d->calls++;
    if (d->r) {
        tfrdv_destroy(d->r);
        d->r = 0;
    }
    if (d->m) {
        tfrdv_mgr_destroy(d->m);
        d->m = 0;
    }
}
static void test_d1_pending_callback_destroys_the_rendezvous(void) {
    fx_alloc a;
    tfrdv_config c = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    tkey k1, k2;
    tval v1, v2;
    destroyer d;
    memset(&a, 0, sizeof a);
    c.hooks = fx_alloc_hooks(&a);
    TT_CHECK_EQ_INT(tfrdv_create(&c, &r, 0), TFRDV_OK);
    tkey_make(&k1, A0, 1, A1, "one");
    tkey_make(&k2, A0, 1, A1, "two");
    tval_init(&v1, 1);
    tval_init(&v2, 2);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k1.pk, 0, &v1.v, 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k2.pk, 0, &v2.v, 0, 0), TFRDV_OK);
    memset(&d, 0, sizeof d);
    d.r = r;
    TT_CHECK_EQ_INT(tfrdv_pending(r, destroy_in_pending, &d), 2); /* both entries, after the destroy */
    TT_CHECK_EQ_INT(d.calls, 2);
    TT_CHECK_EQ_INT(rel(&v1) + rel(&v2), 2);
    FX_CHECK_EMPTY(&a);
}
static void test_d1_mgr_pending_callback_destroys_the_manager(void) {
    world w;
    fx_key k;
    fx_value v;
    destroyer d;
    world_up(&w, 0);
    key(&k, B0, INC_B, A0, "pending");
    send_v(w.rb, &k, fx_value_init(&v, 1));
    tfrdv_unref(w.rb);
    w.rb = 0;
    memset(&d, 0, sizeof d);
    d.m = w.mb;
    w.mb = 0;
    TT_CHECK_EQ_INT(tfrdv_mgr_pending(d.m, destroy_in_pending, &d), 1);
    TT_CHECK_EQ_INT(fx_released(&v), 1); /* the manager's destroy cleaned the step */
    tfrdv_unref(w.ra);
    tfrdv_mgr_destroy(w.ma);
    tfrdv_loopback_destroy(w.lb);
    FX_CHECK_EMPTY(&w.a);
}

/* ============================================================================================
   D2: a same-worker copy still in flight when the last reference goes (threaded build)
   ============================================================================================ */
typedef struct held_copy {
    tfrdv_copy_done_fn done;
    void* ctx;
    tfrdv_value* in;
    int started;
} held_copy;
static void hold_copy(void* user, const tfrdv_parsed_key* key, const tfrdv_args* sa, const tfrdv_args* ra,
                      tfrdv_value* in, tfrdv_copy_done_fn done, void* done_ctx) {
    held_copy* h = (held_copy*)user;
    (void)key;
    (void)sa;
    (void)ra;
    h->done = done;
    h->ctx = done_ctx;
    h->in = in;
    h->started++;
}
static held_copy g_copy;
static void tweak_copy(tfrdv_mgr_config* ca, tfrdv_mgr_config* cb, world* w) {
    (void)cb;
    (void)w;
    ca->same_worker_copy = hold_copy;
    ca->same_worker_copy_user = &g_copy;
}
static void test_d2_copy_pending_at_last_unref_neither_frees_nor_blocks(void) {
    world w;
    fx_key k;
    fx_value v;
    fx_recv r;
    memset(&g_copy, 0, sizeof g_copy);
    memset(&r, 0, sizeof r);
    world_up(&w, tweak_copy);
    key(&k, A0, INC_A, A1, "to_gpu");
    recv_into(w.ra, &k, 0, &r);
    send_v(w.ra, &k, fx_value_init(&v, 3));
    TT_CHECK_EQ_INT(g_copy.started, 1);
    TT_CHECK_EQ_INT(r.calls, 0);
    /* the owner lets go of everything while the copy is in flight: must return at once */
    tfrdv_mgr_cleanup(w.ma, STEP);
    tfrdv_unref(w.ra);
    w.ra = 0;
    /* the event loop completes the copy later: the receiver hears about it exactly once */
    g_copy.done(g_copy.ctx, TFRDV_OK, "", g_copy.in);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    TT_CHECK(fx_recv_matches(&r, 3));
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    tfrdv_unref(w.rb);
    tfrdv_mgr_destroy(w.ma);
    tfrdv_mgr_destroy(w.mb);
    tfrdv_loopback_destroy(w.lb);
    FX_CHECK_EMPTY(&w.a);
}

/* ============================================================================================
   D3: a value sent after a remote receive gave up is not lost
   ============================================================================================ */
static void test_d3_value_after_timed_out_remote_recv_is_kept(void) {
    world w;
    fx_key k;
    fx_value v;
    tfrdv_value* got = 0;
    tfrdv_status st;
    int dead = 0;
    world_up(&w, 0);
    key(&k, B0, INC_B, A0, "late");
    TT_CHECK_EQ_INT(tfrdv_recv(w.ra, &k.pk, 0, 2000000, &got, &dead, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK(got == 0);
    send_v(w.rb, &k, fx_value_init(&v, 4));
    TT_CHECK_EQ_INT(fx_released(&v), 0);
    TT_CHECK_EQ_INT(pending_of(w.rb, TFRDV_PENDING_SEND), 1);
    TT_CHECK_EQ_INT(tfrdv_recv(w.ra, &k.pk, 0, 2000000000, &got, &dead, &st), TFRDV_OK);
    TT_CHECK(got == &v.v); /* zero copy: the very value */
    tfrdv_value_release(got);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    world_down(&w);
}
static void tweak_call_timeout(tfrdv_mgr_config* ca, tfrdv_mgr_config* cb, world* w) {
    (void)cb;
    (void)w;
    ca->hooks.clock.now_ns = fx_clock_fn;
    ca->call_timeout_ns = 1000;
}
static void test_d3_value_after_call_deadline_or_cancel_is_kept(void) {
    int how;
    for (how = 0; how < 2; how++) {
        world w;
        fx_key k;
        fx_value v;
        fx_recv r1, r2;
        tfrdv_cancel_mgr* cm = 0;
        tfrdv_args args;
        memset(&r1, 0, sizeof r1);
        memset(&r2, 0, sizeof r2);
        fx_set_now(10);
        world_up(&w, tweak_call_timeout);
        key(&k, B0, INC_B, A0, "late2");
        TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm, 0), TFRDV_OK);
        args = cancel_args(cm);
        recv_into(w.ra, &k, &args, &r1);
        TT_CHECK_EQ_INT(pending_of(w.rb, TFRDV_PENDING_RECV), 1); /* served, waiting on B */
        if (how == 0) tfrdv_mgr_expire(w.ma, 5000); /* the call's deadline */
        else tfrdv_cancel_start(cm);
        TT_CHECK_EQ_INT(r1.calls, 1);
        TT_CHECK_EQ_INT(r1.st.code, how == 0 ? TFRDV_DEADLINE_EXCEEDED : TFRDV_CANCELLED);
        TT_CHECK_EQ_INT(pending_of(w.rb, TFRDV_PENDING_RECV), 0); /* withdrawn on B */
        send_v(w.rb, &k, fx_value_init(&v, 5));
        TT_CHECK_EQ_INT(fx_released(&v), 0);
        recv_into(w.ra, &k, 0, &r2); /* the same request id is not reused: a new call */
        TT_CHECK_EQ_INT(r2.calls, 1);
        TT_CHECK_EQ_INT(r2.st.code, TFRDV_OK);
        TT_CHECK(fx_recv_matches(&r2, 5));
        TT_CHECK_EQ_INT(fx_released(&v), 1);
        tfrdv_cancel_mgr_destroy(cm);
        world_down(&w);
    }
}

/* ============================================================================================
   D4: teardown with every allocation failing
   ============================================================================================ */
static int fail_allocs;
static void* maybe_alloc(void* u, size_t n) { return fail_allocs ? 0 : fx_alloc_fn(u, n); }
static void test_d4_cleanup_all_and_destroy_need_no_memory(void) {
    int phase;
    for (phase = 0; phase < 2; phase++) {
        fx_alloc a;
        tfrdv_mgr_config c;
        tfrdv_mgr* m;
        fx_key k;
        fx_serve s[40];
        fx_value v[40];
        int i;
        memset(&a, 0, sizeof a);
        memset(s, 0, sizeof s);
        c = fx_mgr_config(WB, INC_B, &a);
        c.hooks.allocator.alloc_fn = maybe_alloc;
        m = mk(&c);
        key(&k, B0, INC_B, A0, "deferred");
        for (i = 0; i < 40; i++) { /* 20 steps with a deferred request, 20 with a buffered value */
            if (i < 20) {
                TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 100 + i, k.buf, k.len, i + 1, 0, fx_serve_done, &s[i]), TFRDV_OK);
            } else {
                tfrdv_rendezvous* r = 0;
                TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 100 + i, &r, 0), TFRDV_OK);
                TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, 0), TFRDV_OK);
                send_v(r, &k, fx_value_init(&v[i], i));
                tfrdv_unref(r);
            }
        }
        TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 40);
        fail_allocs = 1;
        if (phase == 0) {
            tfrdv_mgr_cleanup_all(m);
            TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 0);
        }
        tfrdv_mgr_destroy(m);
        fail_allocs = 0;
        for (i = 0; i < 40; i++) {
            if (i < 20) {
                TT_CHECK_EQ_INT(s[i].calls, 1);
                TT_CHECK_EQ_INT(s[i].st.code, TFRDV_ABORTED);
            } else {
                TT_CHECK_EQ_INT(fx_released(&v[i]), 1);
            }
        }
        FX_CHECK_EMPTY(&a);
    }
}

/* ============================================================================================
   D6 + D7: no clock hook and no provider cancel_call under a library lock
   ============================================================================================ */
static void watch_cancel(void* u, tfrdv_call* call) {
    world* w = (world*)u;
    if (held_locks) __atomic_add_fetch(&hook_violations, 1, __ATOMIC_SEQ_CST);
    w->inner.cancel_call(w->inner.user, call);
}
static void watch_start(void* u, tfrdv_call* call) {
    world* w = (world*)u;
    if (held_locks) __atomic_add_fetch(&hook_violations, 1, __ATOMIC_SEQ_CST);
    w->inner.start_call(w->inner.user, call);
}
static void trace_count(void* u, const tfrdv_trace_event* ev) {
    (void)ev;
    if (held_locks) __atomic_add_fetch(&hook_violations, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch((long*)u, 1, __ATOMIC_SEQ_CST);
}
static long g_traces;
static void tweak_locks(tfrdv_mgr_config* ca, tfrdv_mgr_config* cb, world* w) {
    ca->hooks.sync = &lk_sync;
    cb->hooks.sync = &lk_sync;
    ca->hooks.clock.now_ns = lk_clock;
    cb->hooks.clock.now_ns = lk_clock;
    ca->transport.user = w;
    ca->transport.start_call = watch_start;
    ca->transport.cancel_call = watch_cancel;
    ca->call_timeout_ns = 50000000000;
    ca->trace = trace_count;
    ca->trace_user = &g_traces;
    cb->trace = trace_count;
    cb->trace_user = &g_traces;
}
typedef struct cancel_later {
    tfrdv_cancel_mgr* cm;
    int ms;
} cancel_later;
static void* cancel_thread(void* p) {
    cancel_later* c = (cancel_later*)p;
    sleep_ms(c->ms);
    tfrdv_cancel_start(c->cm);
    return 0;
}
static void test_d6_d7_hooks_run_outside_library_locks(void) {
    world w;
    fx_key k, kl;
    fx_value v;
    fx_serve s;
    fx_recv r;
    tfrdv_value* got = 0;
    tfrdv_status st;
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_args args;
    cancel_later cl;
    pthread_t th;
    tfrdv_rendezvous* r9 = 0;
    hook_violations = 0;
    clock_reads = 0;
    world_up(&w, tweak_locks);
    key(&k, B0, INC_B, A0, "watched");
    key(&kl, A0, INC_A, A1, "local");
    /* deferred serve (the clock stamps its deadline), then initialise */
    memset(&s, 0, sizeof s);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(w.mb, 9, k.buf, k.len, 77, 0, fx_serve_done, &s), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_find(w.mb, 9, &r9, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r9, 0, 0), TFRDV_OK);
    send_v(r9, &k, fx_value_init(&v, 6));
    TT_CHECK_EQ_INT(s.calls, 1);
    tfrdv_unref(r9);
    /* a timed remote receive with the user's cancellation manager, cancelled from another thread
       (the timer manager's cancellation reaches the provider's cancel_call) */
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm, 0), TFRDV_OK);
    args = cancel_args(cm);
    cl.cm = cm;
    cl.ms = 20;
    pthread_create(&th, 0, cancel_thread, &cl);
    TT_CHECK_EQ_INT(tfrdv_recv(w.ra, &k.pk, &args, 5000000000, &got, 0, &st), TFRDV_CANCELLED);
    pthread_join(th, 0);
    tfrdv_cancel_mgr_destroy(cm);
    /* a timed remote receive that times out */
    TT_CHECK_EQ_INT(tfrdv_recv(w.ra, &k.pk, 0, 5000000, &got, 0, &st), TFRDV_DEADLINE_EXCEEDED);
    /* an async remote receive cut by the call deadline through expire */
    memset(&r, 0, sizeof r);
    recv_into(w.ra, &k, 0, &r);
    tfrdv_mgr_expire(w.ma, INT64_MAX - 1);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_DEADLINE_EXCEEDED);
    /* local transfers on a traced step */
    memset(&r, 0, sizeof r);
    recv_into(w.ra, &kl, 0, &r);
    send_v(w.ra, &kl, fx_value_init(&v, 7));
    TT_CHECK_EQ_INT(r.calls, 1);
    tfrdv_mgr_cleanup_all(w.mb);
    TT_CHECK(clock_reads > 0);
    TT_CHECK(g_traces > 0);
    TT_CHECK_EQ_INT(hook_violations, 0);
    world_down(&w);
}

/* ============================================================================================
   D8: memory after a burst, caps
   ============================================================================================ */
static void burst(tfrdv_rendezvous* r, int n, int tag) {
    static tkey keys[512];
    static tval vals[512];
    int done = 0;
    while (done < n) {
        int m = n - done < 512 ? n - done : 512, j;
        for (j = 0; j < m; j++) {
            char edge[32];
            snprintf(edge, sizeof edge, "e%d_%d", tag, done + j);
            tkey_make(&keys[j], A0, 1, A1, edge);
            tval_init(&vals[j], j);
            TT_CHECK_EQ_INT(tfrdv_send(r, &keys[j].pk, 0, &vals[j].v, 0, 0), TFRDV_OK);
        }
        for (j = 0; j < m; j++) {
            tfrdv_value* got = 0;
            TT_CHECK_EQ_INT(tfrdv_recv(r, &keys[j].pk, 0, 0, &got, 0, 0), TFRDV_OK);
            tfrdv_value_release(got);
        }
        done += m;
    }
}
/* n keys pending at once, then each received (its own value): returns the live bytes at the peak */
static long burst_wide(tfrdv_rendezvous* r, fx_alloc* a, int n, tkey* keys, tval* vals) {
    long peak;
    int j;
    for (j = 0; j < n; j++) {
        char edge[32];
        snprintf(edge, sizeof edge, "edge_%d_weights", j);
        tkey_make(&keys[j], A0, 1, A1, edge);
        tval_init(&vals[j], j);
        TT_CHECK_EQ_INT(tfrdv_send(r, &keys[j].pk, 0, &vals[j].v, 0, 0), TFRDV_OK);
    }
    peak = fx_live_bytes(a);
    for (j = 0; j < n; j++) {
        tfrdv_value* got = 0;
        TT_CHECK_EQ_INT(tfrdv_recv(r, &keys[j].pk, 0, 0, &got, 0, 0), TFRDV_OK);
        TT_CHECK(got == &vals[j].v);
        tfrdv_value_release(got);
    }
    return peak;
}
static void test_d8_memory_returns_after_a_burst_and_steady_state_allocates_nothing(void) {
    enum { N = 100000 };
    static tkey keys[N];
    static tval vals[N];
    fx_alloc a;
    tfrdv_config c = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    long base, peak, after, allocs;
    memset(&a, 0, sizeof a);
    c.hooks = fx_alloc_hooks(&a);
    /* a wide working set (300 keys at once): keep up to 256 channels per shard, never trimmed
       (default: 64, freed when a table shrinks) and tables of at least 128 slots (default: 16) */
    c.free_max = 256;
    c.min_buckets = 128;
    TT_CHECK_EQ_INT(tfrdv_create(&c, &r, 0), TFRDV_OK);
    base = fx_live_bytes(&a);
    burst(r, 300, 0); /* warm: the steady-state working set */
    peak = burst_wide(r, &a, N, keys, vals);
    after = fx_live_bytes(&a);
    printf("    %d keys: %ld bytes held at the peak (%ld per key), %ld after the receives (base %ld)\n", N, peak - base,
           (peak - base) / N, after - base, base);
    TT_CHECK(peak - base > (long)N * 64);
    TT_CHECK(after - base < 512 * 1024); /* the caps: 4 shards x 256 x 3 kinds, tables shrunk back */
    allocs = a.allocs;
    burst(r, 200, 1); /* within the caps: no allocation at all */
    TT_CHECK_EQ_INT(a.allocs - allocs, 0);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&a);
}
/* The defaults give memory back after a burst of any size: 1,000 keys pending at once is below
   every shrink threshold of the old design (tables of 1,024 slots, 256 channels per shard kept). */
static void test_d8_default_gives_back_memory_after_a_small_burst(void) {
    enum { N = 1000 };
    static tkey keys[N];
    static tval vals[N];
    fx_alloc a;
    tfrdv_config c = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    long base, peak, after;
    memset(&a, 0, sizeof a);
    c.hooks = fx_alloc_hooks(&a);
    TT_CHECK_EQ_INT(tfrdv_create(&c, &r, 0), TFRDV_OK);
    base = fx_live_bytes(&a);
    peak = burst_wide(r, &a, N, keys, vals);
    after = fx_live_bytes(&a);
    printf("    %d keys: %ld bytes per pending key, %ld bytes left after the receives\n", N, (peak - base) / N, after - base);
    /* a 2-part key (device pair + edge) costs about a channel header, a send slot and the edge
       part: the ~95-byte device pair is shared */
    TT_CHECK((peak - base) / N < 160);
    TT_CHECK(after - base <= (peak - base) / 10);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&a);
}
static void test_d8_free_max_negative_keeps_nothing(void) {
    fx_alloc a;
    tfrdv_config c = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    long base;
    memset(&a, 0, sizeof a);
    c.hooks = fx_alloc_hooks(&a);
    c.free_max = -1;
    TT_CHECK_EQ_INT(tfrdv_create(&c, &r, 0), TFRDV_OK);
    base = fx_live_bytes(&a);
    burst(r, 1000, 2);
    /* no items or channels kept: only the bucket arrays (small tables are not shrunk) */
    TT_CHECK(fx_live_bytes(&a) - base <= 4 * 1024 * (long)sizeof(void*));
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&a);
}
static void test_d8_key_length_is_capped(void) {
    fx_alloc a;
    tfrdv_config c = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    static char big[6000];
    tfrdv_parsed_key pk;
    tfrdv_status st;
    tval v;
    rcv rc;
    tfrdv_mgr_config mc;
    tfrdv_mgr* m;
    fx_serve s;
    long allocs;
    char* huge;
    size_t n, hl = (size_t)16 << 20;
    memset(&a, 0, sizeof a);
    c.hooks = fx_alloc_hooks(&a);
    c.max_key_len = 1024;
    TT_CHECK_EQ_INT(tfrdv_create(&c, &r, 0), TFRDV_OK);
    n = (size_t)snprintf(big, sizeof big, "%s;0000000000000001;%s;", A0, A1);
    memset(big + n, 'x', 1500);
    n += 1500;
    n += (size_t)snprintf(big + n, sizeof big - n, ";0:0");
    TT_CHECK_EQ_INT(tfrdv_key_parse(big, n, &pk, &st), TFRDV_OK);
    tval_init(&v, 1);
    TT_CHECK_EQ_INT(tfrdv_send(r, &pk, 0, &v.v, 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "max_key_len");
    rcv_init(&rc);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &pk, 0, rcv_done, &rc, 0), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(rc.calls, 0);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(rel(&v), 0); /* a refused send leaves the value with the caller */
    /* the serving side refuses a 16 MiB key before copying anything */
    mc = fx_mgr_config(WB, INC_B, &a);
    m = mk(&mc);
    huge = (char*)malloc(hl);
    TT_CHECK(huge != 0);
    if (huge) {
        memset(huge, 'k', hl);
        memset(&s, 0, sizeof s);
        allocs = a.allocs;
        TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 1, huge, hl, 1, 0, fx_serve_done, &s), TFRDV_OK);
        TT_CHECK_EQ_INT(s.calls, 1);
        TT_CHECK_EQ_INT(s.st.code, TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(s.st.msg, "max_key_len");
        TT_CHECK_EQ_INT(a.allocs - allocs, 0);
        free(huge);
    }
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}
/* a channel holds keys up to 2^31-1 bytes (32-bit lengths): a longer one, admitted by a huge
   max_key_len, is refused like an allocation failure, before its bytes are read */
static void test_d8_channel_refuses_keys_over_2g(void) {
    fx_alloc a;
    tfrdv_config c = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    static char buf[512];
    tkey k;
    tfrdv_parsed_key pk;
    tfrdv_status st;
    tval v;
    rcv rc;
    memset(&a, 0, sizeof a);
    c.hooks = fx_alloc_hooks(&a);
    c.max_key_len = (size_t)-1;
    TT_CHECK_EQ_INT(tfrdv_create(&c, &r, 0), TFRDV_OK);
    tkey_make(&k, A0, 1, A1, "e");
    memcpy(buf, k.buf, k.pk.full.len); /* the message quotes up to a status' worth of the key */
    TT_CHECK_EQ_INT(tfrdv_key_parse(buf, k.pk.full.len, &pk, &st), TFRDV_OK);
    pk.full.len = (size_t)0x80000000u;
    tval_init(&v, 1);
    TT_CHECK_EQ_INT(tfrdv_send(r, &pk, 0, &v.v, 0, &st), TFRDV_RESOURCE_EXHAUSTED);
    rcv_init(&rc);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &pk, 0, rcv_done, &rc, 0), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_EQ_INT(rc.calls, 0);
    pk.full.len = k.pk.full.len; /* the same key at its real length still works */
    TT_CHECK_EQ_INT(tfrdv_send(r, &pk, 0, &v.v, 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &pk, 0, rcv_done, &rc, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(rc.calls, 1);
    TT_CHECK_EQ_INT(rc.code, TFRDV_OK);
    TT_CHECK_EQ_INT(rel(&v), 1); /* the refused send left it with us; the accepted one delivered it */
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&a);
}
/* a manager (counting allocator a) whose steps are never initialised by us; k: a key it serves */
static tfrdv_mgr* deferring_mgr(fx_alloc* a, int max_deferred, fx_key* k, const char* edge) {
    tfrdv_mgr_config c;
    memset(a, 0, sizeof *a);
    c = fx_mgr_config(WB, INC_B, a);
    c.max_deferred = max_deferred;
    key(k, B0, INC_B, A0, edge);
    fx_set_now(0);
    return mk(&c);
}
static void test_d8_deferred_requests_are_capped_and_their_memory_returns(void) {
    fx_alloc a;
    fx_key k;
    tfrdv_mgr* m = deferring_mgr(&a, 2000, &k, "early");
    static fx_serve s[2001];
    long base;
    int i;
    memset(s, 0, sizeof s);
    base = fx_live_bytes(&a);
    for (i = 0; i < 2001; i++) TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 7, k.buf, k.len, i + 1, 0, fx_serve_done, &s[i]), TFRDV_OK);
    TT_CHECK_EQ_INT(s[2000].calls, 1);
    TT_CHECK_EQ_INT(s[2000].st.code, TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_CONTAINS(s[2000].st.msg, "max_deferred");
    TT_CHECK_EQ_INT(s[0].calls, 0);
    tfrdv_mgr_expire(m, INT64_MAX - 1); /* every deferred request expires; the stray step goes */
    for (i = 0; i < 2000; i++) TT_CHECK_EQ_INT(s[i].calls, 1);
    TT_CHECK_EQ_INT(s[0].st.code, TFRDV_DEADLINE_EXCEEDED);
    printf("    2000 expired deferred requests: %ld bytes held afterwards\n", fx_live_bytes(&a) - base);
    TT_CHECK(fx_live_bytes(&a) - base < 256 * 1024); /* the serve free list is capped (256) */
    /* the cap counts requests waiting now, not ever: the next one is deferred again */
    memset(&s[0], 0, sizeof s[0]);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 7, k.buf, k.len, 99999, 0, fx_serve_done, &s[0]), TFRDV_OK);
    TT_CHECK_EQ_INT(s[0].calls, 0);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(s[0].calls, 1);
    FX_CHECK_EMPTY(&a);
}

/* A peer names step ids. A request that is refused (max_deferred reached, withdrawn at once)
   must not leave the step it named in the manager's table: otherwise 10^6 requests for 10^6
   step ids hold 10^6 steps until the process ends. A step someone else holds stays. */
static void test_d8_refused_requests_leave_no_steps_behind(void) {
    fx_alloc a;
    fx_key k;
    tfrdv_mgr* m = deferring_mgr(&a, 4, &k, "named_by_a_peer");
    tfrdv_rendezvous* mine = 0;
    tfrdv_cancel_mgr* cm = 0;
    static fx_serve s[300];
    long base;
    int i;
    memset(s, 0, sizeof s);
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 5000, &mine, 0), TFRDV_OK); /* ours, not initialised */
    base = fx_live_bytes(&a);
    for (i = 0; i < 200; i++) TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 1000 + i, k.buf, k.len, i + 1, 0, fx_serve_done, &s[i]), TFRDV_OK);
    for (i = 4; i < 200; i++) TT_CHECK(s[i].calls == 1 && s[i].st.code == TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 1 + 4); /* ours and the 4 deferred ones */
    /* refused for a step we hold: the step stays */
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 5000, k.buf, k.len, 500, 0, fx_serve_done, &s[200]), TFRDV_OK);
    TT_CHECK_EQ_INT(s[200].st.code, TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 1 + 4);
    /* withdrawn at once (its manager was already cancelled): no step either */
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm, 0), TFRDV_OK);
    tfrdv_cancel_start(cm);
    tfrdv_mgr_expire(m, INT64_MAX - 1); /* the 4 deferred expire; their steps go */
    for (i = 0; i < 4; i++) TT_CHECK_EQ_INT(s[i].st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 9000, k.buf, k.len, 600, cm, fx_serve_done, &s[201]), TFRDV_OK);
    TT_CHECK_EQ_INT(s[201].st.code, TFRDV_CANCELLED);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 1);
    printf("    200 refused or expired requests for 200 step ids: %ld bytes held afterwards\n", fx_live_bytes(&a) - base);
    TT_CHECK(fx_live_bytes(&a) - base < 128 * 1024); /* free lists only, not 200 steps */
    /* the step we hold still works */
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(mine, 0, 0), TFRDV_OK);
    tfrdv_unref(mine);
    tfrdv_cancel_mgr_destroy(cm);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* the table is open addressing with backward-shift deletion: keys whose hashes cluster at the
   end of the slot array (probe runs wrap around) go in and out in random order, checked against a
   model (each key: values sent minus values received, FIFO by id) */
static void test_table_clustered_hashes_wrap_and_delete_in_random_order(void) {
    enum { NK = 40, OPS = 20000 };
    static tkey keys[NK];
    static tval vals[OPS];
    static rcv rcvs[OPS];
    int sent[NK], got[NK], next_id[NK][64];
    fx_alloc a;
    tfrdv_config c = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    uint64_t rng = 12345;
    int op, k, bad = 0, nv = 0, nr = 0;
    memset(&a, 0, sizeof a);
    memset(sent, 0, sizeof sent);
    memset(got, 0, sizeof got);
    c.hooks = fx_alloc_hooks(&a);
    c.num_shards = 1;
    c.min_buckets = 16;
    TT_CHECK_EQ_INT(tfrdv_create(&c, &r, 0), TFRDV_OK);
    for (k = 0; k < NK; k++) {
        char edge[16];
        snprintf(edge, sizeof edge, "w%d", k);
        tkey_make(&keys[k], A0, 1, A1, edge);
        /* the three last slots of any table size are home: every probe run wraps around */
        keys[k].pk.hash = (uint64_t)(0xfffffffdu + (uint32_t)(k % 3)) | ((uint64_t)k << 40);
    }
    for (op = 0; op < OPS; op++) {
        k = (int)(fx_xorshift(&rng) % NK);
        if (fx_xorshift(&rng) & 1) {
            if (sent[k] - got[k] >= 64) continue;
            tval_init(&vals[nv], op);
            next_id[k][sent[k] % 64] = op;
            TT_CHECK_EQ_INT(tfrdv_send(r, &keys[k].pk, 0, &vals[nv].v, 0, 0), TFRDV_OK);
            nv++;
            sent[k]++;
        } else if (sent[k] > got[k]) {
            rcv_init(&rcvs[nr]);
            TT_CHECK_EQ_INT(tfrdv_recv_async(r, &keys[k].pk, 0, rcv_done, &rcvs[nr], 0), TFRDV_OK);
            if (rcvs[nr].calls != 1 || rcvs[nr].id != next_id[k][got[k] % 64]) bad++;
            nr++;
            got[k]++;
        }
    }
    TT_CHECK_EQ_INT(bad, 0);
    for (k = 0; k < NK; k++) /* drain: every key still findable */
        while (got[k] < sent[k]) {
            tfrdv_value* v = 0;
            TT_CHECK_EQ_INT(tfrdv_recv(r, &keys[k].pk, 0, 0, &v, 0, 0), TFRDV_OK);
            if (vid(v) != next_id[k][got[k] % 64]) bad++;
            tfrdv_value_release(v);
            got[k]++;
        }
    TT_CHECK_EQ_INT(bad, 0);
    TT_CHECK_EQ_INT(tfrdv_pending(r, 0, 0), 0);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&a);
}

/* a serving worker B with one step (initialised or not), a cancellation manager for withdrawing,
   a key from B to A and two serve recorders */
typedef struct srv {
    fx_alloc a;
    tfrdv_mgr* m;
    tfrdv_rendezvous* r; /* the step, when init_step */
    tfrdv_cancel_mgr* cm;
    fx_key k;
    fx_value v;
    fx_serve s1, s2;
    int64_t step;
} srv;
static void srv_up(srv* x, int64_t step, int init_step, int response_cache, const char* edge) {
    tfrdv_mgr_config c;
    memset(x, 0, sizeof *x);
    c = fx_mgr_config(WB, INC_B, &x->a);
    c.response_cache = response_cache;
    x->m = mk(&c);
    x->step = step;
    if (init_step) {
        TT_CHECK_EQ_INT(tfrdv_mgr_find(x->m, step, &x->r, 0), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_mgr_initialize(x->r, 0, 0), TFRDV_OK);
    }
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &x->cm, 0), TFRDV_OK);
    key(&x->k, B0, INC_B, A0, edge);
}
static tfrdv_code srv_serve(srv* x, int64_t rid, tfrdv_cancel_mgr* cm, fx_serve* s) {
    return tfrdv_mgr_serve(x->m, x->step, x->k.buf, x->k.len, rid, cm, fx_serve_done, s);
}
static void srv_start_step(srv* x) {
    TT_CHECK_EQ_INT(tfrdv_mgr_find(x->m, x->step, &x->r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(x->r, 0, 0), TFRDV_OK);
}
static void srv_down(srv* x) {
    tfrdv_cancel_mgr_destroy(x->cm);
    tfrdv_unref(x->r);
    tfrdv_mgr_destroy(x->m);
    FX_CHECK_EMPTY(&x->a);
}

/* ============================================================================================
   Explicit behaviours
   ============================================================================================ */
static void test_response_cache_is_keyed_by_request_id_only(void) {
    srv x;
    fx_key k2;
    srv_up(&x, 3, 1, 1, "first");
    key(&k2, B0, INC_B, A0, "second");
    send_v(x.r, &x.k, fx_value_init(&x.v, 8));
    TT_CHECK_EQ_INT(srv_serve(&x, 555, 0, &x.s1), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(x.m, 3, k2.buf, k2.len, 555, 0, fx_serve_done, &x.s2), TFRDV_OK);
    TT_CHECK_EQ_INT(x.s1.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(x.s2.calls, 1);
    TT_CHECK_EQ_INT(x.s2.st.code, TFRDV_OK);
    TT_CHECK(x.s2.value_ptr == &x.v.v); /* the first key's answer, as TensorFlow's cache gives */
    tfrdv_mgr_ack(x.m, 555);
    TT_CHECK_EQ_INT(fx_released(&x.v), 1);
    srv_down(&x);
}
static void test_destroy_of_a_found_step_aborts_it_but_the_table_keeps_it(void) {
    fx_alloc a;
    tfrdv_mgr_config c;
    tfrdv_mgr* m;
    tfrdv_rendezvous* r = 0;
    tfrdv_rendezvous* again = 0;
    tfrdv_status st;
    memset(&a, 0, sizeof a);
    c = fx_mgr_config(WB, INC_B, &a);
    m = mk(&c);
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 4, &r, 0), TFRDV_OK);
    tfrdv_destroy(r); /* aborts (CANCELLED) and drops our reference; the table holds its own */
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 1);
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 4, &again, 0), TFRDV_OK);
    TT_CHECK(again == r);
    TT_CHECK_EQ_INT(tfrdv_get_status(again, &st), TFRDV_CANCELLED);
    TT_CHECK_STR(st.msg, "Rendezvous destroyed");
    tfrdv_unref(again);
    tfrdv_mgr_cleanup(m, 4); /* what frees it */
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 0);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}
static void test_find_after_cleanup_creates_the_step_again_and_drops_its_tombstone(void) {
    fx_alloc a;
    tfrdv_mgr_config c;
    tfrdv_mgr* m;
    tfrdv_rendezvous* r = 0;
    fx_key k;
    fx_serve s1, s2;
    memset(&a, 0, sizeof a);
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    c = fx_mgr_config(WB, INC_B, &a);
    m = mk(&c);
    key(&k, B0, INC_B, A0, "again");
    tfrdv_mgr_cleanup(m, 6);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 6, k.buf, k.len, 1, 0, fx_serve_done, &s1), TFRDV_OK);
    TT_CHECK_EQ_INT(s1.st.code, TFRDV_ABORTED); /* the tombstone answers */
    /* TensorFlow's FindOrCreate makes a fresh rendezvous for a step id it cleaned up; so do we */
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 6, &r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_get_status(r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 6, k.buf, k.len, 2, 0, fx_serve_done, &s2), TFRDV_OK);
    TT_CHECK_EQ_INT(s2.calls, 0); /* deferred, not refused: the tombstone is gone */
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(s2.calls, 1);
    FX_CHECK_EMPTY(&a);
}
static void test_dedup_window_and_call_free_list_can_be_turned_off(void) {
    world w;
    fx_key k;
    fx_value v1, v2;
    fx_serve s1, s2;
    fx_recv r;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    memset(&r, 0, sizeof r);
    world_up(&w, 0);
    {
        /* B with no dedup window: the same request id twice is served twice */
        tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &w.a);
        tfrdv_mgr* m;
        tfrdv_rendezvous* rs = 0;
        c.request_id_window = -1;
        m = mk(&c);
        TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 1, &rs, 0), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_mgr_initialize(rs, 0, 0), TFRDV_OK);
        key(&k, B0, INC_B, A0, "twice");
        send_v(rs, &k, fx_value_init(&v1, 1));
        send_v(rs, &k, fx_value_init(&v2, 2));
        TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 1, k.buf, k.len, 42, 0, fx_serve_done, &s1), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 1, k.buf, k.len, 42, 0, fx_serve_done, &s2), TFRDV_OK);
        TT_CHECK_EQ_INT(s1.st.code, TFRDV_OK);
        TT_CHECK_EQ_INT(s2.st.code, TFRDV_OK);
        TT_CHECK_EQ_INT(stats(m).duplicate_requests, 0);
        tfrdv_unref(rs);
        tfrdv_mgr_destroy(m);
    }
    {
        /* A with no call free list: calls are freed, none kept */
        tfrdv_mgr_config c = fx_mgr_config("/job:c/replica:0/task:0", 0xc1, &w.a);
        tfrdv_mgr* m;
        tfrdv_rendezvous* rc = 0;
        fx_key kc;
        fx_value v3;
        c.call_freelist_max = -1;
        c.transport = w.inner;
        m = mk(&c);
        TT_CHECK_EQ_INT(tfrdv_mgr_find(m, STEP, &rc, 0), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_mgr_initialize(rc, 0, 0), TFRDV_OK);
        key(&kc, B0, INC_B, "/job:c/replica:0/task:0/device:CPU:0", "nofree");
        send_v(w.rb, &kc, fx_value_init(&v3, 3));
        recv_into(rc, &kc, 0, &r);
        TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
        TT_CHECK_EQ_INT(stats(m).calls_free, 0);
        TT_CHECK_EQ_INT(stats(m).calls_completed, 1);
        tfrdv_unref(rc);
        tfrdv_mgr_destroy(m);
    }
    world_down(&w);
}

/* ============================================================================================
   API for transports
   ============================================================================================ */
static int reset_hits;
static void count_hit(void* u) {
    if (u) (*(int*)u)++;
    else reset_hits++;
}
static void test_cancel_mgr_reset_makes_a_manager_reusable(void) {
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_cancel_node n;
    int hits = 0;
    memset(&n, 0, sizeof n);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_cancel_register(cm, &n, 0, 0), 0); /* NULL fn */
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_reset(0), TFRDV_INVALID_ARGUMENT);
    tfrdv_cancel_start(cm);
    TT_CHECK_EQ_INT(tfrdv_cancel_is_cancelled(cm), 1);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_reset(cm), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_cancel_is_cancelled(cm), 0);
    TT_CHECK_EQ_INT(tfrdv_cancel_register(cm, &n, count_hit, &hits), 1);
    tfrdv_cancel_start(cm);
    TT_CHECK_EQ_INT(hits, 1);
    tfrdv_cancel_mgr_destroy(cm);
}
static void test_cancel_mgr_reset_refuses_while_nodes_are_registered(void) {
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_cancel_node n;
    memset(&n, 0, sizeof n);
    reset_hits = 0;
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_cancel_register(cm, &n, count_hit, 0), 1);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_reset(cm), TFRDV_FAILED_PRECONDITION);
    tfrdv_cancel_start(cm);
    TT_CHECK_EQ_INT(reset_hits, 1);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_reset(cm), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_cancel_register(cm, &n, count_hit, 0), 1);
    tfrdv_cancel_start(cm);
    TT_CHECK_EQ_INT(reset_hits, 2);
    tfrdv_cancel_mgr_destroy(cm);
}

/* withdraw in each state: LOCAL (waiting in the table), DEFERRED (step not initialised),
   WAITER (a retry waiting on the response-cache entry of its request id) */
static void test_withdraw_local_request_keeps_the_later_value_and_frees_its_id(void) {
    srv x;
    srv_up(&x, 1, 1, 0, "w_local");
    TT_CHECK_EQ_INT(srv_serve(&x, 31, x.cm, &x.s1), TFRDV_OK);
    TT_CHECK_EQ_INT(x.s1.calls, 0);
    tfrdv_cancel_start(x.cm);
    TT_CHECK_EQ_INT(x.s1.calls, 1);
    TT_CHECK_EQ_INT(x.s1.st.code, TFRDV_CANCELLED);
    tfrdv_cancel_start(x.cm); /* again: nothing */
    TT_CHECK_EQ_INT(x.s1.calls, 1);
    send_v(x.r, &x.k, fx_value_init(&x.v, 9));
    TT_CHECK_EQ_INT(fx_released(&x.v), 0);
    TT_CHECK_EQ_INT(pending_of(x.r, TFRDV_PENDING_SEND), 1);
    /* the retry with the same request id is served, not refused as a duplicate */
    TT_CHECK_EQ_INT(srv_serve(&x, 31, 0, &x.s2), TFRDV_OK);
    TT_CHECK_EQ_INT(x.s2.st.code, TFRDV_OK);
    TT_CHECK(x.s2.value_ptr == &x.v.v);
    TT_CHECK_EQ_INT(fx_released(&x.v), 1);
    srv_down(&x);
}
static void test_withdraw_deferred_request(void) {
    srv x;
    srv_up(&x, 2, 0, 0, "w_deferred");
    TT_CHECK_EQ_INT(srv_serve(&x, 32, x.cm, &x.s1), TFRDV_OK);
    TT_CHECK_EQ_INT(stats(x.m).requests_deferred, 1);
    tfrdv_cancel_start(x.cm);
    TT_CHECK_EQ_INT(x.s1.calls, 1);
    TT_CHECK_EQ_INT(x.s1.st.code, TFRDV_CANCELLED);
    TT_CHECK_CONTAINS(x.s1.st.msg, "withdrawn");
    srv_start_step(&x);
    TT_CHECK_EQ_INT(x.s1.calls, 1); /* initialisation does not answer it again */
    send_v(x.r, &x.k, fx_value_init(&x.v, 10));
    TT_CHECK_EQ_INT(pending_of(x.r, TFRDV_PENDING_SEND), 1);
    TT_CHECK_EQ_INT(srv_serve(&x, 32, 0, &x.s2), TFRDV_OK);
    TT_CHECK_EQ_INT(x.s2.st.code, TFRDV_OK);
    srv_down(&x);
}
/* Deferred requests, each with its own manager, withdrawn in a shuffled order (the newest and the
   oldest first): each leaves the step's list where it is, and initialisation serves the rest in
   arrival order. */
#define WD_N 300
static void test_withdraw_deferred_requests_in_shuffled_order_serves_the_rest_in_order(void) {
    srv x;
    tfrdv_cancel_mgr** cm = (tfrdv_cancel_mgr**)calloc(WD_N, sizeof *cm);
    fx_serve* s = (fx_serve*)calloc(WD_N, sizeof *s);
    fx_value* v = (fx_value*)calloc(WD_N, sizeof *v);
    int* order = (int*)calloc(WD_N, sizeof *order);
    char* gone = (char*)calloc(WD_N, 1);
    int i, left = 0, next = 0;
    TT_CHECK(cm && s && v && order && gone);
    if (!cm || !s || !v || !order || !gone) return;
    srv_up(&x, 5, 0, 0, "w_shuffled");
    for (i = 0; i < WD_N; i++) {
        TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm[i], 0), TFRDV_OK);
        TT_CHECK_EQ_INT(srv_serve(&x, 1000 + i, cm[i], &s[i]), TFRDV_OK);
    }
    TT_CHECK_EQ_INT(stats(x.m).requests_deferred, WD_N);
    fx_cancel_shuffled(cm, WD_N, WD_N / 2, 777u, order, gone);
    for (i = 0; i < WD_N; i++) {
        if (gone[i]) TT_CHECK(s[i].calls == 1 && s[i].st.code == TFRDV_CANCELLED);
        else TT_CHECK_EQ_INT(s[i].calls, 0);
        left += !gone[i];
    }
    TT_CHECK_EQ_INT(tfrdv_mgr_pending(x.m, 0, 0), (size_t)left); /* one entry per deferred request */
    srv_start_step(&x);
    TT_CHECK_EQ_INT(pending_of(x.r, TFRDV_PENDING_RECV), (size_t)left); /* now receivers in the table */
    for (i = 0; i < left; i++) send_v(x.r, &x.k, fx_value_init(&v[i], i));
    for (i = 0; i < WD_N; i++) /* the survivors got the values in arrival order */
        if (!gone[i]) TT_CHECK(s[i].calls == 1 && s[i].st.code == TFRDV_OK && s[i].value_ptr == &v[next++].v);
    TT_CHECK_EQ_INT(next, left);
    for (i = 0; i < WD_N; i++) tfrdv_cancel_mgr_destroy(cm[i]);
    srv_down(&x);
    for (i = 0; i < left; i++) TT_CHECK_EQ_INT(fx_released(&v[i]), 1);
    free(cm);
    free(s);
    free(v);
    free(order);
    free(gone);
}
/* Step and request ids come from peers. A hostile peer that knows the hash can choose ids that
   all share one bucket (each lookup then walks all of them, under the manager's lock). The
   manager hashes them with a per-manager secret: ids chosen against an unkeyed hash spread. */
static uint64_t unmix64(uint64_t x) { /* inverse of tfrdv__mix64 (checked below) */
    x ^= (x >> 31) ^ (x >> 62);
    x *= 0x319642b2d24d8ec3u;
    x ^= (x >> 27) ^ (x >> 54);
    x *= 0x96de1b173f119089u;
    x ^= (x >> 30) ^ (x >> 60);
    return x;
}
static size_t max_load(const size_t* b, size_t n) {
    size_t i, m = 0;
    for (i = 0; i < n; i++)
        if (b[i] > m) m = b[i];
    return m;
}
#define CHOSEN_N 4000
static void test_peer_chosen_ids_do_not_pile_into_one_bucket(void) {
    fx_alloc a;
    tfrdv_mgr_config c;
    tfrdv_mgr* m;
    size_t* load;
    size_t nb, i;
    memset(&a, 0, sizeof a);
    c = fx_mgr_config(WB, INC_B, &a);
    m = mk(&c);
    nb = m->recent.nb;
    load = (size_t*)calloc(nb > 256 ? nb : 256, sizeof *load);
    TT_CHECK(load != NULL);
    if (!load) return;
    /* request ids k << 44: an unkeyed multiplicative hash puts them in at most 4 of the dedup
       window's buckets */
    for (i = 1; i <= CHOSEN_N; i++) load[tfrdv__idset_bucket(&m->recent, (int64_t)(i << 44))]++;
    TT_CHECK(max_load(load, nb) <= 16); /* ~0.25 per bucket on average */
    /* multiples of 256: one bucket of request_id % 256 in the response cache */
    memset(load, 0, 256 * sizeof *load);
    for (i = 1; i <= CHOSEN_N; i++) load[tfrdv__cache_bucket(m, (int64_t)(i * 256))]++;
    TT_CHECK(max_load(load, 256) <= 4 * CHOSEN_N / 256 + 16);
    /* step ids whose unkeyed mix has 16 low zero bits: one bucket of any step table up to 65536 */
    memset(load, 0, m->nb * sizeof *load);
    for (i = 1; i <= CHOSEN_N; i++) {
        uint64_t step = unmix64((uint64_t)i << 16);
        TT_CHECK(tfrdv__mix64(step) == (uint64_t)i << 16);
        load[tfrdv__step_bucket(m, (int64_t)step)]++;
    }
    TT_CHECK(max_load(load, m->nb) <= 4 * CHOSEN_N / m->nb + 16);
    free(load);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}
static void test_withdraw_with_an_already_cancelled_manager(void) {
    srv x;
    srv_up(&x, 3, 0, 0, "w_early");
    tfrdv_cancel_start(x.cm);
    TT_CHECK_EQ_INT(srv_serve(&x, 0, x.cm, &x.s1), TFRDV_OK); /* deferred path */
    TT_CHECK_EQ_INT(x.s1.st.code, TFRDV_CANCELLED);
    srv_start_step(&x);
    TT_CHECK_EQ_INT(srv_serve(&x, 0, x.cm, &x.s2), TFRDV_OK); /* local path */
    TT_CHECK_EQ_INT(x.s2.st.code, TFRDV_CANCELLED);
    TT_CHECK_EQ_INT(pending_of(x.r, TFRDV_PENDING_RECV), 0);
    srv_down(&x);
}
static void test_withdraw_a_retry_waiting_on_the_cache_entry(void) {
    srv x;
    srv_up(&x, 4, 1, 1, "w_waiter");
    TT_CHECK_EQ_INT(srv_serve(&x, 33, 0, &x.s1), TFRDV_OK);
    TT_CHECK_EQ_INT(srv_serve(&x, 33, x.cm, &x.s2), TFRDV_OK); /* the retry */
    tfrdv_cancel_start(x.cm);
    TT_CHECK_EQ_INT(x.s2.calls, 1);
    TT_CHECK_EQ_INT(x.s2.st.code, TFRDV_CANCELLED);
    send_v(x.r, &x.k, fx_value_init(&x.v, 11));
    TT_CHECK_EQ_INT(x.s1.calls, 1); /* the computing request is unaffected */
    TT_CHECK_EQ_INT(x.s1.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(x.s2.calls, 1);
    tfrdv_mgr_ack(x.m, 33);
    srv_down(&x);
    TT_CHECK_EQ_INT(fx_released(&x.v), 1);
}

/* races: withdraw against a send, an abort, a cleanup, on two threads; exactly one completion,
   and the value is either delivered to the request or still buffered (never lost) */
typedef struct race {
    tfrdv_mgr* m;
    tfrdv_rendezvous* r;
    tfrdv_cancel_mgr* cm;
    const fx_key* k;
    fx_value* v;
    int what; /* 0 send, 1 abort, 2 cleanup */
    int ready; /* both threads spin until both are here, then act at once */
    int delay; /* spins before acting on the other thread, varied to sweep the window */
} race;
static void race_meet(race* x, int spins) {
    volatile int i;
    __atomic_add_fetch(&x->ready, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&x->ready, __ATOMIC_ACQUIRE) < 2) {}
    for (i = 0; i < spins; i++) {}
}
static void* race_other(void* p) {
    race* x = (race*)p;
    race_meet(x, x->delay);
    if (x->what == 0) tfrdv_send(x->r, &x->k->pk, 0, &x->v->v, 0, 0);
    else if (x->what == 1) tfrdv_abort(x->r, TFRDV_ABORTED, "race abort");
    else tfrdv_mgr_cleanup(x->m, 1);
    return 0;
}
static void test_withdraw_races_send_abort_and_cleanup(void) {
    int what, i, delivered = 0, withdrawn = 0, kept = 0;
    for (what = 0; what < 3; what++) {
        for (i = 0; i < 300; i++) {
            fx_alloc a;
            tfrdv_mgr_config c;
            race x;
            fx_key k;
            fx_value v;
            fx_serve s;
            pthread_t th;
            memset(&a, 0, sizeof a);
            memset(&s, 0, sizeof s);
            memset(&x, 0, sizeof x);
            c = fx_mgr_config(WB, INC_B, &a);
            x.m = mk(&c);
            TT_CHECK_EQ_INT(tfrdv_mgr_find(x.m, 1, &x.r, 0), TFRDV_OK);
            TT_CHECK_EQ_INT(tfrdv_mgr_initialize(x.r, 0, 0), TFRDV_OK);
            TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &x.cm, 0), TFRDV_OK);
            key(&k, B0, INC_B, A0, "race");
            fx_value_init(&v, 12);
            x.k = &k;
            x.v = &v;
            x.what = what;
            TT_CHECK_EQ_INT(tfrdv_mgr_serve(x.m, 1, k.buf, k.len, 1, x.cm, fx_serve_done, &s), TFRDV_OK);
            x.delay = (i % 20) * 50;
            pthread_create(&th, 0, race_other, &x);
            race_meet(&x, 500);
            tfrdv_cancel_start(x.cm);
            pthread_join(th, 0);
            TT_CHECK_EQ_INT(s.calls, 1);
            if (what == 0) {
                if (s.st.code == TFRDV_OK) delivered++;
                else {
                    TT_CHECK_EQ_INT(s.st.code, TFRDV_CANCELLED);
                    withdrawn++;
                    if (pending_of(x.r, TFRDV_PENDING_SEND) == 1) kept++;
                    TT_CHECK_EQ_INT(pending_of(x.r, TFRDV_PENDING_SEND), 1); /* not lost */
                    TT_CHECK_EQ_INT(fx_released(&v), 0);
                }
            } else {
                TT_CHECK(s.st.code == TFRDV_CANCELLED || s.st.code == TFRDV_ABORTED);
            }
            tfrdv_cancel_mgr_destroy(x.cm);
            tfrdv_unref(x.r);
            tfrdv_mgr_destroy(x.m);
            if (what == 0) TT_CHECK_EQ_INT(fx_released(&v), 1);
            FX_CHECK_EMPTY(&a);
        }
    }
    printf("    withdraw vs send: %d delivered, %d withdrawn (%d kept buffered)\n", delivered, withdrawn, kept);
}

/* step_requested races the step's own producer: the hook is still reading the request's key on
   one thread while another thread starts the step, sends, and the request is answered and
   finished there. The key the hook was given stays valid for the whole call (ASan/TSan are the
   check), the request is answered exactly once, with the value. */
typedef struct hookrace {
    race x;                /* m, k, v, ready, delay */
    int64_t step;
    int calls, key_ok;
} hookrace;
static void* hookrace_producer(void* p) {
    hookrace* h = (hookrace*)p;
    tfrdv_rendezvous* r = 0;
    race_meet(&h->x, h->x.delay);
    if (tfrdv_mgr_start_step(h->x.m, h->step, &r, 0) == TFRDV_OK) {
        tfrdv_send(r, &h->x.k->pk, 0, &h->x.v->v, 0, 0);
        tfrdv_unref(r);
    }
    return 0;
}
static void hookrace_hook(void* user, tfrdv_mgr* m, int64_t step_id, tfrdv_str key) {
    hookrace* h = (hookrace*)user;
    volatile int i;
    (void)m;
    h->calls++;
    race_meet(&h->x, 0);
    for (i = 0; i < 600; i++) {} /* the producer answers the request meanwhile */
    h->key_ok = step_id == h->step && key.len == h->x.k->len && memcmp(key.ptr, h->x.k->buf, key.len) == 0;
}
static void test_step_requested_hook_races_the_producer(void) {
    int i;
    for (i = 0; i < 300; i++) {
        fx_alloc a;
        tfrdv_mgr_config c;
        hookrace h;
        fx_key k;
        fx_value v;
        fx_serve s;
        pthread_t th;
        memset(&a, 0, sizeof a);
        memset(&s, 0, sizeof s);
        memset(&h, 0, sizeof h);
        c = fx_mgr_config(WB, INC_B, &a);
        c.step_requested = hookrace_hook;
        c.step_requested_user = &h;
        c.free_max = -1; /* request records are freed, not recycled: a stale key is ASan's to see */
        h.x.m = mk(&c);
        h.step = 100 + i;
        key(&k, B0, INC_B, A0, "hook_race");
        fx_value_init(&v, 13);
        h.x.k = &k;
        h.x.v = &v;
        h.x.delay = (i % 30) * 40;
        pthread_create(&th, 0, hookrace_producer, &h);
        TT_CHECK_EQ_INT(tfrdv_mgr_serve(h.x.m, h.step, k.buf, k.len, 1, 0, fx_serve_done, &s), TFRDV_OK);
        pthread_join(th, 0);
        TT_CHECK_EQ_INT(h.calls, 1);
        TT_CHECK(h.key_ok);
        TT_CHECK_EQ_INT(s.calls, 1);
        TT_CHECK_EQ_INT(s.st.code, TFRDV_OK);
        TT_CHECK(s.value_ptr == &v.v);
        tfrdv_mgr_destroy(h.x.m);
        TT_CHECK_EQ_INT(fx_released(&v), 1);
        FX_CHECK_EMPTY(&a);
    }
}

/* a deferred request withdrawn while another thread expires it and cleans its step up: the
   cancellation callback may find the request gone and its step's last user reference dropped; it
   must still never touch freed memory (ASan/TSan runs of this test are the check) */
typedef struct race2 {
    tfrdv_mgr* m;
    tfrdv_cancel_mgr* cm;
    int ready, delay;
} race2;
static void* race2_cancel(void* p) {
    race2* x = (race2*)p;
    volatile int i;
    __atomic_add_fetch(&x->ready, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&x->ready, __ATOMIC_ACQUIRE) < 2) {}
    for (i = 0; i < x->delay; i++) {}
    tfrdv_cancel_start(x->cm);
    return 0;
}
static void test_withdraw_races_expiry_and_cleanup_of_a_deferred_request(void) {
    int i, cancelled = 0, expired = 0;
    for (i = 0; i < 400; i++) {
        srv x;
        race2 y;
        pthread_t th;
        srv_up(&x, 9, 0, 0, "w_race2");
        fx_set_now(0);
        TT_CHECK_EQ_INT(srv_serve(&x, 0, x.cm, &x.s1), TFRDV_OK); /* deferred */
        memset(&y, 0, sizeof y);
        y.m = x.m;
        y.cm = x.cm;
        y.delay = (i % 20) * 40;
        pthread_create(&th, 0, race2_cancel, &y);
        __atomic_add_fetch(&y.ready, 1, __ATOMIC_ACQ_REL);
        while (__atomic_load_n(&y.ready, __ATOMIC_ACQUIRE) < 2) {}
        tfrdv_mgr_expire(x.m, INT64_MAX - 1); /* expires it (and drops the stray step) */
        tfrdv_mgr_cleanup(x.m, 9);
        pthread_join(th, 0);
        TT_CHECK_EQ_INT(x.s1.calls, 1);
        if (x.s1.st.code == TFRDV_CANCELLED) cancelled++;
        else if (x.s1.st.code == TFRDV_DEADLINE_EXCEEDED) expired++;
        else TT_CHECK(0);
        srv_down(&x);
    }
    printf("    withdraw vs expiry: %d withdrawn, %d expired\n", cancelled, expired);
}

/* a server thread holding a reference keeps calling in while the owner destroys */
typedef struct server {
    tfrdv_mgr* m;
    const fx_key* k;
    volatile int stop;
    long answers, aborted;
} server;
static void count_answer(void* u, const tfrdv_status* st, const tfrdv_args* sa, tfrdv_value* v, int dead) {
    server* s = (server*)u;
    (void)sa;
    (void)dead;
    __atomic_add_fetch(&s->answers, 1, __ATOMIC_SEQ_CST);
    if (st->code == TFRDV_ABORTED) __atomic_add_fetch(&s->aborted, 1, __ATOMIC_SEQ_CST);
    tfrdv_value_release(v);
}
static void* server_thread(void* p) {
    server* s = (server*)p;
    int64_t i = 0;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        tfrdv_mgr_serve(s->m, 1 + (i % 4), s->k->buf, s->k->len, 0, 0, count_answer, s);
        i++;
    }
    return 0;
}
static void test_mgr_ref_keeps_a_destroyed_manager_safe_for_server_threads(void) {
    fx_alloc a;
    tfrdv_mgr_config c;
    server s;
    pthread_t th;
    fx_key k;
    tfrdv_rendezvous* r = 0;
    fx_serve late;
    memset(&a, 0, sizeof a);
    memset(&s, 0, sizeof s);
    memset(&late, 0, sizeof late);
    c = fx_mgr_config(WB, INC_B, &a);
    s.m = mk(&c);
    key(&k, B0, INC_B, A0, "srv");
    s.k = &k;
    tfrdv_mgr_ref(s.m); /* the server's reference */
    pthread_create(&th, 0, server_thread, &s);
    sleep_ms(5);
    tfrdv_mgr_destroy(s.m); /* the owner leaves while the server thread calls in */
    sleep_ms(5);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(s.m, 9, k.buf, k.len, 0, 0, fx_serve_done, &late), TFRDV_OK);
    TT_CHECK_EQ_INT(late.st.code, TFRDV_ABORTED);
    TT_CHECK_CONTAINS(late.st.msg, "shutting down");
    TT_CHECK_EQ_INT(tfrdv_mgr_find(s.m, 9, &r, 0), TFRDV_FAILED_PRECONDITION);
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, 0);
    TT_CHECK(s.answers > 0);
    TT_CHECK(s.aborted > 0);
    TT_CHECK(fx_live(&a) > 0); /* still alive: our reference */
    tfrdv_mgr_unref(s.m);
    FX_CHECK_EMPTY(&a);
}

static int64_t seen_deadline;
static void deadline_start(void* u, tfrdv_call* call) {
    world* w = (world*)u;
    seen_deadline = tfrdv_call_deadline(call);
    w->inner.start_call(w->inner.user, call);
}
static void deadline_cancel(void* u, tfrdv_call* call) {
    world* w = (world*)u;
    w->inner.cancel_call(w->inner.user, call);
}
static int64_t g_timeout;
static void tweak_deadline(tfrdv_mgr_config* ca, tfrdv_mgr_config* cb, world* w) {
    (void)cb;
    ca->hooks.clock.now_ns = fx_clock_fn;
    ca->call_timeout_ns = g_timeout;
    ca->transport.user = w;
    ca->transport.start_call = deadline_start;
    ca->transport.cancel_call = deadline_cancel;
}
static void test_call_deadline_is_visible_to_the_provider(void) {
    int t;
    for (t = 0; t < 2; t++) {
        world w;
        fx_key k;
        fx_recv r;
        memset(&r, 0, sizeof r);
        g_timeout = t ? 7000 : 0;
        fx_set_now(1000);
        world_up(&w, tweak_deadline);
        TT_CHECK_EQ_INT(tfrdv_mgr_now(w.ma), 1000);
        key(&k, B0, INC_B, A0, "dl");
        seen_deadline = 0;
        recv_into(w.ra, &k, 0, &r);
        TT_CHECK_EQ_INT(seen_deadline, t ? 8000 : INT64_MAX);
        TT_CHECK_EQ_INT(tfrdv_call_deadline(0), INT64_MAX);
        world_down(&w);
        TT_CHECK_EQ_INT(r.calls, 1);
    }
}

static void test_serve_callback_gets_the_senders_args_also_from_the_cache(void) {
    srv x;
    fx_serve s3;
    tfrdv_args sa;
    int devctx = 5;
    memset(&s3, 0, sizeof s3);
    memset(&sa, 0, sizeof sa);
    srv_up(&x, 5, 1, 1, "devtensor");
    sa.device_context = &devctx;
    sa.alloc_attrs = TFRDV_ALLOC_GPU_COMPATIBLE;
    TT_CHECK_EQ_INT(tfrdv_send(x.r, &x.k.pk, &sa, fx_value_init(&x.v, 13), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(srv_serve(&x, 61, 0, &x.s1), TFRDV_OK);
    TT_CHECK(x.s1.send_args.device_context == &devctx);
    TT_CHECK_EQ_INT(x.s1.send_args.alloc_attrs, TFRDV_ALLOC_GPU_COMPATIBLE);
    TT_CHECK_EQ_INT(srv_serve(&x, 61, 0, &x.s2), TFRDV_OK); /* cache hit */
    TT_CHECK(x.s2.send_args.device_context == &devctx);
    TT_CHECK_EQ_INT(x.s2.send_args.alloc_attrs, TFRDV_ALLOC_GPU_COMPATIBLE);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(x.m, 77, "bad", 3, 62, 0, fx_serve_done, &s3), TFRDV_OK); /* an error */
    TT_CHECK(s3.send_args.device_context == 0);
    tfrdv_mgr_ack(x.m, 61);
    srv_down(&x);
}

/* the trace hook: one event per transfer and side, with bytes, dtype, code and times */
typedef struct tlog {
    int n;
    tfrdv_trace_event ev[16];
    char keys[16][128];
} tlog;
static void trace_log(void* u, const tfrdv_trace_event* ev) {
    tlog* t = (tlog*)u;
    if (t->n < 16) {
        t->ev[t->n] = *ev;
        snprintf(t->keys[t->n], sizeof t->keys[t->n], "%.*s", (int)ev->key.len, ev->key.ptr);
    }
    t->n++;
}
static tlog g_tlog;
static void tweak_trace(tfrdv_mgr_config* ca, tfrdv_mgr_config* cb, world* w) {
    (void)w;
    ca->hooks.clock.now_ns = fx_clock_fn;
    cb->hooks.clock.now_ns = fx_clock_fn;
    ca->trace = trace_log;
    ca->trace_user = &g_tlog;
    cb->trace = trace_log;
    cb->trace_user = &g_tlog;
}
static int find_side(const tlog* t, tfrdv_trace_side side) {
    int i;
    for (i = 0; i < t->n && i < 16; i++)
        if (t->ev[i].side == side) return i;
    return -1;
}
static void test_trace_hook_reports_local_fetch_and_serve(void) {
    world w;
    fx_key kr, kl;
    fx_value v1, v2;
    fx_recv r1, r2;
    int i;
    memset(&g_tlog, 0, sizeof g_tlog);
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    fx_set_now(100);
    world_up(&w, tweak_trace);
    key(&kr, B0, INC_B, A0, "remote_t");
    key(&kl, A0, INC_A, A0, "local_t");
    recv_into(w.ra, &kr, 0, &r1);
    recv_into(w.ra, &kl, 0, &r2);
    fx_set_now(350);
    send_v(w.rb, &kr, fx_value_init(&v1, 14));
    send_v(w.ra, &kl, fx_value_init(&v2, 15));
    TT_CHECK_EQ_INT(g_tlog.n, 3);
    i = find_side(&g_tlog, TFRDV_TRACE_FETCH);
    TT_CHECK(i >= 0);
    if (i >= 0) {
        TT_CHECK_EQ_INT(g_tlog.ev[i].start_ns, 100);
        TT_CHECK_EQ_INT(g_tlog.ev[i].end_ns, 350);
        TT_CHECK_EQ_INT(g_tlog.ev[i].bytes, 24);
        TT_CHECK_EQ_INT(g_tlog.ev[i].dtype, 3);
        TT_CHECK_EQ_INT(g_tlog.ev[i].code, TFRDV_OK);
        TT_CHECK_EQ_INT(g_tlog.ev[i].step_id, STEP);
        TT_CHECK_STR(g_tlog.keys[i], kr.buf);
    }
    i = find_side(&g_tlog, TFRDV_TRACE_SERVE);
    TT_CHECK(i >= 0);
    if (i >= 0) {
        TT_CHECK_EQ_INT(g_tlog.ev[i].start_ns, 100);
        TT_CHECK_EQ_INT(g_tlog.ev[i].bytes, 24);
        TT_CHECK_STR(g_tlog.keys[i], kr.buf);
    }
    i = find_side(&g_tlog, TFRDV_TRACE_LOCAL);
    TT_CHECK(i >= 0);
    if (i >= 0) {
        TT_CHECK_EQ_INT(g_tlog.ev[i].start_ns, 100);
        TT_CHECK_EQ_INT(g_tlog.ev[i].end_ns, 350);
        TT_CHECK_STR(g_tlog.keys[i], kl.buf);
    }
    world_down(&w);
}
static void tweak_count_clock(tfrdv_mgr_config* ca, tfrdv_mgr_config* cb, world* w) {
    (void)w;
    ca->hooks.clock.now_ns = lk_clock;
    cb->hooks.clock.now_ns = lk_clock;
}
static void test_no_trace_hook_means_no_clock_reads_on_transfers(void) {
    world w;
    fx_key kr, kl;
    fx_value v1, v2;
    fx_recv r1, r2;
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    world_up(&w, tweak_count_clock);
    key(&kr, B0, INC_B, A0, "remote_n");
    key(&kl, A0, INC_A, A0, "local_n");
    clock_reads = 0;
    recv_into(w.ra, &kr, 0, &r1);
    recv_into(w.ra, &kl, 0, &r2);
    send_v(w.rb, &kr, fx_value_init(&v1, 16));
    send_v(w.ra, &kl, fx_value_init(&v2, 17));
    TT_CHECK_EQ_INT(r1.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(r2.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(clock_reads, 0);
    world_down(&w);
}

/* ============================================================================================
   The receive callback knows its key (recv_args->key), on every completion path
   ============================================================================================ */
typedef struct keyrec {
    int calls;
    tfrdv_code code;
    char key[160];
} keyrec;
static void key_done(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    keyrec* k = (keyrec*)u;
    (void)sa;
    (void)dead;
    k->calls++;
    k->code = st->code;
    snprintf(k->key, sizeof k->key, TFRDV_STR_FMT, TFRDV_STR_ARG(ra->key));
    tfrdv_value_release(v);
}
static void test_recv_callback_gets_its_key_on_every_path(void) {
    tfrdv_rendezvous* r = 0;
    tfrdv_cancel_mgr* cm = 0;
    tkey k1, k2, k3, k4;
    tval v1, v2;
    keyrec a, b, c, d;
    tfrdv_args args;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    memset(&d, 0, sizeof d);
    TT_CHECK_EQ_INT(tfrdv_create(0, &r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm, 0), TFRDV_OK);
    tkey_make(&k1, A0, 1, A1, "waits_then_sent");
    tkey_make(&k2, A0, 1, A1, "already_there");
    tkey_make(&k3, A0, 1, A1, "cancelled");
    tkey_make(&k4, A0, 1, A1, "aborted");
    tval_init(&v1, 1);
    tval_init(&v2, 2);
    args = cancel_args(cm);
    args.key.ptr = "garbage on input is ignored";
    args.key.len = 5;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k1.pk, &args, key_done, &a, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k1.pk, 0, &v1.v, 0, 0), TFRDV_OK);
    TT_CHECK_STR(a.key, k1.buf);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k2.pk, 0, &v2.v, 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k2.pk, 0, key_done, &b, 0), TFRDV_OK);
    TT_CHECK_STR(b.key, k2.buf);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k3.pk, &args, key_done, &c, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k4.pk, 0, key_done, &d, 0), TFRDV_OK);
    tfrdv_cancel_start(cm);
    TT_CHECK_EQ_INT(c.code, TFRDV_CANCELLED);
    TT_CHECK_STR(c.key, k3.buf);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(d.code, TFRDV_CANCELLED);
    TT_CHECK_STR(d.key, k4.buf);
    tfrdv_cancel_mgr_destroy(cm);
}
static void test_remote_recv_callback_gets_its_key(void) {
    world w;
    fx_key k;
    fx_value v;
    keyrec a;
    memset(&a, 0, sizeof a);
    world_up(&w, 0);
    key(&k, B0, INC_B, A0, "remote_key");
    TT_CHECK_EQ_INT(tfrdv_recv_async(w.ra, &k.pk, 0, key_done, &a, 0), TFRDV_OK);
    send_v(w.rb, &k, fx_value_init(&v, 20));
    TT_CHECK_EQ_INT(a.code, TFRDV_OK);
    TT_CHECK_STR(a.key, k.buf);
    world_down(&w);
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_d1_pending_callback_destroys_the_rendezvous);
    TT_RUN(test_d1_mgr_pending_callback_destroys_the_manager);
    TT_RUN(test_d2_copy_pending_at_last_unref_neither_frees_nor_blocks);
    TT_RUN(test_d3_value_after_timed_out_remote_recv_is_kept);
    TT_RUN(test_d3_value_after_call_deadline_or_cancel_is_kept);
    TT_RUN(test_d4_cleanup_all_and_destroy_need_no_memory);
    TT_RUN(test_d6_d7_hooks_run_outside_library_locks);
    TT_RUN(test_d8_memory_returns_after_a_burst_and_steady_state_allocates_nothing);
    TT_RUN(test_d8_default_gives_back_memory_after_a_small_burst);
    TT_RUN(test_d8_free_max_negative_keeps_nothing);
    TT_RUN(test_d8_key_length_is_capped);
    TT_RUN(test_d8_channel_refuses_keys_over_2g);
    TT_RUN(test_d8_deferred_requests_are_capped_and_their_memory_returns);
    TT_RUN(test_d8_refused_requests_leave_no_steps_behind);
    TT_RUN(test_table_clustered_hashes_wrap_and_delete_in_random_order);
    TT_RUN(test_response_cache_is_keyed_by_request_id_only);
    TT_RUN(test_destroy_of_a_found_step_aborts_it_but_the_table_keeps_it);
    TT_RUN(test_find_after_cleanup_creates_the_step_again_and_drops_its_tombstone);
    TT_RUN(test_dedup_window_and_call_free_list_can_be_turned_off);
    TT_RUN(test_cancel_mgr_reset_makes_a_manager_reusable);
    TT_RUN(test_cancel_mgr_reset_refuses_while_nodes_are_registered);
    TT_RUN(test_withdraw_local_request_keeps_the_later_value_and_frees_its_id);
    TT_RUN(test_withdraw_deferred_request);
    TT_RUN(test_peer_chosen_ids_do_not_pile_into_one_bucket);
    TT_RUN(test_withdraw_deferred_requests_in_shuffled_order_serves_the_rest_in_order);
    TT_RUN(test_withdraw_with_an_already_cancelled_manager);
    TT_RUN(test_withdraw_a_retry_waiting_on_the_cache_entry);
    TT_RUN(test_withdraw_races_send_abort_and_cleanup);
    TT_RUN(test_step_requested_hook_races_the_producer);
    TT_RUN(test_withdraw_races_expiry_and_cleanup_of_a_deferred_request);
    TT_RUN(test_mgr_ref_keeps_a_destroyed_manager_safe_for_server_threads);
    TT_RUN(test_call_deadline_is_visible_to_the_provider);
    TT_RUN(test_serve_callback_gets_the_senders_args_also_from_the_cache);
    TT_RUN(test_trace_hook_reports_local_fetch_and_serve);
    TT_RUN(test_no_trace_hook_means_no_clock_reads_on_transfers);
    TT_RUN(test_recv_callback_gets_its_key_on_every_path);
    TT_RUN(test_remote_recv_callback_gets_its_key);
    TT_CHECK_EQ_INT(tt_asserts, 0);
    return TT_MAIN_END();
}
