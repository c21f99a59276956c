/* The relay vacuums the outbox at light load too, not only after
 * RUNLEDGER_RELAY_VACUUM_ROWS delivered rows: every delivered row leaves
 * an entry at the head of outbox_due_idx that each read of a batch steps
 * over until a vacuum removes it, and at a few runs a second 20,000 rows
 * take minutes to gather.
 *
 * One consumer (its relay thread off) and one `runledger relay` with the
 * row bound at 20,000, 3 events. Asserts: the outbox had never been
 * vacuumed, all 3 runs complete and their 6 notifications are delivered,
 * and then the relay vacuums the outbox within 15 s. Fails on a relay that
 * vacuums by rows only.
 *
 * The relay connects as the migrating user, the outbox's owner, also
 * under RL_TEST_DB_ROLES=1: before PostgreSQL 17 only the owner may
 * VACUUM a table, and a relay in runledger_relay skips the vacuum
 * (docs/deploying.md, Database roles), so the feature under test exists
 * only where the relay's login owns the outbox. The worker keeps its
 * role's login. */
#include <stdio.h>

#include "e2e.h"
#include "rltest.h"

#define EVENTS 3

int
main(void)
{
    struct e2e t;
    const char *worker_env[] = {"RUNLEDGER_RELAY=false", NULL};
    char owner_url[1100];
    const char *relay_env[] = {"RUNLEDGER_RELAY_VACUUM_ROWS=20000", owner_url,
                               NULL};
    char job[160];

    e2e_setup(&t, "e2e_rvac", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT vacuum_count FROM pg_stat_user_tables"
                               " WHERE relid = 'outbox'::regclass"),
                   0);
    snprintf(owner_url, sizeof(owner_url), "DATABASE_URL=%s", t.database_url);
    e2e_spawn(&t, "consume", worker_env);
    e2e_spawn(&t, "relay", relay_env);
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
