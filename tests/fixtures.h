/* fixtures.h - the fixtures the test suites share: static functions only, C99, no allocation of
   their own except the counting allocator. Include after tt.h and tfrdv.h (with its
   implementation). Every function is FX_FN (static, marked unused), so a suite that uses only
   part of this file compiles warning-free.

     counting allocator   fx_alloc, fx_alloc_hooks, FX_CHECK_EMPTY (sized frees checked)
     fake clock           fx_set_now / fx_get_now, fx_hooks (counting allocator + fake clock)
     random numbers       fx_xorshift, fx_shuffle (a fixed permutation)
     cancelling           fx_cancel_shuffled (the newest, the oldest, then a shuffle)
     local rendezvous     tval (a value with an id that counts its releases), tkey (key bytes and
                          their parsed view), rcv (receive recorder), brec (batch recorder),
                          cancel_args
     step manager         fx_value (a value whose payload derives from a seed), fx_key, fx_recv,
                          fx_serve (recorders), mk, stats, key

   The counting allocator and the fake clock need malloc: they are left out of a build with
   TFRDV_NO_MALLOC (test_nothreads.c, which brings its own static arena). Nothing here uses
   threads; the counters are atomic because callbacks may run on any thread. */
#ifndef FIXTURES_H
#define FIXTURES_H
#include <stdio.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define FX_FN static __attribute__((unused))
#else
#define FX_FN static
#endif

#ifndef TFRDV_NO_MALLOC
#include <stdlib.h>

/* ---- counting allocator: live blocks/bytes, and a check that every sized free gives the size
   that was allocated (a header before each block holds its size and a magic number) ---- */
typedef struct fx_alloc {
    long allocs, frees;          /* successful allocations and frees */
    long live_blocks, live_bytes;
    long bad_frees;              /* size differs from the allocation, or not a live block of ours */
} fx_alloc;
#define FX_HDR 16
#define FX_MAGIC 0x7fd1u
FX_FN void* fx_alloc_fn(void* u, size_t n) {
    fx_alloc* a = (fx_alloc*)u;
    unsigned char* p = (unsigned char*)malloc(n + FX_HDR);
    size_t hdr[2];
    if (!p) return 0;
    hdr[0] = n;
    hdr[1] = FX_MAGIC;
    memcpy(p, hdr, sizeof hdr);
    __atomic_add_fetch(&a->allocs, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&a->live_blocks, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&a->live_bytes, (long)n, __ATOMIC_SEQ_CST);
    return p + FX_HDR;
}
FX_FN void fx_free_fn(void* u, void* ptr, size_t n) {
    fx_alloc* a = (fx_alloc*)u;
    unsigned char* p;
    size_t hdr[2];
    if (!ptr) return;
    p = (unsigned char*)ptr - FX_HDR;
    memcpy(hdr, p, sizeof hdr);
    if (hdr[0] != n || hdr[1] != FX_MAGIC) {
        printf("    sized free mismatch: block of %zu freed as %zu (magic %zx)\n", hdr[0], n, hdr[1]);
        __atomic_add_fetch(&a->bad_frees, 1, __ATOMIC_SEQ_CST);
    }
    hdr[1] = 0;
    memcpy(p, hdr, sizeof hdr);
    __atomic_add_fetch(&a->frees, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&a->live_blocks, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&a->live_bytes, (long)hdr[0], __ATOMIC_SEQ_CST);
    free(p);
}
FX_FN long fx_live(fx_alloc* a) { return __atomic_load_n(&a->live_blocks, __ATOMIC_SEQ_CST); }
FX_FN long fx_live_bytes(fx_alloc* a) { return __atomic_load_n(&a->live_bytes, __ATOMIC_SEQ_CST); }
/* hooks with the counting allocator only (the counters are not reset) */
FX_FN tfrdv_hooks fx_alloc_hooks(fx_alloc* a) {
    tfrdv_hooks h;
    memset(&h, 0, sizeof h);
    h.allocator.alloc_fn = fx_alloc_fn;
    h.allocator.free_fn = fx_free_fn;
    h.allocator.user = a;
    return h;
}
/* everything allocated was freed, each block with its own size (a macro: a failure names the
   line of the test) */
#define FX_CHECK_EMPTY(a)                              \
    do {                                               \
        TT_CHECK_EQ_INT(fx_live(a), 0);                \
        TT_CHECK_EQ_INT(fx_live_bytes(a), 0);          \
        TT_CHECK_EQ_INT((a)->bad_frees, 0);            \
        TT_CHECK_EQ_INT((a)->allocs, (a)->frees);      \
    } while (0)

