/* tfrdv_tcp.h - v0.5.0 - socket transport for tfrdv (TCP and Unix-domain sockets), no
   dependencies - MIT or public domain (see the end of tfrdv.h)

   USAGE
     Include tfrdv.h first. In exactly ONE .c or .cpp file:
         #define TFRDV_TCP_IMPLEMENTATION
         #include "tfrdv.h"
         #include "tfrdv_tcp.h"
     (the tfrdv.h implementation may live in another translation unit). Link with -lpthread.
     The implementation file should define _GNU_SOURCE (or _DEFAULT_SOURCE) before any include
     on Linux, so the headers declare accept4 and the TCP options; without it the portable
     fallbacks are used. Nothing but libc, POSIX sockets and POSIX threads. Linux first: epoll, accept4,
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
               replaced; one a live server listens on is an error, and so is a path that is not a
               socket (a regular file, a directory, a link: never removed). The file gets mode unix_mode
               (default 0600) and is removed by tfrdv_tcp_destroy.

   WIRE FORMAT (little-endian, version 5)
     Every frame starts with a 16-byte header:
         u8 type, u8 flags (0), u16 zero, u32 body length, u64 id
     id is the call's wire id: chosen by the client, unique per connection (not the tfrdv request
     id, which travels in the body: two calls may carry the same request id). Bodies:
       1 HELLO     u32 magic 0x56445254 ("TRDV"), u16 version (5), u16 zero, u64 incarnation,
                   u32 name length (<= 255), worker name. id 0. Each side sends one first; the
                   client may pipeline its requests behind it. Both then speak the lower of the
                   two versions. Bad magic, version 0: CLOSE.
       2 REQUEST   i64 step id, i64 request id, i64 deadline (ns left when sent; 0 none; negative:
                   malformed; any positive value up to INT64_MAX is taken, saturated),
                   u32 key length (<= max_key_len), key bytes
       3 RESPONSE  i32 dtype, u32 rank (<= 254), u32 flags (1 dead, 2 no value: a dead value
                   without payload; then rank and bytes are 0), u32 zero, u64 value bytes,
                   rank x i64 dims (each >= 0), then the first value bytes (at most frame_bytes);
                   flag 4 (version 3, SAME HOST below): u64 address instead of bytes, the value's
                   bytes lie at [address, address + value bytes) in the server's memory;
                   flag 8 (version 5, ZERO COPY below; never with 4): u32 descriptor, u32 zero,
                   u64 offset instead of bytes: the value lies at [offset, offset + value bytes)
                   of the server's shared pool whose descriptor (in the server) that is
       4 DATA      more value bytes of response id, in order (body = the bytes)
       5 ERROR     u32 code (1..16), u32 status detail (TFRDV_DETAIL_*; one the receiver does not
                   know arrives as 0), u32 message length
                   (<= max_message_len), message bytes: the call fails with that status
       6 CANCEL    no body: the client gave up on id and will not deliver its answer; the server
                   withdraws the request, stops sending, or takes back a value already written
       7 CLOSE     u32 code, u32 message length, message: the sender closes the connection after
                   it (why: bad magic, version, malformed frame, shutdown)
       8 ACK       n x u64 wire ids (1..512), id 0 (version 2): the client delivered the values
                   of these responses; the server releases them
       9 SAMEHOST  u32 flags, u32 n, n bytes, id 0 (version 3, Unix sockets; see SAME HOST):
                   client -> server flag 1 "I read large values by address", server -> client
                   flag 2 "granted" (or 0: refused); each side sends at most one. Version 4
                   (SAME HOST RING): client flag 4 "a ring": the frame's sendmsg (or an earlier
                   one) carries 4 descriptors (SCM_RIGHTS: the memfd, three eventfds); server
                   flag 8 "mapped"; client flag 16 (with 4) "my lent threads may sleep on a
                   futex", server flag 16 (with 8) "I wake them so". A version 3 peer gets
                   none of these (it refuses unknown flags). Flags 1 to 16 carry no bytes (n 0).
                   Version 5, the upgrade of a TCP connection (SAME HOST): client flag 32 alone
                   with its host identity (1..255 bytes), server flag 64 alone with a 16-byte
                   token then its side address (2..108 bytes; or flags 0: refused); on the side
                   socket client flag 128 alone with the token (16), before any other frame but
                   its HELLO. A TCP connection carries one question (32) and one answer (64 or
                   0): a second of either, or any other flags there, is a malformed frame
      10 RELEASE   n x u64 wire ids (1..512), id 0 (version 5, ZERO COPY): the client no longer
                   maps the pool values of these responses; the server releases its hold
     Delivery (version 2). A server keeps the value of each response it has written until the
     client acknowledges it (ACK: the receive got it) or refuses it (CANCEL: the receive had given
     up: cancelled, timed out, its rendezvous aborted, while the answer was on the wire); a refused
     value, or one still unacknowledged when its connection ends, goes back to the front of its
     key's queue (tfrdv_mgr_serve_return) for the next receiver. The client gathers its ACKs and
     sends them with its next frame (a REQUEST, usually: no system call of their own), at the end
     of an I/O loop pass, or at the next tick (expire_interval_ns). A client whose HELLO says
     version 1 is served as before: values released once written, no ACK. tfrdv_tcp.h 0.3 and
     older accept no HELLO but version 1: such a peer refuses a version 2 one (CLOSE "protocol
     version 2 not supported") and the calls fail UNAVAILABLE saying so; update both ends.
     Every length, rank, dimension and key is checked against the receiver's limits before
     anything is allocated; a malformed frame closes the connection (logged, counted in
     stats.protocol_errors, the peer told why by a CLOSE) and fails its calls UNAVAILABLE. A frame
     being sent then is finished first (a CLOSE inside it would read as its bytes): the thread
     that read the malformed frame writes the rest and the CLOSE on a duplicate of the socket,
     waiting for the socket at most 100 ms in all (a peer that does not read gets EOF instead).
     Value sizes are 64-bit: values above 2 GiB move between tfrdv peers (max_tensor_bytes).
     Not carried: DT_STRING's in-memory layout; the value's bytes go as they are (a DT_STRING
     value must already be a flat encoding both sides agree on).

   HEAD-OF-LINE
     A response larger than frame_bytes (256 KiB) is sent as a RESPONSE frame and DATA frames of
     at most frame_bytes, one frame per active response in turn (round robin), with requests,
     cancels and small responses in between. On TCP the socket's TCP_NOTSENT_LOWAT (512 KiB) keeps
     the kernel's unsent queue short, so the next frame's choice is made here and not megabytes
     earlier: a 4 KiB response waits for at most that queue and about one frame of each large
     response in flight (about 0.2 ms on loopback, 0.6 ms at 10 Gb/s; a smaller notsent_lowat
     shortens it and costs bulk throughput: 128 KiB cost a third of it on loopback).
     Each sendmsg gathers frame headers and value bytes (iovec, no copy in user space), up to
     4 MiB per call. A server connection whose socket takes nothing for stall_timeout_ns (5 s)
     while answers wait for it, or whose oldest written answer stays unacknowledged that long, is
     closed: its values go back to the table (a peer that asks and never reads does not keep
     them). A client's I/O thread that a receive callback keeps busy that long stalls its
     connections too: keep long work out of callbacks (or hand it to another thread).

   RECEIVING
     Frames are read through a 16 KiB buffer per connection; value bytes that arrive in the same
     read as their frame header are copied once from it, every other byte is read by recv straight
     into the destination (asking for all that is left of the frame). Large values therefore land
     in the receiver's memory without a staging copy; pass an alloc hook (tfrdv_args.alloc_fn)
     that reuses warm memory for the best throughput.

   SAME HOST (Linux, Unix sockets, protocol version 3)
     The Unix socket stays the control channel (HELLO, REQUEST, CANCEL, ACK; its end is the peer's
     end); large values skip it. After the server's HELLO a client on a "unix:" connection learns
     the server's pid from the socket (SO_PEERCRED: never from a frame), checks that it may read
     that process's memory the way UCX does (process_vm_readv on itself, then on the peer at
     address NULL: EFAULT means allowed, EPERM denied: Yama ptrace_scope, a non-dumpable server,
     other uids, seccomp; a pid 0 means another pid namespace) and, if so, asks with SAMEHOST flag
     1. A server that is the process that bound the listener (not a child forked after) grants it
     (flag 2); from then on each response of at least the server's same_host bytes (64 KiB: below
     that the socket costs about the same) is a RESPONSE with flag 4 carrying the address and
     length of the served value, and the client reads it with process_vm_readv straight into its
     tfrdv_call_alloc_value memory: one copy instead of two. Requests written before the answer
     (the first ones, pipelined behind the HELLO) are answered over the socket. The server holds
     the value, alive and unchanged, until the ACK or the refusal, exactly as for bytes on the
     socket; a value refused, cancelled or unacknowledged when the connection ends goes back to
     the table; its stall_timeout_ns clock starts after the copy (taken at 64 MiB/s or more).
     A read that fails or comes back short (a peer that lies about its memory: EFAULT;
     that died: ESRCH; that turned non-dumpable meanwhile: EPERM) closes the connection as a
     malformed frame would: its calls fail UNAVAILABLE naming the cause, the peer gets a CLOSE.
     Bytes are only ever written within the destination's size. When the check fails, the server
     refuses, or same_host is TFRDV_OFF, the socket carries every byte; the reason is logged once
     per transport (level info). (Not the shared-memory ring in chunks: measured here, 64 MiB in
     64 KiB records through its 256 KiB ran at 0.4-0.7x the Unix socket's speed, faster only
     with both ends spinning on two CPUs.) An older peer never sees a SAMEHOST frame (only a
     version 3 HELLO gets one). TFRDV_TCP_CMA_DENY=1 in the environment (read by
     tfrdv_tcp_create) makes the check fail as EPERM would, for tests. TCP peers on the same host
     move to a Unix socket first (below). The read runs on the thread reading the connection: a
     64 MiB value holds it for its copy (~10-25 ms; other responses on that connection wait for
     it). A value of 8 MiB or more, when that thread may run on two CPUs or more, is read in two
     halves at once: by that thread and by a second one started for the value and joined before
     the value completes (no thread stays): one thread's process_vm_readv of 64 MiB takes
     0.55-0.75x the time of a memcpy on a 2-vCPU VM, two 0.9-1.5x. A failure reports the bytes
     that arrived from the start, as with one thread.
     stats.values_cma / values_cma_sent count the values that took this path.
     TCP peers on one host (protocol version 5, epoll builds): the TCP connection upgrades itself
     after HELLO; nothing changes in the caller's code. A version 5 client on TCP, with same_host
     on and TFRDV_TCP_UPGRADE_DENY=1 not in its environment, sends its host identity after the
     server's HELLO (SAMEHOST flag 32: the kernel's boot id and its network namespace's device
     and inode), at most once per peer per 10 s.
     A server whose own identity is the same, with same_host on and TFRDV_TCP_UPGRADE_DENY=1 not
     in its environment (read by tfrdv_tcp_create), answers flag 64: a one-time token (16 bytes
     from getrandom; single use, valid 10 s, at most 8 outstanding: a ninth gives up the oldest)
     and the address of its side listener, an abstract Unix socket "@tfrdv-<pid>-<random hex>"
     made at the first offer (no file; gone with the transport; epoll builds only). Otherwise it
     answers flags 0 and logs why once per transport. A connection on the side socket may send
     its HELLO and then must present the token (flag 128, compared in constant time) within
     handshake_timeout_ns (else it is closed): any other frame first, a wrong, used or expired
     token closes it with a CLOSE naming what was wrong (stats.protocol_errors). With the token
     it is a Unix connection like any other (SAMEHOST flags 1 and 4 as above), except that a
     ring is refused to a client of another uid (SO_PEERCRED; an abstract socket has no file
     mode to keep them out, and a ring's eventfds must not be shared with them).
     The client dials the side address (only an "@tfrdv-..." one: a server cannot point it at
     another local service's abstract socket) in the I/O loop like any dial, sends its HELLO and
     the token, then asks as on any Unix connection (by address, the ring). When that SAMEHOST
     answer comes granting one of them, the side connection becomes the peer's connection for
     new calls; calls already on the TCP connection finish there, and the TCP connection is shut
     down for writing only after its last call completed and its ACKs went out (the server reads
     them, then the end, and closes it; closing earlier would give those values back to the
     server's table). So no value is delivered twice or lost across the switch. Any failure
     before that answer (the server refused, the side connect failed, the token was refused, the
     side connection ended, no SAMEHOST answer on it within connect_timeout_ns, neither path is
     possible on it, the server's answer on it grants neither: the side connection would carry
     nothing TCP does not; the TCP connection that offered it ended first, e.g. closed as
     malformed: nothing it offered is taken) closes the side connection and leaves the calls on
     TCP, logged once per transport (level info, "stay on TCP" and the reason; when the TCP
     connection's own end is logged, that line says it), and that peer makes no new attempt for
     60 s. If the side connection ends after it took over, its calls fail UNAVAILABLE as for a
     Unix peer and the next call dials TCP again, which may upgrade again (at most once per 10 s:
     a server that keeps dying does not cost an upgrade per redial). same_host TFRDV_OFF on
     either side, TFRDV_TCP_UPGRADE_DENY=1 on either side, or a version 4 peer: no upgrade.
     stats.tcp_upgrades counts the upgrades (both ends: the client when its new calls take the
     side connection, the server when a token checked out, whatever its side connection grants).

   SAME HOST RING (Linux, Unix sockets, protocol version 4)
     Small frames skip the socket too. With its SAMEHOST frame the client passes (SCM_RIGHTS) a
     memfd it made (MFD_ALLOW_SEALING, sealed F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL before it
     goes: nobody can shrink it under a mapping, so no SIGBUS) of 4 KiB + 2 x 256 KiB, holding
     two single-producer single-consumer rings (client -> server, server -> client; layout in
     the section of that name in the implementation), and three eventfds (the doorbells). The
     server checks what it got (a regular file of exactly that size with those seals, eventfds:
     anything else is refused, logged once, and the socket carries every frame), maps it and
     answers flag 8. From then on whole frames go through the ring while it has room and no
     frame is half written on the socket: queued control frames (REQUEST, CANCEL, ACK, ERROR,
     SAMEHOST; all of them or none) and RESPONSEs of at most 64 KiB with all their bytes (below
     same_host when by address is granted: larger ones still go by address); the rest takes the
     socket as before. Each ring record names how many socket frames its sender had written
     before it; the reader handles it only after that many socket frames and before the next
     one, so each direction keeps the sender's order across both channels. Frames are copied
     out of the ring before they are decoded, with the socket's limits; every position and
     length read from the shared memory is checked against the reader's own copy of the ring's
     size and positions: a peer that writes garbage there (or a frame that cannot come this way:
     HELLO, DATA, CLOSE, a value not all in the record) has its connection closed as for a
     malformed frame (UNAVAILABLE naming what was wrong, a CLOSE, stats.protocol_errors).
     Doorbells: each ring has a sleep word: a consumer that finds its ring empty writes whom to
     wake (1: its I/O loop, whose eventfd is in its epoll set, edge-triggered, never read; 2: a
     thread lent by tfrdv_recv, whose eventfd it polls next to the socket; 3: such a thread
     asleep on a futex on the word itself), then looks once more; a producer rings (one eventfd
     write, or FUTEX_WAKE for 3) only when the word is set, and clears it. The loop keeps an
     eventfd (it waits on many sockets at once). A lent thread of a client whose server agreed
     (SAMEHOST flag 16) sleeps on the futex (word 3: one system call each way where poll and
     an eventfd read cost two, and a cheaper wake-up) while nothing is due from its side on the
     socket (no blocked write, no frame half read); otherwise it polls as with 2. A futex cannot
     be waited on together with a descriptor, so the socket is covered thus: such a server
     counts its socket writes in the mapping (a u64 next to the sleep word), then looks at the
     word and wakes a futex sleeper; the sleeper writes the word, then looks at the count and,
     when it moved, looks at the socket (poll, no timeout) instead of sleeping: one of the two
     sees the other. The peer's death is only seen on the socket (its EOF), so a futex sleep
     lasts at most 20 ms and then looks at it: calls of a dead server fail within about 20 ms
     (a thread with no call left does not wait). This process's own reasons to wake the thread
     (a deadline, a blocked write, shutdown) count in a local word it reads after writing the
     sleep word, and wake the futex too. A lent thread spins (the spin rule below, unchanged:
     never when the peer shares its only CPU) on the ring's memory and the socket, with its
     sleep word cleared, so a producer whose consumer spins makes no system call at all. The
     socket stays the control channel: the peer's death is its EOF and every call completes
     exactly once as on the socket. An idle connection costs nothing (no thread wakes for the
     ring). Between blocking fetches a client connection is kept for the next lent thread (its
     socket out of the loop's set, see the kept connection under the socket path) with sleep
     word 0, also from the start of a call a thread will wait for: an answer written before
     that thread comes to wait rings nobody, and the thread finds it before it sleeps; the
     loop's doorbell (1) comes back when the loop takes the connection again. (With word 1 kept
     there, on one CPU a fast server's answer woke the I/O thread, which read it and took the
     lock from the waiting thread: 10-16% of fetches, two more context switches each.)
     Measured (bench_samehost, 2-vCPU VM, interleaved rounds): both processes on one CPU, a
     fetch through the ring is 0.88-1.02x a raw Unix-socket ping-pong (1 B and 4 KiB; 1.24-1.31x
     before the kept word), the socket 1.6x; on two CPUs 0.41x. A one-CPU fetch makes two
     context switches and 2.5 system calls (the client's doorbell, the server's epoll_wait, half
     the time a FUTEX_WAKE): about 6 us on this VM for a bare shared-memory ping-pong of that
     shape; the rest is the two processes' code. Fallbacks, each logged once per transport
     with the reason: same_host TFRDV_OFF on either side, a version 3 peer, memfd or eventfd
     failing, the server refusing, a build without it (not Linux, no epoll, no _GNU_SOURCE).
     TFRDV_TCP_RING_DENY in the environment (read by tfrdv_tcp_create): 1 = never offer or
     accept one, 2 = memfd_create taken as failing; for tests. Limit: an eventfd is shared with
     the peer, which could clear its O_NONBLOCK and fill its counter so that a doorbell write
     blocks; a full counter seen (EAGAIN) closes the connection, the first trick is open to a
     peer of the same uid (the socket file's mode), who could ptrace this process anyway.
     stats.ring_connections, frames_ring_sent / received, values_ring / values_ring_sent.

   ZERO COPY (Linux, Unix sockets, protocol version 5, on top of SAME HOST)
     A value whose bytes already lie in shared memory is not copied at all. tfrdv_tcp_pool_create
     makes a pool: one memfd (MFD_ALLOW_SEALING, sealed F_SEAL_SHRINK | F_SEAL_SEAL: it can never
     shrink under another process's mapping) mapped shared, with a first-fit allocator
     (tfrdv_tcp_pool_allocator: a tfrdv_allocator; make values with tfrdv_value_new(&alloc, ...)
     and write their bytes in place). tfrdv_tcp_add_pool(t, pool) lets the serving transport
     recognise them: a response that would go by address (SAME HOST granted, at least same_host
     bytes) whose value lies whole in a registered pool goes instead as RESPONSE flag 8 (the pool's
     descriptor number in the server, offset, length), to a client that said version 5. The
     client takes the descriptor with pidfd_getfd (Linux 5.6; it needs the permission
     process_vm_readv needs, which SAME HOST already checked), checks it (a regular file, sealed
     F_SEAL_SHRINK, offset + length within its size, no overflow) and maps the pages covering the
     range read-only (PROT_READ: do not write through the value). The receiver's value is that
     mapping: ->data points into it, nothing is copied; its release unmaps it and queues the
     response's id for a RELEASE frame (sent with the connection's next frame or at the next tick,
     expire_interval_ns). The server keeps a reference on the value (so its pool block is not
     reused) from the moment the frame is whole on the wire until that RELEASE or the
     connection's end; the ACK / CANCEL rules for the table are unchanged. A receive with its own
     alloc hook (tfrdv_args.alloc_fn) gets its own memory: one copy from the mapping, released at
     once (stats.values_zero_copy_copied). Costs and limits: mapping and unmapping (a few system
     calls, then page faults as the receiver reads: the bytes are read from the sender's pages);
     a receiver that keeps its values holds the sender's pool memory (stats.values_lent on the
     server; the pool's tfrdv_tcp_pool_live_bytes); a connection that ends (a client that closed
     its transport may still hold its values) keeps the server's hold on what it lent until the
     serving transport is destroyed (still counted in values_lent), so a value never changes
     under its receiver while the sender's transport lives: release pool values before closing
     the client transport, or their blocks stay taken until then; a server that dies leaves the
     mapping valid. A hostile reference (a
     descriptor that is no file or not sealed, a range past the pool's size, pidfd_getfd refused)
     closes the connection as a malformed frame would (UNAVAILABLE naming what was wrong, a CLOSE,
     stats.protocol_errors). Fallbacks: no pool registered, a value outside every pool, below
     same_host, no SAME HOST grant, a version 4 peer: the other paths, unchanged (nothing logged:
     the SAME HOST fallbacks already are). The pool does not grow (its capacity is fixed at
     create). The link that carries releases back is malloc'd (values may outlive both the
     connection and the transport). stats.values_zero_copy / values_zero_copy_copied (client),
     values_zero_copy_sent / releases_received / values_lent (server).

   CONTRACTS
     No value is lost: a value leaves the serving table for good only when its delivery is
     acknowledged (WIRE FORMAT, Delivery); a receive that gives up while its answer is on the wire,
     a client that dies, a connection that breaks: the value goes back for the next receiver. The
     cost of that rule is at-least-once when a connection breaks while a client lives: a value it
     delivered in the last moments before the break (its ACK still unsent: at most one tick,
     expire_interval_ns) is given back too and may be received once more by another receive.
     Every started call finishes exactly once: OK, the serving side's status (code, detail and
     message cross the wire, so TFRDV_DETAIL_WORKER_RESTARTED reaches the receiver), CANCELLED
     (cancel_call: a CANCEL frame follows), DEADLINE_EXCEEDED (tfrdv_call_deadline passed, checked
     every expire_interval_ns; the time left also travels in the request so the server drops
     expired requests), or UNAVAILABLE naming the peer and the cause: connect failure, the
     connection closing or resetting (a peer that dies fails its calls at once), a malformed
     frame, shutdown. The next call to that peer reconnects.
     Start order: a peer that is not up yet (its connection refused, or no HELLO within
     connect_timeout_ns) does not fail a call at once: the call waits while the transport
     connects again after each back-off (backoff_ns doubling up to backoff_max_ns, 1 s, as
     TensorFlow's gRPC channels), up to its deadline or connect_retry_ns (30 s), then fails
     UNAVAILABLE naming the address and the last error. A worker started before its ps needs no
     sleep and no retry policy (measured: ps up 2 s after the worker, first fetch done 0.5 s
     later). connect_retry_ns TFRDV_OFF: calls fail at once, and within the back-off window
     without trying. A successful connect resets the back-off.

   SECURITY: NO TLS
     Frames are neither encrypted nor authenticated: anyone who can connect can fetch values.
     Run it on a Unix socket (same host; the file's mode, 0600 by default, and the directory's
     permissions decide who may connect), on a private network, or through a tunnel (SSH port
     forwarding, WireGuard). Hostile input is bounded (limits above, caps on connections and
     requests in config) but never trusted to be who it claims. Bytes a peer chose (its HELLO
     name, ERROR and CLOSE messages) reach statuses and logs escaped (tfrdv_escape: no forged log
     lines, no terminal escapes). A client checks the HELLO's worker name against the worker each
     call fetches from: a peer answering as another worker, or as none (a server with nothing
     attached sends an empty name), fails those calls FAILED_PRECONDITION ("tfrdv_tcp: <address>
     answered as worker X, not Y"), and later calls for Y on that connection at once; calls for
     the worker it is go on (a connection is per address, shared by every name mapped to it).
     That catches a stale or wrong cluster spec, not an attacker: without TLS a name proves
     nothing.

   PROGRESS AND THREADS
     num_threads 0 or more: one I/O thread owned by the companion (a single event loop: more
     threads are not started) runs the event loop (epoll, or poll() without it), handles every
     socket event, the timers and the attached manager's tfrdv_mgr_expire (every
     expire_interval_ns). num_threads -1: no thread; the host calls
     tfrdv_tcp_poll(t, timeout_ns) and may sleep on tfrdv_tcp_fd(t) (readable when there is work)
     between calls, waking at least every expire_interval_ns. Requests and small responses are
     written by the thread that produced them (the caller of the fetch, the serve completion) when
     the connection's send queue is empty, so the small path costs one sendmsg per message and no
     hand-off; the rest is written by the I/O loop. While the loop is reading that connection,
     what other threads and its own callbacks and serves queue on it is written by the loop at
     the end of that pass, together: the answers to requests that arrived in one read share a
     sendmsg (up to 16 frames each), and so do the requests the receive callbacks post. A
     tfrdv_recv_async (or a retry) whose connection has other calls in flight leaves its REQUEST
     to the I/O thread (woken once, if it sleeps), which writes the requests posted meanwhile in
     one sendmsg as it wakes: 64 fetches in flight cost the posting thread no system call each
     (a tfrdv_recv's request, and every request without an I/O thread, is written at once). Per
     small fetch: the server makes one
     epoll_wait + one recv + one sendmsg (answered inline when the value is there); the client one
     sendmsg, then either its loop one epoll_wait + one recv, or (below) the waiting thread one
     poll + one recv: 6 system calls per fetch in all, where a raw blocking ping-pong makes 4.
     A client reads up to 64 KiB per recv: small responses that
     arrive together are read together; a value of 32 KiB or more streams straight into the
     receiver's memory. A thread blocked in tfrdv_recv lends
     itself (tfrdv_transport.wait): it takes its call's connection out of the event loop, may
     check it without sleeping for up to spin_ns (50 us; the spin rule below), then sleeps on the
     socket, and reads and
     completes the response itself: no hand-off, in either progress mode (stats.waits_lent). With
     epoll, a lent thread that leaves nothing in flight keeps the connection out of the loop's
     set for the next one (no epoll_ctl pair per fetch); it goes back to the loop when a call
     starts that no thread will wait for (tfrdv_call_will_wait: tfrdv_recv_async, a retry), a
     wait is declined or gives up, or after two ticks (expire_interval_ns) without a fetch, so a
     peer's end is noticed within 40 ms with no call in flight (at once with one); a call
     started on a connection kept idle for over 100 us first looks (one poll, no wait) whether
     the peer ended it, and if so dials again instead of failing UNAVAILABLE. A
     connection the loop is reading is taken over as soon as the loop lets go of it; one that
     another lent thread reads, or one still connecting, is left to that reader
     (stats.waits_declined); responses to other calls that it reads meanwhile complete on the
     lent thread. A tfrdv_recv_async callback runs on the thread that read its response: the I/O
     thread, a lent thread, or the caller of tfrdv_tcp_poll; a thread that then wakes another
     pays one hand-off (on a VM with idle CPUs, ~50 us). Receive callbacks of fetches and serve
     completions never run under a lock of this companion. Every function is thread-safe.
     tfrdv_tcp_destroy from a receive callback returns at once: the last of those threads to leave
     the transport (the I/O thread as it exits, tfrdv_tcp_poll before it returns, tfrdv_recv
     before it returns) finishes the shutdown, and the other calls in flight complete then. A
     tfrdv_recv in a callback of the thread that reads its connection fails FAILED_PRECONDITION
     at once (nobody else could read its response); use tfrdv_recv_async there.
     Spin rule (per connection): spinning pays only when the response comes within the window
     while the waiting thread holds its CPU, i.e. when the peer runs on another CPU; when the
     peer needs ours, it delays the very response it waits for. So a lent thread spins while at
     least 5 of the last 8 spins on its connection saw the response within the window (the first
     8 waits learn); otherwise it sleeps at once and probes with one spin after 16 waits (a
     missed probe doubles that, up to 256; a paid one probes again next wait): when the peer
     needs the waiter's CPU the spins miss and stop. It never spins when it knows that the peer
     shares its only CPU: a Unix socket whose peer process (SO_PEERCRED) may run only on the one
     CPU the waiting thread may run on (looked at every 64 waits; needs _GNU_SOURCE).

   LIFE CYCLE
       tfrdv_tcp_config tc = tfrdv_tcp_config_init();  tc.listen_address = "127.0.0.1:0"; ...
       tfrdv_tcp_create(&tc, &t, &st);            binds the listener (busy port: error here)
       mc.transport = tfrdv_tcp_transport(t);  tfrdv_mgr_create(&mc, &mgr, &st);
       tfrdv_tcp_attach(t, mgr, &st);             starts serving, drives tfrdv_mgr_expire
       ... tfrdv_send / tfrdv_recv_async as usual; tfrdv_tcp_port(t) for the chosen port ...
       tfrdv_tcp_destroy(t);  tfrdv_mgr_destroy(mgr);      (either order)
     tfrdv_tcp_destroy joins the I/O thread, closes the listener (and removes its Unix socket
     file), fails every call in flight exactly once (CANCELLED "tfrdv_tcp: the transport was
     destroyed"), withdraws every request being served (their values stay in the table) and
     waits for their serve completions, closes every socket and drops the manager reference. When
     it returns no thread of the companion can touch a value or the manager. The transport handed
     to the manager keeps the object's memory alive until the manager lets go of it; a fetch
     started after destroy fails UNAVAILABLE at once.
*/
#ifndef TFRDV_TCP_H
#define TFRDV_TCP_H

#ifndef TFRDV_H
#error "Please include tfrdv.h before tfrdv_tcp.h"
#endif
#if TFRDV_VERSION_MAJOR != 0 || TFRDV_VERSION_MINOR < 6
#error "tfrdv_tcp.h 0.5 needs tfrdv.h 0.6 or a later 0.x"
#endif

#define TFRDV_TCP_VERSION_MAJOR 0
#define TFRDV_TCP_VERSION_MINOR 5
#define TFRDV_TCP_VERSION_STRING "0.5.0"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
   Frame codec (pure functions, no sockets: used by the transport, exposed for tests, fuzzers and
   other implementations of the protocol)
   --------------------------------------------------------------------------------------------- */
#define TFRDV_TCP_PROTOCOL_VERSION 5  /* what this side speaks (HELLO); versions 1 to 4 are served */
#define TFRDV_TCP_PROTOCOL_VERSION_MIN 1
#define TFRDV_TCP_MAGIC 0x56445254u    /* "TRDV" little-endian */
#define TFRDV_TCP_HEADER_LEN 16
#define TFRDV_TCP_MAX_RANK 254
#define TFRDV_TCP_NAME_MAX 255         /* worker name bytes in a HELLO */
#define TFRDV_TCP_ACK_MAX 512          /* wire ids in one ACK frame */
#define TFRDV_TCP_SH_CMA_READ 1u       /* SAMEHOST flags: the client reads values by address */
#define TFRDV_TCP_SH_CMA_GRANT 2u      /* ... the server sends large values by address */
#define TFRDV_TCP_SH_RING_OFFER 4u     /* ... (version 4) the client passes a ring (SAME HOST RING) */
#define TFRDV_TCP_SH_RING_OK 8u        /* ... the server mapped it: small frames use it */
#define TFRDV_TCP_SH_RING_FUTEX 16u    /* ... (with 4, then with 8) sleep word 3: a futex waiter */
#define TFRDV_TCP_SH_TCP_ASK 32u       /* ... (version 5, TCP) the client's host identity follows */
#define TFRDV_TCP_SH_TCP_OFFER 64u     /* ... the server's token and side address follow */
#define TFRDV_TCP_SH_TCP_TOKEN 128u    /* ... (on the side socket) the client's token follows */
#define TFRDV_TCP_SH_TOKEN_LEN 16      /* bytes of a side socket's one-time token */
#define TFRDV_TCP_SH_HOST_MAX 255      /* bytes of a host identity (flag 32) */
#define TFRDV_TCP_SH_ADDR_MAX 108      /* bytes of a side address (flag 64: "@name", a sun_path) */
/* Longest encoding of a frame's header + fixed body (RESPONSE meta with 254 dims and a pool
   reference, ZERO COPY). */
#define TFRDV_TCP_META_MAX (TFRDV_TCP_HEADER_LEN + 40 + 8 * TFRDV_TCP_MAX_RANK)

typedef enum tfrdv_tcp_frame_type {
    TFRDV_TCP_HELLO = 1, TFRDV_TCP_REQUEST = 2, TFRDV_TCP_RESPONSE = 3, TFRDV_TCP_DATA = 4,
    TFRDV_TCP_ERROR = 5, TFRDV_TCP_CANCEL = 6, TFRDV_TCP_CLOSE = 7, TFRDV_TCP_ACK = 8,
    TFRDV_TCP_SAMEHOST = 9, TFRDV_TCP_RELEASE = 10
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
    int is_dead, no_value;
    uint64_t bytes;
    int64_t dims[TFRDV_TCP_MAX_RANK];
    uint64_t data_len;
    /* ERROR, CLOSE */
    uint32_t code, detail;
    tfrdv_str message;
    /* ACK: num_acks wire ids (1..TFRDV_TCP_ACK_MAX); encode reads ack_ids (or, when NULL,
       ack_bytes: a decoded frame re-encodes), decode points ack_bytes at the ids as they are on
       the wire (little-endian u64, unaligned) */
    uint32_t num_acks;
    const uint64_t* ack_ids;
    const uint8_t* ack_bytes;
    /* RESPONSE flag 4: the value lies at remote_addr in the sender (data_len 0); SAMEHOST flags
       (flags 32, 64, 128: their bytes are in message; the other flags carry none) */
    int remote;
    uint64_t remote_addr;
    uint32_t sh_flags;
    /* RESPONSE flag 8 (version 5, ZERO COPY): the value lies at pool_off in the sender's shared
       pool whose descriptor (in the sender) is pool_fd (data_len 0). RELEASE uses num_acks and
       ack_ids / ack_bytes as ACK does. */
    int pooled;
    uint32_t pool_fd;
    uint64_t pool_off;
} tfrdv_tcp_frame;

/* Decodes the frame at buf[0..len). Returns the bytes consumed (> 0: header + decoded body; for
   RESPONSE header + meta, for DATA the header only: data_len bytes follow), 0 when more bytes are
   needed (nothing is checked beyond what is there), or -1 for a malformed frame: st (if non-NULL)
   gets INVALID_ARGUMENT naming the defect (unknown type, length over a limit, rank > 254, negative
   dim, dims whose element count overflows, bad magic, version, code out of 1..16, non-zero
   reserved field, an address range that wraps, unknown SAMEHOST flags; a NULL out, or NULL buf
   with len > 0). lim NULL: defaults. Never reads past len, never allocates. */
TFRDV_API long tfrdv_tcp_decode(const uint8_t* buf, size_t len, const tfrdv_tcp_limits* lim,
                                tfrdv_tcp_frame* out, tfrdv_status* st);
/* Encodes f (type, id and that type's fields; for RESPONSE data_len value bytes are announced but
   not written: they follow in the stream; for DATA only the header is written) into buf. Writes
   at most cap bytes and returns the full length (call with cap 0 to size the buffer); 0 for a
   NULL f, an unknown type, or a name, key or message with a length and a NULL pointer. */
TFRDV_API size_t tfrdv_tcp_encode(const tfrdv_tcp_frame* f, uint8_t* buf, size_t cap);

/* ---------------------------------------------------------------------------------------------
   Transport
   --------------------------------------------------------------------------------------------- */
typedef struct tfrdv_tcp tfrdv_tcp;

/* A worker-table entry is the core's tfrdv_worker {name, address}: "/job:ps/replica:0/task:0" ->
   "10.0.0.7:2222", "[::1]:2222", "unix:/run/tfrdv/ps0.sock"; tfrdv_cluster_parse's table (from
   TF_CONFIG) fits as it is. The old name stays an alias. */
typedef tfrdv_worker tfrdv_tcp_worker;

typedef struct tfrdv_tcp_config {
    tfrdv_hooks hooks;             /* allocator and logger (sync and clock are not used) */
    const char* listen_address;    /* "0.0.0.0:5000", "127.0.0.1:0" (free port), "[::]:5000",
                                      "unix:/path"; NULL: client only */
    int num_threads;               /* >= 0: one I/O thread; -1: none, the host calls
                                      tfrdv_tcp_poll (more threads are not used) */
    const tfrdv_worker* workers;   /* worker name -> address (copied), a cluster spec; create
                                      refuses a name not of the canonical form
                                      /job:J/replica:R/task:T and an address whose syntax is wrong
                                      (host names are resolved at connect) */
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
    int notsent_lowat;             /* TCP_NOTSENT_LOWAT bytes (0: 512 KiB; < 0: not set) */
    int send_buffer;               /* SO_SNDBUF bytes (0: 4 MiB on Unix sockets, the kernel's
                                      autotuning on TCP; < 0: never set) */
    int64_t connect_timeout_ns;    /* connect + hello (0: 5 s) */
    int64_t connect_retry_ns;      /* a fetch whose peer is not up yet (connection refused, timed
                                      out before its HELLO, in back-off) waits while the transport
                                      connects again, up to its deadline or this long (0: 30 s;
                                      < 0: it fails UNAVAILABLE at once) */
    int64_t handshake_timeout_ns;  /* an accepted connection must send its HELLO within (0: 5 s) */
    int64_t backoff_ns;            /* after a failed connect (0: 100 ms; < 0: none) */
    int64_t backoff_max_ns;        /* cap of the doubling window (0: 1 s) */
    int64_t keepalive_ns;          /* TCP keep-alive idle time, then 3 probes 1/5 of it apart
                                      (0: 10 s; < 0: off) */
    int64_t user_timeout_ns;       /* TCP_USER_TIMEOUT: unacknowledged data fails the connection
                                      after (0: 30 s; < 0: off) */
    int64_t expire_interval_ns;    /* timers and tfrdv_mgr_expire period (0: 20 ms) */
    int64_t spin_ns;               /* a thread blocked in tfrdv_recv may check its connection
                                      without sleeping for up to this long after each request,
                                      then sleeps; it spins only while spinning paid recently
                                      (the spin rule, PROGRESS AND THREADS) (0: 50 us;
                                      < 0 (TFRDV_OFF): never). A sleeping thread costs a wake-up
                                      when its response comes: on a VM with idle CPUs ~20-50 us. */
    int unix_mode;                 /* permission bits of a Unix socket file (0: 0600; 1..0777;
                                      anything else is refused by create) */
    int64_t stall_timeout_ns;      /* a server connection is closed (its values go back to the
                                      table) when its socket took nothing for this long while
                                      answers waited, or a delivery stayed unacknowledged this
                                      long (0: 5 s; < 0: never) */
    int64_t same_host;             /* Unix-socket peers on this host (see SAME HOST): values of
                                      at least this many bytes are read by the client straight
                                      from the server's memory (0: 64 KiB; TFRDV_OFF: never, all
                                      bytes go through the socket). The serving side's value
                                      sets the size; either side's TFRDV_OFF turns it off, and
                                      with it the move of same-host TCP peers to a Unix socket. */
} tfrdv_tcp_config;
TFRDV_API tfrdv_tcp_config tfrdv_tcp_config_init(void);

/* Validates cfg, binds and listens on listen_address (an address in use, a live Unix socket or
   a bad address is an error naming it), starts the I/O thread. Connections wait in the listen
   backlog until tfrdv_tcp_attach. */
TFRDV_API tfrdv_code tfrdv_tcp_create(const tfrdv_tcp_config* cfg, tfrdv_tcp** out,
                                      tfrdv_status* st);
/* The vtable for tfrdv_mgr_config.transport. Each manager created with it holds a reference on
   t (the core takes it through the vtable's ref and drops it through destroy), so one vtable may
   serve several managers and a failed tfrdv_mgr_create leaves nothing behind. */
TFRDV_API tfrdv_transport tfrdv_tcp_transport(tfrdv_tcp* t);
/* Binds the manager (one per tfrdv_tcp; a reference is held until destroy): requests are served
   from its tables, its worker name and incarnation go in the HELLO, its tfrdv_mgr_expire is
   driven. A client-only object (no listen_address) may skip attach: the I/O thread (or
   tfrdv_tcp_poll) expires every manager created with the vtable (tfrdv_transport.bind), so its
   deadlines and retries hold. */
TFRDV_API tfrdv_code tfrdv_tcp_attach(tfrdv_tcp* t, tfrdv_mgr* mgr, tfrdv_status* st);
/* The bound TCP port (0 without a listener or for a Unix socket). */
TFRDV_API int tfrdv_tcp_port(const tfrdv_tcp* t);
/* The listener's address as a client would dial it ("127.0.0.1:43817", "unix:/tmp/x.sock"),
   "" without a listener. Valid until destroy. */
TFRDV_API const char* tfrdv_tcp_address(const tfrdv_tcp* t);
/* Adds or replaces a worker's address (address NULL removes it). New calls use the new address;
   calls in flight stay on their connection. The name and the address are checked as in create's
   workers (INVALID_ARGUMENT naming them). */
TFRDV_API tfrdv_code tfrdv_tcp_set_worker(tfrdv_tcp* t, const char* worker, const char* address,
                                          tfrdv_status* st);
/* Shut down (see LIFE CYCLE); from a receive callback too (see PROGRESS AND THREADS). */
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
    uint64_t waits_lent;           /* threads blocked in tfrdv_recv that read their connection */
    uint64_t waits_declined;       /* ... that could not (another thread was reading it, or the
                                      connection was not open yet) and waited for the loop */
    uint64_t values_cma;           /* values read from the server's memory (process_vm_readv) */
    uint64_t same_host_grants;     /* connections whose server granted that (SAME HOST) */
    /* server */
    uint64_t served, serve_ok, serve_failed, serve_cancelled, serve_expired; /* serve_ok: answers
                                      written and not taken back (a refusal or a connection lost
                                      before the acknowledgement moves one to serve_cancelled or
                                      values_returned) */
    uint64_t bytes_sent;           /* value bytes served */
    uint64_t values_returned;      /* served values given back to the table (undeliverable) */
    uint64_t values_acked;         /* deliveries the client acknowledged (protocol version 2) */
    uint64_t values_cma_sent;      /* responses sent by address (the client read the bytes) */
    uint64_t accepted, connections_rejected, requests_rejected;
    /* both */
    uint64_t protocol_errors;      /* connections closed for a malformed or hostile frame */
    uint64_t frames_sent, frames_received, sendmsg_calls, recv_calls;
    size_t connections;            /* open now (client and server side) */
    size_t client_calls_live;      /* fetches in flight (and values still arriving for calls
                                      already cancelled) */
    size_t server_requests_live;   /* requests being served or whose response is being sent */
    size_t values_unacked;         /* responses written, their values held until the client
                                      acknowledges (or refuses) their delivery */
    size_t queued_bytes;           /* control bytes waiting in send queues */
    /* SAME HOST RING (shared memory between the two processes of a Unix-socket connection) */
    uint64_t ring_connections;     /* connections whose ring was set up (counted by both ends) */
    uint64_t frames_ring_sent, frames_ring_received; /* frames that went through a ring */
    uint64_t values_ring;          /* client: values received through the ring */
    uint64_t values_ring_sent;     /* server: responses written into the ring */
    /* ZERO COPY (values made with a tfrdv_tcp_pool registered by tfrdv_tcp_add_pool) */
    uint64_t values_zero_copy;     /* client: values whose bytes are a mapping of the sender's pool */
    uint64_t values_zero_copy_copied; /* client: ... copied once into the receiver's own memory
                                      (its alloc hook asked for it) */
    uint64_t values_zero_copy_sent; /* server: responses sent as (pool, offset, length) */
    uint64_t releases_received;    /* server: pool values the client let go (RELEASE) */
    size_t values_lent;            /* server: pool values a client may still map (held here until
                                      its RELEASE; if the connection ended first, until destroy) */
    /* SAME HOST: TCP connections to a peer on this host moved to a side Unix socket (counted by
       both ends: the client when new calls take it, the server when its token checked out) */
    uint64_t tcp_upgrades;
} tfrdv_tcp_stats;
TFRDV_API void tfrdv_tcp_get_stats(tfrdv_tcp* t, tfrdv_tcp_stats* out);

/* ---------------------------------------------------------------------------------------------
   Shared pool (see ZERO COPY): a tfrdv_allocator whose blocks lie in one sealed memfd
   --------------------------------------------------------------------------------------------- */
typedef struct tfrdv_tcp_pool tfrdv_tcp_pool;
/* A pool of capacity bytes (rounded up to the page size; 1 byte .. 2^40) in a memfd made with
   MFD_ALLOW_SEALING and sealed F_SEAL_SHRINK | F_SEAL_SEAL (it can never shrink under a mapping
   in another process), mapped shared. Pages are taken from the kernel as they are first written.
   INVALID_ARGUMENT for a capacity out of range; UNAVAILABLE naming the failing call (memfd_create,
   ftruncate, fcntl, mmap) or on a build without memfd (not Linux, no _GNU_SOURCE). */
TFRDV_API tfrdv_code tfrdv_tcp_pool_create(uint64_t capacity, tfrdv_tcp_pool** out,
                                           tfrdv_status* st);
/* The allocator: pass it to tfrdv_value_new (or use it in your own alloc hook). Blocks are
   64-byte aligned, first fit; a request the pool cannot hold returns NULL. Thread-safe. Its
   free_fn takes back what alloc_fn gave, with the size asked for; a free of what it cannot have
   given (a pointer outside the pool or not 64-byte aligned, a range running past the pool or
   over free space: a double free) changes nothing and is counted (tfrdv_tcp_pool_refused_frees),
   so such a bug leaves blocks live instead of handing one block out twice. A NULL pool: the
   allocator hands out nothing, the getters below return 0 (the descriptor -1). */
TFRDV_API tfrdv_allocator tfrdv_tcp_pool_allocator(tfrdv_tcp_pool* p);
/* Bytes in blocks handed out and not yet freed (rounded up to 64 each), blocks, and frees refused. */
TFRDV_API uint64_t tfrdv_tcp_pool_live_bytes(tfrdv_tcp_pool* p);
TFRDV_API uint64_t tfrdv_tcp_pool_live_blocks(tfrdv_tcp_pool* p);
TFRDV_API uint64_t tfrdv_tcp_pool_refused_frees(tfrdv_tcp_pool* p);
/* The pool's memfd and mapping (for checks and tests; the pool owns both). */
TFRDV_API int tfrdv_tcp_pool_fd(const tfrdv_tcp_pool* p);
TFRDV_API void* tfrdv_tcp_pool_base(const tfrdv_tcp_pool* p);
TFRDV_API uint64_t tfrdv_tcp_pool_capacity(const tfrdv_tcp_pool* p);
/* Lets t send values whose bytes lie in p by reference (ZERO COPY): t holds a reference on p
   until tfrdv_tcp_destroy. At most 16 pools per transport (RESOURCE_EXHAUSTED beyond). */
TFRDV_API tfrdv_code tfrdv_tcp_add_pool(tfrdv_tcp* t, tfrdv_tcp_pool* p, tfrdv_status* st);
/* Drops the caller's reference: the memory is unmapped and the memfd closed when the last block
   is freed too (values made from the pool may outlive this call). NULL is fine. */
TFRDV_API void tfrdv_tcp_pool_destroy(tfrdv_tcp_pool* p);

#ifdef __cplusplus
}
#endif
#endif /* TFRDV_TCP_H */

/* =============================================================================================
   IMPLEMENTATION
   ============================================================================================= */
#if defined(TFRDV_TCP_IMPLEMENTATION) && !defined(TFRDV_TCP__IMPLEMENTATION_DONE)
#define TFRDV_TCP__IMPLEMENTATION_DONE

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef TFRDV_TCP_NO_TRANSPORT
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#if defined(__linux__) && !defined(TFRDV_TCP_NO_EPOLL)
#include <sys/epoll.h>
#include <sys/eventfd.h>
#define TFRDV_TCP__EPOLL 1
#endif
#if defined(__linux__) && defined(_GNU_SOURCE)
#include <sched.h>
#define TFRDV_TCP__AFFINITY 1
#endif
#if defined(__linux__) && defined(_GNU_SOURCE) && defined(SO_PEERCRED)
#define TFRDV_TCP__CMA 1 /* SAME HOST: SO_PEERCRED + process_vm_readv */
#include <sys/random.h>   /* getrandom: a side socket's tokens and name */
#ifdef TFRDV_TCP__EPOLL
#define TFRDV_TCP__UPGRADE 1 /* SAME HOST: a TCP connection moves to a side Unix socket */
#endif
#endif
#if defined(TFRDV_TCP__EPOLL) && defined(_GNU_SOURCE)
#include <sys/mman.h>
#if defined(MFD_ALLOW_SEALING) && defined(F_ADD_SEALS) && defined(SCM_RIGHTS)
#define TFRDV_TCP__RING 1 /* SAME HOST RING: memfd + eventfd doorbells, a futex for a lent thread */
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TFRDV_TCP__PRIVATE static __attribute__((unused))
#else
#define TFRDV_TCP__PRIVATE static
#endif

#define TFRDV_TCP__KEY_MAX_DEFAULT 4096u
#define TFRDV_TCP__MSG_MAX_DEFAULT 4096u
#define TFRDV_TCP__TENSOR_MAX_DEFAULT ((uint64_t)1 << 40)
#define TFRDV_TCP__FRAME_MAX_DEFAULT (16u << 20)

/* >>status ----------------------------------------------------------------------------------- */
TFRDV_TCP__PRIVATE tfrdv_code tfrdv_tcp__err(tfrdv_status* st, tfrdv_code code, const char* fmt, ...) {
    if (st) {
        va_list ap;
        st->code = code;
        st->detail = 0;
        va_start(ap, fmt);
        vsnprintf(st->msg, sizeof st->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__ok(tfrdv_status* st) {
    if (st) { st->code = TFRDV_OK; st->detail = 0; st->msg[0] = 0; }
}

/* >>codec ------------------------------------------------------------------------------------ */
TFRDV_TCP__PRIVATE uint32_t tfrdv_tcp__ld32(const uint8_t* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
TFRDV_TCP__PRIVATE uint64_t tfrdv_tcp__ld64(const uint8_t* p) {
    return (uint64_t)tfrdv_tcp__ld32(p) | (uint64_t)tfrdv_tcp__ld32(p + 4) << 32;
}
typedef struct tfrdv_tcp__wr {
    uint8_t* buf;
    size_t cap, len;
} tfrdv_tcp__wr;
TFRDV_TCP__PRIVATE void tfrdv_tcp__put(tfrdv_tcp__wr* w, uint64_t v, int n) {
    int i;
    if (w->len <= w->cap && w->cap - w->len >= (size_t)n) { /* the usual case: one store once inlined */
        uint8_t* p = w->buf + w->len;
        for (i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
    } else if (w->len < w->cap) { /* the end of the buffer: what fits */
        for (i = 0; i < n && w->len + (size_t)i < w->cap; i++) w->buf[w->len + (size_t)i] = (uint8_t)(v >> (8 * i));
    }
    w->len += (size_t)n;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__putb(tfrdv_tcp__wr* w, const void* p, size_t n) {
    if (n && w->len < w->cap) memcpy(w->buf + w->len, p, w->cap - w->len < n ? w->cap - w->len : n);
    w->len += n;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__limits_fill(const tfrdv_tcp_limits* in, tfrdv_tcp_limits* out) {
    if (in) *out = *in;
    else memset(out, 0, sizeof *out);
    if (!out->max_key_len) out->max_key_len = TFRDV_TCP__KEY_MAX_DEFAULT;
    if (!out->max_message_len) out->max_message_len = TFRDV_TCP__MSG_MAX_DEFAULT;
    if (!out->max_tensor_bytes) out->max_tensor_bytes = TFRDV_TCP__TENSOR_MAX_DEFAULT;
    if (!out->max_frame_len) out->max_frame_len = TFRDV_TCP__FRAME_MAX_DEFAULT;
}

TFRDV_API size_t tfrdv_tcp_encode(const tfrdv_tcp_frame* f, uint8_t* buf, size_t cap) {
    tfrdv_tcp__wr w;
    uint64_t body = 0;
    int32_t i, rank;
    if (!f) return 0;
    w.buf = buf;
    w.cap = buf ? cap : 0;
    w.len = 0;
    rank = f->rank < 0 ? 0 : (f->rank > TFRDV_TCP_MAX_RANK ? TFRDV_TCP_MAX_RANK : f->rank);
    switch (f->type) {
    case TFRDV_TCP_HELLO: body = 20 + (uint64_t)f->name.len; break;
    case TFRDV_TCP_REQUEST: body = 28 + (uint64_t)f->key.len; break;
    case TFRDV_TCP_RESPONSE: body = 24 + 8 * (uint64_t)rank + (f->remote ? 8 : f->pooled ? 16 : f->data_len); break;
    case TFRDV_TCP_DATA: body = f->data_len; break;
    case TFRDV_TCP_ERROR: body = 12 + (uint64_t)f->message.len; break;
    case TFRDV_TCP_CANCEL: body = 0; break;
    case TFRDV_TCP_CLOSE: body = 8 + (uint64_t)f->message.len; break;
    case TFRDV_TCP_ACK: case TFRDV_TCP_RELEASE: body = 8 * (uint64_t)f->num_acks; break;
    case TFRDV_TCP_SAMEHOST: body = 8 + (uint64_t)f->message.len; break;
    default: return 0;
    }
    if ((f->type == TFRDV_TCP_HELLO && f->name.len && !f->name.ptr) || (f->type == TFRDV_TCP_REQUEST && f->key.len && !f->key.ptr) ||
        ((f->type == TFRDV_TCP_ERROR || f->type == TFRDV_TCP_CLOSE || f->type == TFRDV_TCP_SAMEHOST) && f->message.len && !f->message.ptr))
        return 0; /* bytes announced but no pointer to them */
    if (!w.cap) /* sizing only: the header and the body without the value bytes that follow it */
        return 16 + (size_t)(body - (f->type == TFRDV_TCP_DATA || (f->type == TFRDV_TCP_RESPONSE && !f->remote && !f->pooled) ? f->data_len : 0));
    tfrdv_tcp__put(&w, (uint64_t)f->type, 1);
    tfrdv_tcp__put(&w, 0, 3);
    tfrdv_tcp__put(&w, body, 4);
    tfrdv_tcp__put(&w, f->id, 8);
    switch (f->type) {
    case TFRDV_TCP_HELLO:
        tfrdv_tcp__put(&w, TFRDV_TCP_MAGIC, 4);
        tfrdv_tcp__put(&w, f->version, 2);
        tfrdv_tcp__put(&w, 0, 2);
        tfrdv_tcp__put(&w, f->incarnation, 8);
        tfrdv_tcp__put(&w, f->name.len, 4);
        tfrdv_tcp__putb(&w, f->name.ptr, f->name.len);
        break;
    case TFRDV_TCP_REQUEST:
        tfrdv_tcp__put(&w, (uint64_t)f->step_id, 8);
        tfrdv_tcp__put(&w, (uint64_t)f->request_id, 8);
        tfrdv_tcp__put(&w, (uint64_t)f->deadline_ns, 8);
        tfrdv_tcp__put(&w, f->key.len, 4);
        tfrdv_tcp__putb(&w, f->key.ptr, f->key.len);
        break;
    case TFRDV_TCP_RESPONSE:
        tfrdv_tcp__put(&w, (uint64_t)(uint32_t)f->dtype, 4);
        tfrdv_tcp__put(&w, (uint64_t)rank, 4);
        tfrdv_tcp__put(&w, (uint64_t)((f->is_dead ? 1u : 0u) | (f->no_value ? 2u : 0u) | (f->remote ? 4u : f->pooled ? 8u : 0u)), 4);
        tfrdv_tcp__put(&w, 0, 4);
        tfrdv_tcp__put(&w, f->bytes, 8);
        for (i = 0; i < rank; i++) tfrdv_tcp__put(&w, (uint64_t)f->dims[i], 8);
        if (f->remote) tfrdv_tcp__put(&w, f->remote_addr, 8);
        else if (f->pooled) { /* ZERO COPY */
            tfrdv_tcp__put(&w, f->pool_fd, 4);
            tfrdv_tcp__put(&w, 0, 4);
            tfrdv_tcp__put(&w, f->pool_off, 8);
        }
        break;
    case TFRDV_TCP_SAMEHOST:
        tfrdv_tcp__put(&w, f->sh_flags, 4);
        tfrdv_tcp__put(&w, f->message.len, 4);
        tfrdv_tcp__putb(&w, f->message.ptr, f->message.len);
        break;
    case TFRDV_TCP_ERROR:
        tfrdv_tcp__put(&w, f->code, 4);
        tfrdv_tcp__put(&w, f->detail, 4);
        tfrdv_tcp__put(&w, f->message.len, 4);
        tfrdv_tcp__putb(&w, f->message.ptr, f->message.len);
        break;
    case TFRDV_TCP_CLOSE:
        tfrdv_tcp__put(&w, f->code, 4);
        tfrdv_tcp__put(&w, f->message.len, 4);
        tfrdv_tcp__putb(&w, f->message.ptr, f->message.len);
        break;
    case TFRDV_TCP_ACK: case TFRDV_TCP_RELEASE: { /* from ack_ids, or (a decoded frame) its ack_bytes as they are */
        uint32_t k;
        if (f->ack_ids)
            for (k = 0; k < f->num_acks; k++) tfrdv_tcp__put(&w, f->ack_ids[k], 8);
        else if (f->ack_bytes) tfrdv_tcp__putb(&w, f->ack_bytes, 8 * (size_t)f->num_acks);
        else
            for (k = 0; k < f->num_acks; k++) tfrdv_tcp__put(&w, 0, 8); /* no ids given: zeros */
        break;
    }
    default: break;
    }
    return w.len;
}

TFRDV_API long tfrdv_tcp_decode(const uint8_t* b, size_t len, const tfrdv_tcp_limits* limits,
                                tfrdv_tcp_frame* out, tfrdv_status* st) {
    tfrdv_tcp_limits lim;
    uint32_t type, blen, n, fl;
    uint64_t id, need, fixed, elems = 1;
    const uint8_t* p;
    int32_t i;
    tfrdv_tcp__limits_fill(limits, &lim);
    if (!out || (!b && len))
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_decode: NULL %s", out ? "buf" : "out"), -1;
    if (len < TFRDV_TCP_HEADER_LEN) return 0;
    type = b[0];
    blen = tfrdv_tcp__ld32(b + 4);
    id = tfrdv_tcp__ld64(b + 8);
    if (type < TFRDV_TCP_HELLO || type > TFRDV_TCP_RELEASE)
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: unknown frame type %u", type), -1;
    if (b[1] || b[2] || b[3])
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: reserved header bytes of a type %u frame are not zero", type), -1;
    if (blen > lim.max_frame_len)
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: frame body of %u bytes exceeds the limit of %u", blen, lim.max_frame_len), -1;
    out->type = (int)type;
    out->id = id;
    out->body_len = blen;
    out->data_len = 0;
    out->remote = 0;
    out->pooled = 0;
    p = b + TFRDV_TCP_HEADER_LEN;
    switch (type) {
    case TFRDV_TCP_HELLO:
        if (blen < 20 || blen > 20 + TFRDV_TCP_NAME_MAX)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: HELLO body of %u bytes (20..%u expected)", blen, 20 + TFRDV_TCP_NAME_MAX), -1;
        if (len >= TFRDV_TCP_HEADER_LEN + 4 && tfrdv_tcp__ld32(p) != TFRDV_TCP_MAGIC)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: bad magic 0x%08x in HELLO (not a tfrdv_tcp peer?)", tfrdv_tcp__ld32(p)), -1;
        if (len < TFRDV_TCP_HEADER_LEN + (size_t)blen) return 0;
        out->version = (uint16_t)(p[4] | p[5] << 8);
        if (out->version < TFRDV_TCP_PROTOCOL_VERSION_MIN) /* later versions: both speak the lower */
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: protocol version %u not supported (this side speaks %u..%u)", out->version, TFRDV_TCP_PROTOCOL_VERSION_MIN, TFRDV_TCP_PROTOCOL_VERSION), -1;
        if (p[6] || p[7] || id)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: HELLO with non-zero reserved fields"), -1;
        out->incarnation = tfrdv_tcp__ld64(p + 8);
        n = tfrdv_tcp__ld32(p + 16);
        if (n != blen - 20)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: HELLO name length %u does not match its body (%u)", n, blen - 20), -1;
        out->name.ptr = (const char*)p + 20;
        out->name.len = n;
        return (long)(TFRDV_TCP_HEADER_LEN + blen);
    case TFRDV_TCP_REQUEST:
        if (blen < 28 || (uint64_t)blen - 28 > (uint64_t)lim.max_key_len)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: REQUEST body of %u bytes (key limit %zu)", blen, lim.max_key_len), -1;
        if (len < TFRDV_TCP_HEADER_LEN + (size_t)blen) return 0;
        out->step_id = (int64_t)tfrdv_tcp__ld64(p);
        out->request_id = (int64_t)tfrdv_tcp__ld64(p + 8);
        out->deadline_ns = (int64_t)tfrdv_tcp__ld64(p + 16);
        n = tfrdv_tcp__ld32(p + 24);
        if (n != blen - 28)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: REQUEST key length %u does not match its body (%u)", n, blen - 28), -1;
        if (out->deadline_ns < 0)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: REQUEST with a negative deadline"), -1;
        out->key.ptr = (const char*)p + 28;
        out->key.len = n;
        return (long)(TFRDV_TCP_HEADER_LEN + blen);
    case TFRDV_TCP_RESPONSE:
        if (blen < 24)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE body of %u bytes (at least 24 expected)", blen), -1;
        if (len < TFRDV_TCP_HEADER_LEN + 24) return 0;
        out->dtype = (int32_t)tfrdv_tcp__ld32(p);
        n = tfrdv_tcp__ld32(p + 4);
        fl = tfrdv_tcp__ld32(p + 8);
        if (n > TFRDV_TCP_MAX_RANK)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE rank %u exceeds %d", n, TFRDV_TCP_MAX_RANK), -1;
        if (fl > 15 || (fl & 12) == 12 || tfrdv_tcp__ld32(p + 12))
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE with unknown flags 0x%x", fl), -1;
        out->rank = (int32_t)n;
        out->is_dead = (int)(fl & 1);
        out->no_value = (int)(fl >> 1 & 1);
        out->remote = (int)(fl >> 2 & 1);
        out->pooled = (int)(fl >> 3 & 1);
        out->bytes = tfrdv_tcp__ld64(p + 16);
        fixed = 24 + 8 * (uint64_t)n + (out->remote ? 8 : out->pooled ? 16 : 0);
        if (out->pooled && (out->no_value || !out->bytes || blen != fixed))
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE from a pool (flag 8) with %s", out->no_value || !out->bytes ? "no value bytes" : "bytes or a wrong body length"), -1;
        if (out->remote && (out->no_value || !out->bytes || blen != fixed))
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE by address (flag 4) with %s", out->no_value || !out->bytes ? "no value bytes" : "bytes or a wrong body length"), -1;
        if (blen < fixed)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE body of %u bytes is shorter than its rank-%u meta", blen, n), -1;
        if (out->bytes > lim.max_tensor_bytes)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE value of %llu bytes exceeds max_tensor_bytes (%llu)", (unsigned long long)out->bytes, (unsigned long long)lim.max_tensor_bytes), -1;
        if (out->no_value && (!out->is_dead || n || out->bytes))
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE without value must be dead, rank 0, 0 bytes"), -1;
        if (blen - fixed > out->bytes)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE carries %llu value bytes of a %llu-byte value", (unsigned long long)(blen - fixed), (unsigned long long)out->bytes), -1;
        need = TFRDV_TCP_HEADER_LEN + fixed;
        if (len < need) return 0;
        for (i = 0; i < (int32_t)n; i++) {
            int64_t d = (int64_t)tfrdv_tcp__ld64(p + 24 + 8 * i);
            if (d < 0)
                return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE dim %d is negative (%lld)", (int)i, (long long)d), -1;
            if (d && elems > UINT64_MAX / (uint64_t)d)
                return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE dims overflow 64 bits"), -1;
            elems *= (uint64_t)d;
            out->dims[i] = d;
        }
        if (out->remote) {
            out->remote_addr = tfrdv_tcp__ld64(p + 24 + 8 * (size_t)n);
            if (out->remote_addr > UINT64_MAX - out->bytes)
                return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE address 0x%llx + %llu bytes wraps", (unsigned long long)out->remote_addr, (unsigned long long)out->bytes), -1;
        }
        if (out->pooled) { /* ZERO COPY: the range is checked again against the pool's size */
            out->pool_fd = tfrdv_tcp__ld32(p + 24 + 8 * (size_t)n);
            out->pool_off = tfrdv_tcp__ld64(p + 32 + 8 * (size_t)n);
            if (tfrdv_tcp__ld32(p + 28 + 8 * (size_t)n) || out->pool_fd > INT32_MAX || out->pool_off > UINT64_MAX - out->bytes)
                return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: RESPONSE pool descriptor %u (0..2^31-1), reserved field or offset %llu + %llu bytes (wraps)",
                                      out->pool_fd, (unsigned long long)out->pool_off, (unsigned long long)out->bytes), -1;
        }
        out->data_len = blen - fixed;
        return (long)need;
    case TFRDV_TCP_DATA:
        if (!blen) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: empty DATA frame"), -1;
        out->data_len = blen;
        return TFRDV_TCP_HEADER_LEN;
    case TFRDV_TCP_ERROR:
        if (blen < 12 || blen - 12 > lim.max_message_len)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: ERROR body of %u bytes (message limit %u)", blen, lim.max_message_len), -1;
        if (len < TFRDV_TCP_HEADER_LEN + (size_t)blen) return 0;
        out->code = tfrdv_tcp__ld32(p);
        out->detail = tfrdv_tcp__ld32(p + 4);
        n = tfrdv_tcp__ld32(p + 8);
        if (out->code < 1 || out->code > 16)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: ERROR code %u outside 1..16", out->code), -1;
        if (n != blen - 12)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: ERROR message length %u does not match its body (%u)", n, blen - 12), -1;
        out->message.ptr = (const char*)p + 12;
        out->message.len = n;
        return (long)(TFRDV_TCP_HEADER_LEN + blen);
    case TFRDV_TCP_CANCEL:
        if (blen) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: CANCEL with a %u-byte body", blen), -1;
        return TFRDV_TCP_HEADER_LEN;
    case TFRDV_TCP_ACK:
    case TFRDV_TCP_RELEASE:
        if (!blen || blen % 8 || blen / 8 > TFRDV_TCP_ACK_MAX || id)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: %s body of %u bytes (8..%u, a multiple of 8) or id %llu (0 expected)", type == TFRDV_TCP_ACK ? "ACK" : "RELEASE", blen, (unsigned)(8 * TFRDV_TCP_ACK_MAX), (unsigned long long)id), -1;
        if (len < TFRDV_TCP_HEADER_LEN + (size_t)blen) return 0;
        out->num_acks = blen / 8;
        out->ack_bytes = p;
        return (long)(TFRDV_TCP_HEADER_LEN + blen);
    case TFRDV_TCP_SAMEHOST: { /* flags 32, 64, 128 (version 5) each alone, with their bytes */
        uint32_t lo, hi;
        if (blen < 8 || blen > 8 + TFRDV_TCP_SH_HOST_MAX || id)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: SAMEHOST body of %u bytes (8..%u expected) or id %llu (0 expected)", blen, 8 + TFRDV_TCP_SH_HOST_MAX, (unsigned long long)id), -1;
        if (len < TFRDV_TCP_HEADER_LEN + (size_t)blen) return 0;
        out->sh_flags = fl = tfrdv_tcp__ld32(p);
        n = tfrdv_tcp__ld32(p + 4);
        if (fl & ~(TFRDV_TCP_SH_CMA_READ | TFRDV_TCP_SH_CMA_GRANT | TFRDV_TCP_SH_RING_OFFER | TFRDV_TCP_SH_RING_OK | TFRDV_TCP_SH_RING_FUTEX |
                   TFRDV_TCP_SH_TCP_ASK | TFRDV_TCP_SH_TCP_OFFER | TFRDV_TCP_SH_TCP_TOKEN))
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: SAMEHOST with unknown flags 0x%x", fl), -1;
        lo = fl == TFRDV_TCP_SH_TCP_ASK ? 1 : fl == TFRDV_TCP_SH_TCP_OFFER ? TFRDV_TCP_SH_TOKEN_LEN + 2 : fl == TFRDV_TCP_SH_TCP_TOKEN ? TFRDV_TCP_SH_TOKEN_LEN : 0;
        hi = fl == TFRDV_TCP_SH_TCP_ASK ? TFRDV_TCP_SH_HOST_MAX : fl == TFRDV_TCP_SH_TCP_OFFER ? TFRDV_TCP_SH_TOKEN_LEN + TFRDV_TCP_SH_ADDR_MAX : lo;
        if (!lo && (fl & (TFRDV_TCP_SH_TCP_ASK | TFRDV_TCP_SH_TCP_OFFER | TFRDV_TCP_SH_TCP_TOKEN)))
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: SAMEHOST flags 0x%x: 32, 64 and 128 go alone", fl), -1;
        if (n != blen - 8 || n < lo || n > hi)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: SAMEHOST flags 0x%x with %u bytes (length field %u; %u..%u expected)", fl, blen - 8, n, lo, hi), -1;
        out->message.ptr = (const char*)p + 8;
        out->message.len = n;
        return (long)(TFRDV_TCP_HEADER_LEN + blen);
    }
    default: /* CLOSE */
        if (blen < 8 || blen - 8 > lim.max_message_len)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: CLOSE body of %u bytes (message limit %u)", blen, lim.max_message_len), -1;
        if (len < TFRDV_TCP_HEADER_LEN + (size_t)blen) return 0;
        out->code = tfrdv_tcp__ld32(p);
        n = tfrdv_tcp__ld32(p + 4);
        if (out->code > 16 || n != blen - 8)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: malformed CLOSE (code %u, message length %u, body %u)", out->code, n, blen), -1;
        out->message.ptr = (const char*)p + 8;
        out->message.len = n;
        return (long)(TFRDV_TCP_HEADER_LEN + blen);
    }
}

#ifndef TFRDV_TCP_NO_TRANSPORT
/* >>types ------------------------------------------------------------------------------------ */
typedef struct tfrdv_tcp__lent {               /* ZERO COPY: a pool value a client maps */
    struct tfrdv_tcp__lent* next;
    uint64_t id;
    tfrdv_value* value;
} tfrdv_tcp__lent;
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* SO_NOSIGPIPE is set on each socket instead, where it exists */
#endif
#define TFRDV_TCP__RBUF 16384u        /* per-connection read buffer (at least) */
#define TFRDV_TCP__RBUF_CLIENT 65536u /* a client connection's: the look-ahead that reads many small
                                         responses per recv (values at least half of it stream
                                         straight into the receiver's memory) */
#define TFRDV_TCP__IOV 32             /* iovecs per sendmsg */
#define TFRDV_TCP__SEND_MAX (4u << 20) /* bytes per sendmsg */
#define TFRDV_TCP__GATHER 4096u       /* frame headers gathered per sendmsg */
#define TFRDV_TCP__FREE_MAX 256       /* recycled records kept */
#define TFRDV_TCP__OBUF_KEEP 4096u    /* an empty send buffer larger than this is freed (a burst
                                         of 1,000 requests left 32-64 KiB per connection) */
#define TFRDV_TCP__ACKS 64            /* acknowledgements a client connection gathers before it
                                         queues an ACK frame (sooner: with its next write) */
#define TFRDV_TCP__LINGER_NS 100000000LL /* a CLOSE after a protocol error waits this long at most */

enum { TFRDV_TCP__E_WAIT = 0, TFRDV_TCP__E_ALLOC = 1, TFRDV_TCP__E_RECV = 2 };
/* a served request: waiting for its serve, its response in the send ring, its response written
   and its value held until the client acknowledges it (ACK) or refuses it (CANCEL) */
enum { TFRDV_TCP__R_SERVING = 0, TFRDV_TCP__R_QUEUED = 1, TFRDV_TCP__R_HELD = 2 };
enum { TFRDV_TCP__C_CONNECTING = 0, TFRDV_TCP__C_OPEN = 1, TFRDV_TCP__C_DEAD = 2 };
enum { TFRDV_TCP__RX_HDR = 0, TFRDV_TCP__RX_DATA = 1, TFRDV_TCP__RX_SKIP = 2 };
/* who reads a connection: nobody, the event loop (for one event), a thread lent by tfrdv_recv */
enum { TFRDV_TCP__BY_NONE = 0, TFRDV_TCP__BY_LOOP = 1, TFRDV_TCP__BY_WAITER = 2 };

typedef struct tfrdv_tcp__conn tfrdv_tcp__conn;
typedef struct tfrdv_tcp__peer tfrdv_tcp__peer;

/* a member of a chained hash table (the first member of what is hashed) */
typedef struct tfrdv_tcp__hnode {
    struct tfrdv_tcp__hnode* hnext;
    uint64_t hkey;
} tfrdv_tcp__hnode;
typedef struct tfrdv_tcp__htab {
    tfrdv_tcp__hnode** tab;
    size_t cap, count;                         /* cap: a power of two */
} tfrdv_tcp__htab;

/* one started fetch (client side); keyed by its wire id */
typedef struct tfrdv_tcp__ent {
    tfrdv_tcp__hnode h;                        /* hkey: the wire id (first member) */
    struct tfrdv_tcp__ent *prev, *next;        /* the connection's calls */
    struct tfrdv_tcp__ent* tnext;              /* a todo list */
    uint64_t id;
    tfrdv_call* call;                          /* NULL once someone finished it */
    tfrdv_tcp__conn* conn;
    tfrdv_value* value;                        /* while receiving */
    uint64_t got, total;
    int64_t deadline;                          /* tfrdv_now_ns() domain; INT64_MAX: none */
    int64_t park_until;                        /* waits for a connection until then at most */
    int state, cancelled, dead;
    tfrdv_code fcode;                          /* todo: how to finish */
    const char* fmsg;                          /* todo: NULL -> the todo's bulk status */
} tfrdv_tcp__ent;

/* one request being served (server side); keyed by (connection, wire id) */
typedef struct tfrdv_tcp__req {
    tfrdv_tcp__hnode h;                        /* hkey: connection serial and wire id (first) */
    struct tfrdv_tcp__req *prev, *next;        /* the connection's serving list or send ring */
    struct tfrdv_tcp__req* tnext;
    struct tfrdv_tcp__req* cnext;              /* a todo's withdraw list (tnext may change meanwhile) */
    struct tfrdv_tcp* t;
    tfrdv_tcp__conn* conn;                     /* NULL once the connection is gone */
    uint64_t id;
    int64_t step_id, request_id, deadline;
    int64_t held_at;                           /* R_HELD since (the oldest is the list's head) */
    tfrdv_cancel_mgr* cm;
    int state, cancelled, expired, refs, started, in_list;
    tfrdv_value* value;
    int is_dead;
    tfrdv_args send_args;
    uint64_t total, sent, plan_off;            /* plan_off: bytes planned in the sendmsg being built */
    int planned;
    size_t key_len, key_cap;
    char* key;                                 /* key_cap bytes follow the record */
    int sh_remote;                             /* SAME HOST: its RESPONSE carries the address */
    int zc;                                    /* ZERO COPY: ... a pool reference (sh_remote too) */
    struct tfrdv_tcp__lent* zc_node;           /* ... its c->lent record, made when planned */
} tfrdv_tcp__req;

/* a planned piece of a sendmsg */
typedef struct tfrdv_tcp__plan {
    tfrdv_tcp__req* r;                         /* NULL: the control buffer */
    size_t hlen, blen;
    const uint8_t* hdr;
} tfrdv_tcp__plan;

/* The spin rule of the threads lent to a client connection (tfrdv_tcp__spin_*): a record of
   whether their recent spins saw the response arrive within the window */
typedef struct tfrdv_tcp__spin {
    unsigned hist;    /* the last 8 spins, newest in bit 0: 1 = the response came while spinning */
    int n;            /* spins recorded (up to 8) */
    int gap, since;   /* while spinning does not pay: one probing spin every gap waits */
    int probe;        /* the spin in progress is a probe */
    int shares_cpu;   /* tfrdv_tcp__shares_cpu, looked at every 64 waits */
    int checks;       /* waits until the next look */
} tfrdv_tcp__spin;

struct tfrdv_tcp__conn {
    tfrdv_tcp__conn *prev, *next;              /* t->conns */
    tfrdv_tcp__conn* dnext;                    /* t->dead */
    struct tfrdv_tcp* t;
    int fd, state, server, hello_ok, wblocked, is_unix, in_epoll;
    unsigned armed;                            /* the epoll interest set registered now */
    int claimed;                               /* who reads it now: TFRDV_TCP__BY_* (under t->mu) */
    pthread_t claimer;                         /* the lent thread, while BY_WAITER */
    int corked;                                /* requests wait in obuf for the loop (t->corkq) */
    tfrdv_tcp__conn* cnext;                    /* t->corkq */
    int lazy;                                  /* epoll: a lent thread left it out of the loop's
                                                  set for the next one (no call in flight; 1, and
                                                  2 after a tick: the next tick re-arms it) */
    int64_t kept_at;                           /* when it was last left so, or found alive */
    int cwake[2];                              /* wakes the thread lent by tfrdv_recv (made at its
                                                  first claim; an eventfd or a pipe), or -1 */
    tfrdv_tcp__spin spin;                      /* whether lent threads spin (under t->mu) */
    uint64_t serial;
    tfrdv_tcp__peer* peer;                     /* client side */
    int64_t deadline;                          /* connect / handshake deadline */
    char peer_name[TFRDV_TCP_NAME_MAX + 1];    /* its HELLO's bytes as sent (escape to print) */
    size_t peer_name_len;
    uint64_t peer_incarnation;
    int peer_version;                          /* from its HELLO */
    /* client: calls on this connection; server: requests being served, responses to send,
       responses written whose delivery the client has not acknowledged yet */
    tfrdv_tcp__ent calls;                      /* list head (sentinel) */
    tfrdv_tcp__req serving, ring, held;        /* list heads */
    size_t nserving;
    uint64_t ring_bytes;                       /* value bytes of the ring not written yet */
    int64_t stalled_since;                     /* the socket took nothing while answers waited */
    uint64_t acks[TFRDV_TCP__ACKS];            /* client: deliveries to acknowledge */
    uint32_t nacks;
    /* send state (under t->mu) */
    uint8_t* obuf;                             /* whole control frames */
    size_t olen, ooff, ocap;
    int wpart;                                 /* 1: obuf mid-frame, 2: cur mid-frame */
    tfrdv_tcp__req* cur;
    uint8_t chdr[TFRDV_TCP_META_MAX];
    size_t chlen, choff;
    uint64_t cbody;                            /* body bytes left of cur's frame */
    uint8_t gbuf[TFRDV_TCP__GATHER];
    /* conn_bad: the rest of the frame in progress, then the CLOSE (in gbuf), written on lfd (a
       dup of the socket, or -1) by tfrdv_tcp__linger once the lock is let go */
    int lfd, lniov;
    struct iovec liov[3];
    /* receive state (the polling thread only) */
    uint8_t* rbuf;
    size_t rlen, roff, rcap;
    int rx;
    tfrdv_tcp__ent* rent;
    uint64_t rleft;
    tfrdv_tcp_frame fr;
    /* SAME HOST (under t->mu): the client asked / may read values by address from pid sh_pid
       (SO_PEERCRED); the server granted it and sends large values by address */
    int sh_asked, sh_read, sh_send, sh_seen, sh_cma;  /* sh_cma: the question asked for it */
    int side, side_ok, side_foreign;           /* server: accepted on the side socket; its token
                                                  checked out (before: HELLO and SAMEHOST 128 only);
                                                  its peer runs as another uid (no ring) */
    int up_asked, up_side, up_retire;          /* client, the TCP upgrade: asked (1), answered (2);
                                                  a side connection (not the peer's until its
                                                  SAMEHOST answer); retiring (1), shut down (2) */
    int up_orphan;                             /* a side connection whose TCP connection ended
                                                  while another thread read it: that reader
                                                  closes it when it lets go (under t->mu) */
    long sh_pid;
    /* SAME HOST RING: socket frames written whole (sfr, under t->mu) and read (rfr, the reading
       thread): a ring record names how many socket frames came before it; oframes: frames in
       obuf; shm_in: descriptors a client passed (server, kept for its SAMEHOST frame) */
    uint64_t sfr, rfr;
    uint32_t oframes;
    int shm_in[4], nshm_in;
    struct tfrdv_tcp__shm* shm;                /* the ring, or NULL */
    /* ZERO COPY: server, pool values the client maps (under t->mu); client, the link its mapped
       values' releases report through (RELEASE) */
    struct tfrdv_tcp__lent* lent;
    struct tfrdv_tcp__zlink* zlink;
};

struct tfrdv_tcp__peer {
    tfrdv_tcp__peer* next;
    tfrdv_tcp__conn* conn;
    tfrdv_tcp__ent parked;                     /* calls waiting for a connection (list head) */
    int64_t retry_at, backoff;
    int64_t up_next;                           /* SAME HOST: no TCP upgrade attempt before then */
    tfrdv_tcp__conn* up_pend;                  /* SAME HOST: the side connection being set up (up_side
                                                  1): it goes if the TCP connection ends first */
    char err[160];
    char addr[1];                              /* the address text follows */
};

typedef struct tfrdv_tcp__wk {
    char* name;
    char* addr;
    uint64_t hash;
} tfrdv_tcp__wk;

typedef struct tfrdv_tcp__addr {
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
        struct sockaddr_un un;
        struct sockaddr_storage ss;
    } u;
    socklen_t len;
} tfrdv_tcp__addr;

/* work to do after unlocking */
typedef struct tfrdv_tcp__todo {
    tfrdv_tcp__ent* fin;                       /* calls to finish (ent->fcode / fmsg) */
    tfrdv_tcp__req* back;                      /* values to give back to the table, then free */
    tfrdv_tcp__req* done;                      /* values delivered: release, then free */
    tfrdv_tcp__req* cancel;                    /* serve requests to withdraw (pinned) */
    tfrdv_tcp__conn* linger;                   /* conn_bad: finish its frame, CLOSE (first) */
    struct tfrdv_tcp__lent* lent;              /* ZERO COPY: lent pool values to release */
    tfrdv_status st;                           /* the bulk status */
    char log[TFRDV_STATUS_MSG_MAX + 64];
    int log_level;
} tfrdv_tcp__todo;

/* The one-time tokens a server hands out with its side address (SAMEHOST flag 64, see
   >>SAME HOST): a client of the side socket presents one (flag 128) before anything else is
   taken from it. TFRDV_TCP__SH_TOKENS slots; a slot is free when exp is 0. */
#define TFRDV_TCP__SH_TOKENS 8
typedef struct tfrdv_tcp__sh_tokens {
    uint8_t tok[TFRDV_TCP__SH_TOKENS][TFRDV_TCP_SH_TOKEN_LEN];
    int64_t exp[TFRDV_TCP__SH_TOKENS]; /* when it stops being taken (tfrdv_tcp__now); 0: free */
} tfrdv_tcp__sh_tokens;
struct tfrdv_tcp {
    tfrdv_tcp_config cfg;
    tfrdv_tcp_limits lim;
    pthread_mutex_t mu, poll_mu;
    pthread_cond_t cv;
    int refs, closing, stop, has_thread, destroyed;
    int nclaims;                               /* connections a lent thread reads now */
    int io_running, polling;                   /* the I/O thread has not exited; a thread is in
                                                  tfrdv_tcp__poll_once (poller) */
    int deferred, finishing;                   /* tfrdv_tcp_destroy came from a callback running
                                                  inside the transport: the last thread to leave
                                                  it shuts it down (finishing: that one is) */
    pthread_t poller;
    int loop_waiters;                          /* lent threads waiting for the loop to let go of
                                                  their connection (cv) */
    pthread_t thread;
    tfrdv_mgr* mgr;
    tfrdv_mgr** bound;                         /* managers fetching through t (tfrdv_transport.bind):
                                                  the tick drives their tfrdv_mgr_expire */
    size_t nbound, capbound;
    int hello_waiters;                         /* threads in peer_incarnation (cv) */
    int efd;                                   /* epoll fd, or -1 */
    int wake[2];                               /* eventfd (wake[0] == wake[1]) or a pipe */
    int lfd, listening, lunix, lfile;          /* listener */
    int64_t lpause_until;
    struct stat lst;
    char laddr[128];
    char lpath[sizeof(((struct sockaddr_un*)0)->sun_path) + 1];
    int port;
    tfrdv_tcp__wk* workers;
    size_t nworkers, capworkers;
    tfrdv_tcp__peer* peers;
    tfrdv_tcp__conn conns;                     /* list head */
    tfrdv_tcp__conn* dead;
    size_t nconns, nserver_conns;
    uint64_t next_id, next_serial;
    /* client calls by wire id; server requests by (connection, wire id) */
    tfrdv_tcp__htab ents, reqs;
    int64_t next_tick, ent_min_deadline, req_min_deadline;
    int scanning;                              /* the tick walks a table: no shrinking */
    tfrdv_tcp__ent* free_ents;
    tfrdv_tcp__req* free_reqs;
    tfrdv_cancel_mgr** free_cms;
    int nfree_ents, nfree_reqs, nfree_cms;
    size_t serving_count;                      /* tfrdv_mgr_serve calls whose done has not returned */
    size_t nqueued;                            /* responses waiting in send rings */
    tfrdv_tcp__conn* corkq;                    /* client connections whose requests the I/O thread
                                                  writes as it wakes and before it sleeps */
    int loop_awake, cork_woken;                /* between those two; the loop was woken for them */
    tfrdv_tcp_stats stats;                     /* under mu, but for the two counters below */
    uint64_t frames_received, recv_calls;      /* the polling thread's, atomic */
#ifndef TFRDV_TCP__EPOLL
    struct pollfd* pfds;                       /* the poll() loop's descriptor set */
    tfrdv_tcp__conn** pconns;
    size_t npoll;
#endif
    /* SAME HOST */
    uint64_t sh_min;                           /* values of this many bytes go by address; 0: off */
    long sh_lpid;                              /* the process that bound the listener */
    int sfd, sarmed, up_deny, up_logged;       /* SAME HOST: the side listener (-1: none yet), in
                                                  the epoll set; TFRDV_TCP_UPGRADE_DENY; logged */
    char saddr[TFRDV_TCP_SH_ADDR_MAX + 1];     /* its address, "@tfrdv-<pid>-<hex>" */
    int up_clogged;                            /* a client's TCP upgrade fallback was logged */
    tfrdv_tcp__sh_tokens stoks;                /* its one-time tokens */
    int sh_deny, sh_logged;                    /* TFRDV_TCP_CMA_DENY; the fallback was logged */
    struct tfrdv_tcp_pool* pools[16];          /* ZERO COPY: tfrdv_tcp_add_pool (under mu) */
    int npools;
    struct tfrdv_tcp__lent* orphans;           /* ZERO COPY: values lent over connections that
                                                  ended (held until destroy, under mu) */
    int shm_deny, shm_logged;                  /* TFRDV_TCP_RING_DENY (1: off, 2: memfd_create
                                                  taken as failing); the ring's fallback was logged */
    uint64_t ring_frames_in, ring_values_in;   /* the reading threads' counters (atomic) */
};

/* SAME HOST RING: the shared memory of a connection (the section of that name) */
#define TFRDV_TCP__RING_BYTES (256u << 10)     /* each direction's bytes (a power of two) */
#define TFRDV_TCP__RING_MAP (4096u + 2u * TFRDV_TCP__RING_BYTES)
#define TFRDV_TCP__RING_REC_MAX (128u << 10)   /* frames in one record */
#define TFRDV_TCP__RING_VALUE_MAX (64u << 10)  /* the largest value a RESPONSE carries through it */
typedef struct tfrdv_tcp__shr {
    uint64_t *tail, *head;                     /* in the mapping: the peer may write anything */
    uint32_t* wake;
    uint8_t* data;
    uint64_t pos;                              /* ours: the producer's tail, the consumer's head */
} tfrdv_tcp__shr;
typedef struct tfrdv_tcp__shm {
    uint8_t* map;
    tfrdv_tcp__shr tx, rx;
    int tx_ok;                                 /* frames may go in (the server mapped it) */
    int efd;                                   /* our loop's doorbell (epoll, edge-triggered) */
    int peer_efd[2];                           /* the peer's: its loop's, its lent thread's (or -1) */
    int fx;                                    /* both sides agreed on sleep word 3 (a futex waiter) */
    uint64_t *socks;                           /* in the mapping: the server's socket writes (fx) */
    uint64_t nsock;                            /* server: those writes; client: the count last seen */
    uint32_t lwake;                            /* client: this process woke its lent thread (fx) */
    int out[4], nout;                          /* client: passed with the next sendmsg */
    uint8_t* buf;                              /* a record copied out */
} tfrdv_tcp__shm;

/* SAME HOST hooks (the section of that name, after the frame handlers) */
TFRDV_TCP__PRIVATE int tfrdv_tcp__sh_plan(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__req* r, tfrdv_tcp_frame* f);
TFRDV_TCP__PRIVATE void tfrdv_tcp__sh_sent(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__req* r);
TFRDV_TCP__PRIVATE int64_t tfrdv_tcp__sh_grace(const tfrdv_tcp__req* r);
TFRDV_TCP__PRIVATE void tfrdv_tcp__sh_hello(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE int tfrdv_tcp__up_fallback(tfrdv_tcp* t, tfrdv_tcp__peer* p, const char* why, char* msg, size_t mcap);
TFRDV_TCP__PRIVATE void tfrdv_tcp__unpark(tfrdv_tcp* t, tfrdv_tcp__peer* p, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE int tfrdv_tcp__sh_remote_ok(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE void tfrdv_tcp__sh_on_frame(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE void tfrdv_tcp__sh_read(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__ent* e, const tfrdv_tcp_frame* f, tfrdv_tcp__todo* td);
/* SAME HOST RING hooks (the section of that name, after SAME HOST) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_flush(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_cmsg(tfrdv_tcp__conn* c, struct msghdr* mh, void* cbuf, size_t cap);
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_sent(tfrdv_tcp__conn* c);
TFRDV_TCP__PRIVATE ssize_t tfrdv_tcp__recv(tfrdv_tcp__conn* c, void* buf, size_t len);
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_before(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_drain(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_ready(tfrdv_tcp__conn* c, int awake);
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_nap(tfrdv_tcp__conn* c, int fx);
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_sleep(tfrdv_tcp__conn* c, struct pollfd* pf, int64_t left, uint32_t lw);
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_sock(tfrdv_tcp__conn* c);
TFRDV_TCP__PRIVATE void tfrdv_tcp__wake_lent(tfrdv_tcp__conn* c);
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_handback(tfrdv_tcp__conn* c);
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_keep(tfrdv_tcp__conn* c);
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_stop(tfrdv_tcp* t, tfrdv_tcp__conn* c);
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_free(tfrdv_tcp* t, tfrdv_tcp__conn* c);
#ifdef TFRDV_TCP__RING
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_offer(tfrdv_tcp* t, tfrdv_tcp__conn* c, char* why, size_t cap);
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_accept(tfrdv_tcp* t, tfrdv_tcp__conn* c, char* why, size_t cap);
#endif

/* >>memory ----------------------------------------------------------------------------------- */
TFRDV_TCP__PRIVATE void* tfrdv_tcp__alloc(tfrdv_tcp* t, size_t n) {
    if (t->cfg.hooks.allocator.alloc_fn) return t->cfg.hooks.allocator.alloc_fn(t->cfg.hooks.allocator.user, n);
    return malloc(n);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__free(tfrdv_tcp* t, void* p, size_t n) {
    if (!p) return;
    if (t->cfg.hooks.allocator.free_fn) t->cfg.hooks.allocator.free_fn(t->cfg.hooks.allocator.user, p, n);
    else free(p);
}
TFRDV_TCP__PRIVATE char* tfrdv_tcp__strdup(tfrdv_tcp* t, const char* s) {
    size_t n = strlen(s) + 1;
    char* p = (char*)tfrdv_tcp__alloc(t, n);
    if (p) memcpy(p, s, n);
    return p;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__strfree(tfrdv_tcp* t, char* s) {
    if (s) tfrdv_tcp__free(t, s, strlen(s) + 1);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__log(tfrdv_tcp* t, int level, const char* fmt, ...) {
    char buf[TFRDV_STATUS_MSG_MAX + 64];
    va_list ap;
    if (!t->cfg.hooks.logger.fn) return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    t->cfg.hooks.logger.fn(t->cfg.hooks.logger.user, level, buf);
}
TFRDV_TCP__PRIVATE int64_t tfrdv_tcp__now(void) { return tfrdv_now_ns(); }
/* a + b saturated to int64_t: times built from a peer's or the config's values never wrap */
TFRDV_TCP__PRIVATE int64_t tfrdv_tcp__add(int64_t a, int64_t b) {
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}
/* whole milliseconds to wait for ns (rounded up), at most an hour: a poll() timeout */
TFRDV_TCP__PRIVATE int tfrdv_tcp__ms(int64_t ns) {
    if (ns <= 0) return 0;
    if (ns > 3600000000000LL) return 3600000;
    return (int)((ns + 999999) / 1000000);
}

/* >>hash tables (chained, power-of-two buckets; grow at count > cap, shrink at count < cap/8) -- */
TFRDV_TCP__PRIVATE size_t tfrdv_tcp__slot(uint64_t k, size_t cap) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}
/* rehash into a table of ncap slots (a power of two); on allocation failure keeps the old one */
TFRDV_TCP__PRIVATE void tfrdv_tcp__rehash(tfrdv_tcp* t, tfrdv_tcp__htab* h, size_t ncap) {
    tfrdv_tcp__hnode** nt = (tfrdv_tcp__hnode**)tfrdv_tcp__alloc(t, ncap * sizeof *nt);
    size_t i;
    if (!nt) return;
    memset(nt, 0, ncap * sizeof *nt);
    for (i = 0; i < h->cap; i++) {
        tfrdv_tcp__hnode* e = h->tab[i];
        while (e) {
            tfrdv_tcp__hnode* nx = e->hnext;
            size_t s = tfrdv_tcp__slot(e->hkey, ncap);
            e->hnext = nt[s];
            nt[s] = e;
            e = nx;
        }
    }
    tfrdv_tcp__free(t, h->tab, h->cap * sizeof *h->tab);
    h->tab = nt;
    h->cap = ncap;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__hinsert(tfrdv_tcp* t, tfrdv_tcp__htab* h, tfrdv_tcp__hnode* n) {
    size_t s;
    if (h->count >= h->cap) tfrdv_tcp__rehash(t, h, h->cap * 2);
    s = tfrdv_tcp__slot(n->hkey, h->cap);
    n->hnext = h->tab[s];
    h->tab[s] = n;
    h->count++;
}
/* the chain a key hashes to */
TFRDV_TCP__PRIVATE tfrdv_tcp__hnode* tfrdv_tcp__hchain(const tfrdv_tcp__htab* h, uint64_t key) {
    return h->tab[tfrdv_tcp__slot(key, h->cap)];
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__hremove(tfrdv_tcp* t, tfrdv_tcp__htab* h, tfrdv_tcp__hnode* n) {
    tfrdv_tcp__hnode** pp = &h->tab[tfrdv_tcp__slot(n->hkey, h->cap)];
    while (*pp && *pp != n) pp = &(*pp)->hnext;
    if (*pp) { *pp = n->hnext; h->count--; }
    n->hnext = 0;
    if (h->cap > 64 && h->count < h->cap / 8 && !t->scanning) tfrdv_tcp__rehash(t, h, h->cap / 4);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__ent_insert(tfrdv_tcp* t, tfrdv_tcp__ent* e) {
    e->h.hkey = e->id;
    tfrdv_tcp__hinsert(t, &t->ents, &e->h);
}
TFRDV_TCP__PRIVATE tfrdv_tcp__ent* tfrdv_tcp__ent_find(tfrdv_tcp* t, uint64_t id) {
    tfrdv_tcp__hnode* n = tfrdv_tcp__hchain(&t->ents, id);
    while (n && ((tfrdv_tcp__ent*)n)->id != id) n = n->hnext;
    return (tfrdv_tcp__ent*)n;
}
/* out of the table and out of its connection's list */
TFRDV_TCP__PRIVATE void tfrdv_tcp__ent_remove(tfrdv_tcp* t, tfrdv_tcp__ent* e) {
    tfrdv_tcp__hremove(t, &t->ents, &e->h);
    if (e->prev) { e->prev->next = e->next; e->next->prev = e->prev; e->prev = e->next = 0; }
}
TFRDV_TCP__PRIVATE uint64_t tfrdv_tcp__rkey(const tfrdv_tcp__conn* c, uint64_t id) {
    return id * 0x9e3779b97f4a7c15ULL ^ c->serial;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__req_insert(tfrdv_tcp* t, tfrdv_tcp__req* r) {
    r->h.hkey = tfrdv_tcp__rkey(r->conn, r->id);
    tfrdv_tcp__hinsert(t, &t->reqs, &r->h);
}
TFRDV_TCP__PRIVATE tfrdv_tcp__req* tfrdv_tcp__req_find(tfrdv_tcp* t, const tfrdv_tcp__conn* c, uint64_t id) {
    tfrdv_tcp__hnode* n = tfrdv_tcp__hchain(&t->reqs, tfrdv_tcp__rkey(c, id));
    while (n && !(((tfrdv_tcp__req*)n)->id == id && ((tfrdv_tcp__req*)n)->conn == c)) n = n->hnext;
    return (tfrdv_tcp__req*)n;
}
/* out of the table and out of its connection's list */
TFRDV_TCP__PRIVATE void tfrdv_tcp__req_unlink(tfrdv_tcp* t, tfrdv_tcp__req* r) {
    tfrdv_tcp__hremove(t, &t->reqs, &r->h);
    if (r->in_list) {
        r->prev->next = r->next;
        r->next->prev = r->prev;
        r->prev = r->next = 0;
        r->in_list = 0;
        if (r->conn && r->state == TFRDV_TCP__R_SERVING) r->conn->nserving--;
    }
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__list_add(tfrdv_tcp__req* head, tfrdv_tcp__req* r) {
    r->prev = head->prev;
    r->next = head;
    head->prev->next = r;
    head->prev = r;
    r->in_list = 1;
}

/* >>records ---------------------------------------------------------------------------------- */
TFRDV_TCP__PRIVATE tfrdv_tcp__ent* tfrdv_tcp__ent_new(tfrdv_tcp* t) {
    tfrdv_tcp__ent* e = t->free_ents;
    if (e) { t->free_ents = e->tnext; t->nfree_ents--; }
    else if (!(e = (tfrdv_tcp__ent*)tfrdv_tcp__alloc(t, sizeof *e))) return 0;
    memset(e, 0, sizeof *e);
    return e;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__ent_free(tfrdv_tcp* t, tfrdv_tcp__ent* e) {
    if (t->nfree_ents < TFRDV_TCP__FREE_MAX) { e->tnext = t->free_ents; t->free_ents = e; t->nfree_ents++; }
    else tfrdv_tcp__free(t, e, sizeof *e);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__req_dispose(tfrdv_tcp* t, tfrdv_tcp__req* r) { /* refs == 0 */
    if (r->zc_node) { tfrdv_tcp__free(t, r->zc_node, sizeof *r->zc_node); r->zc_node = 0; } /* ZERO COPY: never sent */
    if (r->cm) {
        if (t->nfree_cms < TFRDV_TCP__FREE_MAX && tfrdv_cancel_mgr_reset(r->cm) == TFRDV_OK) t->free_cms[t->nfree_cms++] = r->cm;
        else tfrdv_cancel_mgr_destroy(r->cm);
        r->cm = 0;
    }
    if (t->nfree_reqs < TFRDV_TCP__FREE_MAX && r->key_cap <= 256) { r->tnext = t->free_reqs; t->free_reqs = r; t->nfree_reqs++; }
    else tfrdv_tcp__free(t, r, sizeof *r + r->key_cap);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__req_unref(tfrdv_tcp* t, tfrdv_tcp__req* r) {
    if (--r->refs == 0) tfrdv_tcp__req_dispose(t, r);
}
TFRDV_TCP__PRIVATE tfrdv_tcp__req* tfrdv_tcp__req_new(tfrdv_tcp* t, size_t key_len) {
    tfrdv_tcp__req *r = 0, **pp = &t->free_reqs;
    size_t cap;
    tfrdv_cancel_mgr* cm = 0;
    while (*pp && (*pp)->key_cap < key_len) pp = &(*pp)->tnext;
    if (*pp) { r = *pp; *pp = r->tnext; t->nfree_reqs--; cap = r->key_cap; }
    else {
        cap = key_len < 256 ? 256 : key_len;
        if (!(r = (tfrdv_tcp__req*)tfrdv_tcp__alloc(t, sizeof *r + cap))) return 0;
    }
    if (t->nfree_cms) cm = t->free_cms[--t->nfree_cms];
    else {
        tfrdv_status st;
        if (tfrdv_cancel_mgr_create(&t->cfg.hooks, &cm, &st) != TFRDV_OK) cm = 0;
    }
    if (!cm) { tfrdv_tcp__free(t, r, sizeof *r + cap); return 0; }
    memset(r, 0, sizeof *r);
    r->key_cap = cap;
    r->key = (char*)(r + 1);
    r->cm = cm;
    r->t = t;
    r->refs = 1;
    return r;
}

/* >>sockets ---------------------------------------------------------------------------------- */
TFRDV_TCP__PRIVATE void tfrdv_tcp__cloexec_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    fl = fcntl(fd, F_GETFD, 0);
    if (fl >= 0) (void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}
TFRDV_TCP__PRIVATE int tfrdv_tcp__socket(int family) {
    int fd;
#if defined(SOCK_NONBLOCK) && defined(SOCK_CLOEXEC)
    fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 || errno != EINVAL) return fd;
#endif
    fd = socket(family, SOCK_STREAM, 0);
    if (fd >= 0) tfrdv_tcp__cloexec_nonblock(fd);
    return fd;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__setint(int fd, int level, int opt, int v) {
    (void)setsockopt(fd, level, opt, &v, (socklen_t)sizeof v);
}
/* options of a connected socket, both ends */
TFRDV_TCP__PRIVATE void tfrdv_tcp__sockopts(tfrdv_tcp* t, int fd, int is_unix) {
#ifdef SO_NOSIGPIPE
    tfrdv_tcp__setint(fd, SOL_SOCKET, SO_NOSIGPIPE, 1);
#endif
    if (is_unix) {
        if (t->cfg.send_buffer >= 0) tfrdv_tcp__setint(fd, SOL_SOCKET, SO_SNDBUF, t->cfg.send_buffer ? t->cfg.send_buffer : 4 << 20);
        return;
    }
    tfrdv_tcp__setint(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    if (t->cfg.send_buffer > 0) tfrdv_tcp__setint(fd, SOL_SOCKET, SO_SNDBUF, t->cfg.send_buffer);
#ifdef TCP_NOTSENT_LOWAT
    if (t->cfg.notsent_lowat > 0) tfrdv_tcp__setint(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, t->cfg.notsent_lowat);
#endif
    if (t->cfg.keepalive_ns > 0) {
        int64_t s = t->cfg.keepalive_ns / 1000000000;
        int idle = s < 1 ? 1 : s > 32767 ? 32767 : (int)s; /* Linux takes at most 32767 s */
        tfrdv_tcp__setint(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
#ifdef TCP_KEEPIDLE
        tfrdv_tcp__setint(fd, IPPROTO_TCP, TCP_KEEPIDLE, idle);
#elif defined(TCP_KEEPALIVE)
        tfrdv_tcp__setint(fd, IPPROTO_TCP, TCP_KEEPALIVE, idle);
#endif
#ifdef TCP_KEEPINTVL
        tfrdv_tcp__setint(fd, IPPROTO_TCP, TCP_KEEPINTVL, idle / 5 > 0 ? idle / 5 : 1);
#endif
#ifdef TCP_KEEPCNT
        tfrdv_tcp__setint(fd, IPPROTO_TCP, TCP_KEEPCNT, 3);
#endif
    }
#ifdef TCP_USER_TIMEOUT
    if (t->cfg.user_timeout_ns > 0) {
        int64_t ms = t->cfg.user_timeout_ns / 1000000;
        tfrdv_tcp__setint(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, ms > 0x7fffffff ? 0x7fffffff : (int)(ms ? ms : 1));
    }
#endif
}

/* "host:port", "[v6]:port", "unix:/path", "unix:@abstract" -> socket address */
TFRDV_TCP__PRIVATE tfrdv_code tfrdv_tcp__parse(const char* s, int listen, tfrdv_tcp__addr* a, tfrdv_status* st) {
    const char *colon, *host;
    char hbuf[256];
    size_t hlen;
    unsigned long port = 0;
    char* end = 0;
    memset(a, 0, sizeof *a);
    if (!s || !*s) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: empty address");
    if (strncmp(s, "unix:", 5) == 0) {
        const char* path = s + 5;
        size_t n = strlen(path);
        a->u.un.sun_family = AF_UNIX;
        if (!n) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: address \"%s\" has no path", s);
        if (n >= sizeof a->u.un.sun_path)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: Unix socket path of \"%s\" is %zu bytes; at most %zu fit", s, n, sizeof a->u.un.sun_path - 1);
        if (path[0] == '@') {
#ifdef __linux__
            memcpy(a->u.un.sun_path + 1, path + 1, n - 1); /* abstract: leading NUL, no file */
            a->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
            return TFRDV_OK;
#else
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: abstract Unix names (\"%s\") exist only on Linux", s);
#endif
        }
        memcpy(a->u.un.sun_path, path, n);
        a->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
        return TFRDV_OK;
    }
    if (s[0] == '[') {
        const char* rb = strchr(s, ']');
        if (!rb || rb[1] != ':') return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: address \"%s\": expected [v6]:port", s);
        host = s + 1;
        hlen = (size_t)(rb - host);
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || colon == s) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: address \"%s\": expected host:port, [v6]:port or unix:/path", s);
        host = s;
        hlen = (size_t)(colon - s);
    }
    if (hlen >= sizeof hbuf) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: host name of \"%s\" is too long", s);
    memcpy(hbuf, host, hlen);
    hbuf[hlen] = 0;
    if (colon[1] >= '0' && colon[1] <= '9') port = strtoul(colon + 1, &end, 10);
    if (!end || *end || port > 65535 || (port == 0 && !listen))
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: address \"%s\": bad port (1..65535%s)", s, listen ? ", or 0 for a free one" : "");
    if (s[0] == '[') {
        a->u.in6.sin6_family = AF_INET6;
        a->u.in6.sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, hbuf, &a->u.in6.sin6_addr) != 1)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: address \"%s\": not an IPv6 address", s);
        a->len = (socklen_t)sizeof a->u.in6;
        return TFRDV_OK;
    }
    a->u.in4.sin_family = AF_INET;
    a->u.in4.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, hbuf, &a->u.in4.sin_addr) == 1) {
        a->len = (socklen_t)sizeof a->u.in4;
        return TFRDV_OK;
    } else {
        struct addrinfo hints, *res = 0;
        int rc;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        rc = getaddrinfo(hbuf, 0, &hints, &res);
        if (rc || !res || res->ai_addrlen > sizeof a->u) {
            if (res) freeaddrinfo(res);
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: address \"%s\": cannot resolve host \"%s\" (%s)", s, hbuf, rc ? gai_strerror(rc) : "no address");
        }
        memcpy(&a->u, res->ai_addr, res->ai_addrlen);
        a->len = (socklen_t)res->ai_addrlen;
        if (a->u.sa.sa_family == AF_INET6) a->u.in6.sin6_port = htons((uint16_t)port);
        else a->u.in4.sin_port = htons((uint16_t)port);
        freeaddrinfo(res);
        return TFRDV_OK;
    }
}

/* An address's syntax only (no name lookup: a host name may resolve only later): what create and
   tfrdv_tcp_set_worker accept for a worker */
TFRDV_TCP__PRIVATE tfrdv_code tfrdv_tcp__addr_check(const char* s, tfrdv_status* st) {
    const char *colon, *p;
    unsigned long port = 0;
    char* end = 0;
    tfrdv_tcp__addr a;
    char es[256];
    for (p = s; p && *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) {
            (void)tfrdv_escape(es, sizeof es, s, strlen(s));
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: address \"%.200s\" has a byte outside printable ASCII", es);
        }
    if (!s || !*s || strncmp(s, "unix:", 5) == 0 || s[0] == '[') return tfrdv_tcp__parse(s, 0, &a, st);
    colon = strrchr(s, ':');
    for (p = s; colon && p < colon; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_')) break;
    if (!colon || colon == s || p != colon || colon - s > 255)
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: address \"%.200s\": expected host:port, [v6]:port or unix:/path", s);
    if (colon[1] >= '0' && colon[1] <= '9') port = strtoul(colon + 1, &end, 10);
    if (!end || *end || port == 0 || port > 65535)
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: address \"%.200s\": bad port (1..65535)", s);
    return TFRDV_OK;
}
/* a worker name as calls carry it: /job:J/replica:R/task:T, canonical (anything else never matches) */
TFRDV_TCP__PRIVATE int tfrdv_tcp__worker_name_ok(const char* name) {
    tfrdv_device_name dn;
    char canon[TFRDV_TCP_NAME_MAX + 1];
    size_t n = strlen(name);
    if (n > TFRDV_TCP_NAME_MAX || tfrdv_device_parse(name, n, &dn, 0) != TFRDV_OK || !dn.has_job || !dn.has_replica ||
        !dn.has_task || dn.has_type || dn.has_id)
        return 0;
    return tfrdv_device_format(&dn, canon, sizeof canon) == n && memcmp(canon, name, n) == 0;
}

/* >>event loop plumbing ---------------------------------------------------------------------- */
/* a wake-up descriptor: an eventfd (w[0] == w[1]) or a pipe, non-blocking; 0 when none was made */
TFRDV_TCP__PRIVATE int tfrdv_tcp__wake_open(int w[2]) {
#ifdef TFRDV_TCP__EPOLL
    w[0] = w[1] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
#else
    if (pipe(w) == 0) { tfrdv_tcp__cloexec_nonblock(w[0]); tfrdv_tcp__cloexec_nonblock(w[1]); }
    else w[0] = w[1] = -1;
#endif
    return w[0] >= 0;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__wake_close(int w[2]) {
    if (w[1] >= 0 && w[1] != w[0]) close(w[1]);
    if (w[0] >= 0) close(w[0]);
    w[0] = w[1] = -1;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__wake_fd(const int w[2]) {
    uint64_t one = 1; /* 8 bytes: an eventfd takes nothing less */
    ssize_t n;
    if (w[1] < 0) return;
    do n = write(w[1], &one, sizeof one);
    while (n < 0 && errno == EINTR);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__wake_drain(const int w[2]) {
    uint8_t buf[64];
    if (w[0] == w[1]) { /* an eventfd: one read takes the whole count (SAME HOST RING: one
                           system call per doorbell) */
        while (read(w[0], buf, 8) < 0 && errno == EINTR) {}
        return;
    }
    while (read(w[0], buf, sizeof buf) > 0) {}
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__wake(tfrdv_tcp* t) { tfrdv_tcp__wake_fd(t->wake); }
/* interest in readability (always) and writability (connecting or blocked); a connection a lent
   thread reads is out of the loop's set: that thread is told to look again instead */
TFRDV_TCP__PRIVATE void tfrdv_tcp__arm(tfrdv_tcp* t, tfrdv_tcp__conn* c) {
#ifdef TFRDV_TCP__EPOLL
    struct epoll_event ev;
    if (c->claimed == TFRDV_TCP__BY_WAITER) { tfrdv_tcp__wake_lent(c); return; }
    if (c->lazy && c->shm) tfrdv_tcp__shm_handback(c); /* SAME HOST RING: kept with nobody to wake */
    c->lazy = 0;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | EPOLLRDHUP | ((c->wblocked || c->state == TFRDV_TCP__C_CONNECTING) ? EPOLLOUT : 0u);
    ev.data.ptr = c;
    if (c->in_epoll && c->armed == ev.events) return;
    if (epoll_ctl(t->efd, c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) == 0) {
        c->in_epoll = 1;
        c->armed = ev.events;
    }
#else
    if (c->claimed == TFRDV_TCP__BY_WAITER) tfrdv_tcp__wake_lent(c);
    else tfrdv_tcp__wake(t);
#endif
}
/* a listener (t->lfd with t->listening, or the side socket t->sfd with t->sarmed) in or out of
   the loop's set */
TFRDV_TCP__PRIVATE void tfrdv_tcp__lsock_arm(tfrdv_tcp* t, int* fd, int* armed, int on) {
    if (*fd < 0 || *armed == on) return;
    *armed = on;
#ifdef TFRDV_TCP__EPOLL
    {
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN;
        ev.data.ptr = fd;
        (void)epoll_ctl(t->efd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, *fd, &ev);
    }
#else
    tfrdv_tcp__wake(t);
#endif
}


/* >>send side (under t->mu) ------------------------------------------------------------------ */
TFRDV_TCP__PRIVATE int tfrdv_tcp__oreserve(tfrdv_tcp* t, tfrdv_tcp__conn* c, size_t n) {
    size_t need, ncap;
    uint8_t* nb;
    if (c->ooff && c->wpart != 1) { /* nothing mid-frame: compact */
        memmove(c->obuf, c->obuf + c->ooff, c->olen - c->ooff);
        c->olen -= c->ooff;
        c->ooff = 0;
    }
    need = c->olen + n;
    if (need <= c->ocap) return 1;
    ncap = c->ocap ? c->ocap : 1024;
    while (ncap < need) ncap *= 2;
    nb = (uint8_t*)tfrdv_tcp__alloc(t, ncap);
    if (!nb) return 0;
    if (c->olen) memcpy(nb, c->obuf, c->olen);
    tfrdv_tcp__free(t, c->obuf, c->ocap);
    c->obuf = nb;
    c->ocap = ncap;
    return 1;
}
/* appends one control frame; 0 on out of memory */
TFRDV_TCP__PRIVATE int tfrdv_tcp__queue(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f) {
    size_t n = tfrdv_tcp_encode(f, 0, 0);
    if (!tfrdv_tcp__oreserve(t, c, n)) return 0;
    tfrdv_tcp_encode(f, c->obuf + c->olen, n);
    c->olen += n;
    c->oframes++; /* SAME HOST RING: counted in sfr once written */
    t->stats.frames_sent++;
    return 1;
}
/* the acknowledgements gathered on c become one ACK frame, ahead of what is written next */
TFRDV_TCP__PRIVATE void tfrdv_tcp__ack_queue(tfrdv_tcp* t, tfrdv_tcp__conn* c) {
    tfrdv_tcp_frame f;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_ACK;
    f.num_acks = c->nacks;
    f.ack_ids = c->acks;
    if (tfrdv_tcp__queue(t, c, &f)) c->nacks = 0; /* out of memory: kept for the next try */
}
/* a delivery to acknowledge: it rides on the connection's next write (a REQUEST, usually), or
   the I/O loop's pass or tick sends it */
TFRDV_TCP__PRIVATE void tfrdv_tcp__ack(tfrdv_tcp* t, tfrdv_tcp__conn* c, uint64_t id) {
    if (c->nacks == TFRDV_TCP__ACKS) tfrdv_tcp__ack_queue(t, c);
    if (c->nacks < TFRDV_TCP__ACKS) c->acks[c->nacks++] = id;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__queue_error(tfrdv_tcp* t, tfrdv_tcp__conn* c, uint64_t id, tfrdv_code code,
                                               uint32_t detail, const char* msg) {
    tfrdv_tcp_frame f;
    size_t n = strlen(msg);
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_ERROR;
    f.id = id;
    f.code = (uint32_t)code;
    f.detail = detail;
    f.message.ptr = msg;
    f.message.len = n > t->lim.max_message_len ? t->lim.max_message_len : n;
    (void)tfrdv_tcp__queue(t, c, &f);
}
/* a response leaves the send ring: delivered (value released later) or given back */
TFRDV_TCP__PRIVATE void tfrdv_tcp__resp_leave(tfrdv_tcp* t, tfrdv_tcp__req* r, tfrdv_tcp__todo* td, int delivered) {
    if (r->conn) r->conn->ring_bytes -= r->total - r->sent;
    tfrdv_tcp__req_unlink(t, r);
    t->nqueued--;
    if (delivered) {
        t->stats.serve_ok++;
        r->tnext = td->done;
        td->done = r;
    } else {
        r->tnext = td->back;
        td->back = r;
    }
}
/* the last byte of a response was written: a version 2 client acknowledges its delivery (ACK) or
   refuses it (CANCEL: its call had finished); until then the value stays here, so a receive that
   gave up while its answer was on the wire (or a client that dies) leaves the value in the table */
TFRDV_TCP__PRIVATE void tfrdv_tcp__resp_written(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__req* r, tfrdv_tcp__todo* td) {
    if (c->peer_version < 2 || r->cancelled) { /* version 1: no acknowledgements; a CANCEL
                                                  arrived during the last frame: refused */
        tfrdv_tcp__resp_leave(t, r, td, !r->cancelled);
        return;
    }
    r->prev->next = r->next; /* out of the ring, into the held list (stays in the table) */
    r->next->prev = r->prev;
    tfrdv_tcp__list_add(&c->held, r);
    r->state = TFRDV_TCP__R_HELD;
    r->held_at = tfrdv_tcp__now() + (r->sh_remote ? tfrdv_tcp__sh_grace(r) : 0); /* SAME HOST */
    t->nqueued--;
    t->stats.serve_ok++;
}
/* a held response's fate: acknowledged (the value is released) or refused (it goes back) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__held_leave(tfrdv_tcp* t, tfrdv_tcp__req* r, tfrdv_tcp__todo* td, int acked) {
    tfrdv_tcp__req_unlink(t, r);
    if (acked) {
        t->stats.values_acked++;
        r->tnext = td->done;
        td->done = r;
    } else {
        t->stats.serve_ok--; /* counted when written; it was not delivered */
        t->stats.serve_cancelled++;
        r->tnext = td->back;
        td->back = r;
    }
}
/* broken socket seen by a writer: the polling thread fails the connection (the socket reports
   it through EOF / an error once shut down) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__broken(tfrdv_tcp* t, tfrdv_tcp__conn* c) {
    (void)t;
    if (c->fd >= 0) (void)shutdown(c->fd, SHUT_RDWR);
    c->wblocked = 0;
    c->olen = c->ooff = 0;
    c->wpart = 0;
}
/* a RESPONSE frame's header fields for answer r (type, value description, dead mark) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__resp_head(tfrdv_tcp_frame* f, const tfrdv_tcp__req* r) {
    f->type = TFRDV_TCP_RESPONSE;
    if (r->value) {
        f->dtype = r->value->dtype;
        f->rank = r->value->rank;
        f->bytes = r->total;
        if (f->rank > 0) memcpy(f->dims, r->value->dims, (size_t)f->rank * sizeof *f->dims);
    } else {
        f->no_value = 1;
    }
    f->is_dead = r->is_dead;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_flush(tfrdv_tcp* t, tfrdv_tcp__conn* c);
TFRDV_TCP__PRIVATE int tfrdv_tcp__zc_due(tfrdv_tcp__conn* c);
/* writes whatever the connection has queued until the socket is full */
TFRDV_TCP__PRIVATE void tfrdv_tcp__write(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
    struct iovec iov[TFRDV_TCP__IOV];
    tfrdv_tcp__plan plan[TFRDV_TCP__IOV];
    size_t budget = TFRDV_TCP__SEND_MAX; /* per call: the rest goes out from the loop, between reads */
    uint64_t cbuf[8];                     /* SAME HOST RING: SCM_RIGHTS (4 descriptors) */
    if (c->state != TFRDV_TCP__C_OPEN || c->fd < 0) return;
    if (c->nacks) tfrdv_tcp__ack_queue(t, c);
    if (c->zlink) tfrdv_tcp__zc_flush(t, c); /* ZERO COPY: RELEASE frames */
    if (c->shm) { /* SAME HOST RING: what fits goes there */
        tfrdv_tcp__shm_flush(t, c, td);
        if (c->state != TFRDV_TCP__C_OPEN) return;
    }
    for (;;) {
        int ni = 0, np = 0, i;
        size_t total = 0, gused = 0, w;
        ssize_t n;
        struct msghdr mh;
        tfrdv_tcp__req* r;
        /* 1. what is mid-frame */
        if (c->wpart == 2) {
            r = c->cur;
            plan[np].r = r;
            plan[np].hdr = c->chdr + c->choff;
            plan[np].hlen = c->chlen - c->choff;
            plan[np].blen = (size_t)c->cbody;
            if (plan[np].hlen) { iov[ni].iov_base = (void*)(c->chdr + c->choff); iov[ni++].iov_len = plan[np].hlen; }
            if (plan[np].blen) { iov[ni].iov_base = (uint8_t*)r->value->data + r->sent; iov[ni++].iov_len = plan[np].blen; }
            total += plan[np].hlen + plan[np].blen;
            np++;
        }
        /* 2. control frames (whole) */
        if (c->wpart != 2 && c->olen > c->ooff) {
            plan[np].r = 0;
            plan[np].hdr = c->obuf + c->ooff;
            plan[np].hlen = c->olen - c->ooff;
            plan[np].blen = 0;
            iov[ni].iov_base = c->obuf + c->ooff;
            iov[ni++].iov_len = plan[np].hlen;
            total += plan[np].hlen;
            np++;
        }
        /* 3. response frames, one per response in turn (round robin) */
        if (c->wpart != 1) {
            int progress = 1;
            for (r = c->ring.next; r != &c->ring; r = r->next) { r->plan_off = 0; r->planned = 0; }
            while (progress && ni + 2 <= TFRDV_TCP__IOV && total < TFRDV_TCP__SEND_MAX) {
                progress = 0;
                for (r = c->ring.next; r != &c->ring && ni + 2 <= TFRDV_TCP__IOV && total < TFRDV_TCP__SEND_MAX; r = r->next) {
                    tfrdv_tcp_frame f;
                    uint64_t off = r->sent + r->plan_off, left = r->total - off, body;
                    size_t hl;
                    if (r == c->cur && c->wpart == 2) continue;
                    if (left == 0 && (r->started || r->planned)) continue;
                    if (r->cancelled && (r->started || r->planned)) continue;
                    body = left < t->cfg.frame_bytes ? left : t->cfg.frame_bytes;
                    memset(&f, 0, sizeof f);
                    f.id = r->id;
                    f.data_len = body;
                    if (!r->started && !r->planned) {
                        tfrdv_tcp__resp_head(&f, r);
                        if (tfrdv_tcp__sh_plan(t, c, r, &f)) { body = 0; r->plan_off = left; } /* SAME HOST */
                    } else {
                        f.type = TFRDV_TCP_DATA;
                    }
                    hl = tfrdv_tcp_encode(&f, 0, 0);
                    if (gused + hl > sizeof c->gbuf) break;
                    tfrdv_tcp_encode(&f, c->gbuf + gused, hl);
                    plan[np].r = r;
                    plan[np].hdr = c->gbuf + gused;
                    plan[np].hlen = hl;
                    plan[np].blen = (size_t)body;
                    iov[ni].iov_base = c->gbuf + gused;
                    iov[ni++].iov_len = hl;
                    if (body) { iov[ni].iov_base = (uint8_t*)r->value->data + off; iov[ni++].iov_len = (size_t)body; }
                    gused += hl;
                    total += hl + (size_t)body;
                    r->plan_off += body;
                    r->planned = 1;
                    np++;
                    progress = 1;
                    if (np >= TFRDV_TCP__IOV) break;
                }
                if (np >= TFRDV_TCP__IOV) break;
            }
        }
        if (!ni) {
            if (c->wblocked) { c->wblocked = 0; tfrdv_tcp__arm(t, c); }
            if (c->ocap > TFRDV_TCP__OBUF_KEEP && c->olen == 0) { tfrdv_tcp__free(t, c->obuf, c->ocap); c->obuf = 0; c->ocap = 0; }
            return;
        }
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)ni;
        tfrdv_tcp__shm_cmsg(c, &mh, cbuf, sizeof cbuf); /* SAME HOST RING: its descriptors */
        n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        t->stats.sendmsg_calls++;
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (!c->stalled_since) c->stalled_since = tfrdv_tcp__now();
                if (!c->wblocked) { c->wblocked = 1; tfrdv_tcp__arm(t, c); }
                return;
            }
            tfrdv_tcp__broken(t, c);
            return;
        }
        /* account the bytes written against the plan */
        if (mh.msg_controllen) tfrdv_tcp__shm_sent(c);
        tfrdv_tcp__shm_sock(c); /* SAME HOST RING: a client asleep on its futex looks */
        w = (size_t)n;
        c->stalled_since = 0;
        for (i = 0; i < np; i++) {
            tfrdv_tcp__plan* p = &plan[i];
            size_t h = w < p->hlen ? w : p->hlen, b;
            w -= h;
            b = w < p->blen ? w : p->blen;
            w -= b;
            if (!p->r) { /* control bytes */
                c->ooff += h;
                if (c->ooff == c->olen) { c->ooff = c->olen = 0; c->wpart = 0; c->sfr += c->oframes; c->oframes = 0; }
                else { c->wpart = 1; break; }
                continue;
            }
            r = p->r;
            r->sent += b;
            c->ring_bytes -= b;
            t->stats.bytes_sent += b;
            if (c->wpart == 2 && r == c->cur && i == 0) {
                c->choff += h;
                c->cbody -= b;
            } else {
                if (!r->started) r->started = 1;
                if (h < p->hlen || b < p->blen) {
                    memcpy(c->chdr, p->hdr, p->hlen);
                    c->chlen = p->hlen;
                    c->choff = h;
                    c->cbody = p->blen - b;
                    c->cur = r;
                    c->wpart = 2;
                }
            }
            if (c->wpart == 2 && r == c->cur && (c->choff < c->chlen || c->cbody)) break; /* mid-frame */
            if (c->wpart == 2 && r == c->cur) { c->wpart = 0; c->cur = 0; }
            /* a whole frame went out */
            c->sfr++; /* SAME HOST RING */
            if (r->sh_remote) tfrdv_tcp__sh_sent(t, c, r); /* SAME HOST: its bytes went by address */
            if (r->sent == r->total) tfrdv_tcp__resp_written(t, c, r, td);
            else if (r->cancelled) { /* stopped between frames: tell the client, value goes back */
                tfrdv_tcp__queue_error(t, c, r->id, TFRDV_CANCELLED, 0, "tfrdv_tcp: response cancelled by the client");
                tfrdv_tcp__resp_leave(t, r, td, 0);
            }
        }
        if ((size_t)n < total || (size_t)n >= budget) { /* socket full, or our share used */
            if ((size_t)n < total) c->stalled_since = tfrdv_tcp__now();
            if (!c->wblocked) { c->wblocked = 1; tfrdv_tcp__arm(t, c); }
            return;
        }
        budget -= (size_t)n;
    }
}

/* what a thread other than c's reader queued on c: written now, or, while the event loop reads
   c, by the loop at the end of that pass (tfrdv_tcp__conn_event), so the requests and answers
   produced meanwhile (by its callbacks and serves, or by other threads) share one sendmsg */
TFRDV_TCP__PRIVATE void tfrdv_tcp__write_soon(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
    if (c->claimed != TFRDV_TCP__BY_LOOP) tfrdv_tcp__write(t, c, td);
}

/* >>after unlocking -------------------------------------------------------------------------- */
/* conn_bad's last words (no lock; the thread that reads c runs it, so c is not freed meanwhile,
   and the response in progress still holds its value): the rest of the frame in progress, then
   the CLOSE, waiting for the socket at most TFRDV_TCP__LINGER_NS in all; then the socket closes */
TFRDV_TCP__PRIVATE void tfrdv_tcp__linger(tfrdv_tcp__conn* c) {
    int64_t end = tfrdv_tcp__add(tfrdv_tcp__now(), TFRDV_TCP__LINGER_NS);
    struct iovec* iv = c->liov;
    int niv = c->lniov;
    uint8_t sink[4096];
    while (niv > 0) {
        struct msghdr mh;
        ssize_t n;
        size_t w;
        if (!iv->iov_len) { iv++; niv--; continue; }
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = iv;
        mh.msg_iovlen = (size_t)niv;
        n = sendmsg(c->lfd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            struct pollfd pf;
            int64_t left = end - tfrdv_tcp__now();
            if (errno == EINTR) continue;
            if ((errno != EAGAIN && errno != EWOULDBLOCK) || left <= 0) break;
            pf.fd = c->lfd;
            pf.events = POLLOUT;
            pf.revents = 0;
            (void)poll(&pf, 1, tfrdv_tcp__ms(left));
            continue;
        }
        for (w = (size_t)n; niv > 0 && w >= iv->iov_len; iv++, niv--) w -= iv->iov_len;
        if (niv > 0) { iv->iov_base = (uint8_t*)iv->iov_base + w; iv->iov_len -= w; }
    }
    (void)shutdown(c->lfd, SHUT_WR);
    while (recv(c->lfd, sink, sizeof sink, MSG_DONTWAIT) > 0) {} /* unread input would make close reset */
    close(c->lfd);
    c->lfd = -1;
    c->lniov = 0;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__todo_init(tfrdv_tcp__todo* td) {
    td->fin = 0;
    td->back = td->done = td->cancel = 0;
    td->linger = 0;
    td->lent = 0;
    td->st.code = TFRDV_OK;
    td->st.detail = 0;
    td->st.msg[0] = 0;
    td->log[0] = 0;
    td->log_level = 0;
}
/* a served value that could not be delivered goes back to the serving manager's table */
TFRDV_TCP__PRIVATE void tfrdv_tcp__give_back(tfrdv_tcp* t, tfrdv_tcp__req* r) {
    tfrdv_status st;
    if (t->mgr) {
        if (tfrdv_mgr_serve_return(t->mgr, r->step_id, r->key, r->key_len, r->request_id, &r->send_args, r->value,
                                   r->is_dead, &st) != TFRDV_OK)
            tfrdv_tcp__log(t, 1, "tfrdv_tcp: an undelivered value of step %lld was released: %s", (long long)r->step_id, st.msg);
    } else {
        tfrdv_value_release(r->value);
    }
    r->value = 0;
    pthread_mutex_lock(&t->mu); /* counted once it is back (a reader of the stats finds it there) */
    t->stats.values_returned++;
    pthread_mutex_unlock(&t->mu);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__lent_drop(tfrdv_tcp* t, struct tfrdv_tcp__lent* l);
TFRDV_TCP__PRIVATE void tfrdv_tcp__todo_run(tfrdv_tcp* t, tfrdv_tcp__todo* td) {
    tfrdv_tcp__ent *e, *enx;
    tfrdv_tcp__req *r, *rnx, *dead = 0;
    if (td->linger) tfrdv_tcp__linger(td->linger); /* before the value in progress goes back */
    if (td->log[0]) tfrdv_tcp__log(t, td->log_level, "%s", td->log);
    for (r = td->cancel; r; r = r->cnext) tfrdv_cancel_start(r->cm); /* pinned: refs > 0 */
    if (td->lent) tfrdv_tcp__lent_drop(t, td->lent); /* ZERO COPY */
    for (e = td->fin; e; e = e->tnext) {
        if (e->value) { tfrdv_value_release(e->value); e->value = 0; }
        if (e->call) {
            if (e->fmsg) tfrdv_call_finish(e->call, e->fcode, e->fmsg, 0, 0);
            else tfrdv_call_finish_status(e->call, &td->st, 0, 0, 0);
            e->call = 0;
        }
    }
    for (r = td->done; r; r = rnx) {
        rnx = r->tnext;
        if (t->mgr && (r->value || r->is_dead)) tfrdv_mgr_serve_delivered(t->mgr, r->request_id); /* drains */
        tfrdv_value_release(r->value);
        r->value = 0;
        r->tnext = dead;
        dead = r;
    }
    for (r = td->back; r; r = rnx) {
        rnx = r->tnext;
        tfrdv_tcp__give_back(t, r);
        r->tnext = dead;
        dead = r;
    }
    if (!td->fin && !dead && !td->cancel) return;
    pthread_mutex_lock(&t->mu);
    for (e = td->fin; e; e = enx) { enx = e->tnext; tfrdv_tcp__ent_free(t, e); }
    for (r = dead; r; r = rnx) { rnx = r->tnext; tfrdv_tcp__req_unref(t, r); }
    for (r = td->cancel; r; r = rnx) { rnx = r->cnext; tfrdv_tcp__req_unref(t, r); }
    pthread_mutex_unlock(&t->mu);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__todo_fin(tfrdv_tcp__todo* td, tfrdv_tcp__ent* e, tfrdv_code code, const char* msg) {
    e->fcode = code;
    e->fmsg = msg;
    e->tnext = td->fin;
    td->fin = e;
}

/* >>connections (under t->mu) ---------------------------------------------------------------- */
TFRDV_TCP__PRIVATE tfrdv_tcp__conn* tfrdv_tcp__conn_new(tfrdv_tcp* t, int fd, int server, int is_unix) {
    tfrdv_tcp__conn* c = (tfrdv_tcp__conn*)tfrdv_tcp__alloc(t, sizeof *c);
    if (!c) return 0;
    memset(c, 0, sizeof *c);
    c->rcap = server ? TFRDV_TCP__RBUF : TFRDV_TCP__RBUF_CLIENT;
    if (c->rcap < 64 + t->lim.max_key_len) c->rcap = 64 + t->lim.max_key_len;
    if (c->rcap < 64 + (size_t)t->lim.max_message_len) c->rcap = 64 + (size_t)t->lim.max_message_len;
    if (c->rcap < TFRDV_TCP_META_MAX + 64) c->rcap = TFRDV_TCP_META_MAX + 64;
    c->rbuf = (uint8_t*)tfrdv_tcp__alloc(t, c->rcap);
    if (!c->rbuf) { tfrdv_tcp__free(t, c, sizeof *c); return 0; }
    c->t = t;
    c->fd = fd;
    c->cwake[0] = c->cwake[1] = -1;
    c->spin.gap = 16;
    c->lfd = -1;
    c->server = server;
    c->is_unix = is_unix;
    c->serial = ++t->next_serial;
    c->calls.prev = c->calls.next = &c->calls;
    c->serving.prev = c->serving.next = &c->serving;
    c->ring.prev = c->ring.next = &c->ring;
    c->held.prev = c->held.next = &c->held;
    c->peer_version = TFRDV_TCP_PROTOCOL_VERSION; /* until its HELLO says otherwise */
    c->prev = t->conns.prev;
    c->next = &t->conns;
    t->conns.prev->next = c;
    t->conns.prev = c;
    t->nconns++;
    if (server) t->nserver_conns++;
    return c;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__queue_hello(tfrdv_tcp* t, tfrdv_tcp__conn* c) {
    tfrdv_tcp_frame f;
    const char* name = t->mgr ? tfrdv_mgr_worker_name(t->mgr) : "";
    size_t n = strlen(name);
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_HELLO;
    f.version = TFRDV_TCP_PROTOCOL_VERSION;
    f.incarnation = t->mgr ? tfrdv_mgr_incarnation(t->mgr) : 0;
    f.name.ptr = name;
    f.name.len = n > TFRDV_TCP_NAME_MAX ? TFRDV_TCP_NAME_MAX : n;
    (void)tfrdv_tcp__queue(t, c, &f);
}
/* the peer's HELLO name for a message: escaped (the peer chose its bytes), or dflt before one */
TFRDV_TCP__PRIVATE const char* tfrdv_tcp__peer_label(const tfrdv_tcp__conn* c, char* buf, size_t cap, const char* dflt) {
    if (!c->peer_name_len) return dflt;
    (void)tfrdv_escape(buf, cap, c->peer_name, c->peer_name_len);
    return buf;
}
/* a client connection whose HELLO named another worker than the one a call fetches from (w) */
TFRDV_TCP__PRIVATE int tfrdv_tcp__impostor(const tfrdv_tcp__conn* c, tfrdv_str w) {
    return c->peer && c->hello_ok && (c->peer_name_len != w.len || memcmp(c->peer_name, w.ptr, w.len) != 0);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__impostor_msg(const tfrdv_tcp__conn* c, tfrdv_str w, char* msg, size_t cap) {
    char pn[100], wn[100];
    (void)tfrdv_escape(wn, sizeof wn, w.ptr, w.len);
    if (!c->peer_name_len)
        snprintf(msg, cap, "tfrdv_tcp: %.80s answered as no worker (nothing attached to serve), not %s", c->peer->addr, wn);
    else
        snprintf(msg, cap, "tfrdv_tcp: %.80s answered as worker %s, not %s", c->peer->addr,
                 tfrdv_tcp__peer_label(c, pn, sizeof pn, ""), wn);
}
/* The connection is gone: its calls fail with (code, msg), its served requests are withdrawn and
   their values go back. Socket closed now; memory freed at the end of the poll round. */
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_conn_end(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE int tfrdv_tcp__reads_it(tfrdv_tcp* t, const tfrdv_tcp__conn* c);
#define TFRDV_TCP__ORPHAN "the TCP connection it was offered on ended first"
TFRDV_TCP__PRIVATE void tfrdv_tcp__conn_fail(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_code code, const char* msg,
                                             tfrdv_tcp__todo* td) {
    tfrdv_tcp__req* r;
    if (c->state == TFRDV_TCP__C_DEAD) return;
    if (c->up_side == 1) { /* SAME HOST: a side connection that never took over (it has no calls):
                              its peer stays on TCP, said once per transport */
        char m[sizeof td->log];
        if (tfrdv_tcp__up_fallback(t, c->peer, msg, m, sizeof m)) {
            if (!td->log[0]) {
                snprintf(td->log, sizeof td->log, "%s", m);
                td->log_level = 1;
            } else {
                t->up_clogged = 0; /* the todo says something else: the next fallback says it */
            }
        }
    } else if (c->up_side != 3 && td->st.code == TFRDV_OK) {
        tfrdv_tcp__err(&td->st, code, "%s", msg);
    }
    c->state = TFRDV_TCP__C_DEAD;
    if (c->peer && c->peer->up_pend) { /* SAME HOST: a side connection set up from this TCP connection's
                                          offer goes with it (it may have been closed as malformed) */
        tfrdv_tcp__conn* s = c->peer->up_pend;
        if (s == c || c->up_asked != 2) {
            if (s == c) c->peer->up_pend = 0;
        } else {
            c->peer->up_pend = 0;
            if (s->state != TFRDV_TCP__C_DEAD && s->up_side == 1) {
                if (s->claimed && !tfrdv_tcp__reads_it(t, s)) s->up_orphan = 1; /* read by another
                                          thread (the loop) now: closed by it when it lets go */
                else tfrdv_tcp__conn_fail(t, s, TFRDV_UNAVAILABLE, TFRDV_TCP__ORPHAN, td);
            }
        }
    }
    if (c->fd >= 0) {
#ifdef TFRDV_TCP__EPOLL
        if (c->in_epoll) (void)epoll_ctl(t->efd, EPOLL_CTL_DEL, c->fd, 0);
#endif
        close(c->fd);
        c->fd = -1;
    }
    tfrdv_tcp__shm_stop(t, c); /* SAME HOST RING */
    tfrdv_tcp__zc_conn_end(t, c, td); /* ZERO COPY */
    if (c->peer && c->peer->conn == c) c->peer->conn = 0;
    while (c->calls.next != &c->calls) {
        tfrdv_tcp__ent* e = c->calls.next;
        tfrdv_tcp__ent_remove(t, e);
        e->conn = 0;
        if (e->call) t->stats.calls_failed++;
        tfrdv_tcp__todo_fin(td, e, code, 0);
    }
    while ((r = c->serving.next) != &c->serving) { /* waiting for their serve: withdraw */
        tfrdv_tcp__req_unlink(t, r);
        r->conn = 0;
        r->cancelled = 1;
        r->refs++;
        r->cnext = td->cancel;
        td->cancel = r;
    }
    while ((r = c->ring.next) != &c->ring) tfrdv_tcp__resp_leave(t, r, td, 0);
    while ((r = c->held.next) != &c->held) { /* delivery never acknowledged: back to the table */
        tfrdv_tcp__req_unlink(t, r);
        t->stats.serve_ok--;
        r->tnext = td->back;
        td->back = r;
    }
    c->cur = 0;
    c->wpart = 0;
    c->prev->next = c->next;
    c->next->prev = c->prev;
    t->nconns--;
    if (c->server) t->nserver_conns--;
    c->dnext = t->dead;
    t->dead = c;
#ifndef TFRDV_TCP__EPOLL
    tfrdv_tcp__wake(t);
#endif
}
/* protocol error: tell the peer why, fail the connection */
TFRDV_TCP__PRIVATE void tfrdv_tcp__conn_bad(tfrdv_tcp* t, tfrdv_tcp__conn* c, const char* why, tfrdv_tcp__todo* td) {
    tfrdv_tcp_frame f;
    char msg[TFRDV_STATUS_MSG_MAX], label[128];
    size_t n = strlen(why);
    t->stats.protocol_errors++;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_CLOSE;
    f.code = TFRDV_INVALID_ARGUMENT;
    f.message.ptr = why;
    f.message.len = n > t->lim.max_message_len ? t->lim.max_message_len : n;
    if (f.message.len > sizeof c->gbuf - 64) f.message.len = sizeof c->gbuf - 64;
    if (c->fd >= 0 && c->state == TFRDV_TCP__C_OPEN) {
        /* the frame in progress first (a CLOSE inside it would be read as its bytes), then the
           CLOSE: written by tfrdv_tcp__linger after unlocking, on a dup of the socket (conn_fail
           closes this one), waiting for the socket a short bounded time */
        size_t len = tfrdv_tcp_encode(&f, c->gbuf, sizeof c->gbuf);
        int k = 0;
        if (c->wpart == 2 && c->cur && c->cur->value) {
            c->liov[k].iov_base = c->chdr + c->choff;
            c->liov[k++].iov_len = c->chlen - c->choff;
            c->liov[k].iov_base = (uint8_t*)c->cur->value->data + c->cur->sent;
            c->liov[k++].iov_len = (size_t)c->cbody;
        } else if (c->wpart == 1) {
            c->liov[k].iov_base = c->obuf + c->ooff;
            c->liov[k++].iov_len = c->olen - c->ooff;
        }
        c->liov[k].iov_base = c->gbuf;
        c->liov[k++].iov_len = len <= sizeof c->gbuf ? len : 0;
        c->lniov = k;
#ifdef F_DUPFD_CLOEXEC
        c->lfd = td->linger ? -1 : fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
#else
        if ((c->lfd = td->linger ? -1 : dup(c->fd)) >= 0) tfrdv_tcp__cloexec_nonblock(c->lfd);
#endif
        if (c->lfd >= 0) {
            td->linger = c;
        } else { /* no descriptor to spare: best effort now, whole frame or nothing */
            if (c->wpart == 0 && len <= sizeof c->gbuf) (void)send(c->fd, c->gbuf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)shutdown(c->fd, SHUT_WR);
        }
    }
    snprintf(msg, sizeof msg, "tfrdv_tcp: connection %s %.80s closed: %.120s", c->server ? "from" : "to",
             c->peer ? c->peer->addr : tfrdv_tcp__peer_label(c, label, sizeof label, "a client"), why);
    snprintf(td->log, sizeof td->log, "%s", msg);
    td->log_level = 2;
    tfrdv_tcp__conn_fail(t, c, TFRDV_UNAVAILABLE, msg, td);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__conn_gone(tfrdv_tcp* t, tfrdv_tcp__conn* c, const char* why, tfrdv_tcp__todo* td) {
    char msg[TFRDV_STATUS_MSG_MAX], label[128];
    if (c->peer) snprintf(msg, sizeof msg, "tfrdv_tcp: connection to %.80s (%.60s) lost: %.80s", c->peer->addr, tfrdv_tcp__peer_label(c, label, sizeof label, "peer"), why);
    else snprintf(msg, sizeof msg, "tfrdv_tcp: connection from %.80s lost: %.120s", tfrdv_tcp__peer_label(c, label, sizeof label, "a client"), why);
    tfrdv_tcp__conn_fail(t, c, TFRDV_UNAVAILABLE, msg, td);
}
/* e waits for p to accept a connection (its REQUEST goes out on the next one: unpark) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__park(tfrdv_tcp__peer* p, tfrdv_tcp__ent* e) {
    e->conn = 0;
    e->prev = p->parked.prev;
    e->next = &p->parked;
    p->parked.prev->next = e;
    p->parked.prev = e;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__connect_failed(tfrdv_tcp* t, tfrdv_tcp__conn* c, const char* why, tfrdv_tcp__todo* td) {
    tfrdv_tcp__peer* p = c->peer;
    char msg[TFRDV_STATUS_MSG_MAX];
    if (c->up_side) { /* SAME HOST: the side socket of a TCP upgrade; the peer's TCP connection stays */
        snprintf(msg, sizeof msg, "the side socket's connection failed: %s", why);
        tfrdv_tcp__conn_fail(t, c, TFRDV_UNAVAILABLE, msg, td);
        return;
    }
    t->stats.connect_failures++;
    if (p) {
        int64_t b = t->cfg.backoff_ns;
        if (b > 0) {
            p->backoff = p->backoff ? tfrdv_tcp__add(p->backoff, p->backoff) : b;
            if (p->backoff > t->cfg.backoff_max_ns) p->backoff = t->cfg.backoff_max_ns;
            p->retry_at = tfrdv_tcp__add(tfrdv_tcp__now(), p->backoff);
        }
        snprintf(p->err, sizeof p->err, "%s", why);
    }
    snprintf(msg, sizeof msg, "tfrdv_tcp: connect to %s failed: %s", p ? p->addr : "?", why);
    if (p && t->cfg.connect_retry_ns > 0 && !t->closing) { /* the peer is not up yet: its calls wait
                                                             for the next attempt (connect_retry_ns) */
        int64_t now = tfrdv_tcp__now();
        tfrdv_tcp__ent *e, *enx;
        for (e = c->calls.next; e != &c->calls; e = enx) {
            enx = e->next;
            if (!e->call || e->state != TFRDV_TCP__E_WAIT || e->park_until <= now) continue;
            e->prev->next = e->next;
            e->next->prev = e->prev;
            tfrdv_tcp__park(p, e);
        }
    }
    tfrdv_tcp__conn_fail(t, c, TFRDV_UNAVAILABLE, msg, td);
}

/* >>serving ---------------------------------------------------------------------------------- */
/* A serve completed (any thread, no lock held). */
TFRDV_TCP__PRIVATE void tfrdv_tcp__serve_done(void* user, const tfrdv_status* status, const tfrdv_args* send_args,
                                              tfrdv_value* value, int is_dead) {
    tfrdv_tcp__req* r = (tfrdv_tcp__req*)user;
    tfrdv_tcp* t = r->t;
    tfrdv_tcp__conn* c;
    tfrdv_tcp__todo td;
    tfrdv_tcp__todo_init(&td);
    pthread_mutex_lock(&t->mu);
    c = r->conn;
    if (c && r->in_list) tfrdv_tcp__req_unlink(t, r); /* out of the serving list (and table) */
    if (status->code != TFRDV_OK) {
        if (r->expired) t->stats.serve_expired++;
        else if (r->cancelled || status->code == TFRDV_CANCELLED) t->stats.serve_cancelled++;
        else t->stats.serve_failed++;
        if (c && !r->cancelled) {
            if (r->expired)
                tfrdv_tcp__queue_error(t, c, r->id, TFRDV_DEADLINE_EXCEEDED, 0, "tfrdv_tcp: the request's deadline passed on the serving side");
            else
                tfrdv_tcp__queue_error(t, c, r->id, status->code, status->detail, status->msg);
            if (!c->wblocked) tfrdv_tcp__write_soon(t, c, &td);
        }
        tfrdv_value_release(value); /* NULL on errors, by contract */
        r->value = 0;
        r->tnext = td.done; /* nothing to release: just freed after the todo */
        td.done = r;
    } else {
        r->value = value;
        r->is_dead = is_dead;
        r->send_args = *send_args;
        r->send_args.key.ptr = 0;
        r->send_args.key.len = 0;
        r->total = value ? value->size : 0;
        if (!c || r->cancelled || r->expired || (value && value->size > t->lim.max_tensor_bytes) ||
            (value && value->size && !value->data)) {
            if (c && !r->cancelled) {
                if (r->expired) tfrdv_tcp__queue_error(t, c, r->id, TFRDV_DEADLINE_EXCEEDED, 0, "tfrdv_tcp: the request's deadline passed on the serving side");
                else tfrdv_tcp__queue_error(t, c, r->id, TFRDV_RESOURCE_EXHAUSTED, 0, "tfrdv_tcp: value larger than max_tensor_bytes of the serving side");
                if (!c->wblocked) tfrdv_tcp__write_soon(t, c, &td);
            }
            if (r->cancelled) t->stats.serve_cancelled++;
            r->tnext = td.back;
            td.back = r;
        } else {
            r->state = TFRDV_TCP__R_QUEUED;
            t->nqueued++;
            c->ring_bytes += r->total;
            tfrdv_tcp__req_insert(t, r);
            tfrdv_tcp__list_add(&c->ring, r);
            if (!c->wblocked) tfrdv_tcp__write_soon(t, c, &td);
        }
    }
    pthread_mutex_unlock(&t->mu);
    tfrdv_tcp__todo_run(t, &td);
    pthread_mutex_lock(&t->mu);
    if (--t->serving_count == 0 && t->closing) pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* >>receive side (the polling thread) -------------------------------------------------------- */
TFRDV_TCP__PRIVATE void tfrdv_tcp__on_request(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f, tfrdv_tcp__todo* td) {
    tfrdv_tcp__req* r;
    tfrdv_mgr* mgr;
    pthread_mutex_lock(&t->mu);
    if (tfrdv_tcp__req_find(t, c, f->id)) {
        char why[96];
        snprintf(why, sizeof why, "REQUEST id %llu is already in flight on this connection", (unsigned long long)f->id);
        tfrdv_tcp__conn_bad(t, c, why, td);
        pthread_mutex_unlock(&t->mu);
        return;
    }
    t->stats.served++;
    if (c->olen - c->ooff > ((size_t)8 << 20)) { /* answers pile up: the peer does not read them */
        tfrdv_tcp__conn_bad(t, c, "the peer does not read its responses (8 MiB of answers queued)", td);
        pthread_mutex_unlock(&t->mu);
        return;
    }
    if (!t->mgr || t->closing) {
        tfrdv_tcp__queue_error(t, c, f->id, TFRDV_UNAVAILABLE, 0, "tfrdv_tcp: the serving worker is shutting down");
        if (!c->wblocked) tfrdv_tcp__write(t, c, td);
        pthread_mutex_unlock(&t->mu);
        return;
    }
    if (c->nserving >= (size_t)t->cfg.max_requests_per_connection || t->serving_count >= (size_t)t->cfg.max_requests ||
        !(r = tfrdv_tcp__req_new(t, f->key.len))) {
        t->stats.requests_rejected++;
        tfrdv_tcp__queue_error(t, c, f->id, TFRDV_RESOURCE_EXHAUSTED,
                               0, c->nserving >= (size_t)t->cfg.max_requests_per_connection
                                      ? "tfrdv_tcp: too many requests in flight on this connection (max_requests_per_connection)"
                                      : "tfrdv_tcp: too many requests in flight (max_requests) or out of memory");
        if (!c->wblocked) tfrdv_tcp__write(t, c, td);
        pthread_mutex_unlock(&t->mu);
        return;
    }
    r->conn = c;
    r->id = f->id;
    r->step_id = f->step_id;
    r->request_id = f->request_id;
    r->key_len = f->key.len;
    if (f->key.len) memcpy(r->key, f->key.ptr, f->key.len);
    r->state = TFRDV_TCP__R_SERVING;
    r->deadline = f->deadline_ns ? tfrdv_tcp__add(tfrdv_tcp__now(), f->deadline_ns) : INT64_MAX; /* >= 0 (decode) */
    if (r->deadline < t->req_min_deadline) t->req_min_deadline = r->deadline;
    tfrdv_tcp__req_insert(t, r);
    tfrdv_tcp__list_add(&c->serving, r);
    c->nserving++;
    t->serving_count++;
    mgr = t->mgr;
    pthread_mutex_unlock(&t->mu);
    (void)tfrdv_mgr_serve_ex(mgr, r->step_id, r->key, r->key_len, r->request_id, TFRDV_SERVE_CONFIRMS, r->cm,
                             tfrdv_tcp__serve_done, r);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__on_cancel(tfrdv_tcp* t, tfrdv_tcp__conn* c, uint64_t id, tfrdv_tcp__todo* td) {
    tfrdv_tcp__req* r;
    pthread_mutex_lock(&t->mu);
    r = tfrdv_tcp__req_find(t, c, id);
    if (r && !r->cancelled) {
        r->cancelled = 1;
        if (r->state == TFRDV_TCP__R_SERVING) { /* withdraw: done comes with CANCELLED (or a value to give back) */
            r->refs++;
            r->cnext = td->cancel;
            td->cancel = r;
        } else if (r->state == TFRDV_TCP__R_HELD) { /* written, and the client refuses it: its
                                                       call had finished (the CANCEL crossed it) */
            tfrdv_tcp__held_leave(t, r, td, 0);
        } else if (!(c->wpart == 2 && c->cur == r)) { /* queued, between frames: stop now */
            if (r->started) tfrdv_tcp__queue_error(t, c, r->id, TFRDV_CANCELLED, 0, "tfrdv_tcp: response cancelled by the client");
            t->stats.serve_cancelled++;
            tfrdv_tcp__resp_leave(t, r, td, 0);
        } /* else: the writer stops after the frame in progress */
    }
    pthread_mutex_unlock(&t->mu);
}
/* the client acknowledges deliveries: their values are released. An id that is not held here (never
   answered, already acknowledged or refused, still being sent) is ignored: it cannot free a value
   before its response is whole on the wire. */
TFRDV_TCP__PRIVATE void tfrdv_tcp__on_ack(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f, tfrdv_tcp__todo* td) {
    uint32_t i;
    pthread_mutex_lock(&t->mu);
    for (i = 0; i < f->num_acks; i++) {
        tfrdv_tcp__req* r = tfrdv_tcp__req_find(t, c, tfrdv_tcp__ld64(f->ack_bytes + 8 * (size_t)i));
        if (r && r->state == TFRDV_TCP__R_HELD) tfrdv_tcp__held_leave(t, r, td, 1);
    }
    pthread_mutex_unlock(&t->mu);
}
/* a RESPONSE header for a call of ours: allocate its memory (outside the lock) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__ent_complete(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__ent* e, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_release_id(tfrdv_tcp* t, tfrdv_tcp__conn* c, uint64_t id);
TFRDV_TCP__PRIVATE tfrdv_value* tfrdv_tcp__zc_value(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f, tfrdv_call* call,
                                                    const char** fail, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE void tfrdv_tcp__on_response(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp_frame* f, tfrdv_tcp__todo* td) {
    tfrdv_tcp__ent* e;
    tfrdv_call* call;
    tfrdv_value* v = 0;
    const char* fail = 0;
    pthread_mutex_lock(&t->mu);
    e = tfrdv_tcp__ent_find(t, f->id);
    if (f->pooled && (!e || e->conn != c || e->state != TFRDV_TCP__E_WAIT))
        tfrdv_tcp__zc_release_id(t, c, f->id); /* ZERO COPY: not mapped, let go at once */
    if (!e || e->conn != c) {
        if (f->id > t->next_id || f->id == 0) { tfrdv_tcp__conn_bad(t, c, "RESPONSE for an id never requested", td); pthread_mutex_unlock(&t->mu); return; }
        pthread_mutex_unlock(&t->mu);
        c->rx = TFRDV_TCP__RX_SKIP; /* a call that was cancelled or expired: drop its bytes */
        c->rleft = f->data_len;
        c->rent = 0;
        return;
    }
    if (e->state != TFRDV_TCP__E_WAIT) { tfrdv_tcp__conn_bad(t, c, "second RESPONSE for one request", td); pthread_mutex_unlock(&t->mu); return; }
    if (f->bytes > t->lim.max_tensor_bytes) { tfrdv_tcp__conn_bad(t, c, "RESPONSE larger than max_tensor_bytes", td); pthread_mutex_unlock(&t->mu); return; }
    e->state = TFRDV_TCP__E_ALLOC;
    call = e->call;
    pthread_mutex_unlock(&t->mu);
    if (f->pooled) { /* ZERO COPY: a mapping of the sender's pool (or a copy from it) */
        v = tfrdv_tcp__zc_value(t, c, f, call, &fail, td);
        if (c->state == TFRDV_TCP__C_DEAD) { tfrdv_value_release(v); return; } /* hostile: closed */
    } else if (!f->no_value) {
        v = tfrdv_call_alloc_value(call, f->dtype, f->rank, f->dims, f->bytes);
        if (!v) fail = "tfrdv_tcp: the receiver's allocator gave no memory for the value";
        else if (v->size < f->bytes || (f->bytes && !v->data)) {
            fail = "tfrdv_tcp: the receiver's allocator gave less memory than the value needs";
            tfrdv_value_release(v);
            v = 0;
        }
    }
    pthread_mutex_lock(&t->mu);
    if (fail || e->cancelled) { /* drop this response's bytes; finish now */
        tfrdv_tcp__ent_remove(t, e);
        if (fail) t->stats.calls_failed++;
        else t->stats.calls_cancelled++;
        e->value = v;
        tfrdv_tcp__todo_fin(td, e, fail ? TFRDV_RESOURCE_EXHAUSTED : TFRDV_CANCELLED, fail ? fail : "tfrdv_tcp: call cancelled");
        { /* not delivered: the serving side stops sending, or gives the value back */
            tfrdv_tcp_frame cf;
            memset(&cf, 0, sizeof cf);
            cf.type = TFRDV_TCP_CANCEL;
            cf.id = f->id;
            (void)tfrdv_tcp__queue(t, c, &cf);
            if (!c->wblocked) tfrdv_tcp__write(t, c, td);
        }
        pthread_mutex_unlock(&t->mu);
        c->rx = TFRDV_TCP__RX_SKIP;
        c->rleft = f->data_len;
        c->rent = 0;
        return;
    }
    e->state = TFRDV_TCP__E_RECV;
    e->value = v;
    e->got = 0;
    e->total = f->bytes;
    e->dead = f->is_dead;
    pthread_mutex_unlock(&t->mu);
    if (f->remote) { tfrdv_tcp__sh_read(t, c, e, f, td); return; } /* SAME HOST */
    if (f->pooled) { e->got = e->total; tfrdv_tcp__ent_complete(t, c, e, td); return; } /* ZERO COPY */
    c->rx = TFRDV_TCP__RX_DATA;
    c->rent = e;
    c->rleft = f->data_len;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__cancel_frame(tfrdv_tcp* t, tfrdv_tcp__conn* c, uint64_t id, tfrdv_tcp__todo* td);
/* the last byte of a value arrived on c (or it had none): delivered, the server is told so (ACK,
   with the next frame or tick); not delivered (its receive had given up meanwhile), it is
   refused (CANCEL) and the server gives the value back to its table */
TFRDV_TCP__PRIVATE void tfrdv_tcp__ent_complete(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__ent* e, tfrdv_tcp__todo* td) {
    tfrdv_call* call;
    tfrdv_value* v;
    uint64_t id = e->id;
    int dead, refused = 1;
    pthread_mutex_lock(&t->mu);
    tfrdv_tcp__ent_remove(t, e);
    call = e->call;
    v = e->value;
    dead = e->dead;
    if (call) { t->stats.calls_ok++; t->stats.bytes_received += v ? v->size : 0; }
    e->call = 0;
    e->value = 0;
    tfrdv_tcp__ent_free(t, e);
    pthread_mutex_unlock(&t->mu);
    if (call) refused = tfrdv_call_finish_status(call, 0, v, dead, 1);
    if (refused) tfrdv_value_release(v); /* given up while the bytes came */
    pthread_mutex_lock(&t->mu);
    if (c->state == TFRDV_TCP__C_OPEN && c->peer_version >= 2) {
        if (refused && call) tfrdv_tcp__cancel_frame(t, c, id, td); /* (a call finished earlier
                                                               sent its CANCEL then) */
        else if (!refused) tfrdv_tcp__ack(t, c, id);
    }
    pthread_mutex_unlock(&t->mu);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__on_error(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f, tfrdv_tcp__todo* td) {
    tfrdv_tcp__ent* e;
    tfrdv_call* call;
    tfrdv_value* v;
    tfrdv_status st;
    pthread_mutex_lock(&t->mu);
    e = tfrdv_tcp__ent_find(t, f->id);
    if (!e || e->conn != c) {
        if (f->id > t->next_id || f->id == 0) tfrdv_tcp__conn_bad(t, c, "ERROR for an id never requested", td);
        pthread_mutex_unlock(&t->mu);
        return;
    }
    if (e->state == TFRDV_TCP__E_RECV && c->rent == e) c->rent = 0;
    tfrdv_tcp__ent_remove(t, e);
    call = e->call;
    if (call) t->stats.calls_failed++;
    v = e->value;
    e->value = 0;
    e->call = 0;
    tfrdv_tcp__ent_free(t, e);
    pthread_mutex_unlock(&t->mu);
    tfrdv_value_release(v);
    if (!call) return;
    st.code = (tfrdv_code)f->code;
    st.detail = f->detail == TFRDV_DETAIL_WORKER_RESTARTED ? f->detail : 0; /* only known details */
    (void)tfrdv_escape(st.msg, sizeof st.msg, f->message.ptr, f->message.len); /* the peer's bytes */
    tfrdv_call_finish_status(call, &st, 0, 0, 0);
}

TFRDV_TCP__PRIVATE void tfrdv_tcp__cancel_frame(tfrdv_tcp* t, tfrdv_tcp__conn* c, uint64_t id, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_on_release(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f);
TFRDV_TCP__PRIVATE int tfrdv_tcp__zc_ok(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE void tfrdv_tcp__on_frame(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp_frame* f, tfrdv_tcp__todo* td) {
    tfrdv_tcp__ent* e;
    __atomic_fetch_add(&t->frames_received, 1, __ATOMIC_RELAXED);
    if (!c->hello_ok) {
        size_t n;
        tfrdv_tcp__ent *bad = 0, *enx;
        if (f->type != TFRDV_TCP_HELLO) {
            pthread_mutex_lock(&t->mu);
            tfrdv_tcp__conn_bad(t, c, "the first frame is not a HELLO (not a tfrdv_tcp peer?)", td);
            pthread_mutex_unlock(&t->mu);
            return;
        }
        n = f->name.len;
        pthread_mutex_lock(&t->mu);
        memcpy(c->peer_name, f->name.ptr, n);
        c->peer_name[n] = 0;
        c->peer_name_len = n;
        c->peer_incarnation = f->incarnation;
        c->peer_version = f->version < TFRDV_TCP_PROTOCOL_VERSION ? f->version : TFRDV_TCP_PROTOCOL_VERSION;
        c->hello_ok = 1;
        if (t->hello_waiters) pthread_cond_broadcast(&t->cv); /* tfrdv_tcp__peer_inc */
        if (!c->side && c->up_side != 1) c->deadline = INT64_MAX; /* SAME HOST: the side socket's token (server)
                                                                    or its SAMEHOST answer (client) is due by then too */
        if (c->peer) { c->peer->backoff = 0; c->peer->retry_at = 0; }
        for (e = c->calls.next; c->peer && e != &c->calls; e = enx) { /* calls for another worker */
            enx = e->next;
            if (!e->call || !tfrdv_tcp__impostor(c, tfrdv_call_src_worker(e->call))) continue;
            tfrdv_tcp__ent_remove(t, e);
            t->stats.calls_failed++;
            tfrdv_tcp__cancel_frame(t, c, e->id, td);
            e->tnext = bad;
            bad = e;
        }
        pthread_mutex_unlock(&t->mu);
        if (!c->server) tfrdv_tcp__sh_hello(t, c, td); /* SAME HOST: ask for the by-address path */
        for (e = bad; e; e = e->tnext) {
            char msg[TFRDV_STATUS_MSG_MAX];
            tfrdv_tcp__impostor_msg(c, tfrdv_call_src_worker(e->call), msg, sizeof msg);
            tfrdv_call_finish(e->call, TFRDV_FAILED_PRECONDITION, msg, 0, 0);
            e->call = 0;
        }
        if (!bad) return;
        pthread_mutex_lock(&t->mu);
        for (e = bad; e; e = enx) { enx = e->tnext; tfrdv_tcp__ent_free(t, e); }
        pthread_mutex_unlock(&t->mu);
        return;
    }
    if (c->side && f->type != TFRDV_TCP_SAMEHOST) { /* SAME HOST: the side socket's token first */
        int gate;
        pthread_mutex_lock(&t->mu);
        gate = !c->side_ok;
        if (gate) {
            char why[120];
            snprintf(why, sizeof why, "a frame of type %d on the side socket before its token (SAMEHOST flag 128)", f->type);
            tfrdv_tcp__conn_bad(t, c, why, td);
        }
        pthread_mutex_unlock(&t->mu);
        if (gate) return;
    }
    switch (f->type) {
    case TFRDV_TCP_REQUEST:
        if (!c->server) break;
        tfrdv_tcp__on_request(t, c, f, td);
        return;
    case TFRDV_TCP_CANCEL:
        if (!c->server) break;
        tfrdv_tcp__on_cancel(t, c, f->id, td);
        return;
    case TFRDV_TCP_ACK:
        if (!c->server || c->peer_version < 2) break;
        tfrdv_tcp__on_ack(t, c, f, td);
        return;
    case TFRDV_TCP_RELEASE: /* ZERO COPY */
        if (!c->server || c->peer_version < 5) break;
        tfrdv_tcp__zc_on_release(t, c, f);
        return;
    case TFRDV_TCP_RESPONSE:
        if (c->server) break;
        if (f->remote && !tfrdv_tcp__sh_remote_ok(t, c, td)) return; /* SAME HOST */
        if (f->pooled && !tfrdv_tcp__zc_ok(t, c, td)) return; /* ZERO COPY */
        tfrdv_tcp__on_response(t, c, f, td);
        return;
    case TFRDV_TCP_SAMEHOST:
        tfrdv_tcp__sh_on_frame(t, c, f, td);
        return;
    case TFRDV_TCP_ERROR:
        if (c->server) break;
        tfrdv_tcp__on_error(t, c, f, td);
        return;
    case TFRDV_TCP_DATA:
        if (c->server) break;
        pthread_mutex_lock(&t->mu);
        e = tfrdv_tcp__ent_find(t, f->id);
        if (!e || e->conn != c) {
            if (f->id > t->next_id || f->id == 0) tfrdv_tcp__conn_bad(t, c, "DATA for an id never requested", td);
            pthread_mutex_unlock(&t->mu);
            c->rx = TFRDV_TCP__RX_SKIP;
            c->rleft = f->data_len;
            c->rent = 0;
            return;
        }
        if (e->state != TFRDV_TCP__E_RECV) tfrdv_tcp__conn_bad(t, c, "DATA before its RESPONSE", td);
        else if (f->data_len > e->total - e->got) tfrdv_tcp__conn_bad(t, c, "more DATA than the value's size", td);
        pthread_mutex_unlock(&t->mu);
        if (c->state == TFRDV_TCP__C_DEAD) return;
        c->rx = TFRDV_TCP__RX_DATA;
        c->rent = e;
        c->rleft = f->data_len;
        return;
    case TFRDV_TCP_CLOSE: {
        char why[TFRDV_STATUS_MSG_MAX], pm[200];
        (void)tfrdv_escape(pm, sizeof pm, f->message.ptr, f->message.len);
        snprintf(why, sizeof why, "the peer closed it: %s", pm);
        pthread_mutex_lock(&t->mu);
        tfrdv_tcp__conn_gone(t, c, why, td);
        pthread_mutex_unlock(&t->mu);
        return;
    }
    default: break; /* a second HELLO */
    }
    {
        char why[96];
        snprintf(why, sizeof why, "unexpected frame type %d on a %s connection", f->type, c->server ? "server" : "client");
        pthread_mutex_lock(&t->mu);
        tfrdv_tcp__conn_bad(t, c, why, td);
        pthread_mutex_unlock(&t->mu);
    }
}
/* the peer's socket reported an error or the end */
TFRDV_TCP__PRIVATE void tfrdv_tcp__read_failed(tfrdv_tcp* t, tfrdv_tcp__conn* c, ssize_t n, int err, tfrdv_tcp__todo* td) {
    char why[128];
    if (n == 0) snprintf(why, sizeof why, "closed by the peer%s", c->rx == TFRDV_TCP__RX_HDR && c->rlen > c->roff ? " in the middle of a frame" : (c->rx != TFRDV_TCP__RX_HDR ? " in the middle of a value" : ""));
    else snprintf(why, sizeof why, "%s", strerror(err));
    pthread_mutex_lock(&t->mu);
    if (c->state == TFRDV_TCP__C_CONNECTING || (!c->hello_ok && !c->server)) tfrdv_tcp__connect_failed(t, c, why, td);
    else tfrdv_tcp__conn_gone(t, c, why, td);
    pthread_mutex_unlock(&t->mu);
}
/* reads and handles frames until the socket has nothing more (or a read came back short) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__read(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
    int drained = 0, reads = 0;
    tfrdv_status st;
    for (;;) {
        ssize_t n;
        if (c->state == TFRDV_TCP__C_DEAD) return;
        if (reads >= 16) drained = 1; /* our share: other connections and the writes come next */
        if (c->rx != TFRDV_TCP__RX_HDR) {
            size_t have = c->rlen - c->roff;
            if (c->rleft && have) {
                size_t k = have < c->rleft ? have : (size_t)c->rleft;
                if (c->rx == TFRDV_TCP__RX_DATA && c->rent) {
                    memcpy((uint8_t*)c->rent->value->data + c->rent->got, c->rbuf + c->roff, k);
                    c->rent->got += k;
                }
                c->roff += k;
                c->rleft -= k;
            } else if (c->rleft) {
                if (drained) return;
                if (c->rx == TFRDV_TCP__RX_DATA && c->rent && c->rleft >= c->rcap / 2) {
                    /* straight into the destination, all that is left of the frame; what follows
                       (the next frame's header) lands in the read buffer in the same call */
                    struct iovec iv[2];
                    struct msghdr mh;
                    size_t want = c->rleft > ((size_t)1 << 30) ? ((size_t)1 << 30) : (size_t)c->rleft;
                    c->roff = c->rlen = 0;
                    iv[0].iov_base = (uint8_t*)c->rent->value->data + c->rent->got;
                    iv[0].iov_len = want;
                    iv[1].iov_base = c->rbuf;
                    iv[1].iov_len = c->rcap;
                    memset(&mh, 0, sizeof mh);
                    mh.msg_iov = iv;
                    mh.msg_iovlen = want == c->rleft ? 2 : 1;
                    n = recvmsg(c->fd, &mh, 0);
                    reads++;
                    __atomic_fetch_add(&t->recv_calls, 1, __ATOMIC_RELAXED);
                    if (n > 0) {
                        size_t d = (size_t)n < want ? (size_t)n : want;
                        c->rent->got += d;
                        c->rleft -= d;
                        c->rlen = (size_t)n - d;
                        if ((size_t)n < want + (mh.msg_iovlen == 2 ? iv[1].iov_len : 0)) drained = 1;
                    }
                } else { /* bytes to skip, or a small rest: through the read buffer, with the
                            frames that follow it (many small responses per recv) */
                    c->roff = c->rlen = 0;
                    n = recv(c->fd, c->rbuf, c->rcap, 0);
                    reads++;
                    __atomic_fetch_add(&t->recv_calls, 1, __ATOMIC_RELAXED);
                    if (n > 0) {
                        c->rlen = (size_t)n;
                        if ((size_t)n < c->rcap) drained = 1;
                    }
                }
                if (n <= 0) {
                    if (n < 0 && errno == EINTR) continue;
                    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
                    tfrdv_tcp__read_failed(t, c, n, errno, td);
                    return;
                }
            }
            if (c->rleft == 0) {
                tfrdv_tcp__ent* e = c->rent;
                c->rx = TFRDV_TCP__RX_HDR;
                c->rent = 0;
                if (e && e->got == e->total) tfrdv_tcp__ent_complete(t, c, e, td);
            }
            continue;
        } else {
            long used = c->rlen > c->roff ? tfrdv_tcp_decode(c->rbuf + c->roff, c->rlen - c->roff, &t->lim, &c->fr, &st) : 0;
            if (used < 0) {
                pthread_mutex_lock(&t->mu);
                tfrdv_tcp__conn_bad(t, c, st.msg + (strncmp(st.msg, "tfrdv_tcp: ", 11) == 0 ? 11 : 0), td);
                pthread_mutex_unlock(&t->mu);
                return;
            }
            if (used > 0) {
                c->roff += (size_t)used;
                if (tfrdv_tcp__shm_before(t, c, td)) /* SAME HOST RING: its frames sent before this one */
                    tfrdv_tcp__on_frame(t, c, &c->fr, td);
                continue;
            }
            if (drained) return;
            if (c->roff) {
                memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
                c->rlen -= c->roff;
                c->roff = 0;
            }
            n = tfrdv_tcp__recv(c, c->rbuf + c->rlen, c->rcap - c->rlen); /* recv (SAME HOST RING: descriptors) */
            reads++;
            __atomic_fetch_add(&t->recv_calls, 1, __ATOMIC_RELAXED);
            if (n <= 0) {
                if (n < 0 && errno == EINTR) continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
                tfrdv_tcp__read_failed(t, c, n, errno, td);
                return;
            }
            if ((size_t)n < c->rcap - c->rlen) drained = 1;
            c->rlen += (size_t)n;
        }
    }
}

/* >>SAME HOST -------------------------------------------------------------------------------- */
/* Values by address between processes of one host (see SAME HOST in the docs): the client asks
   after the server's HELLO (SAMEHOST flag 1) once SO_PEERCRED gave the server's pid and
   process_vm_readv is permitted on it; the server grants (flag 2) and then sends each response
   of at least sh_min bytes as (address, length); the client reads it into the call's memory.
   The hooks in the connection code: tfrdv_tcp__sh_hello (HELLO received), sh_on_frame,
   sh_remote_ok and sh_read (frames), sh_plan and sh_sent (tfrdv_tcp__write). */
#ifdef TFRDV_TCP__CMA
/* 0 if this process may read pid's memory (pid 's own: reads a byte; another: UCX's probe, a
   read at address NULL: the permission is checked first, so EFAULT means allowed), else errno */
TFRDV_TCP__PRIVATE int tfrdv_tcp__sh_probe(long pid) {
    char src = 1, dst = 0;
    struct iovec l, r;
    ssize_t n;
    int self = pid == (long)getpid();
    l.iov_base = &dst;
    l.iov_len = 1;
    r.iov_base = self ? &src : 0;
    r.iov_len = 1;
    n = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
    if (n == 1 && (!self || dst == 1)) return 0;
    if (n < 0 && errno == EFAULT && !self) return 0;
    return n < 0 ? errno : EIO;
}
/* Yama's ptrace_scope (-1: no Yama) */
TFRDV_TCP__PRIVATE int tfrdv_tcp__sh_yama(void) {
    FILE* f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int v = -1;
    if (!f) return -1;
    if (fscanf(f, "%d", &v) != 1) v = -1;
    fclose(f);
    return v;
}
/* The identity the same-host upgrade of a TCP connection compares (the client sends it, the
   server checks it against its own): the kernel's boot id and the network namespace (device and
   inode of /proc/self/ns/net, unique within one boot), written as "<boot id> net:<dev>:<ino>".
   Equal identities mean one kernel and one network namespace: each side can reach the other's
   abstract Unix names. The pid and user namespaces are left out on purpose: on a Unix socket
   SO_PEERCRED and the process_vm_readv probe already decide what crosses them (the ring needs
   neither). Returns 0, or -1 with why saying which file could not be read or was malformed. */
TFRDV_TCP__PRIVATE int tfrdv_tcp__sh_host_id(char* out, size_t cap, char* why, size_t wcap) {
    char boot[64];
    size_t n, i;
    struct stat sb;
    FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) {
        snprintf(why, wcap, "/proc/sys/kernel/random/boot_id: %s", strerror(errno));
        return -1;
    }
    n = fread(boot, 1, sizeof boot - 1, f);
    fclose(f);
    while (n > 0 && (boot[n - 1] == '\n' || boot[n - 1] == ' ')) n--;
    boot[n] = 0;
    for (i = 0; i < n; i++)
        if (!((boot[i] >= '0' && boot[i] <= '9') || (boot[i] >= 'a' && boot[i] <= 'f') || boot[i] == '-')) break;
    if (n != 36 || i != n) {
        snprintf(why, wcap, "/proc/sys/kernel/random/boot_id holds %u bytes, not a 36-character UUID", (unsigned)n);
        return -1;
    }
    if (stat("/proc/self/ns/net", &sb) != 0) {
        snprintf(why, wcap, "/proc/self/ns/net: %s", strerror(errno));
        return -1;
    }
    if ((size_t)snprintf(out, cap, "%s net:%llu:%llu", boot, (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino) >= cap) {
        snprintf(why, wcap, "host identity longer than %u bytes", (unsigned)cap);
        return -1;
    }
    return 0;
}
/* n random bytes from the kernel (getrandom, blocking only before the pool is seeded at boot);
   0, or -1 with why */
TFRDV_TCP__PRIVATE int tfrdv_tcp__sh_random(uint8_t* out, size_t n, char* why, size_t wcap) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = getrandom(out + got, n - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            snprintf(why, wcap, "getrandom of %u bytes failed: %s", (unsigned)n, k < 0 ? strerror(errno) : "no bytes");
            return -1;
        }
        got += (size_t)k;
    }
    return 0;
}
/* a new token into out, valid until now + ttl_ns: a free or expired slot, else the one closest
   to expiring is given up (its client's upgrade fails and it stays on TCP). 0, or -1 with why */
TFRDV_TCP__PRIVATE int tfrdv_tcp__sh_token_new(tfrdv_tcp__sh_tokens* k, int64_t now, int64_t ttl_ns, uint8_t* out, char* why, size_t wcap) {
    int i, s = 0;
    for (i = 0; i < TFRDV_TCP__SH_TOKENS; i++) {
        if (k->exp[i] <= now) { s = i; break; } /* free (0) or expired */
        if (k->exp[i] < k->exp[s]) s = i;
    }
    if (tfrdv_tcp__sh_random(out, TFRDV_TCP_SH_TOKEN_LEN, why, wcap) != 0) return -1;
    memcpy(k->tok[s], out, TFRDV_TCP_SH_TOKEN_LEN);
    k->exp[s] = ttl_ns > INT64_MAX - now ? INT64_MAX : now + ttl_ns;
    return 0;
}
/* a token a side-socket client presented (n bytes): 0 if it is one handed out, unused and not
   expired (its slot is freed: single use), else -1 with why. Every slot is compared in full
   (no early exit: the time taken says nothing about the bytes); expired slots are freed. */
TFRDV_TCP__PRIVATE int tfrdv_tcp__sh_token_take(tfrdv_tcp__sh_tokens* k, const uint8_t* given, size_t n, int64_t now, char* why, size_t wcap) {
    int i, hit = -1, late = 0;
    size_t j;
    if (n != TFRDV_TCP_SH_TOKEN_LEN) {
        snprintf(why, wcap, "a token of %u bytes (%d expected)", (unsigned)n, TFRDV_TCP_SH_TOKEN_LEN);
        return -1;
    }
    for (i = 0; i < TFRDV_TCP__SH_TOKENS; i++) {
        unsigned d = 0;
        for (j = 0; j < TFRDV_TCP_SH_TOKEN_LEN; j++) d |= (unsigned)(k->tok[i][j] ^ given[j]);
        if (k->exp[i] && d == 0) { if (k->exp[i] > now) hit = i; else late = 1; }
        if (k->exp[i] && k->exp[i] <= now) k->exp[i] = 0;
    }
    if (hit < 0) {
        snprintf(why, wcap, late ? "an expired token" : "a token this server did not hand out (or one already used)");
        return -1;
    }
    k->exp[hit] = 0;
    memset(k->tok[hit], 0, TFRDV_TCP_SH_TOKEN_LEN);
    return 0;
}
/* a side socket's address: "@tfrdv-<pid>-<16 hex digits, random>" (abstract namespace: no file,
   gone with the process). 0, or -1 with why */
TFRDV_TCP__PRIVATE int tfrdv_tcp__sh_side_name(char* out, size_t cap, char* why, size_t wcap) {
    uint8_t r[8];
    char hex[17];
    int i;
    if (tfrdv_tcp__sh_random(r, sizeof r, why, wcap) != 0) return -1;
    for (i = 0; i < 8; i++) {
        hex[2 * i] = "0123456789abcdef"[r[i] >> 4];
        hex[2 * i + 1] = "0123456789abcdef"[r[i] & 15];
    }
    hex[16] = 0;
    if ((size_t)snprintf(out, cap, "@tfrdv-%ld-%s", (long)getpid(), hex) >= cap) {
        snprintf(why, wcap, "side address longer than %u bytes", (unsigned)cap);
        return -1;
    }
    return 0;
}
#endif
#ifdef TFRDV_TCP__UPGRADE
/* server (under t->mu): the side listener, made at the first offer: an abstract Unix socket
   "@tfrdv-<pid>-<random hex>" (no file; another network namespace cannot reach it). 0, or -1
   with why */
TFRDV_TCP__PRIVATE int tfrdv_tcp__up_listen(tfrdv_tcp* t, char* why, size_t wcap) {
    struct sockaddr_un un;
    size_t n;
    int fd;
    if (t->sfd >= 0) { tfrdv_tcp__lsock_arm(t, &t->sfd, &t->sarmed, 1); return 0; }
    if (tfrdv_tcp__sh_side_name(t->saddr, sizeof t->saddr, why, wcap) != 0) return -1;
    n = strlen(t->saddr);
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    memcpy(un.sun_path + 1, t->saddr + 1, n - 1); /* '@': the leading NUL */
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr*)&un, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) != 0 || listen(fd, SOMAXCONN) != 0) {
        snprintf(why, wcap, "the side socket %s: %s failed: %s", t->saddr, fd < 0 ? "socket" : "bind or listen", strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    t->sfd = fd;
    tfrdv_tcp__lsock_arm(t, &t->sfd, &t->sarmed, 1);
    return 0;
}
#endif
/* server (under t->mu): a TCP client asked to move to a side Unix socket (SAMEHOST flag 32 with
   its host identity): offer the side address and a one-time token (flag 64) when it is on this
   kernel and network namespace and this side allows it, else refuse (flags 0; why logged once
   per transport) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__up_offer(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f, tfrdv_tcp__todo* td, char* msg, size_t mcap) {
    char why[300];
    uint8_t body[TFRDV_TCP_SH_TOKEN_LEN + TFRDV_TCP_SH_ADDR_MAX];
    tfrdv_tcp_frame g;
    int ok = 0;
    why[0] = 0;
    memset(&g, 0, sizeof g);
    if (!t->sh_min) snprintf(why, sizeof why, "same_host is TFRDV_OFF here");
    else if (t->up_deny) snprintf(why, sizeof why, "TFRDV_TCP_UPGRADE_DENY=1 is set here");
    else {
#ifdef TFRDV_TCP__UPGRADE
        char me[160];
        if (tfrdv_tcp__sh_host_id(me, sizeof me, why, sizeof why) != 0) {
        } else if (strlen(me) != f->message.len || memcmp(me, f->message.ptr, f->message.len) != 0)
            snprintf(why, sizeof why, "the client is on another kernel or network namespace (its host identity, %u bytes, differs from this one's)", (unsigned)f->message.len);
        else if (tfrdv_tcp__up_listen(t, why, sizeof why) == 0 &&
                 tfrdv_tcp__sh_token_new(&t->stoks, tfrdv_tcp__now(), 10000000000LL, body, why, sizeof why) == 0) {
            size_t n = strlen(t->saddr);
            memcpy(body + TFRDV_TCP_SH_TOKEN_LEN, t->saddr, n);
            g.message.ptr = (const char*)body;
            g.message.len = TFRDV_TCP_SH_TOKEN_LEN + n;
            ok = 1;
        }
#else
        (void)f;
        (void)body;
        snprintf(why, sizeof why, "the side socket is not available in this build (Linux, epoll, _GNU_SOURCE)");
#endif
    }
    g.type = TFRDV_TCP_SAMEHOST;
    g.sh_flags = ok ? TFRDV_TCP_SH_TCP_OFFER : 0u;
    (void)tfrdv_tcp__queue(t, c, &g);
    if (!c->wblocked) tfrdv_tcp__write(t, c, td);
    if (!ok && !t->up_logged) {
        char label[128];
        t->up_logged = 1;
        snprintf(msg, mcap, "tfrdv_tcp: refused to move the TCP connection %s to a Unix socket: %s (said once per transport)",
                 tfrdv_tcp__peer_label(c, label, sizeof label, "of a client"), why);
    }
}
/* server (under t->mu): the token a side-socket client presented (SAMEHOST flag 128) */
TFRDV_TCP__PRIVATE int tfrdv_tcp__up_take(tfrdv_tcp* t, const tfrdv_tcp_frame* f, char* why, size_t wcap) {
#ifdef TFRDV_TCP__UPGRADE
    return tfrdv_tcp__sh_token_take(&t->stoks, (const uint8_t*)f->message.ptr, f->message.len, tfrdv_tcp__now(), why, wcap);
#else
    (void)t; (void)f;
    snprintf(why, wcap, "a token, but this build has no side socket");
    return -1;
#endif
}
/* client (under t->mu): the TCP upgrade of p did not happen (why); its calls stay on TCP. Says
   why once per transport (into msg, logged by the caller unlocked; 0 if not this time); p makes
   no new attempt for 60 s */
TFRDV_TCP__PRIVATE int tfrdv_tcp__up_fallback(tfrdv_tcp* t, tfrdv_tcp__peer* p, const char* why, char* msg, size_t mcap) {
    if (p) p->up_next = tfrdv_tcp__add(tfrdv_tcp__now(), 60000000000LL);
    if (t->up_clogged || t->closing) return 0;
    t->up_clogged = 1;
    snprintf(msg, mcap, "tfrdv_tcp: calls to %.80s stay on TCP, not a same-host Unix socket: %.300s (said once per transport)",
             p ? p->addr : "?", why);
    return 1;
}
/* client, after the server's HELLO on a TCP connection (no lock held): ask to move to a side
   Unix socket (SAMEHOST flag 32 with this host's identity) when the server speaks version 5 and
   nothing here rules it out; at most one attempt per peer per 10 s (see SAME HOST) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__up_ask(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
    char why[300], msg[500], me[160];
    int ok = 0, say = 0;
    tfrdv_tcp__peer* p = c->peer;
    int64_t now = tfrdv_tcp__now(), next;
    why[0] = msg[0] = me[0] = 0;
    if (!p) return;
    pthread_mutex_lock(&t->mu);
    next = p->up_next;
    pthread_mutex_unlock(&t->mu);
    if (next > now) return; /* tried lately (a failure, or a side connection that died) */
    if (c->peer_version < 5) snprintf(why, sizeof why, "the server speaks protocol version %d (the upgrade needs 5)", c->peer_version);
    else if (!t->sh_min) snprintf(why, sizeof why, "same_host is TFRDV_OFF here");
    else if (t->up_deny) snprintf(why, sizeof why, "TFRDV_TCP_UPGRADE_DENY=1 is set here");
    else {
#ifdef TFRDV_TCP__UPGRADE
        ok = tfrdv_tcp__sh_host_id(me, sizeof me, why, sizeof why) == 0;
#else
        snprintf(why, sizeof why, "the side socket is not available in this build (Linux, epoll, _GNU_SOURCE)");
#endif
    }
    pthread_mutex_lock(&t->mu);
    if (ok && c->state == TFRDV_TCP__C_OPEN) {
        tfrdv_tcp_frame f;
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_SAMEHOST;
        f.sh_flags = TFRDV_TCP_SH_TCP_ASK;
        f.message.ptr = me;
        f.message.len = strlen(me);
        c->up_asked = 1;
        p->up_next = tfrdv_tcp__add(now, 10000000000LL);
        (void)tfrdv_tcp__queue(t, c, &f);
        if (!c->wblocked) tfrdv_tcp__write(t, c, td);
    } else if (!ok) {
        say = tfrdv_tcp__up_fallback(t, p, why, msg, sizeof msg);
    }
    pthread_mutex_unlock(&t->mu);
    if (say) tfrdv_tcp__log(t, 1, "%s", msg);
}
/* client (under t->mu): the server of TCP connection c offered its side socket (f: flag 64, a
   token then the address): dial it (non-blocking, in the loop like any dial) and send HELLO and
   the token; the Unix SAMEHOST exchange follows its HELLO (tfrdv_tcp__sh_hello). Any failure
   keeps the calls on c. Returns 1 when msg holds a line to log */
TFRDV_TCP__PRIVATE int tfrdv_tcp__up_dial(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f, tfrdv_tcp__todo* td, char* msg, size_t mcap) {
    char why[400], esc[4 * TFRDV_TCP_SH_ADDR_MAX + 8];
    const char* at = f->message.ptr + TFRDV_TCP_SH_TOKEN_LEN;
    size_t n = f->message.len - TFRDV_TCP_SH_TOKEN_LEN, i; /* the codec checked 18..124 bytes */
#ifdef TFRDV_TCP__UPGRADE
    struct sockaddr_un un;
    tfrdv_tcp__conn* s;
    tfrdv_tcp_frame g;
    tfrdv_status keep;
    int fd, rc;
#endif
    (void)tfrdv_escape(esc, sizeof esc, at, n);
    for (i = 1; i < n && at[i] > 32 && at[i] < 127; i++) {}
    if (n < 8 || memcmp(at, "@tfrdv-", 7) != 0 || i != n) { /* only a tfrdv side socket: a server
                                                            must not point this process at another
                                                            local service's abstract socket */
        snprintf(why, sizeof why, "the server offered the side address %.200s (\"@tfrdv-...\" of printable bytes expected)", esc);
        return tfrdv_tcp__up_fallback(t, c->peer, why, msg, mcap);
    }
#ifdef TFRDV_TCP__UPGRADE
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    memcpy(un.sun_path + 1, at + 1, n - 1); /* '@': the abstract namespace's leading NUL */
    if ((fd = tfrdv_tcp__socket(AF_UNIX)) < 0) {
        snprintf(why, sizeof why, "socket for the side address %.200s: %s", esc, strerror(errno));
        return tfrdv_tcp__up_fallback(t, c->peer, why, msg, mcap);
    }
    tfrdv_tcp__sockopts(t, fd, 1);
    if (!(s = tfrdv_tcp__conn_new(t, fd, 0, 1))) {
        close(fd);
        return tfrdv_tcp__up_fallback(t, c->peer, "out of memory", msg, mcap);
    }
    s->peer = c->peer;
    s->up_side = 1; /* not the peer's connection yet: no call goes on it, none is parked for it */
    c->peer->up_pend = s;
    s->deadline = tfrdv_tcp__add(tfrdv_tcp__now(), t->cfg.connect_timeout_ns);
    do rc = connect(fd, (struct sockaddr*)&un, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n));
    while (rc < 0 && errno == EINTR);
    if (rc < 0 && errno != EINPROGRESS) {
        int e = errno;
        snprintf(why, sizeof why, "connect to the side address %.200s failed: %s", esc, strerror(e));
        keep = td->st;
        s->up_side = 3; /* conn_fail: said here */
        tfrdv_tcp__conn_fail(t, s, TFRDV_UNAVAILABLE, why, td);
        td->st = keep;
        return tfrdv_tcp__up_fallback(t, c->peer, why, msg, mcap);
    }
    s->state = rc == 0 ? TFRDV_TCP__C_OPEN : TFRDV_TCP__C_CONNECTING;
    tfrdv_tcp__queue_hello(t, s);
    memset(&g, 0, sizeof g);
    g.type = TFRDV_TCP_SAMEHOST;
    g.sh_flags = TFRDV_TCP_SH_TCP_TOKEN;
    g.message.ptr = f->message.ptr;
    g.message.len = TFRDV_TCP_SH_TOKEN_LEN;
    (void)tfrdv_tcp__queue(t, s, &g);
    tfrdv_tcp__arm(t, s);
    if (s->state == TFRDV_TCP__C_OPEN && !s->wblocked) tfrdv_tcp__write(t, s, td);
    return 0;
#else
    (void)td;
    snprintf(why, sizeof why, "the side socket is not available in this build (Linux, epoll, _GNU_SOURCE)");
    return tfrdv_tcp__up_fallback(t, c->peer, why, msg, mcap);
#endif
}
/* client (under t->mu): TCP connection c no longer takes new calls (its peer's side connection
   does): once its last call completed and its acknowledgements went out, it is shut down for
   writing; the server reads them, then the end, and closes; the end read here frees it. Closing
   earlier would give the values of those calls back to the server's table. */
TFRDV_TCP__PRIVATE void tfrdv_tcp__up_retire(tfrdv_tcp* t, tfrdv_tcp__conn* c) {
    (void)t;
    if (c->up_retire != 1 || c->state != TFRDV_TCP__C_OPEN || c->calls.next != &c->calls || c->nacks || tfrdv_tcp__zc_due(c) ||
        c->olen != c->ooff || c->cur || c->wpart || c->claimed)
        return;
    c->up_retire = 2;
    (void)shutdown(c->fd, SHUT_WR);
}
/* client (under t->mu): side connection s answered its SAMEHOST question: it becomes its peer's
   connection for new calls; the TCP connection it replaces finishes the calls it has, then goes
   (tfrdv_tcp__up_retire). Returns 1 when msg holds a line to log */
TFRDV_TCP__PRIVATE int tfrdv_tcp__up_switch(tfrdv_tcp* t, tfrdv_tcp__conn* s, tfrdv_tcp__todo* td, char* msg, size_t mcap) {
    tfrdv_tcp__peer* p = s->peer;
    tfrdv_tcp__conn* old = p->conn;
    if (s->up_orphan) { /* its TCP connection ended while this thread read s: s goes, not the calls */
        tfrdv_tcp__conn_fail(t, s, TFRDV_UNAVAILABLE, TFRDV_TCP__ORPHAN, td);
        return 0;
    }
    if (old && old != s && old->hello_ok &&
        (old->peer_name_len != s->peer_name_len || memcmp(old->peer_name, s->peer_name, s->peer_name_len) != 0 ||
         old->peer_incarnation != s->peer_incarnation)) {
        s->up_side = 3;
        tfrdv_tcp__conn_bad(t, s, "the side socket answered as another worker (or incarnation) than the TCP connection", td);
        return tfrdv_tcp__up_fallback(t, p, "the side socket answered as another worker (or incarnation) than the TCP connection", msg, mcap);
    }
    s->up_side = 2;
    s->deadline = INT64_MAX; /* answered in time */
    if (p->up_pend == s) p->up_pend = 0;
    p->conn = s;
    t->stats.tcp_upgrades++;
    if (old && old != s) {
        old->up_retire = 1;
        tfrdv_tcp__up_retire(t, old);
    }
    tfrdv_tcp__unpark(t, p, s, td); /* calls that waited for a connection (the TCP one died) */
    if (!s->wblocked) tfrdv_tcp__write(t, s, td);
    return 0;
}
/* client, after the server's HELLO (no lock held): ask for the by-address path, or say once per
   transport why the socket carries every byte */
TFRDV_TCP__PRIVATE void tfrdv_tcp__sh_hello(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
    char why[200], msg[400], rwhy[200], rmsg[400];
    long pid = 0;
    int ok = 0, say = 0, ring = 0, rsay = 0;
    if (!c->is_unix) { /* TCP: to this host, it may move to a side Unix socket (the upgrade) */
        tfrdv_tcp__up_ask(t, c, td);
        return;
    }
    why[0] = rwhy[0] = 0;
    /* SAME HOST RING */
    if (c->peer_version < 4) snprintf(rwhy, sizeof rwhy, "protocol version %d on this connection (the ring needs 4)", c->peer_version);
    else if (!t->sh_min) snprintf(rwhy, sizeof rwhy, "same_host is off here");
    else if (t->shm_deny == 1) snprintf(rwhy, sizeof rwhy, "TFRDV_TCP_RING_DENY=1 is set");
    else {
#ifdef TFRDV_TCP__RING
        pthread_mutex_lock(&t->mu);
        ring = c->state == TFRDV_TCP__C_OPEN && tfrdv_tcp__shm_offer(t, c, rwhy, sizeof rwhy);
        pthread_mutex_unlock(&t->mu);
#else
        snprintf(rwhy, sizeof rwhy, "the ring is not available in this build (Linux, epoll, _GNU_SOURCE, memfd)");
#endif
    }
    if (c->peer_version < 3) snprintf(why, sizeof why, "the server speaks protocol version %d, same-host paths need 3", c->peer_version);
    else if (!t->sh_min) snprintf(why, sizeof why, "same_host is TFRDV_OFF");
    else {
#ifdef TFRDV_TCP__CMA
        struct ucred uc;
        socklen_t ul = sizeof uc;
        int err;
        memset(&uc, 0, sizeof uc);
        if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) != 0) snprintf(why, sizeof why, "SO_PEERCRED failed: %s", strerror(errno));
        else if (uc.pid <= 0) snprintf(why, sizeof why, "the server's pid is not visible here (another pid namespace)");
        else if (t->sh_deny) snprintf(why, sizeof why, "TFRDV_TCP_CMA_DENY is set: process_vm_readv taken as denied (EPERM)");
        else if ((err = tfrdv_tcp__sh_probe((long)getpid())) != 0) snprintf(why, sizeof why, "process_vm_readv on this process failed: %s (seccomp?)", strerror(err));
        else if ((err = tfrdv_tcp__sh_probe((long)uc.pid)) != 0) {
            int y = tfrdv_tcp__sh_yama();
            snprintf(why, sizeof why, "process_vm_readv on the server (pid %ld) is not permitted: %s (Yama ptrace_scope %d; a non-dumpable server or another uid also refuse it)",
                     (long)uc.pid, strerror(err), y);
        } else {
            ok = 1;
            pid = (long)uc.pid;
        }
#else
        snprintf(why, sizeof why, "process_vm_readv is not available in this build (Linux, _GNU_SOURCE)");
#endif
    }
    pthread_mutex_lock(&t->mu);
    if ((ok || ring) && c->state == TFRDV_TCP__C_OPEN) {
        tfrdv_tcp_frame f;
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_SAMEHOST;
        f.sh_flags = (ok ? TFRDV_TCP_SH_CMA_READ : 0u) | (ring ? TFRDV_TCP_SH_RING_OFFER | TFRDV_TCP_SH_RING_FUTEX : 0u);
        c->sh_pid = ok ? pid : 0;
        c->sh_asked = 1;
        c->sh_cma = ok;
        (void)tfrdv_tcp__queue(t, c, &f); /* the ring's descriptors ride on its sendmsg (or an earlier one) */
        if (!c->wblocked) tfrdv_tcp__write(t, c, td);
    } else if (c->up_side == 1 && c->state == TFRDV_TCP__C_OPEN) { /* SAME HOST: nothing to gain from
                                                                      the side socket: stay on TCP */
        char m[600];
        snprintf(m, sizeof m, "neither values by address (%.250s) nor the ring (%.250s) on the side socket", why, rwhy);
        tfrdv_tcp__conn_fail(t, c, TFRDV_UNAVAILABLE, m, td);
    }
    if (!ok && !t->sh_logged) {
        t->sh_logged = say = 1;
        snprintf(msg, sizeof msg, "tfrdv_tcp: values to %.80s travel over the socket: %s (said once per transport)", c->peer ? c->peer->addr : "?", why);
    }
    if (!ring && !t->shm_logged) {
        t->shm_logged = rsay = 1;
        snprintf(rmsg, sizeof rmsg, "tfrdv_tcp: small frames to %.80s travel over the socket, not a shared-memory ring: %s (said once per transport)",
                 c->peer ? c->peer->addr : "?", rwhy);
    }
    pthread_mutex_unlock(&t->mu);
    if (say) tfrdv_tcp__log(t, 1, "%s", msg);
    if (rsay) tfrdv_tcp__log(t, 1, "%s", rmsg);
}
/* a SAMEHOST frame: the server grants or refuses, the client learns the answer */
TFRDV_TCP__PRIVATE void tfrdv_tcp__sh_on_frame(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f, tfrdv_tcp__todo* td) {
    char bad[260], msg[400], rwhy[300], rmsg[500], umsg[600];
    int say = 0, rsay = 0;
    const uint32_t ask = TFRDV_TCP_SH_CMA_READ | TFRDV_TCP_SH_RING_OFFER | TFRDV_TCP_SH_RING_FUTEX;
    bad[0] = rwhy[0] = umsg[0] = 0;
    pthread_mutex_lock(&t->mu);
    if (c->server && !c->is_unix && c->peer_version >= 5 && !c->sh_seen && f->sh_flags == TFRDV_TCP_SH_TCP_ASK) {
        c->sh_seen = 1; /* a TCP client on this host? (the upgrade) */
        tfrdv_tcp__up_offer(t, c, f, td, umsg, sizeof umsg);
    } else if (c->side && !c->side_ok) { /* the side socket: its token, nothing else */
        char why[200];
        if (f->sh_flags != TFRDV_TCP_SH_TCP_TOKEN)
            snprintf(bad, sizeof bad, "SAMEHOST flags 0x%x on the side socket before its token (flag 128)", f->sh_flags);
        else if (tfrdv_tcp__up_take(t, f, why, sizeof why) != 0)
            snprintf(bad, sizeof bad, "the side socket's client presented %s", why);
        else { /* now a Unix connection like any other: SAMEHOST 1 / 4 may follow */
#ifdef TFRDV_TCP__CMA
            struct ucred uc;
            socklen_t ul = sizeof uc;
            memset(&uc, 0, sizeof uc);
            c->side_foreign = getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) != 0 || uc.uid != geteuid();
#endif
            c->side_ok = 1;
            t->stats.tcp_upgrades++;
        }
    } else if (!c->server && !c->is_unix && c->up_asked == 1) { /* the answer to the upgrade's question */
        c->up_asked = 2;
        if (f->sh_flags == TFRDV_TCP_SH_TCP_OFFER) (void)tfrdv_tcp__up_dial(t, c, f, td, umsg, sizeof umsg);
        else if (f->sh_flags == 0) (void)tfrdv_tcp__up_fallback(t, c->peer, "the server refused it (its log says why)", umsg, sizeof umsg);
        else snprintf(bad, sizeof bad, "SAMEHOST flags 0x%x answering the TCP upgrade (64 or 0 expected)", f->sh_flags);
    } else if (!c->is_unix) { /* TCP: the upgrade's question (to a server) and its answer, one each */
        if (c->server && c->sh_seen && f->sh_flags == TFRDV_TCP_SH_TCP_ASK)
            snprintf(bad, sizeof bad, "a second SAMEHOST upgrade question (flags 0x%x) on one TCP connection (a client asks once)", f->sh_flags);
        else if (c->server)
            snprintf(bad, sizeof bad, "SAMEHOST flags 0x%x on a TCP connection from a version %d client (only the upgrade question, flag 32, from version 5)",
                     f->sh_flags, c->peer_version);
        else if (c->up_asked == 2 && (f->sh_flags == TFRDV_TCP_SH_TCP_OFFER || f->sh_flags == 0))
            snprintf(bad, sizeof bad, "a second SAMEHOST upgrade offer (flags 0x%x) on one TCP connection (the server answered its question already)", f->sh_flags);
        else
            snprintf(bad, sizeof bad, "SAMEHOST flags 0x%x on a TCP connection %s", f->sh_flags,
                     c->up_asked ? "(only the upgrade's answer, 64 or 0)" : "that asked no upgrade question");
    } else if (c->peer_version < 3 || c->sh_seen)
        snprintf(bad, sizeof bad, "SAMEHOST frame %s", c->sh_seen ? "sent twice" : "from a peer that said version < 3");
    else if (c->server) {
        if (!f->sh_flags || (f->sh_flags & ~ask) || (c->peer_version < 4 && f->sh_flags != TFRDV_TCP_SH_CMA_READ) ||
            ((f->sh_flags & TFRDV_TCP_SH_RING_FUTEX) && !(f->sh_flags & TFRDV_TCP_SH_RING_OFFER)))
            snprintf(bad, sizeof bad, "SAMEHOST from a version %d client with flags 0x%x (1%s expected)", c->peer_version, f->sh_flags,
                     c->peer_version < 4 ? "" : ", 4, 5, 20 or 21");
        else {
            tfrdv_tcp_frame g;
            int ring = 0;
            c->sh_seen = 1;
            c->sh_send = (f->sh_flags & TFRDV_TCP_SH_CMA_READ) && t->sh_min && (long)getpid() == t->sh_lpid; /* a child
                                                                      forked after bind: its client reads the parent */
            if (f->sh_flags & TFRDV_TCP_SH_RING_OFFER) { /* SAME HOST RING */
                if (!t->sh_min) snprintf(rwhy, sizeof rwhy, "same_host is off here");
                else if (t->shm_deny == 1) snprintf(rwhy, sizeof rwhy, "TFRDV_TCP_RING_DENY=1 is set here");
                else if (c->side_foreign) /* an abstract socket has no file mode: the uid check is here */
                    snprintf(rwhy, sizeof rwhy, "it came through the side socket as another uid (a ring is shared with peers of this uid only)");
                else {
#ifdef TFRDV_TCP__RING
                    ring = tfrdv_tcp__shm_accept(t, c, rwhy, sizeof rwhy);
#else
                    snprintf(rwhy, sizeof rwhy, "the ring is not available in this build");
#endif
                }
                if (!ring && !t->shm_logged) {
                    char label[128];
                    t->shm_logged = rsay = 1;
                    snprintf(rmsg, sizeof rmsg, "tfrdv_tcp: refused the shared-memory ring %s: %s (said once per transport)",
                             tfrdv_tcp__peer_label(c, label, sizeof label, "of a client"), rwhy);
                }
            }
            while (c->nshm_in > 0) close(c->shm_in[--c->nshm_in]); /* descriptors not taken */
            memset(&g, 0, sizeof g);
            g.type = TFRDV_TCP_SAMEHOST;
            if (ring && (f->sh_flags & TFRDV_TCP_SH_RING_FUTEX)) c->shm->fx = 1; /* its lent threads sleep on a futex */
            g.sh_flags = (c->sh_send ? TFRDV_TCP_SH_CMA_GRANT : 0u) | (ring ? TFRDV_TCP_SH_RING_OK : 0u) |
                         (ring && c->shm->fx ? TFRDV_TCP_SH_RING_FUTEX : 0u);
            (void)tfrdv_tcp__queue(t, c, &g);
            if (!c->wblocked) tfrdv_tcp__write(t, c, td);
        }
    } else if (!c->sh_asked || (f->sh_flags & ~((c->sh_cma ? TFRDV_TCP_SH_CMA_GRANT : 0u) | (c->shm ? TFRDV_TCP_SH_RING_OK | TFRDV_TCP_SH_RING_FUTEX : 0u))) ||
               (f->sh_flags & (TFRDV_TCP_SH_RING_OK | TFRDV_TCP_SH_RING_FUTEX)) == TFRDV_TCP_SH_RING_FUTEX)
        snprintf(bad, sizeof bad, "SAMEHOST %s (flags 0x%x)", c->sh_asked ? "with flags not asked for" : "answer to no question", f->sh_flags);
    else if (c->up_side == 1 && !(f->sh_flags & TFRDV_TCP_SH_CMA_GRANT) && !(c->shm && (f->sh_flags & TFRDV_TCP_SH_RING_OK))) {
        char m[200]; /* SAME HOST: the side socket would carry nothing TCP does not: stay on TCP (conn_fail says why, once) */
        c->sh_seen = 1;
        snprintf(m, sizeof m, "the server granted neither values by address nor the ring on the side socket (asked for %s; its log says why)",
                 c->sh_cma && c->shm ? "both" : c->sh_cma ? "values by address" : "the ring");
        tfrdv_tcp__conn_fail(t, c, TFRDV_UNAVAILABLE, m, td);
    } else {
        c->sh_seen = 1;
        c->sh_read = (f->sh_flags & TFRDV_TCP_SH_CMA_GRANT) != 0;
        if (c->sh_read) t->stats.same_host_grants++;
        if (c->sh_cma && !c->sh_read && !t->sh_logged) {
            t->sh_logged = say = 1;
            snprintf(msg, sizeof msg, "tfrdv_tcp: values to %.80s travel over the socket: the server refused the same-host path (same_host off there, or not the process that bound the address) (said once per transport)", c->peer ? c->peer->addr : "?");
        }
        if (c->shm && (f->sh_flags & TFRDV_TCP_SH_RING_OK)) { /* SAME HOST RING: frames may go in */
            c->shm->tx_ok = 1;
            c->shm->fx = (f->sh_flags & TFRDV_TCP_SH_RING_FUTEX) != 0;
            t->stats.ring_connections++;
            if (!c->wblocked) tfrdv_tcp__write(t, c, td);
        } else if (c->shm) { /* no doorbell, nothing goes in (the memory stays until the
                                connection goes: this frame may have come through it) */
            tfrdv_tcp__shm_stop(t, c);
            if (!t->shm_logged) {
                t->shm_logged = rsay = 1;
                snprintf(rmsg, sizeof rmsg, "tfrdv_tcp: small frames to %.80s travel over the socket: the server refused the shared-memory ring (its log says why) (said once per transport)", c->peer ? c->peer->addr : "?");
            }
        }
        if (c->up_side == 1 && c->peer) (void)tfrdv_tcp__up_switch(t, c, td, umsg, sizeof umsg); /* SAME HOST: new calls take it */
    }
    if (bad[0]) tfrdv_tcp__conn_bad(t, c, bad, td);
    pthread_mutex_unlock(&t->mu);
    if (say) tfrdv_tcp__log(t, 1, "%s", msg);
    if (rsay) tfrdv_tcp__log(t, 1, "%s", rmsg);
    if (umsg[0]) tfrdv_tcp__log(t, 1, "%s", umsg);
}
/* a RESPONSE by address is only taken on a connection whose server granted it */
TFRDV_TCP__PRIVATE int tfrdv_tcp__sh_remote_ok(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
    int ok;
    pthread_mutex_lock(&t->mu);
    ok = c->sh_read;
    if (!ok) tfrdv_tcp__conn_bad(t, c, "RESPONSE by address on a connection that did not agree to it", td);
    pthread_mutex_unlock(&t->mu);
    return ok;
}
TFRDV_TCP__PRIVATE long tfrdv_tcp__cpus(void);
#ifdef TFRDV_TCP__CMA
/* SAME HOST: len bytes of a value by address at src in process pid, read into dst (a thread's part) */
typedef struct tfrdv_tcp__cma_part {
    long pid;
    uint8_t* dst;
    uint64_t src, len, got;
    int err; /* errno of the call that stopped short; 0 with got < len: a read of 0 bytes */
} tfrdv_tcp__cma_part;
TFRDV_TCP__PRIVATE void* tfrdv_tcp__cma_run(void* p) {
    tfrdv_tcp__cma_part* q = (tfrdv_tcp__cma_part*)p;
    while (q->got < q->len) {
        uint64_t left = q->len - q->got;
        size_t want = left > ((uint64_t)1 << 30) ? ((size_t)1 << 30) : (size_t)left;
        struct iovec l, r;
        ssize_t n;
        l.iov_base = q->dst + q->got;
        l.iov_len = want;
        r.iov_base = (void*)(uintptr_t)(q->src + q->got);
        r.iov_len = want;
        n = process_vm_readv((pid_t)q->pid, &l, 1, &r, 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { q->err = n < 0 ? errno : 0; break; }
        q->got += (uint64_t)n; /* short: the next call says why */
    }
    return 0;
}
#endif
/* client: the value of e lies in the server at f->remote_addr: read it into e's memory (at least
   f->bytes, checked by on_response), then complete e as if its last byte had come. Any failure
   closes the connection (its calls fail UNAVAILABLE naming the cause; the server's values go back).
   From TFRDV_TCP__CMA_SPLIT bytes, when this thread may run on two CPUs, a second thread (started
   for this value, joined before it completes) reads the second half at the same time: one
   thread's process_vm_readv of 64 MiB is 0.55-0.75x a memcpy on a 2-vCPU VM, two 0.9-1.5x. */
#define TFRDV_TCP__CMA_SPLIT ((uint64_t)8 << 20)
TFRDV_TCP__PRIVATE void tfrdv_tcp__sh_read(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__ent* e, const tfrdv_tcp_frame* f, tfrdv_tcp__todo* td) {
    uint64_t got = 0;
    int err = 0, gave_up;
    char why[200];
#ifdef TFRDV_TCP__CMA
    {
        tfrdv_tcp__cma_part a, b;
        pthread_t th;
        int split = 0;
        a.pid = c->sh_pid;
        a.dst = (uint8_t*)e->value->data;
        a.src = f->remote_addr;
        a.len = f->bytes;
        a.got = 0;
        a.err = 0;
        b = a;
        if (f->bytes >= TFRDV_TCP__CMA_SPLIT && tfrdv_tcp__cpus() >= 2) {
            a.len = (f->bytes / 2) & ~(uint64_t)4095; /* the halves meet on a page boundary */
            b.dst += a.len;
            b.src += a.len;
            b.len = f->bytes - a.len;
            split = pthread_create(&th, 0, tfrdv_tcp__cma_run, &b) == 0;
            if (!split) a.len = f->bytes; /* no thread: this one reads it all */
        }
        (void)tfrdv_tcp__cma_run(&a);
        if (split) (void)pthread_join(th, 0);
        got = a.got;
        err = a.err;
        if (split && a.got == a.len) { /* the bytes from the start that arrived */
            got += b.got;
            err = b.err;
        }
    }
#else
    err = ENOSYS;
#endif
    if (got == f->bytes) {
        pthread_mutex_lock(&t->mu);
        t->stats.values_cma++;
        pthread_mutex_unlock(&t->mu);
        e->got = e->total;
        tfrdv_tcp__ent_complete(t, c, e, td);
        return;
    }
    snprintf(why, sizeof why, "process_vm_readv of a %llu-byte value at 0x%llx in pid %ld failed after %llu bytes: %s",
             (unsigned long long)f->bytes, (unsigned long long)f->remote_addr, c->sh_pid, (unsigned long long)got,
             err ? strerror(err) : "short read");
    pthread_mutex_lock(&t->mu);
    gave_up = !e->call;
    if (!gave_up) tfrdv_tcp__conn_bad(t, c, why, td);
    pthread_mutex_unlock(&t->mu);
    /* its call gave up meanwhile (cancelled, timed out): its CANCEL went out, so the server may
       have taken the value back and freed it; nothing was wrong: drop the bytes */
    if (gave_up) tfrdv_tcp__ent_complete(t, c, e, td);
}
/* server (under t->mu, planning r's RESPONSE): by address? */
TFRDV_TCP__PRIVATE int tfrdv_tcp__zc_plan(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__req* r, tfrdv_tcp_frame* f);
TFRDV_TCP__PRIVATE int tfrdv_tcp__sh_plan(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__req* r, tfrdv_tcp_frame* f) {
    if (!c->sh_send || !r->value || !r->value->data || r->total < t->sh_min || r->sent) return 0;
    r->sh_remote = 1;
    f->data_len = 0;
    if (tfrdv_tcp__zc_plan(t, c, r, f)) return 1; /* ZERO COPY */
    f->remote = 1;
    f->remote_addr = (uint64_t)(uintptr_t)r->value->data;
    return 1;
}
/* server: the client copies a value sent by address after its RESPONSE went out, so its
   acknowledgement may come that much later: stall_timeout_ns counts from after the copy, taken
   at 64 MiB/s at least (1 s per 64 MiB; sanitizers and cold memory make it slow) */
TFRDV_TCP__PRIVATE int64_t tfrdv_tcp__sh_grace(const tfrdv_tcp__req* r) {
    return r->total > ((uint64_t)1 << 40) ? (int64_t)1 << 54 : (int64_t)(r->total * 15);
}
/* server (under t->mu): r's RESPONSE by address went out whole: its bytes count as written */
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_sent(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__req* r);
TFRDV_TCP__PRIVATE void tfrdv_tcp__sh_sent(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__req* r) {
    uint64_t left = r->total - r->sent;
    if (!left) return;
    c->ring_bytes -= left;
    t->stats.bytes_sent += left;
    r->sent = r->total;
    if (r->zc) { tfrdv_tcp__zc_sent(t, c, r); return; } /* ZERO COPY */
    t->stats.values_cma_sent++;
}

/* >>SAME HOST RING --------------------------------------------------------------------------- */
/* Small frames through shared memory (see SAME HOST RING in the docs). The client makes a sealed
   memfd holding two single-producer single-consumer rings (client -> server, server -> client)
   and three eventfds, and passes them with its SAMEHOST frame (SCM_RIGHTS); the server checks
   and maps them and answers RING_OK. Then tfrdv_tcp__write moves whole frames into the ring
   (shm_flush) while the socket has no frame half written, and the thread that reads the
   connection drains it (shm_drain: after socket events, on the doorbell, before each socket
   frame). Every index and length read from the mapping is checked against this side's own
   copies; records are copied out before they are decoded (the peer may rewrite them meanwhile).
   Layout (offsets in the memfd): ring d (0: client -> server, 1: server -> client) has its
   producer position at d*1024, its consumer position at d*1024+64, its sleep word at
   d*1024+128 (0 awake, 1 its loop sleeps, 2 a thread lent by tfrdv_recv sleeps, 3 one sleeps on a
   futex on this word: fx, SAMEHOST flag 16) and its bytes at 4096 + d*TFRDV_TCP__RING_BYTES; at
   1024+192 the server's count of its socket writes (fx: its client's futex sleeper looks at the
   socket when it moved). A record: u32 body length (1..TFRDV_TCP__RING_REC_MAX), u32
   zero, u64 socket frames written before it, then whole frames, padded to 8 bytes. */

TFRDV_TCP__PRIVATE size_t tfrdv_tcp__shm_pad(size_t n) { return (n + 7u) & ~(size_t)7u; }
#ifdef TFRDV_TCP__RING
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_in(tfrdv_tcp__shr* r, uint64_t pos, const void* src, size_t n) {
    size_t off = (size_t)(pos & (TFRDV_TCP__RING_BYTES - 1)), first = n < TFRDV_TCP__RING_BYTES - off ? n : TFRDV_TCP__RING_BYTES - off;
    memcpy(r->data + off, src, first);
    if (n > first) memcpy(r->data, (const uint8_t*)src + first, n - first);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_out(const tfrdv_tcp__shr* r, uint64_t pos, void* dst, size_t n) {
    size_t off = (size_t)(pos & (TFRDV_TCP__RING_BYTES - 1)), first = n < TFRDV_TCP__RING_BYTES - off ? n : TFRDV_TCP__RING_BYTES - off;
    memcpy(dst, r->data + off, first);
    if (n > first) memcpy((uint8_t*)dst + first, r->data, n - first);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_ring_at(tfrdv_tcp__shr* r, uint8_t* map, int d) {
    r->tail = (uint64_t*)(void*)(map + d * 1024);
    r->head = (uint64_t*)(void*)(map + d * 1024 + 64);
    r->wake = (uint32_t*)(void*)(map + d * 1024 + 128);
    r->data = map + 4096 + (size_t)d * TFRDV_TCP__RING_BYTES;
    r->pos = 0;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_close(int* fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}
TFRDV_TCP__PRIVATE tfrdv_tcp__shm* tfrdv_tcp__shm_new(tfrdv_tcp* t) {
    tfrdv_tcp__shm* s = (tfrdv_tcp__shm*)tfrdv_tcp__alloc(t, sizeof *s);
    if (!s) return 0;
    memset(s, 0, sizeof *s);
    s->map = (uint8_t*)MAP_FAILED;
    s->efd = s->peer_efd[0] = s->peer_efd[1] = -1;
    s->buf = (uint8_t*)tfrdv_tcp__alloc(t, TFRDV_TCP__RING_REC_MAX);
    if (!s->buf) { tfrdv_tcp__free(t, s, sizeof *s); return 0; }
    return s;
}
/* the doorbell in this process's epoll set: the pointer tagged with 1 says "ring of c" */
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_watch(tfrdv_tcp* t, tfrdv_tcp__conn* c, int fd) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | EPOLLET; /* each write is an edge: the counter is never read */
    ev.data.ptr = (void*)((uintptr_t)c + 1u);
    return epoll_ctl(t->efd, EPOLL_CTL_ADD, fd, &ev) == 0;
}
#endif
/* under t->mu, the reading thread (or the connection is dead): the ring goes */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_free(tfrdv_tcp* t, tfrdv_tcp__conn* c) {
    tfrdv_tcp__shm* s = c->shm;
    int i;
    for (i = 0; i < c->nshm_in; i++) close(c->shm_in[i]);
    c->nshm_in = 0;
    if (!s) return;
#ifdef TFRDV_TCP__RING
    if (s->efd >= 0) (void)epoll_ctl(t->efd, EPOLL_CTL_DEL, s->efd, 0);
    tfrdv_tcp__shm_close(&s->efd);
    tfrdv_tcp__shm_close(&s->peer_efd[0]);
    tfrdv_tcp__shm_close(&s->peer_efd[1]);
    if (s->nout) tfrdv_tcp__shm_close(&s->out[0]); /* the memfd, never passed */
    if (s->map != (uint8_t*)MAP_FAILED) munmap(s->map, TFRDV_TCP__RING_MAP);
#endif
    tfrdv_tcp__free(t, s->buf, TFRDV_TCP__RING_REC_MAX);
    tfrdv_tcp__free(t, s, sizeof *s);
    c->shm = 0;
}
/* conn_fail (under t->mu): no more doorbells; the mapping stays until the memory is freed (a
   reading thread may be inside it) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_stop(tfrdv_tcp* t, tfrdv_tcp__conn* c) {
    int i;
    for (i = 0; i < c->nshm_in; i++) close(c->shm_in[i]);
    c->nshm_in = 0;
    if (!c->shm) return;
    c->shm->tx_ok = 0;
#ifdef TFRDV_TCP__RING
    if (c->shm->efd >= 0) (void)epoll_ctl(t->efd, EPOLL_CTL_DEL, c->shm->efd, 0);
#else
    (void)t;
#endif
}
/* receive on a Unix server connection: descriptors a client passes are kept for its SAMEHOST
   frame (4 at most, then closed) */
TFRDV_TCP__PRIVATE ssize_t tfrdv_tcp__recv(tfrdv_tcp__conn* c, void* buf, size_t len) {
#ifdef TFRDV_TCP__RING
    if (c->server && c->is_unix) {
        union { struct cmsghdr h; char b[CMSG_SPACE(8 * sizeof(int))]; } cb;
        struct msghdr mh;
        struct iovec iv;
        struct cmsghdr* cm;
        ssize_t n;
        iv.iov_base = buf;
        iv.iov_len = len;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = &iv;
        mh.msg_iovlen = 1;
        mh.msg_control = cb.b;
        mh.msg_controllen = sizeof cb.b;
        n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0 || !mh.msg_controllen) return n;
        for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            size_t k, nfd;
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len < CMSG_LEN(0)) continue;
            nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (k = 0; k < nfd; k++) {
                int fd;
                memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int), sizeof fd);
                if (c->nshm_in < 4 && !c->sh_seen) c->shm_in[c->nshm_in++] = fd;
                else close(fd);
            }
        }
        return n;
    }
#endif
    return recv(c->fd, buf, len, 0);
}
/* client (under t->mu): the descriptors ride on the next sendmsg */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_cmsg(tfrdv_tcp__conn* c, struct msghdr* mh, void* cbuf, size_t cap) {
#ifdef TFRDV_TCP__RING
    struct cmsghdr* cm;
    if (!c->shm || !c->shm->nout || cap < CMSG_SPACE(4 * sizeof(int))) return;
    memset(cbuf, 0, cap);
    mh->msg_control = cbuf;
    mh->msg_controllen = CMSG_SPACE((size_t)c->shm->nout * sizeof(int));
    cm = CMSG_FIRSTHDR(mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN((size_t)c->shm->nout * sizeof(int));
    memcpy(CMSG_DATA(cm), c->shm->out, (size_t)c->shm->nout * sizeof(int));
#else
    (void)c; (void)mh; (void)cbuf; (void)cap;
#endif
}
/* ... they went: the memfd is the mapping's now */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_sent(tfrdv_tcp__conn* c) {
#ifdef TFRDV_TCP__RING
    if (!c->shm || !c->shm->nout) return;
    tfrdv_tcp__shm_close(&c->shm->out[0]);
    c->shm->nout = 0;
#else
    (void)c;
#endif
}

#ifdef TFRDV_TCP__RING
/* the futex of sleep word 3 (shared: two processes map it) */
#define TFRDV_TCP__FX_SLICE_NS 20000000 /* a futex sleep's longest: the peer's death shows on the socket */
TFRDV_TCP__PRIVATE void tfrdv_tcp__fx_wake(uint32_t* w) { (void)syscall(SYS_futex, w, FUTEX_WAKE, 1, (void*)0, (void*)0, 0); }
#endif
/* under t->mu, after bytes went on the socket of a server whose client sleeps on a futex (fx):
   counted in the mapping, then the sleeper woken (its next look at the count sees them) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_sock(tfrdv_tcp__conn* c) {
#ifdef TFRDV_TCP__RING
    tfrdv_tcp__shm* s = c->shm;
    uint32_t w = 3u;
    if (!s || !s->fx || !c->server || !s->tx_ok) return;
    __atomic_store_n(s->socks, ++s->nsock, __ATOMIC_SEQ_CST);
    __atomic_thread_fence(__ATOMIC_SEQ_CST); /* the count before the word (the sleeper: the word
                                               before the count) */
    if (__atomic_load_n(s->tx.wake, __ATOMIC_RELAXED) == 3u &&
        __atomic_compare_exchange_n(s->tx.wake, &w, 0u, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        tfrdv_tcp__fx_wake(s->tx.wake);
#else
    (void)c;
#endif
}
/* this process wakes the thread lent to c (an arm, a timer, shutdown): its eventfd, and its
   futex when it sleeps on one */
TFRDV_TCP__PRIVATE void tfrdv_tcp__wake_lent(tfrdv_tcp__conn* c) {
#ifdef TFRDV_TCP__RING
    uint32_t w = 3u;
    if (c->shm && c->shm->fx && !c->server) {
        __atomic_fetch_add(&c->shm->lwake, 1u, __ATOMIC_SEQ_CST);
        if (__atomic_compare_exchange_n(c->shm->rx.wake, &w, 0u, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
            tfrdv_tcp__fx_wake(c->shm->rx.wake);
    }
#endif
    tfrdv_tcp__wake_fd(c->cwake);
}
#ifdef TFRDV_TCP__RING
/* under t->mu: the peer's sleep word says whom to wake (0: nobody) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_bell(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
    tfrdv_tcp__shm* s = c->shm;
    uint32_t w;
    uint64_t one = 1;
    ssize_t n;
    char why[120];
    __atomic_thread_fence(__ATOMIC_SEQ_CST); /* the tail before the word (the consumer: the word
                                               before the tail) */
    if (!__atomic_load_n(s->tx.wake, __ATOMIC_RELAXED)) return;
    w = __atomic_exchange_n(s->tx.wake, 0u, __ATOMIC_SEQ_CST);
    if (!w) return;
    if (w == 3 && s->fx) { tfrdv_tcp__fx_wake(s->tx.wake); return; } /* its lent thread's futex */
    if (w > 2 || s->peer_efd[w - 1] < 0) {
        snprintf(why, sizeof why, "the peer's ring sleep word is %u (0..%d)", w, s->fx ? 3 : s->peer_efd[1] < 0 ? 1 : 2);
        tfrdv_tcp__conn_bad(t, c, why, td);
        return;
    }
    do n = write(s->peer_efd[w - 1], &one, sizeof one);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN) tfrdv_tcp__conn_bad(t, c, "the peer's ring doorbell is full (its eventfd counter at its maximum)", td);
}
#endif
/* under t->mu, from tfrdv_tcp__write: whole frames into the ring while no frame is half written
   on the socket: first every queued control frame (all or none: their order stays), then
   responses of at most TFRDV_TCP__RING_VALUE_MAX bytes not started; one record per call */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_flush(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
#ifdef TFRDV_TCP__RING
    tfrdv_tcp__shm* s = c->shm;
    uint64_t head, used, start, at;
    size_t room, len = 0, nfr = 0;
    uint8_t rh[16];
    tfrdv_tcp__wr w;
    tfrdv_tcp__req *r, *nx;
    if (!s->tx_ok || c->wpart) return;
    head = __atomic_load_n(s->tx.head, __ATOMIC_ACQUIRE);
    used = s->tx.pos - head;
    if (used > TFRDV_TCP__RING_BYTES || (used & 7u)) {
        char why[160];
        snprintf(why, sizeof why, "the peer's ring position %llu is not within the %u bytes before ours (%llu)",
                 (unsigned long long)head, TFRDV_TCP__RING_BYTES, (unsigned long long)s->tx.pos);
        tfrdv_tcp__conn_bad(t, c, why, td);
        return;
    }
    room = (size_t)(TFRDV_TCP__RING_BYTES - used);
    if (room < 32) return;
    room -= 16;
    if (room > TFRDV_TCP__RING_REC_MAX) room = TFRDV_TCP__RING_REC_MAX;
    start = s->tx.pos;
    at = start + 16;
    if (c->olen > c->ooff) {
        size_t n = c->olen - c->ooff;
        if (n > room) return; /* the socket takes them (and what follows them) */
        tfrdv_tcp__shm_in(&s->tx, at, c->obuf + c->ooff, n);
        at += n;
        len += n;
        nfr += c->oframes;
        c->oframes = 0;
        c->olen = c->ooff = 0;
    }
    for (r = c->ring.next; r != &c->ring; r = nx) {
        tfrdv_tcp_frame f;
        uint8_t hdr[TFRDV_TCP_META_MAX];
        size_t hl;
        nx = r->next;
        if (r->started || r->sent || r->cancelled || r == c->cur || r->total > TFRDV_TCP__RING_VALUE_MAX ||
            (c->sh_send && r->total >= t->sh_min) || (r->total && (!r->value || !r->value->data))) /* by address */
            continue;
        memset(&f, 0, sizeof f);
        tfrdv_tcp__resp_head(&f, r);
        f.id = r->id;
        f.data_len = r->total;
        hl = tfrdv_tcp_encode(&f, hdr, sizeof hdr);
        if (hl > sizeof hdr || len + hl + (size_t)r->total > room) break;
        tfrdv_tcp__shm_in(&s->tx, at, hdr, hl);
        if (r->total) tfrdv_tcp__shm_in(&s->tx, at + hl, r->value->data, (size_t)r->total);
        at += hl + r->total;
        len += hl + (size_t)r->total;
        nfr++;
        c->ring_bytes -= r->total;
        t->stats.bytes_sent += r->total;
        t->stats.values_ring_sent++;
        r->started = 1;
        r->sent = r->total;
        tfrdv_tcp__resp_written(t, c, r, td);
    }
    if (!len) return;
    w.buf = rh;
    w.cap = sizeof rh;
    w.len = 0;
    tfrdv_tcp__put(&w, len, 4);
    tfrdv_tcp__put(&w, 0, 4);
    tfrdv_tcp__put(&w, c->sfr, 8);
    tfrdv_tcp__shm_in(&s->tx, start, rh, sizeof rh);
    s->tx.pos = start + 16 + tfrdv_tcp__shm_pad(len);
    __atomic_store_n(s->tx.tail, s->tx.pos, __ATOMIC_RELEASE);
    t->stats.frames_ring_sent += nfr;
    tfrdv_tcp__shm_bell(t, c, td);
#else
    (void)t; (void)c; (void)td;
#endif
}
#ifdef TFRDV_TCP__RING
/* the reading thread: the record at the head of the ring from the peer: 1 (its body length and
   the socket frames before it), 0 none, -1 garbage (why) */
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_peek(tfrdv_tcp__conn* c, uint32_t* len, uint64_t* sfr, char* why, size_t cap) {
    tfrdv_tcp__shm* s = c->shm;
    uint64_t tail = __atomic_load_n(s->rx.tail, __ATOMIC_ACQUIRE), avail = tail - s->rx.pos;
    uint8_t h[16];
    uint32_t l, z;
    if (!avail) return 0;
    if (avail > TFRDV_TCP__RING_BYTES || avail < 16 || (avail & 7u)) {
        snprintf(why, cap, "the peer's ring position %llu is not within the %u bytes after ours (%llu)",
                 (unsigned long long)tail, TFRDV_TCP__RING_BYTES, (unsigned long long)s->rx.pos);
        return -1;
    }
    tfrdv_tcp__shm_out(&s->rx, s->rx.pos, h, sizeof h); /* copied: the peer may change it */
    l = tfrdv_tcp__ld32(h);
    z = tfrdv_tcp__ld32(h + 4);
    if (z || !l || l > TFRDV_TCP__RING_REC_MAX || 16 + tfrdv_tcp__shm_pad(l) > avail) {
        snprintf(why, cap, "a ring record of %u bytes (1..%u, within the %llu written) or a non-zero reserved field (%u)",
                 l, TFRDV_TCP__RING_REC_MAX, (unsigned long long)avail, z);
        return -1;
    }
    *len = l;
    *sfr = tfrdv_tcp__ld64(h + 8);
    return 1;
}
/* a RESPONSE from the ring with all its bytes: the socket's half-read frame, if any, waits */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_response(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp_frame* f, const uint8_t* data, tfrdv_tcp__todo* td) {
    int rx = c->rx;
    tfrdv_tcp__ent *rent = c->rent, *e;
    uint64_t rleft = c->rleft;
    c->rx = TFRDV_TCP__RX_HDR;
    c->rent = 0;
    c->rleft = 0;
    tfrdv_tcp__on_response(t, c, f, td);
    e = c->rx == TFRDV_TCP__RX_DATA ? c->rent : 0;
    if (e && f->data_len) {
        memcpy((uint8_t*)e->value->data + e->got, data, (size_t)f->data_len);
        e->got += f->data_len;
    }
    c->rx = rx;
    c->rent = rent;
    c->rleft = rleft;
    if (e && e->got == e->total) {
        __atomic_fetch_add(&t->ring_values_in, 1, __ATOMIC_RELAXED);
        tfrdv_tcp__ent_complete(t, c, e, td);
    }
}
/* the frames of one record (a copy): as if read from the socket; what cannot come this way
   (HELLO, DATA, CLOSE, a value not all there, by address) closes the connection */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_frames(tfrdv_tcp* t, tfrdv_tcp__conn* c, const uint8_t* b, size_t len, tfrdv_tcp__todo* td) {
    size_t off = 0;
    char why[TFRDV_STATUS_MSG_MAX];
    tfrdv_tcp_frame f;
    tfrdv_status st;
    while (off < len && c->state == TFRDV_TCP__C_OPEN) {
        long used = tfrdv_tcp_decode(b + off, len - off, &t->lim, &f, &st);
        why[0] = 0;
        if (used < 0) snprintf(why, sizeof why, "in the ring: %.200s", st.msg + (strncmp(st.msg, "tfrdv_tcp: ", 11) == 0 ? 11 : 0));
        else if (used == 0) snprintf(why, sizeof why, "a frame cut short in a ring record (%llu bytes left)", (unsigned long long)(len - off));
        else if (f.type == TFRDV_TCP_RESPONSE && (f.remote || f.data_len != f.bytes || f.data_len > len - off - (size_t)used))
            snprintf(why, sizeof why, "a RESPONSE in the ring without all its %llu value bytes", (unsigned long long)f.bytes);
        else if (f.type != TFRDV_TCP_RESPONSE && f.type != TFRDV_TCP_REQUEST && f.type != TFRDV_TCP_CANCEL &&
                 f.type != TFRDV_TCP_ACK && f.type != TFRDV_TCP_ERROR && f.type != TFRDV_TCP_SAMEHOST && f.type != TFRDV_TCP_RELEASE)
            snprintf(why, sizeof why, "frame type %d in the ring", f.type);
        if (why[0]) {
            pthread_mutex_lock(&t->mu);
            tfrdv_tcp__conn_bad(t, c, why, td);
            pthread_mutex_unlock(&t->mu);
            return;
        }
        __atomic_fetch_add(&t->ring_frames_in, 1, __ATOMIC_RELAXED);
        off += (size_t)used;
        if (f.type == TFRDV_TCP_RESPONSE && !c->server) {
            off += (size_t)f.data_len;
            tfrdv_tcp__shm_response(t, c, &f, b + off - (size_t)f.data_len, td);
            continue;
        }
        tfrdv_tcp__on_frame(t, c, &f, td); /* (a RESPONSE to a server: "unexpected frame") */
    }
}
/* the reading thread: records whose socket frames were read; announce: when none is left, say
   so in the sleep word (then look once more: a record written meanwhile is not missed). At most
   64 records per call (other connections come next): the loop rings its own doorbell for the
   rest, a lent thread finds them before it sleeps */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_run(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td, int announce) {
    int n = 0;
    for (;;) {
        tfrdv_tcp__shm* s = c->shm;
        uint32_t len;
        uint64_t sfr;
        char why[200];
        int k;
        if (!s || c->state != TFRDV_TCP__C_OPEN) return;
        k = tfrdv_tcp__shm_peek(c, &len, &sfr, why, sizeof why);
        if (k < 0) {
            pthread_mutex_lock(&t->mu);
            tfrdv_tcp__conn_bad(t, c, why, td);
            pthread_mutex_unlock(&t->mu);
            return;
        }
        if (k == 0) {
            if (!announce) return;
            __atomic_store_n(s->rx.wake, c->claimed == TFRDV_TCP__BY_WAITER ? 2u : 1u, __ATOMIC_RELAXED);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            if (__atomic_load_n(s->rx.tail, __ATOMIC_ACQUIRE) == s->rx.pos) return;
            __atomic_store_n(s->rx.wake, 0u, __ATOMIC_RELAXED);
            continue;
        }
        if (sfr > c->rfr) return; /* after socket frames not read yet: their event comes */
        if (announce && ++n > 64) {
            uint64_t one = 1;
            if (c->claimed != TFRDV_TCP__BY_WAITER) while (write(s->efd, &one, sizeof one) < 0 && errno == EINTR) {}
            return;
        }
        tfrdv_tcp__shm_out(&s->rx, s->rx.pos + 16, s->buf, len);
        s->rx.pos += 16 + tfrdv_tcp__shm_pad(len);
        __atomic_store_n(s->rx.head, s->rx.pos, __ATOMIC_RELEASE);
        tfrdv_tcp__shm_frames(t, c, s->buf, len, td);
    }
}
#endif
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_drain(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
#ifdef TFRDV_TCP__RING
    tfrdv_tcp__shm_run(t, c, td, 1);
#else
    (void)t; (void)c; (void)td;
#endif
}
/* tfrdv_tcp__read, before the socket frame it decoded: the ring's frames written before it */
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_before(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
#ifdef TFRDV_TCP__RING
    if (c->shm) tfrdv_tcp__shm_run(t, c, td, 0);
#else
    (void)t; (void)td;
#endif
    c->rfr++;
    return c->state != TFRDV_TCP__C_DEAD;
}
/* the lent thread: a record it may handle now (or garbage to report); awake: spinning, so the
   producer need not ring */
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_ready(tfrdv_tcp__conn* c, int awake) {
#ifdef TFRDV_TCP__RING
    tfrdv_tcp__shm* s = c->shm;
    uint32_t len;
    uint64_t sfr;
    char why[200];
    int k;
    if (!s || c->state != TFRDV_TCP__C_OPEN) return 0;
    if (awake && __atomic_load_n(s->rx.wake, __ATOMIC_RELAXED)) __atomic_store_n(s->rx.wake, 0u, __ATOMIC_RELAXED);
    if (__atomic_load_n(s->rx.tail, __ATOMIC_ACQUIRE) == s->rx.pos) return 0;
    k = tfrdv_tcp__shm_peek(c, &len, &sfr, why, sizeof why);
    return k < 0 || (k > 0 && sfr <= c->rfr);
#else
    (void)c; (void)awake;
    return 0;
#endif
}
/* the lent thread, before it sleeps: the producer is to ring its doorbell (2: the conn's cwake;
   3: fx, a futex on the word); 1 when a record came meanwhile (then it does not sleep) */
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_nap(tfrdv_tcp__conn* c, int fx) {
#ifdef TFRDV_TCP__RING
    if (!c->shm) return 0;
    __atomic_store_n(c->shm->rx.wake, fx ? 3u : 2u, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return tfrdv_tcp__shm_ready(c, 0);
#else
    (void)c; (void)fx;
    return 0;
#endif
}
/* the lent thread, word 3 announced (shm_nap): sleeps on the futex, at most a slice (the peer's
   death shows only on the socket: EOF), unless this process woke it since lw (tfrdv_tcp__wake_lent)
   or the server wrote to the socket since the last look (it counts its writes in the mapping,
   then looks at the word: one of the two sees the other). As poll: > 0 with pf's revents, 0
   (look at the ring and the call again) */
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_sleep(tfrdv_tcp__conn* c, struct pollfd* pf, int64_t left, uint32_t lw) {
#ifdef TFRDV_TCP__RING
    tfrdv_tcp__shm* s = c->shm;
    uint64_t k = __atomic_load_n(s->socks, __ATOMIC_SEQ_CST);
    struct timespec ts;
    if (__atomic_load_n(&s->lwake, __ATOMIC_SEQ_CST) != lw) return 0;
    if (k != s->nsock) {
        s->nsock = k;
        return poll(pf, 2, 0);
    }
    if (left > TFRDV_TCP__FX_SLICE_NS) left = TFRDV_TCP__FX_SLICE_NS;
    if (left < 1) left = 1;
    ts.tv_sec = (time_t)(left / 1000000000);
    ts.tv_nsec = (long)(left % 1000000000);
    if (syscall(SYS_futex, s->rx.wake, FUTEX_WAIT, 3u, &ts, (void*)0, 0) != 0 && errno == ETIMEDOUT) return poll(pf, 2, 0);
    return 0;
#else
    (void)c; (void)lw;
    return poll(pf, 2, (int)((left + 999999) / 1000000));
#endif
}
/* the lent thread keeps c out of the loop (under t->mu, nothing in flight): sleep word 0, so a
   record that comes meanwhile (the response to the next call, written before its thread comes to
   wait) rings nobody: that thread finds it before it sleeps (tfrdv_tcp__shm_nap); the loop's
   doorbell comes back with tfrdv_tcp__arm (tfrdv_tcp__shm_handback). Before this, the word said
   "the loop", and on one CPU a fast server's answer woke the I/O thread, which then fought the
   lent thread for the lock */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_keep(tfrdv_tcp__conn* c) {
#ifdef TFRDV_TCP__RING
    if (c->shm) __atomic_store_n(c->shm->rx.wake, 0u, __ATOMIC_RELAXED);
#else
    (void)c;
#endif
}
/* the lent thread lets go (under t->mu): the loop's doorbell again, rung here if a record came */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shm_handback(tfrdv_tcp__conn* c) {
#ifdef TFRDV_TCP__RING
    uint64_t one = 1;
    if (!c->shm || c->state != TFRDV_TCP__C_OPEN) return;
    __atomic_store_n(c->shm->rx.wake, 1u, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(c->shm->rx.tail, __ATOMIC_ACQUIRE) != c->shm->rx.pos)
        while (write(c->shm->efd, &one, sizeof one) < 0 && errno == EINTR) {}
#else
    (void)c;
#endif
}
#ifdef TFRDV_TCP__RING
/* client (under t->mu, after the server's HELLO): the memfd, sealed, mapped; the doorbells; 1, or
   0 with why */
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_offer(tfrdv_tcp* t, tfrdv_tcp__conn* c, char* why, size_t cap) {
    tfrdv_tcp__shm* s;
    int mfd = -1, sfd = -1;
    if (t->shm_deny == 2) { snprintf(why, cap, "TFRDV_TCP_RING_DENY=2: memfd_create taken as failing (ENOSYS)"); return 0; }
    if ((c->cwake[0] < 0 && !tfrdv_tcp__wake_open(c->cwake)) || !(s = tfrdv_tcp__shm_new(t))) {
        snprintf(why, cap, "out of memory or descriptors (%s)", strerror(errno));
        return 0;
    }
    mfd = memfd_create("tfrdv_tcp_ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0) snprintf(why, cap, "memfd_create failed: %s", strerror(errno));
    else if (ftruncate(mfd, TFRDV_TCP__RING_MAP) != 0) snprintf(why, cap, "ftruncate of the memfd failed: %s", strerror(errno));
    else if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) snprintf(why, cap, "sealing the memfd failed: %s", strerror(errno));
    else if ((s->map = (uint8_t*)mmap(0, TFRDV_TCP__RING_MAP, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0)) == (uint8_t*)MAP_FAILED)
        snprintf(why, cap, "mmap of the memfd failed: %s", strerror(errno));
    else if ((sfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 || (s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        snprintf(why, cap, "eventfd failed: %s", strerror(errno));
    else if (!tfrdv_tcp__shm_watch(t, c, s->efd)) snprintf(why, cap, "epoll_ctl failed: %s", strerror(errno));
    else {
        tfrdv_tcp__shm_ring_at(&s->tx, s->map, 0);
        tfrdv_tcp__shm_ring_at(&s->rx, s->map, 1);
        s->socks = (uint64_t*)(void*)(s->map + 1024 + 192);
        __atomic_store_n(s->rx.wake, 1u, __ATOMIC_RELAXED); /* our loop sleeps: ring */
        s->peer_efd[0] = sfd;
        s->out[0] = mfd;
        s->out[1] = sfd;
        s->out[2] = s->efd;
        s->out[3] = c->cwake[0];
        s->nout = 4;
        c->shm = s;
        return 1;
    }
    if (mfd >= 0) close(mfd);
    if (sfd >= 0) close(sfd);
    s->nout = 0;
    c->shm = s;
    tfrdv_tcp__shm_free(t, c);
    return 0;
}
/* server (under t->mu): the client's SAMEHOST offered a ring: its descriptors (passed with it)
   checked (a memfd of the agreed size sealed against shrinking and growing, three eventfds),
   mapped; 1, or 0 with why */
TFRDV_TCP__PRIVATE int tfrdv_tcp__shm_accept(tfrdv_tcp* t, tfrdv_tcp__conn* c, char* why, size_t cap) {
    tfrdv_tcp__shm* s;
    struct stat sb;
    int seals, i, *fd = c->shm_in;
    if (c->nshm_in != 4) { snprintf(why, cap, "its SAMEHOST frame came with %d descriptors (4 expected)", c->nshm_in); return 0; }
    if (fstat(fd[0], &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size != (off_t)TFRDV_TCP__RING_MAP) {
        snprintf(why, cap, "its shared memory is not a file of %u bytes (%lld)", TFRDV_TCP__RING_MAP, (long long)sb.st_size);
        return 0;
    }
    seals = fcntl(fd[0], F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) != (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
        snprintf(why, cap, "its shared memory is not sealed (seals 0x%x; F_SEAL_SHRINK, F_SEAL_GROW and F_SEAL_SEAL needed: "
                 "a file that can shrink would fault this process)", seals < 0 ? 0 : seals);
        return 0;
    }
    for (i = 1; i < 4; i++) {
        char path[64], link[64];
        ssize_t n;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd[i]);
        n = readlink(path, link, sizeof link - 1);
        if (n < 0 || (link[n] = 0, strcmp(link, "anon_inode:[eventfd]") != 0)) {
            snprintf(why, cap, "its descriptor %d of 4 is not an eventfd", i + 1);
            return 0;
        }
        (void)fcntl(fd[i], F_SETFL, fcntl(fd[i], F_GETFL) | O_NONBLOCK);
    }
    if (!(s = tfrdv_tcp__shm_new(t))) { snprintf(why, cap, "out of memory"); return 0; }
    s->map = (uint8_t*)mmap(0, TFRDV_TCP__RING_MAP, PROT_READ | PROT_WRITE, MAP_SHARED, fd[0], 0);
    c->shm = s;
    if (s->map == (uint8_t*)MAP_FAILED || !tfrdv_tcp__shm_watch(t, c, fd[1])) {
        snprintf(why, cap, "%s failed: %s", s->map == (uint8_t*)MAP_FAILED ? "mmap" : "epoll_ctl", strerror(errno));
        tfrdv_tcp__shm_free(t, c);
        return 0;
    }
    close(fd[0]);
    s->efd = fd[1];
    s->peer_efd[0] = fd[2];
    s->peer_efd[1] = fd[3];
    c->nshm_in = 0;
    tfrdv_tcp__shm_ring_at(&s->tx, s->map, 1);
    tfrdv_tcp__shm_ring_at(&s->rx, s->map, 0);
    s->socks = (uint64_t*)(void*)(s->map + 1024 + 192);
    __atomic_store_n(s->rx.wake, 1u, __ATOMIC_RELAXED); /* our loop sleeps: ring */
    s->tx_ok = 1;
    t->stats.ring_connections++;
    return 1;
}
#endif

/* >>SHARED POOL ------------------------------------------------------------------------------ */
/* A first-fit allocator over one sealed memfd mapping (see ZERO COPY in the docs). The free
   extents are kept sorted by offset in a growing array and merged with their neighbours on free.
   References: the creator's (pool_destroy) and one per live block; the last one unmaps. */
typedef struct tfrdv_tcp__ext { uint64_t off, len; } tfrdv_tcp__ext;
struct tfrdv_tcp_pool {
    pthread_mutex_t mu;
    int fd;
    uint8_t* base;
    uint64_t cap, live_bytes, live_blocks, refused;
    tfrdv_tcp__ext* free_ext;
    size_t nfree, free_cap;
    int destroyed, users;                      /* users: transports (tfrdv_tcp_add_pool) */
};
#define TFRDV_TCP__POOL_ALIGN 64u
#define TFRDV_TCP__POOL_MAX ((uint64_t)1 << 40)
TFRDV_TCP__PRIVATE void tfrdv_tcp__pool_final(tfrdv_tcp_pool* p) {
#ifdef TFRDV_TCP__RING
    if (p->base) munmap(p->base, (size_t)p->cap);
#endif
    if (p->fd >= 0) close(p->fd);
    pthread_mutex_destroy(&p->mu);
    free(p->free_ext);
    free(p);
}
TFRDV_TCP__PRIVATE void* tfrdv_tcp__pool_alloc(void* user, size_t size) {
    tfrdv_tcp_pool* p = (tfrdv_tcp_pool*)user;
    uint64_t n = ((uint64_t)size + TFRDV_TCP__POOL_ALIGN - 1) & ~(uint64_t)(TFRDV_TCP__POOL_ALIGN - 1);
    void* r = 0;
    size_t i;
    if (!n) n = TFRDV_TCP__POOL_ALIGN;
    if (!p || (uint64_t)size > p->cap) return 0;
    pthread_mutex_lock(&p->mu);
    for (i = 0; i < p->nfree; i++) {
        tfrdv_tcp__ext* e = &p->free_ext[i];
        if (e->len < n) continue;
        r = p->base + e->off;
        e->off += n;
        e->len -= n;
        if (!e->len) {
            memmove(e, e + 1, (p->nfree - i - 1) * sizeof *e);
            p->nfree--;
        }
        p->live_bytes += n;
        p->live_blocks++;
        break;
    }
    pthread_mutex_unlock(&p->mu);
    return r;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__pool_free(void* user, void* ptr, size_t size) {
    tfrdv_tcp_pool* p = (tfrdv_tcp_pool*)user;
    uint64_t n = ((uint64_t)size + TFRDV_TCP__POOL_ALIGN - 1) & ~(uint64_t)(TFRDV_TCP__POOL_ALIGN - 1), off;
    size_t i;
    int last;
    if (!ptr || !p) return;
    if (!n) n = TFRDV_TCP__POOL_ALIGN;
    off = (uint64_t)((uintptr_t)ptr - (uintptr_t)p->base); /* wraps above cap for a pointer below base */
    pthread_mutex_lock(&p->mu);
    for (i = 0; i < p->nfree && p->free_ext[i].off < off; i++) {}
    if (off >= p->cap || off % TFRDV_TCP__POOL_ALIGN || n > p->cap - off || p->live_bytes < n ||
        (i > 0 && p->free_ext[i - 1].off + p->free_ext[i - 1].len > off) || (i < p->nfree && off + n > p->free_ext[i].off)) {
        p->refused++; /* not a block of this pool, or (partly) free already: a double free */
        pthread_mutex_unlock(&p->mu);
        return;
    }
    if (i > 0 && p->free_ext[i - 1].off + p->free_ext[i - 1].len == off) { /* joins the one before */
        p->free_ext[i - 1].len += n;
        if (i < p->nfree && off + n == p->free_ext[i].off) {
            p->free_ext[i - 1].len += p->free_ext[i].len;
            memmove(&p->free_ext[i], &p->free_ext[i + 1], (p->nfree - i - 1) * sizeof *p->free_ext);
            p->nfree--;
        }
    } else if (i < p->nfree && off + n == p->free_ext[i].off) { /* joins the one after */
        p->free_ext[i].off = off;
        p->free_ext[i].len += n;
    } else {
        if (p->nfree == p->free_cap) { /* a new extent; the array grows (on failure the bytes stay lost) */
            size_t nc = p->free_cap ? 2 * p->free_cap : 16;
            tfrdv_tcp__ext* ne = (tfrdv_tcp__ext*)realloc(p->free_ext, nc * sizeof *ne);
            if (ne) {
                p->free_ext = ne;
                p->free_cap = nc;
            }
        }
        if (p->nfree < p->free_cap) {
            memmove(&p->free_ext[i + 1], &p->free_ext[i], (p->nfree - i) * sizeof *p->free_ext);
            p->free_ext[i].off = off;
            p->free_ext[i].len = n;
            p->nfree++;
        }
    }
    p->live_bytes -= n;
    if (p->live_blocks) p->live_blocks--;
    last = p->destroyed && !p->live_bytes && !p->users; /* bytes: exact even when a free took part of a block */
    pthread_mutex_unlock(&p->mu);
    if (last) tfrdv_tcp__pool_final(p);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__pool_unuse(tfrdv_tcp_pool* p) {
    int last;
    pthread_mutex_lock(&p->mu);
    last = --p->users == 0 && p->destroyed && !p->live_bytes;
    pthread_mutex_unlock(&p->mu);
    if (last) tfrdv_tcp__pool_final(p);
}
TFRDV_API tfrdv_code tfrdv_tcp_pool_create(uint64_t capacity, tfrdv_tcp_pool** out, tfrdv_status* st) {
    tfrdv_tcp_pool* p;
    uint64_t pg;
    tfrdv_code code = TFRDV_UNAVAILABLE;
    if (!out) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_pool_create: NULL out");
    *out = 0;
    if (!capacity || capacity > TFRDV_TCP__POOL_MAX)
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_pool_create: capacity %llu out of range (1..2^40)", (unsigned long long)capacity);
#ifndef TFRDV_TCP__RING
    (void)p; (void)pg; (void)code;
    return tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp_pool_create: no memfd in this build (Linux, epoll, _GNU_SOURCE)");
#else
    pg = (uint64_t)sysconf(_SC_PAGESIZE);
    capacity = (capacity + pg - 1) / pg * pg;
    if (!(p = (tfrdv_tcp_pool*)calloc(1, sizeof *p)))
        return tfrdv_tcp__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp_pool_create: out of memory");
    p->cap = capacity;
    p->fd = -1;
    pthread_mutex_init(&p->mu, 0);
    if ((p->fd = memfd_create("tfrdv_tcp_pool", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0) {
        code = tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp_pool_create: memfd_create failed: %s", strerror(errno));
    } else if (ftruncate(p->fd, (off_t)capacity) != 0) {
        code = tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp_pool_create: ftruncate to %llu bytes failed: %s", (unsigned long long)capacity, strerror(errno));
    } else if (fcntl(p->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
        code = tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp_pool_create: sealing the memfd failed: %s", strerror(errno));
    } else if ((p->base = (uint8_t*)mmap(0, (size_t)capacity, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0)) == (uint8_t*)MAP_FAILED) {
        p->base = 0;
        code = tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp_pool_create: mmap of %llu bytes failed: %s", (unsigned long long)capacity, strerror(errno));
    } else if (!(p->free_ext = (tfrdv_tcp__ext*)malloc(16 * sizeof *p->free_ext))) {
        code = tfrdv_tcp__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp_pool_create: out of memory");
    } else {
        p->free_cap = 16;
        p->nfree = 1;
        p->free_ext[0].off = 0;
        p->free_ext[0].len = capacity;
        *out = p;
        tfrdv_tcp__ok(st);
        return TFRDV_OK;
    }
    tfrdv_tcp__pool_final(p);
    return code;
#endif
}
TFRDV_API tfrdv_allocator tfrdv_tcp_pool_allocator(tfrdv_tcp_pool* p) {
    tfrdv_allocator a;
    a.alloc_fn = tfrdv_tcp__pool_alloc;
    a.free_fn = tfrdv_tcp__pool_free;
    a.user = p;
    return a;
}
TFRDV_TCP__PRIVATE uint64_t tfrdv_tcp__pool_live(tfrdv_tcp_pool* p, int blocks) {
    uint64_t n;
    if (!p) return 0;
    pthread_mutex_lock(&p->mu);
    n = blocks == 2 ? p->refused : blocks ? p->live_blocks : p->live_bytes;
    pthread_mutex_unlock(&p->mu);
    return n;
}
TFRDV_API uint64_t tfrdv_tcp_pool_live_bytes(tfrdv_tcp_pool* p) { return tfrdv_tcp__pool_live(p, 0); }
TFRDV_API uint64_t tfrdv_tcp_pool_live_blocks(tfrdv_tcp_pool* p) { return tfrdv_tcp__pool_live(p, 1); }
TFRDV_API uint64_t tfrdv_tcp_pool_refused_frees(tfrdv_tcp_pool* p) { return tfrdv_tcp__pool_live(p, 2); }
TFRDV_API int tfrdv_tcp_pool_fd(const tfrdv_tcp_pool* p) { return p ? p->fd : -1; }
TFRDV_API void* tfrdv_tcp_pool_base(const tfrdv_tcp_pool* p) { return p ? p->base : 0; }
TFRDV_API uint64_t tfrdv_tcp_pool_capacity(const tfrdv_tcp_pool* p) { return p ? p->cap : 0; }
TFRDV_API void tfrdv_tcp_pool_destroy(tfrdv_tcp_pool* p) {
    int last;
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->destroyed = 1;
    last = !p->live_bytes && !p->users;
    pthread_mutex_unlock(&p->mu);
    if (last) tfrdv_tcp__pool_final(p);
}

/* >>ZERO COPY -------------------------------------------------------------------------------- */
/* Pool values by reference between the processes of one host (see ZERO COPY in the docs). The
   server sends a response whose value lies in a pool of tfrdv_tcp_add_pool as (descriptor,
   offset, length) (RESPONSE flag 8) and keeps a reference on the value (c->lent) from the moment
   the frame is whole on the wire until the client's RELEASE of that wire id, or the connection's
   end. The client takes the descriptor from the server with pidfd_getfd (the permission is the
   one process_vm_readv needs, already checked by SAME HOST), checks it (a regular file sealed
   against shrinking, the range within its size) and maps the pages covering the range read-only;
   the value's release unmaps them and queues the id on the connection's link (zlink), which the
   next write or tick sends as a RELEASE frame. The link outlives the connection and the
   transport (values may be released after both): it is malloc'd and refcounted. */
typedef struct tfrdv_tcp__zlink {
    pthread_mutex_t mu;
    int refs, open;                            /* open: its connection still reads the ids */
    uint64_t* ids;                             /* wire ids released, not yet sent */
    size_t n, cap;
} tfrdv_tcp__zlink;
typedef struct tfrdv_tcp__zval {
    tfrdv_value v;
    void* map;
    size_t map_len;
    uint64_t id;
    tfrdv_tcp__zlink* link;
    int64_t dims[1];                           /* rank entries (at least one) */
} tfrdv_tcp__zval;
#if defined(__linux__) && !defined(SYS_pidfd_open)
#define SYS_pidfd_open 434
#endif
#if defined(__linux__) && !defined(SYS_pidfd_getfd)
#define SYS_pidfd_getfd 438
#endif

TFRDV_API tfrdv_code tfrdv_tcp_add_pool(tfrdv_tcp* t, tfrdv_tcp_pool* p, tfrdv_status* st) {
    int i, have = 0;
    if (!t || !p) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_add_pool: NULL %s", t ? "pool" : "transport");
    pthread_mutex_lock(&t->mu);
    for (i = 0; i < t->npools; i++) have |= t->pools[i] == p;
    if (!have && t->npools == (int)(sizeof t->pools / sizeof t->pools[0])) {
        pthread_mutex_unlock(&t->mu);
        return tfrdv_tcp__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp_add_pool: %d pools already", t->npools);
    }
    if (!have) {
        pthread_mutex_lock(&p->mu);
        p->users++;
        pthread_mutex_unlock(&p->mu);
        t->pools[t->npools++] = p;
    }
    pthread_mutex_unlock(&t->mu);
    tfrdv_tcp__ok(st);
    return TFRDV_OK;
}
/* server (under t->mu, planning r's RESPONSE by address): the value lies in a registered pool
   and the client speaks version 5: a pool reference instead of an address */
TFRDV_TCP__PRIVATE int tfrdv_tcp__zc_plan(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__req* r, tfrdv_tcp_frame* f) {
    const uint8_t* d = (const uint8_t*)r->value->data;
    int i;
    if (c->peer_version < 5) return 0;
    for (i = 0; i < t->npools; i++) {
        tfrdv_tcp_pool* p = t->pools[i];
        if (d < p->base || d >= p->base + p->cap || r->total > (uint64_t)(p->base + p->cap - d)) continue;
        if (!r->zc_node && !(r->zc_node = (tfrdv_tcp__lent*)tfrdv_tcp__alloc(t, sizeof(tfrdv_tcp__lent)))) return 0; /* by address */
        r->zc = 1;
        f->pooled = 1;
        f->pool_fd = (uint32_t)p->fd;
        f->pool_off = (uint64_t)(d - p->base);
        return 1;
    }
    return 0;
}
/* server (under t->mu): r's pool reference is whole on the wire: the value stays until RELEASE */
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_sent(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__req* r) {
    tfrdv_tcp__lent* l = r->zc_node;
    r->zc_node = 0;
    t->stats.values_zero_copy_sent++;
    tfrdv_value_retain(r->value);
    l->id = r->id;
    l->value = r->value;
    l->next = c->lent;
    c->lent = l;
    t->stats.values_lent++;
}
/* releases lent values (no lock held) and frees their records */
TFRDV_TCP__PRIVATE void tfrdv_tcp__lent_drop(tfrdv_tcp* t, tfrdv_tcp__lent* l) {
    while (l) {
        tfrdv_tcp__lent* nx = l->next;
        tfrdv_value_release(l->value);
        tfrdv_tcp__free(t, l, sizeof *l);
        l = nx;
    }
}
/* server: RELEASE: the client unmapped these values (ids not lent here are ignored) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_on_release(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f) {
    tfrdv_tcp__lent *drop = 0, **pp;
    uint32_t i;
    pthread_mutex_lock(&t->mu);
    for (i = 0; i < f->num_acks; i++) {
        uint64_t id = tfrdv_tcp__ld64(f->ack_bytes + 8 * (size_t)i);
        for (pp = &c->lent; *pp; pp = &(*pp)->next) {
            tfrdv_tcp__lent* l = *pp;
            if (l->id != id) continue;
            *pp = l->next;
            l->next = drop;
            drop = l;
            t->stats.values_lent--;
            t->stats.releases_received++;
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    tfrdv_tcp__lent_drop(t, drop);
}
/* the connection ends (under t->mu): its lent values stay held until the transport is
   destroyed (t->orphans): nobody can tell whether the client still maps them (a client that
   closed its transport may keep its values), and a block reused meanwhile would change a value
   under its receiver; the client's link stops taking ids */
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_conn_end(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
    tfrdv_tcp__lent* l;
    (void)td;
    while ((l = c->lent) != 0) {
        c->lent = l->next;
        l->next = t->orphans;
        t->orphans = l;
    }
    if (c->zlink) {
        pthread_mutex_lock(&c->zlink->mu);
        c->zlink->open = 0;
        c->zlink->n = 0;
        pthread_mutex_unlock(&c->zlink->mu);
    }
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__zlink_unref(tfrdv_tcp__zlink* z) {
    int last;
    pthread_mutex_lock(&z->mu);
    last = --z->refs == 0;
    pthread_mutex_unlock(&z->mu);
    if (!last) return;
    pthread_mutex_destroy(&z->mu);
    free(z->ids);
    free(z);
}
/* the connection's memory goes (under t->mu) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_detach(tfrdv_tcp__conn* c) {
    if (!c->zlink) return;
    pthread_mutex_lock(&c->zlink->mu);
    c->zlink->open = 0;
    pthread_mutex_unlock(&c->zlink->mu);
    tfrdv_tcp__zlink_unref(c->zlink);
    c->zlink = 0;
}
/* an id to RELEASE (any thread); on out of memory the id is lost: the server holds that value
   until the connection ends */
TFRDV_TCP__PRIVATE void tfrdv_tcp__zlink_push(tfrdv_tcp__zlink* z, uint64_t id) {
    pthread_mutex_lock(&z->mu);
    if (z->open && z->n == z->cap) {
        size_t nc = z->cap ? 2 * z->cap : 16;
        uint64_t* ni = (uint64_t*)realloc(z->ids, nc * sizeof *ni);
        if (ni) { z->ids = ni; z->cap = nc; }
    }
    if (z->open && z->n < z->cap) z->ids[z->n++] = id;
    pthread_mutex_unlock(&z->mu);
}
/* client (under t->mu): the connection's link, made on first use */
TFRDV_TCP__PRIVATE tfrdv_tcp__zlink* tfrdv_tcp__zlink_get(tfrdv_tcp__conn* c) {
    tfrdv_tcp__zlink* z = c->zlink;
    if (z) return z;
    if (!(z = (tfrdv_tcp__zlink*)calloc(1, sizeof *z))) return 0;
    pthread_mutex_init(&z->mu, 0);
    z->refs = 1;
    z->open = c->state == TFRDV_TCP__C_OPEN;
    c->zlink = z;
    return z;
}
/* client (under t->mu): a pool reference that was not mapped: released at once */
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_release_id(tfrdv_tcp* t, tfrdv_tcp__conn* c, uint64_t id) {
    tfrdv_tcp__zlink* z = tfrdv_tcp__zlink_get(c);
    (void)t;
    if (z) tfrdv_tcp__zlink_push(z, id);
}
/* client (under t->mu, writing): released ids become RELEASE frames */
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_flush(tfrdv_tcp* t, tfrdv_tcp__conn* c) {
    tfrdv_tcp__zlink* z = c->zlink;
    size_t off = 0;
    pthread_mutex_lock(&z->mu);
    while (off < z->n) {
        tfrdv_tcp_frame f;
        size_t k = z->n - off > TFRDV_TCP_ACK_MAX ? TFRDV_TCP_ACK_MAX : z->n - off;
        memset(&f, 0, sizeof f);
        f.type = TFRDV_TCP_RELEASE;
        f.num_acks = (uint32_t)k;
        f.ack_ids = z->ids + off;
        if (!tfrdv_tcp__queue(t, c, &f)) break; /* out of memory: the rest next time */
        off += k;
    }
    if (off) memmove(z->ids, z->ids + off, (z->n - off) * sizeof *z->ids);
    z->n -= off;
    pthread_mutex_unlock(&z->mu);
}
TFRDV_TCP__PRIVATE int tfrdv_tcp__zc_due(tfrdv_tcp__conn* c) {
    int due;
    if (!c->zlink) return 0;
    pthread_mutex_lock(&c->zlink->mu);
    due = c->zlink->n > 0;
    pthread_mutex_unlock(&c->zlink->mu);
    return due;
}
/* client: a pool reference on a connection that did not agree to it closes it */
TFRDV_TCP__PRIVATE int tfrdv_tcp__zc_ok(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
    int ok;
    pthread_mutex_lock(&t->mu);
    ok = c->sh_read && c->peer_version >= 5;
    if (!ok) tfrdv_tcp__conn_bad(t, c, "RESPONSE from a shared pool (flag 8) on a connection that did not agree to it (SAME HOST, version 5)", td);
    pthread_mutex_unlock(&t->mu);
    return ok;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__zval_release(tfrdv_value* v) {
    tfrdv_tcp__zval* z = (tfrdv_tcp__zval*)v;
#ifdef TFRDV_TCP__RING
    munmap(z->map, z->map_len);
#endif
    tfrdv_tcp__zlink_push(z->link, z->id);
    tfrdv_tcp__zlink_unref(z->link);
    free(z);
}
/* client (no lock held): the pages of f's range in the server's pool, read-only: *at points at
   the value's first byte; NULL with why (a hostile or broken peer) */
TFRDV_TCP__PRIVATE void* tfrdv_tcp__zc_map(tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f, size_t* len, uint8_t** at, char* why, size_t cap) {
#ifdef TFRDV_TCP__RING
    int pfd, fd = -1, seals;
    struct stat sb;
    void* m = 0;
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), start;
    pfd = (int)syscall(SYS_pidfd_open, (pid_t)c->sh_pid, 0);
    if (pfd >= 0) {
        fd = (int)syscall(SYS_pidfd_getfd, pfd, (int)f->pool_fd, 0);
        if (fd < 0) snprintf(why, cap, "pidfd_getfd of descriptor %u in pid %ld failed: %s", f->pool_fd, c->sh_pid, strerror(errno));
        close(pfd);
    } else snprintf(why, cap, "pidfd_open of pid %ld failed: %s", c->sh_pid, strerror(errno));
    if (fd < 0) return 0;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        snprintf(why, cap, "the pool descriptor %u is not a regular file (a memfd)", f->pool_fd);
    else if ((seals = fcntl(fd, F_GET_SEALS)) < 0 || !(seals & F_SEAL_SHRINK))
        snprintf(why, cap, "the pool descriptor %u is not a memfd sealed against shrinking (seals 0x%x; F_SEAL_SHRINK needed: a file "
                 "that can shrink would fault this process)", f->pool_fd, seals < 0 ? 0 : seals);
    else if (f->pool_off > (uint64_t)sb.st_size || f->bytes > (uint64_t)sb.st_size - f->pool_off)
        snprintf(why, cap, "pool range offset %llu + %llu bytes lies past the pool's %lld bytes", (unsigned long long)f->pool_off,
                 (unsigned long long)f->bytes, (long long)sb.st_size);
    else {
        start = f->pool_off / pg * pg;
        *len = (size_t)(f->pool_off + f->bytes - start);
        m = mmap(0, *len, PROT_READ, MAP_SHARED, fd, (off_t)start);
        if (m == MAP_FAILED) {
            snprintf(why, cap, "mmap of %llu pool bytes failed: %s", (unsigned long long)*len, strerror(errno));
            m = 0;
        } else *at = (uint8_t*)m + (f->pool_off - start);
    }
    close(fd);
    return m;
#else
    (void)c; (void)f; (void)len; (void)at;
    snprintf(why, cap, "pool references need Linux and _GNU_SOURCE");
    return 0;
#endif
}
/* client (no lock held): f's value from the server's pool: a value whose bytes are the mapping
   (the receive asked for no memory of its own), or one copy into tfrdv_call_alloc_value memory
   (an alloc hook). A hostile reference closes the connection (NULL, c dead). */
TFRDV_TCP__PRIVATE tfrdv_value* tfrdv_tcp__zc_value(tfrdv_tcp* t, tfrdv_tcp__conn* c, const tfrdv_tcp_frame* f, tfrdv_call* call,
                                                    const char** fail, tfrdv_tcp__todo* td) {
    const tfrdv_args* ra = tfrdv_call_recv_args(call);
    char why[300];
    size_t len = 0;
    uint8_t* at = 0;
    void* m = tfrdv_tcp__zc_map(c, f, &len, &at, why, sizeof why);
    tfrdv_tcp__zval* z;
    tfrdv_tcp__zlink* link;
    tfrdv_value* v;
    if (!m) {
        char msg[400];
        snprintf(msg, sizeof msg, "ZERO COPY: %s", why);
        pthread_mutex_lock(&t->mu);
        tfrdv_tcp__conn_bad(t, c, msg, td);
        pthread_mutex_unlock(&t->mu);
        return 0;
    }
    if (ra && ra->alloc_fn) { /* the receiver's own memory: one copy */
        v = tfrdv_call_alloc_value(call, f->dtype, f->rank, f->dims, f->bytes);
        if (!v) *fail = "tfrdv_tcp: the receiver's allocator gave no memory for the value";
        else if (v->size < f->bytes || !v->data) {
            *fail = "tfrdv_tcp: the receiver's allocator gave less memory than the value needs";
            tfrdv_value_release(v);
            v = 0;
        } else memcpy(v->data, at, (size_t)f->bytes);
#ifdef TFRDV_TCP__RING
        munmap(m, len);
#endif
        pthread_mutex_lock(&t->mu);
        tfrdv_tcp__zc_release_id(t, c, f->id);
        if (v) t->stats.values_zero_copy_copied++;
        pthread_mutex_unlock(&t->mu);
        return v;
    }
    z = (tfrdv_tcp__zval*)calloc(1, sizeof *z + (f->rank > 1 ? (size_t)(f->rank - 1) * sizeof(int64_t) : 0));
    pthread_mutex_lock(&t->mu);
    link = z ? tfrdv_tcp__zlink_get(c) : 0;
    if (link) {
        pthread_mutex_lock(&link->mu);
        link->refs++; /* the value's */
        pthread_mutex_unlock(&link->mu);
        t->stats.values_zero_copy++;
    } else tfrdv_tcp__zc_release_id(t, c, f->id);
    pthread_mutex_unlock(&t->mu);
    if (!link) {
#ifdef TFRDV_TCP__RING
        munmap(m, len);
#endif
        free(z);
        *fail = "tfrdv_tcp: out of memory for a zero-copy value";
        return 0;
    }
    memcpy(z->dims, f->dims, (size_t)f->rank * sizeof(int64_t));
    z->v = tfrdv_value_make(f->dtype, f->rank, z->dims, at, f->bytes, tfrdv_tcp__zval_release, 0);
    z->map = m;
    z->map_len = len;
    z->id = f->id;
    z->link = link;
    return &z->v;
}

/* >>accept ----------------------------------------------------------------------------------- */
/* side: on SAME HOST's side listener (a Unix socket; the connection must show its token first) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__accept(tfrdv_tcp* t, tfrdv_tcp__todo* td, int side) {
    int i, lfd = side ? t->sfd : t->lfd;
    for (i = 0; i < 64; i++) {
        int fd;
        tfrdv_tcp__conn* c;
#if defined(__linux__) && defined(SOCK_NONBLOCK) && defined(_GNU_SOURCE)
        fd = accept4(lfd, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
        fd = accept(lfd, 0, 0);
        if (fd >= 0) tfrdv_tcp__cloexec_nonblock(fd);
#endif
        if (fd < 0) {
            int e = errno;
            if (e == EINTR || e == ECONNABORTED) continue;
            if (side && e != EAGAIN && e != EWOULDBLOCK) { /* out of descriptors or memory: off the epoll set
                                                     until the next offer (upgrades fail, TCP stays) */
                pthread_mutex_lock(&t->mu);
                tfrdv_tcp__lsock_arm(t, &t->sfd, &t->sarmed, 0);
                pthread_mutex_unlock(&t->mu);
                snprintf(td->log, sizeof td->log, "tfrdv_tcp: accept on the side socket %s failed (%s): not accepting until the next upgrade offer", t->saddr, strerror(e));
                td->log_level = 2;
                return;
            }
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) { /* pause the listener a while */
                pthread_mutex_lock(&t->mu);
                tfrdv_tcp__lsock_arm(t, &t->lfd, &t->listening, 0);
                t->lpause_until = tfrdv_tcp__now() + 100000000;
                pthread_mutex_unlock(&t->mu);
                snprintf(td->log, sizeof td->log, "tfrdv_tcp: accept on %s failed (%s): not accepting for 100 ms", t->laddr, strerror(e));
                td->log_level = 2;
            }
            return;
        }
        pthread_mutex_lock(&t->mu);
        if (t->closing || t->nserver_conns >= (size_t)t->cfg.max_connections) {
            t->stats.connections_rejected++;
            pthread_mutex_unlock(&t->mu);
            close(fd);
            continue;
        }
        tfrdv_tcp__sockopts(t, fd, side || t->lunix);
        if (!(c = tfrdv_tcp__conn_new(t, fd, 1, side || t->lunix))) {
            t->stats.connections_rejected++;
            pthread_mutex_unlock(&t->mu);
            close(fd);
            continue;
        }
        t->stats.accepted++;
        c->side = side;
        c->state = TFRDV_TCP__C_OPEN;
        c->deadline = tfrdv_tcp__add(tfrdv_tcp__now(), t->cfg.handshake_timeout_ns);
        tfrdv_tcp__queue_hello(t, c); /* version 2; a client's HELLO saying 1 is served as 1 */
        tfrdv_tcp__arm(t, c);
        tfrdv_tcp__write(t, c, td);
        pthread_mutex_unlock(&t->mu);
    }
}

/* >>timers (the polling thread) -------------------------------------------------------------- */
TFRDV_TCP__PRIVATE void tfrdv_tcp__cancel_frame(tfrdv_tcp* t, tfrdv_tcp__conn* c, uint64_t id, tfrdv_tcp__todo* td) {
    tfrdv_tcp_frame f;
    if (!c || c->state == TFRDV_TCP__C_DEAD) return;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_CANCEL;
    f.id = id;
    (void)tfrdv_tcp__queue(t, c, &f);
    if (c->state == TFRDV_TCP__C_OPEN && !c->wblocked) tfrdv_tcp__write(t, c, td);
}
/* finish e's call now with (code, msg) while its bytes may still arrive (e stays, call-less) */
TFRDV_TCP__PRIVATE int tfrdv_tcp__detach_call(tfrdv_tcp* t, tfrdv_tcp__ent* e, tfrdv_code code, const char* msg, tfrdv_tcp__todo* td) {
    tfrdv_tcp__ent* x;
    if (e->conn && e->conn->claimed == TFRDV_TCP__BY_WAITER) tfrdv_tcp__wake_lent(e->conn); /* it may wait for e */
    if (e->conn && e->conn->lazy) tfrdv_tcp__arm(t, e->conn); /* its thread may not come: the loop reads */
    if (e->state == TFRDV_TCP__E_WAIT) {
        tfrdv_tcp__ent_remove(t, e);
        tfrdv_tcp__todo_fin(td, e, code, msg);
        return 1;
    }
    if (e->state == TFRDV_TCP__E_ALLOC) { e->cancelled = 1; return 0; }
    if (!(x = tfrdv_tcp__ent_new(t))) return 0;
    x->call = e->call;
    e->call = 0;
    tfrdv_tcp__todo_fin(td, x, code, msg);
    return 1;
}
TFRDV_TCP__PRIVATE tfrdv_tcp__conn* tfrdv_tcp__dial(tfrdv_tcp* t, tfrdv_tcp__peer* p, char* msg, size_t cap,
                                                    tfrdv_code* code, tfrdv_tcp__todo* td);
TFRDV_TCP__PRIVATE void tfrdv_tcp__tick(tfrdv_tcp* t) {
    tfrdv_tcp__todo td;
    tfrdv_tcp__conn *c, *cnx;
    tfrdv_tcp__peer* p;
    int64_t now;
    size_t i;
    tfrdv_mgr* mgr;
    pthread_mutex_lock(&t->mu);
    mgr = t->mgr;
    pthread_mutex_unlock(&t->mu);
    if (mgr) (void)tfrdv_mgr_expire(mgr, tfrdv_mgr_now(mgr));
    for (i = 0;; i++) { /* the managers that fetch through t, served or not: deadlines, retries */
        tfrdv_mgr* b = 0;
        pthread_mutex_lock(&t->mu);
        if (i < t->nbound && t->bound[i] != mgr) tfrdv_mgr_ref(b = t->bound[i]); /* its unbind may come meanwhile */
        now = i < t->nbound;
        pthread_mutex_unlock(&t->mu);
        if (!now) break;
        if (b) {
            (void)tfrdv_mgr_expire(b, tfrdv_mgr_now(b));
            tfrdv_mgr_unref(b);
        }
    }
    tfrdv_tcp__todo_init(&td);
    now = tfrdv_tcp__now();
    pthread_mutex_lock(&t->mu);
    t->next_tick = tfrdv_tcp__add(now, t->cfg.expire_interval_ns);
    if (!t->listening && t->lpause_until && now >= t->lpause_until && t->mgr && !t->closing) {
        t->lpause_until = 0;
        tfrdv_tcp__lsock_arm(t, &t->lfd, &t->listening, 1);
    }
    for (c = t->conns.next; c != &t->conns; c = cnx) { /* every expired one, in this pass */
        cnx = c->next;
        if (c->deadline > now || (c->hello_ok && (!c->side || c->side_ok) && c->up_side != 1)) continue;
        if (c->server) { /* no calls: nothing takes the todo's bulk status */
            tfrdv_tcp__conn_gone(t, c, c->hello_ok ? "no token on the side socket within handshake_timeout_ns" : "no HELLO within handshake_timeout_ns", &td);
        } else { /* its calls take the bulk status naming its address: a todo of its own, run now */
            tfrdv_tcp__todo ctd;
            tfrdv_tcp__todo_init(&ctd);
            tfrdv_tcp__connect_failed(t, c, c->hello_ok ? "no answer to its SAMEHOST question within connect_timeout_ns" : "timed out (connect_timeout_ns)", &ctd);
            pthread_mutex_unlock(&t->mu);
            tfrdv_tcp__todo_run(t, &ctd);
            pthread_mutex_lock(&t->mu);
            cnx = t->conns.next; /* the list may have changed meanwhile; c left it */
        }
    }
    for (p = t->peers; p && !t->closing; p = p->next) { /* calls waiting for a peer to come up */
        tfrdv_tcp__ent *e, *enx;
        tfrdv_tcp__todo ptd;
        tfrdv_tcp__todo_init(&ptd);
        for (e = p->parked.next; e != &p->parked; e = enx) { /* waited long enough */
            enx = e->next;
            if (e->park_until > now) continue;
            tfrdv_tcp__ent_remove(t, e);
            t->stats.calls_failed++;
            tfrdv_tcp__todo_fin(&ptd, e, TFRDV_UNAVAILABLE, 0);
        }
        if (ptd.fin) { /* their own status, naming the address (peers are never unlinked) */
            tfrdv_tcp__err(&ptd.st, TFRDV_UNAVAILABLE, "tfrdv_tcp: %s accepted no connection within connect_retry_ns "
                           "or the call's deadline: %s", p->addr, p->err[0] ? p->err : "not tried");
            pthread_mutex_unlock(&t->mu);
            tfrdv_tcp__todo_run(t, &ptd);
            pthread_mutex_lock(&t->mu);
        }
        if (p->parked.next != &p->parked && !p->conn && now >= p->retry_at && !t->closing) { /* again */
            char why[TFRDV_STATUS_MSG_MAX];
            tfrdv_code code;
            tfrdv_tcp__conn* nc = tfrdv_tcp__dial(t, p, why, sizeof why, &code, &td);
            if (nc && nc->state == TFRDV_TCP__C_OPEN && !nc->wblocked) tfrdv_tcp__write(t, nc, &td);
        }
    }
    for (c = t->conns.next; c != &t->conns; c = cnx) {
        cnx = c->next;
        if (c->state != TFRDV_TCP__C_OPEN) continue;
        if (!c->server) { /* acknowledgements nothing else carried */
            if ((c->nacks || tfrdv_tcp__zc_due(c)) && !c->wblocked) tfrdv_tcp__write(t, c, &td);
            if (c->up_retire == 1) tfrdv_tcp__up_retire(t, c); /* SAME HOST: a TCP connection replaced */
            if (c->lazy && ++c->lazy > 2) tfrdv_tcp__arm(t, c); /* idle for a tick: the loop
                                                                  watches it again (its end) */
            continue;
        }
        if (t->cfg.stall_timeout_ns < 0) continue;
        if (c->wblocked && c->stalled_since && now - c->stalled_since >= t->cfg.stall_timeout_ns)
            tfrdv_tcp__conn_bad(t, c, "the peer reads none of its answers (stall_timeout_ns)", &td);
        else if (c->held.next != &c->held && now - c->held.next->held_at >= t->cfg.stall_timeout_ns)
            tfrdv_tcp__conn_bad(t, c, "the peer acknowledges no delivery (stall_timeout_ns)", &td);
    }
    if (t->ent_min_deadline <= now) {
        int64_t next = INT64_MAX;
        t->scanning = 1;
        for (i = 0; i < t->ents.cap; i++) {
            tfrdv_tcp__ent *e = (tfrdv_tcp__ent*)t->ents.tab[i], *nx;
            for (; e; e = nx) {
                nx = (tfrdv_tcp__ent*)e->h.hnext;
                if (!e->call) continue;
                if (e->deadline <= now) {
                    tfrdv_tcp__conn* ec = e->conn;
                    uint64_t id = e->id;
                    if (tfrdv_tcp__detach_call(t, e, TFRDV_DEADLINE_EXCEEDED, "tfrdv_tcp: RecvTensor deadline exceeded", &td)) {
                        t->stats.calls_expired++;
                        tfrdv_tcp__cancel_frame(t, ec, id, &td);
                    }
                } else if (e->deadline < next) {
                    next = e->deadline;
                }
            }
        }
        t->scanning = 0;
        t->ent_min_deadline = next;
    }
    if (t->req_min_deadline <= now) {
        int64_t next = INT64_MAX;
        for (i = 0; i < t->reqs.cap; i++) {
            tfrdv_tcp__req* r;
            for (r = (tfrdv_tcp__req*)t->reqs.tab[i]; r; r = (tfrdv_tcp__req*)r->h.hnext) {
                if (r->state != TFRDV_TCP__R_SERVING || r->expired || r->cancelled) continue;
                if (r->deadline <= now) {
                    r->expired = 1;
                    r->refs++;
                    r->cnext = td.cancel;
                    td.cancel = r;
                } else if (r->deadline < next) {
                    next = r->deadline;
                }
            }
        }
        t->req_min_deadline = next;
    }
    pthread_mutex_unlock(&t->mu);
    tfrdv_tcp__todo_run(t, &td);
}

/* >>the loop --------------------------------------------------------------------------------- */
TFRDV_TCP__PRIVATE void tfrdv_tcp__zc_detach(tfrdv_tcp__conn* c);
TFRDV_TCP__PRIVATE void tfrdv_tcp__free_dead(tfrdv_tcp* t) { /* under t->mu */
    tfrdv_tcp__conn *keep = 0, *c;
    while ((c = t->dead) != 0) {
        t->dead = c->dnext;
        if (c->claimed || c->corked) { /* a lent thread still holds it (its release is before the
                                          next pass), or it waits in t->corkq (flushed first) */
            c->dnext = keep;
            keep = c;
            continue;
        }
        tfrdv_tcp__shm_free(t, c); /* SAME HOST RING */
        tfrdv_tcp__zc_detach(c); /* ZERO COPY */
        tfrdv_tcp__wake_close(c->cwake);
        tfrdv_tcp__free(t, c->obuf, c->ocap);
        tfrdv_tcp__free(t, c->rbuf, c->rcap);
        tfrdv_tcp__free(t, c, sizeof *c);
    }
    t->dead = keep;
}
/* one socket event of connection c, handled by the thread that reads it now */
TFRDV_TCP__PRIVATE void tfrdv_tcp__conn_io(tfrdv_tcp* t, tfrdv_tcp__conn* c, int rd, int wr, int err) {
    tfrdv_tcp__todo td;
    tfrdv_tcp__todo_init(&td);
    if (c->state == TFRDV_TCP__C_DEAD) return;
    if (c->state == TFRDV_TCP__C_CONNECTING) {
        if (!wr && !err) return;
        {
            int e = 0;
            socklen_t el = (socklen_t)sizeof e;
            if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0) e = errno;
            if (!e && err) e = ECONNREFUSED;
            pthread_mutex_lock(&t->mu);
            if (e) tfrdv_tcp__connect_failed(t, c, strerror(e), &td);
            else {
                c->state = TFRDV_TCP__C_OPEN;
                c->wblocked = 0;
                tfrdv_tcp__arm(t, c);
                tfrdv_tcp__write(t, c, &td);
            }
            pthread_mutex_unlock(&t->mu);
        }
        tfrdv_tcp__todo_run(t, &td);
        return;
    }
    if (wr) {
        pthread_mutex_lock(&t->mu);
        if (c->state == TFRDV_TCP__C_OPEN) {
            int was = c->wblocked;
            c->wblocked = 0;
            tfrdv_tcp__write(t, c, &td);
            if (was && !c->wblocked) tfrdv_tcp__arm(t, c);
        }
        pthread_mutex_unlock(&t->mu);
    }
    if (rd || err) tfrdv_tcp__read(t, c, &td);
    if (c->shm) tfrdv_tcp__shm_drain(t, c, &td); /* SAME HOST RING */
    tfrdv_tcp__todo_run(t, &td);
}
/* the event loop's: skipped while a lent thread reads the connection (an event that was on its
   way when that thread took it) */
TFRDV_TCP__PRIVATE void tfrdv_tcp__conn_event(tfrdv_tcp* t, tfrdv_tcp__conn* c, int rd, int wr, int err) {
    pthread_mutex_lock(&t->mu);
    if (c->claimed) { pthread_mutex_unlock(&t->mu); return; }
    c->claimed = TFRDV_TCP__BY_LOOP;
    pthread_mutex_unlock(&t->mu);
    tfrdv_tcp__conn_io(t, c, rd, wr, err);
    pthread_mutex_lock(&t->mu);
    c->claimed = TFRDV_TCP__BY_NONE; /* from here on, writers write themselves */
    if (t->loop_waiters) pthread_cond_broadcast(&t->cv); /* a lent thread takes it over */
    if (c->up_orphan && c->state != TFRDV_TCP__C_DEAD) { /* SAME HOST: its TCP connection ended meanwhile */
        tfrdv_tcp__todo td;
        tfrdv_tcp__todo_init(&td);
        tfrdv_tcp__conn_fail(t, c, TFRDV_UNAVAILABLE, TFRDV_TCP__ORPHAN, &td);
        pthread_mutex_unlock(&t->mu);
        tfrdv_tcp__todo_run(t, &td);
        return;
    }
    if (c->state == TFRDV_TCP__C_OPEN && !c->wblocked) { /* what the pass queued (tfrdv_tcp__write_soon)
                                 and its deliveries' acknowledgements, after their callbacks ran (a
                                 thread lent by tfrdv_recv leaves its acknowledgement to its next
                                 request or the tick), in one go */
        tfrdv_tcp__todo td;
        tfrdv_tcp__todo_init(&td);
        tfrdv_tcp__write(t, c, &td);
        pthread_mutex_unlock(&t->mu);
        tfrdv_tcp__todo_run(t, &td);
        return;
    }
    pthread_mutex_unlock(&t->mu);
}
/* t->mu held: tfrdv_tcp_destroy was called from a callback and no thread is inside the transport
   any more (its I/O thread exited, nobody polls, no lent thread reads): the caller, the last one
   out, shuts it down (once). */
TFRDV_TCP__PRIVATE int tfrdv_tcp__last_out(tfrdv_tcp* t) {
    if (!t->deferred || t->finishing || t->io_running || t->polling || t->nclaims) return 0;
    t->finishing = 1;
    return 1;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__shutdown(tfrdv_tcp* t);
TFRDV_TCP__PRIVATE void tfrdv_tcp__release(tfrdv_tcp* t);
TFRDV_TCP__PRIVATE void tfrdv_tcp__leave(tfrdv_tcp* t) {
    pthread_mutex_lock(&t->poll_mu);
    tfrdv_tcp__shutdown(t);
    pthread_mutex_unlock(&t->poll_mu);
    tfrdv_tcp__release(t);
}
/* Requests other threads posted while others were in flight on their connection wait in
   t->corkq for the I/O thread (tfrdv_tcp__start_call), which writes each connection's together
   as it wakes (woken for them if it slept) and again before it sleeps (awake 0). */
TFRDV_TCP__PRIVATE void tfrdv_tcp__uncork(tfrdv_tcp* t, int awake) {
    tfrdv_tcp__todo td;
    tfrdv_tcp__todo_init(&td);
    pthread_mutex_lock(&t->mu);
    t->loop_awake = awake;
    t->cork_woken = 0;
    while (t->corkq) {
        tfrdv_tcp__conn* c = t->corkq;
        t->corkq = c->cnext;
        c->corked = 0;
        if (c->state == TFRDV_TCP__C_OPEN && !c->wblocked) tfrdv_tcp__write(t, c, &td);
    }
    pthread_mutex_unlock(&t->mu);
    tfrdv_tcp__todo_run(t, &td);
}
TFRDV_TCP__PRIVATE int tfrdv_tcp__poll_once(tfrdv_tcp* t, int64_t timeout_ns) {
    int n, i, handled = 0, last;
    int64_t now, wait_ns;
    int ms;
    pthread_mutex_lock(&t->poll_mu);
    if (t->destroyed) { pthread_mutex_unlock(&t->poll_mu); return 0; }
    now = tfrdv_tcp__now();
    pthread_mutex_lock(&t->mu);
    wait_ns = t->next_tick - now;
    t->polling = 1;
    t->poller = pthread_self();
    pthread_mutex_unlock(&t->mu);
    if (wait_ns < 0) wait_ns = 0;
    if (timeout_ns >= 0 && timeout_ns < wait_ns) wait_ns = timeout_ns;
    ms = tfrdv_tcp__ms(wait_ns);
#ifdef TFRDV_TCP__EPOLL
    {
        struct epoll_event evs[64];
        n = epoll_wait(t->efd, evs, 64, ms);
        tfrdv_tcp__uncork(t, 1); /* first: the requests go out before the answers are read */
        for (i = 0; i < n; i++) {
            void* p = evs[i].data.ptr;
            uint32_t ev = evs[i].events;
            if (p == (void*)t->wake) { tfrdv_tcp__wake_drain(t->wake); continue; }
            handled++;
            if ((uintptr_t)p & 1u) { /* SAME HOST RING: a connection's doorbell (edge-triggered) */
                tfrdv_tcp__conn_event(t, (tfrdv_tcp__conn*)((uintptr_t)p - 1u), 0, 0, 0);
                continue;
            }
            if (p == (void*)&t->lfd || p == (void*)&t->sfd) { /* sfd: SAME HOST's side listener */
                tfrdv_tcp__todo td;
                tfrdv_tcp__todo_init(&td);
                tfrdv_tcp__accept(t, &td, p == (void*)&t->sfd);
                tfrdv_tcp__todo_run(t, &td);
                continue;
            }
            tfrdv_tcp__conn_event(t, (tfrdv_tcp__conn*)p, (ev & (EPOLLIN | EPOLLRDHUP)) != 0, (ev & EPOLLOUT) != 0,
                                  (ev & (EPOLLERR | EPOLLHUP)) != 0);
        }
    }
#else
    {
        struct pollfd* pf;
        tfrdv_tcp__conn** pc;
        tfrdv_tcp__conn* c;
        int np = 0, lis = -1;
        pthread_mutex_lock(&t->mu);
        if (t->npoll < t->nconns + 2) { /* grow the descriptor arrays (kept until destroy) */
            size_t cap = (t->nconns + 2) * 2;
            struct pollfd* npf = (struct pollfd*)tfrdv_tcp__alloc(t, cap * sizeof *npf);
            tfrdv_tcp__conn** npc = (tfrdv_tcp__conn**)tfrdv_tcp__alloc(t, cap * sizeof *npc);
            if (npf && npc) {
                tfrdv_tcp__free(t, t->pfds, t->npoll * sizeof *t->pfds);
                tfrdv_tcp__free(t, t->pconns, t->npoll * sizeof *t->pconns);
                t->pfds = npf;
                t->pconns = npc;
                t->npoll = cap;
            } else {
                tfrdv_tcp__free(t, npf, cap * sizeof *npf);
                tfrdv_tcp__free(t, npc, cap * sizeof *npc);
            }
        }
        pf = t->pfds;
        pc = t->pconns;
        pf[np].fd = t->wake[0]; pf[np].events = POLLIN; pc[np++] = 0;
        if (t->listening) { lis = np; pf[np].fd = t->lfd; pf[np].events = POLLIN; pc[np++] = 0; }
        for (c = t->conns.next; c != &t->conns && (size_t)np < t->npoll; c = c->next) {
            if (c->fd < 0 || c->claimed) continue;
            pf[np].fd = c->fd;
            pf[np].events = (short)(POLLIN | ((c->wblocked || c->state == TFRDV_TCP__C_CONNECTING) ? POLLOUT : 0));
            pc[np++] = c;
        }
        pthread_mutex_unlock(&t->mu);
        n = poll(pf, (nfds_t)np, ms);
        tfrdv_tcp__uncork(t, 1);
        for (i = 0; n > 0 && i < np; i++) {
            short re = pf[i].revents;
            if (!re) continue;
            if (i == 0) { tfrdv_tcp__wake_drain(t->wake); continue; }
            handled++;
            if (i == lis) {
                tfrdv_tcp__todo td;
                tfrdv_tcp__todo_init(&td);
                tfrdv_tcp__accept(t, &td, 0);
                tfrdv_tcp__todo_run(t, &td);
                continue;
            }
            tfrdv_tcp__conn_event(t, pc[i], (re & POLLIN) != 0, (re & POLLOUT) != 0, (re & (POLLERR | POLLHUP)) != 0);
        }
    }
#endif
    if (tfrdv_tcp__now() >= t->next_tick) tfrdv_tcp__tick(t);
    tfrdv_tcp__uncork(t, 0); /* what the pass's callbacks and other threads posted meanwhile */
    pthread_mutex_lock(&t->mu);
    tfrdv_tcp__free_dead(t);
    t->polling = 0;
    last = tfrdv_tcp__last_out(t);
    pthread_mutex_unlock(&t->mu);
    if (last) tfrdv_tcp__shutdown(t); /* a callback of this poll destroyed the transport */
    pthread_mutex_unlock(&t->poll_mu);
    if (last) tfrdv_tcp__release(t);
    return handled;
}
TFRDV_TCP__PRIVATE void* tfrdv_tcp__thread(void* p) {
    tfrdv_tcp* t = (tfrdv_tcp*)p;
    int deferred, last;
    for (;;) {
        int stop;
        pthread_mutex_lock(&t->mu);
        stop = t->stop;
        pthread_mutex_unlock(&t->mu);
        if (stop) break;
        (void)tfrdv_tcp__poll_once(t, -1);
    }
    pthread_mutex_lock(&t->mu);
    t->io_running = 0;
    deferred = t->deferred;
    last = tfrdv_tcp__last_out(t);
    pthread_mutex_unlock(&t->mu);
    if (deferred) pthread_detach(pthread_self()); /* destroyed from a callback: nobody joins it */
    if (last) tfrdv_tcp__leave(t);
    return 0;
}

/* >>client ----------------------------------------------------------------------------------- */
TFRDV_TCP__PRIVATE const char* tfrdv_tcp__lookup(tfrdv_tcp* t, tfrdv_str w) {
    size_t i;
    for (i = 0; i < t->nworkers; i++)
        if (strlen(t->workers[i].name) == w.len && memcmp(t->workers[i].name, w.ptr, w.len) == 0) return t->workers[i].addr;
    return 0;
}
TFRDV_TCP__PRIVATE tfrdv_tcp__peer* tfrdv_tcp__peer_get(tfrdv_tcp* t, const char* addr) {
    tfrdv_tcp__peer* p;
    size_t n = strlen(addr);
    for (p = t->peers; p; p = p->next)
        if (strcmp(p->addr, addr) == 0) return p;
    p = (tfrdv_tcp__peer*)tfrdv_tcp__alloc(t, sizeof *p + n);
    if (!p) return 0;
    memset(p, 0, sizeof *p);
    p->parked.prev = p->parked.next = &p->parked;
    memcpy(p->addr, addr, n + 1);
    p->next = t->peers;
    t->peers = p;
    return p;
}
/* 1: this thread and c's peer share one CPU for sure: a Unix socket whose peer process (its
   credentials; the affinity of its main thread) may run only on the one CPU this thread may run
   on. Elsewhere nothing tells where the peer runs (a TCP peer, even on this host): the record of
   the spins decides. */
TFRDV_TCP__PRIVATE int tfrdv_tcp__shares_cpu(const tfrdv_tcp__conn* c) {
#if defined(TFRDV_TCP__AFFINITY) && defined(SO_PEERCRED)
    cpu_set_t mine, peer;
    struct ucred cr;
    socklen_t l = (socklen_t)sizeof cr;
    if (!c->is_unix || sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) != 1) return 0;
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) != 0 || cr.pid <= 0 || /* 0: another pid namespace */
        sched_getaffinity(cr.pid, sizeof peer, &peer) != 0)
        return 0;
    return CPU_EQUAL(&mine, &peer);
#else
    (void)c;
    return 0;
#endif
}
/* Whether a lent thread spins before it sleeps (under t->mu). Spinning pays only when the
   response comes within the window while this thread holds its CPU, i.e. when the peer runs on
   another CPU; when it needs ours, spinning delays the very response it waits for. So: never when
   the peer shares this thread's only CPU (shares_cpu); otherwise spin while at least
   5 of the last 8 spins saw the response within the window (the first 8 waits learn), and while
   they do not, probe with one spin every gap waits (a paid probe probes again next time; a missed
   one doubles gap from 16 up to 256), so a change of placement is noticed. */
TFRDV_TCP__PRIVATE int tfrdv_tcp__spin_decide(tfrdv_tcp__spin* s, int shares_cpu) {
    unsigned h;
    int paid = 0;
    s->probe = 0;
    if (shares_cpu) return 0;
    if (s->n < 8) return 1;
    for (h = s->hist & 0xffu; h; h &= h - 1) paid++;
    if (paid >= 5) { /* it pays: when it stops paying, the first probe comes after 16 waits */
        s->gap = 16;
        s->since = 0;
        return 1;
    }
    if (++s->since < s->gap) return 0;
    s->since = 0;
    s->probe = 1;
    return 1;
}
/* the outcome of the spin tfrdv_tcp__spin_decide allowed: paid = the response came meanwhile */
TFRDV_TCP__PRIVATE void tfrdv_tcp__spin_record(tfrdv_tcp__spin* s, int paid) {
    s->hist = ((s->hist << 1) | (paid ? 1u : 0u)) & 0xffu;
    if (s->n < 8) s->n++;
    if (s->probe) s->gap = paid ? 1 : s->gap < 16 ? 16 : s->gap < 256 ? s->gap * 2 : 256;
    s->probe = 0;
}
/* CPUs this thread may run on (spinning while the peer needs the only one would delay it) */
TFRDV_TCP__PRIVATE long tfrdv_tcp__cpus(void) {
#ifdef TFRDV_TCP__AFFINITY
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
#ifdef _SC_NPROCESSORS_ONLN
    return sysconf(_SC_NPROCESSORS_ONLN);
#else
    return 2;
#endif
}
/* e's REQUEST on c, and e among c's calls (under t->mu); 0 on out of memory */
TFRDV_TCP__PRIVATE int tfrdv_tcp__send_request(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__ent* e) {
    tfrdv_tcp_frame f;
    int64_t left = e->deadline == INT64_MAX ? 0 : e->deadline - tfrdv_tcp__now();
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_REQUEST;
    f.id = e->id;
    f.step_id = tfrdv_call_step_id(e->call);
    f.request_id = tfrdv_call_request_id(e->call);
    f.deadline_ns = e->deadline == INT64_MAX ? 0 : (left > 0 ? left : 1);
    f.key = tfrdv_call_key(e->call);
    if (!tfrdv_tcp__queue(t, c, &f)) return 0;
    e->conn = c;
    e->prev = c->calls.prev;
    e->next = &c->calls;
    c->calls.prev->next = e;
    c->calls.prev = e;
    return 1;
}
/* the calls waiting for p move to its new connection c */
TFRDV_TCP__PRIVATE void tfrdv_tcp__unpark(tfrdv_tcp* t, tfrdv_tcp__peer* p, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
    while (p->parked.next != &p->parked) {
        tfrdv_tcp__ent* e = p->parked.next;
        e->prev->next = e->next;
        e->next->prev = e->prev;
        e->prev = e->next = 0;
        if (!tfrdv_tcp__send_request(t, c, e)) {
            tfrdv_tcp__hremove(t, &t->ents, &e->h);
            t->stats.calls_failed++;
            tfrdv_tcp__todo_fin(td, e, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp: out of memory");
        }
    }
}
/* a new connection to p (under t->mu); NULL with msg set on failure */
TFRDV_TCP__PRIVATE tfrdv_tcp__conn* tfrdv_tcp__dial(tfrdv_tcp* t, tfrdv_tcp__peer* p, char* msg, size_t cap, tfrdv_code* code,
                                                    tfrdv_tcp__todo* td) {
    tfrdv_tcp__addr a;
    tfrdv_status st;
    tfrdv_tcp__conn* c;
    int fd, rc;
    if (tfrdv_tcp__parse(p->addr, 0, &a, &st) != TFRDV_OK) {
        snprintf(msg, cap, "%s", st.msg);
        *code = st.code;
        return 0;
    }
    *code = TFRDV_UNAVAILABLE;
    fd = tfrdv_tcp__socket(a.u.sa.sa_family);
    if (fd < 0) {
        snprintf(msg, cap, "tfrdv_tcp: socket for %s: %s", p->addr, strerror(errno));
        return 0;
    }
    tfrdv_tcp__sockopts(t, fd, a.u.sa.sa_family == AF_UNIX);
    if (!(c = tfrdv_tcp__conn_new(t, fd, 0, a.u.sa.sa_family == AF_UNIX))) {
        close(fd);
        snprintf(msg, cap, "tfrdv_tcp: out of memory connecting to %s", p->addr);
        *code = TFRDV_RESOURCE_EXHAUSTED;
        return 0;
    }
    c->peer = p;
    p->conn = c;
    t->stats.connects++;
    c->deadline = tfrdv_tcp__add(tfrdv_tcp__now(), t->cfg.connect_timeout_ns);
    do rc = connect(fd, &a.u.sa, a.len);
    while (rc < 0 && errno == EINTR);
    if (rc < 0 && errno != EINPROGRESS) {
        int e = errno;
        tfrdv_tcp__connect_failed(t, c, strerror(e), td);
        snprintf(msg, cap, "tfrdv_tcp: connect to %s failed: %s", p->addr, strerror(e));
        return 0;
    }
    c->state = rc == 0 ? TFRDV_TCP__C_OPEN : TFRDV_TCP__C_CONNECTING;
    tfrdv_tcp__queue_hello(t, c);
    tfrdv_tcp__unpark(t, p, c, td); /* the calls that waited for it: their REQUESTs follow */
    tfrdv_tcp__arm(t, c);
    return c;
}
/* t->mu held: a kept connection (out of the loop's set, nothing in flight) idle for more than
   100 us may have lost its peer with nobody watching: one poll, no wait, before a call is written
   into it. Its end seen: it closes (nothing to fail), and the caller dials again (NULL). */
TFRDV_TCP__PRIVATE tfrdv_tcp__conn* tfrdv_tcp__kept_alive(tfrdv_tcp* t, tfrdv_tcp__conn* c, tfrdv_tcp__todo* td) {
#ifdef TFRDV_TCP__EPOLL
    struct pollfd pf;
    int64_t now;
    int gone = 0;
    char b;
    if (!c || !c->lazy || c->state != TFRDV_TCP__C_OPEN || c->claimed || (now = tfrdv_tcp__now()) - c->kept_at < 100000)
        return c;
    pf.fd = c->fd;
#ifdef POLLRDHUP
    pf.events = POLLIN | POLLRDHUP;
#else
    pf.events = POLLIN;
#endif
    pf.revents = 0;
    if (poll(&pf, 1, 0) == 1) {
#ifdef POLLRDHUP
        gone = (pf.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
#else
        gone = (pf.revents & (POLLHUP | POLLERR)) != 0;
#endif
        if (!gone && (pf.revents & POLLIN)) { /* EOF, or bytes nobody asked for: the loop reads them */
            ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
            gone = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
            if (!gone) tfrdv_tcp__arm(t, c);
        }
    }
    if (!gone) {
        c->kept_at = now;
        return c;
    }
    tfrdv_tcp__conn_fail(t, c, TFRDV_UNAVAILABLE, "tfrdv_tcp: the peer closed the connection", td);
    return 0;
#else
    (void)t;
    (void)td;
    return c;
#endif
}
/* worker w's address into addr: the table, else the resolve callback (its answer checked like a
   configured one). OK, NOT_FOUND "No worker known as ..." or INVALID_ARGUMENT; no lock held. */
TFRDV_TCP__PRIVATE tfrdv_code tfrdv_tcp__address_of(tfrdv_tcp* t, tfrdv_str w, char* addr, size_t cap, tfrdv_status* st) {
    char wn[256];
    tfrdv_status ast;
    const char* a;
    pthread_mutex_lock(&t->mu);
    if ((a = tfrdv_tcp__lookup(t, w)) != 0) snprintf(addr, cap, "%s", a);
    pthread_mutex_unlock(&t->mu);
    if (a) return tfrdv_tcp__ok(st), TFRDV_OK;
    (void)tfrdv_escape(wn, sizeof wn, w.ptr, w.len);
    addr[0] = 0;
    if (!t->cfg.resolve || !t->cfg.resolve(t->cfg.resolve_user, w.ptr, w.len, addr, cap) || !addr[0])
        return tfrdv_tcp__err(st, TFRDV_NOT_FOUND, "No worker known as %.180s (tfrdv_tcp has no address for it)", wn);
    addr[cap - 1] = 0;
    if (tfrdv_tcp__addr_check(addr, &ast) != TFRDV_OK) /* printable from here on */
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: resolve gave %.60s a bad address: %s", wn, ast.msg + 11);
    return tfrdv_tcp__ok(st), TFRDV_OK;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__start_call(void* user, tfrdv_call* call) {
    tfrdv_tcp* t = (tfrdv_tcp*)user;
    tfrdv_str w = tfrdv_call_src_worker(call), key = tfrdv_call_key(call);
    int64_t dl = tfrdv_call_deadline(call), left = INT64_MAX;
    char addr[512], msg[TFRDV_STATUS_MSG_MAX];
    const char* a; /* the peer's address: the worker table's (under t->mu), or addr */
    tfrdv_tcp__peer* p;
    tfrdv_tcp__conn* c;
    tfrdv_tcp__ent* e;
    tfrdv_tcp__todo td;
    tfrdv_code code = TFRDV_UNAVAILABLE;
    uint64_t zero = 0;
    tfrdv_tcp__todo_init(&td);
    if (dl != INT64_MAX) left = tfrdv_tcp__add(dl, -tfrdv_mgr_now(tfrdv_call_mgr(call))); /* the clock hook: no lock held */
    pthread_mutex_lock(&t->mu);
    memcpy(tfrdv_call_scratch(call), &zero, sizeof zero); /* a lent thread reads it under t->mu */
    if (dl != INT64_MAX) {
        if (left <= 0) {
            pthread_mutex_unlock(&t->mu);
            tfrdv_call_finish(call, TFRDV_DEADLINE_EXCEEDED, "tfrdv_tcp: RecvTensor deadline exceeded before it was sent", 0, 0);
            return;
        }
    }
    if (key.len > t->lim.max_key_len) {
        pthread_mutex_unlock(&t->mu);
        tfrdv_call_finish(call, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp: key longer than max_key_len", 0, 0);
        return;
    }
    if (t->closing) {
        pthread_mutex_unlock(&t->mu);
        tfrdv_call_finish(call, TFRDV_UNAVAILABLE, "tfrdv_tcp: the transport was destroyed", 0, 0);
        return;
    }
    if (!(a = tfrdv_tcp__lookup(t, w))) { /* not in the worker table: resolve runs without the lock */
        tfrdv_status ast;
        pthread_mutex_unlock(&t->mu);
        if ((code = tfrdv_tcp__address_of(t, w, addr, sizeof addr, &ast)) != TFRDV_OK) { /* TensorFlow's
                                                       code for a worker without address: INTERNAL */
            tfrdv_call_finish(call, code == TFRDV_NOT_FOUND ? TFRDV_INTERNAL : code, ast.msg, 0, 0);
            return;
        }
        pthread_mutex_lock(&t->mu);
        if (t->closing) {
            pthread_mutex_unlock(&t->mu);
            tfrdv_call_finish(call, TFRDV_UNAVAILABLE, "tfrdv_tcp: the transport was destroyed", 0, 0);
            return;
        }
        a = addr;
    }
    if (!(p = tfrdv_tcp__peer_get(t, a))) {
        pthread_mutex_unlock(&t->mu);
        tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp: out of memory", 0, 0);
        return;
    }
    c = tfrdv_tcp__kept_alive(t, p->conn, &td);
    if (!c) {
        int64_t now = tfrdv_tcp__now();
        int retry = t->cfg.connect_retry_ns > 0; /* a peer not up yet: wait for it */
        if (p->retry_at > now && !retry) {
            char wn[100];
            t->stats.backoff_rejects++;
            t->stats.calls_failed++;
            (void)tfrdv_escape(wn, sizeof wn, w.ptr, w.len);
            snprintf(msg, sizeof msg, "tfrdv_tcp: %s (%.*s) unreachable: %s; next connect attempt in %lld ms", p->addr,
                     (int)strlen(wn), wn, p->err, (long long)tfrdv_tcp__ms(p->retry_at - now));
            pthread_mutex_unlock(&t->mu);
            tfrdv_call_finish(call, TFRDV_UNAVAILABLE, msg, 0, 0);
            return;
        }
        if (p->retry_at <= now && !(c = tfrdv_tcp__dial(t, p, msg, sizeof msg, &code, &td)) &&
            (!retry || code != TFRDV_UNAVAILABLE)) {
            t->stats.calls_failed++;
            pthread_mutex_unlock(&t->mu);
            tfrdv_tcp__todo_run(t, &td);
            tfrdv_call_finish(call, code, msg, 0, 0);
            return;
        }
    }
    if (c && tfrdv_tcp__impostor(c, w)) { /* the peer at that address is another worker */
        t->stats.calls_failed++;
        tfrdv_tcp__impostor_msg(c, w, msg, sizeof msg);
        pthread_mutex_unlock(&t->mu);
        tfrdv_call_finish(call, TFRDV_FAILED_PRECONDITION, msg, 0, 0);
        return;
    }
    if (!(e = tfrdv_tcp__ent_new(t))) {
        pthread_mutex_unlock(&t->mu);
        tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp: out of memory", 0, 0);
        return;
    }
    e->id = ++t->next_id;
    e->call = call;
    e->deadline = left == INT64_MAX ? INT64_MAX : tfrdv_tcp__add(tfrdv_tcp__now(), left);
    e->park_until = tfrdv_tcp__add(tfrdv_tcp__now(), t->cfg.connect_retry_ns);
    if (e->park_until > e->deadline) e->park_until = e->deadline;
    if (e->deadline < t->ent_min_deadline) t->ent_min_deadline = e->deadline;
    memcpy(tfrdv_call_scratch(call), &e->id, sizeof e->id);
    if (!c) { /* the peer refused or is in back-off: the call waits for the next connection */
        tfrdv_tcp__park(p, e);
    } else if (!tfrdv_tcp__send_request(t, c, e)) {
        tfrdv_tcp__ent_free(t, e);
        pthread_mutex_unlock(&t->mu);
        tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp: out of memory", 0, 0);
        return;
    }
    tfrdv_tcp__ent_insert(t, e);
    t->stats.calls_started++;
    if (c && c->lazy && !tfrdv_call_will_wait(call)) tfrdv_tcp__arm(t, c); /* no thread will read it */
#ifdef TFRDV_TCP__EPOLL
    else if (c && c->shm && !c->lazy && c->state == TFRDV_TCP__C_OPEN && c->claimed == TFRDV_TCP__BY_NONE &&
             c->calls.next == e && e->next == &c->calls && tfrdv_call_will_wait(call)) {
        c->lazy = 1; /* SAME HOST RING: kept for the thread that will wait, from now (its answer
                        rings nobody: on one CPU the loop would read it first, and keep reading) */
        c->kept_at = tfrdv_tcp__now();
        tfrdv_tcp__shm_keep(c);
    }
#endif
    if (c && c->state == TFRDV_TCP__C_OPEN && !c->wblocked) {
        if (t->has_thread && c->claimed == TFRDV_TCP__BY_NONE && (c->calls.next != e || e->next != &c->calls) &&
            !tfrdv_call_will_wait(call)) { /* others in flight: the I/O thread writes them together */
            if (!c->corked) { c->corked = 1; c->cnext = t->corkq; t->corkq = c; }
            if (!t->loop_awake && !t->cork_woken) { t->cork_woken = 1; tfrdv_tcp__wake(t); }
        } else {
            tfrdv_tcp__write_soon(t, c, &td);
        }
    }
    pthread_mutex_unlock(&t->mu);
    tfrdv_tcp__todo_run(t, &td);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__cancel_call(void* user, tfrdv_call* call) {
    tfrdv_tcp* t = (tfrdv_tcp*)user;
    tfrdv_tcp__ent* e;
    tfrdv_tcp__todo td;
    uint64_t id;
    memcpy(&id, tfrdv_call_scratch(call), sizeof id);
    tfrdv_tcp__todo_init(&td);
    pthread_mutex_lock(&t->mu);
    e = id ? tfrdv_tcp__ent_find(t, id) : 0;
    if (e && e->call == call) {
        tfrdv_tcp__conn* c = e->conn;
        if (tfrdv_tcp__detach_call(t, e, TFRDV_CANCELLED, "tfrdv_tcp: call cancelled", &td)) {
            t->stats.calls_cancelled++;
            tfrdv_tcp__cancel_frame(t, c, id, &td);
        }
    }
    pthread_mutex_unlock(&t->mu);
    tfrdv_tcp__todo_run(t, &td);
}

/* t->mu held: this thread reads c now (it is the poller inside c's event, or c's lent thread) */
TFRDV_TCP__PRIVATE int tfrdv_tcp__reads_it(tfrdv_tcp* t, const tfrdv_tcp__conn* c) {
    if (c->claimed == TFRDV_TCP__BY_LOOP) return t->polling && pthread_equal(t->poller, pthread_self());
    return c->claimed == TFRDV_TCP__BY_WAITER && pthread_equal(c->claimer, pthread_self());
}
/* A thread blocked in tfrdv_recv (tfrdv_transport.wait): it takes the call's connection out of
   the event loop and reads it itself until the call is finished, the time is up, the call is
   cancelled or the transport closes; the response wakes this thread directly instead of the loop
   and then it. Only an open client connection nobody else reads; 0 otherwise. */
TFRDV_TCP__PRIVATE int tfrdv_tcp__wait(void* user, tfrdv_call* call, int64_t timeout_ns) {
    tfrdv_tcp* t = (tfrdv_tcp*)user;
    tfrdv_tcp__ent* e;
    tfrdv_tcp__conn* c;
    uint64_t id;
    int64_t now = tfrdv_tcp__now(), end = timeout_ns >= 0 ? tfrdv_tcp__add(now, timeout_ns) : INT64_MAX;
    int64_t spin_until = 0;
    int last, spun = 0;
    pthread_mutex_lock(&t->mu);
    memcpy(&id, tfrdv_call_scratch(call), sizeof id);
    for (;;) { /* the loop reads the connection for one event (it may be finishing the previous
                  fetch): wait for it to let go rather than leave this fetch to the loop */
        struct timespec ts;
        int64_t left;
        e = id ? tfrdv_tcp__ent_find(t, id) : 0;
        c = e && e->call == call ? e->conn : 0;
        if (c && tfrdv_tcp__reads_it(t, c)) { /* in a callback of the thread that reads c */
            tfrdv_tcp__todo td;
            int failed;
            tfrdv_tcp__todo_init(&td);
            if ((failed = tfrdv_tcp__detach_call(t, e, TFRDV_FAILED_PRECONDITION, "tfrdv_tcp: a blocking receive "
                                                 "inside a callback of the thread that reads its connection would wait "
                                                 "forever (use tfrdv_recv_async)", &td)) != 0)
                tfrdv_tcp__cancel_frame(t, c, id, &td);
            pthread_mutex_unlock(&t->mu);
            tfrdv_tcp__todo_run(t, &td);
            return failed;
        }
        if (!c || c->claimed != TFRDV_TCP__BY_LOOP || t->closing) break;
        if ((left = end - tfrdv_tcp__now()) <= 0) {
            pthread_mutex_unlock(&t->mu);
            return 1; /* the time is up: tfrdv_recv acts on it */
        }
        if (left > 10000000) left = 10000000; /* then look again */
        clock_gettime(CLOCK_REALTIME, &ts); /* the condition variable's clock */
        left += ts.tv_nsec;
        ts.tv_sec += (time_t)(left / 1000000000);
        ts.tv_nsec = (long)(left % 1000000000);
        t->loop_waiters++;
        (void)pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        t->loop_waiters--;
    }
    if (!c || c->server || c->state != TFRDV_TCP__C_OPEN || !c->hello_ok || c->claimed || t->closing ||
        (c->cwake[0] < 0 && !tfrdv_tcp__wake_open(c->cwake))) {
        if (e && e->call == call) t->stats.waits_declined++;
        if (c && c->lazy) tfrdv_tcp__arm(t, c); /* the loop reads it then */
        pthread_mutex_unlock(&t->mu);
        return 0;
    }
    t->stats.waits_lent++;
    c->claimed = TFRDV_TCP__BY_WAITER;
    c->claimer = pthread_self();
    c->lazy = 0;
    t->nclaims++;
    if (t->cfg.spin_ns > 0) {
        if (c->spin.checks-- <= 0) { /* where the two ends run, now and then (system calls) */
            c->spin.shares_cpu = tfrdv_tcp__shares_cpu(c);
            c->spin.checks = 63;
        }
        if (tfrdv_tcp__spin_decide(&c->spin, c->spin.shares_cpu))
            spin_until = tfrdv_tcp__add(now, t->cfg.spin_ns);
    }
#ifdef TFRDV_TCP__EPOLL
    if (c->in_epoll) (void)epoll_ctl(t->efd, EPOLL_CTL_DEL, c->fd, 0);
    c->in_epoll = 0;
#endif
    for (;;) {
        struct pollfd pf[2];
        int64_t left = end - tfrdv_tcp__now();
        int n, fx;
        uint32_t lw = 0;
        e = tfrdv_tcp__ent_find(t, id);
        if (!e || e->call != call || c->state != TFRDV_TCP__C_OPEN || t->closing || left <= 0) break;
        /* SAME HOST RING: a futex sleep while nothing is due on the socket from this side */
        fx = c->shm && c->shm->fx && c->shm->tx_ok && !c->wblocked && c->rx == TFRDV_TCP__RX_HDR && c->rlen == c->roff;
        if (fx) lw = __atomic_load_n(&c->shm->lwake, __ATOMIC_SEQ_CST);
        pf[0].fd = c->fd;
        pf[0].events = (short)(POLLIN | (c->wblocked ? POLLOUT : 0));
        pf[1].fd = c->cwake[0];
        pf[1].events = POLLIN;
        pf[0].revents = pf[1].revents = 0;
        pthread_mutex_unlock(&t->mu);
        n = 0;
        if (spin_until) { /* the response is often a few microseconds away: do not sleep yet */
            int ring = 0;
            do n = (ring = tfrdv_tcp__shm_ready(c, 1)) != 0 ? 1 : poll(pf, 2, 0); /* SAME HOST RING: memory first */
            while (n == 0 && tfrdv_tcp__now() < spin_until && tfrdv_tcp__now() < end);
            spin_until = 0;
            spun = n > 0 && (pf[0].revents || ring) ? 2 : 1;
        }
        if (n == 0) n = tfrdv_tcp__shm_nap(c, fx); /* SAME HOST RING: announces the sleep; 1: frames came */
        if (n == 0 && fx) n = tfrdv_tcp__shm_sleep(c, pf, left, lw);
        else if (n == 0)
            n = poll(pf, 2, left == INT64_MAX ? -1 : left > 3600000000000LL ? 3600000 : (int)((left + 999999) / 1000000));
        if (n > 0 && pf[1].revents) tfrdv_tcp__wake_drain(c->cwake);
        if (n > 0 && pf[0].revents)
            tfrdv_tcp__conn_io(t, c, (pf[0].revents & POLLIN) != 0, (pf[0].revents & POLLOUT) != 0,
                               (pf[0].revents & (POLLERR | POLLHUP)) != 0);
        else if (c->shm) tfrdv_tcp__conn_io(t, c, 0, 0, 0); /* SAME HOST RING: its frames */
        pthread_mutex_lock(&t->mu);
        if (spun) tfrdv_tcp__spin_record(&c->spin, spun == 2);
        spun = 0;
    }
    c->claimed = TFRDV_TCP__BY_NONE;
    t->nclaims--;
#ifdef TFRDV_TCP__EPOLL
    if (c->state == TFRDV_TCP__C_OPEN && !c->in_epoll && c->calls.next == &c->calls && !c->wblocked &&
        c->rx == TFRDV_TCP__RX_HDR && c->rlen == c->roff && !t->closing)
    {
        c->lazy = 1; /* nothing in flight: kept for the next lent thread, no epoll_ctl pair per
                        fetch; a call no thread will read, a decline or the second tick re-arms */
        c->kept_at = tfrdv_tcp__now();
        tfrdv_tcp__shm_keep(c); /* SAME HOST RING: nobody to wake until then (tfrdv_tcp__arm) */
    }
    else
#endif
    {
        if (c->shm) tfrdv_tcp__shm_handback(c); /* SAME HOST RING: the loop's doorbell again */
        if (c->state == TFRDV_TCP__C_OPEN) tfrdv_tcp__arm(t, c); /* back to the loop (level-triggered:
                                                                  what is left wakes it) */
    }
    if (t->closing && t->nclaims == 0) pthread_cond_broadcast(&t->cv);
    last = tfrdv_tcp__last_out(t);
    pthread_mutex_unlock(&t->mu);
    if (last) tfrdv_tcp__leave(t); /* a callback on this thread destroyed the transport */
    return 1;
}

/* >>control ---------------------------------------------------------------------------------- */
/* a manager created with (or destroyed holding) this transport's vtable */
TFRDV_TCP__PRIVATE void tfrdv_tcp__bind(void* user, tfrdv_mgr* mgr, int bound) {
    tfrdv_tcp* t = (tfrdv_tcp*)user;
    size_t i;
    pthread_mutex_lock(&t->mu);
    for (i = 0; i < t->nbound && t->bound[i] != mgr; i++) {}
    if (!bound && i < t->nbound) t->bound[i] = t->bound[--t->nbound];
    if (bound && i == t->nbound) {
        if (t->nbound == t->capbound) {
            size_t ncap = t->capbound ? 2 * t->capbound : 4;
            tfrdv_mgr** nb = (tfrdv_mgr**)tfrdv_tcp__alloc(t, ncap * sizeof *nb);
            if (!nb) { /* its deadlines then need an attach or its own tfrdv_mgr_expire */
                pthread_mutex_unlock(&t->mu);
                tfrdv_tcp__log(t, 1, "tfrdv_tcp: out of memory: manager %s's deadlines are not driven", tfrdv_mgr_worker_name(mgr));
                return;
            }
            if (t->nbound) memcpy(nb, t->bound, t->nbound * sizeof *nb);
            tfrdv_tcp__free(t, t->bound, t->capbound * sizeof *t->bound);
            t->bound = nb;
            t->capbound = ncap;
        }
        t->bound[t->nbound++] = mgr;
    }
    pthread_mutex_unlock(&t->mu);
}
TFRDV_TCP__PRIVATE int tfrdv_tcp__inside(tfrdv_tcp* t);
/* the worker's incarnation from its HELLO: an open connection answers at once; otherwise this
   thread connects (and again after each back-off) until the peer greets or the time is up */
TFRDV_TCP__PRIVATE tfrdv_code tfrdv_tcp__peer_inc(void* user, tfrdv_mgr* mgr, tfrdv_str w, int64_t timeout_ns,
                                                  uint64_t* inc, tfrdv_status* st) {
    tfrdv_tcp* t = (tfrdv_tcp*)user;
    char addr[512], wn[160], msg[TFRDV_STATUS_MSG_MAX];
    int64_t now = tfrdv_tcp__now(), end = timeout_ns < 0 || timeout_ns > INT64_MAX - now ? INT64_MAX : now + timeout_ns;
    int64_t next_try = 0;
    tfrdv_code code = TFRDV_UNAVAILABLE;
    (void)mgr;
    (void)tfrdv_escape(wn, sizeof wn, w.ptr, w.len);
    pthread_mutex_lock(&t->mu);
    if (tfrdv_tcp__inside(t)) {
        pthread_mutex_unlock(&t->mu);
        return tfrdv_tcp__err(st, TFRDV_FAILED_PRECONDITION, "tfrdv_tcp: asking %s's incarnation on the thread that reads "
                              "the transport's sockets would wait forever", wn);
    }
    pthread_mutex_unlock(&t->mu);
    if ((code = tfrdv_tcp__address_of(t, w, addr, sizeof addr, st)) != TFRDV_OK) return code;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        tfrdv_tcp__peer* p;
        tfrdv_tcp__conn* c;
        tfrdv_tcp__todo td;
        int64_t until;
        if (t->closing) { code = TFRDV_UNAVAILABLE; snprintf(msg, sizeof msg, "the transport was destroyed"); break; }
        if (!(p = tfrdv_tcp__peer_get(t, addr))) { code = TFRDV_RESOURCE_EXHAUSTED; snprintf(msg, sizeof msg, "out of memory"); break; }
        c = p->conn;
        if (c && c->hello_ok && c->state == TFRDV_TCP__C_OPEN) {
            if (tfrdv_tcp__impostor(c, w)) { /* the address answers as another worker */
                tfrdv_tcp__impostor_msg(c, w, msg, sizeof msg);
                pthread_mutex_unlock(&t->mu);
                return tfrdv_status_set(st, TFRDV_FAILED_PRECONDITION, msg);
            }
            *inc = c->peer_incarnation;
            pthread_mutex_unlock(&t->mu);
            return tfrdv_tcp__ok(st), TFRDV_OK;
        }
        now = tfrdv_tcp__now();
        if (now >= end) {
            code = timeout_ns == 0 ? TFRDV_UNAVAILABLE : TFRDV_DEADLINE_EXCEEDED;
            snprintf(msg, sizeof msg, "%.100s did not answer%s%.120s", addr, p->err[0] ? ": " : "", p->err);
            break;
        }
        if (!c && p->retry_at <= now && now >= next_try) {
            char why[TFRDV_STATUS_MSG_MAX];
            tfrdv_tcp__conn* nc;
            tfrdv_tcp__todo_init(&td);
            nc = tfrdv_tcp__dial(t, p, why, sizeof why, &code, &td);
            if (nc && nc->state == TFRDV_TCP__C_OPEN) tfrdv_tcp__write(t, nc, &td); /* the HELLO (a
                                                     connecting socket sends it once writable) */
            pthread_mutex_unlock(&t->mu);
            tfrdv_tcp__todo_run(t, &td);
            pthread_mutex_lock(&t->mu);
            if (!nc && code != TFRDV_UNAVAILABLE) { snprintf(msg, sizeof msg, "%s", why); break; } /* a bad
                                                     address, out of memory: no use trying again */
            next_try = tfrdv_tcp__now() + 1000000; /* at most one attempt a millisecond (backoff_ns < 0) */
            continue;
        }
        until = end;
        if (!c && (p->retry_at > next_try ? p->retry_at : next_try) < until)
            until = p->retry_at > next_try ? p->retry_at : next_try; /* the next attempt */
        if (until - now > 10000000) until = now + 10000000;
        if (t->has_thread) { /* the I/O thread reads the HELLO */
            struct timespec ts;
            int64_t left = until - now;
            clock_gettime(CLOCK_REALTIME, &ts);
            left += ts.tv_nsec;
            ts.tv_sec += (time_t)(left / 1000000000);
            ts.tv_nsec = (long)(left % 1000000000);
            t->hello_waiters++;
            (void)pthread_cond_timedwait(&t->cv, &t->mu, &ts);
            t->hello_waiters--;
        } else { /* host-driven: this thread polls meanwhile (callers of tfrdv_tcp_poll take turns) */
            pthread_mutex_unlock(&t->mu);
            (void)tfrdv_tcp_poll(t, until - now);
            pthread_mutex_lock(&t->mu);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return tfrdv_tcp__err(st, code, "tfrdv_tcp: worker %s: %s", wn, msg);
}

/* >>object ----------------------------------------------------------------------------------- */
TFRDV_API tfrdv_tcp_config tfrdv_tcp_config_init(void) {
    tfrdv_tcp_config c;
    memset(&c, 0, sizeof c);
    return c;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__pool_unuse(struct tfrdv_tcp_pool* p);
TFRDV_TCP__PRIVATE void tfrdv_tcp__free_all(tfrdv_tcp* t) {
    size_t i;
    tfrdv_tcp__peer* p;
    while (t->free_ents) { tfrdv_tcp__ent* e = t->free_ents; t->free_ents = e->tnext; tfrdv_tcp__free(t, e, sizeof *e); }
    while (t->free_reqs) { tfrdv_tcp__req* r = t->free_reqs; t->free_reqs = r->tnext; tfrdv_tcp__free(t, r, sizeof *r + r->key_cap); }
    for (i = 0; i < (size_t)t->nfree_cms; i++) tfrdv_cancel_mgr_destroy(t->free_cms[i]);
    tfrdv_tcp__free(t, t->free_cms, TFRDV_TCP__FREE_MAX * sizeof *t->free_cms);
    tfrdv_tcp__free(t, t->ents.tab, t->ents.cap * sizeof *t->ents.tab);
    tfrdv_tcp__free(t, t->reqs.tab, t->reqs.cap * sizeof *t->reqs.tab);
    for (i = 0; i < t->nworkers; i++) { tfrdv_tcp__strfree(t, t->workers[i].name); tfrdv_tcp__strfree(t, t->workers[i].addr); }
    tfrdv_tcp__free(t, t->workers, t->capworkers * sizeof *t->workers);
    tfrdv_tcp__free(t, t->bound, t->capbound * sizeof *t->bound);
    while ((p = t->peers) != 0) { t->peers = p->next; tfrdv_tcp__free(t, p, sizeof *p + strlen(p->addr)); }
    while (t->corkq) { t->corkq->corked = 0; t->corkq = t->corkq->cnext; }
    tfrdv_tcp__free_dead(t);
    tfrdv_tcp__lent_drop(t, t->orphans); /* ZERO COPY: held since their connection ended */
    t->orphans = 0;
    while (t->npools > 0) tfrdv_tcp__pool_unuse(t->pools[--t->npools]); /* ZERO COPY */
#ifndef TFRDV_TCP__EPOLL
    tfrdv_tcp__free(t, t->pfds, t->npoll * sizeof *t->pfds);
    tfrdv_tcp__free(t, t->pconns, t->npoll * sizeof *t->pconns);
#endif
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->poll_mu);
    pthread_cond_destroy(&t->cv);
    tfrdv_tcp__free(t, t, sizeof *t);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__unref(tfrdv_tcp* t) {
    if (__atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0) tfrdv_tcp__free_all(t);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__transport_destroy(void* user) { tfrdv_tcp__unref((tfrdv_tcp*)user); }

TFRDV_TCP__PRIVATE tfrdv_code tfrdv_tcp__set_worker(tfrdv_tcp* t, const char* worker, const char* address, tfrdv_status* st) {
    size_t i;
    char *n = 0, *a = 0;
    for (i = 0; i < t->nworkers; i++)
        if (strcmp(t->workers[i].name, worker) == 0) break;
    if (!address) {
        if (i < t->nworkers) {
            tfrdv_tcp__strfree(t, t->workers[i].name);
            tfrdv_tcp__strfree(t, t->workers[i].addr);
            t->workers[i] = t->workers[--t->nworkers];
        }
        tfrdv_tcp__ok(st);
        return TFRDV_OK;
    }
    if (!(a = tfrdv_tcp__strdup(t, address))) return tfrdv_tcp__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp: out of memory");
    if (i < t->nworkers) {
        tfrdv_tcp__strfree(t, t->workers[i].addr);
        t->workers[i].addr = a;
        tfrdv_tcp__ok(st);
        return TFRDV_OK;
    }
    if (t->nworkers == t->capworkers) {
        size_t nc = t->capworkers ? t->capworkers * 2 : 8;
        tfrdv_tcp__wk* nw = (tfrdv_tcp__wk*)tfrdv_tcp__alloc(t, nc * sizeof *nw);
        if (!nw) { tfrdv_tcp__strfree(t, a); return tfrdv_tcp__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp: out of memory"); }
        if (t->nworkers) memcpy(nw, t->workers, t->nworkers * sizeof *nw);
        tfrdv_tcp__free(t, t->workers, t->capworkers * sizeof *t->workers);
        t->workers = nw;
        t->capworkers = nc;
    }
    if (!(n = tfrdv_tcp__strdup(t, worker))) { tfrdv_tcp__strfree(t, a); return tfrdv_tcp__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp: out of memory"); }
    t->workers[t->nworkers].name = n;
    t->workers[t->nworkers].addr = a;
    t->workers[t->nworkers].hash = 0;
    t->nworkers++;
    tfrdv_tcp__ok(st);
    return TFRDV_OK;
}
TFRDV_API tfrdv_code tfrdv_tcp_set_worker(tfrdv_tcp* t, const char* worker, const char* address, tfrdv_status* st) {
    tfrdv_code rc;
    tfrdv_status est;
    char wn[2 * TFRDV_TCP_NAME_MAX];
    if (!t || !worker) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_set_worker: NULL argument");
    (void)tfrdv_escape(wn, sizeof wn, worker, strlen(worker));
    if (!tfrdv_tcp__worker_name_ok(worker))
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_set_worker: worker \"%.200s\" is not a worker name (/job:J/replica:R/task:T)", wn);
    if (address && tfrdv_tcp__addr_check(address, &est) != TFRDV_OK)
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_set_worker: address of %.200s: %s", wn, est.msg + 11);
    pthread_mutex_lock(&t->mu);
    rc = tfrdv_tcp__set_worker(t, worker, address, st);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* the listener; a busy address is an error, a stale Unix socket file is replaced */
TFRDV_TCP__PRIVATE tfrdv_code tfrdv_tcp__listen(tfrdv_tcp* t, tfrdv_status* st) {
    tfrdv_tcp__addr a, b;
    const char* s = t->cfg.listen_address;
    int fd, fam;
    socklen_t bl = (socklen_t)sizeof b.u;
    if (tfrdv_tcp__parse(s, 1, &a, st) != TFRDV_OK) return st ? st->code : TFRDV_INVALID_ARGUMENT;
    fam = a.u.sa.sa_family;
    fd = tfrdv_tcp__socket(fam);
    if (fd < 0) return tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp: socket for %s: %s", s, strerror(errno));
    if (fam != AF_UNIX) tfrdv_tcp__setint(fd, SOL_SOCKET, SO_REUSEADDR, 1);
    if (fam == AF_INET6) tfrdv_tcp__setint(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
    if (bind(fd, &a.u.sa, a.len) != 0) {
        int e = errno;
        struct stat fst;
        if (e == EADDRINUSE && fam == AF_UNIX && a.u.un.sun_path[0] &&
            (lstat(a.u.un.sun_path, &fst) != 0 || !S_ISSOCK(fst.st_mode))) {
            close(fd); /* a regular file, a directory, a link: never ours to remove */
            return tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp: listen address %s: the path exists and is not a socket", s);
        }
        if (e == EADDRINUSE && fam == AF_UNIX && a.u.un.sun_path[0]) { /* stale file or live server? */
            int probe = socket(AF_UNIX, SOCK_STREAM, 0), live = 1;
            if (probe >= 0) {
                if (connect(probe, &a.u.sa, a.len) != 0 && errno == ECONNREFUSED) live = 0;
                close(probe);
            }
            if (!live && unlink(a.u.un.sun_path) == 0 && bind(fd, &a.u.sa, a.len) == 0) e = 0;
            else if (live) {
                close(fd);
                return tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp: listen address %s is in use by a live server", s);
            } else {
                e = errno;
            }
        }
        if (e) {
            close(fd);
            if (e == EADDRINUSE) return tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp: listen address %s is already in use (never shared: pick another port, or 0 for a free one)", s);
            return tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp: bind %s: %s", s, strerror(e));
        }
    }
    if (fam == AF_UNIX && a.u.un.sun_path[0]) {
        (void)chmod(a.u.un.sun_path, (mode_t)(t->cfg.unix_mode ? t->cfg.unix_mode : 0600));
        if (stat(a.u.un.sun_path, &t->lst) == 0) t->lfile = 1;
        snprintf(t->lpath, sizeof t->lpath, "%s", a.u.un.sun_path);
    }
    if (listen(fd, 1024) != 0) {
        int e = errno;
        close(fd);
        if (t->lfile) unlink(t->lpath);
        t->lfile = 0;
        return tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp: listen %s: %s", s, strerror(e));
    }
    t->lfd = fd;
    t->lunix = fam == AF_UNIX;
    if (fam == AF_UNIX) {
        snprintf(t->laddr, sizeof t->laddr, "%s", s);
    } else if (getsockname(fd, &b.u.sa, &bl) == 0) {
        char host[INET6_ADDRSTRLEN];
        if (b.u.sa.sa_family == AF_INET6) {
            static const struct in6_addr any6 = IN6ADDR_ANY_INIT;
            t->port = ntohs(b.u.in6.sin6_port);
            if (memcmp(&b.u.in6.sin6_addr, &any6, sizeof any6) == 0) snprintf(host, sizeof host, "::1");
            else inet_ntop(AF_INET6, &b.u.in6.sin6_addr, host, sizeof host);
            snprintf(t->laddr, sizeof t->laddr, "[%s]:%d", host, t->port);
        } else {
            t->port = ntohs(b.u.in4.sin_port);
            if (b.u.in4.sin_addr.s_addr == htonl(INADDR_ANY)) snprintf(host, sizeof host, "127.0.0.1");
            else inet_ntop(AF_INET, &b.u.in4.sin_addr, host, sizeof host);
            snprintf(t->laddr, sizeof t->laddr, "%s:%d", host, t->port);
        }
    }
    return TFRDV_OK;
}

TFRDV_API tfrdv_code tfrdv_tcp_create(const tfrdv_tcp_config* cfg, tfrdv_tcp** out, tfrdv_status* st) {
    tfrdv_tcp* t;
    tfrdv_tcp_config c;
    size_t i;
    if (out) *out = 0;
    if (!cfg || !out) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: NULL argument");
    c = *cfg;
    if (!c.hooks.allocator.alloc_fn != !c.hooks.allocator.free_fn)
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: allocator needs both alloc_fn and free_fn");
    if (c.num_threads < -1) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: num_threads %d (-1, 0 or more)", c.num_threads);
    if (c.frame_bytes && (c.frame_bytes < 4096 || c.frame_bytes > (16u << 20)))
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: frame_bytes %u outside 4 KiB..16 MiB", c.frame_bytes);
    if (c.max_connections < 0 || c.max_requests < 0 || c.max_requests_per_connection < 0 || c.connect_timeout_ns < 0 ||
        c.handshake_timeout_ns < 0 || c.expire_interval_ns < 0 || c.backoff_max_ns < 0)
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: negative %s",
                              c.max_connections < 0 ? "max_connections" : c.max_requests < 0 ? "max_requests"
                              : c.max_requests_per_connection < 0 ? "max_requests_per_connection"
                              : c.connect_timeout_ns < 0 ? "connect_timeout_ns" : c.handshake_timeout_ns < 0 ? "handshake_timeout_ns"
                              : c.expire_interval_ns < 0 ? "expire_interval_ns" : "backoff_max_ns");
    if (c.unix_mode < 0 || c.unix_mode > 0777) /* -1 (TFRDV_OFF) would give the file 07777 */
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: unix_mode %d (%#o) outside 0..0777 (0: 0600)", c.unix_mode, (unsigned)c.unix_mode);
    if (c.max_key_len > (16u << 20) || c.max_message_len > (16u << 20))
        return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: %s above 16 MiB (a frame's limit; every connection buffers one)",
                              c.max_key_len > (16u << 20) ? "max_key_len" : "max_message_len");
    if (c.num_workers && !c.workers) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: num_workers %zu with workers NULL", c.num_workers);
    if (c.same_host < TFRDV_OFF) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: same_host %lld (TFRDV_OFF, 0 or a size in bytes)", (long long)c.same_host);
    for (i = 0; i < c.num_workers; i++) {
        const tfrdv_worker* w = &c.workers[i];
        char wn[2 * TFRDV_TCP_NAME_MAX];
        tfrdv_status est;
        if (!w->name || !w->address) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: workers[%zu] has no name or address", i);
        (void)tfrdv_escape(wn, sizeof wn, w->name, strlen(w->name));
        if (!tfrdv_tcp__worker_name_ok(w->name))
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: workers[%zu].name \"%.200s\" is not a worker name (/job:J/replica:R/task:T)", i, wn);
        if (tfrdv_tcp__addr_check(w->address, &est) != TFRDV_OK)
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: workers[%zu].address of %.200s: %s", i, wn, est.msg + 11);
    }
    if (!c.frame_bytes) c.frame_bytes = 256u << 10;
    if (!c.notsent_lowat) c.notsent_lowat = 512 << 10;
    if (!c.max_connections) c.max_connections = 1024;
    if (!c.max_requests) c.max_requests = 65536;
    if (!c.max_requests_per_connection) c.max_requests_per_connection = 4096;
    if (!c.connect_timeout_ns) c.connect_timeout_ns = 5000000000LL;
    if (!c.connect_retry_ns) c.connect_retry_ns = 30000000000LL;
    if (!c.handshake_timeout_ns) c.handshake_timeout_ns = 5000000000LL;
    if (!c.backoff_ns) c.backoff_ns = 100000000LL;
    if (!c.backoff_max_ns) c.backoff_max_ns = 1000000000LL;
    if (!c.keepalive_ns) c.keepalive_ns = 10000000000LL;
    if (!c.user_timeout_ns) c.user_timeout_ns = 30000000000LL;
    if (!c.expire_interval_ns) c.expire_interval_ns = 20000000LL;
    if (!c.stall_timeout_ns) c.stall_timeout_ns = 5000000000LL;
    if (!c.spin_ns) c.spin_ns = 50000;
    {
        tfrdv_tcp tmp;
        memset(&tmp, 0, sizeof tmp.cfg);
        tmp.cfg.hooks = c.hooks;
        t = (tfrdv_tcp*)tfrdv_tcp__alloc(&tmp, sizeof *t);
    }
    if (!t) return tfrdv_tcp__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp_create: out of memory");
    memset(t, 0, sizeof *t);
    t->cfg = c;
    t->cfg.workers = 0;
    t->cfg.num_workers = 0;
    t->cfg.listen_address = 0;
    t->lim.max_key_len = c.max_key_len;
    t->lim.max_message_len = c.max_message_len;
    t->lim.max_tensor_bytes = c.max_tensor_bytes;
    t->lim.max_frame_len = 0;
    tfrdv_tcp__limits_fill(&t->lim, &t->lim);
    if (t->lim.max_frame_len < c.frame_bytes + 64) t->lim.max_frame_len = c.frame_bytes + 64;
    t->refs = 1;
    t->lfd = t->efd = t->wake[0] = t->wake[1] = t->sfd = -1;
    t->conns.prev = t->conns.next = &t->conns;
    t->ent_min_deadline = t->req_min_deadline = INT64_MAX;
    t->next_tick = tfrdv_tcp__add(tfrdv_tcp__now(), c.expire_interval_ns);
    t->sh_min = c.same_host == 0 ? (uint64_t)64 << 10 : c.same_host < 0 ? 0 : (uint64_t)c.same_host; /* SAME HOST */
    t->sh_lpid = (long)getpid();
    t->sh_deny = getenv("TFRDV_TCP_CMA_DENY") && strcmp(getenv("TFRDV_TCP_CMA_DENY"), "1") == 0;
    t->shm_deny = getenv("TFRDV_TCP_RING_DENY") ? atoi(getenv("TFRDV_TCP_RING_DENY")) : 0; /* SAME HOST RING */
    t->up_deny = getenv("TFRDV_TCP_UPGRADE_DENY") && strcmp(getenv("TFRDV_TCP_UPGRADE_DENY"), "1") == 0; /* SAME HOST */
    pthread_mutex_init(&t->mu, 0);
    pthread_mutex_init(&t->poll_mu, 0);
    pthread_cond_init(&t->cv, 0);
    t->ents.cap = t->reqs.cap = 64;
    t->ents.tab = (tfrdv_tcp__hnode**)tfrdv_tcp__alloc(t, 64 * sizeof *t->ents.tab);
    t->reqs.tab = (tfrdv_tcp__hnode**)tfrdv_tcp__alloc(t, 64 * sizeof *t->reqs.tab);
    t->free_cms = (tfrdv_cancel_mgr**)tfrdv_tcp__alloc(t, TFRDV_TCP__FREE_MAX * sizeof *t->free_cms);
    if (!t->ents.tab || !t->reqs.tab || !t->free_cms) {
        if (!t->ents.tab) t->ents.cap = 0;
        if (!t->reqs.tab) t->reqs.cap = 0;
        tfrdv_tcp__free_all(t);
        return tfrdv_tcp__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp_create: out of memory");
    }
    memset(t->ents.tab, 0, 64 * sizeof *t->ents.tab);
    memset(t->reqs.tab, 0, 64 * sizeof *t->reqs.tab);
    for (i = 0; i < cfg->num_workers; i++) {
        if (!cfg->workers[i].name || !cfg->workers[i].address ||
            tfrdv_tcp__set_worker(t, cfg->workers[i].name, cfg->workers[i].address, st) != TFRDV_OK) {
            tfrdv_tcp__free_all(t);
            return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_create: workers[%zu] has no name or address", i);
        } /* checked above: only out of memory fails here */
    }
    (void)tfrdv_tcp__wake_open(t->wake);
#ifdef TFRDV_TCP__EPOLL
    t->efd = epoll_create1(EPOLL_CLOEXEC);
    if (t->efd >= 0 && t->wake[0] >= 0) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN;
        ev.data.ptr = t->wake;
        (void)epoll_ctl(t->efd, EPOLL_CTL_ADD, t->wake[0], &ev);
    }
#else
    t->efd = t->wake[0];
#endif
    if (t->efd < 0 || t->wake[0] < 0) {
        int e = errno;
        tfrdv_tcp__wake_close(t->wake);
#ifdef TFRDV_TCP__EPOLL
        if (t->efd >= 0) close(t->efd);
#endif
        tfrdv_tcp__free_all(t);
        return tfrdv_tcp__err(st, TFRDV_UNAVAILABLE, "tfrdv_tcp_create: event descriptors: %s", strerror(e));
    }
    t->cfg.listen_address = cfg->listen_address; /* borrowed during create only */
    if (cfg->listen_address && tfrdv_tcp__listen(t, st) != TFRDV_OK) {
        tfrdv_code rc = st ? st->code : TFRDV_UNAVAILABLE;
        tfrdv_tcp__wake_close(t->wake);
#ifdef TFRDV_TCP__EPOLL
        close(t->efd);
#endif
        tfrdv_tcp__free_all(t);
        return rc;
    }
    t->cfg.listen_address = 0;
    if (c.num_threads >= 0) {
        t->io_running = 1;
        if (pthread_create(&t->thread, 0, tfrdv_tcp__thread, t) != 0) {
            t->has_thread = t->io_running = 0;
            tfrdv_tcp_destroy(t); /* drops the only reference */
            return tfrdv_tcp__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_tcp_create: cannot start the I/O thread");
        }
        t->has_thread = 1;
    }
    *out = t;
    tfrdv_tcp__ok(st);
    return TFRDV_OK;
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__transport_ref(void* user) {
    __atomic_add_fetch(&((tfrdv_tcp*)user)->refs, 1, __ATOMIC_RELAXED);
}
TFRDV_API tfrdv_transport tfrdv_tcp_transport(tfrdv_tcp* t) {
    tfrdv_transport tr;
    memset(&tr, 0, sizeof tr);
    if (!t) return tr;
    tr.user = t;
    tr.start_call = tfrdv_tcp__start_call;
    tr.cancel_call = tfrdv_tcp__cancel_call;
    tr.destroy = tfrdv_tcp__transport_destroy;
    tr.ref = tfrdv_tcp__transport_ref; /* each manager created with it holds t (ref .. destroy) */
    tr.wait = tfrdv_tcp__wait;
    tr.bind = tfrdv_tcp__bind;
    tr.peer_incarnation = tfrdv_tcp__peer_inc;
    return tr;
}
TFRDV_API tfrdv_code tfrdv_tcp_attach(tfrdv_tcp* t, tfrdv_mgr* mgr, tfrdv_status* st) {
    if (!t || !mgr) return tfrdv_tcp__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_tcp_attach: NULL argument");
    pthread_mutex_lock(&t->mu);
    if (t->mgr || t->closing) {
        pthread_mutex_unlock(&t->mu);
        return tfrdv_tcp__err(st, TFRDV_FAILED_PRECONDITION, "tfrdv_tcp_attach: %s", t->closing ? "destroyed" : "a manager is already attached");
    }
    tfrdv_mgr_ref(mgr);
    t->mgr = mgr;
    tfrdv_tcp__lsock_arm(t, &t->lfd, &t->listening, 1);
    pthread_mutex_unlock(&t->mu);
    tfrdv_tcp__ok(st);
    return TFRDV_OK;
}
TFRDV_API int tfrdv_tcp_port(const tfrdv_tcp* t) { return t ? t->port : 0; }
TFRDV_API const char* tfrdv_tcp_address(const tfrdv_tcp* t) { return t ? t->laddr : ""; }
TFRDV_API int tfrdv_tcp_fd(const tfrdv_tcp* t) { return t && !t->destroyed ? t->efd : -1; }
TFRDV_API int tfrdv_tcp_poll(tfrdv_tcp* t, int64_t timeout_ns) { return t ? tfrdv_tcp__poll_once(t, timeout_ns) : 0; }

/* t->mu held: is this thread inside the transport (in a callback of its I/O thread, of
   tfrdv_tcp_poll, or of a tfrdv_recv lent to it), where destroy cannot wait for itself? */
TFRDV_TCP__PRIVATE int tfrdv_tcp__inside(tfrdv_tcp* t) {
    pthread_t self = pthread_self();
    tfrdv_tcp__conn* c;
    if (t->polling && pthread_equal(t->poller, self)) return 1;
    for (c = t->conns.next; t->nclaims && c != &t->conns; c = c->next)
        if (c->claimed == TFRDV_TCP__BY_WAITER && pthread_equal(c->claimer, self)) return 1;
    return 0;
}
/* poll_mu held, the I/O thread gone: fail every connection and call, wait for the lent threads
   and the serve completions; then tfrdv_tcp__release, once poll_mu is let go */
TFRDV_TCP__PRIVATE void tfrdv_tcp__shutdown(tfrdv_tcp* t) {
    tfrdv_tcp__todo td;
    tfrdv_tcp__todo_init(&td);
    pthread_mutex_lock(&t->mu);
    if (t->nclaims) { /* threads lent by tfrdv_recv: each sees closing and lets go */
        tfrdv_tcp__conn* c;
        for (c = t->conns.next; c != &t->conns; c = c->next)
            if (c->claimed == TFRDV_TCP__BY_WAITER) tfrdv_tcp__wake_lent(c);
        while (t->nclaims) pthread_cond_wait(&t->cv, &t->mu);
    }
    tfrdv_tcp__lsock_arm(t, &t->lfd, &t->listening, 0);
    if (t->sfd >= 0) { /* SAME HOST: the side listener (abstract: no file) */
        close(t->sfd);
        t->sfd = -1;
    }
    if (t->lfd >= 0) {
        struct stat now_st;
        close(t->lfd);
        t->lfd = -1;
        if (t->lfile && stat(t->lpath, &now_st) == 0 && now_st.st_ino == t->lst.st_ino && now_st.st_dev == t->lst.st_dev)
            unlink(t->lpath);
    }
    while (t->conns.next != &t->conns) tfrdv_tcp__conn_fail(t, t->conns.next, TFRDV_CANCELLED, "tfrdv_tcp: the transport was destroyed", &td);
    {
        tfrdv_tcp__peer* p;
        for (p = t->peers; p; p = p->next) /* calls that waited for a peer to come up */
            while (p->parked.next != &p->parked) {
                tfrdv_tcp__ent* e = p->parked.next;
                tfrdv_tcp__ent_remove(t, e);
                tfrdv_tcp__todo_fin(&td, e, TFRDV_CANCELLED, "tfrdv_tcp: the transport was destroyed");
            }
    }
    pthread_mutex_unlock(&t->mu);
    tfrdv_tcp__todo_run(t, &td);
    pthread_mutex_lock(&t->mu);
    while (t->serving_count) pthread_cond_wait(&t->cv, &t->mu);
    tfrdv_tcp__free_dead(t);
    t->destroyed = 1;
    pthread_mutex_unlock(&t->mu);
}
TFRDV_TCP__PRIVATE void tfrdv_tcp__release(tfrdv_tcp* t) { /* drops the owner's reference */
    tfrdv_mgr* mgr;
    pthread_mutex_lock(&t->mu);
    mgr = t->mgr;
    t->mgr = 0;
    pthread_mutex_unlock(&t->mu);
#ifdef TFRDV_TCP__EPOLL
    if (t->efd >= 0) close(t->efd);
#endif
    tfrdv_tcp__wake_close(t->wake);
    t->efd = -1;
    tfrdv_tcp__unref(t);
    if (mgr) tfrdv_mgr_unref(mgr);
}
TFRDV_API void tfrdv_tcp_destroy(tfrdv_tcp* t) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    if (t->closing) { pthread_mutex_unlock(&t->mu); return; }
    t->closing = 1;
    t->stop = 1;
    if (tfrdv_tcp__inside(t)) { /* from a callback: the last thread out shuts down */
        tfrdv_tcp__conn* c;
        t->deferred = 1;
        for (c = t->conns.next; c != &t->conns; c = c->next)
            if (c->claimed == TFRDV_TCP__BY_WAITER) tfrdv_tcp__wake_lent(c);
        pthread_cond_broadcast(&t->cv); /* lent threads waiting for the loop */
        pthread_mutex_unlock(&t->mu);
        tfrdv_tcp__wake(t);
        return;
    }
    pthread_mutex_unlock(&t->mu);
    if (t->has_thread) {
        tfrdv_tcp__wake(t);
        pthread_join(t->thread, 0);
        t->has_thread = 0;
    }
    tfrdv_tcp__leave(t);
}

TFRDV_API void tfrdv_tcp_get_stats(tfrdv_tcp* t, tfrdv_tcp_stats* out) {
    tfrdv_tcp__conn* c;
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    *out = t->stats;
    out->frames_received = __atomic_load_n(&t->frames_received, __ATOMIC_RELAXED);
    out->recv_calls = __atomic_load_n(&t->recv_calls, __ATOMIC_RELAXED);
    out->frames_ring_received = __atomic_load_n(&t->ring_frames_in, __ATOMIC_RELAXED);
    out->values_ring = __atomic_load_n(&t->ring_values_in, __ATOMIC_RELAXED);
    out->connections = t->nconns;
    out->client_calls_live = t->ents.count;
    out->server_requests_live = t->serving_count + t->nqueued;
    for (c = t->conns.next; c != &t->conns; c = c->next) {
        tfrdv_tcp__req* r;
        out->queued_bytes += c->olen - c->ooff;
        for (r = c->held.next; r != &c->held; r = r->next) out->values_unacked++;
    }
    pthread_mutex_unlock(&t->mu);
}

#endif /* TFRDV_TCP_NO_TRANSPORT */

#ifdef __cplusplus
}
#endif
#endif /* TFRDV_TCP_IMPLEMENTATION */
