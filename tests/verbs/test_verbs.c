/* test_verbs.c - device-free tests of tfrdv_verbs.h: control-message codec, handshake info,
   credit accounting (a simulated pair of rings), metadata cache and re-request decision,
   registration cache (fake registrar), and the "no RDMA" statuses. Built by `make test` as
   $(B)/test_verbs. Without libibverbs-dev only the protocol part is compiled
   (TFRDV_VERBS_PROTOCOL_ONLY); with it, the whole implementation is, and the missing-library and
   no-device paths run too. */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#ifndef TT_HAVE_IBV
#define TFRDV_VERBS_PROTOCOL_ONLY
#endif
#define TFRDV_VERBS_IMPLEMENTATION
#include "tfrdv_verbs.h"
#include "tt.h"
#include <stdlib.h>

static int64_t dims_out[TFRDV_VERBS__MAX_RANK];

static size_t enc(tfrdv_verbs__msg* m, uint8_t* buf, size_t cap) { return tfrdv_verbs__encode(m, buf, cap); }

static void test_codec_roundtrip(void) {
    uint8_t buf[4096];
    int64_t dims[3] = {2, 3, 4};
    tfrdv_verbs__msg m, d;
    const char* why;
    size_t n;
    memset(&m, 0, sizeof m);
    m.type = TFRDV_VERBS__REQUEST;
    m.credits = 7;
    m.slot = 5 | (3u << 16);
    m.step_id = -42;
    m.request_id = 0x123456789abcdefLL;
    m.addr = 0xdeadbeef00ULL;
    m.rkey = 0x1234;
    m.cap = 96;
    m.flags = TFRDV_VERBS__F_BUFFER | TFRDV_VERBS__F_META;
    m.meta.dtype = 1;
    m.meta.rank = 3;
    m.meta.size = 96;
    m.meta.dims = dims;
    m.key = "a;b;c;d;0:0";
    m.key_len = 11;
    n = enc(&m, buf, sizeof buf);
    TT_CHECK_EQ_INT(n, 16 + 40 + 20 + 24 + 4 + 11);
    TT_CHECK(buf[0] == 1 && buf[1] == TFRDV_VERBS__REQUEST && buf[4] == 7); /* little-endian */
    TT_CHECK(tfrdv_verbs__decode(buf, n, &d, dims_out, &why));
    TT_CHECK(d.type == m.type && d.credits == 7 && d.slot == m.slot && d.step_id == -42 && d.request_id == m.request_id);
    TT_CHECK(d.addr == m.addr && d.rkey == m.rkey && d.cap == 96 && d.flags == m.flags);
    TT_CHECK(d.meta.dtype == 1 && d.meta.rank == 3 && d.meta.size == 96 && d.meta.dims[2] == 4);
    TT_CHECK(d.key_len == 11 && memcmp(d.key, m.key, 11) == 0);
    /* request without buffer or meta (first fetch of a key) */
    m.flags = 0;
    n = enc(&m, buf, sizeof buf);
    TT_CHECK(tfrdv_verbs__decode(buf, n, &d, dims_out, &why) && d.flags == 0 && d.key_len == 11);
    /* every other type */
    memset(&m, 0, sizeof m);
    m.type = TFRDV_VERBS__RE_REQUEST;
    m.addr = 77;
    m.rkey = 9;
    m.cap = 1 << 20;
    n = enc(&m, buf, sizeof buf);
    TT_CHECK(tfrdv_verbs__decode(buf, n, &d, dims_out, &why) && d.addr == 77 && d.rkey == 9 && d.cap == (1u << 20));
    m.type = TFRDV_VERBS__META;
    m.meta.dtype = 3;
    m.meta.rank = 3;
    m.meta.dims = dims;
    m.meta.size = 96;
    m.meta.is_dead = 1;
    n = enc(&m, buf, sizeof buf);
    TT_CHECK(tfrdv_verbs__decode(buf, n, &d, dims_out, &why) && d.meta.is_dead == 1 && d.meta.dims[1] == 3);
    m.type = TFRDV_VERBS__ERROR;
    m.code = TFRDV_ABORTED;
    m.text = "Cleanup 7";
    m.text_len = 9;
    n = enc(&m, buf, sizeof buf);
    TT_CHECK(tfrdv_verbs__decode(buf, n, &d, dims_out, &why) && d.code == TFRDV_ABORTED && d.text_len == 9 &&
             memcmp(d.text, "Cleanup 7", 9) == 0 && d.detail == 0);
    m.detail = TFRDV_DETAIL_WORKER_RESTARTED; /* the status detail travels in the code word's second byte */
    n = enc(&m, buf, sizeof buf);
    TT_CHECK(tfrdv_verbs__decode(buf, n, &d, dims_out, &why) && d.code == TFRDV_ABORTED &&
             d.detail == TFRDV_DETAIL_WORKER_RESTARTED);
    buf[16 + 2] = 1; /* after the 16-byte header: a code word above 16 bits is malformed */
    TT_CHECK(!tfrdv_verbs__decode(buf, n, &d, dims_out, &why));
    m.detail = 0;
    m.type = TFRDV_VERBS__CREDIT;
    m.credits = 32;
    n = enc(&m, buf, sizeof buf);
    TT_CHECK(n == 16 && tfrdv_verbs__decode(buf, n, &d, dims_out, &why) && d.credits == 32);
    /* a slot larger than the message (the ring slot) decodes the same */
    TT_CHECK(tfrdv_verbs__decode(buf, sizeof buf, &d, dims_out, &why) && d.type == TFRDV_VERBS__CREDIT);
}

