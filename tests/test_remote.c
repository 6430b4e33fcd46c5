/* test_remote.c - the remote rendezvous and the remote-call state machine over the loopback
   transport and the fault-injecting wrapper of faults.h: two or three managers ("workers") in
   one process. Every test checks exactly-once completion (CALLBACK RULES 1-2) and that every
   value is released exactly once (rule 6), and the counting allocator returns to zero.
   Call states (tfrdv.h >>mgr): IDLE -> STARTED -> DONE (provider finish) | ORPHANED (cancel,
   abort, deadline, cleanup; provider still owes its finish) -> DONE; STARTED -> BACKOFF
   (UNAVAILABLE) -> STARTED (expire: retry) | DONE (cancel, abort, deadline). */
#define _POSIX_C_SOURCE 200809L
#define TT_COUNT_ASSERTS
#include "tt.h"
/* The double-finish tests trip TFRDV_ASSERT hundreds of times on purpose: count them in
   tt_asserts like tt.h does, without a line of output each. */
#undef TFRDV_ASSERT
#define TFRDV_ASSERT(x) ((x) ? (void)0 : (void)__atomic_add_fetch(&tt_asserts, 1, __ATOMIC_SEQ_CST))
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"
#include "faults.h"
#include <pthread.h>

#define WA "/job:a/replica:0/task:0"
#define WB "/job:b/replica:0/task:0"
#define WC "/job:c/replica:0/task:0"
#define A0 WA "/device:CPU:0"
#define A1 WA "/device:CPU:1"
#define B0 WB "/device:CPU:0"
#define C0 WC "/device:CPU:0"
#define INC_A 0xa1u
#define INC_B 0xb7u
#define STEP 500

/* ---- the world: A receives, B serves (optionally a restarted B2, and C) ---- */
typedef struct world {
    fx_alloc a;
    tfrdv_loopback* lb;
    faults* f;
    tfrdv_mgr *ma, *mb, *mb2;
    tfrdv_rendezvous *ra, *rb;
    tfrdv_cancel_mgr* cms[8]; /* destroyed by world_end, after the managers */
    int ncms;
} world;

static tfrdv_mgr_config world_cfg(world* w, const char* name, uint64_t inc) {
    tfrdv_mgr_config c = tfrdv_mgr_config_init();
    c.hooks = fx_hooks(&w->a);
    c.worker_name = name;
    c.incarnation = inc;
    c.transport = faults_transport(w->f);
    return c;
}
static void world_begin(world* w, uint64_t seed) {
    tfrdv_hooks h;
    memset(w, 0, sizeof *w);
    h = fx_hooks(&w->a);
    fx_set_now(0);
    TT_CHECK_EQ_INT(tfrdv_loopback_create(&h, &w->lb, 0), TFRDV_OK);
    w->f = faults_create(w->lb, seed);
}
static tfrdv_rendezvous* init_step(tfrdv_mgr* m, int64_t id) {
    tfrdv_rendezvous* r = 0;
    TT_CHECK_EQ_INT(tfrdv_mgr_find(m, id, &r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_initialize(r, 0, 0), TFRDV_OK);
    return r;
}
/* ca: A's config (from world_cfg, tweaked); cb: B's, or NULL for a plain B */
static void world_start_ab(world* w, const tfrdv_mgr_config* ca, const tfrdv_mgr_config* cb) {
    tfrdv_mgr_config plain = world_cfg(w, WB, INC_B);
    w->ma = mk(ca);
    w->mb = mk(cb ? cb : &plain);
    faults_register(w->f, WA, w->ma);
    faults_register(w->f, WB, w->mb);
    w->ra = init_step(w->ma, STEP);
    w->rb = init_step(w->mb, STEP);
}
static void world_start(world* w, const tfrdv_mgr_config* ca) { world_start_ab(w, ca, 0); }
/* world_begin and world_start with a plain A and B */
static void world_open(world* w, uint64_t seed) {
    tfrdv_mgr_config ca;
    world_begin(w, seed);
    ca = world_cfg(w, WA, INC_A);
    world_start(w, &ca);
}
/* "restart" B: a new manager with a new incarnation under the same name */
static void world_restart_b(world* w) {
    tfrdv_mgr_config cb2 = world_cfg(w, WB, INC_B + 1);
    w->mb2 = mk(&cb2);
    faults_register(w->f, WB, w->mb2);
    tfrdv_unref(init_step(w->mb2, STEP));
}
/* a cancellation manager on the world's allocator, destroyed by world_end */
static tfrdv_cancel_mgr* world_cm(world* w) {
    tfrdv_hooks h = fx_hooks(&w->a);
    tfrdv_cancel_mgr* cm = 0;
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&h, &cm, 0), TFRDV_OK);
    if (w->ncms < 8) w->cms[w->ncms++] = cm;
    return cm;
}
static void world_end(world* w) {
    int i;
    tfrdv_unref(w->ra);
    tfrdv_unref(w->rb);
    tfrdv_mgr_destroy(w->ma); /* the receiver first: its calls are cancelled */
    tfrdv_mgr_destroy(w->mb); /* then the servers: their pending requests are answered */
    if (w->mb2) tfrdv_mgr_destroy(w->mb2);
    faults_flush(w->f, FAULTS_FIFO); /* lazily cancelled calls finish now */
    TT_CHECK_EQ_INT(faults_live(w->f), 0);
    TT_CHECK_EQ_INT(faults_destroy(w->f), 0);
    tfrdv_loopback_destroy(w->lb);
    for (i = 0; i < w->ncms; i++) tfrdv_cancel_mgr_destroy(w->cms[i]);
    FX_CHECK_EMPTY(&w->a);
}
static void send(tfrdv_rendezvous* r, const fx_key* k, tfrdv_value* v) {
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_send(r, &k->pk, 0, v, 0, &st), TFRDV_OK);
}
static void recv(tfrdv_rendezvous* r, const fx_key* k, const tfrdv_args* args, fx_recv* out) {
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k->pk, args, fx_recv_done, out, 0), TFRDV_OK);
}

/* ---- receiver-chosen memory (args.alloc_fn): heap blocks, counted ---- */
static long heap_live, heap_allocs;
typedef struct heap_val {
    tfrdv_value v;
    int64_t dims[4];
    unsigned char data[64];
} heap_val;
static void heap_release(tfrdv_value* v) {
    __atomic_sub_fetch(&heap_live, 1, __ATOMIC_SEQ_CST);
    free(v);
}
static tfrdv_value* heap_alloc(void* u, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    heap_val* h;
    int i;
    if (u && *(int*)u) return 0; /* told to fail */
    if (rank > 4 || size > sizeof h->data || !(h = (heap_val*)calloc(1, sizeof *h))) return 0;
    __atomic_add_fetch(&heap_live, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&heap_allocs, 1, __ATOMIC_SEQ_CST);
    h->v.dtype = dtype;
    h->v.rank = rank;
    for (i = 0; i < rank; i++) h->dims[i] = dims[i];
    h->v.dims = h->dims;
    h->v.data = h->data;
    h->v.size = size;
    h->v.release = heap_release;
    return &h->v;
}

/* ---- start observer: request id and attempt of every start ---- */
typedef struct starts {
    int n;
    int64_t rid[16];
    int attempt[16];
    void* endpoint[16];
    tfrdv_call* call[16];
} starts;
static void observe(void* u, tfrdv_call* call, faults_kind kind) {
    starts* s = (starts*)u;
    (void)kind;
    if (s->n < 16) {
        s->rid[s->n] = tfrdv_call_request_id(call);
        s->attempt[s->n] = tfrdv_call_attempt(call);
        s->endpoint[s->n] = tfrdv_call_endpoint(call);
        s->call[s->n] = call;
    }
    s->n++;
}

/* ============================================================================================
   delivery
   ============================================================================================ */
static void test_remote_recv_then_send_delivers_bytes_and_shape_zero_copy(void) {
    world w;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_value v;
    fx_recv r;
    memset(&r, 0, sizeof r);
    world_begin(&w, 1);
    ca = world_cfg(&w, WA, INC_A);
    ca.transport = tfrdv_loopback_transport(w.lb); /* the plain loopback */
    world_start(&w, &ca);
    key(&k, B0, INC_B, A0, "t");
    recv(w.ra, &k, 0, &r);
    TT_CHECK_EQ_INT(r.calls, 0);
    TT_CHECK_EQ_INT(stats(w.ma).calls_in_flight, 1);
    send(w.rb, &k, fx_value_init(&v, 11));
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    TT_CHECK(fx_recv_matches(&r, 11));
    TT_CHECK(r.value_ptr == &v.v && r.data_ptr == v.bytes); /* zero copy: the sender's buffer */
    TT_CHECK_EQ_INT(r.dead, 0);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    TT_CHECK_EQ_INT(stats(w.ma).calls_in_flight, 0);
    TT_CHECK_EQ_INT(stats(w.ma).calls_completed, 1);
    world_end(&w);
    TT_CHECK_EQ_INT(r.calls, 1);
}

static void test_remote_send_then_recv_delivers_at_once(void) {
    world w;
    fx_key k;
    fx_value v;
    fx_recv r;
    memset(&r, 0, sizeof r);
    world_open(&w, 2); /* FAULT_PASS: through the loopback */
    key(&k, B0, INC_B, A0, "t");
    send(w.rb, &k, fx_value_init(&v, 12));
    recv(w.ra, &k, 0, &r);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    TT_CHECK(fx_recv_matches(&r, 12));
    TT_CHECK(r.data_ptr == v.bytes);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    /* the same through the wrapper's own serving path */
    faults_set(w.f, FAULT_NONE);
    {
        fx_value v2;
        fx_recv r2;
        memset(&r2, 0, sizeof r2);
        send(w.rb, &k, fx_value_init(&v2, 13));
        recv(w.ra, &k, 0, &r2);
        TT_CHECK_EQ_INT(r2.calls, 1);
        TT_CHECK(fx_recv_matches(&r2, 13));
        TT_CHECK_EQ_INT(fx_released(&v2), 1);
    }
    world_end(&w);
}

