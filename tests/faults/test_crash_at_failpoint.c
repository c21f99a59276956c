/* Crash (SIGKILL) of a consumer at one failpoint, then a restart: the
 * invariants hold whatever the step the worker died in.
 *
 * Built once per failpoint (CMake defines FAILPOINT and the expectations
 * for the victim run): a first consumer with RL_FAILPOINTS=<fp>=crash takes
 * one run and dies at the failpoint; a second consumer, started after the
 * kill, takes the run over (expired lease, sweeper, or the redelivered
 * offset) together with three more runs produced after the restart.
 * Asserts: one runs row per run; the victim ends in V_STATUS; every other
 * run completed once with one attempt and one generation; outbox rows =
 * channels per completed run, all delivered, distinct notifications on the
 * topic = outbox rows and every duplicate carries the same idempotency
 * key; the victim has V_ATTEMPTS attempts of which V_NULL never got an
 * outcome (the visible evidence of a dispatch the dead worker may have
 * made), and the endpoint counted V_GENS generations for it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "faults.h"
#include "rltest.h"

#ifndef FAILPOINT
#error "define FAILPOINT"
#endif
#ifndef POLICY
#define POLICY "retry_once"
#endif
#ifndef DEDUPE
#define DEDUPE 0
#endif
/* STORED=1: the endpoint keeps a record of what it answered and the
 * consumers look an unsettled attempt up there (ledger/reconcile.c). */
#ifndef STORED
#define STORED 0
#endif

#define OTHERS 3

struct notes {
    long total;
    long distinct;
    char keys[64][RL_HEX_SIZE + 16];
    long bad;
};

static void
on_note(const rd_kafka_message_t *rkm, void *opaque)
{
    struct notes *n = opaque;
    char key[RL_HEX_SIZE + 16], run_id[RL_HEX_SIZE + 4];
    int seen = 0;

    e2e_header(rkm, "idempotency-key", key, sizeof(key));
    e2e_header(rkm, "run_id", run_id, sizeof(run_id));
    if (strncmp(key, run_id, RL_HEX_SIZE - 1) != 0)
        n->bad++;
    n->total++;
    for (long i = 0; i < n->distinct && !seen; i++)
        seen = strcmp(n->keys[i], key) == 0;
    if (!seen && n->distinct < 64)
        snprintf(n->keys[n->distinct++], sizeof(n->keys[0]), "%s", key);
}

int
main(void)
{
    struct e2e t;
    char victim[RL_HEX_SIZE], others[OTHERS][RL_HEX_SIZE], job[160];
    char failpoints[128], policy[64];
    const char *const stub_env[] = {"STUB_DEDUPE=1", NULL};
    const char *const stub_stored[] = {"STUB_STORE_LAG_MS=500", NULL};
    const char *stored = STORED ? "RUNLEDGER_MODEL_STORED_COMPLETIONS=true"
                                : "RUNLEDGER_MODEL_STORED_COMPLETIONS=false";
    struct notes *notes = calloc(1, sizeof(*notes));
    int64_t completed;
    int slot, status;

    RL_REQUIRE(notes);
    e2e_setup(&t, "crash", 1);
    if (DEDUPE)
        e2e_stub_start(&t, stub_env);
    else if (STORED)
        e2e_stub_start(&t, stub_stored);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(failpoints, sizeof(failpoints), "RL_FAILPOINTS=%s=crash@1",
             FAILPOINT);
    snprintf(policy, sizeof(policy), "RUNLEDGER_AMBIGUOUS_POLICY=%s", POLICY);

    e2e_produce_event(&t, job, "tenant-a", 0, NULL, victim);
    e2e_flush(&t);
    slot = fx_spawn(&t, "consume", failpoints, policy, stored, NULL);
    status = e2e_wait_exit(&t, slot, 30000);
    RL_REQUIRE(status != -1);
    RL_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    fx_spawn(&t, "consume", policy, stored, NULL);
    for (int i = 0; i < OTHERS; i++)
        e2e_produce_event(&t, job, "tenant-a", 1 + i, NULL, others[i]);
    e2e_flush(&t);
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), 1 + OTHERS);
    RL_CHECK_STREQ(
        e2e_textf(&t, "SELECT status FROM runs WHERE run_id='%s'", victim),
        V_STATUS);
    if (strcmp(V_STATUS, "completed") == 0)
        fx_check_completed_once(&t, victim);
    RL_CHECK_INTEQ(fx_attempts(&t, victim, "*"), V_ATTEMPTS);
    RL_CHECK_INTEQ(fx_attempts(&t, victim, NULL), V_NULL);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, victim), V_GENS);
    /* The dead worker's answer was read back from the record, not made
     * again. */
    if (STORED)
        RL_CHECK_INTEQ(e2e_intf(&t,
                                "SELECT count(*) FROM attempts WHERE "
                                "run_id='%s' AND outcome='ok' AND "
                                "reconciled_at IS NOT NULL",
                                victim),
                       1);
    /* Every generation is accounted for by an attempt row. */
    RL_CHECK(e2e_stub_generations(&t, victim) <= fx_attempts(&t, victim, "*"));
    for (int i = 0; i < OTHERS; i++) {
        fx_check_completed_once(&t, others[i]);
        RL_CHECK_INTEQ(fx_attempts(&t, others[i], "*"), 1);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, others[i]), 1);
    }

    completed = e2e_int(&t, "SELECT count(*) FROM runs WHERE "
                            "status='completed'");
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   completed * 2);
    e2e_read_topic(&t, t.notify, on_note, notes);
    RL_CHECK_INTEQ(notes->distinct, completed * 2);
    RL_CHECK(notes->total >= notes->distinct);
    RL_CHECK_INTEQ(notes->bad, 0);
    if (strcmp(FAILPOINT, "relay_after_produce") == 0)
        RL_CHECK(notes->total > notes->distinct); /* redelivered, same key */
    fprintf(stderr,
            "%s: victim %s attempts=%lld unrecorded=%lld generations=%ld "
            "notifications=%ld distinct=%ld\n",
            FAILPOINT, V_STATUS, (long long)fx_attempts(&t, victim, "*"),
            (long long)fx_attempts(&t, victim, NULL),
            e2e_stub_generations(&t, victim), notes->total, notes->distinct);
    free(notes);
    e2e_teardown(&t);
    RL_TEST_END();
}
