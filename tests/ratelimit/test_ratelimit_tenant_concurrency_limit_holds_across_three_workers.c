/* A tenant's concurrency limit holds for the whole group, counted where
 * the calls arrive: three consumers, tenant A limited to 3 runs at once
 * (`runledger limits set --tenant A --concurrency 3`), tenant B
 * unlimited, a stub answering after 300 ms that counts the calls in
 * flight per tenant (STUB_CONCURRENCY_KEY on a "tenant=" word each
 * event's prompt carries). 60 runs of A and 30 of B are produced at once.
 * Asserts: the stub never had more than 3 of A's calls in flight; every
 * run completes with one attempt and one generation; B is not starved
 * behind A's backlog (B's last run completes before A's last). Fails
 * without the limit: the three workers send A's runs as fast as they
 * claim them: all 60 were in flight at once when this was written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"
#include "rltest.h"

#define A_RUNS 60
#define B_RUNS 30
#define LIMIT 3

int
main(void)
{
    struct e2e t;
    const char *stub_env[] = {"STUB_LATENCY_MS=300",
                              "STUB_CONCURRENCY_KEY=tenant=(\\S+)", NULL};
    const char *env[] = {"RUNLEDGER_RELAY_INTERVAL_MS=50",
                         "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};
    const char *bin = getenv("RUNLEDGER_BIN");
    char job[160], cmd[2048];
    int slots[3];
    long max_a, max_b;
    int64_t b_before_a;

    e2e_setup(&t, "rl_tenant_cc", 3);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    RL_REQUIRE(bin != NULL);
    snprintf(cmd, sizeof(cmd),
             "DATABASE_URL='%s' '%s' limits set --tenant tenant-a "
             "--concurrency %d >/dev/null",
             t.database_url, bin, LIMIT);
    RL_CHECK(system(cmd) == 0);

    for (int i = 0; i < 3; i++)
        slots[i] = e2e_spawn(&t, "consume", env);
    /* A's backlog first, B's behind it on the same partitions: B must get
     * slots while A's runs still wait. */
    for (int i = 0; i < A_RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, "tenant=tenant-a", NULL);
    for (int i = 0; i < B_RUNS; i++)
        e2e_produce_event(&t, job, "tenant-b", i, "tenant=tenant-b", NULL);
    e2e_flush(&t);

    RL_CHECK(e2e_wait_intf(&t, A_RUNS + B_RUNS, 120000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));
    max_a = e2e_stub_max_concurrent(&t, "tenant-a");
    max_b = e2e_stub_max_concurrent(&t, "tenant-b");
    b_before_a = e2e_int(&t, "SELECT ((SELECT max(completed_at) FROM runs "
                             "WHERE tenant = 'tenant-b') < (SELECT "
                             "max(completed_at) FROM runs WHERE tenant = "
                             "'tenant-a'))::int");
    printf("# stub: at most %ld of A's calls in flight (limit %d), %ld of "
           "B's; %ld requests, %ld generations; B's last run completed "
           "%.0f ms before A's last\n",
           max_a, LIMIT, max_b, e2e_stub_stat(&t, "requests"),
           e2e_stub_stat(&t, "generations"),
           (double)e2e_int(&t, "SELECT (extract(epoch FROM (SELECT "
                               "max(completed_at) FROM runs WHERE tenant = "
                               "'tenant-a') - (SELECT max(completed_at) FROM "
                               "runs WHERE tenant = 'tenant-b')) * 1000)"
                               "::bigint"));
    RL_CHECK(max_a >= 1 && max_a <= LIMIT);
    RL_CHECK(max_b >= 1);
    RL_CHECK_INTEQ(b_before_a, 1);
    RL_CHECK_INTEQ(e2e_stub_stat(&t, "generations"), A_RUNS + B_RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"),
                   A_RUNS + B_RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), A_RUNS + B_RUNS);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE status = "
                            "'completed' AND tenant = '%s'",
                            "tenant-b"),
                   B_RUNS);
    for (int i = 0; i < 3; i++)
        RL_CHECK(e2e_stop(&t, slots[i], 30000));
    e2e_teardown(&t);
    RL_TEST_END();
}
