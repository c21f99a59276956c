/* Invariant: an approval-required run publishes exactly the
 * saved proposal a human approved, once, and nothing before that.
 *
 * Real broker, PostgreSQL and stub model; `runledger consume` without its
 * relay, separate `runledger relay` processes, and `runledger runs
 * approve|reject` / `approvers add` run as an operator would. Four
 * approval-required runs wait in awaiting_approval with no outbox row and
 * nothing on the notification topic, while two runs without approval
 * complete and are delivered as before. On one run: a wrong digest, an
 * unauthorised actor, then the right approval (2 outbox rows), then a
 * second approval, all refused except the third. Eight concurrent
 * approvals of another run: exactly one wins. One run is rejected (failed,
 * error_class rejected, never published). The relay is killed right after
 * producing a batch of approved notifications and before marking it
 * delivered, then restarted: every notification arrives, the topic holds
 * exactly one distinct idempotency key per outbox row, a key repeats only
 * with the same payload, and each approved payload carries the proposal's
 * content. */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faults.h"
#include "rl/approval.h"
#include "rltest.h"

extern char **environ;

enum { WAITING = 4, PLAIN = 2, MAX_NOTES = 256, CONCURRENT = 8 };

struct note {
    char key[RL_HEX_SIZE + 16];
    char *payload;
};

struct notes {
    long total;
    struct note list[MAX_NOTES];
};

static void
on_note(const rd_kafka_message_t *rkm, void *opaque)
{
    struct notes *n = opaque;

    if (n->total < MAX_NOTES) {
        struct note *note = &n->list[n->total];

        e2e_header(rkm, "idempotency-key", note->key, sizeof(note->key));
        note->payload = calloc(1, rkm->len + 1);
        if (note->payload && rkm->payload)
            memcpy(note->payload, rkm->payload, rkm->len);
    }
    n->total++;
}

/* Starts `runledger <args...>` against the test's ledger (DATABASE_URL
 * overridden, the rest inherited); stdout discarded, stderr inherited so
 * refusals show in the test log. Returns the pid. */
