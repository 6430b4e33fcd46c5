/* test_helpers.c - the convenience helpers of tfrdv.h (>>helpers): values with their own storage
   (tfrdv_value_new, with and without an allocator), tfrdv_value_make, owned keys (tfrdv_key_make,
   tfrdv_key_from, tfrdv_key_make_frame), TFRDV_STR_FMT / TFRDV_STR_ARG, and the
   two-worker shortcuts (tfrdv_loopback_add_worker, tfrdv_mgr_start_step), the trace event as
   Chrome/Perfetto JSON (tfrdv_trace_json). Every allocation goes
   through the counting allocator of fixtures.h, which must be empty afterwards; out of memory is
   injected by an allocator that fails the n-th allocation. */
#define _POSIX_C_SOURCE 200809L /* tt.h comes first (it counts TFRDV_ASSERTs): its stdio.h must
                                   already see the POSIX level tfrdv.h's implementation needs */
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"

#define SRC "/job:w/replica:0/task:0/device:CPU:0"
#define DST "/job:w/replica:0/task:0/device:GPU:0"
#define PS "/job:ps/replica:0/task:0"
#define WK "/job:worker/replica:0/task:0"

/* ---- an allocator that fails its n-th allocation (1-based; 0 never fails), counting the rest ---- */
typedef struct fail_alloc {
    fx_alloc counted;
    long n, calls;
} fail_alloc;
static void* fail_alloc_fn(void* u, size_t size) {
    fail_alloc* f = (fail_alloc*)u;
    if (++f->calls == f->n) return NULL;
    return fx_alloc_fn(&f->counted, size);
}
static void fail_free_fn(void* u, void* p, size_t size) { fx_free_fn(&((fail_alloc*)u)->counted, p, size); }
static tfrdv_allocator fail_allocator(fail_alloc* f, long n) {
    tfrdv_allocator a;
    memset(f, 0, sizeof *f);
    f->n = n;
    a.alloc_fn = fail_alloc_fn;
    a.free_fn = fail_free_fn;
    a.user = f;
    return a;
}
static tfrdv_allocator counting_allocator(fx_alloc* a) { return fx_alloc_hooks(a).allocator; }
static const tfrdv_frame_iter top = {0, 0};

/* ---- values ---- */
static void test_value_new_copies_dims_and_data(void) {
    fx_alloc a = {0};
    tfrdv_allocator al = counting_allocator(&a);
    int64_t dims[2] = {2, 3};
    float data[6] = {1, 2, 3, 4, 5, 6};
    tfrdv_value* v = tfrdv_value_new(&al, TFRDV_DT_FLOAT, 2, dims, data, sizeof data);
    TT_CHECK(v != NULL);
    if (!v) return;
    dims[0] = 99; /* copies, not views */
    data[0] = 99;
    TT_CHECK_EQ_INT(v->dtype, TFRDV_DT_FLOAT);
    TT_CHECK_EQ_INT(v->rank, 2);
    TT_CHECK_EQ_INT(v->dims[0], 2);
    TT_CHECK_EQ_INT(v->dims[1], 3);
    TT_CHECK_EQ_INT(v->size, sizeof data);
    TT_CHECK(((float*)v->data)[0] == 1.0f && ((float*)v->data)[5] == 6.0f);
    TT_CHECK_EQ_INT((uintptr_t)v->data % 16, 0);
    TT_CHECK(v->user == NULL);
    TT_CHECK_EQ_INT(v->extra_refs, 0);
    TT_CHECK_EQ_INT(fx_live(&a), 1); /* value, dims and bytes: one block */
    tfrdv_value_retain(v);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(fx_live(&a), 1); /* a reference is left */
    tfrdv_value_release(v);
    FX_CHECK_EMPTY(&a);
}

