/* faults.h - a fault-injecting tfrdv transport for tests (test_remote.c). The fixtures it is
   used with (counting allocator, fake clock, test values, keys, recorders) are in fixtures.h,
   included here. Include after tfrdv.h (with its implementation) and tt.h.

   DESIGN
     The inner loopback transport calls tfrdv_call_finish itself, so a plain wrapper around its
     start_call/cancel_call could not hold, reorder, double or replace a finish. faults is
     therefore a provider of its own:
       - it keeps a worker table (name -> tfrdv_mgr*) that faults_register() mirrors into an inner
         tfrdv_loopback (so the loopback's registration reference keeps every target manager's
         memory alive while it is registered, and FAULT_PASS calls see the same workers);
       - per call attempt it picks a fault kind (faults_set(), or a chooser callback);
       - FAULT_PASS forwards start_call/cancel_call to the loopback untouched (the real loopback
         path, including its zero copy and alloc-hook copy);
       - every other kind serves the request itself with tfrdv_mgr_serve() on the target manager
         (looked up by tfrdv_call_src_worker) and so owns the finish.
     A call the wrapper serves is tracked by a record (faults_req) that lives until both the call
     was finished and every serve it issued has answered; its pointer sits in the last 8 bytes of
     the call's provider scratch (the loopback only uses the first pointer), so cancel_call finds
     it in O(1) and forwards a cancel for any other call to the loopback (harmless if stale: the
     loopback clears its own scratch pointer whenever it lets go of a call).

   FAULTS (per call attempt)
     FAULT_PASS        forwarded to the loopback
     FAULT_NONE        served, finished as soon as the answer arrives
     FAULT_DROP        never served; finished CANCELLED when cancel_call comes (never otherwise)
     FAULT_DELAY       served; the answer is held until faults_flush() / faults_release(), which
                       finish held calls in FIFO, LIFO, random order (reorder) or one chosen index
     FAULT_DUP_REQUEST served twice with the same request id: the first copy's answer finishes the
                       call, the second copy's answer (the server's dedup ABORTED, or a response-
                       cache hit) is counted in dup_answers/dup_codes and released, never delivered
     FAULT_DUP_FINISH  served, then finished twice (the second finish hands the core a fresh
                       reference of the same value, which the core must release and ignore)
     FAULT_FAIL        attempts < fail_attempts finish with fail_code without being served; later
                       attempts behave as FAULT_NONE (UNAVAILABLE then success exercises retries)
     lazy_cancel       (a flag, with any wrapper-served kind) cancel_call does not finish at once:
                       the call is finished CANCELLED at the next faults_flush()/faults_release(),
                       like a network transport whose cancellation completes later; an answer that
                       arrives meanwhile is dropped (released)
     "Restart a worker" is not a per-call fault: register a new manager (new incarnation) under the
     same worker name with faults_register(); requests then fail ABORTED "RecvTensor expects a
     different device incarnation ...".

   RULES
     - One faults object per set of managers; faults_destroy() after every manager that uses it
       (the managers' transport.destroy is NULL: faults outlives them) and before the loopback.
     - FAULT_DUP_FINISH finishes a call that may already have been recycled by the core: keep
       call_freelist_max > 0 and do not start new remote receives from inside a receive callback
       in those tests (a recycled call object could otherwise be reused before the second finish).
     - Thread safe (one mutex; no user code or tfrdv call runs under it), but re-registering a
       worker while another thread serves through it is not supported.
*/
#ifndef FAULTS_H
#define FAULTS_H
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"

/* =============================================================================================
   The fault-injecting transport
   ============================================================================================= */
typedef enum faults_kind {
    FAULT_PASS = 0,
    FAULT_NONE,
    FAULT_DROP,
    FAULT_DELAY,
    FAULT_DUP_REQUEST,
    FAULT_DUP_FINISH,
    FAULT_FAIL,
    FAULT_KIND_COUNT
} faults_kind;
enum { FAULTS_FIFO = 0, FAULTS_LIFO = 1, FAULTS_RANDOM = 2 };

