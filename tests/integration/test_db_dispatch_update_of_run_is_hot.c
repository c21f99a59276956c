/* Invariant: recording a dispatch updates its run heap-only (HOT) when the
 * run's page has room: the update changes attempts and updated_at, and no
 * index of runs may be keyed on (or filtered by) either of them, or every
 * dispatch would add an entry to each index of runs, the primary key on
 * the random run_id among them (schema/011 and 023). Counted with
 * pg_stat_xact_user_tables across the dispatch's own transaction, for
 * runs claimed on a fresh ledger (pages with room: fillfactor 50). */
#include <stdio.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
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
    int64_t upd = 0, hot = 0;

    for (int i = 0; i < 5; i++) {
        struct fixture_run run;
        struct rl_claim claim;
        char job[32], errstr[512];
        int attempt_no = 0;
        int64_t upd0, hot0;

        snprintf(job, sizeof(job), "hot-%d", i);
        fixture_run_init(&run, job, request, "{\"doc\":1}");
        memset(&claim, 0, sizeof(claim));
        RL_REQUIRE(rltest_db_claim(db, &run.reg, "w1", 30, &claim, errstr,
                                   sizeof(errstr)) == 0);
        RL_REQUIRE(claim.status == RL_CLAIM_WON);
        fixture_exec(db, "BEGIN");
        upd0 = fixture_runs_stat(db, "n_tup_upd");
        hot0 = fixture_runs_stat(db, "n_tup_hot_upd");
        RL_REQUIRE(rltest_db_dispatch(db, run.run_id, "w1", claim.lease_epoch,
                                      run.run_id, &attempt_no, errstr,
                                      sizeof(errstr)) == 0);
        upd += fixture_runs_stat(db, "n_tup_upd") - upd0;
        hot += fixture_runs_stat(db, "n_tup_hot_upd") - hot0;
        fixture_exec(db, "COMMIT");
        RL_CHECK_INTEQ(attempt_no, 1);
        rl_claim_clear(&claim);
    }
    RL_CHECK_INTEQ(upd, 5);
    RL_CHECK_INTEQ(hot, 5);
    printf("# dispatch updates of runs: %lld, heap-only: %lld\n",
           (long long)upd, (long long)hot);
    fixture_drop(db, schema);
    RL_TEST_END();
}
