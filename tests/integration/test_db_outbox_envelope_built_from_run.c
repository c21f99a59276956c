/* Invariant: a notification's standard envelope is stored nowhere but in
 * its run (the outbox and outbox_delivered rows hold no copy of the
 * answer), and the relay reads, for every row, exactly the bytes the
 * stored envelope had before it was built from the run: the same on a
 * re-read, for a large answer and for text that jsonb escapes. A payload
 * given explicitly, or stored by an older schema, is sent as stored, and
 * rl_payload_as_sent gives every delivered row's payload as it was sent.
 * A relay of the version before, still running during a rolling upgrade,
 * cannot read a row at all (rather than send an empty notification). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_outbox.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

enum { RUNS = 3, BIG = 200000 };

static const char request[] = "{\"notify\":[\"email\",\"slack\"],"
                              "\"request\":{\"messages\":[],\"model\":\"m\"}}";

/* The envelope as rl_complete_runs stored it before schema/026, written
 * out here so that the test pins the bytes on the topic, not whatever
 * rl_envelope builds. */
static const char old_envelope_sql[] =
    "SELECT jsonb_build_object("
    "           'run_id', r.run_id, 'job', r.job, 'tenant', r.tenant,"
    "           'scheduled_at', to_char(r.scheduled_at AT TIME ZONE 'UTC',"
    "                                   'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"'),"
    "           'version', r.version, 'channel', $2::text,"
    "           'output', r.output)::text"
    "  FROM runs r WHERE r.run_id = $1";

/* The read of the relay before schema/026, word for word. */
static const char old_relay_read_sql[] =
    "SELECT o.run_id, o.channel, r.job, r.tenant, o.payload,"
    "       o.delivery_count, o.ctid, r.traceparent, r.lease_epoch"
    "  FROM (SELECT ob.ctid, ob.run_id, ob.channel, ob.payload,"
    "               ob.delivery_count, ob.due_at"
    "          FROM outbox ob"
    "         WHERE ob.due_at <= now()"
    "         ORDER BY ob.due_at"
    "         LIMIT $1::int8"
    "           FOR UPDATE SKIP LOCKED) o"
    "  JOIN runs r ON r.run_id = o.run_id"
    " ORDER BY o.due_at";

