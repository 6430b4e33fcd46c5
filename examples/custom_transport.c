/* custom_transport.c - a whole transport to copy. A fetch travels over a queue to a server thread
   that answers it from another manager's tables (tfrdv_mgr_serve), as a network server would. The
   provider contract (tfrdv.h, at tfrdv_transport): whoever takes the call under the lock finishes
   it, exactly once; cancel_call may come any number of times, before, during or after the answer,
   and withdraws the served request; an answer whose fetch was cancelled on its way goes back to the
   serving table (tfrdv_mgr_serve_return). The host's thread runs tfrdv_mgr_expire for the call
   deadlines. Life cycle: TRANSPORTS in tfrdv.h. (In a library, take a tfrdv_hooks and allocate
   through hooks.allocator; this file uses calloc. Both managers use the built-in clock.) */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct qt qt;
typedef struct req {        /* one fetch; its key follows it */
    struct req* qnext;      /* the server's queue */
    qt* t;
    tfrdv_call* call;       /* until answered or cancelled (t->mu): whoever takes it finishes it */
    tfrdv_cancel_mgr* cm;   /* withdraws the served request */
    tfrdv_cancel_node node; /* on t->all, which qt_destroy cancels */
    int refs;               /* the answer's, and one per cancel_call running (t->mu) */
    int64_t step_id, request_id, deadline;
    size_t key_len;
} req;
struct qt {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    req *head, **tail;
    int refs, live, stop;  /* refs: the owner's and each manager's; live: requests */
    tfrdv_cancel_mgr* all; /* every live request */
    tfrdv_mgr* server;     /* whose tables answer (a reference) */
    pthread_t thread;
};
static void wait_ns(pthread_cond_t* cv, pthread_mutex_t* mu, int64_t ns) { /* at most ns */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* pthread_cond_timedwait's default clock */
    ns = (ns < 0 ? 0 : ns) + ts.tv_nsec;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(cv, mu, &ts);
}
static void qt_unref(void* p) { /* the owner's (qt_destroy) or a manager's (the vtable's destroy) */
    qt* t = (qt*)p;
    int last;
    pthread_mutex_lock(&t->mu); last = --t->refs == 0; pthread_mutex_unlock(&t->mu);
    if (!last) return;
    tfrdv_cancel_mgr_destroy(t->all);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
static tfrdv_call* take(req* r) { /* t->mu held: the call is ours to finish (or NULL) */
    tfrdv_call* c = r->call;
    if (c) *(req**)tfrdv_call_scratch(c) = NULL; /* a later cancel_call finds nothing */
    r->call = NULL;
    return c;
}
static void req_unref(req* r) {
    qt* t = r->t;
    int last;
    pthread_mutex_lock(&t->mu); last = --r->refs == 0; pthread_mutex_unlock(&t->mu);
    if (!last) return;
    tfrdv_cancel_deregister(t->all, &r->node); /* waits while qt_destroy withdraws r */
    tfrdv_cancel_mgr_destroy(r->cm);
    free(r);
    pthread_mutex_lock(&t->mu);
    t->live--;
    pthread_cond_broadcast(&t->cv); /* qt_destroy waits for the last one */
    pthread_mutex_unlock(&t->mu);
}
static void withdraw(void* r) { tfrdv_cancel_start(((req*)r)->cm); }

/* The serving side's answer, on whichever thread answered: the reply reaching the client. */
static void on_answer(void* u, const tfrdv_status* st, const tfrdv_args* sa, tfrdv_value* v, int dead) {
    req* r = (req*)u;
    tfrdv_value* copy = NULL;
    tfrdv_call* c;
    pthread_mutex_lock(&r->t->mu); c = take(r); pthread_mutex_unlock(&r->t->mu);
    if (c && st->code == TFRDV_OK && v) { /* the bytes land in the receiver's memory (its alloc hook) */
        copy = tfrdv_call_alloc_value(c, v->dtype, v->rank, v->dims, v->size);
        if (!copy || copy->size < v->size) { /* no memory: the value goes back below */
            tfrdv_value_release(copy);
            tfrdv_call_finish(c, TFRDV_RESOURCE_EXHAUSTED, "custom transport: no memory for the answer", NULL, 0);
            c = NULL;
        } else if (v->size) {
            memcpy(copy->data, v->data, (size_t)v->size);
        }
    }
    /* tfrdv_call_finish_keep: a receive cancelled between take() and this finish leaves copy with
       us, and the value goes back like an undelivered one */
    if (c && !tfrdv_call_finish_keep(c, st, copy, dead)) {
        tfrdv_value_release(v);
    } else if (st->code == TFRDV_OK) { /* not delivered: back to the table, ahead of later sends */
        tfrdv_value_release(copy);
        tfrdv_mgr_serve_return(r->t->server, r->step_id, (char*)(r + 1), r->key_len, r->request_id, sa, v, dead, NULL);
    }
    req_unref(r);
}
static void* serve_loop(void* p) { /* the "remote" worker: serves the queue in arrival order */
    qt* t = (qt*)p;
    req* r;
    pthread_mutex_lock(&t->mu);
    while (t->head || !t->stop) { /* after qt_destroy, serves what is queued: t->all withdrew it */
        tfrdv_call* late = NULL;
        if (!(r = t->head)) {
            pthread_cond_wait(&t->cv, &t->mu);
            continue;
        }
        if (!(t->head = r->qnext)) t->tail = &t->head;
        if (tfrdv_now_ns() >= r->deadline) late = take(r); /* (over a network: send the time left) */
        pthread_mutex_unlock(&t->mu);
        if (late) { /* not served: no answer will drop its reference */
            tfrdv_call_finish(late, TFRDV_DEADLINE_EXCEEDED, "custom transport: deadline passed before serving", NULL, 0);
            req_unref(r);
        } else {
            tfrdv_mgr_serve(t->server, r->step_id, (char*)(r + 1), r->key_len, r->request_id, r->cm, on_answer, r);
        }
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}
static void qt_start(void* user, tfrdv_call* call) {
    qt* t = (qt*)user;
    tfrdv_str key = tfrdv_call_key(call);
    req* r = (req*)calloc(1, sizeof *r + key.len);
    *(req**)tfrdv_call_scratch(call) = NULL;
    if (!r || tfrdv_cancel_mgr_create(NULL, &r->cm, NULL) != TFRDV_OK) {
        free(r);
        tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "custom transport: out of memory", NULL, 0);
        return;
    }
    r->t = t;
    r->call = call;
    r->refs = 1;
    r->step_id = tfrdv_call_step_id(call);
    r->request_id = tfrdv_call_request_id(call);
    r->deadline = tfrdv_call_deadline(call); /* INT64_MAX: none */
    r->key_len = key.len;
    memcpy(r + 1, key.ptr, key.len);
    pthread_mutex_lock(&t->mu);
    if (!t->stop && tfrdv_cancel_register(t->all, &r->node, withdraw, r)) {
        *t->tail = r; /* to the server thread */
        t->tail = &r->qnext;
        t->live++;
        *(req**)tfrdv_call_scratch(call) = r;
        pthread_cond_broadcast(&t->cv);
        r = NULL;
    }
    pthread_mutex_unlock(&t->mu);
    if (!r) return;
    tfrdv_cancel_mgr_destroy(r->cm);
    free(r);
    tfrdv_call_finish(call, TFRDV_UNAVAILABLE, "custom transport: destroyed", NULL, 0);
}
static void qt_cancel(void* user, tfrdv_call* call) { /* any number of times, at any point */
    qt* t = (qt*)user;
    tfrdv_call* c = NULL;
    req* r;
    pthread_mutex_lock(&t->mu);
    if ((r = *(req**)tfrdv_call_scratch(call)) != NULL) {
        r->refs++;
        c = take(r);
    }
    pthread_mutex_unlock(&t->mu);
    if (!r) return; /* answered or cancelled already */
    tfrdv_cancel_start(r->cm); /* withdraws the served request: a value sent later stays buffered */
    tfrdv_call_finish(c, TFRDV_CANCELLED, "custom transport: fetch cancelled", NULL, 0);
    req_unref(r);
}
/* TRANSPORTS 1 in tfrdv.h: a transport answering from server's tables */
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
    t->server = server; /* used from the first request on */
    if (pthread_create(&t->thread, NULL, serve_loop, t) != 0) {
        qt_unref(t);
        return tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, "qt_create: no thread");
    }
    tfrdv_mgr_ref(server);
    *out = t;
    return TFRDV_OK;
}
static void qt_ref(void* p) {
    qt* t = (qt*)p;
    pthread_mutex_lock(&t->mu); t->refs++; pthread_mutex_unlock(&t->mu);
}
/* TRANSPORTS 2: each manager created with the vtable holds t (ref) until it goes (destroy) */
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
/* TRANSPORTS 5: before or after the managers. Fetches fail UNAVAILABLE from now on, every request
   is withdrawn (its call finishes CANCELLED), the thread is joined, and no answer still runs. */
