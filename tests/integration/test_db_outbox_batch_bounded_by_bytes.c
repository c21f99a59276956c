/* Invariant: a relay batch is bounded by notification bytes as well as by
 * rows: rows are taken in due order while the bytes before them are under
 * the bound, so a batch holds at most the bound plus one notification, a
 * notification larger than the bound goes alone, a cut batch says it is
 * full (more is due at once), and the rows after the cut are read by the
 * next batch. Long answers that compress well in the ledger count at
 * their size on the topic, not their stored size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_outbox.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

enum { BIG = 5, SMALL = 3, BIG_BYTES = 300000 };

static const char request[] = "{\"notify\":[\"email\"],"
                              "\"request\":{\"messages\":[],\"model\":\"m\"}}";

static void
complete_runs(struct rl_db *db, const char *prefix, int count,
              const char *output)
{
    const char *channels[1] = {"email"};
    char job[32];

    for (int i = 0; i < count; i++) {
        struct fixture_run run;

        snprintf(job, sizeof(job), "%s-%d", prefix, i);
        fixture_complete_run(db, &run, job, request, output, channels, 1);
    }
}

static size_t
batch_bytes(const struct rl_outbox_row *rows, size_t n, size_t *largest)
{
    size_t sum = 0;

    *largest = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(rows[i].payload);

        sum += len;
        if (len > *largest)
            *largest = len;
    }
    return sum;
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_db *relay = fixture_connect(schema);
    struct rl_outbox_row *rows = NULL;
    char *big = malloc(BIG_BYTES + 64);
    char errstr[512];
    size_t n = 0, largest = 0;
    int full = 0;

    RL_REQUIRE(big != NULL);
    /* One phrase over and over: stored compressed to a few kB, 300 kB on
     * the topic. */
    memcpy(big, "{\"text\":\"", 9);
    for (size_t i = 0; i < BIG_BYTES; i++)
        big[9 + i] = "long report "[i % 12];
    memcpy(big + 9 + BIG_BYTES, "\"}", 3);
    complete_runs(db, "bytes-big", BIG, big);
    complete_runs(db, "bytes-small", SMALL, "{\"text\":\"short\"}");
    /* the long ones due first */
    fixture_exec(db, "UPDATE outbox SET due_at = due_at - interval '1 minute'"
                     " WHERE run_id IN (SELECT run_id FROM runs"
                     "                   WHERE job LIKE 'bytes-big-%')");
    RL_CHECK(fixture_int(db,
                         "SELECT max(pg_column_size(output)) FROM runs"
                         " WHERE job LIKE 'bytes-big-%'",
                         NULL) < BIG_BYTES / 10);

    /* Bound 1,000,000: four long ones (the bytes before the fourth are
     * 0.9 MB), not the fifth. */
    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay, 100, 1000000, 60000, &rows,
                                             &n, &full, errstr,
                                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n, 4);
    RL_CHECK_INTEQ(full, 1);
    RL_CHECK(batch_bytes(rows, n, &largest) <= 1000000 + largest);
    RL_CHECK(largest > BIG_BYTES);
    RL_REQUIRE(rltest_db_outbox_finish(relay, rows, n, 1, errstr,
                                       sizeof(errstr)) == 0);
    rl_db_outbox_rows_free(rows, n);

    /* The next batch: the fifth and the short ones, short of both
     * bounds. */
    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay, 100, 1000000, 60000, &rows,
                                             &n, &full, errstr,
                                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n, 1 + SMALL);
    RL_CHECK_INTEQ(full, 0);
    RL_CHECK(strlen(rows[0].payload) > BIG_BYTES);
    RL_REQUIRE(rltest_db_outbox_finish(relay, rows, n, 1, errstr,
                                       sizeof(errstr)) == 0);
    rl_db_outbox_rows_free(rows, n);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL), 0);

    /* A notification larger than the bound goes alone; the rows bound
     * still says full when it is reached. */
    complete_runs(db, "bytes-alone", 2, big);
    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay, 100, 65536, 60000, &rows,
                                             &n, &full, errstr,
                                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n, 1);
    RL_CHECK_INTEQ(full, 1);
    RL_REQUIRE(rltest_db_outbox_finish(relay, rows, n, 0, errstr,
                                       sizeof(errstr)) == 0);
    rl_db_outbox_rows_free(rows, n);
    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay, 1, 0, 60000, &rows, &n,
                                             &full, errstr,
                                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n, 1);
    RL_CHECK_INTEQ(full, 1);
    RL_REQUIRE(rltest_db_outbox_finish(relay, rows, n, 0, errstr,
                                       sizeof(errstr)) == 0);
    rl_db_outbox_rows_free(rows, n);

    free(big);
    rl_db_destroy(relay);
    fixture_drop(db, schema);
    RL_TEST_END();
}
