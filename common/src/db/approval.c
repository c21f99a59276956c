/* approval.c: approval gates (schema/006_approval.sql): the proposal an
 * approval-required run waits with (stored by the worker under its lease),
 * an operator's decision on it, and who may decide for a tenant. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_approval.h"
#include "rl/db_complete.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rl/run_status.h"

/* The worker's statement: an approval-required run stores its answer as
 * an immutable proposal and waits (rl_propose_run in
 * schema/006_approval.sql) instead of completing; the attempt's outcome is
 * recorded in the same statement, as rl_complete_runs records it. With a
 * console base URL ($13), the run's entry into awaiting_approval queues
 * one approval_requested notification linking to its approval page, in
 * the same statement, so a waiting run and its ping commit together. */
/* clang-format off */
static const struct db_stmt propose_attempt_awaiting_approval = {
    DB_STMT_PROPOSE_ATTEMPT_AWAITING_APPROVAL,
    "propose_attempt_awaiting_approval",
    "WITH o AS ("
    "  UPDATE attempts"
    "     SET outcome = 'ok', http_status = $7::int4,"
    "         upstream_request_id = $8, prompt_tokens = $9::int8,"
    "         completion_tokens = $10::int8, cached_tokens = $11::int8,"
    "         latency_ms = $12::int8, error = NULL, finished_at = now()"
    "   WHERE run_id = $1 AND attempt_no = $6::int4 AND outcome IS NULL"
    "  RETURNING 1"
    "), p AS ("
    "  SELECT * FROM rl_propose_run($1, $2, $3::int8, $4::jsonb, $5)"
    "), n AS ("
    "  INSERT INTO outbox (run_id, channel, explicit_payload)"
    "  SELECT r.run_id, 'approval_requested', jsonb_build_object("
    "           'type', 'approval_requested', 'run_id', r.run_id,"
    "           'job', r.job, 'tenant', r.tenant,"
    "           'scheduled_at', to_char(r.scheduled_at AT TIME ZONE 'UTC',"
    "                                   'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"'),"
    "           'version', r.version, 'digest', $5::text,"
    "           'url', rtrim($13::text, '/') || '/approvals/' || r.run_id)"
    "    FROM p, runs r"
    "   WHERE p.result = 'proposed' AND $13::text IS NOT NULL"
    "     AND r.run_id = $1"
    "      ON CONFLICT DO NOTHING"
    ")"
    "SELECT p.result, p.digest, (SELECT count(*) FROM o) FROM p",
    13};
/* clang-format on */

/* The operator's statements: the decision and the approvers list. */
static const char ops_decide_run[] =
    "SELECT result, status, digest, outbox_rows"
    "  FROM rl_decide_run($1, $2, $3, $4, $5)";

static const char ops_run_proposal[] =
    "SELECT r.status, r.tenant, r.proposal::text, r.proposal_digest,"
    "       a.decision, a.actor, a.reason, a.digest,"
    "       " DB_TS_US("a.decided_at") ""
                                       "  FROM runs r LEFT JOIN approvals a "
                                       "ON a.run_id = r.run_id"
                                       " WHERE r.run_id = $1";

/* Each change and its audit row ($4 made it) in one statement: no grant
 * or revoke of a right to approve goes unrecorded. */
static const char ops_approver_add[] =
    "WITH n AS ("
    "  INSERT INTO approvers (tenant, actor, channel) VALUES ($1, $2, $3)"
    "      ON CONFLICT DO NOTHING RETURNING tenant, actor, channel),"
    " a AS (INSERT INTO audit (actor, action, via, detail)"
    "       SELECT $4, 'add_approver', 'cli',"
    "              format('%s of tenant %s%s', actor, tenant,"
    "                     ' for channel ' || channel)"
    "         FROM n)"
    "SELECT count(*) FROM n";

/* Without a channel, every row of the actor for the tenant goes. */
static const char ops_approver_remove[] =
    "WITH d AS ("
    "  DELETE FROM approvers WHERE tenant = $1 AND actor = $2"
    "     AND ($3::text IS NULL OR channel = $3)"
    "  RETURNING tenant, actor, channel),"
    " a AS (INSERT INTO audit (actor, action, via, detail)"
    "       SELECT $4, 'remove_approver', 'cli',"
    "              format('%s of tenant %s%s', actor, tenant,"
    "                     ' for channel ' || channel)"
    "         FROM d)"
    "SELECT count(*) FROM d";

static const char ops_approvers_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.tenant, x.actor), '[]')::text"
    "  FROM (SELECT tenant, actor, " DB_TS_US(
        "added_at") " AS added_at"
                    "          , channel FROM approvers"
                    "         WHERE $1::text IS NULL OR tenant = $1) x";

