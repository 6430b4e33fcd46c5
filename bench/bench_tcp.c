/* bench_tcp.c - tfrdv_tcp.h against raw sockets (and tfrdv_grpc.h), two processes, every ratio
   against a baseline measured by this binary in the same run (`make bench-tcp`).
   The process forks a server before it starts any thread. The server hosts
     - three tfrdv workers "/job:ps/replica:0/task:0" (incarnation 42): tfrdv_tcp on 127.0.0.1:0,
       tfrdv_tcp on a Unix socket and, built with TFRDV_BENCH_GRPC, tfrdv_grpc on 127.0.0.1:0. A
       command pipe tells it what to send: n references of one payload under keys e0..e<n-1> of a
       step (the payload is a warm buffer; the transport writes from it);
     - raw servers on the same two socket kinds: a 64-byte request naming a size, answered with a
       32-byte header and the payload in one sendmsg (beyond 4 MiB: 4 MiB pieces), TCP_NODELAY on
       both ends; on Unix sockets SO_SNDBUF 4 MiB on both ends, as tfrdv_tcp sets by default.
   The tfrdv_tcp TCP client has same_host TFRDV_OFF: its rows measure the TCP socket (by default
   a TCP peer on this host moves to a Unix socket; the Unix rows use the default, the ring).
   The client receives every payload into one warm preallocated buffer: the raw client with one
   blocking recvmsg(MSG_WAITALL) into header + buffer, tfrdv through the receiver's alloc hook
   (tfrdv_args.alloc_fn) in tfrdv_recv (the async variants: tfrdv_recv_async, then waiting for the
   callback on a condition variable). Every payload is
   checked byte for byte (large ones after their timed block). Rounds interleave the variants
   (raw TCP, tfrdv_tcp TCP, raw Unix, tfrdv_tcp Unix, tfrdv_grpc, then again), so a change of
   machine load hits subject and baseline alike; ratio = subject's median / baseline's median.
   Placements (sched_setaffinity on every thread of each process): the latency and pipelined rows
   run twice, with both processes on one CPU (one-cpu) and with the client on one CPU and the
   server on another (two-cpus), each against its raw baseline measured in the same placement;
   throughput and memory run unpinned. Exits non-zero only for a wrong answer (a failed or corrupt
   fetch, memory left after destroy), never for a missed target. */
#define _GNU_SOURCE 1 /* sched_setaffinity (here, and for the transport's look at its CPUs) */
#define TFRDV_IMPLEMENTATION
#define TFRDV_TCP_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_tcp.h"
#ifdef TFRDV_BENCH_GRPC
#define TFRDV_GRPC_IMPLEMENTATION
#include "tfrdv_grpc.h"
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function" /* bench_util.h's calibrated loops: not used */
#endif
#include "bench_util.h"
#include <arpa/inet.h>
#include <dirent.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define PS "/job:ps/replica:0/task:0"
#define WK "/job:worker/replica:0/task:0"
#define MAXB ((size_t)256 << 20)
#define PIECE ((size_t)4 << 20) /* raw sender: bytes per sendmsg */
#define MAXK 10000              /* keys e0..e9999 */
#define LAT_ROUNDS 20
#define LAT_BLOCK 100 /* sequential fetches per variant per round, back to back */
#define THR_ROUNDS 15 /* at most; 1 MiB uses all (its transfers are bimodal), 256 MiB 5 */
#define PIPE_N 10000 /* fetches per pipelined block */
#define PIPE_DEPTH 64
#define PIPE_ROUNDS 5
#define MEM_CALLS 1000
#define WAIT_NS 60000000000LL /* any wait longer than this is a wrong answer */

enum { K_TCP, K_UNIX, K_GRPC, NK };
/* variants: tfrdv ones wait in tfrdv_recv (which lends the thread to tfrdv_tcp: it reads the
   response itself); the async ones (latency only, no target) post tfrdv_recv_async and wait for
   the callback, which the client's I/O thread runs: one thread hand-off more per fetch */
enum { V_RAW_TCP, V_TCP, V_RAW_UNIX, V_UNIX, V_GRPC, V_TCP_ASYNC, V_UNIX_ASYNC, NV };
static const char* vname[NV] = {"raw TCP",        "tfrdv_tcp TCP",       "raw Unix",           "tfrdv_tcp Unix",
                                "tfrdv_grpc TCP", "tfrdv_tcp TCP async", "tfrdv_tcp Unix async"};
static const int vkind[NV] = {-1, K_TCP, -1, K_UNIX, K_GRPC, K_TCP, K_UNIX}; /* the server's worker */
#ifdef TFRDV_BENCH_GRPC
#define HAVE_GRPC 1
#else
#define HAVE_GRPC 0
#endif

static unsigned char* pat; /* MAXB bytes of pattern: the server's payload, the client's reference */
static unsigned char* dst; /* MAXB bytes: the client's destination (warm) */
static char unix_tfrdv[108], unix_raw[108];

/* Moves every byte of iov[0..n) (consumed): out = send, else receive; sock: sendmsg
   (MSG_NOSIGNAL) / recvmsg (MSG_WAITALL), else writev / readv (the command pipes). */
static int io_all(int fd, struct iovec* iov, int n, int out, int sock) {
    while (n > 0) {
        struct msghdr m;
        ssize_t r;
        memset(&m, 0, sizeof m);
        m.msg_iov = iov;
        m.msg_iovlen = (size_t)n;
        if (sock) r = out ? sendmsg(fd, &m, MSG_NOSIGNAL) : recvmsg(fd, &m, MSG_WAITALL);
        else r = out ? writev(fd, iov, n) : readv(fd, iov, n);
        if (r <= 0) return 0;
        while (n > 0 && (size_t)r >= iov->iov_len) { r -= (ssize_t)iov->iov_len; iov++; n--; }
        if (n > 0) { iov->iov_base = (char*)iov->iov_base + r; iov->iov_len -= (size_t)r; }
    }
    return 1;
}
static int io_buf(int fd, void* p, size_t len, int out, int sock) {
    struct iovec v;
    v.iov_base = p;
    v.iov_len = len;
    return io_all(fd, &v, 1, out, sock);
}
static void sock_opts(int fd, int is_unix) {
    int one = 1, buf = 4 << 20;
    if (is_unix) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    else setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}