/* ---- fake clock: tests set fx_now and call tfrdv_mgr_expire(mgr, fx_now) ---- */
static int64_t fx_now_ns;
FX_FN int64_t fx_clock_fn(void* u) {
    (void)u;
    return __atomic_load_n(&fx_now_ns, __ATOMIC_SEQ_CST);
}
FX_FN void fx_set_now(int64_t t) { __atomic_store_n(&fx_now_ns, t, __ATOMIC_SEQ_CST); }
FX_FN int64_t fx_get_now(void) { return __atomic_load_n(&fx_now_ns, __ATOMIC_SEQ_CST); }

/* hooks with the counting allocator (a may be NULL: built-in) and the fake clock */
FX_FN tfrdv_hooks fx_hooks(fx_alloc* a) {
    tfrdv_hooks h;
    if (a) h = fx_alloc_hooks(a);
    else memset(&h, 0, sizeof h);
    h.clock.now_ns = fx_clock_fn;
    return h;
}
/* a step-manager config for `worker` with incarnation `inc`, the counting allocator and fake clock */
FX_FN tfrdv_mgr_config fx_mgr_config(const char* worker, uint64_t inc, fx_alloc* a) {
    tfrdv_mgr_config c = tfrdv_mgr_config_init();
    c.hooks = fx_hooks(a);
    c.worker_name = worker;
    c.incarnation = inc;
    return c;
}
#endif /* TFRDV_NO_MALLOC */

