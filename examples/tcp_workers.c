/* tcp_workers.c - the two-process demo: a "ps" and a "worker" in two processes; the worker fetches tensors
   from the ps over tfrdv_tcp.h (a Unix socket or TCP) for 5 steps and checks every byte.
     ./tcp_workers                  forks the ps (Unix socket in /tmp), runs the worker, exits 0
                                    if both sides checked out
     ./tcp_workers ps ADDR          only the ps; ADDR: unix:/tmp/ps.sock or 127.0.0.1:5000
     ./tcp_workers worker ADDR      only the worker (start it within 30 s of the ps)
   Per step the worker starts the step and fetches 4 float tensors (16 B .. 1 MiB). The ps starts
   every step and sends its tensors up front (they wait in its tables until fetched), then cleans
   each step up once its 4 tensors were served (written to the socket: tfrdv_tcp_get_stats). Every
   key carries the ps's incarnation: both sides know it here (a cluster's master hands it out).
   The ps ends when the worker has closed its connection. */
#define TFRDV_IMPLEMENTATION
#define TFRDV_TCP_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_tcp.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORKER "/job:worker/replica:0/task:0"
#define PS "/job:ps/replica:0/task:0"
#define PS_INCARNATION 0x7066726476707331ull
#define STEPS 5
#define NT 4      /* tensors per step */
#define WAIT_S 30 /* longest wait for anything, then a clear error */

static const struct { const char* edge; int32_t rank; int64_t dims[2]; const char* shape; } spec[NT] = {
    {"edge_3_global_step", 1, {4, 1}, "[4]"},          /* 16 B */
    {"edge_8_bias", 1, {1024, 1}, "[1024]"},           /* 4 KiB */
    {"edge_12_embedding", 2, {128, 128}, "[128,128]"}, /* 64 KiB */
    {"edge_17_weights", 2, {512, 512}, "[512,512]"},   /* 1 MiB */
};
static uint64_t elems(int t) { return (uint64_t)(spec[t].dims[0] * spec[t].dims[1]); }
static float expect(int64_t step, int t, uint64_t i) { return (float)(step * 100 + t) + (float)(i % 4096); }

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending; /* under mu */

static int wait_for(const int* n, int want) { /* at most WAIT_S seconds */
    struct timespec until;
    int ok;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_S;
    pthread_mutex_lock(&mu);
    while (*n != want && pthread_cond_timedwait(&cv, &mu, &until) == 0) {}
    ok = *n == want;
    pthread_mutex_unlock(&mu);
    return ok;
}
static int fail(const char* who, const char* what, const tfrdv_status* st) {
    fprintf(stderr, "%s: %s: %s %s\n", who, what, tfrdv_code_str(st->code), st->msg);
    return 1;
}
static tfrdv_code key_for(tfrdv_key* k, int t, tfrdv_status* st) { /* the ps's device and incarnation */
    tfrdv_frame_iter top = {0, 0};
    return tfrdv_key_make(k, PS "/device:CPU:0", PS_INCARNATION, WORKER "/device:CPU:0", spec[t].edge, top, st);
}

/* ---- the ps ---- */
static int ps_step(tfrdv_mgr* m, int64_t step) { /* start the step, send its tensors */
    tfrdv_rendezvous* r = NULL;
    tfrdv_status st;
    tfrdv_key k;
    int t, bad = 0;
    if (tfrdv_mgr_start_step(m, step, &r, &st) != TFRDV_OK) bad = fail("ps", "start step", &st);
    for (t = 0; !bad && t < NT; t++) {
        uint64_t i, n = elems(t);
        tfrdv_value* v = tfrdv_value_new(NULL, TFRDV_DT_FLOAT, spec[t].rank, spec[t].dims, NULL, n * sizeof(float));
        for (i = 0; v && i < n; i++) ((float*)v->data)[i] = expect(step, t, i);
        if (!v || key_for(&k, t, &st) != TFRDV_OK || tfrdv_send(r, &k.parsed, NULL, v, 0, &st) != TFRDV_OK) {
            tfrdv_value_release(v); /* a failed send leaves the value with us */
            bad = v ? fail("ps", spec[t].edge, &st) : (fprintf(stderr, "ps: out of memory\n"), 1);
        }
    }
    if (r) tfrdv_unref(r);
    return bad;
}
/* waits until n tensors were served and, if gone, the worker has disconnected (at most WAIT_S) */
static int ps_wait(tfrdv_tcp* tcp, uint64_t n, int gone, tfrdv_tcp_stats* s) {
    struct timespec ms10 = {0, 10000000};
    int64_t t0 = tfrdv_now_ns();
    for (;; nanosleep(&ms10, NULL)) {
        tfrdv_tcp_get_stats(tcp, s);
        if (s->serve_ok >= n && (!gone || s->connections == 0)) return 1;
        if (tfrdv_now_ns() - t0 > WAIT_S * 1000000000LL) return 0;
    }
}
static int run_ps(const char* addr, int ready_fd) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_tcp* tcp;
    tfrdv_mgr* m;
    tfrdv_status st;
    tfrdv_tcp_stats s;
    int64_t step;
    int rc = 0;
    tc.listen_address = addr;
    if (tfrdv_tcp_create(&tc, &tcp, &st) != TFRDV_OK) return fail("ps", addr, &st);
    mc.worker_name = PS;
    mc.incarnation = PS_INCARNATION;
    mc.transport = tfrdv_tcp_transport(tcp);
    if (tfrdv_mgr_create(&mc, &m, &st) != TFRDV_OK || tfrdv_tcp_attach(tcp, m, &st) != TFRDV_OK) {
        tfrdv_tcp_destroy(tcp);
        return fail("ps", "manager", &st);
    }
    for (step = 1; step <= STEPS && !rc; step++) rc = ps_step(m, step);
    printf("ps: %s serving on %s\n", PS, tfrdv_tcp_address(tcp));
    fflush(stdout);
    if (!rc && ready_fd >= 0 && write(ready_fd, "R", 1) != 1) rc = 1; /* tell main: ready */
    for (step = 1; step <= STEPS && !rc; step++) { /* the worker fetches the steps in order */
        if (!ps_wait(tcp, (uint64_t)step * NT, 0, &s)) rc = (fprintf(stderr, "ps: step %d: not all fetched in %d s\n", (int)step, WAIT_S), 1);
        tfrdv_mgr_cleanup(m, step); /* CleanupGraph: the step's tensors are gone */
    }
    if (!rc && !ps_wait(tcp, STEPS * NT, 1, &s)) rc = (fprintf(stderr, "ps: the worker stayed connected\n"), 1);
    tfrdv_tcp_get_stats(tcp, &s);
    printf("ps: served %llu of %d tensors (%llu bytes)%s\n", (unsigned long long)s.serve_ok, STEPS * NT,
           (unsigned long long)s.bytes_sent, rc ? "" : ", cleaned every step up");
    fflush(stdout);
    tfrdv_tcp_destroy(tcp); /* also removes a Unix socket file */
    tfrdv_mgr_destroy(m);
    return rc || s.serve_ok != STEPS * NT;
}

