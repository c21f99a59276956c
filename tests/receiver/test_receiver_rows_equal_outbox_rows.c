/* Invariant downstream: the reference receiver applies each notification
 * exactly once. After 20 runs (40 notifications), a receiver killed
 * (SIGKILL) and restarted mid-stream, 5 notifications delivered again and
 * one re-sent under a known key with another payload, the receiver table
 * holds exactly the delivered outbox rows (same keys, same payloads),
 * every redelivery is counted as a duplicate, and the changed payload is
 * refused into receiver_conflicts, never applied. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "faults.h"
#include "rltest.h"

enum { RUNS = 20 };

/* Produces value under idempotency key to the notification topic. */
static void
notify(struct e2e *t, const char *key, const char *value)
{
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(1);

    rd_kafka_header_add(hdrs, "idempotency-key", -1, key, -1);
    RL_REQUIRE(rd_kafka_producev(t->producer, RD_KAFKA_V_TOPIC(t->notify),
                                 RD_KAFKA_V_VALUE((void *)value, strlen(value)),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_HEADERS(hdrs),
                                 RD_KAFKA_V_END) == 0);
}

int
main(void)
{
    struct e2e t;
    char job[160], group[200], key[256], payload[8192];
    int receiver;

    e2e_setup(&t, "recv", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(group, sizeof(group), "RUNLEDGER_RECEIVER_GROUP_ID=%s-recv",
             t.name);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-r", i, NULL, NULL);
    e2e_flush(&t);
    fx_spawn(&t, "consume", NULL);
    receiver = fx_spawn(&t, "receive", group, NULL);

    /* Kill the receiver once it applied some rows: whatever it applied
     * without committing the offset comes again after the restart. */
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT (count(*) >= 5)::int FROM "
                             "received_notifications") == 1);
    e2e_signal(&t, receiver, SIGKILL, 1);
    receiver = fx_spawn(&t, "receive", group, NULL);
    RL_REQUIRE(fx_settled(&t, 60000));
    RL_REQUIRE(e2e_wait_intf(&t, 2 * RUNS, 60000,
                             "SELECT count(*) FROM received_notifications") ==
               1);

    /* Redeliveries, as a relay that lost its acknowledgements would
     * send them, and one changed payload under a known key. */
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "%s",
                 e2e_textf(&t,
                           "SELECT run_id || ':' || channel FROM "
                           "outbox_delivered ORDER BY run_id, channel "
                           "OFFSET %d LIMIT 1",
                           i));
        snprintf(payload, sizeof(payload), "%s",
                 e2e_textf(&t,
                           "SELECT rl_payload_as_sent(run_id, channel, "
                           "explicit_payload)::text FROM outbox_delivered "
                           "WHERE run_id || ':' || channel = '%s'",
                           key));
        notify(&t, key, payload);
    }
    notify(&t, key, "{\"output\":\"not what was approved\"}");
    e2e_flush(&t);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT count(*) FROM receiver_conflicts") == 1);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT (sum(duplicates) >= 5)::int FROM "
                             "received_notifications") == 1);

    /* Receiver rows = outbox rows: same keys, same payloads. */
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM received_notifications"),
                   2 * RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   2 * RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered d "
                               "JOIN received_notifications n ON "
                               "n.idempotency_key = d.run_id || ':' || "
                               "d.channel AND n.payload = "
                               "rl_payload_as_sent(d.run_id, d.channel, "
                               "d.explicit_payload)"),
                   2 * RUNS);
    RL_CHECK_INTEQ(e2e_textf(&t,
                             "SELECT count(*) FROM received_notifications "
                             "WHERE idempotency_key = '%s' AND payload::text "
                             "LIKE '%%not what was approved%%'",
                             key)[0],
                   '0');
    fprintf(
        stderr,
        "receiver: %lld rows for %lld delivered outbox rows, %lld "
        "duplicates ignored, %lld conflict refused\n",
        (long long)e2e_int(&t, "SELECT count(*) FROM received_notifications"),
        (long long)e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
        (long long)e2e_int(&t, "SELECT sum(duplicates) FROM "
                               "received_notifications"),
        (long long)e2e_int(&t, "SELECT count(*) FROM receiver_conflicts"));
    e2e_signal(&t, receiver, SIGTERM, 1);
    e2e_teardown(&t);
    RL_TEST_END();
}
