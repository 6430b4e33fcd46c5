/* test_tcp_samehost.c - tfrdv_tcp.h's same-host path (SAME HOST in its docs): on a "unix:"
   connection the client reads large values straight from the server's memory with
   process_vm_readv. The codec of the new frames in process; the transport between two processes
   (the serving worker a child of this one, driven over a pair of pipes: SEND / STATS / QUIT),
   the exactly-once workload in one process (process_vm_readv on itself), a hostile server (a
   raw socket in this process announcing memory it does not have), peers killed mid-transfer and
   each fallback (disabled, denied by the environment hook, a non-dumpable server). Every test
   is bounded by alarm(). Built by tests/tcp/tcp.mk as part of `make test`. */
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
#include <sys/mman.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB ((uint64_t)1 << 20)

static char tmpdir[64];
static char self_exe[4096];
static const char* upath(const char* name) {
    static char buf[4][128];
    static int k;
    char* b = buf[k++ & 3];
    snprintf(b, 128, "unix:%s/%s", tmpdir, name);
    return b;
}
static int under_valgrind(void) {
    const char* v = getenv("VALGRIND");
    return v && v[0] == '1';
}
static void fill(uint8_t* p, uint64_t n, unsigned s) {
    uint64_t i, blk = n < MIB ? n : MIB;
    for (i = 0; i < blk; i++) p[i] = (uint8_t)(i * 131u + s);
    for (i = blk; i < n; i += blk) memcpy(p + i, p, n - i < blk ? (size_t)(n - i) : (size_t)blk);
}
static int check(const uint8_t* p, uint64_t n, unsigned s) {
    uint64_t i;
    for (i = 0; i < n; i++)
        if (p[i] != (uint8_t)(i * 131u + s)) return 0;
    return 1;
}
static void big_release(tfrdv_value* v) {
    free(v->data);
    free(v);
}
static tfrdv_tcp_pool* child_pool; /* the serving child's shared pool (flag 4), or NULL */
static tfrdv_value* mkval(uint64_t size, unsigned seed) {
    tfrdv_value* v;
    if (child_pool) { /* ZERO COPY: the value lies in the pool */
        tfrdv_allocator a = tfrdv_tcp_pool_allocator(child_pool);
        int64_t dim = (int64_t)size;
        v = tfrdv_value_new(&a, 4 /* DT_UINT8 */, 1, &dim, 0, size);
        if (v) fill((uint8_t*)v->data, size, seed);
        return v;
    }
    v = (tfrdv_value*)calloc(1, sizeof *v + sizeof(int64_t));
    int64_t* d = (int64_t*)(v + 1);
    void* data = malloc(size ? (size_t)size : 1);
    d[0] = (int64_t)size;
    fill((uint8_t*)data, size, seed);
    *v = tfrdv_value_make(4 /* DT_UINT8 */, 1, d, data, size, big_release, 0);
    return v;
}
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
#define PS1 "/job:ps/replica:0/task:1"
static const char* src_dev = PS_DEV; /* the serving child's device (task 1 in some tests) */
static void key_for(tfrdv_key* k, const char* edge) {
    tfrdv_frame_iter fi = {0, 0};
    tfrdv_status st;
    (void)tfrdv_key_make(k, src_dev, PS_INC, WK_DEV, edge, fi, &st);
}

/* ============================================================================================
   The codec: RESPONSE by address (flag 4) and SAMEHOST
   ============================================================================================ */
static void bad(const uint8_t* b, size_t n, const tfrdv_tcp_limits* lim, const char* want) {
    tfrdv_tcp_frame f;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, lim, &f, &st), -1);
    TT_CHECK_CONTAINS(st.msg, want);
}
static void test_codec_by_address(void) {
    uint8_t b[512];
    tfrdv_tcp_frame f, g;
    tfrdv_status st;
    tfrdv_tcp_limits lim;
    size_t n, i;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RESPONSE;
    f.id = 5;
    f.dtype = 4;
    f.rank = 2;
    f.dims[0] = 3; f.dims[1] = 7;
    f.bytes = 21;
    f.remote = 1;
    f.remote_addr = 0x7f0012345678ULL;
    n = tfrdv_tcp_encode(&f, b, sizeof b);
    TT_CHECK_EQ_INT(n, 16 + 24 + 16 + 8);
    for (i = 0; i < n; i++) TT_CHECK(tfrdv_tcp_decode(b, i, 0, &g, &st) == 0); /* incomplete */
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, 0, &g, &st), n);
    TT_CHECK(g.remote && g.remote_addr == f.remote_addr && g.bytes == 21 && g.data_len == 0 && g.rank == 2 && g.dims[1] == 7);
    TT_CHECK_EQ_INT(b[16 + 8], 4); /* flags */
    /* without the flag the same frame is the old RESPONSE (version 2 peers never see flag 4) */
    f.remote = 0;
    f.data_len = 0;
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, tfrdv_tcp_encode(&f, b, sizeof b), 0, &g, &st), 16 + 24 + 16);
    TT_CHECK(!g.remote);

    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_SAMEHOST;
    f.sh_flags = TFRDV_TCP_SH_CMA_READ;
    n = tfrdv_tcp_encode(&f, b, sizeof b);
    TT_CHECK_EQ_INT(n, 24);
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, 0, &g, &st), 24);
    TT_CHECK(g.type == TFRDV_TCP_SAMEHOST && g.sh_flags == TFRDV_TCP_SH_CMA_READ);

    /* hostile */
    f.sh_flags = 256; /* 4, 8 and 16: the ring (version 4); 32, 64, 128: the TCP upgrade (version 5) */
    bad(b, tfrdv_tcp_encode(&f, b, sizeof b), 0, "SAMEHOST with unknown flags 0x100");
    f.sh_flags = 0;
    f.id = 3;
    bad(b, tfrdv_tcp_encode(&f, b, sizeof b), 0, "id 3 (0 expected)");
    f.id = 0;
    n = tfrdv_tcp_encode(&f, b, sizeof b);
    b[20] = 1; /* the byte count: none follow */
    bad(b, n, 0, "SAMEHOST flags 0x0 with 0 bytes (length field 1; 0..0 expected)");
    b[20] = 0;
    b[4] = 9; /* body length */
    memset(b + n, 0, 8);
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, 0, &g, &st), 0); /* its ninth byte has not come */
    bad(b, n + 1, 0, "SAMEHOST flags 0x0 with 1 bytes (length field 0; 0..0 expected)");
    b[4] = (8 + 255 + 1) & 0xff;
    b[5] = (8 + 255 + 1) >> 8;
    bad(b, n, 0, "SAMEHOST body of 264 bytes (8..263 expected)");

    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RESPONSE;
    f.id = 1;
    f.rank = 1;
    f.dims[0] = 16;
    f.bytes = 16;
    f.remote = 1;
    f.remote_addr = UINT64_MAX - 8;
    bad(b, tfrdv_tcp_encode(&f, b, sizeof b), 0, "wraps");
    f.remote_addr = 4096;
    f.bytes = 0;
    bad(b, tfrdv_tcp_encode(&f, b, sizeof b), 0, "by address (flag 4) with no value bytes");
    f.bytes = 16;
    n = tfrdv_tcp_encode(&f, b, sizeof b);
    b[4] = (uint8_t)(b[4] + 4); /* 4 value bytes announced after the address */
    bad(b, n + 4, 0, "by address (flag 4) with bytes or a wrong body length");
    f.is_dead = 1;
    f.no_value = 1;
    f.rank = 0;
    f.bytes = 0;
    bad(b, tfrdv_tcp_encode(&f, b, sizeof b), 0, "no value bytes");
    memset(&lim, 0, sizeof lim);
    lim.max_tensor_bytes = MIB;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RESPONSE;
    f.id = 1;
    f.bytes = (uint64_t)1 << 40; /* a huge length is refused before anything is allocated */
    f.remote = 1;
    f.remote_addr = 4096;
    bad(b, tfrdv_tcp_encode(&f, b, sizeof b), &lim, "exceeds max_tensor_bytes");
    n = tfrdv_tcp_encode(&f, b, sizeof b);
    b[16 + 8] = 16; /* flags 16 (8: a pool reference, ZERO COPY) */
    bad(b, n, 0, "unknown flags 0x10");
}

/* ============================================================================================
   Two processes: the serving worker is a child (exec'd afresh), the client is this process
   ============================================================================================ */
enum { OP_SEND = 1, OP_STATS = 2, OP_QUIT = 3 };
typedef struct cmd {
    int op, count;
    char edge[48];
    uint64_t size;
    unsigned seed;
} cmd;
typedef struct rep {
    int code;
    char msg[256];
    char addr[128];
    tfrdv_tcp_stats ts;
    uint64_t pool_live;   /* the child's pool: bytes in live blocks (ZERO COPY) */
} rep;
typedef struct srv {
    pid_t pid;
    int cfd, rfd;
    char addr[128];
} srv;

/* the serving worker: same_host for its config; flags 1: made non-dumpable (and, as root, uid
   65534 first: root could read it anyway); 2: it is task 1 of the ps job; 4: its values come
   from a shared pool registered with its transport (ZERO COPY) */
static void child_server(int cfd, int rfd, const char* addr, int64_t same_host, int flags) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_tcp* t = 0;
    tfrdv_mgr* m = 0;
    tfrdv_status st;
    rep r;
    cmd c;
    alarm(300);
    memset(&r, 0, sizeof r);
    if (flags & 2) src_dev = PS1 "/device:CPU:0";
    if (flags & 1) {
        if (getuid() == 0 && setuid(65534) != 0) _exit(3);
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) _exit(3);
    }
    tc.listen_address = addr;
    tc.same_host = same_host;
    if (tfrdv_tcp_create(&tc, &t, &st) != TFRDV_OK) {
        r.code = (int)st.code;
        snprintf(r.msg, sizeof r.msg, "%s", st.msg);
        (void)wr_full(rfd, &r, sizeof r);
        _exit(0);
    }
    if ((flags & 4) && (tfrdv_tcp_pool_create(200 * MIB, &child_pool, &st) != TFRDV_OK || tfrdv_tcp_add_pool(t, child_pool, &st) != TFRDV_OK)) {
        r.code = (int)st.code;
        snprintf(r.msg, sizeof r.msg, "%s", st.msg);
        (void)wr_full(rfd, &r, sizeof r);
        _exit(0);
    }
    mc.worker_name = flags & 2 ? PS1 : PS;
    mc.incarnation = PS_INC;
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
            r.code = (int)tfrdv_mgr_start_step(m, 1, &rz, &st);
            for (i = 0; i < c.count && r.code == TFRDV_OK; i++) {
                tfrdv_key k;
                char edge[64];
                tfrdv_value* v = mkval(c.size, c.seed + (unsigned)i);
                if (!v) { r.code = TFRDV_RESOURCE_EXHAUSTED; snprintf(r.msg, sizeof r.msg, "no memory for a %llu-byte value", (unsigned long long)c.size); break; }
                if (c.count > 1) snprintf(edge, sizeof edge, "%s_%d", c.edge, i);
                else snprintf(edge, sizeof edge, "%s", c.edge);
                key_for(&k, edge);
                r.code = (int)tfrdv_send(rz, &k.parsed, 0, v, 0, &st);
                if (r.code != TFRDV_OK) { tfrdv_value_release(v); snprintf(r.msg, sizeof r.msg, "%s", st.msg); }
            }
            if (rz) tfrdv_unref(rz);
        }
        tfrdv_tcp_get_stats(t, &r.ts);
        if (child_pool) r.pool_live = tfrdv_tcp_pool_live_bytes(child_pool);
        if (!wr_full(rfd, &r, sizeof r)) break;
    }
    tfrdv_tcp_destroy(t);
    tfrdv_mgr_destroy(m);
    tfrdv_tcp_pool_destroy(child_pool);
    _exit(0);
}
static int srv_start(srv* s, const char* addr, int64_t same_host, int nondump) {
    int c2s[2], s2c[2];
    rep r;
    if (pipe(c2s) || pipe(s2c)) return 0;
    fflush(stdout);
    s->pid = fork();
    if (s->pid == 0) {
        char a[4][64];
        close(c2s[1]);
        close(s2c[0]);
        snprintf(a[0], sizeof a[0], "%d", c2s[0]);
        snprintf(a[1], sizeof a[1], "%d", s2c[1]);
        snprintf(a[2], sizeof a[2], "%lld", (long long)same_host);
        snprintf(a[3], sizeof a[3], "%d", nondump);
        execl(self_exe, self_exe, "--serve", a[0], a[1], addr, a[2], a[3], (char*)0);
        _exit(127);
    }
    close(c2s[0]);
    close(s2c[1]);
    s->cfd = c2s[1];
    s->rfd = s2c[0];
    if (!rd_full(s->rfd, &r, sizeof r)) return 0;
    if (r.code) printf("    server: %s\n", r.msg);
    snprintf(s->addr, sizeof s->addr, "%s", r.addr);
    return r.code == TFRDV_OK;
}
static rep srv_cmd(srv* s, const cmd* c) {
    rep r;
    memset(&r, 0, sizeof r);
    if (!wr_full(s->cfd, c, sizeof *c) || !rd_full(s->rfd, &r, sizeof r)) r.code = -1;
    return r;
}
static rep srv_send_n(srv* s, const char* edge, uint64_t size, unsigned seed, int count) {
    cmd c;
    memset(&c, 0, sizeof c);
    c.op = OP_SEND;
    snprintf(c.edge, sizeof c.edge, "%s", edge);
    c.size = size;
    c.seed = seed;
    c.count = count;
    return srv_cmd(s, &c);
}
static rep srv_send(srv* s, const char* edge, uint64_t size, unsigned seed) { return srv_send_n(s, edge, size, seed, 1); }
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

typedef struct cli {
    tfrdv_tcp* t;
    tfrdv_mgr* m;
} cli;
/* a client of ps_addr (and of ps2_addr as worker task 1 of the ps job, when not NULL) */
static int cli_open2(cli* c, const char* ps_addr, const char* ps2_addr, int64_t same_host) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_worker w[2];
    tfrdv_status st;
    w[0].name = PS;
    w[0].address = ps_addr;
    w[1].name = PS1;
    w[1].address = ps2_addr;
    tc.workers = w;
    tc.num_workers = ps2_addr ? 2 : 1;
    tc.same_host = same_host;
    tc.hooks.logger.fn = log_capture;
    if (tfrdv_tcp_create(&tc, &c->t, &st) != TFRDV_OK) { printf("    client create: %s\n", st.msg); return 0; }
    mc.worker_name = WK;
    mc.transport = tfrdv_tcp_transport(c->t);
    if (tfrdv_mgr_create(&mc, &c->m, &st) != TFRDV_OK) { printf("    mgr: %s\n", st.msg); return 0; }
    (void)tfrdv_tcp_attach(c->t, c->m, &st);
    return 1;
}
static int cli_open(cli* c, const char* ps_addr, int64_t same_host) { return cli_open2(c, ps_addr, 0, same_host); }
static void cli_close(cli* c) {
    tfrdv_tcp_destroy(c->t);
    tfrdv_mgr_destroy(c->m);
}
static tfrdv_tcp_stats cstats(cli* c) {
    tfrdv_tcp_stats ts;
    tfrdv_tcp_get_stats(c->t, &ts);
    return ts;
}
static tfrdv_code fetch_from(cli* c, const char* dev, const char* edge, tfrdv_value** v, tfrdv_status* st) {
    tfrdv_rendezvous* r = 0;
    tfrdv_key k;
    tfrdv_frame_iter fi = {0, 0};
    tfrdv_code rc;
    int dead = 0;
    *v = 0;
    if ((rc = tfrdv_mgr_start_step(c->m, 1, &r, st)) != TFRDV_OK) return rc;
    (void)tfrdv_key_make(&k, dev, PS_INC, WK_DEV, edge, fi, st);
    rc = tfrdv_recv(r, &k.parsed, 0, 30 * SEC, v, &dead, st);
    tfrdv_unref(r);
    return rc;
}
static tfrdv_code fetch(cli* c, const char* edge, tfrdv_value** v, tfrdv_status* st) { return fetch_from(c, PS_DEV, edge, v, st); }
/* fetches edge and checks its bytes (size, seed) */
static int fetch_check(cli* c, const char* edge, uint64_t size, unsigned seed) {
    tfrdv_value* v = 0;
    tfrdv_status st;
    tfrdv_code rc = fetch(c, edge, &v, &st);
    int ok = rc == TFRDV_OK && v && v->size == size && check((const uint8_t*)v->data, size, seed);
    if (rc != TFRDV_OK) printf("    fetch %s: %s\n", edge, st.msg);
    tfrdv_value_release(v);
    return ok;
}
/* the first fetch on a new connection: its request goes out with the HELLO, before the
   same-host question; waits (bounded) until the answer came (grants: the count expected) */
static void warm(srv* s, cli* c, uint64_t grants) {
    int i;
    TT_CHECK_EQ_INT(srv_send(s, "warm", 1, 0).code, 0);
    TT_CHECK(fetch_check(c, "warm", 1, 0));
    for (i = 0; i < 1000 && cstats(c).same_host_grants < grants; i++) sleep_ms(5);
    TT_CHECK_EQ_INT(cstats(c).same_host_grants, grants);
}
/* waits (bounded) until the server saw every delivery acknowledged */
static rep srv_settled(srv* s) {
    rep r;
    int i;
    for (i = 0; i < 1000; i++) {
        r = srv_stats(s);
        if (r.ts.values_unacked == 0 && r.ts.server_requests_live == 0) break;
        sleep_ms(5);
    }
    return r;
}

