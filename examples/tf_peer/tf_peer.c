/* tf_peer.c - a C worker and a TensorFlow program exchange tensors over gRPC (examples/tf_peer).

     ./tf_peer --listen 127.0.0.1:2223 --tf 127.0.0.1:2222       then run tf_side.py (see README.md)

   This program is the worker /job:tfrdv/replica:0/task:0 of a TensorFlow cluster whose master is
   the TensorFlow process (job "tf"). Each step TensorFlow's graph
       x = _Recv("x_from_c")   y = x * 10   _Send(y, "y_from_tf")   done = _Recv("done_from_c")
   asks this worker for x, computes y and sends it here, and waits for done. A TensorFlow master
   never tells a foreign worker about its steps: the step id first arrives in TensorFlow's
   RecvTensor, for a step this worker has not started, and the manager's step_requested hook
   reports it. The hook starts the step, sends x, and fetches y (the key carries TensorFlow's
   device incarnation, read with GetStatus); when y arrives it is checked and done is sent.
   TensorFlow never says when a step ends: the manager's idle-step policy cleans up a step once
   nothing of it is pending for 10 s, so steps may run concurrently and nobody keeps a list.
   Runs until Ctrl-C (SIGINT) or SIGTERM. */
#define _POSIX_C_SOURCE 200809L
#define TFRDV_IMPLEMENTATION
#define TFRDV_GRPC_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_grpc.h"
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define ME_CPU "/job:tfrdv/replica:0/task:0/device:CPU:0"
#define TF "/job:tf/replica:0/task:0"
#define TF_CPU TF "/device:CPU:0"

static uint64_t tf_incarnation, my_incarnation;
/* Both of a step's requests (x and done) may arrive before the step starts, and the hook runs for
   each: the last steps started, so the second one does not start it again. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t started[64];
static unsigned nstarted;
static int first_request(int64_t step_id) {
    unsigned i, n;
    int first = 1;
    pthread_mutex_lock(&mu);
    n = nstarted < 64 ? nstarted : 64;
    for (i = 0; i < n && first; i++) first = started[i] != step_id;
    if (first) started[nstarted++ % 64] = step_id;
    pthread_mutex_unlock(&mu);
    return first;
}

/* send a value on edge in rendezvous r (key: this worker's CPU -> TensorFlow's CPU) */
static int send_to_tf(tfrdv_rendezvous* r, const char* edge, tfrdv_value* v) {
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_frame_iter top = {0, 0};
    if (!v || tfrdv_key_make(&k, ME_CPU, my_incarnation, TF_CPU, edge, top, &st) != TFRDV_OK ||
        tfrdv_send(r, &k.parsed, NULL, v, 0, &st) != TFRDV_OK) {
        fprintf(stderr, "send %s: %s\n", edge, v ? st.msg : "out of memory");
        tfrdv_value_release(v);
        tfrdv_abort(r, TFRDV_INTERNAL, "tf_peer: a send failed"); /* TensorFlow's session.run gets this */
        return 0;
    }
    return 1;
}

/* y arrived from TensorFlow: check it is x * 10, then send done */
static void on_y(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* y, int dead) {
    tfrdv_rendezvous* r = (tfrdv_rendezvous*)user;
    int32_t ok = st->code == TFRDV_OK && y && !dead && y->dtype == TFRDV_DT_FLOAT && y->size == 6 * sizeof(float);
    int i;
    (void)sa;
    (void)ra;
    for (i = 0; ok && i < 6; i++) ok = ((const float*)y->data)[i] == (float)(i + 1) * 10.0f;
    if (st->code != TFRDV_OK) fprintf(stderr, "fetching y failed: %s %s\n", tfrdv_code_str(st->code), st->msg);
    else if (ok) printf("received y = [%g %g %g; %g %g %g] from TensorFlow: correct\n", ((const float*)y->data)[0],
                        ((const float*)y->data)[1], ((const float*)y->data)[2], ((const float*)y->data)[3],
                        ((const float*)y->data)[4], ((const float*)y->data)[5]);
    else fprintf(stderr, "y is not x * 10\n");
    fflush(stdout);
    tfrdv_value_release(y);
    send_to_tf(r, "done_from_c", tfrdv_value_new(NULL, TFRDV_DT_INT32, 0, NULL, &ok, sizeof ok));
    tfrdv_unref(r);
}