static void make_key(int64_t i, char* buf, size_t cap, tfrdv_parsed_key* pk) {
    char edge[32];
    size_t len;
    tfrdv_frame_iter top = {0, 0};
    snprintf(edge, sizeof edge, "e%lld", (long long)i);
    if (tfrdv_key_create(PS "/device:CPU:0", 42, WK "/device:CPU:0", edge, top, buf, cap, &len, 0) != TFRDV_OK ||
        tfrdv_key_parse(buf, len, pk, 0) != TFRDV_OK)
        bu_die("key");
}

/* ---- placement ---- */
#include "bench_pin.h"

/* ============================================================================================
   Server process
   ============================================================================================ */
typedef struct payload { tfrdv_value v; int64_t dims[1]; } payload;
static void payload_free(tfrdv_value* v) { free(v); } /* the struct; the bytes are pat's */

static void* raw_conn(void* a) {
    int fd = (int)(intptr_t)a;
    unsigned char req[64], hdr[32];
    uint64_t size;
    while (io_buf(fd, req, sizeof req, 0, 1)) {
        struct iovec iov[2];
        size_t first, off;
        memcpy(&size, req, 8);
        if (size > MAXB) break;
        memset(hdr, 0, sizeof hdr);
        memcpy(hdr, &size, 8);
        first = size < PIECE ? (size_t)size : PIECE;
        iov[0].iov_base = hdr;
        iov[0].iov_len = sizeof hdr;
        iov[1].iov_base = pat;
        iov[1].iov_len = first;
        if (!io_all(fd, iov, 2, 1, 1)) break;
        for (off = first; off < size; off += PIECE) {
            iov[0].iov_base = pat + off;
            iov[0].iov_len = size - off < PIECE ? (size_t)(size - off) : PIECE;
            if (!io_all(fd, iov, 1, 1, 1)) break;
        }
    }
    close(fd);
    return 0;
}
typedef struct acceptor { int fd, is_unix; } acceptor;
static void* raw_accept(void* a) {
    acceptor* ac = (acceptor*)a;
    for (;;) {
        int fd = accept(ac->fd, 0, 0);
        pthread_t t;
        if (fd < 0) break;
        sock_opts(fd, ac->is_unix);
        if (pthread_create(&t, 0, raw_conn, (void*)(intptr_t)fd) != 0) close(fd);
        else pthread_detach(t);
    }
    return 0;
}
static int raw_listen(int is_unix, int* port) {
    struct sockaddr_in a;
    struct sockaddr_un u;
    socklen_t al = sizeof a;
    int one = 1, fd = socket(is_unix ? AF_UNIX : AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (is_unix) {
        memset(&u, 0, sizeof u);
        u.sun_family = AF_UNIX;
        snprintf(u.sun_path, sizeof u.sun_path, "%s", unix_raw);
        unlink(unix_raw);
        if (bind(fd, (struct sockaddr*)&u, sizeof u) != 0) return -1;
    } else {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr*)&a, &al) != 0) return -1;
        *port = ntohs(a.sin_port);
    }
    return listen(fd, 16) == 0 ? fd : -1;
}

typedef struct side { /* a tfrdv worker: manager and transport */
    tfrdv_mgr* m;
    tfrdv_tcp* t;
#ifdef TFRDV_BENCH_GRPC
    tfrdv_grpc* g;
#endif
} side;
enum { C_PREP = 1, C_CLEAN, C_LIVE, C_PIN, C_QUIT };
typedef struct bcmd { int op, kind; int64_t step, n; uint64_t size; } bcmd;
typedef struct hello { int ok, tcp_port, grpc_port, raw_port; } hello;

static int server_side(side* s, int kind, const char* listen) {
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_status st;
    memset(s, 0, sizeof *s);
    mc.worker_name = PS;
    mc.incarnation = 42;
    if (kind == K_GRPC) {
#ifdef TFRDV_BENCH_GRPC
        tfrdv_grpc_config gc = tfrdv_grpc_config_init();
        gc.listen_address = listen;
        gc.recv_tensor_queue_depth = MEM_CALLS;
        if (tfrdv_grpc_create(&gc, &s->g, &st) != TFRDV_OK) return fprintf(stderr, "server: %s\n", st.msg), 0;
        mc.transport = tfrdv_grpc_transport(s->g);
        return tfrdv_mgr_create(&mc, &s->m, &st) == TFRDV_OK && tfrdv_grpc_attach(s->g, s->m, &st) == TFRDV_OK;
#endif
    } else {
        tfrdv_tcp_config tc = tfrdv_tcp_config_init();
        tc.listen_address = listen;
        if (tfrdv_tcp_create(&tc, &s->t, &st) != TFRDV_OK) return fprintf(stderr, "server: %s\n", st.msg), 0;
        mc.transport = tfrdv_tcp_transport(s->t);
        if (tfrdv_mgr_create(&mc, &s->m, &st) == TFRDV_OK && tfrdv_tcp_attach(s->t, s->m, &st) == TFRDV_OK) return 1;
    }
    fprintf(stderr, "server: %s\n", st.msg);
    return 0;
}
static void side_destroy(side* s) {
    if (s->t) tfrdv_tcp_destroy(s->t);
#ifdef TFRDV_BENCH_GRPC
    if (s->g) tfrdv_grpc_destroy(s->g);
#endif
    if (s->m) tfrdv_mgr_destroy(s->m);
    memset(s, 0, sizeof *s);
}

