/* test_grpc_adversary.c - tfrdv_grpc.h's LIVE transport attacked from outside, in one process
   (plus one child process that is killed): a hostile gRPC server written with the raw C core,
   receive callbacks that tear down their own manager or step, cancels and microsecond deadlines
   racing the responses, a flood of outstanding calls aborted at once, a server killed with
   SIGKILL while calls wait. Every receive must complete exactly once with a clear status; every
   value is either delivered once or still on the server (drained afterwards); every object's
   memory comes from one counting allocator that returns to zero. Bounded: every wait has a
   deadline (a bound, not an assertion on speed) and alarm() ends a hung run. Built by
   tests/grpc/grpc.mk when the gRPC C core is there. */
#define _GNU_SOURCE
#define TFRDV_IMPLEMENTATION
#define TFRDV_GRPC_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_grpc.h"
#include "tt.h"
#include "fixtures.h"
#include "countwait.h"
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define C "/job:c/replica:0/task:0" /* the client worker */
#define S "/job:s/replica:0/task:0" /* a tfrdv server */
#define E "/job:evil/replica:0/task:0" /* the raw hostile server */
#define C_DEV C "/device:CPU:0"
#define S_DEV S "/device:CPU:0"
#define E_DEV E "/device:CPU:0"
#define C_INC 0x1111ULL
#define S_INC 0x2222ULL
#define E_INC 0x3333ULL
#define SEC 1000000000LL
#define STEP 9
#define MAXN 2000

static char self_exe[512];

static void sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, 0);
}

/* ---- completions: each receive i records how often it completed, its status and value ---- */
typedef struct rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, n;
    int calls[MAXN];
    tfrdv_status st[MAXN];
    tfrdv_value* v[MAXN];
    /* what the callback does to its own world on the first completion */
    int action, acted;
    struct pair* p;
} rec;
typedef struct ref {
    rec* r;
    int i;
} ref;
static ref refs[MAXN];
static rec R;
static void rec_init(rec* r, int n) {
    int i;
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, 0);
    pthread_cond_init(&r->cv, 0);
    r->n = n;
    for (i = 0; i < n; i++) { refs[i].r = r; refs[i].i = i; }
}
static void rec_fini(rec* r) {
    int i;
    for (i = 0; i < r->n; i++) tfrdv_value_release(r->v[i]);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}
/* 1 when n completions arrived within timeout_ns */
static int rec_wait(rec* r, int n, int64_t timeout_ns) { return count_wait(&r->mu, &r->cv, &r->done, n, timeout_ns); }
/* every receive completed exactly once */
static int rec_once(rec* r) {
    int i, bad = 0;
    for (i = 0; i < r->n; i++)
        if (r->calls[i] != 1) {
            if (bad++ < 5) printf("    receive %d completed %d times\n", i, r->calls[i]);
        }
    return bad == 0;
}
/* no status message carries a byte outside printable ASCII */
static int printable(const char* s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) return 0;
    return 1;
}

/* ---- two workers: C (client, and server too) and S, or C alone against the raw server ---- */
typedef struct pair {
    fx_alloc a;
    tfrdv_grpc *cg, *sg;
    tfrdv_mgr *cm, *sm;
    tfrdv_rendezvous *cr, *sr;
    int cb_destroyed; /* a callback destroyed cg: its shutdown runs on a detached thread */
} pair;
static pair P;

