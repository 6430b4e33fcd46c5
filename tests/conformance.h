/* conformance.h - the transport conformance suite: the contract every tfrdv_transport keeps
   (tfrdv.h: CALLBACK RULES, TRANSPORTS, the provider contract at tfrdv_transport), checked
   against YOUR transport. Header-only, C99 and C++11, POSIX threads; it uses tt.h's checks and
   counters, so a test binary ends with tt.h's "N passed, N failed" line.

   Use: include tfrdv.h (with its implementation), your transport, tt.h and this file; fill a
   conf_transport and call conf_run(&t) from main, between TT_MAIN_BEGIN and TT_MAIN_END:

       static int my_make(conf_world* w, tfrdv_status* st) {
           (create your transport; then the two managers, with w->hooks, the names and:)
           mc.worker_name = w->server_name; mc.incarnation = w->server_incarnation;  -> w->server
           mc.worker_name = w->client_name; mc.call_timeout_ns = w->call_timeout_ns; -> w->client
           (the client's transport must reach the server; attach the server if yours needs it)
           return 1;   (0 and st: failed; the harness then calls destroy_transport and destroys
       }                the managers make set, so leave w consistent)
       conf_transport t = conf_transport_init("mine", my_make, my_destroy);
       t.flags = CONF_GIVES_BACK | CONF_WAIT;   (what your transport promises, see below)
       conf_run(&t);

   Every check runs in a fresh world (make, start step CONF_STEP on both managers, the check,
   teardown) and prints "[ OK ] conformance <check>: <transport>" or "[FAIL] ..." with the
   failing lines above it ("[SKIP] ..." when a flag says the transport does not promise it).
   `--filter sub` (tt.h) runs only the checks whose full name contains sub. A watchdog ends a
   check that hangs (120 s; TFRDV_CONF_WATCHDOG=seconds) with a FAIL line naming it; it uses
   SIGALRM.

   The harness runs one driver thread per world: it calls your poll hook (if any) and
   tfrdv_mgr_expire on both managers, so deadlines are enforced whether or not your transport
   drives them (tfrdv_transport.bind). Memory: hooks.allocator in w->hooks counts every block;
   give it to both managers and, if it takes one, to your transport: after teardown every block
   must be back (values the harness sends come from it too).

   The checks (each named in its output):
     basic_fetch     values, shapes, dtypes, a dead value, a zero-size value, a 300001-byte value,
                     per-key FIFO order
     exactly_once    240 receives racing 200 values sent from another thread, random cancels
                     (tfrdv_cancel_mgr) and short tfrdv_recv timeouts: every callback exactly once,
                     no value twice; with CONF_GIVES_BACK also no value lost: sent == received +
                     still buffered (drained afterwards), nothing left over. The seed is printed;
                     TFRDV_CONF_SEED=N replays its choices (not the threads' interleaving)
     exactly_once_deadlines
                     the same with call_timeout_ns 20 ms: call deadlines race too
     cancel          cancel before the value, twice, and after it: one callback each, the value
                     stays for the next receiver
     deadline        tfrdv_mgr_config.call_timeout_ns: DEADLINE_EXCEEDED exactly once, a value
                     sent afterwards reaches the next receiver
     destroy_transport_first, destroy_managers_first
                     teardown in either order with calls in flight: every call completes exactly
                     once, nothing hangs, every block comes back
     destroy_in_callback
                     destroy_transport from inside a receive callback: it returns, the other calls
                     complete exactly once (CONF_NO_DESTROY_IN_CALLBACK skips it)
     blocking_recv   tfrdv_recv for a value sent before and after; a timeout and a cancel while a
                     thread waits (lent to tfrdv_transport.wait with CONF_WAIT) complete it, and
                     the value stays
     drain           S sends 40 values and waits in tfrdv_mgr_drain while C takes them with
                     receives that give up at random (1 us .. 2 ms timeouts): the drain ends OK
                     only after C has every value, none lost to the cleanup (CONF_DRAINS)
     unknown_worker  a fetch from a worker the transport does not know completes with an error;
                     with CONF_PEER_INCARNATION tfrdv_mgr_peer_incarnation gives the server's
                     incarnation, and an error for the unknown worker

   Flags (what the transport promises; the default promises the least):
     CONF_GIVES_BACK        no value is ever lost: one whose receive gave up (cancel, timeout,
                            deadline) while its answer was on the way goes back to the serving
                            table (tfrdv_mgr_serve_return, a delivery receipt). Without it the
                            checks send a value only once the withdrawal reached the server (S
                            holds no waiting receiver), and exactly_once checks callbacks and
                            duplicates but not losses (tfrdv_grpc.h: a reply that reaches a client
                            that already gave up is dropped; TensorFlow aborts the step)
     CONF_WAIT              the vtable has a wait hook (the blocking checks say so in the log)
     CONF_PEER_INCARNATION  the vtable has peer_incarnation
     CONF_NO_DESTROY_IN_CALLBACK
                            destroy_transport must not be called from a receive callback
     CONF_DRAINS            the serving side reports each answer's fate (tfrdv_mgr_serve_ex with
                            TFRDV_SERVE_CONFIRMS: tfrdv_mgr_serve_delivered or
                            tfrdv_mgr_serve_return), so tfrdv_mgr_drain is exact
     CONF_DESTROY_LEAVES_CALLS
                            destroy_transport does not finish the calls in flight (they complete
                            when their rendezvous or manager goes); without it every call must
                            complete by the time destroy_transport returned (TRANSPORTS 5)
     CONF_UNORDERED         receives posted one after another may reach the server in another
                            order (one RPC each: gRPC streams); basic_fetch's receives-first FIFO
                            check then asks for each value once, not for posting order */
#ifndef TFRDV_CONFORMANCE_H
#define TFRDV_CONFORMANCE_H
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CONF_SERVER "/job:ps/replica:0/task:0"
#define CONF_CLIENT "/job:worker/replica:0/task:0"
#define CONF_SERVER_DEV CONF_SERVER "/device:CPU:0"
#define CONF_CLIENT_DEV CONF_CLIENT "/device:CPU:0"
#define CONF_UNKNOWN_DEV "/job:nobody/replica:0/task:7/device:CPU:0"
#define CONF_INCARNATION 0x5eed0c0ffee1ULL
#define CONF_STEP 17
#define CONF_SEC 1000000000LL

enum {
    CONF_GIVES_BACK = 1,
    CONF_WAIT = 2,
    CONF_PEER_INCARNATION = 4,
    CONF_NO_DESTROY_IN_CALLBACK = 8,
    CONF_DESTROY_LEAVES_CALLS = 16,
    CONF_DRAINS = 32,
    CONF_UNORDERED = 64
};

/* the counting allocator every world's hooks carry */
typedef struct conf_alloc {
    long live_blocks, live_bytes, bad_frees;
} conf_alloc;

