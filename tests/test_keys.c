/* test_keys.c - rendezvous keys, device names, frame:iter, hash, status codes: test vectors taken
   from TensorFlow's rendezvous.cc (CreateKey, ParseKey) and device_name_utils_test.cc. */
#define _POSIX_C_SOURCE 200809L /* tt.h comes first (it counts TFRDV_ASSERTs): its stdio.h must
                                   already see the POSIX level tfrdv.h's implementation needs */
#define TT_COUNT_ASSERTS       /* TFRDV_ASSERT tripwires are counted; test_no_assert_tripped checks */
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <stdlib.h>

#define S "/job:a/replica:0/task:0/device:CPU:0"
#define D "/job:b/replica:0/task:0/device:CPU:0"

static int str_is(tfrdv_str s, const char* want) {
    return s.len == strlen(want) && (s.len == 0 || memcmp(s.ptr, want, s.len) == 0);
}
static tfrdv_code parse_key(const char* key, tfrdv_parsed_key* pk, tfrdv_status* st) {
    return tfrdv_key_parse(key, strlen(key), pk, st);
}
static tfrdv_code parse_dev(const char* name, tfrdv_device_name* dn, tfrdv_status* st) {
    return tfrdv_device_parse(name, strlen(name), dn, st);
}
static tfrdv_frame_iter fi(uint64_t frame, int64_t iter) {
    tfrdv_frame_iter f;
    f.frame_id = frame;
    f.iter_id = iter;
    return f;
}

/* ---- status codes ---------------------------------------------------------------------- */
static void test_code_str(void) {
    static const char* const names[17] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
        "UNAUTHENTICATED"};
    int i;
    TT_CHECK_EQ_INT(TFRDV_UNAUTHENTICATED, 16);
    TT_CHECK_EQ_INT(sizeof(tfrdv_code), 4);
    TT_CHECK_EQ_INT(TFRDV_INVALID_ARGUMENT, 3);
    TT_CHECK_EQ_INT(TFRDV_UNAUTHENTICATED, 16);
    for (i = 0; i < 17; i++) TT_CHECK_STR(tfrdv_code_str((tfrdv_code)i), names[i]);
    TT_CHECK_STR(tfrdv_code_str((tfrdv_code)17), "UNKNOWN_CODE");
    TT_CHECK_STR(tfrdv_code_str((tfrdv_code)-1), "UNKNOWN_CODE");
}

/* ---- key creation ---------------------------------------------------------------------- */
static void test_key_create_format(void) {
    char buf[256];
    size_t len = 0;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_key_create("/job:worker/replica:0/task:0/device:CPU:0", 0x1234,
                                     "/job:ps/replica:0/task:0/device:CPU:0", "edge_5_x",
                                     fi(0, 0), buf, sizeof buf, &len, &st), TFRDV_OK);
    TT_CHECK_STR(buf, "/job:worker/replica:0/task:0/device:CPU:0;0000000000001234;"
                      "/job:ps/replica:0/task:0/device:CPU:0;edge_5_x;0:0");
    TT_CHECK_EQ_INT(len, strlen(buf));
    TT_CHECK_EQ_INT(tfrdv_key_create(S, UINT64_MAX, D, "e", fi(0, 0), buf, sizeof buf, &len, &st), TFRDV_OK);
    TT_CHECK_STR(buf, S ";ffffffffffffffff;" D ";e;0:0");
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 0, D, "e", fi(0, 0), buf, sizeof buf, NULL, &st), TFRDV_OK);
    TT_CHECK_STR(buf, S ";0000000000000000;" D ";e;0:0");
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 0xABCDEFu, D, "e", fi(140737488355328u, 42), buf, sizeof buf, NULL, &st), TFRDV_OK);
    TT_CHECK_STR(buf, S ";0000000000abcdef;" D ";e;140737488355328:42");
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 1, D, "e", fi(3, -7), buf, sizeof buf, NULL, &st), TFRDV_OK);
    TT_CHECK_STR(buf, S ";0000000000000001;" D ";e;3:-7");
    /* devices are copied verbatim, legacy names included (no canonicalisation) */
    TT_CHECK_EQ_INT(tfrdv_key_create("/cpu:0", 1, "/gpu:0", "e", fi(0, 0), buf, sizeof buf, NULL, &st), TFRDV_OK);
    TT_CHECK_STR(buf, "/cpu:0;0000000000000001;/gpu:0;e;0:0");
}

static void test_key_illegal_frame_round_trip(void) {
    char buf[256];
    tfrdv_parsed_key pk;
    tfrdv_frame_iter f;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 0x1234, D, "e", fi(UINT64_MAX, -1), buf, sizeof buf, NULL, &st), TFRDV_OK);
    TT_CHECK_STR(buf, S ";0000000000001234;" D ";e;18446744073709551615:-1");
    TT_CHECK_EQ_INT(parse_key(buf, &pk, &st), TFRDV_OK);
    TT_CHECK(str_is(pk.frame_iter, "18446744073709551615:-1"));
    f = fi(0, 0);
    TT_CHECK_EQ_INT(tfrdv_frame_iter_parse(pk.frame_iter, &f, &st), TFRDV_OK);
    TT_CHECK(f.frame_id == UINT64_MAX);
    TT_CHECK_EQ_INT(f.iter_id, -1);
}

