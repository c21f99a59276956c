/* Invariant: when a batch of new runs is dispatched together, every
 * dispatch update of a run is heap-only (HOT), and when the batch
 * completes, every outcome update of its attempts is too. The runs of a
 * batch are inserted together and fill their pages up to the fillfactor;
 * an update that finds no room on its row's page writes the row again
 * elsewhere with an entry in each of its indexes (schema/025). Counted
 * with pg_stat_xact_user_tables across each batch's own transaction, with
 * the bench's request, input, output and upstream request id sizes, for
 * three batches of 64 runs on a fresh ledger. */
#include <stdio.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_complete.h"
#include "rl/db_conn.h"
#include "rl/db_dispatch.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

#define BATCH 64
#define BATCHES 3

static const char request[] =
    "{\"notify\":[\"email\",\"slack\"],\"request\":{\"messages\":[{"
    "\"content\":\"summarise {{input}}\",\"role\":\"user\"}],"
    "\"model\":\"stub-1\",\"temperature\":0}}";

static const char *const channels[] = {"email", "slack"};

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    static struct fixture_run runs[BATCH];
    static struct rl_run_reg regs[BATCH];
    static struct rl_claim claims[BATCH];
    static struct rl_dispatch_req dreqs[BATCH];
    static struct rl_dispatch_res dres[BATCH];
    static struct rl_complete_req creqs[BATCH];
    static struct rl_complete_res cres[BATCH];
    static char outputs[BATCH][192];
    int64_t run_upd = 0, run_hot = 0, att_upd = 0, att_hot = 0;
    char errstr[512];

    for (int b = 0; b < BATCHES; b++) {
        int64_t u0, h0, u1, h1;
        int err;

        for (int i = 0; i < BATCH; i++) {
            char job[32];

            snprintf(job, sizeof(job), "hot-batch-%d-%d", b, i);
            fixture_run_init(&runs[i], job, request, "{\"doc\":1}");
            regs[i] = runs[i].reg;
        }
        err = rl_db_register_claim_some(
            db, regs, BATCH,
            &(struct rl_claim_opts){
                .worker = "w1", .lease_seconds = 300, .max = -1},
            claims, errstr, sizeof(errstr));
        if (err != 0)
            fprintf(stderr, "%s\n", errstr);
        RL_REQUIRE(err == 0);
        for (int i = 0; i < BATCH; i++) {
            RL_REQUIRE(claims[i].status == RL_CLAIM_WON);
            dreqs[i].run_id = runs[i].run_id;
            dreqs[i].lease_epoch = claims[i].lease_epoch;
            dreqs[i].idempotency_key = runs[i].run_id;
            dreqs[i].estimate = 1030;
        }

        fixture_exec(db, "BEGIN");
        u0 = fixture_runs_stat(db, "n_tup_upd");
        h0 = fixture_runs_stat(db, "n_tup_hot_upd");
        err = rl_db_dispatch_runs(db, dreqs, BATCH, "w1", 1000, dres, errstr,
                                  sizeof(errstr));
        if (err != 0)
            fprintf(stderr, "%s\n", errstr);
        RL_REQUIRE(err == 0);
        u1 = fixture_runs_stat(db, "n_tup_upd");
        h1 = fixture_runs_stat(db, "n_tup_hot_upd");
        fixture_exec(db, "COMMIT");
        run_upd += u1 - u0;
        run_hot += h1 - h0;

        for (int i = 0; i < BATCH; i++) {
            RL_REQUIRE(dres[i].err == 0);
            RL_REQUIRE(dres[i].status == RL_DISPATCH_RECORDED);
            snprintf(outputs[i], sizeof(outputs[i]),
                     "{\"text\":\"stub summary of run %d of batch %d\","
                     "\"model\":\"stub-1\",\"usage\":{\"prompt_tokens\":6,"
                     "\"completion_tokens\":24,\"cached_tokens\":0}}",
                     i, b);
            memset(&creqs[i], 0, sizeof(creqs[i]));
            creqs[i].run_id = runs[i].run_id;
            creqs[i].lease_epoch = claims[i].lease_epoch;
            creqs[i].output_json = outputs[i];
            creqs[i].channels = channels;
            creqs[i].n_channels = 2;
            creqs[i].oc.attempt_no = dres[i].attempt_no;
            creqs[i].oc.http_status = 200;
            creqs[i].oc.upstream_request_id = "chatcmpl-0123456789abcdef";
            creqs[i].oc.prompt_tokens = 6;
            creqs[i].oc.completion_tokens = 24;
            creqs[i].oc.cached_tokens = 0;
            creqs[i].oc.latency_ms = 412;
        }

        fixture_exec(db, "BEGIN");
        u0 = fixture_table_stat(db, "attempts", "n_tup_upd");
        h0 = fixture_table_stat(db, "attempts", "n_tup_hot_upd");
        err = rl_db_complete_runs(db, creqs, BATCH, "w1", cres, errstr,
                                  sizeof(errstr));
        if (err != 0)
            fprintf(stderr, "%s\n", errstr);
        RL_REQUIRE(err == 0);
        u1 = fixture_table_stat(db, "attempts", "n_tup_upd");
        h1 = fixture_table_stat(db, "attempts", "n_tup_hot_upd");
        fixture_exec(db, "COMMIT");
        att_upd += u1 - u0;
        att_hot += h1 - h0;
        for (int i = 0; i < BATCH; i++) {
            RL_REQUIRE(cres[i].err == 0 && cres[i].completed);
            rl_claim_clear(&claims[i]);
        }
    }
    printf("# dispatch updates of runs: %lld, heap-only: %lld; "
           "outcome updates of attempts: %lld, heap-only: %lld\n",
           (long long)run_upd, (long long)run_hot, (long long)att_upd,
           (long long)att_hot);
    RL_CHECK_INTEQ(run_upd, BATCH * BATCHES);
    RL_CHECK_INTEQ(run_hot, BATCH * BATCHES);
    RL_CHECK_INTEQ(att_upd, BATCH * BATCHES);
    RL_CHECK_INTEQ(att_hot, BATCH * BATCHES);
    fixture_drop(db, schema);
    RL_TEST_END();
}
