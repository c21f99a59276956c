/* The Kafka broker (a private instance) killed with SIGKILL while two
 * consumers and their relays work, and restarted 2 s later on the same
 * ports and data: the consumers and relays reconnect, no event is lost
 * (every run completes), none is run twice (one attempt and one
 * generation per run, redelivered events are acknowledged as
 * duplicates), every outbox row reaches the notification topic, and the
 * group's committed offsets reach the end of every partition. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "faults.h"
#include "rltest.h"

#define RUNS 150

struct keys {
    long total;
    long distinct;
    char (*keys)[RL_HEX_SIZE + 16];
};

static int
cmp_key(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void
on_note(const rd_kafka_message_t *rkm, void *opaque)
{
    struct keys *k = opaque;

    if (k->total < RUNS * 8)
        e2e_header(rkm, "idempotency-key", k->keys[k->total],
                   sizeof(k->keys[0]));
    k->total++;
}

int
main(void)
{
    struct e2e t;
    char dir[PATH_MAX], cwd[PATH_MAX - 64], servers[256], job[160];
    struct timespec outage = {2, 0};
    static char run_ids[RUNS][RL_HEX_SIZE];
    struct keys k = {0, 0, NULL};
    long one_generation = 0;

    k.keys = calloc(RUNS * 8, sizeof(k.keys[0]));
    RL_REQUIRE(k.keys);
    RL_REQUIRE(getcwd(cwd, sizeof(cwd)));
    snprintf(dir, sizeof(dir), "%s/kkill-%d", cwd, (int)getpid());
    e2e_private_kafka(dir, servers, sizeof(servers));
    e2e_setup_at(&t, "fkkill", 2, NULL, servers);
    snprintf(job, sizeof(job), "job-%s", t.name);
    fx_spawn(&t, "consume", "RUNLEDGER_LEASE_SECONDS=15", NULL);
    fx_spawn(&t, "consume", "RUNLEDGER_LEASE_SECONDS=15", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, i % 2 ? "tenant-a" : "tenant-b", i,
                          "[[fault:latency ms=150]]", run_ids[i]);
    e2e_flush(&t);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT (count(*) >= %d)::int FROM runs WHERE "
                             "status='completed'",
                             RUNS / 4));

    RL_REQUIRE(e2e_harness("kafka.sh", "kill", dir) == 0);
    nanosleep(&outage, NULL); /* the outage itself, not a wait */
    RL_REQUIRE(e2e_harness("kafka.sh", "restart", dir) == 0);
    RL_REQUIRE(fx_settled(&t, 120000));

    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE "
                               "status='completed'"),
                   RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   RUNS * 2);
    for (int i = 0; i < RUNS; i++) {
        if (e2e_stub_generations(&t, run_ids[i]) == 1)
            one_generation++;
    }
    RL_CHECK_INTEQ(one_generation, RUNS);
    e2e_read_topic(&t, t.notify, on_note, &k);
    RL_REQUIRE(k.total <= RUNS * 8);
    qsort(k.keys, (size_t)k.total, sizeof(k.keys[0]), cmp_key);
    for (long i = 0; i < k.total; i++) {
        if (i == 0 || strcmp(k.keys[i], k.keys[i - 1]) != 0)
            k.distinct++;
    }
    RL_CHECK_INTEQ(k.distinct, RUNS * 2);
    fprintf(stderr, "broker restart: notifications %ld distinct %ld\n", k.total,
            k.distinct);
    free(k.keys);
    e2e_teardown(&t);
    RL_TEST_END();
}