static int recv_i(struct pair* p, const char* src, uint64_t inc, int i, tfrdv_cancel_mgr* cm);
static void on_recv(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v,
                    int dead) {
    ref* f = (ref*)u;
    rec* r = f->r;
    int first = 0;
    (void)sa;
    (void)ra;
    (void)dead;
    pthread_mutex_lock(&r->mu);
    r->calls[f->i]++;
    if (!r->acted) first = r->acted = 1; /* nested completions (run inside the action) see it set */
    if (r->calls[f->i] == 1) {
        r->st[f->i] = *st;
        r->v[f->i] = v;
        v = 0;
    }
    pthread_mutex_unlock(&r->mu);
    tfrdv_value_release(v); /* a second completion: counted, not kept */
    /* the attacks from inside the callback, on the completion-queue thread */
    if (first && r->action == 1) { /* the step's last reference and the step itself */
        tfrdv_rendezvous* cr = r->p->cr;
        r->p->cr = 0;
        tfrdv_unref(cr);
        tfrdv_mgr_cleanup(r->p->cm, STEP);
    } else if (first && r->action == 2) { /* the whole client manager */
        tfrdv_rendezvous* cr = r->p->cr;
        tfrdv_mgr* cm = r->p->cm;
        r->p->cr = 0;
        r->p->cm = 0;
        tfrdv_unref(cr);
        tfrdv_mgr_destroy(cm);
    } else if (first && (r->action == 3 || r->action == 4)) { /* the whole client transport (C serves S too) */
        tfrdv_grpc* cg = r->p->cg;
        r->p->cg = 0;
        r->p->cb_destroyed = 1;
        tfrdv_grpc_destroy(cg);
        if (r->action == 4) recv_i(r->p, S_DEV, S_INC, r->n - 1, 0); /* a fetch after it: UNAVAILABLE */
    }
    pthread_mutex_lock(&r->mu);
    r->done++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static int cq_threads; /* num_threads of the next pair's companions */
static int s_threads;  /* non-zero: S's num_threads instead */
static tfrdv_grpc* grpc_on(pair* p, const char* listen, int64_t recv_timeout_ns) {
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_grpc* g = 0;
    tfrdv_status st;
    gc.hooks = fx_alloc_hooks(&p->a);
    gc.num_threads = cq_threads;
    gc.listen_address = listen;
    gc.recv_timeout_ns = recv_timeout_ns;
    if (tfrdv_grpc_create(&gc, &g, &st) != TFRDV_OK) printf("    tfrdv_grpc_create: %s\n", st.msg);
    return g;
}
static tfrdv_mgr* mgr_on(pair* p, const char* name, uint64_t inc, tfrdv_grpc* g) {
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    mc.hooks = fx_alloc_hooks(&p->a);
    mc.worker_name = name;
    mc.incarnation = inc;
    mc.transport = tfrdv_grpc_transport(g);
    return mk(&mc);
}
/* C and S over gRPC (with_server) or C alone with worker E at evil_port; step STEP on each */
static int pair_build(pair* p, int with_server, int evil_port, int64_t recv_timeout_ns) {
    tfrdv_status st;
    char addr[64];
    memset(p, 0, sizeof *p);
    if (!(p->cg = grpc_on(p, "127.0.0.1:0", recv_timeout_ns)) || !(p->cm = mgr_on(p, C, C_INC, p->cg))) return 0;
    if (tfrdv_grpc_attach(p->cg, p->cm, &st) != TFRDV_OK) return printf("    attach: %s\n", st.msg), 0;
    if (with_server) {
        int keep = cq_threads;
        if (s_threads) cq_threads = s_threads;
        p->sg = grpc_on(p, "127.0.0.1:0", 0);
        cq_threads = keep;
        if (!p->sg || !(p->sm = mgr_on(p, S, S_INC, p->sg))) return 0;
        if (tfrdv_grpc_attach(p->sg, p->sm, &st) != TFRDV_OK) return printf("    attach: %s\n", st.msg), 0;
        snprintf(addr, sizeof addr, "127.0.0.1:%d", tfrdv_grpc_port(p->sg));
        if (tfrdv_grpc_set_worker(p->cg, S, addr, &st) != TFRDV_OK) return printf("    set_worker: %s\n", st.msg), 0;
        snprintf(addr, sizeof addr, "127.0.0.1:%d", tfrdv_grpc_port(p->cg));
        if (tfrdv_grpc_set_worker(p->sg, C, addr, &st) != TFRDV_OK) return printf("    set_worker: %s\n", st.msg), 0;
        if (tfrdv_mgr_start_step(p->sm, STEP, &p->sr, &st) != TFRDV_OK) return printf("    step: %s\n", st.msg), 0;
    }
    if (evil_port > 0) {
        snprintf(addr, sizeof addr, "127.0.0.1:%d", evil_port);
        if (tfrdv_grpc_set_worker(p->cg, E, addr, &st) != TFRDV_OK) return printf("    set_worker: %s\n", st.msg), 0;
    }
    if (tfrdv_mgr_start_step(p->cm, STEP, &p->cr, &st) != TFRDV_OK) return printf("    step: %s\n", st.msg), 0;
    return 1;
}
/* everything torn down (transports first), and the allocator back to zero */
static void pair_close(pair* p) {
    if (p->cr) tfrdv_unref(p->cr);
    if (p->sr) tfrdv_unref(p->sr);
    if (p->cg) tfrdv_grpc_destroy(p->cg);
    if (p->sg) tfrdv_grpc_destroy(p->sg);
    if (p->cm) tfrdv_mgr_destroy(p->cm);
    if (p->sm) tfrdv_mgr_destroy(p->sm);
    if (p->cb_destroyed) { /* nothing tells the host when that thread is done (it waits for the
                              receipts in flight, 1 s or 10 s): the memory must come back, later */
        int i;
        for (i = 0; i < 1500 && fx_live(&p->a) != 0; i++) sleep_ms(10);
    }
    FX_CHECK_EMPTY(&p->a);
}

/* key i of the edge family, from src (a device of inc) to C */
static int key_of(tfrdv_key* k, const char* src, uint64_t inc, int i) {
    char edge[32];
    tfrdv_status st;
    tfrdv_frame_iter fi;
    fi.frame_id = 0;
    fi.iter_id = 0;
    snprintf(edge, sizeof edge, "e%d", i);
    if (tfrdv_key_make(k, src, inc, C_DEV, edge, fi, &st) != TFRDV_OK) {
        printf("    key: %s\n", st.msg);
        return 0;
    }
    return 1;
}
static tfrdv_value* val_of(fx_alloc* a, int i) {
    tfrdv_allocator al = fx_alloc_hooks(a).allocator;
    int64_t d[1] = {4};
    tfrdv_value* v = tfrdv_value_new(&al, 3 /* DT_INT32 */, 1, d, 0, 16);
    if (v) {
        int32_t* x = (int32_t*)v->data;
        x[0] = i; x[1] = i + 1; x[2] = i + 2; x[3] = ~i;
    }
    return v;
}
static int val_is(const tfrdv_value* v, int i) {
    const int32_t* x;
    if (!v || v->dtype != 3 || v->rank != 1 || v->dims[0] != 4 || v->size != 16) return 0;
    x = (const int32_t*)v->data;
    return x[0] == i && x[1] == i + 1 && x[2] == i + 2 && x[3] == ~i;
}
/* receive i on S's step of a key C sends (S fetches from C) */
static int recv_on_s(pair* p, int i) {
    tfrdv_key k;
    tfrdv_status st;
    char edge[32];
    tfrdv_frame_iter fi;
    fi.frame_id = 0;
    fi.iter_id = 0;
    snprintf(edge, sizeof edge, "s%d", i);
    if (tfrdv_key_make(&k, C_DEV, C_INC, S_DEV, edge, fi, &st) != TFRDV_OK ||
        tfrdv_recv_async(p->sr, &k.parsed, 0, on_recv, &refs[i], &st) != TFRDV_OK) {
        printf("    recv on S %d: %s\n", i, st.msg);
        return 0;
    }
    return 1;
}
static tfrdv_grpc_stats gstats(tfrdv_grpc* g) {
    tfrdv_grpc_stats s;
    memset(&s, 0, sizeof s);
    tfrdv_grpc_get_stats(g, &s);
    return s;
}
/* 1 once g's server has taken n RecvTensor requests (within 30 s) */
static int served_at_least(tfrdv_grpc* g, uint64_t n) {
    int i;
    for (i = 0; i < 3000; i++) {
        if (gstats(g).served >= n) return 1;
        sleep_ms(10);
    }
    printf("    the server took %llu requests, not %llu\n", (unsigned long long)gstats(g).served, (unsigned long long)n);
    return 0;
}
/* starts receive i from src on C's step (args may carry a cancellation manager) */
static int recv_i(struct pair* p, const char* src, uint64_t inc, int i, tfrdv_cancel_mgr* cm) {
    tfrdv_key k;
    tfrdv_args a;
    tfrdv_status st;
    memset(&a, 0, sizeof a);
    a.cancel = cm;
    if (!key_of(&k, src, inc, i)) return 0;
    if (tfrdv_recv_async(p->cr, &k.parsed, &a, on_recv, &refs[i], &st) != TFRDV_OK) {
        printf("    recv_async %d: %s\n", i, st.msg);
        return 0;
    }
    return 1;
}
FX_FN int send_i(pair* p, int i) {
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_value* v = val_of(&p->a, i);
    if (!key_of(&k, S_DEV, S_INC, i)) return 0;
    if (tfrdv_send(p->sr, &k.parsed, 0, v, 0, &st) != TFRDV_OK) {
        printf("    send %d: %s\n", i, st.msg);
        tfrdv_value_release(v);
        return 0;
    }
    return 1;
}

/* ============================ 1. a hostile server (raw C core) ============================ */
enum { EV_GARBAGE, EV_EMPTY, EV_HUGE_LEN, EV_BAD_STATUS, EV_TRAILERS_ONLY, EV_TWICE, EV_NEVER, EV_CLOSE, EV_TRUNC_TENSOR,
       EV_GROW_DEVICES, EV_MANY_DEVICES, EV_BIG_STATUS, EV_VALUE_THEN_ERROR };
/* GetStatus answers: EV_GROW_DEVICES one more device of worker E (never CPU:0) on every call,
   EV_MANY_DEVICES a 2 MB message of a million empty DeviceAttributes */
#define EV_MANY_N 1000000
typedef struct evil {
    grpc_server* srv;
    grpc_completion_queue* cq;
    pthread_t th;
    int port, mode, calls, status_calls;
    int shut_tag;
} evil;
typedef struct evil_call {
    evil* e;
    grpc_call* call;
    grpc_call_details det;
    grpc_metadata_array md;
    grpc_byte_buffer *req, *resp;
    grpc_metadata_array trail;
    int stage, cancelled;
    grpc_slice status_details;
} evil_call;
static void evil_request(evil* e);
static grpc_byte_buffer* bb_of(const void* p, size_t n) {
    grpc_slice s = grpc_slice_from_copied_buffer((const char*)p, n);
    grpc_byte_buffer* b = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return b;
}
static fx_alloc evil_alloc; /* the raw server's values (its thread never touches P) */
/* a valid RecvTensorResponse carrying val_of(7) */
static grpc_byte_buffer* evil_good(size_t cut) {
    uint8_t head[TFRDV_GRPC_HEAD_MAX(1)], tail[TFRDV_GRPC_TAIL_MAX], buf[256];
    size_t hl = 0, tl = 0, n;
    tfrdv_status st;
    tfrdv_value* v = val_of(&evil_alloc, 7);
    tfrdv_grpc_encode_response(v, 0, 0, 0, head, sizeof head, &hl, tail, &tl, &st);
    memcpy(buf, head, hl);
    memcpy(buf + hl, v->data, 16);
    memcpy(buf + hl + 16, tail, tl);
    n = hl + 16 + tl;
    tfrdv_value_release(v);
    return bb_of(buf, n > cut ? n - cut : 0);
}
static grpc_byte_buffer* evil_devices(int mode, int call) {
    static tfrdv_grpc_device d[64];
    static uint8_t buf[2 * EV_MANY_N];
    size_t i, n;
    if (mode == EV_MANY_DEVICES) {
        for (i = 0; i < EV_MANY_N; i++) { buf[2 * i] = 0x0a; buf[2 * i + 1] = 0; }
        return bb_of(buf, 2 * EV_MANY_N);
    }
    n = (size_t)(8 + call) < 64 ? (size_t)(8 + call) : 64; /* (64: the test has hung already) */
    memset(d, 0, sizeof d);
    for (i = 0; i < n; i++) {
        snprintf(d[i].name, sizeof d[i].name, E "/device:GPU:%d", (int)i);
        snprintf(d[i].type, sizeof d[i].type, "GPU");
        d[i].incarnation = 0x5000 + i;
    }
    n = tfrdv_grpc_encode_status_response(d, n, buf, sizeof buf);
    return bb_of(buf, n);
}
static void evil_start(evil_call* c, grpc_op* ops, size_t n) {
    if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK) printf("    evil: start_batch failed\n");
}
/* the next stage of a call (its previous batch completed) */
static void evil_step(evil_call* c) {
    grpc_op ops[6];
    size_t n = 0;
    static const char bad_details[] = "evil\x1b[31m\nfake log line\xff\x01";
    memset(ops, 0, sizeof ops);
    if (c->stage == 0) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[n].op = GRPC_OP_RECV_MESSAGE;
        ops[n++].data.recv_message.recv_message = &c->req;
        c->stage = 1;
        evil_start(c, ops, n);
        return;
    }
    if (c->stage == 1) { /* the request arrived: answer as the mode says */
        int mode = c->e->mode;
        c->stage = 2;
        /* only RecvTensor is attacked: MarkRecvFinished (the client's receipts) gets an empty OK,
           else tfrdv_grpc_destroy waits its documented 10 s for a receipt nobody answers */
        if (grpc_slice_str_cmp(c->det.method, "/tensorflow.WorkerService/GetStatus") == 0 &&
            (mode == EV_GROW_DEVICES || mode == EV_MANY_DEVICES)) {
            c->resp = evil_devices(mode, __atomic_add_fetch(&c->e->status_calls, 1, __ATOMIC_SEQ_CST));
            mode = EV_GARBAGE; /* the answer is made: send it with OK */
        } else if (grpc_slice_str_cmp(c->det.method, "/tensorflow.WorkerService/RecvTensor") != 0) {
            mode = EV_EMPTY;
        }
        if (mode == EV_NEVER) {
            ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER; /* only the client's cancel ends it */
            ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
            evil_start(c, ops, n);
            return;
        }
        if (mode == EV_CLOSE) {
            grpc_call_cancel_with_status(c->call, GRPC_STATUS_UNAVAILABLE, "gone\x07mid-stream", NULL);
            ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
            ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
            evil_start(c, ops, n);
            return;
        }
        if (mode == EV_TWICE) {
            c->resp = evil_good(0);
            ops[n].op = GRPC_OP_SEND_MESSAGE;
            ops[n++].data.send_message.send_message = c->resp;
            c->stage = 10;
            evil_start(c, ops, n);
            return;
        }
        if (c->resp) {
        } else if (mode == EV_GARBAGE) {
            static const uint8_t g[] = {0xff, 0xff, 0xff, 0xff, 0x07, 0x00, 0x13, 0x37, 0x42};
            c->resp = bb_of(g, sizeof g);
        } else if (mode == EV_EMPTY) {
            c->resp = bb_of("", 0);
        } else if (mode == EV_HUGE_LEN) { /* field 1 (tensor), length 2^31 + 5, 3 bytes follow */
            static const uint8_t h[] = {0x0a, 0x85, 0x80, 0x80, 0x80, 0x08, 0x08, 0x01, 0x00};
            c->resp = bb_of(h, sizeof h);
        } else if (mode == EV_TRUNC_TENSOR) {
            c->resp = evil_good(5);
        } else if (mode == EV_VALUE_THEN_ERROR) {
            c->resp = evil_good(0);
        }
        if (c->resp) {
            ops[n].op = GRPC_OP_SEND_MESSAGE;
            ops[n++].data.send_message.send_message = c->resp;
        }
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.trailing_metadata_count = 0;
        if (mode == EV_BAD_STATUS) {
            c->status_details = grpc_slice_from_copied_buffer(bad_details, sizeof bad_details - 1);
            ops[n].data.send_status_from_server.status = GRPC_STATUS_INTERNAL;
            ops[n++].data.send_status_from_server.status_details = &c->status_details;
        } else if (mode == EV_BIG_STATUS) { /* 2,000 bytes of 0xff (percent-encoded: gRPC refuses 8 KiB of metadata) */
            static char big[2000];
            memset(big, 0xff, sizeof big);
            c->status_details = grpc_slice_from_copied_buffer(big, sizeof big);
            ops[n].data.send_status_from_server.status = GRPC_STATUS_RESOURCE_EXHAUSTED;
            ops[n++].data.send_status_from_server.status_details = &c->status_details;
        } else if (mode == EV_VALUE_THEN_ERROR) {
            c->status_details = grpc_slice_from_static_string("value sent, then this error");
            ops[n].data.send_status_from_server.status = GRPC_STATUS_UNAVAILABLE;
            ops[n++].data.send_status_from_server.status_details = &c->status_details;
        } else {
            ops[n].data.send_status_from_server.status = GRPC_STATUS_OK;
            ops[n++].data.send_status_from_server.status_details = 0;
        }
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
        evil_start(c, ops, n);
        return;
    }
    if (c->stage == 10) { /* EV_TWICE: a second message on the unary call, then OK */
        grpc_byte_buffer_destroy(c->resp);
        c->resp = evil_good(0);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->resp;
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n++].data.send_status_from_server.status = GRPC_STATUS_OK;
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
        c->stage = 2;
        evil_start(c, ops, n);
        return;
    }
    /* stage 2: closed */
    if (c->req) grpc_byte_buffer_destroy(c->req);
    if (c->resp) grpc_byte_buffer_destroy(c->resp);
    grpc_slice_unref(c->status_details); /* an empty slice when none was made */
    grpc_call_details_destroy(&c->det);
    grpc_metadata_array_destroy(&c->md);
    grpc_call_unref(c->call);
    free(c);
}
static void evil_request(evil* e) {
    evil_call* c = (evil_call*)calloc(1, sizeof *c);
    c->e = e;
    c->stage = -1;
    grpc_call_details_init(&c->det);
    grpc_metadata_array_init(&c->md);
    if (grpc_server_request_call(e->srv, &c->call, &c->det, &c->md, e->cq, e->cq, c) != GRPC_CALL_OK) {
        grpc_call_details_destroy(&c->det);
        grpc_metadata_array_destroy(&c->md);
        free(c);
    }
}
static void* evil_thread(void* u) {
    evil* e = (evil*)u;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(e->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        evil_call* c;
        if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
        if (ev.type != GRPC_OP_COMPLETE || ev.tag == &e->shut_tag) continue;
        c = (evil_call*)ev.tag;
        if (c->stage == -1) {
            if (!ev.success) { /* the server is shutting down: the request is gone */
                grpc_call_details_destroy(&c->det);
                grpc_metadata_array_destroy(&c->md);
                free(c);
                continue;
            }
            __atomic_add_fetch(&e->calls, 1, __ATOMIC_SEQ_CST);
            evil_request(e); /* keep one request posted */
            c->stage = 0;
        }
        if (!ev.success && c->stage == 1) { /* the client went away before its request arrived */
            grpc_op op;
            memset(&op, 0, sizeof op);
            op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
            op.data.recv_close_on_server.cancelled = &c->cancelled;
            c->stage = 2;
            evil_start(c, &op, 1);
            continue;
        }
        evil_step(c);
    }
    return 0;
}
static int evil_start_server(evil* e, int mode) {
    grpc_server_credentials* cr;
    memset(e, 0, sizeof *e);
    e->mode = mode;
    grpc_init();
    e->cq = grpc_completion_queue_create_for_next(NULL);
    e->srv = grpc_server_create(NULL, NULL);
    grpc_server_register_completion_queue(e->srv, e->cq, NULL);
    cr = grpc_insecure_server_credentials_create();
    e->port = grpc_server_add_http2_port(e->srv, "127.0.0.1:0", cr);
    grpc_server_credentials_release(cr);
    if (e->port <= 0) return 0;
    grpc_server_start(e->srv);
    evil_request(e);
    return pthread_create(&e->th, 0, evil_thread, e) == 0;
}
static void evil_stop(evil* e) {
    grpc_server_shutdown_and_notify(e->srv, e->cq, &e->shut_tag);
    grpc_server_cancel_all_calls(e->srv);
    /* the thread handles the shutdown tag and the cancelled calls; then the queue ends */
    sleep_ms(50);
    grpc_server_destroy(e->srv);
    grpc_completion_queue_shutdown(e->cq);
    pthread_join(e->th, 0);
    grpc_completion_queue_destroy(e->cq);
    grpc_shutdown();
}

