/* A run the batcher fails is dead-lettered once, also when the
 * transaction that failed it (the line's fence) is rolled back and the
 * line acted on again: the dead letter goes out only with the commit.
 *
 * A job with --on-expiry fail whose batch expires at the stub
 * ([[fault:batch_expire]]): each of its 3 runs is failed (batch_expired)
 * by its error line. The first fence that fails a run fails after the
 * run's update (failpoint batch_after_fail_run=error@1) and is rolled
 * back; the read is counted as a failure, the batch read again later and
 * that run failed again. On the topic, read from its start by a
 * read_committed consumer: exactly one dead letter per run, three in
 * all; /metrics counts three acknowledged. Before, the rolled-back
 * fence's dead letter had been produced already: the run had two. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "batch_test.h"
#include "faults.h"
#include "ops.h"
#include "rltest.h"

#define RUNS 3

int
main(void)
{
    struct e2e t;
    char ids[RUNS][RL_HEX_SIZE], job[160], http[64];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0.5", NULL};
    int port = ops_free_port();
    int slot;

    e2e_setup(&t, "batchdlqonce", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "fail-%s", t.name);
    bt_batch_set(&t, job, "--window", "500ms", "--on-expiry", "fail", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, "[[fault:batch_expire]]",
                          ids[i]);
    e2e_flush(&t);
    snprintf(http, sizeof(http), "RUNLEDGER_HTTP_PORT=%d", port);
    slot =
        bt_spawn(&t, http, "RL_FAILPOINTS=batch_after_fail_run=error@1", NULL);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 90000,
                             "SELECT count(*) FROM runs WHERE job = '%s' AND "
                             "status = 'failed'",
                             job));
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT count(*) FROM batches WHERE state = "
                             "'expired' AND finished_at IS NOT NULL"));
    RL_REQUIRE(fx_settled(&t, 60000));
    /* The rolled-back fence happened: the read failed once, was counted,
     * and the batch was read again. */
    RL_CHECK(e2e_log_has(&t, slot, "failpoint batch_after_fail_run fired"));
    RL_CHECK(e2e_int(&t, "SELECT failures FROM batches") >= 1);

    /* The last fence's dead letters acknowledged (the broker has them)
     * before the topic is read. */
    for (int64_t until = rltest_now_ms() + 30000;
         ops_scrape(port, "runledger_dead_letters_total{reason="
                          "\"batch_expired\"}") < RUNS &&
         rltest_now_ms() < until;) {
        struct timespec ts = {0, 100000000L};

        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < RUNS; i++) {
        RL_CHECK_STREQ(e2e_textf(&t,
                                 "SELECT status || '/' || error_class FROM "
                                 "runs WHERE run_id = '%s'",
                                 ids[i]),
                       "failed/batch_expired");
        RL_CHECK_INTEQ(fx_dead_letters(&t, "batch_expired", ids[i]), 1);
    }
    RL_CHECK_INTEQ(fx_dead_letters_now(&t, NULL, NULL), RUNS);
    RL_CHECK(ops_scrape(port, "runledger_dead_letters_total{reason="
                              "\"batch_expired\"}") == RUNS);
    RL_CHECK_STREQ(e2e_text(&t, "SELECT state || '/' || lines_failed FROM "
                                "batches"),
                   "expired/3");
    e2e_teardown(&t);
    RL_TEST_END();
}
