/* Two generations under one attempt are both counted.
 *
 * A gateway between Runledger and the provider re-sends the request
 * upstream, then the reply is cut mid-body ([[fault:close_mid_body
 * generations=2]]): the endpoint generated twice for attempt 1 and stores
 * both, each with the attempt's metadata. The lookup finds two records:
 * the earliest (the stub's first generation, chatcmpl-1) is adopted as
 * the answer, deterministically, and both are counted: the attempt says 2
 * generations and is charged with the usage of both (the budget and
 * runledger_tokens_total see it), and
 * runledger_reconciled_generations_total counts 2. The run completes once
 * with one attempt and nothing sent again. */
#include <stdio.h>
#include <string.h>

#include "faults.h"
#include "ops.h"
#include "rl/runid.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char run[RL_HEX_SIZE], job[160];
    const char *const stub_env[] = {"STUB_STORE_LAG_MS=500", NULL};
    int port;

    e2e_setup(&t, "frtwo", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0,
                      "[[fault:close_mid_body generations=2]]", run);
    e2e_flush(&t);
    port = fx_reconcile_settled(&t, 8000);

    fx_check_completed_once(&t, run);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, run), 2);
    RL_CHECK_INTEQ(fx_attempts(&t, run, "*"), 1);
    RL_CHECK_INTEQ(fx_attempts(&t, run, "ok"), 1);
    /* The earliest record adopted; both generations recorded. */
    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT reconciled_from || '/' || "
                             "reconciled_attempt || '/' || "
                             "reconciled_generations FROM attempts WHERE "
                             "run_id='%s'",
                             run),
                   "chatcmpl-1/1/2");
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id='%s' AND "
                            "output->>'upstream_request_id' = 'chatcmpl-1'",
                            run),
                   1);
    /* Charged with both: the same prompt twice, and more completion
     * tokens than the adopted answer's alone. */
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts a JOIN runs r "
                            "USING (run_id) WHERE a.run_id='%s' AND "
                            "a.prompt_tokens = 2 * (r.output->'usage'->>"
                            "'prompt_tokens')::int8 AND a.completion_tokens "
                            "> (r.output->'usage'->>'completion_tokens')::"
                            "int8",
                            run),
                   1);
    RL_CHECK(ops_scrape(port, "runledger_reconciled_attempts_total{result="
                              "\"found\"}") == 1);
    RL_CHECK(ops_scrape(port, "runledger_reconciled_generations_total") == 2);
    RL_CHECK(ops_scrape(port, "runledger_tokens_total{kind=\"prompt\"}") ==
             (double)e2e_intf(&t,
                              "SELECT prompt_tokens FROM attempts WHERE "
                              "run_id='%s'",
                              run));
    {
        const char *args[] = {"runs", "show", run, NULL};
        static char out[65536];

        RL_CHECK_INTEQ(ops_run(&t, args, NULL, NULL, out, sizeof(out), NULL, 0),
                       0);
        RL_CHECK(strstr(out, "attempt 1: answer read back from the "
                             "endpoint's record (chatcmpl-1)") != NULL);
        RL_CHECK(strstr(out, "2 generations in the record, all charged") !=
                 NULL);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