static char *
old_envelope(struct rl_db *db, const char *run_id, const char *channel)
{
    const char *params[2] = {run_id, channel};
    char *value = malloc(BIG + 4096);
    char errstr[512];

    RL_REQUIRE(value != NULL);
    RL_REQUIRE(rl_db_exec(db, old_envelope_sql, 2, params, value, BIG + 4096,
                          errstr, sizeof(errstr)) == 1);
    return value;
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_db *relay = fixture_connect(schema);
    struct fixture_run runs[RUNS];
    struct rl_outbox_row *rows = NULL, *again = NULL;
    const char *channels[2] = {"email", "slack"};
    char *output = malloc(BIG + 64);
    char errstr[512];
    char job[32];
    size_t n = 0, n_again = 0;

    RL_REQUIRE(output != NULL);
    for (int i = 0; i < RUNS; i++) {
        if (i == 0) {
            /* a large answer */
            memcpy(output, "{\"text\":\"", 9);
            memset(output + 9, 'x', BIG);
            memcpy(output + 9 + BIG, "\"}", 3);
        } else {
            /* text jsonb escapes, non-ASCII, nesting, numbers */
            snprintf(output, BIG,
                     "{\"text\":\"line\\none \\\"q\\\" \\u00e9 %d"
                     "\",\"usage\":{\"n\":[1,2.50,1e3]}}",
                     i);
        }
        snprintf(job, sizeof(job), "envelope-%d", i);
        fixture_complete_run(db, &runs[i], job, request, output, channels, 2);
    }
    /* The answer is stored once, in its run. */
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL),
                   2 * RUNS);
    RL_CHECK_INTEQ(
        fixture_int(
            db, "SELECT count(*) FROM outbox WHERE explicit_payload IS NULL",
            NULL),
        2 * RUNS);

    /* A payload given explicitly is stored and sent as given. */
    {
        struct fixture_run custom;
        struct rl_claim claim;
        char sql[1024];

        fixture_run_init(&custom, "envelope-custom", request, NULL);
        RL_REQUIRE(rltest_db_claim(db, &custom.reg, "w1", 30, &claim, errstr,
                                   sizeof(errstr)) == 0);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM rl_complete_run('%s', 'w1', %lld,"
                 " '{\"text\":\"c\"}', ARRAY['email'],"
                 " ARRAY['{\"custom\":true}'::jsonb]) WHERE result = "
                 "'completed'",
                 custom.run_id, (long long)claim.lease_epoch);
        RL_CHECK_INTEQ(fixture_int(db, sql, NULL), 1);
        rl_claim_clear(&claim);
    }
    /* A row queued by an older schema keeps its stored envelope. */
    fixture_exec(db, "INSERT INTO outbox (run_id, channel, explicit_payload)"
                     " SELECT run_id, 'legacy', '{\"stored\":1}' FROM runs"
                     "  WHERE job = 'envelope-1'");

    /* The relay of the version before reads nothing. */
    {
        const char *params[1] = {"100"};
        char value[256];

        RL_CHECK(rl_db_exec(relay, old_relay_read_sql, 1, params, value,
                            sizeof(value), errstr, sizeof(errstr)) < 0);
        RL_CHECK(strstr(errstr, "payload") != NULL);
    }

    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay, 100, 0, 60000, &rows, &n,
                                             NULL, errstr,
                                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n, 2 * RUNS + 2);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rows[i].channel, "legacy") == 0) {
            RL_CHECK_STREQ(rows[i].payload, "{\"stored\": 1}");
        } else if (strcmp(rows[i].payload, "{\"custom\": true}") != 0) {
            char *want = old_envelope(db, rows[i].run_id, rows[i].channel);

            RL_CHECK_INTEQ(strlen(rows[i].payload), strlen(want));
            RL_CHECK(strcmp(rows[i].payload, want) == 0);
            free(want);
        }
    }
    /* Read again (a re-send after a failed batch): the same bytes. */
    RL_REQUIRE(rltest_db_outbox_finish(relay, rows, n, 0, errstr,
                                       sizeof(errstr)) == 0);
    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay, 100, 0, 60000, &again,
                                             &n_again, NULL, errstr,
                                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n_again, n);
    for (size_t i = 0; i < n_again; i++) {
        for (size_t k = 0; k < n; k++) {
            if (strcmp(again[i].run_id, rows[k].run_id) == 0 &&
                strcmp(again[i].channel, rows[k].channel) == 0)
                RL_CHECK(strcmp(again[i].payload, rows[k].payload) == 0);
        }
    }
    RL_REQUIRE(rltest_db_outbox_finish(relay, again, n_again, 1, errstr,
                                       sizeof(errstr)) == 0);

    /* Delivered: the audit holds no copy either, and gives back what was
     * sent. */
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL), 0);
    RL_CHECK_INTEQ(
        fixture_int(
            db,
            "SELECT count(*) FROM outbox_delivered "
            "WHERE explicit_payload IS NULL AND channel IN ('email','slack') "
            "AND run_id IN (SELECT run_id FROM runs "
            "WHERE job LIKE 'envelope-_')",
            NULL),
        2 * RUNS);
    for (size_t i = 0; i < n_again; i++) {
        const char *params[2] = {again[i].run_id, again[i].channel};
        char *value = malloc(BIG + 4096);

        RL_REQUIRE(value != NULL);
        RL_REQUIRE(rl_db_exec(db,
                              "SELECT rl_payload_as_sent(run_id, channel, "
                              "explicit_payload)::text FROM outbox_delivered "
                              "WHERE run_id = $1 AND channel = $2",
                              2, params, value, BIG + 4096, errstr,
                              sizeof(errstr)) == 1);
        RL_CHECK(strcmp(value, again[i].payload) == 0);
        free(value);
    }

    rl_db_outbox_rows_free(rows, n);
    rl_db_outbox_rows_free(again, n_again);
    free(output);
    rl_db_destroy(relay);
    fixture_drop(db, schema);
    RL_TEST_END();
}