static void test_remote_recv_into_receiver_memory_with_alloc_fn(void) {
    world w;
    fx_key k;
    fx_value v, v2;
    fx_recv r, r2;
    tfrdv_args args;
    int fail = 0;
    memset(&r, 0, sizeof r);
    memset(&r2, 0, sizeof r2);
    memset(&args, 0, sizeof args);
    heap_live = heap_allocs = 0;
    args.alloc_fn = heap_alloc;
    args.alloc_user = &fail;
    world_open(&w, 3);
    key(&k, B0, INC_B, A0, "into");
    recv(w.ra, &k, &args, &r);
    send(w.rb, &k, fx_value_init(&v, 14));
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    TT_CHECK(fx_recv_matches(&r, 14)); /* same bytes and shape */
    TT_CHECK(r.data_ptr != v.bytes);   /* in the receiver's memory */
    TT_CHECK_EQ_INT(heap_allocs, 1);
    TT_CHECK_EQ_INT(heap_live, 0);      /* released by the callback */
    TT_CHECK_EQ_INT(fx_released(&v), 1); /* the transport let go of the sender's buffer */
    /* the alloc hook gives no memory: RESOURCE_EXHAUSTED, nothing leaks, and the value it could
       not take is B's again (the next receiver gets it) */
    fail = 1;
    recv(w.ra, &k, &args, &r2);
    send(w.rb, &k, fx_value_init(&v2, 15));
    TT_CHECK_EQ_INT(r2.calls, 1);
    TT_CHECK_EQ_INT(r2.st.code, TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_EQ_INT(r2.has_value, 0);
    TT_CHECK_EQ_INT(fx_released(&v2), 0);
    TT_CHECK_EQ_INT(pending_of(w.rb, TFRDV_PENDING_SEND), 1);
    world_end(&w);
    TT_CHECK_EQ_INT(fx_released(&v2), 1);
    TT_CHECK_EQ_INT(heap_live, 0);
}

static void test_remote_dead_values_arrive_dead(void) {
    world w;
    fx_key k1, k2;
    fx_value v;
    fx_recv r1, r2;
    tfrdv_status st;
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    world_open(&w, 4);
    key(&k1, B0, INC_B, A0, "dead_empty");
    key(&k2, B0, INC_B, A0, "dead_value");
    recv(w.ra, &k1, 0, &r1);
    TT_CHECK_EQ_INT(tfrdv_send(w.rb, &k1.pk, 0, 0, 1, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(r1.calls, 1);
    TT_CHECK_EQ_INT(r1.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(r1.dead, 1);
    TT_CHECK_EQ_INT(r1.has_value, 0);
    TT_CHECK_EQ_INT(tfrdv_send(w.rb, &k2.pk, 0, fx_value_init(&v, 16), 1, &st), TFRDV_OK);
    recv(w.ra, &k2, 0, &r2);
    TT_CHECK_EQ_INT(r2.calls, 1);
    TT_CHECK_EQ_INT(r2.dead, 1);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    world_end(&w);
}

/* ---- same worker ---- */
static int copies;
static void copy_hook(void* user, const tfrdv_parsed_key* k, const tfrdv_args* sa, const tfrdv_args* ra,
                      tfrdv_value* in, tfrdv_copy_done_fn done, void* ctx) {
    int* fail = (int*)user;
    tfrdv_value* out;
    (void)k;
    (void)sa;
    copies++;
    if (*fail) {
        tfrdv_value_release(in);
        done(ctx, TFRDV_INTERNAL, "copy failed", 0);
        return;
    }
    out = heap_alloc(0, in->dtype, in->rank, in->dims, in->size);
    memcpy(out->data, in->data, (size_t)in->size);
    tfrdv_value_release(in);
    (void)ra;
    done(ctx, TFRDV_OK, "", out);
}
static void test_same_worker_different_devices_uses_the_copy_hook(void) {
    world w;
    tfrdv_mgr_config ca;
    fx_key k01, k00;
    fx_value v1, v2, v3;
    fx_recv r1, r2, r3;
    int fail = 0;
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    memset(&r3, 0, sizeof r3);
    copies = 0;
    heap_live = 0;
    world_begin(&w, 5);
    ca = world_cfg(&w, WA, INC_A);
    ca.same_worker_copy = copy_hook;
    ca.same_worker_copy_user = &fail;
    world_start(&w, &ca);
    key(&k01, A0, INC_A, A1, "dev_to_dev");
    key(&k00, A0, INC_A, A0, "same_dev");
    send(w.ra, &k01, fx_value_init(&v1, 21));
    recv(w.ra, &k01, 0, &r1);
    TT_CHECK_EQ_INT(copies, 1);
    TT_CHECK_EQ_INT(r1.calls, 1);
    TT_CHECK_EQ_INT(r1.st.code, TFRDV_OK);
    TT_CHECK(fx_recv_matches(&r1, 21));
    TT_CHECK(r1.value_ptr != &v1.v);
    TT_CHECK_EQ_INT(fx_released(&v1), 1);
    recv(w.ra, &k00, 0, &r2); /* same device: no copy, the same buffer */
    send(w.ra, &k00, fx_value_init(&v2, 22));
    TT_CHECK_EQ_INT(copies, 1);
    TT_CHECK_EQ_INT(r2.calls, 1);
    TT_CHECK(r2.value_ptr == &v2.v);
    fail = 1; /* the copy fails: the error reaches the receiver, the input is released */
    recv(w.ra, &k01, 0, &r3);
    send(w.ra, &k01, fx_value_init(&v3, 23));
    TT_CHECK_EQ_INT(copies, 2);
    TT_CHECK_EQ_INT(r3.calls, 1);
    TT_CHECK_EQ_INT(r3.st.code, TFRDV_INTERNAL);
    TT_CHECK_EQ_INT(r3.has_value, 0);
    TT_CHECK_EQ_INT(fx_released(&v3), 1);
    TT_CHECK_EQ_INT(stats(w.ma).calls_started, 0); /* never a transport call */
    world_end(&w);
    TT_CHECK_EQ_INT(heap_live, 0);
}

static void test_same_worker_without_hook_shares_the_buffer(void) {
    world w;
    fx_key k;
    fx_value v;
    fx_recv r;
    memset(&r, 0, sizeof r);
    world_open(&w, 6);
    key(&k, A0, INC_A, A1, "host_memory");
    recv(w.ra, &k, 0, &r);
    send(w.ra, &k, fx_value_init(&v, 24));
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK(r.value_ptr == &v.v);
    TT_CHECK_EQ_INT(stats(w.ma).calls_started, 0);
    world_end(&w);
}

/* ============================================================================================
   synchronous errors, unknown workers
   ============================================================================================ */
static void test_recv_with_dst_not_on_this_worker_is_invalid_argument_synchronously(void) {
    world w;
    fx_key k;
    fx_recv r;
    tfrdv_rendezvous* fresh = 0;
    memset(&r, 0, sizeof r);
    world_open(&w, 7);
    key(&k, B0, INC_B, C0, "not_for_me");
    TT_CHECK_EQ_INT(tfrdv_recv_async(w.ra, &k.pk, 0, fx_recv_done, &r, 0), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(r.calls, 0);
    /* before initialisation: misuse, also synchronous */
    key(&k, B0, INC_B, A0, "too_early");
    TT_CHECK_EQ_INT(tfrdv_mgr_find(w.ma, STEP + 1, &fresh, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(fresh, &k.pk, 0, fx_recv_done, &r, 0), TFRDV_FAILED_PRECONDITION);
    TT_CHECK_EQ_INT(r.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_recv_async(w.ra, &k.pk, 0, 0, &r, 0), TFRDV_INVALID_ARGUMENT);
    tfrdv_unref(fresh);
    TT_CHECK_EQ_INT(stats(w.ma).calls_started, 0);
    world_end(&w);
}

/* RecvFromRemoteAsync: a source device without a type and id cannot name a remote task */
static void test_invalid_remote_source_device_is_internal(void) {
    world w;
    fx_recv r;
    tfrdv_parsed_key pk;
    const char* keytxt = "/job:b/replica:0/task:0/device:CPU:*;00000000000000b7;" A0 ";wild;0:0";
    memset(&r, 0, sizeof r);
    world_open(&w, 31);
    TT_CHECK_EQ_INT(tfrdv_key_parse(keytxt, strlen(keytxt), &pk, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_recv_async(w.ra, &pk, 0, fx_recv_done, &r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_INTERNAL);
    TT_CHECK_STR(r.st.msg, "/job:b/replica:0/task:0/device:CPU:* is invalid remote source device.");
    TT_CHECK_EQ_INT(w.f->started, 0);
    world_end(&w);
}

static void* resolve_only_b(void* u, const char* worker, size_t len) {
    (void)u;
    if (len == strlen(WB) && memcmp(worker, WB, len) == 0) return (void*)&heap_live; /* any pointer */
    return 0;
}
static void test_unknown_worker_is_internal_no_worker_known_as(void) {
    world w;
    tfrdv_mgr_config ca;
    fx_key kc, kb;
    fx_value v;
    fx_recv rc, rb;
    starts s;
    memset(&rc, 0, sizeof rc);
    memset(&rb, 0, sizeof rb);
    memset(&s, 0, sizeof s);
    world_begin(&w, 8);
    ca = world_cfg(&w, WA, INC_A);
    ca.resolve = resolve_only_b;
    world_start(&w, &ca);
    w.f->on_start = observe;
    w.f->on_start_user = &s;
    key(&kc, C0, 1, A0, "from_c");
    recv(w.ra, &kc, 0, &rc);
    TT_CHECK_EQ_INT(rc.calls, 1);
    TT_CHECK_EQ_INT(rc.st.code, TFRDV_INTERNAL);
    TT_CHECK_STR(rc.st.msg, "No worker known as " WC);
    TT_CHECK_EQ_INT(s.n, 0); /* no call was started */
    key(&kb, B0, INC_B, A0, "from_b");
    send(w.rb, &kb, fx_value_init(&v, 25));
    recv(w.ra, &kb, 0, &rb);
    TT_CHECK_EQ_INT(rb.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(s.n, 1);
    TT_CHECK(s.endpoint[0] == (void*)&heap_live); /* the resolver's endpoint reaches the provider */
    world_end(&w);
}

static void* resolve_none(void* u, const char* worker, size_t len) {
    (void)u;
    (void)worker;
    (void)len;
    return 0;
}
/* the worker a remote receive asks for is SplitDeviceName's task part of the source device in
   canonical form, whatever form the key used (the resolver's refusal quotes it) */
static void test_the_worker_asked_for_is_the_canonical_task_of_the_source(void) {
    static const char* const cases[][2] = {
        {"/job:w/replica:12/task:345/device:CPU:0", "/job:w/replica:12/task:345"},
        {"/job:w/replica:007/task:0010/device:CPU:0", "/job:w/replica:7/task:10"},
        {"/task:9/device:GPU:1/replica:2147483647/job:zz", "/job:zz/replica:2147483647/task:9"},
        {"/job:w/task:7/device:CPU:0", "/job:w/task:7"},
        {"/job:only_a_job/device:CPU:3", "/job:only_a_job"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        world w;
        tfrdv_mgr_config ca;
        fx_key k;
        fx_recv rc;
        char want[128];
        memset(&rc, 0, sizeof rc);
        world_begin(&w, 8);
        ca = world_cfg(&w, WA, INC_A);
        ca.resolve = resolve_none;
        world_start(&w, &ca);
        key(&k, cases[i][0], 1, A0, "e");
        recv(w.ra, &k, 0, &rc);
        TT_CHECK_EQ_INT(rc.calls, 1);
        TT_CHECK_EQ_INT(rc.st.code, TFRDV_INTERNAL);
        snprintf(want, sizeof want, "No worker known as %s", cases[i][1]);
        TT_CHECK_STR(rc.st.msg, want);
        world_end(&w);
    }
}

static void test_unregistered_worker_on_loopback_is_unavailable(void) {
    world w;
    fx_key kc;
    fx_recv r, r2;
    memset(&r, 0, sizeof r);
    memset(&r2, 0, sizeof r2);
    world_open(&w, 9);
    key(&kc, C0, 1, A0, "nobody");
    recv(w.ra, &kc, 0, &r); /* loopback */
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(r.st.msg, WC);
    faults_set(w.f, FAULT_NONE);
    recv(w.ra, &kc, 0, &r2); /* the wrapper */
    TT_CHECK_EQ_INT(r2.calls, 1);
    TT_CHECK_EQ_INT(r2.st.code, TFRDV_UNAVAILABLE);
    world_end(&w);
}

/* ============================================================================================
   cancel, abort, deadline, cleanup while in flight
   ============================================================================================ */
static void test_cancel_before_recv_completes_cancelled_without_a_call(void) {
    world w;
    fx_key k;
    fx_recv r;
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_args args;
    memset(&r, 0, sizeof r);
    world_open(&w, 10);
    cm = world_cm(&w);
    tfrdv_cancel_start(cm);
    args = cancel_args(cm);
    key(&k, B0, INC_B, A0, "c");
    recv(w.ra, &k, &args, &r);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_CANCELLED);
    TT_CHECK_STR(r.st.msg, "RecvFromRemoteAsync is cancelled.");
    TT_CHECK_EQ_INT(w.f->started, 0);
    world_end(&w);
    TT_CHECK_EQ_INT(fx_live(&w.a), 0);
}

/* event applied to one in-flight receive: returns what the receiver must see */
enum { EV_PLAIN, EV_CANCEL, EV_ABORT, EV_DEADLINE, EV_CLEANUP, EV_COUNT };
static const char* const ev_names[EV_COUNT] = {"plain", "cancel", "abort", "deadline", "cleanup"};
static void apply_event(world* w, int ev, tfrdv_cancel_mgr* cm) {
    switch (ev) {
    case EV_CANCEL: tfrdv_cancel_start(cm); break;
    case EV_ABORT: tfrdv_abort(w->ra, TFRDV_ABORTED, "test abort"); break;
    case EV_DEADLINE:
        fx_set_now(fx_get_now() + 1000);
        tfrdv_mgr_expire(w->ma, fx_get_now());
        break;
    case EV_CLEANUP: tfrdv_mgr_cleanup(w->ma, STEP); break;
    default: break;
    }
}
static tfrdv_code ev_code(int ev) {
    static const tfrdv_code c[EV_COUNT] = {TFRDV_OK, TFRDV_CANCELLED, TFRDV_ABORTED, TFRDV_DEADLINE_EXCEEDED, TFRDV_ABORTED};
    return c[ev];
}

/* each event while the fetch is in flight (served by B, waiting for B's send), through the
   loopback and through the wrapper; then the late value is sent. The loopback withdraws its
   served request when the call is cancelled, so the value stays buffered on B for a later
   receiver (released when B's step goes); the wrapper does not withdraw (it serves with no
   cancellation manager, as a transport may), so its late answer is released, never delivered */
static void test_every_event_while_in_flight_completes_once_and_late_answer_is_released(void) {
    int ev, kind;
    for (kind = 0; kind < 2; kind++) {
        for (ev = EV_CANCEL; ev < EV_COUNT; ev++) {
            world w;
            tfrdv_mgr_config ca;
            fx_key k;
            fx_value v;
            fx_recv r;
            tfrdv_cancel_mgr* cm = 0;
            tfrdv_args args;
            int before;
            memset(&r, 0, sizeof r);
            world_begin(&w, 11);
            ca = world_cfg(&w, WA, INC_A);
            ca.call_timeout_ns = 1000;
            world_start(&w, &ca);
            faults_set(w.f, kind ? FAULT_NONE : FAULT_PASS);
            cm = world_cm(&w);
            args = cancel_args(cm);
            key(&k, B0, INC_B, A0, "in_flight");
            recv(w.ra, &k, &args, &r);
            TT_CHECK_EQ_INT(r.calls, 0);
            before = (int)w.f->cancels;
            apply_event(&w, ev, cm);
            if (r.calls != 1 || r.st.code != ev_code(ev))
                printf("    event %s via %s: calls %d code %s\n", ev_names[ev], kind ? "wrapper" : "loopback", r.calls,
                       tfrdv_code_str(r.st.code));
            TT_CHECK_EQ_INT(r.calls, 1);
            TT_CHECK_EQ_INT(r.st.code, ev_code(ev));
            TT_CHECK_EQ_INT(w.f->cancels, before + 1); /* the provider was told */
            if (ev == EV_CANCEL) TT_CHECK_STR(r.st.msg, "RecvFromRemoteAsync is cancelled.");
            if (ev == EV_ABORT) TT_CHECK_STR(r.st.msg, "test abort");
            if (ev == EV_CLEANUP) TT_CHECK_STR(r.st.msg, "Cleanup 500");
            if (ev == EV_DEADLINE) {
                TT_CHECK_CONTAINS(r.st.msg, k.buf);
                TT_CHECK_CONTAINS(r.st.msg, "timed out");
            }
            TT_CHECK_EQ_INT(stats(w.ma).calls_in_flight, 0);
            send(w.rb, &k, fx_value_init(&v, 30)); /* the late value */
            TT_CHECK_EQ_INT(r.calls, 1);
            TT_CHECK_EQ_INT(fx_released(&v), kind ? 1 : 0);
            if (!kind) TT_CHECK_EQ_INT(pending_of(w.rb, TFRDV_PENDING_SEND), 1);
            world_end(&w);
            TT_CHECK_EQ_INT(fx_released(&v), 1);
            TT_CHECK_EQ_INT(fx_live(&w.a), 0);
        }
    }
}

static void test_cancel_after_completion_is_harmless(void) {
    world w;
    fx_key k;
    fx_value v;
    fx_recv r;
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_args args;
    memset(&r, 0, sizeof r);
    world_open(&w, 12);
    cm = world_cm(&w);
    args = cancel_args(cm);
    key(&k, B0, INC_B, A0, "done_then_cancel");
    recv(w.ra, &k, &args, &r);
    send(w.rb, &k, fx_value_init(&v, 31));
    TT_CHECK_EQ_INT(r.calls, 1);
    tfrdv_cancel_start(cm);
    tfrdv_abort(w.ra, TFRDV_ABORTED, "later");
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    world_end(&w);
}

static void test_deadline_next_expiry_and_late_answer_released(void) {
    world w;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_value v;
    fx_recv r;
    memset(&r, 0, sizeof r);
    world_begin(&w, 13);
    ca = world_cfg(&w, WA, INC_A);
    ca.call_timeout_ns = 1000;
    world_start(&w, &ca);
    fx_set_now(100);
    key(&k, B0, INC_B, A0, "slow");
    recv(w.ra, &k, 0, &r);
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(w.ma, 1099), 1100);
    TT_CHECK_EQ_INT(r.calls, 0);
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(w.ma, 1100), INT64_MAX);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_CONTAINS(r.st.msg, "step 500");
    send(w.rb, &k, fx_value_init(&v, 32)); /* the request was withdrawn: the value stays on B */
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(fx_released(&v), 0);
    TT_CHECK_EQ_INT(pending_of(w.rb, TFRDV_PENDING_SEND), 1);
    world_end(&w);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
}

/* ---- the TensorFlow abort race: the step is aborted (or cancelled, timed out, cleaned up)
   after the call was registered but before the provider started it ---- */
typedef struct racer {
    tfrdv_transport inner;
    world* w;
    int ev;
    tfrdv_cancel_mgr* cm;
    int starts, cancels;
} racer;
static void racer_start(void* u, tfrdv_call* call) {
    racer* x = (racer*)u;
    x->starts++;
    if (x->starts == 1) apply_event(x->w, x->ev, x->cm);
    x->inner.start_call(x->inner.user, call);
}
static void racer_cancel(void* u, tfrdv_call* call) {
    racer* x = (racer*)u;
    x->cancels++;
    x->inner.cancel_call(x->inner.user, call);
}
static void test_event_between_registration_and_start_completes_once(void) {
    int ev, ready;
    for (ready = 0; ready < 2; ready++) {
        for (ev = EV_CANCEL; ev < EV_COUNT; ev++) {
            world w;
            racer x;
            tfrdv_mgr_config ca;
            fx_key k;
            fx_value v;
            fx_recv r;
            tfrdv_args args;
            memset(&r, 0, sizeof r);
            memset(&x, 0, sizeof x);
            world_begin(&w, 14);
            ca = world_cfg(&w, WA, INC_A);
            ca.call_timeout_ns = 1000;
            x.inner = tfrdv_loopback_transport(w.lb);
            x.w = &w;
            x.ev = ev;
            x.cm = world_cm(&w);
            args = cancel_args(x.cm);
            ca.transport.user = &x;
            ca.transport.start_call = racer_start;
            ca.transport.cancel_call = racer_cancel;
            world_start(&w, &ca);
            key(&k, B0, INC_B, A0, "raced");
            fx_value_init(&v, 33);
            if (ready) send(w.rb, &k, &v.v); /* the provider's answer comes inside start_call */
            recv(w.ra, &k, &args, &r);
            if (r.calls != 1 || r.st.code != ev_code(ev))
                printf("    race %s (value %s): calls %d code %s\n", ev_names[ev], ready ? "ready" : "later", r.calls,
                       tfrdv_code_str(r.st.code));
            TT_CHECK_EQ_INT(r.calls, 1);
            TT_CHECK_EQ_INT(r.st.code, ev_code(ev));
            TT_CHECK_EQ_INT(x.starts, 1);
            /* not ready: the provider was cancelled once start_call returned; ready: it had
               already finished, nothing to cancel */
            TT_CHECK_EQ_INT(x.cancels, ready ? 0 : 1);
            TT_CHECK_EQ_INT(stats(w.ma).calls_in_flight, 0);
            if (!ready) send(w.rb, &k, &v.v); /* withdrawn request: buffered on B until its step goes */
            TT_CHECK_EQ_INT(r.calls, 1);
            /* ready: the provider's answer found the receiver gone and gave the value back to B */
            TT_CHECK_EQ_INT(fx_released(&v), 0);
            TT_CHECK_EQ_INT(pending_of(w.rb, TFRDV_PENDING_SEND), 1);
            world_end(&w);
            TT_CHECK_EQ_INT(fx_released(&v), 1);
            TT_CHECK_EQ_INT(fx_live(&w.a), 0);
        }
    }
}

static void test_abort_before_recv_completes_at_once_with_abort_status(void) {
    world w;
    fx_key k;
    fx_recv r;
    memset(&r, 0, sizeof r);
    world_open(&w, 15);
    tfrdv_abort(w.ra, TFRDV_CANCELLED, "early abort");
    key(&k, B0, INC_B, A0, "x");
    recv(w.ra, &k, 0, &r);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_CANCELLED);
    TT_CHECK_STR(r.st.msg, "early abort");
    TT_CHECK_EQ_INT(w.f->started, 0);
    world_end(&w);
}

/* the receiver drops its last reference and cleans the step up from inside the callback */
static tfrdv_mgr* cb_mgr;
static tfrdv_rendezvous* cb_r;
static int cb_calls;
static void cleanup_from_callback(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                                  tfrdv_value* v, int dead) {
    (void)u;
    (void)st;
    (void)sa;
    (void)ra;
    (void)dead;
    cb_calls++;
    tfrdv_value_release(v);
    tfrdv_unref(cb_r);
    tfrdv_mgr_cleanup(cb_mgr, STEP);
}
static void test_callback_may_drop_the_step_and_clean_it_up(void) {
    world w;
    fx_key k;
    fx_value v;
    int sync;
    for (sync = 0; sync < 2; sync++) {
        world_open(&w, 16);
        faults_set(w.f, sync ? FAULT_PASS : FAULT_DELAY);
        cb_mgr = w.ma;
        cb_r = w.ra;
        w.ra = 0; /* the callback owns our reference */
        cb_calls = 0;
        key(&k, B0, INC_B, A0, "self");
        send(w.rb, &k, fx_value_init(&v, 34));
        TT_CHECK_EQ_INT(tfrdv_recv_async(cb_r, &k.pk, 0, cleanup_from_callback, 0, 0), TFRDV_OK);
        faults_flush(w.f, FAULTS_FIFO);
        TT_CHECK_EQ_INT(cb_calls, 1);
        TT_CHECK_EQ_INT(tfrdv_mgr_steps(w.ma, 0, 0), 0);
        TT_CHECK_EQ_INT(fx_released(&v), 1);
        world_end(&w);
    }
}

/* a callback starts the next remote receive (re-entrancy through finish) */
typedef struct chain {
    world* w;
    fx_key* keys;
    int n, next, calls, ok;
} chain;
static void chain_done(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,
                       tfrdv_value* v, int dead) {
    chain* c = (chain*)u;
    (void)sa;
    (void)ra;
    (void)dead;
    c->calls++;
    c->ok += st->code == TFRDV_OK;
    tfrdv_value_release(v);
    if (c->next < c->n) {
        int i = c->next++;
        tfrdv_recv_async(c->w->ra, &c->keys[i].pk, 0, chain_done, c, 0);
    }
}
static void test_callback_may_start_the_next_remote_receive(void) {
    world w;
    static fx_key keys[20];
    static fx_value v[20];
    chain c;
    int i;
    char edge[16];
    world_open(&w, 17);
    for (i = 0; i < 20; i++) {
        snprintf(edge, sizeof edge, "chain%d", i);
        key(&keys[i], B0, INC_B, A0, edge);
        send(w.rb, &keys[i], fx_value_init(&v[i], i));
    }
    memset(&c, 0, sizeof c);
    c.w = &w;
    c.keys = keys;
    c.n = 20;
    c.next = 1;
    TT_CHECK_EQ_INT(tfrdv_recv_async(w.ra, &keys[0].pk, 0, chain_done, &c, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(c.calls, 20);
    TT_CHECK_EQ_INT(c.ok, 20);
    for (i = 0; i < 20; i++) TT_CHECK_EQ_INT(fx_released(&v[i]), 1);
    world_end(&w);
}

/* ============================================================================================
   retries
   ============================================================================================ */
static void test_retry_on_unavailable_reuses_the_request_id(void) {
    world w;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_value v;
    fx_recv r;
    starts s;
    memset(&r, 0, sizeof r);
    memset(&s, 0, sizeof s);
    world_begin(&w, 18);
    ca = world_cfg(&w, WA, INC_A);
    ca.call_max_retries = 3;
    ca.retry_backoff_ns = 100;
    world_start(&w, &ca);
    w.f->on_start = observe;
    w.f->on_start_user = &s;
    faults_set_fail(w.f, TFRDV_UNAVAILABLE, 2); /* attempts 0 and 1 fail, 2 succeeds */
    key(&k, B0, INC_B, A0, "flaky");
    send(w.rb, &k, fx_value_init(&v, 40));
    fx_set_now(0);
    recv(w.ra, &k, 0, &r);
    TT_CHECK_EQ_INT(r.calls, 0); /* backing off */
    TT_CHECK_EQ_INT(s.n, 1);
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(w.ma, 99), 100);
    TT_CHECK_EQ_INT(s.n, 1);
    fx_set_now(100);
    /* retried and failed again inside this expire: the next deadline is the new retry time,
       100 + 1.3 x 100 (a host sleeping until the returned time must not miss it) */
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(w.ma, 100), 230);
    TT_CHECK_EQ_INT(s.n, 2);
    TT_CHECK_EQ_INT(r.calls, 0);
    fx_set_now(230);
    tfrdv_mgr_expire(w.ma, 230);
    TT_CHECK_EQ_INT(s.n, 3);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    TT_CHECK(fx_recv_matches(&r, 40));
    TT_CHECK(s.rid[0] != 0 && s.rid[0] == s.rid[1] && s.rid[1] == s.rid[2]);
    TT_CHECK(s.attempt[0] == 0 && s.attempt[1] == 1 && s.attempt[2] == 2);
    TT_CHECK_EQ_INT(stats(w.ma).calls_retried, 2);
    TT_CHECK_EQ_INT(stats(w.ma).calls_started, 1); /* one call, three attempts */
    TT_CHECK_EQ_INT(stats(w.mb).duplicate_requests, 0); /* failed attempts never reached B */
    world_end(&w);
}

static void test_retries_exhausted_report_unavailable(void) {
    world w;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_recv r;
    int i;
    memset(&r, 0, sizeof r);
    world_begin(&w, 19);
    ca = world_cfg(&w, WA, INC_A);
    ca.call_max_retries = 2;
    ca.retry_backoff_ns = 10;
    world_start(&w, &ca);
    faults_set_fail(w.f, TFRDV_UNAVAILABLE, 100);
    key(&k, B0, INC_B, A0, "down");
    recv(w.ra, &k, 0, &r);
    for (i = 1; i <= 5 && r.calls == 0; i++) {
        fx_set_now((int64_t)i * 1000);
        tfrdv_mgr_expire(w.ma, fx_get_now());
    }
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_UNAVAILABLE);
    TT_CHECK_EQ_INT(w.f->started, 3);
    TT_CHECK_EQ_INT(stats(w.ma).calls_retried, 2);
    world_end(&w);
}

static void test_no_retry_on_other_codes(void) {
    static const tfrdv_code codes[4] = {TFRDV_INTERNAL, TFRDV_ABORTED, TFRDV_UNKNOWN, TFRDV_DEADLINE_EXCEEDED};
    int i;
    for (i = 0; i < 4; i++) {
        world w;
        tfrdv_mgr_config ca;
        fx_key k;
        fx_recv r;
        memset(&r, 0, sizeof r);
        world_begin(&w, 20);
        ca = world_cfg(&w, WA, INC_A);
        ca.call_max_retries = 5;
        world_start(&w, &ca);
        faults_set_fail(w.f, codes[i], 1);
        key(&k, B0, INC_B, A0, "broken");
        recv(w.ra, &k, 0, &r);
        TT_CHECK_EQ_INT(r.calls, 1);
        TT_CHECK_EQ_INT(r.st.code, codes[i]);
        TT_CHECK_CONTAINS(r.st.msg, "faults: injected");
        tfrdv_mgr_expire(w.ma, 1000000000);
        TT_CHECK_EQ_INT(w.f->started, 1);
        TT_CHECK_EQ_INT(stats(w.ma).calls_retried, 0);
        world_end(&w);
    }
}

static void test_no_retry_when_backoff_would_pass_the_deadline(void) {
    world w;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_recv r;
    memset(&r, 0, sizeof r);
    world_begin(&w, 21);
    ca = world_cfg(&w, WA, INC_A);
    ca.call_max_retries = 5;
    ca.retry_backoff_ns = 100;
    ca.call_timeout_ns = 150;
    world_start(&w, &ca);
    faults_set_fail(w.f, TFRDV_UNAVAILABLE, 100);
    key(&k, B0, INC_B, A0, "deadline_first");
    recv(w.ra, &k, 0, &r); /* t=0: fails, 0+100 < 150: retry at 100 */
    TT_CHECK_EQ_INT(r.calls, 0);
    fx_set_now(100);
    tfrdv_mgr_expire(w.ma, 100); /* fails again, 100+130 >= 150: give up now */
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_UNAVAILABLE);
    TT_CHECK_EQ_INT(w.f->started, 2);
    world_end(&w);
}

/* cancel, abort, deadline and cleanup while the call backs off (BACKOFF -> DONE) */
static void test_every_event_during_backoff_completes_once_without_restart(void) {
    int ev;
    for (ev = EV_CANCEL; ev < EV_COUNT; ev++) {
        world w;
        tfrdv_mgr_config ca;
        fx_key k;
        fx_recv r;
        tfrdv_cancel_mgr* cm = 0;
        tfrdv_args args;
        memset(&r, 0, sizeof r);
        world_begin(&w, 22);
        ca = world_cfg(&w, WA, INC_A);
        ca.call_max_retries = 3;
        ca.retry_backoff_ns = 500;
        /* a retry is only scheduled before the deadline; expiring at the deadline finds both
           due and the deadline wins (no restart) */
        ca.call_timeout_ns = ev == EV_DEADLINE ? 1000 : 0;
        world_start(&w, &ca);
        cm = world_cm(&w);
        args = cancel_args(cm);
        faults_set_fail(w.f, TFRDV_UNAVAILABLE, 1);
        key(&k, B0, INC_B, A0, "backoff");
        recv(w.ra, &k, &args, &r);
        TT_CHECK_EQ_INT(r.calls, 0);
        TT_CHECK_EQ_INT(w.f->started, 1);
        apply_event(&w, ev, cm);
        TT_CHECK_EQ_INT(r.calls, 1);
        TT_CHECK_EQ_INT(r.st.code, ev_code(ev));
        tfrdv_mgr_expire(w.ma, 1000000000); /* nothing left to retry */
        TT_CHECK_EQ_INT(w.f->started, 1);
        TT_CHECK_EQ_INT(r.calls, 1);
        TT_CHECK_EQ_INT(stats(w.ma).calls_in_flight, 0);
        world_end(&w);
        TT_CHECK_EQ_INT(fx_live(&w.a), 0);
    }
}

/* ============================================================================================
   provider contract violations and faults
   ============================================================================================ */
static void test_double_finish_is_counted_and_ignored(void) {
    int ready;
    for (ready = 0; ready < 2; ready++) {
        world w;
        fx_key k;
        fx_value v;
        fx_recv r;
        int asserts = tt_asserts;
        memset(&r, 0, sizeof r);
        world_open(&w, 23);
        faults_set(w.f, FAULT_DUP_FINISH);
        key(&k, B0, INC_B, A0, "twice");
        fx_value_init(&v, 50);
        if (ready) send(w.rb, &k, &v.v); /* both finishes inside start_call */
        recv(w.ra, &k, 0, &r);
        if (!ready) send(w.rb, &k, &v.v); /* both finishes later: the second hits a recycled call */
        TT_CHECK_EQ_INT(r.calls, 1);
        TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
        TT_CHECK(fx_recv_matches(&r, 50));
        TT_CHECK_EQ_INT(stats(w.ma).double_finishes, 1);
        TT_CHECK_EQ_INT(tt_asserts, asserts + 1);
        TT_CHECK_EQ_INT(fx_released(&v), 1); /* the second finish's reference was released */
        world_end(&w);
        tt_asserts = asserts;
    }
}

static void test_cancel_call_after_finish_is_harmless(void) {
    world w;
    fx_key k;
    fx_value v[2];
    fx_recv r[2];
    tfrdv_transport lbt, ft;
    starts s;
    int via;
    memset(r, 0, sizeof r);
    memset(&s, 0, sizeof s);
    world_open(&w, 24);
    w.f->on_start = observe;
    w.f->on_start_user = &s;
    lbt = tfrdv_loopback_transport(w.lb);
    ft = faults_transport(w.f);
    key(&k, B0, INC_B, A0, "finished");
    for (via = 0; via < 2; via++) {
        tfrdv_call* call;
        faults_set(w.f, via ? FAULT_NONE : FAULT_PASS);
        send(w.rb, &k, fx_value_init(&v[via], 51 + via));
        recv(w.ra, &k, 0, &r[via]);
        TT_CHECK_EQ_INT(r[via].calls, 1);
        call = s.call[s.n - 1];
        /* finished and recycled into the manager's free list: cancelling it again through either
           provider must do nothing */
        TT_CHECK(stats(w.ma).calls_free >= 1);
        lbt.cancel_call(lbt.user, call);
        ft.cancel_call(ft.user, call);
        ft.cancel_call(ft.user, call);
        TT_CHECK_EQ_INT(r[via].calls, 1);
        TT_CHECK_EQ_INT(r[via].st.code, TFRDV_OK);
        TT_CHECK_EQ_INT(fx_released(&v[via]), 1);
    }
    TT_CHECK_EQ_INT(stats(w.ma).double_finishes, 0);
    world_end(&w);
}

static void test_duplicate_request_is_rejected_by_the_server_and_not_double_completed(void) {
    int ready;
    for (ready = 0; ready < 2; ready++) {
        world w;
        fx_key k;
        fx_value v;
        fx_recv r;
        memset(&r, 0, sizeof r);
        world_open(&w, 25);
        faults_set(w.f, FAULT_DUP_REQUEST);
        key(&k, B0, INC_B, A0, "dup");
        fx_value_init(&v, 53);
        if (ready) send(w.rb, &k, &v.v);
        recv(w.ra, &k, 0, &r);
        if (!ready) send(w.rb, &k, &v.v);
        TT_CHECK_EQ_INT(r.calls, 1);
        TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
        TT_CHECK(fx_recv_matches(&r, 53));
        TT_CHECK_EQ_INT(w.f->dup_answers, 1);
        TT_CHECK_EQ_INT(w.f->dup_codes[TFRDV_ABORTED], 1);
        TT_CHECK_EQ_INT(stats(w.mb).duplicate_requests, 1);
        TT_CHECK_EQ_INT(fx_released(&v), 1);
        world_end(&w);
    }
}

static void test_duplicate_request_with_response_cache_gets_the_same_answer_once_delivered(void) {
    world w;
    tfrdv_mgr_config ca, cb;
    fx_key k;
    fx_value v;
    fx_recv r;
    memset(&r, 0, sizeof r);
    world_begin(&w, 26);
    ca = world_cfg(&w, WA, INC_A);
    cb = world_cfg(&w, WB, INC_B);
    cb.response_cache = 1;
    world_start_ab(&w, &ca, &cb);
    faults_set(w.f, FAULT_DUP_REQUEST);
    key(&k, B0, INC_B, A0, "cached_dup");
    recv(w.ra, &k, 0, &r);
    send(w.rb, &k, fx_value_init(&v, 54));
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    TT_CHECK_EQ_INT(w.f->dup_answers, 1);
    TT_CHECK_EQ_INT(w.f->dup_codes[TFRDV_OK], 1); /* a cache hit, not a duplicate error */
    TT_CHECK_EQ_INT(stats(w.mb).cache_hits, 1);
    TT_CHECK_EQ_INT(fx_released(&v), 0); /* the cache keeps it until the step is cleaned up */
    tfrdv_mgr_cleanup(w.mb, STEP);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    world_end(&w);
}

static void test_restarted_worker_fails_with_incarnation_text(void) {
    int via;
    for (via = 0; via < 2; via++) {
        world w;
        fx_key k;
        fx_value v;
        fx_recv r;
        char want[300];
        memset(&r, 0, sizeof r);
        world_open(&w, 27);
        faults_set(w.f, via ? FAULT_NONE : FAULT_PASS);
        key(&k, B0, INC_B, A0, "restart");
        send(w.rb, &k, fx_value_init(&v, 55));
        world_restart_b(&w);
        recv(w.ra, &k, 0, &r);
        TT_CHECK_EQ_INT(r.calls, 1);
        TT_CHECK_EQ_INT(r.st.code, TFRDV_ABORTED);
        snprintf(want, sizeof want,
                 "RecvTensor expects a different device incarnation: %016x vs. %016x. Your worker job (\"%s\") was "
                 "probably restarted. Check your worker job for the reason why it was restarted.",
                 INC_B, INC_B + 1, WB);
        TT_CHECK_STR(r.st.msg, want);
        TT_CHECK_EQ_INT(fx_released(&v), 0); /* still buffered on the old B */
        TT_CHECK_EQ_INT(r.st.detail, TFRDV_DETAIL_WORKER_RESTARTED); /* the kind crosses the transport */
        world_end(&w);
        TT_CHECK_EQ_INT(fx_released(&v), 1);
    }
}

static void test_delay_and_reorder_deliver_each_value_to_its_receiver(void) {
    int order;
    for (order = FAULTS_FIFO; order <= FAULTS_RANDOM; order++) {
        world w;
        static fx_key k[64];
        static fx_value v[64];
        static fx_recv r[64];
        int i, ok = 0;
        char edge[16];
        world_open(&w, 28 + (uint64_t)order);
        faults_set(w.f, FAULT_DELAY);
        memset(r, 0, sizeof r);
        for (i = 0; i < 64; i++) {
            snprintf(edge, sizeof edge, "d%d", i);
            key(&k[i], B0, INC_B, A0, edge);
            if (i % 2) send(w.rb, &k[i], fx_value_init(&v[i], 100 + i));
            recv(w.ra, &k[i], 0, &r[i]);
            if (!(i % 2)) send(w.rb, &k[i], fx_value_init(&v[i], 100 + i));
        }
        TT_CHECK_EQ_INT(faults_held(w.f), 64);
        for (i = 0; i < 64; i++) TT_CHECK_EQ_INT(r[i].calls, 0);
        TT_CHECK_EQ_INT(faults_flush(w.f, order), 64);
        for (i = 0; i < 64; i++) {
            TT_CHECK_EQ_INT(r[i].calls, 1);
            ok += fx_recv_matches(&r[i], 100 + i);
            TT_CHECK_EQ_INT(fx_released(&v[i]), 1);
        }
        TT_CHECK_EQ_INT(ok, 64);
        world_end(&w);
    }
}

static void test_dropped_call_completes_only_when_cancelled(void) {
    world w;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_value v;
    fx_recv r;
    memset(&r, 0, sizeof r);
    world_begin(&w, 29);
    ca = world_cfg(&w, WA, INC_A);
    ca.call_timeout_ns = 500;
    world_start(&w, &ca);
    faults_set(w.f, FAULT_DROP);
    key(&k, B0, INC_B, A0, "lost");
    send(w.rb, &k, fx_value_init(&v, 56));
    recv(w.ra, &k, 0, &r);
    TT_CHECK_EQ_INT(r.calls, 0); /* the value is there, but the request was lost */
    TT_CHECK_EQ_INT(tfrdv_mgr_expire(w.ma, 499), 500);
    TT_CHECK_EQ_INT(r.calls, 0);
    tfrdv_mgr_expire(w.ma, 500);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_EQ_INT(w.f->cancelled_finishes, 1);
    TT_CHECK_EQ_INT(faults_live(w.f), 0);
    TT_CHECK_EQ_INT(fx_released(&v), 0); /* never fetched: B still buffers it */
    world_end(&w);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
}

static void test_destroy_receiver_with_calls_in_flight(void) {
    world w;
    fx_key k[3];
    fx_value v[3];
    fx_recv r[3];
    int i;
    memset(r, 0, sizeof r);
    world_open(&w, 30);
    key(&k[0], B0, INC_B, A0, "pass");
    key(&k[1], B0, INC_B, A0, "drop");
    key(&k[2], B0, INC_B, A0, "delay");
    faults_set(w.f, FAULT_PASS);
    recv(w.ra, &k[0], 0, &r[0]);
    faults_set(w.f, FAULT_DROP);
    recv(w.ra, &k[1], 0, &r[1]);
    faults_set(w.f, FAULT_DELAY);
    send(w.rb, &k[2], fx_value_init(&v[2], 2));
    recv(w.ra, &k[2], 0, &r[2]);
    TT_CHECK_EQ_INT(faults_held(w.f), 1);
    tfrdv_unref(w.ra);
    w.ra = 0;
    tfrdv_mgr_destroy(w.ma);
    w.ma = 0;
    for (i = 0; i < 3; i++) {
        TT_CHECK_EQ_INT(r[i].calls, 1);
        TT_CHECK_EQ_INT(r[i].st.code, TFRDV_ABORTED);
        TT_CHECK_CONTAINS(r[i].st.msg, "Shutdown");
    }
    TT_CHECK_EQ_INT(faults_held(w.f), 0);
    TT_CHECK_EQ_INT(fx_released(&v[2]), 1);
    send(w.rb, &k[0], fx_value_init(&v[0], 0));
    send(w.rb, &k[1], fx_value_init(&v[1], 1));
    TT_CHECK_EQ_INT(fx_released(&v[0]), 0); /* its request was withdrawn: buffered on B */
    world_end(&w);
    TT_CHECK_EQ_INT(fx_released(&v[0]), 1);
    for (i = 0; i < 3; i++) TT_CHECK_EQ_INT(r[i].calls, 1);
    TT_CHECK_EQ_INT(fx_released(&v[1]), 1);
}

/* ============================================================================================
   a scripted provider: what start_call does is up to the test
   ============================================================================================ */
enum { SC_HOLD, SC_ERROR_WITH_VALUE, SC_UNAVAILABLE_TWICE, SC_ALLOC_VALUE };
typedef struct script {
    int mode, starts, cancels;
    tfrdv_call* held; /* SC_HOLD: finished by the test */
    fx_value* v;
    /* what start_call saw (SC_HOLD / SC_ALLOC_VALUE) */
    int64_t step_id;
    char key[320];
    char worker[64];
    int scratch_aligned, bad_allocs_null;
    const tfrdv_args* recv_args;
} script;
static void sc_start(void* u, tfrdv_call* call) {
    script* sc = (script*)u;
    tfrdv_str k = tfrdv_call_key(call), wk = tfrdv_call_src_worker(call);
    sc->starts++;
    sc->step_id = tfrdv_call_step_id(call);
    if (k.len < sizeof sc->key) {
        memcpy(sc->key, k.ptr, k.len);
        sc->key[k.len] = 0;
    }
    if (wk.len < sizeof sc->worker) {
        memcpy(sc->worker, wk.ptr, wk.len);
        sc->worker[wk.len] = 0;
    }
    sc->scratch_aligned = ((uintptr_t)tfrdv_call_scratch(call) % 16) == 0;
    memset(tfrdv_call_scratch(call), 0xab, TFRDV_CALL_SCRATCH_SIZE); /* all 64 bytes are ours */
    sc->recv_args = tfrdv_call_recv_args(call);
    switch (sc->mode) {
    case SC_HOLD: sc->held = call; break;
    case SC_ERROR_WITH_VALUE: tfrdv_call_finish(call, TFRDV_INTERNAL, "boom", &sc->v->v, 0); break;
    case SC_UNAVAILABLE_TWICE:
        if (tfrdv_call_attempt(call) == 0) {
            tfrdv_call_finish(call, TFRDV_UNAVAILABLE, "flaky", 0, 0);
            tfrdv_call_finish(call, TFRDV_UNAVAILABLE, "flaky again", 0, 0); /* hits BACKOFF */
        } else {
            tfrdv_call_finish(call, TFRDV_OK, "", &sc->v->v, 0);
        }
        break;
    case SC_ALLOC_VALUE: {
        int64_t dims[2] = {2, 3};
        tfrdv_value* nv = tfrdv_call_alloc_value(call, 3, 2, dims, 24);
        int i;
        sc->bad_allocs_null = tfrdv_call_alloc_value(call, 3, -1, dims, 8) == 0 &&
                              tfrdv_call_alloc_value(call, 3, 2, 0, 8) == 0 &&
                              tfrdv_call_alloc_value(call, 3, 0, 0, UINT64_MAX - 8) == 0 &&
                              tfrdv_call_alloc_value(0, 3, 0, 0, 8) == 0;
        if (!nv) {
            tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "no memory", 0, 0);
            break;
        }
        for (i = 0; i < 24; i++) ((unsigned char*)nv->data)[i] = fx_byte(77, i);
        tfrdv_call_finish(call, TFRDV_OK, "", nv, 0);
        break;
    }
    default: break;
    }
}
static void sc_cancel(void* u, tfrdv_call* call) {
    (void)call;
    ((script*)u)->cancels++; /* the finish comes later, from the test */
}
/* world_begin, and in ca A's config with the scripted provider sc (zeroed here) for world_start */
static void sc_world(world* w, uint64_t seed, script* sc, tfrdv_mgr_config* ca) {
    memset(sc, 0, sizeof *sc);
    world_begin(w, seed);
    *ca = world_cfg(w, WA, INC_A);
    ca->transport.user = sc;
    ca->transport.start_call = sc_start;
    ca->transport.cancel_call = sc_cancel;
}

/* tfrdv_call_finish_status with give_back: an OK answer for a receiver that already gave up stays
   the provider's (returns 1, nothing released); a wanted one is taken (0). Without give_back the
   unwanted value is released (the next test). */
static void test_give_back_leaves_an_unwanted_value_with_the_provider(void) {
    world w;
    script sc;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_value v;
    fx_recv r1, r2;
    tfrdv_cancel_mgr* cm;
    tfrdv_args args;
    tfrdv_call* held;
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    sc_world(&w, 41, &sc, &ca);
    world_start(&w, &ca);
    cm = world_cm(&w);
    args = cancel_args(cm);
    key(&k, B0, INC_B, A0, "kept");
    sc.mode = SC_HOLD;
    recv(w.ra, &k, &args, &r1);
    held = sc.held;
    tfrdv_cancel_start(cm); /* the receiver gives up: CANCELLED, the provider still owes a finish */
    TT_CHECK(r1.calls == 1 && r1.st.code == TFRDV_CANCELLED);
    fx_value_init(&v, 9);
    TT_CHECK_EQ_INT(tfrdv_call_finish_status(held, 0, &v.v, 0, 1), 1);
    TT_CHECK_EQ_INT(fx_released(&v), 0); /* still ours */
    TT_CHECK_EQ_INT(r1.calls, 1);
    /* a wanted answer is delivered (0): the receiver owns it */
    recv(w.ra, &k, 0, &r2);
    TT_CHECK_EQ_INT(tfrdv_call_finish_status(sc.held, 0, &v.v, 0, 1), 0);
    TT_CHECK(r2.calls == 1 && r2.st.code == TFRDV_OK && fx_recv_matches(&r2, 9));
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    TT_CHECK_EQ_INT(stats(w.ma).double_finishes, 0);
    world_end(&w);
}

static void test_provider_finishing_after_cancel_releases_its_value_and_recycles_the_call(void) {
    int ev;
    for (ev = EV_CANCEL; ev < EV_COUNT + 1; ev++) { /* EV_COUNT: the receiving manager is destroyed */
        world w;
        script sc;
        tfrdv_mgr_config ca;
        fx_key k;
        fx_value v;
        fx_recv r;
        tfrdv_cancel_mgr* cm;
        tfrdv_args args;
        tfrdv_call* call;
        memset(&r, 0, sizeof r);
        sc_world(&w, 40, &sc, &ca);
        ca.call_timeout_ns = 1000;
        world_start(&w, &ca);
        cm = world_cm(&w);
        args = cancel_args(cm);
        args.device_context = &sc;
        key(&k, B0, INC_B, A0, "held");
        recv(w.ra, &k, &args, &r);
        TT_CHECK_EQ_INT(sc.starts, 1);
        TT_CHECK(sc.held != 0);
        TT_CHECK_EQ_INT(sc.step_id, STEP);
        TT_CHECK_STR(sc.key, k.buf);
        TT_CHECK_STR(sc.worker, WB);
        TT_CHECK(sc.scratch_aligned);
        TT_CHECK(sc.recv_args && sc.recv_args->device_context == &sc);
        if (ev < EV_COUNT) {
            apply_event(&w, ev, cm);
        } else {
            tfrdv_unref(w.ra);
            w.ra = 0;
            tfrdv_mgr_destroy(w.ma);
        }
        TT_CHECK_EQ_INT(r.calls, 1);
        TT_CHECK_EQ_INT(r.st.code, ev < EV_COUNT ? ev_code(ev) : TFRDV_ABORTED);
        TT_CHECK_EQ_INT(sc.cancels, 1);
        if (ev < EV_COUNT) TT_CHECK_EQ_INT(stats(w.ma).calls_in_flight, 1); /* ORPHANED: the provider owes its finish */
        call = sc.held;
        tfrdv_call_finish(call, TFRDV_OK, "", fx_value_init(&v, 41), 0); /* the late answer */
        TT_CHECK_EQ_INT(r.calls, 1);
        TT_CHECK_EQ_INT(fx_released(&v), 1);
        if (ev < EV_COUNT) {
            TT_CHECK_EQ_INT(stats(w.ma).calls_in_flight, 0);
            TT_CHECK_EQ_INT(stats(w.ma).calls_free, 1);
            TT_CHECK_EQ_INT(stats(w.ma).double_finishes, 0);
        } else {
            w.ma = 0; /* destroyed above; its memory went with the last call */
        }
        world_end(&w);
    }
}

static void test_error_finish_with_a_value_releases_the_value(void) {
    world w;
    script sc;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_value v;
    fx_recv r;
    memset(&r, 0, sizeof r);
    sc_world(&w, 41, &sc, &ca);
    world_start(&w, &ca);
    sc.mode = SC_ERROR_WITH_VALUE;
    sc.v = &v;
    fx_value_init(&v, 42);
    key(&k, B0, INC_B, A0, "err");
    recv(w.ra, &k, 0, &r);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_INTERNAL);
    TT_CHECK_STR(r.st.msg, "boom");
    TT_CHECK_EQ_INT(r.has_value, 0);
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    world_end(&w);
}

static void test_second_finish_of_a_backing_off_call_is_counted_and_ignored(void) {
    world w;
    script sc;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_value v;
    fx_recv r;
    int asserts = tt_asserts;
    memset(&r, 0, sizeof r);
    sc_world(&w, 42, &sc, &ca);
    ca.call_max_retries = 1;
    ca.retry_backoff_ns = 10;
    world_start(&w, &ca);
    sc.mode = SC_UNAVAILABLE_TWICE;
    sc.v = &v;
    fx_value_init(&v, 43);
    key(&k, B0, INC_B, A0, "flaky");
    recv(w.ra, &k, 0, &r);
    TT_CHECK_EQ_INT(r.calls, 0);
    TT_CHECK_EQ_INT(stats(w.ma).double_finishes, 1);
    TT_CHECK_EQ_INT(tt_asserts, asserts + 1);
    fx_set_now(10);
    tfrdv_mgr_expire(w.ma, 10);
    TT_CHECK_EQ_INT(sc.starts, 2);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    TT_CHECK(fx_recv_matches(&r, 43));
    TT_CHECK_EQ_INT(fx_released(&v), 1);
    world_end(&w);
    tt_asserts = asserts;
}

static void test_call_alloc_value_uses_the_manager_allocator(void) {
    world w;
    script sc;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_recv r;
    memset(&r, 0, sizeof r);
    sc_world(&w, 43, &sc, &ca);
    world_start(&w, &ca);
    sc.mode = SC_ALLOC_VALUE;
    key(&k, B0, INC_B, A0, "alloc");
    r.keep = 1;
    recv(w.ra, &k, 0, &r);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    TT_CHECK(fx_recv_matches(&r, 77));
    TT_CHECK(sc.bad_allocs_null);
    {
        long before = fx_live(&w.a);
        tfrdv_value_release(r.kept); /* one block: value, dims and bytes */
        TT_CHECK_EQ_INT(fx_live(&w.a), before - 1);
    }
    world_end(&w);
}

static void test_call_accessors_on_null(void) {
    fx_value v;
    tfrdv_str k = tfrdv_call_key(0), wk = tfrdv_call_src_worker(0);
    TT_CHECK_EQ_INT(tfrdv_call_step_id(0), 0);
    TT_CHECK_EQ_INT(tfrdv_call_request_id(0), 0);
    TT_CHECK_EQ_INT(tfrdv_call_attempt(0), 0);
    TT_CHECK(tfrdv_hash_bytes(NULL, 5) == tfrdv_hash_bytes("", 0)); /* NULL data: zero bytes */
    TT_CHECK(k.ptr == 0 && k.len == 0 && wk.ptr == 0 && wk.len == 0);
    TT_CHECK(tfrdv_call_endpoint(0) == 0 && tfrdv_call_recv_args(0) == 0 && tfrdv_call_scratch(0) == 0);
    tfrdv_call_finish(0, TFRDV_OK, "", fx_value_init(&v, 1), 0); /* the value is released */
    TT_CHECK_EQ_INT(fx_released(&v), 1);
}

/* an all-zero transport, or that of tfrdv_loopback_transport(NULL) (which is all zeros) */
static void no_transport(int loopback_of_null) {
    world w;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_recv r;
    memset(&r, 0, sizeof r);
    world_begin(&w, 44);
    ca = world_cfg(&w, WA, INC_A);
    memset(&ca.transport, 0, sizeof ca.transport);
    if (loopback_of_null) {
        ca.transport = tfrdv_loopback_transport(NULL);
        TT_CHECK(!ca.transport.start_call && !ca.transport.user && !ca.transport.destroy && !ca.transport.peer_incarnation);
    }
    world_start(&w, &ca);
    key(&k, B0, INC_B, A0, "nowhere");
    recv(w.ra, &k, 0, &r);
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_UNIMPLEMENTED);
    world_end(&w);
}
static void test_manager_without_transport_fails_remote_receives_unimplemented(void) { no_transport(0); }
static void test_loopback_transport_of_null_is_no_transport(void) { no_transport(1); }

static void test_destroy_receiver_while_a_call_backs_off(void) {
    world w;
    tfrdv_mgr_config ca;
    fx_key k;
    fx_recv r;
    memset(&r, 0, sizeof r);
    world_begin(&w, 45);
    ca = world_cfg(&w, WA, INC_A);
    ca.call_max_retries = 3;
    ca.retry_backoff_ns = 100;
    world_start(&w, &ca);
    faults_set_fail(w.f, TFRDV_UNAVAILABLE, 100);
    key(&k, B0, INC_B, A0, "backing_off");
    recv(w.ra, &k, 0, &r);
    TT_CHECK_EQ_INT(r.calls, 0);
    tfrdv_unref(w.ra);
    w.ra = 0;
    tfrdv_mgr_destroy(w.ma);
    w.ma = 0;
    TT_CHECK_EQ_INT(r.calls, 1);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_ABORTED);
    TT_CHECK_EQ_INT(w.f->started, 1);
    world_end(&w);
}