static void test_codec_limits(void) {
    uint8_t buf[8192];
    static int64_t dims[TFRDV_VERBS__MAX_RANK + 1];
    tfrdv_verbs__msg m, d;
    const char* why;
    size_t n, cut;
    memset(&m, 0, sizeof m);
    m.type = TFRDV_VERBS__META;
    m.meta.rank = TFRDV_VERBS__MAX_RANK;
    m.meta.dims = dims;
    TT_CHECK(enc(&m, buf, sizeof buf) > 0);
    m.meta.rank = TFRDV_VERBS__MAX_RANK + 1;
    TT_CHECK_EQ_INT(enc(&m, buf, sizeof buf), 0); /* refused, not truncated */
    m.meta.rank = 2;
    TT_CHECK_EQ_INT(enc(&m, buf, 20), 0);         /* does not fit */
    m.type = TFRDV_VERBS__ERROR;
    m.code = 0;
    TT_CHECK_EQ_INT(enc(&m, buf, sizeof buf), 0); /* OK is not an error */
    m.code = 17;
    TT_CHECK_EQ_INT(enc(&m, buf, sizeof buf), 0);
    m.type = 99;
    TT_CHECK_EQ_INT(enc(&m, buf, sizeof buf), 0);
    /* every truncation of a valid message is rejected */
    memset(&m, 0, sizeof m);
    m.type = TFRDV_VERBS__REQUEST;
    m.flags = TFRDV_VERBS__F_META | TFRDV_VERBS__F_BUFFER;
    m.meta.rank = 2;
    m.meta.dims = dims;
    m.key = "k";
    m.key_len = 1;
    n = enc(&m, buf, sizeof buf);
    for (cut = 0; cut < n; cut++) TT_CHECK(!tfrdv_verbs__decode(buf, cut, &d, dims_out, &why) && why);
    /* hostile fields */
    buf[0] = 2;
    TT_CHECK(!tfrdv_verbs__decode(buf, n, &d, dims_out, &why));
    TT_CHECK_STR(why, "unknown protocol version");
    buf[0] = 1;
    tfrdv_verbs__put32(buf + 12, 0xffffffffu); /* body length */
    TT_CHECK(!tfrdv_verbs__decode(buf, n, &d, dims_out, &why));
    n = enc(&m, buf, sizeof buf);
    tfrdv_verbs__put32(buf + 16 + 44, 255); /* rank */
    TT_CHECK(!tfrdv_verbs__decode(buf, n, &d, dims_out, &why));
    n = enc(&m, buf, sizeof buf);
    tfrdv_verbs__put64(buf + 16 + 40 + 20, (uint64_t)-1); /* a negative dim */
    TT_CHECK(!tfrdv_verbs__decode(buf, n, &d, dims_out, &why));
    n = enc(&m, buf, sizeof buf);
    tfrdv_verbs__put32(buf + n - 5, 2); /* key length beyond the body */
    TT_CHECK(!tfrdv_verbs__decode(buf, n, &d, dims_out, &why));
    n = enc(&m, buf, sizeof buf);
    tfrdv_verbs__put32(buf + 16 + 28, 8); /* unknown flag */
    TT_CHECK(!tfrdv_verbs__decode(buf, n, &d, dims_out, &why));
}

