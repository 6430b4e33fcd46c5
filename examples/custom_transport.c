/* custom_transport.c - a transport to copy. A fetch travels over a queue to a server thread that
   answers it from another manager's tables (tfrdv_mgr_serve), as a network server would. Provider
   contract (tfrdv.h, at tfrdv_transport): whoever takes the call under the lock finishes it,
   exactly once; cancel_call may come any number of times. Life cycle: TRANSPORTS in tfrdv.h. (A
   library would allocate through hooks.allocator and copy the bytes into tfrdv_call_alloc_value
   memory; this file uses calloc and hands the value over as it is.) */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct req { struct req* next; struct qt* t; tfrdv_call* call; int64_t step, id, deadline; size_t len; } req;
typedef struct qt {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    req *head, **tail;
    int refs, live, stop;  /* refs: the owner's and each manager's; live: requests not yet answered */
    tfrdv_cancel_mgr* all; /* withdraws every served request at qt_destroy */
    tfrdv_mgr* server;     /* whose tables answer */
    pthread_t thread;
} qt;

static tfrdv_call* take(req* r) { /* t->mu held: the call is ours to finish (or NULL: it was) */
    tfrdv_call* c = r->call;
    if (c) *(req**)tfrdv_call_scratch(c) = NULL; /* a later cancel_call finds nothing */
    r->call = NULL;
    return c;
}
static void req_done(req* r) {
    qt* t = r->t;
    free(r);
    pthread_mutex_lock(&t->mu); t->live--; pthread_cond_broadcast(&t->cv); pthread_mutex_unlock(&t->mu);
}
/* The serving side's answer (exactly once per tfrdv_mgr_serve): the reply reaching the client. */
static void on_answer(void* u, const tfrdv_status* st, const tfrdv_args* sa, tfrdv_value* v, int dead) {
    req* r = (req*)u;
    tfrdv_call* c;
    pthread_mutex_lock(&r->t->mu); c = take(r); pthread_mutex_unlock(&r->t->mu);
    if (!c || tfrdv_call_finish_status(c, st, v, dead, 1)) { /* its receiver gave up: give v back */
        if (st->code == TFRDV_OK) tfrdv_mgr_serve_return(r->t->server, r->step, (char*)(r + 1), r->len, r->id, sa, v, dead, NULL);
    } else if (st->code == TFRDV_OK) { /* delivered: say so (the step may have drained) */
        tfrdv_mgr_serve_delivered(r->t->server, r->id);
    }
    req_done(r);
}
static void* serve_loop(void* p) { /* the "remote" worker, in arrival order; after stop it drains */
    qt* t = (qt*)p;
    pthread_mutex_lock(&t->mu);
    while (t->head || !t->stop) {
        req* r = t->head;
        tfrdv_call* late = NULL;
        int drop;
        if (!r) { pthread_cond_wait(&t->cv, &t->mu); continue; }
        if (!(t->head = r->next)) t->tail = &t->head;
        if (tfrdv_now_ns() >= r->deadline) late = take(r); /* over a network: send the time left */
        drop = !r->call; /* late, or cancelled while queued */
        pthread_mutex_unlock(&t->mu);
        if (late) tfrdv_call_finish(late, TFRDV_DEADLINE_EXCEEDED, "qt: deadline passed before serving", NULL, 0);
        if (drop) req_done(r);
        else tfrdv_mgr_serve_ex(t->server, r->step, (char*)(r + 1), r->len, r->id, TFRDV_SERVE_CONFIRMS, t->all, on_answer, r);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}
static void qt_start(void* user, tfrdv_call* call) {
    qt* t = (qt*)user;
    tfrdv_str key = tfrdv_call_key(call);
    req* r = (req*)calloc(1, sizeof *r + key.len);
    *(req**)tfrdv_call_scratch(call) = r;
    if (!r) { tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "qt: out of memory", NULL, 0); return; }
    r->t = t;
    r->call = call;
    r->step = tfrdv_call_step_id(call);
    r->id = tfrdv_call_request_id(call);
    r->deadline = tfrdv_call_deadline(call); /* INT64_MAX: none; tfrdv_mgr_now's clock, tfrdv_now_ns here */
    r->len = key.len;
    memcpy(r + 1, key.ptr, key.len);
    pthread_mutex_lock(&t->mu);
    if (!t->stop) { *t->tail = r; t->tail = &r->next; t->live++; pthread_cond_broadcast(&t->cv); r = NULL; }
    else take(r);
    pthread_mutex_unlock(&t->mu);
    if (!r) return; /* queued: the server thread has it now */
    free(r);
    tfrdv_call_finish(call, TFRDV_UNAVAILABLE, "qt: transport destroyed", NULL, 0);
}
static void qt_cancel(void* user, tfrdv_call* call) { /* any number of times, at any point */
    qt* t = (qt*)user;
    tfrdv_call* c = NULL;
    req* r;
    pthread_mutex_lock(&t->mu);
    if ((r = *(req**)tfrdv_call_scratch(call)) != NULL) c = take(r);
    pthread_mutex_unlock(&t->mu);
    /* the served request stays until a value answers it (on_answer gives it back) or the step ends;
       over a network, send a CANCEL the server withdraws it with */
    if (c) tfrdv_call_finish(c, TFRDV_CANCELLED, "qt: fetch cancelled", NULL, 0);
}
static void qt_unref(void* p) { /* the owner's (qt_destroy) or a manager's (the vtable's destroy) */
    qt* t = (qt*)p;
    int last;
    pthread_mutex_lock(&t->mu); last = --t->refs == 0; pthread_mutex_unlock(&t->mu);
    if (!last) return;
    tfrdv_cancel_mgr_destroy(t->all);
    tfrdv_mgr_unref(t->server);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
static void qt_ref(void* p) { qt* t = (qt*)p; pthread_mutex_lock(&t->mu); t->refs++; pthread_mutex_unlock(&t->mu); }
/* TRANSPORTS 1, 2 in tfrdv.h: create; each manager given the vtable holds t until it goes */
static tfrdv_code qt_create(tfrdv_mgr* server, qt** out, tfrdv_status* st) {
    qt* t = (qt*)calloc(1, sizeof *t);
    *out = NULL;
    if (!t || tfrdv_cancel_mgr_create(NULL, &t->all, st) != TFRDV_OK) {
        free(t);
        return tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, "qt_create: out of memory");
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->tail = &t->head;
    t->refs = 1;
    tfrdv_mgr_ref(t->server = server);
    if (pthread_create(&t->thread, NULL, serve_loop, t) != 0) {
        qt_unref(t);
        return tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, "qt_create: no thread");
    }
    *out = t;
    return TFRDV_OK;
}
static tfrdv_transport qt_transport(qt* t) {
    tfrdv_transport v;
    memset(&v, 0, sizeof v); /* fields may be added in later versions: zero what you do not set */
    v.user = t;
    v.start_call = qt_start;
    v.cancel_call = qt_cancel;
    v.destroy = qt_unref;
    v.ref = qt_ref;
    return v;
}
/* TRANSPORTS 5: before or after the managers. New fetches fail UNAVAILABLE; every served request
   is withdrawn (its fetch finishes CANCELLED); the thread is joined; no answer runs afterwards.
   Not from inside a receive callback of one of t's fetches: it would wait for that answer. */
