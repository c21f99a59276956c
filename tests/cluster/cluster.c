/* The cluster tests' support behind cluster.h: the three-node cluster's
 * life and what the Admin API and metadata say about it. */
#include "cluster.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rltest.h"

static char cluster_dir[512];

static void
nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

int
cluster_node(const char *cmd, int node)
{
    const char *src = getenv("RL_SOURCE_DIR");
    char line[2048];
    int status;

    snprintf(line, sizeof(line),
             "'%s/tests/harness/kafka_cluster.sh' %s '%s' %d >>'%s.log' 2>&1",
             src ? src : ".", cmd, cluster_dir, node, cluster_dir);
    status = system(line);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Nothing the test started may outlive it, also after a failed
 * RL_REQUIRE: every node is killed, the data removed (the log beside the
 * folder stays). */
static void
cluster_at_exit(void)
{
    char cmd[700];

    if (!cluster_dir[0])
        return;
    for (int n = 1; n <= CLUSTER_NODES; n++)
        cluster_node("kill", n);
    if (!getenv("RL_KEEP_PRIVATE_SERVICES")) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cluster_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", cluster_dir);
    }
    cluster_dir[0] = '\0';
}

void
cluster_start(const char *dir, char *servers, size_t size)
{
    char file[600], line[1024], value[16];
    FILE *f;

    rltest_service_env("KAFKA_BOOTSTRAP_SERVERS"); /* skip when absent */
    snprintf(cluster_dir, sizeof(cluster_dir), "%s", dir);
    atexit(cluster_at_exit);
    /* A node restarts on its own ports, which must still be free then:
     * below the ephemeral range (no client connection takes them), away
     * from the ports other harnesses scan from, spread by pid. */
    if (!getenv("KAFKA_PORT_BASE")) {
        snprintf(value, sizeof(value), "%d", 21000 + (int)(getpid() % 300) * 8);
        setenv("KAFKA_PORT_BASE", value, 1);
    }
    RL_REQUIRE(e2e_harness("kafka_cluster.sh", "start", dir) == 0);
    snprintf(file, sizeof(file), "%s/env", dir);
    f = fopen(file, "r");
    RL_REQUIRE(f);
    RL_REQUIRE(fgets(line, sizeof(line), f));
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    RL_REQUIRE(strchr(line, '='));
    snprintf(servers, size, "%s", strchr(line, '=') + 1);
}

int
cluster_leaders(rd_kafka_t *rk, const char *topic, int *leader, int *isr,
                int max)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    int n = -1;

    if (rd_kafka_metadata(rk, 0, rkt, &md, 5000) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        md->topic_cnt != 1 || md->topics[0].err)
        goto done;
    n = md->topics[0].partition_cnt;
    for (int i = 0; i < n && i < max; i++) {
        const rd_kafka_metadata_partition_t *p = &md->topics[0].partitions[i];

        if (p->id >= 0 && p->id < max) {
            leader[p->id] = p->leader;
            isr[p->id] = p->isr_cnt;
        }
    }
done:
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return n;
}

int
cluster_busiest_leader(struct e2e *t, int64_t *high, int *npart)
{
    int leader[CLUSTER_MAX_PARTITIONS], isr[CLUSTER_MAX_PARTITIONS];
    int64_t per_node[CLUSTER_NODES + 1] = {0};
    int n = cluster_leaders(t->producer, t->topic, leader, isr,
                            CLUSTER_MAX_PARTITIONS);
    int best = 1;

    RL_REQUIRE(n > 0 && n <= CLUSTER_MAX_PARTITIONS);
    for (int p = 0; p < n; p++) {
        int64_t lo, hi;

        RL_REQUIRE(rd_kafka_query_watermark_offsets(t->producer, t->topic, p,
                                                    &lo, &hi, 5000) == 0);
        high[p] = hi;
        RL_REQUIRE(leader[p] >= 1 && leader[p] <= CLUSTER_NODES);
        per_node[leader[p]] += hi;
    }
    for (int k = 2; k <= CLUSTER_NODES; k++) {
        if (per_node[k] > per_node[best])
            best = k;
    }
    *npart = n;
    return best;
}

/* 1 when every partition of topic has a leader and three replicas in
 * sync. */