static int serve_main(int in, int out) {
    side w[NK];
    hello h;
    acceptor ac[2];
    pthread_t at[2];
    bcmd c;
    char addr[128];
    int i;
    signal(SIGPIPE, SIG_IGN);
    memset(&h, 0, sizeof h);
    memset(w, 0, sizeof w);
    snprintf(addr, sizeof addr, "unix:%s", unix_tfrdv);
    h.ok = server_side(&w[K_TCP], K_TCP, "127.0.0.1:0") && server_side(&w[K_UNIX], K_UNIX, addr) &&
           (!HAVE_GRPC || server_side(&w[K_GRPC], K_GRPC, "127.0.0.1:0"));
    if (h.ok) {
        h.tcp_port = tfrdv_tcp_port(w[K_TCP].t);
#ifdef TFRDV_BENCH_GRPC
        h.grpc_port = tfrdv_grpc_port(w[K_GRPC].g);
#endif
        for (i = 0; i < 2; i++) {
            ac[i].is_unix = i;
            ac[i].fd = raw_listen(i, &h.raw_port);
            if (ac[i].fd < 0 || pthread_create(&at[i], 0, raw_accept, &ac[i]) != 0) h.ok = 0;
        }
    }
    io_buf(out, &h, sizeof h, 1, 0);
    while (h.ok && io_buf(in, &c, sizeof c, 0, 0) && c.op != C_QUIT) {
        long reply = 0;
        tfrdv_status st;
        if (c.op == C_PREP) { /* n references of one payload, keys e0..e<n-1> of step c.step */
            tfrdv_rendezvous* r;
            payload* p = (payload*)calloc(1, sizeof *p);
            int64_t k;
            if (!p || tfrdv_mgr_start_step(w[c.kind].m, c.step, &r, &st) != TFRDV_OK) bu_die("server: prepare");
            p->dims[0] = (int64_t)c.size;
            p->v.dtype = 4; /* DT_UINT8 */
            p->v.rank = 1;
            p->v.dims = p->dims;
            p->v.data = pat;
            p->v.size = c.size;
            p->v.release = payload_free;
            for (k = 0; k < c.n; k++) {
                char kb[256];
                tfrdv_parsed_key pk;
                make_key(k, kb, sizeof kb, &pk);
                tfrdv_value_retain(&p->v);
                if (tfrdv_send(r, &pk, 0, &p->v, 0, &st) != TFRDV_OK) {
                    tfrdv_value_release(&p->v);
                    reply = -1;
                }
            }
            tfrdv_value_release(&p->v);
            tfrdv_unref(r);
        } else if (c.op == C_CLEAN) {
            tfrdv_mgr_cleanup(w[c.kind].m, c.step);
        } else if (c.op == C_PIN) {
            reply = pin_process((int)c.n);
        } else if (c.op == C_LIVE) {
            tfrdv_tcp_stats s;
            tfrdv_tcp_get_stats(w[c.kind].t, &s);
            reply = (long)s.server_requests_live;
        }
        if (!io_buf(out, &reply, sizeof reply, 1, 0)) break;
    }
    for (i = 0; i < NK; i++) side_destroy(&w[i]);
    unlink(unix_raw);
    _exit(0); /* the raw threads go with the process */
}

/* ============================================================================================
   Client process
   ============================================================================================ */
static int to_srv, from_srv;
static int have(int v) { return v != V_GRPC || HAVE_GRPC; }
static int async(int v) { return v >= V_TCP_ASYNC; }
static long srv(int op, int kind, int64_t step, int64_t n, uint64_t size) {
    bcmd c;
    long r = -1;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.kind = kind;
    c.step = step;
    c.n = n;
    c.size = size;
    if (!io_buf(to_srv, &c, sizeof c, 1, 0) || !io_buf(from_srv, &r, sizeof r, 0, 0)) bu_die("the server process is gone");
    if (r < 0) bu_die("the server could not send its values");
    return r;
}

/* completions: counted under mu; a fetch's memory is a slot (alloc hook), free slots on a stack */
typedef struct slot {
    tfrdv_value v;
    int64_t dims[1];
    unsigned char* mem;
    uint64_t want;
    int pooled; /* goes back on free_slots when done */
    struct slot* next;
} slot;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long done_n, errors;
static slot* free_slots;

static tfrdv_value* slot_alloc(void* u, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    slot* s = (slot*)u;
    if (rank != 1 || size != s->want) return 0;
    memset(&s->v, 0, sizeof s->v);
    s->v.dtype = dtype;
    s->v.rank = rank;
    s->dims[0] = dims[0];
    s->v.dims = s->dims;
    s->v.data = s->mem;
    s->v.size = size;
    return &s->v; /* no release hook: the memory stays */
}
static void on_recv(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    slot* s = (slot*)u;
    int ok = st->code == TFRDV_OK && v && !dead && v->dtype == 4 && v->size == s->want;
    (void)sa;
    (void)ra;
    if (ok && s->want <= 65536) ok = memcmp(v->data, pat, (size_t)s->want) == 0; /* larger: after the block */
    if (!ok) fprintf(stderr, "bench: fetch of %llu B: %s %s\n", (unsigned long long)s->want, tfrdv_code_str(st->code), st->msg);
    tfrdv_value_release(v);
    pthread_mutex_lock(&mu);
    done_n++;
    errors += !ok;
    if (s->pooled) {
        s->next = free_slots;
        free_slots = s;
    }
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}
/* waits (mu held) until cond; too long is a wrong answer */
static void wait_mu(const long* n, long want, slot* const* avail) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_NS / 1000000000;
    while (avail ? !*avail : *n < want)
        if (pthread_cond_timedwait(&cv, &mu, &until) != 0) bu_die("no answer within 60 s");
}

static side cs[NK];        /* the client's workers, one per transport */
static side* side_of(int v) { return &cs[vkind[v]]; }
static int raw_fd[2] = {-1, -1};
static int64_t next_step = 1;
static struct { char buf[160]; tfrdv_parsed_key pk; } keys[MAXK];

