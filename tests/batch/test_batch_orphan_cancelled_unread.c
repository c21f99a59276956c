/* A provider batch naming this ledger's installation and database
 * cluster whose intent the ledger does not hold (a failover to an
 * asynchronous standby lost the row) is cancelled at the provider by a
 * worker's orphan sweep, and never read; so is one whose intent ended
 * with another batch. The batches of another installation, those of
 * this installation made in another cluster (a copy of this ledger
 * restored from a pg_dump), and those naming no installation or no
 * cluster (made by a release that sent none), are left alone, as is the
 * batch the ledger polls. A first worker submits the ledger's batch (the stub
 * finishes a batch 30 s after its create); the lost intent's batch and
 * the others are then created at the stub directly, and a second worker
 * sweeps at its start: the orphans cancelled while the others run on,
 * no orphan's output downloaded, the ledger's batch names the
 * installation, completes and is read once, and the second worker logs
 * and counts each orphan it cancelled. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "ops.h"
#include "rltest.h"

#define RUNS 3

/* The stub's view of batch id (GET /admin/batches), NULL when it holds
 * none. Borrowed from list. */
static const cJSON *
held(const cJSON *list, const char *id)
{
    const cJSON *obj;

    cJSON_ArrayForEach(obj, cJSON_GetObjectItemCaseSensitive(list, "batches"))
    {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "id");

        if (cJSON_IsString(v) && strcmp(v->valuestring, id) == 0)
            return obj;
    }
    return NULL;
}

static int
flag(const cJSON *obj, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, name));
}

