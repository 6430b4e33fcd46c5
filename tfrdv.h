/* tfrdv.h - v0.6.0 - TensorFlow-compatible rendezvous for C - MIT or public domain (see end of file)

   USAGE
     In exactly ONE .c or .cpp file:
         #define TFRDV_IMPLEMENTATION
         #include "tfrdv.h"
     Everywhere else just #include "tfrdv.h".

   THE TEN CALLS (task -> call; everything else is for special needs)
     make a worker          tfrdv_loopback_add_worker (in-process), or tfrdv_mgr_create with a
                            transport from a companion (tfrdv_tcp.h, tfrdv_grpc.h, tfrdv_verbs.h)
     start a step           tfrdv_mgr_start_step -> the step's rendezvous (a reference)
     name a tensor          tfrdv_key_make (tfrdv_key_make_frame for loop iterations)
     make a tensor          tfrdv_value_new (or tfrdv_value_make around your own tensor)
     send                   tfrdv_send (never blocks; the value is the rendezvous' now)
     receive                tfrdv_recv_async (a callback), or tfrdv_recv (blocking, with timeout)
     done with a tensor     tfrdv_value_release (the receiver owns one reference)
     done with the step     tfrdv_unref (your reference), tfrdv_mgr_cleanup (the step, at its end)
     shut down              tfrdv_mgr_destroy, and the transport's destroy (either order)
     Deadlines are acted on by tfrdv_mgr_expire: a companion's thread calls it; on the loopback
     alone, call it from a timer if you use timeouts.

   STEP BY STEP (two workers in one process on the loopback transport; see examples/ for more)
     1. Create:   tfrdv_loopback_create(NULL, &lb, &st);
                  tfrdv_loopback_add_worker(lb, "/job:w/replica:0/task:0", NULL, &w, &st);
                  tfrdv_loopback_add_worker(lb, "/job:ps/replica:0/task:0", NULL, &ps, &st);
                  (each is tfrdv_mgr_create + tfrdv_loopback_register: a network transport fills
                  tfrdv_mgr_config.transport instead)
     2. Step:     tfrdv_mgr_start_step(ps, step_id, &rps, &st);  and the same on w -> rw
                  (tfrdv_mgr_find + tfrdv_mgr_initialize: requests that arrive before the second
                  phase wait, with a deadline)
     3. Key:      tfrdv_key_make(&k, "/job:ps/replica:0/task:0/device:CPU:0",
                                 tfrdv_mgr_incarnation(ps), "/job:w/replica:0/task:0/device:CPU:0",
                                 "edge_1", frame_iter, &st);
     4. Transfer: tfrdv_send(rps, &k.parsed, NULL, value, 0, &st);      on the producer
                  tfrdv_recv_async(rw, &k.parsed, NULL, on_recv, ctx, &st);  on the consumer; on_recv
                  checks its status, then owns the value: tfrdv_value_release(v) when done
     5. Release:  tfrdv_unref(rps); tfrdv_unref(rw);      the step references
     6. Cleanup:  tfrdv_mgr_cleanup(ps, step_id); tfrdv_mgr_cleanup(w, step_id);  at step end
     7. Destroy:  tfrdv_mgr_destroy(w); tfrdv_mgr_destroy(ps); tfrdv_loopback_destroy(lb);
                  (any order: see TRANSPORTS)
     Check every returned code: a refusal (non-OK) means no callback will run. Drive deadlines
     with tfrdv_mgr_expire(mgr, tfrdv_mgr_now(mgr)) from a timer (or let a companion do it).

   TABLE OF CONTENTS
     THE TEN CALLS, STEP BY STEP   above
     COMPILE-TIME OPTIONS   which macros exist and where to define them
     CONCEPTS               keys, values, the local table, steps, remote calls, transports,
                            the cluster (TF_CONFIG)
     CALLBACK RULES         the exactly-once contract every async function keeps
     TRANSPORTS             the life cycle every transport follows
     THREADS                what may be called from which thread, what may run inline
     MEMORY                 what is kept for reuse, what comes back, the caps

   COMPILE-TIME OPTIONS
     macro                   define where        default   meaning
     TFRDV_STATIC            every TU            off       all functions static (one private copy per TU)
     TFRDV_API               every TU            extern    decoration of every public function
     TFRDV_NO_THREADS        GLOBALLY            off       single-threaded build: no locks, no events,
                                                           no blocking tfrdv_recv(); callbacks still run
                                                           outside every library critical section
     TFRDV_THREADS_CUSTOM    implementation TU   off       no built-in POSIX/Win32 primitives: every
                                                           config must carry a tfrdv_sync hook table
     TFRDV_STATUS_MSG_MAX    GLOBALLY            256       bytes of a status message (incl. NUL); messages
                                                           are truncated, never allocated
     TFRDV_NO_TLS            implementation TU   off       no thread-local frame stack: destroying a
                                                           rendezvous from inside its own callback is then
                                                           not detected (and would deadlock); also the
                                                           case on compilers with no thread-local keyword
                                                           (not GNU, MSVC, C11, C++11). No effect with
                                                           TFRDV_NO_THREADS (a plain static is used)
     TFRDV_ASSERT(x)         implementation TU   assert(x) debug tripwire; NDEBUG or ((void)0) turns it off
     TFRDV_NO_MALLOC         implementation TU   off       no reference to malloc/free; every create needs
                                                           a tfrdv_allocator or fails INVALID_ARGUMENT
                                                           (and no getenv: tfrdv_cluster_from_env fails
                                                           UNIMPLEMENTED)
     TFRDV_NO_CLOCK          implementation TU   off       no built-in monotonic clock; deadlines need a
                                                           tfrdv_clock hook (freestanding targets)
     TFRDV_NO_FUTEX          implementation TU   off       on Linux/glibc the built-in locks are inline
                                                           futex words that spin briefly before sleeping;
                                                           this selects pthread mutexes instead
     TFRDV_NO_MEMBARRIER     implementation TU   off       the futex locks unlock with a plain store and a
                                                           thread about to sleep calls membarrier(2) so
                                                           the unlocker sees it (Linux 4.14+, probed once
                                                           per process; absent: an atomic exchange
                                                           unlocks, as this option forces)
     TFRDV_NO_HUGEPAGES      implementation TU   off       on Linux, value blocks of 4 MiB and more from
                                                           the built-in allocator (tfrdv_value_new, remote
                                                           receives) are madvise(MADV_HUGEPAGE)d: a fresh
                                                           64 MiB tensor then faults in 2 MiB pages (about
                                                           4x faster to fill on a VM); this turns it off

   CONCEPTS
     Key        "src_device;incarnation(16 lowercase hex);dst_device;edge_name;frame:iter", exactly as
                TensorFlow's Rendezvous::CreateKey. The incarnation is the SOURCE device's: the
                serving worker refuses a key whose incarnation is not its own (ABORTED: it was
                restarted), so a receiver asks for it (tfrdv_mgr_peer_incarnation(mgr, "/job:ps/
                replica:0/task:0", timeout_ns, &inc, &st): through its transport, waiting while the
                peer is not up yet) and the sender uses its own (tfrdv_mgr_incarnation).
                tfrdv_key_parse() applies TensorFlow's acceptance
                rules and fills a tfrdv_parsed_key whose views point into YOUR key memory (keep it alive
                while the parsed key is used). Matching always compares the full key bytes; the 64-bit
                hash only places a key in the table.
     Value      tfrdv_value describes a tensor (dtype, shape, data, bytes) and carries a release hook.
                Embed it in your own tensor object (tfrdv_value_make), or let tfrdv_value_new make
                one that owns a copy of its shape and bytes. A successful send hands one reference to the
                rendezvous; a receiver gets that reference and calls tfrdv_value_release() when done
                (zero copy). tfrdv_value_retain() adds references.
     Rendezvous a table of per-key FIFO channels. tfrdv_create() makes one; a step manager
                (tfrdv_mgr) makes one per step id that also routes receives to remote workers. The same
                functions (tfrdv_send, tfrdv_recv_async, tfrdv_abort, ...) work on both.
     Transport  a vtable (tfrdv_transport) through which a step manager fetches tensors from other
                workers. The core ships an in-process loopback transport (several workers in one
                process); the companion headers tfrdv_tcp.h, tfrdv_grpc.h and tfrdv_verbs.h are
                where network transports live.
     Cluster    tfrdv_cluster_parse reads TF_CONFIG ({"cluster": {"ps": ["h0:2222"], "worker":
                ["h1:2222", "h2:2222"]}, "task": {"type": "worker", "index": 1}}; the environment
                variable itself: tfrdv_cluster_from_env) into this task's name
                "/job:worker/replica:0/task:1" and a table of tfrdv_worker {name, address} for every
                task of every job, ordered as TensorFlow's ClusterSpec orders them (jobs by name,
                bytewise; tasks by index), in a buffer you pass. As TFConfigClusterResolver: a job
                is a list or an {"index": "address"} object (sparse tasks), "chief" and "evaluator"
                are jobs like any other (a task whose job is not in the cluster, an evaluator's,
                gets a name and no address), "task" and "cluster" may be absent, "index" may be a
                digit string, "rpc_layer", "environment" and unknown keys are ignored. Deliberately
                stricter than Python's json and ClusterSpec: RFC 8259 JSON only (no NaN, no BOM,
                valid UTF-8, paired surrogates), nesting at most 32 levels; the keys the parser
                reads ("cluster", "task", "type", "index"), job names and tasks may not repeat
                (Python keeps the last); job names and the task type are written as
                [A-Za-z][A-Za-z0-9_]* without escapes (TensorFlow's device-name rule); an address
                is a non-empty string without control bytes (< 0x20, 0x7f; not host:port-checked, so
                "unix:/path" works); "type" without "index" (or the reverse) and a task missing
                from its job in the cluster are refused. Errors are INVALID_ARGUMENT
                "TF_CONFIG: expected ':' at offset 17" (or naming the job or task).
     State      No global mutable state except one thread-local pointer: the stack of callback
                frames running on the thread (how destroy-from-inside-a-callback is detected), and,
                with the Linux futex locks, one int caching whether membarrier(2) is registered, one
                whether the process may run on more than one CPU (locks spin only then), and a
                64-slot table counting threads asleep on a lock (by lock address).

   CALLBACK RULES (every async entry point keeps them)
     1. Exactly once. Every accepted async operation calls its done callback exactly once: with OK,
        the abort status, CANCELLED, DEADLINE_EXCEEDED, or an error of the remote path (transport,
        serving side, same-worker copy hook). Only refusals (NULL object, malformed key, misuse,
        out of memory) are returned synchronously; then no callback runs. An operation on an
        aborted rendezvous is accepted and completes at once with the abort status.
     2. Whoever unlinks completes. A pending operation is live while it is linked in its table;
        the party that removes it under the lock (matching send, cancel, abort, timeout, transport
        finish) runs its callback.
     3. No user code under a library lock, except the allocator and sync hooks (which must not
        call into tfrdv). Callbacks, the clock, the logger, the trace hook, the copy hook, the
        resolver and the transport's start_call/cancel_call all run outside every library lock
        and may call back into the library (send from a recv callback, abort, unref, even
        destroy the rendezvous whose callback is running, or the object tfrdv_pending reports).
     4. Ordering. Per key, values are received in send order; receivers are served in arrival order.
     5. Abort is sticky and the first status wins. Aborting with OK is an argument error.
     6. Ownership. A successful send transfers the value reference to the rendezvous; a failed
        send leaves it with the caller. A done callback that receives a non-NULL value owns one
        reference and must tfrdv_value_release() it. Statuses and args passed to callbacks are
        borrowed for the duration of the callback.
     7. Teardown. tfrdv_destroy() aborts with CANCELLED, releases every buffered value, waits (on an
        event, not a poll) for callbacks running on other threads and frees the table. Called from
        inside one of its own callbacks it does not wait: the table is freed when that callback
        returns.
     8. No hidden threads. The core never starts a thread. Deadlines (deferred requests, remote
        calls, retry backoff, tombstones) are absolute times acted on by tfrdv_mgr_expire(now).

   TRANSPORTS (one life cycle for all of them: the loopback here, tfrdv_tcp.h, tfrdv_grpc.h,
   tfrdv_verbs.h, and yours)
     1. X_create(&config, &x, &st)      config.hooks.allocator is where all its memory comes from
                                        (the loopback takes the hooks themselves:
                                        tfrdv_loopback_create(&hooks or NULL, &lb, &st))
     2. mc.transport = X_transport(x)   each manager created with this vtable holds x until it
                                        goes (tfrdv_transport.ref): copy configs freely
     3. X_attach(x, mgr, &st)           servers only: start serving mgr's tables
     4. ... fetches ...                 a fetch through x after X_destroy fails UNAVAILABLE at once
     5. X_destroy(x) and tfrdv_mgr_destroy(mgr), in either order: X_destroy stops x (its calls
        finish exactly once, its threads are joined, nothing of it touches a value afterwards);
        the memory goes with the last reference.
     Several transports at once: tfrdv_router_create picks one per source worker. A provider's
     contract (start_call, cancel_call, exactly one finish) is at tfrdv_transport below, and
     examples/custom_transport.c implements one, with cancellation, deadlines and give-back, in
     150 lines.

   THREADS
     Thread-safe (any thread, concurrently, on the same object): tfrdv_send, tfrdv_recv_async,
     tfrdv_recv, tfrdv_abort, tfrdv_get_status, tfrdv_ref/unref, the batch calls, tfrdv_pending;
     the cancellation manager's functions; tfrdv_mgr_find, _initialize, _cleanup, _cleanup_all,
     _expire, _serve, _ack, _pending, _steps, _get_stats, _new_request_id, _peer_incarnation,
     tfrdv_mgr_ref/unref;
     tfrdv_call_finish and every tfrdv_call_* accessor (from start_call until the finish);
     tfrdv_loopback_register. tfrdv_value_retain/release are atomic.
     Not concurrently with other use of the same object: the *_create functions (nothing else
     has the object yet), tfrdv_destroy / the last unref of a rendezvous, tfrdv_mgr_destroy
     (other threads must hold a tfrdv_mgr_ref to keep calling in), tfrdv_loopback_destroy,
     tfrdv_cancel_mgr_destroy and _reset.
     Inline completion: any done callback may run inside the call that accepted the operation
     (tfrdv_recv_async when the value is already there, tfrdv_mgr_serve when it can answer at
     once, a transport's start_call finishing at once) or inside the call that completes it
     (tfrdv_send, tfrdv_abort, tfrdv_cancel_start, tfrdv_mgr_expire, tfrdv_call_finish) on
     that caller's thread, and inside tfrdv_recv when the transport uses the waiting thread
     (tfrdv_transport.wait: tfrdv_tcp.h completes the other fetches whose responses that thread
     reads). Never hold your own lock across those calls if the callback takes it, and do not
     block in a callback waiting for a fetch over the same connection (the companions refuse
     such a tfrdv_recv at once, FAILED_PRECONDITION, instead of waiting forever).
     Under TFRDV_NO_THREADS everything runs on the caller's thread, in these same places.

   MEMORY
     Items (buffered sends, waiting receivers), channels, serve records and call objects are
     recycled through free lists of at most free_max / call_freelist_max entries (defaults: 256
     items of each kind and 64 channels of each kind per shard, 1000 calls), so a steady state
     allocates nothing. Hash tables grow by half at 3/4 full and shrink (from 64 slots up) as they
     empty out; with the default free_max a shrinking table also frees its spare channels, so
     after a burst memory returns to a few KiB per table, and a working set that fits a table of
     up to 64 slots (about 40 keys per shard) never reallocates. A runtime that keeps more keys
     pending round after round sets free_max (kept, not trimmed) and min_buckets (the size its
     tables never shrink below). A new key costs one allocation (channel, first value slot and
     key bytes together; one more per further queued item). Once a shard holds 32 keys, a
     buffered send's channel shares the "src;incarnation;dst;" part of its key with the other
     keys of that device pair (up to 16 such copies cached per shard, the rest stay whole): a
     pending key then costs about 100 bytes plus its edge name and frame, and 25-35 bytes of
     table.
     Bounds on hostile load: max_key_len (4096 bytes), max_deferred (65536 requests waiting for
     step initialisation; a refused request leaves no step behind), tombstone_max,
     request_id_window, response_cache_max. Step and request ids (which peers choose) are hashed
     with a per-manager secret, so no chosen set of ids shares a bucket. Cancelling or withdrawing
     any waiting receiver or deferred request is O(1), in any order (10^6 receivers on one key,
     65536 deferred requests). A waiting receiver costs 48 bytes (one allocation, one cache line),
     160 with a cancellation manager, alloc hook or trace; a buffered send 40 bytes (the first on
     a key none: it lives in the key's channel). Teardown (abort, cleanup, destroy) allocates
     nothing. On Linux, value blocks of 4 MiB and more from the built-in allocator
     (tfrdv_value_new, remote receives without an alloc hook) ask for transparent huge pages
     (TFRDV_NO_HUGEPAGES).
*/
/* The implementation needs POSIX clock_gettime and pthread_condattr_setclock. Compilers' default
   modes (gnu99/gnu17, and C++ with glibc) declare them already; only in a strict ISO mode
   (-std=c99/c11, __STRICT_ANSI__) and only when you chose no feature macro yourself does the
   implementation TU get _POSIX_C_SOURCE 200809L (then include tfrdv.h before system headers). */
#if defined(TFRDV_IMPLEMENTATION) && !defined(_WIN32) && defined(__STRICT_ANSI__) && \
    !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE) && !defined(_XOPEN_SOURCE) && !defined(_DEFAULT_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#ifndef TFRDV_H
#define TFRDV_H

#define TFRDV_VERSION_MAJOR 0
#define TFRDV_VERSION_MINOR 6
#define TFRDV_VERSION_PATCH 0
#define TFRDV_VERSION_STRING "0.6.0"

#include <stddef.h>
#include <stdint.h>

#ifndef TFRDV_API
#  ifdef TFRDV_STATIC
#    if defined(__GNUC__) || defined(__clang__)
#      define TFRDV_API static __attribute__((unused))
#    else
#      define TFRDV_API static
#    endif
#  else
#    define TFRDV_API extern
#  endif
#endif

#ifndef TFRDV_STATUS_MSG_MAX
#define TFRDV_STATUS_MSG_MAX 256
#endif

#if defined(TFRDV_NO_THREADS) && defined(TFRDV_THREADS_CUSTOM)
#error "tfrdv: TFRDV_NO_THREADS and TFRDV_THREADS_CUSTOM exclude each other; define one of them"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
   Status: the canonical gRPC / TensorFlow codes 0..16 and a bounded, copied message.
   --------------------------------------------------------------------------------------------- */
#define TFRDV_CODE_LIST(X) \
    X(OK, 0) X(CANCELLED, 1) X(UNKNOWN, 2) X(INVALID_ARGUMENT, 3) X(DEADLINE_EXCEEDED, 4) \
    X(NOT_FOUND, 5) X(ALREADY_EXISTS, 6) X(PERMISSION_DENIED, 7) X(RESOURCE_EXHAUSTED, 8) \
    X(FAILED_PRECONDITION, 9) X(ABORTED, 10) X(OUT_OF_RANGE, 11) X(UNIMPLEMENTED, 12) \
    X(INTERNAL, 13) X(UNAVAILABLE, 14) X(DATA_LOSS, 15) X(UNAUTHENTICATED, 16)

#define TFRDV_CODE_ENUM_ITEM(name, num) TFRDV_##name = num,
typedef enum tfrdv_code {
    TFRDV_CODE_LIST(TFRDV_CODE_ENUM_ITEM)
    TFRDV_CODE_FORCE_32BIT = 0x7fffffff /* same size on toolchains with short enums */
} tfrdv_code;
#undef TFRDV_CODE_ENUM_ITEM

typedef struct tfrdv_status {
    tfrdv_code code;
    uint32_t detail; /* TFRDV_DETAIL_*: what kind of error, for code that must act on it (never
                        parse msg, which may be cut short); 0 for most statuses */
    char msg[TFRDV_STATUS_MSG_MAX]; /* NUL-terminated; "" for OK */
} tfrdv_status;
/* ABORTED by a serving worker whose device incarnation differs from the key's: the worker was
   restarted (TensorFlow's WorkerPossiblyRestarted status detail). */
#define TFRDV_DETAIL_WORKER_RESTARTED 1u

/* "OK", "CANCELLED", ...; "UNKNOWN_CODE" for numbers outside 0..16. */
TFRDV_API const char* tfrdv_code_str(tfrdv_code code);
/* Sets st (if non-NULL) to code + message (truncated to fit) and returns code. */
TFRDV_API tfrdv_code tfrdv_status_set(tfrdv_status* st, tfrdv_code code, const char* msg);
/* Copies src[0..len) into dst as printable ASCII, for putting bytes a peer chose (worker names,
   keys, messages) into statuses and logs: a byte outside 0x20..0x7e becomes \xNN and a backslash
   becomes \\, so a peer cannot forge log lines or reach a terminal with escape sequences. Writes
   at most cap bytes, NUL-terminated when cap > 0; returns the full length (like snprintf). A cut
   never splits an escape: the output then ends before it. The core's own messages escape keys
   and names the same way (a message cut at TFRDV_STATUS_MSG_MAX ends before a split escape). */
TFRDV_API size_t tfrdv_escape(char* dst, size_t cap, const char* src, size_t len);

/* ---------------------------------------------------------------------------------------------
   Hooks. Every member is optional; a zeroed struct means "built-in" (except the allocator under
   TFRDV_NO_MALLOC and the sync table under TFRDV_THREADS_CUSTOM, which are then required).
   --------------------------------------------------------------------------------------------- */
/* alloc_fn must return memory aligned like malloc's (for any fundamental type, long double
   included), or NULL. Both functions or neither. */
typedef struct tfrdv_allocator {
    void* (*alloc_fn)(void* user, size_t size);
    void (*free_fn)(void* user, void* ptr, size_t size); /* sized free */
    void* user;
} tfrdv_allocator;

/* Mutex and counting event (a semaphore: signal adds one, wait takes one). Maps onto RTOS
   semaphores. init returns 0 on success and stores a handle; destroy of a handle never
   initialised (NULL) must do nothing. event_wait returns 1 when signalled, 0 on timeout;
   timeout_ns < 0 waits forever. */
typedef struct tfrdv_sync {
    void* user;
    int (*mutex_init)(void* user, void** mutex);
    void (*mutex_destroy)(void* user, void* mutex);
    void (*mutex_lock)(void* user, void* mutex);
    void (*mutex_unlock)(void* user, void* mutex);
    int (*event_init)(void* user, void** event);
    void (*event_destroy)(void* user, void* event);
    int (*event_wait)(void* user, void* event, int64_t timeout_ns);
    void (*event_signal)(void* user, void* event);
} tfrdv_sync;

/* Silent unless set. level: 0 debug, 1 info, 2 warning, 3 error. msg is borrowed. */
typedef struct tfrdv_logger {
    void (*fn)(void* user, int level, const char* msg);
    void* user;
} tfrdv_logger;

/* Monotonic nanoseconds. Built-in: CLOCK_MONOTONIC / QueryPerformanceCounter. */
typedef struct tfrdv_clock {
    int64_t (*now_ns)(void* user);
    void* user;
} tfrdv_clock;

typedef struct tfrdv_hooks {
    tfrdv_allocator allocator;
    const tfrdv_sync* sync; /* NULL: built-in primitives (required with TFRDV_THREADS_CUSTOM) */
    tfrdv_logger logger;
    tfrdv_clock clock;
} tfrdv_hooks;

/* The built-in monotonic clock (0 when built with TFRDV_NO_CLOCK). */
TFRDV_API int64_t tfrdv_now_ns(void);

/* ---------------------------------------------------------------------------------------------
   Strings, device names and keys (TensorFlow-exact). Nothing here allocates.
   --------------------------------------------------------------------------------------------- */
typedef struct tfrdv_str {
    const char* ptr; /* not NUL-terminated */
    size_t len;
} tfrdv_str;

/* DeviceNameUtils::ParsedName. Views point into the parsed string; a legacy "/cpu:N" or
   "/gpu:N" component yields the static type "CPU"/"GPU". */
typedef struct tfrdv_device_name {
    int has_job, has_replica, has_task, has_type, has_id;
    tfrdv_str job;
    int replica, task;
    tfrdv_str type;
    int id;
} tfrdv_device_name;

/* ParseFullName: components in any order, repeats (last wins), '*' wildcards, legacy /cpu:N and
   /gpu:N; "" and "/" parse to nothing set. Numbers above INT_MAX are rejected (TensorFlow
   truncates). INVALID_ARGUMENT with a message naming the name and the reason otherwise. */
TFRDV_API tfrdv_code tfrdv_device_parse(const char* name, size_t len, tfrdv_device_name* out,
                                        tfrdv_status* st);
/* Canonical form /job:J/replica:R/task:T/device:TYPE:ID (present parts only; '*' for an unset id
   of a set type). Writes at most cap bytes incl. NUL; returns the full length (like snprintf). */
TFRDV_API size_t tfrdv_device_format(const tfrdv_device_name* dn, char* buf, size_t cap);
/* SplitDeviceName: needs type and id; task = canonical "/job:J/replica:R/task:T" (present parts),
   device = "TYPE:ID". *task_len / *dev_len receive the full lengths. */
TFRDV_API tfrdv_code tfrdv_device_split(const char* name, size_t len, char* task, size_t task_cap,
                                        size_t* task_len, char* dev, size_t dev_cap,
                                        size_t* dev_len, tfrdv_status* st);
/* IsSameAddressSpace: job, replica and task present in both and equal (parse failure: 0). */
TFRDV_API int tfrdv_device_same_address_space(const char* a, size_t alen, const char* b,
                                              size_t blen);
TFRDV_API int tfrdv_device_name_same_address_space(const tfrdv_device_name* a,
                                                   const tfrdv_device_name* b);
/* LocalName(fullname): "/device:TYPE:ID" as TensorFlow builds it from the parsed fields: a type
   or id never given prints as "" or 0, and a later '*' or missing id clears only the flag, so an
   earlier value still prints ("" -> "/device::0", "/device:GPU" -> "/device:GPU:0", "/device:*:3"
   -> "/device::3", "/device:GPU:3/device:*:*" -> "/device:GPU:3"). Returns the full length, or 0
   and INVALID_ARGUMENT in st when the name does not parse (where TensorFlow CHECK-fails and
   aborts the process). */
TFRDV_API size_t tfrdv_device_local_name(const char* name, size_t len, char* buf, size_t cap,
                                         tfrdv_status* st);
/* ParseLocalName("CPU:10"): type (letter first) ':' digits, all consumed. */
TFRDV_API tfrdv_code tfrdv_device_parse_local(const char* name, size_t len, tfrdv_str* type,
                                              int* id, tfrdv_status* st);

typedef struct tfrdv_frame_iter {
    uint64_t frame_id; /* 0 at top level */
    int64_t iter_id;   /* 0 at top level */
} tfrdv_frame_iter;

/* Build "src;%016llx;dst;edge;frame:iter". Validates what TensorFlow's ParseKey would reject
   (device names, empty edge name, ';' in a part), so every created key parses. Writes at most
   cap bytes incl. NUL; *len (optional) receives the full length; a too small buffer is
   RESOURCE_EXHAUSTED naming the needed size. */
TFRDV_API tfrdv_code tfrdv_key_create(const char* src_device, uint64_t src_incarnation,
                                      const char* dst_device, const char* edge_name,
                                      tfrdv_frame_iter frame_iter, char* buf, size_t cap,
                                      size_t* len, tfrdv_status* st);
/* GetRendezvousKeyPrefix: "src;%016llx;dst;edge" (the form Send/Recv kernels pre-build). */
TFRDV_API tfrdv_code tfrdv_key_prefix(const char* src_device, uint64_t src_incarnation,
                                      const char* dst_device, const char* edge_name, char* buf,
                                      size_t cap, size_t* len, tfrdv_status* st);
/* GetRendezvousKey: prefix + ";frame:iter". */
TFRDV_API tfrdv_code tfrdv_key_with_frame(const char* prefix, size_t prefix_len,
                                          tfrdv_frame_iter frame_iter, char* buf, size_t cap,
                                          size_t* len, tfrdv_status* st);

typedef struct tfrdv_parsed_key {
    tfrdv_str full;       /* the whole key (caller memory) */
    tfrdv_str src_device; /* part 0 */
    tfrdv_str dst_device; /* part 2 */
    tfrdv_str edge_name;  /* part 3 */
    tfrdv_str frame_iter; /* part 4, not validated (as TensorFlow); see tfrdv_frame_iter_parse */
    uint64_t src_incarnation;
    tfrdv_device_name src, dst;
    uint64_t hash; /* places the key (shard, bucket); matching needs equal hash AND equal bytes.
                      Overwrite it only consistently for a local table (e.g. tests forcing
                      collisions): the serving side of a step manager re-parses keys. */
} tfrdv_parsed_key;

/* Rendezvous::ParseKey, newest rules: 5 ';'-separated parts (one trailing empty part tolerated),
   devices parse, incarnation is hex digits of either case whose value fits 64 bits (leading
   zeros allowed, overflow rejected), edge and frame parts non-empty. Never allocates. INVALID_ARGUMENT "Invalid rendezvous key: <key> (...)". */
TFRDV_API tfrdv_code tfrdv_key_parse(const char* key, size_t len, tfrdv_parsed_key* out,
                                     tfrdv_status* st);
/* "frame:iter" -> numbers (frame unsigned decimal, iter signed decimal). */
TFRDV_API tfrdv_code tfrdv_frame_iter_parse(tfrdv_str s, tfrdv_frame_iter* out, tfrdv_status* st);
/* The 64-bit hash tfrdv_key_parse stores in ->hash (NULL data: that of zero bytes). */
TFRDV_API uint64_t tfrdv_hash_bytes(const void* data, size_t len);

/* ---------------------------------------------------------------------------------------------
   Cluster: TF_CONFIG -> this task's name and the worker table (see CLUSTER in CONCEPTS).
   Nothing here allocates: the result lives in a buffer you pass.
   --------------------------------------------------------------------------------------------- */
/* A worker name and its address: one entry of a cluster spec (the same layout as the companions'
   tfrdv_tcp_worker and tfrdv_grpc_worker). */
typedef struct tfrdv_worker {
    const char* name;    /* "/job:worker/replica:0/task:1" */
    const char* address; /* "h2:2222", as TF_CONFIG gives it (non-empty, no byte < 0x20 or 0x7f) */
} tfrdv_worker;

typedef struct tfrdv_cluster {
    const tfrdv_worker* workers; /* every task of every job: jobs by name (bytewise), each job's
                                    tasks by index, as TensorFlow's ClusterSpec orders them */
    size_t num_workers;
    const char* task_name;       /* "/job:worker/replica:0/task:1"; NULL when "task" is absent */
    const char* task_type;       /* "worker"; NULL when "task" is absent */
    int task_index;              /* 1; -1 when "task" is absent */
    const char* task_address;    /* this task's address in workers; NULL when its job is not in
                                    the cluster (an evaluator) or "task" is absent */
    size_t needed;               /* bytes of buffer this result takes (0 for an empty one); set
                                    with OK and with RESOURCE_EXHAUSTED */
} tfrdv_cluster;

/* Parses TF_CONFIG text (json[0..len), no NUL needed) into out; every string out points to is in
   buf (cap bytes, any alignment), which must outlive out. A buffer too small (or NULL) fails
   RESOURCE_EXHAUSTED with out->needed set: call again with that many bytes (the size depends only
   on the text). Malformed text, a bad job name or address, a key the parser reads given twice, a
   job or task named twice, or a "task" naming a missing task of a job in the cluster fail
   INVALID_ARGUMENT "TF_CONFIG: <what> at offset <byte>" (or naming the job / task).
       char buf[4096]; tfrdv_cluster c; tfrdv_status st;
       if (tfrdv_cluster_parse(text, strlen(text), buf, sizeof buf, &c, &st) == TFRDV_OK)
           tcp_config.workers = c.workers, tcp_config.num_workers = c.num_workers; (the layout matches) */
TFRDV_API tfrdv_code tfrdv_cluster_parse(const char* json, size_t len, void* buf, size_t cap,
                                         tfrdv_cluster* out, tfrdv_status* st);
/* tfrdv_cluster_parse of getenv("TF_CONFIG"); unset reads as "{}" (OK, nothing set), as in
   TensorFlow. UNIMPLEMENTED in a TFRDV_NO_MALLOC build (freestanding: no getenv). */
TFRDV_API tfrdv_code tfrdv_cluster_from_env(void* buf, size_t cap, tfrdv_cluster* out,
                                            tfrdv_status* st);

/* ---------------------------------------------------------------------------------------------
   Values and args
   --------------------------------------------------------------------------------------------- */
typedef struct tfrdv_value tfrdv_value;
struct tfrdv_value {
    int32_t dtype;         /* TensorFlow DataType number: 1 DT_FLOAT, 3 DT_INT32, ... */
    int32_t rank;          /* number of dims */
    const int64_t* dims;   /* rank entries, valid until release */
    void* data;            /* size bytes, row-major little-endian for numeric types */
    uint64_t size;
    void (*release)(tfrdv_value* v); /* runs once, when the last reference goes; may be NULL */
    void* user;            /* yours */
    uint32_t extra_refs;   /* references beyond the first; leave 0 (managed by retain/release) */
};
TFRDV_API void tfrdv_value_retain(tfrdv_value* v);
TFRDV_API void tfrdv_value_release(tfrdv_value* v); /* NULL is fine */

/* Receiver-chosen memory for remote bytes (TensorFlow alloc_attrs/InitAlloc, generalised). Return
   a value with dtype/rank set, ->dims pointing at a copy of dims, ->data at least size bytes and
   ->size >= size (the transport writes the bytes there), and a release hook that frees it; or
   NULL (the receive then fails RESOURCE_EXHAUSTED). */
typedef tfrdv_value* (*tfrdv_alloc_fn)(void* user, int32_t dtype, int32_t rank,
                                       const int64_t* dims, uint64_t size);

#define TFRDV_ALLOC_ON_HOST 1u
#define TFRDV_ALLOC_GPU_COMPATIBLE 2u
#define TFRDV_ALLOC_NIC_COMPATIBLE 4u

typedef struct tfrdv_cancel_mgr tfrdv_cancel_mgr;

typedef struct tfrdv_args {
    void* device_context;       /* opaque, passed through */
    uint32_t alloc_attrs;       /* TFRDV_ALLOC_* bits */
    tfrdv_cancel_mgr* cancel;   /* recv only: cancels the pending receive (not owned) */
    tfrdv_alloc_fn alloc_fn;    /* recv only: where remote bytes land (optional) */
    void* alloc_user;
    tfrdv_str key;              /* set by the library in the recv_args a done callback gets: the
                                   key this receive was for (valid during the callback), so one
                                   callback can serve many keys; ignored on input */
} tfrdv_args;

/* Completion of a receive. status, send_args and recv_args are borrowed for the call; value (NULL
   on error or for a dead value without payload) is one owned reference. */
typedef void (*tfrdv_done_fn)(void* user, const tfrdv_status* status, const tfrdv_args* send_args,
                              const tfrdv_args* recv_args, tfrdv_value* value, int is_dead);

/* ---------------------------------------------------------------------------------------------
   The short path: values that own their storage, keys that own their bytes, a worker and a step
   in one call each, printing. Most programs need little else (THE TEN CALLS, at the top).
   --------------------------------------------------------------------------------------------- */
typedef struct tfrdv_rendezvous tfrdv_rendezvous; /* a local table, or one step of a manager */
typedef struct tfrdv_mgr tfrdv_mgr;               /* the step manager */
typedef struct tfrdv_mgr_config tfrdv_mgr_config;
typedef struct tfrdv_loopback tfrdv_loopback;     /* the in-process transport */

/* Printing a tfrdv_str (not NUL-terminated) with printf:
       printf("key " TFRDV_STR_FMT "\n", TFRDV_STR_ARG(k.parsed.edge_name));
   TFRDV_STR_ARG evaluates its argument twice. */
#define TFRDV_STR_FMT "%.*s"
#define TFRDV_STR_ARG(s) (int)(s).len, (s).ptr

/* TensorFlow DataType numbers (types.proto) for tfrdv_value.dtype; any other number is carried
   through unchanged. */
typedef enum tfrdv_dtype {
    TFRDV_DT_INVALID = 0, TFRDV_DT_FLOAT = 1, TFRDV_DT_DOUBLE = 2, TFRDV_DT_INT32 = 3,
    TFRDV_DT_UINT8 = 4, TFRDV_DT_INT16 = 5, TFRDV_DT_INT8 = 6, TFRDV_DT_STRING = 7,
    TFRDV_DT_COMPLEX64 = 8, TFRDV_DT_INT64 = 9, TFRDV_DT_BOOL = 10, TFRDV_DT_BFLOAT16 = 14,
    TFRDV_DT_UINT16 = 17, TFRDV_DT_COMPLEX128 = 18, TFRDV_DT_HALF = 19, TFRDV_DT_UINT32 = 22,
    TFRDV_DT_UINT64 = 23
} tfrdv_dtype;

/* A value with its own storage: ONE allocation from allocator (NULL: malloc/free; otherwise
   alloc_fn and free_fn both set, and the block goes back to free_fn with its size) holds the
   tfrdv_value, a copy of the rank dims and size bytes of data, copied from data (or zeroed when
   data is NULL). The reference returned is yours (send it, or tfrdv_value_release it); the release
   of the last reference frees the block. ->data is aligned like malloc's; ->user is yours. NULL on
   out of memory, rank < 0, rank > 0 with dims NULL, or a size that cannot be allocated. The
   library does not check size against dtype and dims. Under TFRDV_NO_MALLOC pass an allocator
   (NULL returns NULL).
       int64_t dims[2] = {2, 3};
       tfrdv_value* v = tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 2, dims, NULL, 6 * sizeof(float));
       if (v) ((float*)v->data)[0] = 1.0f;  */
TFRDV_API tfrdv_value* tfrdv_value_new(const tfrdv_allocator* allocator, int32_t dtype,
                                       int32_t rank, const int64_t* dims, const void* data,
                                       uint64_t size);
/* A tfrdv_value by value, for embedding in your own tensor object without designated
   initializers (C++): extra_refs is 0. dims and data are not copied: they must stay valid until
   release runs (release may be NULL for static storage). */
TFRDV_API tfrdv_value tfrdv_value_make(int32_t dtype, int32_t rank, const int64_t* dims,
                                       void* data, uint64_t size,
                                       void (*release)(tfrdv_value* v), void* user);

/* A key that owns its bytes: the text in buf (NUL-terminated) and its parsed view, whose pointers
   point into buf. Pass &k.parsed to tfrdv_send / tfrdv_recv_async / tfrdv_recv. A tfrdv_key can
   live on the stack (about 1.3 KiB) and needs no cleanup. Do NOT copy it with = or memcpy: the
   copy's views would still point into the original; copy with tfrdv_key_from(&dst, src.buf,
   src.len, &st). Keys longer than TFRDV_KEY_MAX - 1 bytes fail with RESOURCE_EXHAUSTED
   (TensorFlow keys are far shorter; build longer ones with tfrdv_key_create into your own
   buffer). After a failed call k holds an empty key (len 0, "" in buf): check the code, do not
   send or receive on it. */
#define TFRDV_KEY_MAX 1024
typedef struct tfrdv_key {
    tfrdv_parsed_key parsed; /* views into buf */
    size_t len;              /* bytes of key text in buf (without the NUL) */
    char buf[TFRDV_KEY_MAX];
} tfrdv_key;
/* tfrdv_key_create + tfrdv_key_parse in one call (same validation and messages). */
TFRDV_API tfrdv_code tfrdv_key_make(tfrdv_key* k, const char* src_device,
                                    uint64_t src_incarnation, const char* dst_device,
                                    const char* edge_name, tfrdv_frame_iter frame_iter,
                                    tfrdv_status* st);
/* Copies len bytes of key text (e.g. a tfrdv_str from a trace event or a transport, or another
   tfrdv_key's buf; text may be k->buf itself) and parses it with tfrdv_key_parse. */
TFRDV_API tfrdv_code tfrdv_key_from(tfrdv_key* k, const char* text, size_t len, tfrdv_status* st);
/* The key of one loop iteration: base with its frame:iter part replaced by frame_iter (TensorFlow
   builds the prefix once per Send/Recv kernel and adds ";frame_id:iter" per execution). k may be
   base itself (changed in place). */
TFRDV_API tfrdv_code tfrdv_key_make_frame(tfrdv_key* k, const tfrdv_key* base,
                                          tfrdv_frame_iter frame_iter, tfrdv_status* st);

/* A worker on a loopback transport in one call: tfrdv_mgr_create with cfg (NULL: defaults), its
   worker_name and transport replaced by worker_name and lb's, then tfrdv_loopback_register.
   On failure nothing is left behind and *out is NULL. Destroy it with tfrdv_mgr_destroy (before
   or after tfrdv_loopback_destroy). */
TFRDV_API tfrdv_code tfrdv_loopback_add_worker(tfrdv_loopback* lb, const char* worker_name,
                                               const tfrdv_mgr_config* cfg, tfrdv_mgr** out,
                                               tfrdv_status* st);
/* tfrdv_mgr_find + tfrdv_mgr_initialize(worker_name NULL) in one call, for a worker that knows
   its step is starting. *out is a new reference (tfrdv_unref it); NULL on failure. */
TFRDV_API tfrdv_code tfrdv_mgr_start_step(tfrdv_mgr* mgr, int64_t step_id, tfrdv_rendezvous** out,
                                          tfrdv_status* st);

/* ---------------------------------------------------------------------------------------------
   Cancellation manager (TensorFlow CancellationManager). Registrations are intrusive nodes you
   own (no allocation): the node is your token. Callbacks run outside the manager's lock, one at
   a time, in registration order.
   --------------------------------------------------------------------------------------------- */
typedef void (*tfrdv_cancel_fn)(void* user);
typedef struct tfrdv_cancel_node {
    struct tfrdv_cancel_node* prev; /* private */
    struct tfrdv_cancel_node* next; /* private */
    tfrdv_cancel_fn fn;             /* private */
    void* user;                     /* private */
    int state;                      /* private: 0 idle, 1 registered, 2 taken by a cancellation */
} tfrdv_cancel_node;

TFRDV_API tfrdv_code tfrdv_cancel_mgr_create(const tfrdv_hooks* hooks, tfrdv_cancel_mgr** out,
                                             tfrdv_status* st);
/* Cancels first (remaining callbacks run), waits for callbacks running on other threads, frees.
   Safe from inside one of its own callbacks (then freed when that cancellation ends). */
TFRDV_API void tfrdv_cancel_mgr_destroy(tfrdv_cancel_mgr* cm);
/* 1: registered. 0: already cancelled or cancelling (fn is not called; handle it yourself). */
TFRDV_API int tfrdv_cancel_register(tfrdv_cancel_mgr* cm, tfrdv_cancel_node* node,
                                    tfrdv_cancel_fn fn, void* user);
/* 1: removed before it ran. 0: its callback ran or is running (if on another thread, waits until
   it returned, so nothing touches the node afterwards), or the node was not registered. */
TFRDV_API int tfrdv_cancel_deregister(tfrdv_cancel_mgr* cm, tfrdv_cancel_node* node);
/* Like deregister but never waits: 0 means the callback has run or is running right now. */
TFRDV_API int tfrdv_cancel_try_deregister(tfrdv_cancel_mgr* cm, tfrdv_cancel_node* node);
/* Runs every registered callback once; later registrations fail. Idempotent. */
TFRDV_API void tfrdv_cancel_start(tfrdv_cancel_mgr* cm);
TFRDV_API int tfrdv_cancel_is_cancelled(tfrdv_cancel_mgr* cm);
/* Makes a manager whose cancellation has finished (or never started) usable again, so a
   transport can keep one per connection or request slot instead of creating one per request.
   FAILED_PRECONDITION while a cancellation is running, a blocking deregister waits, or nodes are
   still registered (they would never be cancelled); INVALID_ARGUMENT for NULL. */
TFRDV_API tfrdv_code tfrdv_cancel_mgr_reset(tfrdv_cancel_mgr* cm);

/* ---------------------------------------------------------------------------------------------
   Rendezvous (local table; also the per-step object of a step manager)
   --------------------------------------------------------------------------------------------- */
/* Config fields, here and in the companions: 0 always means the default (said in each field's
   comment); in a field whose comment names it, TFRDV_OFF turns off what the field bounds or times
   (no deadline, no window, no free list, no retries). A negative value in a field that does not
   name TFRDV_OFF is INVALID_ARGUMENT. */
#define TFRDV_OFF (-1)

typedef struct tfrdv_config {
    tfrdv_hooks hooks;
    int num_shards; /* lock shards (0: 4); keys are spread over shards by hash */
    int min_buckets; /* initial hash buckets per shard, power of two (0: 16); tables grow, and
                        shrink back towards this size as keys leave */
    int free_max;    /* recycled items and channels kept per shard and kind (0: 256 items, 64
                        channels, freed when a table shrinks; n > 0: n of each, kept; TFRDV_OFF:
                        none).
                        Within it the steady state allocates nothing (see MEMORY) */
    size_t max_key_len; /* longest key accepted (0: 4096 bytes); longer: INVALID_ARGUMENT */
} tfrdv_config;
TFRDV_API tfrdv_config tfrdv_config_init(void);

/* A local rendezvous (one table for a process or a device; the step manager makes its own per
   step). Refcount 1; tfrdv_destroy (or the last tfrdv_unref) ends it. cfg may be NULL (defaults). */
TFRDV_API tfrdv_code tfrdv_create(const tfrdv_config* cfg, tfrdv_rendezvous** out, tfrdv_status* st);
TFRDV_API void tfrdv_ref(tfrdv_rendezvous* r);
/* Drops a reference; the last one acts as tfrdv_destroy. */
TFRDV_API void tfrdv_unref(tfrdv_rendezvous* r);
/* Abort(CANCELLED "Rendezvous destroyed"), release buffered values, wait for callbacks running on
   other threads, free. Other references must be gone. See CALLBACK RULES 7. */
TFRDV_API void tfrdv_destroy(tfrdv_rendezvous* r);

/* Keys: every function below copies the key bytes it needs before returning, so a key (and the
   buffer its parsed views point into) only has to live for the duration of the call. */
/* Never blocks. OK: value (may be NULL only when is_dead) now belongs to the rendezvous.
   Otherwise the value stays yours and the code says why: the abort code (aborted),
   INVALID_ARGUMENT (NULL argument; on a step rendezvous a source device not on this worker),
   FAILED_PRECONDITION (step rendezvous not initialised), RESOURCE_EXHAUSTED (out of memory). */
TFRDV_API tfrdv_code tfrdv_send(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                const tfrdv_args* args, tfrdv_value* value, int is_dead,
                                tfrdv_status* st);
/* done gets: OK, the abort status, CANCELLED "RecvAsync is cancelled." (args->cancel), or for a
   remote receive CANCELLED "RecvFromRemoteAsync is cancelled.", DEADLINE_EXCEEDED, a transport
   error. args may be NULL. The callback's recv_args->key names the key. Returns OK when accepted;
   otherwise no callback runs and the code says why: INVALID_ARGUMENT (NULL argument, a key longer
   than max_key_len; on a step rendezvous a destination device not on this worker),
   FAILED_PRECONDITION (step rendezvous not initialised yet), RESOURCE_EXHAUSTED (out of memory),
   and st (may be NULL) has the message naming the key; the logger hook (hooks.logger, level 2)
   gets it too. */
TFRDV_API tfrdv_code tfrdv_recv_async(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                      const tfrdv_args* args, tfrdv_done_fn done, void* user,
                                      tfrdv_status* st);
#ifndef TFRDV_NO_THREADS
/* Blocking receive. timeout_ns <= 0 waits forever. On DEADLINE_EXCEEDED the waiter is removed
   (nothing is delivered later; a value sent afterwards stays buffered for the next receiver).
   On OK *value is an owned reference. A value already buffered in a local table is taken at
   once; otherwise a timed receive creates a private cancellation manager for its duration (one
   allocation). Over a transport that lends the waiting thread (tfrdv_transport.wait: tfrdv_tcp.h)
   this is the fastest remote receive: the thread reads its own response, no hand-off; a
   tfrdv_recv_async callback runs on the transport's thread instead. */
TFRDV_API tfrdv_code tfrdv_recv(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                const tfrdv_args* args, int64_t timeout_ns, tfrdv_value** value,
                                int* is_dead, tfrdv_status* st);
#endif
/* Sticky abort, first status wins (a later abort returns OK and changes nothing). A NULL r, code OK
   or a code above 16 is INVALID_ARGUMENT. Waiting receivers complete with the status, buffered
   values are released, remote calls are cancelled, deferred requests fail with the status. */
TFRDV_API tfrdv_code tfrdv_abort(tfrdv_rendezvous* r, tfrdv_code code, const char* msg);
/* OK or the abort status. */
TFRDV_API tfrdv_code tfrdv_get_status(tfrdv_rendezvous* r, tfrdv_status* out);

/* SendTensorsToRendezvous: sends n values in order; stops at the first failure and returns it
   (values from that index on stay the caller's; *sent receives how many were sent). A receive
   callback a send runs may destroy r: the batch then stops with CANCELLED "Rendezvous destroyed"
   and r is freed as it returns. */
TFRDV_API tfrdv_code tfrdv_send_batch(tfrdv_rendezvous* r, size_t n, const tfrdv_parsed_key* keys,
                                      const tfrdv_args* args, tfrdv_value** values,
                                      const int* is_dead, size_t* sent, tfrdv_status* st);
/* RecvOutputsFromRendezvousAsync: one callback when all n keys arrived or at the first error.
   values[] and is_dead[] (caller memory, valid until done) are filled; on OK the callback owns
   every value reference; on error every value already received has been released and values[]
   are NULL. If a later key's receive is refused (out of memory, a key the rendezvous refuses)
   that is reported through the callback; receives already posted for earlier keys stay posted
   and release whatever they later receive. done may destroy r, even when it runs inside this
   call (the later keys' receives then complete with the destroy's status). */
typedef void (*tfrdv_batch_done_fn)(void* user, const tfrdv_status* status, size_t n,
                                    tfrdv_value** values, int* is_dead);
TFRDV_API tfrdv_code tfrdv_recv_batch_async(tfrdv_rendezvous* r, size_t n,
                                            const tfrdv_parsed_key* keys, const tfrdv_args* args,
                                            tfrdv_value** values, int* is_dead,
                                            tfrdv_batch_done_fn done, void* user);

/* Introspection for hangs: calls fn once per pending key of the local table (with the count of
   buffered sends or waiting receivers) and once per remote call or deferred request (count 1, so
   a key can appear more than once). Snapshot taken under the locks, fn called outside them; if
   memory runs out the snapshot is cut short. Returns the number of entries reported. */
typedef enum tfrdv_pending_kind {
    TFRDV_PENDING_SEND = 0,        /* buffered values nobody received yet */
    TFRDV_PENDING_RECV = 1,        /* receivers waiting for a send */
    TFRDV_PENDING_REMOTE_CALL = 2, /* fetches from other workers in flight */
    TFRDV_PENDING_DEFERRED = 3     /* remote requests waiting for this step's initialisation */
} tfrdv_pending_kind;
typedef void (*tfrdv_pending_fn)(void* user, int64_t step_id, tfrdv_pending_kind kind,
                                 const char* key, size_t key_len, size_t count);
TFRDV_API size_t tfrdv_pending(tfrdv_rendezvous* r, tfrdv_pending_fn fn, void* user);

/* ---------------------------------------------------------------------------------------------
   Transports (provider side). A transport fetches one tensor from another worker per call.
   Build a tfrdv_transport from a zeroed struct (memset, or = {0} in C): fields may be added in
   later versions, and one left undefined would be called.
   Provider contract (enforced by the core):
     - start_call(call): begin the fetch; finish it later (or inside start_call) with exactly one
       tfrdv_call_finish() or tfrdv_call_finish_status(). Never touch the call after finishing it.
     - cancel_call(call): may come 0..n times, concurrently with or after finish; must be harmless.
       Finish promptly (CANCELLED is fine) if the fetch is still running.
     - destroy(user): the owning manager is gone.
   A second finish of the same attempt is counted (tfrdv_mgr_stats.double_finishes), ignored and
   trips TFRDV_ASSERT, as long as the call object still exists: it is recycled once the provider
   finished and every cancel_call returned, and a finish after that is a use after free.
   --------------------------------------------------------------------------------------------- */
typedef struct tfrdv_call tfrdv_call;
typedef struct tfrdv_transport {
    void* user;
    void (*start_call)(void* user, tfrdv_call* call);
    void (*cancel_call)(void* user, tfrdv_call* call);
    void (*destroy)(void* user); /* the manager that held it is gone (optional) */
    /* Optional. Set: every manager given this vtable takes its own reference with ref(user) when
       its create succeeds, and drops it with destroy(user) when it goes, so one vtable (or a
       copied config) may serve any number of managers. NULL: the one manager given it owns it,
       and destroy runs once, when that manager goes. */
    void (*ref)(void* user);
    /* Optional. A thread blocked in tfrdv_recv for the call lends itself: drive the call's I/O
       on this thread (read its socket, finish it here: one thread wake fewer per fetch) and
       return by timeout_ns (-1: no limit) or as soon as the call was finished or cancel_call was
       called for it; returning earlier is always allowed. Return 0 when this thread cannot help
       (the call is not on the wire, another thread drives its connection): tfrdv_recv then waits
       for the finish without calling wait again. The call stays valid (not recycled) until wait
       returns. Other calls finished meanwhile run their callbacks on this thread. */
    int (*wait)(void* user, tfrdv_call* call, int64_t timeout_ns);
    /* Optional. Each manager created with this vtable is announced: bind(user, mgr, 1) once its
       create succeeded, bind(user, mgr, 0) as tfrdv_mgr_destroy begins. A transport with a
       thread of its own uses it to drive tfrdv_mgr_expire (deadlines, retries in back-off) for
       every manager that fetches through it, served or not. After bind(..., 0) returns it must
       not call in for mgr; a call racing with it is safe while it holds a tfrdv_mgr_ref. */
    void (*bind)(void* user, tfrdv_mgr* mgr, int bound);
    /* Optional. The incarnation of serving worker `worker` ("/job:J/replica:R/task:T") as this
       transport learns it (tfrdv_tcp.h: the peer's HELLO; tfrdv_grpc.h: GetStatus; tfrdv_verbs.h:
       the bootstrap), waiting up to timeout_ns (< 0: no limit) for the worker to answer. OK and
       *incarnation, or NOT_FOUND (no address for it), UNAVAILABLE (it does not answer),
       DEADLINE_EXCEEDED, with st naming the worker. Blocking; tfrdv_mgr_peer_incarnation calls it. */
    tfrdv_code (*peer_incarnation)(void* user, tfrdv_mgr* mgr, tfrdv_str worker, int64_t timeout_ns,
                                   uint64_t* incarnation, tfrdv_status* st);
} tfrdv_transport;

TFRDV_API int64_t tfrdv_call_step_id(const tfrdv_call* call);
TFRDV_API tfrdv_str tfrdv_call_key(const tfrdv_call* call);
TFRDV_API int64_t tfrdv_call_request_id(const tfrdv_call* call); /* same on every retry */
TFRDV_API tfrdv_str tfrdv_call_src_worker(const tfrdv_call* call); /* "/job:x/replica:r/task:t" */
TFRDV_API void* tfrdv_call_endpoint(const tfrdv_call* call); /* from the resolver, or NULL */
TFRDV_API const tfrdv_args* tfrdv_call_recv_args(const tfrdv_call* call);
TFRDV_API int tfrdv_call_attempt(const tfrdv_call* call); /* 0 first try, 1.. retries */
/* The manager the call belongs to (for its clock, tfrdv_mgr_now, when one transport serves
   several managers); valid from start_call until the finish. */
TFRDV_API tfrdv_mgr* tfrdv_call_mgr(const tfrdv_call* call);
/* 64 bytes of provider scratch memory, aligned for any fundamental type (as long double: 16 bytes
   on common 64-bit targets, given an allocator with that alignment), valid from start_call to
   finish. */
TFRDV_API void* tfrdv_call_scratch(tfrdv_call* call);
#define TFRDV_CALL_SCRATCH_SIZE 64
/* Memory for the incoming tensor: the receiver's alloc hook if it gave one, else the manager's
   allocator (value->dims and ->data point into one block; release frees it). NULL on failure. */
TFRDV_API tfrdv_value* tfrdv_call_alloc_value(tfrdv_call* call, int32_t dtype, int32_t rank,
                                              const int64_t* dims, uint64_t size);
/* The call's deadline (tfrdv_mgr_config.call_timeout_ns after the receive was posted), absolute
   on the manager's clock (tfrdv_mgr_now), or INT64_MAX when there is none: put it on the wire
   (a gRPC deadline, a verbs timeout). The core enforces it too, in tfrdv_mgr_expire. */
TFRDV_API int64_t tfrdv_call_deadline(const tfrdv_call* call);
/* 1 when a thread blocked in tfrdv_recv waits for this call and will lend itself through
   tfrdv_transport.wait as soon as start_call returns (the first attempt of a tfrdv_recv on a
   manager whose transport has wait; through tfrdv_router, wait reaches the call's route only if
   its transport has one); 0 otherwise: tfrdv_recv_async, a retry (attempt 1..), no wait hook.
   From start_call on. A hint for a provider that keeps a connection out of its event loop while
   waiting threads keep reading it: a call answering 0 needs the loop. wait may still decline or
   not come at all (the receive timed out or was cancelled first: cancel_call comes then). */
TFRDV_API int tfrdv_call_will_wait(const tfrdv_call* call);
/* Exactly once per start_call. value (may be NULL) is one owned reference handed to the core. OK
   with no value needs is_dead: otherwise the receiver gets INTERNAL (provider contract). A byte of
   msg outside 0x20..0x7e reaches the receiver as \xNN (a backslash is kept as it is), the whole
   cut to TFRDV_STATUS_MSG_MAX; the same for tfrdv_call_finish_status. */
TFRDV_API void tfrdv_call_finish(tfrdv_call* call, tfrdv_code code, const char* msg,
                                 tfrdv_value* value, int is_dead);
/* The same with a whole status (NULL: OK), so its detail reaches the receiver: a transport that
   learns the serving worker was restarted (TensorFlow's WorkerPossiblyRestarted) says so with
   detail TFRDV_DETAIL_WORKER_RESTARTED. give_back is for a provider that can return a value to
   where it came from (an in-process transport: tfrdv_mgr_serve_return on the serving manager):
   nonzero, an OK answer whose receiver already had its answer (it was cancelled, aborted or timed
   out while this one was on its way) is not taken: the function returns 1 and value (and is_dead)
   stay yours, to give back or release. Otherwise it returns 0 and the value was taken (released
   when nobody wants it), as by tfrdv_call_finish. */
TFRDV_API int tfrdv_call_finish_status(tfrdv_call* call, const tfrdv_status* status,
                                       tfrdv_value* value, int is_dead, int give_back);

/* ---------------------------------------------------------------------------------------------
   Step manager: one rendezvous per step id, created on demand, plus the serving side.
   --------------------------------------------------------------------------------------------- */

/* Same-worker receive where src and dst devices differ (TensorFlow SameWorkerRecvDone): copy
   `in` (owned) to the destination device and call done exactly once with the result. NULL hook:
   the buffer is shared (host memory). */
typedef void (*tfrdv_copy_done_fn)(void* done_ctx, tfrdv_code code, const char* msg,
                                   tfrdv_value* out);
typedef void (*tfrdv_copy_fn)(void* user, const tfrdv_parsed_key* key,
                              const tfrdv_args* send_args, const tfrdv_args* recv_args,
                              tfrdv_value* in, tfrdv_copy_done_fn done, void* done_ctx);

/* Transfer trace (optional, per manager): one event per completed transfer of a step rendezvous,
   called outside every library lock, possibly from several threads at once. Unset, it costs
   nothing (no clock reads). Times are on the manager's clock. key and the event are borrowed
   for the call. */
typedef enum tfrdv_trace_side {
    TFRDV_TRACE_LOCAL = 0, /* a receive on this worker met its send (the same worker) */
    TFRDV_TRACE_FETCH = 1, /* a receive fetched from another worker (a remote call) */
    TFRDV_TRACE_SERVE = 2  /* this worker answered another worker's request (tfrdv_mgr_serve) */
} tfrdv_trace_side;
typedef struct tfrdv_trace_event {
    int64_t step_id;
    tfrdv_str key;
    uint64_t bytes;         /* value->size (0 on error or for a dead value without payload) */
    int32_t dtype;          /* value->dtype, or 0 */
    int is_dead;
    tfrdv_trace_side side;
    tfrdv_code code;        /* how it completed */
    int64_t start_ns;       /* LOCAL: the earlier of send and receive; FETCH: receive posted;
                               SERVE: request arrived */
    int64_t end_ns;         /* completion */
} tfrdv_trace_event;
typedef void (*tfrdv_trace_fn)(void* user, const tfrdv_trace_event* ev);
/* One event as a Chrome / Perfetto trace event (open the file in https://ui.perfetto.dev or
   chrome://tracing): a complete event ("ph":"X") named after the key's edge, "cat" local / fetch /
   serve, "ts" and "dur" in microseconds since t0_ns, the given pid (one per worker), tid 1 + side,
   and args step, key, bytes, dtype, dead, code. Writes the JSON object (no separator) into buf,
   at most cap bytes, NUL-terminated when cap > 0; returns the full length (like snprintf). A
   trace file is "[" + the events separated by "," + "]":
       static void on_trace(void* user, const tfrdv_trace_event* ev) {   (lock: several threads)
           char line[1024];
           tfrdv_trace_json(ev, t0, 1, line, sizeof line);
           fprintf(f, "%s%s\n", first ? "[" : ",", line);  first = 0;
       }                                        and fputs("]\n", f) at the end */
TFRDV_API size_t tfrdv_trace_json(const tfrdv_trace_event* ev, int64_t t0_ns, int pid, char* buf,
                                  size_t cap);

struct tfrdv_mgr_config {
    tfrdv_hooks hooks;
    const char* worker_name;       /* "/job:w/replica:0/task:0" (required) */
    uint64_t incarnation;          /* of this worker's devices (0: random-looking, from the clock
                                      and the manager's address) */
    /* Optional per-device incarnation (return 0 for an unknown device -> NOT_FOUND). */
    uint64_t (*device_incarnation)(void* user, const char* device, size_t len);
    void* device_incarnation_user;
    tfrdv_transport transport;     /* owned: destroy() is called when the manager is freed */
    /* Optional: worker name -> endpoint for tfrdv_call_endpoint(); NULL result -> INTERNAL
       "No worker known as <name>". */
    void* (*resolve)(void* user, const char* worker, size_t len);
    void* resolve_user;
    tfrdv_copy_fn same_worker_copy;
    void* same_worker_copy_user;
    int num_shards;                /* per step rendezvous (0: 1) */
    int64_t deferred_timeout_ns;   /* remote requests for an uninitialised step (0: 60 s;
                                      TFRDV_OFF: no deadline) */
    int tombstone_max;             /* cleaned step ids remembered (0: 1024) */
    int64_t tombstone_ttl_ns;      /* and for how long (0: 60 s) */
    int request_id_window;         /* recent request ids kept for dedup (0: 16384; TFRDV_OFF: no
                                      dedup) */
    int response_cache;            /* 1: answer a retried request id with the same response
                                      (0: no cache, the default) */
    int response_cache_max;        /* cached entries (0: 4096); beyond it requests are uncached */
    int64_t call_timeout_ns;       /* remote-call deadline per receive (0: none, the default;
                                      TFRDV_OFF: none) */
    int call_max_retries;          /* retries on UNAVAILABLE (0: none, the default; TFRDV_OFF:
                                      none) */
    int64_t retry_backoff_ns;      /* first backoff (0: 1 ms); x1.3 per retry */
    int64_t retry_backoff_max_ns;  /* cap (0: 10 s) */
    int call_freelist_max;         /* recycled call objects kept (0: 1000; TFRDV_OFF: none) */
    int free_max;                  /* recycled items and channels per step shard and kind, and
                                      recycled serve records (0: as tfrdv_config; TFRDV_OFF:
                                      none) */
    size_t max_key_len;            /* longest key sent, received or served (0: 4096 bytes) */
    int max_deferred;              /* requests waiting for step initialisation, all steps together
                                      (0: 65536); beyond it RESOURCE_EXHAUSTED */
    /* Idle-step policy: tfrdv_mgr_expire cleans up (as tfrdv_mgr_cleanup, tombstone included) a
       step that nobody holds a reference to and that has nothing buffered, waiting, deferred or
       in flight, once it stayed so for this long: a worker whose steps a remote master starts
       (a TensorFlow cluster) needs no step bookkeeping. 0: never, the default; TFRDV_OFF: never. */
    int64_t step_idle_timeout_ns;
    tfrdv_trace_fn trace;          /* optional transfer trace, see tfrdv_trace_event */
    void* trace_user;
    /* Optional: a remote request (tfrdv_mgr_serve) arrived for a step this worker has not
       initialised, and was deferred. Called once per such request, outside every library lock, on
       the serving thread, possibly after the request was already answered (key is borrowed for the
       call). A worker whose steps a remote master starts learns the step id here: a TensorFlow
       master never tells a foreign worker about its steps, the id first arrives in a RecvTensor.
       Start the step from here (tfrdv_mgr_start_step) and produce what the key asks for; the
       deferred requests are then served. Not called for initialised, aborted or cleaned steps. */
    void (*step_requested)(void* user, tfrdv_mgr* mgr, int64_t step_id, tfrdv_str key);
    void* step_requested_user;
};
TFRDV_API tfrdv_mgr_config tfrdv_mgr_config_init(void);

TFRDV_API tfrdv_code tfrdv_mgr_create(const tfrdv_mgr_config* cfg, tfrdv_mgr** out,
                                      tfrdv_status* st);
/* Starts shutdown and drops the owner's reference: marks the manager shut down (from now on
   tfrdv_mgr_serve answers ABORTED and tfrdv_mgr_find fails FAILED_PRECONDITION), aborts every step
   (ABORTED "Shutdown: step <id>"), fails deferred requests. Needs no memory. The manager's memory
   and transport.destroy() go with the last reference: the owner's, tfrdv_mgr_ref's, each step
   rendezvous' and each transport call's. */
TFRDV_API void tfrdv_mgr_destroy(tfrdv_mgr* mgr);
/* References for code that may call in while the owner destroys the manager: a server thread, a
   transport. Take one before handing the pointer to such code and drop it when that code can no
   longer call in; every function stays memory-safe on a destroyed manager that you hold a
   reference to (serve answers ABORTED, find fails). Never call tfrdv_mgr_unref for the owner's
   reference: tfrdv_mgr_destroy drops that one. */
TFRDV_API void tfrdv_mgr_ref(tfrdv_mgr* mgr);
TFRDV_API void tfrdv_mgr_unref(tfrdv_mgr* mgr);
/* The manager's clock (hooks.clock, else tfrdv_now_ns()): deadlines and tfrdv_mgr_expire use it. */
TFRDV_API int64_t tfrdv_mgr_now(const tfrdv_mgr* mgr);
TFRDV_API const char* tfrdv_mgr_worker_name(const tfrdv_mgr* mgr);
TFRDV_API uint64_t tfrdv_mgr_incarnation(const tfrdv_mgr* mgr);
/* The incarnation of another worker ("/job:ps/replica:0/task:0"), for the keys of the tensors it
   sends: asked through the manager's transport (the router's route for that worker), waiting up
   to timeout_ns (< 0: no limit) while the worker is not up yet. The manager's own name gives its
   own incarnation. INVALID_ARGUMENT (not a worker name), NOT_FOUND (the transport knows no address
   for it), UNAVAILABLE, DEADLINE_EXCEEDED, UNIMPLEMENTED (a transport without
   tfrdv_transport.peer_incarnation); st names the worker. Blocking: not from a callback that runs
   on the transport's thread. */
TFRDV_API tfrdv_code tfrdv_mgr_peer_incarnation(tfrdv_mgr* mgr, const char* worker, int64_t timeout_ns,
                                                uint64_t* incarnation, tfrdv_status* st);

/* Find-or-create the step's rendezvous; *out is a new reference (tfrdv_unref it). A created one is
   not initialised: remote requests for it are deferred until tfrdv_mgr_initialize. */
TFRDV_API tfrdv_code tfrdv_mgr_find(tfrdv_mgr* mgr, int64_t step_id, tfrdv_rendezvous** out,
                                    tfrdv_status* st);
/* Second phase: bind the step to worker_name (NULL: the manager's) and serve deferred requests.
   Same name again: OK. Another name: INTERNAL "Double init! Worker names would have changed
   from: A -> B". On an aborted step: the abort status. */
TFRDV_API tfrdv_code tfrdv_mgr_initialize(tfrdv_rendezvous* r, const char* worker_name,
                                          tfrdv_status* st);
/* Abort the step with ABORTED "Cleanup <step>" and forget it; a request arriving later for it
   fails at once with ABORTED "Cleanup <step> (the step was cleaned up before ...)" while its
   tombstone lasts (until tombstone_ttl_ns ages it out in tfrdv_mgr_expire, tombstone_max newer
   ones push it out, or tfrdv_mgr_find creates the step again). Unknown steps are tombstoned too.
   A callback they run (a receive aborted, a drain ended) may destroy the manager. */
TFRDV_API void tfrdv_mgr_cleanup(tfrdv_mgr* mgr, int64_t step_id);
TFRDV_API void tfrdv_mgr_cleanup_all(tfrdv_mgr* mgr);
/* Cleans step_id up (as tfrdv_mgr_cleanup) once it has DRAINED: its table holds no value and no
   waiting receive, no remote request is deferred or being answered, no call of it is in flight,
   and every value a serving transport took with TFRDV_SERVE_CONFIRMS (tfrdv_tcp.h, tfrdv_grpc.h
   between tfrdv peers, tfrdv_verbs.h, the loopback) was confirmed delivered. A producer calls it
   after the step's last send instead of guessing when its consumers are done: no value is lost
   and none delivered after the cleanup. done runs exactly once, outside every library lock
   (possibly inline), with:
     OK                 drained and cleaned up. A step that does not exist is drained already.
     DEADLINE_EXCEEDED  timeout_ns (< 0: none) passed first, acted on by tfrdv_mgr_expire (the
                        companions' threads call it; without one, call it yourself): cleaned up
                        as tfrdv_mgr_cleanup does; the message says what was left.
     the abort status   the step was aborted; it is cleaned up.
     ABORTED            tfrdv_mgr_cleanup, the idle-step policy or shutdown came first.
   Drainage is noticed when it happens (a confirmation, a served answer, a send or receive through
   tfrdv_* calls on the step); anything else (a receive cancelled) at the next tfrdv_mgr_expire.
   Send into the step before this call: a send after it races with the cleanup. Returns
   INVALID_ARGUMENT (and no callback) for a NULL manager or done, RESOURCE_EXHAUSTED (no callback)
   when out of memory. */
typedef void (*tfrdv_drained_fn)(void* user, int64_t step_id, const tfrdv_status* status);
TFRDV_API tfrdv_code tfrdv_mgr_cleanup_when_drained(tfrdv_mgr* mgr, int64_t step_id, int64_t timeout_ns,
                                                    tfrdv_drained_fn done, void* user);
/* The same, blocking up to timeout_ns (< 0: no limit; timed by itself, no tfrdv_mgr_expire
   needed). Returns what done would get. Something must move the values meanwhile: a transport
   with its own thread, or other threads. Not from a callback on a transport's thread. */
TFRDV_API tfrdv_code tfrdv_mgr_drain(tfrdv_mgr* mgr, int64_t step_id, int64_t timeout_ns, tfrdv_status* st);
/* Acts on every deadline <= now_ns (deferred requests, call deadlines, retries, tombstones).
   now_ns must come from the manager's clock (hooks.clock; by default tfrdv_now_ns()), which also
   stamps deadlines and retry times. Tombstones are dropped here, so an old one keeps rejecting
   requests until the next call. Returns the next pending deadline, or INT64_MAX if none. A
   callback it runs (a receive, a drain's done) may destroy the manager: expire holds a
   reference of its own until it returns. */
TFRDV_API int64_t tfrdv_mgr_expire(tfrdv_mgr* mgr, int64_t now_ns);
/* Active step ids: writes up to cap, returns the total. */
TFRDV_API size_t tfrdv_mgr_steps(tfrdv_mgr* mgr, int64_t* out, size_t cap);
/* tfrdv_pending over every step. */
TFRDV_API size_t tfrdv_mgr_pending(tfrdv_mgr* mgr, tfrdv_pending_fn fn, void* user);

/* Serving side: answer a remote RecvTensor(step_id, key, request_id) from this worker's tables.
   done runs exactly once with OK + the sender's args (device_context, alloc_attrs: copy a device
   tensor to host before encoding it) + value (one owned reference; NULL only if dead) + is_dead,
   or an error (send_args then all zero): INVALID_ARGUMENT (bad or too long key, source not on this
   worker), NOT_FOUND (the device_incarnation hook does not know the device), ABORTED (incarnation
   mismatch, duplicate request id, cleaned step, manager shutting down), the step's own abort
   status, DEADLINE_EXCEEDED (step not initialised before deferred_timeout_ns; acted on by
   tfrdv_mgr_expire), RESOURCE_EXHAUSTED (out of memory, max_deferred reached), CANCELLED
   (withdrawn). done may run inline, before tfrdv_mgr_serve returns.
   Withdrawing: cancel (optional; it must outlive the request, i.e. until done ran) withdraws the
   request when cancelled, e.g. because the client cancelled its RPC. A withdrawn request
   completes done exactly once with CANCELLED "RecvTensor withdrawn ..." (unless its answer was
   already being delivered), takes nothing: a value sent later stays buffered for the next
   receiver, and its request id leaves the dedup window so a retry with the same id is served.
   TensorFlow instead aborts the whole step when a served RPC is cancelled. Retries waiting on a
   withdrawn request's response-cache entry (same request id) complete with CANCELLED too.
   Returns INVALID_ARGUMENT (and no callback) only for a NULL mgr or done, or a NULL key with a
   non-zero length. */
typedef void (*tfrdv_serve_done_fn)(void* user, const tfrdv_status* status,
                                    const tfrdv_args* send_args, tfrdv_value* value, int is_dead);
TFRDV_API tfrdv_code tfrdv_mgr_serve(tfrdv_mgr* mgr, int64_t step_id, const char* key,
                                     size_t key_len, int64_t request_id, tfrdv_cancel_mgr* cancel,
                                     tfrdv_serve_done_fn done, void* user);
/* tfrdv_mgr_serve with flags. TFRDV_SERVE_CONFIRMS: the caller reports what became of the value
   an OK answer hands it (request_id != 0): tfrdv_mgr_serve_delivered once the client took it,
   tfrdv_mgr_serve_return when it did not. Until then the step has not drained
   (tfrdv_mgr_cleanup_when_drained). Without the flag a value counts as delivered when done hands
   it over. */
#define TFRDV_SERVE_CONFIRMS 1u
TFRDV_API tfrdv_code tfrdv_mgr_serve_ex(tfrdv_mgr* mgr, int64_t step_id, const char* key,
                                        size_t key_len, int64_t request_id, unsigned flags,
                                        tfrdv_cancel_mgr* cancel, tfrdv_serve_done_fn done,
                                        void* user);
/* The client took the value served for request_id (TFRDV_SERVE_CONFIRMS); unknown ids are ignored. */
TFRDV_API void tfrdv_mgr_serve_delivered(tfrdv_mgr* mgr, int64_t request_id);
/* MarkRecvFinished: drop the response-cache entry of request_id. The cache is keyed by request
   id only, as TensorFlow's: a request reusing a cached id gets the cached answer whatever its key. */
TFRDV_API void tfrdv_mgr_ack(tfrdv_mgr* mgr, int64_t request_id);
/* Give back what a serve done callback handed over but the transport could not deliver (the
   client's deadline passed, it cancelled or its connection broke while the reply was on its way):
   the value (one owned reference; NULL only if is_dead) goes to the key's first waiting receiver
   in step step_id, else to the FRONT of the key's queue, ahead of values sent later, so the next
   receiver gets it in send order. send_args as the done callback gave them (copied). The request
   id leaves the dedup window (a retry with the same id is served afresh) and its response-cache
   entry is dropped. The value is always taken: OK when it went back; when it could not (the step
   was cleaned up or aborted, the manager shut down: nobody can receive it any more) it is
   released and the code says why (ABORTED, the step's abort status, or INVALID_ARGUMENT for a
   NULL manager, a bad key or a NULL live value). The receiver it goes to may destroy the
   manager from its callback. */
TFRDV_API tfrdv_code tfrdv_mgr_serve_return(tfrdv_mgr* mgr, int64_t step_id, const char* key,
                                            size_t key_len, int64_t request_id,
                                            const tfrdv_args* send_args, tfrdv_value* value,
                                            int is_dead, tfrdv_status* st);

typedef struct tfrdv_mgr_stats {
    uint64_t steps_created, steps_cleaned, calls_started, calls_retried, calls_completed;
    uint64_t double_finishes;      /* provider contract violations, ignored */
    uint64_t duplicate_requests, cache_hits, deferred_expired, tombstone_hits;
    uint64_t requests_served;      /* tfrdv_mgr_serve calls (the serving side) */
    uint64_t requests_deferred;    /* of which arrived before their step was initialised */
    uint64_t steps_idle_cleaned;   /* by the idle-step policy (also in steps_cleaned) */
    uint64_t steps_drained;        /* cleaned by tfrdv_mgr_cleanup_when_drained/_drain (also in
                                      steps_cleaned), drains_timed_out of them after their timeout */
    uint64_t drains_timed_out;
    size_t deliveries_unconfirmed; /* values served with TFRDV_SERVE_CONFIRMS not yet confirmed */
    size_t active_steps, tombstones, calls_in_flight, calls_free;
} tfrdv_mgr_stats;
TFRDV_API void tfrdv_mgr_get_stats(tfrdv_mgr* mgr, tfrdv_mgr_stats* out);

/* A new request id: unique among this manager's ids, random-looking, never 0. */
TFRDV_API int64_t tfrdv_mgr_new_request_id(tfrdv_mgr* mgr);

/* ---------------------------------------------------------------------------------------------
   Loopback transport: several managers ("workers") in one process; a remote call on one is served
   from another's table, zero copy (or into the receiver's alloc hook memory).
   --------------------------------------------------------------------------------------------- */
TFRDV_API tfrdv_code tfrdv_loopback_create(const tfrdv_hooks* hooks, tfrdv_loopback** out,
                                           tfrdv_status* st);
/* Unregisters every worker (a fetch through lb fails UNAVAILABLE from now on), finishes every
   fetch in flight CANCELLED (its served request is withdrawn: a value stays on the serving
   worker) and drops the owner's reference: before or after its managers (TRANSPORTS). */
TFRDV_API void tfrdv_loopback_destroy(tfrdv_loopback* lb);
/* The vtable for tfrdv_mgr_config.transport: each manager given it holds lb (TRANSPORTS). lb
   NULL: an all-zero vtable (no transport). */
TFRDV_API tfrdv_transport tfrdv_loopback_transport(tfrdv_loopback* lb);
/* Route worker_name (e.g. "/job:ps/replica:0/task:0") to mgr; replaces an earlier entry (a
   "restart"); mgr NULL removes it. */
TFRDV_API tfrdv_code tfrdv_loopback_register(tfrdv_loopback* lb, const char* worker_name,
                                             tfrdv_mgr* mgr, tfrdv_status* st);

/* ---------------------------------------------------------------------------------------------
   Router: one manager, several transports, picked per call by the worker the tensor comes from,
   so one worker fetches from TensorFlow peers over gRPC, from tfrdv peers over TCP or verbs, and
   from same-process workers over the loopback.
       tfrdv_route routes[3] = {{"/job:tf", grpc_transport}, {"/job:ps", tcp_transport},
                                {"*", loopback_transport}};
       rc.routes = routes;  rc.num_routes = 3;
       tfrdv_router_create(&rc, &mc.transport, &st);        then tfrdv_mgr_create(&mc, ...)
   Servers are attached to the manager as usual (tfrdv_grpc_attach, tfrdv_tcp_attach, ...): any
   number of them may serve the same manager at once.
   --------------------------------------------------------------------------------------------- */
typedef struct tfrdv_route {
    /* Which source workers: a device-name pattern matched part by part against the call's source
       worker (tfrdv_call_src_worker): "/job:ps" (every task of job ps), "/job:ps/task:1",
       "/job:ps/replica:0/task:1"; "", "/" or "*" match every worker. */
    const char* workers;
    tfrdv_transport transport;
} tfrdv_route;
typedef struct tfrdv_router_config {
    tfrdv_hooks hooks;          /* allocator (the router's own memory) */
    const tfrdv_route* routes;  /* copied; the first route whose pattern matches wins */
    size_t num_routes;          /* 1..64 */
    /* Optional, asked before the patterns: the index of the route for this worker, or -1 to use
       the patterns. It must answer the same for a worker for the whole life of a call (a call's
       cancellation goes to the transport that started it). Called without library locks. */
    int (*pick)(void* user, const char* worker, size_t len);
    void* pick_user;
} tfrdv_router_config;
TFRDV_API tfrdv_router_config tfrdv_router_config_init(void);
/* Builds the routing transport into *out (for ONE manager's tfrdv_mgr_config.transport: the
   router has no ref hook, the manager owns it). It holds each distinct route transport as a
   manager would: a reference (its ref hook) now, or the ownership of one without a ref hook; its
   destroy drops them (each distinct transport's destroy once). On failure it takes nothing and names the bad route (a pattern that does not parse, a transport without
   start_call or cancel_call). A pick answer out of range fails that call INTERNAL. A call no route
   matches fails INTERNAL "tfrdv router: no route for worker <name>" (as an unknown worker does
   with the manager's resolve hook). */
TFRDV_API tfrdv_code tfrdv_router_create(const tfrdv_router_config* cfg, tfrdv_transport* out,
                                         tfrdv_status* st);


#ifdef __cplusplus
}
#endif
#endif /* TFRDV_H */

/* =============================================================================================
   IMPLEMENTATION
   ============================================================================================= */
#if defined(TFRDV_IMPLEMENTATION) && !defined(TFRDV__IMPLEMENTATION_DONE)
#define TFRDV__IMPLEMENTATION_DONE

#include <string.h>
#include <stdarg.h>

/* >>config */
#ifndef TFRDV_ASSERT
#include <assert.h>
#define TFRDV_ASSERT(x) assert(x)
#endif

#if defined(TFRDV_NO_THREADS)
#define TFRDV__HAS_NONE 1
#elif defined(TFRDV_THREADS_CUSTOM)
#define TFRDV__HAS_CUSTOM 1
#elif defined(_WIN32)
#define TFRDV__HAS_WIN32 1
#else
#define TFRDV__HAS_POSIX 1
#endif

#if defined(TFRDV__HAS_POSIX)
#include <pthread.h>
#include <errno.h>
#include <time.h>
#if defined(__linux__) && defined(__GLIBC__) && !defined(TFRDV_NO_FUTEX) && (defined(__GNUC__) || defined(__clang__))
/* Linux: the library's locks are futex words with a short spin (an uncontended lock is one
   atomic and its unlock a plain store, inline; a contended one spins briefly before it sleeps in
   the kernel) */
#define TFRDV__FUTEX 1
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/futex.h>
#if !defined(__cplusplus) && !defined(__USE_MISC)
long syscall(long number, ...); /* declared by <unistd.h> only outside strict ISO modes */
#endif
#endif
#if defined(__linux__) && defined(__GLIBC__) && !defined(TFRDV_NO_HUGEPAGES) && !defined(TFRDV_NO_MALLOC)
/* Linux: large value blocks ask for transparent huge pages (see TFRDV_NO_HUGEPAGES) */
#define TFRDV__HUGEPAGES 1
#include <sys/mman.h>
#if defined(MADV_HUGEPAGE)
#define TFRDV__MADV_HUGEPAGE MADV_HUGEPAGE
#else
#define TFRDV__MADV_HUGEPAGE 14 /* Linux's value; <sys/mman.h> names it only outside strict ISO modes */
#endif
#if !defined(__cplusplus) && !defined(__USE_MISC)
int madvise(void* addr, size_t len, int advice);
#endif
#endif
#elif defined(TFRDV__HAS_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#endif
#if !defined(TFRDV_NO_CLOCK) && !defined(TFRDV__HAS_POSIX) && !defined(TFRDV__HAS_WIN32)
#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#else
#include <time.h>
#endif
#endif
#if !defined(TFRDV_NO_CLOCK) && !defined(_WIN32) && !defined(CLOCK_MONOTONIC)
#error "tfrdv.h: CLOCK_MONOTONIC is not declared: a system header came before tfrdv.h under a strict -std=c99. Include tfrdv.h first in the file that defines TFRDV_IMPLEMENTATION, or compile that file with -D_POSIX_C_SOURCE=200809L (or -D_GNU_SOURCE), or define TFRDV_NO_CLOCK and pass a clock hook"
#endif
#ifndef TFRDV_NO_MALLOC
#include <stdlib.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TFRDV__PRIVATE static __attribute__((unused))
/* the lock fast paths, key scanning, and the steps of a send or receive (slot lookup, channel
   creation and removal, taking a buffered send): inlined into the public calls, since each was a
   call of a few instructions' work in the send+recv pair (measured: 43.6 -> 35.5 ns) */
#define TFRDV__HOT static __inline__ __attribute__((unused, always_inline))
/* the rare branch of a hot step, kept out of line so the hot code stays small */
#define TFRDV__COLD static __attribute__((unused, noinline))
#else
#define TFRDV__PRIVATE static
#define TFRDV__HOT static
#define TFRDV__COLD static
#endif
#define TFRDV__DEF(val, def) (((val) == 0) ? (def) : (val))
#define TFRDV__UNUSED(x) ((void)(x))

/* >>atomics  (plain operations in the single-threaded build) */
#if defined(TFRDV__HAS_NONE)
TFRDV__PRIVATE long tfrdv__atomic_add(volatile long* p, long v) { /* wraps, as the atomic ones do */
    *p = (long)((unsigned long)*p + (unsigned long)v);
    return *p;
}
TFRDV__PRIVATE long tfrdv__atomic_load(volatile long* p) { return *p; }
TFRDV__PRIVATE void tfrdv__atomic_store(volatile long* p, long v) { *p = v; }
TFRDV__PRIVATE uint32_t tfrdv__atomic_sub_u32(volatile uint32_t* p) { return (*p)--; }
TFRDV__PRIVATE void tfrdv__atomic_inc_u32(volatile uint32_t* p) { (*p)++; }
TFRDV__PRIVATE uint32_t tfrdv__atomic_load_u32(volatile uint32_t* p) { return *p; }
TFRDV__PRIVATE int tfrdv__atomic_cas(volatile long* p, long* expect, long v) {
    if (*p != *expect) {
        *expect = *p;
        return 0;
    }
    *p = v;
    return 1;
}
TFRDV__PRIVATE long tfrdv__atomic_or(volatile long* p, long v) {
    long old = *p;
    *p |= v;
    return old;
}
#elif defined(__GNUC__) || defined(__clang__)
TFRDV__PRIVATE long tfrdv__atomic_add(volatile long* p, long v) {
    return __atomic_add_fetch(p, v, __ATOMIC_SEQ_CST);
}
TFRDV__PRIVATE long tfrdv__atomic_load(volatile long* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
TFRDV__PRIVATE void tfrdv__atomic_store(volatile long* p, long v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
/* returns the value before the subtraction */
TFRDV__PRIVATE uint32_t tfrdv__atomic_sub_u32(volatile uint32_t* p) {
    return __atomic_fetch_sub(p, 1u, __ATOMIC_ACQ_REL);
}
TFRDV__PRIVATE void tfrdv__atomic_inc_u32(volatile uint32_t* p) { __atomic_fetch_add(p, 1u, __ATOMIC_RELAXED); }
TFRDV__PRIVATE uint32_t tfrdv__atomic_load_u32(volatile uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
/* *expect is updated on failure; success releases */
TFRDV__PRIVATE int tfrdv__atomic_cas(volatile long* p, long* expect, long v) {
    return __atomic_compare_exchange_n(p, expect, v, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}
/* returns the value before */
TFRDV__PRIVATE long tfrdv__atomic_or(volatile long* p, long v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
#elif defined(_MSC_VER)
TFRDV__PRIVATE long tfrdv__atomic_add(volatile long* p, long v) { return InterlockedExchangeAdd(p, v) + v; }
TFRDV__PRIVATE long tfrdv__atomic_load(volatile long* p) { return InterlockedCompareExchange(p, 0, 0); }
TFRDV__PRIVATE void tfrdv__atomic_store(volatile long* p, long v) { InterlockedExchange(p, v); }
TFRDV__PRIVATE uint32_t tfrdv__atomic_sub_u32(volatile uint32_t* p) {
    return (uint32_t)InterlockedExchangeAdd((volatile long*)p, -1);
}
TFRDV__PRIVATE void tfrdv__atomic_inc_u32(volatile uint32_t* p) { InterlockedExchangeAdd((volatile long*)p, 1); }
TFRDV__PRIVATE uint32_t tfrdv__atomic_load_u32(volatile uint32_t* p) {
    return (uint32_t)InterlockedCompareExchange((volatile long*)p, 0, 0);
}
TFRDV__PRIVATE int tfrdv__atomic_cas(volatile long* p, long* expect, long v) {
    long old = InterlockedCompareExchange(p, v, *expect);
    if (old == *expect) return 1;
    *expect = old;
    return 0;
}
TFRDV__PRIVATE long tfrdv__atomic_or(volatile long* p, long v) { return InterlockedOr(p, v); }
#else
#error "tfrdv: no atomics for this compiler; build with TFRDV_NO_THREADS or add them here"
#endif

/* >>tls  a thread's stack of callback frames: which rendezvous' (and cancellation managers')
   callbacks run on this thread, so destroy from inside its own callback defers instead of
   deadlocking. The library's only global mutable state besides the futex lock's three (>>sync):
   one thread-local pointer. */
typedef struct tfrdv__frame {
    const void* obj;
    struct tfrdv__frame* prev;
} tfrdv__frame;
#if defined(TFRDV__HAS_NONE)
#define TFRDV__TLS
#define TFRDV__HAS_FRAMES 1
#elif defined(TFRDV_NO_TLS)
#elif defined(__cplusplus) && __cplusplus >= 201103L
#define TFRDV__TLS thread_local
#define TFRDV__HAS_FRAMES 1
#elif defined(_MSC_VER)
#define TFRDV__TLS __declspec(thread)
#define TFRDV__HAS_FRAMES 1
#elif defined(__GNUC__) || defined(__clang__)
#define TFRDV__TLS __thread
#define TFRDV__HAS_FRAMES 1
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define TFRDV__TLS _Thread_local
#define TFRDV__HAS_FRAMES 1
#endif
#ifdef TFRDV__HAS_FRAMES
static TFRDV__TLS tfrdv__frame* tfrdv__frames;
TFRDV__PRIVATE void tfrdv__frame_push(tfrdv__frame* f, const void* obj) {
    f->obj = obj;
    f->prev = tfrdv__frames;
    tfrdv__frames = f;
}
TFRDV__PRIVATE void tfrdv__frame_pop(tfrdv__frame* f) { tfrdv__frames = f->prev; }
TFRDV__PRIVATE int tfrdv__frame_in(const void* obj) {
    tfrdv__frame* f;
    for (f = tfrdv__frames; f; f = f->prev)
        if (f->obj == obj) return 1;
    return 0;
}
#else
TFRDV__PRIVATE void tfrdv__frame_push(tfrdv__frame* f, const void* obj) { f->obj = obj; f->prev = 0; }
TFRDV__PRIVATE void tfrdv__frame_pop(tfrdv__frame* f) { TFRDV__UNUSED(f); }
TFRDV__PRIVATE int tfrdv__frame_in(const void* obj) { TFRDV__UNUSED(obj); return 0; }
#endif

/* >>memory */
TFRDV__PRIVATE int tfrdv__allocator_ok(const tfrdv_allocator* a) {
    if (!a) return 1;
    if ((a->alloc_fn == 0) != (a->free_fn == 0)) return 0; /* both or neither */
#ifdef TFRDV_NO_MALLOC
    if (!a->alloc_fn) return 0;
#endif
    return 1;
}
TFRDV__PRIVATE void* tfrdv__alloc(const tfrdv_allocator* a, size_t n) {
    if (a && a->alloc_fn) return a->alloc_fn(a->user, n);
#ifdef TFRDV_NO_MALLOC
    return 0;
#else
    return malloc(n);
#endif
}
TFRDV__PRIVATE void tfrdv__free(const tfrdv_allocator* a, void* p, size_t n) {
    if (!p) return;
    if (a && a->free_fn) {
        a->free_fn(a->user, p, n);
        return;
    }
#ifndef TFRDV_NO_MALLOC
    free(p);
#endif
    TFRDV__UNUSED(n);
}
TFRDV__PRIVATE void* tfrdv__zalloc(const tfrdv_allocator* a, size_t n) {
    void* p = tfrdv__alloc(a, n);
    if (p) memset(p, 0, n);
    return p;
}

/* >>clock */
TFRDV_API int64_t tfrdv_now_ns(void) {
#if defined(TFRDV_NO_CLOCK)
    return 0;
#elif defined(_WIN32)
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (int64_t)((double)c.QuadPart * 1e9 / (double)f.QuadPart);
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
#endif
}
TFRDV__PRIVATE int64_t tfrdv__sat_add(int64_t a, int64_t b) {
    return (b > 0 && a > INT64_MAX - b) ? INT64_MAX : a + b;
}
TFRDV__PRIVATE int64_t tfrdv__now(const tfrdv_clock* c) {
    if (c->now_ns) return c->now_ns(c->user);
    return tfrdv_now_ns();
}

/* >>sync  a mutex and a counting event, built-in or through the user's tfrdv_sync */
#if defined(TFRDV__FUTEX)
#if defined(SYS_membarrier) && !defined(TFRDV_NO_MEMBARRIER)
/* membarrier(2) commands (kernel ABI, Linux 4.14+): QUERY, PRIVATE_EXPEDITED, its registration */
#define TFRDV__MB_QUERY 0
#define TFRDV__MB_PRIVATE_EXPEDITED 8
#define TFRDV__MB_REGISTER_PRIVATE_EXPEDITED 16
/* 0: not asked yet, 1: this process registered for PRIVATE_EXPEDITED, -1: unavailable. The cache
   of a kernel capability (racing first askers register twice, which the kernel allows). */
static int tfrdv__mb_state;
TFRDV__PRIVATE int tfrdv__membarrier_ready(void) {
    int st = __atomic_load_n(&tfrdv__mb_state, __ATOMIC_RELAXED);
    if (st == 0) {
        long q = syscall(SYS_membarrier, TFRDV__MB_QUERY, 0, 0);
        st = q > 0 && (q & TFRDV__MB_PRIVATE_EXPEDITED) &&
                     syscall(SYS_membarrier, TFRDV__MB_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0
                 ? 1
                 : -1;
        __atomic_store_n(&tfrdv__mb_state, st, __ATOMIC_RELAXED);
    }
    return st == 1;
}
/* a full barrier on every running thread of the process; 0 if the kernel refused (a fork child
   registers again) */
TFRDV__PRIVATE int tfrdv__membarrier(void) {
    if (syscall(SYS_membarrier, TFRDV__MB_PRIVATE_EXPEDITED, 0, 0) == 0) return 1;
    return syscall(SYS_membarrier, TFRDV__MB_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
           syscall(SYS_membarrier, TFRDV__MB_PRIVATE_EXPEDITED, 0, 0) == 0;
}
#else
TFRDV__PRIVATE int tfrdv__membarrier_ready(void) { return 0; }
TFRDV__PRIVATE int tfrdv__membarrier(void) { return 0; }
#endif
/* 0: not asked yet, 1: this process may run on one CPU only (its affinity mask when first asked),
   2: on more, or unknown. On one CPU a waiter that spins only delays the holder it waits for, so
   the locks made then sleep at once. A mask changed later is not seen (the spin is only a cost). */
static int tfrdv__cpu_state;
TFRDV__PRIVATE int tfrdv__multi_cpu(void) {
    int st = __atomic_load_n(&tfrdv__cpu_state, __ATOMIC_RELAXED);
    if (st == 0) {
        unsigned long mask[16]; /* 1024 CPUs; a larger kernel mask fails EINVAL: unknown */
        long n = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask), i;
        int cpus = 0;
        for (i = 0; n > 0 && i < n / (long)sizeof mask[0]; i++) cpus += __builtin_popcountl(mask[i]);
        st = n > 0 && cpus == 1 ? 1 : 2;
        __atomic_store_n(&tfrdv__cpu_state, st, __ATOMIC_RELAXED);
    }
    return st == 2;
}
/* A contended futex lock spins this many pauses before it sleeps (~14 us at a 27 ns pause, ~1.5 us
   where a pause is a few cycles), when the process may run on more than one CPU. Going to sleep
   costs a membarrier (an interrupt to every other CPU running the process; a VM exit under a
   hypervisor), a futex wait and the unlocker's wake. A producer and a consumer on one key (10^6
   items, 2 vCPUs): 128 pauses slept a median ~2,000 times per run, 512 ~25, and took ~11% less
   time per item (7 of 8 paired runs); 4096 gained no more. */
#define TFRDV__SPIN 512
#endif
typedef struct tfrdv__mutex {
    const tfrdv_sync* hook;
    void* h;
#if defined(TFRDV__FUTEX)
    int word; /* 0 free, 1 locked */
    int fast; /* unlock is a plain store (tfrdv__membarrier_ready() held when this was made) */
    int spin; /* pauses before sleeping: TFRDV__SPIN, 0 when the process had one CPU */
#elif defined(TFRDV__HAS_POSIX)
    pthread_mutex_t m;
#elif defined(TFRDV__HAS_WIN32)
    SRWLOCK m;
#endif
} tfrdv__mutex;
typedef struct tfrdv__event {
    const tfrdv_sync* hook;
    void* h;
#if defined(TFRDV__HAS_POSIX)
    pthread_mutex_t m;
    pthread_cond_t c;
    unsigned count;
#elif defined(TFRDV__HAS_WIN32)
    SRWLOCK m;
    CONDITION_VARIABLE c;
    unsigned count;
#endif
} tfrdv__event;

TFRDV__PRIVATE int tfrdv__sync_ok(const tfrdv_sync* s) {
    if (!s) {
#if defined(TFRDV__HAS_CUSTOM)
        return 0;
#else
        return 1;
#endif
    }
    return s->mutex_init && s->mutex_destroy && s->mutex_lock && s->mutex_unlock && s->event_init &&
           s->event_destroy && s->event_wait && s->event_signal;
}
TFRDV__PRIVATE int tfrdv__mutex_init(tfrdv__mutex* m, const tfrdv_sync* s) {
    m->hook = s;
    m->h = 0;
    if (s) return s->mutex_init(s->user, &m->h) == 0;
#if defined(TFRDV__FUTEX)
    m->word = 0;
    m->fast = tfrdv__membarrier_ready();
    m->spin = tfrdv__multi_cpu() ? TFRDV__SPIN : 0;
    return 1;
#elif defined(TFRDV__HAS_POSIX)
    return pthread_mutex_init(&m->m, 0) == 0;
#elif defined(TFRDV__HAS_WIN32)
    InitializeSRWLock(&m->m);
    return 1;
#else
    return 1;
#endif
}
TFRDV__PRIVATE void tfrdv__mutex_destroy(tfrdv__mutex* m) {
    if (m->hook) {
        m->hook->mutex_destroy(m->hook->user, m->h);
        return;
    }
#if defined(TFRDV__HAS_POSIX) && !defined(TFRDV__FUTEX)
    pthread_mutex_destroy(&m->m);
#endif
}
#if defined(TFRDV__FUTEX)
TFRDV__PRIVATE void tfrdv__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}
/* A futex lock whose unlock is a plain store. Unlocking must wake a sleeper, and seeing one
   without a store-load fence is the store-buffer race: the unlocker's store of 0 and a waiter's
   announcement may each miss the other. The waiter pays for the fence instead (asymmetric Dekker):
   it counts itself as a sleeper, then membarrier() makes every running thread of the process
   execute a full barrier. Any unlock either read the count after that barrier (it sees it and
   wakes) or made its store visible before it (the waiter's compare-and-swap and the futex check
   see 0). The count stays up until the waiter holds the lock, so one barrier covers all its waits.
   Sleepers are counted per lock address in a static table, not in the lock: the next holder may
   free the lock's memory as soon as the store lands, and the unlocker reads the count after it
   (a shared slot only costs a spurious wake; FUTEX_WAKE on freed memory is harmless). Without
   membarrier (older kernels, seccomp, TFRDV_NO_MEMBARRIER) unlock is an atomic exchange before
   that read; a waiter whose barrier failed (it should not, once registered) waits with a 1 ms
   timeout, late but never lost. Spins first (m->spin pauses, see TFRDV__SPIN). */
#define TFRDV__PARK_SLOTS 64
static struct {
    int n;
    char pad[60]; /* one cache line each: waiters on one lock do not disturb unlockers of another */
} tfrdv__park[TFRDV__PARK_SLOTS];
TFRDV__PRIVATE int* tfrdv__sleepers(const tfrdv__mutex* m) {
    uintptr_t a = (uintptr_t)(const void*)m;
    return &tfrdv__park[((a >> 6) ^ (a >> 12)) % TFRDV__PARK_SLOTS].n;
}
TFRDV__PRIVATE void tfrdv__futex_lock_slow(tfrdv__mutex* m) {
    int c, i, barrier = 1;
    for (i = 0; i < m->spin; i++) {
        tfrdv__cpu_relax();
        c = 0;
        if (__atomic_load_n(&m->word, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&m->word, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
    }
    __atomic_fetch_add(tfrdv__sleepers(m), 1, __ATOMIC_SEQ_CST);
    if (m->fast) barrier = tfrdv__membarrier();
    for (;;) {
        struct timespec late = {0, 1000000};
        c = 0;
        if (__atomic_compare_exchange_n(&m->word, &c, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) break;
        syscall(SYS_futex, &m->word, FUTEX_WAIT_PRIVATE, 1, barrier ? (struct timespec*)0 : &late, (void*)0, 0);
    }
    __atomic_fetch_sub(tfrdv__sleepers(m), 1, __ATOMIC_RELAXED);
}
#endif
TFRDV__HOT void tfrdv__lock(tfrdv__mutex* m) {
    if (m->hook) {
        m->hook->mutex_lock(m->hook->user, m->h);
        return;
    }
#if defined(TFRDV__FUTEX)
    {
        int c = 0;
        if (!__atomic_compare_exchange_n(&m->word, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            tfrdv__futex_lock_slow(m);
    }
#elif defined(TFRDV__HAS_POSIX)
    pthread_mutex_lock(&m->m);
#elif defined(TFRDV__HAS_WIN32)
    AcquireSRWLockExclusive(&m->m);
#endif
}
TFRDV__HOT void tfrdv__unlock(tfrdv__mutex* m) {
    if (m->hook) {
        m->hook->mutex_unlock(m->hook->user, m->h);
        return;
    }
#if defined(TFRDV__FUTEX)
    {
        int* sleepers = tfrdv__sleepers(m); /* m may be freed once word is 0 */
        if (m->fast) {
            __atomic_store_n(&m->word, 0, __ATOMIC_RELEASE);
            __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the compiler keeps the load below after the store */
            if (__atomic_load_n(sleepers, __ATOMIC_RELAXED) == 0) return;
        } else {
            __atomic_exchange_n(&m->word, 0, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) == 0) return;
        }
        syscall(SYS_futex, &m->word, FUTEX_WAKE_PRIVATE, 1, (void*)0, (void*)0, 0);
    }
#elif defined(TFRDV__HAS_POSIX)
    pthread_mutex_unlock(&m->m);
#elif defined(TFRDV__HAS_WIN32)
    ReleaseSRWLockExclusive(&m->m);
#endif
}
TFRDV__PRIVATE int tfrdv__event_init(tfrdv__event* e, const tfrdv_sync* s) {
    e->hook = s;
    e->h = 0;
    if (s) return s->event_init(s->user, &e->h) == 0;
#if defined(TFRDV__HAS_POSIX)
    {
        pthread_condattr_t a;
        e->count = 0;
        if (pthread_mutex_init(&e->m, 0) != 0) return 0;
        pthread_condattr_init(&a);
#if !defined(__APPLE__)
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
#endif
        if (pthread_cond_init(&e->c, &a) != 0) {
            pthread_condattr_destroy(&a);
            pthread_mutex_destroy(&e->m);
            return 0;
        }
        pthread_condattr_destroy(&a);
        return 1;
    }
#elif defined(TFRDV__HAS_WIN32)
    e->count = 0;
    InitializeSRWLock(&e->m);
    InitializeConditionVariable(&e->c);
    return 1;
#else
    return 1;
#endif
}
TFRDV__PRIVATE void tfrdv__event_destroy(tfrdv__event* e) {
    if (e->hook) {
        e->hook->event_destroy(e->hook->user, e->h);
        return;
    }
#if defined(TFRDV__HAS_POSIX)
    pthread_cond_destroy(&e->c);
    pthread_mutex_destroy(&e->m);
#endif
}
TFRDV__PRIVATE void tfrdv__event_signal(tfrdv__event* e) {
    if (e->hook) {
        e->hook->event_signal(e->hook->user, e->h);
        return;
    }
#if defined(TFRDV__HAS_POSIX)
    pthread_mutex_lock(&e->m);
    e->count++;
    pthread_cond_signal(&e->c);
    pthread_mutex_unlock(&e->m);
#elif defined(TFRDV__HAS_WIN32)
    AcquireSRWLockExclusive(&e->m);
    e->count++;
    WakeConditionVariable(&e->c);
    ReleaseSRWLockExclusive(&e->m);
#endif
}
/* 1 signalled, 0 timed out. timeout_ns < 0: forever. */
TFRDV__PRIVATE int tfrdv__event_wait(tfrdv__event* e, int64_t timeout_ns) {
    if (e->hook) return e->hook->event_wait(e->hook->user, e->h, timeout_ns);
#if defined(TFRDV__HAS_POSIX)
    {
        int ok = 1;
        struct timespec dl;
        if (timeout_ns >= 0) {
            int64_t t;
#if defined(__APPLE__)
            clock_gettime(CLOCK_REALTIME, &dl);
#else
            clock_gettime(CLOCK_MONOTONIC, &dl);
#endif
            t = (int64_t)dl.tv_nsec + timeout_ns % 1000000000;
            dl.tv_sec += (time_t)(timeout_ns / 1000000000 + t / 1000000000);
            dl.tv_nsec = (long)(t % 1000000000);
        }
        pthread_mutex_lock(&e->m);
        while (e->count == 0) {
            if (timeout_ns < 0) {
                pthread_cond_wait(&e->c, &e->m);
            } else if (pthread_cond_timedwait(&e->c, &e->m, &dl) == ETIMEDOUT) {
                if (e->count == 0) ok = 0;
                break;
            }
        }
        if (ok) e->count--;
        pthread_mutex_unlock(&e->m);
        return ok;
    }
#elif defined(TFRDV__HAS_WIN32)
    {
        int ok = 1;
        ULONGLONG end = GetTickCount64() + (ULONGLONG)(timeout_ns / 1000000);
        AcquireSRWLockExclusive(&e->m);
        while (e->count == 0) {
            DWORD ms = INFINITE;
            if (timeout_ns >= 0) {
                ULONGLONG now = GetTickCount64();
                if (now >= end) { ok = 0; break; }
                ms = (DWORD)(end - now);
            }
            SleepConditionVariableSRW(&e->c, &e->m, ms, 0);
        }
        if (ok) e->count--;
        ReleaseSRWLockExclusive(&e->m);
        return ok;
    }
#else
    TFRDV__UNUSED(timeout_ns);
    return 0; /* single-threaded: nobody else can signal while we wait */
#endif
}

/* >>status */
static const tfrdv_status tfrdv__ok_status = {TFRDV_OK, 0, {0}};

TFRDV_API const char* tfrdv_code_str(tfrdv_code code) {
#define TFRDV__CODE_STR(name, num) \
    if ((int)code == num) return #name;
    TFRDV_CODE_LIST(TFRDV__CODE_STR)
#undef TFRDV__CODE_STR
    return "UNKNOWN_CODE";
}

/* a tiny bounded string builder: append, never overflow, always NUL-terminated */
typedef struct tfrdv__sb {
    char* buf;
    size_t cap, len; /* len may exceed cap-1: the full length that was wanted */
    int shut;        /* an escape did not fit whole: nothing more is written (len still counts) */
} tfrdv__sb;
TFRDV__PRIVATE void tfrdv__sb_init(tfrdv__sb* b, char* buf, size_t cap) {
    b->buf = buf;
    b->cap = cap;
    b->len = 0;
    b->shut = 0;
    if (cap) buf[0] = 0;
}
TFRDV__PRIVATE void tfrdv__sb_put(tfrdv__sb* b, const char* s, size_t n) {
    if (b->cap && b->len < b->cap - 1 && !b->shut) {
        size_t room = b->cap - 1 - b->len;
        size_t k = n < room ? n : room;
        if (k) memcpy(b->buf + b->len, s, k); /* s may be NULL when n is 0 */
        b->buf[b->len + k] = 0;
    }
    b->len += n;
}
TFRDV__PRIVATE void tfrdv__sb_cstr(tfrdv__sb* b, const char* s) { tfrdv__sb_put(b, s, s ? strlen(s) : 0); }
/* src[0..n) with every byte outside 0x20..0x7e as \xNN and a backslash as \\ (tfrdv_escape).
   mode bit 1 (count_all): counts the full length (b->len), else stops reading src once the buffer
   is full (a status quotes the start of a key whose length may be far larger than the memory
   behind it); bit 2: a backslash stays as it is (text a transport escaped already). */
TFRDV__PRIVATE void tfrdv__sb_esc(tfrdv__sb* b, const char* src, size_t n, int mode) {
    int count_all = mode & 1, keep_bs = (mode & 2) != 0;
    static const char hex[] = "0123456789abcdef";
    const unsigned char* p = (const unsigned char*)src;
    size_t i, m, run = 0;
    for (i = 0; i < n; i++) {
        char e[4];
        if (!count_all && b->len + (i - run) >= b->cap) break; /* full: nothing more is kept */
        if (p[i] >= 0x20 && p[i] <= 0x7e && (p[i] != '\\' || keep_bs)) continue;
        tfrdv__sb_put(b, src + run, i - run); /* the printable run before this byte */
        run = i + 1;
        e[0] = e[1] = '\\';
        if (p[i] != '\\') {
            e[1] = 'x';
            e[2] = hex[p[i] >> 4];
            e[3] = hex[p[i] & 15u];
        }
        m = p[i] == '\\' ? 2 : 4;
        /* an escape goes whole or not at all: a cut one ("\x", "\x1") reads as other bytes */
        if (b->cap && b->len < b->cap - 1 && b->len + m > b->cap - 1) b->shut = 1;
        tfrdv__sb_put(b, e, m);
    }
    tfrdv__sb_put(b, src + run, i - run);
}
/* the decimal digits of v, written backwards ending just before e (at most 20); returns the first.
   Two digits per division: half the dependent divide-by-constant steps. */
static const char tfrdv__dig2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869"
    "707172737475767778798081828384858687888990919293949596979899";
TFRDV__HOT char* tfrdv__dec_back(char* e, uint64_t v) {
    while (v >= 100) {
        size_t r = (size_t)(v % 100);
        v /= 100;
        e -= 2;
        memcpy(e, tfrdv__dig2 + 2 * r, 2);
    }
    if (v >= 10) {
        e -= 2;
        memcpy(e, tfrdv__dig2 + 2 * (size_t)v, 2);
    } else {
        *--e = (char)('0' + (int)v);
    }
    return e;
}
TFRDV__PRIVATE void tfrdv__sb_u64(tfrdv__sb* b, uint64_t v) {
    char t[24];
    char* s = tfrdv__dec_back(t + 24, v);
    tfrdv__sb_put(b, s, (size_t)(t + 24 - s));
}
TFRDV__PRIVATE void tfrdv__sb_i64(tfrdv__sb* b, int64_t v) {
    if (v < 0) {
        tfrdv__sb_put(b, "-", 1);
        tfrdv__sb_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        tfrdv__sb_u64(b, (uint64_t)v);
    }
}
TFRDV__PRIVATE void tfrdv__sb_hex16(tfrdv__sb* b, uint64_t v) {
    static const char digits[] = "0123456789abcdef";
    char t[16];
    int i;
    for (i = 15; i >= 0; i--) {
        t[i] = digits[v & 15u];
        v >>= 4;
    }
    tfrdv__sb_put(b, t, 16);
}
/* Status message from a mini format: %s (C string), %S (tfrdv_str*, escaped: tfrdv_escape), %d (int), %I (int64_t),
   %U (uint64_t), %X (uint64_t as 16 hex digits, as in keys), %% */
TFRDV__PRIVATE tfrdv_code tfrdv__err(tfrdv_status* st, tfrdv_code code, const char* fmt, ...) {
    va_list ap;
    tfrdv__sb b;
    const char* p;
    if (!st) return code;
    st->code = code;
    st->detail = 0;
    if (!fmt[0]) { /* the OK of every completion */
        st->msg[0] = 0;
        return code;
    }
    tfrdv__sb_init(&b, st->msg, sizeof st->msg);
    va_start(ap, fmt);
    for (p = fmt; *p; p++) {
        if (*p != '%' || !p[1]) {
            tfrdv__sb_put(&b, p, 1);
            continue;
        }
        switch (*++p) {
        case 's': tfrdv__sb_cstr(&b, va_arg(ap, const char*)); break;
        case 'S': {
            const tfrdv_str* s = va_arg(ap, const tfrdv_str*);
            tfrdv__sb_esc(&b, s->ptr, s->len, 0); /* keys and names may come from a peer */
            break;
        }
        case 'd': tfrdv__sb_i64(&b, (int64_t)va_arg(ap, int)); break;
        case 'I': tfrdv__sb_i64(&b, va_arg(ap, int64_t)); break;
        case 'U': tfrdv__sb_u64(&b, va_arg(ap, uint64_t)); break;
        case 'X': tfrdv__sb_hex16(&b, va_arg(ap, uint64_t)); break;
        default: tfrdv__sb_put(&b, p, 1); break;
        }
    }
    va_end(ap);
    return code;
}
/* report a refused call through the logger hook (level 2) and return its code */
TFRDV__PRIVATE tfrdv_code tfrdv__log_status(const tfrdv_hooks* h, const tfrdv_status* st) {
    if (h->logger.fn) h->logger.fn(h->logger.user, 2, st->msg);
    return st->code;
}
TFRDV_API tfrdv_code tfrdv_status_set(tfrdv_status* st, tfrdv_code code, const char* msg) {
    return tfrdv__err(st, code, "%s", msg ? msg : "");
}
TFRDV_API size_t tfrdv_escape(char* dst, size_t cap, const char* src, size_t len) {
    tfrdv__sb b;
    tfrdv__sb_init(&b, cap ? dst : NULL, cap);
    if (src) tfrdv__sb_esc(&b, src, len, 1);
    return b.len;
}
TFRDV__PRIVATE void tfrdv__status_copy(tfrdv_status* dst, const tfrdv_status* src) {
    if (dst && src && dst != src) {
        if (src->msg[0]) tfrdv__err(dst, src->code, "%s", src->msg);
        else tfrdv__err(dst, src->code, "");
        dst->detail = src->detail;
    }
}

/* a 64-bit finaliser (splitmix64's): every input bit moves every output bit */
TFRDV__PRIVATE uint64_t tfrdv__mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9u;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebu;
    x ^= x >> 31;
    return x;
}
/* >>hash  64-bit; placement only (matching compares full keys). Each 16-byte block is one
   64x64->128-bit multiply of its two words (each xored with a per-position constant), folded to 64
   bits and summed: the blocks are independent, so a 116-byte key costs about one multiply per
   block in flight instead of a chain of dependent multiplies. A final avalanche mixes in the
   length and spreads the sum over both halves (the shard uses the top bits, the slot the low). */
#if defined(__SIZEOF_INT128__) && (defined(__GNUC__) || defined(__clang__))
__extension__ typedef unsigned __int128 tfrdv__u128;
TFRDV__HOT uint64_t tfrdv__mulfold(uint64_t a, uint64_t b) {
    tfrdv__u128 p = (tfrdv__u128)a * b;
    return (uint64_t)p ^ (uint64_t)(p >> 64);
}
#else
TFRDV__HOT uint64_t tfrdv__mulfold(uint64_t a, uint64_t b) { /* the same value from 32-bit halves */
    uint64_t al = a & 0xffffffffu, ah = a >> 32, bl = b & 0xffffffffu, bh = b >> 32;
    uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
    uint64_t lo = (ll & 0xffffffffu) | (mid << 32);
    uint64_t hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
    return lo ^ hi;
}
#endif
TFRDV__HOT uint64_t tfrdv__load64(const unsigned char* p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
TFRDV__HOT uint64_t tfrdv__load32(const unsigned char* p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
TFRDV_API uint64_t tfrdv_hash_bytes(const void* data, size_t len) {
    const unsigned char* p = (const unsigned char*)data;
    size_t n = p ? len : 0; /* NULL: zero bytes */
    uint64_t acc = 0x9e3779b97f4a7c15u ^ ((uint64_t)n * 0xff51afd7ed558ccdu);
    uint64_t s0 = 0xa0761d6478bd642fu, s1 = 0xe7037ed1a0b428dbu; /* advance per block: position counts */
    uint64_t w0, w1;
    while (n > 16) {
        acc += tfrdv__mulfold(tfrdv__load64(p) ^ s0, tfrdv__load64(p + 8) ^ s1);
        s0 += 0x8ebc6af09c88c6e3u;
        s1 += 0x589965cc75374cc3u;
        p += 16;
        n -= 16;
    }
    /* the last 1..16 bytes (overlapping loads; the length above tells overlaps apart) */
    if (n >= 8) {
        w0 = tfrdv__load64(p);
        w1 = tfrdv__load64(p + n - 8);
    } else if (n >= 4) {
        w0 = tfrdv__load32(p);
        w1 = tfrdv__load32(p + n - 4);
    } else if (n) {
        w0 = ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
        w1 = 0;
    } else {
        w0 = w1 = 0;
    }
    acc += tfrdv__mulfold(w0 ^ s0, w1 ^ s1);
    return tfrdv__mix64(acc);
}

/* >>devices  DeviceNameUtils semantics */
/* character classes by table (1 letter, 2 digit, 4 underscore): one load per character */
static const unsigned char tfrdv__ctype[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 4,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
TFRDV__PRIVATE int tfrdv__is_alpha(char c) { return tfrdv__ctype[(unsigned char)c] & 1; }
TFRDV__PRIVATE int tfrdv__is_digit(char c) { return (tfrdv__ctype[(unsigned char)c] & 2) != 0; }
TFRDV__PRIVATE int tfrdv__is_word(char c) { return tfrdv__ctype[(unsigned char)c] != 0; }

typedef struct tfrdv__cursor {
    const char* p;
    const char* end;
} tfrdv__cursor;
TFRDV__PRIVATE int tfrdv__eat(tfrdv__cursor* c, const char* lit, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0) return 0;
    c->p += n;
    return 1;
}
#define TFRDV__EAT(c, lit) tfrdv__eat((c), (lit), sizeof(lit) - 1)
/* ConsumeLeadingDigits, but a value above INT_MAX fails (TensorFlow truncates it into an int). */
TFRDV__PRIVATE int tfrdv__eat_number(tfrdv__cursor* c, int* out) {
    uint64_t v = 0;
    const char* start = c->p;
    while (c->p < c->end && tfrdv__is_digit(*c->p)) {
        v = v * 10 + (uint64_t)(*c->p - '0');
        if (v > 0x7fffffffu) return 0;
        c->p++;
    }
    if (c->p == start) return 0;
    *out = (int)v;
    return 1;
}
/* letter, then [A-Za-z0-9_]* up to a stop character or the end */
TFRDV__PRIVATE int tfrdv__eat_ident(tfrdv__cursor* c, tfrdv_str* out, int stop_at_colon) {
    const char* s = c->p;
    if (s == c->end || !tfrdv__is_alpha(*s)) return 0;
    for (c->p = s + 1; c->p < c->end; c->p++) {
        char ch = *c->p;
        if (ch == '/' || (stop_at_colon && ch == ':')) break;
        if (!tfrdv__is_word(ch)) return 0;
    }
    out->ptr = s;
    out->len = (size_t)(c->p - s);
    return 1;
}

TFRDV__PRIVATE tfrdv_code tfrdv__device_bad(tfrdv_status* st, const char* name, size_t len,
                                            const char* why) {
    tfrdv_str s;
    s.ptr = name;
    s.len = len;
    return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "Invalid device name '%S': %s", &s, why);
}

/* The canonical full name /job:J/replica:R/task:T/device:TYPE:ID (what keys carry almost
   always) in one straight pass from p, never reading at or past end: returns where it stopped
   (after the id's last digit; the caller decides what may follow), or NULL at the first deviation.
   Numbers of 1..9 digits only, so never above INT_MAX without an overflow check per digit; longer
   ones (and every other form) go to the general parser, which gives the same fields for every
   name this accepts. Always inlined: keys parse and create through it. */
TFRDV__HOT const char* tfrdv__canon_num(const char* p, const char* end, int* out) {
    const char* s = p;
    unsigned v = 0;
    while (p < end && p - s < 10 && (unsigned)(*p - '0') < 10u) v = v * 10u + (unsigned)(*p++ - '0');
    if (p == s || p - s > 9) return 0;
    *out = (int)v;
    return p;
}
/* a letter, then word characters; stops at the first other character (the caller checks it) */
TFRDV__HOT const char* tfrdv__canon_ident(const char* p, const char* end) {
    if (p == end || !(tfrdv__ctype[(unsigned char)*p] & 1)) return 0;
    for (p++; p < end && tfrdv__ctype[(unsigned char)*p]; p++) {}
    return p;
}
/* p starts with the n-byte literal (4 <= n <= 16, a constant once inlined): two overlapping word
   compares, since compilers call memcmp for these lengths */
TFRDV__HOT int tfrdv__lit(const char* p, const char* end, const char* lit, size_t n) {
    uint64_t a, b, c, d;
    if ((size_t)(end - p) < n) return 0;
    if (n >= 8) {
        memcpy(&a, p, 8);
        memcpy(&b, lit, 8);
        memcpy(&c, p + n - 8, 8);
        memcpy(&d, lit + n - 8, 8);
    } else {
        uint32_t w, x, y, z;
        memcpy(&w, p, 4);
        memcpy(&x, lit, 4);
        memcpy(&y, p + n - 4, 4);
        memcpy(&z, lit + n - 4, 4);
        a = w;
        b = x;
        c = y;
        d = z;
    }
    return ((a ^ b) | (c ^ d)) == 0;
}
TFRDV__HOT const char* tfrdv__canon_device(const char* p, const char* end, tfrdv_device_name* dn) {
    const char* q;
    if (!tfrdv__lit(p, end, "/job:", 5) || !(q = tfrdv__canon_ident(p + 5, end))) return 0;
    dn->job.ptr = p + 5;
    dn->job.len = (size_t)(q - (p + 5));
    if (!tfrdv__lit(q, end, "/replica:", 9) || !(p = tfrdv__canon_num(q + 9, end, &dn->replica))) return 0;
    if (!tfrdv__lit(p, end, "/task:", 6) || !(p = tfrdv__canon_num(p + 6, end, &dn->task))) return 0;
    if (!tfrdv__lit(p, end, "/device:", 8) || !(q = tfrdv__canon_ident(p + 8, end))) return 0;
    dn->type.ptr = p + 8;
    dn->type.len = (size_t)(q - (p + 8));
    if (q == end || *q != ':' || !(p = tfrdv__canon_num(q + 1, end, &dn->id))) return 0;
    dn->has_job = dn->has_replica = dn->has_task = dn->has_type = dn->has_id = 1;
    return p;
}
TFRDV_API tfrdv_code tfrdv_device_parse(const char* name, size_t len, tfrdv_device_name* out,
                                        tfrdv_status* st) {
    tfrdv__cursor c;
    tfrdv_device_name dn;
    memset(&dn, 0, sizeof dn);
    if (out) memset(out, 0, sizeof *out);
    if (!out || (!name && len)) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_device_parse: NULL argument");
    if (len > 5 && name[1] == 'j' && tfrdv__canon_device(name, name + len, out) == name + len) return TFRDV_OK;
    memset(out, 0, sizeof *out);
    c.p = name;
    c.end = name + len;
    if (len == 1 && name[0] == '/') return TFRDV_OK;
    while (c.p < c.end) {
        int progress = 0;
        if (TFRDV__EAT(&c, "/job:")) {
            dn.has_job = !TFRDV__EAT(&c, "*");
            if (dn.has_job && !tfrdv__eat_ident(&c, &dn.job, 0))
                return tfrdv__device_bad(st, name, len, "job name must be a letter followed by [A-Za-z0-9_]");
            progress = 1;
        }
        if (TFRDV__EAT(&c, "/replica:")) {
            dn.has_replica = !TFRDV__EAT(&c, "*");
            if (dn.has_replica && !tfrdv__eat_number(&c, &dn.replica))
                return tfrdv__device_bad(st, name, len, "replica must be '*' or a number 0..2147483647");
            progress = 1;
        }
        if (TFRDV__EAT(&c, "/task:")) {
            dn.has_task = !TFRDV__EAT(&c, "*");
            if (dn.has_task && !tfrdv__eat_number(&c, &dn.task))
                return tfrdv__device_bad(st, name, len, "task must be '*' or a number 0..2147483647");
            progress = 1;
        }
        if (TFRDV__EAT(&c, "/device:")) {
            dn.has_type = !TFRDV__EAT(&c, "*");
            if (dn.has_type && !tfrdv__eat_ident(&c, &dn.type, 1))
                return tfrdv__device_bad(st, name, len, "device type must be a letter followed by [A-Za-z0-9_]");
            if (!TFRDV__EAT(&c, ":")) {
                dn.has_id = 0;
            } else {
                dn.has_id = !TFRDV__EAT(&c, "*");
                if (dn.has_id && !tfrdv__eat_number(&c, &dn.id))
                    return tfrdv__device_bad(st, name, len, "device id must be '*' or a number 0..2147483647");
            }
            progress = 1;
        }
        if (TFRDV__EAT(&c, "/cpu:") || TFRDV__EAT(&c, "/CPU:")) {
            dn.has_type = 1;
            dn.type.ptr = "CPU";
            dn.type.len = 3;
            dn.has_id = !TFRDV__EAT(&c, "*");
            if (dn.has_id && !tfrdv__eat_number(&c, &dn.id))
                return tfrdv__device_bad(st, name, len, "device id must be '*' or a number 0..2147483647");
            progress = 1;
        }
        if (TFRDV__EAT(&c, "/gpu:") || TFRDV__EAT(&c, "/GPU:")) {
            dn.has_type = 1;
            dn.type.ptr = "GPU";
            dn.type.len = 3;
            dn.has_id = !TFRDV__EAT(&c, "*");
            if (dn.has_id && !tfrdv__eat_number(&c, &dn.id))
                return tfrdv__device_bad(st, name, len, "device id must be '*' or a number 0..2147483647");
            progress = 1;
        }
        if (!progress) return tfrdv__device_bad(st, name, len, "unexpected text (expected /job:, /replica:, /task:, /device:, /cpu: or /gpu:)");
    }
    *out = dn;
    return TFRDV_OK;
}

/* "/job:<job>/replica:<r>/task:<t>" of the parts dn has (a remote receive names its worker so) */
TFRDV__PRIVATE void tfrdv__sb_task(tfrdv__sb* b, const tfrdv_device_name* dn) {
    if (dn->has_job && dn->has_replica && dn->has_task && dn->replica >= 0 && dn->task >= 0 && dn->job.len <= 200) {
        char t[256], num[2][12]; /* the usual full name: one put */
        char* d0 = tfrdv__dec_back(num[0] + 12, (uint64_t)dn->replica);
        char* d1 = tfrdv__dec_back(num[1] + 12, (uint64_t)dn->task);
        size_t n0 = (size_t)(num[0] + 12 - d0), n1 = (size_t)(num[1] + 12 - d1), n = 5 + dn->job.len;
        memcpy(t, "/job:", 5);
        memcpy(t + 5, dn->job.ptr, dn->job.len);
        memcpy(t + n, "/replica:", 9);
        memcpy(t + n + 9, d0, n0);
        n += 9 + n0;
        memcpy(t + n, "/task:", 6);
        memcpy(t + n + 6, d1, n1);
        tfrdv__sb_put(b, t, n + 6 + n1);
        return;
    }
    if (dn->has_job) {
        tfrdv__sb_put(b, "/job:", 5);
        tfrdv__sb_put(b, dn->job.ptr, dn->job.len);
    }
    if (dn->has_replica) {
        tfrdv__sb_put(b, "/replica:", 9);
        tfrdv__sb_i64(b, dn->replica);
    }
    if (dn->has_task) {
        tfrdv__sb_put(b, "/task:", 6);
        tfrdv__sb_i64(b, dn->task);
    }
}
TFRDV_API size_t tfrdv_device_format(const tfrdv_device_name* dn, char* buf, size_t cap) {
    tfrdv__sb b;
    tfrdv__sb_init(&b, buf, buf ? cap : 0);
    if (!dn) return 0;
    tfrdv__sb_task(&b, dn);
    if (dn->has_type) {
        tfrdv__sb_put(&b, "/device:", 8);
        tfrdv__sb_put(&b, dn->type.ptr, dn->type.len);
        tfrdv__sb_put(&b, ":", 1);
        if (dn->has_id) tfrdv__sb_i64(&b, dn->id);
        else tfrdv__sb_put(&b, "*", 1);
    }
    return b.len;
}

TFRDV_API tfrdv_code tfrdv_device_split(const char* name, size_t len, char* task, size_t task_cap,
                                        size_t* task_len, char* dev, size_t dev_cap,
                                        size_t* dev_len, tfrdv_status* st) {
    tfrdv_device_name dn;
    tfrdv__sb tb, db;
    tfrdv_code rc = tfrdv_device_parse(name, len, &dn, st);
    if (rc != TFRDV_OK) return rc;
    if (!dn.has_type || !dn.has_id) return tfrdv__device_bad(st, name, len, "a device type and id are required");
    tfrdv__sb_init(&tb, task, task ? task_cap : 0);
    tfrdv__sb_init(&db, dev, dev ? dev_cap : 0);
    tfrdv__sb_task(&tb, &dn);
    tfrdv__sb_put(&db, dn.type.ptr, dn.type.len);
    tfrdv__sb_put(&db, ":", 1);
    tfrdv__sb_i64(&db, dn.id);
    if (task_len) *task_len = tb.len;
    if (dev_len) *dev_len = db.len;
    if ((task && tb.len >= task_cap) || (dev && db.len >= dev_cap))
        return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_device_split: buffer too small (need %U and %U bytes)",
                          (uint64_t)(tb.len + 1), (uint64_t)(db.len + 1));
    return TFRDV_OK;
}

TFRDV__PRIVATE int tfrdv__str_eq(tfrdv_str a, tfrdv_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}
TFRDV_API int tfrdv_device_name_same_address_space(const tfrdv_device_name* a,
                                                   const tfrdv_device_name* b) {
    if (!a || !b) return 0;
    return a->has_job && b->has_job && tfrdv__str_eq(a->job, b->job) && a->has_replica &&
           b->has_replica && a->replica == b->replica && a->has_task && b->has_task &&
           a->task == b->task;
}
TFRDV_API int tfrdv_device_same_address_space(const char* a, size_t alen, const char* b,
                                              size_t blen) {
    tfrdv_device_name x, y;
    if (tfrdv_device_parse(a, alen, &x, 0) != TFRDV_OK) return 0;
    if (tfrdv_device_parse(b, blen, &y, 0) != TFRDV_OK) return 0;
    return tfrdv_device_name_same_address_space(&x, &y);
}
TFRDV_API size_t tfrdv_device_local_name(const char* name, size_t len, char* buf, size_t cap,
                                         tfrdv_status* st) {
    tfrdv_device_name dn;
    tfrdv__sb b;
    if (tfrdv_device_parse(name, len, &dn, st) != TFRDV_OK) return 0;
    tfrdv__sb_init(&b, buf, buf ? cap : 0);
    tfrdv__sb_put(&b, "/device:", 8);
    /* as TensorFlow: the stored type and id, whatever the flags say (a later '*' or a missing id
       clears only has_type / has_id, so an earlier component's value is printed) */
    tfrdv__sb_put(&b, dn.type.ptr, dn.type.len);
    tfrdv__sb_put(&b, ":", 1);
    tfrdv__sb_i64(&b, dn.id);
    if (st) tfrdv__err(st, TFRDV_OK, "");
    return b.len;
}
TFRDV_API tfrdv_code tfrdv_device_parse_local(const char* name, size_t len, tfrdv_str* type,
                                              int* id, tfrdv_status* st) {
    tfrdv__cursor c;
    tfrdv_str t;
    int n = 0;
    if (!name && len) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_device_parse_local: NULL name");
    c.p = name;
    c.end = name + len;
    if (!tfrdv__eat_ident(&c, &t, 1) || !TFRDV__EAT(&c, ":") || !tfrdv__eat_number(&c, &n) || c.p != c.end)
        return tfrdv__device_bad(st, name, len, "a local name is TYPE:ID");
    if (type) *type = t;
    if (id) *id = n;
    return TFRDV_OK;
}

/* >>keys */
TFRDV__PRIVATE int tfrdv__has_semicolon(const char* s, size_t n) { return memchr(s, ';', n) != 0; }

/* the parts of a key to create, measured once */
typedef struct tfrdv__kparts {
    const char *src, *dst, *edge;
    size_t sl, dl, el;
} tfrdv__kparts;
/* Validates what ParseKey would reject, so every created key parses. A device name that parses
   has no ';' (not a name character), so only a failed parse or the edge name needs the search. */
TFRDV__PRIVATE tfrdv_code tfrdv__key_parts_ok(tfrdv__kparts* k, const char* src, const char* dst, const char* edge,
                                              tfrdv_status* st) {
    tfrdv_device_name dn;
    if (!src || !dst || !edge) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_key_create: NULL device or edge name");
    k->src = src;
    k->dst = dst;
    k->edge = edge;
    k->sl = strlen(src);
    k->dl = strlen(dst);
    k->el = strlen(edge);
    /* the usual parts (canonical names, which hold no ';'): validated in one pass each */
    if (tfrdv__canon_device(src, src + k->sl, &dn) == src + k->sl && tfrdv__canon_device(dst, dst + k->dl, &dn) == dst + k->dl &&
        k->el && !tfrdv__has_semicolon(edge, k->el))
        return TFRDV_OK;
    if (tfrdv_device_parse(src, k->sl, &dn, 0) != TFRDV_OK || tfrdv_device_parse(dst, k->dl, &dn, 0) != TFRDV_OK ||
        tfrdv__has_semicolon(edge, k->el)) {
        if (tfrdv__has_semicolon(src, k->sl) || tfrdv__has_semicolon(dst, k->dl) || tfrdv__has_semicolon(edge, k->el))
            return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "Invalid rendezvous key part: ';' in '%s', '%s' or '%s'", src, dst, edge);
        if (tfrdv_device_parse(src, k->sl, &dn, st) != TFRDV_OK) return TFRDV_INVALID_ARGUMENT;
        return tfrdv_device_parse(dst, k->dl, &dn, st);
    }
    if (!k->el) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "Invalid rendezvous key part: empty edge name");
    return TFRDV_OK;
}
TFRDV__PRIVATE tfrdv_code tfrdv__key_done(tfrdv__sb* b, size_t* len, tfrdv_status* st) {
    if (len) *len = b->len;
    if (b->len >= b->cap)
        return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "key buffer too small: need %U bytes", (uint64_t)(b->len + 1));
    return TFRDV_OK;
}
/* v as 16 lowercase hex digits at o: the nibbles spread one per byte, then to ASCII, all at once */
TFRDV__HOT void tfrdv__hex8_put(char* o, uint32_t v) {
    uint64_t x = v;
    x = (x | x << 16) & 0x0000ffff0000ffffu;
    x = (x | x << 8) & 0x00ff00ff00ff00ffu;
    x = (x | x << 4) & 0x0f0f0f0f0f0f0f0fu; /* nibble i (from the low end) in byte i */
    x += 0x3030303030303030u + (((x + 0x0606060606060606u) >> 4) & 0x0101010101010101u) * ('a' - '0' - 10);
    /* the high nibble first; eight stores that compilers merge into one */
    o[0] = (char)(x >> 56);
    o[1] = (char)(x >> 48);
    o[2] = (char)(x >> 40);
    o[3] = (char)(x >> 32);
    o[4] = (char)(x >> 24);
    o[5] = (char)(x >> 16);
    o[6] = (char)(x >> 8);
    o[7] = (char)x;
}
TFRDV__HOT char* tfrdv__hex16_put(char* o, uint64_t v) {
    tfrdv__hex8_put(o, (uint32_t)(v >> 32));
    tfrdv__hex8_put(o + 8, (uint32_t)v);
    return o + 16;
}
/* ";frame:iter" written backwards ending at e (room for 43 bytes); returns its first byte */
TFRDV__HOT char* tfrdv__frame_back(char* e, tfrdv_frame_iter fi) {
    uint64_t it = fi.iter_id < 0 ? (uint64_t)0 - (uint64_t)fi.iter_id : (uint64_t)fi.iter_id;
    e = tfrdv__dec_back(e, it);
    if (fi.iter_id < 0) *--e = '-';
    *--e = ':';
    e = tfrdv__dec_back(e, fi.frame_id);
    *--e = ';';
    return e;
}
/* the prefix into a buffer known to be large enough; returns its end */
TFRDV__HOT char* tfrdv__prefix_put(char* o, const tfrdv__kparts* k, uint64_t inc) {
    memcpy(o, k->src, k->sl);
    o += k->sl;
    *o++ = ';';
    o = tfrdv__hex16_put(o, inc);
    *o++ = ';';
    memcpy(o, k->dst, k->dl);
    o += k->dl;
    *o++ = ';';
    memcpy(o, k->edge, k->el);
    return o + k->el;
}
#define TFRDV__FRAME_MAX 43 /* ";" + 20 digits + ":-" + 20 digits */
TFRDV__PRIVATE void tfrdv__sb_prefix(tfrdv__sb* b, const tfrdv__kparts* k, uint64_t inc) {
    tfrdv__sb_put(b, k->src, k->sl);
    tfrdv__sb_put(b, ";", 1);
    tfrdv__sb_hex16(b, inc);
    tfrdv__sb_put(b, ";", 1);
    tfrdv__sb_put(b, k->dst, k->dl);
    tfrdv__sb_put(b, ";", 1);
    tfrdv__sb_put(b, k->edge, k->el);
}
TFRDV_API tfrdv_code tfrdv_key_create(const char* src_device, uint64_t src_incarnation,
                                      const char* dst_device, const char* edge_name,
                                      tfrdv_frame_iter frame_iter, char* buf, size_t cap,
                                      size_t* len, tfrdv_status* st) {
    tfrdv__sb b;
    tfrdv__kparts k;
    char ft[TFRDV__FRAME_MAX];
    const char* f;
    size_t fl, total;
    tfrdv_code rc = tfrdv__key_parts_ok(&k, src_device, dst_device, edge_name, st);
    if (rc != TFRDV_OK) return rc;
    f = tfrdv__frame_back(ft + sizeof ft, frame_iter);
    fl = (size_t)(ft + sizeof ft - f);
    total = k.sl + k.dl + k.el + 19 + fl;
    if (buf && total < cap) { /* it fits: straight writes, no bounds check per part */
        char* o = tfrdv__prefix_put(buf, &k, src_incarnation);
        memcpy(o, f, fl);
        o[fl] = 0;
        if (len) *len = total;
        return TFRDV_OK;
    }
    tfrdv__sb_init(&b, buf, buf ? cap : 0);
    tfrdv__sb_prefix(&b, &k, src_incarnation);
    tfrdv__sb_put(&b, f, fl);
    return tfrdv__key_done(&b, len, st);
}
TFRDV_API tfrdv_code tfrdv_key_prefix(const char* src_device, uint64_t src_incarnation,
                                      const char* dst_device, const char* edge_name, char* buf,
                                      size_t cap, size_t* len, tfrdv_status* st) {
    tfrdv__sb b;
    tfrdv__kparts k;
    size_t total;
    tfrdv_code rc = tfrdv__key_parts_ok(&k, src_device, dst_device, edge_name, st);
    if (rc != TFRDV_OK) return rc;
    total = k.sl + k.dl + k.el + 19;
    if (buf && total < cap) {
        *tfrdv__prefix_put(buf, &k, src_incarnation) = 0;
        if (len) *len = total;
        return TFRDV_OK;
    }
    tfrdv__sb_init(&b, buf, buf ? cap : 0);
    tfrdv__sb_prefix(&b, &k, src_incarnation);
    return tfrdv__key_done(&b, len, st);
}
TFRDV_API tfrdv_code tfrdv_key_with_frame(const char* prefix, size_t prefix_len,
                                          tfrdv_frame_iter frame_iter, char* buf, size_t cap,
                                          size_t* len, tfrdv_status* st) {
    tfrdv__sb b;
    char ft[TFRDV__FRAME_MAX];
    const char* f;
    size_t fl;
    if (!prefix) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_key_with_frame: NULL prefix");
    if (buf && prefix != buf && prefix < buf + cap && prefix + prefix_len > buf)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_key_with_frame: prefix overlaps the output buffer");
    f = tfrdv__frame_back(ft + sizeof ft, frame_iter);
    fl = (size_t)(ft + sizeof ft - f);
    if (buf && prefix_len + fl < cap) { /* it fits: straight writes */
        if (prefix != buf) memcpy(buf, prefix, prefix_len);
        memcpy(buf + prefix_len, f, fl);
        buf[prefix_len + fl] = 0;
        if (len) *len = prefix_len + fl;
        return TFRDV_OK;
    }
    if (prefix == buf) { /* append in place */
        b.buf = buf;
        b.cap = cap;
        b.len = prefix_len;
        b.shut = 0;
    } else {
        tfrdv__sb_init(&b, buf, buf ? cap : 0);
        tfrdv__sb_put(&b, prefix, prefix_len);
    }
    tfrdv__sb_put(&b, f, fl);
    return tfrdv__key_done(&b, len, st);
}

TFRDV__PRIVATE int tfrdv__parse_hex(tfrdv_str s, uint64_t* out) {
    uint64_t v = 0;
    size_t i;
    if (s.len == 0) return 0;
    for (i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        unsigned d = (unsigned)(c - '0');
        if (d > 9) {
            d = (unsigned)((c | 0x20) - 'a'); /* either case */
            if (d > 5) return 0;
            d += 10;
        }
        if (v >> 60) return 0; /* would overflow 64 bits */
        v = (v << 4) | d;
    }
    *out = v;
    return 1;
}
TFRDV__PRIVATE tfrdv_str tfrdv__next_part(tfrdv__cursor* c) {
    tfrdv_str r;
    const char* s = c->p;
    const char* semi = s < c->end ? (const char*)memchr(s, ';', (size_t)(c->end - s)) : 0;
    r.ptr = s;
    c->p = semi ? semi : c->end;
    r.len = (size_t)(c->p - s);
    if (semi) c->p++; /* the ';' */
    return r;
}
/* 8 characters as one word, the first in the top byte (byte order independent) */
TFRDV__HOT uint64_t tfrdv__load_be64(const char* p) {
    const unsigned char* u = (const unsigned char*)p;
    return (uint64_t)u[0] << 56 | (uint64_t)u[1] << 48 | (uint64_t)u[2] << 40 | (uint64_t)u[3] << 32 |
           (uint64_t)u[4] << 24 | (uint64_t)u[5] << 16 | (uint64_t)u[6] << 8 | (uint64_t)u[7];
}
/* 8 hex digits of either case -> their value, all 8 bytes at once (SWAR); 0 if any is not one.
   Byte ranges by adding a bias that carries into bit 7 exactly from the range's start; no byte
   carries into its neighbour since every byte is below 0x80 first. */
#define TFRDV__B(x) ((uint64_t)(x) * 0x0101010101010101u)
TFRDV__HOT int tfrdv__hex8(const char* p, uint64_t* out) {
    uint64_t x = tfrdv__load_be64(p), l = x | TFRDV__B(0x20);
    uint64_t digit = (x + TFRDV__B(0x80 - '0')) & ~(x + TFRDV__B(0x80 - '9' - 1));
    uint64_t letter = (l + TFRDV__B(0x80 - 'a')) & ~(l + TFRDV__B(0x80 - 'f' - 1));
    uint64_t n = (x & TFRDV__B(0x0f)) + ((x >> 6) & TFRDV__B(0x01)) * 9; /* a..f, A..F: 1..6 + 9 */
    n = ((n >> 4) | n) & 0x00ff00ff00ff00ffu;
    n = ((n >> 8) | n) & 0x0000ffff0000ffffu;
    n = ((n >> 16) | n) & 0x00000000ffffffffu;
    *out = n;
    return (x & TFRDV__B(0x80)) == 0 && ((digit | letter) & TFRDV__B(0x80)) == TFRDV__B(0x80);
}
#undef TFRDV__B
/* exactly 16 hex digits of either case (what CreateKey writes) */
TFRDV__HOT int tfrdv__hex16(const char* p, uint64_t* out) {
    uint64_t hi, lo;
    int ok = tfrdv__hex8(p, &hi) & tfrdv__hex8(p + 8, &lo);
    *out = hi << 32 | lo;
    return ok;
}
/* field by field: a struct assignment here compiled to `rep movs`, slow to start on some CPUs */
TFRDV__HOT void tfrdv__dn_copy(tfrdv_device_name* o, const tfrdv_device_name* i) {
    o->has_job = i->has_job;
    o->has_replica = i->has_replica;
    o->has_task = i->has_task;
    o->has_type = i->has_type;
    o->has_id = i->has_id;
    o->job = i->job;
    o->replica = i->replica;
    o->task = i->task;
    o->type = i->type;
    o->id = i->id;
}
TFRDV__HOT int tfrdv__key_parse_fast(const char* key, size_t len, tfrdv_parsed_key* out) {
    const char* end = key + len;
    const char *p, *q, *dst, *edge, *frame;
    tfrdv_device_name s, d;
    uint64_t inc;
    memset(&s, 0, sizeof s);
    memset(&d, 0, sizeof d);
    p = tfrdv__canon_device(key, end, &s);
    if (!p || end - p < 18 || p[0] != ';' || p[17] != ';' || !tfrdv__hex16(p + 1, &inc)) return 0;
    dst = p + 18;
    q = tfrdv__canon_device(dst, end, &d);
    if (!q || q == end || *q != ';') return 0;
    edge = q + 1;
    p = edge < end ? (const char*)memchr(edge, ';', (size_t)(end - edge)) : 0;
    if (!p || p == edge) return 0; /* no frame part, or an empty edge name */
    frame = p + 1;
    for (q = frame; q < end && *q != ';'; q++) {} /* a few bytes: no call */
    if (q == frame || (q != end && q != end - 1)) return 0; /* empty; or more than one trailing ';' */
    out->full.ptr = key;
    out->full.len = len;
    out->src_device.ptr = key;
    out->src_device.len = (size_t)(dst - 18 - key);
    out->dst_device.ptr = dst;
    out->dst_device.len = (size_t)(edge - 1 - dst);
    out->edge_name.ptr = edge;
    out->edge_name.len = (size_t)(p - edge);
    out->frame_iter.ptr = frame;
    out->frame_iter.len = (size_t)(q - frame);
    out->src_incarnation = inc;
    tfrdv__dn_copy(&out->src, &s);
    tfrdv__dn_copy(&out->dst, &d);
    out->hash = tfrdv_hash_bytes(key, len);
    return 1;
}
TFRDV__PRIVATE tfrdv_code tfrdv__key_bad(tfrdv_status* st, const tfrdv_str* key, const char* why) {
    return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "Invalid rendezvous key: %S (%s)", key, why);
}
TFRDV_API tfrdv_code tfrdv_key_parse(const char* key, size_t len, tfrdv_parsed_key* out,
                                     tfrdv_status* st) {
    tfrdv__cursor c;
    tfrdv_str parts[5], full;
    int i;
    if (!out || (!key && len)) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_key_parse: NULL argument");
    if (tfrdv__key_parse_fast(key, len, out)) return TFRDV_OK;
    full.ptr = key;
    full.len = len;
    c.p = key;
    c.end = key + len;
    for (i = 0; i < 5; i++) parts[i] = tfrdv__next_part(&c);
    if (c.p != c.end) return tfrdv__key_bad(st, &full, "text after the fifth part");
    if (parts[4].len == 0) return tfrdv__key_bad(st, &full, "missing frame:iter part");
    if (tfrdv_device_parse(parts[0].ptr, parts[0].len, &out->src, 0) != TFRDV_OK)
        return tfrdv__key_bad(st, &full, "source device name does not parse");
    if (!tfrdv__parse_hex(parts[1], &out->src_incarnation))
        return tfrdv__key_bad(st, &full, "incarnation is not a 64-bit hex number");
    if (tfrdv_device_parse(parts[2].ptr, parts[2].len, &out->dst, 0) != TFRDV_OK)
        return tfrdv__key_bad(st, &full, "destination device name does not parse");
    if (parts[3].len == 0) return tfrdv__key_bad(st, &full, "empty edge name");
    out->full = full;
    out->src_device = parts[0];
    out->dst_device = parts[2];
    out->edge_name = parts[3];
    out->frame_iter = parts[4];
    out->hash = tfrdv_hash_bytes(key, len);
    return TFRDV_OK;
}
TFRDV_API tfrdv_code tfrdv_frame_iter_parse(tfrdv_str s, tfrdv_frame_iter* out, tfrdv_status* st) {
    size_t i = 0;
    uint64_t f = 0, it = 0;
    int neg = 0, nd = 0;
    if (!out || (!s.ptr && s.len)) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_frame_iter_parse: NULL argument");
    for (; i < s.len && tfrdv__is_digit(s.ptr[i]); i++, nd++) {
        uint64_t d = (uint64_t)(s.ptr[i] - '0');
        if (f > UINT64_MAX / 10 || (f == UINT64_MAX / 10 && d > UINT64_MAX % 10))
            return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "Invalid frame:iter '%S': frame id overflows", &s);
        f = f * 10 + d;
    }
    if (!nd || i >= s.len || s.ptr[i] != ':') return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "Invalid frame:iter '%S': expected <frame>:<iter>", &s);
    i++;
    if (i < s.len && s.ptr[i] == '-') {
        neg = 1;
        i++;
    }
    for (nd = 0; i < s.len && tfrdv__is_digit(s.ptr[i]); i++, nd++) {
        uint64_t d = (uint64_t)(s.ptr[i] - '0');
        uint64_t limit = (uint64_t)INT64_MAX + (uint64_t)neg;
        if (it > (limit - d) / 10) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "Invalid frame:iter '%S': iteration overflows", &s);
        it = it * 10 + d;
    }
    if (!nd || i != s.len) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "Invalid frame:iter '%S': expected <frame>:<iter>", &s);
    out->frame_id = f;
    out->iter_id = neg ? (int64_t)(0 - it) : (int64_t)it;
    return TFRDV_OK;
}

/* >>tfconfig  TF_CONFIG -> worker table (tfrdv_cluster_parse). A strict JSON reader without
   recursion (ignored values are skipped with a fixed 32-level stack), run twice over the text: a
   counting pass that validates everything and sizes the result, then a writing pass into the
   caller's buffer. Every job key leaves a marker entry ("/job:J", address NULL) in the table while
   it is sorted, so a job or a task named twice ends up next to its twin; the markers are then
   squeezed out. */
enum { tfrdv__tfc_depth = 32 };
typedef struct tfrdv__tfc {
    const char* s;
    size_t n, i;            /* the text and the read position */
    tfrdv_status* st;
    int ctl;                /* the string just read decoded a control character */
    tfrdv_worker* w;        /* NULL: counting pass */
    char* out;              /* writing pass: where the next string goes */
    size_t nw, bytes;       /* entries (tasks + one marker per job key), string bytes */
    int has_type, has_index, index;
    size_t task_at;
    tfrdv_str type;         /* raw span in the text (validated: no escapes) */
    const char* task_name;  /* writing pass */
    const char* task_type;
} tfrdv__tfc;

TFRDV__PRIVATE int tfrdv__tfc_bad(tfrdv__tfc* p, size_t at, const char* what) {
    tfrdv__err(p->st, TFRDV_INVALID_ARGUMENT, "TF_CONFIG: %s at offset %U", what, (uint64_t)at);
    return -1;
}
/* the next byte after whitespace, -1 at the end */
TFRDV__PRIVATE int tfrdv__tfc_peek(tfrdv__tfc* p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
    return p->i < p->n ? (int)(unsigned char)p->s[p->i] : -1;
}
TFRDV__PRIVATE int tfrdv__tfc_expect(tfrdv__tfc* p, int ch, const char* what) {
    if (tfrdv__tfc_peek(p) != ch) return tfrdv__tfc_bad(p, p->i, what);
    p->i++;
    return 0;
}
/* '{' of an object the parser reads: 1 when a member follows, 0 for "{}", -1 (status set) */
TFRDV__PRIVATE int tfrdv__tfc_open(tfrdv__tfc* p, const char* what) {
    if (tfrdv__tfc_expect(p, '{', what)) return -1;
    if (tfrdv__tfc_peek(p) != '}') return 1;
    p->i++;
    return 0;
}
/* after a member or element: 1 on ',', 0 on the closing byte, -1 (status set) otherwise */
TFRDV__PRIVATE int tfrdv__tfc_next(tfrdv__tfc* p, int close) {
    int c = tfrdv__tfc_peek(p);
    if (c == ',' || c == close) {
        p->i++;
        return c == ',';
    }
    return tfrdv__tfc_bad(p, p->i, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
}
TFRDV__PRIVATE int tfrdv__tfc_hex4(const unsigned char* s, uint32_t* out) {
    uint32_t v = 0;
    int k;
    for (k = 0; k < 4; k++) {
        uint32_t c = s[k], d = c - '0', h = (c | 0x20u) - 'a';
        if (d > 9) d = h < 6 ? h + 10 : 16;
        if (d > 15) return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}
/* A string at the read position: validated (escapes, surrogate pairs, UTF-8) and decoded into dst
   (its first cap bytes; dst may be NULL). *len gets the decoded length. */
TFRDV__PRIVATE int tfrdv__tfc_str(tfrdv__tfc* p, char* dst, size_t cap, size_t* len) {
    const unsigned char* s = (const unsigned char*)p->s;
    size_t i, k = 0, m;
    if (tfrdv__tfc_peek(p) != '"') return tfrdv__tfc_bad(p, p->i, "expected '\"'");
    p->ctl = 0;
    for (i = p->i + 1;; k += m) {
        unsigned char u[4];
        const unsigned char* src = u;
        uint32_t cp, lo = 0;
        size_t j;
        if (i >= p->n) return tfrdv__tfc_bad(p, i, "unterminated string");
        cp = s[i];
        if (cp == '"') break;
        if (cp < 0x20) return tfrdv__tfc_bad(p, i, "control byte in a string (write it as an escape)");
        if (cp == '\\') {
            static const char names[] = "\"\\/bfnrtu", codes[] = "\"\\/\b\f\n\r\t";
            const char* esc = i + 1 < p->n && s[i + 1] ? strchr(names, s[i + 1]) : NULL;
            if (!esc) return tfrdv__tfc_bad(p, i, "invalid escape");
            cp = (uint32_t)(unsigned char)codes[esc - names];
            if (*esc != 'u') {
                i += 2;
            } else {
                if (i + 6 > p->n || !tfrdv__tfc_hex4(s + i + 2, &cp)) return tfrdv__tfc_bad(p, i, "invalid \\u escape (4 hex digits)");
                if (cp >= 0xd800 && cp <= 0xdfff &&
                    (cp >= 0xdc00 || i + 12 > p->n || s[i + 6] != '\\' || s[i + 7] != 'u' ||
                     !tfrdv__tfc_hex4(s + i + 8, &lo) || lo < 0xdc00 || lo > 0xdfff))
                    return tfrdv__tfc_bad(p, i, "unpaired surrogate in a \\u escape");
                if (cp >= 0xd800 && cp <= 0xdfff) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    i += 6;
                }
                i += 6;
            }
            m = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; /* UTF-8 encoding */
            u[0] = (unsigned char)(m == 1 ? cp : ((0xff00u >> m) & 0xffu) | (cp >> (6 * (m - 1))));
            for (j = 1; j < m; j++) u[j] = (unsigned char)(0x80 | ((cp >> (6 * (m - 1 - j))) & 0x3f));
        } else {
            /* UTF-8: the second byte's range excludes overlong forms, surrogates, > U+10FFFF */
            unsigned lo2 = 0x80, hi2 = 0xbf;
            src = s + i;
            m = cp < 0x80 ? 1 : cp < 0xc2 ? 0 : cp < 0xe0 ? 2 : cp < 0xf0 ? 3 : cp < 0xf5 ? 4 : 0;
            if (cp == 0xe0) lo2 = 0xa0;
            if (cp == 0xed) hi2 = 0x9f;
            if (cp == 0xf0) lo2 = 0x90;
            if (cp == 0xf4) hi2 = 0x8f;
            if (!m || m > p->n - i || (m > 1 && (s[i + 1] < lo2 || s[i + 1] > hi2)))
                return tfrdv__tfc_bad(p, i, "invalid UTF-8");
            for (j = 2; j < m; j++)
                if ((s[i + j] & 0xc0) != 0x80) return tfrdv__tfc_bad(p, i, "invalid UTF-8");
            i += m;
        }
        if (cp < 0x20 || cp == 0x7f) p->ctl = 1;
        for (j = 0; j < m; j++)
            if (dst && k + j < cap) dst[k + j] = (char)src[j];
    }
    p->i = i + 1;
    *len = k;
    return 0;
}
TFRDV__PRIVATE int tfrdv__tfc_num(tfrdv__tfc* p) {
    const char* s = p->s;
    size_t i = p->i, n = p->n, d;
    if (i < n && s[i] == '-') i++;
    for (d = i; i < n && tfrdv__is_digit(s[i]); i++) {}
    if (i == d || (s[d] == '0' && i - d > 1)) return tfrdv__tfc_bad(p, d, "invalid number");
    if (i < n && s[i] == '.') {
        for (d = ++i; i < n && tfrdv__is_digit(s[i]); i++) {}
        if (i == d) return tfrdv__tfc_bad(p, i, "invalid number");
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        if (++i < n && (s[i] == '+' || s[i] == '-')) i++;
        for (d = i; i < n && tfrdv__is_digit(s[i]); i++) {}
        if (i == d) return tfrdv__tfc_bad(p, i, "invalid number");
    }
    p->i = i;
    return 0;
}
TFRDV__PRIVATE int tfrdv__tfc_lit(tfrdv__tfc* p, const char* lit) {
    size_t n = strlen(lit);
    if (p->n - p->i < n || memcmp(p->s + p->i, lit, n) != 0) return 0;
    p->i += n;
    return 1;
}
/* one JSON value of any kind, checked and skipped; depth: containers around it */
TFRDV__PRIVATE int tfrdv__tfc_skip(tfrdv__tfc* p, int depth) {
    char stack[tfrdv__tfc_depth];
    int d = 0, c, more;
    size_t len;
    for (;;) {
        c = tfrdv__tfc_peek(p);
        if (c == '{' || c == '[') {
            if (depth + d >= tfrdv__tfc_depth) return tfrdv__tfc_bad(p, p->i, "nesting deeper than 32 levels");
            stack[d++] = (char)(c + 2); /* '}' or ']' */
            p->i++;
            if (tfrdv__tfc_peek(p) != stack[d - 1]) {
                if (c == '{' && (tfrdv__tfc_str(p, NULL, 0, &len) || tfrdv__tfc_expect(p, ':', "expected ':'"))) return -1;
                continue;
            }
            p->i++;
            d--;
        } else if (c == '"') {
            if (tfrdv__tfc_str(p, NULL, 0, &len)) return -1;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            if (tfrdv__tfc_num(p)) return -1;
        } else if (!tfrdv__tfc_lit(p, "true") && !tfrdv__tfc_lit(p, "false") && !tfrdv__tfc_lit(p, "null")) {
            return tfrdv__tfc_bad(p, p->i, "expected a JSON value");
        }
        for (;;) { /* after a value: close containers, or the next member / element */
            if (d == 0) return 0;
            if ((more = tfrdv__tfc_next(p, stack[d - 1])) < 0) return -1;
            if (!more) {
                d--;
                continue;
            }
            if (stack[d - 1] == '}' && (tfrdv__tfc_str(p, NULL, 0, &len) || tfrdv__tfc_expect(p, ':', "expected ':'"))) return -1;
            break;
        }
    }
}
/* the string just read (starting at at) as written, if it is a job name [A-Za-z][A-Za-z0-9_]* */
TFRDV__PRIVATE int tfrdv__tfc_ident(tfrdv__tfc* p, size_t at, tfrdv_str* out, const char* what) {
    size_t k;
    out->ptr = p->s + at + 1;
    out->len = p->i - at - 2;
    for (k = 0; k < out->len && (k ? tfrdv__is_word(out->ptr[k]) : tfrdv__is_alpha(out->ptr[k])); k++) {}
    if (k && k == out->len) return 0;
    tfrdv__err(p->st, TFRDV_INVALID_ARGUMENT, "TF_CONFIG: %s \"%S\" at offset %U is not a letter followed by [A-Za-z0-9_]",
               what, out, (uint64_t)at);
    return -1;
}
/* decimal digits (leading zeros allowed, as Python's int()) of at most INT_MAX */
TFRDV__PRIVATE int tfrdv__tfc_digits(const char* s, size_t len, int* out) {
    uint64_t v = 0;
    size_t k;
    for (k = 0; k < len && tfrdv__is_digit(s[k]) && v <= 0x7fffffff; k++) v = v * 10 + (uint64_t)(s[k] - '0');
    if (!len || k < len || v > 0x7fffffff) return 0;
    *out = (int)v;
    return 1;
}
/* "/job:J/replica:0/task:I" (index >= 0), "/job:J" (-1) or "J" (-2), NUL-terminated, into the
   string area (writing pass; returned) or counted */
TFRDV__PRIVATE const char* tfrdv__tfc_put(tfrdv__tfc* p, tfrdv_str job, int index) {
    tfrdv__sb b;
    char* at = p->out;
    tfrdv__sb_init(&b, p->w ? at : NULL, p->w ? (size_t)-1 : 0);
    if (index > -2) tfrdv__sb_put(&b, "/job:", 5);
    tfrdv__sb_put(&b, job.ptr, job.len);
    if (index >= 0) {
        tfrdv__sb_put(&b, "/replica:0/task:", 16);
        tfrdv__sb_i64(&b, index);
    }
    p->bytes += b.len + 1;
    if (p->w) p->out += b.len + 1;
    return at;
}
/* an entry of the table: a task, or a job's marker (addr NULL) */
TFRDV__PRIVATE void tfrdv__tfc_entry(tfrdv__tfc* p, tfrdv_str job, int index, const char* addr) {
    const char* name = tfrdv__tfc_put(p, job, index);
    if (p->w) {
        p->w[p->nw].name = name;
        p->w[p->nw].address = addr;
    }
    p->nw++;
}
/* one task's address string */
TFRDV__PRIVATE int tfrdv__tfc_task(tfrdv__tfc* p, tfrdv_str job, int index) {
    size_t at = (tfrdv__tfc_peek(p), p->i), len;
    char* addr = p->out;
    if (tfrdv__tfc_peek(p) != '"') return tfrdv__tfc_bad(p, at, "expected '\"' (a task's address is a string)");
    if (tfrdv__tfc_str(p, addr, p->w ? (size_t)-1 : 0, &len)) return -1;
    if (!len || p->ctl) {
        tfrdv__err(p->st, TFRDV_INVALID_ARGUMENT, "TF_CONFIG: the address of task %d of job \"%S\" at offset %U %s",
                   index, &job, (uint64_t)at, len ? "has a control character" : "is empty");
        return -1;
    }
    p->bytes += len + 1;
    if (p->w) {
        addr[len] = 0;
        p->out += len + 1;
    }
    tfrdv__tfc_entry(p, job, index, addr);
    return 0;
}
/* "cluster": {"job": ["addr", ...] or {"index": "addr", ...}, ...} */
TFRDV__PRIVATE int tfrdv__tfc_cluster(tfrdv__tfc* p) {
    size_t at, len;
    int more, index, close;
    tfrdv_str job, k;
    if ((more = tfrdv__tfc_open(p, "expected '{' (\"cluster\" is an object of jobs)")) <= 0) return more;
    do {
        at = (tfrdv__tfc_peek(p), p->i);
        if (tfrdv__tfc_str(p, NULL, 0, &len) || tfrdv__tfc_ident(p, at, &job, "job name") ||
            tfrdv__tfc_expect(p, ':', "expected ':'"))
            return -1;
        tfrdv__tfc_entry(p, job, -1, NULL);
        close = tfrdv__tfc_peek(p) + 2; /* ']' after '[', '}' after '{' */
        if (close != ']' && close != '}')
            return tfrdv__tfc_bad(p, p->i, "expected '[' or '{' (a job's tasks are a list or an object)");
        p->i++;
        index = 0;
        if (tfrdv__tfc_peek(p) == close) {
            p->i++;
            continue;
        }
        do {
            if (close == '}') { /* "index": "address" */
                at = (tfrdv__tfc_peek(p), p->i);
                if (tfrdv__tfc_str(p, NULL, 0, &len)) return -1;
                k.ptr = p->s + at + 1;
                k.len = p->i - at - 2;
                if (!tfrdv__tfc_digits(k.ptr, k.len, &index)) {
                    tfrdv__err(p->st, TFRDV_INVALID_ARGUMENT, "TF_CONFIG: task index \"%S\" of job \"%S\" at offset %U is not a number 0..2147483647",
                               &k, &job, (uint64_t)at);
                    return -1;
                }
                if (tfrdv__tfc_expect(p, ':', "expected ':'")) return -1;
            } else if (index == 0x7fffffff) {
                return tfrdv__tfc_bad(p, p->i, "too many tasks");
            }
            if (tfrdv__tfc_task(p, job, close == ']' ? index++ : index)) return -1;
        } while ((more = tfrdv__tfc_next(p, close)) > 0);
        if (more < 0) return -1;
    } while ((more = tfrdv__tfc_next(p, '}')) > 0);
    return more;
}
/* "task": {"type": "worker", "index": 1, ...} */
TFRDV__PRIVATE int tfrdv__tfc_task_info(tfrdv__tfc* p) {
    size_t at, len;
    char key[8];
    int more;
    if ((more = tfrdv__tfc_open(p, "expected '{' (\"task\" is an object)")) <= 0) return more;
    do {
        tfrdv_str k;
        at = (tfrdv__tfc_peek(p), p->i);
        if (tfrdv__tfc_str(p, key, sizeof key, &len) || tfrdv__tfc_expect(p, ':', "expected ':'")) return -1;
        if (len == 4 && memcmp(key, "type", 4) == 0) {
            if (p->has_type) return tfrdv__tfc_bad(p, at, "\"type\" given twice");
            p->has_type = 1;
            at = (tfrdv__tfc_peek(p), p->i);
            if (tfrdv__tfc_peek(p) != '"') return tfrdv__tfc_bad(p, at, "expected '\"' (\"type\" is a string)");
            if (tfrdv__tfc_str(p, NULL, 0, &len) || tfrdv__tfc_ident(p, at, &p->type, "task type")) return -1;
        } else if (len == 5 && memcmp(key, "index", 5) == 0) {
            int c = tfrdv__tfc_peek(p);
            if (p->has_index) return tfrdv__tfc_bad(p, at, "\"index\" given twice");
            p->has_index = 1;
            at = p->i;
            if (c != '"' && c != '-' && (c < '0' || c > '9')) return tfrdv__tfc_bad(p, at, "expected a number (\"index\")");
            if (c == '"' ? tfrdv__tfc_str(p, NULL, 0, &len) : tfrdv__tfc_num(p)) return -1;
            k.ptr = p->s + at + (c == '"');
            k.len = p->i - at - (c == '"' ? 2u : 0u);
            if (!tfrdv__tfc_digits(k.ptr, k.len, &p->index)) {
                tfrdv__err(p->st, TFRDV_INVALID_ARGUMENT, "TF_CONFIG: task index %S at offset %U is not an integer 0..2147483647",
                           &k, (uint64_t)at);
                return -1;
            }
        } else if (tfrdv__tfc_skip(p, 2)) {
            return -1;
        }
    } while ((more = tfrdv__tfc_next(p, '}')) > 0);
    return more;
}
/* one pass over the whole text */
TFRDV__PRIVATE int tfrdv__tfc_run(tfrdv__tfc* p) {
    size_t at, len;
    char key[8];
    int more, seen = 0;
    p->i = p->nw = p->bytes = 0;
    p->has_type = p->has_index = 0;
    if ((more = tfrdv__tfc_open(p, "expected '{' (TF_CONFIG is a JSON object)")) > 0) do {
        at = (tfrdv__tfc_peek(p), p->i);
        if (tfrdv__tfc_str(p, key, sizeof key, &len) || tfrdv__tfc_expect(p, ':', "expected ':'")) return -1;
        if (len == 7 && memcmp(key, "cluster", 7) == 0) {
            if (seen & 1) return tfrdv__tfc_bad(p, at, "\"cluster\" given twice");
            seen |= 1;
            if (tfrdv__tfc_cluster(p)) return -1;
        } else if (len == 4 && memcmp(key, "task", 4) == 0) {
            if (seen & 2) return tfrdv__tfc_bad(p, at, "\"task\" given twice");
            seen |= 2;
            p->task_at = at;
            if (tfrdv__tfc_task_info(p)) return -1;
        } else if (tfrdv__tfc_skip(p, 1)) {
            return -1;
        }
    } while ((more = tfrdv__tfc_next(p, '}')) > 0);
    if (more < 0) return -1;
    if (tfrdv__tfc_peek(p) >= 0) return tfrdv__tfc_bad(p, p->i, "text after the JSON object");
    if (p->has_type != p->has_index)
        return tfrdv__tfc_bad(p, p->task_at, p->has_type ? "\"task\" has a \"type\" but no \"index\""
                                                         : "\"task\" has an \"index\" but no \"type\"");
    if (p->has_type) {
        p->task_type = tfrdv__tfc_put(p, p->type, -2);
        p->task_name = tfrdv__tfc_put(p, p->type, p->index);
    }
    return 0;
}
/* table order: job name (bytes), then index (a job's marker first) */
TFRDV__PRIVATE int tfrdv__tfc_cmp(const tfrdv_worker* a, const tfrdv_worker* b) {
    const char *x = a->name + 5, *y = b->name + 5;
    size_t lx = strcspn(x, "/"), ly = strcspn(y, "/");
    int c = memcmp(x, y, lx < ly ? lx : ly), ia = -1, ib = -1;
    if (c || lx != ly) return c ? c : lx < ly ? -1 : 1;
    if (a->address) tfrdv__tfc_digits(x + lx + 16, strlen(x + lx + 16), &ia);
    if (b->address) tfrdv__tfc_digits(y + ly + 16, strlen(y + ly + 16), &ib);
    return ia < ib ? -1 : ia > ib;
}
TFRDV__PRIVATE void tfrdv__tfc_sift(tfrdv_worker* w, size_t i, size_t n) {
    for (;;) {
        size_t c = 2 * i + 1;
        tfrdv_worker t;
        if (c >= n) return;
        if (c + 1 < n && tfrdv__tfc_cmp(&w[c], &w[c + 1]) < 0) c++;
        if (tfrdv__tfc_cmp(&w[i], &w[c]) >= 0) return;
        t = w[i];
        w[i] = w[c];
        w[c] = t;
        i = c;
    }
}
TFRDV_API tfrdv_code tfrdv_cluster_parse(const char* json, size_t len, void* buf, size_t cap,
                                         tfrdv_cluster* out, tfrdv_status* st) {
    tfrdv__tfc p;
    tfrdv_worker* w;
    tfrdv_worker prev;
    size_t i, j, n, align = sizeof(void*);
    const char* task_address = NULL;
    int in_cluster = 0;
    if (out) memset(out, 0, sizeof *out);
    if (!out || (!json && len)) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_cluster_parse: NULL argument");
    out->task_index = -1;
    memset(&p, 0, sizeof p);
    p.s = json ? json : "";
    p.n = len;
    p.st = st;
    if (tfrdv__tfc_run(&p)) return TFRDV_INVALID_ARGUMENT;
    n = p.nw;
    out->needed = n || p.bytes ? align - 1 + n * sizeof(tfrdv_worker) + p.bytes : 0;
    if (out->needed && (!buf || cap < out->needed))
        return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "TF_CONFIG: the cluster needs a buffer of %U bytes (got %U)",
                          (uint64_t)out->needed, (uint64_t)(buf ? cap : 0));
    if (!out->needed) return TFRDV_OK;
    w = (tfrdv_worker*)(void*)((char*)buf + (align - (size_t)((uintptr_t)buf % align)) % align);
    p.w = w;
    p.out = (char*)(void*)(w + n);
    if (tfrdv__tfc_run(&p) || p.nw != n) /* only if another thread changed the text meanwhile */
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "TF_CONFIG: the text changed while it was parsed");
    for (i = n / 2; i-- > 0;) tfrdv__tfc_sift(w, i, n); /* heapsort: O(n log n), no recursion */
    for (i = n; i-- > 1;) {
        prev = w[0];
        w[0] = w[i];
        w[i] = prev;
        tfrdv__tfc_sift(w, 0, i);
    }
    for (i = j = 0; i < n; i++) {
        const char* job = w[i].name + 5;
        size_t jl = strcspn(job, "/");
        if (i && tfrdv__tfc_cmp(&prev, &w[i]) == 0) {
            tfrdv_str s;
            s.ptr = job;
            s.len = jl;
            if (!w[i].address) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "TF_CONFIG: job \"%S\" given twice in \"cluster\"", &s);
            return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "TF_CONFIG: task %s given twice in \"cluster\"", w[i].name);
        }
        prev = w[i];
        if (p.has_type && jl == p.type.len && memcmp(job, p.type.ptr, jl) == 0) {
            in_cluster = 1;
            if (w[i].address && strcmp(w[i].name, p.task_name) == 0) task_address = w[i].address;
        }
        if (w[i].address) w[j++] = w[i];
    }
    if (in_cluster && !task_address)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "TF_CONFIG: task %s is not in \"cluster\" (job \"%S\" has no task %d)",
                          p.task_name, &p.type, p.index);
    out->workers = w;
    out->num_workers = j;
    out->task_name = p.task_name;
    out->task_type = p.task_type;
    out->task_index = p.has_type ? p.index : -1;
    out->task_address = task_address;
    return TFRDV_OK;
}
TFRDV_API tfrdv_code tfrdv_cluster_from_env(void* buf, size_t cap, tfrdv_cluster* out, tfrdv_status* st) {
#ifdef TFRDV_NO_MALLOC
    TFRDV__UNUSED(buf);
    TFRDV__UNUSED(cap);
    if (out) {
        memset(out, 0, sizeof *out);
        out->task_index = -1;
    }
    return tfrdv__err(st, TFRDV_UNIMPLEMENTED, "tfrdv_cluster_from_env: no getenv in a TFRDV_NO_MALLOC build; pass the text to tfrdv_cluster_parse");
#else
    const char* s = getenv("TF_CONFIG");
    return tfrdv_cluster_parse(s ? s : "{}", s ? strlen(s) : 2, buf, cap, out, st);
#endif
}

/* >>values */
TFRDV_API void tfrdv_value_retain(tfrdv_value* v) {
    if (v) tfrdv__atomic_inc_u32(&v->extra_refs);
}
TFRDV_API void tfrdv_value_release(tfrdv_value* v) {
    if (!v) return;
    /* The only reference needs no atomic write (nobody can retain it concurrently: retaining takes
       a reference), as TensorFlow's RefCounted::Unref does; the acquire load orders the release
       hook after other holders' releases. Otherwise the decrement decides. */
    if (tfrdv__atomic_load_u32(&v->extra_refs) == 0 || tfrdv__atomic_sub_u32(&v->extra_refs) == 0) {
        v->extra_refs = 0;
        if (v->release) v->release(v);
    }
}

/* >>cancel */
struct tfrdv_cancel_mgr {
    tfrdv_allocator alloc;
    tfrdv__mutex mu;
    tfrdv__event ev;            /* wakes deregister()ers waiting for a running callback */
    tfrdv_cancel_node* first;
    tfrdv_cancel_node* last;
    tfrdv_cancel_node* running; /* the callback running now (never dereferenced) */
    int cancelled, cancel_done, waiters;
    int users;           /* threads inside a blocking deregister */
    int destroy_pending; /* destroyed from inside one of its callbacks: freed when they end */
};
enum { TFRDV__NODE_IDLE = 0, TFRDV__NODE_REGISTERED = 1, TFRDV__NODE_RUNNING = 2 };

/* a zeroed manager's locks (tfrdv_recv keeps one in its own frame: no allocation) */
TFRDV__PRIVATE int tfrdv__cm_init(tfrdv_cancel_mgr* cm, const tfrdv_hooks* h) {
    cm->alloc = h->allocator;
    if (!tfrdv__mutex_init(&cm->mu, h->sync)) return 0;
    if (tfrdv__event_init(&cm->ev, h->sync)) return 1;
    tfrdv__mutex_destroy(&cm->mu);
    return 0;
}
TFRDV_API tfrdv_code tfrdv_cancel_mgr_create(const tfrdv_hooks* hooks, tfrdv_cancel_mgr** out,
                                             tfrdv_status* st) {
    tfrdv_hooks h;
    tfrdv_cancel_mgr* cm;
    if (!out) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_cancel_mgr_create: NULL out");
    *out = 0;
    if (hooks) h = *hooks;
    else memset(&h, 0, sizeof h);
    if (!tfrdv__allocator_ok(&h.allocator) || !tfrdv__sync_ok(h.sync))
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_cancel_mgr_create: incomplete allocator or sync hooks");
    cm = (tfrdv_cancel_mgr*)tfrdv__zalloc(&h.allocator, sizeof *cm);
    if (!cm) return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_cancel_mgr_create: out of memory");
    if (!tfrdv__cm_init(cm, &h)) {
        tfrdv__free(&h.allocator, cm, sizeof *cm);
        return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_cancel_mgr_create: mutex or event init failed");
    }
    *out = cm;
    return TFRDV_OK;
}
TFRDV__PRIVATE void tfrdv__cm_unlink(tfrdv_cancel_mgr* cm, tfrdv_cancel_node* n) {
    if (n->prev) n->prev->next = n->next;
    else cm->first = n->next;
    if (n->next) n->next->prev = n->prev;
    else cm->last = n->prev;
    n->prev = n->next = 0;
}
TFRDV__PRIVATE void tfrdv__cm_wake(tfrdv_cancel_mgr* cm) {
    int i;
    for (i = 0; i < cm->waiters; i++) tfrdv__event_signal(&cm->ev);
}
TFRDV_API int tfrdv_cancel_register(tfrdv_cancel_mgr* cm, tfrdv_cancel_node* node,
                                    tfrdv_cancel_fn fn, void* user) {
    if (!cm || !node || !fn) return 0;
    tfrdv__lock(&cm->mu);
    if (cm->cancelled) {
        tfrdv__unlock(&cm->mu);
        return 0;
    }
    node->fn = fn;
    node->user = user;
    node->state = TFRDV__NODE_REGISTERED;
    node->next = 0;
    node->prev = cm->last;
    if (cm->last) cm->last->next = node;
    else cm->first = node;
    cm->last = node;
    tfrdv__unlock(&cm->mu);
    return 1;
}
TFRDV__PRIVATE int tfrdv__cm_deregister(tfrdv_cancel_mgr* cm, tfrdv_cancel_node* node, int wait) {
    if (!cm || !node) return 0;
    tfrdv__lock(&cm->mu);
    if (node->state == TFRDV__NODE_REGISTERED) {
        tfrdv__cm_unlink(cm, node);
        node->state = TFRDV__NODE_IDLE;
        tfrdv__unlock(&cm->mu);
        return 1;
    }
    /* running on another thread: wait for it (not when we are inside it: that would deadlock) */
    if (wait && cm->running == node && !tfrdv__frame_in(node)) {
        cm->users++;
        while (cm->running == node) {
            cm->waiters++;
            tfrdv__unlock(&cm->mu);
            tfrdv__event_wait(&cm->ev, -1);
            tfrdv__lock(&cm->mu);
            cm->waiters--;
        }
        if (--cm->users == 0 && cm->waiters) tfrdv__cm_wake(cm); /* a destroyer may wait for us */
    }
    tfrdv__unlock(&cm->mu);
    return 0;
}
TFRDV_API int tfrdv_cancel_deregister(tfrdv_cancel_mgr* cm, tfrdv_cancel_node* node) {
    return tfrdv__cm_deregister(cm, node, 1);
}
TFRDV_API int tfrdv_cancel_try_deregister(tfrdv_cancel_mgr* cm, tfrdv_cancel_node* node) {
    return tfrdv__cm_deregister(cm, node, 0);
}
TFRDV__PRIVATE void tfrdv__cm_free(tfrdv_cancel_mgr* cm) {
    tfrdv_allocator a = cm->alloc;
    tfrdv__event_destroy(&cm->ev);
    tfrdv__mutex_destroy(&cm->mu);
    tfrdv__free(&a, cm, sizeof *cm);
}
TFRDV__PRIVATE void tfrdv__cm_settle(tfrdv_cancel_mgr* cm);
TFRDV_API void tfrdv_cancel_start(tfrdv_cancel_mgr* cm) {
    tfrdv__frame cf;
    int free_now;
    if (!cm) return;
    tfrdv__lock(&cm->mu);
    if (cm->cancelled) {
        tfrdv__unlock(&cm->mu);
        return;
    }
    cm->cancelled = 1;
    tfrdv__frame_push(&cf, cm);
    while (cm->first) {
        tfrdv_cancel_node* n = cm->first;
        tfrdv_cancel_fn fn = n->fn;
        void* user = n->user;
        tfrdv__frame f;
        tfrdv__cm_unlink(cm, n);
        n->state = TFRDV__NODE_RUNNING;
        cm->running = n;
        tfrdv__unlock(&cm->mu);
        /* from here the node belongs to its callback, which may free it: never touch it again */
        tfrdv__frame_push(&f, n);
        fn(user);
        tfrdv__frame_pop(&f);
        tfrdv__lock(&cm->mu);
        cm->running = 0;
        tfrdv__cm_wake(cm);
    }
    cm->cancel_done = 1;
    tfrdv__cm_wake(cm);
    free_now = cm->destroy_pending;
    while (free_now && cm->users) {
        cm->waiters++;
        tfrdv__unlock(&cm->mu);
        tfrdv__event_wait(&cm->ev, -1);
        tfrdv__lock(&cm->mu);
        cm->waiters--;
    }
    tfrdv__unlock(&cm->mu);
    tfrdv__frame_pop(&cf);
    if (free_now) tfrdv__cm_free(cm);
}
TFRDV_API int tfrdv_cancel_is_cancelled(tfrdv_cancel_mgr* cm) {
    int c;
    if (!cm) return 0;
    tfrdv__lock(&cm->mu);
    c = cm->cancelled;
    tfrdv__unlock(&cm->mu);
    return c;
}
TFRDV_API tfrdv_code tfrdv_cancel_mgr_reset(tfrdv_cancel_mgr* cm) {
    tfrdv_code rc = TFRDV_OK;
    if (!cm) return TFRDV_INVALID_ARGUMENT;
    tfrdv__lock(&cm->mu);
    if ((cm->cancelled && !cm->cancel_done) || cm->users || cm->first || cm->destroy_pending) rc = TFRDV_FAILED_PRECONDITION;
    else cm->cancelled = cm->cancel_done = 0;
    tfrdv__unlock(&cm->mu);
    return rc;
}
TFRDV_API void tfrdv_cancel_mgr_destroy(tfrdv_cancel_mgr* cm) {
    if (!cm) return;
    if (tfrdv__frame_in(cm)) { /* inside its own start: that call frees it when it ends */
        tfrdv__lock(&cm->mu);
        cm->destroy_pending = 1;
        tfrdv__unlock(&cm->mu);
        return;
    }
    tfrdv__cm_settle(cm);
    tfrdv__cm_free(cm);
}
/* cancels what is still registered, then waits until no other thread runs its callbacks or
   deregisters from it: nobody touches cm afterwards */
TFRDV__PRIVATE void tfrdv__cm_settle(tfrdv_cancel_mgr* cm) {
    tfrdv_cancel_start(cm);
    tfrdv__lock(&cm->mu); /* another thread may still be running callbacks or deregistering */
    while (!cm->cancel_done || cm->users) {
        cm->waiters++;
        tfrdv__unlock(&cm->mu);
        tfrdv__event_wait(&cm->ev, -1);
        tfrdv__lock(&cm->mu);
        cm->waiters--;
    }
    tfrdv__unlock(&cm->mu);
}
/* the end of a manager kept in the caller's frame (tfrdv__cm_init): nothing registered, running
   or deregistering is the common case, and then there is nothing to cancel or wait for */
TFRDV__PRIVATE void tfrdv__cm_fini(tfrdv_cancel_mgr* cm) {
    int quiet;
    tfrdv__lock(&cm->mu);
    quiet = !cm->first && !cm->running && !cm->users && cm->cancelled == cm->cancel_done;
    tfrdv__unlock(&cm->mu);
    if (!quiet) tfrdv__cm_settle(cm);
    tfrdv__event_destroy(&cm->ev);
    tfrdv__mutex_destroy(&cm->mu);
}

/* >>local  sharded table of per-key FIFO channels */
typedef struct tfrdv__sitem { /* a buffered send: 40 bytes on LP64 */
    struct tfrdv__sitem* next;
    tfrdv_value* value;
    void* device_context;
    int64_t t0; /* when it was sent (only when a trace hook is set) */
    uint32_t alloc_attrs;
    unsigned char is_dead;
    unsigned char embedded; /* the channel's own first slot (not from the free list) */
} tfrdv__sitem;

struct tfrdv__shard;
struct tfrdv__chan;
/* A waiting receiver: 48 bytes on LP64 (one cache line with its allocation header), since a
   receiver that runs ahead of its senders can leave millions of them queued. One that needs more
   (a cancellation manager, an alloc hook, a trace) is a tfrdv__ritem_x, whose first member this is. */
typedef struct tfrdv__ritem {
    struct tfrdv__ritem* next;
    struct tfrdv__ritem* prev; /* receive rings are doubly linked: a cancelled receiver leaves in O(1) */
    tfrdv_done_fn done;
    void* user;
    void* device_context;
    uint32_t alloc_attrs;
    unsigned char linked;
    unsigned char orphan; /* unlinked while its cancellation callback was already running: that callback recycles it */
    unsigned char x;      /* a tfrdv__ritem_x */
    unsigned char pad_;
} tfrdv__ritem;
typedef struct tfrdv__ritem_x {
    tfrdv__ritem base;
    tfrdv_cancel_mgr* cancel;
    tfrdv_alloc_fn alloc_fn;
    void* alloc_user;
    tfrdv_cancel_node cnode;
    struct tfrdv__chan* chan;
    struct tfrdv__shard* shard;
    tfrdv_rendezvous* r;
    int64_t t0;    /* when it was posted (only when traced) */
    uint64_t hash; /* its key's (finds the channel's slot on cancellation) */
    int trace;     /* report a TFRDV_TRACE_LOCAL event when it completes */
} tfrdv__ritem_x;
#define TFRDV__RX(ri) ((tfrdv__ritem_x*)(void*)(ri))

enum { TFRDV__CHAN_SEND = 0, TFRDV__CHAN_RECV = 1 };
/* A send channel's shared key prefix ("src;incarnation;dst;"): the keys of one device pair
   differ only after it, so a pending key stores a pointer instead of ~90 bytes. Each shard
   caches up to TFRDV__PFX_WAYS of them (refcounted by channels under the shard lock; an unused
   one stays until its way is needed or the table ends). Its bytes follow it. */
typedef struct tfrdv__pfx {
    size_t len;
    size_t refs; /* channels using it */
} tfrdv__pfx;
#define TFRDV__PFX_BYTES(p) ((char*)(void*)((p) + 1))
#define TFRDV__PFX_WAYS 16
#define TFRDV__PFX_MIN 16   /* shorter prefixes are not worth a pointer */
#define TFRDV__PFX_MAX 512  /* longer ones stay inline (a cache way holds at most this) */
#define TFRDV__PFX_FROM 32  /* a shard with fewer keys keeps them whole: one compare, no lookup, no shared line between threads */
/* The key's bytes (after the shared prefix, if any) follow it in the same allocation. Compact
   (40-byte header, 80 with the first send slot) since a pending key costs this plus its bytes:
   items form a ring through their `next` (tail->next is the oldest; no head pointer, no count;
   receivers also link back, see tfrdv__rring_push),
   32-bit lengths (tfrdv__chan_new refuses longer keys), byte flags. Receive channels always
   hold the whole key inline (abort and cancellation hand it to callbacks and must not allocate). */
typedef struct tfrdv__chan {
    struct tfrdv__chan* next; /* drain list, or free list */
    void* tail;      /* tfrdv__sitem* or tfrdv__ritem* by kind; NULL: empty */
    tfrdv__pfx* pfx; /* a send channel's shared prefix, or NULL (the whole key is inline) */
    uint32_t key_len, key_cap; /* inline bytes */
    unsigned char kind;
    unsigned char detached;   /* taken out of the table by abort */
    unsigned char first_busy; /* `first` holds a queued send */
    unsigned char pad_[5];
    tfrdv__sitem first; /* a send slot in the channel's own allocation: a new key costs one allocation */
} tfrdv__chan;
#define TFRDV__CHAN_KEY(c) ((char*)(void*)((c) + 1))
#define TFRDV__CHAN_KEY_MAX 0x7fffffffu /* longest key a channel holds */
#define TFRDV__CHAN_KEEP_MAX 256 /* longer key buffers are not recycled */
#define TFRDV__CHAN_FREE_DEF 64 /* channels of each kind kept per shard by default (until a table shrinks) */

/* The table: open addressing with linear probing over (hash, channel) slots, so probing and
   rehashing read one contiguous array and touch a channel only on a full hash match. Any size
   (the home slot is the low 32 hash bits scaled onto it, a multiply): it grows by half, which
   keeps it 50-75% full and costs fewer bytes per key than doubling. */
typedef struct tfrdv__slot {
    uint64_t hash;
    tfrdv__chan* chan; /* NULL: empty */
} tfrdv__slot;
typedef struct tfrdv__shard {
    tfrdv__mutex mu;
    /* the lock word's cache line holds nothing else (padding on both sides, this and the previous
       shard's tail): a thread spinning for the lock would otherwise pull away, on every probe, the
       line the holder is writing */
    char lock_pad[64];
    tfrdv__slot* slots;
    size_t nslots, nchans, min_slots;
    size_t burst_slots; /* the largest size since the table last shrank */
    size_t peak_slots;  /* that size for the last burst: the next one grows toward it in fewer steps */
    tfrdv__sitem* free_s;
    tfrdv__ritem* free_r[2]; /* plain receivers, and tfrdv__ritem_x */
    tfrdv__chan* free_c[2]; /* channels that held a whole key, and a key after a shared prefix */
    size_t nfree_s, nfree_r[2], nfree_c[2];
    tfrdv__pfx* pfx_hot; /* the prefix used last (one of pfx[]) */
    tfrdv__pfx* pfx[TFRDV__PFX_WAYS];
    /* deliveries whose callbacks run after this shard's lock was dropped (tfrdv__begin_delivery):
       2 per delivery, so both wrap alike; bit 0 of dl_ended: the closer has counted this shard */
    unsigned long dl_begun; /* under mu */
    volatile long dl_ended; /* atomic */
    int dl_wait;            /* under mu: the closer holds r until dl_ended catches up */
    char pad[64];
} tfrdv__shard;

struct tfrdv__serve;
struct tfrdv_rendezvous {
    tfrdv_hooks hooks;
    volatile long refs;
    volatile long aborted;
    volatile long inflight;    /* 1 while open + callbacks running + operations that may touch us */
    volatile long closing;     /* 0 open, 1 destroyer waits, 2 free when drained */
    tfrdv__event drain_ev;
    tfrdv__mutex mu;           /* status; and for a step: init, deferred, calls */
    tfrdv_status status;
    int nshards;
    tfrdv__shard* shards;
    size_t free_max;    /* recycled items kept per shard and kind */
    size_t chan_free_max; /* recycled channels kept per shard and kind */
    int chan_trim;        /* default free_max: a shrinking table frees its spare channels */
    size_t max_key_len;
    /* step manager part (mgr != NULL) */
    tfrdv_mgr* mgr;
    int64_t step_id;
    uint64_t gen; /* creation order in the manager (cleanup-all takes the steps existing then) */
    tfrdv_rendezvous* mgr_next;
    volatile long initialized; /* 0 -> 1 once, under mu; read lock-free (worker is set before) */
    char* worker;
    size_t worker_len;
    struct tfrdv__serve* deferred;
    tfrdv_call* calls;
    /* idle-step policy (mgr->mu): finds so far, and since when nothing has happened */
    uint64_t touches, idle_touches;
    int64_t idle_since;
    /* drains (tfrdv_mgr_cleanup_when_drained): one is pending for this step; requests routed here
       and not answered yet; values served with TFRDV_SERVE_CONFIRMS awaiting confirmation
       (mgr->mu) */
    volatile long draining, serving;
    long held;
};

static const tfrdv_args tfrdv__no_args = {0, 0, 0, 0, 0, {0, 0}};
TFRDV__PRIVATE void tfrdv__drain_poke(tfrdv_mgr* mgr, int64_t step_id);
TFRDV__PRIVATE void tfrdv__mgr_ref(tfrdv_mgr* mgr);
TFRDV__PRIVATE void tfrdv__mgr_unref(tfrdv_mgr* mgr);
/* Around a send or receive on a step that may take its last value while a drain waits for it
   (read before: a callback run inside may drop the caller's reference to r) */
TFRDV__PRIVATE tfrdv_mgr* tfrdv__drain_watch(tfrdv_rendezvous* r, int64_t* step) {
    tfrdv_mgr* m = r->mgr;
    if (!m || !tfrdv__atomic_load(&r->draining)) return 0;
    *step = r->step_id;
    tfrdv__mgr_ref(m);
    return m;
}
TFRDV__PRIVATE void tfrdv__drain_after(tfrdv_mgr* m, int64_t step) {
    if (!m) return;
    tfrdv__drain_poke(m, step);
    tfrdv__mgr_unref(m);
}

TFRDV__PRIVATE void tfrdv__free_rdv(tfrdv_rendezvous* r);
/* Hold/let go of the table around anything that may run user code and then touch r again. The
   count starts at 1 (the "open" unit, dropped by tfrdv__close after it set closing), so it can
   reach 0 only once, after close: whoever brings it there acts, and nobody touches r after its
   own decrement otherwise. */
TFRDV__PRIVATE void tfrdv__hold(tfrdv_rendezvous* r) { tfrdv__atomic_add(&r->inflight, 1); }
TFRDV__PRIVATE void tfrdv__let_go(tfrdv_rendezvous* r) {
    if (tfrdv__atomic_add(&r->inflight, -1) != 0) return;
    if (tfrdv__atomic_load(&r->closing) == 1) tfrdv__event_signal(&r->drain_ev); /* the closer waits */
    else tfrdv__free_rdv(r); /* closed from inside a callback: the last one out frees */
}
/* Runs a receive callback inside a frame for r (destroy from inside it defers) */
TFRDV__PRIVATE void tfrdv__call_done(tfrdv_rendezvous* r, tfrdv_done_fn done, void* user, const tfrdv_status* st,
                                     const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    tfrdv__frame f;
    tfrdv__frame_push(&f, r);
    done(user, st, sa ? sa : &tfrdv__no_args, ra ? ra : &tfrdv__no_args, v, dead);
    tfrdv__frame_pop(&f);
}
/* Runs a receive callback. The caller did tfrdv__hold(r) (before dropping its lock); this lets
   go after the callback, so r may be gone when it returns. */
TFRDV__PRIVATE void tfrdv__deliver(tfrdv_rendezvous* r, tfrdv_done_fn done, void* user,
                                   const tfrdv_status* st, const tfrdv_args* sa,
                                   const tfrdv_args* ra, tfrdv_value* v, int dead) {
    tfrdv__call_done(r, done, user, st, sa, ra, v, dead);
    tfrdv__let_go(r);
}

/* The pair path's cheaper hold. A delivery begun under shard s's lock (a plain increment) keeps r
   alive until the callback returns and tfrdv__deliver_from counts it ended: one atomic, where
   tfrdv__hold + tfrdv__let_go take two on a line every shard shares. tfrdv__close counts each
   shard (sets bit 0 under its lock) and holds r once for every shard with deliveries still
   running; the last of them to end lets that go. A delivery that sees the bit ends under the
   lock: nobody can decide the shard is finished between its count and its check. Both counts
   wrap (they are only compared for equality). */
TFRDV__PRIVATE void tfrdv__begin_delivery(tfrdv__shard* s) { s->dl_begun += 2; }
TFRDV__COLD void tfrdv__end_delivery_slow(tfrdv_rendezvous* r, tfrdv__shard* s) {
    int last;
    tfrdv__lock(&s->mu);
    last = (unsigned long)(tfrdv__atomic_add(&s->dl_ended, 2) & ~1L) == s->dl_begun && s->dl_wait;
    if (last) s->dl_wait = 0;
    tfrdv__unlock(&s->mu);
    if (last) tfrdv__let_go(r);
}
/* tfrdv__deliver for a delivery begun with tfrdv__begin_delivery(s) */
TFRDV__HOT void tfrdv__deliver_from(tfrdv_rendezvous* r, tfrdv__shard* s, tfrdv_done_fn done, void* user,
                                    const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    long w;
    tfrdv__call_done(r, done, user, &tfrdv__ok_status, sa, ra, v, dead);
    w = tfrdv__atomic_load(&s->dl_ended); /* a stale value only costs a retry */
    while (!(w & 1))
        if (tfrdv__atomic_cas(&s->dl_ended, &w, (long)((unsigned long)w + 2u))) return; /* r may be gone from here on */
    tfrdv__end_delivery_slow(r, s);
}
/* tfrdv__close, after the abort: holds r for every shard with deliveries still running */
TFRDV__PRIVATE void tfrdv__count_deliveries(tfrdv_rendezvous* r) {
    int i;
    for (i = 0; i < r->nshards; i++) {
        tfrdv__shard* s = &r->shards[i];
        tfrdv__lock(&s->mu);
        if ((unsigned long)(tfrdv__atomic_or(&s->dl_ended, 1) & ~1L) != s->dl_begun) {
            s->dl_wait = 1;
            tfrdv__hold(r);
        }
        tfrdv__unlock(&s->mu);
    }
}

TFRDV__PRIVATE tfrdv__shard* tfrdv__shard_of(tfrdv_rendezvous* r, uint64_t h) {
    /* the top 32 bits scaled onto 0..nshards-1: a multiply, not a division */
    return &r->shards[(size_t)(((h >> 32) * (uint64_t)(uint32_t)r->nshards) >> 32)];
}
TFRDV__PRIVATE size_t tfrdv__home(uint64_t h, size_t n) {
    return (size_t)(((h & 0xffffffffu) * (uint64_t)n) >> 32);
}
TFRDV__PRIVATE size_t tfrdv__next_slot(size_t i, size_t n) { return i + 1 == n ? 0 : i + 1; }
/* channel c holds exactly key[0..len) */
TFRDV__HOT int tfrdv__chan_is(const tfrdv__chan* c, const char* key, size_t len) {
    const tfrdv__pfx* p = c->pfx;
    if (!p) return c->key_len == len && memcmp(TFRDV__CHAN_KEY(c), key, len) == 0;
    return p->len + c->key_len == len && memcmp(TFRDV__CHAN_KEY(c), key + p->len, c->key_len) == 0 &&
           memcmp(TFRDV__PFX_BYTES(p), key, p->len) == 0;
}
/* the slot holding key (*found = 1), or the empty slot where it goes (*found = 0) */
TFRDV__HOT size_t tfrdv__slot_find(const tfrdv__shard* s, uint64_t h, const char* key, size_t len, int* found) {
    size_t n = s->nslots, i = tfrdv__home(h, n);
    for (;;) {
        const tfrdv__slot* x = &s->slots[i];
        if (!x->chan) break;
        if (x->hash == h && tfrdv__chan_is(x->chan, key, len)) {
            *found = 1;
            return i;
        }
        i = tfrdv__next_slot(i, n);
    }
    *found = 0;
    return i;
}
/* the slot holding channel c, whose key hashes to h */
TFRDV__PRIVATE size_t tfrdv__slot_of(const tfrdv__shard* s, uint64_t h, const tfrdv__chan* c) {
    size_t i = tfrdv__home(h, s->nslots);
    while (s->slots[i].chan != c) {
        TFRDV_ASSERT(s->slots[i].chan);
        i = tfrdv__next_slot(i, s->nslots);
    }
    return i;
}
/* empty slot i, shifting later entries of its probe run back (no tombstones) */
TFRDV__PRIVATE void tfrdv__slot_erase(tfrdv__shard* s, size_t i) {
    size_t n = s->nslots, j = i;
    for (;;) {
        size_t home;
        j = tfrdv__next_slot(j, n);
        if (!s->slots[j].chan) break;
        home = tfrdv__home(s->slots[j].hash, n);
        /* the entry at j may move to i unless its home lies cyclically in (i, j] */
        if (j > i ? (home <= i || home > j) : (home <= i && home > j)) {
            s->slots[i] = s->slots[j];
            i = j;
        }
    }
    s->slots[i].chan = 0;
}
/* rehash the shard into n slots; out of memory keeps the old table */
TFRDV__PRIVATE void tfrdv__rehash(tfrdv_rendezvous* r, tfrdv__shard* s, size_t n) {
    size_t i;
    tfrdv__slot* ns = (tfrdv__slot*)tfrdv__zalloc(&r->hooks.allocator, n * sizeof *ns);
    if (!ns) return; /* fuller (or sparser) than wanted, still correct: a slot stays empty */
    for (i = 0; i < s->nslots; i++) {
        size_t j;
        if (!s->slots[i].chan) continue;
        for (j = tfrdv__home(s->slots[i].hash, n); ns[j].chan; j = tfrdv__next_slot(j, n)) {}
        ns[j] = s->slots[i];
    }
    tfrdv__free(&r->hooks.allocator, s->slots, s->nslots * sizeof *ns);
    s->slots = ns;
    s->nslots = n;
}
/* Grow by half at 3/4 full (probing ends at an empty slot, so one always stays empty: when
   growing failed, a new key that would fill the last one is refused). Shrink a large table (over
   TFRDV__SHRINK_FROM slots) to a quarter below one channel per 16 slots: memory comes back after
   a burst, and a small working set that empties and refills (the steady state) never
   reallocates its table. A table that shrank after a burst remembers how large that burst made
   it; the next burst grows toward that size up to 8x per step (one rehash where growing by half
   takes five), so repeated bursts do not pay the whole growth again. */
#define TFRDV__SHRINK_FROM 64
TFRDV__PRIVATE int tfrdv__should_shrink(const tfrdv__shard* s) {
    return s->nslots > TFRDV__SHRINK_FROM && s->nslots > s->min_slots && s->nchans * 16 < s->nslots;
}
TFRDV__PRIVATE int tfrdv__too_full(const tfrdv__shard* s) { return s->nchans * 4 >= s->nslots * 3; }
TFRDV__PRIVATE size_t tfrdv__chan_bytes(size_t key_cap) { return sizeof(tfrdv__chan) + key_cap; }
TFRDV__PRIVATE void tfrdv__chan_free_all(tfrdv_allocator* a, tfrdv__shard* s) {
    int k;
    for (k = 0; k < 2; k++) {
        while (s->free_c[k]) {
            tfrdv__chan* x = s->free_c[k];
            s->free_c[k] = x->next;
            tfrdv__free(a, x, tfrdv__chan_bytes(x->key_cap));
        }
        s->nfree_c[k] = 0;
    }
}
TFRDV__PRIVATE void tfrdv__resize(tfrdv_rendezvous* r, tfrdv__shard* s) {
    if (tfrdv__too_full(s)) {
        size_t n = s->nslots + s->nslots / 2;
        if (s->peak_slots > n) n = s->peak_slots / 8 < s->nslots ? s->peak_slots : s->nslots * 8;
        tfrdv__rehash(r, s, n);
        if (s->nslots > s->burst_slots) s->burst_slots = s->nslots;
    } else if (tfrdv__should_shrink(s)) {
        size_t n = s->nslots / 4;
        if (s->burst_slots) { /* the first shrink after a burst */
            s->peak_slots = s->burst_slots;
            s->burst_slots = 0;
        }
        tfrdv__rehash(r, s, n < s->min_slots ? s->min_slots : n);
        /* a burst is draining: with the default free_max its spare channels go back too */
        if (r->chan_trim) tfrdv__chan_free_all(&r->hooks.allocator, s);
    }
}
/* no room for one more channel (the table could not grow): refuse the new key */
TFRDV__PRIVATE int tfrdv__no_room(const tfrdv__shard* s) { return s->nchans + 2 > s->nslots; }
TFRDV__PRIVATE size_t tfrdv__pfx_bytes(size_t len) { return sizeof(tfrdv__pfx) + len; }
/* The shard's shared copy of the prefix p[0..n), with a reference taken; NULL when it is not
   cached and neither of its two ways is free (or out of memory): the channel then holds the
   whole key. The last one used is checked first, without hashing. */
TFRDV__PRIVATE tfrdv__pfx* tfrdv__pfx_get(tfrdv_rendezvous* r, tfrdv__shard* s, const char* p, size_t n) {
    tfrdv__pfx* x = s->pfx_hot;
    uint64_t h;
    size_t w[2], k;
    if (x && x->len == n && memcmp(TFRDV__PFX_BYTES(x), p, n) == 0) {
        x->refs++;
        return x;
    }
    h = tfrdv_hash_bytes(p, n);
    w[0] = (size_t)(h % TFRDV__PFX_WAYS);
    w[1] = (size_t)((h >> 32) % TFRDV__PFX_WAYS);
    for (k = 0; k < 2; k++) {
        x = s->pfx[w[k]];
        if (x && x->len == n && memcmp(TFRDV__PFX_BYTES(x), p, n) == 0) {
            x->refs++;
            s->pfx_hot = x;
            return x;
        }
    }
    for (k = 0; k < 2; k++) {
        tfrdv__pfx* old = s->pfx[w[k]];
        if (old && old->refs) continue;
        x = (tfrdv__pfx*)tfrdv__alloc(&r->hooks.allocator, tfrdv__pfx_bytes(n));
        if (!x) return 0;
        if (old) tfrdv__free(&r->hooks.allocator, old, tfrdv__pfx_bytes(old->len));
        x->len = n;
        x->refs = 1;
        memcpy(TFRDV__PFX_BYTES(x), p, n);
        s->pfx[w[k]] = s->pfx_hot = x;
        return x;
    }
    return 0;
}
/* how much of a send key is its device-pair prefix (up to the edge name); 0: none worth sharing */
TFRDV__PRIVATE size_t tfrdv__pfx_len(const tfrdv_parsed_key* key) {
    uintptr_t b = (uintptr_t)key->full.ptr, e = (uintptr_t)key->edge_name.ptr;
    size_t n = (size_t)(e - b);
    return e > b && n < key->full.len && n >= TFRDV__PFX_MIN && n <= TFRDV__PFX_MAX ? n : 0;
}
/* a channel for key, in the empty slot i (from tfrdv__slot_find); NULL when out of memory */
/* a channel holding key (after its shared prefix when the shard is large enough and the prefix
   is cached), not yet in the table: the free list's, or a new allocation; NULL: out of memory */
TFRDV__COLD tfrdv__chan* tfrdv__chan_make(tfrdv_rendezvous* r, tfrdv__shard* s, const tfrdv_parsed_key* key,
                                          int kind) {
    tfrdv__chan* c;
    tfrdv__pfx* p = 0;
    size_t len = key->full.len, plen = kind == TFRDV__CHAN_SEND && s->nchans >= TFRDV__PFX_FROM ? tfrdv__pfx_len(key) : 0;
    if (plen && (p = tfrdv__pfx_get(r, s, key->full.ptr, plen)) != 0) len -= plen;
    c = s->free_c[p != 0];
    if (c && c->key_cap >= len) {
        s->free_c[p != 0] = c->next;
        s->nfree_c[p != 0]--;
    } else {
        /* the allocation rounded to where a 16-byte-granular malloc (8-byte header) puts its next
           size class, so the slack is key capacity */
        size_t cap = ((sizeof(tfrdv__chan) + len + 23) & ~(size_t)15) - 8 - sizeof(tfrdv__chan);
        c = (tfrdv__chan*)tfrdv__alloc(&r->hooks.allocator, tfrdv__chan_bytes(cap));
        if (!c) {
            if (p) p->refs--;
            return 0;
        }
        c->key_cap = (uint32_t)cap;
    }
    memcpy(TFRDV__CHAN_KEY(c), key->full.ptr + (p ? plen : 0), len);
    c->key_len = (uint32_t)len;
    c->pfx = p;
    return c;
}
/* a channel for key, in the empty slot i (from tfrdv__slot_find); NULL when out of memory. The
   pair path (a small table, a recycled channel that fits the whole key) stays inline. */
TFRDV__HOT tfrdv__chan* tfrdv__chan_new(tfrdv_rendezvous* r, tfrdv__shard* s, size_t i,
                                            const tfrdv_parsed_key* key, int kind) {
    tfrdv__chan* c = s->free_c[0];
    size_t len = key->full.len;
    if (tfrdv__no_room(s) || len > TFRDV__CHAN_KEY_MAX) return 0;
    if (c && c->key_cap >= len && (kind == TFRDV__CHAN_RECV || s->nchans < TFRDV__PFX_FROM)) {
        s->free_c[0] = c->next;
        s->nfree_c[0]--;
        memcpy(TFRDV__CHAN_KEY(c), key->full.ptr, len);
        c->key_len = (uint32_t)len;
        c->pfx = 0;
    } else if ((c = tfrdv__chan_make(r, s, key, kind)) == 0) {
        return 0;
    }
    c->tail = 0;
    c->kind = (unsigned char)kind;
    c->detached = 0;
    c->first_busy = 0;
    c->next = 0;
    s->slots[i].hash = key->hash;
    s->slots[i].chan = c;
    s->nchans++;
    return c;
}
/* free lists: keep up to free_max items of each kind and chan_free_max channels of each kind
   (short keys only) per shard */
TFRDV__HOT void tfrdv__chan_recycle(tfrdv_rendezvous* r, tfrdv__shard* s, tfrdv__chan* c) {
    int part = c->pfx != 0;
    if (part) {
        c->pfx->refs--;
        c->pfx = 0;
    }
    if (s->nfree_c[part] < r->chan_free_max && c->key_cap <= TFRDV__CHAN_KEEP_MAX) {
        c->next = s->free_c[part];
        s->free_c[part] = c;
        s->nfree_c[part]++;
    } else {
        tfrdv__free(&r->hooks.allocator, c, tfrdv__chan_bytes(c->key_cap));
    }
}
TFRDV__PRIVATE void tfrdv__sitem_recycle(tfrdv_rendezvous* r, tfrdv__shard* s, tfrdv__sitem* si) {
    if (s->nfree_s < r->free_max) {
        si->next = s->free_s;
        s->free_s = si;
        s->nfree_s++;
    } else {
        tfrdv__free(&r->hooks.allocator, si, sizeof *si);
    }
}
TFRDV__PRIVATE size_t tfrdv__ritem_bytes(int x) { return x ? sizeof(tfrdv__ritem_x) : sizeof(tfrdv__ritem); }
TFRDV__PRIVATE void tfrdv__ritem_recycle(tfrdv_rendezvous* r, tfrdv__shard* s, tfrdv__ritem* ri) {
    int x = ri->x;
    if (s->nfree_r[x] < r->free_max) {
        ri->next = s->free_r[x];
        s->free_r[x] = ri;
        s->nfree_r[x]++;
    } else {
        tfrdv__free(&r->hooks.allocator, ri, tfrdv__ritem_bytes(x));
    }
}
TFRDV__PRIVATE tfrdv__sitem* tfrdv__sitem_get(tfrdv_rendezvous* r, tfrdv__shard* s) {
    tfrdv__sitem* si = s->free_s;
    if (!si) return (tfrdv__sitem*)tfrdv__alloc(&r->hooks.allocator, sizeof *si);
    s->free_s = si->next;
    s->nfree_s--;
    return si;
}
TFRDV__PRIVATE tfrdv__ritem* tfrdv__ritem_get(tfrdv_rendezvous* r, tfrdv__shard* s, int x) {
    tfrdv__ritem* ri = s->free_r[x];
    if (ri) {
        s->free_r[x] = ri->next;
        s->nfree_r[x]--;
    } else if ((ri = (tfrdv__ritem*)tfrdv__alloc(&r->hooks.allocator, tfrdv__ritem_bytes(x))) == 0) {
        return 0;
    }
    ri->x = (unsigned char)x;
    return ri;
}
/* the receiver's args as it passed them (key: set by the caller) */
TFRDV__PRIVATE void tfrdv__ritem_args(const tfrdv__ritem* ri, tfrdv_args* ra) {
    *ra = tfrdv__no_args;
    ra->device_context = ri->device_context;
    ra->alloc_attrs = ri->alloc_attrs;
    if (ri->x) {
        const tfrdv__ritem_x* rx = (const tfrdv__ritem_x*)(const void*)ri;
        ra->cancel = rx->cancel;
        ra->alloc_fn = rx->alloc_fn;
        ra->alloc_user = rx->alloc_user;
    }
}
/* remove the (empty) channel in slot i, recycle it, shrink the table if it emptied out */
TFRDV__HOT void tfrdv__chan_drop(tfrdv_rendezvous* r, tfrdv__shard* s, size_t i) {
    tfrdv__chan* c = s->slots[i].chan;
    tfrdv__slot_erase(s, i);
    s->nchans--;
    tfrdv__chan_recycle(r, s, c);
    if (tfrdv__should_shrink(s)) tfrdv__resize(r, s);
}
/* the ring: both item kinds start with their `next` pointer */
TFRDV__PRIVATE void tfrdv__chan_push(tfrdv__chan* c, void* item) {
    if (c->tail) {
        *(void**)item = *(void**)c->tail;
        *(void**)c->tail = item;
    } else {
        *(void**)item = item;
    }
    c->tail = item;
}
/* a send given back (tfrdv_mgr_serve_return) goes before every queued one: it was sent first */
TFRDV__PRIVATE void tfrdv__chan_push_front(tfrdv__chan* c, void* item) {
    if (!c->tail) {
        tfrdv__chan_push(c, item);
        return;
    }
    *(void**)item = *(void**)c->tail;
    *(void**)c->tail = item;
}
TFRDV__PRIVATE void* tfrdv__chan_pop(tfrdv__chan* c) {
    void* t = c->tail;
    void* it = *(void**)t;
    if (it == t) c->tail = 0;
    else *(void**)t = *(void**)it;
    return it;
}
/* a receive channel's ring also links backwards (tail->next is the oldest, oldest->prev the tail),
   so any receiver unlinks in O(1): cancelling 10^6 receivers of one key in any order is linear */
TFRDV__PRIVATE void tfrdv__rring_push(tfrdv__chan* c, tfrdv__ritem* ri) {
    tfrdv__ritem* t = (tfrdv__ritem*)c->tail;
    if (t) {
        ri->next = t->next;
        ri->prev = t;
        t->next->prev = ri;
        t->next = ri;
    } else {
        ri->next = ri->prev = ri;
    }
    c->tail = ri;
}
TFRDV__PRIVATE void tfrdv__rring_unlink(tfrdv__chan* c, tfrdv__ritem* ri) {
    if (ri->next == ri) {
        c->tail = 0;
        return;
    }
    ri->prev->next = ri->next;
    ri->next->prev = ri->prev;
    if ((tfrdv__ritem*)c->tail == ri) c->tail = ri->prev;
}
TFRDV__PRIVATE tfrdv__ritem* tfrdv__rring_pop(tfrdv__chan* c) {
    tfrdv__ritem* ri = ((tfrdv__ritem*)c->tail)->next;
    tfrdv__rring_unlink(c, ri);
    return ri;
}

/* Shard lock held: ri has just left its queue. The cancellation manager is alive here (its
   callback for ri would need this lock), so deregister now, without waiting, and never touch the
   manager again. Recycles ri unless its cancellation callback is already running: that callback
   will find ri unlinked and recycle it (r is held for it). */
TFRDV__PRIVATE void tfrdv__ritem_detach(tfrdv_rendezvous* r, tfrdv__shard* s, tfrdv__ritem* ri) {
    ri->linked = 0;
    if (ri->x && TFRDV__RX(ri)->cancel && !tfrdv_cancel_try_deregister(TFRDV__RX(ri)->cancel, &TFRDV__RX(ri)->cnode)) {
        ri->orphan = 1;
        tfrdv__hold(r);
        return;
    }
    tfrdv__ritem_recycle(r, s, ri);
}

TFRDV__PRIVATE void tfrdv__copy_status(tfrdv_rendezvous* r, tfrdv_status* st) {
    /* r->status is immutable once r->aborted is set */
    if (st) tfrdv__status_copy(st, &r->status);
}

/* the manager's trace hook for step tables (NULL for a local table or when unset) */
TFRDV__PRIVATE tfrdv_trace_fn tfrdv__trace_of(const tfrdv_rendezvous* r);
TFRDV__PRIVATE void tfrdv__trace_local(tfrdv_rendezvous* r, const char* key, size_t len, int64_t t0,
                                       const tfrdv_status* st, const tfrdv_value* v, int dead);

/* front: queue the value before every buffered one (a value given back). Inlined: tfrdv_send's
   copy folds front away; out of line (once tfrdv_mgr_serve_return became a second caller, the
   compiler stopped inlining it into tfrdv_send) the call, its spilled seventh argument and the
   branch cost ~37 instructions per send (callgrind: 578 -> 536 per send+recv_async pair). */
TFRDV__HOT tfrdv_code tfrdv__local_send(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                            const tfrdv_args* args, tfrdv_value* value, int is_dead,
                                            int front, tfrdv_status* st) {
    tfrdv__shard* s = tfrdv__shard_of(r, key->hash);
    size_t i;
    int found;
    tfrdv__chan* c;
    tfrdv__ritem* ri;
    tfrdv_args sa, ra;
    tfrdv_done_fn done;
    void* user;
    int64_t t0 = 0;
    int traced;
    if (tfrdv__trace_of(r)) t0 = tfrdv__now(&r->hooks.clock); /* the clock never runs under a lock */
    tfrdv__lock(&s->mu);
    if (tfrdv__atomic_load(&r->aborted)) {
        tfrdv__unlock(&s->mu);
        tfrdv__copy_status(r, st);
        return r->status.code;
    }
    i = tfrdv__slot_find(s, key->hash, key->full.ptr, key->full.len, &found);
    c = found ? s->slots[i].chan : 0;
    if (!c || c->kind == TFRDV__CHAN_SEND) {
        tfrdv__sitem* si = 0;
        if (!c) c = tfrdv__chan_new(r, s, i, key, TFRDV__CHAN_SEND);
        if (c && !c->first_busy) {
            c->first_busy = 1;
            si = &c->first;
            si->embedded = 1;
        } else if (c && (si = tfrdv__sitem_get(r, s)) != 0) {
            si->embedded = 0;
        }
        if (!si) {
            tfrdv__unlock(&s->mu);
            return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_send: out of memory (key %S)", &key->full);
        }
        si->value = value;
        si->is_dead = (unsigned char)(is_dead != 0);
        si->device_context = args ? args->device_context : 0;
        si->alloc_attrs = args ? args->alloc_attrs : 0;
        si->t0 = t0;
        if (front) tfrdv__chan_push_front(c, si);
        else tfrdv__chan_push(c, si);
        if (tfrdv__too_full(s)) tfrdv__resize(r, s);
        tfrdv__unlock(&s->mu);
        return TFRDV_OK;
    }
    /* a receiver is waiting: the later arrival (us) runs its callback */
    ri = tfrdv__rring_pop(c);
    if (!c->tail) tfrdv__chan_drop(r, s, i);
    done = ri->done;
    user = ri->user;
    tfrdv__ritem_args(ri, &ra);
    ra.key = key->full; /* the sender's copy of the same bytes, valid during this call */
    traced = ri->x && TFRDV__RX(ri)->trace && t0;
    if (traced) t0 = TFRDV__RX(ri)->t0;
    tfrdv__ritem_detach(r, s, ri);
    tfrdv__begin_delivery(s);
    tfrdv__unlock(&s->mu);
    sa = tfrdv__no_args;
    if (args) {
        sa.device_context = args->device_context;
        sa.alloc_attrs = args->alloc_attrs;
    }
    if (traced) tfrdv__trace_local(r, key->full.ptr, key->full.len, t0, &tfrdv__ok_status, value, is_dead);
    tfrdv__deliver_from(r, s, done, user, &sa, &ra, value, is_dead);
    return TFRDV_OK;
}

TFRDV__PRIVATE void tfrdv__ritem_cancelled(void* p) {
    tfrdv__ritem_x* rx = (tfrdv__ritem_x*)p;
    tfrdv__ritem* ri = &rx->base;
    tfrdv_rendezvous* r = rx->r;
    tfrdv__shard* s = rx->shard;
    tfrdv__chan* c;
    tfrdv_done_fn done;
    void* user;
    tfrdv_args ra;
    tfrdv_status cst;
    tfrdv_allocator a;
    char kbuf[256];
    char* kcopy;
    size_t klen;
    tfrdv__lock(&s->mu);
    if (!ri->linked) { /* whoever unlinked it completes it; we only recycle it */
        int orphan = ri->orphan;
        if (orphan) {
            ri->orphan = 0;
            tfrdv__ritem_recycle(r, s, ri);
        }
        tfrdv__unlock(&s->mu);
        if (orphan) tfrdv__let_go(r);
        return;
    }
    c = rx->chan;
    /* the key for the callback: the channel may be recycled once we unlock */
    kcopy = c->key_len <= sizeof kbuf ? kbuf : (char*)tfrdv__alloc(&r->hooks.allocator, c->key_len);
    if (kcopy) memcpy(kcopy, TFRDV__CHAN_KEY(c), c->key_len);
    klen = kcopy ? c->key_len : 0;
    tfrdv__rring_unlink(c, ri);
    if (!c->tail && !c->detached) tfrdv__chan_drop(r, s, tfrdv__slot_of(s, rx->hash, c));
    ri->linked = 0;
    done = ri->done;
    user = ri->user;
    tfrdv__ritem_args(ri, &ra);
    tfrdv__ritem_recycle(r, s, ri);
    tfrdv__hold(r);
    tfrdv__unlock(&s->mu);
    tfrdv__err(&cst, TFRDV_CANCELLED, "RecvAsync is cancelled.");
    ra.key.ptr = kcopy;
    ra.key.len = klen;
    a = r->hooks.allocator; /* r may be gone after the callback */
    tfrdv__deliver(r, done, user, &cst, 0, &ra, 0, 0);
    if (kcopy != kbuf) tfrdv__free(&a, kcopy, klen);
}

/* shard lock held, the channel in slot i holds sends: take the oldest one */
TFRDV__HOT tfrdv_value* tfrdv__take_send(tfrdv_rendezvous* r, tfrdv__shard* s, size_t i,
                                             tfrdv_args* sa, int* dead, int64_t* t0) {
    tfrdv__chan* c = s->slots[i].chan;
    tfrdv__sitem* si = (tfrdv__sitem*)tfrdv__chan_pop(c);
    tfrdv_value* v = si->value;
    *sa = tfrdv__no_args;
    sa->device_context = si->device_context;
    sa->alloc_attrs = si->alloc_attrs;
    *dead = si->is_dead;
    *t0 = si->t0;
    if (si->embedded) c->first_busy = 0;
    else tfrdv__sitem_recycle(r, s, si);
    if (!c->tail) tfrdv__chan_drop(r, s, i);
    return v;
}
/* trace: report a TFRDV_TRACE_LOCAL event when the receive completes (not for serving) */
TFRDV__PRIVATE tfrdv_code tfrdv__local_recv(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                            const tfrdv_args* args, tfrdv_done_fn done, void* user,
                                            int trace, tfrdv_status* est) {
    tfrdv__shard* s = tfrdv__shard_of(r, key->hash);
    size_t i;
    int found;
    tfrdv__chan* c;
    tfrdv__ritem* ri;
    tfrdv_args ra = args ? *args : tfrdv__no_args;
    int64_t t0 = 0;
    ra.key = key->full; /* for the callbacks that run inside this call */
    if (trace && tfrdv__trace_of(r)) t0 = tfrdv__now(&r->hooks.clock);
    else trace = 0;
    tfrdv__lock(&s->mu);
    if (tfrdv__atomic_load(&r->aborted)) {
        tfrdv__hold(r);
        tfrdv__unlock(&s->mu);
        tfrdv__deliver(r, done, user, &r->status, 0, &ra, 0, 0);
        return TFRDV_OK;
    }
    i = tfrdv__slot_find(s, key->hash, key->full.ptr, key->full.len, &found);
    c = found ? s->slots[i].chan : 0;
    if (c && c->kind == TFRDV__CHAN_SEND) {
        tfrdv_args sa;
        int dead;
        int64_t ts;
        tfrdv_value* v = tfrdv__take_send(r, s, i, &sa, &dead, &ts);
        tfrdv__begin_delivery(s);
        tfrdv__unlock(&s->mu);
        if (trace) tfrdv__trace_local(r, key->full.ptr, key->full.len, ts && ts < t0 ? ts : t0, &tfrdv__ok_status, v, dead);
        tfrdv__deliver_from(r, s, done, user, &sa, &ra, v, dead);
        return TFRDV_OK;
    }
    ri = tfrdv__ritem_get(r, s, ra.cancel || ra.alloc_fn || ra.alloc_user || trace);
    if (ri && !c && !(c = tfrdv__chan_new(r, s, i, key, TFRDV__CHAN_RECV))) {
        tfrdv__ritem_recycle(r, s, ri);
        ri = 0;
    }
    if (!ri) {
        tfrdv__unlock(&s->mu);
        return tfrdv__err(est, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_recv_async: out of memory (key %S)", &key->full);
    }
    ri->done = done;
    ri->user = user;
    ri->device_context = ra.device_context;
    ri->alloc_attrs = ra.alloc_attrs;
    ri->linked = 1;
    ri->orphan = 0;
    if (ri->x) {
        tfrdv__ritem_x* rx = TFRDV__RX(ri);
        rx->cancel = ra.cancel;
        rx->alloc_fn = ra.alloc_fn;
        rx->alloc_user = ra.alloc_user;
        rx->chan = c;
        rx->shard = s;
        rx->r = r;
        rx->trace = trace;
        rx->t0 = t0;
        rx->hash = key->hash;
        memset(&rx->cnode, 0, sizeof rx->cnode);
    }
    if (ra.cancel && !tfrdv_cancel_register(ra.cancel, &TFRDV__RX(ri)->cnode, tfrdv__ritem_cancelled, ri)) {
        tfrdv_status cst;
        if (!c->tail) tfrdv__chan_drop(r, s, i);
        ri->linked = 0;
        tfrdv__ritem_recycle(r, s, ri);
        tfrdv__hold(r);
        tfrdv__unlock(&s->mu);
        tfrdv__err(&cst, TFRDV_CANCELLED, "RecvAsync is cancelled.");
        tfrdv__deliver(r, done, user, &cst, 0, &ra, 0, 0);
        return TFRDV_OK;
    }
    tfrdv__rring_push(c, ri);
    if (tfrdv__too_full(s)) tfrdv__resize(r, s);
    tfrdv__unlock(&s->mu);
    return TFRDV_OK;
}

/* Abort the table: every waiting receiver gets the status, every buffered value is released.
   Channels leave the table first; their items are then taken one at a time under the shard lock
   (a receiver's cancellation callback may still run concurrently and take one itself). */
TFRDV__PRIVATE void tfrdv__drain_tables(tfrdv_rendezvous* r) {
    int i;
    for (i = 0; i < r->nshards; i++) {
        tfrdv__shard* s = &r->shards[i];
        tfrdv__chan* list = 0;
        tfrdv__chan* c;
        size_t b;
        tfrdv__lock(&s->mu);
        for (b = 0; b < s->nslots; b++) {
            if ((c = s->slots[b].chan) != 0) {
                s->slots[b].chan = 0;
                c->next = list;
                c->detached = 1;
                list = c;
            }
        }
        s->nchans = 0;
        for (c = list; c; c = c->next) {
            for (;;) {
                if (!c->tail) break;
                if (c->kind == TFRDV__CHAN_SEND) {
                    tfrdv__sitem* si = (tfrdv__sitem*)tfrdv__chan_pop(c);
                    tfrdv_value* v = si->value;
                    if (si->embedded) c->first_busy = 0;
                    else tfrdv__sitem_recycle(r, s, si);
                    tfrdv__unlock(&s->mu);
                    tfrdv_value_release(v);
                } else {
                    tfrdv__ritem* ri = tfrdv__rring_pop(c);
                    tfrdv_done_fn done = ri->done;
                    void* user = ri->user;
                    tfrdv_args ra;
                    tfrdv__ritem_args(ri, &ra);
                    ra.key.ptr = TFRDV__CHAN_KEY(c); /* c stays on our private list until the end */
                    ra.key.len = c->key_len;
                    tfrdv__ritem_detach(r, s, ri);
                    tfrdv__hold(r);
                    tfrdv__unlock(&s->mu);
                    tfrdv__deliver(r, done, user, &r->status, 0, &ra, 0, 0);
                }
                tfrdv__lock(&s->mu);
            }
        }
        while ((c = list) != 0) {
            list = c->next;
            c->detached = 0;
            tfrdv__chan_recycle(r, s, c);
        }
        if (s->nslots > s->min_slots) tfrdv__rehash(r, s, s->min_slots);
        tfrdv__unlock(&s->mu);
    }
}

TFRDV_API tfrdv_config tfrdv_config_init(void) {
    tfrdv_config c;
    memset(&c, 0, sizeof c);
    return c;
}

TFRDV__PRIVATE tfrdv_code tfrdv__rdv_new(const tfrdv_hooks* hooks, int nshards, int min_buckets,
                                         int free_max, size_t max_key_len, tfrdv_rendezvous** out,
                                         tfrdv_status* st) {
    tfrdv_rendezvous* r;
    size_t size, nb = 16;
    int i;
    if (!tfrdv__allocator_ok(&hooks->allocator) || !tfrdv__sync_ok(hooks->sync))
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "incomplete allocator or sync hooks (give all functions or none)");
    if (nshards < 0 || nshards > 4096 || min_buckets < 0 || min_buckets > (1 << 24))
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "num_shards must be 0..4096 and min_buckets 0..16777216");
    nshards = TFRDV__DEF(nshards, 4);
    if (min_buckets) {
        nb = 4; /* the smallest table that can grow before it fills */
        while (nb < (size_t)min_buckets) nb <<= 1;
    }
    size = sizeof *r + (size_t)nshards * sizeof(tfrdv__shard);
    r = (tfrdv_rendezvous*)tfrdv__zalloc(&hooks->allocator, size);
    if (!r) return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "rendezvous: out of memory");
    r->hooks = *hooks;
    r->refs = 1;
    r->inflight = 1; /* the open unit */
    r->nshards = nshards;
    r->shards = (tfrdv__shard*)(void*)(r + 1);
    r->free_max = free_max < 0 ? 0 : (size_t)TFRDV__DEF(free_max, 256);
    r->chan_free_max = free_max < 0 ? 0 : (size_t)TFRDV__DEF(free_max, TFRDV__CHAN_FREE_DEF);
    r->chan_trim = free_max == 0;
    r->max_key_len = TFRDV__DEF(max_key_len, 4096);
    if (!tfrdv__mutex_init(&r->mu, hooks->sync)) goto fail0;
    if (!tfrdv__event_init(&r->drain_ev, hooks->sync)) goto fail1;
    for (i = 0; i < nshards; i++) {
        tfrdv__shard* s = &r->shards[i];
        s->nslots = s->min_slots = nb;
        s->slots = (tfrdv__slot*)tfrdv__zalloc(&hooks->allocator, nb * sizeof *s->slots);
        if (!s->slots || !tfrdv__mutex_init(&s->mu, hooks->sync)) {
            tfrdv__free(&hooks->allocator, s->slots, nb * sizeof *s->slots);
            while (--i >= 0) {
                tfrdv__mutex_destroy(&r->shards[i].mu);
                tfrdv__free(&hooks->allocator, r->shards[i].slots, nb * sizeof *s->slots);
            }
            goto fail2;
        }
    }
    *out = r;
    return TFRDV_OK;
fail2:
    tfrdv__event_destroy(&r->drain_ev);
fail1:
    tfrdv__mutex_destroy(&r->mu);
fail0:
    tfrdv__free(&hooks->allocator, r, size);
    return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "rendezvous: out of memory or sync init failed");
}

TFRDV_API tfrdv_code tfrdv_create(const tfrdv_config* cfg, tfrdv_rendezvous** out, tfrdv_status* st) {
    tfrdv_config c = cfg ? *cfg : tfrdv_config_init();
    if (!out) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_create: NULL out");
    *out = 0;
    return tfrdv__rdv_new(&c.hooks, c.num_shards, c.min_buckets, c.free_max, c.max_key_len, out, st);
}

TFRDV__PRIVATE void tfrdv__mgr_unref(tfrdv_mgr* mgr);
TFRDV__PRIVATE void tfrdv__remote_abort(tfrdv_rendezvous* r);

TFRDV__PRIVATE void tfrdv__free_rdv(tfrdv_rendezvous* r) {
    tfrdv_allocator a = r->hooks.allocator;
    tfrdv_mgr* mgr = r->mgr;
    int i;
    size_t w;
    for (i = 0; i < r->nshards; i++) {
        tfrdv__shard* s = &r->shards[i];
        while (s->free_s) {
            tfrdv__sitem* x = s->free_s;
            s->free_s = x->next;
            tfrdv__free(&a, x, sizeof *x);
        }
        for (w = 0; w < 2; w++) {
            while (s->free_r[w]) {
                tfrdv__ritem* x = s->free_r[w];
                s->free_r[w] = x->next;
                tfrdv__free(&a, x, tfrdv__ritem_bytes((int)w));
            }
        }
        tfrdv__chan_free_all(&a, s);
        for (w = 0; w < TFRDV__PFX_WAYS; w++)
            if (s->pfx[w]) tfrdv__free(&a, s->pfx[w], tfrdv__pfx_bytes(s->pfx[w]->len));
        tfrdv__free(&a, s->slots, s->nslots * sizeof *s->slots);
        tfrdv__mutex_destroy(&s->mu);
    }
    tfrdv__free(&a, r->worker, r->worker_len + 1);
    tfrdv__event_destroy(&r->drain_ev);
    tfrdv__mutex_destroy(&r->mu);
    tfrdv__free(&a, r, sizeof *r + (size_t)r->nshards * sizeof(tfrdv__shard));
    if (mgr) tfrdv__mgr_unref(mgr);
}

TFRDV_API tfrdv_code tfrdv_abort(tfrdv_rendezvous* r, tfrdv_code code, const char* msg) {
    if (!r || code == TFRDV_OK || (unsigned)code > 16u) return TFRDV_INVALID_ARGUMENT;
    tfrdv__lock(&r->mu);
    if (r->aborted) {
        tfrdv__unlock(&r->mu);
        return TFRDV_OK; /* sticky: the first status stays */
    }
    tfrdv_status_set(&r->status, code, msg);
    tfrdv__atomic_store(&r->aborted, 1);
    tfrdv__unlock(&r->mu);
    {
        tfrdv__frame f; /* the logger and callbacks below may destroy r: keep it until we are done */
        tfrdv__hold(r);
        tfrdv__frame_push(&f, r);
        if (r->hooks.logger.fn) r->hooks.logger.fn(r->hooks.logger.user, 1, r->status.msg);
        tfrdv__drain_tables(r);
        if (r->mgr) tfrdv__remote_abort(r);
        tfrdv__frame_pop(&f);
        tfrdv__let_go(r);
    }
    return TFRDV_OK;
}

TFRDV_API tfrdv_code tfrdv_get_status(tfrdv_rendezvous* r, tfrdv_status* out) {
    if (!r) return tfrdv__err(out, TFRDV_INVALID_ARGUMENT, "tfrdv_get_status: NULL rendezvous");
    if (!tfrdv__atomic_load(&r->aborted)) return tfrdv__err(out, TFRDV_OK, "");
    tfrdv__copy_status(r, out);
    return r->status.code;
}

TFRDV_API void tfrdv_ref(tfrdv_rendezvous* r) {
    if (r) tfrdv__atomic_add(&r->refs, 1);
}
TFRDV__PRIVATE void tfrdv__close(tfrdv_rendezvous* r) {
    tfrdv_abort(r, TFRDV_CANCELLED, "Rendezvous destroyed");
    tfrdv__count_deliveries(r); /* after the abort no delivery begins that way */
    if (tfrdv__frame_in(r)) {
        /* inside one of r's own callbacks (which holds r): freed when the last one returns */
        tfrdv__atomic_store(&r->closing, 2);
        tfrdv__let_go(r); /* the open unit; cannot reach 0 here */
        return;
    }
    tfrdv__atomic_store(&r->closing, 1);
    if (tfrdv__atomic_add(&r->inflight, -1) != 0)
        tfrdv__event_wait(&r->drain_ev, -1); /* signalled once, by the last callback out */
    tfrdv__free_rdv(r);
}
TFRDV_API void tfrdv_unref(tfrdv_rendezvous* r) {
    if (r && tfrdv__atomic_add(&r->refs, -1) == 0) tfrdv__close(r);
}
TFRDV_API void tfrdv_destroy(tfrdv_rendezvous* r) {
    if (!r) return;
    tfrdv_abort(r, TFRDV_CANCELLED, "Rendezvous destroyed");
    tfrdv_unref(r);
}

TFRDV__HOT tfrdv_code tfrdv__check_key(const tfrdv_rendezvous* r, const tfrdv_parsed_key* key, const char* fn,
                                           tfrdv_status* st) {
    if (!key || !key->full.ptr || key->full.len == 0)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "%s: NULL or empty key (parse it with tfrdv_key_parse)", fn);
    if (key->full.len > r->max_key_len)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "%s: key of %U bytes is longer than max_key_len (%U)", fn,
                          (uint64_t)key->full.len, (uint64_t)r->max_key_len);
    return TFRDV_OK;
}
TFRDV__PRIVATE tfrdv_code tfrdv__remote_send_check(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                                   tfrdv_status* st);
TFRDV__PRIVATE tfrdv_code tfrdv__remote_recv(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                             const tfrdv_args* args, tfrdv_done_fn done, void* user,
                                             tfrdv_status* est);

TFRDV_API tfrdv_code tfrdv_send(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                const tfrdv_args* args, tfrdv_value* value, int is_dead,
                                tfrdv_status* st) {
    if (!r) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_send: NULL rendezvous");
    if (tfrdv__check_key(r, key, "tfrdv_send", st) != TFRDV_OK) return TFRDV_INVALID_ARGUMENT;
    if (!value && !is_dead)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_send: NULL value for a live tensor (key %S)", &key->full);
    if (r->mgr) {
        int64_t step = 0;
        tfrdv_mgr* watch;
        tfrdv_code rc = tfrdv__remote_send_check(r, key, st);
        if (rc != TFRDV_OK) return rc;
        watch = tfrdv__drain_watch(r, &step);
        rc = tfrdv__local_send(r, key, args, value, is_dead, 0, st);
        tfrdv__drain_after(watch, step);
        return rc;
    }
    return tfrdv__local_send(r, key, args, value, is_dead, 0, st);
}

/* refusals fill est (and run no callback) */
TFRDV__HOT tfrdv_code tfrdv__recv_async(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                            const tfrdv_args* args, tfrdv_done_fn done, void* user,
                                            tfrdv_status* est) {
    if (!r || !done) return tfrdv__err(est, TFRDV_INVALID_ARGUMENT, "tfrdv_recv_async: NULL rendezvous or callback");
    if (tfrdv__check_key(r, key, "tfrdv_recv_async", est) != TFRDV_OK) return TFRDV_INVALID_ARGUMENT;
    if (r->mgr) return tfrdv__remote_recv(r, key, args, done, user, est);
    return tfrdv__local_recv(r, key, args, done, user, 1, est);
}
TFRDV_API tfrdv_code tfrdv_recv_async(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                      const tfrdv_args* args, tfrdv_done_fn done, void* user,
                                      tfrdv_status* st) {
    tfrdv_status est;
    int64_t step = 0;
    tfrdv_mgr* watch = r ? tfrdv__drain_watch(r, &step) : 0;
    tfrdv_code rc = tfrdv__recv_async(r, key, args, done, user, &est);
    tfrdv__drain_after(watch, step);
    if (rc == TFRDV_OK) return rc;
    if (st) tfrdv__status_copy(st, &est);
    return r ? tfrdv__log_status(&r->hooks, &est) : rc;
}

#ifndef TFRDV_NO_THREADS
typedef struct tfrdv__sync_recv {
    tfrdv__event ev;  /* completion; and the end of the user-cancel callback */
    tfrdv__mutex mu;  /* every field below */
    tfrdv_status st;
    tfrdv_value* value;
    int is_dead;
    int completed;
    int why;          /* why our timer manager was cancelled first: TFRDV__WHY_* */
    int why_at_done;  /* the reason in force when the receive completed */
    tfrdv_cancel_mgr* timer_cm; /* &tcm when there is a timeout, else NULL */
    tfrdv_cancel_mgr tcm;       /* cancelled on timeout or by the user's manager */
    tfrdv_cancel_mgr* user_cm;
    tfrdv_cancel_node user_node;
    int cb;           /* the user-cancel callback: 0 not run, 1 running, 2 finished */
    int abandoned;    /* tfrdv_recv is leaving: that callback must not cancel, only finish */
    tfrdv_call* call; /* the remote call it waits for (held busy), when its transport has wait */
} tfrdv__sync_recv;
enum { TFRDV__WHY_NONE = 0, TFRDV__WHY_TIMEOUT = 1, TFRDV__WHY_USER = 2 };
/* Signals happen under x->mu: tfrdv_recv frees x only after it saw the flag under x->mu. */
TFRDV__PRIVATE void tfrdv__sync_done(void* u, const tfrdv_status* st, const tfrdv_args* sa,
                                     const tfrdv_args* ra, tfrdv_value* v, int dead) {
    tfrdv__sync_recv* x = (tfrdv__sync_recv*)u;
    TFRDV__UNUSED(sa);
    TFRDV__UNUSED(ra);
    tfrdv__lock(&x->mu);
    tfrdv__status_copy(&x->st, st);
    x->value = v;
    x->is_dead = dead;
    x->why_at_done = x->why;
    x->completed = 1;
    tfrdv__event_signal(&x->ev);
    tfrdv__unlock(&x->mu);
}
/* the user's cancellation manager fired: cancel our timer manager (outside every lock) */
TFRDV__PRIVATE void tfrdv__sync_user_cancel(void* u) {
    tfrdv__sync_recv* x = (tfrdv__sync_recv*)u;
    tfrdv__lock(&x->mu);
    if (x->abandoned) {
        x->cb = 2;
        tfrdv__event_signal(&x->ev);
        tfrdv__unlock(&x->mu);
        return;
    }
    x->cb = 1;
    if (x->why == TFRDV__WHY_NONE) x->why = TFRDV__WHY_USER;
    tfrdv__unlock(&x->mu);
    tfrdv_cancel_start(x->timer_cm);
    tfrdv__lock(&x->mu);
    x->cb = 2;
    tfrdv__event_signal(&x->ev);
    tfrdv__unlock(&x->mu);
}
TFRDV__PRIVATE void tfrdv__sync_timeout(tfrdv__sync_recv* x) {
    tfrdv__lock(&x->mu);
    if (x->why == TFRDV__WHY_NONE) x->why = TFRDV__WHY_TIMEOUT;
    tfrdv__unlock(&x->mu);
    tfrdv_cancel_start(x->timer_cm); /* completes the receive now, or it already did */
}
TFRDV__PRIVATE void tfrdv__call_unbusy(tfrdv_call* call);
TFRDV__PRIVATE int tfrdv__call_wait(tfrdv_call* call, int64_t timeout_ns);
/* waits for the completion (lending the thread to the call's transport while it can use it); on
   timeout cancels the receive and waits for that completion */
TFRDV__PRIVATE void tfrdv__sync_wait(tfrdv__sync_recv* x, int64_t timeout_ns) {
    int64_t end = timeout_ns > 0 ? tfrdv__sat_add(tfrdv_now_ns(), timeout_ns) : 0;
    int fired = timeout_ns <= 0, timed = timeout_ns > 0, drive = x->call != 0;
    tfrdv__lock(&x->mu);
    while (!x->completed) {
        int64_t left = timed ? end - tfrdv_now_ns() : -1;
        tfrdv__unlock(&x->mu);
        if (drive && (!timed || (!fired && left > 0))) {
            drive = tfrdv__call_wait(x->call, left);
        } else if (fired) {
            tfrdv__event_wait(&x->ev, -1);
        } else if (left <= 0 || !tfrdv__event_wait(&x->ev, left)) {
            fired = 1;
            tfrdv__sync_timeout(x);
        }
        tfrdv__lock(&x->mu);
    }
    if (x->call) { /* completed: the call may be recycled now */
        tfrdv_call* c = x->call;
        x->call = 0;
        tfrdv__unlock(&x->mu);
        tfrdv__call_unbusy(c);
        tfrdv__lock(&x->mu);
    }
    /* the user's manager: never touch it again once we leave; its callback may be running */
    if (x->user_cm && x->cb == 0 && !tfrdv_cancel_try_deregister(x->user_cm, &x->user_node)) x->abandoned = 1;
    while (x->cb == 1 || (x->abandoned && x->cb != 2)) {
        tfrdv__unlock(&x->mu);
        tfrdv__event_wait(&x->ev, -1);
        tfrdv__lock(&x->mu);
    }
    tfrdv__unlock(&x->mu);
}
TFRDV_API tfrdv_code tfrdv_recv(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                const tfrdv_args* args, int64_t timeout_ns, tfrdv_value** value,
                                int* is_dead, tfrdv_status* st) {
    tfrdv__sync_recv x;
    tfrdv_args a = args ? *args : tfrdv__no_args;
    tfrdv_code rc;
    int64_t step = 0;
    tfrdv_mgr* watch;
    if (value) *value = 0;
    if (is_dead) *is_dead = 0;
    if (!r || !value) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_recv: NULL rendezvous or value pointer");
    if (tfrdv__check_key(r, key, "tfrdv_recv", st) != TFRDV_OK) return TFRDV_INVALID_ARGUMENT;
    if (!r->mgr) { /* a value already buffered: take it without building the waiting machinery */
        tfrdv__shard* s = tfrdv__shard_of(r, key->hash);
        size_t i;
        int found;
        tfrdv_args sa;
        int dead;
        int64_t t0;
        tfrdv__lock(&s->mu);
        i = tfrdv__slot_find(s, key->hash, key->full.ptr, key->full.len, &found);
        if (!tfrdv__atomic_load(&r->aborted) && found && s->slots[i].chan->kind == TFRDV__CHAN_SEND) {
            *value = tfrdv__take_send(r, s, i, &sa, &dead, &t0);
            tfrdv__unlock(&s->mu);
            if (is_dead) *is_dead = dead;
            return tfrdv__err(st, TFRDV_OK, "");
        }
        tfrdv__unlock(&s->mu);
    }
    memset(&x, 0, sizeof x);
    if (!tfrdv__event_init(&x.ev, r->hooks.sync)) return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_recv: event init failed");
    if (!tfrdv__mutex_init(&x.mu, r->hooks.sync)) {
        tfrdv__event_destroy(&x.ev);
        return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_recv: mutex init failed");
    }
    if (timeout_ns > 0) {
        /* our own cancellation manager removes the waiter on timeout (TensorFlow leaves it) */
        if (!tfrdv__cm_init(&x.tcm, &r->hooks)) {
            tfrdv__mutex_destroy(&x.mu);
            tfrdv__event_destroy(&x.ev);
            return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_recv: mutex or event init failed");
        }
        x.timer_cm = &x.tcm;
        if (a.cancel) {
            x.user_cm = a.cancel;
            if (!tfrdv_cancel_register(a.cancel, &x.user_node, tfrdv__sync_user_cancel, &x)) {
                x.user_cm = 0; /* already cancelled: nothing registered */
                x.why = TFRDV__WHY_USER;
                tfrdv_cancel_start(x.timer_cm);
            }
        }
        a.cancel = x.timer_cm;
    }
    watch = tfrdv__drain_watch(r, &step);
    rc = tfrdv__recv_async(r, key, &a, tfrdv__sync_done, &x, &x.st);
    if (rc == TFRDV_OK) {
        tfrdv__sync_wait(&x, timeout_ns);
        tfrdv__drain_after(watch, step);
    } else {
        tfrdv__drain_after(watch, step);
        x.why_at_done = TFRDV__WHY_NONE;
        x.completed = 1;
        tfrdv__sync_wait(&x, 0); /* only settles the user's manager */
    }
    if (x.timer_cm) tfrdv__cm_fini(x.timer_cm);
    tfrdv__mutex_destroy(&x.mu);
    tfrdv__event_destroy(&x.ev);
    /* decided by who cancelled, never by the message (which may be truncated) */
    if (x.st.code == TFRDV_CANCELLED && x.why_at_done == TFRDV__WHY_TIMEOUT)
        tfrdv__err(&x.st, TFRDV_DEADLINE_EXCEEDED, "Timed out waiting for notification (key %S)", &key->full);
    tfrdv__status_copy(st, &x.st);
    *value = x.value;
    if (is_dead) *is_dead = x.is_dead;
    return x.st.code;
}
#endif

/* >>batch  SendTensorsToRendezvous / RecvOutputsFromRendezvousAsync */
TFRDV_API tfrdv_code tfrdv_send_batch(tfrdv_rendezvous* r, size_t n, const tfrdv_parsed_key* keys,
                                      const tfrdv_args* args, tfrdv_value** values,
                                      const int* is_dead, size_t* sent, tfrdv_status* st) {
    size_t i;
    tfrdv_code rc = TFRDV_OK;
    tfrdv__frame f; /* a receive callback a send runs may destroy r: the rest then fail */
    if (sent) *sent = 0;
    if (!r || (n && (!keys || !values)))
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_send_batch: NULL rendezvous, keys or values");
    tfrdv__hold(r);
    tfrdv__frame_push(&f, r);
    for (i = 0; i < n && rc == TFRDV_OK; i++) {
        rc = tfrdv_send(r, &keys[i], args, values[i], is_dead ? is_dead[i] : 0, st);
        if (rc == TFRDV_OK && sent) *sent = i + 1;
    }
    tfrdv__frame_pop(&f);
    tfrdv__let_go(r);
    return rc;
}

typedef struct tfrdv__batch {
    tfrdv_allocator alloc;
    tfrdv__mutex mu;
    size_t n;
    size_t arrived; /* slots whose receive completed (decides when to fire) */
    size_t left;    /* slots still running their callback (decides when to free) */
    int finished;   /* done has run or is running (first error, or all arrived) */
    tfrdv_status st;
    tfrdv_value** out_values;
    int* out_dead;
    tfrdv_batch_done_fn done;
    void* user;
    /* then n x {index slot} and n x value pointers and n x dead flags */
} tfrdv__batch;
typedef struct tfrdv__batch_slot {
    tfrdv__batch* b;
    size_t i;
} tfrdv__batch_slot;
TFRDV__PRIVATE size_t tfrdv__batch_size(size_t n) {
    return sizeof(tfrdv__batch) + n * (sizeof(tfrdv__batch_slot) + sizeof(tfrdv_value*) + sizeof(int));
}
TFRDV__PRIVATE tfrdv__batch_slot* tfrdv__batch_slots(tfrdv__batch* b) { return (tfrdv__batch_slot*)(void*)(b + 1); }
TFRDV__PRIVATE tfrdv_value** tfrdv__batch_vals(tfrdv__batch* b) { return (tfrdv_value**)(void*)(tfrdv__batch_slots(b) + b->n); }
TFRDV__PRIVATE int* tfrdv__batch_dead(tfrdv__batch* b) { return (int*)(void*)(tfrdv__batch_vals(b) + b->n); }

TFRDV__PRIVATE void tfrdv__batch_one(void* u, const tfrdv_status* st, const tfrdv_args* sa,
                                     const tfrdv_args* ra, tfrdv_value* v, int dead) {
    tfrdv__batch_slot* slot = (tfrdv__batch_slot*)u;
    tfrdv__batch* b = slot->b;
    int fire = 0, last;
    size_t i;
    TFRDV__UNUSED(sa);
    TFRDV__UNUSED(ra);
    tfrdv__lock(&b->mu);
    if (!b->finished && st->code != TFRDV_OK) {
        tfrdv__status_copy(&b->st, st);
        b->finished = fire = 1;
    } else if (!b->finished) {
        tfrdv__batch_vals(b)[slot->i] = v;
        tfrdv__batch_dead(b)[slot->i] = dead;
        v = 0;
        if (++b->arrived == b->n) b->finished = fire = 1;
    }
    tfrdv__unlock(&b->mu);
    tfrdv_value_release(v); /* arrived after the batch failed: nobody takes it */
    if (fire) {
        /* nobody writes the arrays once finished is set */
        for (i = 0; i < b->n; i++) {
            tfrdv_value** slotv = &tfrdv__batch_vals(b)[i];
            if (b->st.code != TFRDV_OK) {
                tfrdv_value_release(*slotv);
                *slotv = 0;
            }
            b->out_values[i] = *slotv;
            if (b->out_dead) b->out_dead[i] = b->st.code == TFRDV_OK ? tfrdv__batch_dead(b)[i] : 0;
        }
        b->done(b->user, &b->st, b->n, b->out_values, b->out_dead);
    }
    tfrdv__lock(&b->mu);
    last = --b->left == 0;
    tfrdv__unlock(&b->mu);
    if (last) {
        tfrdv_allocator a = b->alloc;
        tfrdv__mutex_destroy(&b->mu);
        tfrdv__free(&a, b, tfrdv__batch_size(b->n));
    }
}
TFRDV_API tfrdv_code tfrdv_recv_batch_async(tfrdv_rendezvous* r, size_t n,
                                            const tfrdv_parsed_key* keys, const tfrdv_args* args,
                                            tfrdv_value** values, int* is_dead,
                                            tfrdv_batch_done_fn done, void* user) {
    tfrdv__batch* b;
    size_t i;
    tfrdv__frame f;
    if (!r || !done || (n && (!keys || !values))) return TFRDV_INVALID_ARGUMENT;
    for (i = 0; i < n; i++)
        if (tfrdv__check_key(r, &keys[i], "tfrdv_recv_batch_async", 0) != TFRDV_OK) return TFRDV_INVALID_ARGUMENT;
    if (n == 0) {
        done(user, &tfrdv__ok_status, 0, values, is_dead);
        return TFRDV_OK;
    }
    b = (tfrdv__batch*)tfrdv__zalloc(&r->hooks.allocator, tfrdv__batch_size(n));
    if (!b) return TFRDV_RESOURCE_EXHAUSTED;
    b->alloc = r->hooks.allocator;
    if (!tfrdv__mutex_init(&b->mu, r->hooks.sync)) {
        tfrdv__free(&b->alloc, b, tfrdv__batch_size(n));
        return TFRDV_RESOURCE_EXHAUSTED;
    }
    b->n = b->left = n;
    b->out_values = values;
    b->out_dead = is_dead;
    b->done = done;
    b->user = user;
    for (i = 0; i < n; i++) {
        tfrdv__batch_slots(b)[i].b = b;
        tfrdv__batch_slots(b)[i].i = i;
    }
    tfrdv__hold(r); /* done, run at the first error, may destroy r: the rest then fail with it */
    tfrdv__frame_push(&f, r);
    for (i = 0; i < n; i++) {
        tfrdv_status es;
        if (tfrdv_recv_async(r, &keys[i], args, tfrdv__batch_one, &tfrdv__batch_slots(b)[i], &es) != TFRDV_OK) {
            /* not accepted (out of memory, or a key this rendezvous refuses): fail the rest with
               the refusal, which names the key */
            size_t j;
            for (j = i; j < n; j++) tfrdv__batch_one(&tfrdv__batch_slots(b)[j], &es, 0, 0, 0, 0);
            break;
        }
    }
    tfrdv__frame_pop(&f);
    tfrdv__let_go(r);
    return TFRDV_OK;
}

/* >>pending  snapshot of pending keys, reported outside every lock */
typedef struct tfrdv__snap_ent {
    int64_t step;
    size_t off, len, count;
    int kind;
} tfrdv__snap_ent;
typedef struct tfrdv__snap {
    tfrdv_allocator a; /* a copy: fn may destroy the object reported on */
    tfrdv__snap_ent* ents;
    size_t n, cap;
    char* bytes;
    size_t blen, bcap;
    int oom;
} tfrdv__snap;
/* called under a lock: may allocate (allocator hooks must not call into tfrdv) */
/* the key is pre[0..plen) followed by key[0..len) */
TFRDV__PRIVATE void tfrdv__snap_add(tfrdv__snap* s, int64_t step, int kind, const char* pre, size_t plen,
                                    const char* key, size_t len, size_t count) {
    if (s->oom) return;
    len += plen;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        tfrdv__snap_ent* e = (tfrdv__snap_ent*)tfrdv__alloc(&s->a, nc * sizeof *e);
        if (!e) { s->oom = 1; return; }
        if (s->n) memcpy(e, s->ents, s->n * sizeof *e);
        tfrdv__free(&s->a, s->ents, s->cap * sizeof *e);
        s->ents = e;
        s->cap = nc;
    }
    if (s->blen + len > s->bcap) {
        size_t nc = (s->bcap ? s->bcap * 2 : 1024) + len;
        char* b = (char*)tfrdv__alloc(&s->a, nc);
        if (!b) { s->oom = 1; return; }
        if (s->blen) memcpy(b, s->bytes, s->blen);
        tfrdv__free(&s->a, s->bytes, s->bcap);
        s->bytes = b;
        s->bcap = nc;
    }
    memcpy(s->bytes + s->blen, pre, plen);
    memcpy(s->bytes + s->blen + plen, key, len - plen);
    s->ents[s->n].step = step;
    s->ents[s->n].off = s->blen;
    s->ents[s->n].len = len;
    s->ents[s->n].count = count;
    s->ents[s->n].kind = kind;
    s->n++;
    s->blen += len;
}
/* outside every lock; touches only the snapshot, so fn may re-enter or destroy the object */
TFRDV__PRIVATE size_t tfrdv__snap_report(tfrdv__snap* s, tfrdv_pending_fn fn, void* user) {
    size_t i, n = s->n;
    for (i = 0; i < n && fn; i++)
        fn(user, s->ents[i].step, (tfrdv_pending_kind)s->ents[i].kind, s->bytes + s->ents[i].off, s->ents[i].len, s->ents[i].count);
    tfrdv__free(&s->a, s->ents, s->cap * sizeof *s->ents);
    tfrdv__free(&s->a, s->bytes, s->bcap);
    return n;
}
TFRDV__PRIVATE void tfrdv__remote_snap(tfrdv_rendezvous* r, tfrdv__snap* s);
TFRDV__PRIVATE void tfrdv__rdv_snap(tfrdv_rendezvous* r, tfrdv__snap* snap) {
    int i;
    for (i = 0; i < r->nshards; i++) {
        tfrdv__shard* s = &r->shards[i];
        size_t b;
        tfrdv__lock(&s->mu);
        for (b = 0; b < s->nslots; b++) {
            tfrdv__chan* c = s->slots[b].chan;
            size_t count = 0;
            void* it;
            if (!c) continue;
            if ((it = c->tail) != 0) do { /* the ring: both item kinds start with `next` */
                count++;
                it = *(void**)it;
            } while (it != c->tail);
            tfrdv__snap_add(snap, r->step_id, c->kind == TFRDV__CHAN_SEND ? TFRDV_PENDING_SEND : TFRDV_PENDING_RECV,
                            c->pfx ? TFRDV__PFX_BYTES(c->pfx) : "", c->pfx ? c->pfx->len : 0,
                            TFRDV__CHAN_KEY(c), c->key_len, count);
        }
        tfrdv__unlock(&s->mu);
    }
    if (r->mgr) tfrdv__remote_snap(r, snap);
}
TFRDV_API size_t tfrdv_pending(tfrdv_rendezvous* r, tfrdv_pending_fn fn, void* user) {
    tfrdv__snap snap;
    if (!r) return 0;
    memset(&snap, 0, sizeof snap);
    snap.a = r->hooks.allocator;
    tfrdv__rdv_snap(r, &snap);
    return tfrdv__snap_report(&snap, fn, user);
}

/* >>idset  a bounded set of recent 64-bit ids in insertion order: request-id dedup (TensorFlow's
   RecentRequestIds) and cleaned-step tombstones (with a time to live) */
typedef struct tfrdv__idslot { /* one cache line's share: what a lookup touches, together */
    int64_t id, time;
    int32_t next;  /* the bucket's chain (-1 ends it) */
    int32_t live;  /* removed entries keep their place in the insertion order */
} tfrdv__idslot;
typedef struct tfrdv__idset {
    tfrdv__idslot* slots;
    int32_t* heads;
    size_t cap, nb, tail, used, live_count, bytes;
    uint64_t key; /* hash key (the manager's hkey) */
} tfrdv__idset;
TFRDV__PRIVATE int tfrdv__idset_init(tfrdv__idset* s, const tfrdv_allocator* a, size_t cap) {
    size_t i;
    unsigned char* m;
    memset(s, 0, sizeof *s);
    s->cap = cap;
    s->nb = 16;
    while (s->nb < cap) s->nb <<= 1;
    s->bytes = cap * sizeof(tfrdv__idslot) + s->nb * sizeof(int32_t);
    m = (unsigned char*)tfrdv__alloc(a, s->bytes);
    if (!m) return 0;
    s->slots = (tfrdv__idslot*)(void*)m;
    s->heads = (int32_t*)(void*)(s->slots + cap);
    for (i = 0; i < s->nb; i++) s->heads[i] = -1;
    memset(s->slots, 0, cap * sizeof(tfrdv__idslot));
    return 1;
}
TFRDV__PRIVATE void tfrdv__idset_free(tfrdv__idset* s, const tfrdv_allocator* a) {
    tfrdv__free(a, s->slots, s->bytes);
    s->slots = 0;
}
TFRDV__PRIVATE size_t tfrdv__idset_bucket(const tfrdv__idset* s, int64_t id) {
    return (size_t)tfrdv__mix64((uint64_t)id ^ s->key) & (s->nb - 1);
}
/* slot of id, or -1 */
TFRDV__PRIVATE int32_t tfrdv__idset_find(const tfrdv__idset* s, int64_t id) {
    int32_t i;
    if (!s->slots) return -1;
    for (i = s->heads[tfrdv__idset_bucket(s, id)]; i >= 0; i = s->slots[i].next)
        if (s->slots[i].id == id) return i;
    return -1;
}
TFRDV__PRIVATE void tfrdv__idset_unlink(tfrdv__idset* s, int32_t slot) {
    int32_t* pp = &s->heads[tfrdv__idset_bucket(s, s->slots[slot].id)];
    while (*pp != slot) pp = &s->slots[*pp].next;
    *pp = s->slots[slot].next;
    s->slots[slot].live = 0;
    s->live_count--;
}
TFRDV__PRIVATE void tfrdv__idset_pop_oldest(tfrdv__idset* s) {
    if (s->slots[s->tail].live) tfrdv__idset_unlink(s, (int32_t)s->tail);
    s->tail = s->tail + 1 == s->cap ? 0 : s->tail + 1;
    s->used--;
}
TFRDV__PRIVATE void tfrdv__idset_insert(tfrdv__idset* s, int64_t id, int64_t now) {
    size_t slot, b;
    tfrdv__idslot* e;
    if (!s->slots || s->cap == 0) return;
    if (s->used == s->cap) tfrdv__idset_pop_oldest(s);
    slot = s->tail + s->used;
    if (slot >= s->cap) slot -= s->cap;
    b = tfrdv__idset_bucket(s, id);
    e = &s->slots[slot];
    e->id = id;
    e->time = now;
    e->live = 1;
    e->next = s->heads[b];
    s->heads[b] = (int32_t)slot;
    s->used++;
    s->live_count++;
}
TFRDV__PRIVATE void tfrdv__idset_remove(tfrdv__idset* s, int64_t id) {
    int32_t slot = tfrdv__idset_find(s, id);
    if (slot >= 0) tfrdv__idset_unlink(s, slot);
}
/* drop entries older than ttl; returns when the oldest live one expires (INT64_MAX: none) */
TFRDV__PRIVATE int64_t tfrdv__idset_expire(tfrdv__idset* s, int64_t now, int64_t ttl) {
    while (s->used && (!s->slots[s->tail].live || tfrdv__sat_add(s->slots[s->tail].time, ttl) <= now)) tfrdv__idset_pop_oldest(s);
    return s->used ? tfrdv__sat_add(s->slots[s->tail].time, ttl) : INT64_MAX;
}

/* >>mgr */
enum { TFRDV__CALL_IDLE, TFRDV__CALL_STARTED, TFRDV__CALL_BACKOFF, TFRDV__CALL_ORPHANED, TFRDV__CALL_DONE };
struct tfrdv_call {
    tfrdv_call* next; /* r->calls while linked; the free list when idle */
    tfrdv_call* prev;
    tfrdv_call* action; /* a private list of work collected under a lock */
    tfrdv_call* restart_next;
    tfrdv_mgr* mgr;
    tfrdv_rendezvous* r; /* one reference while the call is in use */
    /* state: IDLE -> STARTED (start) -> BACKOFF (UNAVAILABLE, retry later) -> STARTED ...
       STARTED -> DONE (provider finish) | ORPHANED (user completed by cancel/abort/deadline;
       provider still owes its finish) -> DONE (that finish). BACKOFF -> DONE (cancel/abort/
       deadline). All transitions under r->mu. Recycled when DONE and busy == 0. */
    int state;
    int busy;           /* start_call / cancel_call / completion in progress */
    int starting;       /* start_call is running: a cancel is issued after it returns */
    int cancel_pending;
    int linked;
    int attempt;
    volatile long route; /* the router's choice for this attempt (tfrdv_router_create); atomic:
                            a waiting thread reads it while a retry starts */
    int cm_registered; /* cnode is registered with recv_args.cancel */
    int cm_orphan;     /* its cancellation callback was running when we took over: it unbusies */
    int64_t step_id, request_id, deadline, retry_at;
    int64_t t0;        /* when the receive was posted (only when traced) */
    char* buf;
    size_t buf_cap;
    tfrdv_str key, worker;
    void* endpoint;
    tfrdv_args recv_args;
    tfrdv_done_fn done;
    void* user;
    tfrdv_cancel_node cnode;
    tfrdv_status result;
    union {
        void* p;
        long double d; /* max alignment of fundamental types (16 on common 64-bit targets) */
        int64_t i;
        unsigned char bytes[TFRDV_CALL_SCRATCH_SIZE];
    } scratch;
};

typedef struct tfrdv__centry { /* response cache entry */
    struct tfrdv__centry* next;
    int64_t request_id, step_id;
    int finished, doomed, is_dead;
    tfrdv_status st;
    tfrdv_args sa;
    tfrdv_value* value;
    struct tfrdv__serve* waiters;
} tfrdv__centry;

/* Where a request being served is, and so which lock guards it and who completes it:
     NEW      being routed by tfrdv_mgr_serve (nobody else can see it)
     WAITER   queued on a cache entry another request computes (mgr->mu; e->waiters)
     DEFERRED waiting for its step's initialisation (r->mu; r->deferred)
     LOCAL    a receive in the step's table (its canceller is the table's cancellation path)
     DONE     being answered
   In WAITER and DEFERRED, op->cnode is registered with op->cm (when given). Whoever moves the
   request out of those states deregisters it without waiting, under the state's lock (which the
   cancellation callback needs too, so the manager is alive); if the callback is already running
   it finds the request moved on and only drops the reference we leave it (cm_orphan). */
enum { TFRDV__SERVE_NEW, TFRDV__SERVE_WAITER, TFRDV__SERVE_DEFERRED, TFRDV__SERVE_LOCAL, TFRDV__SERVE_DONE };
typedef struct tfrdv__serve { /* one RecvTensor being served; the key's bytes follow it */
    struct tfrdv__serve* next;
    struct tfrdv__serve* prev; /* WAITER and DEFERRED lists link back: a withdrawn request leaves in O(1) */
    tfrdv_mgr* mgr;
    tfrdv_rendezvous* r;  /* one reference while deferred or waiting in the table */
    tfrdv__centry* entry; /* the cache entry this request computes */
    tfrdv__centry* wait_entry; /* WAITER: the entry it waits on */
    int64_t step_id, request_id, deadline, t0;
    tfrdv_serve_done_fn done;
    void* user;
    tfrdv_cancel_mgr* cm;
    tfrdv_cancel_node cnode;
    volatile long refs; /* 1 for the answer, +1 for an orphaned cancellation callback */
    unsigned flags;     /* TFRDV_SERVE_CONFIRMS */
    int state;
    int cm_registered, cm_orphan;
    char* key;
    size_t key_cap;
    tfrdv_parsed_key parsed;
} tfrdv__serve;
/* the WAITER and DEFERRED lists (newest first; the holder of the list's lock only) */
TFRDV__PRIVATE void tfrdv__serve_push(tfrdv__serve** head, tfrdv__serve* op) {
    op->prev = 0;
    op->next = *head;
    if (*head) (*head)->prev = op;
    *head = op;
}
TFRDV__PRIVATE void tfrdv__serve_unlink(tfrdv__serve** head, tfrdv__serve* op) {
    if (op->prev) op->prev->next = op->next;
    else *head = op->next;
    if (op->next) op->next->prev = op->prev;
}

#define TFRDV__CACHE_BUCKETS 256
typedef struct tfrdv__held {
    struct tfrdv__held* next;
    int64_t request_id, step_id;
    uint64_t gen; /* the step's creation number: a step re-created with the same id is another */
} tfrdv__held;
typedef struct tfrdv__drain {
    struct tfrdv__drain* next;
    int64_t step_id, deadline, since;
    tfrdv_drained_fn done;
    void* user;
    tfrdv_status st; /* the outcome, filled before done runs */
} tfrdv__drain;
struct tfrdv_mgr {
    tfrdv_mgr_config cfg;
    tfrdv_hooks hooks;
    char* worker;
    size_t worker_len;
    tfrdv_device_name worker_dn;
    uint64_t incarnation;
    volatile long refs;
    volatile long double_finishes;
    tfrdv__mutex mu;
    int destroyed;
    tfrdv_rendezvous** steps;
    size_t nb, nsteps;
    tfrdv__idset recent, tombs;
    tfrdv_call* free_calls;
    size_t nfree_calls, ncalls;
    tfrdv__serve* free_serves;
    size_t nfree_serves, free_max;
    volatile long ndeferred;
    uint64_t step_gen;
    tfrdv__centry* cache[TFRDV__CACHE_BUCKETS];
    size_t ncache;
    uint64_t rid_counter, rid_key;
    uint64_t hkey; /* this manager's secret for hashing ids a peer chooses (steps, request ids) */
    tfrdv_mgr_stats stats;
    struct tfrdv__drain* drains; /* pending tfrdv_mgr_cleanup_when_drained */
    volatile long ndrains;
    struct tfrdv__held** held;   /* request id -> step of values awaiting confirmation */
    size_t held_nb, nheld;
};

TFRDV_API tfrdv_mgr_config tfrdv_mgr_config_init(void) {
    tfrdv_mgr_config c;
    memset(&c, 0, sizeof c);
    return c;
}
TFRDV_API const char* tfrdv_mgr_worker_name(const tfrdv_mgr* mgr) { return mgr ? mgr->worker : ""; }
TFRDV_API uint64_t tfrdv_mgr_incarnation(const tfrdv_mgr* mgr) { return mgr ? mgr->incarnation : 0; }
TFRDV_API tfrdv_code tfrdv_mgr_peer_incarnation(tfrdv_mgr* mgr, const char* worker, int64_t timeout_ns,
                                                uint64_t* incarnation, tfrdv_status* st) {
    tfrdv_device_name dn;
    tfrdv_str w;
    if (incarnation) *incarnation = 0;
    if (!mgr || !worker || !incarnation)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_peer_incarnation: NULL manager, worker or incarnation");
    w.ptr = worker;
    w.len = strlen(worker);
    if (tfrdv_device_parse(w.ptr, w.len, &dn, 0) != TFRDV_OK || !dn.has_job || !dn.has_replica || !dn.has_task ||
        dn.has_type)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_peer_incarnation: '%S' is not a worker name (/job:J/replica:R/task:T)", &w);
    if (strcmp(worker, mgr->worker) == 0) {
        *incarnation = mgr->incarnation;
        return tfrdv__err(st, TFRDV_OK, "");
    }
    if (!mgr->cfg.transport.peer_incarnation)
        return tfrdv__err(st, TFRDV_UNIMPLEMENTED, "tfrdv_mgr_peer_incarnation: the manager's transport cannot tell %S's incarnation", &w);
    return mgr->cfg.transport.peer_incarnation(mgr->cfg.transport.user, mgr, w, timeout_ns, incarnation, st);
}

/* a bijection of a counter: unique per manager, random-looking, never 0 (needs mgr->mu) */
TFRDV__PRIVATE int64_t tfrdv__rid_locked(tfrdv_mgr* mgr) {
    uint64_t v;
    do v = tfrdv__mix64(++mgr->rid_counter ^ mgr->rid_key) ^ mgr->rid_key; while (v == 0);
    return (int64_t)v;
}
TFRDV_API int64_t tfrdv_mgr_new_request_id(tfrdv_mgr* mgr) {
    int64_t id;
    if (!mgr) return 0;
    tfrdv__lock(&mgr->mu);
    id = tfrdv__rid_locked(mgr);
    tfrdv__unlock(&mgr->mu);
    return id;
}

TFRDV_API tfrdv_code tfrdv_mgr_create(const tfrdv_mgr_config* cfg, tfrdv_mgr** out,
                                      tfrdv_status* st) {
    tfrdv_mgr* mgr;
    tfrdv_mgr_config c;
    size_t wl;
    if (!out) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_create: NULL out");
    *out = 0;
    if (!cfg || !cfg->worker_name)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_create: worker_name is required (e.g. /job:worker/replica:0/task:0)");
    c = *cfg;
    if (!tfrdv__allocator_ok(&c.hooks.allocator) || !tfrdv__sync_ok(c.hooks.sync))
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_create: incomplete allocator or sync hooks (give all functions or none)");
    if (!c.transport.start_call != !c.transport.cancel_call)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_create: transport needs both start_call and cancel_call");
    /* TFRDV_OFF where the default is already "none" */
    if (c.call_timeout_ns == TFRDV_OFF) c.call_timeout_ns = 0;
    if (c.call_max_retries == TFRDV_OFF) c.call_max_retries = 0;
    if (c.step_idle_timeout_ns == TFRDV_OFF) c.step_idle_timeout_ns = 0;
    if (c.num_shards < 0 || c.tombstone_max < 0 || c.response_cache_max < 0 || c.call_max_retries < 0 ||
        c.call_timeout_ns < 0 || c.retry_backoff_ns < 0 || c.retry_backoff_max_ns < 0 || c.tombstone_ttl_ns < 0 ||
        c.max_deferred < 0 || c.step_idle_timeout_ns < 0)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_create: negative size, count or time in the config");
    c.num_shards = TFRDV__DEF(c.num_shards, 1);
    c.deferred_timeout_ns = TFRDV__DEF(c.deferred_timeout_ns, (int64_t)60 * 1000000000);
    c.tombstone_max = TFRDV__DEF(c.tombstone_max, 1024);
    c.tombstone_ttl_ns = TFRDV__DEF(c.tombstone_ttl_ns, (int64_t)60 * 1000000000);
    c.request_id_window = c.request_id_window < 0 ? 0 : TFRDV__DEF(c.request_id_window, 16384);
    c.response_cache_max = TFRDV__DEF(c.response_cache_max, 4096);
    c.retry_backoff_ns = TFRDV__DEF(c.retry_backoff_ns, (int64_t)1000000);
    c.retry_backoff_max_ns = TFRDV__DEF(c.retry_backoff_max_ns, (int64_t)10 * 1000000000);
    c.call_freelist_max = c.call_freelist_max < 0 ? 0 : TFRDV__DEF(c.call_freelist_max, 1000);
    c.max_key_len = TFRDV__DEF(c.max_key_len, (size_t)4096);
    c.max_deferred = TFRDV__DEF(c.max_deferred, 65536);
    mgr = (tfrdv_mgr*)tfrdv__zalloc(&c.hooks.allocator, sizeof *mgr);
    if (!mgr) return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_mgr_create: out of memory");
    mgr->cfg = c;
    mgr->hooks = c.hooks;
    mgr->refs = 1;
    mgr->free_max = c.free_max < 0 ? 0 : (size_t)TFRDV__DEF(c.free_max, 256);
    wl = strlen(c.worker_name);
    mgr->worker = (char*)tfrdv__alloc(&c.hooks.allocator, wl + 1);
    mgr->nb = 16;
    mgr->steps = (tfrdv_rendezvous**)tfrdv__zalloc(&c.hooks.allocator, mgr->nb * sizeof *mgr->steps);
    if (!mgr->worker || !mgr->steps || !tfrdv__idset_init(&mgr->recent, &c.hooks.allocator, (size_t)c.request_id_window) ||
        !tfrdv__idset_init(&mgr->tombs, &c.hooks.allocator, (size_t)c.tombstone_max) || !tfrdv__mutex_init(&mgr->mu, c.hooks.sync)) {
        tfrdv__idset_free(&mgr->recent, &c.hooks.allocator);
        tfrdv__idset_free(&mgr->tombs, &c.hooks.allocator);
        tfrdv__free(&c.hooks.allocator, mgr->steps, mgr->nb * sizeof *mgr->steps);
        tfrdv__free(&c.hooks.allocator, mgr->worker, wl + 1);
        tfrdv__free(&c.hooks.allocator, mgr, sizeof *mgr);
        return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_mgr_create: out of memory");
    }
    memcpy(mgr->worker, c.worker_name, wl + 1);
    mgr->worker_len = wl;
    mgr->cfg.worker_name = mgr->worker;
    if (tfrdv_device_parse(mgr->worker, wl, &mgr->worker_dn, st) != TFRDV_OK || !mgr->worker_dn.has_job ||
        !mgr->worker_dn.has_replica || !mgr->worker_dn.has_task || mgr->worker_dn.has_type) {
        mgr->cfg.transport.destroy = 0; /* not ours yet */
        tfrdv__mgr_unref(mgr);
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_create: worker_name '%s' must be /job:J/replica:R/task:T", c.worker_name);
    }
    mgr->rid_key = tfrdv__mix64((uint64_t)tfrdv__now(&c.hooks.clock) ^ (uint64_t)(size_t)mgr ^ 0x5bd1e995u);
    /* step and request ids come from peers: hashed with a key they cannot know, so no chosen set
       of ids piles into one bucket (a plain mix is invertible) */
    mgr->hkey = tfrdv__mix64(mgr->rid_key ^ (uint64_t)(size_t)&wl);
    mgr->recent.key = mgr->tombs.key = mgr->hkey;
    mgr->incarnation = c.incarnation;
    while (mgr->incarnation == 0) mgr->incarnation = (uint64_t)tfrdv__rid_locked(mgr);
    if (c.transport.ref) c.transport.ref(c.transport.user); /* ours from here: destroy drops it */
    if (c.transport.bind) c.transport.bind(c.transport.user, mgr, 1);
    *out = mgr;
    return TFRDV_OK;
}

TFRDV__PRIVATE void tfrdv__mgr_ref(tfrdv_mgr* mgr) { tfrdv__atomic_add(&mgr->refs, 1); }
TFRDV__PRIVATE void tfrdv__centry_free(tfrdv_mgr* mgr, tfrdv__centry* e) {
    tfrdv_value_release(e->value);
    tfrdv__free(&mgr->hooks.allocator, e, sizeof *e);
}
TFRDV__PRIVATE void tfrdv__mgr_unref(tfrdv_mgr* mgr) {
    tfrdv_allocator a;
    size_t i;
    if (tfrdv__atomic_add(&mgr->refs, -1) != 0) return;
    a = mgr->hooks.allocator;
    while (mgr->free_calls) {
        tfrdv_call* c = mgr->free_calls;
        mgr->free_calls = c->next;
        tfrdv__free(&a, c->buf, c->buf_cap);
        tfrdv__free(&a, c, sizeof *c);
    }
    while (mgr->free_serves) {
        tfrdv__serve* s = mgr->free_serves;
        mgr->free_serves = s->next;
        tfrdv__free(&a, s, sizeof *s + s->key_cap);
    }
    for (i = 0; i < mgr->held_nb; i++) { /* values a transport never confirmed */
        while (mgr->held[i]) {
            tfrdv__held* h = mgr->held[i];
            mgr->held[i] = h->next;
            tfrdv__free(&a, h, sizeof *h);
        }
    }
    tfrdv__free(&a, mgr->held, mgr->held_nb * sizeof *mgr->held);
    for (i = 0; i < TFRDV__CACHE_BUCKETS; i++) {
        while (mgr->cache[i]) {
            tfrdv__centry* e = mgr->cache[i];
            mgr->cache[i] = e->next;
            tfrdv__centry_free(mgr, e);
        }
    }
    if (mgr->cfg.transport.destroy) mgr->cfg.transport.destroy(mgr->cfg.transport.user);
    tfrdv__idset_free(&mgr->recent, &a);
    tfrdv__idset_free(&mgr->tombs, &a);
    tfrdv__free(&a, mgr->steps, mgr->nb * sizeof *mgr->steps);
    tfrdv__free(&a, mgr->worker, mgr->worker_len + 1);
    tfrdv__mutex_destroy(&mgr->mu);
    tfrdv__free(&a, mgr, sizeof *mgr);
}

TFRDV__PRIVATE size_t tfrdv__cache_bucket(const tfrdv_mgr* mgr, int64_t request_id) {
    return (size_t)(tfrdv__mix64((uint64_t)request_id ^ mgr->hkey) % TFRDV__CACHE_BUCKETS);
}
TFRDV__PRIVATE size_t tfrdv__step_bucket(const tfrdv_mgr* mgr, int64_t step) {
    return (size_t)(tfrdv__mix64((uint64_t)step ^ mgr->hkey) & (mgr->nb - 1));
}
/* find (and with create, make) the step's rendezvous; returns a new reference. mgr->mu held. */
TFRDV__PRIVATE tfrdv_code tfrdv__find_locked(tfrdv_mgr* mgr, int64_t step, tfrdv_rendezvous** out,
                                             tfrdv_status* st) {
    tfrdv_rendezvous* r;
    for (r = mgr->steps[tfrdv__step_bucket(mgr, step)]; r; r = r->mgr_next)
        if (r->step_id == step) break;
    if (!r) {
        size_t b;
        if (tfrdv__rdv_new(&mgr->hooks, mgr->cfg.num_shards, 0, mgr->cfg.free_max, mgr->cfg.max_key_len, &r, st) != TFRDV_OK)
            return st ? st->code : TFRDV_RESOURCE_EXHAUSTED;
        r->mgr = mgr;
        r->step_id = step;
        r->gen = ++mgr->step_gen;
        tfrdv__mgr_ref(mgr);
        if (mgr->nsteps >= mgr->nb) { /* grow the step table */
            size_t nnb = mgr->nb * 2, i;
            tfrdv_rendezvous** nt = (tfrdv_rendezvous**)tfrdv__zalloc(&mgr->hooks.allocator, nnb * sizeof *nt);
            if (nt) {
                for (i = 0; i < mgr->nb; i++) {
                    tfrdv_rendezvous* x = mgr->steps[i];
                    while (x) {
                        tfrdv_rendezvous* nx = x->mgr_next;
                        size_t nbk = (size_t)(tfrdv__mix64((uint64_t)x->step_id ^ mgr->hkey) & (nnb - 1));
                        x->mgr_next = nt[nbk];
                        nt[nbk] = x;
                        x = nx;
                    }
                }
                tfrdv__free(&mgr->hooks.allocator, mgr->steps, mgr->nb * sizeof *nt);
                mgr->steps = nt;
                mgr->nb = nnb;
            }
        }
        b = tfrdv__step_bucket(mgr, step);
        r->mgr_next = mgr->steps[b];
        mgr->steps[b] = r; /* the table's reference is the initial one */
        mgr->nsteps++;
        mgr->stats.steps_created++;
        tfrdv__idset_remove(&mgr->tombs, step);
    }
    r->touches++; /* every use of a step starts with a find: the idle-step policy's sign of life */
    tfrdv_ref(r);
    *out = r;
    return TFRDV_OK;
}
TFRDV_API tfrdv_code tfrdv_mgr_find(tfrdv_mgr* mgr, int64_t step_id, tfrdv_rendezvous** out,
                                    tfrdv_status* st) {
    tfrdv_code rc;
    if (out) *out = 0;
    if (!mgr || !out) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_find: NULL manager or out");
    tfrdv__lock(&mgr->mu);
    if (mgr->destroyed) rc = tfrdv__err(st, TFRDV_FAILED_PRECONDITION, "tfrdv_mgr_find: the manager is shut down");
    else rc = tfrdv__find_locked(mgr, step_id, out, st);
    tfrdv__unlock(&mgr->mu);
    return rc;
}

/* unlink a step from the table (mgr->mu held); returns the table's reference or NULL */
TFRDV__PRIVATE tfrdv_rendezvous* tfrdv__unlink_step(tfrdv_mgr* mgr, int64_t step) {
    tfrdv_rendezvous** pp = &mgr->steps[tfrdv__step_bucket(mgr, step)];
    for (; *pp; pp = &(*pp)->mgr_next) {
        tfrdv_rendezvous* r = *pp;
        if (r->step_id == step) {
            *pp = r->mgr_next;
            r->mgr_next = 0;
            mgr->nsteps--;
            return r;
        }
    }
    return 0;
}
/* forget cached responses of a step (mgr->mu held); returns entries to free outside the lock */
TFRDV__PRIVATE tfrdv__centry* tfrdv__cache_drop_step(tfrdv_mgr* mgr, int64_t step, int all) {
    tfrdv__centry* out = 0;
    size_t i;
    for (i = 0; i < TFRDV__CACHE_BUCKETS; i++) {
        tfrdv__centry** pp = &mgr->cache[i];
        while (*pp) {
            tfrdv__centry* e = *pp;
            if (all || e->step_id == step) {
                if (e->finished) {
                    *pp = e->next;
                    e->next = out;
                    out = e;
                    mgr->ncache--;
                    continue;
                }
                e->doomed = 1; /* dropped when it finishes */
            }
            pp = &e->next;
        }
    }
    return out;
}
/* mgr->mu held: forget the step (r: its unlinked table entry, or NULL), tombstone the id and
   collect its cached responses (returned, to free outside the lock). Allocates nothing. */
TFRDV__PRIVATE tfrdv__centry* tfrdv__forget_locked(tfrdv_mgr* mgr, int64_t step, int64_t now) {
    tfrdv__idset_remove(&mgr->tombs, step);
    tfrdv__idset_insert(&mgr->tombs, step, now);
    mgr->stats.steps_cleaned++;
    return mgr->ncache ? tfrdv__cache_drop_step(mgr, step, 0) : 0;
}
TFRDV__PRIVATE void tfrdv__drain_cleaned(tfrdv_mgr* mgr, int64_t step_id, const char* why);
/* outside every lock: free the dropped cache entries, abort and release the step; its pending
   drains end ABORTED */
TFRDV__PRIVATE void tfrdv__forget_finish(tfrdv_mgr* mgr, tfrdv_rendezvous* r, int64_t step, tfrdv__centry* dropped,
                                         const char* why) {
    tfrdv_status msg;
    while (dropped) {
        tfrdv__centry* e = dropped;
        dropped = e->next;
        tfrdv__centry_free(mgr, e);
    }
    if (r) {
        tfrdv__err(&msg, TFRDV_ABORTED, "%s %I", why, step);
        tfrdv_abort(r, TFRDV_ABORTED, msg.msg);
        tfrdv_unref(r);
    }
    if (why) tfrdv__drain_cleaned(mgr, step, why);
}
TFRDV_API void tfrdv_mgr_cleanup(tfrdv_mgr* mgr, int64_t step_id) {
    tfrdv_rendezvous* r;
    tfrdv__centry* dropped;
    int64_t now;
    if (!mgr) return;
    tfrdv__mgr_ref(mgr); /* a callback of the abort may destroy the manager (the caller's
                            reference), and the step's reference goes before its drains end */
    now = tfrdv__now(&mgr->hooks.clock);
    tfrdv__lock(&mgr->mu);
    r = tfrdv__unlink_step(mgr, step_id);
    dropped = tfrdv__forget_locked(mgr, step_id, now);
    tfrdv__unlock(&mgr->mu);
    tfrdv__forget_finish(mgr, r, step_id, dropped, "Cleanup");
    tfrdv__mgr_unref(mgr);
}
/* Every step that exists now (created before this call: steps created meanwhile stay), walked
   in place: teardown needs no memory, so it works when allocations fail. */
TFRDV__PRIVATE void tfrdv__cleanup_all(tfrdv_mgr* mgr, const char* why) {
    int64_t now = tfrdv__now(&mgr->hooks.clock);
    size_t i = 0, nb;
    uint64_t gen;
    tfrdv__lock(&mgr->mu);
    gen = mgr->step_gen;
    nb = mgr->nb;
    while (i < mgr->nb) {
        tfrdv_rendezvous* r;
        tfrdv__centry* dropped;
        int64_t step;
        if (mgr->nb != nb) { /* the table grew while it was unlocked: start over */
            nb = mgr->nb;
            i = 0;
        }
        for (r = mgr->steps[i]; r && r->gen > gen; r = r->mgr_next) {}
        if (!r) {
            i++;
            continue;
        }
        step = r->step_id;
        tfrdv__unlink_step(mgr, step);
        dropped = tfrdv__forget_locked(mgr, step, now);
        tfrdv__unlock(&mgr->mu);
        tfrdv__forget_finish(mgr, r, step, dropped, why);
        tfrdv__lock(&mgr->mu);
    }
    tfrdv__unlock(&mgr->mu);
}
TFRDV_API void tfrdv_mgr_cleanup_all(tfrdv_mgr* mgr) {
    if (!mgr) return;
    tfrdv__mgr_ref(mgr); /* as tfrdv_mgr_cleanup: a callback may destroy the manager */
    tfrdv__cleanup_all(mgr, "Cleanup");
    tfrdv__mgr_unref(mgr);
}

/* >>drain  tfrdv_mgr_cleanup_when_drained: a step's producer learns when its consumers are done.
   Values served with TFRDV_SERVE_CONFIRMS are "held" (request id -> step, in mgr->held) from the
   answer until tfrdv_mgr_serve_delivered or tfrdv_mgr_serve_return; r->held counts them, r->serving
   the requests routed to r and not answered yet, so a value between its table and its transport is
   never missed. A step has drained when all of that and its table are empty. */
/* mgr->mu held: the step linked under step_id, or NULL */
TFRDV__PRIVATE tfrdv_rendezvous* tfrdv__step_locked(tfrdv_mgr* mgr, int64_t step_id) {
    tfrdv_rendezvous* r = mgr->steps[tfrdv__step_bucket(mgr, step_id)];
    while (r && r->step_id != step_id) r = r->mgr_next;
    return r;
}
TFRDV__PRIVATE size_t tfrdv__held_bucket(const tfrdv_mgr* mgr, int64_t request_id) {
    return (size_t)tfrdv__mix64((uint64_t)request_id ^ mgr->hkey) & (mgr->held_nb - 1);
}
/* mgr->mu held: request_id's entry, or NULL */
TFRDV__PRIVATE tfrdv__held* tfrdv__held_find(tfrdv_mgr* mgr, int64_t request_id) {
    tfrdv__held* h = 0;
    if (mgr->nheld)
        for (h = mgr->held[tfrdv__held_bucket(mgr, request_id)]; h && h->request_id != request_id; h = h->next) {}
    return h;
}
/* mgr->mu held: unlinks request_id's entry and returns it (the caller frees it), or NULL */
TFRDV__PRIVATE tfrdv__held* tfrdv__held_take(tfrdv_mgr* mgr, int64_t request_id) {
    tfrdv__held** pp;
    tfrdv__held* h;
    if (!mgr->nheld) return 0;
    for (pp = &mgr->held[tfrdv__held_bucket(mgr, request_id)]; (h = *pp) != 0; pp = &h->next) {
        if (h->request_id != request_id) continue;
        *pp = h->next;
        mgr->nheld--;
        return h;
    }
    return 0;
}
/* the answer to op hands its value over (OK, TFRDV_SERVE_CONFIRMS): hold it until confirmed.
   Out of memory the value counts as delivered (as without the flag). */
TFRDV__PRIVATE void tfrdv__held_add(tfrdv__serve* op) {
    tfrdv_mgr* mgr = op->mgr;
    const tfrdv_allocator* a = &mgr->hooks.allocator;
    tfrdv__held* h = (tfrdv__held*)tfrdv__alloc(a, sizeof *h);
    tfrdv__held** nb = 0;
    size_t nnb = 0, i;
    if (!h) return;
    h->request_id = op->request_id;
    h->step_id = op->step_id;
    h->gen = op->r->gen;
    tfrdv__lock(&mgr->mu);
    if (mgr->nheld >= mgr->held_nb) { /* grow (x4, from 64) before inserting; allocate unlocked */
        nnb = mgr->held_nb ? mgr->held_nb * 4 : 64;
        tfrdv__unlock(&mgr->mu);
        nb = (tfrdv__held**)tfrdv__zalloc(a, nnb * sizeof *nb);
        tfrdv__lock(&mgr->mu);
        if (nb && nnb > mgr->held_nb) {
            tfrdv__held** old = mgr->held;
            size_t onb = mgr->held_nb;
            mgr->held = nb;
            mgr->held_nb = nnb;
            for (i = 0; i < onb; i++) {
                while (old[i]) {
                    tfrdv__held* x = old[i];
                    old[i] = x->next;
                    x->next = mgr->held[tfrdv__held_bucket(mgr, x->request_id)];
                    mgr->held[tfrdv__held_bucket(mgr, x->request_id)] = x;
                }
            }
            nb = old;
            nnb = onb;
        }
    }
    /* held already (a retry answered from the response cache hands the same value): once */
    if (mgr->held_nb && !tfrdv__held_find(mgr, h->request_id)) {
        h->next = mgr->held[tfrdv__held_bucket(mgr, h->request_id)];
        mgr->held[tfrdv__held_bucket(mgr, h->request_id)] = h;
        mgr->nheld++;
        op->r->held++;
        h = 0;
    }
    tfrdv__unlock(&mgr->mu);
    tfrdv__free(a, nb, nnb * sizeof *nb);
    tfrdv__free(a, h, sizeof *h);
}
/* mgr->mu held: request_id's value is confirmed (delivered or returned); returns 1 when its step
   has a drain pending */
TFRDV__PRIVATE int tfrdv__held_done_locked(tfrdv_mgr* mgr, int64_t request_id, int64_t* step_id) {
    tfrdv__held* h = tfrdv__held_take(mgr, request_id);
    tfrdv_rendezvous* r;
    int poke = 0;
    if (!h) return 0;
    r = tfrdv__step_locked(mgr, h->step_id);
    if (r && r->gen == h->gen) {
        r->held--;
        poke = tfrdv__atomic_load(&r->draining) != 0;
    }
    *step_id = h->step_id;
    tfrdv__free(&mgr->hooks.allocator, h, sizeof *h);
    return poke;
}
TFRDV_API void tfrdv_mgr_serve_delivered(tfrdv_mgr* mgr, int64_t request_id) {
    int64_t step = 0;
    int poke;
    if (!mgr) return;
    tfrdv__lock(&mgr->mu);
    poke = tfrdv__held_done_locked(mgr, request_id, &step);
    tfrdv__unlock(&mgr->mu);
    if (poke) tfrdv__drain_poke(mgr, step);
}
/* What a step still holds, for a timed-out drain's message */
typedef struct tfrdv__left {
    size_t values, receives, deferred, calls, serving, held;
} tfrdv__left;
/* mgr->mu held: 1 when r has drained; *left counts what it holds (all of it when counting) */
TFRDV__PRIVATE int tfrdv__drained_locked(tfrdv_rendezvous* r, tfrdv__left* left, int counting) {
    tfrdv__serve* op;
    tfrdv_call* c;
    int i;
    memset(left, 0, sizeof *left);
    left->held = (size_t)r->held;
    left->serving = (size_t)tfrdv__atomic_load(&r->serving);
    tfrdv__lock(&r->mu);
    for (op = r->deferred; op; op = op->next) left->deferred++;
    for (c = r->calls; c; c = c->next) left->calls++;
    tfrdv__unlock(&r->mu);
    for (i = 0; i < r->nshards && (counting || !(left->held | left->serving | left->deferred | left->calls)); i++) {
        tfrdv__shard* s = &r->shards[i];
        size_t b;
        tfrdv__lock(&s->mu);
        if (!counting) {
            left->values += s->nchans; /* any channel: something buffered or waiting */
        } else {
            for (b = 0; b < s->nslots; b++) {
                tfrdv__chan* ch = s->slots[b].chan;
                void* it;
                if (!ch || (it = ch->tail) == 0) continue;
                do { /* the ring: both item kinds start with `next` */
                    if (ch->kind == TFRDV__CHAN_SEND) left->values++;
                    else left->receives++;
                    it = *(void**)it;
                } while (it != ch->tail);
            }
        }
        tfrdv__unlock(&s->mu);
    }
    return !(left->values | left->receives | left->deferred | left->calls | left->serving | left->held);
}
/* mgr->mu held: moves step_id's drains (all, or only `only`) to *out; returns how many */
TFRDV__PRIVATE size_t tfrdv__drain_unlink(tfrdv_mgr* mgr, int64_t step_id, const tfrdv__drain* only, tfrdv__drain** out) {
    tfrdv__drain** pp = &mgr->drains;
    size_t n = 0;
    while (*pp) {
        tfrdv__drain* d = *pp;
        if (d->step_id == step_id && (!only || d == only)) {
            *pp = d->next;
            d->next = *out;
            *out = d;
            n++;
        } else {
            pp = &d->next;
        }
    }
    if (n) {
        tfrdv_rendezvous* r = tfrdv__step_locked(mgr, step_id);
        tfrdv__drain* d;
        tfrdv__atomic_add(&mgr->ndrains, -(long)n);
        for (d = mgr->drains; d && d->step_id != step_id; d = d->next) {}
        if (r && !d) tfrdv__atomic_store(&r->draining, 0);
    }
    return n;
}
/* outside every lock: each drain's callback with its status, then its memory */
TFRDV__PRIVATE void tfrdv__drain_run(tfrdv_mgr* mgr, tfrdv__drain* list) {
    tfrdv_allocator a = mgr->hooks.allocator; /* a callback may end the manager */
    while (list) {
        tfrdv__drain d = *list;
        tfrdv__free(&a, list, sizeof *list);
        list = d.next;
        d.done(d.user, d.step_id, &d.st);
    }
}
/* every cleanup path (outside the locks, why != NULL): drains of that step end ABORTED */
TFRDV__PRIVATE void tfrdv__drain_cleaned(tfrdv_mgr* mgr, int64_t step_id, const char* why) {
    tfrdv__drain* list = 0;
    tfrdv__drain* d;
    if (!tfrdv__atomic_load(&mgr->ndrains)) return;
    tfrdv__lock(&mgr->mu);
    tfrdv__drain_unlink(mgr, step_id, 0, &list);
    tfrdv__unlock(&mgr->mu);
    for (d = list; d; d = d->next)
        tfrdv__err(&d->st, TFRDV_ABORTED, "%s %I came before the step drained", why, step_id);
    tfrdv__drain_run(mgr, list);
}
/* shutdown, after every step was cleaned up: drains left (of steps unlinked otherwise) end too */
TFRDV__PRIVATE void tfrdv__drains_shutdown(tfrdv_mgr* mgr) {
    tfrdv__drain* list;
    tfrdv__drain* d;
    tfrdv__lock(&mgr->mu);
    list = mgr->drains;
    mgr->drains = 0;
    tfrdv__atomic_store(&mgr->ndrains, 0);
    tfrdv__unlock(&mgr->mu);
    for (d = list; d; d = d->next)
        tfrdv__err(&d->st, TFRDV_ABORTED, "Shutdown: step %I came before the step drained", d->step_id);
    tfrdv__drain_run(mgr, list);
}
/* mgr->mu held: ends the drains of step_id (or only `only`) with code when r has drained, was
   aborted, or code is DEADLINE_EXCEEDED; unlinks the step for the caller to clean up (*r_out,
   *dropped: tfrdv__forget_finish after unlocking). Returns 1 when it did. */
TFRDV__PRIVATE int tfrdv__drain_try_locked(tfrdv_mgr* mgr, int64_t step_id, const tfrdv__drain* only, int64_t now,
                                           int64_t since, int timed_out, tfrdv__drain** out, tfrdv_rendezvous** r_out,
                                           tfrdv__centry** dropped) {
    tfrdv_rendezvous* r = tfrdv__step_locked(mgr, step_id);
    tfrdv__drain* list = 0;
    tfrdv__drain* d;
    tfrdv__left left;
    tfrdv_status st;
    int drained = 1;
    if (r && tfrdv__atomic_load(&r->aborted)) {
        tfrdv__lock(&r->mu);
        tfrdv__status_copy(&st, &r->status);
        tfrdv__unlock(&r->mu);
    } else {
        drained = !r || tfrdv__drained_locked(r, &left, 0);
        if (!drained && !timed_out) return 0;
        if (drained) {
            tfrdv__err(&st, TFRDV_OK, "");
        } else {
            tfrdv__drained_locked(r, &left, 1);
            tfrdv__err(&st, TFRDV_DEADLINE_EXCEEDED,
                       "step %I did not drain within %I ms: %U values buffered, %U receives waiting, %U requests deferred, %U being answered, %U deliveries unconfirmed, %U calls in flight",
                       step_id, (now - since) / 1000000, (uint64_t)left.values, (uint64_t)left.receives, (uint64_t)left.deferred,
                       (uint64_t)left.serving, (uint64_t)left.held, (uint64_t)left.calls);
        }
    }
    if (!tfrdv__drain_unlink(mgr, step_id, only, &list)) return 0;
    for (d = list; d; d = d->next) tfrdv__status_copy(&d->st, &st);
    if (timed_out && !drained) mgr->stats.drains_timed_out++;
    if (!r) { /* gone or never there: tombstoned as tfrdv_mgr_cleanup does */
        *dropped = tfrdv__forget_locked(mgr, step_id, now);
    } else if (!(only && tfrdv__atomic_load(&r->draining))) { /* nobody else waits for it: clean it up */
        tfrdv__unlink_step(mgr, step_id);
        *dropped = tfrdv__forget_locked(mgr, step_id, now);
        mgr->stats.steps_drained++;
        *r_out = r;
    }
    while (list) { /* onto *out */
        d = list;
        list = d->next;
        d->next = *out;
        *out = d;
    }
    return 1;
}
TFRDV__PRIVATE void tfrdv__drain_finish(tfrdv_mgr* mgr, int64_t step_id, tfrdv_rendezvous* r, tfrdv__centry* dropped,
                                        tfrdv__drain* list) {
    if (r || dropped) tfrdv__forget_finish(mgr, r, step_id, dropped, "Cleanup");
    tfrdv__drain_run(mgr, list);
}
/* something happened in step_id that may have drained it */
TFRDV__PRIVATE void tfrdv__drain_poke(tfrdv_mgr* mgr, int64_t step_id) {
    tfrdv__drain* list = 0;
    tfrdv_rendezvous* r = 0;
    tfrdv__centry* dropped = 0;
    int64_t now;
    tfrdv__drain* d;
    if (!tfrdv__atomic_load(&mgr->ndrains)) return;
    now = tfrdv__now(&mgr->hooks.clock);
    tfrdv__lock(&mgr->mu);
    for (d = mgr->drains; d && d->step_id != step_id; d = d->next) {}
    if (d) tfrdv__drain_try_locked(mgr, step_id, 0, now, d->since, 0, &list, &r, &dropped);
    tfrdv__unlock(&mgr->mu);
    tfrdv__drain_finish(mgr, step_id, r, dropped, list);
}
TFRDV_API tfrdv_code tfrdv_mgr_cleanup_when_drained(tfrdv_mgr* mgr, int64_t step_id, int64_t timeout_ns,
                                                    tfrdv_drained_fn done, void* user) {
    tfrdv__drain* d;
    tfrdv_rendezvous* r;
    int64_t now;
    if (!mgr || !done) return TFRDV_INVALID_ARGUMENT;
    d = (tfrdv__drain*)tfrdv__zalloc(&mgr->hooks.allocator, sizeof *d);
    if (!d) return TFRDV_RESOURCE_EXHAUSTED;
    now = tfrdv__now(&mgr->hooks.clock);
    d->step_id = step_id;
    d->since = now;
    d->deadline = timeout_ns < 0 ? INT64_MAX : tfrdv__sat_add(now, timeout_ns);
    d->done = done;
    d->user = user;
    tfrdv__lock(&mgr->mu);
    r = tfrdv__step_locked(mgr, step_id);
    if (mgr->destroyed) {
        tfrdv__unlock(&mgr->mu);
        tfrdv__err(&d->st, TFRDV_ABORTED, "Shutdown: step %I came before the step drained", step_id);
        tfrdv__drain_run(mgr, d);
        return TFRDV_OK;
    }
    d->next = mgr->drains;
    mgr->drains = d;
    tfrdv__atomic_add(&mgr->ndrains, 1);
    if (r) tfrdv__atomic_store(&r->draining, 1);
    tfrdv__unlock(&mgr->mu);
    tfrdv__drain_poke(mgr, step_id); /* drained already? (an unknown step is) */
    return TFRDV_OK;
}
/* tfrdv_mgr_expire: drains that drained unnoticed or timed out end; returns the next deadline */
TFRDV__PRIVATE int64_t tfrdv__drains_expire(tfrdv_mgr* mgr, int64_t now) {
    int64_t next = INT64_MAX;
    for (;;) {
        tfrdv__drain* list = 0;
        tfrdv_rendezvous* r = 0;
        tfrdv__centry* dropped = 0;
        tfrdv__drain* d;
        int64_t step = 0;
        int acted = 0;
        if (!tfrdv__atomic_load(&mgr->ndrains)) return next;
        next = INT64_MAX;
        tfrdv__lock(&mgr->mu);
        for (d = mgr->drains; d && !acted; d = d->next) {
            step = d->step_id;
            acted = tfrdv__drain_try_locked(mgr, step, d->deadline <= now ? d : 0, now, d->since, d->deadline <= now,
                                            &list, &r, &dropped);
            if (!acted && d->deadline < next) next = d->deadline;
        }
        tfrdv__unlock(&mgr->mu);
        if (!acted) return next;
        tfrdv__drain_finish(mgr, step, r, dropped, list);
    }
}
/* tfrdv_mgr_drain's waiter */
typedef struct tfrdv__drain_wait {
    tfrdv__event ev;
    tfrdv_status st;
} tfrdv__drain_wait;
TFRDV__PRIVATE void tfrdv__drain_woken(void* user, int64_t step_id, const tfrdv_status* st) {
    tfrdv__drain_wait* w = (tfrdv__drain_wait*)user;
    TFRDV__UNUSED(step_id);
    tfrdv__status_copy(&w->st, st);
    tfrdv__event_signal(&w->ev);
}
TFRDV_API tfrdv_code tfrdv_mgr_drain(tfrdv_mgr* mgr, int64_t step_id, int64_t timeout_ns, tfrdv_status* st) {
    tfrdv__drain_wait w;
    tfrdv_code rc;
    if (!mgr) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_drain: NULL manager");
    memset(&w, 0, sizeof w);
    if (!tfrdv__event_init(&w.ev, mgr->hooks.sync))
        return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_mgr_drain: event init failed");
    tfrdv__mgr_ref(mgr); /* a callback of the cleanup, or another thread's tfrdv_mgr_destroy,
                            may drop the caller's reference meanwhile */
    rc = tfrdv_mgr_cleanup_when_drained(mgr, step_id, -1, tfrdv__drain_woken, &w);
    if (rc != TFRDV_OK) {
        tfrdv__mgr_unref(mgr);
        tfrdv__event_destroy(&w.ev);
        return tfrdv__err(st, rc, "tfrdv_mgr_drain: out of memory");
    }
    if (!tfrdv__event_wait(&w.ev, timeout_ns < 0 ? -1 : timeout_ns)) {
        /* time is up: end our drain now, unless its callback is already on its way */
        tfrdv__drain* list = 0;
        tfrdv_rendezvous* r = 0;
        tfrdv__centry* dropped = 0;
        tfrdv__drain* d;
        tfrdv__lock(&mgr->mu);
        for (d = mgr->drains; d && d->user != (void*)&w; d = d->next) {}
        if (d) tfrdv__drain_try_locked(mgr, step_id, d, tfrdv__now(&mgr->hooks.clock), d->since, 1, &list, &r, &dropped);
        tfrdv__unlock(&mgr->mu);
        tfrdv__drain_finish(mgr, step_id, r, dropped, list);
        tfrdv__event_wait(&w.ev, -1);
    }
    tfrdv__mgr_unref(mgr);
    tfrdv__event_destroy(&w.ev);
    tfrdv__status_copy(st, &w.st);
    return w.st.code;
}
TFRDV__PRIVATE void tfrdv__drains_shutdown(tfrdv_mgr* mgr);
TFRDV_API void tfrdv_mgr_destroy(tfrdv_mgr* mgr) {
    if (!mgr) return;
    if (mgr->cfg.transport.bind) mgr->cfg.transport.bind(mgr->cfg.transport.user, mgr, 0);
    tfrdv__lock(&mgr->mu);
    mgr->destroyed = 1;
    tfrdv__unlock(&mgr->mu);
    tfrdv__cleanup_all(mgr, "Shutdown: step");
    tfrdv__drains_shutdown(mgr);
    tfrdv__mgr_unref(mgr);
}
TFRDV_API void tfrdv_mgr_ref(tfrdv_mgr* mgr) {
    if (mgr) tfrdv__mgr_ref(mgr);
}
TFRDV_API void tfrdv_mgr_unref(tfrdv_mgr* mgr) {
    if (mgr) tfrdv__mgr_unref(mgr);
}
TFRDV_API int64_t tfrdv_mgr_now(const tfrdv_mgr* mgr) { return mgr ? tfrdv__now(&mgr->hooks.clock) : tfrdv_now_ns(); }
TFRDV_API size_t tfrdv_mgr_steps(tfrdv_mgr* mgr, int64_t* out, size_t cap) {
    size_t i, k = 0;
    if (!mgr) return 0;
    tfrdv__lock(&mgr->mu);
    for (i = 0; i < mgr->nb; i++) {
        tfrdv_rendezvous* r;
        for (r = mgr->steps[i]; r; r = r->mgr_next) {
            if (out && k < cap) out[k] = r->step_id;
            k++;
        }
    }
    tfrdv__unlock(&mgr->mu);
    return k;
}
TFRDV_API void tfrdv_mgr_get_stats(tfrdv_mgr* mgr, tfrdv_mgr_stats* out) {
    if (!mgr || !out) return;
    tfrdv__lock(&mgr->mu);
    *out = mgr->stats;
    out->active_steps = mgr->nsteps;
    out->tombstones = mgr->tombs.live_count;
    out->calls_free = mgr->nfree_calls;
    out->calls_in_flight = mgr->ncalls;
    out->deliveries_unconfirmed = mgr->nheld;
    tfrdv__unlock(&mgr->mu);
    out->double_finishes = (uint64_t)tfrdv__atomic_load(&mgr->double_finishes);
}

/* is device (a parsed key part) on the worker `w` (e.g. "/job:a/replica:0/task:0")? A string
   prefix test like TensorFlow's IsLocalDevice, but the prefix must end at a '/' or the end, so
   task:1 is not a prefix of task:10. */
TFRDV__PRIVATE int tfrdv__on_worker(tfrdv_str dev, const char* w, size_t wl) {
    return dev.len >= wl && memcmp(dev.ptr, w, wl) == 0 && (dev.len == wl || dev.ptr[wl] == '/');
}
TFRDV__PRIVATE int tfrdv__implicit(const tfrdv_device_name* d) {
    return !d->has_job && !d->has_replica && !d->has_task && !d->has_type && !d->has_id;
}

TFRDV__PRIVATE tfrdv_code tfrdv__remote_send_check(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                                   tfrdv_status* st) {
    long init = tfrdv__atomic_load(&r->initialized);
    if (!init && !tfrdv__atomic_load(&r->aborted))
        return tfrdv__err(st, TFRDV_FAILED_PRECONDITION, "tfrdv_send before tfrdv_mgr_initialize (step %I, key %S)", r->step_id, &key->full);
    if (init && !tfrdv__implicit(&key->src) && !tfrdv__on_worker(key->src_device, r->worker, r->worker_len))
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "Invalid rendezvous key (src): %S @ %s", &key->full, r->worker);
    return TFRDV_OK;
}

/* >>trace */
TFRDV__PRIVATE tfrdv_trace_fn tfrdv__trace_of(const tfrdv_rendezvous* r) { return r->mgr ? r->mgr->cfg.trace : 0; }
/* outside every lock; v is still the caller's (read before it is handed on) */
TFRDV__PRIVATE void tfrdv__trace(tfrdv_mgr* mgr, int64_t step, const char* key, size_t len, tfrdv_trace_side side,
                                 int64_t t0, const tfrdv_status* st, const tfrdv_value* v, int dead) {
    tfrdv_trace_event ev;
    ev.step_id = step;
    ev.key.ptr = key;
    ev.key.len = len;
    ev.bytes = st->code == TFRDV_OK && v ? v->size : 0;
    ev.dtype = st->code == TFRDV_OK && v ? v->dtype : 0;
    ev.is_dead = st->code == TFRDV_OK && dead;
    ev.side = side;
    ev.code = st->code;
    ev.end_ns = tfrdv__now(&mgr->hooks.clock);
    ev.start_ns = t0 && t0 <= ev.end_ns ? t0 : ev.end_ns;
    mgr->cfg.trace(mgr->cfg.trace_user, &ev);
}
TFRDV__PRIVATE void tfrdv__trace_local(tfrdv_rendezvous* r, const char* key, size_t len, int64_t t0,
                                       const tfrdv_status* st, const tfrdv_value* v, int dead) {
    tfrdv__trace(r->mgr, r->step_id, key, len, TFRDV_TRACE_LOCAL, t0, st, v, dead);
}

/* a JSON string: quotes, backslashes and control bytes escaped */
TFRDV__PRIVATE void tfrdv__sb_json(tfrdv__sb* b, const char* p, size_t n) {
    size_t i;
    tfrdv__sb_put(b, "\"", 1);
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\') {
            char e[2];
            e[0] = '\\';
            e[1] = (char)c;
            tfrdv__sb_put(b, e, 2);
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', 0, 0};
            e[4] = "0123456789abcdef"[c >> 4];
            e[5] = "0123456789abcdef"[c & 15];
            tfrdv__sb_put(b, e, 6);
        } else {
            tfrdv__sb_put(b, (const char*)&p[i], 1);
        }
    }
    tfrdv__sb_put(b, "\"", 1);
}
/* nanoseconds as microseconds with three decimals */
TFRDV__PRIVATE void tfrdv__sb_us(tfrdv__sb* b, int64_t ns) {
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    char f[4];
    if (ns < 0) tfrdv__sb_put(b, "-", 1);
    tfrdv__sb_u64(b, a / 1000);
    f[0] = '.';
    f[1] = (char)('0' + (int)(a / 100 % 10));
    f[2] = (char)('0' + (int)(a / 10 % 10));
    f[3] = (char)('0' + (int)(a % 10));
    tfrdv__sb_put(b, f, 4);
}
TFRDV_API size_t tfrdv_trace_json(const tfrdv_trace_event* ev, int64_t t0_ns, int pid, char* buf,
                                  size_t cap) {
    static const char* const side[3] = {"local", "fetch", "serve"};
    tfrdv__sb b;
    tfrdv_parsed_key pk;
    tfrdv_str name;
    int sd;
    tfrdv__sb_init(&b, buf, buf ? cap : 0);
    if (!ev) return 0;
    sd = ev->side == TFRDV_TRACE_FETCH ? 1 : ev->side == TFRDV_TRACE_SERVE ? 2 : 0;
    name = tfrdv_key_parse(ev->key.ptr, ev->key.len, &pk, 0) == TFRDV_OK ? pk.edge_name : ev->key;
    tfrdv__sb_cstr(&b, "{\"name\":");
    tfrdv__sb_json(&b, name.ptr, name.len);
    tfrdv__sb_cstr(&b, ",\"cat\":\"");
    tfrdv__sb_cstr(&b, side[sd]);
    tfrdv__sb_cstr(&b, "\",\"ph\":\"X\",\"ts\":");
    tfrdv__sb_us(&b, ev->start_ns - t0_ns);
    tfrdv__sb_cstr(&b, ",\"dur\":");
    tfrdv__sb_us(&b, ev->end_ns - ev->start_ns);
    tfrdv__sb_cstr(&b, ",\"pid\":");
    tfrdv__sb_i64(&b, pid);
    tfrdv__sb_cstr(&b, ",\"tid\":");
    tfrdv__sb_i64(&b, sd + 1);
    tfrdv__sb_cstr(&b, ",\"args\":{\"step\":");
    tfrdv__sb_i64(&b, ev->step_id);
    tfrdv__sb_cstr(&b, ",\"key\":");
    tfrdv__sb_json(&b, ev->key.ptr, ev->key.len);
    tfrdv__sb_cstr(&b, ",\"bytes\":");
    tfrdv__sb_u64(&b, ev->bytes);
    tfrdv__sb_cstr(&b, ",\"dtype\":");
    tfrdv__sb_i64(&b, ev->dtype);
    tfrdv__sb_cstr(&b, ",\"dead\":");
    tfrdv__sb_i64(&b, ev->is_dead != 0);
    tfrdv__sb_cstr(&b, ",\"code\":\"");
    tfrdv__sb_cstr(&b, tfrdv_code_str(ev->code));
    tfrdv__sb_cstr(&b, "\"}}");
    return b.len;
}

/* >>serve  the serving side: answer other workers' RecvTensor requests */
TFRDV__PRIVATE size_t tfrdv__serve_bytes(size_t key_cap) { return sizeof(tfrdv__serve) + key_cap; }
/* a request record with room for the key in the same allocation (recycled when short) */
TFRDV__PRIVATE tfrdv__serve* tfrdv__serve_new(tfrdv_mgr* mgr, const char* key, size_t len) {
    tfrdv__serve* op;
    size_t cap;
    tfrdv__lock(&mgr->mu);
    op = mgr->free_serves;
    if (op && op->key_cap > len) {
        mgr->free_serves = op->next;
        mgr->nfree_serves--;
    } else {
        op = 0;
    }
    tfrdv__unlock(&mgr->mu);
    if (op) {
        cap = op->key_cap;
    } else {
        cap = (len + 64) & ~(size_t)63;
        op = (tfrdv__serve*)tfrdv__alloc(&mgr->hooks.allocator, tfrdv__serve_bytes(cap));
        if (!op) return 0;
    }
    memset(op, 0, sizeof *op);
    op->key_cap = cap;
    op->key = (char*)(void*)(op + 1);
    if (len) memcpy(op->key, key, len);
    op->key[len] = 0;
    op->parsed.full.ptr = op->key;
    op->parsed.full.len = len;
    op->mgr = mgr;
    op->refs = 1;
    op->state = TFRDV__SERVE_NEW;
    tfrdv__mgr_ref(mgr);
    return op;
}
TFRDV__PRIVATE void tfrdv__serve_unref(tfrdv__serve* op) {
    tfrdv_mgr* mgr = op->mgr;
    int keep;
    if (tfrdv__atomic_add(&op->refs, -1) != 0) return;
    tfrdv__lock(&mgr->mu);
    keep = mgr->nfree_serves < mgr->free_max && op->key_cap <= TFRDV__CHAN_KEEP_MAX;
    if (keep) {
        op->next = mgr->free_serves;
        mgr->free_serves = op;
        mgr->nfree_serves++;
    }
    tfrdv__unlock(&mgr->mu);
    if (!keep) tfrdv__free(&mgr->hooks.allocator, op, tfrdv__serve_bytes(op->key_cap));
    tfrdv__mgr_unref(mgr);
}
/* Under the lock of op's WAITER or DEFERRED state: op leaves it. Deregister without waiting; a
   cancellation callback already running gets references to drop (it finds op moved on): one on op,
   and one on op's step, whose lock it takes (the answer may drop op's own step reference first). */
TFRDV__PRIVATE void tfrdv__serve_leave(tfrdv__serve* op, int state) {
    if (op->state == TFRDV__SERVE_DEFERRED) tfrdv__atomic_add(&op->mgr->ndeferred, -1);
    op->state = state;
    if (!op->cm_registered) return;
    op->cm_registered = 0;
    if (!tfrdv_cancel_try_deregister(op->cm, &op->cnode)) {
        op->cm_orphan = 1;
        tfrdv__atomic_add(&op->refs, 1);
        if (op->r) tfrdv_ref(op->r);
    }
}
/* outside every lock: trace, then the caller's callback */
TFRDV__PRIVATE void tfrdv__serve_answer(tfrdv__serve* op, const tfrdv_status* st, const tfrdv_args* sa,
                                        tfrdv_value* v, int dead) {
    tfrdv_mgr* mgr = op->mgr;
    if (mgr->cfg.trace) tfrdv__trace(mgr, op->step_id, op->key, op->parsed.full.len, TFRDV_TRACE_SERVE, op->t0, st, v, dead);
    if ((op->flags & TFRDV_SERVE_CONFIRMS) && st->code == TFRDV_OK && op->request_id != 0 && op->r) tfrdv__held_add(op);
    op->done(op->user, st, sa && st->code == TFRDV_OK ? sa : &tfrdv__no_args, v, dead);
}
/* Answer the request, and everyone queued on the cache entry it computes; v is one owned
   reference. A withdrawn request (CANCELLED by its own manager) leaves the dedup window. */
TFRDV__PRIVATE void tfrdv__serve_finish(tfrdv__serve* op, const tfrdv_status* st, const tfrdv_args* sa,
                                        tfrdv_value* v, int dead) {
    tfrdv_mgr* mgr = op->mgr;
    tfrdv__centry* e = op->entry;
    tfrdv_rendezvous* r = op->r;
    tfrdv__serve* w = 0;
    int withdrawn = st->code == TFRDV_CANCELLED && op->cm && !op->wait_entry && op->request_id != 0 &&
                    tfrdv_cancel_is_cancelled(op->cm);
    /* op->state is not written here: it left WAITER/DEFERRED under their locks already, and an
       orphaned cancellation callback may be reading it */
    if (e || withdrawn) {
        tfrdv__lock(&mgr->mu);
        if (withdrawn) tfrdv__idset_remove(&mgr->recent, op->request_id);
        if (e) {
            tfrdv__serve* x;
            e->finished = 1;
            tfrdv__status_copy(&e->st, st);
            e->sa = sa && st->code == TFRDV_OK ? *sa : tfrdv__no_args;
            e->value = v; /* the cache keeps this reference */
            e->is_dead = dead;
            w = e->waiters;
            e->waiters = 0;
            for (x = w; x; x = x->next) {
                tfrdv__serve_leave(x, TFRDV__SERVE_DONE);
                tfrdv_value_retain(v);
            }
            tfrdv_value_retain(v); /* op's */
            /* Keep only successful answers (the receiver acks them, or the step's cleanup drops
               them). A failed answer consumed no tensor, and may come before any step exists, so
               nothing would ever remove it. */
            if (e->doomed || st->code != TFRDV_OK) {
                tfrdv__centry** pp = &mgr->cache[tfrdv__cache_bucket(mgr, e->request_id)];
                while (*pp != e) pp = &(*pp)->next;
                *pp = e->next;
                mgr->ncache--;
            } else {
                e = 0;
            }
        }
        tfrdv__unlock(&mgr->mu);
        while (w) {
            tfrdv__serve* nx = w->next;
            tfrdv__serve_answer(w, st, sa, v, dead);
            tfrdv__serve_unref(w);
            w = nx;
        }
    }
    tfrdv__serve_answer(op, st, sa, v, dead);
    if (e) tfrdv__centry_free(mgr, e);
    tfrdv__serve_unref(op);
    if (r) {
        tfrdv__atomic_add(&r->serving, -1);
        if (tfrdv__atomic_load(&r->draining)) tfrdv__drain_poke(mgr, r->step_id);
        tfrdv_unref(r);
    }
}
/* fails op with a message whose format takes the step id (%I) and then the key (%S) */
TFRDV__PRIVATE void tfrdv__serve_fail(tfrdv__serve* op, tfrdv_code code, const char* fmt) {
    tfrdv_status st;
    tfrdv__err(&st, code, fmt, op->step_id, &op->parsed.full);
    tfrdv__serve_finish(op, &st, 0, 0, 0);
}
#define TFRDV__WITHDRAWN "RecvTensor withdrawn by its caller (step %I, key %S)"
TFRDV__PRIVATE void tfrdv__serve_recv_done(void* u, const tfrdv_status* st, const tfrdv_args* sa,
                                           const tfrdv_args* ra, tfrdv_value* v, int dead) {
    TFRDV__UNUSED(ra);
    tfrdv__serve_finish((tfrdv__serve*)u, st, sa, v, dead);
}
/* LOCAL (set by the caller): a receive in the step's table; withdrawing it is that receive's
   cancellation */
TFRDV__PRIVATE void tfrdv__serve_local(tfrdv__serve* op) {
    tfrdv_args a = tfrdv__no_args;
    tfrdv_status est;
    a.cancel = op->cm;
    if (tfrdv__local_recv(op->r, &op->parsed, &a, tfrdv__serve_recv_done, op, 0, &est) != TFRDV_OK)
        tfrdv__serve_finish(op, &est, 0, 0, 0);
}
/* mgr->mu and r->mu held: the step was never initialised and holds nothing (no deferred request,
   no call), and no reference but the table's and `held` ours: nobody can tell it exists, so it
   may leave the table (mgr->mu is held: no find races) */
TFRDV__PRIVATE int tfrdv__step_unused(tfrdv_rendezvous* r, long held) {
    return !r->initialized && !r->deferred && !r->calls && tfrdv__atomic_load(&r->refs) == 1 + held;
}
/* mgr->mu and r->mu held, r found by a caller that let go of mgr->mu since (a request that
   holds r): take r out of the table when it is still there and unused; returns 1 when it did (the
   caller then releases the table's reference, after the locks). A step already unlinked (a
   cleanup, expiry or destroy between our find and now) is left alone: its table reference is its
   unlinker's to release (the count "1 + held" would mistake it for the table's), and another
   step with the same id (a find after the cleanup) is not ours to unlink. */
TFRDV__PRIVATE int tfrdv__unlink_if_unused(tfrdv_mgr* mgr, tfrdv_rendezvous* r, long held) {
    tfrdv_rendezvous** pp = &mgr->steps[tfrdv__step_bucket(mgr, r->step_id)];
    while (*pp && *pp != r) pp = &(*pp)->mgr_next;
    if (!*pp || !tfrdv__step_unused(r, held)) return 0;
    *pp = r->mgr_next;
    r->mgr_next = 0;
    mgr->nsteps--;
    return 1;
}
/* the request's cancellation manager fired while it was a WAITER or DEFERRED (or after it left) */
TFRDV__PRIVATE void tfrdv__serve_cancelled(void* p) {
    tfrdv__serve* op = (tfrdv__serve*)p;
    tfrdv_mgr* mgr = op->mgr;
    tfrdv_rendezvous* r = op->r; /* set before op could be DEFERRED; NULL for a WAITER */
    int take = 0, orphan = 0, drop = 0;
    tfrdv__lock(&mgr->mu); /* lock order mgr -> step */
    if (r) tfrdv__lock(&r->mu);
    if (op->state == TFRDV__SERVE_WAITER) {
        tfrdv__serve_unlink(&op->wait_entry->waiters, op);
        take = 1;
    } else if (op->state == TFRDV__SERVE_DEFERRED) {
        tfrdv__serve_unlink(&r->deferred, op);
        take = 1;
        /* withdrawn like an expired one: a step only this request made leaves with it (op->r is
           still held), or a peer that cancels could fill the table with steps it names */
        drop = tfrdv__unlink_if_unused(mgr, r, 1);
    } else if (op->cm_orphan) {
        op->cm_orphan = 0;
        orphan = 1;
    }
    if (take) {
        op->cm_registered = 0; /* we are its callback: nothing to deregister */
        if (op->state == TFRDV__SERVE_DEFERRED) tfrdv__atomic_add(&mgr->ndeferred, -1);
        op->state = TFRDV__SERVE_DONE;
    }
    if (r) tfrdv__unlock(&r->mu);
    tfrdv__unlock(&mgr->mu);
    if (drop) tfrdv_unref(r); /* the table's reference; op->r keeps ours until the answer */
    if (take) {
        tfrdv__serve_fail(op, TFRDV_CANCELLED, TFRDV__WITHDRAWN);
    } else if (orphan) {
        tfrdv__serve_unref(op);
        if (r) tfrdv_unref(r); /* the step reference tfrdv__serve_leave took for us */
    }
}

/* Phase 1, under mgr->mu: shutdown, the response cache, duplicate request ids. Returns 1 when op
   was answered or queued on a cache entry. */
TFRDV__PRIVATE int tfrdv__serve_admit(tfrdv__serve* op) {
    tfrdv_mgr* mgr = op->mgr;
    int64_t rid = op->request_id;
    tfrdv__lock(&mgr->mu);
    mgr->stats.requests_served++;
    if (mgr->destroyed) {
        tfrdv__unlock(&mgr->mu);
        tfrdv__serve_fail(op, TFRDV_ABORTED, "RecvTensor: the worker is shutting down (step %I, key %S)");
        return 1;
    }
    if (mgr->cfg.response_cache && rid != 0) {
        /* before the duplicate check (as TensorFlow): a retry gets the same answer */
        tfrdv__centry* e;
        for (e = mgr->cache[tfrdv__cache_bucket(mgr, rid)]; e && e->request_id != rid; e = e->next) {}
        if (e && e->finished) {
            tfrdv_status cst = e->st;
            tfrdv_args sa = e->sa;
            tfrdv_value* v = e->value;
            int dead = e->is_dead;
            tfrdv_value_retain(v);
            mgr->stats.cache_hits++;
            tfrdv__unlock(&mgr->mu);
            op->state = TFRDV__SERVE_DONE;
            tfrdv__serve_answer(op, &cst, &sa, v, dead);
            tfrdv__serve_unref(op);
            return 1;
        }
        if (e) { /* being computed: answer with it */
            if (op->cm && !tfrdv_cancel_register(op->cm, &op->cnode, tfrdv__serve_cancelled, op)) {
                tfrdv__unlock(&mgr->mu);
                op->wait_entry = e; /* not the computing request: its id stays */
                tfrdv__serve_fail(op, TFRDV_CANCELLED, TFRDV__WITHDRAWN);
                return 1;
            }
            op->cm_registered = op->cm != 0;
            op->state = TFRDV__SERVE_WAITER;
            op->wait_entry = e;
            tfrdv__serve_push(&e->waiters, op);
            mgr->stats.cache_hits++;
            tfrdv__unlock(&mgr->mu);
            return 1;
        }
    }
    if (rid != 0) {
        if (tfrdv__idset_find(&mgr->recent, rid) >= 0) {
            tfrdv_status st;
            mgr->stats.duplicate_requests++;
            tfrdv__unlock(&mgr->mu);
            tfrdv__err(&st, TFRDV_ABORTED, "The same RecvTensor request was received twice. step_id: %I rendezvous_key: \"%S\" request_id: %I",
                       op->step_id, &op->parsed.full, rid);
            tfrdv__serve_finish(op, &st, 0, 0, 0);
            return 1;
        }
        tfrdv__idset_insert(&mgr->recent, rid, 0);
        if (mgr->cfg.response_cache && mgr->ncache < (size_t)mgr->cfg.response_cache_max) {
            tfrdv__centry* e = (tfrdv__centry*)tfrdv__zalloc(&mgr->hooks.allocator, sizeof *e);
            if (e) { /* this request computes the answer retries will get */
                tfrdv__centry** head = &mgr->cache[tfrdv__cache_bucket(mgr, rid)];
                e->request_id = rid;
                e->step_id = op->step_id;
                e->next = *head;
                *head = e;
                mgr->ncache++;
                op->entry = e;
            }
        }
    }
    tfrdv__unlock(&mgr->mu);
    return 0;
}
/* Phase 2, no lock: the key parses, its source is on this worker, the incarnation matches.
   Returns 1 when op was answered (with the error). */
TFRDV__PRIVATE int tfrdv__serve_check(tfrdv__serve* op) {
    tfrdv_mgr* mgr = op->mgr;
    tfrdv_status st;
    uint64_t inc = mgr->incarnation;
    if (tfrdv_key_parse(op->key, op->parsed.full.len, &op->parsed, &st) != TFRDV_OK) {
        tfrdv__serve_finish(op, &st, 0, 0, 0);
        return 1;
    }
    if (!tfrdv__implicit(&op->parsed.src) && !tfrdv__on_worker(op->parsed.src_device, mgr->worker, mgr->worker_len)) {
        tfrdv__err(&st, TFRDV_INVALID_ARGUMENT, "Invalid rendezvous key (src): %S @ %s", &op->parsed.full, mgr->worker);
        tfrdv__serve_finish(op, &st, 0, 0, 0);
        return 1;
    }
    if (mgr->cfg.device_incarnation) {
        inc = mgr->cfg.device_incarnation(mgr->cfg.device_incarnation_user, op->parsed.src_device.ptr, op->parsed.src_device.len);
        if (inc == 0) {
            tfrdv__err(&st, TFRDV_NOT_FOUND, "RecvTensor: unknown device %S on worker %s", &op->parsed.src_device, mgr->worker);
            tfrdv__serve_finish(op, &st, 0, 0, 0);
            return 1;
        }
    }
    if (inc != op->parsed.src_incarnation) {
        tfrdv__err(&st, TFRDV_ABORTED,
                   "RecvTensor expects a different device incarnation: %X vs. %X. Your worker job (\"%s\") was probably restarted. Check your worker job for the reason why it was restarted.",
                   op->parsed.src_incarnation, inc, mgr->worker);
        st.detail = TFRDV_DETAIL_WORKER_RESTARTED;
        tfrdv__serve_finish(op, &st, 0, 0, 0);
        return 1;
    }
    return 0;
}
enum { TFRDV__ROUTE_LOCAL, TFRDV__ROUTE_DEFERRED, TFRDV__ROUTE_FULL, TFRDV__ROUTE_WITHDRAWN };
/* Phase 3: tombstone, find or create the step, then defer (not initialised yet) or wait in its
   table (an aborted step answers with its status). */
TFRDV__PRIVATE void tfrdv__serve_route(tfrdv__serve* op) {
    tfrdv_mgr* mgr = op->mgr;
    tfrdv_rendezvous* r = 0;
    tfrdv_status st;
    tfrdv_code rc;
    tfrdv__lock(&mgr->mu);
    if (tfrdv__idset_find(&mgr->tombs, op->step_id) >= 0) {
        mgr->stats.tombstone_hits++;
        tfrdv__unlock(&mgr->mu);
        tfrdv__serve_fail(op, TFRDV_ABORTED, "Cleanup %I (the step was cleaned up before this RecvTensor for %S arrived)");
        return;
    }
    rc = mgr->destroyed ? TFRDV_ABORTED : tfrdv__find_locked(mgr, op->step_id, &r, &st);
    tfrdv__unlock(&mgr->mu);
    if (rc != TFRDV_OK) {
        if (rc == TFRDV_ABORTED) tfrdv__err(&st, rc, "RecvTensor: the worker is shutting down");
        tfrdv__serve_finish(op, &st, 0, 0, 0);
        return;
    }
    op->r = r; /* the reference find gave us */
    tfrdv__atomic_add(&r->serving, 1); /* until answered (tfrdv__serve_finish) */
    if (!tfrdv__atomic_load(&r->initialized) && !tfrdv__atomic_load(&r->aborted)) {
        /* RecvTensor may arrive before the step starts here: defer it, with a deadline */
        int64_t to = mgr->cfg.deferred_timeout_ns;
        int64_t deadline = to > 0 ? tfrdv__sat_add(tfrdv__now(&mgr->hooks.clock), to) : INT64_MAX; /* clock: no lock held */
        int how = TFRDV__ROUTE_LOCAL, drop = 0;
        tfrdv__lock(&mgr->mu);
        tfrdv__lock(&r->mu);
        if (!r->initialized && !r->aborted) {
            if (tfrdv__atomic_add(&mgr->ndeferred, 1) > (long)mgr->cfg.max_deferred) {
                tfrdv__atomic_add(&mgr->ndeferred, -1);
                how = TFRDV__ROUTE_FULL;
            } else if (op->cm && !tfrdv_cancel_register(op->cm, &op->cnode, tfrdv__serve_cancelled, op)) {
                tfrdv__atomic_add(&mgr->ndeferred, -1);
                how = TFRDV__ROUTE_WITHDRAWN;
            } else {
                op->cm_registered = op->cm != 0;
                op->deadline = deadline;
                op->state = TFRDV__SERVE_DEFERRED;
                tfrdv__serve_push(&r->deferred, op);
                mgr->stats.requests_deferred++;
                how = TFRDV__ROUTE_DEFERRED;
                if (mgr->cfg.step_requested) tfrdv__atomic_add(&op->refs, 1); /* op->key for the hook */
            }
            /* refused, and the step holds nothing anybody else can see (typically created just
               now by this request): drop it, or a peer could fill the table with steps it names */
            if (how != TFRDV__ROUTE_DEFERRED) drop = tfrdv__unlink_if_unused(mgr, r, 1);
        }
        tfrdv__unlock(&r->mu);
        tfrdv__unlock(&mgr->mu);
        if (drop) tfrdv_unref(r); /* the table's reference; op->r keeps ours until the answer */
        if (how == TFRDV__ROUTE_DEFERRED && mgr->cfg.step_requested) {
            mgr->cfg.step_requested(mgr->cfg.step_requested_user, mgr, op->step_id, op->parsed.full);
            tfrdv__serve_unref(op);
        }
        if (how == TFRDV__ROUTE_FULL) {
            tfrdv__err(&st, TFRDV_RESOURCE_EXHAUSTED, "RecvTensor for step %I: %d requests already wait for their steps to be initialised (max_deferred)",
                       op->step_id, mgr->cfg.max_deferred);
            tfrdv__serve_finish(op, &st, 0, 0, 0);
        } else if (how == TFRDV__ROUTE_WITHDRAWN) {
            tfrdv__serve_fail(op, TFRDV_CANCELLED, TFRDV__WITHDRAWN);
        }
        if (how != TFRDV__ROUTE_LOCAL) return;
    }
    op->state = TFRDV__SERVE_LOCAL; /* from NEW: nothing registered, nobody else reads it yet */
    tfrdv__serve_local(op);
}

TFRDV_API tfrdv_code tfrdv_mgr_serve(tfrdv_mgr* mgr, int64_t step_id, const char* key,
                                     size_t key_len, int64_t request_id, tfrdv_cancel_mgr* cancel,
                                     tfrdv_serve_done_fn done, void* user) {
    return tfrdv_mgr_serve_ex(mgr, step_id, key, key_len, request_id, 0, cancel, done, user);
}
TFRDV_API tfrdv_code tfrdv_mgr_serve_ex(tfrdv_mgr* mgr, int64_t step_id, const char* key,
                                        size_t key_len, int64_t request_id, unsigned flags,
                                        tfrdv_cancel_mgr* cancel, tfrdv_serve_done_fn done,
                                        void* user) {
    tfrdv__serve* op;
    tfrdv_status st;
    if (!mgr || !done || (!key && key_len)) return TFRDV_INVALID_ARGUMENT;
    if (key_len > mgr->cfg.max_key_len) { /* before copying anything */
        tfrdv__err(&st, TFRDV_INVALID_ARGUMENT, "RecvTensor: key of %U bytes is longer than max_key_len (%U)",
                   (uint64_t)key_len, (uint64_t)mgr->cfg.max_key_len);
        done(user, &st, &tfrdv__no_args, 0, 0);
        return TFRDV_OK;
    }
    op = tfrdv__serve_new(mgr, key, key_len);
    if (!op) {
        tfrdv__err(&st, TFRDV_RESOURCE_EXHAUSTED, "RecvTensor: out of memory on the serving worker");
        done(user, &st, &tfrdv__no_args, 0, 0);
        return TFRDV_OK;
    }
    op->step_id = step_id;
    op->request_id = request_id;
    op->flags = flags;
    op->done = done;
    op->user = user;
    op->cm = cancel;
    if (mgr->cfg.trace) op->t0 = tfrdv__now(&mgr->hooks.clock);
    if (tfrdv__serve_admit(op) || tfrdv__serve_check(op)) return TFRDV_OK;
    tfrdv__serve_route(op);
    return TFRDV_OK;
}

/* mgr->mu held: forget request_id's response-cache entry; returns it when it is to be freed
   (outside the lock), NULL when there is none or it is still being computed (then doomed) */
TFRDV__PRIVATE tfrdv__centry* tfrdv__cache_forget(tfrdv_mgr* mgr, int64_t request_id) {
    tfrdv__centry* e;
    tfrdv__centry** pp;
    for (pp = &mgr->cache[tfrdv__cache_bucket(mgr, request_id)]; (e = *pp) != 0; pp = &e->next) {
        if (e->request_id != request_id) continue;
        if (!e->finished) {
            e->doomed = 1;
            return 0;
        }
        *pp = e->next;
        mgr->ncache--;
        return e;
    }
    return 0;
}
TFRDV_API void tfrdv_mgr_ack(tfrdv_mgr* mgr, int64_t request_id) {
    tfrdv__centry* e;
    if (!mgr) return;
    tfrdv__lock(&mgr->mu);
    e = tfrdv__cache_forget(mgr, request_id);
    tfrdv__unlock(&mgr->mu);
    if (e) tfrdv__centry_free(mgr, e);
}

TFRDV_API tfrdv_code tfrdv_mgr_serve_return(tfrdv_mgr* mgr, int64_t step_id, const char* key,
                                            size_t key_len, int64_t request_id,
                                            const tfrdv_args* send_args, tfrdv_value* value,
                                            int is_dead, tfrdv_status* st) {
    tfrdv_parsed_key pk;
    tfrdv_rendezvous* r = 0;
    tfrdv__centry* e = 0;
    tfrdv_code rc;
    int64_t held_step = 0;
    int poke;
    if (!mgr || (!key && key_len) || (!value && !is_dead)) {
        tfrdv_value_release(value);
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_serve_return: NULL manager or key, or a NULL live value");
    }
    if (key_len > mgr->cfg.max_key_len || tfrdv_key_parse(key, key_len, &pk, st) != TFRDV_OK) {
        tfrdv_value_release(value);
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_serve_return: invalid rendezvous key (%U bytes)", (uint64_t)key_len);
    }
    tfrdv__lock(&mgr->mu);
    if (request_id != 0) { /* as if never served: a retry with the same id is served afresh */
        tfrdv__idset_remove(&mgr->recent, request_id);
        e = tfrdv__cache_forget(mgr, request_id);
    }
    if (!mgr->destroyed) {
        for (r = mgr->steps[tfrdv__step_bucket(mgr, step_id)]; r && r->step_id != step_id; r = r->mgr_next) {}
        if (r) tfrdv_ref(r);
    }
    tfrdv__unlock(&mgr->mu);
    if (e) tfrdv__centry_free(mgr, e);
    if (!r) {
        tfrdv_value_release(value);
        if (request_id != 0) {
            tfrdv__lock(&mgr->mu);
            tfrdv__held_done_locked(mgr, request_id, &held_step);
            tfrdv__unlock(&mgr->mu);
        }
        return tfrdv__err(st, TFRDV_ABORTED, "tfrdv_mgr_serve_return: step %I is gone (cleaned up or shut down); the value was released", step_id);
    }
    tfrdv__mgr_ref(mgr); /* the receiver the value goes to may destroy the manager */
    rc = tfrdv__local_send(r, &pk, send_args, value, is_dead, 1, st);
    if (rc != TFRDV_OK) tfrdv_value_release(value); /* the step was aborted: its status is in st */
    tfrdv_unref(r);
    if (request_id != 0) { /* back in the table first, then no longer held: never a gap */
        tfrdv__lock(&mgr->mu);
        poke = tfrdv__held_done_locked(mgr, request_id, &held_step);
        tfrdv__unlock(&mgr->mu);
        if (poke) tfrdv__drain_poke(mgr, held_step);
    }
    tfrdv__mgr_unref(mgr);
    return rc;
}

/* r->mu held: take the deferred requests out (in arrival order), each leaving DEFERRED */
TFRDV__PRIVATE tfrdv__serve* tfrdv__take_deferred(tfrdv_rendezvous* r, int state) {
    tfrdv__serve* list = r->deferred;
    tfrdv__serve* rev = 0;
    r->deferred = 0;
    while (list) {
        tfrdv__serve* nx = list->next;
        tfrdv__serve_leave(list, state);
        list->next = rev;
        rev = list;
        list = nx;
    }
    return rev;
}

TFRDV_API tfrdv_code tfrdv_mgr_initialize(tfrdv_rendezvous* r, const char* worker_name,
                                          tfrdv_status* st) {
    const char* name;
    size_t len;
    tfrdv__serve* list;
    char* copy;
    if (!r || !r->mgr) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_initialize: not a step rendezvous of a tfrdv_mgr");
    name = worker_name ? worker_name : r->mgr->worker;
    len = strlen(name);
    copy = (char*)tfrdv__alloc(&r->hooks.allocator, len + 1);
    if (!copy) return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_mgr_initialize: out of memory");
    memcpy(copy, name, len + 1);
    tfrdv__lock(&r->mu);
    if (r->aborted) {
        tfrdv__unlock(&r->mu);
        tfrdv__free(&r->hooks.allocator, copy, len + 1);
        tfrdv__copy_status(r, st);
        return r->status.code;
    }
    if (r->initialized) {
        int same = r->worker_len == len && memcmp(r->worker, name, len) == 0;
        tfrdv_code rc = same ? TFRDV_OK
                             : tfrdv__err(st, TFRDV_INTERNAL, "Double init! Worker names would have changed from: %s -> %s", r->worker, name);
        tfrdv__unlock(&r->mu);
        tfrdv__free(&r->hooks.allocator, copy, len + 1);
        return rc;
    }
    r->worker = copy;
    r->worker_len = len;
    tfrdv__atomic_store(&r->initialized, 1);
    list = tfrdv__take_deferred(r, TFRDV__SERVE_LOCAL);
    tfrdv__unlock(&r->mu);
    while (list) {
        tfrdv__serve* nx = list->next;
        tfrdv__serve_local(list);
        list = nx;
    }
    return TFRDV_OK;
}

/* >>remote  remote calls: fetch from another worker through the transport */
TFRDV__PRIVATE void tfrdv__call_recycle(tfrdv_call* call) {
    tfrdv_mgr* mgr = call->mgr;
    tfrdv_rendezvous* r = call->r;
    int keep;
    call->state = TFRDV__CALL_IDLE;
    call->r = 0;
    tfrdv__lock(&mgr->mu);
    mgr->ncalls--;
    mgr->stats.calls_completed++;
    keep = mgr->nfree_calls < (size_t)mgr->cfg.call_freelist_max;
    if (keep) {
        call->next = mgr->free_calls;
        mgr->free_calls = call;
        mgr->nfree_calls++;
    }
    tfrdv__unlock(&mgr->mu);
    if (!keep) {
        tfrdv__free(&mgr->hooks.allocator, call->buf, call->buf_cap);
        tfrdv__free(&mgr->hooks.allocator, call, sizeof *call);
    }
    tfrdv_unref(r); /* may free r, and through it the manager */
}
/* drop one busy count (r->mu not held); recycles the call when nothing else uses it */
TFRDV__PRIVATE void tfrdv__call_unbusy(tfrdv_call* call) {
    tfrdv_rendezvous* r = call->r;
    int rec;
    tfrdv__lock(&r->mu);
    rec = --call->busy == 0 && call->state == TFRDV__CALL_DONE;
    tfrdv__unlock(&r->mu);
    if (rec) tfrdv__call_recycle(call);
}
TFRDV__PRIVATE void tfrdv__call_unlink(tfrdv_call* call) {
    tfrdv_rendezvous* r = call->r;
    if (!call->linked) return;
    if (call->prev) call->prev->next = call->next;
    else r->calls = call->next;
    if (call->next) call->next->prev = call->prev;
    call->next = call->prev = 0;
    call->linked = 0;
}
/* r->mu held, the call leaves r->calls: deregister from the receiver's cancellation manager
   without waiting (the manager is alive: its callback for us would need r->mu). If that callback
   is already running, it will find the call unlinked and drop the busy count we add for it. */
TFRDV__PRIVATE void tfrdv__call_detach_cm(tfrdv_call* call, int from_cancel) {
    if (!call->cm_registered) return;
    call->cm_registered = 0;
    if (!from_cancel && !tfrdv_cancel_try_deregister(call->recv_args.cancel, &call->cnode)) {
        call->cm_orphan = 1;
        call->busy++;
    }
}
/* r->mu held, call STARTED or BACKOFF: take over the user completion with status st (a
   canceller: cancel, abort, deadline). Afterwards, outside the lock, run tfrdv__call_complete. */
TFRDV__PRIVATE void tfrdv__call_take(tfrdv_call* call, const tfrdv_status* st, int from_cancel) {
    TFRDV_ASSERT(call->state == TFRDV__CALL_STARTED || call->state == TFRDV__CALL_BACKOFF);
    tfrdv__call_unlink(call);
    tfrdv__call_detach_cm(call, from_cancel);
    if (call->state == TFRDV__CALL_STARTED) {
        call->state = TFRDV__CALL_ORPHANED; /* canceller: the provider still owes its finish */
        call->cancel_pending = 1; /* issued by tfrdv__call_complete, or by the starter */
    } else {
        call->state = TFRDV__CALL_DONE; /* canceller: no provider work in flight */
    }
    tfrdv__status_copy(&call->result, st);
    call->busy++;
    tfrdv__hold(call->r);
}
/* after tfrdv__call_take, outside every lock: tell the provider, complete the user, let go */
TFRDV__PRIVATE void tfrdv__call_settle(tfrdv_call* call, int cancel, tfrdv_value* v, int dead) {
    tfrdv_mgr* mgr = call->mgr;
    tfrdv_args ra = call->recv_args;
    ra.key = call->key;
    if (cancel && mgr->cfg.transport.cancel_call) mgr->cfg.transport.cancel_call(mgr->cfg.transport.user, call);
    if (mgr->cfg.trace)
        tfrdv__trace(mgr, call->step_id, call->key.ptr, call->key.len, TFRDV_TRACE_FETCH, call->t0, &call->result, v, dead);
    tfrdv__deliver(call->r, call->done, call->user, &call->result, 0, &ra, v, dead);
    tfrdv__call_unbusy(call);
}
/* after tfrdv__call_take: tell the provider to cancel (unless start_call is still running: the
   starter does it when it returns), then complete the user */
TFRDV__PRIVATE void tfrdv__call_complete(tfrdv_call* call) {
    int cancel;
    tfrdv__lock(&call->r->mu);
    cancel = call->cancel_pending && !call->starting;
    if (cancel) call->cancel_pending = 0;
    tfrdv__unlock(&call->r->mu);
    tfrdv__call_settle(call, cancel, 0, 0);
}
TFRDV__PRIVATE void tfrdv__call_cancelled(void* p) { /* the receiver's cancellation manager fired */
    tfrdv_call* call = (tfrdv_call*)p;
    tfrdv_rendezvous* r = call->r;
    tfrdv_status st;
    tfrdv__err(&st, TFRDV_CANCELLED, "RecvFromRemoteAsync is cancelled.");
    tfrdv__lock(&r->mu);
    if (!call->linked) { /* completed by someone else, who left us the busy count to drop */
        int orphan = call->cm_orphan;
        call->cm_orphan = 0;
        tfrdv__unlock(&r->mu);
        if (orphan) tfrdv__call_unbusy(call);
        return;
    }
    tfrdv__call_take(call, &st, 1);
    tfrdv__unlock(&r->mu);
    tfrdv__call_complete(call);
}
/* the starter: state STARTED, busy and starting set under r->mu */
TFRDV__PRIVATE void tfrdv__call_start(tfrdv_call* call) {
    tfrdv_mgr* mgr = call->mgr;
    tfrdv_rendezvous* r = call->r;
    int cancel;
    if (mgr->cfg.transport.start_call) {
        mgr->cfg.transport.start_call(mgr->cfg.transport.user, call);
    } else {
        tfrdv_call_finish(call, TFRDV_UNIMPLEMENTED, "tfrdv: the step manager has no transport; remote receives need one", 0, 0);
    }
    tfrdv__lock(&r->mu);
    call->starting = 0;
    cancel = call->cancel_pending && call->state == TFRDV__CALL_ORPHANED;
    call->cancel_pending = 0;
    tfrdv__unlock(&r->mu);
    if (cancel) mgr->cfg.transport.cancel_call(mgr->cfg.transport.user, call);
    tfrdv__call_unbusy(call);
}

TFRDV__PRIVATE void tfrdv__fail_now(tfrdv_rendezvous* r, tfrdv_done_fn done, void* user,
                                    const tfrdv_args* args, const tfrdv_status* st) {
    tfrdv__hold(r);
    tfrdv__deliver(r, done, user, st, 0, args, 0, 0);
}

TFRDV__PRIVATE tfrdv_call* tfrdv__call_new(tfrdv_mgr* mgr, size_t bytes) {
    tfrdv_call* call;
    tfrdv__lock(&mgr->mu);
    call = mgr->free_calls;
    if (call) {
        mgr->free_calls = call->next;
        mgr->nfree_calls--;
    }
    tfrdv__unlock(&mgr->mu);
    if (!call && !(call = (tfrdv_call*)tfrdv__zalloc(&mgr->hooks.allocator, sizeof *call))) return 0;
    if (call->buf_cap < bytes) {
        size_t cap = (bytes + 127) & ~(size_t)127;
        char* b = (char*)tfrdv__alloc(&mgr->hooks.allocator, cap);
        if (!b) {
            tfrdv__free(&mgr->hooks.allocator, call->buf, call->buf_cap);
            tfrdv__free(&mgr->hooks.allocator, call, sizeof *call);
            return 0;
        }
        tfrdv__free(&mgr->hooks.allocator, call->buf, call->buf_cap);
        call->buf = b;
        call->buf_cap = cap;
    }
    call->mgr = mgr;
    call->next = call->prev = call->action = 0;
    call->busy = call->starting = call->cancel_pending = call->linked = call->attempt = 0;
    call->cm_registered = call->cm_orphan = 0;
    call->state = TFRDV__CALL_IDLE;
    memset(&call->cnode, 0, sizeof call->cnode);
    memset(&call->scratch, 0, sizeof call->scratch);
    tfrdv__lock(&mgr->mu);
    call->request_id = tfrdv__rid_locked(mgr);
    mgr->ncalls++;
    mgr->stats.calls_started++;
    tfrdv__unlock(&mgr->mu);
    return call;
}

/* same worker, different devices: local receive, then the runtime's copy hook. The copy holds a
   reference on the step (not the in-flight count), so teardown never waits for a copy that an
   event loop completes later, and never frees the step under it: the last reference goes when
   the copy completes. */
typedef struct tfrdv__swcopy {
    tfrdv_rendezvous* r;
    tfrdv_done_fn done;
    void* user;
    tfrdv_args sa, ra;
    tfrdv_parsed_key key;
    size_t size;
} tfrdv__swcopy;
TFRDV__PRIVATE void tfrdv__swcopy_done(void* p, tfrdv_code code, const char* msg, tfrdv_value* out) {
    tfrdv__swcopy* x = (tfrdv__swcopy*)p;
    tfrdv_rendezvous* r = x->r;
    tfrdv_allocator a = r->hooks.allocator;
    tfrdv_status st;
    tfrdv_status_set(&st, code, msg);
    if (code != TFRDV_OK) {
        tfrdv_value_release(out);
        out = 0;
    }
    x->ra.key = x->key.full;
    tfrdv__hold(r);
    tfrdv__deliver(r, x->done, x->user, &st, &x->sa, &x->ra, out, 0); /* lets go of that hold */
    tfrdv__free(&a, x, x->size);
    tfrdv_unref(r); /* the copy's reference: may free r */
}
TFRDV__PRIVATE void tfrdv__swcopy_recv(void* p, const tfrdv_status* st, const tfrdv_args* sa,
                                       const tfrdv_args* ra, tfrdv_value* v, int dead) {
    tfrdv__swcopy* x = (tfrdv__swcopy*)p;
    tfrdv_rendezvous* r = x->r;
    tfrdv_mgr* mgr = r->mgr;
    if (st->code != TFRDV_OK || dead || !v) {
        tfrdv__swcopy c = *x;
        tfrdv__free(&r->hooks.allocator, x, x->size);
        c.done(c.user, st, sa, ra, v, dead);
        return;
    }
    x->sa = *sa;
    tfrdv_ref(r); /* until the copy completes */
    mgr->cfg.same_worker_copy(mgr->cfg.same_worker_copy_user, &x->key, &x->sa, &x->ra, v, tfrdv__swcopy_done, x);
}
TFRDV__PRIVATE int tfrdv__same_device(const tfrdv_device_name* a, const tfrdv_device_name* b) {
    return a->has_type == b->has_type && a->has_id == b->has_id && tfrdv__str_eq(a->type, b->type) && a->id == b->id;
}
/* a receive on this worker whose source is another device of it: local, then the copy hook */
TFRDV__PRIVATE tfrdv_code tfrdv__recv_same_worker(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                                  const tfrdv_args* args, tfrdv_done_fn done, void* user,
                                                  tfrdv_status* est) {
    tfrdv_mgr* mgr = r->mgr;
    tfrdv__swcopy* x;
    size_t size;
    if (!mgr->cfg.same_worker_copy || tfrdv__implicit(&key->src) || tfrdv__same_device(&key->src, &key->dst))
        return tfrdv__local_recv(r, key, args, done, user, 1, est);
    size = sizeof *x + key->full.len;
    x = (tfrdv__swcopy*)tfrdv__alloc(&r->hooks.allocator, size);
    if (!x) return tfrdv__err(est, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_recv_async: out of memory (key %S)", &key->full);
    x->r = r;
    x->done = done;
    x->user = user;
    x->ra = args ? *args : tfrdv__no_args;
    x->size = size;
    memcpy(x + 1, key->full.ptr, key->full.len);
    tfrdv_key_parse((const char*)(x + 1), key->full.len, &x->key, 0);
    x->key.hash = key->hash;
    x->ra.key = x->key.full;
    if (tfrdv__local_recv(r, key, args, tfrdv__swcopy_recv, x, 1, est) != TFRDV_OK) {
        tfrdv__free(&r->hooks.allocator, x, size);
        return est->code;
    }
    return TFRDV_OK;
}
/* a new call for a fetch of key from the worker `task`; NULL when out of memory */
TFRDV__PRIVATE tfrdv_call* tfrdv__call_prepare(tfrdv_rendezvous* r, const tfrdv_parsed_key* key, const char* task,
                                               size_t task_len, void* endpoint, const tfrdv_args* ra,
                                               tfrdv_done_fn done, void* user) {
    tfrdv_mgr* mgr = r->mgr;
    tfrdv_call* call = tfrdv__call_new(mgr, key->full.len + task_len + 2);
    int64_t now = 0;
    if (!call) return 0;
    if (mgr->cfg.call_timeout_ns > 0 || mgr->cfg.trace) now = tfrdv__now(&mgr->hooks.clock);
    memcpy(call->buf, key->full.ptr, key->full.len);
    call->buf[key->full.len] = 0;
    memcpy(call->buf + key->full.len + 1, task, task_len + 1);
    call->key.ptr = call->buf;
    call->key.len = key->full.len;
    call->worker.ptr = call->buf + key->full.len + 1;
    call->worker.len = task_len;
    call->endpoint = endpoint;
    call->step_id = r->step_id;
    call->recv_args = *ra;
    call->recv_args.key = call->key;
    call->done = done;
    call->user = user;
    call->t0 = mgr->cfg.trace ? now : 0;
    call->deadline = mgr->cfg.call_timeout_ns > 0 ? tfrdv__sat_add(now, mgr->cfg.call_timeout_ns) : INT64_MAX;
    call->r = r;
    tfrdv_ref(r);
    return call;
}
#ifndef TFRDV_NO_THREADS
/* tfrdv_recv lends its thread to the call's transport; 0: it cannot use it */
TFRDV__PRIVATE int tfrdv__call_wait(tfrdv_call* call, int64_t timeout_ns) {
    const tfrdv_transport* t = &call->mgr->cfg.transport;
    return t->wait(t->user, call, timeout_ns);
}
#endif
/* link the call into its step and start it (or complete it at once: aborted, cancelled) */
TFRDV__PRIVATE void tfrdv__call_launch(tfrdv_call* call) {
    tfrdv_rendezvous* r = call->r;
    tfrdv__lock(&r->mu);
    if (r->aborted) { /* aborted since the receive looked: complete at once, never start */
        tfrdv_args ra = call->recv_args;
        ra.key = call->key;
        call->state = TFRDV__CALL_DONE;
        tfrdv__unlock(&r->mu);
        tfrdv__fail_now(r, call->done, call->user, &ra, &r->status);
        tfrdv__call_recycle(call);
        return;
    }
    call->state = TFRDV__CALL_STARTED; /* starter: IDLE -> STARTED */
    call->busy = 1;
#ifndef TFRDV_NO_THREADS
    if (call->done == tfrdv__sync_done && call->mgr->cfg.transport.wait) { /* tfrdv_recv will lend its thread */
        call->busy++;
        ((tfrdv__sync_recv*)call->user)->call = call;
    }
#endif
    call->starting = 1;
    call->linked = 1;
    call->prev = 0;
    call->next = r->calls;
    if (r->calls) r->calls->prev = call;
    r->calls = call;
    if (call->recv_args.cancel)
        call->cm_registered = tfrdv_cancel_register(call->recv_args.cancel, &call->cnode, tfrdv__call_cancelled, call);
    if (call->recv_args.cancel && !call->cm_registered) {
        tfrdv_status st;
        tfrdv__err(&st, TFRDV_CANCELLED, "RecvFromRemoteAsync is cancelled.");
        call->state = TFRDV__CALL_BACKOFF; /* never started: nothing for the provider to cancel */
        call->starting = 0;
        tfrdv__call_take(call, &st, 0);
        call->busy--; /* the start that will not happen */
        tfrdv__unlock(&r->mu);
        tfrdv__call_complete(call);
        return;
    }
    tfrdv__unlock(&r->mu);
    tfrdv__call_start(call);
}
TFRDV__PRIVATE tfrdv_code tfrdv__remote_recv(tfrdv_rendezvous* r, const tfrdv_parsed_key* key,
                                             const tfrdv_args* args, tfrdv_done_fn done, void* user,
                                             tfrdv_status* est) {
    tfrdv_mgr* mgr = r->mgr;
    tfrdv_args ra = args ? *args : tfrdv__no_args;
    tfrdv_status st;
    tfrdv_call* call;
    char task[512];
    size_t task_len = 0;
    void* endpoint = 0;
    long init = tfrdv__atomic_load(&r->initialized);
    ra.key = key->full;
    if (tfrdv__atomic_load(&r->aborted)) {
        tfrdv__fail_now(r, done, user, &ra, &r->status);
        return TFRDV_OK;
    }
    if (!init)
        return tfrdv__err(est, TFRDV_FAILED_PRECONDITION, "tfrdv_recv_async before tfrdv_mgr_initialize (step %I, key %S)", r->step_id, &key->full);
    if (!tfrdv__on_worker(key->dst_device, r->worker, r->worker_len))
        return tfrdv__err(est, TFRDV_INVALID_ARGUMENT, "Invalid rendezvous key (dst): %S @ %s", &key->full, r->worker);
    if (tfrdv__implicit(&key->src) || tfrdv_device_name_same_address_space(&key->src, &key->dst))
        return tfrdv__recv_same_worker(r, key, args, done, user, est);
    /* another worker: a remote call */
    {
        tfrdv__sb tb; /* SplitDeviceName's task part, from the already parsed source device */
        tfrdv__sb_init(&tb, task, sizeof task);
        tfrdv__sb_task(&tb, &key->src);
        task_len = tb.len;
    }
    if (!key->src.has_type || !key->src.has_id || task_len == 0 || task_len >= sizeof task) {
        tfrdv__err(&st, TFRDV_INTERNAL, "%S is invalid remote source device.", &key->src_device);
        tfrdv__fail_now(r, done, user, &ra, &st);
        return TFRDV_OK;
    }
    if (mgr->cfg.resolve && !(endpoint = mgr->cfg.resolve(mgr->cfg.resolve_user, task, task_len))) {
        tfrdv__err(&st, TFRDV_INTERNAL, "No worker known as %s", task);
        tfrdv__fail_now(r, done, user, &ra, &st);
        return TFRDV_OK;
    }
    call = tfrdv__call_prepare(r, key, task, task_len, endpoint, &ra, done, user);
    if (!call) return tfrdv__err(est, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_recv_async: out of memory (key %S)", &key->full);
    tfrdv__call_launch(call);
    return TFRDV_OK;
}

TFRDV__PRIVATE int64_t tfrdv__backoff(const tfrdv_mgr* mgr, int attempt) {
    double b = (double)mgr->cfg.retry_backoff_ns;
    int i;
    for (i = 0; i < attempt && b < (double)mgr->cfg.retry_backoff_max_ns; i++) b *= 1.3;
    if (b > (double)mgr->cfg.retry_backoff_max_ns) b = (double)mgr->cfg.retry_backoff_max_ns;
    return b >= 9.2e18 ? INT64_MAX : (int64_t)b; /* (double)INT64_MAX does not convert back */
}

/* tfrdv_call_finish_status; with keep non-NULL, an OK answer whose receiver already has its answer
   (cancelled, aborted, timed out meanwhile) is not released: *keep receives it, for the provider
   to give back to the serving table (the loopback does; a network provider cannot) */
TFRDV__PRIVATE void tfrdv__call_finish(tfrdv_call* call, const tfrdv_status* status, tfrdv_value* value,
                                       int is_dead, tfrdv_value** keep, int* kept_dead) {
    tfrdv_rendezvous* r;
    tfrdv_mgr* mgr;
    const tfrdv_status* st = status ? status : &tfrdv__ok_status;
    tfrdv_code code = st->code;
    int64_t now;
    tfrdv_status bad;
    if (!call) {
        tfrdv_value_release(value);
        return;
    }
    if (code == TFRDV_OK && !value && !is_dead && call->r) { /* provider contract: a live value */
        tfrdv__err(&bad, TFRDV_INTERNAL, "tfrdv_call_finish: OK without a value for %S from %S (provider contract)",
                   &call->key, &call->worker);
        st = &bad;
        code = TFRDV_INTERNAL;
    }
    r = call->r; /* stable from start until the provider's finish */
    mgr = call->mgr;
    if (!r) { /* finished after it was recycled */
        tfrdv__atomic_add(&mgr->double_finishes, 1);
        TFRDV_ASSERT(0 && "tfrdv_call_finish: call finished twice (provider contract)");
        tfrdv_value_release(value);
        return;
    }
    /* the clock only for a possible retry, and never under the lock */
    now = code == TFRDV_UNAVAILABLE && mgr->cfg.call_max_retries > 0 ? tfrdv__now(&mgr->hooks.clock) : 0;
    tfrdv__lock(&r->mu);
    switch (call->state) {
    case TFRDV__CALL_STARTED:
        if (code == TFRDV_UNAVAILABLE && call->attempt < mgr->cfg.call_max_retries && !r->aborted &&
            tfrdv__sat_add(now, tfrdv__backoff(mgr, call->attempt)) < call->deadline) {
            call->state = TFRDV__CALL_BACKOFF; /* provider: STARTED -> BACKOFF, retried by expire() */
            call->retry_at = tfrdv__sat_add(now, tfrdv__backoff(mgr, call->attempt));
            tfrdv__unlock(&r->mu);
            tfrdv_value_release(value);
            return;
        }
        tfrdv__call_unlink(call);
        tfrdv__call_detach_cm(call, 0);
        call->state = TFRDV__CALL_DONE; /* provider: STARTED -> DONE, completes the user */
        tfrdv__status_copy(&call->result, st);
        call->busy++;
        tfrdv__hold(r);
        tfrdv__unlock(&r->mu);
        if (code != TFRDV_OK) {
            tfrdv_value_release(value);
            value = 0;
            is_dead = 0;
        }
        tfrdv__call_settle(call, 0, value, is_dead);
        return;
    case TFRDV__CALL_ORPHANED: {
        int rec;
        call->state = TFRDV__CALL_DONE; /* provider: ORPHANED -> DONE; the user already has an answer */
        rec = call->busy == 0;
        tfrdv__unlock(&r->mu);
        if (keep && code == TFRDV_OK && (value || is_dead)) {
            *keep = value;
            *kept_dead = is_dead;
        } else {
            tfrdv_value_release(value);
        }
        if (rec) tfrdv__call_recycle(call);
        return;
    }
    default: /* IDLE, BACKOFF or DONE: this attempt was already finished */
        tfrdv__unlock(&r->mu);
        tfrdv__atomic_add(&mgr->double_finishes, 1);
        TFRDV_ASSERT(0 && "tfrdv_call_finish: call finished twice (provider contract)");
        tfrdv_value_release(value);
        return;
    }
}

/* A provider's message may carry bytes its peer chose: a byte outside 0x20..0x7e becomes \xNN
   (a backslash stays, as text the transport escaped already must not change), cut at the status
   size before a split escape. Returns st itself when there is nothing to change, else tmp. */
TFRDV__PRIVATE const tfrdv_status* tfrdv__provider_status(const tfrdv_status* st, tfrdv_status* tmp) {
    const unsigned char* p;
    tfrdv__sb b;
    if (!st) return st;
    for (p = (const unsigned char*)st->msg; *p && *p >= 0x20 && *p <= 0x7e; p++) {
    }
    if (!*p) return st;
    tmp->code = st->code;
    tmp->detail = st->detail;
    tfrdv__sb_init(&b, tmp->msg, sizeof tmp->msg);
    tfrdv__sb_esc(&b, st->msg, strlen(st->msg), 2);
    return tmp;
}
TFRDV_API void tfrdv_call_finish(tfrdv_call* call, tfrdv_code code, const char* msg,
                                 tfrdv_value* value, int is_dead) {
    tfrdv_status st, tmp;
    tfrdv_status_set(&st, code, msg);
    tfrdv__call_finish(call, tfrdv__provider_status(&st, &tmp), value, is_dead, 0, 0);
}
TFRDV_API int tfrdv_call_finish_status(tfrdv_call* call, const tfrdv_status* status,
                                       tfrdv_value* value, int is_dead, int give_back) {
    tfrdv_value* kept = 0;
    int kept_dead = 0;
    tfrdv_status tmp;
    tfrdv__call_finish(call, tfrdv__provider_status(status, &tmp), value, is_dead, give_back ? &kept : 0,
                       &kept_dead);
    return kept || kept_dead;
}

TFRDV_API int64_t tfrdv_call_step_id(const tfrdv_call* call) { return call ? call->step_id : 0; }
TFRDV_API tfrdv_str tfrdv_call_key(const tfrdv_call* call) {
    tfrdv_str s = {0, 0};
    return call ? call->key : s;
}
TFRDV_API int64_t tfrdv_call_request_id(const tfrdv_call* call) { return call ? call->request_id : 0; }
TFRDV_API tfrdv_str tfrdv_call_src_worker(const tfrdv_call* call) {
    tfrdv_str s = {0, 0};
    return call ? call->worker : s;
}
TFRDV_API void* tfrdv_call_endpoint(const tfrdv_call* call) { return call ? call->endpoint : 0; }
TFRDV_API const tfrdv_args* tfrdv_call_recv_args(const tfrdv_call* call) { return call ? &call->recv_args : 0; }
TFRDV_API int tfrdv_call_attempt(const tfrdv_call* call) { return call ? call->attempt : 0; }
TFRDV_API int64_t tfrdv_call_deadline(const tfrdv_call* call) { return call ? call->deadline : INT64_MAX; }
TFRDV_API int tfrdv_call_will_wait(const tfrdv_call* call) {
#ifndef TFRDV_NO_THREADS
    return call && call->attempt == 0 && call->done == tfrdv__sync_done && call->mgr->cfg.transport.wait != 0;
#else
    TFRDV__UNUSED(call);
    return 0;
#endif
}
TFRDV_API tfrdv_mgr* tfrdv_call_mgr(const tfrdv_call* call) { return call ? call->mgr : 0; }
TFRDV_API void* tfrdv_call_scratch(tfrdv_call* call) { return call ? (void*)call->scratch.bytes : 0; }

typedef struct tfrdv__vblock { /* a value, its dims and its bytes in one allocation */
    tfrdv_value v;
    tfrdv_allocator a;
    size_t total;
} tfrdv__vblock;
TFRDV__PRIVATE void tfrdv__vblock_release(tfrdv_value* v) {
    tfrdv__vblock* b = (tfrdv__vblock*)(void*)v;
    tfrdv_allocator a = b->a;
    tfrdv__free(&a, b, b->total);
}
#if defined(TFRDV__HUGEPAGES)
/* A large block from malloc: ask for transparent huge pages on its 2 MiB-aligned interior (with
   THP in "madvise" mode, the common default, nothing else gets them). A hint: failure is fine. */
TFRDV__PRIVATE void tfrdv__huge_hint(void* p, size_t n) {
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + n) & ~(huge - 1);
    if (e > a) (void)madvise((void*)a, (size_t)(e - a), TFRDV__MADV_HUGEPAGE);
}
#else
TFRDV__PRIVATE void tfrdv__huge_hint(void* p, size_t n) { TFRDV__UNUSED(p); TFRDV__UNUSED(n); }
#endif
/* a value, a copy of its dims and room for size bytes (not initialised) in one block from a */
TFRDV__PRIVATE tfrdv_value* tfrdv__vblock_new(const tfrdv_allocator* a, int32_t dtype, int32_t rank,
                                              const int64_t* dims, uint64_t size) {
    tfrdv__vblock* b;
    size_t head, total;
    if (rank < 0 || (rank > 0 && !dims)) return 0;
    if ((uint64_t)rank > ((size_t)-1 - sizeof(tfrdv__vblock) - 15) / sizeof(int64_t)) return 0;
    head = (sizeof(tfrdv__vblock) + (size_t)rank * sizeof(int64_t) + 15) & ~(size_t)15;
    if (size > (uint64_t)((size_t)-1 - head)) return 0;
    total = head + (size_t)size;
    b = (tfrdv__vblock*)tfrdv__alloc(a, total);
    if (!b) return 0;
    if (!a->alloc_fn && total >= ((size_t)4 << 20)) tfrdv__huge_hint(b, total); /* built-in allocator only */
    memset(&b->v, 0, sizeof b->v);
    b->a = *a;
    b->total = total;
    if (rank) memcpy(b + 1, dims, (size_t)rank * sizeof(int64_t));
    b->v.dtype = dtype;
    b->v.rank = rank;
    b->v.dims = (const int64_t*)(void*)(b + 1);
    b->v.data = (char*)b + head;
    b->v.size = size;
    b->v.release = tfrdv__vblock_release;
    return &b->v;
}
TFRDV_API tfrdv_value* tfrdv_call_alloc_value(tfrdv_call* call, int32_t dtype, int32_t rank,
                                              const int64_t* dims, uint64_t size) {
    if (!call || rank < 0 || (rank > 0 && !dims)) return 0;
    if (call->recv_args.alloc_fn) return call->recv_args.alloc_fn(call->recv_args.alloc_user, dtype, rank, dims, size);
    return tfrdv__vblock_new(&call->mgr->hooks.allocator, dtype, rank, dims, size);
}

/* abort every remote call and deferred request of a step (after its status was set) */
TFRDV__PRIVATE void tfrdv__remote_abort(tfrdv_rendezvous* r) {
    tfrdv_call* list = 0;
    tfrdv_call* c;
    tfrdv__serve* def;
    tfrdv__lock(&r->mu);
    def = tfrdv__take_deferred(r, TFRDV__SERVE_DONE);
    while ((c = r->calls) != 0) {
        tfrdv__call_take(c, &r->status, 0);
        c->action = list;
        list = c;
    }
    tfrdv__unlock(&r->mu);
    while ((c = list) != 0) {
        list = c->action;
        tfrdv__call_complete(c);
    }
    while (def) {
        tfrdv__serve* nx = def->next;
        tfrdv__serve_finish(def, &r->status, 0, 0, 0);
        def = nx;
    }
}

/* deadlines of one step; mgr->mu held by the caller (lock order mgr -> r). Work to do after the
   locks are dropped goes onto *calls and *defs. */
TFRDV__PRIVATE int64_t tfrdv__rdv_expire_locked(tfrdv_rendezvous* r, int64_t now, tfrdv_call** calls,
                                                tfrdv__serve** defs, tfrdv_call** restarts, int* stray) {
    int64_t next = INT64_MAX;
    tfrdv__serve* op;
    tfrdv__serve* onx;
    tfrdv_call* c;
    tfrdv_call* nx;
    long expired = 0;
    tfrdv__lock(&r->mu);
    for (op = r->deferred; op; op = onx) {
        onx = op->next;
        if (op->deadline <= now) {
            tfrdv__serve_unlink(&r->deferred, op);
            tfrdv__serve_leave(op, TFRDV__SERVE_DONE);
            op->next = *defs;
            *defs = op;
            expired++;
        } else if (op->deadline < next) {
            next = op->deadline;
        }
    }
    for (c = r->calls; c; c = nx) {
        nx = c->next;
        if (c->deadline <= now) {
            tfrdv_status st;
            tfrdv__err(&st, TFRDV_DEADLINE_EXCEEDED, "RecvTensor for %S from %S timed out after %I ms (step %I, %d attempt(s))",
                       &c->key, &c->worker, (r->mgr->cfg.call_timeout_ns) / 1000000, r->step_id, c->attempt + 1);
            tfrdv__call_take(c, &st, 0);
            c->action = *calls;
            *calls = c;
        } else if (c->state == TFRDV__CALL_BACKOFF && c->retry_at <= now) {
            c->state = TFRDV__CALL_STARTED; /* expire: BACKOFF -> STARTED (retry, same request id) */
            c->attempt++;
            c->busy++;
            c->starting = 1;
            c->restart_next = *restarts;
            *restarts = c;
            if (c->deadline < next) next = c->deadline;
        } else {
            if (c->deadline < next) next = c->deadline;
            if (c->state == TFRDV__CALL_BACKOFF && c->retry_at < next) next = c->retry_at;
        }
    }
    /* a step created only by requests that expired: TensorFlow keeps it forever; we drop it */
    *stray = expired && tfrdv__step_unused(r, expired);
    tfrdv__unlock(&r->mu);
    return next;
}
/* mgr->mu held: the idle-step policy for r. *gone = 1 when r has been idle (no reference but the
   table's, nothing queued, deferred or called, no find since) for step_idle_timeout_ns; returns
   when it will have been, or INT64_MAX. A find is the only way to a reference, so an unchanged
   find count between two looks means nothing happened in between. */
TFRDV__PRIVATE int64_t tfrdv__idle_locked(tfrdv_mgr* mgr, tfrdv_rendezvous* r, int64_t now, int* gone) {
    int idle, i;
    tfrdv__lock(&r->mu);
    idle = !r->deferred && !r->calls && !r->aborted && tfrdv__atomic_load(&r->refs) == 1;
    tfrdv__unlock(&r->mu);
    for (i = 0; idle && i < r->nshards; i++) {
        tfrdv__shard* s = &r->shards[i];
        tfrdv__lock(&s->mu);
        idle = s->nchans == 0;
        tfrdv__unlock(&s->mu);
    }
    *gone = 0;
    if (!idle) {
        r->idle_since = 0;
        return INT64_MAX;
    }
    if (!r->idle_since || r->idle_touches != r->touches) {
        r->idle_since = now ? now : 1;
        r->idle_touches = r->touches;
    }
    if (now - r->idle_since >= mgr->cfg.step_idle_timeout_ns) {
        *gone = 1;
        return INT64_MAX;
    }
    return tfrdv__sat_add(r->idle_since, mgr->cfg.step_idle_timeout_ns);
}
/* two lists of dropped cache entries as one */
TFRDV__PRIVATE tfrdv__centry* tfrdv__cache_chain(tfrdv__centry* a, tfrdv__centry* b) {
    tfrdv__centry* t = b;
    if (!b) return a;
    while (t->next) t = t->next;
    t->next = a;
    return b;
}
TFRDV_API int64_t tfrdv_mgr_expire(tfrdv_mgr* mgr, int64_t now_ns) {
    int64_t next, t;
    size_t i;
    int acted;
    tfrdv_call* calls = 0;
    tfrdv_call* restarts = 0;
    tfrdv__serve* defs = 0;
    tfrdv_rendezvous* strays = 0;
    tfrdv_rendezvous* idles = 0;
    tfrdv__centry* idle_dropped = 0;
    if (!mgr) return INT64_MAX;
    tfrdv__mgr_ref(mgr); /* the callbacks below may destroy the manager (the caller's reference):
                            it stays until we are done */
    tfrdv__lock(&mgr->mu);
    next = tfrdv__idset_expire(&mgr->tombs, now_ns, mgr->cfg.tombstone_ttl_ns);
    for (i = 0; i < mgr->nb; i++) {
        tfrdv_rendezvous* r = mgr->steps[i];
        while (r) {
            tfrdv_rendezvous* nx = r->mgr_next;
            int stray = 0;
            t = tfrdv__rdv_expire_locked(r, now_ns, &calls, &defs, &restarts, &stray);
            if (t < next) next = t;
            if (!stray && mgr->cfg.step_idle_timeout_ns > 0) {
                t = tfrdv__idle_locked(mgr, r, now_ns, &stray);
                if (t < next) next = t;
                if (stray) { /* idle too long: cleaned up, tombstone and all */
                    tfrdv__unlink_step(mgr, r->step_id);
                    idle_dropped = tfrdv__cache_chain(idle_dropped, tfrdv__forget_locked(mgr, r->step_id, now_ns));
                    mgr->stats.steps_idle_cleaned++;
                    r->mgr_next = idles;
                    idles = r;
                    stray = 0;
                }
            }
            if (stray) {
                tfrdv__unlink_step(mgr, r->step_id);
                r->mgr_next = strays;
                strays = r;
            }
            r = nx;
        }
    }
    {
        tfrdv__serve* op;
        tfrdv_call* c;
        for (op = defs; op; op = op->next) mgr->stats.deferred_expired++;
        for (c = restarts; c; c = c->restart_next) mgr->stats.calls_retried++;
    }
    tfrdv__unlock(&mgr->mu);
    acted = defs || calls || restarts || strays || idles;
    tfrdv__forget_finish(mgr, 0, 0, idle_dropped, 0);
    while (idles) {
        tfrdv_rendezvous* r = idles;
        idles = r->mgr_next;
        r->mgr_next = 0;
        tfrdv__forget_finish(mgr, r, r->step_id, 0, "Cleanup (idle)");
    }
    while (defs) {
        tfrdv__serve* op = defs;
        tfrdv_status st;
        defs = op->next;
        tfrdv__err(&st, TFRDV_DEADLINE_EXCEEDED, "RecvTensor for step %I, key %S: the step was not initialised on this worker within %I ms",
                   op->step_id, &op->parsed.full, mgr->cfg.deferred_timeout_ns / 1000000);
        tfrdv__serve_finish(op, &st, 0, 0, 0);
    }
    while (calls) {
        tfrdv_call* c = calls;
        calls = c->action;
        tfrdv__call_complete(c);
    }
    while (restarts) {
        tfrdv_call* c = restarts;
        restarts = c->restart_next;
        tfrdv__call_start(c);
    }
    while (strays) {
        tfrdv_rendezvous* r = strays;
        strays = r->mgr_next;
        tfrdv_unref(r); /* the table's reference */
    }
    if (acted) { /* what we did (a retry failing again at once, a tombstone) may have set new deadlines */
        tfrdv__lock(&mgr->mu);
        t = tfrdv__idset_expire(&mgr->tombs, now_ns, mgr->cfg.tombstone_ttl_ns);
        if (t < next) next = t;
        for (i = 0; i < mgr->nb; i++) {
            tfrdv_rendezvous* r;
            for (r = mgr->steps[i]; r; r = r->mgr_next) {
                tfrdv__serve* op;
                tfrdv_call* c;
                tfrdv__lock(&r->mu);
                for (op = r->deferred; op; op = op->next)
                    if (op->deadline < next) next = op->deadline;
                for (c = r->calls; c; c = c->next) {
                    if (c->deadline < next) next = c->deadline;
                    if (c->state == TFRDV__CALL_BACKOFF && c->retry_at < next) next = c->retry_at;
                }
                tfrdv__unlock(&r->mu);
            }
        }
        tfrdv__unlock(&mgr->mu);
    }
    t = tfrdv__drains_expire(mgr, now_ns);
    tfrdv__mgr_unref(mgr);
    return t < next ? t : next;
}

TFRDV__PRIVATE void tfrdv__remote_snap(tfrdv_rendezvous* r, tfrdv__snap* s) {
    tfrdv__serve* op;
    tfrdv_call* c;
    tfrdv__lock(&r->mu);
    for (op = r->deferred; op; op = op->next) tfrdv__snap_add(s, r->step_id, TFRDV_PENDING_DEFERRED, "", 0, op->key, op->parsed.full.len, 1);
    for (c = r->calls; c; c = c->next) tfrdv__snap_add(s, r->step_id, TFRDV_PENDING_REMOTE_CALL, "", 0, c->key.ptr, c->key.len, 1);
    tfrdv__unlock(&r->mu);
}
TFRDV_API size_t tfrdv_mgr_pending(tfrdv_mgr* mgr, tfrdv_pending_fn fn, void* user) {
    tfrdv__snap snap;
    size_t i;
    if (!mgr) return 0;
    memset(&snap, 0, sizeof snap);
    snap.a = mgr->hooks.allocator;
    tfrdv__lock(&mgr->mu); /* lock order mgr -> step -> shard */
    for (i = 0; i < mgr->nb; i++) {
        tfrdv_rendezvous* r;
        for (r = mgr->steps[i]; r; r = r->mgr_next) tfrdv__rdv_snap(r, &snap);
    }
    tfrdv__unlock(&mgr->mu);
    return tfrdv__snap_report(&snap, fn, user);
}

/* >>loopback */
typedef struct tfrdv__lb_req { /* one fetch being served by another manager of the loopback */
    struct tfrdv__lb_req* next;
    struct tfrdv__lb_req *lprev, *lnext; /* lb->live while call is set (lb->mu) */
    tfrdv_call* dcall;    /* the call tfrdv_loopback_destroy took, to finish it */
    tfrdv_loopback* lb;   /* a reference while the request is live */
    tfrdv_call* call;     /* NULL once answered or cancelled (lb->mu) */
    tfrdv_cancel_mgr* cm; /* withdraws the served request when the call is cancelled */
    int refs;             /* the serve answer + a canceller running (lb->mu) */
    /* what an answer that found its call cancelled gives back (tfrdv_mgr_serve_return) */
    tfrdv_mgr* target;    /* a reference until the answer */
    int64_t step_id, request_id;
    char* key;
    size_t key_len, key_cap;
} tfrdv__lb_req;
typedef struct tfrdv__lb_worker {
    char* name;
    size_t len;
    tfrdv_mgr* mgr;
} tfrdv__lb_worker;
#define TFRDV__LB_FREE_MAX 256
struct tfrdv_loopback {
    tfrdv_hooks hooks;
    volatile long refs; /* the owner's, each transport vtable's, each live request's */
    int destroyed;      /* lb->mu */
    tfrdv__mutex mu;
    tfrdv__lb_worker* w;
    size_t n, cap;
    tfrdv__lb_req* free_reqs;
    size_t nfree;
    tfrdv__lb_req* live; /* requests whose call is not finished yet: destroy finishes them */
};

TFRDV__PRIVATE void tfrdv__lb_req_unref(tfrdv__lb_req* q);
/* q's call, taken (lb->mu held): out of the live list, its scratch cleared; NULL if gone */
TFRDV__PRIVATE tfrdv_call* tfrdv__lb_take_call(tfrdv_loopback* lb, tfrdv__lb_req* q) {
    tfrdv_call* call = q->call;
    if (!call) return 0;
    q->call = 0;
    *(tfrdv__lb_req**)tfrdv_call_scratch(call) = 0;
    if (q->lprev) q->lprev->lnext = q->lnext;
    else lb->live = q->lnext;
    if (q->lnext) q->lnext->lprev = q->lprev;
    q->lprev = q->lnext = 0;
    return call;
}

TFRDV_API tfrdv_code tfrdv_loopback_create(const tfrdv_hooks* hooks, tfrdv_loopback** out,
                                           tfrdv_status* st) {
    tfrdv_loopback* lb;
    tfrdv_hooks h;
    if (!out) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_loopback_create: NULL out");
    *out = 0;
    if (hooks) h = *hooks;
    else memset(&h, 0, sizeof h);
    if (!tfrdv__allocator_ok(&h.allocator) || !tfrdv__sync_ok(h.sync))
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_loopback_create: incomplete allocator or sync hooks");
    lb = (tfrdv_loopback*)tfrdv__zalloc(&h.allocator, sizeof *lb);
    if (!lb) return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_loopback_create: out of memory");
    lb->hooks = h;
    lb->refs = 1;
    if (!tfrdv__mutex_init(&lb->mu, h.sync)) {
        tfrdv__free(&h.allocator, lb, sizeof *lb);
        return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_loopback_create: mutex init failed");
    }
    *out = lb;
    return TFRDV_OK;
}
TFRDV__PRIVATE void tfrdv__lb_req_free(tfrdv_loopback* lb, tfrdv__lb_req* q) {
    tfrdv_cancel_mgr_destroy(q->cm);
    tfrdv__free(&lb->hooks.allocator, q->key, q->key_cap);
    tfrdv__free(&lb->hooks.allocator, q, sizeof *q);
}
TFRDV__PRIVATE void tfrdv__lb_unref(void* p) {
    tfrdv_loopback* lb = (tfrdv_loopback*)p;
    if (tfrdv__atomic_add(&lb->refs, -1) != 0) return;
    TFRDV_ASSERT(lb->destroyed && "tfrdv_loopback: more destroys than references (a vtable's destroy called by hand?)");
    tfrdv__free(&lb->hooks.allocator, lb->w, lb->cap * sizeof *lb->w);
    while (lb->free_reqs) {
        tfrdv__lb_req* q = lb->free_reqs;
        lb->free_reqs = q->next;
        tfrdv__lb_req_free(lb, q);
    }
    tfrdv__mutex_destroy(&lb->mu);
    tfrdv__free(&lb->hooks.allocator, lb, sizeof *lb);
}
TFRDV_API void tfrdv_loopback_destroy(tfrdv_loopback* lb) {
    tfrdv__lb_worker* w;
    size_t i, n;
    tfrdv__lb_req *q, *taken = 0;
    if (!lb) return;
    tfrdv__lock(&lb->mu); /* forget every worker: later fetches fail UNAVAILABLE */
    lb->destroyed = 1;
    w = lb->w;
    n = lb->n;
    lb->n = 0;
    while ((q = lb->live) != 0) { /* the calls in flight finish here (CANCELLED) */
        q->dcall = tfrdv__lb_take_call(lb, q); /* nobody else finds it any more */
        q->refs++;
        q->next = taken; /* free only at refs 0: the link is ours until the unref */
        taken = q;
    }
    tfrdv__unlock(&lb->mu);
    while ((q = taken) != 0) {
        tfrdv_call* c = q->dcall;
        taken = q->next;
        q->dcall = 0;
        tfrdv_cancel_start(q->cm); /* the serving manager withdraws it; a value stays there */
        tfrdv__lb_req_unref(q);
        tfrdv_call_finish(c, TFRDV_CANCELLED, "loopback: the transport was destroyed", 0, 0);
    }
    for (i = 0; i < n; i++) {
        tfrdv__free(&lb->hooks.allocator, w[i].name, w[i].len + 1);
        tfrdv__mgr_unref(w[i].mgr);
    }
    tfrdv__lb_unref(lb); /* the owner's: managers still using it keep it until they go */
}
TFRDV_API tfrdv_code tfrdv_loopback_register(tfrdv_loopback* lb, const char* worker_name,
                                             tfrdv_mgr* mgr, tfrdv_status* st) {
    size_t i, len;
    tfrdv_mgr* old = 0;
    char* name_to_free = 0;
    size_t name_len = 0;
    if (!lb || !worker_name) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_loopback_register: NULL loopback or worker name");
    len = strlen(worker_name);
    tfrdv__lock(&lb->mu);
    if (lb->destroyed) {
        tfrdv__unlock(&lb->mu);
        return tfrdv__err(st, TFRDV_FAILED_PRECONDITION, "tfrdv_loopback_register: the loopback is destroyed");
    }
    for (i = 0; i < lb->n && !(lb->w[i].len == len && memcmp(lb->w[i].name, worker_name, len) == 0); i++) {}
    if (i < lb->n) {
        old = lb->w[i].mgr;
        if (mgr) {
            tfrdv__mgr_ref(mgr);
            lb->w[i].mgr = mgr;
        } else {
            name_to_free = lb->w[i].name;
            name_len = lb->w[i].len;
            lb->w[i] = lb->w[--lb->n];
        }
    } else if (mgr) {
        char* name = (char*)tfrdv__alloc(&lb->hooks.allocator, len + 1);
        if (lb->n == lb->cap) {
            size_t nc = lb->cap ? lb->cap * 2 : 4;
            tfrdv__lb_worker* nw = (tfrdv__lb_worker*)tfrdv__alloc(&lb->hooks.allocator, nc * sizeof *nw);
            if (!nw || !name) {
                tfrdv__unlock(&lb->mu);
                tfrdv__free(&lb->hooks.allocator, nw, nc * sizeof *nw);
                tfrdv__free(&lb->hooks.allocator, name, len + 1);
                return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_loopback_register: out of memory");
            }
            if (lb->n) memcpy(nw, lb->w, lb->n * sizeof *nw);
            tfrdv__free(&lb->hooks.allocator, lb->w, lb->cap * sizeof *nw);
            lb->w = nw;
            lb->cap = nc;
        }
        if (!name) {
            tfrdv__unlock(&lb->mu);
            return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_loopback_register: out of memory");
        }
        memcpy(name, worker_name, len + 1);
        tfrdv__mgr_ref(mgr);
        lb->w[lb->n].name = name;
        lb->w[lb->n].len = len;
        lb->w[lb->n].mgr = mgr;
        lb->n++;
    }
    tfrdv__unlock(&lb->mu);
    tfrdv__free(&lb->hooks.allocator, name_to_free, name_len + 1);
    if (old) tfrdv__mgr_unref(old);
    return TFRDV_OK;
}
/* lb->mu held: a request record with its cancellation manager (recycled) */
TFRDV__PRIVATE tfrdv__lb_req* tfrdv__lb_req_get(tfrdv_loopback* lb) {
    tfrdv__lb_req* q = lb->free_reqs;
    if (q) {
        lb->free_reqs = q->next;
        lb->nfree--;
        return q;
    }
    q = (tfrdv__lb_req*)tfrdv__zalloc(&lb->hooks.allocator, sizeof *q);
    if (q && tfrdv_cancel_mgr_create(&lb->hooks, &q->cm, 0) != TFRDV_OK) {
        tfrdv__free(&lb->hooks.allocator, q, sizeof *q);
        q = 0;
    }
    return q;
}
TFRDV__PRIVATE void tfrdv__lb_req_unref(tfrdv__lb_req* q) {
    tfrdv_loopback* lb = q->lb;
    int last, keep = 0;
    tfrdv__lock(&lb->mu);
    last = --q->refs == 0;
    if (last && lb->nfree < TFRDV__LB_FREE_MAX && tfrdv_cancel_mgr_reset(q->cm) == TFRDV_OK) {
        q->next = lb->free_reqs;
        lb->free_reqs = q;
        lb->nfree++;
        keep = 1;
    }
    tfrdv__unlock(&lb->mu);
    if (!last) return;
    if (!keep) tfrdv__lb_req_free(lb, q);
    tfrdv__lb_unref(lb); /* the live request's */
}
/* The serving manager's answer. The value goes to the call, or back to the serving table when
   the call no longer wants it (cancelled before or while it was delivered): nothing is lost. */
TFRDV__PRIVATE void tfrdv__lb_served(void* u, const tfrdv_status* st, const tfrdv_args* sa, tfrdv_value* v, int dead) {
    tfrdv__lb_req* q = (tfrdv__lb_req*)u;
    tfrdv_loopback* lb = q->lb;
    tfrdv_mgr* target = q->target;
    tfrdv_value* back = 0; /* to give back */
    tfrdv_value* copy = 0; /* v copied into the receiver's memory */
    int back_dead = 0;
    tfrdv_call* call;
    tfrdv__lock(&lb->mu);
    call = tfrdv__lb_take_call(lb, q);
    tfrdv__unlock(&lb->mu);
    if (st->code != TFRDV_OK) {
        tfrdv_value_release(v);
        if (call) tfrdv_call_finish_status(call, st, 0, 0, 0);
    } else if (!call) { /* cancelled while the answer was on its way */
        back = v;
        back_dead = dead;
    } else if (v && tfrdv_call_recv_args(call)->alloc_fn) {
        /* the receiver chose where the bytes land: copy into it, as a network transport would */
        copy = tfrdv_call_alloc_value(call, v->dtype, v->rank, v->dims, v->size);
        if (!copy || copy->size < v->size || (v->size && !copy->data)) {
            tfrdv_value_release(copy);
            tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "loopback: the receiver's alloc hook gave no memory", 0, 0);
            back = v; /* not delivered: the table's again */
            back_dead = dead;
        } else {
            if (v->size) memcpy(copy->data, v->data, (size_t)v->size);
            if (tfrdv_call_finish_status(call, st, copy, dead, 1)) { /* the receiver gave up meanwhile */
                tfrdv_value_release(copy);
                back = v; /* the original goes back */
                back_dead = dead;
            } else {
                tfrdv_value_release(v);
            }
        }
    } else if (tfrdv_call_finish_status(call, st, v, dead, 1)) {
        back = v;
        back_dead = dead;
    }
    if (back || back_dead)
        tfrdv_mgr_serve_return(target, q->step_id, q->key, q->key_len, q->request_id, sa, back, back_dead, 0);
    else if (st->code == TFRDV_OK)
        tfrdv_mgr_serve_delivered(target, q->request_id); /* the receiver has it */
    q->target = 0;
    tfrdv__lb_req_unref(q);
    tfrdv__mgr_unref(target);
}
TFRDV__PRIVATE void tfrdv__lb_start(void* user, tfrdv_call* call) {
    tfrdv_loopback* lb = (tfrdv_loopback*)user;
    tfrdv_str w = tfrdv_call_src_worker(call);
    tfrdv_str key = tfrdv_call_key(call);
    tfrdv_mgr* target = 0;
    tfrdv__lb_req* q = 0;
    size_t i;
    tfrdv__lock(&lb->mu);
    for (i = 0; i < lb->n; i++) {
        if (lb->w[i].len == w.len && memcmp(lb->w[i].name, w.ptr, w.len) == 0) {
            target = lb->w[i].mgr;
            tfrdv__mgr_ref(target); /* until the answer */
            break;
        }
    }
    if (target && (q = tfrdv__lb_req_get(lb)) != 0 && q->key_cap < key.len) { /* the key, for a give-back */
        char* nk = (char*)tfrdv__alloc(&lb->hooks.allocator, key.len);
        if (nk) {
            tfrdv__free(&lb->hooks.allocator, q->key, q->key_cap);
            q->key = nk;
            q->key_cap = key.len;
        } else {
            q->next = lb->free_reqs; /* back to the free list (it may exceed the cap by one) */
            lb->free_reqs = q;
            lb->nfree++;
            q = 0;
        }
    }
    if (q) {
        q->lb = lb;
        q->call = call;
        q->refs = 1; /* the serve answer */
        q->target = target;
        q->step_id = tfrdv_call_step_id(call);
        q->request_id = tfrdv_call_request_id(call);
        q->key_len = key.len;
        if (key.len) memcpy(q->key, key.ptr, key.len);
        tfrdv__atomic_add(&lb->refs, 1); /* the live request's */
        *(tfrdv__lb_req**)tfrdv_call_scratch(call) = q;
        q->lprev = 0;
        q->lnext = lb->live;
        if (lb->live) lb->live->lprev = q;
        lb->live = q;
    }
    tfrdv__unlock(&lb->mu);
    if (!target) {
        tfrdv_status st;
        tfrdv__err(&st, TFRDV_UNAVAILABLE, "loopback: no worker registered as %S", &w);
        tfrdv_call_finish(call, st.code, st.msg, 0, 0);
        return;
    }
    if (!q) {
        tfrdv__mgr_unref(target);
        tfrdv_call_finish(call, TFRDV_RESOURCE_EXHAUSTED, "loopback: out of memory", 0, 0);
        return;
    }
    tfrdv_mgr_serve_ex(target, q->step_id, q->key, q->key_len, q->request_id, TFRDV_SERVE_CONFIRMS, q->cm,
                       tfrdv__lb_served, q);
}
/* the fetch was cancelled: withdraw the served request (a value sent later stays buffered on the
   serving worker, as with a network transport whose client cancels its RPC) */
TFRDV__PRIVATE void tfrdv__lb_cancel(void* user, tfrdv_call* call) {
    tfrdv_loopback* lb = (tfrdv_loopback*)user;
    tfrdv__lb_req* q;
    tfrdv_call* c = 0;
    tfrdv__lock(&lb->mu);
    q = *(tfrdv__lb_req**)tfrdv_call_scratch(call);
    if (q) {
        c = tfrdv__lb_take_call(lb, q);
        q->refs++;
    }
    tfrdv__unlock(&lb->mu);
    if (!q) return;
    tfrdv_cancel_start(q->cm); /* the serve answer (CANCELLED) finds no call and is dropped */
    tfrdv__lb_req_unref(q);
    if (c) tfrdv_call_finish(c, TFRDV_CANCELLED, "loopback: call cancelled", 0, 0);
}
TFRDV__PRIVATE void tfrdv__lb_ref(void* p) { tfrdv__atomic_add(&((tfrdv_loopback*)p)->refs, 1); }
/* a registered worker's incarnation (in-process: registered or not, nothing to wait for) */
TFRDV__PRIVATE tfrdv_code tfrdv__lb_peer_inc(void* user, tfrdv_mgr* mgr, tfrdv_str w, int64_t timeout_ns, uint64_t* inc,
                                             tfrdv_status* st) {
    tfrdv_loopback* lb = (tfrdv_loopback*)user;
    size_t i;
    (void)mgr;
    (void)timeout_ns;
    tfrdv__lock(&lb->mu);
    for (i = 0; i < lb->n; i++) {
        if (lb->w[i].len == w.len && memcmp(lb->w[i].name, w.ptr, w.len) == 0) {
            *inc = tfrdv_mgr_incarnation(lb->w[i].mgr);
            tfrdv__unlock(&lb->mu);
            return tfrdv__err(st, TFRDV_OK, "");
        }
    }
    tfrdv__unlock(&lb->mu);
    return tfrdv__err(st, TFRDV_NOT_FOUND, "loopback: no worker registered as %S", &w);
}
TFRDV_API tfrdv_transport tfrdv_loopback_transport(tfrdv_loopback* lb) {
    tfrdv_transport t;
    memset(&t, 0, sizeof t);
    if (!lb) return t; /* no transport: a manager given it has no remote workers */
    t.peer_incarnation = tfrdv__lb_peer_inc;
    t.user = lb;
    t.start_call = tfrdv__lb_start;
    t.cancel_call = tfrdv__lb_cancel;
    t.destroy = tfrdv__lb_unref;
    t.ref = tfrdv__lb_ref; /* each manager holds lb (TRANSPORTS) */
    return t;
}

/* >>router */
#define TFRDV__ROUTES_MAX 64
typedef struct tfrdv__route {
    tfrdv_device_name dn; /* views into pattern */
    char* pattern;
    size_t len;
    int all;
    tfrdv_transport t;
} tfrdv__route;
typedef struct tfrdv__router {
    tfrdv_allocator a;
    int (*pick)(void* user, const char* worker, size_t len);
    void* pick_user;
    size_t n;
    tfrdv__route r[1]; /* n of them */
} tfrdv__router;
TFRDV__PRIVATE size_t tfrdv__router_bytes(size_t n) { return sizeof(tfrdv__router) + (n - 1) * sizeof(tfrdv__route); }
TFRDV__PRIVATE int tfrdv__route_matches(const tfrdv__route* rt, const tfrdv_device_name* w) {
    if (rt->all) return 1;
    if (rt->dn.has_job && (!w->has_job || rt->dn.job.len != w->job.len || memcmp(rt->dn.job.ptr, w->job.ptr, w->job.len) != 0))
        return 0;
    if (rt->dn.has_replica && (!w->has_replica || rt->dn.replica != w->replica)) return 0;
    if (rt->dn.has_task && (!w->has_task || rt->dn.task != w->task)) return 0;
    return 1;
}
/* the route of worker w, or -1 (st says why) */
TFRDV__PRIVATE int tfrdv__router_pick(tfrdv__router* rt, tfrdv_str w, tfrdv_status* st) {
    tfrdv_device_name dn;
    size_t i;
    if (rt->pick) {
        int k = rt->pick(rt->pick_user, w.ptr, w.len);
        if (k >= 0 && (size_t)k < rt->n) return k;
        if (k != -1) {
            tfrdv__err(st, TFRDV_INTERNAL, "tfrdv router: pick answered route %d for worker %S (%d routes)", k, &w, (int)rt->n);
            return -1;
        }
    }
    if (tfrdv_device_parse(w.ptr, w.len, &dn, st) == TFRDV_OK)
        for (i = 0; i < rt->n; i++)
            if (tfrdv__route_matches(&rt->r[i], &dn)) return (int)i;
    tfrdv__err(st, TFRDV_INTERNAL, "tfrdv router: no route for worker %S", &w);
    return -1;
}
TFRDV__PRIVATE void tfrdv__router_start(void* user, tfrdv_call* call) {
    tfrdv__router* rt = (tfrdv__router*)user;
    tfrdv_status st;
    int k = tfrdv__router_pick(rt, tfrdv_call_src_worker(call), &st);
    tfrdv__atomic_store(&call->route, k);
    if (k < 0) tfrdv_call_finish_status(call, &st, 0, 0, 0);
    else rt->r[k].t.start_call(rt->r[k].t.user, call);
}
TFRDV__PRIVATE void tfrdv__router_cancel(void* user, tfrdv_call* call) {
    tfrdv__router* rt = (tfrdv__router*)user;
    long k = tfrdv__atomic_load(&call->route); /* set by the start this cancellation follows */
    if (k >= 0 && (size_t)k < rt->n) rt->r[k].t.cancel_call(rt->r[k].t.user, call);
}
TFRDV__PRIVATE int tfrdv__router_wait(void* user, tfrdv_call* call, int64_t timeout_ns) {
    tfrdv__router* rt = (tfrdv__router*)user;
    long k = tfrdv__atomic_load(&call->route); /* a call in back-off keeps its last start's route */
    if (k < 0 || (size_t)k >= rt->n || !rt->r[k].t.wait) return 0;
    return rt->r[k].t.wait(rt->r[k].t.user, call, timeout_ns);
}
/* route i's transport is the first route with it (one transport may serve several routes) */
TFRDV__PRIVATE int tfrdv__route_distinct(const tfrdv__router* rt, size_t i) {
    size_t j;
    for (j = 0; j < i; j++)
        if (rt->r[j].t.user == rt->r[i].t.user && rt->r[j].t.destroy == rt->r[i].t.destroy) return 0;
    return 1;
}
TFRDV__PRIVATE void tfrdv__router_bind(void* user, tfrdv_mgr* mgr, int bound) {
    tfrdv__router* rt = (tfrdv__router*)user;
    size_t i;
    for (i = 0; i < rt->n; i++)
        if (rt->r[i].t.bind && tfrdv__route_distinct(rt, i)) rt->r[i].t.bind(rt->r[i].t.user, mgr, bound);
}
TFRDV__PRIVATE tfrdv_code tfrdv__router_peer_inc(void* user, tfrdv_mgr* mgr, tfrdv_str w, int64_t timeout_ns,
                                                 uint64_t* inc, tfrdv_status* st) {
    tfrdv__router* rt = (tfrdv__router*)user;
    tfrdv_status ps;
    int k = tfrdv__router_pick(rt, w, &ps);
    if (k < 0) return tfrdv__err(st, TFRDV_NOT_FOUND, "%s", ps.msg);
    if (!rt->r[k].t.peer_incarnation)
        return tfrdv__err(st, TFRDV_UNIMPLEMENTED, "tfrdv router: the transport of route %d cannot tell %S's incarnation", k, &w);
    return rt->r[k].t.peer_incarnation(rt->r[k].t.user, mgr, w, timeout_ns, inc, st);
}
TFRDV__PRIVATE void tfrdv__router_destroy(void* user) {
    tfrdv__router* rt = (tfrdv__router*)user;
    tfrdv_allocator a = rt->a;
    size_t i;
    for (i = 0; i < rt->n; i++) {
        tfrdv_transport* t = &rt->r[i].t;
        if (t->destroy && tfrdv__route_distinct(rt, i)) t->destroy(t->user);
    }
    for (i = 0; i < rt->n; i++) tfrdv__free(&a, rt->r[i].pattern, rt->r[i].len + 1);
    tfrdv__free(&a, rt, tfrdv__router_bytes(rt->n));
}
TFRDV_API tfrdv_router_config tfrdv_router_config_init(void) {
    tfrdv_router_config c;
    memset(&c, 0, sizeof c);
    return c;
}
TFRDV_API tfrdv_code tfrdv_router_create(const tfrdv_router_config* cfg, tfrdv_transport* out,
                                         tfrdv_status* st) {
    tfrdv__router* rt;
    tfrdv_allocator a;
    size_t i;
    if (!cfg || !out) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_router_create: NULL config or out");
    memset(out, 0, sizeof *out);
    a = cfg->hooks.allocator;
    if (!tfrdv__allocator_ok(&a)) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_router_create: incomplete allocator hooks");
    if (cfg->num_routes < 1 || cfg->num_routes > TFRDV__ROUTES_MAX)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_router_create: num_routes must be 1..%d (got %U)", TFRDV__ROUTES_MAX, (uint64_t)cfg->num_routes);
    if (!cfg->routes) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_router_create: NULL routes (num_routes %U)", (uint64_t)cfg->num_routes);
    for (i = 0; i < cfg->num_routes; i++) {
        const tfrdv_route* r = &cfg->routes[i];
        const char* p = r->workers ? r->workers : "";
        tfrdv_device_name dn;
        tfrdv_status pst;
        if (!r->transport.start_call || !r->transport.cancel_call)
            return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_router_create: route %d (\"%s\") has no start_call or cancel_call", (int)i, p);
        if (strcmp(p, "*") != 0 && tfrdv_device_parse(p, strlen(p), &dn, &pst) != TFRDV_OK)
            return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_router_create: route %d: %s", (int)i, pst.msg);
    }
    rt = (tfrdv__router*)tfrdv__zalloc(&a, tfrdv__router_bytes(cfg->num_routes));
    if (!rt) return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_router_create: out of memory");
    rt->a = a;
    rt->pick = cfg->pick;
    rt->pick_user = cfg->pick_user;
    for (i = 0; i < cfg->num_routes; i++) {
        tfrdv__route* d = &rt->r[i];
        const char* p = cfg->routes[i].workers ? cfg->routes[i].workers : "";
        d->len = strlen(p);
        d->pattern = (char*)tfrdv__alloc(&a, d->len + 1);
        if (!d->pattern) {
            rt->n = i; /* frees the patterns copied so far, destroys nothing: no transport is ours yet */
            while (i--) tfrdv__free(&a, rt->r[i].pattern, rt->r[i].len + 1);
            tfrdv__free(&a, rt, tfrdv__router_bytes(cfg->num_routes));
            return tfrdv__err(st, TFRDV_RESOURCE_EXHAUSTED, "tfrdv_router_create: out of memory");
        }
        memcpy(d->pattern, p, d->len + 1);
        d->all = strcmp(p, "*") == 0;
        if (!d->all) tfrdv_device_parse(d->pattern, d->len, &d->dn, 0); /* checked above */
        d->t = cfg->routes[i].transport;
    }
    rt->n = cfg->num_routes;
    for (i = 0; i < rt->n; i++) /* a reference of the router's own on each distinct transport that
                                   counts them (destroy drops it, as a manager's would) */
        if (rt->r[i].t.ref && tfrdv__route_distinct(rt, i)) rt->r[i].t.ref(rt->r[i].t.user);
    out->user = rt;
    out->start_call = tfrdv__router_start;
    out->cancel_call = tfrdv__router_cancel;
    out->destroy = tfrdv__router_destroy;
    for (i = 0; i < rt->n; i++) { /* lend waiting threads only when some route can use them */
        if (rt->r[i].t.wait) out->wait = tfrdv__router_wait;
        if (rt->r[i].t.bind) out->bind = tfrdv__router_bind;
        if (rt->r[i].t.peer_incarnation) out->peer_incarnation = tfrdv__router_peer_inc;
    }
    return TFRDV_OK;
}

/* >>helpers  values with their own storage, keys that own their bytes, one-call workers and steps */
TFRDV_API tfrdv_value* tfrdv_value_new(const tfrdv_allocator* allocator, int32_t dtype,
                                       int32_t rank, const int64_t* dims, const void* data,
                                       uint64_t size) {
    tfrdv_value* v;
    tfrdv_allocator a;
    if (!tfrdv__allocator_ok(allocator)) return 0;
    if (allocator) a = *allocator;
    else memset(&a, 0, sizeof a);
    v = tfrdv__vblock_new(&a, dtype, rank, dims, size);
    if (v && size) {
        if (data) memcpy(v->data, data, (size_t)size);
        else memset(v->data, 0, (size_t)size);
    }
    return v;
}
TFRDV_API tfrdv_value tfrdv_value_make(int32_t dtype, int32_t rank, const int64_t* dims,
                                       void* data, uint64_t size,
                                       void (*release)(tfrdv_value* v), void* user) {
    tfrdv_value v;
    memset(&v, 0, sizeof v);
    v.dtype = dtype;
    v.rank = rank;
    v.dims = dims;
    v.data = data;
    v.size = size;
    v.release = release;
    v.user = user;
    return v;
}

TFRDV__PRIVATE void tfrdv__key_clear(tfrdv_key* k) {
    memset(&k->parsed, 0, sizeof k->parsed);
    k->parsed.full.ptr = k->buf;
    k->len = 0;
    k->buf[0] = 0;
}
/* k->buf holds len bytes of key text: terminate and parse it in place */
TFRDV__PRIVATE tfrdv_code tfrdv__key_finish(tfrdv_key* k, tfrdv_code rc, size_t len,
                                            tfrdv_status* st) {
    if (rc == TFRDV_RESOURCE_EXHAUSTED)
        rc = tfrdv__err(st, rc, "key too long for a tfrdv_key: %U bytes, at most %U (build it with "
                        "tfrdv_key_create into a larger buffer)", (uint64_t)len, (uint64_t)(TFRDV_KEY_MAX - 1));
    if (rc == TFRDV_OK) {
        k->buf[len] = 0;
        rc = tfrdv_key_parse(k->buf, len, &k->parsed, st);
    }
    if (rc != TFRDV_OK) {
        tfrdv__key_clear(k);
        return rc;
    }
    k->len = len;
    return TFRDV_OK;
}
TFRDV_API tfrdv_code tfrdv_key_make(tfrdv_key* k, const char* src_device,
                                    uint64_t src_incarnation, const char* dst_device,
                                    const char* edge_name, tfrdv_frame_iter frame_iter,
                                    tfrdv_status* st) {
    size_t len = 0;
    tfrdv_code rc;
    if (!k) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_key_make: NULL key");
    rc = tfrdv_key_create(src_device, src_incarnation, dst_device, edge_name, frame_iter, k->buf,
                          sizeof k->buf, &len, st);
    return tfrdv__key_finish(k, rc, len, st);
}
TFRDV_API tfrdv_code tfrdv_key_from(tfrdv_key* k, const char* text, size_t len, tfrdv_status* st) {
    tfrdv_code rc = TFRDV_OK;
    if (!k || (!text && len)) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_key_from: NULL argument");
    if (len >= sizeof k->buf) rc = TFRDV_RESOURCE_EXHAUSTED;
    else if (text != k->buf) memmove(k->buf, text, len);
    return tfrdv__key_finish(k, rc, len, st);
}
TFRDV_API tfrdv_code tfrdv_key_make_frame(tfrdv_key* k, const tfrdv_key* base,
                                          tfrdv_frame_iter frame_iter, tfrdv_status* st) {
    size_t plen, len = 0;
    tfrdv_code rc;
    if (!k || !base) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_key_make_frame: NULL key");
    if (base->len == 0 || base->parsed.frame_iter.ptr <= base->buf ||
        base->parsed.frame_iter.ptr >= base->buf + base->len) /* empty, or copied with = */
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_key_make_frame: base is not a parsed key");
    plen = (size_t)(base->parsed.frame_iter.ptr - base->buf) - 1; /* "src;inc;dst;edge" */
    if (k != base) memcpy(k->buf, base->buf, plen);
    rc = tfrdv_key_with_frame(k->buf, plen, frame_iter, k->buf, sizeof k->buf, &len, st);
    return tfrdv__key_finish(k, rc, len, st);
}

TFRDV_API tfrdv_code tfrdv_loopback_add_worker(tfrdv_loopback* lb, const char* worker_name,
                                               const tfrdv_mgr_config* cfg, tfrdv_mgr** out,
                                               tfrdv_status* st) {
    tfrdv_mgr_config c = cfg ? *cfg : tfrdv_mgr_config_init();
    tfrdv_code rc;
    if (!out) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_loopback_add_worker: NULL out");
    *out = 0;
    if (!lb || !worker_name)
        return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_loopback_add_worker: NULL loopback or worker name");
    c.worker_name = worker_name;
    c.transport = tfrdv_loopback_transport(lb);
    rc = tfrdv_mgr_create(&c, out, st);
    if (rc != TFRDV_OK) return rc;
    rc = tfrdv_loopback_register(lb, worker_name, *out, st);
    if (rc != TFRDV_OK) {
        tfrdv_mgr_destroy(*out);
        *out = 0;
    }
    return rc;
}
TFRDV_API tfrdv_code tfrdv_mgr_start_step(tfrdv_mgr* mgr, int64_t step_id, tfrdv_rendezvous** out,
                                          tfrdv_status* st) {
    tfrdv_code rc;
    if (!out) return tfrdv__err(st, TFRDV_INVALID_ARGUMENT, "tfrdv_mgr_start_step: NULL out");
    rc = tfrdv_mgr_find(mgr, step_id, out, st);
    if (rc != TFRDV_OK) {
        *out = 0;
        return rc;
    }
    rc = tfrdv_mgr_initialize(*out, 0, st);
    if (rc != TFRDV_OK) {
        tfrdv_unref(*out);
        *out = 0;
    }
    return rc;
}

#ifdef __cplusplus
}
#endif

#undef TFRDV__PRIVATE
#undef TFRDV__HOT
#undef TFRDV__COLD
#undef TFRDV__DEF
#undef TFRDV__UNUSED
#undef TFRDV__EAT
#undef TFRDV__FRAME_MAX
#undef TFRDV__TLS
#undef TFRDV__CACHE_BUCKETS
#undef TFRDV__WITHDRAWN
#undef TFRDV__LB_FREE_MAX
#undef TFRDV__ROUTES_MAX
#undef TFRDV__SHRINK_FROM
#undef TFRDV__CHAN_KEY
#undef TFRDV__CHAN_KEEP_MAX
#undef TFRDV__CHAN_KEY_MAX
#undef TFRDV__CHAN_FREE_DEF
#undef TFRDV__PFX_BYTES
#undef TFRDV__PFX_WAYS
#undef TFRDV__PFX_MIN
#undef TFRDV__PFX_MAX
#undef TFRDV__PFX_FROM
#undef TFRDV__HAS_FRAMES
#undef TFRDV__HAS_POSIX
#undef TFRDV__FUTEX
#undef TFRDV__MB_QUERY
#undef TFRDV__PARK_SLOTS
#undef TFRDV__SPIN
#undef TFRDV__RX
#undef TFRDV__MB_PRIVATE_EXPEDITED
#undef TFRDV__MB_REGISTER_PRIVATE_EXPEDITED
#undef TFRDV__HUGEPAGES
#undef TFRDV__MADV_HUGEPAGE
#undef TFRDV__HAS_WIN32
#undef TFRDV__HAS_NONE
#undef TFRDV__HAS_CUSTOM
#endif /* TFRDV_IMPLEMENTATION */

/*
------------------------------------------------------------------------------
This software is available under 2 licenses -- choose whichever you prefer.
------------------------------------------------------------------------------
ALTERNATIVE A - MIT License
Copyright (c) 2026 the tfrdv authors
Permission is hereby granted, free of charge, to any person obtaining a copy of
this software and associated documentation files (the "Software"), to deal in
the Software without restriction, including without limitation the rights to
use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
of the Software, and to permit persons to whom the Software is furnished to do
so, subject to the following conditions:
The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
ALTERNATIVE B - Public Domain (www.unlicense.org)
This is free and unencumbered software released into the public domain.
Anyone is free to copy, modify, publish, use, compile, sell, or distribute this
software, either in source code form or as a compiled binary, for any purpose,
commercial or non-commercial, and by any means.
In jurisdictions that recognize copyright laws, the author or authors of this
software dedicate any and all copyright interest in the software to the public
domain. We make this dedication in recognition of the many efforts of one or
more authors of this software, and in anticipation of continued use of this
software and that they will be enabled to do so. THE SOFTWARE IS PROVIDED
"AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
------------------------------------------------------------------------------
*/