static void test_call_free_list_is_bounded(void) {
    world w;
    tfrdv_mgr_config ca;
    fx_key k[10];
    fx_value v[10];
    fx_recv r[10];
    int i;
    char edge[16];
    memset(r, 0, sizeof r);
    world_begin(&w, 46);
    ca = world_cfg(&w, WA, INC_A);
    ca.call_freelist_max = 2;
    world_start(&w, &ca);
    for (i = 0; i < 10; i++) {
        snprintf(edge, sizeof edge, "f%d", i);
        key(&k[i], B0, INC_B, A0, edge);
        recv(w.ra, &k[i], 0, &r[i]);
    }
    TT_CHECK_EQ_INT(stats(w.ma).calls_in_flight, 10);
    for (i = 0; i < 10; i++) send(w.rb, &k[i], fx_value_init(&v[i], i));
    for (i = 0; i < 10; i++) TT_CHECK_EQ_INT(r[i].calls, 1);
    TT_CHECK_EQ_INT(stats(w.ma).calls_in_flight, 0);
    TT_CHECK_EQ_INT(stats(w.ma).calls_free, 2);
    TT_CHECK_EQ_INT(stats(w.ma).calls_completed, 10);
    world_end(&w);
}

/* ============================================================================================
   the matrix: fault x contract event, a few hundred receives per cell
   ============================================================================================ */