int
rl_db_propose_attempt(struct rl_db *db, const struct rl_lease *lease,
                      const struct rl_attempt_ok *oc, const char *proposal_json,
                      const char *digest, const char *console_base_url,
                      enum rl_propose_status *status, char *errstr,
                      size_t errstr_size)
{
    char epoch[32], attempt[16], http[16], prompt[32], completion[32],
        cached[32], latency[32];
    const char *params[13];
    const char *result;
    PGresult *res;
    int err = RL_ERR_DB;

    *status = RL_PROPOSE_WAITING;
    if (!proposal_json || !digest) {
        rl_set_err(errstr, errstr_size,
                   "could not store the proposal of run %s: no proposal",
                   lease->run_id);
        return RL_ERR_INVALID;
    }
    snprintf(epoch, sizeof(epoch), "%" PRId64, lease->epoch);
    snprintf(attempt, sizeof(attempt), "%d", oc ? oc->attempt_no : 0);
    params[0] = lease->run_id;
    params[1] = lease->worker;
    params[2] = epoch;
    params[3] = proposal_json;
    params[4] = digest;
    params[5] = attempt;
    params[6] = oc ? db_int_or_null(oc->http_status, http, sizeof(http)) : NULL;
    params[7] = oc && oc->upstream_request_id && *oc->upstream_request_id
                    ? oc->upstream_request_id
                    : NULL;
    params[8] =
        oc ? db_int_or_null(oc->prompt_tokens, prompt, sizeof(prompt)) : NULL;
    params[9] = oc ? db_int_or_null(oc->completion_tokens, completion,
                                    sizeof(completion))
                   : NULL;
    params[10] =
        oc ? db_int_or_null(oc->cached_tokens, cached, sizeof(cached)) : NULL;
    params[11] =
        oc ? db_int_or_null(oc->latency_ms, latency, sizeof(latency)) : NULL;
    params[12] =
        console_base_url && *console_base_url ? console_base_url : NULL;
    res = db_exec_stmt(db, &propose_attempt_awaiting_approval, params,
                       "store the proposal of run", lease->run_id, &err, errstr,
                       errstr_size);
    if (!res)
        return err;
    result = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "stale";
    if (strcmp(result, "proposed") == 0)
        *status = RL_PROPOSE_WAITING;
    else if (strcmp(result, "already_proposed") == 0)
        *status = RL_PROPOSE_ALREADY;
    else if (strcmp(result, "already_completed") == 0)
        *status = RL_PROPOSE_COMPLETED;
    else if (strcmp(result, "superseded") == 0) {
        *status = RL_PROPOSE_SUPERSEDED;
        rl_set_err(errstr, errstr_size,
                   "could not store the proposal of run %s: it already holds "
                   "proposal %s and proposals are write-once",
                   lease->run_id, PQgetvalue(res, 0, 1));
    } else {
        PQclear(res);
        db_stale_msg(errstr, errstr_size, "store the proposal of run",
                     lease->run_id, lease->epoch);
        return RL_ERR_STALE;
    }
    PQclear(res);
    return 0;
}

int
rl_db_decide_run(struct rl_db *db, const struct rl_decision_req *req,
                 struct rl_approval_decision *out, char *errstr,
                 size_t errstr_size)
{
    const char *run_id = req->run_id, *digest = req->digest;
    const char *actor = req->actor, *reason = req->reason;
    int approve = req->approve;
    const char *params[5] = {run_id, digest, actor,
                             approve ? "approve" : "reject", reason};
    const char *what = approve ? "approve" : "reject";
    const char *result;
    PGresult *res;
    int err = RL_ERR_DB;

    memset(out, 0, sizeof(*out));
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res =
        db_exec_simple(db, ops_decide_run, 5, params, &err, errstr, errstr_size,
                       approve ? "approve the run" : "reject the run");
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "could not %s run %s: unexpected result", what, run_id);
        return RL_ERR_DB;
    }
    result = PQgetvalue(res, 0, 0);
    if (!PQgetisnull(res, 0, 1) &&
        rl_run_status_parse(PQgetvalue(res, 0, 1), &out->status) != 0) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "could not %s run %s: unexpected status", what, run_id);
        return RL_ERR_DB;
    }
    db_copy_value(res, 0, 2, out->digest, sizeof(out->digest));
    out->outbox_rows = (int)db_int_value(res, 0, 3, 0);
    err = RL_ERR_CONFLICT;
    if (strcmp(result, "approved") == 0 || strcmp(result, "rejected") == 0)
        err = 0;
    else if (strcmp(result, "not_found") == 0) {
        rl_set_err(errstr, errstr_size, "could not %s run %s: no such run",
                   what, run_id);
        err = RL_ERR_NOTFOUND;
    } else if (strcmp(result, "not_waiting") == 0)
        rl_set_err(errstr, errstr_size,
                   "could not %s run %s: it is %s, not awaiting approval%s",
                   what, run_id, rl_run_status_name(out->status),
                   out->status == RL_RUN_AWAITING_APPROVAL
                       ? " (already decided)"
                       : "");
    else if (strcmp(result, "digest_mismatch") == 0)
        rl_set_err(errstr, errstr_size,
                   "could not %s run %s: digest %s is not the digest of its "
                   "proposal (%s); review the proposal again",
                   what, run_id, digest ? digest : "(none)", out->digest);
    else if (strcmp(result, "not_approver") == 0)
        rl_set_err(errstr, errstr_size,
                   "could not %s run %s: %s is not an approver of its tenant",
                   what, run_id, actor ? actor : "(none)");
    else
        rl_set_err(errstr, errstr_size,
                   "could not %s run %s: unexpected result %s", what, run_id,
                   result);
    PQclear(res);
    return err;
}

