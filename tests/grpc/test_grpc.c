/* test_grpc.c - tfrdv_grpc.h: the wire codec (TensorFlow golden bytes, typed fields, any field
   order, hostile input) in process, and the transport between two processes on 127.0.0.1: this
   binary re-executes itself as the serving worker (`--serve`), driven over a pipe. With
   TFRDV_TEST_PEER=1 it also runs the conformance tests against tests/grpc/peer.py, a Python
   grpcio + protobuf peer. tests/grpc/grpc.mk compiles the defaults in (TFRDV_GRPC_TEST_* macros:
   peer on when Debian's python3-grpcio and protoc are there, the generated protobuf module, the
   TLS material); the environment variables of the same meaning override them:
     TFRDV_TEST_PEER (0/1), TFRDV_PEER_PYTHON, TFRDV_PEER_SCRIPT, TFRDV_PEER_PB, TFRDV_TEST_CERTS,
     TFRDV_GRPC_BIG=0 (skip the 64 MiB transfer), GRPC_VERBOSITY (default NONE here). */
#define TFRDV_IMPLEMENTATION
#define TFRDV_GRPC_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_grpc.h"
#include "tt.h"
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Sanitizer suppressions, built in so that `make asan` / `make tsan` (which run this binary with
   no options) work too. libgrpc, absl, openssl and libstdc++ are not instrumented: their own
   synchronisation (absl Mutex, futexes, atomics) is invisible to ThreadSanitizer, which then
   reports races entirely inside them (tfrdv is C: the C++ frames are gRPC's); LeakSanitizer sees
   what libgrpc keeps for the life of the process. Our code's hand-offs through gRPC's queue are
   made visible to TSan by tfrdv_grpc.h itself (an atomic per tag). */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TT_TSAN 1
#endif
#if __has_feature(address_sanitizer)
#define TT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TT_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TT_ASAN 1
#endif
#ifdef TT_TSAN
const char* __tsan_default_suppressions(void);
const char* __tsan_default_suppressions(void) {
    return "race:libgrpc.so\nrace:libgpr.so\nrace:libabsl\nrace:libupb\nrace:libstdc++\nrace:libcrypto\nrace:libssl\n"
           "called_from_lib:libgrpc.so\n";
}
#endif
#ifdef TT_ASAN
const char* __lsan_default_suppressions(void);
const char* __lsan_default_suppressions(void) { return "leak:libgrpc.so\nleak:libabsl\nleak:libgpr.so\n"; }
#endif

#define PS "/job:ps/replica:0/task:0"
#define WK "/job:worker/replica:0/task:0"
#define PS_DEV PS "/device:CPU:0"
#define WK_DEV WK "/device:CPU:0"

static void sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, 0);
}
static int64_t now_ms(void) { return tfrdv_now_ns() / 1000000; }

/* ============================================================================================
   Part 1: the codec
   ============================================================================================ */
typedef struct hval { /* a value on the heap: header, dims and data in one block */
    tfrdv_value v;
    int64_t dims[TFRDV_GRPC_MAX_RANK];
} hval;
static long hval_live;
static void hval_release(tfrdv_value* v) {
    __atomic_sub_fetch(&hval_live, 1, __ATOMIC_SEQ_CST);
    free(v);
}
static tfrdv_value* hval_alloc(void* u, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    hval* h;
    (void)u;
    if (size > ((uint64_t)1 << 30)) return 0;
    h = (hval*)calloc(1, sizeof *h + (size_t)size + 1);
    if (!h) return 0;
    __atomic_add_fetch(&hval_live, 1, __ATOMIC_SEQ_CST);
    h->v.dtype = dtype;
    h->v.rank = rank;
    if (rank) memcpy(h->dims, dims, (size_t)rank * sizeof *dims);
    h->v.dims = h->dims;
    h->v.data = (unsigned char*)(h + 1);
    h->v.size = size;
    h->v.release = hval_release;
    return &h->v;
}
/* decode from one segment */
static tfrdv_code dec1(const void* p, size_t n, tfrdv_value** v, tfrdv_grpc_response_info* info, tfrdv_status* st) {
    tfrdv_str s;
    s.ptr = (const char*)p;
    s.len = n;
    return tfrdv_grpc_decode_response(&s, 1, 1 << 20, hval_alloc, 0, v, info, st);
}
/* decode from one-byte segments (every field split across slice boundaries) */
static tfrdv_code dec_split(const unsigned char* p, size_t n, tfrdv_value** v, tfrdv_grpc_response_info* info, tfrdv_status* st) {
    tfrdv_str segs[512];
    size_t i;
    if (n > 512) return TFRDV_INTERNAL;
    for (i = 0; i < n; i++) { segs[i].ptr = (const char*)p + i; segs[i].len = 1; }
    return tfrdv_grpc_decode_response(segs, n, 1 << 20, hval_alloc, 0, v, info, st);
}
/* head + content + tail of a value, concatenated */
static size_t enc(const tfrdv_value* v, int dead, int ack, int64_t micros, unsigned char* out, size_t cap) {
    unsigned char head[TFRDV_GRPC_HEAD_MAX(8)], tail[TFRDV_GRPC_TAIL_MAX];
    size_t hl, tl, n;
    tfrdv_status st;
    if (tfrdv_grpc_encode_response(v, dead, ack, micros, head, sizeof head, &hl, tail, &tl, &st) != TFRDV_OK) {
        printf("    encode: %s\n", st.msg);
        return 0;
    }
    n = hl + (v ? (size_t)v->size : 0) + tl;
    if (n > cap) return 0;
    memcpy(out, head, hl);
    if (v && v->size) memcpy(out + hl, v->data, (size_t)v->size);
    memcpy(out + hl + (v ? (size_t)v->size : 0), tail, tl);
    return n;
}
/* a value around test memory, no release hook */
static tfrdv_value mkv(int32_t dtype, int32_t rank, const int64_t* dims, void* data, uint64_t size) {
    return tfrdv_value_make(dtype, rank, dims, data, size, NULL, NULL);
}
#define MICROS_HEX 0x80, 0x88, 0x91, 0x87, 0x89, 0x87, 0x91, 0x03 /* 1763859600000000 as a varint */
static const int64_t MICROS = 1763859600000000LL;