static void qt_destroy(qt* t) {
    pthread_mutex_lock(&t->mu); t->stop = 1; pthread_cond_broadcast(&t->cv); pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    tfrdv_cancel_start(t->all);
    pthread_mutex_lock(&t->mu);
    while (t->live) pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
    qt_unref(t);
}

/* ---- the host: a ps that serves, a worker that fetches, its expire thread ---- */
#ifndef CUSTOM_TRANSPORT_NO_MAIN /* tests/test_conformance.c includes this file for the qt above */
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t host_cv = PTHREAD_COND_INITIALIZER;
static int stop; /* (host_mu) */

static void* expire_loop(void* w) { /* fails the worker's calls whose deadline passed */
    pthread_mutex_lock(&host_mu);
    while (!stop) {
        int64_t now = tfrdv_mgr_now((tfrdv_mgr*)w), next;
        struct timespec ts;
        pthread_mutex_unlock(&host_mu);
        next = tfrdv_mgr_expire((tfrdv_mgr*)w, now); /* callbacks may run in here: hold no lock */
        next = next - now < 10000000 ? next - now : 10000000; /* a new call may bring an earlier one */
        clock_gettime(CLOCK_REALTIME, &ts);
        next += ts.tv_nsec;
        ts.tv_sec += (time_t)(next / 1000000000);
        ts.tv_nsec = (long)(next % 1000000000);
        pthread_mutex_lock(&host_mu);
        if (!stop) pthread_cond_timedwait(&host_cv, &host_mu, &ts);
    }
    pthread_mutex_unlock(&host_mu);
    return NULL;
}
/* tfrdv_recv on r (timeout_ns 0: none); 1 when it ends with want (and value) */
static int fetch(const char* what, tfrdv_rendezvous* r, const tfrdv_key* k, int64_t timeout_ns, tfrdv_code want, float value) {
    tfrdv_value* v = NULL;
    int dead = 0, ok;
    tfrdv_status st;
    tfrdv_code rc = tfrdv_recv(r, &k->parsed, NULL, timeout_ns, &v, &dead, &st);
    ok = rc == want && (rc != TFRDV_OK || (v && v->size == sizeof value && *(const float*)v->data == value));
    printf("  %-34s %-17s %s\n", what, tfrdv_code_str(rc), ok ? "ok" : "WRONG");
    tfrdv_value_release(v);
    return ok;
}
static int send_float(tfrdv_rendezvous* r, const tfrdv_key* k, float f) {
    tfrdv_value* v = tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 0, NULL, &f, sizeof f);
    if (v && tfrdv_send(r, &k->parsed, NULL, v, 0, NULL) == TFRDV_OK) return 1;
    tfrdv_value_release(v); /* a failed send leaves it ours */
    return 0;
}
#define PS "/job:ps/replica:0/task:0"
#define W "/job:w/replica:0/task:0"