static int client_side(side* s, int kind, const char* addr, const tfrdv_hooks* hooks) {
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_status st;
    memset(s, 0, sizeof *s);
    mc.worker_name = WK;
    if (hooks) mc.hooks = *hooks;
    if (kind == K_GRPC) {
#ifdef TFRDV_BENCH_GRPC
        tfrdv_grpc_config gc = tfrdv_grpc_config_init();
        tfrdv_grpc_worker w;
        w.name = PS;
        w.address = addr;
        gc.workers = &w;
        gc.num_workers = 1;
        if (tfrdv_grpc_create(&gc, &s->g, &st) != TFRDV_OK) return fprintf(stderr, "client: %s\n", st.msg), 0;
        mc.transport = tfrdv_grpc_transport(s->g);
        if (tfrdv_mgr_create(&mc, &s->m, &st) == TFRDV_OK && tfrdv_grpc_attach(s->g, s->m, &st) == TFRDV_OK) return 1;
#endif
    } else {
        tfrdv_tcp_config tc = tfrdv_tcp_config_init();
        tfrdv_tcp_worker w;
        w.name = PS;
        w.address = addr;
        tc.workers = &w;
        tc.num_workers = 1;
        if (kind == K_TCP) tc.same_host = TFRDV_OFF; /* the TCP socket itself: on 127.0.0.1 the
                                                        default moves to a Unix socket (SAME HOST,
                                                        bench_samehost's rows) */
        if (hooks) tc.hooks = *hooks;
        if (tfrdv_tcp_create(&tc, &s->t, &st) != TFRDV_OK) return fprintf(stderr, "client: %s\n", st.msg), 0;
        mc.transport = tfrdv_tcp_transport(s->t);
        if (tfrdv_mgr_create(&mc, &s->m, &st) == TFRDV_OK) return 1;
    }
    fprintf(stderr, "client: %s\n", st.msg);
    return 0;
}
static int raw_connect(int is_unix, int port) {
    struct sockaddr_in a;
    struct sockaddr_un u;
    int fd = socket(is_unix ? AF_UNIX : AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sock_opts(fd, is_unix);
    if (is_unix) {
        memset(&u, 0, sizeof u);
        u.sun_family = AF_UNIX;
        snprintf(u.sun_path, sizeof u.sun_path, "%s", unix_raw);
        if (connect(fd, (struct sockaddr*)&u, sizeof u) == 0) return fd;
    } else {
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)port);
        if (connect(fd, (struct sockaddr*)&a, sizeof a) == 0) return fd;
    }
    close(fd);
    return -1;
}
static void raw_fetch(int fd, uint64_t size) {
    unsigned char req[64], hdr[32];
    struct iovec iov[2];
    uint64_t got;
    memset(req, 0, sizeof req);
    memcpy(req, &size, 8);
    iov[0].iov_base = req;
    iov[0].iov_len = sizeof req;
    if (!io_all(fd, iov, 1, 1, 1)) bu_die("raw request");
    iov[0].iov_base = hdr;
    iov[0].iov_len = sizeof hdr;
    iov[1].iov_base = dst;
    iov[1].iov_len = (size_t)size;
    if (!io_all(fd, iov, 2, 0, 1)) bu_die("raw reply");
    memcpy(&got, hdr, 8);
    if (got != size) bu_die("raw reply: wrong size");
}

/* One variant's share of a round: n sequential fetches of size bytes (tfrdv: a step whose keys
   e0..e<n-1> the server has sent). */
typedef struct blk {
    int v;
    uint64_t size;
    int64_t step;
    tfrdv_rendezvous* r;
    slot s;
} blk;
static void blk_begin(blk* b, int v, uint64_t size, int n) {
    int k = vkind[v];
    memset(b, 0, sizeof *b);
    b->v = v;
    b->size = size;
    b->s.mem = dst;
    b->s.want = size;
    if (k < 0) return;
    b->step = next_step++;
    srv(C_PREP, k, b->step, n, size);
    if (tfrdv_mgr_start_step(side_of(v)->m, b->step, &b->r, 0) != TFRDV_OK) bu_die("client step");
}
/* fetch i; returns its ns. Every payload is checked (outside the time): one above 64 KiB has
   its first, middle and last byte spoiled before and is compared whole after. */
static double blk_fetch(blk* b, int i) {
    size_t n = (size_t)b->size;
    int64_t t0;
    if (n > 65536) dst[0] = dst[n / 2] = dst[n - 1] = (unsigned char)~pat[n - 1];
    t0 = bu_now();
    if (vkind[b->v] < 0) {
        raw_fetch(raw_fd[b->v == V_RAW_UNIX], b->size);
    } else {
        tfrdv_args a;
        memset(&a, 0, sizeof a);
        a.alloc_fn = slot_alloc;
        a.alloc_user = &b->s;
        pthread_mutex_lock(&mu);
        done_n = 0;
        pthread_mutex_unlock(&mu);
        if (async(b->v)) {
            if (tfrdv_recv_async(b->r, &keys[i].pk, &a, on_recv, &b->s, 0) != TFRDV_OK) bu_die("recv_async");
        } else {
            tfrdv_value* v = 0;
            int dead = 0;
            tfrdv_status st;
            (void)tfrdv_recv(b->r, &keys[i].pk, &a, WAIT_NS, &v, &dead, &st);
            on_recv(&b->s, &st, 0, 0, v, dead); /* the same checks; counts the completion */
        }
        pthread_mutex_lock(&mu);
        wait_mu(&done_n, 1, 0);
        pthread_mutex_unlock(&mu);
    }
    t0 = bu_now() - t0;
    if ((vkind[b->v] < 0 || n > 65536) && memcmp(dst, pat, n) != 0) { /* smaller tfrdv: on_recv checked */
        fprintf(stderr, "bench: %s: %llu B arrived wrong\n", vname[b->v], (unsigned long long)b->size);
        errors++;
    }
    return (double)t0;
}
static void blk_end(blk* b) {
    int k = vkind[b->v];
    if (k < 0) return;
    tfrdv_unref(b->r);
    tfrdv_mgr_cleanup(side_of(b->v)->m, b->step);
    srv(C_CLEAN, k, b->step, 0, 0);
}
/* One round: n fetches of every variant; t[v][i] = ns of variant v's fetch i. by_fetch (the
   throughput rounds, no async variants): the variants take turns fetch by fetch (the order
   rotating); else each makes its n fetches back to back (a ping-pong in its own steady rhythm),
   the first variant rotating from round to round. */
