/* fuzz_keys.c - libFuzzer target for the key / device-name / frame:iter / TF_CONFIG parsers.
   Build and run: bash tests/fuzz.sh (clang -fsanitize=fuzzer,address,undefined).
   Besides "no crash, no UB", it checks invariants; a violated one aborts (a reported crash). */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define MAX_INPUT 8192
#define BUF (4 * MAX_INPUT) /* a canonical name is at most ~2.5x its input */

#define CHECK(c)                                                                       \
    do {                                                                               \
        if (!(c)) {                                                                    \
            fprintf(stderr, "fuzz_keys.c:%d: invariant failed: %s\n", __LINE__, #c);   \
            abort();                                                                   \
        }                                                                              \
    } while (0)

static int str_eq(tfrdv_str a, tfrdv_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}
static int has_byte(tfrdv_str s, char c) { return s.len && memchr(s.ptr, c, s.len) != NULL; }
/* copy a view into a NUL-terminated buffer (caller checked the length) */
static const char* cz(char* buf, tfrdv_str s) {
    if (s.len) memcpy(buf, s.ptr, s.len);
    buf[s.len] = 0;
    return buf;
}
static int inside(tfrdv_str s, const char* p, size_t n) {
    return s.len == 0 || (s.ptr >= p && s.ptr + s.len <= p + n);
}

/* same fields; the id only counts with a type (the canonical form prints no id without a type) */
static void check_same_name(const tfrdv_device_name* a, const tfrdv_device_name* b) {
    CHECK(a->has_job == b->has_job && (!a->has_job || str_eq(a->job, b->job)));
    CHECK(a->has_replica == b->has_replica && (!a->has_replica || a->replica == b->replica));
    CHECK(a->has_task == b->has_task && (!a->has_task || a->task == b->task));
    CHECK(a->has_type == b->has_type && (!a->has_type || str_eq(a->type, b->type)));
    if (a->has_type) CHECK(a->has_id == b->has_id && (!a->has_id || a->id == b->id));
}

static void fuzz_device(const char* p, size_t n) {
    tfrdv_device_name dn, again;
    tfrdv_str type;
    static char buf[BUF], task[BUF], dev[BUF];
    size_t len, tlen = 0, dlen = 0;
    int id = -1;
    tfrdv_status st;
    if (tfrdv_device_parse(p, n, &dn, &st) == TFRDV_OK) {
        CHECK(!dn.has_replica || dn.replica >= 0);
        CHECK(!dn.has_task || dn.task >= 0);
        CHECK(!dn.has_id || dn.id >= 0);
        len = tfrdv_device_format(&dn, buf, sizeof buf);
        CHECK(len < sizeof buf && strlen(buf) == len);
        CHECK(tfrdv_device_parse(buf, len, &again, &st) == TFRDV_OK);
        check_same_name(&dn, &again);
        CHECK(tfrdv_device_format(&again, NULL, 0) == len); /* canonical form is a fixed point */
        CHECK(tfrdv_device_same_address_space(p, n, buf, len) ==
              (dn.has_job && dn.has_replica && dn.has_task));
    } else {
        CHECK(st.code == TFRDV_INVALID_ARGUMENT);
        CHECK(!tfrdv_device_same_address_space(p, n, p, n));
    }
    if (tfrdv_device_split(p, n, task, sizeof task, &tlen, dev, sizeof dev, &dlen, &st) == TFRDV_OK) {
        CHECK(tfrdv_device_parse(p, n, &dn, NULL) == TFRDV_OK && dn.has_type && dn.has_id);
        CHECK(tlen == strlen(task) && dlen == strlen(dev));
        CHECK(tfrdv_device_parse_local(dev, dlen, &type, &id, NULL) == TFRDV_OK);
        CHECK(str_eq(type, dn.type) && id == dn.id);
        len = (size_t)snprintf(buf, sizeof buf, "%s/device:%s", task, dev);
        CHECK(len < sizeof buf && tfrdv_device_parse(buf, len, &again, NULL) == TFRDV_OK);
        check_same_name(&dn, &again);
    }
    len = tfrdv_device_local_name(p, n, buf, sizeof buf, &st);
    if (len) {
        /* LocalName = "/device:" + the stored type + ":" + the stored id, as TensorFlow builds it
           (a type or id never given prints as "" / 0; a later '*' clears only the flag) */
        static char want[BUF + 64];
        int wl;
        CHECK(st.code == TFRDV_OK && len < sizeof buf && strlen(buf) == len);
        CHECK(tfrdv_device_parse(p, n, &dn, NULL) == TFRDV_OK);
        wl = snprintf(want, sizeof want, "/device:%.*s:%d", (int)dn.type.len, dn.type.ptr ? dn.type.ptr : "", dn.id);
        CHECK(wl > 0 && (size_t)wl == len && memcmp(want, buf, len) == 0);
        if (dn.type.len) {
            CHECK(tfrdv_device_parse(buf, len, &again, NULL) == TFRDV_OK);
            CHECK(!again.has_job && !again.has_replica && !again.has_task);
            CHECK(again.has_type && str_eq(again.type, dn.type) && again.has_id && again.id == dn.id);
        }
    } else {
        CHECK(st.code == TFRDV_INVALID_ARGUMENT);
    }
    if (tfrdv_device_parse_local(p, n, &type, &id, &st) == TFRDV_OK) {
        /* ParseLocalName(x) ok  =>  ParseFullName("/device:" + x) ok with the same type and id */
        CHECK(n + 8 < sizeof buf);
        memcpy(buf, "/device:", 8);
        memcpy(buf + 8, p, n);
        CHECK(tfrdv_device_parse(buf, n + 8, &dn, NULL) == TFRDV_OK);
        CHECK(dn.has_type && str_eq(dn.type, type) && dn.has_id && dn.id == id && id >= 0);
    }
}

/* decimal digits without leading zeros ("0" for zero), for the canonical-number check */
static tfrdv_str strip_zeros(const char* p, size_t n) {
    tfrdv_str s;
    while (n > 1 && *p == '0') p++, n--;
    s.ptr = p;
    s.len = n;
    return s;
}
static void fuzz_frame_iter(const char* p, size_t n) {
    tfrdv_str s, f, i;
    tfrdv_frame_iter fi;
    tfrdv_status st;
    char buf[64];
    const char* colon;
    int k;
    s.ptr = p;
    s.len = n;
    if (tfrdv_frame_iter_parse(s, &fi, &st) != TFRDV_OK) {
        CHECK(st.code == TFRDV_INVALID_ARGUMENT);
        return;
    }
    /* the numbers read must be exactly the digits written: no wrap-around, no junk */
    colon = (const char*)memchr(p, ':', n);
    CHECK(colon != NULL);
    f = strip_zeros(p, (size_t)(colon - p));
    k = (colon + 1 < p + n && colon[1] == '-') ? 1 : 0;
    i = strip_zeros(colon + 1 + k, (size_t)(p + n - colon - 1 - k));
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)fi.frame_id);
    CHECK(f.len == strlen(buf) && memcmp(f.ptr, buf, f.len) == 0);
    snprintf(buf, sizeof buf, "%llu",
             fi.iter_id < 0 ? 0ull - (unsigned long long)fi.iter_id : (unsigned long long)fi.iter_id);
    CHECK(i.len == strlen(buf) && memcmp(i.ptr, buf, i.len) == 0);
    CHECK(fi.iter_id <= 0 || !k);
}

