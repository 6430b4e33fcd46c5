/* test_wait.c - tfrdv_transport.wait: a thread blocked in tfrdv_recv lends itself to the call's
   transport. The contract: wait gets the call it waits for, still valid (not recycled) until wait
   returns even when wait finished it; a timeout that is the receive's time left; 0 means "cannot
   help" and the receive then waits for the finish without calling wait again; the receive's
   timeout and a user cancellation still complete it (cancel_call reaches the provider, which
   returns from wait); tfrdv_recv_async never lends; the router passes wait to the route's
   transport and lends nothing for a route whose transport has none; tfrdv_call_will_wait tells
   start_call which calls a thread will lend itself to. The providers here are small and hold one
   call. */
#define _POSIX_C_SOURCE 200809L
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"
#include <pthread.h>
#include <time.h>

#define WA "/job:a/replica:0/task:0"
#define B0 "/job:b/replica:0/task:0/device:CPU:0"
#define C0 "/job:c/replica:0/task:0/device:CPU:0"
#define A0 WA "/device:CPU:0"
#define MS 1000000LL

enum { FINISH_IN_WAIT, DECLINE, SLEEP_IN_WAIT, WAIT_FOR_CANCEL };
typedef struct lender {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int mode, starts, cancels, waits, finish_in_start;
    int fail_starts;            /* starts left to finish UNAVAILABLE inside start_call */
    int will_wait[4];           /* tfrdv_call_will_wait at each of the first starts */
    int64_t first_timeout, max_timeout;
    tfrdv_call* call;           /* held from start until someone finishes it */
    int wrong_call;             /* wait was given another call than the held one */
    int key_ok_after_finish;    /* the call still read right after wait finished it */
    fx_value val;
} lender;

static void sleep_ns(int64_t ns) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    nanosleep(&ts, 0);
}
/* takes the held call (under mu), or NULL */
static tfrdv_call* take(lender* l) {
    tfrdv_call* c = l->call;
    l->call = 0;
    return c;
}
static void ln_start(void* u, tfrdv_call* call) {
    lender* l = (lender*)u;
    pthread_mutex_lock(&l->mu);
    if (l->starts < 4) l->will_wait[l->starts] = tfrdv_call_will_wait(call);
    l->starts++;
    if (l->finish_in_start || l->fail_starts) {
        if (l->fail_starts) l->fail_starts--;
        pthread_mutex_unlock(&l->mu);
        tfrdv_call_finish(call, TFRDV_UNAVAILABLE, "finished in start", 0, 0);
        return;
    }
    l->call = call;
    pthread_mutex_unlock(&l->mu);
}
static void ln_cancel(void* u, tfrdv_call* call) {
    lender* l = (lender*)u;
    tfrdv_call* c;
    pthread_mutex_lock(&l->mu);
    l->cancels++;
    c = l->call == call ? take(l) : 0;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (c) tfrdv_call_finish(c, TFRDV_CANCELLED, "cancelled by the lender", 0, 0);
}
static int ln_wait(void* u, tfrdv_call* call, int64_t timeout_ns) {
    lender* l = (lender*)u;
    tfrdv_call* c = 0;
    pthread_mutex_lock(&l->mu);
    if (!l->waits++) l->first_timeout = timeout_ns;
    if (timeout_ns > l->max_timeout) l->max_timeout = timeout_ns;
    if (l->call && l->call != call) l->wrong_call = 1;
    switch (l->mode) {
    case FINISH_IN_WAIT:
        c = take(l);
        pthread_mutex_unlock(&l->mu);
        if (c) {
            tfrdv_str k;
            tfrdv_call_finish(c, TFRDV_OK, "", &l->val.v, 0);
            k = tfrdv_call_key(c); /* valid until wait returns, even though it is finished */
            l->key_ok_after_finish = k.len > 0 && memcmp(k.ptr, "/job:b", 6) == 0;
        }
        return 1;
    case DECLINE:
        pthread_mutex_unlock(&l->mu);
        return 0;
    case SLEEP_IN_WAIT:
        pthread_mutex_unlock(&l->mu);
        sleep_ns(timeout_ns < 0 || timeout_ns > 5 * MS ? 5 * MS : timeout_ns);
        return 1;
    default: /* WAIT_FOR_CANCEL: sleeps until cancel_call comes (or the time is up) */
        while (l->call == call && timeout_ns != 0) pthread_cond_wait(&l->cv, &l->mu);
        pthread_mutex_unlock(&l->mu);
        return 1;
    }
}
static tfrdv_transport lender_transport(lender* l, int mode) {
    tfrdv_transport t;
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, 0);
    pthread_cond_init(&l->cv, 0);
    l->mode = mode;
    fx_value_init(&l->val, 7);
    memset(&t, 0, sizeof t);
    t.user = l;
    t.start_call = ln_start;
    t.cancel_call = ln_cancel;
    t.wait = ln_wait;
    return t;
}
static void lender_free(lender* l) {
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
}