static void test_golden_float_2x3(void) {
    /* TensorFlow 2.21 fast path, float32 [2,3]: 18 <us> 0a 26 08 01 12 08 12 02 08 02 12 02 08 03 22 18 <24 bytes> */
    unsigned char g[64] = {0x18, MICROS_HEX, 0x0a, 0x26, 0x08, 0x01, 0x12, 0x08, 0x12, 0x02, 0x08, 0x02, 0x12, 0x02, 0x08, 0x03, 0x22, 0x18};
    unsigned char out[128];
    float f[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e10f, -7.0f};
    int64_t dims[2] = {2, 3};
    size_t glen = 9 + 16 + 24;
    tfrdv_value *v = 0, in;
    tfrdv_grpc_response_info info;
    tfrdv_status st;
    memcpy(g + 25, f, 24);
    TT_CHECK_EQ_INT(dec1(g, glen, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->dtype == 1 && v->rank == 2 && v->dims[0] == 2 && v->dims[1] == 3 && v->size == 24);
    TT_CHECK(v && memcmp(v->data, f, 24) == 0);
    TT_CHECK(info.send_start_micros == MICROS && !info.is_dead && !info.require_ack);
    in = mkv(1, 2, dims, f, 24);
    TT_CHECK_EQ_INT(enc(&in, 0, 0, MICROS, out, sizeof out), glen);
    TT_CHECK(memcmp(out, g, glen) == 0);
    tfrdv_value_release(v);
    v = 0;
    TT_CHECK_EQ_INT(dec_split(g, glen, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && memcmp(v->data, f, 24) == 0);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(hval_live, 0);
}
static void test_golden_scalar_string_dead_ack(void) {
    /* scalar: 18 <us> 0a 08 08 01 22 04 <4 bytes> (no shape field) */
    unsigned char sc[] = {0x18, MICROS_HEX, 0x0a, 0x08, 0x08, 0x01, 0x22, 0x04, 0x00, 0x00, 0x28, 0x42};
    /* DT_STRING ["ab","cde"]: tensor first, then 18 <us> */
    unsigned char sg[] = {0x0a, 0x11, 0x08, 0x07, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02, 0x22, 0x07, 0x02, 0x03, 'a', 'b', 'c', 'd', 'e', 0x18, MICROS_HEX};
    /* dead: 10 01 18 <us> 0a 0a 08 01 12 04 12 02 08 00 22 00 */
    unsigned char dd[] = {0x10, 0x01, 0x18, MICROS_HEX, 0x0a, 0x0a, 0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x00, 0x22, 0x00};
    /* require_ack (server cache on): 18 <us> 28 01 0a ... */
    unsigned char ak[] = {0x18, MICROS_HEX, 0x28, 0x01, 0x0a, 0x0d, 0x08, 0x04, 0x12, 0x04, 0x12, 0x02, 0x08, 0x03, 0x22, 0x03, 1, 2, 3};
    unsigned char out[128];
    float fv = 42.0f;
    int64_t d1[1] = {2};
    tfrdv_value *v = 0, in;
    tfrdv_grpc_response_info info;
    tfrdv_status st;
    TT_CHECK_EQ_INT(dec1(sc, sizeof sc, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->dtype == 1 && v->rank == 0 && v->size == 4 && memcmp(v->data, &fv, 4) == 0);
    in = mkv(1, 0, 0, &fv, 4);
    TT_CHECK_EQ_INT(enc(&in, 0, 0, MICROS, out, sizeof out), sizeof sc);
    TT_CHECK(memcmp(out, sc, sizeof sc) == 0);
    tfrdv_value_release(v);
    v = 0;
    TT_CHECK_EQ_INT(dec1(sg, sizeof sg, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->dtype == 7 && v->rank == 1 && v->dims[0] == 2 && v->size == 7 && memcmp(v->data, "\x02\x03" "abcde", 7) == 0);
    TT_CHECK(info.send_start_micros == MICROS);
    in = mkv(7, 1, d1, (void*)"\x02\x03" "abcde", 7);
    TT_CHECK_EQ_INT(enc(&in, 0, 0, MICROS, out, sizeof out), sizeof sg);
    TT_CHECK(memcmp(out, sg, sizeof sg) == 0);
    tfrdv_value_release(v);
    v = 0;
    TT_CHECK_EQ_INT(dec1(dd, sizeof dd, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v == 0 && info.is_dead && info.has_tensor);
    TT_CHECK_EQ_INT(enc(0, 1, 0, MICROS, out, sizeof out), sizeof dd);
    TT_CHECK(memcmp(out, dd, sizeof dd) == 0);
    TT_CHECK_EQ_INT(dec1(ak, sizeof ak, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->dtype == 4 && v->size == 3 && info.require_ack);
    tfrdv_value_release(v);
    {
        int64_t d3[1] = {3};
        unsigned char b3[3] = {1, 2, 3};
        /* int32 of 3 bytes does not match: the encoder refuses (INVALID_ARGUMENT), as the decoder would */
        unsigned char h[128], t[32];
        size_t hl, tl;
        in = mkv(3, 1, d3, b3, 3);
        TT_CHECK_EQ_INT(tfrdv_grpc_encode_response(&in, 0, 0, 1, h, sizeof h, &hl, t, &tl, &st), TFRDV_INVALID_ARGUMENT);
        in = mkv(4, 1, d3, b3, 3);
        TT_CHECK_EQ_INT(enc(&in, 0, 1, MICROS, out, sizeof out), sizeof ak);
        TT_CHECK(memcmp(out, ak, sizeof ak) == 0);
    }
    TT_CHECK_EQ_INT(hval_live, 0);
}
static void test_golden_request_and_status(void) {
    /* TensorFlow's request: 08 <step> 12 <len> key 38 <request id>; a negative id is 10 bytes */
    const char* key = PS_DEV ";00000000000000ab;" WK_DEV ";x;0:0";
    unsigned char buf[256];
    char k[256];
    size_t n = tfrdv_grpc_encode_request(0x123456789LL, key, strlen(key), -2, buf, sizeof buf), kl;
    tfrdv_str s;
    int64_t step, rid;
    tfrdv_status st;
    TT_CHECK_EQ_INT(n, 1 + 5 + 2 + strlen(key) + 1 + 10);
    TT_CHECK(buf[0] == 0x08 && buf[6] == 0x12 && buf[7] == strlen(key) && buf[8 + strlen(key)] == 0x38);
    TT_CHECK(buf[n - 1] == 0x01 && buf[n - 2] == 0xff && buf[n - 10] == 0xfe);
    s.ptr = (const char*)buf;
    s.len = n;
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_request(&s, 1, &step, k, sizeof k, &kl, &rid, &st), TFRDV_OK);
    TT_CHECK(step == 0x123456789LL && rid == -2 && kl == strlen(key) && memcmp(k, key, kl) == 0);
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_request(&s, 1, &step, k, 10, &kl, &rid, &st), TFRDV_INVALID_ARGUMENT);
    s.len = n - 3;
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_request(&s, 1, &step, k, sizeof k, &kl, &rid, &st), TFRDV_DATA_LOSS);
    {
        /* dma_ok (3), client_locality (4) and an unknown field: skipped */
        unsigned char r2[] = {0x18, 0x01, 0x22, 0x02, 0x08, 0x01, 0x08, 0x05, 0x12, 0x01, 'k', 0xf8, 0x01, 0x07, 0x38, 0x09};
        s.ptr = (const char*)r2;
        s.len = sizeof r2;
        TT_CHECK_EQ_INT(tfrdv_grpc_decode_request(&s, 1, &step, k, sizeof k, &kl, &rid, &st), TFRDV_OK);
        TT_CHECK(step == 5 && rid == 9 && kl == 1 && k[0] == 'k');
    }
    {
        /* GetStatus: DeviceAttributes with the incarnation as fixed64 (field 6), xla_global_id -1 */
        tfrdv_grpc_device d[2], o[2];
        size_t nd;
        memset(d, 0, sizeof d);
        strcpy(d[0].name, PS_DEV);
        strcpy(d[0].type, "CPU");
        d[0].incarnation = 0xfedcba9876543210ULL;
        d[0].memory_limit = 268435456;
        strcpy(d[1].name, PS "/device:GPU:0");
        strcpy(d[1].type, "GPU");
        d[1].incarnation = 7;
        n = tfrdv_grpc_encode_status_response(d, 2, buf, sizeof buf);
        TT_CHECK(n > 0 && n < sizeof buf);
        s.ptr = (const char*)buf;
        s.len = n;
        TT_CHECK_EQ_INT(tfrdv_grpc_decode_status_response(&s, 1, o, 2, &nd, &st), TFRDV_OK);
        TT_CHECK(nd == 2 && strcmp(o[0].name, PS_DEV) == 0 && o[0].incarnation == 0xfedcba9876543210ULL &&
                 o[0].memory_limit == 268435456 && strcmp(o[1].type, "GPU") == 0 && o[1].incarnation == 7);
    }
}
/* typed repeated fields (what protobuf's normal serialisation may send) */
static void test_typed_fields(void) {
    tfrdv_value* v = 0;
    tfrdv_grpc_response_info info;
    tfrdv_status st;
    /* float_val packed, shape [3]: 0a <len> 08 01 12 04 12 02 08 03 2a 0c <3 floats> */
    float f3[3] = {1.0f, 2.0f, 3.0f};
    unsigned char a[40] = {0x0a, 0x16, 0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x03, 0x2a, 0x0c};
    /* float_val unpacked single value, shape [4]: broadcast (Tensor::FromProto repeats the last) */
    unsigned char b[] = {0x0a, 0x0d, 0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x04, 0x2d, 0x00, 0x00, 0x80, 0x3f};
    /* int_val for DT_INT8 [3] = {-1, 5, 127} (varints, sign-extended -1 is 10 bytes) */
    unsigned char c[] = {0x0a, 0x16, 0x08, 0x06, 0x12, 0x04, 0x12, 0x02, 0x08, 0x03, 0x3a, 0x0c,
                         0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x05, 0x7f};
    /* bool_val unpacked x2, int64_val packed, half_val, string_val, double_val */
    unsigned char d[] = {0x0a, 0x0c, 0x08, 0x0a, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02, 0x58, 0x01, 0x58, 0x00};
    unsigned char e[] = {0x0a, 0x0d, 0x08, 0x09, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02, 0x52, 0x03, 0x80, 0x01, 0x02};
    unsigned char h[] = {0x0a, 0x0d, 0x08, 0x13, 0x12, 0x04, 0x12, 0x02, 0x08, 0x01, 0x6a, 0x03, 0x80, 0xf8, 0x01};
    unsigned char s[] = {0x0a, 0x11, 0x08, 0x07, 0x12, 0x04, 0x12, 0x02, 0x08, 0x03, 0x42, 0x02, 'h', 'i', 0x42, 0x00, 0x42, 0x01, 'x'};
    unsigned char s2[] = {0x0a, 0x0c, 0x08, 0x07, 0x12, 0x04, 0x12, 0x02, 0x08, 0x03, 0x42, 0x02, 'h', 'i'};
    unsigned char z[] = {0x0a, 0x08, 0x08, 0x03, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02}; /* no values: zeros */
    unsigned char cx[] = {0x0a, 0x12, 0x08, 0x08, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02, 0x4a, 0x08, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40};
    unsigned char dv[] = {0x0a, 0x0b, 0x08, 0x02, 0x31, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}; /* double scalar 1.0, unpacked */
    memcpy(a + 12, f3, 12);
    TT_CHECK_EQ_INT(dec1(a, 24, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 12 && memcmp(v->data, f3, 12) == 0);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(dec1(b, sizeof b, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 16 && ((float*)v->data)[0] == 1.0f && ((float*)v->data)[3] == 1.0f);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(dec1(c, sizeof c, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 3 && ((signed char*)v->data)[0] == -1 && ((signed char*)v->data)[1] == 5 && ((signed char*)v->data)[2] == 127);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(dec1(d, sizeof d, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 2 && ((unsigned char*)v->data)[0] == 1 && ((unsigned char*)v->data)[1] == 0);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(dec1(e, sizeof e, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 16 && ((int64_t*)v->data)[0] == 128 && ((int64_t*)v->data)[1] == 2);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(dec1(h, sizeof h, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 2 && ((unsigned char*)v->data)[0] == 0x00 && ((unsigned char*)v->data)[1] == 0x7c); /* 0x7c00 = +inf */
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(dec1(s, sizeof s, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 6 && memcmp(v->data, "\x02\x00\x01hix", 6) == 0);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(dec1(s2, sizeof s2, &v, &info, &st), TFRDV_OK); /* one string for three elements: repeated */
    TT_CHECK(v && v->size == 9 && memcmp(v->data, "\x02\x02\x02hihihi", 9) == 0);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(dec1(z, sizeof z, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 8 && ((int32_t*)v->data)[0] == 0 && ((int32_t*)v->data)[1] == 0);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(dec1(cx, sizeof cx, &v, &info, &st), TFRDV_OK); /* one complex64 (1+2i) for two elements */
    TT_CHECK(v && v->size == 16 && ((float*)v->data)[0] == 1.0f && ((float*)v->data)[1] == 2.0f && ((float*)v->data)[2] == 1.0f &&
             ((float*)v->data)[3] == 2.0f);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(dec1(dv, sizeof dv, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 8 && ((double*)v->data)[0] == 1.0);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(hval_live, 0);
}
/* any field order, unknown fields, tensor_content before the shape */
static void test_field_order(void) {
    unsigned char m[] = {0x28, 0x01,                               /* require_ack first */
                         0x0a, 0x16, 0x22, 0x04, 9, 8, 7, 6,        /* content first */
                         0x9a, 0x05, 0x01, 0x00,                    /* unknown field 83 (LEN) inside the tensor */
                         0x12, 0x06, 0x12, 0x04, 0x08, 0x04, 0x12, 0x00, /* dim with a name field... */
                         0x18, 0x00, 0x08, 0x04,                    /* version_number, dtype UINT8 last */
                         0x25, 1, 2, 3, 4,                          /* transport-ish unknown fixed32 */
                         0x18, 0x07, 0x30, 0x99, 0x01};             /* micros 7, unknown varint field 6 */
    tfrdv_value* v = 0;
    tfrdv_grpc_response_info info;
    tfrdv_status st;
    TT_CHECK_EQ_INT(dec1(m, sizeof m, &v, &info, &st), TFRDV_OK);
    if (st.code) printf("    %s\n", st.msg);
    TT_CHECK(v && v->dtype == 4 && v->rank == 1 && v->dims[0] == 4 && v->size == 4 && memcmp(v->data, "\x09\x08\x07\x06", 4) == 0);
    TT_CHECK(info.require_ack && info.send_start_micros == 7);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(hval_live, 0);
}
/* malformed, truncated, hostile: a status with a message, never a crash or a huge allocation */
static void test_hostile(void) {
    static const struct { const char* name; unsigned char b[24]; size_t n; tfrdv_code want; } cases[] = {
        {"content length != size x count", {0x0a, 0x0b, 0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02, 0x22, 0x01, 0x00}, 13, TFRDV_INVALID_ARGUMENT},
        {"negative dim", {0x0a, 0x11, 0x08, 0x01, 0x12, 0x0d, 0x12, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 19, TFRDV_INVALID_ARGUMENT},
        {"unknown rank", {0x0a, 0x06, 0x08, 0x01, 0x12, 0x02, 0x18, 0x01}, 8, TFRDV_INVALID_ARGUMENT},
        {"no tensor", {0x18, 0x01}, 2, TFRDV_INVALID_ARGUMENT},
        {"dtype invalid", {0x0a, 0x02, 0x08, 0x00}, 4, TFRDV_INVALID_ARGUMENT},
        {"dtype variant", {0x0a, 0x02, 0x08, 0x15}, 4, TFRDV_INVALID_ARGUMENT},
        {"length past the end", {0x0a, 0x7f, 0x08, 0x01}, 4, TFRDV_DATA_LOSS},
        {"truncated varint", {0x18, 0xff, 0xff}, 3, TFRDV_DATA_LOSS},
        {"overlong varint", {0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 12, TFRDV_INVALID_ARGUMENT},
        {"group wire type", {0x0b, 0x0c}, 2, TFRDV_INVALID_ARGUMENT},
        {"field 0", {0x02, 0x00}, 2, TFRDV_INVALID_ARGUMENT},
        {"tensor twice", {0x0a, 0x02, 0x08, 0x03, 0x0a, 0x02, 0x08, 0x03}, 8, TFRDV_INVALID_ARGUMENT},
        {"huge dims (1 byte of message, 2^62 elements)", {0x0a, 0x0f, 0x08, 0x01, 0x12, 0x0b, 0x12, 0x09, 0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40}, 17, TFRDV_RESOURCE_EXHAUSTED},
        {"broadcast past the limit", {0x0a, 0x10, 0x08, 0x01, 0x12, 0x07, 0x12, 0x05, 0x08, 0x80, 0x80, 0x80, 0x01, 0x2d, 0, 0, 0, 0}, 18, TFRDV_RESOURCE_EXHAUSTED},
        {"more typed values than elements", {0x0a, 0x0c, 0x08, 0x03, 0x12, 0x04, 0x12, 0x02, 0x08, 0x01, 0x3a, 0x02, 0x01, 0x02}, 14, TFRDV_INVALID_ARGUMENT},
        {"packed float not a multiple of 4", {0x0a, 0x0b, 0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x01, 0x2a, 0x01, 0x00}, 13, TFRDV_INVALID_ARGUMENT},
        {"string content not varint-framed", {0x0a, 0x0c, 0x08, 0x07, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02, 0x22, 0x02, 0x05, 0x00}, 14, TFRDV_INVALID_ARGUMENT},
        {"dtype as a string", {0x0a, 0x03, 0x0a, 0x01, 0x01}, 5, TFRDV_INVALID_ARGUMENT},
        {"dims 2^40 x 2^40 (element count overflows)", {0x0a, 0x16, 0x08, 0x01, 0x12, 0x12, 0x12, 0x07, 0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20,
                                                        0x12, 0x07, 0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20}, 24, TFRDV_INVALID_ARGUMENT},
        {"shape longer than its tensor", {0x0a, 0x06, 0x08, 0x01, 0x12, 0x09, 0x12, 0x02}, 8, TFRDV_DATA_LOSS},
        {"dim longer than its shape", {0x0a, 0x06, 0x08, 0x01, 0x12, 0x02, 0x12, 0x05}, 8, TFRDV_DATA_LOSS},
        {"dtype 999", {0x0a, 0x03, 0x08, 0xe7, 0x07}, 5, TFRDV_INVALID_ARGUMENT},
        {"dtype -1 (10-byte varint)", {0x0a, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 13, TFRDV_INVALID_ARGUMENT},
        {"content shorter than its dims", {0x0a, 0x0e, 0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x04, 0x22, 0x04, 0, 0, 0, 0}, 16, TFRDV_INVALID_ARGUMENT},
        {"content length past the end", {0x0a, 0x0c, 0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x01, 0x22, 0x04, 0, 0}, 14, TFRDV_DATA_LOSS},
    };
    size_t i, cut;
    tfrdv_value* v;
    tfrdv_grpc_response_info info;
    tfrdv_status st;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfrdv_code c;
        v = 0;
        c = dec1(cases[i].b, cases[i].n, &v, &info, &st);
        if (c != cases[i].want) printf("    %s: got %s (%s)\n", cases[i].name, tfrdv_code_str(c), st.msg);
        TT_CHECK(c == cases[i].want && v == 0 && st.msg[0] != 0);
    }
    {
        /* rank 255 */
        unsigned char m[8 + 255 * 4];
        size_t n = 0, k;
        m[n++] = 0x0a;
        m[n++] = 0;
        m[n++] = 0;
        m[n++] = 0x08;
        m[n++] = 0x01;
        m[n++] = 0x12;
        m[n++] = 0xfc; /* 255 * 4 = 1020 = 0xfc 0x07 */
        m[n++] = 0x07;
        for (k = 0; k < 255; k++) { m[n++] = 0x12; m[n++] = 0x02; m[n++] = 0x08; m[n++] = 0x01; }
        m[1] = (unsigned char)(0x80 | ((n - 3) & 0x7f));
        m[2] = (unsigned char)((n - 3) >> 7);
        v = 0;
        TT_CHECK_EQ_INT(dec1(m, n, &v, &info, &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, "more than 254");
    }
    {
        /* every truncation of a valid message: an error (not OK with garbage), never a crash */
        unsigned char g[64] = {0x18, MICROS_HEX, 0x0a, 0x26, 0x08, 0x01, 0x12, 0x08, 0x12, 0x02, 0x08, 0x02, 0x12, 0x02, 0x08, 0x03, 0x22, 0x18};
        int bad = 0;
        for (cut = 1; cut < 49; cut++) {
            tfrdv_code c;
            v = 0;
            c = dec1(g, cut, &v, &info, &st);
            if (c == TFRDV_OK) tfrdv_value_release(v);
            if (cut >= 9 && c != TFRDV_DATA_LOSS && c != TFRDV_INVALID_ARGUMENT) bad++;
        }
        TT_CHECK_EQ_INT(bad, 0);
    }
    {
        /* random garbage and bit flips of a valid message */
        uint64_t x = 88172645463325252ULL;
        unsigned char m[64];
        int round, j;
        for (round = 0; round < 20000; round++) {
            unsigned char g[50] = {0x18, MICROS_HEX, 0x0a, 0x26, 0x08, 0x01, 0x12, 0x08, 0x12, 0x02, 0x08, 0x02, 0x12, 0x02, 0x08, 0x03, 0x22, 0x18};
            size_t n = 50;
            for (j = 0; j < 3; j++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                if (round & 1) g[x % 50] = (unsigned char)(x >> 32);
                else m[j] = 0;
            }
            if (!(round & 1)) {
                n = (size_t)(x % 64);
                for (j = 0; j < (int)n; j++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; m[j] = (unsigned char)x; }
                memcpy(g, m, n < 50 ? n : 50);
                if (n > 50) n = 50;
            }
            v = 0;
            if (dec_split(g, n, &v, &info, &st) == TFRDV_OK) tfrdv_value_release(v);
        }
    }
    TT_CHECK_EQ_INT(hval_live, 0);
}
/* NULL where the codec needs memory: a clear status (or 0), never a crash; NULL outputs that
   are only wanted sometimes are skipped */
static void test_codec_null_arguments(void) {
    static const char req[] = "\x08\x05\x12\x03key\x38\x09"; /* step 5, "key", request 9 */
    tfrdv_str s, holes[2];
    tfrdv_status st;
    tfrdv_value* v = (tfrdv_value*)&st; /* must be reset to NULL */
    tfrdv_grpc_device d[1];
    unsigned char head[256], tail[64];
    size_t hl, tl, n = 7;
    int64_t step = 0;
    s.ptr = req;
    s.len = sizeof req - 1;
    holes[0] = s;
    holes[1].ptr = 0;
    holes[1].len = 4;
    TT_CHECK_EQ_INT(tfrdv_grpc_encode_request(5, NULL, 3, 9, head, sizeof head), 0);
    TT_CHECK_EQ_INT(tfrdv_grpc_encode_request(5, "key", 3, 9, NULL, 100), 9); /* sizing */
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_request(NULL, 1, &step, 0, 0, &n, 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "NULL segments");
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_request(holes, 2, &step, 0, 0, &n, 0, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "segment 1 has 4 bytes and a NULL pointer");
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_request(&s, 1, &step, 0, 0, NULL, NULL, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(step, 5);
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_request(&s, 1, NULL, 0, 0, &n, NULL, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(n, 3);
    TT_CHECK_EQ_INT(tfrdv_grpc_request_marked(NULL, 2), 0);
    TT_CHECK_EQ_INT(tfrdv_grpc_encode_response(NULL, 1, 0, 0, NULL, sizeof head, &hl, tail, &tl, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "NULL head");
    TT_CHECK_EQ_INT(tfrdv_grpc_encode_response(NULL, 1, 0, 0, head, sizeof head, &hl, tail, NULL, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "NULL tail_len");
    TT_CHECK_EQ_INT(tfrdv_grpc_encode_response(NULL, 1, 0, 0, head, sizeof head, &hl, tail, &tl, &st), TFRDV_OK);
    s.ptr = (const char*)head;
    s.len = hl;
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_response(&s, 1, 0, NULL, 0, &v, NULL, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "NULL alloc");
    TT_CHECK(v == NULL);
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_response(&s, 1, 0, hval_alloc, 0, NULL, NULL, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "NULL value");
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_response(NULL, 3, 0, hval_alloc, 0, &v, NULL, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "NULL segments");
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_response(&s, 1, 0, hval_alloc, 0, &v, NULL, &st), TFRDV_OK); /* dead, no info wanted */
    TT_CHECK(v == NULL);
    TT_CHECK_EQ_INT(tfrdv_grpc_encode_status_response(NULL, 2, head, sizeof head), 0);
    memset(d, 0, sizeof d);
    strcpy(d[0].name, "/job:w/replica:0/task:0/device:CPU:0");
    strcpy(d[0].type, "CPU");
    hl = tfrdv_grpc_encode_status_response(d, 1, head, sizeof head);
    TT_CHECK(hl > 0 && hl <= sizeof head);
    s.len = hl;
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_status_response(&s, 1, NULL, 5, &n, &st), TFRDV_OK); /* counted only */
    TT_CHECK_EQ_INT(n, 1);
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_status_response(&s, 1, d, 1, NULL, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_grpc_decode_status_response(NULL, 1, d, 1, &n, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "GetStatusResponse: NULL segments");
}
/* every dtype the codec carries: encode -> decode round trip, split into 1-byte segments */
static void test_roundtrip_dtypes(void) {
    int32_t dt;
    unsigned char data[64], out[512];
    int64_t dims[3] = {2, 1, 2};
    for (dt = 1; dt <= 32; dt++) {
        uint32_t es = tfrdv_grpc_dtype_size(dt);
        tfrdv_value in, *v = 0;
        tfrdv_grpc_response_info info;
        tfrdv_status st;
        size_t n, i;
        if (!es) continue;
        for (i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 37 + (size_t)dt);
        in = mkv(dt, 3, dims, data, 4u * es);
        n = enc(&in, 0, 0, 99, out, sizeof out);
        TT_CHECK(n > 0);
        TT_CHECK_EQ_INT(dec_split(out, n, &v, &info, &st), TFRDV_OK);
        TT_CHECK(v && v->dtype == dt && v->rank == 3 && v->dims[2] == 2 && v->size == 4u * es && memcmp(v->data, data, 4u * es) == 0);
        tfrdv_value_release(v);
    }
    TT_CHECK_EQ_INT(tfrdv_grpc_dtype_size(21), 0);
    TT_CHECK_EQ_INT(tfrdv_grpc_dtype_size(18), 16);
    TT_CHECK_EQ_INT(hval_live, 0);
}

/* grpc-status-details-bin is parsed, not searched: only the exact type URL as a
   GrpcPayloadContainer key (TensorFlow) or a google.rpc.Status Any type_url, in a well-formed
   payload, says the worker restarted (before, the name anywhere in the bytes did) */
#define RESTARTED_URL "type.googleapis.com/tensorflow.distributed_runtime.WorkerPossiblyRestarted"
static size_t pb_lenfield(unsigned char* p, int field, const void* data, size_t len) { /* len < 128 */
    p[0] = (unsigned char)(field << 3 | 2);
    p[1] = (unsigned char)len;
    if (len) memcpy(p + 2, data, len);
    return 2 + len;
}
static void test_status_details(void) {
    static const char tf_payload[] = "\x0a\x4e\x0a\x4a" RESTARTED_URL "\x12\x00"; /* TensorFlow's bytes */
    static const char url[] = RESTARTED_URL;
    unsigned char any[200], p[300];
    size_t n, an, i;
    TT_CHECK_EQ_INT(sizeof tf_payload - 1, 80);
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(tf_payload, 80), 1);
    /* google.rpc.Status {1: 10, 2: "m", 3: Any {1: url, 2: ""}} */
    an = pb_lenfield(any, 1, url, sizeof url - 1);
    an += pb_lenfield(any + an, 2, "", 0);
    n = 0;
    p[n++] = 0x08;
    p[n++] = 10;
    n += pb_lenfield(p + n, 2, "m", 1);
    n += pb_lenfield(p + n, 3, any, an);
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, n), 1);
    /* every truncation of both: malformed, not restarted */
    for (i = 0; i < 80; i++) TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(tf_payload, i), 0);
    for (i = 0; i < n; i++) TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, i), 0);
    /* the name inside the message, inside Any.value, as a bare field, without the prefix */
    n = pb_lenfield(p, 2, url, sizeof url - 1);
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, n), 0);
    an = pb_lenfield(any, 1, "type.googleapis.com/x", 21);
    an += pb_lenfield(any + an, 2, url, sizeof url - 1);
    n = pb_lenfield(p, 3, any, an);
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, n), 0);
    n = pb_lenfield(p, 5, url, sizeof url - 1);
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, n), 0);
    an = pb_lenfield(any, 1, url + 20, sizeof url - 21); /* "tensorflow.distributed_runtime...." */
    n = pb_lenfield(p, 1, any, an);
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, n), 0);
    an = pb_lenfield(any, 1, url, sizeof url - 2); /* one byte short */
    n = pb_lenfield(p, 1, any, an);
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, n), 0);
    an = pb_lenfield(any, 2, url, sizeof url - 1); /* the URL as the map value */
    n = pb_lenfield(p, 1, any, an);
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, n), 0);
    /* the URL right, then a malformed tail: a truncated varint, a length past the end, tag 0 */
    memcpy(p, tf_payload, 80);
    p[80] = 0x08;
    p[81] = 0xff;
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, 82), 0);
    p[80] = 0x12;
    p[81] = 0x7f;
    p[82] = 'x';
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, 83), 0);
    p[80] = 0x00;
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, 81), 0);
    memset(p, 0xff, 11); /* an overlong varint tag */
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(p, 11), 0);
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted(0, 5), 0);
    TT_CHECK_EQ_INT(tfrdv_grpc_details_restarted("", 0), 0);
}
/* ============================================================================================
   Part 2: two processes. The serving worker is this binary with --serve, driven over pipes.
   ============================================================================================ */
enum { C_SEND = 1, C_CLEANUP, C_STATS, C_QUIT, C_INIT, C_PENDING };
typedef struct cmd {
    int op;
    int64_t step;
    char edge[600];
    int32_t dtype, rank;
    int64_t dims[4];
    int dead;
    uint32_t seed;
} cmd;
typedef struct reply {
    int code;
    int port;
    uint64_t v[11];
} reply;
enum { F_ACK = 1, F_POLL = 2, F_TLS = 4, F_MTLS = 8, F_SMALL = 16 };

