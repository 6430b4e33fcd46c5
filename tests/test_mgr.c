/* test_mgr.c - the step manager: find-or-create, two-phase init, deferred requests and their
   deadline, cleanup and tombstones, introspection, the serving side (TensorFlow's
   RecvTensor checks, RecentRequestIds, the response cache), request ids, teardown and memory.
   Contracts: tfrdv.h (step manager, serving side, CALLBACK RULES) and TensorFlow's
   RpcRemoteRendezvous / RecvTensor checks (incarnation, RecentRequestIds, response cache).
   Time is a fake clock (fixtures.h): tests set it and call tfrdv_mgr_expire. */
#define _POSIX_C_SOURCE 200809L
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"
#include <pthread.h>

#define WA "/job:a/replica:0/task:0"
#define WB "/job:b/replica:0/task:0"
#define A0 WA "/device:CPU:0"
#define B0 WB "/device:CPU:0"
#define B1 WB "/device:CPU:1"
#define C0 "/job:c/replica:0/task:0/device:CPU:0"
#define INC_A 0xa1u
#define INC_B 0xb7u

/* managers A and B on one loopback, both on allocator a; returns tfrdv_loopback_create's code */
static tfrdv_code loopback_pair(fx_alloc* a, tfrdv_loopback** lb, tfrdv_mgr** ma, tfrdv_mgr** mb) {
    tfrdv_hooks h = fx_hooks(a);
    tfrdv_mgr_config ca = fx_mgr_config(WA, INC_A, a), cb = fx_mgr_config(WB, INC_B, a);
    tfrdv_code rc = tfrdv_loopback_create(&h, lb, 0);
    *ma = *mb = 0;
    if (rc != TFRDV_OK) return rc;
    ca.transport = tfrdv_loopback_transport(*lb);
    cb.transport = tfrdv_loopback_transport(*lb);
    *ma = mk(&ca);
    *mb = mk(&cb);
    tfrdv_loopback_register(*lb, WA, *ma, 0);
    tfrdv_loopback_register(*lb, WB, *mb, 0);
    return rc;
}
static tfrdv_rendezvous* step(tfrdv_mgr* m, int64_t id, int init) {
    tfrdv_rendezvous* r = 0;
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, id, &r, 0), TFRDV_OK);
    if (init && r) TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, 0), TFRDV_OK);
    return r;
}
static void serve(tfrdv_mgr* m, int64_t step_id, const fx_key* k, int64_t rid, fx_serve* s) {
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, step_id, k->buf, k->len, rid, 0, fx_serve_done, s), TFRDV_OK);
}

/* ---- pending-key collector ---- */
typedef struct pend_ent {
    int64_t step;
    int kind;
    char key[320];
    size_t count;
} pend_ent;
typedef struct pend {
    int n;
    pend_ent e[32];
} pend;
static void pend_fn(void* u, int64_t step_id, tfrdv_pending_kind kind, const char* k, size_t len, size_t count) {
    pend* p = (pend*)u;
    if (p->n >= 32 || len >= sizeof p->e[0].key) return;
    p->e[p->n].step = step_id;
    p->e[p->n].kind = (int)kind;
    memcpy(p->e[p->n].key, k, len);
    p->e[p->n].key[len] = 0;
    p->e[p->n].count = count;
    p->n++;
}
/* count reported for (step, kind, key), or -1 */
static long pend_find(const pend* p, int64_t step_id, int kind, const char* k) {
    int i;
    for (i = 0; i < p->n; i++)
        if (p->e[i].step == step_id && p->e[i].kind == kind && strcmp(p->e[i].key, k) == 0) return (long)p->e[i].count;
    return -1;
}

/* ============================================================================================
   find-or-create, refcount
   ============================================================================================ */
static void test_find_returns_same_rendezvous_per_step_and_counts_refs(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WA, INC_A, &a);
    tfrdv_mgr* m = mk(&c);
    tfrdv_rendezvous *r1, *r2, *r3, *r4;
    tfrdv_status st;
    long live_with_step;
    r1 = step(m, 5, 0);
    r2 = step(m, 5, 0);
    r3 = step(m, 6, 0);
    TT_CHECK(r1 && r1 == r2);
    TT_CHECK(r3 && r3 != r1);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 2);
    TT_CHECK_EQ_INT(stats(m).steps_created, 2);
    TT_CHECK_EQ_INT(stats(m).active_steps, 2);
    tfrdv_unref(r1);
    tfrdv_unref(r2);
    tfrdv_unref(r3);
    /* the table keeps its own reference: the same object is found again, nothing is created */
    r4 = step(m, 5, 0);
    TT_CHECK(r4 == r1);
    TT_CHECK_EQ_INT(stats(m).steps_created, 2);
    /* cleanup drops the table's reference; ours keeps the (aborted) object usable */
    live_with_step = fx_live(&a);
    tfrdv_mgr_cleanup(m, 5);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 1);
    TT_CHECK_EQ_INT(tfrdv_get_status(r4, &st), TFRDV_ABORTED);
    TT_CHECK_STR(st.msg, "Cleanup 5");
    TT_CHECK_EQ_INT(fx_live(&a), live_with_step);
    tfrdv_unref(r4); /* the last reference frees it */
    TT_CHECK(fx_live(&a) < live_with_step);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* TRANSPORTS: the loopback and its managers go in either order. Destroyed first, the loopback
   forgets its workers (a fetch through it fails UNAVAILABLE at once) and its memory goes with the
   last manager; destroyed last, as before. A failed tfrdv_loopback_add_worker takes nothing. */
static void test_loopback_and_its_managers_go_in_either_order(void) {
    int order;
    for (order = 0; order < 2; order++) {
        fx_alloc a = {0};
        tfrdv_loopback* lb;
        tfrdv_mgr *ma, *mb, *bad;
        tfrdv_mgr_config cbad = fx_mgr_config(WA, INC_A, &a);
        tfrdv_rendezvous *ra, *rb;
        fx_key k;
        fx_value v;
        fx_recv r;
        tfrdv_status st;
        memset(&r, 0, sizeof r);
        TT_CHECK_EQ_INT(loopback_pair(&a, &lb, &ma, &mb), TFRDV_OK);
        cbad.num_shards = -1;
        TT_CHECK_EQ_INT(tfrdv_loopback_add_worker(lb, "/job:x/replica:0/task:0", &cbad, &bad, &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK(bad == 0);
        { /* one vtable in one config, copied: each manager holds the loopback on its own */
            tfrdv_mgr_config c1 = fx_mgr_config("/job:y/replica:0/task:0", 1, &a), c2;
            tfrdv_mgr *m1, *m2;
            c1.transport = tfrdv_loopback_transport(lb);
            c2 = c1;
            c2.worker_name = "/job:y/replica:0/task:1";
            m1 = mk(&c1);
            m2 = mk(&c2);
            c2.num_shards = -1; /* refused: takes nothing */
            TT_CHECK_EQ_INT(tfrdv_mgr_create(&c2, &bad, &st), TFRDV_INVALID_ARGUMENT);
            tfrdv_mgr_destroy(m1);
            tfrdv_mgr_destroy(m2);
        }
        ra = step(ma, 5, 1);
        rb = step(mb, 5, 1);
        key(&k, B0, INC_B, A0, "order");
        if (order == 0) {
            tfrdv_loopback_destroy(lb);
            TT_CHECK_EQ_INT(tfrdv_send(rb, &k.pk, 0, fx_value_init(&v, 5), 0, 0), TFRDV_OK);
            TT_CHECK_EQ_INT(tfrdv_recv_async(ra, &k.pk, 0, fx_recv_done, &r), TFRDV_OK);
            TT_CHECK_EQ_INT(r.calls, 1);
            TT_CHECK_EQ_INT(r.st.code, TFRDV_UNAVAILABLE);
            TT_CHECK_CONTAINS(r.st.msg, "no worker registered as " WB);
        } else {
            TT_CHECK_EQ_INT(tfrdv_send(rb, &k.pk, 0, fx_value_init(&v, 5), 0, 0), TFRDV_OK);
            TT_CHECK_EQ_INT(tfrdv_recv_async(ra, &k.pk, 0, fx_recv_done, &r), TFRDV_OK);
            TT_CHECK(r.calls == 1 && r.st.code == TFRDV_OK && fx_recv_matches(&r, 5));
        }
        tfrdv_unref(ra);
        tfrdv_unref(rb);
        tfrdv_mgr_destroy(ma);
        tfrdv_mgr_destroy(mb);
        if (order == 1) tfrdv_loopback_destroy(lb);
        TT_CHECK_EQ_INT(fx_released(&v), 1);
        FX_CHECK_EMPTY(&a);
    }
}

static void test_find_argument_errors(void) {
    tfrdv_mgr_config c = fx_mgr_config(WA, INC_A, 0);
    tfrdv_mgr* m = mk(&c);
    tfrdv_rendezvous* r = (tfrdv_rendezvous*)&c; /* must be overwritten with NULL */
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_mgr_find(0, 1, &r, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK(r == 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 1, 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 0);
    tfrdv_mgr_destroy(m);
}

static int transport_destroys;
static void count_destroy(void* u) {
    (void)u;
    transport_destroys++;
}
static void noop_call(void* u, tfrdv_call* call) {
    (void)u;
    (void)call;
}
static void test_create_rejects_bad_config_without_leaks(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WA, INC_A, &a);
    tfrdv_mgr* m = 0;
    tfrdv_status st;
    transport_destroys = 0;
    c.worker_name = 0;
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&c, &m, &st), TFRDV_INVALID_ARGUMENT);
    c.worker_name = "/job:a"; /* not /job/replica/task */
    c.transport.start_call = noop_call;
    c.transport.cancel_call = noop_call;
    c.transport.destroy = count_destroy;
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&c, &m, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "/job:a");
    TT_CHECK_EQ_INT(transport_destroys, 0); /* a rejected config's transport is not ours */
    c.worker_name = WA "/device:CPU:0";
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&c, &m, &st), TFRDV_INVALID_ARGUMENT);
    c.worker_name = WA;
    c.transport.cancel_call = 0; /* start without cancel */
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&c, &m, &st), TFRDV_INVALID_ARGUMENT);
    c.transport.cancel_call = noop_call;
    c.tombstone_max = -1;
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&c, &m, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK(m == 0);
    TT_CHECK_EQ_INT(transport_destroys, 0);
    FX_CHECK_EMPTY(&a);
    /* a good config owns the transport: destroy() runs when the manager goes */
    c.tombstone_max = 0;
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&c, &m, &st), TFRDV_OK);
    TT_CHECK_STR(tfrdv_mgr_worker_name(m), WA);
    TT_CHECK_EQ_INT(tfrdv_mgr_incarnation(m), INC_A);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(transport_destroys, 1);
    FX_CHECK_EMPTY(&a);
}