void
rl_run_proposal_clear(struct rl_run_proposal *p)
{
    if (!p)
        return;
    free(p->tenant);
    free(p->proposal_json);
    free(p->decision);
    free(p->actor);
    free(p->reason);
    memset(p, 0, sizeof(*p));
}

int
rl_db_run_proposal(struct rl_db *db, const char *run_id,
                   struct rl_run_proposal *out, char *errstr,
                   size_t errstr_size)
{
    const char *params[1] = {run_id};
    PGresult *res;
    int err = RL_ERR_DB;
    int oom = 0;

    memset(out, 0, sizeof(*out));
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, ops_run_proposal, 1, params, &err, errstr,
                         errstr_size, "read the proposal");
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        rl_set_err(errstr, errstr_size, "could not read run %s: no such run",
                   run_id);
        return RL_ERR_NOTFOUND;
    }
    if (rl_run_status_parse(PQgetvalue(res, 0, 0), &out->status) != 0) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "could not read run %s: unexpected status", run_id);
        return RL_ERR_DB;
    }
    out->tenant = db_dup_value(res, 0, 1, &oom);
    out->proposal_json = db_dup_value(res, 0, 2, &oom);
    db_copy_value(res, 0, 3, out->digest, sizeof(out->digest));
    out->decision = db_dup_value(res, 0, 4, &oom);
    out->actor = db_dup_value(res, 0, 5, &oom);
    out->reason = db_dup_value(res, 0, 6, &oom);
    db_copy_value(res, 0, 7, out->approved_digest,
                  sizeof(out->approved_digest));
    db_copy_value(res, 0, 8, out->decided_at, sizeof(out->decided_at));
    PQclear(res);
    if (oom) {
        rl_run_proposal_clear(out);
        rl_set_err(errstr, errstr_size, "could not read run %s: out of memory",
                   run_id);
        return RL_ERR_NOMEM;
    }
    return 0;
}

int
rl_db_approver_add(struct rl_db *db, const char *tenant, const char *actor,
                   const char *channel, const char *by, int *added,
                   char *errstr, size_t errstr_size)
{
    const char *params[4] = {tenant, actor, channel, by};
    char *count = NULL;
    int err = db_one_text(db, ops_approver_add, 4, params, "add the approver",
                          &count, errstr, errstr_size);

    *added = err == 0 && strcmp(count, "0") != 0;
    free(count);
    return err;
}

int
rl_db_approver_remove(struct rl_db *db, const char *tenant, const char *actor,
                      const char *channel, const char *by, char *errstr,
                      size_t errstr_size)
{
    const char *params[4] = {tenant, actor, channel, by};
    char *count = NULL;
    int removed;
    int err = db_one_text(db, ops_approver_remove, 4, params,
                          "remove the approver", &count, errstr, errstr_size);

    if (err)
        return err;
    removed = strcmp(count, "0") != 0;
    free(count);
    if (!removed) {
        rl_set_err(errstr, errstr_size,
                   "could not remove approver %s of tenant %s: there is none",
                   actor, tenant);
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_approvers_json(struct rl_db *db, const char *tenant, char **json,
                     char *errstr, size_t errstr_size)
{
    const char *params[1] = {tenant};

    return db_one_text(db, ops_approvers_list, 1, params, "list approvers",
                       json, errstr, errstr_size);
}
