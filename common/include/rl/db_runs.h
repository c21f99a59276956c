#ifndef RL_DB_RUNS_H
#define RL_DB_RUNS_H

#include <stddef.h>
#include <stdint.h>

#include "rl/db_conn.h"
#include "rl/run_status.h"
#include "rl/runid.h"

/* The operator's statements on runs: `runledger runs` list, show, retry,
 * resolve and cancel (common/src/db/runs.c). Conventions: rl/db_conn.h;
 * operator statements run unprepared (a command runs each once). */

struct rl_db;

/* Filters of `runledger runs list`; NULL members match everything. */
struct rl_runs_filter {
    const enum rl_run_status *status;
    const char *tenant;
    const char *job;
    const char *since; /* RFC 3339: scheduled at or after */
    int limit;         /* <= 0: 50 */
};

/* Runs matching filter, newest scheduled first, as a JSON array of
 * objects (run_id, job, tenant, scheduled_at, version, status, attempts,
 * lease_epoch, lock_owner, error_class, last_error, created_at,
 * completed_at). *json is malloc'd (free with free()).
 * Returns 0, RL_ERR_INVALID (e.g. since is not a timestamp) or RL_ERR_DB. */
int rl_db_runs_list_json(struct rl_db *db, const struct rl_runs_filter *filter,
                         char **json, char *errstr, size_t errstr_size);

/* One run as a JSON object {"run":{...}, "attempts":[...], "outbox":[...
 * with "delivered"], "decisions":[...]}. *json is malloc'd.
 * Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_run_report_json(struct rl_db *db, const char *run_id, char **json,
                          char *errstr, size_t errstr_size);

/* What an operator decision found and did. */
struct rl_decision {
    char prior_status[24]; /* the run's status before ("" if not found) */
    int attempts;          /* runs.attempts at the decision */
    int attempts_closed;   /* retry: outcome-less attempts closed as
                              ambiguous */
    int outbox_rows;       /* resolve --completed: outbox rows written */
};

/* `runs retry`: re-opens a failed or unknown run for a new attempt under
 * the same run ID (status pending, next_attempt_at now(), a spent deadline
 * extended by its original length; attempts without an outcome are closed
 * as ambiguous) and records the decision (actor, reason) in
 * run_decisions, in one statement. A run whose attempts ran out
 * (attempts_exhausted) gets one more: its dispatches stay recorded, and
 * one of them stops counting against RUNLEDGER_MAX_ATTEMPTS.
 * Returns 0, RL_ERR_NOTFOUND, RL_ERR_CONFLICT (any other status; nothing
 * changed; errstr names the status) or RL_ERR_DB. */
int rl_db_run_retry(struct rl_db *db, const char *run_id, const char *actor,
                    const char *reason, struct rl_decision *out, char *errstr,
                    size_t errstr_size);

/* rl_db_run_retry granting extra_attempts more attempts (> 0; 0: as
 * rl_db_run_retry). */
int rl_db_run_retry_attempts(struct rl_db *db, const char *run_id,
                             const char *actor, const char *reason,
                             int extra_attempts, struct rl_decision *out,
                             char *errstr, size_t errstr_size);

/* `runs resolve --failed`: an unknown run becomes failed (error_class
 * "operator"), decision recorded. Same returns as rl_db_run_retry. */
int rl_db_run_resolve_failed(struct rl_db *db, const char *run_id,
                             const char *actor, const char *reason,
                             struct rl_decision *out, char *errstr,
                             size_t errstr_size);

/* `runs resolve --completed-from`: an unknown run completes with
 * output_json (write-once) and the outbox rows of its notify channels,
 * through rl_complete_run under an operator lease ("operator:<actor>",
 * lease_epoch + 1), decision recorded, all in one transaction.
 * Returns 0, RL_ERR_NOTFOUND, RL_ERR_CONFLICT (not unknown),
 * RL_ERR_INVALID (output is not JSON or is null; nothing changed) or
 * RL_ERR_DB. */
int rl_db_run_resolve_completed(struct rl_db *db, const char *run_id,
                                const char *actor, const char *reason,
                                const char *output_json,
                                struct rl_decision *out, char *errstr,
                                size_t errstr_size);

/* `runs cancel RUN_ID` (schema/015_cancel.sql): a pending (budget-deferred
 * included), running or awaiting_approval run becomes cancelled, a
 * terminal status, and the decision (actor, reason, prior status) is
 * recorded in run_decisions, in one statement. A running run's lease is
 * fenced: lock cleared and lease_epoch + 1, so every later write of its
 * worker (dispatch, outcome, completion, proposal) is refused as stale;
 * its attempt without an outcome gets outcome "cancelled" (out->
 * attempts_closed), and the worker's renewer, finding the lease gone,
 * cancels the model call. Nothing is published for a cancelled run.
 * Returns 0, RL_ERR_NOTFOUND, RL_ERR_CONFLICT (completed, failed, unknown
 * or already cancelled; nothing changed; errstr names the status) or
 * RL_ERR_DB. Inside a transaction of the caller's, the horizon refresh is
 * left to the caller (rl_db_model_horizons_refresh after its COMMIT). */
int rl_db_run_cancel(struct rl_db *db, const char *run_id, const char *actor,
                     const char *reason, struct rl_decision *out, char *errstr,
                     size_t errstr_size);

/* Brings each model's rate-limit horizon back to the runs still waiting
 * for it, as rl_db_run_cancel does when it commits by itself; a caller
 * that cancels inside its own transaction calls this after its COMMIT.
 * A failure is logged, never returned: the next cancel or purge tries
 * again. */
void rl_db_model_horizons_refresh(struct rl_db *db);

/* Which runs `runs cancel --tenant` cancels. tenant is required; job and
 * version NULL match every one; statuses (nstatuses of them) is a subset
 * of pending, running and awaiting_approval (NULL: pending and
 * awaiting_approval);
 * only runs registered (created_at) before created_before, a timestamp
 * (NULL: the moment the cancel starts, on the server's clock). */
struct rl_cancel_filter {
    const char *tenant;
    const char *job;
    const char *version;
    const enum rl_run_status *statuses;
    const char *created_before;
    size_t nstatuses;
};

/* `runs cancel --tenant ... --dry-run`: how many runs filter matches now.
 * Returns 0, RL_ERR_INVALID (no tenant, or a status that cannot be
 * cancelled) or RL_ERR_DB. */
int rl_db_runs_cancel_count(struct rl_db *db,
                            const struct rl_cancel_filter *filter,
                            int64_t *count, char *errstr, size_t errstr_size);

/* `runs cancel --tenant ...`: cancels the runs filter matches as
 * rl_db_run_cancel does each one, in transactions of at most batch runs
 * (<= 0: 500) so no run stays locked for long, until none matches. A run
 * that leaves the filter meanwhile (claimed, completed) is left alone.
 * *cancelled is the number cancelled, also when an error stops it
 * midway (the batches before it are committed). Returns 0,
 * RL_ERR_INVALID or RL_ERR_DB. */
int rl_db_runs_cancel(struct rl_db *db, const struct rl_cancel_filter *filter,
                      const char *actor, const char *reason, int batch,
                      int64_t *cancelled, char *errstr, size_t errstr_size);

#endif /* RL_DB_RUNS_H */
