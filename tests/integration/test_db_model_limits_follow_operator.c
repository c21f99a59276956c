/* Invariant: model rate-limit rows follow what an operator set. A 429
 * from a model nobody limited creates an implicit row (its pause and
 * adaptive cap) that the dispatch statement forgets ten minutes after the
 * pause ended, and keeps before; `model-limits set` ends a pause and
 * makes the row the operator's, which no pause's end removes. */
#include <stdio.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_model_limits.h"
#include "rl/err.h"
#include "rltest.h"
#include "test_db_fixture.h"

/* rl_take_model_limits as rl_dispatch_runs calls it, for models only. */
static void
dispatch_models(struct rl_db *db)
{
    fixture_exec(db, "SELECT count(*) FROM rl_take_model_limits("
                     "ARRAY['free-model', 'set-model'], '{}', '{}', '{}',"
                     " 'w1', 100)");
}

/* A 429 of model with no call named (every one cuts). */
static void
throttled(struct rl_db *db, const char *model, int64_t pause_ms, int adaptive,
          int in_flight, int *cap)
{
    struct rl_model_throttle t = {model, pause_ms, adaptive, in_flight,
                                  "429", NULL,     0};
    char until[64], errstr[512];

    RL_REQUIRE(rl_db_model_throttled(db, &t, until, sizeof(until), cap, errstr,
                                     sizeof(errstr)) == 0);
}

static int64_t
rows(struct rl_db *db, const char *model)
{
    return fixture_int(db, "SELECT count(*) FROM model_limits WHERE model = $1",
                       model);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1], errstr[512];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_model_limit lim = {"set-model", NULL, 600, 0, 60000};
    int cap = -1;

    /* A 429 from a model nobody limited. */
    throttled(db, "free-model", 60000, 1, 8, &cap);
    RL_CHECK_INTEQ(cap, 4);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM model_limits WHERE "
                               "model = 'free-model' AND implicit",
                               NULL),
                   1);
    /* Kept while the pause runs, and up to ten minutes after it. */
    dispatch_models(db);
    RL_CHECK_INTEQ(rows(db, "free-model"), 1);
    fixture_exec(db, "UPDATE model_limits SET paused_until = now() - "
                     "interval '9 minutes' WHERE model = 'free-model'");
    dispatch_models(db);
    RL_CHECK_INTEQ(rows(db, "free-model"), 1);
    /* Then the model is unlimited again. */
    fixture_exec(db, "UPDATE model_limits SET paused_until = now() - "
                     "interval '11 minutes' WHERE model = 'free-model'");
    dispatch_models(db);
    RL_CHECK_INTEQ(rows(db, "free-model"), 0);

    /* An operator's limit, a 429 under it, then a new limit: the pause
     * ends with the old limit, and the row stays the operator's. */
    RL_REQUIRE(
        rl_db_model_limit_set(db, &lim, "alice", errstr, sizeof(errstr)) == 0);
    throttled(db, "set-model", 3600 * 1000, 0, 1, &cap);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM model_limits WHERE "
                               "model = 'set-model' AND paused_until > now()"
                               " AND NOT implicit",
                               NULL),
                   1);
    lim.rpm = 300;
    RL_REQUIRE(
        rl_db_model_limit_set(db, &lim, "alice", errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM model_limits WHERE "
                               "model = 'set-model' AND paused_until IS NULL"
                               " AND pause_reason IS NULL AND rpm = 300",
                               NULL),
                   1);
    fixture_exec(db, "UPDATE model_limits SET paused_until = now() - "
                     "interval '1 hour' WHERE model = 'set-model'");
    dispatch_models(db);
    RL_CHECK_INTEQ(rows(db, "set-model"), 1);

    /* A row a 429 created becomes the operator's once set. */
    throttled(db, "free-model", 1000, 1, 2, &cap);
    lim.model = "free-model";
    RL_REQUIRE(
        rl_db_model_limit_set(db, &lim, "alice", errstr, sizeof(errstr)) == 0);
    fixture_exec(db, "UPDATE model_limits SET paused_until = now() - "
                     "interval '1 hour' WHERE model = 'free-model'");
    dispatch_models(db);
    RL_CHECK_INTEQ(rows(db, "free-model"), 1);

    fixture_drop(db, schema);
    RL_TEST_END();
}