static void run_round(uint64_t size, int n, double* t[NV], int by_fetch, int round) {
    blk b[NV];
    int i, j, v, nv = by_fetch ? V_TCP_ASYNC : NV;
    for (v = 0; v < nv; v++)
        if (have(v)) blk_begin(&b[v], v, size, n);
    for (j = 0; j < nv; j++)
        for (i = 0; i < n; i++) {
            v = by_fetch ? (i + j) % nv : (round + j) % nv;
            if (have(v)) t[v][i] = blk_fetch(&b[v], i);
        }
    for (v = 0; v < nv; v++)
        if (have(v)) blk_end(&b[v]);
}
/* PIPE_N fetches of 4 KiB with PIPE_DEPTH in flight; calls per second */
static double run_pipelined(int k) {
    static slot sl[PIPE_DEPTH];
    int64_t step = next_step++, t0;
    tfrdv_rendezvous* r;
    int i;
    srv(C_PREP, k, step, PIPE_N, 4096);
    if (tfrdv_mgr_start_step(cs[k].m, step, &r, 0) != TFRDV_OK) bu_die("client step");
    pthread_mutex_lock(&mu);
    free_slots = 0;
    for (i = 0; i < PIPE_DEPTH; i++) {
        sl[i].mem = dst + (size_t)i * 4096;
        sl[i].want = 4096;
        sl[i].pooled = 1;
        sl[i].next = free_slots;
        free_slots = &sl[i];
    }
    done_n = 0;
    pthread_mutex_unlock(&mu);
    t0 = bu_now();
    for (i = 0; i < PIPE_N; i++) {
        tfrdv_args a;
        slot* s;
        pthread_mutex_lock(&mu);
        wait_mu(0, 0, &free_slots);
        s = free_slots;
        free_slots = s->next;
        pthread_mutex_unlock(&mu);
        memset(&a, 0, sizeof a);
        a.alloc_fn = slot_alloc;
        a.alloc_user = s;
        if (tfrdv_recv_async(r, &keys[i].pk, &a, on_recv, s, 0) != TFRDV_OK) bu_die("recv_async");
    }
    pthread_mutex_lock(&mu);
    wait_mu(&done_n, PIPE_N, 0);
    pthread_mutex_unlock(&mu);
    t0 = bu_now() - t0;
    tfrdv_unref(r);
    tfrdv_mgr_cleanup(cs[k].m, step);
    srv(C_CLEAN, k, step, 0, 0);
    return (double)PIPE_N * 1e9 / (double)t0;
}

/* The raw baseline of the pipelined rows: PIPE_N fetches of 4 KiB, PIPE_DEPTH requests in flight
   on one raw connection, the responses read in batches (recv into a 64 KiB buffer, every whole
   response in it parsed and its payload copied to its slot), each batch's completions answered
   by one send of as many new requests; calls per second */
static double run_pipelined_raw(int is_unix) {
    static unsigned char rb[65536], req[PIPE_DEPTH * 64];
    int fd = raw_fd[is_unix], i;
    long sent = PIPE_DEPTH, got = 0;
    size_t have = 0;
    int64_t t0;
    memset(req, 0, sizeof req);
    for (i = 0; i < PIPE_DEPTH; i++) {
        uint64_t sz = 4096;
        memcpy(req + (size_t)i * 64, &sz, 8);
    }
    memset(dst, 0, (size_t)PIPE_DEPTH * 4096);
    t0 = bu_now();
    if (!io_buf(fd, req, sizeof req, 1, 1)) bu_die("raw pipelined request");
    while (got < PIPE_N) {
        ssize_t n = recv(fd, rb + have, sizeof rb - have, 0);
        size_t off = 0;
        long k = 0;
        if (n <= 0) bu_die("raw pipelined reply");
        have += (size_t)n;
        while (have - off >= 32 + 4096) {
            uint64_t sz;
            memcpy(&sz, rb + off, 8);
            if (sz != 4096) bu_die("raw pipelined reply: wrong size");
            memcpy(dst + (size_t)(got % PIPE_DEPTH) * 4096, rb + off + 32, 4096);
            off += 32 + 4096;
            got++;
            k++;
        }
        memmove(rb, rb + off, have - off);
        have -= off;
        if (k > PIPE_N - sent) k = PIPE_N - sent;
        if (k > 0 && !io_buf(fd, req, (size_t)k * 64, 1, 1)) bu_die("raw pipelined request");
        sent += k;
    }
    t0 = bu_now() - t0;
    for (i = 0; i < PIPE_DEPTH; i++)
        if (memcmp(dst + (size_t)i * 4096, pat, 4096) != 0) {
            fprintf(stderr, "bench: raw pipelined: 4 KiB arrived wrong\n");
            errors++;
        }
    return (double)PIPE_N * 1e9 / (double)t0;
}

/* ---- counting allocator shared by two threads (the caller and the transport's I/O thread) ---- */
typedef struct lcount { pthread_mutex_t mu; bu_counter c; } lcount;
static void* lc_alloc(void* u, size_t n) {
    lcount* l = (lcount*)u;
    void* p;
    pthread_mutex_lock(&l->mu);
    p = bu_count_alloc(&l->c, n);
    pthread_mutex_unlock(&l->mu);
    return p;
}
static void lc_free(void* u, void* p, size_t n) {
    lcount* l = (lcount*)u;
    pthread_mutex_lock(&l->mu);
    bu_count_free(&l->c, p, n);
    pthread_mutex_unlock(&l->mu);
}
static void lc_get(lcount* l, bu_counter* out) {
    pthread_mutex_lock(&l->mu);
    *out = l->c;
    pthread_mutex_unlock(&l->mu);
}

/* ---- placements and reporting ---- */
enum { P_ONE, P_TWO, P_ANY };
static const char* pname[] = {"one-cpu", "two-cpus", "unpinned"};
static int cpu_a = -1, cpu_b = -1; /* the first two CPUs this process may run on */
static int placement = P_ANY;
/* both processes where p says; 0 if the system refused (then nothing is pinned) */
static int place(int p) {
    int ok;
    placement = p;
    if (p == P_ANY) return srv(C_PIN, 0, 0, -1, 0) & pin_process(-1);
    ok = srv(C_PIN, 0, 0, p == P_ONE ? cpu_a : cpu_b, 0) && pin_process(cpu_a);
    if (!ok) {
        place(P_ANY);
        placement = P_ANY;
    }
    return ok;
}
/* a TARGET line for the placement now (a ratio) and the verdict */
static int target(const char* name, double fig, double base, int le, double goal) {
    return bu_target(name, pname[placement], fig / base, le ? "<=" : ">=", goal);
}
static double pct(double* v, int n, double p) { /* sorts v */
    int i;
    qsort(v, (size_t)n, sizeof *v, bu_cmp_double);
    i = (int)(p * (double)n);
    return v[i < n ? i : n - 1];
}

