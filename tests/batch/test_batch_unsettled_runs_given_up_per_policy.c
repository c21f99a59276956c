/* The pass over the runs no line named ends when their writes keep
 * failing: it is counted in the batch's failures like a failed poll or
 * read, tried again, logged once, and at the 5th failure given up: the
 * runs are sent live (their lease handed back, their line go_live) and
 * the batch ends failed with the reason in its detail.
 *
 * An endpoint without the batch API (uploads refused: 404 under the
 * stub's /v2 path) refuses the batch of 3 runs of a job with
 * --on-expiry live, so no line names any run; every write of a run's
 * policy in that pass fails (failpoint batch_unanswered_write=error).
 * Before, the pass was tried again every 2 s for ever, the batch never
 * ended and its runs stayed held by it. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#define RUNS 3

/* Lines of the log of slot holding text. */
static int
log_lines(const struct e2e *t, int slot, const char *text)
{
    char path[sizeof(t->name) + 32], line[4096];
    FILE *f;
    int n = 0;

    snprintf(path, sizeof(path), "%s.%d.log", t->name, slot);
    f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, text) != NULL;
    fclose(f);
    return n;
}

int
main(void)
{
    struct e2e t;
    char ids[RUNS][RL_HEX_SIZE], job[160], url[300];
    size_t len;
    int slot;

    e2e_setup(&t, "batchunsettled", 1);
    e2e_stub_start(&t, NULL);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "300ms", "--on-expiry", "live", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, ids[i]);
    e2e_flush(&t);
    len = strlen(t.stub_url);
    RL_REQUIRE(len > 3 && strcmp(t.stub_url + len - 3, "/v1") == 0);
    snprintf(url, sizeof(url), "MODEL_BASE_URL=%.*s/v2", (int)(len - 3),
             t.stub_url);
    slot =
        bt_spawn(&t, url, "RL_FAILPOINTS=batch_unanswered_write=error", NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 90000,
                             "SELECT count(*) FROM batches WHERE "
                             "finished_at IS NOT NULL"));
    RL_CHECK_STREQ(e2e_text(&t, "SELECT state || '/' || failures || '/' || "
                                "(detail LIKE 'given up: settling the runs "
                                "no line named: %') || '/' || lines_failed "
                                "FROM batches"),
                   "failed/5/true/3");
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batch_runs WHERE state "
                               "= 'go_live'"),
                   RUNS);
    /* Sent live, each run ends: here the endpoint refuses the live call
     * too (404 under /v2), so it fails as a live refusal does. */
    RL_REQUIRE(fx_settled(&t, 60000));
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE lock_owner "
                               "IS NOT NULL"),
                   0);
    for (int i = 0; i < RUNS; i++)
        RL_CHECK_STREQ(e2e_textf(&t,
                                 "SELECT status FROM runs WHERE run_id = '%s'",
                                 ids[i]),
                       "failed");
    /* Logged at the first failure and when given up, not at every try. */
    RL_CHECK_INTEQ(log_lines(&t, slot, "settling the runs no line named"), 2);
    e2e_teardown(&t);
    RL_TEST_END();
}
