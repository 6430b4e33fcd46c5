/* tfrdv_tcp.h - v0.1.0 - socket transport for tfrdv (TCP and Unix-domain sockets), no
   dependencies - MIT or public domain (see the end of tfrdv.h)

   USAGE
     Include tfrdv.h first. In exactly ONE .c or .cpp file:
         #define TFRDV_TCP_IMPLEMENTATION
         #include "tfrdv.h"
         #include "tfrdv_tcp.h"
     (the tfrdv.h implementation may live in another translation unit). Link with -lpthread.
     Nothing but libc, POSIX sockets and POSIX threads. Linux first: epoll, accept4,
     TCP_USER_TIMEOUT, TCP_NOTSENT_LOWAT, MSG_NOSIGNAL and abstract Unix names are used where the
     headers define them; elsewhere poll(), accept + fcntl and SO_NOSIGPIPE stand in. Define
     TFRDV_TCP_NO_TRANSPORT in the implementation file to build only the frame codec (no sockets,
     no threads: fuzzers, tests). Define TFRDV_TCP_NO_EPOLL to force the poll() loop on Linux.

   WHAT IT DOES
     A tfrdv_transport for tfrdv-to-tfrdv traffic: a small fetch costs about one socket round
     trip, a large one streams from the sender's value memory straight into the memory the
     receiver chose. One object is client and server:
       client  worker name -> address from tfrdv_tcp_config.workers, tfrdv_tcp_set_worker or the
               resolve callback. One connection per peer address, opened by the first call and
               shared by every call to that peer (many calls in flight on it). A call is one
               REQUEST frame written with one sendmsg; its response is read straight into
               tfrdv_call_alloc_value memory.
       server  (listen_address set, manager attached with tfrdv_tcp_attach) answers REQUEST frames
               with tfrdv_mgr_serve; a CANCEL frame or the request's deadline withdraws the serve
               request through a tfrdv_cancel_mgr (a value sent later stays buffered for the next
               receiver). A value the serve handed over but that could not be delivered (the
               connection broke, the client cancelled) goes back to the manager's table.
       addresses  "host:port" (IPv4 literal or host name), "[v6]:port", "unix:/path/to/socket"
               and, on Linux, "unix:@name" (abstract namespace, no file). Port 0 picks a free port
               (tfrdv_tcp_port). A port already in use is an error naming the address: listeners
               set SO_REUSEADDR, never SO_REUSEPORT (which lets two servers share a port
               silently). A Unix socket file left by a dead server (connect gives ECONNREFUSED) is
               replaced; one a live server listens on is an error. The file gets mode unix_mode
               (default 0600) and is removed by tfrdv_tcp_destroy.

   WIRE FORMAT (little-endian, version 1)
     Every frame starts with a 16-byte header:
         u8 type, u8 flags (0), u16 zero, u32 body length, u64 id
     id is the call's wire id: chosen by the client, unique per connection (not the tfrdv request
     id, which travels in the body: two calls may carry the same request id). Bodies:
       1 HELLO     u32 magic 0x56445254 ("TRDV"), u16 version (1), u16 zero, u64 incarnation,
                   u32 name length (<= 255), worker name. id 0. Each side sends one first; the
                   client may pipeline its requests behind it. Another version or magic: CLOSE.
       2 REQUEST   i64 step id, i64 request id, i64 deadline (ns left when sent; 0 none),
                   u32 key length (<= max_key_len), key bytes
       3 RESPONSE  i32 dtype, u32 rank (<= 254), u32 is_dead, u32 zero, u64 value bytes,
                   rank x i64 dims (each >= 0), then the first value bytes (at most frame_bytes)
       4 DATA      more value bytes of response id, in order (body = the bytes)
       5 ERROR     u32 code (1..16), u32 status detail (TFRDV_DETAIL_*), u32 message length
                   (<= max_message_len), message bytes: the call fails with that status
       6 CANCEL    no body: the client gave up on id; the server withdraws or stops sending
       7 CLOSE     u32 code, u32 message length, message: the sender closes the connection after
                   it (why: bad magic, version, malformed frame, shutdown)
     Every length, rank, dimension and key is checked against the receiver's limits before
     anything is allocated; a malformed frame closes the connection (logged, counted in
     stats.protocol_errors, the peer told why by a CLOSE) and fails its calls UNAVAILABLE.
     Value sizes are 64-bit: values above 2 GiB move between tfrdv peers (max_tensor_bytes).
     Not carried: DT_STRING's in-memory layout; the value's bytes go as they are (a DT_STRING
     value must already be a flat encoding both sides agree on).

   HEAD-OF-LINE
     A response larger than frame_bytes (256 KiB) is sent as a RESPONSE frame and DATA frames of
     at most frame_bytes, one frame per active response in turn (round robin), with requests,
     cancels and small responses in between. On TCP the socket's TCP_NOTSENT_LOWAT (128 KiB) keeps
     the kernel's unsent queue short, so the next frame's choice is made here and not megabytes
     earlier: a 4 KiB response waits for at most about one frame of each large response in flight.
     Each sendmsg gathers frame headers and value bytes (iovec, no copy in user space), up to
     4 MiB per call.

   RECEIVING
     Frames are read through a 16 KiB buffer per connection; value bytes that arrive in the same
     read as their frame header are copied once from it, every other byte is read by recv straight
     into the destination (asking for all that is left of the frame). Large values therefore land
     in the receiver's memory without a staging copy; pass an alloc hook (tfrdv_args.alloc_fn)
     that reuses warm memory for the best throughput.

   CONTRACTS
     Every started call finishes exactly once: OK, the serving side's status (code, detail and
     message cross the wire, so TFRDV_DETAIL_WORKER_RESTARTED reaches the receiver), CANCELLED
     (cancel_call: a CANCEL frame follows), DEADLINE_EXCEEDED (tfrdv_call_deadline passed, checked
     every expire_interval_ns; the time left also travels in the request so the server drops
     expired requests), or UNAVAILABLE naming the peer and the cause: connect failure, the
     connection closing or resetting (a peer that dies fails its calls at once), a malformed
     frame, shutdown. The next call to that peer reconnects. After a failed connect, calls to that
     address within the backoff window fail UNAVAILABLE at once; the window starts at backoff_ns
     and doubles per failure up to backoff_max_ns; a successful connect resets it.

   SECURITY: NO TLS
     Frames are neither encrypted nor authenticated: anyone who can connect can fetch values.
     Run it on a Unix socket (same host; the file's mode, 0600 by default, and the directory's
     permissions decide who may connect), on a private network, or through a tunnel (SSH port
     forwarding, WireGuard). Hostile input is bounded (limits above, caps on connections and
     requests in config) but never trusted to be who it claims.

   PROGRESS AND THREADS
     num_threads 0 or 1: one I/O thread owned by the companion runs the event loop (epoll, or
     poll() without it), handles every socket event, the timers and the attached manager's
     tfrdv_mgr_expire (every expire_interval_ns). num_threads -1: no thread; the host calls
     tfrdv_tcp_poll(t, timeout_ns) and may sleep on tfrdv_tcp_fd(t) (readable when there is work)
     between calls, waking at least every expire_interval_ns. Requests and small responses are
     written by the thread that produced them (the caller of the fetch, the serve completion) when
     the connection's send queue is empty, so the small path costs one sendmsg per message and no
     hand-off; the rest is written by the I/O loop. Receive callbacks of fetches and serve
     completions never run under a lock of this companion. Every function is thread-safe; do not
     call tfrdv_tcp_destroy from a callback.

   LIFE CYCLE
       tfrdv_tcp_config tc = tfrdv_tcp_config_init();  tc.listen_address = "127.0.0.1:0"; ...
       tfrdv_tcp_create(&tc, &t, &st);            binds the listener (busy port: error here)
       mc.transport = tfrdv_tcp_transport(t);  tfrdv_mgr_create(&mc, &mgr, &st);
       tfrdv_tcp_attach(t, mgr, &st);             starts serving, drives tfrdv_mgr_expire
       ... tfrdv_send / tfrdv_recv_async as usual; tfrdv_tcp_port(t) for the chosen port ...
       tfrdv_tcp_destroy(t);  tfrdv_mgr_destroy(mgr);      (either order)
     tfrdv_tcp_destroy closes the listener, fails every call in flight exactly once (CANCELLED
     "tfrdv_tcp destroyed"), withdraws every request being served and waits for their serve
     completions, joins the I/O thread, closes every socket and drops the manager reference. When
     it returns no thread of the companion can touch a value or the manager. The transport handed
     to the manager keeps the object's memory alive until the manager lets go of it; a fetch
     started after destroy fails UNAVAILABLE at once.
*/
#ifndef TFRDV_TCP_H
#define TFRDV_TCP_H

