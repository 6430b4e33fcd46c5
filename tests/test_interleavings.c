/* test_interleavings.c - exactly-once and memory safety under the thread interleavings a
   scheduler may pick. Each test is deterministic: it forces the racy interleaving with a hook
   (sync hooks that act on a given unlock, a transport that acts inside start_call, a fake
   clock), then checks the contract. (They began as regressions for bugs a code review found.) */
#define _POSIX_C_SOURCE 200809L
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define WA "/job:a/replica:0/task:0"
#define WB "/job:b/replica:0/task:0"
#define A0 WA "/device:CPU:0"
#define B0 WB "/device:CPU:0"
#define INC_A 0xa1u
#define INC_B 0xb7u

static void sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, 0);
}

/* =============================================================================================
   Sync hooks whose handles survive destroy (marked dead, freed at the end of the test), so that
   an operation on a destroyed mutex/event is counted instead of being undefined behaviour; and
   an optional action run right after one chosen mutex is unlocked.
   ============================================================================================= */
typedef struct rv_handle {
    struct rv_handle* all_next;
    int dead, is_event;
    pthread_mutex_t m;
    pthread_cond_t c;
    unsigned count;
} rv_handle;
typedef struct rv_sync {
    pthread_mutex_t list_mu;
    rv_handle* all;
    rv_handle* last_mutex;      /* the mutex created last */
    long use_after_destroy;     /* lock/unlock/wait/signal on a destroyed handle */
    rv_handle* hook_mutex;      /* after this mutex is unlocked once, run hook_fn (then disarm) */
    void (*hook_fn)(void* ctx);
    void* hook_ctx;
    int waits;                  /* event waits started (atomic) */
    int destroyed_events;       /* atomic */
    int wait_then_linger;       /* after a wait returns, linger until an event was destroyed */
} rv_sync;
static rv_handle* rv_new(rv_sync* s, int is_event) {
    rv_handle* h = (rv_handle*)calloc(1, sizeof *h);
    if (!h) return 0;
    h->is_event = is_event;
    pthread_mutex_init(&h->m, 0);
    pthread_cond_init(&h->c, 0);
    pthread_mutex_lock(&s->list_mu);
    h->all_next = s->all;
    s->all = h;
    if (!is_event) s->last_mutex = h;
    pthread_mutex_unlock(&s->list_mu);
    return h;
}
static int rv_mutex_init(void* u, void** m) {
    rv_handle* h = rv_new((rv_sync*)u, 0);
    *m = h;
    return h ? 0 : -1;
}
static void rv_bad(rv_sync* s) { __atomic_add_fetch(&s->use_after_destroy, 1, __ATOMIC_SEQ_CST); }
static void rv_mutex_destroy(void* u, void* m) {
    rv_handle* h = (rv_handle*)m;
    (void)u;
    if (h) __atomic_store_n(&h->dead, 1, __ATOMIC_SEQ_CST);
}
static void rv_lock(void* u, void* m) {
    rv_handle* h = (rv_handle*)m;
    if (__atomic_load_n(&h->dead, __ATOMIC_SEQ_CST)) { rv_bad((rv_sync*)u); return; }
    pthread_mutex_lock(&h->m);
}
static void rv_unlock(void* u, void* m) {
    rv_sync* s = (rv_sync*)u;
    rv_handle* h = (rv_handle*)m;
    if (__atomic_load_n(&h->dead, __ATOMIC_SEQ_CST)) { rv_bad(s); return; }
    pthread_mutex_unlock(&h->m);
    if (s->hook_mutex == h && s->hook_fn) {
        void (*fn)(void*) = s->hook_fn;
        s->hook_fn = 0; /* once */
        s->hook_mutex = 0;
        fn(s->hook_ctx);
    }
}
static int rv_event_init(void* u, void** e) {
    rv_handle* h = rv_new((rv_sync*)u, 1);
    *e = h;
    return h ? 0 : -1;
}
static void rv_event_destroy(void* u, void* e) {
    rv_handle* h = (rv_handle*)e;
    if (!h) return;
    __atomic_store_n(&h->dead, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&((rv_sync*)u)->destroyed_events, 1, __ATOMIC_SEQ_CST);
}
static int rv_event_wait(void* u, void* e, int64_t timeout_ns) {
    rv_sync* s = (rv_sync*)u;
    rv_handle* h = (rv_handle*)e;
    int ok = 1;
    struct timespec dl;
    if (__atomic_load_n(&h->dead, __ATOMIC_SEQ_CST)) { rv_bad(s); return 1; }
    __atomic_add_fetch(&s->waits, 1, __ATOMIC_SEQ_CST);
    if (timeout_ns >= 0) {
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += (time_t)(timeout_ns / 1000000000);
        dl.tv_nsec += (long)(timeout_ns % 1000000000);
        if (dl.tv_nsec >= 1000000000L) { dl.tv_sec++; dl.tv_nsec -= 1000000000L; }
    }
    pthread_mutex_lock(&h->m);
    while (h->count == 0) {
        if (timeout_ns < 0) pthread_cond_wait(&h->c, &h->m);
        else if (pthread_cond_timedwait(&h->c, &h->m, &dl) != 0 && h->count == 0) { ok = 0; break; }
    }
    if (ok) h->count--;
    pthread_mutex_unlock(&h->m);
    if (s->wait_then_linger) { /* let the waker run on (up to 300 ms) before we continue */
        int i;
        for (i = 0; i < 300 && !__atomic_load_n(&s->destroyed_events, __ATOMIC_SEQ_CST); i++) sleep_ms(1);
    }
    return ok;
}
static void rv_event_signal(void* u, void* e) {
    rv_handle* h = (rv_handle*)e;
    if (__atomic_load_n(&h->dead, __ATOMIC_SEQ_CST)) { rv_bad((rv_sync*)u); return; }
    pthread_mutex_lock(&h->m);
    h->count++;
    pthread_cond_signal(&h->c);
    pthread_mutex_unlock(&h->m);
}
static tfrdv_sync rv_table(rv_sync* s) {
    tfrdv_sync t;
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->list_mu, 0);
    t.user = s;
    t.mutex_init = rv_mutex_init;
    t.mutex_destroy = rv_mutex_destroy;
    t.mutex_lock = rv_lock;
    t.mutex_unlock = rv_unlock;
    t.event_init = rv_event_init;
    t.event_destroy = rv_event_destroy;
    t.event_wait = rv_event_wait;
    t.event_signal = rv_event_signal;
    return t;
}
static void rv_end(rv_sync* s) {
    while (s->all) {
        rv_handle* h = s->all;
        s->all = h->all_next;
        pthread_cond_destroy(&h->c);
        pthread_mutex_destroy(&h->m);
        free(h);
    }
    pthread_mutex_destroy(&s->list_mu);
}

