#ifndef RL_DB_APPROVAL_H
#define RL_DB_APPROVAL_H

#include <stddef.h>
#include <stdint.h>

#include "rl/db_complete.h"
#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/run_status.h"
#include "rl/runid.h"

/* Approval gates as operators decide them: `runs approve`/`reject`, a
 * run's proposal for `runs show`, and `approvers` (schema/006_approval.sql,
 * common/src/db/approval.c). The proposal's canonical text and digest
 * come from rl/approval.h; the worker stores a proposal in place of a
 * completion (rl_db_propose_attempt, below). Conventions: rl/db_conn.h;
 * operator statements run unprepared (a command runs each once). */

struct rl_db;

/* What a decision on a proposal found or did. */
struct rl_approval_decision {
    enum rl_run_status status; /* the run's status after the call */
    char digest[RL_HEX_SIZE];  /* the stored proposal's digest ("" if none) */
    int outbox_rows;           /* notifications queued by an approval */
};

/* A decision an operator takes on a run's proposal. Borrowed. */
struct rl_decision_req {
    const char *run_id;
    const char *digest; /* the proposal's digest the operator reviewed */
    const char *actor;  /* who decides: an approver of the run's tenant */
    int approve;        /* 1: approve; 0: reject */
    const char *reason; /* NULL: none */
};

/* `runs approve` (req->approve 1) or `runs reject` (0), in one
 * transaction (plpgsql rl_decide_run): the run must be awaiting_approval
 * and undecided, digest must be its proposal's digest and actor an approver
 * of its tenant. Approval records the decision bound to the digest,
 * completes the run with the proposal's content and queues one outbox row
 * per destination channel (the envelope of struct rl_complete_req). Rejection
 * fails the run with error_class "rejected". Of concurrent decisions
 * exactly one succeeds. Returns 0, RL_ERR_NOTFOUND, RL_ERR_CONFLICT
 * (refused: errstr says why; nothing changed) or RL_ERR_DB. */
int rl_db_decide_run(struct rl_db *db, const struct rl_decision_req *req,
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

/* `approvers add`: actor may decide on tenant's proposals; with channel
 * (NULL: every run of the tenant) only those whose every destination is a
 * channel it was added for. The audit trail records the grant and who
 * made it (by) in the same statement. *added is 0 when it already could
 * (nothing is recorded then). Returns 0 or RL_ERR_DB. */
int rl_db_approver_add(struct rl_db *db, const char *tenant, const char *actor,
                       const char *channel, const char *by, int *added,
                       char *errstr, size_t errstr_size);

/* `approvers remove`: the actor's row for channel, or with channel NULL
 * all its rows of the tenant, each recorded in the audit trail as removed
 * by `by`. Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_approver_remove(struct rl_db *db, const char *tenant,
                          const char *actor, const char *channel,
                          const char *by, char *errstr, size_t errstr_size);

/* `approvers list`: approvers (of tenant when not NULL) as a JSON array of
 * {tenant, actor, added_at, channel}. *json is malloc'd. Returns 0 or
 * RL_ERR_DB. */
int rl_db_approvers_json(struct rl_db *db, const char *tenant, char **json,
                         char *errstr, size_t errstr_size);

/* What storing a proposal did. */
enum rl_propose_status {
    RL_PROPOSE_WAITING,    /* stored: the run is awaiting_approval */
    RL_PROPOSE_ALREADY,    /* the same proposal was stored before (a redo) */
    RL_PROPOSE_SUPERSEDED, /* the run already held another proposal: the new
                              answer is refused and the run failed with
                              error_class "proposal_immutable" (errstr) */
    RL_PROPOSE_COMPLETED   /* the run is already completed: nothing changed */
};

/* For an approval-required run, in place of its completion: records
 * outcome "ok" for attempt oc->attempt_no and, under the lease, stores
 * proposal_json (write-once) with its digest and moves the run to
 * awaiting_approval, releasing the lease, in one statement. No
 * notification of the answer is queued; with console_base_url (NULL or
 * "": none) one approval_requested outbox row is, in the same statement,
 * linking to {console_base_url}/approvals/<run_id> (channel
 * "approval_requested", explicit payload). Returns 0 with *status set,
 * RL_ERR_STALE (lease gone, or no such run), RL_ERR_INVALID or RL_ERR_DB. */
int rl_db_propose_attempt(struct rl_db *db, const struct rl_lease *lease,
                          const struct rl_attempt_ok *oc,
                          const char *proposal_json, const char *digest,
                          const char *console_base_url,
                          enum rl_propose_status *status, char *errstr,
                          size_t errstr_size);

#endif /* RL_DB_APPROVAL_H */
