/* logcap.h - a logger hook that keeps what it is given, for suites that check what a transport
   logs (test_tcp, test_tcp_samehost, test_tcp_adversary): each message followed by '|' in one
   buffer, under a mutex (transports log from their own threads). Include after tfrdv.h. */
#ifndef LOGCAP_H
#define LOGCAP_H
#include <pthread.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define LOGCAP_FN static __attribute__((unused))
#else
#define LOGCAP_FN static
#endif

static pthread_mutex_t logmu = PTHREAD_MUTEX_INITIALIZER;
static char logbuf[16384];
static size_t loglen;
/* tfrdv_hooks.logger.fn */
LOGCAP_FN void log_capture(void* u, int level, const char* msg) {
    size_t n = strlen(msg);
    (void)u; (void)level;
    pthread_mutex_lock(&logmu);
    if (loglen + n + 2 < sizeof logbuf) { memcpy(logbuf + loglen, msg, n); loglen += n; logbuf[loglen++] = '|'; }
    logbuf[loglen] = 0;
    pthread_mutex_unlock(&logmu);
}
LOGCAP_FN void log_reset(void) {
    pthread_mutex_lock(&logmu);
    loglen = 0;
    logbuf[0] = 0;
    pthread_mutex_unlock(&logmu);
}
/* how many times needle was logged since the last reset */
LOGCAP_FN int log_count(const char* needle) {
    int n = 0;
    const char* p;
    pthread_mutex_lock(&logmu);
    for (p = logbuf; (p = strstr(p, needle)) != 0; p++) n++;
    pthread_mutex_unlock(&logmu);
    return n;
}
#endif