/* a quarantining allocator: frees are deferred to the end of the test, so reading an object after
   the library freed it is not a crash (the tests detect it through the sync hooks instead) */
typedef struct q_alloc {
    pthread_mutex_t mu;
    void* held[64];
    int n;
} q_alloc;
static void* q_alloc_fn(void* u, size_t n) { (void)u; return malloc(n); }
static void q_free_fn(void* u, void* p, size_t n) {
    q_alloc* q = (q_alloc*)u;
    (void)n;
    pthread_mutex_lock(&q->mu);
    if (q->n < 64) q->held[q->n++] = p;
    else free(p);
    pthread_mutex_unlock(&q->mu);
}
static void q_end(q_alloc* q) {
    while (q->n) free(q->held[--q->n]);
    pthread_mutex_destroy(&q->mu);
}

/* =============================================================================================
   Bug 1: tfrdv__serve_finish publishes the answer in the response cache (e->finished, e->value)
   and drops mgr->mu BEFORE taking the references it hands to the waiters and to the request
   itself. An ack (tfrdv_mgr_ack) or a step cleanup on another thread in that window frees the
   entry and releases the cache's (only) reference: the serve callback then gets a released
   value, and the final release never runs the hook (or runs it twice).
   ============================================================================================= */
typedef struct ack_ctx {
    tfrdv_mgr* m;
    int64_t rid;
} ack_ctx;
static void do_ack(void* p) {
    ack_ctx* a = (ack_ctx*)p;
    tfrdv_mgr_ack(a->m, a->rid); /* as another thread would, right after serve_finish unlocked */
}
typedef struct serve_probe {
    fx_serve s;
    fx_value* v;
    int released_at_done;
} serve_probe;
static void probe_serve_done(void* u, const tfrdv_status* st, const tfrdv_args* sa, tfrdv_value* v, int dead) {
    serve_probe* p = (serve_probe*)u;
    p->released_at_done = fx_released(p->v);
    fx_serve_done(&p->s, st, sa, v, dead);
}
static void test_serve_finish_takes_its_references_before_the_cache_entry_can_be_acked(void) {
    rv_sync ss;
    tfrdv_sync sync = rv_table(&ss);
    tfrdv_mgr_config c = tfrdv_mgr_config_init();
    tfrdv_mgr* m;
    tfrdv_rendezvous* r = 0;
    rv_handle* mgr_mu;
    fx_key k;
    fx_value v;
    serve_probe p;
    ack_ctx ack;
    c.hooks.sync = &sync;
    c.worker_name = WB;
    c.incarnation = INC_B;
    c.response_cache = 1;
    m = mk(&c);
    TT_CHECK(m != 0);
    if (!m) return;
    mgr_mu = ss.last_mutex; /* tfrdv_mgr_create initialises exactly one mutex: mgr->mu */
    key(&k, B0, INC_B, A0, "cached");
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 70, &r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, 0), TFRDV_OK);
    memset(&p, 0, sizeof p);
    p.v = &v;
    fx_value_init(&v, 7);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 70, k.buf, k.len, 42, 0, probe_serve_done, &p), TFRDV_OK);
    TT_CHECK_EQ_INT(p.s.calls, 0); /* waits for the send */
    /* the next unlock of mgr->mu on this thread is serve_finish's, after it published the answer */
    ack.m = m;
    ack.rid = 42;
    ss.hook_ctx = &ack;
    ss.hook_mutex = mgr_mu;
    ss.hook_fn = do_ack;
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, &v.v, 0, 0), TFRDV_OK);
    TT_CHECK(ss.hook_fn == 0); /* the ack ran */
    TT_CHECK_EQ_INT(p.s.calls, 1);
    TT_CHECK_EQ_INT(p.s.st.code, TFRDV_OK);
    TT_CHECK(p.s.value_ptr == &v.v);
    /* the serve callback owns a live reference: nothing may have released the value yet */
    TT_CHECK_EQ_INT(p.released_at_done, 0);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(fx_released(&v), 1); /* exactly once, after the callback released it */
    TT_CHECK_EQ_INT(ss.use_after_destroy, 0);
    rv_end(&ss);
}

