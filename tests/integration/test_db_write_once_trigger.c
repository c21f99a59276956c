/* Invariant: output and raw_input are write-once and a completed run stays
 * completed even against a hand-written UPDATE (the trigger under the
 * guarded statements); the first stored raw input wins. */
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

static int
exec1(struct rl_db *db, const char *sql, const char *run_id, char *errstr,
      size_t errstr_size)
{
    const char *params[1] = {run_id};

    return rl_db_exec(db, sql, 1, params, NULL, 0, errstr, errstr_size);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run run;
    struct rl_claim claim;
    struct rltest_run row;
    char errstr[512];
    char *stored = NULL;
    int completed = 0;

    fixture_run_init(&run, "write-once", request, NULL);
    RL_REQUIRE(rltest_db_claim(db, &run.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    RL_CHECK(claim.raw_input == NULL);

    /* raw input: the first value stays, later ones get it back */
    RL_CHECK_INTEQ(
        rl_db_store_raw_input(db,
                              &(struct rl_lease){.run_id = run.run_id,
                                                 .worker = "w1",
                                                 .epoch = claim.lease_epoch},
                              "{\"v\":1}", &stored, errstr, sizeof(errstr)),
        0);
    RL_CHECK_STREQ(stored, "{\"v\": 1}");
    free(stored);
    RL_CHECK_INTEQ(
        rl_db_store_raw_input(db,
                              &(struct rl_lease){.run_id = run.run_id,
                                                 .worker = "w1",
                                                 .epoch = claim.lease_epoch},
                              "{\"v\":2}", &stored, errstr, sizeof(errstr)),
        0);
    RL_CHECK_STREQ(stored, "{\"v\": 1}");
    free(stored);
    RL_CHECK_INTEQ(exec1(db,
                         "UPDATE runs SET raw_input = '{\"v\":3}' "
                         "WHERE run_id = $1",
                         run.run_id, errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    RL_CHECK(strstr(errstr, "raw_input is write-once") != NULL);
    /* setting the same value is not a change */
    RL_CHECK_INTEQ(exec1(db,
                         "UPDATE runs SET raw_input = '{\"v\":1}' "
                         "WHERE run_id = $1",
                         run.run_id, errstr, sizeof(errstr)),
                   1);

    RL_REQUIRE(rltest_db_complete(db, run.run_id, "w1", claim.lease_epoch, NULL,
                                  "{\"text\":\"accepted\"}", NULL, 0,
                                  &completed, errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(completed, 1);

    RL_CHECK_INTEQ(exec1(db,
                         "UPDATE runs SET output = '{\"text\":\"changed\"}' "
                         "WHERE run_id = $1",
                         run.run_id, errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    RL_CHECK(strstr(errstr, "output is write-once") != NULL);
    fprintf(stderr, "refusal reads: %s\n", errstr);
    RL_CHECK_INTEQ(exec1(db,
                         "UPDATE runs SET output = NULL, status = 'pending', "
                         "next_attempt_at = now() WHERE run_id = $1",
                         run.run_id, errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    RL_CHECK_INTEQ(exec1(db,
                         "UPDATE runs SET status = 'failed' "
                         "WHERE run_id = $1",
                         run.run_id, errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    RL_CHECK_INTEQ(exec1(db,
                         "UPDATE runs SET fingerprint = repeat('0', 64) "
                         "WHERE run_id = $1",
                         run.run_id, errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    /* a completed row cannot lose its output through the constraint either */
    RL_CHECK_INTEQ(
        exec1(db,
              "INSERT INTO outbox (run_id, channel, explicit_payload) "
              "VALUES ($1, 'x', '{}'), ($1, 'x', '{}')",
              run.run_id, errstr, sizeof(errstr)),
        RL_ERR_INVALID);

    RL_REQUIRE(
        rltest_db_get_run(db, run.run_id, &row, errstr, sizeof(errstr)) == 0);
    RL_CHECK_STREQ(row.status, "completed");
    RL_CHECK_STREQ(row.output_json, "{\"text\": \"accepted\"}");
    RL_CHECK_STREQ(row.raw_input, "{\"v\": 1}");
    rltest_run_clear(&row);
    rl_claim_clear(&claim);
    fixture_drop(db, schema);
    RL_TEST_END();
}