/* deterministic payloads, regenerated by the receiver */
static void fill(unsigned char* p, uint64_t n, uint32_t seed) {
    uint64_t i;
    for (i = 0; i < n; i++) p[i] = (unsigned char)(seed * 31u + (uint32_t)i * 7u + (uint32_t)(i >> 9));
}
static uint64_t nelem(int32_t rank, const int64_t* dims) {
    uint64_t n = 1;
    int i;
    for (i = 0; i < rank; i++) n *= (uint64_t)dims[i];
    return n;
}
/* DT_STRING content of n strings: element j is (j % 5) letters */
static uint64_t strings(unsigned char* p, uint64_t n, uint32_t seed) {
    uint64_t j, k, pos = n;
    for (j = 0; j < n; j++) if (p) p[j] = (unsigned char)(j % 5);
    for (j = 0; j < n; j++)
        for (k = 0; k < j % 5; k++) { if (p) p[pos] = (unsigned char)('a' + (seed + j + k) % 26); pos++; }
    return pos;
}
static uint64_t payload_size(const cmd* c) {
    uint64_t n = nelem(c->rank, c->dims);
    return c->dtype == 7 ? strings(0, n, c->seed) : n * tfrdv_grpc_dtype_size(c->dtype);
}
typedef struct big { tfrdv_value v; int64_t dims[4]; } big;
static void big_release(tfrdv_value* v) { free(v); }
static tfrdv_value* make_value(const cmd* c) {
    uint64_t size = payload_size(c);
    big* b = (big*)malloc(sizeof *b + (size_t)size);
    if (!b) return 0;
    memset(b, 0, sizeof *b);
    memcpy(b->dims, c->dims, sizeof b->dims);
    b->v.dtype = c->dtype;
    b->v.rank = c->rank;
    b->v.dims = b->dims;
    b->v.data = b + 1;
    b->v.size = size;
    b->v.release = big_release;
    if (c->dtype == 7) strings((unsigned char*)(b + 1), nelem(c->rank, c->dims), c->seed);
    else fill((unsigned char*)(b + 1), size, c->seed);
    return &b->v;
}
static int check_value(const cmd* c, const tfrdv_value* v) {
    uint64_t size = payload_size(c);
    unsigned char* want;
    int ok, i;
    if (!v || v->dtype != c->dtype || v->rank != c->rank || v->size != size) return 0;
    for (i = 0; i < c->rank; i++) if (v->dims[i] != c->dims[i]) return 0;
    want = (unsigned char*)malloc((size_t)size + 1);
    if (!want) return 0;
    if (c->dtype == 7) strings(want, nelem(c->rank, c->dims), c->seed);
    else fill(want, size, c->seed);
    ok = memcmp(want, v->data, (size_t)size) == 0;
    free(want);
    return ok;
}
static int make_key(uint64_t inc, const char* edge, char* buf, size_t cap, tfrdv_parsed_key* pk) {
    static char kbuf[1024]; /* long keys (tests of the 256-byte inline buffer) */
    if (strlen(edge) > 150) { buf = kbuf; cap = sizeof kbuf; }
    size_t len;
    tfrdv_frame_iter top = {0, 0};
    return tfrdv_key_create(PS_DEV, inc, WK_DEV, edge, top, buf, cap, &len, 0) == TFRDV_OK &&
           tfrdv_key_parse(buf, len, pk, 0) == TFRDV_OK;
}

static int read_full(int fd, void* p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char*)p + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    return 1;
}
static int write_full(int fd, const void* p, size_t n) {
    size_t put = 0;
    while (put < n) {
        ssize_t r = write(fd, (const char*)p + put, n - put);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        put += (size_t)r;
    }
    return 1;
}
static char* slurp(const char* path) {
    FILE* f = fopen(path, "rb");
    long n;
    char* s;
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    s = (char*)malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = 0; }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* ---- the serving worker (child process) ---- */
static int srv_poll_stop;
static void* srv_poller(void* arg) {
    while (!__atomic_load_n(&srv_poll_stop, __ATOMIC_ACQUIRE)) tfrdv_grpc_poll((tfrdv_grpc*)arg, 50000000);
    return 0;
}
static void count_pending(void* u, int64_t step, tfrdv_pending_kind kind, const char* key, size_t key_len, size_t count) {
    uint64_t* v = (uint64_t*)u;
    (void)step;
    (void)key;
    (void)key_len;
    if (kind == TFRDV_PENDING_SEND) v[0] += count;
    if (kind == TFRDV_PENDING_RECV) v[1] += count;
}
static int serve_main(int in, int out, int port, uint64_t inc, int flags) {
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_grpc* g;
    tfrdv_mgr* mgr;
    tfrdv_status st;
    char addr[64];
    reply r;
    cmd c;
    pthread_t poller;
    char *key = 0, *cert = 0, *ca = 0;
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    gc.listen_address = addr;
    gc.num_threads = (flags & F_POLL) ? -1 : 2;
    gc.recv_tensor_queue_depth = 64;
    /* a reply sent with less than this left may reach a client that gave up (its deadline fired
       while the reply was in transit): then the client drops it. Under TSan on a loaded 2-CPU
       machine a request takes tens of ms to arrive, so the server's view of a deadline is that
       much later than the client's: 100 ms keeps test_deadline_then_send's "0 lost" exact */
    gc.serve_deadline_margin_ns = 100000000;
    gc.require_ack = (flags & F_ACK) != 0;
    if (flags & F_SMALL) gc.max_message_bytes = 1000; /* stands in for gRPC's 2 GiB limit */
    if (flags & (F_TLS | F_MTLS)) {
        const char* dir = getenv("TFRDV_TEST_CERTS");
        char p[512];
        snprintf(p, sizeof p, "%s/server.key", dir); key = slurp(p);
        snprintf(p, sizeof p, "%s/server.crt", dir); cert = slurp(p);
        snprintf(p, sizeof p, "%s/ca.crt", dir); ca = slurp(p);
        gc.pem_private_key = key;
        gc.pem_cert_chain = cert;
        gc.pem_root_certs = ca;
        gc.require_client_cert = (flags & F_MTLS) != 0;
    }
    memset(&r, 0, sizeof r);
    if (tfrdv_grpc_create(&gc, &g, &st) != TFRDV_OK) { fprintf(stderr, "serve: %s\n", st.msg); return 1; }
    mc.worker_name = PS;
    mc.incarnation = inc;
    mc.transport = tfrdv_grpc_transport(g);
    mc.response_cache = (flags & F_ACK) != 0;
    mc.deferred_timeout_ns = 30000000000LL;
    if (tfrdv_mgr_create(&mc, &mgr, &st) != TFRDV_OK || tfrdv_grpc_attach(g, mgr, &st) != TFRDV_OK) {
        fprintf(stderr, "serve: %s\n", st.msg);
        return 1;
    }
    free(key); free(cert); free(ca);
    if (flags & F_POLL) pthread_create(&poller, 0, srv_poller, g);
    r.port = tfrdv_grpc_port(g);
    write_full(out, &r, sizeof r);
    while (read_full(in, &c, sizeof c)) {
        memset(&r, 0, sizeof r);
        r.port = tfrdv_grpc_port(g);
        if (c.op == C_QUIT) break;
        if (c.op == C_SEND || c.op == C_INIT) {
            tfrdv_rendezvous* rz;
            if (tfrdv_mgr_find(mgr, c.step, &rz, &st) != TFRDV_OK || tfrdv_mgr_initialize(rz, 0, &st) != TFRDV_OK) {
                r.code = (int)st.code;
            } else {
                if (c.op == C_SEND) {
                    char kb[256];
                    tfrdv_parsed_key pk;
                    tfrdv_value* v = c.dead ? 0 : make_value(&c);
                    if (!make_key(inc, c.edge, kb, sizeof kb, &pk) || (!c.dead && !v)) r.code = TFRDV_INTERNAL;
                    else if ((r.code = (int)tfrdv_send(rz, &pk, 0, v, c.dead, &st)) != TFRDV_OK) tfrdv_value_release(v);
                }
                tfrdv_unref(rz);
            }
        } else if (c.op == C_PENDING) { /* v[0]: values buffered in the step, v[1]: receivers waiting */
            tfrdv_rendezvous* rz;
            if (tfrdv_mgr_find(mgr, c.step, &rz, &st) != TFRDV_OK) {
                r.code = (int)st.code;
            } else {
                tfrdv_pending(rz, count_pending, r.v);
                tfrdv_unref(rz);
            }
        } else if (c.op == C_CLEANUP) {
            tfrdv_mgr_cleanup(mgr, c.step);
        } else if (c.op == C_STATS) {
            tfrdv_grpc_stats s;
            tfrdv_mgr_stats ms;
            tfrdv_grpc_get_stats(g, &s);
            tfrdv_mgr_get_stats(mgr, &ms);
            r.v[0] = s.serve_cancelled;
            r.v[1] = s.server_calls_live;
            r.v[2] = s.served;
            r.v[3] = s.serve_ok;
            r.v[4] = ms.duplicate_requests;
            r.v[5] = s.unimplemented;
            r.v[6] = s.bytes_sent;
            r.v[7] = ms.cache_hits;
            r.v[8] = s.acks_received; /* MarkRecvFinished calls */
            r.v[9] = s.receipts_returned;
            r.v[10] = s.receipts_unmatched;
        }
        write_full(out, &r, sizeof r);
    }
    if (flags & F_POLL) {
        __atomic_store_n(&srv_poll_stop, 1, __ATOMIC_RELEASE);
        pthread_join(poller, 0);
    }
    tfrdv_grpc_destroy(g);
    tfrdv_mgr_destroy(mgr);
    return 0;
}

/* ---- the parent: client worker ---- */
static char self_exe[1024];
typedef struct server { pid_t pid; int to, from, port; uint64_t inc; } server;
static int spawn(server* s, int port, uint64_t inc, int flags) {
    int a[2], b[2];
    char fa[16], fb[16], fp[16], fi[32], ff[16];
    reply r;
    if (pipe(a) || pipe(b)) return 0;
    snprintf(fa, sizeof fa, "%d", a[0]);
    snprintf(fb, sizeof fb, "%d", b[1]);
    snprintf(fp, sizeof fp, "%d", port);
    snprintf(fi, sizeof fi, "%llu", (unsigned long long)inc);
    snprintf(ff, sizeof ff, "%d", flags);
    s->pid = fork();
    if (s->pid == 0) {
        close(a[1]);
        close(b[0]);
        execl(self_exe, self_exe, "--serve", fa, fb, fp, fi, ff, (char*)0);
        _exit(127);
    }
    close(a[0]);
    close(b[1]);
    s->to = a[1];
    s->from = b[0];
    s->inc = inc;
    if (s->pid < 0 || !read_full(s->from, &r, sizeof r)) return 0;
    s->port = r.port;
    return r.port > 0;
}
static reply srv_cmd(server* s, const cmd* c) {
    reply r;
    memset(&r, 0, sizeof r);
    r.code = -1;
    if (!write_full(s->to, c, sizeof *c) || !read_full(s->from, &r, sizeof r)) r.code = -1;
    return r;
}
static int srv_send(server* s, int64_t step, const char* edge, int32_t dtype, int32_t rank, const int64_t* dims, int dead, uint32_t seed) {
    cmd c;
    memset(&c, 0, sizeof c);
    c.op = C_SEND;
    c.step = step;
    snprintf(c.edge, sizeof c.edge, "%s", edge);
    c.dtype = dtype;
    c.rank = rank;
    if (rank) memcpy(c.dims, dims, (size_t)rank * sizeof *dims);
    c.dead = dead;
    c.seed = seed;
    return srv_cmd(s, &c).code;
}
static reply srv_simple(server* s, int op, int64_t step) {
    cmd c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.step = step;
    return srv_cmd(s, &c);
}
static void srv_stop(server* s) {
    cmd c;
    int status = 0;
    memset(&c, 0, sizeof c);
    c.op = C_QUIT;
    write_full(s->to, &c, sizeof c);
    waitpid(s->pid, &status, 0);
    TT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(s->to);
    close(s->from);
}

/* receive recorders */
typedef struct fres {
    int done;
    tfrdv_status st;
    tfrdv_value* v;
    int dead;
} fres;
static pthread_mutex_t fmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fcv = PTHREAD_COND_INITIALIZER;
static void on_recv(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    fres* r = (fres*)u;
    (void)sa;
    (void)ra;
    pthread_mutex_lock(&fmu);
    r->st = *st;
    r->v = v;
    r->dead = dead;
    r->done++;
    pthread_cond_broadcast(&fcv);
    pthread_mutex_unlock(&fmu);
}
static int fwait(fres* r, int ms) {
    int64_t until = now_ms() + ms;
    int d;
    pthread_mutex_lock(&fmu);
    while (!r->done && now_ms() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20000000;
        if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
        pthread_cond_timedwait(&fcv, &fmu, &ts);
    }
    d = r->done;
    pthread_mutex_unlock(&fmu);
    return d;
}
static void fres_clear(fres* r) {
    tfrdv_value_release(r->v);
    memset(r, 0, sizeof *r);
}

/* the client world: one tfrdv_grpc, one manager ("/job:worker/...") */
typedef struct client { tfrdv_grpc* g; tfrdv_mgr* m; } client;
/* gc (its worker table filled in here) and a manager with call_timeout_ns; attached or not */
static int client_up_with(client* c, const server* s, tfrdv_grpc_config gc, int64_t call_timeout_ns, int attach) {
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_status st;
    char addr[64];
    tfrdv_grpc_worker w;
    snprintf(addr, sizeof addr, "127.0.0.1:%d", s->port);
    w.name = PS;
    w.address = addr;
    gc.workers = &w;
    gc.num_workers = 1;
    if (tfrdv_grpc_create(&gc, &c->g, &st) != TFRDV_OK) { printf("    %s\n", st.msg); return 0; }
    mc.worker_name = WK;
    mc.transport = tfrdv_grpc_transport(c->g);
    mc.call_timeout_ns = call_timeout_ns;
    if (tfrdv_mgr_create(&mc, &c->m, &st) != TFRDV_OK) { printf("    %s\n", st.msg); return 0; }
    return !attach || tfrdv_grpc_attach(c->g, c->m, &st) == TFRDV_OK;
}
static int client_up(client* c, const server* s, int64_t call_timeout_ns, int threads) {
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    gc.num_threads = threads;
    return client_up_with(c, s, gc, call_timeout_ns, 1);
}
static void client_down(client* c) {
    tfrdv_grpc_destroy(c->g);
    tfrdv_mgr_destroy(c->m);
}
static int fetch(client* c, int64_t step, uint64_t inc, const char* edge, const tfrdv_args* args, fres* r) {
    tfrdv_rendezvous* rz;
    tfrdv_parsed_key pk;
    char kb[256];
    tfrdv_code code;
    memset(r, 0, sizeof *r);
    if (!make_key(inc, edge, kb, sizeof kb, &pk)) return 0;
    if (tfrdv_mgr_find(c->m, step, &rz, 0) != TFRDV_OK) return 0;
    tfrdv_mgr_initialize(rz, 0, 0);
    code = tfrdv_recv_async(rz, &pk, args, on_recv, r, 0);
    tfrdv_unref(rz);
    return code == TFRDV_OK;
}

static server S; /* the serving worker of most tests */
static client C;
static int64_t next_step = 100;

