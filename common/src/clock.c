#include "rl/clock.h"

#include <time.h>

int64_t
rl_clock_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double
rl_clock_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct timespec
rl_clock_after(clockid_t clock, int64_t ms)
{
    struct timespec ts;

    if (ms < 0)
        ms = 0;
    clock_gettime(clock, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

int
rl_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *lock, int64_t ms)
{
    struct timespec until = rl_clock_after(CLOCK_REALTIME, ms);

    return pthread_cond_timedwait(cond, lock, &until);
}
