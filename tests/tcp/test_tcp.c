/* test_tcp.c - tfrdv_tcp.h: the frame codec (round trips, hostile frames) in process, and the
   transport between two processes: the serving worker runs in a forked child driven over a pair
   of pipes (SEND / STATS / QUIT commands), the fetching worker in this process. Every test is
   bounded: alarm() in both processes, timeouts on every blocking receive; a child exits when its
   command pipe closes. Needs no package: built by tests/tcp/tcp.mk as part of `make test`.
   TFRDV_TCP_BIG=0 skips the 2 GiB + 1 byte transfer (so does VALGRIND=1, set by make valgrind,
   which also leaves out the 256 MiB sizes). */
#define _GNU_SOURCE
#define TFRDV_IMPLEMENTATION
#define TFRDV_TCP_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_tcp.h"
#include "tt.h"
#include "logcap.h"
#include "rawframe.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[64];
static char self_exe[4096];
static const char* upath(const char* name) { /* a Unix socket path in this run's directory */
    static char buf[4][128];
    static int k;
    char* b = buf[k++ & 3];
    snprintf(b, 128, "unix:%s/%s", tmpdir, name);
    return b;
}

/* byte i of a test value with seed s; periodic in 256, so blocks can be copied */
static void fill(uint8_t* p, uint64_t n, unsigned s) {
    uint64_t i, blk = n < (1u << 20) ? n : (1u << 20);
    for (i = 0; i < blk; i++) p[i] = (uint8_t)(i * 131u + s);
    for (i = blk; i < n; i += blk) memcpy(p + i, p, n - i < blk ? (size_t)(n - i) : (size_t)blk);
}
static int check(const uint8_t* p, uint64_t n, unsigned s) {
    uint64_t i, step = n > (256u << 20) ? 4099 : 1;
    for (i = 0; i < n; i += step)
        if (p[i] != (uint8_t)(i * 131u + s)) return 0;
    for (i = n > 4096 ? n - 4096 : 0; i < n; i++)
        if (p[i] != (uint8_t)(i * 131u + s)) return 0;
    return 1;
}
/* tests/run.sh exports VALGRIND=1 for make valgrind: the big transfers are left out there */
static int under_valgrind(void) {
    const char* v = getenv("VALGRIND");
    return v && v[0] == '1';
}
/* a sanitizer or valgrind: threads run at other relative speeds (count bounds widen) */
static int slow_build(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    return 1;
#endif
#endif
    return under_valgrind();
}
static void big_release(tfrdv_value* v) {
    free(v->data);
    free(v);
}
static tfrdv_value* mkval(int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size, unsigned seed) {
    tfrdv_value* v = (tfrdv_value*)calloc(1, sizeof *v + 8 * sizeof(int64_t));
    int64_t* d = (int64_t*)(v + 1);
    void* data = malloc(size ? (size_t)size : 1);
    if (rank) memcpy(d, dims, (size_t)rank * sizeof *dims);
    fill((uint8_t*)data, size, seed);
    *v = tfrdv_value_make(dtype, rank, d, data, size, big_release, 0);
    return v;
}

/* ============================================================================================
   Part 1: the codec
   ============================================================================================ */
/* encodes f, checking that sizing it (cap 0) gives the length the encoding returns */
static size_t enc(const tfrdv_tcp_frame* f, uint8_t* buf, size_t cap) {
    size_t n = tfrdv_tcp_encode(f, buf, cap);
    TT_CHECK_EQ_INT(tfrdv_tcp_encode(f, 0, 0), n);
    return n;
}

static void test_codec_roundtrip(void) {
    uint8_t b[4096];
    tfrdv_tcp_frame f, g;
    tfrdv_status st;
    size_t n, i;
    long used;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_HELLO;
    f.version = TFRDV_TCP_PROTOCOL_VERSION;
    f.incarnation = 0x1122334455667788ULL;
    f.name.ptr = PS;
    f.name.len = strlen(PS);
    n = enc(&f, b, sizeof b);
    TT_CHECK_EQ_INT(n, 16 + 20 + strlen(PS));
    TT_CHECK(b[0] == 1 && b[16] == 0x54 && b[17] == 0x52 && b[18] == 0x44 && b[19] == 0x56); /* "TRDV" */
    for (i = 0; i < n; i++) TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, i, 0, &g, &st), 0); /* incomplete */
    used = tfrdv_tcp_decode(b, n, 0, &g, &st);
    TT_CHECK_EQ_INT(used, n);
    TT_CHECK(g.type == TFRDV_TCP_HELLO && g.incarnation == f.incarnation && g.name.len == strlen(PS) && memcmp(g.name.ptr, PS, g.name.len) == 0);

    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_REQUEST;
    f.id = 77;
    f.step_id = -5;
    f.request_id = INT64_MIN + 3;
    f.deadline_ns = 123456789;
    f.key.ptr = "a;b;c";
    f.key.len = 5;
    n = enc(&f, b, sizeof b);
    used = tfrdv_tcp_decode(b, n, 0, &g, &st);
    TT_CHECK_EQ_INT(used, n);
    TT_CHECK(g.id == 77 && g.step_id == -5 && g.request_id == INT64_MIN + 3 && g.deadline_ns == 123456789 && g.key.len == 5);

    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RESPONSE;
    f.id = 9;
    f.dtype = 1;
    f.rank = 3;
    f.dims[0] = 2; f.dims[1] = 0; f.dims[2] = 5;
    f.bytes = 1000;
    f.data_len = 100;
    f.is_dead = 1;
    n = enc(&f, b, sizeof b); /* header + meta; the 100 bytes follow in the stream */
    TT_CHECK_EQ_INT(n, 16 + 24 + 24);
    used = tfrdv_tcp_decode(b, n, 0, &g, &st);
    TT_CHECK_EQ_INT(used, n);
    TT_CHECK(g.rank == 3 && g.dims[1] == 0 && g.dims[2] == 5 && g.bytes == 1000 && g.data_len == 100 && g.is_dead && !g.no_value);

    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_ERROR;
    f.id = 3;
    f.code = TFRDV_ABORTED;
    f.detail = TFRDV_DETAIL_WORKER_RESTARTED;
    f.message.ptr = "restarted";
    f.message.len = 9;
    n = enc(&f, b, sizeof b);
    used = tfrdv_tcp_decode(b, n, 0, &g, &st);
    TT_CHECK_EQ_INT(used, n);
    TT_CHECK(g.code == TFRDV_ABORTED && g.detail == TFRDV_DETAIL_WORKER_RESTARTED && g.message.len == 9);

    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_DATA;
    f.id = 3;
    f.data_len = 5000;
    n = enc(&f, b, sizeof b);
    TT_CHECK_EQ_INT(n, 16);
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, 0, &g, &st), 16);
    TT_CHECK(g.data_len == 5000);
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_CANCEL;
    f.id = 4;
    n = enc(&f, b, sizeof b);
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, 0, &g, &st), 16);
    TT_CHECK(g.type == TFRDV_TCP_CANCEL && g.id == 4);
    {
        uint64_t ids[3] = {1, 0x0102030405060708ULL, UINT64_MAX};
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_ACK;
        f.num_acks = 3;
        f.ack_ids = ids;
        n = enc(&f, b, sizeof b);
        TT_CHECK_EQ_INT(n, 16 + 24);
        for (i = 0; i < n; i++) TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, i, 0, &g, &st), 0);
        TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, 0, &g, &st), 40);
        TT_CHECK(g.type == TFRDV_TCP_ACK && g.num_acks == 3 && g.ack_bytes == b + 16);
        TT_CHECK(b[24] == 0x08 && b[31] == 0x01 && b[32] == 0xff && b[39] == 0xff); /* little-endian */
        { /* a decoded ACK re-encodes to the same bytes (its ids read from ack_bytes) */
            uint8_t re[64];
            TT_CHECK_EQ_INT(tfrdv_tcp_encode(&g, re, sizeof re), n);
            TT_CHECK(memcmp(re, b, n) == 0);
        }
    }
}

/* NULL where the codec needs memory: 0 from encode, -1 and a message from decode, never a crash */
static void test_codec_null_arguments(void) {
    tfrdv_tcp_frame f, g;
    tfrdv_status st;
    uint8_t b[64];
    size_t n;
    memset(&f, 0, sizeof f);
    TT_CHECK_EQ_INT(tfrdv_tcp_encode(NULL, b, sizeof b), 0);
    f.type = TFRDV_TCP_REQUEST;
    f.key.len = 10; /* no pointer */
    TT_CHECK_EQ_INT(tfrdv_tcp_encode(&f, b, sizeof b), 0);
    TT_CHECK_EQ_INT(tfrdv_tcp_encode(&f, 0, 0), 0);
    f.type = TFRDV_TCP_ERROR;
    f.code = TFRDV_ABORTED;
    f.message.len = 3;
    TT_CHECK_EQ_INT(tfrdv_tcp_encode(&f, b, sizeof b), 0);
    f.type = TFRDV_TCP_CANCEL;
    f.id = 3;
    n = tfrdv_tcp_encode(&f, b, sizeof b);
    TT_CHECK_EQ_INT(n, 16);
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, 0, NULL, &st), -1);
    TT_CHECK_CONTAINS(st.msg, "NULL out");
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(NULL, n, 0, &g, &st), -1);
    TT_CHECK_CONTAINS(st.msg, "NULL buf");
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(NULL, 0, 0, &g, &st), 0); /* nothing yet */
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, 0, &g, NULL), 16);
}
/* decode must fail (-1) with a message containing `want` */
static void bad(const uint8_t* b, size_t n, const tfrdv_tcp_limits* lim, const char* want) {
    tfrdv_tcp_frame g;
    tfrdv_status st;
    st.msg[0] = 0;
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, lim, &g, &st), -1);
    TT_CHECK_CONTAINS(st.msg, want);
}
static void test_codec_hostile(void) {
    uint8_t b[8192];
    tfrdv_tcp_frame f;
    tfrdv_tcp_limits lim;
    size_t n;
    memset(&lim, 0, sizeof lim);
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_HELLO;
    f.version = 1;
    n = enc(&f, b, sizeof b);
    b[16] = 'X';
    bad(b, 20, 0, "bad magic"); /* told as soon as the magic is there */
    f.version = 0;
    n = enc(&f, b, sizeof b);
    bad(b, n, 0, "version 0 not supported");
    b[0] = 11; /* 10 is RELEASE (version 5) */
    bad(b, n, 0, "unknown frame type 11");
    b[0] = 0;
    bad(b, n, 0, "unknown frame type 0");
    f.version = 1;
    n = enc(&f, b, sizeof b);
    b[2] = 1;
    bad(b, n, 0, "reserved");
    { /* ACK: 1..512 ids, id 0 */
        uint64_t ids[513];
        memset(ids, 0, sizeof ids);
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_ACK;
        f.num_acks = 0;
        f.ack_ids = ids;
        n = enc(&f, b, sizeof b);
        bad(b, n, 0, "ACK body of 0 bytes");
        f.num_acks = 513;
        n = enc(&f, b, sizeof b);
        bad(b, n, 0, "ACK body of 4104 bytes");
        f.num_acks = 1;
        f.id = 3;
        n = enc(&f, b, sizeof b);
        bad(b, n, 0, "id 3 (0 expected)");
        f.id = 0;
        n = enc(&f, b, sizeof b);
        b[4] = 12; /* not a multiple of 8 */
        bad(b, 28, 0, "ACK body of 12 bytes");
    }
    /* lengths over the limits are refused from the header alone */
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_REQUEST;
    f.id = 1;
    f.key.ptr = (const char*)b + 4096;
    memset(b + 4096, 'k', 200);
    f.key.len = 200;
    lim.max_key_len = 100;
    n = enc(&f, b, 4096);
    bad(b, 16, &lim, "key limit 100");
    b[4] = 0xff; b[5] = 0xff; b[6] = 0xff; b[7] = 0x7f;
    bad(b, 16, 0, "exceeds the limit");
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RESPONSE;
    f.id = 1;
    f.rank = 2;
    f.dims[0] = 1;
    f.dims[1] = -1;
    f.bytes = 8;
    n = enc(&f, b, sizeof b);
    bad(b, n, 0, "negative");
    f.dims[1] = 1;
    n = enc(&f, b, sizeof b);
    b[16 + 4] = 255; /* rank 255 */
    bad(b, n, 0, "rank 255");
    f.dims[0] = INT64_MAX;
    f.dims[1] = 4;
    n = enc(&f, b, sizeof b);
    bad(b, n, 0, "overflow");
    f.dims[0] = 1;
    f.dims[1] = 1;
    f.bytes = (uint64_t)1 << 50;
    n = enc(&f, b, sizeof b);
    bad(b, n, 0, "max_tensor_bytes");
    f.bytes = 8;
    f.data_len = 9; /* more bytes in the frame than the value has */
    n = enc(&f, b, sizeof b);
    bad(b, n, 0, "carries 9 value bytes");
    f.data_len = 0;
    f.no_value = 1; /* no value but not dead */
    n = enc(&f, b, sizeof b);
    bad(b, n, 0, "without value");
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_ERROR;
    f.code = 99;
    n = enc(&f, b, sizeof b);
    bad(b, n, 0, "ERROR code 99");
    f.code = 2;
    f.message.ptr = (const char*)b + 4096;
    f.message.len = 5000;
    lim.max_message_len = 4096;
    n = enc(&f, b, 4096);
    bad(b, 16, &lim, "message limit");
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_DATA;
    n = enc(&f, b, sizeof b);
    bad(b, n, 0, "empty DATA");
    f.type = TFRDV_TCP_CANCEL;
    n = enc(&f, b, sizeof b);
    b[4] = 1;
    bad(b, n + 1, 0, "CANCEL with a 1-byte body");
    /* garbage: every 16-byte pattern either needs more bytes, decodes or fails; never crashes */
    {
        unsigned seed = 12345;
        int i, j;
        tfrdv_tcp_frame g;
        tfrdv_status st;
        for (i = 0; i < 20000; i++) {
            for (j = 0; j < 64; j++) { seed = seed * 1103515245u + 12345u; b[j] = (uint8_t)(seed >> 16); }
            b[0] = (uint8_t)(b[0] % 9);
            b[1] = b[2] = b[3] = 0;
            b[6] = b[7] = 0;
            (void)tfrdv_tcp_decode(b, 64, 0, &g, &st);
        }
    }
}

/* ============================================================================================
   Part 2: two processes
   ============================================================================================ */
enum { OP_SEND = 1, OP_STATS = 2, OP_QUIT = 3, OP_CLEANUP = 4 };
typedef struct cmd {
    int op;
    int64_t step;
    char edge[48];
    int32_t dtype, rank;
    int64_t dims[8];
    uint64_t size;
    int dead, novalue, count;
    unsigned seed;
} cmd;
typedef struct rep {
    int code;
    char msg[256];
    char addr[128];
    tfrdv_tcp_stats ts;
    size_t pending_sends;
} rep;
typedef struct srv {
    pid_t pid;
    int cfd, rfd;
    char addr[128];
} srv;

static int rd_full(int fd, void* p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, (char*)p + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        got += (size_t)k;
    }
    return 1;
}
static void count_sends(void* u, int64_t step, tfrdv_pending_kind kind, const char* key, size_t len, size_t count) {
    (void)step; (void)key; (void)len;
    if (kind == TFRDV_PENDING_SEND) *(size_t*)u += count;
}
static void key_for(tfrdv_key* k, const char* edge, uint64_t inc) {
    tfrdv_frame_iter fi = {0, 0};
    tfrdv_status st;
    (void)tfrdv_key_make(k, PS_DEV, inc, WK_DEV, edge, fi, &st);
}

/* the serving worker: PS with incarnation inc listening on addr */
static void child_server(int cfd, int rfd, const char* addr, uint64_t inc, int max_conns) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_tcp* t = 0;
    tfrdv_mgr* m = 0;
    tfrdv_status st;
    rep r;
    cmd c;
    alarm(300);
    memset(&r, 0, sizeof r);
    tc.listen_address = addr;
    tc.max_connections = max_conns;
    if (tfrdv_tcp_create(&tc, &t, &st) != TFRDV_OK) {
        r.code = (int)st.code;
        snprintf(r.msg, sizeof r.msg, "%s", st.msg);
        (void)wr_full(rfd, &r, sizeof r);
        _exit(0);
    }
    mc.worker_name = PS;
    mc.incarnation = inc;
    mc.transport = tfrdv_tcp_transport(t);
    (void)tfrdv_mgr_create(&mc, &m, &st);
    (void)tfrdv_tcp_attach(t, m, &st);
    snprintf(r.addr, sizeof r.addr, "%s", tfrdv_tcp_address(t));
    (void)wr_full(rfd, &r, sizeof r);
    while (rd_full(cfd, &c, sizeof c) && c.op != OP_QUIT) {
        memset(&r, 0, sizeof r);
        if (c.op == OP_SEND) {
            tfrdv_rendezvous* rz = 0;
            int i;
            r.code = (int)tfrdv_mgr_start_step(m, c.step, &rz, &st);
            for (i = 0; i < c.count && r.code == TFRDV_OK; i++) {
                tfrdv_key k;
                char edge[64];
                tfrdv_value* v = c.novalue ? 0 : mkval(c.dtype, c.rank, c.dims, c.size, c.seed + (unsigned)i);
                if (c.count > 1) snprintf(edge, sizeof edge, "%s_%d", c.edge, i);
                else snprintf(edge, sizeof edge, "%s", c.edge);
                key_for(&k, edge, inc);
                r.code = (int)tfrdv_send(rz, &k.parsed, 0, v, c.dead, &st);
                if (r.code != TFRDV_OK) { tfrdv_value_release(v); snprintf(r.msg, sizeof r.msg, "%s", st.msg); }
            }
            if (rz) tfrdv_unref(rz);
        } else if (c.op == OP_CLEANUP) {
            tfrdv_mgr_cleanup(m, c.step);
        }
        tfrdv_tcp_get_stats(t, &r.ts);
        (void)tfrdv_mgr_pending(m, count_sends, &r.pending_sends);
        if (!wr_full(rfd, &r, sizeof r)) break;
    }
    tfrdv_tcp_destroy(t);
    tfrdv_mgr_destroy(m);
    _exit(0);
}
static int srv_start(srv* s, const char* addr, uint64_t inc, int max_conns, rep* first) {
    int c2s[2], s2c[2];
    rep r;
    if (pipe(c2s) || pipe(s2c)) return 0;
    fflush(stdout);
    s->pid = fork();
    if (s->pid == 0) { /* a fresh process image: this one may run threads (fork keeps only ours) */
        char a[5][64];
        close(c2s[1]);
        close(s2c[0]);
        snprintf(a[0], sizeof a[0], "%d", c2s[0]);
        snprintf(a[1], sizeof a[1], "%d", s2c[1]);
        snprintf(a[2], sizeof a[2], "%llu", (unsigned long long)inc);
        snprintf(a[3], sizeof a[3], "%d", max_conns);
        execl(self_exe, self_exe, "--serve", a[0], a[1], addr, a[2], a[3], (char*)0);
        _exit(127);
    }
    close(c2s[0]);
    close(s2c[1]);
    s->cfd = c2s[1];
    s->rfd = s2c[0];
    if (!rd_full(s->rfd, &r, sizeof r)) return 0;
    if (first) *first = r;
    snprintf(s->addr, sizeof s->addr, "%s", r.addr);
    return r.code == TFRDV_OK;
}
static rep srv_cmd(srv* s, const cmd* c) {
    rep r;
    memset(&r, 0, sizeof r);
    r.code = -1;
    if (!wr_full(s->cfd, c, sizeof *c) || !rd_full(s->rfd, &r, sizeof r)) r.code = -1;
    return r;
}
static const int64_t d1024[1] = {1024}; /* 4 KiB of DT_INT32 */
/* count values (edges "<edge>_<i>" when count > 1; seeds seed + i) */
static rep srv_send_n(srv* s, int64_t step, const char* edge, int32_t dtype, int32_t rank, const int64_t* dims,
                      uint64_t size, unsigned seed, int count) {
    cmd c;
    memset(&c, 0, sizeof c);
    c.op = OP_SEND;
    c.step = step;
    snprintf(c.edge, sizeof c.edge, "%s", edge);
    c.dtype = dtype;
    c.rank = rank;
    if (rank) memcpy(c.dims, dims, (size_t)rank * sizeof *dims);
    c.size = size;
    c.seed = seed;
    c.count = count;
    return srv_cmd(s, &c);
}
static rep srv_send(srv* s, int64_t step, const char* edge, int32_t dtype, int32_t rank, const int64_t* dims,
                    uint64_t size, unsigned seed) {
    return srv_send_n(s, step, edge, dtype, rank, dims, size, seed, 1);
}
static rep srv_stats(srv* s) {
    cmd c;
    memset(&c, 0, sizeof c);
    c.op = OP_STATS;
    return srv_cmd(s, &c);
}
static void srv_stop(srv* s) {
    cmd c;
    int status;
    memset(&c, 0, sizeof c);
    c.op = OP_QUIT;
    (void)wr_full(s->cfd, &c, sizeof c);
    close(s->cfd);
    close(s->rfd);
    waitpid(s->pid, &status, 0);
}
static void srv_kill(srv* s) {
    int status;
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    close(s->cfd);
    close(s->rfd);
}

/* the fetching worker, in this process */
typedef struct cli {
    tfrdv_tcp* t;
    tfrdv_mgr* m;
} cli;
static int cli_open(cli* c, const char* ps_addr, int64_t call_timeout_ns, const tfrdv_tcp_config* base) {
    tfrdv_tcp_config tc = base ? *base : tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_tcp_worker w;
    tfrdv_status st;
    w.name = PS;
    w.address = ps_addr;
    tc.workers = &w;
    tc.num_workers = 1;
    if (tfrdv_tcp_create(&tc, &c->t, &st) != TFRDV_OK) { printf("    client create: %s\n", st.msg); return 0; }
    mc.worker_name = WK;
    mc.call_timeout_ns = call_timeout_ns;
    mc.transport = tfrdv_tcp_transport(c->t);
    if (tfrdv_mgr_create(&mc, &c->m, &st) != TFRDV_OK) { printf("    mgr: %s\n", st.msg); return 0; }
    (void)tfrdv_tcp_attach(c->t, c->m, &st);
    return 1;
}
static void cli_close(cli* c) {
    tfrdv_tcp_destroy(c->t);
    tfrdv_mgr_destroy(c->m);
}
/* a serving child on addr and a client of it in this process; 0 (a failed check, nothing left
   running) if either does not start */