static void test_get_status(void) {
    tfrdv_grpc_device d[4];
    size_t n = 0;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_grpc_peer_devices(C.g, PS, 5000000000LL, d, 4, &n, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(n, 1);
    TT_CHECK_STR(d[0].name, PS_DEV);
    TT_CHECK_STR(d[0].type, "CPU");
    TT_CHECK(d[0].incarnation == S.inc);
    TT_CHECK_EQ_INT(tfrdv_grpc_peer_devices(C.g, "/job:nobody/replica:0/task:0", 1000000000LL, d, 4, &n, &st), TFRDV_NOT_FOUND);
    TT_CHECK(strstr(st.msg, "/job:nobody/replica:0/task:0") != 0);
}
/* many dtypes and shapes: 0-d, empty, 1 byte ... 1 MiB (64 MiB in test_big) */
static void test_dtypes_shapes(void) {
    static const struct { int32_t dtype, rank; int64_t dims[4]; } t[] = {
        {1, 0, {0}}, {1, 1, {0}}, {4, 1, {1}}, {1, 2, {2, 3}}, {2, 1, {5}}, {3, 4, {2, 1, 3, 1}}, {5, 1, {7}}, {6, 2, {3, 3}},
        {8, 1, {4}}, {9, 1, {9}}, {10, 1, {11}}, {14, 1, {6}}, {17, 1, {3}}, {18, 1, {2}}, {19, 2, {4, 4}}, {22, 1, {3}},
        {23, 1, {2}}, {24, 1, {5}}, {4, 1, {1024}}, {4, 1, {1025}}, {1, 2, {256, 1024}}, {7, 1, {5}}, {7, 0, {0}}, {7, 1, {0}},
        {1, 3, {4, 0, 4}}, {4, 1, {4096}},
    };
    size_t i, n = sizeof t / sizeof t[0];
    fres r[sizeof t / sizeof t[0]];
    int64_t step = next_step++;
    for (i = 0; i < n; i++) {
        char edge[32];
        snprintf(edge, sizeof edge, "t%d", (int)i);
        TT_CHECK_EQ_INT(srv_send(&S, step, edge, t[i].dtype, t[i].rank, t[i].dims, 0, (uint32_t)i), TFRDV_OK);
    }
    for (i = 0; i < n; i++) {
        char edge[32];
        snprintf(edge, sizeof edge, "t%d", (int)i);
        TT_CHECK(fetch(&C, step, S.inc, edge, 0, &r[i]));
    }
    for (i = 0; i < n; i++) {
        cmd c;
        memset(&c, 0, sizeof c);
        c.dtype = t[i].dtype;
        c.rank = t[i].rank;
        memcpy(c.dims, t[i].dims, sizeof c.dims);
        c.seed = (uint32_t)i;
        TT_CHECK(fwait(&r[i], 10000));
        if (r[i].st.code != TFRDV_OK) printf("    t%d: %s %s\n", (int)i, tfrdv_code_str(r[i].st.code), r[i].st.msg);
        TT_CHECK(r[i].st.code == TFRDV_OK && !r[i].dead);
        if (!check_value(&c, r[i].v)) { printf("    t%d (dtype %d rank %d) arrived wrong\n", (int)i, t[i].dtype, t[i].rank); TT_CHECK(0); }
        fres_clear(&r[i]);
    }
    srv_simple(&S, C_CLEANUP, step);
    tfrdv_mgr_cleanup(C.m, step);
}
static void test_big(void) {
    int64_t d1[1] = {64 << 20};
    fres r;
    cmd c;
    int64_t step = next_step++;
    const char* e = getenv("TFRDV_GRPC_BIG");
    if (e && e[0] == '0') TT_SKIP("TFRDV_GRPC_BIG=0");
    TT_CHECK_EQ_INT(srv_send(&S, step, "big", 4, 1, d1, 0, 77), TFRDV_OK);
    TT_CHECK(fetch(&C, step, S.inc, "big", 0, &r));
    TT_CHECK(fwait(&r, 60000));
    memset(&c, 0, sizeof c);
    c.dtype = 4;
    c.rank = 1;
    c.dims[0] = d1[0];
    c.seed = 77;
    TT_CHECK(r.st.code == TFRDV_OK && check_value(&c, r.v));
    fres_clear(&r);
    srv_simple(&S, C_CLEANUP, step);
    tfrdv_mgr_cleanup(C.m, step);
}
static void test_dead(void) {
    fres r;
    int64_t step = next_step++;
    TT_CHECK_EQ_INT(srv_send(&S, step, "dead", 1, 0, 0, 1, 0), TFRDV_OK);
    TT_CHECK(fetch(&C, step, S.inc, "dead", 0, &r));
    TT_CHECK(fwait(&r, 10000));
    TT_CHECK(r.st.code == TFRDV_OK && r.dead == 1 && r.v == 0);
    fres_clear(&r);
    tfrdv_mgr_cleanup(C.m, step);
    srv_simple(&S, C_CLEANUP, step);
}
/* the server's stats once stat i has risen above before->v[i] (10 s at most: under ASan on a
   loaded 2-core machine the server once took over 3 s). v[1] (live calls) is a gauge: a call of
   the previous test may still be live in `before` and end meanwhile, so the baseline follows the
   lowest value seen and is written back (the counters never go below it). */
static reply stats_after(int i, reply* before) {
    int64_t t0 = now_ms();
    reply after;
    for (;;) {
        after = srv_simple(&S, C_STATS, 0);
        if (after.v[i] < before->v[i]) before->v[i] = after.v[i];
        if (after.v[i] > before->v[i] || now_ms() - t0 >= 10000) break;
        sleep_ms(5);
    }
    return after;
}
/* waits until no call is live on the serving worker (10 s at most; a call the client saw
   complete may still be closing there); returns the live count */
static uint64_t srv_quiet(server* s) {
    int64_t t0 = now_ms();
    reply r;
    do {
        r = srv_simple(s, C_STATS, 0);
    } while (r.v[1] > 0 && now_ms() - t0 < 10000 && (sleep_ms(5), 1));
    return r.v[1];
}
/* after a withdrawn request: the value the server sends now reaches the next fetch intact (1-d,
   n elements of dtype, payload from seed) */
static void late_value_is_kept(int64_t step, const char* edge, int32_t dtype, int64_t n, uint32_t seed) {
    fres r;
    cmd want;
    TT_CHECK_EQ_INT(srv_send(&S, step, edge, dtype, 1, &n, 0, seed), TFRDV_OK);
    TT_CHECK(fetch(&C, step, S.inc, edge, 0, &r));
    TT_CHECK(fwait(&r, 5000));
    memset(&want, 0, sizeof want);
    want.dtype = dtype;
    want.rank = 1;
    want.dims[0] = n;
    want.seed = seed;
    TT_CHECK(r.st.code == TFRDV_OK && check_value(&want, r.v));
    fres_clear(&r);
}
/* a free port on 127.0.0.1 (nothing listens on it once this returns) */
static int free_port(void) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr*)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr*)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}
/* an in-process serving worker `name` answering GetStatus with devs (n of them; 0: the default) */
typedef struct local_srv { tfrdv_grpc* g; tfrdv_mgr* m; char addr[64]; } local_srv;
static int local_up(local_srv* l, const char* name, uint64_t inc, const tfrdv_grpc_device* devs, size_t n) {
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_status st;
    gc.listen_address = "127.0.0.1:0";
    gc.devices = devs;
    gc.num_devices = n;
    if (tfrdv_grpc_create(&gc, &l->g, &st) != TFRDV_OK) { printf("    %s\n", st.msg); return 0; }
    mc.worker_name = name;
    mc.incarnation = inc;
    mc.transport = tfrdv_grpc_transport(l->g);
    if (tfrdv_mgr_create(&mc, &l->m, &st) != TFRDV_OK || tfrdv_grpc_attach(l->g, l->m, &st) != TFRDV_OK) {
        printf("    %s\n", st.msg);
        return 0;
    }
    snprintf(l->addr, sizeof l->addr, "127.0.0.1:%d", tfrdv_grpc_port(l->g));
    return 1;
}
static void local_down(local_srv* l) {
    tfrdv_grpc_destroy(l->g);
    tfrdv_mgr_destroy(l->m);
}
typedef struct incwait { tfrdv_mgr* m; const char* worker; tfrdv_code code; uint64_t inc; } incwait;
static void* incwait_main(void* arg) {
    incwait* w = (incwait*)arg;
    w->code = tfrdv_mgr_peer_incarnation(w->m, w->worker, 60000000000LL, &w->inc, 0);
    return 0;
}
/* tfrdv_mgr_peer_incarnation over gRPC (tfrdv_transport.peer_incarnation): GetStatus to the worker
   its table names, the incarnation of its CPU:0 (else its first device); NOT_FOUND, UNAVAILABLE,
   DEADLINE_EXCEEDED and a stale table (FAILED_PRECONDITION), each naming the worker; it waits for
   a worker that comes up later; a host-driven client polls by itself */
