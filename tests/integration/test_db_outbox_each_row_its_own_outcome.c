/* Invariant: the relay records an outcome per outbox row, not per batch.
 * In one batch, acknowledged rows move to outbox_delivered whatever became
 * of the others; a row refused for good moves to outbox_dead with its
 * reason and payload size; a row that failed transiently stays pending
 * with its error and a due time later by a backoff that doubles with each
 * failure up to the cap, and no batch locks it before it is due. */
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_outbox.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

enum { RUNS = 3 };

static const char request[] = "{\"notify\":[\"email\",\"slack\"],"
                              "\"request\":{\"messages\":[],\"model\":\"m\"}}";

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_db *relay = fixture_connect(schema);
    struct fixture_run runs[RUNS];
    struct rl_outbox_row *rows = NULL;
    struct rl_outbox_outcome oc[2 * RUNS];
    const char *channels[2] = {"email", "slack"};
    char errstr[512], job[32], dead_run[RL_HEX_SIZE];
    size_t n = 0;

    for (int i = 0; i < RUNS; i++) {
        snprintf(job, sizeof(job), "outcome-%d", i);
        fixture_complete_run(db, &runs[i], job, request, "{\"text\":\"t\"}",
                             channels, 2);
    }

    /* one batch, three outcomes: rows 0, 1 and 5 acknowledged, 2 and 3
     * failed transiently, 4 refused for good */
    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay, 100, 0, 60000, &rows, &n,
                                             NULL, errstr,
                                             sizeof(errstr)) == 0);
    RL_REQUIRE(n == 2 * RUNS);
    memset(oc, 0, sizeof(oc));
    oc[0].fate = oc[1].fate = oc[5].fate = RL_OUTBOX_DELIVERED;
    oc[2].fate = oc[3].fate = RL_OUTBOX_RETRY;
    snprintf(oc[2].reason, sizeof(oc[2].reason), "REQUEST_TIMED_OUT: t");
    snprintf(oc[3].reason, sizeof(oc[3].reason), "REQUEST_TIMED_OUT: t");
    oc[4].fate = RL_OUTBOX_DEAD;
    snprintf(oc[4].reason, sizeof(oc[4].reason),
             "MSG_SIZE_TOO_LARGE: Broker: Message size too large");
    memcpy(dead_run, rows[4].run_id, sizeof(dead_run));
    RL_CHECK_INTEQ(rl_db_outbox_finish_rows(relay, rows, n, oc, 60000, 600000,
                                            errstr, sizeof(errstr)),
                   0);
    rl_db_outbox_rows_free(rows, n);

    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM outbox_delivered", NULL), 3);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL), 2);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox"
                               " WHERE delivery_count = 1"
                               "   AND last_error = 'REQUEST_TIMED_OUT: t'"
                               "   AND due_at BETWEEN now() + interval '50 s'"
                               "                  AND now() + interval '61 s'",
                               NULL),
                   2);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox_dead"
                               " WHERE run_id = $1 AND delivery_count = 1"
                               "   AND reason LIKE 'MSG_SIZE_TOO_LARGE:%'"
                               "   AND payload_bytes = "
                               "       octet_length(payload::text)"
                               "   AND payload_bytes > 0"
                               "   AND payload->>'run_id' = run_id"
                               "   AND payload->>'channel' = channel"
                               "   AND payload->'output'->>'text' = 't'",
                               dead_run),
                   1);
    /* one row per (run, channel) across the three tables */
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM (SELECT run_id, channel"
                               " FROM outbox UNION ALL SELECT run_id, channel"
                               " FROM outbox_delivered UNION ALL SELECT"
                               " run_id, channel FROM outbox_dead) u",
                               NULL),
                   2 * RUNS);

    /* the failed rows are not due: the next batch is empty */
    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay, 100, 0, 60000, &rows, &n,
                                             NULL, errstr,
                                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n, 0);
    RL_CHECK_INTEQ(rl_db_outbox_finish_rows(relay, NULL, 0, NULL, 0, 0, errstr,
                                            sizeof(errstr)),
                   0);

    /* once due they come back; a second failure doubles the wait (120 s),
     * here above the cap of 90 s */
    RL_REQUIRE(fixture_int(db,
                           "WITH u AS (UPDATE outbox SET due_at = now()"
                           " RETURNING 1) SELECT count(*) FROM u",
                           NULL) == 2);
    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay, 100, 0, 60000, &rows, &n,
                                             NULL, errstr,
                                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n, 2);
    memset(oc, 0, sizeof(oc));
    for (size_t i = 0; i < n; i++) {
        RL_CHECK_INTEQ(rows[i].delivery_count, 1);
        oc[i].fate = RL_OUTBOX_RETRY;
    }
    RL_CHECK_INTEQ(rl_db_outbox_finish_rows(relay, rows, n, oc, 60000, 90000,
                                            errstr, sizeof(errstr)),
                   0);
    rl_db_outbox_rows_free(rows, n);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox"
                               " WHERE delivery_count = 2"
                               "   AND due_at BETWEEN now() + interval '85 s'"
                               "                  AND now() + interval '91 s'",
                               NULL),
                   2);

    rl_db_destroy(relay);
    fixture_drop(db, schema);
    RL_TEST_END();
}