#ifndef TFRDV_H
#error "Please include tfrdv.h before tfrdv_tcp.h"
#endif
#if TFRDV_VERSION_MAJOR != 0
#error "tfrdv_tcp.h 0.1 needs tfrdv.h 0.x"
#endif

#define TFRDV_TCP_VERSION_MAJOR 0
#define TFRDV_TCP_VERSION_MINOR 1
#define TFRDV_TCP_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
   Frame codec (pure functions, no sockets: used by the transport, exposed for tests, fuzzers and
   other implementations of the protocol)
   --------------------------------------------------------------------------------------------- */
#define TFRDV_TCP_PROTOCOL_VERSION 1
#define TFRDV_TCP_MAGIC 0x56445254u    /* "TRDV" little-endian */
#define TFRDV_TCP_HEADER_LEN 16
#define TFRDV_TCP_MAX_RANK 254
#define TFRDV_TCP_NAME_MAX 255         /* worker name bytes in a HELLO */
/* Longest encoding of a frame's header + fixed body (RESPONSE meta with 254 dims). */
#define TFRDV_TCP_META_MAX (TFRDV_TCP_HEADER_LEN + 24 + 8 * TFRDV_TCP_MAX_RANK)

typedef enum tfrdv_tcp_frame_type {
    TFRDV_TCP_HELLO = 1, TFRDV_TCP_REQUEST = 2, TFRDV_TCP_RESPONSE = 3, TFRDV_TCP_DATA = 4,
    TFRDV_TCP_ERROR = 5, TFRDV_TCP_CANCEL = 6, TFRDV_TCP_CLOSE = 7
} tfrdv_tcp_frame_type;

