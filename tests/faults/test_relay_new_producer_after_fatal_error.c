/* The relay's idempotent producer meets a fatal error (the failpoint
 * relay_producer_fatal raises one through rd_kafka_test_fatal_error, as
 * librdkafka before 2.3.0 raises OUT_OF_ORDER_SEQUENCE_NUMBER after a
 * partition leader change: a killed broker of a three-node cluster was
 * enough). A producer in that state refuses every further message, so a
 * relay that kept it would leave every later notification pending while
 * the consumer kept completing runs. The relay starts a new producer:
 * every notification is delivered within the settle timeout, each on the
 * topic at least once under its idempotency key, and the log says why the
 * producer was replaced. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"
#include "rltest.h"

#define RUNS 40

struct notes {
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
    struct notes *n = opaque;

    if (n->total < RUNS * 2 * 4)
        e2e_header(rkm, "idempotency-key", n->keys[n->total],
                   sizeof(n->keys[0]));
    n->total++;
}

int
main(void)
{
    struct e2e t;
    char job[160];
    struct notes notes = {0, 0, NULL};
    int slot;

    notes.keys = calloc(RUNS * 2 * 4, sizeof(notes.keys[0]));
    RL_REQUIRE(notes.keys);
    e2e_setup(&t, "frelayfatal", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    /* The relay's third turn finds its producer failed for good, before
     * or among the batches of these runs: none may wait on it. */
    slot = fx_spawn(&t, "consume", "RL_FAILPOINTS=relay_producer_fatal=error@3",
                    NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, i % 2 ? "tenant-a" : "tenant-b", i, NULL,
                          NULL);
    e2e_flush(&t);

    RL_CHECK(fx_settled(&t, 60000));
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE "
                               "status='completed'"),
                   RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   RUNS * 2);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox"), 0);
    e2e_read_topic(&t, t.notify, on_note, &notes);
    RL_REQUIRE(notes.total <= RUNS * 2 * 4);
    qsort(notes.keys, (size_t)notes.total, sizeof(notes.keys[0]), cmp_key);
    for (long i = 0; i < notes.total; i++) {
        if (i == 0 || strcmp(notes.keys[i], notes.keys[i - 1]) != 0)
            notes.distinct++;
    }
    RL_CHECK_INTEQ(notes.distinct, RUNS * 2);
    RL_CHECK(e2e_log_has(&t, slot, "starting a new producer"));
    RL_CHECK(e2e_alive(&t, slot));
    fprintf(stderr,
            "relay after a fatal producer error: outbox rows %d, "
            "notifications %ld, distinct %ld\n",
            RUNS * 2, notes.total, notes.distinct);
    free(notes.keys);
    e2e_teardown(&t);
    RL_TEST_END();
}
