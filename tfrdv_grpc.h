/* tfrdv_grpc.h - v0.5.0 - gRPC transport for tfrdv speaking TensorFlow's WorkerService - MIT or
   public domain (see the end of tfrdv.h)

   USAGE
     Include tfrdv.h first. In exactly ONE .c or .cpp file:
         #define TFRDV_GRPC_IMPLEMENTATION
         #include "tfrdv.h"
         #include "tfrdv_grpc.h"
     (the tfrdv.h implementation may live in another translation unit). Link with
     `pkg-config --cflags --libs grpc` and -lpthread (Debian/Ubuntu: apt-get install libgrpc-dev
     pkg-config). Only the implementation section includes gRPC headers: the declarations below
     compile on hosts without gRPC. POSIX threads only. Define TFRDV_GRPC_NO_TRANSPORT in the
     implementation file to build only the wire codec (no gRPC, no threads: fuzzers, other
     transports).

   WHAT IT DOES
     A tfrdv_transport over the gRPC C core that speaks TensorFlow's
     /tensorflow.WorkerService/RecvTensor wire format, so a tfrdv worker and a TensorFlow worker can
     fetch tensors from each other:
       client  one channel per remote worker address (worker name -> "host:port" from
               tfrdv_grpc_config.workers, tfrdv_grpc_set_worker or the resolve callback), one unary
               RecvTensor call per remote receive with the call's deadline (tfrdv_call_deadline) on
               the gRPC call, or recv_timeout_ns (10 min by default) when the receive has none:
               TensorFlow waits without bound, but then a hung or hostile server (one that never
               answers, or answers the unary call with two messages: gRPC then waits for the
               deadline) would hold the receive forever; a receive that fails this way loses nothing (the server keeps
               the value) and its message names the field; TFRDV_OFF for no bound.
               cancel_call cancels the gRPC call; gRPC's receive limit is
               max_message_bytes + 64 KiB (INT_MAX by default, as TensorFlow's). Responses are
               decoded by walking the received slices straight into tfrdv_call_alloc_value memory
               (one copy, no intermediate buffer). Each request carries tfrdv's receipts mark
               (field 15, skipped by TensorFlow); a response with require_ack is followed by a
               MarkRecvFinished call (fire and forget; to a tfrdv server usually carried inside
               the next request instead), and so is a RecvTensor whose receive gave up, saying its
               answer was not taken (DELIVERY RECEIPTS). tfrdv_grpc_peer_devices()
               asks a worker for its devices and their incarnations (a key must carry the source
               device's incarnation); tfrdv_mgr_peer_incarnation asks the same way (PEER
               INCARNATION).
       server  (listen_address set, manager attached with tfrdv_grpc_attach) answers RecvTensor
               through tfrdv_mgr_serve asynchronously; a client cancel or deadline withdraws the serve
               request (the value stays buffered for the next receiver: TensorFlow aborts the whole
               step instead). A value already handed to a call that cannot deliver it is given back
               to the table (tfrdv_mgr_serve_return: the key's next receiver gets it, in send order),
               never dropped: when the call's deadline is less than serve_deadline_margin_ns away
               (the reply is DEADLINE_EXCEEDED), and when gRPC reports the call closed cancelled
               while the reply was on its way (the client cancelled, its deadline passed, its
               connection broke, shutdown). The answer keeps a value reference until that close.
               Cancelled means the status never left this server, so the client cannot have
               completed with the value; when in doubt the value goes back (a duplicate would wait
               in the table until the step is cleaned up; a loss would hang the step). What no
               server can see: a reply that left intact but reached a client that had already given
               up (its deadline fired, or its receive was cancelled, while the reply was in transit)
               is dropped by that client. TensorFlow's protocol has no acknowledgement for it:
               between tfrdv peers the receipts acknowledge it and such a value comes back
               (DELIVERY RECEIPTS, on by default); a TensorFlow client's value is gone unless
               require_ack is set (TensorFlow aborts the step when a RecvTensor is cancelled).
               MarkRecvFinished -> tfrdv_mgr_ack. GetStatus answers this worker's
               devices; CreateWorkerSession and DeleteWorkerSession get empty replies, so a
               TensorFlow master can include a tfrdv worker in its cluster without device_filters.
               Requests are capped at 64 MiB. The port is bound exclusively (no SO_REUSEPORT):
               a port another process listens on makes tfrdv_grpc_attach fail UNAVAILABLE
               "cannot listen on <address> ...", as TensorFlow's server refuses a busy port.
               Every other method is answered UNIMPLEMENTED at once.
       threads one completion-queue thread owned by the companion (num_threads 0, the default),
               n of them (num_threads n > 1), or none (-1): the host calls tfrdv_grpc_poll(). The
               attached manager's tfrdv_mgr_expire is driven every expire_interval_ns by whichever
               thread polls. gRPC's C core starts threads of its own: THREADS AND CALLBACKS.
       TLS     server side when pem_private_key + pem_cert_chain are given (mutual TLS with
               require_client_cert, pem_root_certs then verifies clients); client side when
               pem_root_certs is given (plus the key pair for mutual TLS). Insecure otherwise.

   WIRE FORMAT (TensorFlow worker.proto / tensor.proto, hand-encoded, no protobuf runtime)
     RecvTensorRequest  1 step_id, 2 rendezvous_key, 7 request_id (3-6 skipped when decoding);
                        tfrdv's 15 (varint 1: the client sends receipts, DELIVERY RECEIPTS; worker.
                        proto uses 1-7, TensorFlow skips unknown fields) after TensorFlow's fields.
                        tfrdv's 16 (repeated varint: request ids of earlier answers taken, receipts
                        carried inline) after it.
     RecvTensorResponse to a marked request also ends with tfrdv's 15 (varint 1: this server takes
                        receipts inline).
     MarkRecvFinishedRequest 1 request_id; tfrdv's 15 (varint 1: the answer was not taken).
     RecvTensorResponse 1 tensor (TensorProto), 2 is_dead, 3 send_start_micros, 5 require_ack.
     Sent exactly as TensorFlow's fast path lays it out: is_dead, send_start_micros, require_ack,
     then the tensor last: dtype, the shape (no shape field for scalars; a size-0 dim written
     explicitly) and tensor_content, whose bytes above 1 KiB go out as a slice that holds a value
     reference (zero copy). DT_STRING is laid out like TensorFlow's normal serialisation (tensor
     first, shape always present); a dead value without payload is sent as TensorFlow does (an
     empty float tensor of shape [0]).
     Decoding accepts any field order, skips unknown fields, accepts tensor_content and the typed
     repeated fields (float_val, double_val, int_val, int64_val, bool_val, half_val, scomplex_val,
     dcomplex_val, uint32_val, uint64_val, string_val; packed or not; fewer values than elements
     repeat the last one, as TensorFlow's Tensor::FromProto), checks content length == dtype size
     x element count, and bounds every length, rank (254) and dimension before allocating. Hostile
     input gets INVALID_ARGUMENT (malformed) or DATA_LOSS (truncated) with a message, a tensor above
     max_message_bytes RESOURCE_EXHAUSTED.
     DT_STRING values carry TensorFlow's string tensor_content encoding: one varint length per
     element, then all the bytes.
     Size limit: gRPC messages cannot exceed 2 GiB. TensorFlow kills its own process
     (LOG(FATAL)) when asked to send a larger tensor; here the server answers RESOURCE_EXHAUSTED
     when a response would exceed max_message_bytes (default 2^31 - 1) and the client refuses
     larger responses with the same code.

   DELIVERY RECEIPTS (on by default between tfrdv peers; require_ack for every client)
     The contract: between a tfrdv client and a tfrdv server, both with the default config, a
     value answered to a receive that gave up (cancelled, timed out, aborted, refused by the
     core, its transport destroyed) goes back to the server's table: nothing is lost, nothing is
     delivered twice. TensorFlow peers see TensorFlow's protocol unchanged.
     How: a tfrdv client (receipts not TFRDV_OFF) marks every RecvTensorRequest with a non-zero
     request id: field 15 = 1 (TFRDV_GRPC_RECEIPTS_FIELD), which TensorFlow skips. A tfrdv server
     answers a marked request require_ack (TensorFlow's field 5) and keeps a reference to the value
     after gRPC reported the reply sent, until the client's MarkRecvFinished{1: request_id}
     arrives: then the value is released (delivered). Unmarked requests (TensorFlow's client) are
     answered as before, without require_ack and without holding, unless the server sets
     tfrdv_grpc_config.require_ack, which marks and holds every answer to a non-zero request id
     (TensorFlow's client then sends MarkRecvFinished too).
     The client sends exactly one receipt per answer the server may hold: MarkRecvFinished{1: id}
     ("taken") after an answer with require_ack that it delivered, and MarkRecvFinished{1: id,
     15: 1} ("not taken") when it did not deliver it: the answer arrived after its receive had
     been cancelled, timed out or aborted (tfrdv_call_finish_status with give_back refused it) or
     failed to decode here (a tensor above max_message_bytes, out of memory), and for a call that
     ended CANCELLED or DEADLINE_EXCEEDED (to any server: its answer may have left before the
     server learnt of the end) or, marked, UNAVAILABLE, UNKNOWN, INTERNAL or RESOURCE_EXHAUSTED
     (the connection broke, or gRPC refused the reply after the server sent it). Calls cancelled
     by tfrdv_grpc_destroy send theirs too: destroy waits for the receipts in flight (at most
     10 s each, 1 s for those started during the destroy) and does not cancel them. The server
     gives a not-taken answer back to the front of its key's queue (stats.receipts_returned, also
     in serve_returned). A receipt may arrive before gRPC reported the reply's close: the call keeps
     it and settles its answer at the close. A receipt for an id with no answer held and no call
     open is dropped (stats.receipts_unmatched: the call ended without an answer, e.g. withdrawn
     when the client cancelled), so receipts of receives that gave up early cost no memory. A
     not-taken receipt to TensorFlow's server only drops the response-cache entry
     of the id, as any MarkRecvFinished does.
     Receipts inline: a tfrdv server's answer to a marked request ends with field 15 = 1 ("I take
     receipts inline"). The client then keeps the taken receipt for that server (up to 32) and
     the next marked RecvTensorRequest to the same server carries it (repeated field 16, the
     request ids); receipts no request carried within TFRDV_GRPC_INLINE_DELAY_NS (2 ms) go as
     MarkRecvFinished calls (the completion-queue threads or tfrdv_grpc_poll send them; destroy
     sends the rest). Not-taken receipts always go as calls at once. A request carrying receipts
     that never reaches the server only delays their answers' release to receipt_ttl_ns (taken
     answers are released, never given back, so nothing is lost or duplicated).
     Cost: a reference on each answered value until its receipt, a few bytes per request, and a
     MarkRecvFinished call per answer when fetches from a server are more than 2 ms apart (fire
     and forget: the receive completes before it). receipts = TFRDV_OFF on
     the client (requests go unmarked) or the server (marks ignored) gives TensorFlow's protocol:
     an answer that reaches a client after its receive gave up is then dropped by that client.
     What can still be lost: an answer whose receipt never arrives within receipt_ttl_ns (the
     client process died, the connection broke after the reply left and stayed broken, the
     MarkRecvFinished failed, or a TensorFlow client whose receive gave up: it sends no receipt)
     is released as delivered when the ttl passes (stats.receipts_expired), as is every held answer
     when the server's transport is destroyed. At most 65536 answers wait at once; beyond that the
     oldest is treated as expired.

   ERRORS ON THE WIRE
     Statuses keep their code (tfrdv codes are the gRPC codes) and message; a message received
     from a peer (a failed RecvTensor's or GetStatus's status details, or gRPC's own) reaches the
     receiver's status as printable ASCII (tfrdv_escape: bytes outside 0x20..0x7e as \xNN, a
     backslash as \\), and so does the method name in an UNIMPLEMENTED answer, so a peer cannot
     forge log lines or reach a terminal through them. An incarnation mismatch
     (ABORTED "RecvTensor expects a different device incarnation ...") also carries TensorFlow's
     grpc-status-details-bin payload naming tensorflow.distributed_runtime.WorkerPossiblyRestarted;
     the client turns that payload (from TensorFlow or tfrdv) into status detail
     TFRDV_DETAIL_WORKER_RESTARTED for the receiver. The payload is parsed, not searched
     (tfrdv_grpc_details_restarted): only the exact type URL as a GrpcPayloadContainer key or a
     google.rpc.Status Any type_url counts, in a well-formed payload.

   LIFE CYCLE
       tfrdv_grpc_config gc = tfrdv_grpc_config_init();  gc.listen_address = "0.0.0.0:5000"; ...
       tfrdv_grpc_create(&gc, &g, &st);
       mc.transport = tfrdv_grpc_transport(g);  tfrdv_mgr_create(&mc, &mgr, &st);
       tfrdv_grpc_attach(g, mgr, &st);          starts the server, drives tfrdv_mgr_expire
       ... tfrdv_send / tfrdv_recv_async as usual ...
       tfrdv_grpc_destroy(g);  tfrdv_mgr_destroy(mgr);      (either order)
     tfrdv_grpc_destroy shuts the server down (in-flight calls are cancelled: their answers go
     back to the manager's table), cancels every in-flight client call (its receive fails
     CANCELLED "tfrdv_grpc_destroy: the transport was destroyed while this call was in flight";
     a fetch started afterwards UNAVAILABLE "tfrdv_grpc: transport shut down"), waits for their
     completions, waits until gRPC has dropped every zero-copy slice over a served value (gRPC
     frees the slices of a stalled reply on its own threads, after the connection closed: each
     holds a value reference, so no value release runs after destroy returned), joins the threads
     and releases gRPC. The
     transport handed to the manager keeps the object's memory alive until the manager lets go of
     it; a fetch started after destroy fails UNAVAILABLE at once.

   IN A TENSORFLOW CLUSTER
     A tfrdv worker can be a task of a TensorFlow cluster (examples/tf_peer/ shows all of it):
     list it in TensorFlow's ClusterSpec and use raw _Send/_Recv ops whose device is on it.
     TensorFlow's master never tells it about steps: the step id first arrives in a RecvTensor
     for a step not started here, which tfrdv_mgr_config.step_requested reports (start the step
     there and produce). Keys of tensors TensorFlow sends carry TensorFlow's device incarnation
     (tfrdv_mgr_peer_incarnation, or tfrdv_grpc_peer_devices for a device other than CPU:0);
     TensorFlow learns this worker's with GetStatus. TensorFlow never
     says when a step ends: clean steps up yourself.

   PEER INCARNATION
     tfrdv_mgr_peer_incarnation(mgr, "/job:ps/replica:0/task:0", timeout_ns, &inc, &st) over this
     transport (tfrdv_transport.peer_incarnation) resolves the worker as a fetch does (workers,
     tfrdv_grpc_set_worker, resolve) and asks it with GetStatus, as TensorFlow's master learns
     incarnations. It gives the incarnation of the device "<worker>/device:CPU:0" (the device of
     tfrdv workers' keys, and TensorFlow's first device on every task); a worker without CPU:0
     gives its first listed device's. Incarnations are per device: for a key whose source is
     another device (a GPU) take that device's from tfrdv_grpc_peer_devices. timeout_ns > 0: the
     call waits for the worker to come up (gRPC's wait-for-ready, connecting again with back-off)
     up to timeout_ns, then DEADLINE_EXCEEDED; < 0: no limit; 0: one try, UNAVAILABLE when the
     worker cannot be reached now (the call itself then bounded by 30 s). It asks at most twice
     (the second time with room for every device the first answer listed, within the same
     timeout_ns; a list that grew again is looked at as far as it fit) and refuses an answer
     listing more than 4096 devices (INVALID_ARGUMENT naming the worker and the count), so a
     hostile worker can neither keep it asking nor make it allocate without bound. NOT_FOUND when no
     address is known for the worker, FAILED_PRECONDITION when the address answers with devices
     of other workers only (a stale cluster spec), and the worker's own status otherwise
     (UNIMPLEMENTED: no GetStatus there); every message names the worker.

   CONFIG CHECKS
     tfrdv_grpc_create refuses, INVALID_ARGUMENT naming the field and its value: a worker entry
     without name or address, a name not /job:J/replica:R/task:T, an address of bad syntax
     ("nonsense:::"); a listen_address of bad syntax; num_threads below -1 or above 256;
     recv_tensor_queue_depth below 0 or above 65536; max_message_bytes above 2^31 - 1;
     max_key_len above 16 MiB; receipt_ttl_ns and expire_interval_ns below 0; recv_timeout_ns and
     serve_deadline_margin_ns below 0 but TFRDV_OFF; receipts, require_ack, require_client_cert
     other than 0 or 1 (receipts: or TFRDV_OFF); workers or devices NULL with a count above 0; a
     device name that is not a full device name or not NUL-terminated; TLS half configured (see
     the fields). tfrdv_grpc_set_worker checks its name and address the same way. An address is
     host:port (host a name, an IPv4 address or a bracketed IPv6 one; port 1..65535, or 0 in
     listen_address), ipv4:/ipv6: with a comma-separated list of those, dns:[//authority/]host:port,
     or unix:/unix-abstract: with a path; no spaces or control bytes.

   VALUES
     A served value is read from value->data on the host: copy device tensors to host memory
     before tfrdv_send (tfrdv_mgr_serve hands the sender's args to the transport; this one does
     not look at them). Received tensors land in the receiver's alloc hook memory if it gave one
     (tfrdv_args.alloc_fn), else in the manager's allocator. A served value above 1 KiB goes out
     zero copy: the reply's slice holds a reference, and its release may run on one of gRPC's
     own threads when gRPC drops the slice, always before tfrdv_grpc_destroy returns.

   THREADS AND CALLBACKS
     Every function is thread-safe. Receive callbacks of remote fetches and serve completions run
     on the completion-queue threads (or inside tfrdv_grpc_poll), never under a companion lock.
     tfrdv_grpc_destroy from such a callback returns at once; the shutdown then runs on a thread
     of its own (completion-queue threads) or when the tfrdv_grpc_poll that ran the callback
     returns (host-driven). That thread is detached and nothing signals its end: it waits for
     the receipts in flight (1 s for those the shutdown sent, 10 s for older ones) and frees the
     transport's memory then, possibly after tfrdv_mgr_destroy returned; a process about to exit
     should destroy the transport from a thread of its own instead. With one completion-queue
     thread, tfrdv_grpc_peer_devices, tfrdv_mgr_peer_incarnation and tfrdv_recv in such a
     callback are refused (FAILED_PRECONDITION: their answer needs that very thread), and so is
     tfrdv_recv in tfrdv_grpc_poll's callbacks. In host-driven mode stop calling tfrdv_grpc_poll from other
     threads before tfrdv_grpc_destroy (which polls by itself until every call has completed);
     tfrdv_grpc_peer_devices and tfrdv_mgr_peer_incarnation also poll by themselves there. State:
     one thread-local pointer, the transport whose completion the thread is handling.
     Threads in the process (counted in /proc/self/task; gRPC 29.0.0 as Debian 12 ships it, 2
     CPUs): tfrdv_grpc starts its completion-queue threads at create (one by default; none with
     num_threads -1) and nothing else, except one short-lived thread when tfrdv_grpc_destroy runs
     from a callback on one of them. gRPC's C core starts its own at grpc_init (in the first
     create): a default executor, a resolver executor and a global timer thread (3); its event
     engine starts when the server starts at attach or with the first client call: 2 threads and
     a timer manager, and gRPC adds global timer threads on demand (1 more seen). Measured, a
     process of 1 thread: 5 after create, 8 or 9 after attach with listen_address set, 9 or 10
     once calls ran (7 or 8 of gRPC's, 1 of ours, the host's); a client (no listen_address): 5
     after create and attach, 9 after its first call; with num_threads -1 one fewer in each; back
     to 1 once the last tfrdv_grpc is destroyed (gRPC's threads go with the last grpc_shutdown).
     gRPC sizes its pools itself: other versions and CPU counts may differ.
*/
#ifndef TFRDV_GRPC_H
#define TFRDV_GRPC_H

#ifndef TFRDV_H
#error "Please include tfrdv.h before tfrdv_grpc.h"
#endif
#if TFRDV_VERSION_MAJOR != 0 || TFRDV_VERSION_MINOR < 6
#error "tfrdv_grpc.h 0.5 needs tfrdv.h 0.6 or a later 0.x"
#endif

#define TFRDV_GRPC_VERSION_MAJOR 0
#define TFRDV_GRPC_VERSION_MINOR 5
#define TFRDV_GRPC_VERSION_STRING "0.5.0"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
   Wire codec (no gRPC needed; used by the transport, exposed for tests, fuzzers and other
   transports). Input messages are given as a list of byte segments (the received slices).
   --------------------------------------------------------------------------------------------- */
#define TFRDV_GRPC_MAX_RANK 254      /* TensorFlow's TensorShape limit */
#define TFRDV_GRPC_TAIL_MAX 32       /* bytes after the tensor content (DT_STRING layout) */

/* Bytes per element of a dtype on the wire (DT_FLOAT 4, DT_COMPLEX128 16, ...); 0 for DT_STRING and
   for dtypes the codec does not carry (DT_INVALID, DT_RESOURCE, DT_VARIANT, 4- and 2-bit ints). */
TFRDV_API uint32_t tfrdv_grpc_dtype_size(int32_t dtype);

/* RecvTensorRequest {1: step_id, 2: key, 7: request_id}. Writes at most cap bytes; returns the
   full length (call with cap 0 to size the buffer); 0 for a NULL key with key_len > 0. */
TFRDV_API size_t tfrdv_grpc_encode_request(int64_t step_id, const char* key, size_t key_len,
                                           int64_t request_id, uint8_t* buf, size_t cap);
/* Copies the key into key[0..key_cap) (not NUL-terminated; *key_len its length). A key longer
   than key_cap is INVALID_ARGUMENT; truncated input DATA_LOSS. key NULL: nothing is copied and
   *key_len receives the room a copy needs (the longest occurrence of the field). step_id,
   key_len and request_id may be NULL (not wanted). In every decoder below, segs NULL with nsegs
   > 0 or a segment with bytes and a NULL pointer is INVALID_ARGUMENT. */
TFRDV_API tfrdv_code tfrdv_grpc_decode_request(const tfrdv_str* segs, size_t nsegs,
                                               int64_t* step_id, char* key, size_t key_cap,
                                               size_t* key_len, int64_t* request_id,
                                               tfrdv_status* st);

/* 1 if a RecvTensorRequest carries tfrdv's receipts mark (field TFRDV_GRPC_RECEIPTS_FIELD, a
   non-zero varint: the client sends receipts), else 0 (also for malformed input). A marked
   request is tfrdv_grpc_encode_request's bytes followed by 0x78 0x01. */
TFRDV_API int tfrdv_grpc_request_marked(const tfrdv_str* segs, size_t nsegs);

/* Room needed for the head of a response with a value of this rank. */
#define TFRDV_GRPC_HEAD_MAX(rank) ((size_t)64 + (size_t)13 * (size_t)(rank))
/* A RecvTensorResponse is head + the value's bytes (v->data, v->size) + tail. value may be NULL
   only when is_dead. send_start_micros 0 leaves the field out. Returns INVALID_ARGUMENT for a
   dtype the codec cannot carry, a rank above 254, a negative dim or a size that does not match
   dtype size x element count, or a NULL head, head_len, tail or tail_len; RESOURCE_EXHAUSTED
   when head_cap is too small. */
TFRDV_API tfrdv_code tfrdv_grpc_encode_response(const tfrdv_value* value, int is_dead,
                                                int require_ack, int64_t send_start_micros,
                                                uint8_t* head, size_t head_cap, size_t* head_len,
                                                uint8_t* tail, size_t* tail_len,
                                                tfrdv_status* st);

typedef struct tfrdv_grpc_response_info {
    int is_dead, require_ack;
    int64_t send_start_micros;
    int has_tensor;
    int receipts_inline; /* tfrdv's field 15: the server takes receipts inside later requests */
} tfrdv_grpc_response_info;
/* Decodes a RecvTensorResponse: alloc(alloc_user, dtype, rank, dims, size) is called at most
   once, after the whole message was validated, for a tensor of at most max_bytes (0: 2^31 - 1)
   bytes, and the bytes are written into ->data. *value is NULL for a dead tensor (nothing is
   allocated) and on error. alloc returning NULL (or less memory than asked) is
   RESOURCE_EXHAUSTED; a NULL alloc or value is INVALID_ARGUMENT (info may be NULL). */
TFRDV_API tfrdv_code tfrdv_grpc_decode_response(const tfrdv_str* segs, size_t nsegs,
                                                uint64_t max_bytes, tfrdv_alloc_fn alloc,
                                                void* alloc_user, tfrdv_value** value,
                                                tfrdv_grpc_response_info* info,
                                                tfrdv_status* st);

/* One device of GetStatusResponse (DeviceAttributes: 1 name, 2 device_type, 4 memory_limit,
   6 incarnation fixed64). */
#define TFRDV_GRPC_DEVICE_NAME_MAX 256
typedef struct tfrdv_grpc_device {
    char name[TFRDV_GRPC_DEVICE_NAME_MAX]; /* "/job:w/replica:0/task:0/device:CPU:0" */
    char type[64];                         /* "CPU" */
    uint64_t incarnation;
    int64_t memory_limit;
} tfrdv_grpc_device;
/* GetStatusResponse {repeated 1: DeviceAttributes}. Returns the full length (like snprintf); 0
   for NULL devices with n > 0. */
TFRDV_API size_t tfrdv_grpc_encode_status_response(const tfrdv_grpc_device* devices, size_t n,
                                                   uint8_t* buf, size_t cap);
/* Fills up to cap devices, *n receives the number in the message (names longer than the arrays
   are INVALID_ARGUMENT). out NULL: only counted; n may be NULL. */
TFRDV_API tfrdv_code tfrdv_grpc_decode_status_response(const tfrdv_str* segs, size_t nsegs,
                                                       tfrdv_grpc_device* out, size_t cap,
                                                       size_t* n, tfrdv_status* st);