static int
topic_in_sync(rd_kafka_t *rk, const char *topic)
{
    int leader[CLUSTER_MAX_PARTITIONS], isr[CLUSTER_MAX_PARTITIONS];
    int n = cluster_leaders(rk, topic, leader, isr, CLUSTER_MAX_PARTITIONS);

    if (n <= 0)
        return 0;
    for (int p = 0; p < n && p < CLUSTER_MAX_PARTITIONS; p++) {
        if (leader[p] < 0 || isr[p] < CLUSTER_NODES)
            return 0;
    }
    return 1;
}

int
cluster_wait_in_sync(struct e2e *t, long timeout_ms)
{
    int64_t deadline = rltest_now_ms() + timeout_ms;

    for (;;) {
        if (topic_in_sync(t->producer, t->topic) &&
            topic_in_sync(t->producer, t->notify) &&
            topic_in_sync(t->producer, "__consumer_offsets"))
            return 1;
        if (rltest_now_ms() >= deadline)
            return 0;
        nap_ms(200);
    }
}

/* One DescribeConsumerGroups request; the coordinator's node id or -1. */
static int
describe_coordinator(rd_kafka_t *rk, const char *group, int timeout_ms)
{
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opts =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    rd_kafka_event_t *ev;
    int node = -1;
    char errstr[256];

    rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, errstr,
                                              sizeof(errstr));
    rd_kafka_DescribeConsumerGroups(rk, &group, 1, opts, q);
    ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    if (ev && !rd_kafka_event_error(ev)) {
        const rd_kafka_DescribeConsumerGroups_result_t *res =
            rd_kafka_event_DescribeConsumerGroups_result(ev);
        size_t cnt = 0;
        const rd_kafka_ConsumerGroupDescription_t **groups =
            res ? rd_kafka_DescribeConsumerGroups_result_groups(res, &cnt)
                : NULL;

        if (cnt == 1 && !rd_kafka_ConsumerGroupDescription_error(groups[0])) {
            const rd_kafka_Node_t *coord =
                rd_kafka_ConsumerGroupDescription_coordinator(groups[0]);

            if (coord)
                node = rd_kafka_Node_id(coord);
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_queue_destroy(q);
    return node;
}

int
cluster_coordinator(struct e2e *t, const char *group, int timeout_ms)
{
    int64_t deadline = rltest_now_ms() + timeout_ms;
    int node;

    while ((node = describe_coordinator(t->producer, group, 3000)) < 0 &&
           rltest_now_ms() < deadline)
        nap_ms(200);
    return node;
}

void
cluster_plain_publisher(struct e2e *t)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char errstr[256];

    RL_REQUIRE(rd_kafka_conf_set(conf, "bootstrap.servers", t->bootstrap,
                                 errstr, sizeof(errstr)) == RD_KAFKA_CONF_OK);
    RL_REQUIRE(rd_kafka_conf_set(conf, "acks", "all", errstr, sizeof(errstr)) ==
               RD_KAFKA_CONF_OK);
    RL_REQUIRE(rd_kafka_conf_set(conf, "linger.ms", "5", errstr,
                                 sizeof(errstr)) == RD_KAFKA_CONF_OK);
    rd_kafka_flush(t->producer, 10000);
    rd_kafka_destroy(t->producer);
    t->producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    RL_REQUIRE(t->producer);
}

void
cluster_grow_topic(struct e2e *t, const char *topic, int n)
{
    char errstr[256];
    rd_kafka_NewPartitions_t *np =
        rd_kafka_NewPartitions_new(topic, (size_t)n, errstr, sizeof(errstr));
    rd_kafka_queue_t *q = rd_kafka_queue_new(t->producer);
    rd_kafka_event_t *ev;
    int leader[CLUSTER_MAX_PARTITIONS], isr[CLUSTER_MAX_PARTITIONS];
    int64_t deadline;

    RL_REQUIRE(np);
    rd_kafka_CreatePartitions(t->producer, &np, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, 30000);
    RL_REQUIRE(ev && !rd_kafka_event_error(ev));
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewPartitions_destroy(np);
    /* Created means known to the controller: wait until the brokers'
     * metadata has the new partitions with leaders. */
    deadline = rltest_now_ms() + 30000;
    while (cluster_leaders(t->producer, topic, leader, isr,
                           CLUSTER_MAX_PARTITIONS) != n ||
           !topic_in_sync(t->producer, topic)) {
        RL_REQUIRE(rltest_now_ms() < deadline);
        nap_ms(100);
    }
}