static int pair_open(srv* s, cli* c, const char* addr, int64_t call_timeout_ns, const tfrdv_tcp_config* base) {
    if (!srv_start(s, addr, PS_INC, 0, 0)) { TT_CHECK(0); return 0; }
    if (!cli_open(c, s->addr, call_timeout_ns, base)) { TT_CHECK(0); srv_stop(s); return 0; }
    return 1;
}
static tfrdv_code fetch(cli* c, int64_t step, const char* edge, uint64_t inc, int64_t timeout_ns, tfrdv_value** v,
                        int* dead, tfrdv_status* st) {
    tfrdv_rendezvous* r = 0;
    tfrdv_key k;
    tfrdv_code rc;
    *v = 0;
    if ((rc = tfrdv_mgr_start_step(c->m, step, &r, st)) != TFRDV_OK) return rc;
    key_for(&k, edge, inc);
    rc = tfrdv_recv(r, &k.parsed, 0, timeout_ns, v, dead, st);
    tfrdv_unref(r);
    return rc;
}

static void shapes_over(const char* addr) {
    srv s;
    cli c;
    static const int32_t dts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 14, 17, 18, 19, 22, 23};
    static const uint64_t sizes[] = {0, 1, 3, 4096, 65536, 262144, 262145, (1u << 20) + 1, 64u << 20, 256u << 20};
    size_t i;
    int32_t rank;
    tfrdv_status st;
    tfrdv_value* v;
    int dead;
    int n = 0;
    char edge[48];
    alarm(240);
    if (!pair_open(&s, &c, addr, 60 * SEC, 0)) return;
    /* every dtype, rank 1 */
    for (i = 0; i < sizeof dts / sizeof *dts; i++) {
        int64_t d[1] = {3};
        snprintf(edge, sizeof edge, "dt%d", (int)dts[i]);
        TT_CHECK_EQ_INT(srv_send(&s, 1, edge, dts[i], 1, d, 24, (unsigned)i).code, 0);
        TT_CHECK_EQ_INT(fetch(&c, 1, edge, PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
        if (v) {
            TT_CHECK(v->dtype == dts[i] && v->rank == 1 && v->dims[0] == 3 && v->size == 24 && check((uint8_t*)v->data, 24, (unsigned)i));
            tfrdv_value_release(v);
        }
        n++;
    }
    /* ranks 0..8 with a size-0 dim at rank >= 2 */
    for (rank = 0; rank <= 8; rank++) {
        int64_t d[8];
        uint64_t el = 1;
        int j;
        for (j = 0; j < rank; j++) { d[j] = (rank >= 2 && j == rank - 1) ? 0 : j + 1; el *= (uint64_t)d[j]; }
        snprintf(edge, sizeof edge, "rank%d", (int)rank);
        TT_CHECK_EQ_INT(srv_send(&s, 1, edge, 1, rank, d, el * 4, 7).code, 0);
        TT_CHECK_EQ_INT(fetch(&c, 1, edge, PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
        if (v) {
            TT_CHECK(v->rank == rank && v->size == el * 4);
            for (j = 0; j < rank; j++) TT_CHECK(v->dims[j] == d[j]);
            tfrdv_value_release(v);
        }
    }
    /* sizes: 0 B, 1 B, ... 256 MiB (frame boundaries at 256 KiB) */
    for (i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        int64_t d[1];
        if (sizes[i] > (64u << 20) && under_valgrind()) continue;
        d[0] = (int64_t)sizes[i];
        snprintf(edge, sizeof edge, "size%zu", i);
        TT_CHECK_EQ_INT(srv_send(&s, 1, edge, 4, 1, d, sizes[i], (unsigned)(i + 3)).code, 0);
        TT_CHECK_EQ_INT(fetch(&c, 1, edge, PS_INC, 60 * SEC, &v, &dead, &st), TFRDV_OK);
        if (v) {
            TT_CHECK(v->size == sizes[i] && !dead && check((uint8_t*)v->data, sizes[i], (unsigned)(i + 3)));
            tfrdv_value_release(v);
        }
    }
    /* dead values: with a payload, and without a value */
    {
        cmd cm;
        memset(&cm, 0, sizeof cm);
        cm.op = OP_SEND;
        cm.step = 1;
        cm.count = 1;
        cm.dead = 1;
        cm.dtype = 1;
        cm.size = 8;
        cm.rank = 1;
        cm.dims[0] = 2;
        snprintf(cm.edge, sizeof cm.edge, "deadv");
        TT_CHECK_EQ_INT(srv_cmd(&s, &cm).code, 0);
        TT_CHECK_EQ_INT(fetch(&c, 1, "deadv", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
        TT_CHECK(dead && v && v->size == 8);
        tfrdv_value_release(v);
        cm.novalue = 1;
        snprintf(cm.edge, sizeof cm.edge, "deadn");
        TT_CHECK_EQ_INT(srv_cmd(&s, &cm).code, 0);
        TT_CHECK_EQ_INT(fetch(&c, 1, "deadn", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
        TT_CHECK(dead && !v);
    }
    {
        tfrdv_tcp_stats ts;
        rep r = srv_stats(&s);
        tfrdv_tcp_get_stats(c.t, &ts);
        TT_CHECK(ts.calls_ok >= (uint64_t)n + 9 + (under_valgrind() ? 9 : 10) + 2);
        TT_CHECK_EQ_INT(ts.calls_failed, 0);
        TT_CHECK_EQ_INT(ts.connects, 1); /* every call on one connection */
        TT_CHECK_EQ_INT(r.ts.protocol_errors, 0);
        TT_CHECK_EQ_INT(r.pending_sends, 0);
    }
    cli_close(&c);
    srv_stop(&s);
}
static void test_shapes_tcp(void) { shapes_over("127.0.0.1:0"); }
static void test_shapes_unix(void) { shapes_over(upath("shapes.sock")); }

/* one value of 2 GiB + 1 byte (64-bit lengths; TensorFlow kills its process above 2 GiB) */
static void test_above_2gib(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_value* v;
    int dead;
    uint64_t size = ((uint64_t)2 << 30) + 1;
    int64_t d[1];
    const char* e = getenv("TFRDV_TCP_BIG");
    if (e && e[0] == '0') TT_SKIP("TFRDV_TCP_BIG=0");
    if (under_valgrind()) TT_SKIP("under valgrind (make valgrind): 2 GiB would take minutes");
    alarm(240);
    d[0] = (int64_t)size;
    if (!pair_open(&s, &c, upath("big.sock"), 0, 0)) return;
    TT_CHECK_EQ_INT(srv_send(&s, 1, "big", 4, 1, d, size, 9).code, 0);
    TT_CHECK_EQ_INT(fetch(&c, 1, "big", PS_INC, 200 * SEC, &v, &dead, &st), TFRDV_OK);
    if (v) {
        TT_CHECK(v->size == size && v->dims[0] == (int64_t)size && check((uint8_t*)v->data, size, 9));
        tfrdv_value_release(v);
    } else {
        printf("    %s\n", st.msg);
    }
    cli_close(&c);
    srv_stop(&s);
}

/* an incarnation mismatch crosses the wire as ABORTED + TFRDV_DETAIL_WORKER_RESTARTED */
static void test_restart_detail(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_value* v;
    int dead;
    alarm(60);
    if (!pair_open(&s, &c, "127.0.0.1:0", 0, 0)) return;
    TT_CHECK_EQ_INT(fetch(&c, 1, "x", PS_INC + 1, 30 * SEC, &v, &dead, &st), TFRDV_ABORTED);
    TT_CHECK_EQ_INT(st.detail, TFRDV_DETAIL_WORKER_RESTARTED);
    TT_CHECK_CONTAINS(st.msg, "incarnation");
    cli_close(&c);
    srv_stop(&s);
}

/* cancel in flight: the server withdraws, the value sent later goes to the next receiver */
typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    tfrdv_code code[1024];
    uint32_t detail[1024];
    tfrdv_value* v[1024];
    char msg[256];
} waiter;
static waiter* waiter_new(void) {
    waiter* w = (waiter*)calloc(1, sizeof *w);
    pthread_mutex_init(&w->mu, 0);
    pthread_cond_init(&w->cv, 0);
    return w;
}
static void waiter_free(waiter* w) {
    int i;
    for (i = 0; i < w->n && i < 1024; i++) tfrdv_value_release(w->v[i]);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}
static void on_recv(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    waiter* w = (waiter*)u;
    (void)sa; (void)ra; (void)dead;
    pthread_mutex_lock(&w->mu);
    if (w->n < 1024) {
        w->code[w->n] = st->code;
        w->detail[w->n] = st->detail;
        w->v[w->n] = v;
    } else {
        tfrdv_value_release(v);
    }
    snprintf(w->msg, sizeof w->msg, "%s", st->msg);
    w->n++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}
static int waiter_wait(waiter* w, int n, int64_t timeout_ns) {
    int64_t end = tfrdv_now_ns() + timeout_ns;
    int ok;
    pthread_mutex_lock(&w->mu);
    while (w->n < n && tfrdv_now_ns() < end) {
        pthread_mutex_unlock(&w->mu);
        sleep_ms(2);
        pthread_mutex_lock(&w->mu);
    }
    ok = w->n >= n;
    pthread_mutex_unlock(&w->mu);
    return ok;
}
/* posts n receives of keys "<prefix><i>" on r, completing into w */
static void post_recvs(tfrdv_rendezvous* r, const char* prefix, int n, waiter* w) {
    int i;
    for (i = 0; i < n; i++) {
        tfrdv_key k;
        char e[64];
        snprintf(e, sizeof e, "%s%d", prefix, i);
        key_for(&k, e, PS_INC);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, 0, on_recv, w, 0), TFRDV_OK);
    }
}
/* polls the serving child's stats until cond holds (bounded: 5 s) */
#define SRV_UNTIL(s, rp, cond) \
    do { int u_; for (u_ = 0; u_ < 1000; u_++) { (rp) = srv_stats(s); if (cond) break; sleep_ms(5); } } while (0)
static void test_cancel_keeps_value(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_value* v;
    tfrdv_rendezvous* r;
    tfrdv_cancel_mgr* cm;
    tfrdv_args a;
    tfrdv_key k;
    waiter* w = waiter_new();
    int dead;
    rep rp;
    alarm(60);
    if (!pair_open(&s, &c, "127.0.0.1:0", 0, 0)) return;
    (void)tfrdv_cancel_mgr_create(0, &cm, &st);
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    key_for(&k, "late", PS_INC);
    memset(&a, 0, sizeof a);
    a.cancel = cm;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, &a, on_recv, w, 0), TFRDV_OK);
    /* the request reached the server once its serve is pending there */
    SRV_UNTIL(&s, rp, rp.ts.served >= 1);
    TT_CHECK_EQ_INT(rp.ts.served, 1);
    tfrdv_cancel_start(cm);
    TT_CHECK(waiter_wait(w, 1, 10 * SEC));
    TT_CHECK_EQ_INT(w->code[0], TFRDV_CANCELLED);
    /* counted cancelled at the CANCEL; live until the withdrawn serve's callback has run */
    SRV_UNTIL(&s, rp, rp.ts.serve_cancelled >= 1 && rp.ts.server_requests_live == 0);
    TT_CHECK_EQ_INT(rp.ts.serve_cancelled, 1);
    TT_CHECK_EQ_INT(rp.ts.server_requests_live, 0);
    TT_CHECK_EQ_INT(srv_send(&s, 1, "late", 1, 0, 0, 4, 5).code, 0);
    rp = srv_stats(&s);
    TT_CHECK_EQ_INT(rp.pending_sends, 1); /* buffered, not lost to the cancelled request */
    TT_CHECK_EQ_INT(fetch(&c, 1, "late", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && check((uint8_t*)v->data, 4, 5));
    tfrdv_value_release(v);
    tfrdv_unref(r);
    tfrdv_cancel_mgr_destroy(cm);
    cli_close(&c);
    srv_stop(&s);
    waiter_free(w);
}

/* the call's deadline: DEADLINE_EXCEEDED, the server drops the request, the value stays */
static void test_deadline_keeps_value(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_value* v;
    int dead;
    rep rp;
    alarm(60);
    if (!pair_open(&s, &c, upath("dl.sock"), SEC / 5, 0)) return;
    TT_CHECK_EQ_INT(fetch(&c, 1, "slow", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_DEADLINE_EXCEEDED);
    SRV_UNTIL(&s, rp, rp.ts.server_requests_live == 0 && rp.ts.served);
    TT_CHECK_EQ_INT(rp.ts.server_requests_live, 0);
    TT_CHECK_EQ_INT(srv_send(&s, 1, "slow", 1, 0, 0, 4, 6).code, 0);
    TT_CHECK_EQ_INT(srv_stats(&s).pending_sends, 1);
    TT_CHECK_EQ_INT(fetch(&c, 1, "slow", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && check((uint8_t*)v->data, 4, 6));
    tfrdv_value_release(v);
    cli_close(&c);
    srv_stop(&s);
}

/* deadlines hold without attach (the host never calls tfrdv_mgr_expire: the transport's thread
   expires the manager it was bound to, and scans its own calls' deadlines) against a peer that
   never answers (a listen backlog: no HELLO either): 300 calls expire, each exactly once */
static void test_deadline_by_transport(void) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_tcp_worker wk;
    tfrdv_tcp* t;
    tfrdv_mgr* m;
    tfrdv_status st;
    tfrdv_rendezvous* r;
    tfrdv_tcp_stats ts;
    struct sockaddr_un un;
    waiter* w = waiter_new();
    int i, expired = 0, lfd;
    alarm(60);
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    snprintf(un.sun_path, sizeof un.sun_path, "%s", upath("mute.sock") + 5);
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    TT_CHECK(bind(lfd, (struct sockaddr*)&un, sizeof un) == 0 && listen(lfd, 8) == 0);
    wk.name = PS;
    wk.address = upath("mute.sock");
    tc.workers = &wk;
    tc.num_workers = 1;
    tc.connect_timeout_ns = 60 * SEC;
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_OK);
    mc.worker_name = WK;
    mc.call_timeout_ns = SEC / 4;
    mc.transport = tfrdv_tcp_transport(t);
    (void)tfrdv_mgr_create(&mc, &m, &st);
    (void)tfrdv_mgr_start_step(m, 1, &r, &st);
    post_recvs(r, "never_", 300, w);
    TT_CHECK(waiter_wait(w, 300, 5 * SEC));
    for (i = 0; i < w->n && i < 300; i++) expired += w->code[i] == TFRDV_DEADLINE_EXCEEDED;
    TT_CHECK_EQ_INT(expired, 300);
    tfrdv_tcp_get_stats(t, &ts);
    TT_CHECK_EQ_INT(ts.client_calls_live, 0);
    sleep_ms(50);
    TT_CHECK_EQ_INT(w->n, 300);
    tfrdv_unref(r);
    tfrdv_tcp_destroy(t);
    tfrdv_mgr_destroy(m);
    close(lfd);
    waiter_free(w);
}

/* abort of the receiving step in flight: a second worker's receive gets the value */
static void test_abort_keeps_value(void) {
    srv s;
    cli c, c2;
    tfrdv_status st;
    tfrdv_value* v;
    tfrdv_rendezvous* r;
    tfrdv_key k;
    waiter* w = waiter_new();
    int dead;
    rep rp;
    alarm(60);
    if (!srv_start(&s, "127.0.0.1:0", PS_INC, 0, 0)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, 0, 0) || !cli_open(&c2, s.addr, 0, 0)) { TT_CHECK(0); srv_stop(&s); return; }
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    key_for(&k, "ab", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, 0, on_recv, w, 0), TFRDV_OK);
    SRV_UNTIL(&s, rp, rp.ts.served >= 1);
    tfrdv_mgr_cleanup(c.m, 1); /* aborts the step: its remote call is cancelled */
    TT_CHECK(waiter_wait(w, 1, 10 * SEC));
    TT_CHECK_EQ_INT(w->code[0], TFRDV_ABORTED);
    SRV_UNTIL(&s, rp, rp.ts.serve_cancelled >= 1);
    TT_CHECK_EQ_INT(rp.ts.serve_cancelled, 1);
    TT_CHECK_EQ_INT(srv_send(&s, 1, "ab", 1, 0, 0, 4, 8).code, 0);
    TT_CHECK_EQ_INT(fetch(&c2, 1, "ab", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && check((uint8_t*)v->data, 4, 8));
    tfrdv_value_release(v);
    tfrdv_unref(r);
    cli_close(&c);
    cli_close(&c2);
    srv_stop(&s);
    waiter_free(w);
}

/* 1,000 receives in flight on one connection, answered in any order */
static void test_1000_concurrent(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_rendezvous* r;
    waiter* w = waiter_new();
    int i, ok = 0;
    tfrdv_tcp_stats ts;
    alarm(120);
    if (!pair_open(&s, &c, "127.0.0.1:0", 0, 0)) return;
    (void)tfrdv_mgr_start_step(c.m, 3, &r, &st);
    post_recvs(r, "many_", 1000, w);
    TT_CHECK_EQ_INT(srv_send_n(&s, 3, "many", 3, 1, d1024, 4096, 0, 1000).code, 0);
    TT_CHECK(waiter_wait(w, 1000, 60 * SEC));
    for (i = 0; i < w->n && i < 1000; i++) ok += w->code[i] == TFRDV_OK && w->v[i] && w->v[i]->size == 4096;
    TT_CHECK_EQ_INT(ok, 1000);
    tfrdv_tcp_get_stats(c.t, &ts);
    TT_CHECK_EQ_INT(ts.connects, 1);
    TT_CHECK_EQ_INT(ts.client_calls_live, 0);
    tfrdv_unref(r);
    cli_close(&c);
    srv_stop(&s);
    waiter_free(w);
}

/* head-of-line: a small response requested after a 256 MiB one on the same connection arrives
   first (the big one goes out in 256 KiB frames, round robin with the small one). Over the
   socket: a Unix-socket client on the same host would take the big one by address, one copy
   on the thread that reads the connection, which holds that thread for the copy (SAME HOST) */
static void hol_over(const char* addr) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_rendezvous* r;
    tfrdv_key kb, ks;
    waiter* w = waiter_new();
    int64_t db[1] = {256 << 20}, ds[1] = {4096};
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    alarm(60);
    tc.same_host = TFRDV_OFF;
    if (!pair_open(&s, &c, addr, 0, &tc)) return;
    TT_CHECK_EQ_INT(srv_send(&s, 1, "hol_big", 4, 1, db, (uint64_t)db[0], 1).code, 0);
    TT_CHECK_EQ_INT(srv_send(&s, 1, "hol_small", 4, 1, ds, (uint64_t)ds[0], 2).code, 0);
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    key_for(&kb, "hol_big", PS_INC);
    key_for(&ks, "hol_small", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &kb.parsed, 0, on_recv, w, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ks.parsed, 0, on_recv, w, 0), TFRDV_OK);
    TT_CHECK(waiter_wait(w, 2, 30 * SEC));
    TT_CHECK(w->code[0] == TFRDV_OK && w->v[0] && w->v[0]->size == 4096); /* the small one first */
    TT_CHECK(w->code[1] == TFRDV_OK && w->v[1] && w->v[1]->size == (uint64_t)db[0]);
    if (w->v[1]) TT_CHECK(check((uint8_t*)w->v[1]->data, w->v[1]->size, 1));
    tfrdv_unref(r);
    cli_close(&c);
    srv_stop(&s);
    waiter_free(w);
}
static void test_small_not_behind_big_tcp(void) { hol_over("127.0.0.1:0"); }
static void test_small_not_behind_big_unix(void) { hol_over(upath("hol.sock")); }

/* the server dies while it sends: the receive fails UNAVAILABLE at once */
static pid_t kill_on_alloc;
static tfrdv_value* killing_alloc(void* u, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    (void)u;
    if (kill_on_alloc > 0) kill(kill_on_alloc, SIGKILL);
    return tfrdv_value_new(NULL, dtype, rank, dims, 0, size);
}
static void test_server_killed_mid_transfer(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_rendezvous* r;
    tfrdv_value* v = 0;
    tfrdv_args a;
    tfrdv_key k;
    int64_t d[1] = {256 << 20};
    int dead, status;
    alarm(60);
    if (!pair_open(&s, &c, "127.0.0.1:0", 0, 0)) return;
    TT_CHECK_EQ_INT(srv_send(&s, 1, "huge", 4, 1, d, (uint64_t)d[0], 1).code, 0);
    kill_on_alloc = s.pid;
    memset(&a, 0, sizeof a);
    a.alloc_fn = killing_alloc;
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    key_for(&k, "huge", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.parsed, &a, 30 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "lost");
    TT_CHECK(!v);
    tfrdv_unref(r);
    kill_on_alloc = 0;
    waitpid(s.pid, &status, 0);
    close(s.cfd);
    close(s.rfd);
    cli_close(&c);
}