static double lat[NV][LAT_ROUNDS * LAT_BLOCK];

static void latency(uint64_t size) {
    double med[NV], p99[NV], *t[NV];
    char name[64], val[48], base[24], tname[64];
    int v, r;
    const char* sz = size == 1 ? "1B" : "4KiB";
    for (v = 0; v < NV; v++) t[v] = lat[v];
    run_round(size, LAT_BLOCK, t, 0, 0); /* warm-up: connections, free lists, caches */
    for (r = 0; r < LAT_ROUNDS; r++) {
        for (v = 0; v < NV; v++) t[v] = lat[v] + r * LAT_BLOCK;
        run_round(size, LAT_BLOCK, t, 0, r);
    }
    for (v = 0; v < NV; v++) {
        if (!have(v)) continue;
        med[v] = pct(lat[v], LAT_ROUNDS * LAT_BLOCK, 0.5) / 1e3;
        p99[v] = pct(lat[v], LAT_ROUNDS * LAT_BLOCK, 0.99) / 1e3;
    }
    for (v = 0; v < NV; v++) {
        int b = v == V_TCP ? V_RAW_TCP : v == V_UNIX ? V_RAW_UNIX : -1, m;
        if (!have(v)) continue;
        snprintf(name, sizeof name, "fetch %s, %s, median", size == 1 ? "1 B" : "4 KiB", vname[v]);
        snprintf(val, sizeof val, "%.1f us", med[v]);
        if (b < 0) {
            snprintf(val, sizeof val, "%.1f us (p99 %.1f)", med[v], p99[v]);
            b = async(v) ? (vkind[v] == K_TCP ? V_RAW_TCP : V_RAW_UNIX) : -1;
            if (b >= 0) snprintf(base, sizeof base, "%.1f us", med[b]);
            bu_row(name, val, b >= 0 ? base : 0, b >= 0 ? med[v] / med[b] : 0, 0, -1);
            continue;
        }
        snprintf(base, sizeof base, "%.1f us", med[b]);
        snprintf(tname, sizeof tname, "%s_fetch_%s_blocking_median_vs_raw", v == V_TCP ? "tcp" : "unix", sz);
        m = target(tname, med[v], med[b], 1, 2.0);
        bu_row(name, val, base, med[v] / med[b], "<= 2x", m);
        snprintf(name, sizeof name, "fetch %s, %s, p99", size == 1 ? "1 B" : "4 KiB", vname[v]);
        snprintf(val, sizeof val, "%.1f us", p99[v]);
        snprintf(base, sizeof base, "%.1f us", p99[b]);
        snprintf(tname, sizeof tname, "%s_fetch_%s_blocking_p99_vs_raw", v == V_TCP ? "tcp" : "unix", sz);
        m = target(tname, p99[v], p99[b], 1, 2.0);
        bu_row(name, val, base, p99[v] / p99[b], "<= 2x", m);
    }
    if (HAVE_GRPC) {
        int m;
        snprintf(name, sizeof name, "fetch %s, tfrdv_tcp TCP vs grpc, median", size == 1 ? "1 B" : "4 KiB");
        snprintf(val, sizeof val, "%.1f us", med[V_TCP]);
        snprintf(base, sizeof base, "%.1f us", med[V_GRPC]);
        snprintf(tname, sizeof tname, "tcp_fetch_%s_blocking_median_vs_grpc", sz);
        m = target(tname, med[V_TCP], med[V_GRPC], 1, 0.25);
        bu_row(name, val, base, med[V_TCP] / med[V_GRPC], "<= 0.25x", m);
    }
}

static void throughput(uint64_t size, int n, int rounds, double goal) {
    double gbs[NV][THR_ROUNDS], med[NV], tt[NV][64], *t[NV];
    char name[64], val[32], base[32], tname[64], tg[16];
    int v, r, i;
    for (v = 0; v < NV; v++) t[v] = tt[v];
    run_round(size, 1, t, 1, 0); /* warm-up */
    for (r = 0; r < rounds; r++) {
        run_round(size, n, t, 1, r);
        for (v = 0; v < V_TCP_ASYNC; v++) {
            double sum = 0;
            if (!have(v)) continue;
            for (i = 0; i < n; i++) sum += t[v][i];
            gbs[v][r] = (double)size * n / sum; /* bytes per ns = GB/s */
        }
    }
    for (v = 0; v < V_TCP_ASYNC; v++)
        if (have(v)) med[v] = bu_median(gbs[v], rounds);
    snprintf(tg, sizeof tg, ">= %.1fx", goal);
    for (v = 0; v < V_TCP_ASYNC; v++) {
        int b = v == V_TCP || v == V_GRPC ? V_RAW_TCP : v == V_UNIX ? V_RAW_UNIX : -1;
        if (!have(v)) continue;
        snprintf(name, sizeof name, "%llu MiB x %d, %s", (unsigned long long)(size >> 20), n, vname[v]);
        snprintf(val, sizeof val, "%.2f GB/s", med[v]);
        if (b < 0) {
            bu_row(name, val, 0, 0, 0, -1);
            continue;
        }
        snprintf(base, sizeof base, "%.2f GB/s", med[b]);
        if (v == V_GRPC) {
            bu_row(name, val, base, med[v] / med[b], 0, -1);
            continue;
        }
        snprintf(tname, sizeof tname, "%s_throughput_%lluMiB_vs_raw", v == V_TCP ? "tcp" : "unix", (unsigned long long)(size >> 20));
        bu_row(name, val, base, med[v] / med[b], tg, target(tname, med[v], med[b], 0, goal));
    }
}