static void test_key_prefix_with_frame(void) {
    static const tfrdv_frame_iter frames[4] = {{0, 0}, {1, 2}, {18446744073709551615u, -1}, {5, INT64_MIN}};
    char pre[256], k1[256], k2[256];
    size_t plen = 0, l1 = 0, l2 = 0;
    tfrdv_status st;
    int i;
    TT_CHECK_EQ_INT(tfrdv_key_prefix(S, 0x1234, D, "edge_5_x", pre, sizeof pre, &plen, &st), TFRDV_OK);
    TT_CHECK_STR(pre, S ";0000000000001234;" D ";edge_5_x");
    TT_CHECK_EQ_INT(plen, strlen(pre));
    for (i = 0; i < 4; i++) {
        TT_CHECK_EQ_INT(tfrdv_key_with_frame(pre, plen, frames[i], k1, sizeof k1, &l1, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(tfrdv_key_create(S, 0x1234, D, "edge_5_x", frames[i], k2, sizeof k2, &l2, &st), TFRDV_OK);
        TT_CHECK_STR(k1, k2);
        TT_CHECK_EQ_INT(l1, l2);
    }
    TT_CHECK_STR(k1, S ";0000000000001234;" D ";edge_5_x;5:-9223372036854775808");
    /* the prefix rejects what create rejects */
    TT_CHECK_EQ_INT(tfrdv_key_prefix(S, 1, D, "", pre, sizeof pre, NULL, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_key_prefix(S, 1, "/job:1", "e", pre, sizeof pre, NULL, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "/job:1");
}

/* the implementation has an explicit "append in place" path (prefix == buf) */
static void test_key_with_frame_in_place(void) {
    char buf[256];
    size_t plen = 0, len = 0;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_key_prefix(S, 0xab, D, "e", buf, sizeof buf, &plen, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_key_with_frame(buf, plen, fi(2, 3), buf, sizeof buf, &len, &st), TFRDV_OK);
    TT_CHECK_STR(buf, S ";00000000000000ab;" D ";e;2:3");
    TT_CHECK_EQ_INT(len, strlen(S ";00000000000000ab;" D ";e;2:3"));
    /* in place without room: RESOURCE_EXHAUSTED, the prefix stays intact */
    TT_CHECK_EQ_INT(tfrdv_key_prefix(S, 0xab, D, "e", buf, sizeof buf, &plen, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_key_with_frame(buf, plen, fi(2, 3), buf, plen + 3, &len, &st), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_EQ_INT(len, plen + 4);
    TT_CHECK_EQ_INT(strlen(buf), plen + 2);
    TT_CHECK(memcmp(buf, S ";00000000000000ab;" D ";e;2", plen + 2) == 0);
    /* a prefix overlapping the output (other than exactly at its start) is refused, from either side */
    TT_CHECK_EQ_INT(tfrdv_key_prefix(S, 0xab, D, "e", buf, sizeof buf, &plen, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_key_with_frame(buf + 4, plen - 4, fi(0, 0), buf, sizeof buf, &len, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_key_with_frame(buf, plen, fi(0, 0), buf + 4, sizeof buf - 4, &len, &st), TFRDV_INVALID_ARGUMENT);
}

/* create writes straight into a buffer that fits and falls back to the bounded builder otherwise:
   every capacity around the needed size, every hex digit, numbers of every length, the canonical
   device check's limits (10-digit numbers take the general check) */
static void test_key_create_direct_write_edges(void) {
    static const tfrdv_frame_iter frames[] = {{0, 0}, {9, 10}, {99, -99}, {100, 12345678901234567}, {18446744073709551615u, INT64_MIN},
                                              {10000000000000000000u, INT64_MAX}, {1, -1}};
    char want[256], buf[256], pre[256];
    size_t i, cap, need, len, plen;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 0x0123456789abcdefu, D, "e", fi(0, 0), buf, sizeof buf, NULL, &st), TFRDV_OK);
    TT_CHECK_STR(buf, S ";0123456789abcdef;" D ";e;0:0");
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 0xfedcba9876543210u, D, "e", fi(0, 0), buf, sizeof buf, NULL, &st), TFRDV_OK);
    TT_CHECK_STR(buf, S ";fedcba9876543210;" D ";e;0:0");
    for (i = 0; i < sizeof frames / sizeof frames[0]; i++) {
        snprintf(want, sizeof want, S ";000000000000002a;" D ";edge;%llu:%lld", (unsigned long long)frames[i].frame_id,
                 (long long)frames[i].iter_id);
        need = strlen(want);
        for (cap = 0; cap <= need + 2; cap++) {
            tfrdv_code rc;
            memset(buf, 'Z', sizeof buf);
            len = 0;
            rc = tfrdv_key_create(S, 42, D, "edge", frames[i], cap ? buf : NULL, cap, &len, &st);
            TT_CHECK_EQ_INT(rc, cap > need ? TFRDV_OK : TFRDV_RESOURCE_EXHAUSTED);
            TT_CHECK_EQ_INT(len, need);
            if (cap) TT_CHECK(strlen(buf) == (cap > need ? need : cap - 1) && memcmp(buf, want, strlen(buf)) == 0);
            /* the same through a prefix, copied and in place */
            TT_CHECK_EQ_INT(tfrdv_key_prefix(S, 42, D, "edge", pre, sizeof pre, &plen, &st), TFRDV_OK);
            memset(buf, 'Z', sizeof buf);
            len = 0;
            rc = tfrdv_key_with_frame(pre, plen, frames[i], cap ? buf : NULL, cap, &len, &st);
            TT_CHECK_EQ_INT(rc, cap > need ? TFRDV_OK : TFRDV_RESOURCE_EXHAUSTED);
            TT_CHECK_EQ_INT(len, need);
            if (cap) TT_CHECK(strlen(buf) == (cap > need ? need : cap - 1) && memcmp(buf, want, strlen(buf)) == 0);
            if (cap > plen) {
                len = 0;
                rc = tfrdv_key_with_frame(pre, plen, frames[i], pre, cap, &len, &st);
                TT_CHECK_EQ_INT(rc, cap > need ? TFRDV_OK : TFRDV_RESOURCE_EXHAUSTED);
                TT_CHECK_EQ_INT(len, need);
                TT_CHECK(strlen(pre) == (cap > need ? need : cap - 1) && memcmp(pre, want, strlen(pre)) == 0);
            }
            memset(buf, 'Z', sizeof buf);
            len = 0;
            rc = tfrdv_key_prefix(S, 42, D, "edge", cap ? buf : NULL, cap, &len, &st);
            TT_CHECK_EQ_INT(rc, cap > plen ? TFRDV_OK : TFRDV_RESOURCE_EXHAUSTED);
            TT_CHECK_EQ_INT(len, plen);
        }
    }
    TT_CHECK_EQ_INT(tfrdv_key_create("/job:a/replica:2147483647/task:1234567890/device:CPU:999999999", 1, D, "e", fi(0, 0), buf,
                                     sizeof buf, NULL, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 1, "/job:a/replica:0/task:0/device:CPU:2147483648", "e", fi(0, 0), buf, sizeof buf,
                                     NULL, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 1, "/job:a/replica:0/task:0/device:CPU:0 ", "e", fi(0, 0), buf, sizeof buf, NULL, &st),
                    TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_key_create("/job:a/replica:0/task:0/device:CPU:0/job:b", 1, D, "e", fi(0, 0), buf, sizeof buf, NULL,
                                     &st), TFRDV_OK); /* not canonical (a repeated component): the general check */
    TT_CHECK_EQ_INT(tfrdv_key_create("/job:a/replica:0/task:0/device:CPU:", 1, D, "e", fi(0, 0), buf, sizeof buf, NULL, &st),
                    TFRDV_INVALID_ARGUMENT);
}

static void test_key_create_rejects(void) {
    static const struct { const char *src, *dst, *edge, *needle; } bad[] = {
        {S ";x", D, "e", S ";x"},
        {S, D ";x", "e", D ";x"},
        {S, D, "e;x", "e;x"},
        {S, D, ";", ";"},
        {S, D, "", "edge"},
        {"/job:123", D, "e", "/job:123"},
        {S, "foobar", "e", "foobar"},
        {"/job:foo/replica:-1/task:2/device:GPU:3", D, "e", "/job:foo/replica:-1/task:2/device:GPU:3"},
        {S, "/job:foo/replica:1/task:2/device:GPU:3/extra", "e", "/job:foo/replica:1/task:2/device:GPU:3/extra"},
    };
    char buf[256];
    size_t i, len = 77;
    tfrdv_status st;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&st, 0, sizeof st);
        strcpy(buf, "untouched");
        TT_CHECK_EQ_INT(tfrdv_key_create(bad[i].src, 1, bad[i].dst, bad[i].edge, fi(0, 0), buf, sizeof buf, &len, &st),
                        TFRDV_INVALID_ARGUMENT);
        TT_CHECK_EQ_INT(st.code, TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, bad[i].needle);
    }
    TT_CHECK_EQ_INT(tfrdv_key_create(NULL, 1, D, "e", fi(0, 0), buf, sizeof buf, &len, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 1, NULL, "e", fi(0, 0), buf, sizeof buf, &len, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 1, D, NULL, fi(0, 0), buf, sizeof buf, &len, &st), TFRDV_INVALID_ARGUMENT);
    /* the status is optional */
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 1, D, "", fi(0, 0), buf, sizeof buf, &len, NULL), TFRDV_INVALID_ARGUMENT);
}

