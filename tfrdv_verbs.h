/* tfrdv_verbs.h - v0.6.0 - RDMA verbs transport for tfrdv - MIT or public domain (see tfrdv.h)

   USAGE
     Include tfrdv.h first. In exactly ONE .c or .cpp file:
         #define TFRDV_VERBS_IMPLEMENTATION
         #include "tfrdv.h"
         #include "tfrdv_verbs.h"
     The implementation includes <infiniband/verbs.h> (libibverbs-dev) and is Linux-only; the
     declarations below need neither. That translation unit must see POSIX declarations: define
     TFRDV_IMPLEMENTATION there too, or _GNU_SOURCE / _POSIX_C_SOURCE=200809L before any include.
     libibverbs is loaded at run time with dlopen("libibverbs.so.1"): binaries build and run
     without it, and tfrdv_verbs_create() then fails UNAVAILABLE naming what is missing.

   WHAT IT DOES
     Fills a tfrdv_transport with RDMA verbs: one reliable-connected (RC) queue pair per peer
     worker; the receiver sends a TENSOR REQUEST carrying the address, rkey and capacity of a
     buffer it allocated with its alloc hook (tfrdv_call_alloc_value) and registered; the sender
     answers from its tables (tfrdv_mgr_serve) and RDMA-WRITEs the tensor WITH IMMEDIATE straight
     into that buffer. The receiver keeps the last dtype/shape seen per key; when a tensor's dtype
     or shape changed (or on the first fetch of a key) the sender answers METADATA and the
     receiver re-allocates and sends a RE-REQUEST. Errors of the serving side travel back as
     ERROR messages. A METADATA answer announcing more than 2^40 bytes (tfrdv_tcp.h's default
     max_tensor_bytes) fails that receive with RESOURCE_EXHAUSTED naming the peer, the size and
     the limit, before anything is allocated or remembered (the connection stays up). When the
     alloc hook refuses the remembered shape of a key, the REQUEST goes without a buffer (the
     answer then says the current shape) instead of failing.

   CONTROL PROTOCOL (little-endian, explicit field by field; version 1)
     Every control message is an RDMA WRITE WITH IMMEDIATE (immediate 0x80000000) into the next
     slot of the peer's control ring (address/rkey/slot count exchanged at connection set-up).
     Header, 16 bytes: u8 version, u8 type, u16 zero, u32 credits returned, u32 request slot
     (index | generation << 16), u32 body length. Bodies:
       1 REQUEST     i64 step, i64 request id, u64 addr, u32 rkey, u32 flags (1 buffer, 2 meta),
                     u64 capacity, [meta], u32 key length, key bytes
       2 RE_REQUEST  u64 addr, u32 rkey, u32 zero, u64 capacity
       3 META        meta = i32 dtype, u32 rank (<= 254), u64 bytes, u32 is_dead, rank x i64 dims
       4 ERROR       u32 code (1..16) | status detail << 8 (TFRDV_DETAIL_*, 0..255), u32 length
                     (< 256), message bytes
       5 CANCEL, 6 CREDIT, 7 PING, 8 PONG, 9 TAKEN (slot 0): no body
     Credits: a side writes into the peer's ring only while it holds a credit (one per slot); the
     peer returns credits in every message header once it processed the slots, and with an explicit
     CREDIT message when half the ring is waiting to be returned. The last credit is reserved for
     CREDIT messages, so two busy peers can never wedge each other. Tensor bytes are written with
     immediate (request slot | generation << 16) and consume one of the receive entries the
     receiver posted for that request, so data needs no credits of its own.

   BOOTSTRAP INFO (little-endian; version 2)
     Over TCP each message is u32 length, then the info; with an exchange callback the info alone.
     The connecting side sends its info; the accepting side answers with its own, or with a yield
     (u32 0: it is connecting to the caller at this moment, see CONNECTIONS); after an answer the
     connecting side moves its QP to ready-to-receive and sends READY (u32 0); the accepting side
     writes nothing over RDMA before READY. The info:
       u32 magic 0x56524654 ("TFRV"), u16 version (2), u16 worker name length (1..255), u32 QP
       number, u32 PSN (both 24 bits), u16 LID, u16 zero, 16 bytes GID, u32 MTU (256..4096, a
       power of two), u64 control ring address, u32 its rkey, u32 slots (4..65536), u32 slot size
       (256..1 MiB), u32 max_requests (1..32768), u64 incarnation (the sender's attached
       manager's, 0: none attached), then the worker name (no NUL).
     Anything else is refused naming the defect (tfrdv_verbs_info_decode): another magic, a length
     that does not match, a field out of range, and another version ("protocol version 1; this
     side speaks 2": version 1, tfrdv_verbs.h 0.5, had no incarnation): the exchange is dropped
     and logged, the connecting side fails UNAVAILABLE naming it.

   CONNECTIONS
     Which worker is where: tfrdv_verbs_config.workers (worker name -> the address of its
     bootstrap listener, "host:port" or "[v6]:port", e.g. TF_CONFIG's table from
     tfrdv_cluster_parse) and, for names not in it, the resolve callback. The first fetch from a
     worker that is not connected connects to it on demand: progress makes a new QP and runs the
     non-blocking bootstrap exchange (a reconnect of a record never connected, see LIFE CYCLE OF A
     PEER), the fetch waits for it (its deadline applies) and goes on on the new connection. A
     failed attempt (refused, no listener yet) fails the fetches that waited UNAVAILABLE naming the
     worker and its address, and opens the back-off window (reconnect_backoff_ns). A worker neither
     connected nor known to the table or resolve is NOT_FOUND "No worker known as ...".
     tfrdv_verbs_connect(v, peer_worker, host, port) connects now and blocks (host NULL: the
     table's address); optional with a table. Over TCP it is a small exchange with the peer's
     listener (tfrdv_verbs_config.listen_address; NULL, the default, opens none: a side that only
     fetches needs none); the accepting side answers from its progress loop. Each side sends its
     BOOTSTRAP INFO; the path MTU is the minimum of both. The TCP connection stays open: its close
     tells at once that the peer process died. One connection serves both directions. When two
     workers connect to each other at the same moment (both fetch on demand, or call
     tfrdv_verbs_connect), the connection made by the worker with the smaller name goes on: that
     worker's listener answers the other's hello with a yield, and the other's calls (or its
     tfrdv_verbs_connect) wait for the connection it accepts (up to connect_timeout_ns; then it
     tries again). No call fails and no connection breaks.
     Out-of-band instead: set tfrdv_verbs_config.exchange; tfrdv_verbs_connect then calls it with
     the local encoded info and expects the peer's (both sides call connect for each other); no
     listener, no connect on demand.
     Bootstrap exchanges never block progress: accepted sockets are non-blocking, each exchange
     is a small state machine (receive the hello, answer) driven by epoll in progress, and the
     whole exchange must finish within connect_timeout_ns of the accept (one deadline, not one
     per recv: a silent or byte-dripping peer is dropped when it passes, while the exchanges of
     other peers and all RDMA traffic go on). At most 128 exchanges are under way at once (more
     connections are closed at once). A peer costs no registration before its hello arrived.
     tfrdv_verbs_connect blocks its caller, also within one connect_timeout_ns deadline. A table
     address with a host name is resolved (getaddrinfo) by progress when it first connects.

   PEER INCARNATION
     tfrdv_mgr_peer_incarnation(mgr, worker, timeout_ns) over this transport answers the
     incarnation the worker's bootstrap info carried: at once when connected; otherwise it
     connects on demand (as a fetch does) and waits, trying again after each back-off window,
     until timeout_ns (< 0: no limit). NOT_FOUND: no connection and no address for the worker;
     DEADLINE_EXCEEDED (UNAVAILABLE with timeout 0): it did not answer, with the last error;
     UNAVAILABLE: it had no manager attached when it connected (attach before connecting), or a
     broken connection this side cannot reconnect; every message names the worker. A peer that
     restarted connects with its new incarnation (the new bootstrap replaces the record). Blocking:
     in a callback of this transport's progress it fails FAILED_PRECONDITION at once.

   SECURITY: NO AUTHENTICATION
     Neither the bootstrap nor the RDMA traffic is encrypted or authenticated. Whoever reaches the
     listener (listen_address) can complete a bootstrap exchange under any worker name, get a
     queue pair, and then request any tensor of the attached manager by key (the keys of a
     TensorFlow graph are easy to guess) and so take values from the tables (a fetch consumes the
     value: the real receiver then waits or times out); claiming the name of a worker this side
     fetches from before the real one connected (a name already connected is refused), it
     answers those fetches with bytes of its choosing. Its RDMA writes land only in the buffers
     this side advertised to it (rkeys are per buffer; a write outside them is a remote access
     error that breaks that connection). Hostile input is bounded (128 exchanges under way, each within
     connect_timeout_ns, every length and count checked before anything is allocated) but never
     trusted to be who it claims. The worker-name check: the side that connects checks that the
     info's worker name is the worker it meant (else it fails "connected to X but it says it is
     Y"): that catches a stale or wrong table, not an attacker; the accepting side
     takes the name it is told. So the listener is opt-in (listen_address NULL by default: no
     port at all; 0.5 listened on 0.0.0.0): give it an address of a private RDMA network
     ("10.0.0.5:18600"), not "0.0.0.0", and keep that network to hosts you trust (RoCE: a
     separate VLAN or fabric; InfiniBand: partitions). Anyone on that fabric can also address
     queue pairs directly: RDMA itself has no authentication either. Bytes a peer chose (its worker
     name, ERROR messages, its bootstrap farewell) reach statuses and logs escaped (tfrdv_escape).

   LIFE CYCLE OF A PEER
     connected -> broken (its TCP connection closed, a work completion failed, keep-alive
     silence, a protocol error): every call on it fails UNAVAILABLE naming the cause, serves are
     withdrawn, its QP is destroyed at once -> released: once its last call, serve and write has
     finished (progress checks), its rings, CQ, registrations and slot tables are freed. The
     record itself is freed too, unless this side can reconnect it: the side that called
     tfrdv_verbs_connect (over TCP) or has the peer's address from the table keeps a record of a
     few hundred bytes (name, address, status) per peer worker. So memory stays bounded by the number of distinct peer workers, not by how
     often they connected (stats.peers counts records).
     Reconnect: a call to a broken peer that this side connected starts a reconnect from progress
     (a new QP and a non-blocking bootstrap exchange to the same address) and waits for it (its
     deadline still applies); when it succeeds the call proceeds on the new connection; when it
     fails every waiting call fails UNAVAILABLE with the reason, and for reconnect_backoff_ns
     (default 100 ms) later calls fail UNAVAILABLE at once ("reconnect backoff: next attempt in N
     ms"); each further failure in a row doubles that window up to reconnect_backoff_max_ns
     (default 10 s); a success resets it. Calls made while the record waits for progress to start
     the attempt, or during it, wait with the others. Without progress running nothing happens:
     the calls wait for their deadline. A side that only accepted the connection knows the peer's
     address only from its table (or resolve): without it, its calls to a broken peer fail
     UNAVAILABLE until the peer reconnects (its next call does that) or either side calls
     tfrdv_verbs_connect again. A first connect on demand counts in neither stats.reconnects nor
     (when it succeeds) anywhere else; its failures count in stats.reconnect_failures. With an exchange
     callback, or reconnect_backoff_ns TFRDV_OFF, there is no automatic reconnect: call
     tfrdv_verbs_connect again (on both sides with a callback). A reconnect reaches the peer's
     listener, which accepts it once it has seen the old connection close.

   COMPILE-TIME OPTIONS (define before the implementation)
     TFRDV_VERBS_PROTOCOL_ONLY   compile only the device-free pieces (codec, handshake info,
                                 credits, caches): no <infiniband/verbs.h>; for tests and fuzzing

   PROGRESS AND THREADS
     num_threads 0 or more (0 is the default): the companion starts ONE progress thread at create
     (more are not used), joined by tfrdv_verbs_destroy; it polls the completion queues, spinning
     spin_ns after activity (TFRDV_OFF: never), then sleeps on the completion channel and the
     sockets (epoll). num_threads -1: no thread; the host calls tfrdv_verbs_poll(v, timeout_ns)
     (0 = poll once), or sleeps on tfrdv_verbs_fd(v) (readable when there is work) between calls,
     waking at least every keepalive_ns / 2 (deadlines are checked there, at most every 1 ms).
     Completions, serving, deadlines, the listener, bootstrap exchanges (non-blocking, see
     CONNECTIONS), connects on demand, releasing broken peers and reconnects all happen in
     progress. attach, connect and fetches start no thread; libibverbs' providers may (rxe and
     the usual NIC providers start none on open). Measured (/proc/self/task, the stand-in
     libibverbs of make test): +1 thread at create with the default, +0 with num_threads -1, +0
     at attach; destroy returns to the count before create.

   ERRORS, EXACTLY ONCE
     Every started call finishes exactly once: OK, an ERROR sent by the serving side (its code and
     status detail, e.g. TFRDV_DETAIL_WORKER_RESTARTED for a key with another incarnation),
     CANCELLED (cancel_call), DEADLINE_EXCEEDED (tfrdv_call_deadline passed; enforced here, since a
     dead Soft-RoCE peer produces no completion), or UNAVAILABLE naming the peer and the cause: a
     failed work completion (ibv_wc_status_str, e.g. "remote access error" for a bad rkey), the
     peer's bootstrap connection closing, keep-alive silence (peer_timeout_ns), or shutdown. A
     failed work completion breaks that peer's connection (its QP is destroyed) and fails every
     call on it; later calls to it reconnect or fail UNAVAILABLE at once (see LIFE CYCLE OF A
     PEER; the peer is told why over the bootstrap connection). Keep-alive pings travel over the
     bootstrap TCP connection, so a long RDMA write cannot delay them; with an exchange callback
     there is none and they are control messages, queued behind writes already posted: then
     peer_timeout_ns must exceed the longest transfer. A cancelled request whose buffer was
     advertised keeps the buffer until the sender answered (or the connection broke), so a late
     write never lands in freed memory.
     No value is lost to a receive that gives up: the sender keeps a reference to every answer it
     wrote (or sent dead) until the receiver's fate for that request slot is known. A CANCEL of the
     slot (sent when the receive is cancelled or passes its deadline before the answer arrived)
     gives the value back to the sender's table (tfrdv_mgr_serve_return: the key's next receiver
     gets it, in send order; stats.serves_returned), whether the answer was still being served,
     waiting for the receiver's RE-REQUEST, queued or already written; the receiver's next REQUEST
     on the slot means it took it (CANCEL and REQUEST travel in order in the control ring). An
     answer that arrives for a call the core had already completed (cancelled, timed out or
     aborted a moment earlier) is refused by the core (tfrdv_call_finish_status with give_back):
     the receiver then sends the CANCEL itself before it frees the slot. So an answer costs its
     value reference until the receiver reuses the slot (the lowest free one, so at most as many
     values as fetches were in flight at once stay held per peer), or until the receiver, with
     nothing outstanding for 1 ms, sends TAKEN: every answer it did not CANCEL (those come first,
     in order) was taken. The sender reports each verdict to its manager (TFRDV_SERVE_CONFIRMS:
     tfrdv_mgr_serve_delivered, tfrdv_mgr_serve_return), so tfrdv_mgr_drain on the serving side
     returns once the receiver has every value. What remains: a connection
     that breaks while an answer is held (WRITTEN) releases it, as delivered: the receiver may
     have dropped it in the same moment, and the CANCEL that said so was lost with the
     connection. Answers not yet written when the connection breaks go back to the table.

   MEMORY REGISTRATION
     Tensor memory is registered through a cache with reference counts and a byte bound
     (reg_cache_max_bytes). Registrations in use are never evicted. By default a registration is
     dropped when its last user is done, because memory freed and reused at the same address would
     otherwise be written through a stale registration. Long-lived buffers (pools, arenas: what
     TensorFlow registers with allocator visitors) should be registered once with
     tfrdv_verbs_register(); reg_cache_keep_idle = 1 keeps idle registrations too, and then the
     host must call tfrdv_verbs_invalidate() before freeing such memory. Registration needs locked
     memory: raise RLIMIT_MEMLOCK (ulimit -l) for large tensors; a failed ibv_reg_mr is a
     RESOURCE_EXHAUSTED status naming the size and the limit.

   ORDER OF TEARDOWN
     The life cycle of TRANSPORTS in tfrdv.h: tfrdv_verbs_destroy(v) and tfrdv_mgr_destroy(mgr)
     in either order. Each manager created with the vtable from tfrdv_verbs_transport holds a
     reference on v (tfrdv_transport.ref) that it drops when it goes (tfrdv_transport.destroy),
     so one vtable may serve several managers. tfrdv_verbs_destroy stops v: every call in flight
     finishes UNAVAILABLE "verbs transport destroyed" (exactly once), every request being served
     is withdrawn and its callback waited for, the progress thread is joined, peers, rings and
     registrations are freed, the device is closed and the attached manager's reference dropped;
     nothing of v touches a value afterwards. A fetch through v after that fails UNAVAILABLE
     "verbs transport destroyed" at once, and cancel_call does nothing. The little that is left
     (the struct and its lock) goes with the last reference. Called from a done callback or an
     alloc hook, tfrdv_verbs_destroy returns at once (fetches fail from then on) and the last
     thread to leave the transport (the progress thread as it exits, tfrdv_verbs_poll or the
     fetch whose start ran the callback as it returns) does the rest.

   THREADS
     Every function is thread-safe except create/destroy. No user callback (done callbacks, alloc
     hooks, tfrdv_mgr_serve, the logger) runs under a lock of this transport; the functions of
     hooks.allocator may (CALLBACK RULES in tfrdv.h: they must not call into tfrdv). Bytes a peer
     chose (its worker name, the text of its ERROR messages and of its bootstrap farewell) reach
     statuses and log lines only as printable ASCII (tfrdv_escape: \xNN, \\). State: one
     thread-local pointer, the transport whose code the thread runs (how destroy from a callback
     is recognised). A tfrdv_recv in a callback of the progress fails FAILED_PRECONDITION at once
     (the progress that would complete it is that thread's); use tfrdv_recv_async there.

   MEMORY
     Every allocation of the transport goes through tfrdv_verbs_config.hooks.allocator with its
     size (and is freed with a sized free). Running out is a status, never a crash: create fails
     RESOURCE_EXHAUSTED; a call whose bookkeeping cannot be allocated fails RESOURCE_EXHAUSTED; a
     control message that cannot be queued breaks that peer's connection (RESOURCE_EXHAUSTED
     "out of memory: a control message to ... was lost"; the protocol cannot skip a message), and
     the next call reconnects. Tensor buffers come from the manager's alloc hook, not from here.
*/
#ifndef TFRDV_VERBS_H
#define TFRDV_VERBS_H

#ifndef TFRDV_H
#error "Please include tfrdv.h before tfrdv_verbs.h"
#endif
#if TFRDV_VERSION_MAJOR != 0 || TFRDV_VERSION_MINOR < 6
#error "tfrdv_verbs.h 0.6 needs tfrdv.h 0.6 or a later 0.x"
#endif

#define TFRDV_VERBS_VERSION_MAJOR 0
#define TFRDV_VERBS_VERSION_MINOR 6
#define TFRDV_VERBS_VERSION_STRING "0.6.0"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfrdv_verbs tfrdv_verbs;

/* What each side tells the other at connection set-up (encoded little-endian, see
   tfrdv_verbs_info_encode). */
#define TFRDV_VERBS_WORKER_MAX 256 /* bytes of a worker name incl. NUL */
#define TFRDV_VERBS_INFO_MAX (72 + TFRDV_VERBS_WORKER_MAX)
typedef struct tfrdv_verbs_info {
    uint32_t qpn, psn;      /* queue pair number, initial packet sequence number (24 bits) */
    uint16_t lid;           /* InfiniBand LID (0 on RoCE) */
    uint8_t gid[16];        /* GID of the chosen index (RoCE: an IPv4-mapped or IPv6 address) */
    uint32_t mtu;           /* path MTU in bytes (256..4096); the minimum of both is used */
    uint64_t ctrl_addr;     /* control ring: address, rkey, slots, slot size */
    uint32_t ctrl_rkey, ctrl_slots, ctrl_slot_size;
    uint32_t max_requests;  /* requests this side keeps outstanding to a peer */
    uint64_t incarnation;   /* the sender's attached manager's incarnation (0: none attached) */
    char worker[TFRDV_VERBS_WORKER_MAX]; /* "/job:j/replica:r/task:t", NUL-terminated */
} tfrdv_verbs_info;
/* Writes at most cap bytes; returns the encoded length, or 0 when cap is too small. */
TFRDV_API size_t tfrdv_verbs_info_encode(const tfrdv_verbs_info* in, uint8_t* buf, size_t cap);
/* INVALID_ARGUMENT naming the defect for anything malformed; never reads past len. */
TFRDV_API tfrdv_code tfrdv_verbs_info_decode(const uint8_t* buf, size_t len, tfrdv_verbs_info* out,
                                             tfrdv_status* st);

/* Out-of-band bootstrap: send `local` (local_len bytes) to peer_worker and store what that peer
   sent in `remote` (at most remote_cap bytes, *remote_len = length). Non-OK fails the connect. */
typedef tfrdv_code (*tfrdv_verbs_exchange_fn)(void* user, const char* peer_worker,
                                              const uint8_t* local, size_t local_len,
                                              uint8_t* remote, size_t remote_cap,
                                              size_t* remote_len);

typedef struct tfrdv_verbs_config {
    /* Every field's zero is its default (tfrdv_verbs_config_init is a zeroed config); create
       refuses a value out of range with INVALID_ARGUMENT naming the field. */
    tfrdv_hooks hooks;         /* allocator: all memory of the transport (its struct, peers,
                                  control rings, caches, lists, the worker table; both functions
                                  or neither, neither: malloc/free; see MEMORY). logger: why a
                                  peer broke (level 2) or an accepted exchange failed (3). sync
                                  and clock are not used (threads are pthreads; deadlines use the
                                  attached manager's clock). */
    const char* worker_name;   /* this worker, "/job:j/replica:r/task:t" (required, canonical) */
    const char* listen_address;/* the TCP bootstrap listener: "10.0.0.5:5000", "127.0.0.1:0"
                                  (a free port: tfrdv_verbs_port), "[::1]:5000", "0.0.0.0:5000"
                                  (every interface). NULL: no listener, this side only connects
                                  (see SECURITY). Not with an exchange callback. */
    int num_threads;           /* >= 0: one progress thread owned by the companion (more are not
                                  used); -1: none, the host calls tfrdv_verbs_poll (PROGRESS) */
    const tfrdv_worker* workers; /* worker name -> bootstrap listener address "host:port" or
                                  "[v6]:port" (copied), a cluster spec (tfrdv_cluster_parse's table
                                  fits): a fetch from a worker not connected yet connects to it
                                  (CONNECTIONS). create refuses a name not of the canonical form
                                  and an address whose syntax is wrong (host names are resolved
                                  when connecting) */
    size_t num_workers;
    /* Consulted for names not in the table: write a NUL-terminated address, return 1 if known.
       Called without a lock of the transport, on the thread that starts the fetch. */
    int (*resolve)(void* user, const char* worker, size_t len, char* address, size_t cap);
    void* resolve_user;
    const char* library;       /* dlopen name (NULL: "libibverbs.so.1") */
    const char* device;        /* e.g. "mlx5_0", "rxe0" (NULL: the only device with an active
                                  port; several -> FAILED_PRECONDITION naming them) */
    int port;                  /* 1..255; 0: the first active port */
    const char* gid;           /* the local GID (RoCE: the source address). NULL: automatic, the
                                  RoCE v2 GID holding an IPv4-mapped address if exactly one does,
                                  else the only RoCE v2 GID, else index 0 on InfiniBand (several
                                  candidates: FAILED_PRECONDITION listing them). "3": GID index 3.
                                  "10.0.0.5" or "fe80::1": the GID holding that address (its
                                  RoCE v2 entry when there are v1 and v2 ones) */
    int mtu;                   /* bytes: 256, 512, 1024, 2048 or 4096 (at most the port's);
                                  0: the port's active MTU */
    tfrdv_verbs_exchange_fn exchange; /* optional out-of-band bootstrap instead of TCP */
    void* exchange_user;
    int ctrl_slots;            /* control ring slots per peer (0: 64; 4..65536) */
    int ctrl_slot_size;        /* bytes per slot (0: 4096; 256..1 MiB; keys and shapes must fit) */
    int max_requests;          /* outstanding fetches per peer (0: 256; at most 32768; more
                                  wait in a queue) */
    int64_t spin_ns;           /* thread: busy-poll this long after activity (0: 50 us;
                                  < 0 (TFRDV_OFF): never, sleep at once) */
    int64_t connect_timeout_ns;/* the whole bootstrap exchange, either side (0: 10 s) */
    int64_t keepalive_ns;      /* ping a peer this quiet while requests are out (0: 500 ms) */
    int64_t peer_timeout_ns;   /* declare it dead after this much silence (0: 5 s) */
    uint64_t reg_cache_max_bytes; /* registered bytes at most (0: 8 GiB) */
    int reg_cache_keep_idle;   /* 1: keep idle registrations (see MEMORY REGISTRATION); 0: not */
    int meta_cache_max;        /* remembered key -> dtype/shape entries (0: 4096) */
    int ack_timeout;           /* QP local ACK timeout exponent, 4.096 us * 2^n (0: 14; 1..31) */
    int retry_cnt;             /* transport retries (0: 7; 1..7; TFRDV_OFF: none) */
    int rnr_retry;             /* receiver-not-ready retries (0: 7 = forever; 1..6; TFRDV_OFF:
                                  none) */
    int64_t reconnect_backoff_ns;     /* after a failed (re)connect, calls fail at once for this
                                         long, doubling per failure in a row (0: 100 ms; TFRDV_OFF:
                                         never reconnect a broken peer; see LIFE CYCLE OF A PEER) */
    int64_t reconnect_backoff_max_ns; /* the window's cap (0: 10 s) */
} tfrdv_verbs_config;
TFRDV_API tfrdv_verbs_config tfrdv_verbs_config_init(void);

/* Checks the config, opens the device, the protection domain, the completion channel and the
   listener (listen_address), starts the progress thread (num_threads >= 0).
   UNAVAILABLE: no libibverbs ("cannot load libibverbs.so.1: ..."), no kernel RDMA support
   (ENOSYS), no device, no active port. FAILED_PRECONDITION: an ambiguous device or GID choice
   (the message lists the candidates). INVALID_ARGUMENT: bad config. */
TFRDV_API tfrdv_code tfrdv_verbs_create(const tfrdv_verbs_config* cfg, tfrdv_verbs** out,
                                        tfrdv_status* st);
/* The vtable for tfrdv_mgr_config.transport: each manager given it holds v until it goes, so
   tfrdv_verbs_destroy and tfrdv_mgr_destroy may come in either order. */
TFRDV_API tfrdv_transport tfrdv_verbs_transport(tfrdv_verbs* v);
/* The manager whose tables answer the peers' requests (one reference is held until destroy);
   its clock also times deadlines. Requests arriving before this fail UNAVAILABLE. */
TFRDV_API tfrdv_code tfrdv_verbs_attach(tfrdv_verbs* v, tfrdv_mgr* mgr, tfrdv_status* st);
/* The bound bootstrap port (0 without a listener). */
TFRDV_API int tfrdv_verbs_port(const tfrdv_verbs* v);
/* Connect to peer_worker ("/job:j/replica:r/task:t") now, listening at host:port; host NULL
   (port 0): the address from workers / resolve (NOT_FOUND when neither knows it). Optional: a
   fetch connects on demand (CONNECTIONS). host and port are ignored with an exchange callback.
   Blocks until the QP is ready, at most connect_timeout_ns for the whole exchange (a refused
   connection is retried within it: the peer may be starting). The address is kept to reconnect
   when the connection breaks (see LIFE CYCLE OF A PEER). */
TFRDV_API tfrdv_code tfrdv_verbs_connect(tfrdv_verbs* v, const char* peer_worker, const char* host,
                                         int port, tfrdv_status* st);
/* Host-driven progress (num_threads -1; also harmless beside the thread): handles completions,
   requests, deadlines, keep-alive, the listener and bootstrap exchanges. Waits up to timeout_ns
   when idle (< 0: until something happens, at most keepalive_ns / 2; 0: no wait). Returns the
   number of events handled. One caller progresses at a time: a concurrent caller returns 0 at
   once. */
TFRDV_API int tfrdv_verbs_poll(tfrdv_verbs* v, int64_t timeout_ns);
/* A descriptor that becomes readable when tfrdv_verbs_poll has work (epoll). */
TFRDV_API int tfrdv_verbs_fd(const tfrdv_verbs* v);
/* Register a long-lived buffer (pool chunk) for as long as you like; tensors inside it then
   need no registration per transfer. */
TFRDV_API tfrdv_code tfrdv_verbs_register(tfrdv_verbs* v, void* ptr, size_t len, tfrdv_status* st);
/* Drop tfrdv_verbs_register's registration, and every idle cached registration overlapping the
   range (call before freeing memory with reg_cache_keep_idle). In-use ones go when done. */
TFRDV_API void tfrdv_verbs_invalidate(tfrdv_verbs* v, void* ptr, size_t len);

typedef struct tfrdv_verbs_stats {
    uint64_t calls_started, calls_ok, calls_failed, requests_served, bytes_written, bytes_received;
    uint64_t ctrl_sent, ctrl_received, ctrl_queued, meta_updates, re_requests, errors_sent;
    uint64_t reg_hits, reg_misses, reg_evictions, pings, peers_broken;
    uint64_t registered_bytes;
    uint64_t reconnects, reconnect_failures; /* attempts that succeeded / failed (a first connect
                                                on demand: only its failures) */
    uint64_t bootstraps_dropped;  /* accepted connections dropped before the exchange finished */
    uint64_t serves_returned;     /* answers given back to the table: the receiver had given up
                                     before they arrived (tfrdv_mgr_serve_return) */
    int peers;                    /* peer records: connected, broken, or kept to reconnect */
    int bootstraps_pending;       /* exchanges under way */
} tfrdv_verbs_stats;
TFRDV_API void tfrdv_verbs_get_stats(tfrdv_verbs* v, tfrdv_verbs_stats* out);
/* Device, port, GID index and MTU in use, e.g. "rxe0 port 1 gid 1 (::ffff:192.0.2.1) mtu 1024". */
TFRDV_API const char* tfrdv_verbs_describe(const tfrdv_verbs* v);
/* Fails every call in flight (UNAVAILABLE "verbs transport destroyed"), withdraws every request
   being served and waits for those callbacks, joins the progress thread, closes the device,
   drops the manager reference and the owner's reference on v (see ORDER OF TEARDOWN). */
TFRDV_API void tfrdv_verbs_destroy(tfrdv_verbs* v);

#ifdef __cplusplus
}
#endif
#endif /* TFRDV_VERBS_H */

/* =============================================================================================
   IMPLEMENTATION
   ============================================================================================= */
