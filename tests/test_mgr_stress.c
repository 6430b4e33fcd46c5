/* test_mgr_stress.c - exactly-once and memory safety of the step manager under contention, on
   the loopback transport. Two tests:
   test_withdrawal_races_cleanup: the race itself, TFRDV_MGR_STRESS_RACES times (default 3000): a
     consumer's async receive from a worker that never starts the step leaves one deferred request
     there (the only holder of the step it made); then one thread cancels the receive (the
     loopback withdraws the request) while another cleans the step up on the serving worker, each
     after a random short spin. The withdrawal used to release the step's table reference that the
     cleanup had already taken over (a use-after-free of the step under ASan/TSan);
     test_interleavings forces the same interleaving deterministically.
   test_mgr_stress_exactly_once: three workers, steps in a sliding window. Two consumer threads
     receive from the other workers (async with the step's cancellation manager, async without,
     and blocking tfrdv_recv with timeouts of 20-400 us, whose remote calls are cancelled when
     they time out); one producer thread starts steps and sends, but never initialises some
     (worker, step) pairs, so remote requests for them are deferred, and aborts some steps; a
     janitor thread cleans the oldest step on every worker (tfrdv_mgr_cleanup, in a random order;
     the step's cancellation manager is cancelled at a random point, half the time by a consumer
     while the cleanups run) and drives tfrdv_mgr_expire. TFRDV_MGR_STRESS_OPS sets the
     operations per consumer (default 3000).
   After every manager and the loopback are destroyed: every accepted async receive completed
   exactly once, every sent value was released exactly once and delivered at most once, the OK
   receives equal the deliveries, and the counting allocator is empty. No assertion depends on
   timing (the spins and hand-offs only make the racing calls overlap). TFRDV_STRESS_SEED=<seed>
   replays the random choices (not the scheduling). */
#define _POSIX_C_SOURCE 200809L /* tt.h comes first (it counts TFRDV_ASSERTs) */
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#define NW 3        /* workers */
#define NKEYS 4     /* edges per (producer, consumer) pair */
#define NCONS 2     /* consumer threads */
#define WINDOW 6    /* live steps */
#define CLEAN_EVERY 12 /* consumer operations per step cleaned */
#define STEP0 1000

enum { OP_NONE = 0, OP_SEND, OP_RECV_ASYNC, OP_RECV_BLOCKING };

typedef struct op {
    tfrdv_value v;  /* sends: the value handed over */
    int releases;   /* sends: release hook runs */
    int delivered;  /* sends: OK deliveries of this value */
    int calls;      /* async receives: callback runs */
    int kind, accepted;
} op;

static tfrdv_mgr* g_w[NW];
static tfrdv_loopback* g_lb;
static fx_alloc g_alloc;
static char g_keybuf[NW][NW][NKEYS][200];
static tfrdv_parsed_key g_keys[NW][NW][NKEYS]; /* [producer][consumer][edge] */
static tfrdv_cancel_mgr** g_cms;               /* one per step (index step - STEP0) */
static long g_ncms;
static op* g_ops;
static long g_nops, g_next_op;
static long g_base = STEP0;   /* the oldest step not cleaned yet (atomic) */
static long g_cons_ops;       /* consumer operations done (atomic) */
static long g_cancel_req;     /* a step whose cancellation manager a consumer is to cancel (atomic) */
static long g_cleaning;       /* the step the janitor is cleaning up (atomic) */
static int g_cons_done;       /* consumer threads finished (atomic) */
static long g_ok, g_cancelled, g_aborted, g_timeouts, g_other, g_bad, g_refused, g_deferred_seen;

static void value_released(tfrdv_value* v) { __atomic_add_fetch(&((op*)v->user)->releases, 1, __ATOMIC_SEQ_CST); }
static op* op_new(void) {
    long i = __atomic_fetch_add(&g_next_op, 1, __ATOMIC_SEQ_CST);
    return i < g_nops ? &g_ops[i] : NULL;
}
static long load(long* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static void bump(long* p) { __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST); }
static long g_logs;
/* a logger that writes somewhere slow: the thread gives up its CPU (every abort logs, between a
   cleanup's unlink of the step and the abort of its deferred requests) */
static void slow_log(void* u, int level, const char* msg) {
    (void)u;
    (void)level;
    (void)msg;
    bump(&g_logs);
    sched_yield();
}
/* a step's producer never initialises it on worker w (its remote requests stay deferred) */
static int never_started(long step, int w) { return (int)((uint64_t)(step * 7 + w * 3) % 5u) == 0; }
static tfrdv_cancel_mgr* cm_of(long step) {
    long i = step - STEP0;
    return i >= 0 && i < g_ncms ? g_cms[i] : NULL;
}

