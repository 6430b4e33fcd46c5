/* fuzz_grpc.c - libFuzzer target for the wire decoders of tfrdv_grpc.h (codec only, no gRPC):
   RecvTensorResponse (the client's decoder), RecvTensorRequest (the server's) and
   GetStatusResponse, each fed as several segments (slice boundaries anywhere). Invariants: no
   crash, no leak, no allocation above the limit, and a decoded tensor re-encodes and decodes to
   the same value. Build and run: make fuzz-grpc (FUZZ_SECONDS, default 60). */
#define TFRDV_IMPLEMENTATION
#define TFRDV_GRPC_IMPLEMENTATION
#define TFRDV_GRPC_NO_TRANSPORT
#include "tfrdv.h"
#include "tfrdv_grpc.h"
#include <stdlib.h>

#define LIMIT (1u << 20)
static long live;
typedef struct fv { tfrdv_value v; int64_t dims[TFRDV_GRPC_MAX_RANK]; } fv;
static void fv_release(tfrdv_value* v) { live--; free(v); }
static tfrdv_value* fv_alloc(void* u, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    fv* f;
    (void)u;
    if (size > LIMIT || rank < 0 || rank > TFRDV_GRPC_MAX_RANK) abort(); /* the decoder must bound first */
    f = (fv*)calloc(1, sizeof *f + (size_t)size);
    if (!f) return 0;
    live++;
    f->v.dtype = dtype;
    f->v.rank = rank;
    if (rank) memcpy(f->dims, dims, (size_t)rank * sizeof *dims);
    f->v.dims = f->dims;
    f->v.data = f + 1;
    f->v.size = size;
    f->v.release = fv_release;
    return &f->v;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    tfrdv_str segs[8];
    size_t nseg = 0, pos, i;
    unsigned mode, cuts;
    tfrdv_status st;
    if (size < 2) return 0;
    mode = data[0] % 3;
    cuts = data[1];
    data += 2;
    size -= 2;
    /* split into up to 8 segments at positions derived from `cuts` */
    for (pos = 0; pos < size && nseg < 7; nseg++) {
        size_t len = 1 + ((cuts >> (nseg % 8)) & 3) * (size / 7 + 1);
        if (len > size - pos) len = size - pos;
        segs[nseg].ptr = (const char*)data + pos;
        segs[nseg].len = len;
        pos += len;
    }
    segs[nseg].ptr = (const char*)data + pos;
    segs[nseg++].len = size - pos;
    if (mode == 0) {
        tfrdv_value* v = 0;
        tfrdv_grpc_response_info info;
        if (tfrdv_grpc_decode_response(segs, nseg, LIMIT, fv_alloc, 0, &v, &info, &st) == TFRDV_OK && v) {
            uint8_t* head = (uint8_t*)malloc(TFRDV_GRPC_HEAD_MAX(v->rank));
            uint8_t tail[TFRDV_GRPC_TAIL_MAX];
            size_t hl, tl;
            tfrdv_value* w = 0;
            if (!head) abort();
            if (tfrdv_grpc_encode_response(v, 0, info.require_ack, info.send_start_micros, head, TFRDV_GRPC_HEAD_MAX(v->rank), &hl, tail, &tl, &st) != TFRDV_OK)
                abort(); /* whatever decodes must encode */
            {
                tfrdv_str s3[3];
                s3[0].ptr = (const char*)head; s3[0].len = hl;
                s3[1].ptr = (const char*)v->data; s3[1].len = (size_t)v->size;
                s3[2].ptr = (const char*)tail; s3[2].len = tl;
                if (tfrdv_grpc_decode_response(s3, 3, LIMIT, fv_alloc, 0, &w, &info, &st) != TFRDV_OK || !w) abort();
                if (w->dtype != v->dtype || w->rank != v->rank || w->size != v->size ||
                    (v->size && memcmp(w->data, v->data, (size_t)v->size) != 0))
                    abort();
                for (i = 0; i < (size_t)v->rank; i++) if (w->dims[i] != v->dims[i]) abort();
            }
            tfrdv_value_release(w);
            free(head);
        }
        tfrdv_value_release(v);
    } else if (mode == 1) {
        char key[256];
        size_t kl;
        int64_t step, rid;
        size_t kl0 = 0;
        tfrdv_code c0 = tfrdv_grpc_decode_request(segs, nseg, &step, 0, 0, &kl0, &rid, &st); /* sizing */
        tfrdv_code c1 = tfrdv_grpc_decode_request(segs, nseg, &step, key, sizeof key, &kl, &rid, &st);
        if (c0 == TFRDV_OK && kl0 <= sizeof key && (c1 != TFRDV_OK || kl > kl0)) abort(); /* the sizing is enough */
        (void)tfrdv_grpc_request_marked(segs, nseg); /* the receipts mark: never reads past the input */
    } else {
        tfrdv_grpc_device d[4];
        size_t n;
        tfrdv_grpc_decode_status_response(segs, nseg, d, 4, &n, &st);
        (void)tfrdv_grpc_details_restarted(data, size); /* grpc-status-details-bin */
    }
    if (live) abort();
    return 0;
}
