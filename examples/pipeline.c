/* pipeline.c - a producer thread sends 1,000 tensors on loop-iteration keys; the consumer receives
   them in order with a blocking tfrdv_recv (timeout) and checks each one. */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <pthread.h>
#include <stdio.h>

#define N 1000
#define SRC "/job:localhost/replica:0/task:0/device:CPU:0"
#define DST "/job:localhost/replica:0/task:0/device:GPU:0"

static tfrdv_rendezvous* rdv;
static tfrdv_key base; /* "src;incarnation;dst;edge;0:0": built once, like TensorFlow's Send/Recv ops */

static void* producer(void* arg) {
    int64_t i, dims[1] = {4};
    (void)arg;
    for (i = 0; i < N; i++) {
        tfrdv_frame_iter fi = {1, i}; /* frame 1, iteration i */
        tfrdv_key k;
        tfrdv_status st;
        float data[4] = {(float)i, (float)i + 0.25f, (float)i + 0.5f, (float)i + 0.75f};
        tfrdv_value* v = tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 1, dims, data, sizeof data); /* copies data */
        if (tfrdv_key_make_frame(&k, &base, fi, &st) != TFRDV_OK || tfrdv_send(rdv, &k.parsed, NULL, v, 0, &st) != TFRDV_OK) {
            fprintf(stderr, "send %d: %s %s\n", (int)i, tfrdv_code_str(st.code), st.msg);
            tfrdv_value_release(v); /* a failed send leaves the value with us */
            return NULL;
        }
    }
    return NULL;
}

int main(void) {
    pthread_t th;
    int64_t i, good = 0, t0;
    tfrdv_status st;
    tfrdv_frame_iter top = {0, 0};
    if (tfrdv_key_make(&base, SRC, 0x1234, DST, "edge_4_pipeline/x", top, &st) != TFRDV_OK ||
        tfrdv_create(NULL, &rdv, &st) != TFRDV_OK) {
        fprintf(stderr, "setup: %s\n", st.msg);
        return 1;
    }
    t0 = tfrdv_now_ns();
    if (pthread_create(&th, NULL, producer, NULL) != 0) return 1;
    for (i = 0; i < N; i++) {
        tfrdv_frame_iter fi = {1, i};
        tfrdv_key k;
        tfrdv_value* v = NULL;
        const float* f;
        int dead = 0;
        if (tfrdv_key_make_frame(&k, &base, fi, &st) != TFRDV_OK ||
            tfrdv_recv(rdv, &k.parsed, NULL, 2000000000 /* 2 s */, &v, &dead, &st) != TFRDV_OK) {
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