/* 0 is the default in every field; TFRDV_OFF turns off the fields that name it; another negative
   value in a field that does not is refused naming the problem */
static void test_config_zero_is_default_and_tfrdv_off_turns_off(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m = 0;
    tfrdv_status st;
    c.call_timeout_ns = TFRDV_OFF;
    c.call_max_retries = TFRDV_OFF;
    c.step_idle_timeout_ns = TFRDV_OFF;
    c.deferred_timeout_ns = TFRDV_OFF;
    c.request_id_window = TFRDV_OFF;
    c.call_freelist_max = TFRDV_OFF;
    c.free_max = TFRDV_OFF;
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&c, &m, &st), TFRDV_OK);
    tfrdv_mgr_destroy(m);
    c = fx_mgr_config(WB, INC_B, &a);
    c.call_timeout_ns = -2;
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&c, &m, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "negative");
    c = fx_mgr_config(WB, INC_B, &a);
    c.tombstone_max = TFRDV_OFF; /* does not name it */
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&c, &m, &st), TFRDV_INVALID_ARGUMENT);
    FX_CHECK_EMPTY(&a);
}

static void test_incarnation_zero_is_derived_nonzero(void) {
    tfrdv_mgr_config c = fx_mgr_config(WA, 0, 0);
    tfrdv_mgr* m = mk(&c);
    TT_CHECK(tfrdv_mgr_incarnation(m) != 0);
    tfrdv_mgr_destroy(m);
}

/* ============================================================================================
   two-phase init
   ============================================================================================ */
static void test_serve_before_initialize_is_deferred_then_answered_in_arrival_order(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m = mk(&c);
    fx_key k;
    fx_serve s1, s2;
    fx_value v1, v2;
    tfrdv_rendezvous* r;
    tfrdv_status st;
    pend p;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    memset(&p, 0, sizeof p);
    key(&k, B0, INC_B, A0, "early");
    serve(m, 7, &k, 101, &s1); /* step 7 unknown: the lookup creates it, uninitialised */
    TT_CHECK_EQ_INT(s1.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 1);
    r = step(m, 7, 0);
    serve(m, 7, &k, 102, &s2);
    TT_CHECK_EQ_INT(tfrdv_mgr_pending(m, pend_fn, &p), 2);
    TT_CHECK_EQ_INT(pend_find(&p, 7, TFRDV_PENDING_DEFERRED, k.buf), 1);
    /* no send before initialisation */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v1, 1), 0, &st), TFRDV_FAILED_PRECONDITION);
    TT_CHECK_EQ_INT(fx_released(&v1), 0); /* a failed send leaves the value with the caller */
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(s1.calls + s2.calls, 0); /* now waiting in the table for a send */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, &v1.v, 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(s1.calls, 1);
    TT_CHECK_EQ_INT(s2.calls, 0);
    TT_CHECK_EQ_INT(s1.st.code, TFRDV_OK);
    TT_CHECK(s1.value_ptr == &v1.v); /* zero copy on the serving side */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v2, 2), 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(s2.calls, 1);
    TT_CHECK(s2.value_ptr == &v2.v);
    TT_CHECK_EQ_INT(fx_released(&v1), 1);
    TT_CHECK_EQ_INT(fx_released(&v2), 1);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(s1.calls, 1);
    TT_CHECK_EQ_INT(s2.calls, 1);
    FX_CHECK_EMPTY(&a);
}

/* step_requested: a worker whose steps a remote master starts learns the step id from the first
   request, starts the step from the hook and sends; the deferred request is answered. The hook
   runs once per deferred request (not for an initialised step) and sees the request's key. */
typedef struct hook_rec {
    int calls, sends;
    int64_t step;
    char key[128];
    fx_value v[2];
} hook_rec;
static void hook_start_and_send(void* u, tfrdv_mgr* m, int64_t step_id, tfrdv_str key) {
    hook_rec* h = (hook_rec*)u;
    tfrdv_rendezvous* r = 0;
    tfrdv_key k;
    tfrdv_status st;
    h->calls++;
    h->step = step_id;
    snprintf(h->key, sizeof h->key, "%.*s", (int)key.len, key.ptr);
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(m, step_id, &r, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_key_from(&k, key.ptr, key.len, &st), TFRDV_OK);
    if (r && h->sends < 2) {
        TT_CHECK_EQ_INT(tfrdv_send(r, &k.parsed, 0, fx_value_init(&h->v[h->sends], 40 + h->sends), 0, &st), TFRDV_OK);
        h->sends++;
    }
    tfrdv_unref(r);
}
static void test_step_requested_hook_starts_the_step_and_the_request_is_served(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s1, s2;
    hook_rec h;
    memset(&h, 0, sizeof h);
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    c.step_requested = hook_start_and_send;
    c.step_requested_user = &h;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "from_master");
    serve(m, 0x1234567890abLL, &k, 7, &s1);
    TT_CHECK_EQ_INT(h.calls, 1);
    TT_CHECK(h.step == 0x1234567890abLL);
    TT_CHECK_STR(h.key, k.buf);
    TT_CHECK_EQ_INT(s1.calls, 1); /* answered inside the hook, before serve returned */
    TT_CHECK_EQ_INT(s1.st.code, TFRDV_OK);
    TT_CHECK(s1.value_ptr == &h.v[0].v);
    /* the step is initialised now: a second request waits in its table, no hook */
    serve(m, 0x1234567890abLL, &k, 8, &s2);
    TT_CHECK_EQ_INT(h.calls, 1);
    TT_CHECK_EQ_INT(s2.calls, 0);
    /* a cleaned step: the tombstone answers, no hook */
    tfrdv_mgr_cleanup(m, 0x1234567890abLL);
    TT_CHECK_EQ_INT(s2.calls, 1);
    TT_CHECK_EQ_INT(s2.st.code, TFRDV_ABORTED);
    memset(&s2, 0, sizeof s2);
    serve(m, 0x1234567890abLL, &k, 9, &s2);
    TT_CHECK_EQ_INT(s2.st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(h.calls, 1);
    /* a bad key is refused before routing: no hook */
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 5, "no;key", 6, 10, 0, fx_serve_done, &s2), TFRDV_OK);
    TT_CHECK_EQ_INT(s2.st.code, TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(h.calls, 1);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(fx_released(&h.v[0]), 1);
    FX_CHECK_EMPTY(&a);
}

static void test_initialize_twice_same_name_ok_other_name_internal(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, 0);
    tfrdv_mgr* m = mk(&c);
    tfrdv_rendezvous* r = step(m, 3, 1);
    tfrdv_rendezvous* r2 = step(m, 4, 0);
    tfrdv_rendezvous* loc = 0;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, WB, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, "/job:x/replica:0/task:0", &st), TFRDV_INTERNAL);
    TT_CHECK_STR(st.msg, "Double init! Worker names would have changed from: /job:b/replica:0/task:0 -> /job:x/replica:0/task:0");
    /* on an aborted step initialisation reports the abort status */
    TT_CHECK_EQ_INT(tfrdv_abort(r2, TFRDV_CANCELLED, "gone"), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r2, 0, &st), TFRDV_CANCELLED);
    TT_CHECK_STR(st.msg, "gone");
    /* a plain local rendezvous is not a step */
    TT_CHECK_EQ_INT(tfrdv_create(0, &loc, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(loc, 0, &st), TFRDV_INVALID_ARGUMENT);
    tfrdv_destroy(loc);
    tfrdv_unref(r);
    tfrdv_unref(r2);
    tfrdv_mgr_destroy(m);
}