/* a manager of WA over transport t; call objects are freed at once (no free list), so a call
   used after it was recycled is a use after free under ASan */
static tfrdv_mgr* mgr_over(fx_alloc* a, tfrdv_transport t, tfrdv_rendezvous** r) {
    tfrdv_mgr_config c = tfrdv_mgr_config_init();
    tfrdv_mgr* m;
    c.hooks = fx_alloc_hooks(a);
    c.worker_name = WA;
    c.transport = t;
    c.call_freelist_max = TFRDV_OFF;
    m = mk(&c);
    TT_CHECK(m != 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(m, 1, r, 0), TFRDV_OK);
    return m;
}
static tfrdv_code recv_from(tfrdv_rendezvous* r, const char* src, int64_t timeout_ns, tfrdv_cancel_mgr* cm,
                            tfrdv_value** v, tfrdv_status* st) {
    fx_key k;
    tfrdv_args a;
    int dead = 0;
    memset(&a, 0, sizeof a);
    a.cancel = cm;
    key(&k, src, 1, A0, "t");
    return tfrdv_recv(r, &k.pk, &a, timeout_ns, v, &dead, st);
}
static void done_mgr(fx_alloc* a, tfrdv_mgr* m, tfrdv_rendezvous* r) {
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(a);
}

/* the provider reads the answer on the waiting thread: one wait, the value, the call intact */
static void test_wait_can_finish_the_call_on_the_waiting_thread(void) {
    fx_alloc a = {0};
    lender l;
    tfrdv_rendezvous* r;
    tfrdv_mgr* m = mgr_over(&a, lender_transport(&l, FINISH_IN_WAIT), &r);
    tfrdv_value* v = 0;
    tfrdv_status st;
    TT_CHECK_EQ_INT(recv_from(r, B0, 0, 0, &v, &st), TFRDV_OK);
    TT_CHECK(v == &l.val.v);
    TT_CHECK_EQ_INT(l.waits, 1);
    TT_CHECK_EQ_INT(l.first_timeout, -1); /* no timeout: no limit */
    TT_CHECK_EQ_INT(l.wrong_call, 0);
    TT_CHECK_EQ_INT(l.key_ok_after_finish, 1);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(fx_released(&l.val), 1);
    done_mgr(&a, m, r);
    lender_free(&l);
}

/* 0 from wait: the receive waits for the finish (here from another thread), wait is not asked
   again */
static void* finish_later(void* p) {
    lender* l = (lender*)p;
    tfrdv_call* c;
    sleep_ns(20 * MS);
    pthread_mutex_lock(&l->mu);
    c = take(l);
    pthread_mutex_unlock(&l->mu);
    if (c) tfrdv_call_finish(c, TFRDV_OK, "", &l->val.v, 0);
    return 0;
}
static void test_wait_declined_falls_back_to_the_finish(void) {
    fx_alloc a = {0};
    lender l;
    tfrdv_rendezvous* r;
    tfrdv_mgr* m = mgr_over(&a, lender_transport(&l, DECLINE), &r);
    tfrdv_value* v = 0;
    tfrdv_status st;
    pthread_t th;
    pthread_create(&th, 0, finish_later, &l);
    TT_CHECK_EQ_INT(recv_from(r, B0, 10000 * MS, 0, &v, &st), TFRDV_OK);
    pthread_join(th, 0);
    TT_CHECK(v == &l.val.v);
    TT_CHECK_EQ_INT(l.waits, 1);
    TT_CHECK(l.first_timeout > 0 && l.first_timeout <= 10000 * MS);
    tfrdv_value_release(v);
    done_mgr(&a, m, r);
    lender_free(&l);
}

/* a provider that never answers: wait is asked again with the time left, then the receive times
   out, cancel_call reaches the provider and the receive says DEADLINE_EXCEEDED */
