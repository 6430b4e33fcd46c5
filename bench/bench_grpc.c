/* bench_grpc.c - tfrdv_grpc.h against baselines measured by the same binary, two processes on
   127.0.0.1 (`make bench-grpc`). This process is the client; it re-executes itself with --serve as
   the server process, which hosts:
     - a tfrdv worker (tfrdv_grpc server + step manager), plain and TLS;
     - a raw gRPC C-core server: a unary method whose 8-byte request names a size and whose reply
       is that many bytes (zero copy from one buffer, as the tfrdv server sends a tensor);
     - a plain TCP server: an 8-byte request, then that many bytes written.
   The raw call carries the deadline a tfrdv receive without one gets (recv_timeout_ns).
   Client side, all three copy the reply into the same preallocated buffer (tfrdv through the
   receiver's alloc hook) and hand the completion from a completion-queue thread to the waiting
   thread, so the three do the same work apart from what is being measured.
   Latency: sequential fetches, median and p99. Throughput: sequential fetches of 1, 64, 256 MiB.
   Memory: the server's RSS growth with 1,000 RecvTensor calls outstanding.
   TFRDV_BENCH_CERTS=DIR (ca.crt, server.crt, server.key from tests/grpc/certs.sh) adds TLS. */
#define TFRDV_IMPLEMENTATION
#define TFRDV_GRPC_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_grpc.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PS "/job:ps/replica:0/task:0"
#define WK "/job:worker/replica:0/task:0"
#define MAXB ((size_t)256 << 20)
#define RAW_METHOD "/bench.Raw/Get"

static unsigned char* big; /* MAXB bytes: the server's payload and the client's destination */
static int64_t now_ns(void) { return tfrdv_now_ns(); }
static int rd_all(int fd, void* p, size_t n) {
    size_t g = 0;
    while (g < n) { ssize_t r = read(fd, (char*)p + g, n - g); if (r <= 0) return 0; g += (size_t)r; }
    return 1;
}
static int wr_all(int fd, const void* p, size_t n) {
    size_t g = 0;
    while (g < n) { ssize_t r = write(fd, (const char*)p + g, n - g); if (r <= 0) return 0; g += (size_t)r; }
    return 1;
}
static char* slurp(const char* dir, const char* name) {
    char p[1024];
    FILE* f;
    long n;
    char* s;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (!(f = fopen(p, "rb"))) return 0;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    s = (char*)malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = 0; }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}
static long rss_kib(void) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
    fclose(f);
    return kb;
}

/* ============================================================================================
   Server process
   ============================================================================================ */
