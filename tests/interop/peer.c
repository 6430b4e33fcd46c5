/* peer.c - the tfrdv side of `make interop` and `make bench-tf-grpc`: a tfrdv gRPC worker,
   /job:peer/replica:0/task:0, in a cluster whose master is TensorFlow (job "tf").

     peer --listen 127.0.0.1:P1 --tf 127.0.0.1:P0 [--require-ack]
     peer --fetch-bench 127.0.0.1:P1 --spec SPEC --reps N     (a second tfrdv worker, /job:peer2,
                                                               timing fetches of pair.data.SPEC
                                                               from the first, after pair.ready)

   TensorFlow never tells a foreign worker about its steps: the step id first arrives in a
   RecvTensor, for a step this worker has not started. The manager's step_requested hook reports
   it; the peer starts the step and acts on the edge name of the key TensorFlow asked for:
     out.SPEC        send the value SPEC describes (TensorFlow receives it)
     outdead.X       send a dead value
     pair.ready.SPEC / pair.data.SPEC   one step, two edges: send the value of SPEC (built once
                     and kept, for benchmarks) as pair.data.SPEC, then int32 1 as pair.ready.SPEC
     rt.*            one step with three edges: send a dead value as rt.out; fetch rt.back (what
                     TensorFlow forwarded); answer rt.ack with int32 1 if that was dead
     err.CODE        abort the step with that status code (it reaches TensorFlow's session.run)
     echo.SPEC       fetch "in.SPEC" from TensorFlow in this step, check it element by element
                     against SPEC, send it back under the echo key (TensorFlow compares too)
     ack.dead.EDGE   fetch EDGE from TensorFlow; answer int32 1 if it was dead, 0 if not
     ack.inc.EDGE    fetch EDGE with a wrong incarnation; answer the status code (10, ABORTED,
                     when TensorFlow's WorkerPossiblyRestarted detail came with it)
     ack.time.EDGE   fetch EDGE, record how long the fetch took (bench), answer int32 1
   Any failure aborts the step with a message, so TensorFlow's session.run raises it.
   SPEC is DTYPE.SHAPE.SEED: DTYPE float32 float64 int32 int64 uint8 bool half bfloat16 string,
   SHAPE "s" (scalar) or "d" dims joined by "x" ("d2x0x3"), SEED a small integer; the values are a
   function of SPEC that tests/interop/interop.py computes the same way.

   Prints "READY port=P incarnation=HEX tf_incarnation=HEX" once TensorFlow's GetStatus answered.
   Commands on stdin: "stats" prints one line of counters, "times" prints and clears the recorded
   fetch times, "quit" exits. */
#define TFRDV_IMPLEMENTATION
#define TFRDV_GRPC_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_grpc.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ME "/job:peer/replica:0/task:0"
#define ME_CPU ME "/device:CPU:0"
#define TF "/job:tf/replica:0/task:0"
#define TF_CPU TF "/device:CPU:0"

static tfrdv_mgr* mgr;
static uint64_t tf_inc;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
#define MAXT 100000
static double times_us[MAXT];
static int ntimes;
#define KEEP_STEPS 64 /* steps this worker keeps before cleaning up the oldest */
static int64_t steps[KEEP_STEPS];
static int nsteps_seen;

/* ---- SPEC: dtype, shape, seed, and the values ---- */
typedef struct spec {
    int32_t dtype;
    int rank;
    int64_t dims[8];
    int64_t n;
    uint32_t seed;
} spec;
static const struct { const char* name; int32_t dtype; int size; } dtypes[] = {
    {"float32", TFRDV_DT_FLOAT, 4}, {"float64", TFRDV_DT_DOUBLE, 8}, {"int32", TFRDV_DT_INT32, 4},
    {"int64", TFRDV_DT_INT64, 8},   {"uint8", TFRDV_DT_UINT8, 1},    {"bool", TFRDV_DT_BOOL, 1},
    {"half", TFRDV_DT_HALF, 2},     {"bfloat16", TFRDV_DT_BFLOAT16, 2}, {"string", TFRDV_DT_STRING, 0}};