static void qt_destroy(qt* t) {
    int64_t until = tfrdv_now_ns() + 2000000000; /* a bound, for a broken serving side */
    pthread_mutex_lock(&t->mu); t->stop = 1; pthread_cond_broadcast(&t->cv); pthread_mutex_unlock(&t->mu);
    tfrdv_cancel_start(t->all);
    pthread_join(t->thread, NULL);
    pthread_mutex_lock(&t->mu);
    while (t->live && tfrdv_now_ns() < until) wait_ns(&t->cv, &t->mu, until - tfrdv_now_ns());
    pthread_mutex_unlock(&t->mu);
    if (t->live) return; /* an answer still runs after 2 s: leak t rather than free it under it */
    tfrdv_mgr_unref(t->server);
    qt_unref(t);
}

/* ---- the host: two workers, the expire thread, the fetches ---- */
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t host_cv = PTHREAD_COND_INITIALIZER;
static int stop, done; /* (host_mu) */
static tfrdv_code got_code;
static float got_value;

static void* expire_loop(void* w) { /* acts on the fetching worker's deadlines */
    pthread_mutex_lock(&host_mu);
    while (!stop) {
        int64_t now = tfrdv_mgr_now((tfrdv_mgr*)w), next;
        pthread_mutex_unlock(&host_mu);
        next = tfrdv_mgr_expire((tfrdv_mgr*)w, now); /* callbacks may run in here: hold no lock */
        pthread_mutex_lock(&host_mu);
        /* until the next deadline, 10 ms at most: a new fetch may bring an earlier one */
        if (!stop) wait_ns(&host_cv, &host_mu, next - now < 10000000 ? next - now : 10000000);
    }
    pthread_mutex_unlock(&host_mu);
    return NULL;
}
static void on_got(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    (void)u; (void)sa; (void)ra; (void)dead;
    pthread_mutex_lock(&host_mu);
    done = 1;
    got_code = st->code;
    got_value = st->code == TFRDV_OK && v && v->size == sizeof(float) ? *(const float*)v->data : -1.0f;
    pthread_cond_broadcast(&host_cv);
    pthread_mutex_unlock(&host_mu);
    tfrdv_value_release(v); /* ours (NULL on error) */
}
/* Receives k on r; 1 if that completes (within 5 s) with want (and value). cancel: cancels it
   once the request waits on the ps (tfrdv_pending(at)). */