/* What the receiver accepts (every field 0: the defaults of tfrdv_tcp_config). */
typedef struct tfrdv_tcp_limits {
    size_t max_key_len;          /* REQUEST key (0: 4096) */
    uint32_t max_message_len;    /* ERROR / CLOSE message (0: 4096) */
    uint64_t max_tensor_bytes;   /* RESPONSE value bytes (0: 2^40) */
    uint32_t max_frame_len;      /* any frame body (0: 16 MiB) */
} tfrdv_tcp_limits;

/* One decoded frame. Pointers point into the decoded buffer. For RESPONSE, data_len is the number
   of value bytes that follow the meta inside this frame (not decoded: the transport reads them
   into the destination); for DATA, data_len is the body length. */
typedef struct tfrdv_tcp_frame {
    int type;                    /* tfrdv_tcp_frame_type */
    uint64_t id;
    uint32_t body_len;
    /* HELLO */
    uint16_t version;
    uint64_t incarnation;
    tfrdv_str name;
    /* REQUEST */
    int64_t step_id, request_id, deadline_ns;
    tfrdv_str key;
    /* RESPONSE */
    int32_t dtype, rank;
    int is_dead;
    uint64_t bytes;
    int64_t dims[TFRDV_TCP_MAX_RANK];
    uint64_t data_len;
    /* ERROR, CLOSE */
    uint32_t code, detail;
    tfrdv_str message;
} tfrdv_tcp_frame;

