/* test_kafka_smoke: the harness broker and Debian's librdkafka agree on the
 * parts Runledger relies on. 100 messages from an idempotent producer
 * (acks=all) land in the log exactly once, a consumer group (eager range
 * assignor, manual offset store, no auto commit) receives each exactly once,
 * and a synchronous commit leaves the committed offsets at the log end.
 *
 * Every wait is a poll loop against a deadline; nothing sleeps to
 * synchronise. */
#include <librdkafka/rdkafka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rltest.h"

#define SMOKE_MESSAGES 100
#define SMOKE_PARTITIONS 2
#define SMOKE_DEADLINE_MS 90000

struct delivery {
    int reports;                 /* delivery reports received */
    int failed;                  /* reports carrying an error */
    int per_msg[SMOKE_MESSAGES]; /* reports per message */
    int64_t offset[SMOKE_MESSAGES];
    int32_t partition[SMOKE_MESSAGES];
};

static int64_t deadline;

static int
remaining_ms(void)
{
    int64_t left = deadline - rltest_now_ms();

    return left > 0 ? (int)left : 0;
}

static void
conf_set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char errstr[512];

    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
        fprintf(stderr, "could not set %s: %s\n", name, errstr);
        exit(1);
    }
}

static rd_kafka_t *
client_new(rd_kafka_type_t type, rd_kafka_conf_t *conf, const char *bootstrap)
{
    char errstr[512];
    rd_kafka_t *rk;

    conf_set(conf, "bootstrap.servers", bootstrap);
    conf_set(conf, "log.connection.close", "false");
    rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "could not create kafka client: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
        exit(1);
    }
    return rk;
}

static void
on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *rkm, void *opaque)
{
    struct delivery *dr = opaque;
    intptr_t i = (intptr_t)rkm->_private;

    (void)rk;
    dr->reports++;
    if (i < 0 || i >= SMOKE_MESSAGES) {
        fprintf(stderr, "delivery report for unknown message %ld\n", (long)i);
        dr->failed++;
        return;
    }
    dr->per_msg[i]++;
    if (rkm->err) {
        fprintf(stderr, "message %ld not delivered: %s\n", (long)i,
                rd_kafka_err2str(rkm->err));
        dr->failed++;
        return;
    }
    dr->offset[i] = rkm->offset;
    dr->partition[i] = rkm->partition;
}

/* Waits for one admin result event on queue; returns it or NULL. */
static rd_kafka_event_t *
admin_wait(rd_kafka_queue_t *queue, rd_kafka_event_type_t type)
{
    while (remaining_ms() > 0) {
        rd_kafka_event_t *rkev = rd_kafka_queue_poll(queue, 500);

        if (!rkev)
            continue;
        if (rd_kafka_event_type(rkev) == type)
            return rkev;
        rd_kafka_event_destroy(rkev);
    }
    return NULL;
}

static int
topic_create(rd_kafka_t *rk, const char *topic)
{
    char errstr[512];
    rd_kafka_NewTopic_t *nt;
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    rd_kafka_event_t *rkev;
    const rd_kafka_topic_result_t **res;
    size_t cnt = 0;
    int ret = -1;

    nt = rd_kafka_NewTopic_new(topic, SMOKE_PARTITIONS, 1, errstr,
                               sizeof(errstr));
    RL_REQUIRE(nt != NULL);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, queue);
    rkev = admin_wait(queue, RD_KAFKA_EVENT_CREATETOPICS_RESULT);
    if (!rkev) {
        fprintf(stderr, "could not create topic %s: no answer in time\n",
                topic);
    } else if (rd_kafka_event_error(rkev)) {
        fprintf(stderr, "could not create topic %s: %s\n", topic,
                rd_kafka_event_error_string(rkev));
    } else {
        res = rd_kafka_CreateTopics_result_topics(
            rd_kafka_event_CreateTopics_result(rkev), &cnt);
        if (cnt == 1 && !rd_kafka_topic_result_error(res[0]))
            ret = 0;
        else if (cnt == 1)
            fprintf(stderr, "could not create topic %s: %s\n", topic,
                    rd_kafka_topic_result_error_string(res[0]));
    }
    if (rkev)
        rd_kafka_event_destroy(rkev);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_queue_destroy(queue);
    return ret;
}

static int
topic_delete(rd_kafka_t *rk, const char *topic)
{
    rd_kafka_DeleteTopic_t *dt = rd_kafka_DeleteTopic_new(topic);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    rd_kafka_event_t *rkev;
    const rd_kafka_topic_result_t **res;
    size_t cnt = 0;
    int ret = -1;

    rd_kafka_DeleteTopics(rk, &dt, 1, NULL, queue);
    rkev = admin_wait(queue, RD_KAFKA_EVENT_DELETETOPICS_RESULT);
    if (rkev && !rd_kafka_event_error(rkev)) {
        res = rd_kafka_DeleteTopics_result_topics(
            rd_kafka_event_DeleteTopics_result(rkev), &cnt);
        if (cnt == 1 && !rd_kafka_topic_result_error(res[0]))
            ret = 0;
        else if (cnt == 1)
            fprintf(stderr, "could not delete topic %s: %s\n", topic,
                    rd_kafka_topic_result_error_string(res[0]));
    } else {
        fprintf(stderr, "could not delete topic %s: %s\n", topic,
                rkev ? rd_kafka_event_error_string(rkev) : "no answer");
    }
    if (rkev)
        rd_kafka_event_destroy(rkev);
    rd_kafka_DeleteTopic_destroy(dt);
    rd_kafka_queue_destroy(queue);
    return ret;
}