static void test_value_new_zeroes_without_data(void) {
    int64_t dims[1] = {1000};
    size_t i, nonzero = 0;
    tfrdv_value* v = tfrdv_value_new(NULL, TFRDV_DT_UINT8, 1, dims, NULL, 1000);
    tfrdv_value* s = tfrdv_value_new(NULL, TFRDV_DT_INT64, 0, NULL, NULL, 8); /* a scalar: rank 0 */
    tfrdv_value* e = tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 1, dims, NULL, 0); /* no bytes at all */
    TT_CHECK(v != NULL && s != NULL && e != NULL);
    if (!v || !s || !e) return;
    for (i = 0; i < 1000; i++) nonzero += ((unsigned char*)v->data)[i] != 0;
    TT_CHECK_EQ_INT(nonzero, 0);
    TT_CHECK_EQ_INT(s->rank, 0);
    TT_CHECK(s->dims != NULL); /* never NULL, even for a scalar */
    TT_CHECK_EQ_INT(*(int64_t*)s->data, 0);
    TT_CHECK_EQ_INT(e->size, 0);
    TT_CHECK(e->data != NULL);
    tfrdv_value_release(v);
    tfrdv_value_release(s);
    tfrdv_value_release(e);
}

static void test_value_new_rejects(void) {
    fx_alloc a = {0};
    tfrdv_allocator half = counting_allocator(&a);
    int64_t dims[1] = {4};
    half.free_fn = NULL; /* alloc without free: not an allocator */
    TT_CHECK(tfrdv_value_new(NULL, TFRDV_DT_FLOAT, -1, dims, NULL, 16) == NULL);
    TT_CHECK(tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 1, NULL, NULL, 16) == NULL);
    TT_CHECK(tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 1, dims, NULL, UINT64_MAX) == NULL);
    TT_CHECK(tfrdv_value_new(&half, TFRDV_DT_FLOAT, 1, dims, NULL, 16) == NULL);
    FX_CHECK_EMPTY(&a);
    TT_CHECK_EQ_INT(a.allocs, 0);
}

static void test_value_new_out_of_memory(void) {
    fail_alloc f;
    tfrdv_allocator al = fail_allocator(&f, 1);
    int64_t dims[1] = {4};
    TT_CHECK(tfrdv_value_new(&al, TFRDV_DT_FLOAT, 1, dims, NULL, 16) == NULL);
    TT_CHECK_EQ_INT(f.calls, 1);
    FX_CHECK_EMPTY(&f.counted);
}

/* the common path: a value with its own storage goes through a rendezvous and is freed by the
   receiver's release, or by destroy when nobody receives it */
static void test_value_new_through_a_rendezvous(void) {
    fx_alloc a = {0};
    tfrdv_allocator al = counting_allocator(&a);
    tfrdv_rendezvous* r = NULL;
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_value* got = NULL;
    int dead = 1;
    int64_t dims[1] = {2};
    int32_t data[2] = {7, 8};
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, SRC, 1, DST, "edge_1_x", top, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_create(NULL, &r, &st), TFRDV_OK);
    if (!r) return;
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.parsed, NULL, tfrdv_value_new(&al, TFRDV_DT_INT32, 1, dims, data, 8), 0, &st),
                    TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.parsed, NULL, 0, &got, &dead, &st), TFRDV_OK);
    TT_CHECK(got != NULL && !dead);
    if (got) TT_CHECK(((int32_t*)got->data)[0] == 7 && ((int32_t*)got->data)[1] == 8 && got->dims[0] == 2);
    TT_CHECK_EQ_INT(fx_live(&a), 1);
    tfrdv_value_release(got);
    TT_CHECK_EQ_INT(fx_live(&a), 0);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.parsed, NULL, tfrdv_value_new(&al, TFRDV_DT_INT32, 1, dims, data, 8), 0, &st),
                    TFRDV_OK);
    tfrdv_destroy(r); /* releases the buffered value */
    FX_CHECK_EMPTY(&a);
}

