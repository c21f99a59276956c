/* Recovery reads every page of the provider's lists: a worker killed with
 * its request file uploaded (STAGE=0, failpoint batch_after_upload) or its
 * batch created (STAGE=1, batch_after_create) before the provider's id
 * reached the ledger; then five other clients' files and batches come
 * after it at the provider (newest first, two a page: STUB_LIST_PAGE_MAX),
 * so what the worker made sits on the third page. A second worker
 * finds it there and adopts it: the stub saw one upload (STAGE=0) or one
 * create (STAGE=1) of the worker's, it read three pages or more of the
 * list, and every run completed once, one generation each. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#ifndef STAGE
#error "define STAGE"
#endif

#define RUNS 10
#define OTHERS 5

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    char job[160], name[64], id[128], file[128];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0.5",
                                    "STUB_LIST_PAGE_MAX=2", NULL};
    cJSON *stats;
    const cJSON *pages;
    int slot;

    e2e_setup(&t, STAGE ? "batchpagecreate" : "batchpageupload", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "10", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, ids[i]);
    e2e_flush(&t);
    slot = bt_spawn(&t,
                    STAGE ? "RL_FAILPOINTS=batch_after_create=crash@1"
                          : "RL_FAILPOINTS=batch_after_upload=crash@1",
                    NULL);
    RL_REQUIRE(e2e_wait_exit(&t, slot, 60000) != -1);
    RL_CHECK_INTEQ(e2e_int(&t, STAGE ? "SELECT count(*) FROM batches WHERE "
                                       "create_tries = 1 AND "
                                       "provider_batch_id IS NULL"
                                     : "SELECT count(*) FROM batches WHERE "
                                       "upload_tries = 1 AND "
                                       "input_file_id IS NULL"),
                   1);
    /* Other clients of the provider, after the worker. */
    for (int k = 0; k < OTHERS; k++) {
        snprintf(name, sizeof(name), "other-%d.jsonl", k);
        RL_REQUIRE(bt_stub_upload(&t, name, "", file, sizeof(file)) == 0);
        if (STAGE) {
            snprintf(name, sizeof(name), "rlb_other%d", k);
            RL_REQUIRE(bt_stub_create_batch(&t, file, name, id, sizeof(id)) ==
                       0);
        }
    }
    bt_spawn(&t, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 90000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    /* The worker's own: one upload, one create; the others' besides. */
    RL_CHECK_INTEQ(bt_stub_stat(&t, "uploads"), 1 + OTHERS);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"),
                   1 + (STAGE ? OTHERS : 0));
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    RL_CHECK_STREQ(e2e_text(&t, "SELECT state || '/' || upload_tries || '/' "
                                "|| create_tries || '/' || lines_ok FROM "
                                "batches"),
                   "completed/1/1/10");
    stats = bt_stub_stats(&t);
    RL_REQUIRE(stats != NULL);
    pages = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(stats, "list_pages"),
        STAGE ? "batches" : "files");
    RL_CHECK(cJSON_IsNumber(pages) && pages->valuedouble >= 3);
    cJSON_Delete(stats);
    bt_check_answered_once(&t, ids, RUNS);
    e2e_teardown(&t);
    RL_TEST_END();
}
