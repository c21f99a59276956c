#ifndef RL_DB_CONSOLE_H
#define RL_DB_CONSOLE_H

#include <stddef.h>

#include "rl/db_conn.h"
#include "rl/run_status.h"
#include "rl/runid.h"

/* The web console's ledger (schema/040_console.sql,
 * common/src/db/console.c): console users and their sessions, the audit
 * trail, and the reads and the decision the console's pages make.
 * Tokens and session ids never reach the ledger: callers pass their
 * SHA-256 hex. Reads return one JSON text (malloc'd; the caller frees it)
 * built by PostgreSQL. Conventions: rl/db_conn.h; statements run
 * unprepared. */

struct rl_db;

/* `users add`: a console user NAME with role ("viewer", "approver" or
 * "operator") signing in with the token whose SHA-256 hex is token_sha256.
 * tenants_json: a JSON array of the tenants it may read, or NULL for
 * every tenant. A revoked user of that name is given the new role, token
 * and tenants. The audit trail records who added it (actor) in the same
 * statement. Returns 0,
 * RL_ERR_CONFLICT (an active user of that name exists), RL_ERR_INVALID (a
 * name or role the ledger refuses) or RL_ERR_DB. */
int rl_db_console_user_add(struct rl_db *db, const char *name, const char *role,
                           const char *token_sha256, const char *tenants_json,
                           const char *actor, char *errstr, size_t errstr_size);

/* `users revoke`: the user can no longer sign in, its sessions end, and
 * the audit trail records who revoked it (actor). Returns 0,
 * RL_ERR_NOTFOUND (no active user of that name) or RL_ERR_DB. */
int rl_db_console_user_revoke(struct rl_db *db, const char *name,
                              const char *actor, char *errstr,
                              size_t errstr_size);

/* `users list`: [{name, role, created_at, revoked_at, sessions}]. */
int rl_db_console_users_json(struct rl_db *db, char **json, char *errstr,
                             size_t errstr_size);

/* An active user: {"name", "role", "token_sha256"}. Returns 0,
 * RL_ERR_NOTFOUND (none, or revoked) or RL_ERR_DB. */
int rl_db_console_user_json(struct rl_db *db, const char *name, char **json,
                            char *errstr, size_t errstr_size);

/* Opens a session of user for ttl_seconds, from address (may be NULL), and
 * deletes sessions that expired. Returns 0, RL_ERR_NOTFOUND (no active
 * user) or RL_ERR_DB. */
int rl_db_console_session_open(struct rl_db *db, const char *session_sha256,
                               const char *user, const char *address,
                               int ttl_seconds, char *errstr,
                               size_t errstr_size);

/* The user of an unexpired session of an active user, used within the
 * last idle_seconds: {"name", "role"}; marks the session used. Returns 0,
 * RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_console_session_json(struct rl_db *db, const char *session_sha256,
                               int idle_seconds, char **json, char *errstr,
                               size_t errstr_size);

/* Ends a session (none: nothing to do). Returns 0 or RL_ERR_DB. */
int rl_db_console_session_close(struct rl_db *db, const char *session_sha256,
                                char *errstr, size_t errstr_size);

/* `runledger audit`: the audit rows, newest first, of run_id (NULL: of
 * every run) as [{id, at, actor, action, run_id, address, digest, via,
 * detail}], at most limit. */
int rl_db_audit_json(struct rl_db *db, const char *run_id, int limit,
                     char **json, char *errstr, size_t errstr_size);

/* The approvals queue, oldest first: [{run_id, job, tenant, scheduled_at,
 * waiting_since, age_seconds, digest}], at most limit, of the tenants the
 * console user viewer may read (NULL: every tenant). */
int rl_db_console_approvals_json(struct rl_db *db, int limit,
                                 const char *viewer, char **json, char *errstr,
                                 size_t errstr_size);

/* One run for its page: {run_id, job, tenant, status, ..., proposal (the
 * jsonb as PostgreSQL prints it, or null), proposal_digest, may_decide
 * (whether actor may decide it: rl_may_approve), decision {actor,
 * decision, reason, decided_at, digest} or null, attempts [...],
 * notifications [...], audit [...], timeline [{at, ms, lane, what,
 * detail, tone, span}] (every event of the run in time order: its
 * registration, leases, attempts, batch, approval, completion,
 * notifications and operators' actions)}, in one statement. A run of a
 * tenant the console user actor may not read is not found. Returns 0,
 * RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_console_run_json(struct rl_db *db, const char *run_id,
                           const char *actor, char **json, char *errstr,
                           size_t errstr_size);

/* Filters of the runs page; NULL or "" is no filter. statuses NULL is
 * every status, else the runs in one of nstatuses (0: no run). after is
 * the keyset cursor of the previous page ("<created_at>|<run_id>"). */
