/* grpc_workers.c - two workers in two processes fetching tensors from each other over gRPC
   (tfrdv_grpc.h, TensorFlow's RecvTensor wire format), with a trace table per worker.

     ./grpc_workers       runs both workers itself (two child processes on 127.0.0.1, free
                          ports, each with its own TF_CONFIG) and exits 0 when both succeeded
     TF_CONFIG='{"cluster": {"a": ["127.0.0.1:5001"], "b": ["127.0.0.1:5002"]},
                 "task": {"type": "a", "index": 0}}' ./grpc_workers        (terminal 1; "b" in 2)

   Worker "a" is /job:a/replica:0/task:0, "b" the other job; the cluster's table goes to
   tfrdv_grpc_config.workers as it is. Each asks the other for its incarnation
   (tfrdv_mgr_peer_incarnation: GetStatus, waiting while the other is not up yet; a key must carry
   the source device's incarnation), then for 3 steps sends 4 float32 tensors (16 B .. 4 MiB) and
   receives the 4 the other one sent, checking every byte. A step is cleaned up once the other
   worker has fetched everything (seen in the trace). */
#define TFRDV_IMPLEMENTATION
#define TFRDV_GRPC_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_grpc.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STEPS 3
#define NT 4
static const int64_t sizes[NT] = {4, 1024, 64 * 1024, 1024 * 1024}; /* float32 elements */
static float expect(int64_t step, int t, int64_t i) { return (float)(step * 1000 + t) + (float)(i % 1000) * 0.5f; }

typedef struct tensor {
    tfrdv_value v;
    int64_t dims[1];
} tensor;
static void tensor_free(tfrdv_value* v) { free(v); }
static void sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int fetched, bad, served[STEPS + 1];
static char table[16384];
static size_t table_len;
static char me[64], peer[64];

/* the manager's trace hook: one row per transfer, both directions */
static void on_trace(void* user, const tfrdv_trace_event* ev) {
    const char* edge = ev->key.ptr;
    int parts = 0;
    size_t i, elen = 0;
    (void)user;
    for (i = 0; i < ev->key.len && parts < 4; i++) /* the edge name is the key's 4th part */
        if (ev->key.ptr[i] == ';' && ++parts == 3) edge = ev->key.ptr + i + 1;
    while (edge + elen < ev->key.ptr + ev->key.len && edge[elen] != ';') elen++;
    pthread_mutex_lock(&mu);
    if (table_len < sizeof table - 200)
        table_len += (size_t)snprintf(table + table_len, sizeof table - table_len, "  %-6s step %d  %-12.*s %9llu B  dtype %d  %8.1f us  %s\n",
                                      ev->side == TFRDV_TRACE_FETCH ? "fetch" : ev->side == TFRDV_TRACE_SERVE ? "serve" : "local",
                                      (int)ev->step_id, (int)elen, edge, (unsigned long long)ev->bytes, (int)ev->dtype,
                                      (double)(ev->end_ns - ev->start_ns) / 1e3, tfrdv_code_str(ev->code));
    if (ev->side == TFRDV_TRACE_SERVE && ev->code == TFRDV_OK && ev->step_id >= 1 && ev->step_id <= STEPS) served[ev->step_id]++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}
typedef struct want { int64_t step; int t; } want;
static void on_fetched(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    want* w = (want*)user;
    int ok = st->code == TFRDV_OK && v && !dead && v->dtype == 1 && v->rank == 1 && v->dims[0] == sizes[w->t];
    int64_t i;
    (void)sa;
    (void)ra;
    for (i = 0; ok && i < sizes[w->t]; i++) ok = ((const float*)v->data)[i] == expect(w->step, w->t, i);
    if (st->code != TFRDV_OK) fprintf(stderr, "%s: fetch failed: %s %s\n", me, tfrdv_code_str(st->code), st->msg);
    tfrdv_value_release(v);
    pthread_mutex_lock(&mu);
    fetched++;
    bad += !ok;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}
static int wait_for(int* counter, int target, int seconds) {
    struct timespec until;
    int ok;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    pthread_mutex_lock(&mu);
    while (*counter < target && pthread_cond_timedwait(&cv, &mu, &until) == 0) {}
    ok = *counter >= target;
    pthread_mutex_unlock(&mu);
    return ok;
}

