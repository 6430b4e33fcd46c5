/* test_local.c - the local rendezvous contracts (tfrdv.h CALLBACK RULES, TF's LocalRendezvous):
   delivery in both orders, args pass-through, dead values, FIFO, full-key matching, sticky abort,
   cancellation, blocking receive with timeout, re-entrancy, teardown, batch helpers,
   introspection, allocator and sync hooks. Every test counts callback invocations and value
   releases; every rendezvous runs on a counting allocator that must be empty afterwards. */
#define _POSIX_C_SOURCE 200809L /* tt.h comes first (it counts TFRDV_ASSERTs): its stdio.h must
                                   already see the POSIX level tfrdv.h's implementation needs */
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define SRC "/job:w/replica:0/task:0/device:CPU:0"
#define DST "/job:w/replica:0/task:0/device:GPU:0"

/* ---- helpers ----------------------------------------------------------------------------- */
static void sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) {}
}
static int ld(const int* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static void st_(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }

static void tkey_init(tkey* k, const char* edge) { tkey_make(k, SRC, 1, DST, edge); }
static void tkey_raw(tkey* k, const char* text) {
    tfrdv_status st;
    size_t n = strlen(text);
    memcpy(k->buf, text, n + 1);
    TT_CHECK_EQ_INT(tfrdv_key_parse(k->buf, n, &k->pk, &st), TFRDV_OK);
}
static void tkey_num(tkey* k, int i) {
    char e[32];
    snprintf(e, sizeof e, "edge_%d", i);
    tkey_init(k, e);
}

/* the counting allocator with its counters reset */
static tfrdv_hooks ca_hooks(fx_alloc* ca) {
    memset(ca, 0, sizeof *ca);
    return fx_alloc_hooks(ca);
}

static tfrdv_rendezvous* mk_rdv_cfg(fx_alloc* ca, int shards, int buckets) {
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    tfrdv_status st;
    cfg.hooks = ca_hooks(ca);
    cfg.num_shards = shards;
    cfg.min_buckets = buckets;
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, &st), TFRDV_OK);
    return r;
}
static tfrdv_rendezvous* mk_rdv(fx_alloc* ca) { return mk_rdv_cfg(ca, 0, 0); }
static tfrdv_cancel_mgr* mk_cm(fx_alloc* ca) {
    tfrdv_hooks h = fx_alloc_hooks(ca); /* shares the counters of ca (not reset) */
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&h, &cm, &st), TFRDV_OK);
    return cm;
}

/* pending-introspection collector */
typedef struct pend_ent {
    int64_t step;
    tfrdv_pending_kind kind;
    char key[192];
    size_t count;
} pend_ent;
typedef struct pend_list {
    pend_ent e[64];
    size_t n;
} pend_list;
static void pend_cb(void* user, int64_t step, tfrdv_pending_kind kind, const char* key, size_t len, size_t count) {
    pend_list* l = (pend_list*)user;
    if (l->n >= 64 || len >= sizeof l->e[0].key) return;
    l->e[l->n].step = step;
    l->e[l->n].kind = kind;
    memcpy(l->e[l->n].key, key, len);
    l->e[l->n].key[len] = 0;
    l->e[l->n].count = count;
    l->n++;
}
static size_t pending(tfrdv_rendezvous* r, pend_list* l) {
    memset(l, 0, sizeof *l);
    return tfrdv_pending(r, pend_cb, l);
}
static const pend_ent* pend_find(const pend_list* l, const tkey* k) {
    size_t i;
    for (i = 0; i < l->n; i++)
        if (strcmp(l->e[i].key, k->buf) == 0) return &l->e[i];
    return 0;
}

/* ---- delivery ------------------------------------------------------------------------------ */
static void test_send_then_recv_completes_in_recv(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v;
    rcv a;
    tkey_init(&k, "a");
    tval_init(&v, 7);
    rcv_init(&a);
    a.keep = 1;
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(rel(&v), 0);
    g_phase = 1;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &a, 0), TFRDV_OK);
    g_phase = 0;
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.phase, 1); /* synchronously, inside tfrdv_recv_async */
    TT_CHECK_EQ_INT(a.code, TFRDV_OK);
    TT_CHECK(a.value == &v.v); /* zero copy */
    TT_CHECK_EQ_INT(a.is_dead, 0);
    TT_CHECK_EQ_INT(rel(&v), 0); /* the receiver owns it now */
    tfrdv_value_release(a.value);
    TT_CHECK_EQ_INT(rel(&v), 1);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(rel(&v), 1);
    TT_CHECK_EQ_INT(a.calls, 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_recv_then_send_completes_in_send(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v;
    rcv a;
    tkey_init(&k, "a");
    tval_init(&v, 8);
    rcv_init(&a);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &a, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(a.calls, 0);
    g_phase = 2;
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, NULL), TFRDV_OK);
    g_phase = 0;
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.phase, 2); /* synchronously, inside tfrdv_send */
    TT_CHECK_EQ_INT(a.code, TFRDV_OK);
    TT_CHECK_EQ_INT(a.id, 8);
    TT_CHECK_EQ_INT(rel(&v), 1); /* released by the receiver inside its callback */
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(rel(&v), 1);
    FX_CHECK_EMPTY(&ca);
}

static tfrdv_value* dummy_alloc(void* u, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    (void)u; (void)dtype; (void)rank; (void)dims; (void)size;
    return 0;
}
/* A table that drained after a burst gives its memory back, and the next burst of the same size
   grows straight toward the size the last one reached (at most 8x per step) instead of by half
   each time: 3 rehashes where the first burst took 14. */
static int burst_growths(tfrdv_rendezvous* r, tkey* k, tval* v, int n, long* live_after, fx_alloc* ca) {
    int i, growths = 0;
    size_t slots = r->shards[0].nslots;
    rcv x;
    for (i = 0; i < n; i++) {
        TT_CHECK_EQ_INT(tfrdv_send(r, &k[i].pk, NULL, &v[i].v, 0, NULL), TFRDV_OK);
        if (r->shards[0].nslots != slots) growths++;
        slots = r->shards[0].nslots;
    }
    for (i = 0; i < n; i++) {
        rcv_init(&x);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k[i].pk, NULL, rcv_done, &x, 0), TFRDV_OK);
        TT_CHECK(x.calls == 1 && x.id == i);
    }
    *live_after = fx_live_bytes(ca);
    return growths;
}
static void test_table_grows_toward_the_last_bursts_size(void) {
    enum { N = 10000 };
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv_cfg(&ca, 1, 0);
    tkey* k = (tkey*)calloc(N, sizeof *k);
    tval* v = (tval*)calloc(N, sizeof *v);
    long base, live1, live2;
    int i, g1, g2;
    TT_CHECK(k && v);
    if (!k || !v) return;
    for (i = 0; i < N; i++) {
        tkey_num(&k[i], i);
        tval_init(&v[i], i);
    }
    base = fx_live_bytes(&ca);
    g1 = burst_growths(r, k, v, N, &live1, &ca);
    for (i = 0; i < N; i++) tval_init(&v[i], i);
    g2 = burst_growths(r, k, v, N, &live2, &ca);
    printf("    (growths: %d in the first burst, %d in the second; %ld and %ld bytes held after each)\n", g1, g2,
           live1 - base, live2 - base);
    TT_CHECK(g1 >= 10);
    TT_CHECK(g2 <= 4);
    TT_CHECK(live1 - base < 4096 && live2 - base < 4096); /* drained: the table shrank back */
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
    free(k);
    free(v);
}

/* A waiting receiver is one 48-byte allocation (its args' device context and alloc attrs kept,
   handed back to the callback); one with a cancellation manager or an alloc hook takes 160 bytes.
   Both kinds sit in one queue in arrival order. */
static void test_waiting_receivers_cost_48_bytes_or_160_with_extras(void) {
    enum { N = 1000 };
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr* cm = mk_cm(&ca);
    tkey k;
    static rcv x[2 * N];
    tval v;
    int i, dc, in_order = 1;
    long b0, b1, b2;
    tfrdv_args plain, extra;
    tkey_init(&k, "cheap");
    memset(&plain, 0, sizeof plain);
    plain.device_context = &dc;
    plain.alloc_attrs = TFRDV_ALLOC_NIC_COMPATIBLE;
    extra = cancel_args(cm);
    for (i = 0; i < 2 * N; i++) rcv_init(&x[i]);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &plain, rcv_done, &x[0], 0), TFRDV_OK); /* the channel */
    b0 = fx_live_bytes(&ca);
    for (i = 1; i < N; i++) TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &plain, rcv_done, &x[i], 0), TFRDV_OK);
    b1 = fx_live_bytes(&ca);
    for (i = N; i < 2 * N; i++) TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &extra, rcv_done, &x[i], 0), TFRDV_OK);
    b2 = fx_live_bytes(&ca);
    printf("    (%ld bytes per waiting receiver, %ld with a cancellation manager)\n", (b1 - b0) / (N - 1), (b2 - b1) / N);
    TT_CHECK_EQ_INT((b1 - b0) / (N - 1), 48);
    TT_CHECK_EQ_INT((b2 - b1) / N, 160);
    for (i = 0; i < 2 * N; i++) {
        tval_init(&v, i);
        TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, NULL), TFRDV_OK);
        if (x[i].calls != 1 || x[i].id != i) in_order = 0;
    }
    TT_CHECK(in_order);
    TT_CHECK(x[5].ra.device_context == &dc && x[5].ra.alloc_attrs == TFRDV_ALLOC_NIC_COMPATIBLE && !x[5].ra.cancel);
    TT_CHECK(x[N + 5].ra.cancel == cm && !x[N + 5].ra.device_context);
    tfrdv_destroy(r);
    tfrdv_cancel_mgr_destroy(cm);
    FX_CHECK_EMPTY(&ca);
}

static void test_send_and_recv_args_reach_the_callback(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v1, v2;
    rcv a, b;
    int dc_send, dc_recv;
    tfrdv_args sa, ra;
    tkey_init(&k, "args");
    tval_init(&v1, 1);
    tval_init(&v2, 2);
    rcv_init(&a);
    rcv_init(&b);
    memset(&sa, 0, sizeof sa);
    memset(&ra, 0, sizeof ra);
    sa.device_context = &dc_send;
    sa.alloc_attrs = TFRDV_ALLOC_ON_HOST | TFRDV_ALLOC_GPU_COMPATIBLE;
    ra.device_context = &dc_recv;
    ra.alloc_attrs = TFRDV_ALLOC_NIC_COMPATIBLE;
    ra.alloc_fn = dummy_alloc;
    ra.alloc_user = &dc_recv;
    /* send first (args buffered with the value) */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, &sa, &v1.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &ra, rcv_done, &a, 0), TFRDV_OK);
    /* recv first (args kept with the waiter) */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &ra, rcv_done, &b, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, &sa, &v2.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(a.id, 1);
    TT_CHECK_EQ_INT(b.id, 2);
    TT_CHECK(a.sa.device_context == &dc_send && b.sa.device_context == &dc_send);
    TT_CHECK_EQ_INT(a.sa.alloc_attrs, TFRDV_ALLOC_ON_HOST | TFRDV_ALLOC_GPU_COMPATIBLE);
    TT_CHECK_EQ_INT(b.sa.alloc_attrs, TFRDV_ALLOC_ON_HOST | TFRDV_ALLOC_GPU_COMPATIBLE);
    TT_CHECK(a.ra.device_context == &dc_recv && b.ra.device_context == &dc_recv);
    TT_CHECK_EQ_INT(a.ra.alloc_attrs, TFRDV_ALLOC_NIC_COMPATIBLE);
    TT_CHECK_EQ_INT(b.ra.alloc_attrs, TFRDV_ALLOC_NIC_COMPATIBLE);
    TT_CHECK(a.ra.alloc_fn == dummy_alloc && b.ra.alloc_fn == dummy_alloc);
    TT_CHECK(a.ra.alloc_user == &dc_recv && b.ra.alloc_user == &dc_recv);
    /* NULL args on both sides: zeroed args in the callback, never NULL pointers */
    {
        rcv c;
        tval v3;
        rcv_init(&c);
        tval_init(&v3, 3);
        TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v3.v, 0, NULL), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &c, 0), TFRDV_OK);
        TT_CHECK_EQ_INT(c.calls, 1);
        TT_CHECK(c.sa.device_context == NULL && c.sa.alloc_attrs == 0 && c.ra.device_context == NULL);
        TT_CHECK_EQ_INT(rel(&v3), 1);
    }
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(rel(&v1), 1);
    TT_CHECK_EQ_INT(rel(&v2), 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_dead_values_delivered_as_dead(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v;
    rcv a, b, c;
    tkey_init(&k, "dead");
    tval_init(&v, 5);
    rcv_init(&a);
    rcv_init(&b);
    rcv_init(&c);
    /* dead without a payload: NULL value allowed */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, NULL, 1, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &a, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.code, TFRDV_OK);
    TT_CHECK_EQ_INT(a.is_dead, 1);
    TT_CHECK(a.value == NULL);
    /* dead with a payload (recv first): value and flag both delivered */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &b, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 1, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(b.is_dead, 1);
    TT_CHECK_EQ_INT(b.id, 5);
    TT_CHECK_EQ_INT(rel(&v), 1);
    /* dead NULL, recv first */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &c, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, NULL, 1, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(c.calls, 1);
    TT_CHECK_EQ_INT(c.is_dead, 1);
    TT_CHECK(c.value == NULL);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}