typedef struct rtag { void (*fn)(struct rtag*, int); } rtag;
typedef struct rctx {
    rtag accept, done;
    grpc_call* call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *payload, *resp;
    int cancelled;
} rctx;
static grpc_server* rsrv;
static void* rmethod;
static grpc_completion_queue* rcq;
static volatile int rstop;
static void noop_free(void* p) { (void)p; }
static void raw_shut(struct rtag* t, int ok) { (void)t; (void)ok; }
static void raw_post(void);
static void raw_done(rtag* t, int ok) {
    rctx* c = (rctx*)((char*)t - offsetof(rctx, done));
    (void)ok;
    grpc_call_unref(c->call);
    grpc_metadata_array_destroy(&c->md);
    if (c->payload) grpc_byte_buffer_destroy(c->payload);
    if (c->resp) grpc_byte_buffer_destroy(c->resp);
    free(c);
}
static void raw_accept(rtag* t, int ok) {
    rctx* c = (rctx*)((char*)t - offsetof(rctx, accept));
    grpc_op ops[4];
    grpc_slice s;
    uint64_t size = 0;
    if (!ok) { grpc_metadata_array_destroy(&c->md); free(c); return; }
    raw_post();
    if (c->payload) {
        grpc_byte_buffer_reader r;
        grpc_slice all;
        grpc_byte_buffer_reader_init(&r, c->payload);
        all = grpc_byte_buffer_reader_readall(&r);
        grpc_byte_buffer_reader_destroy(&r);
        if (GRPC_SLICE_LENGTH(all) == 8) memcpy(&size, GRPC_SLICE_START_PTR(all), 8);
        grpc_slice_unref(all);
    }
    if (size > MAXB) size = 0;
    if (size <= 1024) s = grpc_slice_from_copied_buffer((const char*)big, (size_t)size); /* as tfrdv: small is copied */
    else s = grpc_slice_new_with_user_data(big, (size_t)size, noop_free, 0);
    c->resp = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = c->resp;
    ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[2].data.send_status_from_server.status = GRPC_STATUS_OK;
    ops[3].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[3].data.recv_close_on_server.cancelled = &c->cancelled;
    c->done.fn = raw_done;
    grpc_call_start_batch(c->call, ops, 4, &c->done, NULL);
}
static void raw_post(void) {
    rctx* c;
    if (rstop) return;
    c = (rctx*)calloc(1, sizeof *c);
    c->accept.fn = raw_accept;
    grpc_metadata_array_init(&c->md);
    grpc_server_request_registered_call(rsrv, rmethod, &c->call, &c->deadline, &c->md, &c->payload, rcq, rcq, &c->accept);
}
static void* raw_poller(void* a) {
    (void)a;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(rcq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
        if (ev.type == GRPC_OP_COMPLETE) ((rtag*)ev.tag)->fn((rtag*)ev.tag, ev.success);
    }
    return 0;
}
static int tcp_listen_fd;
static void* tcp_conn(void* a) {
    int fd = (int)(intptr_t)a;
    uint64_t size;
    while (rd_all(fd, &size, 8) && size <= MAXB && wr_all(fd, big, (size_t)size)) {}
    close(fd);
    return 0;
}
static void* tcp_acceptor(void* a) {
    (void)a;
    for (;;) {
        int fd = accept(tcp_listen_fd, 0, 0), one = 1;
        pthread_t t;
        if (fd < 0) break;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_create(&t, 0, tcp_conn, (void*)(intptr_t)fd);
        pthread_detach(t);
    }
    return 0;
}