static int make_releases;
static void count_release(tfrdv_value* v) { make_releases += v->user == &make_releases; }
static void test_value_make(void) {
    int64_t dims[1] = {3};
    float data[3] = {1, 2, 3};
    tfrdv_value v = tfrdv_value_make(TFRDV_DT_FLOAT, 1, dims, data, sizeof data, count_release, &make_releases);
    TT_CHECK_EQ_INT(v.dtype, TFRDV_DT_FLOAT);
    TT_CHECK_EQ_INT(v.rank, 1);
    TT_CHECK(v.dims == dims && v.data == data); /* not copied */
    TT_CHECK_EQ_INT(v.size, sizeof data);
    TT_CHECK(v.user == &make_releases);
    TT_CHECK_EQ_INT(v.extra_refs, 0);
    make_releases = 0;
    tfrdv_value_retain(&v);
    tfrdv_value_release(&v);
    TT_CHECK_EQ_INT(make_releases, 0);
    tfrdv_value_release(&v);
    TT_CHECK_EQ_INT(make_releases, 1);
    v = tfrdv_value_make(TFRDV_DT_INVALID, 0, NULL, NULL, 0, NULL, NULL); /* static storage: no hook */
    tfrdv_value_release(&v);
    TT_CHECK(v.release == NULL && v.data == NULL && v.size == 0);
}

/* ---- printing a tfrdv_str ---- */
static void test_str_fmt(void) {
    tfrdv_key k;
    char out[128];
    tfrdv_str s;
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, SRC, 1, DST, "edge_9_y", top, NULL), TFRDV_OK);
    snprintf(out, sizeof out, "[" TFRDV_STR_FMT "|" TFRDV_STR_FMT "]", TFRDV_STR_ARG(k.parsed.edge_name),
             TFRDV_STR_ARG(k.parsed.frame_iter));
    TT_CHECK_STR(out, "[edge_9_y|0:0]");
    s.ptr = "abcdef";
    s.len = 3; /* not NUL-terminated at len */
    snprintf(out, sizeof out, TFRDV_STR_FMT, TFRDV_STR_ARG(s));
    TT_CHECK_STR(out, "abc");
}

/* ---- owned keys ---- */
static int views_inside(const tfrdv_key* k) {
    const tfrdv_str* parts[5];
    int i;
    parts[0] = &k->parsed.full;
    parts[1] = &k->parsed.src_device;
    parts[2] = &k->parsed.dst_device;
    parts[3] = &k->parsed.edge_name;
    parts[4] = &k->parsed.frame_iter;
    for (i = 0; i < 5; i++)
        if (parts[i]->ptr < k->buf || parts[i]->ptr + parts[i]->len > k->buf + k->len) return 0;
    return k->parsed.full.ptr == k->buf && k->parsed.full.len == k->len && k->buf[k->len] == 0;
}

static void test_key_make_matches_create_and_parse(void) {
    tfrdv_key k;
    tfrdv_parsed_key pk;
    tfrdv_frame_iter fi = {5, -2};
    char buf[256];
    size_t len = 0;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, SRC, 0xabcdef, DST, "edge_1_x", fi, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_key_create(SRC, 0xabcdef, DST, "edge_1_x", fi, buf, sizeof buf, &len, &st), TFRDV_OK);
    TT_CHECK_STR(k.buf, buf);
    TT_CHECK_EQ_INT(k.len, len);
    TT_CHECK_EQ_INT(tfrdv_key_parse(buf, len, &pk, &st), TFRDV_OK);
    TT_CHECK(views_inside(&k));
    TT_CHECK_EQ_INT(k.parsed.hash, pk.hash);
    TT_CHECK_EQ_INT(k.parsed.src_incarnation, 0xabcdef);
    TT_CHECK_EQ_INT(k.parsed.dst.id, 0);
    TT_CHECK(k.parsed.edge_name.len == 8 && memcmp(k.parsed.edge_name.ptr, "edge_1_x", 8) == 0);
    TT_CHECK_STR(k.buf, SRC ";0000000000abcdef;" DST ";edge_1_x;5:-2");
}

static void test_key_make_rejects(void) {
    tfrdv_key k;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, SRC, 1, DST, "", top, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "empty edge name");
    TT_CHECK_EQ_INT(k.len, 0);
    TT_CHECK_STR(k.buf, "");
    TT_CHECK_EQ_INT(k.parsed.full.len, 0);
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, "/job:w/bogus", 1, DST, "e", top, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, SRC, 1, NULL, "e", top, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_key_make(NULL, SRC, 1, DST, "e", top, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "NULL key");
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, SRC, 1, DST, "e", top, NULL), TFRDV_OK); /* st is optional */
}