static void test_argument_errors_are_synchronous(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v;
    rcv a, b;
    tfrdv_status st;
    tfrdv_parsed_key empty;
    pend_list pl;
    tkey_init(&k, "nulls");
    tval_init(&v, 1);
    rcv_init(&a);
    rcv_init(&b);
    memset(&empty, 0, sizeof empty);
    /* NULL live value: INVALID_ARGUMENT, nothing buffered */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, NULL, 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(st.code, TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "NULL value");
    TT_CHECK_EQ_INT(pending(r, &pl), 0);
    /* ... and with a receiver waiting: the receiver is not completed */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &a, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, NULL, 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(a.calls, 0);
    /* other argument errors: no callback, nothing taken */
    TT_CHECK_EQ_INT(tfrdv_send(NULL, &k.pk, NULL, &v.v, 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_send(r, NULL, NULL, &v.v, 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_send(r, &empty, NULL, &v.v, 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_recv_async(NULL, &k.pk, NULL, rcv_done, &b, 0), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &empty, NULL, rcv_done, &b, 0), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, NULL, &b, 0), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(b.calls, 0);
    TT_CHECK_EQ_INT(rel(&v), 0);
    TT_CHECK_EQ_INT(tfrdv_get_status(r, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(st.code, TFRDV_OK);
    TT_CHECK_STR(st.msg, "");
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.code, TFRDV_CANCELLED);
    FX_CHECK_EMPTY(&ca);
}

static void test_value_retain_release_extra_refs(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v;
    rcv a;
    tfrdv_value plain;
    tval_init(&v, 1);
    TT_CHECK_EQ_INT(v.v.extra_refs, 0);
    tfrdv_value_retain(&v.v);
    tfrdv_value_retain(&v.v);
    TT_CHECK_EQ_INT(v.v.extra_refs, 2);
    tfrdv_value_release(&v.v);
    TT_CHECK_EQ_INT(v.v.extra_refs, 1);
    TT_CHECK_EQ_INT(rel(&v), 0);
    tfrdv_value_release(&v.v);
    TT_CHECK_EQ_INT(v.v.extra_refs, 0);
    TT_CHECK_EQ_INT(rel(&v), 0);
    tfrdv_value_release(&v.v); /* the first reference: the hook runs */
    TT_CHECK_EQ_INT(rel(&v), 1);
    TT_CHECK_EQ_INT(v.v.extra_refs, 0);
    tfrdv_value_release(NULL);
    tfrdv_value_retain(NULL);
    /* no hook: release is harmless */
    memset(&plain, 0, sizeof plain);
    tfrdv_value_retain(&plain);
    tfrdv_value_release(&plain);
    tfrdv_value_release(&plain);
    TT_CHECK_EQ_INT(plain.extra_refs, 0);
    /* through a rendezvous: the receiver retains, shares, and the hook runs once at the end */
    tval_init(&v, 2);
    tkey_init(&k, "refs");
    rcv_init(&a);
    a.keep = 1;
    tfrdv_value_retain(&v.v); /* the sender keeps a reference of its own */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &a, 0), TFRDV_OK);
    tfrdv_value_retain(a.value);
    tfrdv_value_release(a.value);
    tfrdv_value_release(a.value);
    TT_CHECK_EQ_INT(rel(&v), 0);
    tfrdv_value_release(&v.v); /* the sender's */
    TT_CHECK_EQ_INT(rel(&v), 1);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(rel(&v), 1);
    FX_CHECK_EMPTY(&ca);
}

/* ---- ordering ------------------------------------------------------------------------------ */
static void test_fifo_sends_received_in_send_order(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v[10];
    rcv a[10];
    int i;
    tkey_init(&k, "fifo");
    for (i = 0; i < 10; i++) {
        tval_init(&v[i], i);
        TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v[i].v, 0, NULL), TFRDV_OK);
    }
    for (i = 0; i < 10; i++) {
        rcv_init(&a[i]);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &a[i], 0), TFRDV_OK);
        TT_CHECK_EQ_INT(a[i].calls, 1);
        TT_CHECK_EQ_INT(a[i].id, i);
    }
    tfrdv_destroy(r);
    for (i = 0; i < 10; i++) TT_CHECK_EQ_INT(rel(&v[i]), 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_fifo_receivers_served_in_arrival_order(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v[10];
    rcv a[10];
    int i;
    tkey_init(&k, "fifo");
    for (i = 0; i < 10; i++) {
        rcv_init(&a[i]);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &a[i], 0), TFRDV_OK);
    }
    for (i = 0; i < 10; i++) {
        tval_init(&v[i], 100 + i);
        TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v[i].v, 0, NULL), TFRDV_OK);
        TT_CHECK_EQ_INT(a[i].calls, 1);
        TT_CHECK_EQ_INT(a[i].id, 100 + i);
        if (i + 1 < 10) TT_CHECK_EQ_INT(a[i + 1].calls, 0);
    }
    tfrdv_destroy(r);
    for (i = 0; i < 10; i++) TT_CHECK_EQ_INT(rel(&v[i]), 1);
    FX_CHECK_EMPTY(&ca);
}

/* random interleavings on 4 keys against a model of each key's FIFO */
#define IL_OPS 4000
static tval il_vals[IL_OPS];
static rcv il_rcvs[IL_OPS];
static void test_fifo_random_interleavings(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k[4];
    int sq[4][IL_OPS], rq[4][IL_OPS]; /* model queues: pending send ids / pending receiver ids */
    int sh[4] = {0, 0, 0, 0}, st_[4] = {0, 0, 0, 0}, rh[4] = {0, 0, 0, 0}, rt[4] = {0, 0, 0, 0};
    int nv = 0, nr = 0, i, bad = 0;
    uint32_t seed = 12345;
    for (i = 0; i < 4; i++) tkey_num(&k[i], i);
    for (i = 0; i < IL_OPS; i++) {
        int key, send;
        seed = seed * 1664525u + 1013904223u;
        key = (int)((seed >> 8) % 4);
        send = ((seed >> 20) & 1) != 0;
        if (send) {
            tval_init(&il_vals[nv], nv);
            TT_CHECK_EQ_INT(tfrdv_send(r, &k[key].pk, NULL, &il_vals[nv].v, 0, NULL), TFRDV_OK);
            if (rh[key] < rt[key]) { /* the oldest waiting receiver takes it now */
                rcv* x = &il_rcvs[rq[key][rh[key]++]];
                if (x->calls != 1 || x->id != nv) bad++;
            } else {
                sq[key][st_[key]++] = nv;
            }
            nv++;
        } else {
            rcv* x = &il_rcvs[nr];
            rcv_init(x);
            TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k[key].pk, NULL, rcv_done, x, 0), TFRDV_OK);
            if (sh[key] < st_[key]) { /* the oldest buffered value, now */
                if (x->calls != 1 || x->id != sq[key][sh[key]]) bad++;
                sh[key]++;
            } else {
                if (x->calls != 0) bad++;
                rq[key][rt[key]++] = nr;
            }
            nr++;
        }
    }
    TT_CHECK_EQ_INT(bad, 0);
    tfrdv_destroy(r);
    for (i = 0; i < nv; i++) TT_CHECK_EQ_INT(rel(&il_vals[i]), 1);
    for (i = 0; i < nr; i++) TT_CHECK_EQ_INT(il_rcvs[i].calls, 1);
    FX_CHECK_EMPTY(&ca);
}

#define MK 500
static tkey mk_keys[MK];
static tval mk_vals[MK];
static rcv mk_rcvs[MK];
static void test_many_keys_are_independent(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    int p1[MK], p2[MK], i, bad = 0;
    pend_list pl;
    for (i = 0; i < MK; i++) tkey_num(&mk_keys[i], i);
    fx_shuffle(p1, MK, 1);
    fx_shuffle(p2, MK, 2);
    /* sends first */
    for (i = 0; i < MK; i++) {
        tval_init(&mk_vals[p1[i]], p1[i]);
        TT_CHECK_EQ_INT(tfrdv_send(r, &mk_keys[p1[i]].pk, NULL, &mk_vals[p1[i]].v, 0, NULL), TFRDV_OK);
    }
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), MK);
    for (i = 0; i < MK; i++) {
        rcv_init(&mk_rcvs[p2[i]]);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &mk_keys[p2[i]].pk, NULL, rcv_done, &mk_rcvs[p2[i]], 0), TFRDV_OK);
    }
    for (i = 0; i < MK; i++)
        if (mk_rcvs[i].calls != 1 || mk_rcvs[i].id != i || rel(&mk_vals[i]) != 1) bad++;
    TT_CHECK_EQ_INT(bad, 0);
    /* receivers first */
    for (i = 0; i < MK; i++) {
        rcv_init(&mk_rcvs[p1[i]]);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &mk_keys[p1[i]].pk, NULL, rcv_done, &mk_rcvs[p1[i]], 0), TFRDV_OK);
    }
    TT_CHECK_EQ_INT(pending(r, &pl), MK); /* every entry is reported (our collector keeps 64) */
    TT_CHECK_EQ_INT(pl.n, 64);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), MK);
    for (i = 0; i < MK; i++) {
        tval_init(&mk_vals[p2[i]], 1000 + p2[i]);
        TT_CHECK_EQ_INT(tfrdv_send(r, &mk_keys[p2[i]].pk, NULL, &mk_vals[p2[i]].v, 0, NULL), TFRDV_OK);
        if (mk_rcvs[p2[i]].calls != 1 || mk_rcvs[p2[i]].id != 1000 + p2[i]) bad++;
    }
    TT_CHECK_EQ_INT(bad, 0);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
    tfrdv_destroy(r);
    for (i = 0; i < MK; i++) TT_CHECK_EQ_INT(rel(&mk_vals[i]), 1);
    FX_CHECK_EMPTY(&ca);
}

/* ---- full-key matching ------------------------------------------------------------------------ */
static void test_full_key_compared_when_hashes_collide(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv_cfg(&ca, 1, 1);
    tkey a, b, a2, pfx, longer;
    tval va, vb, vp, vl;
    rcv ra, rb, rp, rl;
    pend_list pl;
    tkey_init(&a, "x");
    tkey_init(&b, "y");
    tkey_init(&a2, "x"); /* same bytes as a in other memory: must match a */
    tkey_raw(&pfx, SRC ";0000000000000001;" DST ";e;0:0");
    tkey_raw(&longer, SRC ";0000000000000001;" DST ";e;0:01"); /* pfx is a prefix of it */
    TT_CHECK(a.pk.hash != b.pk.hash);
    a.pk.hash = b.pk.hash = a2.pk.hash = pfx.pk.hash = longer.pk.hash = 0x1234567890abcdefull;
    tval_init(&va, 1);
    tval_init(&vb, 2);
    tval_init(&vp, 3);
    tval_init(&vl, 4);
    rcv_init(&ra);
    rcv_init(&rb);
    rcv_init(&rp);
    rcv_init(&rl);
    TT_CHECK_EQ_INT(tfrdv_send(r, &a.pk, NULL, &va.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &b.pk, NULL, rcv_done, &rb, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(rb.calls, 0); /* TensorFlow would hand va to b here */
    TT_CHECK_EQ_INT(pending(r, &pl), 2);
    TT_CHECK(pend_find(&pl, &a) && pend_find(&pl, &a)->kind == TFRDV_PENDING_SEND);
    TT_CHECK(pend_find(&pl, &b) && pend_find(&pl, &b)->kind == TFRDV_PENDING_RECV);
    TT_CHECK_EQ_INT(tfrdv_send(r, &b.pk, NULL, &vb.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(rb.calls, 1);
    TT_CHECK_EQ_INT(rb.id, 2);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &a2.pk, NULL, rcv_done, &ra, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(ra.calls, 1);
    TT_CHECK_EQ_INT(ra.id, 1);
    /* a key that is a byte prefix of another never matches it */
    TT_CHECK_EQ_INT(tfrdv_send(r, &pfx.pk, NULL, &vp.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &longer.pk, NULL, rcv_done, &rl, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(rl.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_send(r, &longer.pk, NULL, &vl.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(rl.calls, 1);
    TT_CHECK_EQ_INT(rl.id, 4);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &pfx.pk, NULL, rcv_done, &rp, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(rp.calls, 1);
    TT_CHECK_EQ_INT(rp.id, 3);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
    tfrdv_destroy(r);
    TT_CHECK(rel(&va) == 1 && rel(&vb) == 1 && rel(&vp) == 1 && rel(&vl) == 1);
    FX_CHECK_EMPTY(&ca);
}

#define HK 1000
static tkey hk_keys[HK];
static tval hk_vals[HK];
static rcv hk_rcvs[HK];
static void test_thousand_keys_with_one_hash(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv_cfg(&ca, 1, 1);
    int i, bad = 0;
    for (i = 0; i < HK; i++) {
        tkey_num(&hk_keys[i], i);
        hk_keys[i].pk.hash = 42;
        tval_init(&hk_vals[i], i);
        rcv_init(&hk_rcvs[i]);
    }
    for (i = 0; i < HK; i += 2) /* even keys: receiver first */
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &hk_keys[i].pk, NULL, rcv_done, &hk_rcvs[i], 0), TFRDV_OK);
    for (i = HK - 1; i >= 0; i--)
        TT_CHECK_EQ_INT(tfrdv_send(r, &hk_keys[i].pk, NULL, &hk_vals[i].v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), HK / 2);
    for (i = 1; i < HK; i += 2)
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &hk_keys[i].pk, NULL, rcv_done, &hk_rcvs[i], 0), TFRDV_OK);
    for (i = 0; i < HK; i++)
        if (hk_rcvs[i].calls != 1 || hk_rcvs[i].id != i || rel(&hk_vals[i]) != 1) bad++;
    TT_CHECK_EQ_INT(bad, 0);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}

/* ---- abort ------------------------------------------------------------------------------------ */
static void test_abort_sticky_first_status_wins(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_ABORTED, "first"), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_get_status(r, &st), TFRDV_ABORTED);
    TT_CHECK_EQ_INT(st.code, TFRDV_ABORTED);
    TT_CHECK_STR(st.msg, "first");
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_UNAVAILABLE, "second"), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_get_status(r, &st), TFRDV_ABORTED);
    TT_CHECK_STR(st.msg, "first");
    TT_CHECK_EQ_INT(tfrdv_get_status(r, NULL), TFRDV_ABORTED);
    tfrdv_destroy(r); /* destroy's CANCELLED does not replace it either (nothing to observe) */
    FX_CHECK_EMPTY(&ca);
}

static void test_abort_with_ok_is_invalid_and_changes_nothing(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_status st;
    tkey k;
    tval v;
    rcv a;
    tkey_init(&k, "k");
    tval_init(&v, 1);
    rcv_init(&a);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &a, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_OK, "not an error"), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_abort(r, (tfrdv_code)17, "no such code"), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_abort(NULL, TFRDV_ABORTED, "x"), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(a.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_get_status(r, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.code, TFRDV_OK);
    /* a real abort after it still takes effect */
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_INTERNAL, "real"), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_get_status(r, &st), TFRDV_INTERNAL);
    TT_CHECK_STR(st.msg, "real");
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(rel(&v), 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_abort_completes_waiters_once_and_releases_buffered_once(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k1, k2, k3;
    tval v[5];
    rcv a[3];
    int i;
    tkey_init(&k1, "r1");
    tkey_init(&k2, "r2");
    tkey_init(&k3, "s3");
    for (i = 0; i < 3; i++) rcv_init(&a[i]);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k1.pk, NULL, rcv_done, &a[0], 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k1.pk, NULL, rcv_done, &a[1], 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k2.pk, NULL, rcv_done, &a[2], 0), TFRDV_OK);
    for (i = 0; i < 5; i++) {
        tval_init(&v[i], i);
        TT_CHECK_EQ_INT(tfrdv_send(r, &k3.pk, NULL, &v[i].v, 0, NULL), TFRDV_OK);
    }
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_ABORTED, "step failed"), TFRDV_OK);
    for (i = 0; i < 3; i++) {
        TT_CHECK_EQ_INT(a[i].calls, 1);
        TT_CHECK_EQ_INT(a[i].code, TFRDV_ABORTED);
        TT_CHECK_STR(a[i].msg, "step failed");
        TT_CHECK(a[i].value == NULL);
    }
    for (i = 0; i < 5; i++) TT_CHECK_EQ_INT(rel(&v[i]), 1);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_CANCELLED, "again"), TFRDV_OK);
    tfrdv_destroy(r);
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(a[i].calls, 1);
    for (i = 0; i < 5; i++) TT_CHECK_EQ_INT(rel(&v[i]), 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_send_after_abort_fails_and_caller_keeps_value(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v;
    tfrdv_status st;
    tkey_init(&k, "k");
    tval_init(&v, 1);
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_UNAVAILABLE, "worker gone"), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_EQ_INT(st.code, TFRDV_UNAVAILABLE);
    TT_CHECK_STR(st.msg, "worker gone");
    TT_CHECK_EQ_INT(rel(&v), 0); /* still ours */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, NULL, 1, NULL), TFRDV_UNAVAILABLE);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(rel(&v), 0);
    tfrdv_value_release(&v.v);
    TT_CHECK_EQ_INT(rel(&v), 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_recv_after_abort_completes_at_once(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    rcv a;
    int ctx;
    tfrdv_args ra;
    tkey_init(&k, "k");
    rcv_init(&a);
    memset(&ra, 0, sizeof ra);
    ra.device_context = &ctx;
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_OUT_OF_RANGE, "End of sequence"), TFRDV_OK);
    g_phase = 3;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &ra, rcv_done, &a, 0), TFRDV_OK);
    g_phase = 0;
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.phase, 3);
    TT_CHECK_EQ_INT(a.code, TFRDV_OUT_OF_RANGE);
    TT_CHECK_STR(a.msg, "End of sequence");
    TT_CHECK(a.value == NULL);
    TT_CHECK(a.ra.device_context == &ctx); /* recv args come back */
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(a.calls, 1);
    FX_CHECK_EMPTY(&ca);
}

