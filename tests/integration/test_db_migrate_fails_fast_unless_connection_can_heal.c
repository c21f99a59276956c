/* Invariant: `runledger migrate --wait S` (the chart's pre-install hook)
 * ends at once, exit 4, on a connection refusal another attempt cannot
 * change, saying what it is, and keeps retrying until its deadline (exit
 * 1) only on one that may heal. Against the test PostgreSQL: a wrong
 * password (the role rl_password_required must give its password, see
 * tests/harness/pg.sh), a database and a role that do not exist, and
 * sslmode=require against this server without TLS each end after one
 * attempt, within seconds of a 30 s wait; the right password migrates; a
 * refused port is tried again and again until --wait 3 runs out. No message
 * shows the password. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rl/db_conn.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

#define RIGHT_PASSWORD "right-pa55-0123"
#define WRONG_PASSWORD "wrong-pa55-4567"

static char host[256], port[16], dbname[128], user[128];
static char out[1 << 16];

/* The test server's address, port, database and user, as the server
 * sees the test's connection. */
static void
server_address(struct rl_db *db)
{
    static const struct {
        const char *sql;
        char *value;
        size_t size;
    } q[] = {
        {"SELECT host(inet_server_addr())", host, sizeof(host)},
        {"SELECT inet_server_port()::text", port, sizeof(port)},
        {"SELECT current_database()", dbname, sizeof(dbname)},
        {"SELECT current_user", user, sizeof(user)},
    };
    char value[256], errstr[512];

    for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
        RL_REQUIRE(rl_db_exec(db, q[i].sql, 0, NULL, value, sizeof(value),
                              errstr, sizeof(errstr)) == 1 &&
                   *value);
        snprintf(q[i].value, q[i].size, "%s", value);
    }
}

/* Counts the lines of text holding needle. */
static int
count(const char *text, const char *needle)
{
    int n = 0;

    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* `runledger migrate --database-url url --wait wait [--schema schema]`;
 * the exit status, out filled, *took its milliseconds. */
static int
migrate(const char *url, const char *wait, const char *schema, int64_t *took)
{
    const char *args[] = {
        "migrate", "--database-url",           url,    "--wait",
        wait,      schema ? "--schema" : NULL, schema, NULL};
    int rc = fixture_run_cli(args, NULL, out, sizeof(out), took);

    fprintf(stderr, "migrate (%lld ms, exit %d): %s", (long long)*took, rc,
            out);
    return rc;
}

/* A refusal for good: exit 4 after one attempt (no "retrying in" line),
 * within seconds although --wait is 30 (a busy machine may take more than
 * the tens of milliseconds it takes here), the message holding want. */
static void
fails_fast(const char *what, const char *url, const char *want)
{
    int64_t took = -1;

    fprintf(stderr, "-- %s\n", what);
    RL_CHECK_INTEQ(migrate(url, "30", NULL, &took), 4);
    RL_CHECK(took >= 0 && took < 5000);
    RL_CHECK(strstr(out, want) != NULL);
    RL_CHECK(strstr(out, "not retried") != NULL);
    RL_CHECK(strstr(out, "retrying in") == NULL);
    RL_CHECK(strstr(out, WRONG_PASSWORD) == NULL);
}

/* A port nothing listens on (free a moment ago). */
static int
refused_port(void)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int p;

    RL_REQUIRE(fd >= 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    RL_REQUIRE(bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
    RL_REQUIRE(getsockname(fd, (struct sockaddr *)&addr, &len) == 0);
    p = ntohs(addr.sin_port);
    close(fd);
    return p;
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    char url[1024];
    struct rl_db *db;
    int64_t took = -1;

    db = fixture_connect(NULL);
    server_address(db);
    /* The role whose password pg_hba.conf asks for; it creates the
     * schema the right password migrates. */
    fixture_exec(db, "DO $$ BEGIN "
                     "CREATE ROLE rl_password_required LOGIN; "
                     "EXCEPTION WHEN duplicate_object THEN NULL; END $$");
    fixture_exec(db, "ALTER ROLE rl_password_required PASSWORD '" RIGHT_PASSWORD
                     "'");
    fixture_exec(db, "DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE "
                     "%I TO rl_password_required', current_database()); "
                     "END $$");
    /* As on a managed database: the roles exist (this ledger's migrate
     * made them) and the migrating login is granted the owner's. */
    fixture_exec(db, "GRANT runledger_owner TO rl_password_required");

    snprintf(url, sizeof(url), "postgresql://rl_password_required:%s@%s:%s/%s",
             WRONG_PASSWORD, host, port, dbname);
    fails_fast("a wrong password", url, "password authentication failed");
    if (!strstr(out, "password authentication failed"))
        fprintf(stderr, "(the test PostgreSQL lets rl_password_required in "
                        "without its password: it predates the pg_hba.conf "
                        "of tests/harness/pg.sh; restart the services)\n");

    snprintf(url, sizeof(url), "postgresql://%s@%s:%s/rl_no_such_db", user,
             host, port);
    fails_fast("a database that does not exist", url,
               "database \"rl_no_such_db\" does not exist");

    snprintf(url, sizeof(url), "postgresql://rl_no_such_role@%s:%s/%s", host,
             port, dbname);
    fails_fast("a role that does not exist", url,
               "role \"rl_no_such_role\" does not exist");

    snprintf(url, sizeof(url), "postgresql://%s@%s:%s/%s?sslmode=require", user,
             host, port, dbname);
    fails_fast("TLS required from a server without it", url,
               "server does not support SSL, but SSL was required");
    RL_CHECK(strstr(out, "sslmode") != NULL);

    /* The right password gets in and migrates. */
    snprintf(schema, sizeof(schema), "%s", rltest_unique("rl_test_pw"));
    snprintf(url, sizeof(url), "postgresql://rl_password_required:%s@%s:%s/%s",
             RIGHT_PASSWORD, host, port, dbname);
    RL_CHECK_INTEQ(migrate(url, "30", schema, &took), 0);
    RL_CHECK(strstr(out, "applied ") != NULL);
    RL_CHECK(strstr(out, RIGHT_PASSWORD) == NULL);

    /* Refused: may heal, so tried again until the deadline. */
    fprintf(stderr, "-- a refused port\n");
    snprintf(url, sizeof(url), "postgresql://%s@127.0.0.1:%d/%s", user,
             refused_port(), dbname);
    RL_CHECK_INTEQ(migrate(url, "3", NULL, &took), 1);
    RL_CHECK(took >= 3000 && took < 15000);
    RL_CHECK(count(out, "may heal: retrying in") >= 2);
    RL_CHECK(strstr(out, "gave up after") != NULL);
    RL_CHECK(strstr(out, "not retried") == NULL);

    fixture_drop(db, schema);
    RL_TEST_END();
}