/* one receive from the hostile server in mode; returns its status (the value checked by caller) */
static void evil_case(int mode, int64_t recv_timeout_ns, tfrdv_code want, const char* want_msg) {
    evil e;
    if (!evil_start_server(&e, mode)) {
        printf("    the raw server did not start\n");
        TT_CHECK(0);
        return;
    }
    rec_init(&R, 1);
    TT_CHECK(pair_build(&P, 0, e.port, recv_timeout_ns));
    if (P.cr) TT_CHECK(recv_i(&P, E_DEV, E_INC, 0, 0));
    TT_CHECK(rec_wait(&R, 1, 30 * SEC));
    TT_CHECK(rec_once(&R));
    TT_CHECK_EQ_INT(R.st[0].code, want);
    if (want_msg) TT_CHECK_CONTAINS(R.st[0].msg, want_msg);
    TT_CHECK(printable(R.st[0].msg));
    if (want == TFRDV_OK) TT_CHECK(val_is(R.v[0], 7));
    else TT_CHECK(R.v[0] == 0);
    if (getenv("ADV_VERBOSE") || R.st[0].code != want) printf("    got %s: %s\n", tfrdv_code_str(R.st[0].code), R.st[0].msg);
    TT_CHECK(e.calls >= 1);
    /* the client still works afterwards: tear down, nothing left */
    rec_fini(&R);
    pair_close(&P);
    evil_stop(&e);
    FX_CHECK_EMPTY(&evil_alloc);
}
static void test_evil_garbage(void) { evil_case(EV_GARBAGE, 0, TFRDV_INVALID_ARGUMENT, 0); }
static void test_evil_empty_message(void) { evil_case(EV_EMPTY, 0, TFRDV_INVALID_ARGUMENT, "no tensor"); }
static void test_evil_huge_declared_length(void) { evil_case(EV_HUGE_LEN, 0, TFRDV_DATA_LOSS, 0); }
static void test_evil_truncated_tensor(void) { evil_case(EV_TRUNC_TENSOR, 0, TFRDV_DATA_LOSS, 0); }
static void test_evil_control_bytes_status(void) { evil_case(EV_BAD_STATUS, 0, TFRDV_INTERNAL, "evil\\x1b[31m\\x0afake"); }
static void test_evil_trailers_only(void) { evil_case(EV_TRAILERS_ONLY, 0, TFRDV_INTERNAL, 0); }
static void test_evil_responds_twice(void) { evil_case(EV_TWICE, 500000000LL, TFRDV_DEADLINE_EXCEEDED, "recv_timeout_ns"); }
static void test_evil_never_responds(void) { evil_case(EV_NEVER, 300000000LL, TFRDV_DEADLINE_EXCEEDED, "recv_timeout_ns"); }
static void test_evil_closes_mid_stream(void) { evil_case(EV_CLOSE, 0, TFRDV_UNAVAILABLE, 0); }
static void test_evil_long_status_message(void) { evil_case(EV_BIG_STATUS, 0, TFRDV_RESOURCE_EXHAUSTED, "\\xff\\xff"); }
static void test_evil_value_then_error(void) { evil_case(EV_VALUE_THEN_ERROR, 0, TFRDV_UNAVAILABLE, "then this error"); }