/* one outcome of a receive (async or blocking) */
static void count(tfrdv_code code, tfrdv_value* v, int dead) {
    if (code == TFRDV_OK) {
        bump(&g_ok);
        if (!v && !dead) bump(&g_bad);
        if (v) __atomic_add_fetch(&((op*)v->user)->delivered, 1, __ATOMIC_SEQ_CST);
        tfrdv_value_release(v);
        return;
    }
    if (v) bump(&g_bad);
    if (code == TFRDV_CANCELLED) bump(&g_cancelled);
    else if (code == TFRDV_ABORTED) bump(&g_aborted);
    else if (code == TFRDV_DEADLINE_EXCEEDED) bump(&g_timeouts);
    else bump(&g_other); /* e.g. a producer's abort code */
}
static void recv_done(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                      tfrdv_value* v, int dead) {
    op* o = (op*)user;
    (void)sa;
    (void)ra;
    count(st->code, v, dead);
    __atomic_add_fetch(&o->calls, 1, __ATOMIC_SEQ_CST);
}

typedef struct thr {
    uint64_t seed;
    long ops;
} thr;

/* a step near the oldest live one (those are the ones about to be cleaned) */
static long pick_step(uint64_t r) {
    unsigned a = (unsigned)(r % WINDOW), b = (unsigned)((r >> 8) % WINDOW);
    return load(&g_base) + (long)(a < b ? a : b);
}

