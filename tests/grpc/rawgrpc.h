/* rawgrpc.h - tests only: a raw gRPC C-core client call (include after tfrdv_grpc.h with
   TFRDV_GRPC_IMPLEMENTATION: it uses the companion's escape and restarted-detail internals). */
#ifndef TFRDV_TEST_RAWGRPC_H
#define TFRDV_TEST_RAWGRPC_H
/* One unary call on a fresh channel to 127.0.0.1:port with the raw C core, for what a tfrdv
   client never sends. details gets the status text (escaped with tfrdv_escape when escape is 1,
   else its bytes as they came, cut to dcap); resp/rcap/rlen (optional) the answer's first bytes,
   total (optional) its length; restarted (optional) whether the trailers carry TensorFlow's
   WorkerPossiblyRestarted detail. */
static grpc_status_code raw_call(int port, const char* method, const void* req, size_t len, int timeout_ms, char* details,
                                 size_t dcap, int escape, unsigned char* resp, size_t rcap, size_t* rlen, size_t* total,
                                 int* restarted) {
    char addr[64];
    grpc_channel_credentials* cr = grpc_insecure_credentials_create();
    grpc_channel* ch;
    grpc_completion_queue* cq = grpc_completion_queue_create_for_pluck(NULL);
    grpc_call* call;
    grpc_slice s = grpc_slice_from_copied_buffer((const char*)req, len), det;
    grpc_byte_buffer *rq = grpc_raw_byte_buffer_create(&s, 1), *rs = 0;
    grpc_metadata_array im, tm;
    grpc_status_code code = GRPC_STATUS_UNKNOWN;
    grpc_op ops[6];
    size_t i;
    int tag;
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    ch = grpc_channel_create(addr, cr, NULL);
    grpc_channel_credentials_release(cr);
    grpc_slice_unref(s);
    grpc_metadata_array_init(&im);
    grpc_metadata_array_init(&tm);
    call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, grpc_slice_from_static_string(method), NULL,
                                    gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN)), NULL);
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = rq;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &im;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &rs;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &tm;
    ops[5].data.recv_status_on_client.status = &code;
    ops[5].data.recv_status_on_client.status_details = &det;
    if (grpc_call_start_batch(call, ops, 6, &tag, NULL) == GRPC_CALL_OK) {
        grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (escape) {
            tfrdv_grpc__slice_msg(det, details, dcap);
        } else {
            size_t dl = GRPC_SLICE_LENGTH(det) < dcap - 1 ? GRPC_SLICE_LENGTH(det) : dcap - 1;
            memcpy(details, GRPC_SLICE_START_PTR(det), dl);
            details[dl] = 0;
        }
        grpc_slice_unref(det);
    }
    if (restarted) {
        *restarted = 0;
        for (i = 0; i < tm.count; i++)
            if (grpc_slice_str_cmp(tm.metadata[i].key, "grpc-status-details-bin") == 0 && GRPC_SLICE_LENGTH(tm.metadata[i].value) == 80 &&
                memcmp(GRPC_SLICE_START_PTR(tm.metadata[i].value), tfrdv_grpc__restarted_payload, 80) == 0)
                *restarted = 1;
    }
    if (rlen) *rlen = 0;
    if (total) *total = rs ? grpc_byte_buffer_length(rs) : 0;
    if (rs && resp) {
        grpc_byte_buffer_reader rd;
        grpc_slice all;
        grpc_byte_buffer_reader_init(&rd, rs);
        all = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
        *rlen = GRPC_SLICE_LENGTH(all) < rcap ? GRPC_SLICE_LENGTH(all) : rcap;
        memcpy(resp, GRPC_SLICE_START_PTR(all), *rlen);
        grpc_slice_unref(all);
    }
    if (rs) grpc_byte_buffer_destroy(rs);
    grpc_byte_buffer_destroy(rq);
    grpc_metadata_array_destroy(&im);
    grpc_metadata_array_destroy(&tm);
    grpc_call_unref(call);
    grpc_channel_destroy(ch);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {}
    grpc_completion_queue_destroy(cq);
    return code;
}
#endif