/* the client dies while it receives: the served value goes back to the table */
static void test_client_killed_mid_transfer(void) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_tcp* t;
    tfrdv_mgr* m;
    tfrdv_status st;
    tfrdv_rendezvous* r;
    tfrdv_key k;
    tfrdv_value* v;
    int64_t d[1] = {256 << 20};
    pid_t pid;
    int status, i, dead;
    size_t pend = 0;
    tfrdv_tcp_stats ts;
    char addr[128];
    alarm(60);
    tc.listen_address = "127.0.0.1:0";
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_OK);
    mc.worker_name = PS;
    mc.incarnation = PS_INC;
    mc.transport = tfrdv_tcp_transport(t);
    (void)tfrdv_mgr_create(&mc, &m, &st);
    (void)tfrdv_tcp_attach(t, m, &st);
    snprintf(addr, sizeof addr, "%s", tfrdv_tcp_address(t));
    (void)tfrdv_mgr_start_step(m, 1, &r, &st);
    key_for(&k, "huge", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.parsed, 0, mkval(4, 1, d, (uint64_t)d[0], 2), 0, &st), TFRDV_OK);
    fflush(stdout);
    pid = fork();
    if (pid == 0) { /* the fetching worker (a fresh process): dies as soon as the response starts */
        execl(self_exe, self_exe, "--die-fetching", addr, (char*)0);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    TT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    for (i = 0; i < 1000; i++) {
        tfrdv_tcp_get_stats(t, &ts);
        if (ts.values_returned >= 1 && ts.connections == 0) break;
        sleep_ms(5);
    }
    TT_CHECK_EQ_INT(ts.values_returned, 1);
    TT_CHECK_EQ_INT(ts.connections, 0);
    (void)tfrdv_pending(r, count_sends, &pend);
    TT_CHECK_EQ_INT(pend, 1);
    { /* the next receiver gets it */
        cli c;
        if (cli_open(&c, addr, 0, 0)) {
            TT_CHECK_EQ_INT(fetch(&c, 1, "huge", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
            TT_CHECK(v && v->size == (uint64_t)d[0] && check((uint8_t*)v->data, v->size, 2));
            tfrdv_value_release(v);
            cli_close(&c);
        } else {
            TT_CHECK(0);
        }
    }
    tfrdv_unref(r);
    tfrdv_tcp_destroy(t);
    tfrdv_mgr_destroy(m);
}

/* the server restarts (new process, same address, new incarnation): the client reconnects */
static void test_reconnect_after_restart(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_value* v;
    int dead, i;
    tfrdv_code rc = TFRDV_UNKNOWN;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp_stats ts;
    const char* a = upath("restart.sock");
    alarm(60);
    tc.backoff_ns = SEC / 50;
    tc.backoff_max_ns = SEC / 10;
    tc.connect_retry_ns = TFRDV_OFF; /* a refused connection fails its call at once */
    if (!pair_open(&s, &c, a, 0, &tc)) return;
    TT_CHECK_EQ_INT(srv_send(&s, 1, "r1", 1, 0, 0, 4, 1).code, 0);
    TT_CHECK_EQ_INT(fetch(&c, 1, "r1", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
    tfrdv_value_release(v);
    srv_kill(&s); /* its socket file stays behind (stale) */
    TT_CHECK_EQ_INT(fetch(&c, 1, "r2", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_EQ_INT(fetch(&c, 1, "r2", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    if (!srv_start(&s, a, PS_INC + 1, 0, 0)) { TT_CHECK(0); cli_close(&c); return; } /* replaces the stale file */
    TT_CHECK_EQ_INT(srv_send(&s, 1, "r3", 1, 0, 0, 4, 3).code, 0);
    for (i = 0; i < 200 && rc != TFRDV_OK; i++) {
        rc = fetch(&c, 1, "r3", PS_INC + 1, 30 * SEC, &v, &dead, &st);
        if (rc != TFRDV_OK) { TT_CHECK_EQ_INT(rc, TFRDV_UNAVAILABLE); sleep_ms(10); }
    }
    TT_CHECK_EQ_INT(rc, TFRDV_OK);
    TT_CHECK(v && check((uint8_t*)v->data, 4, 3));
    tfrdv_value_release(v);
    /* a key with the old incarnation says the worker restarted */
    TT_CHECK_EQ_INT(fetch(&c, 1, "r4", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_ABORTED);
    TT_CHECK_EQ_INT(st.detail, TFRDV_DETAIL_WORKER_RESTARTED);
    tfrdv_tcp_get_stats(c.t, &ts);
    TT_CHECK(ts.connects >= 2);
    cli_close(&c);
    srv_stop(&s);
}

/* connect_retry_ns TFRDV_OFF: after a failed connect, calls within the backoff window fail at
   once; by default a call waits for the peer, up to its deadline */
static void test_backoff(void) {
    cli c;
    tfrdv_status st;
    tfrdv_value* v;
    int dead;
    tfrdv_tcp_stats ts;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    alarm(30);
    tc.connect_retry_ns = 0; /* the default: waits while the peer is not up */
    tc.backoff_ns = SEC / 20;
    if (!cli_open(&c, upath("nobody.sock"), SEC / 2, &tc)) { TT_CHECK(0); return; }
    TT_CHECK_EQ_INT(fetch(&c, 1, "x", PS_INC, 5 * SEC, &v, &dead, &st), TFRDV_DEADLINE_EXCEEDED);
    tfrdv_tcp_get_stats(c.t, &ts);
    TT_CHECK(ts.connect_failures >= 2); /* tried again while it waited */
    TT_CHECK_EQ_INT(ts.client_calls_live, 0);
    cli_close(&c);
    tc.connect_retry_ns = SEC / 5; /* shorter than the call's deadline: UNAVAILABLE naming why */
    if (!cli_open(&c, upath("nobody.sock"), 0, &tc)) { TT_CHECK(0); return; }
    TT_CHECK_EQ_INT(fetch(&c, 1, "x", PS_INC, 5 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "accepted no connection within connect_retry_ns");
    cli_close(&c);
    tc.connect_retry_ns = TFRDV_OFF;
    tc.backoff_ns = 10 * SEC;
    if (!cli_open(&c, upath("nobody.sock"), 0, &tc)) { TT_CHECK(0); return; }
    TT_CHECK_EQ_INT(fetch(&c, 1, "x", PS_INC, 5 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "connect to");
    TT_CHECK_EQ_INT(fetch(&c, 1, "x", PS_INC, 5 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "next connect attempt in");
    tfrdv_tcp_get_stats(c.t, &ts);
    TT_CHECK_EQ_INT(ts.backoff_rejects, 1);
    TT_CHECK_EQ_INT(ts.connect_failures, 1);
    cli_close(&c);
}

/* a busy port is an error naming the address, never shared; a stale Unix file is replaced, a
   path that is not a socket is never removed */
static void test_busy_port(void) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp *a = 0, *b = 0;
    tfrdv_status st;
    char addr[128];
    srv s;
    rep r;
    alarm(30);
    tc.listen_address = "127.0.0.1:0";
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &a, &st), TFRDV_OK);
    TT_CHECK(tfrdv_tcp_port(a) > 0);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", tfrdv_tcp_port(a));
    tc.listen_address = addr;
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &b, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, addr);
    TT_CHECK_CONTAINS(st.msg, "in use");
    /* another process on the same port: refused there too */
    TT_CHECK(!srv_start(&s, addr, PS_INC, 0, &r));
    TT_CHECK_CONTAINS(r.msg, "in use");
    srv_stop(&s);
    tfrdv_tcp_destroy(a);
    /* Unix: a live server's path is refused, a stale file replaced */
    if (!srv_start(&s, upath("busy.sock"), PS_INC, 0, 0)) { TT_CHECK(0); return; }
    tc.listen_address = upath("busy.sock");
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &b, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "live server");
    srv_kill(&s);
    TT_CHECK_EQ_INT(access(upath("busy.sock") + 5, F_OK), 0); /* the dead server's file */
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &b, &st), TFRDV_OK);
    {
        struct stat sb;
        TT_CHECK(stat(upath("busy.sock") + 5, &sb) == 0 && (sb.st_mode & 0777) == 0600); /* unix_mode default */
    }
    tfrdv_tcp_destroy(b);
    TT_CHECK(access(upath("busy.sock") + 5, F_OK) != 0); /* removed by destroy */
    { /* a path that is not a socket is never removed: a regular file keeps its bytes */
        FILE* f = fopen(upath("regular.sock") + 5, "w");
        char got[8] = {0};
        TT_CHECK(f && fputs("data", f) >= 0 && fclose(f) == 0);
        tc.listen_address = upath("regular.sock");
        TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &b, &st), TFRDV_UNAVAILABLE);
        TT_CHECK_CONTAINS(st.msg, "not a socket");
        f = fopen(upath("regular.sock") + 5, "r");
        TT_CHECK(f && fgets(got, sizeof got, f) && strcmp(got, "data") == 0);
        if (f) fclose(f);
        unlink(upath("regular.sock") + 5);
    }
    tc.listen_address = "unix:/this/path/is/far/too/long/for/a/unix/socket/address/because/sun_path/holds/only/one/hundred/and/eight/bytes.sock";
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &b, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "at most");
}

/* ---- raw peers for hostile input ---- */
static int raw_connect(const char* addr) {
    int fd;
    if (strncmp(addr, "unix:", 5) == 0) {
        struct sockaddr_un un;
        memset(&un, 0, sizeof un);
        un.sun_family = AF_UNIX;
        snprintf(un.sun_path, sizeof un.sun_path, "%s", addr + 5);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr*)&un, sizeof un) != 0) { close(fd); return -1; }
    } else {
        struct sockaddr_in in;
        const char* colon = strrchr(addr, ':');
        memset(&in, 0, sizeof in);
        in.sin_family = AF_INET;
        in.sin_port = htons((uint16_t)atoi(colon + 1));
        in.sin_addr.s_addr = htonl(0x7f000001);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr*)&in, sizeof in) != 0) { close(fd); return -1; }
    }
    {
        struct timeval tv = {10, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    return fd;
}
/* reads frames until one of `type` (returns 1, frame in *f, its extra bytes skipped) or EOF (0) */
static uint8_t rbuf[1 << 16];
static size_t rlen;
static int raw_get(int fd, int type, tfrdv_tcp_frame* f, char* msg, size_t cap) {
    for (;;) {
        tfrdv_status st;
        long used;
        memset(f, 0, sizeof *f);
        used = tfrdv_tcp_decode(rbuf, rlen, 0, f, &st);
        if (used < 0) return -1;
        if (used > 0 && rlen >= (size_t)used + f->data_len) {
            int t = f->type;
            size_t total = (size_t)used + (size_t)f->data_len;
            if (msg && (t == TFRDV_TCP_ERROR || t == TFRDV_TCP_CLOSE)) snprintf(msg, cap, "%.*s", (int)f->message.len, f->message.ptr);
            memmove(rbuf, rbuf + total, rlen - total);
            rlen -= total;
            if (t == type) return 1;
            continue;
        }
        {
            ssize_t k = read(fd, rbuf + rlen, sizeof rbuf - rlen);
            if (k <= 0) return 0;
            rlen += (size_t)k;
        }
    }
}
static int raw_eof(int fd) { /* 1 when the peer closed the connection (after anything it sent) */
    char b[4096];
    for (;;) {
        ssize_t k = read(fd, b, sizeof b);
        if (k == 0 || (k < 0 && errno == ECONNRESET)) return 1;
        if (k < 0) return 0;
    }
}

typedef struct insrv { /* a serving worker in this process */
    tfrdv_tcp* t;
    tfrdv_mgr* m;
    char addr[128];
} insrv;
static int insrv_open(insrv* s, const char* listen, const tfrdv_tcp_config* base) {
    tfrdv_tcp_config tc = base ? *base : tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_status st;
    tc.listen_address = listen;
    if (tfrdv_tcp_create(&tc, &s->t, &st) != TFRDV_OK) { printf("    %s\n", st.msg); return 0; }
    mc.worker_name = PS;
    mc.incarnation = PS_INC;
    mc.transport = tfrdv_tcp_transport(s->t);
    (void)tfrdv_mgr_create(&mc, &s->m, &st);
    (void)tfrdv_tcp_attach(s->t, s->m, &st);
    snprintf(s->addr, sizeof s->addr, "%s", tfrdv_tcp_address(s->t));
    return 1;
}
static void insrv_close(insrv* s) {
    tfrdv_tcp_destroy(s->t);
    tfrdv_mgr_destroy(s->m);
}
static void wait_stats(tfrdv_tcp* t, tfrdv_tcp_stats* ts, size_t conns) {
    int i;
    for (i = 0; i < 1000; i++) {
        tfrdv_tcp_get_stats(t, ts);
        if (ts->connections == conns) return;
        sleep_ms(5);
    }
}

static const uint8_t* frame_bytes(const tfrdv_tcp_frame* f, uint8_t* buf, size_t cap) {
    (void)tfrdv_tcp_encode(f, buf, cap);
    return buf;
}
/* connects (HELLO first if hello), writes bytes; the server must answer CLOSE naming `want`,
   then close */
static void expect_close(const char* addr, int hello, const uint8_t* bytes, size_t n, const char* want) {
    tfrdv_tcp_frame f;
    char msg[256];
    int fd = raw_connect(addr);
    if (hello) raw_hello(fd, 1, PS, 0);
    (void)wr_full(fd, bytes, n);
    rlen = 0;
    msg[0] = 0;
    TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_CLOSE, &f, msg, sizeof msg), 1);
    TT_CHECK_CONTAINS(msg, want);
    TT_CHECK(raw_eof(fd));
    close(fd);
}

static void test_hostile_frames(void) {
    insrv s;
    int fd;
    tfrdv_tcp_frame f;
    tfrdv_tcp_stats ts;
    char msg[256];
    uint8_t junk[64];
    alarm(60);
    if (!insrv_open(&s, "127.0.0.1:0", 0)) { TT_CHECK(0); return; }
    /* bad magic */
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_HELLO;
    f.version = 1;
    {
        uint8_t b[64];
        size_t n = tfrdv_tcp_encode(&f, b, sizeof b);
        b[16] = 'Z';
        expect_close(s.addr, 0, b, n, "bad magic");
    }
    /* bad version (0); a later one (7) is greeted (the server's HELLO says 2: both speak 2) */
    f.version = 0;
    expect_close(s.addr, 0, frame_bytes(&f, junk, sizeof junk), tfrdv_tcp_encode(&f, 0, 0), "version 0");
    f.version = 7;
    fd = raw_connect(s.addr);
    raw_put(fd, &f);
    rlen = 0;
    TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_HELLO, &f, 0, 0), 1);
    TT_CHECK_EQ_INT(f.version, TFRDV_TCP_PROTOCOL_VERSION);
    close(fd);
    /* oversized key (the header alone says so) */
    {
        uint8_t b[16] = {2, 0, 0, 0, 0xff, 0xff, 0, 0, 1};
        expect_close(s.addr, 1, b, 16, "key limit");
    }
    /* a frame only a server sends */
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RESPONSE;
    f.id = 1;
    expect_close(s.addr, 1, frame_bytes(&f, junk, sizeof junk), tfrdv_tcp_encode(&f, 0, 0), "unexpected frame type 3");
    /* garbage */
    fd = raw_connect(s.addr);
    memset(junk, 0xa5, sizeof junk);
    (void)wr_full(fd, junk, sizeof junk);
    TT_CHECK(raw_eof(fd));
    close(fd);
    /* a truncated frame, then close; and a silent connection */
    fd = raw_connect(s.addr);
    raw_hello(fd, 1, PS, 0);
    (void)wr_full(fd, junk, 7);
    close(fd);
    /* duplicate wire id while the first is in flight */
    fd = raw_connect(s.addr);
    raw_hello(fd, 1, PS, 0);
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_REQUEST;
    f.id = 5;
    f.step_id = 1;
    f.key.ptr = "k";
    f.key.len = 1;
    raw_put(fd, &f); /* an invalid key: answered at once */
    rlen = 0;
    TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_ERROR, &f, msg, sizeof msg), 1);
    TT_CHECK_EQ_INT(f.code, TFRDV_INVALID_ARGUMENT);
    close(fd);
    wait_stats(s.t, &ts, 0);
    TT_CHECK_EQ_INT(ts.connections, 0);
    TT_CHECK_EQ_INT(ts.protocol_errors, 5);
    TT_CHECK_EQ_INT(ts.server_requests_live, 0);
    insrv_close(&s);
}

/* a Unix listener that never accepts: connects complete in its backlog, no HELLO ever comes */
static int silent_listener(const char* addr) {
    struct sockaddr_un un;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    snprintf(un.sun_path, sizeof un.sun_path, "%s", addr + 5);
    unlink(un.sun_path);
    if (bind(fd, (struct sockaddr*)&un, sizeof un) != 0 || listen(fd, 1024) != 0) { close(fd); return -1; }
    return fd;
}
/* a REQUEST as a raw client sends it */
static void raw_request(int fd, uint64_t id, const tfrdv_key* k, int64_t deadline_ns) {
    static int64_t request_id = 5000; /* unique: the serving manager drops repeated ids */
    tfrdv_tcp_frame f;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_REQUEST;
    f.id = id;
    f.step_id = 1;
    f.request_id = ++request_id;
    f.deadline_ns = deadline_ns;
    f.key.ptr = k->buf;
    f.key.len = k->len;
    raw_put(fd, &f);
}
/* times near INT64_MAX from the wire or the config saturate instead of wrapping (a wrapped
   deadline lay in the past: the request failed DEADLINE_EXCEEDED at once, a -ftrapv or UBSan
   build aborted the server on one unauthenticated frame); a negative deadline is malformed */
