/* rxe_test.c - tfrdv_verbs on a real RDMA device (Soft-RoCE in the QEMU guest of `make test-rxe`,
   or real hardware): worker processes connected by RC queue pairs exchange tensors through step
   managers. The parent is worker task:0 (the receiver); a forked child is task:1 (the sender),
   driven by commands over a pipe. More children play dead peers. Without a device it prints why
   and exits 77 (make test-rxe treats that as a failure: the guest always has rxe0). */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#define TFRDV_VERBS_IMPLEMENTATION
#include "tfrdv_verbs.h"
#include "tt.h"
#include "fixtures.h"
#include <signal.h>
#include <sys/wait.h>

static void sleep_us(long us) {
    struct timespec ts;
    ts.tv_sec = us / 1000000;
    ts.tv_nsec = (us % 1000000) * 1000;
    nanosleep(&ts, 0);
}

#include "verbs_test.h"

static int esize(int dtype) { return dtype == TFRDV_DT_UINT8 ? 1 : dtype == TFRDV_DT_DOUBLE || dtype == TFRDV_DT_INT64 ? 8 : 4; }
static uint8_t pat(uint64_t i, int seed) { return (uint8_t)((i * 7 + (uint64_t)seed * 13 + (i >> 12)) & 0xff); }

static void stats_of(tfrdv_verbs* v, tfrdv_verbs_stats* s) {
    memset(s, 0, sizeof *s);
    tfrdv_verbs_get_stats(v, s);
}

/* a value in one malloc block */
static void val_free(tfrdv_value* v) { free(v); }
static tfrdv_value* val_new(int dtype, int rank, const int64_t* dims, int seed) {
    uint64_t n = (uint64_t)esize(dtype), i;
    tfrdv_value* v;
    int r;
    for (r = 0; r < rank; r++) n *= (uint64_t)dims[r];
    v = (tfrdv_value*)malloc(sizeof *v + 8 * (size_t)rank + n + 64);
    if (!v) return 0;
    memset(v, 0, sizeof *v);
    v->dtype = dtype;
    v->rank = rank;
    v->dims = (int64_t*)(v + 1);
    memcpy((int64_t*)(v + 1), dims, 8 * (size_t)rank);
    v->data = (char*)(v + 1) + 8 * rank;
    v->size = n;
    v->release = val_free;
    for (i = 0; i < n; i++) ((uint8_t*)v->data)[i] = pat(i, seed);
    return v;
}

/* ---- the sender process (task:1): "send STEP DST EDGE DTYPE SEED DEAD RANK d..." / "quit" ---- */
static void start_dumper(worker* w);
static int child_main(int rfd, int wfd, int ctrl_slots) {
    worker b;
    tfrdv_status st;
    FILE* in = fdopen(rfd, "r");
    char line[512];
    wopts o;
    memset(&o, 0, sizeof o);
    o.ctrl_slots = ctrl_slots;
    o.max_requests = 64;
    if (!mk_worker(&b, 1, &o, &st)) {
        dprintf(wfd, "fail %s\n", st.msg);
        return 1;
    }
    start_dumper(&b);
    dprintf(wfd, "port %d\n", tfrdv_verbs_port(b.v));
    while (fgets(line, sizeof line, in)) {
        long long step;
        int dst, dtype, seed, dead, rank, n, off, i;
        char edge[128];
        int64_t dims[8];
        if (strncmp(line, "quit", 4) == 0) break;
        if (sscanf(line, "send %lld %d %127s %d %d %d %d%n", &step, &dst, edge, &dtype, &seed, &dead, &rank, &off) == 7) {
            tfrdv_rendezvous* r = 0;
            tfrdv_parsed_key k;
            char kb[256];
            tfrdv_value* v;
            for (i = 0; i < rank && i < 8; i++) {
                long long d;
                if (sscanf(line + off, "%lld%n", &d, &n) != 1) break;
                dims[i] = d;
                off += n;
            }
            mk_key(&k, kb, sizeof kb, 1, dst, edge);
            v = dead ? 0 : val_new(dtype, rank, dims, seed);
            if (tfrdv_mgr_find(b.m, step, &r, &st) != TFRDV_OK || tfrdv_mgr_initialize(r, 0, &st) != TFRDV_OK ||
                tfrdv_send(r, &k, 0, v, dead, &st) != TFRDV_OK) {
                dprintf(wfd, "fail %s\n", st.msg);
                tfrdv_value_release(v);
            } else {
                dprintf(wfd, "ok\n");
            }
            if (r) tfrdv_unref(r);
        } else if (strncmp(line, "stats", 5) == 0) {
            tfrdv_verbs_stats s;
            stats_of(b.v, &s);
            dprintf(wfd, "stats %llu %llu %llu\n", (unsigned long long)s.meta_updates, (unsigned long long)s.requests_served,
                    (unsigned long long)s.peers_broken);
        } else {
            dprintf(wfd, "fail unknown command\n");
        }
    }
    rm_worker(&b);
    return 0;
}

