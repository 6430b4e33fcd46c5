/* test_adversary.c - attacks on the core's promises (tfrdv.h: CALLBACK RULES): callbacks that
   re-enter or destroy the object whose call is running them, cancels racing answers, hostile
   bytes. Each test names the attack; a test that once found a defect says what it was. */
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
#define INC_A 0xa7u
#define INC_B 0xb7u

static tfrdv_rendezvous* step_of(tfrdv_mgr* m, int64_t id) {
    tfrdv_rendezvous* r = 0;
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(m, id, &r, 0), TFRDV_OK);
    return r;
}

/* ---- re-entrancy: a callback run inside a call destroys the object that call works on ---- */

/* the three keys e0..e2 of the batch tests, and their parsed views */
static void batch_keys(tkey k[3], tfrdv_parsed_key pk[3]) {
    int i;
    for (i = 0; i < 3; i++) {
        char e[8];
        snprintf(e, sizeof e, "e%d", i);
        tkey_make(&k[i], A0, 1, B0, e);
        pk[i] = k[i].pk;
    }
}

/* a receiver whose callback drops the last reference to its rendezvous */
static void rcv_then_unref(rcv* self) { tfrdv_unref((tfrdv_rendezvous*)self->ctx); }

/* Defect: tfrdv_send_batch went on sending into a rendezvous that the receive callback of an
   earlier value had destroyed (use after free). Now the rest of the batch is refused with the
   destroy's status and stays the caller's. */
static void test_send_batch_whose_receiver_destroys_the_rendezvous(void) {
    fx_alloc a = {0};
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    tkey k[3];
    tfrdv_parsed_key pk[3];
    tval v[3];
    tfrdv_value* vals[3];
    rcv rc;
    size_t sent = 9;
    tfrdv_status st;
    int i;
    cfg.hooks = fx_alloc_hooks(&a);
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, 0), TFRDV_OK);
    batch_keys(k, pk);
    for (i = 0; i < 3; i++) {
        tval_init(&v[i], i);
        vals[i] = &v[i].v;
    }
    rcv_init(&rc);
    rc.then = rcv_then_unref;
    rc.ctx = r;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k[0].pk, 0, rcv_done, &rc, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send_batch(r, 3, pk, 0, vals, 0, &sent, &st), TFRDV_CANCELLED);
    TT_CHECK_EQ_INT(sent, 1);
    TT_CHECK_CONTAINS(st.msg, "Rendezvous destroyed");
    TT_CHECK_EQ_INT(rc.calls, 1);
    TT_CHECK_EQ_INT(rc.id, 0);
    TT_CHECK_EQ_INT(rel(&v[0]), 1);
    TT_CHECK_EQ_INT(rel(&v[1]), 0); /* the caller's still */
    TT_CHECK_EQ_INT(rel(&v[2]), 0);
    FX_CHECK_EMPTY(&a);
}

/* a batch receiver whose callback drops the last reference to its rendezvous */
static void batch_then_unref(brec* self) { tfrdv_unref((tfrdv_rendezvous*)self->ctx); }

/* Defect: tfrdv_recv_batch_async went on posting receives into a rendezvous that the batch's
   own callback (run at the first error) had destroyed. */
static void test_recv_batch_whose_callback_destroys_the_rendezvous_at_the_first_error(void) {
    fx_alloc a = {0};
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    tkey k[3];
    tfrdv_parsed_key pk[3];
    tfrdv_value* vals[3];
    int dead[3];
    brec b;
    cfg.hooks = fx_alloc_hooks(&a);
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, 0), TFRDV_OK);
    batch_keys(k, pk);
    memset(&b, 0, sizeof b);
    b.then = batch_then_unref;
    b.ctx = r;
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_ABORTED, "attack"), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_batch_async(r, 3, pk, 0, vals, dead, batch_done, &b), TFRDV_OK);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(b.code, TFRDV_ABORTED);
    FX_CHECK_EMPTY(&a);
}

/* a logger hook that drops the last reference to its rendezvous when told of the abort */
typedef struct unref_logger {
    tfrdv_rendezvous* r;
    int aborts;
} unref_logger;
static void log_then_unref(void* user, int level, const char* msg) {
    unref_logger* u = (unref_logger*)user;
    if (level == 1 && strstr(msg, "attack") && u->r) {
        tfrdv_rendezvous* r = u->r;
        u->aborts++;
        u->r = 0;
        tfrdv_unref(r);
    }
}

/* Defect: tfrdv_abort told the logger hook before it held the rendezvous; a hook that dropped the
   last reference freed it, and tfrdv_abort then drained the freed table. The pending receive
   completes once with the abort's status. */
