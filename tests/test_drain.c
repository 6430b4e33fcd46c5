/* test_drain.c - a producer learns when its step was consumed: tfrdv_mgr_cleanup_when_drained and
   tfrdv_mgr_drain. Contract (tfrdv.h, step manager): the step is cleaned up once nothing is
   buffered or waiting in its table, nothing deferred, being answered or in flight, and every value
   served with TFRDV_SERVE_CONFIRMS was confirmed; no value is lost (a value given back after its
   hand-over keeps the step alive) and done runs exactly once: OK, DEADLINE_EXCEEDED naming what was
   left, the step's abort status, or ABORTED when a cleanup or shutdown came first.
   Time is a fake clock (fixtures.h) for the timeouts that tfrdv_mgr_expire acts on. */
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
#define B0 WB "/device:CPU:0"
#define INC_B 0xb7u

/* what a drain callback saw */
typedef struct drained {
    int calls;
    int64_t step;
    tfrdv_status st;
    tfrdv_mgr* destroy; /* destroy this manager from the callback */
} drained;
static void on_drained(void* u, int64_t step_id, const tfrdv_status* st) {
    drained* d = (drained*)u;
    d->calls++;
    d->step = step_id;
    d->st = *st;
    if (d->destroy) tfrdv_mgr_destroy(d->destroy);
}
/* a: the allocator that checks for leaks, c: worker B's config on the fake clock, m: its manager */
#define MGR_B(a, c, m)                                    \
    fx_alloc a = {0};                                     \
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);    \
    tfrdv_mgr* m = mk(&c)
static tfrdv_rendezvous* step(tfrdv_mgr* m, int64_t id) {
    tfrdv_rendezvous* r = 0;
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, id, &r, 0), TFRDV_OK);
    if (r) TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, 0), TFRDV_OK);
    return r;
}
static int64_t steps_now(tfrdv_mgr* m) { return (int64_t)tfrdv_mgr_steps(m, 0, 0); }
static void serve_ex(tfrdv_mgr* m, int64_t step_id, const fx_key* k, int64_t rid, unsigned flags, fx_serve* s) {
    TT_CHECK_EQ_INT(tfrdv_mgr_serve_ex(m, step_id, k->buf, k->len, rid, flags, 0, fx_serve_done, s), TFRDV_OK);
}

static void test_unknown_step_has_drained_already_and_is_tombstoned(void) {
    MGR_B(a, c, m);
    drained d = {0};
    fx_key k;
    fx_serve s = {0};
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 5, -1, on_drained, &d), TFRDV_OK);
    TT_CHECK_EQ_INT(d.calls, 1); /* inline */
    TT_CHECK_EQ_INT(d.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(d.step, 5);
    key(&k, B0, INC_B, A0, "late");
    serve_ex(m, 5, &k, 0, 0, &s); /* a request after the cleanup fails at once, as after tfrdv_mgr_cleanup */
    TT_CHECK_EQ_INT(s.st.code, TFRDV_ABORTED);
    TT_CHECK_CONTAINS(s.st.msg, "Cleanup 5");
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(0, 5, -1, on_drained, &d), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 5, -1, 0, &d), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(d.calls, 1);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* local consumer: the drain ends when the last buffered value is received, not before */
static void test_drain_ends_when_the_last_value_is_received(void) {
    MGR_B(a, c, m);
    tfrdv_rendezvous* r = step(m, 7);
    fx_key k;
    fx_value v1, v2;
    fx_recv r1, r2;
    drained d = {0};
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    key(&k, B0, INC_B, B0, "x");
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v1, 1), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v2, 2), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 7, -1, on_drained, &d), TFRDV_OK);
    TT_CHECK_EQ_INT(d.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, fx_recv_done, &r1, 0), TFRDV_OK);
    TT_CHECK(fx_recv_matches(&r1, 1));
    TT_CHECK_EQ_INT(d.calls, 0); /* one value left */
    TT_CHECK_EQ_INT(steps_now(m), 1);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, fx_recv_done, &r2, 0), TFRDV_OK);
    TT_CHECK(fx_recv_matches(&r2, 2));
    TT_CHECK_EQ_INT(d.calls, 1); /* noticed by the receive itself, no expire needed */
    TT_CHECK_EQ_INT(d.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(steps_now(m), 0);
    TT_CHECK_EQ_INT(stats(m).steps_drained, 1);
    TT_CHECK_EQ_INT(fx_released(&v1) + fx_released(&v2), 2);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* a waiting receiver keeps the step: the drain ends when the value it waits for comes */
static void test_a_waiting_receive_keeps_the_step_until_its_value_comes(void) {
    MGR_B(a, c, m);
    tfrdv_rendezvous* r = step(m, 8);
    fx_key k;
    fx_value v;
    fx_recv rv;
    drained d = {0};
    memset(&rv, 0, sizeof rv);
    key(&k, B0, INC_B, B0, "y");
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, fx_recv_done, &rv, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 8, -1, on_drained, &d), TFRDV_OK);
    TT_CHECK_EQ_INT(d.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 3), 0, 0), TFRDV_OK);
    TT_CHECK(fx_recv_matches(&rv, 3));
    TT_CHECK_EQ_INT(d.calls, 1);
    TT_CHECK_EQ_INT(d.st.code, TFRDV_OK);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* a confirming transport: handed over is not delivered; the confirmation ends the drain */