/* TFRDV_KEY_MAX - 1 bytes of text fit, one more is RESOURCE_EXHAUSTED naming the limit */
static void test_key_too_long(void) {
    tfrdv_key k, base;
    char edge[TFRDV_KEY_MAX + 8];
    size_t fixed, len = 0;
    tfrdv_status st;
    tfrdv_frame_iter big = {UINT64_MAX, INT64_MIN};
    TT_CHECK_EQ_INT(tfrdv_key_create(SRC, 1, DST, "e", top, NULL, 0, &len, NULL), TFRDV_RESOURCE_EXHAUSTED);
    fixed = len - 1; /* everything but the edge name */
    memset(edge, 'e', sizeof edge);
    edge[TFRDV_KEY_MAX - 1 - fixed] = 0;
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, SRC, 1, DST, edge, top, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(k.len, TFRDV_KEY_MAX - 1);
    TT_CHECK(views_inside(&k));
    edge[TFRDV_KEY_MAX - 1 - fixed] = 'e';
    edge[TFRDV_KEY_MAX - fixed] = 0;
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, SRC, 1, DST, edge, top, &st), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_CONTAINS(st.msg, "key too long for a tfrdv_key: 1024 bytes, at most 1023");
    TT_CHECK_EQ_INT(k.len, 0);
    TT_CHECK_STR(k.buf, "");
    /* a frame that makes a fitting key too long */
    edge[TFRDV_KEY_MAX - 1 - fixed] = 0;
    TT_CHECK_EQ_INT(tfrdv_key_make(&base, SRC, 1, DST, edge, top, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_key_make_frame(&k, &base, big, &st), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_CONTAINS(st.msg, "key too long");
    TT_CHECK_EQ_INT(base.len, TFRDV_KEY_MAX - 1); /* base untouched */
    TT_CHECK(views_inside(&base));
    /* text */
    memset(edge, 'x', sizeof edge);
    TT_CHECK_EQ_INT(tfrdv_key_from(&k, edge, TFRDV_KEY_MAX, &st), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_CONTAINS(st.msg, "key too long");
}

static void test_key_from_round_trip(void) {
    tfrdv_key a, b;
    tfrdv_status st;
    tfrdv_frame_iter fi = {3, 4};
    char text[300];
    TT_CHECK_EQ_INT(tfrdv_key_make(&a, SRC, 77, DST, "edge_2_z", fi, &st), TFRDV_OK);
    memcpy(text, a.buf, a.len);
    text[a.len] = '!'; /* not NUL-terminated: len counts */
    TT_CHECK_EQ_INT(tfrdv_key_from(&b, text, a.len, &st), TFRDV_OK);
    TT_CHECK_STR(b.buf, a.buf);
    TT_CHECK(views_inside(&b));
    TT_CHECK_EQ_INT(b.parsed.hash, a.parsed.hash);
    TT_CHECK_EQ_INT(tfrdv_key_from(&b, a.parsed.full.ptr, a.parsed.full.len, &st), TFRDV_OK); /* from a tfrdv_str */
    TT_CHECK_STR(b.buf, a.buf);
    TT_CHECK_EQ_INT(tfrdv_key_from(&b, b.buf, b.len, &st), TFRDV_OK); /* its own text */
    TT_CHECK_STR(b.buf, a.buf);
    TT_CHECK(views_inside(&b));
    TT_CHECK_EQ_INT(tfrdv_key_from(&b, "a;b;c", 5, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "Invalid rendezvous key: a;b;c");
    TT_CHECK_EQ_INT(b.len, 0);
    TT_CHECK_EQ_INT(tfrdv_key_from(&b, NULL, 3, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_key_from(NULL, "x", 1, &st), TFRDV_INVALID_ARGUMENT);
}

static void test_key_make_frame(void) {
    tfrdv_key base, k;
    tfrdv_frame_iter fi, back;
    tfrdv_status st;
    char want[256], saved[TFRDV_KEY_MAX];
    int64_t i;
    TT_CHECK_EQ_INT(tfrdv_key_make(&base, SRC, 9, DST, "edge_7_while/body/add", top, &st), TFRDV_OK);
    memcpy(saved, base.buf, base.len + 1);
    fi.frame_id = 0xfeedULL;
    for (i = 0; i < 12; i++) { /* ";frame:iter" of every width */
        fi.iter_id = i * 1000 - 5;
        TT_CHECK_EQ_INT(tfrdv_key_make_frame(&k, &base, fi, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_key_create(SRC, 9, DST, "edge_7_while/body/add", fi, want, sizeof want, NULL, NULL), TFRDV_OK);
        TT_CHECK_STR(k.buf, want);
        TT_CHECK(views_inside(&k));
        TT_CHECK_EQ_INT(tfrdv_frame_iter_parse(k.parsed.frame_iter, &back, &st), TFRDV_OK);
        TT_CHECK(back.frame_id == fi.frame_id && back.iter_id == fi.iter_id);
    }
    TT_CHECK_STR(base.buf, saved); /* base unchanged */
    TT_CHECK(views_inside(&base));
    /* in place: a long frame, then a short one */
    fi.frame_id = UINT64_MAX;
    fi.iter_id = INT64_MIN;
    TT_CHECK_EQ_INT(tfrdv_key_make_frame(&base, &base, fi, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_key_create(SRC, 9, DST, "edge_7_while/body/add", fi, want, sizeof want, NULL, NULL), TFRDV_OK);
    TT_CHECK_STR(base.buf, want);
    TT_CHECK_EQ_INT(tfrdv_key_make_frame(&base, &base, top, &st), TFRDV_OK);
    TT_CHECK_STR(base.buf, saved);
    TT_CHECK(views_inside(&base));
}

static void test_key_make_frame_rejects(void) {
    tfrdv_key empty, base, k;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_key_make(&empty, SRC, 1, DST, "", top, NULL), TFRDV_INVALID_ARGUMENT); /* empty now */
    TT_CHECK_EQ_INT(tfrdv_key_make_frame(&k, &empty, top, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "base is not a parsed key");
    TT_CHECK_EQ_INT(tfrdv_key_make_frame(&k, NULL, top, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_key_make_frame(NULL, &base, top, &st), TFRDV_INVALID_ARGUMENT);
    /* a tfrdv_key copied with = has views into the original: detected, not followed */
    TT_CHECK_EQ_INT(tfrdv_key_make(&base, SRC, 1, DST, "e", top, NULL), TFRDV_OK);
    memcpy(&empty, &base, sizeof base);
    TT_CHECK_EQ_INT(tfrdv_key_make_frame(&k, &empty, top, &st), TFRDV_INVALID_ARGUMENT);
}

/* a copy of a tfrdv_key is tfrdv_key_from on its text (= would share the original's views) */
static void test_key_copy(void) {
    tfrdv_key a, b;
    tfrdv_rendezvous* r = NULL;
    tfrdv_value* v = tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 0, NULL, NULL, 4);
    tfrdv_value* got = NULL;
    int dead = 0;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_key_make(&a, SRC, 5, DST, "edge_3_c", top, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_key_from(&b, a.buf, a.len, &st), TFRDV_OK);
    TT_CHECK(views_inside(&b));
    TT_CHECK_STR(b.buf, a.buf);
    TT_CHECK_EQ_INT(tfrdv_key_from(&b, b.buf, b.len, &st), TFRDV_OK); /* itself */
    TT_CHECK_STR(b.buf, a.buf);
    TT_CHECK_EQ_INT(tfrdv_create(NULL, &r, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &a.parsed, NULL, v, 0, &st), TFRDV_OK);
    memset(&a, 0x55, sizeof a); /* the copy does not depend on the original */
    TT_CHECK_EQ_INT(tfrdv_recv(r, &b.parsed, NULL, 0, &got, &dead, &st), TFRDV_OK);
    TT_CHECK(got == v);
    tfrdv_value_release(got);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(tfrdv_key_from(NULL, b.buf, b.len, &st), TFRDV_INVALID_ARGUMENT);
}

/* ---- two workers on the loopback ---- */
typedef struct fetched {
    int calls;
    tfrdv_code code;
    float first;
    uint64_t size;
} fetched;
static void on_fetched(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                       tfrdv_value* v, int is_dead) {
    fetched* f = (fetched*)user;
    (void)sa; (void)ra; (void)is_dead;
    f->calls++;
    f->code = st->code;
    if (st->code == TFRDV_OK && v) {
        f->first = ((float*)v->data)[0];
        f->size = v->size;
    }
    tfrdv_value_release(v);
}

static void test_loopback_add_worker_moves_a_tensor(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config cfg = tfrdv_mgr_config_init();
    tfrdv_loopback* lb = NULL;
    tfrdv_mgr *ps = NULL, *wk = NULL;
    tfrdv_rendezvous *pr = NULL, *wr = NULL;
    tfrdv_key k;
    tfrdv_status st;
    fetched f;
    int64_t dims[1] = {2};
    float data[2] = {4.5f, 5.5f};
    memset(&f, 0, sizeof f);
    cfg.hooks = fx_alloc_hooks(&a);
    cfg.incarnation = 0x77;
    cfg.worker_name = "/job:ignored/replica:0/task:0"; /* replaced by the name given */
    TT_CHECK_EQ_INT(tfrdv_loopback_create(NULL, &lb, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_loopback_add_worker(lb, PS, &cfg, &ps, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_loopback_add_worker(lb, WK, NULL, &wk, &st), TFRDV_OK);
    if (!ps || !wk) return;
    TT_CHECK_STR(tfrdv_mgr_worker_name(ps), PS);
    TT_CHECK_EQ_INT(tfrdv_mgr_incarnation(ps), 0x77); /* the rest of cfg is kept */
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(ps, 1, &pr, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(wk, 1, &wr, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, PS "/device:CPU:0", tfrdv_mgr_incarnation(ps), WK "/device:CPU:0", "edge_1_w", top, &st),
                    TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(pr, &k.parsed, NULL, tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 1, dims, data, sizeof data), 0, &st),
                    TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(wr, &k.parsed, NULL, on_fetched, &f, 0), TFRDV_OK); /* a remote call */
    TT_CHECK_EQ_INT(f.calls, 1); /* the loopback completes inline */
    TT_CHECK_EQ_INT(f.code, TFRDV_OK);
    TT_CHECK(f.first == 4.5f && f.size == sizeof data);
    TT_CHECK_EQ_INT(stats(wk).calls_completed, 1);
    TT_CHECK_EQ_INT(stats(ps).requests_served, 1);
    tfrdv_unref(pr);
    tfrdv_unref(wr);
    tfrdv_mgr_destroy(ps);
    tfrdv_mgr_destroy(wk);
    tfrdv_loopback_destroy(lb);
    FX_CHECK_EMPTY(&a);
}

static void test_loopback_add_worker_rejects(void) {
    tfrdv_loopback* lb = NULL;
    tfrdv_mgr* m = (tfrdv_mgr*)&lb; /* overwritten with NULL on failure */
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_loopback_create(NULL, &lb, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_loopback_add_worker(NULL, WK, NULL, &m, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK(m == NULL);
    TT_CHECK_EQ_INT(tfrdv_loopback_add_worker(lb, NULL, NULL, &m, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_loopback_add_worker(lb, WK, NULL, NULL, &st), TFRDV_INVALID_ARGUMENT);
    m = (tfrdv_mgr*)&lb;
    TT_CHECK(tfrdv_loopback_add_worker(lb, "not a worker name", NULL, &m, &st) != TFRDV_OK);
    TT_CHECK(m == NULL);
    tfrdv_loopback_destroy(lb);
}

/* every allocation of the manager and of the loopback's registration failing in turn: nothing
   is left behind */
static void test_loopback_add_worker_out_of_memory(void) {
    long n;
    int succeeded = 0;
    for (n = 1; n < 64 && !succeeded; n++) {
        fail_alloc f;
        tfrdv_hooks h;
        tfrdv_mgr_config cfg = tfrdv_mgr_config_init();
        tfrdv_loopback* lb = NULL;
        tfrdv_mgr* m = NULL;
        tfrdv_status st;
        tfrdv_code rc;
        memset(&h, 0, sizeof h);
        h.allocator = fail_allocator(&f, n);
        cfg.hooks = h;
        if (tfrdv_loopback_create(&h, &lb, &st) != TFRDV_OK) { /* its own allocations fail first */
            TT_CHECK_EQ_INT(st.code, TFRDV_RESOURCE_EXHAUSTED);
            FX_CHECK_EMPTY(&f.counted);
            continue;
        }
        rc = tfrdv_loopback_add_worker(lb, WK, &cfg, &m, &st);
        if (rc == TFRDV_OK) {
            succeeded = 1;
            TT_CHECK(m != NULL);
            tfrdv_mgr_destroy(m);
        } else {
            TT_CHECK_EQ_INT(rc, TFRDV_RESOURCE_EXHAUSTED);
            TT_CHECK(m == NULL);
        }
        tfrdv_loopback_destroy(lb);
        FX_CHECK_EMPTY(&f.counted);
    }
    TT_CHECK(succeeded);
    TT_CHECK(n > 3); /* some of the attempts failed */
}

static void test_mgr_start_step(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config cfg = fx_mgr_config(WK, 1, &a);
    tfrdv_mgr* m = mk(&cfg);
    tfrdv_rendezvous *r = NULL, *again = NULL;
    tfrdv_rendezvous* none = (tfrdv_rendezvous*)&r;
    tfrdv_key k;
    tfrdv_status st;
    if (!m) return;
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, WK "/device:CPU:0", 1, WK "/device:CPU:1", "e", top, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(m, 5, &r, &st), TFRDV_OK);
    /* initialised: a send is accepted (on a step that is only found it is FAILED_PRECONDITION) */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.parsed, NULL, tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 0, NULL, NULL, 4), 0, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(m, 5, &again, &st), TFRDV_OK); /* the same step again */
    TT_CHECK(again == r);
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(NULL, 5, &none, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK(none == NULL);
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(m, 5, NULL, &st), TFRDV_INVALID_ARGUMENT);
    tfrdv_unref(again);
    tfrdv_unref(r);
    tfrdv_mgr_cleanup(m, 5);
    none = (tfrdv_rendezvous*)&r;
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, 6, &r, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, "/job:other/replica:0/task:0", &st), TFRDV_OK); /* bound elsewhere */
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(m, 6, &none, &st), TFRDV_INTERNAL); /* Double init */
    TT_CHECK_CONTAINS(st.msg, "Double init");
    TT_CHECK(none == NULL);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

static void test_no_assert_tripped(void) { TT_CHECK_EQ_INT(tt_asserts, 0); }

#if defined(__linux__) && defined(__GLIBC__) && !defined(TFRDV_NO_HUGEPAGES)
/* 1 if the mapping holding p has VmFlags "hg" (madvise(MADV_HUGEPAGE)) in /proc/self/smaps */
static int mapping_has_hg(const void* p) {
    FILE* f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0, hg = -1;
    unsigned long lo, hi, a = (unsigned long)(uintptr_t)p;
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's header line */
            in = a >= lo && a < hi;
        } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            hg = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return hg;
}
/* a large value from the built-in allocator asks for transparent huge pages (a fresh 64 MiB
   receive then faults in 2 MiB pages); a small one leaves its mapping alone */
static void test_large_values_ask_for_huge_pages(void) {
    int64_t big[1] = {16 << 20}, small[1] = {64};
    tfrdv_value* v = tfrdv_value_new(NULL, TFRDV_DT_UINT8, 1, big, NULL, (uint64_t)16 << 20);
    tfrdv_value* w = tfrdv_value_new(NULL, TFRDV_DT_UINT8, 1, small, NULL, 64);
    TT_CHECK(v != NULL && w != NULL);
    if (v) TT_CHECK_EQ_INT(mapping_has_hg((const char*)v->data + (8 << 20)), 1); /* inside the 2 MiB-aligned interior */
    if (w) TT_CHECK_EQ_INT(mapping_has_hg(w->data), 0);
    tfrdv_value_release(v);
    tfrdv_value_release(w);
}
#endif

/* tfrdv_trace_json: the exact text, the edge as the name, escaping, truncation like snprintf */
static void test_trace_json_writes_one_chrome_trace_event(void) {
    tfrdv_key k;
    tfrdv_trace_event ev;
    tfrdv_frame_iter fi = {0, 0};
    char buf[600], small[16];
    size_t n;
    memset(&ev, 0, sizeof ev);
    TT_CHECK_EQ_INT(tfrdv_key_make(&k, SRC, 0xab, DST, "edge_5_w", fi, 0), TFRDV_OK);
    ev.step_id = 42;
    ev.key.ptr = k.buf;
    ev.key.len = k.len;
    ev.bytes = 4096;
    ev.dtype = 1;
    ev.side = TFRDV_TRACE_FETCH;
    ev.code = TFRDV_OK;
    ev.start_ns = 1000 + 2500;
    ev.end_ns = 1000 + 2500 + 12345678;
    n = tfrdv_trace_json(&ev, 1000, 7, buf, sizeof buf);
    TT_CHECK_STR(buf, "{\"name\":\"edge_5_w\",\"cat\":\"fetch\",\"ph\":\"X\",\"ts\":2.500,\"dur\":12345.678,"
                      "\"pid\":7,\"tid\":2,\"args\":{\"step\":42,\"key\":\"" SRC ";00000000000000ab;" DST
                      ";edge_5_w;0:0\",\"bytes\":4096,\"dtype\":1,\"dead\":0,\"code\":\"OK\"}}");
    TT_CHECK_EQ_INT(n, strlen(buf));
    /* a key that does not parse is named as a whole; quotes, backslashes, control bytes escaped */
    ev.key.ptr = "a\"b\\c\n";
    ev.key.len = 6;
    ev.side = TFRDV_TRACE_SERVE;
    ev.code = TFRDV_CANCELLED;
    ev.start_ns = 0;
    ev.end_ns = 999;
    tfrdv_trace_json(&ev, 1000, 1, buf, sizeof buf);
    TT_CHECK_CONTAINS(buf, "{\"name\":\"a\\\"b\\\\c\\u000a\",\"cat\":\"serve\"");
    TT_CHECK_CONTAINS(buf, "\"ts\":-1.000,\"dur\":0.999,");
    TT_CHECK_CONTAINS(buf, "\"code\":\"CANCELLED\"}}");
    /* truncated: NUL-terminated, the full length returned */
    TT_CHECK_EQ_INT(tfrdv_trace_json(&ev, 1000, 1, small, sizeof small), strlen(buf));
    TT_CHECK_EQ_INT(strlen(small), sizeof small - 1);
    TT_CHECK_EQ_INT(tfrdv_trace_json(&ev, 1000, 1, 0, 0), strlen(buf));
    TT_CHECK_EQ_INT(tfrdv_trace_json(0, 0, 1, small, sizeof small), 0);
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_value_new_copies_dims_and_data);
    TT_RUN(test_trace_json_writes_one_chrome_trace_event);
    TT_RUN(test_value_new_zeroes_without_data);
    TT_RUN(test_value_new_rejects);
    TT_RUN(test_value_new_out_of_memory);
    TT_RUN(test_value_new_through_a_rendezvous);
    TT_RUN(test_value_make);
    TT_RUN(test_str_fmt);
    TT_RUN(test_key_make_matches_create_and_parse);
    TT_RUN(test_key_make_rejects);
    TT_RUN(test_key_too_long);
    TT_RUN(test_key_from_round_trip);
    TT_RUN(test_key_make_frame);
    TT_RUN(test_key_make_frame_rejects);
    TT_RUN(test_key_copy);
    TT_RUN(test_loopback_add_worker_moves_a_tensor);
    TT_RUN(test_loopback_add_worker_rejects);
    TT_RUN(test_loopback_add_worker_out_of_memory);
    TT_RUN(test_mgr_start_step);
#if defined(__linux__) && defined(__GLIBC__) && !defined(TFRDV_NO_HUGEPAGES)
    TT_RUN(test_large_values_ask_for_huge_pages);
#endif
    TT_RUN(test_no_assert_tripped);
    return TT_MAIN_END();
}