/* 1 if a grpc-status-details-bin payload says the serving worker possibly restarted, else 0.
   The payload is parsed, never searched: TensorFlow sends a GrpcPayloadContainer {repeated 1:
   map entry {1: key, 2: value}}, gRPC's rich status is a google.rpc.Status {1: code, 2: message,
   repeated 3: google.protobuf.Any {1: type_url, 2: value}}. Restarted only when a map entry's key
   (field 1 of a field 1) or an Any's type_url (field 1 of a field 3) is exactly
   "type.googleapis.com/tensorflow.distributed_runtime.WorkerPossiblyRestarted" and the whole
   payload is well formed (a truncated varint, a length past the end, an invalid tag: 0). */
TFRDV_API int tfrdv_grpc_details_restarted(const void* payload, size_t len);

/* ---------------------------------------------------------------------------------------------
   Transport
   --------------------------------------------------------------------------------------------- */
typedef struct tfrdv_grpc tfrdv_grpc;

/* A worker-table entry is the core's tfrdv_worker {name, address}: "/job:ps/replica:0/task:0" ->
   "10.0.0.7:2222", "[::1]:2222", "dns:///ps0:2222", "ipv4:127.0.0.1:5001", "unix:/run/ps0.sock";
   tfrdv_cluster_parse's table (from TF_CONFIG) fits as it is. The old name stays an alias. */
typedef tfrdv_worker tfrdv_grpc_worker;

typedef struct tfrdv_grpc_config {
    tfrdv_hooks hooks;            /* allocator and logger (sync and clock are not used) */
    const char* listen_address;   /* "0.0.0.0:5000"; "127.0.0.1:0" picks a free port
                                     (tfrdv_grpc_port); NULL: client only */
    int num_threads;              /* 0 (default) or 1: one completion-queue thread; -1: none, the
                                     host calls tfrdv_grpc_poll (both as tfrdv_tcp.h); n > 1: n
                                     threads (at most 256; tfrdv_tcp.h starts one). gRPC's own
                                     threads come on top: THREADS AND CALLBACKS above */
    int recv_tensor_queue_depth;  /* RecvTensor requests kept posted (0: 256, at most 65536); calls
                                     beyond it wait inside gRPC until one is re-posted, they are
                                     not lost */
    uint64_t max_message_bytes;   /* largest RecvTensor response sent or accepted (0: 2^31 - 1,
                                     gRPC's limit and the most allowed) */
    size_t max_key_len;           /* longest rendezvous key served (0: 4096, at most 16 MiB) */
    int require_ack;              /* mark every response to a non-zero request id require_ack,
                                     TensorFlow clients' too (use with tfrdv_mgr_config.
                                     response_cache); the client then sends MarkRecvFinished, and
                                     this server keeps each answer until it arrives. 0: only for
                                     tfrdv clients' marked requests (receipts): DELIVERY RECEIPTS */
    int receipts;                 /* DELIVERY RECEIPTS between tfrdv peers: 0 (default) or 1 on: this
                                     client marks its RecvTensor requests (field 15) and sends a
                                     receipt for each, and this server holds the answer to a
                                     marked request until its receipt; TFRDV_OFF: never (requests
                                     go unmarked, marks are ignored; require_ack still applies) */
    int64_t receipt_ttl_ns;       /* server holding answers (receipts, require_ack): how long an answer waits for its
                                     MarkRecvFinished before it counts as delivered and is
                                     released (0: TFRDV_GRPC_RECEIPT_TTL_NS; not negative) */
    int64_t expire_interval_ns;   /* tfrdv_mgr_expire period for the attached manager (0: 20 ms;
                                     not negative) */
    int64_t recv_timeout_ns;      /* client: the gRPC deadline of a RecvTensor call whose receive
                                     has none (tfrdv_mgr_config.call_timeout_ns 0, the default), so
                                     a hung or hostile server cannot hold a receive forever; on
                                     expiry the receive fails DEADLINE_EXCEEDED naming this field
                                     (the value stays on the server). 0: TFRDV_GRPC_RECV_TIMEOUT_NS;
                                     TFRDV_OFF: none (TensorFlow's unbounded wait) */
    int64_t serve_deadline_margin_ns; /* server: a RecvTensor call with less than this left before
                                     its deadline is answered DEADLINE_EXCEEDED and the value stays
                                     buffered, as a reply then would reach the client after it
                                     gave up (0: TFRDV_GRPC_SERVE_MARGIN_NS; TFRDV_OFF: none) */
    const tfrdv_grpc_device* devices; /* GetStatus answer (copied; each name a full device name
                                         /job:J/replica:R/task:T/device:TYPE:ID); none: one device
                                         "<worker>/device:CPU:0" with the manager's incarnation */
    size_t num_devices;
    const tfrdv_worker* workers;  /* worker name -> address (copied), a cluster spec; create
                                     refuses a name not of the canonical form
                                     /job:J/replica:R/task:T and an address whose syntax is wrong
                                     (host names are resolved at connect) */
    size_t num_workers;
    /* Consulted for names not in the table: write a NUL-terminated address, return 1 if known. */
    int (*resolve)(void* user, const char* worker, size_t len, char* address, size_t cap);
    void* resolve_user;
    /* TLS (PEM text, copied). Create refuses a half configuration: a key without its chain (or
       the reverse), require_client_cert without pem_root_certs and the key pair,
       ssl_target_name_override without pem_root_certs. */
    const char* pem_root_certs;   /* client: CA of servers (TLS on); server: CA of clients */
    const char* pem_private_key;  /* server key (TLS on); client key for mutual TLS */
    const char* pem_cert_chain;
    int require_client_cert;      /* server: mutual TLS (0 or 1) */
    const char* ssl_target_name_override; /* client: name expected in the server certificate */
} tfrdv_grpc_config;
TFRDV_API tfrdv_grpc_config tfrdv_grpc_config_init(void);
#define TFRDV_GRPC_SERVE_MARGIN_NS 20000000 /* 20 ms: serve_deadline_margin_ns by default */
#define TFRDV_GRPC_RECV_TIMEOUT_NS 600000000000LL /* 10 min: recv_timeout_ns by default */
#define TFRDV_GRPC_RECEIPT_TTL_NS 60000000000LL /* 60 s: receipt_ttl_ns by default */
/* tfrdv's extension field (TensorFlow's messages do not use it; TensorFlow skips it): in a
   RecvTensorRequest, varint 1 = "this client sends a MarkRecvFinished receipt for the answer";
   in a MarkRecvFinishedRequest, varint 1 = "the answer was not taken" (DELIVERY RECEIPTS) */
#define TFRDV_GRPC_RECEIPTS_FIELD 15
/* RecvTensorRequest, repeated varint: request ids of earlier answers taken (receipts carried
   inline, to a server whose answer said receipts_inline) */
#define TFRDV_GRPC_TAKEN_FIELD 16
#define TFRDV_GRPC_INLINE_MAX 32 /* receipts carried by one request at most */
#define TFRDV_GRPC_INLINE_DELAY_NS 2000000 /* 2 ms: receipts no request carried go as calls */

TFRDV_API tfrdv_code tfrdv_grpc_create(const tfrdv_grpc_config* cfg, tfrdv_grpc** out,
                                       tfrdv_status* st);
/* The vtable for tfrdv_mgr_config.transport: each manager given it holds g until it goes. */
TFRDV_API tfrdv_transport tfrdv_grpc_transport(tfrdv_grpc* g);
/* Binds the manager (one per tfrdv_grpc; a reference is held until destroy): starts the server
   when listen_address is set and drives tfrdv_mgr_expire. Its clock converts call deadlines. */
TFRDV_API tfrdv_code tfrdv_grpc_attach(tfrdv_grpc* g, tfrdv_mgr* mgr, tfrdv_status* st);
/* The bound port (0 before attach or without a server). */
TFRDV_API int tfrdv_grpc_port(const tfrdv_grpc* g);
/* Adds or replaces a worker's address (address NULL removes it). New calls use the new address. */
TFRDV_API tfrdv_code tfrdv_grpc_set_worker(tfrdv_grpc* g, const char* worker, const char* address,
                                           tfrdv_status* st);
/* Shut down (see LIFE CYCLE); from a receive callback too (see THREADS AND CALLBACKS). */
TFRDV_API void tfrdv_grpc_destroy(tfrdv_grpc* g);
/* Host-driven mode (num_threads -1): waits up to timeout_ns (<0: forever, 0: no wait) for one
   completion, handles it and whatever else is ready, up to 1024 completions (the rest wait for
   the next call, so a flood cannot keep the host's thread), and runs the manager's expiry when
   due (also between completions). Returns the number of completions handled. Also usable
   alongside the threads. */
TFRDV_API int tfrdv_grpc_poll(tfrdv_grpc* g, int64_t timeout_ns);

/* The devices of the worker `target` names ("/job:..." resolved like a fetch, else a gRPC address)
   and their incarnations, by TensorFlow's GetStatus. Blocks up to timeout_ns (<= 0: 30 s). Fills
   up to cap devices; *n receives how many the worker has. NOT_FOUND for a worker name with no
   address; otherwise the call's status (UNAVAILABLE: not reachable now). Called
   tfrdv_grpc_get_status up to 0.5.0 (the core's tfrdv_get_status is unrelated). */
TFRDV_API tfrdv_code tfrdv_grpc_peer_devices(tfrdv_grpc* g, const char* target, int64_t timeout_ns,
                                             tfrdv_grpc_device* out, size_t cap, size_t* n,
                                             tfrdv_status* st);

typedef struct tfrdv_grpc_stats {
    uint64_t calls_started, calls_ok, calls_failed, acks_sent;       /* client: RecvTensor and
                                GetStatus calls (receipts count in acks_sent and nacks_sent) */
    uint64_t bytes_received;                                         /* tensor bytes fetched */
    uint64_t served, serve_ok, serve_cancelled, unimplemented;       /* server */
    uint64_t serve_returned; /* server: answers given back to the table, undeliverable (the call's
                                deadline passed, it was cancelled or its connection broke) */
    uint64_t status_calls, session_calls, acks_received; /* server: GetStatus, Create/Delete-
                                                            WorkerSession, MarkRecvFinished */
    uint64_t bytes_sent;                                             /* tensor bytes served */
    uint64_t client_calls_live, server_calls_live, server_requests_posted;
    uint64_t receipts_returned, receipts_expired; /* server with require_ack: answers given back
                                on a MarkRecvFinished saying the client did not take them (also in
                                serve_returned); answers released as delivered when no
                                MarkRecvFinished came within receipt_ttl_ns */
    uint64_t nacks_sent;     /* client: MarkRecvFinished saying an answer was not taken */
    uint64_t acks_inline;    /* client: of acks_sent, those carried inside a later RecvTensorRequest
                                (the others went as MarkRecvFinished calls) */
    uint64_t receipts_unmatched; /* server: MarkRecvFinished for an id with no answer held or on
                                its way (its call ended without one, or a TensorFlow client's
                                receipt for an answer this server did not hold): dropped */
} tfrdv_grpc_stats;
TFRDV_API void tfrdv_grpc_get_stats(tfrdv_grpc* g, tfrdv_grpc_stats* out);

#ifdef __cplusplus
}
#endif
#endif /* TFRDV_GRPC_H */

/* =============================================================================================
   IMPLEMENTATION
   ============================================================================================= */
#if defined(TFRDV_GRPC_IMPLEMENTATION) && !defined(TFRDV_GRPC__IMPLEMENTATION_DONE)
#define TFRDV_GRPC__IMPLEMENTATION_DONE

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef TFRDV_GRPC_NO_TRANSPORT
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TFRDV_GRPC__PRIVATE static __attribute__((unused))
#else
#define TFRDV_GRPC__PRIVATE static
#endif
#define TFRDV_GRPC__MAX_DEFAULT ((uint64_t)0x7fffffff)

/* >>status ----------------------------------------------------------------------------------- */
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__err(tfrdv_status* st, tfrdv_code code, const char* fmt, ...) {
    if (st) {
        va_list ap;
        st->code = code;
        va_start(ap, fmt);
        vsnprintf(st->msg, sizeof st->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__ok(tfrdv_status* st) {
    if (st) { st->code = TFRDV_OK; st->msg[0] = 0; }
}

/* >>dtypes ----------------------------------------------------------------------------------- */
enum { TFRDV_GRPC__K_NONE = 0, TFRDV_GRPC__K_F32, TFRDV_GRPC__K_F64, TFRDV_GRPC__K_VARINT,
       TFRDV_GRPC__K_BOOL, TFRDV_GRPC__K_STRING };
typedef struct tfrdv_grpc__dtinfo {
    uint8_t size;  /* bytes per element; 0: not a fixed-size type */
    uint8_t field; /* typed TensorProto field (0: none) */
    uint8_t kind;
    uint8_t mult;  /* wire values per element (2 for complex) */
} tfrdv_grpc__dtinfo;
#define TFRDV_GRPC__NDT 29
static const tfrdv_grpc__dtinfo tfrdv_grpc__dt[TFRDV_GRPC__NDT] = {
    {0, 0, 0, 0},                          /* 0 DT_INVALID */
    {4, 5, TFRDV_GRPC__K_F32, 1},          /* 1 FLOAT: float_val */
    {8, 6, TFRDV_GRPC__K_F64, 1},          /* 2 DOUBLE: double_val */
    {4, 7, TFRDV_GRPC__K_VARINT, 1},       /* 3 INT32: int_val */
    {1, 7, TFRDV_GRPC__K_VARINT, 1},       /* 4 UINT8 */
    {2, 7, TFRDV_GRPC__K_VARINT, 1},       /* 5 INT16 */
    {1, 7, TFRDV_GRPC__K_VARINT, 1},       /* 6 INT8 */
    {0, 8, TFRDV_GRPC__K_STRING, 1},       /* 7 STRING: string_val */
    {8, 9, TFRDV_GRPC__K_F32, 2},          /* 8 COMPLEX64: scomplex_val */
    {8, 10, TFRDV_GRPC__K_VARINT, 1},      /* 9 INT64: int64_val */
    {1, 11, TFRDV_GRPC__K_BOOL, 1},        /* 10 BOOL: bool_val */
    {1, 7, TFRDV_GRPC__K_VARINT, 1},       /* 11 QINT8 */
    {1, 7, TFRDV_GRPC__K_VARINT, 1},       /* 12 QUINT8 */
    {4, 7, TFRDV_GRPC__K_VARINT, 1},       /* 13 QINT32 */
    {2, 13, TFRDV_GRPC__K_VARINT, 1},      /* 14 BFLOAT16: half_val */
    {2, 7, TFRDV_GRPC__K_VARINT, 1},       /* 15 QINT16 */
    {2, 7, TFRDV_GRPC__K_VARINT, 1},       /* 16 QUINT16 */
    {2, 7, TFRDV_GRPC__K_VARINT, 1},       /* 17 UINT16 */
    {16, 12, TFRDV_GRPC__K_F64, 2},        /* 18 COMPLEX128: dcomplex_val */
    {2, 13, TFRDV_GRPC__K_VARINT, 1},      /* 19 HALF: half_val */
    {0, 0, 0, 0},                          /* 20 RESOURCE (not carried) */
    {0, 0, 0, 0},                          /* 21 VARIANT (not carried) */
    {4, 16, TFRDV_GRPC__K_VARINT, 1},      /* 22 UINT32: uint32_val */
    {8, 17, TFRDV_GRPC__K_VARINT, 1},      /* 23 UINT64: uint64_val */
    {1, 0, 0, 1},                          /* 24 FLOAT8_E5M2 (tensor_content only) */
    {1, 0, 0, 1},                          /* 25 FLOAT8_E4M3FN */
    {1, 0, 0, 1},                          /* 26 FLOAT8_E4M3FNUZ */
    {1, 0, 0, 1},                          /* 27 FLOAT8_E4M3B11FNUZ */
    {1, 0, 0, 1},                          /* 28 FLOAT8_E5M2FNUZ */
};
TFRDV_GRPC__PRIVATE int tfrdv_grpc__dt_ok(int32_t dtype) {
    return dtype > 0 && dtype < TFRDV_GRPC__NDT && (tfrdv_grpc__dt[dtype].size || dtype == 7);
}
TFRDV_API uint32_t tfrdv_grpc_dtype_size(int32_t dtype) {
    return (dtype > 0 && dtype < TFRDV_GRPC__NDT) ? tfrdv_grpc__dt[dtype].size : 0u;
}

/* >>writer ----------------------------------------------------------------------------------- */
TFRDV_GRPC__PRIVATE size_t tfrdv_grpc__vlen(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}
/* writes at p if p is within [.. end) ; always returns the advanced position count */
typedef struct tfrdv_grpc__wr {
    uint8_t* buf;
    size_t cap, len;
} tfrdv_grpc__wr;
TFRDV_GRPC__PRIVATE void tfrdv_grpc__put(tfrdv_grpc__wr* w, uint8_t b) {
    if (w->len < w->cap) w->buf[w->len] = b;
    w->len++;
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__putv(tfrdv_grpc__wr* w, uint64_t v) {
    while (v >= 0x80) { tfrdv_grpc__put(w, (uint8_t)(v | 0x80)); v >>= 7; }
    tfrdv_grpc__put(w, (uint8_t)v);
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__putb(tfrdv_grpc__wr* w, const void* p, size_t n) {
    if (n && w->len < w->cap) memcpy(w->buf + w->len, p, w->cap - w->len < n ? w->cap - w->len : n);
    w->len += n;
}

/* >>reader: a cursor over a list of segments, bounded by `end` ------------------------------ */
typedef struct tfrdv_grpc__rd {
    const tfrdv_str* seg;
    size_t nseg, si, off;
    uint64_t pos, end;
} tfrdv_grpc__rd;
TFRDV_GRPC__PRIVATE void tfrdv_grpc__rd_init(tfrdv_grpc__rd* r, const tfrdv_str* segs, size_t n) {
    size_t i;
    r->seg = segs;
    r->nseg = n;
    r->si = 0;
    r->off = 0;
    r->pos = 0;
    r->end = 0;
    for (i = 0; i < n; i++) r->end += segs[i].len;
}
/* INVALID_ARGUMENT when segs cannot be read: NULL with nsegs > 0, or a segment with bytes but no
   pointer (checked before rd_init walks them) */
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__segs_check(const tfrdv_str* segs, size_t nsegs, const char* what, tfrdv_status* st) {
    size_t i;
    if (nsegs && !segs) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: NULL segments (nsegs %llu)", what, (unsigned long long)nsegs);
    for (i = 0; i < nsegs; i++)
        if (segs[i].len && !segs[i].ptr)
            return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: segment %llu has %llu bytes and a NULL pointer", what,
                                   (unsigned long long)i, (unsigned long long)segs[i].len);
    return TFRDV_OK;
}
/* 1 ok, 0 end reached */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__rd_byte(tfrdv_grpc__rd* r, uint8_t* b) {
    if (r->pos >= r->end) return 0;
    while (r->off >= r->seg[r->si].len) { r->si++; r->off = 0; }
    *b = (uint8_t)r->seg[r->si].ptr[r->off++];
    r->pos++;
    return 1;
}
/* 1 ok, 0 truncated, -1 overlong varint */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__rd_varint(tfrdv_grpc__rd* r, uint64_t* v) {
    uint64_t x = 0;
    int shift = 0;
    uint8_t b;
    for (;;) {
        if (!tfrdv_grpc__rd_byte(r, &b)) return 0;
        if (shift == 63 && (b & 0x7e)) return -1;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
        if (shift > 63) return -1;
    }
    *v = x;
    return 1;
}
/* copies (dst non-NULL) or skips n bytes; 0 when fewer remain */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__rd_take(tfrdv_grpc__rd* r, void* dst, uint64_t n) {
    unsigned char* d = (unsigned char*)dst;
    if (n > r->end - r->pos) return 0;
    r->pos += n;
    while (n) {
        size_t avail = r->seg[r->si].len - r->off, k;
        if (!avail) { r->si++; r->off = 0; continue; }
        k = (uint64_t)avail < n ? avail : (size_t)n;
        if (d) { memcpy(d, r->seg[r->si].ptr + r->off, k); d += k; }
        r->off += k;
        n -= k;
    }
    return 1;
}
TFRDV_GRPC__PRIVATE int tfrdv_grpc__rd_fixed(tfrdv_grpc__rd* r, int nbytes, uint64_t* v) {
    unsigned char b[8];
    int i;
    if (!tfrdv_grpc__rd_take(r, b, (uint64_t)nbytes)) return 0;
    *v = 0;
    for (i = nbytes - 1; i >= 0; i--) *v = (*v << 8) | b[i];
    return 1;
}

/* One field header: *field, *wt; for wire type 2 *len (bounded by the remaining bytes) and the
   reader positioned at the payload. Returns OK, or DATA_LOSS / INVALID_ARGUMENT. */
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__rd_tag(tfrdv_grpc__rd* r, const char* what, uint32_t* field,
                                                  int* wt, uint64_t* len, tfrdv_status* st) {
    uint64_t t;
    int rc = tfrdv_grpc__rd_varint(r, &t);
    if (rc == 0) return tfrdv_grpc__err(st, TFRDV_DATA_LOSS, "%s: truncated field tag at byte %llu", what, (unsigned long long)r->pos);
    if (rc < 0 || (t >> 3) == 0 || (t >> 3) > 0x1fffffff)
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: invalid field tag at byte %llu", what, (unsigned long long)r->pos);
    *field = (uint32_t)(t >> 3);
    *wt = (int)(t & 7);
    *len = 0;
    if (*wt == 2) {
        rc = tfrdv_grpc__rd_varint(r, len);
        if (rc == 0) return tfrdv_grpc__err(st, TFRDV_DATA_LOSS, "%s: truncated length of field %u", what, *field);
        if (rc < 0) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: invalid length of field %u", what, *field);
        if (*len > r->end - r->pos)
            return tfrdv_grpc__err(st, TFRDV_DATA_LOSS, "%s: field %u claims %llu bytes, %llu remain", what, *field,
                                   (unsigned long long)*len, (unsigned long long)(r->end - r->pos));
    } else if (*wt != 0 && *wt != 1 && *wt != 5) {
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: unsupported wire type %d of field %u", what, *wt, *field);
    }
    return TFRDV_OK;
}
/* Skips the payload of a field whose header was just read. */
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__rd_skip(tfrdv_grpc__rd* r, const char* what, uint32_t field, int wt,
                                                   uint64_t len, tfrdv_status* st) {
    uint64_t v;
    int rc = 1;
    switch (wt) {
    case 0: rc = tfrdv_grpc__rd_varint(r, &v); break;
    case 1: rc = tfrdv_grpc__rd_take(r, 0, 8); break;
    case 5: rc = tfrdv_grpc__rd_take(r, 0, 4); break;
    default: rc = tfrdv_grpc__rd_take(r, 0, len); break;
    }
    if (rc == 0) return tfrdv_grpc__err(st, TFRDV_DATA_LOSS, "%s: truncated field %u", what, field);
    if (rc < 0) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: invalid varint in field %u", what, field);
    return TFRDV_OK;
}
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__rd_uvarint(tfrdv_grpc__rd* r, const char* what, uint32_t field, int wt,
                                                      uint64_t* v, tfrdv_status* st) {
    int rc;
    if (wt != 0) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: field %u has wire type %d, expected a varint", what, field, wt);
    rc = tfrdv_grpc__rd_varint(r, v);
    if (rc == 0) return tfrdv_grpc__err(st, TFRDV_DATA_LOSS, "%s: truncated varint in field %u", what, field);
    if (rc < 0) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: invalid varint in field %u", what, field);
    return TFRDV_OK;
}
/* A sub-reader over the next len bytes; the parent skips them. */
TFRDV_GRPC__PRIVATE tfrdv_grpc__rd tfrdv_grpc__rd_sub(tfrdv_grpc__rd* r, uint64_t len) {
    tfrdv_grpc__rd s = *r;
    s.end = r->pos + len;
    tfrdv_grpc__rd_take(r, 0, len);
    return s;
}

/* >>request ---------------------------------------------------------------------------------- */
TFRDV_API size_t tfrdv_grpc_encode_request(int64_t step_id, const char* key, size_t key_len,
                                           int64_t request_id, uint8_t* buf, size_t cap) {
    tfrdv_grpc__wr w;
    w.buf = buf;
    w.cap = buf ? cap : 0;
    w.len = 0;
    if (key_len && !key) return 0; /* nothing to encode from */
    if (step_id) { tfrdv_grpc__put(&w, 0x08); tfrdv_grpc__putv(&w, (uint64_t)step_id); }
    if (key_len) {
        tfrdv_grpc__put(&w, 0x12);
        tfrdv_grpc__putv(&w, key_len);
        tfrdv_grpc__putb(&w, key, key_len);
    }
    if (request_id) { tfrdv_grpc__put(&w, 0x38); tfrdv_grpc__putv(&w, (uint64_t)request_id); }
    return w.len;
}
TFRDV_API tfrdv_code tfrdv_grpc_decode_request(const tfrdv_str* segs, size_t nsegs,
                                               int64_t* step_id, char* key, size_t key_cap,
                                               size_t* key_len, int64_t* request_id,
                                               tfrdv_status* st) {
    static const char what[] = "RecvTensorRequest";
    tfrdv_grpc__rd r;
    uint32_t f;
    int wt;
    uint64_t len, v;
    tfrdv_code c;
    int64_t step_dummy, id_dummy;
    size_t len_dummy;
    if (!step_id) step_id = &step_dummy; /* outputs left NULL are not wanted */
    if (!request_id) request_id = &id_dummy;
    if (!key_len) key_len = &len_dummy;
    *step_id = 0;
    *request_id = 0;
    *key_len = 0;
    if ((c = tfrdv_grpc__segs_check(segs, nsegs, what, st)) != TFRDV_OK) return c;
    tfrdv_grpc__rd_init(&r, segs, nsegs);
    while (r.pos < r.end) {
        if ((c = tfrdv_grpc__rd_tag(&r, what, &f, &wt, &len, st)) != TFRDV_OK) return c;
        if (f == 1 || f == 7) {
            if ((c = tfrdv_grpc__rd_uvarint(&r, what, f, wt, &v, st)) != TFRDV_OK) return c;
            if (f == 1) *step_id = (int64_t)v;
            else *request_id = (int64_t)v;
        } else if (f == 2 && wt == 2 && !key) { /* sizing: the longest occurrence (the last one wins) */
            tfrdv_grpc__rd_take(&r, 0, len);
            if (len > *key_len) *key_len = (size_t)len;
        } else if (f == 2 && wt == 2) {
            if (len > key_cap)
                return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: rendezvous key of %llu bytes exceeds the limit of %llu",
                                       what, (unsigned long long)len, (unsigned long long)key_cap);
            tfrdv_grpc__rd_take(&r, key, len);
            *key_len = (size_t)len;
        } else if (f == 2) {
            return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: rendezvous_key has wire type %d", what, wt);
        } else if ((c = tfrdv_grpc__rd_skip(&r, what, f, wt, len, st)) != TFRDV_OK) {
            return c;
        }
    }
    tfrdv_grpc__ok(st);
    return TFRDV_OK;
}

/* the mark, and up to cap ids of field 16 (taken receipts) into ids; 0 and *n 0 when malformed */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__request_ext(const tfrdv_str* segs, size_t nsegs, int64_t* ids, size_t cap, size_t* n) {
    tfrdv_grpc__rd r;
    tfrdv_status st;
    uint32_t f;
    int wt, marked = 0, bad = 0;
    uint64_t len, v;
    *n = 0;
    if (tfrdv_grpc__segs_check(segs, nsegs, "RecvTensorRequest", &st) != TFRDV_OK) return 0;
    tfrdv_grpc__rd_init(&r, segs, nsegs);
    while (!bad && r.pos < r.end) {
        if (tfrdv_grpc__rd_tag(&r, "RecvTensorRequest", &f, &wt, &len, &st) != TFRDV_OK) bad = 1;
        else if ((f == TFRDV_GRPC_RECEIPTS_FIELD || f == TFRDV_GRPC_TAKEN_FIELD) && wt == 0) {
            if (tfrdv_grpc__rd_uvarint(&r, "RecvTensorRequest", f, wt, &v, &st) != TFRDV_OK) bad = 1;
            else if (f == TFRDV_GRPC_RECEIPTS_FIELD) marked = v != 0;
            else if (v && *n < cap) ids[(*n)++] = (int64_t)v;
        } else if (tfrdv_grpc__rd_skip(&r, "RecvTensorRequest", f, wt, len, &st) != TFRDV_OK) {
            bad = 1;
        }
    }
    if (bad) { *n = 0; return 0; }
    return marked;
}
TFRDV_API int tfrdv_grpc_request_marked(const tfrdv_str* segs, size_t nsegs) {
    size_t n;
    return tfrdv_grpc__request_ext(segs, nsegs, 0, 0, &n);
}

/* >>response encoding ------------------------------------------------------------------------ */
TFRDV_API tfrdv_code tfrdv_grpc_encode_response(const tfrdv_value* value, int is_dead,
                                                int require_ack, int64_t send_start_micros,
                                                uint8_t* head, size_t head_cap, size_t* head_len,
                                                uint8_t* tail, size_t* tail_len,
                                                tfrdv_status* st) {
    static const int64_t dead_dims[1] = {0};
    int32_t dtype, rank, i;
    const int64_t* dims;
    uint64_t size, n = 1, shape_len = 0, tensor_len;
    int is_string, shape_field;
    tfrdv_grpc__wr w, t;
    if (!head || !head_len || !tail || !tail_len)
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "RecvTensorResponse: NULL %s", !head ? "head" : !head_len ? "head_len" : !tail ? "tail" : "tail_len");
    *head_len = 0;
    *tail_len = 0;
    if (value) {
        dtype = value->dtype;
        rank = value->rank;
        dims = value->dims;
        size = value->size;
    } else if (is_dead) {
        dtype = 1; /* what TensorFlow sends for a dead value: DT_FLOAT, shape [0] */
        rank = 1;
        dims = dead_dims;
        size = 0;
    } else {
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "RecvTensorResponse: no value");
    }
    if (!tfrdv_grpc__dt_ok(dtype))
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "RecvTensorResponse: dtype %d cannot be sent over gRPC by tfrdv", (int)dtype);
    if (rank < 0 || rank > TFRDV_GRPC_MAX_RANK || (rank > 0 && !dims))
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "RecvTensorResponse: invalid rank %d", (int)rank);
    if (size && !(value && value->data)) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "RecvTensorResponse: value without data");
    for (i = 0; i < rank; i++) {
        if (dims[i] < 0) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "RecvTensorResponse: negative dimension %lld", (long long)dims[i]);
        if (n && (uint64_t)dims[i] > UINT64_MAX / n) n = UINT64_MAX; /* saturates; caught below */
        else n *= (uint64_t)dims[i];
        shape_len += 1 + tfrdv_grpc__vlen(1 + tfrdv_grpc__vlen((uint64_t)dims[i])) + 1 + tfrdv_grpc__vlen((uint64_t)dims[i]);
    }
    is_string = dtype == 7;
    if (!is_string && (n == UINT64_MAX || n > UINT64_MAX / tfrdv_grpc__dt[dtype].size || n * tfrdv_grpc__dt[dtype].size != size))
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT,
                               "RecvTensorResponse: value of %llu bytes does not match dtype %d x %llu elements",
                               (unsigned long long)size, (int)dtype, (unsigned long long)n);
    shape_field = is_string || rank > 0; /* fast path: no shape field for scalars */
    tensor_len = 1 + tfrdv_grpc__vlen((uint64_t)dtype);
    if (shape_field) tensor_len += 1 + tfrdv_grpc__vlen(shape_len) + shape_len;
    if (!is_string || size) tensor_len += 1 + tfrdv_grpc__vlen(size) + size;
    w.buf = head;
    w.cap = head_cap;
    w.len = 0;
    t.buf = tail;
    t.cap = TFRDV_GRPC_TAIL_MAX;
    t.len = 0;
    {
        tfrdv_grpc__wr* meta = is_string ? &t : &w; /* DT_STRING: tensor first (normal serialisation) */
        if (is_dead) { tfrdv_grpc__put(meta, 0x10); tfrdv_grpc__put(meta, 1); }
        if (send_start_micros) { tfrdv_grpc__put(meta, 0x18); tfrdv_grpc__putv(meta, (uint64_t)send_start_micros); }
        if (require_ack) { tfrdv_grpc__put(meta, 0x28); tfrdv_grpc__put(meta, 1); }
    }
    tfrdv_grpc__put(&w, 0x0a);
    tfrdv_grpc__putv(&w, tensor_len);
    tfrdv_grpc__put(&w, 0x08);
    tfrdv_grpc__putv(&w, (uint64_t)dtype);
    if (shape_field) {
        tfrdv_grpc__put(&w, 0x12);
        tfrdv_grpc__putv(&w, shape_len);
        for (i = 0; i < rank; i++) {
            tfrdv_grpc__put(&w, 0x12);
            tfrdv_grpc__putv(&w, 1 + tfrdv_grpc__vlen((uint64_t)dims[i]));
            tfrdv_grpc__put(&w, 0x08);
            tfrdv_grpc__putv(&w, (uint64_t)dims[i]);
        }
    }
    if (!is_string || size) {
        tfrdv_grpc__put(&w, 0x22);
        tfrdv_grpc__putv(&w, size);
    }
    if (w.len > w.cap) return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "RecvTensorResponse: head needs %llu bytes", (unsigned long long)w.len);
    *head_len = w.len;
    *tail_len = t.len;
    tfrdv_grpc__ok(st);
    return TFRDV_OK;
}