static void test_confirmed_delivery_ends_the_drain(void) {
    MGR_B(a, c, m);
    tfrdv_rendezvous* r = step(m, 9);
    fx_key k;
    fx_value v;
    fx_serve s = {0};
    drained d = {0};
    key(&k, B0, INC_B, A0, "w");
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 4), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 9, -1, on_drained, &d), TFRDV_OK);
    s.keep = 1;
    serve_ex(m, 9, &k, 77, TFRDV_SERVE_CONFIRMS, &s);
    TT_CHECK(s.calls == 1 && s.st.code == TFRDV_OK && s.kept == &v.v);
    TT_CHECK_EQ_INT(d.calls, 0); /* on its way, not confirmed */
    TT_CHECK_EQ_INT(stats(m).deliveries_unconfirmed, 1);
    tfrdv_mgr_expire(m, fx_get_now()); /* no timeout: nothing happens */
    TT_CHECK_EQ_INT(d.calls, 0);
    tfrdv_mgr_serve_delivered(m, 12345); /* unknown ids are ignored */
    TT_CHECK_EQ_INT(d.calls, 0);
    tfrdv_value_release(s.kept);
    tfrdv_mgr_serve_delivered(m, 77);
    TT_CHECK_EQ_INT(d.calls, 1);
    TT_CHECK_EQ_INT(d.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(stats(m).deliveries_unconfirmed, 0);
    tfrdv_mgr_serve_delivered(m, 77); /* twice: ignored */
    TT_CHECK_EQ_INT(d.calls, 1);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* the client gave up on the answer: the value goes back and the step waits for its next taker;
   before the fix a drain counting only the table would have cleaned the step and lost it */
static void test_a_value_given_back_is_not_lost_to_the_drain(void) {
    MGR_B(a, c, m);
    tfrdv_rendezvous* r = step(m, 10);
    fx_key k;
    fx_value v;
    fx_serve s1, s2;
    drained d = {0};
    tfrdv_status st;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    key(&k, B0, INC_B, A0, "back");
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 5), 0, 0), TFRDV_OK);
    s1.keep = 1;
    serve_ex(m, 10, &k, 81, TFRDV_SERVE_CONFIRMS, &s1);
    TT_CHECK(s1.kept == &v.v);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 10, -1, on_drained, &d), TFRDV_OK);
    TT_CHECK_EQ_INT(d.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve_return(m, 10, k.buf, k.len, 81, &s1.send_args, s1.kept, 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(d.calls, 0); /* back in the table */
    TT_CHECK_EQ_INT(fx_released(&v), 0);
    s2.keep = 1;
    serve_ex(m, 10, &k, 82, TFRDV_SERVE_CONFIRMS, &s2);
    TT_CHECK(s2.kept == &v.v);
    TT_CHECK_EQ_INT(d.calls, 0);
    tfrdv_value_release(s2.kept);
    tfrdv_mgr_serve_delivered(m, 82);
    TT_CHECK_EQ_INT(d.calls, 1);
    TT_CHECK_EQ_INT(d.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* without TFRDV_SERVE_CONFIRMS the hand-over is the delivery */
static void test_without_confirms_the_answer_is_the_delivery(void) {
    MGR_B(a, c, m);
    tfrdv_rendezvous* r = step(m, 11);
    fx_key k;
    fx_value v;
    fx_serve s = {0};
    drained d = {0};
    key(&k, B0, INC_B, A0, "plain");
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 6), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 11, -1, on_drained, &d), TFRDV_OK);
    serve_ex(m, 11, &k, 90, 0, &s);
    TT_CHECK_EQ_INT(s.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(d.calls, 1);
    TT_CHECK_EQ_INT(d.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(stats(m).deliveries_unconfirmed, 0);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* a request served before the step starts keeps it; a request waiting in the table too */
static void test_deferred_and_waiting_requests_keep_the_step(void) {
    MGR_B(a, c, m);
    tfrdv_rendezvous* r = 0;
    fx_key k;
    fx_value v;
    fx_serve s = {0};
    drained d = {0};
    key(&k, B0, INC_B, A0, "early");
    serve_ex(m, 12, &k, 91, TFRDV_SERVE_CONFIRMS, &s); /* deferred: the step is not initialised */
    TT_CHECK_EQ_INT(s.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 12, -1, on_drained, &d), TFRDV_OK);
    TT_CHECK_EQ_INT(d.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 12, &r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, 0), TFRDV_OK); /* now it waits in the table */
    TT_CHECK_EQ_INT(s.calls, 0);
    TT_CHECK_EQ_INT(d.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 7), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(s.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(d.calls, 0); /* confirming: not yet */
    tfrdv_mgr_serve_delivered(m, 91);
    TT_CHECK_EQ_INT(d.calls, 1);
    TT_CHECK_EQ_INT(d.st.code, TFRDV_OK);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* the timeout (acted on by tfrdv_mgr_expire) cleans up as tfrdv_mgr_cleanup and says what was left */
static void test_timeout_cleans_up_and_names_what_was_left(void) {
    MGR_B(a, c, m);
    tfrdv_rendezvous* r = step(m, 13);
    fx_key k1, k2, k3;
    fx_value v1, v2, v3;
    fx_recv rv;
    fx_serve s = {0};
    drained d = {0};
    int64_t next;
    memset(&rv, 0, sizeof rv);
    fx_set_now(1000000000);
    key(&k1, B0, INC_B, B0, "left1");
    key(&k2, B0, INC_B, B0, "left2");
    key(&k3, B0, INC_B, A0, "left3");
    TT_CHECK_EQ_INT(tfrdv_send(r, &k1.pk, 0, fx_value_init(&v1, 8), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k1.pk, 0, fx_value_init(&v2, 9), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k3.pk, 0, fx_value_init(&v3, 10), 0, 0), TFRDV_OK);
    s.keep = 1;
    serve_ex(m, 13, &k3, 95, TFRDV_SERVE_CONFIRMS, &s); /* handed over, never confirmed */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k2.pk, 0, fx_recv_done, &rv, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 13, 250000000, on_drained, &d), TFRDV_OK);
    next = tfrdv_mgr_expire(m, fx_get_now());
    TT_CHECK_EQ_INT(next, 1250000000); /* the drain's deadline */
    TT_CHECK_EQ_INT(d.calls, 0);
    fx_set_now(1250000000);
    tfrdv_mgr_expire(m, fx_get_now());
    TT_CHECK_EQ_INT(d.calls, 1);
    TT_CHECK_EQ_INT(d.st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_CONTAINS(d.st.msg, "step 13 did not drain within 250 ms");
    TT_CHECK_CONTAINS(d.st.msg, "2 values buffered, 1 receives waiting");
    TT_CHECK_CONTAINS(d.st.msg, "1 deliveries unconfirmed");
    TT_CHECK_EQ_INT(stats(m).drains_timed_out, 1);
    TT_CHECK_EQ_INT(rv.calls, 1); /* the waiting receive learns of the cleanup */
    TT_CHECK_EQ_INT(rv.st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(fx_released(&v1) + fx_released(&v2), 2);
    /* the unconfirmed value comes back after the cleanup: released, the step stays gone */
    TT_CHECK_EQ_INT(tfrdv_mgr_serve_return(m, 13, k3.buf, k3.len, 95, 0, s.kept, 0, 0), TFRDV_ABORTED);
    TT_CHECK_EQ_INT(fx_released(&v3), 1);
    TT_CHECK_EQ_INT(stats(m).deliveries_unconfirmed, 0);
    TT_CHECK_EQ_INT(steps_now(m), 0);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* whatever comes first ends the drain exactly once: cleanup, abort, shutdown */
static void test_cleanup_abort_and_shutdown_end_a_pending_drain(void) {
    MGR_B(a, c, m);
    tfrdv_rendezvous* r1 = step(m, 21);
    tfrdv_rendezvous* r2 = step(m, 22);
    tfrdv_rendezvous* r3 = step(m, 23);
    fx_key k;
    fx_value v1, v2, v3;
    drained d1, d2, d3, d3b;
    memset(&d1, 0, sizeof d1);
    memset(&d2, 0, sizeof d2);
    memset(&d3, 0, sizeof d3);
    memset(&d3b, 0, sizeof d3b);
    key(&k, B0, INC_B, B0, "kept");
    TT_CHECK_EQ_INT(tfrdv_send(r1, &k.pk, 0, fx_value_init(&v1, 11), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r2, &k.pk, 0, fx_value_init(&v2, 12), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r3, &k.pk, 0, fx_value_init(&v3, 13), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 21, -1, on_drained, &d1), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 22, -1, on_drained, &d2), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 23, -1, on_drained, &d3), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 23, -1, on_drained, &d3b), TFRDV_OK); /* two on one step */
    tfrdv_mgr_cleanup(m, 21);
    TT_CHECK_EQ_INT(d1.calls, 1);
    TT_CHECK_EQ_INT(d1.st.code, TFRDV_ABORTED);
    TT_CHECK_CONTAINS(d1.st.msg, "Cleanup 21 came before the step drained");
    TT_CHECK_EQ_INT(tfrdv_abort(r2, TFRDV_INTERNAL, "device lost"), TFRDV_OK);
    tfrdv_mgr_expire(m, fx_get_now()); /* an abort is noticed here */
    TT_CHECK_EQ_INT(d2.calls, 1);
    TT_CHECK_EQ_INT(d2.st.code, TFRDV_INTERNAL);
    TT_CHECK_CONTAINS(d2.st.msg, "device lost");
    TT_CHECK_EQ_INT(steps_now(m), 1);
    tfrdv_unref(r1);
    tfrdv_unref(r2);
    tfrdv_unref(r3);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(d3.calls, 1);
    TT_CHECK_EQ_INT(d3b.calls, 1);
    TT_CHECK_EQ_INT(d3.st.code, TFRDV_ABORTED);
    TT_CHECK_CONTAINS(d3.st.msg, "Shutdown: step 23");
    TT_CHECK_EQ_INT(fx_released(&v1) + fx_released(&v2) + fx_released(&v3), 3);
    FX_CHECK_EMPTY(&a);
}

/* the callback may destroy the manager (the owner's last reference) */
static void test_the_callback_may_destroy_the_manager(void) {
    MGR_B(a, c, m);
    tfrdv_rendezvous* r = step(m, 31);
    fx_key k;
    fx_value v;
    fx_serve s = {0};
    drained d = {0};
    key(&k, B0, INC_B, A0, "last");
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 14), 0, 0), TFRDV_OK);
    tfrdv_unref(r);
    d.destroy = m;
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 31, -1, on_drained, &d), TFRDV_OK);
    s.keep = 1;
    serve_ex(m, 31, &k, 99, TFRDV_SERVE_CONFIRMS, &s);
    tfrdv_mgr_ref(m); /* a transport holds one while it confirms */
    tfrdv_mgr_serve_delivered(m, 99); /* the callback destroys the manager */
    TT_CHECK_EQ_INT(d.calls, 1);
    TT_CHECK_EQ_INT(d.st.code, TFRDV_OK);
    tfrdv_value_release(s.kept);
    tfrdv_mgr_unref(m);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    FX_CHECK_EMPTY(&a);
}

