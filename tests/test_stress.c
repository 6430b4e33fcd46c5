/* test_stress.c - exactly-once under contention: 4 threads, TFRDV_STRESS_OPS random operations
   (default 1,000,000) over 1024 keys: sends, receives, receives with a per-thread cancellation
   manager that is cancelled at random moments (a new manager per batch of operations), and one
   abort by one thread near the end. Every operation has its own slot; after destroy every
   accepted receive completed exactly once, every sent value was released exactly once, and the
   OK deliveries equal the values consumed. The seed is random per run (printed with the exact
   command that replays it); TFRDV_STRESS_SEED=<seed> fixes it. */
#define _POSIX_C_SOURCE 200809L /* tt.h comes first (it counts TFRDV_ASSERTs) */
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define NTHREADS 4
#define NKEYS 1024
#define CM_BATCH 64 /* operations per cancellation manager */
#define ABORT_CODE TFRDV_ABORTED

enum { OP_NONE = 0, OP_SEND = 1, OP_RECV = 2, OP_RECV_CANCEL = 3 };

typedef struct cmw { /* a cancellation manager and the receives still using it */
    tfrdv_cancel_mgr* cm;
    long outstanding;
    struct cmw* next;
} cmw;

typedef struct op { /* one slot per operation */
    tfrdv_value v;  /* sends: the value handed over */
    int releases;   /* sends: release hook runs */
    int delivered;  /* sends: OK deliveries of this value */
    int calls;      /* receives: callback runs */
    int code;       /* receives: completion code */
    int kind, accepted;
    cmw* cm;
} op;

static tfrdv_rendezvous* g_r;
static op* g_ops;
static long g_nops;
static const char* g_argv0 = "test_stress"; /* for the replay line */
static char g_keybuf[NKEYS][160];
static tfrdv_parsed_key g_keys[NKEYS];
static long g_ok, g_cancelled, g_aborted, g_bad, g_send_failed;
static fx_alloc g_alloc; /* every object of the test: the rendezvous and the cancellation managers */

static void value_released(tfrdv_value* v) { __atomic_add_fetch(&((op*)v->user)->releases, 1, __ATOMIC_SEQ_CST); }

static void recv_done(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                      tfrdv_value* v, int dead) {
    op* o = (op*)user;
    cmw* w = o->cm;
    (void)sa;
    (void)dead;
    __atomic_add_fetch(&o->calls, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&o->code, (int)st->code, __ATOMIC_SEQ_CST);
    if (st->code == TFRDV_OK) {
        __atomic_add_fetch(&g_ok, 1, __ATOMIC_RELAXED);
        if (!v) __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
        else __atomic_add_fetch(&((op*)v->user)->delivered, 1, __ATOMIC_SEQ_CST);
        tfrdv_value_release(v);
    } else {
        if (st->code == TFRDV_CANCELLED) __atomic_add_fetch(&g_cancelled, 1, __ATOMIC_RELAXED);
        else if (st->code == ABORT_CODE) __atomic_add_fetch(&g_aborted, 1, __ATOMIC_RELAXED);
        else __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
        if (v) __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
    }
    if (ra->cancel != (w ? w->cm : NULL)) __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
    /* last touch of the manager's wrapper: its owner may destroy it once this reaches 0 */
    if (w) __atomic_add_fetch(&w->outstanding, -1, __ATOMIC_SEQ_CST);
}

typedef struct worker {
    int id;
    long begin, end, abort_at; /* abort_at < 0: this worker does not abort */
    uint64_t seed;
    cmw* cur;
    cmw* retired;
    long cms_made;
} worker;