/* =============================================================================================
   A scripted transport: records each call by its edge name ("a", "b", "c"), counts start_call
   per (edge, attempt), optionally fails attempt 0 with UNAVAILABLE (-> BACKOFF) and optionally
   runs an action inside a given start. Calls left pending are finished by st_finish_all.
   ============================================================================================= */
typedef struct st_transport {
    tfrdv_call* pending[3];   /* by edge 'a'..'c': started and not finished by us */
    int starts[3][4];         /* [edge][attempt] */
    int cancels[3];
    int fail_first[3];        /* attempt 0 finishes UNAVAILABLE inside start_call */
    int action_edge, action_attempt;
    void (*action)(void* ctx);
    void* action_ctx;
} st_transport;
static int st_edge(tfrdv_call* call) {
    tfrdv_str k = tfrdv_call_key(call);
    tfrdv_parsed_key pk;
    if (tfrdv_key_parse(k.ptr, k.len, &pk, 0) != TFRDV_OK || pk.edge_name.len != 1) return 0;
    return pk.edge_name.ptr[0] - 'a';
}
static void st_start(void* u, tfrdv_call* call) {
    st_transport* t = (st_transport*)u;
    int e = st_edge(call), at = tfrdv_call_attempt(call);
    if (e < 0 || e > 2) e = 0;
    if (at < 4) t->starts[e][at]++;
    if (at == 0 && t->fail_first[e]) {
        tfrdv_call_finish(call, TFRDV_UNAVAILABLE, "scripted: try again", 0, 0);
        return;
    }
    t->pending[e] = call;
    if (t->action && e == t->action_edge && at == t->action_attempt) {
        void (*fn)(void*) = t->action;
        t->action = 0;
        fn(t->action_ctx);
    }
}
static void st_cancel(void* u, tfrdv_call* call) {
    st_transport* t = (st_transport*)u;
    int e = st_edge(call);
    if (e >= 0 && e <= 2) t->cancels[e]++;
    /* like a network transport: the answer (CANCELLED) comes later, from st_finish_all */
}
static void st_finish_all(st_transport* t) {
    int e;
    for (e = 0; e < 3; e++) {
        tfrdv_call* c = t->pending[e];
        t->pending[e] = 0;
        if (c) tfrdv_call_finish(c, TFRDV_CANCELLED, "scripted: cancelled", 0, 0);
    }
}
static tfrdv_transport st_vtable(st_transport* t) {
    tfrdv_transport x;
    memset(&x, 0, sizeof x);
    x.user = t;
    x.start_call = st_start;
    x.cancel_call = st_cancel;
    return x;
}

