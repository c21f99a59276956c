/* Invariant: the first 429 of a model without published limits caps its
 * calls at half the calls in flight, not at one call for the group.
 * Model a: a worker with 40 calls in flight reports a 429 (adaptive): the
 * model is paused and its cap is 20; a second 429 halves the cap (10),
 * whatever the worker counts. Model b: a 429 with 1 call in flight gives a
 * cap of 1, never 0. Model c: six dispatches of c are counted in
 * model_calls (as calls of a capped model are) and a worker reports a 429
 * with 2 in flight: the cap is 3, half the larger count. Model d has an
 * operator limit: a 429 pauses it and sets no cap. A 429 with published
 * limits (not adaptive) sets none either. Fails on 019's
 * rl_model_throttled, which counts model_calls only: the first cap of a
 * is 1. */
#include <stdio.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_model_limits.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request_c[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"c\"}}";

/* A 429 of model with in_flight calls in flight; returns the cap. */
static int
throttled(struct rl_db *db, const char *model, int adaptive, int in_flight)
{
    char until[40], errstr[512];
    struct rl_model_throttle t = {
        model, 1000, adaptive, in_flight, "429 from the provider", NULL, 0};
    int cap = -1;

    RL_REQUIRE(rl_db_model_throttled(db, &t, until, sizeof(until), &cap, errstr,
                                     sizeof(errstr)) == 0);
    RL_CHECK(until[0] != '\0');
    return cap;
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_model_limit lim = {
        .model = "d", .rpm = 600, .tpm = 0, .window_ms = 60000};
    char errstr[512], job[64];

    RL_CHECK_INTEQ(throttled(db, "a", 1, 40), 20);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT (paused_until > now())::int FROM "
                               "model_limits WHERE model = $1",
                               "a"),
                   1);
    RL_CHECK_INTEQ(throttled(db, "a", 1, 40), 10);

    RL_CHECK_INTEQ(throttled(db, "b", 1, 1), 1);

    /* Six calls of c in flight, as the dispatch statement counts them for
     * a capped model. */
    for (int i = 0; i < 6; i++) {
        struct fixture_run run;
        struct rl_claim claim;
        int attempt_no = 0;

        snprintf(job, sizeof(job), "cap-c-%d", i);
        fixture_run_init(&run, job, request_c, NULL);
        RL_REQUIRE(rltest_db_claim(db, &run.reg, "w1", 30, &claim, errstr,
                                   sizeof(errstr)) == 0);
        RL_REQUIRE(claim.status == RL_CLAIM_WON);
        RL_REQUIRE(rltest_db_dispatch(db, run.run_id, "w1", claim.lease_epoch,
                                      "k", &attempt_no, errstr,
                                      sizeof(errstr)) == 0);
        rl_claim_clear(&claim);
    }
    RL_CHECK_INTEQ(fixture_int(db,
                               "WITH c AS (INSERT INTO model_calls "
                               "(run_id, attempt_no, model) SELECT run_id, "
                               "attempt_no, $1 FROM attempts RETURNING 1) "
                               "SELECT count(*) FROM c",
                               "c"),
                   6);
    RL_CHECK_INTEQ(throttled(db, "c", 1, 2), 3);

    RL_REQUIRE(rl_db_model_limit_set(db, &lim, "ops", errstr, sizeof(errstr)) ==
               0);
    RL_CHECK_INTEQ(throttled(db, "d", 1, 40), 0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT (paused_until > now())::int FROM "
                               "model_limits WHERE model = $1",
                               "d"),
                   1);

    RL_CHECK_INTEQ(throttled(db, "e", 0, 40), 0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT throttles FROM model_limits WHERE "
                               "model = $1",
                               "a"),
                   2);
    fixture_drop(db, schema);
    RL_TEST_END();
}
