/* Invariant: a dispatched attempt without an outcome is evidence that an
 * earlier owner may have generated. The next claimer (duplicate event or
 * sweeper) is told (ambiguous_prior, ambiguous_count); once the outcome is
 * recorded, or a later attempt supersedes it, the flag is gone. */
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_dispatch.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run run;
    struct rl_claim claim, due[2];
    struct rltest_run row;
    char errstr[512];
    int attempt_no = 0;
    size_t n = 0;

    fixture_run_init(&run, "ambiguous", request, NULL);
    RL_REQUIRE(rltest_db_claim(db, &run.reg, "w1", 1, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    RL_CHECK_INTEQ(claim.ambiguous_prior, 0);
    RL_CHECK_INTEQ(rltest_db_dispatch(db, run.run_id, "w1", claim.lease_epoch,
                                      run.run_id, &attempt_no, errstr,
                                      sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(attempt_no, 1);
    rl_claim_clear(&claim);

    /* w1 "dies" after sending: its lease runs out, a duplicate claims */
    fixture_wait_lease_expired(db, run.run_id);
    RL_REQUIRE(rltest_db_claim(db, &run.reg, "w2", 1, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_WON);
    RL_CHECK_INTEQ(claim.ambiguous_prior, 1);
    RL_CHECK_INTEQ(claim.ambiguous_count, 1);
    RL_CHECK_INTEQ(claim.attempts, 1);
    rl_claim_clear(&claim);

    /* the sweeper sees the same evidence */
    fixture_wait_lease_expired(db, run.run_id);
    RL_CHECK_INTEQ(rl_db_claim_due(db,
                                   &(struct rl_claim_opts){.worker = "sweeper",
                                                           .lease_seconds = 1,
                                                           .max = 2},
                                   due, &n, errstr, sizeof(errstr)),
                   0);
    RL_REQUIRE(n == 1);
    RL_CHECK_INTEQ(due[0].ambiguous_prior, 1);
    RL_CHECK_INTEQ(due[0].ambiguous_count, 1);
    RL_REQUIRE(
        rltest_db_get_run(db, run.run_id, &row, errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(row.ambiguous_prior, 1);
    rltest_run_clear(&row);

    /* the late outcome arrives (the stale worker tells the truth) */
    RL_CHECK_INTEQ(
        rl_db_record_outcome(db, run.run_id,
                             &(struct rl_attempt_outcome){
                                 .outcome = RL_OUTCOME_OK,
                                 .call = {.attempt_no = 1,
                                          .http_status = 200,
                                          .upstream_request_id = "req-1",
                                          .prompt_tokens = 10,
                                          .completion_tokens = 20,
                                          .latency_ms = 1234}},
                             errstr, sizeof(errstr)),
        0);
    /* once only */
    RL_CHECK_INTEQ(rl_db_record_outcome(db, run.run_id,
                                        &(struct rl_attempt_outcome){
                                            .outcome = RL_OUTCOME_TRANSIENT,
                                            .call = {.attempt_no = 1,
                                                     .http_status = 503,
                                                     .prompt_tokens = -1,
                                                     .completion_tokens = -1,
                                                     .cached_tokens = -1,
                                                     .latency_ms = -1},
                                            .error = "late"},
                                        errstr, sizeof(errstr)),
                   RL_ERR_NOTFOUND);
    RL_CHECK_INTEQ(rl_db_record_outcome(db, run.run_id,
                                        &(struct rl_attempt_outcome){
                                            .outcome = RL_OUTCOME_OK,
                                            .call = {.attempt_no = 9,
                                                     .http_status = 200,
                                                     .prompt_tokens = -1,
                                                     .completion_tokens = -1,
                                                     .cached_tokens = -1,
                                                     .latency_ms = -1}},
                                        errstr, sizeof(errstr)),
                   RL_ERR_NOTFOUND);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM attempts WHERE "
                               "outcome = 'ok' AND http_status = 200 AND "
                               "prompt_tokens = 10 AND completion_tokens = "
                               "20 AND cached_tokens = 0 AND latency_ms = "
                               "1234 AND upstream_request_id = 'req-1' AND "
                               "finished_at IS NOT NULL AND worker = 'w1' "
                               "AND idempotency_key = run_id",
                               NULL),
                   1);
    RL_REQUIRE(
        rltest_db_get_run(db, run.run_id, &row, errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(row.ambiguous_prior, 0);
    RL_CHECK_INTEQ(row.ambiguous_count, 0);
    rltest_run_clear(&row);

    /* a new dispatch by the sweeper's lease, ended ambiguous: counted,
     * but not "prior without outcome" */
    RL_CHECK_INTEQ(rltest_db_dispatch(db, run.run_id, "sweeper",
                                      due[0].lease_epoch, run.run_id,
                                      &attempt_no, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(attempt_no, 2);
    RL_CHECK_INTEQ(rl_db_record_outcome(db, run.run_id,
                                        &(struct rl_attempt_outcome){
                                            .outcome = (enum rl_outcome)99,
                                            .call = {.attempt_no = 2,
                                                     .http_status = 200,
                                                     .prompt_tokens = -1,
                                                     .completion_tokens = -1,
                                                     .cached_tokens = -1,
                                                     .latency_ms = -1}},
                                        errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    RL_CHECK_INTEQ(rl_db_record_outcome(db, run.run_id,
                                        &(struct rl_attempt_outcome){
                                            .outcome = RL_OUTCOME_AMBIGUOUS,
                                            .call = {.attempt_no = 2,
                                                     .http_status = -1,
                                                     .prompt_tokens = -1,
                                                     .completion_tokens = -1,
                                                     .cached_tokens = -1,
                                                     .latency_ms = 30000},
                                            .error = "timeout"},
                                        errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(
        rl_db_release(db,
                      &(struct rl_lease){.run_id = run.run_id,
                                         .worker = "sweeper",
                                         .epoch = due[0].lease_epoch},
                      0, "ambiguous", "timeout", errstr, sizeof(errstr)),
        0);
    RL_REQUIRE(rltest_db_claim(db, &run.reg, "w3", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_WON);
    RL_CHECK_INTEQ(claim.ambiguous_prior, 0);
    RL_CHECK_INTEQ(claim.ambiguous_count, 1);
    RL_CHECK_INTEQ(claim.attempts, 2);
    rl_claim_clear(&claim);
    rl_claim_clear(&due[0]);
    fixture_drop(db, schema);
    RL_TEST_END();
}