static void test_deferred_request_deadline_exceeded_names_step_and_key(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s, late;
    pend p;
    memset(&s, 0, sizeof s);
    memset(&late, 0, sizeof late);
    memset(&p, 0, sizeof p);
    c.deferred_timeout_ns = 1000;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "never_started");
    fx_set_now(5000);
    serve(m, 9, &k, 1, &s);
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(m, 5999), 6000); /* the next deadline */
    TT_CHECK_EQ_INT(s.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(m, 6000), INT64_MAX);
    TT_CHECK_EQ_INT(s.calls, 1);
    TT_CHECK_EQ_INT(s.st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_CONTAINS(s.st.msg, "step 9");
    TT_CHECK_CONTAINS(s.st.msg, k.buf);
    TT_CHECK_EQ_INT(stats(m).deferred_expired, 1);
    TT_CHECK_EQ_INT(tfrdv_mgr_pending(m, pend_fn, &p), 0);
    /* initialising the step afterwards does not answer it again */
    {
        tfrdv_rendezvous* r = step(m, 9, 1);
        tfrdv_unref(r);
    }
    TT_CHECK_EQ_INT(s.calls, 1);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(s.calls, 1);
    FX_CHECK_EMPTY(&a);

    /* deferred_timeout_ns < 0: no deadline at all; cleanup still answers */
    c.deferred_timeout_ns = -1;
    m = mk(&c);
    serve(m, 9, &k, 2, &late);
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(m, INT64_MAX - 1), INT64_MAX);
    TT_CHECK_EQ_INT(late.calls, 0);
    tfrdv_mgr_cleanup(m, 9);
    TT_CHECK_EQ_INT(late.calls, 1);
    TT_CHECK_EQ_INT(late.st.code, TFRDV_ABORTED);
    TT_CHECK_STR(late.st.msg, "Cleanup 9");
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* Where tfrdv differs from TensorFlow (README): a RecvTensor for a step that never starts waits
   forever in TensorFlow; here deferred requests have a deadline, and nothing leaks. A stray
   request for a step this worker never runs creates the step (any lookup creates, as
   TensorFlow); once its only request expired nothing refers to it any more, so it must not stay
   in the table for ever (100,000 stray step ids would pin 100,000 rendezvous). */
static void test_expired_stray_request_leaves_no_step_behind(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s[3];
    long base;
    int i;
    memset(s, 0, sizeof s);
    c.deferred_timeout_ns = 10;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "stray");
    base = fx_live(&a);
    fx_set_now(0);
    for (i = 0; i < 3; i++) serve(m, 900 + i, &k, 1 + i, &s[i]);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 3);
    tfrdv_mgr_expire(m, 10);
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(s[i].st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 0);
    TT_CHECK(fx_live(&a) <= base + 3); /* at most recycled request records remain */
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* a deferred request withdrawn through its cancellation manager (a gRPC/TCP client that cancelled
   or whose deadline passed) leaves no step behind either: 10,000 requests for 10,000 new step ids,
   each withdrawn, with max_deferred 1000, leave no step and give their memory back */
static void test_withdrawn_deferred_requests_leave_no_step_behind(void) {
    enum { N = 10000 };
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_hooks h = fx_hooks(&a);
    tfrdv_mgr* m;
    tfrdv_cancel_mgr* cm = 0;
    fx_key k;
    fx_serve s;
    tfrdv_mgr_stats stt;
    long base;
    int i, cancelled = 0;
    memset(&s, 0, sizeof s);
    c.max_deferred = 1000;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "withdrawn");
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&h, &cm, 0), TFRDV_OK);
    base = fx_live(&a);
    for (i = 0; i < N; i++) {
        memset(&s, 0, sizeof s);
        TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 5000 + i, k.buf, k.len, 1 + i, cm, fx_serve_done, &s), TFRDV_OK);
        TT_CHECK_EQ_INT(s.calls, 0); /* deferred */
        tfrdv_cancel_start(cm);
        cancelled += s.calls == 1 && s.st.code == TFRDV_CANCELLED;
        TT_CHECK_EQ_INT(tfrdv_cancel_mgr_reset(cm), TFRDV_OK);
    }
    TT_CHECK_EQ_INT(cancelled, N);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 0);
    tfrdv_mgr_get_stats(m, &stt);
    TT_CHECK_EQ_INT(stt.active_steps, 0);
    TT_CHECK(fx_live(&a) <= base + 2); /* at most a recycled request record remains */
    /* a withdrawn request of a step somebody holds keeps that step */
    {
        tfrdv_rendezvous* held = step(m, 777, 0);
        memset(&s, 0, sizeof s);
        TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 777, k.buf, k.len, 99999, cm, fx_serve_done, &s), TFRDV_OK);
        tfrdv_cancel_start(cm);
        TT_CHECK_EQ_INT(s.st.code, TFRDV_CANCELLED);
        TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 1);
        tfrdv_unref(held);
    }
    tfrdv_cancel_mgr_destroy(cm);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* ...but a step somebody holds, or one with a request still waiting, stays */
static void test_expired_request_keeps_a_step_that_is_in_use(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s1, s2, s3, s4;
    tfrdv_rendezvous* held;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    memset(&s3, 0, sizeof s3);
    memset(&s4, 0, sizeof s4);
    c.deferred_timeout_ns = 10;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "kept");
    fx_set_now(0);
    held = step(m, 910, 0);    /* the runtime already holds step 910 */
    serve(m, 910, &k, 1, &s1);
    serve(m, 911, &k, 2, &s2); /* 911: one request expires ... */
    fx_set_now(5);
    serve(m, 911, &k, 3, &s3); /* ... a later one is still waiting */
    tfrdv_mgr_expire(m, 10);
    TT_CHECK_EQ_INT(s1.st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_EQ_INT(s2.st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_EQ_INT(s3.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 2);
    /* the held step can still be initialised and used */
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(held, 0, 0), TFRDV_OK);
    {
        tfrdv_rendezvous* again = step(m, 910, 0);
        TT_CHECK(again == held);
        tfrdv_unref(again);
    }
    tfrdv_mgr_expire(m, 15); /* 911's last request expires: now it goes */
    TT_CHECK_EQ_INT(s3.st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 1);
    /* a dropped stray step is not tombstoned: a later request is deferred again */
    serve(m, 911, &k, 4, &s4);
    TT_CHECK_EQ_INT(s4.calls, 0);
    tfrdv_unref(held);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(s4.calls, 1);
    FX_CHECK_EMPTY(&a);
}

/* ============================================================================================
   cleanup, tombstones, cleanup_all
   ============================================================================================ */
static void test_cleanup_aborts_receivers_and_deferred_and_releases_buffered_values(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m = mk(&c);
    fx_key kl, kb;
    fx_recv rv;
    fx_serve s9;
    fx_value v, v2;
    tfrdv_rendezvous* r8;
    tfrdv_status st;
    memset(&rv, 0, sizeof rv);
    memset(&s9, 0, sizeof s9);
    key(&kl, B0, INC_B, B0, "local");
    key(&kb, B0, INC_B, A0, "buffered");
    r8 = step(m, 8, 1);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r8, &kl.pk, 0, fx_recv_done, &rv), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r8, &kb.pk, 0, fx_value_init(&v, 3), 0, &st), TFRDV_OK);
    serve(m, 9, &kb, 55, &s9); /* step 9: deferred */
    TT_CHECK_EQ_INT(rv.calls + s9.calls, 0);
    tfrdv_mgr_cleanup(m, 8);
    TT_CHECK_EQ_INT(rv.calls, 1);
    TT_CHECK_EQ_INT(rv.st.code, TFRDV_ABORTED);
    TT_CHECK_STR(rv.st.msg, "Cleanup 8");
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    tfrdv_mgr_cleanup(m, 9);
    TT_CHECK_EQ_INT(s9.calls, 1);
    TT_CHECK_EQ_INT(s9.st.code, TFRDV_ABORTED);
    TT_CHECK_STR(s9.st.msg, "Cleanup 9");
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 0);
    TT_CHECK_EQ_INT(stats(m).steps_cleaned, 2);
    TT_CHECK_EQ_INT(stats(m).tombstones, 2);
    /* our reference still works: sends fail with the abort status and the value stays ours */
    TT_CHECK_EQ_INT(tfrdv_send(r8, &kb.pk, 0, fx_value_init(&v2, 4), 0, &st), TFRDV_ABORTED);
    TT_CHECK_STR(st.msg, "Cleanup 8");
    TT_CHECK_EQ_INT(fx_released(&v2), 0);
    tfrdv_unref(r8);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(rv.calls, 1);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    FX_CHECK_EMPTY(&a);
}

/* idle-step policy: a step nobody holds, with nothing queued, deferred or in flight, is cleaned up
   (tombstone included) by tfrdv_mgr_expire once it stayed so for step_idle_timeout_ns; a step held
   by the runtime, one with a buffered value, or one used again meanwhile stays */
