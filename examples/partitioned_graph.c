/* partitioned_graph.c - a toy executor: a small dataflow graph (matmul, relu, a 3-iteration while
   loop, a cond) is split over two devices on two workers. Every edge whose ends are on different
   devices is cut and gets a Send/Recv pair named like TensorFlow's partitioner: edge_<id>_<src>.
   Loop edges use frame/iter keys; the untaken cond branch travels as a dead value. The result is
   checked against running the whole graph on one device. */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum { A, B, ITERS = 3, STEP = 1 };
static const char* worker[2] = {"/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"};
static const char* device[2] = {"/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"};
static const float X[4] = {1, 2, 3, 4}, W[4] = {5, 6, 7, 8}; /* 2x2, row-major */

typedef enum { CONST, MATMUL, RELU, LOOPVAR, SCALE, ADD, PRED, SWITCH, DOUBLE, NEGATE, MERGE } opcode;
typedef struct { const char* name; int dev; opcode op; int in_loop; const float* k; } node;
static const node nodes[] = {
    {"x", A, CONST, 0, X}, {"w", A, CONST, 0, W}, {"matmul", A, MATMUL, 0, 0}, {"relu", B, RELU, 0, 0},
    {"while/h", B, LOOPVAR, 1, 0},   /* Enter(relu) in iteration 0, NextIteration(add) after */
    {"while/scale", A, SCALE, 1, 0}, {"while/add", B, ADD, 1, 0},
    {"cond/pred", B, PRED, 0, 0},    /* on the loop's exit value: sum > 100 */
    {"cond/switch", B, SWITCH, 0, 0}, /* output 0 feeds the false branch, output 1 the true one */
    {"cond/double", A, DOUBLE, 0, 0}, {"cond/negate", A, NEGATE, 0, 0}, {"cond/merge", B, MERGE, 0, 0},
};
typedef struct { int src, src_slot, dst, dst_slot; } edge; /* an edge's id is its index */
static const edge edges[] = {
    {0, 0, 2, 0}, {1, 0, 2, 1}, {2, 0, 3, 0}, {3, 0, 4, 0}, {6, 0, 4, 1}, {4, 0, 5, 0}, {5, 0, 6, 0}, {3, 0, 6, 1},
    {6, 0, 7, 0}, {6, 0, 8, 0}, {7, 0, 8, 1}, {8, 1, 9, 0}, {8, 0, 10, 0}, {9, 0, 11, 0}, {10, 0, 11, 1},
};
#define NN (int)(sizeof nodes / sizeof nodes[0])
#define NE (int)(sizeof edges / sizeof edges[0])

typedef struct { float v[4]; int dead; } t4; /* the executor's tensors; 2x2 float32 on the wire */
static const int64_t dims2x2[2] = {2, 2};

static tfrdv_key edge_base[NE]; /* per cut edge, built once at partition time (as Send/Recv kernels) */
static uint64_t loop_frame;

typedef struct {
    int dev; /* A or B; -1 runs the whole graph on one device */
    tfrdv_rendezvous* rdv;
    t4 out[NN][2];
    int failed, dead_recvs;
} ctx;

static void compute(const node* n, const t4* in, t4* o) {
    int i;
    if (n->op != MERGE && (in[0].dead || in[1].dead)) { o[0].dead = o[1].dead = 1; return; } /* dead in, dead out */
    o[0] = in[0];
    for (i = 0; i < 4; i++) {
        switch (n->op) {
        case CONST: o[0].v[i] = n->k[i]; break;
        case MATMUL: o[0].v[i] = in[0].v[i / 2 * 2] * in[1].v[i % 2] + in[0].v[i / 2 * 2 + 1] * in[1].v[2 + i % 2]; break;
        case RELU: o[0].v[i] = in[0].v[i] > 20 ? in[0].v[i] - 20 : 0; break;
        case SCALE: o[0].v[i] *= 0.5f; break;
        case ADD: o[0].v[i] += in[1].v[i]; break;
        case PRED: o[0].v[i] = in[0].v[0] + in[0].v[1] + in[0].v[2] + in[0].v[3] > 100; break;
        case DOUBLE: o[0].v[i] *= 2; break;
        case NEGATE: o[0].v[i] = -o[0].v[i]; break;
        default: break; /* LOOPVAR: identity */
        }
    }
    if (n->op == SWITCH) { o[1] = in[0]; o[0].dead = in[1].v[0] != 0; o[1].dead = !o[0].dead; }
    if (n->op == MERGE) o[0] = in[0].dead ? in[1] : in[0]; /* dead only if both inputs are */
}

/* the key of edge e in loop iteration iter (top level 0:0 outside the loop) */
static tfrdv_code edge_key(int e, int iter, tfrdv_key* k, tfrdv_status* st) {
    tfrdv_frame_iter fi = {0, 0};
    if (nodes[edges[e].dst].in_loop) { fi.frame_id = loop_frame; fi.iter_id = iter; }
    return tfrdv_key_make_frame(k, &edge_base[e], fi, st);
}
static void send_edge(ctx* c, int e, int iter, const t4* t) {
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_value* v = t->dead ? NULL : tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 2, dims2x2, t->v, sizeof t->v);
    if (edge_key(e, iter, &k, &st) != TFRDV_OK || tfrdv_send(c->rdv, &k.parsed, NULL, v, t->dead, &st) != TFRDV_OK) {
        fprintf(stderr, "%s: send %s: %s\n", device[c->dev], k.buf, st.msg);
        tfrdv_value_release(v); /* a failed send leaves the value with us */
        c->failed = 1;
    }
}
static void recv_edge(ctx* c, int e, int iter, t4* t) {
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_value* v = NULL;
    if (edge_key(e, iter, &k, &st) != TFRDV_OK || tfrdv_recv(c->rdv, &k.parsed, NULL, 2000000000, &v, &t->dead, &st) != TFRDV_OK) {
        fprintf(stderr, "%s: recv %s: %s\n", device[c->dev], k.buf, st.msg);
        c->failed = t->dead = 1;
        return;
    }
    if (t->dead) c->dead_recvs++;
    else memcpy(t->v, v->data, sizeof t->v);
    tfrdv_value_release(v);
}

