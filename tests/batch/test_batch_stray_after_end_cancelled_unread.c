/* A create that reaches the provider only after the intent ended with
 * its adopted batch is cancelled before it runs, never read. The
 * ledger's first create is made at the stub but its reply is lost
 * (create_drop_reply). ADOPTED=0: the stub's list leaves it out for 3 s
 * (list_lag), longer than the 1 s the worker looks for it: the worker
 * creates again (create_tries 2), adopts the second and ends the intent
 * with it. ADOPTED=1: the worker finds it and adopts it (create_tries 1,
 * as the ledger promoted after an asynchronous failover holds an intent
 * whose second create only the old primary recorded). Then another
 * batch of the intent's local id and request file appears at the
 * provider, as a create sent with no answer does when the provider makes
 * it late (the seeded explorer's seed 1007: a create made 14.9 s after
 * it was sent, once the batch created again had been read): no poll of
 * the intent is left to find it, yet it is cancelled before the stub
 * finishes it 6 s after its create: no generation of its lines, only
 * the adopted batch read, every run completed once with one
 * generation. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#ifndef ADOPTED
#error "define ADOPTED"
#endif

#define RUNS 3
/* The creates the worker sent. */
#define CREATES (ADOPTED ? 1 : 2)

struct late {
    const char *id;
    int cancelled;
};

/* Whether the late batch is cancelled, read from /admin/batches, which
 * advances no batch (a GET of the batch would finish it at 6 s). */
static int
late_cancelled(struct e2e *t, void *opaque)
{
    struct late *l = opaque;
    cJSON *doc = bt_stub_get(t, "/admin/batches");
    const cJSON *b;

    if (!doc)
        return 0;
    cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(doc, "batches"))
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id");

        if (cJSON_IsString(id) && strcmp(id->valuestring, l->id) == 0)
            l->cancelled =
                cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "cancelled"));
    }
    cJSON_Delete(doc);
    return l->cancelled;
}

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    char job[160], adopted[128], local[96], file[128], late_id[128];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=6", NULL};
    struct late l = {late_id, 0};
    int cancelled = 0, others = 0;
    cJSON *st;

    e2e_setup(&t, "batchstrayend", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "3", NULL);
    RL_REQUIRE(bt_stub_call(&t, "POST", "/admin/batch_fault",
                            "{\"mode\":\"create_drop_reply\"}") == 200);
    if (!ADOPTED)
        RL_REQUIRE(bt_stub_call(&t, "POST", "/admin/batch_fault",
                                "{\"mode\":\"list_lag\",\"ms\":3000}") == 200);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, ids[i]);
    e2e_flush(&t);
    /* A lease long enough that the test's late create comes within it
     * after the intent's end, however loaded the machine. */
    bt_spawn(&t, "RUNLEDGER_BATCH_LEASE_SECONDS=30", NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT count(*) FROM batches WHERE state = "
                             "'completed' AND create_tries = %d",
                             CREATES));
    snprintf(local, sizeof(local), "%s",
             e2e_text(&t, "SELECT batch_id FROM batches"));
    snprintf(file, sizeof(file), "%s",
             e2e_text(&t, "SELECT input_file_id FROM batches"));
    snprintf(adopted, sizeof(adopted), "%s",
             e2e_text(&t, "SELECT provider_batch_id FROM batches"));

    /* The create that reaches the provider after the intent ended. */
    RL_REQUIRE(
        bt_stub_create_batch(&t, file, local, late_id, sizeof(late_id)) == 0);
    RL_CHECK(e2e_wait(late_cancelled, &t, &l, 5000));
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 60000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    /* Past the stub's 6 s: the late batch would have finished by now. */
    st = bt_stub_batch(&t, late_id);
    RL_REQUIRE(st != NULL);
    RL_CHECK_STREQ(
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "status")),
        "cancelled");
    cJSON_Delete(st);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), CREATES + 1);
    bt_count_strays(&t, adopted, &others, &cancelled);
    RL_CHECK_INTEQ(others, CREATES);
    RL_CHECK_INTEQ(cancelled, CREATES);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "file_reads"), 1);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    bt_check_answered_once(&t, ids, RUNS);
    e2e_teardown(&t);
    RL_TEST_END();
}