/* Polls metadata until every partition of topic has a leader: a freshly
 * created topic may not be known to the broker's metadata cache yet. */
static int
topic_wait_ready(rd_kafka_t *rk, const char *topic)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    int ready = 0;

    RL_REQUIRE(rkt != NULL);
    while (!ready && remaining_ms() > 0) {
        const struct rd_kafka_metadata *md = NULL;

        if (rd_kafka_metadata(rk, 0, rkt, &md, 2000) != 0)
            continue;
        if (md->topic_cnt == 1 && !md->topics[0].err &&
            md->topics[0].partition_cnt == SMOKE_PARTITIONS) {
            ready = 1;
            for (int p = 0; p < SMOKE_PARTITIONS; p++) {
                if (md->topics[0].partitions[p].leader < 0)
                    ready = 0;
            }
        }
        rd_kafka_metadata_destroy(md);
        if (!ready)
            rd_kafka_poll(rk, 100); /* bounded pause between requests */
    }
    rd_kafka_topic_destroy(rkt);
    return ready ? 0 : -1;
}

static void
produce_all(rd_kafka_t *rk, const char *topic, struct delivery *dr)
{
    for (intptr_t i = 0; i < SMOKE_MESSAGES; i++) {
        char key[32], value[64];
        rd_kafka_resp_err_t err;

        snprintf(key, sizeof(key), "key-%03ld", (long)i);
        snprintf(value, sizeof(value), "smoke-%03ld", (long)i);
        do {
            err = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(topic),
                RD_KAFKA_V_PARTITION((int32_t)(i % SMOKE_PARTITIONS)),
                RD_KAFKA_V_KEY(key, strlen(key)),
                RD_KAFKA_V_VALUE(value, strlen(value)),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_OPAQUE((void *)i), RD_KAFKA_V_END);
            /* A full local queue drains by serving delivery reports. */
            if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                rd_kafka_poll(rk, 100);
        } while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL && remaining_ms() > 0);
        if (err) {
            fprintf(stderr, "could not produce message %ld: %s\n", (long)i,
                    rd_kafka_err2str(err));
            RL_CHECK(err == RD_KAFKA_RESP_ERR_NO_ERROR);
            return;
        }
    }
    while (dr->reports < SMOKE_MESSAGES && remaining_ms() > 0)
        rd_kafka_poll(rk, 100);
    RL_CHECK(rd_kafka_flush(rk, remaining_ms()) == RD_KAFKA_RESP_ERR_NO_ERROR);
}

/* Consumes until the group's position reaches end[p] on every partition. */
static void
consume_all(rd_kafka_t *rk, const char *topic, const int64_t *end, int *seen)
{
    int64_t next[SMOKE_PARTITIONS] = {0};
    int done = 0;

    while (!done && remaining_ms() > 0) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rk, 500);
        rd_kafka_topic_partition_list_t *store;
        long i = -1;
        int p;

        if (!rkm)
            continue;
        if (rkm->err) {
            /* Transient errors are reported here and retried inside
             * librdkafka; the deadline bounds the test. */
            fprintf(stderr, "consumer: %s\n", rd_kafka_message_errstr(rkm));
            rd_kafka_message_destroy(rkm);
            continue;
        }
        p = rkm->partition;
        RL_CHECK_STREQ(rd_kafka_topic_name(rkm->rkt), topic);
        RL_REQUIRE(p >= 0 && p < SMOKE_PARTITIONS);
        if (rkm->len == 9 && memcmp(rkm->payload, "smoke-", 6) == 0)
            i = strtol((const char *)rkm->payload + 6, NULL, 10);
        RL_CHECK(i >= 0 && i < SMOKE_MESSAGES);
        if (i >= 0 && i < SMOKE_MESSAGES) {
            seen[i]++;
            RL_CHECK_INTEQ(p, i % SMOKE_PARTITIONS);
        }
        /* Offsets arrive in order within a partition. */
        RL_CHECK_INTEQ(rkm->offset, next[p]);
        next[p] = rkm->offset + 1;

        /* The at-least-once pattern: store only after the message is
         * handled; the commit takes stored offsets only. */
        store = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(store, topic, p)->offset =
            rkm->offset + 1;
        RL_CHECK_INTEQ(rd_kafka_offsets_store(rk, store), 0);
        rd_kafka_topic_partition_list_destroy(store);
        rd_kafka_message_destroy(rkm);

        done = 1;
        for (p = 0; p < SMOKE_PARTITIONS; p++) {
            if (next[p] < end[p])
                done = 0;
        }
    }
    RL_CHECK(done);
}

