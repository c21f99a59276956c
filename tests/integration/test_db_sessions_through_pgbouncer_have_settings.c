/* Invariant: through PgBouncer in session mode every service session has
 * the settings it has on a direct connection (plan_cache_mode, the
 * statement, lock and idle-in-transaction timeouts, application_name, the
 * connection string's own -c settings last), whether PgBouncer refuses
 * startup options (its default), drops them (options in
 * ignore_startup_parameters) or is declared (RUNLEDGER_PG_POOL_MODE=
 * session); they are in force again after a reconnect; and transaction
 * pooling is refused with a message that says why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rl/config.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static int64_t
setting_ms(struct rl_db *db, const char *name)
{
    return fixture_int(
        db, "SELECT setting::int8 FROM pg_settings WHERE name = $1", name);
}

static int64_t
setting_is(struct rl_db *db, const char *name, const char *want)
{
    char sql[160];

    snprintf(sql, sizeof(sql), "SELECT (current_setting('%s') = $1)::int",
             name);
    return fixture_int(db, sql, want);
}

static struct rl_config *
config_for(const char *url, const char *pool_mode)
{
    char errstr[512];
    struct rl_config *cfg;

    setenv("DATABASE_URL", url, 1);
    setenv("RUNLEDGER_PG_POOL_MODE", pool_mode, 1);
    setenv("RUNLEDGER_LEASE_SECONDS", "6", 1);
    cfg = rl_config_load(errstr, sizeof(errstr));
    if (!cfg)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(cfg);
    return cfg;
}

/* The settings of each role's session reached through url. */
static void
check_roles(const char *url, const char *pool_mode)
{
    char errstr[512];
    char with_options[2048];
    struct rl_config *cfg = config_for(url, pool_mode);
    struct rl_db *db;

    fprintf(stderr, "through %s, RUNLEDGER_PG_POOL_MODE=%s\n", url, pool_mode);
    db = rl_db_connect_role(cfg, RL_DB_ROLE_LEDGER, errstr, sizeof(errstr));
    if (!db)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(db);
    RL_CHECK_INTEQ(setting_is(db, "plan_cache_mode", "force_custom_plan"), 1);
    RL_CHECK_INTEQ(setting_ms(db, "statement_timeout"), 30000);
    RL_CHECK_INTEQ(setting_ms(db, "lock_timeout"), 10000);
    RL_CHECK_INTEQ(setting_ms(db, "idle_in_transaction_session_timeout"),
                   60000);
    RL_CHECK_INTEQ(setting_is(db, "application_name", "runledger-ledger"), 1);
    rl_db_destroy(db);

    db = rl_db_connect_role(cfg, RL_DB_ROLE_RENEW, errstr, sizeof(errstr));
    RL_REQUIRE(db);
    RL_CHECK_INTEQ(setting_ms(db, "statement_timeout"), 2000);
    RL_CHECK_INTEQ(setting_ms(db, "lock_timeout"), 1000);
    RL_CHECK_INTEQ(setting_is(db, "application_name", "runledger-renew"), 1);
    rl_db_destroy(db);

    db = rl_db_connect_role(cfg, RL_DB_ROLE_RELAY, errstr, sizeof(errstr));
    RL_REQUIRE(db);
    RL_CHECK_INTEQ(setting_ms(db, "idle_in_transaction_session_timeout"),
                   60000);
    RL_CHECK_INTEQ(setting_ms(db, "statement_timeout"), 30000);
    rl_db_destroy(db);

    /* The connection string's own settings win, escapes and all. */
    snprintf(with_options, sizeof(with_options),
             "%s%sapplication_name=mine&options=-c%%20statement_timeout%%3D1234"
             "%%20--lock-timeout%%3D4321%%20-csearch_path%%3Dpublic,%%5C%%20pg_"
             "catalog",
             url, strchr(url, '?') ? "&" : "?");
    free(cfg->database_url);
    cfg->database_url = strdup(with_options);
    RL_REQUIRE(cfg->database_url);
    db = rl_db_connect_role(cfg, RL_DB_ROLE_COMPLETER, errstr, sizeof(errstr));
    if (!db)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(db);
    RL_CHECK_INTEQ(setting_ms(db, "statement_timeout"), 1234);
    RL_CHECK_INTEQ(setting_ms(db, "lock_timeout"), 4321);
    RL_CHECK_INTEQ(setting_is(db, "search_path", "public, pg_catalog"), 1);
    RL_CHECK_INTEQ(setting_is(db, "application_name", "mine"), 1);
    RL_CHECK_INTEQ(setting_is(db, "plan_cache_mode", "force_custom_plan"), 1);
    rl_db_destroy(db);

    /* An operator command's connection (no role) plans the same way. */
    db = rl_db_connect(url, errstr, sizeof(errstr));
    RL_REQUIRE(db);
    RL_CHECK_INTEQ(setting_is(db, "plan_cache_mode", "force_custom_plan"), 1);
    rl_db_destroy(db);
    rl_config_destroy(cfg);
}