/* 1 B, 4 KiB, 1 MiB and 64 MiB arrive byte-exact by address (same_host 1: every size) */
static void test_sizes_by_address(void) {
    static const uint64_t sizes[4] = {1, 4096, MIB, 64 * MIB};
    srv s;
    cli c;
    rep r;
    uint64_t base, sbase;
    int i, n = under_valgrind() ? 3 : 4;
    alarm(120);
    if (!srv_start(&s, upath("sizes.sock"), 1, 0)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, 1)) { TT_CHECK(0); srv_stop(&s); return; }
    warm(&s, &c, 1);
    base = cstats(&c).values_cma; /* the warm-up went over the socket, or by address if it was late */
    sbase = srv_stats(&s).ts.values_cma_sent;
    for (i = 0; i < n; i++) {
        char e[16];
        snprintf(e, sizeof e, "v%d", i);
        TT_CHECK_EQ_INT(srv_send(&s, e, sizes[i], (unsigned)i + 1).code, 0);
        TT_CHECK(fetch_check(&c, e, sizes[i], (unsigned)i + 1));
    }
    TT_CHECK_EQ_INT(cstats(&c).values_cma - base, n);
    TT_CHECK_EQ_INT(cstats(&c).protocol_errors, 0);
    r = srv_settled(&s);
    TT_CHECK_EQ_INT(r.ts.values_cma_sent - sbase, n);
    TT_CHECK_EQ_INT(r.ts.values_acked, n + 1);
    TT_CHECK_EQ_INT(r.ts.values_returned, 0);
    TT_CHECK_EQ_INT(log_count("travel over the socket"), 0);
    cli_close(&c);
    srv_stop(&s);
}
/* the default threshold: 4 KiB over the socket, 1 MiB by address; TCP never by address */
static void test_default_threshold(void) {
    srv s, s2;
    cli c;
    alarm(60);
    if (!srv_start(&s, upath("dflt.sock"), 0, 0)) { TT_CHECK(0); return; }
    if (!srv_start(&s2, "127.0.0.1:0", 0, 2)) { TT_CHECK(0); srv_stop(&s); return; }
    if (!cli_open2(&c, s.addr, s2.addr, 0)) { TT_CHECK(0); srv_stop(&s); srv_stop(&s2); return; }
    warm(&s, &c, 1);
    TT_CHECK_EQ_INT(srv_send(&s, "small", 4096, 3).code, 0);
    TT_CHECK(fetch_check(&c, "small", 4096, 3));
    TT_CHECK_EQ_INT(cstats(&c).values_cma, 0);
    TT_CHECK_EQ_INT(srv_send(&s, "large", MIB, 4).code, 0);
    TT_CHECK(fetch_check(&c, "large", MIB, 4));
    TT_CHECK_EQ_INT(cstats(&c).values_cma, 1);
    {
        tfrdv_value* v = 0;
        tfrdv_status st;
        TT_CHECK_EQ_INT(srv_send(&s2, "tcp", MIB, 5).code, 0);
        TT_CHECK_EQ_INT(fetch_from(&c, PS1 "/device:CPU:0", "tcp", &v, &st), TFRDV_OK);
        TT_CHECK(v && v->size == MIB);
        tfrdv_value_release(v);
    }
    TT_CHECK_EQ_INT(cstats(&c).values_cma, 1);
    TT_CHECK_EQ_INT(log_count("travel over the socket"), 0); /* TCP is not a fallback */
    cli_close(&c);
    srv_stop(&s);
    srv_stop(&s2);
}

/* the server dies while the client is about to read its value: the read and every other call
   in flight fail UNAVAILABLE, each once */
static pid_t kill_on_alloc;
static tfrdv_value* killing_alloc(void* u, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    (void)u;
    if (kill_on_alloc > 0) { kill(kill_on_alloc, SIGKILL); sleep_ms(20); } /* gone before the read */
    return tfrdv_value_new(NULL, dtype, rank, dims, 0, size);
}
typedef struct slot { pthread_mutex_t mu; int done; tfrdv_code code; char msg[256]; } slot;
static void on_slot(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    slot* s = (slot*)u;
    (void)sa; (void)ra; (void)dead;
    tfrdv_value_release(v);
    pthread_mutex_lock(&s->mu);
    s->done++;
    s->code = st->code;
    snprintf(s->msg, sizeof s->msg, "%s", st->msg);
    pthread_mutex_unlock(&s->mu);
}
/* waits up to 10 s until each of the n slots completed once; returns how many did */
static int slots_done(slot* s, int n) {
    int i, j, done = 0;
    for (j = 0; j < 2000; j++) {
        done = 0;
        for (i = 0; i < n; i++) {
            pthread_mutex_lock(&s[i].mu);
            done += s[i].done == 1;
            pthread_mutex_unlock(&s[i].mu);
        }
        if (done == n) break;
        sleep_ms(5);
    }
    return done;
}
/* n receives on r of keys "never0".. that nobody sends, each completing into its slot */
static void post_never(tfrdv_rendezvous* r, slot* pend, int n) {
    tfrdv_key k;
    tfrdv_status st;
    int i;
    for (i = 0; i < n; i++) {
        char e[16];
        memset(&pend[i], 0, sizeof pend[i]);
        pthread_mutex_init(&pend[i].mu, 0);
        snprintf(e, sizeof e, "never%d", i);
        key_for(&k, e);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, 0, on_slot, &pend[i], &st), TFRDV_OK);
    }
}
/* each of the n slots completed exactly once, UNAVAILABLE (the peer died) */
static void all_failed_once(slot* pend, int n) {
    int i;
    (void)slots_done(pend, n); /* each is checked below */
    sleep_ms(50); /* a second completion would show now */
    for (i = 0; i < n; i++) {
        TT_CHECK_EQ_INT(pend[i].done, 1);
        TT_CHECK_EQ_INT(pend[i].code, TFRDV_UNAVAILABLE);
        pthread_mutex_destroy(&pend[i].mu);
    }
}
static void test_server_killed_mid_read(void) {
    srv s;
    cli c;
    tfrdv_status st;
    tfrdv_rendezvous* r;
    tfrdv_value* v = 0;
    tfrdv_args a;
    tfrdv_key k;
    static slot others[8];
    int dead, status;
    alarm(60);
    if (!srv_start(&s, upath("kill.sock"), 1, 0)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, 1)) { TT_CHECK(0); srv_stop(&s); return; }
    warm(&s, &c, 1);
    TT_CHECK_EQ_INT(srv_send(&s, "big", 64 * MIB, 9).code, 0);
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    post_never(r, others, 8); /* pending calls on the same connection (never sent) */
    kill_on_alloc = s.pid;
    memset(&a, 0, sizeof a);
    a.alloc_fn = killing_alloc;
    key_for(&k, "big");
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.parsed, &a, 30 * SEC, &v, &dead, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "process_vm_readv");
    TT_CHECK(!v);
    kill_on_alloc = 0;
    TT_CHECK_EQ_INT(slots_done(others, 8), 8);
    all_failed_once(others, 8);
    tfrdv_unref(r);
    waitpid(s.pid, &status, 0);
    close(s.cfd);
    close(s.rfd);
    cli_close(&c);
}

/* ============================================================================================
   In one process: the serving worker and the client are two transports (process_vm_readv on
   this process)
   ============================================================================================ */
typedef struct insrv {
    tfrdv_tcp* t;
    tfrdv_mgr* m;
    char addr[128];
} insrv;
static int64_t insrv_handshake_ns; /* 0: the default */
static int insrv_open(insrv* s, const char* listen, int64_t same_host) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_status st;
    tc.listen_address = listen;
    tc.same_host = same_host;
    tc.handshake_timeout_ns = insrv_handshake_ns;
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
static tfrdv_tcp_stats tstats(tfrdv_tcp* t) {
    tfrdv_tcp_stats ts;
    tfrdv_tcp_get_stats(t, &ts);
    return ts;
}

#include "exactly_once.h"

typedef struct eo_world { insrv s; cli c; } eo_world;
static void eo_tcp_settle(void* u) {
    eo_world* x = (eo_world*)u;
    int i;
    for (i = 0; i < 2000; i++) {
        tfrdv_tcp_stats a = tstats(x->c.t), b = tstats(x->s.t);
        if (a.client_calls_live == 0 && b.server_requests_live == 0 && b.values_unacked == 0) break;
        sleep_ms(5);
    }
    TT_CHECK_EQ_INT(tstats(x->c.t).client_calls_live, 0);
    TT_CHECK_EQ_INT(tstats(x->s.t).values_unacked, 0);
}
/* the exactly-once workload (receives time out and are cancelled while their values are on the
   way) over a same-host connection with same_host sh; returns the client's and server's stats */
static void eo_same_host(const char* sock, int64_t sh, const char* label, tfrdv_tcp_stats* cs, tfrdv_tcp_stats* ss) {
    static eo_world x;
    tfrdv_key k[EO_T];
    tfrdv_parsed_key pk[EO_T];
    tfrdv_rendezvous *rc = 0, *rs = 0;
    tfrdv_status st;
    int t;
    memset(cs, 0, sizeof *cs);
    memset(ss, 0, sizeof *ss);
    alarm(120);
    if (!insrv_open(&x.s, upath(sock), sh)) { TT_CHECK(0); return; }
    if (!cli_open(&x.c, x.s.addr, sh)) { TT_CHECK(0); insrv_close(&x.s); return; }
    for (t = 0; t < EO_T; t++) {
        char e[16];
        snprintf(e, sizeof e, "eo%d", t);
        key_for(&k[t], e);
        pk[t] = k[t].parsed;
    }
    (void)tfrdv_mgr_start_step(x.c.m, 1, &rc, &st);
    (void)tfrdv_mgr_start_step(x.s.m, 1, &rs, &st);
    eo_workload(label, rc, rs, x.s.m, 1, pk, eo_tcp_settle, &x, 1);
    *cs = tstats(x.c.t);
    *ss = tstats(x.s.t);
    TT_CHECK_EQ_INT(cs->protocol_errors, 0);
    TT_CHECK_EQ_INT(ss->protocol_errors, 0);
    tfrdv_unref(rc);
    tfrdv_unref(rs);
    cli_close(&x.c);
    insrv_close(&x.s);
}
/* ... with values read by address: every value is received exactly once or stays buffered */
static void test_exactly_once_by_address(void) {
    tfrdv_tcp_stats c, s;
    eo_same_host("eo.sock", 1, "tcp, same host by address", &c, &s);
    printf("    %llu values read by address; server: %llu sent by address, %llu returned to the table\n",
           (unsigned long long)c.values_cma, (unsigned long long)s.values_cma_sent, (unsigned long long)s.values_returned);
    TT_CHECK(c.values_cma > 0);
}

/* the client dies after the server answered by address: the value goes back to the table, and
   the next client reads it intact */
static int die_fetching(const char* addr) {
    cli c;
    tfrdv_rendezvous* r;
    tfrdv_status st;
    tfrdv_key k;
    tfrdv_args a;
    tfrdv_value* v = 0;
    int dead;
    alarm(60);
    if (!cli_open(&c, addr, 1)) return 2;
    if (!fetch_check(&c, "warm", 1, 0)) return 4;
    for (dead = 0; dead < 1000 && cstats(&c).same_host_grants < 1; dead++) sleep_ms(5);
    kill_on_alloc = getpid();
    memset(&a, 0, sizeof a);
    a.alloc_fn = killing_alloc;
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    key_for(&k, "back");
    (void)tfrdv_recv(r, &k.parsed, &a, 30 * SEC, &v, &dead, &st);
    return 3; /* not reached */
}
static void test_client_killed_mid_read(void) {
    insrv s;
    cli c;
    tfrdv_rendezvous* rz;
    tfrdv_key k;
    tfrdv_status st;
    pid_t pid;
    int status, i;
    alarm(60);
    if (!insrv_open(&s, upath("back.sock"), 1)) { TT_CHECK(0); return; }
    (void)tfrdv_mgr_start_step(s.m, 1, &rz, &st);
    key_for(&k, "back");
    TT_CHECK_EQ_INT(tfrdv_send(rz, &k.parsed, 0, mkval(8 * MIB, 21), 0, &st), TFRDV_OK);
    key_for(&k, "warm");
    TT_CHECK_EQ_INT(tfrdv_send(rz, &k.parsed, 0, mkval(1, 0), 0, &st), TFRDV_OK);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        execl(self_exe, self_exe, "--die-fetching", s.addr, (char*)0);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    TT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    for (i = 0; i < 1000 && (tstats(s.t).values_returned < 1 || tstats(s.t).connections); i++) sleep_ms(5);
    TT_CHECK(tstats(s.t).values_cma_sent >= 1);
    TT_CHECK_EQ_INT(tstats(s.t).values_returned, 1);
    if (!cli_open(&c, s.addr, 1)) { TT_CHECK(0); tfrdv_unref(rz); insrv_close(&s); return; }
    key_for(&k, "warm");
    TT_CHECK_EQ_INT(tfrdv_send(rz, &k.parsed, 0, mkval(1, 0), 0, &st), TFRDV_OK);
    TT_CHECK(fetch_check(&c, "warm", 1, 0));
    for (i = 0; i < 1000 && cstats(&c).same_host_grants < 1; i++) sleep_ms(5);
    TT_CHECK(fetch_check(&c, "back", 8 * MIB, 21));
    TT_CHECK(cstats(&c).values_cma >= 1);
    cli_close(&c);
    tfrdv_unref(rz);
    insrv_close(&s);
}

/* ---- a hostile server: a raw socket in this process speaking protocol 3 ---- */
static int raw_listen(const char* addr) {
    struct sockaddr_un un;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    snprintf(un.sun_path, sizeof un.sun_path, "%s", addr + 5);
    unlink(un.sun_path);
    if (bind(fd, (struct sockaddr*)&un, sizeof un) != 0 || listen(fd, 4) != 0) { close(fd); return -1; }
    return fd;
}
/* a client fetches "evil" from a hostile server (fn on its own thread, accepting on lfd): the
   fetch fails UNAVAILABLE naming want, no value, nothing taken by address (zc: by zero copy),
   one protocol error; 0 if the client could not start (lfd closed, fn joined) */
