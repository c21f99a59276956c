/* Invariant: registering a batch of new runs asks whether a concurrency
 * limit covers each of its (tenant, job) pairs once, not once per run:
 * rl_run_limited is called as many times as the batch has pairs (counted
 * with track_functions in the claim's own transaction), and the runs of a
 * limited pair are still left to the sweeper (queued) while the others
 * are claimed at their insert. The slots offered are what the unlimited
 * pair takes, as the intake offers its free model slots: none is left
 * for claiming runs that were already in the ledger, which is asked
 * about run by run. */
#include <stdio.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rltest.h"
#include "test_db_fixture.h"

#define RUNS 24

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

static const char calls_sql[] =
    "SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions"
    " WHERE funcname = 'rl_run_limited'"
    "   AND schemaname = current_schema()";

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    static struct fixture_run runs[RUNS];
    static struct rl_run_reg regs[RUNS];
    static struct rl_claim claims[RUNS];
    char errstr[512];
    int won = 0, queued = 0;
    int64_t calls;

    /* Two pairs: jobs "pair-a" (no limit) and "pair-b" (limited). */
    for (int i = 0; i < RUNS; i++) {
        char job[32], at[RL_TIME_UTC_SIZE];

        snprintf(job, sizeof(job), "pair-%c", i % 2 ? 'b' : 'a');
        /* one job, many schedule windows: a run id of its own each */
        snprintf(at, sizeof(at), "2026-08-07T09:%02d:00+00:00", i);
        fixture_run_init_at(&runs[i], job, at, request, "{\"doc\":1}");
        regs[i] = runs[i].reg;
    }
    fixture_exec(db, "INSERT INTO run_limits (tenant, job, concurrency)"
                     " VALUES ('workspace-acme', 'pair-b', 100)");
    fixture_exec(db, "SET track_functions = 'all'");
    fixture_exec(db, "BEGIN");
    RL_REQUIRE(rl_db_register_claim_some(
                   db, regs, RUNS,
                   &(struct rl_claim_opts){
                       .worker = "w1", .lease_seconds = 30, .max = RUNS / 2},
                   claims, errstr, sizeof(errstr)) == 0);
    calls = fixture_int(db, calls_sql, NULL);
    fixture_exec(db, "COMMIT");
    for (int i = 0; i < RUNS; i++) {
        if (claims[i].status == RL_CLAIM_WON)
            won += i % 2 == 0;
        else if (claims[i].status == RL_CLAIM_QUEUED)
            queued += i % 2 == 1;
        rl_claim_clear(&claims[i]);
    }
    printf("# rl_run_limited calls for %d runs in 2 pairs: %lld\n", RUNS,
           (long long)calls);
    RL_CHECK_INTEQ(calls, 2);
    RL_CHECK_INTEQ(won, RUNS / 2);
    RL_CHECK_INTEQ(queued, RUNS / 2);
    fixture_exec(db, "RESET track_functions");
    fixture_drop(db, schema);
    RL_TEST_END();
}
