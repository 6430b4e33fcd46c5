/* standin_test.h - helpers of the verbs suites that run the whole implementation on the stand-in
   libibverbs (tests/verbs/standinverbs.c, built beside the test binary): test_verbs.c and
   test_verbs_adversary.c. Workers on the stand-in, a sender and a fetcher, hostile TCP bootstrap
   peers. Include after tfrdv_verbs.h, tt.h and fixtures.h, with TT_HAVE_IBV defined; the suite's
   main sets `standin` to the library's path. */
#ifndef TFRDV_STANDIN_TEST_H
#define TFRDV_STANDIN_TEST_H
#define SI_FN static __attribute__((unused)) /* each suite uses some of them */
#include <dlfcn.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TT_SI_SANITIZED 1
#endif
#endif
#ifndef TT_SI_SANITIZED
#define TT_SI_SANITIZED 0
#endif
static char standin[1024];
static long (*standin_live_mrs)(void);
static void (*standin_bad_rkeys)(int on); /* devices opened meanwhile advertise wrong rkeys */

SI_FN void sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000;
    nanosleep(&ts, 0);
}
SI_FN int standin_ok(void) {
    void* h;
    if (!standin_live_mrs) {
        h = dlopen(standin, RTLD_NOW | RTLD_LOCAL);
        if (h) *(void**)&standin_live_mrs = dlsym(h, "standin_live_mrs");
        if (h) *(void**)&standin_bad_rkeys = dlsym(h, "standin_bad_rkeys");
    }
    if (!standin_live_mrs || !standin_bad_rkeys) printf("    the stand-in libibverbs %s cannot be loaded: %s\n", standin, dlerror());
    TT_CHECK(standin_live_mrs != 0 && standin_bad_rkeys != 0);
    return standin_live_mrs != 0 && standin_bad_rkeys != 0;
}

