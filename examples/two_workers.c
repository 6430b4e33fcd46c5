/* two_workers.c - the demo: two workers in one process, a "worker" fetching tensors from a "ps"
   through step managers on the in-process loopback transport, for 5 steps. Per step, as in a
   TensorFlow RunGraph: start the step on both workers, the ps sends, the worker receives remotely
   (RecvTensor), then both clean the step up.
   `two_workers --trace out.json` also writes every transfer as a Chrome trace-event file: open
   it in https://ui.perfetto.dev or chrome://tracing. */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define WORKER "/job:worker/replica:0/task:0"
#define PS "/job:ps/replica:0/task:0"
#define STEPS 5
#define NT 4 /* tensors per step */

static const struct { const char* edge; int32_t rank; int64_t dims[2]; const char* shape; } spec[NT] = {
    {"edge_3_global_step", 1, {4, 1}, "[4]"},          /* 16 B */
    {"edge_8_bias", 1, {1024, 1}, "[1024]"},           /* 4 KiB */
    {"edge_12_embedding", 2, {128, 128}, "[128,128]"}, /* 64 KiB */
    {"edge_17_weights", 2, {512, 512}, "[512,512]"},   /* 1 MiB */
};
static float expect(int64_t step, int t, uint64_t i) { return (float)(step * 100 + t) + (float)(i % 4096); }

typedef struct xfer { /* one remote receive, as the worker sees it */
    int64_t step, posted_ns, done_ns;
    int t, ok;
} xfer;
static xfer xfers[STEPS][NT];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending;

