/* One notification the broker or the producer refuses for good does not
 * hold up the others: it is dead-lettered with its reason (headers only)
 * and set aside in outbox_dead, and every other notification is
 * delivered.
 *
 * The notification topic accepts messages of at most 100 kB
 * (max.message.bytes, set on the topic), the producer of at most 1 MB
 * (its default message.max.bytes). One run's answer is 300 kB (the broker
 * refuses it), another's 1.5 MB (the producer refuses it), and 100
 * ordinary runs follow, all on one partition and in one relay batch.
 * Asserts: all 200 ordinary notifications are in outbox_delivered, the 4
 * oversized ones are in outbox_dead with reason MSG_SIZE_TOO_LARGE, the
 * outbox is empty, the dead-letter topic holds 4 letters from the outbox
 * naming their size, and runledger_outbox_dead_lettered_total counts 4.
 * Fails on a relay that records its batch as a whole: it retries the
 * oldest rows for ever and delivers almost nothing behind them. */
#include <stdio.h>
#include <string.h>

#include "e2e.h"
#include "ops.h"
#include "rl/db_conn.h"
#include "rl/runid.h"
#include "rltest.h"

#define ORDINARY 100

static char metrics[1 << 20];

/* Sets the topic's max.message.bytes (AlterConfigs; the other settings of
 * a test topic are defaults). */
static void
limit_topic(struct e2e *t, const char *topic, const char *bytes)
{
    rd_kafka_ConfigResource_t *res =
        rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_queue_t *q = rd_kafka_queue_new(t->producer);
    rd_kafka_event_t *ev;
    const rd_kafka_AlterConfigs_result_t *result;
    const rd_kafka_ConfigResource_t **resources;
    size_t n = 0;

    RL_REQUIRE(rd_kafka_ConfigResource_set_config(res, "max.message.bytes",
                                                  bytes) == 0);
    rd_kafka_AlterConfigs(t->producer, &res, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, 30000);
    RL_REQUIRE(ev != NULL);
    RL_REQUIRE(rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR_NO_ERROR);
    result = rd_kafka_event_AlterConfigs_result(ev);
    RL_REQUIRE(result != NULL);
    resources = rd_kafka_AlterConfigs_result_resources(result, &n);
    RL_REQUIRE(n == 1 && rd_kafka_ConfigResource_error(resources[0]) == 0);
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_ConfigResource_destroy(res);
}

int
main(void)
{
    struct e2e t;
    char job[160], port_env[64], big1[RL_HEX_SIZE], big2[RL_HEX_SIZE];
    int port = ops_free_port();
    int slot;
    const char *env[] = {port_env, "RUNLEDGER_RELAY_INTERVAL_MS=50",
                         "RUNLEDGER_RELAY_BATCH=1000", NULL};

    e2e_setup(&t, "e2e_oversize", 1);
    limit_topic(&t, t.notify, "100000");
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);

    e2e_produce_event(&t, job, "tenant-a", 0, "[[fault:oversize bytes=300000]]",
                      big1);
    e2e_produce_event(&t, job, "tenant-a", 1,
                      "[[fault:oversize bytes=1500000]]", big2);
    for (int i = 0; i < ORDINARY; i++)
        e2e_produce_event(&t, job, "tenant-a", 2 + i, NULL, NULL);
    e2e_flush(&t);
    slot = e2e_spawn(&t, "consume", env);

    RL_CHECK(e2e_wait_intf(&t, ORDINARY + 2, 90000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));
    RL_CHECK(e2e_wait_intf(&t, 4, 60000, "SELECT count(*) FROM outbox_dead"));
    RL_CHECK(e2e_wait_intf(&t, 2 * ORDINARY, 60000,
                           "SELECT count(*) FROM outbox_delivered"));
    printf("# ordinary notifications delivered: %lld of %d\n",
           (long long)e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
           2 * ORDINARY);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox"), 0);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM outbox_dead"
                            " WHERE run_id IN ('%s', '%s')"
                            "   AND reason LIKE 'MSG_SIZE_TOO_LARGE:%%'"
                            "   AND payload_bytes > 100000",
                            big1, big2),
                   4);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM outbox_dead"
                            " WHERE run_id = '%s' AND reason LIKE"
                            " '%%refused by the producer%%'",
                            big2),
                   2);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM outbox_delivered"
                            " WHERE run_id IN ('%s', '%s')",
                            big1, big2),
                   0);
    RL_CHECK_INTEQ(e2e_count_with_header(&t, t.dlq, "source", "outbox"), 4);
    RL_CHECK_INTEQ(e2e_count_with_header(&t, t.dlq, "run_id", big1), 2);
    RL_CHECK(ops_http_get(port, "/metrics", metrics, sizeof(metrics)) == 200);
    RL_CHECK(ops_metric(metrics, "runledger_outbox_dead_lettered_total"
                                 "{reason=\"MSG_SIZE_TOO_LARGE\"}") == 4);

    RL_CHECK(e2e_stop(&t, slot, 30000));
    e2e_teardown(&t);
    RL_TEST_END();
}