typedef struct conf_world {
    /* set by the harness before make */
    const char* server_name;     /* CONF_SERVER */
    const char* client_name;     /* CONF_CLIENT */
    uint64_t server_incarnation; /* the server manager's tfrdv_mgr_config.incarnation */
    int64_t call_timeout_ns;     /* the client manager's tfrdv_mgr_config.call_timeout_ns */
    tfrdv_hooks hooks;           /* for both managers (and the transport, if it takes hooks) */
    const struct conf_transport* t;
    /* set by make */
    tfrdv_mgr* server; /* S: its tables answer the fetches */
    tfrdv_mgr* client; /* C: fetches from S through the transport */
    void* state;       /* yours: whatever make created, for destroy_transport and poll */
    /* the harness's */
    conf_alloc alloc;
    tfrdv_rendezvous *rs, *rc; /* step CONF_STEP on S and C */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, transport_gone, driver_started;
    pthread_t driver;
} conf_world;

typedef struct conf_transport {
    const char* name; /* in every output line */
    unsigned flags;   /* CONF_* */
    /* create the transport(s) and both managers (see the top of this file); 1 on success */
    int (*make)(conf_world* w, tfrdv_status* st);
    /* X_destroy every transport object make created (skip NULL ones). Called once per world:
       before the managers are destroyed, after them, or from inside a receive callback. */
    void (*destroy_transport)(conf_world* w);
    /* optional: drive a host-driven transport once (tfrdv_verbs_poll, a poll loop), briefly */
    void (*poll)(conf_world* w);
    void* user; /* yours; make sees it as w->t->user */
} conf_transport;

static conf_transport conf_transport_init(const char* name, int (*make)(conf_world*, tfrdv_status*),
                                          void (*destroy_transport)(conf_world*)) {
    conf_transport t;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.make = make;
    t.destroy_transport = destroy_transport;
    return t;
}

/* ---- small helpers ---- */
static void conf_sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, 0);
}
static void* conf_alloc_fn(void* u, size_t n) {
    conf_alloc* a = (conf_alloc*)u;
    size_t* p = (size_t*)malloc(n + 16);
    if (!p) return 0;
    p[0] = n;
    __atomic_add_fetch(&a->live_blocks, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&a->live_bytes, (long)n, __ATOMIC_SEQ_CST);
    return (char*)p + 16;
}
static void conf_free_fn(void* u, void* ptr, size_t n) {
    conf_alloc* a = (conf_alloc*)u;
    size_t* p;
    if (!ptr) return;
    p = (size_t*)(void*)((char*)ptr - 16);
    if (p[0] != n) __atomic_add_fetch(&a->bad_frees, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&a->live_bytes, (long)p[0], __ATOMIC_SEQ_CST);
    /* last: a transport may free its last block on its own thread after its destroy returned
       (destroyed from a callback on that thread); the world (and a) may go once this reaches 0 */
    __atomic_sub_fetch(&a->live_blocks, 1, __ATOMIC_SEQ_CST);
    free(p);
}
static long conf_live(conf_world* w) { return __atomic_load_n(&w->alloc.live_blocks, __ATOMIC_SEQ_CST); }

/* a key from S to C for edge (src: S's device unless given) */
static int conf_key(tfrdv_key* k, const char* src_dev, uint64_t inc, const char* edge) {
    tfrdv_frame_iter fi = {0, 0};
    tfrdv_status st;
    if (tfrdv_key_make(k, src_dev, inc, CONF_CLIENT_DEV, edge, fi, &st) == TFRDV_OK) return 1;
    printf("    key %s: %s\n", edge, st.msg);
    return 0;
}
/* a UINT64 value [n] whose elements are id, id+1, ... (n 0: zero size) */
static tfrdv_value* conf_val(conf_world* w, uint64_t id, int64_t n) {
    int64_t d[1];
    tfrdv_value* v;
    int64_t i;
    d[0] = n;
    v = tfrdv_value_new(&w->hooks.allocator, TFRDV_DT_UINT64, 1, d, 0, (uint64_t)n * 8u);
    if (v)
        for (i = 0; i < n; i++) ((uint64_t*)v->data)[i] = id + (uint64_t)i;
    return v;
}
static uint64_t conf_id(const tfrdv_value* v) {
    return v && v->dtype == TFRDV_DT_UINT64 && v->size >= 8 ? ((const uint64_t*)v->data)[0] : 0;
}
/* S sends value id (n elements) under edge; 1 on success */
static int conf_send(conf_world* w, const char* edge, uint64_t id, int64_t n) {
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_value* v = conf_val(w, id, n);
    if (!v || !conf_key(&k, CONF_SERVER_DEV, w->server_incarnation, edge)) {
        tfrdv_value_release(v);
        return 0;
    }
    if (tfrdv_send(w->rs, &k.parsed, 0, v, 0, &st) == TFRDV_OK) return 1;
    printf("    send %s: %s\n", edge, st.msg);
    tfrdv_value_release(v);
    return 0;
}
/* C's blocking receive of edge; returns its code, *id the value's first element */
static tfrdv_code conf_recv(conf_world* w, const char* edge, tfrdv_cancel_mgr* cm, int64_t timeout_ns, uint64_t* id) {
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_value* v = 0;
    tfrdv_args a;
    int dead = 0;
    tfrdv_code rc;
    memset(&a, 0, sizeof a);
    a.cancel = cm;
    *id = 0;
    if (!conf_key(&k, CONF_SERVER_DEV, w->server_incarnation, edge)) return TFRDV_INTERNAL;
    rc = tfrdv_recv(w->rc, &k.parsed, &a, timeout_ns, &v, &dead, &st);
    if (rc == TFRDV_OK) *id = conf_id(v);
    tfrdv_value_release(v);
    return rc;
}
/* S's buffered values of the step (tfrdv_pending SEND entries, counted) */
static void conf_count_sends(void* u, int64_t step, tfrdv_pending_kind kind, const char* key, size_t len, size_t n) {
    (void)step, (void)key, (void)len;
    if (kind == TFRDV_PENDING_SEND) *(size_t*)u += n;
}
static size_t conf_buffered(conf_world* w) {
    size_t n = 0;
    tfrdv_pending(w->rs, conf_count_sends, &n);
    return n;
}
static void conf_count_recvs(void* u, int64_t step, tfrdv_pending_kind kind, const char* key, size_t len, size_t n) {
    (void)step, (void)key, (void)len;
    if (kind == TFRDV_PENDING_RECV) *(size_t*)u += n;
}
/* waits (at most 5 s) until S holds n waiting receivers: the fetches reached the server. Not a
   check: a transport may queue requests elsewhere; it only makes the interesting order likely. */
static void conf_until_served(conf_world* w, size_t n) {
    int i;
    for (i = 0; i < 1000; i++) {
        size_t got = 0;
        tfrdv_pending(w->rs, conf_count_recvs, &got);
        if (got >= n) return;
        conf_sleep_ms(5);
    }
}

static int conf_send(conf_world* w, const char* edge, uint64_t id, int64_t n);
static tfrdv_code conf_recv(conf_world* w, const char* edge, tfrdv_cancel_mgr* cm, int64_t timeout_ns, uint64_t* id);
/* Without CONF_GIVES_BACK a receive that gave up keeps no promise for a value sent while its
   withdrawal is still on the way to the server (the answer may be taken and dropped by the client):
   the harness then fetches one value on another key first (whatever the receive sent before,
   request or cancel, went ahead of that fetch on an ordered connection) and waits (at most 5 s)
   until S holds no waiting receiver before it sends. */