/* Decodes the frame at buf[0..len). Returns the bytes consumed (> 0: header + decoded body; for
   RESPONSE header + meta, for DATA the header only: data_len bytes follow), 0 when more bytes are
   needed (nothing is checked beyond what is there), or -1 for a malformed frame: st (if non-NULL)
   gets INVALID_ARGUMENT naming the defect (unknown type, length over a limit, rank > 254, negative
   dim, dims whose element count overflows, bad magic, version, code out of 1..16, non-zero
   reserved field). lim NULL: defaults. Never reads past len, never allocates. */
TFRDV_API long tfrdv_tcp_decode(const uint8_t* buf, size_t len, const tfrdv_tcp_limits* lim,
                                tfrdv_tcp_frame* out, tfrdv_status* st);
/* Encodes f (type, id and that type's fields; for RESPONSE data_len value bytes are announced but
   not written: they follow in the stream; for DATA only the header is written) into buf. Writes
   at most cap bytes and returns the full length (call with cap 0 to size the buffer). */
TFRDV_API size_t tfrdv_tcp_encode(const tfrdv_tcp_frame* f, uint8_t* buf, size_t cap);

/* ---------------------------------------------------------------------------------------------
   Transport
   --------------------------------------------------------------------------------------------- */
typedef struct tfrdv_tcp tfrdv_tcp;

typedef struct tfrdv_tcp_worker {
    const char* name;    /* "/job:ps/replica:0/task:0" */
    const char* address; /* "10.0.0.7:2222", "[::1]:2222", "unix:/run/tfrdv/ps0.sock" */
} tfrdv_tcp_worker;

typedef struct tfrdv_tcp_config {
    tfrdv_hooks hooks;             /* allocator and logger (sync and clock are not used) */
    const char* listen_address;    /* "0.0.0.0:5000", "127.0.0.1:0" (free port), "[::]:5000",
                                      "unix:/path"; NULL: client only */
    int num_threads;               /* 0 or 1: one I/O thread; -1: none, the host calls
                                      tfrdv_tcp_poll (more threads are not used) */
    const tfrdv_tcp_worker* workers; /* worker name -> address (copied), a cluster spec */
    size_t num_workers;
    /* Consulted for names not in the table: write a NUL-terminated address, return 1 if known. */
    int (*resolve)(void* user, const char* worker, size_t len, char* address, size_t cap);
    void* resolve_user;
    /* Limits on what a peer may send (checked before anything is allocated). */
    size_t max_key_len;            /* 0: 4096 */
    uint32_t max_message_len;      /* status / close messages (0: 4096) */
    uint64_t max_tensor_bytes;     /* largest value received or sent (0: 2^40) */
    int max_connections;           /* accepted connections open at once (0: 1024); beyond it a
                                      new connection is accepted and closed at once */
    int max_requests_per_connection; /* served requests in flight per connection (0: 4096) */
    int max_requests;              /* served requests in flight in total (0: 65536); beyond
                                      either cap a request gets RESOURCE_EXHAUSTED */
    /* Sockets. */
    uint32_t frame_bytes;          /* largest value bytes per frame (0: 256 KiB; 4 KiB..16 MiB) */
    int notsent_lowat;             /* TCP_NOTSENT_LOWAT bytes (0: 128 KiB; < 0: not set) */
    int send_buffer;               /* SO_SNDBUF bytes (0: 4 MiB on Unix sockets, the kernel's
                                      autotuning on TCP; < 0: never set) */
    int64_t connect_timeout_ns;    /* connect + hello (0: 5 s) */
    int64_t handshake_timeout_ns;  /* an accepted connection must send its HELLO within (0: 5 s) */
    int64_t backoff_ns;            /* after a failed connect (0: 100 ms; < 0: none) */
    int64_t backoff_max_ns;        /* cap of the doubling window (0: 5 s) */
    int64_t keepalive_ns;          /* TCP keep-alive idle time, then 3 probes 1/5 of it apart
                                      (0: 10 s; < 0: off) */
    int64_t user_timeout_ns;       /* TCP_USER_TIMEOUT: unacknowledged data fails the connection
                                      after (0: 30 s; < 0: off) */
    int64_t expire_interval_ns;    /* timers and tfrdv_mgr_expire period (0: 20 ms) */
    int unix_mode;                 /* permission bits of a Unix socket file (0: 0600) */
} tfrdv_tcp_config;
TFRDV_API tfrdv_tcp_config tfrdv_tcp_config_init(void);

