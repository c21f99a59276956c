/* A run purged long after it finished is never run again when its event
 * comes back, through the real broker, PostgreSQL, the stub model and a
 * running consumer.
 *
 * Run A completes (one generation, two notifications). It is aged 40
 * days and `runledger purge --older-than 30d` removes it, with its model
 * calls, and leaves its tombstone. Its event produced again (a replay, a
 * backfill, a group reset) is acknowledged: the stub counts no new
 * generation for A, the notification topic gets nothing new for A, the
 * ledger holds no run A again, and the consumer group's offsets pass it.
 * The same run ID with another request (another fingerprint) is
 * dead-lettered as a fingerprint conflict. `runs show A` prints the
 * tombstone. Removing tombstones below the topics' retention is refused
 * without --force, and done with it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "rl/runid.h"
#include "rltest.h"

static char out[1 << 16], err[8192];

static int
lag_zero(struct e2e *t, void *opaque)
{
    (void)opaque;
    return e2e_group_lag(t) == 0;
}

static int
dead_lettered(struct e2e *t, void *opaque)
{
    return e2e_count_with_header(t, t->dlq, "run_id", opaque) >= 1;
}

/* Run a generated once, and has no run again (its tombstone holds). */
static void
still_purged(struct e2e *t, const char *a)
{
    RL_CHECK_INTEQ(e2e_stub_generations(t, a), 1);
    RL_CHECK_INTEQ(
        e2e_intf(t, "SELECT count(*) FROM runs WHERE run_id = '%s'", a), 0);
}

static int
cli(struct e2e *t, const char *const *args)
{
    int rc = ops_run(t, args, NULL, NULL, out, sizeof(out), err, sizeof(err));

    fprintf(stderr, "runledger %s %s: exit %d\n%s%s", args[0],
            args[1] ? args[1] : "", rc, out, err);
    return rc;
}

int
main(void)
{
    struct e2e t;
    char a[RL_HEX_SIZE], b[RL_HEX_SIZE], c[RL_HEX_SIZE], job[160];
    const char *consume_args[] = {"consume", NULL};
    long notified;
    int slot;

    e2e_setup(&t, "opspurgereplay", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    {
        const char *env[] = {"RUNLEDGER_RELAY_INTERVAL_MS=50", NULL};

        slot = ops_spawn(&t, consume_args, env);
    }

    e2e_produce_event(&t, job, "tenant-p", 0, NULL, a);
    e2e_flush(&t);
    RL_REQUIRE(e2e_wait_completed_and_delivered(&t, job, 1));
    RL_CHECK_INTEQ(e2e_stub_generations(&t, a), 1);
    notified = e2e_count_with_header(&t, t.notify, "run_id", a);
    RL_CHECK_INTEQ(notified, 2);
    RL_CHECK(e2e_intf(&t,
                      "SELECT count(*) FROM model_calls WHERE run_id = "
                      "'%s'",
                      a) >= 0);

    /* Months later: the run is old, and purged. */
    RL_REQUIRE(e2e_intf(&t,
                        "WITH u AS (UPDATE runs SET updated_at = now() - "
                        "interval '40 days' WHERE run_id = '%s' RETURNING 1)"
                        " SELECT count(*) FROM u",
                        a) == 1);
    {
        const char *args[] = {"purge", "--older-than", "30d", NULL};

        RL_CHECK_INTEQ(cli(&t, args), 0);
    }
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id = "
                            "'%s'",
                            a),
                   0);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM model_calls WHERE run_id "
                            "= '%s'",
                            a),
                   0);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM run_tombstones WHERE "
                            "run_id = '%s' AND final_status = 'completed'",
                            a),
                   1);

    /* The same event again, then a new one behind it on the same
     * partition: once the new one is done and the group's lag is 0, the
     * old one was read and acknowledged. */
    e2e_produce_event(&t, job, "tenant-p", 0, NULL, b);
    RL_CHECK_STREQ(a, b);
    e2e_produce_event(&t, job, "tenant-p", 1, NULL, c);
    e2e_flush(&t);
    RL_REQUIRE(e2e_wait_completed_and_delivered(&t, job, 1));
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT count(*) FROM runs WHERE run_id = '%s' "
                             "AND status = 'completed'",
                             c));
    RL_CHECK(e2e_wait(lag_zero, &t, NULL, 30000));
    still_purged(&t, a);
    RL_CHECK_INTEQ(e2e_count_with_header(&t, t.notify, "run_id", a), notified);

    /* The same run ID with another request: a conflict, dead-lettered. */
    e2e_produce_event(&t, job, "tenant-p", 0, "another request", b);
    RL_CHECK_STREQ(a, b);
    e2e_flush(&t);
    RL_CHECK(e2e_wait(dead_lettered, &t, a, 30000));
    RL_CHECK(e2e_wait(lag_zero, &t, NULL, 30000));
    RL_CHECK_INTEQ(e2e_count_with_header(&t, t.dlq, "run_id", a), 1);
    still_purged(&t, a);

    {
        const char *args[] = {"runs", "show", a, NULL};

        RL_CHECK_INTEQ(cli(&t, args), 0);
        RL_CHECK(strstr(out, "purged") != NULL);
        RL_CHECK(strstr(out, "completed") != NULL);
    }

    /* Tombstones go only when asked: refused below the topics' retention,
     * removed with --force. */
    {
        const char *args[] = {"purge", "--tombstones-older-than", "1d", NULL};

        RL_CHECK_INTEQ(cli(&t, args), 2);
        RL_CHECK(strstr(err, "floor") != NULL);
    }
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM run_tombstones"), 1);
    {
        const char *args[] = {"purge", "--tombstones-older-than", "1d",
                              "--force", NULL};

        RL_CHECK_INTEQ(cli(&t, args), 0);
    }
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM run_tombstones"), 0);

    RL_CHECK(e2e_stop(&t, slot, 30000));
    e2e_teardown(&t);
    RL_TEST_END();
}