typedef struct faults faults;
typedef struct faults_req faults_req;
typedef struct faults_ticket {
    faults_req* req;
    int copy; /* 0: the real request, 1: the duplicate */
} faults_ticket;
struct faults_req {
    faults_req* next; /* f->reqs (every live record) */
    faults_req* prev;
    faults_req* hnext; /* f->held, in arrival order */
    faults* f;
    tfrdv_call* call; /* NULL once finished by us */
    faults_kind kind;
    int serves_out;   /* serve answers still to come */
    int held;         /* an answer is held (FAULT_DELAY, or a lazy cancel) */
    int cancelled;    /* lazy cancel requested: any answer that still comes is dropped */
    tfrdv_status st;
    tfrdv_value* v;
    int dead;
    faults_ticket t[2];
};

typedef struct faults_worker {
    char name[128];
    tfrdv_mgr* mgr;
} faults_worker;

struct faults {
    pthread_mutex_t mu;
    tfrdv_loopback* lb;
    tfrdv_transport inner;
    faults_worker w[8];
    int nw;
    faults_kind kind;          /* for every attempt unless choose is set */
    faults_kind (*choose)(void* user, tfrdv_call* call); /* optional per-attempt choice */
    void* choose_user;
    void (*on_start)(void* user, tfrdv_call* call, faults_kind kind); /* optional observer */
    void* on_start_user;
    tfrdv_code fail_code;      /* FAULT_FAIL */
    int fail_attempts;         /* FAULT_FAIL: attempts 0..fail_attempts-1 fail (default 1) */
    int lazy_cancel;           /* cancel_call finishes at the next flush instead of at once */
    uint64_t rng;
    faults_req* reqs;
    faults_req* held_head;
    faults_req* held_tail;
    /* counters (under mu) */
    long live_reqs, started, passed, served, dropped, held_count, flushed, cancels, cancels_forwarded,
        cancelled_finishes, late_answers, dup_answers, dup_finishes, injected_failures, finishes;
    long dup_codes[17];
};

FX_FN uint64_t faults_rand(faults* f) { return fx_xorshift(&f->rng); }

/* the record pointer lives in the last 8 bytes of the call's scratch */
FX_FN faults_req** faults_slot(tfrdv_call* call) {
    return (faults_req**)(void*)((unsigned char*)tfrdv_call_scratch(call) + TFRDV_CALL_SCRATCH_SIZE - sizeof(void*));
}

FX_FN void faults_unlink_locked(faults* f, faults_req* q) {
    if (q->prev) q->prev->next = q->next;
    else f->reqs = q->next;
    if (q->next) q->next->prev = q->prev;
    q->next = q->prev = 0;
    f->live_reqs--;
}
/* free the record when nothing refers to it any more (mu held); returns 1 if freed */
FX_FN int faults_maybe_free_locked(faults* f, faults_req* q) {
    if (q->call || q->serves_out > 0 || q->held) return 0;
    faults_unlink_locked(f, q);
    free(q);
    return 1;
}

/* finish a call the way the kind says (outside mu); v is one owned reference */
FX_FN void faults_finish(faults* f, tfrdv_call* call, faults_kind kind, const tfrdv_status* st, tfrdv_value* v, int dead) {
    if (st->code == TFRDV_OK && v && tfrdv_call_recv_args(call)->alloc_fn) {
        /* the receiver chose where the bytes land: copy into it, as a network transport would */
        tfrdv_value* nv = tfrdv_call_alloc_value(call, v->dtype, v->rank, v->dims, v->size);
        if (!nv || nv->size < v->size || (v->size && !nv->data)) {
            tfrdv_value_release(nv);
            tfrdv_value_release(v);
            pthread_mutex_lock(&f->mu);
            f->finishes++;
            pthread_mutex_unlock(&f->mu);
            tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "faults: the receiver's alloc hook gave no memory", 0, 0);
            return;
        }
        if (v->size) memcpy(nv->data, v->data, (size_t)v->size);
        tfrdv_value_release(v);
        v = nv;
    }
    pthread_mutex_lock(&f->mu);
    f->finishes++;
    if (kind == FAULT_DUP_FINISH) f->dup_finishes++;
    pthread_mutex_unlock(&f->mu);
    if (kind == FAULT_DUP_FINISH) {
        tfrdv_value_retain(v); /* the second finish hands over its own reference */
        tfrdv_call_finish_status(call, st, v, dead, 0);
        tfrdv_call_finish_status(call, st, v, dead, 0); /* contract violation: counted, ignored */
    } else {
        tfrdv_call_finish_status(call, st, v, dead, 0);
    }
}