static char hostile_last_msg[TFRDV_STATUS_MSG_MAX]; /* the status of the last hostile fetch */
static int hostile_fetch(const char* addr, int lfd, void* (*fn)(void*), void* arg, const char* want, int zc) {
    pthread_t th;
    cli c;
    tfrdv_value* v = 0;
    tfrdv_status st;
    pthread_create(&th, 0, fn, arg);
    if (!cli_open(&c, addr, 1)) { TT_CHECK(0); close(lfd); pthread_join(th, 0); return 0; }
    TT_CHECK_EQ_INT(fetch(&c, "evil", &v, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, want);
    snprintf(hostile_last_msg, sizeof hostile_last_msg, "%s", st.msg);
    TT_CHECK(!v);
    TT_CHECK_EQ_INT(zc ? cstats(&c).values_zero_copy : cstats(&c).values_cma, 0);
    TT_CHECK_EQ_INT(cstats(&c).protocol_errors, 1);
    cli_close(&c);
    pthread_join(th, 0);
    return 1;
}
typedef struct hostile {
    int lfd, act;         /* act 0: an unmapped address; 1: a range running into a guard page;
                             2: by address before granting; 3: grants unasked-for twice;
                             4: 16 MiB whose second half is not mapped (read by two threads
                             where two CPUs are available: the second fails at once) */
    uint8_t* guard;       /* two pages, the second PROT_NONE */
    uint8_t* big;         /* 16 MiB, the second 8 MiB PROT_NONE */
    int saw_samehost;
} hostile;
static void* hostile_server(void* p) {
    hostile* h = (hostile*)p;
    rawbuf* rb = (rawbuf*)calloc(1, sizeof *rb);
    tfrdv_tcp_frame f, g;
    uint64_t req = 0;
    int fd = accept(h->lfd, 0, 0);
    if (fd < 0) { free(rb); return 0; }
    raw_hello(fd, 3, PS, 0);
    while ((!req || (h->act != 2 && !h->saw_samehost)) && raw_next(fd, rb, &g, 0, 0, -1)) {
        if (g.type == TFRDV_TCP_REQUEST) req = g.id;
        if (g.type == TFRDV_TCP_SAMEHOST) h->saw_samehost = 1;
    }
    if (h->act != 2) {
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_SAMEHOST;
        f.sh_flags = TFRDV_TCP_SH_CMA_GRANT;
        raw_put(fd, &f);
        if (h->act == 3) raw_put(fd, &f);
    }
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RESPONSE;
    f.id = req;
    f.dtype = 4;
    f.rank = 1;
    f.remote = 1;
    f.bytes = h->act == 4 ? 16 * MIB : h->act == 1 ? 8192 : 4096;
    f.dims[0] = (int64_t)f.bytes;
    f.remote_addr = h->act == 4 ? (uint64_t)(uintptr_t)h->big : h->act == 1 ? (uint64_t)(uintptr_t)h->guard : 4096;
    raw_put(fd, &f);
    while (raw_next(fd, rb, &g, 0, 0, -1)) {} /* until the client closes */
    close(fd);
    free(rb);
    return 0;
}
static void test_hostile_server_by_address(void) {
    static const char* want[5] = {"process_vm_readv of a 4096-byte value at 0x1000", "failed after 4096 bytes: Bad address",
                                  "RESPONSE by address on a connection that did not agree to it", "SAMEHOST frame sent twice",
                                  "process_vm_readv of a 16777216-byte value at 0x"};
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t* guard = (uint8_t*)mmap(0, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t* big = (uint8_t*)mmap(0, 16 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int act;
    alarm(60);
    TT_CHECK(guard != MAP_FAILED && big != MAP_FAILED);
    if (guard == MAP_FAILED || big == MAP_FAILED) return;
    memset(guard, 0x5a, (size_t)pg);
    TT_CHECK_EQ_INT(mprotect(guard + pg, (size_t)pg, PROT_NONE), 0);
    memset(big, 0x5b, 8 * MIB);
    TT_CHECK_EQ_INT(mprotect(big + 8 * MIB, 8 * MIB, PROT_NONE), 0);
    for (act = 0; act < 5; act++) {
        hostile h;
        const char* addr = upath("hostile.sock");
        memset(&h, 0, sizeof h);
        h.act = act;
        h.guard = guard + pg - 4096; /* the last 4096 bytes before the guard page */
        h.big = big;
        h.lfd = raw_listen(addr);
        TT_CHECK(h.lfd >= 0);
        if (h.lfd < 0) break;
        if (!hostile_fetch(addr, h.lfd, hostile_server, &h, want[act], 0)) break;
        TT_CHECK(act == 2 || h.saw_samehost);
        close(h.lfd);
    }
    TT_CHECK_CONTAINS(hostile_last_msg, "failed after 8388608 bytes: Bad address"); /* act 4: the half that was there */
    munmap(guard, 2 * (size_t)pg);
    munmap(big, 16 * MIB);
}

/* ---- an older peer (protocol version 2) never sees a SAMEHOST frame ---- */
typedef struct oldsrv { int lfd, saw_samehost, saw_ack, version; const char* offer; } oldsrv;
static void* old_server(void* p) {
    oldsrv* o = (oldsrv*)p;
    rawbuf* rb = (rawbuf*)calloc(1, sizeof *rb);
    tfrdv_tcp_frame f, g;
    uint8_t b[128];
    size_t n;
    int fd = accept(o->lfd, 0, 0);
    if (fd < 0) { free(rb); return 0; }
    raw_hello(fd, o->version ? o->version : 2, PS, 0);
    while (raw_next(fd, rb, &g, 0, 0, -1)) {
        if (g.type == TFRDV_TCP_SAMEHOST) o->saw_samehost = (int)g.sh_flags;
        if (g.type == TFRDV_TCP_SAMEHOST && o->offer && g.sh_flags == TFRDV_TCP_SH_TCP_ASK) {
            uint8_t body[TFRDV_TCP_SH_TOKEN_LEN + TFRDV_TCP_SH_ADDR_MAX]; /* a token, then o->offer */
            size_t al = strlen(o->offer);
            memset(body, 7, TFRDV_TCP_SH_TOKEN_LEN);
            memcpy(body + TFRDV_TCP_SH_TOKEN_LEN, o->offer, al);
            memset(&f, 0, sizeof f);
            f.type = TFRDV_TCP_SAMEHOST;
            f.sh_flags = TFRDV_TCP_SH_TCP_OFFER;
            f.message.ptr = (const char*)body;
            f.message.len = TFRDV_TCP_SH_TOKEN_LEN + al;
            n = tfrdv_tcp_encode(&f, b, sizeof b);
            (void)wr_full(fd, b, n);
        }
        if (g.type == TFRDV_TCP_ACK) { o->saw_ack = 1; break; }
        if (g.type != TFRDV_TCP_REQUEST) continue;
        memset(&f, 0, sizeof f); /* a 4-byte value, the bytes in the frame */
        f.type = TFRDV_TCP_RESPONSE;
        f.id = g.id;
        f.dtype = 4;
        f.rank = 1;
        f.dims[0] = 4;
        f.bytes = 4;
        f.data_len = 4;
        n = tfrdv_tcp_encode(&f, b, sizeof b);
        memcpy(b + n, "abcd", 4);
        (void)wr_full(fd, b, n + 4);
    }
    close(fd);
    free(rb);
    return 0;
}
/* a client of the older server o (listening at addr) fetches its one value; o saw the ACK and
   no SAMEHOST frame; c stays open for the caller's checks (0: it could not be made) */
static int old_fetch(oldsrv* o, const char* addr, cli* c) {
    pthread_t th;
    tfrdv_value* v = 0;
    tfrdv_status st;
    pthread_create(&th, 0, old_server, o);
    log_reset();
    if (!cli_open(c, addr, 1)) { TT_CHECK(0); close(o->lfd); pthread_join(th, 0); return 0; }
    TT_CHECK_EQ_INT(fetch(c, "old", &v, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 4 && memcmp(v->data, "abcd", 4) == 0);
    tfrdv_value_release(v);
    pthread_join(th, 0); /* it saw the ACK (sent after anything the HELLO caused) */
    TT_CHECK(o->saw_ack);
    if (!o->offer) TT_CHECK(!o->saw_samehost);
    return 1;
}
static void test_older_peer_never_asked(void) {
    oldsrv o;
    cli c;
    const char* addr = upath("old.sock");
    alarm(60);
    memset(&o, 0, sizeof o);
    o.lfd = raw_listen(addr);
    TT_CHECK(o.lfd >= 0);
    if (o.lfd < 0 || !old_fetch(&o, addr, &c)) return;
    TT_CHECK_EQ_INT(log_count("the server speaks protocol version 2"), 1);
    cli_close(&c);
    close(o.lfd);
}

/* ---- fallbacks: each one works over the socket and is logged once per transport ---- */
static void test_fallback_disabled(void) {
    srv s;
    cli c;
    int i;
    alarm(60);
    /* the client off */
    if (!srv_start(&s, upath("off.sock"), 1, 0)) { TT_CHECK(0); return; }
    log_reset();
    if (!cli_open(&c, s.addr, TFRDV_OFF)) { TT_CHECK(0); srv_stop(&s); return; }
    TT_CHECK_EQ_INT(srv_send_n(&s, "off", MIB, 1, 2).code, 0);
    TT_CHECK(fetch_check(&c, "off_0", MIB, 1));
    TT_CHECK(fetch_check(&c, "off_1", MIB, 2));
    TT_CHECK_EQ_INT(cstats(&c).values_cma, 0);
    TT_CHECK_EQ_INT(log_count("same_host is TFRDV_OFF"), 1);
    cli_close(&c);
    srv_stop(&s);
    /* the server off: it refuses */
    if (!srv_start(&s, upath("off2.sock"), TFRDV_OFF, 0)) { TT_CHECK(0); return; }
    log_reset();
    if (!cli_open(&c, s.addr, 1)) { TT_CHECK(0); srv_stop(&s); return; }
    TT_CHECK_EQ_INT(srv_send(&s, "off2", MIB, 3).code, 0);
    TT_CHECK(fetch_check(&c, "off2", MIB, 3));
    TT_CHECK_EQ_INT(cstats(&c).values_cma, 0);
    TT_CHECK_EQ_INT(srv_stats(&s).ts.values_cma_sent, 0);
    /* its answer may come after the first response */
    for (i = 0; i < 1000 && !log_count("the server refused the same-host path"); i++) sleep_ms(5);
    TT_CHECK_EQ_INT(log_count("the server refused the same-host path"), 1);
    cli_close(&c);
    srv_stop(&s);
}
/* the probe forced to fail (TFRDV_TCP_CMA_DENY=1): two servers, two connections, one log line */
static void test_fallback_probe_denied(void) {
    srv s, s2;
    cli c;
    alarm(60);
    if (!srv_start(&s, upath("deny.sock"), 1, 0)) { TT_CHECK(0); return; }
    if (!srv_start(&s2, upath("deny2.sock"), 1, 2)) { TT_CHECK(0); srv_stop(&s); return; }
    log_reset();
    setenv("TFRDV_TCP_CMA_DENY", "1", 1);
    if (!cli_open2(&c, s.addr, s2.addr, 1)) { TT_CHECK(0); unsetenv("TFRDV_TCP_CMA_DENY"); srv_stop(&s); srv_stop(&s2); return; }
    unsetenv("TFRDV_TCP_CMA_DENY"); /* read by create */
    TT_CHECK_EQ_INT(srv_send(&s, "deny", MIB, 7).code, 0);
    TT_CHECK_EQ_INT(srv_send(&s2, "deny", MIB, 8).code, 0);
    TT_CHECK(fetch_check(&c, "deny", MIB, 7));
    {
        tfrdv_value* v = 0;
        tfrdv_status st;
        TT_CHECK_EQ_INT(fetch_from(&c, PS1 "/device:CPU:0", "deny", &v, &st), TFRDV_OK);
        TT_CHECK(v && v->size == MIB && check((const uint8_t*)v->data, MIB, 8));
        tfrdv_value_release(v);
    }
    TT_CHECK_EQ_INT(cstats(&c).values_cma, 0);
    TT_CHECK_EQ_INT(cstats(&c).connects, 2);
    TT_CHECK_EQ_INT(log_count("travel over the socket"), 1);
    TT_CHECK_EQ_INT(log_count("TFRDV_TCP_CMA_DENY is set"), 1);
    cli_close(&c);
    srv_stop(&s);
    srv_stop(&s2);
}
/* a non-dumpable server (prctl(PR_SET_DUMPABLE, 0)): process_vm_readv gives EPERM to a reader
   without CAP_SYS_PTRACE. The client runs in a child (as root it becomes uid 65534 too) and
   exits 0 when it got the value over the socket and logged the reason once. */
static int client_of_nondumpable(const char* addr) {
    cli c;
    int ok;
    alarm(60);
    if (getuid() == 0 && setuid(65534) != 0) return 2;
    if (!cli_open(&c, addr, 1)) return 3;
    ok = fetch_check(&c, "nd", MIB, 11);
    if (!ok) return 4;
    if (cstats(&c).values_cma != 0) return 5;
    if (log_count("is not permitted: Operation not permitted") != 1) { printf("    log: %s\n", logbuf); return 6; }
    cli_close(&c);
    return 0;
}
static void test_fallback_nondumpable_server(void) {
    srv s;
    pid_t pid;
    int status;
    char addr[64];
    alarm(60);
    snprintf(addr, sizeof addr, "unix:@tfrdv_samehost_nd_%d", (int)getpid()); /* no file: any uid may connect */
    if (!srv_start(&s, addr, 1, 1)) { TT_CHECK(0); return; }
    TT_CHECK_EQ_INT(srv_send(&s, "nd", MIB, 11).code, 0);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        execl(self_exe, self_exe, "--client-nondumpable", s.addr, (char*)0);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    TT_CHECK(WIFEXITED(status));
    TT_CHECK_EQ_INT(WEXITSTATUS(status), 0);
    TT_CHECK_EQ_INT(srv_stats(&s).ts.values_cma_sent, 0);
    srv_stop(&s);
}

/* ============================================================================================
   SAME HOST RING: small frames through the shared-memory ring (protocol version 4)
   ============================================================================================ */
#include <sys/eventfd.h>
#define RING_SH ((int64_t)4 << 20) /* same_host: by address from 4 MiB, so 64 KiB still takes the ring */
/* the first fetch goes out with the HELLO; then waits (bounded) until the ring is up */
static void ring_warm(srv* s, cli* c) {
    int i;
    TT_CHECK_EQ_INT(srv_send(s, "warm", 1, 0).code, 0);
    TT_CHECK(fetch_check(c, "warm", 1, 0));
    for (i = 0; i < 1000 && cstats(c).ring_connections < 1; i++) sleep_ms(5);
    TT_CHECK_EQ_INT(cstats(c).ring_connections, 1);
}
/* 1 B .. 64 KiB arrive byte-exact through the ring (the counters of both ends say so); 64 KiB + 1
   takes the socket */
static void test_ring_sizes(void) {
    static const uint64_t sizes[7] = {0, 1, 100, 4096, 65535, 65536, 65537};
    srv s;
    cli c;
    rep r;
    uint64_t base, sbase;
    int i;
    alarm(60);
    if (!srv_start(&s, upath("ring.sock"), RING_SH, 0)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, RING_SH)) { TT_CHECK(0); srv_stop(&s); return; }
    ring_warm(&s, &c);
    base = cstats(&c).values_ring;
    sbase = srv_stats(&s).ts.values_ring_sent;
    TT_CHECK_EQ_INT(srv_stats(&s).ts.ring_connections, 1);
    for (i = 0; i < 7; i++) {
        char e[16];
        snprintf(e, sizeof e, "r%d", i);
        TT_CHECK_EQ_INT(srv_send(&s, e, sizes[i], (unsigned)i + 5).code, 0);
        TT_CHECK(fetch_check(&c, e, sizes[i], (unsigned)i + 5));
    }
    r = srv_settled(&s);
    TT_CHECK_EQ_INT(cstats(&c).values_ring - base, 6);
    TT_CHECK_EQ_INT(r.ts.values_ring_sent - sbase, 6);
    TT_CHECK(cstats(&c).frames_ring_sent > 0);     /* the requests and acknowledgements too */
    TT_CHECK(r.ts.frames_ring_received > 0);
    TT_CHECK_EQ_INT(cstats(&c).values_cma, 0);
    TT_CHECK_EQ_INT(cstats(&c).protocol_errors, 0);
    TT_CHECK_EQ_INT(r.ts.values_unacked, 0);
    cli_close(&c);
    srv_stop(&s);
}
/* 1000 fetches in flight at once (more than the ring holds: ring and socket mix, in order) */
typedef struct many { pthread_mutex_t mu; int done, ok; } many;
typedef struct many_one { many* m; unsigned seed; } many_one;
static void on_many(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    many_one* o = (many_one*)u;
    int ok = st->code == TFRDV_OK && v && v->size == 1024 && check((const uint8_t*)v->data, 1024, o->seed);
    (void)sa; (void)ra; (void)dead;
    tfrdv_value_release(v);
    pthread_mutex_lock(&o->m->mu);
    o->m->done++;
    o->m->ok += ok;
    pthread_mutex_unlock(&o->m->mu);
}
/* the async receive of "p_<i>" (its value's seed 100 + i) counted in m */
static void post_many(tfrdv_rendezvous* r, many* m, many_one* o, int i) {
    tfrdv_key k;
    tfrdv_status st;
    char e[16];
    snprintf(e, sizeof e, "p_%d", i);
    key_for(&k, e);
    o->m = m;
    o->seed = 100u + (unsigned)i;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.parsed, 0, on_many, o, &st), TFRDV_OK);
}
/* waits (up to 15 s) until n receives of m completed */
static void wait_many(many* m, int n) {
    int i, done = 0;
    for (i = 0; i < 3000 && done < n; i++) {
        pthread_mutex_lock(&m->mu);
        done = m->done;
        pthread_mutex_unlock(&m->mu);
        if (done < n) sleep_ms(5);
    }
}
static void test_ring_pipelined(void) {
    enum { N = 1000 };
    static many_one one[N];
    many m;
    srv s;
    cli c;
    tfrdv_rendezvous* r = 0;
    tfrdv_status st;
    uint64_t base;
    int i;
    alarm(120);
    if (!srv_start(&s, upath("ringp.sock"), RING_SH, 0)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, RING_SH)) { TT_CHECK(0); srv_stop(&s); return; }
    ring_warm(&s, &c);
    base = cstats(&c).values_ring;
    memset(&m, 0, sizeof m);
    pthread_mutex_init(&m.mu, 0);
    TT_CHECK_EQ_INT(srv_send_n(&s, "p", 1024, 100, N).code, 0);
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    for (i = 0; i < N; i++) {
        post_many(r, &m, &one[i], i);
    }
    wait_many(&m, N);
    TT_CHECK_EQ_INT(m.done, N);
    TT_CHECK_EQ_INT(m.ok, N);
    printf("    %llu of %d values through the ring\n", (unsigned long long)(cstats(&c).values_ring - base), N);
    TT_CHECK(cstats(&c).values_ring - base > 0);
    TT_CHECK_EQ_INT(cstats(&c).protocol_errors, 0);
    TT_CHECK_EQ_INT(srv_settled(&s).ts.values_unacked, 0);
    tfrdv_unref(r);
    pthread_mutex_destroy(&m.mu);
    cli_close(&c);
    srv_stop(&s);
}
/* the serving process is killed with calls in flight: each finishes once, UNAVAILABLE */
/* 16 receives of values never sent reach the server, which is killed: each fails once,
   UNAVAILABLE; the server's pipes are closed (c stays open) */
static void killed_with_16(srv* s, cli* c) {
    tfrdv_status st;
    tfrdv_rendezvous* r;
    static slot pend[16];
    int status, i;
    (void)tfrdv_mgr_start_step(c->m, 1, &r, &st);
    post_never(r, pend, 16);
    for (i = 0; i < 1000 && srv_stats(s).ts.server_requests_live < 16; i++) sleep_ms(5);
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    all_failed_once(pend, 16);
    tfrdv_unref(r);
    close(s->cfd);
    close(s->rfd);
}
static void test_ring_server_killed(void) {
    srv s;
    cli c;
    alarm(60);
    if (!srv_start(&s, upath("ringk.sock"), RING_SH, 0)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, RING_SH)) { TT_CHECK(0); srv_stop(&s); return; }
    ring_warm(&s, &c);
    killed_with_16(&s, &c);
    TT_CHECK(cstats(&c).frames_ring_sent > 0); /* the requests went through the ring */
    cli_close(&c);
}
/* sequential blocking fetches through the ring, both processes on one CPU: each response is read
   by the thread that waits for it (its alloc hook runs there), not by the I/O thread. Between
   fetches the connection is kept for the next waiting thread with nobody to wake: a fast
   server's answer, written before its thread comes to wait, must not ring the I/O loop (which
   then read it and fought the waiting thread for the lock, on one CPU most of the time) */