static void test_huge_times(void) {
    insrv s;
    cli c;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp_frame f;
    tfrdv_rendezvous* r = 0;
    tfrdv_key k1, k2;
    tfrdv_status st;
    tfrdv_value* v;
    tfrdv_tcp_stats ts;
    int fd, fd2, lfd, dead, i;
    const char* mute = upath("huge-mute.sock");
    alarm(60);
    tc.handshake_timeout_ns = INT64_MAX;
    tc.expire_interval_ns = 2000000; /* ticks every 2 ms: a wrapped deadline shows at once */
    if (!insrv_open(&s, "127.0.0.1:0", &tc)) { TT_CHECK(0); return; }
    fd2 = raw_connect(s.addr); /* silent: handshake_timeout_ns INT64_MAX never passes */
    fd = raw_connect(s.addr);
    raw_hello(fd, 1, PS, 0);
    key_for(&k1, "huge1", PS_INC);
    key_for(&k2, "huge2", PS_INC);
    raw_request(fd, 1, &k1, INT64_MAX);
    raw_request(fd, 2, &k2, INT64_MAX - 1);
    sleep_ms(50);
    (void)tfrdv_mgr_start_step(s.m, 1, &r, &st);
    (void)tfrdv_send(r, &k1.parsed, 0, mkval(1, 0, 0, 4, 1), 0, &st);
    (void)tfrdv_send(r, &k2.parsed, 0, mkval(1, 0, 0, 4, 2), 0, &st);
    rlen = 0;
    for (i = 0; i < 2; i++) {
        TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_RESPONSE, &f, 0, 0), 1); /* not an ERROR first */
        TT_CHECK_EQ_INT(f.type, TFRDV_TCP_RESPONSE);
    }
    tfrdv_tcp_get_stats(s.t, &ts);
    TT_CHECK_EQ_INT(ts.serve_ok, 2);
    TT_CHECK_EQ_INT(ts.serve_expired, 0);
    TT_CHECK_EQ_INT(ts.connections, 2); /* the silent one too, after 50 ticks */
    close(fd);
    close(fd2);
    /* negative: malformed, the peer is told */
    {
        uint8_t b[512];
        tfrdv_tcp_frame g;
        memset(&g, 0, sizeof g);
        g.type = TFRDV_TCP_REQUEST;
        g.id = 1;
        g.key.ptr = k1.buf;
        g.key.len = k1.len;
        g.deadline_ns = INT64_MIN;
        expect_close(s.addr, 1, frame_bytes(&g, b, sizeof b), tfrdv_tcp_encode(&g, 0, 0), "negative deadline");
        g.deadline_ns = -1;
        expect_close(s.addr, 1, frame_bytes(&g, b, sizeof b), tfrdv_tcp_encode(&g, 0, 0), "negative deadline");
    }
    tfrdv_unref(r);
    /* the client: connect_timeout_ns INT64_MAX to a peer that never says HELLO fails by the call's
       own deadline, not at the first tick; backoff_ns INT64_MAX - 1 keeps the next call out */
    lfd = silent_listener(mute);
    tc = tfrdv_tcp_config_init();
    tc.connect_retry_ns = TFRDV_OFF;
    tc.connect_timeout_ns = INT64_MAX;
    tc.backoff_ns = INT64_MAX - 1;
    tc.backoff_max_ns = INT64_MAX;
    tc.expire_interval_ns = 2000000;
    if (lfd < 0 || !cli_open(&c, mute, 0, &tc)) { TT_CHECK(0); insrv_close(&s); return; }
    TT_CHECK_EQ_INT(fetch(&c, 1, "x", PS_INC, SEC / 5, &v, &dead, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK(strstr(st.msg, "connect_timeout_ns") == 0);
    cli_close(&c);
    close(lfd);
    tc.connect_timeout_ns = 0;
    if (!cli_open(&c, upath("huge-nobody.sock"), 0, &tc)) { TT_CHECK(0); insrv_close(&s); return; }
    TT_CHECK_EQ_INT(fetch(&c, 1, "x", PS_INC, 5 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "connect to");
    TT_CHECK_EQ_INT(fetch(&c, 1, "x", PS_INC, 5 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "next connect attempt in");
    tfrdv_tcp_get_stats(c.t, &ts);
    TT_CHECK_EQ_INT(ts.connect_failures, 1);
    TT_CHECK_EQ_INT(ts.backoff_rejects, 1);
    cli_close(&c);
    insrv_close(&s);
}

/* every expired handshake / connect timer is acted on in the tick that finds it (one per tick
   left 1,024 silent connections open for 20 s while the connection cap turned clients away) */
typedef struct slot { int done; tfrdv_code code; char msg[256]; } slot;
static void on_slot(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    slot* s = (slot*)u;
    (void)sa; (void)ra; (void)dead;
    tfrdv_value_release(v);
    s->code = st->code;
    snprintf(s->msg, sizeof s->msg, "%s", st->msg);
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
}
static void test_all_timers_per_tick(void) {
    enum { NS = 400, NC = 100 };
    insrv s;
    cli c;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp_stats ts;
    tfrdv_rendezvous* r = 0;
    tfrdv_status st;
    static int fds[NS], lfds[NC];
    static slot slots[NC];
    int i, n, eofs = 0, named = 0;
    alarm(120);
    /* server: NS connections that never send HELLO, handshake_timeout_ns 200 ms, a tick per 20 ms:
       one per tick needed NS x 20 ms = 8 s; all are closed 3 x 200 ms + a few ticks after the
       last was accepted */
    tc.handshake_timeout_ns = SEC / 5;
    tc.max_connections = NS;
    if (!insrv_open(&s, upath("timers.sock"), &tc)) { TT_CHECK(0); return; }
    for (i = 0; i < NS; i++) fds[i] = raw_connect(s.addr);
    for (i = 0; i < 2000; i++) {
        tfrdv_tcp_get_stats(s.t, &ts);
        if (ts.accepted + ts.connections_rejected >= NS) break;
        sleep_ms(2);
    }
    TT_CHECK_EQ_INT(ts.accepted, NS);
    sleep_ms(3 * 200 + 100);
    tfrdv_tcp_get_stats(s.t, &ts);
    TT_CHECK_EQ_INT(ts.connections, 0);
    printf("    %d silent connections, 700 ms after the last accept: %d still open\n", NS, (int)ts.connections);
    for (i = 0; i < NS; i++) {
        if (fds[i] >= 0 && raw_eof(fds[i])) eofs++;
        if (fds[i] >= 0) close(fds[i]);
    }
    TT_CHECK_EQ_INT(eofs, NS);
    insrv_close(&s);
    /* client: NC calls to NC peers that accept but never say HELLO, connect_timeout_ns 200 ms;
       each call fails with its own peer's address in the status */
    tc = tfrdv_tcp_config_init();
    tc.connect_timeout_ns = SEC / 5;
    tc.connect_retry_ns = TFRDV_OFF; /* each call fails with its connection's timer */
    if (!cli_open(&c, upath("timers-none.sock"), 0, &tc)) { TT_CHECK(0); return; }
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    for (i = 0; i < NC; i++) {
        char name[64], addr[64], src[96];
        tfrdv_key k;
        tfrdv_frame_iter fi = {0, 0};
        snprintf(addr, sizeof addr, "timers-%d.sock", i);
        snprintf(addr, sizeof addr, "%s", upath(addr));
        lfds[i] = silent_listener(addr);
        snprintf(name, sizeof name, "/job:m/replica:0/task:%d", i);
        snprintf(src, sizeof src, "%s/device:CPU:0", name);
        TT_CHECK_EQ_INT(tfrdv_tcp_set_worker(c.t, name, addr, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_key_make(&k, src, 1, WK_DEV, "t", fi, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, 0, on_slot, &slots[i], 0), TFRDV_OK);
    }
    sleep_ms(3 * 200 + 100); /* one per tick needed NC x 20 ms = 2 s */
    for (i = 0, n = 0; i < NC; i++) n += __atomic_load_n(&slots[i].done, __ATOMIC_ACQUIRE);
    printf("    %d calls to silent peers, 700 ms later: %d finished\n", NC, n);
    TT_CHECK_EQ_INT(n, NC);
    for (i = 0; i < NC; i++) {
        char want[64];
        if (!__atomic_load_n(&slots[i].done, __ATOMIC_ACQUIRE)) continue;
        snprintf(want, sizeof want, "/timers-%d.sock failed: timed out", i);
        TT_CHECK_EQ_INT(slots[i].code, TFRDV_UNAVAILABLE);
        if (strstr(slots[i].msg, want)) named++;
    }
    TT_CHECK_EQ_INT(named, NC);
    tfrdv_unref(r);
    cli_close(&c);
    for (i = 0; i < NC; i++) close(lfds[i]);
}

/* reads frames (skipping value bytes as they stream) until a CLOSE (1, its message in msg) or
   EOF (0), from the rlen bytes in rbuf on; *value_bytes counts the value bytes passed */
static int raw_until_close(int fd, char* msg, size_t cap, uint64_t* value_bytes) {
    uint64_t skip = 0;
    for (;;) {
        ssize_t k;
        if (skip && rlen) {
            size_t n = rlen < skip ? rlen : (size_t)skip;
            memmove(rbuf, rbuf + n, rlen - n);
            rlen -= n;
            skip -= n;
            *value_bytes += n;
        }
        if (!skip) {
            tfrdv_tcp_frame f;
            tfrdv_status st;
            long used = tfrdv_tcp_decode(rbuf, rlen, 0, &f, &st);
            if (used < 0) return -1;
            if (used > 0) {
                if (f.type == TFRDV_TCP_CLOSE) {
                    snprintf(msg, cap, "%.*s", (int)f.message.len, f.message.ptr);
                    return 1;
                }
                memmove(rbuf, rbuf + used, rlen - (size_t)used);
                rlen -= (size_t)used;
                skip = f.data_len;
                continue;
            }
        }
        if (skip && rlen) continue;
        k = read(fd, rbuf + rlen, sizeof rbuf - rlen);
        if (k <= 0) return 0;
        rlen += (size_t)k;
    }
}
/* a malformed frame while a large response is mid-frame: the frame in progress is finished, then
   the CLOSE naming the defect follows (it was dropped: the peer saw DATA, then EOF) */
static void test_close_while_streaming(void) {
    insrv s;
    tfrdv_rendezvous* r = 0;
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_tcp_stats ts;
    char msg[256];
    uint8_t junk[64], head[65536];
    uint64_t got = 0;
    int64_t dims[1];
    size_t have = 0;
    int fd, round, found = 0;
    alarm(60);
    if (!insrv_open(&s, "127.0.0.1:0", 0)) { TT_CHECK(0); return; }
    (void)tfrdv_mgr_start_step(s.m, 1, &r, &st);
    memset(junk, 0xa5, sizeof junk);
    for (round = 0; round < 3; round++) {
        char e[16];
        snprintf(e, sizeof e, "big%d", round);
        key_for(&k, e, PS_INC);
        dims[0] = 8 << 20;
        (void)tfrdv_send(r, &k.parsed, 0, mkval(3, 1, dims, (uint64_t)32 << 20, 7), 0, &st); /* 32 MiB */
        fd = raw_connect(s.addr);
        raw_hello(fd, 1, PS, 0);
        raw_request(fd, 1, &k, 0);
        for (have = 0; have < sizeof head;) { /* a little of it */
            ssize_t n = read(fd, head + have, sizeof head - have);
            if (n <= 0) break;
            have += (size_t)n;
        }
        sleep_ms(50); /* the server's socket is full, its writer mid-frame */
        (void)wr_full(fd, junk, sizeof junk);
        msg[0] = 0;
        memcpy(rbuf, head, have);
        rlen = have;
        if (raw_until_close(fd, msg, sizeof msg, &got) == 1 && strstr(msg, "unknown frame type 165")) found++;
        TT_CHECK(raw_eof(fd));
        close(fd);
    }
    TT_CHECK_EQ_INT(found, 3);
    TT_CHECK_CONTAINS(msg, "unknown frame type 165");
    wait_stats(s.t, &ts, 0);
    for (round = 0; round < 2000 && ts.values_returned < 3; round++) { /* counted once back, after */
        sleep_ms(5);                                                   /* the connection is gone */
        tfrdv_tcp_get_stats(s.t, &ts);
    }
    TT_CHECK_EQ_INT(ts.protocol_errors, 3);
    TT_CHECK_EQ_INT(ts.values_returned, 3); /* the undelivered values went back */
    tfrdv_unref(r);
    insrv_close(&s);
}

/* duplicate ids: the same tfrdv request id twice (the core answers ABORTED), the same wire id
   twice on one connection (a protocol error) */
static void test_duplicate_ids(void) {
    insrv s;
    int fd, got_ok = 0, got_dup = 0, i;
    tfrdv_tcp_frame f;
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_rendezvous* r;
    char msg[256];
    alarm(60);
    if (!insrv_open(&s, "127.0.0.1:0", 0)) { TT_CHECK(0); return; }
    key_for(&k, "dup", PS_INC);
    fd = raw_connect(s.addr);
    raw_hello(fd, 1, PS, 0);
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_REQUEST;
    f.step_id = 1;
    f.request_id = 4242;
    f.key.ptr = k.buf;
    f.key.len = k.len;
    f.id = 1;
    raw_put(fd, &f);
    f.id = 2;
    raw_put(fd, &f);
    sleep_ms(50);
    (void)tfrdv_mgr_start_step(s.m, 1, &r, &st);
    (void)tfrdv_send(r, &k.parsed, 0, mkval(1, 0, 0, 4, 1), 0, &st);
    rlen = 0;
    for (i = 0; i < 2; i++) {
        int kind;
        tfrdv_tcp_frame g;
        for (;;) { /* next RESPONSE or ERROR */
            tfrdv_status ds;
            long used = tfrdv_tcp_decode(rbuf, rlen, 0, &g, &ds);
            if (used > 0 && rlen >= (size_t)used + g.data_len && g.type != TFRDV_TCP_HELLO) {
                kind = g.type;
                if (kind == TFRDV_TCP_ERROR) snprintf(msg, sizeof msg, "%.*s", (int)g.message.len, g.message.ptr);
                memmove(rbuf, rbuf + used + g.data_len, rlen - (size_t)used - g.data_len);
                rlen -= (size_t)used + g.data_len;
                break;
            }
            if (used > 0 && rlen >= (size_t)used + g.data_len) {
                memmove(rbuf, rbuf + used, rlen - (size_t)used);
                rlen -= (size_t)used;
                continue;
            }
            {
                ssize_t n = read(fd, rbuf + rlen, sizeof rbuf - rlen);
                if (n <= 0) { kind = -1; break; }
                rlen += (size_t)n;
            }
        }
        if (kind == TFRDV_TCP_RESPONSE) got_ok++;
        if (kind == TFRDV_TCP_ERROR && g.code == TFRDV_ABORTED) got_dup++;
    }
    TT_CHECK_EQ_INT(got_ok, 1);
    TT_CHECK_EQ_INT(got_dup, 1);
    /* the same wire id again while in flight */
    f.id = 9;
    f.request_id = 1;
    raw_put(fd, &f);
    raw_put(fd, &f);
    TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_CLOSE, &f, msg, sizeof msg), 1);
    TT_CHECK_CONTAINS(msg, "already in flight");
    close(fd);
    tfrdv_unref(r);
    insrv_close(&s);
}

/* a hostile server: oversized or malformed responses fail the call, never crash the client */
static void test_hostile_server(void) {
    int lfd, fd;
    struct sockaddr_un un;
    cli c;
    tfrdv_status st;
    tfrdv_value* v;
    int dead;
    pid_t pid;
    int status;
    const char* a = upath("evil.sock");
    alarm(60);
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    snprintf(un.sun_path, sizeof un.sun_path, "%s", a + 5);
    unlink(un.sun_path);
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    TT_CHECK(bind(lfd, (struct sockaddr*)&un, sizeof un) == 0 && listen(lfd, 4) == 0);
    fflush(stdout);
    pid = fork();
    if (pid == 0) { /* answer each connection's first request with a poisoned response */
        int round;
        alarm(30);
        for (round = 0; round < 3; round++) {
            tfrdv_tcp_frame f;
            fd = accept(lfd, 0, 0);
            if (fd < 0) _exit(1);
            raw_hello(fd, 1, PS, 0);
            rlen = 0;
            if (raw_get(fd, TFRDV_TCP_REQUEST, &f, 0, 0) != 1) _exit(2);
            memset(&f, 0, sizeof f);
            f.type = TFRDV_TCP_RESPONSE;
            f.id = 1 + (uint64_t)round;
            f.dtype = 1;
            if (round == 0) { f.bytes = (uint64_t)1 << 45; raw_put(fd, &f); }                 /* over max_tensor_bytes */
            if (round == 1) { f.rank = 1; f.dims[0] = 1; f.bytes = 4; f.data_len = 4; raw_put(fd, &f); (void)wr_full(fd, "ab", 2); } /* closes mid-value */
            if (round == 2) { uint8_t b[64]; size_t n = tfrdv_tcp_encode(&f, b, sizeof b); b[20] = 255; (void)wr_full(fd, b, n); } /* rank 255 */
            sleep_ms(100);
            close(fd);
        }
        _exit(0);
    }
    close(lfd);
    if (!cli_open(&c, a, 0, 0)) { TT_CHECK(0); return; }
    TT_CHECK_EQ_INT(fetch(&c, 1, "e0", PS_INC, 10 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "max_tensor_bytes");
    TT_CHECK_EQ_INT(fetch(&c, 1, "e1", PS_INC, 10 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "middle of a value");
    TT_CHECK_EQ_INT(fetch(&c, 1, "e2", PS_INC, 10 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "rank 255");
    waitpid(pid, &status, 0);
    TT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cli_close(&c);
}

/* ---- peer-chosen bytes: escaped in statuses and logs; the worker a client dialled must answer ---- */
enum { ACT_ERROR = 1, ACT_CLOSE = 2, ACT_VALUE = 3 };
typedef struct hround { const char* name; int act; uint32_t code, detail; const char* msg; } hround;
/* a fake server on a Unix path: per round one connection, HELLO as name, then the act for its
   first REQUEST; the connection is closed 300 ms later */
static pid_t hostile_server(const char* addr, const hround* rounds, int n) {
    struct sockaddr_un un;
    int lfd;
    pid_t pid;
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    snprintf(un.sun_path, sizeof un.sun_path, "%s", addr + 5);
    unlink(un.sun_path);
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (bind(lfd, (struct sockaddr*)&un, sizeof un) != 0 || listen(lfd, 4) != 0) return -1;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        int i;
        alarm(30);
        for (i = 0; i < n; i++) {
            tfrdv_tcp_frame f;
            uint64_t id;
            int fd = accept(lfd, 0, 0);
            if (fd < 0) _exit(1);
            raw_hello(fd, 1, rounds[i].name, 0);
            rlen = 0;
            if (raw_get(fd, TFRDV_TCP_REQUEST, &f, 0, 0) != 1) _exit(2);
            id = f.id;
            memset(&f, 0, sizeof f);
            f.id = id;
            if (rounds[i].act == ACT_ERROR || rounds[i].act == ACT_CLOSE) {
                f.type = rounds[i].act == ACT_ERROR ? TFRDV_TCP_ERROR : TFRDV_TCP_CLOSE;
                f.code = rounds[i].code;
                f.detail = rounds[i].detail;
                f.message.ptr = rounds[i].msg;
                f.message.len = strlen(rounds[i].msg);
                if (f.type == TFRDV_TCP_CLOSE) f.id = 0;
                raw_put(fd, &f);
            } else {
                uint8_t b[256];
                size_t k;
                f.type = TFRDV_TCP_RESPONSE;
                f.dtype = 1;
                f.bytes = 4;
                f.data_len = 4;
                k = tfrdv_tcp_encode(&f, b, sizeof b);
                memcpy(b + k, "\1\2\3\4", 4);
                (void)wr_full(fd, b, k + 4);
            }
            sleep_ms(300);
            close(fd);
        }
        _exit(0);
    }
    close(lfd);
    return pid;
}
static int has_control(const char* s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) return 1;
    return 0;
}
#define EVIL "\n[forged] \x1b[31mred\x1b[0m"
/* names and messages a peer chose reach statuses and logs escaped: a line break cannot forge a
   log line, an escape sequence cannot reach a terminal */
static void test_peer_bytes_escaped(void) {
    static const hround rounds[] = {
        {PS, ACT_ERROR, TFRDV_NOT_FOUND, 0, "no such value" EVIL},
        {PS, ACT_CLOSE, TFRDV_UNAVAILABLE, 0, "going away" EVIL},
        {"/job:ps" EVIL, ACT_VALUE, 0, 0, ""},
    };
    const char* a = upath("evil-names.sock");
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    insrv s;
    cli c;
    tfrdv_status st;
    tfrdv_tcp_stats ts;
    tfrdv_value* v;
    uint8_t junk[64];
    int dead, status, fd;
    pid_t pid;
    alarm(60);
    loglen = 0;
    logbuf[0] = 0;
    tc.hooks.logger.fn = log_capture;
    /* the server's log: a client whose HELLO name is hostile, then a malformed frame */
    if (!insrv_open(&s, "127.0.0.1:0", &tc)) { TT_CHECK(0); return; }
    fd = raw_connect(s.addr);
    raw_hello(fd, 1, "/job:x" EVIL, 0);
    memset(junk, 0xa5, sizeof junk);
    (void)wr_full(fd, junk, sizeof junk);
    TT_CHECK(raw_eof(fd));
    close(fd);
    wait_stats(s.t, &ts, 0);
    insrv_close(&s);
    pthread_mutex_lock(&logmu);
    TT_CHECK_CONTAINS(logbuf, "connection from /job:x\\x0a[forged] \\x1b[31mred");
    TT_CHECK(!has_control(logbuf));
    pthread_mutex_unlock(&logmu);
    /* the client's statuses: ERROR and CLOSE messages and a HELLO name from a hostile server */
    pid = hostile_server(a, rounds, 3);
    TT_CHECK(pid > 0);
    if (pid <= 0 || !cli_open(&c, a, 0, &tc)) { TT_CHECK(0); return; }
    TT_CHECK_EQ_INT(fetch(&c, 1, "e0", PS_INC, 10 * SEC, &v, &dead, &st), TFRDV_NOT_FOUND);
    TT_CHECK_CONTAINS(st.msg, "no such value\\x0a[forged] \\x1b[31mred");
    TT_CHECK(!has_control(st.msg));
    wait_stats(c.t, &ts, 0);
    TT_CHECK_EQ_INT(fetch(&c, 1, "e1", PS_INC, 10 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "going away\\x0a[forged]");
    TT_CHECK(!has_control(st.msg));
    wait_stats(c.t, &ts, 0);
    TT_CHECK(fetch(&c, 1, "e2", PS_INC, 10 * SEC, &v, &dead, &st) != TFRDV_OK);
    TT_CHECK_CONTAINS(st.msg, "/job:ps\\x0a[forged] \\x1b[31mred");
    TT_CHECK(!has_control(st.msg));
    waitpid(pid, &status, 0);
    TT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cli_close(&c);
    pthread_mutex_lock(&logmu);
    TT_CHECK(!has_control(logbuf));
    pthread_mutex_unlock(&logmu);
}
/* a server answering as another worker than the one dialled (or as none) serves nothing: the
   fetch fails FAILED_PRECONDITION naming both, so do later calls on that connection */
static void test_impostor_refused(void) {
    static const hround rounds[] = {
        {"/job:impostor/replica:0/task:0", ACT_VALUE, 0, 0, ""},
        {"", ACT_VALUE, 0, 0, ""},
        {PS, ACT_VALUE, 0, 0, ""},
    };
    const char* a = upath("impostor.sock");
    cli c;
    tfrdv_status st;
    tfrdv_tcp_stats ts;
    tfrdv_value* v;
    int dead, status;
    pid_t pid;
    alarm(60);
    pid = hostile_server(a, rounds, 3);
    if (pid <= 0 || !cli_open(&c, a, 0, 0)) { TT_CHECK(0); return; }
    TT_CHECK_EQ_INT(fetch(&c, 1, "e0", PS_INC, 10 * SEC, &v, &dead, &st), TFRDV_FAILED_PRECONDITION);
    tfrdv_value_release(v);
    TT_CHECK_CONTAINS(st.msg, "answered as worker /job:impostor/replica:0/task:0, not " PS);
    TT_CHECK_CONTAINS(st.msg, "impostor.sock");
    TT_CHECK_EQ_INT(fetch(&c, 1, "e0b", PS_INC, 10 * SEC, &v, &dead, &st), TFRDV_FAILED_PRECONDITION);
    TT_CHECK_CONTAINS(st.msg, "answered as worker /job:impostor");
    tfrdv_tcp_get_stats(c.t, &ts);
    TT_CHECK_EQ_INT(ts.connects, 1); /* the second failed at once on the same connection */
    TT_CHECK_EQ_INT(ts.calls_ok, 0);
    wait_stats(c.t, &ts, 0);
    TT_CHECK_EQ_INT(fetch(&c, 1, "e1", PS_INC, 10 * SEC, &v, &dead, &st), TFRDV_FAILED_PRECONDITION);
    TT_CHECK_CONTAINS(st.msg, "answered as no worker");
    wait_stats(c.t, &ts, 0);
    TT_CHECK_EQ_INT(fetch(&c, 1, "e2", PS_INC, 10 * SEC, &v, &dead, &st), TFRDV_OK); /* the real one */
    TT_CHECK(v && v->size == 4 && memcmp(v->data, "\1\2\3\4", 4) == 0);
    tfrdv_value_release(v);
    waitpid(pid, &status, 0);
    TT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cli_close(&c);
}
/* an ERROR frame's detail is passed on only when known (code acts on it: WORKER_RESTARTED) */
static void test_error_detail_checked(void) {
    static const hround rounds[] = {
        {PS, ACT_ERROR, TFRDV_ABORTED, 77, "made up"},
        {PS, ACT_ERROR, TFRDV_ABORTED, TFRDV_DETAIL_WORKER_RESTARTED, "restarted"},
    };
    const char* a = upath("detail.sock");
    cli c;
    tfrdv_rendezvous* r;
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_tcp_stats ts;
    waiter* w = waiter_new();
    int status;
    pid_t pid;
    alarm(60);
    pid = hostile_server(a, rounds, 2);
    if (pid <= 0 || !cli_open(&c, a, 0, 0)) { TT_CHECK(0); waiter_free(w); return; }
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    key_for(&k, "d0", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, 0, on_recv, w, 0), TFRDV_OK);
    TT_CHECK(waiter_wait(w, 1, 10 * SEC));
    wait_stats(c.t, &ts, 0);
    key_for(&k, "d1", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, 0, on_recv, w, 0), TFRDV_OK);
    TT_CHECK(waiter_wait(w, 2, 10 * SEC));
    TT_CHECK_EQ_INT(w->code[0], TFRDV_ABORTED);
    TT_CHECK_EQ_INT(w->detail[0], 0);
    TT_CHECK_EQ_INT(w->code[1], TFRDV_ABORTED);
    TT_CHECK_EQ_INT(w->detail[1], TFRDV_DETAIL_WORKER_RESTARTED);
    tfrdv_unref(r);
    waitpid(pid, &status, 0);
    TT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cli_close(&c);
    waiter_free(w);
}

static long rss_kib(void) {
    FILE* f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (!f) return 0;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}
/* 100,000 requests on one connection: the per-connection cap answers the excess at once, and the
   memory comes back once the connection closes */
/* an allocator hook that counts what is live */
typedef struct counting { long live, calls; size_t bytes; } counting;
static void* c_alloc(void* u, size_t n) {
    counting* c = (counting*)u;
    __atomic_add_fetch(&c->live, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&c->calls, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&c->bytes, n, __ATOMIC_SEQ_CST);
    return malloc(n);
}
static void c_free(void* u, void* p, size_t n) {
    counting* c = (counting*)u;
    __atomic_sub_fetch(&c->live, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&c->bytes, n, __ATOMIC_SEQ_CST);
    free(p);
}
/* writes n REQUEST frames (ids from id0, steps never started: deferred on the server) from a
   child process; while drain is set this process reads the answers until `served` reaches
   want; returns the child's pid (reaped here when drained) */
static pid_t flood(int fd, int n, uint64_t id0) {
    uint8_t* big = (uint8_t*)malloc((size_t)n * 256);
    size_t off = 0;
    tfrdv_key k;
    int i;
    pid_t pid;
    key_for(&k, "flood", PS_INC);
    for (i = 0; i < n; i++) {
        tfrdv_tcp_frame f;
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_REQUEST;
        f.id = id0 + (uint64_t)i;
        f.step_id = 100 + (int64_t)id0 + i;
        f.request_id = (int64_t)id0 + i;
        f.key.ptr = k.buf;
        f.key.len = k.len;
        off += tfrdv_tcp_encode(&f, big + off, 256);
    }
    fflush(stdout);
    pid = fork(); /* another process writes: the server answers while it reads */
    if (pid == 0) { alarm(60); (void)wr_full(fd, big, off); free(big); _exit(0); }
    free(big);
    return pid;
}
/* 100,000 requests on one connection: the per-connection cap answers the excess at once, and the
   memory comes back once the connection closes; a peer that never reads its answers is cut off */
static void test_request_flood(void) {
    insrv s;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp_stats ts;
    long before, after, slack = 64 * 1024;
    size_t live0;
    int fd, i, status;
    pid_t pid;
    char sink[65536];
    counting cnt;
    alarm(120);
    memset(&cnt, 0, sizeof cnt);
    tc.max_requests_per_connection = 2000;
    tc.hooks.allocator.alloc_fn = c_alloc;
    tc.hooks.allocator.free_fn = c_free;
    tc.hooks.allocator.user = &cnt;
    if (!insrv_open(&s, "127.0.0.1:0", &tc)) { TT_CHECK(0); return; }
    before = rss_kib();
    live0 = cnt.bytes;
    fd = raw_connect(s.addr);
    raw_hello(fd, 1, PS, 0);
    pid = flood(fd, 100000, 1);
    for (i = 0; i < 60000; i++) { /* read the answers until every request was handled */
        ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n > 0) continue;
        tfrdv_tcp_get_stats(s.t, &ts);
        if (ts.served == 100000) break;
        sleep_ms(1);
    }
    waitpid(pid, &status, 0);
    TT_CHECK_EQ_INT(ts.served, 100000);
    TT_CHECK(ts.requests_rejected >= 90000);
    TT_CHECK(ts.server_requests_live <= 2000);
    TT_CHECK_EQ_INT(ts.protocol_errors, 0);
    close(fd);
    wait_stats(s.t, &ts, 0);
    for (i = 0; i < 1000 && ts.server_requests_live; i++) { sleep_ms(5); tfrdv_tcp_get_stats(s.t, &ts); }
    TT_CHECK_EQ_INT(ts.server_requests_live, 0);
    {
        tfrdv_mgr_stats ms;
        tfrdv_mgr_expire(s.m, tfrdv_mgr_now(s.m));
        tfrdv_mgr_get_stats(s.m, &ms);
        TT_CHECK_EQ_INT(ms.active_steps, 0); /* withdrawn deferred requests left no steps behind */
    }
    after = rss_kib();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    slack = 192 * 1024; /* the sanitizers keep freed memory in quarantine */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    slack = 192 * 1024;
#endif
#endif
    printf("    request flood: RSS %ld KiB before, %ld KiB after; the companion's memory %zu KiB before, %zu KiB after (%llu rejected)\n",
           before, after, live0 / 1024, cnt.bytes / 1024, (unsigned long long)ts.requests_rejected);
    TT_CHECK(after - before < slack);
    TT_CHECK(cnt.bytes < live0 + ((size_t)1 << 20)); /* back to the start, but for capped free lists */
    /* the same flood from a peer that never reads: closed once 8 MiB of answers wait for it */
    fd = raw_connect(s.addr);
    raw_hello(fd, 1, PS, 0);
    pid = flood(fd, 100000, 1);
    wait_stats(s.t, &ts, 0);
    for (i = 0; i < 2000 && ts.protocol_errors == 0; i++) { sleep_ms(5); tfrdv_tcp_get_stats(s.t, &ts); }
    TT_CHECK_EQ_INT(ts.protocol_errors, 1);
    TT_CHECK_EQ_INT(ts.connections, 0);
    close(fd);
    waitpid(pid, &status, 0);
    for (i = 0; i < 1000 && ts.server_requests_live; i++) { sleep_ms(5); tfrdv_tcp_get_stats(s.t, &ts); }
    TT_CHECK_EQ_INT(ts.server_requests_live, 0);
    insrv_close(&s);
}

/* a flood of connections: beyond max_connections each is closed at once */
static void test_connection_flood(void) {
    insrv s;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp_stats ts;
    int fds[64], i, closed = 0;
    alarm(60);
    tc.max_connections = 8;
    if (!insrv_open(&s, upath("cflood.sock"), &tc)) { TT_CHECK(0); return; }
    for (i = 0; i < 64; i++) if ((fds[i] = raw_connect(s.addr)) >= 0) raw_hello(fds[i], 1, PS, 0);
    for (i = 0; i < 1000; i++) {
        tfrdv_tcp_get_stats(s.t, &ts);
        if (ts.accepted + ts.connections_rejected >= 64) break;
        sleep_ms(5);
    }
    TT_CHECK_EQ_INT(ts.accepted, 8);
    TT_CHECK_EQ_INT(ts.connections_rejected, 56);
    TT_CHECK_EQ_INT(ts.connections, 8);
    for (i = 0; i < 64; i++) {
        tfrdv_tcp_frame f;
        rlen = 0;
        if (fds[i] >= 0 && raw_get(fds[i], TFRDV_TCP_HELLO, &f, 0, 0) != 1) closed++;
    }
    TT_CHECK_EQ_INT(closed, 56);
    for (i = 0; i < 64; i++) if (fds[i] >= 0) close(fds[i]);
    wait_stats(s.t, &ts, 0);
    TT_CHECK_EQ_INT(ts.connections, 0);
    insrv_close(&s);
}

/* destroy with calls in flight: each completes exactly once; the serving side withdraws */
static void test_destroy_in_flight(void) {
    insrv s;
    cli c;
    tfrdv_status st;
    tfrdv_rendezvous* r;
    waiter* w = waiter_new();
    tfrdv_tcp_stats ts;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    int i;
    alarm(60);
    tc.connect_retry_ns = SEC / 5; /* the calls after the server went wait a little, then fail */
    if (!insrv_open(&s, "127.0.0.1:0", 0)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, 0, &tc)) { TT_CHECK(0); insrv_close(&s); return; }
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    post_recvs(r, "never", 10, w);
    for (i = 0; i < 1000; i++) { tfrdv_tcp_get_stats(s.t, &ts); if (ts.server_requests_live == 10) break; sleep_ms(5); }
    TT_CHECK_EQ_INT(ts.server_requests_live, 10);
    insrv_close(&s); /* the server first: its serves are withdrawn, the client's calls fail */
    TT_CHECK(waiter_wait(w, 10, 10 * SEC));
    for (i = 0; i < 10; i++) TT_CHECK_EQ_INT(w->code[i], TFRDV_UNAVAILABLE);
    post_recvs(r, "again", 10, w);
    TT_CHECK(waiter_wait(w, 20, 10 * SEC)); /* no server: connect fails, waits, fails */
    for (i = 10; i < 20; i++) TT_CHECK_EQ_INT(w->code[i], TFRDV_UNAVAILABLE);
    tfrdv_unref(r);
    cli_close(&c);
    sleep_ms(20);
    TT_CHECK_EQ_INT(w->n, 20); /* exactly once each */
    waiter_free(w);
}
static void test_destroy_client_in_flight(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_rendezvous* r;
    waiter* w = waiter_new();
    int i;
    rep rp;
    alarm(60);
    if (!pair_open(&s, &c, "127.0.0.1:0", 0, 0)) return;
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    post_recvs(r, "never", 10, w);
    SRV_UNTIL(&s, rp, rp.ts.server_requests_live == 10);
    tfrdv_tcp_destroy(c.t); /* calls in flight fail CANCELLED, exactly once */
    TT_CHECK(waiter_wait(w, 10, 10 * SEC));
    for (i = 0; i < 10; i++) TT_CHECK_EQ_INT(w->code[i], TFRDV_CANCELLED);
    SRV_UNTIL(&s, rp, rp.ts.server_requests_live == 0);
    TT_CHECK_EQ_INT(rp.ts.server_requests_live, 0); /* the server withdrew them */
    {
        tfrdv_key k;
        key_for(&k, "after", PS_INC);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, 0, on_recv, w, 0), TFRDV_OK);
        TT_CHECK(waiter_wait(w, 11, 10 * SEC));
        TT_CHECK_EQ_INT(w->code[10], TFRDV_UNAVAILABLE);
    }
    tfrdv_unref(r);
    tfrdv_mgr_destroy(c.m);
    srv_stop(&s);
    waiter_free(w);
}

