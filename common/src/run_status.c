/* The one table between enum rl_run_status and the ledger's text. */
#include "rl/run_status.h"

#include <string.h>

#include "rl/err.h"

static const char *const run_status_names[] = {
    [RL_RUN_PENDING] = "pending",
    [RL_RUN_RUNNING] = "running",
    [RL_RUN_COMPLETED] = "completed",
    [RL_RUN_FAILED] = "failed",
    [RL_RUN_UNKNOWN] = "unknown",
    [RL_RUN_AWAITING_APPROVAL] = "awaiting_approval",
    [RL_RUN_CANCELLED] = "cancelled",
};

#define RUN_STATUS_COUNT                                                       \
    (sizeof(run_status_names) / sizeof(run_status_names[0]))

const char *
rl_run_status_name(enum rl_run_status status)
{
    if ((unsigned)status < RUN_STATUS_COUNT)
        return run_status_names[status];
    return "invalid";
}

int
rl_run_status_parse(const char *text, enum rl_run_status *status)
{
    if (!text)
        return RL_ERR_INVALID;
    for (size_t i = 0; i < RUN_STATUS_COUNT; i++) {
        if (strcmp(text, run_status_names[i]) == 0) {
            *status = (enum rl_run_status)i;
            return 0;
        }
    }
    return RL_ERR_INVALID;
}