/* this task of the cluster in TF_CONFIG ("a" or "b") */
static int worker(void) {
    static char buf[4096]; /* the parsed cluster lives here */
    char my_dev[128], peer_dev[128];
    const char* name;
    tfrdv_cluster cl;
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_grpc* g;
    tfrdv_mgr* m;
    tfrdv_status st;
    uint64_t peer_inc = 0;
    int64_t step;
    int t, rc = 0;
    static want wants[STEPS + 1][NT];
    tfrdv_frame_iter top = {0, 0};
    if (tfrdv_cluster_from_env(buf, sizeof buf, &cl, &st) != TFRDV_OK) return fprintf(stderr, "TF_CONFIG: %s\n", st.msg), 2;
    if (!cl.task_type || !cl.task_address || (strcmp(cl.task_type, "a") != 0 && strcmp(cl.task_type, "b") != 0))
        return fprintf(stderr, "TF_CONFIG names no task \"a\" or \"b\" of its cluster\n"), 2;
    name = cl.task_type;
    snprintf(me, sizeof me, "%s", cl.task_name);
    snprintf(peer, sizeof peer, "/job:%s/replica:0/task:0", strcmp(name, "a") == 0 ? "b" : "a");
    snprintf(my_dev, sizeof my_dev, "%s/device:CPU:0", me);
    snprintf(peer_dev, sizeof peer_dev, "%s/device:CPU:0", peer);
    gc.listen_address = cl.task_address;
    gc.workers = cl.workers; /* the cluster's table, as it is */
    gc.num_workers = cl.num_workers;
    if (tfrdv_grpc_create(&gc, &g, &st) != TFRDV_OK) {
        fprintf(stderr, "%s: %s\n", me, st.msg);
        return 1;
    }
    mc.worker_name = me;
    mc.transport = tfrdv_grpc_transport(g);
    mc.trace = on_trace;
    mc.call_timeout_ns = 30000000000LL;
    if (tfrdv_mgr_create(&mc, &m, &st) != TFRDV_OK || tfrdv_grpc_attach(g, m, &st) != TFRDV_OK) {
        fprintf(stderr, "%s: %s\n", me, st.msg);
        return 1;
    }
    /* the peer's incarnation (GetStatus; it may still be starting: waits up to 30 s) */
    if (tfrdv_mgr_peer_incarnation(m, peer, 30000000000LL, &peer_inc, &st) != TFRDV_OK) {
        fprintf(stderr, "%s: %s\n", me, st.msg);
        tfrdv_grpc_destroy(g);
        tfrdv_mgr_destroy(m);
        return 1;
    }
    printf("%s: listening on %s (port %d), incarnation %016llx; peer %s, incarnation %016llx\n", me, cl.task_address,
           tfrdv_grpc_port(g), (unsigned long long)tfrdv_mgr_incarnation(m), peer, (unsigned long long)peer_inc);
    fflush(stdout);
    for (step = 1; step <= STEPS; step++) {
        tfrdv_rendezvous* r;
        if (tfrdv_mgr_find(m, step, &r, &st) != TFRDV_OK || tfrdv_mgr_initialize(r, NULL, &st) != TFRDV_OK) {
            fprintf(stderr, "%s: step %d: %s\n", me, (int)step, st.msg);
            return 1;
        }
        for (t = 0; t < NT; t++) {
            char edge[32], key[512];
            size_t len;
            tfrdv_parsed_key k;
            tensor* v = (tensor*)malloc(sizeof *v + (size_t)sizes[t] * sizeof(float));
            int64_t i;
            /* send mine: key = my device, my incarnation, the peer's device */
            snprintf(edge, sizeof edge, "%s_to_peer_%d", name, t);
            if (!v || tfrdv_key_create(my_dev, tfrdv_mgr_incarnation(m), peer_dev, edge, top, key, sizeof key, &len, &st) != TFRDV_OK ||
                tfrdv_key_parse(key, len, &k, &st) != TFRDV_OK)
                return 1;
            memset(&v->v, 0, sizeof v->v);
            v->dims[0] = sizes[t];
            v->v.dtype = 1;
            v->v.rank = 1;
            v->v.dims = v->dims;
            v->v.data = v + 1;
            v->v.size = (uint64_t)sizes[t] * sizeof(float);
            v->v.release = tensor_free;
            for (i = 0; i < sizes[t]; i++) ((float*)(v + 1))[i] = expect(step, t, i);
            if (tfrdv_send(r, &k, NULL, &v->v, 0, &st) != TFRDV_OK) return 1;
            /* receive the peer's: key = its device, ITS incarnation, my device */
            snprintf(edge, sizeof edge, "%s_to_peer_%d", strcmp(name, "a") == 0 ? "b" : "a", t);
            if (tfrdv_key_create(peer_dev, peer_inc, my_dev, edge, top, key, sizeof key, &len, &st) != TFRDV_OK ||
                tfrdv_key_parse(key, len, &k, &st) != TFRDV_OK)
                return 1;
            wants[step][t].step = step;
            wants[step][t].t = t;
            if (tfrdv_recv_async(r, &k, NULL, on_fetched, &wants[step][t], NULL) != TFRDV_OK) return 1;
        }
        tfrdv_unref(r);
        /* mine fetched by the peer and the peer's received: the step can go (CleanupGraph) */
        if (!wait_for(&fetched, (int)step * NT, 60) || !wait_for(&served[step], NT, 60)) {
            fprintf(stderr, "%s: step %d timed out\n", me, (int)step);
            rc = 1;
            break;
        }
        tfrdv_mgr_cleanup(m, step);
    }
    if (strcmp(name, "b") == 0) sleep_ms(300); /* print after "a" */
    pthread_mutex_lock(&mu);
    printf("%s trace (fetch = received from the peer, serve = answered the peer's RecvTensor):\n%s", me, table);
    printf("%s: %d/%d tensors fetched intact\n", me, fetched - bad, STEPS * NT);
    rc |= bad != 0 || fetched != STEPS * NT;
    pthread_mutex_unlock(&mu);
    fflush(stdout);
    sleep_ms(200); /* let the peer's last calls complete before the server goes */
    tfrdv_grpc_destroy(g);
    tfrdv_mgr_destroy(m);
    return rc;
}