/* A thread blocked in tfrdv_recv reads its own response (tfrdv_transport.wait): values of every
   size arrive right, many such threads and async receives share one connection, and a lent
   thread still completes at once when its receive is cancelled, times out, the transport is
   destroyed or the peer dies. */
typedef struct lent {
    cli* c;
    const char* edge;
    int64_t timeout_ns;
    tfrdv_cancel_mgr* cm;
    tfrdv_code code;
    tfrdv_value* v;
    char msg[TFRDV_STATUS_MSG_MAX];
} lent;
static void* lent_recv(void* p) {
    lent* l = (lent*)p;
    tfrdv_rendezvous* r;
    tfrdv_key k;
    tfrdv_args a;
    tfrdv_status st;
    int dead;
    memset(&a, 0, sizeof a);
    a.cancel = l->cm;
    (void)tfrdv_mgr_start_step(l->c->m, 1, &r, &st);
    key_for(&k, l->edge, PS_INC);
    l->code = tfrdv_recv(r, &k.parsed, &a, l->timeout_ns, &l->v, &dead, &st);
    snprintf(l->msg, sizeof l->msg, "%s", st.msg);
    tfrdv_unref(r);
    return 0;
}
static void lent_init(lent* l, cli* c, const char* edge) {
    memset(l, 0, sizeof *l);
    l->c = c;
    l->edge = edge;
}
/* starts lent_recv on a thread and returns once its thread is lent (the request is at the
   server: served counts it; the client counts the lent wait) */
