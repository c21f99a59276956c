/* rl_topics: creates Kafka topics for the test harness and waits until every
 * partition of each has a leader, so a test that starts right after it never
 * sees UNKNOWN_TOPIC_OR_PART.
 *
 *   rl_topics [--cluster-id=ID] BOOTSTRAP TIMEOUT_MS NAME:PARTITIONS ...
 *
 * A topic that already exists counts as created (a restarted broker keeps
 * its topics). Replication factor 1: the harness runs one broker.
 *
 * --cluster-id first checks that the broker answering on BOOTSTRAP is the
 * one kafka.sh formatted: when two harnesses race for a port, the loser's
 * JVM dies on bind while the winner answers, and topics must not land on a
 * stranger's broker.
 *
 * Exits 0 when all topics are ready, 1 on failure, 2 on bad usage, 3 when
 * the broker belongs to another cluster.
 *
 * kafka.sh compiles this file on demand (cc + pkg-config rdkafka), so the
 * service harness does not depend on a CMake build of the project. */
#define _POSIX_C_SOURCE 200809L

#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOPICS_MAX 32

struct topic_spec {
    char name[250];
    int partitions;
};

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
remaining_ms(int64_t deadline)
{
    int64_t left = deadline - now_ms();

    return left > 0 ? (int)left : 0;
}

static int
parse_spec(const char *arg, struct topic_spec *spec)
{
    const char *colon = strrchr(arg, ':');
    char *end = NULL;
    long partitions;
    size_t len;

    if (!colon || colon == arg)
        return -1;
    len = (size_t)(colon - arg);
    if (len >= sizeof(spec->name))
        return -1;
    partitions = strtol(colon + 1, &end, 10);
    if (*end != '\0' || partitions < 1 || partitions > 10000)
        return -1;
    memcpy(spec->name, arg, len);
    spec->name[len] = '\0';
    spec->partitions = (int)partitions;
    return 0;
}

/* Sends one CreateTopics request for all specs and checks each topic's
 * result. Returns 0 when every topic exists afterwards. */
static int
create_topics(rd_kafka_t *rk, const struct topic_spec *specs, int count,
              int64_t deadline)
{
    rd_kafka_NewTopic_t *new_topics[TOPICS_MAX] = {0};
    rd_kafka_AdminOptions_t *options = NULL;
    rd_kafka_queue_t *queue = NULL;
    rd_kafka_event_t *rkev = NULL;
    const rd_kafka_CreateTopics_result_t *result;
    const rd_kafka_topic_result_t **results;
    char errstr[512];
    size_t result_count = 0;
    int ret = -1;

    for (int i = 0; i < count; i++) {
        new_topics[i] = rd_kafka_NewTopic_new(
            specs[i].name, specs[i].partitions, 1, errstr, sizeof(errstr));
        if (!new_topics[i]) {
            fprintf(stderr, "rl_topics: invalid topic %s: %s\n", specs[i].name,
                    errstr);
            goto done;
        }
    }

    options = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    if (rd_kafka_AdminOptions_set_operation_timeout(
            options, remaining_ms(deadline), errstr, sizeof(errstr)) ||
        rd_kafka_AdminOptions_set_request_timeout(
            options, remaining_ms(deadline), errstr, sizeof(errstr))) {
        fprintf(stderr, "rl_topics: could not set admin timeouts: %s\n",
                errstr);
        goto done;
    }

    queue = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, new_topics, (size_t)count, options, queue);
    rkev = rd_kafka_queue_poll(queue, remaining_ms(deadline) + 1000);
    if (!rkev) {
        fprintf(stderr, "rl_topics: no answer to CreateTopics in time\n");
        goto done;
    }
    if (rd_kafka_event_error(rkev)) {
        fprintf(stderr, "rl_topics: could not create topics: %s\n",
                rd_kafka_event_error_string(rkev));
        goto done;
    }

    result = rd_kafka_event_CreateTopics_result(rkev);
    results = rd_kafka_CreateTopics_result_topics(result, &result_count);
    ret = 0;
    for (size_t i = 0; i < result_count; i++) {
        rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);

        if (err == RD_KAFKA_RESP_ERR_NO_ERROR ||
            err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
            continue;
        fprintf(stderr, "rl_topics: could not create topic %s: %s\n",
                rd_kafka_topic_result_name(results[i]),
                rd_kafka_topic_result_error_string(results[i]));
        ret = -1;
    }