typedef struct who { pthread_t me; int mine, other; } who;
static void who_free(tfrdv_value* v) { free(v); }
static tfrdv_value* who_alloc(void* u, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    who* w = (who*)u;
    tfrdv_value* v = (tfrdv_value*)calloc(1, sizeof *v + sizeof(int64_t) + (size_t)size + 1);
    int64_t* d = (int64_t*)(v + 1);
    if (pthread_equal(pthread_self(), w->me)) w->mine++;
    else __atomic_fetch_add(&w->other, 1, __ATOMIC_RELAXED);
    d[0] = rank ? dims[0] : 0;
    *v = tfrdv_value_make(dtype, rank, d, d + 1, size, who_free, 0);
    return v;
}
static void test_ring_fetching_thread_reads(void) {
    enum { N = 300 };
    srv s;
    cli c;
    who w;
    cpu_set_t all, one;
    tfrdv_rendezvous* r = 0;
    tfrdv_status st;
    tfrdv_args a;
    int i, ok = 0, cpu = sched_getcpu();
    alarm(120);
    if (sched_getaffinity(0, sizeof all, &all) != 0 || cpu < 0) { TT_CHECK(0); return; }
    CPU_ZERO(&one);
    CPU_SET((size_t)cpu, &one);
    TT_CHECK_EQ_INT(sched_setaffinity(0, sizeof one, &one), 0); /* the child and every thread inherit it */
    if (!srv_start(&s, upath("ringw.sock"), RING_SH, 0)) { TT_CHECK(0); (void)sched_setaffinity(0, sizeof all, &all); return; }
    if (!cli_open(&c, s.addr, RING_SH)) { TT_CHECK(0); srv_stop(&s); (void)sched_setaffinity(0, sizeof all, &all); return; }
    ring_warm(&s, &c);
    TT_CHECK_EQ_INT(srv_send_n(&s, "w", 64, 9, N).code, 0);
    memset(&w, 0, sizeof w);
    w.me = pthread_self();
    memset(&a, 0, sizeof a);
    a.alloc_fn = who_alloc;
    a.alloc_user = &w;
    (void)tfrdv_mgr_start_step(c.m, 1, &r, &st);
    for (i = 0; i < N; i++) {
        tfrdv_key k;
        tfrdv_value* v = 0;
        char e[16];
        int dead = 0;
        snprintf(e, sizeof e, "w_%d", i);
        key_for(&k, e);
        if (tfrdv_recv(r, &k.parsed, &a, 30 * SEC, &v, &dead, &st) == TFRDV_OK && v && v->size == 64 &&
            check((const uint8_t*)v->data, 64, 9u + (unsigned)i))
            ok++;
        else printf("    fetch %s: %s\n", e, st.msg);
        tfrdv_value_release(v);
    }
    tfrdv_unref(r);
    TT_CHECK_EQ_INT(ok, N);
    printf("    %d of %d responses read by the fetching thread, %d by another (waits lent %llu, declined %llu)\n", w.mine, N, w.other, (unsigned long long)cstats(&c).waits_lent, (unsigned long long)cstats(&c).waits_declined);
    TT_CHECK(w.mine >= N - 10); /* the I/O loop reads a kept connection after two idle ticks only */
    TT_CHECK_EQ_INT(cstats(&c).protocol_errors, 0);
    TT_CHECK_EQ_INT(srv_settled(&s).ts.values_unacked, 0);
    cli_close(&c);
    srv_stop(&s);
    TT_CHECK_EQ_INT(sched_setaffinity(0, sizeof all, &all), 0);
}
/* ... with their answers through the ring */
static void test_ring_exactly_once(void) {
    tfrdv_tcp_stats c, s;
    eo_same_host("eor.sock", RING_SH, "tcp, same host through the ring", &c, &s);
    printf("    %llu values through the ring; server: %llu written into it, %llu returned to the table\n",
           (unsigned long long)c.values_ring, (unsigned long long)s.values_ring_sent, (unsigned long long)s.values_returned);
    TT_CHECK(c.values_ring > 0);
}

/* ---- a hostile client: a raw socket in this process passing its own ring ---- */
typedef struct rawring { int fd, mfd, efd[3]; uint8_t* map; rawbuf rb; } rawring;
static int raw_connect(const char* addr) {
    struct sockaddr_un un;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    snprintf(un.sun_path, sizeof un.sun_path, "%s", addr + 5);
    if (connect(fd, (struct sockaddr*)&un, sizeof un) != 0) { close(fd); return -1; }
    return fd;
}
/* HELLO (version 4), the server's HELLO, then SAMEHOST 4 with nfd of: a memfd of the ring's size
   (sealed or not; its ring 1 head and sleep word preset) and three eventfds */
static uint32_t raw_offer_flags = TFRDV_TCP_SH_RING_OFFER; /* what raw_offer's SAMEHOST says */
static const uint8_t* raw_offer_token; /* set: addr is a side socket ("@..."): HELLO 5, this token */
static int raw_offer(rawring* x, const char* addr, int sealed, int nfd, uint64_t head1, uint32_t wake1) {
    tfrdv_tcp_frame f, g;
    uint8_t b[64];
    struct msghdr mh;
    struct iovec iv;
    union { struct cmsghdr h; char c[CMSG_SPACE(4 * sizeof(int))]; } cb;
    struct cmsghdr* cm;
    int fds[4], i;
    size_t n;
    memset(x, 0, sizeof *x);
    x->map = (uint8_t*)MAP_FAILED;
    if ((x->fd = raw_offer_token ? raw_abstract(addr) : raw_connect(addr)) < 0) return 0;
    raw_hello(x->fd, raw_offer_token ? 5 : 4, WK, 0);
    if (raw_offer_token) {
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_SAMEHOST;
        f.sh_flags = TFRDV_TCP_SH_TCP_TOKEN;
        f.message.ptr = (const char*)raw_offer_token;
        f.message.len = 16;
        raw_put(x->fd, &f);
    }
    if (!raw_next(x->fd, &x->rb, &g, 0, 0, -1) || g.type != TFRDV_TCP_HELLO) return 0;
    x->mfd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (x->mfd < 0 || ftruncate(x->mfd, 4096 + 2 * (256 << 10)) != 0) return 0;
    if (sealed && fcntl(x->mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return 0;
    x->map = (uint8_t*)mmap(0, 4096 + 2 * (256 << 10), PROT_READ | PROT_WRITE, MAP_SHARED, x->mfd, 0);
    if (x->map == (uint8_t*)MAP_FAILED) return 0;
    __atomic_store_n((uint64_t*)(void*)(x->map + 1024 + 64), head1, __ATOMIC_RELEASE);
    __atomic_store_n((uint32_t*)(void*)(x->map + 1024 + 128), wake1, __ATOMIC_RELEASE);
    for (i = 0; i < 3; i++) x->efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    fds[0] = x->mfd;
    fds[1] = x->efd[0];
    fds[2] = x->efd[1];
    fds[3] = x->efd[2];
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_SAMEHOST;
    f.sh_flags = raw_offer_flags;
    n = tfrdv_tcp_encode(&f, b, sizeof b);
    iv.iov_base = b;
    iv.iov_len = n;
    memset(&mh, 0, sizeof mh);
    memset(&cb, 0, sizeof cb);
    mh.msg_iov = &iv;
    mh.msg_iovlen = 1;
    mh.msg_control = cb.c;
    mh.msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int));
    cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, (size_t)nfd * sizeof(int));
    return sendmsg(x->fd, &mh, MSG_NOSIGNAL) == (ssize_t)n;
}
static void raw_ring_close(rawring* x) {
    int i;
    if (x->map != (uint8_t*)MAP_FAILED) munmap(x->map, 4096 + 2 * (256 << 10));
    for (i = 0; i < 3; i++) if (x->efd[i] > 0) close(x->efd[i]);
    if (x->mfd > 0) close(x->mfd);
    if (x->fd >= 0) close(x->fd);
}
/* a record into ring 0 (client -> server) at position pos; the tail set to tail; the doorbell */
static void raw_record(rawring* x, uint64_t pos, uint32_t len, const uint8_t* body, size_t blen, uint64_t tail) {
    uint8_t h[16];
    uint64_t one = 1;
    memset(h, 0, sizeof h);
    memcpy(h, &len, 4); /* little-endian hosts */
    memcpy(x->map + 4096 + pos, h, 16);
    if (blen) memcpy(x->map + 4096 + pos + 16, body, blen);
    __atomic_store_n((uint64_t*)(void*)x->map, tail, __ATOMIC_RELEASE);
    (void)!write(x->efd[0], &one, sizeof one);
}
/* the CLOSE the server sends before it closes: its message, or "" at EOF without one */
static void raw_close_msg(rawring* x, char* out, size_t cap) {
    tfrdv_tcp_frame g;
    out[0] = 0;
    while (raw_next(x->fd, &x->rb, &g, 0, 0, -1))
        if (g.type == TFRDV_TCP_CLOSE) snprintf(out, cap, "%.*s", (int)g.message.len, g.message.ptr);
}
static void test_ring_hostile_client(void) {
    static const char* want[6] = {"ring position 1099511627776 is not within", "a ring record of 2147483647 bytes",
                                  "in the ring: ", "frame type 4 in the ring", "ring position 12345 is not within",
                                  "ring sleep word is 7"};
    insrv s;
    int act;
    alarm(60);
    if (!insrv_open(&s, upath("ringh.sock"), RING_SH)) { TT_CHECK(0); return; }
    for (act = 0; act < 6; act++) {
        rawring x;
        char msg[300];
        uint8_t body[32];
        uint64_t rings = tstats(s.t).ring_connections, errs = tstats(s.t).protocol_errors;
        int i, ok = raw_offer(&x, s.addr, 1, 4, act == 4 ? 12345 : 0, act == 5 ? 7u : 0u);
        TT_CHECK(ok);
        if (!ok) { raw_ring_close(&x); break; }
        for (i = 0; i < 1000 && tstats(s.t).ring_connections == rings && tstats(s.t).protocol_errors == errs; i++) sleep_ms(2);
        memset(body, 0, sizeof body);
        if (act == 0) raw_record(&x, 0, 0, 0, 0, (uint64_t)1 << 40);
        if (act == 1) raw_record(&x, 0, 0x7fffffffu, 0, 0, 64);
        if (act == 2) { body[0] = 77; raw_record(&x, 0, 16, body, 16, 32); } /* a frame of an unknown type */
        if (act == 3) { body[0] = TFRDV_TCP_DATA; body[4] = 1; body[8] = 1; raw_record(&x, 0, 17, body, 17, 40); }
        raw_close_msg(&x, msg, sizeof msg); /* acts 4, 5: the server's answer went through the ring */
        TT_CHECK_CONTAINS(msg, want[act]);
        TT_CHECK_EQ_INT(tstats(s.t).protocol_errors - errs, 1);
        raw_ring_close(&x);
    }
    /* the server still serves */
    {
        cli c;
        tfrdv_rendezvous* rz = 0;
        tfrdv_key k;
        tfrdv_status st;
        if (cli_open(&c, s.addr, RING_SH)) {
            (void)tfrdv_mgr_start_step(s.m, 1, &rz, &st);
            key_for(&k, "after");
            TT_CHECK_EQ_INT(tfrdv_send(rz, &k.parsed, 0, mkval(4096, 4), 0, &st), TFRDV_OK);
            TT_CHECK(fetch_check(&c, "after", 4096, 4));
            tfrdv_unref(rz);
            cli_close(&c);
        } else TT_CHECK(0);
    }
    insrv_close(&s);
}
/* a client that offers a ring and never reads it (its head stays at 0): the server fills the
   ring, then answers over the socket; no hang, and every answer comes exactly once, either in
   the ring or on the socket (each acknowledged on the socket, so stall_timeout_ns never ends
   the connection of a slow run) */
static void raw_ack(int fd, uint64_t id) {
    tfrdv_tcp_frame f;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_ACK;
    f.num_acks = 1;
    f.ack_ids = &id;
    raw_put(fd, &f);
}
static void test_ring_peer_stops_consuming(void) {
    enum { N = 1500 };
    insrv s;
    rawring x;
    tfrdv_rendezvous* rz = 0;
    tfrdv_status st;
    tfrdv_key k;
    static unsigned char seen[N + 1];
    uint64_t pos = 0, tail;
    int i, ok, on_sock = 0, in_ring = 0, dup = 0;
    alarm(60);
    memset(seen, 0, sizeof seen);
    if (!insrv_open(&s, upath("ringfull.sock"), RING_SH)) { TT_CHECK(0); return; }
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(s.m, 1, &rz, &st), TFRDV_OK);
    key_for(&k, "full");
    for (i = 0; i < N; i++) TT_CHECK_EQ_INT(tfrdv_send(rz, &k.parsed, 0, mkval(1024, (unsigned)i), 0, &st), TFRDV_OK);
    ok = raw_offer(&x, s.addr, 1, 4, 0, 0);
    TT_CHECK(ok);
    for (i = 0; ok && i < N; i++) {
        tfrdv_tcp_frame f;
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_REQUEST;
        f.id = (uint64_t)i + 1;
        f.step_id = 1;
        f.request_id = 70000 + i;
        f.key.ptr = k.buf;
        f.key.len = k.len;
        raw_put(x.fd, &f);
    }
    while (ok && on_sock + in_ring < N) {
        tfrdv_tcp_frame g;
        if (!raw_next(x.fd, &x.rb, &g, 0, 0, -1)) break;
        if (g.type != TFRDV_TCP_RESPONSE) continue;
        if (g.id >= 1 && g.id <= N) { dup += seen[g.id]; seen[g.id] = 1; }
        raw_ack(x.fd, g.id);
        on_sock++;
        /* the ring's records so far (never consumed: the head stays 0) */
        tail = __atomic_load_n((uint64_t*)(void*)(x.map + 1024), __ATOMIC_ACQUIRE);
        while (pos < tail) {
            const uint8_t* rec = x.map + 4096 + (256u << 10) + (pos & ((256u << 10) - 1));
            uint32_t len;
            size_t off = 0;
            memcpy(&len, rec, 4);
            if (!len || (pos & ((256u << 10) - 1)) + 16 + len > (256u << 10)) break; /* (a wrapped record: not expected) */
            while (off < len) {
                tfrdv_tcp_frame r;
                long used = tfrdv_tcp_decode(rec + 16 + off, len - off, 0, &r, &st);
                if (used <= 0) break;
                off += (size_t)used + (size_t)r.data_len;
                if (r.type != TFRDV_TCP_RESPONSE) continue;
                if (r.id >= 1 && r.id <= N) { dup += seen[r.id]; seen[r.id] = 1; }
                raw_ack(x.fd, r.id);
                in_ring++;
            }
            pos += 16 + ((len + 7u) & ~7u);
        }
    }
    TT_CHECK_EQ_INT(on_sock + in_ring, N);
    TT_CHECK_EQ_INT(dup, 0);
    TT_CHECK(in_ring > 0 && on_sock > 0); /* the ring took what it could, the socket the rest */
    TT_CHECK(in_ring * 1024 <= (256 << 10));
    TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 0);
    raw_ring_close(&x);
    tfrdv_unref(rz);
    insrv_close(&s);
}
/* the futex doorbell (SAMEHOST flag 16) is agreed only with a ring: offered with one, the answer
   (through the ring) says 8 | 16; offered alone, the connection closes naming the flags */
static void test_ring_futex_flags(void) {
    insrv s;
    rawring x;
    char msg[300];
    int i, ok;
    alarm(60);
    if (!insrv_open(&s, upath("ringf.sock"), RING_SH)) { TT_CHECK(0); return; }
    raw_offer_flags = TFRDV_TCP_SH_RING_OFFER | TFRDV_TCP_SH_RING_FUTEX;
    ok = raw_offer(&x, s.addr, 1, 4, 0, 0);
    TT_CHECK(ok);
    if (ok) {
        uint64_t tail = 0;
        for (i = 0; i < 1000 && !(tail = __atomic_load_n((uint64_t*)(void*)(x.map + 1024), __ATOMIC_ACQUIRE)); i++) sleep_ms(2);
        TT_CHECK(tail >= 16 + 24);
        if (tail >= 16 + 24) {
            tfrdv_tcp_frame g;
            tfrdv_status st;
            TT_CHECK_EQ_INT(tfrdv_tcp_decode(x.map + 4096 + (256 << 10) + 16, 24, 0, &g, &st), 24);
            TT_CHECK_EQ_INT(g.type, TFRDV_TCP_SAMEHOST);
            TT_CHECK_EQ_INT(g.sh_flags, TFRDV_TCP_SH_RING_OK | TFRDV_TCP_SH_RING_FUTEX);
        }
    }
    raw_ring_close(&x);
    raw_offer_flags = TFRDV_TCP_SH_RING_FUTEX;
    ok = raw_offer(&x, s.addr, 1, 4, 0, 0);
    TT_CHECK(ok);
    if (ok) {
        raw_close_msg(&x, msg, sizeof msg);
        TT_CHECK_CONTAINS(msg, "SAMEHOST from a version 4 client with flags 0x10");
    }
    raw_ring_close(&x);
    raw_offer_flags = TFRDV_TCP_SH_RING_OFFER;
    insrv_close(&s);
}
/* a thread lent by tfrdv_recv asleep on the ring's futex (nothing comes: no doorbell, no socket
   byte) learns of the server's death from the socket all the same: its receive and the others
   pending fail UNAVAILABLE, once each */
