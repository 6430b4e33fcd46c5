/* bench_verbs.c - tfrdv_verbs fetch latency (4 KiB) and throughput (1, 16, 64 MiB) between two
   worker processes on one RDMA device, for `make bench-rxe` (next to perftest's ib_write_lat and
   ib_write_bw on the same device, measured by tests/verbs/guest_bench.sh).
     bench_verbs header | lat REF_US | bw 1|16|64 REF_GBPS   (REF: perftest's figure, measured
                                                            right before, for the ratio column;
                                                            lat -1 prints "LAT median mean")
   The sender has every value buffered before the receiver asks (a fetch = one REQUEST + one RDMA
   WRITE WITH IMMEDIATE into a pre-registered receive pool). Like perftest, each process busy-polls
   on one thread: the sender with its progress thread, the receiver by calling
   tfrdv_verbs_poll from the thread that waits (host-driven progress). A fetch is a round trip; ib_write_lat reports half a round trip (one write). */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#define TFRDV_VERBS_IMPLEMENTATION
#include "tfrdv_verbs.h"
#include <signal.h>
#include <sys/wait.h>
#include <sched.h>

#define RECEIVER "/job:b/replica:0/task:0"
#define SENDER "/job:b/replica:0/task:1"
#define LAT_ITERS 1000
#define POOL_BYTES ((size_t)160 << 20)

static const struct { uint64_t size; int iters, window; } bw[3] = {{1u << 20, 200, 16}, {16u << 20, 24, 4}, {64u << 20, 8, 2}};

typedef struct worker {
    tfrdv_verbs* v;
    tfrdv_mgr* m;
} worker;
static int mk(worker* w, const char* name, int thread, int busy, tfrdv_status* st) {
    tfrdv_verbs_config vc = tfrdv_verbs_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    vc.worker_name = name;
    vc.num_threads = thread ? 0 : -1;
    vc.listen_address = "127.0.0.1:0";
    if (busy) vc.spin_ns = (int64_t)3600 * 1000000000; /* busy-poll, like perftest */
    vc.max_requests = 64;
    if (tfrdv_verbs_create(&vc, &w->v, st) != TFRDV_OK) return 0;
    mc.worker_name = name;
    mc.incarnation = 7;
    mc.transport = tfrdv_verbs_transport(w->v);
    mc.request_id_window = -1;
    if (tfrdv_mgr_create(&mc, &w->m, st) != TFRDV_OK) return 0;
    return tfrdv_verbs_attach(w->v, w->m, st) == TFRDV_OK;
}
static void key(tfrdv_parsed_key* k, char* buf, size_t cap, const char* edge) {
    tfrdv_frame_iter fi = {0, 0};
    tfrdv_key_create(SENDER "/device:CPU:0", 7, RECEIVER "/device:CPU:0", edge, fi, buf, cap, 0, 0);
    tfrdv_key_parse(buf, strlen(buf), k, 0);
}

/* sender values: views of one registered buffer, nothing to free */
static uint8_t* src;
static void no_release(tfrdv_value* v) { free(v); }
static int send_one(worker* w, int64_t step, const char* edge, uint64_t size) {
    tfrdv_rendezvous* r = 0;
    tfrdv_parsed_key k;
    char kb[200];
    tfrdv_status st;
    tfrdv_value* v = (tfrdv_value*)calloc(1, sizeof *v + 8);
    int ok;
    if (!v) return 0;
    v->dtype = TFRDV_DT_UINT8;
    v->rank = 1;
    v->dims = (int64_t*)(v + 1);
    *(int64_t*)(v + 1) = (int64_t)size;
    v->data = src;
    v->size = size;
    v->release = no_release;
    key(&k, kb, sizeof kb, edge);
    ok = tfrdv_mgr_find(w->m, step, &r, &st) == TFRDV_OK && tfrdv_mgr_initialize(r, 0, &st) == TFRDV_OK &&
         tfrdv_send(r, &k, 0, v, 0, &st) == TFRDV_OK;
    if (!ok) {
        fprintf(stderr, "send: %s\n", st.msg);
        tfrdv_value_release(v);
    }
    if (r) tfrdv_unref(r);
    return ok;
}
static int sender(int ready_fd, int port_fd, int mode) {
    worker w;
    tfrdv_status st;
    void* mem = 0;
    int i, s;
    char c;
    /* latency: the sender busy-polls (as ib_write_lat's both sides do); throughput: it sleeps on
       the completion channel between events, leaving the CPU to the kernel's RDMA work */
    if (!mk(&w, SENDER, 1, mode < 0, &st)) {
        fprintf(stderr, "sender: %s\n", st.msg);
        return 1;
    }
    if (posix_memalign(&mem, 4096, 64u << 20) != 0) return 1;
    src = (uint8_t*)mem;
    memset(src, 0x5a, 64u << 20);
    if (tfrdv_verbs_register(w.v, src, 64u << 20, &st) != TFRDV_OK) return 1;
    if (mode < 0)
        for (i = 0; i < LAT_ITERS; i++) send_one(&w, 1000000 + i, "lat", 4096);
    for (s = 0; s < 3; s++)
        if (s == mode)
            for (i = 0; i < bw[s].iters; i++) send_one(&w, 2000000 + s * 100000 + i, s == 0 ? "bw1" : s == 1 ? "bw16" : "bw64", bw[s].size);
    dprintf(port_fd, "%d\n", tfrdv_verbs_port(w.v));
    if (read(ready_fd, &c, 1) < 0) return 1; /* until the receiver is done */
    tfrdv_mgr_destroy(w.m);
    tfrdv_verbs_destroy(w.v);
    return 0;
}