done:
    if (rkev)
        rd_kafka_event_destroy(rkev);
    if (queue)
        rd_kafka_queue_destroy(queue);
    if (options)
        rd_kafka_AdminOptions_destroy(options);
    for (int i = 0; i < count; i++) {
        if (new_topics[i])
            rd_kafka_NewTopic_destroy(new_topics[i]);
    }
    return ret;
}

/* Returns 1 when the metadata shows spec with all partitions led, else 0. */
static int
topic_ready(const rd_kafka_metadata_t *md, const struct topic_spec *spec)
{
    for (int i = 0; i < md->topic_cnt; i++) {
        const rd_kafka_metadata_topic_t *t = &md->topics[i];

        if (strcmp(t->topic, spec->name) != 0)
            continue;
        if (t->err || t->partition_cnt < spec->partitions)
            return 0;
        for (int p = 0; p < t->partition_cnt; p++) {
            if (t->partitions[p].err || t->partitions[p].leader < 0)
                return 0;
        }
        return 1;
    }
    return 0;
}

static int
wait_topics_ready(rd_kafka_t *rk, const struct topic_spec *specs, int count,
                  int64_t deadline)
{
    const char *pending = specs[0].name;

    do {
        const struct rd_kafka_metadata *md = NULL;
        int ready = 0;

        if (rd_kafka_metadata(rk, 1, NULL, &md, 2000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR) {
            for (int i = 0; i < count; i++) {
                if (topic_ready(md, &specs[i]))
                    ready++;
                else
                    pending = specs[i].name;
            }
            rd_kafka_metadata_destroy(md);
            if (ready == count)
                return 0;
        }
        /* Bounded back-off between metadata requests; the deadline is the
         * real bound. */
        rd_kafka_poll(rk, 100);
    } while (remaining_ms(deadline) > 0);

    fprintf(stderr, "rl_topics: topic %s has no leader for every partition\n",
            pending);
    return -1;
}

/* Returns 0 when the broker's cluster id is want, 3 when it is another,
 * 1 when it could not be read. */
static int
check_cluster_id(rd_kafka_t *rk, const char *want, int64_t deadline)
{
    char *id = rd_kafka_clusterid(rk, remaining_ms(deadline));
    int ret;

    if (!id) {
        fprintf(stderr, "rl_topics: could not read the cluster id\n");
        return 1;
    }
    ret = strcmp(id, want) == 0 ? 0 : 3;
    if (ret)
        fprintf(stderr,
                "rl_topics: the broker belongs to cluster %s, not %s: "
                "another broker holds the port\n",
                id, want);
    rd_kafka_mem_free(rk, id);
    return ret;
}

int
main(int argc, char **argv)
{
    struct topic_spec specs[TOPICS_MAX];
    rd_kafka_conf_t *conf = NULL;
    rd_kafka_t *rk = NULL;
    const char *cluster_id = NULL;
    char errstr[512];
    char *end = NULL;
    long timeout_ms;
    int64_t deadline;
    int count;
    int ret = 1;

    if (argc > 1 && strncmp(argv[1], "--cluster-id=", 13) == 0) {
        cluster_id = argv[1] + 13;
        argc--;
        argv++;
    }
    count = argc - 3;
    if (argc < 4 || count > TOPICS_MAX) {
        fprintf(stderr, "usage: rl_topics [--cluster-id=ID] BOOTSTRAP "
                        "TIMEOUT_MS NAME:PARTITIONS [NAME:PARTITIONS ...]\n");
        return 2;
    }
    timeout_ms = strtol(argv[2], &end, 10);
    if (*end != '\0' || timeout_ms < 1000) {
        fprintf(stderr, "rl_topics: invalid timeout \"%s\"\n", argv[2]);
        return 2;
    }
    for (int i = 0; i < count; i++) {
        if (parse_spec(argv[3 + i], &specs[i]) != 0) {
            fprintf(stderr, "rl_topics: invalid topic spec \"%s\"\n",
                    argv[3 + i]);
            return 2;
        }
    }
    deadline = now_ms() + timeout_ms;

    conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "client.id", "rl_topics", errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "rl_topics: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
        return 1;
    }
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rl_topics: could not create client: %s\n", errstr);
        rd_kafka_conf_destroy(conf);
        return 1;
    }
    conf = NULL; /* owned by rk now */

    if (cluster_id)
        ret = check_cluster_id(rk, cluster_id, deadline);
    else
        ret = 0;
    if (ret == 0 && (create_topics(rk, specs, count, deadline) != 0 ||
                     wait_topics_ready(rk, specs, count, deadline) != 0))
        ret = 1;

    rd_kafka_destroy(rk);
    return ret;
}
