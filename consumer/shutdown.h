/* The consumer's shutdown: SIGTERM and SIGINT taken by a thread of their
 * own, and a watchdog that ends the process at the grace period plus
 * RL_SHUTDOWN_MARGIN_SECONDS whatever a library is doing. */
#ifndef RL_SHUTDOWN_H
#define RL_SHUTDOWN_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "rl/config.h"

/* Past the grace period: the room for the bounded steps after it (the
 * last completions, the offsets commit, closing the consumer, flushing
 * the producers) before the watchdog ends the process. The chart's
 * terminationGracePeriodSeconds leaves a few seconds more. */
#define RL_SHUTDOWN_MARGIN_SECONDS 10

/* The bound of each step after the grace period. */
#define RL_SHUTDOWN_COMMIT_MS 3000
#define RL_SHUTDOWN_CLOSE_MS 3000
#define RL_SHUTDOWN_FLUSH_MS 2000
#define RL_SHUTDOWN_DESTROY_MS 3000

/* The exit status when the watchdog or a second signal ends the process. */
#define RL_EXIT_SHUTDOWN_FORCED 1

struct rl_shutdown;

/* Blocks SIGTERM and SIGINT in the calling thread, so every thread
 * started after it (librdkafka's, libcurl's, the service's) inherits the
 * mask, and starts the thread that waits for them. The first signal
 * calls wake(opaque) and starts the watchdog; a second one releases the
 * leases cfg->worker_id holds (one statement on a connection of its
 * own) and exits at once. Call before starting any other thread.
 * Returns NULL with errstr set when the thread cannot start. */
struct rl_shutdown *rl_shutdown_start(const struct rl_config *cfg,
                                      void (*wake)(void *), void *opaque,
                                      char *errstr, size_t errstr_size);

/* The first signal's number, 0 before any. @locality any thread */
int rl_shutdown_signal(const struct rl_shutdown *sd);

/* Names the step the process is in, for the watchdog's log line (a
 * string literal). @locality any thread */
void rl_shutdown_phase(struct rl_shutdown *sd, const char *phase);

/* rd_kafka_destroy_flags(rk, flags) on a thread of its own, waited for at
 * most timeout_ms: returns 1 when it returned in time, 0 when the process
 * goes on without it (the thread and the handle end with the process).
 * What the process must keep, it committed and flushed before. */
int rl_shutdown_destroy_kafka(rd_kafka_t *rk, int flags, int timeout_ms);

/* Stops the signal thread from touching cfg and the wake's opaque, which
 * the caller is about to free. The threads themselves end with the
 * process. */
void rl_shutdown_finish(struct rl_shutdown *sd);

#endif /* RL_SHUTDOWN_H */