/* =============================================================================================
   Bug 2: tfrdv_mgr_expire collects the calls to retry on a list threaded through call->action
   while they stay linked in r->calls, then walks that list after dropping every lock. A
   concurrent abort (tfrdv__remote_abort) takes every linked call and threads ITS list through
   the same call->action field: expire then follows abort's links and calls tfrdv__call_start on
   a call that is not being retried (a second start_call for the same attempt, an unmatched busy
   decrement: the call is never recycled, the step rendezvous and the manager leak).
   ============================================================================================= */
static void* abort_thread(void* p) {
    tfrdv_abort((tfrdv_rendezvous*)p, TFRDV_ABORTED, "Step 9 cancelled by the test");
    return 0;
}
static void abort_on_other_thread(void* p) {
    pthread_t th;
    pthread_create(&th, 0, abort_thread, p);
    pthread_join(th, 0);
}
static void test_expire_retry_list_survives_a_concurrent_abort(void) {
    fx_alloc a = {0};
    st_transport t;
    tfrdv_mgr_config c;
    tfrdv_mgr* m;
    tfrdv_rendezvous* r = 0;
    fx_key ka, kb, kc;
    fx_recv ra, rb, rc;
    memset(&t, 0, sizeof t);
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    memset(&rc, 0, sizeof rc);
    fx_set_now(1000);
    c = fx_mgr_config(WA, INC_A, &a);
    c.transport = st_vtable(&t);
    c.call_max_retries = 1;
    c.retry_backoff_ns = 10;
    m = mk(&c);
    TT_CHECK(m != 0);
    if (!m) return;
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 9, &r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, 0), TFRDV_OK);
    key(&ka, B0, INC_B, A0, "a");
    key(&kb, B0, INC_B, A0, "b");
    key(&kc, B0, INC_B, A0, "c");
    t.fail_first[0] = t.fail_first[1] = 1;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, 0, fx_recv_done, &ra, 0), TFRDV_OK); /* -> BACKOFF */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &kb.pk, 0, fx_recv_done, &rb, 0), TFRDV_OK); /* -> BACKOFF */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &kc.pk, 0, fx_recv_done, &rc, 0), TFRDV_OK); /* in flight */
    TT_CHECK_EQ_INT(t.starts[2][0], 1);
    /* expire retries a and b; while the first retry's start_call runs, another thread aborts */
    t.action_edge = 0;
    t.action_attempt = 1;
    t.action = abort_on_other_thread;
    t.action_ctx = r;
    tfrdv_mgr_expire(m, 1010);
    TT_CHECK(t.action == 0); /* the abort ran */
    TT_CHECK_EQ_INT(t.starts[0][1], 1);
    TT_CHECK_EQ_INT(t.starts[1][1], 1);
    TT_CHECK_EQ_INT(t.starts[2][0], 1); /* c was never due for a retry: exactly one start */
    TT_CHECK_EQ_INT(ra.calls, 1);
    TT_CHECK_EQ_INT(rb.calls, 1);
    TT_CHECK_EQ_INT(rc.calls, 1);
    TT_CHECK_EQ_INT(rc.st.code, TFRDV_ABORTED);
    st_finish_all(&t);
    TT_CHECK_EQ_INT(stats(m).calls_in_flight, 0); /* every call recycled */
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* =============================================================================================
   Bug 3: tfrdv_cancel_mgr_destroy from inside one of the manager's own callbacks defers the free
   to the end of tfrdv_cancel_start, which then frees without waiting for threads blocked in
   tfrdv_cancel_deregister on the running node (cm->users). The non-deferred destroy does wait
   for them. The woken deregisterer then relocks cm->mu of a freed manager.
   ============================================================================================= */