/* GetStatus attacked: a worker whose device list grows on every call must not keep
   tfrdv_mgr_peer_incarnation asking forever; a million devices in 2 MB must not make it
   allocate a third of a gigabyte */
static void test_evil_devices_grow_every_call(void) {
    evil e;
    uint64_t inc = 0;
    tfrdv_status st;
    if (!evil_start_server(&e, EV_GROW_DEVICES)) { TT_CHECK(0); return; }
    TT_CHECK(pair_build(&P, 0, e.port, 0));
    if (P.cm) {
        TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(P.cm, E, 5 * SEC, &inc, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(inc, 0x5000); /* no CPU:0: the first listed device's */
        TT_CHECK(e.status_calls <= 2);
        if (st.code != TFRDV_OK) printf("    %s\n", st.msg);
    }
    pair_close(&P);
    evil_stop(&e);
    FX_CHECK_EMPTY(&evil_alloc);
}
static void test_evil_million_devices(void) {
    evil e;
    uint64_t inc = 0;
    tfrdv_status st;
    if (!evil_start_server(&e, EV_MANY_DEVICES)) { TT_CHECK(0); return; }
    TT_CHECK(pair_build(&P, 0, e.port, 0));
    if (P.cm) {
        TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(P.cm, E, 5 * SEC, &inc, &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, "1000000 devices");
        TT_CHECK_CONTAINS(st.msg, E);
        TT_CHECK_EQ_INT(e.status_calls, 1);
        if (getenv("ADV_VERBOSE")) printf("    %s\n", st.msg);
    }
    pair_close(&P);
    evil_stop(&e);
}

/* ================= 2. receive callbacks that tear down their own world ================= */
/* C waits for n keys from S while S waits (in C's server) for n keys from C; S sends key 0 and
   the callback of that first completion on C (on the completion-queue thread) destroys the
   step, C's manager or C's transport. Every other receive, C's and S's, completes exactly once. */
static void teardown_in_callback(int action) {
    const int n = 20;
    int i, ok = 0, other = 0;
    rec_init(&R, 2 * n + (action == 4)); /* 4: one more, the fetch after the destroy */
    R.action = action;
    R.p = &P;
    TT_CHECK(pair_build(&P, 1, 0, 0));
    if (!P.cr || !P.sr) goto out;
    for (i = 0; i < n; i++) TT_CHECK(recv_i(&P, S_DEV, S_INC, i, 0));
    for (i = 0; i < n; i++) TT_CHECK(recv_on_s(&P, n + i));
    TT_CHECK(served_at_least(P.sg, (uint64_t)n) && served_at_least(P.cg, (uint64_t)n));
    TT_CHECK(send_i(&P, 0));
    /* C's receives all end (the first OK, the rest with the teardown's status) */
    TT_CHECK(rec_wait(&R, n, 30 * SEC));
    if (action >= 3) { /* C's transport is gone: S's fetches from it end too */
        TT_CHECK(rec_wait(&R, R.n, 30 * SEC));
    } else { /* C's server still answers S: abort S's step so that its receives end */
        tfrdv_abort(P.sr, TFRDV_ABORTED, "test: S gives up");
        TT_CHECK(rec_wait(&R, 2 * n, 30 * SEC));
    }
    sleep_ms(20); /* a second completion would show here */
    TT_CHECK(rec_once(&R));
    TT_CHECK_EQ_INT(R.st[0].code, TFRDV_OK);
    TT_CHECK(val_is(R.v[0], 0));
    for (i = 1; i < n; i++) {
        if (R.st[i].code == TFRDV_OK) ok++;
        TT_CHECK(printable(R.st[i].msg));
        TT_CHECK(R.st[i].code == TFRDV_OK || R.v[i] == 0);
    }
    TT_CHECK_EQ_INT(ok, 0);
    for (i = n; i < 2 * n; i++) {
        if (R.st[i].code == TFRDV_OK) other++;
        TT_CHECK(R.st[i].msg[0] != 0);
    }
    TT_CHECK_EQ_INT(other, 0);
    if (getenv("ADV_VERBOSE")) printf("    C: %s: %s\n    S: %s: %s\n", tfrdv_code_str(R.st[1].code), R.st[1].msg,
                                      tfrdv_code_str(R.st[n].code), R.st[n].msg);
    if (action == 1) TT_CHECK_EQ_INT(R.st[1].code, TFRDV_ABORTED);
    if (action == 2) TT_CHECK_EQ_INT(R.st[1].code, TFRDV_ABORTED);
    if (action == 4) {
        TT_CHECK_EQ_INT(R.st[2 * n].code, TFRDV_UNAVAILABLE);
        TT_CHECK(R.st[2 * n].msg[0] != 0);
        if (getenv("ADV_VERBOSE")) printf("    after: %s\n", R.st[2 * n].msg);
    }
    if (action >= 3) {
        TT_CHECK_CONTAINS(R.st[1].msg, "tfrdv_grpc_destroy");
        TT_CHECK(R.st[1].code == TFRDV_CANCELLED || R.st[1].code == TFRDV_UNAVAILABLE);
        TT_CHECK(R.st[n].code == TFRDV_CANCELLED || R.st[n].code == TFRDV_UNAVAILABLE || R.st[n].code == TFRDV_ABORTED);
    }
out:
    rec_fini(&R);
    pair_close(&P);
}
static void test_callback_cleans_up_its_step(void) { teardown_in_callback(1); }
static void test_callback_destroys_its_manager(void) { teardown_in_callback(2); }
static void test_callback_destroys_its_transport(void) { teardown_in_callback(3); }
static void test_callback_destroys_its_transport_then_fetches(void) { teardown_in_callback(4); }
/* the same with four completion-queue threads: other completions run while the callback tears down */
static void teardown_4_threads(int action) {
    int keep = cq_threads;
    cq_threads = 4;
    teardown_in_callback(action);
    cq_threads = keep;
}
static void test_callback_cleans_up_its_step_4_threads(void) { teardown_4_threads(1); }
static void test_callback_destroys_its_manager_4_threads(void) { teardown_4_threads(2); }
static void test_callback_destroys_its_transport_4_threads(void) { teardown_4_threads(3); }

/* ============= 3. teardown, cancels, deadlines and aborts racing the answers ============= */
/* every receive of C that did not complete OK gets its value now (nothing was lost: the server
   kept it or took it back), then S's step drains (nothing was duplicated) */
static void recover_and_drain(int n) {
    int i, lost = 0;
    tfrdv_status st;
    for (i = 0; i < n; i++) {
        tfrdv_key k;
        tfrdv_value* v = 0;
        int dead = 0;
        if (R.st[i].code == TFRDV_OK) continue;
        key_of(&k, S_DEV, S_INC, i);
        if (tfrdv_recv(P.cr, &k.parsed, 0, 30 * SEC, &v, &dead, &st) != TFRDV_OK || !val_is(v, i)) {
            if (lost++ < 5) printf("    key %d lost: %s\n", i, st.msg);
        }
        tfrdv_value_release(v);
    }
    TT_CHECK_EQ_INT(lost, 0);
    if (tfrdv_mgr_drain(P.sm, STEP, 10 * SEC, &st) != TFRDV_OK) printf("    drain: %s\n", st.msg);
    TT_CHECK_EQ_INT(st.code, TFRDV_OK);
}
/* n receives, each with its own cancellation manager; key i is sent and its receive cancelled
   0..1 ms later, while the answer is on its way: each completes once, OK with its value or CANCELLED; nothing is lost */
typedef struct sender {
    int n, odd; /* odd: only the odd keys */
    volatile int at;
} sender;
static void* send_all(void* u) {
    sender* s = (sender*)u;
    int i;
    for (i = 0; i < s->n; i++) {
        if (!s->odd || i % 2) send_i(&P, i);
        __atomic_store_n(&s->at, i + 1, __ATOMIC_SEQ_CST);
    }
    return 0;
}
static void test_cancel_races_answer(void) {
    enum { N = 400 };
    static tfrdv_cancel_mgr* cms[N];
    tfrdv_status st;
    int i, ok = 0, cancelled = 0;
    rec_init(&R, N);
    TT_CHECK(pair_build(&P, 1, 0, 0));
    if (!P.cr) goto out;
    for (i = 0; i < N; i++) {
        tfrdv_hooks h = fx_alloc_hooks(&P.a);
        cms[i] = 0;
        TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(&h, &cms[i], &st), TFRDV_OK);
        TT_CHECK(recv_i(&P, S_DEV, S_INC, i, cms[i]));
    }
    for (i = 0; i < N; i++) { /* send i, then cancel its receive 0..1 ms later */
        int64_t until;
        TT_CHECK(send_i(&P, i));
        until = tfrdv_now_ns() + (int64_t)(i % 40) * 25000;
        while (tfrdv_now_ns() < until) {}
        tfrdv_cancel_start(cms[i]);
    }
    TT_CHECK(rec_wait(&R, N, 60 * SEC));
    TT_CHECK(rec_once(&R));
    for (i = 0; i < N; i++) {
        if (R.st[i].code == TFRDV_OK) {
            ok++;
            TT_CHECK(val_is(R.v[i], i));
        } else if (R.st[i].code == TFRDV_CANCELLED) cancelled++;
        else printf("    receive %d: %s: %s\n", i, tfrdv_code_str(R.st[i].code), R.st[i].msg);
    }
    TT_CHECK_EQ_INT(ok + cancelled, N);
    printf("    %d delivered, %d cancelled\n", ok, cancelled);
    recover_and_drain(N);
    for (i = 0; i < N; i++) tfrdv_cancel_mgr_destroy(cms[i]);
out:
    rec_fini(&R);
    pair_close(&P);
}
/* two threads make blocking receives with deadlines of 10..100 us while a third sends; every
   other value is sent before, so its answer races the deadline */