enum { MF_PASS, MF_NONE, MF_DROP, MF_DELAY, MF_REORDER, MF_LAZY_CANCEL, MF_DUP_REQUEST, MF_DUP_FINISH, MF_UNAVAIL_THEN_OK,
       MF_INTERNAL, MF_RESTART, MF_COUNT };
static const char* const mf_names[MF_COUNT] = {"loopback", "none", "drop", "delay", "reorder", "lazy-cancel",
                                               "duplicate-request", "double-finish", "unavailable-then-ok", "internal",
                                               "restart"};
#define MN 240
static fx_key mkeys[MN];
static fx_value mvals[MN];
static fx_recv mrecv[MN];

/* unavailable-then-ok: every call fails its first attempt, about half (odd request ids) also the
   second, so some calls are still backing off when the event comes */
static faults_kind choose_flaky(void* u, tfrdv_call* call) {
    int a = tfrdv_call_attempt(call);
    (void)u;
    return (a == 0 || (a == 1 && (tfrdv_call_request_id(call) & 1))) ? FAULT_FAIL : FAULT_NONE;
}
static int mf_succeeds(int mf) { return mf != MF_DROP && mf != MF_INTERNAL && mf != MF_RESTART; }
static int code_allowed(int mf, int ev, tfrdv_code code) {
    if (code == TFRDV_OK) return mf_succeeds(mf) || mf == MF_RESTART;
    if (mf == MF_INTERNAL && code == TFRDV_INTERNAL) return 1;
    if (mf == MF_RESTART && code == TFRDV_ABORTED) return 1;
    if (ev != EV_PLAIN && code == ev_code(ev)) return 1;
    if (mf == MF_DROP && ev == EV_PLAIN && code == TFRDV_ABORTED) return 1; /* at teardown */
    return 0;
}
static void matrix_cell(int mf, int ev) {
    world w;
    tfrdv_mgr_config ca;
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_args args_cm, args_heap;
    int i, wrong = 0, bad_bytes = 0, early = 0, not_once = 0, not_released = 0, ok = 0, asserts = tt_asserts;
    long dup_finishes;
    char edge[16];
    memset(mrecv, 0, sizeof mrecv);
    heap_live = 0;
    world_begin(&w, (uint64_t)(mf * 31 + ev + 1));
    ca = world_cfg(&w, WA, INC_A);
    ca.call_max_retries = 3;
    ca.retry_backoff_ns = 10;
    if (ev == EV_DEADLINE) ca.call_timeout_ns = 1000;
    world_start(&w, &ca);
    cm = world_cm(&w);
    memset(&args_heap, 0, sizeof args_heap);
    args_cm = cancel_args(cm);
    args_heap.alloc_fn = heap_alloc; /* some receives land in receiver memory */
    args_heap.cancel = ev == EV_CANCEL ? cm : 0;
    switch (mf) {
    case MF_PASS: faults_set(w.f, FAULT_PASS); break;
    case MF_NONE: faults_set(w.f, FAULT_NONE); break;
    case MF_DROP: faults_set(w.f, FAULT_DROP); break;
    case MF_DELAY:
    case MF_REORDER: faults_set(w.f, FAULT_DELAY); break;
    case MF_LAZY_CANCEL: /* held answers and cancellations that complete later, in random order */
        faults_set(w.f, FAULT_DELAY);
        w.f->lazy_cancel = 1;
        break;
    case MF_DUP_REQUEST: faults_set(w.f, FAULT_DUP_REQUEST); break;
    case MF_DUP_FINISH: faults_set(w.f, FAULT_DUP_FINISH); break;
    case MF_UNAVAIL_THEN_OK:
        faults_set_fail(w.f, TFRDV_UNAVAILABLE, 100);
        w.f->choose = choose_flaky;
        break;
    case MF_INTERNAL: faults_set_fail(w.f, TFRDV_INTERNAL, 1); break;
    case MF_RESTART: faults_set(w.f, FAULT_PASS); break; /* B restarts halfway through phase 1 */
    default: break;
    }
    /* phase 1: a third sent before the receive, a third right after, a third after the event */
    for (i = 0; i < MN; i++) {
        const tfrdv_args* args = (i % 4 == 3) ? &args_heap : (ev == EV_CANCEL || i % 2) ? &args_cm : 0;
        snprintf(edge, sizeof edge, "m%d", i);
        key(&mkeys[i], B0, INC_B, A0, edge);
        fx_value_init(&mvals[i], i);
        if (mf == MF_RESTART && i == MN / 2) world_restart_b(&w); /* earlier calls stay on the old B */
        if (i % 3 == 0) send(w.rb, &mkeys[i], &mvals[i].v);
        recv(w.ra, &mkeys[i], args, &mrecv[i]);
        if (i % 3 == 1) send(w.rb, &mkeys[i], &mvals[i].v);
    }
    /* let retries happen, and release half of the held answers, before the event */
    fx_set_now(20);
    tfrdv_mgr_expire(w.ma, fx_get_now());
    {
        long h = faults_held(w.f), j;
        for (j = 0; j < h / 2; j++) {
            if (mf == MF_REORDER || mf == MF_LAZY_CANCEL) faults_release(w.f, (long)(faults_rand(w.f) % (uint64_t)(h - j)));
            else faults_release(w.f, 0);
        }
    }
    apply_event(&w, ev, cm);
    /* phase 2: the rest of the values, then every held answer, then pending retries */
    for (i = 2; i < MN; i += 3) send(w.rb, &mkeys[i], &mvals[i].v);
    faults_flush(w.f, (mf == MF_REORDER || mf == MF_LAZY_CANCEL) ? FAULTS_RANDOM : FAULTS_FIFO);
    fx_set_now(fx_get_now() + 100);
    tfrdv_mgr_expire(w.ma, fx_get_now());
    faults_flush(w.f, FAULTS_RANDOM);
    if (!(mf == MF_DROP && ev == EV_PLAIN)) {
        /* everything has completed before teardown */
        for (i = 0; i < MN; i++) early += mrecv[i].calls != 1;
        TT_CHECK_EQ_INT(stats(w.ma).calls_in_flight, 0);
    }
    dup_finishes = w.f->dup_finishes;
    TT_CHECK_EQ_INT(stats(w.ma).double_finishes, (uint64_t)dup_finishes);
    TT_CHECK_EQ_INT(tt_asserts - asserts, dup_finishes);
    if (mf == MF_DUP_FINISH && ev == EV_PLAIN) TT_CHECK_EQ_INT(dup_finishes, MN);
    if (mf == MF_DUP_REQUEST) TT_CHECK_EQ_INT(w.f->dup_answers, w.f->served / 2);
    if (mf == MF_UNAVAIL_THEN_OK && ev == EV_PLAIN) TT_CHECK(stats(w.ma).calls_retried > MN && stats(w.ma).calls_retried < 2 * MN);
    world_end(&w);
    TT_CHECK_EQ_INT(fx_live(&w.a), 0);
    TT_CHECK_EQ_INT(heap_live, 0);
    tt_asserts = asserts;
    for (i = 0; i < MN; i++) {
        not_once += mrecv[i].calls != 1;
        not_released += fx_released(&mvals[i]) != 1;
        if (!code_allowed(mf, ev, mrecv[i].st.code)) {
            if (!wrong)
                printf("    %s x %s: receive %d got %s \"%s\"\n", mf_names[mf], ev_names[ev], i,
                       tfrdv_code_str(mrecv[i].st.code), mrecv[i].st.msg);
            wrong++;
        }
        if (mrecv[i].st.code == TFRDV_OK) {
            ok++;
            bad_bytes += !fx_recv_matches(&mrecv[i], i);
        }
    }
    if (early || not_once || not_released || wrong || bad_bytes)
        printf("    %s x %s: %d unfinished before teardown, %d not exactly once, %d not released once, "
               "%d wrong codes, %d bad payloads\n",
               mf_names[mf], ev_names[ev], early, not_once, not_released, wrong, bad_bytes);
    TT_CHECK_EQ_INT(early, 0);
    TT_CHECK_EQ_INT(not_once, 0);
    TT_CHECK_EQ_INT(not_released, 0);
    TT_CHECK_EQ_INT(wrong, 0);
    TT_CHECK_EQ_INT(bad_bytes, 0);
    if (ev == EV_PLAIN && mf_succeeds(mf)) TT_CHECK_EQ_INT(ok, MN);
    if (ev != EV_PLAIN && mf_succeeds(mf)) TT_CHECK(ok > 0 && ok < MN); /* some before, some cut off */
    if (mf == MF_RESTART) TT_CHECK(ok > 0 && ok <= MN / 2);
    if (ev != EV_PLAIN && mf_succeeds(mf) && mf != MF_UNAVAIL_THEN_OK) TT_CHECK(ok >= MN / 3);
}
static void test_matrix_fault_x_event_exactly_once_and_released_once(void) {
    int mf, ev;
    for (mf = 0; mf < MF_COUNT; mf++)
        for (ev = 0; ev < EV_COUNT; ev++) matrix_cell(mf, ev);
}

