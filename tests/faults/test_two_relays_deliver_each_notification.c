/* A relay is killed right after its first batch was produced and before
 * it was marked delivered (relay_after_produce=crash@1; it runs alone
 * until then, so the crash cannot depend on which relay won the rows),
 * then two `runledger relay` processes drain the rest of the outbox at
 * once (SKIP LOCKED batches of 7), each vacuuming the outbox after every
 * batch (RUNLEDGER_RELAY_VACUUM_ROWS=7, on a connection of its own, while
 * the other delivers). Every outbox row is delivered at
 * least once, none is left pending, the notification topic holds exactly
 * one distinct idempotency key per outbox row (120 runs x 2 channels),
 * and the redelivered batch repeats keys rather than inventing new ones.
 *
 * The two vacuuming relays connect as the migrating user, the outbox's
 * owner, also under RL_TEST_DB_ROLES=1: before PostgreSQL 17 only the
 * owner may VACUUM a table, and a relay in runledger_relay skips the
 * vacuum (docs/deploying.md, Database roles). The worker and the crashing
 * relay keep their roles' logins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "faults.h"
#include "rltest.h"

#define RUNS 120

struct notes {
    long total;
    long distinct;
    long bad;
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
    char key[RL_HEX_SIZE + 16], run_id[RL_HEX_SIZE + 4];

    e2e_header(rkm, "idempotency-key", key, sizeof(key));
    e2e_header(rkm, "run_id", run_id, sizeof(run_id));
    if (strncmp(key, run_id, RL_HEX_SIZE - 1) != 0)
        n->bad++;
    if (n->total < RUNS * 2 * 4)
        snprintf(n->keys[n->total], sizeof(n->keys[0]), "%s", key);
    n->total++;
}

int
main(void)
{
    struct e2e t;
    char job[160];
    struct notes notes = {0, 0, 0, NULL};
    int crashing, status;
    char owner_url[1100];

    notes.keys = calloc(RUNS * 2 * 4, sizeof(notes.keys[0]));
    RL_REQUIRE(notes.keys);
    e2e_setup(&t, "frelays", 2);
    snprintf(owner_url, sizeof(owner_url), "DATABASE_URL=%s", t.database_url);
    snprintf(job, sizeof(job), "job-%s", t.name);
    fx_spawn(&t, "consume", "RUNLEDGER_RELAY=false", NULL);
    crashing = fx_spawn(&t, "relay", "RUNLEDGER_RELAY_BATCH=7",
                        "RL_FAILPOINTS=relay_after_produce=crash@1", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, i % 2 ? "tenant-a" : "tenant-b", i, NULL,
                          NULL);
    e2e_flush(&t);

    status = e2e_wait_exit(&t, crashing, 60000);
    RL_CHECK(status != -1 && WIFSIGNALED(status));
    /* Two relays at once over what is left, the crashed batch included. */
    fx_spawn(&t, "relay", "RUNLEDGER_RELAY_BATCH=7",
             "RUNLEDGER_RELAY_VACUUM_ROWS=7", owner_url, NULL);
    fx_spawn(&t, "relay", "RUNLEDGER_RELAY_BATCH=7",
             "RUNLEDGER_RELAY_VACUUM_ROWS=7", owner_url, NULL);
    RL_REQUIRE(fx_settled(&t, 60000));
    /* they vacuumed the outbox as they went (statistics reach
     * pg_stat_user_tables within a second or so) */
    RL_CHECK(e2e_wait_intf(&t, 1, 15000,
                           "SELECT (vacuum_count > 0)::int"
                           "  FROM pg_stat_user_tables"
                           " WHERE relid = 'outbox'::regclass"));

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
    RL_CHECK(notes.total > RUNS * 2); /* the crashed batch went out twice */
    RL_CHECK_INTEQ(notes.bad, 0);
    fprintf(stderr,
            "two relays: outbox rows %d, notifications %ld, "
            "distinct %ld\n",
            RUNS * 2, notes.total, notes.distinct);
    free(notes.keys);
    e2e_teardown(&t);
    RL_TEST_END();
}
