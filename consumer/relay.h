#ifndef RL_RELAY_H
#define RL_RELAY_H

#include <stdatomic.h>

#include "rl/config.h"

struct rl_counters;
struct rl_http;

/* The relay: runs until *stop is set (relay.c). http (may be NULL)
 * receives delivery latency and, in `runledger relay`, liveness.
 * Returns 0, or non-zero after a fatal error. */
int rl_relay_run(const struct rl_config *cfg, atomic_int *stop,
                 struct rl_counters *counters, struct rl_http *http);

#endif /* RL_RELAY_H */
