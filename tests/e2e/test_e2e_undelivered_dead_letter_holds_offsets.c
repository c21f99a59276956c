/* A dead letter the broker does not take is retried, made loud, and never
 * passed by the committed offset.
 *
 * The dead-letter topic the consumer is given does not exist (and the
 * broker creates no topic on demand), and its producer gives a message up
 * after 2 s. One invalid event sits between 3 good ones and 3 more on one
 * partition. Asserts: the 6 good runs complete; /readyz answers 503 naming
 * the undelivered dead letters and runledger_dead_letters_undelivered is
 * 1; the committed offset stays at the invalid event (3) while later
 * events are done. Then the topic is created: the dead letter is
 * delivered on a later try, /readyz answers 200 again, the gauge is 0 and
 * every offset is committed. Fails on a consumer that drops a dead letter
 * whose delivery failed (silent: ready, no retry, offsets stuck until a
 * restart). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "e2e.h"
#include "ops.h"
#include "rl/kafka.h"
#include "rl/testing.h"
#include "rltest.h"

static char metrics[1 << 20];

static void
nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static int
readyz_is(int port, long want, char *body, size_t size)
{
    return ops_http_get(port, "/readyz", body, size) == want;
}

int
main(void)
{
    struct e2e t;
    char job[160], port_env[64], dlq_env[300], missing[200], body[1024];
    char errstr[512];
    int port = ops_free_port();
    int slot, seen = 0;
    const char *env[] = {port_env,
                         dlq_env,
                         "RUNLEDGER_KAFKA_MESSAGE_TIMEOUT_MS=2000",
                         "RUNLEDGER_HEALTH_INTERVAL_SECONDS=1",
                         "RUNLEDGER_RELAY_INTERVAL_MS=50",
                         NULL};

    e2e_setup(&t, "e2e_dlqstuck", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    snprintf(missing, sizeof(missing), "%s.missing-dlq", t.name);
    snprintf(dlq_env, sizeof(dlq_env), "RUNLEDGER_DLQ_TOPIC=%s", missing);

    for (int i = 0; i < 3; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
    e2e_produce(&t, "tenant-a", "{not json");
    for (int i = 3; i < 6; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
    e2e_flush(&t);
    slot = e2e_spawn(&t, "consume", env);

    RL_CHECK(e2e_wait_intf(&t, 6, 60000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));
    for (int i = 0; i < 200 && !seen; i++) {
        seen = readyz_is(port, 503, body, sizeof(body)) &&
               strstr(body, "dead letters undelivered") != NULL;
        if (!seen)
            nap_ms(100);
    }
    RL_CHECK(seen);
    printf("# /readyz while stuck: %s\n", body);
    RL_CHECK(ops_http_get(port, "/metrics", metrics, sizeof(metrics)) == 200);
    RL_CHECK(ops_metric(metrics, "runledger_dead_letters_undelivered") == 1);
    RL_CHECK(ops_metric(metrics, "runledger_ready") == 0);
    /* an auto commit (every 5 s) has passed: the offset waits at 3 */
    nap_ms(6000);
    RL_CHECK(ops_committed(&t, 0) <= 3);
    RL_CHECK(e2e_group_lag(&t) >= 4);

    RL_REQUIRE(rl_kafka_topic_ensure(t.producer, missing, 1, 30000, errstr,
                                     sizeof(errstr)) == 0);
    RL_CHECK(ops_wait_http(port, "/readyz", 200, 90000));
    RL_CHECK(ops_http_get(port, "/metrics", metrics, sizeof(metrics)) == 200);
    RL_CHECK(ops_metric(metrics, "runledger_dead_letters_undelivered") == 0);
    RL_CHECK(ops_metric(
                 metrics,
                 "runledger_dead_letters_total{reason=\"invalid_json\"}") == 1);
    RL_CHECK_INTEQ(e2e_count_with_header(&t, missing, "reason", "invalid_json"),
                   1);

    RL_CHECK(e2e_stop(&t, slot, 30000));
    RL_CHECK(e2e_group_lag(&t) == 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
