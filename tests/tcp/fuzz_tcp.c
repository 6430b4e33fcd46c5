/* fuzz_tcp.c - libFuzzer target for the frame decoder of tfrdv_tcp.h (codec only, no sockets):
   the input is read as a byte stream of frames, as a connection reads it, with limits taken
   from its first bytes. Invariants: no crash, never a frame longer than the input, every limit
   held, and every decoded frame re-encodes to exactly the bytes it was decoded from (the
   decoder accepts only the canonical form). Build and run: make fuzz-tcp (FUZZ_SECONDS, default
   60). */
#define TFRDV_IMPLEMENTATION
#define TFRDV_TCP_IMPLEMENTATION
#define TFRDV_TCP_NO_TRANSPORT
#include "tfrdv.h"
#include "tfrdv_tcp.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    tfrdv_tcp_limits lim;
    static tfrdv_tcp_frame f;
    static uint8_t re[TFRDV_TCP_META_MAX + 8192];
    tfrdv_status st;
    size_t pos = 0;
    if (size < 2) return 0;
    memset(&lim, 0, sizeof lim);
    lim.max_key_len = 1 + (size_t)(data[0] & 63) * 64;         /* 1 .. 4033 */
    lim.max_message_len = 1 + (uint32_t)(data[1] & 63) * 64;
    lim.max_tensor_bytes = (uint64_t)1 << (data[0] >> 2);
    lim.max_frame_len = 1u << 20;
    data += 2;
    size -= 2;
    while (pos < size) {
        long used = tfrdv_tcp_decode(data + pos, size - pos, &lim, &f, &st);
        size_t n;
        if (used <= 0) break; /* needs more bytes, or malformed: the connection would close */
        if ((size_t)used > size - pos) abort();
        if (f.type == TFRDV_TCP_REQUEST && f.key.len > lim.max_key_len) abort();
        if ((f.type == TFRDV_TCP_ERROR || f.type == TFRDV_TCP_CLOSE) && f.message.len > lim.max_message_len) abort();
        if (f.type == TFRDV_TCP_RESPONSE && (f.bytes > lim.max_tensor_bytes || f.rank > TFRDV_TCP_MAX_RANK || f.data_len > f.bytes)) abort();
        if (f.body_len > lim.max_frame_len) abort();
        if (f.type == TFRDV_TCP_RESPONSE && f.remote && (f.data_len || !f.bytes || f.no_value || f.remote_addr > UINT64_MAX - f.bytes)) abort();
        if (f.type == TFRDV_TCP_RESPONSE && f.pooled && (f.remote || f.data_len || !f.bytes || f.no_value || f.pool_fd > INT32_MAX || f.pool_off > UINT64_MAX - f.bytes)) abort();
        if ((f.type == TFRDV_TCP_ACK || f.type == TFRDV_TCP_RELEASE) && (!f.num_acks || f.num_acks > TFRDV_TCP_ACK_MAX || f.id)) abort();
        if (f.type == TFRDV_TCP_SAMEHOST && (f.sh_flags & ~(TFRDV_TCP_SH_CMA_READ | TFRDV_TCP_SH_CMA_GRANT | TFRDV_TCP_SH_RING_OFFER | TFRDV_TCP_SH_RING_OK | TFRDV_TCP_SH_RING_FUTEX | TFRDV_TCP_SH_TCP_ASK | TFRDV_TCP_SH_TCP_OFFER | TFRDV_TCP_SH_TCP_TOKEN))) abort();
        if (f.type == TFRDV_TCP_SAMEHOST && (f.message.len > TFRDV_TCP_SH_HOST_MAX || (f.sh_flags < TFRDV_TCP_SH_TCP_ASK) != (f.message.len == 0))) abort();
        n = tfrdv_tcp_encode(&f, re, sizeof re);
        if (n != (size_t)used || memcmp(re, data + pos, n) != 0 || tfrdv_tcp_encode(&f, 0, 0) != n) abort();
        pos += (size_t)used;
        if (f.type == TFRDV_TCP_RESPONSE || f.type == TFRDV_TCP_DATA) { /* the value bytes follow */
            if (f.data_len > size - pos) break;
            pos += (size_t)f.data_len;
        }
    }
    return 0;
}
