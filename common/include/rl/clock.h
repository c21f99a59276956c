#ifndef RL_CLOCK_H
#define RL_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* The one monotonic clock of the process. Intervals, deadlines and latency
 * figures use it, never the wall clock, so an NTP step cannot stretch or
 * shorten a wait. */

/* Milliseconds since an arbitrary fixed point. Thread-safe. */
int64_t rl_clock_ms(void);

/* Seconds since the same point, with sub-millisecond resolution, for
 * latency histograms. Thread-safe. */
double rl_clock_seconds(void);

/* The moment ms milliseconds from now on clock (CLOCK_REALTIME for a
 * condition variable with default attributes, CLOCK_MONOTONIC for one
 * whose attributes name it), as pthread_cond_timedwait takes it: a wait
 * that loops over spurious wake-ups computes it once. ms < 0 counts as
 * 0. Thread-safe. */
struct timespec rl_clock_after(clockid_t clock, int64_t ms);

/* Waits on cond (default attributes: the realtime clock), lock held, at
 * most ms milliseconds; returns pthread_cond_timedwait's result (0 when
 * woken, ETIMEDOUT). One call: a caller that needs its condition true
 * checks it again. */
int rl_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *lock, int64_t ms);

#endif /* RL_CLOCK_H */