static void* consumer_main(void* p) {
    thr* t = (thr*)p;
    long i;
    for (i = 0; i < t->ops; i++) {
        uint64_t r = fx_xorshift(&t->seed);
        long step = pick_step(r);
        int c = (int)((r >> 16) % NW);
        int pr = (c + 1 + (int)((r >> 20) % (NW - 1))) % NW;
        int k = (int)((r >> 24) % NKEYS);
        unsigned choice = (unsigned)((r >> 32) % 100);
        tfrdv_rendezvous* rv = NULL;
        const tfrdv_parsed_key* key;
        long cancel = __atomic_exchange_n(&g_cancel_req, 0, __ATOMIC_SEQ_CST);
        if (cancel) { /* the step's consumers give up on it while the janitor cleans it up */
            while (load(&g_cleaning) < cancel) sched_yield();
            if (cm_of(cancel)) tfrdv_cancel_start(cm_of(cancel));
        }
        if (((r >> 44) & 1) && !never_started(step, pr) && never_started(step, (pr + 1) % NW) && (pr + 1) % NW != c)
            pr = (pr + 1) % NW; /* half the time, prefer a producer whose request will be deferred */
        key = &g_keys[pr][c][k];
        if (tfrdv_mgr_start_step(g_w[c], step, &rv, NULL) != TFRDV_OK) {
            bump(&g_refused); /* the step was aborted before we initialised it */
        } else if (choice < 45) { /* blocking, short timeout: the remote call is cancelled on timeout */
            tfrdv_value* v = NULL;
            int dead = 0;
            int64_t to = 20000 + (int64_t)((r >> 40) % 380000);
            tfrdv_code rc = tfrdv_recv(rv, key, NULL, to, &v, &dead, NULL);
            count(rc, v, dead);
        } else {
            op* o = op_new();
            tfrdv_args args;
            memset(&args, 0, sizeof args);
            if (choice < 80) args.cancel = cm_of(step);
            if (o) {
                o->kind = OP_RECV_ASYNC;
                o->accepted = 1; /* before the call: the callback may run inside it */
                if (tfrdv_recv_async(rv, key, &args, recv_done, o, NULL) != TFRDV_OK) {
                    o->accepted = 0;
                    bump(&g_refused);
                }
            }
        }
        tfrdv_unref(rv);
        bump(&g_cons_ops);
    }
    __atomic_add_fetch(&g_cons_done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void* producer_main(void* p) {
    thr* t = (thr*)p;
    long done = 0;
    while (__atomic_load_n(&g_cons_done, __ATOMIC_SEQ_CST) < NCONS) {
        uint64_t r;
        if (done > 2 * load(&g_cons_ops)) { /* about two sends per receive */
            sched_yield();
            continue;
        }
        done++;
        r = fx_xorshift(&t->seed);
        long step = pick_step(r);
        int pr = (int)((r >> 16) % NW);
        int c = (pr + 1 + (int)((r >> 20) % (NW - 1))) % NW;
        int k = (int)((r >> 24) % NKEYS);
        unsigned choice = (unsigned)((r >> 32) % 100);
        tfrdv_rendezvous* rv = NULL;
        op* o;
        if (never_started(step, pr)) {
            if (choice < 1 && ((r >> 40) % 8) == 0 && tfrdv_mgr_find(g_w[pr], step, &rv, NULL) == TFRDV_OK) {
                /* abort a step nobody started here: its deferred requests fail with the status */
                tfrdv_abort(rv, TFRDV_ABORTED, "stress: producer aborted an unstarted step");
                tfrdv_unref(rv);
            }
            sched_yield();
            continue;
        }
        if (tfrdv_mgr_start_step(g_w[pr], step, &rv, NULL) != TFRDV_OK) continue;
        if (choice < 2) {
            tfrdv_abort(rv, TFRDV_ABORTED, "stress: producer aborted the step");
        } else if ((o = op_new()) != NULL) {
            tfrdv_code rc;
            o->kind = OP_SEND;
            o->v.dtype = 1;
            o->v.release = value_released;
            o->v.user = o;
            rc = tfrdv_send(rv, &g_keys[pr][c][k], NULL, &o->v, 0, NULL);
            if (rc == TFRDV_OK) {
                o->accepted = 1;
            } else {
                if (rc != TFRDV_ABORTED) bump(&g_bad);
                tfrdv_value_release(&o->v); /* a refused send leaves the value with us */
            }
        }
        tfrdv_unref(rv);
        if ((r >> 56) % 4 == 0) sched_yield();
    }
    return NULL;
}

static void* janitor_main(void* p) {
    thr* t = (thr*)p;
    long cleaned_at = 0;
    for (;;) {
        int done = __atomic_load_n(&g_cons_done, __ATOMIC_SEQ_CST) == NCONS;
        uint64_t r = fx_xorshift(&t->seed);
        long step = load(&g_base);
        int order[NW], i, cancel_at = (int)(r % (NW + 1));
        if (!done && load(&g_cons_ops) - cleaned_at < CLEAN_EVERY) {
            sched_yield();
            continue;
        }
        if (done) break;
        cleaned_at = load(&g_cons_ops);
        for (i = 0; i < NW; i++) order[i] = i;
        for (i = NW - 1; i > 0; i--) { /* shuffle */
            int j = (int)((r >> (8 + 4 * i)) % (uint64_t)(i + 1)), x = order[i];
            order[i] = order[j];
            order[j] = x;
        }
        if (r >> 63) { /* a consumer cancels the step's manager while we clean the step up */
            __atomic_store_n(&g_cancel_req, step, __ATOMIC_SEQ_CST);
            while (load(&g_cancel_req) != 0 && __atomic_load_n(&g_cons_done, __ATOMIC_SEQ_CST) < NCONS) sched_yield();
        }
        __atomic_store_n(&g_cleaning, step, __ATOMIC_SEQ_CST); /* go (a consumer that took the request waits for it) */
        for (i = 0; i <= NW; i++) {
            if (i == cancel_at && !(r >> 63) && cm_of(step)) tfrdv_cancel_start(cm_of(step));
            if (i < NW) tfrdv_mgr_cleanup(g_w[order[i]], step);
        }
        __atomic_store_n(&g_base, step + 1, __ATOMIC_SEQ_CST);
        if ((r >> 40) % 8 == 0)
            for (i = 0; i < NW; i++) tfrdv_mgr_expire(g_w[i], tfrdv_mgr_now(g_w[i]));
    }
    return NULL;
}

static long env_long(const char* name, long def) {
    const char* e = getenv(name);
    long n = e ? strtol(e, NULL, 10) : 0;
    return n > 0 ? n : def;
}
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_mgr_stress_exactly_once(void) {
    thr cons[NCONS], prod, jan;
    pthread_t th[NCONS + 2];
    tfrdv_hooks h = fx_alloc_hooks(&g_alloc);
    tfrdv_mgr_config cfg = tfrdv_mgr_config_init();
    tfrdv_status st;
    struct timespec ts0;
    uint64_t seed;
    const char* seed_env = getenv("TFRDV_STRESS_SEED");
    long per = env_long("TFRDV_MGR_STRESS_OPS", 3000), i, sends = 0, sends_ok = 0, consumed = 0;
    long asyncs = 0, bad_send = 0, bad_recv = 0;
    int p, c, k;
    double t0 = now_s();
    clock_gettime(CLOCK_REALTIME, &ts0);
    seed = ((uint64_t)ts0.tv_sec * 1000000007ull + (uint64_t)ts0.tv_nsec) * 0x9e3779b97f4a7c15ull | 1u;
    if (seed_env) seed = (uint64_t)strtoull(seed_env, NULL, 10) | 1u;
    g_nops = per * NCONS * 4;
    g_ops = (op*)calloc((size_t)g_nops, sizeof *g_ops);
    g_ncms = per * NCONS / CLEAN_EVERY + 2 * WINDOW + 2;
    g_cms = (tfrdv_cancel_mgr**)calloc((size_t)g_ncms, sizeof *g_cms);
    TT_CHECK(g_ops != NULL && g_cms != NULL);
    if (!g_ops || !g_cms) return;
    for (i = 0; i < g_ncms; i++) TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&h, &g_cms[i], NULL), TFRDV_OK);
    cfg.hooks = h;
    cfg.hooks.logger.fn = slow_log;
    TT_CHECK_EQ_INT(tfrdv_loopback_create(&h, &g_lb, &st), TFRDV_OK);
    for (p = 0; p < NW; p++) {
        char name[64];
        snprintf(name, sizeof name, "/job:w/replica:0/task:%d", p);
        TT_CHECK_EQ_INT(tfrdv_loopback_add_worker(g_lb, name, &cfg, &g_w[p], &st), TFRDV_OK);
    }
    for (p = 0; p < NW; p++)
        for (c = 0; c < NW; c++)
            for (k = 0; k < NKEYS; k++) {
                char src[64], dst[64], edge[32];
                size_t len = 0;
                tfrdv_frame_iter fi;
                fi.frame_id = 0;
                fi.iter_id = 0;
                snprintf(src, sizeof src, "/job:w/replica:0/task:%d/device:CPU:0", p);
                snprintf(dst, sizeof dst, "/job:w/replica:0/task:%d/device:CPU:0", c);
                snprintf(edge, sizeof edge, "edge_%d", k);
                TT_CHECK_EQ_INT(tfrdv_key_create(src, tfrdv_mgr_incarnation(g_w[p]), dst, edge, fi, g_keybuf[p][c][k],
                                                 sizeof g_keybuf[p][c][k], &len, &st), TFRDV_OK);
                TT_CHECK_EQ_INT(tfrdv_key_parse(g_keybuf[p][c][k], len, &g_keys[p][c][k], &st), TFRDV_OK);
            }
    for (i = 0; i < NCONS; i++) {
        cons[i].seed = seed + (uint64_t)i * 0x2545f4914f6cdd1dull;
        if (!cons[i].seed) cons[i].seed = 1;
        cons[i].ops = per;
        pthread_create(&th[i], NULL, consumer_main, &cons[i]);
    }
    prod.seed = seed ^ 0x5bd1e995ull;
    jan.seed = seed ^ 0xc2b2ae35ull;
    if (!prod.seed) prod.seed = 1;
    if (!jan.seed) jan.seed = 1;
    pthread_create(&th[NCONS], NULL, producer_main, &prod);
    pthread_create(&th[NCONS + 1], NULL, janitor_main, &jan);
    for (i = 0; i < NCONS + 2; i++) pthread_join(th[i], NULL);
    {
        tfrdv_mgr_stats s;
        for (p = 0; p < NW; p++) {
            tfrdv_mgr_get_stats(g_w[p], &s);
            g_deferred_seen += (long)s.requests_deferred;
        }
    }
    /* the rest of the steps, then everything: pending receives complete (aborted or cancelled) */
    for (p = 0; p < NW; p++) tfrdv_mgr_cleanup_all(g_w[p]);
    for (i = 0; i < g_ncms; i++) tfrdv_cancel_start(g_cms[i]);
    for (p = 0; p < NW; p++) tfrdv_mgr_destroy(g_w[p]);
    tfrdv_loopback_destroy(g_lb);
    for (i = 0; i < g_ncms; i++) tfrdv_cancel_mgr_destroy(g_cms[i]);
    for (i = 0; i < g_nops; i++) {
        op* o = &g_ops[i];
        if (o->kind == OP_SEND) {
            sends++;
            sends_ok += o->accepted;
            consumed += o->delivered;
            if (o->releases != 1 || o->delivered > 1 || (!o->accepted && o->delivered))
                if (bad_send++ < 5)
                    printf("    op %ld (send, accepted %d): released %d times, delivered %d times\n", i, o->accepted,
                           o->releases, o->delivered);
        } else if (o->kind == OP_RECV_ASYNC) {
            asyncs++;
            if (o->calls != (o->accepted ? 1 : 0))
                if (bad_recv++ < 5) printf("    op %ld (async receive, accepted %d): callback ran %d times\n", i, o->accepted, o->calls);
        }
    }
    printf("    seed %llu, %ld ops per consumer, %.2f s: %ld sends (%ld accepted), %ld async receives; "
           "outcomes %ld OK, %ld cancelled, %ld aborted, %ld timed out, %ld other; %ld refused; "
           "%ld requests deferred, %ld steps\n"
           "    replay this run: TFRDV_STRESS_SEED=%llu TFRDV_MGR_STRESS_OPS=%ld %s\n",
           (unsigned long long)seed, per, now_s() - t0, sends, sends_ok, asyncs, g_ok, g_cancelled, g_aborted,
           g_timeouts, g_other, g_refused, g_deferred_seen, load(&g_base) - STEP0, (unsigned long long)seed, per,
           "build/default/test_mgr_stress");
    TT_CHECK_EQ_INT(bad_send, 0);
    TT_CHECK_EQ_INT(bad_recv, 0);
    TT_CHECK_EQ_INT(g_ok, consumed);
    TT_CHECK_EQ_INT(g_bad, 0);
    TT_CHECK_EQ_INT(g_other, 0);
    TT_CHECK(g_deferred_seen > 0); /* the workload did defer requests */
    FX_CHECK_EMPTY(&g_alloc);
    TT_CHECK_EQ_INT(tt_asserts, 0);
    free(g_ops);
    free(g_cms);
}