#if defined(TFRDV_VERBS_IMPLEMENTATION) && !defined(TFRDV_VERBS__IMPLEMENTATION_DONE)
#define TFRDV_VERBS__IMPLEMENTATION_DONE

#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE) && !defined(_XOPEN_SOURCE) && \
    !defined(_DEFAULT_SOURCE)
#error "tfrdv_verbs.h implementation: define TFRDV_IMPLEMENTATION (or _POSIX_C_SOURCE=200809L) before including tfrdv.h"
#endif

#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <stdarg.h>
#ifndef TFRDV_VERBS_PROTOCOL_ONLY
#include <infiniband/verbs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <sched.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TFRDV_VERBS__PRIVATE static __attribute__((unused))
#else
#define TFRDV_VERBS__PRIVATE static
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* snprintf that always terminates (messages are truncated on purpose) */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__fmt(char* buf, size_t cap, const char* fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
TFRDV_VERBS__PRIVATE int tfrdv_verbs__fmt(char* buf, size_t cap, const char* fmt, ...) {
    int n;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n < 0 ? 0 : n;
}

/* memory: every allocation goes through the config's hooks.allocator (sized frees; both
   functions NULL: malloc/free). zalloc_n returns zeroed memory, NULL also on overflow. */
TFRDV_VERBS__PRIVATE void* tfrdv_verbs__alloc(const tfrdv_allocator* a, size_t n) {
    return a->alloc_fn ? a->alloc_fn(a->user, n ? n : 1) : malloc(n ? n : 1);
}
TFRDV_VERBS__PRIVATE void* tfrdv_verbs__zalloc_n(const tfrdv_allocator* a, size_t count, size_t size) {
    void* p;
    size_t n;
    if (size && count > (size_t)-1 / size) return 0;
    n = count * size;
    p = tfrdv_verbs__alloc(a, n);
    if (p && n) memset(p, 0, n);
    return p;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__free(const tfrdv_allocator* a, void* p, size_t n) {
    if (!p) return;
    if (a->free_fn) a->free_fn(a->user, p, n ? n : 1);
    else free(p);
}

/* >>protocol  device-free pieces: little-endian codec, handshake info, credits, caches. The
   unit tests and the fuzz target build only this part (TFRDV_VERBS_PROTOCOL_ONLY). */
#define TFRDV_VERBS__VERSION 1      /* control messages */
#define TFRDV_VERBS__INFO_VERSION 2 /* the bootstrap info (2: it carries the incarnation) */
#define TFRDV_VERBS__HDR 16
#define TFRDV_VERBS__IMM_CTRL 0x80000000u
#define TFRDV_VERBS__TAKEN_AFTER_NS 1000000 /* TAKEN once nothing was outstanding this long */
#define TFRDV_VERBS__TENSOR_MAX ((uint64_t)1 << 40) /* largest value a peer may announce (as tfrdv_tcp.h's default) */
enum { TFRDV_VERBS__MAX_RANK = 254, TFRDV_VERBS__F_BUFFER = 1, TFRDV_VERBS__F_META = 2 };
enum {
    TFRDV_VERBS__REQUEST = 1,
    TFRDV_VERBS__RE_REQUEST = 2,
    TFRDV_VERBS__META = 3,
    TFRDV_VERBS__ERROR = 4,
    TFRDV_VERBS__CANCEL = 5,
    TFRDV_VERBS__CREDIT = 6,
    TFRDV_VERBS__PING = 7,
    TFRDV_VERBS__PONG = 8,
    TFRDV_VERBS__TAKEN = 9
};

typedef struct tfrdv_verbs__meta {
    int32_t dtype;
    uint32_t rank;
    uint64_t size;
    uint32_t is_dead;
    int64_t* dims; /* rank entries (decode: caller array of TFRDV_VERBS__MAX_RANK) */
} tfrdv_verbs__meta;

/* one decoded control message; pointers point into the decoded buffer or caller arrays */
typedef struct tfrdv_verbs__msg {
    uint8_t type;
    uint32_t credits, slot;
    int64_t step_id, request_id;
    uint64_t addr, cap;
    uint32_t rkey, flags;
    tfrdv_verbs__meta meta;
    const char* key;
    uint32_t key_len;
    uint32_t code, detail; /* ERROR: a tfrdv_code 1..16 and a TFRDV_DETAIL_* (0..255) */
    const char* text;
    uint32_t text_len;
} tfrdv_verbs__msg;

TFRDV_VERBS__PRIVATE void tfrdv_verbs__put16(uint8_t* p, uint32_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
TFRDV_VERBS__PRIVATE void tfrdv_verbs__put32(uint8_t* p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__put64(uint8_t* p, uint64_t v) {
    tfrdv_verbs__put32(p, (uint32_t)v);
    tfrdv_verbs__put32(p + 4, (uint32_t)(v >> 32));
}
TFRDV_VERBS__PRIVATE uint32_t tfrdv_verbs__get16(const uint8_t* p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8); }
TFRDV_VERBS__PRIVATE uint32_t tfrdv_verbs__get32(const uint8_t* p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
TFRDV_VERBS__PRIVATE uint64_t tfrdv_verbs__get64(const uint8_t* p) {
    return (uint64_t)tfrdv_verbs__get32(p) | ((uint64_t)tfrdv_verbs__get32(p + 4) << 32);
}

TFRDV_VERBS__PRIVATE size_t tfrdv_verbs__meta_size(uint32_t rank) { return 20 + 8 * (size_t)rank; }
TFRDV_VERBS__PRIVATE void tfrdv_verbs__meta_put(uint8_t* p, const tfrdv_verbs__meta* m) {
    uint32_t i;
    tfrdv_verbs__put32(p, (uint32_t)m->dtype);
    tfrdv_verbs__put32(p + 4, m->rank);
    tfrdv_verbs__put64(p + 8, m->size);
    tfrdv_verbs__put32(p + 16, m->is_dead);
    for (i = 0; i < m->rank; i++) tfrdv_verbs__put64(p + 20 + 8 * (size_t)i, (uint64_t)m->dims[i]);
}

/* Encodes msg (type-specific fields) into buf; returns the length or 0 if it does not fit or a
   field is out of range. The credits field is (re)written when the message is posted. */
TFRDV_VERBS__PRIVATE size_t tfrdv_verbs__encode(const tfrdv_verbs__msg* m, uint8_t* buf, size_t cap) {
    size_t body = 0, off = TFRDV_VERBS__HDR;
    switch (m->type) {
    case TFRDV_VERBS__REQUEST:
        if (m->flags & TFRDV_VERBS__F_META && m->meta.rank > TFRDV_VERBS__MAX_RANK) return 0;
        body = 40 + ((m->flags & TFRDV_VERBS__F_META) ? tfrdv_verbs__meta_size(m->meta.rank) : 0) + 4 + m->key_len;
        break;
    case TFRDV_VERBS__RE_REQUEST: body = 24; break;
    case TFRDV_VERBS__META:
        if (m->meta.rank > TFRDV_VERBS__MAX_RANK) return 0;
        body = tfrdv_verbs__meta_size(m->meta.rank);
        break;
    case TFRDV_VERBS__ERROR:
        if (m->code < 1 || m->code > 16 || m->detail > 255 || m->text_len > 255) return 0;
        body = 8 + m->text_len;
        break;
    case TFRDV_VERBS__CANCEL: case TFRDV_VERBS__CREDIT: case TFRDV_VERBS__PING: case TFRDV_VERBS__PONG:
    case TFRDV_VERBS__TAKEN:
        break;
    default: return 0;
    }
    if (cap < TFRDV_VERBS__HDR || body > cap - TFRDV_VERBS__HDR) return 0;
    buf[0] = TFRDV_VERBS__VERSION;
    buf[1] = m->type;
    tfrdv_verbs__put16(buf + 2, 0);
    tfrdv_verbs__put32(buf + 4, m->credits);
    tfrdv_verbs__put32(buf + 8, m->slot);
    tfrdv_verbs__put32(buf + 12, (uint32_t)body);
    switch (m->type) {
    case TFRDV_VERBS__REQUEST:
        tfrdv_verbs__put64(buf + off, (uint64_t)m->step_id);
        tfrdv_verbs__put64(buf + off + 8, (uint64_t)m->request_id);
        tfrdv_verbs__put64(buf + off + 16, m->addr);
        tfrdv_verbs__put32(buf + off + 24, m->rkey);
        tfrdv_verbs__put32(buf + off + 28, m->flags & (TFRDV_VERBS__F_BUFFER | TFRDV_VERBS__F_META));
        tfrdv_verbs__put64(buf + off + 32, m->cap);
        off += 40;
        if (m->flags & TFRDV_VERBS__F_META) {
            tfrdv_verbs__meta_put(buf + off, &m->meta);
            off += tfrdv_verbs__meta_size(m->meta.rank);
        }
        tfrdv_verbs__put32(buf + off, m->key_len);
        if (m->key_len) memcpy(buf + off + 4, m->key, m->key_len);
        break;
    case TFRDV_VERBS__RE_REQUEST:
        tfrdv_verbs__put64(buf + off, m->addr);
        tfrdv_verbs__put32(buf + off + 8, m->rkey);
        tfrdv_verbs__put32(buf + off + 12, 0);
        tfrdv_verbs__put64(buf + off + 16, m->cap);
        break;
    case TFRDV_VERBS__META: tfrdv_verbs__meta_put(buf + off, &m->meta); break;
    case TFRDV_VERBS__ERROR:
        tfrdv_verbs__put32(buf + off, m->code | m->detail << 8); /* the status detail in the second byte */
        tfrdv_verbs__put32(buf + off + 4, m->text_len);
        if (m->text_len) memcpy(buf + off + 8, m->text, m->text_len);
        break;
    default: break;
    }
    return TFRDV_VERBS__HDR + body;
}

/* meta block at p with n bytes available; returns bytes used or 0 when malformed */
TFRDV_VERBS__PRIVATE size_t tfrdv_verbs__meta_get(const uint8_t* p, size_t n, tfrdv_verbs__meta* m,
                                                  int64_t* dims) {
    uint32_t i;
    size_t need;
    if (n < 20) return 0;
    m->dtype = (int32_t)tfrdv_verbs__get32(p);
    m->rank = tfrdv_verbs__get32(p + 4);
    m->size = tfrdv_verbs__get64(p + 8);
    m->is_dead = tfrdv_verbs__get32(p + 16);
    if (m->rank > TFRDV_VERBS__MAX_RANK || m->is_dead > 1) return 0;
    need = tfrdv_verbs__meta_size(m->rank);
    if (n < need) return 0;
    for (i = 0; i < m->rank; i++) {
        dims[i] = (int64_t)tfrdv_verbs__get64(p + 20 + 8 * (size_t)i);
        if (dims[i] < 0) return 0;
    }
    m->dims = dims;
    return need;
}

/* Decodes one control message of len bytes (a received ring slot). Never reads past len; every
   count and length is checked. Returns 1 and fills *m, or 0 and a reason in why. */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__decode(const uint8_t* buf, size_t len, tfrdv_verbs__msg* m,
                                             int64_t* dims, const char** why) {
    size_t body, off = TFRDV_VERBS__HDR, used;
    memset(m, 0, sizeof *m);
    *why = 0;
    if (len < TFRDV_VERBS__HDR) { *why = "short header"; return 0; }
    if (buf[0] != TFRDV_VERBS__VERSION) { *why = "unknown protocol version"; return 0; }
    m->type = buf[1];
    m->credits = tfrdv_verbs__get32(buf + 4);
    m->slot = tfrdv_verbs__get32(buf + 8);
    body = tfrdv_verbs__get32(buf + 12);
    if (body > len - TFRDV_VERBS__HDR) { *why = "body longer than the slot"; return 0; }
    switch (m->type) {
    case TFRDV_VERBS__REQUEST:
        if (body < 44) { *why = "short request"; return 0; }
        m->step_id = (int64_t)tfrdv_verbs__get64(buf + off);
        m->request_id = (int64_t)tfrdv_verbs__get64(buf + off + 8);
        m->addr = tfrdv_verbs__get64(buf + off + 16);
        m->rkey = tfrdv_verbs__get32(buf + off + 24);
        m->flags = tfrdv_verbs__get32(buf + off + 28);
        m->cap = tfrdv_verbs__get64(buf + off + 32);
        if (m->flags & ~(uint32_t)(TFRDV_VERBS__F_BUFFER | TFRDV_VERBS__F_META)) { *why = "unknown request flags"; return 0; }
        off += 40;
        if (m->flags & TFRDV_VERBS__F_META) {
            used = tfrdv_verbs__meta_get(buf + off, TFRDV_VERBS__HDR + body - off, &m->meta, dims);
            if (!used) { *why = "malformed request metadata"; return 0; }
            off += used;
        }
        if (TFRDV_VERBS__HDR + body - off < 4) { *why = "short request key"; return 0; }
        m->key_len = tfrdv_verbs__get32(buf + off);
        off += 4;
        if (m->key_len != TFRDV_VERBS__HDR + body - off) { *why = "request key length mismatch"; return 0; }
        m->key = (const char*)(buf + off);
        return 1;
    case TFRDV_VERBS__RE_REQUEST:
        if (body != 24) { *why = "re-request size"; return 0; }
        m->addr = tfrdv_verbs__get64(buf + off);
        m->rkey = tfrdv_verbs__get32(buf + off + 8);
        m->cap = tfrdv_verbs__get64(buf + off + 16);
        m->flags = TFRDV_VERBS__F_BUFFER;
        return 1;
    case TFRDV_VERBS__META:
        used = tfrdv_verbs__meta_get(buf + off, body, &m->meta, dims);
        if (!used || used != body) { *why = "malformed metadata"; return 0; }
        return 1;
    case TFRDV_VERBS__ERROR:
        if (body < 8) { *why = "short error"; return 0; }
        m->code = tfrdv_verbs__get32(buf + off);
        m->detail = (m->code >> 8) & 0xffu;
        if (m->code >> 16) { *why = "error code out of range"; return 0; }
        m->code &= 0xffu;
        m->text_len = tfrdv_verbs__get32(buf + off + 4);
        if (m->code < 1 || m->code > 16) { *why = "error code out of range"; return 0; }
        if (m->text_len > 255 || m->text_len != body - 8) { *why = "error text length"; return 0; }
        m->text = (const char*)(buf + off + 8);
        return 1;
    case TFRDV_VERBS__CANCEL: case TFRDV_VERBS__CREDIT: case TFRDV_VERBS__PING: case TFRDV_VERBS__PONG:
    case TFRDV_VERBS__TAKEN:
        if (body != 0) { *why = "unexpected body"; return 0; }
        return 1;
    default: *why = "unknown message type"; return 0;
    }
}

/* ---- handshake info ---- */
#define TFRDV_VERBS__INFO_MAGIC 0x56524654u /* "TFRV" */
TFRDV_API size_t tfrdv_verbs_info_encode(const tfrdv_verbs_info* in, uint8_t* buf, size_t cap) {
    size_t nl;
    if (!in || !buf) return 0;
    nl = strlen(in->worker);
    if (nl >= TFRDV_VERBS_WORKER_MAX || cap < 72 + nl) return 0;
    tfrdv_verbs__put32(buf, TFRDV_VERBS__INFO_MAGIC);
    tfrdv_verbs__put16(buf + 4, TFRDV_VERBS__INFO_VERSION);
    tfrdv_verbs__put16(buf + 6, (uint32_t)nl);
    tfrdv_verbs__put32(buf + 8, in->qpn);
    tfrdv_verbs__put32(buf + 12, in->psn);
    tfrdv_verbs__put16(buf + 16, in->lid);
    tfrdv_verbs__put16(buf + 18, 0);
    memcpy(buf + 20, in->gid, 16);
    tfrdv_verbs__put32(buf + 36, in->mtu);
    tfrdv_verbs__put64(buf + 40, in->ctrl_addr);
    tfrdv_verbs__put32(buf + 48, in->ctrl_rkey);
    tfrdv_verbs__put32(buf + 52, in->ctrl_slots);
    tfrdv_verbs__put32(buf + 56, in->ctrl_slot_size);
    tfrdv_verbs__put32(buf + 60, in->max_requests);
    tfrdv_verbs__put64(buf + 64, in->incarnation);
    memcpy(buf + 72, in->worker, nl);
    return 72 + nl;
}
TFRDV_API tfrdv_code tfrdv_verbs_info_decode(const uint8_t* buf, size_t len, tfrdv_verbs_info* out,
                                             tfrdv_status* st) {
    size_t nl;
    const char* why = 0;
    char vmsg[96];
    if (!buf || !out) return tfrdv_status_set(st, TFRDV_INVALID_ARGUMENT, "verbs info: NULL argument");
    memset(out, 0, sizeof *out);
    if (len >= 6 && tfrdv_verbs__get32(buf) == TFRDV_VERBS__INFO_MAGIC && tfrdv_verbs__get16(buf + 4) != TFRDV_VERBS__INFO_VERSION) {
        tfrdv_verbs__fmt(vmsg, sizeof vmsg, "protocol version %u; this side speaks %d: run the same tfrdv_verbs.h on both",
                         (unsigned)tfrdv_verbs__get16(buf + 4), TFRDV_VERBS__INFO_VERSION);
        why = vmsg;
    } else if (len < 72) why = "shorter than 72 bytes";
    else if (tfrdv_verbs__get32(buf) != TFRDV_VERBS__INFO_MAGIC) why = "bad magic (not a tfrdv verbs peer)";
    if (!why) {
        nl = tfrdv_verbs__get16(buf + 6);
        out->qpn = tfrdv_verbs__get32(buf + 8);
        out->psn = tfrdv_verbs__get32(buf + 12);
        out->lid = (uint16_t)tfrdv_verbs__get16(buf + 16);
        memcpy(out->gid, buf + 20, 16);
        out->mtu = tfrdv_verbs__get32(buf + 36);
        out->ctrl_addr = tfrdv_verbs__get64(buf + 40);
        out->ctrl_rkey = tfrdv_verbs__get32(buf + 48);
        out->ctrl_slots = tfrdv_verbs__get32(buf + 52);
        out->ctrl_slot_size = tfrdv_verbs__get32(buf + 56);
        out->max_requests = tfrdv_verbs__get32(buf + 60);
        out->incarnation = tfrdv_verbs__get64(buf + 64);
        if (nl == 0 || nl >= TFRDV_VERBS_WORKER_MAX || len != 72 + nl) why = "worker name length";
        else if (memchr(buf + 72, 0, nl)) why = "NUL in worker name";
        else if (out->qpn == 0 || out->qpn > 0xffffffu || out->psn > 0xffffffu) why = "QP number or PSN out of range";
        else if (out->mtu != 256 && out->mtu != 512 && out->mtu != 1024 && out->mtu != 2048 && out->mtu != 4096) why = "MTU not 256..4096";
        else if (out->ctrl_slots < 4 || out->ctrl_slots > 65536 || out->ctrl_slot_size < 256 || out->ctrl_slot_size > (1u << 20)) why = "control ring size";
        else if (out->max_requests < 1 || out->max_requests > 32768) why = "max_requests";
        else memcpy(out->worker, buf + 72, nl);
    }
    if (why) {
        char msg[160];
        tfrdv_verbs__fmt(msg, sizeof msg, "verbs info: malformed peer info (%s)", why);
        memset(out, 0, sizeof *out);
        return tfrdv_status_set(st, TFRDV_INVALID_ARGUMENT, msg);
    }
    return TFRDV_OK;
}

/* ---- credits (one direction of one connection's control ring) ----
   tx: credits we hold for the peer's ring; owed: slots of OUR ring processed but not yet
   returned. A normal message needs 2 credits (the last is kept for CREDIT); CREDIT needs 1 and
   something to return. */
typedef struct tfrdv_verbs__credits {
    uint32_t slots;   /* peer ring slots (max credits) */
    uint32_t tx;      /* credits held */
    uint32_t owed;    /* to return to the peer */
    uint32_t my_slots;/* our ring slots (bound on owed) */
} tfrdv_verbs__credits;
TFRDV_VERBS__PRIVATE void tfrdv_verbs__credits_init(tfrdv_verbs__credits* c, uint32_t peer_slots, uint32_t my_slots) {
    c->slots = peer_slots;
    c->tx = peer_slots;
    c->owed = 0;
    c->my_slots = my_slots;
}
TFRDV_VERBS__PRIVATE int tfrdv_verbs__credits_can_send(const tfrdv_verbs__credits* c, int type) {
    if (type == TFRDV_VERBS__CREDIT) return c->tx >= 1 && c->owed > 0;
    return c->tx >= 2;
}
/* consume one credit and take what we owe (to put in the header) */
TFRDV_VERBS__PRIVATE uint32_t tfrdv_verbs__credits_take(tfrdv_verbs__credits* c) {
    uint32_t owed = c->owed;
    c->tx--;
    c->owed = 0;
    return owed;
}
/* credits returned by the peer; 0 when that would exceed the ring (protocol violation) */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__credits_return(tfrdv_verbs__credits* c, uint32_t n) {
    if (n > c->slots - c->tx) return 0;
    c->tx += n;
    return 1;
}
/* one of our slots was processed; 1 when an explicit CREDIT message is due */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__credits_owe(tfrdv_verbs__credits* c) {
    c->owed++;
    return c->owed >= c->my_slots / 2;
}

/* ---- registration cache (device calls through two hooks so it is testable without one) ---- */
typedef struct tfrdv_verbs__reg {
    struct tfrdv_verbs__reg* next;
    uintptr_t lo, hi;   /* page-aligned [lo, hi) */
    void* mr;           /* struct ibv_mr* (or the test's token) */
    uint32_t lkey, rkey;
    long refs;
    int pinned;         /* tfrdv_verbs_register */
    int dead;           /* invalidated while in use: dropped at the last put */
    uint64_t used;      /* LRU tick */
} tfrdv_verbs__reg;
typedef struct tfrdv_verbs__rcache {
    tfrdv_verbs__reg* head;
    uint64_t bytes, max_bytes, tick;
    int keep_idle;
    uint64_t hits, misses, evictions;
    /* returns the handle and keys, or NULL with errno set */
    void* (*reg)(void* user, void* addr, size_t len, uint32_t* lkey, uint32_t* rkey);
    void (*dereg)(void* user, void* mr);
    void* user;
    tfrdv_allocator a;  /* the entries' memory */
} tfrdv_verbs__rcache;
#define TFRDV_VERBS__PAGE ((uintptr_t)4096)

TFRDV_VERBS__PRIVATE void tfrdv_verbs__rc_unlink(tfrdv_verbs__rcache* c, tfrdv_verbs__reg* e) {
    tfrdv_verbs__reg** pp = &c->head;
    while (*pp && *pp != e) pp = &(*pp)->next;
    if (*pp) *pp = e->next;
    c->bytes -= (uint64_t)(e->hi - e->lo);
    c->dereg(c->user, e->mr);
    tfrdv_verbs__free(&c->a, e, sizeof *e);
}
/* evict idle entries (oldest first) until `need` more bytes fit; 1 when they fit */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__rc_make_room(tfrdv_verbs__rcache* c, uint64_t need) {
    while (c->bytes + need > c->max_bytes) {
        tfrdv_verbs__reg *e, *old = 0;
        for (e = c->head; e; e = e->next)
            if (e->refs == 0 && !e->pinned && (!old || e->used < old->used)) old = e;
        if (!old) return 0;
        tfrdv_verbs__rc_unlink(c, old);
        c->evictions++;
    }
    return 1;
}
/* A registration covering [ptr, ptr+len), with one reference (or the pinned flag). NULL with a
   status on failure: RESOURCE_EXHAUSTED over the bound or when the device refuses. */
TFRDV_VERBS__PRIVATE tfrdv_verbs__reg* tfrdv_verbs__rc_get(tfrdv_verbs__rcache* c, const void* ptr, size_t len,
                                                           int pin, tfrdv_status* st) {
    uintptr_t lo = (uintptr_t)ptr & ~(TFRDV_VERBS__PAGE - 1);
    uintptr_t hi = ((uintptr_t)ptr + (len ? len : 1) + TFRDV_VERBS__PAGE - 1) & ~(TFRDV_VERBS__PAGE - 1);
    tfrdv_verbs__reg* e;
    char msg[200];
    for (e = c->head; e; e = e->next) {
        if (!e->dead && e->lo <= lo && hi <= e->hi) {
            if (pin) e->pinned = 1;
            else e->refs++;
            e->used = ++c->tick;
            c->hits++;
            return e;
        }
    }
    c->misses++;
    if ((uint64_t)(hi - lo) > c->max_bytes || !tfrdv_verbs__rc_make_room(c, (uint64_t)(hi - lo))) {
        tfrdv_verbs__fmt(msg, sizeof msg, "verbs: registering %llu bytes would exceed reg_cache_max_bytes (%llu, %llu in use)",
                 (unsigned long long)(hi - lo), (unsigned long long)c->max_bytes, (unsigned long long)c->bytes);
        tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, msg);
        return 0;
    }
    e = (tfrdv_verbs__reg*)tfrdv_verbs__zalloc_n(&c->a, 1, sizeof *e);
    if (!e) {
        tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, "verbs: out of memory");
        return 0;
    }
    e->mr = c->reg(c->user, (void*)lo, (size_t)(hi - lo), &e->lkey, &e->rkey);
    if (!e->mr) {
        int err = errno;
        tfrdv_verbs__free(&c->a, e, sizeof *e);
        tfrdv_verbs__fmt(msg, sizeof msg, "verbs: ibv_reg_mr of %llu bytes failed: %s%s",
                 (unsigned long long)(hi - lo), strerror(err),
                 err == ENOMEM || err == EPERM ? " (locked memory limit RLIMIT_MEMLOCK, see ulimit -l)" : "");
        tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, msg);
        return 0;
    }
    e->lo = lo;
    e->hi = hi;
    e->refs = pin ? 0 : 1;
    e->pinned = pin;
    e->used = ++c->tick;
    e->next = c->head;
    c->head = e;
    c->bytes += (uint64_t)(hi - lo);
    return e;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__rc_put(tfrdv_verbs__rcache* c, tfrdv_verbs__reg* e) {
    if (!e) return;
    if (--e->refs > 0) return;
    if (e->dead || (!e->pinned && !c->keep_idle)) tfrdv_verbs__rc_unlink(c, e);
}
/* drop pinned flags and idle entries overlapping [ptr, ptr+len); busy ones die at their last put */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__rc_invalidate(tfrdv_verbs__rcache* c, const void* ptr, size_t len) {
    uintptr_t lo = (uintptr_t)ptr, hi = (uintptr_t)ptr + len;
    tfrdv_verbs__reg *e = c->head, *next;
    for (; e; e = next) {
        next = e->next;
        if (e->lo < hi && lo < e->hi) {
            e->pinned = 0;
            if (e->refs == 0) tfrdv_verbs__rc_unlink(c, e);
            else e->dead = 1;
        }
    }
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__rc_clear(tfrdv_verbs__rcache* c) {
    while (c->head) tfrdv_verbs__rc_unlink(c, c->head);
}

/* ---- metadata cache: key -> last dtype/shape, direct-mapped, bounded ---- */
typedef struct tfrdv_verbs__mentry {
    char* key;
    size_t key_len;
    int32_t dtype;
    uint32_t rank;
    uint64_t size;
    int64_t* dims;
} tfrdv_verbs__mentry;
typedef struct tfrdv_verbs__mcache {
    tfrdv_verbs__mentry* e;
    size_t n;
    tfrdv_allocator a;  /* the entries' memory */
} tfrdv_verbs__mcache;
TFRDV_VERBS__PRIVATE size_t tfrdv_verbs__mc_slot(const tfrdv_verbs__mcache* c, const char* key, size_t len) {
    return (size_t)(tfrdv_hash_bytes(key, len) % c->n);
}
/* copies the cached meta into *m (dims into the caller's array); 1 on a hit */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__mc_get(const tfrdv_verbs__mcache* c, const char* key, size_t len,
                                             tfrdv_verbs__meta* m, int64_t* dims) {
    const tfrdv_verbs__mentry* e;
    if (!c->n) return 0;
    e = &c->e[tfrdv_verbs__mc_slot(c, key, len)];
    if (!e->key || e->key_len != len || memcmp(e->key, key, len) != 0) return 0;
    m->dtype = e->dtype;
    m->rank = e->rank;
    m->size = e->size;
    m->is_dead = 0;
    if (e->rank) memcpy(dims, e->dims, e->rank * sizeof *dims);
    m->dims = dims;
    return 1;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__mc_put(tfrdv_verbs__mcache* c, const char* key, size_t len,
                                              const tfrdv_verbs__meta* m) {
    tfrdv_verbs__mentry* e;
    char* k;
    int64_t* d = 0;
    if (!c->n || m->is_dead) return;
    e = &c->e[tfrdv_verbs__mc_slot(c, key, len)];
    k = (char*)tfrdv_verbs__alloc(&c->a, len + 1);
    if (m->rank) d = (int64_t*)tfrdv_verbs__alloc(&c->a, m->rank * sizeof *d);
    if (!k || (m->rank && !d)) {
        tfrdv_verbs__free(&c->a, k, len + 1);
        tfrdv_verbs__free(&c->a, d, m->rank * sizeof *d);
        return;
    }
    tfrdv_verbs__free(&c->a, e->key, e->key_len + 1);
    tfrdv_verbs__free(&c->a, e->dims, e->rank * sizeof *e->dims);
    memcpy(k, key, len);
    k[len] = 0;
    if (m->rank) memcpy(d, m->dims, m->rank * sizeof *d);
    e->key = k;
    e->key_len = len;
    e->dtype = m->dtype;
    e->rank = m->rank;
    e->size = m->size;
    e->dims = d;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__mc_free(tfrdv_verbs__mcache* c) {
    size_t i;
    for (i = 0; i < c->n && c->e; i++) {
        tfrdv_verbs__free(&c->a, c->e[i].key, c->e[i].key_len + 1);
        tfrdv_verbs__free(&c->a, c->e[i].dims, c->e[i].rank * sizeof *c->e[i].dims);
    }
    tfrdv_verbs__free(&c->a, c->e, c->n * sizeof *c->e);
    c->e = 0;
    c->n = 0;
}
/* do two metas describe the same tensor layout? */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__meta_same(const tfrdv_verbs__meta* a, int32_t dtype, int32_t rank,
                                                const int64_t* dims, uint64_t size) {
    return a->dtype == dtype && (int32_t)a->rank == rank && a->size == size &&
           (rank == 0 || memcmp(a->dims, dims, (size_t)rank * sizeof *dims) == 0);
}

TFRDV_API tfrdv_verbs_config tfrdv_verbs_config_init(void) {
    tfrdv_verbs_config c;
    memset(&c, 0, sizeof c); /* every field's zero is its default */
    return c;
}

#ifndef TFRDV_VERBS_PROTOCOL_ONLY
/* >>device  everything below needs <infiniband/verbs.h> (compile time) and libibverbs.so.1
   (run time, loaded with dlopen) */

typedef struct tfrdv_verbs__req tfrdv_verbs__req;
/* the exported libibverbs calls we use (the data path is inline in verbs.h: ctx->ops) */
typedef struct tfrdv_verbs__lib {
    void* h;
    struct ibv_device** (*get_device_list)(int*);
    void (*free_device_list)(struct ibv_device**);
    const char* (*get_device_name)(struct ibv_device*);
    struct ibv_context* (*open_device)(struct ibv_device*);
    int (*close_device)(struct ibv_context*);
    int (*query_device)(struct ibv_context*, struct ibv_device_attr*);
    int (*query_port)(struct ibv_context*, uint8_t, struct _compat_ibv_port_attr*);
    int (*query_gid)(struct ibv_context*, uint8_t, int, union ibv_gid*);
    struct ibv_pd* (*alloc_pd)(struct ibv_context*);
    int (*dealloc_pd)(struct ibv_pd*);
    struct ibv_mr* (*reg_mr)(struct ibv_pd*, void*, size_t, int);
    int (*dereg_mr)(struct ibv_mr*);
    struct ibv_comp_channel* (*create_comp_channel)(struct ibv_context*);
    int (*destroy_comp_channel)(struct ibv_comp_channel*);
    struct ibv_cq* (*create_cq)(struct ibv_context*, int, void*, struct ibv_comp_channel*, int);
    int (*destroy_cq)(struct ibv_cq*);
    int (*get_cq_event)(struct ibv_comp_channel*, struct ibv_cq**, void**);
    void (*ack_cq_events)(struct ibv_cq*, unsigned int);
    struct ibv_qp* (*create_qp)(struct ibv_pd*, struct ibv_qp_init_attr*);
    int (*modify_qp)(struct ibv_qp*, struct ibv_qp_attr*, int);
    int (*destroy_qp)(struct ibv_qp*);
    const char* (*wc_status_str)(enum ibv_wc_status);
} tfrdv_verbs__lib;

enum { TFRDV_VERBS__REQ_FREE, TFRDV_VERBS__REQ_QUEUED, TFRDV_VERBS__REQ_PREP, TFRDV_VERBS__REQ_META,
       TFRDV_VERBS__REQ_DATA, TFRDV_VERBS__REQ_ZOMBIE,
       TFRDV_VERBS__REQ_DELIVER }; /* answered: the slot stays ours until the call took the value */
/* WRITTEN: the value's bytes were written (or its dead META sent); the value stays referenced until
   the receiver's fate for the slot is known: a CANCEL of that slot (it had given up before the
   bytes arrived: the value goes back to the table) or its next REQUEST on the slot (it took it) */
enum { TFRDV_VERBS__SRV_FREE, TFRDV_VERBS__SRV_SERVING, TFRDV_VERBS__SRV_WAIT_RE, TFRDV_VERBS__SRV_QUEUED,
       TFRDV_VERBS__SRV_WRITTEN };
enum { TFRDV_VERBS__PEER_UP, TFRDV_VERBS__PEER_BROKEN };
/* wr_id: kind in the top byte, slot index below */
#define TFRDV_VERBS__WR_RECV ((uint64_t)1 << 56)
#define TFRDV_VERBS__WR_CTRL ((uint64_t)2 << 56)
#define TFRDV_VERBS__WR_DATA ((uint64_t)3 << 56)
#define TFRDV_VERBS__WR_KIND(x) ((x) & ((uint64_t)0xff << 56))

typedef struct tfrdv_verbs__peer tfrdv_verbs__peer;
/* the receiving side of one fetch (a tfrdv_call) */
struct tfrdv_verbs__req {
    struct tfrdv_verbs__req* next; /* wait queue / free list */
    tfrdv_verbs__peer* p;
    tfrdv_call* call;              /* NULL once finished (a zombie waits for the sender) */
    int state, cancelled;
    uint32_t idx, gen;
    tfrdv_value* val;              /* advertised destination (owned) */
    tfrdv_verbs__reg* mr;
    int64_t deadline;
};
/* the serving side of one of the peer's request slots */
typedef struct tfrdv_verbs__srv {
    struct tfrdv_verbs__srv* qnext; /* write queue */
    tfrdv_verbs__peer* p;
    int state, cancel_req, has_buf, has_meta, dead;
    int held;                      /* an OK answer's value (or dead mark) the manager holds for us
                                      (TFRDV_SERVE_CONFIRMS) until delivered or given back */
    uint32_t slot;
    uint64_t addr, cap;
    uint32_t rkey;
    tfrdv_verbs__meta meta;
    int64_t* dims;                 /* TFRDV_VERBS__MAX_RANK entries, allocated on first use */
    tfrdv_value* val;
    tfrdv_verbs__reg* mr;
    tfrdv_cancel_mgr* cm;
    char* key;                     /* the request's step, key, id and the sender's args: what */
    size_t key_len, key_cap;       /* tfrdv_mgr_serve_return needs to give the value back */
    int64_t step, rid;
    tfrdv_args sargs;
} tfrdv_verbs__srv;
/* one RDMA write in flight: the value stays referenced (and registered) until its completion,
   while its request slot is already free (the receiver may reuse it as soon as the bytes land) */
typedef struct tfrdv_verbs__wrec {
    struct tfrdv_verbs__wrec* next;
    tfrdv_value* val;
    tfrdv_verbs__reg* mr;
    uint32_t nwr;
    int busy;
} tfrdv_verbs__wrec;
typedef struct tfrdv_verbs__cnode {
    struct tfrdv_verbs__cnode* next;
    int type;
    size_t len;
    uint8_t bytes[1];
} tfrdv_verbs__cnode;
struct tfrdv_verbs__peer {
    tfrdv_verbs* v;
    char name[TFRDV_VERBS_WORKER_MAX];
    char ename[4 * TFRDV_VERBS_WORKER_MAX]; /* name as printable ASCII (tfrdv_escape): the peer
                                               chose it; every message and log line uses this */
    int state;
    tfrdv_status broken;
    struct ibv_cq* cq;
    struct ibv_qp* qp;
    int fd;                        /* bootstrap socket kept open (-1: none) */
    tfrdv_verbs_info remote;
    uint8_t *rx, *tx;              /* control rings (page-aligned) */
    void *rx_mem, *tx_mem;         /* their allocations */
    struct ibv_mr *rx_mr, *tx_mr;
    uint32_t rx_head, tx_seq, tx_done, slot_size, sq_depth, sq_used, nrecv;
    tfrdv_verbs__credits cr;
    tfrdv_verbs__cnode *cq_head, *cq_tail; /* control messages waiting for credits */
    tfrdv_verbs__srv *wq_head, *wq_tail;   /* writes waiting for send queue room */
    tfrdv_verbs__req** reqs;       /* by slot index */
    uint16_t* gens;                /* generation per slot */
    uint32_t psn;
    tfrdv_verbs__req *req_free, *wait_head, *wait_tail;
    uint32_t nreq_slots, outstanding;
    int untold;                    /* slots freed since the last TAKEN or REQUEST told the peer */
    int64_t idle_since;            /* outstanding became 0 (tfrdv_now_ns: never a test clock) */
    tfrdv_verbs__srv* srv;         /* by the peer's slot index */
    tfrdv_verbs__wrec *wrecs, *wfree; /* sq_depth records */
    uint32_t nsrv;
    int64_t last_rx, last_ping;
    int ping_out;
    uint32_t max_msg;
    uint8_t sockbuf[320];
    size_t socklen;
    /* life cycle (LIFE CYCLE OF A PEER in the header): */
    int released;                  /* broken and its rings, QP, CQ and registrations are freed */
    int pins;                      /* deferred work (todo lists of other threads) pointing into p */
    int has_addr;                  /* tfrdv_verbs_connect's address: this side reconnects */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char host[256];                /* its listener: host name or address, port */
    int port;
    int fresh;                     /* never connected: made by a fetch or a peer_incarnation for a
                                      worker of the table (its first connect runs as a reconnect) */
    int want_reconnect, fails;     /* a call waits for a reconnect; failed attempts in a row */
    int64_t yield_at;              /* our attempt yielded to the peer's (tfrdv_now_ns): if its
                                      connection has not come by then, try again */
    int64_t retry_at;              /* no reconnect attempt before (tfrdv_now_ns) */
    struct tfrdv_verbs__pend* pend;/* the reconnect under way for this record */
    int lost;                      /* a control message could not be queued (out of memory) */
    int64_t doom_at;               /* our receives were flushed: break then (tfrdv_now_ns) unless */
    char doom_msg[TFRDV_STATUS_MSG_MAX]; /* the peer's reason arrives first */
};
/* a bootstrap exchange under way, driven by progress on a non-blocking socket: accepted (receive
   the peer's hello, then answer) or our reconnect (connect, send, receive). The whole exchange
   has one deadline: connect_timeout_ns after it started. */
typedef struct tfrdv_verbs__pend {
    struct tfrdv_verbs__pend* next;
    int fd, outgoing, phase, superseded;
    int64_t deadline;
    tfrdv_verbs__peer* p;          /* the new peer being set up (accepted: once the hello arrived) */
    tfrdv_verbs__peer* origin;     /* outgoing: the broken record whose calls wait */
    uint8_t in[4 + TFRDV_VERBS_INFO_MAX], out[4 + TFRDV_VERBS_INFO_MAX];
    size_t in_len, out_len, out_off;
    char awaiting[TFRDV_VERBS_WORKER_MAX + 1]; /* accepted and answered: the peer, until its READY
                                                  (under v->mu) */
} tfrdv_verbs__pend;
enum { TFRDV_VERBS__PH_CONNECT, TFRDV_VERBS__PH_SEND, TFRDV_VERBS__PH_RECV, TFRDV_VERBS__PH_READY };
#define TFRDV_VERBS__MAX_PENDING 128
/* a tfrdv_verbs_connect under way (on its caller's stack), so that the listener yields to it */
typedef struct tfrdv_verbs__dialing {
    const char* name;
    struct tfrdv_verbs__dialing* next;
} tfrdv_verbs__dialing;
/* the worker table (config.workers), copied into one allocation */
typedef struct tfrdv_verbs__went {
    const char* name;
    const char* host;
    int port;
} tfrdv_verbs__went;
struct tfrdv_verbs {
    tfrdv_verbs_config cfg;
    tfrdv_allocator a;             /* cfg.hooks.allocator: all of v's memory */
    char worker[TFRDV_VERBS_WORKER_MAX];
    tfrdv_verbs__lib lib;
    struct ibv_context* ctx;
    struct ibv_pd* pd;
    struct ibv_comp_channel* ch;
    uint8_t port;
    int gid_index;
    union ibv_gid gid;
    uint16_t lid;
    uint32_t mtu, max_msg, max_qp_wr;
    char desc[200];
    pthread_mutex_t mu;            /* everything below */
    pthread_mutex_t progress_mu;   /* one progress caller at a time */
    pthread_cond_t cv;             /* serves_out or entered reaching 0 */
    tfrdv_verbs__peer** peers;
    int npeers, cap_peers;
    tfrdv_mgr* mgr;
    tfrdv_verbs__rcache rc;
    tfrdv_verbs__mcache mc;
    tfrdv_verbs_stats stats;
    long serves_out;
    tfrdv_verbs__went* wt;         /* the worker table (immutable after create) */
    size_t nwt, wt_bytes;
    int lfd, efd, wfd;             /* listener, epoll, wake eventfd */
    int listen_port;
    pthread_t thr;
    int has_thr;
    int stop, destroying;          /* under mu; destroying: tfrdv_verbs_destroy began */
    long refs;                     /* under mu: the owner's and one per manager using v */
    long entered;                  /* under mu: start_call/cancel_call running (destroy waits) */
    int thr_running, progressing;  /* under mu: the progress thread has not exited; a thread is in
                                      tfrdv_verbs_poll (prog_self) */
    pthread_t prog_self;
    int deferred, finishing;       /* under mu: destroyed from a callback inside the transport:
                                      the last thread to leave it tears it down (finishing) */
    int64_t next_timer;
    tfrdv_verbs__pend* pends;      /* bootstrap exchanges under way (changed by progress only) */
    struct tfrdv_verbs__dialing* dialing; /* tfrdv_verbs_connect calls under way (under mu) */
    int want_reconnect;            /* some record's want_reconnect was set */
    int npends;
    uint8_t* scratch;              /* encode buffer (under mu) */
    uint8_t* rxcopy;               /* a received slot (progress only) */
    int64_t rxdims[TFRDV_VERBS__MAX_RANK];
};

/* ---- small helpers ---- */
TFRDV_VERBS__PRIVATE int64_t tfrdv_verbs__now(tfrdv_verbs* v) {
    return v->mgr ? tfrdv_mgr_now(v->mgr) : tfrdv_now_ns();
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__log(tfrdv_verbs* v, int level, const char* msg) {
    if (v->cfg.hooks.logger.fn) v->cfg.hooks.logger.fn(v->cfg.hooks.logger.user, level, msg);
}
TFRDV_VERBS__PRIVATE tfrdv_code tfrdv_verbs__err(tfrdv_status* st, tfrdv_code code, const char* fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
TFRDV_VERBS__PRIVATE tfrdv_code tfrdv_verbs__err(tfrdv_status* st, tfrdv_code code, const char* fmt, ...) {
    char msg[TFRDV_STATUS_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tfrdv_status_set(st, code, msg);
}
/* a worker name as calls carry it: /job:J/replica:R/task:T, canonical (anything else never matches) */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__worker_ok(const char* name) {
    tfrdv_device_name dn;
    char canon[TFRDV_VERBS_WORKER_MAX + 1];
    size_t n = strlen(name);
    if (n >= TFRDV_VERBS_WORKER_MAX || tfrdv_device_parse(name, n, &dn, 0) != TFRDV_OK || !dn.has_job || !dn.has_replica ||
        !dn.has_task || dn.has_type || dn.has_id)
        return 0;
    return tfrdv_device_format(&dn, canon, sizeof canon) == n && memcmp(canon, name, n) == 0;
}
/* "host:port" (an IPv4 address or a host name) or "[v6]:port" -> host and port; port 0 only when
   listening. 0 and *why (a fixed phrase) when malformed. */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__split(const char* s, int listen, char* host, size_t hcap, int* port, const char** why) {
    const char *h, *colon, *q;
    size_t hl;
    long pn = 0;
    *why = 0;
    for (q = s; *q; q++)
        if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f) { *why = "a byte outside printable ASCII or a space"; return 0; }
    if (s[0] == '[') {
        const char* rb = strchr(s, ']');
        if (!rb || rb[1] != ':') { *why = "expected [v6]:port"; return 0; }
        h = s + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || colon == s) { *why = "expected host:port or [v6]:port"; return 0; }
        for (q = s; q < colon; q++)
            if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '-' || *q == '.' || *q == '_')) {
                *why = "expected host:port or [v6]:port (an IPv6 address goes in brackets)";
                return 0;
            }
        h = s;
        hl = (size_t)(colon - s);
    }
    if (hl == 0 || hl >= hcap) { *why = hl ? "host too long" : "empty host"; return 0; }
    for (q = colon + 1; *q; q++) {
        if (*q < '0' || *q > '9' || pn > 65535) { pn = -1; break; }
        pn = pn * 10 + (*q - '0');
    }
    if (!colon[1] || pn < 0 || pn > 65535 || (pn == 0 && !listen)) {
        *why = listen ? "bad port (0..65535, 0: a free one)" : "bad port (1..65535)";
        return 0;
    }
    memcpy(host, h, hl);
    host[hl] = 0;
    if (s[0] == '[') {
        struct in6_addr a6;
        if (inet_pton(AF_INET6, host, &a6) != 1) { *why = "not an IPv6 address in the brackets"; return 0; }
    }
    *port = (int)pn;
    return 1;
}
TFRDV_VERBS__PRIVATE uint32_t tfrdv_verbs__mtu_bytes(enum ibv_mtu m) {
    switch (m) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
    default: return 1024;
    }
}
TFRDV_VERBS__PRIVATE enum ibv_mtu tfrdv_verbs__mtu_enum(uint32_t b) {
    return b >= 4096 ? IBV_MTU_4096 : b >= 2048 ? IBV_MTU_2048 : b >= 1024 ? IBV_MTU_1024 : b >= 512 ? IBV_MTU_512 : IBV_MTU_256;
}
TFRDV_VERBS__PRIVATE int tfrdv_verbs__query_port(tfrdv_verbs* v, struct ibv_context* c, uint8_t port,
                                                 struct ibv_port_attr* pa) {
    /* what verbs.h's ibv_query_port macro does (spelled out: its helper macro is a GNU extension) */
    struct verbs_context* vctx = verbs_get_ctx(c);
    memset(pa, 0, sizeof *pa);
    if (vctx && vctx->sz >= sizeof *vctx - offsetof(struct verbs_context, query_port) && vctx->query_port)
        return vctx->query_port(c, port, pa, sizeof *pa);
    return v->lib.query_port(c, port, (struct _compat_ibv_port_attr*)pa);
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__gid_str(const uint8_t* g, char* out, size_t cap) {
    static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(g, v4, 12) == 0) tfrdv_verbs__fmt(out, cap, "::ffff:%u.%u.%u.%u", g[12], g[13], g[14], g[15]);
    else if (!inet_ntop(AF_INET6, g, out, (socklen_t)cap)) tfrdv_verbs__fmt(out, cap, "?");
}

/* ---- library ---- */
TFRDV_VERBS__PRIVATE tfrdv_code tfrdv_verbs__load(tfrdv_verbs* v, tfrdv_status* st) {
    const char* name = v->cfg.library ? v->cfg.library : "libibverbs.so.1";
    const char* missing = 0;
    tfrdv_verbs__lib* L = &v->lib;
    L->h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!L->h) {
        const char* e = dlerror();
        return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "RDMA unavailable: cannot load %s (%s); install rdma-core/libibverbs (Debian: ibverbs-providers)", name, e ? e : "?");
    }
#define TFRDV_VERBS__SYM(field, sym)                                         \
    do {                                                                     \
        void* p_ = dlsym(L->h, sym);                                         \
        if (!p_ && !missing) missing = sym;                                  \
        memcpy(&L->field, &p_, sizeof p_);                                   \
    } while (0)
    TFRDV_VERBS__SYM(get_device_list, "ibv_get_device_list");
    TFRDV_VERBS__SYM(free_device_list, "ibv_free_device_list");
    TFRDV_VERBS__SYM(get_device_name, "ibv_get_device_name");
    TFRDV_VERBS__SYM(open_device, "ibv_open_device");
    TFRDV_VERBS__SYM(close_device, "ibv_close_device");
    TFRDV_VERBS__SYM(query_device, "ibv_query_device");
    TFRDV_VERBS__SYM(query_port, "ibv_query_port");
    TFRDV_VERBS__SYM(query_gid, "ibv_query_gid");
    TFRDV_VERBS__SYM(alloc_pd, "ibv_alloc_pd");
    TFRDV_VERBS__SYM(dealloc_pd, "ibv_dealloc_pd");
    TFRDV_VERBS__SYM(reg_mr, "ibv_reg_mr");
    TFRDV_VERBS__SYM(dereg_mr, "ibv_dereg_mr");
    TFRDV_VERBS__SYM(create_comp_channel, "ibv_create_comp_channel");
    TFRDV_VERBS__SYM(destroy_comp_channel, "ibv_destroy_comp_channel");
    TFRDV_VERBS__SYM(create_cq, "ibv_create_cq");
    TFRDV_VERBS__SYM(destroy_cq, "ibv_destroy_cq");
    TFRDV_VERBS__SYM(get_cq_event, "ibv_get_cq_event");
    TFRDV_VERBS__SYM(ack_cq_events, "ibv_ack_cq_events");
    TFRDV_VERBS__SYM(create_qp, "ibv_create_qp");
    TFRDV_VERBS__SYM(modify_qp, "ibv_modify_qp");
    TFRDV_VERBS__SYM(destroy_qp, "ibv_destroy_qp");
    TFRDV_VERBS__SYM(wc_status_str, "ibv_wc_status_str");
#undef TFRDV_VERBS__SYM
    if (missing) {
        dlclose(L->h);
        L->h = 0;
        return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "RDMA unavailable: %s has no symbol %s", name, missing);
    }
    return TFRDV_OK;
}

