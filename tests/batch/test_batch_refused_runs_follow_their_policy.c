/* An endpoint without the batch API: every upload of the batch's request
 * file is refused (404 under the stub's /v2 path). After three refusals
 * the batch ends failed and its runs follow --on-expiry (here fail):
 * failed with error_class batch_refused, one attempt each, nothing
 * generated, no batch created, and no run left waiting. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#define RUNS 3

int
main(void)
{
    struct e2e t;
    char ids[RUNS][RL_HEX_SIZE], job[160], url[300];
    size_t len;

    e2e_setup(&t, "batchrefused", 1);
    e2e_stub_start(&t, NULL);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "300ms", "--on-expiry", "fail", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, ids[i]);
    e2e_flush(&t);
    len = strlen(t.stub_url);
    RL_REQUIRE(len > 3 && strcmp(t.stub_url + len - 3, "/v1") == 0);
    snprintf(url, sizeof(url), "MODEL_BASE_URL=%.*s/v2", (int)(len - 3),
             t.stub_url);
    bt_spawn(&t, url, NULL);
    RL_REQUIRE(fx_settled(&t, 60000));

    for (int i = 0; i < RUNS; i++) {
        RL_CHECK_STREQ(e2e_textf(&t,
                                 "SELECT status || '/' || error_class FROM "
                                 "runs WHERE run_id = '%s' AND output IS "
                                 "NULL",
                                 ids[i]),
                       "failed/batch_refused");
        RL_CHECK_INTEQ(fx_attempts(&t, ids[i], "transient"), 1);
        RL_CHECK_INTEQ(fx_attempts(&t, ids[i], "*"), 1);
    }
    RL_CHECK_STREQ(e2e_text(&t, "SELECT state || '/' || upload_tries || '/' "
                                "|| provider_status || '/' || lines_failed "
                                "FROM batches"),
                   "failed/3/refused/3");
    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), 0);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