/* the tfrdv transports against the raw client that batches its reads (per socket kind) */
static void pipelined(void) {
    double cps[NK + 2][PIPE_ROUNDS], med[NK + 2];
    char name[64], val[32], base[32];
    int k, r;
    memset(med, 0, sizeof med);
    for (k = 0; k < NK + 2; k++) /* warm-up; NK, NK + 1: raw TCP, raw Unix */
        if (k >= NK ? 1 : have(k == K_GRPC ? V_GRPC : V_TCP)) (void)(k >= NK ? run_pipelined_raw(k - NK) : run_pipelined(k));
    for (r = 0; r < PIPE_ROUNDS; r++)
        for (k = 0; k < NK + 2; k++)
            if (k >= NK ? 1 : have(k == K_GRPC ? V_GRPC : V_TCP))
                cps[k][r] = k >= NK ? run_pipelined_raw(k - NK) : run_pipelined(k);
    for (k = 0; k < NK + 2; k++)
        if (k >= NK || have(k == K_GRPC ? V_GRPC : V_TCP)) med[k] = bu_median(cps[k], PIPE_ROUNDS);
    for (k = 0; k < NK; k++) {
        int b = k == K_UNIX ? NK + 1 : NK;
        if (!have(k == K_GRPC ? V_GRPC : V_TCP)) continue;
        snprintf(name, sizeof name, "%d x 4 KiB in flight, raw %s, batched", PIPE_DEPTH, k == K_UNIX ? "Unix" : "TCP");
        snprintf(val, sizeof val, "%.0f calls/s", med[b]);
        if (k != K_GRPC) bu_row(name, val, 0, 0, 0, -1);
        snprintf(name, sizeof name, "%d x 4 KiB in flight, %s", PIPE_DEPTH, vname[k == K_TCP ? V_TCP : k == K_UNIX ? V_UNIX : V_GRPC]);
        snprintf(val, sizeof val, "%.0f calls/s", med[k]);
        snprintf(base, sizeof base, "%.0f/s", med[b]);
        if (k == K_TCP)
            bu_row(name, val, base, med[k] / med[b], ">= 0.8x", target("tcp_64x4KiB_in_flight_vs_raw_batched", med[k], med[b], 0, 0.8));
        else
            bu_row(name, val, base, med[k] / med[b], 0, -1);
    }
    if (HAVE_GRPC) {
        snprintf(val, sizeof val, "%.0f calls/s", med[K_TCP]);
        snprintf(base, sizeof base, "%.0f/s", med[K_GRPC]);
        bu_row("64 x 4 KiB in flight, tfrdv_tcp TCP vs grpc", val, base, med[K_TCP] / med[K_GRPC], 0, -1);
    }
}

/* client memory (manager + transport, counting allocator) with MEM_CALLS fetches outstanding */
static void memory(int tcp_port) {
    static lcount lc;
    static slot sl[MEM_CALLS];
    tfrdv_hooks h;
    side s;
    bu_counter before, during, after;
    tfrdv_rendezvous* r;
    tfrdv_tcp_stats ts;
    char addr[64], val[48];
    int64_t step = next_step++, t0;
    long live = 0;
    int i, m;
    memset(&h, 0, sizeof h);
    pthread_mutex_init(&lc.mu, 0);
    h.allocator.alloc_fn = lc_alloc;
    h.allocator.free_fn = lc_free;
    h.allocator.user = &lc;
    snprintf(addr, sizeof addr, "127.0.0.1:%d", tcp_port);
    if (!client_side(&s, K_TCP, addr, &h)) bu_die("memory: client");
    { /* one fetch first: the connection is open and the manager warm */
        side keep = cs[K_TCP];
        blk b;
        cs[K_TCP] = s;
        blk_begin(&b, V_TCP, 1, 1);
        blk_fetch(&b, 0);
        blk_end(&b);
        cs[K_TCP] = keep;
    }
    srv(C_PREP, K_TCP, step, 0, 1); /* the step exists on the server, with nothing sent yet */
    if (tfrdv_mgr_start_step(s.m, step, &r, 0) != TFRDV_OK) bu_die("client step");
    lc_get(&lc, &before);
    pthread_mutex_lock(&mu);
    done_n = 0;
    pthread_mutex_unlock(&mu);
    for (i = 0; i < MEM_CALLS; i++) {
        tfrdv_args a;
        memset(&a, 0, sizeof a);
        sl[i].mem = dst + i;
        sl[i].want = 1;
        a.alloc_fn = slot_alloc;
        a.alloc_user = &sl[i];
        if (tfrdv_recv_async(r, &keys[i].pk, &a, on_recv, &sl[i], 0) != TFRDV_OK) bu_die("recv_async");
    }
    t0 = bu_now(); /* every request is on the server, waiting for its value */
    while ((live = srv(C_LIVE, K_TCP, 0, 0, 0)) < MEM_CALLS) {
        struct timespec ms = {0, 1000000};
        if (bu_now() - t0 > WAIT_NS) bu_die("memory: requests did not reach the server");
        nanosleep(&ms, 0);
    }
    tfrdv_tcp_get_stats(s.t, &ts);
    lc_get(&lc, &during);
    srv(C_PREP, K_TCP, step, MEM_CALLS, 1); /* now the values: every call completes */
    pthread_mutex_lock(&mu);
    wait_mu(&done_n, MEM_CALLS, 0);
    pthread_mutex_unlock(&mu);
    tfrdv_unref(r);
    tfrdv_mgr_cleanup(s.m, step);
    srv(C_CLEAN, K_TCP, step, 0, 0);
    tfrdv_tcp_destroy(s.t);
    tfrdv_mgr_destroy(s.m);
    lc_get(&lc, &after);
    {
        double per = (double)(during.live_bytes - before.live_bytes) / MEM_CALLS;
        snprintf(val, sizeof val, "%.0f B (%.2f allocs)", per, (double)(during.allocs - before.allocs) / MEM_CALLS);
        m = target("memory_per_outstanding_call", per, 1024, 1, 1.0);
        bu_row("memory per call, 1,000 in flight (client)", val, "1024 B", per / 1024, "<= 1x", m);
        snprintf(val, sizeof val, "%zu here, %ld at the server", ts.client_calls_live, live);
        bu_row("  calls in flight when measured", val, 0, 0, 0, -1);
        snprintf(val, sizeof val, "%lld B, %llu bad frees", (long long)after.live_bytes, (unsigned long long)after.size_mismatches);
        bu_row("client memory after destroy", val, 0, 0, "0 B", after.live_bytes == 0 && !after.size_mismatches);
        if (after.live_bytes != 0 || after.size_mismatches) errors++;
    }
}

