/* test_locks.c - the built-in lock every table, manager and cancellation manager uses. On Linux it
   is a futex word whose unlock is a plain store; a thread about to sleep pays for the fence
   instead (membarrier). Built twice: as test_locks (membarrier when the kernel offers it) and as
   test_locks_fenced (-DTFRDV_NO_MEMBARRIER: an atomic exchange unlocks). Contracts: the mode
   matches what the kernel offers; mutual exclusion under contention with threads that really
   sleep; no lost wake-up (a waiter that slept is always woken: every run finishes); a waiter spins
   only when the process may run on more than one CPU (pinned to one, the lock still excludes and
   wakes everyone); and the pair path that counts deliveries per shard keeps values exactly once
   under two threads, and its counts wrap safely. */
#define _POSIX_C_SOURCE 200809L
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"
#include <pthread.h>
#include <time.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__linux__) && defined(__GLIBC__) && !defined(TFRDV_NO_FUTEX)
#define FUTEX_LOCK 1
#endif

static void sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

/* a watchdog fired: a thread is stuck for good and cannot be joined; fail this test and stop */
static void give_up(void) {
    TT_CHECK(0);
    printf("%d passed, %d failed\n", tt_passed, tt_failed + 1);
    exit(1);
}

#define NTHREADS 4 /* more threads than this machine's 2 cores: holders get preempted, waiters sleep */
#define ROUNDS 200000
#define HOLD_EVERY 256 /* every so often a holder stays long enough that waiters give up spinning */

typedef struct shared {
    tfrdv__mutex mu;
    long counter;     /* written only under mu, without atomics */
    long inside;      /* threads inside the critical section (must stay 0 or 1) */
    long overlaps;    /* times a thread found another inside */
    long saw_sleeper; /* times a holder saw a waiter announced to sleep */
    long rounds;      /* lock/unlock per thread */
    int done;         /* threads finished (atomic) */
} shared;

