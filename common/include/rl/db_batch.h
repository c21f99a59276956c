#ifndef RL_DB_BATCH_H
#define RL_DB_BATCH_H

/* Batch mode as operators see it: which jobs are sent through the
 * provider's batch API, as `runledger batch` sets them
 * (schema/060_batch_mode.sql), the batch a run waited in, and the gauges
 * /metrics reports (common/src/db/batch.c). The batcher's statements are
 * by stage, a header each: db_batch_handoff.h, db_batch_lease.h,
 * db_batch_submit.h, db_batch_poll.h, db_batch_output.h. Conventions:
 * rl/db_conn.h; operator statements run unprepared (a command runs each
 * once). */

#include <stddef.h>
#include <stdint.h>

#include "rl/batch_state.h"

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

/* ---- what operators read ----------------------------------------------- */

/* The batch of run_id's latest batch attempt as a JSON object (batch_id,
 * provider_batch_id, batch_state, provider_status, attempt_no,
 * run_state, parked_at, submitted_at) in *json (malloc'd), or "null"
 * when the run never waited for a batch. Returns 0 or RL_ERR_DB. */
int rl_db_batch_of_run(struct rl_db *db, const char *run_id, char **json,
                       char *errstr, size_t errstr_size);

/* Ledger-wide batch gauges for /metrics. */
struct rl_db_batch_gauges {
    int64_t by_state[RL_BATCH_STATE_COUNT]; /* by enum rl_batch_state */
    int64_t runs_waiting;                   /* runs waiting for or in a batch */
    double oldest_open_seconds; /* age of the oldest batch not finished */
};

/* Reads g in one statement. Returns 0 or RL_ERR_DB. */
int rl_db_batch_gauges(struct rl_db *db, struct rl_db_batch_gauges *g,
                       char *errstr, size_t errstr_size);

#endif /* RL_DB_BATCH_H */
