/* A consumer claims nothing while its relay is behind: when the relay's
 * last batch took more than half of RUNLEDGER_RELAY_BATCH rows, the
 * notifications of completed runs go out before more runs come in, and
 * the events wait in Kafka.
 *
 * The ledger starts with 1,000 completed runs whose 2,000 notifications
 * are still in the outbox; the consumer relays them 2 rows a batch
 * (RUNLEDGER_RELAY_BATCH=2: every batch is full until the outbox is
 * drained, which takes a thousand batches, seconds), and 5 new events
 * are produced once the relay has delivered its first full batches, while
 * over half of the queued rows still wait. Asserts: the new runs complete and
 * every notification is delivered once; no queued notification was delivered by
 * a batch that began after the first new run was claimed (at most the one batch
 * that found the outbox nearly empty and cleared the flag); the consumer stops
 * cleanly. Fails on a ledger that claims regardless: it joins the group and
 * claims while most of the 2,000 rows wait. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "e2e.h"
#include "rltest.h"

#define QUEUED_RUNS 1000
#define NEW_RUNS 5

int
main(void)
{
    struct e2e t;
    const char *env[] = {"RUNLEDGER_RELAY_BATCH=2",
                         "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};
    char job[160];
    int slot, status;

    e2e_setup(&t, "e2e_relay_first", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);

    /* Completed runs whose notifications nobody relayed yet, as a relay
     * that was down would leave them. */
    RL_REQUIRE(e2e_intf(&t,
                        "WITH r AS (INSERT INTO runs (run_id, job, tenant, "
                        "scheduled_at, version, fingerprint, request, "
                        "status, output, completed_at) SELECT "
                        "encode(sha256(('queued-' || g)::bytea), 'hex'), "
                        "'queued', 'tenant-q', timestamptz "
                        "'2026-01-01 00:00:00+00' + g * interval '1 hour', "
                        "'v1', encode(sha256('q'::bytea), 'hex'), '{}', "
                        "'completed', '{\"answer\": 1}', now() FROM "
                        "generate_series(1, %d) g RETURNING run_id), "
                        "o AS (INSERT INTO outbox (run_id, channel, payload) "
                        "SELECT r.run_id, c, '{}' FROM r, "
                        "unnest(ARRAY['email', 'slack']) c RETURNING 1) "
                        "SELECT count(*) FROM o",
                        QUEUED_RUNS) == 2 * QUEUED_RUNS);

    slot = e2e_spawn(&t, "consume", env);
    /* The relay is behind once it has finished a full batch; the events
     * arrive after that, while most of the queued rows still wait. */
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT (count(*) >= 20)::int FROM "
                             "outbox_delivered"));
    for (int i = 0; i < NEW_RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
    e2e_flush(&t);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM outbox") > QUEUED_RUNS);

    RL_CHECK(e2e_wait_intf(&t, NEW_RUNS, 90000,
                           "SELECT count(*) FROM runs WHERE job = '%s' AND "
                           "status = 'completed'",
                           job));
    RL_CHECK(e2e_wait_intf(&t, 2 * (QUEUED_RUNS + NEW_RUNS), 30000,
                           "SELECT count(*) FROM outbox_delivered"));
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox"), 0);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(DISTINCT (run_id, channel)) "
                               "FROM outbox_delivered"),
                   2 * (QUEUED_RUNS + NEW_RUNS));

    /* delivered_at is the start of the relay batch that sent the row. */
    RL_CHECK(e2e_intf(&t,
                      "SELECT count(*) FROM outbox_delivered d JOIN runs r "
                      "USING (run_id) WHERE r.job = 'queued' AND "
                      "d.delivered_at > (SELECT min(created_at) FROM runs "
                      "WHERE job = '%s')",
                      job) <= 2);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts a JOIN runs r "
                            "USING (run_id) WHERE r.job = '%s'",
                            job),
                   NEW_RUNS);

    e2e_signal(&t, slot, SIGTERM, 0);
    status = e2e_wait_exit(&t, slot, 30000);
    RL_CHECK(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    RL_CHECK(e2e_group_lag(&t) == 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