static cmw* cm_new(worker* w) {
    cmw* x = (cmw*)calloc(1, sizeof *x);
    tfrdv_hooks h = fx_alloc_hooks(&g_alloc);
    if (!x || tfrdv_cancel_mgr_create(&h, &x->cm, NULL) != TFRDV_OK) {
        __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
        free(x);
        return NULL;
    }
    w->cms_made++;
    return x;
}
/* destroy retired managers nobody uses any more */
static void cm_reap(worker* w, int all) {
    cmw** pp = &w->retired;
    while (*pp) {
        cmw* x = *pp;
        if (all || __atomic_load_n(&x->outstanding, __ATOMIC_SEQ_CST) == 0) {
            if (__atomic_load_n(&x->outstanding, __ATOMIC_SEQ_CST) != 0) __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
            *pp = x->next;
            tfrdv_cancel_mgr_destroy(x->cm);
            free(x);
        } else {
            pp = &x->next;
        }
    }
}
static void cm_rotate(worker* w, int cancel_old) {
    if (w->cur) {
        if (cancel_old) tfrdv_cancel_start(w->cur->cm);
        w->cur->next = w->retired;
        w->retired = w->cur;
    }
    cm_reap(w, 0);
    w->cur = cm_new(w);
}

static void* worker_main(void* p) {
    worker* w = (worker*)p;
    long i;
    for (i = w->begin; i < w->end; i++) {
        op* o = &g_ops[i];
        uint64_t r = fx_xorshift(&w->seed);
        const tfrdv_parsed_key* key = &g_keys[r % NKEYS];
        unsigned choice = (unsigned)((r >> 20) % 100);
        if (i - w->begin == w->abort_at) tfrdv_abort(g_r, ABORT_CODE, "stress: abort near the end");
        if ((i - w->begin) % CM_BATCH == 0) cm_rotate(w, ((r >> 40) & 1) != 0);
        if (((r >> 48) % 200) == 0 && w->cur) tfrdv_cancel_start(w->cur->cm); /* a random moment */
        if (choice < 50) {
            tfrdv_code rc;
            int dead = ((r >> 32) % 20) == 0;
            o->kind = OP_SEND;
            o->v.dtype = 1;
            o->v.release = value_released;
            o->v.user = o;
            rc = tfrdv_send(g_r, key, NULL, &o->v, dead, NULL);
            if (rc == TFRDV_OK) {
                o->accepted = 1;
            } else {
                if (rc != ABORT_CODE) __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
                __atomic_add_fetch(&g_send_failed, 1, __ATOMIC_RELAXED);
                tfrdv_value_release(&o->v); /* a failed send leaves the value with us */
            }
        } else {
            tfrdv_args args;
            tfrdv_code rc;
            memset(&args, 0, sizeof args);
            o->kind = OP_RECV;
            if (choice >= 80 && w->cur) {
                o->kind = OP_RECV_CANCEL;
                o->cm = w->cur;
                args.cancel = w->cur->cm;
                __atomic_add_fetch(&w->cur->outstanding, 1, __ATOMIC_SEQ_CST);
            }
            o->accepted = 1; /* set before the call: the callback may run inside it */
            rc = tfrdv_recv_async(g_r, key, &args, recv_done, o, 0);
            if (rc != TFRDV_OK) {
                o->accepted = 0;
                if (o->cm) __atomic_add_fetch(&o->cm->outstanding, -1, __ATOMIC_SEQ_CST);
                __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
            }
        }
    }
    return NULL;
}