static void test_idle_steps_are_cleaned_up_after_the_idle_timeout(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    tfrdv_rendezvous *r1, *r2, *held;
    fx_key k;
    fx_value v;
    fx_serve s1, s2;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    c.step_idle_timeout_ns = 100;
    c.tombstone_ttl_ns = 5000;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "idle");
    fx_set_now(1000);
    r1 = step(m, 71, 1); /* will be idle */
    r2 = step(m, 72, 1); /* holds a value until it is fetched */
    held = step(m, 73, 1); /* the runtime keeps its reference */
    TT_CHECK_EQ_INT(tfrdv_send(r2, &k.pk, 0, fx_value_init(&v, 1), 0, 0), TFRDV_OK);
    tfrdv_unref(r1);
    tfrdv_unref(r2);
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(m, 1000), 1100); /* 71 idle from now: gone at 1100 */
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 3);
    fx_set_now(1050);
    serve(m, 72, &k, 5, &s1); /* the value is fetched: 72 is idle from the next look on */
    TT_CHECK(s1.calls == 1 && s1.st.code == TFRDV_OK);
    tfrdv_unref(step(m, 71, 0)); /* a find: 71 was used meanwhile, its idle time starts again */
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(m, 1100), 1200);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 3);
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(m, 1200), 1200 + c.tombstone_ttl_ns); /* 71 and 72 go (their
                                                                tombstones age out then); 73 is held */
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 1);
    TT_CHECK_EQ_INT(stats(m).steps_idle_cleaned, 2);
    /* a late request for a cleaned step fails at once (the tombstone) */
    serve(m, 72, &k, 6, &s2);
    TT_CHECK_EQ_INT(s2.st.code, TFRDV_ABORTED);
    TT_CHECK_CONTAINS(s2.st.msg, "Cleanup 72");
    tfrdv_unref(held);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

static void test_tombstone_fails_a_late_serve_at_once(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m = mk(&c);
    fx_key k;
    fx_serve s, s11;
    tfrdv_rendezvous* r;
    memset(&s, 0, sizeof s);
    memset(&s11, 0, sizeof s11);
    key(&k, B0, INC_B, A0, "late");
    r = step(m, 10, 1);
    tfrdv_unref(r);
    tfrdv_mgr_cleanup(m, 10);
    serve(m, 10, &k, 5, &s);
    TT_CHECK_EQ_INT(s.calls, 1); /* at once, not deferred */
    TT_CHECK_EQ_INT(s.st.code, TFRDV_ABORTED);
    TT_CHECK(strncmp(s.st.msg, "Cleanup 10", 10) == 0);
    TT_CHECK_EQ_INT(stats(m).tombstone_hits, 1);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 0); /* the late request did not resurrect the step */
    /* cleaning an unknown step is OK and tombstones it too */
    tfrdv_mgr_cleanup(m, 11);
    serve(m, 11, &k, 6, &s11);
    TT_CHECK_EQ_INT(s11.calls, 1);
    TT_CHECK_EQ_INT(s11.st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 0);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

static void test_tombstones_are_bounded_by_tombstone_max(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s6, s1;
    int64_t id;
    memset(&s6, 0, sizeof s6);
    memset(&s1, 0, sizeof s1);
    c.tombstone_max = 4;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "bounded");
    for (id = 1; id <= 6; id++) tfrdv_mgr_cleanup(m, id);
    TT_CHECK_EQ_INT(stats(m).tombstones, 4);
    serve(m, 6, &k, 1, &s6); /* remembered */
    TT_CHECK_EQ_INT(s6.calls, 1);
    TT_CHECK_EQ_INT(s6.st.code, TFRDV_ABORTED);
    serve(m, 1, &k, 2, &s1); /* forgotten (oldest): deferred like any unknown step */
    TT_CHECK_EQ_INT(s1.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 1);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(s1.calls, 1);
    TT_CHECK_EQ_INT(s1.st.code, TFRDV_ABORTED);
    FX_CHECK_EMPTY(&a);
}

static void test_tombstones_expire_after_ttl(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s;
    memset(&s, 0, sizeof s);
    c.tombstone_ttl_ns = 1000;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "ttl");
    fx_set_now(0);
    tfrdv_mgr_cleanup(m, 20);
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(m, 0), 1000);
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(m, 999), 1000);
    TT_CHECK_EQ_INT(stats(m).tombstones, 1);
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(m, 1000), INT64_MAX);
    TT_CHECK_EQ_INT(stats(m).tombstones, 0);
    fx_set_now(1000);
    serve(m, 20, &k, 1, &s); /* no longer remembered: deferred */
    TT_CHECK_EQ_INT(s.calls, 0);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(s.calls, 1);
    FX_CHECK_EMPTY(&a);
}

static void test_find_after_cleanup_creates_a_fresh_step(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m = mk(&c);
    fx_key k;
    fx_serve s;
    fx_value v;
    tfrdv_rendezvous* r;
    tfrdv_status st;
    memset(&s, 0, sizeof s);
    key(&k, B0, INC_B, A0, "again");
    r = step(m, 30, 1);
    tfrdv_unref(r);
    tfrdv_mgr_cleanup(m, 30);
    TT_CHECK_EQ_INT(stats(m).tombstones, 1);
    r = step(m, 30, 0);
    TT_CHECK_EQ_INT(tfrdv_get_status(r, &st), TFRDV_OK); /* not the aborted one */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 5), 0, &st), TFRDV_FAILED_PRECONDITION); /* uninitialised */
    TT_CHECK_EQ_INT(stats(m).tombstones, 0); /* the step id is live again */
    TT_CHECK_EQ_INT(stats(m).steps_created, 2);
    serve(m, 30, &k, 9, &s);
    TT_CHECK_EQ_INT(s.calls, 0); /* deferred, not tombstoned */
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, &v.v, 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(s.calls, 1);
    TT_CHECK_EQ_INT(s.st.code, TFRDV_OK);
    TT_CHECK(s.value_ptr == &v.v);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    FX_CHECK_EMPTY(&a);
}

static void test_cleanup_all_aborts_every_step(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m = mk(&c);
    fx_key k;
    fx_recv rv[5];
    int i;
    char want[32];
    memset(rv, 0, sizeof rv);
    key(&k, B0, INC_B, B0, "wait");
    for (i = 0; i < 5; i++) {
        tfrdv_rendezvous* r = step(m, 100 + i, 1);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, fx_recv_done, &rv[i]), TFRDV_OK);
        tfrdv_unref(r);
    }
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 5);
    tfrdv_mgr_cleanup_all(m);
    for (i = 0; i < 5; i++) {
        TT_CHECK_EQ_INT(rv[i].calls, 1);
        TT_CHECK_EQ_INT(rv[i].st.code, TFRDV_ABORTED);
        snprintf(want, sizeof want, "Cleanup %d", 100 + i);
        TT_CHECK_STR(rv[i].st.msg, want);
    }
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 0);
    TT_CHECK_EQ_INT(stats(m).tombstones, 5);
    TT_CHECK_EQ_INT(stats(m).steps_cleaned, 5);
    tfrdv_mgr_cleanup_all(m); /* nothing left: harmless */
    tfrdv_mgr_destroy(m);
    for (i = 0; i < 5; i++) TT_CHECK_EQ_INT(rv[i].calls, 1);
    FX_CHECK_EMPTY(&a);
}

/* ============================================================================================
   introspection
   ============================================================================================ */
static void test_steps_reports_active_ids_up_to_cap(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, 0);
    tfrdv_mgr* m = mk(&c);
    int64_t ids[3] = {-1, -1, -1};
    int i;
    for (i = 0; i < 3; i++) tfrdv_unref(step(m, 40 + i, 0));
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 3);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, ids, 2), 3);
    TT_CHECK(ids[0] >= 40 && ids[0] <= 42 && ids[1] >= 40 && ids[1] <= 42 && ids[0] != ids[1]);
    TT_CHECK_EQ_INT(ids[2], -1); /* never written past cap */
    tfrdv_mgr_cleanup(m, 41);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, ids, 3), 2);
    TT_CHECK(ids[0] != 41 && ids[1] != 41);
    /* many steps: the table grows and still reports each once */
    for (i = 0; i < 100; i++) tfrdv_unref(step(m, 1000 + i, 0));
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 102);
    tfrdv_mgr_destroy(m);
}

