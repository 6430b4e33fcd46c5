/* countwait.h - tests only: wait on a condition variable until a completion count reaches n. */
#ifndef TFRDV_TEST_COUNTWAIT_H
#define TFRDV_TEST_COUNTWAIT_H
#include <pthread.h>
#include <time.h>
/* 1 when *count (guarded by mu, signalled on cv) reached n within timeout_ns */
static inline int count_wait(pthread_mutex_t* mu, pthread_cond_t* cv, const int* count, int n, int64_t timeout_ns) {
    struct timespec ts;
    int ok;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(timeout_ns / 1000000000);
    ts.tv_nsec += (long)(timeout_ns % 1000000000);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(mu);
    while (*count < n)
        if (pthread_cond_timedwait(cv, mu, &ts) != 0) break;
    ok = *count >= n;
    pthread_mutex_unlock(mu);
    return ok;
}
#endif
