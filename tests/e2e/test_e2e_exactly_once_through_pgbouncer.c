/* End to end through PgBouncer in session mode: `migrate`, two consumers
 * and a separate relay, every connection through the pooler
 * (RUNLEDGER_PG_POOL_MODE=session), the ledger's schema in the
 * connection string's options, which reach the server only as SET. 300
 * schedule events, a third of them duplicates. Asserts the exactly-once
 * invariants of test_e2e_exactly_once: one completed run per logical run,
 * one delivered outbox row per (run, channel) and each on the notification
 * topic, offsets committed to the end, one generation per run. And a relay
 * told the pool is in transaction mode refuses to start (exit 2). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "e2e.h"
#include "rl/runid.h"
#include "rltest.h"

#define DISTINCT 200
#define CHANNELS 2

static char run_ids[DISTINCT][RL_HEX_SIZE];

static int
settled(struct e2e *t, void *opaque)
{
    (void)opaque;
    return e2e_int(t, "SELECT count(*) FROM runs WHERE status = "
                      "'completed'") == DISTINCT &&
           e2e_int(t, "SELECT count(*) FROM outbox") == 0 &&
           e2e_group_lag(t) == 0;
}

struct notifications {
    long total;
    char keys[DISTINCT * CHANNELS * 4][RL_HEX_SIZE + 16];
};

static int
cmp_key(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void
on_notification(const rd_kafka_message_t *rkm, void *opaque)
{
    struct notifications *n = opaque;

    if (n->total < DISTINCT * CHANNELS * 4)
        e2e_header(rkm, "idempotency-key", n->keys[n->total],
                   sizeof(n->keys[0]));
    n->total++;
}

int
main(void)
{
    static const char *const pooled[] = {"RUNLEDGER_PG_POOL_MODE=session",
                                         "RUNLEDGER_RELAY=false", NULL};
    static const char *const relay_env[] = {"RUNLEDGER_PG_POOL_MODE=session",
                                            NULL};
    static const char *const transaction[] = {
        "RUNLEDGER_PG_POOL_MODE=transaction", NULL};
    static struct notifications notes;
    const char *url = rltest_service_env("PGBOUNCER_URL_SESSION");
    struct e2e t;
    char job[128], tenant[32];
    long distinct = 0, one_generation = 0;
    int slot, status;

    e2e_setup_at(&t, "e2e_pgb", 4, url, NULL);
    snprintf(job, sizeof(job), "summary-%s", t.name);

    /* migrate through the pooler: the schema is there, nothing to do. */
    slot = e2e_spawn(&t, "migrate", relay_env);
    status = e2e_wait_exit(&t, slot, 60000);
    RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* Transaction pooling: refused before anything is touched. */
    slot = e2e_spawn(&t, "relay", transaction);
    status = e2e_wait_exit(&t, slot, 30000);
    RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2);

    for (int i = 0; i < DISTINCT; i++) {
        snprintf(tenant, sizeof(tenant), "tenant-%d", i % 5);
        e2e_produce_event(&t, job, tenant, i, NULL, run_ids[i]);
    }
    for (int i = 0; i < DISTINCT / 2; i++) {
        snprintf(tenant, sizeof(tenant), "tenant-%d", (i * 2) % 5);
        e2e_produce_event(&t, job, tenant, i * 2, NULL, NULL);
    }
    e2e_flush(&t);
    e2e_spawn(&t, "consume", pooled);
    e2e_spawn(&t, "consume", pooled);
    e2e_spawn(&t, "relay", relay_env);

    RL_CHECK(e2e_wait(settled, &t, NULL, 120000));
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), DISTINCT);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), DISTINCT);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   DISTINCT * CHANNELS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox"), 0);

    /* The service's sessions went through the pooler, not around it. */
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM pg_stat_activity WHERE "
                         "application_name = 'runledger-relay'") >= 1);

    e2e_read_topic(&t, t.notify, on_notification, &notes);
    RL_CHECK(notes.total >= DISTINCT * CHANNELS);
    if (notes.total <= DISTINCT * CHANNELS * 4) {
        qsort(notes.keys, (size_t)notes.total, sizeof(notes.keys[0]), cmp_key);
        for (long i = 0; i < notes.total; i++) {
            if (i == 0 || strcmp(notes.keys[i], notes.keys[i - 1]) != 0)
                distinct++;
        }
    }
    RL_CHECK_INTEQ(distinct, DISTINCT * CHANNELS);

    for (int i = 0; i < DISTINCT; i++) {
        if (e2e_stub_generations(&t, run_ids[i]) == 1)
            one_generation++;
    }
    RL_CHECK_INTEQ(one_generation, DISTINCT);

    for (int i = 0; i < t.nprocs; i++) {
        if (e2e_alive(&t, i)) {
            status = e2e_signal(&t, i, SIGTERM, 1);
            RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
