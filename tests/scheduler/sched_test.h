/* Support for the scheduler's tests: a schedule written straight into the
 * test's ledger, `runledger scheduler` and `runledger schedules` started
 * with the test's environment, and the windows a schedule expects. */
#ifndef SCHED_TEST_H
#define SCHED_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "e2e.h"

/* Creates schedule name of job for tenant "tenant-a": cron (six fields,
 * seconds first), window, catch-up policy, audit_only. */
void sched_set(struct e2e *t, const char *name, const char *job,
               const char *cron, const char *window, const char *catchup,
               int audit_only);

/* Starts `runledger scheduler` with worker id "<t->name>-<tag>", metrics
 * on http_port (0: none) and args (NULL-terminated); stderr to
 * <t->name>.sched-<tag>.log. Returns its pid. */
pid_t sched_spawn(struct e2e *t, const char *tag, int http_port,
                  const char *const *args);

/* Runs `runledger <args...>` to its end with the test's environment;
 * stdout into out (may be NULL). Returns its exit status. */
int sched_run(struct e2e *t, char *out, size_t out_size,
              const char *const *args);

/* 1 when the log of scheduler tag has a line holding text. */
int sched_log_has(struct e2e *t, const char *tag, const char *text);

/* The windows of schedule name missing their run among those in
 * (from, to] (epoch seconds), into starts (at most max); -1 on error. */
long sched_gaps(struct e2e *t, const char *name, int64_t from, int64_t to,
                int64_t *starts, size_t max);

/* The schedule's cursor and creation time (epoch seconds). */
int64_t sched_through(struct e2e *t, const char *name);
int64_t sched_created(struct e2e *t, const char *name);

/* Wall clock, epoch seconds. */
int64_t sched_now(void);

/* Sleeps ms milliseconds. */
void sched_sleep_ms(long ms);

#endif /* SCHED_TEST_H */