typedef struct srvw { tfrdv_grpc* g; tfrdv_mgr* m; } srvw;
static int srv_worker(srvw* w, int tls, const char* certs) {
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    char *key = 0, *crt = 0;
    int ok;
    gc.listen_address = "127.0.0.1:0";
    gc.num_threads = 1;
    gc.recv_tensor_queue_depth = 1000;
    if (tls) {
        key = slurp(certs, "server.key");
        crt = slurp(certs, "server.crt");
        gc.pem_private_key = key;
        gc.pem_cert_chain = crt;
    }
    ok = tfrdv_grpc_create(&gc, &w->g, 0) == TFRDV_OK;
    mc.worker_name = PS;
    mc.incarnation = 42;
    mc.transport = tfrdv_grpc_transport(w->g);
    mc.request_id_window = -1;
    ok = ok && tfrdv_mgr_create(&mc, &w->m, 0) == TFRDV_OK && tfrdv_grpc_attach(w->g, w->m, 0) == TFRDV_OK;
    free(key);
    free(crt);
    return ok ? tfrdv_grpc_port(w->g) : 0;
}
static void shared_release(tfrdv_value* v) { (void)v; }
static tfrdv_value shared; /* the payload, sent many times (one reference per send) */
static int64_t shared_dims[1];
static void make_key(int64_t i, char* buf, size_t cap, tfrdv_parsed_key* pk) {
    char edge[32];
    size_t len;
    tfrdv_frame_iter top = {0, 0};
    snprintf(edge, sizeof edge, "e%lld", (long long)i);
    tfrdv_key_create(PS "/device:CPU:0", 42, WK "/device:CPU:0", edge, top, buf, cap, &len, 0);
    tfrdv_key_parse(buf, len, pk, 0);
}
enum { C_PREP = 1, C_CLEAN, C_MEM, C_LIVE, C_QUIT };
typedef struct bcmd { int op, tls; int64_t step, n; uint64_t size; } bcmd;
static int serve_main(int in, int out, const char* certs) {
    srvw w[2];
    int ports[5] = {0, 0, 0, 0, 0}, one = 1;
    grpc_server_credentials* sc;
    pthread_t rp, tp;
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    bcmd c;
    signal(SIGPIPE, SIG_IGN);
    memset(w, 0, sizeof w);
    ports[0] = srv_worker(&w[0], 0, certs);
    if (certs) ports[1] = srv_worker(&w[1], 1, certs);
    /* raw C-core server: plain and TLS ports */
    grpc_init();
    {
        grpc_arg args[1];
        grpc_channel_args ca;
        memset(args, 0, sizeof args);
        args[0].type = GRPC_ARG_INTEGER;
        args[0].key = (char*)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
        args[0].value.integer = -1;
        ca.num_args = 1;
        ca.args = args;
        rsrv = grpc_server_create(&ca, NULL);
    }
    rmethod = grpc_server_register_method(rsrv, RAW_METHOD, NULL, GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    rcq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(rsrv, rcq, NULL);
    sc = grpc_insecure_server_credentials_create();
    ports[2] = grpc_server_add_http2_port(rsrv, "127.0.0.1:0", sc);
    grpc_server_credentials_release(sc);
    if (certs) {
        grpc_ssl_pem_key_cert_pair pair;
        char *key = slurp(certs, "server.key"), *crt = slurp(certs, "server.crt");
        pair.private_key = key;
        pair.cert_chain = crt;
        sc = grpc_ssl_server_credentials_create_ex(NULL, &pair, 1, GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE, NULL);
        ports[3] = grpc_server_add_http2_port(rsrv, "127.0.0.1:0", sc);
        grpc_server_credentials_release(sc);
        free(key);
        free(crt);
    }
    grpc_server_start(rsrv);
    pthread_create(&rp, 0, raw_poller, 0);
    for (one = 0; one < 64; one++) raw_post();
    one = 1;
    /* plain TCP */
    tcp_listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(tcp_listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(tcp_listen_fd, (struct sockaddr*)&a, sizeof a);
    listen(tcp_listen_fd, 16);
    getsockname(tcp_listen_fd, (struct sockaddr*)&a, &al);
    ports[4] = ntohs(a.sin_port);
    pthread_create(&tp, 0, tcp_acceptor, 0);
    wr_all(out, ports, sizeof ports);
    shared_dims[0] = 0;
    while (rd_all(in, &c, sizeof c)) {
        long reply = 0;
        if (c.op == C_QUIT) break;
        if (c.op == C_PREP) {
            tfrdv_rendezvous* r;
            int64_t i;
            srvw* x = &w[c.tls];
            /* one payload object sent n times: each send hands one reference */
            shared.dtype = 4;
            shared.rank = 1;
            shared_dims[0] = (int64_t)c.size;
            shared.dims = shared_dims;
            shared.data = big;
            shared.size = c.size;
            shared.release = shared_release;
            tfrdv_mgr_find(x->m, c.step, &r, 0);
            tfrdv_mgr_initialize(r, 0, 0);
            for (i = 0; i < c.n; i++) {
                char kb[256];
                tfrdv_parsed_key pk;
                make_key(i, kb, sizeof kb, &pk);
                tfrdv_value_retain(&shared);
                if (tfrdv_send(r, &pk, 0, &shared, 0, 0) != TFRDV_OK) reply = -1;
            }
            tfrdv_unref(r);
        } else if (c.op == C_CLEAN) {
            tfrdv_mgr_cleanup(w[c.tls].m, c.step);
        } else if (c.op == C_MEM) {
            reply = rss_kib();
        } else if (c.op == C_LIVE) {
            tfrdv_grpc_stats s;
            tfrdv_grpc_get_stats(w[c.tls].g, &s);
            reply = (long)s.server_calls_live;
        }
        wr_all(out, &reply, sizeof reply);
    }
    rstop = 1;
    tfrdv_grpc_destroy(w[0].g);
    tfrdv_mgr_destroy(w[0].m);
    if (w[1].g) { tfrdv_grpc_destroy(w[1].g); tfrdv_mgr_destroy(w[1].m); }
    {
        static rtag shut;
        shut.fn = raw_shut;
        grpc_server_shutdown_and_notify(rsrv, rcq, &shut);
        grpc_server_cancel_all_calls(rsrv);
    }
    /* the process exits: the kernel reclaims the rest */
    _exit(0);
}

/* ============================================================================================
   Client process
   ============================================================================================ */
static int to_srv, from_srv;
static long srv(int op, int tls, int64_t step, int64_t n, uint64_t size) {
    bcmd c;
    long r = -1;
    c.op = op;
    c.tls = tls;
    c.step = step;
    c.n = n;
    c.size = size;
    if (!wr_all(to_srv, &c, sizeof c) || !rd_all(from_srv, &r, sizeof r)) return -1;
    return r;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done_count;
static int errors, quiet;
static void signal_done(int ok) {
    pthread_mutex_lock(&mu);
    done_count++;
    if (!ok) errors++;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}
static void wait_done(int target) {
    pthread_mutex_lock(&mu);
    while (done_count < target) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

/* ---- tfrdv client: receiver-chosen memory (the preallocated buffer) ---- */
static tfrdv_value dst_val;
static int64_t dst_dims[1];
static void dst_release(tfrdv_value* v) { (void)v; }
static tfrdv_value* dst_alloc(void* u, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    (void)u;
    if (size > MAXB || rank != 1) return 0;
    memset(&dst_val, 0, sizeof dst_val);
    dst_val.dtype = dtype;
    dst_val.rank = rank;
    dst_dims[0] = dims[0];
    dst_val.dims = dst_dims;
    dst_val.data = big;
    dst_val.size = size;
    dst_val.release = dst_release;
    return &dst_val;
}
static void on_recv(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    (void)u;
    (void)sa;
    (void)ra;
    (void)dead;
    if (st->code != TFRDV_OK && !quiet) fprintf(stderr, "fetch: %s\n", st->msg);
    tfrdv_value_release(v);
    signal_done(st->code == TFRDV_OK || quiet);
}
typedef struct cw { tfrdv_grpc* g; tfrdv_mgr* m; } cw;
static int client_worker(cw* c, int port, const char* certs) {
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_grpc_worker w;
    char addr[64], *ca = 0;
    int ok;
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    w.name = PS;
    w.address = addr;
    gc.workers = &w;
    gc.num_workers = 1;
    gc.num_threads = 1;
    if (certs) {
        ca = slurp(certs, "ca.crt");
        gc.pem_root_certs = ca;
        gc.ssl_target_name_override = "worker.test";
    }
    ok = tfrdv_grpc_create(&gc, &c->g, 0) == TFRDV_OK;
    free(ca);
    mc.worker_name = WK;
    mc.transport = tfrdv_grpc_transport(c->g);
    return ok && tfrdv_mgr_create(&mc, &c->m, 0) == TFRDV_OK && tfrdv_grpc_attach(c->g, c->m, 0) == TFRDV_OK;
}
static int64_t next_step = 1;
static tfrdv_rendezvous* cur_rz;
static int64_t cur_step;
/* the server sends n references of one size-byte payload under keys e0..e(n-1) of a new step */
static void tfrdv_begin(cw* c, int tls, int n, uint64_t size) {
    cur_step = next_step++;
    srv(C_PREP, tls, cur_step, n, size);
    tfrdv_mgr_find(c->m, cur_step, &cur_rz, 0);
    tfrdv_mgr_initialize(cur_rz, 0, 0);
}
/* sequential fetches of keys i0 .. i0+n-1; per-fetch times into t[] (ns) */
static void tfrdv_run(int64_t i0, int n, double* t) {
    tfrdv_args args;
    int i;
    memset(&args, 0, sizeof args);
    args.alloc_fn = dst_alloc;
    for (i = 0; i < n; i++) {
        char kb[256];
        tfrdv_parsed_key pk;
        int64_t t0;
        make_key(i0 + i, kb, sizeof kb, &pk);
        t0 = now_ns();
        pthread_mutex_lock(&mu);
        done_count = 0;
        pthread_mutex_unlock(&mu);
        tfrdv_recv_async(cur_rz, &pk, &args, on_recv, 0, 0);
        wait_done(1);
        t[i] = (double)(now_ns() - t0);
    }
}
static void tfrdv_end(cw* c, int tls) {
    tfrdv_unref(cur_rz);
    tfrdv_mgr_cleanup(c->m, cur_step);
    srv(C_CLEAN, tls, cur_step, 0, 0);
}

/* ---- raw C-core client ---- */
typedef struct raw {
    grpc_channel* ch;
    void* reg;
    grpc_completion_queue* cq;
    pthread_t poller;
} raw;
typedef struct rcall {
    rtag tag;
    grpc_call* call;
    grpc_byte_buffer *req, *resp;
    grpc_metadata_array im, tm;
    grpc_status_code status;
    grpc_slice details;
} rcall;
static void rcall_done(rtag* t, int ok) {
    rcall* c = (rcall*)t;
    size_t i, pos = 0;
    (void)ok;
    if (c->resp && c->resp->data.raw.compression == GRPC_COMPRESS_NONE) { /* walk the slices into the buffer */
        grpc_slice_buffer* sb = &c->resp->data.raw.slice_buffer;
        for (i = 0; i < sb->count; i++) {
            size_t n = GRPC_SLICE_LENGTH(sb->slices[i]);
            if (pos + n <= MAXB) memcpy(big + pos, GRPC_SLICE_START_PTR(sb->slices[i]), n);
            pos += n;
        }
    }
    signal_done(c->status == GRPC_STATUS_OK);
}
static void* rc_poller(void* a) {
    raw* r = (raw*)a;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(r->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
        if (ev.type == GRPC_OP_COMPLETE) ((rtag*)ev.tag)->fn((rtag*)ev.tag, ev.success);
    }
    return 0;
}
static void raw_up(raw* r, int port, const char* certs) {
    char addr[64];
    grpc_arg args[2];
    grpc_channel_args ca;
    grpc_channel_credentials* cr;
    int na = 1;
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    memset(args, 0, sizeof args);
    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = (char*)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[0].value.integer = -1;
    if (certs) {
        char* pem = slurp(certs, "ca.crt");
        cr = grpc_ssl_credentials_create(pem, NULL, NULL, NULL);
        free(pem);
        args[1].type = GRPC_ARG_STRING;
        args[1].key = (char*)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
        args[1].value.string = (char*)"worker.test";
        na = 2;
    } else {
        cr = grpc_insecure_credentials_create();
    }
    ca.num_args = (size_t)na;
    ca.args = args;
    r->ch = grpc_channel_create(addr, cr, &ca);
    grpc_channel_credentials_release(cr);
    r->reg = grpc_channel_register_call(r->ch, RAW_METHOD, NULL, NULL);
    r->cq = grpc_completion_queue_create_for_next(NULL);
    pthread_create(&r->poller, 0, rc_poller, r);
}
static void raw_down(raw* r) {
    grpc_channel_destroy(r->ch);
    grpc_completion_queue_shutdown(r->cq);
    pthread_join(r->poller, 0);
    grpc_completion_queue_destroy(r->cq);
}
static void raw_run(raw* r, int n, uint64_t size, double* t) {
    int i;
    for (i = 0; i < n; i++) {
        rcall c;
        grpc_op ops[6];
        grpc_slice s;
        int64_t t0 = now_ns();
        memset(&c, 0, sizeof c);
        c.tag.fn = rcall_done;
        pthread_mutex_lock(&mu);
        done_count = 0;
        pthread_mutex_unlock(&mu);
        s = grpc_slice_from_copied_buffer((const char*)&size, 8);
        c.req = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        grpc_metadata_array_init(&c.im);
        grpc_metadata_array_init(&c.tm);
        /* the deadline a tfrdv receive without one gets (recv_timeout_ns): both pay gRPC's timer */
        c.call = grpc_channel_create_registered_call(r->ch, NULL, GRPC_PROPAGATE_DEFAULTS, r->cq, r->reg,
                                                     gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos(TFRDV_GRPC_RECV_TIMEOUT_NS, GPR_TIMESPAN)), NULL);
        memset(ops, 0, sizeof ops);
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[1].op = GRPC_OP_SEND_MESSAGE;
        ops[1].data.send_message.send_message = c.req;
        ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[3].data.recv_initial_metadata.recv_initial_metadata = &c.im;
        ops[4].op = GRPC_OP_RECV_MESSAGE;
        ops[4].data.recv_message.recv_message = &c.resp;
        ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
        ops[5].data.recv_status_on_client.trailing_metadata = &c.tm;
        ops[5].data.recv_status_on_client.status = &c.status;
        ops[5].data.recv_status_on_client.status_details = &c.details;
        grpc_call_start_batch(c.call, ops, 6, &c.tag, NULL);
        wait_done(1);
        t[i] = (double)(now_ns() - t0);
        grpc_byte_buffer_destroy(c.req);
        if (c.resp) grpc_byte_buffer_destroy(c.resp);
        grpc_metadata_array_destroy(&c.im);
        grpc_metadata_array_destroy(&c.tm);
        grpc_slice_unref(c.details);
        grpc_call_unref(c.call);
    }
}

/* ---- plain TCP client ---- */
static void tcp_run(int port, int n, uint64_t size, double* t) {
    static int fd = -1;
    int i, one = 1;
    if (fd < 0) {
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)port);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) { perror("connect"); exit(1); }
    }
    for (i = 0; i < n; i++) {
        int64_t t0 = now_ns();
        wr_all(fd, &size, 8);
        rd_all(fd, big, (size_t)size);
        t[i] = (double)(now_ns() - t0);
    }
}