/* ---- cancellation manager ------------------------------------------------------------------- */
static int cm_order[32], cm_n;
static void cm_cb(void* u) { cm_order[cm_n++] = (int)(intptr_t)u; }

static void test_cancel_mgr_register_deregister_start(void) {
    fx_alloc ca;
    tfrdv_cancel_mgr* cm;
    tfrdv_cancel_node n[6];
    int i;
    memset(&ca, 0, sizeof ca);
    cm = mk_cm(&ca);
    memset(n, 0, sizeof n);
    cm_n = 0;
    for (i = 0; i < 5; i++) TT_CHECK_EQ_INT(tfrdv_cancel_register(cm, &n[i], cm_cb, (void*)(intptr_t)i), 1);
    TT_CHECK_EQ_INT(tfrdv_cancel_deregister(cm, &n[1]), 1);
    TT_CHECK_EQ_INT(tfrdv_cancel_deregister(cm, &n[1]), 0);
    TT_CHECK_EQ_INT(tfrdv_cancel_try_deregister(cm, &n[3]), 1);
    TT_CHECK_EQ_INT(tfrdv_cancel_try_deregister(cm, &n[3]), 0);
    TT_CHECK_EQ_INT(tfrdv_cancel_is_cancelled(cm), 0);
    TT_CHECK_EQ_INT(cm_n, 0);
    tfrdv_cancel_start(cm);
    TT_CHECK_EQ_INT(cm_n, 3);
    TT_CHECK(cm_order[0] == 0 && cm_order[1] == 2 && cm_order[2] == 4); /* registration order */
    TT_CHECK_EQ_INT(tfrdv_cancel_is_cancelled(cm), 1);
    tfrdv_cancel_start(cm); /* idempotent */
    TT_CHECK_EQ_INT(cm_n, 3);
    TT_CHECK_EQ_INT(tfrdv_cancel_register(cm, &n[5], cm_cb, (void*)(intptr_t)5), 0);
    tfrdv_cancel_start(cm);
    TT_CHECK_EQ_INT(cm_n, 3); /* a failed registration never runs */
    TT_CHECK_EQ_INT(tfrdv_cancel_deregister(cm, &n[0]), 0);
    TT_CHECK_EQ_INT(tfrdv_cancel_try_deregister(cm, &n[2]), 0);
    /* argument errors */
    TT_CHECK_EQ_INT(tfrdv_cancel_register(NULL, &n[5], cm_cb, 0), 0);
    TT_CHECK_EQ_INT(tfrdv_cancel_register(cm, NULL, cm_cb, 0), 0);
    tfrdv_cancel_start(NULL);
    TT_CHECK_EQ_INT(tfrdv_cancel_is_cancelled(NULL), 0);
    tfrdv_cancel_mgr_destroy(cm);
    TT_CHECK_EQ_INT(cm_n, 3);
    FX_CHECK_EMPTY(&ca);
}

/* callbacks that deregister themselves / register more while the manager cancels */
typedef struct cm_reent {
    tfrdv_cancel_mgr* cm;
    tfrdv_cancel_node* self;
    tfrdv_cancel_node* other;
    int dereg_self, reg_other, runs;
} cm_reent;
static void cm_reent_cb(void* u) {
    cm_reent* x = (cm_reent*)u;
    x->runs++;
    x->dereg_self = tfrdv_cancel_deregister(x->cm, x->self); /* must not deadlock */
    x->reg_other = tfrdv_cancel_register(x->cm, x->other, cm_cb, 0);
}
static void test_cancel_mgr_reentrant_callbacks_and_destroy(void) {
    fx_alloc ca;
    tfrdv_cancel_mgr* cm;
    tfrdv_cancel_node n[3];
    cm_reent x;
    memset(&ca, 0, sizeof ca);
    memset(n, 0, sizeof n);
    cm = mk_cm(&ca);
    x.cm = cm;
    x.self = &n[0];
    x.other = &n[2];
    x.runs = 0;
    x.dereg_self = x.reg_other = -1;
    cm_n = 0;
    TT_CHECK_EQ_INT(tfrdv_cancel_register(cm, &n[0], cm_reent_cb, &x), 1);
    TT_CHECK_EQ_INT(tfrdv_cancel_register(cm, &n[1], cm_cb, (void*)(intptr_t)1), 1);
    tfrdv_cancel_mgr_destroy(cm); /* cancels first: the remaining callbacks run once */
    TT_CHECK_EQ_INT(x.runs, 1);
    TT_CHECK_EQ_INT(x.dereg_self, 0);
    TT_CHECK_EQ_INT(x.reg_other, 0);
    TT_CHECK_EQ_INT(cm_n, 1);
    TT_CHECK_EQ_INT(cm_order[0], 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_recv_cancelled_before_send_then_send_is_buffered(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr* cm = mk_cm(&ca);
    tfrdv_args args = cancel_args(cm);
    tkey k;
    tval v;
    rcv a, b;
    pend_list pl;
    tkey_init(&k, "k");
    tval_init(&v, 9);
    rcv_init(&a);
    rcv_init(&b);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &args, rcv_done, &a, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(a.calls, 0);
    TT_CHECK_EQ_INT(pending(r, &pl), 1);
    TT_CHECK(pl.e[0].kind == TFRDV_PENDING_RECV && pl.e[0].count == 1);
    tfrdv_cancel_start(cm);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.code, TFRDV_CANCELLED);
    TT_CHECK_STR(a.msg, "RecvAsync is cancelled.");
    TT_CHECK(a.value == NULL);
    TT_CHECK(a.ra.cancel == cm);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
    tfrdv_cancel_start(cm); /* cancel twice */
    TT_CHECK_EQ_INT(a.calls, 1);
    /* the later send is buffered, not lost */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(pending(r, &pl), 1);
    TT_CHECK(pl.e[0].kind == TFRDV_PENDING_SEND && pl.e[0].count == 1);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &b, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(b.id, 9);
    tfrdv_cancel_mgr_destroy(cm);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(rel(&v), 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_cancel_after_match_does_nothing(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr* cm = mk_cm(&ca);
    tfrdv_args args = cancel_args(cm);
    tkey k;
    tval v1, v2;
    rcv a, b;
    tkey_init(&k, "k");
    tval_init(&v1, 1);
    tval_init(&v2, 2);
    rcv_init(&a);
    rcv_init(&b);
    /* waiter matched by a send */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &args, rcv_done, &a, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v1.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.code, TFRDV_OK);
    /* receive served from the buffer at once (never registered) */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v2.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &args, rcv_done, &b, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(b.calls, 1);
    tfrdv_cancel_start(cm);
    tfrdv_cancel_start(cm);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(a.code, TFRDV_OK);
    tfrdv_cancel_mgr_destroy(cm);
    tfrdv_destroy(r);
    TT_CHECK(rel(&v1) == 1 && rel(&v2) == 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_recv_on_cancelled_mgr_completes_at_once(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr* cm = mk_cm(&ca);
    tfrdv_args args = cancel_args(cm);
    tkey k;
    tval v;
    rcv a;
    pend_list pl;
    tkey_init(&k, "k");
    tval_init(&v, 1);
    rcv_init(&a);
    tfrdv_cancel_start(cm);
    g_phase = 4;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &args, rcv_done, &a, 0), TFRDV_OK);
    g_phase = 0;
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.phase, 4);
    TT_CHECK_EQ_INT(a.code, TFRDV_CANCELLED);
    TT_CHECK_STR(a.msg, "RecvAsync is cancelled.");
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(pending(r, &pl), 1);
    TT_CHECK(pl.e[0].kind == TFRDV_PENDING_SEND);
    TT_CHECK_EQ_INT(a.calls, 1);
    tfrdv_destroy(r);
    tfrdv_cancel_mgr_destroy(cm);
    TT_CHECK_EQ_INT(rel(&v), 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_cancel_middle_and_tail_keeps_fifo(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr* cm1 = mk_cm(&ca);
    tfrdv_cancel_mgr* cm2 = mk_cm(&ca);
    tfrdv_args a1 = cancel_args(cm1), a2 = cancel_args(cm2);
    tkey k;
    tval v[3];
    rcv x[5];
    int i;
    tkey_init(&k, "k");
    for (i = 0; i < 5; i++) rcv_init(&x[i]);
    for (i = 0; i < 3; i++) tval_init(&v[i], i);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &x[0], 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &a1, rcv_done, &x[1], 0), TFRDV_OK); /* middle */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &x[2], 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &a2, rcv_done, &x[3], 0), TFRDV_OK); /* tail */
    tfrdv_cancel_start(cm1);
    tfrdv_cancel_start(cm2);
    TT_CHECK(x[1].calls == 1 && x[1].code == TFRDV_CANCELLED);
    TT_CHECK(x[3].calls == 1 && x[3].code == TFRDV_CANCELLED);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &x[4], 0), TFRDV_OK); /* after the old tail */
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v[i].v, 0, NULL), TFRDV_OK);
    TT_CHECK(x[0].calls == 1 && x[0].id == 0);
    TT_CHECK(x[2].calls == 1 && x[2].id == 1);
    TT_CHECK(x[4].calls == 1 && x[4].id == 2);
    TT_CHECK(x[1].calls == 1 && x[3].calls == 1);
    tfrdv_cancel_mgr_destroy(cm1);
    tfrdv_cancel_mgr_destroy(cm2);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}

/* Receivers of one key, each with its own manager, cancelled in a shuffled order that includes
   the newest, the oldest and runs of neighbours: the ring unlinks each one where it is, and the
   survivors are served in arrival order. */
#define SHUF_N 600
static void test_cancel_receivers_in_shuffled_order_keeps_the_rest_fifo(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr** cm = (tfrdv_cancel_mgr**)calloc(SHUF_N, sizeof *cm);
    rcv* x = (rcv*)calloc(SHUF_N, sizeof *x);
    tval* v = (tval*)calloc(SHUF_N, sizeof *v);
    int* order = (int*)calloc(SHUF_N, sizeof *order);
    char* gone = (char*)calloc(SHUF_N, 1);
    tkey k;
    pend_list pl;
    int i, ncancel = 0, next = 0;
    TT_CHECK(cm && x && v && order && gone);
    if (!cm || !x || !v || !order || !gone) return;
    tkey_init(&k, "k");
    for (i = 0; i < SHUF_N; i++) {
        tfrdv_args a;
        cm[i] = mk_cm(&ca);
        a = cancel_args(cm[i]);
        rcv_init(&x[i]);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &a, rcv_done, &x[i], 0), TFRDV_OK);
    }
    /* the newest and the oldest first, then two thirds of a shuffle */
    fx_cancel_shuffled(cm, SHUF_N, SHUF_N * 2 / 3, 12345u, order, gone);
    for (i = 0; i < SHUF_N; i++) {
        if (gone[i]) {
            ncancel++;
            TT_CHECK(x[i].calls == 1 && x[i].code == TFRDV_CANCELLED);
        } else {
            TT_CHECK_EQ_INT(x[i].calls, 0);
        }
    }
    TT_CHECK_EQ_INT(pending(r, &pl), 1);
    TT_CHECK(pl.e[0].kind == TFRDV_PENDING_RECV && pl.e[0].count == (size_t)(SHUF_N - ncancel));
    for (i = 0; i < SHUF_N - ncancel; i++) {
        tval_init(&v[i], i);
        TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v[i].v, 0, NULL), TFRDV_OK);
    }
    for (i = 0; i < SHUF_N; i++) /* the survivors got values 0, 1, 2, ... in arrival order */
        if (!gone[i]) TT_CHECK(x[i].calls == 1 && x[i].code == TFRDV_OK && x[i].id == next++);
    TT_CHECK_EQ_INT(next, SHUF_N - ncancel);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
    for (i = 0; i < SHUF_N; i++) tfrdv_cancel_mgr_destroy(cm[i]);
    tfrdv_destroy(r);
    for (i = 0; i < SHUF_N - ncancel; i++) TT_CHECK_EQ_INT(rel(&v[i]), 1);
    FX_CHECK_EMPTY(&ca);
    free(cm);
    free(x);
    free(v);
    free(order);
    free(gone);
}

static void test_abort_then_cancel_completes_once(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr* cm = mk_cm(&ca);
    tfrdv_args args = cancel_args(cm);
    tkey k;
    rcv a;
    tkey_init(&k, "k");
    rcv_init(&a);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &args, rcv_done, &a, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_ABORTED, "boom"), TFRDV_OK);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.code, TFRDV_ABORTED);
    tfrdv_cancel_start(cm);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.code, TFRDV_ABORTED);
    tfrdv_cancel_mgr_destroy(cm);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(a.calls, 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_cancel_then_abort_completes_once(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr* cm = mk_cm(&ca);
    tfrdv_args args = cancel_args(cm);
    tkey k;
    rcv a, b;
    tkey_init(&k, "k");
    rcv_init(&a);
    rcv_init(&b);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &args, rcv_done, &a, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, rcv_done, &b, 0), TFRDV_OK);
    tfrdv_cancel_start(cm);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.code, TFRDV_CANCELLED);
    TT_CHECK_EQ_INT(b.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_ABORTED, "boom"), TFRDV_OK);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.code, TFRDV_CANCELLED);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(b.code, TFRDV_ABORTED);
    tfrdv_destroy(r);
    tfrdv_cancel_mgr_destroy(cm);
    FX_CHECK_EMPTY(&ca);
}