static long stress_ops(void) {
    const char* e = getenv("TFRDV_STRESS_OPS");
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : 1000000;
}
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_stress_exactly_once(void) {
    worker w[NTHREADS];
    pthread_t th[NTHREADS];
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_status st;
    long i, per, consumed = 0, sends = 0, sends_ok = 0, recvs = 0, recv_bad = 0, send_bad = 0;
    long cms = 0;
    uint64_t seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull | 1u;
    double t0;
    const char* seed_env = getenv("TFRDV_STRESS_SEED");
    if (seed_env) seed = (uint64_t)strtoull(seed_env, NULL, 10) | 1u;
    g_nops = stress_ops();
    g_ops = (op*)calloc((size_t)g_nops, sizeof *g_ops);
    TT_CHECK(g_ops != NULL);
    if (!g_ops) return;
    for (i = 0; i < NKEYS; i++) {
        char edge[32];
        tfrdv_frame_iter fi;
        size_t len = 0;
        fi.frame_id = (uint64_t)(i % 3);
        fi.iter_id = i % 7;
        snprintf(edge, sizeof edge, "edge_%ld", i);
        TT_CHECK_EQ_INT(tfrdv_key_create("/job:w/replica:0/task:0/device:CPU:0", 7,
                                         "/job:w/replica:0/task:0/device:CPU:1", edge, fi,
                                         g_keybuf[i], sizeof g_keybuf[i], &len, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_key_parse(g_keybuf[i], len, &g_keys[i], &st), TFRDV_OK);
    }
    cfg.hooks = fx_alloc_hooks(&g_alloc);
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &g_r, &st), TFRDV_OK);
    per = g_nops / NTHREADS;
    t0 = now_s();
    for (i = 0; i < NTHREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = (int)i;
        w[i].begin = i * per;
        w[i].end = i == NTHREADS - 1 ? g_nops : (i + 1) * per;
        w[i].seed = seed + (uint64_t)i * 0x2545f4914f6cdd1dull;
        if (!w[i].seed) w[i].seed = 1;
        w[i].abort_at = -1;
    }
    {   /* one thread aborts at a random point in the last 10% (but not the last 2%) of its ops */
        uint64_t s = seed ^ 0xabcdefull;
        int who = (int)(fx_xorshift(&s) % NTHREADS);
        long n = w[who].end - w[who].begin;
        w[who].abort_at = n - n / 10 + (long)(fx_xorshift(&s) % (uint64_t)(n / 12 + 1));
    }
    for (i = 0; i < NTHREADS; i++) pthread_create(&th[i], NULL, worker_main, &w[i]);
    for (i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    tfrdv_destroy(g_r);
    for (i = 0; i < NTHREADS; i++) { /* everything has completed: every manager is unused now */
        if (w[i].cur) {
            w[i].cur->next = w[i].retired;
            w[i].retired = w[i].cur;
            w[i].cur = NULL;
        }
        cm_reap(&w[i], 1);
        cms += w[i].cms_made;
    }
    for (i = 0; i < g_nops; i++) {
        op* o = &g_ops[i];
        if (o->kind == OP_SEND) {
            sends++;
            sends_ok += o->accepted;
            consumed += o->delivered;
            if (o->releases != 1 || o->delivered > 1 || (!o->accepted && o->delivered)) {
                if (send_bad++ < 5)
                    printf("    op %ld (send, accepted %d): released %d times, delivered %d times\n", i,
                           o->accepted, o->releases, o->delivered);
            }
        } else if (o->kind != OP_NONE) {
            recvs++;
            if (o->calls != (o->accepted ? 1 : 0)) {
                if (recv_bad++ < 5)
                    printf("    op %ld (recv, accepted %d): callback ran %d times\n", i, o->accepted, o->calls);
            }
        }
    }
    printf("    %ld ops (seed %llu) in %.2f s: %ld sends (%ld accepted, %ld refused after abort), %ld "
           "receives (%ld OK, %ld cancelled, %ld aborted), %ld cancel managers\n"
           "    replay this run: TFRDV_STRESS_SEED=%llu TFRDV_STRESS_OPS=%ld %s\n",
           g_nops, (unsigned long long)seed, now_s() - t0, sends, sends_ok, g_send_failed, recvs, g_ok,
           g_cancelled, g_aborted, cms, (unsigned long long)seed, g_nops, g_argv0);
    TT_CHECK_EQ_INT(send_bad, 0);
    TT_CHECK_EQ_INT(recv_bad, 0);
    TT_CHECK_EQ_INT(g_ok, consumed);
    TT_CHECK_EQ_INT(g_ok + g_cancelled + g_aborted, recvs);
    TT_CHECK_EQ_INT(g_bad, 0);
    TT_CHECK(g_aborted > 0 || g_send_failed > 0); /* the abort happened */
    TT_CHECK(g_cancelled > 0);
    FX_CHECK_EMPTY(&g_alloc);
    TT_CHECK_EQ_INT(tt_asserts, 0);
    free(g_ops);
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    g_argv0 = argv[0];
    TT_RUN(test_stress_exactly_once);
    return TT_MAIN_END();
}