/* A session whose server connection was cut gets its settings again when
 * rl_db_ping reconnects. */
static void
check_reconnect(const char *url, const char *direct_url)
{
    char errstr[512];
    struct rl_config *cfg = config_for(url, "session");
    struct rl_db *db, *admin;
    int64_t killed;

    db = rl_db_connect_role(cfg, RL_DB_ROLE_RENEW, errstr, sizeof(errstr));
    RL_REQUIRE(db);
    admin = rl_db_connect(direct_url, errstr, sizeof(errstr));
    RL_REQUIRE(admin);
    killed = fixture_int(admin,
                         "SELECT count(pg_terminate_backend(pid)) FROM "
                         "pg_stat_activity WHERE application_name = $1",
                         "runledger-renew");
    RL_CHECK(killed >= 1);
    for (int i = 0; i < 3 && rl_db_ping(db, errstr, sizeof(errstr)) != 0; i++)
        sleep(1);
    RL_CHECK_INTEQ(rl_db_ping(db, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(setting_ms(db, "statement_timeout"), 2000);
    RL_CHECK_INTEQ(setting_is(db, "plan_cache_mode", "force_custom_plan"), 1);
    rl_db_destroy(admin);
    rl_db_destroy(db);
    rl_config_destroy(cfg);
}

int
main(void)
{
    char errstr[512];
    char dir[256], env_file[300], line[512];
    const char *direct = rltest_service_env("DATABASE_URL");
    const char *session = rltest_service_env("PGBOUNCER_URL_SESSION");
    const char *src = getenv("RL_SOURCE_DIR");
    char direct_copy[1024], session_copy[1024], ignoring[1024] = "";
    char cmd[4096];
    FILE *f;

    snprintf(direct_copy, sizeof(direct_copy), "%s", direct);
    snprintf(session_copy, sizeof(session_copy), "%s", session);

    /* PgBouncer as it ships: options refused, found out at connect. */
    check_roles(session_copy, "direct");
    /* Declared: no startup options sent at all. */
    check_roles(session_copy, "session");
    check_reconnect(session_copy, direct_copy);

    /* A PgBouncer of this test's own that drops startup options. */
    snprintf(dir, sizeof(dir), "%s/pgb_ignore_%ld",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    snprintf(cmd, sizeof(cmd),
             "PGBOUNCER_IGNORE_OPTIONS=1 PGBOUNCER_UPSTREAM_URL='%s' "
             "'%s/tests/harness/pgbouncer.sh' start '%s' >'%s.log' 2>&1",
             direct_copy, src ? src : ".", dir, dir);
    RL_REQUIRE(system(cmd) == 0);
    snprintf(env_file, sizeof(env_file), "%s/env", dir);
    f = fopen(env_file, "r");
    RL_REQUIRE(f);
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "PGBOUNCER_URL_SESSION=", 22) == 0)
            snprintf(ignoring, sizeof(ignoring), "%s", line + 22);
    }
    fclose(f);
    if (ignoring[0])
        check_roles(ignoring, "direct");
    RL_CHECK(ignoring[0] != '\0');
    snprintf(cmd, sizeof(cmd),
             "'%s/tests/harness/pgbouncer.sh' stop '%s' >>'%s.log' 2>&1 && "
             "rm -rf '%s' '%s.log'",
             src ? src : ".", dir, dir, dir, dir);
    RL_CHECK(system(cmd) == 0);

    /* Transaction pooling: refused, saying why. */
    setenv("RUNLEDGER_PG_POOL_MODE", "transaction", 1);
    RL_CHECK(rl_config_load(errstr, sizeof(errstr)) == NULL);
    RL_CHECK(strstr(errstr, "RUNLEDGER_PG_POOL_MODE=transaction is not "
                            "supported") != NULL);
    RL_CHECK(strstr(errstr, "LISTEN") != NULL);
    setenv("RUNLEDGER_PG_POOL_MODE", "statement", 1);
    RL_CHECK(rl_config_load(errstr, sizeof(errstr)) == NULL);
    RL_CHECK(strstr(errstr, "must be direct, session or transaction") != NULL);
    RL_TEST_END();
}