typedef struct cmx {
    tfrdv_cancel_mgr* cm;
    tfrdv_cancel_node node;
    rv_sync* ss;
    volatile int running;
    int dereg_result;
} cmx;
static void cmx_cb(void* p) {
    cmx* x = (cmx*)p;
    int i;
    __atomic_store_n(&x->running, 1, __ATOMIC_SEQ_CST);
    /* until the other thread blocks in deregister (its event wait), at most 2 s */
    for (i = 0; i < 2000 && !__atomic_load_n(&x->ss->waits, __ATOMIC_SEQ_CST); i++) sleep_ms(1);
    tfrdv_cancel_mgr_destroy(x->cm); /* from inside its own callback: deferred */
}
static void* cmx_start_thread(void* p) {
    tfrdv_cancel_start(((cmx*)p)->cm);
    return 0;
}
static void test_cancel_mgr_destroyed_in_callback_waits_for_a_blocked_deregister(void) {
    rv_sync ss;
    tfrdv_sync sync = rv_table(&ss);
    q_alloc q;
    tfrdv_hooks h;
    cmx x;
    pthread_t th;
    int i;
    memset(&q, 0, sizeof q);
    pthread_mutex_init(&q.mu, 0);
    memset(&h, 0, sizeof h);
    h.sync = &sync;
    h.allocator.alloc_fn = q_alloc_fn;
    h.allocator.free_fn = q_free_fn;
    h.allocator.user = &q;
    memset(&x, 0, sizeof x);
    x.ss = &ss;
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&h, &x.cm, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_cancel_register(x.cm, &x.node, cmx_cb, &x), 1);
    ss.wait_then_linger = 1; /* the deregisterer, once woken, lets the callback's thread run on */
    pthread_create(&th, 0, cmx_start_thread, &x);
    for (i = 0; i < 2000 && !__atomic_load_n(&x.running, __ATOMIC_SEQ_CST); i++) sleep_ms(1);
    x.dereg_result = tfrdv_cancel_deregister(x.cm, &x.node); /* blocks: the callback runs */
    pthread_join(th, 0);
    TT_CHECK_EQ_INT(x.dereg_result, 0);
    /* nothing may lock, unlock, wait on or signal the manager's primitives after they are gone */
    TT_CHECK_EQ_INT(ss.use_after_destroy, 0);
    rv_end(&ss);
    q_end(&q);
}

/* =============================================================================================
   Bug 4: absolute deadlines are computed as now + a configured duration without saturation.
   The config accepts any non-negative duration, so a large one ("practically forever", e.g.
   INT64_MAX) overflows int64 (undefined behaviour; in practice a negative deadline) and the
   request/call expires at once.
   ============================================================================================= */
static void test_deferred_timeout_near_int64_max_does_not_expire_at_once(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c;
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s;
    memset(&s, 0, sizeof s);
    fx_set_now(1000);
    c = fx_mgr_config(WB, INC_B, &a);
    c.deferred_timeout_ns = INT64_MAX;
    m = mk(&c);
    TT_CHECK(m != 0);
    if (!m) return;
    key(&k, B0, INC_B, A0, "late");
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 5, k.buf, k.len, 0, 0, fx_serve_done, &s), TFRDV_OK);
    TT_CHECK_EQ_INT(s.calls, 0); /* deferred: step 5 is not initialised */
    tfrdv_mgr_expire(m, 2000);
    TT_CHECK_EQ_INT(s.calls, 0); /* 1 us later it must still wait */
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(s.calls, 1);
    FX_CHECK_EMPTY(&a);
}
static void test_call_timeout_near_int64_max_does_not_expire_at_once(void) {
    fx_alloc a = {0};
    st_transport t;
    tfrdv_mgr_config c;
    tfrdv_mgr* m;
    tfrdv_rendezvous* r = 0;
    fx_key k;
    fx_recv rc;
    memset(&t, 0, sizeof t);
    memset(&rc, 0, sizeof rc);
    fx_set_now(1000);
    c = fx_mgr_config(WA, INC_A, &a);
    c.transport = st_vtable(&t);
    c.call_timeout_ns = INT64_MAX;
    m = mk(&c);
    TT_CHECK(m != 0);
    if (!m) return;
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 3, &r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, 0), TFRDV_OK);
    key(&k, B0, INC_B, A0, "a");
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, fx_recv_done, &rc, 0), TFRDV_OK);
    tfrdv_mgr_expire(m, 2000);
    TT_CHECK_EQ_INT(rc.calls, 0); /* still in flight */
    TT_CHECK_EQ_INT(t.cancels[0], 0);
    if (t.pending[0]) tfrdv_call_finish(t.pending[0], TFRDV_OK, "", 0, 1);
    t.pending[0] = 0;
    TT_CHECK_EQ_INT(rc.calls, 1);
    st_finish_all(&t);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}
