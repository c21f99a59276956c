/* Invariant: a cancelled run is terminal and its old lease writes nothing.
 * A pending run, a running run with a dispatched attempt and a run
 * awaiting approval are cancelled (rl_db_run_cancel); each is a recorded
 * decision (actor, reason, prior status). Afterwards: the sweeper never
 * claims them; a duplicate registration reports them parked (the
 * consumer acknowledges it as a duplicate); the running run's worker can
 * neither dispatch, record an outcome, complete (no output, no outbox
 * rows) nor see its lease held; its in-flight attempt is closed as
 * cancelled; no statement brings a cancelled run back (trigger). A
 * completed run, a failed one and a cancelled one are refused with
 * RL_ERR_CONFLICT and nothing changes. A filter cancel needs a tenant,
 * counts what it would cancel, and cancels only the runs of its filter
 * registered before its cutoff (given, or the moment it starts),
 * in batches. The gauges count runs awaiting approval and cancelled
 * runs. */
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_dispatch.h"
#include "rl/db_gauges.h"
#include "rl/db_lease.h"
#include "rl/db_runs.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request[] =
    "{\"notify\":[\"email\"],\"request\":{\"messages\":[],\"model\":\"m\"}}";

static int64_t
count_where(struct rl_db *db, const char *sql, const char *run_id)
{
    return fixture_int(db, sql, run_id);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run pending, running, waiting, done, failed, other;
    struct fixture_run batch[7];
    struct rl_claim claim, due[8];
    struct rl_decision dec;
    struct rl_db_gauges g;
    static const enum rl_run_status pending_completed[] = {RL_RUN_PENDING,
                                                           RL_RUN_COMPLETED};
    static const enum rl_run_status only_running[] = {RL_RUN_RUNNING};
    struct rl_cancel_filter filter = {
        "workspace-acme", NULL, NULL, NULL, NULL, 0};
    const char *channels[1] = {"email"};
    const char *ids[1];
    int64_t epochs[1], n64 = 0, run_epoch, pending_epoch;
    int held[2], attempt_no = 0, completed = 0;
    char errstr[512], job[32];
    size_t n = 0;

    /* pending: released for an hour, as a budget deferral leaves it */
    fixture_run_init(&pending, "cancel-pending", request, NULL);
    RL_REQUIRE(rltest_db_claim(db, &pending.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    pending_epoch = claim.lease_epoch;
    RL_REQUIRE(rl_db_release(db,
                             &(struct rl_lease){.run_id = pending.run_id,
                                                .worker = "w1",
                                                .epoch = claim.lease_epoch},
                             3600 * 1000, "budget", "deferred", errstr,
                             sizeof(errstr)) == 0);
    rl_claim_clear(&claim);

    /* running, its call in flight */
    fixture_run_init(&running, "cancel-running", request, NULL);
    RL_REQUIRE(rltest_db_claim(db, &running.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    run_epoch = claim.lease_epoch;
    rl_claim_clear(&claim);
    RL_REQUIRE(rltest_db_dispatch(db, running.run_id, "w1", run_epoch, "k1",
                                  &attempt_no, errstr, sizeof(errstr)) == 0);
    RL_REQUIRE(attempt_no == 1);

    /* awaiting approval (the shape rl_propose_run leaves) */
    fixture_run_init(&waiting, "cancel-waiting", request, NULL);
    RL_REQUIRE(rltest_db_claim(db, &waiting.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    rl_claim_clear(&claim);
    RL_REQUIRE(count_where(db,
                           "WITH u AS (UPDATE runs SET status = "
                           "'awaiting_approval', proposal = '{}', "
                           "proposal_digest = repeat('a', 64), lock_owner = "
                           "NULL, lock_expires_at = NULL WHERE run_id = $1 "
                           "RETURNING 1) SELECT count(*) FROM u",
                           waiting.run_id) == 1);

    /* completed and failed */
    fixture_run_init(&done, "cancel-done", request, NULL);
    RL_REQUIRE(rltest_db_claim(db, &done.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(rltest_db_complete(db, done.run_id, "w1", claim.lease_epoch,
                                  NULL, "{\"a\":1}", channels, 1, &completed,
                                  errstr, sizeof(errstr)) == 0);
    rl_claim_clear(&claim);
    fixture_run_init(&failed, "cancel-failed", request, NULL);
    RL_REQUIRE(rltest_db_claim(db, &failed.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(rl_db_fail(db,
                          &(struct rl_lease){.run_id = failed.run_id,
                                             .worker = "w1",
                                             .epoch = claim.lease_epoch},
                          RL_RUN_FAILED, "model_rejected", "HTTP 400", errstr,
                          sizeof(errstr)) == 0);
    rl_claim_clear(&claim);

    RL_CHECK_INTEQ(rl_db_ops_gauges(db, &g, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(g.awaiting_approval_runs, 1);
    RL_CHECK_INTEQ(g.cancelled_runs, 0);

    /* cancel each */
    RL_CHECK_INTEQ(rl_db_run_cancel(db, pending.run_id, "alice", "not needed",
                                    &dec, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_STREQ(dec.prior_status, "pending");
    RL_CHECK_INTEQ(dec.attempts_closed, 0);
    RL_CHECK_INTEQ(rl_db_run_cancel(db, running.run_id, "bob", "wrong prompt",
                                    &dec, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_STREQ(dec.prior_status, "running");
    RL_CHECK_INTEQ(dec.attempts, 1);
    RL_CHECK_INTEQ(dec.attempts_closed, 1);
    RL_CHECK_INTEQ(rl_db_run_cancel(db, waiting.run_id, "carol", "stale data",
                                    &dec, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_STREQ(dec.prior_status, "awaiting_approval");

    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM runs WHERE status = "
                               "'cancelled' AND lock_owner IS NULL AND "
                               "next_attempt_at IS NULL AND output IS NULL "
                               "AND error_class = 'cancelled'",
                               NULL),
                   3);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM run_decisions WHERE "
                               "decision = 'cancel' AND ((actor = 'alice' "
                               "AND reason = 'not needed' AND prior_status = "
                               "'pending') OR (actor = 'bob' AND reason = "
                               "'wrong prompt' AND prior_status = 'running' "
                               "AND attempts = 1) OR (actor = 'carol' AND "
                               "prior_status = 'awaiting_approval'))",
                               NULL),
                   3);
    /* the running run's lease is fenced: a higher epoch, no owner */
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT lease_epoch FROM runs WHERE run_id = $1",
                               running.run_id),
                   run_epoch + 1);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM attempts WHERE run_id = "
                               "$1 AND outcome = 'cancelled' AND finished_at "
                               "IS NOT NULL AND error LIKE '%bob%'",
                               running.run_id),
                   1);

    /* the old worker: every write refused, its lease not held */
    ids[0] = running.run_id;
    epochs[0] = run_epoch;
    RL_CHECK_INTEQ(
        rl_db_check_leases(db, &(struct rl_lease_set){"w1", ids, epochs, 1},
                           held, errstr, sizeof(errstr)),
        0);
    RL_CHECK_INTEQ(held[0], 0);
    RL_CHECK_INTEQ(
        rl_db_renew_leases(db, &(struct rl_lease_set){"w1", ids, epochs, 1}, 30,
                           held, errstr, sizeof(errstr)),
        0);
    RL_CHECK_INTEQ(rltest_db_dispatch(db, running.run_id, "w1", run_epoch, "k2",
                                      &attempt_no, errstr, sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK_INTEQ(rl_db_record_outcome(db, running.run_id,
                                        &(struct rl_attempt_outcome){
                                            .outcome = RL_OUTCOME_OK,
                                            .call = {.attempt_no = 1,
                                                     .http_status = 200,
                                                     .prompt_tokens = 1,
                                                     .completion_tokens = 1,
                                                     .latency_ms = 5}},
                                        errstr, sizeof(errstr)),
                   RL_ERR_NOTFOUND);
    RL_CHECK_INTEQ(rltest_db_complete(db, running.run_id, "w1", run_epoch, NULL,
                                      "{\"late\":true}", channels, 1,
                                      &completed, errstr, sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK_INTEQ(rl_db_release(db,
                                 &(struct rl_lease){.run_id = running.run_id,
                                                    .worker = "w1",
                                                    .epoch = run_epoch},
                                 0, "transient", "x", errstr, sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM outbox WHERE run_id IN "
                               "(SELECT run_id FROM runs WHERE status = "
                               "'cancelled')",
                               NULL),
                   0);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM runs WHERE run_id = $1 "
                               "AND status = 'cancelled' AND output IS NULL",
                               running.run_id),
                   1);

    /* never claimed again; a duplicate event is parked (acknowledged) */
    RL_CHECK_INTEQ(rl_db_claim_due(db,
                                   &(struct rl_claim_opts){.worker = "sweeper",
                                                           .lease_seconds = 30,
                                                           .max = 8},
                                   due, &n, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n, 0);
    RL_CHECK_INTEQ(rltest_db_claim(db, &pending.reg, "w2", 30, &claim, errstr,
                                   sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_PARKED);
    RL_CHECK_INTEQ(claim.run_status, RL_RUN_CANCELLED);
    rl_claim_clear(&claim);
    RL_CHECK_INTEQ(rltest_db_claim(db, &running.reg, "w2", 30, &claim, errstr,
                                   sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_PARKED);
    rl_claim_clear(&claim);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM runs WHERE status = "
                               "'cancelled'",
                               NULL),
                   3);
    (void)pending_epoch;

    /* terminal: refused changes, and nothing brings it back */
    RL_CHECK_INTEQ(rl_db_run_cancel(db, done.run_id, "alice", "x", &dec, errstr,
                                    sizeof(errstr)),
                   RL_ERR_CONFLICT);
    RL_CHECK(strstr(errstr, "completed") != NULL);
    RL_CHECK_INTEQ(rl_db_run_cancel(db, failed.run_id, "alice", "x", &dec,
                                    errstr, sizeof(errstr)),
                   RL_ERR_CONFLICT);
    RL_CHECK(strstr(errstr, "failed") != NULL);
    RL_CHECK_INTEQ(rl_db_run_cancel(db, pending.run_id, "alice", "again", &dec,
                                    errstr, sizeof(errstr)),
                   RL_ERR_CONFLICT);
    RL_CHECK_INTEQ(rl_db_run_retry(db, pending.run_id, "alice", "back", &dec,
                                   errstr, sizeof(errstr)),
                   RL_ERR_CONFLICT);
    RL_CHECK(rl_db_exec(db,
                        "UPDATE runs SET status = 'pending', next_attempt_at "
                        "= now() WHERE status = 'cancelled'",
                        0, NULL, NULL, 0, errstr, sizeof(errstr)) < 0);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM run_decisions WHERE "
                               "run_id IN ($1, (SELECT run_id FROM runs "
                               "WHERE job = 'cancel-done'))",
                               pending.run_id),
                   1);

    RL_CHECK_INTEQ(rl_db_ops_gauges(db, &g, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(g.awaiting_approval_runs, 0);
    RL_CHECK_INTEQ(g.cancelled_runs, 3);

    /* filter cancel: 7 pending runs of the tenant, 1 of another; one of
     * the 7 is running and stays so under the default statuses */
    for (int i = 0; i < 7; i++) {
        snprintf(job, sizeof(job), "bulk-%d", i);
        fixture_run_init(&batch[i], job, request, NULL);
        RL_REQUIRE(rltest_db_claim(db, &batch[i].reg, "w1", 30, &claim, errstr,
                                   sizeof(errstr)) == 0);
        if (i > 0)
            RL_REQUIRE(
                rl_db_release(db,
                              &(struct rl_lease){.run_id = batch[i].run_id,
                                                 .worker = "w1",
                                                 .epoch = claim.lease_epoch},
                              3600 * 1000, "transient", "x", errstr,
                              sizeof(errstr)) == 0);
        rl_claim_clear(&claim);
    }
    fixture_run_init(&other, "bulk-other", request, NULL);
    other.reg.tenant = "workspace-other";
    RL_REQUIRE(rltest_db_claim(db, &other.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(rl_db_release(db,
                             &(struct rl_lease){.run_id = other.run_id,
                                                .worker = "w1",
                                                .epoch = claim.lease_epoch},
                             0, "transient", "x", errstr, sizeof(errstr)) == 0);
    rl_claim_clear(&claim);

    filter.tenant = NULL;
    RL_CHECK_INTEQ(
        rl_db_runs_cancel_count(db, &filter, &n64, errstr, sizeof(errstr)),
        RL_ERR_INVALID);
    RL_CHECK_INTEQ(rl_db_runs_cancel(db, &filter, "alice", "bulk", 2, &n64,
                                     errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    filter.tenant = "workspace-acme";
    filter.statuses = pending_completed;
    filter.nstatuses = 2;
    RL_CHECK_INTEQ(
        rl_db_runs_cancel_count(db, &filter, &n64, errstr, sizeof(errstr)),
        RL_ERR_INVALID);
    filter.statuses = NULL;
    filter.nstatuses = 0;
    RL_CHECK_INTEQ(
        rl_db_runs_cancel_count(db, &filter, &n64, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(n64, 6);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM runs WHERE status = "
                               "'cancelled'",
                               NULL),
                   3);
    RL_CHECK_INTEQ(rl_db_runs_cancel(db, &filter, "alice", "bulk", 2, &n64,
                                     errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n64, 6);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM run_decisions WHERE "
                               "decision = 'cancel' AND reason = 'bulk' AND "
                               "prior_status = 'pending'",
                               NULL),
                   6);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM runs WHERE run_id = $1 "
                               "AND status = 'running'",
                               batch[0].run_id),
                   1);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM runs WHERE run_id = $1 "
                               "AND status = 'pending'",
                               other.run_id),
                   1);
    filter.statuses = only_running;
    filter.nstatuses = 1;
    RL_CHECK_INTEQ(rl_db_runs_cancel(db, &filter, "alice", "bulk", 2, &n64,
                                     errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n64, 1);
    RL_CHECK_INTEQ(
        rl_db_runs_cancel_count(db, &filter, &n64, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(n64, 0);

    /* A filter cancel catches only runs registered before its cutoff: the
     * one given, or by default the moment it starts (a run registered
     * while it works, here one stamped an hour ahead, is left alone). */
    for (int i = 0; i < 2; i++) {
        snprintf(job, sizeof(job), "late-%d", i);
        fixture_run_init(&batch[i], job, request, NULL);
        RL_REQUIRE(rltest_db_claim(db, &batch[i].reg, "w1", 30, &claim, errstr,
                                   sizeof(errstr)) == 0);
        RL_REQUIRE(rl_db_release(db,
                                 &(struct rl_lease){.run_id = batch[i].run_id,
                                                    .worker = "w1",
                                                    .epoch = claim.lease_epoch},
                                 0, "transient", "x", errstr,
                                 sizeof(errstr)) == 0);
        rl_claim_clear(&claim);
    }
    fixture_exec(db, "UPDATE runs SET created_at = '1999-06-01T00:00:00Z'"
                     " WHERE job = 'late-0'");
    fixture_exec(db, "UPDATE runs SET created_at = now() + interval '1 hour'"
                     " WHERE job = 'late-1'");
    filter.statuses = NULL;
    filter.created_before = "1999-01-01T00:00:00Z";
    RL_CHECK_INTEQ(
        rl_db_runs_cancel_count(db, &filter, &n64, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(n64, 0);
    RL_CHECK_INTEQ(rl_db_runs_cancel(db, &filter, "alice", "cutoff", 2, &n64,
                                     errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n64, 0);
    filter.created_before = NULL;
    RL_CHECK_INTEQ(rl_db_runs_cancel(db, &filter, "alice", "cutoff", 2, &n64,
                                     errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n64, 1);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM runs WHERE run_id = $1 "
                               "AND status = 'cancelled'",
                               batch[0].run_id),
                   1);
    RL_CHECK_INTEQ(count_where(db,
                               "SELECT count(*) FROM runs WHERE run_id = $1 "
                               "AND status = 'pending'",
                               batch[1].run_id),
                   1);

    fixture_drop(db, schema);
    RL_TEST_END();
}