/* Validates cfg, binds and listens on listen_address (an address in use, a live Unix socket or
   a bad address is an error naming it), starts the I/O thread. Connections wait in the listen
   backlog until tfrdv_tcp_attach. */
TFRDV_API tfrdv_code tfrdv_tcp_create(const tfrdv_tcp_config* cfg, tfrdv_tcp** out,
                                      tfrdv_status* st);
/* The vtable for tfrdv_mgr_config.transport. It holds a reference on t (dropped by its destroy). */
TFRDV_API tfrdv_transport tfrdv_tcp_transport(tfrdv_tcp* t);
/* Binds the manager (one per tfrdv_tcp; a reference is held until destroy): requests are served
   from its tables, its worker name and incarnation go in the HELLO, its tfrdv_mgr_expire is
   driven. A client-only object (no listen_address) may skip attach: deadlines still hold. */
TFRDV_API tfrdv_code tfrdv_tcp_attach(tfrdv_tcp* t, tfrdv_mgr* mgr, tfrdv_status* st);
/* The bound TCP port (0 without a listener or for a Unix socket). */
TFRDV_API int tfrdv_tcp_port(const tfrdv_tcp* t);
/* The listener's address as a client would dial it ("127.0.0.1:43817", "unix:/tmp/x.sock"),
   "" without a listener. Valid until destroy. */
TFRDV_API const char* tfrdv_tcp_address(const tfrdv_tcp* t);
/* Adds or replaces a worker's address (address NULL removes it). New calls use the new address;
   calls in flight stay on their connection. */
TFRDV_API tfrdv_code tfrdv_tcp_set_worker(tfrdv_tcp* t, const char* worker, const char* address,
                                          tfrdv_status* st);
/* Shut down (see LIFE CYCLE). Not from a callback. */
TFRDV_API void tfrdv_tcp_destroy(tfrdv_tcp* t);
/* Host-driven progress (num_threads -1; also harmless beside the thread): waits up to timeout_ns
   (< 0: until something happens, 0: no wait) for socket events, handles them and whatever else
   is ready, runs the timers and the manager's expiry when due. Returns the number of socket
   events handled. Concurrent callers take turns. */
TFRDV_API int tfrdv_tcp_poll(tfrdv_tcp* t, int64_t timeout_ns);
/* A descriptor that becomes readable when tfrdv_tcp_poll has work (the epoll descriptor; the
   wake-up pipe in the poll() build, where sockets do not make it readable: poll on a timer
   there). -1 before create succeeded. */
TFRDV_API int tfrdv_tcp_fd(const tfrdv_tcp* t);

typedef struct tfrdv_tcp_stats {
    /* client */
    uint64_t calls_started, calls_ok, calls_failed, calls_cancelled, calls_expired;
    uint64_t bytes_received;       /* value bytes fetched */
    uint64_t connects, connect_failures, backoff_rejects; /* calls failed at once in backoff */
    /* server */
    uint64_t served, serve_ok, serve_failed, serve_cancelled, serve_expired;
    uint64_t bytes_sent;           /* value bytes served */
    uint64_t values_returned;      /* served values given back to the table (undeliverable) */
    uint64_t accepted, connections_rejected, requests_rejected;
    /* both */
    uint64_t protocol_errors;      /* connections closed for a malformed or hostile frame */
    uint64_t frames_sent, frames_received, sendmsg_calls, recv_calls;
    size_t connections;            /* open now (client and server side) */
    size_t client_calls_live, server_requests_live;
    size_t queued_bytes;           /* control bytes waiting in send queues */
} tfrdv_tcp_stats;
TFRDV_API void tfrdv_tcp_get_stats(tfrdv_tcp* t, tfrdv_tcp_stats* out);

#ifdef __cplusplus
}
#endif
#endif /* TFRDV_TCP_H */