static void test_key_buffer_too_small(void) {
    static const char want[] = S ";0000000000001234;" D ";e;0:0";
    char buf[256];
    size_t len = 0, need = sizeof want - 1;
    char needstr[32];
    tfrdv_status st;
    snprintf(needstr, sizeof needstr, "%u", (unsigned)(need + 1));
    memset(buf, 'Z', sizeof buf);
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 0x1234, D, "e", fi(0, 0), buf, need, &len, &st), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_EQ_INT(len, need);
    TT_CHECK_EQ_INT(st.code, TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_CONTAINS(st.msg, needstr);
    TT_CHECK_EQ_INT(strlen(buf), need - 1); /* truncated, NUL-terminated */
    TT_CHECK(memcmp(buf, want, need - 1) == 0);
    len = 0;
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 0x1234, D, "e", fi(0, 0), NULL, 0, &len, &st), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_EQ_INT(len, need); /* size query */
    TT_CHECK_EQ_INT(tfrdv_key_create(S, 0x1234, D, "e", fi(0, 0), buf, need + 1, &len, &st), TFRDV_OK);
    TT_CHECK_STR(buf, want);
    len = 0;
    TT_CHECK_EQ_INT(tfrdv_key_prefix(S, 0x1234, D, "e", buf, 10, &len, &st), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_EQ_INT(len, need - 4);
    TT_CHECK_EQ_INT(strlen(buf), 9);
    len = 0;
    TT_CHECK_EQ_INT(tfrdv_key_with_frame(want, need - 4, fi(0, 0), buf, need, &len, &st), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_EQ_INT(len, need);
    TT_CHECK_CONTAINS(st.msg, needstr);
}

/* ---- key parsing ----------------------------------------------------------------------- */
static void test_key_parse_table(void) {
    static const struct { const char* key; int ok; uint64_t inc; } t[] = {
        {S ";00000000000000ab;" D ";e;0:0", 1, 0xab},
        {S ";AB;" D ";e;0:0", 1, 0xab},
        {S ";00000000000000ab;" D ";e;0:0;", 1, 0xab},
        {S ";00000000000000ab;" D ";e;0:0;x", 0, 0},
        {S ";00000000000000ab;" D ";e", 0, 0},
        {S ";00000000000000ab;" D ";;0:0", 0, 0},
        {S ";00000000000000ab;" D ";e;garbage", 1, 0xab},
        {S ";;" D ";e;0:0", 0, 0},
        {S ";0x10;" D ";e;0:0", 0, 0},
        {S ";10000000000000000;" D ";e;0:0", 0, 0},
        {";00000000000000ab;" D ";e;0:0", 1, 0xab},
        {"/cpu:0;1;/gpu:0;e;0:0", 1, 1},
        /* [derived] more of the same rules */
        {S ";ffffffffffffffff;" D ";e;0:0", 1, 0xffffffffffffffffu},
        {S ";FfFfFfFfFfFfFfFf;" D ";e;0:0", 1, 0xffffffffffffffffu},
        {S ";0000ffffffffffffffff;" D ";e;0:0", 1, 0xffffffffffffffffu}, /* extra leading zeros */
        {S ";00000000000000ab;" D ";e;0:0;;", 0, 0},
        {S ";00000000000000ab;" D ";e;", 0, 0},
        {S ";+1;" D ";e;0:0", 0, 0},
        {S ";-1;" D ";e;0:0", 0, 0},
        {S "; 1;" D ";e;0:0", 0, 0},
        {S ";1g;" D ";e;0:0", 0, 0},
        {"/job:a-b;1;" D ";e;0:0", 0, 0},
        {S ";1;/job:foo/;e;0:0", 0, 0},
        {S ";1;;e;0:0", 1, 1},
        {"", 0, 0},
        {";;;;", 0, 0},
    };
    size_t i;
    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        tfrdv_parsed_key pk;
        tfrdv_status st;
        tfrdv_code rc;
        memset(&st, 0, sizeof st);
        rc = parse_key(t[i].key, &pk, &st);
        if (t[i].ok) {
            if (rc != TFRDV_OK) printf("    key %zu \"%s\" rejected: %s\n", i, t[i].key, st.msg);
            TT_CHECK_EQ_INT(rc, TFRDV_OK);
            if (rc == TFRDV_OK) TT_CHECK(pk.src_incarnation == t[i].inc);
        } else {
            if (rc != TFRDV_INVALID_ARGUMENT) printf("    key %zu \"%s\" accepted\n", i, t[i].key);
            TT_CHECK_EQ_INT(rc, TFRDV_INVALID_ARGUMENT);
            TT_CHECK_EQ_INT(st.code, TFRDV_INVALID_ARGUMENT);
            TT_CHECK_CONTAINS(st.msg, "Invalid rendezvous key");
            TT_CHECK_CONTAINS(st.msg, t[i].key);
        }
    }
}