/* ---- device, port, GID ---- */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__gid_is_v2(const char* dev, int port, int idx) {
    char path[256], buf[32];
    FILE* f;
    size_t n;
    tfrdv_verbs__fmt(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port, idx);
    f = fopen(path, "r");
    if (!f) return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, "v2") != 0;
}
TFRDV_VERBS__PRIVATE tfrdv_code tfrdv_verbs__open(tfrdv_verbs* v, tfrdv_status* st) {
    int n = 0, i, nactive = 0, pick = -1;
    struct ibv_device** list;
    char names[512];
    size_t nl = 0;
    struct ibv_device_attr da;
    struct ibv_port_attr pa;
    errno = 0;
    list = v->lib.get_device_list(&n);
    if (!list) {
        int e = errno;
        return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "RDMA unavailable: ibv_get_device_list failed: %s%s", strerror(e),
                                e == ENOSYS ? " (no kernel RDMA support: load ib_uverbs and a driver, e.g. rdma_rxe)" : "");
    }
    names[0] = 0;
    for (i = 0; i < n; i++) {
        const char* dn = v->lib.get_device_name(list[i]);
        struct ibv_context* c;
        int p, active_port = 0;
        if (v->cfg.device && strcmp(dn, v->cfg.device) != 0) continue;
        c = v->lib.open_device(list[i]);
        if (!c) continue;
        if (v->lib.query_device(c, &da) == 0) {
            for (p = 1; p <= da.phys_port_cnt; p++) {
                if (v->cfg.port && p != v->cfg.port) continue;
                if (tfrdv_verbs__query_port(v, c, (uint8_t)p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE) {
                    active_port = p;
                    break;
                }
            }
        }
        nl += (size_t)tfrdv_verbs__fmt(names + nl, nl < sizeof names ? sizeof names - nl : 0, "%s%s (%s)", nl ? ", " : "", dn,
                               active_port ? "active" : "no active port");
        if (nl >= sizeof names) nl = sizeof names - 1;
        if (active_port) {
            nactive++;
            if (pick < 0) {
                pick = i;
                v->ctx = c;
                v->port = (uint8_t)active_port;
                continue;
            }
        }
        v->lib.close_device(c);
    }
    if (n == 0 || nactive == 0 || (v->cfg.device && pick < 0)) {
        if (v->ctx) v->lib.close_device(v->ctx);
        v->ctx = 0;
        v->lib.free_device_list(list);
        if (v->cfg.device && pick < 0)
            return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "RDMA unavailable: device %s port %d not found or not active (devices: %s)",
                                    v->cfg.device, v->cfg.port, n ? names : "none");
        return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "RDMA unavailable: no RDMA device with an active port (devices: %s)", n ? names : "none");
    }
    if (nactive > 1 && !v->cfg.device) {
        v->lib.close_device(v->ctx);
        v->ctx = 0;
        v->lib.free_device_list(list);
        return tfrdv_verbs__err(st, TFRDV_FAILED_PRECONDITION, "verbs: several RDMA devices have an active port (%s); set tfrdv_verbs_config.device", names);
    }
    tfrdv_verbs__fmt(v->desc, sizeof v->desc, "%s", v->lib.get_device_name(list[pick]));
    v->lib.free_device_list(list);
    if (v->lib.query_device(v->ctx, &da) != 0 || tfrdv_verbs__query_port(v, v->ctx, v->port, &pa) != 0)
        return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: querying %s failed: %s", v->desc, strerror(errno));
    v->lid = pa.lid;
    v->mtu = tfrdv_verbs__mtu_bytes(pa.active_mtu);
    if (v->cfg.mtu && (uint32_t)v->cfg.mtu < v->mtu) v->mtu = (uint32_t)v->cfg.mtu; /* (checked by create) */
    v->max_msg = pa.max_msg_sz ? pa.max_msg_sz : (1u << 30);
    if (v->max_msg > (1u << 30)) v->max_msg = 1u << 30;
    v->max_qp_wr = da.max_qp_wr > 0 ? (uint32_t)da.max_qp_wr : 1024;
    /* GID */
    if (v->cfg.gid && v->cfg.gid[0] >= '0' && v->cfg.gid[0] <= '9' && strspn(v->cfg.gid, "0123456789") == strlen(v->cfg.gid)) {
        int gi = atoi(v->cfg.gid); /* an index (create checked it is 0..255) */
        if (gi >= pa.gid_tbl_len || v->lib.query_gid(v->ctx, v->port, gi, &v->gid) != 0)
            return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "verbs: gid \"%s\": index %d invalid on %s port %d (table has %d entries)",
                                    v->cfg.gid, gi, v->desc, v->port, pa.gid_tbl_len);
        v->gid_index = gi;
    } else if (v->cfg.gid) { /* an address: the GID holding it (IPv4: ::ffff:a.b.c.d), RoCE v2 first */
        uint8_t want[16];
        struct in_addr a4;
        int g, any = -1, v2 = -1;
        union ibv_gid gid;
        memset(want, 0, sizeof want);
        if (inet_pton(AF_INET, v->cfg.gid, &a4) == 1) {
            want[10] = want[11] = 0xff;
            memcpy(want + 12, &a4, 4);
        } else {
            (void)inet_pton(AF_INET6, v->cfg.gid, want); /* (create checked it parses) */
        }
        for (g = 0; g < pa.gid_tbl_len && g < 256 && v2 < 0; g++) {
            if (v->lib.query_gid(v->ctx, v->port, g, &gid) != 0 || memcmp(gid.raw, want, 16) != 0) continue;
            if (any < 0) any = g;
            if (tfrdv_verbs__gid_is_v2(v->desc, v->port, g)) v2 = g;
        }
        if (any < 0)
            return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "verbs: gid \"%s\": no GID of %s port %d holds that address (show_gids lists the table)",
                                    v->cfg.gid, v->desc, v->port);
        v->gid_index = v2 >= 0 ? v2 : any;
        if (v->lib.query_gid(v->ctx, v->port, v->gid_index, &v->gid) != 0)
            return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: ibv_query_gid(%s, %d) failed", v->desc, v->gid_index);
    } else if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
        v->gid_index = 0;
        if (v->lib.query_gid(v->ctx, v->port, 0, &v->gid) != 0) memset(&v->gid, 0, sizeof v->gid);
    } else {
        static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        int c4 = 0, c2 = 0, i4 = -1, i2 = -1, g;
        char cand[256], gs[64];
        size_t cl = 0;
        union ibv_gid gid;
        cand[0] = 0;
        for (g = 0; g < pa.gid_tbl_len && g < 256; g++) {
            static const uint8_t zero[16] = {0};
            if (v->lib.query_gid(v->ctx, v->port, g, &gid) != 0 || memcmp(gid.raw, zero, 16) == 0) continue;
            if (!tfrdv_verbs__gid_is_v2(v->desc, v->port, g)) continue;
            c2++;
            if (i2 < 0) i2 = g;
            if (memcmp(gid.raw, v4, 12) == 0) {
                c4++;
                if (i4 < 0) i4 = g;
                tfrdv_verbs__gid_str(gid.raw, gs, sizeof gs);
                cl += (size_t)tfrdv_verbs__fmt(cand + cl, cl < sizeof cand ? sizeof cand - cl : 0, "%s%d (%s)", cl ? ", " : "", g, gs);
                if (cl >= sizeof cand) cl = sizeof cand - 1;
            }
        }
        if (c4 > 1)
            return tfrdv_verbs__err(st, TFRDV_FAILED_PRECONDITION, "verbs: several RoCE v2 IPv4 GIDs on %s port %d: %s; set tfrdv_verbs_config.gid (an index or an address)",
                                    v->desc, v->port, cand);
        if (c4 == 1) v->gid_index = i4;
        else if (c2 == 1) v->gid_index = i2;
        else if (c2 > 1)
            return tfrdv_verbs__err(st, TFRDV_FAILED_PRECONDITION, "verbs: %d RoCE v2 GIDs (no IPv4 one) on %s port %d; set tfrdv_verbs_config.gid (an index or an address)",
                                    c2, v->desc, v->port);
        else v->gid_index = 0;
        if (v->lib.query_gid(v->ctx, v->port, v->gid_index, &v->gid) != 0)
            return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: ibv_query_gid(%s, %d) failed", v->desc, v->gid_index);
    }
    {
        char gs[64];
        size_t l = strlen(v->desc);
        tfrdv_verbs__gid_str(v->gid.raw, gs, sizeof gs);
        tfrdv_verbs__fmt(v->desc + l, sizeof v->desc - l, " port %d gid %d (%s) mtu %u", v->port, v->gid_index, gs, v->mtu);
    }
    return TFRDV_OK;
}

