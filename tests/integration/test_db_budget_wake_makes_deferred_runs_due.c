/* Invariant: `budgets wake` makes the budget-deferred runs of its tenant
 * (and job) due now, and only those. Two runs of a tenant whose budget is
 * spent are deferred to the next UTC day at dispatch (no attempt, deadline
 * moved by the wait); a run of another tenant is deferred too. The budget
 * is raised: the sweeper still claims nothing (deferred until tomorrow).
 * rl_db_budget_wake for the tenant reports 2; those runs are due, each
 * with a 'wake' decision, their deadlines given back the skipped wait;
 * the other tenant's run still waits. The sweeper claims both and their
 * dispatch is recorded under the raised budget. A second wake finds
 * nothing. */
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

/* Claims run and dispatches it against its budgets with estimate 500. */
static enum rl_dispatch_status
claim_and_dispatch(struct rl_db *db, struct fixture_run *run)
{
    enum rl_dispatch_status status = RL_DISPATCH_RECORDED;
    struct rl_claim claim;
    char errstr[512];
    int attempt_no = 0;

    RL_REQUIRE(rltest_db_claim(db, &run->reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    RL_REQUIRE(rltest_db_dispatch_budget(
                   db, run->run_id, "w1", claim.lease_epoch, "k", 500, 100,
                   &status, &attempt_no, NULL, errstr, sizeof(errstr)) == 0);
    rl_claim_clear(&claim);
    return status;
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run a, b, c;
    struct rl_claim due[4];
    char errstr[512];
    int64_t woken = -1;
    size_t n = 0;
    int attempt_no = 0;
    enum rl_dispatch_status status;

    RL_REQUIRE(rl_db_budget_set(db, "workspace-acme", NULL, 100, "ops", errstr,
                                sizeof(errstr)) == 0);
    RL_REQUIRE(rl_db_budget_set(db, "workspace-other", NULL, 100, "ops", errstr,
                                sizeof(errstr)) == 0);
    fixture_run_init(&a, "wake-a", request, NULL);
    fixture_run_init(&b, "wake-b", request, NULL);
    fixture_run_init(&c, "wake-c", request, NULL);
    c.reg.tenant = "workspace-other";
    a.reg.deadline_seconds = 3600;
    RL_CHECK_INTEQ(claim_and_dispatch(db, &a), RL_DISPATCH_DEFERRED);
    RL_CHECK_INTEQ(claim_and_dispatch(db, &b), RL_DISPATCH_DEFERRED);
    RL_CHECK_INTEQ(claim_and_dispatch(db, &c), RL_DISPATCH_DEFERRED);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs WHERE status = "
                               "'pending' AND error_class = 'budget' AND "
                               "next_attempt_at = rl_next_budget_window()",
                               NULL),
                   3);
    /* the deferral moved a's deadline past tomorrow's window */
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT (deadline_at > rl_next_budget_window())"
                               "::int FROM runs WHERE run_id = $1",
                               a.run_id),
                   1);

    RL_REQUIRE(rl_db_budget_set(db, "workspace-acme", NULL, 100000, "ops",
                                errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(rl_db_claim_due(db,
                                   &(struct rl_claim_opts){.worker = "sweeper",
                                                           .lease_seconds = 30,
                                                           .max = 4},
                                   due, &n, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n, 0);

    RL_CHECK_INTEQ(rl_db_budget_wake(db, NULL, NULL, "ops", "raised", &woken,
                                     errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    RL_CHECK_INTEQ(rl_db_budget_wake(db, "workspace-acme", NULL, "ops",
                                     "budget raised", &woken, errstr,
                                     sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(woken, 2);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs WHERE tenant = "
                               "'workspace-acme' AND status = 'pending' AND "
                               "next_attempt_at <= now()",
                               NULL),
                   2);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM run_decisions WHERE "
                               "decision = 'wake' AND actor = 'ops' AND "
                               "reason = 'budget raised' AND prior_status = "
                               "'pending'",
                               NULL),
                   2);
    /* the skipped part of the wait is taken back from the deadline */
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT (deadline_at < now() + interval "
                               "'3601 seconds')::int FROM runs WHERE "
                               "run_id = $1",
                               a.run_id),
                   1);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT (next_attempt_at = "
                               "rl_next_budget_window())::int FROM runs "
                               "WHERE run_id = $1",
                               c.run_id),
                   1);

    RL_CHECK_INTEQ(rl_db_claim_due(db,
                                   &(struct rl_claim_opts){.worker = "sweeper",
                                                           .lease_seconds = 30,
                                                           .max = 4},
                                   due, &n, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n, 2);
    for (size_t i = 0; i < n; i++) {
        RL_CHECK(strcmp(due[i].run_id, c.run_id) != 0);
        RL_CHECK_INTEQ(rltest_db_dispatch_budget(db, due[i].run_id, "sweeper",
                                                 due[i].lease_epoch, "k2", 500,
                                                 100, &status, &attempt_no,
                                                 NULL, errstr, sizeof(errstr)),
                       0);
        RL_CHECK_INTEQ(status, RL_DISPATCH_RECORDED);
        rl_claim_clear(&due[i]);
    }

    RL_CHECK_INTEQ(rl_db_budget_wake(db, "workspace-acme", NULL, "ops", "again",
                                     &woken, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(woken, 0);
    fixture_drop(db, schema);
    RL_TEST_END();
}
