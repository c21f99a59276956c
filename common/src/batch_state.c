/* The one table between enum rl_batch_state and the ledger's text, and
 * the one between enum rl_batch_run_state and its. */
#include "rl/batch_state.h"

#include <string.h>

#include "rl/err.h"

/* In the order of the enums, which is the order of the schema's CHECK
 * constraints. */
static const char *const batch_state_names[] = {
    "intent", "submitted", "completed", "failed", "expired", "cancelled"};
static const char *const batch_run_state_names[] = {
    "waiting", "in_batch", "completed", "ignored",
    "failed",  "retried",  "go_live"};

#define COUNT(names) (sizeof(names) / sizeof(names[0]))

_Static_assert(COUNT(batch_state_names) == RL_BATCH_STATE_COUNT,
               "a name for each batch state");
_Static_assert(COUNT(batch_run_state_names) == RL_BATCH_RUN_GO_LIVE + 1,
               "a name for each state of a batch's run");

/* names[value], or "invalid" past the table. */
static const char *
name_of(const char *const *names, size_t n, unsigned value)
{
    return value < n ? names[value] : "invalid";
}

const char *
rl_batch_state_name(enum rl_batch_state state)
{
    return name_of(batch_state_names, COUNT(batch_state_names),
                   (unsigned)state);
}

const char *
rl_batch_run_state_name(enum rl_batch_run_state state)
{
    return name_of(batch_run_state_names, COUNT(batch_run_state_names),
                   (unsigned)state);
}

int
rl_batch_run_state_parse(const char *text, enum rl_batch_run_state *state)
{
    for (size_t i = 0; text && i < COUNT(batch_run_state_names); i++) {
        if (strcmp(text, batch_run_state_names[i]) == 0) {
            *state = (enum rl_batch_run_state)i;
            return 0;
        }
    }
    return RL_ERR_INVALID;
}
