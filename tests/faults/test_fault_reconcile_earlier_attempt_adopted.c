/* An earlier ambiguous attempt's generation is adopted by a later lookup.
 *
 * Attempt 1 generates and its reply is cut mid-body; the endpoint's record
 * shows it only 5 s later (STUB_STORE_LAG_MS), after attempt 1's settle
 * window (3 s), so retry_once sends attempt 2. Attempt 2 is dropped before
 * the upstream sees it ([[fault:close_mid_body times=1 then=drop]]):
 * ambiguous again, and never generated. Its lookup searches every
 * ambiguous attempt of the run, and within its window attempt 1's record
 * shows: adopted as the answer (recorded under attempt 2, whose outcome
 * was open, reconciled_attempt 1), so the run completes with the one
 * generation it had; looking up attempt 2 alone, the run would be unknown
 * (two ambiguous attempts under retry_once) with a paid answer in the
 * record. */
#include <stdio.h>

#include "faults.h"
#include "ops.h"
#include "rl/runid.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char run[RL_HEX_SIZE], job[160], http[64];
    const char *const stub_env[] = {"STUB_STORE_LAG_MS=5000", NULL};
    int port;

    e2e_setup(&t, "frear", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0,
                      "[[fault:close_mid_body times=1 then=drop]]", run);
    e2e_flush(&t);
    port = ops_free_port();
    snprintf(http, sizeof(http), "RUNLEDGER_HTTP_PORT=%d", port);
    fx_spawn(&t, "consume", "RUNLEDGER_AMBIGUOUS_POLICY=retry_once",
             "RUNLEDGER_MODEL_STORED_COMPLETIONS=true",
             "RUNLEDGER_RECONCILE_SETTLE_MS=3000",
             "RUNLEDGER_RECONCILE_LOOKUP_TIMEOUT_MS=2000", http, NULL);
    RL_REQUIRE(fx_settled(&t, 60000));

    fx_check_completed_once(&t, run);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, run), 1);
    RL_CHECK_INTEQ(e2e_stub_stat(&t, "generations"), 1);
    RL_CHECK_INTEQ(fx_attempts(&t, run, "*"), 2);
    RL_CHECK_INTEQ(fx_attempts(&t, run, "ambiguous"), 1);
    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT attempt_no || '/' || reconciled_from || "
                             "'/' || reconciled_attempt || '/' || "
                             "reconciled_generations FROM attempts WHERE "
                             "run_id='%s' AND outcome = 'ok'",
                             run),
                   "2/chatcmpl-1/1/1");
    RL_CHECK(ops_scrape(port, "runledger_reconciled_attempts_total{result="
                              "\"found\"}") == 1);
    RL_CHECK(ops_scrape(port, "runledger_reconciled_attempts_total{result="
                              "\"not_found\"}") == 1);
    e2e_teardown(&t);
    RL_TEST_END();
}