static void test_cancel_mgr_destroyed_after_use(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr* cm1 = mk_cm(&ca);
    tfrdv_cancel_mgr* cm2 = mk_cm(&ca);
    tfrdv_args a1 = cancel_args(cm1), a2 = cancel_args(cm2);
    tkey k, k2;
    tval v;
    rcv a, b;
    tkey_init(&k, "k");
    tkey_init(&k2, "k2");
    tval_init(&v, 1);
    rcv_init(&a);
    rcv_init(&b);
    /* used and matched: destroying it calls nothing */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &a1, rcv_done, &a, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, NULL), TFRDV_OK);
    tfrdv_cancel_mgr_destroy(cm1);
    TT_CHECK_EQ_INT(a.calls, 1);
    TT_CHECK_EQ_INT(a.code, TFRDV_OK);
    /* still pending: destroying it cancels the receive once */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k2.pk, &a2, rcv_done, &b, 0), TFRDV_OK);
    tfrdv_cancel_mgr_destroy(cm2);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(b.code, TFRDV_CANCELLED);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(b.calls, 1);
    FX_CHECK_EMPTY(&ca);
}

/* one manager cancels several receives on several keys: each once, in registration order */
static void test_one_cancel_mgr_many_receives(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr* cm = mk_cm(&ca);
    tfrdv_args args = cancel_args(cm);
    tkey k[4];
    rcv a[8];
    int i;
    for (i = 0; i < 4; i++) tkey_num(&k[i], i);
    for (i = 0; i < 8; i++) {
        rcv_init(&a[i]);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k[i % 4].pk, &args, rcv_done, &a[i], 0), TFRDV_OK);
    }
    g_seq = 0;
    tfrdv_cancel_start(cm);
    for (i = 0; i < 8; i++) {
        TT_CHECK_EQ_INT(a[i].calls, 1);
        TT_CHECK_EQ_INT(a[i].code, TFRDV_CANCELLED);
        TT_CHECK_EQ_INT(a[i].seq, i + 1);
    }
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
    tfrdv_cancel_mgr_destroy(cm);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}

/* ---- blocking receive ------------------------------------------------------------------------- */
typedef struct sender {
    tfrdv_rendezvous* r;
    tkey* k;
    tval* v;
    int delay_ms;
    tfrdv_code rc;
    tfrdv_cancel_mgr* cancel; /* instead of sending: cancel this */
} sender;
static void* sender_main(void* p) {
    sender* s = (sender*)p;
    sleep_ms(s->delay_ms);
    if (s->cancel) tfrdv_cancel_start(s->cancel);
    else s->rc = tfrdv_send(s->r, &s->k->pk, NULL, &s->v->v, 0, NULL);
    return NULL;
}
static void sender_init(sender* s, tfrdv_rendezvous* r, tkey* k, tval* v, int delay_ms) {
    memset(s, 0, sizeof *s);
    s->r = r;
    s->k = k;
    s->v = v;
    s->delay_ms = delay_ms;
}
/* a thread that sends v on k after delay_ms; returns pthread_create's result */
static int sender_start(sender* s, pthread_t* th, tfrdv_rendezvous* r, tkey* k, tval* v, int delay_ms) {
    sender_init(s, r, k, v, delay_ms);
    return pthread_create(th, NULL, sender_main, s);
}

static void test_sync_recv_value_from_another_thread(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v;
    sender s;
    pthread_t th;
    tfrdv_value* got = 0;
    int dead = 7;
    tfrdv_status st;
    tkey_init(&k, "sync");
    tval_init(&v, 11);
    TT_CHECK_EQ_INT(sender_start(&s, &th, r, &k, &v, 30), 0);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, NULL, (int64_t)10 * 1000000000, &got, &dead, &st), TFRDV_OK);
    pthread_join(th, NULL);
    TT_CHECK_EQ_INT(s.rc, TFRDV_OK);
    TT_CHECK(got == &v.v);
    TT_CHECK_EQ_INT(dead, 0);
    TT_CHECK_EQ_INT(st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(rel(&v), 0);
    tfrdv_value_release(got);
    TT_CHECK_EQ_INT(rel(&v), 1);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}

static void test_sync_recv_timeout_removes_the_waiter(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v;
    tfrdv_value* got = (tfrdv_value*)&got;
    tfrdv_status st;
    pend_list pl;
    tkey_init(&k, "late");
    tval_init(&v, 12);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, NULL, (int64_t)20 * 1000000, &got, NULL, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_EQ_INT(st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK(got == NULL);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0); /* the waiter is gone */
    /* the late send is buffered (TensorFlow would hand it to the dead waiter) */
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(pending(r, &pl), 1);
    TT_CHECK(pl.e[0].kind == TFRDV_PENDING_SEND && pl.e[0].count == 1);
    TT_CHECK_EQ_INT(rel(&v), 0);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, NULL, (int64_t)1000000000, &got, NULL, &st), TFRDV_OK);
    TT_CHECK(got == &v.v);
    tfrdv_value_release(got);
    TT_CHECK_EQ_INT(rel(&v), 1);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}

static void test_sync_recv_timeout_zero_waits_forever(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v1, v2;
    sender s;
    pthread_t th;
    tfrdv_value* got = 0;
    tfrdv_status st;
    tkey_init(&k, "forever");
    tval_init(&v1, 1);
    tval_init(&v2, 2);
    TT_CHECK_EQ_INT(sender_start(&s, &th, r, &k, &v1, 100), 0);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, NULL, 0, &got, NULL, &st), TFRDV_OK);
    pthread_join(th, NULL);
    TT_CHECK(got == &v1.v);
    tfrdv_value_release(got);
    TT_CHECK_EQ_INT(sender_start(&s, &th, r, &k, &v2, 50), 0);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, NULL, -5, &got, NULL, &st), TFRDV_OK); /* negative: forever */
    pthread_join(th, NULL);
    TT_CHECK(got == &v2.v);
    tfrdv_value_release(got);
    TT_CHECK(rel(&v1) == 1 && rel(&v2) == 1);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}

static void test_sync_recv_buffered_dead_and_aborted(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tfrdv_value* got = 0;
    int dead = 0;
    tfrdv_status st;
    tkey_init(&k, "k");
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, NULL, 1, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, NULL, (int64_t)1000000000, &got, &dead, &st), TFRDV_OK);
    TT_CHECK(got == NULL);
    TT_CHECK_EQ_INT(dead, 1);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, NULL, 0, NULL, &dead, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_ABORTED, "gone"), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, NULL, (int64_t)1000000000, &got, &dead, &st), TFRDV_ABORTED);
    TT_CHECK_STR(st.msg, "gone");
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, NULL, 0, &got, &dead, &st), TFRDV_ABORTED);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}

static void test_sync_recv_user_cancel_is_cancelled_not_deadline(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr* cm;
    tfrdv_args args;
    tkey k;
    sender s;
    pthread_t th;
    tfrdv_value* got = 0;
    tfrdv_status st;
    int pass;
    tkey_init(&k, "k");
    for (pass = 0; pass < 3; pass++) {
        int64_t timeout = pass == 0 ? (int64_t)10 * 1000000000 : 0;
        cm = mk_cm(&ca);
        args = cancel_args(cm);
        memset(&s, 0, sizeof s);
        s.cancel = cm;
        s.delay_ms = 30;
        if (pass == 2) {
            tfrdv_cancel_start(cm); /* already cancelled before the receive */
            timeout = (int64_t)10 * 1000000000;
        } else {
            TT_CHECK_EQ_INT(pthread_create(&th, NULL, sender_main, &s), 0);
        }
        TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, &args, timeout, &got, NULL, &st), TFRDV_CANCELLED);
        TT_CHECK_STR(st.msg, "RecvAsync is cancelled.");
        if (pass != 2) pthread_join(th, NULL);
        TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
        tfrdv_cancel_mgr_destroy(cm);
    }
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}

/* ---- re-entrancy ----------------------------------------------------------------------------- */
typedef struct act {
    tfrdv_rendezvous* r;
    tkey* k1;
    tkey* k2;
    tval* v1;
    tval* v2;
    rcv* x1;
    tfrdv_code rc1, rc2;
    fx_alloc* ca;
    long live_in_cb;
} act;
static void then_send_two(rcv* self) {
    act* a = (act*)self->ctx;
    a->rc1 = tfrdv_send(a->r, &a->k1->pk, NULL, &a->v1->v, 0, NULL);
    a->rc2 = tfrdv_send(a->r, &a->k2->pk, NULL, &a->v2->v, 0, NULL);
}
static void test_send_from_inside_recv_callback(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey ka, kb;
    tval v0, v1, v2;
    rcv x1, x2, x3;
    act a;
    tkey_init(&ka, "a");
    tkey_init(&kb, "b");
    tval_init(&v0, 0);
    tval_init(&v1, 1);
    tval_init(&v2, 2);
    rcv_init(&x1);
    rcv_init(&x2);
    rcv_init(&x3);
    memset(&a, 0, sizeof a);
    a.r = r;
    a.k1 = &ka; /* same key: served to the second waiter, nested */
    a.k2 = &kb; /* another key: buffered */
    a.v1 = &v1;
    a.v2 = &v2;
    x1.then = then_send_two;
    x1.ctx = &a;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x1, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x2, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v0.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(a.rc1, TFRDV_OK);
    TT_CHECK_EQ_INT(a.rc2, TFRDV_OK);
    TT_CHECK(x1.calls == 1 && x1.id == 0);
    TT_CHECK(x2.calls == 1 && x2.id == 1);
    TT_CHECK(x2.seq > x1.seq);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &kb.pk, NULL, rcv_done, &x3, 0), TFRDV_OK);
    TT_CHECK(x3.calls == 1 && x3.id == 2);
    tfrdv_destroy(r);
    TT_CHECK(rel(&v0) == 1 && rel(&v1) == 1 && rel(&v2) == 1);
    FX_CHECK_EMPTY(&ca);
}

static void then_recv(rcv* self) {
    act* a = (act*)self->ctx;
    a->rc1 = tfrdv_recv_async(a->r, &a->k1->pk, NULL, rcv_done, a->x1, 0);
}
static void test_recv_from_inside_recv_callback(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey ka, kb;
    tval v0, v1, v2;
    rcv x1, x2, x3, x4;
    act a, b;
    tkey_init(&ka, "a");
    tkey_init(&kb, "b");
    tval_init(&v0, 0);
    tval_init(&v1, 1);
    tval_init(&v2, 2);
    rcv_init(&x1);
    rcv_init(&x2);
    rcv_init(&x3);
    rcv_init(&x4);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    /* two values buffered on a; the first receiver's callback receives the second, nested */
    TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v0.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v1.v, 0, NULL), TFRDV_OK);
    a.r = r;
    a.k1 = &ka;
    a.x1 = &x2;
    x1.then = then_recv;
    x1.ctx = &a;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x1, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(a.rc1, TFRDV_OK);
    TT_CHECK(x1.calls == 1 && x1.id == 0);
    TT_CHECK(x2.calls == 1 && x2.id == 1);
    /* a receiver's callback registers a waiter on another key; a later send serves it */
    b.r = r;
    b.k1 = &kb;
    b.x1 = &x4;
    x3.then = then_recv;
    x3.ctx = &b;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x3, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v2.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(x3.calls, 1);
    TT_CHECK_EQ_INT(x4.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 1);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(x4.calls, 1);
    TT_CHECK_EQ_INT(x4.code, TFRDV_CANCELLED);
    TT_CHECK(rel(&v0) == 1 && rel(&v1) == 1 && rel(&v2) == 1);
    FX_CHECK_EMPTY(&ca);
}

static void then_abort(rcv* self) {
    act* a = (act*)self->ctx;
    if (a->rc1 == TFRDV_UNKNOWN) a->rc1 = tfrdv_abort(a->r, TFRDV_ABORTED, "from a callback");
    else a->rc2 = tfrdv_abort(a->r, TFRDV_INTERNAL, "nested abort");
}
static void test_abort_from_inside_recv_callback(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey ka, kb, kc;
    tval v0, vc;
    rcv x[4];
    act a;
    tfrdv_status st;
    int i;
    tkey_init(&ka, "a");
    tkey_init(&kb, "b");
    tkey_init(&kc, "c");
    tval_init(&v0, 0);
    tval_init(&vc, 5);
    memset(&a, 0, sizeof a);
    a.r = r;
    a.rc1 = TFRDV_UNKNOWN;
    a.rc2 = TFRDV_UNKNOWN;
    for (i = 0; i < 4; i++) {
        rcv_init(&x[i]);
        x[i].then = then_abort;
        x[i].ctx = &a;
    }
    TT_CHECK_EQ_INT(tfrdv_send(r, &kc.pk, NULL, &vc.v, 0, NULL), TFRDV_OK); /* buffered */
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x[i], 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &kb.pk, NULL, rcv_done, &x[3], 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v0.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(a.rc1, TFRDV_OK);
    TT_CHECK_EQ_INT(a.rc2, TFRDV_OK); /* nested abort from an abort-completed callback: no-op */
    TT_CHECK(x[0].calls == 1 && x[0].code == TFRDV_OK && x[0].id == 0);
    for (i = 1; i < 4; i++) {
        TT_CHECK_EQ_INT(x[i].calls, 1);
        TT_CHECK_EQ_INT(x[i].code, TFRDV_ABORTED);
        TT_CHECK_STR(x[i].msg, "from a callback");
    }
    TT_CHECK_EQ_INT(rel(&vc), 1);
    TT_CHECK_EQ_INT(tfrdv_get_status(r, &st), TFRDV_ABORTED);
    TT_CHECK_STR(st.msg, "from a callback");
    tfrdv_destroy(r);
    for (i = 0; i < 4; i++) TT_CHECK_EQ_INT(x[i].calls, 1);
    TT_CHECK(rel(&v0) == 1 && rel(&vc) == 1);
    FX_CHECK_EMPTY(&ca);
}

