/* fuzz_verbs.c - libFuzzer target for tfrdv_verbs.h's decoders: a received control-ring slot
   (tfrdv_verbs__decode) and a peer's handshake info (tfrdv_verbs_info_decode). A decoded message
   is re-encoded and must decode to the same fields.
   make fuzz-verbs   (clang -fsanitize=fuzzer,address,undefined) */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#define TFRDV_VERBS_PROTOCOL_ONLY
#define TFRDV_VERBS_IMPLEMENTATION
#include "tfrdv_verbs.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static int64_t dims[TFRDV_VERBS__MAX_RANK], dims2[TFRDV_VERBS__MAX_RANK];
    static uint8_t re[1 << 16];
    tfrdv_verbs__msg m, m2;
    tfrdv_verbs_info info;
    tfrdv_status st;
    const char* why;
    uint8_t* copy = (uint8_t*)malloc(size ? size : 1); /* exact-size heap copy: ASan sees overreads */
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    if (tfrdv_verbs__decode(copy, size, &m, dims, &why)) {
        size_t n = tfrdv_verbs__encode(&m, re, sizeof re);
        if (m.meta.rank > TFRDV_VERBS__MAX_RANK) abort();
        if (m.key && (m.key < (const char*)copy || m.key + m.key_len > (const char*)copy + size)) abort();
        if (!n || !tfrdv_verbs__decode(re, n, &m2, dims2, &why)) abort();
        if (m2.type != m.type || m2.slot != m.slot || m2.credits != m.credits || m2.key_len != m.key_len ||
            m2.meta.rank != m.meta.rank || m2.code != m.code || m2.text_len != m.text_len)
            abort();
    } else if (!why) {
        abort();
    }
    if (tfrdv_verbs_info_decode(copy, size, &info, &st) == TFRDV_OK) {
        uint8_t b[TFRDV_VERBS_INFO_MAX];
        size_t n = tfrdv_verbs_info_encode(&info, b, sizeof b);
        if (n != size || memcmp(b, copy, 18) != 0) abort();
    }
    free(copy);
    return 0;
}