/* ---- xorshift64: never returns 0 for a non-zero state ---- */
FX_FN uint64_t fx_xorshift(uint64_t* s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

/* =============================================================================================
   Local rendezvous: values told apart by an id, keys, receive and batch recorders
   ============================================================================================= */
/* a value that counts its releases */
typedef struct tval {
    tfrdv_value v;
    int id;
    int releases; /* atomic */
} tval;
FX_FN void tval_hook(tfrdv_value* v) { __atomic_add_fetch(&((tval*)v->user)->releases, 1, __ATOMIC_SEQ_CST); }
FX_FN void tval_init(tval* t, int id) {
    memset(t, 0, sizeof *t);
    t->id = id;
    t->v.dtype = 1;
    t->v.release = tval_hook;
    t->v.user = t;
}
FX_FN int rel(tval* t) { return __atomic_load_n(&t->releases, __ATOMIC_SEQ_CST); }
FX_FN int vid(tfrdv_value* v) { return v ? ((tval*)v->user)->id : -1; }

/* a key: its bytes and the parsed view into them (never copy a tkey) */
typedef struct tkey {
    char buf[192];
    tfrdv_parsed_key pk;
} tkey;
FX_FN void tkey_make(tkey* k, const char* src, uint64_t inc, const char* dst, const char* edge) {
    tfrdv_frame_iter fi;
    size_t len = 0;
    tfrdv_status st;
    fi.frame_id = 0;
    fi.iter_id = 0;
    TT_CHECK_EQ_INT(tfrdv_key_create(src, inc, dst, edge, fi, k->buf, sizeof k->buf, &len, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_key_parse(k->buf, len, &k->pk, &st), TFRDV_OK);
}

/* a receiver that records its completion */
typedef struct rcv rcv;
struct rcv {
    int calls;
    tfrdv_code code;
    char msg[TFRDV_STATUS_MSG_MAX];
    tfrdv_value* value;
    int id, is_dead, seq, phase;
    tfrdv_args sa, ra;
    int keep;              /* 1: the test releases the value; 0: released inside the callback */
    void (*then)(rcv* self); /* optional action inside the callback (after recording) */
    void* ctx;
};
static int g_seq, g_phase; /* rcv.seq: completion order; rcv.phase: g_phase when it completed */
FX_FN void rcv_init(rcv* r) {
    memset(r, 0, sizeof *r);
    r->id = -2;
}
FX_FN void rcv_done(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                    tfrdv_value* v, int dead) {
    rcv* r = (rcv*)user;
    r->calls++;
    r->code = st->code;
    snprintf(r->msg, sizeof r->msg, "%s", st->msg);
    r->value = v;
    r->id = vid(v);
    r->is_dead = dead;
    r->sa = *sa;
    r->ra = *ra;
    r->seq = ++g_seq;
    r->phase = g_phase;
    if (r->then) r->then(r);
    if (!r->keep) tfrdv_value_release(v);
}

/* a batch receiver that records its completion */
typedef struct brec brec;
struct brec {
    int calls;
    tfrdv_code code;
    char msg[TFRDV_STATUS_MSG_MAX];
    size_t n;
    tfrdv_value* vals[8];
    int dead[8];
    int keep;
    void (*then)(brec* self);
    void* ctx;
};
FX_FN void batch_done(void* user, const tfrdv_status* st, size_t n, tfrdv_value** values, int* is_dead) {
    brec* b = (brec*)user;
    size_t i;
    b->calls++;
    b->code = st->code;
    snprintf(b->msg, sizeof b->msg, "%s", st->msg);
    b->n = n;
    for (i = 0; i < n && i < 8; i++) {
        b->vals[i] = values[i];
        b->dead[i] = is_dead ? is_dead[i] : -1;
    }
    if (b->then) b->then(b);
    if (!b->keep)
        for (i = 0; i < n; i++) tfrdv_value_release(values[i]);
}

/* receive args whose only setting is the cancellation manager */
FX_FN tfrdv_args cancel_args(tfrdv_cancel_mgr* cm) {
    tfrdv_args a;
    memset(&a, 0, sizeof a);
    a.cancel = cm;
    return a;
}

/* =============================================================================================
   Step manager and remote receives: payload values, keys, recorders, manager helpers
   ============================================================================================= */
/* ---- test values: release counted, payload derived from a seed ---- */
typedef struct fx_value {
    tfrdv_value v; /* first: the release hook casts back */
    int64_t dims[2];
    unsigned char bytes[24];
    int released; /* times the release hook ran */
    int seed;
} fx_value;
FX_FN void fx_value_released(tfrdv_value* v) { __atomic_add_fetch(&((fx_value*)(void*)v)->released, 1, __ATOMIC_SEQ_CST); }
FX_FN unsigned char fx_byte(int seed, int i) { return (unsigned char)((seed * 31 + i * 7 + 1) & 0xff); }
FX_FN tfrdv_value* fx_value_init(fx_value* x, int seed) {
    int i;
    memset(x, 0, sizeof *x);
    x->seed = seed;
    x->dims[0] = 2;
    x->dims[1] = 3;
    for (i = 0; i < (int)sizeof x->bytes; i++) x->bytes[i] = fx_byte(seed, i);
    x->v.dtype = 3; /* DT_INT32 */
    x->v.rank = 2;
    x->v.dims = x->dims;
    x->v.data = x->bytes;
    x->v.size = sizeof x->bytes;
    x->v.release = fx_value_released;
    return &x->v;
}
FX_FN int fx_released(fx_value* x) { return __atomic_load_n(&x->released, __ATOMIC_SEQ_CST); }

/* ---- keys: the buffer and the parsed views live together ---- */
typedef struct fx_key {
    char buf[320];
    size_t len;
    tfrdv_parsed_key pk;
} fx_key;
/* src/dst are full device names; returns 1 on success */
FX_FN int fx_key_make(fx_key* k, const char* src, uint64_t inc, const char* dst, const char* edge) {
    tfrdv_frame_iter fi;
    fi.frame_id = 0;
    fi.iter_id = 0;
    if (tfrdv_key_create(src, inc, dst, edge, fi, k->buf, sizeof k->buf, &k->len, 0) != TFRDV_OK) return 0;
    return tfrdv_key_parse(k->buf, k->len, &k->pk, 0) == TFRDV_OK;
}
/* the same, a failure is a check failure */
FX_FN void key(fx_key* k, const char* src, uint64_t inc, const char* dst, const char* edge) {
    int ok = fx_key_make(k, src, inc, dst, edge);
    TT_CHECK(ok);
}

/* ---- receive recorder: what a recv callback saw; it releases the value ---- */
typedef struct fx_recv {
    int calls;
    tfrdv_status st;
    int dead, has_value, dtype, rank;
    int64_t dims[4];
    uint64_t size;
    unsigned char bytes[24];
    const void* value_ptr; /* identity only: never dereferenced after the callback */
    const void* data_ptr;
    int keep;              /* 1: do not release (the test takes fx_recv.kept) */
    tfrdv_value* kept;
} fx_recv;
FX_FN void fx_recv_done(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                        tfrdv_value* v, int dead) {
    fx_recv* r = (fx_recv*)u;
    int i;
    (void)sa;
    (void)ra;
    r->calls++;
    r->st = *st; /* code, detail and message */
    r->dead = dead;
    r->has_value = v != 0;
    r->value_ptr = v;
    if (v) {
        r->data_ptr = v->data;
        r->dtype = v->dtype;
        r->rank = v->rank;
        for (i = 0; i < v->rank && i < 4; i++) r->dims[i] = v->dims[i];
        r->size = v->size;
        if (v->data) memcpy(r->bytes, v->data, v->size < sizeof r->bytes ? (size_t)v->size : sizeof r->bytes);
    }
    if (r->keep) r->kept = v;
    else tfrdv_value_release(v);
}
/* bytes and shape of fx_value seed `seed` arrived intact */
FX_FN int fx_recv_matches(const fx_recv* r, int seed) {
    int i;
    if (!r->has_value || r->dtype != 3 || r->rank != 2 || r->dims[0] != 2 || r->dims[1] != 3 || r->size != 24) return 0;
    for (i = 0; i < 24; i++)
        if (r->bytes[i] != fx_byte(seed, i)) return 0;
    return 1;
}

/* ---- serve recorder (tfrdv_mgr_serve's done) ---- */
typedef struct fx_serve {
    int calls;
    tfrdv_status st;
    const void* value_ptr;
    int dead;
    int keep;
    tfrdv_value* kept;
    tfrdv_args send_args;
} fx_serve;
FX_FN void fx_serve_done(void* u, const tfrdv_status* st, const tfrdv_args* sa, tfrdv_value* v, int dead) {
    fx_serve* s = (fx_serve*)u;
    s->calls++;
    s->send_args = *sa;
    s->st = *st; /* code, detail and message */
    s->value_ptr = v;
    s->dead = dead;
    if (s->keep) s->kept = v;
    else tfrdv_value_release(v);
}

/* ---- cancelling in a shuffled order ---- */
/* order[0..n) becomes a permutation of 0..n-1 fixed by seed (Fisher-Yates) */
FX_FN void fx_shuffle(int* order, int n, unsigned seed) {
    int i;
    for (i = 0; i < n; i++) order[i] = i;
    for (i = n - 1; i > 0; i--) {
        int j, t;
        seed = seed * 1103515245u + 12345u;
        j = (int)((seed >> 8) % (unsigned)(i + 1));
        t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}
/* cancels cm[n-1] and cm[0] (the newest, the oldest), then cm[order[i]] for i < m, with order a
   shuffle of 0..n-1 by seed; gone[i] = 1 for each one cancelled */
FX_FN void fx_cancel_shuffled(tfrdv_cancel_mgr** cm, int n, int m, unsigned seed, int* order, char* gone) {
    int i;
    fx_shuffle(order, n, seed);
    tfrdv_cancel_start(cm[n - 1]);
    tfrdv_cancel_start(cm[0]);
    gone[n - 1] = gone[0] = 1;
    for (i = 0; i < m; i++) {
        tfrdv_cancel_start(cm[order[i]]);
        gone[order[i]] = 1;
    }
}

/* ---- pending introspection: how many items of one kind a rendezvous holds ---- */
typedef struct fx_pending_count {
    tfrdv_pending_kind kind;
    size_t n;
} fx_pending_count;
FX_FN void fx_pending_add(void* u, int64_t step, tfrdv_pending_kind kind, const char* key, size_t len, size_t count) {
    fx_pending_count* c = (fx_pending_count*)u;
    (void)step;
    (void)key;
    (void)len;
    if (kind == c->kind) c->n += count;
}
FX_FN size_t pending_of(tfrdv_rendezvous* r, tfrdv_pending_kind kind) {
    fx_pending_count c;
    c.kind = kind;
    c.n = 0;
    tfrdv_pending(r, fx_pending_add, &c);
    return c.n;
}

/* ---- managers ---- */
/* the manager, or NULL (the reason is printed) */
FX_FN tfrdv_mgr* mk(const tfrdv_mgr_config* c) {
    tfrdv_mgr* m = 0;
    tfrdv_status st;
    if (tfrdv_mgr_create(c, &m, &st) != TFRDV_OK) printf("    tfrdv_mgr_create: %s\n", st.msg);
    return m;
}
FX_FN tfrdv_mgr_stats stats(tfrdv_mgr* m) {
    tfrdv_mgr_stats s;
    memset(&s, 0, sizeof s);
    tfrdv_mgr_get_stats(m, &s);
    return s;
}
#endif
