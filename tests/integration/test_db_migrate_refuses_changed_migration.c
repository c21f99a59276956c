/* Invariant: a migration whose applied checksum is neither this build's
 * nor a superseded one of its file is refused with RL_ERR_CHECKSUM, the
 * message names the file, and nothing else is applied; `runledger migrate`
 * exits 3 for it, 0 when applying or up to date. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rl/db_conn.h"
#include "rl/db_migrate.h"
#include "rl/err.h"
#include "rl/migrations.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char tamper[] =
    "UPDATE schema_migrations SET checksum = repeat('x', 64) "
    "WHERE name = $1";

static void
changed_migration_is_refused(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    char errstr[512];
    struct rl_db *db = fixture_ledger(schema);
    const char *params[1] = {rl_migrations[0].name};
    int applied = -1;

    RL_CHECK_INTEQ(
        rl_db_exec(db, tamper, 1, params, NULL, 0, errstr, sizeof(errstr)), 1);
    RL_CHECK_INTEQ(rl_db_migrate(db, &applied, errstr, sizeof(errstr)),
                   RL_ERR_CHECKSUM);
    RL_CHECK_INTEQ(applied, 0);
    RL_CHECK(strstr(errstr, rl_migrations[0].name) != NULL);
    RL_CHECK(strstr(errstr, "changed") != NULL);
    fprintf(stderr, "refusal reads: %s\n", errstr);
    /* The lock was released: a second migrator is refused, not blocked. */
    RL_CHECK_INTEQ(rl_db_migrate(db, &applied, errstr, sizeof(errstr)),
                   RL_ERR_CHECKSUM);
    fixture_drop(db, schema);
}

/* Runs `runledger migrate --database-url URL --schema S`, capturing the
 * first line of stdout into out. Returns the exit status. */
static int
run_cli(const char *bin, const char *url, const char *schema, char *out,
        size_t out_size)
{
    int fds[2];
    pid_t pid;
    int status = -1;
    FILE *f;

    out[0] = '\0';
    RL_REQUIRE(pipe(fds) == 0);
    pid = fork();
    RL_REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(bin, bin, "migrate", "--database-url", url, "--schema", schema,
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    f = fdopen(fds[0], "r");
    RL_REQUIRE(f != NULL);
    if (fgets(out, (int)out_size, f))
        out[strcspn(out, "\n")] = '\0';
    while (fgetc(f) != EOF)
        ;
    fclose(f);
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void
cli_exit_codes(void)
{
    const char *bin = getenv("RUNLEDGER_BIN");
    const char *url = rltest_service_env("DATABASE_URL");
    char schema[RL_DB_SCHEMA_MAX + 1];
    char expect[64];
    char out[256];
    char errstr[512];
    const char *params[1] = {rl_migrations[0].name};
    struct rl_db *db;

    if (!bin || access(bin, X_OK) != 0) {
        fprintf(stderr, "RUNLEDGER_BIN not runnable: CLI part skipped\n");
        return;
    }
    snprintf(schema, sizeof(schema), "%s", rltest_unique("rl_test_cli"));
    snprintf(expect, sizeof(expect), "applied %zu migrations",
             rl_migrations_count);
    RL_CHECK_INTEQ(run_cli(bin, url, schema, out, sizeof(out)), 0);
    RL_CHECK_STREQ(out, expect);
    RL_CHECK_INTEQ(run_cli(bin, url, schema, out, sizeof(out)), 0);
    RL_CHECK_STREQ(out, "schema is up to date");

    db = fixture_connect(schema);
    RL_CHECK_INTEQ(
        rl_db_exec(db, tamper, 1, params, NULL, 0, errstr, sizeof(errstr)), 1);
    RL_CHECK_INTEQ(run_cli(bin, url, schema, out, sizeof(out)), 3);
    RL_CHECK_INTEQ(run_cli(bin, "postgresql://nobody@127.0.0.1:1/none", schema,
                           out, sizeof(out)),
                   1);
    fixture_drop(db, schema);
}

int
main(void)
{
    changed_migration_is_refused();
    cli_exit_codes();
    RL_TEST_END();
}