static void test_tombstone_ttl_near_int64_max_gives_a_sane_next_deadline(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c;
    tfrdv_mgr* m;
    int64_t next;
    fx_set_now(1000);
    c = fx_mgr_config(WB, INC_B, &a);
    c.tombstone_ttl_ns = INT64_MAX;
    m = mk(&c);
    TT_CHECK(m != 0);
    if (!m) return;
    tfrdv_mgr_cleanup(m, 77); /* a tombstone stamped at 1000 */
    next = tfrdv_mgr_expire(m, 2000);
    TT_CHECK(next >= 2000); /* "the next pending deadline": not in the past */
    TT_CHECK_EQ_INT(stats(m).tombstones, 1);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* =============================================================================================
   Bug 5 (doc): tfrdv_recv_async says a refused receive's reason "also goes to the logger hook";
   RESOURCE_EXHAUSTED from the local table (and the NULL-argument refusals) log nothing.
   ============================================================================================= */
typedef struct fail_alloc {
    int fail;
    long live;
} fail_alloc;
static void* fa_alloc(void* u, size_t n) {
    fail_alloc* f = (fail_alloc*)u;
    void* p;
    if (f->fail) return 0;
    p = malloc(n);
    if (p) f->live++;
    return p;
}
static void fa_free(void* u, void* p, size_t n) {
    (void)n;
    if (p) ((fail_alloc*)u)->live--;
    free(p);
}
/* =============================================================================================
   Bug 5: a deferred request withdrawn (its cancellation manager fired) while tfrdv_mgr_cleanup
   has unlinked its step but not yet aborted it. The withdrawal drops "the step only it made": it
   saw the step's references at table + its own (the cleanup's reference IS the former table's),
   "unlinked" the step by id and released the table's reference - which the cleanup releases too.
   The step was freed under the cleanup (tfrdv_abort on freed memory) or under the request's
   answer; and unlinking by id took a NEW step with the same id (made by a find meanwhile) out of
   the table. The hook runs the find and the cancellation right after cleanup drops mgr->mu.
   ============================================================================================= */
typedef struct wd_ctx {
    tfrdv_mgr* m;
    tfrdv_cancel_mgr* cm;
    tfrdv_rendezvous* again; /* step 5, found again after the cleanup unlinked it */
} wd_ctx;
static void wd_find_then_cancel(void* p) {
    wd_ctx* w = (wd_ctx*)p;
    TT_CHECK_EQ_INT(tfrdv_mgr_find(w->m, 5, &w->again, 0), TFRDV_OK);
    tfrdv_cancel_start(w->cm); /* withdraws the deferred request, on this thread */
}
static void test_withdrawn_deferred_request_leaves_a_step_being_cleaned_up_alone(void) {
    rv_sync ss;
    tfrdv_sync sync = rv_table(&ss);
    q_alloc q;
    tfrdv_mgr_config c = tfrdv_mgr_config_init();
    tfrdv_mgr* m;
    rv_handle* mgr_mu;
    fx_key k;
    fx_serve s;
    wd_ctx w;
    int64_t ids[4];
    memset(&q, 0, sizeof q);
    pthread_mutex_init(&q.mu, 0);
    c.hooks.sync = &sync;
    c.hooks.allocator.alloc_fn = q_alloc_fn; /* a freed step stays readable: counted, not a crash */
    c.hooks.allocator.free_fn = q_free_fn;
    c.hooks.allocator.user = &q;
    c.worker_name = WB;
    c.incarnation = INC_B;
    m = mk(&c);
    TT_CHECK(m != 0);
    if (!m) return;
    mgr_mu = ss.last_mutex; /* tfrdv_mgr_create initialises exactly one mutex: mgr->mu */
    memset(&w, 0, sizeof w);
    memset(&s, 0, sizeof s);
    w.m = m;
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&c.hooks, &w.cm, 0), TFRDV_OK);
    key(&k, B0, INC_B, A0, "deferred");
    /* step 5 was never initialised here: the request is deferred, and it made the step */
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 5, k.buf, k.len, 77, w.cm, fx_serve_done, &s), TFRDV_OK);
    TT_CHECK_EQ_INT(s.calls, 0);
    TT_CHECK_EQ_INT((int)tfrdv_mgr_steps(m, ids, 4), 1);
    ss.hook_ctx = &w;
    ss.hook_mutex = mgr_mu; /* the next unlock of mgr->mu is the cleanup's, after it unlinked step 5 */
    ss.hook_fn = wd_find_then_cancel;
    tfrdv_mgr_cleanup(m, 5);
    TT_CHECK(ss.hook_fn == 0); /* the find and the withdrawal ran */
    TT_CHECK_EQ_INT(s.calls, 1); /* answered once: withdrawn, or aborted by the cleanup */
    TT_CHECK(s.st.code == TFRDV_CANCELLED || s.st.code == TFRDV_ABORTED);
    /* the step found again is the table's: the withdrawal did not take it out */
    TT_CHECK(w.again != 0);
    TT_CHECK_EQ_INT((int)tfrdv_mgr_steps(m, ids, 4), 1);
    TT_CHECK_EQ_INT((int)ids[0], 5);
    /* nothing touched the cleaned-up step's primitives after it was freed */
    TT_CHECK_EQ_INT(ss.use_after_destroy, 0);
    if (w.again) tfrdv_unref(w.again);
    tfrdv_cancel_mgr_destroy(w.cm);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(ss.use_after_destroy, 0);
    rv_end(&ss);
    q_end(&q);
}

