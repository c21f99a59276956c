/* SIGTERM to `runledger consume` while every model call hangs (the stub
 * never answers), in four settings: the model hanging alone; the broker
 * killed first; the broker replaced by another cluster (a fresh KRaft
 * storage, new cluster id, same port: librdkafka 2.0 can then hang in
 * rd_kafka_destroy forever); PostgreSQL killed first; a second SIGTERM
 * soon after the first (exit at once, well within the grace period).
 * Asserts: the process exits within the grace period plus the watchdog's
 * margin (the second signal: within 3 s, the grace being 30 s), and,
 * where PostgreSQL is up, no run is left leased to it (its calls and the
 * runs it reserved ahead are all released: none waits for its lease to
 * expire). Prints the time to exit and the leases left. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "faults.h"
#include "rltest.h"

#define SD_MODEL_HANG 1
#define SD_BROKER_GONE 2
#define SD_OTHER_CLUSTER 3
#define SD_PG_GONE 4
#define SD_SECOND_SIGNAL 5

#define RUNS 12
#define GRACE_S (SD_CASE == SD_SECOND_SIGNAL ? 30 : 2)
/* consumer/shutdown.h's RL_SHUTDOWN_MARGIN_SECONDS */
#define MARGIN_S 10

/* Whether the log of the process in slot holds text within timeout_ms. */
static int
log_says(struct e2e *t, int slot, const char *text, long timeout_ms)
{
    char path[256];
    int64_t until = rltest_now_ms() + timeout_ms;

    snprintf(path, sizeof(path), "%s.%d.log", t->name, slot);
    do {
        FILE *fp = fopen(path, "r");
        char line[4096];
        int found = 0;

        while (fp && !found && fgets(line, sizeof(line), fp))
            found = strstr(line, text) != NULL;
        if (fp)
            fclose(fp);
        if (found)
            return 1;
        {
            struct timespec ts = {0, 50000000L};

            nanosleep(&ts, NULL);
        }
    } while (rltest_now_ms() < until);
    return 0;
}

int
main(void)
{
    struct e2e t;
    char dir[PATH_MAX], cwd[PATH_MAX - 64], servers[256], url[1024];
    char worker[64], job[160];
    int slot, status;
    int64_t started, took, leased = -1;
    int pg_up = SD_CASE != SD_PG_GONE;

    RL_REQUIRE(getcwd(cwd, sizeof(cwd)));
    snprintf(dir, sizeof(dir), "%s/sd-%s-%d", cwd, SD_NAME, (int)getpid());
    snprintf(worker, sizeof(worker), "sd-%s-%d", SD_NAME, (int)getpid());
    if (SD_CASE == SD_PG_GONE) {
        e2e_private_pg(dir, url, sizeof(url));
        e2e_setup_at(&t, "sdpg", 2, url, NULL);
    } else if (SD_CASE == SD_BROKER_GONE || SD_CASE == SD_OTHER_CLUSTER) {
        e2e_private_kafka(dir, servers, sizeof(servers));
        e2e_setup_at(&t, "sdkf", 2, NULL, servers);
    } else {
        e2e_setup(&t, "sdhang", 2);
    }
    snprintf(job, sizeof(job), "job-%s", t.name);
    {
        char grace[64], wid[96];

        snprintf(grace, sizeof(grace), "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=%d",
                 GRACE_S);
        snprintf(wid, sizeof(wid), "RUNLEDGER_WORKER_ID=%s", worker);
        /* Four calls in flight and the rest reserved ahead; leases long
         * enough that only a release frees them during the test. */
        slot = fx_spawn(&t, "consume", grace, wid, "RUNLEDGER_MAX_IN_FLIGHT=4",
                        "RUNLEDGER_LEASE_SECONDS=120",
                        "MODEL_TIMEOUT_MS=120000", NULL);
    }
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, i % 2 ? "tenant-a" : "tenant-b", i,
                          "[[fault:hang]]", NULL);
    e2e_flush(&t);
    /* The calls hang: four in flight. */
    RL_REQUIRE(e2e_wait_intf(&t, 4, 60000,
                             "SELECT count(*) FROM attempts WHERE outcome IS "
                             "NULL"));
    if (SD_CASE == SD_BROKER_GONE)
        RL_REQUIRE(e2e_harness("kafka.sh", "kill", dir) == 0);
    if (SD_CASE == SD_OTHER_CLUSTER) {
        RL_REQUIRE(e2e_harness("kafka.sh", "kill", dir) == 0);
        RL_REQUIRE(e2e_harness("kafka.sh", "reformat", dir) == 0);
    }
    if (SD_CASE == SD_PG_GONE)
        RL_REQUIRE(e2e_harness("pg.sh", "kill", dir) == 0);

    started = rltest_now_ms();
    e2e_signal(&t, slot, SIGTERM, 0);
    if (SD_CASE == SD_SECOND_SIGNAL) {
        /* Signals do not queue: the first must be taken (the log says
         * so) before the second is sent. */
        RL_REQUIRE(log_says(&t, slot, "signal 15: stopping", 10000));
        e2e_signal(&t, slot, SIGTERM, 0);
    }
    status = e2e_wait_exit(&t, slot, (GRACE_S + MARGIN_S + 20) * 1000L);
    took = rltest_now_ms() - started;
    RL_CHECK(status != -1);
    /* The margin plus room for a loaded machine to schedule the exit. */
    if (SD_CASE == SD_SECOND_SIGNAL)
        RL_CHECK(took <= 3000);
    else
        RL_CHECK(took <= (GRACE_S + MARGIN_S + 2) * 1000L);
    if (pg_up) {
        leased = e2e_intf(
            &t, "SELECT count(*) FROM runs WHERE lock_owner = '%s'", worker);
        RL_CHECK_INTEQ(leased, 0);
        /* Nothing started after SIGTERM: every attempt is closed (a
         * second signal leaves the calls it cut short unrecorded; their
         * runs are released all the same). */
        if (SD_CASE != SD_SECOND_SIGNAL)
            RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts WHERE "
                                       "outcome IS NULL"),
                           0);
    }
    printf("shutdown %s: exited %lld ms after SIGTERM (grace %d s, "
           "watchdog at %d s), status %d, leases left %lld%s\n",
           SD_NAME, (long long)took, GRACE_S, GRACE_S + MARGIN_S,
           status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1,
           (long long)leased, pg_up ? "" : " (PostgreSQL down: not checked)");
    e2e_teardown(&t);
    RL_TEST_END();
}
