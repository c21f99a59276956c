/* While runs wait in the ledger, the model slots a sweep cannot take are
 * the intake's: new runs that arrive with a backlog waiting and slots to
 * spare are claimed at their registration, not registered pending for a
 * sweeper (a second write each, and a share of the sweeper's statement),
 * and the backlog still completes. One consumer with
 * RUNLEDGER_MAX_IN_FLIGHT=4096 and a stub that answers at once; 1,500
 * runs of another tenant already pending in the ledger, so the first
 * sweeps fill their room (the ledger's backlog mode, for 10 s after the
 * last full sweep); then 300 events. Asserts: runledger_queued_total
 * stays 0 (a ledger that leaves every slot to the sweeper while a backlog
 * waits registers all 300 pending), every run completes with one
 * generation. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ops.h"
#include "rltest.h"

#define BACKLOG 1500
#define FRESH 300

int
main(void)
{
    struct e2e t;
    char port_env[64], job[160];
    int port = ops_free_port();
    const char *args[] = {"consume", NULL};
    int64_t deadline;
    double swept = -1, queued;
    int slot;

    e2e_setup(&t, "opsspare", 1);
    e2e_stub_start(&t, NULL);
    /* A backlog of another tenant, pending and due, as runs the intake had
     * no slot for leave it. */
    RL_CHECK_INTEQ(
        e2e_intf(&t,
                 "WITH ins AS ("
                 " INSERT INTO runs (run_id, job, tenant, scheduled_at,"
                 "                   version, fingerprint, request,"
                 "                   raw_input, status, next_attempt_at)"
                 " SELECT encode(sha256(convert_to('backlog-' || i, 'UTF8')),"
                 "               'hex'),"
                 "        'backlog', 'tenant-backlog',"
                 "        '2026-08-07T09:00:00+00:00'::timestamptz"
                 "          + i * interval '1 hour',"
                 "        'v1', encode(sha256('r'::bytea), 'hex'),"
                 "        '{\"notify\":[],\"request\":{\"model\":\"stub-1\","
                 "          \"messages\":[{\"role\":\"user\","
                 "          \"content\":\"summarise {{input}}\"}]}}',"
                 "        '{\"doc\":1}', 'pending', now()"
                 "   FROM generate_series(1, %d) i"
                 " RETURNING 1)"
                 " SELECT count(*) FROM ins",
                 BACKLOG),
        BACKLOG);

    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    {
        const char *env[] = {port_env, "RUNLEDGER_MAX_IN_FLIGHT=4096", NULL};

        slot = ops_spawn(&t, args, env);
    }
    RL_CHECK(ops_wait_http(port, "/readyz", 200, 60000));
    /* A full sweep has run: the backlog mode is on. */
    deadline = rltest_now_ms() + 30000;
    while (rltest_now_ms() < deadline &&
           (swept = ops_scrape(port, "runledger_swept_total")) < 256) {
        struct timespec nap = {0, 20000000L};

        nanosleep(&nap, NULL);
    }
    RL_CHECK(swept >= 256);

    snprintf(job, sizeof(job), "fresh-%s", t.name);
    for (int i = 0; i < FRESH; i++)
        e2e_produce_event(&t, job, "tenant-fresh", i, NULL, NULL);
    e2e_flush(&t);

    RL_CHECK(e2e_wait_intf(&t, BACKLOG + FRESH, 90000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));
    queued = ops_scrape(port, "runledger_queued_total");
    swept = ops_scrape(port, "runledger_swept_total");
    printf("# %d fresh runs with %d waiting: queued %g, swept %g\n", FRESH,
           BACKLOG, queued, swept);
    RL_CHECK(queued == 0);
    RL_CHECK(swept >= BACKLOG);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"),
                   BACKLOG + FRESH);
    RL_CHECK(e2e_stub_stat(&t, "generations") == BACKLOG + FRESH);
    RL_CHECK(e2e_stop(&t, slot, 30000));
    e2e_teardown(&t);
    RL_TEST_END();
}