/* ---- registration hooks for the cache ---- */
TFRDV_VERBS__PRIVATE void* tfrdv_verbs__ibv_reg(void* user, void* addr, size_t len, uint32_t* lkey, uint32_t* rkey) {
    tfrdv_verbs* v = (tfrdv_verbs*)user;
    struct ibv_mr* mr = v->lib.reg_mr(v->pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr) return 0;
    *lkey = mr->lkey;
    *rkey = mr->rkey;
    return mr;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__ibv_dereg(void* user, void* mr) {
    tfrdv_verbs* v = (tfrdv_verbs*)user;
    v->lib.dereg_mr((struct ibv_mr*)mr);
}

/* ---- deferred work: collected under v->mu, run after unlocking ---- */
typedef struct tfrdv_verbs__todo {
    int kind; /* 1 finish, 2 serve, 3 cancel serve, 4 launch request, 5 release value, 6 log,
                 7 give back, 8 answer, 9 delivered (rid) */
    tfrdv_call* call;
    tfrdv_verbs__req* req;
    char* key;        /* 2: heap copy of the key */
    size_t key_len;
    int has_meta;     /* 4: re-allocate for this meta (dims heap copy) */
    tfrdv_verbs__meta meta;
    tfrdv_code code;
    uint32_t detail;  /* 1: the status detail the sender gave */
    tfrdv_value* val;
    int dead;
    tfrdv_verbs__srv* srv;
    int64_t step, rid;
    size_t key_cap;   /* 7: the key's allocation */
    tfrdv_args sargs; /* 7: the sender's args */
    char msg[TFRDV_STATUS_MSG_MAX];
} tfrdv_verbs__todo;
/* the first few entries live in the list itself: the usual list (finish a call, release a
   value, launch the next) allocates nothing, so running out of memory rarely loses work */
#define TFRDV_VERBS__TODO_INLINE 4
typedef struct tfrdv_verbs__todos {
    tfrdv_verbs__todo* t;
    size_t n, cap;
    const tfrdv_allocator* a;
    tfrdv_verbs__todo inl[TFRDV_VERBS__TODO_INLINE];
} tfrdv_verbs__todos;
#define TFRDV_VERBS__TODOS(v) tfrdv_verbs__todos_make(&(v)->a)
TFRDV_VERBS__PRIVATE tfrdv_verbs__todos tfrdv_verbs__todos_make(const tfrdv_allocator* a) {
    tfrdv_verbs__todos l; /* the inline entries are written before they are read */
    l.t = 0;
    l.n = l.cap = 0;
    l.a = a;
    return l;
}
TFRDV_VERBS__PRIVATE tfrdv_verbs__todo* tfrdv_verbs__todo_add(tfrdv_verbs__todos* l) {
    if (!l->t) {
        l->t = l->inl;
        l->cap = TFRDV_VERBS__TODO_INLINE;
    }
    if (l->n == l->cap) {
        size_t nc = l->cap * 2;
        tfrdv_verbs__todo* nt = (tfrdv_verbs__todo*)tfrdv_verbs__alloc(l->a, nc * sizeof *nt);
        if (!nt) return 0;
        memcpy(nt, l->t, l->n * sizeof *nt);
        if (l->t != l->inl) tfrdv_verbs__free(l->a, l->t, l->cap * sizeof *nt);
        l->t = nt;
        l->cap = nc;
    }
    memset(&l->t[l->n], 0, sizeof l->t[0]);
    return &l->t[l->n++];
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__todos_free(tfrdv_verbs__todos* l) {
    if (l->t != l->inl) tfrdv_verbs__free(l->a, l->t, l->cap * sizeof *l->t);
    l->t = 0;
    l->n = l->cap = 0;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__serve_done(void* user, const tfrdv_status* status, const tfrdv_args* send_args,
                                                  tfrdv_value* value, int is_dead);
TFRDV_VERBS__PRIVATE void tfrdv_verbs__launch(tfrdv_verbs* v, tfrdv_verbs__req* req, const tfrdv_verbs__meta* meta);
TFRDV_VERBS__PRIVATE void tfrdv_verbs__send_simple(tfrdv_verbs* v, tfrdv_verbs__peer* p, int type, uint32_t slot,
                                                   tfrdv_verbs__todos* todo);
TFRDV_VERBS__PRIVATE void tfrdv_verbs__req_done(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__req* r,
                                                tfrdv_verbs__todos* todo);
/* runs and empties the list; v->mu NOT held */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__todo_run(tfrdv_verbs* v, tfrdv_verbs__todos* l) {
    size_t i;
    for (i = 0; i < l->n; i++) {
        tfrdv_verbs__todo* t = &l->t[i];
        if (t->kind == 1) {
            tfrdv_status st;
            tfrdv_status_set(&st, t->code, t->msg);
            st.detail = t->detail;
            tfrdv_call_finish_status(t->call, &st, t->val, t->dead, 0);
        } else if (t->kind == 2) {
            tfrdv_verbs__srv* s = t->srv;
            tfrdv_str key;
            key.ptr = t->key;
            key.len = t->key_len;
            if (!v->mgr) {
                tfrdv_status st;
                tfrdv_status_set(&st, TFRDV_UNAVAILABLE, "verbs: this worker serves no manager yet (tfrdv_verbs_attach)");
                tfrdv_verbs__serve_done(s, &st, 0, 0, 0);
            } else if (tfrdv_mgr_serve_ex(v->mgr, t->step, key.ptr, key.len, t->rid, TFRDV_SERVE_CONFIRMS, s->cm,
                                          tfrdv_verbs__serve_done, s) != TFRDV_OK) {
                tfrdv_status st;
                tfrdv_status_set(&st, TFRDV_INTERNAL, "verbs: tfrdv_mgr_serve refused the request");
                tfrdv_verbs__serve_done(s, &st, 0, 0, 0);
            }
            tfrdv_verbs__free(&v->a, t->key, t->key_len + 1);
        } else if (t->kind == 3) {
            tfrdv_cancel_start(t->srv->cm);
            pthread_mutex_lock(&v->mu);
            t->srv->p->pins--; /* the peer may be released now */
            pthread_mutex_unlock(&v->mu);
        } else if (t->kind == 4) {
            tfrdv_verbs__launch(v, t->req, t->has_meta ? &t->meta : 0);
            tfrdv_verbs__free(&v->a, t->meta.dims, t->meta.rank * sizeof *t->meta.dims);
        } else if (t->kind == 5) {
            tfrdv_value_release(t->val);
        } else if (t->kind == 6) {
            tfrdv_verbs__log(v, 2, t->msg);
        } else if (t->kind == 8) { /* an answer: the slot is freed once the call took it */
            tfrdv_verbs__req* r = t->req;
            tfrdv_verbs__peer* p = r->p;
            tfrdv_verbs__todos more = TFRDV_VERBS__TODOS(v);
            int kept = tfrdv_call_finish_status(t->call, 0, t->val, t->dead, 1);
            pthread_mutex_lock(&v->mu);
            p->pins--;
            if (r->state == TFRDV_VERBS__REQ_DELIVER) {
                /* the receiver had given up meanwhile (a cancel or deadline the core saw first):
                   the sender still holds the value and gives it back on this CANCEL, which goes
                   out before any new request on the slot */
                if (kept && p->state == TFRDV_VERBS__PEER_UP)
                    tfrdv_verbs__send_simple(v, p, TFRDV_VERBS__CANCEL, r->idx | ((uint32_t)r->gen << 16), &more);
                tfrdv_verbs__req_done(v, p, r, &more);
            }
            pthread_mutex_unlock(&v->mu);
            if (kept) tfrdv_value_release(t->val);
            tfrdv_verbs__todo_run(v, &more);
            tfrdv_verbs__todos_free(&more);
        } else if (t->kind == 7) { /* an answer the receiver never took goes back to the table */
            if (v->mgr) tfrdv_mgr_serve_return(v->mgr, t->step, t->key, t->key_len, t->rid, &t->sargs, t->val, t->dead, 0);
            else tfrdv_value_release(t->val);
            tfrdv_verbs__free(&v->a, t->key, t->key_cap);
        } else if (t->kind == 9) { /* the receiver took an answer (or it could never travel) */
            if (v->mgr) tfrdv_mgr_serve_delivered(v->mgr, t->rid);
        }
    }
    l->n = 0;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__finish_later(tfrdv_verbs__todos* l, tfrdv_call* call, tfrdv_code code,
                                                    uint32_t detail, const char* msg, tfrdv_value* val, int dead) {
    tfrdv_verbs__todo* t = tfrdv_verbs__todo_add(l);
    *(tfrdv_verbs__req**)tfrdv_call_scratch(call) = 0;
    if (!t) { /* out of memory for a 300-byte list entry: finish here (the only case under mu) */
        tfrdv_value_release(val);
        tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "verbs: out of memory", 0, 0);
        return;
    }
    t->kind = 1;
    t->call = call;
    t->code = code;
    t->detail = detail;
    t->val = val;
    t->dead = dead;
    tfrdv_verbs__fmt(t->msg, sizeof t->msg, "%s", msg ? msg : "");
}

/* ---- sending (v->mu held) ---- */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__break(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_code code, const char* msg,
                                             tfrdv_verbs__todos* todo);
/* post wr on p's queue pair; a refusal breaks the connection (what: "a control message", ...) */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__post_send(tfrdv_verbs* v, tfrdv_verbs__peer* p, struct ibv_send_wr* wr,
                                                const char* what, tfrdv_verbs__todos* todo) {
    struct ibv_send_wr* bad = 0;
    int rc = ibv_post_send(p->qp, wr, &bad);
    if (rc) {
        char m[160];
        tfrdv_verbs__fmt(m, sizeof m, "verbs: posting %s to %s failed: %s", what, p->ename, strerror(rc));
        tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, m, todo);
        return 0;
    }
    return 1;
}
TFRDV_VERBS__PRIVATE int tfrdv_verbs__post_ctrl(tfrdv_verbs* v, tfrdv_verbs__peer* p, const uint8_t* bytes, size_t len,
                                                tfrdv_verbs__todos* todo) {
    uint32_t k = p->tx_seq % (uint32_t)v->cfg.ctrl_slots;
    uint32_t rk = p->tx_seq % p->remote.ctrl_slots;
    uint8_t* slot = p->tx + (size_t)k * (size_t)v->cfg.ctrl_slot_size;
    struct ibv_sge sge;
    struct ibv_send_wr wr;
    memcpy(slot, bytes, len);
    tfrdv_verbs__put32(slot + 4, tfrdv_verbs__credits_take(&p->cr));
    memset(&wr, 0, sizeof wr);
    sge.addr = (uintptr_t)slot;
    sge.length = (uint32_t)len;
    sge.lkey = p->tx_mr->lkey;
    wr.wr_id = TFRDV_VERBS__WR_CTRL;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(TFRDV_VERBS__IMM_CTRL);
    wr.wr.rdma.remote_addr = p->remote.ctrl_addr + (uint64_t)rk * p->remote.ctrl_slot_size;
    wr.wr.rdma.rkey = p->remote.ctrl_rkey;
    if (!tfrdv_verbs__post_send(v, p, &wr, "a control message", todo)) return 0;
    p->tx_seq++;
    p->sq_used++;
    v->stats.ctrl_sent++;
    return 1;
}
TFRDV_VERBS__PRIVATE int tfrdv_verbs__post_write(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__srv* s,
                                                 tfrdv_verbs__todos* todo) {
    uint64_t size = s->dead || !s->val ? 0 : s->val->size, off = 0;
    uint32_t n = 0, idx;
    tfrdv_verbs__wrec* w = p->wfree;
    if (!w) { /* cannot happen: one record per send queue entry */
        tfrdv_verbs__break(v, p, TFRDV_INTERNAL, "verbs: out of write records", todo);
        return 0;
    }
    idx = (uint32_t)(w - p->wrecs);
    for (;;) {
        struct ibv_sge sge;
        struct ibv_send_wr wr;
        uint64_t chunk = size - off;
        int last;
        if (chunk > p->max_msg) chunk = p->max_msg;
        last = off + chunk == size;
        memset(&wr, 0, sizeof wr);
        if (chunk) {
            sge.addr = (uintptr_t)s->val->data + off;
            sge.length = (uint32_t)chunk;
            sge.lkey = s->mr->lkey;
            wr.sg_list = &sge;
            wr.num_sge = 1;
        }
        wr.wr_id = TFRDV_VERBS__WR_DATA | idx;
        wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        wr.send_flags = last ? IBV_SEND_SIGNALED : 0;
        if (last) wr.imm_data = htonl(s->slot);
        wr.wr.rdma.remote_addr = s->addr + off;
        wr.wr.rdma.rkey = s->rkey;
        if (!tfrdv_verbs__post_send(v, p, &wr, "an RDMA write", todo)) return 0;
        n++;
        off += chunk;
        if (last) break;
    }
    p->wfree = w->next;
    w->next = 0;
    w->busy = 1;
    w->val = s->val;
    if (s->val) tfrdv_value_retain(s->val); /* the write's reference; s keeps its own (WRITTEN) */
    w->mr = s->mr;
    w->nwr = n;
    s->mr = 0;
    s->state = TFRDV_VERBS__SRV_WRITTEN;
    p->sq_used += n;
    v->stats.bytes_written += size;
    return 1;
}
TFRDV_VERBS__PRIVATE uint32_t tfrdv_verbs__chunks(const tfrdv_verbs__peer* p, const tfrdv_verbs__srv* s) {
    uint64_t size = s->dead || !s->val ? 0 : s->val->size;
    return size ? (uint32_t)((size + p->max_msg - 1) / p->max_msg) : 1;
}
/* send whatever the credits, the local ring and the send queue allow */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__cnode_free(tfrdv_verbs* v, tfrdv_verbs__cnode* c) {
    tfrdv_verbs__free(&v->a, c, sizeof *c + c->len);
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__pump(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__todos* todo) {
    for (;;) {
        int did = 0;
        if (p->state != TFRDV_VERBS__PEER_UP) return;
        if (p->cq_head && tfrdv_verbs__credits_can_send(&p->cr, p->cq_head->type) &&
            p->tx_seq - p->tx_done < (uint32_t)v->cfg.ctrl_slots && p->sq_used < p->sq_depth) {
            tfrdv_verbs__cnode* c = p->cq_head;
            p->cq_head = c->next;
            if (!p->cq_head) p->cq_tail = 0;
            if (c->type == TFRDV_VERBS__CREDIT && p->cr.owed == 0) {
                tfrdv_verbs__cnode_free(v, c); /* credits already went back with another message */
                continue;
            }
            did = tfrdv_verbs__post_ctrl(v, p, c->bytes, c->len, todo);
            tfrdv_verbs__cnode_free(v, c);
            if (!did) return;
        }
        if (p->wq_head && p->sq_used + tfrdv_verbs__chunks(p, p->wq_head) <= p->sq_depth) {
            tfrdv_verbs__srv* s = p->wq_head;
            p->wq_head = s->qnext;
            if (!p->wq_head) p->wq_tail = 0;
            s->qnext = 0;
            if (!tfrdv_verbs__post_write(v, p, s, todo)) return;
            did = 1;
        }
        if (!did) return;
    }
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__wake(tfrdv_verbs* v);
/* queue one control message (encoded from m) and pump; 0: it does not fit a slot */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__send_msg(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__msg* m,
                                               tfrdv_verbs__todos* todo) {
    size_t cap = v->cfg.ctrl_slot_size < (int)p->remote.ctrl_slot_size ? (size_t)v->cfg.ctrl_slot_size : p->remote.ctrl_slot_size;
    size_t len = tfrdv_verbs__encode(m, v->scratch, cap);
    tfrdv_verbs__cnode* c;
    if (!len) return 0;
    if (p->state != TFRDV_VERBS__PEER_UP) return 1;
    c = (tfrdv_verbs__cnode*)tfrdv_verbs__alloc(&v->a, sizeof *c + len);
    if (!c) { /* the protocol cannot skip a message: progress breaks the connection */
        p->lost = 1;
        v->next_timer = 0;
        tfrdv_verbs__wake(v);
        return 1;
    }
    c->next = 0;
    c->type = m->type;
    c->len = len;
    memcpy(c->bytes, v->scratch, len);
    if (p->cq_tail) p->cq_tail->next = c;
    else p->cq_head = c;
    p->cq_tail = c;
    if (p->cq_head != c) v->stats.ctrl_queued++;
    tfrdv_verbs__pump(v, p, todo);
    return 1;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__send_simple(tfrdv_verbs* v, tfrdv_verbs__peer* p, int type, uint32_t slot,
                                                   tfrdv_verbs__todos* todo) {
    tfrdv_verbs__msg m;
    memset(&m, 0, sizeof m);
    m.type = (uint8_t)type;
    m.slot = slot;
    tfrdv_verbs__send_msg(v, p, &m, todo);
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__send_error_detail(tfrdv_verbs* v, tfrdv_verbs__peer* p, uint32_t slot,
                                                         tfrdv_code code, uint32_t detail, const char* text,
                                                         tfrdv_verbs__todos* todo) {
    tfrdv_verbs__msg m;
    memset(&m, 0, sizeof m);
    m.type = TFRDV_VERBS__ERROR;
    m.slot = slot;
    m.code = (uint32_t)(code >= 1 && code <= 16 ? code : TFRDV_INTERNAL);
    m.detail = detail <= 255 ? detail : 0;
    m.text = text;
    m.text_len = (uint32_t)strlen(text);
    if (m.text_len > 255) m.text_len = 255;
    v->stats.errors_sent++;
    tfrdv_verbs__send_msg(v, p, &m, todo);
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__send_error(tfrdv_verbs* v, tfrdv_verbs__peer* p, uint32_t slot, tfrdv_code code,
                                                  const char* text, tfrdv_verbs__todos* todo) {
    tfrdv_verbs__send_error_detail(v, p, slot, code, 0, text, todo);
}

/* ---- the receiving side (v->mu held unless said otherwise) ---- */
TFRDV_VERBS__PRIVATE tfrdv_verbs__peer* tfrdv_verbs__find_peer(tfrdv_verbs* v, const char* name, size_t len) {
    int i;
    tfrdv_verbs__peer* best = 0;
    for (i = 0; i < v->npeers; i++) {
        tfrdv_verbs__peer* p = v->peers[i];
        if (strlen(p->name) == len && memcmp(p->name, name, len) == 0) {
            best = p;
            if (p->state == TFRDV_VERBS__PEER_UP) return p;
        }
    }
    return best; /* a broken one (its status explains) or NULL */
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__release_later(tfrdv_verbs__todos* l, tfrdv_value* val) {
    tfrdv_verbs__todo* t;
    if (!val) return;
    t = tfrdv_verbs__todo_add(l);
    if (!t) return; /* out of memory: leaking one value beats running user code under mu */
    t->kind = 5;
    t->val = val;
}
/* a slot is free again: release what it holds and start the next waiting call */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__req_done(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__req* r,
                                                tfrdv_verbs__todos* todo) {
    if (r->mr) tfrdv_verbs__rc_put(&v->rc, r->mr);
    r->mr = 0;
    tfrdv_verbs__release_later(todo, r->val);
    r->val = 0;
    if (r->state != TFRDV_VERBS__REQ_QUEUED && r->idx < p->nreq_slots && p->reqs[r->idx] == r) {
        p->reqs[r->idx] = 0;
        p->gens[r->idx] = (uint16_t)((p->gens[r->idx] + 1) & 0x7fff);
        p->outstanding--;
        p->untold = 1;
        if (!p->outstanding) p->idle_since = tfrdv_now_ns();
        if (p->wait_head && p->state == TFRDV_VERBS__PEER_UP) {
            tfrdv_verbs__req* w = p->wait_head;
            tfrdv_verbs__todo* t = tfrdv_verbs__todo_add(todo);
            if (t) {
                p->wait_head = w->next;
                if (!p->wait_head) p->wait_tail = 0;
                w->next = 0;
                w->idx = r->idx;
                w->gen = p->gens[r->idx];
                w->state = TFRDV_VERBS__REQ_PREP;
                p->reqs[r->idx] = w;
                p->outstanding++;
                t->kind = 4;
                t->req = w;
            }
        }
    }
    r->state = TFRDV_VERBS__REQ_FREE;
    r->call = 0;
    r->next = p->req_free;
    p->req_free = r;
}
/* finish r's call (if any) and free its slot; a zombie just frees */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__req_fail_detail(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__req* r,
                                                       tfrdv_code code, uint32_t detail, const char* msg,
                                                       tfrdv_verbs__todos* todo) {
    if (r->call) {
        v->stats.calls_failed++;
        tfrdv_verbs__finish_later(todo, r->call, code, detail, msg, 0, 0);
    }
    r->call = 0;
    tfrdv_verbs__req_done(v, p, r, todo);
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__req_fail(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__req* r, tfrdv_code code,
                                                const char* msg, tfrdv_verbs__todos* todo) {
    tfrdv_verbs__req_fail_detail(v, p, r, code, 0, msg, todo);
}
/* r's answer arrived (val, dead): finish its call after unlocking, keeping the slot until the call
   took the value (tfrdv_verbs__todo kind 8). 0 when out of memory: the caller finishes it. */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__deliver(tfrdv_verbs__peer* p, tfrdv_verbs__req* r, tfrdv_value* val, int dead,
                                              tfrdv_verbs__todos* todo) {
    tfrdv_verbs__todo* t = tfrdv_verbs__todo_add(todo);
    if (!t) return 0;
    *(tfrdv_verbs__req**)tfrdv_call_scratch(r->call) = 0;
    t->kind = 8;
    t->call = r->call;
    t->val = val;
    t->dead = dead;
    t->req = r;
    r->call = 0;
    r->state = TFRDV_VERBS__REQ_DELIVER;
    p->pins++;
    return 1;
}
/* the call gives up (cancel, deadline) while the sender may still write into its buffer: the slot
   stays reserved (a zombie) until the sender answers the CANCEL or the connection breaks */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__req_abandon(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__req* r,
                                                   tfrdv_code code, const char* msg, tfrdv_verbs__todos* todo) {
    if (r->state == TFRDV_VERBS__REQ_QUEUED) {
        tfrdv_verbs__req** pp = &p->wait_head;
        tfrdv_verbs__req* prev = 0;
        while (*pp && *pp != r) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp) *pp = r->next;
        if (p->wait_tail == r) p->wait_tail = prev;
        tfrdv_verbs__req_fail(v, p, r, code, msg, todo);
        return;
    }
    if (r->state == TFRDV_VERBS__REQ_PREP) {
        r->cancelled = code == TFRDV_CANCELLED ? 1 : 2; /* the launcher finishes it */
        return;
    }
    if (r->state != TFRDV_VERBS__REQ_META && r->state != TFRDV_VERBS__REQ_DATA) return;
    v->stats.calls_failed++;
    tfrdv_verbs__finish_later(todo, r->call, code, 0, msg, 0, 0);
    r->call = 0;
    r->state = TFRDV_VERBS__REQ_ZOMBIE;
    tfrdv_verbs__send_simple(v, p, TFRDV_VERBS__CANCEL, r->idx | ((uint32_t)r->gen << 16), todo);
}

/* Prepare the destination buffer (outside mu: the alloc hook is user code) and send REQUEST, or
   RE_REQUEST when meta (the sender's) is given. req is in state PREP with a slot. */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__launch(tfrdv_verbs* v, tfrdv_verbs__req* r, const tfrdv_verbs__meta* meta) {
    tfrdv_verbs__peer* p = r->p;
    tfrdv_call* call = r->call;
    tfrdv_str key = tfrdv_call_key(call);
    tfrdv_verbs__meta m;
    int64_t dims[TFRDV_VERBS__MAX_RANK];
    int have = 0, fits;
    tfrdv_value* val = 0;
    tfrdv_verbs__reg* mr = 0;
    tfrdv_status st;
    tfrdv_verbs__todos todo = TFRDV_VERBS__TODOS(v);
    tfrdv_verbs__msg msg;
    st.code = TFRDV_OK;
    st.msg[0] = 0;
    memset(&m, 0, sizeof m);
    if (meta) {
        m = *meta;
        have = 1;
    } else {
        pthread_mutex_lock(&v->mu);
        have = tfrdv_verbs__mc_get(&v->mc, key.ptr, key.len, &m, dims);
        pthread_mutex_unlock(&v->mu);
    }
    if (have) {
        val = tfrdv_call_alloc_value(call, m.dtype, (int32_t)m.rank, m.dims, m.size);
        if (!val || val->size < m.size || (m.size && !val->data)) {
            tfrdv_value_release(val);
            val = 0;
            if (meta)
                tfrdv_verbs__fmt(st.msg, sizeof st.msg, "verbs: the receiver's alloc hook gave no memory for %llu bytes",
                                 (unsigned long long)m.size);
            if (meta) st.code = TFRDV_RESOURCE_EXHAUSTED;
            else have = 0; /* a cached shape that no longer fits: ask without a buffer (the answer says the size) */
        }
    }
    pthread_mutex_lock(&v->mu);
    if (st.code == TFRDV_OK && val && m.size) mr = tfrdv_verbs__rc_get(&v->rc, val->data, (size_t)m.size, 0, &st);
    if (st.code == TFRDV_OK && r->cancelled)
        tfrdv_status_set(&st, r->cancelled == 1 ? TFRDV_CANCELLED : TFRDV_DEADLINE_EXCEEDED,
                         r->cancelled == 1 ? "verbs: call cancelled" : "verbs: fetch passed its deadline");
    if (st.code == TFRDV_OK && p->state != TFRDV_VERBS__PEER_UP) st = p->broken;
    r->val = val;
    r->mr = mr;
    if (st.code != TFRDV_OK && meta && p->state == TFRDV_VERBS__PEER_UP) {
        /* the sender waits for our RE-REQUEST: withdraw (CANCEL) and keep the slot until it answers */
        r->state = TFRDV_VERBS__REQ_META;
        tfrdv_verbs__req_abandon(v, p, r, st.code, st.msg, &todo);
    } else if (st.code != TFRDV_OK) {
        tfrdv_verbs__req_fail(v, p, r, st.code, st.msg, &todo);
    } else {
        memset(&msg, 0, sizeof msg);
        msg.slot = r->idx | ((uint32_t)r->gen << 16);
        if (have) {
            msg.flags = TFRDV_VERBS__F_BUFFER | TFRDV_VERBS__F_META;
            msg.addr = m.size ? (uint64_t)(uintptr_t)val->data : 0;
            msg.rkey = mr ? mr->rkey : 0;
            msg.cap = m.size;
            msg.meta = m;
            msg.meta.is_dead = 0;
        }
        if (meta) {
            msg.type = TFRDV_VERBS__RE_REQUEST;
            v->stats.re_requests++;
        } else {
            msg.type = TFRDV_VERBS__REQUEST;
            msg.step_id = tfrdv_call_step_id(call);
            msg.request_id = tfrdv_call_request_id(call);
            msg.key = key.ptr;
            msg.key_len = (uint32_t)key.len;
        }
        r->state = have ? TFRDV_VERBS__REQ_DATA : TFRDV_VERBS__REQ_META;
        fits = tfrdv_verbs__send_msg(v, p, &msg, &todo);
        if (!fits) {
            r->state = TFRDV_VERBS__REQ_PREP;
            tfrdv_verbs__req_fail(v, p, r, TFRDV_INVALID_ARGUMENT,
                                  "verbs: key (or shape) too long for a control slot (raise ctrl_slot_size)", &todo);
        }
    }
    pthread_mutex_unlock(&v->mu);
    tfrdv_verbs__todo_run(v, &todo);
    tfrdv_verbs__todos_free(&todo);
}

/* r (a request of p) takes a free slot (returns 1: launch it) or queues (v->mu held) */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__admit(tfrdv_verbs__peer* p, tfrdv_verbs__req* r) {
    r->p = p;
    r->next = 0;
    if (p->state == TFRDV_VERBS__PEER_UP && p->outstanding < p->nreq_slots && !p->wait_head) {
        uint32_t i;
        for (i = 0; i < p->nreq_slots && p->reqs[i]; i++) {}
        r->idx = i;
        r->gen = p->gens[i];
        r->state = TFRDV_VERBS__REQ_PREP;
        p->reqs[i] = r;
        p->outstanding++;
        return 1;
    }
    r->state = TFRDV_VERBS__REQ_QUEUED;
    if (p->wait_tail) p->wait_tail->next = r;
    else p->wait_head = r;
    p->wait_tail = r;
    return 0;
}
TFRDV_VERBS__PRIVATE int tfrdv_verbs__can_reconnect(const tfrdv_verbs* v, const tfrdv_verbs__peer* p) {
    return p->has_addr && (v->cfg.reconnect_backoff_ns >= 0 || p->fresh) && !v->cfg.exchange;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__wake(tfrdv_verbs* v) {
    uint64_t one = 1;
    ssize_t k = write(v->wfd, &one, sizeof one);
    (void)k;
}
/* The transport whose code runs on this thread (progress, start_call, cancel_call: where
   callbacks run): the one piece of global state of this companion, a thread-local pointer. */
static __thread tfrdv_verbs* tfrdv_verbs__inside;
/* v->mu held: destroyed from a callback and nobody is inside v any more (the progress thread
   exited, nobody progresses, no start_call or cancel_call runs): the caller tears it down */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__last_out(tfrdv_verbs* v) {
    if (!v->deferred || v->finishing || v->thr_running || v->progressing || v->entered) return 0;
    v->finishing = 1;
    return 1;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__teardown(tfrdv_verbs* v);
/* a transport entry point (start_call, cancel_call) returns: the last one wakes destroy */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__leave(tfrdv_verbs* v, tfrdv_verbs* outer) {
    int last;
    tfrdv_verbs__inside = outer;
    pthread_mutex_lock(&v->mu);
    if (--v->entered == 0 && v->destroying) pthread_cond_broadcast(&v->cv);
    last = tfrdv_verbs__last_out(v);
    pthread_mutex_unlock(&v->mu);
    if (last) tfrdv_verbs__teardown(v); /* a callback run here destroyed v */
}
/* worker w's bootstrap address: the table, else the resolve callback (user code: no lock may be
   held). OK, NOT_FOUND naming the worker, or INVALID_ARGUMENT (resolve gave a bad address). */
TFRDV_VERBS__PRIVATE tfrdv_code tfrdv_verbs__lookup(tfrdv_verbs* v, const char* w, size_t len, char* host, size_t hcap, int* port,
                                                    tfrdv_status* st) {
    char name[TFRDV_VERBS_WORKER_MAX], addr[300], ew[4 * TFRDV_VERBS_WORKER_MAX], ea[1200];
    const char* why;
    size_t i;
    for (i = 0; i < v->nwt; i++)
        if (strlen(v->wt[i].name) == len && memcmp(v->wt[i].name, w, len) == 0 && strlen(v->wt[i].host) < hcap) {
            memcpy(host, v->wt[i].host, strlen(v->wt[i].host) + 1);
            *port = v->wt[i].port;
            return TFRDV_OK;
        }
    tfrdv_escape(ew, sizeof ew, w, len);
    if (v->cfg.resolve && len < sizeof name) {
        memcpy(name, w, len);
        name[len] = 0;
        addr[0] = 0;
        if (v->cfg.resolve(v->cfg.resolve_user, name, len, addr, sizeof addr) && addr[0]) {
            addr[sizeof addr - 1] = 0;
            if (tfrdv_verbs__split(addr, 0, host, hcap, port, &why)) return TFRDV_OK;
            tfrdv_escape(ea, sizeof ea, addr, strlen(addr));
            return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "verbs: resolve gave %.200s a bad address \"%.200s\": %s", ew, ea, why);
        }
    }
    return tfrdv_verbs__err(st, TFRDV_NOT_FOUND, "No worker known as %.200s (tfrdv_verbs: not connected, not in workers%s)", ew,
                            v->cfg.resolve ? ", unknown to resolve" : "");
}
/* a record for a worker of the table never connected: broken, released, with the address; the
   first fetch or peer_incarnation asks progress to connect it as a reconnect (v->mu held) */
TFRDV_VERBS__PRIVATE tfrdv_verbs__peer* tfrdv_verbs__placeholder(tfrdv_verbs* v, const char* w, size_t len, const char* host, int port) {
    tfrdv_verbs__peer* p;
    if (len >= TFRDV_VERBS_WORKER_MAX) return 0;
    if (v->npeers == v->cap_peers) {
        int nc = v->cap_peers ? v->cap_peers * 2 : 8;
        tfrdv_verbs__peer** np = (tfrdv_verbs__peer**)tfrdv_verbs__alloc(&v->a, (size_t)nc * sizeof *np);
        if (!np) return 0;
        if (v->npeers) memcpy(np, v->peers, (size_t)v->npeers * sizeof *np);
        tfrdv_verbs__free(&v->a, v->peers, (size_t)v->cap_peers * sizeof *np);
        v->peers = np;
        v->cap_peers = nc;
    }
    p = (tfrdv_verbs__peer*)tfrdv_verbs__zalloc_n(&v->a, 1, sizeof *p);
    if (!p) return 0;
    p->v = v;
    p->fd = -1;
    memcpy(p->name, w, len);
    p->name[len] = 0;
    tfrdv_escape(p->ename, sizeof p->ename, p->name, len);
    p->state = TFRDV_VERBS__PEER_BROKEN;
    p->released = 1;
    p->has_addr = 1;
    p->fresh = 1;
    tfrdv_verbs__fmt(p->host, sizeof p->host, "%s", host);
    p->port = port;
    tfrdv_verbs__err(&p->broken, TFRDV_UNAVAILABLE, "verbs: %s not connected yet", p->ename);
    v->peers[v->npeers++] = p;
    v->stats.peers = v->npeers;
    return p;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__start_call(void* user, tfrdv_call* call) {
    tfrdv_verbs* v = (tfrdv_verbs*)user;
    tfrdv_str w = tfrdv_call_src_worker(call);
    tfrdv_verbs__peer* p;
    tfrdv_verbs__req* r = 0;
    tfrdv_verbs* outer = tfrdv_verbs__inside;
    tfrdv_status st;
    int launch = 0, reconnect = 0, port = 0;
    char host[256];
    st.code = TFRDV_OK;
    pthread_mutex_lock(&v->mu);
    *(tfrdv_verbs__req**)tfrdv_call_scratch(call) = 0;
    v->stats.calls_started++;
    if (v->destroying) {
        v->stats.calls_failed++;
        pthread_mutex_unlock(&v->mu);
        tfrdv_call_finish(call, TFRDV_UNAVAILABLE, "verbs transport destroyed", 0, 0);
        return;
    }
    v->entered++; /* tfrdv_verbs_destroy waits until this call has left */
    tfrdv_verbs__inside = v;
    p = tfrdv_verbs__find_peer(v, w.ptr, w.len);
    if ((!p || (p->state != TFRDV_VERBS__PEER_UP && !p->has_addr)) && !v->cfg.exchange) {
        /* never connected, or only accepted: connect on demand to the table's address (looked up
           without the lock: resolve is user code) */
        int found;
        pthread_mutex_unlock(&v->mu);
        found = tfrdv_verbs__lookup(v, w.ptr, w.len, host, sizeof host, &port, &st) == TFRDV_OK;
        pthread_mutex_lock(&v->mu);
        p = tfrdv_verbs__find_peer(v, w.ptr, w.len);
        if (p && st.code != TFRDV_OK) st.code = TFRDV_OK; /* no address: the record's status explains */
        if (found && !p && (p = tfrdv_verbs__placeholder(v, w.ptr, w.len, host, port)) == 0)
            tfrdv_status_set(&st, TFRDV_RESOURCE_EXHAUSTED, "verbs: out of memory");
        else if (found && p->state != TFRDV_VERBS__PEER_UP && !p->has_addr) {
            p->has_addr = 1;
            p->addrlen = 0; /* resolved when progress connects */
            tfrdv_verbs__fmt(p->host, sizeof p->host, "%s", host);
            p->port = port;
        }
    } else if (!p) {
        char ew[4 * TFRDV_VERBS_WORKER_MAX];
        tfrdv_escape(ew, sizeof ew, w.ptr, w.len);
        tfrdv_verbs__err(&st, TFRDV_NOT_FOUND, "No worker known as %.200s (tfrdv_verbs: with an exchange callback, tfrdv_verbs_connect it first)", ew);
    }
    if (st.code != TFRDV_OK) { /* st says why */
    } else if (p->state != TFRDV_VERBS__PEER_UP && !tfrdv_verbs__can_reconnect(v, p)) st = p->broken;
    else if (p->state != TFRDV_VERBS__PEER_UP) {
        int64_t now = tfrdv_now_ns();
        if (!p->pend && now < p->retry_at)
            tfrdv_verbs__err(&st, TFRDV_UNAVAILABLE, "verbs: %s unreachable, reconnect backoff: next attempt in %lld ms (after %d failed; last: %.200s)",
                             p->ename, (long long)((p->retry_at - now + 999999) / 1000000), p->fails, p->broken.msg);
        else
            reconnect = 1; /* the call waits in p's queue for the reconnect progress makes */
    }
    if (st.code == TFRDV_OK) {
        r = p->req_free;
        if (r) p->req_free = r->next;
        else r = (tfrdv_verbs__req*)tfrdv_verbs__alloc(&v->a, sizeof *r);
        if (!r) tfrdv_status_set(&st, TFRDV_RESOURCE_EXHAUSTED, "verbs: out of memory");
    }
    if (st.code != TFRDV_OK) {
        v->stats.calls_failed++;
        pthread_mutex_unlock(&v->mu);
        tfrdv_call_finish(call, st.code, st.msg, 0, 0);
        tfrdv_verbs__leave(v, outer);
        return;
    }
    memset(r, 0, sizeof *r);
    r->call = call;
    r->deadline = tfrdv_call_deadline(call);
    *(tfrdv_verbs__req**)tfrdv_call_scratch(call) = r;
    if (p->outstanding == 0) {
        p->last_rx = tfrdv_verbs__now(v);
        p->ping_out = 0;
    }
    launch = tfrdv_verbs__admit(p, r);
    if (reconnect && !p->pend && !p->yield_at) p->want_reconnect = v->want_reconnect = 1; /* (yielded: the
                                                                                     peer's connection comes) */
    pthread_mutex_unlock(&v->mu);
    if (reconnect) tfrdv_verbs__wake(v);
    if (launch) tfrdv_verbs__launch(v, r, 0);
    tfrdv_verbs__leave(v, outer);
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__cancel_call(void* user, tfrdv_call* call) {
    tfrdv_verbs* v = (tfrdv_verbs*)user;
    tfrdv_verbs__req* r;
    tfrdv_verbs__todos todo = TFRDV_VERBS__TODOS(v);
    tfrdv_verbs* outer = tfrdv_verbs__inside;
    pthread_mutex_lock(&v->mu);
    if (v->destroying) { /* every call already finished */
        pthread_mutex_unlock(&v->mu);
        return;
    }
    v->entered++;
    tfrdv_verbs__inside = v;
    r = *(tfrdv_verbs__req**)tfrdv_call_scratch(call);
    if (r && r->call == call) tfrdv_verbs__req_abandon(v, r->p, r, TFRDV_CANCELLED, "verbs: call cancelled", &todo);
    pthread_mutex_unlock(&v->mu);
    tfrdv_verbs__todo_run(v, &todo);
    tfrdv_verbs__todos_free(&todo);
    tfrdv_verbs__leave(v, outer);
}

/* ---- the serving side ---- */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__srv_free(tfrdv_verbs* v, tfrdv_verbs__srv* s, tfrdv_verbs__todos* todo) {
    if (s->held) { /* its fate is known: delivered (the manager's drain waits for this) */
        tfrdv_verbs__todo* t = tfrdv_verbs__todo_add(todo);
        if (t) {
            t->kind = 9;
            t->rid = s->rid;
        }
        s->held = 0;
    }
    if (s->mr) tfrdv_verbs__rc_put(&v->rc, s->mr);
    s->mr = 0;
    tfrdv_verbs__release_later(todo, s->val);
    s->val = 0;
    s->state = TFRDV_VERBS__SRV_FREE;
}
/* s's value was not delivered (the receiver gave up, or its answer failed): back to the front of
   its key's queue in the attached manager, after unlocking (tfrdv_mgr_serve_return may complete a
   waiting receiver inline). Frees s. */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__give_back(tfrdv_verbs* v, tfrdv_verbs__srv* s, tfrdv_verbs__todos* todo) {
    tfrdv_verbs__todo* t = s->val || s->dead ? tfrdv_verbs__todo_add(todo) : 0;
    if (t) {
        t->kind = 7;
        t->val = s->val;
        t->dead = s->dead;
        t->step = s->step;
        t->rid = s->rid;
        t->key = s->key;
        t->key_len = s->key_len;
        t->key_cap = s->key_cap;
        t->sargs = s->sargs;
        s->key = 0;
        s->key_len = s->key_cap = 0;
        s->val = 0;
        s->dead = 0;
        s->held = 0; /* tfrdv_mgr_serve_return ends the manager's hold */
        v->stats.serves_returned++;
    }
    tfrdv_verbs__srv_free(v, s, todo);
}
/* register the value and queue its write (v->mu held) */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__srv_write(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__srv* s,
                                                 tfrdv_verbs__todos* todo) {
    tfrdv_status st;
    if (s->val && s->val->size) {
        s->mr = tfrdv_verbs__rc_get(&v->rc, s->val->data, (size_t)s->val->size, 0, &st);
        if (!s->mr) {
            tfrdv_verbs__send_error(v, p, s->slot, st.code, st.msg, todo);
            tfrdv_verbs__give_back(v, s, todo);
            return;
        }
    }
    s->state = TFRDV_VERBS__SRV_QUEUED;
    if (p->wq_tail) p->wq_tail->qnext = s;
    else p->wq_head = s;
    p->wq_tail = s;
    tfrdv_verbs__pump(v, p, todo);
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__serve_done(void* user, const tfrdv_status* status, const tfrdv_args* send_args,
                                                  tfrdv_value* value, int is_dead) {
    tfrdv_verbs__srv* s = (tfrdv_verbs__srv*)user;
    tfrdv_verbs__peer* p = s->p;
    tfrdv_verbs* v = p->v;
    tfrdv_verbs__todos todo = TFRDV_VERBS__TODOS(v);
    pthread_mutex_lock(&v->mu);
    if (status->code == TFRDV_OK && s->state == TFRDV_VERBS__SRV_SERVING) {
        if (send_args) s->sargs = *send_args;
        else memset(&s->sargs, 0, sizeof s->sargs);
        s->val = value;
        s->dead = is_dead || !value;
        s->held = s->rid != 0; /* (the manager holds answers to requests with an id) */
    }
    if (p->state != TFRDV_VERBS__PEER_UP || s->state != TFRDV_VERBS__SRV_SERVING) {
        if (s->state == TFRDV_VERBS__SRV_SERVING && status->code == TFRDV_OK) tfrdv_verbs__give_back(v, s, &todo); /* never sent */
        else tfrdv_verbs__release_later(&todo, value);
        if (s->state == TFRDV_VERBS__SRV_SERVING) s->state = TFRDV_VERBS__SRV_FREE;
    } else if (status->code != TFRDV_OK) {
        tfrdv_verbs__send_error_detail(v, p, s->slot, status->code, status->detail, status->msg, &todo);
        tfrdv_verbs__release_later(&todo, value);
        s->state = TFRDV_VERBS__SRV_FREE;
    } else if (s->cancel_req) { /* withdrawn while the answer was on its way: the receiver gave up */
        tfrdv_verbs__send_error(v, p, s->slot, TFRDV_CANCELLED, "verbs: request withdrawn", &todo);
        tfrdv_verbs__give_back(v, s, &todo);
    } else if (is_dead || !value) {
        tfrdv_verbs__msg m;
        memset(&m, 0, sizeof m);
        m.type = TFRDV_VERBS__META;
        m.slot = s->slot;
        m.meta.is_dead = 1;
        if (value) {
            m.meta.dtype = value->dtype;
            m.meta.rank = (uint32_t)(value->rank > 0 ? value->rank : 0);
            m.meta.size = value->size;
            m.meta.dims = (int64_t*)value->dims;
            if (m.meta.rank > TFRDV_VERBS__MAX_RANK) m.meta.rank = 0;
        }
        tfrdv_verbs__send_msg(v, p, &m, &todo);
        s->state = TFRDV_VERBS__SRV_WRITTEN; /* held (s->val, s->dead) until the slot's fate is known */
    } else if (value->rank < 0 || value->rank > TFRDV_VERBS__MAX_RANK) {
        tfrdv_verbs__send_error(v, p, s->slot, TFRDV_UNIMPLEMENTED, "verbs: tensor rank above 254", &todo);
        tfrdv_verbs__srv_free(v, s, &todo); /* no receiver could take it */
    } else {
        if (s->has_buf && s->has_meta && s->cap >= value->size &&
            tfrdv_verbs__meta_same(&s->meta, value->dtype, value->rank, value->dims, value->size)) {
            tfrdv_verbs__srv_write(v, p, s, &todo);
        } else {
            tfrdv_verbs__msg m;
            memset(&m, 0, sizeof m);
            m.type = TFRDV_VERBS__META;
            m.slot = s->slot;
            m.meta.dtype = value->dtype;
            m.meta.rank = (uint32_t)value->rank;
            m.meta.size = value->size;
            m.meta.dims = (int64_t*)value->dims;
            if (!tfrdv_verbs__send_msg(v, p, &m, &todo)) {
                tfrdv_verbs__send_error(v, p, s->slot, TFRDV_UNIMPLEMENTED, "verbs: shape too large for a control slot", &todo);
                tfrdv_verbs__srv_free(v, s, &todo); /* no receiver could take it */
            } else {
                s->state = TFRDV_VERBS__SRV_WAIT_RE;
                v->stats.meta_updates++;
            }
        }
    }
    if (--v->serves_out == 0) pthread_cond_broadcast(&v->cv);
    pthread_mutex_unlock(&v->mu);
    tfrdv_verbs__todo_run(v, &todo);
    tfrdv_verbs__todos_free(&todo);
}

/* ---- a broken connection: every call on it fails, every serve is withdrawn (v->mu held) ---- */
/* tell the peer why its connection breaks: the 'B' frame on the bootstrap socket */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__send_bye(int fd, tfrdv_code code, const char* msg) {
    uint8_t f[4 + 5 + 255];
    size_t n = strlen(msg) > 255 ? 255 : strlen(msg);
    ssize_t wr;
    tfrdv_verbs__put32(f, (uint32_t)(5 + n));
    f[4] = 'B';
    tfrdv_verbs__put32(f + 5, (uint32_t)code);
    memcpy(f + 9, msg, n);
    wr = send(fd, f, 9 + n, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)wr;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__break(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_code code, const char* msg,
                                             tfrdv_verbs__todos* todo) {
    uint32_t i;
    if (p->state == TFRDV_VERBS__PEER_BROKEN) return;
    p->state = TFRDV_VERBS__PEER_BROKEN;
    tfrdv_status_set(&p->broken, code, msg);
    v->stats.peers_broken++;
    if (v->cfg.hooks.logger.fn) { /* the logger is user code: after unlocking */
        tfrdv_verbs__todo* t = tfrdv_verbs__todo_add(todo);
        if (t) {
            t->kind = 6;
            tfrdv_verbs__fmt(t->msg, sizeof t->msg, "%s", msg);
        }
    }
    /* destroying the QP stops the peer's writes into our buffers before we free them */
    if (p->qp) v->lib.destroy_qp(p->qp);
    p->qp = 0;
    if (p->fd >= 0) {
        tfrdv_verbs__send_bye(p->fd, code, msg);
        epoll_ctl(v->efd, EPOLL_CTL_DEL, p->fd, 0);
        close(p->fd);
        p->fd = -1;
    }
    for (i = 0; i < p->nreq_slots; i++) {
        tfrdv_verbs__req* r = p->reqs[i];
        if (!r) continue;
        if (r->state == TFRDV_VERBS__REQ_PREP || r->state == TFRDV_VERBS__REQ_DELIVER) continue; /* its launcher / deliverer */
        tfrdv_verbs__req_fail(v, p, r, code, msg, todo);
    }
    while (p->wait_head) {
        tfrdv_verbs__req* r = p->wait_head;
        p->wait_head = r->next;
        tfrdv_verbs__req_fail(v, p, r, code, msg, todo);
    }
    p->wait_tail = 0;
    for (i = 0; i < p->nsrv; i++) {
        tfrdv_verbs__srv* s = &p->srv[i];
        if (s->state == TFRDV_VERBS__SRV_SERVING) {
            tfrdv_verbs__todo* t = tfrdv_verbs__todo_add(todo);
            if (t) {
                t->kind = 3;
                t->srv = s;
                p->pins++;
            }
        } else if (s->state == TFRDV_VERBS__SRV_QUEUED || s->state == TFRDV_VERBS__SRV_WAIT_RE) {
            tfrdv_verbs__give_back(v, s, todo); /* never written */
        } else if (s->state != TFRDV_VERBS__SRV_FREE) {
            tfrdv_verbs__srv_free(v, s, todo); /* WRITTEN: the receiver most likely took it */
        }
    }
    for (i = 0; i < p->sq_depth && p->wrecs; i++) {
        tfrdv_verbs__wrec* w = &p->wrecs[i];
        if (!w->busy) continue;
        if (w->mr) tfrdv_verbs__rc_put(&v->rc, w->mr);
        tfrdv_verbs__release_later(todo, w->val);
        w->val = 0;
        w->mr = 0;
        w->busy = 0;
    }
    while (p->cq_head) {
        tfrdv_verbs__cnode* c = p->cq_head;
        p->cq_head = c->next;
        tfrdv_verbs__cnode_free(v, c);
    }
    p->cq_tail = 0;
    p->wq_head = p->wq_tail = 0;
}

/* ---- one received control message (v->mu held; the bytes are a private copy) ---- */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__on_ctrl(tfrdv_verbs* v, tfrdv_verbs__peer* p, const uint8_t* buf, size_t len,
                                               tfrdv_verbs__todos* todo) {
    tfrdv_verbs__msg m;
    const char* why;
    char em[TFRDV_STATUS_MSG_MAX];
    uint32_t idx, gen;
    v->stats.ctrl_received++;
    if (!tfrdv_verbs__decode(buf, len, &m, v->rxdims, &why)) {
        tfrdv_verbs__fmt(em, sizeof em, "verbs: protocol error from %s: %s", p->ename, why);
        tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
        return;
    }
    if (!tfrdv_verbs__credits_return(&p->cr, m.credits)) {
        tfrdv_verbs__fmt(em, sizeof em, "verbs: protocol error from %s: %u credits returned, more than its ring holds", p->ename, m.credits);
        tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
        return;
    }
    idx = m.slot & 0xffffu;
    gen = m.slot >> 16;
    switch (m.type) {
    case TFRDV_VERBS__REQUEST: {
        tfrdv_verbs__srv* s;
        tfrdv_verbs__todo* t;
        if (idx < p->nsrv && p->srv[idx].state == TFRDV_VERBS__SRV_WRITTEN)
            tfrdv_verbs__srv_free(v, &p->srv[idx], todo); /* no CANCEL came before: the receiver took it */
        if (idx >= p->nsrv || gen > 0x7fff || p->srv[idx].state != TFRDV_VERBS__SRV_FREE) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: protocol error from %s: request for slot %u which is %s", p->ename, idx,
                     idx >= p->nsrv ? "out of range" : "busy");
            tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
            return;
        }
        s = &p->srv[idx];
        if (!s->dims) s->dims = (int64_t*)tfrdv_verbs__alloc(&v->a, TFRDV_VERBS__MAX_RANK * sizeof *s->dims);
        if (s->cm && tfrdv_cancel_mgr_reset(s->cm) != TFRDV_OK) {
            tfrdv_cancel_mgr_destroy(s->cm);
            s->cm = 0;
        }
        if (!s->cm) {
            tfrdv_hooks h; /* the cancellation manager allocates through ours too */
            memset(&h, 0, sizeof h);
            h.allocator = v->a;
            tfrdv_cancel_mgr_create(&h, &s->cm, 0);
        }
        t = tfrdv_verbs__todo_add(todo);
        if (t) {
            t->key = (char*)tfrdv_verbs__alloc(&v->a, (size_t)m.key_len + 1);
            if (!t->key) todo->n--;
        }
        if (!s->dims || !s->cm || !t || !t->key) {
            if (t && t->key) {
                tfrdv_verbs__free(&v->a, t->key, (size_t)m.key_len + 1);
                todo->n--;
            }
            tfrdv_verbs__send_error(v, p, m.slot, TFRDV_RESOURCE_EXHAUSTED, "verbs: out of memory on the serving side", todo);
            return;
        }
        if (s->key_cap < (size_t)m.key_len + 1) {
            char* k = (char*)tfrdv_verbs__alloc(&v->a, (size_t)m.key_len + 1);
            if (!k) {
                tfrdv_verbs__free(&v->a, t->key, (size_t)m.key_len + 1);
                todo->n--;
                tfrdv_verbs__send_error(v, p, m.slot, TFRDV_RESOURCE_EXHAUSTED, "verbs: out of memory on the serving side", todo);
                return;
            }
            tfrdv_verbs__free(&v->a, s->key, s->key_cap);
            s->key = k;
            s->key_cap = (size_t)m.key_len + 1;
        }
        memcpy(s->key, m.key, m.key_len);
        s->key_len = m.key_len;
        memcpy(t->key, m.key, m.key_len);
        t->key[m.key_len] = 0;
        t->key_len = m.key_len;
        t->kind = 2;
        t->srv = s;
        t->step = m.step_id;
        t->rid = m.request_id;
        s->step = m.step_id;
        s->rid = m.request_id;
        s->dead = 0;
        s->slot = m.slot;
        s->has_buf = (m.flags & TFRDV_VERBS__F_BUFFER) != 0;
        s->has_meta = (m.flags & TFRDV_VERBS__F_META) != 0;
        s->addr = m.addr;
        s->rkey = m.rkey;
        s->cap = m.cap;
        s->meta = m.meta;
        if (s->has_meta && m.meta.rank) memcpy(s->dims, m.meta.dims, m.meta.rank * sizeof *s->dims);
        s->meta.dims = s->dims;
        s->state = TFRDV_VERBS__SRV_SERVING;
        s->cancel_req = 0;
        s->val = 0;
        s->mr = 0;
        v->serves_out++;
        v->stats.requests_served++;
        return;
    }
    case TFRDV_VERBS__RE_REQUEST: {
        tfrdv_verbs__srv* s = idx < p->nsrv ? &p->srv[idx] : 0;
        if (!s || s->slot != m.slot || s->state != TFRDV_VERBS__SRV_WAIT_RE) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: protocol error from %s: re-request for slot %u not waiting for one", p->ename, idx);
            tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
            return;
        }
        if (m.cap < s->val->size) {
            tfrdv_verbs__send_error(v, p, s->slot, TFRDV_INTERNAL, "verbs: re-requested buffer smaller than the tensor", todo);
            tfrdv_verbs__give_back(v, s, todo);
            return;
        }
        s->addr = m.addr;
        s->rkey = m.rkey;
        s->cap = m.cap;
        tfrdv_verbs__srv_write(v, p, s, todo);
        return;
    }
    case TFRDV_VERBS__CANCEL: {
        tfrdv_verbs__srv* s = idx < p->nsrv ? &p->srv[idx] : 0;
        if (!s || s->slot != m.slot) return; /* already answered */
        if (s->state == TFRDV_VERBS__SRV_SERVING) {
            tfrdv_verbs__todo* t = tfrdv_verbs__todo_add(todo);
            s->cancel_req = 1;
            if (t) {
                t->kind = 3;
                t->srv = s;
                p->pins++;
            }
        } else if (s->state == TFRDV_VERBS__SRV_WAIT_RE) {
            tfrdv_verbs__send_error(v, p, s->slot, TFRDV_CANCELLED, "verbs: request withdrawn", todo);
            tfrdv_verbs__give_back(v, s, todo);
        } else if (s->state == TFRDV_VERBS__SRV_QUEUED) { /* not written yet: never will be */
            tfrdv_verbs__srv** pp = &p->wq_head;
            tfrdv_verbs__srv* prev = 0;
            while (*pp && *pp != s) {
                prev = *pp;
                pp = &(*pp)->qnext;
            }
            if (*pp) *pp = s->qnext;
            if (p->wq_tail == s) p->wq_tail = prev;
            s->qnext = 0;
            tfrdv_verbs__send_error(v, p, s->slot, TFRDV_CANCELLED, "verbs: request withdrawn", todo);
            tfrdv_verbs__give_back(v, s, todo);
        } else if (s->state == TFRDV_VERBS__SRV_WRITTEN) {
            /* the receiver gave up before the bytes (or the dead META) arrived: its zombie slot
               drops them, so the value was not delivered */
            tfrdv_verbs__give_back(v, s, todo);
        }
        return;
    }
    case TFRDV_VERBS__META:
    case TFRDV_VERBS__ERROR: {
        tfrdv_verbs__req* r = idx < p->nreq_slots ? p->reqs[idx] : 0;
        if (!r || r->gen != gen ||
            (r->state != TFRDV_VERBS__REQ_META && r->state != TFRDV_VERBS__REQ_DATA && r->state != TFRDV_VERBS__REQ_ZOMBIE)) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: protocol error from %s: answer for slot %u which has no request", p->ename, idx);
            tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
            return;
        }
        if (m.type == TFRDV_VERBS__ERROR) {
            tfrdv_escape(em, sizeof em, m.text, m.text_len); /* the peer's words: printable only */
            tfrdv_verbs__req_fail_detail(v, p, r, (tfrdv_code)m.code, m.detail, em, todo);
            return;
        }
        if (!r->call) { /* zombie: ask again, the sender answers a CANCEL in this state */
            if (m.meta.is_dead) tfrdv_verbs__req_done(v, p, r, todo);
            else tfrdv_verbs__send_simple(v, p, TFRDV_VERBS__CANCEL, m.slot, todo);
            return;
        }
        if (m.meta.is_dead) {
            v->stats.calls_ok++;
            if (tfrdv_verbs__deliver(p, r, 0, 1, todo)) return;
            tfrdv_verbs__finish_later(todo, r->call, TFRDV_OK, 0, "", 0, 1);
            r->call = 0;
            tfrdv_verbs__req_done(v, p, r, todo);
            return;
        }
        if (m.meta.size > TFRDV_VERBS__TENSOR_MAX) { /* refused before it reaches the cache or an allocator */
            tfrdv_verbs__fmt(em, sizeof em, "verbs: %s announced a value of %llu bytes, above the limit of %llu", p->ename,
                             (unsigned long long)m.meta.size, (unsigned long long)TFRDV_VERBS__TENSOR_MAX);
            tfrdv_verbs__req_abandon(v, p, r, TFRDV_RESOURCE_EXHAUSTED, em, todo);
            return;
        }
        {
            tfrdv_str key = tfrdv_call_key(r->call);
            tfrdv_verbs__todo* t = tfrdv_verbs__todo_add(todo);
            tfrdv_verbs__mc_put(&v->mc, key.ptr, key.len, &m.meta);
            if (t && m.meta.rank) {
                t->meta.dims = (int64_t*)tfrdv_verbs__alloc(&v->a, m.meta.rank * sizeof(int64_t));
                if (!t->meta.dims) todo->n--;
            }
            if (!t || (m.meta.rank && !t->meta.dims)) {
                tfrdv_verbs__req_abandon(v, p, r, TFRDV_RESOURCE_EXHAUSTED, "verbs: out of memory", todo);
                return;
            }
            if (m.meta.rank) memcpy(t->meta.dims, m.meta.dims, m.meta.rank * sizeof(int64_t));
            t->meta.dtype = m.meta.dtype;
            t->meta.rank = m.meta.rank;
            t->meta.size = m.meta.size;
            t->has_meta = 1;
            t->kind = 4;
            t->req = r;
            /* drop the old buffer, allocate the new one outside the lock */
            if (r->mr) tfrdv_verbs__rc_put(&v->rc, r->mr);
            r->mr = 0;
            tfrdv_verbs__release_later(todo, r->val);
            r->val = 0;
            r->state = TFRDV_VERBS__REQ_PREP;
        }
        return;
    }
    case TFRDV_VERBS__PING: tfrdv_verbs__send_simple(v, p, TFRDV_VERBS__PONG, 0, todo); return;
    case TFRDV_VERBS__TAKEN: { /* nothing outstanding there: every answer written that it did not
                                  CANCEL (those came first, in order) was taken */
        uint32_t i;
        for (i = 0; i < p->nsrv; i++)
            if (p->srv[i].state == TFRDV_VERBS__SRV_WRITTEN) tfrdv_verbs__srv_free(v, &p->srv[i], todo);
        return;
    }
    default: return; /* CREDIT, PONG: the header did it */
    }
}

TFRDV_VERBS__PRIVATE void tfrdv_verbs__on_sock(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__todos* todo);
/* ---- one work completion (v->mu held) ---- */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__on_wc(tfrdv_verbs* v, tfrdv_verbs__peer* p, const struct ibv_wc* wc,
                                             tfrdv_verbs__todos* todo) {
    uint64_t kind = TFRDV_VERBS__WR_KIND(wc->wr_id);
    char em[TFRDV_STATUS_MSG_MAX];
    if (p->state != TFRDV_VERBS__PEER_UP || p->doom_at) return;
    if (wc->status != IBV_WC_SUCCESS) {
        tfrdv_verbs__fmt(em, sizeof em, "verbs: %s %s failed: %s (status %d)",
                 kind == TFRDV_VERBS__WR_RECV ? "receive from" : kind == TFRDV_VERBS__WR_CTRL ? "control write to" : "RDMA write to",
                 p->ename, v->lib.wc_status_str(wc->status), (int)wc->status);
        if (kind == TFRDV_VERBS__WR_RECV && p->fd >= 0) {
            /* our receives are flushed because the peer's side failed: its reason (e.g. "remote
               access error" for the rkey we advertised) is on its way over the bootstrap
               connection and names the cause better. Wait for it up to 200 ms without holding
               progress: the break happens when it arrives (on_sock) or in timers after that. */
            tfrdv_verbs__fmt(p->doom_msg, sizeof p->doom_msg, "%s", em);
            p->doom_at = tfrdv_now_ns() + 200000000;
            return;
        }
        tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
        return;
    }
    if (kind == TFRDV_VERBS__WR_CTRL) {
        p->tx_done++;
        p->sq_used--;
        tfrdv_verbs__pump(v, p, todo);
        return;
    }
    if (kind == TFRDV_VERBS__WR_DATA) {
        uint32_t idx = (uint32_t)(wc->wr_id & 0xffffffu);
        tfrdv_verbs__wrec* w = idx < p->sq_depth ? &p->wrecs[idx] : 0;
        if (w && w->busy) {
            p->sq_used -= w->nwr;
            if (w->mr) tfrdv_verbs__rc_put(&v->rc, w->mr);
            tfrdv_verbs__release_later(todo, w->val);
            w->val = 0;
            w->mr = 0;
            w->busy = 0;
            w->next = p->wfree;
            p->wfree = w;
        }
        tfrdv_verbs__pump(v, p, todo);
        return;
    }
    /* a receive: repost first, then look at the immediate */
    {
        struct ibv_recv_wr rw, *bad = 0;
        uint32_t imm = ntohl(wc->imm_data);
        memset(&rw, 0, sizeof rw);
        rw.wr_id = TFRDV_VERBS__WR_RECV;
        if (ibv_post_recv(p->qp, &rw, &bad) != 0) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: reposting a receive for %s failed", p->ename);
            tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
            return;
        }
        p->last_rx = tfrdv_verbs__now(v);
        p->ping_out = 0;
        if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: protocol error from %s: a receive without immediate", p->ename);
            tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
            return;
        }
        if (imm == TFRDV_VERBS__IMM_CTRL) {
            uint32_t k = p->rx_head++ % (uint32_t)v->cfg.ctrl_slots;
            size_t len = wc->byte_len;
            if (len > (size_t)v->cfg.ctrl_slot_size) len = (size_t)v->cfg.ctrl_slot_size;
            memcpy(v->rxcopy, p->rx + (size_t)k * (size_t)v->cfg.ctrl_slot_size, len);
            if (tfrdv_verbs__credits_owe(&p->cr) && !p->cq_head) tfrdv_verbs__send_simple(v, p, TFRDV_VERBS__CREDIT, 0, todo);
            tfrdv_verbs__on_ctrl(v, p, v->rxcopy, len, todo);
            tfrdv_verbs__pump(v, p, todo); /* credits may have come back */
        } else {
            uint32_t idx = imm & 0xffffu, gen = imm >> 16;
            tfrdv_verbs__req* r = idx < p->nreq_slots ? p->reqs[idx] : 0;
            if (!r || r->gen != gen || (r->state != TFRDV_VERBS__REQ_DATA && r->state != TFRDV_VERBS__REQ_ZOMBIE)) {
                tfrdv_verbs__fmt(em, sizeof em, "verbs: protocol error from %s: tensor bytes for slot %u which expects none", p->ename, idx);
                tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
                return;
            }
            if (r->call) {
                tfrdv_value* val = r->val;
                uint64_t want = val ? val->size : 0;
                r->val = 0;
                v->stats.bytes_received += want;
                if (want <= p->max_msg && wc->byte_len != want) {
                    tfrdv_verbs__fmt(em, sizeof em, "verbs: %u bytes arrived from %s, %llu expected", wc->byte_len, p->ename,
                             (unsigned long long)want);
                    tfrdv_verbs__release_later(todo, val);
                    tfrdv_verbs__req_fail(v, p, r, TFRDV_DATA_LOSS, em, todo);
                    return;
                }
                v->stats.calls_ok++;
                if (tfrdv_verbs__deliver(p, r, val, 0, todo)) return;
                tfrdv_verbs__finish_later(todo, r->call, TFRDV_OK, 0, "", val, 0);
                r->call = 0;
            }
            tfrdv_verbs__req_done(v, p, r, todo);
        }
    }
}

/* ---- deadlines and keep-alive (v->mu held) ---- */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__timers(tfrdv_verbs* v, int64_t now, tfrdv_verbs__todos* todo) {
    int i;
    char em[TFRDV_STATUS_MSG_MAX];
    for (i = 0; i < v->npeers; i++) {
        tfrdv_verbs__peer* p = v->peers[i];
        uint32_t k;
        tfrdv_verbs__req *w, *wn;
        if (p->state != TFRDV_VERBS__PEER_UP) { /* calls waiting for a reconnect */
            if (p->yield_at && !p->pend && tfrdv_now_ns() >= p->yield_at) {
                p->yield_at = 0;
                if (p->wait_head) p->want_reconnect = v->want_reconnect = 1;
            }
            for (w = p->wait_head; w; w = wn) {
                wn = w->next;
                if (w->deadline <= now) tfrdv_verbs__req_abandon(v, p, w, TFRDV_DEADLINE_EXCEEDED, "verbs: fetch passed its deadline while reconnecting", todo);
            }
            continue;
        }
        if (p->doom_at) { /* its receives were flushed: nothing to send it any more */
            if (tfrdv_now_ns() >= p->doom_at) tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, p->doom_msg, todo);
            continue;
        }
        if (p->lost) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: out of memory: a control message to %s was lost", p->ename);
            tfrdv_verbs__break(v, p, TFRDV_RESOURCE_EXHAUSTED, em, todo);
            continue;
        }
        for (k = 0; k < p->nreq_slots; k++) {
            tfrdv_verbs__req* r = p->reqs[k];
            if (r && r->call && r->deadline <= now &&
                (r->state == TFRDV_VERBS__REQ_META || r->state == TFRDV_VERBS__REQ_DATA)) {
                tfrdv_str key = tfrdv_call_key(r->call);
                char ek[4 * 120 + 1];
                tfrdv_escape(ek, sizeof ek, key.ptr, key.len > 120 ? 120 : key.len);
                tfrdv_verbs__fmt(em, sizeof em, "verbs: fetch of %s from %s passed its deadline", ek, p->ename);
                tfrdv_verbs__req_abandon(v, p, r, TFRDV_DEADLINE_EXCEEDED, em, todo);
            }
        }
        for (w = p->wait_head; w; w = wn) {
            wn = w->next;
            if (w->deadline <= now) tfrdv_verbs__req_abandon(v, p, w, TFRDV_DEADLINE_EXCEEDED, "verbs: fetch passed its deadline while queued", todo);
        }
        if (p->outstanding > 0) {
            int64_t quiet = now - p->last_rx;
            if (quiet > v->cfg.peer_timeout_ns) {
                tfrdv_verbs__fmt(em, sizeof em, "verbs: %s sent nothing for %lld ms with requests outstanding (keep-alive): presumed dead",
                         p->ename, (long long)(quiet / 1000000));
                tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
            } else if (quiet > v->cfg.keepalive_ns && (!p->ping_out || now - p->last_ping > v->cfg.keepalive_ns)) {
                p->ping_out = 1;
                p->last_ping = now;
                v->stats.pings++;
                if (p->fd >= 0) { /* over TCP: never stuck behind a long RDMA write */
                    static const uint8_t ping[5] = {1, 0, 0, 0, 'P'};
                    ssize_t wr = send(p->fd, ping, sizeof ping, MSG_DONTWAIT | MSG_NOSIGNAL);
                    (void)wr;
                } else {
                    tfrdv_verbs__send_simple(v, p, TFRDV_VERBS__PING, 0, todo);
                }
            }
        }
    }
}

/* ---- connection set-up and life cycle ---- */
/* Frees what a peer holds (QP, CQ, control rings and their registrations, slot tables), keeping
   the record: its name, status and address. Nothing may point into those any more: no call in a
   slot or queue, no serve outstanding, no deferred work (v->mu held, or no other thread). */
/* bytes of one control ring's allocation (one page more, to align the ring) */
TFRDV_VERBS__PRIVATE size_t tfrdv_verbs__ring_bytes(const tfrdv_verbs* v) {
    return (size_t)v->cfg.ctrl_slots * (size_t)v->cfg.ctrl_slot_size + 4096;
}
/* a page-aligned control ring inside memory from the allocator; *mem is what to free */
TFRDV_VERBS__PRIVATE uint8_t* tfrdv_verbs__ring_alloc(tfrdv_verbs* v, void** mem) {
    *mem = tfrdv_verbs__alloc(&v->a, tfrdv_verbs__ring_bytes(v));
    if (!*mem) return 0;
    return (uint8_t*)(((uintptr_t)*mem + 4095) & ~(uintptr_t)4095);
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__peer_release(tfrdv_verbs* v, tfrdv_verbs__peer* p) {
    uint32_t i;
    if (p->qp) v->lib.destroy_qp(p->qp);
    p->qp = 0;
    if (p->cq) {
        /* libibverbs' ibv_destroy_cq waits until every completion event of the CQ was acked */
        struct ibv_cq* cq;
        void* cctx;
        while (v->ch && v->lib.get_cq_event(v->ch, &cq, &cctx) == 0) v->lib.ack_cq_events(cq, 1);
        v->lib.destroy_cq(p->cq);
    }
    p->cq = 0;
    if (p->rx_mr) v->lib.dereg_mr(p->rx_mr);
    if (p->tx_mr) v->lib.dereg_mr(p->tx_mr);
    p->rx_mr = p->tx_mr = 0;
    tfrdv_verbs__free(&v->a, p->rx_mem, tfrdv_verbs__ring_bytes(v));
    tfrdv_verbs__free(&v->a, p->tx_mem, tfrdv_verbs__ring_bytes(v));
    p->rx = p->tx = 0;
    p->rx_mem = p->tx_mem = 0;
    for (i = 0; i < p->nreq_slots; i++) tfrdv_verbs__free(&v->a, p->reqs ? p->reqs[i] : 0, sizeof(tfrdv_verbs__req));
    while (p->req_free) {
        tfrdv_verbs__req* r = p->req_free;
        p->req_free = r->next;
        tfrdv_verbs__free(&v->a, r, sizeof *r);
    }
    for (i = 0; i < p->nsrv; i++) {
        tfrdv_verbs__free(&v->a, p->srv[i].dims, TFRDV_VERBS__MAX_RANK * sizeof *p->srv[i].dims);
        tfrdv_verbs__free(&v->a, p->srv[i].key, p->srv[i].key_cap);
        if (p->srv[i].cm) tfrdv_cancel_mgr_destroy(p->srv[i].cm);
    }
    while (p->cq_head) {
        tfrdv_verbs__cnode* c = p->cq_head;
        p->cq_head = c->next;
        tfrdv_verbs__cnode_free(v, c);
    }
    p->cq_tail = 0;
    tfrdv_verbs__free(&v->a, p->srv, p->nsrv * sizeof *p->srv);
    tfrdv_verbs__free(&v->a, p->wrecs, p->sq_depth * sizeof *p->wrecs);
    tfrdv_verbs__free(&v->a, p->reqs, p->nreq_slots * sizeof *p->reqs);
    tfrdv_verbs__free(&v->a, p->gens, p->nreq_slots * sizeof *p->gens);
    p->srv = 0;
    p->wrecs = p->wfree = 0;
    p->reqs = 0;
    p->gens = 0;
    p->nsrv = p->nreq_slots = p->sq_depth = 0;
    p->released = 1;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__peer_free(tfrdv_verbs* v, tfrdv_verbs__peer* p) {
    tfrdv_verbs__peer_release(v, p);
    if (p->fd >= 0) close(p->fd);
    tfrdv_verbs__free(&v->a, p, sizeof *p);
}
/* a broken peer with nothing left pointing into it (v->mu held) */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__peer_idle(const tfrdv_verbs__peer* p) {
    uint32_t i;
    if (p->state == TFRDV_VERBS__PEER_UP || p->outstanding || p->wait_head || p->pend || p->pins) return 0;
    for (i = 0; i < p->nsrv; i++)
        if (p->srv[i].state == TFRDV_VERBS__SRV_SERVING) return 0;
    return 1;
}
TFRDV_VERBS__PRIVATE tfrdv_verbs__peer* tfrdv_verbs__other_record(tfrdv_verbs* v, const tfrdv_verbs__peer* p) {
    int i;
    for (i = 0; i < v->npeers; i++)
        if (v->peers[i] != p && strcmp(v->peers[i]->name, p->name) == 0) return v->peers[i];
    return 0;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__copy_addr(tfrdv_verbs__peer* to, const tfrdv_verbs__peer* from) {
    to->has_addr = from->has_addr;
    to->addr = from->addr;
    to->addrlen = from->addrlen;
    memcpy(to->host, from->host, sizeof to->host);
    to->port = from->port;
}
/* Broken peers whose calls and serves are all finished release their resources; the record
   stays only where it is the one to reconnect (it has an address and no newer record for its
   name exists). Progress only (nothing else frees peers), v->mu held. */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__reclaim(tfrdv_verbs* v) {
    int i;
    for (i = v->npeers - 1; i >= 0; i--) {
        tfrdv_verbs__peer* p = v->peers[i];
        tfrdv_verbs__peer* q;
        if (!tfrdv_verbs__peer_idle(p)) continue;
        if (!p->released) tfrdv_verbs__peer_release(v, p);
        q = tfrdv_verbs__other_record(v, p);
        if (p->has_addr && v->cfg.reconnect_backoff_ns >= 0 && !q) continue;
        if (q && p->has_addr && !q->has_addr) tfrdv_verbs__copy_addr(q, p);
        memmove(v->peers + i, v->peers + i + 1, (size_t)(v->npeers - i - 1) * sizeof *v->peers);
        v->npeers--;
        v->stats.peers = v->npeers;
        tfrdv_verbs__peer_free(v, p);
    }
}
/* a peer with a QP in INIT, receives posted, and the local info to send */
TFRDV_VERBS__PRIVATE tfrdv_verbs__peer* tfrdv_verbs__peer_new(tfrdv_verbs* v, const char* name, tfrdv_verbs_info* local,
                                                              tfrdv_status* st) {
    tfrdv_verbs__peer* p = (tfrdv_verbs__peer*)tfrdv_verbs__zalloc_n(&v->a, 1, sizeof *p);
    size_t ring = (size_t)v->cfg.ctrl_slots * (size_t)v->cfg.ctrl_slot_size;
    uint32_t rq, sq, i;
    struct ibv_qp_init_attr ia;
    struct ibv_qp_attr qa;
    if (!p) {
        tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, "verbs: out of memory");
        return 0;
    }
    p->v = v;
    p->fd = -1;
    tfrdv_verbs__fmt(p->name, sizeof p->name, "%s", name);
    tfrdv_escape(p->ename, sizeof p->ename, p->name, strlen(p->name));
    p->nreq_slots = (uint32_t)v->cfg.max_requests;
    rq = (uint32_t)v->cfg.ctrl_slots + p->nreq_slots;
    sq = (uint32_t)v->cfg.ctrl_slots + 2 * p->nreq_slots + 8;
    if (rq > v->max_qp_wr || sq > v->max_qp_wr) {
        tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "verbs: ctrl_slots + max_requests need %u work requests, the device allows %u",
                         sq, v->max_qp_wr);
        tfrdv_verbs__free(&v->a, p, sizeof *p);
        return 0;
    }
    p->sq_depth = sq;
    p->wrecs = (tfrdv_verbs__wrec*)tfrdv_verbs__zalloc_n(&v->a, sq, sizeof *p->wrecs);
    for (i = 0; p->wrecs && i < sq; i++) {
        p->wrecs[i].next = p->wfree;
        p->wfree = &p->wrecs[i];
    }
    p->reqs = (tfrdv_verbs__req**)tfrdv_verbs__zalloc_n(&v->a, p->nreq_slots, sizeof *p->reqs);
    p->gens = (uint16_t*)tfrdv_verbs__zalloc_n(&v->a, p->nreq_slots, sizeof *p->gens);
    p->rx = tfrdv_verbs__ring_alloc(v, &p->rx_mem);
    p->tx = tfrdv_verbs__ring_alloc(v, &p->tx_mem);
    if (!p->reqs || !p->gens || !p->rx || !p->tx || !p->wrecs) {
        tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, "verbs: out of memory");
        goto fail;
    }
    memset(p->rx, 0, ring);
    p->rx_mr = v->lib.reg_mr(v->pd, p->rx, ring, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    p->tx_mr = v->lib.reg_mr(v->pd, p->tx, ring, IBV_ACCESS_LOCAL_WRITE);
    if (!p->rx_mr || !p->tx_mr) {
        tfrdv_verbs__err(st, TFRDV_RESOURCE_EXHAUSTED, "verbs: registering the control rings (%zu bytes) failed: %s (RLIMIT_MEMLOCK, ulimit -l?)",
                         ring, strerror(errno));
        goto fail;
    }
    p->cq = v->lib.create_cq(v->ctx, (int)(rq + sq + 16), 0, v->ch, 0);
    if (!p->cq || ibv_req_notify_cq(p->cq, 0) != 0) {
        tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: ibv_create_cq(%u) failed: %s", rq + sq + 16, strerror(errno));
        goto fail;
    }
    memset(&ia, 0, sizeof ia);
    ia.send_cq = p->cq;
    ia.recv_cq = p->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = sq;
    ia.cap.max_recv_wr = rq;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    p->qp = v->lib.create_qp(v->pd, &ia);
    if (!p->qp) {
        tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: ibv_create_qp failed: %s", strerror(errno));
        goto fail;
    }
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_INIT;
    qa.pkey_index = 0;
    qa.port_num = v->port;
    qa.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (v->lib.modify_qp(p->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
        tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: QP to INIT (port %d) failed: %s", v->port, strerror(errno));
        goto fail;
    }
    for (i = 0; i < rq; i++) {
        struct ibv_recv_wr rw, *bad = 0;
        memset(&rw, 0, sizeof rw);
        rw.wr_id = TFRDV_VERBS__WR_RECV;
        if (ibv_post_recv(p->qp, &rw, &bad) != 0) {
            tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: posting receives failed");
            goto fail;
        }
    }
    p->nrecv = rq;
    p->slot_size = (uint32_t)v->cfg.ctrl_slot_size;
    p->psn = (uint32_t)(((uint64_t)tfrdv_now_ns() ^ ((uint64_t)(uintptr_t)p >> 4)) * 2654435761u) & 0xffffffu;
    memset(local, 0, sizeof *local);
    local->qpn = p->qp->qp_num;
    local->psn = p->psn;
    local->lid = v->lid;
    memcpy(local->gid, v->gid.raw, 16);
    local->mtu = v->mtu;
    local->ctrl_addr = (uint64_t)(uintptr_t)p->rx;
    local->ctrl_rkey = p->rx_mr->rkey;
    local->ctrl_slots = (uint32_t)v->cfg.ctrl_slots;
    local->ctrl_slot_size = (uint32_t)v->cfg.ctrl_slot_size;
    local->max_requests = p->nreq_slots;
    pthread_mutex_lock(&v->mu);
    local->incarnation = v->mgr ? tfrdv_mgr_incarnation(v->mgr) : 0;
    pthread_mutex_unlock(&v->mu);
    tfrdv_verbs__fmt(local->worker, sizeof local->worker, "%s", v->worker);
    return p;
fail:
    tfrdv_verbs__peer_free(v, p);
    return 0;
}
/* RTR + RTS with the peer's info; the peer is then ready to be published */
TFRDV_VERBS__PRIVATE tfrdv_code tfrdv_verbs__peer_up(tfrdv_verbs* v, tfrdv_verbs__peer* p, const tfrdv_verbs_info* r,
                                                     tfrdv_status* st) {
    struct ibv_qp_attr qa;
    uint32_t i, mtu = r->mtu < v->mtu ? r->mtu : v->mtu;
    p->remote = *r;
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTR;
    qa.path_mtu = tfrdv_verbs__mtu_enum(mtu);
    qa.dest_qp_num = r->qpn;
    qa.rq_psn = r->psn;
    qa.max_dest_rd_atomic = 1;
    qa.min_rnr_timer = 12;
    qa.ah_attr.is_global = 1;
    memcpy(qa.ah_attr.grh.dgid.raw, r->gid, 16);
    qa.ah_attr.grh.sgid_index = (uint8_t)v->gid_index;
    qa.ah_attr.grh.hop_limit = 64;
    qa.ah_attr.dlid = r->lid;
    qa.ah_attr.port_num = v->port;
    if (v->lib.modify_qp(p->qp, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
        return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: QP to RTR failed for %s (mtu %u, dest qpn %u, gid index %d): %s",
                                r->worker, mtu, r->qpn, v->gid_index, strerror(errno));
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTS;
    qa.timeout = (uint8_t)v->cfg.ack_timeout;
    qa.retry_cnt = (uint8_t)v->cfg.retry_cnt;
    qa.rnr_retry = (uint8_t)v->cfg.rnr_retry;
    qa.sq_psn = p->psn;
    qa.max_rd_atomic = 1;
    if (v->lib.modify_qp(p->qp, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                         IBV_QP_MAX_QP_RD_ATOMIC) != 0)
        return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: QP to RTS failed for %s: %s", r->worker, strerror(errno));
    tfrdv_verbs__credits_init(&p->cr, r->ctrl_slots, (uint32_t)v->cfg.ctrl_slots);
    p->srv = (tfrdv_verbs__srv*)tfrdv_verbs__zalloc_n(&v->a, r->max_requests, sizeof *p->srv);
    if (!p->srv) return tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, "verbs: out of memory");
    p->nsrv = r->max_requests;
    for (i = 0; i < p->nsrv; i++) p->srv[i].p = p;
    p->max_msg = v->max_msg;
    p->state = TFRDV_VERBS__PEER_UP;
    p->last_rx = tfrdv_verbs__now(v);
    return TFRDV_OK;
}
/* p (just published, connected) takes over the calls waiting for a reconnect of its name, and
   supersedes such a reconnect under way (v->mu held) */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__takeover(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__todos* todo) {
    int i;
    for (i = 0; i < v->npeers; i++) {
        tfrdv_verbs__peer* q = v->peers[i];
        if (q == p || strcmp(q->name, p->name) != 0) continue;
        if (q->pend) q->pend->superseded = 1;
        q->want_reconnect = 0;
        q->yield_at = 0;
        if (q->has_addr && !p->has_addr) tfrdv_verbs__copy_addr(p, q);
        while (q->wait_head) {
            tfrdv_verbs__req* r = q->wait_head;
            tfrdv_verbs__todo* t = tfrdv_verbs__todo_add(todo);
            if (!t) break; /* out of memory: the call's deadline ends it */
            q->wait_head = r->next;
            if (!q->wait_head) q->wait_tail = 0;
            if (tfrdv_verbs__admit(p, r)) {
                t->kind = 4;
                t->req = r;
            } else {
                todo->n--;
            }
        }
    }
}
TFRDV_VERBS__PRIVATE tfrdv_code tfrdv_verbs__publish(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_status* st,
                                                     tfrdv_verbs__todos* todo) {
    pthread_mutex_lock(&v->mu);
    if (v->npeers == v->cap_peers) {
        int nc = v->cap_peers ? v->cap_peers * 2 : 8;
        tfrdv_verbs__peer** np = (tfrdv_verbs__peer**)tfrdv_verbs__alloc(&v->a, (size_t)nc * sizeof *np);
        if (!np) {
            pthread_mutex_unlock(&v->mu);
            return tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, "verbs: out of memory");
        }
        if (v->npeers) memcpy(np, v->peers, (size_t)v->npeers * sizeof *np);
        tfrdv_verbs__free(&v->a, v->peers, (size_t)v->cap_peers * sizeof *np);
        v->peers = np;
        v->cap_peers = nc;
    }
    v->peers[v->npeers++] = p;
    v->stats.peers = v->npeers;
    if (p->fd >= 0) {
        struct epoll_event ev;
        int fl = fcntl(p->fd, F_GETFL);
        fcntl(p->fd, F_SETFL, fl | O_NONBLOCK);
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN;
        ev.data.ptr = p;
        epoll_ctl(v->efd, EPOLL_CTL_ADD, p->fd, &ev);
    }
    tfrdv_verbs__takeover(v, p, todo);
    pthread_cond_broadcast(&v->cv); /* peer_incarnation waits for it */
    pthread_mutex_unlock(&v->mu);
    return TFRDV_OK;
}
/* all of n bytes, or 0 when the socket fails or the deadline (tfrdv_now_ns) passes first */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__io_until(int fd, void* buf, size_t n, int wr, int64_t deadline) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = wr ? send(fd, (char*)buf + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                       : recv(fd, (char*)buf + done, n - done, MSG_DONTWAIT);
        if (k > 0) {
            done += (size_t)k;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            struct pollfd pf;
            int64_t left = deadline - tfrdv_now_ns();
            if (left <= 0) return 0;
            pf.fd = fd;
            pf.events = (short)(wr ? POLLOUT : POLLIN);
            pf.revents = 0;
            poll(&pf, 1, (int)((left + 999999) / 1000000));
        } else {
            return 0;
        }
    }
    return 1;
}
/* a frame is u32 length + bytes; the whole frame within the deadline */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__send_frame(int fd, const uint8_t* b, size_t n, int64_t deadline) {
    uint8_t f[4 + TFRDV_VERBS_INFO_MAX];
    if (n > TFRDV_VERBS_INFO_MAX) return 0;
    tfrdv_verbs__put32(f, (uint32_t)n);
    memcpy(f + 4, b, n);
    return tfrdv_verbs__io_until(fd, f, 4 + n, 1, deadline);
}
TFRDV_VERBS__PRIVATE int tfrdv_verbs__recv_frame(int fd, uint8_t* b, size_t cap, size_t* n, int64_t deadline) {
    uint8_t h[4];
    if (!tfrdv_verbs__io_until(fd, h, 4, 0, deadline)) return 0;
    *n = tfrdv_verbs__get32(h);
    if (*n > cap) return 0;
    return tfrdv_verbs__io_until(fd, b, *n, 0, deadline);
}
/* a non-blocking TCP socket connecting to sa: 0 connected, 1 in progress, -1 failed (errno) */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__tcp_start(const struct sockaddr* sa, socklen_t len, int* fdp) {
    int one = 1, fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    *fdp = fd;
    if (fd < 0) return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, sa, len) == 0) return 0;
    if (errno == EINPROGRESS) return 1;
    {
        int e = errno;
        close(fd);
        *fdp = -1;
        errno = e;
    }
    return -1;
}

/* ---- bootstrap exchanges under way (progress only; v->mu not held unless said) ---- */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__pend_watch(tfrdv_verbs* v, tfrdv_verbs__pend* e, int op, uint32_t events) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.u64 = (uint64_t)(uintptr_t)e | 1u; /* tagged: peers and the fixed descriptors are even */
    epoll_ctl(v->efd, op, e->fd, &ev);
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__pend_free(tfrdv_verbs* v, tfrdv_verbs__pend* e) {
    tfrdv_verbs__pend** pp;
    if (e->fd >= 0) {
        epoll_ctl(v->efd, EPOLL_CTL_DEL, e->fd, 0);
        close(e->fd);
    }
    if (e->p) tfrdv_verbs__peer_free(v, e->p);
    pthread_mutex_lock(&v->mu);
    for (pp = &v->pends; *pp && *pp != e; pp = &(*pp)->next) {}
    if (*pp) *pp = e->next;
    v->npends--;
    if (e->origin && e->origin->pend == e) e->origin->pend = 0;
    pthread_mutex_unlock(&v->mu);
    tfrdv_verbs__free(&v->a, e, sizeof *e);
}
/* the exchange failed: an accepted one is dropped; our reconnect fails the calls waiting for it
   and opens (or doubles) the backoff window */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__pend_fail(tfrdv_verbs* v, tfrdv_verbs__pend* e, const char* msg) {
    tfrdv_verbs__todos todo = TFRDV_VERBS__TODOS(v);
    tfrdv_verbs__todo* t;
    pthread_mutex_lock(&v->mu);
    /* at once, not after the callbacks below: a call they start must see the backoff window,
       not an attempt still under way that would never take it */
    if (e->origin && e->origin->pend == e) e->origin->pend = 0;
    if (e->outgoing && !e->superseded && e->origin) {
        tfrdv_verbs__peer* q = e->origin;
        int64_t w = v->cfg.reconnect_backoff_ns;
        int k;
        for (k = 1; k < q->fails + 1 && w < v->cfg.reconnect_backoff_max_ns; k++) w *= 2;
        if (w > v->cfg.reconnect_backoff_max_ns) w = v->cfg.reconnect_backoff_max_ns;
        q->fails++;
        q->retry_at = tfrdv_now_ns() + w;
        v->stats.reconnect_failures++;
        tfrdv_verbs__err(&q->broken, TFRDV_UNAVAILABLE, "%s (reconnect backoff %lld ms)", msg, (long long)(w / 1000000));
        while (q->wait_head) {
            tfrdv_verbs__req* r = q->wait_head;
            q->wait_head = r->next;
            tfrdv_verbs__req_fail(v, q, r, TFRDV_UNAVAILABLE, q->broken.msg, &todo);
        }
        q->wait_tail = 0;
        pthread_cond_broadcast(&v->cv); /* peer_incarnation waits for it */
    } else if (!e->outgoing) {
        v->stats.bootstraps_dropped++;
    }
    if (!e->superseded && v->cfg.hooks.logger.fn && (t = tfrdv_verbs__todo_add(&todo)) != 0) {
        t->kind = 6;
        tfrdv_verbs__fmt(t->msg, sizeof t->msg, "%s", msg);
    }
    pthread_mutex_unlock(&v->mu);
    tfrdv_verbs__todo_run(v, &todo);
    tfrdv_verbs__todos_free(&todo);
    tfrdv_verbs__pend_free(v, e);
}
/* set by tfrdv_verbs__takeover (any thread) under v->mu */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__pend_superseded(tfrdv_verbs* v, const tfrdv_verbs__pend* e) {
    int x;
    pthread_mutex_lock(&v->mu);
    x = e->superseded;
    pthread_mutex_unlock(&v->mu);
    return x;
}
TFRDV_VERBS__PRIVATE tfrdv_verbs__pend* tfrdv_verbs__pend_new(tfrdv_verbs* v, int fd) {
    tfrdv_verbs__pend* e = (tfrdv_verbs__pend*)tfrdv_verbs__zalloc_n(&v->a, 1, sizeof *e);
    if (!e) return 0;
    e->fd = fd;
    e->deadline = tfrdv_now_ns() + v->cfg.connect_timeout_ns;
    pthread_mutex_lock(&v->mu);
    e->next = v->pends;
    v->pends = e;
    v->npends++;
    pthread_mutex_unlock(&v->mu);
    return e;
}
/* the exchange is done: the peer goes live with the socket */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__pend_done(tfrdv_verbs* v, tfrdv_verbs__pend* e) {
    tfrdv_verbs__todos todo = TFRDV_VERBS__TODOS(v);
    tfrdv_verbs__peer* p = e->p;
    tfrdv_status st;
    epoll_ctl(v->efd, EPOLL_CTL_DEL, e->fd, 0);
    p->fd = e->fd;
    e->fd = -1;
    e->p = 0;
    if (e->outgoing) {
        pthread_mutex_lock(&v->mu);
        tfrdv_verbs__copy_addr(p, e->origin);
        if (!e->origin->fresh) v->stats.reconnects++;
        pthread_mutex_unlock(&v->mu);
    }
    if (tfrdv_verbs__publish(v, p, &st, &todo) != TFRDV_OK) {
        tfrdv_verbs__log(v, 3, st.msg);
        tfrdv_verbs__send_bye(p->fd, st.code, st.msg); /* the peer's calls fail naming why */
        tfrdv_verbs__peer_free(v, p);
    }
    tfrdv_verbs__pend_free(v, e);
    tfrdv_verbs__todo_run(v, &todo);
    tfrdv_verbs__todos_free(&todo);
}
/* an outgoing exchange to worker `name` is under way, on progress or in tfrdv_verbs_connect
   (v->mu held) */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__connecting(tfrdv_verbs* v, const char* name) {
    const tfrdv_verbs__dialing* d;
    int i;
    for (i = 0; i < v->npeers; i++)
        if (v->peers[i]->pend && !v->peers[i]->pend->superseded && strcmp(v->peers[i]->name, name) == 0) return 1;
    for (d = v->dialing; d; d = d->next)
        if (strcmp(d->name, name) == 0) return 1;
    return 0;
}
/* tfrdv_verbs_connect's wait for worker `name`'s own connection to this side (CONNECTIONS: its
   listener yielded, or crossed ours): 1 once it is up; 0 at the deadline or, with while_answered,
   as soon as no exchange accepted from it waits for its READY */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__await_peer(tfrdv_verbs* v, const char* name, int64_t deadline, int while_answered) {
    for (;;) {
        struct timespec ts = {0, 1000000};
        const tfrdv_verbs__pend* e;
        tfrdv_verbs__peer* p;
        int up, answered = 0;
        pthread_mutex_lock(&v->mu);
        p = tfrdv_verbs__find_peer(v, name, strlen(name));
        up = p && p->state == TFRDV_VERBS__PEER_UP;
        for (e = v->pends; e && !answered; e = e->next) answered = strcmp(e->awaiting, name) == 0;
        pthread_mutex_unlock(&v->mu);
        if (up) return 1;
        if ((while_answered && !answered) || tfrdv_now_ns() >= deadline) return 0;
        if (v->has_thr || tfrdv_verbs_poll(v, 1000000) == 0) nanosleep(&ts, 0);
    }
}
/* drive one exchange as far as its socket allows */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__pend_step(tfrdv_verbs* v, tfrdv_verbs__pend* e) {
    char em[TFRDV_STATUS_MSG_MAX];
    const char* who = e->p ? e->p->ename : "a bootstrap peer";
    tfrdv_verbs_info remote, local;
    tfrdv_status st;
    size_t n;
    if (e->outgoing && tfrdv_verbs__pend_superseded(v, e)) {
        tfrdv_verbs__pend_fail(v, e, "verbs: reconnect superseded");
        return;
    }
    if (e->phase == TFRDV_VERBS__PH_CONNECT) {
        struct pollfd pf;
        int err = 0;
        socklen_t el = sizeof err;
        pf.fd = e->fd;
        pf.events = POLLOUT;
        pf.revents = 0;
        if (poll(&pf, 1, 0) <= 0) return;
        if (getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
        if (err) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: cannot connect to %s at %s:%d: %s", who, e->origin->host, e->origin->port, strerror(err));
            tfrdv_verbs__pend_fail(v, e, em);
            return;
        }
        e->phase = TFRDV_VERBS__PH_SEND;
    }
    if (e->phase == TFRDV_VERBS__PH_SEND) {
        while (e->out_off < e->out_len) {
            ssize_t k = send(e->fd, e->out + e->out_off, e->out_len - e->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
                tfrdv_verbs__pend_watch(v, e, EPOLL_CTL_MOD, EPOLLOUT);
                return;
            }
            if (k <= 0) {
                tfrdv_verbs__fmt(em, sizeof em, "verbs: bootstrap exchange with %s failed: %s", who, k < 0 ? strerror(errno) : "closed");
                tfrdv_verbs__pend_fail(v, e, em);
                return;
            }
            e->out_off += (size_t)k;
        }
        /* accepted: wait for the peer's READY (its QP is RTR) before anything is written to it */
        e->phase = e->outgoing ? TFRDV_VERBS__PH_RECV : TFRDV_VERBS__PH_READY;
        e->in_len = 0;
        tfrdv_verbs__pend_watch(v, e, EPOLL_CTL_MOD, EPOLLIN);
    }
    if (e->phase == TFRDV_VERBS__PH_READY) { /* u32 0 */
        while (e->in_len < 4) {
            ssize_t k = recv(e->fd, e->in + e->in_len, 4 - e->in_len, MSG_DONTWAIT);
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
            if (k <= 0) {
                tfrdv_verbs__fmt(em, sizeof em, "verbs: bootstrap connection from %s closed before its READY", who);
                tfrdv_verbs__pend_fail(v, e, em);
                return;
            }
            e->in_len += (size_t)k;
        }
        if (tfrdv_verbs__get32(e->in) != 0) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: bootstrap connection from %s sent %u where its READY (0) belongs; dropped", who,
                             (unsigned)tfrdv_verbs__get32(e->in));
            tfrdv_verbs__pend_fail(v, e, em);
            return;
        }
        tfrdv_verbs__pend_done(v, e);
        return;
    }
    for (;;) { /* PH_RECV: u32 length, then the peer's info */
        size_t need = e->in_len < 4 ? 4 : 4 + (size_t)tfrdv_verbs__get32(e->in);
        ssize_t k;
        if (need > sizeof e->in) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: bootstrap hello of %zu bytes from %s is too long; dropped", need - 4, who);
            tfrdv_verbs__pend_fail(v, e, em);
            return;
        }
        if (e->in_len >= 4 && e->in_len == need) break;
        k = recv(e->fd, e->in + e->in_len, need - e->in_len, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        if (k <= 0) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: bootstrap connection %s %s before the exchange finished", e->outgoing ? "to" : "from", who);
            tfrdv_verbs__pend_fail(v, e, em);
            return;
        }
        e->in_len += (size_t)k;
    }
    if (e->outgoing && e->in_len == 4) { /* a yield: the peer connects to us at this moment */
        pthread_mutex_lock(&v->mu);
        e->origin->yield_at = tfrdv_now_ns() + v->cfg.connect_timeout_ns;
        pthread_mutex_unlock(&v->mu);
        tfrdv_verbs__pend_free(v, e); /* the calls wait for the peer's connection (takeover) */
        return;
    }
    if (tfrdv_verbs_info_decode(e->in + 4, e->in_len - 4, &remote, &st) != TFRDV_OK) {
        tfrdv_verbs__fmt(em, sizeof em, "verbs: bootstrap connection %s %s without a valid peer info (%s); dropped",
                         e->outgoing ? "to" : "from", who, st.msg);
        tfrdv_verbs__pend_fail(v, e, em);
        return;
    }
    if (e->outgoing) {
        if (strcmp(remote.worker, e->p->name) != 0) {
            char ew[4 * TFRDV_VERBS_WORKER_MAX];
            tfrdv_escape(ew, sizeof ew, remote.worker, strlen(remote.worker));
            tfrdv_verbs__fmt(em, sizeof em, "verbs: connected to %s but it says it is %s", e->p->ename, ew);
        }
        else if (tfrdv_verbs__peer_up(v, e->p, &remote, &st) != TFRDV_OK)
            tfrdv_verbs__fmt(em, sizeof em, "%s", st.msg);
        else if (send(e->fd, "\0\0\0\0", 4, MSG_DONTWAIT | MSG_NOSIGNAL) != 4) /* READY: our QP is RTR (4 bytes
                                                                         into an idle socket) */
            tfrdv_verbs__fmt(em, sizeof em, "verbs: bootstrap connection to %s: sending READY failed: %s", e->p->ename, strerror(errno));
        else em[0] = 0;
        if (em[0]) tfrdv_verbs__pend_fail(v, e, em);
        else tfrdv_verbs__pend_done(v, e);
        return;
    } else {
        tfrdv_verbs__todos todo = TFRDV_VERBS__TODOS(v);
        tfrdv_verbs__peer* q;
        int dup, yield;
        pthread_mutex_lock(&v->mu);
        q = tfrdv_verbs__find_peer(v, remote.worker, strlen(remote.worker));
        /* a peer reconnecting closed its old connection first: see that close before judging */
        if (q && q->state == TFRDV_VERBS__PEER_UP) tfrdv_verbs__on_sock(v, q, &todo);
        dup = q && q->state == TFRDV_VERBS__PEER_UP;
        /* both sides connecting to each other at once: the smaller worker name's connection goes
           on; the larger side accepts it, and this side (the smaller) answers the peer's with a
           yield (u32 length 0) so its calls wait for ours instead of failing; also when ours just
           went up (it crossed the peer's hello) */
        yield = strcmp(v->worker, remote.worker) < 0 && (dup || tfrdv_verbs__connecting(v, remote.worker));
        pthread_mutex_unlock(&v->mu);
        tfrdv_verbs__todo_run(v, &todo);
        tfrdv_verbs__todos_free(&todo);
        if (yield) {
            static const uint8_t zero[4] = {0, 0, 0, 0};
            ssize_t k = send(e->fd, zero, 4, MSG_DONTWAIT | MSG_NOSIGNAL); /* (4 bytes into an idle socket) */
            (void)k;
            tfrdv_verbs__pend_free(v, e);
            return;
        }
        if (dup) {
            char ew[4 * TFRDV_VERBS_WORKER_MAX];
            tfrdv_escape(ew, sizeof ew, remote.worker, strlen(remote.worker));
            tfrdv_verbs__fmt(em, sizeof em, "verbs: %s connected again while connected; refused", ew);
            tfrdv_verbs__pend_fail(v, e, em);
            return;
        }
        e->p = tfrdv_verbs__peer_new(v, remote.worker, &local, &st);
        if (!e->p || tfrdv_verbs__peer_up(v, e->p, &remote, &st) != TFRDV_OK) {
            tfrdv_verbs__pend_fail(v, e, st.msg);
            return;
        }
        n = tfrdv_verbs_info_encode(&local, e->out + 4, sizeof e->out - 4);
        tfrdv_verbs__put32(e->out, (uint32_t)n);
        e->out_len = n + 4;
        e->phase = TFRDV_VERBS__PH_SEND;
        pthread_mutex_lock(&v->mu);
        tfrdv_verbs__fmt(e->awaiting, sizeof e->awaiting, "%s", remote.worker);
        pthread_mutex_unlock(&v->mu);
        tfrdv_verbs__pend_step(v, e);
    }
}
/* an accepted bootstrap connection */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__pend_accept(tfrdv_verbs* v, int fd) {
    tfrdv_verbs__pend* e;
    int one = 1;
    if (v->npends >= TFRDV_VERBS__MAX_PENDING || (e = tfrdv_verbs__pend_new(v, fd)) == 0) {
        tfrdv_verbs__log(v, 2, "verbs: too many bootstrap connections under way; one refused");
        pthread_mutex_lock(&v->mu);
        v->stats.bootstraps_dropped++;
        pthread_mutex_unlock(&v->mu);
        close(fd);
        return;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    e->phase = TFRDV_VERBS__PH_RECV;
    tfrdv_verbs__pend_watch(v, e, EPOLL_CTL_ADD, EPOLLIN);
    tfrdv_verbs__pend_step(v, e);
}
/* a reconnect to q, whose calls wait (q stays: a record with a reconnect under way is never
   freed, and only progress frees records) */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__pend_reconnect(tfrdv_verbs* v, tfrdv_verbs__peer* q) {
    tfrdv_verbs_info local;
    tfrdv_status st;
    char em[TFRDV_STATUS_MSG_MAX];
    tfrdv_verbs__pend* e = tfrdv_verbs__pend_new(v, -1);
    int rc;
    size_t n;
    if (!e) return; /* out of memory: the calls' deadlines end them */
    e->outgoing = 1;
    e->origin = q;
    pthread_mutex_lock(&v->mu);
    q->pend = e;
    pthread_mutex_unlock(&v->mu);
    e->p = tfrdv_verbs__peer_new(v, q->name, &local, &st);
    if (!e->p) {
        tfrdv_verbs__pend_fail(v, e, st.msg);
        return;
    }
    n = tfrdv_verbs_info_encode(&local, e->out + 4, sizeof e->out - 4);
    tfrdv_verbs__put32(e->out, (uint32_t)n);
    e->out_len = n + 4;
    if (!q->addrlen) { /* a table address never connected: resolved here, on progress (a host name
                          waits for the resolver) */
        struct addrinfo hints, *ai = 0;
        char ps[16];
        int gr;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        tfrdv_verbs__fmt(ps, sizeof ps, "%d", q->port);
        if ((gr = getaddrinfo(q->host, ps, &hints, &ai)) != 0 || !ai || ai->ai_addrlen > sizeof q->addr) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: cannot resolve %s's address %s:%d: %s", q->ename, q->host, q->port,
                             gr ? gai_strerror(gr) : "no address");
            if (ai) freeaddrinfo(ai);
            tfrdv_verbs__pend_fail(v, e, em);
            return;
        }
        pthread_mutex_lock(&v->mu);
        memcpy(&q->addr, ai->ai_addr, ai->ai_addrlen);
        q->addrlen = (socklen_t)ai->ai_addrlen;
        pthread_mutex_unlock(&v->mu);
        freeaddrinfo(ai);
    }
    rc = tfrdv_verbs__tcp_start((const struct sockaddr*)&q->addr, q->addrlen, &e->fd);
    if (rc < 0) {
        tfrdv_verbs__fmt(em, sizeof em, "verbs: cannot connect to %s at %s:%d: %s", q->ename, q->host, q->port, strerror(errno));
        tfrdv_verbs__pend_fail(v, e, em);
        return;
    }
    e->phase = rc == 0 ? TFRDV_VERBS__PH_SEND : TFRDV_VERBS__PH_CONNECT;
    tfrdv_verbs__pend_watch(v, e, EPOLL_CTL_ADD, EPOLLOUT);
    tfrdv_verbs__pend_step(v, e);
}
/* deadlines of the exchanges, and the reconnects calls asked for; returns the time to the next
   deadline (ns, or -1 when none) */
