#include "test_db_fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rl/db_claim.h"
#include "rl/db_migrate.h"
#include "rl/err.h"
#include "rl/runid.h"
#include "rltest.h"
#include "rltest_db.h"

struct rl_db *
fixture_connect(const char *schema)
{
    const char *url = rltest_service_env("DATABASE_URL");
    char errstr[512];
    struct rl_db *db;

    db = rl_db_connect_schema(url, schema, errstr, sizeof(errstr));
    if (!db)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(db != NULL);
    return db;
}

struct rl_db *
fixture_ledger(char *schema)
{
    char errstr[512];
    struct rl_db *db;
    int applied = -1;
    int err;

    snprintf(schema, RL_DB_SCHEMA_MAX + 1, "%s", rltest_unique("rl_test"));
    db = fixture_connect(schema);
    err = rl_db_migrate(db, &applied, errstr, sizeof(errstr));
    if (err != 0)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(err == 0);
    RL_REQUIRE(applied > 0);
    return db;
}

void
fixture_drop(struct rl_db *db, const char *schema)
{
    char sql[RL_DB_SCHEMA_MAX + 64];
    char errstr[512];
    const char *params[1] = {schema};

    /* A schema name is an identifier, which cannot be a parameter: the
     * server quotes it (format %I) and the result is run. */
    if (rl_db_exec(db,
                   "SELECT format('DROP SCHEMA IF EXISTS %I CASCADE', "
                   "$1::text)",
                   1, params, sql, sizeof(sql), errstr, sizeof(errstr)) != 1 ||
        rl_db_exec(db, sql, 0, NULL, NULL, 0, errstr, sizeof(errstr)) < 0)
        fprintf(stderr, "could not drop test schema: %s\n", errstr);
    rl_db_destroy(db);
}

void
fixture_run_init(struct fixture_run *run, const char *job,
                 const char *request_json, const char *input_json)
{
    fixture_run_init_at(run, job, "2026-08-07T09:00:00+00:00", request_json,
                        input_json);
}

void
fixture_run_init_at(struct fixture_run *run, const char *job,
                    const char *scheduled_at, const char *request_json,
                    const char *input_json)
{
    char identity[256];

    memset(run, 0, sizeof(*run));
    snprintf(run->job, sizeof(run->job), "%s", job);
    snprintf(run->scheduled_at, sizeof(run->scheduled_at), "%s", scheduled_at);
    snprintf(identity, sizeof(identity), "%s|workspace-acme|%s|v1", job,
             run->scheduled_at);
    RL_REQUIRE(rl_sha256_hex(identity, strlen(identity), run->run_id) == 0);
    RL_REQUIRE(rl_sha256_hex(request_json, strlen(request_json),
                             run->fingerprint) == 0);
    run->reg.run_id = run->run_id;
    run->reg.job = run->job;
    run->reg.tenant = "workspace-acme";
    run->reg.scheduled_at = run->scheduled_at;
    run->reg.version = "v1";
    run->reg.fingerprint = run->fingerprint;
    run->reg.request_json = request_json;
    run->reg.input_json = input_json;
    run->reg.deadline_seconds = 0;
    run->reg.source_topic = "schedules";
    run->reg.source_partition = 0;
    run->reg.source_offset = 42;
}

int64_t
fixture_int(struct rl_db *db, const char *sql, const char *param)
{
    const char *params[1] = {param};
    char value[64];
    char errstr[512];
    int rows;

    rows = rl_db_exec(db, sql, param ? 1 : 0, param ? params : NULL, value,
                      sizeof(value), errstr, sizeof(errstr));
    if (rows < 0)
        fprintf(stderr, "%s: %s\n", sql, errstr);
    RL_REQUIRE(rows >= 0);
    return strtoll(value, NULL, 10);
}

