/* A partition the ledger has no consumed position of, read by a consumer
 * that registered nothing of it (restarted), is read again only when the
 * group committed events that came after the ledger began keeping
 * positions (positions_kept): those were registered once, with the row,
 * and the ledger lost them.
 *
 * Ten events on two partitions complete and their offsets are committed;
 * the consumer stops. The ledger is then emptied of its runs and consumed
 * positions, as a failover to a standby that had received none of them
 * leaves it. First the ledger says it keeps positions since after those
 * events (a ledger that kept nothing of them: an upgrade from before
 * consumed positions): a new consumer reads nothing again, and says so
 * for each partition the events are on. Then it says since before them:
 * a new consumer reads those partitions again and all ten runs complete. Fails
 * on a consumer that takes a missing row for no information either way. */
#include <stdio.h>
#include <time.h>

#include "faults.h"
#include "rltest.h"

#define RUNS 10

/* The partitions the events went to (their keys decide), as a bit set. */
static int read_parts;

static int
said_for_each(struct e2e *t, int slot, const char *what)
{
    char text[200];
    int each = 1;

    for (int p = 0; p < 2 && each; p++) {
        if (!(read_parts & (1 << p)))
            continue;
        snprintf(text, sizeof(text),
                 "partition %d has no consumed position in the ledger%s", p,
                 what);
        each = e2e_log_has(t, slot, text);
    }
    return each;
}

static int
wait_said(struct e2e *t, int slot, const char *what, long timeout_ms)
{
    for (int64_t end = rltest_now_ms() + timeout_ms; rltest_now_ms() < end;) {
        struct timespec ts = {0, 50 * 1000000L};

        if (said_for_each(t, slot, what))
            return 1;
        nanosleep(&ts, NULL);
    }
    return said_for_each(t, slot, what);
}

static void
empty_ledger(struct e2e *t)
{
    e2e_int(t, "TRUNCATE runs, consumed_positions CASCADE");
    RL_REQUIRE(e2e_int(t, "SELECT count(*) FROM runs") == 0);
    RL_REQUIRE(e2e_int(t, "SELECT count(*) FROM consumed_positions") == 0);
}

int
main(void)
{
    struct e2e t;
    char job[160];
    int slot;

    e2e_setup(&t, "fkept", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, i % 2 ? "tenant-a" : "tenant-b", i, NULL,
                          NULL);
    e2e_flush(&t);
    slot = fx_spawn(&t, "consume", NULL);
    RL_REQUIRE(fx_settled(&t, 60000));
    RL_REQUIRE(e2e_group_lag(&t) == 0);
    RL_REQUIRE(e2e_stop(&t, slot, 30000));
    read_parts = (int)e2e_int(&t, "SELECT coalesce(sum(DISTINCT 1 << "
                                  "partition), 0) FROM consumed_positions");
    RL_REQUIRE(read_parts > 0);

    /* Kept since after the events: nothing the group committed is the
     * ledger's to have lost. */
    empty_ledger(&t);
    RL_REQUIRE(e2e_int(&t, "WITH u AS (UPDATE positions_kept SET since = "
                           "now() + interval '1 minute' RETURNING 1) "
                           "SELECT count(*) FROM u") == 1);
    slot = fx_spawn(&t, "consume", NULL);
    RL_CHECK(wait_said(&t, slot, ", and no event the group committed", 30000));
    RL_CHECK(!said_for_each(&t, slot, ", but the group committed"));
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), 0);
    RL_REQUIRE(e2e_stop(&t, slot, 30000));

    /* Kept since before them: the ledger registered them once and lost
     * them; their partitions are read again from their first event. */
    RL_REQUIRE(e2e_int(&t, "WITH u AS (UPDATE positions_kept SET since = "
                           "now() - interval '1 hour' RETURNING 1) "
                           "SELECT count(*) FROM u") == 1);
    slot = fx_spawn(&t, "consume", NULL);
    RL_CHECK(wait_said(&t, slot, ", but the group committed", 30000));
    RL_CHECK(e2e_wait_completed(&t, job, RUNS, 60000));
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT coalesce(sum(DISTINCT 1 << "
                               "partition), 0) FROM consumed_positions"),
                   read_parts);
    e2e_teardown(&t);
    RL_TEST_END();
}