static int elem_size(int32_t dtype) {
    size_t i;
    for (i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dtype == dtype) return dtypes[i].size;
    return -1;
}
static int parse_spec(const char* s, size_t len, spec* out) {
    char buf[128], *p, *dot;
    size_t i;
    if (len >= sizeof buf) return 0;
    memcpy(buf, s, len);
    buf[len] = 0;
    memset(out, 0, sizeof *out);
    if (!(dot = strchr(buf, '.'))) return 0;
    *dot = 0;
    out->dtype = -1;
    for (i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(buf, dtypes[i].name) == 0) out->dtype = dtypes[i].dtype;
    p = dot + 1;
    if (out->dtype < 0 || !(dot = strchr(p, '.'))) return 0;
    *dot = 0;
    out->n = 1;
    if (strcmp(p, "s") != 0) {
        if (*p++ != 'd') return 0;
        for (;;) {
            char* e;
            long long d = strtoll(p, &e, 10);
            if (e == p || d < 0 || out->rank == 8) return 0;
            out->dims[out->rank++] = d;
            out->n *= d;
            if (*e == 0) break;
            if (*e != 'x') return 0;
            p = e + 1;
        }
    }
    out->seed = (uint32_t)strtoul(dot + 1, NULL, 10);
    return 1;
}
/* small values every dtype holds exactly (half and bfloat16 included) */
static double small(int64_t i, uint32_t seed) { return (double)((int)((i * 37 + seed * 11) % 200) - 100) * 0.5; }
static uint16_t to_half(float f) { /* exact for the normal values of small() and for 0 */
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) == 0) return (uint16_t)(b >> 16);
    return (uint16_t)(((b >> 16) & 0x8000u) | ((((b >> 23) & 0xffu) - 127u + 15u) << 10) | ((b & 0x7fffffu) >> 13));
}
static uint16_t to_bfloat16(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return (uint16_t)(b >> 16);
}
static size_t str_len(int64_t i, uint32_t seed) { return (size_t)((i * 7 + seed) % 9); }
static char str_chr(int64_t i, size_t j, uint32_t seed) { return (char)('a' + (int)(((uint64_t)i + j + seed) % 26)); }
static size_t varint(uint64_t v, unsigned char* out) {
    size_t n = 0;
    do {
        out[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}
/* element i of SPEC written at p (numeric dtypes) */
static void element(const spec* s, int64_t i, unsigned char* p) {
    uint64_t u = (uint64_t)i;
    switch (s->dtype) {
    case TFRDV_DT_FLOAT: { float f = (float)(small(i, s->seed) * 0.5); memcpy(p, &f, 4); break; }
    case TFRDV_DT_DOUBLE: { double d = small(i, s->seed) * 0.25 + 1e6; memcpy(p, &d, 8); break; }
    case TFRDV_DT_INT32: { uint32_t x = (uint32_t)(u * 2654435761u + s->seed); memcpy(p, &x, 4); break; }
    case TFRDV_DT_INT64: { uint64_t x = (u + 1) * 0x9E3779B97F4A7C15ull + s->seed; memcpy(p, &x, 8); break; }
    case TFRDV_DT_UINT8: *p = (unsigned char)((u * 37 + s->seed) & 255); break;
    case TFRDV_DT_BOOL: *p = (unsigned char)((u * 7 + s->seed) % 3 == 0); break;
    case TFRDV_DT_HALF: { uint16_t h = to_half((float)small(i, s->seed)); memcpy(p, &h, 2); break; }
    case TFRDV_DT_BFLOAT16: { uint16_t h = to_bfloat16((float)small(i, s->seed)); memcpy(p, &h, 2); break; }
    default: break;
    }
}
/* the value SPEC describes (DT_STRING: TensorFlow's encoding, the lengths as varints, then the bytes) */
static tfrdv_value* make_value(const spec* s) {
    uint64_t size = 0;
    tfrdv_value* v;
    int64_t i;
    if (s->dtype == TFRDV_DT_STRING) {
        unsigned char tmp[10];
        for (i = 0; i < s->n; i++) size += varint(str_len(i, s->seed), tmp) + str_len(i, s->seed);
    } else {
        size = (uint64_t)s->n * (uint64_t)elem_size(s->dtype);
    }
    v = tfrdv_value_new(NULL, s->dtype, s->rank, s->dims, NULL, size);
    if (!v) return NULL;
    if (s->dtype == TFRDV_DT_STRING) {
        unsigned char* p = (unsigned char*)v->data;
        for (i = 0; i < s->n; i++) p += varint(str_len(i, s->seed), p);
        for (i = 0; i < s->n; i++) {
            size_t j, l = str_len(i, s->seed);
            for (j = 0; j < l; j++) *p++ = (unsigned char)str_chr(i, j, s->seed);
        }
    } else {
        int es = elem_size(s->dtype);
        for (i = 0; i < s->n; i++) element(s, i, (unsigned char*)v->data + i * es);
    }
    return v;
}
/* the value of a SPEC, built once (benchmarks: a send costs a reference, not a 64 MiB fill) */
#define NCACHED 8
static struct { char spec[64]; tfrdv_value* v; } cached[NCACHED];
static tfrdv_value* cached_value(const char* text, size_t len, const spec* s) {
    tfrdv_value* v = NULL;
    int i;
    pthread_mutex_lock(&mu);
    for (i = 0; i < NCACHED && cached[i].v; i++)
        if (strlen(cached[i].spec) == len && memcmp(cached[i].spec, text, len) == 0) v = cached[i].v;
    if (!v && i < NCACHED && len < sizeof cached[i].spec && (v = make_value(s)) != NULL) {
        memcpy(cached[i].spec, text, len);
        cached[i].spec[len] = 0;
        cached[i].v = v;
    }
    if (v) tfrdv_value_retain(v); /* the caller's reference; the cache keeps its own */
    pthread_mutex_unlock(&mu);
    return v;
}
/* "" when v is what SPEC describes, else what differs */
static void check_value(const spec* s, const tfrdv_value* v, char* why, size_t cap) {
    tfrdv_value* want = make_value(s);
    int r;
    why[0] = 0;
    if (!want) { snprintf(why, cap, "out of memory"); return; }
    if (v->dtype != s->dtype) snprintf(why, cap, "dtype %d, expected %d", (int)v->dtype, (int)s->dtype);
    else if (v->rank != s->rank) snprintf(why, cap, "rank %d, expected %d", (int)v->rank, s->rank);
    for (r = 0; !why[0] && r < s->rank; r++)
        if (v->dims[r] != s->dims[r]) snprintf(why, cap, "dim %d is %lld, expected %lld", r, (long long)v->dims[r], (long long)s->dims[r]);
    if (!why[0] && v->size != want->size) snprintf(why, cap, "%llu bytes, expected %llu", (unsigned long long)v->size, (unsigned long long)want->size);
    if (!why[0] && v->size && memcmp(v->data, want->data, (size_t)v->size) != 0) {
        uint64_t b = 0;
        while (((const unsigned char*)v->data)[b] == ((const unsigned char*)want->data)[b]) b++;
        snprintf(why, cap, "byte %llu differs (0x%02x, expected 0x%02x)", (unsigned long long)b, ((const unsigned char*)v->data)[b],
                 ((const unsigned char*)want->data)[b]);
    }
    tfrdv_value_release(want);
}

/* ---- acting on TensorFlow's requests ---- */
static tfrdv_value* int32_scalar(int32_t x) { return tfrdv_value_new(NULL, TFRDV_DT_INT32, 0, NULL, &x, 4); }
/* abort the step: every request of it, TensorFlow's included, fails with this status */
static void fail_step(tfrdv_rendezvous* r, tfrdv_code code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void fail_step(tfrdv_rendezvous* r, tfrdv_code code, const char* fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "peer: %s\n", msg);
    tfrdv_abort(r, code, msg);
}
static void send_on(tfrdv_rendezvous* r, const tfrdv_str* key, tfrdv_value* v, int dead) {
    tfrdv_key k;
    tfrdv_status st;
    if (tfrdv_key_from(&k, key->ptr, key->len, &st) != TFRDV_OK || tfrdv_send(r, &k.parsed, NULL, v, dead, &st) != TFRDV_OK) {
        tfrdv_value_release(v);
        fail_step(r, TFRDV_INTERNAL, "send failed: %s", st.msg);
    }
}
typedef struct fetch { /* one fetch from TensorFlow, answered under reply_key */
    tfrdv_rendezvous* r;
    tfrdv_key reply_key;
    char what[16]; /* echo, dead, inc, time */
    spec sp;
    int64_t t0;
} fetch;
static void fetched(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    fetch* f = (fetch*)user;
    int64_t t1 = tfrdv_now_ns();
    tfrdv_str rk = f->reply_key.parsed.full;
    char why[256];
    (void)sa;
    if (strcmp(f->what, "inc") == 0) { /* the wrong incarnation must come back ABORTED + detail */
        if (st->code == TFRDV_ABORTED && st->detail == TFRDV_DETAIL_WORKER_RESTARTED && strstr(st->msg, "incarnation"))
            send_on(f->r, &rk, int32_scalar((int32_t)st->code), 0);
        else
            fail_step(f->r, TFRDV_INTERNAL, "a wrong incarnation gave %s: %s", tfrdv_code_str(st->code), st->msg);
    } else if (st->code != TFRDV_OK) {
        char what[TFRDV_STATUS_MSG_MAX];
        snprintf(what, sizeof what, "%.*s", (int)ra->key.len, ra->key.ptr);
        fail_step(f->r, st->code, "fetch of %s failed: %s", what, st->msg);
    } else if (strcmp(f->what, "dead") == 0) {
        send_on(f->r, &rk, int32_scalar(dead ? 1 : 0), 0);
    } else if (strcmp(f->what, "time") == 0) {
        pthread_mutex_lock(&mu);
        if (ntimes < MAXT) times_us[ntimes++] = (double)(t1 - f->t0) / 1e3;
        pthread_mutex_unlock(&mu);
        send_on(f->r, &rk, int32_scalar(1), 0);
    } else if (dead || !v) {
        fail_step(f->r, TFRDV_INTERNAL, "echo: %s arrived dead", f->reply_key.buf);
    } else {
        check_value(&f->sp, v, why, sizeof why);
        if (why[0]) fail_step(f->r, TFRDV_INTERNAL, "tfrdv peer: the tensor TensorFlow sent differs: %s (%s)", why, f->reply_key.buf);
        else send_on(f->r, &rk, v, 0), v = NULL; /* the same tensor back: TensorFlow checks it too */
    }
    tfrdv_value_release(v);
    tfrdv_unref(f->r);
    free(f);
}
static void start_fetch(tfrdv_rendezvous* r, const tfrdv_str* reply_key, const char* what, const char* edge, size_t elen,
                        uint64_t inc, const spec* sp) {
    fetch* f = (fetch*)calloc(1, sizeof *f);
    char e[256];
    tfrdv_key k;
    tfrdv_status st;
    tfrdv_frame_iter top = {0, 0};
    if (!f || elen >= sizeof e) { free(f); fail_step(r, TFRDV_INTERNAL, "bad fetch request %s", what); return; }
    memcpy(e, edge, elen);
    e[elen] = 0;
    if (tfrdv_key_make(&k, TF_CPU, inc, ME_CPU, e, top, &st) != TFRDV_OK ||
        tfrdv_key_from(&f->reply_key, reply_key->ptr, reply_key->len, &st) != TFRDV_OK) {
        free(f);
        fail_step(r, TFRDV_INTERNAL, "bad key: %s", st.msg);
        return;
    }
    snprintf(f->what, sizeof f->what, "%s", what);
    if (sp) f->sp = *sp;
    tfrdv_ref(r);
    f->r = r;
    f->t0 = tfrdv_now_ns();
    if (tfrdv_recv_async(r, &k.parsed, NULL, fetched, f, 0) != TFRDV_OK) { /* fetched ran with the error */ }
}
static int starts_with(tfrdv_str s, const char* p, tfrdv_str* rest) {
    size_t n = strlen(p);
    if (s.len < n || memcmp(s.ptr, p, n) != 0) return 0;
    rest->ptr = s.ptr + n;
    rest->len = s.len - n;
    return 1;
}

static void on_step_requested(void* user, tfrdv_mgr* m, int64_t step_id, tfrdv_str key) {
    tfrdv_rendezvous* r = NULL;
    tfrdv_parsed_key pk;
    tfrdv_status st;
    tfrdv_str edge, rest;
    spec sp;
    int64_t old = 0;
    int i, seen = 0;
    (void)user;
    if (tfrdv_mgr_start_step(m, step_id, &r, &st) != TFRDV_OK) {
        fprintf(stderr, "peer: step %lld: %s\n", (long long)step_id, st.msg);
        return;
    }
    /* Once per step: a request that arrives after the step started is not deferred and comes
       here no more, so the first one does the whole step's work (see rt. below). Keep the newest
       KEEP_STEPS steps: a TensorFlow master never tells a foreign worker when a step ends. */
    pthread_mutex_lock(&mu);
    for (i = 0; i < KEEP_STEPS && i < nsteps_seen; i++)
        if (steps[i] == step_id) seen = 1;
    if (!seen) {
        if (nsteps_seen >= KEEP_STEPS) old = steps[nsteps_seen % KEEP_STEPS];
        steps[nsteps_seen++ % KEEP_STEPS] = step_id;
    }
    pthread_mutex_unlock(&mu);
    if (old) tfrdv_mgr_cleanup(m, old);
    if (seen) { tfrdv_unref(r); return; }
    if (tfrdv_key_parse(key.ptr, key.len, &pk, &st) != TFRDV_OK) { tfrdv_unref(r); return; } /* serve refused it already */
    edge = pk.edge_name;
    if (starts_with(edge, "out.", &rest) && parse_spec(rest.ptr, rest.len, &sp)) {
        tfrdv_value* v = make_value(&sp);
        if (v) send_on(r, &key, v, 0);
        else fail_step(r, TFRDV_RESOURCE_EXHAUSTED, "out of memory for %s", "out");
    } else if (starts_with(edge, "outdead.", &rest)) {
        send_on(r, &key, NULL, 1);
    } else if (starts_with(edge, "pair.", &rest) && (starts_with(rest, "ready.", &rest) || starts_with(rest, "data.", &rest)) &&
               parse_spec(rest.ptr, rest.len, &sp)) {
        /* two edges, one step: the value (built once) on pair.data.SPEC, then int32 1 on
           pair.ready.SPEC; a receiver that waits for ready finds the data already here */
        char e[2][160], dst[160];
        tfrdv_key kd, kr;
        tfrdv_frame_iter top = {0, 0};
        tfrdv_value* v = cached_value(rest.ptr, rest.len, &sp);
        snprintf(e[0], sizeof e[0], "pair.data.%.*s", (int)rest.len, rest.ptr);
        snprintf(e[1], sizeof e[1], "pair.ready.%.*s", (int)rest.len, rest.ptr);
        snprintf(dst, sizeof dst, "%.*s", (int)pk.dst_device.len, pk.dst_device.ptr);
        if (!v || tfrdv_key_make(&kd, ME_CPU, tfrdv_mgr_incarnation(m), dst, e[0], top, &st) != TFRDV_OK ||
            tfrdv_key_make(&kr, ME_CPU, tfrdv_mgr_incarnation(m), dst, e[1], top, &st) != TFRDV_OK) {
            tfrdv_value_release(v);
            fail_step(r, TFRDV_INTERNAL, "pair: %s", v ? st.msg : "out of memory");
        } else {
            send_on(r, &kd.parsed.full, v, 0);
            send_on(r, &kr.parsed.full, int32_scalar(1), 0);
        }
    } else if (starts_with(edge, "rt.", &rest)) { /* three edges, one step: rt.out, rt.back, rt.ack */
        tfrdv_key out, ack;
        tfrdv_frame_iter top = {0, 0};
        if (tfrdv_key_make(&out, ME_CPU, tfrdv_mgr_incarnation(m), TF_CPU, "rt.out", top, &st) != TFRDV_OK ||
            tfrdv_key_make(&ack, ME_CPU, tfrdv_mgr_incarnation(m), TF_CPU, "rt.ack", top, &st) != TFRDV_OK) {
            fail_step(r, TFRDV_INTERNAL, "rt keys: %s", st.msg);
        } else {
            send_on(r, &out.parsed.full, NULL, 1);                 /* a dead value to TensorFlow ... */
            start_fetch(r, &ack.parsed.full, "dead", "rt.back", 7, tf_inc, NULL); /* ... which forwards it */
        }
    } else if (starts_with(edge, "err.", &rest)) {
        char msg[TFRDV_STATUS_MSG_MAX];
        snprintf(msg, sizeof msg, "tfrdv peer: error injected for %.*s", (int)key.len, key.ptr);
        tfrdv_abort(r, (tfrdv_code)atoi(rest.ptr), msg);
    } else if (starts_with(edge, "echo.", &rest) && parse_spec(rest.ptr, rest.len, &sp)) {
        char in[160];
        snprintf(in, sizeof in, "in.%.*s", (int)rest.len, rest.ptr);
        start_fetch(r, &key, "echo", in, strlen(in), tf_inc, &sp);
    } else if (starts_with(edge, "ack.dead.", &rest)) {
        start_fetch(r, &key, "dead", rest.ptr, rest.len, tf_inc, NULL);
    } else if (starts_with(edge, "ack.inc.", &rest)) {
        start_fetch(r, &key, "inc", rest.ptr, rest.len, tf_inc ^ 1, NULL);
    } else if (starts_with(edge, "ack.time.", &rest)) {
        start_fetch(r, &key, "time", rest.ptr, rest.len, tf_inc, NULL);
    } else {
        char e[160];
        snprintf(e, sizeof e, "%.*s", (int)edge.len, edge.ptr);
        fail_step(r, TFRDV_INVALID_ARGUMENT, "tfrdv peer: no rule for the edge name %s", e);
    }
    tfrdv_unref(r);
}

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}
/* "TIMES n=N median_us=M min_us=L all=T1,T2,..." (sorted), then forget them */
static void print_times(const char* tag) {
    int i;
    pthread_mutex_lock(&mu);
    qsort(times_us, (size_t)ntimes, sizeof times_us[0], cmp_double);
    printf("%s n=%d median_us=%.1f min_us=%.1f all=", tag, ntimes, ntimes ? times_us[ntimes / 2] : 0.0, ntimes ? times_us[0] : 0.0);
    for (i = 0; i < ntimes; i++) printf("%s%.1f", i ? "," : "", times_us[i]);
    printf("\n");
    ntimes = 0;
    pthread_mutex_unlock(&mu);
    fflush(stdout);
}

/* ---- the second tfrdv worker of the tfrdv -> tfrdv benchmark ---- */
/* --reuse: the receiver's alloc hook lands every tensor in one buffer, allocated and touched once
   (a runtime's preallocated arena); without it each receive gets fresh memory, as in TensorFlow */
static struct { tfrdv_value v; int64_t dims[8]; void* buf; uint64_t cap; } arena;
static void arena_release(tfrdv_value* v) { (void)v; }
static tfrdv_value* arena_alloc(void* user, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    (void)user;
    if (rank > 8) return NULL;
    if (size > arena.cap) {
        free(arena.buf);
        arena.buf = malloc((size_t)size ? (size_t)size : 1);
        arena.cap = arena.buf ? size : 0;
        if (arena.buf) memset(arena.buf, 0, (size_t)size);
    }
    if (!arena.buf) return NULL;
    if (rank) memcpy(arena.dims, dims, (size_t)rank * sizeof *dims);
    arena.v = tfrdv_value_make(dtype, rank, arena.dims, arena.buf, size, arena_release, NULL);
    return &arena.v;
}
typedef struct waiter { int done; tfrdv_code code; int64_t t1; char msg[TFRDV_STATUS_MSG_MAX]; } waiter;
static void bench_done(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    waiter* w = (waiter*)user;
    int64_t t1 = tfrdv_now_ns();
    (void)sa;
    (void)ra;
    (void)dead;
    tfrdv_value_release(v);
    pthread_mutex_lock(&mu);
    w->t1 = t1;
    w->code = st->code;
    snprintf(w->msg, sizeof w->msg, "%s", st->msg);
    w->done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}
static int fetch_bench(const char* addr, const char* spec_text, int reps, int reuse) {
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_grpc_worker w = {ME, NULL};
    tfrdv_grpc* g;
    tfrdv_mgr* m;
    tfrdv_status st;
    tfrdv_grpc_device dev;
    size_t n = 0;
    uint64_t inc;
    int64_t base;
    char edge[160];
    tfrdv_args ra;
    memset(&ra, 0, sizeof ra);
    ra.alloc_fn = arena_alloc;
    int i;
    tfrdv_frame_iter top = {0, 0};
    w.address = addr;
    gc.workers = &w;
    gc.num_workers = 1;
    if (tfrdv_grpc_create(&gc, &g, &st) != TFRDV_OK) { fprintf(stderr, "peer2: %s\n", st.msg); return 1; }
    mc.worker_name = "/job:peer2/replica:0/task:0";
    mc.transport = tfrdv_grpc_transport(g);
    if (tfrdv_mgr_create(&mc, &m, &st) != TFRDV_OK || tfrdv_grpc_attach(g, m, &st) != TFRDV_OK ||
        tfrdv_grpc_peer_devices(g, ME, 10000000000LL, &dev, 1, &n, &st) != TFRDV_OK || n < 1) {
        fprintf(stderr, "peer2: %s\n", st.msg);
        return 1;
    }
    inc = dev.incarnation;
    base = (int64_t)getpid() << 24; /* step ids of this run only: the server remembers steps it saw */
    for (i = 0; i <= reps; i++) { /* round 0 warms the channel */
        tfrdv_rendezvous* r;
        int j;
        if (tfrdv_mgr_start_step(m, base + i, &r, &st) != TFRDV_OK) return 1;
        for (j = 0; j < 2; j++) { /* pair.ready (the first request starts the step there), then the timed pair.data */
            tfrdv_key k;
            waiter wt;
            int64_t t0;
            memset(&wt, 0, sizeof wt);
            snprintf(edge, sizeof edge, "pair.%s.%s", j ? "data" : "ready", spec_text);
            if (tfrdv_key_make(&k, ME_CPU, inc, "/job:peer2/replica:0/task:0/device:CPU:0", edge, top, &st) != TFRDV_OK) return 1;
            t0 = tfrdv_now_ns();
            if (tfrdv_recv_async(r, &k.parsed, reuse ? &ra : NULL, bench_done, &wt, 0) != TFRDV_OK) return 1;
            pthread_mutex_lock(&mu);
            while (!wt.done) pthread_cond_wait(&cv, &mu);
            pthread_mutex_unlock(&mu);
            if (wt.code != TFRDV_OK) { fprintf(stderr, "peer2: fetch failed: %s\n", wt.msg); return 1; }
            if (j && i > 0 && ntimes < MAXT) times_us[ntimes++] = (double)(wt.t1 - t0) / 1e3;
        }
        tfrdv_unref(r);
        tfrdv_mgr_cleanup(m, base + i);
    }
    print_times("TIMES");
    tfrdv_grpc_destroy(g);
    tfrdv_mgr_destroy(m);
    return 0;
}

int main(int argc, char** argv) {
    const char *listen = NULL, *tf_addr = NULL, *bench_addr = NULL, *bench_spec = "float32.d1024.1";
    int i, require_ack = 0, reps = 50, reuse = 0;
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_grpc_worker tfw = {TF, NULL};
    tfrdv_grpc* g;
    tfrdv_status st;
    tfrdv_grpc_device devs[8];
    size_t nd = 0;
    char line[256];
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--require-ack") == 0) require_ack = 1;
        else if (strcmp(argv[i], "--reuse") == 0) reuse = 1;
        else if (i + 1 < argc && strcmp(argv[i], "--listen") == 0) listen = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--tf") == 0) tf_addr = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--fetch-bench") == 0) bench_addr = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--spec") == 0) bench_spec = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) reps = atoi(argv[++i]);
        else { fprintf(stderr, "peer: unknown argument %s\n", argv[i]); return 2; }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (bench_addr) return fetch_bench(bench_addr, bench_spec, reps < 1 ? 1 : reps, reuse);
    if (!listen || !tf_addr) {
        fprintf(stderr, "usage: peer --listen HOST:PORT --tf HOST:PORT [--require-ack]\n"
                        "       peer --fetch-bench HOST:PORT [--spec SPEC] [--reps N] [--reuse]\n");
        return 2;
    }
    tfw.address = tf_addr;
    gc.listen_address = listen;
    gc.workers = &tfw;
    gc.num_workers = 1;
    gc.require_ack = require_ack;
    if (tfrdv_grpc_create(&gc, &g, &st) != TFRDV_OK) { fprintf(stderr, "peer: %s\n", st.msg); return 1; }
    mc.worker_name = ME;
    mc.transport = tfrdv_grpc_transport(g);
    mc.step_requested = on_step_requested;
    mc.response_cache = require_ack;
    mc.call_timeout_ns = 60000000000LL;
    if (tfrdv_mgr_create(&mc, &mgr, &st) != TFRDV_OK || tfrdv_grpc_attach(g, mgr, &st) != TFRDV_OK) {
        fprintf(stderr, "peer: %s\n", st.msg);
        return 1;
    }
    /* TensorFlow's device incarnation: its keys must carry it (TensorFlow may still be starting:
       tfrdv_mgr_peer_incarnation waits); GetStatus's device list must agree on CPU:0's */
    if (tfrdv_mgr_peer_incarnation(mgr, TF, 120000000000LL, &tf_inc, &st) != TFRDV_OK) {
        fprintf(stderr, "peer: incarnation of %s: %s\n", TF, st.msg);
        return 1;
    }
    if (tfrdv_grpc_peer_devices(g, TF, 10000000000LL, devs, 8, &nd, &st) != TFRDV_OK) {
        fprintf(stderr, "peer: GetStatus on %s: %s\n", tf_addr, st.msg);
        return 1;
    }
    for (i = 0; i < (int)nd && i < 8; i++)
        if (strcmp(devs[i].name, TF_CPU) == 0 && devs[i].incarnation != tf_inc) {
            fprintf(stderr, "peer: tfrdv_mgr_peer_incarnation gave %016llx, GetStatus lists %s with %016llx\n",
                    (unsigned long long)tf_inc, TF_CPU, (unsigned long long)devs[i].incarnation);
            return 1;
        }
    if (!tf_inc) { fprintf(stderr, "peer: %s has no %s\n", tf_addr, TF_CPU); return 1; }
    printf("READY port=%d incarnation=%016llx tf_incarnation=%016llx\n", tfrdv_grpc_port(g),
           (unsigned long long)tfrdv_mgr_incarnation(mgr), (unsigned long long)tf_inc);
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "stats", 5) == 0) {
            tfrdv_grpc_stats s;
            tfrdv_mgr_stats ms;
            tfrdv_grpc_get_stats(g, &s);
            tfrdv_mgr_get_stats(mgr, &ms);
            printf("STATS calls_ok=%llu calls_failed=%llu acks_sent=%llu served=%llu serve_ok=%llu status_calls=%llu "
                   "session_calls=%llu acks_received=%llu unimplemented=%llu cache_hits=%llu steps=%llu\n",
                   (unsigned long long)s.calls_ok, (unsigned long long)s.calls_failed, (unsigned long long)s.acks_sent,
                   (unsigned long long)s.served, (unsigned long long)s.serve_ok, (unsigned long long)s.status_calls,
                   (unsigned long long)s.session_calls, (unsigned long long)s.acks_received,
                   (unsigned long long)s.unimplemented, (unsigned long long)ms.cache_hits,
                   (unsigned long long)ms.steps_created);
        } else if (strncmp(line, "times", 5) == 0) {
            print_times("TIMES");
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        }
    }
    tfrdv_grpc_destroy(g);
    tfrdv_mgr_destroy(mgr);
    for (i = 0; i < NCACHED; i++) tfrdv_value_release(cached[i].v);
    return 0;
}
