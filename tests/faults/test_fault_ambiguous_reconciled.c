/* Ambiguous calls against an endpoint that keeps a record of what it
 * answered (RUNLEDGER_MODEL_STORED_COMPLETIONS=true, the stub's stored
 * completions, visible STUB_STORE_LAG_MS after they were made).
 *
 * Built twice (CMake defines FOUND):
 * - FOUND=1: the record shows the answer 2 s after the call, within the
 *   settle window (8 s). A reply cut mid-body (every time), a hang past
 *   the timeout and a reset are each looked up, found and adopted: the run
 *   completes once with its one attempt (outcome ok, reconciled_at and
 *   reconciled_from set, the usage the record names), and the stub counted
 *   exactly one generation for it. Without the lookup, retry_once would
 *   have made a second generation for each, and the always-cut run would
 *   be unknown. /metrics counts 3 found, no generation and the adopted
 *   answers' tokens; `runs show` says which attempt was read back.
 * - FOUND=0: the record shows nothing within the settle window (1 s, lag
 *   60 s): the existing policy (retry_once) applies as before: the
 *   always-cut run is unknown after 2 attempts and 2 generations; the hang
 *   once completes on its second attempt with 2 generations; /metrics
 *   counts the 4 lookups that came to nothing and none found. */
#include <stdio.h>
#include <string.h>

#include "faults.h"
#include "ops.h"
#include "rl/runid.h"
#include "rltest.h"

#ifndef FOUND
#error "define FOUND"
#endif

int
main(void)
{
    struct e2e t;
    char cut[RL_HEX_SIZE], hang[RL_HEX_SIZE], reset[RL_HEX_SIZE];
    char job[160], http[64];
    double found, missed;
    int port;
    const char *const stub_found[] = {"STUB_STORE_LAG_MS=2000", NULL};
    const char *const stub_late[] = {"STUB_STORE_LAG_MS=60000", NULL};

    e2e_setup(&t, FOUND ? "frecf" : "frecn", 1);
    e2e_stub_start(&t, FOUND ? stub_found : stub_late);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0, "[[fault:close_mid_body]]", cut);
    e2e_produce_event(&t, job, "tenant-a", 1, "[[fault:hang times=1]]", hang);
    e2e_produce_event(&t, job, "tenant-a", 2, "[[fault:reset times=1]]", reset);
    e2e_flush(&t);
    port = ops_free_port();
    snprintf(http, sizeof(http), "RUNLEDGER_HTTP_PORT=%d", port);
    fx_spawn(&t, "consume", "RUNLEDGER_AMBIGUOUS_POLICY=retry_once",
             "RUNLEDGER_MODEL_STORED_COMPLETIONS=true",
             FOUND ? "RUNLEDGER_RECONCILE_SETTLE_MS=8000"
                   : "RUNLEDGER_RECONCILE_SETTLE_MS=1000",
             "RUNLEDGER_RECONCILE_LOOKUP_TIMEOUT_MS=2000", http, NULL);
    RL_REQUIRE(fx_settled(&t, 60000));
    found = ops_scrape(port, "runledger_reconciled_attempts_total{result="
                             "\"found\"}");
    missed = ops_scrape(port, "runledger_reconciled_attempts_total{result="
                              "\"not_found\"}");

    if (FOUND) {
        const char *runs[] = {cut, hang, reset};

        for (int i = 0; i < 3; i++) {
            fx_check_completed_once(&t, runs[i]);
            RL_CHECK_INTEQ(e2e_stub_generations(&t, runs[i]), 1);
            RL_CHECK_INTEQ(fx_attempts(&t, runs[i], "*"), 1);
            RL_CHECK_INTEQ(fx_attempts(&t, runs[i], "ok"), 1);
            RL_CHECK_INTEQ(e2e_intf(&t,
                                    "SELECT count(*) FROM attempts WHERE "
                                    "run_id='%s' AND reconciled_at IS NOT "
                                    "NULL AND reconciled_from LIKE "
                                    "'chatcmpl-%%' AND prompt_tokens > 0 "
                                    "AND completion_tokens > 0",
                                    runs[i]),
                           1);
            /* The stored answer is the output: the generation the stub
             * made names its number, and the output carries its id. */
            RL_CHECK_INTEQ(e2e_intf(&t,
                                    "SELECT count(*) FROM runs r JOIN "
                                    "attempts a USING (run_id) WHERE "
                                    "r.run_id='%s' AND "
                                    "r.output->>'upstream_request_id' = "
                                    "a.reconciled_from",
                                    runs[i]),
                           1);
        }
        /* Lookups are GETs: they never count as a generation. */
        RL_CHECK_INTEQ(e2e_stub_stat(&t, "generations"), 3);
        RL_CHECK(found == 3);
        RL_CHECK(missed == 0);
        RL_CHECK(ops_scrape(port, "runledger_reconcile_lookups_total") >= 3);
        RL_CHECK(ops_scrape(port, "runledger_generations_total") <= 0);
        RL_CHECK(ops_scrape(port, "runledger_tokens_total{kind="
                                  "\"completion\"}") > 0);
        {
            const char *args[] = {"runs", "show", cut, NULL};
            static char out[65536];

            RL_CHECK_INTEQ(
                ops_run(&t, args, NULL, NULL, out, sizeof(out), NULL, 0), 0);
            RL_CHECK(strstr(out, "attempt 1: answer read back from the "
                                 "endpoint's record (chatcmpl-") != NULL);
        }
    } else {
        RL_CHECK_STREQ(e2e_textf(&t,
                                 "SELECT status || '/' || error_class FROM "
                                 "runs WHERE run_id='%s' AND output IS NULL",
                                 cut),
                       "unknown/ambiguous");
        RL_CHECK_INTEQ(fx_attempts(&t, cut, "ambiguous"), 2);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, cut), 2);
        fx_check_completed_once(&t, hang);
        RL_CHECK_INTEQ(fx_attempts(&t, hang, "ambiguous"), 1);
        RL_CHECK_INTEQ(fx_attempts(&t, hang, "*"), 2);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, hang), 2);
        fx_check_completed_once(&t, reset);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, reset), 2);
        RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts WHERE "
                                   "reconciled_at IS NOT NULL"),
                       0);
        RL_CHECK(found == 0);
        RL_CHECK(missed == 4);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