/* ---- receiver side helpers ---- */
typedef struct fetch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    tfrdv_status st;
    tfrdv_value* val;
    int dead;
    int64_t t0, t1;
} fetch;
static void on_done(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    fetch* f = (fetch*)user;
    (void)sa;
    (void)ra;
    pthread_mutex_lock(&f->mu);
    f->calls++;
    f->st = *st;
    if (f->val) tfrdv_value_release(f->val);
    f->val = v;
    f->dead = dead;
    f->t1 = tfrdv_now_ns();
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}
static void fetch_init(fetch* f) {
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, 0);
    pthread_cond_init(&f->cv, 0);
}
static void fetch_fini(fetch* f) {
    tfrdv_value_release(f->val);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
}
static int fetch_wait(fetch* f, double secs) {
    int64_t until = tfrdv_now_ns() + (int64_t)(secs * 1e9);
    pthread_mutex_lock(&f->mu);
    while (f->calls == 0 && tfrdv_now_ns() < until) {
        pthread_mutex_unlock(&f->mu);
        sleep_us(2000);
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return f->calls;
}
static int post(worker* w, fetch* f, int64_t step, int src, int dst, const char* edge, const tfrdv_args* args,
                tfrdv_rendezvous** keep) {
    tfrdv_rendezvous* r = 0;
    tfrdv_parsed_key k;
    char kb[256];
    tfrdv_status st;
    mk_key(&k, kb, sizeof kb, src, dst, edge);
    f->t0 = tfrdv_now_ns();
    if (tfrdv_mgr_find(w->m, step, &r, &st) != TFRDV_OK || tfrdv_mgr_initialize(r, 0, &st) != TFRDV_OK ||
        tfrdv_recv_async(r, &k, args, on_done, f, 0) != TFRDV_OK) {
        printf("    recv %s: %s\n", edge, st.msg);
        if (r) tfrdv_unref(r);
        return 0;
    }
    if (keep) *keep = r;
    else tfrdv_unref(r);
    return 1;
}

static FILE* cin;
static int cout_fd = -1;
static int cmd(const char* fmt, ...) {
    char line[512], reply[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (write(cout_fd, line, strlen(line)) < 0) return 0;
    if (!fgets(reply, sizeof reply, cin)) return 0;
    if (strncmp(reply, "ok", 2) != 0 && strncmp(reply, "stats", 5) != 0) {
        printf("    child: %s", reply);
        return 0;
    }
    return 1;
}
static int check_bytes(const tfrdv_value* v, uint64_t n, int seed) {
    uint64_t i;
    if (!v || v->size != n) return 0;
    for (i = 0; i < n; i++)
        if (((const uint8_t*)v->data)[i] != pat(i, seed)) return 0;
    return 1;
}

static worker A;
static int b_port;
static pid_t b_pid;

/* the sender process sends n bytes (pattern seed) to task dst, whose worker w fetches them into
   g (initialised), which must succeed */
static void send_and_fetch(worker* w, int dst, fetch* g, int64_t step, const char* edge, uint64_t n, int seed) {
    TT_CHECK(cmd("send %lld %d %s 4 %d 0 1 %llu\n", (long long)step, dst, edge, seed, (unsigned long long)n));
    TT_CHECK(post(w, g, step, 1, dst, edge, 0, 0));
    TT_CHECK(fetch_wait(g, 30) == 1);
    TT_CHECK_EQ_INT(g->st.code, TFRDV_OK);
    TT_CHECK(check_bytes(g->val, n, seed));
}

/* Failures Soft-RoCE cannot produce, through tests/verbs/faultverbs.c (a libibverbs that forwards
   to the real one and fails on request): a port that is down, ibv_reg_mr refused (memlock), a
   send completion with IBV_WC_RETRY_EXC_ERR (what hardware reports for a dead peer), a refused
   ibv_post_send. Every one must become the right status on exactly the calls it affects. */
static void test_faults(void) {
    const char* lib = getenv("RXE_FAULTVERBS") ? getenv("RXE_FAULTVERBS") : "/bin/libfaultverbs.so";
    tfrdv_verbs_config vc = tfrdv_verbs_config_init();
    tfrdv_verbs* v = 0;
    tfrdv_status st;
    int round;
    if (access(lib, R_OK) != 0) {
        printf("    %s is missing\n", lib);
        TT_CHECK(0);
        return;
    }
    vc.worker_name = WORKER(7);
    vc.library = lib;
    setenv("TFRDV_FAULT_PORT_DOWN", "1", 1);
    TT_CHECK_EQ_INT(tfrdv_verbs_create(&vc, &v, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "no active port");
    printf("    port down: %s\n", st.msg);
    unsetenv("TFRDV_FAULT_PORT_DOWN");
    for (round = 0; round < 3; round++) {
        static const char* var[3] = {"TFRDV_FAULT_REG_MR", "TFRDV_FAULT_WC", "TFRDV_FAULT_POST_SEND"};
        static const char* val[3] = {"1", "12", "1"};
        static const char* want[3] = {"RLIMIT_MEMLOCK", "retry", "posting"};
        static const tfrdv_code code[3] = {TFRDV_RESOURCE_EXHAUSTED, TFRDV_UNAVAILABLE, TFRDV_UNAVAILABLE};
        worker f;
        fetch a, b;
        char cfg_lib[256];
        tfrdv_verbs_config c2;
        tfrdv_mgr_config mc = tfrdv_mgr_config_init();
        char edge[16];
        memset(&f, 0, sizeof f);
        snprintf(f.name, sizeof f.name, "/job:w/replica:0/task:%d", 7 + round);
        snprintf(cfg_lib, sizeof cfg_lib, "%s", lib);
        c2 = tfrdv_verbs_config_init();
        c2.worker_name = f.name;
        c2.library = cfg_lib;
        TT_CHECK(tfrdv_verbs_create(&c2, &f.v, &st) == TFRDV_OK);
        if (!f.v) return;
        mc.worker_name = f.name;
        mc.incarnation = INC;
        mc.transport = tfrdv_verbs_transport(f.v);
        mc.call_timeout_ns = (int64_t)20 * 1000000000;
        TT_CHECK(tfrdv_mgr_create(&mc, &f.m, &st) == TFRDV_OK && tfrdv_verbs_attach(f.v, f.m, &st) == TFRDV_OK);
        TT_CHECK(tfrdv_verbs_connect(f.v, WORKER(1), "127.0.0.1", b_port, &st) == TFRDV_OK);
        fetch_init(&a);
        fetch_init(&b);
        snprintf(edge, sizeof edge, "fault%d", round);
        TT_CHECK(cmd("send %d %d %s 4 3 0 1 1048576\n", 1000 + round, 7 + round, edge));
        setenv(var[round], val[round], 1);
        TT_CHECK(post(&f, &a, 1000 + round, 1, 7 + round, edge, 0, 0));
        TT_CHECK(fetch_wait(&a, 20) == 1);
        TT_CHECK_EQ_INT(a.st.code, code[round]);
        TT_CHECK_CONTAINS(a.st.msg, want[round]);
        printf("    %s=%s: %s %s\n", var[round], val[round], tfrdv_code_str(a.st.code), a.st.msg);
        unsetenv(var[round]);
        /* after a refused registration the connection still works; a broken one is reconnected
           by the next call (this side called tfrdv_verbs_connect) */
        TT_CHECK(cmd("send %d %d %s 4 4 0 1 4096\n", 1100 + round, 7 + round, edge));
        TT_CHECK(post(&f, &b, 1100 + round, 1, 7 + round, edge, 0, 0));
        TT_CHECK(fetch_wait(&b, 20) == 1);
        TT_CHECK_EQ_INT(b.st.code, TFRDV_OK);
        TT_CHECK(check_bytes(b.val, 4096, 4));
        {
            tfrdv_verbs_stats s;
            stats_of(f.v, &s);
            TT_CHECK_EQ_INT(s.reconnects, round == 0 ? 0 : 1);
        }
        rm_worker(&f);
        TT_CHECK_EQ_INT(a.calls, 1);
        TT_CHECK_EQ_INT(b.calls, 1);
        fetch_fini(&a);
        fetch_fini(&b);
    }
}

/* the out-of-band bootstrap: an exchange callback instead of TCP (here a mailbox between two
   threads; in a real job, the cluster's own channel) */
static pthread_mutex_t xmu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t xbox[2][TFRDV_VERBS_INFO_MAX];
static size_t xlen[2];
static tfrdv_code xchg(void* user, const char* peer, const uint8_t* local, size_t n, uint8_t* remote, size_t cap, size_t* rn) {
    int me = (int)(intptr_t)user, i;
    (void)peer;
    pthread_mutex_lock(&xmu);
    memcpy(xbox[me], local, n);
    xlen[me] = n;
    pthread_mutex_unlock(&xmu);
    for (i = 0; i < 5000; i++) {
        pthread_mutex_lock(&xmu);
        if (xlen[1 - me] && xlen[1 - me] <= cap) {
            memcpy(remote, xbox[1 - me], xlen[1 - me]);
            *rn = xlen[1 - me];
            pthread_mutex_unlock(&xmu);
            return TFRDV_OK;
        }
        pthread_mutex_unlock(&xmu);
        sleep_us(1000);
    }
    return TFRDV_DEADLINE_EXCEEDED;
}
static worker xw[2];
static void* xconnect(void* arg) {
    tfrdv_status st;
    int me = (int)(intptr_t)arg;
    return (void*)(intptr_t)(tfrdv_verbs_connect(xw[me].v, me ? "/job:w/replica:0/task:10" : "/job:w/replica:0/task:11", 0, 0, &st) == TFRDV_OK);
}
static void test_exchange_callback(void) {
    int i;
    pthread_t t;
    void* ok0 = 0;
    intptr_t ok1;
    fetch f;
    tfrdv_status st;
    tfrdv_rendezvous* r = 0;
    tfrdv_parsed_key k;
    char kb[256];
    int64_t dims[1] = {5000};
    for (i = 0; i < 2; i++) {
        tfrdv_verbs_config vc = tfrdv_verbs_config_init();
        tfrdv_mgr_config mc = tfrdv_mgr_config_init();
        snprintf(xw[i].name, sizeof xw[i].name, "/job:w/replica:0/task:%d", 10 + i);
        vc.worker_name = xw[i].name;
        vc.exchange = xchg;
        vc.exchange_user = (void*)(intptr_t)i;
        TT_CHECK(tfrdv_verbs_create(&vc, &xw[i].v, &st) == TFRDV_OK);
        mc.worker_name = xw[i].name;
        mc.incarnation = INC;
        mc.transport = tfrdv_verbs_transport(xw[i].v);
        TT_CHECK(tfrdv_mgr_create(&mc, &xw[i].m, &st) == TFRDV_OK && tfrdv_verbs_attach(xw[i].v, xw[i].m, &st) == TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_verbs_port(xw[i].v), 0); /* no TCP listener */
    }
    pthread_create(&t, 0, xconnect, (void*)(intptr_t)1);
    ok1 = (intptr_t)xconnect((void*)(intptr_t)0);
    pthread_join(t, &ok0);
    TT_CHECK(ok1 && ok0);
    /* task:11 sends, task:10 fetches */
    fetch_init(&f);
    mk_key(&k, kb, sizeof kb, 11, 10, "oob");
    TT_CHECK(tfrdv_mgr_find(xw[1].m, 1, &r, &st) == TFRDV_OK && tfrdv_mgr_initialize(r, 0, &st) == TFRDV_OK);
    TT_CHECK(r && tfrdv_send(r, &k, 0, val_new(TFRDV_DT_UINT8, 1, dims, 6), 0, &st) == TFRDV_OK);
    if (r) tfrdv_unref(r);
    TT_CHECK(post(&xw[0], &f, 1, 11, 10, "oob", 0, 0));
    TT_CHECK(fetch_wait(&f, 30) == 1);
    TT_CHECK_EQ_INT(f.st.code, TFRDV_OK);
    TT_CHECK(check_bytes(f.val, 5000, 6));
    fetch_fini(&f);
    rm_worker(&xw[0]);
    rm_worker(&xw[1]);
}

/* RXE_DEBUG=1: every 20 s each process prints its transport's internal state (for hangs) */
static void dump(const char* who, tfrdv_verbs* v) {
    int i;
    pthread_mutex_lock(&v->mu);
    printf("  [%s] calls %llu ok %llu failed %llu served %llu ctrl sent %llu recv %llu queued %llu serves_out %ld\n", who,
           (unsigned long long)v->stats.calls_started, (unsigned long long)v->stats.calls_ok,
           (unsigned long long)v->stats.calls_failed, (unsigned long long)v->stats.requests_served,
           (unsigned long long)v->stats.ctrl_sent, (unsigned long long)v->stats.ctrl_received,
           (unsigned long long)v->stats.ctrl_queued, v->serves_out);
    for (i = 0; i < v->npeers; i++) {
        tfrdv_verbs__peer* p = v->peers[i];
        uint32_t k, rs[6] = {0}, ss[5] = {0};
        for (k = 0; k < p->nreq_slots; k++)
            if (p->reqs[k]) rs[p->reqs[k]->state]++;
        for (k = 0; k < p->nsrv; k++) ss[p->srv[k].state]++;
        printf("  [%s] peer %s state %d out %u sq %u/%u tx %u/%u cr.tx %u owed %u cq %d wq %d wait %d req q%u p%u m%u d%u z%u srv s%u w%u q%u wr%u\n",
               who, p->name, p->state, p->outstanding, p->sq_used, p->sq_depth, p->tx_seq, p->tx_done, p->cr.tx, p->cr.owed,
               p->cq_head != 0, p->wq_head != 0, p->wait_head != 0, rs[1], rs[2], rs[3], rs[4], rs[5], ss[1], ss[2], ss[3], ss[4]);
    }
    pthread_mutex_unlock(&v->mu);
}
static void* dumper(void* arg) {
    worker* w = (worker*)arg;
    for (;;) {
        sleep(20);
        if (w->v) dump(w->name, w->v);
    }
    return 0;
}
static void start_dumper(worker* w) {
    pthread_t t;
    if (getenv("RXE_DEBUG")) pthread_create(&t, 0, dumper, w);
}


/* TRANSPORTS in tfrdv.h on a real device: a worker's transport destroyed before its manager,
   with a fetch in flight (the sender process serves it and never answers): the fetch fails
   UNAVAILABLE at once, a later fetch through the manager too, the manager's destroy frees the
   rest; everything the transport allocated (rings, peers, caches) came from hooks.allocator and
   went back to it. The sender process goes on serving the other workers. */
static void test_transport_destroyed_first(void) {
    worker a4;
    wopts o;
    fetch f, g, h;
    tfrdv_status st;
    fx_alloc fa;
    memset(&fa, 0, sizeof fa);
    memset(&o, 0, sizeof o);
    o.ctrl_slots = 8;
    o.max_requests = 64;
    o.alloc = fx_alloc_hooks(&fa).allocator;
    TT_CHECK(mk_worker(&a4, 4, &o, &st));
    TT_CHECK(tfrdv_verbs_connect(a4.v, WORKER(1), "127.0.0.1", b_port, &st) == TFRDV_OK);
    fetch_init(&f);
    fetch_init(&g);
    fetch_init(&h);
    send_and_fetch(&a4, 4, &g, 1000, "got", 70000, 3);
    TT_CHECK(post(&a4, &f, 1000, 1, 4, "never", 0, 0));
    sleep_us(200000);
    TT_CHECK_EQ_INT(f.calls, 0);
    TT_CHECK(fx_live(&fa) > 0);
    tfrdv_verbs_destroy(a4.v); /* the manager is still alive */
    TT_CHECK_EQ_INT(f.calls, 1); /* finished inside destroy */
    TT_CHECK_EQ_INT(f.st.code, TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(f.st.msg, "verbs transport destroyed");
    TT_CHECK(post(&a4, &h, 1001, 1, 4, "after", 0, 0));
    TT_CHECK_EQ_INT(h.calls, 1); /* at once */
    TT_CHECK_EQ_INT(h.st.code, TFRDV_UNAVAILABLE);
    tfrdv_mgr_destroy(a4.m);
    FX_CHECK_EMPTY(&fa);
    fetch_fini(&f);
    fetch_fini(&g);
    fetch_fini(&h);
}

/* 0 B .. 64 MiB, each twice: the first fetch of a key learns its shape (METADATA + RE-REQUEST),
   the second is one request + one RDMA write straight into the receiver's buffer */
static void test_sizes(void) {
    static const int64_t sizes[] = {0, 1, 4096, 1 << 20, 16 << 20, 64 << 20};
    size_t i;
    int rep;
    tfrdv_verbs_stats s0, s1;
    stats_of(A.v, &s0);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (rep = 0; rep < 2; rep++) {
            fetch f;
            char edge[32];
            int64_t step = 100 + (int64_t)i * 2 + rep;
            fetch_init(&f);
            snprintf(edge, sizeof edge, "size_%lld", (long long)sizes[i]);
            TT_CHECK(cmd("send %lld 0 %s %d %d 0 1 %lld\n", (long long)step, edge, TFRDV_DT_UINT8, (int)(i + 10 * rep), (long long)sizes[i]));
            TT_CHECK(post(&A, &f, step, 1, 0, edge, 0, 0));
            TT_CHECK(fetch_wait(&f, 120) == 1);
            TT_CHECK_EQ_INT(f.st.code, TFRDV_OK);
            if (f.st.code) printf("    %s: %s\n", edge, f.st.msg);
            TT_CHECK(f.val && f.val->dtype == TFRDV_DT_UINT8 && f.val->rank == 1 && f.val->dims[0] == sizes[i]);
            TT_CHECK(check_bytes(f.val, (uint64_t)sizes[i], (int)(i + 10 * rep)));
            printf("    %9lld B %s: %.2f ms\n", (long long)sizes[i], rep ? "known shape " : "first fetch ", (double)(f.t1 - f.t0) / 1e6);
            fetch_fini(&f);
            tfrdv_mgr_cleanup(A.m, step);
        }
    }
    stats_of(A.v, &s1);
    TT_CHECK_EQ_INT(s1.re_requests - s0.re_requests, 6); /* one per key: its first fetch */
    TT_CHECK_EQ_INT(s1.calls_ok - s0.calls_ok, 12);
}

/* dtype or shape changes force METADATA + RE-REQUEST; the same shape again does not */
static void test_meta_change(void) {
    static const struct { int dtype, rank; int64_t d0, d1; int rereq; } seq[] = {
        {TFRDV_DT_FLOAT, 2, 4, 4, 1}, {TFRDV_DT_FLOAT, 2, 4, 4, 0}, {TFRDV_DT_FLOAT, 2, 2, 8, 1},
        {TFRDV_DT_INT32, 2, 2, 8, 1}, {TFRDV_DT_INT32, 1, 16, 0, 1}, {TFRDV_DT_INT32, 1, 16, 0, 0}};
    size_t i;
    for (i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        fetch f;
        tfrdv_verbs_stats s0, s1;
        int64_t step = 200 + (int64_t)i;
        fetch_init(&f);
        stats_of(A.v, &s0);
        if (seq[i].rank == 2)
            TT_CHECK(cmd("send %lld 0 chg %d %d 0 2 %lld %lld\n", (long long)step, seq[i].dtype, (int)i, (long long)seq[i].d0, (long long)seq[i].d1));
        else
            TT_CHECK(cmd("send %lld 0 chg %d %d 0 1 %lld\n", (long long)step, seq[i].dtype, (int)i, (long long)seq[i].d0));
        TT_CHECK(post(&A, &f, step, 1, 0, "chg", 0, 0));
        TT_CHECK(fetch_wait(&f, 30) == 1);
        TT_CHECK_EQ_INT(f.st.code, TFRDV_OK);
        TT_CHECK(f.val && f.val->dtype == seq[i].dtype && f.val->rank == seq[i].rank && f.val->dims[0] == seq[i].d0);
        TT_CHECK(check_bytes(f.val, 64, (int)i));
        stats_of(A.v, &s1);
        TT_CHECK_EQ_INT(s1.re_requests - s0.re_requests, seq[i].rereq);
        fetch_fini(&f);
        tfrdv_mgr_cleanup(A.m, step);
    }
}

static void test_dead(void) {
    fetch f;
    fetch_init(&f);
    TT_CHECK(cmd("send 300 0 deadedge 1 0 1 0\n"));
    TT_CHECK(post(&A, &f, 300, 1, 0, "deadedge", 0, 0));
    TT_CHECK(fetch_wait(&f, 30) == 1);
    TT_CHECK_EQ_INT(f.st.code, TFRDV_OK);
    TT_CHECK(f.dead == 1 && f.val == 0);
    fetch_fini(&f);
    tfrdv_mgr_cleanup(A.m, 300);
}

/* a key with another incarnation: the sender refuses it ABORTED, and the receiver gets the kind
   (TFRDV_DETAIL_WORKER_RESTARTED, carried by the error message) to act on without reading text */
static void test_wrong_incarnation(void) {
    fetch f;
    fetch_init(&f);
    key_inc = INC + 1;
    TT_CHECK(post(&A, &f, 350, 1, 0, "restarted", 0, 0));
    key_inc = INC;
    TT_CHECK(fetch_wait(&f, 30) == 1);
    TT_CHECK_EQ_INT(f.st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(f.st.detail, TFRDV_DETAIL_WORKER_RESTARTED);
    TT_CHECK(strstr(f.st.msg, "incarnation") != NULL);
    fetch_fini(&f);
    tfrdv_mgr_cleanup(A.m, 350);
}

/* abort / cleanup while the request is at the sender: exactly one callback, the late value stays
   at the sender, the connection keeps working */
static void in_flight(int use_cleanup) {
    fetch f, g;
    tfrdv_rendezvous* r = 0;
    int64_t step = use_cleanup ? 401 : 400;
    fetch_init(&f);
    fetch_init(&g);
    TT_CHECK(post(&A, &f, step, 1, 0, "never", 0, &r));
    sleep_us(300000);
    TT_CHECK_EQ_INT(f.calls, 0);
    if (use_cleanup) tfrdv_mgr_cleanup(A.m, step);
    else tfrdv_abort(r, TFRDV_ABORTED, "test abort");
    TT_CHECK(fetch_wait(&f, 5) == 1);
    TT_CHECK(f.st.code == TFRDV_ABORTED || f.st.code == TFRDV_CANCELLED);
    TT_CHECK(cmd("send %lld 0 never 4 1 0 1 1000\n", (long long)step)); /* arrives after the withdrawal */
    sleep_us(300000);
    TT_CHECK_EQ_INT(f.calls, 1);
    /* still connected: a normal fetch works */
    TT_CHECK(cmd("send %lld 0 after 4 2 0 1 4096\n", (long long)step + 10));
    TT_CHECK(post(&A, &g, step + 10, 1, 0, "after", 0, 0));
    TT_CHECK(fetch_wait(&g, 30) == 1);
    TT_CHECK_EQ_INT(g.st.code, TFRDV_OK);
    TT_CHECK(check_bytes(g.val, 4096, 2));
    if (r) tfrdv_unref(r);
    fetch_fini(&f);
    fetch_fini(&g);
    tfrdv_mgr_cleanup(A.m, step);
    tfrdv_mgr_cleanup(A.m, step + 10);
}
static void test_abort_in_flight(void) { in_flight(0); }
static void test_cleanup_in_flight(void) { in_flight(1); }

/* 300 concurrent fetches: more than max_requests (64: a wait queue) and many more control messages
   than the 8-slot rings hold (credits) */
static void test_many_in_flight(void) {
    enum { N = 300 };
    static fetch f[N];
    int i, ok = 0, once = 1;
    for (i = 0; i < N; i++) {
        char e[32];
        fetch_init(&f[i]);
        snprintf(e, sizeof e, "many_%d", i);
        TT_CHECK(post(&A, &f[i], 500, 1, 0, e, 0, 0));
    }
    for (i = 0; i < N; i++) TT_CHECK(cmd("send 500 0 many_%d 4 %d 0 1 %d\n", i, i, 64 + i));
    for (i = 0; i < N; i++) {
        fetch_wait(&f[i], 60);
        if (f[i].calls != 1) once = 0;
        if (f[i].st.code == TFRDV_OK && check_bytes(f[i].val, (uint64_t)(64 + i), i)) ok++;
        else if (f[i].calls) printf("    many_%d: %s %s\n", i, tfrdv_code_str(f[i].st.code), f[i].st.msg);
        fetch_fini(&f[i]);
    }
    TT_CHECK(once);
    TT_CHECK_EQ_INT(ok, N);
    tfrdv_mgr_cleanup(A.m, 500);
}

/* pre-registered pool as the receiver's alloc hook: no registration per transfer */
static uint8_t* pool;
static size_t pool_off;
static void pool_release(tfrdv_value* v) { free(v); }
static tfrdv_value* pool_alloc(void* user, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    tfrdv_value* v = (tfrdv_value*)calloc(1, sizeof *v + 8 * (size_t)rank);
    (void)user;
    if (!v || pool_off + size > (8u << 20)) {
        free(v);
        return 0;
    }
    v->dtype = dtype;
    v->rank = rank;
    v->dims = (int64_t*)(v + 1);
    memcpy((int64_t*)(v + 1), dims, 8 * (size_t)rank);
    v->data = pool + pool_off;
    v->size = size;
    v->release = pool_release;
    pool_off = (pool_off + size + 4095) & ~(size_t)4095;
    if (pool_off >= (4u << 20)) pool_off = 0;
    return v;
}
static void test_registered_pool(void) {
    tfrdv_status st;
    tfrdv_args args;
    tfrdv_verbs_stats s0, s1;
    int i;
    void* mem = 0;
    pool = posix_memalign(&mem, 4096, 8u << 20) == 0 ? (uint8_t*)mem : 0;
    TT_CHECK(pool && tfrdv_verbs_register(A.v, pool, 8u << 20, &st) == TFRDV_OK);
    memset(&args, 0, sizeof args);
    args.alloc_fn = pool_alloc;
    stats_of(A.v, &s0);
    for (i = 0; i < 4; i++) {
        fetch f;
        fetch_init(&f);
        TT_CHECK(cmd("send %d 0 pooled 4 %d 0 1 1048576\n", 600 + i, i));
        TT_CHECK(post(&A, &f, 600 + i, 1, 0, "pooled", &args, 0));
        TT_CHECK(fetch_wait(&f, 30) == 1);
        TT_CHECK_EQ_INT(f.st.code, TFRDV_OK);
        TT_CHECK(check_bytes(f.val, 1 << 20, i));
        TT_CHECK(f.val && (uint8_t*)f.val->data >= pool && (uint8_t*)f.val->data < pool + (8u << 20));
        fetch_fini(&f);
        tfrdv_mgr_cleanup(A.m, 600 + i);
    }
    stats_of(A.v, &s1);
    TT_CHECK_EQ_INT(s1.reg_misses - s0.reg_misses, 0);
    TT_CHECK(s1.reg_hits - s0.reg_hits >= 3);
    tfrdv_verbs_invalidate(A.v, pool, 8u << 20);
    free(pool);
}

/* the call's deadline is enforced by the transport (nobody calls tfrdv_mgr_expire here) */
static void test_deadline(void) {
    worker a2;
    tfrdv_status st;
    wopts o;
    fetch f;
    double secs;
    memset(&o, 0, sizeof o);
    o.call_timeout_ns = 1500000000;
    fetch_init(&f);
    TT_CHECK(mk_worker(&a2, 2, &o, &st));
    TT_CHECK(tfrdv_verbs_connect(a2.v, WORKER(1), "127.0.0.1", b_port, &st) == TFRDV_OK);
    TT_CHECK(post(&a2, &f, 700, 1, 2, "late", 0, 0));
    TT_CHECK(fetch_wait(&f, 10) == 1);
    secs = (double)(f.t1 - f.t0) / 1e9;
    TT_CHECK_EQ_INT(f.st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK(secs >= 1.4 && secs < 4.0);
    printf("    DEADLINE_EXCEEDED after %.2f s (deadline 1.5 s): %s\n", secs, f.st.msg);
    /* a call in flight at shutdown completes exactly once too */
    {
        fetch g;
        fetch_init(&g);
        TT_CHECK(post(&a2, &g, 701, 1, 2, "never2", 0, 0));
        sleep_us(100000);
        rm_worker(&a2);
        TT_CHECK_EQ_INT(g.calls, 1);
        TT_CHECK(g.st.code != TFRDV_OK);
        sleep_us(200000);
        TT_CHECK_EQ_INT(g.calls, 1);
        fetch_fini(&g);
    }
    TT_CHECK_EQ_INT(f.calls, 1);
    fetch_fini(&f);
}

/* a receiver advertising bad rkeys (every registration of a3 reports a wrong one, its control
   ring's too): the sender's first write fails with a remote access error; the receiver's call
   fails UNAVAILABLE naming it, well within the deadline; other peers unaffected */
static void test_bad_rkey(void) {
    worker a3;
    tfrdv_status st;
    wopts o;
    fetch f, g;
    double secs;
    const char* lib = getenv("RXE_FAULTVERBS") ? getenv("RXE_FAULTVERBS") : "/bin/libfaultverbs.so";
    memset(&o, 0, sizeof o);
    o.library = lib; /* every registration of a3 reports a wrong rkey while the variable is set */
    o.call_timeout_ns = (int64_t)20 * 1000000000;
    if (access(lib, R_OK) != 0) {
        printf("    %s is missing\n", lib);
        TT_CHECK(0);
        return;
    }
    fetch_init(&f);
    fetch_init(&g);
    setenv("TFRDV_FAULT_BAD_RKEY", "1", 1);
    TT_CHECK(mk_worker(&a3, 3, &o, &st));
    TT_CHECK(tfrdv_verbs_connect(a3.v, WORKER(1), "127.0.0.1", b_port, &st) == TFRDV_OK);
    TT_CHECK(cmd("send 800 3 badkey 4 5 0 1 65536\n"));
    TT_CHECK(post(&a3, &f, 800, 1, 3, "badkey", 0, 0));
    TT_CHECK(fetch_wait(&f, 20) == 1);
    secs = (double)(f.t1 - f.t0) / 1e9;
    TT_CHECK_EQ_INT(f.st.code, TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(f.st.msg, "access");
    TT_CHECK(secs < 10);
    printf("    UNAVAILABLE after %.2f s: %s\n", secs, f.st.msg);
    /* the next call to that peer reconnects (a3 called tfrdv_verbs_connect) and goes over the new
       connection, where a3's bad rkey breaks it again; A <-> B still works */
    TT_CHECK(cmd("send 801 3 x 4 6 0 1 4096\n"));
    TT_CHECK(post(&a3, &g, 801, 1, 3, "x", 0, 0));
    TT_CHECK(fetch_wait(&g, 20) == 1);
    TT_CHECK_EQ_INT(g.st.code, TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(g.st.msg, "access");
    {
        tfrdv_verbs_stats s;
        stats_of(a3.v, &s);
        TT_CHECK_EQ_INT(s.reconnects, 1);
        TT_CHECK_EQ_INT(s.peers_broken, 2);
        printf("    after a reconnect: %s\n", g.st.msg);
    }
    fetch_fini(&g);
    fetch_init(&g);
    send_and_fetch(&A, 0, &g, 802, "stillok", 100000, 9);
    fetch_fini(&g);
    rm_worker(&a3);
    unsetenv("TFRDV_FAULT_BAD_RKEY");
    TT_CHECK_EQ_INT(f.calls, 1);
    fetch_fini(&f);
    tfrdv_mgr_cleanup(A.m, 802);
}

/* a peer process that dies (SIGKILL: its TCP bootstrap connection closes) or hangs (SIGSTOP: only
   the keep-alive notices) while a fetch from it is outstanding */
static void dead_peer(int sig) {
    int p[2];
    pid_t pid;
    char buf[64];
    fetch f;
    double secs;
    int task = sig == SIGKILL ? 5 : 6, k;
    tfrdv_verbs_stats s0, s1;
    fetch_init(&f);
    stats_of(A.v, &s0);
    TT_CHECK(pipe(p) == 0);
    pid = fork();
    if (pid == 0) { /* a fresh process (exec): nothing of ours is used after fork */
        char t[16], port[16], fd[16];
        close(p[0]);
        snprintf(t, sizeof t, "%d", task);
        snprintf(port, sizeof port, "%d", tfrdv_verbs_port(A.v));
        snprintf(fd, sizeof fd, "%d", p[1]);
        execl("/proc/self/exe", "rxe_test", "--peer", t, port, fd, (char*)0);
        _exit(127);
    }
    close(p[1]);
    TT_CHECK(read(p[0], buf, sizeof buf) > 0 && strncmp(buf, "ready", 5) == 0);
    close(p[0]);
    /* the peer's connect returned once it had our answer; our side publishes the connection
       right after sending it (progress): wait for that before the fetch */
    for (k = 0; k < 5000; k++) {
        stats_of(A.v, &s1);
        if (s1.peers > s0.peers) break;
        sleep_us(1000);
    }
    TT_CHECK(post(&A, &f, 900 + task, task, 0, "fromdead", 0, 0));
    sleep_us(300000);
    TT_CHECK_EQ_INT(f.calls, 0);
    kill(pid, sig);
    TT_CHECK(fetch_wait(&f, 15) == 1);
    secs = (double)(f.t1 - f.t0) / 1e9 - 0.3;
    TT_CHECK_EQ_INT(f.st.code, TFRDV_UNAVAILABLE);
    TT_CHECK(secs < (sig == SIGKILL ? 2.0 : 6.0));
    printf("    %s: UNAVAILABLE %.2f s after the signal: %s\n", sig == SIGKILL ? "SIGKILL" : "SIGSTOP", secs, f.st.msg);
    TT_CHECK_CONTAINS(f.st.msg, sig == SIGKILL ? "closed" : "keep-alive");
    if (sig != SIGKILL) kill(pid, SIGKILL);
    waitpid(pid, 0, 0);
    sleep_us(100000);
    TT_CHECK_EQ_INT(f.calls, 1);
    fetch_fini(&f);
    tfrdv_mgr_cleanup(A.m, 900 + task);
}
static void test_peer_killed(void) { dead_peer(SIGKILL); }
static void test_peer_stopped(void) { dead_peer(SIGSTOP); }

/* --peer TASK PORT FD: a worker that connects to task:0 and then only waits (to be killed) */
static int peer_main(int task, int port, int fd) {
    worker c;
    tfrdv_status st;
    if (!mk_worker(&c, task, 0, &st) || tfrdv_verbs_connect(c.v, WORKER(0), "127.0.0.1", port, &st) != TFRDV_OK) {
        dprintf(fd, "fail %s\n", st.msg);
        return 1;
    }
    dprintf(fd, "ready\n");
    for (;;) pause();
}

int main(int argc, char** argv) {
    tfrdv_status st;
    int to_child[2], from_child[2], status = 0;
    char line[256];
    wopts o;
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, 0, _IOLBF, 0);
    if (argc == 5 && strcmp(argv[1], "--peer") == 0) return peer_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    TT_MAIN_BEGIN(argc, argv);
    /* the sender process first, before this process opens the device */
    if (pipe(to_child) || pipe(from_child)) return 1;
    b_pid = fork();
    if (b_pid == 0) {
        close(to_child[1]);
        close(from_child[0]);
        _exit(child_main(to_child[0], from_child[1], 8));
    }
    memset(&o, 0, sizeof o);
    o.ctrl_slots = 8;
    o.max_requests = 64;
    o.peer_timeout_ns = 2000000000;
    if (!mk_worker(&A, 0, &o, &st)) {
        printf("no RDMA device: %s\n", st.msg);
        kill(b_pid, SIGKILL);
        return 77;
    }
    printf("device: %s\n", tfrdv_verbs_describe(A.v));
    start_dumper(&A);
    close(to_child[0]);
    close(from_child[1]);
    cout_fd = to_child[1];
    cin = fdopen(from_child[0], "r");
    if (!fgets(line, sizeof line, cin) || sscanf(line, "port %d", &b_port) != 1) {
        printf("child failed: %s\n", line);
        return 1;
    }
    if (tfrdv_verbs_connect(A.v, WORKER(1), "127.0.0.1", b_port, &st) != TFRDV_OK) {
        printf("connect: %s\n", st.msg);
        return 1;
    }
    TT_RUN(test_sizes);
    TT_RUN(test_meta_change);
    TT_RUN(test_dead);
    TT_RUN(test_wrong_incarnation);
    TT_RUN(test_abort_in_flight);
    TT_RUN(test_cleanup_in_flight);
    TT_RUN(test_many_in_flight);
    TT_RUN(test_registered_pool);
    TT_RUN(test_deadline);
    TT_RUN(test_bad_rkey);
    TT_RUN(test_peer_killed);
    TT_RUN(test_peer_stopped);
    TT_RUN(test_faults);
    TT_RUN(test_exchange_callback);
    TT_RUN(test_transport_destroyed_first);
    if (write(cout_fd, "quit\n", 5) < 0) status = 1;
    waitpid(b_pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("[FAIL] sender process exit status %d\n", status);
        tt_failed++;
    }
    rm_worker(&A);
    return TT_MAIN_END();
}
