/* rl/batch_state.h: the tables between the batch enums and the ledger's
 * text are the schema's CHECK constraints (batches_state,
 * batch_runs_state), value for value and in the enums' order, and a run's
 * state in its batch reads back what it prints. */
#include <stddef.h>

#include "rl/batch_state.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_schema.h"

static void
test_batch_states_are_the_schemas(void)
{
    char names[16][32];
    size_t n = rltest_schema_values("batches_state", names, 16);

    RL_CHECK_INTEQ(n, RL_BATCH_STATE_COUNT);
    for (size_t i = 0; i < n; i++)
        RL_CHECK_STREQ(rl_batch_state_name((enum rl_batch_state)i), names[i]);
    RL_CHECK_STREQ(
        rl_batch_state_name((enum rl_batch_state)RL_BATCH_STATE_COUNT),
        "invalid");
}

static void
test_run_states_are_the_schemas_and_read_back(void)
{
    char names[16][32];
    size_t n = rltest_schema_values("batch_runs_state", names, 16);

    RL_CHECK_INTEQ(n, RL_BATCH_RUN_GO_LIVE + 1);
    for (size_t i = 0; i < n; i++) {
        enum rl_batch_run_state st = RL_BATCH_RUN_WAITING;

        RL_CHECK_STREQ(rl_batch_run_state_name((enum rl_batch_run_state)i),
                       names[i]);
        RL_CHECK_INTEQ(rl_batch_run_state_parse(names[i], &st), 0);
        RL_CHECK_INTEQ(st, i);
    }
}

/* A batch's state, another case, no text and NULL are no run's state,
 * and *state is left as it was. */
static void
test_unknown_run_state_refused(void)
{
    const char *const refused[] = {"intent", "In_batch", "", NULL};
    enum rl_batch_run_state st = RL_BATCH_RUN_IN_BATCH;

    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        RL_CHECK_INTEQ(rl_batch_run_state_parse(refused[i], &st),
                       RL_ERR_INVALID);
    RL_CHECK_INTEQ(st, RL_BATCH_RUN_IN_BATCH);
    RL_CHECK_STREQ(rl_batch_run_state_name((enum rl_batch_run_state)99),
                   "invalid");
}

int
main(void)
{
    test_batch_states_are_the_schemas();
    test_run_states_are_the_schemas_and_read_back();
    test_unknown_run_state_refused();
    RL_TEST_END();
}