static void test_pending_reports_send_recv_remote_call_and_deferred(void) {
    fx_alloc a = {0};
    tfrdv_loopback* lb = 0;
    tfrdv_mgr *ma, *mb;
    tfrdv_rendezvous *ra, *rb;
    fx_key ks, kr, kx, kd;
    fx_value v1, v2;
    fx_recv rr, rx;
    fx_serve sd;
    tfrdv_status st;
    pend p, pb, pr;
    memset(&rr, 0, sizeof rr);
    memset(&rx, 0, sizeof rx);
    memset(&sd, 0, sizeof sd);
    memset(&p, 0, sizeof p);
    memset(&pb, 0, sizeof pb);
    memset(&pr, 0, sizeof pr);
    TT_CHECK_EQ_INT(loopback_pair(&a, &lb, &ma, &mb), TFRDV_OK);
    key(&ks, A0, INC_A, A0, "sent");
    key(&kr, A0, INC_A, A0, "wanted");
    key(&kx, B0, INC_B, A0, "remote");
    key(&kd, A0, INC_A, B0, "deferred");
    ra = step(ma, 50, 1);
    rb = step(mb, 50, 1);
    TT_CHECK_EQ_INT(tfrdv_send(ra, &ks.pk, 0, fx_value_init(&v1, 1), 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(ra, &ks.pk, 0, fx_value_init(&v2, 2), 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(ra, &kr.pk, 0, fx_recv_done, &rr), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(ra, &kx.pk, 0, fx_recv_done, &rx), TFRDV_OK); /* B has nothing yet */
    serve(ma, 51, &kd, 77, &sd);
    TT_CHECK_EQ_INT(tfrdv_mgr_pending(ma, pend_fn, &p), 4);
    TT_CHECK_EQ_INT(pend_find(&p, 50, TFRDV_PENDING_SEND, ks.buf), 2);
    TT_CHECK_EQ_INT(pend_find(&p, 50, TFRDV_PENDING_RECV, kr.buf), 1);
    TT_CHECK_EQ_INT(pend_find(&p, 50, TFRDV_PENDING_REMOTE_CALL, kx.buf), 1);
    TT_CHECK_EQ_INT(pend_find(&p, 51, TFRDV_PENDING_DEFERRED, kd.buf), 1);
    /* on B the served request waits in the table like a receiver */
    TT_CHECK_EQ_INT(tfrdv_mgr_pending(mb, pend_fn, &pb), 1);
    TT_CHECK_EQ_INT(pend_find(&pb, 50, TFRDV_PENDING_RECV, kx.buf), 1);
    /* one step only */
    TT_CHECK_EQ_INT(tfrdv_pending(ra, pend_fn, &pr), 3);
    TT_CHECK_EQ_INT(tfrdv_mgr_pending(ma, 0, 0), 4); /* fn may be NULL: just the count */
    tfrdv_unref(ra);
    tfrdv_unref(rb);
    tfrdv_mgr_destroy(ma);
    tfrdv_mgr_destroy(mb);
    tfrdv_loopback_destroy(lb);
    TT_CHECK_EQ_INT(rr.calls, 1);
    TT_CHECK_EQ_INT(rx.calls, 1);
    TT_CHECK_EQ_INT(rx.st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(sd.calls, 1);
    TT_CHECK_EQ_INT(fx_released(&v1), 1);
    TT_CHECK_EQ_INT(fx_released(&v2), 1);
    FX_CHECK_EMPTY(&a);
}

/* ============================================================================================
   serving side checks
   ============================================================================================ */
static void test_serve_malformed_key_is_invalid_argument_naming_the_key(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, 0);
    tfrdv_mgr* m = mk(&c);
    fx_serve s;
    const char* bad = "not;a;rendezvous;key";
    memset(&s, 0, sizeof s);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 1, bad, strlen(bad), 1, 0, fx_serve_done, &s), TFRDV_OK);
    TT_CHECK_EQ_INT(s.calls, 1);
    TT_CHECK_EQ_INT(s.st.code, TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(s.st.msg, bad);
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 0);
    /* argument errors are synchronous and run no callback */
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(0, 1, bad, strlen(bad), 1, 0, fx_serve_done, &s), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 1, bad, strlen(bad), 1, 0, 0, &s), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(m, 1, 0, 5, 1, 0, fx_serve_done, &s), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(s.calls, 1);
    tfrdv_mgr_destroy(m);
}

static void test_serve_source_not_on_this_worker_is_invalid_argument(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, 0);
    tfrdv_mgr* m = mk(&c);
    tfrdv_mgr* m1;
    fx_key k, k10;
    fx_serve s, s10;
    memset(&s, 0, sizeof s);
    memset(&s10, 0, sizeof s10);
    key(&k, C0, INC_B, A0, "elsewhere");
    serve(m, 1, &k, 1, &s);
    TT_CHECK_EQ_INT(s.calls, 1);
    TT_CHECK_EQ_INT(s.st.code, TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(s.st.msg, "Invalid rendezvous key (src)");
    TT_CHECK_CONTAINS(s.st.msg, k.buf);
    tfrdv_mgr_destroy(m);
    /* the worker prefix must end at a '/': task:1 does not own task:10's devices */
    c.worker_name = "/job:b/replica:0/task:1";
    m1 = mk(&c);
    key(&k10, "/job:b/replica:0/task:10/device:CPU:0", INC_B, A0, "prefix");
    serve(m1, 1, &k10, 1, &s10);
    TT_CHECK_EQ_INT(s10.calls, 1);
    TT_CHECK_EQ_INT(s10.st.code, TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(s10.st.msg, "Invalid rendezvous key (src)");
    tfrdv_mgr_destroy(m1);
}

static void test_serve_incarnation_mismatch_is_aborted_with_tensorflow_text(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, 7, 0);
    tfrdv_mgr* m = mk(&c);
    fx_key k;
    fx_serve s;
    memset(&s, 0, sizeof s);
    key(&k, B0, 5, A0, "restarted");
    serve(m, 1, &k, 1, &s);
    TT_CHECK_EQ_INT(s.calls, 1);
    TT_CHECK_EQ_INT(s.st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(s.st.detail, TFRDV_DETAIL_WORKER_RESTARTED); /* acted on without reading the text */
    TT_CHECK_STR(s.st.msg,
                 "RecvTensor expects a different device incarnation: 0000000000000005 vs. 0000000000000007. Your worker job "
                 "(\"/job:b/replica:0/task:0\") was probably restarted. Check your worker job for "
                 "the reason why it was restarted.");
    TT_CHECK_EQ_INT(tfrdv_mgr_steps(m, 0, 0), 0);
    tfrdv_mgr_destroy(m);
}

static uint64_t dev_inc(void* u, const char* dev, size_t len) {
    (void)u;
    if (len == strlen(B0) && memcmp(dev, B0, len) == 0) return 0x70;
    return 0; /* unknown device */
}
static void test_serve_device_incarnation_hook_and_unknown_device_not_found(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, 7, 0);
    tfrdv_mgr* m;
    fx_key k1, kwrong, kok;
    fx_serve s1, swrong, sok;
    memset(&s1, 0, sizeof s1);
    memset(&swrong, 0, sizeof swrong);
    memset(&sok, 0, sizeof sok);
    c.device_incarnation = dev_inc;
    m = mk(&c);
    key(&k1, B1, 7, A0, "x");
    key(&kwrong, B0, 7, A0, "x");
    key(&kok, B0, 0x70, A0, "x");
    serve(m, 1, &k1, 1, &s1);
    TT_CHECK_EQ_INT(s1.calls, 1);
    TT_CHECK_EQ_INT(s1.st.code, TFRDV_NOT_FOUND);
    TT_CHECK_CONTAINS(s1.st.msg, B1);
    serve(m, 1, &kwrong, 2, &swrong); /* the device's incarnation, not the worker's, counts */
    TT_CHECK_EQ_INT(swrong.calls, 1);
    TT_CHECK_EQ_INT(swrong.st.code, TFRDV_ABORTED);
    TT_CHECK_CONTAINS(swrong.st.msg, "incarnation: 0000000000000007 vs. 0000000000000070");
    serve(m, 1, &kok, 3, &sok);
    TT_CHECK_EQ_INT(sok.calls, 0); /* accepted: deferred (step 1 not initialised) */
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(sok.calls, 1);
    TT_CHECK_EQ_INT(sok.st.code, TFRDV_ABORTED);
}

static void test_serve_duplicate_request_id_is_aborted(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m = mk(&c);
    fx_key k;
    fx_serve s1, s2;
    fx_value v;
    tfrdv_rendezvous* r;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    key(&k, B0, INC_B, A0, "dup");
    r = step(m, 60, 1);
    serve(m, 60, &k, 77, &s1);
    serve(m, 60, &k, 77, &s2);
    TT_CHECK_EQ_INT(s1.calls, 0);
    TT_CHECK_EQ_INT(s2.calls, 1);
    TT_CHECK_EQ_INT(s2.st.code, TFRDV_ABORTED);
    TT_CHECK_CONTAINS(s2.st.msg, "The same RecvTensor request was received twice");
    TT_CHECK_CONTAINS(s2.st.msg, "request_id: 77");
    TT_CHECK_EQ_INT(stats(m).duplicate_requests, 1);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 6), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(s1.calls, 1);
    TT_CHECK_EQ_INT(s1.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(s2.calls, 1);
    FX_CHECK_EMPTY(&a);
}

static void test_serve_request_id_zero_is_never_deduplicated(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, 0);
    tfrdv_mgr* m = mk(&c);
    fx_key k;
    fx_serve s1, s2;
    fx_value v1, v2;
    tfrdv_rendezvous* r;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    key(&k, B0, INC_B, A0, "zero");
    r = step(m, 61, 1);
    serve(m, 61, &k, 0, &s1);
    serve(m, 61, &k, 0, &s2);
    TT_CHECK_EQ_INT(s1.calls + s2.calls, 0);
    tfrdv_send(r, &k.pk, 0, fx_value_init(&v1, 1), 0, 0);
    tfrdv_send(r, &k.pk, 0, fx_value_init(&v2, 2), 0, 0);
    TT_CHECK_EQ_INT(s1.calls, 1);
    TT_CHECK_EQ_INT(s2.calls, 1);
    TT_CHECK(s1.value_ptr == &v1.v && s2.value_ptr == &v2.v);
    TT_CHECK_EQ_INT(stats(m).duplicate_requests, 0);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
}

/* tfrdv_mgr_serve_return: a transport that could not deliver a served value gives it back; it goes
   before the values sent after it (send order holds), its request id can be served again, and a
   step that is gone releases it */