static void test_peer_incarnation(void) {
    static const char* gone = "/job:gone/replica:0/task:0";
    static const char* other = "/job:other/replica:0/task:0";
    tfrdv_grpc_device devs[2];
    local_srv l;
    client h;
    uint64_t inc = 0;
    tfrdv_status st;
    char addr[64];
    int port = free_port();
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(C.m, PS, 10000000000LL, &inc, &st), TFRDV_OK);
    TT_CHECK(inc == S.inc);
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(C.m, "/job:nobody/replica:0/task:3", 1000000000LL, &inc, &st), TFRDV_NOT_FOUND);
    TT_CHECK_CONTAINS(st.msg, "/job:nobody/replica:0/task:3");
    /* nothing listens there */
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    TT_CHECK_EQ_INT(tfrdv_grpc_set_worker(C.g, gone, addr, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(C.m, gone, 0, &inc, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, gone);
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(C.m, gone, 300000000LL, &inc, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_CONTAINS(st.msg, gone);
    TT_CHECK(inc == 0);
    /* the address serves another worker: the table is stale */
    snprintf(addr, sizeof addr, "127.0.0.1:%d", S.port);
    TT_CHECK_EQ_INT(tfrdv_grpc_set_worker(C.g, other, addr, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(C.m, other, 5000000000LL, &inc, &st), TFRDV_FAILED_PRECONDITION);
    TT_CHECK_CONTAINS(st.msg, other);
    TT_CHECK_CONTAINS(st.msg, PS_DEV);
    TT_CHECK_EQ_INT(tfrdv_grpc_set_worker(C.g, other, 0, &st), TFRDV_OK);
    /* a worker that comes up while the call waits */
    if (port) { /* a client whose table names PS at that port, and PS started there later */
        incwait w;
        pthread_t th;
        server late;
        client c3;
        late.port = port;
        TT_CHECK(client_up(&c3, &late, 0, 2));
        w.m = c3.m;
        w.worker = PS;
        w.code = TFRDV_UNKNOWN;
        w.inc = 0;
        TT_CHECK_EQ_INT(pthread_create(&th, 0, incwait_main, &w), 0);
        sleep_ms(200);
        TT_CHECK(spawn(&late, port, 0x1a7e1a7eULL, 0));
        pthread_join(th, 0);
        TT_CHECK_EQ_INT(w.code, TFRDV_OK);
        TT_CHECK(w.inc == 0x1a7e1a7eULL);
        srv_stop(&late);
        client_down(&c3);
    }
    TT_CHECK_EQ_INT(tfrdv_grpc_set_worker(C.g, gone, 0, &st), TFRDV_OK);
    /* a worker with several devices: CPU:0's incarnation, wherever it is listed */
    memset(devs, 0, sizeof devs);
    snprintf(devs[0].name, sizeof devs[0].name, "%s/device:GPU:0", other);
    snprintf(devs[0].type, sizeof devs[0].type, "GPU");
    devs[0].incarnation = 111;
    snprintf(devs[1].name, sizeof devs[1].name, "%s/device:CPU:0", other);
    snprintf(devs[1].type, sizeof devs[1].type, "CPU");
    devs[1].incarnation = 222;
    if (local_up(&l, other, 333, devs, 2)) {
        TT_CHECK_EQ_INT(tfrdv_grpc_set_worker(C.g, other, l.addr, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(C.m, other, 5000000000LL, &inc, &st), TFRDV_OK);
        TT_CHECK(inc == 222);
        local_down(&l);
    } else {
        TT_CHECK(0);
    }
    if (local_up(&l, other, 333, devs, 1)) { /* no CPU:0: its first device */
        TT_CHECK_EQ_INT(tfrdv_grpc_set_worker(C.g, other, l.addr, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(C.m, other, 5000000000LL, &inc, &st), TFRDV_OK);
        TT_CHECK(inc == 111);
        local_down(&l);
    } else {
        TT_CHECK(0);
    }
    TT_CHECK_EQ_INT(tfrdv_grpc_set_worker(C.g, other, 0, &st), TFRDV_OK);
    /* host-driven (num_threads -1): the call polls by itself */
    if (client_up(&h, &S, 0, -1)) {
        inc = 0;
        TT_CHECK_EQ_INT(tfrdv_mgr_peer_incarnation(h.m, PS, 10000000000LL, &inc, &st), TFRDV_OK);
        TT_CHECK(inc == S.inc);
        client_down(&h);
    } else {
        TT_CHECK(0);
    }
}
/* tfrdv_grpc_create refuses every bad field with INVALID_ARGUMENT naming it (CONFIG CHECKS);
   tfrdv_grpc_set_worker checks the same way; every address form the docs list is accepted */
static void test_bad_config(void) {
    static const char* good_addr[] = {"10.0.0.7:2222", "ps0:2222", "ps-0.example.com:1", "[::1]:2222", "[fe80::1%eth0]:5",
                                      "dns:///ps0:2222", "dns://8.8.8.8/ps0:2222", "dns:ps0:2222", "ipv4:127.0.0.1:5001",
                                      "ipv4:10.0.0.1:1,10.0.0.2:2", "ipv6:[::1]:5001", "unix:/run/ps0.sock", "unix-abstract:ps0"};
    static const char* bad_addr[] = {"nonsense:::", "", "host", "host:", "host:0", "host:65536", "host:12a", ":5000",
                                     "[::1:5000", "[::1]", "::1:5000", "ho st:1", "host:1\n", "dns:///", "ipv4:1.2.3.4:1,",
                                     "unix:", "h\x01:1"};
    static const char* bad_name[] = {"/job:ps/replica:0", "/job:ps/replica:0/task:0/device:CPU:0", "ps0", "",
                                     "/replica:0/task:0/job:ps", "/job:ps/replica:00/task:0"};
    tfrdv_grpc_config gc;
    tfrdv_grpc* g;
    tfrdv_status st;
    tfrdv_worker w;
    tfrdv_grpc_device dev;
    size_t i;
#define BAD(field, stmt)                                                         \
    do {                                                                         \
        gc = tfrdv_grpc_config_init();                                           \
        stmt;                                                                    \
        g = 0;                                                                   \
        memset(&st, 0, sizeof st);                                               \
        TT_CHECK_EQ_INT(tfrdv_grpc_create(&gc, &g, &st), TFRDV_INVALID_ARGUMENT); \
        TT_CHECK(g == 0);                                                        \
        TT_CHECK_CONTAINS(st.msg, field);                                        \
    } while (0)
    for (i = 0; i < sizeof bad_addr / sizeof *bad_addr; i++) {
        w.name = PS;
        w.address = bad_addr[i];
        BAD("workers[0].address", (gc.workers = &w, gc.num_workers = 1));
        if (strcmp(bad_addr[i], "host:0") != 0) BAD("listen_address", gc.listen_address = bad_addr[i]); /* 0: a free port */
        TT_CHECK_EQ_INT(tfrdv_grpc_set_worker(C.g, PS, bad_addr[i], &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, "address");
    }
    for (i = 0; i < sizeof bad_name / sizeof *bad_name; i++) {
        w.name = bad_name[i];
        w.address = "h:1";
        BAD("workers[0].name", (gc.workers = &w, gc.num_workers = 1));
        TT_CHECK_EQ_INT(tfrdv_grpc_set_worker(C.g, bad_name[i], "h:1", &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, "name");
    }
    w.name = PS;
    w.address = 0;
    BAD("workers[0] has no address", (gc.workers = &w, gc.num_workers = 1));
    w.name = 0;
    w.address = "h:1";
    BAD("workers[0] has no name", (gc.workers = &w, gc.num_workers = 1));
    BAD("num_workers", gc.num_workers = 2);
    BAD("num_devices", gc.num_devices = 1);
    memset(&dev, 0, sizeof dev);
    snprintf(dev.name, sizeof dev.name, "%s", PS);
    BAD("devices[0].name", (gc.devices = &dev, gc.num_devices = 1));
    memset(dev.name, 'x', sizeof dev.name);
    BAD("devices[0].name", (gc.devices = &dev, gc.num_devices = 1));
    BAD("num_threads", gc.num_threads = -2);
    BAD("num_threads", gc.num_threads = 100000);
    BAD("recv_tensor_queue_depth", gc.recv_tensor_queue_depth = -1);
    BAD("recv_tensor_queue_depth", gc.recv_tensor_queue_depth = 1 << 20);
    BAD("max_message_bytes", gc.max_message_bytes = (uint64_t)1 << 31);
    BAD("max_key_len", gc.max_key_len = (size_t)1 << 30);
    BAD("require_ack", gc.require_ack = 2);
    BAD("receipts", gc.receipts = 5);
    BAD("receipt_ttl_ns", gc.receipt_ttl_ns = -1);
    BAD("expire_interval_ns", gc.expire_interval_ns = -5);
    BAD("recv_timeout_ns", gc.recv_timeout_ns = -2);
    BAD("serve_deadline_margin_ns", gc.serve_deadline_margin_ns = -1000);
    BAD("pem_cert_chain", gc.pem_private_key = "k");
    BAD("pem_private_key", gc.pem_cert_chain = "c");
    BAD("require_client_cert", (gc.pem_private_key = "k", gc.pem_cert_chain = "c", gc.require_client_cert = 1));
    BAD("require_client_cert", (gc.pem_root_certs = "ca", gc.require_client_cert = 1));
    BAD("require_client_cert", gc.require_client_cert = 3);
    BAD("ssl_target_name_override", gc.ssl_target_name_override = "ps0");
#undef BAD
    /* what the docs allow is accepted */
    for (i = 0; i < sizeof good_addr / sizeof *good_addr; i++) {
        gc = tfrdv_grpc_config_init();
        w.name = PS;
        w.address = good_addr[i];
        gc.workers = &w;
        gc.num_workers = 1;
        gc.num_threads = -1;
        if (tfrdv_grpc_create(&gc, &g, &st) != TFRDV_OK) {
            printf("    refused %s: %s\n", good_addr[i], st.msg);
            TT_CHECK(0);
        } else {
            tfrdv_grpc_destroy(g);
        }
    }
    gc = tfrdv_grpc_config_init();
    gc.num_threads = -1;
    gc.recv_timeout_ns = TFRDV_OFF;
    gc.serve_deadline_margin_ns = TFRDV_OFF;
    gc.receipts = TFRDV_OFF;
    gc.listen_address = "[::]:0";
    TT_CHECK_EQ_INT(tfrdv_grpc_create(&gc, &g, &st), TFRDV_OK);
    if (st.code == TFRDV_OK) tfrdv_grpc_destroy(g);
}
/* threads of this process named as its main thread is: the ones tfrdv_grpc starts (gRPC's C core
   names each of its own: default-executor, event_engine, grpc_global_timer, ...) */
static int own_threads(void) {
    DIR* d = opendir("/proc/self/task");
    struct dirent* e;
    char path[300], main_comm[64] = "", comm[64];
    int n = 0;
    FILE* f = fopen("/proc/self/comm", "r");
    if (f) {
        if (!fgets(main_comm, sizeof main_comm, f)) main_comm[0] = 0;
        fclose(f);
    }
    while (d && (e = readdir(d)) != 0) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        if (fgets(comm, sizeof comm, f) && strcmp(comm, main_comm) == 0) n++;
        fclose(f);
    }
    if (d) closedir(d);
    return n;
}
/* num_threads as in tfrdv_tcp.h: 0 starts one completion-queue thread, -1 none (the host polls),
   n > 1 n of them; destroy joins them (THREADS AND CALLBACKS) */
static void test_num_threads(void) {
    static const int asked[] = {0, -1, 1, 3};
    static const int started[] = {1, 0, 1, 3};
    tfrdv_grpc_config gc;
    tfrdv_grpc* g;
    tfrdv_status st;
    size_t i;
    int64_t t0;
    int base = own_threads();
    TT_CHECK(base >= 1);
    for (i = 0; i < sizeof asked / sizeof *asked; i++) {
        gc = tfrdv_grpc_config_init();
        gc.num_threads = asked[i];
        TT_CHECK_EQ_INT(tfrdv_grpc_create(&gc, &g, &st), TFRDV_OK);
        if (st.code != TFRDV_OK) continue;
        TT_CHECK_EQ_INT(own_threads() - base, started[i]);
        tfrdv_grpc_destroy(g);
        /* joined; the kernel may list an exited thread a moment longer */
        for (t0 = now_ms(); own_threads() != base && now_ms() - t0 < 5000;) sleep_ms(5);
        TT_CHECK_EQ_INT(own_threads(), base);
    }
}
/* a port another worker serves is busy: the second server fails with a message naming the
   address (gRPC's default SO_REUSEPORT would let it bind too and split the connections) */
static void test_port_in_use(void) {
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    tfrdv_grpc* g;
    tfrdv_mgr* m;
    tfrdv_status st;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", S.port);
    gc.listen_address = addr;
    TT_CHECK_EQ_INT(tfrdv_grpc_create(&gc, &g, &st), TFRDV_OK);
    mc.worker_name = PS;
    mc.transport = tfrdv_grpc_transport(g);
    TT_CHECK_EQ_INT(tfrdv_mgr_create(&mc, &m, &st), TFRDV_OK);
    memset(&st, 0, sizeof st);
    TT_CHECK_EQ_INT(tfrdv_grpc_attach(g, m, &st), TFRDV_UNAVAILABLE);
    TT_CHECK_CONTAINS(st.msg, addr);
    TT_CHECK_EQ_INT(tfrdv_grpc_port(g), 0);
    tfrdv_grpc_destroy(g);
    tfrdv_mgr_destroy(m);
}
/* the call's deadline is on the gRPC call; the server withdraws its request; the value sent
   afterwards is not lost */
static void test_deadline(void) {
    client c2;
    fres r;
    int64_t step = next_step++, t0;
    reply before, after;
    TT_CHECK(client_up(&c2, &S, 300000000LL, 1));
    srv_simple(&S, C_INIT, step);
    before = srv_simple(&S, C_STATS, 0);
    t0 = now_ms();
    TT_CHECK(fetch(&c2, step, S.inc, "late", 0, &r));
    TT_CHECK(fwait(&r, 5000));
    TT_CHECK_EQ_INT(r.st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK(now_ms() - t0 >= 250 && now_ms() - t0 < 3000);
    fres_clear(&r);
    /* the server saw its call cancelled and withdrew the request */
    after = stats_after(0, &before);
    TT_CHECK(after.v[0] > before.v[0]);
    late_value_is_kept(step, "late", 3, 3, 5);
    client_down(&c2);
    tfrdv_mgr_cleanup(C.m, step);
    srv_simple(&S, C_CLEANUP, step);
}
/* issue 20.1: a client fetches with a 300 ms deadline, the fetch times out, the producer sends at
   once. The server withdraws the expired request only when gRPC reports the call closed; a value
   handed to the call before that (its deadline already past, or the client's cancel on the way)
   must go back to the table, not be dropped with the failed reply. 10 rounds of 10 fetches: every
   one of the 100 values stays buffered and then arrives intact (before the fix 9-17 were lost). */
static void test_deadline_then_send(void) {
    enum { ROUNDS = 10, K = 10, N = ROUNDS * K };
    static fres r[N];
    client c2;
    int64_t step = next_step++, d1[1] = {300}; /* 1200 bytes: above 1 KiB, the zero-copy path */
    reply before, after, pend;
    int i, j, timed_out = 0, ok = 0;
    TT_CHECK(client_up(&c2, &S, 300000000LL, 1));
    srv_simple(&S, C_INIT, step);
    before = srv_simple(&S, C_STATS, 0);
    for (i = 0; i < ROUNDS; i++) {
        for (j = i * K; j < (i + 1) * K; j++) {
            char e[16];
            snprintf(e, sizeof e, "dl%d", j);
            TT_CHECK(fetch(&c2, step, S.inc, e, 0, &r[j]));
        }
        for (j = i * K; j < (i + 1) * K; j++) {
            TT_CHECK(fwait(&r[j], 5000));
            if (r[j].st.code == TFRDV_DEADLINE_EXCEEDED) timed_out++;
        }
        for (j = i * K; j < (i + 1) * K; j++) { /* at once */
            char e[16];
            snprintf(e, sizeof e, "dl%d", j);
            TT_CHECK_EQ_INT(srv_send(&S, step, e, 3, 1, d1, 0, (uint32_t)j), TFRDV_OK);
        }
        for (j = i * K; j < (i + 1) * K; j++) fres_clear(&r[j]);
    }
    TT_CHECK_EQ_INT(timed_out, N);
    /* every call's close was handled: no RecvTensor call is live on the server any more */
    TT_CHECK_EQ_INT(srv_quiet(&S), 0);
    after = srv_simple(&S, C_STATS, 0);
    TT_CHECK(after.v[2] >= before.v[2] + N); /* the 100 calls reached it */
    pend = srv_simple(&S, C_PENDING, step);
    printf("    %d of %d values lost\n", N - (int)pend.v[0], N);
    TT_CHECK_EQ_INT(pend.v[0], N);
    TT_CHECK_EQ_INT(pend.v[1], 0);
    if (pend.v[0] == N) { /* all buffered: fetch them (no deadline; none can hang) */
        for (j = 0; j < N; j++) {
            char e[16];
            snprintf(e, sizeof e, "dl%d", j);
            TT_CHECK(fetch(&C, step, S.inc, e, 0, &r[j]));
        }
        for (j = 0; j < N; j++) {
            cmd want;
            memset(&want, 0, sizeof want);
            want.dtype = 3;
            want.rank = 1;
            want.dims[0] = d1[0];
            want.seed = (uint32_t)j;
            if (fwait(&r[j], 10000) && r[j].st.code == TFRDV_OK && check_value(&want, r[j].v)) ok++;
            fres_clear(&r[j]);
        }
        TT_CHECK_EQ_INT(ok, N);
    }
    client_down(&c2);
    tfrdv_mgr_cleanup(C.m, step);
    srv_simple(&S, C_CLEANUP, step);
    srv_quiet(&S);
}
/* a receive without a deadline of its own (call_timeout_ns 0) gets recv_timeout_ns on its gRPC
   call: a server that never answers cannot hold it forever; the message names the field, and
   the server withdraws the request (the value sent later is kept). Negative: no deadline. */
static void test_recv_timeout(void) {
    int mode;
    int64_t step = next_step++;
    TT_CHECK(TFRDV_GRPC_RECV_TIMEOUT_NS > 0);
    srv_simple(&S, C_INIT, step);
    for (mode = 0; mode < 2; mode++) {
        tfrdv_grpc_config gc = tfrdv_grpc_config_init();
        client c2;
        fres r;
        gc.recv_timeout_ns = mode == 0 ? 300000000LL : -1;
        TT_CHECK(client_up_with(&c2, &S, gc, 0, 0));
        TT_CHECK(fetch(&c2, step, S.inc, mode == 0 ? "rt0" : "rt1", 0, &r));
        if (mode == 0) {
            TT_CHECK(fwait(&r, 10000));
            TT_CHECK_EQ_INT(r.st.code, TFRDV_DEADLINE_EXCEEDED);
            TT_CHECK_CONTAINS(r.st.msg, "recv_timeout_ns");
        } else {
            TT_CHECK(!fwait(&r, 600)); /* still waiting */
        }
        client_down(&c2); /* mode 1: destroy cancels the call */
        TT_CHECK(fwait(&r, 5000));
        fres_clear(&r);
    }
    srv_quiet(&S);
    late_value_is_kept(step, "rt0", 3, 3, 8);
    tfrdv_mgr_cleanup(C.m, step);
    srv_simple(&S, C_CLEANUP, step);
}
/* the receiver's cancellation cancels the gRPC call; the value is not lost */
static void test_client_cancel(void) {
    fres r;
    int64_t step = next_step++;
    tfrdv_cancel_mgr* cm;
    tfrdv_args args;
    reply before, after;
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm, 0), TFRDV_OK);
    memset(&args, 0, sizeof args);
    args.cancel = cm;
    srv_simple(&S, C_INIT, step);
    srv_quiet(&S); /* calls of the previous test may still be closing there */
    before = srv_simple(&S, C_STATS, 0);
    TT_CHECK(fetch(&C, step, S.inc, "c", &args, &r));
    after = stats_after(1, &before);
    TT_CHECK(after.v[1] > before.v[1]); /* the request reached the server */
    tfrdv_cancel_start(cm);
    TT_CHECK(fwait(&r, 5000));
    TT_CHECK_EQ_INT(r.st.code, TFRDV_CANCELLED);
    fres_clear(&r);
    after = stats_after(0, &before);
    TT_CHECK(after.v[0] > before.v[0]);
    late_value_is_kept(step, "c", 9, 2, 6);
    tfrdv_cancel_mgr_destroy(cm);
    tfrdv_mgr_cleanup(C.m, step);
    srv_simple(&S, C_CLEANUP, step);
}
/* issue 20.7: receives cancelled at random moments of their life, thousands of times: before the
   receive (never started), in flight (waiting on the server), while the response arrives (the
   value sent just before the cancel, from another thread) and after the finish. Every callback
   runs exactly once, an OK carries the right value, no call is left, no provider double finish.
   Run under ASan and TSan (make grpc-asan, grpc-tsan). */
typedef struct stress_cancel { int64_t at_us; tfrdv_cancel_mgr* cm; } stress_cancel;
typedef struct stress_job { stress_cancel* c; int n; int64_t t0; } stress_job;
static void* stress_canceller(void* arg) {
    stress_job* j = (stress_job*)arg;
    int i;
    for (i = 0; i < j->n; i++) { /* in time order */
        int64_t now = tfrdv_now_ns() / 1000 - j->t0;
        if (j->c[i].at_us > now) {
            struct timespec ts;
            ts.tv_sec = 0;
            ts.tv_nsec = (long)((j->c[i].at_us - now) * 1000);
            nanosleep(&ts, 0);
        }
        tfrdv_cancel_start(j->c[i].cm);
    }
    return 0;
}
static int stress_cmp(const void* a, const void* b) {
    int64_t x = ((const stress_cancel*)a)->at_us, y = ((const stress_cancel*)b)->at_us;
    return x < y ? -1 : x > y;
}
static void test_cancel_stress(void) {
    enum { ROUNDS = 100, B = 50 };
    static fres r[B];
    static tfrdv_cancel_mgr* cm[B];
    static int mode[B];
    static stress_cancel sc[B];
    int64_t step = next_step++, d1[1] = {300};
    uint32_t seed = (uint32_t)tfrdv_now_ns(), rnd;
    int round, i, count[4] = {0, 0, 0, 0}, ok[4] = {0, 0, 0, 0}, cancelled[4] = {0, 0, 0, 0}, once = 0, total = 0;
    tfrdv_mgr_stats ms;
    tfrdv_grpc_stats gs;
    reply pend;
    printf("    seed %u\n", seed);
    rnd = seed;
#define STRESS_RND() (rnd = rnd * 1103515245u + 12345u, (rnd >> 8) & 0xffffu)
    srv_simple(&S, C_INIT, step);
    for (round = 0; round < ROUNDS; round++) {
        stress_job job;
        pthread_t th;
        int nsc = 0;
        for (i = 0; i < B; i++) {
            tfrdv_args args;
            char e[32];
            TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm[i], 0), TFRDV_OK);
            mode[i] = (int)(STRESS_RND() % 4);
            count[mode[i]]++;
            memset(&args, 0, sizeof args);
            args.cancel = cm[i];
            snprintf(e, sizeof e, "x%d_%d", round, i);
            if (mode[i] == 0) tfrdv_cancel_start(cm[i]); /* before the receive */
            if (mode[i] >= 2) TT_CHECK_EQ_INT(srv_send(&S, step, e, 3, 1, d1, 0, (uint32_t)(round * B + i)), TFRDV_OK);
            TT_CHECK(fetch(&C, step, S.inc, e, &args, &r[i]));
            if (mode[i] == 1 || mode[i] == 2) { /* in flight / while the response arrives: 0-2 ms */
                sc[nsc].at_us = (int64_t)(STRESS_RND() % (mode[i] == 1 ? 2000u : 400u));
                sc[nsc++].cm = cm[i];
            }
        }
        qsort(sc, (size_t)nsc, sizeof sc[0], stress_cmp);
        job.c = sc;
        job.n = nsc;
        job.t0 = tfrdv_now_ns() / 1000;
        pthread_create(&th, 0, stress_canceller, &job);
        for (i = 0; i < B; i++) {
            if (mode[i] == 1) continue; /* nothing is sent: only its cancel ends it */
            TT_CHECK(fwait(&r[i], 10000));
            if (mode[i] == 3) tfrdv_cancel_start(cm[i]); /* after the finish */
        }
        pthread_join(th, 0);
        for (i = 0; i < B; i++) {
            cmd want;
            TT_CHECK(fwait(&r[i], 10000));
            memset(&want, 0, sizeof want);
            want.dtype = 3;
            want.rank = 1;
            want.dims[0] = d1[0];
            want.seed = (uint32_t)(round * B + i);
            if (r[i].st.code == TFRDV_OK) {
                ok[mode[i]]++;
                TT_CHECK(check_value(&want, r[i].v));
            } else {
                if (r[i].st.code == TFRDV_CANCELLED) cancelled[mode[i]]++;
                else printf("    mode %d: %s %s\n", mode[i], tfrdv_code_str(r[i].st.code), r[i].st.msg);
                TT_CHECK_EQ_INT(r[i].st.code, TFRDV_CANCELLED);
            }
        }
        for (i = 0; i < B; i++) {
            pthread_mutex_lock(&fmu);
            once += r[i].done == 1;
            pthread_mutex_unlock(&fmu);
            total++;
            fres_clear(&r[i]);
            if (round < ROUNDS - 1) tfrdv_cancel_mgr_destroy(cm[i]);
        }
    }
#undef STRESS_RND
    {
        int64_t t0 = now_ms();
        do { /* the gRPC calls of cancelled receives finish after their callbacks */
            tfrdv_grpc_get_stats(C.g, &gs);
        } while (gs.client_calls_live && now_ms() - t0 < 10000 && (sleep_ms(5), 1));
    }
    /* exactly once: no callback of the last round ran a second time meanwhile */
    for (i = 0; i < B; i++) TT_CHECK_EQ_INT(r[i].done, 0);
    for (i = 0; i < B; i++) tfrdv_cancel_mgr_destroy(cm[i]); /* the last round's */
    TT_CHECK_EQ_INT(once, total);
    TT_CHECK_EQ_INT(gs.client_calls_live, 0);
    tfrdv_mgr_get_stats(C.m, &ms);
    TT_CHECK_EQ_INT(ms.double_finishes, 0);
    TT_CHECK_EQ_INT(ok[0] + ok[1], 0);     /* nothing to receive: only cancels end them */
    TT_CHECK_EQ_INT(cancelled[3], 0);      /* cancelled after the finish: harmless */
    TT_CHECK_EQ_INT(srv_quiet(&S), 0);
    pend = srv_simple(&S, C_PENDING, step);
    printf("    %d receives: before %d (cancelled %d), in flight %d (cancelled %d), response racing %d (ok %d, cancelled %d: "
           "%d values back on the server, %d dropped by the client after it had reported CANCELLED), after finish %d (ok %d)\n",
           total, count[0], cancelled[0], count[1], cancelled[1], count[2], ok[2], cancelled[2], (int)pend.v[0],
           cancelled[2] - (int)pend.v[0], count[3], ok[3]);
    tfrdv_mgr_cleanup(C.m, step);
    srv_simple(&S, C_CLEANUP, step);
}
/* abort and cleanup during a call: on the client (the call is cancelled) and on the server
   (the pending request fails ABORTED "Cleanup") */
static void test_abort_cleanup(void) {
    fres r1, r2, r3;
    int64_t step = next_step++, step2 = next_step++;
    tfrdv_rendezvous* rz;
    srv_simple(&S, C_INIT, step);
    srv_simple(&S, C_INIT, step2);
    TT_CHECK(fetch(&C, step, S.inc, "a1", 0, &r1));
    TT_CHECK(fetch(&C, step, S.inc, "a2", 0, &r2));
    sleep_ms(50);
    TT_CHECK_EQ_INT(tfrdv_mgr_find(C.m, step, &rz, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_abort(rz, TFRDV_ABORTED, "test abort"), TFRDV_OK);
    tfrdv_unref(rz);
    TT_CHECK(fwait(&r1, 5000) && fwait(&r2, 5000));
    TT_CHECK(r1.st.code == TFRDV_ABORTED && r2.st.code == TFRDV_ABORTED);
    TT_CHECK_CONTAINS(r1.st.msg, "test abort");
    fres_clear(&r1);
    fres_clear(&r2);
    tfrdv_mgr_cleanup(C.m, step);
    TT_CHECK(fetch(&C, step2, S.inc, "a3", 0, &r3));
    sleep_ms(50);
    srv_simple(&S, C_CLEANUP, step2);
    TT_CHECK(fwait(&r3, 5000));
    TT_CHECK_EQ_INT(r3.st.code, TFRDV_ABORTED);
    TT_CHECK_CONTAINS(r3.st.msg, "Cleanup");
    fres_clear(&r3);
    tfrdv_mgr_cleanup(C.m, step2);
    srv_simple(&S, C_CLEANUP, step);
}

#include "rawgrpc.h"
static size_t raw_request(int64_t step, uint64_t inc, const char* edge, int64_t rid, unsigned char* buf, size_t cap) {
    char kb[256];
    tfrdv_parsed_key pk;
    if (!make_key(inc, edge, kb, sizeof kb, &pk)) return 0;
    return tfrdv_grpc_encode_request(step, pk.full.ptr, pk.full.len, rid, buf, cap);
}
/* ---- a raw HTTP/2 client: just enough to open RecvTensor streams with a zero flow-control
   window (the server can send headers, never data: its reply stalls inside gRPC), cancel them
   with RST_STREAM, and never read what the server sends after the handshake ---- */
static void h2_frame(unsigned char* p, size_t len, int type, int flags, uint32_t stream) {
    p[0] = (unsigned char)(len >> 16);
    p[1] = (unsigned char)(len >> 8);
    p[2] = (unsigned char)len;
    p[3] = (unsigned char)type;
    p[4] = (unsigned char)flags;
    p[5] = (unsigned char)(stream >> 24);
    p[6] = (unsigned char)(stream >> 16);
    p[7] = (unsigned char)(stream >> 8);
    p[8] = (unsigned char)stream;
}
/* connects, sends the preface and SETTINGS (INITIAL_WINDOW_SIZE 0), acknowledges the server's
   SETTINGS; -1 on failure */
static int h2_connect(int port) {
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    unsigned char buf[64], hdr[9];
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), got_settings = 0;
    if (fd < 0) return -1;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr*)&sa, sizeof sa) != 0) { close(fd); return -1; }
    memcpy(buf, preface, 24);
    h2_frame(buf + 24, 6, 4, 0, 0); /* SETTINGS: INITIAL_WINDOW_SIZE (4) = 0 */
    memset(buf + 33, 0, 6);
    buf[34] = 4;
    if (!write_full(fd, buf, 39)) { close(fd); return -1; }
    while (!got_settings) { /* the server's frames until its SETTINGS (skipping payloads) */
        size_t len;
        unsigned char skip[256];
        if (!read_full(fd, hdr, 9)) { close(fd); return -1; }
        len = ((size_t)hdr[0] << 16) | ((size_t)hdr[1] << 8) | hdr[2];
        while (len) {
            size_t k = len < sizeof skip ? len : sizeof skip;
            if (!read_full(fd, skip, k)) { close(fd); return -1; }
            len -= k;
        }
        if (hdr[3] == 4 && !(hdr[4] & 1)) got_settings = 1;
    }
    h2_frame(buf, 0, 4, 1, 0); /* SETTINGS ACK */
    if (!write_full(fd, buf, 9)) { close(fd); return -1; }
    return fd;
}
static size_t h2_lit(unsigned char* p, const char* name, const char* value) { /* literal, not indexed */
    size_t nl = strlen(name), vl = strlen(value);
    p[0] = 0;
    p[1] = (unsigned char)nl;
    memcpy(p + 2, name, nl);
    p[2 + nl] = (unsigned char)vl;
    memcpy(p + 3 + nl, value, vl);
    return 3 + nl + vl;
}
/* opens stream `id` with a RecvTensor request (grpc-timeout if timeout is not NULL, e.g. "300m") */
static int h2_recv_tensor(int fd, uint32_t id, const unsigned char* req, size_t len, const char* timeout) {
    unsigned char f[1024];
    size_t n = 9;
    n += h2_lit(f + n, ":method", "POST");
    n += h2_lit(f + n, ":scheme", "http");
    n += h2_lit(f + n, ":path", "/tensorflow.WorkerService/RecvTensor");
    n += h2_lit(f + n, ":authority", "127.0.0.1");
    n += h2_lit(f + n, "content-type", "application/grpc");
    n += h2_lit(f + n, "te", "trailers");
    if (timeout) n += h2_lit(f + n, "grpc-timeout", timeout);
    h2_frame(f, n - 9, 1, 4, id); /* HEADERS, END_HEADERS */
    if (n + 14 + len > sizeof f) return 0;
    h2_frame(f + n, 5 + len, 0, 1, id); /* DATA, END_STREAM: the gRPC message */
    f[n + 9] = 0;
    f[n + 10] = (unsigned char)(len >> 24);
    f[n + 11] = (unsigned char)(len >> 16);
    f[n + 12] = (unsigned char)(len >> 8);
    f[n + 13] = (unsigned char)len;
    memcpy(f + n + 14, req, len);
    return write_full(fd, f, n + 14 + len);
}
static int h2_cancel(int fd, uint32_t id) { /* RST_STREAM CANCEL (8) */
    unsigned char f[13];
    h2_frame(f, 4, 3, 0, id);
    f[9] = f[10] = f[11] = 0;
    f[12] = 8;
    return write_full(fd, f, 13);
}

