/* Invariant: a relay batch reads about as many outbox rows as it carries,
 * however wrong the outbox's statistics are. The outbox is a queue, and
 * a vacuum that finds it nearly empty leaves pg_class saying it holds one
 * row; planned on that belief, a join form of the relay's statements read
 * every pending row for each batch (sorted them, or compared each with
 * every row of the batch), so a backlog made every batch slower and fed
 * itself. Here: a vacuum at one live row, then 20,000 pending rows; on a
 * session set up as the relay's (rl_db_outbox_listen), one batch of 100 is
 * locked and recorded delivered, and the outbox rows read
 * meanwhile (pg_stat_user_tables: sequential + index fetches; nothing but
 * the relay's session works then) must stay far below the backlog. Also: the
 * batch's rows, and only they, left the outbox for the audit. */
#include <stdio.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_outbox.h"
#include "rl/err.h"
#include "rl/runid.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

enum { PENDING_RUNS = 10000, BATCH = 100, READ_BOUND = 10 * BATCH };
/* The churn below names runs 1..12,500, more than the backlog's
 * PENDING_RUNS: the row it leaves, the last one inserted, names a run the
 * backlog does not. */

/* Flushes the session's table statistics: pg_stat_force_next_flush()
 * makes the session report them as it goes idle after that statement,
 * before the client sees the statement end. */
static void
flush_stats(struct rl_db *db)
{
    fixture_exec(db, "SELECT pg_stat_force_next_flush()");
}

/* Outbox rows read so far by every session (sequential + index fetches);
 * this session's statistics are flushed first. */
static int64_t
outbox_rows_read(struct rl_db *relay)
{
    flush_stats(relay);
    return fixture_int(relay,
                       "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0)"
                       "  FROM pg_stat_user_tables"
                       " WHERE relid = 'outbox'::regclass",
                       NULL);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_db *relay = fixture_connect(schema);
    struct rl_outbox_row *rows = NULL;
    char errstr[512];
    size_t n = 0;
    int64_t before, after;

    /* runs 1..12,500, completed, so outbox rows may name them */
    fixture_completed_runs(db, 12500);
    fixture_exec(db, "ANALYZE runs"); /* as autovacuum would have by now */
    /* churn: 25,000 rows created a microsecond apart, analyzed while
     * they are there (as autovacuum's analyze would), all delivered but
     * the last, then a vacuum that finds one live row on the pages the
     * backlog below will fill (freed space is reused, so the outbox does
     * not grow and the planner keeps believing in one row) */
    fixture_exec(
        db, "INSERT INTO outbox (run_id, channel, explicit_payload, created_at)"
            " SELECT encode(sha256(i::text::bytea), 'hex'), c,"
            "        jsonb_build_object('pad', repeat('x', 300)),"
            "        now() + (2 * i + (c = 'slack')::int)"
            "                * interval '1us'"
            "   FROM generate_series(1, 12500) i,"
            "        (VALUES ('email'), ('slack')) v(c)");
    fixture_exec(db, "ANALYZE outbox");
    fixture_exec(db, "DELETE FROM outbox WHERE ctid <> (SELECT max(ctid) FROM "
                     "outbox)");
    fixture_exec(db, "VACUUM outbox");
    RL_REQUIRE(fixture_int(db,
                           "SELECT reltuples::int8 FROM pg_class"
                           " WHERE oid = 'outbox'::regclass",
                           NULL) <= 1);
    /* the backlog the statistics do not know about: 20,000 rows of one
     * statement, so of one created_at (those statistics describe the
     * churn's distinct ones); on them the join form walked the primary
     * key, joined every row to its run and sorted, to keep 100 */
    fixture_exec(db, "INSERT INTO outbox (run_id, channel, explicit_payload)"
                     " SELECT encode(sha256(i::text::bytea), 'hex'), c,"
                     "        jsonb_build_object('pad', repeat('x', 300))"
                     "   FROM generate_series(1, 10000) i,"
                     "        (VALUES ('email'), ('slack')) v(c)");
    RL_REQUIRE(fixture_int(db, "SELECT count(*) FROM outbox", NULL) ==
               2 * PENDING_RUNS + 1);
    /* that count read every row: reported now, not inside the window */
    flush_stats(db);

    /* the relay's session, set up as the relay sets it up */
    RL_REQUIRE(rl_db_outbox_listen(relay, errstr, sizeof(errstr)) == 0);
    before = outbox_rows_read(relay);
    RL_CHECK_INTEQ(rl_db_outbox_lock_batch_bytes(relay, BATCH, 0, 60000, &rows,
                                                 &n, NULL, errstr,
                                                 sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n, BATCH);
    RL_CHECK_INTEQ(
        rltest_db_outbox_finish(relay, rows, n, 1, errstr, sizeof(errstr)), 0);
    after = outbox_rows_read(relay);
    fprintf(stderr, "a batch of %d read %lld outbox rows of %d pending\n",
            BATCH, (long long)(after - before), 2 * PENDING_RUNS + 1);
    RL_CHECK(after - before > 0); /* the counters do count this session */
    RL_CHECK(after - before <= READ_BOUND);

    /* the rows of the batch, and only they, moved to the audit */
    for (size_t i = 0; i < n; i++) {
        char key[RL_HEX_SIZE + 64];

        snprintf(key, sizeof(key), "%s:%s", rows[i].run_id, rows[i].channel);
        RL_CHECK_INTEQ(fixture_int(db,
                                   "SELECT count(*) FROM outbox_delivered"
                                   " WHERE run_id || ':' || channel = $1",
                                   key),
                       1);
        RL_CHECK_INTEQ(fixture_int(db,
                                   "SELECT count(*) FROM outbox"
                                   " WHERE run_id || ':' || channel = $1",
                                   key),
                       0);
    }
    if (n > 0) {
        RL_CHECK_STREQ(rows[0].tenant, "workspace-acme");
        RL_CHECK_STREQ(rows[0].job, "queue");
    }
    rl_db_outbox_rows_free(rows, n);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM outbox_delivered", NULL), BATCH);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL),
                   2 * PENDING_RUNS + 1 - BATCH);

    rl_db_destroy(relay);
    fixture_drop(db, schema);
    RL_TEST_END();
}
