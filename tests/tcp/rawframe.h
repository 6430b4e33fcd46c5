/* rawframe.h - what the tfrdv_tcp.h suites (test_tcp.c, test_tcp_samehost.c,
   test_tcp_adversary.c) share: their worker names, and raw peers: whole frames written and read
   on a plain socket with the header's own codec (tfrdv_tcp_encode / tfrdv_tcp_decode), and the
   sockets such a peer uses (a TCP connection to 127.0.0.1, a listener there, an abstract Unix
   address), to play a hostile or older client or server.
   Include after tfrdv_tcp.h (with _GNU_SOURCE defined first). Every function is static inline:
   a suite that does not use one pays nothing for it. */
#ifndef TFRDV_TESTS_RAWFRAME_H
#define TFRDV_TESTS_RAWFRAME_H
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PS "/job:ps/replica:0/task:0"
#define WK "/job:worker/replica:0/task:0"
#define PS_DEV PS "/device:CPU:0"
#define WK_DEV WK "/device:CPU:0"
#define PS_INC 0x5151ULL
#define SEC 1000000000LL

static inline void sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    nanosleep(&ts, 0);
}

/* all n bytes to fd (a socket or a pipe; ignore SIGPIPE in the test's main): 1, or 0 when the
   other end is gone */
static inline int wr_full(int fd, const void* p, size_t n) {
    size_t put = 0;
    while (put < n) {
        ssize_t k = write(fd, (const char*)p + put, n - put);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        put += (size_t)k;
    }
    return 1;
}
/* one frame, encoded (at most 8 KiB) and written whole */
static inline void raw_put(int fd, const tfrdv_tcp_frame* f) {
    uint8_t b[8192];
    size_t n = tfrdv_tcp_encode(f, b, sizeof b);
    (void)wr_full(fd, b, n);
}
/* a HELLO of that protocol version from worker name with incarnation inc */
static inline void raw_hello(int fd, int version, const char* name, uint64_t inc) {
    tfrdv_tcp_frame f;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_HELLO;
    f.version = (uint16_t)version;
    f.incarnation = inc;
    f.name.ptr = name;
    f.name.len = strlen(name);
    raw_put(fd, &f);
}
/* a SAMEHOST frame with these flags and n bytes */
static inline void raw_sh(int fd, uint32_t flags, const void* bytes, size_t n) {
    tfrdv_tcp_frame f;
    memset(&f, 0, sizeof f);
    f.type = TFRDV_TCP_SAMEHOST;
    f.sh_flags = flags;
    f.message.ptr = (const char*)bytes;
    f.message.len = n;
    raw_put(fd, &f);
}
typedef struct rawbuf { uint8_t b[1 << 16]; size_t len; } rawbuf;
/* the next whole frame from fd into f (its value bytes skipped). keep (when not NULL) gets a
   SAMEHOST's or CLOSE's bytes, NUL-terminated (at most cap - 1), and f->message points there;
   without keep f->message points into rb, valid until the next call. 1, or 0 at EOF, on
   garbage, or when nothing came for wait_ms (< 0: no limit) */
static inline int raw_next(int fd, rawbuf* rb, tfrdv_tcp_frame* f, char* keep, size_t cap, int wait_ms) {
    for (;;) {
        tfrdv_status st;
        long used = tfrdv_tcp_decode(rb->b, rb->len, 0, f, &st);
        ssize_t k;
        struct pollfd pf;
        if (used < 0) return 0;
        if (used > 0 && rb->len >= (size_t)used + f->data_len) {
            size_t total = (size_t)used + (size_t)f->data_len, m = 0;
            if (keep && (f->type == TFRDV_TCP_SAMEHOST || f->type == TFRDV_TCP_CLOSE)) {
                m = f->message.len < cap - 1 ? f->message.len : cap - 1;
                memcpy(keep, f->message.ptr, m);
                f->message.ptr = keep;
                f->message.len = m;
            }
            if (keep) keep[m] = 0;
            memmove(rb->b, rb->b + total, rb->len - total);
            rb->len -= total;
            return 1;
        }
        pf.fd = fd;
        pf.events = POLLIN;
        pf.revents = 0;
        if (poll(&pf, 1, wait_ms) <= 0) return 0;
        k = recv(fd, rb->b + rb->len, sizeof rb->b - rb->len, 0);
        if (k <= 0) return 0;
        rb->len += (size_t)k;
    }
}
/* a TCP connection to 127.0.0.1 at the port of addr ("host:port"); -1 if refused */
static inline int raw_tcp(const char* addr) {
    struct sockaddr_in in;
    const char* colon = strrchr(addr, ':');
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&in, 0, sizeof in);
    in.sin_family = AF_INET;
    in.sin_port = htons((uint16_t)atoi(colon ? colon + 1 : "0"));
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr*)&in, sizeof in) != 0) { close(fd); return -1; }
    return fd;
}
/* the address of the abstract Unix name "@name" into un; its length */
static inline socklen_t abstract_addr(struct sockaddr_un* un, const char* at) {
    size_t n = strlen(at);
    memset(un, 0, sizeof *un);
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path + 1, at + 1, n - 1);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
}
/* a connection to the abstract Unix address "@name"; -1 if refused */
static inline int raw_abstract(const char* at) {
    struct sockaddr_un un;
    socklen_t l = abstract_addr(&un, at);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr*)&un, l) != 0) { close(fd); return -1; }
    return fd;
}
/* a listening socket on 127.0.0.1 (a port of its own) and its address "127.0.0.1:<port>"; -1 if
   it cannot be made */
static inline int loop_listen(char* addr, size_t cap) {
    struct sockaddr_in in;
    socklen_t l = sizeof in;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&in, 0, sizeof in);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr*)&in, sizeof in) != 0 || listen(fd, 4) != 0 || getsockname(fd, (struct sockaddr*)&in, &l) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    snprintf(addr, cap, "127.0.0.1:%d", (int)ntohs(in.sin_port));
    return fd;
}
#endif
