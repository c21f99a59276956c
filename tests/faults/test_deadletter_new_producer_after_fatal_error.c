/* The dead-letter producer meets a fatal error (the failpoint
 * dlq_producer_fatal raises one through rd_kafka_test_fatal_error, as
 * librdkafka before 2.3.0 raises OUT_OF_ORDER_SEQUENCE_NUMBER after a
 * partition leader change). Such a producer refuses every dead letter, and
 * the offsets of their partitions could not be committed past them until
 * the process restarted. The consumer starts a new producer: every
 * malformed event reaches the dead-letter topic, the group commits every
 * offset, the runs beside them complete, and the log says why the
 * producer was replaced. */
#include <stdio.h>
#include <string.h>

#include "faults.h"
#include "rltest.h"

#define BAD 30
#define GOOD 20

int
main(void)
{
    struct e2e t;
    char job[160], value[64];
    long dead;
    int slot;

    e2e_setup(&t, "fdlqfatal", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    slot = fx_spawn(&t, "consume", "RL_FAILPOINTS=dlq_producer_fatal=error@3",
                    NULL);
    for (int i = 0; i < BAD + GOOD; i++) {
        if (i % 5 < 3) { /* three in five: BAD of the BAD + GOOD */
            snprintf(value, sizeof(value), "{\"not an event\": %d", i);
            e2e_produce(&t, i % 2 ? "tenant-a" : "tenant-b", value);
        } else {
            e2e_produce_event(&t, job, i % 2 ? "tenant-a" : "tenant-b", i, NULL,
                              NULL);
        }
    }
    e2e_flush(&t);

    RL_CHECK(fx_settled(&t, 60000));
    dead = e2e_count_with_header(&t, t.dlq, "reason", NULL);
    RL_CHECK(dead >= BAD);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE "
                               "status='completed'"),
                   GOOD);
    RL_CHECK(e2e_log_has(&t, slot, "starting a new producer"));
    RL_CHECK(e2e_alive(&t, slot));
    fprintf(stderr,
            "dead letters after a fatal producer error: %d malformed, %ld "
            "on the topic\n",
            BAD, dead);
    e2e_teardown(&t);
    RL_TEST_END();
}
