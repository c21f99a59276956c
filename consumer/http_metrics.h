#ifndef RL_HTTP_METRICS_H
#define RL_HTTP_METRICS_H

#include "rl/db_gauges.h"
#include "rl/metrics.h"

/* Defines every family /metrics reports (names, types, help, buckets).
 * Returns 0, or -1 when the registry refuses one. */
int rl_http_define_families(struct rl_metrics *m);

/* Sets the one-label series name{label="value"} to v. */
void rl_http_set_labelled(struct rl_metrics *m, const char *name,
                          const char *label, const char *value, double v);

/* The series of the concurrency limits read now, and only those (a limit
 * removed since the last reading leaves no stale series): by tenant and
 * job as they are (mode "plain"), by the first 12 hex digits of their
 * SHA-256 ("hashed"), or summed over them ("off"). */
void rl_http_set_limits(struct rl_metrics *m, const struct rl_db_gauges *g,
                        const char *mode);

/* The batch gauges (rl/db_batch.h) read on db and set in m; a failed
 * read leaves them as they were. */
struct rl_db;
void rl_http_set_batches(struct rl_metrics *m, struct rl_db *db);

#endif /* RL_HTTP_METRICS_H */
