/* The Responses API end to end, through the production binary, a private
 * stub and the shared broker and PostgreSQL.
 *
 * A first consumer speaks the Responses API for model stub-1 only
 * (RUNLEDGER_MODEL_API_BY_MODEL; the default stays chat): its two runs
 * complete once each through POST /v1/responses, with the answer's
 * output_text as the output, the response id as the upstream id and its
 * usage (input_tokens, output_tokens) on the attempt; one generation each.
 * A second consumer, every reply cut mid-body (X-Stub-Fault:
 * close_mid_body on every call) and stored completions on, takes two more
 * runs: each attempt is ambiguous, the id its reply named before the cut
 * is looked up with GET /v1/responses/{id}, and the stored response is
 * adopted: one attempt, one generation, reconciled_from = that id. */
#include <stdio.h>

#include "faults.h"
#include "rl/runid.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char runs[4][RL_HEX_SIZE], job[160];
    int slot;

    e2e_setup(&t, "fresp", 1);
    e2e_stub_start(&t, NULL);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0, NULL, runs[0]);
    e2e_produce_event(&t, job, "tenant-a", 1, NULL, runs[1]);
    e2e_flush(&t);
    slot = fx_spawn(&t, "consume",
                    "RUNLEDGER_MODEL_API_BY_MODEL=other-model=chat,"
                    "stub-1=responses",
                    NULL);
    RL_REQUIRE(fx_settled(&t, 30000));
    RL_CHECK(e2e_stop(&t, slot, 20000));
    for (int i = 0; i < 2; i++) {
        fx_check_completed_once(&t, runs[i]);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, runs[i]), 1);
        RL_CHECK_INTEQ(fx_attempts(&t, runs[i], "ok"), 1);
        RL_CHECK_INTEQ(e2e_intf(&t,
                                "SELECT count(*) FROM runs r JOIN attempts a "
                                "USING (run_id) WHERE r.run_id='%s' AND "
                                "r.output->>'text' LIKE 'Stub model "
                                "response %%' AND "
                                "r.output->>'upstream_request_id' LIKE "
                                "'resp\\_%%' AND a.upstream_request_id = "
                                "r.output->>'upstream_request_id' AND "
                                "a.prompt_tokens > 0 AND "
                                "a.completion_tokens > 0 AND "
                                "a.reconciled_at IS NULL",
                                runs[i]),
                       1);
    }

    e2e_produce_event(&t, job, "tenant-a", 2, NULL, runs[2]);
    e2e_produce_event(&t, job, "tenant-a", 3, NULL, runs[3]);
    e2e_flush(&t);
    fx_spawn(&t, "consume", "RUNLEDGER_MODEL_API=responses",
             "RUNLEDGER_MODEL_STORED_COMPLETIONS=true",
             "RUNLEDGER_MODEL_HEADERS=X-Stub-Fault: close_mid_body",
             "RUNLEDGER_RECONCILE_SETTLE_MS=5000", NULL);
    RL_REQUIRE(fx_settled(&t, 30000));
    for (int i = 2; i < 4; i++) {
        fx_check_completed_once(&t, runs[i]);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, runs[i]), 1);
        RL_CHECK_INTEQ(fx_attempts(&t, runs[i], "*"), 1);
        RL_CHECK_INTEQ(e2e_intf(&t,
                                "SELECT count(*) FROM runs r JOIN attempts a "
                                "USING (run_id) WHERE r.run_id='%s' AND "
                                "a.outcome = 'ok' AND a.reconciled_from LIKE "
                                "'resp\\_%%' AND a.reconciled_from = "
                                "r.output->>'upstream_request_id' AND "
                                "r.output->>'text' LIKE 'Stub model "
                                "response %%' AND a.prompt_tokens > 0",
                                runs[i]),
                       1);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
