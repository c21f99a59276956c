#ifndef RL_OPS_TEST_H
#define RL_OPS_TEST_H

/* Helpers of the operations tests (tests/ops): `runledger` processes with
 * settings that override the e2e defaults (e.g. an HTTP port), CLI runs
 * with captured output, HTTP probes and a Prometheus text parser. */

#include <stddef.h>
#include <stdint.h>

#include "e2e.h"

/* Starts `runledger <args...>` (args NULL-terminated) with the test's
 * environment; entries of extra_env (NAME=value, NULL-terminated, may be
 * NULL) win over everything, including e2e's defaults. stderr goes to
 * <name>.<slot>.log. The process is killed at e2e_teardown. */
int ops_spawn(struct e2e *t, const char *const *args,
              const char *const *extra_env);

/* Path of the stderr log of slot (static buffer). */
const char *ops_log_path(struct e2e *t, int slot);

/* Runs `runledger <args...>` to completion with the same environment,
 * stdin_text on stdin (NULL: empty), and captures stdout and stderr
 * (truncated to the buffers; either may be NULL). Returns the exit code,
 * or -1 if it did not exit normally within 60 s. */
int ops_run(struct e2e *t, const char *const *args,
            const char *const *extra_env, const char *stdin_text, char *out,
            size_t out_size, char *err, size_t err_size);

/* rltest_free_port(): a port for a server the test starts. */
int ops_free_port(void);

/* GET http://127.0.0.1:port/path; body into buf. Returns the HTTP status,
 * or 0 when nothing answered. */
long ops_http_get(int port, const char *path, char *buf, size_t size);

/* Waits until GET path answers want (status); returns 1 when it did. */
int ops_wait_http(int port, const char *path, long want, long timeout_ms);

/* Value of the sample whose name+labels is series (e.g.
 * "runledger_runs_total{outcome=\"completed\"}") in an exposition text;
 * -1 when absent. */
double ops_metric(const char *text, const char *series);

/* GET /metrics on port and the value of series in it (ops_metric); -2
 * when /metrics did not answer 200, -1 when the series is absent. The
 * text itself is not kept (a test that reads more of it fetches it
 * with ops_http_get into a buffer of its own). */
double ops_scrape(int port, const char *series);

/* Checks text against the Prometheus text format 0.0.4: every line a
 * "# HELP name ..." / "# TYPE name counter|gauge|histogram" comment or a
 * sample "name[{l="v",...}] value" whose family has a TYPE line before it,
 * histogram buckets cumulative and ending in le="+Inf" equal to _count.
 * Returns the number of samples, or -1 (printing the bad line). */
long ops_metrics_check(const char *text);

/* Committed offset of the test's group for partition of the schedule
 * topic (-1001 when none). */
int64_t ops_committed(struct e2e *t, int32_t partition);

/* Members of the test's consumer group per the broker (-1 on error). */
int ops_group_members(struct e2e *t);

/* Reads a whole file (malloc'd, NUL-terminated) or NULL. */
char *ops_slurp(const char *path);

#endif /* RL_OPS_TEST_H */