TFRDV_VERBS__PRIVATE int64_t tfrdv_verbs__pend_timers(tfrdv_verbs* v) {
    tfrdv_verbs__pend *e, *next;
    int64_t now = tfrdv_now_ns(), soonest = -1;
    char em[TFRDV_STATUS_MSG_MAX];
    for (;;) { /* reconnects asked for (at most one under way per record) */
        tfrdv_verbs__peer* q = 0;
        int i;
        pthread_mutex_lock(&v->mu);
        for (i = 0; i < v->npeers && !q; i++)
            if (v->peers[i]->want_reconnect && !v->peers[i]->pend && !v->destroying) q = v->peers[i];
        if (q) q->want_reconnect = 0;
        pthread_mutex_unlock(&v->mu);
        if (!q) break;
        tfrdv_verbs__pend_reconnect(v, q);
    }
    for (e = v->pends; e; e = next) {
        next = e->next;
        if (e->outgoing && tfrdv_verbs__pend_superseded(v, e)) {
            tfrdv_verbs__pend_fail(v, e, "verbs: reconnect superseded");
        } else if (now >= e->deadline) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: bootstrap exchange %s %s did not finish within connect_timeout_ns (%lld ms); dropped",
                             e->outgoing ? "to" : "from", e->p ? e->p->ename : "a peer", (long long)(v->cfg.connect_timeout_ns / 1000000));
            tfrdv_verbs__pend_fail(v, e, em);
        } else if (soonest < 0 || e->deadline - now < soonest) {
            soonest = e->deadline - now;
        }
    }
    return soonest;
}
TFRDV_VERBS__PRIVATE tfrdv_code tfrdv_verbs__connect_now(tfrdv_verbs* v, const char* peer_worker, const char* host, int port,
                                                         tfrdv_status* st) {
    tfrdv_verbs_info local, remote;
    uint8_t lb[TFRDV_VERBS_INFO_MAX], rb[TFRDV_VERBS_INFO_MAX];
    size_t ln, rn = 0;
    tfrdv_verbs__peer* p;
    tfrdv_verbs__todos todo = TFRDV_VERBS__TODOS(v);
    struct sockaddr_storage sa;
    socklen_t salen = 0;
    int fd = -1;
    tfrdv_code rc;
    char hbuf[256];
    if (!v || !peer_worker) return tfrdv_status_set(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_connect: NULL transport or peer_worker");
    if (!tfrdv_verbs__worker_ok(peer_worker)) {
        char ew[4 * TFRDV_VERBS_WORKER_MAX];
        tfrdv_escape(ew, sizeof ew, peer_worker, strlen(peer_worker) < TFRDV_VERBS_WORKER_MAX ? strlen(peer_worker) : TFRDV_VERBS_WORKER_MAX);
        return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_connect: \"%.200s\" is not a worker name (/job:J/replica:R/task:T)", ew);
    }
    if (!v->cfg.exchange && !host) { /* the table's address */
        if ((rc = tfrdv_verbs__lookup(v, peer_worker, strlen(peer_worker), hbuf, sizeof hbuf, &port, st)) != TFRDV_OK) return rc;
        host = hbuf;
    }
    if (!v->cfg.exchange && (port <= 0 || port > 65535))
        return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_connect: port %d of %s (1..65535)", port, peer_worker);
    pthread_mutex_lock(&v->mu);
    p = tfrdv_verbs__find_peer(v, peer_worker, strlen(peer_worker));
    pthread_mutex_unlock(&v->mu);
    if (p && p->state == TFRDV_VERBS__PEER_UP) return TFRDV_OK; /* connected already (either side) */
    p = tfrdv_verbs__peer_new(v, peer_worker, &local, st);
    if (!p) return st ? st->code : TFRDV_UNAVAILABLE;
    ln = tfrdv_verbs_info_encode(&local, lb, sizeof lb);
    if (v->cfg.exchange) {
        tfrdv_code c = v->cfg.exchange(v->cfg.exchange_user, peer_worker, lb, ln, rb, sizeof rb, &rn);
        if (c != TFRDV_OK) {
            tfrdv_verbs__peer_free(v, p);
            return tfrdv_verbs__err(st, c, "verbs: the exchange callback failed for %s", peer_worker);
        }
    } else {
        /* the whole exchange (connect, hello, answer) within connect_timeout_ns */
        struct addrinfo hints, *ai = 0, *a;
        char ps[16];
        int64_t deadline = tfrdv_now_ns() + v->cfg.connect_timeout_ns;
        int err = 0;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        tfrdv_verbs__fmt(ps, sizeof ps, "%d", port);
        if (getaddrinfo(host, ps, &hints, &ai) != 0 || !ai) {
            tfrdv_verbs__peer_free(v, p);
            return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: cannot resolve %s", host);
        }
        /* retry refused connections until the deadline: the peer may still be starting */
        while (fd < 0) {
            for (a = ai; a && fd < 0; a = a->ai_next) {
                int r = tfrdv_verbs__tcp_start(a->ai_addr, a->ai_addrlen, &fd);
                if (r < 0) err = errno;
                if (r > 0) { /* in progress: wait for it within the deadline */
                    struct pollfd pf;
                    int64_t left = deadline - tfrdv_now_ns();
                    socklen_t el = sizeof err;
                    pf.fd = fd;
                    pf.events = POLLOUT;
                    pf.revents = 0;
                    err = ETIMEDOUT;
                    if (left > 0 && poll(&pf, 1, (int)((left + 999999) / 1000000)) > 0 &&
                        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
                        err = errno;
                    if (err) {
                        close(fd);
                        fd = -1;
                    }
                }
                if (fd >= 0 && a->ai_addrlen <= sizeof sa) {
                    memcpy(&sa, a->ai_addr, a->ai_addrlen);
                    salen = (socklen_t)a->ai_addrlen;
                }
            }
            if (fd < 0) {
                struct timespec ts = {0, 50000000};
                if (tfrdv_now_ns() + 50000000 > deadline) break;
                nanosleep(&ts, 0);
            }
        }
        freeaddrinfo(ai);
        if (fd < 0) {
            tfrdv_verbs__peer_free(v, p);
            return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: cannot connect to %s at %s:%d: %s", peer_worker, host, port, strerror(err));
        }
        if (!tfrdv_verbs__send_frame(fd, lb, ln, deadline) || !tfrdv_verbs__recv_frame(fd, rb, sizeof rb, &rn, deadline)) {
            close(fd);
            tfrdv_verbs__peer_free(v, p);
            if (tfrdv_verbs__await_peer(v, peer_worker, deadline, 1)) return TFRDV_OK; /* the peer connected
                                                                                        to us meanwhile */
            return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE,
                                    "verbs: bootstrap exchange with %s at %s:%d failed or took longer than connect_timeout_ns (is its progress running?)",
                                    peer_worker, host, port);
        }
        p->has_addr = 1;
        p->addr = sa;
        p->addrlen = salen;
        tfrdv_verbs__fmt(p->host, sizeof p->host, "%s", host);
        p->port = port;
    }
    if (fd >= 0 && rn == 0) { /* a yield: the peer connects to us at this moment; wait for it */
        close(fd);
        tfrdv_verbs__peer_free(v, p);
        if (tfrdv_verbs__await_peer(v, peer_worker, tfrdv_now_ns() + v->cfg.connect_timeout_ns, 0)) return TFRDV_OK;
        return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: %s connects to this side at the same moment, but its connection did not "
                                "arrive within connect_timeout_ns", peer_worker);
    }
    if (tfrdv_verbs_info_decode(rb, rn, &remote, st) != TFRDV_OK) {
        if (fd >= 0) close(fd);
        tfrdv_verbs__peer_free(v, p);
        return st ? st->code : TFRDV_INVALID_ARGUMENT;
    }
    if (strcmp(remote.worker, peer_worker) != 0) {
        char ew[4 * TFRDV_VERBS_WORKER_MAX];
        if (fd >= 0) close(fd);
        tfrdv_verbs__peer_free(v, p);
        tfrdv_escape(ew, sizeof ew, remote.worker, strlen(remote.worker));
        return tfrdv_verbs__err(st, TFRDV_FAILED_PRECONDITION, "verbs: connected to %s but it says it is %s", peer_worker, ew);
    }
    if (tfrdv_verbs__peer_up(v, p, &remote, st) != TFRDV_OK) {
        if (fd >= 0) close(fd);
        tfrdv_verbs__peer_free(v, p);
        return st ? st->code : TFRDV_UNAVAILABLE;
    }
    if (fd >= 0) { /* READY: our QP is RTR, the peer may write */
        uint8_t ready[4] = {0, 0, 0, 0};
        if (!tfrdv_verbs__io_until(fd, ready, 4, 1, tfrdv_now_ns() + v->cfg.connect_timeout_ns)) {
            close(fd);
            tfrdv_verbs__peer_free(v, p);
            return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: bootstrap exchange with %s at %s:%d: sending READY failed", peer_worker, host, port);
        }
    }
    p->fd = fd;
    rc = tfrdv_verbs__publish(v, p, st, &todo);
    if (rc != TFRDV_OK) tfrdv_verbs__peer_free(v, p);
    tfrdv_verbs__todo_run(v, &todo);
    tfrdv_verbs__todos_free(&todo);
    if (rc == TFRDV_OK) tfrdv_verbs__wake(v); /* progress drops a reconnect this one superseded */
    return rc;
}
TFRDV_API tfrdv_code tfrdv_verbs_connect(tfrdv_verbs* v, const char* peer_worker, const char* host, int port,
                                         tfrdv_status* st) {
    tfrdv_verbs__dialing d, **dp;
    tfrdv_code rc;
    if (!v || !peer_worker) return tfrdv_status_set(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_connect: NULL transport or peer_worker");
    d.name = peer_worker; /* while it runs, this side's listener yields to the peer's connect (CONNECTIONS) */
    pthread_mutex_lock(&v->mu);
    d.next = v->dialing;
    v->dialing = &d;
    pthread_mutex_unlock(&v->mu);
    rc = tfrdv_verbs__connect_now(v, peer_worker, host, port, st);
    pthread_mutex_lock(&v->mu);
    for (dp = &v->dialing; *dp && *dp != &d; dp = &(*dp)->next) {}
    if (*dp) *dp = d.next;
    pthread_mutex_unlock(&v->mu);
    return rc;
}

/* ---- progress ---- */
/* bytes on a peer's bootstrap socket: a break reason, or EOF (v->mu held) */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__on_sock(tfrdv_verbs* v, tfrdv_verbs__peer* p, tfrdv_verbs__todos* todo) {
    char em[TFRDV_STATUS_MSG_MAX];
    for (;;) {
        ssize_t k;
        if (p->fd < 0 || p->state != TFRDV_VERBS__PEER_UP) return;
        k = recv(p->fd, p->sockbuf + p->socklen, sizeof p->sockbuf - p->socklen, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        if (k <= 0) {
            tfrdv_verbs__fmt(em, sizeof em, "verbs: connection to %s closed (its process exited?)", p->ename);
            tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
            return;
        }
        p->socklen += (size_t)k;
        p->last_rx = tfrdv_verbs__now(v);
        p->ping_out = 0;
        /* frames: u32 length, then 'B' u32 code + reason (the peer broke the connection), 'P' (a
           keep-alive ping: answer 'Q'), 'Q' */
        while (p->socklen >= 5) {
            uint32_t n = tfrdv_verbs__get32(p->sockbuf);
            if (n < 1 || n > sizeof p->sockbuf - 4) {
                tfrdv_verbs__fmt(em, sizeof em, "verbs: protocol error from %s on its bootstrap connection", p->ename);
                tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
                return;
            }
            if (p->socklen < 4 + (size_t)n) break;
            if (p->sockbuf[4] == 'B' && n >= 5) {
                char why[4 * 255 + 1];
                tfrdv_escape(why, sizeof why, (const char*)p->sockbuf + 9, n - 5);
                tfrdv_verbs__fmt(em, sizeof em, "verbs: %s broke the connection: %s", p->ename, why);
                tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, em, todo);
                return;
            }
            if (p->sockbuf[4] == 'P') {
                static const uint8_t q[5] = {1, 0, 0, 0, 'Q'};
                ssize_t wr = send(p->fd, q, sizeof q, MSG_DONTWAIT | MSG_NOSIGNAL);
                (void)wr;
            }
            memmove(p->sockbuf, p->sockbuf + 4 + n, p->socklen - 4 - n);
            p->socklen -= 4 + (size_t)n;
        }
    }
}
TFRDV_API int tfrdv_verbs_poll(tfrdv_verbs* v, int64_t timeout_ns) {
    int n = 0, i, k, nev;
    struct ibv_wc wc[16];
    struct epoll_event ev[16];
    tfrdv_verbs__todos todo = TFRDV_VERBS__TODOS(v);
    int64_t now, soonest;
    int want, last;
    tfrdv_verbs* outer;
    if (!v) return 0;
    if (pthread_mutex_trylock(&v->progress_mu) != 0) return 0;
    pthread_mutex_lock(&v->mu);
    if (v->finishing) { /* torn down (from a callback): nothing to do */
        pthread_mutex_unlock(&v->mu);
        pthread_mutex_unlock(&v->progress_mu);
        return 0;
    }
    v->progressing++;
    v->prog_self = pthread_self();
    outer = tfrdv_verbs__inside;
    tfrdv_verbs__inside = v;
    for (i = 0; i < v->npeers; i++) {
        tfrdv_verbs__peer* p = v->peers[i];
        while (p->state == TFRDV_VERBS__PEER_UP && (k = ibv_poll_cq(p->cq, 16, wc)) > 0) {
            int j;
            for (j = 0; j < k; j++) {
                tfrdv_verbs__on_wc(v, p, &wc[j], &todo);
                if (todo.n) { /* in message order: a CANCEL's withdrawal before a later REQUEST */
                    pthread_mutex_unlock(&v->mu);
                    tfrdv_verbs__todo_run(v, &todo);
                    pthread_mutex_lock(&v->mu);
                }
            }
            n += k;
        }
        if (p->state == TFRDV_VERBS__PEER_UP && p->untold && !p->outstanding && !p->doom_at &&
            tfrdv_now_ns() - p->idle_since >= TFRDV_VERBS__TAKEN_AFTER_NS) {
            p->untold = 0; /* idle: tell the peer every answer it wrote was taken (its drain) */
            tfrdv_verbs__send_simple(v, p, TFRDV_VERBS__TAKEN, 0, &todo);
        }
    }
    now = tfrdv_verbs__now(v);
    if (now >= v->next_timer) {
        v->next_timer = now + 1000000;
        tfrdv_verbs__timers(v, now, &todo);
        tfrdv_verbs__reclaim(v); /* (safe before todo runs: deferred work pins what it uses) */
    }
    want = v->want_reconnect;
    v->want_reconnect = 0;
    pthread_mutex_unlock(&v->mu);
    tfrdv_verbs__todo_run(v, &todo);
    soonest = want || v->pends ? tfrdv_verbs__pend_timers(v) : -1; /* (pends: progress only) */
    if (n == 0 && timeout_ns != 0) {
        /* arm, then look once more: a completion between the poll and the arm is not lost */
        int busy = 0;
        pthread_mutex_lock(&v->mu);
        for (i = 0; i < v->npeers; i++) {
            tfrdv_verbs__peer* p = v->peers[i];
            if (p->state != TFRDV_VERBS__PEER_UP) continue;
            if (p->doom_at) { /* wake for its break */
                int64_t left = p->doom_at - tfrdv_now_ns();
                if (soonest < 0 || left < soonest) soonest = left > 0 ? left : 0;
            }
            if (p->untold && !p->outstanding && !p->doom_at) { /* wake for its TAKEN */
                int64_t left = p->idle_since + TFRDV_VERBS__TAKEN_AFTER_NS - tfrdv_now_ns();
                if (left < 0) left = 0;
                if (soonest < 0 || left < soonest) soonest = left;
            }
            ibv_req_notify_cq(p->cq, 0);
            if (ibv_poll_cq(p->cq, 1, wc) > 0) {
                tfrdv_verbs__on_wc(v, p, &wc[0], &todo);
                busy = 1;
                n++;
            }
        }
        pthread_mutex_unlock(&v->mu);
        tfrdv_verbs__todo_run(v, &todo);
        if (busy) timeout_ns = 0;
        if (timeout_ns < 0 || timeout_ns > v->cfg.keepalive_ns / 2) timeout_ns = v->cfg.keepalive_ns / 2;
        if (soonest >= 0 && timeout_ns > soonest) timeout_ns = soonest; /* a bootstrap deadline */
    } else {
        timeout_ns = 0;
    }
    nev = epoll_wait(v->efd, ev, 16, (int)((timeout_ns + 999999) / 1000000));
    for (i = 0; i < nev; i++) {
        void* ptr = ev[i].data.ptr;
        if (ev[i].data.u64 & 1u) { /* a bootstrap exchange under way: never blocks */
            tfrdv_verbs__pend_step(v, (tfrdv_verbs__pend*)(uintptr_t)(ev[i].data.u64 & ~(uint64_t)1));
            n++;
        } else if (ptr == (void*)v->ch) {
            struct ibv_cq* cq;
            void* cctx;
            while (v->lib.get_cq_event(v->ch, &cq, &cctx) == 0) v->lib.ack_cq_events(cq, 1);
        } else if (ptr == (void*)&v->lfd) {
            int fd;
            while ((fd = accept(v->lfd, 0, 0)) >= 0) {
                tfrdv_verbs__pend_accept(v, fd);
                n++;
            }
        } else if (ptr == (void*)&v->wfd) {
            uint64_t x;
            ssize_t r = read(v->wfd, &x, sizeof x);
            (void)r;
        } else {
            pthread_mutex_lock(&v->mu);
            tfrdv_verbs__on_sock(v, (tfrdv_verbs__peer*)ptr, &todo);
            pthread_mutex_unlock(&v->mu);
            tfrdv_verbs__todo_run(v, &todo);
            n++;
        }
    }
    tfrdv_verbs__todos_free(&todo);
    tfrdv_verbs__inside = outer;
    pthread_mutex_lock(&v->mu);
    v->progressing--;
    last = tfrdv_verbs__last_out(v);
    pthread_mutex_unlock(&v->mu);
    pthread_mutex_unlock(&v->progress_mu);
    if (last) tfrdv_verbs__teardown(v); /* a callback of this call destroyed v */
    return n;
}
TFRDV_VERBS__PRIVATE void* tfrdv_verbs__thread(void* arg) {
    tfrdv_verbs* v = (tfrdv_verbs*)arg;
    int64_t busy_at = tfrdv_now_ns(); /* when progress last found work */
    int deferred, last;
    for (;;) {
        int stop;
        pthread_mutex_lock(&v->mu);
        stop = v->stop;
        pthread_mutex_unlock(&v->mu);
        if (stop) break;
        if (tfrdv_verbs_poll(v, 0) > 0) busy_at = tfrdv_now_ns();
        else if (v->cfg.spin_ns < 0 || tfrdv_now_ns() - busy_at > v->cfg.spin_ns) tfrdv_verbs_poll(v, 100000000);
        else sched_yield(); /* spinning: let the kernel's RDMA work (Soft-RoCE tasklets) run */
    }
    pthread_mutex_lock(&v->mu);
    v->thr_running = 0;
    deferred = v->deferred;
    last = tfrdv_verbs__last_out(v);
    pthread_mutex_unlock(&v->mu);
    if (deferred) pthread_detach(pthread_self()); /* destroyed from a callback: nobody joins it */
    if (last) tfrdv_verbs__teardown(v);
    return 0;
}

/* ---- lifecycle (TRANSPORTS in tfrdv.h) ---- */
/* drops a reference; the last one (after tfrdv_verbs_destroy stopped everything) frees v */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__unref(tfrdv_verbs* v) {
    long left;
    pthread_mutex_lock(&v->mu);
    left = --v->refs;
    pthread_mutex_unlock(&v->mu);
    if (left) return;
    pthread_cond_destroy(&v->cv);
    pthread_mutex_destroy(&v->mu);
    pthread_mutex_destroy(&v->progress_mu);
    {
        tfrdv_allocator a = v->a;
        tfrdv_verbs__free(&a, v, sizeof *v);
    }
}
/* create's checks: INVALID_ARGUMENT naming the field and the value */
TFRDV_VERBS__PRIVATE tfrdv_code tfrdv_verbs__check(const tfrdv_verbs_config* c, tfrdv_status* st) {
    char host[256], es[256];
    const char *why, *bad = 0;
    int port;
    long long val = 0;
    size_t i;
    if (!tfrdv_verbs__worker_ok(c->worker_name)) {
        tfrdv_escape(es, sizeof es, c->worker_name, strlen(c->worker_name));
        return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_create: worker_name \"%.200s\" is not a worker name (/job:J/replica:R/task:T)", es);
    }
    if (!c->hooks.allocator.alloc_fn != !c->hooks.allocator.free_fn)
        return tfrdv_status_set(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_create: hooks.allocator needs both functions or neither");
#define TFRDV_VERBS__BAD(cond, name, x) if (!bad && (cond)) { bad = name; val = (long long)(x); }
    TFRDV_VERBS__BAD(c->num_threads < -1, "num_threads (-1: none, 0 or more: one thread)", c->num_threads)
    TFRDV_VERBS__BAD(c->port < 0 || c->port > 255, "port (0: the first active one, 1..255)", c->port)
    TFRDV_VERBS__BAD(c->mtu && c->mtu != 256 && c->mtu != 512 && c->mtu != 1024 && c->mtu != 2048 && c->mtu != 4096,
                     "mtu (0: the port's, or 256, 512, 1024, 2048, 4096)", c->mtu)
    TFRDV_VERBS__BAD(c->ctrl_slots < 0 || (c->ctrl_slots && c->ctrl_slots < 4) || c->ctrl_slots > 65536, "ctrl_slots (0: 64, 4..65536)", c->ctrl_slots)
    TFRDV_VERBS__BAD(c->ctrl_slot_size < 0 || (c->ctrl_slot_size && c->ctrl_slot_size < 256) || c->ctrl_slot_size > (1 << 20),
                     "ctrl_slot_size (0: 4096, 256..1048576)", c->ctrl_slot_size)
    TFRDV_VERBS__BAD(c->max_requests < 0 || c->max_requests > 32768, "max_requests (0: 256, 1..32768)", c->max_requests)
    TFRDV_VERBS__BAD(c->connect_timeout_ns < 0, "connect_timeout_ns (0: 10 s)", c->connect_timeout_ns)
    TFRDV_VERBS__BAD(c->keepalive_ns < 0, "keepalive_ns (0: 500 ms)", c->keepalive_ns)
    TFRDV_VERBS__BAD(c->peer_timeout_ns < 0, "peer_timeout_ns (0: 5 s)", c->peer_timeout_ns)
    TFRDV_VERBS__BAD(c->meta_cache_max < 0, "meta_cache_max (0: 4096)", c->meta_cache_max)
    TFRDV_VERBS__BAD(c->reg_cache_keep_idle < 0 || c->reg_cache_keep_idle > 1, "reg_cache_keep_idle (0 or 1)", c->reg_cache_keep_idle)
    TFRDV_VERBS__BAD(c->ack_timeout < 0 || c->ack_timeout > 31, "ack_timeout (0: 14, 1..31)", c->ack_timeout)
    TFRDV_VERBS__BAD(c->retry_cnt < -1 || c->retry_cnt > 7, "retry_cnt (0: 7, 1..7, TFRDV_OFF: none)", c->retry_cnt)
    TFRDV_VERBS__BAD(c->rnr_retry < -1 || c->rnr_retry > 7, "rnr_retry (0: 7, 1..7, TFRDV_OFF: none)", c->rnr_retry)
    TFRDV_VERBS__BAD(c->reconnect_backoff_max_ns < 0, "reconnect_backoff_max_ns (0: 10 s)", c->reconnect_backoff_max_ns)
    TFRDV_VERBS__BAD(c->num_workers && !c->workers, "num_workers (with workers NULL)", c->num_workers)
#undef TFRDV_VERBS__BAD
    if (bad) {
        const char* sp = strchr(bad, ' ');
        return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_create: %.*s %lld out of range%s", (int)(sp - bad), bad, val, sp);
    }
    if (c->listen_address && c->exchange)
        return tfrdv_status_set(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_create: listen_address with an exchange callback (the listener would never be used)");
    if (c->listen_address && !tfrdv_verbs__split(c->listen_address, 1, host, sizeof host, &port, &why)) {
        tfrdv_escape(es, sizeof es, c->listen_address, strlen(c->listen_address));
        return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_create: listen_address \"%.200s\": %s", es, why);
    }
    if (c->gid) {
        struct in6_addr a6;
        size_t dl = strspn(c->gid, "0123456789");
        int ok = c->gid[0] && dl == strlen(c->gid) ? dl <= 3 && atoi(c->gid) <= 255
                                                   : inet_pton(AF_INET, c->gid, &a6) == 1 || inet_pton(AF_INET6, c->gid, &a6) == 1;
        if (!ok) {
            tfrdv_escape(es, sizeof es, c->gid, strlen(c->gid));
            return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_create: gid \"%.200s\" is neither an index (0..255) nor an IPv4 or IPv6 address", es);
        }
    }
    for (i = 0; i < c->num_workers; i++) {
        const tfrdv_worker* w = &c->workers[i];
        char en[256];
        if (!w->name || !w->address)
            return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_create: workers[%zu] has no name or address", i);
        tfrdv_escape(en, sizeof en, w->name, strlen(w->name));
        if (!tfrdv_verbs__worker_ok(w->name))
            return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_create: workers[%zu].name \"%.200s\" is not a worker name (/job:J/replica:R/task:T)", i, en);
        if (!tfrdv_verbs__split(w->address, 0, host, sizeof host, &port, &why)) {
            tfrdv_escape(es, sizeof es, w->address, strlen(w->address));
            return tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_create: workers[%zu].address \"%.120s\" of %.120s: %s", i, es, en, why);
        }
    }
    return TFRDV_OK;
}
/* the worker table, copied into one allocation: entries, then the strings */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__copy_table(tfrdv_verbs* v, const tfrdv_worker* w, size_t n) {
    size_t i, bytes = n * sizeof(tfrdv_verbs__went);
    char* sp;
    const char* why;
    if (!n) return 1;
    for (i = 0; i < n; i++) bytes += strlen(w[i].name) + 1 + strlen(w[i].address) + 1;
    v->wt = (tfrdv_verbs__went*)tfrdv_verbs__alloc(&v->a, bytes);
    if (!v->wt) return 0;
    v->wt_bytes = bytes;
    v->nwt = n;
    sp = (char*)(v->wt + n);
    for (i = 0; i < n; i++) {
        size_t nl = strlen(w[i].name) + 1;
        memcpy(sp, w[i].name, nl);
        v->wt[i].name = sp;
        sp += nl;
        v->wt[i].host = sp; /* (checked: it splits) */
        (void)tfrdv_verbs__split(w[i].address, 0, sp, strlen(w[i].address) + 1, &v->wt[i].port, &why);
        sp += strlen(w[i].address) + 1;
    }
    return 1;
}
TFRDV_API tfrdv_code tfrdv_verbs_create(const tfrdv_verbs_config* cfg, tfrdv_verbs** out, tfrdv_status* st) {
    tfrdv_verbs* v;
    tfrdv_code rc;
    struct epoll_event ev;
    if (out) *out = 0;
    if (!cfg || !out || !cfg->worker_name)
        return tfrdv_status_set(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_create: NULL config, out or worker_name");
    if ((rc = tfrdv_verbs__check(cfg, st)) != TFRDV_OK) return rc;
    v = (tfrdv_verbs*)tfrdv_verbs__zalloc_n(&cfg->hooks.allocator, 1, sizeof *v);
    if (!v) return tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_verbs_create: out of memory");
    v->cfg = *cfg;
    v->a = cfg->hooks.allocator;
    tfrdv_verbs__fmt(v->worker, sizeof v->worker, "%s", cfg->worker_name);
    v->cfg.worker_name = v->worker;
    v->cfg.listen_address = 0; /* borrowed during create only */
    v->cfg.gid = 0;
    v->cfg.workers = 0;
    if (v->cfg.retry_cnt < 0) v->cfg.retry_cnt = 0; /* TFRDV_OFF */
    else if (!v->cfg.retry_cnt) v->cfg.retry_cnt = 7;
    if (v->cfg.rnr_retry < 0) v->cfg.rnr_retry = 0;
    else if (!v->cfg.rnr_retry) v->cfg.rnr_retry = 7;
    if (!v->cfg.ctrl_slots) v->cfg.ctrl_slots = 64;
    if (!v->cfg.ctrl_slot_size) v->cfg.ctrl_slot_size = 4096;
    if (!v->cfg.max_requests) v->cfg.max_requests = 256;
    if (!v->cfg.spin_ns) v->cfg.spin_ns = 50000;
    if (!v->cfg.connect_timeout_ns) v->cfg.connect_timeout_ns = (int64_t)10 * 1000000000;
    if (!v->cfg.keepalive_ns) v->cfg.keepalive_ns = 500000000;
    if (!v->cfg.peer_timeout_ns) v->cfg.peer_timeout_ns = (int64_t)5 * 1000000000;
    if (!v->cfg.reg_cache_max_bytes) v->cfg.reg_cache_max_bytes = (uint64_t)8 << 30;
    if (!v->cfg.meta_cache_max) v->cfg.meta_cache_max = 4096;
    if (!v->cfg.ack_timeout) v->cfg.ack_timeout = 14;
    if (!v->cfg.reconnect_backoff_ns) v->cfg.reconnect_backoff_ns = 100000000;
    if (!v->cfg.reconnect_backoff_max_ns) v->cfg.reconnect_backoff_max_ns = (int64_t)10 * 1000000000;
    if (v->cfg.reconnect_backoff_max_ns < v->cfg.reconnect_backoff_ns) v->cfg.reconnect_backoff_max_ns = v->cfg.reconnect_backoff_ns;
    v->lfd = v->efd = v->wfd = -1;
    v->refs = 1;
    pthread_mutex_init(&v->mu, 0);
    pthread_mutex_init(&v->progress_mu, 0);
    pthread_cond_init(&v->cv, 0);
    v->rc.max_bytes = v->cfg.reg_cache_max_bytes;
    v->rc.keep_idle = v->cfg.reg_cache_keep_idle;
    v->rc.reg = tfrdv_verbs__ibv_reg;
    v->rc.dereg = tfrdv_verbs__ibv_dereg;
    v->rc.user = v;
    v->rc.a = v->a;
    v->mc.a = v->a;
    v->mc.e = (tfrdv_verbs__mentry*)tfrdv_verbs__zalloc_n(&v->a, (size_t)v->cfg.meta_cache_max, sizeof *v->mc.e);
    v->mc.n = v->mc.e ? (size_t)v->cfg.meta_cache_max : 0;
    v->scratch = (uint8_t*)tfrdv_verbs__alloc(&v->a, (size_t)v->cfg.ctrl_slot_size);
    v->rxcopy = (uint8_t*)tfrdv_verbs__alloc(&v->a, (size_t)v->cfg.ctrl_slot_size);
    if (!v->mc.n || !v->scratch || !v->rxcopy || !tfrdv_verbs__copy_table(v, cfg->workers, cfg->num_workers)) {
        rc = tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_verbs_create: out of memory");
        goto fail;
    }
    if ((rc = tfrdv_verbs__load(v, st)) != TFRDV_OK) goto fail;
    v->cfg.gid = cfg->gid; /* borrowed during create only */
    rc = tfrdv_verbs__open(v, st);
    v->cfg.gid = 0;
    if (rc != TFRDV_OK) goto fail;
    v->pd = v->lib.alloc_pd(v->ctx);
    v->ch = v->pd ? v->lib.create_comp_channel(v->ctx) : 0;
    if (!v->pd || !v->ch) {
        rc = tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: %s failed on %s: %s", v->pd ? "ibv_create_comp_channel" : "ibv_alloc_pd",
                              v->desc, strerror(errno));
        goto fail;
    }
    fcntl(v->ch->fd, F_SETFL, fcntl(v->ch->fd, F_GETFL) | O_NONBLOCK);
    v->efd = epoll_create1(0);
    v->wfd = eventfd(0, EFD_NONBLOCK);
    if (v->efd < 0 || v->wfd < 0) {
        rc = tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: epoll/eventfd: %s", strerror(errno));
        goto fail;
    }
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.ptr = v->ch;
    epoll_ctl(v->efd, EPOLL_CTL_ADD, v->ch->fd, &ev);
    ev.data.ptr = &v->wfd;
    epoll_ctl(v->efd, EPOLL_CTL_ADD, v->wfd, &ev);
    if (cfg->listen_address) {
        struct addrinfo hints, *ai = 0;
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        char host[256], ps[16];
        const char* why;
        int one = 1, port = 0, gr;
        (void)tfrdv_verbs__split(cfg->listen_address, 1, host, sizeof host, &port, &why); /* (checked) */
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
        tfrdv_verbs__fmt(ps, sizeof ps, "%d", port);
        if ((gr = getaddrinfo(host, ps, &hints, &ai)) != 0 || !ai) {
            rc = tfrdv_verbs__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_create: listen_address \"%s\": cannot resolve host \"%s\" (%s)",
                                  cfg->listen_address, host, gr ? gai_strerror(gr) : "no address");
            goto fail;
        }
        v->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (v->lfd < 0 || setsockopt(v->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            bind(v->lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(v->lfd, 64) != 0 ||
            getsockname(v->lfd, (struct sockaddr*)&sa, &sl) != 0) {
            rc = tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "tfrdv_verbs_create: bootstrap listener on listen_address %s: %s", cfg->listen_address, strerror(errno));
            freeaddrinfo(ai);
            goto fail;
        }
        freeaddrinfo(ai);
        v->listen_port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6*)&sa)->sin6_port : ((struct sockaddr_in*)&sa)->sin_port);
        fcntl(v->lfd, F_SETFL, fcntl(v->lfd, F_GETFL) | O_NONBLOCK);
        ev.data.ptr = &v->lfd;
        epoll_ctl(v->efd, EPOLL_CTL_ADD, v->lfd, &ev);
    }
    if (v->cfg.num_threads >= 0) {
        v->thr_running = 1;
        if (pthread_create(&v->thr, 0, tfrdv_verbs__thread, v) != 0) {
            v->thr_running = 0;
            rc = tfrdv_status_set(st, TFRDV_RESOURCE_EXHAUSTED, "verbs: cannot start the progress thread");
            goto fail;
        }
        v->has_thr = 1;
    }
    *out = v;
    return TFRDV_OK;