void
fixture_complete_run(struct rl_db *db, struct fixture_run *run, const char *job,
                     const char *request_json, const char *output_json,
                     const char *const *channels, size_t n_channels)
{
    struct rl_claim claim;
    char errstr[512];
    int completed = 0;

    fixture_run_init(run, job, request_json, NULL);
    RL_REQUIRE(rltest_db_claim(db, &run->reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    RL_REQUIRE(rltest_db_complete(db, run->run_id, "w1", claim.lease_epoch,
                                  NULL, output_json, channels, n_channels,
                                  &completed, errstr, sizeof(errstr)) == 0);
    RL_REQUIRE(completed == 1);
    rl_claim_clear(&claim);
}

void
fixture_completed_runs(struct rl_db *db, int count)
{
    char n[24];

    snprintf(n, sizeof(n), "%d", count);
    RL_REQUIRE(
        fixture_int(
            db,
            "WITH ins AS ("
            " INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
            "                   fingerprint, request, status, output,"
            "                   completed_at)"
            " SELECT encode(sha256(i::text::bytea), 'hex'), 'queue',"
            "        'workspace-acme',"
            "        timestamptz '2026-08-07 09:00Z' + i * interval '1h',"
            "        'v1', encode(sha256(i::text::bytea), 'hex'),"
            "        '{\"notify\":[\"email\",\"slack\"],\"request\":{}}',"
            "        'completed', '{\"text\":\"t\"}', now()"
            "   FROM generate_series(1, $1::int) i"
            " RETURNING 1)"
            " SELECT count(*) FROM ins",
            n) == count);
}

void
fixture_exec(struct rl_db *db, const char *sql)
{
    char errstr[512];

    if (rl_db_exec(db, sql, 0, NULL, NULL, 0, errstr, sizeof(errstr)) < 0) {
        fprintf(stderr, "%s: %s\n", sql, errstr);
        RL_REQUIRE(0);
    }
}

int64_t
fixture_table_stat(struct rl_db *db, const char *table, const char *column)
{
    char sql[256];

    snprintf(sql, sizeof(sql),
             "SELECT %s FROM pg_stat_xact_user_tables "
             "WHERE relid = '%s'::regclass",
             column, table);
    return fixture_int(db, sql, NULL);
}

int64_t
fixture_runs_stat(struct rl_db *db, const char *column)
{
    return fixture_table_stat(db, "runs", column);
}

void
fixture_wait_lease_expired(struct rl_db *db, const char *run_id)
{
    int64_t deadline = rltest_now_ms() + 15000;
    struct timespec nap = {0, 20 * 1000000L};

    while (fixture_int(db,
                       "SELECT (lock_expires_at < now())::int FROM runs "
                       "WHERE run_id = $1",
                       run_id) != 1) {
        RL_REQUIRE(rltest_now_ms() < deadline);
        nanosleep(&nap, NULL);
    }
}

int
fixture_run_cli(const char *const *args, const char *const *env, char *out,
                size_t size, int64_t *took_ms)
{
    const char *bin = getenv("RUNLEDGER_BIN");
    const char *argv[32];
    int64_t start = rltest_now_ms();
    int fds[2], n = 0, status = 0;
    size_t len = 0;
    pid_t pid;

    RL_REQUIRE(bin && access(bin, X_OK) == 0 && size > 0);
    argv[n++] = bin;
    for (int i = 0; args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    RL_REQUIRE(pipe(fds) == 0);
    pid = fork();
    RL_REQUIRE(pid >= 0);
    if (pid == 0) {
        for (int i = 0; env && env[i]; i++) {
            const char *eq = strchr(env[i], '=');

            if (eq) {
                char name[128];

                snprintf(name, sizeof(name), "%.*s", (int)(eq - env[i]),
                         env[i]);
                setenv(name, eq + 1, 1);
            } else {
                unsetenv(env[i]);
            }
        }
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    for (;;) {
        char buf[4096];
        ssize_t got = read(fds[0], buf, sizeof(buf));

        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        for (ssize_t i = 0; i < got && len + 1 < size; i++)
            out[len++] = buf[i];
    }
    out[len] = '\0';
    close(fds[0]);
    /* Its output ended: it exited (ctest's timeout guards a hang). */
    RL_REQUIRE(waitpid(pid, &status, 0) == pid);
    *took_ms = rltest_now_ms() - start;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
