/* Invariant: every service session has statement, lock and
 * idle-in-transaction timeouts, TCP keepalives and an application_name
 * naming its role; the renewal session's timeouts fit in the lease, the
 * vacuum session has no statement timeout, the relay's has them all (it
 * holds no transaction while the broker acknowledges); and what
 * DATABASE_URL sets itself wins. (The keepalives and tcp_user_timeout are
 * options of the client socket, which the server does not show.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/config.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rltest.h"
#include "test_db_fixture.h"

static int64_t
setting_ms(struct rl_db *db, const char *name)
{
    /* pg_settings gives the value in its unit: ms for all three. */
    return fixture_int(
        db, "SELECT setting::int8 FROM pg_settings WHERE name = $1", name);
}

static int64_t
app_is(struct rl_db *db, const char *name)
{
    return fixture_int(
        db, "SELECT (current_setting('application_name') = $1)::int", name);
}

int
main(void)
{
    char errstr[512];
    struct rl_config *cfg;
    struct rl_db *db;
    const char *url = getenv("DATABASE_URL");
    char with_options[2048];

    if (!url || !*url) {
        fprintf(stderr, "DATABASE_URL unset\n");
        return getenv("RL_REQUIRE_SERVICES") ? 1 : 77;
    }
    setenv("RUNLEDGER_LEASE_SECONDS", "6", 1);
    cfg = rl_config_load(errstr, sizeof(errstr));
    RL_REQUIRE(cfg);
    RL_CHECK_INTEQ(cfg->pg_statement_timeout_ms, 30000);
    RL_CHECK_INTEQ(cfg->pg_lock_timeout_ms, 10000);
    RL_CHECK_INTEQ(cfg->pg_idle_in_tx_timeout_ms, 60000);

    db = rl_db_connect_role(cfg, RL_DB_ROLE_LEDGER, errstr, sizeof(errstr));
    RL_REQUIRE(db);
    RL_CHECK_INTEQ(setting_ms(db, "statement_timeout"), 30000);
    RL_CHECK_INTEQ(setting_ms(db, "lock_timeout"), 10000);
    RL_CHECK_INTEQ(setting_ms(db, "idle_in_transaction_session_timeout"),
                   60000);
    RL_CHECK_INTEQ(app_is(db, "runledger-ledger"), 1);
    rl_db_destroy(db);

    /* renewals: a third and a sixth of the 6 s lease */
    db = rl_db_connect_role(cfg, RL_DB_ROLE_RENEW, errstr, sizeof(errstr));
    RL_REQUIRE(db);
    RL_CHECK_INTEQ(setting_ms(db, "statement_timeout"), 2000);
    RL_CHECK_INTEQ(setting_ms(db, "lock_timeout"), 1000);
    RL_CHECK_INTEQ(app_is(db, "runledger-renew"), 1);
    rl_db_destroy(db);

    db = rl_db_connect_role(cfg, RL_DB_ROLE_VACUUM, errstr, sizeof(errstr));
    RL_REQUIRE(db);
    RL_CHECK_INTEQ(setting_ms(db, "statement_timeout"), 0);
    rl_db_destroy(db);

    db = rl_db_connect_role(cfg, RL_DB_ROLE_RELAY, errstr, sizeof(errstr));
    RL_REQUIRE(db);
    /* The relay leases its rows and holds no transaction while the
     * broker acknowledges them: no exemption. */
    RL_CHECK_INTEQ(setting_ms(db, "idle_in_transaction_session_timeout"),
                   60000);
    RL_CHECK_INTEQ(setting_ms(db, "statement_timeout"), 30000);
    rl_db_destroy(db);

    /* The connection string's own settings win. */
    snprintf(
        with_options, sizeof(with_options),
        "%s%sapplication_name=mine&options=-c%%20statement_timeout%%3D1234",
        url, strchr(url, '?') ? "&" : "?");
    free(cfg->database_url);
    cfg->database_url = strdup(with_options);
    RL_REQUIRE(cfg->database_url);
    db = rl_db_connect_role(cfg, RL_DB_ROLE_COMPLETER, errstr, sizeof(errstr));
    if (!db)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(db);
    RL_CHECK_INTEQ(setting_ms(db, "statement_timeout"), 1234);
    RL_CHECK_INTEQ(setting_ms(db, "lock_timeout"), 10000);
    RL_CHECK_INTEQ(app_is(db, "mine"), 1);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT (current_setting('plan_cache_mode') = "
                               "$1)::int",
                               "force_custom_plan"),
                   1);
    rl_db_destroy(db);
    rl_config_destroy(cfg);
    RL_TEST_END();
}
