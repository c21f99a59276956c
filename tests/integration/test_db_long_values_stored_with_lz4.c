/* Invariant: on a server with lz4, the ledger's long values are stored
 * compressed with lz4, not with the default pglz, and read back
 * unchanged: every column that carries a prompt, an input, an answer, a
 * proposal or a notification payload is set to lz4 in the catalog, and a
 * run's 20 kB request, input and output, written through the service's
 * statements, are stored with lz4 and equal what was written. On a
 * server without lz4 the same checks expect pglz. */
#include <stdio.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
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

/* How the run's column is stored: 2 compressed with lz4, 1 with pglz, 0
 * not compressed ($1 is the run id). */
#define STORED_WITH(col)                                                       \
    "SELECT CASE pg_column_compression(r." col ")"                             \
    "       WHEN 'lz4' THEN 2 WHEN 'pglz' THEN 1 ELSE 0 END"                   \
    "  FROM runs r WHERE r.run_id = $1"

/* 1 when the run's column equals a JSON value: $1 is the run id, a bar,
 * and the value. */
#define STORED_EQUAL(col)                                                      \
    "SELECT (r." col " = substr($1, 66)::jsonb)::int"                          \
    "  FROM runs r WHERE r.run_id = left($1, 64)"

/* A JSON document of about LONG bytes that PostgreSQL compresses: words
 * drawn from a small vocabulary. */
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

/* run id, a bar, value: STORED_EQUAL's parameter */
static void
keyed(char *buf, size_t size, const char *run_id, const char *value)
{
    RL_REQUIRE((size_t)snprintf(buf, size, "%s|%s", run_id, value) < size);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    static char request[LONG + 256], output[LONG + 256], input[LONG + 256];
    static char param[LONG + 512];
    static const char *const channels[] = {"email"};
    struct fixture_run a, b;
    struct rl_claim claim;
    char method[16], errstr[512];
    int stored;

    RL_REQUIRE(rl_db_exec(db, method_sql, 0, NULL, method, sizeof(method),
                          errstr, sizeof(errstr)) == 1);
    printf("# long values on this server: %s\n", method);
    RL_CHECK_INTEQ(fixture_int(db, columns_sql, method), 9);
    stored = strcmp(method, "lz4") == 0 ? 2 : 1;

    long_json(request, sizeof(request),
              "{\"notify\":[\"email\"],\"request\":{\"model\":\"m\","
              "\"messages\":[{\"role\":\"user\",\"content\":\"",
              "\"}]}}");
    long_json(output, sizeof(output), "{\"text\":\"", "\"}");
    long_json(input, sizeof(input), "{\"doc\":\"", "\"}");

    /* A run claimed and completed with a long request and answer. */
    fixture_complete_run(db, &a, "lz4-long-answer", request, output, channels,
                         1);
    RL_CHECK_INTEQ(fixture_int(db, STORED_WITH("request"), a.run_id), stored);
    RL_CHECK_INTEQ(fixture_int(db, STORED_WITH("output"), a.run_id), stored);
    keyed(param, sizeof(param), a.run_id, output);
    RL_CHECK_INTEQ(fixture_int(db, STORED_EQUAL("output"), param), 1);
    keyed(param, sizeof(param), a.run_id, request);
    RL_CHECK_INTEQ(fixture_int(db, STORED_EQUAL("request"), param), 1);

    /* A run registered with a long input. */
    fixture_run_init(&b, "lz4-long-input", "{\"notify\":[],\"request\":{}}",
                     input);
    RL_REQUIRE(rltest_db_claim(db, &b.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    rl_claim_clear(&claim);
    RL_CHECK_INTEQ(fixture_int(db, STORED_WITH("raw_input"), b.run_id), stored);
    keyed(param, sizeof(param), b.run_id, input);
    RL_CHECK_INTEQ(fixture_int(db, STORED_EQUAL("raw_input"), param), 1);
    fixture_drop(db, schema);
    RL_TEST_END();
}