static int free_port(void) {
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s >= 0 && bind(s, (struct sockaddr*)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr*)&a, &n) == 0) port = ntohs(a.sin_port);
    if (s >= 0) close(s);
    return port;
}

int main(int argc, char** argv) {
    const char* fmt = "{\"cluster\": {\"a\": [\"%s\"], \"b\": [\"%s\"]}, \"task\": {\"type\": \"%s\", \"index\": 0}}";
    char la[32], lb[32], cfg[2][256];
    pid_t pid[2];
    int status[2] = {1, 1}, i, ok;
    if (getenv("TF_CONFIG")) return worker();
    if (argc > 1) {
        fprintf(stderr, "usage: %s (both workers), or TF_CONFIG='{\"cluster\": ..., \"task\": ...}' %s (one)\n", argv[0], argv[0]);
        return 2;
    }
    /* no TF_CONFIG: run both workers as child processes of this one, each with its own */
    snprintf(la, sizeof la, "127.0.0.1:%d", free_port());
    snprintf(lb, sizeof lb, "127.0.0.1:%d", free_port());
    printf("two workers on %s and %s (each one: TF_CONFIG=... %s)\n", la, lb, argv[0]);
    fflush(stdout);
    for (i = 0; i < 2; i++) {
        snprintf(cfg[i], sizeof cfg[i], fmt, la, lb, i == 0 ? "a" : "b");
        if ((pid[i] = fork()) == 0) _exit(setenv("TF_CONFIG", cfg[i], 1) ? 1 : worker());
    }
    for (i = 0; i < 2; i++)
        if (pid[i] > 0) waitpid(pid[i], &status[i], 0);
    ok = 1;
    for (i = 0; i < 2; i++) ok = ok && pid[i] > 0 && WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0;
    printf("%s\n", ok ? "both workers OK" : "FAILED");
    return ok ? 0 : 1;
}