static int g_logs;
static void count_log(void* u, int level, const char* msg) {
    (void)u;
    (void)level;
    (void)msg;
    g_logs++;
}
static void test_recv_refused_for_memory_is_logged(void) {
    fail_alloc f = {0, 0};
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    tkey k;
    rcv x;
    cfg.hooks.allocator.alloc_fn = fa_alloc;
    cfg.hooks.allocator.free_fn = fa_free;
    cfg.hooks.allocator.user = &f;
    cfg.hooks.logger.fn = count_log;
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, 0), TFRDV_OK);
    tkey_make(&k, "/job:a/replica:0/task:0/device:CPU:0", 1, "/job:a/replica:0/task:0/device:CPU:1", "e");
    rcv_init(&x);
    g_logs = 0;
    f.fail = 1;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, rcv_done, &x, 0), TFRDV_RESOURCE_EXHAUSTED);
    f.fail = 0;
    TT_CHECK_EQ_INT(x.calls, 0);
    TT_CHECK(g_logs >= 1);
    g_logs = 0;
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(f.live, 0);
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_serve_finish_takes_its_references_before_the_cache_entry_can_be_acked);
    TT_RUN(test_expire_retry_list_survives_a_concurrent_abort);
    TT_RUN(test_cancel_mgr_destroyed_in_callback_waits_for_a_blocked_deregister);
    TT_RUN(test_deferred_timeout_near_int64_max_does_not_expire_at_once);
    TT_RUN(test_call_timeout_near_int64_max_does_not_expire_at_once);
    TT_RUN(test_tombstone_ttl_near_int64_max_gives_a_sane_next_deadline);
    TT_RUN(test_recv_refused_for_memory_is_logged);
    TT_RUN(test_withdrawn_deferred_request_leaves_a_step_being_cleaned_up_alone);
    return TT_MAIN_END();
}