fail:
    tfrdv_verbs_destroy(v);
    return rc;
}
TFRDV_API void tfrdv_verbs_destroy(tfrdv_verbs* v) {
    if (!v) return;
    pthread_mutex_lock(&v->mu);
    if (v->destroying) { /* a second destroy: nothing left to stop */
        pthread_mutex_unlock(&v->mu);
        return;
    }
    v->destroying = 1; /* start_call fails from now on, cancel_call does nothing */
    v->stop = 1;
    if (tfrdv_verbs__inside == v) { /* from a callback: the last thread out tears v down */
        v->deferred = 1;
        pthread_mutex_unlock(&v->mu);
        tfrdv_verbs__wake(v);
        return;
    }
    while (v->entered > 0) pthread_cond_wait(&v->cv, &v->mu); /* calls being started leave */
    pthread_mutex_unlock(&v->mu);
    if (v->has_thr) {
        tfrdv_verbs__wake(v);
        pthread_join(v->thr, 0);
        v->has_thr = 0;
    }
    tfrdv_verbs__teardown(v);
}
/* tfrdv_verbs_destroy's work once nothing runs inside v: fail every call, withdraw every served
   request, close the device, drop the manager's and the owner's reference */
TFRDV_VERBS__PRIVATE void tfrdv_verbs__teardown(tfrdv_verbs* v) {
    int i;
    tfrdv_verbs__todos todo = TFRDV_VERBS__TODOS(v);
    tfrdv_mgr* mgr;
    pthread_mutex_lock(&v->mu);
    for (i = 0; i < v->npeers; i++) {
        tfrdv_verbs__peer* p = v->peers[i];
        tfrdv_verbs__break(v, p, TFRDV_UNAVAILABLE, "verbs transport destroyed", &todo);
        while (p->wait_head) { /* calls waiting for a reconnect */
            tfrdv_verbs__req* r = p->wait_head;
            p->wait_head = r->next;
            tfrdv_verbs__req_fail(v, p, r, TFRDV_UNAVAILABLE, "verbs transport destroyed", &todo);
        }
        p->wait_tail = 0;
        p->want_reconnect = 0;
    }
    pthread_mutex_unlock(&v->mu);
    tfrdv_verbs__todo_run(v, &todo);
    tfrdv_verbs__todos_free(&todo);
    pthread_mutex_lock(&v->mu);
    while (v->serves_out > 0) pthread_cond_wait(&v->cv, &v->mu);
    pthread_mutex_unlock(&v->mu);
    while (v->pends) tfrdv_verbs__pend_fail(v, v->pends, "verbs transport destroyed");
    pthread_mutex_lock(&v->mu);
    for (i = 0; i < v->npeers; i++) tfrdv_verbs__peer_free(v, v->peers[i]);
    tfrdv_verbs__free(&v->a, v->peers, (size_t)v->cap_peers * sizeof *v->peers);
    v->peers = 0;
    v->npeers = v->cap_peers = 0;
    v->stats.peers = 0;
    if (v->lib.h) tfrdv_verbs__rc_clear(&v->rc);
    tfrdv_verbs__mc_free(&v->mc);
    mgr = v->mgr;
    v->mgr = 0;
    pthread_mutex_unlock(&v->mu);
    if (v->lfd >= 0) close(v->lfd);
    if (v->efd >= 0) close(v->efd);
    if (v->wfd >= 0) close(v->wfd);
    v->lfd = v->efd = v->wfd = -1;
    if (v->ch) v->lib.destroy_comp_channel(v->ch);
    if (v->pd) v->lib.dealloc_pd(v->pd);
    if (v->ctx) v->lib.close_device(v->ctx);
    if (v->lib.h) dlclose(v->lib.h);
    v->ch = 0;
    v->pd = 0;
    v->ctx = 0;
    v->lib.h = 0;
    if (mgr) tfrdv_mgr_unref(mgr);
    tfrdv_verbs__free(&v->a, v->scratch, (size_t)v->cfg.ctrl_slot_size);
    tfrdv_verbs__free(&v->a, v->rxcopy, (size_t)v->cfg.ctrl_slot_size);
    v->scratch = v->rxcopy = 0;
    tfrdv_verbs__free(&v->a, v->wt, v->wt_bytes);
    v->wt = 0;
    v->nwt = 0;
    tfrdv_verbs__unref(v); /* the owner's reference; a manager's vtable may hold more */
}
/* tfrdv_recv blocking in a callback of this transport's progress (its thread, or a host's
   tfrdv_verbs_poll): the progress that would complete it is this very thread's, so it fails
   now instead of waiting forever */
