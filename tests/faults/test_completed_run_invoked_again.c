/* Seed 000, "a completed run is invoked with the same arguments": five
 * runs complete; the same five events are published again (once verbatim,
 * once with whitespace around the names, which is the same logical run).
 * Nothing changes: same outputs byte for byte, same completed_at, one
 * attempt and one generation per run, no new outbox rows, and every copy
 * is acknowledged. */
#include <stdio.h>

#include "faults.h"
#include "rltest.h"

#define RUNS 5

int
main(void)
{
    struct e2e t;
    char run_ids[RUNS][RL_HEX_SIZE], job[160], spaced[170];
    char before[64], after[64];

    e2e_setup(&t, "fagain", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    /* Leading spaces and a trailing U+3000 IDEOGRAPHIC SPACE: whitespace
     * the run-ID strip removes, and legal unescaped inside a JSON string
     * (a raw tab is not). */
    snprintf(spaced, sizeof(spaced), "  %s\xe3\x80\x80", job);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, run_ids[i]);
    e2e_flush(&t);
    fx_spawn(&t, "consume", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));
    snprintf(before, sizeof(before), "%s",
             e2e_text(&t, "SELECT md5(string_agg(output::text || "
                          "completed_at::text, ',' ORDER BY run_id)) FROM "
                          "runs"));

    for (int i = 0; i < RUNS; i++) {
        char again[RL_HEX_SIZE];

        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
        e2e_produce_event(&t, spaced, "tenant-a", i, NULL, again);
        RL_CHECK_STREQ(again, run_ids[i]);
    }
    e2e_flush(&t);
    RL_REQUIRE(fx_settled(&t, 40000));
    snprintf(after, sizeof(after), "%s",
             e2e_text(&t, "SELECT md5(string_agg(output::text || "
                          "completed_at::text, ',' ORDER BY run_id)) FROM "
                          "runs"));
    RL_CHECK(before[0] != '\0');
    RL_CHECK_STREQ(before, after);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), RUNS);
    for (int i = 0; i < RUNS; i++) {
        fx_check_completed_once(&t, run_ids[i]);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, run_ids[i]), 1);
    }
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   RUNS * 2);
    e2e_teardown(&t);
    RL_TEST_END();
}
