/* Invariant: the batch functions (rl_claim_runs, rl_dispatch_runs,
 * rl_complete_runs and rl_lock_runs under them) keep one plan per session
 * (schema/022_cached_plans.sql), and a plan made while the ledger was
 * empty still reads runs and attempts through their indexes once the
 * ledger has grown: a run registered, dispatched and completed on the same
 * session after 30,000 finished runs (with their attempts) appeared
 * starts no sequential scan of runs or attempts (pg_stat_xact_user_tables
 * counts the scans of one transaction). A generic plan made on the empty
 * tables without sequential scans turned off reads them whole: each batch
 * would then cost more with every run the ledger holds. */
#include <stdio.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_complete.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request[] =
    "{\"notify\":[\"email\",\"slack\"],\"request\":{\"messages\":[],"
    "\"model\":\"m\"}}";
static const char *const channels[2] = {"email", "slack"};

/* One run through claim, dispatch and completion, as the service writes
 * it (batches of one). */
static void
one_run(struct rl_db *db, const char *job)
{
    struct fixture_run run;
    struct rl_claim claim;
    struct rl_attempt_ok oc = {.http_status = 200};
    char errstr[512];
    int attempt_no = 0, completed = 0;

    fixture_run_init(&run, job, request, "{\"doc\":1}");
    memset(&claim, 0, sizeof(claim));
    RL_REQUIRE(rltest_db_claim(db, &run.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    RL_REQUIRE(rltest_db_dispatch(db, run.run_id, "w1", claim.lease_epoch,
                                  run.run_id, &attempt_no, errstr,
                                  sizeof(errstr)) == 0);
    oc.attempt_no = attempt_no;
    RL_REQUIRE(rltest_db_complete(db, run.run_id, "w1", claim.lease_epoch, &oc,
                                  "{\"text\":\"ok\"}", channels, 2, &completed,
                                  errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(completed, 1);
    rl_claim_clear(&claim);
}

static int64_t
seq_scans(struct rl_db *db, const char *table)
{
    return fixture_int(db,
                       "SELECT coalesce(sum(seq_scan), 0) "
                       "FROM pg_stat_xact_user_tables "
                       "WHERE relid = to_regclass($1)",
                       table);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    int64_t runs0, attempts0, runs1, attempts1;
    char job[64];

    /* The plans are made here, on an empty ledger (force_generic_plan
     * keeps the first one). */
    for (int i = 0; i < 6; i++) {
        snprintf(job, sizeof(job), "warm-%d", i);
        one_run(db, job);
    }

    /* The ledger grows behind the cached plans (no ANALYZE, which would
     * make PostgreSQL plan again). */
    fixture_exec(
        db, "INSERT INTO runs (run_id, job, tenant, scheduled_at, version, "
            "fingerprint, request, status, output, completed_at, attempts) "
            "SELECT encode(sha256(('grown-' || i)::bytea), 'hex'), 'grown', "
            "'t', timestamptz '2026-01-01 00:00:00+00' "
            "+ i * interval '1 second', 'v1', "
            "encode(sha256('f'::bytea), 'hex'), "
            "'{\"request\":{\"messages\":[],\"model\":\"m\"}}', "
            "'completed', '{\"text\":\"ok\"}', now(), 1 "
            "FROM generate_series(1, 30000) i");
    fixture_exec(db, "INSERT INTO attempts (run_id, attempt_no, lease_epoch, "
                     "worker, idempotency_key, outcome, finished_at) "
                     "SELECT run_id, 1, 1, 'w0', run_id, 'ok', now() "
                     "FROM runs WHERE job = 'grown'");

    fixture_exec(db, "BEGIN");
    runs0 = seq_scans(db, "runs");
    attempts0 = seq_scans(db, "attempts");
    one_run(db, "after-growth");
    runs1 = seq_scans(db, "runs");
    attempts1 = seq_scans(db, "attempts");
    fixture_exec(db, "COMMIT");

    RL_CHECK_INTEQ(runs1 - runs0, 0);
    RL_CHECK_INTEQ(attempts1 - attempts0, 0);
    printf(
        "# sequential scans in one run's statements after growth: runs %lld, "
        "attempts %lld\n",
        (long long)(runs1 - runs0), (long long)(attempts1 - attempts0));

    fixture_drop(db, schema);
    RL_TEST_END();
}