typedef struct fxwait { cli* c; tfrdv_rendezvous* r; tfrdv_code code; char msg[256]; } fxwait;
static void* fx_recv(void* u) {
    fxwait* w = (fxwait*)u;
    tfrdv_key k;
    tfrdv_value* v = 0;
    tfrdv_status st;
    int dead = 0;
    key_for(&k, "never_blocking");
    w->code = tfrdv_recv(w->r, &k.parsed, 0, 60 * SEC, &v, &dead, &st);
    snprintf(w->msg, sizeof w->msg, "%s", st.msg);
    if (v) tfrdv_value_release(v);
    return 0;
}
static void test_ring_futex_waiter_server_killed(void) {
    srv s;
    cli c;
    tfrdv_status st;
    static slot pend[4];
    fxwait w;
    pthread_t th;
    uint64_t lent;
    int status, i;
    alarm(60);
    if (!srv_start(&s, upath("ringfk.sock"), RING_SH, 0)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, RING_SH)) { TT_CHECK(0); srv_stop(&s); return; }
    ring_warm(&s, &c);
    memset(&w, 0, sizeof w);
    w.c = &c;
    w.code = TFRDV_OK;
    (void)tfrdv_mgr_start_step(c.m, 1, &w.r, &st);
    lent = cstats(&c).waits_lent;
    TT_CHECK_EQ_INT(pthread_create(&th, 0, fx_recv, &w), 0);
    for (i = 0; i < 1000 && cstats(&c).waits_lent == lent; i++) sleep_ms(5);
    TT_CHECK(cstats(&c).waits_lent > lent); /* the blocked receive reads the connection */
    post_never(w.r, pend, 4);
    for (i = 0; i < 1000 && srv_stats(&s).ts.server_requests_live < 5; i++) sleep_ms(5);
    sleep_ms(30); /* (not asserted: the lent thread is most likely asleep on the futex by now) */
    kill(s.pid, SIGKILL);
    waitpid(s.pid, &status, 0);
    pthread_join(th, 0);
    TT_CHECK_EQ_INT(w.code, TFRDV_UNAVAILABLE);
    all_failed_once(pend, 4);
    tfrdv_unref(w.r);
    close(s.cfd);
    close(s.rfd);
    cli_close(&c);
}
/* an unsealed memfd (it could shrink under the mapping: SIGBUS) and a short set of descriptors
   are refused: the answer says no ring, the connection goes on over the socket */
static void test_ring_unsealed_refused(void) {
    insrv s;
    int act;
    alarm(60);
    if (!insrv_open(&s, upath("ringu.sock"), RING_SH)) { TT_CHECK(0); return; }
    for (act = 0; act < 2; act++) {
        rawring x;
        tfrdv_tcp_frame g;
        int got = 0, ok = raw_offer(&x, s.addr, act == 1, act == 0 ? 4 : 1, 0, 0);
        TT_CHECK(ok);
        while (ok && raw_next(x.fd, &x.rb, &g, 0, 0, -1))
            if (g.type == TFRDV_TCP_SAMEHOST) { got = 1; TT_CHECK_EQ_INT(g.sh_flags, 0); break; }
        TT_CHECK(got);
        TT_CHECK_EQ_INT(tstats(s.t).ring_connections, 0);
        TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 0);
        raw_ring_close(&x);
    }
    insrv_close(&s);
}
/* each fallback: over the socket, the reason logged once */
static void test_ring_fallbacks(void) {
    static const char* env[2] = {"1", "2"};
    static const char* want[2] = {"TFRDV_TCP_RING_DENY=1 is set", "memfd_create taken as failing"};
    int i;
    alarm(60);
    for (i = 0; i < 3; i++) {
        srv s;
        cli c;
        if (!srv_start(&s, upath("ringf.sock"), i == 2 ? TFRDV_OFF : RING_SH, 0)) { TT_CHECK(0); return; }
        if (i < 2) setenv("TFRDV_TCP_RING_DENY", env[i], 1); /* read by create */
        log_reset();
        if (!cli_open(&c, s.addr, RING_SH)) { TT_CHECK(0); unsetenv("TFRDV_TCP_RING_DENY"); srv_stop(&s); return; }
        unsetenv("TFRDV_TCP_RING_DENY");
        TT_CHECK_EQ_INT(srv_send(&s, "f1", 4096, 1).code, 0);
        TT_CHECK_EQ_INT(srv_send(&s, "f2", 4096, 2).code, 0);
        TT_CHECK(fetch_check(&c, "f1", 4096, 1));
        if (i == 2) { int j; for (j = 0; j < 1000 && !log_count("refused the shared-memory ring"); j++) sleep_ms(5); }
        TT_CHECK(fetch_check(&c, "f2", 4096, 2));
        TT_CHECK_EQ_INT(cstats(&c).ring_connections, 0);
        TT_CHECK_EQ_INT(cstats(&c).values_ring, 0);
        TT_CHECK_EQ_INT(log_count(i < 2 ? want[i] : "the server refused the shared-memory ring"), 1);
        TT_CHECK_EQ_INT(log_count("not a shared-memory ring") + log_count("refused the shared-memory ring"), 1);
        cli_close(&c);
        srv_stop(&s);
    }
    { /* an older peer (version 3): never offered, logged once */
        oldsrv o;
        pthread_t th;
        cli c;
        tfrdv_value* v = 0;
        tfrdv_status st;
        const char* addr = upath("old3.sock");
        memset(&o, 0, sizeof o);
        o.version = 3;
        o.lfd = raw_listen(addr);
        TT_CHECK(o.lfd >= 0);
        if (o.lfd < 0) return;
        pthread_create(&th, 0, old_server, &o);
        log_reset();
        if (!cli_open(&c, addr, RING_SH)) { TT_CHECK(0); close(o.lfd); pthread_join(th, 0); return; }
        TT_CHECK_EQ_INT(fetch(&c, "old", &v, &st), TFRDV_OK);
        tfrdv_value_release(v);
        pthread_join(th, 0);
        TT_CHECK(!(o.saw_samehost & (int)TFRDV_TCP_SH_RING_OFFER));
        TT_CHECK_EQ_INT(log_count("protocol version 3 on this connection (the ring needs 4)"), 1);
        cli_close(&c);
        close(o.lfd);
    }
}
/* The host identity a TCP peer's same-host upgrade compares (tfrdv_tcp__sh_host_id): the boot id
   and the network namespace. Stable within a process, the same in a forked child, different in a
   child that moved to a network namespace of its own (where unshare is permitted), an error
   naming the size when the buffer is too small. */
#ifdef TFRDV_TCP__CMA
static void child_host_id(int fd, int new_net) {
    char id[160], why[200];
    ssize_t w;
    if (new_net && unshare(CLONE_NEWNET) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) _exit(3);
    if (tfrdv_tcp__sh_host_id(id, sizeof id, why, sizeof why) != 0) _exit(2);
    w = write(fd, id, strlen(id) + 1);
    _exit(w == (ssize_t)(strlen(id) + 1) ? 0 : 4);
}
static int host_id_of_child(int new_net, char* out, size_t cap) {
    int p[2], ws = 0;
    pid_t pid;
    ssize_t n;
    if (pipe(p) != 0) return -1;
    pid = fork();
    if (pid == 0) { close(p[0]); child_host_id(p[1], new_net); }
    close(p[1]);
    n = read(p[0], out, cap - 1);
    close(p[0]);
    waitpid(pid, &ws, 0);
    if (n <= 0) return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
    out[n] = 0;
    return 0;
}
static void test_host_identity(void) {
    char a[160], b[160], c[160], boot[64], why[200];
    FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
    size_t n = 0;
    int rc;
    TT_CHECK(f != 0);
    if (f) { n = fread(boot, 1, 36, f); fclose(f); }
    boot[n] = 0;
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_host_id(a, sizeof a, why, sizeof why), 0);
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_host_id(b, sizeof b, why, sizeof why), 0);
    TT_CHECK_STR(a, b);
    TT_CHECK_EQ_INT((int)n, 36);
    TT_CHECK(strncmp(a, boot, 36) == 0);
    TT_CHECK_CONTAINS(a, " net:");
    TT_CHECK_EQ_INT(host_id_of_child(0, c, sizeof c), 0);
    TT_CHECK_STR(a, c);
    rc = host_id_of_child(1, c, sizeof c);
    if (rc == 3) printf("  (unshare(CLONE_NEWNET) not permitted here: the other-namespace case is skipped)\n");
    else {
        TT_CHECK_EQ_INT(rc, 0);
        TT_CHECK(strncmp(a, c, 36) == 0); /* one kernel */
        TT_CHECK(strcmp(a, c) != 0);      /* another network namespace */
    }
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_host_id(a, 40, why, sizeof why), -1);
    TT_CHECK_CONTAINS(why, "longer than 40 bytes");
}
/* A side socket's one-time tokens (tfrdv_tcp__sh_token_new / _take): random, taken once, not
   after they expire, compared in full; a ninth outstanding token gives up the one closest to
   expiring. Its name (tfrdv_tcp__sh_side_name): "@tfrdv-<pid>-<16 hex>", different each time,
   and bindable as an abstract Unix address. */
static void test_side_tokens(void) {
    tfrdv_tcp__sh_tokens k;
    uint8_t a[16], b[16], toks[9][16], z[16];
    char why[200], n1[128], n2[128], pre[64];
    struct sockaddr_un sa;
    size_t i, len;
    int fd;
    memset(&k, 0, sizeof k);
    memset(z, 0, sizeof z);
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_token_new(&k, 1000, 50, a, why, sizeof why), 0);
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_token_new(&k, 1000, 50, b, why, sizeof why), 0);
    TT_CHECK(memcmp(a, b, 16) != 0 && memcmp(a, z, 16) != 0);
    b[15] ^= 1;
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_token_take(&k, b, 16, 1001, why, sizeof why), -1); /* one bit off */
    TT_CHECK_CONTAINS(why, "a token this server did not hand out");
    b[15] ^= 1;
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_token_take(&k, b, 15, 1001, why, sizeof why), -1);
    TT_CHECK_CONTAINS(why, "a token of 15 bytes (16 expected)");
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_token_take(&k, a, 16, 1001, why, sizeof why), 0);
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_token_take(&k, a, 16, 1001, why, sizeof why), -1); /* single use */
    TT_CHECK_CONTAINS(why, "already used");
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_token_take(&k, b, 16, 1050, why, sizeof why), -1); /* expired */
    TT_CHECK_CONTAINS(why, "an expired token");
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_token_take(&k, z, 16, 1000, why, sizeof why), -1); /* free slots hold zeros */
    for (i = 0; i < 9; i++) TT_CHECK_EQ_INT(tfrdv_tcp__sh_token_new(&k, 2000 + (int64_t)i, 100, toks[i], why, sizeof why), 0);
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_token_take(&k, toks[0], 16, 2010, why, sizeof why), -1); /* given up for the ninth */
    for (i = 1; i < 9; i++) TT_CHECK_EQ_INT(tfrdv_tcp__sh_token_take(&k, toks[i], 16, 2010, why, sizeof why), 0);
    for (i = 0; i < 8; i++) TT_CHECK(k.exp[i] == 0);

    TT_CHECK_EQ_INT(tfrdv_tcp__sh_side_name(n1, sizeof n1, why, sizeof why), 0);
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_side_name(n2, sizeof n2, why, sizeof why), 0);
    snprintf(pre, sizeof pre, "@tfrdv-%ld-", (long)getpid());
    len = strlen(n1);
    TT_CHECK(strncmp(n1, pre, strlen(pre)) == 0);
    TT_CHECK_EQ_INT(len, strlen(pre) + 16);
    TT_CHECK(len <= TFRDV_TCP_SH_ADDR_MAX);
    for (i = strlen(pre); i < len; i++) TT_CHECK((n1[i] >= '0' && n1[i] <= '9') || (n1[i] >= 'a' && n1[i] <= 'f'));
    TT_CHECK(strcmp(n1, n2) != 0);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path + 1, n1 + 1, len - 1); /* '@': the leading NUL of an abstract name */
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    TT_CHECK(fd >= 0);
    if (fd >= 0) {
        TT_CHECK_EQ_INT(bind(fd, (struct sockaddr*)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)), 0);
        close(fd);
    }
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_side_name(n1, 20, why, sizeof why), -1);
    TT_CHECK_CONTAINS(why, "side address longer than 20 bytes");
}
#endif
/* The codec: SAMEHOST flags 32, 64 and 128 (the same-host upgrade of a TCP connection, version 5)
   carry bytes (host identity; token and side address; token) and each goes alone; the other
   flags carry none. */
static void sh_frame(uint32_t flags, const char* bytes, size_t n, uint8_t* b, size_t* len) {
    tfrdv_tcp_frame f;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_SAMEHOST;
    f.sh_flags = flags;
    f.message.ptr = bytes;
    f.message.len = n;
    *len = tfrdv_tcp_encode(&f, b, 512);
}
static void test_codec_upgrade_frames(void) {
    static const uint32_t fl[3] = {TFRDV_TCP_SH_TCP_ASK, TFRDV_TCP_SH_TCP_OFFER, TFRDV_TCP_SH_TCP_TOKEN};
    static const size_t lo[3] = {1, 18, 16}, hi[3] = {255, 124, 16};
    char src[300], want[200];
    uint8_t b[512];
    tfrdv_tcp_frame g;
    tfrdv_status st;
    size_t n, i, k;
    int j;
    for (k = 0; k < sizeof src; k++) src[k] = (char)(k * 7 + 1);
    for (j = 0; j < 3; j++) {
        for (k = lo[j]; k <= hi[j]; k += hi[j] - lo[j] > 8 ? (hi[j] - lo[j]) / 4 : 1) { /* byte exact, both ends */
            sh_frame(fl[j], src, k, b, &n);
            TT_CHECK_EQ_INT(n, 24 + k);
            TT_CHECK_EQ_INT(b[20], (int)k);
            for (i = 0; i < n; i += 7) TT_CHECK(tfrdv_tcp_decode(b, i, 0, &g, &st) == 0); /* incomplete */
            TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, 0, &g, &st), n);
            TT_CHECK(g.type == TFRDV_TCP_SAMEHOST && g.sh_flags == fl[j] && g.message.len == k);
            TT_CHECK(g.message.ptr == (const char*)b + 24 && memcmp(g.message.ptr, src, k) == 0);
        }
        sh_frame(fl[j], src, lo[j] - 1, b, &n); /* too few bytes */
        snprintf(want, sizeof want, "SAMEHOST flags 0x%x with %u bytes (length field %u; %u..%u expected)", fl[j], (unsigned)(lo[j] - 1),
                 (unsigned)(lo[j] - 1), (unsigned)lo[j], (unsigned)hi[j]);
        bad(b, n, 0, want);
        if (hi[j] < 255) { /* too many */
            sh_frame(fl[j], src, hi[j] + 1, b, &n);
            snprintf(want, sizeof want, "SAMEHOST flags 0x%x with %u bytes", fl[j], (unsigned)(hi[j] + 1));
            bad(b, n, 0, want);
        }
        sh_frame(fl[j] | TFRDV_TCP_SH_CMA_READ, src, lo[j], b, &n); /* not alone */
        snprintf(want, sizeof want, "SAMEHOST flags 0x%x: 32, 64 and 128 go alone", fl[j] | 1u);
        bad(b, n, 0, want);
        sh_frame(fl[j], src, lo[j], b, &n); /* a length field that disagrees with the body */
        b[20]++;
        bad(b, n, 0, "length field");
    }
    sh_frame(TFRDV_TCP_SH_TCP_ASK | TFRDV_TCP_SH_TCP_TOKEN, src, 16, b, &n);
    bad(b, n, 0, "SAMEHOST flags 0xa0: 32, 64 and 128 go alone");
    sh_frame(TFRDV_TCP_SH_CMA_READ, src, 3, b, &n); /* the old flags carry no bytes */
    bad(b, n, 0, "SAMEHOST flags 0x1 with 3 bytes (length field 3; 0..0 expected)");
    sh_frame(TFRDV_TCP_SH_TCP_ASK, src, 256, b, &n);
    bad(b, n, 0, "SAMEHOST body of 264 bytes (8..263 expected)");
}
/* ---- the same-host upgrade of a TCP connection: the server's half (a raw client) ----
   A version 5 client on TCP sends its host identity (SAMEHOST 16); the server answers with a
   one-time token and its side address (32). On the side socket the token must come first: a
   wrong one, a reused one, or any other frame before it gets a CLOSE naming it and nothing else;
   the right one makes it a Unix connection like any other (SAMEHOST 1 is granted). */
#ifdef TFRDV_TCP__UPGRADE
/* a TCP connection asking with identity id: the SAMEHOST answer's flags (-1: none came); its
   bytes into out */
static int raw_ask(const char* addr, const char* id, char* out, size_t cap, size_t* outlen) {
    rawbuf* rb = (rawbuf*)calloc(1, sizeof *rb);
    tfrdv_tcp_frame g;
    int fd = raw_tcp(addr), got = -1;
    if (fd < 0) { free(rb); return -1; }
    raw_hello(fd, 5, WK, 0);
    raw_sh(fd, TFRDV_TCP_SH_TCP_ASK, id, strlen(id));
    while (raw_next(fd, rb, &g, out, cap, -1)) {
        if (g.type == TFRDV_TCP_HELLO) TT_CHECK_EQ_INT(g.version, 5);
        if (g.type == TFRDV_TCP_SAMEHOST) { got = (int)g.sh_flags; *outlen = g.message.len; break; }
    }
    close(fd);
    free(rb);
    return got;
}
/* on the side socket: HELLO, then (token, or a REQUEST when tok is NULL), then SAMEHOST 1; the
   frames that come back: flags of a SAMEHOST (or -1) and the CLOSE's message (or "") */