/* issue 20.1, the cancel paths: the value was handed to gRPC (the reply is on its way, stalled by a
   client that gives no flow-control window) when the call ends without reaching the client: the
   client cancels it (RST_STREAM) answered at once or later, or the server's deadline fires. Each
   value goes back to the table and then arrives intact (before: each was dropped). */
static void test_cancel_mid_reply(void) {
    int64_t step = next_step++, d1[1] = {1 << 18}; /* 1 MiB */
    int fd, k;
    fres r[3];
    TT_CHECK((fd = h2_connect(S.port)) >= 0);
    srv_simple(&S, C_INIT, step);
    for (k = 0; k < 3 && fd >= 0; k++) {
        char e[16];
        unsigned char req[512];
        size_t n;
        reply before, after, pend;
        snprintf(e, sizeof e, "mid%d", k);
        n = raw_request(step, S.inc, e, 0, req, sizeof req);
        before = srv_simple(&S, C_STATS, 0);
        if (k != 1) TT_CHECK_EQ_INT(srv_send(&S, step, e, 3, 1, d1, 0, (uint32_t)k), TFRDV_OK); /* answered at once */
        TT_CHECK(h2_recv_tensor(fd, (uint32_t)(2 * k + 1), req, n, k == 2 ? "300m" : 0));
        if (k == 1) { /* the request waits on the server; the value comes later */
            after = stats_after(1, &before);
            TT_CHECK(after.v[1] > before.v[1]);
            TT_CHECK_EQ_INT(srv_send(&S, step, e, 3, 1, d1, 0, (uint32_t)k), TFRDV_OK);
        }
        after = stats_after(3, &before); /* served: the reply holds the value */
        TT_CHECK(after.v[3] > before.v[3]);
        if (k != 2) TT_CHECK(h2_cancel(fd, (uint32_t)(2 * k + 1)));
        TT_CHECK_EQ_INT(srv_quiet(&S), 0);
        pend = srv_simple(&S, C_PENDING, step);
        TT_CHECK_EQ_INT(pend.v[0], k + 1);
    }
    for (k = 0; k < 3; k++) {
        char e[16];
        cmd want;
        snprintf(e, sizeof e, "mid%d", k);
        TT_CHECK(fetch(&C, step, S.inc, e, 0, &r[k]));
        memset(&want, 0, sizeof want);
        want.dtype = 3;
        want.rank = 1;
        want.dims[0] = d1[0];
        want.seed = (uint32_t)k;
        TT_CHECK(fwait(&r[k], 10000) && r[k].st.code == TFRDV_OK && check_value(&want, r[k].v));
        fres_clear(&r[k]);
    }
    if (fd >= 0) close(fd);
    tfrdv_mgr_cleanup(C.m, step);
    srv_simple(&S, C_CLEANUP, step);
    srv_quiet(&S);
}

/* issue 20.6: tfrdv_grpc_destroy with replies stalled by a client that never reads (window 0):
   gRPC drops the zero-copy slices over the values later, on its own threads. No value may be
   released after destroy (and the manager's destroy) returned: every release runs before. */
static int stall_phase;         /* 2 once both destroys returned */
static long stall_live, stall_late;
static void stall_release(tfrdv_value* v) {
    if (__atomic_load_n(&stall_phase, __ATOMIC_SEQ_CST) == 2) __atomic_add_fetch(&stall_late, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&stall_live, 1, __ATOMIC_SEQ_CST);
    free(v);
}
static void test_destroy_stalled_reader(void) {
    enum { ROUNDS = 5, NV = 8 };
    int round;
    long late = 0;
    for (round = 0; round < ROUNDS; round++) {
        tfrdv_grpc_config gc = tfrdv_grpc_config_init();
        tfrdv_mgr_config mc = tfrdv_mgr_config_init();
        tfrdv_grpc* g;
        tfrdv_mgr* m;
        tfrdv_rendezvous* rz;
        tfrdv_grpc_stats gs;
        int i, fd;
        int64_t t0, step = 1, d1[1] = {1 << 22}; /* 16 MiB, as in the report */
        gc.listen_address = "127.0.0.1:0";
        TT_CHECK_EQ_INT(tfrdv_grpc_create(&gc, &g, 0), TFRDV_OK);
        mc.worker_name = PS;
        mc.incarnation = 77;
        mc.transport = tfrdv_grpc_transport(g);
        TT_CHECK_EQ_INT(tfrdv_mgr_create(&mc, &m, 0), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_grpc_attach(g, m, 0), TFRDV_OK);
        __atomic_store_n(&stall_phase, 0, __ATOMIC_SEQ_CST);
        TT_CHECK_EQ_INT(tfrdv_mgr_find(m, step, &rz, 0), TFRDV_OK);
        tfrdv_mgr_initialize(rz, 0, 0);
        for (i = 0; i < NV; i++) {
            char e[16], kb[256];
            tfrdv_parsed_key pk;
            tfrdv_value* v = (tfrdv_value*)malloc(sizeof *v + 4 * (size_t)d1[0] + sizeof d1);
            snprintf(e, sizeof e, "st%d", i);
            *v = tfrdv_value_make(3, 1, (int64_t*)(v + 1), (char*)(v + 1) + sizeof d1, 4 * (uint64_t)d1[0], stall_release, 0);
            memcpy(v + 1, d1, sizeof d1);
            memset((char*)(v + 1) + sizeof d1, i, 4 * (size_t)d1[0]);
            __atomic_add_fetch(&stall_live, 1, __ATOMIC_SEQ_CST);
            TT_CHECK(make_key(77, e, kb, sizeof kb, &pk));
            TT_CHECK_EQ_INT(tfrdv_send(rz, &pk, 0, v, 0, 0), TFRDV_OK);
        }
        tfrdv_unref(rz);
        TT_CHECK((fd = h2_connect(tfrdv_grpc_port(g))) >= 0);
        for (i = 0; i < NV && fd >= 0; i++) {
            char e[16];
            unsigned char req[512];
            size_t n;
            snprintf(e, sizeof e, "st%d", i);
            n = raw_request(step, 77, e, 0, req, sizeof req);
            TT_CHECK(h2_recv_tensor(fd, (uint32_t)(2 * i + 1), req, n, 0));
        }
        t0 = now_ms();
        do { /* every value handed to a stalled reply */
            tfrdv_grpc_get_stats(g, &gs);
        } while (gs.serve_ok < NV && now_ms() - t0 < 10000 && (sleep_ms(2), 1));
        TT_CHECK_EQ_INT(gs.serve_ok, NV);
        tfrdv_grpc_destroy(g);
        tfrdv_mgr_destroy(m); /* the values given back to the table go here, on this thread */
        __atomic_store_n(&stall_phase, 2, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&stall_live, __ATOMIC_SEQ_CST) != 0) printf("    round %d: %ld values still held by gRPC after destroy\n", round, stall_live);
        sleep_ms(200); /* a late release (the defect) would come now */
        if (fd >= 0) close(fd);
        sleep_ms(50);
        late += __atomic_exchange_n(&stall_late, 0, __ATOMIC_SEQ_CST);
        __atomic_store_n(&stall_live, 0, __ATOMIC_SEQ_CST);
    }
    printf("    %ld of %d values released after destroy returned\n", late, ROUNDS * NV);
    TT_CHECK_EQ_INT(late, 0);
}

static void test_duplicate_and_unknown(void) {
    unsigned char req[512], resp[256];
    char det[512];
    size_t n, rl;
    int64_t step = next_step++, d1[1] = {1}, t0;
    tfrdv_value* v = 0;
    tfrdv_grpc_response_info info;
    tfrdv_status st;
    int restarted;
    TT_CHECK_EQ_INT(srv_send(&S, step, "d", 4, 1, d1, 0, 3), TFRDV_OK);
    n = raw_request(step, S.inc, "d", 4242, req, sizeof req);
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/RecvTensor", req, n, 5000, det, sizeof det, 1, resp, sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
    TT_CHECK_EQ_INT(dec1(resp, rl, &v, &info, &st), TFRDV_OK);
    TT_CHECK(v && v->size == 1);
    tfrdv_value_release(v);
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/RecvTensor", req, n, 5000, det, sizeof det, 1, 0, 0, 0, 0, 0), GRPC_STATUS_ABORTED);
    TT_CHECK_CONTAINS(det, "received twice");
    /* unknown method: UNIMPLEMENTED at once, never a hang */
    t0 = now_ms();
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/RunGraph", "", 0, 5000, det, sizeof det, 1, 0, 0, 0, 0, 0), GRPC_STATUS_UNIMPLEMENTED);
    TT_CHECK_EQ_INT(raw_call(S.port, "/no.Such/Method", "x", 1, 5000, det, sizeof det, 1, 0, 0, 0, 0, 0), GRPC_STATUS_UNIMPLEMENTED);
    TT_CHECK(now_ms() - t0 < 2000);
    /* empty replies a TensorFlow master needs */
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/CreateWorkerSession", "", 0, 5000, det, sizeof det, 1, resp, sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
    TT_CHECK_EQ_INT(rl, 0);
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/DeleteWorkerSession", "", 0, 5000, det, sizeof det, 1, resp, sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
    /* malformed request bytes: INVALID_ARGUMENT with a message */
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/RecvTensor", "\x12\x7f", 2, 5000, det, sizeof det, 1, 0, 0, 0, 0, 0), GRPC_STATUS_DATA_LOSS);
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/RecvTensor", "\x08\x01\x12\x03" "abc", 7, 5000, det, sizeof det, 1, 0, 0, 0, 0, 0),
                    GRPC_STATUS_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(det, "abc");
    /* incarnation mismatch: ABORTED + TensorFlow's WorkerPossiblyRestarted status details */
    n = raw_request(step, S.inc + 1, "d", 0, req, sizeof req);
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/RecvTensor", req, n, 5000, det, sizeof det, 1, 0, 0, 0, 0, &restarted), GRPC_STATUS_ABORTED);
    TT_CHECK_CONTAINS(det, "different device incarnation");
    TT_CHECK(restarted);
    /* a long key (stored off the inline buffer) is served; one above max_key_len is refused */
    {
        char edge[520];
        fres r;
        memset(edge, 'x', 500);
        edge[500] = 0;
        TT_CHECK_EQ_INT(srv_send(&S, step, edge, 4, 1, d1, 0, 9), TFRDV_OK);
        TT_CHECK(fetch(&C, step, S.inc, edge, 0, &r));
        TT_CHECK(fwait(&r, 5000));
        TT_CHECK(r.st.code == TFRDV_OK && r.v && r.v->size == 1);
        fres_clear(&r);
    }
    {
        static unsigned char big_req[6000];
        static char long_key[5000];
        memset(long_key, 'k', sizeof long_key);
        n = tfrdv_grpc_encode_request(step, long_key, sizeof long_key, 0, big_req, sizeof big_req);
        TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/RecvTensor", big_req, n, 5000, det, sizeof det, 1, 0, 0, 0, 0, 0),
                        GRPC_STATUS_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(det, "exceeds the limit of 4096");
    }
    srv_simple(&S, C_CLEANUP, step);
    tfrdv_mgr_cleanup(C.m, step);
}
/* 1,000 concurrent outstanding calls, all answered */
static void test_thousand(void) {
    enum { N = 1000 };
    static fres r[N];
    int64_t step = next_step++, t0, d1[1] = {4};
    reply st;
    int i, ok = 0;
    srv_simple(&S, C_INIT, step);
    for (i = 0; i < N; i++) {
        char e[16];
        snprintf(e, sizeof e, "k%d", i);
        TT_CHECK(fetch(&C, step, S.inc, e, 0, &r[i]));
    }
    t0 = now_ms();
    do { st = srv_simple(&S, C_STATS, 0); } while (st.v[1] < N && now_ms() - t0 < 10000 && (sleep_ms(10), 1));
    TT_CHECK_EQ_INT(st.v[1], N); /* all outstanding on the server at once */
    for (i = 0; i < N; i++) {
        char e[16];
        snprintf(e, sizeof e, "k%d", i);
        TT_CHECK_EQ_INT(srv_send(&S, step, e, 3, 1, d1, 0, (uint32_t)i), TFRDV_OK);
    }
    for (i = 0; i < N; i++) {
        cmd c;
        memset(&c, 0, sizeof c);
        c.dtype = 3;
        c.rank = 1;
        c.dims[0] = 4;
        c.seed = (uint32_t)i;
        if (fwait(&r[i], 10000) && r[i].st.code == TFRDV_OK && check_value(&c, r[i].v)) ok++;
        fres_clear(&r[i]);
    }
    TT_CHECK_EQ_INT(ok, N);
    tfrdv_mgr_cleanup(C.m, step);
    srv_simple(&S, C_CLEANUP, step);
}
/* server restart on the same port with a new incarnation: a key with the old one is ABORTED */
static void test_restart(void) {
    int port = S.port;
    uint64_t old = S.inc;
    fres r;
    int64_t step = next_step++, t0, d1[1] = {2};
    srv_stop(&S);
    TT_CHECK(spawn(&S, port, old + 1000, 0));
    srv_simple(&S, C_INIT, step);
    t0 = now_ms();
    do { /* the channel reconnects: calls are fail-fast, so retry UNAVAILABLE for a while */
        TT_CHECK(fetch(&C, step, old, "r", 0, &r));
        TT_CHECK(fwait(&r, 5000));
        if (r.st.code != TFRDV_UNAVAILABLE) break;
        fres_clear(&r);
        sleep_ms(50);
    } while (now_ms() - t0 < 10000);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_ABORTED);
    TT_CHECK_CONTAINS(r.st.msg, "different device incarnation");
    /* the kind, from TensorFlow's grpc-status-details-bin payload: act on it without the text */
    TT_CHECK_EQ_INT(r.st.detail, TFRDV_DETAIL_WORKER_RESTARTED);
    fres_clear(&r);
    TT_CHECK_EQ_INT(srv_send(&S, step, "r", 1, 1, d1, 0, 1), TFRDV_OK);
    TT_CHECK(fetch(&C, step, S.inc, "r", 0, &r));
    TT_CHECK(fwait(&r, 5000));
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    fres_clear(&r);
    tfrdv_mgr_cleanup(C.m, step);
    srv_simple(&S, C_CLEANUP, step);
}
/* shutdown with calls in flight: both sides return at once, every call completes once */
/* tfrdv_grpc_destroy from a receive callback, on a completion-queue thread and inside
   tfrdv_grpc_poll: it returns at once, the shutdown completes (on a thread of its own, or when
   that poll returns), the other call in flight fails exactly once, a later fetch fails
   UNAVAILABLE; tfrdv_grpc_peer_devices from such a callback is refused with a clear status
   (its answer would need the very thread it runs on) */