typedef struct racer {
    int from, to;
} racer;
static void* race_recv(void* u) {
    racer* r = (racer*)u;
    int i;
    for (i = r->from; i < r->to; i++) {
        tfrdv_key k;
        tfrdv_value* v = 0;
        int dead = 0;
        tfrdv_status st;
        key_of(&k, S_DEV, S_INC, i);
        st.code = tfrdv_recv(P.cr, &k.parsed, 0, (int64_t)(10 + (i * 7) % 91) * 1000, &v, &dead, &st);
        R.calls[i]++;
        R.st[i] = st;
        R.v[i] = v;
    }
    return 0;
}
static void test_microsecond_deadlines_race_sends(void) {
    enum { N = 800 };
    pthread_t a, b, c;
    racer ra, rb;
    sender sd;
    int i, ok = 0, late = 0;
    rec_init(&R, N);
    TT_CHECK(pair_build(&P, 1, 0, 0));
    if (!P.cr) goto out;
    ra.from = 0;
    ra.to = N / 2;
    rb.from = N / 2;
    rb.to = N;
    for (i = 0; i < N; i += 2) TT_CHECK(send_i(&P, i));
    sd.n = N;
    sd.at = 0;
    sd.odd = 1;
    pthread_create(&a, 0, race_recv, &ra);
    pthread_create(&b, 0, race_recv, &rb);
    pthread_create(&c, 0, send_all, &sd);
    pthread_join(a, 0);
    pthread_join(b, 0);
    pthread_join(c, 0);
    TT_CHECK(rec_once(&R));
    for (i = 0; i < N; i++) {
        if (R.st[i].code == TFRDV_OK) {
            ok++;
            TT_CHECK(val_is(R.v[i], i));
        } else if (R.st[i].code == TFRDV_DEADLINE_EXCEEDED) late++;
        else printf("    receive %d: %s: %s\n", i, tfrdv_code_str(R.st[i].code), R.st[i].msg);
    }
    TT_CHECK_EQ_INT(ok + late, N);
    printf("    %d delivered in time, %d past their deadline\n", ok, late);
    recover_and_drain(N);
out:
    rec_fini(&R);
    pair_close(&P);
}
/* C's step is aborted while n fetches wait and half their values are being sent */
static void test_abort_step_while_answers_arrive(void) {
    enum { N = 400 };
    pthread_t th;
    sender sd;
    int i, ok = 0, aborted = 0;
    rec_init(&R, N);
    TT_CHECK(pair_build(&P, 1, 0, 0));
    if (!P.cr) goto out;
    for (i = 0; i < N; i++) TT_CHECK(recv_i(&P, S_DEV, S_INC, i, 0));
    sd.n = N / 2;
    sd.odd = 0;
    sd.at = 0;
    pthread_create(&th, 0, send_all, &sd);
    while (__atomic_load_n(&sd.at, __ATOMIC_SEQ_CST) < N / 4) sched_yield();
    TT_CHECK_EQ_INT(tfrdv_abort(P.cr, TFRDV_ABORTED, "test: abort in flight"), TFRDV_OK);
    pthread_join(th, 0);
    TT_CHECK(rec_wait(&R, N, 60 * SEC));
    sleep_ms(20);
    TT_CHECK(rec_once(&R));
    for (i = 0; i < N; i++) {
        if (R.st[i].code == TFRDV_OK) {
            ok++;
            TT_CHECK(i < N / 2 && val_is(R.v[i], i));
        } else if (R.st[i].code == TFRDV_ABORTED) aborted++;
        TT_CHECK(printable(R.st[i].msg));
    }
    TT_CHECK_EQ_INT(ok + aborted, N);
    TT_CHECK(aborted >= N / 2);
out:
    rec_fini(&R);
    pair_close(&P);
}
/* C's N requests wait in S's server; then S cleans its step up (0) or destroys its manager (1):
   every receive fails ABORTED once, no value */