static int raw_side(const char* at, const uint8_t* tok, char* close_msg, size_t cap, int* others) {
    rawbuf* rb = (rawbuf*)calloc(1, sizeof *rb);
    tfrdv_tcp_frame f, g;
    char keep[256];
    int fd = raw_abstract(at), sh = -1;
    close_msg[0] = 0;
    *others = 0;
    if (fd < 0) { free(rb); return -2; }
    raw_hello(fd, 5, WK, 0);
    if (tok) raw_sh(fd, TFRDV_TCP_SH_TCP_TOKEN, tok, 16);
    else {
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_REQUEST;
        f.id = 1;
        f.key.ptr = "k";
        f.key.len = 1;
        raw_put(fd, &f);
    }
    raw_sh(fd, TFRDV_TCP_SH_CMA_READ, 0, 0);
    while (raw_next(fd, rb, &g, keep, sizeof keep, -1)) {
        if (g.type == TFRDV_TCP_SAMEHOST) { sh = (int)g.sh_flags; break; }
        if (g.type == TFRDV_TCP_CLOSE) snprintf(close_msg, cap, "%s", keep);
        else if (g.type != TFRDV_TCP_HELLO) ++*others;
    }
    close(fd);
    free(rb);
    return sh;
}
static void test_upgrade_offer(void) {
    insrv s;
    char id[160], why[200], ans[256], pre[64], at[TFRDV_TCP_SH_ADDR_MAX + 1], cm[256];
    uint8_t tok[16];
    size_t n = 0, alen;
    int others, i;
    alarm(60);
    TT_CHECK_EQ_INT(tfrdv_tcp__sh_host_id(id, sizeof id, why, sizeof why), 0);
    insrv_handshake_ns = 300000000;
    if (!insrv_open(&s, "127.0.0.1:0", 0)) { TT_CHECK(0); insrv_handshake_ns = 0; return; }
    insrv_handshake_ns = 0;
    TT_CHECK_EQ_INT(raw_ask(s.addr, id, ans, sizeof ans, &n), TFRDV_TCP_SH_TCP_OFFER);
    TT_CHECK(n > 16 && n <= 16 + TFRDV_TCP_SH_ADDR_MAX);
    if (n <= 16) { insrv_close(&s); return; }
    memcpy(tok, ans, 16);
    alen = n - 16;
    memcpy(at, ans + 16, alen);
    at[alen] = 0;
    snprintf(pre, sizeof pre, "@tfrdv-%ld-", (long)getpid());
    TT_CHECK(strncmp(at, pre, strlen(pre)) == 0);

    tok[3] ^= 0x40; /* a wrong token: CLOSE naming it, nothing else */
    TT_CHECK_EQ_INT(raw_side(at, tok, cm, sizeof cm, &others), -1);
    TT_CHECK_CONTAINS(cm, "a token this server did not hand out");
    TT_CHECK_EQ_INT(others, 0);
    tok[3] ^= 0x40;
    TT_CHECK_EQ_INT(raw_side(at, 0, cm, sizeof cm, &others), -1); /* a REQUEST first */
    TT_CHECK_CONTAINS(cm, "a frame of type 2 on the side socket before its token");
    TT_CHECK_EQ_INT(others, 0);
    TT_CHECK_EQ_INT(raw_side(at, tok, cm, sizeof cm, &others), TFRDV_TCP_SH_CMA_GRANT); /* the right one */
    TT_CHECK_STR(cm, "");
    TT_CHECK_EQ_INT(raw_side(at, tok, cm, sizeof cm, &others), -1); /* used */
    TT_CHECK_CONTAINS(cm, "already used");
    TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 3);
    { /* HELLO and then nothing: closed after handshake_timeout_ns (300 ms here) */
        rawbuf* rb = (rawbuf*)calloc(1, sizeof *rb);
        tfrdv_tcp_frame g;
        char keep[256];
        int fd = raw_abstract(at), frames = 0;
        TT_CHECK(fd >= 0);
        raw_hello(fd, 5, WK, 0);
        while (fd >= 0 && raw_next(fd, rb, &g, keep, sizeof keep, -1)) frames += g.type != TFRDV_TCP_HELLO;
        TT_CHECK_EQ_INT(frames, 0); /* its HELLO, then EOF */
        if (fd >= 0) close(fd);
        free(rb);
    }
    for (i = 0; i < 2; i++) { /* a second offer: the same side address, another token */
        char ans2[256];
        size_t n2 = 0;
        TT_CHECK_EQ_INT(raw_ask(s.addr, id, ans2, sizeof ans2, &n2), TFRDV_TCP_SH_TCP_OFFER);
        TT_CHECK(n2 == n && memcmp(ans2 + 16, at, alen) == 0 && memcmp(ans2, tok, 16) != 0);
    }
    for (i = 0; i < 2; i++) { /* a ring through the side socket: this uid's client gets it (8), another uid's not (0) */
        char ans2[256];
        size_t n2 = 0;
        pid_t pid;
        int ws = 0;
        if (i == 1 && geteuid() != 0) { printf("  (not root: the other-uid ring refusal is skipped)\n"); break; }
        TT_CHECK_EQ_INT(raw_ask(s.addr, id, ans2, sizeof ans2, &n2), TFRDV_TCP_SH_TCP_OFFER);
        pid = fork();
        if (pid == 0) {
            rawring x;
            tfrdv_tcp_frame g;
            int got = -1;
            alarm(20);
            if (i == 1 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(90);
            raw_offer_token = (const uint8_t*)ans2;
            if (!raw_offer(&x, at, 1, 4, 0, 0)) _exit(91);
            while (got < 0) { /* the answer: on the socket, or (ring accepted) the ring's first record */
                struct pollfd pf;
                uint64_t prod = __atomic_load_n((uint64_t*)(void*)(x.map + 1024), __ATOMIC_ACQUIRE);
                tfrdv_status st;
                if (prod >= 16 + 24) {
                    if (tfrdv_tcp_decode(x.map + 4096 + (256 << 10) + 16, (size_t)prod - 16, 0, &g, &st) <= 0 || g.type != TFRDV_TCP_SAMEHOST) _exit(93);
                    got = (int)g.sh_flags;
                    break;
                }
                pf.fd = x.fd;
                pf.events = POLLIN;
                pf.revents = 0;
                if (poll(&pf, 1, 10) <= 0) continue;
                if (!raw_next(x.fd, &x.rb, &g, 0, 0, -1)) _exit(94);
                if (g.type == TFRDV_TCP_SAMEHOST) got = (int)g.sh_flags;
            }
            _exit(got);
        }
        waitpid(pid, &ws, 0);
        if (!WIFEXITED(ws)) printf("    child %d: signal %d\n", i, WIFSIGNALED(ws) ? WTERMSIG(ws) : -1);
        TT_CHECK(WIFEXITED(ws));
        TT_CHECK_EQ_INT(WEXITSTATUS(ws), i == 0 ? TFRDV_TCP_SH_RING_OK : 0);
    }
    TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 3);
    TT_CHECK_EQ_INT(raw_ask(s.addr, "00000000-0000-0000-0000-000000000000 net:1:2", ans, sizeof ans, &n), 0); /* another host */
    TT_CHECK_EQ_INT(n, 0);
    insrv_close(&s);
    TT_CHECK(raw_abstract(at) < 0); /* the side socket went with the transport */

    for (i = 0; i < 2; i++) { /* refused: the environment, same_host off */
        if (i == 0) setenv("TFRDV_TCP_UPGRADE_DENY", "1", 1); /* read by create */
        if (!insrv_open(&s, "127.0.0.1:0", i == 0 ? 0 : TFRDV_OFF)) { TT_CHECK(0); unsetenv("TFRDV_TCP_UPGRADE_DENY"); return; }
        unsetenv("TFRDV_TCP_UPGRADE_DENY");
        TT_CHECK_EQ_INT(raw_ask(s.addr, id, ans, sizeof ans, &n), 0);
        TT_CHECK_EQ_INT(tstats(s.t).protocol_errors, 0);
        insrv_close(&s);
    }
}
#endif
static void test_config_same_host(void) {
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_tcp* t = 0;
    tfrdv_status st;
    tc.same_host = -2;
    TT_CHECK_EQ_INT(tfrdv_tcp_create(&tc, &t, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "same_host -2");
    TT_CHECK(!t);
}

/* ============================================================================================
   ZERO COPY: values made with a tfrdv_tcp_pool travel as (descriptor, offset, length)
   ============================================================================================ */
/* RESPONSE flag 8 and RELEASE: round trip and the hostile encodings */
static void test_codec_zero_copy(void) {
    uint8_t b[512];
    tfrdv_tcp_frame f, g;
    tfrdv_status st;
    uint64_t ids[2] = {7, 9};
    size_t n, i;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RESPONSE;
    f.id = 5;
    f.dtype = 4;
    f.rank = 1;
    f.dims[0] = 21;
    f.bytes = 21;
    f.pooled = 1;
    f.pool_fd = 12;
    f.pool_off = 4160;
    n = tfrdv_tcp_encode(&f, b, sizeof b);
    TT_CHECK_EQ_INT(n, 16 + 24 + 8 + 16);
    for (i = 0; i < n; i++) TT_CHECK(tfrdv_tcp_decode(b, i, 0, &g, &st) == 0);
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, 0, &g, &st), n);
    TT_CHECK(g.pooled && !g.remote && g.pool_fd == 12 && g.pool_off == 4160 && g.bytes == 21 && g.data_len == 0);
    TT_CHECK_EQ_INT(b[16 + 8], 8); /* flags */
    f.pool_off = UINT64_MAX - 8;
    bad(b, tfrdv_tcp_encode(&f, b, sizeof b), 0, "offset 18446744073709551607 + 21 bytes (wraps)");
    f.pool_off = 0;
    f.pool_fd = 0x80000000u;
    bad(b, tfrdv_tcp_encode(&f, b, sizeof b), 0, "pool descriptor 2147483648");
    f.pool_fd = 3;
    f.bytes = 0;
    bad(b, tfrdv_tcp_encode(&f, b, sizeof b), 0, "from a pool (flag 8) with no value bytes");
    f.bytes = 21;
    n = tfrdv_tcp_encode(&f, b, sizeof b);
    b[16 + 8] = 12; /* flags 4 and 8 together */
    bad(b, n, 0, "unknown flags 0xc");
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RELEASE;
    f.num_acks = 2;
    f.ack_ids = ids;
    n = tfrdv_tcp_encode(&f, b, sizeof b);
    TT_CHECK_EQ_INT(n, 16 + 16);
    TT_CHECK_EQ_INT(tfrdv_tcp_decode(b, n, 0, &g, &st), n);
    TT_CHECK(g.type == TFRDV_TCP_RELEASE && g.num_acks == 2 && g.ack_bytes[8] == 9);
    f.id = 4;
    bad(b, tfrdv_tcp_encode(&f, b, sizeof b), 0, "RELEASE body of 16 bytes");
}
/* the pool on its own: blocks, reuse after free, capacity, a pool destroyed before its values */
static void test_pool_allocator(void) {
    tfrdv_tcp_pool* p = 0;
    tfrdv_status st;
    tfrdv_allocator a;
    tfrdv_value *v1, *v2, *v3;
    int64_t d = 1;
    void* first;
    int fd;
    TT_CHECK_EQ_INT(tfrdv_tcp_pool_create(0, &p, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "capacity 0 out of range");
    TT_CHECK_EQ_INT(tfrdv_tcp_pool_create(MIB, &p, &st), TFRDV_OK);
    if (!p) return;
    fd = tfrdv_tcp_pool_fd(p);
    TT_CHECK(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK);
    TT_CHECK(ftruncate(fd, 4096) != 0); /* sealed: it cannot shrink */
    a = tfrdv_tcp_pool_allocator(p);
    v1 = tfrdv_value_new(&a, 4, 1, &d, 0, 1000);
    v2 = tfrdv_value_new(&a, 4, 1, &d, 0, 1000);
    TT_CHECK(v1 && v2 && (uint8_t*)v1->data >= (uint8_t*)tfrdv_tcp_pool_base(p));
    TT_CHECK((uintptr_t)v2 % 64 == 0);
    TT_CHECK_EQ_INT(tfrdv_tcp_pool_live_blocks(p), 2);
    TT_CHECK(!tfrdv_value_new(&a, 4, 1, &d, 0, MIB)); /* more than is left */
    first = v1;
    tfrdv_value_release(v1);
    v3 = tfrdv_value_new(&a, 4, 1, &d, 0, 500); /* first fit: the freed block */
    TT_CHECK(v3 == first);
    tfrdv_value_release(v3);
    tfrdv_tcp_pool_destroy(p); /* v2 still lives: the memory stays */
    memset(v2->data, 1, 1000);
    tfrdv_value_release(v2); /* the last block: now it goes */
}
/* frees the pool cannot have handed out change nothing and are counted: a double free does not
   hand one block out twice, nor unmap the pool under a live block once it is destroyed */
static void test_pool_refuses_bad_frees(void) {
    tfrdv_tcp_pool* p = 0;
    tfrdv_status st;
    tfrdv_allocator a;
    uint8_t *x, *y, *z, *w, *base;
    int on_stack;
    TT_CHECK_EQ_INT(tfrdv_tcp_pool_create(64 * 1024, &p, &st), TFRDV_OK);
    if (!p) return;
    a = tfrdv_tcp_pool_allocator(p);
    base = (uint8_t*)tfrdv_tcp_pool_base(p);
    x = (uint8_t*)a.alloc_fn(a.user, 100);
    y = (uint8_t*)a.alloc_fn(a.user, 200);
    TT_CHECK(x && y);
    if (!x || !y) return;
    a.free_fn(a.user, x, 100);
    a.free_fn(a.user, x, 100); /* a double free */
    TT_CHECK_EQ_INT(tfrdv_tcp_pool_refused_frees(p), 1);
    TT_CHECK_EQ_INT(tfrdv_tcp_pool_live_blocks(p), 1);
    TT_CHECK_EQ_INT(tfrdv_tcp_pool_live_bytes(p), 256);
    z = (uint8_t*)a.alloc_fn(a.user, 100);
    w = (uint8_t*)a.alloc_fn(a.user, 100);
    TT_CHECK(z == x && w && w != z); /* the freed block once, not twice */
    a.free_fn(a.user, &on_stack, 4);                    /* not the pool's */
    a.free_fn(a.user, base + 1, 64);                    /* not a block's start */
    a.free_fn(a.user, base + 64 * 1024, 64);            /* past the end */
    a.free_fn(a.user, base + 64 * 1024 - 64, 128);      /* running past the end */
    a.free_fn(a.user, y + 64, 64);                      /* inside a live block: taken as a block */
    a.free_fn(a.user, y + 64, 64);                      /* and then free: refused */
    a.free_fn(a.user, NULL, 0);                         /* fine, not counted */
    TT_CHECK_EQ_INT(tfrdv_tcp_pool_refused_frees(p), 6);
    a.free_fn(a.user, z, 100);
    a.free_fn(a.user, w, 100);
    tfrdv_tcp_pool_destroy(p); /* y's first 64 and last 64 bytes are still live: the pool stays */
    a.free_fn(a.user, z, 100); /* a double free after destroy: refused, nothing unmapped */
    TT_CHECK_EQ_INT(tfrdv_tcp_pool_refused_frees(p), 7);
    memset(y, 7, 64);
    a.free_fn(a.user, y, 64);
    a.free_fn(a.user, y + 128, 72); /* the last live bytes: now the pool goes */
    a = tfrdv_tcp_pool_allocator(NULL); /* a NULL pool: nothing handed out, getters 0 */
    TT_CHECK(a.alloc_fn(a.user, 64) == NULL);
    a.free_fn(a.user, &on_stack, 4);
    TT_CHECK(tfrdv_tcp_pool_live_bytes(NULL) == 0 && tfrdv_tcp_pool_live_blocks(NULL) == 0 && tfrdv_tcp_pool_refused_frees(NULL) == 0);
    TT_CHECK(tfrdv_tcp_pool_fd(NULL) == -1 && tfrdv_tcp_pool_base(NULL) == NULL && tfrdv_tcp_pool_capacity(NULL) == 0);
}
/* a value mapped from another process's memfd pool: is v->data in such a mapping? */
static int in_pool_mapping(const void* p) {
    FILE* f = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    if (!f) return 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo && (uintptr_t)p < hi && strstr(line, "memfd:tfrdv_tcp_pool")) found = 1;
    }
    fclose(f);
    return found;
}
/* waits (bounded) until the child's pool holds no block and no value is lent */
static rep srv_pool_settled(srv* s) {
    rep r;
    int i;
    for (i = 0; i < 1000; i++) {
        r = srv_stats(s);
        if (r.pool_live == 0 && r.ts.values_lent == 0 && r.ts.values_unacked == 0) break;
        sleep_ms(5);
    }
    return r;
}
/* 1 B, 4 KiB, 1 MiB and 64 MiB pool values arrive byte-exact as mappings of the server's pool,
   not copies; the server's pool gets every block back once the client released the values */