/* >>response decoding ------------------------------------------------------------------------ */
typedef struct tfrdv_grpc__tscan {
    int32_t dtype;
    int has_dtype, has_shape, rank, ncontent;
    int64_t dims[TFRDV_GRPC_MAX_RANK];
    uint64_t content_len;
    tfrdv_grpc__rd content;     /* at the content bytes */
    uint64_t nvals[19];         /* values seen per typed field 5..18 */
    uint64_t str_bytes, str_hdr, last_len; /* string_val: payload, varint headers, last length */
} tfrdv_grpc__tscan;

TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__scan_shape(tfrdv_grpc__rd* r, tfrdv_grpc__tscan* ts, tfrdv_status* st) {
    static const char what[] = "TensorShapeProto";
    uint32_t f;
    int wt;
    uint64_t len, v;
    tfrdv_code c;
    while (r->pos < r->end) {
        if ((c = tfrdv_grpc__rd_tag(r, what, &f, &wt, &len, st)) != TFRDV_OK) return c;
        if (f == 2 && wt == 2) {
            tfrdv_grpc__rd d = tfrdv_grpc__rd_sub(r, len);
            int64_t size = 0;
            if (ts->rank >= TFRDV_GRPC_MAX_RANK)
                return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: more than %d dimensions", what, TFRDV_GRPC_MAX_RANK);
            while (d.pos < d.end) {
                uint32_t df;
                int dwt;
                uint64_t dlen;
                if ((c = tfrdv_grpc__rd_tag(&d, "TensorShapeProto.Dim", &df, &dwt, &dlen, st)) != TFRDV_OK) return c;
                if (df == 1) {
                    if ((c = tfrdv_grpc__rd_uvarint(&d, "TensorShapeProto.Dim", df, dwt, &v, st)) != TFRDV_OK) return c;
                    size = (int64_t)v;
                } else if ((c = tfrdv_grpc__rd_skip(&d, "TensorShapeProto.Dim", df, dwt, dlen, st)) != TFRDV_OK) {
                    return c;
                }
            }
            if (size < 0) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: dimension %d has size %lld", what, ts->rank, (long long)size);
            ts->dims[ts->rank++] = size;
        } else if (f == 3) {
            if ((c = tfrdv_grpc__rd_uvarint(r, what, f, wt, &v, st)) != TFRDV_OK) return c;
            if (v) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: unknown rank", what);
        } else if (f == 2) {
            return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: dim has wire type %d", what, wt);
        } else if ((c = tfrdv_grpc__rd_skip(r, what, f, wt, len, st)) != TFRDV_OK) {
            return c;
        }
    }
    return TFRDV_OK;
}

/* Counts the values of a typed field occurrence (packed or not). */
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__count_typed(tfrdv_grpc__rd* r, tfrdv_grpc__tscan* ts, uint32_t f, int wt,
                                                       uint64_t len, tfrdv_status* st) {
    static const char what[] = "TensorProto";
    int fixed = (f == 5 || f == 9) ? 4 : (f == 6 || f == 12) ? 8 : 0;
    uint64_t v;
    tfrdv_code c;
    if (f == 8 || f == 18) { /* string_val (bytes), float8_val */
        if (wt != 2) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: field %u has wire type %d", what, f, wt);
        if (f == 8) {
            ts->str_bytes += len;
            ts->str_hdr += tfrdv_grpc__vlen(len);
            ts->last_len = len;
            ts->nvals[8]++;
        }
        tfrdv_grpc__rd_take(r, 0, len);
        return TFRDV_OK;
    }
    if (wt == 2) { /* packed */
        if (fixed) {
            if (len % (uint64_t)fixed)
                return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: packed field %u of %llu bytes is not a multiple of %d", what, f,
                                       (unsigned long long)len, fixed);
            ts->nvals[f] += len / (uint64_t)fixed;
            tfrdv_grpc__rd_take(r, 0, len);
        } else {
            tfrdv_grpc__rd p = tfrdv_grpc__rd_sub(r, len);
            while (p.pos < p.end) {
                int rc = tfrdv_grpc__rd_varint(&p, &v);
                if (rc <= 0) return tfrdv_grpc__err(st, rc ? TFRDV_INVALID_ARGUMENT : TFRDV_DATA_LOSS, "%s: bad packed varint in field %u", what, f);
                ts->nvals[f]++;
            }
        }
        return TFRDV_OK;
    }
    if ((fixed == 4 && wt != 5) || (fixed == 8 && wt != 1) || (!fixed && wt != 0))
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: field %u has wire type %d", what, f, wt);
    if ((c = tfrdv_grpc__rd_skip(r, what, f, wt, len, st)) != TFRDV_OK) return c;
    ts->nvals[f]++;
    return TFRDV_OK;
}

TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__scan_tensor(tfrdv_grpc__rd* r, tfrdv_grpc__tscan* ts, tfrdv_status* st) {
    static const char what[] = "TensorProto";
    uint32_t f;
    int wt;
    uint64_t len, v;
    tfrdv_code c;
    while (r->pos < r->end) {
        if ((c = tfrdv_grpc__rd_tag(r, what, &f, &wt, &len, st)) != TFRDV_OK) return c;
        if (f == 1) {
            if ((c = tfrdv_grpc__rd_uvarint(r, what, f, wt, &v, st)) != TFRDV_OK) return c;
            if (v > 0x7fffffff) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: dtype %llu out of range", what, (unsigned long long)v);
            ts->dtype = (int32_t)v;
            ts->has_dtype = 1;
        } else if (f == 2) {
            tfrdv_grpc__rd s;
            if (wt != 2) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: tensor_shape has wire type %d", what, wt);
            if (ts->has_shape) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: tensor_shape appears twice", what);
            ts->has_shape = 1;
            s = tfrdv_grpc__rd_sub(r, len);
            if ((c = tfrdv_grpc__scan_shape(&s, ts, st)) != TFRDV_OK) return c;
        } else if (f == 4) {
            if (wt != 2) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: tensor_content has wire type %d", what, wt);
            if (ts->ncontent++) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: tensor_content appears twice", what);
            ts->content = *r;
            ts->content_len = len;
            tfrdv_grpc__rd_take(r, 0, len);
        } else if (f >= 5 && f <= 18 && f != 14 && f != 15) {
            if ((c = tfrdv_grpc__count_typed(r, ts, f, wt, len, st)) != TFRDV_OK) return c;
        } else if ((c = tfrdv_grpc__rd_skip(r, what, f, wt, len, st)) != TFRDV_OK) {
            return c;
        }
    }
    return TFRDV_OK;
}

TFRDV_GRPC__PRIVATE void tfrdv_grpc__store(unsigned char* dst, uint64_t idx, int width, uint64_t v) {
    int i;
    dst += idx * (uint64_t)width;
    for (i = 0; i < width; i++) dst[i] = (unsigned char)(v >> (8 * i));
}

/* Second pass over the TensorProto: writes the typed values of field `f` (scalar width `width`,
   `slots` scalars) into dst; returns the number written. Validated by the first pass. */
TFRDV_GRPC__PRIVATE uint64_t tfrdv_grpc__fill_typed(tfrdv_grpc__rd r, uint32_t want, int kind, int width,
                                                    uint64_t slots, unsigned char* dst) {
    uint64_t n = 0, v, len;
    uint32_t f;
    int wt;
    while (r.pos < r.end && n < slots) {
        tfrdv_grpc__rd_tag(&r, "", &f, &wt, &len, 0);
        if (f != want) {
            tfrdv_grpc__rd_skip(&r, "", f, wt, len, 0);
            continue;
        }
        if (wt == 2) {
            tfrdv_grpc__rd p = tfrdv_grpc__rd_sub(&r, len);
            while (p.pos < p.end && n < slots) {
                if (kind == TFRDV_GRPC__K_F32) tfrdv_grpc__rd_fixed(&p, 4, &v);
                else if (kind == TFRDV_GRPC__K_F64) tfrdv_grpc__rd_fixed(&p, 8, &v);
                else tfrdv_grpc__rd_varint(&p, &v);
                if (kind == TFRDV_GRPC__K_BOOL) v = v != 0;
                tfrdv_grpc__store(dst, n++, width, v);
            }
        } else {
            if (wt == 5) tfrdv_grpc__rd_fixed(&r, 4, &v);
            else if (wt == 1) tfrdv_grpc__rd_fixed(&r, 8, &v);
            else tfrdv_grpc__rd_varint(&r, &v);
            if (kind == TFRDV_GRPC__K_BOOL) v = v != 0;
            tfrdv_grpc__store(dst, n++, width, v);
        }
    }
    return n;
}

/* string_val -> TensorFlow's string content encoding (varint lengths, then bytes) */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__fill_strings(tfrdv_grpc__rd r, uint64_t nelem, uint64_t hdr_bytes,
                                                  unsigned char* dst) {
    tfrdv_grpc__wr hw, bw;
    uint64_t n = 0, len = 0, last_len = 0, pos_last = 0;
    uint32_t f;
    int wt;
    hw.buf = dst;
    hw.cap = (size_t)hdr_bytes;
    hw.len = 0;
    bw.buf = dst + hdr_bytes;
    bw.cap = (size_t)-1;
    bw.len = 0;
    while (r.pos < r.end && n < nelem) {
        tfrdv_grpc__rd_tag(&r, "", &f, &wt, &len, 0);
        if (f != 8) {
            tfrdv_grpc__rd_skip(&r, "", f, wt, len, 0);
            continue;
        }
        tfrdv_grpc__putv(&hw, len);
        pos_last = bw.len;
        tfrdv_grpc__rd_take(&r, bw.buf + bw.len, len);
        bw.len += (size_t)len;
        last_len = len;
        n++;
    }
    for (; n > 0 && n < nelem; n++) { /* fewer strings than elements: repeat the last */
        tfrdv_grpc__putv(&hw, last_len);
        memmove(bw.buf + bw.len, bw.buf + pos_last, (size_t)last_len);
        bw.len += (size_t)last_len;
    }
    for (; n < nelem; n++) tfrdv_grpc__put(&hw, 0); /* no strings at all: empty ones */
}

/* Validates TensorFlow's string content encoding of nelem strings. */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__strings_ok(const unsigned char* p, uint64_t size, uint64_t nelem) {
    uint64_t i, pos = 0, total = 0;
    for (i = 0; i < nelem; i++) {
        uint64_t v = 0;
        int shift = 0;
        for (;;) {
            unsigned char b;
            if (pos >= size || shift > 63) return 0;
            b = p[pos++];
            v |= (uint64_t)(b & 0x7f) << shift;
            if (!(b & 0x80)) break;
            shift += 7;
        }
        if (v > size) return 0;
        total += v;
        if (total > size) return 0;
    }
    return pos + total == size;
}

TFRDV_API tfrdv_code tfrdv_grpc_decode_response(const tfrdv_str* segs, size_t nsegs,
                                                uint64_t max_bytes, tfrdv_alloc_fn alloc,
                                                void* alloc_user, tfrdv_value** value,
                                                tfrdv_grpc_response_info* info,
                                                tfrdv_status* st) {
    static const char what[] = "RecvTensorResponse";
    tfrdv_grpc__rd r, tensor;
    tfrdv_grpc__tscan* ts;
    tfrdv_grpc__tscan scan;
    tfrdv_grpc_response_info inf;
    uint32_t f;
    int wt, ntensor = 0, i;
    uint64_t len, v, nelem = 1, size = 0, slots = 0, nv = 0;
    const tfrdv_grpc__dtinfo* di;
    tfrdv_value* out;
    tfrdv_code c;
    if (value) *value = 0;
    if (!value || !alloc) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: NULL %s", what, value ? "alloc" : "value");
    memset(&inf, 0, sizeof inf);
    if (info) *info = inf;
    if ((c = tfrdv_grpc__segs_check(segs, nsegs, what, st)) != TFRDV_OK) return c;
    if (!max_bytes) max_bytes = TFRDV_GRPC__MAX_DEFAULT;
    ts = &scan;
    memset(ts, 0, sizeof *ts);
    tfrdv_grpc__rd_init(&r, segs, nsegs);
    tensor = r;
    while (r.pos < r.end) {
        if ((c = tfrdv_grpc__rd_tag(&r, what, &f, &wt, &len, st)) != TFRDV_OK) return c;
        if (f == 1) {
            if (wt != 2) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: tensor has wire type %d", what, wt);
            if (ntensor++) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: tensor appears twice", what);
            tensor = tfrdv_grpc__rd_sub(&r, len);
        } else if (f == 2 || f == 3 || f == 5 || (f == TFRDV_GRPC_RECEIPTS_FIELD && wt == 0)) {
            if ((c = tfrdv_grpc__rd_uvarint(&r, what, f, wt, &v, st)) != TFRDV_OK) return c;
            if (f == 2) inf.is_dead = v != 0;
            else if (f == 3) inf.send_start_micros = (int64_t)v;
            else if (f == 5) inf.require_ack = v != 0;
            else inf.receipts_inline = v != 0;
        } else if ((c = tfrdv_grpc__rd_skip(&r, what, f, wt, len, st)) != TFRDV_OK) {
            return c;
        }
    }
    inf.has_tensor = ntensor;
    if (info) *info = inf;
    if (!ntensor) {
        if (inf.is_dead) { tfrdv_grpc__ok(st); return TFRDV_OK; }
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: no tensor", what);
    }
    {
        tfrdv_grpc__rd t = tensor;
        if ((c = tfrdv_grpc__scan_tensor(&t, ts, st)) != TFRDV_OK) return c;
    }
    if (!tfrdv_grpc__dt_ok(ts->dtype))
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: unsupported dtype %d", what, (int)ts->dtype);
    if (inf.is_dead) { tfrdv_grpc__ok(st); return TFRDV_OK; } /* validated; a dead value carries nothing */
    di = &tfrdv_grpc__dt[ts->dtype];
    for (i = 0; i < ts->rank; i++) {
        uint64_t d = (uint64_t)ts->dims[i];
        if (d && nelem > UINT64_MAX / d)
            return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: element count overflows", what);
        nelem *= d;
    }
    if (di->size) {
        if (nelem > max_bytes / di->size)
            return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "%s: tensor of %llu elements x %u bytes exceeds the limit of %llu bytes", what,
                                   (unsigned long long)nelem, (unsigned)di->size, (unsigned long long)max_bytes);
        size = nelem * di->size;
        if (ts->ncontent && ts->content_len != size)
            return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: tensor_content has %llu bytes, dtype %d x %llu elements needs %llu", what,
                                   (unsigned long long)ts->content_len, (int)ts->dtype, (unsigned long long)nelem,
                                   (unsigned long long)size);
        if (!ts->ncontent && di->field) {
            nv = ts->nvals[di->field];
            slots = nelem * di->mult;
            if (nv > slots)
                return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: %llu typed values for %llu elements", what, (unsigned long long)nv,
                                       (unsigned long long)nelem);
            if (di->mult == 2 && (nv & 1))
                return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: odd number of complex components", what);
        }
    } else { /* DT_STRING */
        if (ts->ncontent) {
            size = ts->content_len;
            if (size > max_bytes)
                return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "%s: %llu bytes exceed the limit of %llu", what, (unsigned long long)size,
                                       (unsigned long long)max_bytes);
            if (nelem > size) /* each string needs at least its one-byte length */
                return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: %llu strings in %llu bytes of tensor_content", what,
                                       (unsigned long long)nelem, (unsigned long long)size);
        } else {
            uint64_t extra;
            nv = ts->nvals[8];
            if (nv > nelem)
                return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: %llu strings for %llu elements", what, (unsigned long long)nv,
                                       (unsigned long long)nelem);
            if (nelem > max_bytes) return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "%s: %llu strings exceed the limit", what, (unsigned long long)nelem);
            extra = nv ? (nelem - nv) : nelem; /* repeated last string, or empty strings */
            {
                uint64_t per = nv ? ts->last_len + tfrdv_grpc__vlen(ts->last_len) : 1;
                if (per && extra > max_bytes / per)
                    return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "%s: strings exceed the limit of %llu bytes", what, (unsigned long long)max_bytes);
                size = ts->str_bytes + ts->str_hdr + extra * per;
            }
            if (size > max_bytes)
                return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "%s: %llu bytes of strings exceed the limit of %llu", what, (unsigned long long)size,
                                       (unsigned long long)max_bytes);
        }
    }
    if (!alloc) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: no allocator", what);
    out = alloc(alloc_user, ts->dtype, ts->rank, ts->dims, size);
    if (!out || out->size < size || (size && !out->data)) {
        tfrdv_value_release(out);
        return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "%s: no memory for a tensor of %llu bytes", what, (unsigned long long)size);
    }
    if (ts->ncontent) {
        tfrdv_grpc__rd_take(&ts->content, out->data, size);
        if (ts->dtype == 7 && !tfrdv_grpc__strings_ok((const unsigned char*)out->data, size, nelem)) {
            tfrdv_value_release(out);
            return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s: DT_STRING tensor_content does not hold %llu strings", what,
                                   (unsigned long long)nelem);
        }
    } else if (ts->dtype == 7) {
        if (size) tfrdv_grpc__fill_strings(tensor, nelem, ts->str_hdr + (nv ? (nelem - nv) * tfrdv_grpc__vlen(ts->last_len) : nelem),
                                           (unsigned char*)out->data);
    } else if (size) {
        int width = di->size / di->mult;
        uint64_t got = 0;
        if (nv) got = tfrdv_grpc__fill_typed(tensor, di->field, di->kind, width, slots, (unsigned char*)out->data);
        if (!got) {
            memset(out->data, 0, (size_t)size);
        } else { /* TensorFlow repeats the last value (the last element for complex) */
            unsigned char* d = (unsigned char*)out->data;
            uint64_t unit = (uint64_t)width * di->mult, have = got * (uint64_t)width;
            while (have < size) {
                memcpy(d + have, d + (got * (uint64_t)width - unit), (size_t)unit);
                have += unit;
            }
        }
    }
    *value = out;
    tfrdv_grpc__ok(st);
    return TFRDV_OK;
}

