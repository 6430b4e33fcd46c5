/* bench_util.h - timing harness, counting allocator, table printer and TARGET lines for the benches.
   Include after tfrdv.h (which sets _POSIX_C_SOURCE for clock_gettime). Not a public header. */
#ifndef TFRDV_BENCH_UTIL_H
#define TFRDV_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- clock ---------------------------------------------------------------------------------- */
static int64_t bu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Keeps a value (or the memory behind a pointer) alive for the optimiser. */
#if defined(__GNUC__) || defined(__clang__)
#define BU_ESCAPE(p) __asm__ __volatile__("" : : "g"(p) : "memory")
#else
static void* volatile bu_escape_sink;
#define BU_ESCAPE(p) (bu_escape_sink = (void*)(p))
#endif
static volatile uint64_t bu_sink;

/* ---- measurement ---------------------------------------------------------------------------- */
/* A benchmark body runs `iters` operations and returns the elapsed nanoseconds it measured
   (so two-thread bodies can exclude their thread start-up). */
typedef int64_t (*bu_run_fn)(void* ctx, long iters);

#define BU_REPS 5
#define BU_MIN_REP_NS 50000000LL  /* every timed repetition lasts at least this long */
#define BU_GOAL_REP_NS 75000000LL /* what calibration aims for */