static void then_destroy(rcv* self) {
    act* a = (act*)self->ctx;
    tfrdv_destroy(a->r);
    a->live_in_cb = a->ca->live_blocks; /* not freed yet: we are inside its callback */
    a->r = NULL;
}
static void then_unref(rcv* self) {
    act* a = (act*)self->ctx;
    tfrdv_unref(a->r);
    a->live_in_cb = a->ca->live_blocks;
}
static void test_destroy_from_inside_own_callback(void) {
    static const char* const names[4] = {"recv path", "send path", "abort path", "cancel path"};
    int variant;
    for (variant = 0; variant < 4; variant++) {
        fx_alloc ca;
        tfrdv_rendezvous* r = mk_rdv(&ca);
        tfrdv_cancel_mgr* cm = 0;
        tfrdv_args args;
        tkey ka, kb, kc;
        tval v1, vbuf;
        rcv x1, x2;
        act a;
        int fails = tt_cur;
        tkey_init(&ka, "a");
        tkey_init(&kb, "b");
        tkey_init(&kc, "c");
        tval_init(&v1, 1);
        tval_init(&vbuf, 2);
        rcv_init(&x1);
        rcv_init(&x2);
        memset(&a, 0, sizeof a);
        memset(&args, 0, sizeof args);
        a.r = r;
        a.ca = &ca;
        x1.then = then_destroy;
        x1.ctx = &a;
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &kb.pk, NULL, rcv_done, &x2, 0), TFRDV_OK); /* another waiter */
        TT_CHECK_EQ_INT(tfrdv_send(r, &kc.pk, NULL, &vbuf.v, 0, NULL), TFRDV_OK);  /* a buffered value */
        if (variant == 0) { /* a buffered value completes the receive inside tfrdv_recv_async */
            TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v1.v, 0, NULL), TFRDV_OK);
            TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x1, 0), TFRDV_OK);
        } else if (variant == 1) { /* the send completes the waiter inside tfrdv_send */
            TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x1, 0), TFRDV_OK);
            TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v1.v, 0, NULL), TFRDV_OK);
        } else if (variant == 2) { /* abort completes it */
            TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x1, 0), TFRDV_OK);
            TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_ABORTED, "abort"), TFRDV_OK);
            tfrdv_value_release(&v1.v);
        } else { /* its cancellation manager completes it */
            cm = mk_cm(&ca);
            args = cancel_args(cm);
            TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, &args, rcv_done, &x1, 0), TFRDV_OK);
            tfrdv_cancel_start(cm);
            tfrdv_value_release(&v1.v);
        }
        TT_CHECK_EQ_INT(x1.calls, 1);
        TT_CHECK_EQ_INT(x1.code, variant == 2 ? TFRDV_ABORTED : variant == 3 ? TFRDV_CANCELLED : TFRDV_OK);
        TT_CHECK(a.r == NULL);
        TT_CHECK(a.live_in_cb > 0);   /* not freed inside the callback */
        TT_CHECK_EQ_INT(x2.calls, 1); /* the other waiter was completed */
        TT_CHECK_EQ_INT(x2.code, variant == 2 ? TFRDV_ABORTED : TFRDV_CANCELLED);
        TT_CHECK_EQ_INT(rel(&vbuf), 1);
        TT_CHECK_EQ_INT(rel(&v1), 1);
        if (cm) tfrdv_cancel_mgr_destroy(cm);
        FX_CHECK_EMPTY(&ca); /* freed when the callback returned */
        if (tt_cur != fails) printf("    (variant: %s)\n", names[variant]);
    }
}

/* destroy from inside the callback of a send (the later arrival), and unref variants */
static void test_destroy_and_unref_from_callback_in_send(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey ka;
    tval v0, v1, v2;
    rcv x1, x2, x3;
    act a;
    tfrdv_status st;
    tkey_init(&ka, "a");
    tval_init(&v0, 0);
    tval_init(&v1, 1);
    tval_init(&v2, 2);
    rcv_init(&x1);
    rcv_init(&x2);
    rcv_init(&x3);
    memset(&a, 0, sizeof a);
    a.r = r;
    a.ca = &ca;
    x1.then = then_destroy;
    x1.ctx = &a;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x1, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x2, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v0.v, 0, NULL), TFRDV_OK);
    TT_CHECK(x1.calls == 1 && x1.code == TFRDV_OK);
    TT_CHECK(x2.calls == 1 && x2.code == TFRDV_CANCELLED);
    TT_CHECK(a.live_in_cb > 0);
    FX_CHECK_EMPTY(&ca);
    /* unref: two references, each dropped inside a callback; the last one frees */
    r = mk_rdv(&ca);
    memset(&a, 0, sizeof a);
    a.r = r;
    a.ca = &ca;
    tfrdv_ref(r);
    rcv_init(&x1);
    rcv_init(&x2);
    x1.then = then_unref;
    x1.ctx = &a;
    x2.then = then_unref;
    x2.ctx = &a;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x1, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v1.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(x1.calls, 1);
    TT_CHECK_EQ_INT(tfrdv_get_status(r, &st), TFRDV_OK); /* one reference left: alive, not aborted */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x3, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &ka.pk, NULL, rcv_done, &x2, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v2.v, 0, NULL), TFRDV_OK); /* x3 gets v2 */
    TT_CHECK_EQ_INT(x3.calls, 1);
    TT_CHECK_EQ_INT(x2.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_ABORTED, "end"), TFRDV_OK); /* x2 unrefs the last ref */
    TT_CHECK(x2.calls == 1 && x2.code == TFRDV_ABORTED);
    TT_CHECK(a.live_in_cb > 0);
    FX_CHECK_EMPTY(&ca);
    TT_CHECK(rel(&v0) == 1 && rel(&v1) == 1 && rel(&v2) == 1);
}

/* ---- teardown ---------------------------------------------------------------------------------- */
static void test_destroy_cancels_waiters_and_releases_buffered(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k[4];
    tval v[4];
    rcv x[3];
    int i;
    for (i = 0; i < 4; i++) tkey_num(&k[i], i);
    for (i = 0; i < 3; i++) rcv_init(&x[i]);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k[0].pk, NULL, rcv_done, &x[0], 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k[0].pk, NULL, rcv_done, &x[1], 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k[1].pk, NULL, rcv_done, &x[2], 0), TFRDV_OK);
    for (i = 0; i < 4; i++) {
        tval_init(&v[i], i);
        TT_CHECK_EQ_INT(tfrdv_send(r, &k[2 + i % 2].pk, NULL, &v[i].v, 0, NULL), TFRDV_OK);
    }
    tfrdv_destroy(r);
    for (i = 0; i < 3; i++) {
        TT_CHECK_EQ_INT(x[i].calls, 1);
        TT_CHECK_EQ_INT(x[i].code, TFRDV_CANCELLED);
        TT_CHECK_STR(x[i].msg, "Rendezvous destroyed");
    }
    for (i = 0; i < 4; i++) TT_CHECK_EQ_INT(rel(&v[i]), 1);
    FX_CHECK_EMPTY(&ca);
}

static void test_ref_unref_keep_it_alive(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k;
    tval v;
    rcv x;
    tfrdv_status st;
    tkey_init(&k, "k");
    tval_init(&v, 1);
    rcv_init(&x);
    tfrdv_ref(r);
    tfrdv_unref(r); /* not the last: nothing happens */
    TT_CHECK_EQ_INT(tfrdv_get_status(r, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, NULL), TFRDV_OK);
    tfrdv_ref(r);
    tfrdv_ref(r);
    tfrdv_unref(r);
    tfrdv_unref(r);
    TT_CHECK_EQ_INT(rel(&v), 0); /* still buffered */
    TT_CHECK(ca.live_blocks > 0);
    tfrdv_ref(NULL);
    tfrdv_unref(NULL);
    tfrdv_destroy(NULL);
    tfrdv_unref(r); /* the last reference acts as destroy */
    TT_CHECK_EQ_INT(rel(&v), 1);
    FX_CHECK_EMPTY(&ca);
}

typedef struct slow {
    int started, finished;
} slow;
static void slow_done(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                      tfrdv_value* v, int dead) {
    slow* s = (slow*)user;
    (void)st; (void)sa; (void)ra; (void)dead;
    st_(&s->started, 1);
    sleep_ms(50);
    tfrdv_value_release(v);
    st_(&s->finished, 1);
}
/* a thread that receives on k with slow_done (the value is already there: the callback runs inside
   its tfrdv_recv_async) */
typedef struct slow_receiver {
    tfrdv_rendezvous* r;
    tkey* k;
    slow* s;
    tfrdv_code rc;
} slow_receiver;
static void* slow_receiver_main(void* p) {
    slow_receiver* x = (slow_receiver*)p;
    x->rc = tfrdv_recv_async(x->r, &x->k->pk, NULL, slow_done, x->s, 0);
    return NULL;
}
/* The last reference dropped while a callback runs on another thread (inside its tfrdv_send, or
   inside its tfrdv_recv_async on a buffered value): destroy returns only after that callback
   did, so its caller may free what the callback uses. */
static void test_destroy_waits_for_callback_on_other_thread(void) {
    int variant;
    for (variant = 0; variant < 2; variant++) {
        fx_alloc ca;
        tfrdv_rendezvous* r = mk_rdv(&ca);
        tkey k;
        tval v;
        slow s;
        sender snd;
        slow_receiver sr;
        pthread_t th;
        int spins = 0;
        tkey_init(&k, "slow");
        tval_init(&v, 1);
        memset(&s, 0, sizeof s);
        memset(&sr, 0, sizeof sr);
        snd.rc = TFRDV_OK;
        if (variant == 0) { /* the waiting receiver's callback runs inside the sender thread's send */
            TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, NULL, slow_done, &s, 0), TFRDV_OK);
            TT_CHECK_EQ_INT(sender_start(&snd, &th, r, &k, &v, 0), 0);
        } else { /* a buffered value completes the receiver thread's recv_async inside it */
            TT_CHECK_EQ_INT(tfrdv_send(r, &k.pk, NULL, &v.v, 0, NULL), TFRDV_OK);
            sr.r = r;
            sr.k = &k;
            sr.s = &s;
            TT_CHECK_EQ_INT(pthread_create(&th, NULL, slow_receiver_main, &sr), 0);
        }
        while (!ld(&s.started) && spins++ < 5000) sleep_ms(1);
        TT_CHECK(ld(&s.started));
        tfrdv_destroy(r);
        TT_CHECK_EQ_INT(ld(&s.finished), 1); /* destroy returned only after the callback did */
        pthread_join(th, NULL);
        TT_CHECK_EQ_INT(snd.rc, TFRDV_OK);
        TT_CHECK_EQ_INT(sr.rc, TFRDV_OK);
        TT_CHECK_EQ_INT(rel(&v), 1);
        FX_CHECK_EMPTY(&ca);
        if (tt_cur) printf("    (variant: %s path)\n", variant ? "recv" : "send");
    }
}

/* ---- batch helpers ----------------------------------------------------------------------------- */
/* n numbered keys, their parsed views in pks, and n values with ids 0 .. n-1 */
static void batch_setup(tkey* k, tfrdv_parsed_key* pks, tval* v, int n) {
    int i;
    for (i = 0; i < n; i++) {
        tkey_num(&k[i], i);
        pks[i] = k[i].pk;
        tval_init(&v[i], i);
    }
}
static void test_send_batch_stops_at_first_failure(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k[3];
    tval v[3];
    tfrdv_parsed_key pks[3];
    tfrdv_value* vals[3];
    int dead[3] = {0, 0, 0};
    size_t sent = 99;
    tfrdv_status st;
    int i;
    batch_setup(k, pks, v, 3);
    for (i = 0; i < 3; i++) vals[i] = &v[i].v;
    /* all succeed */
    TT_CHECK_EQ_INT(tfrdv_send_batch(r, 3, pks, NULL, vals, dead, &sent, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(sent, 3);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 3);
    tfrdv_destroy(r);
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(rel(&v[i]), 1);
    FX_CHECK_EMPTY(&ca);
    /* a NULL live value at index 1: index 0 sent, 1 and 2 stay ours */
    r = mk_rdv(&ca);
    for (i = 0; i < 3; i++) tval_init(&v[i], i);
    vals[1] = NULL;
    TT_CHECK_EQ_INT(tfrdv_send_batch(r, 3, pks, NULL, vals, dead, &sent, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(sent, 1);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 1);
    /* an empty key at index 1 */
    vals[1] = &v[1].v;
    memset(&pks[1], 0, sizeof pks[1]);
    TT_CHECK_EQ_INT(tfrdv_send_batch(r, 3, pks, NULL, vals + 0, NULL, &sent, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(sent, 1); /* v[0] sent a second time (a second reference) */
    tfrdv_value_retain(&v[0].v); /* account for that second reference */
    /* aborted: nothing sent, the abort code */
    pks[1] = k[1].pk;
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_ABORTED, "x"), TFRDV_OK);
    TT_CHECK_EQ_INT(rel(&v[0]), 1); /* two references released by the abort */
    TT_CHECK_EQ_INT(tfrdv_send_batch(r, 3, pks, NULL, vals + 1, NULL, &sent, &st), TFRDV_ABORTED);
    TT_CHECK_EQ_INT(sent, 0);
    TT_CHECK_EQ_INT(st.code, TFRDV_ABORTED);
    TT_CHECK(rel(&v[1]) == 0 && rel(&v[2]) == 0);
    TT_CHECK_EQ_INT(tfrdv_send_batch(NULL, 1, pks, NULL, vals, NULL, &sent, &st), TFRDV_INVALID_ARGUMENT);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}

static void test_recv_batch_one_callback_when_all_arrived(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k[3];
    tval v[3];
    tfrdv_parsed_key pks[3];
    tfrdv_value* out[3];
    int dead[3];
    brec b;
    int i;
    memset(&b, 0, sizeof b);
    b.keep = 1;
    batch_setup(k, pks, v, 3);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k[1].pk, NULL, &v[1].v, 1, NULL), TFRDV_OK); /* already there, dead */
    TT_CHECK_EQ_INT(tfrdv_recv_batch_async(r, 3, pks, NULL, out, dead, batch_done, &b), TFRDV_OK);
    TT_CHECK_EQ_INT(b.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k[2].pk, NULL, &v[2].v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(b.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k[0].pk, NULL, &v[0].v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(b.code, TFRDV_OK);
    TT_CHECK_EQ_INT(b.n, 3);
    for (i = 0; i < 3; i++) {
        TT_CHECK(b.vals[i] == &v[i].v); /* in key order, not arrival order */
        TT_CHECK(out[i] == &v[i].v);
        TT_CHECK_EQ_INT(rel(&v[i]), 0);
    }
    TT_CHECK(dead[0] == 0 && dead[1] == 1 && dead[2] == 0);
    for (i = 0; i < 3; i++) tfrdv_value_release(out[i]);
    /* n == 0: done at once */
    memset(&b, 0, sizeof b);
    TT_CHECK_EQ_INT(tfrdv_recv_batch_async(r, 0, NULL, NULL, out, dead, batch_done, &b), TFRDV_OK);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(b.code, TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_batch_async(r, 1, pks, NULL, out, dead, NULL, &b), TFRDV_INVALID_ARGUMENT);
    tfrdv_destroy(r);
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(rel(&v[i]), 1);
    FX_CHECK_EMPTY(&ca);
}

static void then_send_k1(brec* self) {
    act* a = (act*)self->ctx;
    a->rc1 = tfrdv_send(a->r, &a->k1->pk, NULL, &a->v1->v, 0, NULL);
}
static void test_recv_batch_first_error_releases_each_value_once(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tfrdv_cancel_mgr* cm;
    tfrdv_args args;
    tkey k[3];
    tval v[3];
    tfrdv_parsed_key pks[3];
    tfrdv_value* out[3];
    int dead[3];
    brec b;
    act a;
    int i;
    batch_setup(k, pks, v, 3);
    /* abort after one value arrived: one callback, all NULL, the arrived value released once */
    memset(&b, 0, sizeof b);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k[0].pk, NULL, &v[0].v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_batch_async(r, 3, pks, NULL, out, dead, batch_done, &b), TFRDV_OK);
    TT_CHECK_EQ_INT(b.calls, 0);
    TT_CHECK_EQ_INT(rel(&v[0]), 0);
    TT_CHECK_EQ_INT(tfrdv_abort(r, TFRDV_ABORTED, "stop"), TFRDV_OK);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(b.code, TFRDV_ABORTED);
    TT_CHECK_STR(b.msg, "stop");
    for (i = 0; i < 3; i++) TT_CHECK(out[i] == NULL && b.vals[i] == NULL);
    TT_CHECK_EQ_INT(rel(&v[0]), 1);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(rel(&v[0]), 1);
    FX_CHECK_EMPTY(&ca);

    /* a value arriving after the batch failed is released by the batch, once */
    r = mk_rdv(&ca);
    cm = mk_cm(&ca);
    args = cancel_args(cm);
    tval_init(&v[1], 1);
    tval_init(&v[2], 2);
    memset(&b, 0, sizeof b);
    memset(&a, 0, sizeof a);
    a.r = r;
    a.k1 = &k[1];
    a.v1 = &v[1];
    a.rc1 = TFRDV_UNKNOWN;
    b.then = then_send_k1; /* sends key 1 while slot 1 is still waiting */
    b.ctx = &a;
    TT_CHECK_EQ_INT(tfrdv_send(r, &k[2].pk, NULL, &v[2].v, 0, NULL), TFRDV_OK); /* slot 2 arrives now */
    TT_CHECK_EQ_INT(tfrdv_recv_batch_async(r, 3, pks, &args, out, dead, batch_done, &b), TFRDV_OK);
    tfrdv_cancel_start(cm); /* slot 0 cancelled first: the batch fails */
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(b.code, TFRDV_CANCELLED);
    TT_CHECK_EQ_INT(a.rc1, TFRDV_OK);
    for (i = 0; i < 3; i++) TT_CHECK(out[i] == NULL && b.vals[i] == NULL);
    TT_CHECK_EQ_INT(rel(&v[1]), 1); /* arrived late, released by the batch */
    TT_CHECK_EQ_INT(rel(&v[2]), 1); /* arrived early, released at the failure */
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 0);
    tfrdv_cancel_mgr_destroy(cm);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK(rel(&v[1]) == 1 && rel(&v[2]) == 1);
    FX_CHECK_EMPTY(&ca);
}

