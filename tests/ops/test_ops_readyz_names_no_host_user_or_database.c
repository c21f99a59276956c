/* /readyz says what is wrong with PostgreSQL without the host, port, user
 * or database: anyone who reaches the port can read it. The log still has
 * libpq's full text for the operator. Three failures: nothing listening,
 * an unknown role, an unknown database. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ops.h"
#include "rltest.h"

#define USER "rl_probe_user_x7"
#define DBNAME "rl_probe_db_x7"

/* host:port of url ("postgresql://user@host:port/db...") into out. */
static void
host_port_of(const char *url, char *out, size_t size)
{
    const char *at = strchr(url, '@');
    const char *start = at ? at + 1 : strstr(url, "//") + 2;
    size_t len = strcspn(start, "/?");

    snprintf(out, size, "%.*s", (int)len, start);
}

/* Starts a relay on database_url, waits for /readyz 503 and checks that
 * its text starts with want and names nothing in secrets. */
static void
check_reason(struct e2e *t, const char *database_url, const char *want,
             const char *const *names)
{
    char port_env[64], url_env[512], body[1024] = "";
    const char *relay_args[] = {"relay", NULL};
    const char *env[] = {port_env, url_env,
                         "RUNLEDGER_HEALTH_INTERVAL_SECONDS=1", NULL};
    int port = ops_free_port();
    int relay, status;

    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    snprintf(url_env, sizeof(url_env), "DATABASE_URL=%s", database_url);
    relay = ops_spawn(t, relay_args, env);
    RL_CHECK(ops_wait_http(port, "/healthz", 200, 20000));
    /* The first answer may be "not checked yet": wait for the class. */
    for (int i = 0; i < 100; i++) {
        if (ops_http_get(port, "/readyz", body, sizeof(body)) == 503 &&
            strncmp(body, "postgresql: not checked", 23) != 0)
            break;
        ops_wait_http(port, "/healthz", 200, 100);
    }
    printf("%s -> %s", database_url, body);
    RL_CHECK(strncmp(body, want, strlen(want)) == 0);
    for (int i = 0; names[i]; i++) {
        if (strstr(body, names[i]))
            fprintf(stderr, "/readyz names \"%s\": %s", names[i], body);
        RL_CHECK(strstr(body, names[i]) == NULL);
    }
    status = e2e_signal(t, relay, SIGTERM, 1);
    RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int
main(void)
{
    struct e2e t;
    char host_port[256], url[512], port[16];
    const char *colon;

    e2e_setup(&t, "opsreadyz", 1);
    host_port_of(t.database_url, host_port, sizeof(host_port));
    colon = strrchr(host_port, ':');
    snprintf(port, sizeof(port), ":%s", colon ? colon + 1 : "5432");

    {
        const char *names[] = {USER, DBNAME, "127.0.0.1", NULL};

        check_reason(&t, "postgresql://" USER "@127.0.0.1:1/" DBNAME,
                     "postgresql: could not connect", names);
    }
    {
        const char *names[] = {USER, DBNAME, host_port, port, NULL};

        snprintf(url, sizeof(url), "postgresql://%s@%s/%s", USER, host_port,
                 DBNAME);
        check_reason(&t, url, "postgresql: could not connect", names);
    }
    {
        /* "postgres" is also in "postgresql:": look for it as libpq
         * quotes it. */
        const char *names[] = {"\"postgres\"", "user", DBNAME,
                               host_port,      port,   NULL};

        snprintf(url, sizeof(url), "postgresql://postgres@%s/%s", host_port,
                 DBNAME);
        check_reason(&t, url, "postgresql: could not connect", names);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