static void fuzz_key(const char* p, size_t n) {
    tfrdv_parsed_key pk, again;
    tfrdv_frame_iter fi;
    tfrdv_status st;
    static char src[BUF], dst[BUF], edge[BUF], key[4 * BUF];
    size_t len = 0;
    if (tfrdv_key_parse(p, n, &pk, &st) != TFRDV_OK) {
        CHECK(st.code == TFRDV_INVALID_ARGUMENT);
        return;
    }
    CHECK(pk.full.ptr == p && pk.full.len == n);
    CHECK(pk.hash == tfrdv_hash_bytes(p, n));
    CHECK(inside(pk.src_device, p, n) && inside(pk.dst_device, p, n));
    CHECK(inside(pk.edge_name, p, n) && inside(pk.frame_iter, p, n));
    CHECK(pk.edge_name.len > 0 && pk.frame_iter.len > 0);
    CHECK(!has_byte(pk.src_device, ';') && !has_byte(pk.dst_device, ';'));
    CHECK(!has_byte(pk.edge_name, ';') && !has_byte(pk.frame_iter, ';'));
    if (has_byte(pk.src_device, 0) || has_byte(pk.dst_device, 0) || has_byte(pk.edge_name, 0)) return;
    if (pk.src_device.len >= sizeof src || pk.dst_device.len >= sizeof dst || pk.edge_name.len >= sizeof edge) return;
    cz(src, pk.src_device);
    cz(dst, pk.dst_device);
    cz(edge, pk.edge_name);
    /* the parts of a parsed key are valid parts: the prefix builds, and with the same frame text
       re-parses to the same key */
    CHECK(tfrdv_key_prefix(src, pk.src_incarnation, dst, edge, key, sizeof key, &len, &st) == TFRDV_OK);
    CHECK(len + 1 + pk.frame_iter.len < sizeof key);
    key[len] = ';';
    memcpy(key + len + 1, pk.frame_iter.ptr, pk.frame_iter.len);
    len += 1 + pk.frame_iter.len;
    CHECK(tfrdv_key_parse(key, len, &again, &st) == TFRDV_OK);
    CHECK(str_eq(again.src_device, pk.src_device) && str_eq(again.dst_device, pk.dst_device));
    CHECK(str_eq(again.edge_name, pk.edge_name) && str_eq(again.frame_iter, pk.frame_iter));
    CHECK(again.src_incarnation == pk.src_incarnation);
    check_same_name(&again.src, &pk.src);
    check_same_name(&again.dst, &pk.dst);
    if (tfrdv_frame_iter_parse(pk.frame_iter, &fi, NULL) != TFRDV_OK) return;
    CHECK(tfrdv_key_create(src, pk.src_incarnation, dst, edge, fi, key, sizeof key, &len, &st) == TFRDV_OK);
    CHECK(tfrdv_key_parse(key, len, &again, &st) == TFRDV_OK);
    CHECK(str_eq(again.src_device, pk.src_device) && str_eq(again.dst_device, pk.dst_device));
    CHECK(str_eq(again.edge_name, pk.edge_name) && again.src_incarnation == pk.src_incarnation);
    {
        tfrdv_frame_iter fj;
        CHECK(tfrdv_frame_iter_parse(again.frame_iter, &fj, NULL) == TFRDV_OK);
        CHECK(fj.frame_id == fi.frame_id && fj.iter_id == fi.iter_id);
    }
}