static void test_abort_whose_logger_destroys_the_rendezvous(void) {
    fx_alloc a = {0};
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    unref_logger ul = {0, 0};
    tkey k;
    rcv rc;
    cfg.hooks = fx_alloc_hooks(&a);
    cfg.hooks.logger.fn = log_then_unref;
    cfg.hooks.logger.user = &ul;
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, 0), TFRDV_OK);
    ul.r = r;
    tkey_make(&k, A0, 1, B0, "e0");
    rcv_init(&rc);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, rcv_done, &rc, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_ABORTED, "attack"), TFRDV_OK);
    TT_CHECK_EQ_INT(ul.aborts, 1);
    TT_CHECK_EQ_INT(rc.calls, 1);
    TT_CHECK_EQ_INT(rc.code, TFRDV_ABORTED);
    FX_CHECK_EMPTY(&a);
}

/* a receiver of fx_values that, after recording, destroys a manager */
typedef struct killer {
    fx_recv rec;
    tfrdv_mgr* destroy;
} killer;
static void killer_done(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                        tfrdv_value* v, int dead) {
    killer* k = (killer*)u;
    fx_recv_done(&k->rec, st, sa, ra, v, dead);
    if (k->destroy) tfrdv_mgr_destroy(k->destroy);
}

/* Defect: tfrdv_mgr_serve_return handed the value to a waiting receiver whose callback destroyed
   the manager, then locked the freed manager to drop the request's hold. */