static void test_wait_gets_the_time_left_and_the_timeout_still_fires(void) {
    fx_alloc a = {0};
    lender l;
    tfrdv_rendezvous* r;
    tfrdv_mgr* m = mgr_over(&a, lender_transport(&l, SLEEP_IN_WAIT), &r);
    tfrdv_value* v = 0;
    tfrdv_status st;
    TT_CHECK_EQ_INT(recv_from(r, B0, 50 * MS, 0, &v, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK(v == 0);
    TT_CHECK(l.waits >= 2);
    TT_CHECK(l.max_timeout > 0 && l.max_timeout <= 50 * MS);
    TT_CHECK_EQ_INT(l.cancels, 1);
    TT_CHECK(l.call == 0); /* the provider finished it (CANCELLED) */
    done_mgr(&a, m, r);
    lender_free(&l);
}

/* a user cancellation while the thread is lent: cancel_call wakes the provider's wait */
static void* cancel_later(void* p) {
    sleep_ns(20 * MS);
    tfrdv_cancel_start((tfrdv_cancel_mgr*)p);
    return 0;
}
static void test_user_cancel_reaches_a_lent_thread(void) {
    fx_alloc a = {0};
    lender l;
    tfrdv_rendezvous* r;
    tfrdv_mgr* m = mgr_over(&a, lender_transport(&l, WAIT_FOR_CANCEL), &r);
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_value* v = 0;
    tfrdv_status st;
    pthread_t th;
    int timed;
    for (timed = 0; timed < 2; timed++) { /* without and with a timeout of its own */
        l.cancels = l.waits = 0;
        TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm, 0), TFRDV_OK);
        pthread_create(&th, 0, cancel_later, cm);
        TT_CHECK_EQ_INT(recv_from(r, B0, timed ? 100000 * MS : 0, cm, &v, &st), TFRDV_CANCELLED);
        pthread_join(th, 0);
        TT_CHECK(v == 0);
        TT_CHECK(l.waits >= 1); /* again while the lender finishes what it took: allowed */
        TT_CHECK_EQ_INT(l.cancels, 1);
        tfrdv_cancel_mgr_destroy(cm);
    }
    done_mgr(&a, m, r);
    lender_free(&l);
}

/* tfrdv_recv_async has no thread to lend */
static void on_done(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    (void)sa; (void)ra; (void)dead;
    *(tfrdv_code*)u = st->code;
    tfrdv_value_release(v);
}
static void test_async_receive_never_lends(void) {
    fx_alloc a = {0};
    lender l;
    tfrdv_rendezvous* r;
    tfrdv_mgr* m = mgr_over(&a, lender_transport(&l, FINISH_IN_WAIT), &r);
    tfrdv_code got = TFRDV_UNKNOWN;
    tfrdv_call* c;
    fx_key k;
    key(&k, B0, 1, A0, "t");
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, on_done, &got, 0), TFRDV_OK);
    c = take(&l);
    TT_CHECK(c != 0);
    tfrdv_call_finish(c, TFRDV_OK, "", &l.val.v, 0);
    TT_CHECK_EQ_INT(got, TFRDV_OK);
    TT_CHECK_EQ_INT(l.waits, 0);
    done_mgr(&a, m, r);
    lender_free(&l);
}

/* the router lends to the route's transport; a route without wait lends nothing, and a call
   finished inside start_call never waits */
