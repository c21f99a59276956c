/* `runs retry --attempts N` revives a run whose attempts ran out, through
 * a running consumer, the real broker, PostgreSQL and the stub model.
 *
 * With RUNLEDGER_MAX_ATTEMPTS=2, a run whose first three calls get a 500
 * fails attempts_exhausted after two. `runs retry RUN --attempts 2` gives
 * it two more: the third call fails again and the fourth completes it,
 * with four attempt rows numbered 1 to 4 and one notification per
 * channel. Before the fix the retried run failed again at its next claim,
 * without a call. */
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "rl/runid.h"
#include "rltest.h"

static char out[1 << 16], err[8192];

int
main(void)
{
    struct e2e t;
    char a[RL_HEX_SIZE], job[160];
    const char *consume_args[] = {"consume", NULL};
    int slot, rc;

    e2e_setup(&t, "opsretryattempts", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    {
        const char *env[] = {"RUNLEDGER_MAX_ATTEMPTS=2",
                             "RUNLEDGER_BACKOFF_BASE_MS=50",
                             "RUNLEDGER_BACKOFF_MAX_MS=200",
                             "RUNLEDGER_RELAY_INTERVAL_MS=50", NULL};

        slot = ops_spawn(&t, consume_args, env);
    }
    e2e_produce_event(&t, job, "tenant-r", 0, "[[fault:500 times=3]]", a);
    e2e_flush(&t);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT count(*) FROM runs WHERE run_id = '%s'"
                             " AND status = 'failed'"
                             " AND error_class = 'attempts_exhausted'",
                             a));
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT count(*) FROM attempts WHERE run_id = '%s'", a),
        2);

    {
        const char *args[] = {"runs", "retry",   a,       "--attempts",
                              "2",    "--actor", "alice", NULL};

        rc = ops_run(&t, args, NULL, NULL, out, sizeof(out), err, sizeof(err));
        if (rc != 0)
            fprintf(stderr, "%s%s", out, err);
        RL_CHECK_INTEQ(rc, 0);
    }
    RL_CHECK(e2e_wait_completed_and_delivered(&t, job, 1));
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts WHERE run_id = "
                            "'%s' AND attempt_no BETWEEN 1 AND 4",
                            a),
                   4);
    RL_CHECK_INTEQ(e2e_count_with_header(&t, t.notify, "run_id", a), 2);
    {
        const char *args[] = {"runs", "retry", a, "--attempts", "0", NULL};

        RL_CHECK_INTEQ(
            ops_run(&t, args, NULL, NULL, out, sizeof(out), err, sizeof(err)),
            2);
    }

    RL_CHECK(e2e_stop(&t, slot, 30000));
    e2e_teardown(&t);
    RL_TEST_END();
}