/* receiver: a pre-registered pool handed out by the alloc hook (TensorFlow registers its pool
   chunks the same way) */
static uint8_t* pool;
static size_t pool_next;
static pthread_mutex_t pmu = PTHREAD_MUTEX_INITIALIZER;
static tfrdv_value* pool_alloc(void* user, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    tfrdv_value* v = (tfrdv_value*)calloc(1, sizeof *v + 8 * (size_t)rank);
    (void)user;
    if (!v) return 0;
    pthread_mutex_lock(&pmu);
    if (pool_next + size > POOL_BYTES) pool_next = 0;
    v->data = pool + pool_next;
    pool_next = (pool_next + size + 4095) & ~(size_t)4095;
    pthread_mutex_unlock(&pmu);
    v->dtype = dtype;
    v->rank = rank;
    v->dims = (int64_t*)(v + 1);
    memcpy((int64_t*)(v + 1), dims, 8 * (size_t)rank);
    v->size = size;
    v->release = no_release;
    return v;
}
static volatile long done_count, bad;
static void on_done(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    (void)user;
    (void)sa;
    (void)ra;
    (void)dead;
    if (st->code != TFRDV_OK) {
        fprintf(stderr, "fetch: %s\n", st->msg);
        __sync_fetch_and_add(&bad, 1);
    }
    tfrdv_value_release(v);
    __sync_fetch_and_add(&done_count, 1);
}
/* the step's rendezvous is made before the clock starts: the figures are the transport's */
static tfrdv_rendezvous* step_of(worker* w, int64_t step) {
    tfrdv_rendezvous* r = 0;
    tfrdv_status st;
    if (tfrdv_mgr_find(w->m, step, &r, &st) != TFRDV_OK || tfrdv_mgr_initialize(r, 0, &st) != TFRDV_OK) {
        fprintf(stderr, "step: %s\n", st.msg);
        exit(1);
    }
    return r;
}
static int recv_one(tfrdv_rendezvous* r, const char* edge, const tfrdv_args* args) {
    tfrdv_parsed_key k;
    char kb[200];
    key(&k, kb, sizeof kb, edge);
    return tfrdv_recv_async(r, &k, args, on_done, 0, 0) == TFRDV_OK;
}
/* host-driven progress while waiting, yielding like the companion thread does */
static void spin(worker* w) {
    if (tfrdv_verbs_poll(w->v, 0) == 0) sched_yield();
}
/* throughput phases: the receiver sleeps on the completion channel instead (as ib_write_bw's
   passive side does), leaving the CPU to the sender and to the kernel's RDMA work */
