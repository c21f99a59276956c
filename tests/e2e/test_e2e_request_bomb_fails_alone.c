/* A prompt that multiplies its input fails alone, without being built.
 *
 * One event of about 380 KB: a user message of "{{input}}" 20,000 times
 * and an input of 200 KB, which substituted would be a 4 GB request. With
 * it, 20 ordinary events, and leases of 3 s (renewed every half second),
 * so a ledger thread that stalls copying the bomb loses them. Asserts: the
 * bomb's run is failed with request_too_large and dead-lettered with that
 * reason, no dispatch was recorded for it and the stub saw no call for it;
 * the 20 others complete with no lease lost; the consumer's peak resident
 * set (VmHWM) stays under 256 MiB, a figure the test prints. Fails on a
 * consumer that substitutes first: it allocates gigabytes (or, under a
 * memory limit, fails the run as invalid_request) and sends nothing of the
 * class asserted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "e2e.h"
#include "rltest.h"

#define OTHERS 20
#define PLACEHOLDERS 20000
#define INPUT_BYTES 200000

/* Lines of path that contain needle. */
static long
count_lines(const char *path, const char *needle)
{
    char line[8192];
    long n = 0;
    FILE *f = fopen(path, "r");

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, needle))
            n++;
    }
    fclose(f);
    return n;
}

static int
dead_lettered(struct e2e *t, void *opaque)
{
    (void)opaque;
    return e2e_count_with_header(t, t->dlq, "reason", "request_too_large") >= 1;
}

static char *
bomb_event(const char *job)
{
    size_t size = PLACEHOLDERS * 9 + INPUT_BYTES + 1024;
    char *buf = malloc(size);
    char *p;

    RL_REQUIRE(buf != NULL);
    p = buf + sprintf(buf,
                      "{\"job\":\"%s\",\"tenant\":\"tenant-b\","
                      "\"scheduled_at\":\"2026-08-07T09:00:00Z\","
                      "\"version\":\"v1\",\"input\":{\"doc\":\"",
                      job);
    memset(p, 'x', INPUT_BYTES);
    p += INPUT_BYTES;
    p += sprintf(p, "\"},\"request\":{\"model\":\"stub-1\",\"messages\":[{"
                    "\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < PLACEHOLDERS; i++)
        p += sprintf(p, "{{input}}");
    sprintf(p, "\"}]},\"notify\":[\"email\"]}");
    return buf;
}

int
main(void)
{
    struct e2e t;
    const char *env[] = {"RUNLEDGER_LEASE_SECONDS=3",
                         "RUNLEDGER_RELAY_INTERVAL_MS=50",
                         "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};
    char job[160], bomb_job[160], logname[200];
    char *bomb;
    long hwm;
    int slot;

    e2e_setup(&t, "e2e_bomb", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(bomb_job, sizeof(bomb_job), "bomb-%s", t.name);
    bomb = bomb_event(bomb_job);
    printf("bomb event: %zu bytes\n", strlen(bomb));

    for (int i = 0; i < OTHERS / 2; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
    e2e_produce(&t, "tenant-b", bomb);
    for (int i = OTHERS / 2; i < OTHERS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
    e2e_flush(&t);
    free(bomb);
    slot = e2e_spawn(&t, "consume", env);

    RL_CHECK(e2e_wait_intf(&t, 1, 60000,
                           "SELECT count(*) FROM runs WHERE job = '%s' AND "
                           "status = 'failed' AND error_class = "
                           "'request_too_large'",
                           bomb_job));
    RL_CHECK(e2e_wait_completed(&t, job, OTHERS, 60000));
    hwm = e2e_status_kb(t.procs[slot], "VmHWM:");
    printf("consumer peak RSS (VmHWM): %ld kB\n", hwm);
    RL_CHECK(hwm > 0 && hwm < 256L * 1024);

    /* Nothing was dispatched for it, so nothing was sent. */
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts a JOIN runs r "
                            "USING (run_id) WHERE r.job = '%s'",
                            bomb_job),
                   0);
    RL_CHECK_INTEQ(
        e2e_stub_generations(&t, e2e_textf(&t,
                                           "SELECT run_id FROM runs WHERE "
                                           "job = '%s'",
                                           bomb_job)),
        0);
    RL_CHECK(e2e_wait(dead_lettered, &t, NULL, 30000));
    RL_CHECK_INTEQ(
        e2e_count_with_header(&t, t.dlq, "reason", "request_too_large"), 1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts a JOIN runs r "
                            "USING (run_id) WHERE r.job = '%s'",
                            job),
                   OTHERS);

    RL_CHECK(e2e_stop(&t, slot, 30000));
    snprintf(logname, sizeof(logname), "%s.%d.log", t.name, slot);
    RL_CHECK_INTEQ(count_lines(logname, "lease lost"), 0);
    RL_CHECK(e2e_group_lag(&t) == 0);

    e2e_teardown(&t);
    RL_TEST_END();
}