/* 1 once a callback set *flag (at most 10 s), polling a host-driven client meanwhile (host) */
static int flag_wait(int* flag, client* host) {
    int64_t t0 = now_ms();
    while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE) && now_ms() - t0 < 10000) {
        if (host) tfrdv_grpc_poll(host->g, 10000000);
        else sleep_ms(2);
    }
    return __atomic_load_n(flag, __ATOMIC_ACQUIRE);
}
typedef struct gdcb {
    tfrdv_grpc* g;
    tfrdv_mgr* m;
    int done;
    tfrdv_code code, status_code, inc_code;
    uint64_t inc;
    char status_msg[TFRDV_STATUS_MSG_MAX], inc_msg[TFRDV_STATUS_MSG_MAX];
} gdcb;
static void destroy_cb(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    gdcb* d = (gdcb*)u;
    tfrdv_grpc_device dev;
    size_t n;
    tfrdv_status gs;
    (void)sa; (void)ra; (void)dead;
    tfrdv_value_release(v);
    d->code = st->code;
    d->status_code = tfrdv_grpc_peer_devices(d->g, PS, 1000000000, &dev, 1, &n, &gs);
    snprintf(d->status_msg, sizeof d->status_msg, "%s", gs.msg);
    d->inc_code = tfrdv_mgr_peer_incarnation(d->m, PS, 1000000000, &d->inc, &gs);
    snprintf(d->inc_msg, sizeof d->inc_msg, "%s", gs.msg);
    tfrdv_grpc_destroy(d->g);
    __atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
}
static void destroy_from_callback(int threads) {
    client c2;
    gdcb d;
    fres other, after;
    int64_t step = next_step++, d1[1] = {3};
    alarm(60); /* a destroy that waits for its own thread hangs: fail instead */
    memset(&d, 0, sizeof d);
    TT_CHECK(client_up(&c2, &S, 0, threads));
    d.g = c2.g;
    d.m = c2.m;
    srv_simple(&S, C_INIT, step);
    TT_CHECK(fetch(&c2, step, S.inc, "never", 0, &other));
    {
        tfrdv_rendezvous* rz;
        tfrdv_parsed_key pk;
        char kb[256];
        TT_CHECK(make_key(S.inc, "cbd", kb, sizeof kb, &pk));
        TT_CHECK_EQ_INT(tfrdv_mgr_find(c2.m, step, &rz, 0), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_recv_async(rz, &pk, 0, destroy_cb, &d, 0), TFRDV_OK);
        tfrdv_unref(rz);
    }
    TT_CHECK_EQ_INT(srv_send(&S, step, "cbd", 1, 1, d1, 0, 4), TFRDV_OK);
    TT_CHECK(flag_wait(&d.done, threads < 0 ? &c2 : 0)); /* destroy returned inside the callback */
    TT_CHECK_EQ_INT(d.code, TFRDV_OK);
    if (threads > 0) {
        TT_CHECK_EQ_INT(d.status_code, TFRDV_FAILED_PRECONDITION);
        TT_CHECK_CONTAINS(d.status_msg, "from a callback");
        TT_CHECK_EQ_INT(d.inc_code, TFRDV_FAILED_PRECONDITION);
        TT_CHECK_CONTAINS(d.inc_msg, PS);
    } else {
        TT_CHECK_EQ_INT(d.status_code, TFRDV_OK); /* host-driven: it polls by itself */
        TT_CHECK_EQ_INT(d.inc_code, TFRDV_OK);
        TT_CHECK(d.inc == S.inc);
    }
    TT_CHECK(fwait(&other, 10000) && other.done == 1 && other.st.code != TFRDV_OK);
    TT_CHECK(fetch(&c2, step, S.inc, "after", 0, &after));
    TT_CHECK(fwait(&after, 5000) && after.st.code == TFRDV_UNAVAILABLE);
    if (threads < 0) TT_CHECK_EQ_INT(tfrdv_grpc_poll(c2.g, 0), 0); /* shut down: nothing more */
    tfrdv_mgr_destroy(c2.m);
    sleep_ms(20);
    TT_CHECK(other.done == 1 && after.done == 1); /* exactly once */
    fres_clear(&other);
    fres_clear(&after);
    srv_simple(&S, C_CLEANUP, step);
    alarm(0);
}
static void test_destroy_from_cq_thread_callback(void) { destroy_from_callback(1); }
static void test_destroy_from_poll_callback(void) { destroy_from_callback(-1); }
/* a blocking tfrdv_recv inside a receive callback of the only completion-queue thread (or of
   tfrdv_grpc_poll) could never be answered: it fails FAILED_PRECONDITION at once */
typedef struct gnest {
    client* c;
    int64_t step;
    int done;
    tfrdv_code code;
    char msg[TFRDV_STATUS_MSG_MAX];
} gnest;
static void gnest_cb(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    gnest* n = (gnest*)u;
    tfrdv_rendezvous* rz;
    tfrdv_parsed_key pk;
    char kb[256];
    tfrdv_value* v2 = 0;
    tfrdv_status s2;
    int d2;
    (void)st; (void)sa; (void)ra; (void)dead;
    tfrdv_value_release(v);
    memset(&s2, 0, sizeof s2);
    n->code = TFRDV_INTERNAL;
    if (make_key(S.inc, "gnest_inner", kb, sizeof kb, &pk) && tfrdv_mgr_find(n->c->m, n->step, &rz, 0) == TFRDV_OK) {
        n->code = tfrdv_recv(rz, &pk, 0, 0, &v2, &d2, &s2); /* no timeout */
        tfrdv_unref(rz);
    }
    snprintf(n->msg, sizeof n->msg, "%s", s2.msg);
    tfrdv_value_release(v2);
    __atomic_store_n(&n->done, 1, __ATOMIC_RELEASE);
}
static void blocking_recv_in_callback(int threads) {
    client c2;
    gnest n;
    fres r;
    int64_t step = next_step++, d1[1] = {3}, t0;
    alarm(60);
    memset(&n, 0, sizeof n);
    TT_CHECK(client_up(&c2, &S, 0, threads));
    n.c = &c2;
    n.step = step;
    TT_CHECK_EQ_INT(srv_send(&S, step, "gnest_outer", 1, 1, d1, 0, 5), TFRDV_OK);
    {
        tfrdv_rendezvous* rz;
        tfrdv_parsed_key pk;
        char kb[256];
        TT_CHECK(make_key(S.inc, "gnest_outer", kb, sizeof kb, &pk));
        TT_CHECK_EQ_INT(tfrdv_mgr_find(c2.m, step, &rz, 0), TFRDV_OK);
        tfrdv_mgr_initialize(rz, 0, 0);
        TT_CHECK_EQ_INT(tfrdv_recv_async(rz, &pk, 0, gnest_cb, &n, 0), TFRDV_OK);
        tfrdv_unref(rz);
    }
    TT_CHECK(flag_wait(&n.done, threads < 0 ? &c2 : 0));
    TT_CHECK_EQ_INT(n.code, TFRDV_FAILED_PRECONDITION);
    TT_CHECK_CONTAINS(n.msg, "tfrdv_recv_async");
    /* the client and the transport still work: the inner value reaches a later receiver */
    t0 = now_ms();
    while (srv_simple(&S, C_PENDING, step).v[1] != 0 && now_ms() - t0 < 5000) { /* the cancelled request was withdrawn */
        if (threads < 0) tfrdv_grpc_poll(c2.g, 10000000);
        else sleep_ms(5);
    }
    TT_CHECK_EQ_INT(srv_send(&S, step, "gnest_inner", 1, 1, d1, 0, 6), TFRDV_OK);
    TT_CHECK(fetch(&c2, step, S.inc, "gnest_inner", 0, &r));
    t0 = now_ms();
    while (threads < 0 && !fwait(&r, 0) && now_ms() - t0 < 10000) tfrdv_grpc_poll(c2.g, 10000000);
    TT_CHECK(fwait(&r, 10000) && r.done == 1 && r.st.code == TFRDV_OK);
    fres_clear(&r);
    client_down(&c2);
    srv_simple(&S, C_CLEANUP, step);
    alarm(0);
}
static void test_blocking_recv_in_cq_thread_callback(void) { blocking_recv_in_callback(1); }
static void test_blocking_recv_in_poll_callback(void) { blocking_recv_in_callback(-1); }
static void test_shutdown_in_flight(void) {
    client c2;
    server s2;
    fres r[3];
    int64_t step = next_step++, t0;
    int i;
    reply before, after;
    TT_CHECK(spawn(&s2, 0, 5, 0));
    TT_CHECK(client_up(&c2, &s2, 0, 1));
    srv_simple(&s2, C_INIT, step);
    for (i = 0; i < 3; i++) {
        char e[8];
        snprintf(e, sizeof e, "s%d", i);
        TT_CHECK(fetch(&c2, step, s2.inc, e, 0, &r[i]));
    }
    sleep_ms(100);
    t0 = now_ms();
    srv_stop(&s2); /* the server shuts down with 3 calls waiting: cancels them */
    TT_CHECK(now_ms() - t0 < 3000);
    for (i = 0; i < 3; i++) {
        TT_CHECK(fwait(&r[i], 5000));
        TT_CHECK(r[i].st.code != TFRDV_OK && r[i].done == 1);
    }
    for (i = 0; i < 3; i++) fres_clear(&r[i]);
    /* client-side destroy with a call in flight */
    TT_CHECK(fetch(&c2, step, S.inc, "never", 0, &r[0]));
    tfrdv_grpc_set_worker(c2.g, PS, "127.0.0.1:1", 0); /* later calls go nowhere; this one is on the old address */
    t0 = now_ms();
    client_down(&c2);
    TT_CHECK(now_ms() - t0 < 3000);
    TT_CHECK(fwait(&r[0], 5000) && r[0].done == 1 && r[0].st.code != TFRDV_OK);
    fres_clear(&r[0]);
    /* destroy with a call waiting on a live server: the cancelled call's not-taken receipt still
       goes out (destroy waits for it), so a server that answered meanwhile gives the value back */
    TT_CHECK(client_up(&c2, &S, 0, 1));
    before = srv_simple(&S, C_STATS, 0);
    TT_CHECK(fetch(&c2, step, S.inc, "never", 0, &r[0]));
    t0 = now_ms();
    do {
        sleep_ms(5);
        after = srv_simple(&S, C_STATS, 0);
    } while (after.v[2] == before.v[2] && now_ms() - t0 < 5000);
    TT_CHECK_EQ_INT(after.v[2], before.v[2] + 1); /* the request is waiting there */
    client_down(&c2);
    TT_CHECK(fwait(&r[0], 5000) && r[0].done == 1 && r[0].st.code == TFRDV_CANCELLED);
    fres_clear(&r[0]);
    after = srv_simple(&S, C_STATS, 0);
    TT_CHECK_EQ_INT(after.v[8], before.v[8] + 1);
}
/* response cache + require_ack: the client sends MarkRecvFinished; host-driven polling on the
   server side */