/* random bytes never crash the decoder and never yield out-of-range fields */
static void test_codec_random(void) {
    uint8_t buf[512];
    tfrdv_verbs__msg d;
    const char* why;
    unsigned s = 12345;
    int i, ok = 0;
    size_t j;
    for (i = 0; i < 200000; i++) {
        size_t n = (size_t)(s % sizeof buf);
        for (j = 0; j < n; j++) {
            s = s * 1103515245u + 12345u;
            buf[j] = (uint8_t)(s >> 16);
        }
        if (n > 1) buf[0] = 1;
        if (n > 2 && (i & 1)) buf[1] = (uint8_t)(1 + i % 8);
        if (n > 16 && (i & 2)) tfrdv_verbs__put32(buf + 12, (uint32_t)(n - 16 - (size_t)(i % 3)));
        if (i % 10 == 0 && n >= 16) { /* a bodiless message: CANCEL, CREDIT, PING, PONG */
            buf[1] = (uint8_t)(5 + i % 4);
            tfrdv_verbs__put32(buf + 12, 0);
        }
        if (tfrdv_verbs__decode(buf, n, &d, dims_out, &why)) {
            ok++;
            TT_CHECK(d.meta.rank <= TFRDV_VERBS__MAX_RANK);
            if (d.key) TT_CHECK(d.key + d.key_len <= (const char*)buf + n);
            if (d.text) TT_CHECK(d.text_len <= 255 && d.text + d.text_len <= (const char*)buf + n);
        } else {
            TT_CHECK(why != 0);
        }
        s = s * 1103515245u + 12345u;
    }
    TT_CHECK(ok > 0); /* some random messages are valid (credits, pings, ...) */
}