struct rl_console_runs_filter {
    const char *tenant;
    const char *job;
    const enum rl_run_status *statuses;
    size_t nstatuses;
    const char *from; /* created at or after, timestamptz text */
    const char *to;   /* created before */
    const char *after;
    int limit;
    const char *viewer; /* the console user: only its tenants; NULL all */
};

/* The runs page, newest first, keyset-paginated: {"runs": [...], "next":
 * cursor or null}, read in widening windows of creation time through the
 * BRIN index runs_created_brin (at most 9 statements), a small tenant's
 * by its jobs (2 statements). Returns 0, RL_ERR_INVALID (a filter PostgreSQL
 * cannot read) or RL_ERR_DB. */
int rl_db_console_runs_json(struct rl_db *db,
                            const struct rl_console_runs_filter *f, char **json,
                            char *errstr, size_t errstr_size);

/* The cost chart: [{tenant, day ("YYYY-MM-DD"), tokens, extra_generations}]
 * of the runs scheduled in the last `days` UTC days, as `runledger
 * report` counts them. */
int rl_db_console_costs_daily_json(struct rl_db *db, int days,
                                   const char *viewer, char **json,
                                   char *errstr, size_t errstr_size);

/* A decision taken in the console. Borrowed. */
struct rl_console_decision_req {
    const char *run_id;
    const char *digest;  /* the digest the page showed */
    const char *actor;   /* the signed-in user, never a form field */
    int approve;         /* 1 approve, 0 reject */
    const char *reason;  /* NULL: none */
    const char *address; /* the client's address, for the audit row */
};

/* What the decision found or did (plpgsql rl_decide_proposal). */
struct rl_console_decision {
    char result[32]; /* approved, rejected, not_found, not_waiting,
                      * digest_mismatch, not_allowed, not_approver */
    char status[32];
    char digest[RL_HEX_SIZE];
    int outbox_rows;
    char decided_by[128];
    char decided_at[RL_DB_TIME_SIZE];
    char decision[16];
};

/* Decides in one transaction: the user's role and its approver scope are
 * checked, the decision and its audit row recorded, together. Of
 * concurrent decisions exactly one succeeds. Returns 0 (out->result says
 * the outcome, refusals included) or RL_ERR_DB. */
int rl_db_console_decide(struct rl_db *db,
                         const struct rl_console_decision_req *req,
                         struct rl_console_decision *out, char *errstr,
                         size_t errstr_size);

/* BEGIN, COMMIT or ROLLBACK on db: the console wraps an operator action
 * and its audit row in one transaction. Returns 0 or an rl_err; COMMIT
 * returns RL_ERR_DB when PostgreSQL rolled the transaction back. */
int rl_db_console_tx(struct rl_db *db, const char *verb, char *errstr,
                     size_t errstr_size);

/* Inside a transaction (rl_db_console_tx): the operator decisions it
 * records (run_decisions) are audited as the console's, from address
 * (trigger run_decisions_audited). Returns 0 or an rl_err. */
int rl_db_console_audit_as_console(struct rl_db *db, const char *address,
                                   char *errstr, size_t errstr_size);

/* Appends the console's audit row of an operator action that records no
 * run decision (a dead letter's replay): actor, action, run_id (NULL or
 * "": none), the client's address (NULL: unknown) and detail. Returns 0
 * or RL_ERR_DB. */
int rl_db_console_audit_add(struct rl_db *db, const char *actor,
                            const char *action, const char *run_id,
                            const char *address, const char *detail,
                            char *errstr, size_t errstr_size);

/* Whether the connection is usable, idle outside any transaction (one a
 * request left open is rolled back here); reconnects when it is not.
 * Returns 0, or RL_ERR_DB when the caller must open a new connection. */
int rl_db_console_check(struct rl_db *db, char *errstr, size_t errstr_size);

#endif /* RL_DB_CONSOLE_H */
