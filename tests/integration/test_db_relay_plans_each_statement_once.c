/* Invariant: the relay's session plans each of its two statements once,
 * not at every batch. Its settings (rl_db_outbox_listen) fix the plan
 * whatever the statistics say, so a plan per call bought nothing and cost
 * more than the batch: 0.48 ms of planning a batch at 50 runs/s, three
 * times the statements' execution. Here: 300 pending rows, three batches
 * of 100 locked and delivered on a session set up as the relay sets it
 * up; the session's pg_prepared_statements must show the lock and finish
 * statements with no custom plan and three runs of their generic plan.
 * Also: every row went, 100 a batch. */
#include <stdio.h>

#include "rl/db_conn.h"
#include "rl/db_outbox.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

enum { RUNS = 150, BATCH = 100, BATCHES = 3 };

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_db *relay = fixture_connect(schema);
    char errstr[512], runs[24];

    fixture_completed_runs(db, RUNS);
    snprintf(runs, sizeof(runs), "%d", RUNS);
    RL_REQUIRE(
        fixture_int(db,
                    "WITH ins AS ("
                    " INSERT INTO outbox (run_id, channel, explicit_payload)"
                    " SELECT encode(sha256(i::text::bytea), 'hex'), c,"
                    "        '{}'"
                    "   FROM generate_series(1, $1::int) i,"
                    "        (VALUES ('email'), ('slack')) v(c)"
                    " RETURNING 1)"
                    " SELECT count(*) FROM ins",
                    runs) == 2 * RUNS);

    RL_REQUIRE(rl_db_outbox_listen(relay, errstr, sizeof(errstr)) == 0);
    for (int b = 0; b < BATCHES; b++) {
        struct rl_outbox_row *rows = NULL;
        size_t n = 0;

        RL_CHECK_INTEQ(rl_db_outbox_lock_batch_bytes(relay, BATCH, 0, 60000,
                                                     &rows, &n, NULL, errstr,
                                                     sizeof(errstr)),
                       0);
        RL_CHECK_INTEQ(n, BATCH);
        RL_CHECK_INTEQ(
            rltest_db_outbox_finish(relay, rows, n, 1, errstr, sizeof(errstr)),
            0);
        rl_db_outbox_rows_free(rows, n);
    }
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL), 0);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM outbox_delivered", NULL),
        2 * RUNS);
    /* pg_prepared_statements is the session's own view */
    RL_CHECK_INTEQ(fixture_int(relay,
                               "SELECT count(*) FROM pg_prepared_statements"
                               " WHERE name IN ('lock_pending_outbox',"
                               "                'finish_outbox_rows')"
                               "   AND custom_plans = 0 AND generic_plans = 3",
                               NULL),
                   2);
    fprintf(stderr, "relay statements: custom plans %lld, generic %lld\n",
            (long long)fixture_int(relay,
                                   "SELECT sum(custom_plans)"
                                   "  FROM pg_prepared_statements",
                                   NULL),
            (long long)fixture_int(relay,
                                   "SELECT sum(generic_plans)"
                                   "  FROM pg_prepared_statements",
                                   NULL));

    rl_db_destroy(relay);
    fixture_drop(db, schema);
    RL_TEST_END();
}