static int fetch(const char* what, tfrdv_rendezvous* r, const tfrdv_key* k, tfrdv_cancel_mgr* cancel,
                 tfrdv_rendezvous* at, tfrdv_code want, float value) {
    struct timespec ms = {0, 1000000};
    int64_t until = tfrdv_now_ns() + 5000000000;
    tfrdv_args args;
    int i, ok;
    memset(&args, 0, sizeof args);
    args.cancel = cancel;
    if (tfrdv_recv_async(r, &k->parsed, &args, on_got, NULL, NULL) != TFRDV_OK) return 0;
    for (i = 0; cancel && i < 2000 && tfrdv_pending(at, NULL, NULL) == 0; i++) nanosleep(&ms, NULL);
    ok = !cancel || tfrdv_pending(at, NULL, NULL) == 1; /* it waits on the ps */
    tfrdv_cancel_start(cancel); /* NULL: nothing */
    pthread_mutex_lock(&host_mu);
    while (!done && tfrdv_now_ns() < until) wait_ns(&host_cv, &host_mu, until - tfrdv_now_ns());
    ok &= done && got_code == want && (want != TFRDV_OK || got_value == value);
    printf("  %-34s %-17s %s\n", what, done ? tfrdv_code_str(got_code) : "(no answer)", ok ? "ok" : "WRONG");
    done = 0;
    pthread_mutex_unlock(&host_mu);
    return ok;
}
static int send_float(tfrdv_rendezvous* r, const tfrdv_key* k, float f) {
    tfrdv_status st;
    tfrdv_value* v = tfrdv_value_new(TFRDV_DT_FLOAT, 0, NULL, &f, sizeof f);
    if (v && tfrdv_send(r, &k->parsed, NULL, v, 0, &st) == TFRDV_OK) return 1;
    tfrdv_value_release(v); /* a failed send leaves it ours */
    return 0;
}
#define PS "/job:ps/replica:0/task:0"
#define W "/job:w/replica:0/task:0"