TFRDV_VERBS__PRIVATE int tfrdv_verbs__t_wait(void* user, tfrdv_call* call, int64_t timeout_ns) {
    tfrdv_verbs* v = (tfrdv_verbs*)user;
    tfrdv_verbs__todos todo = TFRDV_VERBS__TODOS(v);
    tfrdv_verbs__req* r;
    int failed = 0;
    (void)timeout_ns;
    if (tfrdv_verbs__inside != v) return 0;
    pthread_mutex_lock(&v->mu);
    r = *(tfrdv_verbs__req**)tfrdv_call_scratch(call);
    if (v->progressing && pthread_equal(v->prog_self, pthread_self()) && r && r->call == call) {
        tfrdv_verbs__req_abandon(v, r->p, r, TFRDV_FAILED_PRECONDITION, "verbs: a blocking receive inside a callback of "
                                 "this transport's progress would wait forever (use tfrdv_recv_async)", &todo);
        failed = 1;
    }
    pthread_mutex_unlock(&v->mu);
    tfrdv_verbs__todo_run(v, &todo);
    tfrdv_verbs__todos_free(&todo);
    return failed;
}
TFRDV_VERBS__PRIVATE void tfrdv_verbs__t_destroy(void* user) { tfrdv_verbs__unref((tfrdv_verbs*)user); }
TFRDV_VERBS__PRIVATE void tfrdv_verbs__t_ref(void* user) {
    tfrdv_verbs* v = (tfrdv_verbs*)user;
    pthread_mutex_lock(&v->mu);
    v->refs++;
    pthread_mutex_unlock(&v->mu);
}
/* tfrdv_transport.peer_incarnation: the incarnation the worker's bootstrap info carried. A
   connected peer answers at once; otherwise this asks progress to connect it (the table's
   address, as a fetch does) and waits, retrying after each back-off window, until timeout_ns. */
