/* A consumer's health server and the console start without a warning:
 * with the option order wrong, libmicrohttpd reports
 * "MHD_OPTION_EXTERNAL_LOGGER is not the first option specified" on every
 * start, and a warning on every start teaches operators to ignore
 * warnings. Once both answer, their stderr up to their shutdown holds
 * their "serving" line, no message of libmicrohttpd (logged with the
 * prefix "http: " and "console http: "), and nothing but JSON lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "rltest.h"

/* Checks the log of slot: it holds serving, nothing from libmicrohttpd
 * (a message prefixed mhd_prefix) and only JSON lines. */
static void
check_log(struct e2e *t, int slot, const char *who, const char *serving,
          const char *mhd_prefix)
{
    char *log = ops_slurp(ops_log_path(t, slot));
    char from_mhd[64];
    int lines = 0;

    RL_REQUIRE(log);
    snprintf(from_mhd, sizeof(from_mhd), "\"msg\":\"%s", mhd_prefix);
    RL_CHECK(strstr(log, serving) != NULL);
    RL_CHECK(strstr(log, "MHD_OPTION_EXTERNAL_LOGGER") == NULL);
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
        size_t len = strlen(line);

        lines++;
        if (len < 2 || line[0] != '{' || line[len - 1] != '}') {
            fprintf(stderr, "%s logged a line that is not JSON: %s\n", who,
                    line);
            RL_CHECK(0);
        }
        if (strstr(line, from_mhd)) {
            fprintf(stderr, "%s logged libmicrohttpd's %s\n", who, line);
            RL_CHECK(0);
        }
    }
    fprintf(stderr, "%s: %d log lines\n", who, lines);
    free(log);
}

int
main(void)
{
    struct e2e t;
    char port_env[64], listen[64];
    const char *consume_args[] = {"consume", NULL};
    const char *console_args[] = {"console", "--listen", listen, NULL};
    int port = ops_free_port(), console_port = ops_free_port();
    int consumer, console;

    e2e_setup(&t, "opsnowarn", 1);
    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", console_port);
    {
        const char *env[] = {port_env, "RUNLEDGER_HTTP_ADDRESS=127.0.0.1",
                             NULL};

        consumer = ops_spawn(&t, consume_args, env);
        console = ops_spawn(&t, console_args, env);
    }
    RL_REQUIRE(ops_wait_http(port, "/readyz", 200, 60000));
    RL_REQUIRE(ops_wait_http(console_port, "/healthz", 200, 30000));
    /* Stopped first, so no line is read half written. */
    RL_CHECK(e2e_stop(&t, consumer, 30000));
    RL_CHECK(e2e_stop(&t, console, 30000));
    check_log(&t, consumer, "consume", "serving /healthz", "http: ");
    check_log(&t, console, "console", "console: serving on", "console http: ");
    e2e_teardown(&t);
    RL_TEST_END();
}