int main(void) {
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_mgr *ps = NULL, *w = NULL;
    tfrdv_rendezvous *rps = NULL, *rw = NULL;
    tfrdv_cancel_mgr* cm = NULL;
    tfrdv_frame_iter top = {0, 0};
    const char* edge[3] = {"a", "b", "c"};
    tfrdv_key k[3];
    tfrdv_mgr_stats s;
    tfrdv_status st;
    pthread_t expirer;
    qt* t = NULL;
    int i, ok = 1;
    mc.worker_name = PS; /* serves through t; fetches nothing, so it needs no transport */
    if (tfrdv_mgr_create(&mc, &ps, &st) != TFRDV_OK || qt_create(ps, &t, &st) != TFRDV_OK)
        return fprintf(stderr, "setup: %s\n", st.msg), 1;
    mc.worker_name = W;
    mc.transport = qt_transport(t);
    mc.call_timeout_ns = 500000000; /* a fetch fails DEADLINE_EXCEEDED after 0.5 s */
    if (tfrdv_mgr_create(&mc, &w, &st) != TFRDV_OK) w = NULL; /* a failed create takes nothing */
    for (i = 0; i < 3; i++)
        ok &= tfrdv_key_make(&k[i], PS "/device:CPU:0", tfrdv_mgr_incarnation(ps), W "/device:CPU:0", edge[i], top, &st) == TFRDV_OK;
    if (!ok || !w || pthread_create(&expirer, NULL, expire_loop, w) != 0 || tfrdv_cancel_mgr_create(NULL, &cm, &st) != TFRDV_OK ||
        tfrdv_mgr_start_step(ps, 1, &rps, &st) != TFRDV_OK || tfrdv_mgr_start_step(w, 1, &rw, &st) != TFRDV_OK)
        return fprintf(stderr, "setup: %s\n", st.msg), 1;
    /* 1. the ps sends, the worker fetches: its receive becomes a call through the transport */
    ok = send_float(rps, &k[0], 1.5f) && fetch("a: fetched", rw, &k[0], NULL, rps, TFRDV_OK, 1.5f);
    /* 2. cancelled while the ps serves it: the request is withdrawn, and a value sent afterwards
          stays buffered for the next receiver */
    ok &= fetch("b: cancelled while served", rw, &k[1], cm, rps, TFRDV_CANCELLED, 0) && tfrdv_pending(rps, NULL, NULL) == 0;
    ok &= send_float(rps, &k[1], 2.5f) && fetch("b: the next receiver", rw, &k[1], NULL, rps, TFRDV_OK, 2.5f);
    /* 3. nobody sends c: at the call's deadline the expire thread fails it, the transport withdraws it */
    ok &= fetch("c: timed out", rw, &k[2], NULL, rps, TFRDV_DEADLINE_EXCEEDED, 0) && tfrdv_pending(rps, NULL, NULL) == 0;
    /* 4. the transport goes first (the other order works too): a fetch through it fails at once */
    qt_destroy(t);
    ok &= fetch("a: after the transport's destroy", rw, &k[0], NULL, rps, TFRDV_UNAVAILABLE, 0);
    pthread_mutex_lock(&host_mu); stop = 1; pthread_cond_broadcast(&host_cv); pthread_mutex_unlock(&host_mu);
    pthread_join(expirer, NULL);
    tfrdv_mgr_get_stats(w, &s); /* (a call is counted until the thread that completed it let go) */
    ok &= s.double_finishes == 0 && s.calls_in_flight == 0;
    tfrdv_unref(rps);
    tfrdv_unref(rw);
    tfrdv_mgr_cleanup(ps, 1);
    tfrdv_mgr_cleanup(w, 1);
    tfrdv_mgr_destroy(w); /* and with it its reference on t: t is freed here */
    tfrdv_mgr_destroy(ps);
    tfrdv_cancel_mgr_destroy(cm);
    printf("custom_transport: %s\n", ok ? "every check passed" : "FAILED");
    return ok ? 0 : 1;
}
