/* The polls of the whole consumer group stay within
 * RUNLEDGER_BATCH_MAX_POLLS_PER_MINUTE, however many workers and open
 * batches there are: three workers, six batches open at once (30 runs, 5
 * a batch; the stub finishes a batch 4 s after its create), a bound of
 * 120 polls a minute (one slot every 500 ms). Each batch on its own would
 * be polled after 200, 400, 800 ms ... (about 24 polls in the first 5 s
 * for six); the stub must see at most 10 in any 5 s (plus one: a poll is
 * sent a moment after its slot is taken, so two may arrive a little
 * closer than 500 ms). Every poll took a slot (the ledger's count equals
 * the stub's; its key, the base URL, holds no user information), and
 * every batch still completes: every run completed once, one generation
 * each. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#define RUNS 30
#define PER_BATCH "5"
#define PER_MINUTE 120
#define SPACING_S (60.0 / PER_MINUTE)
#define WINDOW_S 5.0

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    char job[160], bound[64], base[320];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=4", NULL};
    double times[4096];
    int n = 0, worst = 0;
    cJSON *stats;
    const cJSON *tm;

    e2e_setup(&t, "batchpollbound", 3);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", PER_BATCH, NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, i % 3 ? "tenant-a" : "tenant-b", i, NULL,
                          ids[i]);
    e2e_flush(&t);
    snprintf(bound, sizeof(bound), "RUNLEDGER_BATCH_MAX_POLLS_PER_MINUTE=%d",
             PER_MINUTE);
    /* User information in the base URL (a secret, for all the ledger
     * knows) must not reach the slots' key. */
    RL_REQUIRE(strncmp(t.model_base_url, "http://", 7) == 0);
    snprintf(base, sizeof(base), "MODEL_BASE_URL=http://rl:pollsecret@%s",
             t.model_base_url + 7);
    for (int w = 0; w < 3; w++)
        bt_spawn(&t, bound, base, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 120000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), 6);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batches WHERE state = "
                               "'completed' AND lines_ok = 5"),
                   6);
    for (int i = 0; i < RUNS; i++)
        fx_check_completed_once(&t, ids[i]);

    stats = bt_stub_stats(&t);
    RL_REQUIRE(stats != NULL);
    cJSON_ArrayForEach(
        tm, cJSON_GetObjectItemCaseSensitive(stats, "batch_poll_times"))
    {
        if (cJSON_IsNumber(tm) && n < (int)(sizeof(times) / sizeof(times[0])))
            times[n++] = tm->valuedouble;
    }
    cJSON_Delete(stats);
    /* Six batches, each polled until it completed 4 s after its create. */
    RL_CHECK(n >= 12);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "batch_polls"), n);
    /* One slot a poll: the ledger's count is the stub's. */
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT coalesce(sum(polls), 0) FROM "
                               "batch_poll_slots"),
                   n);
    /* The slots are keyed by the provider's base URL without its user
     * information. */
    RL_CHECK_STREQ(e2e_text(&t, "SELECT string_agg(provider, ',') FROM "
                                "batch_poll_slots"),
                   t.model_base_url);
    for (int i = 0; i < n; i++) {
        int in = 0;

        for (int k = i; k < n && times[k] < times[i] + WINDOW_S; k++)
            in++;
        if (in > worst)
            worst = in;
    }
    printf("batch polls: %d in all over %.1f s, at most %d in any %.0f s "
           "(bound %d)\n",
           n, n > 0 ? times[n - 1] - times[0] : 0.0, worst, WINDOW_S,
           (int)(WINDOW_S / SPACING_S));
    RL_CHECK(worst <= (int)(WINDOW_S / SPACING_S) + 1);
    e2e_teardown(&t);
    RL_TEST_END();
}