/* the last two values of a batch arrive at the same time on two threads: exactly one callback */
typedef struct bracer {
    tfrdv_rendezvous* r;
    tkey* k;
    tval* v;
    pthread_barrier_t* bar;
    int rounds;
} bracer;
static void* bracer_main(void* p) {
    bracer* b = (bracer*)p;
    int i;
    for (i = 0; i < b->rounds; i++) {
        pthread_barrier_wait(b->bar);
        tfrdv_send(b->r, &b->k->pk, NULL, &b->v[i].v, 0, NULL);
        pthread_barrier_wait(b->bar);
    }
    return NULL;
}
#define BR_ROUNDS 3000
static tval br_vals[2][BR_ROUNDS];
static void test_recv_batch_concurrent_last_arrivals(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k[2];
    tfrdv_parsed_key pks[2];
    tfrdv_value* out[2];
    int dead[2];
    brec b;
    bracer t[2];
    pthread_t th[2];
    pthread_barrier_t bar;
    int i, j, missed = 0, doubled = 0, unreleased = 0;
    for (i = 0; i < 2; i++) {
        tkey_num(&k[i], i);
        pks[i] = k[i].pk;
        for (j = 0; j < BR_ROUNDS; j++) tval_init(&br_vals[i][j], j);
    }
    pthread_barrier_init(&bar, NULL, 3);
    for (i = 0; i < 2; i++) {
        t[i].r = r;
        t[i].k = &k[i];
        t[i].v = br_vals[i];
        t[i].bar = &bar;
        t[i].rounds = BR_ROUNDS;
        pthread_create(&th[i], NULL, bracer_main, &t[i]);
    }
    for (j = 0; j < BR_ROUNDS; j++) {
        memset(&b, 0, sizeof b);
        TT_CHECK_EQ_INT(tfrdv_recv_batch_async(r, 2, pks, NULL, out, dead, batch_done, &b), TFRDV_OK);
        pthread_barrier_wait(&bar); /* both threads send now */
        pthread_barrier_wait(&bar); /* both sends returned */
        if (b.calls == 0) missed++;
        if (b.calls > 1) doubled++;
    }
    for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    tfrdv_destroy(r);
    for (i = 0; i < 2; i++)
        for (j = 0; j < BR_ROUNDS; j++) unreleased += rel(&br_vals[i][j]) != 1;
    if (missed) printf("    %d of %d batches never completed\n", missed, BR_ROUNDS);
    TT_CHECK_EQ_INT(missed, 0);
    TT_CHECK_EQ_INT(doubled, 0);
    TT_CHECK_EQ_INT(unreleased, 0);
    FX_CHECK_EMPTY(&ca);
}

/* ---- introspection ----------------------------------------------------------------------------- */
static void test_pending_reports_kinds_and_counts(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey ka, kb, kc;
    tval v[3];
    rcv x[3];
    pend_list pl;
    const pend_ent* e;
    int i;
    tkey_init(&ka, "a");
    tkey_init(&kb, "b");
    tkey_init(&kc, "c");
    TT_CHECK_EQ_INT(pending(r, &pl), 0);
    TT_CHECK_EQ_INT(tfrdv_pending(NULL, pend_cb, &pl), 0);
    for (i = 0; i < 3; i++) {
        tval_init(&v[i], i);
        rcv_init(&x[i]);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &kb.pk, NULL, rcv_done, &x[i], 0), TFRDV_OK);
    }
    TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v[0].v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &ka.pk, NULL, &v[1].v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &kc.pk, NULL, NULL, 1, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(pending(r, &pl), 3);
    TT_CHECK_EQ_INT(pl.n, 3);
    e = pend_find(&pl, &ka);
    TT_CHECK(e && e->kind == TFRDV_PENDING_SEND && e->count == 2 && e->step == 0);
    e = pend_find(&pl, &kb);
    TT_CHECK(e && e->kind == TFRDV_PENDING_RECV && e->count == 3 && e->step == 0);
    e = pend_find(&pl, &kc);
    TT_CHECK(e && e->kind == TFRDV_PENDING_SEND && e->count == 1);
    TT_CHECK_EQ_INT(tfrdv_send(r, &kb.pk, NULL, &v[2].v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(pending(r, &pl), 3);
    e = pend_find(&pl, &kb);
    TT_CHECK(e && e->kind == TFRDV_PENDING_RECV && e->count == 2);
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 3); /* NULL fn: just the count */
    tfrdv_destroy(r);
    TT_CHECK(x[0].calls == 1 && x[1].calls == 1 && x[2].calls == 1);
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(rel(&v[i]), 1);
    FX_CHECK_EMPTY(&ca);
}

/* ---- allocator hooks ---------------------------------------------------------------------------- */
static void test_allocator_sized_free_everything_freed(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv_cfg(&ca, 2, 1); /* tiny tables: they grow */
    tfrdv_cancel_mgr* cm = mk_cm(&ca);
    tfrdv_args args = cancel_args(cm);
    tfrdv_value* got;
    tfrdv_status st;
    static tkey k[300];
    static tval v[300];
    static rcv x[300];
    tfrdv_parsed_key pks[2];
    tfrdv_value* out[2];
    int dead[2];
    brec b;
    int i;
    for (i = 0; i < 300; i++) {
        tkey_num(&k[i], i);
        tval_init(&v[i], i);
        rcv_init(&x[i]);
    }
    for (i = 0; i < 300; i++) TT_CHECK_EQ_INT(tfrdv_send(r, &k[i].pk, NULL, &v[i].v, 0, NULL), TFRDV_OK);
    for (i = 0; i < 150; i++) TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k[i].pk, NULL, rcv_done, &x[i], 0), TFRDV_OK);
    for (i = 150; i < 200; i++) { /* consume twice: the second waits, with a cancel manager */
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k[i].pk, NULL, rcv_done, &x[i], 0), TFRDV_OK);
        rcv_init(&x[i]);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k[i].pk, &args, rcv_done, &x[i], 0), TFRDV_OK);
    }
    TT_CHECK_EQ_INT(tfrdv_pending(r, NULL, NULL), 150);
    tfrdv_cancel_start(cm);
    TT_CHECK(ca.allocs > 0);
    /* a blocking receive with a timeout (makes its own cancellation manager) */
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k[0].pk, NULL, 1000000, &got, NULL, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k[250].pk, NULL, 1000000000, &got, NULL, &st), TFRDV_OK);
    tfrdv_value_release(got);
    /* a batch */
    memset(&b, 0, sizeof b);
    pks[0] = k[260].pk;
    pks[1] = k[0].pk;
    TT_CHECK_EQ_INT(tfrdv_recv_batch_async(r, 2, pks, NULL, out, dead, batch_done, &b), TFRDV_OK);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(b.code, TFRDV_CANCELLED);
    tfrdv_cancel_mgr_destroy(cm);
    for (i = 0; i < 300; i++) TT_CHECK_EQ_INT(rel(&v[i]), 1);
    for (i = 0; i < 200; i++) TT_CHECK_EQ_INT(x[i].calls, 1);
    FX_CHECK_EMPTY(&ca);
}

#define SS_KEYS 400
static tkey ss_keys[SS_KEYS];
static tval ss_vals[SS_KEYS];
static rcv ss_rcvs[SS_KEYS];
static int ss_round(tfrdv_rendezvous* r, int n) {
    int i, bad = 0;
    for (i = 0; i < n / 2; i++) { /* half the keys: receiver first */
        ss_rcvs[i].calls = 0;
        if (tfrdv_recv_async(r, &ss_keys[i].pk, NULL, rcv_done, &ss_rcvs[i], 0) != TFRDV_OK) bad++;
    }
    for (i = 0; i < n; i++)
        if (tfrdv_send(r, &ss_keys[i].pk, NULL, &ss_vals[i].v, 0, NULL) != TFRDV_OK) bad++;
    for (i = n / 2; i < n; i++) {
        ss_rcvs[i].calls = 0;
        if (tfrdv_recv_async(r, &ss_keys[i].pk, NULL, rcv_done, &ss_rcvs[i], 0) != TFRDV_OK) bad++;
    }
    for (i = 0; i < n; i++)
        if (ss_rcvs[i].calls != 1 || ss_rcvs[i].id != i) bad++;
    return bad;
}
/* n keys in flight at once, round after round: no allocation or free after the first round.
   free_max 0 is the default (64 channels of each kind per shard, tables shrink from 64 slots);
   a wider working set sets free_max and min_buckets (so its tables never shrink between rounds). */
static void steady_state(int n, int free_max, int min_buckets) {
    fx_alloc ca;
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    long allocs, frees;
    int i, bad = 0;
    cfg.hooks = ca_hooks(&ca);
    cfg.free_max = free_max;
    cfg.min_buckets = min_buckets;
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, 0), TFRDV_OK);
    for (i = 0; i < n; i++) {
        tkey_num(&ss_keys[i], i);
        tval_init(&ss_vals[i], i);
        ss_vals[i].v.release = NULL; /* reused every round */
        rcv_init(&ss_rcvs[i]);
    }
    bad += ss_round(r, n); /* warm-up */
    allocs = ca.allocs;
    frees = ca.frees;
    for (i = 0; i < 10000; i++) bad += ss_round(r, n);
    TT_CHECK_EQ_INT(bad, 0);
    TT_CHECK_EQ_INT(ca.allocs - allocs, 0);
    TT_CHECK_EQ_INT(ca.frees - frees, 0);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}
static void test_allocator_steady_state_allocates_nothing(void) {
    steady_state(100, 0, 0);      /* ~25 keys per shard: within the defaults */
    steady_state(SS_KEYS, 256, 256); /* ~100 per shard: configured */
}

/* ---- shared key prefixes ---------------------------------------------------------------------
   Once a shard holds a few keys, a new send channel keeps a pointer to a shared copy of the key's
   "src;incarnation;dst;" part instead of the bytes. Matching must still be on the whole key. */
