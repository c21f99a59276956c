/* Runs the batcher fails itself end as live failures end: failed with
 * the live reason and error class, no notification (a live failure has
 * none), and dead-lettered once each with the shared header set, their
 * event rebuilt from the ledger row so `dlq replay` can re-publish it.
 *
 * Phase 1: a batch-mode job of 5 runs, 2 of whose lines the stub answers
 * with a 400 ([[fault:400]]), beside a live job's run that gets the same
 * 400 live. The 2 batch runs end as the live one does: failed,
 * model_rejected, the live error text, their one attempt permanent with
 * status 400, one dead letter each (source run, reason model_rejected);
 * the other 3 complete once with no dead letter.
 * Phase 2: a job with --on-expiry fail whose batch expires at the stub
 * ([[fault:batch_expire]]): its 3 runs failed (batch_expired) after one
 * attempt, one dead letter each. Nothing else was dead-lettered; every
 * dead letter carries each header once; a batch-failed run's dead letter
 * names where its event was read and replays (dry run) to the same run
 * ID. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "batch_test.h"
#include "faults.h"
#include "ops.h"
#include "rl/deadletter.h"
#include "rltest.h"

static char out[1 << 20], err[1 << 16];

struct seen {
    long n;
    long bad;     /* a header missing or carrying twice */
    long rebuilt; /* source run, value rebuilt, where it was read named */
};

static void
on_dead_letter(const rd_kafka_message_t *rkm, void *opaque)
{
    struct seen *s = opaque;
    rd_kafka_headers_t *hdrs = NULL;
    char source[32], kind[16], topic[256], offset[32];

    RL_CHECK(rd_kafka_message_headers(rkm, &hdrs) == 0);
    for (int i = 0; hdrs && i < RL_DEADLETTER_NHEADERS; i++) {
        const char *name = rl_deadletter_header_names[i];
        const void *val;
        size_t len, count = 0;

        for (size_t k = 0; rd_kafka_header_get(hdrs, k, name, &val, &len) == 0;
             k++)
            count++;
        if (count != 1)
            s->bad++;
    }
    e2e_header(rkm, "source", source, sizeof(source));
    e2e_header(rkm, "value_kind", kind, sizeof(kind));
    e2e_header(rkm, "source_topic", topic, sizeof(topic));
    e2e_header(rkm, "source_offset", offset, sizeof(offset));
    if (strcmp(source, "run") != 0)
        s->bad++;
    if (strcmp(kind, "rebuilt") == 0 && *topic && *offset && rkm->len > 0)
        s->rebuilt++;
    s->n++;
}

static int
run_cli(struct e2e *t, const char *const *args)
{
    out[0] = err[0] = '\0';
    return ops_run(t, args, NULL, NULL, out, sizeof(out), err, sizeof(err));
}

/* How run_id ended: status/error_class/attempts/outbox rows. */
static const char *
ending(struct e2e *t, const char *run_id)
{
    return e2e_textf(t,
                     "SELECT r.status || '/' || r.error_class || '/' || "
                     "(SELECT string_agg(a.outcome || ':' || "
                     "coalesce(a.http_status, 0), ',') FROM attempts a "
                     "WHERE a.run_id = r.run_id) || '/' || "
                     "(SELECT count(*) FROM outbox o WHERE o.run_id = "
                     "r.run_id) + (SELECT count(*) FROM outbox_delivered o "
                     "WHERE o.run_id = r.run_id) FROM runs r WHERE r.run_id "
                     "= '%s' AND r.output IS NULL",
                     run_id);
}

