/* tcp_workers.c - the two-process demo: a "ps" and a "worker" started from the TF_CONFIG a
   TensorFlow job would use; the worker fetches tensors from the ps over tfrdv_tcp.h for 5 steps
   and checks every byte.
     ./tcp_workers        the demo: starts the worker first, then the ps (start order does not
                          matter), each with its own TF_CONFIG naming Unix sockets in /tmp; exits
                          0 if both sides checked out
     TF_CONFIG='{"cluster": {"ps": ["127.0.0.1:5000"], "worker": ["127.0.0.1:5001"]},
                 "task": {"type": "ps", "index": 0}}' ./tcp_workers
                          one task, as a cluster launcher starts it ("ps" or "worker")
   Nothing is passed around by hand: the worker asks the ps for its incarnation (the keys name it)
   and waits for the ps if it is not up yet; the ps cleans a step up once the worker has taken its
   4 tensors (16 B .. 1 MiB; tfrdv_mgr_drain), and ends after the last step. Both print which
   path the values took: the socket, or (same host: Unix sockets, or TCP addresses whose
   connection moved to a Unix socket) the ps's memory read straight into the worker's
   (process_vm_readv, values of 64 KiB and more). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* Linux: lets tfrdv_tcp.h use SO_PEERCRED and process_vm_readv (same host) */
#endif
#define TFRDV_IMPLEMENTATION
#define TFRDV_TCP_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_tcp.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PS "/job:ps/replica:0/task:0"
#define WORKER "/job:worker/replica:0/task:0" /* who the ps's tensors are for */
#define STEPS 5
#define NT 4                          /* tensors per step */
#define WAIT_NS (30 * 1000000000LL)   /* longest wait for anything, then a clear error */

static const struct { const char* edge; int32_t rank; int64_t dims[2]; const char* shape; } spec[NT] = {
    {"edge_3_global_step", 1, {4, 1}, "[4]"},          /* 16 B */
    {"edge_8_bias", 1, {1024, 1}, "[1024]"},           /* 4 KiB */
    {"edge_12_embedding", 2, {128, 128}, "[128,128]"}, /* 64 KiB */
    {"edge_17_weights", 2, {512, 512}, "[512,512]"},   /* 1 MiB */
};
static uint64_t elems(int t) { return (uint64_t)(spec[t].dims[0] * spec[t].dims[1]); }
static float expect(int64_t step, int t, uint64_t i) { return (float)(step * 100 + t) + (float)(i % 4096); }

static int fail(const char* who, const char* what, const tfrdv_status* st) {
    fprintf(stderr, "%s: %s: %s %s\n", who, what, tfrdv_code_str(st->code), st->msg);
    return 1;
}
/* the key of tensor t: sent by the ps's CPU (with the ps's incarnation) to the worker's CPU */
static tfrdv_code key_for(tfrdv_key* k, int t, uint64_t ps_inc, tfrdv_status* st) {
    tfrdv_frame_iter top = {0, 0};
    return tfrdv_key_make(k, PS "/device:CPU:0", ps_inc, WORKER "/device:CPU:0", spec[t].edge, top, st);
}
/* the cluster's workers table, this task's name and address: tfrdv_tcp.h takes the table as is */
static int start(const tfrdv_cluster* cl, const char* listen, tfrdv_tcp** tcp, tfrdv_mgr** m, tfrdv_status* st) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tc.listen_address = listen; /* NULL: a client only */
    tc.workers = cl->workers;
    tc.num_workers = cl->num_workers;
    if (tfrdv_tcp_create(&tc, tcp, st) != TFRDV_OK) return 0;
    mc.worker_name = cl->task_name;
    mc.transport = tfrdv_tcp_transport(*tcp);
    if (tfrdv_mgr_create(&mc, m, st) == TFRDV_OK && (!listen || tfrdv_tcp_attach(*tcp, *m, st) == TFRDV_OK)) return 1;
    tfrdv_tcp_destroy(*tcp);
    if (*m) tfrdv_mgr_destroy(*m);
    return 0;
}