#define PX_PAIRS 3
#define PX_EDGES 40
#define PX_N (PX_PAIRS * PX_EDGES)
static tkey px_keys[PX_N];
static tval px_vals[PX_N];
static int px_seen[PX_N];
static void px_make(int pairs) { /* pairs differ in incarnation or destination only; edges repeat */
    int p, e;
    for (p = 0; p < pairs; p++)
        for (e = 0; e < PX_EDGES; e++) {
            char edge[32];
            snprintf(edge, sizeof edge, "edge_%d", e);
            tkey_make(&px_keys[p * PX_EDGES + e], SRC, p == 1 ? 2 : 1, p == 2 ? SRC : DST, edge);
            tval_init(&px_vals[p * PX_EDGES + e], p * PX_EDGES + e);
            /* the same edge collides in every pair: only the bytes tell the keys apart */
            px_keys[p * PX_EDGES + e].pk.hash = px_keys[e].pk.hash;
        }
}
static void px_pend_cb(void* user, int64_t step, tfrdv_pending_kind kind, const char* key, size_t len, size_t count) {
    int i;
    (void)step;
    for (i = 0; i < PX_N; i++)
        if (strlen(px_keys[i].buf) == len && memcmp(px_keys[i].buf, key, len) == 0 && kind == TFRDV_PENDING_SEND &&
            count == 1)
            px_seen[i]++;
    (*(int*)user)++;
}
static void test_table_shared_prefix_keys_match_only_whole_keys(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv_cfg(&ca, 1, 0); /* one shard: every key shares its table */
    tkey other;
    tfrdv_value* got = 0;
    tfrdv_status st;
    int i, reports = 0, dead = 0;
    px_make(PX_PAIRS);
    for (i = 0; i < PX_N; i++) TT_CHECK_EQ_INT(tfrdv_send(r, &px_keys[i].pk, NULL, &px_vals[i].v, 0, NULL), TFRDV_OK);
    /* the snapshot rebuilds every key byte for byte */
    memset(px_seen, 0, sizeof px_seen);
    TT_CHECK_EQ_INT((long)tfrdv_pending(r, px_pend_cb, &reports), PX_N);
    TT_CHECK_EQ_INT(reports, PX_N);
    for (i = 0; i < PX_N; i++) TT_CHECK_EQ_INT(px_seen[i], 1);
    /* same edge, a device pair never sent: no value */
    tkey_make(&other, DST, 1, SRC, "edge_7");
    other.pk.hash = px_keys[7].pk.hash;
    TT_CHECK_EQ_INT(tfrdv_recv(r, &other.pk, NULL, 1000000, &got, &dead, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK(got == NULL);
    for (i = PX_N - 1; i >= 0; i--) { /* each key gets its own value */
        got = 0;
        /* a value taken by a wrong key would leave this one waiting: a bound, not a hang */
        TT_CHECK_EQ_INT(tfrdv_recv(r, &px_keys[i].pk, NULL, 1000000000, &got, &dead, &st), TFRDV_OK);
        TT_CHECK(got == &px_vals[i].v);
        tfrdv_value_release(got);
    }
    TT_CHECK_EQ_INT((long)tfrdv_pending(r, NULL, NULL), 0);
    tfrdv_destroy(r);
    FX_CHECK_EMPTY(&ca);
}
/* More device pairs than a shard caches (16), a pair's last key leaving and coming back, and
   every prefix allocation failing: keys then stay whole, nothing is lost or leaked. */
static size_t px_fail_size;
static long px_failed;
static void* px_alloc(void* u, size_t n) {
    if (n != px_fail_size) return fx_alloc_fn(u, n);
    px_failed++;
    return 0;
}
static void test_table_shared_prefix_cache_full_or_out_of_memory_keeps_whole_keys(void) {
    enum { PAIRS = 40, EDGES = 12 };
    static tkey keys[PAIRS * EDGES];
    static tval vals[PAIRS * EDGES];
    int pass;
    for (pass = 0; pass < 2; pass++) {
        fx_alloc ca;
        tfrdv_config cfg = tfrdv_config_init();
        tfrdv_rendezvous* r = 0;
        int p, e, round;
        cfg.hooks = ca_hooks(&ca);
        cfg.num_shards = 1;
        for (p = 0; p < PAIRS; p++)
            for (e = 0; e < EDGES; e++) {
                char dst[64], edge[32];
                snprintf(dst, sizeof dst, "/job:w/replica:0/task:%d/device:CPU:0", p);
                snprintf(edge, sizeof edge, "edge_%d", e);
                tkey_make(&keys[p * EDGES + e], SRC, 1, dst, edge);
                tval_init(&vals[p * EDGES + e], p * EDGES + e);
            }
        /* pass 1: the allocation of a prefix copy (header + "src;inc;dst;") fails */
        px_fail_size = 0;
        px_failed = 0;
        if (pass == 1) {
            tfrdv_str edge = keys[0].pk.edge_name;
            px_fail_size = (size_t)(edge.ptr - keys[0].buf) + 2 * sizeof(size_t);
            cfg.hooks.allocator.alloc_fn = px_alloc;
        }
        TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, 0), TFRDV_OK);
        for (round = 0; round < 2; round++) { /* the second round reuses cached and evicted prefixes */
            int n = PAIRS * EDGES, i;
            for (i = 0; i < n; i++) TT_CHECK_EQ_INT(tfrdv_send(r, &keys[i].pk, NULL, &vals[i].v, 0, NULL), TFRDV_OK);
            TT_CHECK_EQ_INT((long)tfrdv_pending(r, NULL, NULL), n);
            for (i = 0; i < n; i++) {
                int k = (i * 7) % n; /* 7 and 480 are coprime: every key once, pairs interleaved */
                tfrdv_value* got = 0;
                TT_CHECK_EQ_INT(tfrdv_recv(r, &keys[k].pk, NULL, 1000000000, &got, 0, 0), TFRDV_OK);
                TT_CHECK(got == &vals[k].v);
                tfrdv_value_release(got);
            }
            TT_CHECK_EQ_INT((long)tfrdv_pending(r, NULL, NULL), 0);
        }
        if (pass == 1) TT_CHECK(px_failed > 0); /* the fault was hit */
        tfrdv_destroy(r);
        FX_CHECK_EMPTY(&ca);
    }
}

static void test_allocator_with_only_alloc_or_free_is_invalid(void) {
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_rendezvous* r = (tfrdv_rendezvous*)&cfg;
    tfrdv_cancel_mgr* cm = (tfrdv_cancel_mgr*)&cfg;
    tfrdv_loopback* lb = (tfrdv_loopback*)&cfg;
    tfrdv_status st;
    fx_alloc ca;
    int pass;
    memset(&ca, 0, sizeof ca);
    for (pass = 0; pass < 2; pass++) {
        memset(&cfg.hooks, 0, sizeof cfg.hooks);
        if (pass == 0) cfg.hooks.allocator.alloc_fn = fx_alloc_fn;
        else cfg.hooks.allocator.free_fn = fx_free_fn;
        cfg.hooks.allocator.user = &ca;
        TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK(r == NULL);
        TT_CHECK_EQ_INT(st.code, TFRDV_INVALID_ARGUMENT);
        TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&cfg.hooks, &cm, &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK(cm == NULL);
        TT_CHECK_EQ_INT(tfrdv_loopback_create(&cfg.hooks, &lb, &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK(lb == NULL);
    }
    TT_CHECK_EQ_INT(ca.allocs, 0);
    /* bad sizes */
    cfg = tfrdv_config_init();
    cfg.num_shards = -1;
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_create(NULL, NULL, &st), TFRDV_INVALID_ARGUMENT);
    /* NULL config: defaults */
    TT_CHECK_EQ_INT(tfrdv_create(NULL, &r, &st), TFRDV_OK);
    tfrdv_destroy(r);
}

/* ---- user sync hooks --------------------------------------------------------------------------- */
typedef struct psync_ev {
    pthread_mutex_t m;
    pthread_cond_t c;
    unsigned count;
} psync_ev;
typedef struct psync_stats {
    long mutex_init, mutex_destroy, lock, unlock, event_init, event_destroy, wait, signal;
} psync_stats;
static void inc(long* p) { __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST); }
static void* ps_last_mutex;
static int ps_mutex_init(void* u, void** m) {
    pthread_mutex_t* x = (pthread_mutex_t*)malloc(sizeof *x);
    if (!x) return -1;
    pthread_mutex_init(x, NULL);
    *m = x;
    ps_last_mutex = x;
    inc(&((psync_stats*)u)->mutex_init);
    return 0;
}
static void ps_mutex_destroy(void* u, void* m) {
    if (!m) return;
    pthread_mutex_destroy((pthread_mutex_t*)m);
    free(m);
    inc(&((psync_stats*)u)->mutex_destroy);
}
static void ps_lock(void* u, void* m) {
    pthread_mutex_lock((pthread_mutex_t*)m);
    inc(&((psync_stats*)u)->lock);
}
static void ps_unlock(void* u, void* m) {
    inc(&((psync_stats*)u)->unlock);
    pthread_mutex_unlock((pthread_mutex_t*)m);
}
static int ps_event_init(void* u, void** e) {
    psync_ev* x = (psync_ev*)malloc(sizeof *x);
    if (!x) return -1;
    pthread_mutex_init(&x->m, NULL);
    pthread_cond_init(&x->c, NULL);
    x->count = 0;
    *e = x;
    inc(&((psync_stats*)u)->event_init);
    return 0;
}
static void ps_event_destroy(void* u, void* e) {
    psync_ev* x = (psync_ev*)e;
    if (!x) return;
    pthread_cond_destroy(&x->c);
    pthread_mutex_destroy(&x->m);
    free(x);
    inc(&((psync_stats*)u)->event_destroy);
}
static int ps_event_wait(void* u, void* e, int64_t timeout_ns) {
    psync_ev* x = (psync_ev*)e;
    int ok = 1;
    struct timespec dl;
    inc(&((psync_stats*)u)->wait);
    if (timeout_ns >= 0) {
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += (time_t)(timeout_ns / 1000000000);
        dl.tv_nsec += (long)(timeout_ns % 1000000000);
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&x->m);
    while (x->count == 0) {
        if (timeout_ns < 0) pthread_cond_wait(&x->c, &x->m);
        else if (pthread_cond_timedwait(&x->c, &x->m, &dl) != 0 && x->count == 0) {
            ok = 0;
            break;
        }
    }
    if (ok) x->count--;
    pthread_mutex_unlock(&x->m);
    return ok;
}
static void ps_event_signal(void* u, void* e) {
    psync_ev* x = (psync_ev*)e;
    inc(&((psync_stats*)u)->signal);
    pthread_mutex_lock(&x->m);
    x->count++;
    pthread_cond_signal(&x->c);
    pthread_mutex_unlock(&x->m);
}
static tfrdv_sync ps_table(psync_stats* s) {
    tfrdv_sync t;
    t.user = s;
    t.mutex_init = ps_mutex_init;
    t.mutex_destroy = ps_mutex_destroy;
    t.mutex_lock = ps_lock;
    t.mutex_unlock = ps_unlock;
    t.event_init = ps_event_init;
    t.event_destroy = ps_event_destroy;
    t.event_wait = ps_event_wait;
    t.event_signal = ps_event_signal;
    return t;
}
static void test_user_sync_hooks_are_used(void) {
    psync_stats ps;
    tfrdv_sync sync;
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_status st;
    tkey k, k2;
    tval v1, v2, v3;
    sender s;
    pthread_t th;
    tfrdv_value* got = 0;
    tfrdv_args args;
    rcv x;
    fx_alloc ca;
    memset(&ps, 0, sizeof ps);
    sync = ps_table(&ps);
    cfg.hooks = ca_hooks(&ca);
    cfg.hooks.sync = &sync;
    cfg.num_shards = 3;
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, &st), TFRDV_OK);
    TT_CHECK(ps.mutex_init >= 4); /* the shards and the status lock at least */
    TT_CHECK(ps.event_init >= 1);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&cfg.hooks, &cm, &st), TFRDV_OK);
    tkey_init(&k, "k");
    tkey_init(&k2, "k2");
    tval_init(&v1, 1);
    tval_init(&v2, 2);
    tval_init(&v3, 3);
    rcv_init(&x);
    args = cancel_args(cm);
    /* blocking receives through the hooks' events: a value from a thread, then a timeout */
    TT_CHECK_EQ_INT(sender_start(&s, &th, r, &k, &v1, 20), 0);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, NULL, (int64_t)10 * 1000000000, &got, NULL, &st), TFRDV_OK);
    pthread_join(th, NULL);
    TT_CHECK(got == &v1.v);
    tfrdv_value_release(got);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, NULL, 5000000, &got, NULL, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK(ps.wait >= 2 && ps.signal >= 1);
    /* async with the hooked cancellation manager */
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k2.pk, &args, rcv_done, &x, 0), TFRDV_OK);
    tfrdv_cancel_start(cm);
    TT_CHECK(x.calls == 1 && x.code == TFRDV_CANCELLED);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k2.pk, NULL, &v2.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k2.pk, NULL, &v3.v, 0, NULL), TFRDV_OK);
    tfrdv_destroy(r);
    tfrdv_cancel_mgr_destroy(cm);
    TT_CHECK(rel(&v2) == 1 && rel(&v3) == 1);
    TT_CHECK(ps.lock > 0);
    TT_CHECK_EQ_INT(ps.lock, ps.unlock);
    TT_CHECK_EQ_INT(ps.mutex_init, ps.mutex_destroy);
    TT_CHECK_EQ_INT(ps.event_init, ps.event_destroy);
    FX_CHECK_EMPTY(&ca);
    /* an incomplete table is an argument error */
    ca.allocs = 0;
    sync.event_signal = NULL;
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&cfg.hooks, &cm, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(ca.allocs, 0);
}

/* The same race made deterministic: the hooked mutex of the batch sleeps 20 ms after thread X
   unlocks it, so thread Y's arrival (5 ms after X's) lands between X's two critical sections in
   tfrdv__batch_one. Exactly one callback must still run. */
static void* slow_mutex;
static pthread_t slow_thread;
static int slow_armed;
static void ps_unlock_slow(void* u, void* m) {
    ps_unlock(u, m);
    if (ld(&slow_armed) && m == __atomic_load_n(&slow_mutex, __ATOMIC_SEQ_CST) &&
        pthread_equal(pthread_self(), slow_thread)) {
        st_(&slow_armed, 0);
        sleep_ms(20);
    }
}
typedef struct delayed_sender {
    sender s;
    pthread_barrier_t* bar;
} delayed_sender;
static void* delayed_sender_main(void* p) {
    delayed_sender* d = (delayed_sender*)p;
    pthread_barrier_wait(d->bar);
    return sender_main(&d->s);
}
static void test_recv_batch_last_two_arrivals_race_deterministic(void) {
    psync_stats ps;
    tfrdv_sync sync;
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    tfrdv_status st;
    tkey k[2];
    tval v[2];
    tfrdv_parsed_key pks[2];
    tfrdv_value* out[2];
    int dead[2], i;
    brec b;
    delayed_sender d[2];
    pthread_t th[2];
    pthread_barrier_t bar;
    void* last_mutex = 0;
    fx_alloc ca;
    memset(&ps, 0, sizeof ps);
    sync = ps_table(&ps);
    sync.mutex_unlock = ps_unlock_slow;
    sync.mutex_init = ps_mutex_init;
    cfg.hooks = ca_hooks(&ca);
    cfg.hooks.sync = &sync;
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, &st), TFRDV_OK);
    memset(&b, 0, sizeof b);
    batch_setup(k, pks, v, 2);
    {
        long before = ps.mutex_init;
        TT_CHECK_EQ_INT(tfrdv_recv_batch_async(r, 2, pks, NULL, out, dead, batch_done, &b), TFRDV_OK);
        TT_CHECK_EQ_INT(ps.mutex_init, before + 1); /* the batch's own mutex */
        last_mutex = ps_last_mutex;
    }
    __atomic_store_n(&slow_mutex, last_mutex, __ATOMIC_SEQ_CST);
    pthread_barrier_init(&bar, NULL, 2);
    for (i = 0; i < 2; i++) {
        sender_init(&d[i].s, r, &k[i], &v[i], i == 0 ? 0 : 5);
        d[i].bar = &bar;
    }
    st_(&slow_armed, 1);
    pthread_create(&th[0], NULL, delayed_sender_main, &d[0]);
    slow_thread = th[0];
    pthread_create(&th[1], NULL, delayed_sender_main, &d[1]);
    for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    TT_CHECK_EQ_INT(d[0].s.rc, TFRDV_OK);
    TT_CHECK_EQ_INT(d[1].s.rc, TFRDV_OK);
    TT_CHECK_EQ_INT(b.calls, 1);
    TT_CHECK_EQ_INT(b.code, TFRDV_OK);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(rel(&v[0]), 1);
    TT_CHECK_EQ_INT(rel(&v[1]), 1);
    FX_CHECK_EMPTY(&ca);
}

/* A receive's callback destroys its cancellation manager when that manager's own cancel
   completed it (TensorFlow allows the manager to die once done runs: PR #32181). Run on a
   helper thread with a watchdog so that a deadlock fails the test instead of hanging it. */