/* ---------------------------------------------------------------------------------------------
   The race itself, many times: a consumer's async receive (with a cancellation manager) from a
   worker that never starts the step leaves one deferred request there, the only holder of the
   step it made; then one thread cancels the receive (the loopback withdraws the request) while
   another cleans the step up on the serving worker, each after a random short spin. Every
   receive completes exactly once (CANCELLED or ABORTED), and nothing is freed twice.
   --------------------------------------------------------------------------------------------- */
#define RACE_STEP0 1000000
typedef struct race {
    long gen;             /* iteration started (atomic) */
    long done[2];         /* iteration finished by the canceller, the cleaner (atomic) */
    tfrdv_cancel_mgr* cm; /* this iteration's */
    long step;
    unsigned spin[2];
    int stop;
} race;
static race g_race;
static void spin_for(unsigned n) {
    volatile unsigned i;
    for (i = 0; i < n; i++) {}
}
static void* race_side(void* p) {
    int side = (int)(long)(size_t)p;
    long seen = 0;
    for (;;) {
        long gen;
        while ((gen = load(&g_race.gen)) == seen && !__atomic_load_n(&g_race.stop, __ATOMIC_SEQ_CST)) sched_yield();
        if (gen == seen) return NULL;
        seen = gen;
        spin_for(g_race.spin[side]);
        if (side == 0) tfrdv_cancel_start(g_race.cm);
        else tfrdv_mgr_cleanup(g_w[1], g_race.step);
        __atomic_store_n(&g_race.done[side], gen, __ATOMIC_SEQ_CST);
    }
}
typedef struct race_rcv {
    int calls;
    tfrdv_code code;
} race_rcv;
static void race_done(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                      tfrdv_value* v, int dead) {
    race_rcv* x = (race_rcv*)user;
    (void)sa;
    (void)ra;
    (void)dead;
    x->code = st->code;
    tfrdv_value_release(v);
    __atomic_add_fetch(&x->calls, 1, __ATOMIC_SEQ_CST);
}
static void test_withdrawal_races_cleanup(void) {
    tfrdv_hooks h;
    tfrdv_mgr_config cfg = tfrdv_mgr_config_init();
    tfrdv_status st;
    pthread_t th[2];
    struct timespec ts0;
    uint64_t seed;
    const char* seed_env = getenv("TFRDV_STRESS_SEED");
    long n = env_long("TFRDV_MGR_STRESS_RACES", 3000), i, bad = 0, cancelled = 0, aborted = 0;
    int p, k;
    clock_gettime(CLOCK_REALTIME, &ts0);
    seed = ((uint64_t)ts0.tv_sec * 1000000007ull + (uint64_t)ts0.tv_nsec) * 0x9e3779b97f4a7c15ull | 1u;
    if (seed_env) seed = (uint64_t)strtoull(seed_env, NULL, 10) | 1u;
    memset(&g_alloc, 0, sizeof g_alloc);
    memset(&g_race, 0, sizeof g_race);
    h = fx_alloc_hooks(&g_alloc);
    cfg.hooks = h;
    TT_CHECK_EQ_INT(tfrdv_loopback_create(&h, &g_lb, &st), TFRDV_OK);
    for (p = 0; p < 2; p++) {
        char name[64];
        snprintf(name, sizeof name, "/job:w/replica:0/task:%d", p);
        TT_CHECK_EQ_INT(tfrdv_loopback_add_worker(g_lb, name, &cfg, &g_w[p], &st), TFRDV_OK);
    }
    for (k = 0; k < NKEYS; k++) { /* worker 1 sends to worker 0 */
        tfrdv_frame_iter fi;
        size_t len = 0;
        char edge[32];
        fi.frame_id = 0;
        fi.iter_id = 0;
        snprintf(edge, sizeof edge, "edge_%d", k);
        TT_CHECK_EQ_INT(tfrdv_key_create("/job:w/replica:0/task:1/device:CPU:0", tfrdv_mgr_incarnation(g_w[1]),
                                         "/job:w/replica:0/task:0/device:CPU:0", edge, fi, g_keybuf[1][0][k],
                                         sizeof g_keybuf[1][0][k], &len, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_key_parse(g_keybuf[1][0][k], len, &g_keys[1][0][k], &st), TFRDV_OK);
    }
    pthread_create(&th[0], NULL, race_side, (void*)(size_t)0);
    pthread_create(&th[1], NULL, race_side, (void*)(size_t)1);
    for (i = 0; i < n; i++) {
        uint64_t r = fx_xorshift(&seed);
        tfrdv_rendezvous* rv = NULL;
        tfrdv_args args;
        race_rcv x;
        long gen = i + 1;
        memset(&x, 0, sizeof x);
        memset(&args, 0, sizeof args);
        g_race.step = RACE_STEP0 + i;
        g_race.spin[0] = (unsigned)(r % 2000);
        g_race.spin[1] = (unsigned)((r >> 16) % 2000);
        TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&h, &g_race.cm, NULL), TFRDV_OK);
        args.cancel = g_race.cm;
        TT_CHECK_EQ_INT(tfrdv_mgr_start_step(g_w[0], g_race.step, &rv, NULL), TFRDV_OK);
        /* worker 1 never starts the step: the request is deferred there, in a step it made */
        TT_CHECK_EQ_INT(tfrdv_recv_async(rv, &g_keys[1][0][(r >> 32) % NKEYS], &args, race_done, &x, NULL), TFRDV_OK);
        __atomic_store_n(&g_race.gen, gen, __ATOMIC_SEQ_CST); /* go */
        while (load(&g_race.done[0]) != gen || load(&g_race.done[1]) != gen) sched_yield();
        tfrdv_mgr_cleanup(g_w[0], g_race.step); /* completes the receive if nothing did */
        tfrdv_unref(rv);
        if (__atomic_load_n(&x.calls, __ATOMIC_SEQ_CST) != 1 || (x.code != TFRDV_CANCELLED && x.code != TFRDV_ABORTED))
            if (bad++ < 5) printf("    race %ld: callback ran %d times, code %d\n", i, x.calls, (int)x.code);
        if (x.code == TFRDV_CANCELLED) cancelled++;
        else if (x.code == TFRDV_ABORTED) aborted++;
        tfrdv_cancel_mgr_destroy(g_race.cm);
    }
    __atomic_store_n(&g_race.stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    {
        int64_t ids[4];
        TT_CHECK_EQ_INT((int)tfrdv_mgr_steps(g_w[1], ids, 4), 0); /* no step left behind on the server */
    }
    printf("    %ld races: %ld cancelled, %ld aborted by the cleanup\n", n, cancelled, aborted);
    TT_CHECK_EQ_INT(bad, 0);
    for (p = 0; p < 2; p++) tfrdv_mgr_destroy(g_w[p]);
    tfrdv_loopback_destroy(g_lb);
    FX_CHECK_EMPTY(&g_alloc);
    TT_CHECK_EQ_INT(tt_asserts, 0);
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_withdrawal_races_cleanup);
    TT_RUN(test_mgr_stress_exactly_once);
    return TT_MAIN_END();
}