static void conf_until_withdrawn(conf_world* w) {
    int i;
    uint64_t id;
    if (w->t->flags & CONF_GIVES_BACK) return;
    if (!conf_send(w, "withdrawn", 77, 1) || conf_recv(w, "withdrawn", 0, 10 * CONF_SEC, &id) != TFRDV_OK)
        printf("    the fetch after a withdrawal failed\n");
    for (i = 0; i < 1000; i++) {
        size_t got = 0;
        tfrdv_pending(w->rs, conf_count_recvs, &got);
        if (got == 0) return;
        conf_sleep_ms(5);
    }
}

/* ---- asynchronous receives, each recorded in a slot ---- */
typedef struct conf_slot {
    struct conf_rx* rx;
    int calls;
    tfrdv_code code;
    uint64_t id;
    int dead, has_value;
    tfrdv_cancel_mgr* cm;
    void (*then)(struct conf_slot* s); /* runs inside the callback, before it is recorded */
} conf_slot;
typedef struct conf_rx {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    conf_world* w;
} conf_rx;
static void conf_rx_init(conf_rx* x, conf_world* w) {
    memset(x, 0, sizeof *x);
    pthread_mutex_init(&x->mu, 0);
    pthread_cond_init(&x->cv, 0);
    x->w = w;
}
static void conf_rx_fini(conf_rx* x) {
    pthread_cond_destroy(&x->cv);
    pthread_mutex_destroy(&x->mu);
}
static void conf_on_recv(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    conf_slot* s = (conf_slot*)u;
    conf_rx* x = s->rx;
    (void)sa, (void)ra;
    if (s->then) s->then(s);
    pthread_mutex_lock(&x->mu);
    s->calls++;
    s->code = st->code;
    s->dead = dead;
    s->has_value = v != 0;
    s->id = conf_id(v);
    x->done++;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    tfrdv_value_release(v);
}
/* posts C's receive of edge into s (with cancellation manager s->cm, if any) */
static int conf_post(conf_rx* x, conf_slot* s, const char* src_dev, const char* edge) {
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_args a;
    memset(&a, 0, sizeof a);
    a.cancel = s->cm;
    s->rx = x;
    if (!conf_key(&k, src_dev, x->w->server_incarnation, edge)) return 0;
    if (tfrdv_recv_async(x->w->rc, &k.parsed, &a, conf_on_recv, s, &st) == TFRDV_OK) return 1;
    printf("    recv_async %s: %s\n", edge, st.msg);
    return 0;
}
/* 1 when n callbacks ran within timeout_ns (then a short grace for extra ones is not needed:
   the slots count every call) */
static int conf_rx_wait(conf_rx* x, int n, int64_t timeout_ns) {
    struct timespec ts;
    int ok;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(timeout_ns / CONF_SEC);
    ts.tv_nsec += (long)(timeout_ns % CONF_SEC);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&x->mu);
    while (x->done < n)
        if (pthread_cond_timedwait(&x->cv, &x->mu, &ts) != 0) break;
    ok = x->done >= n;
    pthread_mutex_unlock(&x->mu);
    return ok;
}
static int conf_calls(conf_rx* x, conf_slot* s) {
    int c;
    pthread_mutex_lock(&x->mu);
    c = s->calls;
    pthread_mutex_unlock(&x->mu);
    return c;
}

/* ---- the world ---- */
static void* conf_driver(void* p) { /* poll + tfrdv_mgr_expire on both managers until stop */
    conf_world* w = (conf_world*)p;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        int poll = w->t->poll && !w->transport_gone;
        int64_t next;
        pthread_mutex_unlock(&w->mu);
        if (poll) w->t->poll(w);
        next = tfrdv_mgr_expire(w->client, tfrdv_mgr_now(w->client));
        tfrdv_mgr_expire(w->server, tfrdv_mgr_now(w->server));
        (void)next;
        conf_sleep_ms(poll ? 0 : 1);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return 0;
}
static void conf_stop_driver(conf_world* w) {
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_mutex_unlock(&w->mu);
    if (w->driver_started) pthread_join(w->driver, 0);
    if (w->driver_started) {
        tfrdv_mgr_unref(w->client);
        tfrdv_mgr_unref(w->server);
    }
    w->driver_started = 0;
}
/* destroy_transport, once per world */
static void conf_destroy_transport(conf_world* w) {
    int first;
    pthread_mutex_lock(&w->mu);
    first = !w->transport_gone;
    w->transport_gone = 1;
    pthread_mutex_unlock(&w->mu);
    if (first) w->t->destroy_transport(w);
}
static int conf_open(conf_world* w, const conf_transport* t, int64_t call_timeout_ns) {
    tfrdv_status st;
    memset(w, 0, sizeof *w);
    w->t = t;
    w->server_name = CONF_SERVER;
    w->client_name = CONF_CLIENT;
    w->server_incarnation = CONF_INCARNATION;
    w->call_timeout_ns = call_timeout_ns;
    w->hooks.allocator.alloc_fn = conf_alloc_fn;
    w->hooks.allocator.free_fn = conf_free_fn;
    w->hooks.allocator.user = &w->alloc;
    pthread_mutex_init(&w->mu, 0);
    pthread_cond_init(&w->cv, 0);
    memset(&st, 0, sizeof st);
    if (!t->make(w, &st) || !w->server || !w->client) {
        printf("    %s: make failed: %s\n", t->name, st.msg);
        return 0;
    }
    if (tfrdv_mgr_incarnation(w->server) != w->server_incarnation) {
        printf("    %s: make did not give the server manager w->server_incarnation\n", t->name);
        return 0;
    }
    if (tfrdv_mgr_start_step(w->server, CONF_STEP, &w->rs, &st) != TFRDV_OK ||
        tfrdv_mgr_start_step(w->client, CONF_STEP, &w->rc, &st) != TFRDV_OK) {
        printf("    start_step: %s\n", st.msg);
        return 0;
    }
    tfrdv_mgr_ref(w->client);
    tfrdv_mgr_ref(w->server);
    if (pthread_create(&w->driver, 0, conf_driver, w) != 0) {
        tfrdv_mgr_unref(w->client);
        tfrdv_mgr_unref(w->server);
        printf("    no driver thread\n");
        return 0;
    }
    w->driver_started = 1;
    return 1;
}
/* order 0: transport first; 1: managers first. Checks that every block came back. */
static void conf_close(conf_world* w, int order) {
    int i;
    conf_stop_driver(w);
    if (order == 1) {
        if (w->server) tfrdv_mgr_destroy(w->server);
        if (w->client) tfrdv_mgr_destroy(w->client);
    }
    conf_destroy_transport(w);
    if (w->rs) tfrdv_unref(w->rs);
    if (w->rc) tfrdv_unref(w->rc);
    if (order == 0) {
        if (w->server) tfrdv_mgr_destroy(w->server);
        if (w->client) tfrdv_mgr_destroy(w->client);
    }
    /* a transport may free its last blocks on its own thread just after destroy returned (the
       last reference dropped there): give it a moment, then every block must be back */
    for (i = 0; i < 400 && conf_live(w) != 0; i++) conf_sleep_ms(5);
    if (conf_live(w) != 0 || __atomic_load_n(&w->alloc.bad_frees, __ATOMIC_SEQ_CST))
        printf("    memory: %ld blocks (%ld bytes) not freed, %ld frees of the wrong size\n", conf_live(w),
               __atomic_load_n(&w->alloc.live_bytes, __ATOMIC_SEQ_CST), __atomic_load_n(&w->alloc.bad_frees, __ATOMIC_SEQ_CST));
    TT_CHECK_EQ_INT(conf_live(w), 0);
    TT_CHECK_EQ_INT(__atomic_load_n(&w->alloc.bad_frees, __ATOMIC_SEQ_CST), 0);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}