static void lent_start(pthread_t* th, lent* l, srv* s, uint64_t served_before) {
    tfrdv_tcp_stats ts;
    rep rp;
    int i;
    uint64_t lent0;
    tfrdv_tcp_get_stats(l->c->t, &ts);
    lent0 = ts.waits_lent;
    pthread_create(th, 0, lent_recv, l);
    SRV_UNTIL(s, rp, rp.ts.served > served_before);
    for (i = 0; i < 1000; i++) { tfrdv_tcp_get_stats(l->c->t, &ts); if (ts.waits_lent > lent0) break; sleep_ms(5); }
    TT_CHECK(ts.waits_lent > lent0);
}
/* the server sends edge (4 bytes), the client fetches it: the connection is open and greeted */
static void warm(srv* s, cli* c, const char* edge) {
    tfrdv_value* v;
    tfrdv_status st;
    int dead;
    TT_CHECK_EQ_INT(srv_send(s, 1, edge, 1, 0, 0, 4, 1).code, 0);
    TT_CHECK_EQ_INT(fetch(c, 1, edge, PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
    tfrdv_value_release(v);
}
typedef struct many { cli* c; int base, n, ok; } many;
static void* many_recv(void* p) {
    many* m = (many*)p;
    int i;
    for (i = 0; i < m->n; i++) {
        char e[32];
        tfrdv_value* v;
        tfrdv_status st;
        int dead;
        snprintf(e, sizeof e, "par_%d", m->base + i);
        if (fetch(m->c, 2, e, PS_INC, 30 * SEC, &v, &dead, &st) == TFRDV_OK && v && v->size == 4096 &&
            check((uint8_t*)v->data, 4096, 40u + (unsigned)(m->base + i)))
            m->ok++;
        tfrdv_value_release(v);
    }
    return 0;
}
static void test_recv_reads_its_own_response(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_tcp_stats t0, t1;
    tfrdv_rendezvous* r;
    waiter* w = waiter_new();
    pthread_t th[8];
    many m[8];
    static const uint64_t sizes[] = {1, 4096, (3u << 20) + 5};
    int i, ok = 0;
    alarm(120);
    if (!pair_open(&s, &c, "127.0.0.1:0", 0, 0)) return;
    warm(&s, &c, "warm"); /* connects */
    tfrdv_tcp_get_stats(c.t, &t0);
    for (i = 0; i < 3; i++) { /* the value is sent once the thread is lent: it reads the response
                                 (sent earlier, the response can beat the thread to its wait and
                                 be read by the I/O thread: a correct answer, one hand-off slower) */
        char e[16];
        int64_t d[1];
        lent l;
        pthread_t lt;
        d[0] = (int64_t)sizes[i];
        snprintf(e, sizeof e, "size_%d", i);
        lent_init(&l, &c, e);
        l.timeout_ns = 30 * SEC;
        lent_start(&lt, &l, &s, srv_stats(&s).ts.served);
        TT_CHECK_EQ_INT(srv_send(&s, 1, e, 4, 1, d, sizes[i], 10u + (unsigned)i).code, 0);
        pthread_join(lt, 0);
        TT_CHECK_EQ_INT(l.code, TFRDV_OK);
        TT_CHECK(l.v && l.v->size == sizes[i] && check((uint8_t*)l.v->data, sizes[i], 10u + (unsigned)i));
        tfrdv_value_release(l.v);
    }
    tfrdv_tcp_get_stats(c.t, &t1);
    TT_CHECK_EQ_INT(t1.waits_lent, t0.waits_lent + 3); /* each read by the thread that waited */
    TT_CHECK_EQ_INT(t1.waits_declined, t0.waits_declined);
    TT_CHECK_EQ_INT(t1.connects, 1);
    /* 8 threads x 50 receives and 50 async receives on the one connection, values sent later */
    (void)tfrdv_mgr_start_step(c.m, 2, &r, &st);
    post_recvs(r, "par_async_", 50, w);
    for (i = 0; i < 8; i++) {
        m[i].c = &c;
        m[i].base = i * 50;
        m[i].n = 50;
        m[i].ok = 0;
        pthread_create(&th[i], 0, many_recv, &m[i]);
    }
    TT_CHECK_EQ_INT(srv_send_n(&s, 2, "par", 3, 1, d1024, 4096, 40, 400).code, 0);
    TT_CHECK_EQ_INT(srv_send_n(&s, 2, "par_async", 3, 1, d1024, 4096, 40, 50).code, 0);
    for (i = 0; i < 8; i++) {
        pthread_join(th[i], 0);
        ok += m[i].ok;
    }
    TT_CHECK_EQ_INT(ok, 400);
    TT_CHECK(waiter_wait(w, 50, 30 * SEC));
    for (i = 0, ok = 0; i < 50; i++) ok += w->code[i] == TFRDV_OK && w->v[i] && w->v[i]->size == 4096;
    TT_CHECK_EQ_INT(ok, 50);
    tfrdv_tcp_get_stats(c.t, &t0);
    TT_CHECK(t0.waits_lent > t1.waits_lent);
    TT_CHECK_EQ_INT(t0.client_calls_live, 0);
    TT_CHECK_EQ_INT(t0.calls_ok, t0.calls_started);
    tfrdv_unref(r);
    cli_close(&c);
    srv_stop(&s);
    waiter_free(w);
}
/* Between fetches the connection stays with the threads blocked in tfrdv_recv (out of the
   event loop: no epoll_ctl pair per fetch): every one of a run of blocking fetches is read by its
   own thread. An async receive on it still completes (start_call hands the connection back:
   the tick, an hour away here, would be too late), and a connection left that way is watched
   again after a tick: the server's end is seen with no call in flight. */
static void test_lent_connection_kept_between_fetches(void) {
    srv s;
    cli c, c2;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp_stats t0, t1;
    tfrdv_rendezvous* r;
    tfrdv_status st;
    tfrdv_value* v;
    waiter* w = waiter_new();
    int i, ok = 0, dead;
    alarm(120);
    tc.expire_interval_ns = 3600 * SEC;
    if (!pair_open(&s, &c, "127.0.0.1:0", 0, &tc)) { waiter_free(w); return; }
    warm(&s, &c, "warm"); /* connected and greeted (the loop read that answer) */
    {   /* one fetch read by its own thread for sure (its value sent once the thread is lent: a
           loaded machine lets the loop beat a thread to an answer already on its way); from
           then on the connection is kept */
        lent l;
        pthread_t lt;
        lent_init(&l, &c, "first");
        l.timeout_ns = 30 * SEC;
        lent_start(&lt, &l, &s, srv_stats(&s).ts.served);
        TT_CHECK_EQ_INT(srv_send(&s, 1, "first", 3, 1, d1024, 4096, 59).code, 0);
        pthread_join(lt, 0);
        TT_CHECK_EQ_INT(l.code, TFRDV_OK);
        tfrdv_value_release(l.v);
    }
    TT_CHECK_EQ_INT(srv_send_n(&s, 1, "kept", 3, 1, d1024, 4096, 60, 20).code, 0);
    tfrdv_tcp_get_stats(c.t, &t0);
    for (i = 0; i < 20; i++) {
        char e[32];
        snprintf(e, sizeof e, "kept_%d", i);
        if (fetch(&c, 1, e, PS_INC, 30 * SEC, &v, &dead, &st) == TFRDV_OK && v && v->size == 4096 &&
            check((uint8_t*)v->data, 4096, 60u + (unsigned)i))
            ok++;
        tfrdv_value_release(v);
    }
    tfrdv_tcp_get_stats(c.t, &t1);
    TT_CHECK_EQ_INT(ok, 20);
#ifndef TFRDV_TCP_NO_EPOLL /* (the poll() loop watches every connection nobody reads) */
    TT_CHECK_EQ_INT(t1.waits_lent - t0.waits_lent, 20); /* the loop never read one of them */
#endif
    TT_CHECK_EQ_INT(t1.waits_declined, t0.waits_declined);
    TT_CHECK_EQ_INT(srv_send(&s, 1, "async_0", 3, 1, d1024, 4096, 61).code, 0);
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    post_recvs(r, "async_", 1, w); /* no thread will read it: the loop must */
    TT_CHECK(waiter_wait(w, 1, 30 * SEC));
    TT_CHECK(w->n == 1 && w->code[0] == TFRDV_OK && w->v[0] && check((uint8_t*)w->v[0]->data, 4096, 61));
    tfrdv_unref(r);
    TT_CHECK_EQ_INT(srv_send(&s, 1, "again", 3, 1, d1024, 4096, 62).code, 0);
    TT_CHECK_EQ_INT(fetch(&c, 1, "again", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK); /* kept again */
    tfrdv_value_release(v);
    /* a second client with the default tick: fetch, then the server goes away while nothing is
       in flight; the connection's end is noticed (it closes) without a call */
    TT_CHECK(cli_open(&c2, s.addr, 0, 0));
    TT_CHECK_EQ_INT(srv_send_n(&s, 1, "last", 3, 1, d1024, 4096, 63, 2).code, 0);
    for (i = 0; i < 2; i++) { /* the first waits for the HELLO in the loop, the second is kept */
        char e[32];
        snprintf(e, sizeof e, "last_%d", i);
        TT_CHECK_EQ_INT(fetch(&c2, 1, e, PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
        tfrdv_value_release(v);
    }
    sleep_ms(50); /* its acknowledgements go out with a tick: nothing left to write */
    cli_close(&c);
    srv_stop(&s);
    for (i = 0; i < 2000; i++) {
        tfrdv_tcp_get_stats(c2.t, &t1);
        if (t1.connections == 0) break;
        sleep_ms(5);
    }
    TT_CHECK_EQ_INT(t1.connections, 0);
    cli_close(&c2);
    waiter_free(w);
}
/* A kept connection (out of the loop's set between blocking fetches) whose peer restarted: the
   next call sees the old connection's end before writing to it and dials the new server (it used
   to write its request into the dead socket and fail UNAVAILABLE until the loop's second tick) */
static void test_kept_connection_to_a_restarted_peer(void) {
    srv s;
    cli c;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp_stats ts;
    tfrdv_status st;
    tfrdv_value* v;
    lent l;
    pthread_t lt;
    int dead;
    const char* a = upath("kept_restart.sock");
    alarm(120);
    tc.expire_interval_ns = 3600 * SEC; /* no tick puts the connection back in the loop's set */
    if (!pair_open(&s, &c, a, 0, &tc)) return;
    warm(&s, &c, "warm");
    lent_init(&l, &c, "kept"); /* read by its own thread: the connection is kept */
    l.timeout_ns = 30 * SEC;
    lent_start(&lt, &l, &s, srv_stats(&s).ts.served);
    TT_CHECK_EQ_INT(srv_send(&s, 1, "kept", 3, 1, d1024, 4096, 70).code, 0);
    pthread_join(lt, 0);
    TT_CHECK_EQ_INT(l.code, TFRDV_OK);
    TT_CHECK(l.v && check((uint8_t*)l.v->data, 4096, 70));
    tfrdv_value_release(l.v);
    srv_kill(&s); /* the server dies and comes back at the same address */
    if (!srv_start(&s, a, PS_INC + 1, 0, 0)) { TT_CHECK(0); cli_close(&c); return; }
    sleep_ms(1);
    TT_CHECK_EQ_INT(srv_send(&s, 1, "again", 3, 1, d1024, 4096, 71).code, 0);
    TT_CHECK_EQ_INT(fetch(&c, 1, "again", PS_INC + 1, 30 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && check((uint8_t*)v->data, 4096, 71));
    tfrdv_value_release(v);
    tfrdv_tcp_get_stats(c.t, &ts);
    TT_CHECK_EQ_INT(ts.connects, 2);
    TT_CHECK_EQ_INT(ts.calls_failed, 0);
    cli_close(&c);
    srv_stop(&s);
}
/* Receives posted while others are in flight on the connection leave their REQUESTs to the I/O
   thread, which writes those posted meanwhile together: 64 posted in a row take far fewer than
   64 sendmsg calls (one each before), every one reaches the server and completes. */
static void test_requests_posted_together_go_out_together(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_tcp_stats t0, t1;
    tfrdv_rendezvous* r;
    waiter* w = waiter_new();
    rep rp;
    int i, ok = 0;
    alarm(60);
    if (!pair_open(&s, &c, "127.0.0.1:0", 0, 0)) { waiter_free(w); return; }
    warm(&s, &c, "warm");
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    tfrdv_tcp_get_stats(c.t, &t0);
    post_recvs(r, "together_", 64, w); /* values not there yet: all 64 stay in flight */
    SRV_UNTIL(&s, rp, rp.ts.served >= t0.calls_started + 64);
    TT_CHECK(rp.ts.served >= t0.calls_started + 64);
    tfrdv_tcp_get_stats(c.t, &t1);
    printf("      64 requests posted in a row: %llu sendmsg calls\n", (unsigned long long)(t1.sendmsg_calls - t0.sendmsg_calls));
    TT_CHECK(t1.sendmsg_calls - t0.sendmsg_calls < (uint64_t)(slow_build() ? 64 : 32)); /* 1-10 here */
    TT_CHECK_EQ_INT(srv_send_n(&s, 1, "together", 3, 1, d1024, 4096, 70, 64).code, 0);
    TT_CHECK(waiter_wait(w, 64, 30 * SEC));
    for (i = 0; i < 64 && i < w->n; i++) ok += w->code[i] == TFRDV_OK && w->v[i] && w->v[i]->size == 4096;
    TT_CHECK_EQ_INT(ok, 64);
    tfrdv_unref(r);
    cli_close(&c);
    srv_stop(&s);
    waiter_free(w);
}
static void test_lent_thread_cancel_timeout_destroy_kill(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_value* v;
    pthread_t th;
    lent l;
    rep rp;
    int dead;
    alarm(120);
    if (!pair_open(&s, &c, upath("lent.sock"), 0, 0)) return;
    warm(&s, &c, "warm");
    /* cancelled: CANCELLED, the server withdraws, the value sent later is there */
    lent_init(&l, &c, "lc");
    (void)tfrdv_cancel_mgr_create(0, &l.cm, &st);
    lent_start(&th, &l, &s, 1);
    tfrdv_cancel_start(l.cm);
    pthread_join(th, 0);
    TT_CHECK_EQ_INT(l.code, TFRDV_CANCELLED);
    SRV_UNTIL(&s, rp, rp.ts.serve_cancelled >= 1);
    TT_CHECK_EQ_INT(rp.ts.serve_cancelled, 1);
    tfrdv_cancel_mgr_destroy(l.cm);
    TT_CHECK_EQ_INT(srv_send(&s, 1, "lc", 1, 0, 0, 4, 2).code, 0);
    TT_CHECK_EQ_INT(fetch(&c, 1, "lc", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && check((uint8_t*)v->data, 4, 2));
    tfrdv_value_release(v);
    /* timed out: DEADLINE_EXCEEDED, then the value is there for the next receive */
    lent_init(&l, &c, "lt");
    l.timeout_ns = SEC / 5;
    lent_recv(&l);
    TT_CHECK_EQ_INT(l.code, TFRDV_DEADLINE_EXCEEDED);
    SRV_UNTIL(&s, rp, rp.ts.serve_cancelled >= 2); /* a value sent before the CANCEL arrives
                                                      would go to the withdrawn request */
    TT_CHECK_EQ_INT(rp.ts.serve_cancelled, 2);
    TT_CHECK_EQ_INT(srv_send(&s, 1, "lt", 1, 0, 0, 4, 3).code, 0);
    TT_CHECK_EQ_INT(fetch(&c, 1, "lt", PS_INC, 30 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && check((uint8_t*)v->data, 4, 3));
    tfrdv_value_release(v);
    /* the transport destroyed under a lent thread (no timeout): CANCELLED, the thread lets go */
    lent_init(&l, &c, "ld");
    rp = srv_stats(&s);
    lent_start(&th, &l, &s, rp.ts.served);
    tfrdv_tcp_destroy(c.t);
    pthread_join(th, 0);
    TT_CHECK_EQ_INT(l.code, TFRDV_CANCELLED);
    TT_CHECK_CONTAINS(l.msg, "destroyed");
    tfrdv_mgr_destroy(c.m);
    /* the peer killed under a lent thread: UNAVAILABLE */
    if (!cli_open(&c, s.addr, 0, 0)) { TT_CHECK(0); srv_stop(&s); return; }
    warm(&s, &c, "warm2");
    lent_init(&l, &c, "lk");
    rp = srv_stats(&s);
    lent_start(&th, &l, &s, rp.ts.served);
    srv_kill(&s);
    pthread_join(th, 0);
    TT_CHECK_EQ_INT(l.code, TFRDV_UNAVAILABLE);
    cli_close(&c);
}
/* host-driven (no I/O thread) and nobody polling: a tfrdv_recv on an open connection completes
   by itself */
static void test_host_driven_recv_needs_no_poller(void) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_value* v = 0;
    tfrdv_rendezvous* r;
    tfrdv_key k;
    waiter* w = waiter_new();
    int i, dead;
    alarm(60);
    tc.num_threads = -1;
    if (!pair_open(&s, &c, "127.0.0.1:0", 0, &tc)) return;
    TT_CHECK_EQ_INT(srv_send(&s, 1, "hd1", 1, 0, 0, 8, 1).code, 0);
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    key_for(&k, "hd1", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, 0, on_recv, w, 0), TFRDV_OK);
    for (i = 0; i < 10000 && w->n == 0; i++) (void)tfrdv_tcp_poll(c.t, 1000000); /* connects */
    TT_CHECK(w->n == 1 && w->code[0] == TFRDV_OK);
    TT_CHECK_EQ_INT(srv_send(&s, 1, "hd2", 1, 0, 0, 4096, 2).code, 0);
    key_for(&k, "hd2", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.parsed, 0, 30 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && check((uint8_t*)v->data, 4096, 2));
    tfrdv_value_release(v);
    tfrdv_unref(r);
    cli_close(&c);
    srv_stop(&s);
    waiter_free(w);
}

/* tfrdv_tcp_destroy from a receive callback, on each kind of thread that runs them (the I/O
   thread, a tfrdv_tcp_poll caller, a thread lent by tfrdv_recv): it returns at once, the last
   thread to leave the transport shuts it down, every other call in flight completes CANCELLED
   exactly once, the server sees them withdrawn, and a later fetch fails UNAVAILABLE. */
typedef struct dcb {
    tfrdv_tcp* t;
    pthread_t who;
    int done;
    tfrdv_code code;
} dcb;
static void destroy_cb(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    dcb* d = (dcb*)u;
    (void)sa; (void)ra; (void)dead;
    d->who = pthread_self();
    d->code = st->code;
    tfrdv_value_release(v);
    tfrdv_tcp_destroy(d->t);
    __atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
}
/* 1 once a callback set *flag (at most ~10 s), polling a host-driven client meanwhile (host) */
static int flag_wait(int* flag, cli* host) {
    int i;
    for (i = 0; i < 10000 && !__atomic_load_n(flag, __ATOMIC_ACQUIRE); i++) {
        if (host) (void)tfrdv_tcp_poll(host->t, 1000000);
        else sleep_ms(1);
    }
    return __atomic_load_n(flag, __ATOMIC_ACQUIRE);
}
static void destroy_from_callback(int kind, const char* addr) { /* 0: the I/O thread, 1: tfrdv_tcp_poll, 2: a lent
                                                                   thread; a Unix addr: through the ring too */
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    srv s;
    cli c;
    dcb d;
    lent l;
    pthread_t th;
    tfrdv_status st;
    tfrdv_rendezvous* r;
    tfrdv_key k;
    waiter* w = waiter_new();
    rep rp;
    int i;
    alarm(60);
    memset(&d, 0, sizeof d);
    if (kind == 1) tc.num_threads = -1;
    if (!pair_open(&s, &c, addr, 0, &tc)) { waiter_free(w); return; }
    d.t = c.t;
    if (kind == 2) warm(&s, &c, "cbd_warm"); /* a thread lends itself to an open connection only */
#if defined(__linux__) && !defined(TFRDV_TCP_NO_EPOLL) /* (the ring needs epoll) */
    if (kind == 2 && strncmp(addr, "unix:", 5) == 0) { /* the lent thread reads through the ring */
        tfrdv_tcp_stats ts;
        for (i = 0; i < 2000; i++) { /* the ring's set-up answer follows the first fetch */
            tfrdv_tcp_get_stats(c.t, &ts);
            if (ts.ring_connections) break;
            sleep_ms(5);
        }
        TT_CHECK_EQ_INT(ts.ring_connections, 1);
    }
#endif
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    post_recvs(r, "cbd_never", 3, w);
    key_for(&k, "cbd", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, 0, destroy_cb, &d, &st), TFRDV_OK);
    if (kind == 1)
        for (i = 0; i < 5000; i++) { (void)tfrdv_tcp_poll(c.t, 1000000); rp = srv_stats(&s); if (rp.ts.server_requests_live == 4) break; }
    SRV_UNTIL(&s, rp, rp.ts.server_requests_live == 4);
    TT_CHECK_EQ_INT(rp.ts.server_requests_live, 4);
    if (kind == 2) {
        lent_init(&l, &c, "cbd_lent");
        lent_start(&th, &l, &s, rp.ts.served);
    }
    TT_CHECK_EQ_INT(srv_send(&s, 1, "cbd", 1, 0, 0, 4, 7).code, 0);
    TT_CHECK(flag_wait(&d.done, kind == 1 ? &c : 0)); /* destroy returned inside the callback */
    TT_CHECK_EQ_INT(d.code, TFRDV_OK);
    if (kind == 2) {
        pthread_join(th, 0);
        TT_CHECK(pthread_equal(d.who, th)); /* the lent thread read the response and ran it */
        TT_CHECK_EQ_INT(l.code, TFRDV_CANCELLED);
    }
    TT_CHECK(waiter_wait(w, 3, 10 * SEC));
    for (i = 0; i < 3 && i < w->n; i++) TT_CHECK_EQ_INT(w->code[i], TFRDV_CANCELLED);
    SRV_UNTIL(&s, rp, rp.ts.server_requests_live == 0);
    TT_CHECK_EQ_INT(rp.ts.server_requests_live, 0); /* the server withdrew them */
    if (kind == 1) TT_CHECK_EQ_INT(tfrdv_tcp_poll(c.t, 0), 0); /* destroyed: nothing more to do */
    key_for(&k, "cbd_after", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, 0, on_recv, w, 0), TFRDV_OK);
    TT_CHECK(waiter_wait(w, 4, 10 * SEC));
    TT_CHECK_EQ_INT(w->code[3], TFRDV_UNAVAILABLE);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(c.m);
    sleep_ms(20);
    TT_CHECK_EQ_INT(w->n, 4); /* exactly once each */
    srv_stop(&s);
    waiter_free(w);
}
static void test_destroy_from_io_thread_callback(void) { destroy_from_callback(0, "127.0.0.1:0"); }
static void test_destroy_from_poll_callback(void) { destroy_from_callback(1, "127.0.0.1:0"); }
static void test_destroy_from_lent_thread_callback(void) { destroy_from_callback(2, "127.0.0.1:0"); }
static void test_destroy_from_callback_unix(void) {
    destroy_from_callback(0, upath("cbd0.sock"));
    destroy_from_callback(1, upath("cbd1.sock"));
    destroy_from_callback(2, upath("cbd2.sock"));
}

/* a blocking tfrdv_recv inside a receive callback, on the thread that reads the connection its
   fetch would use (the I/O thread, a tfrdv_tcp_poll caller): its response could never be read,
   so it fails FAILED_PRECONDITION at once instead of waiting forever; its request is withdrawn
   at the server, so a value sent afterwards goes to the next receiver */
typedef struct nested {
    tfrdv_rendezvous* r;
    pthread_t who;
    int done;
    tfrdv_code code;
    char msg[TFRDV_STATUS_MSG_MAX];
} nested;
static void nested_cb(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    nested* n = (nested*)u;
    tfrdv_key k;
    tfrdv_value* v2 = 0;
    tfrdv_status s2;
    int d2;
    (void)st; (void)sa; (void)ra; (void)dead;
    tfrdv_value_release(v);
    n->who = pthread_self();
    key_for(&k, "nested_inner", PS_INC);
    n->code = tfrdv_recv(n->r, &k.parsed, 0, 0, &v2, &d2, &s2); /* no timeout */
    snprintf(n->msg, sizeof n->msg, "%s", s2.msg);
    tfrdv_value_release(v2);
    __atomic_store_n(&n->done, 1, __ATOMIC_RELEASE);
}
static void nested_recv(int kind) { /* 0: the I/O thread, 1: tfrdv_tcp_poll, 2: a lent thread */
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    srv s;
    cli c;
    nested n;
    lent l;
    pthread_t th;
    tfrdv_status st;
    tfrdv_key k;
    tfrdv_value* v = 0;
    rep rp;
    int i, dead, host = kind == 1;
    alarm(60);
    memset(&n, 0, sizeof n);
    if (host) tc.num_threads = -1;
    if (!pair_open(&s, &c, "127.0.0.1:0", 0, &tc)) return;
    if (kind == 2) warm(&s, &c, "nested_warm");
    (void)tfrdv_mgr_start_step(c.m, 1, &n.r, &st);
    if (kind != 2) TT_CHECK_EQ_INT(srv_send(&s, 1, "nested_outer", 1, 0, 0, 4, 1).code, 0);
    key_for(&k, "nested_outer", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv_async(n.r, &k.parsed, 0, nested_cb, &n, 0), TFRDV_OK);
    if (kind == 2) { /* a thread lent to the connection reads the outer response */
        SRV_UNTIL(&s, rp, rp.ts.server_requests_live == 1);
        lent_init(&l, &c, "nested_lent");
        l.timeout_ns = 30 * SEC;
        lent_start(&th, &l, &s, rp.ts.served);
        TT_CHECK_EQ_INT(srv_send(&s, 1, "nested_outer", 1, 0, 0, 4, 1).code, 0);
    }
    TT_CHECK(flag_wait(&n.done, host ? &c : 0));
    TT_CHECK_EQ_INT(n.code, TFRDV_FAILED_PRECONDITION);
    TT_CHECK_CONTAINS(n.msg, "tfrdv_recv_async");
    if (kind == 2) { /* and the lent thread goes on to its own fetch */
        TT_CHECK_EQ_INT(srv_send(&s, 1, "nested_lent", 1, 0, 0, 4, 3).code, 0);
        pthread_join(th, 0);
        TT_CHECK(pthread_equal(n.who, th)); /* the lent thread ran the callback */
        TT_CHECK_EQ_INT(l.code, TFRDV_OK);
        TT_CHECK(l.v && check((uint8_t*)l.v->data, 4, 3));
        tfrdv_value_release(l.v);
    }
    for (i = 0; i < 4000; i++) { /* (a host-driven client writes the CANCEL when polled) */
        if (host) (void)tfrdv_tcp_poll(c.t, 1000000);
        if (srv_stats(&s).ts.server_requests_live == 0) break;
        sleep_ms(5);
    }
    TT_CHECK_EQ_INT(srv_stats(&s).ts.server_requests_live, 0); /* withdrawn */
    TT_CHECK_EQ_INT(srv_send(&s, 1, "nested_inner", 1, 0, 0, 4, 2).code, 0);
    key_for(&k, "nested_inner", PS_INC); /* the next receiver gets it */
    TT_CHECK_EQ_INT(tfrdv_recv(n.r, &k.parsed, 0, 30 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 4 && check((uint8_t*)v->data, 4, 2));
    tfrdv_value_release(v);
    tfrdv_unref(n.r);
    cli_close(&c);
    srv_stop(&s);
}
static void test_blocking_recv_in_io_thread_callback(void) { nested_recv(0); }
static void test_blocking_recv_in_poll_callback(void) { nested_recv(1); }
static void test_blocking_recv_in_lent_thread_callback(void) { nested_recv(2); }

/* host-driven progress: no threads, both sides polled by the caller */
static void test_host_driven(void) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    insrv s;
    cli c;
    tfrdv_status st;
    tfrdv_rendezvous *rs, *rc;
    tfrdv_key k;
    waiter* w = waiter_new();
    int i;
    alarm(60);
    tc.num_threads = -1;
    if (!insrv_open(&s, upath("host.sock"), &tc)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, 0, &tc)) { TT_CHECK(0); insrv_close(&s); return; }
    TT_CHECK(tfrdv_tcp_fd(s.t) >= 0);
    (void)tfrdv_mgr_start_step(s.m, 1, &rs, &st);
    (void)tfrdv_mgr_start_step(c.m, 1, &rc, &st);
    key_for(&k, "hd", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv_async(rc, &k.parsed, 0, on_recv, w, 0), TFRDV_OK);
    (void)tfrdv_send(rs, &k.parsed, 0, mkval(1, 0, 0, 4096, 4), 0, &st);
    for (i = 0; i < 10000 && w->n == 0; i++) {
        (void)tfrdv_tcp_poll(s.t, 1000000);
        (void)tfrdv_tcp_poll(c.t, 1000000);
    }
    TT_CHECK_EQ_INT(w->n, 1);
    TT_CHECK(w->code[0] == TFRDV_OK && w->v[0] && check((uint8_t*)w->v[0]->data, 4096, 4));
    tfrdv_unref(rs);
    tfrdv_unref(rc);
    cli_close(&c);
    insrv_close(&s);
    waiter_free(w);
}

/* Small responses waiting together on the socket are read together: 32 responses of 1 KiB, all
   written by the server before the client looks, take at most 2 reads (a 16 KiB look-ahead that
   then streamed each rest straight into its value took 6) and every value arrives whole. Both
   ends are host-driven, so nothing reads before the test says. */
static void test_small_responses_read_together(void) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp_stats ss, c0, c1;
    insrv s;
    cli c;
    tfrdv_status st;
    tfrdv_rendezvous *rs, *rc;
    tfrdv_key k;
    waiter* w = waiter_new();
    char edge[16];
    int i, j;
    alarm(60);
    tc.num_threads = -1;
    if (!insrv_open(&s, upath("batch.sock"), &tc)) { TT_CHECK(0); waiter_free(w); return; }
    if (!cli_open(&c, s.addr, 0, &tc)) { TT_CHECK(0); insrv_close(&s); waiter_free(w); return; }
    (void)tfrdv_mgr_start_step(s.m, 1, &rs, &st);
    (void)tfrdv_mgr_start_step(c.m, 1, &rc, &st);
    key_for(&k, "warm", PS_INC); /* the connection opens (both sides polled) */
    TT_CHECK_EQ_INT(tfrdv_recv_async(rc, &k.parsed, 0, on_recv, w, 0), TFRDV_OK);
    (void)tfrdv_send(rs, &k.parsed, 0, mkval(1, 0, 0, 1024, 99), 0, &st);
    for (i = 0; i < 10000 && w->n == 0; i++) {
        (void)tfrdv_tcp_poll(s.t, 1000000);
        (void)tfrdv_tcp_poll(c.t, 1000000);
    }
    TT_CHECK_EQ_INT(w->n, 1);
    for (j = 0; j < 32; j++) { /* 32 requests on the wire, their values sent */
        snprintf(edge, sizeof edge, "b%d", j);
        key_for(&k, edge, PS_INC);
        TT_CHECK_EQ_INT(tfrdv_recv_async(rc, &k.parsed, 0, on_recv, w, 0), TFRDV_OK);
        (void)tfrdv_send(rs, &k.parsed, 0, mkval(1, 0, 0, 1024, (unsigned)j), 0, &st);
    }
    for (i = 0; i < 10000; i++) { /* the server answers every one; the client reads nothing yet */
        (void)tfrdv_tcp_poll(s.t, 1000000);
        tfrdv_tcp_get_stats(s.t, &ss);
        if (ss.bytes_sent >= 33 * 1024) break;
    }
    TT_CHECK(ss.bytes_sent == 33 * 1024);
    tfrdv_tcp_get_stats(c.t, &c0);
    for (i = 0; i < 10000 && w->n < 33; i++) (void)tfrdv_tcp_poll(c.t, 1000000);
    tfrdv_tcp_get_stats(c.t, &c1);
    TT_CHECK_EQ_INT(w->n, 33);
    printf("      32 responses of 1 KiB read with %llu recv calls\n", (unsigned long long)(c1.recv_calls - c0.recv_calls));
    TT_CHECK(c1.recv_calls - c0.recv_calls <= 2);
    for (j = 1; j < w->n; j++) {
        int seed = -1;
        if (w->code[j] != TFRDV_OK || !w->v[j] || w->v[j]->size != 1024) { TT_CHECK(0); continue; }
        for (i = 0; i < 32; i++) /* callbacks run in arrival order; each value is one of ours */
            if (check((uint8_t*)w->v[j]->data, 1024, (unsigned)i)) seed = i;
        TT_CHECK(seed >= 0);
    }
    tfrdv_unref(rs);
    tfrdv_unref(rc);
    cli_close(&c);
    insrv_close(&s);
    waiter_free(w);
}

/* The spin rule of a lent thread (tfrdv_tcp__spin_decide / _record): it learns over its first 8
   waits, spins while most recent spins paid, stops when they do not, then probes now and then
   (a paid probe probes again at once), and never spins when the peer shares its only CPU. */
static void test_spin_rule(void) {
    tfrdv_tcp__spin s;
    int i, spins;
    memset(&s, 0, sizeof s);
    s.gap = 16;
    for (i = 0; i < 8; i++) { /* learning: spins, and every spin misses */
        TT_CHECK_EQ_INT(tfrdv_tcp__spin_decide(&s, 0), 1);
        tfrdv_tcp__spin_record(&s, 0);
    }
    TT_CHECK_EQ_INT(tfrdv_tcp__spin_decide(&s, 1), 0); /* the peer shares our only CPU: never */
    for (spins = 0, i = 0; i < 16; i++) /* no spin for 15 waits, then one probe */
        if (tfrdv_tcp__spin_decide(&s, 0)) {
            spins++;
            TT_CHECK_EQ_INT(i, 15);
            tfrdv_tcp__spin_record(&s, 0); /* the probe misses: the gap doubles */
        }
    TT_CHECK_EQ_INT(spins, 1);
    TT_CHECK_EQ_INT(s.gap, 32);
    for (spins = 0, i = 0; i < 32; i++) spins += tfrdv_tcp__spin_decide(&s, 0);
    TT_CHECK_EQ_INT(spins, 1); /* the 32nd wait probes */
    tfrdv_tcp__spin_record(&s, 1); /* it pays: the next waits probe at once, until 5 of 8 paid */
    for (i = 0; i < 4; i++) {
        TT_CHECK_EQ_INT(tfrdv_tcp__spin_decide(&s, 0), 1);
        tfrdv_tcp__spin_record(&s, 1);
    }
    for (i = 0; i < 3; i++) { /* 5 of the last 8 paid: spins every time */
        TT_CHECK_EQ_INT(tfrdv_tcp__spin_decide(&s, 0), 1);
        TT_CHECK_EQ_INT(s.probe, 0);
        tfrdv_tcp__spin_record(&s, 0);
    }
    TT_CHECK_EQ_INT(tfrdv_tcp__spin_decide(&s, 0), 1); /* 5 of 8 still */
    tfrdv_tcp__spin_record(&s, 0); /* now 4 of 8: stops */
    TT_CHECK_EQ_INT(tfrdv_tcp__spin_decide(&s, 0), 0);
    s.hist = 0xffu; /* all paid, but the peer shares our only CPU */
    TT_CHECK_EQ_INT(tfrdv_tcp__spin_decide(&s, 1), 0);
    TT_CHECK_EQ_INT(tfrdv_tcp__spin_decide(&s, 0), 1);
    { /* shares_cpu: a Unix peer (this very process) pinned to this thread's only CPU */
        tfrdv_tcp__conn c;
        cpu_set_t all, one;
        int sv[2];
        size_t cpu;
        memset(&c, 0, sizeof c);
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || sched_getaffinity(0, sizeof all, &all) != 0) { TT_CHECK(0); return; }
        c.fd = sv[0];
        c.is_unix = 1;
        for (cpu = 0; cpu < (size_t)CPU_SETSIZE && !CPU_ISSET(cpu, &all); cpu++) {}
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        TT_CHECK_EQ_INT(tfrdv_tcp__shares_cpu(&c), CPU_COUNT(&all) == 1); /* unpinned */
        if (sched_setaffinity(0, sizeof one, &one) == 0) {
            TT_CHECK_EQ_INT(tfrdv_tcp__shares_cpu(&c), 1);
            c.is_unix = 0; /* over TCP nothing names the peer */
            TT_CHECK_EQ_INT(tfrdv_tcp__shares_cpu(&c), 0);
            (void)sched_setaffinity(0, sizeof all, &all);
        }
        close(sv[0]);
        close(sv[1]);
    }
}

/* every allocation of the companion goes through hooks.allocator, and all of it comes back */
static void test_allocator_hook(void) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    counting cs, cc;
    insrv s;
    cli c;
    tfrdv_status st;
    tfrdv_rendezvous* r;
    tfrdv_value* v;
    tfrdv_key k;
    int i, dead;
    alarm(60);
    memset(&cs, 0, sizeof cs);
    memset(&cc, 0, sizeof cc);
    tc.hooks.allocator.alloc_fn = c_alloc;
    tc.hooks.allocator.free_fn = c_free;
    tc.hooks.allocator.user = &cs;
    if (!insrv_open(&s, upath("alloc.sock"), &tc)) { TT_CHECK(0); return; }
    tc.hooks.allocator.user = &cc;
    if (!cli_open(&c, s.addr, 0, &tc)) { TT_CHECK(0); insrv_close(&s); return; }
    (void)tfrdv_mgr_start_step(s.m, 1, &r, &st);
    for (i = 0; i < 20; i++) {
        char e[16];
        int64_t d[1] = {300000};
        snprintf(e, sizeof e, "a%d", i);
        key_for(&k, e, PS_INC);
        (void)tfrdv_send(r, &k.parsed, 0, mkval(4, 1, d, (uint64_t)d[0], (unsigned)i), 0, &st);
        TT_CHECK_EQ_INT(fetch(&c, 1, e, PS_INC, 10 * SEC, &v, &dead, &st), TFRDV_OK);
        TT_CHECK(v && check((uint8_t*)v->data, v->size, (unsigned)i));
        tfrdv_value_release(v);
    }
    tfrdv_unref(r);
    TT_CHECK(cs.calls > 0 && cc.calls > 0);
    cli_close(&c);
    insrv_close(&s);
    TT_CHECK_EQ_INT(cs.live, 0);
    TT_CHECK_EQ_INT(cs.bytes, 0);
    TT_CHECK_EQ_INT(cc.live, 0);
    TT_CHECK_EQ_INT(cc.bytes, 0);
}