int
main(void)
{
    const char *bootstrap = rltest_service_env("KAFKA_BOOTSTRAP_SERVERS");
    char topic[128], group[128];
    struct delivery *dr = calloc(1, sizeof(*dr));
    int seen[SMOKE_MESSAGES] = {0};
    int64_t end[SMOKE_PARTITIONS] = {0};
    int64_t in_log = 0;
    rd_kafka_conf_t *conf;
    rd_kafka_t *producer, *consumer;
    rd_kafka_topic_partition_list_t *committed;

    RL_REQUIRE(dr != NULL);
    deadline = rltest_now_ms() + SMOKE_DEADLINE_MS;
    snprintf(topic, sizeof(topic), "%s", rltest_unique("rl_smoke"));
    snprintf(group, sizeof(group), "%s", rltest_unique("rl_smoke_group"));

    /* The producer handle also serves the admin requests. */
    conf = rd_kafka_conf_new();
    conf_set(conf, "enable.idempotence", "true");
    conf_set(conf, "acks", "all");
    conf_set(conf, "linger.ms", "5");
    conf_set(conf, "message.timeout.ms", "30000");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_opaque(conf, dr);
    producer = client_new(RD_KAFKA_PRODUCER, conf, bootstrap);

    RL_REQUIRE(topic_create(producer, topic) == 0);
    RL_REQUIRE(topic_wait_ready(producer, topic) == 0);

    produce_all(producer, topic, dr);
    RL_CHECK_INTEQ(dr->reports, SMOKE_MESSAGES);
    RL_CHECK_INTEQ(dr->failed, 0);
    for (int i = 0; i < SMOKE_MESSAGES; i++)
        RL_CHECK_INTEQ(dr->per_msg[i], 1);

    /* Exactly 100 records in the log: no retry wrote a duplicate. */
    for (int p = 0; p < SMOKE_PARTITIONS; p++) {
        int64_t lo = -1, hi = -1;

        RL_CHECK_INTEQ(rd_kafka_query_watermark_offsets(producer, topic, p, &lo,
                                                        &hi, 10000),
                       0);
        RL_CHECK_INTEQ(lo, 0);
        RL_CHECK_INTEQ(hi, SMOKE_MESSAGES / SMOKE_PARTITIONS);
        end[p] = hi;
        in_log += hi - lo;
    }
    RL_CHECK_INTEQ(in_log, SMOKE_MESSAGES);
    for (int i = 0; i < SMOKE_MESSAGES; i++) {
        RL_CHECK_INTEQ(dr->partition[i], i % SMOKE_PARTITIONS);
        RL_CHECK(dr->offset[i] >= 0 &&
                 dr->offset[i] < end[i % SMOKE_PARTITIONS]);
    }

    conf = rd_kafka_conf_new();
    conf_set(conf, "group.id", group);
    conf_set(conf, "partition.assignment.strategy", "range");
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "enable.auto.offset.store", "false");
    conf_set(conf, "auto.offset.reset", "earliest");
    consumer = client_new(RD_KAFKA_CONSUMER, conf, bootstrap);
    rd_kafka_poll_set_consumer(consumer);
    {
        rd_kafka_topic_partition_list_t *sub =
            rd_kafka_topic_partition_list_new(1);

        rd_kafka_topic_partition_list_add(sub, topic, RD_KAFKA_PARTITION_UA);
        RL_REQUIRE(rd_kafka_subscribe(consumer, sub) == 0);
        rd_kafka_topic_partition_list_destroy(sub);
    }

    consume_all(consumer, topic, end, seen);
    for (int i = 0; i < SMOKE_MESSAGES; i++) {
        if (seen[i] != 1)
            fprintf(stderr, "message %d received %d times\n", i, seen[i]);
        RL_CHECK_INTEQ(seen[i], 1);
    }

    /* Synchronous commit of the stored offsets, then read them back from
     * the group coordinator. */
    RL_CHECK_INTEQ(rd_kafka_commit(consumer, NULL, 0), 0);
    committed = rd_kafka_topic_partition_list_new(SMOKE_PARTITIONS);
    for (int p = 0; p < SMOKE_PARTITIONS; p++)
        rd_kafka_topic_partition_list_add(committed, topic, p);
    RL_CHECK_INTEQ(rd_kafka_committed(consumer, committed, 10000), 0);
    for (int p = 0; p < SMOKE_PARTITIONS; p++) {
        RL_CHECK_INTEQ(committed->elems[p].err, 0);
        RL_CHECK_INTEQ(committed->elems[p].offset, end[p]);
    }
    rd_kafka_topic_partition_list_destroy(committed);

    RL_CHECK_INTEQ(rd_kafka_consumer_close(consumer), 0);
    rd_kafka_destroy(consumer);

    RL_CHECK_INTEQ(topic_delete(producer, topic), 0);
    rd_kafka_destroy(producer);
    free(dr);
    /* All librdkafka threads are gone before the leak checker looks. */
    RL_CHECK_INTEQ(rd_kafka_wait_destroyed(10000), 0);
    RL_TEST_END();
}
