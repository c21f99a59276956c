#ifndef RL_DB_BATCH_HANDOFF_H
#define RL_DB_BATCH_HANDOFF_H

/* The hand-off of a batch-mode run from the worker that recorded its
 * dispatch to the batcher (common/src/db/batch_handoff.c,
 * schema/functions/rl_batch_park.sql): which jobs are in batch mode, and
 * the statement that passes runs' leases to the batcher (RL_BATCH_OWNER,
 * rl/db_batch_lease.h). Conventions: rl/db_conn.h. */

#include <stddef.h>
#include <stdint.h>

struct rl_db;

/* A run whose dispatch the worker recorded, to hand to the batcher. */
struct rl_batch_park_req {
    const char *run_id;
    int64_t lease_epoch;
    int attempt_no;
    const char *endpoint; /* "/v1/chat/completions" or "/v1/responses" */
    const char *model;
    const char *body; /* the request line's body (JSON) */
};

enum rl_batch_park_status {
    RL_BATCH_PARKED = 0, /* the batcher's now: nothing to send */
    RL_BATCH_LIVE,       /* not in batch mode (any more): call it live */
    RL_BATCH_LOST        /* the worker's lease is gone: send nothing */
};

/* rl_batch_park: in one statement, the runs of reqs in batch mode pass
 * from worker's lease to the batcher's and wait in batch_runs; status[k]
 * says what became of reqs[k]. Returns 0, RL_ERR_NOMEM or RL_ERR_DB
 * (nothing changed). */
int rl_db_batch_park(struct rl_db *db, const char *worker,
                     const struct rl_batch_park_req *reqs, size_t n,
                     enum rl_batch_park_status *status, char *errstr,
                     size_t errstr_size);

/* The (job, tenant) pairs in batch mode, as "job\ttenant" lines (tenant
 * "" for every tenant) in *text (malloc'd). Returns 0 or RL_ERR_DB. */
int rl_db_batch_modes(struct rl_db *db, char **text, char *errstr,
                      size_t errstr_size);

#endif /* RL_DB_BATCH_HANDOFF_H */