static void test_serve_return_puts_the_value_back_first_and_frees_the_request_id(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s1, s2;
    fx_value v1, v2;
    tfrdv_rendezvous* r;
    tfrdv_args sa = tfrdv__no_args;
    tfrdv_status st;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    c.response_cache = 1;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "given-back");
    r = step(m, 63, 1);
    sa.alloc_attrs = 5;
    tfrdv_send(r, &k.pk, &sa, fx_value_init(&v1, 1), 0, 0);
    tfrdv_send(r, &k.pk, 0, fx_value_init(&v2, 2), 0, 0);
    s1.keep = 1;
    serve(m, 63, &k, 42, &s1);
    TT_CHECK(s1.calls == 1 && s1.kept == &v1.v);
    TT_CHECK_EQ_INT(s1.send_args.alloc_attrs, 5);
    /* the reply could not be delivered: v1 goes back ahead of v2 */
    TT_CHECK_EQ_INT(tfrdv_mgr_serve_return(m, 63, k.buf, k.len, 42, &s1.send_args, s1.kept, 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(fx_released(&v1), 0);
    /* the same request id again is served (not a duplicate, not the cached answer) and gets v1 */
    serve(m, 63, &k, 42, &s2);
    TT_CHECK_EQ_INT(s2.st.code, TFRDV_OK);
    TT_CHECK(s2.value_ptr == &v1.v);
    TT_CHECK_EQ_INT(s2.send_args.alloc_attrs, 5);
    TT_CHECK_EQ_INT(stats(m).duplicate_requests, 0);
    tfrdv_mgr_ack(m, 42);
    TT_CHECK_EQ_INT(fx_released(&v1), 1);
    /* a request already waiting gets a given-back value directly */
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    serve(m, 63, &k, 0, &s1); /* takes v2 */
    TT_CHECK(s1.calls == 1 && s1.value_ptr == &v2.v);
    serve(m, 63, &k, 0, &s2); /* waits */
    TT_CHECK_EQ_INT(s2.calls, 0);
    fx_value_init(&v1, 3);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve_return(m, 63, k.buf, k.len, 0, 0, &v1.v, 0, 0), TFRDV_OK);
    TT_CHECK(s2.calls == 1 && s2.value_ptr == &v1.v);
    /* a step that is gone releases the value and says so */
    tfrdv_mgr_cleanup(m, 63);
    fx_value_init(&v1, 4);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve_return(m, 63, k.buf, k.len, 43, 0, &v1.v, 0, &st), TFRDV_ABORTED);
    TT_CHECK_CONTAINS(st.msg, "step 63 is gone");
    TT_CHECK_EQ_INT(fx_released(&v1), 1);
    /* bad arguments: still taken */
    fx_value_init(&v1, 5);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve_return(m, 63, "no key", 6, 0, 0, &v1.v, 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(fx_released(&v1), 1);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve_return(m, 63, k.buf, k.len, 0, 0, 0, 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve_return(0, 63, k.buf, k.len, 0, 0, 0, 1, 0), TFRDV_INVALID_ARGUMENT);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

static void test_serve_dedup_window_is_bounded(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, 0);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s[8];
    int i;
    memset(s, 0, sizeof s);
    c.request_id_window = 4;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "window");
    tfrdv_unref(step(m, 62, 1));
    for (i = 0; i < 5; i++) serve(m, 62, &k, 1 + i, &s[i]); /* ids 1..5: id 1 falls out */
    serve(m, 62, &k, 1, &s[5]);
    TT_CHECK_EQ_INT(s[5].calls, 0); /* forgotten: accepted again (waits) */
    serve(m, 62, &k, 5, &s[6]);
    TT_CHECK_EQ_INT(s[6].calls, 1); /* remembered */
    TT_CHECK_EQ_INT(s[6].st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(stats(m).duplicate_requests, 1);
    tfrdv_mgr_destroy(m);
    for (i = 0; i < 7; i++) TT_CHECK_EQ_INT(s[i].calls, 1);
}

static void test_response_cache_answers_a_retry_with_the_same_value_released_once_after_ack(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s1, s2, s3;
    fx_value v;
    tfrdv_rendezvous* r;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    memset(&s3, 0, sizeof s3);
    c.response_cache = 1;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "cached");
    r = step(m, 70, 1);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 7), 0, 0), TFRDV_OK);
    serve(m, 70, &k, 42, &s1);
    serve(m, 70, &k, 42, &s2); /* a retry: same answer, not a duplicate error */
    TT_CHECK_EQ_INT(s1.calls, 1);
    TT_CHECK_EQ_INT(s2.calls, 1);
    TT_CHECK_EQ_INT(s1.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(s2.st.code, TFRDV_OK);
    TT_CHECK(s1.value_ptr == &v.v && s2.value_ptr == &v.v);
    TT_CHECK_EQ_INT(stats(m).cache_hits, 1);
    TT_CHECK_EQ_INT(stats(m).duplicate_requests, 0);
    TT_CHECK_EQ_INT(fx_released(&v), 0); /* both receivers released theirs; the cache holds one */
    tfrdv_mgr_ack(m, 42);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    tfrdv_mgr_ack(m, 42); /* unknown now: no-op */
    tfrdv_mgr_ack(m, 12345);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    FX_CHECK_EMPTY(&a);
}

static void test_response_cache_waiters_share_one_answer_released_once_by_cleanup(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s1, s2, s3;
    fx_value v;
    tfrdv_rendezvous* r;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    memset(&s3, 0, sizeof s3);
    c.response_cache = 1;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "pending");
    r = step(m, 71, 1);
    serve(m, 71, &k, 43, &s1);
    serve(m, 71, &k, 43, &s2); /* while the first is still being computed */
    TT_CHECK_EQ_INT(s1.calls + s2.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 8), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(s1.calls, 1);
    TT_CHECK_EQ_INT(s2.calls, 1);
    TT_CHECK(s1.value_ptr == &v.v && s2.value_ptr == &v.v);
    serve(m, 71, &k, 43, &s3); /* and after it finished */
    TT_CHECK_EQ_INT(s3.calls, 1);
    TT_CHECK(s3.value_ptr == &v.v);
    TT_CHECK_EQ_INT(fx_released(&v), 0);
    tfrdv_mgr_cleanup(m, 71); /* drops the step's cache entries */
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    FX_CHECK_EMPTY(&a);
}

/* TensorFlow's GrpcWorker::RecvTensorAsync with the RPC response cache: with the cache on, a
   request that is computed (QueueRequest false) is still tracked by RecentRequestIds, so once the receiver acked (EraseRequestId) a replay of
   that id is rejected instead of consuming a second tensor. */
static void test_response_cache_replay_after_ack_is_a_duplicate(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s1, s2;
    fx_value v1, v2;
    tfrdv_rendezvous* r;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    c.response_cache = 1;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "replay");
    r = step(m, 72, 1);
    tfrdv_send(r, &k.pk, 0, fx_value_init(&v1, 1), 0, 0);
    tfrdv_send(r, &k.pk, 0, fx_value_init(&v2, 2), 0, 0);
    serve(m, 72, &k, 44, &s1);
    TT_CHECK(s1.value_ptr == &v1.v);
    tfrdv_mgr_ack(m, 44);
    serve(m, 72, &k, 44, &s2);
    TT_CHECK_EQ_INT(s2.calls, 1);
    TT_CHECK_EQ_INT(s2.st.code, TFRDV_ABORTED);
    TT_CHECK(s2.value_ptr != &v2.v); /* must not consume the next tensor */
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

static void test_response_cache_full_falls_back_to_dedup(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, 0);
    tfrdv_mgr* m;
    fx_key k;
    fx_serve s[4];
    int i;
    memset(s, 0, sizeof s);
    c.response_cache = 1;
    c.response_cache_max = 1;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "full");
    tfrdv_unref(step(m, 73, 1));
    serve(m, 73, &k, 1, &s[0]); /* cached entry */
    serve(m, 73, &k, 2, &s[1]); /* no room: uncached, tracked for dedup */
    serve(m, 73, &k, 2, &s[2]);
    TT_CHECK_EQ_INT(s[2].calls, 1);
    TT_CHECK_EQ_INT(s[2].st.code, TFRDV_ABORTED);
    serve(m, 73, &k, 1, &s[3]); /* cached: joins the first */
    TT_CHECK_EQ_INT(s[3].calls, 0);
    TT_CHECK_EQ_INT(stats(m).cache_hits, 1);
    tfrdv_mgr_destroy(m);
    for (i = 0; i < 4; i++) TT_CHECK_EQ_INT(s[i].calls, 1);
}

/* Error answers for requests that never reached a live step (a late request for a cleaned step,
   a bad key, a wrong incarnation, a step that never ran) are cached under step ids whose cleanup
   already happened (or never will): nothing drops them (the client acks only successes), so they
   must not use up response_cache_max and silently turn caching off for later requests. */