typedef struct cm_suicide {
    tfrdv_rendezvous* r;
    tfrdv_cancel_mgr* cm;
    tkey k;
    rcv x;
    int done;
} cm_suicide;
static void then_destroy_cm(rcv* self) {
    cm_suicide* c = (cm_suicide*)self->ctx;
    tfrdv_cancel_mgr_destroy(c->cm);
}
static void* cm_suicide_main(void* p) {
    cm_suicide* c = (cm_suicide*)p;
    tfrdv_args args = cancel_args(c->cm);
    c->x.then = then_destroy_cm;
    c->x.ctx = c;
    tfrdv_recv_async(c->r, &c->k.pk, &args, rcv_done, &c->x, 0);
    tfrdv_cancel_start(c->cm); /* completes the receive; its callback destroys cm */
    st_(&c->done, 1);
    return NULL;
}
static void test_cancel_mgr_destroyed_inside_its_own_callback(void) {
    static cm_suicide c; /* static: a stuck helper thread may keep using it */
    static fx_alloc ca;
    pthread_t th;
    int waited = 0;
    memset(&c, 0, sizeof c);
    c.r = mk_rdv(&ca);
    c.cm = mk_cm(&ca);
    tkey_init(&c.k, "k");
    rcv_init(&c.x);
    pthread_create(&th, NULL, cm_suicide_main, &c);
    while (!ld(&c.done) && waited < 3000) {
        sleep_ms(5);
        waited += 5;
    }
    if (!ld(&c.done)) {
        printf("    deadlock: tfrdv_cancel_mgr_destroy inside a callback run by tfrdv_cancel_start of the same manager\n");
        TT_CHECK(ld(&c.done));
        pthread_detach(th); /* stuck for good; everything it uses stays allocated */
        return;
    }
    pthread_join(th, NULL);
    TT_CHECK_EQ_INT(c.x.calls, 1);
    TT_CHECK_EQ_INT(c.x.code, TFRDV_CANCELLED);
    tfrdv_destroy(c.r);
    FX_CHECK_EMPTY(&ca);
}

/* tfrdv_cancel_mgr_destroy racing a send that has just matched a receive registered on it.
   The send pauses right after it dropped the shard lock (a sync hook sleeps in that unlock);
   meanwhile the owner destroys the manager, whose cancel finds the receive already unlinked.
   The manager's memory is quarantined and its mutex/event hooks record any use after destroy,
   so a late touch of the freed manager is reported instead of crashing. */
typedef struct chk_mutex {
    pthread_mutex_t m;
    int dead;
} chk_mutex;
typedef struct chk_event {
    psync_ev e;
    int dead;
} chk_event;
static void* chk_handles[16];
static int chk_nhandles, chk_after_destroy;
static int chk_mutex_init(void* u, void** m) {
    chk_mutex* x = (chk_mutex*)calloc(1, sizeof *x);
    (void)u;
    if (!x || chk_nhandles >= 16) return -1;
    pthread_mutex_init(&x->m, NULL);
    chk_handles[chk_nhandles++] = x;
    *m = x;
    return 0;
}
static void chk_mutex_destroy(void* u, void* m) {
    (void)u;
    if (m) ((chk_mutex*)m)->dead = 1; /* kept (freed at the end of the test) */
}
static void chk_lock(void* u, void* m) {
    (void)u;
    if (((chk_mutex*)m)->dead) __atomic_add_fetch(&chk_after_destroy, 1, __ATOMIC_SEQ_CST);
    else pthread_mutex_lock(&((chk_mutex*)m)->m);
}
static void chk_unlock(void* u, void* m) {
    (void)u;
    if (((chk_mutex*)m)->dead) __atomic_add_fetch(&chk_after_destroy, 1, __ATOMIC_SEQ_CST);
    else pthread_mutex_unlock(&((chk_mutex*)m)->m);
}
static int chk_event_init(void* u, void** e) {
    chk_event* x = (chk_event*)calloc(1, sizeof *x);
    (void)u;
    if (!x || chk_nhandles >= 16) return -1;
    pthread_mutex_init(&x->e.m, NULL);
    pthread_cond_init(&x->e.c, NULL);
    chk_handles[chk_nhandles++] = x;
    *e = x;
    return 0;
}
static void chk_event_destroy(void* u, void* e) {
    (void)u;
    if (e) ((chk_event*)e)->dead = 1;
}
static int chk_event_wait(void* u, void* e, int64_t t) {
    psync_stats dummy;
    if (((chk_event*)e)->dead) {
        __atomic_add_fetch(&chk_after_destroy, 1, __ATOMIC_SEQ_CST);
        return 1;
    }
    (void)u;
    return ps_event_wait(&dummy, &((chk_event*)e)->e, t);
}
static void chk_event_signal(void* u, void* e) {
    psync_stats dummy;
    (void)u;
    if (((chk_event*)e)->dead) __atomic_add_fetch(&chk_after_destroy, 1, __ATOMIC_SEQ_CST);
    else ps_event_signal(&dummy, &((chk_event*)e)->e);
}
static void* quar[16];
static int nquar;
static void* quar_alloc(void* u, size_t n) {
    (void)u;
    return calloc(1, n);
}
static void quar_free(void* u, void* p, size_t n) {
    (void)u;
    (void)n;
    if (p && nquar < 16) quar[nquar++] = p; /* not released until the test ends */
}
static pthread_t pause_thread;
static int pause_armed;
static void ps_unlock_pause_once(void* u, void* m) {
    ps_unlock(u, m);
    if (ld(&pause_armed) && pthread_equal(pthread_self(), pause_thread)) {
        st_(&pause_armed, 0);
        sleep_ms(40);
    }
}
static void test_cancel_mgr_destroy_racing_a_matching_send(void) {
    psync_stats ps;
    tfrdv_sync rsync, csync;
    tfrdv_config cfg = tfrdv_config_init();
    tfrdv_hooks ch;
    tfrdv_rendezvous* r = 0;
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_status st;
    tfrdv_args args;
    pthread_barrier_t bar;
    delayed_sender d;
    pthread_t th;
    tkey k;
    tval v;
    rcv x;
    fx_alloc ca;
    int i;
    memset(&ps, 0, sizeof ps);
    rsync = ps_table(&ps);
    rsync.mutex_unlock = ps_unlock_pause_once;
    cfg.hooks = ca_hooks(&ca);
    cfg.hooks.sync = &rsync;
    TT_CHECK_EQ_INT(tfrdv_create(&cfg, &r, &st), TFRDV_OK);
    memset(&csync, 0, sizeof csync);
    csync.mutex_init = chk_mutex_init;
    csync.mutex_destroy = chk_mutex_destroy;
    csync.mutex_lock = chk_lock;
    csync.mutex_unlock = chk_unlock;
    csync.event_init = chk_event_init;
    csync.event_destroy = chk_event_destroy;
    csync.event_wait = chk_event_wait;
    csync.event_signal = chk_event_signal;
    memset(&ch, 0, sizeof ch);
    ch.allocator.alloc_fn = quar_alloc;
    ch.allocator.free_fn = quar_free;
    ch.sync = &csync;
    chk_nhandles = nquar = 0;
    st_(&chk_after_destroy, 0);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&ch, &cm, &st), TFRDV_OK);
    tkey_init(&k, "k");
    tval_init(&v, 1);
    rcv_init(&x);
    args = cancel_args(cm);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, &args, rcv_done, &x, 0), TFRDV_OK);
    pthread_barrier_init(&bar, NULL, 2);
    sender_init(&d.s, r, &k, &v, 0);
    d.bar = &bar;
    pthread_create(&th, NULL, delayed_sender_main, &d);
    pause_thread = th;
    st_(&pause_armed, 1);
    pthread_barrier_wait(&bar); /* the send starts now and pauses after its shard unlock */
    sleep_ms(15);
    tfrdv_cancel_mgr_destroy(cm); /* the receive is still pending from our point of view */
    pthread_join(th, NULL);
    pthread_barrier_destroy(&bar);
    TT_CHECK_EQ_INT(d.s.rc, TFRDV_OK);
    TT_CHECK_EQ_INT(x.calls, 1);
    if (ld(&chk_after_destroy))
        printf("    %d uses of the destroyed cancellation manager by tfrdv_send\n", ld(&chk_after_destroy));
    TT_CHECK_EQ_INT(ld(&chk_after_destroy), 0);
    tfrdv_destroy(r);
    TT_CHECK_EQ_INT(rel(&v), 1);
    FX_CHECK_EMPTY(&ca);
    for (i = 0; i < chk_nhandles; i++) free(chk_handles[i]);
    for (i = 0; i < nquar; i++) free(quar[i]);
}

/* destroy from inside a callback while another thread's callback on the same rendezvous still
   runs: the memory goes when the last callback returns (run under ASan to see misuse) */
static void test_destroy_inside_callback_while_another_thread_callback_runs(void) {
    fx_alloc ca;
    tfrdv_rendezvous* r = mk_rdv(&ca);
    tkey k1, k2;
    tval v1, v2;
    slow s;
    sender snd;
    pthread_t th;
    rcv x;
    act a;
    int spins = 0;
    tkey_init(&k1, "slow");
    tkey_init(&k2, "quick");
    tval_init(&v1, 1);
    tval_init(&v2, 2);
    memset(&s, 0, sizeof s);
    memset(&a, 0, sizeof a);
    rcv_init(&x);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k1.pk, NULL, slow_done, &s, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_send(r, &k2.pk, NULL, &v2.v, 0, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(sender_start(&snd, &th, r, &k1, &v1, 0), 0);
    while (!ld(&s.started) && spins++ < 5000) sleep_ms(1);
    a.r = r;
    a.ca = &ca;
    x.then = then_destroy;
    x.ctx = &a;
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k2.pk, NULL, rcv_done, &x, 0), TFRDV_OK); /* destroys r inside */
    TT_CHECK_EQ_INT(x.calls, 1);
    if (!ld(&s.finished)) TT_CHECK(ca.live_blocks > 0); /* the other callback still runs: not freed yet */
    pthread_join(th, NULL);
    TT_CHECK_EQ_INT(ld(&s.finished), 1);
    TT_CHECK_EQ_INT(snd.rc, TFRDV_OK);
    TT_CHECK(rel(&v1) == 1 && rel(&v2) == 1);
    FX_CHECK_EMPTY(&ca); /* freed by the last callback to return */
}

static void test_no_assert_tripped(void) { TT_CHECK_EQ_INT(tt_asserts, 0); }

/* a refused receive says why in its status (and runs no callback): NULL callback, a key longer
   than max_key_len (the message names the limit), out of the way of st NULL */
static void test_recv_async_refusal_fills_its_status(void) {
    tfrdv_config c = tfrdv_config_init();
    tfrdv_rendezvous* r = 0;
    tfrdv_status st;
    tkey k;
    rcv x;
    rcv_init(&x);
    c.max_key_len = 40;
    TT_CHECK_EQ_INT(tfrdv_create(&c, &r, 0), TFRDV_OK);
    tkey_init(&k, "a_rather_long_edge_name");
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, 0, &x, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "NULL rendezvous or callback");
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, rcv_done, &x, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(st.code, TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "max_key_len");
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, rcv_done, &x, 0), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(x.calls, 0);
    tfrdv_destroy(r);
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_send_then_recv_completes_in_recv);
    TT_RUN(test_recv_async_refusal_fills_its_status);
    TT_RUN(test_recv_then_send_completes_in_send);
    TT_RUN(test_send_and_recv_args_reach_the_callback);
    TT_RUN(test_waiting_receivers_cost_48_bytes_or_160_with_extras);
    TT_RUN(test_table_grows_toward_the_last_bursts_size);
    TT_RUN(test_dead_values_delivered_as_dead);
    TT_RUN(test_argument_errors_are_synchronous);
    TT_RUN(test_value_retain_release_extra_refs);
    TT_RUN(test_fifo_sends_received_in_send_order);
    TT_RUN(test_fifo_receivers_served_in_arrival_order);
    TT_RUN(test_fifo_random_interleavings);
    TT_RUN(test_many_keys_are_independent);
    TT_RUN(test_full_key_compared_when_hashes_collide);
    TT_RUN(test_thousand_keys_with_one_hash);
    TT_RUN(test_abort_sticky_first_status_wins);
    TT_RUN(test_abort_with_ok_is_invalid_and_changes_nothing);
    TT_RUN(test_abort_completes_waiters_once_and_releases_buffered_once);
    TT_RUN(test_send_after_abort_fails_and_caller_keeps_value);
    TT_RUN(test_recv_after_abort_completes_at_once);
    TT_RUN(test_cancel_mgr_register_deregister_start);
    TT_RUN(test_cancel_mgr_reentrant_callbacks_and_destroy);
    TT_RUN(test_recv_cancelled_before_send_then_send_is_buffered);
    TT_RUN(test_cancel_after_match_does_nothing);
    TT_RUN(test_recv_on_cancelled_mgr_completes_at_once);
    TT_RUN(test_cancel_middle_and_tail_keeps_fifo);
    TT_RUN(test_cancel_receivers_in_shuffled_order_keeps_the_rest_fifo);
    TT_RUN(test_abort_then_cancel_completes_once);
    TT_RUN(test_cancel_then_abort_completes_once);
    TT_RUN(test_cancel_mgr_destroyed_after_use);
    TT_RUN(test_one_cancel_mgr_many_receives);
    TT_RUN(test_sync_recv_value_from_another_thread);
    TT_RUN(test_sync_recv_timeout_removes_the_waiter);
    TT_RUN(test_sync_recv_timeout_zero_waits_forever);
    TT_RUN(test_sync_recv_buffered_dead_and_aborted);
    TT_RUN(test_sync_recv_user_cancel_is_cancelled_not_deadline);
    TT_RUN(test_send_from_inside_recv_callback);
    TT_RUN(test_recv_from_inside_recv_callback);
    TT_RUN(test_abort_from_inside_recv_callback);
    TT_RUN(test_destroy_from_inside_own_callback);
    TT_RUN(test_destroy_and_unref_from_callback_in_send);
    TT_RUN(test_destroy_cancels_waiters_and_releases_buffered);
    TT_RUN(test_ref_unref_keep_it_alive);
    TT_RUN(test_destroy_waits_for_callback_on_other_thread);
    TT_RUN(test_send_batch_stops_at_first_failure);
    TT_RUN(test_recv_batch_one_callback_when_all_arrived);
    TT_RUN(test_recv_batch_first_error_releases_each_value_once);
    TT_RUN(test_recv_batch_concurrent_last_arrivals);
    TT_RUN(test_pending_reports_kinds_and_counts);
    TT_RUN(test_allocator_sized_free_everything_freed);
    TT_RUN(test_allocator_steady_state_allocates_nothing);
    TT_RUN(test_table_shared_prefix_keys_match_only_whole_keys);
    TT_RUN(test_table_shared_prefix_cache_full_or_out_of_memory_keeps_whole_keys);
    TT_RUN(test_allocator_with_only_alloc_or_free_is_invalid);
    TT_RUN(test_user_sync_hooks_are_used);
    TT_RUN(test_recv_batch_last_two_arrivals_race_deterministic);
    TT_RUN(test_destroy_inside_callback_while_another_thread_callback_runs);
    TT_RUN(test_cancel_mgr_destroy_racing_a_matching_send);
    TT_RUN(test_cancel_mgr_destroyed_inside_its_own_callback);
    TT_RUN(test_no_assert_tripped);
    return TT_MAIN_END();
}