/* TF_CONFIG: OK or INVALID_ARGUMENT; an OK table is sorted, its names parse, and the buffer size
   it reports is exactly enough */
static void fuzz_cluster(const char* p, size_t n) {
    static char cbuf[64 * MAX_INPUT]; /* an entry costs at most ~16 + 40 bytes per 4 input bytes */
    tfrdv_cluster c;
    tfrdv_status st;
    tfrdv_device_name dn;
    size_t i, need;
    if (tfrdv_cluster_parse(p, n, cbuf, sizeof cbuf, &c, &st) != TFRDV_OK) {
        CHECK(st.code == TFRDV_INVALID_ARGUMENT && strncmp(st.msg, "TF_CONFIG: ", 11) == 0);
        return;
    }
    CHECK(c.needed <= sizeof cbuf);
    for (i = 0; i < c.num_workers; i++) {
        CHECK(tfrdv_device_parse(c.workers[i].name, strlen(c.workers[i].name), &dn, NULL) == TFRDV_OK);
        CHECK(dn.has_job && dn.has_replica && dn.has_task && !dn.has_type && c.workers[i].address[0]);
        CHECK(i == 0 || strcmp(c.workers[i - 1].name, c.workers[i].name) != 0);
    }
    CHECK((c.task_name == NULL) == (c.task_index < 0) && (c.task_name || !c.task_address));
    need = c.needed;
    if (need) {
        CHECK(tfrdv_cluster_parse(p, n, cbuf + 1, need - 1, &c, &st) == TFRDV_RESOURCE_EXHAUSTED && c.needed == need);
        CHECK(tfrdv_cluster_parse(p, n, cbuf + 3, need, &c, &st) == TFRDV_OK);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* p = (const char*)data;
    size_t half = size / 2;
    if (size > MAX_INPUT) return 0; /* keeps every derived string inside the static buffers */
    CHECK(tfrdv_hash_bytes(p, size) == tfrdv_hash_bytes(p, size));
    fuzz_key(p, size);
    fuzz_device(p, size);
    fuzz_frame_iter(p, size);
    fuzz_cluster(p, size);
    /* IsSameAddressSpace is symmetric */
    CHECK(tfrdv_device_same_address_space(p, half, p + half, size - half) ==
          tfrdv_device_same_address_space(p + half, size - half, p, half));
    return 0;
}
