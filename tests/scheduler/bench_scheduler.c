/* bench_scheduler: 10,000 schedules firing every minute through one
 * `runledger scheduler`; prints the publish lag (broker timestamp of each
 * window's event minus its window start) p50/p99/max per minute and the
 * scheduler's memory (VmRSS, VmHWM). Not a ctest: run by
 * tests/bench/scheduler.sh, on the services of build/services.env.
 *
 * usage: bench_scheduler [SCHEDULES] [MINUTES] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <librdkafka/rdkafka.h>

#include "rl/timefmt.h"
#include "rltest.h"
#include "sched_test.h"

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
    long schedules = argc > 1 ? atol(argv[1]) : 10000;
    int minutes = argc > 2 ? atoi(argv[2]) : 3;
    struct e2e t;
    char sql[1024], errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *parts;
    int64_t *lags = malloc((size_t)schedules * 2 * sizeof(*lags));
    pid_t pid;

    RL_REQUIRE(lags != NULL);
    e2e_setup(&t, "sch_bench", 6);
    snprintf(sql, sizeof(sql),
             "INSERT INTO schedules (name, job, tenant, cron, version,"
             " window_duration, request)"
             " SELECT 'b' || i, 'bench', 'tenant-' || (i %% 100),"
             " '* * * * *', 'v1', 'PT1M',"
             " '{\"model\":\"stub-model\",\"messages\":[{\"role\":\"user\","
             "\"content\":\"report ' || i || '\"}]}'"
             " FROM generate_series(1, %ld) i",
             schedules);
    e2e_int(&t, sql);
    RL_REQUIRE(e2e_intf(&t, "SELECT count(*) FROM schedules") == schedules);
    rd_kafka_conf_set(conf, "bootstrap.servers", t.bootstrap, errstr,
                      sizeof(errstr));
    rd_kafka_conf_set(conf, "group.id", t.name, errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", errstr,
                      sizeof(errstr));
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    RL_REQUIRE(rk != NULL);
    rd_kafka_poll_set_consumer(rk);
    parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, t.topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(rk, parts);
    rd_kafka_topic_partition_list_destroy(parts);

    /* With /metrics on, so the audit thread runs as in production. */
    pid = sched_spawn(&t, "bench", rltest_free_port(), NULL);
    printf("schedules=%ld every minute; %d minutes measured\n", schedules,
           minutes);
    /* The first minute boundary after start, then `minutes` windows. */
    {
        int64_t start = (sched_now() / 60 + 1) * 60;

        for (int m = 0; m < minutes; m++) {
            int64_t window = start + 60 * m;
            size_t n = 0;
            int64_t deadline = rltest_now_ms() + 75000;

            while (n < (size_t)schedules && rltest_now_ms() < deadline) {
                rd_kafka_message_t *msg = rd_kafka_consumer_poll(rk, 500);
                const char *p;
                char at[32];
                int64_t at_s;
                rd_kafka_timestamp_type_t tt;
                int64_t ts;

                if (!msg)
                    continue;
                if (msg->err || !msg->payload) {
                    rd_kafka_message_destroy(msg);
                    continue;
                }
                {
                    char body[2048];
                    size_t len = msg->len < sizeof(body) - 1 ? msg->len
                                                             : sizeof(body) - 1;

                    memcpy(body, msg->payload, len);
                    body[len] = '\0';
                    p = strstr(body, "\"scheduled_at\":\"");
                    if (p) {
                        memcpy(at, p + 16, 25);
                        at[25] = '\0';
                    }
                }
                ts = rd_kafka_message_timestamp(msg, &tt);
                if (p) {
                    if (rl_time_parse(at, &at_s, NULL, errstr,
                                      sizeof(errstr)) == 0 &&
                        at_s == window)
                        lags[n++] = ts - at_s * 1000;
                }
                rd_kafka_message_destroy(msg);
            }
            qsort(lags, n, sizeof(*lags), cmp_i64);
            printf("window %d: %zu of %ld events; publish lag p50 %lld ms, "
                   "p99 %lld ms, max %lld ms; scheduler VmRSS %ld kB, "
                   "VmHWM %ld kB\n",
                   m + 1, n, schedules, n ? (long long)lags[n / 2] : -1LL,
                   n ? (long long)lags[(n * 99) / 100 - (n >= 100)] : -1LL,
                   n ? (long long)lags[n - 1] : -1LL,
                   e2e_status_kb(pid, "VmRSS:"), e2e_status_kb(pid, "VmHWM:"));
            fflush(stdout);
        }
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    free(lags);
    e2e_teardown(&t);
    return 0;
}