int
main(void)
{
    struct e2e t;
    struct seen s = {0};
    char jb[160], jl[160], jf[160];
    char batch[5][RL_HEX_SIZE], live[RL_HEX_SIZE], expired[3][RL_HEX_SIZE];
    char live_error[512];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0.5", NULL};

    e2e_setup(&t, "batchdlq", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(jb, sizeof(jb), "batch-%s", t.name);
    snprintf(jl, sizeof(jl), "live-%s", t.name);
    snprintf(jf, sizeof(jf), "fail-%s", t.name);
    bt_batch_set(&t, jb, "--window", "500ms", NULL);
    bt_batch_set(&t, jf, "--window", "500ms", "--on-expiry", "fail", NULL);

    /* Phase 1: 400 lines beside a live 400. */
    for (int i = 0; i < 5; i++)
        e2e_produce_event(&t, jb, "tenant-a", i,
                          i == 1 || i == 3 ? "[[fault:400]]" : NULL, batch[i]);
    e2e_produce_event(&t, jl, "tenant-a", 0, "[[fault:400]]", live);
    e2e_flush(&t);
    bt_spawn(&t, "RUNLEDGER_MAX_ATTEMPTS=3", NULL);
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_STREQ(ending(&t, live), "failed/model_rejected/permanent:400/0");
    snprintf(
        live_error, sizeof(live_error), "%s",
        e2e_textf(&t, "SELECT last_error FROM runs WHERE run_id = '%s'", live));
    RL_CHECK(strncmp(live_error, "model endpoint returned http 400", 32) == 0);
    RL_CHECK_INTEQ(fx_dead_letters(&t, "model_rejected", live), 1);
    for (int i = 0; i < 5; i++) {
        if (i == 1 || i == 3) {
            RL_CHECK_STREQ(ending(&t, batch[i]),
                           "failed/model_rejected/permanent:400/0");
            RL_CHECK_INTEQ(e2e_intf(&t,
                                    "SELECT count(*) FROM runs WHERE run_id "
                                    "= '%s' AND last_error LIKE 'model "
                                    "endpoint returned http 400%%'",
                                    batch[i]),
                           1);
            RL_CHECK_INTEQ(e2e_intf(&t,
                                    "SELECT count(*) FROM batch_runs WHERE "
                                    "run_id = '%s' AND state = 'failed'",
                                    batch[i]),
                           1);
            RL_CHECK_INTEQ(fx_dead_letters(&t, "model_rejected", batch[i]), 1);
        } else {
            fx_check_completed_once(&t, batch[i]);
            RL_CHECK_INTEQ(fx_dead_letters_now(&t, NULL, batch[i]), 0);
        }
    }

    /* Phase 2: an expired batch, --on-expiry fail. */
    for (int i = 0; i < 3; i++)
        e2e_produce_event(&t, jf, "tenant-b", i, "[[fault:batch_expire]]",
                          expired[i]);
    e2e_flush(&t);
    RL_REQUIRE(e2e_wait_intf(&t, 3, 60000,
                             "SELECT count(*) FROM runs WHERE job = '%s' AND "
                             "status = 'failed'",
                             jf));
    RL_REQUIRE(fx_settled(&t, 60000));
    for (int i = 0; i < 3; i++) {
        RL_CHECK_STREQ(ending(&t, expired[i]),
                       "failed/batch_expired/transient:0/0");
        RL_CHECK_INTEQ(fx_dead_letters(&t, "batch_expired", expired[i]), 1);
    }
    /* Their batch (or batches, had the window split them) expired. */
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM batches WHERE state = "
                         "'expired'") >= 1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM batch_runs br JOIN batches "
                            "b USING (batch_id) JOIN runs r USING (run_id) "
                            "WHERE r.job = '%s' AND b.state <> 'expired'",
                            jf),
                   0);

    /* Six dead letters in all, one per failed run, each with the shared
     * header set; the five the batcher produced carry the rebuilt event
     * and where it was read. */
    for (int i = 0; i < 50 && fx_dead_letters_now(&t, NULL, NULL) < 6; i++) {
        struct timespec ts = {0, 100000000L};

        nanosleep(&ts, NULL);
    }
    e2e_read_topic(&t, t.dlq, on_dead_letter, &s);
    RL_CHECK_INTEQ(s.n, 6);
    RL_CHECK_INTEQ(s.bad, 0);
    RL_CHECK_INTEQ(s.rebuilt, 5);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE status = "
                               "'completed'"),
                   3);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE lock_owner "
                               "IS NOT NULL"),
                   0);

    /* dlq replay brings it back: the rebuilt event is the same run. */
    {
        const char *args[] = {"dlq",      "replay",    "--run-id",
                              expired[0], "--dry-run", NULL};

        RL_CHECK_INTEQ(run_cli(&t, args), 0);
        RL_CHECK(strstr(out, "would-send") != NULL);
        RL_CHECK(strstr(out, expired[0]) != NULL);
    }
    {
        const char *args[] = {"dlq",    "replay",    "--run-id",
                              batch[1], "--dry-run", NULL};

        RL_CHECK_INTEQ(run_cli(&t, args), 0);
        RL_CHECK(strstr(out, "would-send") != NULL);
        RL_CHECK(strstr(out, batch[1]) != NULL);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