static int mine(const ctx* c, int n) { return c->dev < 0 || nodes[n].dev == c->dev; }
static void exec_node(ctx* c, int n, int iter) {
    t4 in[2];
    int e;
    memset(in, 0, sizeof in);
    for (e = 0; e < NE; e++) {
        const edge* d = &edges[e];
        if (d->dst != n || (nodes[n].op == LOOPVAR && d->dst_slot != (iter > 0))) continue;
        if (mine(c, d->src)) in[nodes[n].op == LOOPVAR ? 0 : d->dst_slot] = c->out[d->src][d->src_slot];
        else recv_edge(c, e, iter, &in[d->dst_slot]);
    }
    compute(&nodes[n], in, c->out[n]);
    for (e = 0; e < NE; e++)
        if (edges[e].src == n && !mine(c, edges[e].dst)) send_edge(c, e, iter, &c->out[n][edges[e].src_slot]);
}
static void run(ctx* c) { /* graph order; a run of loop nodes is executed ITERS times */
    int n = 0, end, it, k;
    while (n < NN && !c->failed) {
        for (end = n; end < NN && nodes[end].in_loop == nodes[n].in_loop; end++) {}
        for (it = 0; it < (nodes[n].in_loop ? ITERS : 1); it++)
            for (k = n; k < end; k++) if (mine(c, k)) exec_node(c, k, it);
        n = end;
    }
}

static tfrdv_mgr* mgr[2];
static void* partition(void* arg) { /* one worker's RunGraph for the step */
    ctx* c = (ctx*)arg;
    tfrdv_status st;
    if (tfrdv_mgr_start_step(mgr[c->dev], STEP, &c->rdv, &st) != TFRDV_OK) {
        fprintf(stderr, "%s: %s\n", device[c->dev], st.msg);
        c->failed = 1;
        return NULL;
    }
    run(c);
    if (c->failed) tfrdv_abort(c->rdv, TFRDV_ABORTED, "partition failed"); /* fail the peer fast */
    tfrdv_unref(c->rdv);
    return NULL;
}

int main(void) {
    static ctx part[2], whole;
    pthread_t th[2];
    tfrdv_loopback* lb;
    tfrdv_status st;
    int d, e, ok;
    const t4* r = &part[B].out[NN - 1][0]; /* cond/merge, the graph's output, lives on B */
    tfrdv_frame_iter top = {0, 0};
    /* the loop's frame id: any number both partitions agree on. Not TensorFlow's (which hashes the
       parent frame id, its iteration and the frame name: see loop_frames.c), so these keys never
       match keys TensorFlow makes */
    loop_frame = tfrdv_hash_bytes("while", 5);
    if (tfrdv_loopback_create(NULL, &lb, &st) != TFRDV_OK || tfrdv_loopback_add_worker(lb, worker[A], NULL, &mgr[A], &st) != TFRDV_OK ||
        tfrdv_loopback_add_worker(lb, worker[B], NULL, &mgr[B], &st) != TFRDV_OK) {
        fprintf(stderr, "setup: %s\n", st.msg);
        return 1;
    }
    printf("A = %s, B = %s\ncut edges (Send on the source device, Recv on the destination; loop frame id %llu):\n",
           device[A], device[B], (unsigned long long)loop_frame);
    for (e = 0; e < NE; e++) {
        int s = nodes[edges[e].src].dev, t = nodes[edges[e].dst].dev;
        char name[64];
        if (s == t) continue;
        snprintf(name, sizeof name, "edge_%d_%s", e, nodes[edges[e].src].name);
        if (tfrdv_key_make(&edge_base[e], device[s], tfrdv_mgr_incarnation(mgr[s]), device[t], name, top, &st) != TFRDV_OK) {
            fprintf(stderr, "%s: %s\n", name, st.msg);
            return 1;
        }
        printf("  %-20s %c -> %c  %s\n", name, "AB"[s], "AB"[t], nodes[edges[e].dst].in_loop ? "frame \"while\", iterations 0..2" : "top level 0:0");
    }
    for (d = A; d <= B; d++) {
        part[d].dev = d;
        if (pthread_create(&th[d], NULL, partition, &part[d]) != 0) return 1;
    }
    for (d = A; d <= B; d++) pthread_join(th[d], NULL);
    for (d = A; d <= B; d++) tfrdv_mgr_cleanup(mgr[d], STEP);
    whole.dev = -1;
    run(&whole);
    ok = !part[A].failed && !part[B].failed && !r->dead && memcmp(r->v, whole.out[NN - 1][0].v, sizeof r->v) == 0 &&
         part[A].dead_recvs + part[B].dead_recvs == 2;
    printf("dead tensors received: %d (the untaken cond/negate branch)\n", part[A].dead_recvs + part[B].dead_recvs);
    printf("result cond/merge = [[%g, %g], [%g, %g]]: %s\n", r->v[0], r->v[1], r->v[2], r->v[3],
           ok ? "matches the single-device evaluation" : "WRONG");
    for (d = A; d <= B; d++) tfrdv_mgr_destroy(mgr[d]);
    tfrdv_loopback_destroy(lb);
    return ok ? 0 : 1;
}