/* ---- the worker ---- */
typedef struct xfer { int64_t step, posted_ns, done_ns; int t, ok; } xfer;
static xfer xfers[STEPS + 1][NT];
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
    pending--;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}
static int run_worker(const char* addr) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_tcp_worker ps = {PS, addr};
    tfrdv_tcp* tcp;
    tfrdv_mgr* m;
    tfrdv_status st;
    tfrdv_key k;
    int64_t step, total_ns = 0;
    int t, good = 0;
    tc.workers = &ps; /* client only: no listen_address */
    tc.num_workers = 1;
    if (tfrdv_tcp_create(&tc, &tcp, &st) != TFRDV_OK) return fail("worker", "tcp", &st);
    mc.worker_name = WORKER;
    mc.transport = tfrdv_tcp_transport(tcp);
    if (tfrdv_mgr_create(&mc, &m, &st) != TFRDV_OK) {
        tfrdv_tcp_destroy(tcp);
        return fail("worker", "manager", &st);
    }
    printf("worker: fetching %d tensors per step from %s at %s\n"
           "latency: from tfrdv_recv_async to its callback; a step's %d fetches are in flight together\n\n", NT, PS, addr, NT);
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
            x->step = step;
            x->t = t;
            x->posted_ns = tfrdv_now_ns();
            if (key_for(&k, t, &st) != TFRDV_OK || tfrdv_recv_async(r, &k.parsed, NULL, on_fetched, x, NULL) != TFRDV_OK) {
                fail("worker", spec[t].edge, &st);
                on_fetched(x, &st, NULL, NULL, NULL, 0); /* count it as done (failed) */
            }
        }
        if (!wait_for(&pending, 0)) fprintf(stderr, "worker: step %d: no answer in %d s\n", (int)step, WAIT_S);
        tfrdv_unref(r);
        tfrdv_mgr_cleanup(m, step); /* aborts anything left, so every callback runs */
        wait_for(&pending, 0);
        for (t = 0; t < NT; t++) {
            const xfer* x = &xfers[step][t];
            printf("%4d  %-20s %8llu B  float32  %-10s %7.1f us  %s\n", (int)step, spec[t].edge, (unsigned long long)(elems(t) * 4),
                   spec[t].shape, x->ok ? (double)(x->done_ns - x->posted_ns) / 1e3 : 0.0, x->ok ? "ok" : "FAILED");
            if (x->ok) { good++; total_ns += x->done_ns - x->posted_ns; }
        }
    }
    printf("\nworker: %d/%d transfers intact, mean latency %.1f us\n", good, STEPS * NT, good ? (double)total_ns / good / 1e3 : 0.0);
    fflush(stdout);
    tfrdv_tcp_destroy(tcp); /* closes the connection: the ps sees the worker is done */
    tfrdv_mgr_destroy(m);
    return good != STEPS * NT;
}

int main(int argc, char** argv) {
    char addr[64], ready;
    int fds[2], status = 0, rc;
    pid_t pid;
    if (argc == 3 && strcmp(argv[1], "ps") == 0) return run_ps(argv[2], -1);
    if (argc == 3 && strcmp(argv[1], "worker") == 0) return run_worker(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [ps|worker ADDRESS]   (ADDRESS: unix:/path or host:port)\n", argv[0]);
        return 2;
    }
    snprintf(addr, sizeof addr, "unix:/tmp/tfrdv-demo-%d.sock", (int)getpid());
    fflush(stdout);
    if (pipe(fds) != 0 || (pid = fork()) < 0) return perror("fork"), 1;
    if (pid == 0) { /* the ps process */
        close(fds[0]);
        _exit(run_ps(addr, fds[1]));
    }
    close(fds[1]);
    if (read(fds[0], &ready, 1) == 1) rc = run_worker(addr); /* read 0 bytes: the ps exited */
    else rc = (fprintf(stderr, "the ps did not start\n"), 1);
    if (rc) kill(pid, SIGTERM);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
    unlink(addr + 5); /* the socket file, in case the ps could not remove it */
    printf("%s\n", rc ? "demo FAILED" : "demo OK: two processes, every byte checked");
    return rc;
}