static void test_response_cache_is_not_filled_by_requests_that_never_reached_a_step(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k5, k6, kbadinc;
    fx_serve s[8];
    fx_value v;
    tfrdv_rendezvous* r6;
    long live_before, live_after;
    int i;
    memset(s, 0, sizeof s);
    c.response_cache = 1;
    c.response_cache_max = 2;
    c.deferred_timeout_ns = 10;
    m = mk(&c);
    key(&k5, B0, INC_B, A0, "late");
    key(&kbadinc, B0, INC_B + 1, A0, "restarted");
    key(&k6, B0, INC_B, A0, "live");
    fx_set_now(0);
    tfrdv_mgr_cleanup(m, 5);
    live_before = fx_live(&a);
    serve(m, 5, &k5, 1, &s[0]);      /* tombstone hit */
    serve(m, 6, &kbadinc, 2, &s[1]); /* incarnation mismatch */
    serve(m, 7, &k5, 3, &s[2]);      /* a step that never runs here */
    tfrdv_mgr_expire(m, 10);
    TT_CHECK_EQ_INT(s[0].st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(s[1].st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(s[2].st.code, TFRDV_DEADLINE_EXCEEDED);
    live_after = fx_live(&a);
    /* a real request and its retry: the retry must get the cached answer */
    r6 = step(m, 6, 1);
    TT_CHECK_EQ_INT(tfrdv_send(r6, &k6.pk, 0, fx_value_init(&v, 9), 0, 0), TFRDV_OK);
    serve(m, 6, &k6, 4, &s[3]);
    serve(m, 6, &k6, 4, &s[4]);
    TT_CHECK_EQ_INT(s[3].st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(s[4].st.code, TFRDV_OK);
    TT_CHECK(s[4].value_ptr == &v.v);
    TT_CHECK_EQ_INT(stats(m).cache_hits, 1);
    TT_CHECK(live_after - live_before <= 3); /* at most recycled request records, no cache entries */
    tfrdv_unref(r6);
    tfrdv_mgr_destroy(m);
    for (i = 0; i < 5; i++) TT_CHECK_EQ_INT(s[i].calls, 1);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    FX_CHECK_EMPTY(&a);
}

/* ============================================================================================
   sends on a step
   ============================================================================================ */
static void test_send_before_initialize_is_failed_precondition(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, 0);
    tfrdv_mgr* m = mk(&c);
    tfrdv_rendezvous* r = step(m, 80, 0);
    fx_key k;
    fx_value v;
    tfrdv_status st;
    key(&k, B0, INC_B, A0, "early_send");
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 1), 0, &st), TFRDV_FAILED_PRECONDITION);
    TT_CHECK_CONTAINS(st.msg, "step 80");
    TT_CHECK_EQ_INT(fx_released(&v), 0);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(fx_released(&v), 0);
}

static void test_send_with_source_of_another_worker_is_invalid_argument(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, 0);
    tfrdv_mgr* m = mk(&c);
    tfrdv_rendezvous* r = step(m, 81, 1);
    fx_key k;
    fx_value v;
    tfrdv_status st;
    char want[400];
    key(&k, A0, INC_A, B0, "not_mine");
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 1), 0, &st), TFRDV_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "Invalid rendezvous key (src): %s @ %s", k.buf, WB);
    TT_CHECK_STR(st.msg, want);
    TT_CHECK_EQ_INT(fx_released(&v), 0);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(fx_released(&v), 0);
}

/* ============================================================================================
   request ids
   ============================================================================================ */
static int cmp_i64(const void* a, const void* b) {
    int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
    return x < y ? -1 : x > y;
}
static void test_new_request_id_is_nonzero_and_unique_over_100000_draws(void) {
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, 0);
    tfrdv_mgr* m = mk(&c);
    enum { N = 100000 };
    int64_t* ids = (int64_t*)malloc(N * sizeof *ids);
    int i, zeros = 0, dups = 0, negatives = 0;
    for (i = 0; i < N; i++) {
        ids[i] = tfrdv_mgr_new_request_id(m);
        zeros += ids[i] == 0;
        negatives += ids[i] < 0;
    }
    qsort(ids, N, sizeof *ids, cmp_i64);
    for (i = 1; i < N; i++) dups += ids[i] == ids[i - 1];
    TT_CHECK_EQ_INT(zeros, 0);
    TT_CHECK_EQ_INT(dups, 0);
    TT_CHECK(negatives > N / 4 && negatives < 3 * N / 4); /* random-looking: about half negative */
    TT_CHECK_EQ_INT(tfrdv_mgr_new_request_id(0), 0);
    free(ids);
    tfrdv_mgr_destroy(m);
}

/* ============================================================================================
   teardown and memory
   ============================================================================================ */