/* ============================================================================================
   threads: receives, sends, cancels, flushes and expiry from three threads (for tsan)
   ============================================================================================ */
/* n keys B0 -> A0 named <prefix><i>, and a value with seed i for each */
static void keys_and_values(fx_key* keys, fx_value* vals, int n, const char* prefix) {
    char edge[32];
    int i;
    for (i = 0; i < n; i++) {
        snprintf(edge, sizeof edge, "%s%d", prefix, i);
        key(&keys[i], B0, INC_B, A0, edge);
        fx_value_init(&vals[i], i);
    }
}
#define TN 400
typedef struct threaded {
    world* w;
    fx_key* keys;
    fx_value* vals;
    volatile int stop;
} threaded;
static void* sender_thread(void* p) {
    threaded* t = (threaded*)p;
    int i;
    for (i = TN - 1; i >= 0; i--) {
        tfrdv_status st;
        if (tfrdv_send(t->w->rb, &t->keys[i].pk, 0, &t->vals[i].v, 0, &st) != TFRDV_OK) tfrdv_value_release(&t->vals[i].v);
    }
    return 0;
}
static void* flusher_thread(void* p) {
    threaded* t = (threaded*)p;
    while (!__atomic_load_n(&t->stop, __ATOMIC_SEQ_CST)) {
        faults_flush(t->w->f, FAULTS_RANDOM);
        fx_set_now(fx_get_now() + 7);
        tfrdv_mgr_expire(t->w->ma, fx_get_now());
    }
    return 0;
}
static void test_threads_receive_send_cancel_flush_exactly_once(void) {
    world w;
    tfrdv_mgr_config ca;
    static fx_key keys[TN];
    static fx_value vals[TN];
    static fx_recv rs[TN];
    tfrdv_cancel_mgr* cms[8];
    tfrdv_args args[8];
    threaded t;
    pthread_t ts, tf;
    int i, not_once = 0, not_released = 0, bad = 0;
    world_begin(&w, 99);
    ca = world_cfg(&w, WA, INC_A);
    ca.call_timeout_ns = 5000;
    ca.call_max_retries = 2;
    ca.retry_backoff_ns = 3;
    world_start(&w, &ca);
    faults_set(w.f, FAULT_DELAY);
    memset(rs, 0, sizeof rs);
    for (i = 0; i < 8; i++) {
        cms[i] = world_cm(&w);
        args[i] = cancel_args(cms[i]);
    }
    keys_and_values(keys, vals, TN, "t");
    t.w = &w;
    t.keys = keys;
    t.vals = vals;
    t.stop = 0;
    pthread_create(&ts, 0, sender_thread, &t);
    pthread_create(&tf, 0, flusher_thread, &t);
    for (i = 0; i < TN; i++) {
        if (i % 5 == 1) faults_set(w.f, FAULT_PASS);
        else if (i % 5 == 2) faults_set_fail(w.f, TFRDV_UNAVAILABLE, 1);
        else faults_set(w.f, FAULT_DELAY);
        recv(w.ra, &keys[i], &args[i % 8], &rs[i]);
        if (i % 50 == 49) tfrdv_cancel_start(cms[(i / 50) % 8]);
    }
    pthread_join(ts, 0);
    __atomic_store_n(&t.stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(tf, 0);
    faults_flush(w.f, FAULTS_RANDOM);
    fx_set_now(fx_get_now() + 100000);
    tfrdv_mgr_expire(w.ma, fx_get_now());
    faults_flush(w.f, FAULTS_RANDOM);
    world_end(&w);
    for (i = 0; i < TN; i++) {
        not_once += rs[i].calls != 1;
        not_released += fx_released(&vals[i]) != 1;
        if (rs[i].st.code == TFRDV_OK) bad += !fx_recv_matches(&rs[i], i);
        else if (rs[i].st.code != TFRDV_CANCELLED && rs[i].st.code != TFRDV_DEADLINE_EXCEEDED &&
                 rs[i].st.code != TFRDV_UNAVAILABLE)
            bad++;
    }
    TT_CHECK_EQ_INT(not_once, 0);
    TT_CHECK_EQ_INT(not_released, 0);
    TT_CHECK_EQ_INT(bad, 0);
    TT_CHECK_EQ_INT(fx_live(&w.a), 0);
}

static void test_no_unexpected_assert_tripped(void) { TT_CHECK_EQ_INT(tt_asserts, 0); }

/* A fetch cancelled while its answer is on the way never loses the value: the loopback gives an
   answer that finds its call cancelled back to the serving table (tfrdv_mgr_serve_return), so the
   next receive gets it. A sender thread and the receiver's cancellation race on every key. */
#define GN 30000
typedef struct giveback {
    world* w;
    fx_key* keys;
    fx_value* vals;
    pthread_barrier_t go;
} giveback;
static void* giveback_sender(void* p) {
    giveback* g = (giveback*)p;
    int i;
    for (i = 0; i < GN; i++) {
        pthread_barrier_wait(&g->go);
        send(g->w->rb, &g->keys[i], &g->vals[i].v);
        pthread_barrier_wait(&g->go);
    }
    return 0;
}
static void test_threads_cancel_racing_the_answer_never_loses_the_value(void) {
    world w;
    static fx_key keys[GN];
    static fx_value vals[GN];
    giveback g;
    pthread_t th;
    tfrdv_cancel_mgr* cm;
    tfrdv_args args;
    int i, cancelled = 0, lost = 0, wrong = 0;
    world_open(&w, 31);
    cm = world_cm(&w);
    args = cancel_args(cm);
    keys_and_values(keys, vals, GN, "g");
    g.w = &w;
    g.keys = keys;
    g.vals = vals;
    pthread_barrier_init(&g.go, 0, 2);
    pthread_create(&th, 0, giveback_sender, &g);
    for (i = 0; i < GN; i++) {
        fx_recv r1, r2;
        memset(&r1, 0, sizeof r1);
        memset(&r2, 0, sizeof r2);
        recv(w.ra, &keys[i], &args, &r1);
        pthread_barrier_wait(&g.go); /* the sender sends while we cancel */
        tfrdv_cancel_start(cm);
        pthread_barrier_wait(&g.go);
        TT_CHECK_EQ_INT(r1.calls, 1);
        if (r1.st.code == TFRDV_OK) {
            wrong += !fx_recv_matches(&r1, i % 256);
        } else {
            cancelled++;
            recv(w.ra, &keys[i], 0, &r2); /* the value is still on B: this one gets it at once */
            lost += r2.calls != 1 || r2.st.code != TFRDV_OK;
            wrong += r2.calls == 1 && r2.st.code == TFRDV_OK && !fx_recv_matches(&r2, i % 256);
        }
        TT_CHECK_EQ_INT(tfrdv_cancel_mgr_reset(cm), TFRDV_OK);
    }
    pthread_join(th, 0);
    pthread_barrier_destroy(&g.go);
    TT_CHECK(cancelled > 0);
    TT_CHECK_EQ_INT(lost, 0);
    TT_CHECK_EQ_INT(wrong, 0);
    for (i = 0; i < GN; i++) lost += fx_released(&vals[i]) != 1;
    TT_CHECK_EQ_INT(lost, 0);
    world_end(&w);
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_remote_recv_then_send_delivers_bytes_and_shape_zero_copy);
    TT_RUN(test_threads_cancel_racing_the_answer_never_loses_the_value);
    TT_RUN(test_give_back_leaves_an_unwanted_value_with_the_provider);
    TT_RUN(test_remote_send_then_recv_delivers_at_once);
    TT_RUN(test_remote_recv_into_receiver_memory_with_alloc_fn);
    TT_RUN(test_remote_dead_values_arrive_dead);
    TT_RUN(test_same_worker_different_devices_uses_the_copy_hook);
    TT_RUN(test_same_worker_without_hook_shares_the_buffer);
    TT_RUN(test_recv_with_dst_not_on_this_worker_is_invalid_argument_synchronously);
    TT_RUN(test_invalid_remote_source_device_is_internal);
    TT_RUN(test_unknown_worker_is_internal_no_worker_known_as);
    TT_RUN(test_the_worker_asked_for_is_the_canonical_task_of_the_source);
    TT_RUN(test_unregistered_worker_on_loopback_is_unavailable);
    TT_RUN(test_cancel_before_recv_completes_cancelled_without_a_call);
    TT_RUN(test_every_event_while_in_flight_completes_once_and_late_answer_is_released);
    TT_RUN(test_cancel_after_completion_is_harmless);
    TT_RUN(test_deadline_next_expiry_and_late_answer_released);
    TT_RUN(test_event_between_registration_and_start_completes_once);
    TT_RUN(test_abort_before_recv_completes_at_once_with_abort_status);
    TT_RUN(test_callback_may_drop_the_step_and_clean_it_up);
    TT_RUN(test_callback_may_start_the_next_remote_receive);
    TT_RUN(test_retry_on_unavailable_reuses_the_request_id);
    TT_RUN(test_retries_exhausted_report_unavailable);
    TT_RUN(test_no_retry_on_other_codes);
    TT_RUN(test_no_retry_when_backoff_would_pass_the_deadline);
    TT_RUN(test_every_event_during_backoff_completes_once_without_restart);
    TT_RUN(test_double_finish_is_counted_and_ignored);
    TT_RUN(test_cancel_call_after_finish_is_harmless);
    TT_RUN(test_duplicate_request_is_rejected_by_the_server_and_not_double_completed);
    TT_RUN(test_duplicate_request_with_response_cache_gets_the_same_answer_once_delivered);
    TT_RUN(test_restarted_worker_fails_with_incarnation_text);
    TT_RUN(test_delay_and_reorder_deliver_each_value_to_its_receiver);
    TT_RUN(test_dropped_call_completes_only_when_cancelled);
    TT_RUN(test_destroy_receiver_with_calls_in_flight);
    TT_RUN(test_provider_finishing_after_cancel_releases_its_value_and_recycles_the_call);
    TT_RUN(test_error_finish_with_a_value_releases_the_value);
    TT_RUN(test_second_finish_of_a_backing_off_call_is_counted_and_ignored);
    TT_RUN(test_call_alloc_value_uses_the_manager_allocator);
    TT_RUN(test_call_accessors_on_null);
    TT_RUN(test_manager_without_transport_fails_remote_receives_unimplemented);
    TT_RUN(test_loopback_transport_of_null_is_no_transport);
    TT_RUN(test_destroy_receiver_while_a_call_backs_off);
    TT_RUN(test_call_free_list_is_bounded);
    TT_RUN(test_matrix_fault_x_event_exactly_once_and_released_once);
    TT_RUN(test_threads_receive_send_cancel_flush_exactly_once);
    TT_RUN(test_no_unexpected_assert_tripped);
    return TT_MAIN_END();
}
