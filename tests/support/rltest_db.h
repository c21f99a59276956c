#ifndef RL_TEST_DB_H
#define RL_TEST_DB_H

#include <stddef.h>
#include <stdint.h>

#include "rl/db_claim.h"
#include "rl/db_complete.h"
#include "rl/db_conn.h"
#include "rl/db_dispatch.h"
#include "rl/db_outbox.h"
#include "rl/runid.h"
#include "rl/timefmt.h"

/* One run at a time over the batched statements the service runs, so a
 * test that claims, dispatches or completes a single run checks the SQL
 * production executes, not a single-run twin of it. Each is a thin
 * wrapper: a batch of one, its per-run result turned into the return
 * code. */

/* rl_db_register_claim_some for one run, claimed when claimable. */
int rltest_db_claim(struct rl_db *db, const struct rl_run_reg *reg,
                    const char *worker, int lease_seconds,
                    struct rl_claim *claim, char *errstr, size_t errstr_size);

/* rl_db_dispatch_runs for one run, reserving estimate tokens against the
 * run's budgets. Returns 0 with *status and (RECORDED) *attempt_no set;
 * on DEFERRED and WAIT, next_window (RL_TIME_UTC_SIZE bytes, may be NULL)
 * receives when the run is due again and errstr why; on DEADLINE, errstr
 * says so. Returns RL_ERR_STALE when the lease is gone, or the batch's
 * error. */
int rltest_db_dispatch_budget(struct rl_db *db, const char *run_id,
                              const char *worker, int64_t lease_epoch,
                              const char *idempotency_key, int64_t estimate,
                              int64_t wait_ms, enum rl_dispatch_status *status,
                              int *attempt_no, char *next_window, char *errstr,
                              size_t errstr_size);

/* rltest_db_dispatch_budget without an estimate, for a run that must be
 * recorded: returns 0 with *attempt_no, RL_ERR_STALE, RL_ERR_CONFLICT
 * (deferred or past its deadline: errstr says which) or the batch's
 * error. */
int rltest_db_dispatch(struct rl_db *db, const char *run_id, const char *worker,
                       int64_t lease_epoch, const char *idempotency_key,
                       int *attempt_no, char *errstr, size_t errstr_size);

/* rl_db_complete_runs for one run. oc NULL: no attempt's outcome (attempt
 * 0, which matches none). *completed (may be NULL) is 1 when this call
 * completed the run, 0 when it was completed before. Returns 0,
 * RL_ERR_STALE, RL_ERR_NOTFOUND or the batch's error. */
int rltest_db_complete(struct rl_db *db, const char *run_id, const char *worker,
                       int64_t lease_epoch, const struct rl_attempt_ok *oc,
                       const char *output_json, const char *const *channels,
                       size_t n_channels, int *completed, char *errstr,
                       size_t errstr_size);

/* rl_db_outbox_finish_rows with one outcome for the whole batch the
 * relay locked: delivered, or retried (due again at once). Returns as
 * rl_db_outbox_finish_rows. */
int rltest_db_outbox_finish(struct rl_db *db, const struct rl_outbox_row *rows,
                            size_t n, int delivered, char *errstr,
                            size_t errstr_size);

/* ---- test-only entry points of the db library --------------------------
 * Defined in common/src/db/ (conn.c, exec.c) and declared here, not in a
 * public header, because the service never calls them. */

/* Checks the connection with a round trip; when it was lost, reconnects
 * once (prepared statements and the schema setting are restored lazily).
 * Returns 0 or RL_ERR_DB. */
int rl_db_ping(struct rl_db *db, char *errstr, size_t errstr_size);

/* Runs one parameterised statement (the service's own statements are
 * named, in common/src/db/). params are nparams text values (NULL: SQL
 * NULL). If value is not NULL, copies the first column of the first row
 * into it ("" when there is none or it is NULL). Returns the
 * number of rows returned or affected (>= 0), RL_ERR_INVALID (data or
 * constraint error, e.g. a write-once violation) or RL_ERR_DB. */
int rl_db_exec(struct rl_db *db, const char *sql, int nparams,
               const char *const *params, char *value, size_t value_size,
               char *errstr, size_t errstr_size);

/* One runs row as a test reads it. Strings owned (rltest_run_clear); NULL
 * or "" (fixed arrays) for SQL NULL; JSON columns as PostgreSQL prints
 * jsonb. */
struct rltest_run {
    char run_id[RL_HEX_SIZE];
    char *job;
    char *tenant;
    char scheduled_at[RL_TIME_UTC_SIZE];
    char *version;
    char fingerprint[RL_HEX_SIZE];
    char status[24];
    char *lock_owner;
    int lease_live; /* lock_expires_at is in the future (db clock) */
    int64_t lease_epoch;
    int attempts;
    int ambiguous_prior;
    int ambiguous_count;
    char *request_json;
    char *raw_input;
    char *output_json;
    char *last_error;
    char *error_class;
    char next_attempt_at[RL_DB_TIME_SIZE];
    char lock_expires_at[RL_DB_TIME_SIZE];
    char deadline_at[RL_DB_TIME_SIZE];
    char completed_at[RL_DB_TIME_SIZE];
    char *source_topic;
    int32_t source_partition;
    int64_t source_offset;
};

/* Reads one run (through rl_db_exec). Returns 0, RL_ERR_NOTFOUND,
 * RL_ERR_NOMEM or the statement's error. */
int rltest_db_get_run(struct rl_db *db, const char *run_id,
                      struct rltest_run *run, char *errstr, size_t errstr_size);

/* Frees the strings of run and zeroes it; NULL is accepted. */
void rltest_run_clear(struct rltest_run *run);

#endif /* RL_TEST_DB_H */