/* >>GetStatus -------------------------------------------------------------------------------- */
TFRDV_API size_t tfrdv_grpc_encode_status_response(const tfrdv_grpc_device* d, size_t n,
                                                   uint8_t* buf, size_t cap) {
    tfrdv_grpc__wr w;
    size_t i;
    int k;
    w.buf = buf;
    w.cap = buf ? cap : 0;
    w.len = 0;
    if (n && !d) return 0; /* nothing to encode from */
    for (i = 0; i < n; i++) {
        size_t nl = strlen(d[i].name), tl = strlen(d[i].type);
        uint64_t len = 1 + tfrdv_grpc__vlen(nl) + nl + 1 + tfrdv_grpc__vlen(tl) + tl + 2 + 9 + 11;
        if (d[i].memory_limit) len += 1 + tfrdv_grpc__vlen((uint64_t)d[i].memory_limit);
        tfrdv_grpc__put(&w, 0x0a);
        tfrdv_grpc__putv(&w, len);
        tfrdv_grpc__put(&w, 0x0a);
        tfrdv_grpc__putv(&w, nl);
        tfrdv_grpc__putb(&w, d[i].name, nl);
        tfrdv_grpc__put(&w, 0x12);
        tfrdv_grpc__putv(&w, tl);
        tfrdv_grpc__putb(&w, d[i].type, tl);
        if (d[i].memory_limit) { tfrdv_grpc__put(&w, 0x20); tfrdv_grpc__putv(&w, (uint64_t)d[i].memory_limit); }
        tfrdv_grpc__put(&w, 0x2a); /* locality: present, empty (as TensorFlow sends it) */
        tfrdv_grpc__put(&w, 0x00);
        tfrdv_grpc__put(&w, 0x31);
        for (k = 0; k < 8; k++) tfrdv_grpc__put(&w, (uint8_t)(d[i].incarnation >> (8 * k)));
        tfrdv_grpc__put(&w, 0x40); /* xla_global_id -1 */
        tfrdv_grpc__putv(&w, (uint64_t)(int64_t)-1);
    }
    return w.len;
}
TFRDV_API tfrdv_code tfrdv_grpc_decode_status_response(const tfrdv_str* segs, size_t nsegs,
                                                       tfrdv_grpc_device* out, size_t cap,
                                                       size_t* n, tfrdv_status* st) {
    static const char what[] = "GetStatusResponse";
    tfrdv_grpc__rd r;
    uint32_t f;
    int wt;
    uint64_t len, v;
    tfrdv_code c;
    size_t n_dummy;
    if (!n) n = &n_dummy; /* the count not wanted */
    if (!out) cap = 0;
    *n = 0;
    if ((c = tfrdv_grpc__segs_check(segs, nsegs, what, st)) != TFRDV_OK) return c;
    tfrdv_grpc__rd_init(&r, segs, nsegs);
    while (r.pos < r.end) {
        if ((c = tfrdv_grpc__rd_tag(&r, what, &f, &wt, &len, st)) != TFRDV_OK) return c;
        if (f == 1 && wt == 2) {
            tfrdv_grpc__rd d = tfrdv_grpc__rd_sub(&r, len);
            tfrdv_grpc_device dev;
            memset(&dev, 0, sizeof dev);
            while (d.pos < d.end) {
                if ((c = tfrdv_grpc__rd_tag(&d, "DeviceAttributes", &f, &wt, &len, st)) != TFRDV_OK) return c;
                if ((f == 1 || f == 2) && wt == 2) {
                    char* dst = f == 1 ? dev.name : dev.type;
                    size_t dcap = f == 1 ? sizeof dev.name : sizeof dev.type;
                    if (len >= dcap) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "DeviceAttributes: field %u of %llu bytes is too long", f, (unsigned long long)len);
                    tfrdv_grpc__rd_take(&d, dst, len);
                    dst[len] = 0;
                } else if (f == 4) {
                    if ((c = tfrdv_grpc__rd_uvarint(&d, "DeviceAttributes", f, wt, &v, st)) != TFRDV_OK) return c;
                    dev.memory_limit = (int64_t)v;
                } else if (f == 6 && wt == 1) {
                    if (!tfrdv_grpc__rd_fixed(&d, 8, &dev.incarnation)) return tfrdv_grpc__err(st, TFRDV_DATA_LOSS, "DeviceAttributes: truncated incarnation");
                } else if ((c = tfrdv_grpc__rd_skip(&d, "DeviceAttributes", f, wt, len, st)) != TFRDV_OK) {
                    return c;
                }
            }
            if (*n < cap) out[*n] = dev;
            (*n)++;
        } else if ((c = tfrdv_grpc__rd_skip(&r, what, f, wt, len, st)) != TFRDV_OK) {
            return c;
        }
    }
    tfrdv_grpc__ok(st);
    return TFRDV_OK;
}

/* >>status details ---------------------------------------------------------------------------- */
TFRDV_API int tfrdv_grpc_details_restarted(const void* payload, size_t len) {
    static const char url[] = "type.googleapis.com/tensorflow.distributed_runtime.WorkerPossiblyRestarted";
    tfrdv_grpc__rd r;
    tfrdv_str seg;
    uint32_t f;
    int wt, found = 0;
    uint64_t n;
    if (!payload) return 0;
    seg.ptr = (const char*)payload;
    seg.len = len;
    tfrdv_grpc__rd_init(&r, &seg, 1);
    while (r.pos < r.end) {
        if (tfrdv_grpc__rd_tag(&r, "", &f, &wt, &n, 0) != TFRDV_OK) return 0;
        if ((f == 1 || f == 3) && wt == 2) { /* a map entry (GrpcPayloadContainer) or an Any (Status) */
            tfrdv_grpc__rd e = tfrdv_grpc__rd_sub(&r, n);
            while (e.pos < e.end) {
                uint32_t ef;
                int ewt;
                uint64_t el;
                char name[sizeof url - 1];
                if (tfrdv_grpc__rd_tag(&e, "", &ef, &ewt, &el, 0) != TFRDV_OK) return 0;
                if (ef == 1 && ewt == 2 && el == sizeof name) {
                    tfrdv_grpc__rd_take(&e, name, el);
                    if (memcmp(name, url, sizeof name) == 0) found = 1;
                } else if (tfrdv_grpc__rd_skip(&e, "", ef, ewt, el, 0) != TFRDV_OK) {
                    return 0;
                }
            }
        } else if (tfrdv_grpc__rd_skip(&r, "", f, wt, n, 0) != TFRDV_OK) {
            return 0;
        }
    }
    return found;
}

#ifndef TFRDV_GRPC_NO_TRANSPORT
/* >>transport: objects ----------------------------------------------------------------------- */
struct tfrdv_grpc__tag;
typedef void (*tfrdv_grpc__tag_fn)(tfrdv_grpc* g, struct tfrdv_grpc__tag* tag, int ok);
typedef struct tfrdv_grpc__tag {
    tfrdv_grpc__tag_fn fn;
    int armed; /* release-stored before the tag goes to gRPC, acquire-loaded when it comes back:
                  the hand-off through gRPC's queue made visible to ThreadSanitizer */
} tfrdv_grpc__tag;
#define TFRDV_GRPC__ARM(t) __atomic_store_n(&(t)->armed, 1, __ATOMIC_RELEASE)
#define TFRDV_GRPC__OF(ptr, type, member) ((type*)(void*)((char*)(ptr) - offsetof(type, member)))
#define TFRDV_GRPC__ADD(g, field, n) ((void)__atomic_add_fetch(&(g)->stats.field, (uint64_t)(n), __ATOMIC_RELAXED))
#define TFRDV_GRPC__SUB(g, field, n) ((void)__atomic_sub_fetch(&(g)->stats.field, (uint64_t)(n), __ATOMIC_RELAXED))

enum { TFRDV_GRPC__M_RECV = 0, TFRDV_GRPC__M_STATUS, TFRDV_GRPC__M_CREATE, TFRDV_GRPC__M_DELETE, TFRDV_GRPC__M_MARK,
       TFRDV_GRPC__NMETHODS, TFRDV_GRPC__M_GENERIC = TFRDV_GRPC__NMETHODS };
static const char* const tfrdv_grpc__paths[TFRDV_GRPC__NMETHODS] = {
    "/tensorflow.WorkerService/RecvTensor", "/tensorflow.WorkerService/GetStatus",
    "/tensorflow.WorkerService/CreateWorkerSession", "/tensorflow.WorkerService/DeleteWorkerSession",
    "/tensorflow.WorkerService/MarkRecvFinished"};
/* TensorFlow's status-details payload for an incarnation mismatch: GrpcPayloadContainer{payloads:
   {"type.googleapis.com/tensorflow.distributed_runtime.WorkerPossiblyRestarted": ""}} */
static const char tfrdv_grpc__restarted_payload[] =
    "\x0a\x4e\x0a\x4atype.googleapis.com/tensorflow.distributed_runtime.WorkerPossiblyRestarted\x12\x00";
#define TFRDV_GRPC__RESTARTED_LEN 80
#define TFRDV_GRPC__PEER_DEVICES_MAX 4096 /* devices a GetStatus answer may list (PEER INCARNATION) */
#define TFRDV_GRPC__POLL_MAX 1024         /* completions one tfrdv_grpc_poll handles at most */

typedef struct tfrdv_grpc__chan {
    char* address;
    grpc_channel* ch;
    void* reg[3]; /* RecvTensor, GetStatus, MarkRecvFinished */
    int64_t inl[TFRDV_GRPC_INLINE_MAX]; /* taken receipts for the next request (under g->mu) */
    int ninl;
    int64_t inl_since; /* tfrdv_now_ns when the oldest of them was queued */
} tfrdv_grpc__chan;
typedef struct tfrdv_grpc__wk {
    char* name;
    char* address;
} tfrdv_grpc__wk;

typedef struct tfrdv_grpc__waiter { /* a blocking GetStatus */
    int done;
    int wait_ready; /* gRPC's wait-for-ready: the call waits for the channel to connect */
    tfrdv_status st;
    tfrdv_grpc_device* out;
    size_t cap, n;
} tfrdv_grpc__waiter;

enum { TFRDV_GRPC__C_RECV = 0, TFRDV_GRPC__C_STATUS, TFRDV_GRPC__C_MARK };
typedef struct tfrdv_grpc__ccall { /* one client call */
    tfrdv_grpc__tag tag;
    int kind;
    tfrdv_call* call;               /* RecvTensor: cleared (under mu) by whoever finishes */
    tfrdv_grpc__chan* chan;
    grpc_call* gc;
    grpc_byte_buffer *req, *resp;
    grpc_metadata_array imd, tmd;
    grpc_status_code status;
    grpc_slice details;
    int64_t request_id;
    int default_deadline; /* RecvTensor: the deadline is recv_timeout_ns, not the receive's */
    int marked;           /* RecvTensor: the request carried the receipts mark */
    int ninl;             /* RecvTensor: taken receipts the request carried (sent again as calls
                             when it fails: the server may never have read them) */
    int64_t inl[TFRDV_GRPC_INLINE_MAX];
    tfrdv_grpc__waiter* w;
    struct tfrdv_grpc__ccall *prev, *next;
} tfrdv_grpc__ccall;

#define TFRDV_GRPC__KEY_INLINE 256
typedef struct tfrdv_grpc__sctx { /* one server call (posted request, then the call) */
    tfrdv_grpc__tag accept, close, send;
    tfrdv_grpc* g;
    int method, cancelled;
    int phase; /* RecvTensor: 0 accepting, 1 answered inside tfrdv_mgr_serve (RECV_CLOSE joins the
                  reply batch), 2 RECV_CLOSE started on its own (the answer comes later) */
    long refs;
    grpc_call* gc;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *payload, *resp;
    grpc_call_details details;
    tfrdv_cancel_mgr* cm;
    uint64_t bytes;
    int64_t step_id, request_id;
    /* RecvTensor, under g->mu: the answer handed to the reply is kept (one value reference) until
       gRPC reports the call closed; a call that closed cancelled gives it back to the table */
    tfrdv_args send_args;
    tfrdv_value* held;
    int holding, held_dead;
    int closed; /* the close was handled: 1 delivered, 2 cancelled */
    int ack;    /* the answer is marked require_ack and held until its receipt (DELIVERY RECEIPTS) */
    int inline_ok; /* a tfrdv client's marked request: the answer says receipts_inline */
    int plinked, receipt; /* ack: in g->pend until the close is handled; a receipt that came
                             before it: 1 taken, 2 not taken */
    struct tfrdv_grpc__sctx* pnext;
    size_t key_len;
    char* key;   /* key_inline, or a heap block of key_cap bytes for a longer key */
    size_t key_cap;
    char key_inline[TFRDV_GRPC__KEY_INLINE];
} tfrdv_grpc__sctx;

/* DELIVERY RECEIPTS (server): an answer that reached its client's stream waits here for the
   MarkRecvFinished of its request id (held 1). By request id in rc_hash, by age in the
   rc_old..rc_new list (one ttl for all: the oldest expires first). A MarkRecvFinished that comes
   before gRPC reported the answer's call closed is kept by the call (g->pend, sctx.receipt); one
   for an id with neither is dropped (stats.receipts_unmatched): nothing waits for it. */
typedef struct tfrdv_grpc__rcpt {
    struct tfrdv_grpc__rcpt *hnext, *older, *newer;
    int64_t request_id, step_id, expires;
    int held, not_taken, dead;
    tfrdv_value* value;
    tfrdv_args send_args;
    size_t key_len, size;
    char key[1];
} tfrdv_grpc__rcpt;
#define TFRDV_GRPC__RC_BUCKETS 256
#define TFRDV_GRPC__NOT_TAKEN_FIELD TFRDV_GRPC_RECEIPTS_FIELD /* MarkRecvFinishedRequest: 1 = not taken */
#define TFRDV_GRPC__RC_MAX 65536 /* entries at most: beyond, the oldest goes as if it expired */

struct tfrdv_grpc {
    tfrdv_grpc_config cfg; /* strings and arrays point at owned copies */
    tfrdv_allocator a;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long refs;
    int shut, closed, srv_shutting, shutdown_done, expiring;
    int deferred;                 /* destroyed from a callback in host-driven mode: the
                                     tfrdv_grpc_poll that ran it finishes the shutdown */
    int64_t next_expire_ns;
    int64_t flush_at; /* receipts waiting inline (tfrdv_now_ns): sent as calls from then on; 0 none */
    grpc_completion_queue* cq;
    pthread_t* threads;
    int nthreads, cap_threads;
    tfrdv_grpc__wk* wk;
    size_t nwk, capwk;
    tfrdv_grpc__chan** ch;
    size_t nch, capch;
    tfrdv_grpc__ccall* live;
    long client_live, srv_live;
    long zc_live; /* zero-copy slices gRPC still holds (each holds a value reference) */
    grpc_server* server;
    void* rm[TFRDV_GRPC__NMETHODS];
    int port;
    tfrdv_grpc__tag shutdown_tag;
    tfrdv_mgr* mgr;
    tfrdv_grpc__rcpt* rc_hash[TFRDV_GRPC__RC_BUCKETS]; /* DELIVERY RECEIPTS, under mu */
    struct tfrdv_grpc__sctx* pend[TFRDV_GRPC__RC_BUCKETS]; /* ack calls not closed yet, by id */
    tfrdv_grpc__rcpt *rc_old, *rc_new;
    size_t rc_n;
    tfrdv_cancel_mgr** cm_free; /* reset cancellation managers kept for reuse */
    size_t ncm_free, cap_cm_free;
    tfrdv_grpc_stats stats;
};