/* a TensorFlow RecvTensor arrived for a step this worker has not started */
static void on_step_requested(void* user, tfrdv_mgr* m, int64_t step_id, tfrdv_str key) {
    static const float x[6] = {1, 2, 3, 4, 5, 6};
    static const int64_t dims[2] = {2, 3};
    tfrdv_rendezvous* r;
    tfrdv_status st;
    tfrdv_key y_key;
    tfrdv_frame_iter top = {0, 0};
    (void)user;
    (void)key; /* x_from_c or done_from_c, whichever came first: the step's work is the same */
    if (!first_request(step_id)) return; /* its second request: the step is running already */
    if (tfrdv_mgr_start_step(m, step_id, &r, &st) != TFRDV_OK) {
        fprintf(stderr, "step %lld: %s\n", (long long)step_id, st.msg);
        return;
    }
    printf("step %lld: sending x = [1 2 3; 4 5 6]\n", (long long)step_id);
    fflush(stdout);
    if (send_to_tf(r, "x_from_c", tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 2, dims, x, sizeof x))) {
        /* fetch y: the key names TensorFlow's CPU with ITS incarnation */
        if (tfrdv_key_make(&y_key, TF_CPU, tf_incarnation, ME_CPU, "y_from_tf", top, &st) != TFRDV_OK) {
            tfrdv_abort(r, st.code, st.msg);
        } else {
            tfrdv_ref(r); /* on_y's */
            if (tfrdv_recv_async(r, &y_key.parsed, NULL, on_y, r, NULL) != TFRDV_OK) {
                tfrdv_unref(r);
                tfrdv_abort(r, TFRDV_INTERNAL, "tf_peer: could not post the receive of y");
            }
        }
    }
    tfrdv_unref(r);
}

int main(int argc, char** argv) {
    const char *listen = "127.0.0.1:2223", *tf_addr = "127.0.0.1:2222";
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_grpc_worker tf_worker;
    tfrdv_grpc* g;
    tfrdv_mgr* m;
    tfrdv_status st;
    tfrdv_grpc_device dev;
    size_t n = 0;
    sigset_t stop;
    int i, sig, tries = 0;
    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--listen") == 0) listen = argv[i + 1];
        else if (strcmp(argv[i], "--tf") == 0) tf_addr = argv[i + 1];
    }
    tf_worker.name = TF;
    tf_worker.address = tf_addr;
    gc.listen_address = listen;
    gc.workers = &tf_worker;
    gc.num_workers = 1;
    if (tfrdv_grpc_create(&gc, &g, &st) != TFRDV_OK) {
        fprintf(stderr, "tfrdv_grpc_create: %s\n", st.msg);
        return 1;
    }
    mc.worker_name = "/job:tfrdv/replica:0/task:0";
    mc.transport = tfrdv_grpc_transport(g);
    mc.step_requested = on_step_requested;
    mc.step_idle_timeout_ns = 10 * 1000000000LL; /* tfrdv_grpc_attach drives tfrdv_mgr_expire */
    if (tfrdv_mgr_create(&mc, &m, &st) != TFRDV_OK) {
        fprintf(stderr, "tfrdv_mgr_create: %s\n", st.msg);
        return 1;
    }
    my_incarnation = tfrdv_mgr_incarnation(m);
    sigemptyset(&stop); /* blocked before any thread starts: every thread inherits the mask */
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    /* TensorFlow's CPU incarnation (GetStatus) before serving anything: every key of a tensor
       TensorFlow sends carries it. TensorFlow may not be up yet: retry for 2 minutes. */
    printf("waiting for TensorFlow on %s (start tf_side.py)\n", tf_addr);
    fflush(stdout);
    while (tfrdv_grpc_peer_devices(g, TF, 1000000000LL, &dev, 1, &n, &st) != TFRDV_OK || n == 0) {
        struct timespec ts = {0, 200000000L};
        if (++tries == 600) {
            fprintf(stderr, "GetStatus on %s: %s\n", tf_addr, st.msg);
            return 1;
        }
        nanosleep(&ts, NULL);
    }
    tf_incarnation = dev.incarnation;
    if (tfrdv_grpc_attach(g, m, &st) != TFRDV_OK) { /* starts the server */
        fprintf(stderr, "tfrdv_grpc_attach: %s\n", st.msg);
        return 1;
    }
    printf("tfrdv worker serving on %s; TensorFlow's %s has incarnation %016llx; Ctrl-C stops\n", listen,
           dev.name, (unsigned long long)tf_incarnation);
    fflush(stdout);
    sigwait(&stop, &sig);
    printf("tf_peer: signal %d, shutting down\n", sig);
    tfrdv_grpc_destroy(g);
    tfrdv_mgr_destroy(m);
    return 0;
}
