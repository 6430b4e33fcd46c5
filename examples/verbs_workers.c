/* verbs_workers.c - a worker fetching tensors from a ps over RDMA (tfrdv_verbs.h): RC queue pairs,
   RDMA WRITE WITH IMMEDIATE straight into the receiver's buffer.
     verbs_workers                      both workers in this process (two RDMA contexts, one device)
     verbs_workers ps HOST:PORT         the ps: listens on HOST:PORT (an address of the private
                                        RDMA network: there is no authentication, see SECURITY in
                                        tfrdv_verbs.h), serves 5 steps, exits when the worker left
     verbs_workers worker HOST:PORT     the worker: the ps's address goes in its worker table; the
                                        first fetch connects; it asks the ps's incarnation
                                        (tfrdv_mgr_peer_incarnation: the bootstrap carries it)
   Environment: TFRDV_VERBS_DEVICE (e.g. mlx5_0), TFRDV_VERBS_GID (an index, "3", or the address
   the GID holds, "10.0.0.5"; unset: automatic).
   Without an RDMA device (or without libibverbs) it says so and exits 0, so `make test` can run
   it anywhere; the README's verbs section shows how to run it on hardware and inside the Soft-RoCE guest. */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#if defined(__has_include)
#if __has_include(<infiniband/verbs.h>)
#define HAVE_VERBS 1
#endif
#endif
#ifdef HAVE_VERBS
#define TFRDV_VERBS_IMPLEMENTATION
#endif
#include "tfrdv_verbs.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HAVE_VERBS
int main(void) {
    printf("verbs_workers: built without libibverbs-dev (<infiniband/verbs.h>); nothing to run\n");
    return 0;
}
#else
#include <pthread.h>
#include <time.h>

#define WORKER "/job:worker/replica:0/task:0"
#define PS "/job:ps/replica:0/task:0"
#define STEPS 5
#define NT 3
static const struct { const char* edge; int32_t rank; int64_t dims[2]; } spec[NT] = {
    {"edge_3_global_step", 1, {4, 1}}, {"edge_12_embedding", 2, {128, 128}}, {"edge_17_weights", 2, {1024, 1024}}};
static float expect(int64_t step, int t, uint64_t i) { return (float)(step * 100 + t) + (float)(i % 4096); }

typedef struct node {
    tfrdv_verbs* v;
    tfrdv_mgr* m;
} node;
/* listen: the ps's listener address (NULL: none); ps_address: the worker's table entry for the ps */
static int node_create(node* n, const char* name, const char* listen, const char* ps_address, tfrdv_status* st) {
    tfrdv_verbs_config vc = tfrdv_verbs_config_init(); /* zero everywhere: the defaults */
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_worker table[1];
    table[0].name = PS;
    table[0].address = ps_address;
    vc.worker_name = name;
    vc.device = getenv("TFRDV_VERBS_DEVICE");
    vc.gid = getenv("TFRDV_VERBS_GID");
    vc.listen_address = listen;
    vc.workers = table; /* copied by create; tfrdv_cluster_from_env's table fits as it is */
    vc.num_workers = ps_address ? 1 : 0;
    /* vc.num_threads 0: one progress thread (-1: call tfrdv_verbs_poll() from your own loop) */
    if (tfrdv_verbs_create(&vc, &n->v, st) != TFRDV_OK) return 0;
    mc.worker_name = name;
    mc.transport = tfrdv_verbs_transport(n->v);
    mc.call_timeout_ns = (int64_t)30 * 1000000000; /* every fetch finishes within 30 s */
    if (tfrdv_mgr_create(&mc, &n->m, st) != TFRDV_OK) return 0;
    return tfrdv_verbs_attach(n->v, n->m, st) == TFRDV_OK;
}
static void node_destroy(node* n) {
    /* either order (TRANSPORTS in tfrdv.h): the transport first fails its calls in flight
       UNAVAILABLE; the manager's destroy then drops the transport's last reference */
    if (n->v) tfrdv_verbs_destroy(n->v);
    if (n->m) tfrdv_mgr_destroy(n->m);
}
static int mkkey(tfrdv_parsed_key* k, char* buf, size_t cap, uint64_t ps_incarnation, int t) {
    tfrdv_frame_iter top = {0, 0};
    return tfrdv_key_create(PS "/device:CPU:0", ps_incarnation, WORKER "/device:CPU:0", spec[t].edge, top, buf, cap, 0, 0) ==
               TFRDV_OK &&
           tfrdv_key_parse(buf, strlen(buf), k, 0) == TFRDV_OK;
}

