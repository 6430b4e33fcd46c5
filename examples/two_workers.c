/* two_workers.c - the demo: two workers in one process, a "worker" fetching tensors from a "ps"
   through step managers on the in-process loopback transport, for 5 steps. Per step, as in a
   TensorFlow RunGraph: find + initialize the step on both workers, the ps sends, the worker
   receives remotely (RecvTensor), then both clean the step up. */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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

typedef struct tensor { /* a float32 tensor that embeds the rendezvous view */
    tfrdv_value v;
    int64_t dims[2];
    float data[];
} tensor;
static void tensor_free(tfrdv_value* v) { free(v); } /* v is the first member */

typedef struct xfer { /* one remote receive, as the worker sees it */
    int64_t step, posted_ns, done_ns;
    int t, ok;
    char key[256];
} xfer;
static xfer xfers[STEPS][NT];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending;

static void on_fetched(void* user, const tfrdv_status* st, const tfrdv_args* send_args,
                       const tfrdv_args* recv_args, tfrdv_value* v, int is_dead) {
    xfer* x = (xfer*)user;
    uint64_t i, n = 0;
    (void)send_args; (void)recv_args;
    x->done_ns = tfrdv_now_ns();
    if (st->code != TFRDV_OK) fprintf(stderr, "%s: %s %s\n", x->key, tfrdv_code_str(st->code), st->msg);
    if (st->code == TFRDV_OK && v && !is_dead && v->dtype == 1 && v->rank == spec[x->t].rank) {
        n = v->size / 4;
        x->ok = v->dims[0] == spec[x->t].dims[0] && (v->rank == 1 || v->dims[1] == spec[x->t].dims[1]) &&
                n == (uint64_t)(spec[x->t].dims[0] * spec[x->t].dims[1]);
        for (i = 0; x->ok && i < n; i++) x->ok = ((const float*)v->data)[i] == expect(x->step, x->t, i);
    }
    tfrdv_value_release(v); /* ours now: the ps's buffer (zero copy) goes back to free() */
    pthread_mutex_lock(&mu);
    pending--;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static tfrdv_mgr* new_worker(const char* name, tfrdv_loopback* lb) {
    tfrdv_mgr_config cfg = tfrdv_mgr_config_init();
    tfrdv_mgr* m = NULL;
    cfg.worker_name = name;
    cfg.transport = tfrdv_loopback_transport(lb);
    if (tfrdv_mgr_create(&cfg, &m, NULL) != TFRDV_OK || tfrdv_loopback_register(lb, name, m, NULL) != TFRDV_OK) exit(1);
    return m;
}
static void print_stats(const char* who, tfrdv_mgr* m) {
    tfrdv_mgr_stats s;
    tfrdv_mgr_get_stats(m, &s);
    printf("%-7s steps %d created, %d cleaned | fetches %d started, %d completed | requests %d served"
           " (%d deferred) | now: %d steps, %d tombstones, %d calls in flight\n", who, (int)s.steps_created,
           (int)s.steps_cleaned, (int)s.calls_started, (int)s.calls_completed, (int)s.requests_served,
           (int)s.requests_deferred, (int)s.active_steps, (int)s.tombstones, (int)s.calls_in_flight);
}

int main(void) {
    tfrdv_loopback* lb;
    tfrdv_mgr *worker, *ps;
    int64_t step, total_ns = 0;
    uint64_t bytes = 0;
    int t, good = 0;
    tfrdv_frame_iter top = {0, 0};
    if (tfrdv_loopback_create(NULL, &lb, NULL) != TFRDV_OK) return 1;
    worker = new_worker(WORKER, lb);
    ps = new_worker(PS, lb);
    printf("ps -> worker over the loopback transport (zero copy); latency = tfrdv_recv_async to callback\n");
    for (step = 1; step <= STEPS; step++) {
        tfrdv_rendezvous *wr, *pr;
        tfrdv_status st;
        struct timespec until;
        if (tfrdv_mgr_find(worker, step, &wr, &st) != TFRDV_OK || tfrdv_mgr_initialize(wr, NULL, &st) != TFRDV_OK ||
            tfrdv_mgr_find(ps, step, &pr, &st) != TFRDV_OK || tfrdv_mgr_initialize(pr, NULL, &st) != TFRDV_OK) {
            fprintf(stderr, "step %d: %s\n", (int)step, st.msg);
            return 1;
        }
        for (t = 0; t < NT; t++) {
            xfer* x = &xfers[step - 1][t];
            uint64_t i, n = (uint64_t)(spec[t].dims[0] * spec[t].dims[1]);
            tensor* v = (tensor*)malloc(sizeof *v + n * sizeof(float));
            tfrdv_parsed_key k;
            size_t len;
            /* The key names the ps device and ITS incarnation: the ps rejects a stale one. */
            if (!v || tfrdv_key_create(PS "/device:CPU:0", tfrdv_mgr_incarnation(ps), WORKER "/device:CPU:0", spec[t].edge,
                                       top, x->key, sizeof x->key, &len, &st) != TFRDV_OK ||
                tfrdv_key_parse(x->key, len, &k, &st) != TFRDV_OK)
                return 1;
            x->step = step;
            x->t = t;
            v->v = (tfrdv_value){.dtype = 1 /* DT_FLOAT */, .rank = spec[t].rank, .dims = v->dims, .data = v->data,
                                 .size = n * sizeof(float), .release = tensor_free};
            memcpy(v->dims, spec[t].dims, sizeof v->dims);
            for (i = 0; i < n; i++) v->data[i] = expect(step, t, i);
            /* ps: Send (buffered in the ps's step table until fetched) */
            if (tfrdv_send(pr, &k, NULL, &v->v, 0, &st) != TFRDV_OK) { tfrdv_value_release(&v->v); return 1; }
            /* worker: Recv of a tensor on another worker = a remote call through the transport */
            pthread_mutex_lock(&mu);
            pending++;
            pthread_mutex_unlock(&mu);
            x->posted_ns = tfrdv_now_ns();
            if (tfrdv_recv_async(wr, &k, NULL, on_fetched, x) != TFRDV_OK) return 1;
        }
        /* loopback completes inline; a network transport completes later, so wait like an executor */
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 2;
        pthread_mutex_lock(&mu);
        while (pending > 0 && pthread_cond_timedwait(&cv, &mu, &until) == 0) {}
        pthread_mutex_unlock(&mu);
        tfrdv_unref(wr);
        tfrdv_unref(pr);
        tfrdv_mgr_cleanup(worker, step); /* CleanupGraph: aborts anything left, tombstones the id */
        tfrdv_mgr_cleanup(ps, step);
        for (t = 0; t < NT; t++) {
            const xfer* x = &xfers[step - 1][t];
            uint64_t b = (uint64_t)(spec[t].dims[0] * spec[t].dims[1]) * 4;
            printf("step %d  %-20s %8llu B  float32%-10s %8.1f us  %s\n", (int)step, spec[t].edge, (unsigned long long)b,
                   spec[t].shape, x->ok ? (double)(x->done_ns - x->posted_ns) / 1e3 : 0.0, x->ok ? "ok" : "FAILED");
            if (x->ok) { good++; bytes += b; total_ns += x->done_ns - x->posted_ns; }
        }
    }
    printf("example key: %s\n", xfers[0][0].key);
    printf("summary: %d/%d transfers intact, %llu bytes, mean latency %.1f us\n", good, STEPS * NT,
           (unsigned long long)bytes, good ? (double)total_ns / good / 1e3 : 0.0);
    print_stats("worker:", worker);
    print_stats("ps:", ps);
    tfrdv_mgr_destroy(worker);
    tfrdv_mgr_destroy(ps);
    tfrdv_loopback_destroy(lb); /* after every manager that uses it */
    return good == STEPS * NT ? 0 : 1;
}
