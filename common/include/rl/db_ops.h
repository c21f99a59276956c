#ifndef RL_DB_OPS_H
#define RL_DB_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "rl/db_conn.h"
#include "rl/run_status.h"
#include "rl/runid.h"

/* The operator's side of the ledger: `runledger runs`, `budgets`,
 * `report`, `approvers` and `receive`. The service process runs none of these
 * (the rl/db_*.h of each concern are what it runs); same conventions as
 * rl/db_conn.h: 0 or a negative enum rl_err with errstr filled, one connection
 * per thread.
 *
 * Most of these statements run unprepared: a command runs each once. */

/* Length of "YYYY-MM-DDTHH:MM:SS.ffffff+00:00" plus NUL. */
#define RL_DB_TIME_SIZE 33

/* ---- runs ------------------------------------------------------------ */

/* Filters of `runledger runs list`; NULL members match everything. */
struct rl_runs_filter {
    const char *status;
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
 * RL_ERR_DB. */
int rl_db_run_cancel(struct rl_db *db, const char *run_id, const char *actor,
                     const char *reason, struct rl_decision *out, char *errstr,
                     size_t errstr_size);

/* Which runs `runs cancel --tenant` cancels. tenant is required; job and
 * version NULL match every one; statuses is a comma-separated subset of
 * "pending,running,awaiting_approval" (NULL: "pending,awaiting_approval");
 * only runs registered (created_at) before created_before, a timestamp
 * (NULL: the moment the cancel starts, on the server's clock). */
struct rl_cancel_filter {
    const char *tenant;
    const char *job;
    const char *version;
    const char *statuses;
    const char *created_before;
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

/* ---- concurrency limits (schema/018_fair_claims.sql) ------------------ */

/* `limits set`: the concurrency limit (runs running at once across every
 * worker; -1: keep what is set, none when new) and the weight (fair share
 * of slots; 0: keep, 1 when new) of tenant, or with job (not NULL or "")
 * the concurrency limit of that job alone. Returns 0, RL_ERR_INVALID or
 * RL_ERR_DB. */
int rl_db_limit_set(struct rl_db *db, const char *tenant, const char *job,
                    int concurrency, int weight, char *errstr,
                    size_t errstr_size);

/* `limits remove`. Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_limit_remove(struct rl_db *db, const char *tenant, const char *job,
                       char *errstr, size_t errstr_size);

/* `limits show`: every limit (of tenant when not NULL) with its runs
 * running and waiting (pending and due), as a JSON array. *json is
 * malloc'd. Returns 0 or RL_ERR_DB. */
int rl_db_limits_json(struct rl_db *db, const char *tenant, char **json,
                      char *errstr, size_t errstr_size);

/* ---- budgets, cost report (schema/004_budgets.sql) -------------------- */

/* `budgets set`: the daily token budget of tenant (job NULL or "": the
 * whole tenant). Returns 0, RL_ERR_INVALID or RL_ERR_DB. */
int rl_db_budget_set(struct rl_db *db, const char *tenant, const char *job,
                     int64_t daily_tokens, const char *actor, char *errstr,
                     size_t errstr_size);

/* `budgets remove`. Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_budget_remove(struct rl_db *db, const char *tenant, const char *job,
                        char *errstr, size_t errstr_size);

/* `budgets wake`: the budget-deferred runs of tenant (of job too, when
 * not NULL or "") waiting for a later window become due now, each with a
 * 'wake' decision (actor, reason) in run_decisions; a deadline the
 * deferral extended gives back the part of the wait that was skipped. A
 * run that still does not fit is deferred again at its dispatch. Works
 * in batches of 500. *woken is the number made due. Returns 0,
 * RL_ERR_INVALID (no tenant) or RL_ERR_DB. */
int rl_db_budget_wake(struct rl_db *db, const char *tenant, const char *job,
                      const char *actor, const char *reason, int64_t *woken,
                      char *errstr, size_t errstr_size);

/* `budgets show`: every budget (of tenant when not NULL) with today's
 * (UTC) reserved, spent, left and deferrals, as a JSON array. *json is
 * malloc'd. Returns 0 or RL_ERR_DB. */
int rl_db_budgets_json(struct rl_db *db, const char *tenant, char **json,
                       char *errstr, size_t errstr_size);

/* `report`: runs scheduled at or after since, grouped by "tenant", "job"
 * (tenant and job) or NULL (one total row), as a JSON array of objects:
 * tenant, job, runs, completed, generations (attempts with outcome ok),
 * extra_generations (per run, attempts that may have generated - ok,
 * ambiguous, lease_lost, or no outcome - beyond the first), dispatches,
 * budget_deferred (runs waiting for the next budget window),
 * prompt_tokens, completion_tokens, cached_tokens. *json is malloc'd.
 * Returns 0, RL_ERR_INVALID (since is not a timestamp) or RL_ERR_DB. */
int rl_db_report_json(struct rl_db *db, const char *since, const char *by,
                      char **json, char *errstr, size_t errstr_size);

/* ---- reference receiver (schema/005_receiver.sql) -------------------- */

/* What the receiver did with one notification. */
enum rl_receive_status {
    RL_RECEIVE_APPLIED,   /* first time this key was seen: row inserted */
    RL_RECEIVE_DUPLICATE, /* the key is known with the same payload */
    RL_RECEIVE_CONFLICT   /* the key is known with another payload: refused,
                             recorded in receiver_conflicts */
};

/* `runledger receive`: applies one notification keyed by idempotency_key
 * (INSERT ... ON CONFLICT DO NOTHING into received_notifications); a known
 * key with another payload (compared as jsonb) is never overwritten.
 * Returns 0 with *status set, RL_ERR_INVALID (payload not JSON) or
 * RL_ERR_DB. */
int rl_db_receive(struct rl_db *db, const char *idempotency_key,
                  const char *payload_json, const char *topic,
                  int32_t partition, int64_t offset,
                  enum rl_receive_status *status, char *errstr,
                  size_t errstr_size);

/* ---- approval gates (schema/006_approval.sql) ------------------------- *
 *
 * The proposal's canonical text and digest come from rl/approval.h; the
 * worker's proposal is rl_db_propose_attempt (rl/db_complete.h). */

/* What a decision on a proposal found or did. */
struct rl_approval_decision {
    enum rl_run_status status; /* the run's status after the call */
    char digest[RL_HEX_SIZE];  /* the stored proposal's digest ("" if none) */
    int outbox_rows;           /* notifications queued by an approval */
};

/* `runs approve` (approve 1) or `runs reject` (approve 0), in one
 * transaction (plpgsql rl_decide_run): the run must be awaiting_approval
 * and undecided, digest must be its proposal's digest and actor an approver
 * of its tenant. Approval records the decision bound to the digest,
 * completes the run with the proposal's content and queues one outbox row
 * per destination channel (the envelope of struct rl_complete_req). Rejection
 * fails the run with error_class "rejected". Of concurrent decisions
 * exactly one succeeds. Returns 0, RL_ERR_NOTFOUND, RL_ERR_CONFLICT
 * (refused: errstr says why; nothing changed) or RL_ERR_DB. */
int rl_db_decide_run(struct rl_db *db, const char *run_id, const char *digest,
                     const char *actor, int approve, const char *reason,
                     struct rl_approval_decision *out, char *errstr,
                     size_t errstr_size);

/* The proposal of a run and the decision on it, for `runs show`. Strings
 * owned (rl_run_proposal_clear); NULL or "" for SQL NULL. */
struct rl_run_proposal {
    enum rl_run_status status;
    char *tenant;
    char *proposal_json; /* as PostgreSQL prints the jsonb */
    char digest[RL_HEX_SIZE];
    char *decision; /* "approve", "reject" or NULL */
    char *actor;
    char *reason;
    char approved_digest[RL_HEX_SIZE];
    char decided_at[RL_DB_TIME_SIZE];
};

/* Frees what p owns and zeroes it; NULL is accepted. */
void rl_run_proposal_clear(struct rl_run_proposal *p);

/* Reads the proposal of run_id. Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_run_proposal(struct rl_db *db, const char *run_id,
                       struct rl_run_proposal *out, char *errstr,
                       size_t errstr_size);

/* `approvers add`: actor may decide on tenant's proposals. *added is 0 when
 * it already could. Returns 0 or RL_ERR_DB. */
int rl_db_approver_add(struct rl_db *db, const char *tenant, const char *actor,
                       int *added, char *errstr, size_t errstr_size);

/* `approvers remove`. Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_approver_remove(struct rl_db *db, const char *tenant,
                          const char *actor, char *errstr, size_t errstr_size);

/* `approvers list`: approvers (of tenant when not NULL) as a JSON array of
 * {tenant, actor, added_at}. *json is malloc'd. Returns 0 or RL_ERR_DB. */
int rl_db_approvers_json(struct rl_db *db, const char *tenant, char **json,
                         char *errstr, size_t errstr_size);

/* ---- retention (`runledger purge`, common/src/db/purge.c) ------------- */

/* Rows a purge removed, or a dry run would remove, per table. */
struct rl_purge_counts {
    int64_t runs;
    int64_t attempts;
    int64_t decisions;    /* run_decisions: operator decisions */
    int64_t approvals;    /* approvals: the decision on a proposal */
    int64_t delivered;    /* outbox_delivered: delivered notifications */
    int64_t reservations; /* budget_reservations left by an attempt */
    int64_t model_calls;  /* model_calls: calls counted for rate limits */
    int64_t tombstones;   /* run_tombstones written (one per run) */
};

/* What is left of a purged run (run_tombstones): enough to answer its
 * event delivered again, and `runs show`. */
struct rl_tombstone {
    char run_id[RL_HEX_SIZE];
    char fingerprint[RL_HEX_SIZE];
    char job[256];
    char tenant[256];
    char scheduled_at[RL_DB_TIME_SIZE];
    char version[256];
    char final_status[32];
    char finished_at[RL_DB_TIME_SIZE]; /* updated_at of the run when purged */
    char purged_at[RL_DB_TIME_SIZE];
};

/* The statuses a purge may remove (the final ones), *n of them; static. */
const char *const *rl_db_purge_statuses(size_t *n);

/* 1 when status is one of rl_db_purge_statuses. */
int rl_db_purge_status_known(const char *status);

/* The cutoff of a purge, now() on the server minus older_than_seconds, as
 * "YYYY-MM-DDTHH:MM:SS.ffffff+00:00" into cutoff (RL_DB_TIME_SIZE). Every
 * batch of one purge uses the same cutoff. Returns 0 or RL_ERR_DB. */
int rl_db_purge_cutoff(struct rl_db *db, int64_t older_than_seconds,
                       char *cutoff, size_t cutoff_size, char *errstr,
                       size_t errstr_size);

/* What a purge of runs in one of statuses (nstatuses, each one of
 * rl_db_purge_statuses) last updated before cutoff would remove: runs
 * with no undelivered outbox row and no dead-lettered one (outbox_dead),
 * and their attempts, decisions,
 * approvals, delivered notifications and budget reservations. Reads only.
 * Returns 0, RL_ERR_INVALID (a status that is not final) or RL_ERR_DB. */
int rl_db_purge_count(struct rl_db *db, const char *const *statuses,
                      size_t nstatuses, const char *cutoff,
                      struct rl_purge_counts *out, char *errstr,
                      size_t errstr_size);

/* Removes at most batch (<= 0: 1,000) of the runs rl_db_purge_count
 * counts, with their rows in the other tables, in one transaction; runs
 * another session has locked are skipped. out->runs is 0 when none is
 * left. Returns 0, RL_ERR_INVALID (a status that is not final, or a
 * notification queued for a run meanwhile: nothing removed) or
 * RL_ERR_DB. */
int rl_db_purge_batch(struct rl_db *db, const char *const *statuses,
                      size_t nstatuses, const char *cutoff, int batch,
                      struct rl_purge_counts *out, char *errstr,
                      size_t errstr_size);

/* Removes at most batch (<= 0: 1,000) tombstones of runs that finished
 * before cutoff, in one transaction, into *removed (0: none left); with
 * dry_run, counts all of them and removes nothing. Returns 0 or
 * RL_ERR_DB. Whether the cutoff is safe (older than the topics'
 * retention) is the caller's check. */
int rl_db_purge_tombstones(struct rl_db *db, const char *cutoff, int batch,
                           int dry_run, int64_t *removed, char *errstr,
                           size_t errstr_size);

/* The tombstone of run_id into out. Returns 0, RL_ERR_NOTFOUND (none) or
 * RL_ERR_DB. */
int rl_db_tombstone_get(struct rl_db *db, const char *run_id,
                        struct rl_tombstone *out, char *errstr,
                        size_t errstr_size);

#endif /* RL_DB_OPS_H */