static void test_zero_copy_sizes(void) {
    static const uint64_t sizes[4] = {1, 4096, MIB, 64 * MIB};
    srv s;
    cli c;
    rep r;
    tfrdv_value* held[4];
    uint64_t sbase, rbase, cbase;
    int i, n = under_valgrind() ? 3 : 4;
    alarm(120);
    if (!srv_start(&s, upath("zc.sock"), 1, 4)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, 1)) { TT_CHECK(0); srv_stop(&s); return; }
    warm(&s, &c, 1); /* over the socket, or (the grant came first) a pool reference */
    r = srv_pool_settled(&s);
    TT_CHECK_EQ_INT(r.pool_live, 0);
    sbase = r.ts.values_zero_copy_sent;
    rbase = r.ts.releases_received;
    cbase = cstats(&c).values_zero_copy;
    for (i = 0; i < n; i++) {
        char e[16];
        tfrdv_status st;
        snprintf(e, sizeof e, "z%d", i);
        held[i] = 0;
        TT_CHECK_EQ_INT(srv_send(&s, e, sizes[i], (unsigned)i + 3).code, 0);
        TT_CHECK_EQ_INT(fetch(&c, e, &held[i], &st), TFRDV_OK);
        if (!held[i]) continue;
        TT_CHECK_EQ_INT(held[i]->size, sizes[i]);
        TT_CHECK(check((const uint8_t*)held[i]->data, sizes[i], (unsigned)i + 3));
        TT_CHECK(in_pool_mapping(held[i]->data)); /* no copy: the bytes are the sender's pages */
    }
    TT_CHECK_EQ_INT(cstats(&c).values_zero_copy - cbase, n);
    TT_CHECK_EQ_INT(cstats(&c).values_cma, 0);
    TT_CHECK_EQ_INT(cstats(&c).protocol_errors, 0);
    r = srv_settled(&s);
    TT_CHECK_EQ_INT(r.ts.values_zero_copy_sent - sbase, n);
    TT_CHECK_EQ_INT(r.ts.values_lent, n); /* delivered (acknowledged) but still mapped */
    TT_CHECK(r.pool_live >= sizes[n - 1]);
    for (i = 0; i < n; i++) tfrdv_value_release(held[i]);
    r = srv_pool_settled(&s);
    TT_CHECK_EQ_INT(r.pool_live, 0);
    TT_CHECK_EQ_INT(r.ts.values_lent, 0);
    TT_CHECK_EQ_INT(r.ts.releases_received - rbase, n);
    cli_close(&c);
    srv_stop(&s);
}
static tfrdv_value* own_alloc(void* u, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    (void)u;
    return tfrdv_value_new(0, dtype, rank, dims, 0, size);
}
/* a receive with its own alloc hook gets its own memory (one copy from the mapping); the pool
   block goes back at once */
static void test_zero_copy_own_memory(void) {
    srv s;
    cli c;
    rep r;
    tfrdv_rendezvous* rz = 0;
    tfrdv_key k;
    tfrdv_frame_iter fi = {0, 0};
    tfrdv_args ra;
    tfrdv_value* v = 0;
    tfrdv_status st;
    int dead = 0;
    uint64_t rbase, cbase;
    alarm(60);
    if (!srv_start(&s, upath("zcown.sock"), 1, 4)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, 1)) { TT_CHECK(0); srv_stop(&s); return; }
    warm(&s, &c, 1);
    rbase = srv_pool_settled(&s).ts.releases_received;
    cbase = cstats(&c).values_zero_copy;
    TT_CHECK_EQ_INT(srv_send(&s, "own", MIB, 8).code, 0);
    memset(&ra, 0, sizeof ra);
    ra.alloc_fn = own_alloc;
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(c.m, 1, &rz, &st), TFRDV_OK);
    (void)tfrdv_key_make(&k, PS_DEV, PS_INC, WK_DEV, "own", fi, &st);
    TT_CHECK_EQ_INT(tfrdv_recv(rz, &k.parsed, &ra, 30 * SEC, &v, &dead, &st), TFRDV_OK);
    tfrdv_unref(rz);
    TT_CHECK(v && v->size == MIB && check((const uint8_t*)v->data, MIB, 8));
    TT_CHECK(v && !in_pool_mapping(v->data));
    TT_CHECK_EQ_INT(cstats(&c).values_zero_copy_copied, 1);
    TT_CHECK_EQ_INT(cstats(&c).values_zero_copy - cbase, 0);
    r = srv_pool_settled(&s); /* released before the value is */
    TT_CHECK_EQ_INT(r.pool_live, 0);
    TT_CHECK_EQ_INT(r.ts.releases_received - rbase, 1);
    tfrdv_value_release(v);
    cli_close(&c);
    srv_stop(&s);
}
/* the client closes its transport while it still holds a pool value: the server cannot know
   whether the value is still mapped, so it keeps the block (values_lent) instead of reusing it:
   a value the server allocates next does not overwrite the one the client holds */
static void test_zero_copy_value_outlives_client_transport(void) {
    srv s;
    cli c;
    rep r;
    tfrdv_value *v = 0, *w = 0;
    tfrdv_status st;
    int i;
    alarm(60);
    if (!srv_start(&s, upath("zcout.sock"), 1, 4)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, 1)) { TT_CHECK(0); srv_stop(&s); return; }
    warm(&s, &c, 1);
    (void)srv_pool_settled(&s);
    TT_CHECK_EQ_INT(srv_send(&s, "out1", MIB, 11).code, 0);
    TT_CHECK_EQ_INT(fetch(&c, "out1", &v, &st), TFRDV_OK);
    TT_CHECK(v && in_pool_mapping(v->data) && check((const uint8_t*)v->data, MIB, 11));
    cli_close(&c); /* v stays with the application */
    for (i = 0; i < 1000; i++) {
        r = srv_stats(&s);
        if (r.ts.connections == 0) break;
        sleep_ms(5);
    }
    TT_CHECK_EQ_INT(r.ts.connections, 0);
    TT_CHECK_EQ_INT(r.ts.values_lent, 1); /* held past its connection */
    TT_CHECK(r.pool_live >= MIB);
    if (!cli_open(&c, s.addr, 1)) { TT_CHECK(0); tfrdv_value_release(v); srv_stop(&s); return; }
    warm(&s, &c, 1);
    TT_CHECK_EQ_INT(srv_send(&s, "out2", MIB, 12).code, 0); /* a new block from the same pool */
    TT_CHECK_EQ_INT(fetch(&c, "out2", &w, &st), TFRDV_OK);
    TT_CHECK(w && check((const uint8_t*)w->data, MIB, 12));
    TT_CHECK(v && check((const uint8_t*)v->data, MIB, 11)); /* unchanged */
    tfrdv_value_release(w);
    tfrdv_value_release(v);
    cli_close(&c);
    srv_stop(&s);
}
/* the server dies while the client maps its value: the mapping stays valid, the bytes too */
static void test_zero_copy_server_killed(void) {
    srv s;
    cli c;
    tfrdv_value* v = 0;
    tfrdv_status st;
    int status;
    alarm(60);
    if (!srv_start(&s, upath("zckill.sock"), 1, 4)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, 1)) { TT_CHECK(0); srv_stop(&s); return; }
    warm(&s, &c, 1);
    TT_CHECK_EQ_INT(srv_send(&s, "kill", 4 * MIB, 5).code, 0);
    TT_CHECK_EQ_INT(fetch(&c, "kill", &v, &st), TFRDV_OK);
    kill(s.pid, SIGKILL);
    waitpid(s.pid, &status, 0);
    close(s.cfd);
    close(s.rfd);
    TT_CHECK(v && check((const uint8_t*)v->data, 4 * MIB, 5));
    tfrdv_value_release(v); /* its RELEASE has nowhere to go: dropped */
    cli_close(&c);
}
/* a hostile server announcing pool references: an unsealed memfd, a range past the pool, a
   descriptor that is no file; each closes the connection with a message naming it */