static void unlink_sockets(void) { /* the server's socket files, if it could not remove them */
    unlink(unix_tfrdv);
    unlink(unix_raw);
}
/* the CPUs this process may run on (Linux: /proc/self/status), "all" elsewhere */
static const char* cpus_allowed(void) {
    static char list[64] = "all";
    char line[256];
    FILE* f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Cpus_allowed_list:", 18) == 0 && sscanf(line + 18, "%63s", list) == 1) break;
    if (f) fclose(f);
    return list;
}

int main(int argc, char** argv) {
    int a[2], b[2], i, status = 0;
    hello h;
    pid_t pid;
    char addr[160];
    double l0 = bu_loadavg();
    (void)argv;
    if (argc != 1) return fprintf(stderr, "usage: bench_tcp (no arguments)\n"), 2;
    pat = (unsigned char*)malloc(MAXB);
    dst = (unsigned char*)malloc(MAXB);
    if (!pat || !dst) bu_die("out of memory");
    for (i = 0; i < (int)(MAXB / 8); i++) {
        uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull;
        x ^= x >> 29;
        memcpy(pat + (size_t)i * 8, &x, 8);
    }
    memset(dst, 0, MAXB); /* touched once: no first-touch page faults in any measurement */
    snprintf(unix_tfrdv, sizeof unix_tfrdv, "/tmp/tfrdv-bench-%d.sock", (int)getpid());
    snprintf(unix_raw, sizeof unix_raw, "/tmp/tfrdv-bench-%d-raw.sock", (int)getpid());
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pipe(a) || pipe(b)) return 1;
    if (sched_getaffinity(0, sizeof start_cpus, &start_cpus) != 0) CPU_ZERO(&start_cpus);
    if ((pid = fork()) < 0) return 1;
    if (pid == 0) { /* before any thread exists in either process */
        close(a[1]);
        close(b[0]);
        return serve_main(a[0], b[1]);
    }
    close(a[0]);
    close(b[1]);
    atexit(unlink_sockets);
    to_srv = a[1];
    from_srv = b[0];
    if (!io_buf(from_srv, &h, sizeof h, 0, 0) || !h.ok) bu_die("the server did not start");
    for (i = 0; i < CPU_SETSIZE && cpu_b < 0; i++)
        if (CPU_ISSET(i, &start_cpus)) *(cpu_a < 0 ? &cpu_a : &cpu_b) = i;
    for (i = 0; i < MAXK; i++) make_key(i, keys[i].buf, sizeof keys[i].buf, &keys[i].pk);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", h.tcp_port);
    if (!client_side(&cs[K_TCP], K_TCP, addr, 0)) bu_die("client tcp");
    snprintf(addr, sizeof addr, "unix:%s", unix_tfrdv);
    if (!client_side(&cs[K_UNIX], K_UNIX, addr, 0)) bu_die("client unix");
    snprintf(addr, sizeof addr, "127.0.0.1:%d", h.grpc_port);
    if (HAVE_GRPC && !client_side(&cs[K_GRPC], K_GRPC, addr, 0)) bu_die("client grpc");
    if ((raw_fd[0] = raw_connect(0, h.raw_port)) < 0 || (raw_fd[1] = raw_connect(1, 0)) < 0) bu_die("raw connect");

    printf("tfrdv_tcp benchmark: two processes, %ld CPUs, allowed: %s, load %.2f.\n"
           "Sequential fetches wait in tfrdv_recv (async: for the callback); raw = blocking ping-pong (64 B request, 32 B header + payload\n"
           "in one sendmsg) on the same socket kind; ratio = subject median / baseline median over the same rounds\n"
           "(%d x %d fetches per latency row). Placements: one-cpu = both processes on CPU %d; two-cpus = client on CPU %d,\n"
           "server on CPU %d (every thread; baselines measured in the same placement); the other sections run unpinned.\n",
           sysconf(_SC_NPROCESSORS_ONLN), cpus_allowed(), l0, LAT_ROUNDS, LAT_BLOCK, cpu_a, cpu_a, cpu_b);
    if (!HAVE_GRPC) printf("gRPC rows skipped: built without the gRPC C core (pkg-config grpc not found)\n");
    printf("\n");
    bu_header();
    for (i = P_ONE; i <= P_TWO; i++) {
        char title[96];
        if (cpu_a < 0 || (i == P_TWO && cpu_b < 0)) {
            printf("%s: skipped (%s)\n", pname[i], cpu_a < 0 ? "the CPUs are unknown" : "one CPU allowed");
            continue;
        }
        if (!place(i)) {
            printf("%s: skipped (sched_setaffinity refused)\n", pname[i]);
            continue;
        }
        snprintf(title, sizeof title, "fetch latency (one call in flight), %s", pname[i]);
        bu_section(title);
        latency(1);
        latency(4096);
        snprintf(title, sizeof title, "pipelined fetches, %s", pname[i]);
        bu_section(title);
        pipelined();
    }
    place(P_ANY);
    {
        tfrdv_tcp_stats a, b;
        char val[64];
        tfrdv_tcp_get_stats(cs[K_TCP].t, &a);
        tfrdv_tcp_get_stats(cs[K_UNIX].t, &b);
        snprintf(val, sizeof val, "%llu lent, %llu declined", (unsigned long long)(a.waits_lent + b.waits_lent),
                 (unsigned long long)(a.waits_declined + b.waits_declined));
        bu_row("tfrdv_recv threads reading their response", val, 0, 0, 0, -1);
    }
    bu_section("throughput (sequential, into a warm buffer: the alloc hook on the tfrdv side)");
    throughput((uint64_t)1 << 20, 32, 15, 0.8);
    throughput((uint64_t)64 << 20, 2, 7, 0.9);
    throughput((uint64_t)256 << 20, 1, 5, 0.9);
    bu_section("memory (counting allocator on the client's manager and transport; values excluded)");
    memory(h.tcp_port);

    for (i = 0; i < NK; i++) side_destroy(&cs[i]);
    close(raw_fd[0]);
    close(raw_fd[1]);
    {
        bcmd q;
        memset(&q, 0, sizeof q);
        q.op = C_QUIT;
        io_buf(to_srv, &q, sizeof q, 1, 0);
    }
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) errors++;
    printf("\n");
    bu_targets_print();
    printf("load %.2f at start, %.2f at end; errors: %ld\n", l0, bu_loadavg(), errors);
    return errors != 0;
}