/* worker name -> address: the resolve callback for names not in the table, tfrdv_tcp_set_worker
   adding, replacing and removing; an unknown worker fails INTERNAL naming it. Over IPv6 when the
   host has it. */
static char resolved[128];
static int resolve_cb(void* u, const char* worker, size_t len, char* out, size_t cap) {
    (void)u;
    if (len != strlen(PS) || memcmp(worker, PS, len) != 0) return 0;
    snprintf(out, cap, "%s", resolved);
    return 1;
}
static void test_resolve_and_set_worker(void) {
    insrv s;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_tcp* t;
    tfrdv_mgr* m;
    tfrdv_status st;
    tfrdv_rendezvous *rs, *rc;
    tfrdv_key k;
    tfrdv_value* v;
    int dead, i;
    alarm(60);
    if (!insrv_open(&s, "[::1]:0", 0) && !insrv_open(&s, "127.0.0.1:0", 0)) { TT_CHECK(0); return; }
    snprintf(resolved, sizeof resolved, "%s", s.addr);
    tc.resolve = resolve_cb;
    tc.connect_retry_ns = TFRDV_OFF; /* a wrong address fails at once */
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_OK);
    mc.worker_name = WK;
    mc.transport = tfrdv_tcp_transport(t);
    (void)tfrdv_mgr_create(&mc, &m, &st);
    (void)tfrdv_tcp_attach(t, m, &st);
    (void)tfrdv_mgr_start_step(s.m, 1, &rs, &st);
    (void)tfrdv_mgr_start_step(m, 1, &rc, &st);
    for (i = 0; i < 3; i++) {
        char e[8];
        snprintf(e, sizeof e, "w%d", i);
        key_for(&k, e, PS_INC);
        (void)tfrdv_send(rs, &k.parsed, 0, mkval(1, 0, 0, 4, (unsigned)i), 0, &st);
    }
    key_for(&k, "w0", PS_INC); /* through the resolve callback */
    TT_CHECK_EQ_INT(tfrdv_recv(rc, &k.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && check((uint8_t*)v->data, 4, 0));
    tfrdv_value_release(v);
    /* the table wins over the callback: a wrong address fails, the right one works again */
    TT_CHECK_EQ_INT(tfrdv_tcp_set_worker(t, PS, upath("nothing-here.sock"), &st), TFRDV_OK);
    key_for(&k, "w1", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv(rc, &k.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "nothing-here.sock");
    TT_CHECK_EQ_INT(tfrdv_tcp_set_worker(t, PS, s.addr, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv(rc, &k.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_OK);
    tfrdv_value_release(v);
    /* removed from the table and unknown to the callback: INTERNAL naming the worker */
    TT_CHECK_EQ_INT(tfrdv_tcp_set_worker(t, PS, 0, &st), TFRDV_OK);
    resolved[0] = 0;
    key_for(&k, "w2", PS_INC);
    TT_CHECK_EQ_INT(tfrdv_recv(rc, &k.parsed, 0, 10 * SEC, &v, &dead, &st), TFRDV_INTERNAL);
    TT_CHECK_CONTAINS(st.msg, "No worker known as " PS);
    TT_CHECK_EQ_INT(tfrdv_tcp_set_worker(t, PS, "no-port-here", &st), TFRDV_INVALID_ARGUMENT);
    tfrdv_unref(rs);
    tfrdv_unref(rc);
    tfrdv_tcp_destroy(t);
    tfrdv_mgr_destroy(m);
    insrv_close(&s);
}

/* one vtable, two managers (and a manager whose creation failed): the object's memory goes
   with the last of them, after tfrdv_tcp_destroy */
static void test_one_vtable_two_managers(void) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_tcp* t;
    tfrdv_mgr *a = 0, *b = 0, *bad = 0;
    tfrdv_status st;
    counting cnt;
    memset(&cnt, 0, sizeof cnt);
    tc.hooks.allocator.alloc_fn = c_alloc;
    tc.hooks.allocator.free_fn = c_free;
    tc.hooks.allocator.user = &cnt;
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_OK);
    mc.transport = tfrdv_tcp_transport(t);
    mc.worker_name = WK;
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&mc, &a, &st), TFRDV_OK);
    mc.worker_name = "/job:worker/replica:0/task:1";
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&mc, &b, &st), TFRDV_OK);
    mc.worker_name = 0; /* refused: takes no reference */
    TT_CHECK(tfrdv_mgr_create(&mc, &bad, &st) != TFRDV_OK);
    tfrdv_tcp_destroy(t);
    tfrdv_mgr_destroy(a);
    TT_CHECK(cnt.live > 0); /* b still holds it */
    tfrdv_mgr_destroy(b);
    TT_CHECK_EQ_INT(cnt.live, 0);
    TT_CHECK_EQ_INT(cnt.bytes, 0);
}

static void test_config_errors(void) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp* t = 0;
    tfrdv_status st;
    tc.frame_bytes = 100;
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "frame_bytes");
    tc = tfrdv_tcp_config_init();
    tc.listen_address = "127.0.0.1";
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "127.0.0.1");
    tc.listen_address = "[::1:5";
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_INVALID_ARGUMENT);
    tc.listen_address = "127.0.0.1:99999";
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "bad port");
    tc.listen_address = "[::1]:0";
    if (tfrdv_tcp_create(&tc, &t, &st) == TFRDV_OK) { /* IPv6 may be off in a sandbox */
        TT_CHECK(tfrdv_tcp_port(t) > 0);
        TT_CHECK_CONTAINS(tfrdv_tcp_address(t), "[::1]:");
        tfrdv_tcp_destroy(t);
    }
    TT_CHECK_EQ_INT(tfrdv_tcp_set_worker(0, "x", "y", &st), TFRDV_INVALID_ARGUMENT);
}

/* config values that used to misbehave silently are refused at create, naming the field: a
   unix_mode outside 0..0777 (-1 gave the socket file mode 07777), a worker entry whose address
   cannot parse or whose name is no worker name (it failed only at the first fetch) */
static void create_refused(const tfrdv_tcp_config* tc, const char* want1, const char* want2) {
    tfrdv_tcp* t = 0;
    tfrdv_status st;
    tfrdv_code rc = tfrdv_tcp_create(tc, &t, &st);
    TT_CHECK_EQ_INT(rc, TFRDV_INVALID_ARGUMENT);
    if (rc != TFRDV_OK) { TT_CHECK_CONTAINS(st.msg, want1); TT_CHECK_CONTAINS(st.msg, want2); }
    if (t) tfrdv_tcp_destroy(t);
}
static void test_config_refused(void) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp_worker w[2];
    tfrdv_tcp* t = 0;
    tfrdv_status st;
    struct stat fst;
    static const int bad_modes[] = {-1, -3, 010000, 01000, 0x7fffffff};
    size_t i;
    for (i = 0; i < sizeof bad_modes / sizeof *bad_modes; i++) {
        tc = tfrdv_tcp_config_init();
        tc.listen_address = upath("mode.sock");
        tc.unix_mode = bad_modes[i];
        create_refused(&tc, "unix_mode", "0..0777");
    }
    tc.unix_mode = 0640; /* in range: applied */
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_OK);
    if (t) {
        TT_CHECK(stat(tc.listen_address + 5, &fst) == 0 && (fst.st_mode & 07777) == 0640);
        tfrdv_tcp_destroy(t);
    }
    tc.unix_mode = 0; /* the default */
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_OK);
    if (t) {
        TT_CHECK(stat(tc.listen_address + 5, &fst) == 0 && (fst.st_mode & 07777) == 0600);
        tfrdv_tcp_destroy(t);
    }
    tc = tfrdv_tcp_config_init();
    tc.max_key_len = (size_t)1 << 40; /* every connection would buffer one */
    create_refused(&tc, "max_key_len", "16 MiB");
    tc = tfrdv_tcp_config_init();
    tc.max_message_len = 0xffffffffu;
    create_refused(&tc, "max_message_len", "16 MiB");
    tc = tfrdv_tcp_config_init();
    tc.handshake_timeout_ns = -5;
    create_refused(&tc, "handshake_timeout_ns", "negative");
    tc = tfrdv_tcp_config_init();
    tc.num_workers = 1; /* and workers NULL */
    create_refused(&tc, "num_workers", "NULL");
    /* worker entries: the second one is bad */
    tc = tfrdv_tcp_config_init();
    tc.workers = w;
    tc.num_workers = 2;
    w[0].name = PS;
    w[0].address = "127.0.0.1:5000";
    w[1].name = WK;
    w[1].address = "nonsense:::";
    create_refused(&tc, "workers[1].address", "nonsense:::");
    w[1].address = "127.0.0.1:0";
    create_refused(&tc, "workers[1].address", "bad port");
    w[1].address = "unix:";
    create_refused(&tc, "workers[1].address", "no path");
    w[1].address = "[::1:5";
    create_refused(&tc, "workers[1].address", "[v6]:port");
    w[1].address = "localhost:2222"; /* a host name: resolved at connect, not at create */
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_OK);
    if (t) tfrdv_tcp_destroy(t);
    w[1].name = "/job:x";
    create_refused(&tc, "workers[1].name", "/job:x");
    w[1].name = "/job:x/replica:0/task:0/device:CPU:0";
    create_refused(&tc, "workers[1].name", "not a worker name");
    w[1].name = "/job:x/task:0/replica:0"; /* parses, but calls carry the canonical form */
    create_refused(&tc, "workers[1].name", "not a worker name");
    w[1].name = "ps0";
    create_refused(&tc, "workers[1].name", "ps0");
    w[1].name = "/job:x\n/replica:0/task:0";
    create_refused(&tc, "workers[1].name", "\\x0a"); /* escaped in the message */
    /* tfrdv_tcp_set_worker checks the same */
    w[1].name = WK;
    tc.num_workers = 1;
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_OK);
    if (!t) return;
    TT_CHECK_EQ_INT(tfrdv_tcp_set_worker(t, WK, "nonsense:::", &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "nonsense:::");
    TT_CHECK_CONTAINS(st.msg, WK);
    TT_CHECK_EQ_INT(tfrdv_tcp_set_worker(t, "/job:x", "127.0.0.1:1", &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "not a worker name");
    TT_CHECK_EQ_INT(tfrdv_tcp_set_worker(t, WK, "127.0.0.1:1", &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_tcp_set_worker(t, "/job:x", 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_tcp_set_worker(t, WK, 0, &st), TFRDV_OK);
    tfrdv_tcp_destroy(t);
}

/* the child of test_client_killed_mid_transfer: fetches "huge" from addr, dies on the first byte */
static int die_fetching(const char* addr) {
    cli c;
    tfrdv_value* cv = 0;
    tfrdv_args a;
    tfrdv_rendezvous* cr;
    tfrdv_key ck;
    tfrdv_status st;
    int cd;
    alarm(30);
    kill_on_alloc = getpid();
    if (!cli_open(&c, addr, 0, 0)) return 2;
    memset(&a, 0, sizeof a);
    a.alloc_fn = killing_alloc;
    (void)tfrdv_mgr_start_step(c.m, 1, &cr, &st);
    key_for(&ck, "huge", PS_INC);
    (void)tfrdv_recv(cr, &ck.parsed, &a, 20 * SEC, &cv, &cd, &st);
    return 3;
}

/* ---- a worker started before its ps: the incarnation asked for, retries without attach ----- */
typedef struct late_ps { srv s; const char* addr; int delay_ms, ok; } late_ps;
static void* late_ps_start(void* p) {
    late_ps* l = (late_ps*)p;
    sleep_ms(l->delay_ms);
    l->ok = srv_start(&l->s, l->addr, PS_INC, 0, 0);
    return 0;
}
/* a client-only worker (no listener, never attached) whose table names PS at addr */
static int bare_open(cli* c, const char* addr, int max_retries, int64_t backoff_ns) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_tcp_worker w;
    tfrdv_status st;
    w.name = PS;
    w.address = addr;
    tc.workers = &w;
    tc.num_workers = 1;
    if (tfrdv_tcp_create(&tc, &c->t, &st) != TFRDV_OK) { printf("    %s\n", st.msg); return 0; }
    mc.worker_name = WK;
    mc.transport = tfrdv_tcp_transport(c->t);
    mc.call_max_retries = max_retries;
    mc.retry_backoff_ns = backoff_ns;
    if (tfrdv_mgr_create(&mc, &c->m, &st) != TFRDV_OK) { printf("    %s\n", st.msg); tfrdv_tcp_destroy(c->t); return 0; }
    return 1;
}
static void test_peer_incarnation_waits_for_a_late_ps(void) {
    cli c;
    late_ps l;
    pthread_t th;
    tfrdv_status st;
    uint64_t inc = 0;
    int64_t t0;
    alarm(60);
    memset(&l, 0, sizeof l);
    l.addr = upath("late_inc.sock");
    l.delay_ms = 300;
    if (!bare_open(&c, l.addr, 0, 0)) { TT_CHECK(0); return; }
    /* nobody there: no wait, or a short one */
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(c.m, PS, 0, &inc, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, PS);
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(c.m, PS, SEC / 10, &inc, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_CONTAINS(st.msg, "did not answer");
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(c.m, "/job:nobody/replica:0/task:0", SEC, &inc, &st), TFRDV_NOT_FOUND);
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(c.m, WK, 0, &inc, &st), TFRDV_OK);
    TT_CHECK(inc == tfrdv_mgr_incarnation(c.m));
    /* the ps comes up 300 ms later: the question is answered once it greets */
    t0 = tfrdv_now_ns();
    pthread_create(&th, 0, late_ps_start, &l);
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(c.m, PS, 10 * SEC, &inc, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(inc, PS_INC);
    printf("      ps up after 300 ms: its incarnation known after %.0f ms\n", (double)(tfrdv_now_ns() - t0) / 1e6);
    pthread_join(th, 0);
    TT_CHECK(l.ok);
    cli_close(&c);
    if (l.ok) srv_stop(&l.s);
}
/* the manager's retries fire although nothing is attached: the companion's thread expires it */
static void* late_ps_send(void* p) {
    late_ps* l = (late_ps*)p;
    late_ps_start(p);
    if (l->ok) l->ok = srv_send(&l->s, 1, "after_retry", 1, 0, 0, 4, 9).code == 0;
    return 0;
}
static void test_retries_fire_without_attach(void) {
    cli c;
    late_ps l;
    pthread_t th;
    tfrdv_status st;
    tfrdv_value* v = 0;
    int dead;
    int64_t t0;
    alarm(60);
    memset(&l, 0, sizeof l);
    l.addr = upath("late_retry.sock");
    l.delay_ms = 300;
    if (!bare_open(&c, l.addr, 20, SEC / 5)) { TT_CHECK(0); return; }
    t0 = tfrdv_now_ns();
    pthread_create(&th, 0, late_ps_send, &l);
    /* refused at first; the core retries every 200 ms+ (only tfrdv_mgr_expire starts a retry) */
    TT_CHECK_EQ_INT(fetch(&c, 1, "after_retry", PS_INC, 10 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 4 && check((uint8_t*)v->data, 4, 9));
    printf("      ps up after 300 ms: the fetch completed after %.0f ms\n", (double)(tfrdv_now_ns() - t0) / 1e6);
    pthread_join(th, 0);
    TT_CHECK(l.ok);
    tfrdv_value_release(v);
    cli_close(&c);
    if (l.ok) srv_stop(&l.s);
}

/* start order: a worker started 2 s before its ps fetches once it is up, with no attach, no
   retry policy and no sleep of its own (the call waits for the connection: connect_retry_ns) */
static void test_worker_started_before_its_ps(void) {
    cli c;
    late_ps l;
    pthread_t th;
    tfrdv_status st;
    tfrdv_value* v = 0;
    uint64_t inc = 0;
    int dead;
    int64_t t0;
    alarm(60);
    memset(&l, 0, sizeof l);
    l.addr = upath("late_start.sock");
    l.delay_ms = 2000;
    if (!bare_open(&c, l.addr, 0, 0)) { TT_CHECK(0); return; }
    t0 = tfrdv_now_ns();
    pthread_create(&th, 0, late_ps_send, &l);
    TT_CHECK_EQ_INT(fetch(&c, 1, "after_retry", PS_INC, 20 * SEC, &v, &dead, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 4 && check((uint8_t*)v->data, 4, 9));
    printf("      ps up after 2000 ms: the first fetch completed after %.0f ms\n", (double)(tfrdv_now_ns() - t0) / 1e6);
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(c.m, PS, 0, &inc, &st), TFRDV_OK); /* connected: at once */
    TT_CHECK_EQ_INT(inc, PS_INC);
    pthread_join(th, 0);
    TT_CHECK(l.ok);
    tfrdv_value_release(v);
    cli_close(&c);
    if (l.ok) srv_stop(&l.s);
}
/* ---- delivery acknowledgements (protocol version 2) --------------------------------------- */
static void raw_ids(int fd, int type, uint64_t id) { /* ACK of one id, or CANCEL */
    tfrdv_tcp_frame f;
    memset(&f, 0, sizeof f);
    f.type = type;
    if (type == TFRDV_TCP_ACK) { f.num_acks = 1; f.ack_ids = &id; }
    else f.id = id;
    raw_put(fd, &f);
}
/* a raw client speaking `version`: connected and greeted (the server's HELLO says 2; both then
   speak the lower version) */
static int raw_greet(const char* addr, int version) {
    tfrdv_tcp_frame f;
    int fd = raw_connect(addr);
    raw_hello(fd, version, "", 0);
    rlen = 0;
    TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_HELLO, &f, 0, 0), 1);
    TT_CHECK_EQ_INT(f.version, TFRDV_TCP_PROTOCOL_VERSION);
    return fd;
}
static size_t insrv_pending(insrv* s) {
    size_t n = 0;
    (void)tfrdv_mgr_pending(s->m, count_sends, &n);
    return n;
}
static void insrv_send(insrv* s, const char* edge, uint64_t size) {
    tfrdv_rendezvous* r;
    tfrdv_status st;
    tfrdv_key k;
    int64_t d[1];
    d[0] = (int64_t)size;
    key_for(&k, edge, PS_INC);
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(s->m, 1, &r, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.parsed, 0, mkval(1, 1, d, size, 3), 0, &st), TFRDV_OK);
    tfrdv_unref(r);
}
/* polls the server's stats (up to 10 s) until cond holds */
#define TS_UNTIL(t, ts, cond) \
    do { int u_; for (u_ = 0; u_ < 2000; u_++) { tfrdv_tcp_get_stats((t), &(ts)); if (cond) break; sleep_ms(5); } } while (0)