FX_FN void faults_served(void* u, const tfrdv_status* st, const tfrdv_args* sa, tfrdv_value* v, int dead) {
    (void)sa;
    faults_ticket* t = (faults_ticket*)u;
    faults_req* q = t->req;
    faults* f = q->f;
    tfrdv_call* call;
    faults_kind kind = q->kind;
    pthread_mutex_lock(&f->mu);
    q->serves_out--;
    if (t->copy == 1) { /* the duplicate's answer never reaches the receiver */
        f->dup_answers++;
        if ((int)st->code >= 0 && (int)st->code < 17) f->dup_codes[st->code]++;
        faults_maybe_free_locked(f, q);
        pthread_mutex_unlock(&f->mu);
        tfrdv_value_release(v);
        return;
    }
    call = q->call;
    if (!call || q->cancelled) { /* cancelled before the answer came: it has nowhere to go */
        f->late_answers++;
        faults_maybe_free_locked(f, q);
        pthread_mutex_unlock(&f->mu);
        tfrdv_value_release(v);
        return;
    }
    if (kind == FAULT_DELAY) {
        q->held = 1;
        tfrdv_status_set(&q->st, st->code, st->msg);
        q->v = v;
        q->dead = dead;
        q->hnext = 0;
        if (f->held_tail) f->held_tail->hnext = q;
        else f->held_head = q;
        f->held_tail = q;
        f->held_count++;
        pthread_mutex_unlock(&f->mu);
        return;
    }
    q->call = 0;
    *faults_slot(call) = 0;
    faults_maybe_free_locked(f, q);
    pthread_mutex_unlock(&f->mu);
    faults_finish(f, call, kind, st, v, dead);
}

FX_FN tfrdv_mgr* faults_lookup_locked(faults* f, tfrdv_str w) {
    int i;
    for (i = 0; i < f->nw; i++)
        if (strlen(f->w[i].name) == w.len && memcmp(f->w[i].name, w.ptr, w.len) == 0) return f->w[i].mgr;
    return 0;
}

FX_FN void faults_start(void* user, tfrdv_call* call) {
    faults* f = (faults*)user;
    faults_kind kind;
    tfrdv_mgr* target;
    faults_req* q;
    tfrdv_str key = tfrdv_call_key(call);
    int nserves = 1, i;
    pthread_mutex_lock(&f->mu);
    kind = f->kind;
    pthread_mutex_unlock(&f->mu);
    if (f->choose) kind = f->choose(f->choose_user, call);
    if (f->on_start) f->on_start(f->on_start_user, call, kind);
    pthread_mutex_lock(&f->mu);
    f->started++;
    if (kind == FAULT_PASS) {
        f->passed++;
        pthread_mutex_unlock(&f->mu);
        f->inner.start_call(f->inner.user, call);
        return;
    }
    if (kind == FAULT_FAIL && tfrdv_call_attempt(call) < f->fail_attempts) {
        tfrdv_code code = f->fail_code;
        char msg[96];
        f->injected_failures++;
        f->finishes++;
        pthread_mutex_unlock(&f->mu);
        snprintf(msg, sizeof msg, "faults: injected %s", tfrdv_code_str(code));
        tfrdv_call_finish(call, code, msg, 0, 0);
        return;
    }
    if (kind == FAULT_FAIL) kind = FAULT_NONE;
    target = faults_lookup_locked(f, tfrdv_call_src_worker(call));
    if (!target) {
        f->finishes++;
        pthread_mutex_unlock(&f->mu);
        tfrdv_call_finish(call, TFRDV_UNAVAILABLE, "faults: no worker registered under that name", 0, 0);
        return;
    }
    q = (faults_req*)calloc(1, sizeof *q);
    if (!q) {
        f->finishes++;
        pthread_mutex_unlock(&f->mu);
        tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "faults: out of memory", 0, 0);
        return;
    }
    q->f = f;
    q->call = call;
    q->kind = kind;
    q->t[0].req = q;
    q->t[0].copy = 0;
    q->t[1].req = q;
    q->t[1].copy = 1;
    q->next = f->reqs;
    if (f->reqs) f->reqs->prev = q;
    f->reqs = q;
    f->live_reqs++;
    *faults_slot(call) = q;
    if (kind == FAULT_DROP) {
        f->dropped++;
        pthread_mutex_unlock(&f->mu);
        return;
    }
    if (kind == FAULT_DUP_REQUEST) nserves = 2;
    q->serves_out = nserves;
    f->served += nserves;
    pthread_mutex_unlock(&f->mu);
    /* the record stays alive until both serves answered, whatever the call does meanwhile */
    for (i = 0; i < nserves; i++)
        tfrdv_mgr_serve(target, tfrdv_call_step_id(call), key.ptr, key.len, tfrdv_call_request_id(call), 0, faults_served, &q->t[i]);
}