static void server_ends_while_requests_wait(int destroy) {
    enum { N = 50 };
    int i;
    rec_init(&R, N);
    TT_CHECK(pair_build(&P, 1, 0, 0));
    if (!P.cr) goto out;
    for (i = 0; i < N; i++) TT_CHECK(recv_i(&P, S_DEV, S_INC, i, 0));
    TT_CHECK(served_at_least(P.sg, N));
    if (destroy) {
        tfrdv_unref(P.sr);
        P.sr = 0;
        tfrdv_mgr_destroy(P.sm);
        P.sm = 0;
    } else {
        tfrdv_mgr_cleanup(P.sm, STEP);
    }
    TT_CHECK(rec_wait(&R, N, 30 * SEC));
    sleep_ms(20);
    TT_CHECK(rec_once(&R));
    for (i = 0; i < N; i++) {
        TT_CHECK_EQ_INT(R.st[i].code, TFRDV_ABORTED);
        TT_CHECK(R.v[i] == 0);
    }
    if (getenv("ADV_VERBOSE")) printf("    %s\n", R.st[0].msg);
out:
    rec_fini(&R);
    pair_close(&P);
}
static void test_server_cleanup_while_requests_wait(void) { server_ends_while_requests_wait(0); }
static void test_server_manager_destroyed_while_requests_wait(void) { server_ends_while_requests_wait(1); }
/* S's transport and S's manager destroyed at once on two threads, with fetches both ways */
static void* destroy_sg(void* u) {
    (void)u;
    tfrdv_grpc_destroy(P.sg);
    return 0;
}
static void* destroy_sm(void* u) {
    (void)u;
    tfrdv_unref(P.sr);
    tfrdv_mgr_destroy(P.sm);
    return 0;
}
static void test_server_transport_and_manager_destroyed_at_once(void) {
    enum { N = 200 };
    pthread_t a, b;
    int i;
    rec_init(&R, 2 * N);
    TT_CHECK(pair_build(&P, 1, 0, 0));
    if (!P.cr) goto out;
    for (i = 0; i < N; i++) TT_CHECK(recv_i(&P, S_DEV, S_INC, i, 0));
    for (i = 0; i < N; i++) TT_CHECK(recv_on_s(&P, N + i));
    TT_CHECK(served_at_least(P.sg, N) && served_at_least(P.cg, N));
    pthread_create(&a, 0, destroy_sg, 0);
    pthread_create(&b, 0, destroy_sm, 0);
    pthread_join(a, 0);
    pthread_join(b, 0);
    P.sg = 0;
    P.sm = 0;
    P.sr = 0;
    TT_CHECK(rec_wait(&R, 2 * N, 30 * SEC));
    sleep_ms(20);
    TT_CHECK(rec_once(&R));
    for (i = 0; i < 2 * N; i++) {
        TT_CHECK(R.st[i].code != TFRDV_OK && R.v[i] == 0 && R.st[i].msg[0] != 0);
        if (R.st[i].code == TFRDV_OK) break;
    }
    if (getenv("ADV_VERBOSE")) printf("    C: %s: %s\n    S: %s: %s\n", tfrdv_code_str(R.st[0].code), R.st[0].msg,
                                      tfrdv_code_str(R.st[N].code), R.st[N].msg);
out:
    rec_fini(&R);
    pair_close(&P);
}