static void test_router_passes_wait_to_the_route(void) {
    fx_alloc a = {0};
    lender lb, lc;
    tfrdv_route routes[2];
    tfrdv_router_config rc = tfrdv_router_config_init();
    tfrdv_transport t;
    tfrdv_rendezvous* r;
    tfrdv_mgr* m;
    tfrdv_value* v = 0;
    tfrdv_status st;
    pthread_t th;
    memset(routes, 0, sizeof routes);
    routes[0].workers = "/job:b";
    routes[0].transport = lender_transport(&lb, FINISH_IN_WAIT);
    routes[1].workers = "/job:c";
    routes[1].transport = lender_transport(&lc, DECLINE);
    routes[1].transport.wait = 0; /* this one cannot lend */
    rc.routes = routes;
    rc.num_routes = 2;
    TT_CHECK_EQ_INT(tfrdv_router_create(&rc, &t, &st), TFRDV_OK);
    TT_CHECK(t.wait != 0);
    m = mgr_over(&a, t, &r);
    TT_CHECK_EQ_INT(recv_from(r, B0, 0, 0, &v, &st), TFRDV_OK);
    TT_CHECK(v == &lb.val.v);
    TT_CHECK_EQ_INT(lb.waits, 1);
    tfrdv_value_release(v);
    pthread_create(&th, 0, finish_later, &lc);
    TT_CHECK_EQ_INT(recv_from(r, C0, 0, 0, &v, &st), TFRDV_OK);
    pthread_join(th, 0);
    TT_CHECK(v == &lc.val.v);
    TT_CHECK_EQ_INT(lc.waits, 0);
    tfrdv_value_release(v);
    lb.finish_in_start = 1;
    TT_CHECK_EQ_INT(recv_from(r, B0, 0, 0, &v, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_EQ_INT(lb.waits, 1);
    done_mgr(&a, m, r);
    lender_free(&lb);
    lender_free(&lc);
    /* a router none of whose routes can lend offers no wait */
    routes[0].transport.wait = 0;
    TT_CHECK_EQ_INT(tfrdv_router_create(&rc, &t, &st), TFRDV_OK);
    TT_CHECK(t.wait == 0);
    t.destroy(t.user);
}

/* tfrdv_call_will_wait: 1 in start_call for the first attempt of a tfrdv_recv over a transport
   with wait, 0 for tfrdv_recv_async, for a retry and without a wait hook */
typedef struct expirer { tfrdv_mgr* m; volatile int stop; } expirer;
static void* expire_loop(void* p) {
    expirer* x = (expirer*)p;
    while (!__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) {
        (void)tfrdv_mgr_expire(x->m, tfrdv_mgr_now(x->m));
        sleep_ns(MS);
    }
    return 0;
}
static void test_will_wait_names_the_calls_a_thread_lends_itself_to(void) {
    fx_alloc a = {0};
    lender l;
    tfrdv_rendezvous* r;
    tfrdv_transport t = lender_transport(&l, FINISH_IN_WAIT);
    tfrdv_mgr* m = mgr_over(&a, t, &r);
    tfrdv_mgr_config c = tfrdv_mgr_config_init();
    tfrdv_value* v = 0;
    tfrdv_status st;
    tfrdv_code got = TFRDV_UNKNOWN;
    tfrdv_call* call;
    expirer x;
    pthread_t th;
    fx_key k;
    TT_CHECK_EQ_INT(tfrdv_call_will_wait(0), 0);
    TT_CHECK_EQ_INT(recv_from(r, B0, 0, 0, &v, &st), TFRDV_OK); /* blocking */
    TT_CHECK_EQ_INT(l.starts, 1);
    TT_CHECK_EQ_INT(l.will_wait[0], 1);
    TT_CHECK_EQ_INT(l.waits, 1);
    tfrdv_value_release(v);
    key(&k, B0, 1, A0, "t"); /* async */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, on_done, &got, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(l.starts, 2);
    TT_CHECK_EQ_INT(l.will_wait[1], 0);
    call = take(&l);
    TT_CHECK(call != 0);
    tfrdv_call_finish(call, TFRDV_OK, "", &l.val.v, 0);
    TT_CHECK_EQ_INT(got, TFRDV_OK);
    done_mgr(&a, m, r);
    lender_free(&l);

    /* no wait hook: nobody lends */
    t = lender_transport(&l, FINISH_IN_WAIT);
    t.wait = 0;
    m = mgr_over(&a, t, &r);
    pthread_create(&th, 0, finish_later, &l);
    TT_CHECK_EQ_INT(recv_from(r, B0, 0, 0, &v, &st), TFRDV_OK);
    pthread_join(th, 0);
    TT_CHECK_EQ_INT(l.will_wait[0], 0);
    tfrdv_value_release(v);
    done_mgr(&a, m, r);
    lender_free(&l);

    /* a retry: the first start finishes UNAVAILABLE, the retry (attempt 1) starts from
       tfrdv_mgr_expire on another thread while the receive's thread no longer lends itself */
    t = lender_transport(&l, FINISH_IN_WAIT);
    l.fail_starts = 1;
    c.hooks = fx_alloc_hooks(&a);
    c.worker_name = WA;
    c.transport = t;
    c.call_max_retries = 1;
    c.retry_backoff_ns = MS;
    m = mk(&c);
    TT_CHECK(m != 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(m, 1, &r, 0), TFRDV_OK);
    x.m = m;
    x.stop = 0;
    pthread_create(&th, 0, expire_loop, &x);
    {
        pthread_t fin;
        pthread_create(&fin, 0, finish_later, &l); /* takes the retry's call after 20 ms */
        TT_CHECK_EQ_INT(recv_from(r, B0, 0, 0, &v, &st), TFRDV_OK);
        pthread_join(fin, 0);
    }
    __atomic_store_n(&x.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, 0);
    TT_CHECK_EQ_INT(l.starts, 2);
    TT_CHECK_EQ_INT(l.will_wait[0], 1);
    TT_CHECK_EQ_INT(l.will_wait[1], 0);
    tfrdv_value_release(v);
    done_mgr(&a, m, r);
    lender_free(&l);
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_wait_can_finish_the_call_on_the_waiting_thread);
    TT_RUN(test_wait_declined_falls_back_to_the_finish);
    TT_RUN(test_wait_gets_the_time_left_and_the_timeout_still_fires);
    TT_RUN(test_user_cancel_reaches_a_lent_thread);
    TT_RUN(test_async_receive_never_lends);
    TT_RUN(test_router_passes_wait_to_the_route);
    TT_RUN(test_will_wait_names_the_calls_a_thread_lends_itself_to);
    return TT_MAIN_END();
}