TFRDV_VERBS__PRIVATE tfrdv_code tfrdv_verbs__peer_inc(void* user, tfrdv_mgr* mgr, tfrdv_str w, int64_t timeout_ns, uint64_t* inc,
                                                      tfrdv_status* st) {
    tfrdv_verbs* v = (tfrdv_verbs*)user;
    char ew[4 * TFRDV_VERBS_WORKER_MAX], host[256], msg[TFRDV_STATUS_MSG_MAX];
    int64_t now = tfrdv_now_ns(), end = timeout_ns < 0 ? INT64_MAX : now + timeout_ns;
    tfrdv_code code = TFRDV_OK;
    int port = 0;
    (void)mgr;
    tfrdv_escape(ew, sizeof ew, w.ptr, w.len < TFRDV_VERBS_WORKER_MAX ? w.len : TFRDV_VERBS_WORKER_MAX);
    if (tfrdv_verbs__inside == v)
        return tfrdv_verbs__err(st, TFRDV_FAILED_PRECONDITION, "verbs: asking %s's incarnation in a callback of this transport's "
                                "progress would wait forever (the progress that answers is this thread's)", ew);
    pthread_mutex_lock(&v->mu);
    if (v->destroying) {
        pthread_mutex_unlock(&v->mu);
        return tfrdv_verbs__err(st, TFRDV_UNAVAILABLE, "verbs: worker %s: verbs transport destroyed", ew);
    }
    v->entered++; /* tfrdv_verbs_destroy waits until this has left */
    msg[0] = 0;
    for (;;) {
        tfrdv_verbs__peer* p = tfrdv_verbs__find_peer(v, w.ptr, w.len);
        if (v->destroying) { code = TFRDV_UNAVAILABLE; tfrdv_verbs__fmt(msg, sizeof msg, "verbs transport destroyed"); break; }
        if (p && p->state == TFRDV_VERBS__PEER_UP) {
            if (!p->remote.incarnation) {
                code = TFRDV_UNAVAILABLE;
                tfrdv_verbs__fmt(msg, sizeof msg, "it had no manager attached when it connected (incarnation 0): attach before connecting");
                break;
            }
            *inc = p->remote.incarnation;
            break;
        }
        if (!p && v->cfg.exchange) {
            code = TFRDV_NOT_FOUND;
            tfrdv_verbs__fmt(msg, sizeof msg, "not connected (with an exchange callback, tfrdv_verbs_connect it first)");
            break;
        }
        if (!p) {
            pthread_mutex_unlock(&v->mu);
            code = tfrdv_verbs__lookup(v, w.ptr, w.len, host, sizeof host, &port, st);
            pthread_mutex_lock(&v->mu);
            if (code != TFRDV_OK) {
                v->entered--;
                if (v->destroying && v->entered == 0) pthread_cond_broadcast(&v->cv);
                pthread_mutex_unlock(&v->mu);
                return code; /* st: NOT_FOUND naming the worker, or a bad resolve answer */
            }
            if (!tfrdv_verbs__find_peer(v, w.ptr, w.len) && !tfrdv_verbs__placeholder(v, w.ptr, w.len, host, port)) {
                code = TFRDV_RESOURCE_EXHAUSTED;
                tfrdv_verbs__fmt(msg, sizeof msg, "out of memory");
                break;
            }
            continue;
        }
        if (!tfrdv_verbs__can_reconnect(v, p)) {
            code = p->broken.code ? (tfrdv_code)p->broken.code : TFRDV_UNAVAILABLE;
            tfrdv_verbs__fmt(msg, sizeof msg, "%s", p->broken.msg);
            break;
        }
        now = tfrdv_now_ns();
        if (!p->pend && !p->want_reconnect && !p->yield_at && now >= p->retry_at) { /* (timeout 0: the attempt starts, the
                                                                       answer comes to a later call) */
            p->want_reconnect = v->want_reconnect = 1;
            pthread_mutex_unlock(&v->mu);
            tfrdv_verbs__wake(v);
            pthread_mutex_lock(&v->mu);
            continue;
        }
        if (now >= end) {
            code = timeout_ns == 0 ? TFRDV_UNAVAILABLE : TFRDV_DEADLINE_EXCEEDED;
            tfrdv_verbs__fmt(msg, sizeof msg, "did not answer%s%.200s", p->fresh && !p->fails ? "" : ": ", p->fresh && !p->fails ? "" : p->broken.msg);
            break;
        }
        {
            int64_t until = end, left;
            if (!p->pend && p->retry_at > now && p->retry_at < until) until = p->retry_at;
            if (until - now > 10000000) until = now + 10000000;
            left = until - now;
            if (v->has_thr) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                left += ts.tv_nsec;
                ts.tv_sec += (time_t)(left / 1000000000);
                ts.tv_nsec = (long)(left % 1000000000);
                (void)pthread_cond_timedwait(&v->cv, &v->mu, &ts);
            } else { /* host-driven: this thread progresses meanwhile */
                pthread_mutex_unlock(&v->mu);
                if (tfrdv_verbs_poll(v, left) == 0) { /* (another thread progresses, or nothing came) */
                    struct timespec ts = {0, 1000000};
                    nanosleep(&ts, 0);
                }
                pthread_mutex_lock(&v->mu);
            }
        }
    }
    v->entered--;
    if (v->destroying && v->entered == 0) pthread_cond_broadcast(&v->cv);
    pthread_mutex_unlock(&v->mu);
    if (code != TFRDV_OK) return tfrdv_verbs__err(st, code, "verbs: worker %s: %s", ew, msg);
    if (st) tfrdv_status_set(st, TFRDV_OK, "");
    return TFRDV_OK;
}
TFRDV_API tfrdv_transport tfrdv_verbs_transport(tfrdv_verbs* v) {
    tfrdv_transport t;
    memset(&t, 0, sizeof t);
    if (!v) return t;
    t.user = v;
    t.start_call = tfrdv_verbs__start_call;
    t.cancel_call = tfrdv_verbs__cancel_call;
    t.wait = tfrdv_verbs__t_wait;
    t.destroy = tfrdv_verbs__t_destroy;
    t.ref = tfrdv_verbs__t_ref; /* each manager holds v until it goes (TRANSPORTS in tfrdv.h) */
    t.peer_incarnation = tfrdv_verbs__peer_inc;
    return t;
}
TFRDV_API tfrdv_code tfrdv_verbs_attach(tfrdv_verbs* v, tfrdv_mgr* mgr, tfrdv_status* st) {
    tfrdv_mgr* old;
    if (!v || !mgr) return tfrdv_status_set(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_attach: NULL argument");
    tfrdv_mgr_ref(mgr);
    pthread_mutex_lock(&v->mu);
    old = v->mgr;
    v->mgr = mgr;
    pthread_mutex_unlock(&v->mu);
    if (old) tfrdv_mgr_unref(old);
    return TFRDV_OK;
}
TFRDV_API int tfrdv_verbs_port(const tfrdv_verbs* v) { return v ? v->listen_port : 0; }
TFRDV_API int tfrdv_verbs_fd(const tfrdv_verbs* v) { return v ? v->efd : -1; }
TFRDV_API const char* tfrdv_verbs_describe(const tfrdv_verbs* v) { return v ? v->desc : ""; }
TFRDV_API tfrdv_code tfrdv_verbs_register(tfrdv_verbs* v, void* ptr, size_t len, tfrdv_status* st) {
    tfrdv_verbs__reg* e;
    if (!v || !ptr || !len) return tfrdv_status_set(st, TFRDV_INVALID_ARGUMENT, "tfrdv_verbs_register: NULL or empty range");
    pthread_mutex_lock(&v->mu);
    e = tfrdv_verbs__rc_get(&v->rc, ptr, len, 1, st);
    pthread_mutex_unlock(&v->mu);
    return e ? TFRDV_OK : (st ? st->code : TFRDV_RESOURCE_EXHAUSTED);
}
TFRDV_API void tfrdv_verbs_invalidate(tfrdv_verbs* v, void* ptr, size_t len) {
    if (!v || !ptr) return;
    pthread_mutex_lock(&v->mu);
    tfrdv_verbs__rc_invalidate(&v->rc, ptr, len);
    pthread_mutex_unlock(&v->mu);
}
TFRDV_API void tfrdv_verbs_get_stats(tfrdv_verbs* v, tfrdv_verbs_stats* out) {
    if (!v || !out) return;
    pthread_mutex_lock(&v->mu);
    *out = v->stats;
    out->reg_hits = v->rc.hits;
    out->reg_misses = v->rc.misses;
    out->reg_evictions = v->rc.evictions;
    out->registered_bytes = v->rc.bytes;
    out->bootstraps_pending = v->npends;
    pthread_mutex_unlock(&v->mu);
}
#endif /* TFRDV_VERBS_PROTOCOL_ONLY */

#ifdef __cplusplus
}
#endif
#undef TFRDV_VERBS__PRIVATE
#undef TFRDV_VERBS__MAX_PENDING
#undef TFRDV_VERBS__HDR
#undef TFRDV_VERBS__IMM_CTRL
#undef TFRDV_VERBS__TENSOR_MAX
#undef TFRDV_VERBS__INFO_MAGIC
#undef TFRDV_VERBS__PAGE
#undef TFRDV_VERBS__VERSION
#undef TFRDV_VERBS__INFO_VERSION
#undef TFRDV_VERBS__WR_CTRL
#undef TFRDV_VERBS__WR_DATA
#undef TFRDV_VERBS__WR_KIND
#undef TFRDV_VERBS__WR_RECV
#endif /* TFRDV_VERBS_IMPLEMENTATION */