static pid_t
spawn_cli(struct e2e *t, const char *const *args)
{
    const char *bin = getenv("RUNLEDGER_BIN");
    char db_url[1100];
    char *argv[16];
    char *envp[256];
    size_t n = 0, a = 0;
    posix_spawn_file_actions_t fa;
    pid_t pid;

    RL_REQUIRE(bin != NULL);
    snprintf(db_url, sizeof(db_url), "DATABASE_URL=%s", t->database_url);
    envp[n++] = db_url;
    for (char **e = environ; *e && n < 254; e++) {
        if (strncmp(*e, "DATABASE_URL=", 13) != 0)
            envp[n++] = *e;
    }
    envp[n] = NULL;
    argv[a++] = (char *)bin;
    for (size_t i = 0; args[i] && a < 15; i++)
        argv[a++] = (char *)args[i];
    argv[a] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    RL_REQUIRE(posix_spawn(&pid, bin, &fa, NULL, argv, envp) == 0);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

/* Exit code of pid (-1 when it did not exit normally). */
static int
exit_code_of(pid_t pid)
{
    int status;

    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Runs `runledger runs <verb> run_id --digest digest --actor actor` and
 * returns its exit code. */
static int
decide(struct e2e *t, const char *verb, const char *run_id, const char *digest,
       const char *actor)
{
    const char *args[] = {"runs",    verb,  run_id,     "--digest", digest,
                          "--actor", actor, "--reason", "e2e",      NULL};

    return exit_code_of(spawn_cli(t, args));
}

/* The stored digest of run_id, checked against the canonical text of the
 * stored proposal (what `runs show` displays). */
static void
stored_digest(struct e2e *t, const char *run_id, char *digest)
{
    char *proposal = strdup(e2e_textf(
        t, "SELECT proposal::text FROM runs WHERE run_id = '%s'", run_id));
    char *canonical = NULL;
    char computed[RL_HEX_SIZE], errstr[256];

    RL_REQUIRE(proposal != NULL);
    snprintf(digest, RL_HEX_SIZE, "%s",
             e2e_textf(t,
                       "SELECT proposal_digest FROM runs WHERE run_id = '%s'",
                       run_id));
    RL_REQUIRE(rl_approval_canonical(proposal, &canonical, computed, errstr,
                                     sizeof(errstr)) == 0);
    RL_CHECK_STREQ(computed, digest);
    free(canonical);
    free(proposal);
}

static int64_t
outbox_rows(struct e2e *t, const char *run_id)
{
    return e2e_intf(t,
                    "SELECT (SELECT count(*) FROM outbox WHERE run_id = '%s')"
                    " + (SELECT count(*) FROM outbox_delivered"
                    "     WHERE run_id = '%s')",
                    run_id, run_id);
}

int
main(void)
{
    static struct notes notes;
    struct e2e t;
    char job[160], plain_job[160], tenant[160], buf[2048], value[2100];
    char run[WAITING][RL_HEX_SIZE], digest[WAITING][RL_HEX_SIZE];
    char wrong[RL_HEX_SIZE];
    pid_t pids[CONCURRENT];
    int relay, status, wins = 0, refused = 0, rc;
    long distinct = 0, mismatched = 0, rejected_notes = 0;

    e2e_setup(&t, "appr", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(plain_job, sizeof(plain_job), "plain-%s", t.name);
    snprintf(tenant, sizeof(tenant), "tenant-%s", t.name);

    {
        const char *add[] = {"approvers", "add",   "--tenant", tenant,
                             "--actor",   "alice", NULL};
        const char *list[] = {"approvers", "list", "--tenant", tenant, NULL};

        RL_REQUIRE(exit_code_of(spawn_cli(&t, add)) == 0);
        RL_CHECK_INTEQ(exit_code_of(spawn_cli(&t, add)), 0); /* idempotent */
        RL_CHECK_INTEQ(exit_code_of(spawn_cli(&t, list)), 0);
    }
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM approvers"), 1);

    for (int i = 0; i < WAITING; i++) {
        e2e_event(buf, sizeof(buf), job, tenant, i, NULL, run[i]);
        snprintf(value, sizeof(value), "{\"approval\":{\"required\":true},%s",
                 buf + 1);
        e2e_produce(&t, tenant, value);
    }
    for (int i = 0; i < PLAIN; i++)
        e2e_produce_event(&t, plain_job, tenant, i, NULL, NULL);
    e2e_flush(&t);
    fx_spawn(&t, "consume", "RUNLEDGER_RELAY=false", NULL);
    relay = fx_spawn(&t, "relay", NULL);

    /* Waiting: proposals stored, no outbox row, nothing published. */
    RL_REQUIRE(e2e_wait_intf(&t, WAITING, 60000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'awaiting_approval' AND job = '%s'",
                             job) == 1);
    RL_REQUIRE(e2e_wait_intf(&t, PLAIN * 2, 60000,
                             "SELECT count(*) FROM outbox_delivered") == 1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE job = '%s' AND "
                            "status = 'completed' AND proposal IS NULL",
                            plain_job),
                   PLAIN);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM outbox o JOIN runs r USING "
                            "(run_id) WHERE r.job = '%s'",
                            job),
                   0);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE job = '%s' AND "
                            "output IS NULL AND proposal IS NOT NULL AND "
                            "lock_owner IS NULL",
                            job),
                   WAITING);
    for (int i = 0; i < WAITING; i++)
        stored_digest(&t, run[i], digest[i]);
    {
        /* show fails when the displayed text does not hash to the digest */
        const char *show[] = {"runs", "show", run[0], NULL};
        const char *list[] = {"runs", "list", "--status", "awaiting_approval",
                              NULL};

        const char *show_json[] = {"runs", "show", run[0], "--json", NULL};

        RL_CHECK_INTEQ(exit_code_of(spawn_cli(&t, show)), 0);
        RL_CHECK_INTEQ(exit_code_of(spawn_cli(&t, show_json)), 0);
        RL_CHECK_INTEQ(exit_code_of(spawn_cli(&t, list)), 0);
    }
    e2e_signal(&t, relay, SIGKILL, 1);
    e2e_read_topic(&t, t.notify, on_note, &notes);
    RL_CHECK_INTEQ(notes.total, PLAIN * 2);

    /* Refusals change nothing. */
    snprintf(wrong, sizeof(wrong), "%s", digest[1]);
    RL_CHECK_INTEQ(decide(&t, "approve", run[0], wrong, "alice"), 3);
    RL_CHECK_INTEQ(decide(&t, "approve", run[0], digest[0], "mallory"), 3);
    RL_CHECK_STREQ(
        e2e_textf(&t, "SELECT status FROM runs WHERE run_id = '%s'", run[0]),
        "awaiting_approval");
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM approvals"), 0);
    RL_CHECK_INTEQ(outbox_rows(&t, run[0]), 0);

    /* The right approval, then a second one. */
    RL_CHECK_INTEQ(decide(&t, "approve", run[0], digest[0], "alice"), 0);
    RL_CHECK_STREQ(
        e2e_textf(&t, "SELECT status FROM runs WHERE run_id = '%s'", run[0]),
        "completed");
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id = '%s' "
                            "AND output = proposal -> 'content'",
                            run[0]),
                   1);
    RL_CHECK_INTEQ(outbox_rows(&t, run[0]), 2);
    RL_CHECK_INTEQ(decide(&t, "approve", run[0], digest[0], "alice"), 3);
    RL_CHECK_INTEQ(outbox_rows(&t, run[0]), 2);

    /* Concurrent approvals: exactly one winner. */
    {
        const char *args[] = {"runs",    "approve", run[1],  "--digest",
                              digest[1], "--actor", "alice", NULL};

        for (int i = 0; i < CONCURRENT; i++)
            pids[i] = spawn_cli(&t, args);
        for (int i = 0; i < CONCURRENT; i++) {
            rc = exit_code_of(pids[i]);
            wins += rc == 0;
            refused += rc == 3;
        }
    }
    RL_CHECK_INTEQ(wins, 1);
    RL_CHECK_INTEQ(refused, CONCURRENT - 1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM approvals WHERE run_id = "
                            "'%s'",
                            run[1]),
                   1);
    RL_CHECK_INTEQ(outbox_rows(&t, run[1]), 2);

    /* Reject: failed, never published, no later approval. */
    RL_CHECK_INTEQ(decide(&t, "reject", run[2], digest[2], "alice"), 0);
    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT status || '/' || error_class FROM runs "
                             "WHERE run_id = '%s'",
                             run[2]),
                   "failed/rejected");
    RL_CHECK_INTEQ(decide(&t, "approve", run[2], digest[2], "alice"), 3);
    RL_CHECK_INTEQ(outbox_rows(&t, run[2]), 0);

    /* Crash between approval and publication. */
    RL_CHECK_INTEQ(decide(&t, "approve", run[3], digest[3], "alice"), 0);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox"), 6);
    relay = fx_spawn(&t, "relay", "RUNLEDGER_RELAY_BATCH=4",
                     "RL_FAILPOINTS=relay_after_produce=crash", NULL);
    status = e2e_wait_exit(&t, relay, 60000);
    RL_CHECK(status != -1 && WIFSIGNALED(status));
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM outbox") > 0);
    fx_spawn(&t, "relay", NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 0, 60000, "SELECT count(*) FROM outbox") == 1);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   PLAIN * 2 + 6);

    for (long i = 0; i < notes.total && i < MAX_NOTES; i++)
        free(notes.list[i].payload);
    memset(&notes, 0, sizeof(notes));
    e2e_read_topic(&t, t.notify, on_note, &notes);
    RL_REQUIRE(notes.total <= MAX_NOTES);
    for (long i = 0; i < notes.total; i++) {
        struct note *n = &notes.list[i];
        int first = 1;

        for (long k = 0; k < i; k++) {
            if (strcmp(notes.list[k].key, n->key) == 0) {
                first = 0;
                mismatched += strcmp(notes.list[k].payload, n->payload) != 0;
                break;
            }
        }
        distinct += first;
        rejected_notes += strncmp(n->key, run[2], RL_HEX_SIZE - 1) == 0;
        if (first && strncmp(n->key, run[3], RL_HEX_SIZE - 1) == 0)
            RL_CHECK_INTEQ(
                e2e_intf(&t,
                         "SELECT count(*) FROM outbox_delivered d JOIN runs r "
                         "USING (run_id) WHERE d.run_id || ':' || d.channel "
                         "= '%s' AND rl_payload_as_sent(d.run_id, "
                         "d.channel, d.explicit_payload) -> 'output' = "
                         "r.proposal -> 'content'",
                         n->key),
                1);
    }
    RL_CHECK_INTEQ(distinct, PLAIN * 2 + 6);
    RL_CHECK_INTEQ(mismatched, 0);
    RL_CHECK_INTEQ(rejected_notes, 0);
    RL_CHECK(notes.total > distinct); /* the crashed batch went out twice */
    fprintf(stderr,
            "approval: %d waiting, 2 refusals + 1 approval + 1 repeat refused, "
            "%d concurrent approvals -> %d win, 1 rejected; outbox rows %d, "
            "notifications %ld, distinct keys %ld\n",
            WAITING, CONCURRENT, wins, PLAIN * 2 + 6, notes.total, distinct);
    for (long i = 0; i < notes.total && i < MAX_NOTES; i++)
        free(notes.list[i].payload);
    e2e_teardown(&t);
    RL_TEST_END();
}