/* ps side: send every tensor of every step (buffered until fetched) */
static int ps_send_all(node* ps) {
    int64_t step;
    int t;
    for (step = 1; step <= STEPS; step++) {
        tfrdv_rendezvous* r = 0;
        tfrdv_status st;
        if (tfrdv_mgr_find(ps->m, step, &r, &st) != TFRDV_OK || tfrdv_mgr_initialize(r, 0, &st) != TFRDV_OK) return 0;
        for (t = 0; t < NT; t++) {
            uint64_t i, n = (uint64_t)(spec[t].dims[0] * spec[t].dims[1]);
            tfrdv_value* v = tfrdv_value_new(NULL, TFRDV_DT_FLOAT, spec[t].rank, spec[t].dims, NULL, n * 4);
            tfrdv_parsed_key k;
            char kb[256];
            for (i = 0; v && i < n; i++) ((float*)v->data)[i] = expect(step, t, i);
            if (!v || !mkkey(&k, kb, sizeof kb, tfrdv_mgr_incarnation(ps->m), t) || tfrdv_send(r, &k, NULL, v, 0, &st) != TFRDV_OK) {
                tfrdv_value_release(v);
                tfrdv_unref(r);
                return 0;
            }
        }
        tfrdv_unref(r);
    }
    return 1;
}

/* worker side: fetch every tensor, one step at a time */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending, good, bad;
typedef struct xfer {
    int64_t step, t0;
    int t;
} xfer;
static void on_fetched(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v,
                       int dead) {
    xfer* x = (xfer*)user;
    uint64_t i, n = (uint64_t)(spec[x->t].dims[0] * spec[x->t].dims[1]);
    int ok = st->code == TFRDV_OK && !dead && v && v->size == n * 4;
    (void)sa;
    (void)ra;
    for (i = 0; ok && i < n; i++) ok = ((const float*)v->data)[i] == expect(x->step, x->t, i);
    printf("  step %d  %-20s %8llu B  %8.1f us  %s%s%s\n", (int)x->step, spec[x->t].edge, (unsigned long long)(n * 4),
           (double)(tfrdv_now_ns() - x->t0) / 1e3, ok ? "ok" : "FAILED ", ok ? "" : tfrdv_code_str(st->code), ok ? "" : st->msg);
    tfrdv_value_release(v);
    pthread_mutex_lock(&mu);
    if (ok) good++;
    else bad++;
    pending--;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}