static void test_delivery_acknowledged(void) {
    insrv s;
    tfrdv_tcp_frame f;
    tfrdv_tcp_stats ts;
    tfrdv_key ka, kb;
    int fd;
    alarm(60);
    if (!insrv_open(&s, "127.0.0.1:0", 0)) { TT_CHECK(0); return; }
    key_for(&ka, "ack_a", PS_INC);
    key_for(&kb, "ack_b", PS_INC);
    insrv_send(&s, "ack_a", 4);
    insrv_send(&s, "ack_b", 4);
    fd = raw_greet(s.addr, 2);
    /* answered: the value is held until the client says it was delivered */
    raw_request(fd, 1, &ka, 0);
    TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_RESPONSE, &f, 0, 0), 1);
    TS_UNTIL(s.t, ts, ts.values_unacked == 1);
    TT_CHECK_EQ_INT(ts.values_unacked, 1);
    TT_CHECK_EQ_INT(ts.serve_ok, 1);
    raw_ids(fd, TFRDV_TCP_ACK, 77); /* never requested: ignored */
    raw_ids(fd, TFRDV_TCP_ACK, 1);
    TS_UNTIL(s.t, ts, ts.values_acked == 1);
    TT_CHECK_EQ_INT(ts.values_acked, 1);
    TT_CHECK_EQ_INT(ts.values_unacked, 0);
    TT_CHECK_EQ_INT(insrv_pending(&s), 1); /* ack_b only */
    /* refused after it was written (the client's call had finished): back to the table */
    raw_request(fd, 2, &kb, 0);
    TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_RESPONSE, &f, 0, 0), 1);
    raw_ids(fd, TFRDV_TCP_CANCEL, 2);
    TS_UNTIL(s.t, ts, ts.values_returned == 1);
    TT_CHECK_EQ_INT(ts.values_returned, 1);
    TT_CHECK_EQ_INT(ts.values_unacked, 0);
    TT_CHECK_EQ_INT(ts.serve_ok, 1);
    TT_CHECK_EQ_INT(insrv_pending(&s), 1);
    /* answered, and the client goes away before acknowledging: back to the table */
    raw_request(fd, 3, &kb, 0);
    TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_RESPONSE, &f, 0, 0), 1);
    TS_UNTIL(s.t, ts, ts.values_unacked == 1);
    TT_CHECK_EQ_INT(insrv_pending(&s), 0);
    close(fd);
    TS_UNTIL(s.t, ts, ts.values_returned == 2 && ts.connections == 0);
    TT_CHECK_EQ_INT(ts.values_returned, 2);
    TT_CHECK_EQ_INT(insrv_pending(&s), 1);
    /* a version 1 client acknowledges nothing: answered as before, the value released when written */
    fd = raw_greet(s.addr, 1);
    raw_request(fd, 1, &kb, 0);
    TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_RESPONSE, &f, 0, 0), 1);
    TS_UNTIL(s.t, ts, ts.serve_ok == 2);
    TT_CHECK_EQ_INT(ts.serve_ok, 2);
    TT_CHECK_EQ_INT(ts.values_unacked, 0);
    TT_CHECK_EQ_INT(insrv_pending(&s), 0);
    close(fd);
    wait_stats(s.t, &ts, 0);
    TT_CHECK_EQ_INT(ts.values_returned, 2);
    TT_CHECK_EQ_INT(ts.protocol_errors, 0);
    insrv_close(&s);
}
/* a peer that asks and then reads nothing, or reads and acknowledges nothing, does not keep the
   values: after stall_timeout_ns its connection is closed and they go back to the table */
/* requests that arrive together are answered together: the answers a pass of the event loop
   produces (served inline, their values already there) leave in one sendmsg per 16 frames (the
   iovec limit), not one each */
static void test_answers_of_one_read_share_a_sendmsg(void) {
    insrv s;
    tfrdv_tcp_frame f;
    tfrdv_tcp_stats a, b;
    static uint8_t buf[16384];
    size_t n = 0;
    int i, fd, got = 0;
    alarm(60);
    if (!insrv_open(&s, "127.0.0.1:0", 0)) { TT_CHECK(0); return; }
    for (i = 0; i < 20; i++) {
        char e[32];
        snprintf(e, sizeof e, "together_%d", i);
        insrv_send(&s, e, 4096);
    }
    fd = raw_greet(s.addr, 2);
    for (i = 0; i < 20; i++) { /* 20 REQUEST frames, one write */
        char e[32];
        tfrdv_key k;
        snprintf(e, sizeof e, "together_%d", i);
        key_for(&k, e, PS_INC);
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_REQUEST;
        f.id = (uint64_t)i + 1;
        f.step_id = 1;
        f.request_id = 9000 + i;
        f.key.ptr = k.buf;
        f.key.len = k.len;
        n += tfrdv_tcp_encode(&f, buf + n, sizeof buf - n);
    }
    tfrdv_tcp_get_stats(s.t, &a);
    TT_CHECK(wr_full(fd, buf, n));
    for (i = 0; i < 20; i++) got += raw_get(fd, TFRDV_TCP_RESPONSE, &f, 0, 0) == 1 && f.bytes == 4096;
    TT_CHECK_EQ_INT(got, 20);
    tfrdv_tcp_get_stats(s.t, &b);
    TT_CHECK_EQ_INT(b.served - a.served, 20);
    TT_CHECK(b.sendmsg_calls - a.sendmsg_calls <= 4); /* 2 when the 20 came in one read; was 20 */
    close(fd);
    insrv_close(&s);
}
static void test_peer_that_reads_nothing(void) {
    insrv s;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp_stats ts;
    tfrdv_tcp_frame f;
    int fd, i, small = 4096;
    char msg[256];
    alarm(60);
    tc.stall_timeout_ns = SEC / 2;
    if (!insrv_open(&s, "127.0.0.1:0", &tc)) { TT_CHECK(0); return; }
    for (i = 0; i < 8; i++) { /* 32 MiB: more than the kernel's buffers on both sides take */
        char e[16];
        snprintf(e, sizeof e, "stall_%d", i);
        insrv_send(&s, e, 4u << 20);
    }
    fd = raw_connect(s.addr);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    raw_hello(fd, 2, "", 0);
    for (i = 0; i < 8; i++) {
        tfrdv_key k;
        char e[16];
        snprintf(e, sizeof e, "stall_%d", i);
        key_for(&k, e, PS_INC);
        raw_request(fd, (uint64_t)i + 1, &k, 0);
    }
    TS_UNTIL(s.t, ts, ts.served == 8); /* accepted and asked */
    TT_CHECK_EQ_INT(ts.served, 8);
    TS_UNTIL(s.t, ts, ts.connections == 0 && ts.values_returned == 8); /* closed after a CLOSE's
                                                                          linger, then given back */
    TT_CHECK_EQ_INT(ts.connections, 0);
    TT_CHECK_EQ_INT(ts.protocol_errors, 1);
    TT_CHECK_EQ_INT(ts.values_returned, 8);
    TT_CHECK_EQ_INT(insrv_pending(&s), 8);
    close(fd);
    /* reads its answer, never acknowledges it */
    insrv_send(&s, "held", 4);
    fd = raw_connect(s.addr);
    raw_hello(fd, 2, "", 0);
    {
        tfrdv_key k;
        key_for(&k, "held", PS_INC);
        raw_request(fd, 1, &k, 0);
    }
    rlen = 0;
    TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_RESPONSE, &f, 0, 0), 1);
    msg[0] = 0;
    TT_CHECK_EQ_INT(raw_get(fd, TFRDV_TCP_CLOSE, &f, msg, sizeof msg), 1);
    TT_CHECK_CONTAINS(msg, "acknowledges no delivery");
    TS_UNTIL(s.t, ts, ts.connections == 0 && ts.values_returned == 9);
    TT_CHECK_EQ_INT(ts.values_returned, 9);
    TT_CHECK_EQ_INT(insrv_pending(&s), 9);
    close(fd);
    insrv_close(&s);
}

/* ---- exactly once while receives give up with their answers on the wire --------------------
   8 threads x 400 fetches; 20 % give up after a short timeout, 20 % are cancelled a moment after
   they start, while the serving child sends the values. Every value sent must be received once:
   during the race, or afterwards from the server's table (a cancelled or timed-out receive leaves
   its value for the next receiver, also when the cancel crossed the response on the wire). */
#define RACE_T 8
#define RACE_N 400
typedef struct racer {
    cli* c;
    int id;
    unsigned rnd;
    unsigned char got[RACE_N];
    int dups, bad, gave_up;
    char msg[TFRDV_STATUS_MSG_MAX];
} racer;
static unsigned race_rand(unsigned* s) { *s = *s * 1103515245u + 12345u; return (*s >> 8) & 0xffffffu; }
static unsigned race_seed(int t, int i) { return 1000u * (unsigned)t + (unsigned)i + 7u; }
typedef struct race_slot { pthread_mutex_t mu; int done; tfrdv_code code; tfrdv_value* v; } race_slot;
static void race_done(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    race_slot* sl = (race_slot*)u;
    (void)sa; (void)ra; (void)dead;
    pthread_mutex_lock(&sl->mu);
    sl->code = st->code;
    sl->v = v;
    sl->done = 1;
    pthread_mutex_unlock(&sl->mu);
}
static void race_spin(unsigned us) {
    int64_t end = tfrdv_now_ns() + (int64_t)us * 1000;
    while (tfrdv_now_ns() < end) { }
}
static void race_take(racer* r, int i, tfrdv_code code, tfrdv_value* v) {
    if (code == TFRDV_OK) {
        if (!v || v->size != 4096 || !check((uint8_t*)v->data, 4096, race_seed(r->id, i))) r->bad++;
        else if (r->got[i]++) r->dups++;
    } else if (code == TFRDV_DEADLINE_EXCEEDED || code == TFRDV_CANCELLED) {
        r->gave_up++;
    } else {
        r->bad++;
    }
    tfrdv_value_release(v);
}
static void* race_consumer(void* p) {
    racer* r = (racer*)p;
    tfrdv_rendezvous* rz;
    tfrdv_status st;
    int i;
    if (tfrdv_mgr_start_step(r->c->m, 1, &rz, &st) != TFRDV_OK) { r->bad = RACE_N; return 0; }
    for (i = 0; i < RACE_N; i++) {
        tfrdv_key k;
        char e[32];
        unsigned mode = race_rand(&r->rnd) % 10, wait_us = race_rand(&r->rnd) % 300;
        tfrdv_value* v = 0;
        int dead;
        snprintf(e, sizeof e, "race_%d_%d", r->id, i);
        key_for(&k, e, PS_INC);
        if (mode < 2) { /* gives up after 20-320 us */
            tfrdv_code code = tfrdv_recv(rz, &k.parsed, 0, (int64_t)(20 + wait_us) * 1000, &v, &dead, &st);
            race_take(r, i, code, v);
        } else if (mode < 4) { /* cancelled 0-300 us after it started */
            tfrdv_cancel_mgr* cm;
            tfrdv_args a;
            race_slot sl;
            int spins = 0;
            memset(&sl, 0, sizeof sl);
            pthread_mutex_init(&sl.mu, 0);
            (void)tfrdv_cancel_mgr_create(0, &cm, &st);
            memset(&a, 0, sizeof a);
            a.cancel = cm;
            if (tfrdv_recv_async(rz, &k.parsed, &a, race_done, &sl, &st) != TFRDV_OK) { r->bad++; continue; }
            race_spin(wait_us);
            tfrdv_cancel_start(cm);
            for (;;) {
                int d;
                pthread_mutex_lock(&sl.mu);
                d = sl.done;
                pthread_mutex_unlock(&sl.mu);
                if (d || ++spins > 20000) break;
                sleep_ms(1);
            }
            if (!sl.done) { snprintf(r->msg, sizeof r->msg, "a cancelled receive never completed"); r->bad++; }
            else race_take(r, i, sl.code, sl.v);
            tfrdv_cancel_mgr_destroy(cm);
            pthread_mutex_destroy(&sl.mu);
        } else {
            tfrdv_code code = tfrdv_recv(rz, &k.parsed, 0, 60 * SEC, &v, &dead, &st);
            if (code != TFRDV_OK) snprintf(r->msg, sizeof r->msg, "%s", st.msg);
            race_take(r, i, code, v);
        }
    }
    tfrdv_unref(rz);
    return 0;
}
typedef struct race_prod { srv* s; int bad; } race_prod;
static void* race_producer(void* p) {
    race_prod* pr = (race_prod*)p;
    int i, t;
    for (i = 0; i < RACE_N; i++)
        for (t = 0; t < RACE_T; t++) {
            char e[32];
            snprintf(e, sizeof e, "race_%d_%d", t, i);
            if (srv_send(pr->s, 1, e, 3, 1, d1024, 4096, race_seed(t, i)).code != 0) pr->bad++;
        }
    return 0;
}
static void race_over(const char* addr) {
    srv s;
    cli c;
    static racer rs[RACE_T];
    static race_slot drain[RACE_T][RACE_N];
    pthread_t th[RACE_T], pt;
    race_prod pr;
    tfrdv_rendezvous* rz;
    tfrdv_status st;
    int t, i, raced = 0, buffered = 0, lost = 0, dups = 0, bad = 0, gave_up = 0, waiting = 0;
    rep rp;
    alarm(240);
    if (!pair_open(&s, &c, addr, 0, 0)) return;
    memset(rs, 0, sizeof rs);
    memset(&pr, 0, sizeof pr);
    pr.s = &s;
    for (t = 0; t < RACE_T; t++) {
        rs[t].c = &c;
        rs[t].id = t;
        rs[t].rnd = 0x9e3779b9u * (unsigned)(t + 1);
        pthread_create(&th[t], 0, race_consumer, &rs[t]);
    }
    pthread_create(&pt, 0, race_producer, &pr);
    pthread_join(pt, 0);
    for (t = 0; t < RACE_T; t++) pthread_join(th[t], 0);
    TT_CHECK_EQ_INT(pr.bad, 0);
    /* what was not received during the race must still be in the server's table */
    (void)tfrdv_mgr_start_step(c.m, 1, &rz, &st);
    for (t = 0; t < RACE_T; t++)
        for (i = 0; i < RACE_N; i++) {
            race_slot* sl = &drain[t][i];
            memset(sl, 0, sizeof *sl);
            pthread_mutex_init(&sl->mu, 0);
            if (rs[t].got[i]) { sl->done = 2; raced++; continue; }
            {
                tfrdv_key k;
                char e[32];
                snprintf(e, sizeof e, "race_%d_%d", t, i);
                key_for(&k, e, PS_INC);
                if (tfrdv_recv_async(rz, &k.parsed, 0, race_done, sl, &st) != TFRDV_OK) sl->done = 3;
            }
        }
    for (i = 0; i < 1000; i++) { /* up to 5 s */
        waiting = 0;
        for (t = 0; t < RACE_T * RACE_N; t++) {
            race_slot* sl = &drain[t / RACE_N][t % RACE_N];
            pthread_mutex_lock(&sl->mu);
            waiting += !sl->done;
            pthread_mutex_unlock(&sl->mu);
        }
        if (!waiting) break;
        sleep_ms(5);
    }
    tfrdv_unref(rz);
    cli_close(&c); /* receives still waiting complete CANCELLED: their values are lost */
    for (t = 0; t < RACE_T; t++) {
        dups += rs[t].dups;
        bad += rs[t].bad;
        gave_up += rs[t].gave_up;
        if (rs[t].msg[0]) printf("      thread %d: %s\n", t, rs[t].msg);
        for (i = 0; i < RACE_N; i++) {
            race_slot* sl = &drain[t][i];
            if (sl->done == 1 && sl->code == TFRDV_OK && sl->v && sl->v->size == 4096 &&
                check((uint8_t*)sl->v->data, 4096, race_seed(t, i)))
                buffered++;
            else if (sl->done != 2)
                lost++;
            tfrdv_value_release(sl->v);
            pthread_mutex_destroy(&sl->mu);
        }
    }
    rp = srv_stats(&s);
    printf("      %d values sent: %d received while %d receives gave up, %d still buffered, %d lost, %d duplicated;"
           " server: %llu returned to the table\n",
           RACE_T * RACE_N, raced, gave_up, buffered, lost, dups, (unsigned long long)rp.ts.values_returned);
    TT_CHECK_EQ_INT(lost, 0);
    TT_CHECK_EQ_INT(raced + buffered, RACE_T * RACE_N);
    TT_CHECK_EQ_INT(dups, 0);
    TT_CHECK_EQ_INT(bad, 0);
    TT_CHECK(gave_up > 0);
    TT_CHECK_EQ_INT(rp.pending_sends, 0); /* nothing left over: no value went back twice */
    srv_stop(&s);
}
static void test_exactly_once_under_give_up_races_tcp(void) { race_over("127.0.0.1:0"); }
static void test_exactly_once_under_give_up_races_unix(void) { race_over(upath("race.sock")); }

int main(int argc, char** argv) {
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) snprintf(self_exe, sizeof self_exe, "%s", argv[0]);
    else self_exe[n] = 0;
    if (argc == 7 && strcmp(argv[1], "--serve") == 0) {
        child_server(atoi(argv[2]), atoi(argv[3]), argv[4], strtoull(argv[5], 0, 10), atoi(argv[6]));
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--die-fetching") == 0) return die_fetching(argv[2]);
    TT_MAIN_BEGIN(argc, argv);
    /* this suite is about the socket path: a TCP peer on 127.0.0.1 would move to a Unix socket
       after its HELLO (SAME HOST; test_tcp_samehost covers that). Read by tfrdv_tcp_create, here
       and in the serving children (they inherit it) */
    setenv("TFRDV_TCP_UPGRADE_DENY", "1", 1);
    signal(SIGPIPE, SIG_IGN); /* the raw test peers write to closed sockets */
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tfrdv_tcp_%d", (int)getpid());
    mkdir(tmpdir, 0700);
    TT_RUN(test_codec_roundtrip);
    TT_RUN(test_codec_hostile);
    TT_RUN(test_codec_null_arguments);
    TT_RUN(test_config_errors);
    TT_RUN(test_config_refused);
    TT_RUN(test_shapes_tcp);
    TT_RUN(test_shapes_unix);
    TT_RUN(test_above_2gib);
    TT_RUN(test_restart_detail);
    TT_RUN(test_cancel_keeps_value);
    TT_RUN(test_deadline_keeps_value);
    TT_RUN(test_deadline_by_transport);
    TT_RUN(test_abort_keeps_value);
    TT_RUN(test_1000_concurrent);
    TT_RUN(test_small_not_behind_big_tcp);
    TT_RUN(test_small_not_behind_big_unix);
    TT_RUN(test_server_killed_mid_transfer);
    TT_RUN(test_client_killed_mid_transfer);
    TT_RUN(test_reconnect_after_restart);
    TT_RUN(test_backoff);
    TT_RUN(test_busy_port);
    TT_RUN(test_hostile_frames);
    TT_RUN(test_duplicate_ids);
    TT_RUN(test_huge_times);
    TT_RUN(test_close_while_streaming);
    TT_RUN(test_hostile_server);
    TT_RUN(test_peer_bytes_escaped);
    TT_RUN(test_impostor_refused);
    TT_RUN(test_error_detail_checked);
    TT_RUN(test_request_flood);
    TT_RUN(test_connection_flood);
    TT_RUN(test_all_timers_per_tick);
    TT_RUN(test_destroy_in_flight);
    TT_RUN(test_destroy_client_in_flight);
    TT_RUN(test_destroy_from_io_thread_callback);
    TT_RUN(test_destroy_from_poll_callback);
    TT_RUN(test_destroy_from_lent_thread_callback);
    TT_RUN(test_destroy_from_callback_unix);
    TT_RUN(test_blocking_recv_in_io_thread_callback);
    TT_RUN(test_blocking_recv_in_poll_callback);
    TT_RUN(test_blocking_recv_in_lent_thread_callback);
    TT_RUN(test_host_driven);
    TT_RUN(test_small_responses_read_together);
    TT_RUN(test_spin_rule);
    TT_RUN(test_recv_reads_its_own_response);
    TT_RUN(test_lent_connection_kept_between_fetches);
    TT_RUN(test_kept_connection_to_a_restarted_peer);
    TT_RUN(test_requests_posted_together_go_out_together);
    TT_RUN(test_lent_thread_cancel_timeout_destroy_kill);
    TT_RUN(test_host_driven_recv_needs_no_poller);
    TT_RUN(test_allocator_hook);
    TT_RUN(test_resolve_and_set_worker);
    TT_RUN(test_one_vtable_two_managers);
    TT_RUN(test_peer_incarnation_waits_for_a_late_ps);
    TT_RUN(test_retries_fire_without_attach);
    TT_RUN(test_worker_started_before_its_ps);
    TT_RUN(test_delivery_acknowledged);
    TT_RUN(test_peer_that_reads_nothing);
    TT_RUN(test_answers_of_one_read_share_a_sendmsg);
    TT_RUN(test_exactly_once_under_give_up_races_tcp);
    TT_RUN(test_exactly_once_under_give_up_races_unix);
    alarm(0);
    {
        char cmdline[128];
        snprintf(cmdline, sizeof cmdline, "rm -rf %s", tmpdir);
        if (system(cmdline) != 0) printf("    could not remove %s\n", tmpdir);
    }
    return TT_MAIN_END();
}