static int cmpd(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y; }
/* median and p99 of t[skip..n) in place */
static void stats(double* t, int n, int skip, double* med, double* p99, double* sum) {
    int i, m = n - skip;
    *sum = 0;
    for (i = skip; i < n; i++) *sum += t[i];
    qsort(t + skip, (size_t)m, sizeof *t, cmpd);
    *med = t[skip + m / 2];
    *p99 = t[skip + (m * 99) / 100 >= n - skip ? m - 1 : (m * 99) / 100];
}

int main(int argc, char** argv) {
    const char* certs = getenv("TFRDV_BENCH_CERTS");
    int a[2], b[2], ports[5], tls, nt;
    pid_t pid;
    char self[1024];
    ssize_t sl;
    static double t1[4000], t2[4000], t3[4000];
    big = (unsigned char*)malloc(MAXB);
    if (!big) return 1;
    memset(big, 0x5a, MAXB); /* touched once: no first-touch cost in any measurement */
    if (certs && !*certs) certs = 0;
    if (argc == 4 && strcmp(argv[1], "--serve") == 0)
        return serve_main(atoi(argv[2]), atoi(argv[3]), certs);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0 || pipe(a) || pipe(b)) return 1;
    self[sl] = 0;
    if ((pid = fork()) == 0) {
        char fa[16], fb[16];
        snprintf(fa, sizeof fa, "%d", a[0]);
        snprintf(fb, sizeof fb, "%d", b[1]);
        execl(self, self, "--serve", fa, fb, (char*)0);
        _exit(127);
    }
    close(a[0]);
    close(b[1]);
    to_srv = a[1];
    from_srv = b[0];
    if (!rd_all(from_srv, ports, sizeof ports) || !ports[0]) { fprintf(stderr, "server did not start\n"); return 1; }
    grpc_init();
    printf("tfrdv_grpc benchmark: two processes on 127.0.0.1, %ld CPUs; tfrdv RecvTensor vs a raw gRPC C-core unary call\n"
           "returning the same bytes (8-byte request; zero-copy reply; the client copies into the same preallocated buffer)\n"
           "and a plain TCP transfer. Sequential, one call in flight, the three interleaved. ratio = tfrdv / baseline.\n\n",
           sysconf(_SC_NPROCESSORS_ONLN));
    nt = certs ? 2 : 1;
    for (tls = 0; tls < nt; tls++) {
        cw c;
        raw r;
        static const uint64_t lat[2] = {1, 4096};
        static const struct { uint64_t size; int n; } thr[3] = {{1u << 20, 100}, {64u << 20, 8}, {256u << 20, 4}};
        int k;
        const char* mode = tls ? "TLS" : "plaintext";
        if (!client_worker(&c, ports[tls], tls ? certs : 0)) { fprintf(stderr, "client setup failed\n"); return 1; }
        raw_up(&r, ports[2 + tls], tls ? certs : 0);
        printf("%s latency (2000 calls after 200 warm-up)      median    p99       raw median  raw p99   ratio (median)\n", mode);
        for (k = 0; k < 2; k++) {
            double m1, p1, s1, m2, p2, s2;
            int n = 2200;
            int i0;
            tfrdv_begin(&c, tls, n, lat[k]);
            for (i0 = 0; i0 < n; i0 += 100) { /* interleaved blocks: both see the same machine load */
                tfrdv_run(i0, 100, t1 + i0);
                raw_run(&r, 100, lat[k], t2 + i0);
            }
            tfrdv_end(&c, tls);
            stats(t1, n, 200, &m1, &p1, &s1);
            stats(t2, n, 200, &m2, &p2, &s2);
            printf("  RecvTensor %5llu B                            %7.1f us %7.1f us  %7.1f us  %7.1f us  %5.2fx (target <= 1.25)\n",
                   (unsigned long long)lat[k], m1 / 1e3, p1 / 1e3, m2 / 1e3, p2 / 1e3, m1 / m2);
        }
        printf("%s throughput (sequential, after 1 warm-up)    tfrdv       raw C-core  ratio  %s\n", mode, tls ? "" : "   TCP         ratio");
        for (k = 0; k < 3; k++) {
            double m1, p1, s1, m2, p2, s2, m3 = 0, p3, s3 = 0;
            int n = thr[k].n + 1;
            if (tls && thr[k].size > (64u << 20)) n = 3;
            int i;
            tfrdv_begin(&c, tls, n, thr[k].size);
            for (i = 0; i < n; i++) { /* interleaved: tfrdv, raw, TCP, tfrdv, ... */
                tfrdv_run(i, 1, t1 + i);
                raw_run(&r, 1, thr[k].size, t2 + i);
                if (!tls) tcp_run(ports[4], 1, thr[k].size, t3 + i);
            }
            tfrdv_end(&c, tls);
            stats(t1, n, 1, &m1, &p1, &s1);
            stats(t2, n, 1, &m2, &p2, &s2);
            if (!tls) stats(t3, n, 1, &m3, &p3, &s3);
            {
                double mb = (double)thr[k].size * (n - 1) / 1048576.0;
                double g1 = mb / (s1 / 1e9), g2 = mb / (s2 / 1e9), g3 = s3 > 0 ? mb / (s3 / 1e9) : 0;
                printf("  %4llu MiB x %-3d                               %7.0f MB/s %7.0f MB/s %5.2fx", (unsigned long long)(thr[k].size >> 20),
                       n - 1, g1, g2, g1 / g2);
                if (!tls) printf("  %7.0f MB/s %5.2fx", g3, g1 / g3);
                printf("%s\n", k == 0 ? "   (target >= 0.8x raw)" : "");
            }
        }
        if (!tls) { /* server memory with 1,000 RecvTensor calls outstanding */
            int64_t step = next_step++, i;
            long before, after, live = 0, cbefore = rss_kib(), cafter;
            tfrdv_rendezvous* rz;
            int64_t t0;
            before = srv(C_MEM, 0, 0, 0, 0);
            tfrdv_mgr_find(c.m, step, &rz, 0);
            tfrdv_mgr_initialize(rz, 0, 0);
            pthread_mutex_lock(&mu);
            done_count = 0;
            pthread_mutex_unlock(&mu);
            for (i = 0; i < 1000; i++) {
                char kb[256];
                tfrdv_parsed_key pk;
                make_key(i, kb, sizeof kb, &pk);
                tfrdv_recv_async(rz, &pk, 0, on_recv, 0, 0);
            }
            t0 = now_ns();
            while ((live = srv(C_LIVE, 0, 0, 0, 0)) < 1000 && now_ns() - t0 < 10000000000LL) {
                struct timespec ts = {0, 10000000};
                nanosleep(&ts, 0);
            }
            after = srv(C_MEM, 0, 0, 0, 0);
            cafter = rss_kib();
            printf("memory with %ld RecvTensor calls outstanding: server RSS +%ld KiB (%.1f KiB per call), client RSS +%ld KiB\n\n",
                   live, after - before, (double)(after - before) / (double)(live ? live : 1), cafter - cbefore);
            tfrdv_unref(rz);
            quiet = 1;
            tfrdv_mgr_cleanup(c.m, step); /* the 1,000 calls are cancelled */
            wait_done(1000);
            quiet = 0;
            srv(C_CLEAN, 0, step, 0, 0);
        } else {
            printf("\n");
        }
        raw_down(&r);
        tfrdv_grpc_destroy(c.g);
        tfrdv_mgr_destroy(c.m);
    }
    if (!certs) printf("(TLS not measured: set TFRDV_BENCH_CERTS, as make bench-grpc does when openssl is installed)\n");
    srv(C_QUIT, 0, 0, 0, 0);
    waitpid(pid, 0, 0);
    grpc_shutdown();
    printf("errors: %d\n", errors);
    return errors != 0;
}