/* ---- the ps: sends every step's tensors up front; they wait in its tables until fetched ---- */
static int run_ps(const tfrdv_cluster* cl) {
    tfrdv_tcp* tcp;
    tfrdv_mgr* m = NULL;
    tfrdv_status st;
    tfrdv_tcp_stats s;
    int64_t step;
    int t, rc = 0;
    if (!start(cl, cl->task_address, &tcp, &m, &st)) return fail("ps", cl->task_address, &st);
    for (step = 1; step <= STEPS && !rc; step++) {
        tfrdv_rendezvous* r = NULL;
        if (tfrdv_mgr_start_step(m, step, &r, &st) != TFRDV_OK) rc = fail("ps", "start step", &st);
        for (t = 0; !rc && t < NT; t++) {
            uint64_t i, n = elems(t);
            tfrdv_key k;
            tfrdv_value* v = tfrdv_value_new(NULL, TFRDV_DT_FLOAT, spec[t].rank, spec[t].dims, NULL, n * sizeof(float));
            for (i = 0; v && i < n; i++) ((float*)v->data)[i] = expect(step, t, i);
            if (!v || key_for(&k, t, tfrdv_mgr_incarnation(m), &st) != TFRDV_OK ||
                tfrdv_send(r, &k.parsed, NULL, v, 0, &st) != TFRDV_OK) {
                tfrdv_value_release(v); /* a failed send leaves the value with us */
                rc = v ? fail("ps", spec[t].edge, &st) : (fprintf(stderr, "ps: out of memory\n"), 1);
            }
        }
        if (r) tfrdv_unref(r);
    }
    printf("ps: %s serving on %s\n", cl->task_name, tfrdv_tcp_address(tcp));
    fflush(stdout);
    for (step = 1; step <= STEPS && !rc; step++) /* cleaned up once the worker has every tensor */
        if (tfrdv_mgr_drain(m, step, WAIT_NS, &st) != TFRDV_OK) rc = fail("ps", "step not fetched", &st);
    tfrdv_tcp_get_stats(tcp, &s);
    printf("ps: %llu of %d tensors delivered (%llu bytes; %llu read from this process's memory)%s\n",
           (unsigned long long)s.values_acked, STEPS * NT, (unsigned long long)s.bytes_sent,
           (unsigned long long)s.values_cma_sent, rc ? "" : ", every step cleaned up");
    fflush(stdout);
    tfrdv_tcp_destroy(tcp); /* also removes a Unix socket file */
    tfrdv_mgr_destroy(m);
    return rc;
}

/* ---- the worker: fetches each step's tensors together, checks every byte ---- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending; /* fetches of this step not completed yet (under mu) */
typedef struct xfer { int64_t step, posted_ns, done_ns; int t, ok; } xfer;
static void on_fetched(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    xfer* x = (xfer*)user;
    uint64_t i, n = elems(x->t);
    (void)sa;
    (void)ra;
    x->done_ns = tfrdv_now_ns();
    if (st->code != TFRDV_OK) fprintf(stderr, "worker: %s: %s %s\n", spec[x->t].edge, tfrdv_code_str(st->code), st->msg);
    else if (!dead && v->dtype == TFRDV_DT_FLOAT && v->rank == spec[x->t].rank && v->size == n * 4) {
        x->ok = v->dims[0] == spec[x->t].dims[0] && (v->rank == 1 || v->dims[1] == spec[x->t].dims[1]);
        for (i = 0; x->ok && i < n; i++) x->ok = ((const float*)v->data)[i] == expect(x->step, x->t, i);
    }
    tfrdv_value_release(v); /* ours now (NULL on error) */
    pthread_mutex_lock(&mu);
    if (--pending == 0) pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}
static void wait_step(void) { /* every callback runs: at the latest when the step is cleaned up */
    pthread_mutex_lock(&mu);
    while (pending) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}