static void test_ack_and_poll(void) {
    server s2;
    client c2;
    fres r;
    int64_t step = next_step++, d1[1] = {3}, t0;
    tfrdv_grpc_stats gs;
    TT_CHECK(spawn(&s2, 0, 9, F_ACK | F_POLL));
    TT_CHECK(client_up(&c2, &s2, 0, -1)); /* the client polls too: nobody owns threads */
    TT_CHECK_EQ_INT(srv_send(&s2, step, "k", 1, 1, d1, 0, 2), TFRDV_OK);
    TT_CHECK(fetch(&c2, step, s2.inc, "k", 0, &r));
    t0 = now_ms();
    while (!r.done && now_ms() - t0 < 5000) tfrdv_grpc_poll(c2.g, 10000000);
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    fres_clear(&r);
    t0 = now_ms();
    do {
        tfrdv_grpc_poll(c2.g, 10000000);
        tfrdv_grpc_get_stats(c2.g, &gs);
    } while (gs.client_calls_live && now_ms() - t0 < 5000);
    TT_CHECK_EQ_INT(gs.acks_sent, 1);
    TT_CHECK_EQ_INT(gs.client_calls_live, 0);
    client_down(&c2);
    {
        /* the server side, with raw calls: a retried request id is answered from the response
           cache until MarkRecvFinished drops the entry; after that the duplicate is ABORTED */
        unsigned char req[512], resp[256];
        char det[512];
        size_t n, rl;
        reply stats0, stats1;
        TT_CHECK_EQ_INT(srv_send(&s2, step, "k2", 1, 1, d1, 0, 3), TFRDV_OK);
        n = raw_request(step, s2.inc, "k2", 777, req, sizeof req);
        TT_CHECK_EQ_INT(raw_call(s2.port, "/tensorflow.WorkerService/RecvTensor", req, n, 5000, det, sizeof det, 1, resp, sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
        TT_CHECK(rl > 12 && resp[9] == 0x28 && resp[10] == 0x01); /* 18 <us> 28 01: require_ack right after the micros */
        stats0 = srv_simple(&s2, C_STATS, 0);
        TT_CHECK_EQ_INT(raw_call(s2.port, "/tensorflow.WorkerService/RecvTensor", req, n, 5000, det, sizeof det, 1, resp, sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
        stats1 = srv_simple(&s2, C_STATS, 0);
        TT_CHECK_EQ_INT(stats1.v[7], stats0.v[7] + 1); /* a cache hit */
        TT_CHECK_EQ_INT(raw_call(s2.port, "/tensorflow.WorkerService/MarkRecvFinished", "\x08\x89\x06", 3, 5000, det, sizeof det, 1, resp, sizeof resp, &rl, 0, 0),
                        GRPC_STATUS_OK);
        TT_CHECK_EQ_INT(raw_call(s2.port, "/tensorflow.WorkerService/RecvTensor", req, n, 5000, det, sizeof det, 1, 0, 0, 0, 0, 0), GRPC_STATUS_ABORTED);
        TT_CHECK_CONTAINS(det, "received twice");
    }
    srv_stop(&s2);
}
/* DELIVERY RECEIPTS by default, between tfrdv peers only: a default-config server answers a
   TensorFlow-style request (no mark) exactly as before, without require_ack, and the value is
   gone from its table; a request carrying tfrdv's mark (field 15) gets require_ack and its value
   stays held until the receipt: a not-taken MarkRecvFinished{1: id, 15: 1} puts it back in the
   table, where the next fetch finds it */
static size_t ack_at(const unsigned char* resp, size_t rl) { /* offset after 18 <send_start_micros> */
    size_t i = 1;
    if (rl < 2 || resp[0] != 0x18) return rl;
    while (i < rl && (resp[i] & 0x80)) i++;
    return i + 1;
}
static void test_receipts_only_for_marked(void) {
    unsigned char req[512], resp[256];
    char det[512];
    size_t n, rl, i;
    int64_t step = next_step++, d1[1] = {3};
    reply pend, st0, st1;
    fres r;
    st0 = srv_simple(&S, C_STATS, 0);
    /* TensorFlow's request bytes {1: step, 2: key, 7: id}: no require_ack, nothing held */
    TT_CHECK_EQ_INT(srv_send(&S, step, "tf", 1, 1, d1, 0, 4), TFRDV_OK);
    n = raw_request(step, S.inc, "tf", 0x1234, req, sizeof req);
    TT_CHECK(n > 0);
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/RecvTensor", req, n, 5000, det, sizeof det, 1, resp, sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
    i = ack_at(resp, rl);
    TT_CHECK(i < rl && resp[i] == 0x0a); /* 18 <us> 0a: the tensor right after the micros */
    /* a receipt for it is harmless: nothing is held, nothing comes back, nothing waits for it */
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/MarkRecvFinished", "\x08\xb4\x24\x78\x01", 5, 5000, det, sizeof det, 1, resp,
                             sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
    pend = srv_simple(&S, C_PENDING, step);
    TT_CHECK_EQ_INT(pend.v[0], 0);
    st1 = srv_simple(&S, C_STATS, 0);
    TT_CHECK_EQ_INT(st1.v[10], st0.v[10] + 1); /* receipts_unmatched */
    /* the same request with tfrdv's mark: require_ack, the value held until the receipt */
    TT_CHECK_EQ_INT(srv_send(&S, step, "marked", 1, 1, d1, 0, 5), TFRDV_OK);
    n = raw_request(step, S.inc, "marked", 0x1235, req, sizeof req - 2);
    req[n++] = 0x78;
    req[n++] = 0x01;
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/RecvTensor", req, n, 5000, det, sizeof det, 1, resp, sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
    i = ack_at(resp, rl);
    TT_CHECK(i + 1 < rl && resp[i] == 0x28 && resp[i + 1] == 0x01); /* 18 <us> 28 01 */
    TT_CHECK(rl > 2 && resp[rl - 2] == 0x78 && resp[rl - 1] == 0x01); /* ... 78 01: receipts may ride inline */
    pend = srv_simple(&S, C_PENDING, step);
    TT_CHECK_EQ_INT(pend.v[0], 0);
    /* not taken: back in the table, and a tfrdv client fetches it */
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/MarkRecvFinished", "\x08\xb5\x24\x78\x01", 5, 5000, det, sizeof det, 1, resp,
                             sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
    pend = srv_simple(&S, C_PENDING, step);
    TT_CHECK_EQ_INT(pend.v[0], 1);
    st0 = srv_simple(&S, C_STATS, 0);
    TT_CHECK_EQ_INT(st0.v[9], st1.v[9] + 1); /* receipts_returned */
    TT_CHECK(fetch(&C, step, S.inc, "marked", 0, &r));
    TT_CHECK(fwait(&r, 10000));
    TT_CHECK_EQ_INT(r.st.code, TFRDV_OK);
    TT_CHECK(r.v && r.v->size == 12);
    fres_clear(&r);
    pend = srv_simple(&S, C_PENDING, step);
    TT_CHECK_EQ_INT(pend.v[0], 0);
    /* a taken receipt carried inline (field 16 of a later marked request) settles a held answer:
       a not-taken receipt for it afterwards finds nothing (unmatched), the value stays delivered */
    TT_CHECK_EQ_INT(srv_send(&S, step, "in1", 1, 1, d1, 0, 6), TFRDV_OK);
    TT_CHECK_EQ_INT(srv_send(&S, step, "in2", 1, 1, d1, 0, 7), TFRDV_OK);
    n = raw_request(step, S.inc, "in1", 0x1236, req, sizeof req - 2);
    req[n++] = 0x78;
    req[n++] = 0x01;
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/RecvTensor", req, n, 5000, det, sizeof det, 1, resp, sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
    n = raw_request(step, S.inc, "in2", 0x1237, req, sizeof req - 6);
    memcpy(req + n, "\x78\x01\x80\x01\xb6\x24", 6); /* mark, 16: 0x1236 */
    n += 6;
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/RecvTensor", req, n, 5000, det, sizeof det, 1, resp, sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
    st0 = srv_simple(&S, C_STATS, 0);
    TT_CHECK_EQ_INT(raw_call(S.port, "/tensorflow.WorkerService/MarkRecvFinished", "\x08\xb6\x24\x78\x01", 5, 5000, det, sizeof det, 1, resp,
                             sizeof resp, &rl, 0, 0), GRPC_STATUS_OK);
    st1 = srv_simple(&S, C_STATS, 0);
    TT_CHECK_EQ_INT(st1.v[10], st0.v[10] + 1); /* unmatched: the inline receipt had settled it */
    TT_CHECK_EQ_INT(st1.v[9], st0.v[9]);
    pend = srv_simple(&S, C_PENDING, step);
    TT_CHECK_EQ_INT(pend.v[0], 0);
    srv_simple(&S, C_CLEANUP, step);
    { /* the knob: 0 or 1 on, TFRDV_OFF off, anything else refused */
        tfrdv_grpc_config gc = tfrdv_grpc_config_init();
        tfrdv_grpc* g = 0;
        tfrdv_status st;
        gc.receipts = 2;
        TT_CHECK_EQ_INT(tfrdv_grpc_create(&gc, &g, &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, "receipts");
        TT_CHECK(g == 0);
    }
}
/* the message size limit (gRPC's is 2 GiB; TensorFlow kills its process above it): a clear
   RESOURCE_EXHAUSTED on the serving side and on the receiving side */
static void test_size_limit(void) {
    server s2;
    client c2;
    fres r;
    int64_t step = next_step++, d1[1] = {4096};
    TT_CHECK(spawn(&s2, 0, 13, F_SMALL));
    TT_CHECK(client_up(&c2, &s2, 0, 1));
    TT_CHECK_EQ_INT(srv_send(&s2, step, "big", 4, 1, d1, 0, 1), TFRDV_OK);
    TT_CHECK(fetch(&c2, step, s2.inc, "big", 0, &r));
    TT_CHECK(fwait(&r, 5000));
    TT_CHECK_EQ_INT(r.st.code, TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_CONTAINS(r.st.msg, "exceeds the gRPC message limit of 1000 bytes");
    fres_clear(&r);
    client_down(&c2);
    srv_stop(&s2);
    {
        tfrdv_grpc_config gc = tfrdv_grpc_config_init();
        gc.max_message_bytes = 1000;
        TT_CHECK(client_up_with(&c2, &S, gc, 0, 0));
        TT_CHECK_EQ_INT(srv_send(&S, step, "big", 4, 1, d1, 0, 1), TFRDV_OK);
        TT_CHECK(fetch(&c2, step, S.inc, "big", 0, &r));
        TT_CHECK(fwait(&r, 5000));
        TT_CHECK_EQ_INT(r.st.code, TFRDV_RESOURCE_EXHAUSTED);
        TT_CHECK_CONTAINS(r.st.msg, "exceeds the limit of 1000 bytes");
        fres_clear(&r);
        client_down(&c2);
        srv_simple(&S, C_CLEANUP, step);
    }
}
/* TLS and mutual TLS (certificates from openssl, made by tests/grpc/grpc.mk) */
static void test_tls(void) {
    const char* dir = getenv("TFRDV_TEST_CERTS");
    int mode;
    if (!dir || !*dir) TT_SKIP("no certificates: tests/grpc/certs.sh needs openssl");
    for (mode = 0; mode < 2; mode++) {
        server s2;
        client c2;
        tfrdv_grpc_config gc = tfrdv_grpc_config_init();
        tfrdv_mgr_config mc = tfrdv_mgr_config_init();
        tfrdv_grpc_worker w;
        char addr[64], p[512];
        char *ca, *key, *crt;
        fres r;
        int64_t step = next_step++, d1[1] = {2000};
        cmd c;
        TT_CHECK(spawn(&s2, 0, 11, mode ? F_MTLS : F_TLS));
        snprintf(addr, sizeof addr, "127.0.0.1:%d", s2.port);
        snprintf(p, sizeof p, "%s/ca.crt", dir); ca = slurp(p);
        snprintf(p, sizeof p, "%s/client.key", dir); key = slurp(p);
        snprintf(p, sizeof p, "%s/client.crt", dir); crt = slurp(p);
        w.name = PS;
        w.address = addr;
        gc.workers = &w;
        gc.num_workers = 1;
        gc.pem_root_certs = ca;
        if (mode) { gc.pem_private_key = key; gc.pem_cert_chain = crt; }
        gc.ssl_target_name_override = "worker.test";
        TT_CHECK_EQ_INT(tfrdv_grpc_create(&gc, &c2.g, 0), TFRDV_OK);
        mc.worker_name = WK;
        mc.transport = tfrdv_grpc_transport(c2.g);
        TT_CHECK_EQ_INT(tfrdv_mgr_create(&mc, &c2.m, 0), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_grpc_attach(c2.g, c2.m, 0), TFRDV_OK);
        TT_CHECK_EQ_INT(srv_send(&s2, step, "t", 1, 1, d1, 0, 4), TFRDV_OK);
        TT_CHECK(fetch(&c2, step, s2.inc, "t", 0, &r));
        TT_CHECK(fwait(&r, 10000));
        memset(&c, 0, sizeof c);
        c.dtype = 1;
        c.rank = 1;
        c.dims[0] = 2000;
        c.seed = 4;
        if (r.st.code) printf("    tls mode %d: %s\n", mode, r.st.msg);
        TT_CHECK(r.st.code == TFRDV_OK && check_value(&c, r.v));
        fres_clear(&r);
        client_down(&c2);
        if (mode) { /* a client without a certificate is refused by the mutual-TLS server */
            gc.pem_private_key = 0;
            gc.pem_cert_chain = 0;
            TT_CHECK_EQ_INT(tfrdv_grpc_create(&gc, &c2.g, 0), TFRDV_OK);
            mc.transport = tfrdv_grpc_transport(c2.g);
            TT_CHECK_EQ_INT(tfrdv_mgr_create(&mc, &c2.m, 0), TFRDV_OK);
            TT_CHECK(fetch(&c2, step, s2.inc, "t", 0, &r));
            TT_CHECK(fwait(&r, 10000));
            TT_CHECK_EQ_INT(r.st.code, TFRDV_UNAVAILABLE);
            fres_clear(&r);
            client_down(&c2);
        }
        free(ca); free(key); free(crt);
        srv_stop(&s2);
    }
}

/* ---- conformance against Debian's python3-grpcio + python3-protobuf (tests/grpc/peer.py) ---- */
static int run_peer(const char* args, char* out, size_t cap) {
    char cmdline[1024];
    FILE* f;
    size_t n = 0;
    const char* py = getenv("TFRDV_PEER_PYTHON");
    const char* script = getenv("TFRDV_PEER_SCRIPT");
    snprintf(cmdline, sizeof cmdline, "%s %s %s 2>&1", py ? py : "/usr/bin/python3", script ? script : "tests/grpc/peer.py", args);
    f = popen(cmdline, "r");
    if (!f) return -1;
    out[0] = 0;
    while (n + 1 < cap && fgets(out + n, (int)(cap - n), f)) n = strlen(out);
    return pclose(f);
}
/* the Python conformance peer (tests/grpc/peer.py) runs when grpc.mk found Debian's grpcio */
#define PEER_SKIP_WHY "the Python peer needs /usr/bin/python3 with python3-grpcio, python3-protobuf and protoc"
static int peer_enabled(void) { return getenv("TFRDV_TEST_PEER") && getenv("TFRDV_TEST_PEER")[0] == '1'; }
static void test_peer_fetches_from_tfrdv(void) {
    char args[512], out[4096];
    int64_t step = next_step++, d2[2] = {2, 3}, d1[1] = {3};
    char kb[256];
    if (!peer_enabled()) TT_SKIP(PEER_SKIP_WHY);
    tfrdv_parsed_key pk;
    srv_send(&S, step, "f", 1, 2, d2, 0, 1);
    srv_send(&S, step, "s", 7, 1, d1, 0, 2);
    srv_send(&S, step, "dead", 1, 0, 0, 1, 0);
    make_key(S.inc, "f", kb, sizeof kb, &pk);
    /* the peer checks GetStatus, then fetches: it prints what protobuf parsed */
    snprintf(args, sizeof args, "fetch 127.0.0.1:%d %lld %llu %s", S.port, (long long)step, (unsigned long long)S.inc, "f,s,dead");
    TT_CHECK_EQ_INT(run_peer(args, out, sizeof out), 0);
    TT_CHECK_CONTAINS(out, "status " PS_DEV " CPU");
    TT_CHECK_CONTAINS(out, "f dtype=1 shape=[2, 3] dead=0 ack=0 content=");
    {
        unsigned char want[24];
        char hex[64], line[128];
        int i;
        fill(want, 24, 1);
        for (i = 0; i < 24; i++) snprintf(hex + 2 * i, 3, "%02x", want[i]);
        snprintf(line, sizeof line, "content=%s", hex);
        TT_CHECK_CONTAINS(out, line);
    }
    TT_CHECK_CONTAINS(out, "s dtype=7 shape=[3] dead=0 ack=0 content=0001");
    TT_CHECK_CONTAINS(out, "dead dtype=1 shape=[0] dead=1 ack=0");
    /* a TensorFlow-style client (protobuf's RecvTensorRequest: no tfrdv mark) gets no require_ack */
    TT_CHECK(!strstr(out, "ack=1"));
    TT_CHECK_CONTAINS(out, "f dtype=1 shape=[2, 3] dead=0 ack=0");
    TT_CHECK_CONTAINS(out, "mismatch code=ABORTED restarted=1");
    if (strstr(out, "Traceback")) printf("%s", out);
    srv_simple(&S, C_CLEANUP, step);
}
static void test_tfrdv_fetches_from_peer(void) {
    char out[4096], pf[256];
    FILE* f;
    pid_t pid;
    int port = 0, i, status;
    server peer;
    client c2;
    fres r[5];
    static const char* edges[5] = {"content_f32", "typed_f32", "typed_i64", "strings", "dead"};
    if (!peer_enabled()) TT_SKIP(PEER_SKIP_WHY);
    snprintf(pf, sizeof pf, "/tmp/tfrdv_peer_port_%d", (int)getpid());
    unlink(pf);
    pid = fork();
    if (pid == 0) {
        const char* py = getenv("TFRDV_PEER_PYTHON");
        const char* script = getenv("TFRDV_PEER_SCRIPT");
        execl(py ? py : "/usr/bin/python3", "python3", script ? script : "tests/grpc/peer.py", "serve", pf, (char*)0);
        _exit(127);
    }
    for (i = 0; i < 200 && !port; i++) {
        sleep_ms(50);
        if ((f = fopen(pf, "r"))) { if (fscanf(f, "%d", &port) != 1) port = 0; fclose(f); }
    }
    TT_CHECK(port > 0);
    memset(&peer, 0, sizeof peer);
    peer.port = port;
    TT_CHECK(client_up(&c2, &peer, 5000000000LL, 1));
    {
        tfrdv_grpc_device d[2];
        size_t n = 0;
        TT_CHECK_EQ_INT(tfrdv_grpc_peer_devices(c2.g, PS, 5000000000LL, d, 2, &n, 0), TFRDV_OK);
        TT_CHECK(n == 1 && d[0].incarnation == 0x1234567890abcdefULL);
    }
    for (i = 0; i < 5; i++) TT_CHECK(fetch(&c2, 7, 0x1234567890abcdefULL, edges[i], 0, &r[i]));
    for (i = 0; i < 5; i++) {
        TT_CHECK(fwait(&r[i], 10000));
        if (r[i].st.code) printf("    %s: %s\n", edges[i], r[i].st.msg);
        TT_CHECK_EQ_INT(r[i].st.code, TFRDV_OK);
    }
    /* content_f32 [2,2] = 1..4 ; typed_f32 [4] = float_val {2.5} broadcast ; typed_i64 [3] = int64_val {-1,0,7};
       strings [2] = ["x","yz"] via string_val ; dead */
    TT_CHECK(r[0].v && r[0].v->size == 16 && ((float*)r[0].v->data)[3] == 4.0f);
    TT_CHECK(r[1].v && r[1].v->size == 16 && ((float*)r[1].v->data)[0] == 2.5f && ((float*)r[1].v->data)[3] == 2.5f);
    TT_CHECK(r[2].v && r[2].v->size == 24 && ((int64_t*)r[2].v->data)[0] == -1 && ((int64_t*)r[2].v->data)[2] == 7);
    TT_CHECK(r[3].v && r[3].v->size == 5 && memcmp(r[3].v->data, "\x01\x02xyz", 5) == 0);
    TT_CHECK(r[4].dead == 1 && r[4].v == 0);
    for (i = 0; i < 5; i++) fres_clear(&r[i]);
    /* hostile responses from the peer: a status with a message, no crash, no huge allocation */
    TT_CHECK(fetch(&c2, 7, 0x1234567890abcdefULL, "bad_content", 0, &r[0]));
    TT_CHECK(fetch(&c2, 7, 0x1234567890abcdefULL, "huge_dims", 0, &r[1]));
    TT_CHECK(fwait(&r[0], 10000) && fwait(&r[1], 10000));
    TT_CHECK_EQ_INT(r[0].st.code, TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(r[0].st.msg, "tensor_content has 5 bytes");
    TT_CHECK_EQ_INT(r[1].st.code, TFRDV_RESOURCE_EXHAUSTED);
    fres_clear(&r[0]);
    fres_clear(&r[1]);
    /* status details: TensorFlow's payload says restarted; the type name inside another field
       of a hostile payload does not */
    TT_CHECK(fetch(&c2, 7, 0x1234567890abcdefULL, "details_tf", 0, &r[0]));
    TT_CHECK(fetch(&c2, 7, 0x1234567890abcdefULL, "details_hostile", 0, &r[1]));
    TT_CHECK(fwait(&r[0], 10000) && fwait(&r[1], 10000));
    TT_CHECK(r[0].st.code == TFRDV_ABORTED && r[1].st.code == TFRDV_ABORTED);
    TT_CHECK_EQ_INT(r[0].st.detail, TFRDV_DETAIL_WORKER_RESTARTED);
    TT_CHECK_EQ_INT(r[1].st.detail, 0);
    fres_clear(&r[0]);
    fres_clear(&r[1]);
    { /* MarkRecvFinished is fire and forget (as TensorFlow's): let it finish before destroy cancels it */
        tfrdv_grpc_stats gs;
        int64_t t0 = now_ms();
        do { sleep_ms(10); tfrdv_grpc_get_stats(c2.g, &gs); } while (gs.client_calls_live && now_ms() - t0 < 5000);
        TT_CHECK_EQ_INT(gs.acks_sent, 1);
    }
    client_down(&c2);
    sleep_ms(100); /* the peer counts MarkRecvFinished calls (typed_f32 asked for an ack) */
    kill(pid, SIGTERM);
    waitpid(pid, &status, 0);
    f = fopen(pf, "r");
    out[0] = 0;
    if (f) { size_t n = fread(out, 1, sizeof out - 1, f); out[n] = 0; fclose(f); }
    TT_CHECK_CONTAINS(out, "acks 1");
    unlink(pf);
}

#ifndef TFRDV_GRPC_TEST_PEER
#define TFRDV_GRPC_TEST_PEER 0
#endif
#define TT_STR2(x) #x
#define TT_STR(x) TT_STR2(x)
static void defaults(void) {
    setenv("GRPC_VERBOSITY", "NONE", 0);
    setenv("TFRDV_TEST_PEER", TT_STR(TFRDV_GRPC_TEST_PEER), 0);
#ifdef TFRDV_GRPC_TEST_PB
    setenv("TFRDV_PEER_PB", TFRDV_GRPC_TEST_PB, 0);
#endif
#ifdef TFRDV_GRPC_TEST_SCRIPT
    setenv("TFRDV_PEER_SCRIPT", TFRDV_GRPC_TEST_SCRIPT, 0);
#endif
#ifdef TFRDV_GRPC_TEST_PYTHON
    setenv("TFRDV_PEER_PYTHON", TFRDV_GRPC_TEST_PYTHON, 0);
#endif
#ifdef TFRDV_GRPC_TEST_CERTS
    setenv("TFRDV_TEST_CERTS", TFRDV_GRPC_TEST_CERTS, 0);
#endif
}

int main(int argc, char** argv) {
    ssize_t n;
    if (argc == 7 && strcmp(argv[1], "--serve") == 0)
        return serve_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), (uint64_t)strtoull(argv[5], 0, 10), atoi(argv[6]));
    TT_MAIN_BEGIN(argc, argv);
    defaults();
    signal(SIGPIPE, SIG_IGN);
    n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) return 1;
    self_exe[n] = 0;
    TT_RUN(test_golden_float_2x3);
    TT_RUN(test_golden_scalar_string_dead_ack);
    TT_RUN(test_golden_request_and_status);
    TT_RUN(test_typed_fields);
    TT_RUN(test_field_order);
    TT_RUN(test_hostile);
    TT_RUN(test_codec_null_arguments);
    TT_RUN(test_roundtrip_dtypes);
    TT_RUN(test_status_details);
    if (!spawn(&S, 0, 0x5eed5eedULL, 0) || !client_up(&C, &S, 0, 2)) {
        printf("[FAIL] cannot start the serving worker\n");
        return 1;
    }
    TT_RUN(test_get_status);
    TT_RUN(test_peer_incarnation);
    TT_RUN(test_bad_config);
    TT_RUN(test_num_threads);
    TT_RUN(test_port_in_use);
    TT_RUN(test_dtypes_shapes);
    TT_RUN(test_big);
    TT_RUN(test_dead);
    TT_RUN(test_deadline);
    TT_RUN(test_deadline_then_send);
    TT_RUN(test_recv_timeout);
    TT_RUN(test_client_cancel);
    TT_RUN(test_cancel_stress);
    TT_RUN(test_cancel_mid_reply);
    TT_RUN(test_destroy_stalled_reader);
    TT_RUN(test_abort_cleanup);
    TT_RUN(test_duplicate_and_unknown);
    TT_RUN(test_thousand);
    TT_RUN(test_restart);
    TT_RUN(test_shutdown_in_flight);
    TT_RUN(test_destroy_from_cq_thread_callback);
    TT_RUN(test_destroy_from_poll_callback);
    TT_RUN(test_blocking_recv_in_cq_thread_callback);
    TT_RUN(test_blocking_recv_in_poll_callback);
    TT_RUN(test_ack_and_poll);
    TT_RUN(test_receipts_only_for_marked);
    TT_RUN(test_size_limit);
    TT_RUN(test_tls);
    TT_RUN(test_peer_fetches_from_tfrdv);
    TT_RUN(test_tfrdv_fetches_from_peer);
    client_down(&C);
    srv_stop(&S);
    return TT_MAIN_END();
}