static void* hammer(void* p) {
    shared* s = (shared*)p;
    long i;
    for (i = 0; i < s->rounds; i++) {
        tfrdv__lock(&s->mu);
        if (s->inside++ != 0) s->overlaps++;
        s->counter++;
#if defined(FUTEX_LOCK)
        if (__atomic_load_n(tfrdv__sleepers(&s->mu), __ATOMIC_RELAXED) > 0) s->saw_sleeper++;
#endif
        if (i % HOLD_EVERY == 0) sleep_ms(1);
        s->inside--;
        tfrdv__unlock(&s->mu);
    }
    __atomic_fetch_add(&s->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void test_lock_mode_matches_the_kernel(void) {
#if defined(FUTEX_LOCK)
    tfrdv__mutex m;
    int want = 0;
#if !defined(TFRDV_NO_MEMBARRIER) && defined(SYS_membarrier)
    long q = syscall(SYS_membarrier, 0 /* MEMBARRIER_CMD_QUERY */, 0, 0);
    want = q > 0 && (q & 8 /* MEMBARRIER_CMD_PRIVATE_EXPEDITED */) != 0;
#endif
    TT_CHECK(tfrdv__mutex_init(&m, NULL));
    printf("    (unlock: %s)\n", m.fast ? "plain store, sleepers use membarrier" : "atomic exchange");
    TT_CHECK_EQ_INT(m.fast, want);
    tfrdv__mutex_destroy(&m);
#endif
}

/* NTHREADS threads x rounds lock/unlock on one lock; every 256th holder sleeps 1 ms, so the others
   exhaust their spin and sleep in the kernel. A lost wake-up leaves a thread asleep forever:
   the watchdog (60 s) reports it instead of hanging. The lock is made here (after any change of
   the CPU mask). */
static void contend(long rounds) {
    shared s;
    pthread_t th[NTHREADS];
    int i, waited = 0;
    memset(&s, 0, sizeof s);
    s.rounds = rounds;
    TT_CHECK(tfrdv__mutex_init(&s.mu, NULL));
    for (i = 0; i < NTHREADS; i++) TT_CHECK_EQ_INT(pthread_create(&th[i], NULL, hammer, &s), 0);
    while (__atomic_load_n(&s.done, __ATOMIC_SEQ_CST) < NTHREADS && waited < 60000) {
        sleep_ms(10);
        waited += 10;
    }
    if (__atomic_load_n(&s.done, __ATOMIC_SEQ_CST) < NTHREADS) {
        printf("    a thread never woke (lost wake-up): %d of %d finished after 60 s\n", s.done, NTHREADS);
        give_up(); /* the sleeping threads cannot be joined */
    }
    for (i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    TT_CHECK_EQ_INT(s.counter, (long)NTHREADS * rounds);
    TT_CHECK_EQ_INT(s.overlaps, 0);
#if defined(FUTEX_LOCK)
    TT_CHECK(s.saw_sleeper > 0); /* the sleeping path ran */
    TT_CHECK_EQ_INT(*tfrdv__sleepers(&s.mu), 0);
    TT_CHECK_EQ_INT(s.mu.word, 0);
#endif
    printf("    (%ld holds saw a sleeping waiter)\n", s.saw_sleeper);
    tfrdv__mutex_destroy(&s.mu);
}
static void test_lock_contended_with_sleepers_is_exclusive_and_wakes_everyone(void) { contend(ROUNDS); }

/* A contended lock spins before it sleeps only when the process may run on more than one CPU (on
   one, a spinning waiter only delays the holder). The CPU mask is read once per process: the test
   resets that cache around pinning itself, and the threads it starts inherit the pin. */
static void test_lock_spins_only_with_more_than_one_cpu(void) {
#if defined(FUTEX_LOCK)
    unsigned long all[16], one[16];
    long n = syscall(SYS_sched_getaffinity, 0, sizeof all, all), i;
    int cpus = 0, first = -1;
    tfrdv__mutex m;
    TT_CHECK(n > 0);
    if (n <= 0) return;
    for (i = 0; i < n / (long)sizeof all[0]; i++) cpus += __builtin_popcountl(all[i]);
    for (i = 0; first < 0 && i < n * 8; i++)
        if ((all[i / 64] >> (i % 64)) & 1) first = (int)i;
    TT_CHECK(tfrdv__mutex_init(&m, NULL));
    printf("    (%d CPUs: a waiter spins %d pauses)\n", cpus, m.spin);
    TT_CHECK(cpus > 1 ? m.spin > 0 : m.spin == 0);
    tfrdv__mutex_destroy(&m);
    memset(one, 0, sizeof one);
    one[first / 64] = 1ul << (first % 64);
    TT_CHECK_EQ_INT(syscall(SYS_sched_setaffinity, 0, sizeof one, one), 0);
    tfrdv__cpu_state = 0;
    TT_CHECK(tfrdv__mutex_init(&m, NULL));
    TT_CHECK_EQ_INT(m.spin, 0);
    tfrdv__mutex_destroy(&m);
    contend(ROUNDS / 4); /* all threads on one CPU: waiters go straight to sleep */
    TT_CHECK_EQ_INT(syscall(SYS_sched_setaffinity, 0, sizeof all, all), 0);
    tfrdv__cpu_state = 0;
#endif
}

/* the pair path under two threads on one key: a producer sends 200,000 values while a consumer
   receives; deliveries run on both threads (whoever comes second) and end with the per-shard
   count. Each value is received once, in order, and released once; destroy then waits for none. */
typedef struct pc {
    tfrdv_rendezvous* r;
    tkey k;
    tval* v;
    long next;    /* the consumer's next expected id */
    long wrong;   /* out-of-order or failed deliveries */
    long got;     /* atomic */
} pc;
static void pc_done(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                    tfrdv_value* v, int dead) {
    pc* x = (pc*)user;
    (void)sa; (void)ra; (void)dead;
    if (st->code != TFRDV_OK || !v || vid(v) != x->next) x->wrong++;
    x->next++;
    tfrdv_value_release(v);
    __atomic_fetch_add(&x->got, 1, __ATOMIC_SEQ_CST);
}
#define PC_N 200000
static void* producer(void* p) {
    pc* x = (pc*)p;
    long i;
    for (i = 0; i < PC_N; i++)
        if (tfrdv_send(x->r, &x->k.pk, NULL, &x->v[i].v, 0, NULL) != TFRDV_OK) break;
    return NULL;
}
static void test_pair_path_two_threads_exactly_once_in_order(void) {
    fx_alloc ca;
    pc x;
    pthread_t th;
    long i, released = 0;
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_status st;
    memset(&x, 0, sizeof x);
    memset(&ca, 0, sizeof ca);
    cfg.hooks = fx_alloc_hooks(&ca);
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &x.r, &st), TFRDV_OK);
    tkey_make(&x.k, "/job:a/replica:0/task:0/device:CPU:0", 1, "/job:a/replica:0/task:0/device:CPU:0", "pair");
    x.v = (tval*)calloc(PC_N, sizeof *x.v);
    TT_CHECK(x.v != NULL);
    if (!x.v) return;
    for (i = 0; i < PC_N; i++) tval_init(&x.v[i], (int)i);
    TT_CHECK_EQ_INT(pthread_create(&th, NULL, producer, &x), 0);
    /* receives are posted in order by this thread, so completions come in send order */
    for (i = 0; i < PC_N; i++) TT_CHECK_EQ_INT(tfrdv_recv_async(x.r, &x.k.pk, NULL, pc_done, &x, 0), TFRDV_OK);
    pthread_join(th, NULL);
    TT_CHECK_EQ_INT(__atomic_load_n(&x.got, __ATOMIC_SEQ_CST), PC_N);
    TT_CHECK_EQ_INT(x.wrong, 0);
    tfrdv_destroy(x.r);
    for (i = 0; i < PC_N; i++) released += rel(&x.v[i]);
    TT_CHECK_EQ_INT(released, PC_N);
    FX_CHECK_EMPTY(&ca);
    free(x.v);
}

/* The per-shard delivery counts wrap: 16 pairs across the wrap, then destroy (which compares them)
   must return at once and free everything; it would wait for ever if the counts disagreed. */
static void* destroyer(void* p) {
    tfrdv_destroy((tfrdv_rendezvous*)p);
    return NULL;
}
static void test_delivery_counts_wrap(void) {
    fx_alloc ca;
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    tfrdv_status st;
    tkey k;
    tval v[16];
    pthread_t th;
    int i, waited = 0, got = 0;
    memset(&ca, 0, sizeof ca);
    cfg.hooks = fx_alloc_hooks(&ca);
    cfg.num_shards = 1;
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, &st), TFRDV_OK);
    r->shards[0].dl_begun = ~0ul - 5;      /* 3 deliveries before the wrap */
    r->shards[0].dl_ended = (long)(~0ul - 5);
    tkey_make(&k, "/job:a/replica:0/task:0/device:CPU:0", 1, "/job:a/replica:0/task:0/device:CPU:0", "wrap");
    for (i = 0; i < 16; i++) {
        rcv x;
        tval_init(&v[i], i);
        rcv_init(&x);
        if (i & 1) {
            TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &x, 0), TFRDV_OK);
            TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v[i].v, 0, NULL), TFRDV_OK);
        } else {
            TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v[i].v, 0, NULL), TFRDV_OK);
            TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &x, 0), TFRDV_OK);
        }
        got += x.calls == 1 && x.id == i;
    }
    TT_CHECK_EQ_INT(got, 16);
    TT_CHECK(r->shards[0].dl_begun < 100); /* wrapped */
    TT_CHECK_EQ_INT(pthread_create(&th, NULL, destroyer, r), 0);
    while (fx_live(&ca) && waited < 10000) {
        sleep_ms(10);
        waited += 10;
    }
    if (fx_live(&ca)) {
        printf("    destroy did not return: the wrapped delivery counts disagree\n");
        give_up();
    }
    pthread_join(th, NULL);
    FX_CHECK_EMPTY(&ca);
}

static void test_no_assert_tripped(void) { TT_CHECK_EQ_INT(tt_asserts, 0); }

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_lock_mode_matches_the_kernel);
    TT_RUN(test_lock_contended_with_sleepers_is_exclusive_and_wakes_everyone);
    TT_RUN(test_lock_spins_only_with_more_than_one_cpu);
    TT_RUN(test_pair_path_two_threads_exactly_once_in_order);
    TT_RUN(test_delivery_counts_wrap);
    TT_RUN(test_no_assert_tripped);
    return TT_MAIN_END();
}
