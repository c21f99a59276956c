/* A publisher that skips windows shows up in `schedules gaps` and in
 * runledger_schedule_windows_missed, and `schedules backfill` closes the
 * gaps; a window whose run has another fingerprint is reported, not
 * overwritten.
 *
 * An audit-only schedule (a window every 2 s) whose events come from
 * `runledger publish --at`, as a CronJob sends them, with every third
 * window left out and one window published with another request. The
 * schedule is paused after 10 windows (no window after it is expected).
 * Asserts: gaps lists exactly the left-out windows as missing and the
 * other one as a conflict; the scheduler's audit gauge equals the missing
 * count; backfill publishes the missing ones, exits 3 for the conflict
 * and leaves that run's fingerprint as it was; gaps then lists only the
 * conflict and the gauge falls to 0. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include "rl/timefmt.h"
#include "rltest.h"
#include "sched_test.h"

static const char request[] =
    "{\"model\":\"stub-model\",\"messages\":[{\"role\":\"user\","
    "\"content\":\"report\"}]}";
static const char other_request[] =
    "{\"model\":\"stub-model\",\"messages\":[{\"role\":\"user\","
    "\"content\":\"another report\"}]}";

static size_t
collect(char *p, size_t size, size_t n, void *opaque)
{
    char *buf = opaque;
    size_t len = strlen(buf), add = size * n;

    if (len + add >= 65536)
        add = 65535 - len;
    memcpy(buf + len, p, add);
    buf[len + add] = '\0';
    return size * n;
}

/* The gauge's value for schedule "ext", or -1 when absent. */
static double
gauge(int port)
{
    static char body[65536];
    char url[64];
    CURL *c = curl_easy_init();
    const char *line;

    body[0] = '\0';
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
    curl_easy_perform(c);
    curl_easy_cleanup(c);
    line = strstr(body, "runledger_schedule_windows_missed{schedule=\"ext\"} ");
    return line ? atof(strchr(line, '}') + 2) : -1;
}

static int
wait_gauge(int port, double want)
{
    for (int i = 0; i < 200; i++) {
        if (gauge(port) == want)
            return 1;
        sched_sleep_ms(100);
    }
    fprintf(stderr, "gauge stayed at %g, not %g\n", gauge(port), want);
    return 0;
}

int
main(void)
{
    struct e2e t;
    char job[160], out[65536], from[RL_TIME_UTC_SIZE], to[RL_TIME_UTC_SIZE];
    int64_t created, paused, first;
    int skipped = 0, published = 0, port = rltest_free_port();
    int64_t conflict_at = -1;
    const char *const audit[] = {"--audit-every-ms", "500", "--audit-grace",
                                 "PT0S", NULL};
    pid_t sched;
    int rc;

    e2e_setup(&t, "sch_gap", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    sched_set(&t, "ext", job, "*/2 * * * * *", "PT2S", "all", 1);
    created = sched_created(&t, "ext");
    e2e_spawn(&t, "consume", NULL);
    sched_sleep_ms(21000);
    {
        const char *const pause[] = {"schedules", "pause", "ext", NULL};

        RL_REQUIRE(sched_run(&t, NULL, 0, pause) == 0);
    }
    paused = e2e_intf(&t, "SELECT floor(extract(epoch FROM paused_at))"
                          "::bigint FROM schedule_pauses");
    first = created - created % 2 + 2;
    /* The publisher: every window before the pause but every third; the
     * second with another request. */
    for (int64_t w = first, i = 0; w < paused; w += 2, i++) {
        char at[RL_TIME_UTC_SIZE];
        const char *req = request;

        if (i % 3 == 2) {
            skipped++;
            continue;
        }
        if (i == 1) {
            req = other_request;
            conflict_at = w;
        }
        rl_time_format_utc(w, at);
        {
            const char *const pub[] = {
                "publish", "--at",      at,         "--window", "PT2S",
                "--job",   job,         "--tenant", "tenant-a", "--version",
                "v1",      "--request", req,        NULL};

            RL_REQUIRE(sched_run(&t, NULL, 0, pub) == 0);
        }
        published++;
    }
    fprintf(stderr, "%d windows published, %d left out\n", published, skipped);
    RL_REQUIRE(skipped >= 3);
    RL_REQUIRE(e2e_wait_intf(&t, published, 30000,
                             "SELECT count(*) FROM runs WHERE job = '%s'",
                             job));
    rl_time_format_utc(created, from);
    {
        const char *const gaps[] = {"schedules", "gaps", "--since", from,
                                    "--grace",   "PT0S", NULL};
        int missing = 0, conflicts = 0;

        RL_CHECK_INTEQ(sched_run(&t, out, sizeof(out), gaps), 0);
        fprintf(stderr, "%s", out);
        for (const char *p = out; (p = strstr(p, " missing")) != NULL; p++)
            missing++;
        for (const char *p = out;
             (p = strstr(p, "another fingerprint")) != NULL; p++)
            conflicts++;
        RL_CHECK_INTEQ(missing, skipped);
        RL_CHECK_INTEQ(conflicts, 1);
    }
    sched = sched_spawn(&t, "audit", port, audit);
    RL_CHECK(wait_gauge(port, skipped));

    rl_time_format_utc(paused, to);
    {
        const char *const backfill[] = {
            "schedules", "backfill", "ext",    "--from", from,
            "--to",      to,         "--rate", "2",      NULL};

        rc = sched_run(&t, out, sizeof(out), backfill);
        RL_CHECK_INTEQ(rc, 3);
    }
    RL_CHECK(e2e_wait_intf(&t, published + skipped, 30000,
                           "SELECT count(*) FROM runs WHERE job = '%s'", job));
    RL_CHECK(wait_gauge(port, 0));
    {
        const char *const gaps[] = {"schedules", "gaps", "--since", from,
                                    "--grace",   "PT0S", NULL};

        RL_CHECK_INTEQ(sched_run(&t, out, sizeof(out), gaps), 0);
        RL_CHECK(strstr(out, " missing") == NULL);
        RL_CHECK(strstr(out, "another fingerprint") != NULL);
    }
    /* The conflicting run keeps the request it was registered with. */
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE job = '%s'"
                            " AND request::text LIKE '%%another report%%'",
                            job),
                   1);
    (void)conflict_at;
    kill(sched, SIGTERM);
    waitpid(sched, NULL, 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