#include "verbs_test.h"
static int si_corrupt;        /* the next siw_make advertises bad rkeys (standin_bad_rkeys) */
static tfrdv_allocator si_alloc, si_mgr_alloc; /* and allocates through these */
static int64_t si_call_timeout_ns;              /* and times calls out after this (0: 20 s) */
static int64_t si_backoff_ns; /* and uses this reconnect_backoff_ns */
static tfrdv_logger si_logger; /* and logs through this */
static const tfrdv_worker* si_workers; /* and has this worker table */
static size_t si_nworkers;
/* a worker on the stand-in libibverbs */
SI_FN int siw_make(worker* w, int task, int thread, int port, int64_t connect_timeout_ns) {
    wopts o;
    tfrdv_status st;
    int ok;
    memset(&o, 0, sizeof o);
    o.library = standin;
    o.listen_port = port;
    o.no_thread = !thread;
    o.connect_timeout_ns = connect_timeout_ns;
    o.reconnect_backoff_ns = si_backoff_ns;
    o.call_timeout_ns = si_call_timeout_ns ? si_call_timeout_ns : (int64_t)20 * 1000000000;
    o.alloc = si_alloc;
    o.mgr_alloc = si_mgr_alloc;
    o.logger = si_logger;
    o.workers = si_workers;
    o.num_workers = si_nworkers;
    si_workers = 0;
    si_nworkers = 0;
    memset(&si_logger, 0, sizeof si_logger);
    si_backoff_ns = 0;
    si_call_timeout_ns = 0;
    memset(&si_alloc, 0, sizeof si_alloc);
    memset(&si_mgr_alloc, 0, sizeof si_mgr_alloc);
    if (si_corrupt && standin_bad_rkeys) standin_bad_rkeys(1); /* the device this worker opens */
    si_corrupt = 0;
    ok = mk_worker(w, task, &o, &st);
    if (standin_bad_rkeys) standin_bad_rkeys(0);
    if (!ok) {
        printf("    worker: %s\n", st.msg);
        if (w->m) tfrdv_mgr_destroy(w->m);
        if (w->v) tfrdv_verbs_destroy(w->v);
        memset(w, 0, sizeof *w);
        return 0;
    }
    return 1;
}
static void si_val_free(tfrdv_value* v) { free(v); }
/* src sends n bytes (byte i = i * 3 + seed) under edge at step */
SI_FN int si_send(worker* src, int dst, int64_t step, const char* edge, uint64_t n, int seed) {
    tfrdv_rendezvous* r = 0;
    tfrdv_parsed_key k;
    char kb[256];
    tfrdv_status st;
    tfrdv_value* v = (tfrdv_value*)malloc(sizeof *v + 8 + n);
    int64_t* dims = (int64_t*)(v + 1);
    uint64_t i;
    int ok;
    memset(v, 0, sizeof *v);
    dims[0] = (int64_t)n;
    v->dtype = TFRDV_DT_UINT8;
    v->rank = 1;
    v->dims = dims;
    v->data = dims + 1;
    v->size = n;
    v->release = si_val_free;
    for (i = 0; i < n; i++) ((uint8_t*)v->data)[i] = (uint8_t)(i * 3 + (uint64_t)seed);
    mk_key(&k, kb, sizeof kb, atoi(strrchr(src->name, ':') + 1), dst, edge);
    ok = tfrdv_mgr_find(src->m, step, &r, &st) == TFRDV_OK && tfrdv_mgr_initialize(r, 0, &st) == TFRDV_OK &&
         tfrdv_send(r, &k, 0, v, 0, &st) == TFRDV_OK;
    if (!ok) {
        printf("    send %s: %s\n", edge, st.msg);
        tfrdv_value_release(v);
    }
    if (r) tfrdv_unref(r);
    return ok;
}
typedef struct si_fetch {
    pthread_mutex_t mu;
    int calls;
    tfrdv_status st;
    tfrdv_value* val;
} si_fetch;
SI_FN void si_done(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    si_fetch* f = (si_fetch*)user;
    (void)sa;
    (void)ra;
    (void)dead;
    pthread_mutex_lock(&f->mu);
    f->calls++;
    f->st = *st;
    if (f->val) tfrdv_value_release(f->val);
    f->val = v;
    pthread_mutex_unlock(&f->mu);
}
/* dst starts fetching edge at step from task src */
SI_FN int si_fetch_start(worker* dst, int src, int64_t step, const char* edge, si_fetch* f) {
    tfrdv_rendezvous* r = 0;
    tfrdv_parsed_key k;
    char kb[256];
    tfrdv_status st;
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, 0);
    mk_key(&k, kb, sizeof kb, src, atoi(strrchr(dst->name, ':') + 1), edge);
    if (tfrdv_mgr_find(dst->m, step, &r, &st) != TFRDV_OK || tfrdv_mgr_initialize(r, 0, &st) != TFRDV_OK ||
        tfrdv_recv_async(r, &k, 0, si_done, f, 0) != TFRDV_OK) {
        printf("    recv %s: %s\n", edge, st.msg);
        if (r) tfrdv_unref(r);
        return 0;
    }
    tfrdv_unref(r);
    return 1;
}
/* waits for the fetch's result (up to 20 s); returns its code */
SI_FN tfrdv_code si_fetch_end(si_fetch* f) {
    int i, calls = 0;
    for (i = 0; i < 20000 && !calls; i++) {
        pthread_mutex_lock(&f->mu);
        calls = f->calls;
        pthread_mutex_unlock(&f->mu);
        if (!calls) sleep_ms(1);
    }
    return calls ? f->st.code : TFRDV_DEADLINE_EXCEEDED;
}
SI_FN tfrdv_code si_fetch_wait(worker* dst, int src, int64_t step, const char* edge, si_fetch* f) {
    return si_fetch_start(dst, src, step, edge, f) ? si_fetch_end(f) : TFRDV_INTERNAL;
}
SI_FN void si_fetch_fini(si_fetch* f) {
    tfrdv_value_release(f->val);
    f->val = 0;
    pthread_mutex_destroy(&f->mu);
}
SI_FN int si_bytes_ok(const tfrdv_value* v, uint64_t n, int seed) {
    uint64_t i;
    if (!v || v->size != n) return 0;
    for (i = 0; i < n; i++)
        if (((const uint8_t*)v->data)[i] != (uint8_t)(i * 3 + (uint64_t)seed)) return 0;
    return 1;
}

/* a hostile TCP peer of the bootstrap listener */
SI_FN int tcp_to(int port) {
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr*)&sa, sizeof sa) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}
/* a well-formed bootstrap frame (u32 length + info) claiming to be worker `who` */
SI_FN size_t hello(uint8_t* buf, size_t cap, const char* who) {
    tfrdv_verbs_info in;
    size_t n;
    memset(&in, 0, sizeof in);
    in.qpn = 0xabcde;
    in.psn = 1;
    in.mtu = 1024;
    in.ctrl_addr = 0x10000;
    in.ctrl_rkey = 1;
    in.ctrl_slots = 8;
    in.ctrl_slot_size = 4096;
    in.max_requests = 8;
    snprintf(in.worker, sizeof in.worker, "%s", who);
    n = tfrdv_verbs_info_encode(&in, buf + 4, cap - 4);
    tfrdv_verbs__put32(buf, (uint32_t)n);
    return n ? n + 4 : 0;
}
/* 1: the listener closed fd (EOF/reset), 0: still open and silent, 2: bytes waiting */
SI_FN int peer_state(int fd) {
    char c;
    ssize_t k = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return 1;
    return k > 0 ? 2 : 0;
}
SI_FN long rss_kib(void) {
    long pages = 0, rss = 0;
    FILE* f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

#endif
