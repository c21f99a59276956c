/* Invariant: a dispatch needs a lease the database clock has not passed.
 * A worker that wakes from a stall with its owner and epoch still on the
 * row (nobody has swept it yet) is refused as stale and records no
 * attempt, on the set-based path and on the per-run path of a tenant with
 * a budget; a live lease still dispatches. */
#include <string.h>

#include "rl/db_budgets.h"
#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_dispatch.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

static void
check_refused(struct rl_db *db, struct fixture_run *run, int budgeted)
{
    struct rl_claim claim;
    enum rl_dispatch_status status;
    char errstr[512];
    int attempt_no = 0;

    RL_CHECK_INTEQ(
        rltest_db_claim(db, &run->reg, "w1", 1, &claim, errstr, sizeof(errstr)),
        0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_WON);
    rl_claim_clear(&claim);
    fixture_wait_lease_expired(db, run->run_id);
    /* Still w1's on the row: only the expiry tells it is gone. */
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs WHERE run_id = $1 "
                               "AND lock_owner = 'w1' AND lease_epoch = 1",
                               run->run_id),
                   1);
    if (budgeted)
        RL_CHECK_INTEQ(rltest_db_dispatch_budget(
                           db, run->run_id, "w1", 1, run->run_id, 10, 0,
                           &status, &attempt_no, NULL, errstr, sizeof(errstr)),
                       RL_ERR_STALE);
    else
        RL_CHECK_INTEQ(rltest_db_dispatch(db, run->run_id, "w1", 1, run->run_id,
                                          &attempt_no, errstr, sizeof(errstr)),
                       RL_ERR_STALE);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM attempts WHERE run_id = $1",
                    run->run_id),
        0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT attempts FROM runs WHERE run_id = $1",
                               run->run_id),
                   0);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run plain, budgeted, live;
    struct rl_claim claim;
    char errstr[512];
    int attempt_no = 0;

    fixture_run_init(&plain, "expired_plain", request, NULL);
    check_refused(db, &plain, 0);

    fixture_run_init(&budgeted, "expired_budgeted", request, NULL);
    RL_CHECK_INTEQ(rl_db_budget_set(db, budgeted.reg.tenant, NULL, 1000000,
                                    "test", errstr, sizeof(errstr)),
                   0);
    check_refused(db, &budgeted, 1);

    /* A live lease dispatches as before. */
    fixture_run_init(&live, "live", request, NULL);
    RL_CHECK_INTEQ(rltest_db_claim(db, &live.reg, "w1", 30, &claim, errstr,
                                   sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_WON);
    rl_claim_clear(&claim);
    RL_CHECK_INTEQ(rltest_db_dispatch(db, live.run_id, "w1", 1, live.run_id,
                                      &attempt_no, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(attempt_no, 1);

    fixture_drop(db, schema);
    RL_TEST_END();
}
