/* /healthz, /readyz and /metrics of a real consumer: ready once it is in
 * the group and PostgreSQL answers; /metrics parses as text format 0.0.4
 * and its values move as runs complete (runs, claims, duplicates,
 * dispatches, generations, tokens, latency histogram, dead letters by
 * reason, relayed outbox rows, consumer lag per partition, rebalances).
 * A relay whose database is unreachable is alive but not ready, and says
 * why. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "ops.h"
#include "rltest.h"

#define RUNS 5

static char metrics[1 << 20];

static double
scrape(int port, const char *series)
{
    if (ops_http_get(port, "/metrics", metrics, sizeof(metrics)) != 200)
        return -2;
    return ops_metric(metrics, series);
}

/* Polls series until it is at least want (at_most 0) or at most want
 * (at_most 1). */
static int
wait_metric_cmp(int port, const char *series, double want, int at_most,
                long timeout_ms)
{
    int64_t deadline = rltest_now_ms() + timeout_ms;
    double v = -1;

    while (rltest_now_ms() < deadline) {
        struct timespec ts = {0, 200000000L};

        v = scrape(port, series);
        if (at_most ? (v >= 0 && v <= want) : v >= want)
            return 1;
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "%s = %g, wanted %s %g\n", series, v,
            at_most ? "<=" : ">=", want);
    return 0;
}

static int
wait_metric(int port, const char *series, double want, long timeout_ms)
{
    return wait_metric_cmp(port, series, want, 0, timeout_ms);
}

int
main(void)
{
    struct e2e t;
    char port_env[64], port2_env[64], series[256], body[2048];
    char run_ids[RUNS][RL_HEX_SIZE];
    int port = ops_free_port();
    int port2;
    int consumer, relay, status;
    const char *consume_args[] = {"consume", NULL};
    const char *relay_args[] = {"relay", NULL};

    e2e_setup(&t, "opsmet", 2);
    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    {
        const char *env[] = {port_env, "RUNLEDGER_HEALTH_INTERVAL_SECONDS=1",
                             NULL};

        consumer = ops_spawn(&t, consume_args, env);
    }

    RL_CHECK(ops_wait_http(port, "/healthz", 200, 20000));
    RL_CHECK(ops_wait_http(port, "/readyz", 200, 60000));
    RL_CHECK(ops_http_get(port, "/readyz", body, sizeof(body)) == 200);
    RL_CHECK(strstr(body, "ready") != NULL);
    RL_CHECK(ops_http_get(port, "/nope", NULL, 0) == 404);

    RL_CHECK(ops_http_get(port, "/metrics", metrics, sizeof(metrics)) == 200);
    RL_CHECK(ops_metrics_check(metrics) > 20);
    RL_CHECK(ops_metric(metrics,
                        "runledger_runs_total{outcome=\"completed\"}") == 0);
    RL_CHECK(ops_metric(metrics, "runledger_ready") == 1);
    RL_CHECK(ops_metric(metrics, "runledger_kafka_group_joined") == 1);
    RL_CHECK(ops_metric(metrics,
                        "runledger_rebalances_total{type=\"assign\"}") >= 1);
    RL_CHECK(ops_metric(metrics, "runledger_assigned_partitions") == 2);

    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, "opsmet-job", "tenant-a", i, NULL, run_ids[i]);
    e2e_produce_event(&t, "opsmet-job", "tenant-a", 0, NULL, NULL); /* dup */
    e2e_produce(&t, "tenant-a", "{not json");
    e2e_flush(&t);

    RL_CHECK(e2e_wait_intf(&t, RUNS, 60000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));
    RL_CHECK(wait_metric(port, "runledger_runs_total{outcome=\"completed\"}",
                         RUNS, 20000));
    RL_CHECK(wait_metric(port, "runledger_events_total", RUNS + 2, 20000));
    RL_CHECK(wait_metric(
        port, "runledger_dead_letters_total{reason=\"invalid_json\"}", 1,
        20000));
    RL_CHECK(wait_metric(port, "runledger_duplicates_total", 1, 20000));
    RL_CHECK(
        wait_metric(port, "runledger_outbox_relayed_total", 2 * RUNS, 30000));
    RL_CHECK(ops_metrics_check(metrics) > 20);
    RL_CHECK(ops_metric(metrics, "runledger_events_invalid_total") == 1);
    RL_CHECK(ops_metric(metrics, "runledger_claims_total{result=\"won\"}") ==
             RUNS);
    RL_CHECK(ops_metric(metrics, "runledger_dispatches_total") == RUNS);
    RL_CHECK(ops_metric(metrics, "runledger_generations_total") == RUNS);
    RL_CHECK(ops_metric(metrics, "runledger_attempts_total{outcome=\"ok\"}") ==
             RUNS);
    RL_CHECK(ops_metric(metrics, "runledger_ambiguous_attempts_total") == 0);
    RL_CHECK(ops_metric(metrics, "runledger_tokens_total{kind=\"prompt\"}") >
             0);
    RL_CHECK(
        ops_metric(metrics, "runledger_tokens_total{kind=\"completion\"}") > 0);
    RL_CHECK(ops_metric(metrics, "runledger_attempt_latency_seconds_count") ==
             RUNS);
    RL_CHECK(
        ops_metric(metrics,
                   "runledger_attempt_latency_seconds_bucket{le=\"+Inf\"}") ==
        RUNS);
    /* Every run leaves the process once its offset is done, which can be
     * a moment after its notifications were relayed. */
    RL_CHECK(wait_metric_cmp(port, "runledger_runs_in_flight", 0, 1, 20000));
    /* The ledger-wide gauges come from the health thread (every second
     * here); the relay drains the outbox. */
    RL_CHECK(wait_metric(port, "runledger_outbox_backlog", 0, 20000));
    RL_CHECK(e2e_wait_intf(&t, 0, 30000, "SELECT count(*) FROM outbox"));
    RL_CHECK(ops_metric(metrics, "runledger_unknown_runs") == 0);
    /* librdkafka statistics every 5 s: lag of each assigned partition. */
    for (int p = 0; p < 2; p++) {
        snprintf(series, sizeof(series),
                 "runledger_consumer_lag{topic=\"%s\",partition=\"%d\"}",
                 t.topic, p);
        RL_CHECK(wait_metric(port, series, 0, 30000));
    }

    /* A relay process that cannot reach PostgreSQL: alive, not ready. */
    port2 = ops_free_port();
    snprintf(port2_env, sizeof(port2_env), "RUNLEDGER_HTTP_PORT=%d", port2);
    {
        const char *env[] = {port2_env,
                             "DATABASE_URL=postgresql://rl@127.0.0.1:1/none",
                             "RUNLEDGER_HEALTH_INTERVAL_SECONDS=1", NULL};

        relay = ops_spawn(&t, relay_args, env);
    }
    RL_CHECK(ops_wait_http(port2, "/healthz", 200, 20000));
    RL_CHECK(ops_wait_http(port2, "/readyz", 503, 20000));
    RL_CHECK(ops_http_get(port2, "/readyz", body, sizeof(body)) == 503);
    RL_CHECK(strstr(body, "could not connect") != NULL);
    RL_CHECK(scrape(port2, "runledger_postgres_up") == 0);
    RL_CHECK(strstr(metrics, "role=\"relay\"") != NULL);
    status = e2e_signal(&t, relay, SIGTERM, 1);
    RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* Shutting down: not ready any more, exits 0. */
    status = e2e_signal(&t, consumer, SIGTERM, 1);
    RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