/* >>transport: memory, logging, strings ------------------------------------------------------ */
TFRDV_GRPC__PRIVATE void* tfrdv_grpc__alloc(const tfrdv_allocator* a, size_t n) {
    return a->alloc_fn ? a->alloc_fn(a->user, n) : malloc(n);
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__free(const tfrdv_allocator* a, void* p, size_t n) {
    if (!p) return;
    if (a->free_fn) a->free_fn(a->user, p, n);
    else free(p);
}
TFRDV_GRPC__PRIVATE char* tfrdv_grpc__strdup(const tfrdv_allocator* a, const char* s) {
    size_t n;
    char* d;
    if (!s) return 0;
    n = strlen(s) + 1;
    d = (char*)tfrdv_grpc__alloc(a, n);
    if (d) memcpy(d, s, n);
    return d;
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__strfree(const tfrdv_allocator* a, const char* s) {
    if (s) tfrdv_grpc__free(a, (void*)(uintptr_t)s, strlen(s) + 1);
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__log(tfrdv_grpc* g, int level, const char* fmt, ...) {
    char buf[512];
    va_list ap;
    if (!g->cfg.hooks.logger.fn) return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g->cfg.hooks.logger.fn(g->cfg.hooks.logger.user, level, buf);
}
/* Bytes from the wire (status details, a method name the peer asked for) as printable ASCII
   (tfrdv_escape): they end up in statuses and log lines, where a line break would forge a line
   and an escape sequence would reach the operator's terminal. Cut short to fit out. */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__slice_msg(grpc_slice s, char* out, size_t cap) {
    tfrdv_escape(out, cap, (const char*)GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
}

/* The segments of a received message: its slices (no copy), or one flattened slice when it is
   compressed. *heap is set when the segment array was allocated. */
TFRDV_GRPC__PRIVATE tfrdv_str* tfrdv_grpc__segs(tfrdv_grpc* g, grpc_byte_buffer* bb, tfrdv_str* stack, size_t nstack,
                                               size_t* n, grpc_slice* flat, int* has_flat, size_t* heap) {
    size_t i, count;
    tfrdv_str* s = stack;
    *has_flat = 0;
    *heap = 0;
    *n = 0;
    if (!bb) return s;
    if (bb->type == GRPC_BB_RAW && bb->data.raw.compression == GRPC_COMPRESS_NONE) {
        count = bb->data.raw.slice_buffer.count;
        if (count > nstack) {
            s = (tfrdv_str*)tfrdv_grpc__alloc(&g->a, count * sizeof *s);
            if (!s) return 0;
            *heap = count;
        }
        for (i = 0; i < count; i++) {
            s[i].ptr = (const char*)GRPC_SLICE_START_PTR(bb->data.raw.slice_buffer.slices[i]);
            s[i].len = GRPC_SLICE_LENGTH(bb->data.raw.slice_buffer.slices[i]);
        }
        *n = count;
    } else {
        grpc_byte_buffer_reader rd;
        if (!grpc_byte_buffer_reader_init(&rd, bb)) return 0;
        *flat = grpc_byte_buffer_reader_readall(&rd);
        grpc_byte_buffer_reader_destroy(&rd);
        *has_flat = 1;
        s[0].ptr = (const char*)GRPC_SLICE_START_PTR(*flat);
        s[0].len = GRPC_SLICE_LENGTH(*flat);
        *n = 1;
    }
    return s;
}

/* >>transport: references -------------------------------------------------------------------- */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__unref(tfrdv_grpc* g) {
    size_t i;
    long left;
    pthread_mutex_lock(&g->mu);
    left = --g->refs;
    pthread_mutex_unlock(&g->mu);
    if (left) return;
    for (i = 0; i < g->nwk; i++) {
        tfrdv_grpc__strfree(&g->a, g->wk[i].name);
        tfrdv_grpc__strfree(&g->a, g->wk[i].address);
    }
    tfrdv_grpc__free(&g->a, g->wk, g->capwk * sizeof *g->wk);
    for (i = 0; i < g->nch; i++) {
        tfrdv_grpc__strfree(&g->a, g->ch[i]->address);
        tfrdv_grpc__free(&g->a, g->ch[i], sizeof *g->ch[i]);
    }
    tfrdv_grpc__free(&g->a, g->ch, g->capch * sizeof *g->ch);
    tfrdv_grpc__free(&g->a, (void*)(uintptr_t)g->cfg.devices, g->cfg.num_devices * sizeof *g->cfg.devices);
    tfrdv_grpc__strfree(&g->a, g->cfg.listen_address);
    tfrdv_grpc__strfree(&g->a, g->cfg.pem_root_certs);
    tfrdv_grpc__strfree(&g->a, g->cfg.pem_private_key);
    tfrdv_grpc__strfree(&g->a, g->cfg.pem_cert_chain);
    tfrdv_grpc__strfree(&g->a, g->cfg.ssl_target_name_override);
    tfrdv_grpc__free(&g->a, g->threads, (size_t)g->cap_threads * sizeof *g->threads);
    tfrdv_grpc__free(&g->a, g->cm_free, g->cap_cm_free * sizeof *g->cm_free);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    {
        tfrdv_allocator a = g->a;
        tfrdv_grpc__free(&a, g, sizeof *g);
    }
}

/* >>transport: polling ----------------------------------------------------------------------- */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__rc_due_locked(tfrdv_grpc* g, int64_t now, tfrdv_grpc__rcpt** out);
TFRDV_GRPC__PRIVATE void tfrdv_grpc__rc_run_due(tfrdv_grpc* g, tfrdv_grpc__rcpt* due);
TFRDV_GRPC__PRIVATE void tfrdv_grpc__maybe_expire(tfrdv_grpc* g) {
    tfrdv_mgr* mgr;
    int64_t now, next;
    pthread_mutex_lock(&g->mu);
    mgr = g->mgr;
    if (!mgr || g->expiring || g->closed) { pthread_mutex_unlock(&g->mu); return; }
    now = tfrdv_mgr_now(mgr);
    if (now < g->next_expire_ns) { pthread_mutex_unlock(&g->mu); return; }
    g->expiring = 1;
    pthread_mutex_unlock(&g->mu);
    next = tfrdv_mgr_expire(mgr, now);
    pthread_mutex_lock(&g->mu);
    {
        tfrdv_grpc__rcpt* due = 0;
        tfrdv_grpc__rc_due_locked(g, now, &due);
        if (due) {
            pthread_mutex_unlock(&g->mu);
            tfrdv_grpc__rc_run_due(g, due);
            pthread_mutex_lock(&g->mu);
        }
    }
    g->expiring = 0;
    g->next_expire_ns = now + g->cfg.expire_interval_ns;
    if (next < g->next_expire_ns && next > now) g->next_expire_ns = next;
    pthread_mutex_unlock(&g->mu);
}
TFRDV_GRPC__PRIVATE gpr_timespec tfrdv_grpc__in(int64_t ns) {
    if (ns < 0) return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos(ns, GPR_TIMESPAN));
}
/* The transport whose completion this thread is handling (its callbacks run inside): the one
   piece of global state of this companion, a thread-local pointer. */
static __thread tfrdv_grpc* tfrdv_grpc__handling;
/* 1 handled an event, 0 timeout, -1 queue shut down */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__next(tfrdv_grpc* g, gpr_timespec deadline) {
    grpc_event ev = grpc_completion_queue_next(g->cq, deadline, NULL);
    tfrdv_grpc* outer;
    if (ev.type == GRPC_QUEUE_SHUTDOWN) return -1;
    if (ev.type != GRPC_OP_COMPLETE) return 0;
    (void)__atomic_load_n(&((tfrdv_grpc__tag*)ev.tag)->armed, __ATOMIC_ACQUIRE);
    outer = tfrdv_grpc__handling;
    tfrdv_grpc__handling = g;
    ((tfrdv_grpc__tag*)ev.tag)->fn(g, (tfrdv_grpc__tag*)ev.tag, ev.success);
    tfrdv_grpc__handling = outer;
    return 1;
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__flush(tfrdv_grpc* g, int force);
TFRDV_GRPC__PRIVATE void* tfrdv_grpc__thread(void* arg) {
    tfrdv_grpc* g = (tfrdv_grpc*)arg;
    for (;;) {
        int64_t wait = g->cfg.expire_interval_ns;
        if (__atomic_load_n(&g->flush_at, __ATOMIC_RELAXED) && wait > TFRDV_GRPC_INLINE_DELAY_NS) wait = TFRDV_GRPC_INLINE_DELAY_NS;
        if (tfrdv_grpc__next(g, tfrdv_grpc__in(wait)) < 0) break;
        tfrdv_grpc__maybe_expire(g);
        tfrdv_grpc__flush(g, 0);
    }
    return 0;
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__shutdown(tfrdv_grpc* g);
TFRDV_API int tfrdv_grpc_poll(tfrdv_grpc* g, int64_t timeout_ns) {
    int n = 0, rc, deferred;
    if (!g || !g->cq || g->closed) return 0;
    rc = tfrdv_grpc__next(g, timeout_ns < 0 ? gpr_inf_future(GPR_CLOCK_MONOTONIC) : tfrdv_grpc__in(timeout_ns));
    while (rc > 0) { /* at most TFRDV_GRPC__POLL_MAX: a flood cannot keep the host's thread */
        n++;
        if (n >= TFRDV_GRPC__POLL_MAX) break;
        if (n % 64 == 0) { /* timers keep their period under a flood */
            tfrdv_grpc__maybe_expire(g);
            tfrdv_grpc__flush(g, 0);
        }
        rc = tfrdv_grpc__next(g, gpr_inf_past(GPR_CLOCK_MONOTONIC));
    }
    tfrdv_grpc__maybe_expire(g);
    tfrdv_grpc__flush(g, 0);
    pthread_mutex_lock(&g->mu);
    deferred = g->deferred && !tfrdv_grpc__handling; /* not from a callback's own poll */
    if (deferred) g->deferred = 0;
    pthread_mutex_unlock(&g->mu);
    if (deferred) tfrdv_grpc__shutdown(g); /* a callback of this poll called tfrdv_grpc_destroy */
    return n;
}
/* Waits (g->mu held) until *cond is true: on the condition variable when threads poll, else by
   polling here. */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__wait_locked(tfrdv_grpc* g, int (*cond)(tfrdv_grpc*, void*), void* arg) {
    while (!cond(g, arg)) {
        if (g->nthreads > 0) {
            pthread_cond_wait(&g->cv, &g->mu);
        } else {
            pthread_mutex_unlock(&g->mu);
            tfrdv_grpc__next(g, tfrdv_grpc__in(10000000));
            tfrdv_grpc__maybe_expire(g);
            tfrdv_grpc__flush(g, 0);
            pthread_mutex_lock(&g->mu);
        }
    }
}

/* >>transport: channels ---------------------------------------------------------------------- */
/* g->mu held. */
TFRDV_GRPC__PRIVATE tfrdv_grpc__chan* tfrdv_grpc__chan_locked(tfrdv_grpc* g, const char* address, tfrdv_status* st) {
    size_t i;
    tfrdv_grpc__chan* c;
    grpc_arg args[6];
    grpc_channel_args ca;
    grpc_channel_credentials* creds;
    int na = 0;
    for (i = 0; i < g->nch; i++)
        if (strcmp(g->ch[i]->address, address) == 0) return g->ch[i];
    if (g->nch == g->capch) {
        size_t nc = g->capch ? g->capch * 2 : 8;
        tfrdv_grpc__chan** n = (tfrdv_grpc__chan**)tfrdv_grpc__alloc(&g->a, nc * sizeof *n);
        if (!n) { tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_grpc: out of memory"); return 0; }
        if (g->nch) memcpy(n, g->ch, g->nch * sizeof *n);
        tfrdv_grpc__free(&g->a, g->ch, g->capch * sizeof *n);
        g->ch = n;
        g->capch = nc;
    }
    c = (tfrdv_grpc__chan*)tfrdv_grpc__alloc(&g->a, sizeof *c);
    if (c) c->ninl = 0;
    if (c) c->address = tfrdv_grpc__strdup(&g->a, address);
    if (!c || !c->address) {
        tfrdv_grpc__free(&g->a, c, sizeof *c);
        tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_grpc: out of memory");
        return 0;
    }
    memset(args, 0, sizeof args);
    /* responses up to max_message_bytes (+ room for the head): gRPC's limit is INT_MAX, as TensorFlow
       sets it; a larger response never gets buffered */
    args[na].type = GRPC_ARG_INTEGER;
    args[na].key = (char*)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[na++].value.integer = g->cfg.max_message_bytes >= 0x7fffffffu - 65536u ? 0x7fffffff : (int)(g->cfg.max_message_bytes + 65536u);
    args[na].type = GRPC_ARG_INTEGER; args[na].key = (char*)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH; args[na++].value.integer = -1;
    args[na].type = GRPC_ARG_INTEGER; args[na].key = (char*)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS; args[na++].value.integer = 1000;
    args[na].type = GRPC_ARG_INTEGER; args[na].key = (char*)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS; args[na++].value.integer = 100;
    args[na].type = GRPC_ARG_INTEGER; args[na].key = (char*)GRPC_ARG_ENABLE_HTTP_PROXY; args[na++].value.integer = 0;
    if (g->cfg.ssl_target_name_override) {
        args[na].type = GRPC_ARG_STRING;
        args[na].key = (char*)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
        args[na++].value.string = (char*)(uintptr_t)g->cfg.ssl_target_name_override;
    }
    ca.num_args = (size_t)na;
    ca.args = args;
    if (g->cfg.pem_root_certs) {
        grpc_ssl_pem_key_cert_pair pair;
        pair.private_key = g->cfg.pem_private_key;
        pair.cert_chain = g->cfg.pem_cert_chain;
        creds = grpc_ssl_credentials_create(g->cfg.pem_root_certs, (pair.private_key && pair.cert_chain) ? &pair : NULL, NULL, NULL);
    } else {
        creds = grpc_insecure_credentials_create();
    }
    c->ch = grpc_channel_create(address, creds, &ca);
    grpc_channel_credentials_release(creds);
    c->reg[0] = grpc_channel_register_call(c->ch, tfrdv_grpc__paths[TFRDV_GRPC__M_RECV], NULL, NULL);
    c->reg[1] = grpc_channel_register_call(c->ch, tfrdv_grpc__paths[TFRDV_GRPC__M_STATUS], NULL, NULL);
    c->reg[2] = grpc_channel_register_call(c->ch, tfrdv_grpc__paths[TFRDV_GRPC__M_MARK], NULL, NULL);
    g->ch[g->nch++] = c;
    return c;
}
/* worker name -> address (copied into buf); 1 if known */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__resolve(tfrdv_grpc* g, const char* name, size_t len, char* buf, size_t cap) {
    size_t i;
    int found = 0;
    pthread_mutex_lock(&g->mu);
    for (i = 0; i < g->nwk; i++) {
        if (strlen(g->wk[i].name) == len && memcmp(g->wk[i].name, name, len) == 0) {
            size_t n = strlen(g->wk[i].address);
            if (n < cap) { memcpy(buf, g->wk[i].address, n + 1); found = 1; }
            break;
        }
    }
    pthread_mutex_unlock(&g->mu);
    if (!found && g->cfg.resolve) {
        char nm[512];
        if (len < sizeof nm) {
            memcpy(nm, name, len);
            nm[len] = 0;
            found = g->cfg.resolve(g->cfg.resolve_user, nm, len, buf, cap) == 1;
            if (found) buf[cap - 1] = 0;
        }
    }
    return found;
}
/* >>transport: config checks (CONFIG CHECKS) -------------------------------------------------- */
/* a worker name as calls carry it: /job:J/replica:R/task:T, canonical (anything else never matches) */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__worker_name_ok(const char* name) {
    tfrdv_device_name dn;
    char canon[512];
    size_t n = strlen(name);
    if (n >= sizeof canon || tfrdv_device_parse(name, n, &dn, 0) != TFRDV_OK || !dn.has_job || !dn.has_replica ||
        !dn.has_task || dn.has_type || dn.has_id)
        return 0;
    return tfrdv_device_format(&dn, canon, sizeof canon) == n && memcmp(canon, name, n) == 0;
}
/* host:port in p[0..n): NULL when well formed, else what is wrong (port 0 allowed when listen) */
TFRDV_GRPC__PRIVATE const char* tfrdv_grpc__hostport(const char* p, size_t n, int listen) {
    size_t h, i;
    unsigned long port = 0;
    int zone = 0; /* after the '%' of a scope id: [fe80::1%eth0] */
    if (n == 0) return "empty host:port";
    if (p[0] == '[') {
        for (h = 1; h < n && p[h] != ']'; h++) {
            if (p[h] == '%' && !zone) { zone = 1; continue; }
            if (!((p[h] >= '0' && p[h] <= '9') || (p[h] >= 'a' && p[h] <= 'f') || (p[h] >= 'A' && p[h] <= 'F') ||
                  (!zone && (p[h] == ':' || p[h] == '.')) ||
                  (zone && ((p[h] >= 'a' && p[h] <= 'z') || (p[h] >= 'A' && p[h] <= 'Z') || p[h] == '-' || p[h] == '_' || p[h] == '.'))))
                return "bad IPv6 address in [...]";
        }
        if (h == n) return "'[' without ']'";
        if (h == 1) return "empty IPv6 address in []";
        h++;
        if (h == n || p[h] != ':') return "no :port after the IPv6 address";
    } else {
        for (h = n; h > 0 && p[h - 1] != ':'; h--) {}
        if (h == 0) return "no :port";
        h--;
        if (h == 0) return "no host before :port";
        for (i = 0; i < h; i++) {
            if (p[i] == ':') return "more than one ':' (an IPv6 address needs [brackets])";
            if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
                  p[i] == '-' || p[i] == '.' || p[i] == '_'))
                return "bad byte in the host name";
        }
    }
    if (h + 1 == n || n - h - 1 > 5) return listen ? "bad port (0..65535)" : "bad port (1..65535)";
    for (i = h + 1; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return listen ? "bad port (0..65535)" : "bad port (1..65535)";
        port = port * 10 + (unsigned long)(p[i] - '0');
    }
    if (port > 65535 || (port == 0 && !listen)) return listen ? "bad port (0..65535)" : "bad port (1..65535)";
    return 0;
}
/* a gRPC target as CONFIG CHECKS describes it: NULL when well formed, else what is wrong */
TFRDV_GRPC__PRIVATE const char* tfrdv_grpc__addr_why(const char* a, int listen) {
    size_t n = strlen(a), i, b;
    const char* why;
    if (n == 0) return "empty";
    if (n > 500) return "longer than 500 bytes";
    for (i = 0; i < n; i++)
        if ((unsigned char)a[i] <= 0x20 || (unsigned char)a[i] >= 0x7f) return "a space or control byte";
    if (strncmp(a, "unix:", 5) == 0) return n > 5 ? 0 : "no path after unix:";
    if (strncmp(a, "unix-abstract:", 14) == 0) return n > 14 ? 0 : "no name after unix-abstract:";
    if (strncmp(a, "dns:", 4) == 0) {
        i = 4;
        if (n > 6 && a[4] == '/' && a[5] == '/') { /* dns://authority/host:port */
            for (i = 6; i < n && a[i] != '/'; i++) {}
            if (i == n) return "dns://authority without /host:port";
            i++;
        }
        return tfrdv_grpc__hostport(a + i, n - i, listen);
    }
    if (strncmp(a, "ipv4:", 5) == 0 || strncmp(a, "ipv6:", 5) == 0) {
        for (b = i = 5; i <= n; i++) {
            if (i < n && a[i] != ',') continue;
            if ((why = tfrdv_grpc__hostport(a + b, i - b, listen)) != 0) return why;
            b = i + 1;
        }
        return 0;
    }
    return tfrdv_grpc__hostport(a, n, listen);
}
/* name and address of one worker entry; `where` says which ("tfrdv_grpc_create: workers[3]") */
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__check_worker(const char* name, const char* address, const char* where,
                                                        tfrdv_status* st) {
    char wn[300];
    const char* why;
    if (!name || !address) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s has no %s", where, name ? "address" : "name");
    (void)tfrdv_escape(wn, sizeof wn, name, strlen(name));
    if (!tfrdv_grpc__worker_name_ok(name))
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s.name \"%.200s\" is not a worker name (/job:J/replica:R/task:T)", where, wn);
    if ((why = tfrdv_grpc__addr_why(address, 0)) != 0) {
        char an[300];
        (void)tfrdv_escape(an, sizeof an, address, strlen(address));
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "%s.address \"%.200s\" of %.200s: %s", where, an, wn, why);
    }
    return TFRDV_OK;
}

TFRDV_API tfrdv_code tfrdv_grpc_set_worker(tfrdv_grpc* g, const char* worker, const char* address,
                                           tfrdv_status* st) {
    size_t i;
    char *n = 0, *a = 0;
    if (!g || !worker) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_grpc_set_worker: NULL argument");
    if (tfrdv_grpc__check_worker(worker, address ? address : "x:1", "tfrdv_grpc_set_worker: worker", st) != TFRDV_OK)
        return TFRDV_INVALID_ARGUMENT;
    if (address && (!(n = tfrdv_grpc__strdup(&g->a, worker)) || !(a = tfrdv_grpc__strdup(&g->a, address)))) {
        tfrdv_grpc__strfree(&g->a, n);
        return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_grpc_set_worker: out of memory");
    }
    pthread_mutex_lock(&g->mu);
    for (i = 0; i < g->nwk && strcmp(g->wk[i].name, worker) != 0; i++) {}
    if (i < g->nwk) {
        tfrdv_grpc__strfree(&g->a, g->wk[i].name);
        tfrdv_grpc__strfree(&g->a, g->wk[i].address);
        g->wk[i] = g->wk[--g->nwk];
    }
    if (address) {
        if (g->nwk == g->capwk) {
            size_t nc = g->capwk ? g->capwk * 2 : 8;
            tfrdv_grpc__wk* w = (tfrdv_grpc__wk*)tfrdv_grpc__alloc(&g->a, nc * sizeof *w);
            if (!w) {
                pthread_mutex_unlock(&g->mu);
                tfrdv_grpc__strfree(&g->a, n);
                tfrdv_grpc__strfree(&g->a, a);
                return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_grpc_set_worker: out of memory");
            }
            if (g->nwk) memcpy(w, g->wk, g->nwk * sizeof *w);
            tfrdv_grpc__free(&g->a, g->wk, g->capwk * sizeof *w);
            g->wk = w;
            g->capwk = nc;
        }
        g->wk[g->nwk].name = n;
        g->wk[g->nwk].address = a;
        g->nwk++;
    }
    pthread_mutex_unlock(&g->mu);
    tfrdv_grpc__ok(st);
    return TFRDV_OK;
}

/* >>transport: client calls ------------------------------------------------------------------ */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__ccall_free(tfrdv_grpc* g, tfrdv_grpc__ccall* c) {
    if (c->gc) grpc_call_unref(c->gc);
    if (c->req) grpc_byte_buffer_destroy(c->req);
    if (c->resp) grpc_byte_buffer_destroy(c->resp);
    grpc_metadata_array_destroy(&c->imd);
    grpc_metadata_array_destroy(&c->tmd);
    grpc_slice_unref(c->details);
    tfrdv_grpc__free(&g->a, c, sizeof *c);
    pthread_mutex_lock(&g->mu);
    g->client_live--;
    TFRDV_GRPC__SUB(g, client_calls_live, 1);
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__unlink_locked(tfrdv_grpc* g, tfrdv_grpc__ccall* c) {
    if (c->prev) c->prev->next = c->next;
    else if (g->live == c) g->live = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = 0;
}

/* Starts a unary call on chan: kind, request bytes (copied), deadline; the completion runs fn.
   On OK the call is linked and *out set (unless out is NULL); call (RecvTensor) goes into the
   context before the batch starts. */
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__ccall_start(tfrdv_grpc* g, int kind, tfrdv_grpc__chan* chan, const uint8_t* req,
                                                       size_t req_len, gpr_timespec deadline, tfrdv_call* call,
                                                       int64_t request_id, const int64_t* inl, int ninl,
                                                       tfrdv_grpc__waiter* w, tfrdv_grpc__tag_fn fn, tfrdv_status* st) {
    tfrdv_grpc__ccall* c = (tfrdv_grpc__ccall*)tfrdv_grpc__alloc(&g->a, sizeof *c);
    grpc_slice s;
    grpc_op ops[6];
    grpc_call_error err;
    if (!c) return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_grpc: out of memory");
    memset(c, 0, sizeof *c);
    c->tag.fn = fn;
    c->kind = kind;
    c->chan = chan;
    c->w = w;
    c->request_id = request_id;
    c->ninl = ninl;
    if (ninl) memcpy(c->inl, inl, (size_t)ninl * sizeof inl[0]);
    c->default_deadline = call && tfrdv_call_deadline(call) == INT64_MAX && g->cfg.recv_timeout_ns > 0;
    c->marked = kind == TFRDV_GRPC__C_RECV && request_id != 0 && g->cfg.receipts != TFRDV_OFF; /* as tfrdv_grpc__t_start */
    c->details = grpc_empty_slice();
    grpc_metadata_array_init(&c->imd);
    grpc_metadata_array_init(&c->tmd);
    s = grpc_slice_from_copied_buffer((const char*)req, req_len);
    c->req = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    pthread_mutex_lock(&g->mu);
    /* a receipt still goes out during the shutdown: only a live RecvTensor call (whose completion
       the shutdown waits for) starts one, before the channels go */
    if (g->shut && !(kind == TFRDV_GRPC__C_MARK && !g->closed)) {
        pthread_mutex_unlock(&g->mu);
        grpc_byte_buffer_destroy(c->req);
        grpc_metadata_array_destroy(&c->imd);
        grpc_metadata_array_destroy(&c->tmd);
        tfrdv_grpc__free(&g->a, c, sizeof *c);
        return tfrdv_grpc__err(st, TFRDV_UNAVAILABLE, "tfrdv_grpc: transport shut down");
    }
    c->gc = grpc_channel_create_registered_call(chan->ch, NULL, GRPC_PROPAGATE_DEFAULTS, g->cq,
                                                chan->reg[kind == TFRDV_GRPC__C_RECV ? 0 : kind == TFRDV_GRPC__C_STATUS ? 1 : 2],
                                                deadline, NULL);
    c->call = call;
    if (call) *(tfrdv_grpc__ccall**)tfrdv_call_scratch(call) = c;
    c->next = g->live;
    if (g->live) g->live->prev = c;
    g->live = c;
    g->client_live++;
    TFRDV_GRPC__ADD(g, client_calls_live, 1);
    pthread_mutex_unlock(&g->mu);
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (w && w->wait_ready) ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = c->req;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->imd;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &c->resp;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &c->tmd;
    ops[5].data.recv_status_on_client.status = &c->status;
    ops[5].data.recv_status_on_client.status_details = &c->details;
    {
        grpc_call* gc = c->gc; /* nothing of c is read once the tag is armed */
        TFRDV_GRPC__ARM(&c->tag);
        err = grpc_call_start_batch(gc, ops, 6, &c->tag, NULL);
    }
    if (err != GRPC_CALL_OK) {
        pthread_mutex_lock(&g->mu);
        tfrdv_grpc__unlink_locked(g, c);
        if (c->call) *(tfrdv_grpc__ccall**)tfrdv_call_scratch(c->call) = 0;
        pthread_mutex_unlock(&g->mu);
        tfrdv_grpc__ccall_free(g, c);
        return tfrdv_grpc__err(st, TFRDV_INTERNAL, "tfrdv_grpc: grpc_call_start_batch: %s", grpc_call_error_to_string(err));
    }
    if (kind != TFRDV_GRPC__C_MARK) TFRDV_GRPC__ADD(g, calls_started, 1); /* receipts: acks_sent, nacks_sent */
    return TFRDV_OK;
}

TFRDV_GRPC__PRIVATE void tfrdv_grpc__mark_done(tfrdv_grpc* g, tfrdv_grpc__tag* tag, int ok) {
    tfrdv_grpc__ccall* c = TFRDV_GRPC__OF(tag, tfrdv_grpc__ccall, tag);
    (void)ok;
    pthread_mutex_lock(&g->mu);
    tfrdv_grpc__unlink_locked(g, c);
    pthread_mutex_unlock(&g->mu);
    if (c->status != GRPC_STATUS_OK) tfrdv_grpc__log(g, 2, "tfrdv_grpc: MarkRecvFinished failed with status %d", (int)c->status);
    tfrdv_grpc__ccall_free(g, c);
}

TFRDV_GRPC__PRIVATE tfrdv_value* tfrdv_grpc__call_alloc(void* user, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    return tfrdv_call_alloc_value((tfrdv_call*)user, dtype, rank, dims, size);
}

/* A failed RecvTensor whose trailing grpc-status-details-bin carries TensorFlow's
   WorkerPossiblyRestarted payload (an incarnation mismatch: the serving worker restarted). */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__restarted(const grpc_metadata_array* md) {
    size_t i;
    for (i = 0; i < md->count; i++) {
        const grpc_metadata* m = &md->metadata[i];
        if (grpc_slice_str_cmp(m->key, "grpc-status-details-bin") == 0 &&
            tfrdv_grpc_details_restarted(GRPC_SLICE_START_PTR(m->value), GRPC_SLICE_LENGTH(m->value)))
            return 1;
    }
    return 0;
}
/* MarkRecvFinishedRequest {1: request_id[, 15: 1 when the answer was not taken]}, fire and forget */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__mark(tfrdv_grpc* g, tfrdv_grpc__chan* chan, int64_t request_id, int not_taken) {
    uint8_t buf[16];
    tfrdv_grpc__wr w;
    int shut;
    w.buf = buf;
    w.cap = sizeof buf;
    w.len = 0;
    tfrdv_grpc__put(&w, 0x08);
    tfrdv_grpc__putv(&w, (uint64_t)request_id);
    if (not_taken) {
        tfrdv_grpc__put(&w, (uint8_t)(TFRDV_GRPC__NOT_TAKEN_FIELD << 3));
        tfrdv_grpc__put(&w, 1);
    }
    pthread_mutex_lock(&g->mu);
    shut = g->shut;
    pthread_mutex_unlock(&g->mu);
    /* 10 s; 1 s during the shutdown, which waits for it */
    return tfrdv_grpc__ccall_start(g, TFRDV_GRPC__C_MARK, chan, buf, w.len, tfrdv_grpc__in(shut ? 1000000000LL : 10000000000LL), 0, 0, 0, 0,
                                   0, tfrdv_grpc__mark_done, 0) == TFRDV_OK;
}
/* A taken receipt for a server that takes them inline: waits for the next request to it, at most
   TFRDV_GRPC_INLINE_DELAY_NS (then tfrdv_grpc__flush sends it as a call). 0: send it now. */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__inline(tfrdv_grpc* g, tfrdv_grpc__chan* chan, int64_t id) {
    int ok = 0;
    int64_t now = tfrdv_now_ns();
    pthread_mutex_lock(&g->mu);
    if (!g->shut && chan->ninl < TFRDV_GRPC_INLINE_MAX) {
        if (!chan->ninl) chan->inl_since = now;
        chan->inl[chan->ninl++] = id;
        if (!g->flush_at) __atomic_store_n(&g->flush_at, chan->inl_since + TFRDV_GRPC_INLINE_DELAY_NS, __ATOMIC_RELAXED);
        ok = 1;
    }
    pthread_mutex_unlock(&g->mu);
    return ok;
}
/* Receipts no request carried within the delay (force: all, at the shutdown) go as
   MarkRecvFinished calls; g->flush_at becomes the time the oldest of the others is due (it may
   come early: a request that carried some does not move it). */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__flush(tfrdv_grpc* g, int force) {
    int64_t ids[TFRDV_GRPC_INLINE_MAX], at = __atomic_load_n(&g->flush_at, __ATOMIC_RELAXED), now, next = 0;
    size_t i;
    int n, k;
    if (!at) return;
    now = tfrdv_now_ns();
    if (!force && now < at) return;
    pthread_mutex_lock(&g->mu);
    __atomic_store_n(&g->flush_at, 0, __ATOMIC_RELAXED); /* one queued meanwhile sets it again */
    for (i = 0; i < g->nch; i++) {
        tfrdv_grpc__chan* ch = g->ch[i];
        if (!ch->ninl) continue;
        if (!force && now < ch->inl_since + TFRDV_GRPC_INLINE_DELAY_NS) { /* not due yet */
            if (!next || ch->inl_since + TFRDV_GRPC_INLINE_DELAY_NS < next) next = ch->inl_since + TFRDV_GRPC_INLINE_DELAY_NS;
            continue;
        }
        n = ch->ninl;
        memcpy(ids, ch->inl, (size_t)n * sizeof ids[0]);
        ch->ninl = 0;
        pthread_mutex_unlock(&g->mu); /* the channel stays: channels go only at the shutdown's end */
        for (k = 0; k < n; k++) tfrdv_grpc__mark(g, ch, ids[k], 0);
        pthread_mutex_lock(&g->mu);
    }
    at = __atomic_load_n(&g->flush_at, __ATOMIC_RELAXED); /* the ones not due yet: when they are */
    if (next && (!at || next < at)) __atomic_store_n(&g->flush_at, next, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g->mu);
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__recv_done(tfrdv_grpc* g, tfrdv_grpc__tag* tag, int ok) {
    tfrdv_grpc__ccall* c = TFRDV_GRPC__OF(tag, tfrdv_grpc__ccall, tag);
    tfrdv_call* call;
    tfrdv_status st;
    int taken, refused;
    tfrdv_value* value = 0;
    tfrdv_grpc_response_info info;
    (void)ok;
    memset(&info, 0, sizeof info);
    memset(&st, 0, sizeof st);
    pthread_mutex_lock(&g->mu);
    tfrdv_grpc__unlink_locked(g, c);
    call = c->call;
    c->call = 0;
    if (call) *(tfrdv_grpc__ccall**)tfrdv_call_scratch(call) = 0;
    pthread_mutex_unlock(&g->mu);
    if (c->status != GRPC_STATUS_OK) {
        st.code = (tfrdv_code)c->status;
        if (st.code > TFRDV_UNAUTHENTICATED) st.code = TFRDV_UNKNOWN;
        tfrdv_grpc__slice_msg(c->details, st.msg, sizeof st.msg);
        if (!st.msg[0]) snprintf(st.msg, sizeof st.msg, "RecvTensor failed with gRPC status %d", (int)c->status);
        if (tfrdv_grpc__restarted(&c->tmd)) st.detail = TFRDV_DETAIL_WORKER_RESTARTED;
        if (st.code == TFRDV_DEADLINE_EXCEEDED && c->default_deadline) {
            size_t len = strlen(st.msg);
            snprintf(st.msg + len, sizeof st.msg - len, " (the receive had no deadline: tfrdv_grpc_config.recv_timeout_ns %lld ns applied)",
                     (long long)g->cfg.recv_timeout_ns);
        }
    } else if (!c->resp) {
        tfrdv_grpc__err(&st, TFRDV_INTERNAL, "RecvTensor: OK status without a response message");
    } else {
        tfrdv_str stack[64];
        size_t n, heap;
        grpc_slice flat;
        int has_flat;
        tfrdv_str* segs = tfrdv_grpc__segs(g, c->resp, stack, 64, &n, &flat, &has_flat, &heap);
        if (!segs) tfrdv_grpc__err(&st, TFRDV_RESOURCE_EXHAUSTED, "RecvTensor: out of memory");
        else if (call) tfrdv_grpc_decode_response(segs, n, g->cfg.max_message_bytes, tfrdv_grpc__call_alloc, call, &value, &info, &st);
        else tfrdv_grpc__err(&st, TFRDV_CANCELLED, "RecvTensor: no call");
        if (heap) tfrdv_grpc__free(&g->a, segs, heap * sizeof *segs);
        if (has_flat) grpc_slice_unref(flat);
    }
    if (st.code == TFRDV_OK) {
        TFRDV_GRPC__ADD(g, calls_ok, 1);
        if (value) TFRDV_GRPC__ADD(g, bytes_received, value->size);
    } else {
        TFRDV_GRPC__ADD(g, calls_failed, 1);
    }
    /* an OK answer the core refuses (the receive was cancelled, timed out or aborted meanwhile)
       is not taken: the MarkRecvFinished below says so */
    taken = refused = 0;
    if (!call) {
        tfrdv_value_release(value);
        refused = c->status == GRPC_STATUS_OK; /* an answer whose receive was withdrawn here */
    } else if (tfrdv_call_finish_status(call, &st, value, info.is_dead, st.code == TFRDV_OK)) {
        tfrdv_value_release(value); /* refused: still ours */
        refused = 1;
    } else {
        taken = st.code == TFRDV_OK;
    }
    /* DELIVERY RECEIPTS: a server keeps a require_ack answer (to our marked request, or to any
       with its require_ack) until MarkRecvFinished; ours also says when the answer was not taken
       (field 15), so the server gives it back. Taken: the receiver got it. Not taken: an answer
       that arrived after its receive had ended, or with require_ack that failed to decode here
       (a tensor above max_message_bytes, no memory: the value goes back), and a call that
       ended CANCELLED or DEADLINE_EXCEEDED (any request: the server may have sent its answer
       before it learnt of the end) or, for a marked request, UNAVAILABLE, UNKNOWN, INTERNAL or
       RESOURCE_EXHAUSTED (the connection broke or gRPC refused the reply after the server sent
       it). A server that holds nothing for the id keeps the receipt until receipt_ttl_ns. */
    if (c->request_id) {
        int nack = 0;
        if (c->status == GRPC_STATUS_OK) nack = !taken && (refused || info.require_ack);
        else if (c->status == GRPC_STATUS_CANCELLED || c->status == GRPC_STATUS_DEADLINE_EXCEEDED) nack = 1;
        else if (c->marked)
            nack = c->status == GRPC_STATUS_UNAVAILABLE || c->status == GRPC_STATUS_UNKNOWN || c->status == GRPC_STATUS_INTERNAL ||
                   c->status == GRPC_STATUS_RESOURCE_EXHAUSTED;
        if (taken && info.require_ack && c->marked && info.receipts_inline && tfrdv_grpc__inline(g, c->chan, c->request_id)) {
            TFRDV_GRPC__ADD(g, acks_sent, 1); /* carried by the next request to the server, or a call */
        } else if (taken && info.require_ack) {
            if (tfrdv_grpc__mark(g, c->chan, c->request_id, 0)) TFRDV_GRPC__ADD(g, acks_sent, 1);
        } else if (nack) {
            if (tfrdv_grpc__mark(g, c->chan, c->request_id, 1)) TFRDV_GRPC__ADD(g, nacks_sent, 1);
        }
    }
    if (c->status != GRPC_STATUS_OK) { /* receipts it carried may never have arrived: again, as
                                          calls (a server that had them counts them unmatched) */
        int k;
        for (k = 0; k < c->ninl; k++) (void)tfrdv_grpc__mark(g, c->chan, c->inl[k], 0);
    }
    tfrdv_grpc__ccall_free(g, c);
}

TFRDV_GRPC__PRIVATE void tfrdv_grpc__t_start(void* user, tfrdv_call* call) {
    tfrdv_grpc* g = (tfrdv_grpc*)user;
    tfrdv_str w = tfrdv_call_src_worker(call);
    tfrdv_str key = tfrdv_call_key(call);
    char addr[512];
    uint8_t stackbuf[512];
    uint8_t* req = stackbuf;
    size_t n;
    tfrdv_status st;
    tfrdv_grpc__chan* chan = 0;
    int marked, ninl = 0, k;
    int64_t inl[TFRDV_GRPC_INLINE_MAX];
    size_t extra = 0;
    int64_t dl = tfrdv_call_deadline(call), request_id = tfrdv_call_request_id(call);
    gpr_timespec deadline = gpr_inf_future(GPR_CLOCK_MONOTONIC);
    *(tfrdv_grpc__ccall**)tfrdv_call_scratch(call) = 0;
    if (!tfrdv_grpc__resolve(g, w.ptr, w.len, addr, sizeof addr)) {
        char ew[4 * 256 + 1];
        tfrdv_escape(ew, sizeof ew, w.ptr, w.len > 256 ? 256 : w.len);
        tfrdv_grpc__err(&st, TFRDV_INTERNAL, "No worker known as %s (tfrdv_grpc has no address for it)", ew);
        tfrdv_call_finish(call, st.code, st.msg, 0, 0);
        return;
    }
    pthread_mutex_lock(&g->mu);
    if (!g->shut) chan = tfrdv_grpc__chan_locked(g, addr, &st);
    else tfrdv_grpc__err(&st, TFRDV_UNAVAILABLE, "tfrdv_grpc: transport shut down");
    marked = request_id != 0 && g->cfg.receipts != TFRDV_OFF;
    if (chan && marked && chan->ninl) { /* taken receipts waiting for this server ride along */
        ninl = chan->ninl;
        memcpy(inl, chan->inl, (size_t)ninl * sizeof inl[0]);
        chan->ninl = 0;
    }
    if (dl != INT64_MAX) {
        int64_t rem = dl - tfrdv_mgr_now(tfrdv_call_mgr(call)); /* on the call's own manager's clock */
        deadline = tfrdv_grpc__in(rem > 0 ? rem : 0);
    } else if (g->cfg.recv_timeout_ns > 0) {
        deadline = tfrdv_grpc__in(g->cfg.recv_timeout_ns);
    }
    pthread_mutex_unlock(&g->mu);
    if (!chan) {
        tfrdv_call_finish(call, st.code, st.msg, 0, 0);
        return;
    }
    /* DELIVERY RECEIPTS: the mark (0x78 0x01, a field TensorFlow skips) after TensorFlow's fields,
       then taken receipts (field 16: 0x80 0x01 <id>) */
    for (k = 0; k < ninl; k++) {
        uint64_t v = (uint64_t)inl[k];
        extra += 3;
        while (v >= 0x80) { v >>= 7; extra++; }
    }
    n = tfrdv_grpc_encode_request(tfrdv_call_step_id(call), key.ptr, key.len, request_id, 0, 0) + (marked ? 2 : 0) + extra;
    if (n > sizeof stackbuf && !(req = (uint8_t*)tfrdv_grpc__alloc(&g->a, n))) {
        tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_grpc: out of memory", 0, 0);
        return;
    }
    {
        size_t at = tfrdv_grpc_encode_request(tfrdv_call_step_id(call), key.ptr, key.len, request_id, req, n);
        if (marked) {
            req[at++] = (uint8_t)(TFRDV_GRPC_RECEIPTS_FIELD << 3);
            req[at++] = 1;
        }
        for (k = 0; k < ninl; k++) {
            uint64_t v = (uint64_t)inl[k];
            req[at++] = (uint8_t)(((TFRDV_GRPC_TAKEN_FIELD << 3) & 0x7f) | 0x80);
            req[at++] = (uint8_t)(TFRDV_GRPC_TAKEN_FIELD >> 4);
            while (v >= 0x80) { req[at++] = (uint8_t)(v | 0x80); v >>= 7; }
            req[at++] = (uint8_t)v;
        }
    }
    if (tfrdv_grpc__ccall_start(g, TFRDV_GRPC__C_RECV, chan, req, n, deadline, call, request_id, inl, ninl, 0, tfrdv_grpc__recv_done, &st) != TFRDV_OK) {
        if (req != stackbuf) tfrdv_grpc__free(&g->a, req, n);
        for (k = 0; k < ninl; k++) (void)tfrdv_grpc__mark(g, chan, inl[k], 0); /* not carried */
        tfrdv_call_finish(call, st.code, st.msg, 0, 0);
        return;
    }
    if (req != stackbuf) tfrdv_grpc__free(&g->a, req, n);
    if (ninl) TFRDV_GRPC__ADD(g, acks_inline, (uint64_t)ninl);
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__t_cancel(void* user, tfrdv_call* call) {
    tfrdv_grpc* g = (tfrdv_grpc*)user;
    tfrdv_grpc__ccall* c;
    pthread_mutex_lock(&g->mu);
    c = *(tfrdv_grpc__ccall**)tfrdv_call_scratch(call);
    if (c && c->call == call && c->gc) grpc_call_cancel(c->gc, NULL); /* completes through the queue */
    pthread_mutex_unlock(&g->mu);
}
/* tfrdv_recv blocking in a callback of the only thread that handles g's completions (or of
   tfrdv_grpc_poll): its answer could never be handled, so it fails now instead of waiting forever */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__t_wait(void* user, tfrdv_call* call, int64_t timeout_ns) {
    tfrdv_grpc* g = (tfrdv_grpc*)user;
    tfrdv_grpc__ccall* c;
    tfrdv_call* mine = 0;
    (void)timeout_ns;
    if (tfrdv_grpc__handling != g || g->nthreads > 1) return 0; /* another thread completes it */
    pthread_mutex_lock(&g->mu);
    c = *(tfrdv_grpc__ccall**)tfrdv_call_scratch(call);
    if (c && c->call == call) {
        mine = call;
        c->call = 0; /* its completion finds no call */
        *(tfrdv_grpc__ccall**)tfrdv_call_scratch(call) = 0;
        if (c->gc) grpc_call_cancel(c->gc, NULL);
    }
    pthread_mutex_unlock(&g->mu);
    if (mine)
        tfrdv_call_finish(mine, TFRDV_FAILED_PRECONDITION, "tfrdv_grpc: a blocking receive inside a callback of the only "
                          "thread that handles this transport's completions would wait forever (use tfrdv_recv_async, "
                          "or num_threads > 1)", 0, 0);
    return mine != 0;
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__t_destroy(void* user) { tfrdv_grpc__unref((tfrdv_grpc*)user); }

TFRDV_GRPC__PRIVATE void tfrdv_grpc__t_ref(void* user) {
    tfrdv_grpc* g = (tfrdv_grpc*)user;
    pthread_mutex_lock(&g->mu);
    g->refs++;
    pthread_mutex_unlock(&g->mu);
}
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__t_peer_inc(void* user, tfrdv_mgr* mgr, tfrdv_str w, int64_t timeout_ns,
                                                      uint64_t* inc, tfrdv_status* st);
TFRDV_API tfrdv_transport tfrdv_grpc_transport(tfrdv_grpc* g) {
    tfrdv_transport t;
    memset(&t, 0, sizeof t);
    if (!g) return t;
    t.user = g;
    t.start_call = tfrdv_grpc__t_start;
    t.cancel_call = tfrdv_grpc__t_cancel;
    t.wait = tfrdv_grpc__t_wait;
    t.destroy = tfrdv_grpc__t_destroy;
    t.ref = tfrdv_grpc__t_ref; /* each manager holds g until it goes (TRANSPORTS in tfrdv.h) */
    t.peer_incarnation = tfrdv_grpc__t_peer_inc;
    return t;
}

/* >>transport: GetStatus client -------------------------------------------------------------- */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__status_done(tfrdv_grpc* g, tfrdv_grpc__tag* tag, int ok) {
    tfrdv_grpc__ccall* c = TFRDV_GRPC__OF(tag, tfrdv_grpc__ccall, tag);
    tfrdv_grpc__waiter* w = c->w;
    (void)ok;
    pthread_mutex_lock(&g->mu);
    tfrdv_grpc__unlink_locked(g, c);
    pthread_mutex_unlock(&g->mu);
    if (c->status != GRPC_STATUS_OK) {
        w->st.code = (tfrdv_code)c->status;
        if (w->st.code > TFRDV_UNAUTHENTICATED) w->st.code = TFRDV_UNKNOWN;
        tfrdv_grpc__slice_msg(c->details, w->st.msg, sizeof w->st.msg);
    } else {
        tfrdv_str stack[8];
        size_t n, heap;
        grpc_slice flat;
        int has_flat;
        tfrdv_str* segs = tfrdv_grpc__segs(g, c->resp, stack, 8, &n, &flat, &has_flat, &heap);
        if (!segs) tfrdv_grpc__err(&w->st, TFRDV_RESOURCE_EXHAUSTED, "GetStatus: out of memory");
        else tfrdv_grpc_decode_status_response(segs, n, w->out, w->cap, &w->n, &w->st);
        if (heap) tfrdv_grpc__free(&g->a, segs, heap * sizeof *segs);
        if (has_flat) grpc_slice_unref(flat);
    }
    tfrdv_grpc__ccall_free(g, c);
    pthread_mutex_lock(&g->mu);
    w->done = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}
TFRDV_GRPC__PRIVATE int tfrdv_grpc__waiter_done(tfrdv_grpc* g, void* arg) { (void)g; return ((tfrdv_grpc__waiter*)arg)->done; }
/* one GetStatus call to addr (deadline ns from now, < 0: none), waited for; wait_ready: gRPC's
   wait-for-ready (the call waits for the channel to connect instead of failing UNAVAILABLE) */
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__status_call(tfrdv_grpc* g, const char* addr, int64_t deadline_ns, int wait_ready,
                                                       tfrdv_grpc_device* out, size_t cap, size_t* n, tfrdv_status* st) {
    tfrdv_grpc__chan* chan = 0;
    tfrdv_grpc__waiter w;
    tfrdv_status s;
    *n = 0;
    memset(&w, 0, sizeof w);
    w.out = out;
    w.cap = cap;
    w.wait_ready = wait_ready;
    pthread_mutex_lock(&g->mu);
    if (!g->shut) chan = tfrdv_grpc__chan_locked(g, addr, &s);
    else tfrdv_grpc__err(&s, TFRDV_UNAVAILABLE, "tfrdv_grpc: transport shut down");
    pthread_mutex_unlock(&g->mu);
    if (!chan) return tfrdv_grpc__err(st, s.code, "%s", s.msg);
    if (tfrdv_grpc__ccall_start(g, TFRDV_GRPC__C_STATUS, chan, 0, 0, tfrdv_grpc__in(deadline_ns), 0, 0, 0, 0, &w,
                                tfrdv_grpc__status_done, &s) != TFRDV_OK)
        return tfrdv_grpc__err(st, s.code, "%s", s.msg);
    pthread_mutex_lock(&g->mu);
    tfrdv_grpc__wait_locked(g, tfrdv_grpc__waiter_done, &w);
    pthread_mutex_unlock(&g->mu);
    *n = w.n;
    if (st) *st = w.st;
    return w.st.code;
}
TFRDV_API tfrdv_code tfrdv_grpc_peer_devices(tfrdv_grpc* g, const char* target, int64_t timeout_ns,
                                             tfrdv_grpc_device* out, size_t cap, size_t* n,
                                             tfrdv_status* st) {
    char addr[512];
    size_t got = 0;
    tfrdv_code code;
    if (n) *n = 0;
    if (!g || !target || (cap && !out)) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_grpc_peer_devices: NULL argument");
    if (target[0] == '/') {
        if (!tfrdv_grpc__resolve(g, target, strlen(target), addr, sizeof addr)) {
            char wn[300];
            (void)tfrdv_escape(wn, sizeof wn, target, strlen(target));
            return tfrdv_grpc__err(st, TFRDV_NOT_FOUND, "No worker known as %s (tfrdv_grpc has no address for it)", wn);
        }
    } else if (strlen(target) < sizeof addr) {
        memcpy(addr, target, strlen(target) + 1);
    } else {
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_grpc_peer_devices: address too long");
    }
    if (tfrdv_grpc__handling == g && g->nthreads == 1) /* its answer needs this very thread */
        return tfrdv_grpc__err(st, TFRDV_FAILED_PRECONDITION, "tfrdv_grpc_peer_devices: called from a callback of this transport's only completion-queue thread (call it from another thread, or use num_threads > 1)");
    code = tfrdv_grpc__status_call(g, addr, timeout_ns > 0 ? timeout_ns : 30000000000LL, 0, out, cap, &got, st);
    if (n) *n = got;
    return code;
}

/* >>transport: peer incarnation -------------------------------------------------------------- */
/* 1 if device name d (NUL-terminated) is on worker wd; *cpu0: it is that worker's CPU:0 */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__on_worker(const char* d, const tfrdv_device_name* wd, int* cpu0) {
    tfrdv_device_name dn;
    *cpu0 = 0;
    if (tfrdv_device_parse(d, strlen(d), &dn, 0) != TFRDV_OK || !dn.has_job || !dn.has_replica || !dn.has_task ||
        dn.job.len != wd->job.len || memcmp(dn.job.ptr, wd->job.ptr, wd->job.len) != 0 || dn.replica != wd->replica ||
        dn.task != wd->task)
        return 0;
    *cpu0 = dn.has_type && dn.has_id && dn.id == 0 && dn.type.len == 3 && memcmp(dn.type.ptr, "CPU", 3) == 0;
    return 1;
}
/* tfrdv_transport.peer_incarnation: GetStatus to the worker, the incarnation of its CPU:0 (else
   of its first device); see PEER INCARNATION */
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__t_peer_inc(void* user, tfrdv_mgr* mgr, tfrdv_str w, int64_t timeout_ns,
                                                      uint64_t* inc, tfrdv_status* st) {
    tfrdv_grpc* g = (tfrdv_grpc*)user;
    char addr[512], wn[300], an[300], name[TFRDV_GRPC_DEVICE_NAME_MAX];
    tfrdv_grpc_device stack[8];
    tfrdv_grpc_device* devs = stack;
    size_t cap = 8, n = 0, i, first = (size_t)-1, cpu = (size_t)-1;
    tfrdv_device_name wd;
    tfrdv_status s;
    tfrdv_code code;
    int c0, stale = 0, attempt;
    int64_t end_ns = timeout_ns > 0 ? tfrdv_now_ns() + timeout_ns : 0;
    (void)mgr;
    *inc = 0;
    (void)tfrdv_escape(wn, sizeof wn, w.ptr, w.len);
    if (w.len >= sizeof name || tfrdv_device_parse(w.ptr, w.len, &wd, 0) != TFRDV_OK)
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_grpc: '%s' is not a worker name", wn);
    if (!tfrdv_grpc__resolve(g, w.ptr, w.len, addr, sizeof addr))
        return tfrdv_grpc__err(st, TFRDV_NOT_FOUND, "No worker known as %s (tfrdv_grpc has no address for it: workers, tfrdv_grpc_set_worker or resolve)", wn);
    (void)tfrdv_escape(an, sizeof an, addr, strlen(addr));
    if (tfrdv_grpc__handling == g && g->nthreads == 1)
        return tfrdv_grpc__err(st, TFRDV_FAILED_PRECONDITION, "tfrdv_grpc: asking %s's incarnation from a callback of this transport's only completion-queue thread would wait forever (ask from another thread, or use num_threads > 1)", wn);
    /* at most two calls, both within the one timeout: a peer whose list grows on every answer
       cannot keep this asking, nor a long list of tiny entries make it allocate without bound */
    for (attempt = 0;; attempt++) {
        int64_t left = timeout_ns == 0 ? 30000000000LL : timeout_ns;
        if (timeout_ns > 0 && attempt > 0) left = end_ns - tfrdv_now_ns() > 1000000 ? end_ns - tfrdv_now_ns() : 1000000;
        code = tfrdv_grpc__status_call(g, addr, left, timeout_ns != 0, devs, cap, &n, &s);
        if (code != TFRDV_OK || n <= cap) break;
        if (attempt > 0) { /* the list grew between the two answers: look at what fit */
            n = cap;
            break;
        }
        if (n > TFRDV_GRPC__PEER_DEVICES_MAX) {
            if (devs != stack) tfrdv_grpc__free(&g->a, devs, cap * sizeof *devs);
            return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_grpc: worker %s at %s answered GetStatus with %zu devices (more than %d: a hostile or broken peer)",
                                   wn, an, n, TFRDV_GRPC__PEER_DEVICES_MAX);
        }
        cap = n; /* more devices than room: ask again with room for all */
        devs = (tfrdv_grpc_device*)tfrdv_grpc__alloc(&g->a, cap * sizeof *devs);
        if (!devs) return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_grpc: out of memory asking %s's incarnation", wn);
    }
    if (code == TFRDV_OK) {
        for (i = 0; i < n; i++) {
            if (!tfrdv_grpc__on_worker(devs[i].name, &wd, &c0)) continue;
            if (first == (size_t)-1) first = i;
            if (c0) { cpu = i; break; }
        }
        if (cpu != (size_t)-1 || first != (size_t)-1) {
            *inc = devs[cpu != (size_t)-1 ? cpu : first].incarnation;
        } else {
            (void)tfrdv_escape(name, sizeof name, n ? devs[0].name : "", n ? strlen(devs[0].name) : 0);
            code = TFRDV_FAILED_PRECONDITION;
            stale = 1;
        }
    }
    if (devs != stack) tfrdv_grpc__free(&g->a, devs, cap * sizeof *devs);
    if (code == TFRDV_OK) return tfrdv_grpc__ok(st), TFRDV_OK;
    if (stale)
        return tfrdv_grpc__err(st, code, "tfrdv_grpc: worker %s: %s answered with %zu device(s), none of that worker (%.200s%s): a stale cluster spec?",
                               wn, an, n, n ? name : "none", n > 1 ? ", ..." : "");
    if (code == TFRDV_DEADLINE_EXCEEDED)
        return tfrdv_grpc__err(st, code, "tfrdv_grpc: worker %s at %s did not answer GetStatus within %lld ms (%.200s)", wn, an,
                               (long long)(timeout_ns / 1000000), s.msg);
    return tfrdv_grpc__err(st, code, "tfrdv_grpc: worker %s at %s: %.300s", wn, an, s.msg);
}

/* >>transport: server ------------------------------------------------------------------------ */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__post(tfrdv_grpc* g, int method);

TFRDV_GRPC__PRIVATE size_t tfrdv_grpc__sctx_size(tfrdv_grpc* g, int method) {
    (void)g;
    (void)method;
    return sizeof(tfrdv_grpc__sctx);
}
/* frees a server context (never linked anywhere but the in-flight count) */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__pend_unlink_locked(tfrdv_grpc* g, tfrdv_grpc__sctx* x);
TFRDV_GRPC__PRIVATE void tfrdv_grpc__sctx_free(tfrdv_grpc* g, tfrdv_grpc__sctx* x) {
    if (x->plinked) { /* only when its close was never handled */
        pthread_mutex_lock(&g->mu);
        tfrdv_grpc__pend_unlink_locked(g, x);
        pthread_mutex_unlock(&g->mu);
    }
    if (x->gc) grpc_call_unref(x->gc);
    grpc_metadata_array_destroy(&x->md);
    if (x->payload) grpc_byte_buffer_destroy(x->payload);
    if (x->resp) grpc_byte_buffer_destroy(x->resp);
    if (x->method == TFRDV_GRPC__M_GENERIC) grpc_call_details_destroy(&x->details);
    if (x->key && x->key != x->key_inline) tfrdv_grpc__free(&g->a, x->key, x->key_cap);
    if (x->cm && tfrdv_cancel_mgr_reset(x->cm) == TFRDV_OK) {
        pthread_mutex_lock(&g->mu);
        if (g->ncm_free < g->cap_cm_free) {
            g->cm_free[g->ncm_free++] = x->cm;
            x->cm = 0;
        }
        pthread_mutex_unlock(&g->mu);
    }
    if (x->cm) tfrdv_cancel_mgr_destroy(x->cm);
    tfrdv_grpc__free(&g->a, x, tfrdv_grpc__sctx_size(g, x->method));
    pthread_mutex_lock(&g->mu);
    g->srv_live--;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__sctx_unref(tfrdv_grpc* g, tfrdv_grpc__sctx* x) {
    if (__atomic_sub_fetch(&x->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    TFRDV_GRPC__SUB(g, server_calls_live, 1);
    tfrdv_grpc__sctx_free(g, x);
}

/* A served answer the call cannot deliver goes back to the table (never dropped): to the key's
   next receiver, ahead of later sends. value is one owned reference (NULL only if is_dead). */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__give_back(tfrdv_grpc* g, tfrdv_grpc__sctx* x, tfrdv_value* value, int is_dead) {
    tfrdv_status st;
    if (tfrdv_mgr_serve_return(g->mgr, x->step_id, x->key, x->key_len, x->request_id, &x->send_args, value, is_dead, &st) == TFRDV_OK)
        TFRDV_GRPC__ADD(g, serve_returned, 1);
    else /* the step is gone or aborted: nobody can receive the value any more (it was released) */
        tfrdv_grpc__log(g, 1, "tfrdv_grpc: an undelivered RecvTensor answer was dropped: %s", st.msg);
}
/* ---- DELIVERY RECEIPTS ---- */
TFRDV_GRPC__PRIVATE tfrdv_grpc__rcpt** tfrdv_grpc__rc_slot(tfrdv_grpc* g, int64_t id) {
    uint64_t h = (uint64_t)id * 0x9e3779b97f4a7c15ull;
    return &g->rc_hash[(h >> 32) % TFRDV_GRPC__RC_BUCKETS];
}
/* g->mu held: the first entry of id with held == want (want < 0: any), unlinked; or NULL */
TFRDV_GRPC__PRIVATE tfrdv_grpc__rcpt* tfrdv_grpc__rc_take_locked(tfrdv_grpc* g, int64_t id, int want) {
    tfrdv_grpc__rcpt** pp = tfrdv_grpc__rc_slot(g, id);
    tfrdv_grpc__rcpt* e;
    while ((e = *pp) && !(e->request_id == id && (want < 0 || e->held == want))) pp = &e->hnext;
    if (!e) return 0;
    *pp = e->hnext;
    if (e->older) e->older->newer = e->newer;
    else g->rc_old = e->newer;
    if (e->newer) e->newer->older = e->older;
    else g->rc_new = e->older;
    g->rc_n--;
    return e;
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__rc_insert_locked(tfrdv_grpc* g, tfrdv_grpc__rcpt* e) {
    tfrdv_grpc__rcpt** slot = tfrdv_grpc__rc_slot(g, e->request_id);
    e->hnext = *slot;
    *slot = e;
    e->newer = 0;
    e->older = g->rc_new;
    if (g->rc_new) g->rc_new->newer = e;
    else g->rc_old = e;
    g->rc_new = e;
    g->rc_n++;
}
/* an entry that left the table: a held answer goes back (not_taken) or is released (delivered) */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__rc_settle(tfrdv_grpc* g, tfrdv_grpc__rcpt* e, int not_taken, int expired) {
    if (e->held && not_taken) {
        tfrdv_status st;
        TFRDV_GRPC__ADD(g, receipts_returned, 1);
        if (tfrdv_mgr_serve_return(g->mgr, e->step_id, e->key, e->key_len, e->request_id, &e->send_args, e->value, e->dead, &st) == TFRDV_OK)
            TFRDV_GRPC__ADD(g, serve_returned, 1);
        else
            tfrdv_grpc__log(g, 1, "tfrdv_grpc: an answer its client did not take was dropped: %s", st.msg);
    } else if (e->held) {
        if (expired) TFRDV_GRPC__ADD(g, receipts_expired, 1);
        tfrdv_value_release(e->value);
        tfrdv_mgr_serve_delivered(g->mgr, e->request_id); /* its step may drain now */
    }
    tfrdv_grpc__free(&g->a, e, e->size);
}
/* g->mu held: unlinks what is due (now, or beyond TFRDV_GRPC__RC_MAX) onto *out (by hnext) */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__rc_due_locked(tfrdv_grpc* g, int64_t now, tfrdv_grpc__rcpt** out) {
    while (g->rc_old && (g->rc_old->expires <= now || g->rc_n > TFRDV_GRPC__RC_MAX)) {
        tfrdv_grpc__rcpt* e = g->rc_old;
        tfrdv_grpc__rcpt** pp = tfrdv_grpc__rc_slot(g, e->request_id);
        while (*pp != e) pp = &(*pp)->hnext;
        *pp = e->hnext;
        g->rc_old = e->newer;
        if (g->rc_old) g->rc_old->older = 0;
        else g->rc_new = 0;
        g->rc_n--;
        e->hnext = *out;
        *out = e;
    }
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__rc_run_due(tfrdv_grpc* g, tfrdv_grpc__rcpt* due) {
    while (due) {
        tfrdv_grpc__rcpt* e = due;
        due = e->hnext;
        tfrdv_grpc__rc_settle(g, e, 0, 1);
    }
}
TFRDV_GRPC__PRIVATE tfrdv_grpc__rcpt* tfrdv_grpc__rc_new(tfrdv_grpc* g, int64_t id, size_t key_len) {
    size_t size = sizeof(tfrdv_grpc__rcpt) + key_len;
    tfrdv_grpc__rcpt* e = (tfrdv_grpc__rcpt*)tfrdv_grpc__alloc(&g->a, size);
    if (!e) return 0;
    memset(e, 0, sizeof *e);
    e->size = size;
    e->request_id = id;
    e->expires = tfrdv_mgr_now(g->mgr) + g->cfg.receipt_ttl_ns;
    return e;
}
TFRDV_GRPC__PRIVATE struct tfrdv_grpc__sctx** tfrdv_grpc__pend_slot(tfrdv_grpc* g, int64_t id) {
    uint64_t h = (uint64_t)id * 0x9e3779b97f4a7c15ull;
    return &g->pend[(h >> 32) % TFRDV_GRPC__RC_BUCKETS];
}
/* g->mu held: x (an ack call, its request accepted) waits for its close in g->pend */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__pend_link_locked(tfrdv_grpc* g, tfrdv_grpc__sctx* x) {
    struct tfrdv_grpc__sctx** slot = tfrdv_grpc__pend_slot(g, x->request_id);
    x->receipt = 0;
    x->pnext = *slot;
    *slot = x;
    x->plinked = 1;
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__pend_unlink_locked(tfrdv_grpc* g, tfrdv_grpc__sctx* x) {
    struct tfrdv_grpc__sctx** pp = tfrdv_grpc__pend_slot(g, x->request_id);
    if (!x->plinked) return;
    while (*pp && *pp != x) pp = &(*pp)->pnext;
    if (*pp) *pp = x->pnext;
    x->pnext = 0;
    x->plinked = 0;
}
/* MarkRecvFinished{1: id, 15: not_taken}: settles the held answer of id, or is kept by the call of
   id whose close is not handled yet (its answer may still be on the way), or is dropped */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__rc_receipt(tfrdv_grpc* g, int64_t id, int not_taken) {
    tfrdv_grpc__rcpt *e, *due = 0;
    struct tfrdv_grpc__sctx* x = 0;
    int64_t now = tfrdv_mgr_now(g->mgr); /* the clock hook is user code: not under mu */
    pthread_mutex_lock(&g->mu);
    e = tfrdv_grpc__rc_take_locked(g, id, 1);
    if (!e) {
        for (x = *tfrdv_grpc__pend_slot(g, id); x && !(x->request_id == id && !x->receipt); x = x->pnext) {}
        if (x) x->receipt = not_taken ? 2 : 1;
    }
    tfrdv_grpc__rc_due_locked(g, now, &due);
    pthread_mutex_unlock(&g->mu);
    if (e) tfrdv_grpc__rc_settle(g, e, not_taken, 0);
    else if (!x) TFRDV_GRPC__ADD(g, receipts_unmatched, 1);
    tfrdv_grpc__rc_run_due(g, due);
}
/* gRPC reported the RecvTensor call closed (RECV_CLOSE_ON_SERVER): cancelled (the client's cancel
   or deadline, a broken connection, shutdown: the status did not reach the client) withdraws a
   request not answered yet and gives a held answer back; otherwise the held reference goes, or,
   for an ack call, the answer waits for its receipt (DELIVERY RECEIPTS; one that came first
   settles it now). Leaving g->pend and entering the receipt table happen under one lock, so a
   receipt always finds one of them. */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__closed(tfrdv_grpc* g, tfrdv_grpc__sctx* x, int cancelled) {
    tfrdv_value* v;
    tfrdv_grpc__rcpt *e = 0, *due = 0;
    int holding, dead, receipt = 0;
    int64_t now = 0;
    if (x->ack && !cancelled) { /* room for the held answer, made outside the lock */
        e = tfrdv_grpc__rc_new(g, x->request_id, x->key_len);
        now = tfrdv_mgr_now(g->mgr);
    }
    pthread_mutex_lock(&g->mu);
    x->closed = cancelled ? 2 : 1;
    holding = x->holding;
    v = x->held;
    dead = x->held_dead;
    x->holding = 0;
    x->held = 0;
    if (x->ack) {
        tfrdv_grpc__pend_unlink_locked(g, x);
        receipt = x->receipt;
    }
    if (holding && !cancelled && x->ack && !receipt && e) {
        e->held = 1;
        e->step_id = x->step_id;
        e->value = v;
        e->dead = dead;
        e->send_args = x->send_args;
        e->key_len = x->key_len;
        memcpy(e->key, x->key, x->key_len);
        tfrdv_grpc__rc_insert_locked(g, e);
        tfrdv_grpc__rc_due_locked(g, now, &due);
        e = 0;
        holding = 0; /* the table holds it now */
    }
    pthread_mutex_unlock(&g->mu);
    if (e) tfrdv_grpc__free(&g->a, e, e->size);
    if (cancelled) {
        TFRDV_GRPC__ADD(g, serve_cancelled, 1);
        if (x->cm) tfrdv_cancel_start(x->cm); /* withdraws the serve request (harmless once answered) */
    }
    if (holding && (cancelled || receipt == 2)) {
        if (!cancelled) TFRDV_GRPC__ADD(g, receipts_returned, 1); /* the not-taken receipt came first */
        tfrdv_grpc__give_back(g, x, v, dead);
    } else if (holding) {
        tfrdv_value_release(v); /* delivered (a receipt said so, none is expected, or no memory) */
        tfrdv_mgr_serve_delivered(g->mgr, x->request_id);
    }
    tfrdv_grpc__rc_run_due(g, due);
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__send_done(tfrdv_grpc* g, tfrdv_grpc__tag* tag, int ok) {
    tfrdv_grpc__sctx* x = TFRDV_GRPC__OF(tag, tfrdv_grpc__sctx, send);
    if (ok && x->method == TFRDV_GRPC__M_RECV && x->bytes) TFRDV_GRPC__ADD(g, bytes_sent, x->bytes);
    /* the batch carried RECV_CLOSE too (phase 1): a failed batch counts as cancelled */
    if (x->method == TFRDV_GRPC__M_RECV && __atomic_load_n(&x->phase, __ATOMIC_ACQUIRE) == 1) tfrdv_grpc__closed(g, x, !ok || x->cancelled);
    tfrdv_grpc__sctx_unref(g, x);
}
TFRDV_GRPC__PRIVATE void tfrdv_grpc__close_done(tfrdv_grpc* g, tfrdv_grpc__tag* tag, int ok) {
    tfrdv_grpc__sctx* x = TFRDV_GRPC__OF(tag, tfrdv_grpc__sctx, close);
    tfrdv_grpc__closed(g, x, !ok || x->cancelled);
    tfrdv_grpc__sctx_unref(g, x);
}

/* Starts the reply batch (SEND_INITIAL_METADATA, [SEND_MESSAGE], SEND_STATUS[, RECV_CLOSE]) with
   the send tag. resp (may be NULL) is owned by x from here. */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__reply(tfrdv_grpc* g, tfrdv_grpc__sctx* x, grpc_byte_buffer* resp, tfrdv_code code,
                                           const char* msg, int restarted, int with_close) {
    grpc_op ops[4];
    grpc_metadata md;
    grpc_slice details;
    grpc_call_error err;
    size_t n = 0;
    x->resp = resp;
    memset(ops, 0, sizeof ops);
    memset(&md, 0, sizeof md);
    details = grpc_slice_from_copied_string(msg ? msg : "");
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (resp) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = resp;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = (grpc_status_code)code;
    ops[n].data.send_status_from_server.status_details = code == TFRDV_OK ? NULL : &details;
    if (restarted) {
        md.key = grpc_slice_from_static_string("grpc-status-details-bin");
        md.value = grpc_slice_from_static_buffer(tfrdv_grpc__restarted_payload, TFRDV_GRPC__RESTARTED_LEN);
        ops[n].data.send_status_from_server.trailing_metadata_count = 1;
        ops[n].data.send_status_from_server.trailing_metadata = &md;
    }
    n++;
    if (with_close) {
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &x->cancelled;
    }
    {
        grpc_call* gc = x->gc;
        TFRDV_GRPC__ARM(&x->send);
        err = grpc_call_start_batch(gc, ops, n, &x->send, NULL);
    }
    grpc_slice_unref(details);
    if (err != GRPC_CALL_OK) {
        tfrdv_grpc__log(g, 3, "tfrdv_grpc: reply batch failed: %s", grpc_call_error_to_string(err));
        grpc_call_cancel(x->gc, NULL); /* a separate close batch then completes cancelled */
        tfrdv_grpc__send_done(g, &x->send, 0);
    }
}

/* A zero-copy slice over a value: it holds a value reference and a reference on g; its release
   (on whichever gRPC thread drops the slice last) releases the value, then counts down
   g->zc_live, which tfrdv_grpc_destroy waits to reach 0. */
typedef struct tfrdv_grpc__zc {
    tfrdv_grpc* g;
    tfrdv_value* v;
} tfrdv_grpc__zc;
TFRDV_GRPC__PRIVATE void tfrdv_grpc__zc_release(void* p) {
    tfrdv_grpc__zc* z = (tfrdv_grpc__zc*)p;
    tfrdv_grpc* g = z->g;
    tfrdv_value_release(z->v);
    tfrdv_grpc__free(&g->a, z, sizeof *z);
    pthread_mutex_lock(&g->mu);
    g->zc_live--;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    tfrdv_grpc__unref(g);
}
/* value stays the caller's: the slice takes a reference of its own (copied if out of memory) */
TFRDV_GRPC__PRIVATE grpc_slice tfrdv_grpc__zc_slice(tfrdv_grpc* g, tfrdv_value* value) {
    tfrdv_grpc__zc* z = (tfrdv_grpc__zc*)tfrdv_grpc__alloc(&g->a, sizeof *z);
    if (!z) return grpc_slice_from_copied_buffer((const char*)value->data, (size_t)value->size);
    z->g = g;
    z->v = value;
    tfrdv_value_retain(value);
    pthread_mutex_lock(&g->mu);
    g->zc_live++;
    g->refs++;
    pthread_mutex_unlock(&g->mu);
    return grpc_slice_new_with_user_data(value->data, (size_t)value->size, tfrdv_grpc__zc_release, z);
}

/* 1 if the call's deadline is less than the margin away: a reply sent now could not reach the
   client before it gives up, and would be dropped there */
TFRDV_GRPC__PRIVATE int tfrdv_grpc__expired(tfrdv_grpc* g, tfrdv_grpc__sctx* x) {
    gpr_timespec d = gpr_convert_clock_type(x->deadline, GPR_CLOCK_MONOTONIC);
    if (d.tv_sec == INT64_MAX) return 0; /* no deadline */
    if (g->cfg.serve_deadline_margin_ns > 0) d = gpr_time_sub(d, gpr_time_from_nanos(g->cfg.serve_deadline_margin_ns, GPR_TIMESPAN));
    return gpr_time_cmp(d, gpr_now(GPR_CLOCK_MONOTONIC)) <= 0;
}

TFRDV_GRPC__PRIVATE void tfrdv_grpc__served(void* user, const tfrdv_status* status, const tfrdv_args* send_args,
                                            tfrdv_value* value, int is_dead) {
    tfrdv_grpc__sctx* x = (tfrdv_grpc__sctx*)user;
    tfrdv_grpc* g = x->g;
    uint8_t stackhead[TFRDV_GRPC_HEAD_MAX(8)];
    uint8_t* head = stackhead;
    uint8_t tail[TFRDV_GRPC_TAIL_MAX];
    size_t head_cap = sizeof stackhead, head_len, tail_len;
    int32_t rank = value ? value->rank : 0;
    tfrdv_status st;
    grpc_slice sl[3];
    size_t ns = 0, i;
    uint64_t size = value ? value->size : 0;
    gpr_timespec now;
    int64_t micros;
    int zero = 0, with_close, closed;
    grpc_byte_buffer* bb;
    /* answered while tfrdv_mgr_serve still runs in the accept handler: one batch does it all */
    with_close = __atomic_compare_exchange_n(&x->phase, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    if (with_close) __atomic_sub_fetch(&x->refs, 1, __ATOMIC_ACQ_REL); /* no separate close tag */
    if (status->code != TFRDV_OK) {
        tfrdv_value_release(value);
        tfrdv_grpc__reply(g, x, 0, status->code, status->msg,
                          status->code == TFRDV_ABORTED && status->detail == TFRDV_DETAIL_WORKER_RESTARTED, with_close);
        return;
    }
    TFRDV_GRPC__ADD(g, serve_ok, 1);
    x->send_args = *send_args;
    if (tfrdv_grpc__expired(g, x)) { /* the client gives up before a reply could reach it */
        tfrdv_grpc__give_back(g, x, value, is_dead);
        tfrdv_grpc__reply(g, x, 0, TFRDV_DEADLINE_EXCEEDED, "RecvTensor: the call's deadline passed before the value could be sent "
                          "(it stays buffered for the next receiver)", 0, with_close);
        return;
    }
    if (rank > 8 && rank <= TFRDV_GRPC_MAX_RANK) {
        head_cap = TFRDV_GRPC_HEAD_MAX(rank);
        head = (uint8_t*)tfrdv_grpc__alloc(&g->a, head_cap);
        if (!head) {
            tfrdv_grpc__give_back(g, x, value, is_dead);
            tfrdv_grpc__reply(g, x, 0, TFRDV_RESOURCE_EXHAUSTED, "RecvTensor: out of memory", 0, with_close);
            return;
        }
    }
    if (size > g->cfg.max_message_bytes) {
        tfrdv_grpc__err(&st, TFRDV_RESOURCE_EXHAUSTED,
                        "RecvTensor: a tensor of %llu bytes exceeds the gRPC message limit of %llu bytes (TensorFlow aborts its process here)",
                        (unsigned long long)size, (unsigned long long)g->cfg.max_message_bytes);
    } else {
        now = gpr_now(GPR_CLOCK_REALTIME);
        micros = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
        tfrdv_grpc_encode_response(value, is_dead, x->ack, micros, head, head_cap, &head_len, tail, &tail_len, &st);
        if (st.code == TFRDV_OK && x->inline_ok && x->ack && tail_len + 2 <= sizeof tail) { /* field 15: receipts inline */
            tail[tail_len++] = (uint8_t)(TFRDV_GRPC_RECEIPTS_FIELD << 3);
            tail[tail_len++] = 1;
        }
    }
    if (st.code != TFRDV_OK) { /* a value this transport can never carry: consumed, as an error */
        if (head != stackhead) tfrdv_grpc__free(&g->a, head, head_cap);
        tfrdv_value_release(value);
        tfrdv_mgr_serve_delivered(g->mgr, x->request_id);
        tfrdv_grpc__reply(g, x, 0, st.code, st.msg, 0, with_close);
        return;
    }
    if (size <= 1024) { /* small: one slice, copied (as TensorFlow) */
        sl[0] = grpc_slice_malloc(head_len + (size_t)size + tail_len);
        memcpy(GRPC_SLICE_START_PTR(sl[0]), head, head_len);
        if (size) memcpy(GRPC_SLICE_START_PTR(sl[0]) + head_len, value->data, (size_t)size);
        if (tail_len) memcpy(GRPC_SLICE_START_PTR(sl[0]) + head_len + size, tail, tail_len);
        ns = 1;
    } else { /* zero copy: the slice holds a value reference of its own, released with the slice */
        sl[ns++] = grpc_slice_from_copied_buffer((const char*)head, head_len);
        sl[ns++] = tfrdv_grpc__zc_slice(g, value);
        if (tail_len) sl[ns++] = grpc_slice_from_copied_buffer((const char*)tail, tail_len);
    }
    if (head != stackhead) tfrdv_grpc__free(&g->a, head, head_cap);
    bb = grpc_raw_byte_buffer_create(sl, ns);
    for (i = 0; i < ns; i++) grpc_slice_unref(sl[i]);
    /* the answer (value's reference) stays here until the close says whether it arrived */
    pthread_mutex_lock(&g->mu);
    closed = x->closed;
    if (!closed) {
        x->held = value;
        x->held_dead = is_dead;
        x->holding = 1;
    }
    pthread_mutex_unlock(&g->mu);
    if (closed) { /* the client cancelled (or its deadline passed) while the answer was being made */
        grpc_byte_buffer_destroy(bb);
        tfrdv_grpc__give_back(g, x, value, is_dead);
        tfrdv_grpc__reply(g, x, 0, TFRDV_CANCELLED, "RecvTensor: the call was cancelled", 0, with_close);
        return;
    }
    x->bytes = size;
    tfrdv_grpc__reply(g, x, bb, TFRDV_OK, 0, 0, with_close);
}

TFRDV_GRPC__PRIVATE void tfrdv_grpc__recv_accept(tfrdv_grpc* g, tfrdv_grpc__tag* tag, int ok) {
    tfrdv_grpc__sctx* x = TFRDV_GRPC__OF(tag, tfrdv_grpc__sctx, accept);
    grpc_op op;
    tfrdv_status st;
    int64_t step_id = 0, request_id = 0;
    tfrdv_code c;
    int zero = 0, marked = 0;
    int64_t taken[2 * TFRDV_GRPC_INLINE_MAX];
    size_t ntaken = 0, k;
    if (!ok) { tfrdv_grpc__sctx_free(g, x); return; } /* server shutting down */
    tfrdv_grpc__post(g, TFRDV_GRPC__M_RECV);
    TFRDV_GRPC__ADD(g, served, 1);
    TFRDV_GRPC__ADD(g, server_calls_live, 1);
    x->refs = 3; /* the reply batch, the close batch (or one batch doing both), this handler */
    x->phase = 0;
    {
        tfrdv_str stack[8];
        size_t n, heap;
        grpc_slice flat;
        int has_flat;
        tfrdv_str* segs = tfrdv_grpc__segs(g, x->payload, stack, 8, &n, &flat, &has_flat, &heap);
        if (!segs) c = tfrdv_grpc__err(&st, TFRDV_RESOURCE_EXHAUSTED, "RecvTensor: out of memory");
        else {
            /* the key goes into the context: inline up to 256 bytes, else a block of its size */
            c = tfrdv_grpc_decode_request(segs, n, &step_id, 0, 0, &x->key_len, &request_id, &st);
            if (c == TFRDV_OK && x->key_len > g->cfg.max_key_len)
                c = tfrdv_grpc__err(&st, TFRDV_INVALID_ARGUMENT, "RecvTensor: rendezvous key of %llu bytes exceeds the limit of %llu",
                                    (unsigned long long)x->key_len, (unsigned long long)g->cfg.max_key_len);
            x->key = x->key_inline;
            x->key_cap = sizeof x->key_inline;
            if (c == TFRDV_OK && x->key_len > x->key_cap) {
                x->key = (char*)tfrdv_grpc__alloc(&g->a, x->key_len);
                x->key_cap = x->key_len;
                if (!x->key) {
                    x->key = x->key_inline;
                    x->key_cap = sizeof x->key_inline;
                    c = tfrdv_grpc__err(&st, TFRDV_RESOURCE_EXHAUSTED, "RecvTensor: out of memory");
                }
            }
            if (c == TFRDV_OK) c = tfrdv_grpc_decode_request(segs, n, &step_id, x->key, x->key_cap, &x->key_len, &request_id, &st);
            if (c == TFRDV_OK && g->cfg.receipts != TFRDV_OFF) marked = tfrdv_grpc__request_ext(segs, n, taken, 2 * TFRDV_GRPC_INLINE_MAX, &ntaken);
        }
        if (heap) tfrdv_grpc__free(&g->a, segs, heap * sizeof *segs);
        if (has_flat) grpc_slice_unref(flat);
    }
    if (c == TFRDV_OK) { /* a cancellation manager to withdraw the request with: recycled or new */
        pthread_mutex_lock(&g->mu);
        if (g->ncm_free) x->cm = g->cm_free[--g->ncm_free];
        pthread_mutex_unlock(&g->mu);
        if (!x->cm && tfrdv_cancel_mgr_create(&g->cfg.hooks, &x->cm, &st) != TFRDV_OK) {
            x->cm = 0;
            c = tfrdv_grpc__err(&st, TFRDV_RESOURCE_EXHAUSTED, "RecvTensor: out of memory");
        }
    }
    if (c != TFRDV_OK) {
        x->phase = 1;
        x->refs = 1;
        tfrdv_grpc__reply(g, x, 0, st.code, st.msg, 0, 1);
        return;
    }
    x->step_id = step_id;
    x->request_id = request_id; /* the key lives in x until the context is freed */
    /* DELIVERY RECEIPTS: a tfrdv client's marked request (or any, with require_ack) gets a
       require_ack answer held until its receipt; TensorFlow's requests are answered as before */
    x->ack = request_id != 0 && (g->cfg.require_ack || marked);
    x->inline_ok = marked;
    for (k = 0; k < ntaken; k++) tfrdv_grpc__rc_receipt(g, taken[k], 0); /* receipts carried inline */
    if (x->ack) {
        pthread_mutex_lock(&g->mu);
        tfrdv_grpc__pend_link_locked(g, x);
        pthread_mutex_unlock(&g->mu);
    }
    /* every answer's fate is reported (delivered or given back): steps drain exactly */
    c = tfrdv_mgr_serve_ex(g->mgr, step_id, x->key, x->key_len, request_id, TFRDV_SERVE_CONFIRMS, x->cm,
                           tfrdv_grpc__served, x);
    if (c != TFRDV_OK) { /* refused without a callback (only for NULL arguments) */
        x->phase = 1;
        x->refs = 1;
        tfrdv_grpc__err(&st, c, "RecvTensor: the step manager refused the request");
        tfrdv_grpc__reply(g, x, 0, st.code, st.msg, 0, 1);
        return;
    }
    /* not answered yet: watch for the client's cancel (or deadline) from now on */
    if (__atomic_compare_exchange_n(&x->phase, &zero, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        grpc_call* gc = x->gc;
        memset(&op, 0, sizeof op);
        op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        op.data.recv_close_on_server.cancelled = &x->cancelled;
        TFRDV_GRPC__ARM(&x->close);
        if (grpc_call_start_batch(gc, &op, 1, &x->close, NULL) != GRPC_CALL_OK) tfrdv_grpc__sctx_unref(g, x);
    }
    tfrdv_grpc__sctx_unref(g, x); /* the reply may already have completed on another thread */
}

TFRDV_GRPC__PRIVATE void tfrdv_grpc__simple_accept(tfrdv_grpc* g, tfrdv_grpc__tag* tag, int ok) {
    tfrdv_grpc__sctx* x = TFRDV_GRPC__OF(tag, tfrdv_grpc__sctx, accept);
    grpc_byte_buffer* bb = 0;
    tfrdv_code code = TFRDV_OK;
    char msg[TFRDV_STATUS_MSG_MAX + 128];
    msg[0] = 0;
    if (!ok) { tfrdv_grpc__sctx_free(g, x); return; }
    tfrdv_grpc__post(g, x->method);
    TFRDV_GRPC__ADD(g, server_calls_live, 1);
    x->refs = 1;
    if (x->method == TFRDV_GRPC__M_GENERIC) {
        char m[128];
        TFRDV_GRPC__ADD(g, unimplemented, 1);
        tfrdv_grpc__slice_msg(x->details.method, m, sizeof m);
        code = TFRDV_UNIMPLEMENTED;
        snprintf(msg, sizeof msg, "tfrdv_grpc: method %s is not implemented by this worker", m);
    } else if (x->method == TFRDV_GRPC__M_STATUS) {
        tfrdv_grpc_device def;
        const tfrdv_grpc_device* d = g->cfg.devices;
        size_t nd = g->cfg.num_devices, len;
        grpc_slice s;
        TFRDV_GRPC__ADD(g, status_calls, 1);
        if (!nd) {
            memset(&def, 0, sizeof def);
            snprintf(def.name, sizeof def.name, "%s/device:CPU:0", tfrdv_mgr_worker_name(g->mgr));
            memcpy(def.type, "CPU", 4);
            def.incarnation = tfrdv_mgr_incarnation(g->mgr);
            def.memory_limit = 268435456;
            d = &def;
            nd = 1;
        }
        len = tfrdv_grpc_encode_status_response(d, nd, 0, 0);
        s = grpc_slice_malloc(len);
        tfrdv_grpc_encode_status_response(d, nd, GRPC_SLICE_START_PTR(s), len);
        bb = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
    } else {
        if (x->method != TFRDV_GRPC__M_MARK) TFRDV_GRPC__ADD(g, session_calls, 1);
        if (x->method == TFRDV_GRPC__M_MARK) { /* MarkRecvFinishedRequest {1: request_id} */
            tfrdv_str stack[4];
            size_t n, heap;
            grpc_slice flat;
            int has_flat;
            tfrdv_str* segs = tfrdv_grpc__segs(g, x->payload, stack, 4, &n, &flat, &has_flat, &heap);
            if (segs) {
                tfrdv_grpc__rd r;
                uint32_t f;
                int wt;
                uint64_t len, v, id = 0, not_taken = 0;
                tfrdv_status st;
                tfrdv_grpc__rd_init(&r, segs, n);
                while (r.pos < r.end && code == TFRDV_OK) {
                    if ((code = tfrdv_grpc__rd_tag(&r, "MarkRecvFinishedRequest", &f, &wt, &len, &st)) != TFRDV_OK) break;
                    if (f == 1) {
                        if ((code = tfrdv_grpc__rd_uvarint(&r, "MarkRecvFinishedRequest", f, wt, &v, &st)) == TFRDV_OK) id = v;
                    } else if (f == TFRDV_GRPC__NOT_TAKEN_FIELD) { /* tfrdv's: the answer was not taken */
                        if ((code = tfrdv_grpc__rd_uvarint(&r, "MarkRecvFinishedRequest", f, wt, &v, &st)) == TFRDV_OK) not_taken = v != 0;
                    } else {
                        code = tfrdv_grpc__rd_skip(&r, "MarkRecvFinishedRequest", f, wt, len, &st);
                    }
                }
                if (code != TFRDV_OK) snprintf(msg, sizeof msg, "%s", st.msg);
                else TFRDV_GRPC__ADD(g, acks_received, 1);
                if (code == TFRDV_OK && id) tfrdv_mgr_ack(g->mgr, (int64_t)id);
                if (code == TFRDV_OK && id && (g->cfg.require_ack || g->cfg.receipts != TFRDV_OFF))
                    tfrdv_grpc__rc_receipt(g, (int64_t)id, (int)not_taken);
                if (heap) tfrdv_grpc__free(&g->a, segs, heap * sizeof *segs);
                if (has_flat) grpc_slice_unref(flat);
            }
        }
        if (code == TFRDV_OK) bb = grpc_raw_byte_buffer_create(0, 0); /* empty reply */
    }
    tfrdv_grpc__reply(g, x, bb, code, msg, 0, 1);
}

TFRDV_GRPC__PRIVATE void tfrdv_grpc__post(tfrdv_grpc* g, int method) {
    tfrdv_grpc__sctx* x;
    size_t size = tfrdv_grpc__sctx_size(g, method);
    grpc_call_error err;
    pthread_mutex_lock(&g->mu);
    if (g->srv_shutting) { pthread_mutex_unlock(&g->mu); return; }
    g->srv_live++;
    pthread_mutex_unlock(&g->mu);
    x = (tfrdv_grpc__sctx*)tfrdv_grpc__alloc(&g->a, size);
    if (!x) {
        tfrdv_grpc__log(g, 3, "tfrdv_grpc: out of memory posting a request for %s", method < TFRDV_GRPC__NMETHODS ? tfrdv_grpc__paths[method] : "(generic)");
        pthread_mutex_lock(&g->mu);
        g->srv_live--;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        return;
    }
    memset(x, 0, sizeof *x);
    x->g = g;
    x->method = method;
    x->accept.fn = method == TFRDV_GRPC__M_RECV ? tfrdv_grpc__recv_accept : tfrdv_grpc__simple_accept;
    x->close.fn = tfrdv_grpc__close_done;
    x->send.fn = tfrdv_grpc__send_done;
    grpc_metadata_array_init(&x->md);
    TFRDV_GRPC__ARM(&x->accept);
    if (method == TFRDV_GRPC__M_GENERIC) {
        grpc_call_details_init(&x->details);
        err = grpc_server_request_call(g->server, &x->gc, &x->details, &x->md, g->cq, g->cq, &x->accept);
    } else {
        err = grpc_server_request_registered_call(g->server, g->rm[method], &x->gc, &x->deadline, &x->md, &x->payload, g->cq,
                                                  g->cq, &x->accept);
    }
    if (err != GRPC_CALL_OK) {
        tfrdv_grpc__log(g, 3, "tfrdv_grpc: request_call failed: %s", grpc_call_error_to_string(err));
        tfrdv_grpc__sctx_free(g, x);
    }
}

TFRDV_GRPC__PRIVATE void tfrdv_grpc__shutdown_done(tfrdv_grpc* g, tfrdv_grpc__tag* tag, int ok) {
    (void)tag;
    (void)ok;
    pthread_mutex_lock(&g->mu);
    g->shutdown_done = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

TFRDV_API tfrdv_code tfrdv_grpc_attach(tfrdv_grpc* g, tfrdv_mgr* mgr, tfrdv_status* st) {
    grpc_arg args[3];
    grpc_channel_args ca;
    grpc_server_credentials* creds;
    grpc_server* srv;
    int i, port;
    if (!g || !mgr) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_grpc_attach: NULL argument");
    pthread_mutex_lock(&g->mu);
    if (g->mgr || g->shut) {
        pthread_mutex_unlock(&g->mu);
        return tfrdv_grpc__err(st, TFRDV_FAILED_PRECONDITION, "tfrdv_grpc_attach: a manager is already attached or the transport is shut down");
    }
    tfrdv_mgr_ref(mgr);
    g->mgr = mgr;
    g->next_expire_ns = 0;
    pthread_mutex_unlock(&g->mu);
    if (!g->cfg.listen_address) { tfrdv_grpc__ok(st); return TFRDV_OK; }
    memset(args, 0, sizeof args);
    /* requests are small (a key, a session definition): 64 MiB bounds what a hostile client can
       make gRPC buffer; replies are bounded by max_message_bytes */
    args[0].type = GRPC_ARG_INTEGER; args[0].key = (char*)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH; args[0].value.integer = 64 << 20;
    args[1].type = GRPC_ARG_INTEGER; args[1].key = (char*)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH; args[1].value.integer = -1;
    /* a busy port is an error, as for TensorFlow's server: gRPC's default SO_REUSEPORT would let a
       second worker bind the same port and split new connections between the two */
    args[2].type = GRPC_ARG_INTEGER; args[2].key = (char*)GRPC_ARG_ALLOW_REUSEPORT; args[2].value.integer = 0;
    ca.num_args = 3;
    ca.args = args;
    srv = grpc_server_create(&ca, NULL);
    for (i = 0; i < TFRDV_GRPC__NMETHODS; i++)
        g->rm[i] = grpc_server_register_method(srv, tfrdv_grpc__paths[i], NULL, GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    grpc_server_register_completion_queue(srv, g->cq, NULL);
    if (g->cfg.pem_private_key && g->cfg.pem_cert_chain) {
        grpc_ssl_pem_key_cert_pair pair;
        pair.private_key = g->cfg.pem_private_key;
        pair.cert_chain = g->cfg.pem_cert_chain;
        creds = grpc_ssl_server_credentials_create_ex(
            g->cfg.require_client_cert ? g->cfg.pem_root_certs : NULL, &pair, 1,
            g->cfg.require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
            NULL);
    } else {
        creds = grpc_insecure_server_credentials_create();
    }
    port = creds ? grpc_server_add_http2_port(srv, g->cfg.listen_address, creds) : 0;
    if (creds) grpc_server_credentials_release(creds);
    if (!port) {
        grpc_server_destroy(srv);
        pthread_mutex_lock(&g->mu);
        g->mgr = 0;
        pthread_mutex_unlock(&g->mu);
        tfrdv_mgr_unref(mgr);
        return tfrdv_grpc__err(st, TFRDV_UNAVAILABLE, "tfrdv_grpc: cannot listen on %s%s", g->cfg.listen_address,
                               creds ? " (the port is in use, or the address is not one of this host)" : " (bad TLS material)");
    }
    grpc_server_start(srv);
    pthread_mutex_lock(&g->mu);
    g->server = srv;
    g->port = port;
    pthread_mutex_unlock(&g->mu);
    for (i = 0; i < g->cfg.recv_tensor_queue_depth; i++) tfrdv_grpc__post(g, TFRDV_GRPC__M_RECV);
    for (i = 0; i < 4; i++) {
        int m;
        for (m = TFRDV_GRPC__M_STATUS; m <= TFRDV_GRPC__M_GENERIC; m++) tfrdv_grpc__post(g, m);
    }
    tfrdv_grpc__ok(st);
    return TFRDV_OK;
}
TFRDV_API int tfrdv_grpc_port(const tfrdv_grpc* g) { return g ? g->port : 0; }

/* >>transport: life cycle -------------------------------------------------------------------- */
TFRDV_API tfrdv_grpc_config tfrdv_grpc_config_init(void) {
    tfrdv_grpc_config c;
    memset(&c, 0, sizeof c);
    return c;
}
/* CONFIG CHECKS: INVALID_ARGUMENT naming the first bad field */
TFRDV_GRPC__PRIVATE tfrdv_code tfrdv_grpc__check_config(const tfrdv_grpc_config* c, tfrdv_status* st) {
    const char* why;
    size_t i;
#define TFRDV_GRPC__BAD(...) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_grpc_create: " __VA_ARGS__)
    if (c->num_threads < -1 || c->num_threads > 256) TFRDV_GRPC__BAD("num_threads %d (-1: none, 0: one, at most 256)", c->num_threads);
    if (c->recv_tensor_queue_depth < 0 || c->recv_tensor_queue_depth > 65536)
        TFRDV_GRPC__BAD("recv_tensor_queue_depth %d (0: 256, at most 65536)", c->recv_tensor_queue_depth);
    if (c->max_message_bytes > TFRDV_GRPC__MAX_DEFAULT)
        TFRDV_GRPC__BAD("max_message_bytes %llu above 2^31 - 1 (gRPC's message limit)", (unsigned long long)c->max_message_bytes);
    if (c->max_key_len > ((size_t)16 << 20)) TFRDV_GRPC__BAD("max_key_len %zu above 16 MiB", c->max_key_len);
    if (c->require_ack != 0 && c->require_ack != 1) TFRDV_GRPC__BAD("require_ack %d (0 or 1)", c->require_ack);
    if (c->receipt_ttl_ns < 0) TFRDV_GRPC__BAD("receipt_ttl_ns %lld is negative (0: the default)", (long long)c->receipt_ttl_ns);
    if (c->expire_interval_ns < 0) TFRDV_GRPC__BAD("expire_interval_ns %lld is negative (0: 20 ms)", (long long)c->expire_interval_ns);
    if (c->recv_timeout_ns < 0 && c->recv_timeout_ns != TFRDV_OFF)
        TFRDV_GRPC__BAD("recv_timeout_ns %lld is negative (0: 10 min, TFRDV_OFF: none)", (long long)c->recv_timeout_ns);
    if (c->serve_deadline_margin_ns < 0 && c->serve_deadline_margin_ns != TFRDV_OFF)
        TFRDV_GRPC__BAD("serve_deadline_margin_ns %lld is negative (0: 20 ms, TFRDV_OFF: none)", (long long)c->serve_deadline_margin_ns);
    if (c->listen_address && (why = tfrdv_grpc__addr_why(c->listen_address, 1)) != 0) {
        char an[300];
        (void)tfrdv_escape(an, sizeof an, c->listen_address, strlen(c->listen_address));
        TFRDV_GRPC__BAD("listen_address \"%.200s\": %s", an, why);
    }
    if (c->num_workers && !c->workers) TFRDV_GRPC__BAD("num_workers %zu with workers NULL", c->num_workers);
    for (i = 0; i < c->num_workers; i++) {
        char where[64];
        snprintf(where, sizeof where, "tfrdv_grpc_create: workers[%zu]", i);
        if (tfrdv_grpc__check_worker(c->workers[i].name, c->workers[i].address, where, st) != TFRDV_OK) return TFRDV_INVALID_ARGUMENT;
    }
    if (c->num_devices && !c->devices) TFRDV_GRPC__BAD("num_devices %zu with devices NULL", c->num_devices);
    for (i = 0; i < c->num_devices; i++) {
        const tfrdv_grpc_device* d = &c->devices[i];
        tfrdv_device_name dn;
        char dname[300];
        if (!memchr(d->name, 0, sizeof d->name) || !memchr(d->type, 0, sizeof d->type))
            TFRDV_GRPC__BAD("devices[%zu].%s is not NUL-terminated", i, memchr(d->name, 0, sizeof d->name) ? "type" : "name");
        (void)tfrdv_escape(dname, sizeof dname, d->name, strlen(d->name));
        if (tfrdv_device_parse(d->name, strlen(d->name), &dn, 0) != TFRDV_OK || !dn.has_job || !dn.has_replica || !dn.has_task ||
            !dn.has_type || !dn.has_id)
            TFRDV_GRPC__BAD("devices[%zu].name \"%.200s\" is not a full device name (/job:J/replica:R/task:T/device:TYPE:ID)", i, dname);
    }
    if (!c->pem_private_key != !c->pem_cert_chain)
        TFRDV_GRPC__BAD("%s without %s (TLS needs both)", c->pem_private_key ? "pem_private_key" : "pem_cert_chain",
                        c->pem_private_key ? "pem_cert_chain" : "pem_private_key");
    if (c->require_client_cert != 0 && c->require_client_cert != 1) TFRDV_GRPC__BAD("require_client_cert %d (0 or 1)", c->require_client_cert);
    if (c->require_client_cert && (!c->pem_root_certs || !c->pem_private_key))
        TFRDV_GRPC__BAD("require_client_cert without %s", !c->pem_root_certs ? "pem_root_certs (the clients' CA)"
                                                          : "pem_private_key and pem_cert_chain (the server's own)");
    if (c->ssl_target_name_override && !c->pem_root_certs)
        TFRDV_GRPC__BAD("ssl_target_name_override without pem_root_certs (it names the server certificate: TLS is off)");
#undef TFRDV_GRPC__BAD
    return TFRDV_OK;
}
TFRDV_API tfrdv_code tfrdv_grpc_create(const tfrdv_grpc_config* cfg, tfrdv_grpc** out,
                                       tfrdv_status* st) {
    tfrdv_grpc* g;
    tfrdv_allocator a;
    size_t i;
    int ok = 1;
    if (out) *out = 0;
    if (!cfg || !out) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_grpc_create: NULL argument");
    a = cfg->hooks.allocator;
    if (!a.alloc_fn != !a.free_fn) return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_grpc_create: allocator needs both functions");
    if (cfg->receipts != 0 && cfg->receipts != 1 && cfg->receipts != TFRDV_OFF)
        return tfrdv_grpc__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_grpc_create: receipts is %d (0 or 1: on, TFRDV_OFF: off)", cfg->receipts);
    if (tfrdv_grpc__check_config(cfg, st) != TFRDV_OK) return TFRDV_INVALID_ARGUMENT;
    g = (tfrdv_grpc*)tfrdv_grpc__alloc(&a, sizeof *g);
    if (!g) return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_grpc_create: out of memory");
    memset(g, 0, sizeof *g);
    g->a = a;
    g->cfg = *cfg;
    g->refs = 1;
    if (g->cfg.num_threads == 0) g->cfg.num_threads = 1;
    if (g->cfg.recv_tensor_queue_depth == 0) g->cfg.recv_tensor_queue_depth = 256;
    if (!g->cfg.max_message_bytes) g->cfg.max_message_bytes = TFRDV_GRPC__MAX_DEFAULT;
    if (!g->cfg.max_key_len) g->cfg.max_key_len = 4096;
    if (g->cfg.expire_interval_ns <= 0) g->cfg.expire_interval_ns = 20000000;
    if (g->cfg.receipt_ttl_ns <= 0) g->cfg.receipt_ttl_ns = TFRDV_GRPC_RECEIPT_TTL_NS;
    if (g->cfg.serve_deadline_margin_ns == 0) g->cfg.serve_deadline_margin_ns = TFRDV_GRPC_SERVE_MARGIN_NS;
    if (g->cfg.recv_timeout_ns == 0) g->cfg.recv_timeout_ns = TFRDV_GRPC_RECV_TIMEOUT_NS;
    /* owned copies */
    g->cfg.listen_address = tfrdv_grpc__strdup(&a, cfg->listen_address);
    g->cfg.pem_root_certs = tfrdv_grpc__strdup(&a, cfg->pem_root_certs);
    g->cfg.pem_private_key = tfrdv_grpc__strdup(&a, cfg->pem_private_key);
    g->cfg.pem_cert_chain = tfrdv_grpc__strdup(&a, cfg->pem_cert_chain);
    g->cfg.ssl_target_name_override = tfrdv_grpc__strdup(&a, cfg->ssl_target_name_override);
    g->cfg.devices = 0;
    g->cfg.num_devices = 0;
    g->cfg.workers = 0;
    g->cfg.num_workers = 0;
    ok = (!cfg->listen_address || g->cfg.listen_address) && (!cfg->pem_root_certs || g->cfg.pem_root_certs) &&
         (!cfg->pem_private_key || g->cfg.pem_private_key) && (!cfg->pem_cert_chain || g->cfg.pem_cert_chain) &&
         (!cfg->ssl_target_name_override || g->cfg.ssl_target_name_override);
    if (ok && cfg->num_devices) {
        tfrdv_grpc_device* d = (tfrdv_grpc_device*)tfrdv_grpc__alloc(&a, cfg->num_devices * sizeof *d);
        if (d) {
            memcpy(d, cfg->devices, cfg->num_devices * sizeof *d);
            g->cfg.devices = d;
            g->cfg.num_devices = cfg->num_devices;
        } else {
            ok = 0;
        }
    }
    if (pthread_mutex_init(&g->mu, NULL) != 0) {
        tfrdv_grpc__free(&a, g, sizeof *g);
        return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_grpc_create: mutex");
    }
    pthread_cond_init(&g->cv, NULL);
    for (i = 0; ok && i < cfg->num_workers; i++)
        ok = tfrdv_grpc_set_worker(g, cfg->workers[i].name, cfg->workers[i].address, 0) == TFRDV_OK;
    if (ok) {
        g->cm_free = (tfrdv_cancel_mgr**)tfrdv_grpc__alloc(&a, (size_t)g->cfg.recv_tensor_queue_depth * sizeof *g->cm_free);
        ok = g->cm_free != 0;
        if (ok) g->cap_cm_free = (size_t)g->cfg.recv_tensor_queue_depth;
    }
    if (ok && g->cfg.num_threads > 0) {
        g->threads = (pthread_t*)tfrdv_grpc__alloc(&a, (size_t)g->cfg.num_threads * sizeof *g->threads);
        ok = g->threads != 0;
        if (ok) g->cap_threads = g->cfg.num_threads;
    }
    if (!ok) {
        g->closed = 1;
        tfrdv_grpc__unref(g);
        return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_grpc_create: out of memory");
    }
    grpc_init();
    g->cq = grpc_completion_queue_create_for_next(NULL);
    g->shutdown_tag.fn = tfrdv_grpc__shutdown_done;
    for (i = 0; i < (size_t)(g->cfg.num_threads > 0 ? g->cfg.num_threads : 0); i++) {
        if (pthread_create(&g->threads[i], NULL, tfrdv_grpc__thread, g) != 0) break;
        g->nthreads++;
    }
    if (g->cfg.num_threads > 0 && g->nthreads == 0) {
        grpc_completion_queue_shutdown(g->cq);
        while (grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN) {}
        grpc_completion_queue_destroy(g->cq);
        grpc_shutdown();
        g->closed = 1;
        tfrdv_grpc__unref(g);
        return tfrdv_grpc__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_grpc_create: cannot start a thread");
    }
    *out = g;
    tfrdv_grpc__ok(st);
    return TFRDV_OK;
}

TFRDV_GRPC__PRIVATE int tfrdv_grpc__quiet(tfrdv_grpc* g, void* arg) {
    (void)arg;
    return (!g->server || g->shutdown_done) && g->srv_live == 0 && g->client_live == 0;
}
TFRDV_GRPC__PRIVATE int tfrdv_grpc__zc_done(tfrdv_grpc* g, void* arg) {
    (void)arg;
    return g->zc_live == 0;
}
TFRDV_GRPC__PRIVATE void* tfrdv_grpc__reaper(void* arg) {
    tfrdv_grpc__shutdown((tfrdv_grpc*)arg);
    return 0;
}
TFRDV_API void tfrdv_grpc_destroy(tfrdv_grpc* g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    if (g->shut) { pthread_mutex_unlock(&g->mu); return; }
    g->shut = 1; /* fetches fail UNAVAILABLE from here on */
    if (tfrdv_grpc__handling == g && g->nthreads == 0) g->deferred = 1;
    pthread_mutex_unlock(&g->mu);
    if (tfrdv_grpc__handling != g) {
        tfrdv_grpc__shutdown(g);
    } else if (g->nthreads > 0) { /* from a callback on a completion-queue thread, which the
                                     shutdown joins: a thread of its own does it */
        pthread_attr_t at;
        pthread_t th;
        int rc = pthread_attr_init(&at);
        if (rc == 0) {
            (void)pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            rc = pthread_create(&th, &at, tfrdv_grpc__reaper, g);
            pthread_attr_destroy(&at);
        }
        if (rc != 0)
            tfrdv_grpc__log(g, 3, "tfrdv_grpc_destroy from a callback: no thread for the shutdown (%s): the transport stays up, refusing fetches",
                            strerror(rc));
    }
}
/* tfrdv_grpc_destroy's work, on a thread that handles no completion of g */
TFRDV_GRPC__PRIVATE void tfrdv_grpc__shutdown(tfrdv_grpc* g) {
    grpc_server* srv;
    tfrdv_grpc__ccall* c;
    tfrdv_mgr* mgr;
    size_t i;
    int n;
    pthread_mutex_lock(&g->mu);
    g->srv_shutting = 1;
    srv = g->server;
    pthread_mutex_unlock(&g->mu);
    if (srv) {
        TFRDV_GRPC__ARM(&g->shutdown_tag);
        grpc_server_shutdown_and_notify(srv, g->cq, &g->shutdown_tag);
        grpc_server_cancel_all_calls(srv); /* RecvTensor calls may wait forever: cancel them now */
    }
    tfrdv_grpc__flush(g, 1); /* taken receipts waiting for a request: as calls, while channels live */
    pthread_mutex_lock(&g->mu);
    /* receipts in flight are not cancelled (a lost not-taken receipt would lose its value): they
       end by their deadline at the latest (10 s, 1 s for those started from here on) */
    for (c = g->live; c; c = c->next) /* their receivers learn why (gRPC's own text: "CANCELLED") */
        if (c->kind != TFRDV_GRPC__C_MARK)
            grpc_call_cancel_with_status(c->gc, GRPC_STATUS_CANCELLED,
                                         "tfrdv_grpc_destroy: the transport was destroyed while this call was in flight", NULL);
    tfrdv_grpc__wait_locked(g, tfrdv_grpc__quiet, 0);
    mgr = g->mgr;
    pthread_mutex_unlock(&g->mu);
    if (srv) grpc_server_destroy(srv);
    for (i = 0; i < g->nch; i++) grpc_channel_destroy(g->ch[i]->ch);
    /* gRPC drops the slices of cancelled replies later, on its own threads (a stream stalled by a
       peer that never reads is freed after the server closed its connection): each holds a value
       reference, released before destroy returns, never after */
    pthread_mutex_lock(&g->mu);
    tfrdv_grpc__wait_locked(g, tfrdv_grpc__zc_done, 0);
    pthread_mutex_unlock(&g->mu);
    grpc_completion_queue_shutdown(g->cq);
    for (n = 0; n < g->nthreads; n++) pthread_join(g->threads[n], NULL);
    if (!g->nthreads) while (tfrdv_grpc__next(g, gpr_inf_future(GPR_CLOCK_MONOTONIC)) >= 0) {}
    pthread_mutex_lock(&g->mu);
    g->closed = 1;
    g->mgr = 0;
    g->server = 0;
    pthread_mutex_unlock(&g->mu);
    grpc_completion_queue_destroy(g->cq);
    g->cq = 0;
    while (g->ncm_free) tfrdv_cancel_mgr_destroy(g->cm_free[--g->ncm_free]);
    { /* answers still waiting for their receipts: delivered as far as anyone can tell */
        tfrdv_grpc__rcpt* due = 0;
        pthread_mutex_lock(&g->mu);
        tfrdv_grpc__rc_due_locked(g, INT64_MAX, &due);
        pthread_mutex_unlock(&g->mu);
        tfrdv_grpc__rc_run_due(g, due);
    }
    if (mgr) tfrdv_mgr_unref(mgr);
    grpc_shutdown();
    tfrdv_grpc__unref(g);
}

TFRDV_API void tfrdv_grpc_get_stats(tfrdv_grpc* g, tfrdv_grpc_stats* out) {
    if (!g || !out) return;
    {
        const uint64_t* src = (const uint64_t*)(const void*)&g->stats; /* all uint64_t, updated atomically */
        uint64_t* dst = (uint64_t*)(void*)out;
        size_t i;
        for (i = 0; i < sizeof *out / sizeof(uint64_t); i++) dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    }
    pthread_mutex_lock(&g->mu);
    out->server_requests_posted = (uint64_t)g->srv_live - out->server_calls_live;
    pthread_mutex_unlock(&g->mu);
}
#endif /* TFRDV_GRPC_NO_TRANSPORT */

#ifdef __cplusplus
}
#endif
#undef TFRDV_GRPC__PRIVATE
#undef TFRDV_GRPC__MAX_DEFAULT
#undef TFRDV_GRPC__NDT
#undef TFRDV_GRPC__OF
#undef TFRDV_GRPC__ADD
#undef TFRDV_GRPC__SUB
#undef TFRDV_GRPC__ARM
#undef TFRDV_GRPC__KEY_INLINE
#undef TFRDV_GRPC__RESTARTED_LEN
#undef TFRDV_GRPC__PEER_DEVICES_MAX
#undef TFRDV_GRPC__POLL_MAX
#endif /* TFRDV_GRPC_IMPLEMENTATION */
