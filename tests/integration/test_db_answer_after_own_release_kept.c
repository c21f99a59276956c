/* Invariant: an answer that arrives after its owner gave the lease back
 * (a second signal, the end of a shutdown's grace) is stored when nobody
 * claimed the run since, and is never recorded as an "ok" attempt of a run
 * left to be generated again. Three cases, through the statements the
 * service runs (rl_db_release_leases_of_owner, the batched completion and
 * the proposal):
 *
 *  1. released, unclaimed: the late completion completes the run with its
 *     outbox row; the next claim finds it completed (no second call);
 *  2. released, claimed by another worker before the answer: the late
 *     completion is refused, and the new owner was told at its claim that
 *     an earlier dispatch has no outcome (ambiguous_prior), so the policy
 *     for ambiguous calls applies instead of a silent second generation;
 *  3. an approval-required run released unclaimed: the late proposal is
 *     stored and the run waits for approval. */
#include <string.h>

#include "rl/db_approval.h"
#include "rl/db_claim.h"
#include "rl/db_complete.h"
#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request[] =
    "{\"notify\":[\"email\"],\"request\":{\"messages\":[],\"model\":\"m\"}}";

/* Claims run for worker and records its dispatch; returns the epoch. */
static int64_t
claim_and_dispatch(struct rl_db *db, struct fixture_run *run,
                   const char *worker, int *attempt_no)
{
    struct rl_claim claim;
    char errstr[512];
    int64_t epoch;

    RL_REQUIRE(rltest_db_claim(db, &run->reg, worker, 300, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    epoch = claim.lease_epoch;
    rl_claim_clear(&claim);
    RL_REQUIRE(rltest_db_dispatch(db, run->run_id, worker, epoch, run->run_id,
                                  attempt_no, errstr, sizeof(errstr)) == 0);
    return epoch;
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run run;
    struct rl_claim claim;
    const char *channels[1] = {"email"};
    struct rl_attempt_ok oc = {1, 200, "req-1", 10, 5, 0, 40};
    struct rltest_run row;
    enum rl_propose_status pstatus;
    char errstr[512];
    int attempt_no = -1, completed = -1;
    int64_t epoch;

    /* 1. released, nobody claimed since: the answer is kept */
    fixture_run_init(&run, "late-unclaimed", request, NULL);
    epoch = claim_and_dispatch(db, &run, "w1", &attempt_no);
    RL_CHECK_INTEQ(rl_db_release_leases_of_owner(db, "w1", "shutdown",
                                                 "released at a second signal",
                                                 errstr, sizeof(errstr)),
                   1);
    oc.attempt_no = attempt_no;
    RL_CHECK_INTEQ(rltest_db_complete(db, run.run_id, "w1", epoch, &oc,
                                      "{\"text\":\"late\"}", channels, 1,
                                      &completed, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(completed, 1);
    RL_REQUIRE(
        rltest_db_get_run(db, run.run_id, &row, errstr, sizeof(errstr)) == 0);
    RL_CHECK_STREQ(row.status, "completed");
    RL_CHECK_STREQ(row.output_json, "{\"text\": \"late\"}");
    RL_CHECK(row.lock_owner == NULL);
    rltest_run_clear(&row);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox WHERE run_id = $1",
                               run.run_id),
                   1);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM attempts WHERE run_id = "
                               "$1 AND outcome = 'ok'",
                               run.run_id),
                   1);
    /* a duplicate event finds the run done: no second generation */
    RL_REQUIRE(rltest_db_claim(db, &run.reg, "w2", 300, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_COMPLETED);
    rl_claim_clear(&claim);

    /* 2. released, then claimed by w2 before w1's answer lands */
    fixture_run_init(&run, "late-claimed", request, NULL);
    epoch = claim_and_dispatch(db, &run, "w1", &attempt_no);
    RL_CHECK_INTEQ(rl_db_release_leases_of_owner(db, "w1", "shutdown",
                                                 "released at a second signal",
                                                 errstr, sizeof(errstr)),
                   1);
    RL_REQUIRE(rltest_db_claim(db, &run.reg, "w2", 300, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_WON);
    RL_CHECK_INTEQ(claim.ambiguous_prior, 1);
    RL_CHECK(claim.lease_epoch > epoch);
    rl_claim_clear(&claim);
    oc.attempt_no = attempt_no;
    RL_CHECK_INTEQ(rltest_db_complete(db, run.run_id, "w1", epoch, &oc,
                                      "{\"text\":\"late\"}", channels, 1,
                                      &completed, errstr, sizeof(errstr)),
                   RL_ERR_STALE);
    RL_REQUIRE(
        rltest_db_get_run(db, run.run_id, &row, errstr, sizeof(errstr)) == 0);
    RL_CHECK_STREQ(row.status, "running");
    RL_CHECK_STREQ(row.lock_owner, "w2");
    RL_CHECK(row.output_json == NULL);
    rltest_run_clear(&row);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox WHERE run_id = $1",
                               run.run_id),
                   0);

    /* 3. an approval-required run's late answer becomes its proposal */
    fixture_run_init(&run, "late-proposal", request, NULL);
    epoch = claim_and_dispatch(db, &run, "w1", &attempt_no);
    RL_CHECK_INTEQ(rl_db_release_leases_of_owner(db, "w1", "shutdown",
                                                 "released at a second signal",
                                                 errstr, sizeof(errstr)),
                   1);
    oc.attempt_no = attempt_no;
    RL_CHECK_INTEQ(
        rl_db_propose_attempt(db,
                              &(struct rl_lease){.run_id = run.run_id,
                                                 .worker = "w1",
                                                 .epoch = epoch},
                              &oc, "{\"text\":\"proposed\"}",
                              "0123456789abcdef0123456789abcdef0123456789abcd"
                              "ef0123456789abcdef",
                              NULL, &pstatus, errstr, sizeof(errstr)),
        0);
    RL_CHECK_INTEQ(pstatus, RL_PROPOSE_WAITING);
    RL_REQUIRE(
        rltest_db_get_run(db, run.run_id, &row, errstr, sizeof(errstr)) == 0);
    RL_CHECK_STREQ(row.status, "awaiting_approval");
    rltest_run_clear(&row);

    fixture_drop(db, schema);
    RL_TEST_END();
}