static void conf_no_double_finish(conf_world* w) {
    tfrdv_mgr_stats s;
    tfrdv_mgr_get_stats(w->client, &s);
    TT_CHECK_EQ_INT(s.double_finishes, 0);
}

/* ================================== the checks ================================== */

/* 1. values of every shape class arrive intact; FIFO per key */
static void conf_check_basic_fetch(conf_world* w) {
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_value* v = 0;
    int64_t dims[3] = {2, 3, 4};
    float f[24];
    int dead = 0, i;
    uint64_t id;
    for (i = 0; i < 24; i++) f[i] = (float)i * 0.5f;
    /* a float [2,3,4] */
    v = tfrdv_value_new(&w->hooks.allocator, TFRDV_DT_FLOAT, 3, dims, f, sizeof f);
    TT_CHECK(v && conf_key(&k, CONF_SERVER_DEV, w->server_incarnation, "float"));
    TT_CHECK_EQ_INT(tfrdv_send(w->rs, &k.parsed, 0, v, 0, &st), TFRDV_OK);
    v = 0;
    TT_CHECK_EQ_INT(tfrdv_recv(w->rc, &k.parsed, 0, 10 * CONF_SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && v->dtype == TFRDV_DT_FLOAT && v->rank == 3 && v->dims[0] == 2 && v->dims[1] == 3 && v->dims[2] == 4 &&
             v->size == sizeof f && memcmp(v->data, f, sizeof f) == 0 && !dead);
    tfrdv_value_release(v);
    v = 0;
    /* a dead value: no payload */
    TT_CHECK(conf_key(&k, CONF_SERVER_DEV, w->server_incarnation, "dead"));
    TT_CHECK_EQ_INT(tfrdv_send(w->rs, &k.parsed, 0, 0, 1, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv(w->rc, &k.parsed, 0, 10 * CONF_SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(dead);
    tfrdv_value_release(v);
    v = 0;
    dead = 0;
    /* a zero-size value [0], and a scalar */
    TT_CHECK(conf_send(w, "empty", 0, 0));
    TT_CHECK(conf_key(&k, CONF_SERVER_DEV, w->server_incarnation, "empty"));
    TT_CHECK_EQ_INT(tfrdv_recv(w->rc, &k.parsed, 0, 10 * CONF_SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 0 && v->rank == 1 && v->dims[0] == 0 && v->dtype == TFRDV_DT_UINT64 && !dead);
    tfrdv_value_release(v);
    v = tfrdv_value_new(&w->hooks.allocator, TFRDV_DT_INT32, 0, 0, 0, 4);
    if (v) *(int32_t*)v->data = -7;
    TT_CHECK(v && conf_key(&k, CONF_SERVER_DEV, w->server_incarnation, "scalar"));
    TT_CHECK_EQ_INT(tfrdv_send(w->rs, &k.parsed, 0, v, 0, &st), TFRDV_OK);
    v = 0;
    TT_CHECK_EQ_INT(tfrdv_recv(w->rc, &k.parsed, 0, 10 * CONF_SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && v->dtype == TFRDV_DT_INT32 && v->rank == 0 && v->size == 4 && *(const int32_t*)v->data == -7);
    tfrdv_value_release(v);
    v = 0;
    /* a larger value (beyond one frame of the socket transport), every element checked */
    TT_CHECK(conf_send(w, "large", 1000, 37501));
    TT_CHECK(conf_key(&k, CONF_SERVER_DEV, w->server_incarnation, "large"));
    TT_CHECK_EQ_INT(tfrdv_recv(w->rc, &k.parsed, 0, 10 * CONF_SEC, &v, &dead, &st), TFRDV_OK);
    if (v && v->size == 37501 * 8 && v->dims[0] == 37501) {
        int bad = 0;
        for (i = 0; i < 37501; i++) bad += ((const uint64_t*)v->data)[i] != 1000u + (uint64_t)i;
        TT_CHECK_EQ_INT(bad, 0);
    } else
        TT_CHECK(0);
    tfrdv_value_release(v);
    /* FIFO: five values sent before, five receives after; then receives first */
    for (i = 0; i < 5; i++) TT_CHECK(conf_send(w, "fifo", 100u + (uint64_t)i, 1));
    for (i = 0; i < 5; i++) {
        TT_CHECK_EQ_INT(conf_recv(w, "fifo", 0, 10 * CONF_SEC, &id), TFRDV_OK);
        TT_CHECK_EQ_INT(id, 100 + i);
    }
    {
        conf_rx x;
        conf_slot s[5];
        unsigned seen = 0;
        conf_rx_init(&x, w);
        memset(s, 0, sizeof s);
        for (i = 0; i < 5; i++) TT_CHECK(conf_post(&x, &s[i], CONF_SERVER_DEV, "fifo2"));
        conf_until_served(w, 5); /* all five wait on the server: matched in its order */
        for (i = 0; i < 5; i++) TT_CHECK(conf_send(w, "fifo2", 200u + (uint64_t)i, 1));
        TT_CHECK(conf_rx_wait(&x, 5, 10 * CONF_SEC));
        for (i = 0; i < 5; i++) {
            TT_CHECK_EQ_INT(s[i].calls, 1);
            TT_CHECK_EQ_INT(s[i].code, TFRDV_OK);
            if (!(w->t->flags & CONF_UNORDERED)) TT_CHECK_EQ_INT(s[i].id, 200 + i);
            else if (s[i].id >= 200 && s[i].id < 205) seen |= 1u << (unsigned)(s[i].id - 200);
        }
        if (w->t->flags & CONF_UNORDERED) TT_CHECK_EQ_INT(seen, 31u); /* each value once */
        conf_rx_fini(&x);
    }
    conf_no_double_finish(w);
}

/* 2. exactly once under racing cancels, timeouts and sends */
#define CONF_EO_KEYS 6
#define CONF_EO_ASYNC 240
#define CONF_EO_VALUES 200
#define CONF_EO_TIMED 60
typedef struct conf_eo {
    conf_world* w;
    conf_rx x;
    conf_slot s[CONF_EO_ASYNC];
    uint64_t seed;
    int sent[CONF_EO_KEYS];
    uint64_t timed_ids[CONF_EO_TIMED]; /* what the timed receives got (0: nothing) */
    int timed_ok;
} conf_eo;
static uint64_t conf_rand(uint64_t* s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static void conf_edge(char* buf, size_t cap, int k) { snprintf(buf, cap, "eo%d", k); }
static void* conf_eo_sender(void* p) {
    conf_eo* e = (conf_eo*)p;
    uint64_t r = e->seed ^ 0x9e3779b97f4a7c15ULL;
    int i;
    for (i = 0; i < CONF_EO_VALUES; i++) {
        int k = (int)(conf_rand(&r) % CONF_EO_KEYS);
        char edge[16];
        conf_edge(edge, sizeof edge, k);
        if (conf_send(e->w, edge, 1000000u * (uint64_t)(k + 1) + (uint64_t)i + 1u, 1)) e->sent[k]++;
        if (conf_rand(&r) % 8 == 0) conf_sleep_ms(1);
    }
    return 0;
}
static void* conf_eo_canceller(void* p) {
    conf_eo* e = (conf_eo*)p;
    uint64_t r = e->seed ^ 0x1234567ULL;
    int i;
    for (i = 0; i < CONF_EO_ASYNC / 2; i++) {
        tfrdv_cancel_start(e->s[conf_rand(&r) % CONF_EO_ASYNC].cm);
        if (conf_rand(&r) % 4 == 0) conf_sleep_ms(1);
    }
    return 0;
}
static void* conf_eo_timed(void* p) {
    conf_eo* e = (conf_eo*)p;
    uint64_t r = e->seed ^ 0xabcdefULL;
    int i;
    for (i = 0; i < CONF_EO_TIMED; i++) {
        char edge[16];
        uint64_t id = 0;
        tfrdv_code rc;
        conf_edge(edge, sizeof edge, (int)(conf_rand(&r) % CONF_EO_KEYS));
        rc = conf_recv(e->w, edge, 0, (int64_t)(conf_rand(&r) % 3000000u) + 200000, &id);
        if (rc == TFRDV_OK) e->timed_ids[i] = id;
        else if (rc != TFRDV_DEADLINE_EXCEEDED && rc != TFRDV_CANCELLED) {
            printf("    timed receive %s: %s\n", edge, tfrdv_code_str(rc));
            e->timed_ok = 0;
        }
    }
    return 0;
}
static int conf_u64_cmp(const void* a, const void* b) {
    uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
    return x < y ? -1 : x > y;
}
static void conf_check_exactly_once(conf_world* w) {
    conf_eo* e = (conf_eo*)calloc(1, sizeof *e);
    pthread_t ts, tc, tt;
    uint64_t r, got[CONF_EO_VALUES + 1];
    int i, n = 0, total = 0, k, ok = 1, dups = 0, others = 0, cancelled = 0, late = 0, timed = 0;
    int recvd[CONF_EO_KEYS];
    if (!e) {
        TT_CHECK(0);
        return;
    }
    e->w = w;
    e->timed_ok = 1;
    e->seed = getenv("TFRDV_CONF_SEED") ? (uint64_t)strtoull(getenv("TFRDV_CONF_SEED"), 0, 10)
                                        : 0x2545f4914f6cdd1dULL ^ (uint64_t)tfrdv_now_ns();
    if (!e->seed) e->seed = 1;
    printf("    seed %llu (TFRDV_CONF_SEED replays the receives' keys and the cancel order)\n", (unsigned long long)e->seed);
    r = e->seed;
    conf_rx_init(&e->x, w);
    for (i = 0; i < CONF_EO_ASYNC && ok; i++) /* all before the canceller starts */
        if (tfrdv_cancel_mgr_create(0, &e->s[i].cm, 0) != TFRDV_OK) ok = 0;
    for (i = 0; i < CONF_EO_ASYNC && ok; i++) {
        char edge[16];
        conf_edge(edge, sizeof edge, (int)(conf_rand(&r) % CONF_EO_KEYS));
        if (ok && !conf_post(&e->x, &e->s[i], CONF_SERVER_DEV, edge)) ok = 0;
        if (i == CONF_EO_ASYNC / 3 && ok) { /* the races start while receives are still being posted */
            ok = pthread_create(&ts, 0, conf_eo_sender, e) == 0 && pthread_create(&tc, 0, conf_eo_canceller, e) == 0 &&
                 pthread_create(&tt, 0, conf_eo_timed, e) == 0;
            if (!ok) printf("    no threads\n");
        }
    }
    TT_CHECK(ok);
    if (!ok) return; /* (leaks: the run is failing anyway) */
    pthread_join(ts, 0);
    pthread_join(tc, 0);
    pthread_join(tt, 0);
    for (i = 0; i < CONF_EO_ASYNC; i++) tfrdv_cancel_start(e->s[i].cm); /* the rest give up now */
    if (!conf_rx_wait(&e->x, CONF_EO_ASYNC, 30 * CONF_SEC)) printf("    only %d of %d receives completed\n", e->x.done, CONF_EO_ASYNC);
    TT_CHECK(e->x.done >= CONF_EO_ASYNC);
    TT_CHECK(e->timed_ok);
    memset(recvd, 0, sizeof recvd);
    for (i = 0; i < CONF_EO_ASYNC; i++) {
        conf_slot* s = &e->s[i];
        int c = conf_calls(&e->x, s);
        if (c != 1) printf("    receive %d: %d callbacks\n", i, c);
        TT_CHECK_EQ_INT(c, 1);
        cancelled += s->code == TFRDV_CANCELLED;
        late += s->code == TFRDV_DEADLINE_EXCEEDED;
        if (s->code == TFRDV_OK && s->has_value && n <= CONF_EO_VALUES) got[n++] = s->id;
        else if (s->code == TFRDV_OK) others++;
        else if (s->code != TFRDV_CANCELLED && s->code != TFRDV_DEADLINE_EXCEEDED) {
            printf("    receive %d: %s\n", i, tfrdv_code_str(s->code));
            others++;
        }
    }
    TT_CHECK_EQ_INT(others, 0);
    for (i = 0; i < CONF_EO_TIMED; i++)
        if (e->timed_ids[i] && n <= CONF_EO_VALUES) got[n++] = e->timed_ids[i], timed++;
    for (k = 0; k < CONF_EO_KEYS; k++) total += e->sent[k];
    printf("    %d receives: %d values, %d cancelled, %d past their deadline; %d timed receives: %d values\n", CONF_EO_ASYNC,
           n - timed, cancelled, late, CONF_EO_TIMED, timed);
    TT_CHECK_EQ_INT(total, CONF_EO_VALUES);
    /* drain: with give-back every value not received yet is still (or soon again) buffered */
    for (i = 0; i < n; i++) {
        uint64_t kk = got[i] / 1000000u;
        if (kk >= 1 && kk <= CONF_EO_KEYS) recvd[kk - 1]++;
    }
    if (w->t->flags & CONF_GIVES_BACK) {
        for (k = 0; k < CONF_EO_KEYS; k++) {
            char edge[16];
            conf_edge(edge, sizeof edge, k);
            int64_t until = tfrdv_now_ns() + 10 * CONF_SEC;
            while (recvd[k] < e->sent[k] && n <= CONF_EO_VALUES) {
                uint64_t id = 0;
                tfrdv_code rc = conf_recv(w, edge, 0, 5 * CONF_SEC, &id);
                /* with call deadlines a drain receive may time out too: it gives its value back */
                if (rc == TFRDV_DEADLINE_EXCEEDED && w->call_timeout_ns && tfrdv_now_ns() < until) continue;
                if (rc != TFRDV_OK) {
                    printf("    %s: %d values sent, %d received, the next drain receive: %s, %zu values buffered on S"
                           " (a value was lost)\n", edge, e->sent[k], recvd[k], tfrdv_code_str(rc), conf_buffered(w));
                    TT_CHECK(0);
                    break;
                }
                got[n++] = id;
                recvd[k]++;
            }
        }
        TT_CHECK_EQ_INT(n, CONF_EO_VALUES);
        TT_CHECK_EQ_INT(conf_buffered(w), 0); /* and nothing extra: no value twice in the table */
    }
    qsort(got, (size_t)n, sizeof got[0], conf_u64_cmp);
    for (i = 1; i < n; i++) dups += got[i] == got[i - 1];
    if (dups) printf("    %d values received twice\n", dups);
    TT_CHECK_EQ_INT(dups, 0);
    TT_CHECK(n <= CONF_EO_VALUES);
    printf("    %d values sent, %d received%s\n", CONF_EO_VALUES, n, (w->t->flags & CONF_GIVES_BACK) ? " (with the drain)" : "");
    conf_no_double_finish(w);
    for (i = 0; i < CONF_EO_ASYNC; i++) tfrdv_cancel_mgr_destroy(e->s[i].cm);
    conf_rx_fini(&e->x);
    free(e);
}

/* 3. cancel before the value, twice, after it: one callback, the value stays */
static void conf_check_cancel(conf_world* w) {
    conf_rx x;
    conf_slot s[3];
    uint64_t id;
    int i;
    conf_rx_init(&x, w);
    memset(s, 0, sizeof s);
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &s[i].cm, 0), TFRDV_OK);
    /* before: the fetch is on the server, then cancelled (twice); the value sent later stays */
    TT_CHECK(conf_post(&x, &s[0], CONF_SERVER_DEV, "before"));
    conf_until_served(w, 1);
    tfrdv_cancel_start(s[0].cm);
    tfrdv_cancel_start(s[0].cm);
    TT_CHECK(conf_rx_wait(&x, 1, 10 * CONF_SEC));
    TT_CHECK_EQ_INT(s[0].code, TFRDV_CANCELLED);
    conf_until_withdrawn(w);
    TT_CHECK(conf_send(w, "before", 11, 1));
    TT_CHECK_EQ_INT(conf_recv(w, "before", 0, 10 * CONF_SEC, &id), TFRDV_OK);
    TT_CHECK_EQ_INT(id, 11);
    /* cancelled at once, before the fetch could reach the server */
    TT_CHECK(conf_post(&x, &s[1], CONF_SERVER_DEV, "early"));
    tfrdv_cancel_start(s[1].cm);
    TT_CHECK(conf_rx_wait(&x, 2, 10 * CONF_SEC));
    TT_CHECK_EQ_INT(s[1].code, TFRDV_CANCELLED);
    conf_until_withdrawn(w);
    TT_CHECK(conf_send(w, "early", 12, 1));
    TT_CHECK_EQ_INT(conf_recv(w, "early", 0, 10 * CONF_SEC, &id), TFRDV_OK);
    TT_CHECK_EQ_INT(id, 12);
    /* after: the value arrived; a cancel afterwards changes nothing */
    TT_CHECK(conf_send(w, "after", 13, 1));
    TT_CHECK(conf_post(&x, &s[2], CONF_SERVER_DEV, "after"));
    TT_CHECK(conf_rx_wait(&x, 3, 10 * CONF_SEC));
    tfrdv_cancel_start(s[2].cm);
    tfrdv_cancel_start(s[2].cm);
    TT_CHECK_EQ_INT(s[2].code, TFRDV_OK);
    TT_CHECK_EQ_INT(s[2].id, 13);
    /* each exactly once: wait for what a late second callback would need (the next fetch over
       the same path completing proves earlier completions of this path have run) */
    TT_CHECK(conf_send(w, "fence", 14, 1));
    TT_CHECK_EQ_INT(conf_recv(w, "fence", 0, 10 * CONF_SEC, &id), TFRDV_OK);
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(conf_calls(&x, &s[i]), 1);
    conf_no_double_finish(w);
    for (i = 0; i < 3; i++) tfrdv_cancel_mgr_destroy(s[i].cm);
    conf_rx_fini(&x);
}

/* 4. the call deadline (the world's client has call_timeout_ns 150 ms) */
static void conf_check_deadline(conf_world* w) {
    conf_rx x;
    conf_slot s[2];
    uint64_t id;
    conf_rx_init(&x, w);
    memset(s, 0, sizeof s);
    TT_CHECK(conf_post(&x, &s[0], CONF_SERVER_DEV, "late"));
    TT_CHECK(conf_post(&x, &s[1], CONF_SERVER_DEV, "late2"));
    TT_CHECK(conf_rx_wait(&x, 2, 20 * CONF_SEC));
    TT_CHECK_EQ_INT(s[0].code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_EQ_INT(s[1].code, TFRDV_DEADLINE_EXCEEDED);
    /* the value sent after the deadline reaches the next receiver (within its own deadline) */
    conf_until_withdrawn(w);
    TT_CHECK(conf_send(w, "late", 21, 1));
    TT_CHECK_EQ_INT(conf_recv(w, "late", 0, 10 * CONF_SEC, &id), TFRDV_OK);
    TT_CHECK_EQ_INT(id, 21);
    TT_CHECK(conf_send(w, "late2", 22, 1));
    TT_CHECK_EQ_INT(conf_recv(w, "late2", 0, 10 * CONF_SEC, &id), TFRDV_OK);
    TT_CHECK_EQ_INT(id, 22);
    TT_CHECK_EQ_INT(conf_calls(&x, &s[0]), 1);
    TT_CHECK_EQ_INT(conf_calls(&x, &s[1]), 1);
    conf_no_double_finish(w);
    conf_rx_fini(&x);
}

/* 5. teardown with calls in flight (order 0: transport first, 1: managers first) */
#define CONF_TD_CALLS 8
static int conf_teardown_code(tfrdv_code c) {
    return c == TFRDV_OK || c == TFRDV_CANCELLED || c == TFRDV_UNAVAILABLE || c == TFRDV_ABORTED;
}
static void conf_check_teardown(conf_world* w, int order) {
    conf_rx x;
    conf_slot s[CONF_TD_CALLS];
    uint64_t id;
    int i;
    conf_rx_init(&x, w);
    memset(s, 0, sizeof s);
    TT_CHECK(conf_send(w, "warm", 1, 1)); /* connected, a fetch done */
    TT_CHECK_EQ_INT(conf_recv(w, "warm", 0, 10 * CONF_SEC, &id), TFRDV_OK);
    for (i = 0; i < CONF_TD_CALLS; i++) {
        char edge[16];
        snprintf(edge, sizeof edge, "td%d", i);
        TT_CHECK(conf_post(&x, &s[i], CONF_SERVER_DEV, edge));
    }
    conf_until_served(w, CONF_TD_CALLS);
    TT_CHECK(conf_send(w, "td0", 2, 1)); /* one of them may be answered during the teardown */
    if (order == 0 && !(w->t->flags & CONF_DESTROY_LEAVES_CALLS)) {
        /* the transport's destroy finishes its calls: the managers and steps are still there */
        conf_stop_driver(w);
        conf_destroy_transport(w);
        if (!conf_rx_wait(&x, CONF_TD_CALLS, 20 * CONF_SEC))
            printf("    %d of %d calls completed by the transport's destroy\n", x.done, CONF_TD_CALLS);
        TT_CHECK(x.done >= CONF_TD_CALLS);
    }
    conf_close(w, order);
    TT_CHECK(conf_rx_wait(&x, CONF_TD_CALLS, 20 * CONF_SEC));
    for (i = 0; i < CONF_TD_CALLS; i++) {
        TT_CHECK_EQ_INT(conf_calls(&x, &s[i]), 1);
        if (!conf_teardown_code(s[i].code)) printf("    call %d: %s\n", i, tfrdv_code_str(s[i].code));
        TT_CHECK(conf_teardown_code(s[i].code));
    }
    conf_rx_fini(&x);
}

/* 6. destroy_transport from inside a receive callback */
static void conf_destroy_from_cb(conf_slot* s) { conf_destroy_transport(s->rx->w); }
static void conf_check_destroy_in_callback(conf_world* w) {
    conf_rx x;
    conf_slot s[4];
    int i;
    conf_rx_init(&x, w);
    memset(s, 0, sizeof s);
    s[0].then = conf_destroy_from_cb;
    TT_CHECK(conf_post(&x, &s[0], CONF_SERVER_DEV, "boom"));
    for (i = 1; i < 4; i++) {
        char edge[16];
        snprintf(edge, sizeof edge, "other%d", i);
        TT_CHECK(conf_post(&x, &s[i], CONF_SERVER_DEV, edge));
    }
    conf_until_served(w, 4);
    TT_CHECK(conf_send(w, "boom", 31, 1));
    TT_CHECK(conf_rx_wait(&x, (w->t->flags & CONF_DESTROY_LEAVES_CALLS) ? 1 : 4, 20 * CONF_SEC));
    TT_CHECK_EQ_INT(s[0].code, TFRDV_OK);
    TT_CHECK_EQ_INT(s[0].id, 31);
    /* a fetch after the destroy fails at once (TRANSPORTS 4) */
    {
        uint64_t id;
        tfrdv_code rc = conf_recv(w, "after", 0, 10 * CONF_SEC, &id);
        if (rc != TFRDV_UNAVAILABLE) printf("    a fetch after the destroy: %s\n", tfrdv_code_str(rc));
        TT_CHECK_EQ_INT(rc, TFRDV_UNAVAILABLE);
    }
    conf_no_double_finish(w);
    conf_close(w, 0);
    TT_CHECK(conf_rx_wait(&x, 4, 20 * CONF_SEC));
    for (i = 0; i < 4; i++) TT_CHECK_EQ_INT(conf_calls(&x, &s[i]), 1);
    for (i = 1; i < 4; i++) {
        if (!conf_teardown_code(s[i].code)) printf("    call %d: %s\n", i, tfrdv_code_str(s[i].code));
        TT_CHECK(conf_teardown_code(s[i].code) && s[i].code != TFRDV_OK);
    }
    conf_rx_fini(&x);
}

/* 7. blocking receives: values before and after, a timeout and a cancel while the thread waits */
typedef struct conf_later {
    conf_world* w;
    const char* edge;
    uint64_t id;
    tfrdv_cancel_mgr* cm; /* cancel it instead of sending */
} conf_later;
static void* conf_later_fn(void* p) {
    conf_later* l = (conf_later*)p;
    conf_until_served(l->w, 1);
    if (l->cm) tfrdv_cancel_start(l->cm);
    else if (!conf_send(l->w, l->edge, l->id, 1)) printf("    later send failed\n");
    return 0;
}
static void conf_check_blocking_recv(conf_world* w) {
    uint64_t id;
    conf_later l;
    pthread_t th;
    tfrdv_cancel_mgr* cm = 0;
    if (w->t->flags & CONF_WAIT) printf("    (the waiting threads are lent to tfrdv_transport.wait)\n");
    TT_CHECK(conf_send(w, "b1", 41, 1));
    TT_CHECK_EQ_INT(conf_recv(w, "b1", 0, 10 * CONF_SEC, &id), TFRDV_OK);
    TT_CHECK_EQ_INT(id, 41);
    /* the value comes while the thread waits */
    memset(&l, 0, sizeof l);
    l.w = w;
    l.edge = "b2";
    l.id = 42;
    TT_CHECK(pthread_create(&th, 0, conf_later_fn, &l) == 0);
    TT_CHECK_EQ_INT(conf_recv(w, "b2", 0, 10 * CONF_SEC, &id), TFRDV_OK);
    TT_CHECK_EQ_INT(id, 42);
    pthread_join(th, 0);
    /* the timeout ends the wait; the value sent afterwards stays */
    TT_CHECK_EQ_INT(conf_recv(w, "b3", 0, 100000000, &id), TFRDV_DEADLINE_EXCEEDED);
    conf_until_withdrawn(w);
    TT_CHECK(conf_send(w, "b3", 43, 1));
    TT_CHECK_EQ_INT(conf_recv(w, "b3", 0, 10 * CONF_SEC, &id), TFRDV_OK);
    TT_CHECK_EQ_INT(id, 43);
    /* a cancel from another thread ends the wait; the value sent afterwards stays */
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm, 0), TFRDV_OK);
    l.edge = "b4";
    l.cm = cm;
    TT_CHECK(pthread_create(&th, 0, conf_later_fn, &l) == 0);
    TT_CHECK_EQ_INT(conf_recv(w, "b4", cm, 10 * CONF_SEC, &id), TFRDV_CANCELLED);
    pthread_join(th, 0);
    conf_until_withdrawn(w);
    TT_CHECK(conf_send(w, "b4", 44, 1));
    TT_CHECK_EQ_INT(conf_recv(w, "b4", 0, 10 * CONF_SEC, &id), TFRDV_OK);
    TT_CHECK_EQ_INT(id, 44);
    tfrdv_cancel_mgr_destroy(cm);
    conf_no_double_finish(w);
}

/* 8. a worker the transport does not know; the peer's incarnation */
static void conf_check_unknown_worker(conf_world* w) {
    conf_rx x;
    conf_slot s;
    tfrdv_status st;
    uint64_t inc = 0;
    conf_rx_init(&x, w);
    memset(&s, 0, sizeof s);
    TT_CHECK(conf_post(&x, &s, CONF_UNKNOWN_DEV, "nobody"));
    TT_CHECK(conf_rx_wait(&x, 1, 20 * CONF_SEC));
    printf("    a fetch from %s: %s\n", CONF_UNKNOWN_DEV, tfrdv_code_str(s.code));
    TT_CHECK(s.code != TFRDV_OK);
    TT_CHECK_EQ_INT(conf_calls(&x, &s), 1);
    if (w->t->flags & CONF_PEER_INCARNATION) {
        TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(w->client, CONF_SERVER, 10 * CONF_SEC, &inc, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(inc, w->server_incarnation);
        inc = 0;
        TT_CHECK(tfrdv_mgr_peer_incarnation(w->client, "/job:nobody/replica:0/task:7", 500000000, &inc, &st) != TFRDV_OK);
    }
    conf_no_double_finish(w);
    conf_rx_fini(&x);
}

/* ---- the runner ---- */
/* drain: C takes CONF_DR_N values with receives that give up at random; S drains meanwhile */
#define CONF_DR_N 40
typedef struct conf_dr {
    conf_world* w;
    int got, fails;
    char seen[CONF_DR_N + 1];
} conf_dr;
static void* conf_dr_taker(void* p) {
    conf_dr* d = (conf_dr*)p;
    uint64_t r = 0x9e3779b97f4a7c15ULL ^ (uint64_t)tfrdv_now_ns();
    int64_t until = tfrdv_now_ns() + 60 * CONF_SEC;
    while (d->got < CONF_DR_N && tfrdv_now_ns() < until) {
        uint64_t id = 0;
        /* most give up quickly (their answer may be on its way: it must come back), every
           fourth waits long enough */
        int64_t to = conf_rand(&r) % 4 == 0 ? CONF_SEC : 1000 + (int64_t)(conf_rand(&r) % 2000000);
        tfrdv_code rc = conf_recv(d->w, "drained", 0, to, &id);
        if (rc == TFRDV_OK && id >= 1 && id <= CONF_DR_N && !d->seen[id]) {
            d->seen[id] = 1;
            d->got++;
        } else if (rc != TFRDV_DEADLINE_EXCEEDED && rc != TFRDV_CANCELLED) {
            printf("    receive: %s (id %llu)\n", tfrdv_code_str(rc), (unsigned long long)id);
            if (++d->fails > 3) break;
        }
    }
    return 0;
}
static void conf_check_drain(conf_world* w) {
    conf_dr d;
    pthread_t th;
    tfrdv_status st;
    tfrdv_mgr_stats ms;
    tfrdv_code rc;
    uint64_t i;
    memset(&d, 0, sizeof d);
    d.w = w;
    for (i = 1; i <= CONF_DR_N; i++) TT_CHECK(conf_send(w, "drained", i, 1));
    TT_CHECK_EQ_INT(pthread_create(&th, 0, conf_dr_taker, &d), 0);
    rc = tfrdv_mgr_drain(w->server, CONF_STEP, 60 * CONF_SEC, &st);
    if (rc != TFRDV_OK) printf("    drain: %s %s\n", tfrdv_code_str(rc), st.msg);
    TT_CHECK_EQ_INT(rc, TFRDV_OK);
    pthread_join(th, 0);
    if (d.got != CONF_DR_N) printf("    C took %d of %d values (a value lost to the cleanup)\n", d.got, CONF_DR_N);
    TT_CHECK_EQ_INT(d.got, CONF_DR_N);
    TT_CHECK_EQ_INT(d.fails, 0);
    tfrdv_mgr_get_stats(w->server, &ms);
    TT_CHECK_EQ_INT(ms.steps_drained, 1);
    TT_CHECK_EQ_INT(ms.deliveries_unconfirmed, 0);
    conf_no_double_finish(w);
}

static const char* conf_running; /* for the watchdog */
static const char* conf_running_t;
static void conf_watchdog(int sig) {
    char line[256];
    int n;
    (void)sig;
    n = snprintf(line, sizeof line, "[FAIL] conformance %s: %s (hung: still running at the watchdog, TFRDV_CONF_WATCHDOG)\n", conf_running ? conf_running : "?",
                 conf_running_t ? conf_running_t : "?");
    if (n > 0 && write(1, line, (size_t)n) < 0) _exit(3);
    _exit(2);
}
/* runs check `name` in a fresh world; close_order -1: the check closes the world itself */
static void conf_one(const conf_transport* t, const char* name, void (*fn)(conf_world*), int64_t call_timeout_ns,
                     int close_order, const char* skip) {
    char full[160];
    conf_world* w;
    snprintf(full, sizeof full, "conformance %s: %s", name, t->name);
    tt_skip_why = skip;
    if (tt_filter && !strstr(full, tt_filter)) return;
    if (skip) {
        tt_skipped++;
        printf("[SKIP] %s (%s)\n", full, skip);
        fflush(stdout);
        return;
    }
    tt_cur = 0;
    conf_running = name;
    conf_running_t = t->name;
    signal(SIGALRM, conf_watchdog);
    alarm(getenv("TFRDV_CONF_WATCHDOG") ? (unsigned)atoi(getenv("TFRDV_CONF_WATCHDOG")) : 120u);
    w = (conf_world*)calloc(1, sizeof *w);
    if (!w) {
        TT_CHECK(0);
    } else if (!conf_open(w, t, call_timeout_ns)) {
        TT_CHECK(0);
        conf_close(w, 0);
    } else {
        fn(w);
        if (close_order >= 0) conf_close(w, close_order);
    }
    free(w);
    alarm(0);
    if (tt_cur) {
        tt_failed++;
        printf("[FAIL] %s\n", full);
    } else {
        tt_passed++;
        printf("[ OK ] %s\n", full);
    }
    fflush(stdout);
}
static void conf_check_teardown0(conf_world* w) { conf_check_teardown(w, 0); }
static void conf_check_teardown1(conf_world* w) { conf_check_teardown(w, 1); }
/* every check against t; returns the number that failed */
static int conf_run(const conf_transport* t) {
    int before = tt_failed;
    conf_one(t, "basic_fetch", conf_check_basic_fetch, 0, 0, 0);
    conf_one(t, "exactly_once", conf_check_exactly_once, 0, 0, 0);
    conf_one(t, "exactly_once_deadlines", conf_check_exactly_once, 20000000, 0, 0);
    conf_one(t, "cancel", conf_check_cancel, 0, 1, 0);
    conf_one(t, "deadline", conf_check_deadline, 150000000, 0, 0);
    conf_one(t, "destroy_transport_first", conf_check_teardown0, 0, -1, 0);
    conf_one(t, "destroy_managers_first", conf_check_teardown1, 0, -1, 0);
    conf_one(t, "destroy_in_callback", conf_check_destroy_in_callback, 0, -1,
             (t->flags & CONF_NO_DESTROY_IN_CALLBACK) ? "the transport does not promise it: CONF_NO_DESTROY_IN_CALLBACK" : 0);
    conf_one(t, "blocking_recv", conf_check_blocking_recv, 0, 1, 0);
    conf_one(t, "drain", conf_check_drain, 0, 0, (t->flags & CONF_DRAINS) ? 0 : "the transport does not report deliveries (CONF_DRAINS)");
    conf_one(t, "unknown_worker", conf_check_unknown_worker, 0, 0, 0);
    return tt_failed - before;
}
#endif
