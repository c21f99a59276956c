#ifndef RL_CLOCK_H
#define RL_CLOCK_H

#include <stdint.h>

/* The one monotonic clock of the process. Intervals, deadlines and latency
 * figures use it, never the wall clock, so an NTP step cannot stretch or
 * shorten a wait. */

/* Milliseconds since an arbitrary fixed point. Thread-safe. */
int64_t rl_clock_ms(void);

/* Seconds since the same point, with sub-millisecond resolution, for
 * latency histograms. Thread-safe. */
double rl_clock_seconds(void);

#endif /* RL_CLOCK_H */