int64_t
cluster_committed_sum(struct e2e *t, int timeout_ms)
{
    static rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *parts;
    int leader[CLUSTER_MAX_PARTITIONS], isr[CLUSTER_MAX_PARTITIONS];
    int64_t sum = 0;
    int n;

    if (!rk) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char errstr[256];

        rd_kafka_conf_set(conf, "bootstrap.servers", t->bootstrap, errstr,
                          sizeof(errstr));
        rd_kafka_conf_set(conf, "group.id", t->name, errstr, sizeof(errstr));
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", errstr,
                          sizeof(errstr));
        rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
        RL_REQUIRE(rk);
    }
    n = cluster_leaders(rk, t->topic, leader, isr, CLUSTER_MAX_PARTITIONS);
    if (n <= 0)
        return -1;
    parts = rd_kafka_topic_partition_list_new(n);
    for (int p = 0; p < n; p++)
        rd_kafka_topic_partition_list_add(parts, t->topic, p);
    if (rd_kafka_committed(rk, parts, timeout_ms) !=
        RD_KAFKA_RESP_ERR_NO_ERROR) {
        sum = -1;
    } else {
        for (int i = 0; i < parts->cnt; i++) {
            if (parts->elems[i].err) {
                sum = -1;
                break;
            }
            if (parts->elems[i].offset > 0)
                sum += parts->elems[i].offset;
        }
    }
    rd_kafka_topic_partition_list_destroy(parts);
    return sum;
}

struct note_keys {
    char (*key)[RL_HEX_SIZE + 32];
    long n;
    long cap;
};

static void
on_note(const rd_kafka_message_t *rkm, void *opaque)
{
    struct note_keys *nk = opaque;

    if (nk->n == nk->cap) {
        long cap = nk->cap ? nk->cap * 2 : 4096;
        void *p = realloc(nk->key, (size_t)cap * sizeof(nk->key[0]));

        RL_REQUIRE(p);
        nk->key = p;
        nk->cap = cap;
    }
    e2e_header(rkm, "idempotency-key", nk->key[nk->n], sizeof(nk->key[0]));
    nk->n++;
}

static int
cmp_key(const void *a, const void *b)
{
    return strcmp(a, b);
}

void
cluster_count_notifications(struct e2e *t, long *total, long *distinct,
                            long *doubled)
{
    struct note_keys nk = {NULL, 0, 0};

    *total = e2e_read_topic(t, t->notify, on_note, &nk);
    *distinct = 0;
    *doubled = 0;
    if (nk.n > 0)
        qsort(nk.key, (size_t)nk.n, sizeof(nk.key[0]), cmp_key);
    for (long i = 0; i < nk.n; i++) {
        if (i == 0 || strcmp(nk.key[i], nk.key[i - 1]) != 0) {
            (*distinct)++;
        } else if (i < 2 || strcmp(nk.key[i], nk.key[i - 2]) != 0) {
            (*doubled)++; /* counted once per key, however often repeated */
            fprintf(stderr, "notification %s on the topic more than once\n",
                    nk.key[i]);
        }
    }
    free(nk.key);
}

int64_t
cluster_extra_generations(struct e2e *t)
{
    long gens = e2e_stub_stat(t, "generations");
    int64_t completed =
        e2e_int(t, "SELECT count(*) FROM runs WHERE status = 'completed'");

    if (gens < 0 || completed < 0)
        return -1;
    return gens - completed;
}

void
cluster_produce_until(struct e2e *t, const char *job, int *produced, int due)
{
    char value[2048], tenant[32];

    for (; *produced < due; (*produced)++) {
        snprintf(tenant, sizeof(tenant), "tenant-%d", *produced % 17);
        e2e_event(value, sizeof(value), job, tenant, *produced, NULL, NULL);
        e2e_produce(t, tenant, value);
    }
    rd_kafka_poll(t->producer, 0);
}