/* the callback of a drain that timed out destroys the manager from inside tfrdv_mgr_expire (the
   host's last reference: nothing else holds one): expire returns without touching it again */
static void test_the_timeout_callback_may_destroy_the_manager_inside_expire(void) {
    MGR_B(a, c, m);
    tfrdv_rendezvous* r = step(m, 32);
    fx_key k;
    fx_value v;
    drained d = {0};
    fx_set_now(1000000000);
    key(&k, B0, INC_B, B0, "stays");
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v, 15), 0, 0), TFRDV_OK);
    tfrdv_unref(r);
    d.destroy = m;
    TT_CHECK_EQ_INT(tfrdv_mgr_cleanup_when_drained(m, 32, 1000, on_drained, &d), TFRDV_OK);
    TT_CHECK_EQ_INT(d.calls, 0);
    fx_set_now(1000001000);
    (void)tfrdv_mgr_expire(m, fx_get_now()); /* the callback destroys the manager */
    TT_CHECK_EQ_INT(d.calls, 1);
    TT_CHECK_EQ_INT(d.st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    FX_CHECK_EMPTY(&a);
}

/* a receive the cleanup aborts destroys the manager from its callback (the owner's reference;
   the step's own, dropped next, was the last): the cleanup returns without touching it */
typedef struct recv_destroys { int calls; tfrdv_code code; tfrdv_mgr* m; } recv_destroys;
static void recv_destroy_mgr(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                             tfrdv_value* v, int is_dead) {
    recv_destroys* d = (recv_destroys*)u;
    (void)sa;
    (void)ra;
    (void)is_dead;
    d->calls++;
    d->code = st->code;
    tfrdv_value_release(v);
    tfrdv_mgr_destroy(d->m);
}
/* ... from tfrdv_mgr_cleanup (how 0), tfrdv_mgr_cleanup_all (1), and the cleanup of a
   tfrdv_mgr_drain that timed out (2) */