static void test_key_parse_views(void) {
    static const char key[] = S ";0000000000001234;/job:b/replica:3/task:7/gpu:2;edge_5_x;4:-1;";
    char copy[sizeof key];
    tfrdv_parsed_key pk;
    tfrdv_status st;
    memcpy(copy, key, sizeof key);
    TT_CHECK_EQ_INT(parse_key(copy, &pk, &st), TFRDV_OK);
    TT_CHECK(pk.full.ptr == copy && pk.full.len == sizeof key - 1); /* views into caller memory */
    TT_CHECK(pk.src_device.ptr == copy);
    TT_CHECK(str_is(pk.src_device, S));
    TT_CHECK(str_is(pk.dst_device, "/job:b/replica:3/task:7/gpu:2"));
    TT_CHECK(str_is(pk.edge_name, "edge_5_x"));
    TT_CHECK(str_is(pk.frame_iter, "4:-1"));
    TT_CHECK(pk.src_incarnation == 0x1234);
    TT_CHECK(pk.hash == tfrdv_hash_bytes(copy, sizeof key - 1));
    TT_CHECK(pk.src.has_job && str_is(pk.src.job, "a"));
    TT_CHECK(pk.src.has_replica && pk.src.replica == 0 && pk.src.has_task && pk.src.task == 0);
    TT_CHECK(pk.src.has_type && str_is(pk.src.type, "CPU") && pk.src.has_id && pk.src.id == 0);
    TT_CHECK(pk.dst.has_job && str_is(pk.dst.job, "b"));
    TT_CHECK(pk.dst.has_replica && pk.dst.replica == 3 && pk.dst.has_task && pk.dst.task == 7);
    TT_CHECK(pk.dst.has_type && str_is(pk.dst.type, "GPU") && pk.dst.has_id && pk.dst.id == 2);
    /* empty src: ParseFullName("") succeeds with nothing set (implicit local host device) */
    TT_CHECK_EQ_INT(parse_key(";00000000000000ab;" D ";e;0:0", &pk, &st), TFRDV_OK);
    TT_CHECK(pk.src_device.len == 0);
    TT_CHECK(!pk.src.has_job && !pk.src.has_replica && !pk.src.has_task && !pk.src.has_type && !pk.src.has_id);
    /* length-based: bytes after len are not looked at, embedded NUL is just a byte */
    TT_CHECK_EQ_INT(tfrdv_key_parse(S ";1;" D ";e;0:0;x", strlen(S ";1;" D ";e;0:0"), &pk, &st), TFRDV_OK);
    TT_CHECK(str_is(pk.frame_iter, "0:0"));
    TT_CHECK_EQ_INT(tfrdv_key_parse(S ";1;" D ";e\0f;0:0", sizeof(S ";1;" D ";e\0f;0:0") - 1, &pk, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(pk.edge_name.len, 3);
    TT_CHECK_EQ_INT(tfrdv_key_parse(NULL, 5, &pk, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_key_parse(key, sizeof key - 1, NULL, &st), TFRDV_INVALID_ARGUMENT);
}

/* every key create accepts parses back to the same parts */
static uint64_t rng_state = 0x243f6a8885a308d3u;
static uint64_t rng(void) {
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    return rng_state >> 11;
}
static const char* const valid_devices[] = {
    "", "/", "/job:a/replica:0/task:0/device:CPU:0", "/job:worker/replica:12/task:3/gpu:1",
    "/cpu:0", "/GPU:*", "/job:*/replica:4/device:myspecialdevice:13", "/device:GPU",
    "/job:foo_bar/task:2147483647", "/device:*:0", "/task:1/job:x/replica:01", "/job:x/job:y"};
static void test_key_create_parse_loop(void) {
    static const char edge_chars[] = "abcXYZ019_-:/.* \t\x7f\xc3\xa9";
    const size_t ndev = sizeof valid_devices / sizeof valid_devices[0];
    int n;
    for (n = 0; n < 400; n++) {
        const char* src = valid_devices[rng() % ndev];
        const char* dst = valid_devices[rng() % ndev];
        char edge[24], key[512];
        size_t elen = 1 + (size_t)(rng() % 20), i, len = 0;
        uint64_t inc = rng() * 2654435761u ^ (rng() << 40);
        tfrdv_frame_iter f = fi(n % 3 ? rng() : 0, n % 5 ? (int64_t)rng() - (int64_t)(rng() >> 1) : 0), g;
        tfrdv_parsed_key pk;
        tfrdv_status st;
        for (i = 0; i < elen; i++) edge[i] = edge_chars[rng() % (sizeof edge_chars - 1)];
        edge[elen] = 0;
        TT_CHECK_EQ_INT(tfrdv_key_create(src, inc, dst, edge, f, key, sizeof key, &len, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(len, strlen(key));
        if (tfrdv_key_parse(key, len, &pk, &st) != TFRDV_OK) {
            printf("    created key does not parse: \"%s\": %s\n", key, st.msg);
            tt_cur++;
            continue;
        }
        TT_CHECK(str_is(pk.src_device, src));
        TT_CHECK(str_is(pk.dst_device, dst));
        TT_CHECK(str_is(pk.edge_name, edge));
        TT_CHECK(pk.src_incarnation == inc);
        TT_CHECK(pk.full.ptr == key && pk.full.len == len);
        TT_CHECK_EQ_INT(tfrdv_frame_iter_parse(pk.frame_iter, &g, &st), TFRDV_OK);
        TT_CHECK(g.frame_id == f.frame_id && g.iter_id == f.iter_id);
    }
}

/* The one-pass parser for the usual key (canonical device names, 16 incarnation digits) against
   the general one: each key is also written in forms that take the general path with the same
   meaning (the incarnation with a 17th, leading zero; both device names with replica before job),
   and both must decide alike and yield the same fields. The parts come from alphabets around every
   boundary the fast scanner tests (hex ranges, number lengths, name characters, ';' counts). */
static int dev_same(const tfrdv_device_name* a, const tfrdv_device_name* b) {
    return a->has_job == b->has_job && a->has_replica == b->has_replica && a->has_task == b->has_task &&
           a->has_type == b->has_type && a->has_id == b->has_id && (!a->has_job || (a->job.len == b->job.len &&
           memcmp(a->job.ptr, b->job.ptr, a->job.len) == 0)) && (!a->has_replica || a->replica == b->replica) &&
           (!a->has_task || a->task == b->task) && (!a->has_type || (a->type.len == b->type.len &&
           memcmp(a->type.ptr, b->type.ptr, a->type.len) == 0)) && (!a->has_id || a->id == b->id);
}
static int str_same(tfrdv_str a, tfrdv_str b) { return a.len == b.len && (!a.len || memcmp(a.ptr, b.ptr, a.len) == 0); }
static void pick(char* out, size_t n, const char* alphabet) {
    size_t i, k = strlen(alphabet);
    for (i = 0; i < n; i++) out[i] = alphabet[rng() % k];
    out[n] = 0;
}
static const char* pick_of(const char* const* v, size_t n) { return v[rng() % n]; }
static void test_key_fast_path_matches_general(void) {
    static const char* const nums[] = {"0", "7", "01", "123456789", "999999999", "1234567890", "2147483647",
                                       "2147483648", "", "-1", "1a", "*"};
    static const char* const names[] = {"a", "worker", "A9_", "ps_0", "_a", "9a", "a-b", "", "a.b", "a:b", "*"};
    static const char* const edges[] = {"e", "edge_17_weights", "", "e;x", "a:b/c d"};
    static const char* const frames[] = {"0:0", "4:-1", "", "0:0;", "0:0;;", ";", "0:0;x", "garbage"};
    static const char hex[] = "0123456789abcdefABCDEF0123456789abcdef/:@`GgFf\x80 ;";
    int n, fast_ok = 0;
    for (n = 0; n < 20000; n++) {
        char key[3][512], inc[17], sj[16], dj[16];
        const char *sr = pick_of(nums, 12), *st_ = pick_of(nums, 12), *si = pick_of(nums, 12);
        const char *dr = pick_of(nums, 12), *dt = pick_of(nums, 12), *di = pick_of(nums, 12);
        const char *stype = pick_of(names, 11), *dtype = pick_of(names, 11);
        const char *edge = pick_of(edges, 5), *frame = pick_of(frames, 8);
        tfrdv_parsed_key pk[3];
        tfrdv_code rc[3];
        int v;
        /* mostly valid parts, so most keys reach the later checks */
        if (rng() % 4) sr = st_ = si = dr = dt = di = "0";
        if (rng() % 3) stype = dtype = "CPU";
        if (rng() % 3) edge = "e";
        if (rng() % 3) frame = "0:0";
        snprintf(sj, sizeof sj, "%s", rng() % 4 ? "a" : pick_of(names, 11));
        snprintf(dj, sizeof dj, "%s", rng() % 4 ? "b" : pick_of(names, 11));
        pick(inc, 16, rng() % 2 ? "0123456789abcdefABCDEF" : hex);
        snprintf(key[0], sizeof key[0], "/job:%s/replica:%s/task:%s/device:%s:%s;%s;/job:%s/replica:%s/task:%s/device:%s:%s;%s;%s",
                 sj, sr, st_, stype, si, inc, dj, dr, dt, dtype, di, edge, frame);
        snprintf(key[1], sizeof key[1], "/job:%s/replica:%s/task:%s/device:%s:%s;0%s;/job:%s/replica:%s/task:%s/device:%s:%s;%s;%s",
                 sj, sr, st_, stype, si, inc, dj, dr, dt, dtype, di, edge, frame);
        snprintf(key[2], sizeof key[2], "/replica:%s/job:%s/task:%s/device:%s:%s;%s;/replica:%s/job:%s/task:%s/device:%s:%s;%s;%s",
                 sr, sj, st_, stype, si, inc, dr, dj, dt, dtype, di, edge, frame);
        for (v = 0; v < 3; v++) rc[v] = parse_key(key[v], &pk[v], NULL);
        fast_ok += rc[0] == TFRDV_OK;
        for (v = 1; v < 3; v++) {
            int same = rc[v] == rc[0];
            if (same && rc[0] == TFRDV_OK)
                same = pk[v].src_incarnation == pk[0].src_incarnation && dev_same(&pk[v].src, &pk[0].src) &&
                       dev_same(&pk[v].dst, &pk[0].dst) && str_same(pk[v].edge_name, pk[0].edge_name) &&
                       str_same(pk[v].frame_iter, pk[0].frame_iter) && pk[0].hash == tfrdv_hash_bytes(key[0], strlen(key[0]));
            if (!same) {
                printf("    \"%s\" (rc %d) and \"%s\" (rc %d) differ\n", key[0], (int)rc[0], key[v], (int)rc[v]);
                tt_cur++;
            }
        }
    }
    TT_CHECK(fast_ok > 2000); /* the valid region was reached often */
}

/* ---- frame:iter ------------------------------------------------------------------------ */
static tfrdv_str cstr(const char* s) {
    tfrdv_str r;
    r.ptr = s;
    r.len = strlen(s);
    return r;
}
static void test_frame_iter_parse(void) {
    static const struct { const char* s; uint64_t frame; int64_t iter; } ok[] = {
        {"0:0", 0, 0}, {"7:42", 7, 42}, {"18446744073709551615:-1", 18446744073709551615u, -1},
        {"0:9223372036854775807", 0, INT64_MAX}, {"0:-9223372036854775808", 0, INT64_MIN},
        {"00012:007", 12, 7}, {"1:-0", 1, 0}};
    static const char* const bad[] = {
        "", ":", "0:", ":0", "garbage", "0", "-1:0", "+1:0", "1:+0", "1:0:", " 1:0", "1:0 ", "1: 0",
        "1:-", "0x1:0", "18446744073709551616:0", "99999999999999999999:0", "0:9223372036854775808",
        "0:-9223372036854775809", "0:18446744073709551620", "0:-18446744073709551620",
        "0:99999999999999999999"};
    size_t i;
    tfrdv_frame_iter f;
    tfrdv_status st;
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        f = fi(99, 99);
        TT_CHECK_EQ_INT(tfrdv_frame_iter_parse(cstr(ok[i].s), &f, &st), TFRDV_OK);
        TT_CHECK(f.frame_id == ok[i].frame);
        TT_CHECK(f.iter_id == ok[i].iter);
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = fi(99, 99);
        memset(&st, 0, sizeof st);
        if (tfrdv_frame_iter_parse(cstr(bad[i]), &f, &st) != TFRDV_INVALID_ARGUMENT) {
            printf("    frame:iter \"%s\" accepted as %llu:%lld\n", bad[i],
                   (unsigned long long)f.frame_id, (long long)f.iter_id);
            tt_cur++;
        }
        TT_CHECK_EQ_INT(st.code, TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, bad[i]);
    }
}

/* ---- device names ---------------------------------------------------------------------- */
typedef struct dev_vec {
    const char* name;
    int has_job; const char* job;
    int has_replica, replica, has_task, task;
    int has_type; const char* type;
    int has_id, id;
} dev_vec;
static const dev_vec dev_accept[] = {
    {"/job:foo/replica:1/task:2/device:GPU:3", 1, "foo", 1, 1, 1, 2, 1, "GPU", 1, 3},
    {"/job:foo/replica:1/task:2/gpu:3", 1, "foo", 1, 1, 1, 2, 1, "GPU", 1, 3},
    {"/job:foo_bar/replica:1/task:2/device:GPU:3", 1, "foo_bar", 1, 1, 1, 2, 1, "GPU", 1, 3},
    {"/job:*/replica:4/gpu:*", 0, 0, 1, 4, 0, 0, 1, "GPU", 0, 0},
    {"/job:*/replica:4/device:GPU:*", 0, 0, 1, 4, 0, 0, 1, "GPU", 0, 0},
    {"/job:*/device:GPU/replica:4", 0, 0, 1, 4, 0, 0, 1, "GPU", 0, 0},
    {"/job:*/replica:4/device:myspecialdevice:13", 0, 0, 1, 4, 0, 0, 1, "myspecialdevice", 1, 13},
    {"/", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"/job:*/replica:4/device:GPU:5", 0, 0, 1, 4, 0, 0, 1, "GPU", 1, 5},
    {"/gpu:*/job:*/replica:4", 0, 0, 1, 4, 0, 0, 1, "GPU", 0, 0},
    {"", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"/job:foo/CPU:*", 1, "foo", 0, 0, 0, 0, 1, "CPU", 0, 0},
    /* Extra [derived] */
    {"/replica:01", 0, 0, 1, 1, 0, 0, 0, 0, 0, 0},
    {"/device:*:0", 0, 0, 0, 0, 0, 0, 0, 0, 1, 0},
    {"/job:x/job:y", 1, "y", 0, 0, 0, 0, 0, 0, 0, 0},
    {"/device:GPU", 0, 0, 0, 0, 0, 0, 1, "GPU", 0, 0},
    {"/replica:2147483647", 0, 0, 1, 2147483647, 0, 0, 0, 0, 0, 0},
    {"/task:2147483647/device:cpu:2147483647", 0, 0, 0, 0, 1, 2147483647, 1, "cpu", 1, 2147483647},
    {"/CPU:7/device:someDevice:3", 0, 0, 0, 0, 0, 0, 1, "someDevice", 1, 3},
    {"/job:foo/cpu:1/task:2/replica:1", 1, "foo", 1, 1, 1, 2, 1, "CPU", 1, 1},
    {"/job:A9_/device:X_1:0", 1, "A9_", 0, 0, 0, 0, 1, "X_1", 1, 0},
};
static void check_dev(const tfrdv_device_name* dn, const dev_vec* v) {
    TT_CHECK_EQ_INT(dn->has_job, v->has_job);
    if (v->has_job) TT_CHECK(str_is(dn->job, v->job));
    TT_CHECK_EQ_INT(dn->has_replica, v->has_replica);
    if (v->has_replica) TT_CHECK_EQ_INT(dn->replica, v->replica);
    TT_CHECK_EQ_INT(dn->has_task, v->has_task);
    if (v->has_task) TT_CHECK_EQ_INT(dn->task, v->task);
    TT_CHECK_EQ_INT(dn->has_type, v->has_type);
    if (v->has_type) TT_CHECK(str_is(dn->type, v->type));
    TT_CHECK_EQ_INT(dn->has_id, v->has_id);
    if (v->has_id) TT_CHECK_EQ_INT(dn->id, v->id);
}
static void test_device_accept(void) {
    size_t i;
    for (i = 0; i < sizeof dev_accept / sizeof dev_accept[0]; i++) {
        tfrdv_device_name dn;
        tfrdv_status st;
        int before = tt_cur;
        TT_CHECK_EQ_INT(parse_dev(dev_accept[i].name, &dn, &st), TFRDV_OK);
        check_dev(&dn, &dev_accept[i]);
        if (tt_cur != before) printf("    ^ device \"%s\"\n", dev_accept[i].name);
    }
}

static void test_device_reject(void) {
    static const char* const bad[] = {
        "foobar", "/job:123/replica:1/task:2/device:GPU:3", "/job:123/replica:1/task:2/gpu:",
        "/job:123/replica:1/task:2/device:gpu:", "/job:foo/replica:-1/task:2/device:GPU:3",
        "/job:foo/replica:1/task:-2/device:GPU:3", "/job:foo/replica:1/task:2/bar:3",
        "/job:foo/replica:1/task:2/device:GPU:3/extra", "/job:foo/task:0/replica/cpu:1",
        /* Extra [derived] */
        "/job:a-b", "/job:", "/job:foo/", "//", "/job:foo//replica:1", "/job:a.b", "/job:_a",
        "/replica:2147483648", "/task:4294967296", "/replica:99999999999999999999999",
        "/device:GPU:2147483648", "/gpu:2147483648", "/cpu:-1", "/replica:-1", "/task:-0",
        "/replica:", "/gpu:", "/cpu:x", "/device:1GPU:0", "/device:GPU:x", "/device:", "/device:GPU:",
        "/job:foo ", " /job:foo", "job:foo", "/Job:foo", "/job:*x", "/replica:+1", "/device:GP-U:0"};
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tfrdv_device_name dn;
        tfrdv_status st;
        memset(&st, 0, sizeof st);
        if (parse_dev(bad[i], &dn, &st) != TFRDV_INVALID_ARGUMENT) {
            printf("    device \"%s\" accepted\n", bad[i]);
            tt_cur++;
        }
        TT_CHECK_EQ_INT(st.code, TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, bad[i]);
    }
    TT_CHECK_EQ_INT(tfrdv_device_parse("/cpu:0", 6, NULL, NULL), TFRDV_INVALID_ARGUMENT);
}

static int fmt_is(const char* name, const char* want) {
    tfrdv_device_name dn;
    char buf[128];
    size_t n;
    if (parse_dev(name, &dn, NULL) != TFRDV_OK) return 0;
    n = tfrdv_device_format(&dn, buf, sizeof buf);
    if (n != strlen(want) || strcmp(buf, want) != 0) {
        printf("    format(\"%s\") = \"%s\", want \"%s\"\n", name, buf, want);
        return 0;
    }
    return 1;
}
static void test_device_format(void) {
    static const char* const legacy[] = {"/cpu:3", "/gpu:3", "/CPU:3", "/GPU:3", "/device:cpu:3",
                                         "/device:someDevice:3"};
    static const char* const canon[] = {"/device:CPU:3", "/device:GPU:3", "/device:CPU:3",
                                        "/device:GPU:3", "/device:cpu:3", "/device:someDevice:3"};
    tfrdv_device_name dn;
    char buf[16];
    int mask;
    size_t d;
    TT_CHECK(fmt_is("/gpu:*", "/device:GPU:*"));
    TT_CHECK(fmt_is("/job:foo/cpu:1/task:2/replica:1", "/job:foo/replica:1/task:2/device:CPU:1"));
    TT_CHECK(fmt_is("/device:cpu:3", "/device:cpu:3"));
    TT_CHECK(fmt_is("/device:GPU", "/device:GPU:*"));
    TT_CHECK(fmt_is("/job:*/replica:4/gpu:*", "/replica:4/device:GPU:*"));
    TT_CHECK(fmt_is("/replica:01", "/replica:1"));
    TT_CHECK(fmt_is("/device:*:0", "")); /* no type: the device part is not printed */
    TT_CHECK(fmt_is("/", ""));
    TT_CHECK(fmt_is("", ""));
    /* every subset of {job, replica, task, device}, in both orders, prints canonically */
    for (mask = 0; mask < 8; mask++) {
        for (d = 0; d < sizeof legacy / sizeof legacy[0]; d++) {
            char in[128], rev[128], want[128];
            snprintf(in, sizeof in, "%s%s%s%s", mask & 1 ? "/job:foo" : "", mask & 2 ? "/replica:3" : "",
                     mask & 4 ? "/task:2" : "", legacy[d]);
            snprintf(rev, sizeof rev, "%s%s%s%s", legacy[d], mask & 4 ? "/task:2" : "",
                     mask & 2 ? "/replica:3" : "", mask & 1 ? "/job:foo" : "");
            snprintf(want, sizeof want, "%s%s%s%s", mask & 1 ? "/job:foo" : "", mask & 2 ? "/replica:3" : "",
                     mask & 4 ? "/task:2" : "", canon[d]);
            TT_CHECK(fmt_is(in, want));
            TT_CHECK(fmt_is(rev, want));
            TT_CHECK(fmt_is(want, want));
        }
    }
    /* snprintf-like: returns the full length, truncates, NUL-terminates */
    TT_CHECK_EQ_INT(parse_dev("/job:foo/replica:1/task:2/gpu:3", &dn, NULL), TFRDV_OK);
    memset(buf, 'Z', sizeof buf);
    TT_CHECK_EQ_INT(tfrdv_device_format(&dn, buf, 8), strlen("/job:foo/replica:1/task:2/device:GPU:3"));
    TT_CHECK_STR(buf, "/job:fo");
    TT_CHECK_EQ_INT(tfrdv_device_format(&dn, NULL, 0), strlen("/job:foo/replica:1/task:2/device:GPU:3"));
}

static void test_device_same_address_space(void) {
    static const char a[] = "/job:foo/replica:1/task:2/cpu:3";
    static const struct { const char* b; int same; } t[] = {
        {"/job:foo/replica:1/task:2/device:GPU:4", 1},
        {"/job:foo/replica:1/task:3/device:GPU:4", 0},
        {"/job:foo/replica:10/task:2/device:GPU:4", 0},
        {"/job:bar/replica:1/task:2/device:GPU:4", 0},
        {"/job:foo/replica:1/task:2", 1},
        {"/task:2/replica:1/job:foo", 1},
        {"/job:foo/replica:1/device:GPU:4", 0}, /* task missing */
        {"/job:*/replica:1/task:2/device:GPU:4", 0},
        {"/job:fo/replica:1/task:2/device:GPU:4", 0},
        {"/job:foo/replica:1/task:2/device:GPU:4/extra", 0}, /* parse failure */
    };
    tfrdv_device_name x, y;
    size_t i;
    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        TT_CHECK_EQ_INT(tfrdv_device_same_address_space(a, strlen(a), t[i].b, strlen(t[i].b)), t[i].same);
        TT_CHECK_EQ_INT(tfrdv_device_same_address_space(t[i].b, strlen(t[i].b), a, strlen(a)), t[i].same);
    }
    TT_CHECK_EQ_INT(tfrdv_device_same_address_space("/job:foo/replica:1", 18, "/job:foo/replica:1", 18), 0);
    TT_CHECK_EQ_INT(tfrdv_device_same_address_space("", 0, "", 0), 0);
    TT_CHECK_EQ_INT(parse_dev(a, &x, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(parse_dev("/job:foo/replica:1/task:2/device:GPU:4", &y, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_device_name_same_address_space(&x, &y), 1);
    TT_CHECK_EQ_INT(parse_dev("/job:foo/replica:1/task:3/device:GPU:4", &y, NULL), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_device_name_same_address_space(&x, &y), 0);
    TT_CHECK_EQ_INT(tfrdv_device_name_same_address_space(&x, NULL), 0);
}

static void test_device_local_name(void) {
    static const struct { const char* in; const char* out; } ok[] = {
        {"/device:CPU:1", "/device:CPU:1"},
        {"/device:MySpecialDevice:13", "/device:MySpecialDevice:13"},
        {"/job:foo/replica:1/task:2/cpu:3", "/device:CPU:3"},
        {"/job:foo/replica:1/task:2/device:abc:73", "/device:abc:73"},
        {"/gpu:0/job:x", "/device:GPU:0"},
        /* names that parse but lack type or id: TensorFlow 2.21 builds the name from the unset
           fields (an unset type is "", an unset id 0) instead of failing */
        {"", "/device::0"},
        {"/device:GPU", "/device:GPU:0"},
        {"/device:*:3", "/device::3"},
        {"/job:foo/replica:1/task:2", "/device::0"},
        {"/gpu:*", "/device:GPU:0"},
        /* a later wildcard or a missing id clears the flag, not the value (TensorFlow 2.21) */
        {"/device:GPU:3/device:*:*", "/device:GPU:3"},
        {"/replica:*/device:is:9/device:*", "/device:is:9"},
        {"/job:worker/CPU:8/replica:4/device:*", "/device:CPU:8"},
        {"/replica:*/task:6/cpu:0054/device:gpu", "/device:gpu:54"}};
    static const char* const bad[] = {"foobar", "/job:foo/cpu:1/", "/device:GPU:x"};
    char buf[64];
    tfrdv_status st;
    size_t i;
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        memset(&st, 0, sizeof st);
        st.code = TFRDV_INTERNAL;
        TT_CHECK_EQ_INT(tfrdv_device_local_name(ok[i].in, strlen(ok[i].in), buf, sizeof buf, &st), strlen(ok[i].out));
        TT_CHECK_STR(buf, ok[i].out);
        TT_CHECK_EQ_INT(st.code, TFRDV_OK);
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&st, 0, sizeof st);
        TT_CHECK_EQ_INT(tfrdv_device_local_name(bad[i], strlen(bad[i]), buf, sizeof buf, &st), 0);
        TT_CHECK_EQ_INT(st.code, TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, bad[i]);
    }
    memset(buf, 'Z', sizeof buf);
    TT_CHECK_EQ_INT(tfrdv_device_local_name("/cpu:12", 7, buf, 5, NULL), strlen("/device:CPU:12"));
    TT_CHECK_STR(buf, "/dev");
}

static void test_device_parse_local(void) {
    static const char* const bad[] = {"cpu:abc", "abc:", "abc", "myspecialdevice", "", ":1", "1CPU:0",
                                      "CPU:1x", "CPU:-1", "CPU:2147483648", "CPU:*", "/device:CPU:1",
                                      "C-PU:1", "CPU::1", " CPU:1"};
    tfrdv_str type;
    int id = -5;
    tfrdv_status st;
    size_t i;
    TT_CHECK_EQ_INT(tfrdv_device_parse_local("CPU:10", 6, &type, &id, &st), TFRDV_OK);
    TT_CHECK(str_is(type, "CPU"));
    TT_CHECK_EQ_INT(id, 10);
    TT_CHECK_EQ_INT(tfrdv_device_parse_local("myspecialdevice_2:2147483647", 28, &type, &id, &st), TFRDV_OK);
    TT_CHECK(str_is(type, "myspecialdevice_2"));
    TT_CHECK_EQ_INT(id, 2147483647);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&st, 0, sizeof st);
        if (tfrdv_device_parse_local(bad[i], strlen(bad[i]), &type, &id, &st) != TFRDV_INVALID_ARGUMENT) {
            printf("    local name \"%s\" accepted\n", bad[i]);
            tt_cur++;
        }
        TT_CHECK_EQ_INT(st.code, TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, bad[i]);
    }
}

static void test_device_split(void) {
    static const struct { const char *in, *task, *dev; } ok[] = {
        {"/job:foo/replica:1/task:2/cpu:1", "/job:foo/replica:1/task:2", "CPU:1"},
        {"/job:foo/cpu:1/task:2/replica:1", "/job:foo/replica:1/task:2", "CPU:1"},
        {"/device:GPU:3", "", "GPU:3"},
        {"/device:myspecialdevice:3", "", "myspecialdevice:3"},
        {"/task:4/gpu:0", "/task:4", "GPU:0"}};
    static const char* const bad[] = {"gpu:3", "/job:foo/task:2/replica:1", "/device:GPU", "/gpu:*",
                                      "/device:*:1", "", "foobar"};
    char task[64], dev[32];
    size_t tlen = 0, dlen = 0, i;
    tfrdv_status st;
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        TT_CHECK_EQ_INT(tfrdv_device_split(ok[i].in, strlen(ok[i].in), task, sizeof task, &tlen, dev,
                                           sizeof dev, &dlen, &st), TFRDV_OK);
        TT_CHECK_STR(task, ok[i].task);
        TT_CHECK_STR(dev, ok[i].dev);
        TT_CHECK_EQ_INT(tlen, strlen(ok[i].task));
        TT_CHECK_EQ_INT(dlen, strlen(ok[i].dev));
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&st, 0, sizeof st);
        TT_CHECK_EQ_INT(tfrdv_device_split(bad[i], strlen(bad[i]), task, sizeof task, &tlen, dev,
                                           sizeof dev, &dlen, &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK_EQ_INT(st.code, TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, bad[i]);
    }
    /* too small: RESOURCE_EXHAUSTED, the full lengths reported, outputs truncated */
    tlen = dlen = 0;
    TT_CHECK_EQ_INT(tfrdv_device_split("/job:foo/replica:1/task:2/cpu:1", 31, task, 5, &tlen, dev,
                                       sizeof dev, &dlen, &st), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_EQ_INT(tlen, 25);
    TT_CHECK_EQ_INT(dlen, 5);
    TT_CHECK_STR(task, "/job");
    TT_CHECK_CONTAINS(st.msg, "26");
    TT_CHECK_EQ_INT(tfrdv_device_split("/job:foo/replica:1/task:2/cpu:1", 31, task, sizeof task, &tlen,
                                       dev, 5, &dlen, &st), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_EQ_INT(dlen, 5);
    TT_CHECK_STR(dev, "CPU:");
    TT_CHECK_CONTAINS(st.msg, "6");
}

/* ---- hash ------------------------------------------------------------------------------ */
static int cmp_u64(const void* a, const void* b) {
    uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
    return x < y ? -1 : x > y;
}
static void test_hash(void) {
    static uint64_t h[10000];
    char a[128], b[128], key[256];
    int i, dups = 0;
    tfrdv_parsed_key pk;
    strcpy(a, S ";0000000000001234;" D ";e;0:0");
    strcpy(b, a);
    TT_CHECK(tfrdv_hash_bytes(a, strlen(a)) == tfrdv_hash_bytes(b, strlen(b)));
    TT_CHECK(tfrdv_hash_bytes(a, strlen(a)) != tfrdv_hash_bytes(a, strlen(a) - 1));
    TT_CHECK(tfrdv_hash_bytes("", 0) == tfrdv_hash_bytes(a, 0));
    TT_CHECK(tfrdv_hash_bytes("\0", 1) != tfrdv_hash_bytes("", 0));
    TT_CHECK(tfrdv_hash_bytes("\0\0", 2) != tfrdv_hash_bytes("\0", 1));
    for (i = 0; i < 10000; i++) {
        char edge[32];
        snprintf(edge, sizeof edge, "edge_%d_x", i % 2500);
        TT_CHECK_EQ_INT(tfrdv_key_create(i % 2 ? S : D, (uint64_t)(i / 5000), i % 2 ? D : S, edge,
                                         fi((uint64_t)((i / 2500) % 2), 0), key, sizeof key, NULL, NULL), TFRDV_OK);
        TT_CHECK_EQ_INT(parse_key(key, &pk, NULL), TFRDV_OK);
        h[i] = tfrdv_hash_bytes(key, strlen(key));
        TT_CHECK(pk.hash == h[i]);
    }
    qsort(h, 10000, sizeof h[0], cmp_u64);
    for (i = 1; i < 10000; i++) dups += h[i] == h[i - 1];
    TT_CHECK_EQ_INT(dups, 0);
}

/* ---- status helper --------------------------------------------------------------------- */
static void test_status_set(void) {
    tfrdv_status st;
    char big[600];
    TT_CHECK_EQ_INT(tfrdv_status_set(&st, TFRDV_ABORTED, "Cleanup 7"), TFRDV_ABORTED);
    TT_CHECK_EQ_INT(st.code, TFRDV_ABORTED);
    TT_CHECK_STR(st.msg, "Cleanup 7");
    memset(big, 'm', sizeof big - 1);
    big[sizeof big - 1] = 0;
    TT_CHECK_EQ_INT(tfrdv_status_set(&st, TFRDV_INTERNAL, big), TFRDV_INTERNAL);
    TT_CHECK_EQ_INT(strlen(st.msg), TFRDV_STATUS_MSG_MAX - 1); /* truncated, never allocated */
    TT_CHECK_EQ_INT(tfrdv_status_set(&st, TFRDV_OK, NULL), TFRDV_OK);
    TT_CHECK_STR(st.msg, "");
    TT_CHECK_EQ_INT(tfrdv_status_set(NULL, TFRDV_UNAVAILABLE, "x"), TFRDV_UNAVAILABLE);
}

/* bytes a peer chose reach statuses and logs escaped: no forged lines, no terminal sequences */
static void test_escape(void) {
    char out[64], big[TFRDV_STATUS_MSG_MAX * 2];
    size_t cap, cut;
    tfrdv_status st;
    tfrdv_key k;
    static const char evil[] = "/job:a\n[ERROR] x\x1b[2J\\\x00\xff";
    size_t n = tfrdv_escape(out, sizeof out, evil, sizeof evil - 1);
    TT_CHECK_STR(out, "/job:a\\x0a[ERROR] x\\x1b[2J\\\\\\x00\\xff");
    TT_CHECK_EQ_INT(n, strlen(out));
    TT_CHECK_EQ_INT(tfrdv_escape(out, 5, "ab\ncd", 5), 8); /* full length, like snprintf */
    TT_CHECK_STR(out, "ab"); /* never a split escape ("ab\\x" reads as other bytes) */
    for (cap = 1; cap <= 12; cap++) { /* every cut of "a\x01\\b": whole escapes or none */
        static const char* const want[13] = {"", "", "a", "a", "a", "a", "a\\x01", "a\\x01", "a\\x01\\\\",
                                              "a\\x01\\\\b", "a\\x01\\\\b", "a\\x01\\\\b", "a\\x01\\\\b"};
        TT_CHECK_EQ_INT(tfrdv_escape(out, cap, "a\x01\\b", 4), 8);
        TT_CHECK_STR(out, want[cap]);
    }
    TT_CHECK_EQ_INT(tfrdv_escape(NULL, 0, "a\tb", 3), 6);
    TT_CHECK_EQ_INT(tfrdv_escape(out, sizeof out, NULL, 0), 0);
    TT_CHECK_STR(out, "");
    /* a key with a line break in its edge name: the refusal names it escaped */
    TT_CHECK_EQ_INT(tfrdv_key_from(&k, "a\nb", 3, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK(strchr(st.msg, '\n') == NULL);
    TT_CHECK(strstr(st.msg, "a\\x0ab") != NULL);
    /* a status cut at its size never ends inside an escape: every position of the first \n */
    for (cut = 150; cut < TFRDV_STATUS_MSG_MAX + 8; cut++) {
        size_t L;
        memset(big, 'e', sizeof big);
        big[cut] = '\n';
        TT_CHECK_EQ_INT(tfrdv_key_from(&k, big, sizeof big, &st), TFRDV_INVALID_ARGUMENT);
        L = strlen(st.msg);
        TT_CHECK(L < TFRDV_STATUS_MSG_MAX);
        if (L >= 1) TT_CHECK(st.msg[L - 1] != '\\');
        if (L >= 2) TT_CHECK(!(st.msg[L - 2] == '\\' && st.msg[L - 1] == 'x'));
        if (L >= 3) TT_CHECK(!(st.msg[L - 3] == '\\' && st.msg[L - 2] == 'x'));
    }
}

/* none of the argument errors above may reach a debug tripwire: they are reported, not asserted */
static void test_no_assert_tripped(void) { TT_CHECK_EQ_INT(tt_asserts, 0); }

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_code_str);
    TT_RUN(test_status_set);
    TT_RUN(test_key_create_format);
    TT_RUN(test_key_illegal_frame_round_trip);
    TT_RUN(test_key_prefix_with_frame);
    TT_RUN(test_key_with_frame_in_place);
    TT_RUN(test_key_create_direct_write_edges);
    TT_RUN(test_key_create_rejects);
    TT_RUN(test_key_buffer_too_small);
    TT_RUN(test_key_parse_table);
    TT_RUN(test_key_parse_views);
    TT_RUN(test_key_create_parse_loop);
    TT_RUN(test_key_fast_path_matches_general);
    TT_RUN(test_frame_iter_parse);
    TT_RUN(test_device_accept);
    TT_RUN(test_device_reject);
    TT_RUN(test_device_format);
    TT_RUN(test_device_same_address_space);
    TT_RUN(test_device_local_name);
    TT_RUN(test_device_parse_local);
    TT_RUN(test_device_split);
    TT_RUN(test_hash);
    TT_RUN(test_escape);
    TT_RUN(test_no_assert_tripped);
    return TT_MAIN_END();
}