static void on_fetched(void* user, const tfrdv_status* st, const tfrdv_args* send_args,
                       const tfrdv_args* recv_args, tfrdv_value* v, int is_dead) {
    xfer* x = (xfer*)user;
    uint64_t i, n = (uint64_t)(spec[x->t].dims[0] * spec[x->t].dims[1]);
    (void)send_args; (void)recv_args;
    x->done_ns = tfrdv_now_ns();
    if (st->code != TFRDV_OK) fprintf(stderr, "%s: %s %s\n", spec[x->t].edge, tfrdv_code_str(st->code), st->msg);
    else if (!is_dead && v->dtype == TFRDV_DT_FLOAT && v->rank == spec[x->t].rank && v->size == n * 4) {
        x->ok = v->dims[0] == spec[x->t].dims[0] && (v->rank == 1 || v->dims[1] == spec[x->t].dims[1]);
        for (i = 0; x->ok && i < n; i++) x->ok = ((const float*)v->data)[i] == expect(x->step, x->t, i);
    }
    tfrdv_value_release(v); /* ours now (NULL on error): the ps's buffer (zero copy) is freed */
    pthread_mutex_lock(&mu);
    pending--;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

/* --trace: one Chrome/Perfetto trace event per transfer side (tfrdv_trace_json), pid 1 for the
   worker and 2 for the ps. The hook may run on several threads at once: hence the lock. */
static FILE* trace_file;
static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t trace_t0;
static const char* trace_sep = "[";
static int pid_worker = 1, pid_ps = 2; /* trace_user of each manager */
static void on_trace(void* user, const tfrdv_trace_event* ev) {
    char line[1024];
    tfrdv_trace_json(ev, trace_t0, *(const int*)user, line, sizeof line);
    pthread_mutex_lock(&trace_mu);
    fprintf(trace_file, "%s%s\n", trace_sep, line);
    trace_sep = ",";
    pthread_mutex_unlock(&trace_mu);
}

static int fail(const char* what, const tfrdv_status* st) {
    fprintf(stderr, "%s: %s %s\n", what, tfrdv_code_str(st->code), st->msg);
    return 1;
}
static void print_stats(const char* who, tfrdv_mgr* m) {
    tfrdv_mgr_stats s;
    tfrdv_mgr_get_stats(m, &s);
    printf("  %-6s started %d steps and cleaned up %d; fetched %d tensors from other workers (%d completed);\n"
           "         served %d requests from other workers (%d arrived before their step started);\n"
           "         left over: %d steps, %d fetches in flight, %d cleaned-up step ids remembered\n",
           who, (int)s.steps_created, (int)s.steps_cleaned, (int)s.calls_started, (int)s.calls_completed,
           (int)s.requests_served, (int)s.requests_deferred, (int)s.active_steps, (int)s.calls_in_flight,
           (int)s.tombstones);
}

int main(int argc, char** argv) {
    tfrdv_loopback* lb = NULL;
    tfrdv_mgr *worker = NULL, *ps = NULL;
    tfrdv_mgr_config cfg = tfrdv_mgr_config_init();
    tfrdv_status st;
    tfrdv_key key;
    int64_t step, total_ns = 0;
    uint64_t bytes = 0;
    int t, good = 0;
    tfrdv_frame_iter top = {0, 0};
    if (argc == 3 && strcmp(argv[1], "--trace") == 0) {
        if (!(trace_file = fopen(argv[2], "w"))) return perror(argv[2]), 1;
        trace_t0 = tfrdv_now_ns();
        cfg.trace = on_trace;
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [--trace out.json]\n", argv[0]);
        return 2;
    }
    if (tfrdv_loopback_create(NULL, &lb, &st) != TFRDV_OK) return fail("loopback", &st);
    cfg.trace_user = &pid_worker;
    if (tfrdv_loopback_add_worker(lb, WORKER, &cfg, &worker, &st) != TFRDV_OK) return fail(WORKER, &st);
    cfg.trace_user = &pid_ps;
    if (tfrdv_loopback_add_worker(lb, PS, &cfg, &ps, &st) != TFRDV_OK) return fail(PS, &st);
    printf("The ps sends %d tensors per step and the worker fetches them (a remote receive over the loopback).\n"
           "latency: from tfrdv_recv_async to its callback\n\n", NT);
    printf("%4s  %-20s %10s  %-7s  %-10s %10s  %s\n", "step", "edge", "bytes", "dtype", "shape", "latency", "check");
    for (step = 1; step <= STEPS; step++) {
        tfrdv_rendezvous *wr, *pr;
        struct timespec until;
        if (tfrdv_mgr_start_step(worker, step, &wr, &st) != TFRDV_OK || tfrdv_mgr_start_step(ps, step, &pr, &st) != TFRDV_OK)
            return fail("start step", &st);
        for (t = 0; t < NT; t++) {
            xfer* x = &xfers[step - 1][t];
            uint64_t i, n = (uint64_t)(spec[t].dims[0] * spec[t].dims[1]);
            tfrdv_value* v = tfrdv_value_new(NULL, TFRDV_DT_FLOAT, spec[t].rank, spec[t].dims, NULL, n * sizeof(float));
            for (i = 0; v && i < n; i++) ((float*)v->data)[i] = expect(step, t, i);
            x->step = step;
            x->t = t;
            /* The key names the ps device and ITS incarnation: the ps rejects a stale one. */
            if (tfrdv_key_make(&key, PS "/device:CPU:0", tfrdv_mgr_incarnation(ps), WORKER "/device:CPU:0", spec[t].edge,
                               top, &st) != TFRDV_OK ||
                tfrdv_send(pr, &key.parsed, NULL, v, 0, &st) != TFRDV_OK) { /* ps: Send (buffered until fetched) */
                tfrdv_value_release(v); /* a failed send leaves the value with us */
                return fail(spec[t].edge, &st);
            }
            pthread_mutex_lock(&mu);
            pending++;
            pthread_mutex_unlock(&mu);
            x->posted_ns = tfrdv_now_ns();
            /* worker: Recv of a tensor on another worker = a remote call through the transport */
            if (tfrdv_recv_async(wr, &key.parsed, NULL, on_fetched, x, NULL) != TFRDV_OK) return 1;
        }
        /* loopback completes inline; a network transport completes later, so wait like an executor */
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 2;
        pthread_mutex_lock(&mu);
        while (pending > 0 && pthread_cond_timedwait(&cv, &mu, &until) == 0) {}
        pthread_mutex_unlock(&mu);
        tfrdv_unref(wr);
        tfrdv_unref(pr);
        tfrdv_mgr_cleanup(worker, step); /* CleanupGraph: aborts anything left, remembers the id */
        tfrdv_mgr_cleanup(ps, step);
        for (t = 0; t < NT; t++) {
            const xfer* x = &xfers[step - 1][t];
            uint64_t b = (uint64_t)(spec[t].dims[0] * spec[t].dims[1]) * 4;
            printf("%4d  %-20s %8llu B  float32  %-10s %7.1f us  %s\n", (int)step, spec[t].edge, (unsigned long long)b,
                   spec[t].shape, x->ok ? (double)(x->done_ns - x->posted_ns) / 1e3 : 0.0, x->ok ? "ok" : "FAILED");
            if (x->ok) { good++; bytes += b; total_ns += x->done_ns - x->posted_ns; }
        }
    }
    printf("\nThe loopback hands the worker a pointer to the ps's buffer (zero copy), so a 1 MiB tensor takes\n"
           "about as long as a 16 B one. A network transport would add the time to move the bytes.\n");
    printf("example key: %s\n", key.buf);
    printf("summary: %d/%d transfers intact, %llu bytes, mean latency %.1f us\n", good, STEPS * NT,
           (unsigned long long)bytes, good ? (double)total_ns / good / 1e3 : 0.0);
    print_stats("worker", worker);
    print_stats("ps", ps);
    tfrdv_mgr_destroy(worker);
    tfrdv_mgr_destroy(ps);
    tfrdv_loopback_destroy(lb);
    if (trace_file) {
        fprintf(trace_file, "%s]\n", trace_sep[0] == '[' ? "[" : "");
        if (fclose(trace_file) != 0) return perror(argv[2]), 1;
        printf("trace written to %s: open it in https://ui.perfetto.dev or chrome://tracing\n", argv[2]);
    } else {
        printf("(run with --trace out.json for a timeline of every transfer)\n");
    }
    return good == STEPS * NT ? 0 : 1;
}