FX_FN void faults_cancel(void* user, tfrdv_call* call) {
    faults* f = (faults*)user;
    faults_req* q;
    tfrdv_value* held = 0;
    pthread_mutex_lock(&f->mu);
    f->cancels++;
    q = *faults_slot(call);
    if (!q || q->call != call) {
        f->cancels_forwarded++;
        pthread_mutex_unlock(&f->mu);
        f->inner.cancel_call(f->inner.user, call); /* a FAULT_PASS call (or a stale cancel) */
        return;
    }
    if (f->lazy_cancel) { /* finish CANCELLED at the next flush; drop any answer */
        if (q->cancelled) { /* cancel_call again: harmless */
            pthread_mutex_unlock(&f->mu);
            return;
        }
        q->cancelled = 1;
        if (q->held) {
            held = q->v;
            q->v = 0;
            f->late_answers++;
        } else {
            q->held = 1;
            q->hnext = 0;
            if (f->held_tail) f->held_tail->hnext = q;
            else f->held_head = q;
            f->held_tail = q;
            f->held_count++;
        }
        tfrdv_status_set(&q->st, TFRDV_CANCELLED, "faults: call cancelled (late)");
        q->dead = 0;
        f->cancelled_finishes++;
        pthread_mutex_unlock(&f->mu);
        tfrdv_value_release(held);
        return;
    }
    q->call = 0;
    *faults_slot(call) = 0;
    if (q->held) { /* unlink from the held list; the answer is dropped */
        faults_req** pp = &f->held_head;
        faults_req* prev = 0;
        while (*pp != q) {
            prev = *pp;
            pp = &(*pp)->hnext;
        }
        *pp = q->hnext;
        if (f->held_tail == q) f->held_tail = prev;
        q->held = 0;
        f->held_count--;
        held = q->v;
        q->v = 0;
        f->late_answers++;
    }
    f->cancelled_finishes++;
    f->finishes++;
    faults_maybe_free_locked(f, q);
    pthread_mutex_unlock(&f->mu);
    tfrdv_value_release(held);
    tfrdv_call_finish(call, TFRDV_CANCELLED, "faults: call cancelled", 0, 0);
}

/* Create over a loopback (not owned; destroy it after faults). */
FX_FN faults* faults_create(tfrdv_loopback* lb, uint64_t seed) {
    faults* f = (faults*)calloc(1, sizeof *f);
    if (!f) return 0;
    pthread_mutex_init(&f->mu, 0);
    f->lb = lb;
    f->inner = tfrdv_loopback_transport(lb);
    f->kind = FAULT_PASS;
    f->fail_code = TFRDV_UNAVAILABLE;
    f->fail_attempts = 1;
    f->rng = seed ? seed : 0x9e3779b97f4a7c15u;
    return f;
}
/* The vtable for tfrdv_mgr_config.transport (destroy NULL: faults outlives the managers). */
FX_FN tfrdv_transport faults_transport(faults* f) {
    tfrdv_transport t;
    memset(&t, 0, sizeof t); /* fields may be added: start from zero */
    t.user = f;
    t.start_call = faults_start;
    t.cancel_call = faults_cancel;
    t.destroy = 0;
    return t;
}
/* Route worker_name to mgr here and on the loopback; a second registration under the same name
   is a "restart"; mgr NULL removes the name. Returns 1 on success. */
