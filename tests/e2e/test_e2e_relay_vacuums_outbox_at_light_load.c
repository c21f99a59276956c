/* The relay vacuums the outbox at light load too, not only after
 * RUNLEDGER_RELAY_VACUUM_ROWS delivered rows: every delivered row leaves
 * an entry at the head of outbox_due_idx that each read of a batch steps
 * over until a vacuum removes it, and at a few runs a second 20,000 rows
 * take minutes to gather.
 *
 * One consumer (its relay inside) with the row bound at 20,000, 3 events.
 * Asserts: the outbox had never been vacuumed, all 3 runs complete and
 * their 6 notifications are delivered, and then the relay vacuums the
 * outbox within 15 s. Fails on a relay that vacuums by rows only. */
#include <stdio.h>

#include "e2e.h"
#include "rltest.h"

#define EVENTS 3

int
main(void)
{
    struct e2e t;
    const char *env[] = {"RUNLEDGER_RELAY_VACUUM_ROWS=20000", NULL};
    char job[160];

    e2e_setup(&t, "e2e_rvac", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT vacuum_count FROM pg_stat_user_tables"
                               " WHERE relid = 'outbox'::regclass"),
                   0);
    e2e_spawn(&t, "consume", env);
    for (int i = 0; i < EVENTS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
    e2e_flush(&t);

    RL_CHECK(e2e_wait_completed_and_delivered(&t, job, EVENTS));
    /* statistics reach pg_stat_user_tables when the vacuum ends */
    RL_CHECK(e2e_wait_intf(&t, 1, 15000,
                           "SELECT (vacuum_count > 0)::int"
                           "  FROM pg_stat_user_tables"
                           " WHERE relid = 'outbox'::regclass"));
    e2e_teardown(&t);
    RL_TEST_END();
}