int main(void) {
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_mgr *ps = NULL, *w = NULL;
    tfrdv_rendezvous *rps = NULL, *rw = NULL;
    tfrdv_frame_iter top = {0, 0};
    tfrdv_key a, b, c;
    tfrdv_mgr_stats s;
    tfrdv_status st;
    pthread_t expirer;
    qt* t = NULL;
    int ok;
    mc.worker_name = PS; /* serves through t; fetches nothing, so it needs no transport */
    if (tfrdv_mgr_create(&mc, &ps, &st) != TFRDV_OK || qt_create(ps, &t, &st) != TFRDV_OK)
        return fprintf(stderr, "setup: %s\n", st.msg), 1;
    mc.worker_name = W;
    mc.transport = qt_transport(t);
    mc.call_timeout_ns = 500000000; /* a fetch fails DEADLINE_EXCEEDED after 0.5 s */
    if (tfrdv_mgr_create(&mc, &w, &st) != TFRDV_OK || tfrdv_key_make(&a, PS "/device:CPU:0", tfrdv_mgr_incarnation(ps), W "/device:CPU:0", "a", top, &st) != TFRDV_OK ||
        tfrdv_key_make(&b, PS "/device:CPU:0", tfrdv_mgr_incarnation(ps), W "/device:CPU:0", "b", top, &st) != TFRDV_OK ||
        tfrdv_key_make(&c, PS "/device:CPU:0", tfrdv_mgr_incarnation(ps), W "/device:CPU:0", "c", top, &st) != TFRDV_OK ||
        tfrdv_mgr_start_step(ps, 1, &rps, &st) != TFRDV_OK || tfrdv_mgr_start_step(w, 1, &rw, &st) != TFRDV_OK ||
        pthread_create(&expirer, NULL, expire_loop, w) != 0)
        return fprintf(stderr, "setup: %s\n", st.msg), 1;
    /* 1. the ps sends, the worker fetches: its receive becomes a call through the transport */
    ok = send_float(rps, &a, 1.5f) && fetch("a: fetched", rw, &a, 0, TFRDV_OK, 1.5f);
    /* 2. the receive gives up after 50 ms (cancel_call); the value sent afterwards answers the
          request still on the ps, goes back (give-back) and reaches the next receiver */
    ok &= fetch("b: receive timed out", rw, &b, 50000000, TFRDV_DEADLINE_EXCEEDED, 0);
    ok &= send_float(rps, &b, 2.5f) && fetch("b: the next receiver", rw, &b, 0, TFRDV_OK, 2.5f);
    /* 3. nobody sends c: at the call's deadline (0.5 s) the expire thread fails it */
    ok &= fetch("c: call deadline", rw, &c, 0, TFRDV_DEADLINE_EXCEEDED, 0);
    /* 4. the transport goes first (the other order works too): a fetch through it fails at once */
    qt_destroy(t);
    ok &= fetch("a: after the transport's destroy", rw, &a, 0, TFRDV_UNAVAILABLE, 0);
    pthread_mutex_lock(&host_mu); stop = 1; pthread_cond_broadcast(&host_cv); pthread_mutex_unlock(&host_mu);
    pthread_join(expirer, NULL);
    tfrdv_mgr_get_stats(w, &s);
    ok &= s.double_finishes == 0 && tfrdv_pending(rps, NULL, NULL) == 0; /* nothing left over */
    tfrdv_unref(rps);
    tfrdv_unref(rw);
    tfrdv_mgr_destroy(w); /* and with it its reference on t: t is freed here */
    tfrdv_mgr_destroy(ps);
    printf("custom_transport: %s\n", ok ? "every check passed" : "FAILED");
    return ok ? 0 : 1;
}
#endif
