/* Secrets never appear: a consumer whose model endpoint requires the key
 * (so the key is really used) and whose Kafka configuration carries a SASL
 * password, with debug logs and librdkafka's configuration dump on, writes
 * neither canary to stderr, /metrics, /readyz or `runledger config
 * --effective`; a database URL with a password that fails to connect does
 * not leak it either. Also: every stderr line is one JSON object, and
 * lines about a run carry its run_id and partition. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "ops.h"
#include "rltest.h"

#define KEY "canary-model-key-5d1f0c"
#define SASL "canary2-sasl-pass-93be"
#define DBPASS "canary3-db-pass-71aa"

static char buf[1 << 20], err[1 << 16];

static int
no_canary(const char *where, const char *text)
{
    if (strstr(text, "canary")) {
        fprintf(stderr, "canary found in %s\n", where);
        return 0;
    }
    return 1;
}

/* Every line a JSON object with time, level, msg; counts lines that carry
 * run_id and partition. Returns -1 on a bad line. */
static long
check_lines(const char *text, long *with_run)
{
    long n = 0;
    const char *line = text;

    *with_run = 0;
    while (*line) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        cJSON *obj = cJSON_ParseWithLength(line, len);

        if (!cJSON_IsObject(obj) || !cJSON_GetObjectItem(obj, "time") ||
            !cJSON_GetObjectItem(obj, "level") ||
            !cJSON_GetObjectItem(obj, "msg")) {
            fprintf(stderr, "not a JSON log line: %.*s\n", (int)len, line);
            cJSON_Delete(obj);
            return -1;
        }
        if (cJSON_GetObjectItem(obj, "run_id") &&
            cJSON_GetObjectItem(obj, "partition"))
            (*with_run)++;
        cJSON_Delete(obj);
        n++;
        line = eol ? eol + 1 : line + len;
    }
    return n;
}

int
main(void)
{
    struct e2e t;
    char port_env[64], db_env[256];
    int port = ops_free_port();
    int slot, status;
    long lines, with_run;
    char *log;
    const char *stub_env[] = {"STUB_API_KEY=" KEY, NULL};
    const char *consume_args[] = {"consume", NULL};

    e2e_setup(&t, "opssecret", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    {
        const char *env[] = {port_env,
                             "MODEL_API_KEY=" KEY,
                             "RUNLEDGER_KAFKA_SASL_PASSWORD=" SASL,
                             "RUNLEDGER_KAFKA_SASL_USERNAME=runledger",
                             "RUNLEDGER_KAFKA_DEBUG=conf,security,generic",
                             "RUNLEDGER_LOG_LEVEL=debug",
                             NULL};

        slot = ops_spawn(&t, consume_args, env);
        RL_CHECK(ops_wait_http(port, "/readyz", 200, 60000));
        for (int i = 0; i < 3; i++)
            e2e_produce_event(&t, "ops-secret", "tenant-s", i, NULL, NULL);
        e2e_flush(&t);
        /* Completed runs prove the key reached the stub, which refuses
         * requests without it. */
        RL_CHECK(e2e_wait_intf(&t, 3, 60000,
                               "SELECT count(*) FROM runs WHERE status = "
                               "'completed'"));
        RL_CHECK(ops_http_get(port, "/metrics", buf, sizeof(buf)) == 200);
        RL_CHECK(no_canary("/metrics", buf));
        RL_CHECK(ops_http_get(port, "/readyz", buf, sizeof(buf)) == 200);
        RL_CHECK(no_canary("/readyz", buf));
        {
            const char *args[] = {"config", "--effective", NULL};

            RL_CHECK(ops_run(&t, args, env, NULL, buf, sizeof(buf), err,
                             sizeof(err)) == 0);
            RL_CHECK(strstr(buf, "MODEL_API_KEY") != NULL);
            RL_CHECK(no_canary("config --effective", buf));
            RL_CHECK(no_canary("config --effective stderr", err));
        }
    }
    status = e2e_signal(&t, slot, SIGTERM, 1);
    RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    log = ops_slurp(ops_log_path(&t, slot));
    RL_REQUIRE(log);
    RL_CHECK(no_canary("consumer stderr", log));
    lines = check_lines(log, &with_run);
    RL_CHECK(lines > 20);
    RL_CHECK(with_run >= 3); /* debug "dispatched" lines name the run */
    /* The debug dump really ran (else this test proves little). */
    RL_CHECK(strstr(log, "sasl.username") != NULL ||
             strstr(log, "Client configuration") != NULL);
    free(log);

    /* A database URL with a password that cannot connect. */
    snprintf(db_env, sizeof(db_env),
             "DATABASE_URL=postgresql://runledger:" DBPASS
             "@127.0.0.1:1/ledger?connect_timeout=2");
    {
        const char *env[] = {db_env, port_env,
                             "RUNLEDGER_HEALTH_INTERVAL_SECONDS=1", NULL};
        const char *list[] = {"runs", "list", NULL};
        const char *migrate[] = {"migrate", NULL};

        RL_CHECK(ops_run(&t, list, env, NULL, buf, sizeof(buf), err,
                         sizeof(err)) == 1);
        RL_CHECK(strstr(err, "could not connect") != NULL);
        RL_CHECK(no_canary("runs list", err));
        RL_CHECK(ops_run(&t, migrate, env, NULL, buf, sizeof(buf), err,
                         sizeof(err)) != 0);
        RL_CHECK(no_canary("migrate", err));
        RL_CHECK(no_canary("migrate stdout", buf));

        slot = ops_spawn(&t, consume_args, env);
        RL_CHECK(ops_wait_http(port, "/readyz", 503, 20000));
        {
            struct timespec ts = {2, 0};

            nanosleep(&ts, NULL);
        }
        RL_CHECK(ops_http_get(port, "/readyz", buf, sizeof(buf)) == 503);
        RL_CHECK(strstr(buf, "could not connect") != NULL);
        RL_CHECK(no_canary("/readyz", buf));
        RL_CHECK(ops_http_get(port, "/metrics", buf, sizeof(buf)) == 200);
        RL_CHECK(no_canary("/metrics", buf));
        e2e_signal(&t, slot, SIGTERM, 1);
        log = ops_slurp(ops_log_path(&t, slot));
        RL_REQUIRE(log);
        RL_CHECK(strstr(log, "could not connect") != NULL);
        RL_CHECK(no_canary("consumer stderr (bad database)", log));
        RL_CHECK(check_lines(log, &with_run) > 0);
        free(log);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
