/* Invariant: on a server with lz4, the ledger's long values are stored
 * compressed with lz4, not with the default pglz, and read back
 * unchanged: every column that carries a prompt, an input, an answer, a
 * proposal or a notification payload is set to lz4 in the catalog, and a
 * run's 20 kB request, input and output, written through the service's
 * statements, are stored with lz4 and equal what was written. On a
 * server without lz4 the same checks expect pglz. */
#include <stdio.h>
#include <string.h>

#include "rl/db.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

#define LONG 20000

/* The method the ledger's long values should use on this server. */
static const char method_sql[] =
    "SELECT CASE WHEN 'lz4' = ANY (enumvals) THEN 'lz4' ELSE 'pglz' END"
    "  FROM pg_settings WHERE name = 'default_toast_compression'";

static const char columns_sql[] =
    "SELECT count(*) FROM pg_attribute a"
    " WHERE a.attrelid IN ('runs'::regclass, 'outbox'::regclass,"
    "                      'outbox_delivered'::regclass,"
    "                      'outbox_dead'::regclass,"
    "                      'received_notifications'::regclass,"
    "                      'receiver_conflicts'::regclass)"
    "   AND a.attname IN ('request', 'raw_input', 'output', 'proposal',"
    "                     'explicit_payload', 'payload')"
    "   AND a.attcompression::text"
    "       = CASE WHEN $1 = 'lz4' THEN 'l' ELSE '' END";

/* 1 when the run's column is stored compressed with the method expected
 * ($1 is the run id) */
#define STORED_WITH(col)                                                       \
    "SELECT (pg_column_compression(r." col ") = ("                             \
    "SELECT CASE WHEN 'lz4' = ANY (enumvals) THEN 'lz4' ELSE 'pglz' END"       \
    "  FROM pg_settings WHERE name = 'default_toast_compression'))::int"       \
    "  FROM runs r WHERE r.run_id = $1"

/* A JSON document of about LONG bytes whose text compresses as prose
 * does: words drawn from a small vocabulary. */
static void
long_json(char *buf, size_t size, const char *head, const char *tail)
{
    static const char *const words[] = {"ledger", "run",    "lease", "epoch",
                                        "answer", "report", "tenant"};
    size_t n = (size_t)snprintf(buf, size, "%s", head);
    unsigned seed = 7;

    while (n + 16 + strlen(tail) < size && n < LONG) {
        seed = seed * 1103515245u + 12345u;
        n +=
            (size_t)snprintf(buf + n, size - n, "%s ", words[(seed >> 16) % 7]);
    }
    snprintf(buf + n, size - n, "%s", tail);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    static char request[LONG + 256], output[LONG + 256], input[LONG + 256];
    static const char *const channels[] = {"email"};
    struct fixture_run a, b;
    struct rl_claim claim;
    char method[16], errstr[512];

    RL_REQUIRE(rl_db_exec(db, method_sql, 0, NULL, method, sizeof(method),
                          errstr, sizeof(errstr)) == 1);
    printf("# long values on this server: %s\n", method);
    RL_CHECK_INTEQ(fixture_int(db, columns_sql, method), 9);

    long_json(request, sizeof(request),
              "{\"notify\":[\"email\"],\"request\":{\"model\":\"m\","
              "\"messages\":[{\"role\":\"user\",\"content\":\"",
              "\"}]}}");
    long_json(output, sizeof(output), "{\"text\":\"", "\"}");
    long_json(input, sizeof(input), "{\"doc\":\"", "\"}");

    /* A run claimed and completed with a long request and answer. */
    fixture_complete_run(db, &a, "lz4-long-answer", request, output, channels,
                         1);
    RL_CHECK_INTEQ(fixture_int(db, STORED_WITH("request"), a.run_id), 1);
    RL_CHECK_INTEQ(fixture_int(db, STORED_WITH("output"), a.run_id), 1);
    {
        char sql[256];

        snprintf(sql, sizeof(sql),
                 "SELECT (output = $1::jsonb)::int FROM runs"
                 " WHERE run_id = '%s'",
                 a.run_id);
        RL_CHECK_INTEQ(fixture_int(db, sql, output), 1);
        snprintf(sql, sizeof(sql),
                 "SELECT (request = $1::jsonb)::int FROM runs"
                 " WHERE run_id = '%s'",
                 a.run_id);
        RL_CHECK_INTEQ(fixture_int(db, sql, request), 1);
    }

    /* A run registered with a long input. */
    fixture_run_init(&b, "lz4-long-input", "{\"notify\":[],\"request\":{}}",
                     input);
    RL_REQUIRE(rltest_db_claim(db, &b.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    rl_claim_clear(&claim);
    RL_CHECK_INTEQ(fixture_int(db, STORED_WITH("raw_input"), b.run_id), 1);
    {
        char sql[256];

        snprintf(sql, sizeof(sql),
                 "SELECT (raw_input = $1::jsonb)::int FROM runs"
                 " WHERE run_id = '%s'",
                 b.run_id);
        RL_CHECK_INTEQ(fixture_int(db, sql, input), 1);
    }
    fixture_drop(db, schema);
    RL_TEST_END();
}
