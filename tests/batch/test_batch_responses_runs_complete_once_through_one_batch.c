/* A batch-mode job on a model that speaks the Responses API
 * (RUNLEDGER_MODEL_API_BY_MODEL=stub-1=responses): every request line of
 * its one batch is a Responses request (url /v1/responses, its body the
 * one a live call sends: input, not messages; custom_id run:attempt), and
 * the batch is created for /v1/responses. The stub answers each line with
 * a Responses body (output items, usage.input_tokens/output_tokens), and
 * each is read by the live Responses parser and stored through the
 * guarded completion: every run completed once with one attempt (ok, its
 * tokens, the response id as the upstream id), two notifications, one
 * generation at the stub under run:1 and none live; /metrics counts the
 * generations and their tokens, and `report --cost` prices them as batch
 * tokens at the model's price. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "ops.h"
#include "rltest.h"

#define RUNS 200

static char out[65536], err[8192];

static double
num(const cJSON *row, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, name);

    if (cJSON_IsNumber(v))
        return v->valuedouble;
    if (cJSON_IsString(v))
        return strtod(v->valuestring, NULL);
    return -1;
}

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    char job[160], key[RL_HEX_SIZE + 8], http[64];
    int port = ops_free_port();
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0.5", NULL};
    int64_t pin, pout;
    cJSON *rows;
    const cJSON *row;

    e2e_setup(&t, "batchresp", 2);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    /* One batch: it fills at RUNS runs long before its window ends. */
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "200", NULL);
    {
        const char *a[] = {"prices",           "set", "--model",  "stub-1",
                           "--input",          "2",   "--output", "8",
                           "--batch-discount", "0.5", NULL};
        RL_REQUIRE(ops_run(&t, a, NULL, NULL, out, sizeof(out), err,
                           sizeof(err)) == 0);
    }
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, i % 2 ? "tenant-a" : "tenant-b", i, NULL,
                          ids[i]);
    e2e_flush(&t);
    snprintf(http, sizeof(http), "RUNLEDGER_HTTP_PORT=%d", port);
    bt_spawn(&t, http,
             "RUNLEDGER_MODEL_API_BY_MODEL=other-model=chat,stub-1=responses",
             NULL);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 90000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), 1);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    /* Every line the stub read was a Responses request for a Responses
     * batch, and none was refused for its shape. */
    RL_CHECK_INTEQ(bt_stub_stat(&t, "batch_lines_responses"), RUNS);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "batch_lines_chat"), 0);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "batch_lines_refused"), 0);
    RL_CHECK_STREQ(e2e_text(&t, "SELECT endpoint || '/' || state || '/' || "
                                "runs || '/' || lines_ok || '/' || "
                                "lines_ignored FROM batches"),
                   "/v1/responses/completed/200/200/0");
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batch_runs WHERE state "
                               "= 'completed' AND attempt_no = 1"),
                   RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), RUNS);
    /* The Responses answer, read as a live one is: the output text, the
     * response id, usage.input_tokens and output_tokens. */
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs r JOIN attempts a "
                               "USING (run_id) WHERE a.outcome = 'ok' AND "
                               "a.prompt_tokens > 0 AND "
                               "a.completion_tokens > 0 AND "
                               "r.output->>'text' LIKE 'Stub model "
                               "response %' AND "
                               "r.output->>'upstream_request_id' LIKE "
                               "'resp\\_%' AND a.upstream_request_id = "
                               "r.output->>'upstream_request_id'"),
                   RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   2 * RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE lock_owner "
                               "IS NOT NULL"),
                   0);
    RL_CHECK(ops_scrape(port, "runledger_generations_total") == RUNS);
    RL_CHECK(ops_scrape(port, "runledger_tokens_total{kind=\"completion\"}") >
             0);
    for (int i = 0; i < RUNS; i += 17) {
        fx_check_completed_once(&t, ids[i]);
        snprintf(key, sizeof(key), "%.64s:1", ids[i]);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, key), 1);
        /* Never called live (a live call is counted under the run ID). */
        RL_CHECK(e2e_stub_generations(&t, ids[i]) <= 0);
    }

    /* Priced as batch tokens at the model's price. */
    pin = e2e_int(&t, "SELECT sum(prompt_tokens) FROM attempts");
    pout = e2e_int(&t, "SELECT sum(completion_tokens) FROM attempts");
    {
        const char *a[] = {"report", "--since", "2026-01-01T00:00:00Z",
                           "--cost", "--json",  NULL};
        RL_REQUIRE(ops_run(&t, a, NULL, NULL, out, sizeof(out), err,
                           sizeof(err)) == 0);
    }
    rows = cJSON_Parse(out);
    RL_REQUIRE(cJSON_GetArraySize(rows) == 1);
    row = cJSON_GetArrayItem(rows, 0);
    RL_CHECK(num(row, "live_prompt_tokens") == 0);
    RL_CHECK(num(row, "batch_prompt_tokens") == (double)pin);
    RL_CHECK(num(row, "batch_completion_tokens") == (double)pout);
    {
        double at_live = ((double)pin * 2 + (double)pout * 8) / 1e6;

        RL_CHECK(num(row, "batch_cost") > at_live / 2 - 1e-6 &&
                 num(row, "batch_cost") < at_live / 2 + 1e-6);
    }
    cJSON_Delete(rows);
    e2e_teardown(&t);
    RL_TEST_END();
}