static int run_worker(const tfrdv_cluster* cl) {
    tfrdv_tcp* tcp;
    tfrdv_mgr* m = NULL;
    tfrdv_status st;
    tfrdv_tcp_stats s;
    uint64_t ps_inc;
    int64_t step, total_ns = 0;
    int t, good = 0;
    static xfer xfers[STEPS + 1][NT];
    if (!start(cl, NULL, &tcp, &m, &st)) return fail("worker", "start", &st);
    if (tfrdv_mgr_peer_incarnation(m, PS, WAIT_NS, &ps_inc, &st) != TFRDV_OK) { /* waits for the ps */
        tfrdv_tcp_destroy(tcp);
        tfrdv_mgr_destroy(m);
        return fail("worker", "the ps's incarnation", &st);
    }
    printf("worker: %s fetches %d tensors per step from %s (incarnation %016llx)\n"
           "latency: from tfrdv_recv_async to its callback; a step's %d fetches are in flight together\n\n",
           cl->task_name, NT, PS, (unsigned long long)ps_inc, NT);
    printf("%4s  %-20s %10s  %-7s  %-10s %10s  %s\n", "step", "edge", "bytes", "dtype", "shape", "latency", "check");
    for (step = 1; step <= STEPS && good == (step - 1) * NT; step++) { /* stop after a failed step */
        tfrdv_rendezvous* r;
        if (tfrdv_mgr_start_step(m, step, &r, &st) != TFRDV_OK) {
            fail("worker", "start step", &st);
            break;
        }
        pthread_mutex_lock(&mu);
        pending = NT;
        pthread_mutex_unlock(&mu);
        for (t = 0; t < NT; t++) {
            xfer* x = &xfers[step][t];
            tfrdv_key k;
            x->step = step;
            x->t = t;
            x->posted_ns = tfrdv_now_ns();
            if (key_for(&k, t, ps_inc, &st) != TFRDV_OK ||
                tfrdv_recv_async(r, &k.parsed, NULL, on_fetched, x, &st) != TFRDV_OK)
                on_fetched(x, &st, NULL, NULL, NULL, 0); /* refused: report it, count it as done */
        }
        wait_step();
        tfrdv_unref(r);
        tfrdv_mgr_cleanup(m, step);
        for (t = 0; t < NT; t++) {
            const xfer* x = &xfers[step][t];
            printf("%4d  %-20s %8llu B  float32  %-10s %7.1f us  %s\n", (int)step, spec[t].edge, (unsigned long long)(elems(t) * 4),
                   spec[t].shape, x->ok ? (double)(x->done_ns - x->posted_ns) / 1e3 : 0.0, x->ok ? "ok" : "FAILED");
            if (x->ok) { good++; total_ns += x->done_ns - x->posted_ns; }
        }
    }
    printf("\nworker: %d/%d transfers intact, mean latency %.1f us\n", good, STEPS * NT, good ? (double)total_ns / good / 1e3 : 0.0);
    tfrdv_tcp_get_stats(tcp, &s);
    printf("worker: path to the ps: %s; %llu values read from its memory, the rest over the socket\n",
           s.tcp_upgrades ? "same host (its TCP connection moved to a Unix socket)" : s.same_host_grants ? "same host" : "socket only",
           (unsigned long long)s.values_cma);
    fflush(stdout);
    tfrdv_tcp_destroy(tcp); /* closes the connection (the ps sees the worker is done) */
    tfrdv_mgr_destroy(m);
    return good != STEPS * NT;
}

/* one task of the cluster TF_CONFIG describes */
static int run_task(const char* tf_config) {
    static char buf[4096]; /* the parsed table lives here */
    tfrdv_cluster cl;
    tfrdv_status st;
    if (tfrdv_cluster_parse(tf_config, strlen(tf_config), buf, sizeof buf, &cl, &st) != TFRDV_OK)
        return fail("TF_CONFIG", tf_config, &st);
    if (!cl.task_type || !cl.task_address) return fprintf(stderr, "TF_CONFIG names no task of its cluster\n"), 2;
    if (strcmp(cl.task_type, "ps") == 0) return run_ps(&cl);
    if (strcmp(cl.task_type, "worker") == 0) return run_worker(&cl);
    return fprintf(stderr, "TF_CONFIG: a task of type %s has nothing to do here\n", cl.task_type), 2;
}
/* a task in a process of its own, its TF_CONFIG in its environment */
static pid_t spawn(const char* fmt, const char* ps, const char* wk, const char* type) {
    static char tf_config[512];
    pid_t pid;
    snprintf(tf_config, sizeof tf_config, fmt, ps, wk, type);
    fflush(stdout);
    if ((pid = fork()) == 0) _exit(setenv("TF_CONFIG", tf_config, 1) ? 1 : run_task(getenv("TF_CONFIG")));
    return pid;
}
int main(void) {
    const char* fmt = "{\"cluster\": {\"ps\": [\"%s\"], \"worker\": [\"%s\"]}, \"task\": {\"type\": \"%s\", \"index\": 0}}";
    const char* env = getenv("TF_CONFIG");
    char ps[64], wk[64];
    pid_t w, p;
    int sw = 1, sp = 1, rc;
    if (env) return run_task(env);
    snprintf(ps, sizeof ps, "unix:/tmp/tfrdv-demo-%d-ps.sock", (int)getpid());
    snprintf(wk, sizeof wk, "unix:/tmp/tfrdv-demo-%d-worker.sock", (int)getpid());
    w = spawn(fmt, ps, wk, "worker"); /* the worker first: it waits for the ps */
    p = spawn(fmt, ps, wk, "ps");
    if (w < 0 || p < 0) return perror("fork"), 1;
    waitpid(w, &sw, 0);
    waitpid(p, &sp, 0);
    rc = !(WIFEXITED(sw) && WEXITSTATUS(sw) == 0 && WIFEXITED(sp) && WEXITSTATUS(sp) == 0);
    unlink(ps + 5); /* the socket file, in case the ps could not remove it */
    printf("%s\n", rc ? "demo FAILED" : "demo OK: two processes from one TF_CONFIG, every byte checked");
    return rc;
}