static int bu_cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}
static double bu_median(double* v, int n) {
    qsort(v, (size_t)n, sizeof *v, bu_cmp_double);
    return (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct bu_job {
    bu_run_fn fn;
    void* ctx;
    long iters;          /* set by calibration */
    double ns[BU_REPS];  /* ns/op of each repetition */
    double median;
} bu_job;

static bu_job bu_job_make(bu_run_fn fn, void* ctx) {
    bu_job j;
    memset(&j, 0, sizeof j);
    j.fn = fn;
    j.ctx = ctx;
    return j;
}

/* Finds an iteration count for one repetition of about BU_GOAL_REP_NS (doubles as warm-up). */
static void bu_calibrate(bu_job* j) {
    long n = 256;
    int64_t t;
    for (;;) {
        t = j->fn(j->ctx, n);
        if (t >= BU_GOAL_REP_NS / 4 || n > (1L << 40)) break;
        n *= t < BU_GOAL_REP_NS / 64 ? 8 : 2;
    }
    if (t < 1) t = 1;
    j->iters = (long)((double)n * (double)BU_GOAL_REP_NS / (double)t) + 1;
}

/* Measures k jobs together: BU_REPS rounds, each running every job once (interleaved, so a change
   of machine load hits the baseline and the subject alike). A repetition shorter than
   BU_MIN_REP_NS is redone with more iterations. Fills ns[] and median of every job. */
static void bu_measure_group(bu_job* jobs, int k) {
    int i, r, retry;
    for (i = 0; i < k; i++) bu_calibrate(&jobs[i]);
    for (r = 0; r < BU_REPS; r++) {
        for (i = 0; i < k; i++) {
            int64_t t = 0;
            for (retry = 0; retry < 4; retry++) {
                t = jobs[i].fn(jobs[i].ctx, jobs[i].iters);
                if (t >= BU_MIN_REP_NS) break;
                jobs[i].iters = jobs[i].iters * 3 / 2 + 1;
            }
            jobs[i].ns[r] = (double)t / (double)jobs[i].iters;
        }
    }
    for (i = 0; i < k; i++) {
        double v[BU_REPS];
        memcpy(v, jobs[i].ns, sizeof v);
        jobs[i].median = bu_median(v, BU_REPS);
    }
}
/* Median over the rounds of subject/baseline (both measured in the same round). */
static double bu_ratio(const bu_job* subject, const bu_job* baseline) {
    double v[BU_REPS];
    int r;
    for (r = 0; r < BU_REPS; r++) v[r] = subject->ns[r] / baseline->ns[r];
    return bu_median(v, BU_REPS);
}
/* One job alone: median ns/op. */
static double bu_measure(bu_run_fn fn, void* ctx) {
    bu_job j = bu_job_make(fn, ctx);
    bu_measure_group(&j, 1);
    return j.median;
}

/* 1-minute load average (Linux), or -1 */
static double bu_loadavg(void) {
    double l = -1;
    FILE* f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

/* ---- counting allocator (sized free is checked against a 16-byte header) ---------------------
   Counts what the library asks for (requested bytes), not the C library's own chunk overhead.
   Plain counters: use it from one thread at a time. */
typedef struct bu_counter {
    uint64_t allocs, frees, size_mismatches, failed;
    int64_t live_bytes, peak_bytes;
} bu_counter;

static void* bu_count_alloc(void* user, size_t size) {
    bu_counter* c = (bu_counter*)user;
    unsigned char* p = (unsigned char*)malloc(size + 16);
    if (!p) {
        c->failed++;
        return 0;
    }
    memcpy(p, &size, sizeof size);
    c->allocs++;
    c->live_bytes += (int64_t)size;
    if (c->live_bytes > c->peak_bytes) c->peak_bytes = c->live_bytes;
    return p + 16;
}
static void bu_count_free(void* user, void* ptr, size_t size) {
    bu_counter* c = (bu_counter*)user;
    unsigned char* p = (unsigned char*)ptr - 16;
    size_t real;
    memcpy(&real, p, sizeof real);
    if (real != size) c->size_mismatches++;
    c->frees++;
    c->live_bytes -= (int64_t)real;
    free(p);
}
static tfrdv_hooks bu_counting_hooks(bu_counter* c) {
    tfrdv_hooks h;
    memset(&h, 0, sizeof h);
    h.allocator.alloc_fn = bu_count_alloc;
    h.allocator.free_fn = bu_count_free;
    h.allocator.user = c;
    return h;
}

/* ---- table ---------------------------------------------------------------------------------- */
#define BU_FMT "%-44s %-27s %-11s %-7s %-11s %s\n"

static void bu_header(void) {
    printf(BU_FMT, "benchmark", "ns/op or value", "baseline", "ratio", "target", "verdict");
    printf(BU_FMT, "---------", "--------------", "--------", "-----", "------", "-------");
}
static void bu_section(const char* title) { printf("%s\n", title); }
/* verdict: 1 meets, 0 misses, -1 no target (info) */
static void bu_row(const char* name, const char* value, const char* baseline, double ratio,
                   const char* target, int verdict) {
    char r[32];
    if (ratio > 0) snprintf(r, sizeof r, "%.2fx", ratio);
    else snprintf(r, sizeof r, "-");
    printf(BU_FMT, name, value, baseline ? baseline : "-", r, target ? target : "-",
           verdict < 0 ? "info" : verdict ? "meets" : "misses");
    fflush(stdout);
}

/* ---- TARGET lines ----------------------------------------------------------------------------
   One line per goal, gathered while the table prints and printed after it (bu_targets_print), in
   one format for every bench that runs on two processes (socket, same-host shared memory, ...):
       TARGET <name> <placement> <value> met|missed
   name: what was compared (no spaces); placement: where the two ends ran (`one-cpu`, `two-cpus`,
   `unpinned`); value: the measured figure, usually a ratio to a baseline of the same placement
   and run. cmp "<=" or ">=" against threshold decides met. Returns 1 met, 0 missed. A missed
   target is reported, never a failure. */
#if defined(__GNUC__) || defined(__clang__)
#define BU_UNUSED __attribute__((unused))
#else
#define BU_UNUSED
#endif
static char bu_targets[16384];
static size_t bu_targets_len;
BU_UNUSED static int bu_target(const char* name, const char* placement, double value, const char* cmp, double threshold) {
    int met = cmp[0] == '<' ? value <= threshold : value >= threshold;
    if (bu_targets_len < sizeof bu_targets - 256)
        bu_targets_len += (size_t)snprintf(bu_targets + bu_targets_len, sizeof bu_targets - bu_targets_len,
                                           "TARGET %s %s %.3f %s\n", name, placement, value, met ? "met" : "missed");
    return met;
}
BU_UNUSED static void bu_targets_print(void) { fputs(bu_targets, stdout); }

static void bu_die(const char* what) {
    fprintf(stderr, "bench: %s\n", what);
    exit(1);
}

#endif /* TFRDV_BENCH_UTIL_H */
