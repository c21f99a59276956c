/* rl/run_status.h: the one table between enum rl_run_status and the
 * ledger's text names every status the schema allows, each once, and
 * reads back what it prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/err.h"
#include "rl/run_status.h"
#include "rltest.h"
#include "rltest_schema.h"

static void
test_table_is_the_schemas_statuses(void)
{
    char names[16][32];
    size_t n = rltest_schema_values("runs_status_known", names, 16);
    enum rl_run_status st;

    RL_CHECK(n > 0);
    for (size_t i = 0; i < n; i++) {
        RL_CHECK_INTEQ(rl_run_status_parse(names[i], &st), 0);
        RL_CHECK_STREQ(rl_run_status_name(st), names[i]);
    }
    /* No status of the enum the schema would refuse. */
    for (int s = RL_RUN_PENDING; s <= RL_RUN_CANCELLED; s++) {
        int found = 0;

        for (size_t i = 0; i < n; i++)
            found |= strcmp(rl_run_status_name((enum rl_run_status)s),
                            names[i]) == 0;
        RL_CHECK(found);
    }
    RL_CHECK_INTEQ((long)n, (long)(RL_RUN_CANCELLED + 1));
}

static void
test_unknown_text_refused(void)
{
    enum rl_run_status st = RL_RUN_RUNNING;

    RL_CHECK_INTEQ(rl_run_status_parse("Pending", &st), RL_ERR_INVALID);
    RL_CHECK_INTEQ(rl_run_status_parse("", &st), RL_ERR_INVALID);
    RL_CHECK_INTEQ(rl_run_status_parse(NULL, &st), RL_ERR_INVALID);
    RL_CHECK_INTEQ(st, RL_RUN_RUNNING);
    RL_CHECK_STREQ(rl_run_status_name((enum rl_run_status)99), "invalid");
}

int
main(void)
{
    test_table_is_the_schemas_statuses();
    test_unknown_text_refused();
    RL_TEST_END();
}