static int worker_fetch_all(node* w) {
    static xfer xs[STEPS][NT];
    int64_t step;
    int t;
    uint64_t ps_incarnation = 0;
    tfrdv_status ist;
    /* the ps's incarnation goes in every key: its bootstrap carries it (this connects to the ps,
       waiting up to 30 s for it to come up) */
    if (tfrdv_mgr_peer_incarnation(w->m, PS, (int64_t)30 * 1000000000, &ps_incarnation, &ist) != TFRDV_OK) {
        printf("worker: %s %s\n", tfrdv_code_str(ist.code), ist.msg);
        return 0;
    }
    for (step = 1; step <= STEPS; step++) {
        tfrdv_rendezvous* r = 0;
        tfrdv_status st;
        if (tfrdv_mgr_find(w->m, step, &r, &st) != TFRDV_OK || tfrdv_mgr_initialize(r, 0, &st) != TFRDV_OK) return 0;
        for (t = 0; t < NT; t++) {
            tfrdv_parsed_key k;
            char kb[256];
            xfer* x = &xs[step - 1][t];
            x->step = step;
            x->t = t;
            x->t0 = tfrdv_now_ns();
            pthread_mutex_lock(&mu);
            pending++;
            pthread_mutex_unlock(&mu);
            if (!mkkey(&k, kb, sizeof kb, ps_incarnation, t) || tfrdv_recv_async(r, &k, NULL, on_fetched, x, NULL) != TFRDV_OK) {
                tfrdv_unref(r);
                return 0;
            }
        }
        pthread_mutex_lock(&mu); /* every fetch finishes: OK, an error, or the 30 s deadline */
        while (pending > 0) pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        tfrdv_unref(r);
        tfrdv_mgr_cleanup(w->m, step);
    }
    return 1;
}

static int unavailable(const tfrdv_status* st) {
    printf("verbs_workers: RDMA is not usable here (%s %s); nothing to run.\n"
           "See the README's verbs section: run it on RDMA hardware, or inside the Soft-RoCE guest of `make test-rxe`.\n",
           tfrdv_code_str(st->code), st->msg);
    return 0;
}

int main(int argc, char** argv) {
    node ps, wk;
    tfrdv_status st;
    char addr[64];
    memset(&ps, 0, sizeof ps);
    memset(&wk, 0, sizeof wk);
    if (argc == 3 && strcmp(argv[1], "ps") == 0) { /* the ps answers from its progress thread */
        if (!node_create(&ps, PS, argv[2], NULL, &st)) return st.code == TFRDV_UNAVAILABLE ? unavailable(&st) : 1;
        if (!ps_send_all(&ps)) return 1;
        printf("ps on %s, port %d: waiting for the worker (verbs_workers worker HOST:%d)\n", tfrdv_verbs_describe(ps.v),
               tfrdv_verbs_port(ps.v), tfrdv_verbs_port(ps.v));
        for (;;) { /* until the worker has connected and gone again */
            tfrdv_verbs_stats s;
            struct timespec ts = {0, 100000000};
            nanosleep(&ts, 0);
            tfrdv_verbs_get_stats(ps.v, &s);
            if (s.peers > 0 && s.peers_broken == (uint64_t)s.peers) break;
        }
        node_destroy(&ps);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "worker") == 0) { /* no listener: it only connects */
        if (!node_create(&wk, WORKER, NULL, argv[2], &st)) return st.code == TFRDV_UNAVAILABLE ? unavailable(&st) : 1;
        if (!worker_fetch_all(&wk)) return 1;
        node_destroy(&wk);
        printf("summary: %d/%d tensors intact\n", good, STEPS * NT);
        return bad ? 1 : 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s | %s ps HOST:PORT | %s worker HOST:PORT\n", argv[0], argv[0], argv[0]);
        return 2;
    }
    /* both workers in this process: the ps on a free loopback port, in the worker's table */
    if (!node_create(&ps, PS, "127.0.0.1:0", NULL, &st)) return st.code == TFRDV_UNAVAILABLE ? unavailable(&st) : 1;
    snprintf(addr, sizeof addr, "127.0.0.1:%d", tfrdv_verbs_port(ps.v));
    if (!node_create(&wk, WORKER, NULL, addr, &st)) {
        printf("worker: %s\n", st.msg);
        return 1;
    }
    printf("device: %s\nthe ps sends %d tensors per step; the worker fetches them over RDMA\n", tfrdv_verbs_describe(wk.v), NT);
    if (!ps_send_all(&ps) || !worker_fetch_all(&wk)) return 1;
    node_destroy(&wk);
    node_destroy(&ps);
    printf("summary: %d/%d tensors intact\n", good, STEPS * NT);
    return bad ? 1 : 0;
}
#endif
