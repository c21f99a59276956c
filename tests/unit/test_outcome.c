/* rl/outcome.h: the one table between enum rl_outcome and the ledger's
 * text names every attempt outcome the schema allows, each once, and
 * nothing the schema would refuse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/outcome.h"
#include "rltest.h"

/* The outcomes attempts_outcome_known allows, as schema/current.sql
 * prints the constraint: ARRAY['ok'::text, ...]. */
static size_t
schema_outcomes(char names[][32], size_t max)
{
    const char *src = getenv("RL_SOURCE_DIR");
    char path[1024], line[4096];
    const char *p;
    size_t n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/schema/current.sql", src ? src : ".");
    f = fopen(path, "r");
    RL_REQUIRE(f);
    while (fgets(line, sizeof(line), f))
        if (strstr(line, "CONSTRAINT attempts_outcome_known"))
            break;
    fclose(f);
    p = strstr(line, "ARRAY[");
    RL_REQUIRE(p);
    while (n < max && (p = strchr(p, '\'')) != NULL) {
        const char *end = strchr(p + 1, '\'');

        RL_REQUIRE(end && (size_t)(end - p - 1) < sizeof(names[0]));
        memcpy(names[n], p + 1, (size_t)(end - p - 1));
        names[n][end - p - 1] = '\0';
        n++;
        p = end + 1;
    }
    return n;
}

static void
test_table_is_the_schemas_outcomes(void)
{
    char names[16][32];
    size_t n = schema_outcomes(names, 16);

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
    test_table_is_the_schemas_outcomes();
    test_value_outside_the_enum_has_no_name();
    RL_TEST_END();
}