static void test_destroy_with_live_steps_and_requests_completes_everything_once(void) {
    fx_alloc a = {0};
    tfrdv_loopback* lb = 0;
    tfrdv_mgr *ma, *mb;
    tfrdv_rendezvous *ra1, *rb1, *rb2;
    fx_key kx, kbuf, kloc, kdef;
    fx_value vbuf, vlate;
    fx_recv rx, rloc;
    fx_serve sdef, sdead;
    tfrdv_status st;
    memset(&rx, 0, sizeof rx);
    memset(&rloc, 0, sizeof rloc);
    memset(&sdef, 0, sizeof sdef);
    memset(&sdead, 0, sizeof sdead);
    TT_CHECK_EQ_INT(loopback_pair(&a, &lb, &ma, &mb), TFRDV_OK);
    key(&kx, B0, INC_B, A0, "in_flight");
    key(&kbuf, B0, INC_B, A0, "buffered");
    key(&kloc, B0, INC_B, B0, "local_wait");
    key(&kdef, B0, INC_B, A0, "deferred");
    ra1 = step(ma, 1, 1);
    rb1 = step(mb, 1, 1);
    rb2 = step(mb, 2, 1);
    TT_CHECK_EQ_INT(tfrdv_recv_async(ra1, &kx.pk, 0, fx_recv_done, &rx), TFRDV_OK); /* served by B, waits */
    TT_CHECK_EQ_INT(tfrdv_send(rb1, &kbuf.pk, 0, fx_value_init(&vbuf, 1), 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(rb2, &kloc.pk, 0, fx_recv_done, &rloc), TFRDV_OK);
    serve(mb, 3, &kdef, 99, &sdef); /* step 3 never initialised */
    TT_CHECK_EQ_INT(stats(ma).calls_in_flight, 1);
    tfrdv_mgr_destroy(mb); /* the serving worker goes first */
    TT_CHECK_EQ_INT(rx.calls, 1);
    TT_CHECK_EQ_INT(rx.st.code, TFRDV_ABORTED);
    TT_CHECK_CONTAINS(rx.st.msg, "Shutdown");
    TT_CHECK_EQ_INT(rloc.calls, 1);
    TT_CHECK_EQ_INT(rloc.st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(sdef.calls, 1);
    TT_CHECK_EQ_INT(sdef.st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(fx_released(&vbuf), 1);
    /* our references outlive the manager: the steps are aborted, sends are refused */
    TT_CHECK_EQ_INT(tfrdv_get_status(rb1, &st), TFRDV_ABORTED);
    TT_CHECK_EQ_INT(tfrdv_send(rb1, &kbuf.pk, 0, fx_value_init(&vlate, 2), 0, &st), TFRDV_ABORTED);
    TT_CHECK_EQ_INT(fx_released(&vlate), 0);
    /* a request reaching the dead worker through the loopback (still registered) fails */
    TT_CHECK_EQ_INT(tfrdv_mgr_serve(mb, 4, kdef.buf, kdef.len, 5, 0, fx_serve_done, &sdead), TFRDV_OK);
    TT_CHECK_EQ_INT(sdead.calls, 1);
    TT_CHECK_EQ_INT(sdead.st.code, TFRDV_ABORTED);
    tfrdv_unref(rb1);
    tfrdv_unref(rb2);
    tfrdv_unref(ra1);
    TT_CHECK_EQ_INT(stats(ma).calls_in_flight, 0);
    tfrdv_mgr_destroy(ma);
    tfrdv_loopback_destroy(lb);
    TT_CHECK_EQ_INT(rx.calls, 1);
    TT_CHECK_EQ_INT(rloc.calls, 1);
    TT_CHECK_EQ_INT(sdef.calls, 1);
    TT_CHECK_EQ_INT(fx_released(&vbuf), 1);
    FX_CHECK_EMPTY(&a);
}

static void test_memory_100000_steps_return_to_baseline_plus_bounded_tombstones(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    long base_blocks, base_bytes;
    int64_t i;
    fx_key k;
    fx_value v;
    int sends_ok = 0;
    c.tombstone_max = 64;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "churn");
    base_blocks = fx_live(&a);
    base_bytes = fx_live_bytes(&a);
    fx_value_init(&v, 1);
    for (i = 0; i < 100000; i++) {
        tfrdv_rendezvous* r = 0;
        if (tfrdv_mgr_find(m, i, &r, 0) != TFRDV_OK) break;
        tfrdv_mgr_initialize(r, 0, 0);
        if (i % 10 == 0) { /* now and then a buffered value that cleanup must release */
            v.released = 0;
            sends_ok += tfrdv_send(r, &k.pk, 0, &v.v, 0, 0) == TFRDV_OK;
        }
        tfrdv_unref(r);
        tfrdv_mgr_cleanup(m, i);
    }
    TT_CHECK_EQ_INT(i, 100000);
    TT_CHECK_EQ_INT(sends_ok, 10000);
    TT_CHECK_EQ_INT(fx_released(&v), 1); /* the last one */
    TT_CHECK_EQ_INT(stats(m).tombstones, 64);
    TT_CHECK_EQ_INT(stats(m).active_steps, 0);
    /* tombstones live in a fixed-size set allocated at create: nothing beyond the baseline */
    TT_CHECK_EQ_INT(fx_live(&a), base_blocks);
    TT_CHECK_EQ_INT(fx_live_bytes(&a), base_bytes);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* ============================================================================================
   threads: requests, step owners (find, initialize, send, cleanup) and expiry race (for tsan)
   ============================================================================================ */
#define RN 1500
typedef struct race {
    tfrdv_mgr* m;
    fx_key* keys;
    fx_value* vals;
    fx_serve* srv;
    int refused; /* sends refused (cleaned meanwhile): released by us */
    volatile int stop;
} race;
static void* race_server(void* p) {
    race* x = (race*)p;
    int i;
    for (i = 0; i < RN; i++) tfrdv_mgr_serve(x->m, i, x->keys[i].buf, x->keys[i].len, i + 1, 0, fx_serve_done, &x->srv[i]);
    return 0;
}
static void* race_owner(void* p) {
    race* x = (race*)p;
    int i;
    for (i = 0; i < RN; i++) {
        tfrdv_rendezvous* r = 0;
        if (tfrdv_mgr_find(x->m, i, &r, 0) != TFRDV_OK) continue;
        tfrdv_mgr_initialize(r, 0, 0);
        if (tfrdv_send(r, &x->keys[i].pk, 0, &x->vals[i].v, 0, 0) != TFRDV_OK) {
            x->refused++;
            tfrdv_value_release(&x->vals[i].v);
        }
        tfrdv_unref(r);
        if (i >= 3) tfrdv_mgr_cleanup(x->m, i - 3); /* the master cleans up a little later */
    }
    return 0;
}
static void* race_expirer(void* p) {
    race* x = (race*)p;
    while (!__atomic_load_n(&x->stop, __ATOMIC_SEQ_CST)) {
        fx_set_now(fx_get_now() + 3);
        tfrdv_mgr_expire(x->m, fx_get_now());
    }
    return 0;
}
static void test_threads_serve_initialize_expire_cleanup_exactly_once(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    static fx_key keys[RN];
    static fx_value vals[RN];
    static fx_serve srv[RN];
    race x;
    pthread_t t1, t2, t3;
    int i, not_once = 0, not_released = 0, bad = 0, ok = 0;
    char edge[16];
    c.deferred_timeout_ns = 20;
    c.tombstone_max = 256;
    fx_set_now(0);
    for (i = 0; i < RN; i++) {
        snprintf(edge, sizeof edge, "r%d", i);
        key(&keys[i], B0, INC_B, A0, edge);
        fx_value_init(&vals[i], i);
    }
    memset(srv, 0, sizeof srv);
    memset(&x, 0, sizeof x);
    x.m = mk(&c);
    x.keys = keys;
    x.vals = vals;
    x.srv = srv;
    pthread_create(&t1, 0, race_server, &x);
    pthread_create(&t2, 0, race_owner, &x);
    pthread_create(&t3, 0, race_expirer, &x);
    pthread_join(t1, 0);
    pthread_join(t2, 0);
    __atomic_store_n(&x.stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(t3, 0);
    tfrdv_mgr_cleanup_all(x.m);
    tfrdv_mgr_destroy(x.m);
    for (i = 0; i < RN; i++) {
        not_once += srv[i].calls != 1;
        not_released += fx_released(&vals[i]) != 1;
        if (srv[i].st.code == TFRDV_OK) ok++, bad += srv[i].value_ptr != &vals[i].v;
        else if (srv[i].st.code != TFRDV_ABORTED && srv[i].st.code != TFRDV_DEADLINE_EXCEEDED) bad++;
    }
    TT_CHECK_EQ_INT(not_once, 0);
    TT_CHECK_EQ_INT(not_released, 0);
    TT_CHECK_EQ_INT(bad, 0);
    FX_CHECK_EMPTY(&a);
}

/* CALLBACK RULES 7: the owner may drop the last reference as soon as its callback told it the
   receive completed, while the delivering thread is still returning from the library (the
   blocking tfrdv_recv + destroy pattern). The delivering thread must not touch the freed
   rendezvous afterwards (tsan/asan: no access to freed memory). */
typedef struct handoff {
    tfrdv_rendezvous* r;
    fx_key* k;
    fx_value* v;
    volatile int go, done;
} handoff;
static void handoff_done(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                         tfrdv_value* v, int dead) {
    handoff* h = (handoff*)u;
    (void)st;
    (void)sa;
    (void)ra;
    (void)dead;
    tfrdv_value_release(v);
    __atomic_store_n(&h->done, 1, __ATOMIC_SEQ_CST); /* the owner may now tear the step down */
}
static void* handoff_sender(void* p) {
    handoff* h = (handoff*)p;
    while (!__atomic_load_n(&h->go, __ATOMIC_SEQ_CST)) {}
    tfrdv_send(h->r, &h->k->pk, 0, &h->v->v, 0, 0); /* runs the owner's callback on this thread */
    return 0;
}
static void test_threads_last_unref_right_after_a_callback_signals(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m = mk(&c);
    fx_key k;
    fx_value v;
    int i, not_done = 0;
    key(&k, B0, INC_B, B0, "handoff");
    for (i = 0; i < 300; i++) {
        handoff h;
        pthread_t t;
        memset(&h, 0, sizeof h);
        h.r = step(m, i, 1);
        h.k = &k;
        fx_value_init(&v, i);
        h.v = &v;
        tfrdv_recv_async(h.r, &k.pk, 0, handoff_done, &h);
        pthread_create(&t, 0, handoff_sender, &h);
        __atomic_store_n(&h.go, 1, __ATOMIC_SEQ_CST);
        while (!__atomic_load_n(&h.done, __ATOMIC_SEQ_CST)) {}
        tfrdv_unref(h.r);        /* ours */
        tfrdv_mgr_cleanup(m, i); /* the table's: the last reference */
        pthread_join(t, 0);
        not_done += fx_released(&v) != 1;
    }
    TT_CHECK_EQ_INT(not_done, 0);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

static void test_no_assert_tripped(void) { TT_CHECK_EQ_INT(tt_asserts, 0); }

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_find_returns_same_rendezvous_per_step_and_counts_refs);
    TT_RUN(test_find_argument_errors);
    TT_RUN(test_loopback_and_its_managers_go_in_either_order);
    TT_RUN(test_create_rejects_bad_config_without_leaks);
    TT_RUN(test_config_zero_is_default_and_tfrdv_off_turns_off);
    TT_RUN(test_incarnation_zero_is_derived_nonzero);
    TT_RUN(test_serve_before_initialize_is_deferred_then_answered_in_arrival_order);
    TT_RUN(test_step_requested_hook_starts_the_step_and_the_request_is_served);
    TT_RUN(test_initialize_twice_same_name_ok_other_name_internal);
    TT_RUN(test_deferred_request_deadline_exceeded_names_step_and_key);
    TT_RUN(test_expired_stray_request_leaves_no_step_behind);
    TT_RUN(test_expired_request_keeps_a_step_that_is_in_use);
    TT_RUN(test_withdrawn_deferred_requests_leave_no_step_behind);
    TT_RUN(test_cleanup_aborts_receivers_and_deferred_and_releases_buffered_values);
    TT_RUN(test_idle_steps_are_cleaned_up_after_the_idle_timeout);
    TT_RUN(test_tombstone_fails_a_late_serve_at_once);
    TT_RUN(test_tombstones_are_bounded_by_tombstone_max);
    TT_RUN(test_tombstones_expire_after_ttl);
    TT_RUN(test_find_after_cleanup_creates_a_fresh_step);
    TT_RUN(test_cleanup_all_aborts_every_step);
    TT_RUN(test_steps_reports_active_ids_up_to_cap);
    TT_RUN(test_pending_reports_send_recv_remote_call_and_deferred);
    TT_RUN(test_serve_malformed_key_is_invalid_argument_naming_the_key);
    TT_RUN(test_serve_source_not_on_this_worker_is_invalid_argument);
    TT_RUN(test_serve_incarnation_mismatch_is_aborted_with_tensorflow_text);
    TT_RUN(test_serve_device_incarnation_hook_and_unknown_device_not_found);
    TT_RUN(test_serve_duplicate_request_id_is_aborted);
    TT_RUN(test_serve_request_id_zero_is_never_deduplicated);
    TT_RUN(test_serve_return_puts_the_value_back_first_and_frees_the_request_id);
    TT_RUN(test_serve_dedup_window_is_bounded);
    TT_RUN(test_response_cache_answers_a_retry_with_the_same_value_released_once_after_ack);
    TT_RUN(test_response_cache_waiters_share_one_answer_released_once_by_cleanup);
    TT_RUN(test_response_cache_replay_after_ack_is_a_duplicate);
    TT_RUN(test_response_cache_full_falls_back_to_dedup);
    TT_RUN(test_response_cache_is_not_filled_by_requests_that_never_reached_a_step);
    TT_RUN(test_send_before_initialize_is_failed_precondition);
    TT_RUN(test_send_with_source_of_another_worker_is_invalid_argument);
    TT_RUN(test_new_request_id_is_nonzero_and_unique_over_100000_draws);
    TT_RUN(test_destroy_with_live_steps_and_requests_completes_everything_once);
    TT_RUN(test_memory_100000_steps_return_to_baseline_plus_bounded_tombstones);
    TT_RUN(test_threads_serve_initialize_expire_cleanup_exactly_once);
    TT_RUN(test_threads_last_unref_right_after_a_callback_signals);
    TT_RUN(test_no_assert_tripped);
    return TT_MAIN_END();
}