/* the server's or the client's transport destroyed with n calls in flight */
static void destroy_in_flight(int server, int n) {
    int i;
    rec_init(&R, n);
    TT_CHECK(pair_build(&P, 1, 0, 0));
    if (!P.cr) goto out;
    for (i = 0; i < n; i++) TT_CHECK(recv_i(&P, S_DEV, S_INC, i, 0));
    TT_CHECK(served_at_least(P.sg, (uint64_t)(n < 256 ? n : 256)));
    if (server) {
        tfrdv_grpc_destroy(P.sg);
        P.sg = 0;
    } else {
        tfrdv_grpc_destroy(P.cg);
        P.cg = 0;
    }
    TT_CHECK(rec_wait(&R, n, 60 * SEC));
    sleep_ms(20);
    TT_CHECK(rec_once(&R));
    for (i = 0; i < n; i++) {
        TT_CHECK(R.st[i].code == TFRDV_UNAVAILABLE || R.st[i].code == TFRDV_CANCELLED || R.st[i].code == TFRDV_ABORTED);
        TT_CHECK(R.v[i] == 0 && printable(R.st[i].msg));
    }
    if (!server) { /* the receiver learns why */
        TT_CHECK_EQ_INT(R.st[0].code, TFRDV_CANCELLED);
        TT_CHECK_CONTAINS(R.st[0].msg, "tfrdv_grpc_destroy");
    }
    if (getenv("ADV_VERBOSE")) printf("    %s: %s\n", tfrdv_code_str(R.st[0].code), R.st[0].msg);
out:
    rec_fini(&R);
    pair_close(&P);
}
static void test_destroy_server_in_flight(void) { destroy_in_flight(1, 300); }
static void test_destroy_client_in_flight(void) { destroy_in_flight(0, 300); }

/* S host-driven (num_threads -1) under a flood of 1,000 answered fetches: one tfrdv_grpc_poll
   handles a bounded batch (the host gets its thread back, the manager's expiry runs), every
   fetch completes */
static void test_poll_bounded_under_flood(void) {
    enum { N = 1000 };
    int i, max = 0, polls = 0, total = 0, ok = 0;
    rec_init(&R, N);
    s_threads = -1;
    TT_CHECK(pair_build(&P, 1, 0, 0));
    s_threads = 0;
    if (!P.cr) goto out;
    for (i = 0; i < N; i++) TT_CHECK(send_i(&P, i));
    for (i = 0; i < N; i++) TT_CHECK(recv_i(&P, S_DEV, S_INC, i, 0));
    sleep_ms(300); /* the requests pile up in S's completion queue */
    for (i = 0; i < 6000 && !rec_wait(&R, N, 0); i++) {
        int n = tfrdv_grpc_poll(P.sg, 10000000);
        total += n;
        polls++;
        if (n > max) max = n;
    }
    TT_CHECK(rec_wait(&R, N, 0));
    for (i = 0; i < N; i++) ok += R.st[i].code == TFRDV_OK && val_is(R.v[i], i);
    TT_CHECK_EQ_INT(ok, N);
    TT_CHECK(max <= 1024);
    printf("    %d completions in %d polls, at most %d in one\n", total, polls, max);
out:
    rec_fini(&R);
    pair_close(&P);
}

/* ==================== 4. a flood of outstanding calls, then abort ==================== */
static void test_flood_then_abort(void) {
    int i;
    rec_init(&R, MAXN);
    TT_CHECK(pair_build(&P, 1, 0, 0));
    if (!P.cr) goto out;
    for (i = 0; i < MAXN; i++) TT_CHECK(recv_i(&P, S_DEV, S_INC, i, 0));
    TT_CHECK(served_at_least(P.sg, 256));
    TT_CHECK_EQ_INT(tfrdv_abort(P.cr, TFRDV_ABORTED, "test: flood aborted"), TFRDV_OK);
    TT_CHECK(rec_wait(&R, MAXN, 60 * SEC));
    sleep_ms(20);
    TT_CHECK(rec_once(&R));
    for (i = 0; i < MAXN; i++) {
        TT_CHECK_EQ_INT(R.st[i].code, TFRDV_ABORTED);
        if (R.st[i].code != TFRDV_ABORTED) break;
        TT_CHECK_CONTAINS(R.st[i].msg, "flood aborted");
    }
    /* the server's requests were withdrawn: S still serves a new step */
out:
    rec_fini(&R);
    pair_close(&P);
}

/* =========== 5. the serving process killed with SIGKILL while calls wait =========== */
/* the child: S serving, its port on stdout, then it waits to be killed */
static int child_serve(void) {
    pair* p = &P;
    tfrdv_status st;
    memset(p, 0, sizeof *p);
    if (!(p->sg = grpc_on(p, "127.0.0.1:0", 0)) || !(p->sm = mgr_on(p, S, S_INC, p->sg))) return 1;
    if (tfrdv_grpc_attach(p->sg, p->sm, &st) != TFRDV_OK) return 1;
    if (tfrdv_mgr_start_step(p->sm, STEP, &p->sr, &st) != TFRDV_OK) return 1;
    printf("%d\n", tfrdv_grpc_port(p->sg));
    fflush(stdout);
    for (;;) pause();
    return 0;
}
static void test_server_killed_in_flight(void) {
    enum { N = 100 };
    int fds[2], port = 0, i, status = 0;
    char buf[32];
    ssize_t got;
    pid_t pid;
    tfrdv_status st;
    char addr[64];
    if (!self_exe[0] || pipe(fds) != 0) TT_SKIP("no /proc/self/exe or pipe");
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(self_exe, self_exe, "--serve", (char*)0);
        _exit(127);
    }
    close(fds[1]);
    got = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    if (got > 0) {
        buf[got] = 0;
        port = atoi(buf);
    }
    TT_CHECK(port > 0);
    rec_init(&R, N);
    if (port > 0 && pair_build(&P, 0, 0, 0)) {
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        TT_CHECK_EQ_INT(tfrdv_grpc_set_worker(P.cg, S, addr, &st), TFRDV_OK);
        for (i = 0; i < N; i++) TT_CHECK(recv_i(&P, S_DEV, S_INC, i, 0));
        /* every call reached the server (the connection carries them) before the kill */
        for (i = 0; i < 3000 && gstats(P.cg).client_calls_live < N; i++) sleep_ms(10);
        sleep_ms(100);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    TT_CHECK(WIFSIGNALED(status));
    TT_CHECK(rec_wait(&R, N, 60 * SEC));
    sleep_ms(20);
    TT_CHECK(rec_once(&R));
    for (i = 0; i < N; i++) {
        TT_CHECK_EQ_INT(R.st[i].code, TFRDV_UNAVAILABLE);
        if (R.st[i].code != TFRDV_UNAVAILABLE) {
            printf("    receive %d: %s: %s\n", i, tfrdv_code_str(R.st[i].code), R.st[i].msg);
            break;
        }
        TT_CHECK(R.v[i] == 0 && printable(R.st[i].msg));
    }
    if (getenv("ADV_VERBOSE")) printf("    %s\n", R.st[0].msg);
    rec_fini(&R);
    pair_close(&P);
}

