/* pipeline.c - a producer thread sends 1,000 tensors on loop-iteration keys; the consumer receives
   them in order with a blocking tfrdv_recv (timeout) and checks each one. */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N 1000
#define SRC "/job:localhost/replica:0/task:0/device:CPU:0"
#define DST "/job:localhost/replica:0/task:0/device:GPU:0"

typedef struct tensor { /* your tensor type, with the rendezvous view embedded first */
    tfrdv_value v;
    int64_t dims[1];
    float data[4];
} tensor;
static void tensor_free(tfrdv_value* v) { free(v); } /* v is the first member: same address */

static tfrdv_rendezvous* rdv;
static char prefix[256]; /* "src;incarnation;dst;edge": built once, like TensorFlow's Send/Recv ops */
static size_t prefix_len;

/* Key for iteration i of frame 1; buf must outlive every use of *k (k points into it). */
static int make_key(int64_t i, char* buf, size_t cap, tfrdv_parsed_key* k) {
    tfrdv_frame_iter fi = {1, i};
    size_t len;
    return tfrdv_key_with_frame(prefix, prefix_len, fi, buf, cap, &len, NULL) == TFRDV_OK &&
           tfrdv_key_parse(buf, len, k, NULL) == TFRDV_OK;
}

static void* producer(void* arg) {
    int64_t i;
    (void)arg;
    for (i = 0; i < N; i++) {
        char buf[300];
        tfrdv_parsed_key k;
        tfrdv_status st;
        int j;
        tensor* t = (tensor*)malloc(sizeof *t);
        if (!t || !make_key(i, buf, sizeof buf, &k)) { free(t); return NULL; }
        t->v = (tfrdv_value){.dtype = 1 /* DT_FLOAT */, .rank = 1, .dims = t->dims, .data = t->data,
                             .size = sizeof t->data, .release = tensor_free};
        t->dims[0] = 4;
        for (j = 0; j < 4; j++) t->data[j] = (float)i + 0.25f * (float)j;
        if (tfrdv_send(rdv, &k, NULL, &t->v, 0, &st) != TFRDV_OK) { /* failed send: still ours */
            fprintf(stderr, "send %d: %s\n", (int)i, st.msg);
            tfrdv_value_release(&t->v);
            return NULL;
        }
    }
    return NULL;
}

int main(void) {
    pthread_t th;
    int64_t i, good = 0, t0;
    tfrdv_status st;
    if (tfrdv_key_prefix(SRC, 0x1234, DST, "edge_4_pipeline/x", prefix, sizeof prefix, &prefix_len, &st) != TFRDV_OK ||
        tfrdv_local_create(NULL, &rdv, &st) != TFRDV_OK) {
        fprintf(stderr, "setup: %s\n", st.msg);
        return 1;
    }
    t0 = tfrdv_now_ns();
    if (pthread_create(&th, NULL, producer, NULL) != 0) return 1;
    for (i = 0; i < N; i++) {
        char buf[300];
        tfrdv_parsed_key k;
        tfrdv_value* v = NULL;
        const float* f;
        int dead = 0;
        if (!make_key(i, buf, sizeof buf, &k)) break;
        if (tfrdv_recv(rdv, &k, NULL, 2000000000 /* 2 s */, &v, &dead, &st) != TFRDV_OK) {
            fprintf(stderr, "recv %d: %s %s\n", (int)i, tfrdv_code_str(st.code), st.msg);
            break;
        }
        f = v ? (const float*)v->data : NULL; /* v is NULL only for a dead tensor */
        if (f && !dead && v->size == 16 && v->rank == 1 && v->dims[0] == 4 && f[0] == (float)i && f[3] == (float)i + 0.75f)
            good++;
        else
            fprintf(stderr, "iteration %d: wrong tensor\n", (int)i);
        tfrdv_value_release(v); /* we own the reference we received */
    }
    pthread_join(th, NULL);
    tfrdv_destroy(rdv); /* releases anything still buffered */
    printf("pipeline: %d/%d tensors received in order and intact in %.1f ms\n", (int)good, N,
           (double)(tfrdv_now_ns() - t0) / 1e6);
    return good == N ? 0 : 1;
}
