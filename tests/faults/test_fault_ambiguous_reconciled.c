/* Ambiguous calls against an endpoint that keeps a record of what it
 * answered (RUNLEDGER_MODEL_STORED_COMPLETIONS=true, the stub's stored
 * completions, visible STUB_STORE_LAG_MS after they were made).
 *
 * Four ambiguous runs: a reply cut mid-body (every time), a hang past the
 * timeout, an answer slower than the timeout (so it is stored 1 s after
 * the call gave up) and a reset after the request went out; and a plain
 * run behind them in the same partition.
 *
 * Built twice (CMake defines FOUND):
 * - FOUND=1: the record shows each answer 2 s after it was made, within
 *   the settle window (8 s). Each ambiguous attempt is looked up, found
 *   and adopted: the run completes once with its one attempt (outcome ok,
 *   reconciled_at and reconciled_from set, the usage the record names),
 *   and the stub counted exactly one generation for it. Without the
 *   lookup, retry_once would have made a second generation for each, and
 *   the always-cut run would be unknown. The plain run completes while
 *   the others are still looked up. /metrics counts 4 found, the plain
 *   run's one generation and the adopted answers' tokens; `runs show` says
 *   which attempt was read back.
 * - FOUND=0: the record shows nothing within the settle window (1 s, lag
 *   60 s): the existing policy (retry_once) applies as before: the
 *   always-cut run is unknown after 2 attempts and 2 generations, the
 *   others complete on their second attempt with 2 generations; /metrics
 *   counts the 5 lookups that came to nothing and none found. */
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
    char cut[RL_HEX_SIZE], hang[RL_HEX_SIZE], late[RL_HEX_SIZE];
    char reset[RL_HEX_SIZE], plain[RL_HEX_SIZE];
    char job[160], http[64];
    const char *runs[4];
    double found, missed;
    int port;
    const char *const stub_found[] = {"STUB_STORE_LAG_MS=2000", NULL};
    const char *const stub_late[] = {"STUB_STORE_LAG_MS=60000", NULL};

    e2e_setup(&t, FOUND ? "frecf" : "frecn", 1);
    e2e_stub_start(&t, FOUND ? stub_found : stub_late);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0, "[[fault:close_mid_body]]", cut);
    e2e_produce_event(&t, job, "tenant-a", 1, "[[fault:hang times=1]]", hang);
    e2e_produce_event(&t, job, "tenant-a", 2,
                      "[[fault:latency ms=2500 times=1]]", late);
    e2e_produce_event(&t, job, "tenant-a", 3, "[[fault:reset times=1]]", reset);
    e2e_produce_event(&t, job, "tenant-a", 4, NULL, plain);
    e2e_flush(&t);
    runs[0] = cut;
    runs[1] = hang;
    runs[2] = late;
    runs[3] = reset;
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
    fx_check_completed_once(&t, plain);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, plain), 1);

    if (FOUND) {
        for (int i = 0; i < 4; i++) {
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
            /* The stored answer is the output: it carries the id of the
             * generation the record holds. */
            RL_CHECK_INTEQ(e2e_intf(&t,
                                    "SELECT count(*) FROM runs r JOIN "
                                    "attempts a USING (run_id) WHERE "
                                    "r.run_id='%s' AND "
                                    "r.output->>'upstream_request_id' = "
                                    "a.reconciled_from",
                                    runs[i]),
                           1);
        }
        /* The lookups wait where calls wait: the plain run completed
         * while they were still looking. */
        RL_CHECK_INTEQ(e2e_intf(&t,
                                "SELECT count(*) FROM runs p WHERE "
                                "p.run_id='%s' AND p.completed_at < (SELECT "
                                "min(completed_at) FROM runs WHERE run_id IN "
                                "('%s', '%s', '%s', '%s'))",
                                plain, cut, hang, late, reset),
                       1);
        /* Lookups are GETs: they never count as a generation. */
        RL_CHECK_INTEQ(e2e_stub_stat(&t, "generations"), 5);
        RL_CHECK(found == 4);
        RL_CHECK(missed == 0);
        RL_CHECK(ops_scrape(port, "runledger_reconcile_lookups_total") >= 4);
        /* The plain run's answer is the one generation the process saw. */
        RL_CHECK(ops_scrape(port, "runledger_generations_total") == 1);
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
        for (int i = 1; i < 4; i++) {
            fx_check_completed_once(&t, runs[i]);
            RL_CHECK_INTEQ(fx_attempts(&t, runs[i], "ambiguous"), 1);
            RL_CHECK_INTEQ(fx_attempts(&t, runs[i], "*"), 2);
            RL_CHECK_INTEQ(e2e_stub_generations(&t, runs[i]), 2);
        }
        RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts WHERE "
                                   "reconciled_at IS NOT NULL"),
                       0);
        RL_CHECK(found == 0);
        RL_CHECK(missed == 5);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
