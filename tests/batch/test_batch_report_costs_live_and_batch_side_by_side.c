/* `runledger prices` and `report --cost`: a live job and a batch-mode job
 * on one model, priced at 2 (input) and 8 (output) per million tokens with
 * a batch discount of 0.5. The report shows each side's tokens as the
 * ledger's attempts hold them, the live cost at the full price, the batch
 * cost at half of what the same tokens would have cost live, and what the
 * batches saved. prices refuses bad input with exit 2 and a missing price
 * on remove with exit 3. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "ops.h"
#include "rltest.h"

#define RUNS 4

static char out[65536], err[8192];

static int
cli(struct e2e *t, const char *const *args)
{
    return ops_run(t, args, NULL, NULL, out, sizeof(out), err, sizeof(err));
}

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
    char jl[160], jb[160];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0.3", NULL};
    int64_t lin, lout, bin, bout;
    cJSON *rows;
    const cJSON *row;

    e2e_setup(&t, "batchcost", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(jl, sizeof(jl), "live-%s", t.name);
    snprintf(jb, sizeof(jb), "batch-%s", t.name);
    bt_batch_set(&t, jb, "--window", "300ms", NULL);
    {
        const char *a[] = {"prices",           "set", "--model",  "stub-1",
                           "--input",          "2",   "--output", "8",
                           "--batch-discount", "0.5", NULL};
        RL_REQUIRE(cli(&t, a) == 0);
    }
    {
        const char *a[] = {"prices", "set",      "--model", "stub-1", "--input",
                           "-1",     "--output", "8",       NULL};
        RL_CHECK(cli(&t, a) == 2);
    }
    {
        const char *a[] = {"prices",           "set", "--model",  "stub-1",
                           "--input",          "2",   "--output", "8",
                           "--batch-discount", "1.5", NULL};
        RL_CHECK(cli(&t, a) == 2);
    }
    {
        const char *a[] = {"prices", "remove", "--model", "other", NULL};
        RL_CHECK(cli(&t, a) == 3);
    }
    {
        const char *a[] = {"prices", "show", NULL};
        RL_CHECK(cli(&t, a) == 0);
        RL_CHECK(strstr(out, "stub-1") != NULL);
    }
    for (int i = 0; i < RUNS; i++) {
        e2e_produce_event(&t, jl, "tenant-a", i, NULL, NULL);
        e2e_produce_event(&t, jb, "tenant-a", i, NULL, NULL);
    }
    e2e_flush(&t);
    bt_spawn(&t, NULL);
    RL_REQUIRE(fx_settled(&t, 60000));
    RL_REQUIRE(e2e_int(&t, "SELECT count(*) FROM runs WHERE status = "
                           "'completed'") == 2 * RUNS);
    RL_REQUIRE(e2e_int(&t, "SELECT count(*) FROM batch_runs WHERE state = "
                           "'completed'") == RUNS);

    lin = e2e_intf(&t,
                   "SELECT sum(prompt_tokens) FROM attempts a JOIN runs r "
                   "USING (run_id) WHERE r.job = '%s'",
                   jl);
    lout = e2e_intf(&t,
                    "SELECT sum(completion_tokens) FROM attempts a JOIN runs "
                    "r USING (run_id) WHERE r.job = '%s'",
                    jl);
    bin = e2e_intf(&t,
                   "SELECT sum(prompt_tokens) FROM attempts a JOIN runs r "
                   "USING (run_id) WHERE r.job = '%s'",
                   jb);
    bout = e2e_intf(&t,
                    "SELECT sum(completion_tokens) FROM attempts a JOIN runs "
                    "r USING (run_id) WHERE r.job = '%s'",
                    jb);
    RL_REQUIRE(lin > 0 && lout > 0 && bin > 0 && bout > 0);

    {
        const char *a[] = {"report", "--since", "2026-01-01T00:00:00Z",
                           "--cost", "--json",  NULL};
        RL_REQUIRE(cli(&t, a) == 0);
    }
    rows = cJSON_Parse(out);
    RL_REQUIRE(cJSON_GetArraySize(rows) == 1);
    row = cJSON_GetArrayItem(rows, 0);
    RL_CHECK_STREQ(cJSON_GetObjectItem(row, "model")->valuestring, "stub-1");
    RL_CHECK(num(row, "live_prompt_tokens") == (double)lin);
    RL_CHECK(num(row, "live_completion_tokens") == (double)lout);
    RL_CHECK(num(row, "batch_prompt_tokens") == (double)bin);
    RL_CHECK(num(row, "batch_completion_tokens") == (double)bout);
    {
        double live = ((double)lin * 2 + (double)lout * 8) / 1e6;
        double at_live = ((double)bin * 2 + (double)bout * 8) / 1e6;

        RL_CHECK(num(row, "live_cost") > live - 1e-6 &&
                 num(row, "live_cost") < live + 1e-6);
        RL_CHECK(num(row, "batch_at_live_price") > at_live - 1e-6 &&
                 num(row, "batch_at_live_price") < at_live + 1e-6);
        RL_CHECK(num(row, "batch_cost") > at_live / 2 - 1e-6 &&
                 num(row, "batch_cost") < at_live / 2 + 1e-6);
        RL_CHECK(num(row, "saved") > at_live / 2 - 1e-6 &&
                 num(row, "saved") < at_live / 2 + 1e-6);
    }
    cJSON_Delete(rows);
    {
        const char *a[] = {"report", "--since", "2026-01-01T00:00:00Z",
                           "--cost", NULL};
        RL_CHECK(cli(&t, a) == 0);
        RL_CHECK(strstr(out, "BATCH_COST") != NULL);
        RL_CHECK(strstr(out, "stub-1") != NULL);
    }
    {
        const char *a[] = {"prices", "remove", "--model", "stub-1", NULL};
        RL_CHECK(cli(&t, a) == 0);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
