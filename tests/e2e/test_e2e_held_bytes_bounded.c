/* The bytes of runs one process holds are bounded by
 * RUNLEDGER_MAX_HELD_BYTES, whatever the number of runs.
 *
 * One consumer with RUNLEDGER_MAX_HELD_BYTES of 8 MiB, the default
 * in-flight cap (1024 calls, so the count bound of 2048 runs never
 * applies), a stub answering after 1 s, and 60 events of about 900 KB on
 * one partition. While they run, the test samples the consumer's
 * runledger_held_bytes every 50 ms and its resident set (VmRSS).
 *
 * The bound guaranteed: the Kafka thread takes one message per poll and
 * pauses once the held runs are charged the limit, so the charge stays
 * below the limit plus the charge of one run. A run is charged at intake
 * for its event value, the parsed event, the request and input copies its
 * claim makes and the body it will send: about four times its event here,
 * so the test allows 8 MiB + 4 * event + 64 KiB. Asserts: the held bytes
 * were sampled above zero and never above that; every run completes with
 * one attempt and one generation; every offset is committed; the held
 * bytes are back to 0; the peak resident set stays under 160 MiB (not
 * checked under AddressSanitizer; the test prints the figures). Fails on a
 * consumer that bounds runs by count only: the 60 runs, about 3.6 MB each, are
 * all taken at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "e2e.h"
#include "ops.h"
#include "rl/runid.h"
#include "rl/timefmt.h"
#include "rltest.h"

#define EVENTS 60
#define INPUT_BYTES 900000
#define LIMIT (8L * 1024 * 1024)

static void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Event i of job with an input of INPUT_BYTES (malloc'd). */
static char *
big_event(const char *job, int i)
{
    size_t size = INPUT_BYTES + 1024;
    char *buf = malloc(size);
    char utc[RL_TIME_UTC_SIZE];
    char *p;

    RL_REQUIRE(buf != NULL);
    rl_time_format_utc(1786093200 + (int64_t)i * 3600, utc);
    p = buf + sprintf(buf,
                      "{\"job\":\"%s\",\"tenant\":\"tenant-a\","
                      "\"scheduled_at\":\"%s\",\"version\":\"v1\","
                      "\"input\":{\"doc\":\"",
                      job, utc);
    memset(p, 'a' + i % 26, INPUT_BYTES);
    p += INPUT_BYTES;
    sprintf(p, "\"},\"request\":{\"model\":\"stub-1\",\"messages\":[{"
               "\"role\":\"user\",\"content\":\"summarise {{input}}\"}]},"
               "\"notify\":[\"email\"]}");
    return buf;
}

int
main(void)
{
    struct e2e t;
    static char metrics[1 << 20];
    const char *stub_env[] = {"STUB_LATENCY_MS=1000", NULL};
    char job[160], port_env[64];
    int port = ops_free_port();
    const char *env[] = {port_env, "RUNLEDGER_MAX_HELD_BYTES=8388608",
                         "RUNLEDGER_RELAY_INTERVAL_MS=50",
                         "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};
    double held, max_held = -1;
    long rss, max_rss = -1, hwm, samples = 0, event_bytes = 0;
    long bound;
    int64_t completed = 0;
    pid_t pid;
    int slot;

    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    e2e_setup(&t, "e2e_heldbytes", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    for (int i = 0; i < EVENTS; i++) {
        char *ev = big_event(job, i);

        event_bytes = (long)strlen(ev);
        e2e_produce(&t, "tenant-a", ev);
        free(ev);
    }
    e2e_flush(&t);
    bound = LIMIT + 4 * event_bytes + 65536;
    printf("%d events of %ld bytes; limit %ld, bound %ld\n", EVENTS,
           event_bytes, LIMIT, bound);

    slot = e2e_spawn(&t, "consume", env);
    pid = t.procs[slot];
    RL_REQUIRE(ops_wait_http(port, "/healthz", 200, 30000));
    for (int turn = 0; turn < 240 * 20 && completed < EVENTS; turn++) {
        if (ops_http_get(port, "/metrics", metrics, sizeof(metrics)) == 200) {
            held = ops_metric(metrics, "runledger_held_bytes");
            if (held > max_held)
                max_held = held;
            samples++;
        }
        rss = e2e_status_kb(pid, "VmRSS:");
        if (rss > max_rss)
            max_rss = rss;
        if (turn % 10 == 0)
            completed = e2e_intf(&t,
                                 "SELECT count(*) FROM runs WHERE job = '%s' "
                                 "AND status = 'completed'",
                                 job);
        sleep_ms(50);
    }
    hwm = e2e_status_kb(pid, "VmHWM:");
    printf("samples %ld: max runledger_held_bytes %.0f (bound %ld), "
           "max VmRSS %ld kB, VmHWM %ld kB\n",
           samples, max_held, bound, max_rss, hwm);
    RL_CHECK(samples > 20);
    RL_CHECK(max_held > 0);
    RL_CHECK(max_held <= (double)bound);
#ifndef __SANITIZE_ADDRESS__
    /* AddressSanitizer's quarantine keeps freed memory resident. */
    RL_CHECK(hwm > 0 && hwm < 160L * 1024);
#endif

    RL_CHECK(e2e_wait_completed(&t, job, EVENTS, 60000));
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT count(*) FROM runs WHERE job = '%s'", job),
        EVENTS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), EVENTS);
    RL_CHECK_INTEQ(
        e2e_int(&t, "SELECT count(*) FROM attempts WHERE outcome = 'ok'"),
        EVENTS);
    RL_CHECK(e2e_stub_stat(&t, "generations") == EVENTS);
    RL_CHECK(e2e_wait_intf(&t, EVENTS, 30000,
                           "SELECT count(*) FROM outbox_delivered"));

    /* Every charge is taken off again once its run is done. */
    for (int i = 0; i < 100; i++) {
        if (ops_http_get(port, "/metrics", metrics, sizeof(metrics)) == 200 &&
            ops_metric(metrics, "runledger_held_bytes") == 0)
            break;
        sleep_ms(100);
    }
    RL_CHECK(ops_metric(metrics, "runledger_held_bytes") == 0);

    RL_CHECK(e2e_stop(&t, slot, 30000));
    RL_CHECK(e2e_group_lag(&t) == 0);

    e2e_teardown(&t);
    RL_TEST_END();
}