static void wait_events(worker* w) { tfrdv_verbs_poll(w->v, 2000000); }
static int cmp_i64(const void* a, const void* b) {
    int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
    int to_sender[2], from_sender[2], port = 0, s, i, mode;
    pid_t pid;
    worker w;
    tfrdv_status st;
    tfrdv_args args;
    static int64_t lat[LAT_ITERS];
    double ref, med, avg = 0;
    char line[32];
    void* mem = 0;
    /* bench_verbs lat REF_US | bench_verbs bw 1|16|64 REF_GBPS | bench_verbs header */
    if (argc >= 2 && strcmp(argv[1], "header") == 0) {
        printf("BENCH %-34s %10s %10s %12s %12s\n", "", "tfrdv", "perftest", "ratio", "target");
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: bench_verbs lat REF_US | bw 1|16|64 REF_GBPS | header\n");
        return 2;
    }
    if (strcmp(argv[1], "lat") == 0) {
        mode = -1;
        ref = atof(argv[2]);
    } else {
        mode = atoi(argv[2]) == 1 ? 0 : atoi(argv[2]) == 16 ? 1 : 2;
        ref = argc > 3 ? atof(argv[3]) : 0;
    }
    if (pipe(to_sender) || pipe(from_sender)) return 1;
    pid = fork();
    if (pid == 0) {
        close(to_sender[1]);
        close(from_sender[0]);
        _exit(sender(to_sender[0], from_sender[1], mode));
    }
    close(from_sender[1]);
    if (read(from_sender[0], line, sizeof line - 1) <= 0 || sscanf(line, "%d", &port) != 1) {
        fprintf(stderr, "sender failed\n");
        return 1;
    }
    if (!mk(&w, RECEIVER, 0, 0, &st) || tfrdv_verbs_connect(w.v, SENDER, "127.0.0.1", port, &st) != TFRDV_OK) {
        fprintf(stderr, "receiver: %s\n", st.msg);
        return 1;
    }
    if (posix_memalign(&mem, 4096, POOL_BYTES) != 0) return 1;
    pool = (uint8_t*)mem;
    memset(pool, 0, POOL_BYTES);
    if (tfrdv_verbs_register(w.v, pool, POOL_BYTES, &st) != TFRDV_OK) {
        fprintf(stderr, "register: %s\n", st.msg);
        return 1;
    }
    memset(&args, 0, sizeof args);
    args.alloc_fn = pool_alloc;
    if (mode < 0) { /* latency: one fetch at a time */
        for (i = 0; i < LAT_ITERS; i++) {
            long target = done_count + 1;
            tfrdv_rendezvous* r = step_of(&w, 1000000 + i);
            int64_t t0 = tfrdv_now_ns();
            recv_one(r, "lat", &args);
            while (done_count < target) spin(&w);
            lat[i] = tfrdv_now_ns() - t0;
            tfrdv_unref(r);
            tfrdv_mgr_cleanup(w.m, 1000000 + i);
        }
        for (i = 100; i < LAT_ITERS; i++) avg += (double)lat[i];
        avg /= (LAT_ITERS - 100);
        qsort(lat + 100, LAT_ITERS - 100, sizeof lat[0], cmp_i64);
        med = (double)lat[100 + (LAT_ITERS - 100) / 2] / 1e3;
        if (ref < 0) { /* raw figures for the guest script (best of several runs) */
            printf("LAT %.1f %.1f %.1f\n", med, avg / 1e3, (double)lat[100] / 1e3); /* median mean min */
        } else {
            printf("BENCH %-34s %8.1f us %7.1f us %11.2fx %12s\n", "fetch latency 4 KiB (median)", med, ref,
                   ref > 0 ? med / ref : 0.0, "<= 1.5x");
            printf("BENCH %-34s %8.1f us %7.1f us %11.2fx %12s\n", "  same, vs 2 x ib_write_lat (RTT)", med, 2 * ref,
                   ref > 0 ? med / (2 * ref) : 0.0, "");
            printf("BENCH %-34s %8.1f us\n", "  mean (after 100 warm-up)", avg / 1e3);
        }
    } else { /* throughput: a window of fetches in flight */
        const char* edge = mode == 0 ? "bw1" : mode == 1 ? "bw16" : "bw64";
        long base = done_count, posted = 0;
        int64_t t0;
        double gbps;
        char label[64];
        static tfrdv_rendezvous* rs[256];
        s = mode;
        for (i = 0; i < bw[s].iters; i++) rs[i] = step_of(&w, 2000000 + s * 100000 + i);
        /* warm-up fetch (learns the shape) outside the timing */
        recv_one(rs[0], edge, &args);
        while (done_count < base + 1) wait_events(&w);
        base = done_count;
        t0 = tfrdv_now_ns();
        for (i = 1; i < bw[s].iters; i++) {
            while (posted - (done_count - base) >= bw[s].window) wait_events(&w);
            recv_one(rs[i], edge, &args);
            posted++;
        }
        while (done_count - base < posted) wait_events(&w);
        gbps = (double)bw[s].size * 8 * (double)posted / (double)(tfrdv_now_ns() - t0);
        for (i = 0; i < bw[s].iters; i++) tfrdv_unref(rs[i]);
        snprintf(label, sizeof label, "fetch throughput %d MiB", (int)(bw[s].size >> 20));
        printf("BENCH %-34s %6.2f Gb/s %5.2f Gb/s %11.2fx %12s\n", label, gbps, ref, ref > 0 ? gbps / ref : 0.0, ">= 0.9x");
    }
    if (bad) printf("BENCH %ld fetches FAILED\n", (long)bad);
    if (write(to_sender[1], "x", 1) < 0) return 1;
    waitpid(pid, 0, 0);
    tfrdv_mgr_destroy(w.m);
    tfrdv_verbs_destroy(w.v);
    return bad ? 1 : 0;
}
