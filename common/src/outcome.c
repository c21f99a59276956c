/* The one table between enum rl_outcome and the ledger's text. */
#include "rl/outcome.h"

#include <stddef.h>

static const char *const outcome_names[] = {
    [RL_OUTCOME_OK] = "ok",
    [RL_OUTCOME_TRANSIENT] = "transient",
    [RL_OUTCOME_PERMANENT] = "permanent",
    [RL_OUTCOME_AMBIGUOUS] = "ambiguous",
    [RL_OUTCOME_INVALID_OUTPUT] = "invalid_output",
    [RL_OUTCOME_NOT_SENT] = "not_sent",
    [RL_OUTCOME_CONNECT_FAILED] = "connect_failed",
    [RL_OUTCOME_CANCELLED] = "cancelled",
    [RL_OUTCOME_LEASE_LOST] = "lease_lost",
};

#define OUTCOME_COUNT (sizeof(outcome_names) / sizeof(outcome_names[0]))

const char *
rl_outcome_name(enum rl_outcome outcome)
{
    if ((unsigned)outcome < OUTCOME_COUNT)
        return outcome_names[outcome];
    return NULL;
}