/* Both orphans cancelled at the stub. */
static int
orphans_cancelled(struct e2e *t, void *opaque)
{
    char(*ids)[128] = opaque;
    cJSON *list = bt_stub_get(t, "/admin/batches");
    int done = flag(held(list, ids[0]), "cancelled") &&
               flag(held(list, ids[1]), "cancelled");

    cJSON_Delete(list);
    return done;
}

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    static char orphans[2][128];
    char job[160], http[64], file[128], meta[512];
    char inst[128], cluster[32], foreign[128], legacy[128], ours[128];
    char copy[128], early[128], line[320];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=30", NULL};
    const char *jsonl =
        "{\"custom_id\":\"orphan:1\",\"method\":\"POST\",\"url\":"
        "\"/v1/chat/completions\",\"body\":{\"model\":\"m\",\"messages\":"
        "[{\"role\":\"user\",\"content\":\"hi\"}]}}\n";
    const cJSON *obj, *v;
    cJSON *list;
    int port = ops_free_port(), slot;

    e2e_setup(&t, "batchorphan", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "3", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, ids[i]);
    e2e_flush(&t);
    bt_spawn(&t, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT count(*) FROM batches WHERE state = "
                             "'submitted'"));
    snprintf(ours, sizeof(ours), "%s",
             e2e_text(&t, "SELECT provider_batch_id FROM batches"));
    snprintf(inst, sizeof(inst), "%s",
             e2e_text(&t, "SELECT installation_id FROM installation"));
    RL_REQUIRE(*inst != '\0');
    snprintf(cluster, sizeof(cluster), "%s",
             e2e_text(&t, "SELECT system_identifier::text FROM "
                          "pg_control_system()"));
    RL_REQUIRE(*cluster != '\0');

    RL_REQUIRE(bt_stub_upload(&t, "other.jsonl", jsonl, file, sizeof(file)) ==
               0);
    /* The lost intent's batch: its local id is in no row. */
    snprintf(meta, sizeof(meta),
             "{\"runledger_batch\":\"rlb_lostintent\","
             "\"runledger_installation\":\"%s\",\"runledger_cluster\":\"%s\"}",
             inst, cluster);
    RL_REQUIRE(bt_stub_create_batch_meta(&t, file, meta, orphans[0],
                                         sizeof(orphans[0])) == 0);
    /* A stray of an intent that ended with another batch. */
    RL_REQUIRE(e2e_int(&t, "INSERT INTO batches (batch_id, endpoint, model, "
                           "state, provider_batch_id, finished_at) VALUES "
                           "('rlb_endedintent', '/v1/chat/completions', 'm', "
                           "'failed', 'batch-gone', now()) RETURNING 1") == 1);
    snprintf(meta, sizeof(meta),
             "{\"runledger_batch\":\"rlb_endedintent\","
             "\"runledger_installation\":\"%s\",\"runledger_cluster\":\"%s\"}",
             inst, cluster);
    RL_REQUIRE(bt_stub_create_batch_meta(&t, file, meta, orphans[1],
                                         sizeof(orphans[1])) == 0);
    /* Another ledger's, with a local id this ledger lacks too. */
    RL_REQUIRE(bt_stub_create_batch_meta(
                   &t, file,
                   "{\"runledger_batch\":\"rlb_lostintent\","
                   "\"runledger_installation\":\"another-installation\"}",
                   foreign, sizeof(foreign)) == 0);
    /* A release's that named no installation. */
    RL_REQUIRE(bt_stub_create_batch(&t, file, "rlb_lostintent", legacy,
                                    sizeof(legacy)) == 0);
    /* A release's that named the installation but no cluster. */
    snprintf(meta, sizeof(meta),
             "{\"runledger_batch\":\"rlb_lostintent\","
             "\"runledger_installation\":\"%s\"}",
             inst);
    RL_REQUIRE(
        bt_stub_create_batch_meta(&t, file, meta, early, sizeof(early)) == 0);
    /* A copy's of this ledger, restored from a pg_dump into another
     * cluster: its intents are not in this ledger either. */
    snprintf(meta, sizeof(meta),
             "{\"runledger_batch\":\"rlb_lostintent\","
             "\"runledger_installation\":\"%s\",\"runledger_cluster\":\"1\"}",
             inst);
    RL_REQUIRE(bt_stub_create_batch_meta(&t, file, meta, copy, sizeof(copy)) ==
               0);

    snprintf(http, sizeof(http), "RUNLEDGER_HTTP_PORT=%d", port);
    slot = bt_spawn(&t, http, NULL);
    RL_CHECK(e2e_wait(orphans_cancelled, &t, orphans, 25000));
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 90000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    list = bt_stub_get(&t, "/admin/batches");
    RL_REQUIRE(list != NULL);
    for (int i = 0; i < 2; i++) {
        obj = held(list, orphans[i]);
        RL_CHECK(flag(obj, "cancelled"));
        RL_CHECK(!flag(obj, "read"));
        snprintf(line, sizeof(line), "orphan provider batch %s", orphans[i]);
        RL_CHECK(e2e_log_has(&t, slot, line));
    }
    RL_REQUIRE(held(list, foreign) != NULL && held(list, legacy) != NULL &&
               held(list, early) != NULL && held(list, copy) != NULL);
    RL_CHECK(!flag(held(list, foreign), "cancelled"));
    RL_CHECK(!flag(held(list, legacy), "cancelled"));
    RL_CHECK(!flag(held(list, early), "cancelled"));
    RL_CHECK(!flag(held(list, copy), "cancelled"));
    obj = held(list, ours);
    RL_REQUIRE(obj != NULL);
    RL_CHECK(!flag(obj, "cancelled"));
    RL_CHECK(flag(obj, "read"));
    v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
        "runledger_installation");
    RL_CHECK(cJSON_IsString(v) && strcmp(v->valuestring, inst) == 0);
    v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "runledger_cluster");
    RL_CHECK(cJSON_IsString(v) && strcmp(v->valuestring, cluster) == 0);
    cJSON_Delete(list);
    RL_CHECK(ops_scrape(port, "runledger_batch_orphans_cancelled_total") == 2);
    /* Only the ledger's batch was read. */
    RL_CHECK_INTEQ(bt_stub_stat(&t, "file_reads"), 1);
    RL_CHECK_STREQ(e2e_text(&t, "SELECT state || '/' || lines_ok FROM "
                                "batches WHERE batch_id <> "
                                "'rlb_endedintent'"),
                   "completed/3");
    bt_check_answered_once(&t, ids, RUNS);
    e2e_teardown(&t);
    RL_TEST_END();
}