static void test_serve_return_to_a_receiver_that_destroys_the_manager(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m = mk(&c);
    tfrdv_rendezvous* r = step_of(m, 7);
    fx_key k;
    fx_value x;
    killer kl;
    key(&k, B0, INC_B, B0, "e");
    memset(&kl, 0, sizeof kl);
    kl.destroy = m;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, killer_done, &kl, 0), TFRDV_OK);
    tfrdv_unref(r);
    TT_CHECK_EQ_INT(tfrdv_mgr_serve_return(m, 7, k.buf, k.len, 1234, 0, fx_value_init(&x, 3), 0, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(kl.rec.calls, 1);
    TT_CHECK_EQ_INT(kl.rec.st.code, TFRDV_OK);
    TT_CHECK(fx_recv_matches(&kl.rec, 3));
    TT_CHECK_EQ_INT(fx_released(&x), 1);
    FX_CHECK_EMPTY(&a);
}

/* ---- a provider that breaks its contract ---- */
static void null_ok_start(void* u, tfrdv_call* call) {
    (void)u;
    tfrdv_call_finish(call, TFRDV_OK, "", 0, 0); /* OK, yet no value and not dead */
}
static void null_ok_cancel(void* u, tfrdv_call* call) {
    (void)u;
    (void)call;
}
/* Defect: a provider that finished OK with no value for a live tensor had the core hand the
   receiver OK and a NULL value (the receiver dereferences it: a crash in the user's code). Now the
   receiver gets INTERNAL naming the key and the worker. */
static void test_provider_finishing_ok_without_a_value_fails_the_receive_internal(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m;
    tfrdv_rendezvous* r;
    fx_key k;
    fx_recv rec;
    memset(&c.transport, 0, sizeof c.transport);
    c.transport.start_call = null_ok_start;
    c.transport.cancel_call = null_ok_cancel;
    m = mk(&c);
    if (!m) return;
    r = step_of(m, 3);
    key(&k, A0, INC_A, B0, "e");
    memset(&rec, 0, sizeof rec);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, fx_recv_done, &rec, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(rec.calls, 1);
    TT_CHECK_EQ_INT(rec.st.code, TFRDV_INTERNAL);
    TT_CHECK_CONTAINS(rec.st.msg, "OK without a value");
    TT_CHECK_CONTAINS(rec.st.msg, WA);
    TT_CHECK(!rec.has_value && !rec.dead);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

/* ---- races: timeouts under a flood ---- */
/* 10,000 remote receives with a short call deadline, while the producer sends their values and
   another thread drives tfrdv_mgr_expire on a fake clock that keeps moving. Whatever interleaving
   happens: each receive completes exactly once, OK ones with their own value intact, and every
   value not received is still buffered on the producer (a timed-out fetch gives it back), then
   released exactly once by the cleanup. */
#define FL_N 10000
static fx_key fl_keys[FL_N];
static fx_value fl_vals[FL_N];
static fx_recv fl_rs[FL_N];
typedef struct flood {
    tfrdv_rendezvous* ra;
    tfrdv_mgr *ma, *mb;
    int cleanup_at; /* the sender cleans the serving step up before this value (FL_N: never) */
    int stop, send_failed;
} flood;
static void* fl_sender(void* p) {
    flood* f = (flood*)p;
    int i;
    for (i = 0; i < FL_N; i++) {
        if (i == f->cleanup_at) tfrdv_mgr_cleanup(f->ma, 11);
        if (tfrdv_send(f->ra, &fl_keys[i].pk, 0, fx_value_init(&fl_vals[i], i), 0, 0) != TFRDV_OK) {
            __atomic_add_fetch(&f->send_failed, 1, __ATOMIC_SEQ_CST);
            tfrdv_value_release(&fl_vals[i].v); /* a refused send leaves it ours */
        }
    }
    return 0;
}
static void* fl_expirer(void* p) {
    flood* f = (flood*)p;
    while (!__atomic_load_n(&f->stop, __ATOMIC_SEQ_CST)) {
        fx_set_now(fx_get_now() + 97);
        tfrdv_mgr_expire(f->mb, fx_get_now());
    }
    return 0;
}
static void flood_run(int cleanup_at, int restart_at) {
    fx_alloc a = {0};
    tfrdv_mgr_config ca = fx_mgr_config(WA, INC_A, &a), cb = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr_config c2 = fx_mgr_config(WA, INC_A + 1, &a);
    tfrdv_loopback* lb = 0;
    tfrdv_mgr *ma = 0, *mb = 0, *ma2 = 0;
    tfrdv_rendezvous *ra, *rb;
    pthread_t ts, te;
    flood f;
    int i, ok = 0, not_once = 0, bad = 0, not_released = 0;
    size_t buffered;
    cb.call_timeout_ns = 1000; /* ten expirer ticks */
    TT_CHECK_EQ_INT(tfrdv_loopback_create(0, &lb, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_loopback_add_worker(lb, WA, &ca, &ma, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_loopback_add_worker(lb, WB, &cb, &mb, 0), TFRDV_OK);
    c2.transport = tfrdv_loopback_transport(lb);
    ma2 = mk(&c2); /* worker A restarted: another incarnation under the same name */
    if (!ma || !mb || !ma2) return;
    ra = step_of(ma, 11);
    rb = step_of(mb, 11);
    memset(fl_rs, 0, sizeof fl_rs);
    for (i = 0; i < FL_N; i++) {
        char e[16];
        snprintf(e, sizeof e, "f%d", i);
        key(&fl_keys[i], A0, INC_A, B0, e);
        memset(&fl_vals[i], 0, sizeof fl_vals[i]);
    }
    memset(&f, 0, sizeof f);
    f.ra = ra;
    f.ma = ma;
    f.mb = mb;
    f.cleanup_at = cleanup_at;
    pthread_create(&ts, 0, fl_sender, &f);
    pthread_create(&te, 0, fl_expirer, &f);
    for (i = 0; i < FL_N; i++) {
        if (i == restart_at) TT_CHECK_EQ_INT(tfrdv_loopback_register(lb, WA, ma2, 0), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_recv_async(rb, &fl_keys[i].pk, 0, fx_recv_done, &fl_rs[i], 0), TFRDV_OK);
    }
    pthread_join(ts, 0);
    __atomic_store_n(&f.stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(te, 0);
    fx_set_now(fx_get_now() + 1000000);
    tfrdv_mgr_expire(mb, fx_get_now()); /* the receives still waiting time out now */
    for (i = 0; i < FL_N; i++) {
        not_once += fl_rs[i].calls != 1;
        if (fl_rs[i].st.code == TFRDV_OK) {
            ok++;
            bad += !fx_recv_matches(&fl_rs[i], i) || i >= cleanup_at;
        } else {
            bad += fl_rs[i].st.code != TFRDV_DEADLINE_EXCEEDED && (cleanup_at == FL_N || fl_rs[i].st.code != TFRDV_ABORTED) &&
                   (restart_at == FL_N || fl_rs[i].st.code != TFRDV_ABORTED || fl_rs[i].st.detail != TFRDV_DETAIL_WORKER_RESTARTED);
        }
    }
    buffered = pending_of(ra, TFRDV_PENDING_SEND);
    TT_CHECK_EQ_INT(f.send_failed, FL_N - cleanup_at);
    TT_CHECK_EQ_INT(not_once, 0);
    TT_CHECK_EQ_INT(bad, 0);
    if (cleanup_at == FL_N) TT_CHECK_EQ_INT((long)buffered + ok, FL_N); /* none lost */
    else TT_CHECK_EQ_INT(buffered, 0); /* the cleanup released them */
    tfrdv_unref(ra);
    tfrdv_unref(rb);
    tfrdv_mgr_destroy(mb);
    tfrdv_mgr_destroy(ma);
    tfrdv_mgr_destroy(ma2);
    tfrdv_loopback_destroy(lb);
    for (i = 0; i < FL_N; i++) not_released += fx_released(&fl_vals[i]) != 1;
    TT_CHECK_EQ_INT(not_released, 0);
    FX_CHECK_EMPTY(&a);
}
static void test_flood_of_short_deadline_receives_while_values_arrive(void) { flood_run(FL_N, FL_N); }
/* the same, and the serving step is cleaned up halfway: each value is received or released, once */
static void test_flood_with_the_serving_step_cleaned_up_halfway(void) { flood_run(FL_N / 2, FL_N); }
/* the same, and the serving worker restarts after half of the receives were posted (another
   manager, another incarnation, under its name): fetches in flight finish with the old one or give
   its value back to it; later ones fail ABORTED, WORKER_RESTARTED; every value still received once
   or left buffered */
static void test_flood_with_the_serving_worker_restarted_halfway(void) { flood_run(FL_N, FL_N / 2); }

/* the same on a local rendezvous with blocking receives: 5,000 tfrdv_recv with timeouts of 10 to
   50 us (each makes a private cancellation manager) race their values' sends. A receive that
   timed out took nothing: its value stays buffered. Even keys are sent backwards, so receives
   both find their value, wait for it, and give up on it. */
#define LF_N 5000
typedef struct lflood {
    tfrdv_rendezvous* r;
    tkey* keys;
    tval* vals;
    int send_failed;
} lflood;
static void* lf_sender(void* p) {
    lflood* f = (lflood*)p;
    int j;
    for (j = 0; j < LF_N; j++) {
        int i = j % 2 ? j : LF_N - 2 - j + (LF_N % 2); /* odd keys in order, even ones backwards */
        if (tfrdv_send(f->r, &f->keys[i].pk, 0, &f->vals[i].v, 0, 0) != TFRDV_OK) {
            __atomic_add_fetch(&f->send_failed, 1, __ATOMIC_SEQ_CST);
            tfrdv_value_release(&f->vals[i].v);
        }
    }
    return 0;
}
static void test_blocking_receives_with_short_timeouts_race_their_sends(void) {
    static tkey keys[LF_N];
    static tval vals[LF_N];
    fx_alloc a = {0};
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    pthread_t ts;
    lflood f;
    int i, ok = 0, bad = 0, not_released = 0;
    size_t buffered;
    cfg.hooks = fx_alloc_hooks(&a);
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, 0), TFRDV_OK);
    if (!r) return;
    for (i = 0; i < LF_N; i++) {
        char e[16];
        snprintf(e, sizeof e, "l%d", i);
        tkey_make(&keys[i], A0, 1, B0, e);
        tval_init(&vals[i], i);
    }
    f.r = r;
    f.keys = keys;
    f.vals = vals;
    f.send_failed = 0;
    pthread_create(&ts, 0, lf_sender, &f);
    for (i = 0; i < LF_N; i++) {
        tfrdv_value* v = 0;
        int dead = 0;
        tfrdv_status st;
        tfrdv_code c = tfrdv_recv(r, &keys[i].pk, 0, (int64_t)(i % 5 + 1) * 10000, &v, &dead, &st);
        if (c == TFRDV_OK) {
            ok++;
            bad += vid(v) != i || dead;
            tfrdv_value_release(v);
        } else {
            bad += c != TFRDV_DEADLINE_EXCEEDED || v != 0;
        }
    }
    pthread_join(ts, 0);
    buffered = pending_of(r, TFRDV_PENDING_SEND);
    TT_CHECK_EQ_INT(f.send_failed, 0);
    TT_CHECK_EQ_INT(bad, 0);
    TT_CHECK_EQ_INT((long)buffered + ok, LF_N);
    tfrdv_destroy(r);
    for (i = 0; i < LF_N; i++) not_released += rel(&vals[i]) != 1;
    TT_CHECK_EQ_INT(not_released, 0);
    FX_CHECK_EMPTY(&a);
}

static void test_no_assert_tripped(void) { TT_CHECK_EQ_INT(tt_asserts, 0); }

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_send_batch_whose_receiver_destroys_the_rendezvous);
    TT_RUN(test_recv_batch_whose_callback_destroys_the_rendezvous_at_the_first_error);
    TT_RUN(test_serve_return_to_a_receiver_that_destroys_the_manager);
    TT_RUN(test_abort_whose_logger_destroys_the_rendezvous);
    TT_RUN(test_provider_finishing_ok_without_a_value_fails_the_receive_internal);
    TT_RUN(test_flood_of_short_deadline_receives_while_values_arrive);
    TT_RUN(test_flood_with_the_serving_step_cleaned_up_halfway);
    TT_RUN(test_flood_with_the_serving_worker_restarted_halfway);
    TT_RUN(test_blocking_receives_with_short_timeouts_race_their_sends);
    TT_RUN(test_no_assert_tripped);
    return TT_MAIN_END();
}