static void test_info(void) {
    tfrdv_verbs_info a, b;
    uint8_t buf[TFRDV_VERBS_INFO_MAX];
    tfrdv_status st;
    size_t n;
    int i;
    memset(&a, 0, sizeof a);
    a.qpn = 0x11;
    a.psn = 0xabcdef;
    a.lid = 3;
    for (i = 0; i < 16; i++) a.gid[i] = (uint8_t)i;
    a.mtu = 1024;
    a.ctrl_addr = 0x7f0000001000ULL;
    a.ctrl_rkey = 99;
    a.ctrl_slots = 64;
    a.ctrl_slot_size = 4096;
    a.max_requests = 256;
    strcpy(a.worker, "/job:w/replica:0/task:1");
    n = tfrdv_verbs_info_encode(&a, buf, sizeof buf);
    TT_CHECK_EQ_INT(n, 64 + strlen(a.worker));
    TT_CHECK_EQ_INT(tfrdv_verbs_info_decode(buf, n, &b, &st), TFRDV_OK);
    TT_CHECK(memcmp(&a, &b, sizeof a) == 0);
    TT_CHECK_EQ_INT(tfrdv_verbs_info_encode(&a, buf, 70), 0);
    TT_CHECK_EQ_INT(tfrdv_verbs_info_decode(buf, n - 1, &b, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "worker name length");
    buf[0] ^= 1;
    TT_CHECK_EQ_INT(tfrdv_verbs_info_decode(buf, n, &b, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "magic");
    buf[0] ^= 1;
    tfrdv_verbs__put32(buf + 36, 1000); /* MTU */
    TT_CHECK_EQ_INT(tfrdv_verbs_info_decode(buf, n, &b, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "MTU");
    tfrdv_verbs__put32(buf + 36, 4096);
    tfrdv_verbs__put32(buf + 52, 2); /* ring slots */
    TT_CHECK_EQ_INT(tfrdv_verbs_info_decode(buf, n, &b, &st), TFRDV_INVALID_ARGUMENT);
    tfrdv_verbs__put32(buf + 52, 64);
    TT_CHECK_EQ_INT(tfrdv_verbs_info_decode(buf, n, &b, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(b.mtu, 4096);
}

/* Two sides with N-slot rings exchange messages at random; each side only sends within its
   credits; processed slots are returned by piggybacking or CREDIT messages. Invariants: never
   more messages in a ring than slots, no wedge (everything queued is eventually sent). */
typedef struct side {
    tfrdv_verbs__credits c;
    int queued;       /* normal messages waiting to be sent */
    int in_ring;      /* messages in the PEER's ring not yet processed */
    int credit_due;   /* a CREDIT message is queued */
} side;
static int sim_send(side* s, side* peer, int type, uint32_t* carried) {
    if (!tfrdv_verbs__credits_can_send(&s->c, type)) return 0;
    *carried = tfrdv_verbs__credits_take(&s->c);
    (void)peer;
    s->in_ring++;
    return 1;
}
static void test_credits(void) {
    enum { N = 8 };
    side a, b;
    side* sd[2];
    unsigned r = 7;
    int step, sent = 0, total = 0, maxring = 0;
    /* pending in flight: carried credits per message, FIFO per direction */
    uint32_t fifo[2][N + 1];
    int head[2] = {0, 0}, cnt[2] = {0, 0};
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    tfrdv_verbs__credits_init(&a.c, N, N);
    tfrdv_verbs__credits_init(&b.c, N, N);
    sd[0] = &a;
    sd[1] = &b;
    for (step = 0; step < 200000; step++) {
        int who, peer;
        r = r * 1103515245u + 12345u;
        who = (int)((r >> 16) & 1);
        peer = 1 - who;
        switch ((r >> 20) % 3) {
        case 0: /* the application queues a message */
            if (step < 150000) {
                sd[who]->queued++;
                total++;
            }
            break;
        case 1: /* try to send: credits first, then queued messages */
        {
            uint32_t carried;
            if (sd[who]->credit_due && sim_send(sd[who], sd[peer], TFRDV_VERBS__CREDIT, &carried)) {
                sd[who]->credit_due = 0;
                fifo[who][(head[who] + cnt[who]) % (N + 1)] = carried;
                cnt[who]++;
            } else if (sd[who]->queued && sim_send(sd[who], sd[peer], 1, &carried)) {
                sd[who]->queued--;
                sent++;
                fifo[who][(head[who] + cnt[who]) % (N + 1)] = carried;
                cnt[who]++;
            }
            break;
        }
        default: /* the peer processes one slot of who's messages */
            if (cnt[who]) {
                uint32_t carried = fifo[who][head[who]];
                head[who] = (head[who] + 1) % (N + 1);
                cnt[who]--;
                sd[who]->in_ring--;
                TT_CHECK(tfrdv_verbs__credits_return(&sd[peer]->c, carried)); /* credits back to peer's tx */
                if (tfrdv_verbs__credits_owe(&sd[peer]->c)) sd[peer]->credit_due = 1;
            }
        }
        if (cnt[0] > maxring) maxring = cnt[0];
        if (cnt[1] > maxring) maxring = cnt[1];
        TT_CHECK(cnt[0] <= N && cnt[1] <= N);
        TT_CHECK(a.c.tx <= N && b.c.tx <= N);
    }
    /* drain: keep going with sends and processing only */
    for (step = 0; step < 100000 && (a.queued || b.queued || cnt[0] || cnt[1]); step++) {
        int who = step & 1, peer = 1 - who;
        uint32_t carried;
        if (cnt[who]) {
            carried = fifo[who][head[who]];
            head[who] = (head[who] + 1) % (N + 1);
            cnt[who]--;
            TT_CHECK(tfrdv_verbs__credits_return(&sd[peer]->c, carried));
            if (tfrdv_verbs__credits_owe(&sd[peer]->c)) sd[peer]->credit_due = 1;
        }
        if (sd[who]->credit_due && sim_send(sd[who], sd[peer], TFRDV_VERBS__CREDIT, &carried)) {
            sd[who]->credit_due = 0;
            fifo[who][(head[who] + cnt[who]) % (N + 1)] = carried;
            cnt[who]++;
        } else if (sd[who]->queued && sim_send(sd[who], sd[peer], 1, &carried)) {
            sd[who]->queued--;
            sent++;
            fifo[who][(head[who] + cnt[who]) % (N + 1)] = carried;
            cnt[who]++;
        }
    }
    TT_CHECK_EQ_INT(sent, total); /* no wedge */
    TT_CHECK(maxring == N);       /* the rings were actually full at times */
    /* a peer returning more than its ring holds is a protocol error */
    TT_CHECK(!tfrdv_verbs__credits_return(&a.c, N + 1));
    /* the last credit is kept for CREDIT messages */
    tfrdv_verbs__credits_init(&a.c, 4, 4);
    a.c.tx = 1;
    TT_CHECK(!tfrdv_verbs__credits_can_send(&a.c, TFRDV_VERBS__REQUEST));
    TT_CHECK(!tfrdv_verbs__credits_can_send(&a.c, TFRDV_VERBS__CREDIT)); /* nothing owed */
    tfrdv_verbs__credits_owe(&a.c);
    TT_CHECK(tfrdv_verbs__credits_can_send(&a.c, TFRDV_VERBS__CREDIT));
}

/* metadata cache + the sender's "can I write straight into the advertised buffer" decision */
static void test_meta_rerequest(void) {
    tfrdv_verbs__mcache c;
    tfrdv_verbs__meta m, g;
    int64_t d1[2] = {4, 4}, d2[2] = {2, 8}, out[TFRDV_VERBS__MAX_RANK];
    c.n = 8;
    c.e = (tfrdv_verbs__mentry*)calloc(c.n, sizeof *c.e);
    memset(&m, 0, sizeof m);
    TT_CHECK(!tfrdv_verbs__mc_get(&c, "k", 1, &g, out)); /* first fetch: no buffer, METADATA answer */
    m.dtype = 1;
    m.rank = 2;
    m.size = 64;
    m.dims = d1;
    tfrdv_verbs__mc_put(&c, "k", 1, &m);
    TT_CHECK(tfrdv_verbs__mc_get(&c, "k", 1, &g, out));
    TT_CHECK(g.dtype == 1 && g.rank == 2 && g.size == 64 && g.dims[1] == 4);
    /* same layout: write directly; shape or dtype changed: METADATA, RE-REQUEST */
    TT_CHECK(tfrdv_verbs__meta_same(&g, 1, 2, d1, 64));
    TT_CHECK(!tfrdv_verbs__meta_same(&g, 1, 2, d2, 64));
    TT_CHECK(!tfrdv_verbs__meta_same(&g, 3, 2, d1, 64));
    TT_CHECK(!tfrdv_verbs__meta_same(&g, 1, 1, d1, 64));
    m.dims = d2;
    tfrdv_verbs__mc_put(&c, "k", 1, &m); /* the re-request updates the cache */
    TT_CHECK(tfrdv_verbs__mc_get(&c, "k", 1, &g, out) && g.dims[0] == 2);
    TT_CHECK(!tfrdv_verbs__mc_get(&c, "kk", 2, &g, out));
    m.is_dead = 1;
    tfrdv_verbs__mc_put(&c, "d", 1, &m); /* dead values are not remembered */
    TT_CHECK(!tfrdv_verbs__mc_get(&c, "d", 1, &g, out));
    tfrdv_verbs__mc_free(&c);
}

/* registration cache with a fake registrar */
static int regs, deregs, fail_next;
static void* fake_reg(void* user, void* addr, size_t len, uint32_t* lkey, uint32_t* rkey) {
    (void)user;
    (void)len;
    if (fail_next) {
        fail_next = 0;
        errno = ENOMEM;
        return 0;
    }
    regs++;
    *lkey = *rkey = (uint32_t)(uintptr_t)addr;
    return addr;
}
static void fake_dereg(void* user, void* mr) {
    (void)user;
    (void)mr;
    deregs++;
}
static void test_reg_cache(void) {
    tfrdv_verbs__rcache c;
    tfrdv_verbs__reg *a, *b, *e;
    tfrdv_status st;
    static char mem[1 << 20];
    char* base = (char*)(((uintptr_t)mem + 4095) & ~(uintptr_t)4095);
    memset(&c, 0, sizeof c);
    c.max_bytes = 64 * 1024;
    c.reg = fake_reg;
    c.dereg = fake_dereg;
    regs = deregs = 0;
    /* transient registrations: dropped with their last reference (default) */
    a = tfrdv_verbs__rc_get(&c, base + 100, 5000, 0, &st);
    TT_CHECK(a && a->lo == (uintptr_t)base && a->hi == (uintptr_t)base + 8192 && regs == 1);
    b = tfrdv_verbs__rc_get(&c, base + 200, 100, 0, &st); /* inside: a hit */
    TT_CHECK(b == a && a->refs == 2 && regs == 1 && c.hits == 1);
    tfrdv_verbs__rc_put(&c, b);
    TT_CHECK_EQ_INT(deregs, 0);
    tfrdv_verbs__rc_put(&c, a);
    TT_CHECK_EQ_INT(deregs, 1);
    TT_CHECK_EQ_INT(c.bytes, 0);
    /* keep_idle: idle entries stay, LRU-evicted under the byte bound, never while in use */
    c.keep_idle = 1;
    a = tfrdv_verbs__rc_get(&c, base, 32768, 0, &st);
    b = tfrdv_verbs__rc_get(&c, base + 32768, 16384, 0, &st);
    TT_CHECK(a && b && c.bytes == 49152);
    tfrdv_verbs__rc_put(&c, a); /* idle */
    e = tfrdv_verbs__rc_get(&c, base + 65536, 32768, 0, &st); /* needs a evicted */
    TT_CHECK(e && c.evictions == 1 && c.bytes == 49152);
    e->refs++;
    TT_CHECK(!tfrdv_verbs__rc_get(&c, base + 131072, 32768, 0, &st)); /* everything in use: refused */
    TT_CHECK_EQ_INT(st.code, TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_CONTAINS(st.msg, "reg_cache_max_bytes");
    e->refs--;
    tfrdv_verbs__rc_put(&c, e);
    /* invalidate: idle goes now, busy dies at its last put and is never found again */
    tfrdv_verbs__rc_invalidate(&c, base + 65536, 10);
    TT_CHECK(tfrdv_verbs__rc_get(&c, base + 65536, 100, 0, &st) != e || 1);
    tfrdv_verbs__rc_invalidate(&c, base, 1 << 19);
    TT_CHECK(b->dead == 1);
    a = tfrdv_verbs__rc_get(&c, base + 32768, 100, 0, &st);
    TT_CHECK(a && a != b);
    tfrdv_verbs__rc_put(&c, b);
    tfrdv_verbs__rc_put(&c, a);
    /* pinned (tfrdv_verbs_register): survives puts, not evicted */
    c.keep_idle = 0;
    tfrdv_verbs__rc_clear(&c);
    a = tfrdv_verbs__rc_get(&c, base, 65536, 1, &st);
    TT_CHECK(a && a->pinned && a->refs == 0);
    b = tfrdv_verbs__rc_get(&c, base + 4096, 8192, 0, &st);
    TT_CHECK(b == a && a->refs == 1);
    tfrdv_verbs__rc_put(&c, b);
    TT_CHECK(c.head == a);
    /* a device refusal names the memlock limit */
    tfrdv_verbs__rc_clear(&c);
    fail_next = 1;
    TT_CHECK(!tfrdv_verbs__rc_get(&c, base, 4096, 0, &st));
    TT_CHECK_CONTAINS(st.msg, "RLIMIT_MEMLOCK");
    TT_CHECK_EQ_INT(regs, deregs);
}

#ifdef TT_HAVE_IBV
/* no libibverbs / no device: UNAVAILABLE naming what is missing, no crash, nothing leaked */
static void test_unavailable(void) {
    tfrdv_verbs_config c = tfrdv_verbs_config_init();
    tfrdv_verbs* v = 0;
    tfrdv_status st;
    tfrdv_code rc;
    c.worker_name = "/job:w/replica:0/task:0";
    c.library = "libtfrdv-no-such-verbs.so.1";
    TT_CHECK_EQ_INT(tfrdv_verbs_create(&c, &v, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, "libtfrdv-no-such-verbs.so.1");
    TT_CHECK(v == 0);
    c.library = 0;
    c.device = "tfrdv_no_such_device0";
    rc = tfrdv_verbs_create(&c, &v, &st);
    TT_CHECK_EQ_INT(rc, TFRDV_UNAVAILABLE); /* no library, no kernel support, or no such device */
    TT_CHECK_CONTAINS(st.msg, "RDMA unavailable");
    printf("    (here: %s)\n", st.msg);
    c.device = 0;
    c.ctrl_slots = 2;
    TT_CHECK_EQ_INT(tfrdv_verbs_create(&c, &v, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_verbs_create(0, &v, &st), TFRDV_INVALID_ARGUMENT);
}
#endif

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_codec_roundtrip);
    TT_RUN(test_codec_limits);
    TT_RUN(test_codec_random);
    TT_RUN(test_info);
    TT_RUN(test_credits);
    TT_RUN(test_meta_rerequest);
    TT_RUN(test_reg_cache);
#ifdef TT_HAVE_IBV
    TT_RUN(test_unavailable);
#endif
    return TT_MAIN_END();
}