typedef struct zhostile { int lfd, act, fd; } zhostile;
static void* zc_hostile_server(void* p) {
    zhostile* h = (zhostile*)p;
    rawbuf* rb = (rawbuf*)calloc(1, sizeof *rb);
    tfrdv_tcp_frame f, g;
    uint64_t req = 0;
    int fd = accept(h->lfd, 0, 0), saw = 0;
    if (fd < 0) { free(rb); return 0; }
    raw_hello(fd, 5, PS, 0);
    while ((!req || !saw) && raw_next(fd, rb, &g, 0, 0, -1)) {
        if (g.type == TFRDV_TCP_REQUEST) req = g.id;
        if (g.type == TFRDV_TCP_SAMEHOST) saw = 1;
    }
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_SAMEHOST;
    f.sh_flags = TFRDV_TCP_SH_CMA_GRANT;
    raw_put(fd, &f);
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RESPONSE;
    f.id = req;
    f.dtype = 4;
    f.rank = 1;
    f.pooled = 1;
    f.bytes = 4096;
    f.dims[0] = 4096;
    f.pool_fd = (uint32_t)h->fd;
    f.pool_off = h->act == 1 ? 8192 : 0;
    raw_put(fd, &f);
    while (raw_next(fd, rb, &g, 0, 0, -1)) {}
    close(fd);
    free(rb);
    return 0;
}
static void test_zero_copy_hostile_server(void) {
    static const char* want[3] = {"is not a memfd sealed against shrinking", "pool range offset 8192 + 4096 bytes lies past the pool's 8192 bytes",
                                  "is not a regular file"};
    int act;
    alarm(60);
    for (act = 0; act < 3; act++) {
        zhostile h;
        const char* addr = upath("zhostile.sock");
        int pfd[2] = {-1, -1};
        memset(&h, 0, sizeof h);
        h.act = act;
        if (act == 2) {
            TT_CHECK_EQ_INT(pipe(pfd), 0);
            h.fd = pfd[0];
        } else {
            h.fd = memfd_create("zc_test", MFD_ALLOW_SEALING);
            TT_CHECK_EQ_INT(ftruncate(h.fd, 8192), 0);
            if (act == 1) TT_CHECK_EQ_INT(fcntl(h.fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
        }
        h.lfd = raw_listen(addr);
        TT_CHECK(h.lfd >= 0);
        if (h.lfd < 0) break;
        if (!hostile_fetch(addr, h.lfd, zc_hostile_server, &h, want[act], 1)) break;
        close(h.lfd);
        close(h.fd);
        if (pfd[1] >= 0) close(pfd[1]);
    }
}

/* a hostile client of a zero-copy server (a raw socket in this process, version 5, SAME HOST
   granted): RELEASE frames naming ids never lent, ids repeated in one frame and across frames,
   a flood of them, a RELEASE on a version 4 connection; then it hangs up holding a value. Each
   value is let go exactly once (values_lent), nothing the client did not hold is released,
   the flood is no protocol error, the server keeps serving, and the value held at hang-up
   keeps its block until the transport goes; then the pool is empty */
static int zc_raw_client(const char* addr, int version, rawbuf* rb) {
    tfrdv_tcp_frame f, g;
    int fd = raw_connect(addr);
    if (fd < 0) return -1;
    raw_hello(fd, version, WK, 0);
    if (!raw_next(fd, rb, &g, 0, 0, -1) || g.type != TFRDV_TCP_HELLO) { close(fd); return -1; }
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_SAMEHOST;
    f.sh_flags = TFRDV_TCP_SH_CMA_READ;
    raw_put(fd, &f);
    if (!raw_next(fd, rb, &g, 0, 0, -1) || g.type != TFRDV_TCP_SAMEHOST || !(g.sh_flags & TFRDV_TCP_SH_CMA_GRANT)) { close(fd); return -1; }
    return fd;
}
/* REQUEST id for edge; its RESPONSE (pooled expected), acknowledged */
static int zc_raw_fetch(int fd, rawbuf* rb, uint64_t id, const char* edge) {
    static int64_t request_id = 9000;
    tfrdv_tcp_frame f, g;
    tfrdv_key k;
    key_for(&k, edge);
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_REQUEST;
    f.id = id;
    f.step_id = 1;
    f.request_id = ++request_id;
    f.key.ptr = k.buf;
    f.key.len = k.len;
    raw_put(fd, &f);
    while (raw_next(fd, rb, &g, 0, 0, -1))
        if (g.type == TFRDV_TCP_RESPONSE && g.id == id) {
            memset(&f, 0, sizeof f);
            f.type = TFRDV_TCP_ACK;
            f.num_acks = 1;
            f.ack_ids = &id;
            raw_put(fd, &f);
            return g.pooled;
        }
    return 0;
}
static void zc_raw_release(int fd, const uint64_t* ids, uint32_t n) {
    tfrdv_tcp_frame f;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_RELEASE;
    f.num_acks = n;
    f.ack_ids = ids;
    raw_put(fd, &f);
}
/* waits (bounded) until the server's values_lent is want */
static tfrdv_tcp_stats zc_lent_is(tfrdv_tcp* t, size_t want) {
    tfrdv_tcp_stats ts;
    int i;
    for (i = 0; i < 2000; i++) {
        ts = tstats(t);
        if (ts.values_lent == want && ts.values_unacked == 0) break;
        sleep_ms(2);
    }
    return ts;
}
static void test_zero_copy_hostile_client_release(void) {
    insrv s;
    tfrdv_tcp_pool* pool = 0;
    tfrdv_rendezvous* rz = 0;
    tfrdv_status st;
    tfrdv_tcp_stats ts;
    rawbuf* rb = (rawbuf*)calloc(1, sizeof *rb);
    uint64_t ids[TFRDV_TCP_ACK_MAX], rel0, err0;
    int fd, i;
    alarm(60);
    if (!insrv_open(&s, upath("zcrel.sock"), 1)) { TT_CHECK(0); free(rb); return; }
    TT_CHECK_EQ_INT(tfrdv_tcp_pool_create(4 * MIB, &pool, &st), TFRDV_OK);
    if (!pool) { insrv_close(&s); free(rb); return; }
    TT_CHECK_EQ_INT(tfrdv_tcp_add_pool(s.t, pool, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(s.m, 1, &rz, &st), TFRDV_OK);
    child_pool = pool;
    for (i = 0; i < 4; i++) {
        char e[8];
        tfrdv_key k;
        snprintf(e, sizeof e, "h%d", i);
        key_for(&k, e);
        TT_CHECK_EQ_INT(tfrdv_send(rz, &k.parsed, 0, mkval(64 << 10, (unsigned)i), 0, &st), TFRDV_OK);
    }
    child_pool = 0;
    fd = zc_raw_client(s.addr, 5, rb);
    TT_CHECK(fd >= 0);
    if (fd < 0) goto out;
    err0 = tstats(s.t).protocol_errors;
    rel0 = tstats(s.t).releases_received;
    TT_CHECK(zc_raw_fetch(fd, rb, 1, "h0"));
    TT_CHECK(zc_raw_fetch(fd, rb, 2, "h1"));
    TT_CHECK_EQ_INT(zc_lent_is(s.t, 2).values_lent, 2);
    /* ids never lent: the ones after its own, 0, the largest */
    ids[0] = 3;
    ids[1] = 0;
    ids[2] = UINT64_MAX;
    ids[3] = 77;
    zc_raw_release(fd, ids, 4);
    /* id 1 again and again in one frame, then in the next */
    for (i = 0; i < TFRDV_TCP_ACK_MAX; i++) ids[i] = 1;
    zc_raw_release(fd, ids, TFRDV_TCP_ACK_MAX);
    zc_raw_release(fd, ids, 1);
    ts = zc_lent_is(s.t, 1);
    TT_CHECK_EQ_INT(ts.values_lent, 1);
    TT_CHECK_EQ_INT(ts.releases_received - rel0, 1);
    /* a flood of RELEASE frames of ids never lent (id 2 stays lent) */
    for (i = 0; i < TFRDV_TCP_ACK_MAX; i++) ids[i] = 1000 + (uint64_t)i;
    for (i = 0; i < 2000; i++) zc_raw_release(fd, ids, TFRDV_TCP_ACK_MAX);
    TT_CHECK(zc_raw_fetch(fd, rb, 3, "h2")); /* still served, on the same connection */
    ts = zc_lent_is(s.t, 2);
    TT_CHECK_EQ_INT(ts.values_lent, 2);
    TT_CHECK_EQ_INT(ts.releases_received - rel0, 1);
    TT_CHECK_EQ_INT(ts.protocol_errors - err0, 0);
    ids[0] = 3;
    zc_raw_release(fd, ids, 1);
    TT_CHECK_EQ_INT(zc_lent_is(s.t, 1).values_lent, 1);
    close(fd); /* hangs up holding id 2: its block stays (the client may still map it) */
    for (i = 0; i < 1000 && tstats(s.t).connections != 0; i++) sleep_ms(2);
    ts = tstats(s.t);
    TT_CHECK_EQ_INT(ts.connections, 0);
    TT_CHECK_EQ_INT(ts.values_lent, 1);
    TT_CHECK(tfrdv_tcp_pool_live_blocks(pool) >= 2); /* h1 and h3 (never fetched) */
    /* a RELEASE from a version 4 client is no frame it may send: the connection closes */
    fd = zc_raw_client(s.addr, 4, rb);
    TT_CHECK(fd >= 0);
    if (fd >= 0) {
        tfrdv_tcp_frame g;
        char msg[200];
        msg[0] = 0;
        ids[0] = 2;
        zc_raw_release(fd, ids, 1);
        while (raw_next(fd, rb, &g, 0, 0, -1))
            if (g.type == TFRDV_TCP_CLOSE) snprintf(msg, sizeof msg, "%.*s", (int)g.message.len, g.message.ptr);
        TT_CHECK_CONTAINS(msg, "unexpected frame type 10");
        close(fd);
    }
    TT_CHECK_EQ_INT(tstats(s.t).values_lent, 1); /* not let go by another connection's RELEASE */
out:
    tfrdv_unref(rz);
    insrv_close(&s); /* the held value goes with the transport */
    TT_CHECK_EQ_INT(tfrdv_tcp_pool_live_blocks(pool), 0);
    tfrdv_tcp_pool_destroy(pool);
    free(rb);
}

/* the client's values are released by another thread while its transport is destroyed: each
   release either reaches the server as a RELEASE (the block goes back) or finds the connection
   gone (the server keeps the block until its transport goes): never both, never neither */
typedef struct zc_rel { tfrdv_value** v; int n; } zc_rel;
static void* zc_release_all(void* p) {
    zc_rel* r = (zc_rel*)p;
    int i;
    for (i = 0; i < r->n; i++) tfrdv_value_release(r->v[i]);
    return 0;
}
static void test_zero_copy_release_races_client_destroy(void) {
    enum { N = 64 };
    srv s;
    cli c;
    rep r;
    tfrdv_value* held[N];
    zc_rel zr;
    pthread_t th;
    uint64_t rbase;
    int i, got = 0;
    alarm(120);
    if (!srv_start(&s, upath("zcrace.sock"), 1, 4)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, 1)) { TT_CHECK(0); srv_stop(&s); return; }
    warm(&s, &c, 1);
    rbase = srv_pool_settled(&s).ts.releases_received;
    for (i = 0; i < N; i++) {
        char e[16];
        tfrdv_status st;
        snprintf(e, sizeof e, "race%d", i);
        held[i] = 0;
        TT_CHECK_EQ_INT(srv_send(&s, e, 4096, (unsigned)i).code, 0);
        TT_CHECK_EQ_INT(fetch(&c, e, &held[i], &st), TFRDV_OK);
        if (held[i]) got++;
    }
    TT_CHECK_EQ_INT(got, N);
    TT_CHECK_EQ_INT(srv_settled(&s).ts.values_lent, N);
    zr.v = held;
    zr.n = got;
    pthread_create(&th, 0, zc_release_all, &zr);
    cli_close(&c);
    pthread_join(th, 0);
    for (i = 0; i < 1000; i++) {
        r = srv_stats(&s);
        if (r.ts.connections == 0) break;
        sleep_ms(5);
    }
    TT_CHECK_EQ_INT(r.ts.connections, 0);
    TT_CHECK_EQ_INT(r.ts.values_lent + (r.ts.releases_received - rbase), N);
    TT_CHECK(r.pool_live >= 64 * r.ts.values_lent); /* what is still lent keeps its block */
    srv_stop(&s);
}

/* ============================================================================================
   The same-host upgrade of a TCP connection, both halves (a client and a server process)
   ============================================================================================ */
#ifdef TFRDV_TCP__UPGRADE
/* the first fetch goes over TCP; then waits (bounded) until the client moved to the side socket
   and closed the TCP connection */
static void up_warm(srv* s, cli* c) {
    int i;
    TT_CHECK_EQ_INT(srv_send(s, "warm", 1, 0).code, 0);
    TT_CHECK(fetch_check(c, "warm", 1, 0));
    for (i = 0; i < 2000 && (cstats(c).tcp_upgrades < 1 || cstats(c).connections != 1); i++) sleep_ms(5);
    TT_CHECK_EQ_INT(cstats(c).tcp_upgrades, 1);
    TT_CHECK_EQ_INT(cstats(c).connections, 1);
}
/* a TCP peer on 127.0.0.1 moves to the side socket: counted by both ends, a ring each, the TCP
   connection closed; then 1 B and 4 KiB through the ring, 1 MiB over the Unix socket and 64 MiB
   by address (RING_SH: from 4 MiB), byte-exact */
static void test_tcp_upgrade_sizes(void) {
    static const uint64_t sizes[4] = {1, 4096, MIB, 64 * MIB};
    srv s;
    cli c;
    rep r;
    uint64_t ring, cma;
    int i, n = under_valgrind() ? 3 : 4;
    alarm(120);
    if (!srv_start(&s, "127.0.0.1:0", RING_SH, 0)) { TT_CHECK(0); return; }
    log_reset();
    if (!cli_open(&c, s.addr, RING_SH)) { TT_CHECK(0); srv_stop(&s); return; }
    up_warm(&s, &c);
    for (i = 0; i < 1000 && cstats(&c).ring_connections < 1; i++) sleep_ms(5);
    TT_CHECK_EQ_INT(cstats(&c).ring_connections, 1);
    r = srv_stats(&s);
    TT_CHECK_EQ_INT(r.ts.tcp_upgrades, 1);
    TT_CHECK_EQ_INT(r.ts.ring_connections, 1);
    ring = cstats(&c).values_ring;
    cma = cstats(&c).values_cma;
    for (i = 0; i < n; i++) {
        char e[16];
        snprintf(e, sizeof e, "u%d", i);
        TT_CHECK_EQ_INT(srv_send(&s, e, sizes[i], (unsigned)i + 1).code, 0);
        TT_CHECK(fetch_check(&c, e, sizes[i], (unsigned)i + 1));
    }
    TT_CHECK_EQ_INT(cstats(&c).values_ring - ring, 2);
    TT_CHECK_EQ_INT(cstats(&c).values_cma - cma, n - 3);
    TT_CHECK_EQ_INT(cstats(&c).protocol_errors, 0);
    r = srv_settled(&s);
    TT_CHECK_EQ_INT(r.ts.protocol_errors, 0);
    TT_CHECK_EQ_INT(r.ts.values_returned, 0);
    TT_CHECK_EQ_INT(r.ts.values_acked, n + 1);
    TT_CHECK_EQ_INT(r.ts.connections, 1); /* the server closed the TCP one too */
    TT_CHECK_EQ_INT(log_count("stay on TCP"), 0);
    cli_close(&c);
    srv_stop(&s);
}
/* 200 receives posted around the switch (before the ask, while the side socket is dialled, after
   it took over), their values sent only then (the calls on TCP are still open at the switch):
   each completes once with its bytes; the TCP connection goes after its last */
static void test_tcp_upgrade_pipelined(void) {
    enum { N = 200 };
    static many_one one[N];
    many m;
    srv s;
    cli c;
    rep r;
    tfrdv_rendezvous* rz = 0;
    tfrdv_status st;
    int i, before = 0;
    alarm(120);
    if (!srv_start(&s, "127.0.0.1:0", RING_SH, 0)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, RING_SH)) { TT_CHECK(0); srv_stop(&s); return; }
    memset(&m, 0, sizeof m);
    pthread_mutex_init(&m.mu, 0);
    (void)tfrdv_mgr_start_step(c.m, 1, &rz, &st);
    for (i = 0; i < N; i++) {
        post_many(rz, &m, &one[i], i);
        if (!cstats(&c).tcp_upgrades) before = i + 1;
        if (i >= 50 && i < 150 && i % 10 == 0) sleep_ms(1); /* spread over the switch */
        if (i == 150) {
            int j;
            for (j = 0; j < 2000 && !cstats(&c).tcp_upgrades; j++) sleep_ms(5); /* the rest after it */
        }
    }
    printf("    %d of %d receives posted before the switch\n", before, N);
    TT_CHECK(before > 0 && before < N);
    TT_CHECK_EQ_INT(cstats(&c).calls_ok, 0);
    TT_CHECK_EQ_INT(srv_send_n(&s, "p", 1024, 100, N).code, 0);
    wait_many(&m, N);
    sleep_ms(50); /* a second completion would show now */
    TT_CHECK_EQ_INT(m.done, N);
    TT_CHECK_EQ_INT(m.ok, N);
    TT_CHECK_EQ_INT(cstats(&c).tcp_upgrades, 1);
    for (i = 0; i < 1000 && cstats(&c).connections != 1; i++) sleep_ms(5);
    TT_CHECK_EQ_INT(cstats(&c).connections, 1);
    TT_CHECK_EQ_INT(cstats(&c).calls_ok, N);
    TT_CHECK_EQ_INT(cstats(&c).protocol_errors, 0);
    r = srv_settled(&s);
    TT_CHECK_EQ_INT(r.ts.values_acked, N);
    TT_CHECK_EQ_INT(r.ts.values_returned, 0);
    TT_CHECK_EQ_INT(r.ts.values_unacked, 0);
    tfrdv_unref(rz);
    pthread_mutex_destroy(&m.mu);
    cli_close(&c);
    srv_stop(&s);
}
/* the server is killed after the upgrade with calls in flight on the side socket: each
   finishes once, UNAVAILABLE */
static void test_tcp_upgrade_server_killed(void) {
    srv s;
    cli c;
    alarm(60);
    if (!srv_start(&s, "127.0.0.1:0", RING_SH, 0)) { TT_CHECK(0); return; }
    if (!cli_open(&c, s.addr, RING_SH)) { TT_CHECK(0); srv_stop(&s); return; }
    up_warm(&s, &c);
    killed_with_16(&s, &c);
    TT_CHECK_EQ_INT(cstats(&c).tcp_upgrades, 1);
    cli_close(&c);
}
/* forced fallbacks: calls succeed over TCP, one log line naming the cause, tcp_upgrades 0; cenv
   and senv (when not NULL) name a variable set to 1 in the client's and the server's environment */
static void up_fallback_case(int64_t csh, int64_t ssh, const char* cenv, const char* senv, const char* want) {
    srv s;
    cli c;
    int i;
    if (senv) setenv(senv, "1", 1);
    i = srv_start(&s, "127.0.0.1:0", ssh, 0);
    if (senv) unsetenv(senv);
    if (!i) { TT_CHECK(0); return; }
    log_reset();
    if (cenv) setenv(cenv, "1", 1);
    i = cli_open(&c, s.addr, csh);
    if (cenv) unsetenv(cenv);
    if (!i) { TT_CHECK(0); srv_stop(&s); return; }
    TT_CHECK_EQ_INT(srv_send_n(&s, "fb", MIB, 7, 3).code, 0);
    TT_CHECK(fetch_check(&c, "fb_0", MIB, 7));
    for (i = 0; i < 1000 && !log_count("stay on TCP"); i++) sleep_ms(5); /* the answer may come later */
    TT_CHECK(fetch_check(&c, "fb_1", MIB, 8));
    TT_CHECK(fetch_check(&c, "fb_2", MIB, 9));
    TT_CHECK_EQ_INT(log_count("stay on TCP"), 1);
    TT_CHECK_EQ_INT(log_count(want), 1);
    TT_CHECK_EQ_INT(cstats(&c).tcp_upgrades, 0);
    TT_CHECK_EQ_INT(cstats(&c).connections, 1);
    TT_CHECK_EQ_INT(cstats(&c).calls_ok, 3);
    /* the server counts a token that checked out: only the side socket that granted nothing had one */
    TT_CHECK_EQ_INT(srv_stats(&s).ts.tcp_upgrades, senv && strcmp(senv, "TFRDV_TCP_RING_DENY") == 0 ? 1 : 0);
    cli_close(&c);
    srv_stop(&s);
}
static void test_tcp_upgrade_fallbacks(void) {
    alarm(120);
    up_fallback_case(1, 1, "TFRDV_TCP_UPGRADE_DENY", 0, "TFRDV_TCP_UPGRADE_DENY=1 is set here");
    up_fallback_case(TFRDV_OFF, 1, 0, 0, "same_host is TFRDV_OFF here");
    up_fallback_case(1, TFRDV_OFF, 0, 0, "the server refused it");
    up_fallback_case(1, 1, 0, "TFRDV_TCP_UPGRADE_DENY", "the server refused it");
    /* the side socket grants nothing: the client may not read the server's memory (CMA_DENY) and
       the server refuses the ring (RING_DENY): the TCP connection stays, the side one is closed */
    up_fallback_case(1, 1, "TFRDV_TCP_CMA_DENY", "TFRDV_TCP_RING_DENY",
                     "granted neither values by address nor the ring on the side socket (asked for the ring");
}
/* a TCP server that offers another local service's abstract socket as its side address: the
   client does not connect there, stays on TCP and says why once */
static void test_tcp_upgrade_hostile_offer(void) {
    oldsrv o;
    cli c;
    struct sockaddr_un un;
    char addr[64], victim[64];
    int vfd, i;
    alarm(60);
    memset(&o, 0, sizeof o);
    o.version = 5;
    snprintf(victim, sizeof victim, "@tfrdv_victim_%d", (int)getpid()); /* not "@tfrdv-..." */
    o.offer = victim;
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    memcpy(un.sun_path + 1, victim + 1, strlen(victim) - 1);
    vfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    TT_CHECK(vfd >= 0 && bind(vfd, (struct sockaddr*)&un, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(victim))) == 0 &&
             listen(vfd, 4) == 0);
    if ((o.lfd = loop_listen(addr, sizeof addr)) < 0) {
        TT_CHECK(0);
        if (vfd >= 0) close(vfd);
        return;
    }
    if (!old_fetch(&o, addr, &c)) { close(vfd); return; }
    TT_CHECK_EQ_INT(o.saw_samehost, (int)TFRDV_TCP_SH_TCP_ASK); /* it asked, and got the offer */
    for (i = 0; i < 1000 && log_count("stay on TCP") == 0; i++) sleep_ms(5); /* the offer came after the value */
    TT_CHECK_EQ_INT(log_count("stay on TCP"), 1);
    TT_CHECK_EQ_INT(log_count("\"@tfrdv-...\" of printable bytes expected"), 1);
    TT_CHECK_EQ_INT(cstats(&c).tcp_upgrades, 0);
    TT_CHECK(accept(vfd, 0, 0) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)); /* nobody came */
    cli_close(&c);
    close(o.lfd);
    close(vfd);
}
/* a version 4 peer on 127.0.0.1 never sees the question; the client says why once */
static void test_tcp_upgrade_older_peer(void) {
    oldsrv o;
    cli c;
    char addr[64];
    alarm(60);
    memset(&o, 0, sizeof o);
    o.version = 4;
    if ((o.lfd = loop_listen(addr, sizeof addr)) < 0) { TT_CHECK(0); return; }
    if (!old_fetch(&o, addr, &c)) return;
    TT_CHECK_EQ_INT(log_count("stay on TCP"), 1);
    TT_CHECK_EQ_INT(log_count("the server speaks protocol version 4 (the upgrade needs 5)"), 1);
    TT_CHECK_EQ_INT(cstats(&c).tcp_upgrades, 0);
    cli_close(&c);
    close(o.lfd);
}
#endif
int main(int argc, char** argv) {
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) snprintf(self_exe, sizeof self_exe, "%s", argv[0]);
    else self_exe[n] = 0;
    if (argc == 7 && strcmp(argv[1], "--serve") == 0) {
        child_server(atoi(argv[2]), atoi(argv[3]), argv[4], strtoll(argv[5], 0, 10), atoi(argv[6]));
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--die-fetching") == 0) return die_fetching(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--client-nondumpable") == 0) return client_of_nondumpable(argv[2]);
    TT_MAIN_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tfrdv_sh_%d", (int)getpid());
    mkdir(tmpdir, 0700);
    TT_RUN(test_codec_by_address);
    TT_RUN(test_codec_upgrade_frames);
    TT_RUN(test_config_same_host);
#ifdef TFRDV_TCP__CMA
    TT_RUN(test_host_identity);
    TT_RUN(test_side_tokens);
#endif
#ifdef TFRDV_TCP__UPGRADE
    TT_RUN(test_upgrade_offer);
    TT_RUN(test_tcp_upgrade_sizes);
    TT_RUN(test_tcp_upgrade_pipelined);
    TT_RUN(test_tcp_upgrade_server_killed);
    TT_RUN(test_tcp_upgrade_fallbacks);
    TT_RUN(test_tcp_upgrade_older_peer);
    TT_RUN(test_tcp_upgrade_hostile_offer);
#endif
#ifdef __linux__
    TT_RUN(test_sizes_by_address);
    TT_RUN(test_default_threshold);
    TT_RUN(test_server_killed_mid_read);
    TT_RUN(test_client_killed_mid_read);
    TT_RUN(test_exactly_once_by_address);
    TT_RUN(test_hostile_server_by_address);
    TT_RUN(test_older_peer_never_asked);
    TT_RUN(test_fallback_disabled);
    TT_RUN(test_fallback_probe_denied);
    TT_RUN(test_fallback_nondumpable_server);
    TT_RUN(test_ring_sizes);
    TT_RUN(test_ring_pipelined);
    TT_RUN(test_ring_server_killed);
    TT_RUN(test_ring_futex_waiter_server_killed);
    TT_RUN(test_ring_futex_flags);
    TT_RUN(test_ring_fetching_thread_reads);
    TT_RUN(test_ring_exactly_once);
    TT_RUN(test_ring_hostile_client);
    TT_RUN(test_ring_peer_stops_consuming);
    TT_RUN(test_ring_unsealed_refused);
    TT_RUN(test_ring_fallbacks);
    TT_RUN(test_codec_zero_copy);
    TT_RUN(test_pool_allocator);
    TT_RUN(test_pool_refuses_bad_frees);
    TT_RUN(test_zero_copy_sizes);
    TT_RUN(test_zero_copy_own_memory);
    TT_RUN(test_zero_copy_value_outlives_client_transport);
    TT_RUN(test_zero_copy_server_killed);
    TT_RUN(test_zero_copy_hostile_server);
    TT_RUN(test_zero_copy_hostile_client_release);
    TT_RUN(test_zero_copy_release_races_client_destroy);
#endif
    alarm(0);
    {
        char cmdline[128];
        snprintf(cmdline, sizeof cmdline, "rm -rf %s", tmpdir);
        if (system(cmdline) != 0) printf("    could not remove %s\n", tmpdir);
    }
    return TT_MAIN_END();
}
