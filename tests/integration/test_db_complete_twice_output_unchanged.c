/* Invariant: completed output never changes and a run has at most one
 * outbox row per channel. Completing twice (same owner, a retry after a
 * lost commit acknowledgement) reports the run done before and adds
 * nothing; claiming a completed run returns the stored output without a
 * lease. Completion is the service's batched statement. */
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request[] = "{\"notify\":[\"email\",\"slack\"],"
                              "\"request\":{\"messages\":[],\"model\":\"m\"}}";

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run run;
    struct rl_claim claim;
    const char *repeated[3] = {"email", "slack", "email"};
    struct rltest_run stored;
    const char *channels[2] = {"email", "slack"};
    char errstr[512];
    char value[512];
    const char *params[1];
    int completed = -1;
    int64_t epoch;

    fixture_run_init(&run, "complete-twice", request, "{\"docs\":[]}");
    RL_REQUIRE(rltest_db_claim(db, &run.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    epoch = claim.lease_epoch;
    rl_claim_clear(&claim);

    /* a channel named twice still queues one row */
    RL_CHECK_INTEQ(rltest_db_complete(db, run.run_id, "w1", epoch, NULL,
                                      "{\"text\":\"first accepted summary\"}",
                                      repeated, 3, &completed, errstr,
                                      sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(completed, 1);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox WHERE run_id = $1",
                               run.run_id),
                   2);

    /* the same owner again, with a different answer */
    RL_CHECK_INTEQ(rltest_db_complete(db, run.run_id, "w1", epoch, NULL,
                                      "{\"text\":\"different retry output\"}",
                                      repeated, 2, &completed, errstr,
                                      sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(completed, 0);
    RL_CHECK_INTEQ(rltest_db_complete(db, run.run_id, "w1", epoch, NULL,
                                      "{\"text\":\"third\"}", channels, 2,
                                      &completed, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(completed, 0);

    RL_REQUIRE(rltest_db_get_run(db, run.run_id, &stored, errstr,
                                 sizeof(errstr)) == 0);
    RL_CHECK_STREQ(stored.status, "completed");
    RL_CHECK_STREQ(stored.output_json,
                   "{\"text\": \"first accepted summary\"}");
    RL_CHECK(stored.lock_owner == NULL);
    RL_CHECK(stored.completed_at[0] != '\0');
    rltest_run_clear(&stored);

    params[0] = run.run_id;
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox WHERE run_id = $1",
                               run.run_id),
                   2);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(DISTINCT channel) FROM outbox "
                               "WHERE run_id = $1",
                               run.run_id),
                   2);
    /* the default envelope carries identity and output; it is built from
     * the run when read, not stored with the row */
    RL_CHECK_INTEQ(
        rl_db_exec(db,
                   "SELECT p->'output'->>'text' || '|' || "
                   "(p->>'run_id' = run_id)::text || '|' || "
                   "(p->>'channel') || '|' || "
                   "(explicit_payload IS NULL)::text "
                   "FROM (SELECT run_id, explicit_payload, "
                   "rl_payload_as_sent(run_id, channel, explicit_payload) "
                   "AS p FROM outbox "
                   "WHERE run_id = $1 AND channel = 'slack') o",
                   1, params, value, sizeof(value), errstr, sizeof(errstr)),
        1);
    RL_CHECK_STREQ(value, "first accepted summary|true|slack|true");

    /* a duplicate event for the completed run gets the stored answer */
    RL_CHECK_INTEQ(
        rltest_db_claim(db, &run.reg, "w2", 30, &claim, errstr, sizeof(errstr)),
        0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_COMPLETED);
    RL_CHECK_STREQ(claim.output_json, "{\"text\": \"first accepted summary\"}");
    RL_CHECK_INTEQ(claim.lease_epoch, epoch);
    rl_claim_clear(&claim);

    /* an unknown run and a null output are refused */
    RL_CHECK_INTEQ(rltest_db_complete(db,
                                      "0000000000000000000000000000000000000"
                                      "000000000000000000000000000",
                                      "w1", 1, NULL, "{}", NULL, 0, &completed,
                                      errstr, sizeof(errstr)),
                   RL_ERR_NOTFOUND);
    RL_CHECK_INTEQ(rltest_db_complete(db, run.run_id, "w1", epoch, NULL, "null",
                                      NULL, 0, &completed, errstr,
                                      sizeof(errstr)),
                   RL_ERR_INVALID);
    fixture_drop(db, schema);
    RL_TEST_END();
}