static void test_a_receive_aborted_by_cleanup_may_destroy_the_manager(void) {
    int how;
    for (how = 0; how < 3; how++) {
        MGR_B(a, c, m);
        tfrdv_rendezvous* r = step(m, 33);
        fx_key k;
        recv_destroys d;
        tfrdv_status st;
        memset(&d, 0, sizeof d);
        d.m = m;
        key(&k, B0, INC_B, B0, "never");
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, recv_destroy_mgr, &d, 0), TFRDV_OK);
        tfrdv_unref(r);
        if (how == 0) tfrdv_mgr_cleanup(m, 33); /* the callback destroys the manager */
        else if (how == 1) tfrdv_mgr_cleanup_all(m);
        else TT_CHECK_EQ_INT(tfrdv_mgr_drain(m, 33, 0, &st), TFRDV_DEADLINE_EXCEEDED);
        TT_CHECK_EQ_INT(d.calls, 1);
        TT_CHECK_EQ_INT(d.code, TFRDV_ABORTED);
        FX_CHECK_EMPTY(&a);
    }
}

/* tfrdv_mgr_drain blocks until another thread takes the values, or times out by itself */
typedef struct taker {
    tfrdv_rendezvous* r;
    fx_key* k;
    int n;
    fx_recv got[4];
} taker;
static void* take_later(void* p) {
    taker* t = (taker*)p;
    struct timespec ts = {0, 30 * 1000000};
    int i;
    nanosleep(&ts, 0);
    for (i = 0; i < t->n; i++) {
        tfrdv_value* v = 0;
        if (tfrdv_recv(t->r, &t->k->pk, 0, 0, &v, 0, 0) == TFRDV_OK) t->got[i].calls = 1;
        tfrdv_value_release(v);
    }
    return 0;
}
static void test_blocking_drain_returns_when_consumed_or_at_its_timeout(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    tfrdv_rendezvous* r;
    fx_key k;
    fx_value v[3];
    taker t;
    pthread_t th;
    tfrdv_status st;
    c.hooks.clock.now_ns = 0; /* real time: the wait is real */
    m = mk(&c);
    r = step(m, 41);
    memset(&t, 0, sizeof t);
    key(&k, B0, INC_B, B0, "blocking");
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v[0], 20), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v[1], 21), 0, 0), TFRDV_OK);
    t.r = r;
    t.k = &k;
    t.n = 2;
    TT_CHECK_EQ_INT(pthread_create(&th, 0, take_later, &t), 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_drain(m, 41, 10000000000LL, &st), TFRDV_OK);
    pthread_join(th, 0);
    TT_CHECK(t.got[0].calls == 1 && t.got[1].calls == 1);
    TT_CHECK_EQ_INT(steps_now(m), 0);
    tfrdv_unref(r);
    /* nobody takes it: DEADLINE_EXCEEDED from its own timer (no tfrdv_mgr_expire) */
    r = step(m, 42);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, 0, fx_value_init(&v[2], 22), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_drain(m, 42, 20000000, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_CONTAINS(st.msg, "1 values buffered");
    TT_CHECK_EQ_INT(steps_now(m), 0);
    TT_CHECK_EQ_INT(fx_released(&v[2]), 1);
    TT_CHECK_EQ_INT(tfrdv_mgr_drain(0, 42, 0, &st), TFRDV_INVALID_ARGUMENT);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* racing: a producer thread drains each step while a consumer thread serves and confirms or gives
   back at random; every value is delivered exactly once and every drain ends OK */
typedef struct race {
    tfrdv_mgr* m;
    fx_key* k;
    int steps, per_step;
    volatile int delivered, returned;
} race;
/* a serve answer handed to another thread: fields first, then the flag (release/acquire) */
typedef struct handoff {
    fx_serve s;
    int ready;
} handoff;
static void handoff_done(void* u, const tfrdv_status* st, const tfrdv_args* sa, tfrdv_value* v, int dead) {
    handoff* h = (handoff*)u;
    fx_serve_done(&h->s, st, sa, v, dead);
    __atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
}
static void* consume(void* p) {
    race* x = (race*)p;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int64_t rid = 1;
    int s = 0, taken = 0;
    while (s < x->steps) {
        handoff h;
        fx_serve* sv = &h.s;
        memset(&h, 0, sizeof h);
        sv->keep = 1;
        if (tfrdv_mgr_serve_ex(x->m, 1000 + s, x->k->buf, x->k->len, rid, TFRDV_SERVE_CONFIRMS, 0, handoff_done, &h) != TFRDV_OK) break;
        /* the producer may not have started the step yet: then the request waits (deferred) */
        while (__atomic_load_n(&h.ready, __ATOMIC_ACQUIRE) == 0) sched_yield();
        if (sv->st.code == TFRDV_OK && sv->kept) {
            if (fx_xorshift(&seed) % 3 == 0) {
                tfrdv_mgr_serve_return(x->m, 1000 + s, x->k->buf, x->k->len, rid, &sv->send_args, sv->kept, 0, 0);
                __atomic_add_fetch(&x->returned, 1, __ATOMIC_SEQ_CST);
            } else {
                tfrdv_value_release(sv->kept);
                tfrdv_mgr_serve_delivered(x->m, rid);
                __atomic_add_fetch(&x->delivered, 1, __ATOMIC_SEQ_CST);
                if (++taken == x->per_step) {
                    taken = 0;
                    s++;
                }
            }
        }
        rid++;
    }
    return 0;
}
static void test_threads_drain_while_values_are_confirmed_or_given_back(void) {
    enum { STEPS = 60, PER = 4 };
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    fx_key k;
    static fx_value v[STEPS][PER];
    race x;
    pthread_t th;
    int s, i, released = 0, ok = 0;
    tfrdv_status st;
    c.hooks.clock.now_ns = 0;
    m = mk(&c);
    key(&k, B0, INC_B, A0, "raced");
    memset((void*)&x, 0, sizeof x);
    x.m = m;
    x.k = &k;
    x.steps = STEPS;
    x.per_step = PER;
    TT_CHECK_EQ_INT(pthread_create(&th, 0, consume, &x), 0);
    for (s = 0; s < STEPS; s++) {
        tfrdv_rendezvous* r = step(m, 1000 + s);
        for (i = 0; i < PER; i++) tfrdv_send(r, &k.pk, 0, fx_value_init(&v[s][i], s * PER + i), 0, 0);
        tfrdv_unref(r);
        if (tfrdv_mgr_drain(m, 1000 + s, 20000000000LL, &st) == TFRDV_OK) ok++;
        else printf("    step %d: %s\n", s, st.msg);
    }
    pthread_join(th, 0);
    for (s = 0; s < STEPS; s++)
        for (i = 0; i < PER; i++) released += fx_released(&v[s][i]);
    TT_CHECK_EQ_INT(ok, STEPS);
    TT_CHECK_EQ_INT(x.delivered, STEPS * PER);
    TT_CHECK_EQ_INT(released, STEPS * PER);
    TT_CHECK_EQ_INT(stats(m).steps_drained, STEPS);
    TT_CHECK_EQ_INT(stats(m).deliveries_unconfirmed, 0);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

static void test_no_assert_tripped(void) { TT_CHECK_EQ_INT(tt_asserts, 0); }

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_unknown_step_has_drained_already_and_is_tombstoned);
    TT_RUN(test_drain_ends_when_the_last_value_is_received);
    TT_RUN(test_a_waiting_receive_keeps_the_step_until_its_value_comes);
    TT_RUN(test_confirmed_delivery_ends_the_drain);
    TT_RUN(test_a_value_given_back_is_not_lost_to_the_drain);
    TT_RUN(test_without_confirms_the_answer_is_the_delivery);
    TT_RUN(test_deferred_and_waiting_requests_keep_the_step);
    TT_RUN(test_timeout_cleans_up_and_names_what_was_left);
    TT_RUN(test_cleanup_abort_and_shutdown_end_a_pending_drain);
    TT_RUN(test_the_callback_may_destroy_the_manager);
    TT_RUN(test_the_timeout_callback_may_destroy_the_manager_inside_expire);
    TT_RUN(test_a_receive_aborted_by_cleanup_may_destroy_the_manager);
    TT_RUN(test_blocking_drain_returns_when_consumed_or_at_its_timeout);
    TT_RUN(test_threads_drain_while_values_are_confirmed_or_given_back);
    TT_RUN(test_no_assert_tripped);
    return TT_MAIN_END();
}