FX_FN int faults_register(faults* f, const char* worker_name, tfrdv_mgr* mgr) {
    int i;
    if (strlen(worker_name) >= sizeof f->w[0].name) return 0;
    if (tfrdv_loopback_register(f->lb, worker_name, mgr, 0) != TFRDV_OK) return 0;
    pthread_mutex_lock(&f->mu);
    for (i = 0; i < f->nw && strcmp(f->w[i].name, worker_name) != 0; i++) {}
    if (i < f->nw) {
        if (mgr) f->w[i].mgr = mgr;
        else f->w[i] = f->w[--f->nw];
    } else if (mgr && f->nw < 8) {
        strcpy(f->w[f->nw].name, worker_name);
        f->w[f->nw].mgr = mgr;
        f->nw++;
    }
    pthread_mutex_unlock(&f->mu);
    return 1;
}
FX_FN void faults_set(faults* f, faults_kind kind) {
    pthread_mutex_lock(&f->mu);
    f->kind = kind;
    pthread_mutex_unlock(&f->mu);
}
FX_FN void faults_set_fail(faults* f, tfrdv_code code, int attempts) {
    pthread_mutex_lock(&f->mu);
    f->kind = FAULT_FAIL;
    f->fail_code = code;
    f->fail_attempts = attempts;
    pthread_mutex_unlock(&f->mu);
}
/* one counter, read under mu */
FX_FN long faults_read(faults* f, const long* counter) {
    long n;
    pthread_mutex_lock(&f->mu);
    n = *counter;
    pthread_mutex_unlock(&f->mu);
    return n;
}
FX_FN long faults_held(faults* f) { return faults_read(f, &f->held_count); }
/* Finish held answer number `index` (0 = oldest). Returns 1 if there was one. */
FX_FN int faults_release(faults* f, long index) {
    faults_req** pp;
    faults_req* q;
    faults_req* prev = 0;
    tfrdv_call* call;
    tfrdv_status st;
    tfrdv_value* v;
    int dead;
    pthread_mutex_lock(&f->mu);
    for (pp = &f->held_head; *pp && index > 0; pp = &(*pp)->hnext, index--) prev = *pp;
    q = *pp;
    if (!q) {
        pthread_mutex_unlock(&f->mu);
        return 0;
    }
    *pp = q->hnext;
    if (f->held_tail == q) f->held_tail = prev;
    f->held_count--;
    f->flushed++;
    call = q->call;
    st = q->st;
    v = q->v;
    dead = q->dead;
    q->held = 0;
    q->v = 0;
    q->call = 0;
    *faults_slot(call) = 0;
    faults_maybe_free_locked(f, q);
    pthread_mutex_unlock(&f->mu);
    faults_finish(f, call, FAULT_DELAY, &st, v, dead);
    return 1;
}
/* Finish every held answer: FAULTS_FIFO, FAULTS_LIFO or FAULTS_RANDOM (reorder). Returns how many. */
FX_FN long faults_flush(faults* f, int order) {
    long n = 0;
    for (;;) {
        long h = faults_held(f), idx;
        if (h == 0) return n;
        if (order == FAULTS_FIFO) idx = 0;
        else if (order == FAULTS_LIFO) idx = h - 1;
        else {
            pthread_mutex_lock(&f->mu);
            idx = (long)(faults_rand(f) % (uint64_t)h);
            pthread_mutex_unlock(&f->mu);
        }
        n += faults_release(f, idx);
    }
}
/* Records still alive (calls not finished or serves not answered). */
FX_FN long faults_live(faults* f) { return faults_read(f, &f->live_reqs); }
/* Frees faults; returns the number of records that were still alive (should be 0). Their held
   values are released; calls still unfinished are abandoned (a test bug). */
FX_FN long faults_destroy(faults* f) {
    long left;
    if (!f) return 0;
    left = f->live_reqs;
    while (f->reqs) {
        faults_req* q = f->reqs;
        f->reqs = q->next;
        tfrdv_value_release(q->v);
        free(q);
    }
    pthread_mutex_destroy(&f->mu);
    free(f);
    return left;
}
#endif
