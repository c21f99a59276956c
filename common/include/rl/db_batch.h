#ifndef RL_DB_BATCH_H
#define RL_DB_BATCH_H

/* Batch mode: which jobs are sent through the provider's batch API, as
 * `runledger batch` sets them (schema/060_batch_mode.sql,
 * common/src/db/batch.c). Conventions: rl/db_conn.h; operator statements
 * run unprepared (a command runs each once). */

#include <stddef.h>
#include <stdint.h>

struct rl_db;

/* One job's batch mode (tenant NULL or "": every tenant of the job). */
struct rl_batch_setting {
    const char *job;
    const char *tenant;
    int64_t window_ms;             /* collect a group at most this long */
    int64_t max_runs;              /* 1..50000 runs in one batch */
    int64_t max_bytes;             /* 1 KiB..200 MiB of request lines */
    const char *completion_window; /* asked of the provider, e.g. "24h" */
    const char *on_expiry;         /* "live", "rebatch" or "fail" */
};

/* `batch set`: creates or replaces the batch mode of s->job (and
 * s->tenant). Runs dispatched before keep the way they were sent.
 * Returns 0, RL_ERR_INVALID (a value out of range) or RL_ERR_DB. */
int rl_db_batch_setting_set(struct rl_db *db, const struct rl_batch_setting *s,
                            const char *actor, char *errstr,
                            size_t errstr_size);

/* `batch remove`: the job's runs not yet in a batch are sent live again.
 * Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_batch_setting_remove(struct rl_db *db, const char *job,
                               const char *tenant, char *errstr,
                               size_t errstr_size);

/* `batch show`: every setting (of job when not NULL) as a JSON array of
 * objects (job, tenant, window_seconds, max_runs, max_bytes,
 * completion_window, on_expiry, updated_by, updated_at) in *json
 * (malloc'd, the caller frees it). Returns 0 or RL_ERR_DB. */
int rl_db_batch_settings_json(struct rl_db *db, const char *job, char **json,
                              char *errstr, size_t errstr_size);

#endif /* RL_DB_BATCH_H */
