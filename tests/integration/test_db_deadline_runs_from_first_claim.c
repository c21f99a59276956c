/* Invariant: a run's deadline runs from its first claim, not from its
 * registration. A run registered pending (no slot: a tenant's limit, the
 * fair share) that waits longer than its deadline for a slot is claimed
 * with its whole deadline ahead; once claimed, its deadline no longer
 * moves at later claims. */
#include <stdio.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rltest.h"
#include "test_db_fixture.h"

/* The sweeper's claim of the one run: whether its deadline has passed. */
static int
claim_due_passed(struct rl_db *db)
{
    const struct rl_claim_opts opts = {
        .worker = "w1", .lease_seconds = 30, .max = 4};
    struct rl_claim due[4];
    char errstr[512];
    size_t n = 0;
    int passed;

    RL_REQUIRE(rl_db_claim_due(db, &opts, due, &n, errstr, sizeof(errstr)) ==
               0);
    RL_REQUIRE(n == 1);
    RL_CHECK_INTEQ(due[0].status, RL_CLAIM_WON);
    passed = due[0].deadline_passed;
    rl_claim_clear(&due[0]);
    return passed;
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1], errstr[512];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run run;
    struct rl_claim claim;

    fixture_run_init(&run, "deadline-job", "{\"p\":1}", NULL);
    run.reg.deadline_seconds = 30;
    memset(&claim, 0, sizeof(claim));
    RL_REQUIRE(rl_db_register_claim_some(
                   db, &run.reg, 1,
                   &(struct rl_claim_opts){
                       .worker = "w1", .lease_seconds = 30, .max = 0},
                   &claim, errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_QUEUED);
    rl_claim_clear(&claim);

    /* It waited an hour for a slot. */
    fixture_exec(db, "UPDATE runs SET created_at = now() - interval '1 hour',"
                     " deadline_at = now() - interval '1 hour'"
                     "               + interval '30 seconds'");
    RL_CHECK_INTEQ(claim_due_passed(db), 0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs WHERE deadline_at"
                               " BETWEEN now() + interval '29 seconds'"
                               "     AND now() + interval '31 seconds'",
                               NULL),
                   1);

    /* Claimed once, the deadline is its own: a later claim keeps it. */
    fixture_exec(db, "UPDATE runs SET status = 'pending', lock_owner = NULL,"
                     " lock_expires_at = NULL, next_attempt_at = now(),"
                     " deadline_at = now() - interval '1 second'");
    RL_CHECK_INTEQ(claim_due_passed(db), 1);

    fixture_drop(db, schema);
    RL_TEST_END();
}