/* ========== 6. a hostile client (raw C core) against the tfrdv_grpc.h server ========== */
/* one unary call; details receives the status message (raw bytes, NUL-terminated) */
#include "rawgrpc.h"
#define RECV_TENSOR "/tensorflow.WorkerService/RecvTensor"
/* a request for key text k (any bytes) of step */
static size_t req_of(int64_t step, const char* k, size_t kl, int64_t rid, unsigned char* buf, size_t cap) {
    return tfrdv_grpc_encode_request(step, k, kl, rid, buf, cap);
}
/* 1 once S's server has no call open (within 30 s) */
static int server_calls_gone(tfrdv_grpc* g) {
    int i;
    for (i = 0; i < 3000 && gstats(g).server_calls_live > 0; i++) sleep_ms(10);
    return gstats(g).server_calls_live == 0;
}
static void test_hostile_client_keys(void) {
    static unsigned char req[1 << 21];
    static char big[1 << 20];
    char det[4096];
    size_t n, rl;
    int port;
    tfrdv_key k;
    static const char ctl_key[] = "/job:s/replica:0/task:0/device:CPU:0;0000000000002222;/job:c/replica:0/task:0/device:\x1b[2J\xff;edge;0:0";
    static const char bad_dev[] = "/job:\x01s/replica:0/task:0/device:CPU:0;1;/job:c/replica:0/task:0/device:CPU:0;e;0:0";
    TT_CHECK(pair_build(&P, 1, 0, 0));
    if (!P.sg) goto out;
    port = tfrdv_grpc_port(P.sg);
    /* control bytes and a non-UTF-8 byte in a device name: refused, the answer printable */
    n = req_of(STEP, ctl_key, sizeof ctl_key - 1, 11, req, sizeof req);
    TT_CHECK_EQ_INT(raw_call(port, RECV_TENSOR, req, n, 5000, det, sizeof det, 0, 0, 0, 0, 0, 0), GRPC_STATUS_INVALID_ARGUMENT);
    TT_CHECK(printable(det) && det[0]);
    if (getenv("ADV_VERBOSE")) printf("    %s\n", det);
    n = req_of(STEP, bad_dev, sizeof bad_dev - 1, 12, req, sizeof req);
    TT_CHECK_EQ_INT(raw_call(port, RECV_TENSOR, req, n, 5000, det, sizeof det, 0, 0, 0, 0, 0, 0), GRPC_STATUS_INVALID_ARGUMENT);
    TT_CHECK(printable(det) && det[0]);
    if (getenv("ADV_VERBOSE")) printf("    %s\n", det);
    /* a 1 MiB key: refused naming the limit, the answer bounded */
    memset(big, 'k', sizeof big);
    n = req_of(STEP, big, sizeof big, 13, req, sizeof req);
    TT_CHECK_EQ_INT(raw_call(port, RECV_TENSOR, req, n, 5000, det, sizeof det, 0, 0, 0, 0, 0, 0), GRPC_STATUS_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(det, "4096");
    TT_CHECK(strlen(det) < 1024);
    /* an empty key, a negative step, a step nobody started (waits: the client's deadline ends
       it and the server withdraws the request) */
    n = req_of(STEP, "", 0, 14, req, sizeof req);
    TT_CHECK_EQ_INT(raw_call(port, RECV_TENSOR, req, n, 5000, det, sizeof det, 0, 0, 0, 0, 0, 0), GRPC_STATUS_INVALID_ARGUMENT);
    TT_CHECK(det[0] != 0);
    key_of(&k, S_DEV, S_INC, 1);
    n = req_of(-5, k.buf, k.len, 15, req, sizeof req);
    TT_CHECK(raw_call(port, RECV_TENSOR, req, n, 300, det, sizeof det, 0, 0, 0, 0, 0, 0) != GRPC_STATUS_OK);
    n = req_of(987654321, k.buf, k.len, 16, req, sizeof req);
    TT_CHECK_EQ_INT(raw_call(port, RECV_TENSOR, req, n, 300, det, sizeof det, 0, 0, 0, 0, 0, 0), GRPC_STATUS_DEADLINE_EXCEEDED);
    TT_CHECK(server_calls_gone(P.sg));
    /* the server still serves */
    rec_init(&R, 1);
    TT_CHECK(recv_i(&P, S_DEV, S_INC, 0, 0));
    TT_CHECK(send_i(&P, 0));
    TT_CHECK(rec_wait(&R, 1, 30 * SEC));
    TT_CHECK(R.st[0].code == TFRDV_OK && val_is(R.v[0], 0));
    (void)rl;
    rec_fini(&R);
out:
    pair_close(&P);
}
/* two raw clients ask for the same key with the same request id at once, before it is sent:
   exactly one gets the value, the other a clear refusal; nothing is left on the server */
typedef struct dup_call {
    int port;
    unsigned char req[512];
    size_t n, rl;
    char det[512];
    grpc_status_code code;
} dup_call;
static void* dup_thread(void* u) {
    dup_call* d = (dup_call*)u;
    d->code = raw_call(d->port, RECV_TENSOR, d->req, d->n, 10000, d->det, sizeof d->det, 0, 0, 0, 0, &d->rl, 0);
    return 0;
}
static void test_hostile_client_duplicate_ids(void) {
    static dup_call d[2];
    pthread_t th[2];
    tfrdv_key k;
    int i, ok = 0;
    TT_CHECK(pair_build(&P, 1, 0, 0));
    if (!P.sg) goto out;
    key_of(&k, S_DEV, S_INC, 3);
    for (i = 0; i < 2; i++) {
        memset(&d[i], 0, sizeof d[i]);
        d[i].port = tfrdv_grpc_port(P.sg);
        d[i].n = req_of(STEP, k.buf, k.len, 777, d[i].req, sizeof d[i].req);
        pthread_create(&th[i], 0, dup_thread, &d[i]);
    }
    TT_CHECK(served_at_least(P.sg, 1));
    sleep_ms(100);
    TT_CHECK(send_i(&P, 3));
    for (i = 0; i < 2; i++) pthread_join(th[i], 0);
    for (i = 0; i < 2; i++) {
        if (d[i].code == GRPC_STATUS_OK && d[i].rl > 0) ok++;
        else {
            TT_CHECK(d[i].det[0] != 0 && printable(d[i].det));
            printf("    duplicate: %d: %s\n", (int)d[i].code, d[i].det);
        }
    }
    TT_CHECK_EQ_INT(ok, 1);
    TT_CHECK(server_calls_gone(P.sg));
out:
    pair_close(&P);
}

int main(int argc, char** argv) {
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n > 0) self_exe[n] = 0;
    if (getenv("ADV_THREADS")) cq_threads = atoi(getenv("ADV_THREADS")); /* every suite with n threads */
    if (argc == 2 && strcmp(argv[1], "--serve") == 0) return child_serve();
    alarm(300);
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_evil_garbage);
    TT_RUN(test_evil_empty_message);
    TT_RUN(test_evil_huge_declared_length);
    TT_RUN(test_evil_truncated_tensor);
    TT_RUN(test_evil_control_bytes_status);
    TT_RUN(test_evil_trailers_only);
    TT_RUN(test_evil_responds_twice);
    TT_RUN(test_evil_never_responds);
    TT_RUN(test_evil_closes_mid_stream);
    TT_RUN(test_evil_long_status_message);
    TT_RUN(test_evil_value_then_error);
    TT_RUN(test_evil_devices_grow_every_call);
    TT_RUN(test_evil_million_devices);
    TT_RUN(test_callback_cleans_up_its_step);
    TT_RUN(test_callback_destroys_its_manager);
    TT_RUN(test_callback_destroys_its_transport);
    TT_RUN(test_callback_destroys_its_transport_then_fetches);
    TT_RUN(test_callback_cleans_up_its_step_4_threads);
    TT_RUN(test_callback_destroys_its_manager_4_threads);
    TT_RUN(test_callback_destroys_its_transport_4_threads);
    TT_RUN(test_cancel_races_answer);
    TT_RUN(test_microsecond_deadlines_race_sends);
    TT_RUN(test_abort_step_while_answers_arrive);
    TT_RUN(test_server_cleanup_while_requests_wait);
    TT_RUN(test_server_manager_destroyed_while_requests_wait);
    TT_RUN(test_server_transport_and_manager_destroyed_at_once);
    TT_RUN(test_destroy_server_in_flight);
    TT_RUN(test_destroy_client_in_flight);
    TT_RUN(test_flood_then_abort);
    TT_RUN(test_poll_bounded_under_flood);
    TT_RUN(test_server_killed_in_flight);
    TT_RUN(test_hostile_client_keys);
    TT_RUN(test_hostile_client_duplicate_ids);
    return TT_MAIN_END();
}
