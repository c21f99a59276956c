/* The registry renders Prometheus text format 0.0.4: HELP/TYPE per
 * family, escaped label values, cumulative histogram buckets ending in
 * +Inf equal to _count, integers without a fraction; and clearing a
 * family drops its series. No services needed. */
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "rl/metrics.h"
#include "rltest.h"

int
main(void)
{
    static const double buckets[] = {0.1, 1, 10};
    struct rl_metrics *m = rl_metrics_new();
    char labels[128];
    char *text;

    RL_REQUIRE(m);
    RL_CHECK(rl_metrics_define(m, "t_runs_total", RL_METRIC_COUNTER,
                               "runs\\by outcome\nsecond line", NULL, 0) == 0);
    RL_CHECK(rl_metrics_define(m, "t_lag", RL_METRIC_GAUGE, "lag", NULL, 0) ==
             0);
    RL_CHECK(rl_metrics_define(m, "t_latency_seconds", RL_METRIC_HISTOGRAM,
                               "latency", buckets, 3) == 0);
    RL_CHECK(rl_metrics_define(m, "t_runs_total", RL_METRIC_GAUGE, "x", NULL,
                               0) != 0);
    RL_CHECK(rl_metrics_define(m, "9bad", RL_METRIC_GAUGE, "x", NULL, 0) != 0);

    rl_metrics_labels(labels, sizeof(labels), "outcome", "completed", NULL);
    rl_metrics_add(m, "t_runs_total", labels, 2);
    rl_metrics_add(m, "t_runs_total", labels, -1); /* ignored: a counter */
    rl_metrics_labels(labels, sizeof(labels), "outcome", "we\"ird\\\n", NULL);
    RL_CHECK_STREQ(labels, "outcome=\"we\\\"ird\\\\\\n\"");
    rl_metrics_add(m, "t_runs_total", labels, 1);
    rl_metrics_labels(labels, sizeof(labels), "topic", "t", "partition", "3",
                      NULL);
    rl_metrics_set(m, "t_lag", labels, 42);
    rl_metrics_observe(m, "t_latency_seconds", NULL, 0.05);
    rl_metrics_observe(m, "t_latency_seconds", NULL, 0.5);
    rl_metrics_observe(m, "t_latency_seconds", NULL, 5);
    rl_metrics_observe(m, "t_latency_seconds", NULL, 50);
    RL_CHECK(rl_metrics_labels(labels, 8, "long", "value", NULL) != 0);

    text = rl_metrics_render(m, NULL);
    RL_REQUIRE(text);
    fputs(text, stderr);
    RL_CHECK(ops_metrics_check(text) == 9);
    RL_CHECK(strstr(text, "# HELP t_runs_total runs\\\\by outcome\\nsecond "
                          "line\n# TYPE t_runs_total counter\n"));
    RL_CHECK(ops_metric(text, "t_runs_total{outcome=\"completed\"}") == 2);
    RL_CHECK(strstr(text, "t_runs_total{outcome=\"completed\"} 2\n"));
    RL_CHECK(ops_metric(text, "t_lag{topic=\"t\",partition=\"3\"}") == 42);
    RL_CHECK(ops_metric(text, "t_latency_seconds_bucket{le=\"0.1\"}") == 1);
    RL_CHECK(ops_metric(text, "t_latency_seconds_bucket{le=\"1\"}") == 2);
    RL_CHECK(ops_metric(text, "t_latency_seconds_bucket{le=\"10\"}") == 3);
    RL_CHECK(ops_metric(text, "t_latency_seconds_bucket{le=\"+Inf\"}") == 4);
    RL_CHECK(ops_metric(text, "t_latency_seconds_count") == 4);
    RL_CHECK(ops_metric(text, "t_latency_seconds_sum") > 55.54 &&
             ops_metric(text, "t_latency_seconds_sum") < 55.56);
    free(text);

    rl_metrics_clear(m, "t_lag");
    text = rl_metrics_render(m, NULL);
    RL_REQUIRE(text);
    RL_CHECK(strstr(text, "# TYPE t_lag gauge\n"));
    RL_CHECK(ops_metric(text, "t_lag{topic=\"t\",partition=\"3\"}") == -1);
    free(text);
    rl_metrics_destroy(m);
    RL_TEST_END();
}
