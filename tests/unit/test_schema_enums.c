/* The enums whose text the ledger stores, each through one table: the run
 * statuses (rl/run_status.h) and the attempt outcomes (rl/outcome.h). Each
 * table names every value the schema's CHECK constraint allows, each once,
 * and nothing it would refuse; a status reads back what it prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/err.h"
#include "rl/outcome.h"
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

static void
test_table_is_the_schemas_outcomes(void)
{
    char names[16][32];
    size_t n = rltest_schema_values("attempts_outcome_known", names, 16);

    RL_CHECK(n > 0);
    RL_CHECK_INTEQ((long)n, (long)(RL_OUTCOME_LEASE_LOST + 1));
    /* Every value of the enum is one the schema allows, and no two share
     * a name: with as many of each, the two lists are the same. */
    for (int o = RL_OUTCOME_OK; o <= RL_OUTCOME_LEASE_LOST; o++) {
        const char *name = rl_outcome_name((enum rl_outcome)o);
        int found = 0;

        RL_REQUIRE(name);
        for (size_t i = 0; i < n; i++)
            found |= strcmp(name, names[i]) == 0;
        RL_CHECK(found);
        for (int other = RL_OUTCOME_OK; other < o; other++)
            RL_CHECK(strcmp(name, rl_outcome_name((enum rl_outcome)other)) !=
                     0);
    }
}

static void
test_value_outside_the_enum_has_no_name(void)
{
    RL_CHECK(rl_outcome_name((enum rl_outcome)99) == NULL);
    RL_CHECK(rl_outcome_name((enum rl_outcome) - 1) == NULL);
}

int
main(void)
{
    test_table_is_the_schemas_statuses();
    test_unknown_text_refused();
    test_table_is_the_schemas_outcomes();
    test_value_outside_the_enum_has_no_name();
    RL_TEST_END();
}
