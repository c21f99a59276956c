/* runs.c: the operator's statements of `runledger runs ...` (list, show,
 * retry, resolve, cancel), rl/db_runs.h. Unprepared: a command runs each
 * once. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_runs.h"
#include "rl/err.h"
#include "rl/log.h"
#include "rl/run_status.h"

static const char ops_list_runs[] =
    "SELECT coalesce(json_agg(x ORDER BY x.scheduled_at DESC, x.run_id),"
    "                '[]')::text"
    "  FROM (SELECT r.run_id, r.job, r.tenant,"
    "               " DB_TS_S(
        "r.scheduled_at") " AS scheduled_at,"
                          "               r.version, r.status, r.attempts, "
                          "r.lease_epoch,"
                          "               r.lock_owner, r.error_class, "
                          "r.last_error,"
                          "               " DB_TS_US(
                              "r.created_at") " AS created_at,"
                                              "               " DB_TS_US(
                                                  "r.completed_at") " AS "
                                                                    "completed_"
                                                                    "at"
                                                                    "          "
                                                                    "FROM runs "
                                                                    "r"
                                                                    "         "
                                                                    "WHERE "
                                                                    "($1::text "
                                                                    "IS NULL "
                                                                    "OR "
                                                                    "r.status "
                                                                    "= $1)"
                                                                    "          "
                                                                    " AND "
                                                                    "($2::text "
                                                                    "IS NULL "
                                                                    "OR "
                                                                    "r.tenant "
                                                                    "= $2)"
                                                                    "          "
                                                                    " AND "
                                                                    "($3::text "
                                                                    "IS NULL "
                                                                    "OR r.job "
                                                                    "= $3)"
                                                                    "          "
                                                                    " AND "
                                                                    "($4::"
                                                                    "timestampt"
                                                                    "z IS NULL "
                                                                    "OR "
                                                                    "r."
                                                                    "scheduled_"
                                                                    "at >= $4)"
                                                                    "         "
                                                                    "ORDER BY "
                                                                    "r."
                                                                    "scheduled_"
                                                                    "at DESC, "
                                                                    "r.run_id"
                                                                    "         "
                                                                    "LIMIT "
                                                                    "$5::int8) "
                                                                    "x";

/* clang-format off */
static const char ops_run_report
    [] = "SELECT json_build_object("
         "  'run', (SELECT row_to_json(x) FROM "
         "(SELECT r.run_id, r.job, r.tenant,"
         "          " DB_TS_S(
             "r.scheduled_at") " AS scheduled_at, "
                               "r.version,"
                               "          "
                               "r.fingerprint, "
                               "r.status, "
                               "r.lock_owner,"
                               "          " DB_TS_US(
                                   "r.lock_expires_"
                                   "at") " AS "
                                         "lock_"
                                         "expires_"
                                         "at,"
                                         "         "
                                         " r.lease_"
                                         "epoch, "
                                         "r."
                                         "attempts,"
                                         "         "
                                         " " DB_TS_US(
                                             "r."
                                             "next_"
                                             "attem"
                                             "pt_"
                                             "at") " AS next_attempt_at,"
                                                   "          " DB_TS_US(
                                                       "r.deadline_at") " AS "
                                                                        "dead"
                                                                        "line"
                                                                        "_at,"
                                                                        "    "
                                                                        "    "
                                                                        "  "
                                                                        "r."
                                                                        "erro"
                                                                        "r_"
                                                                        "clas"
                                                                        "s, "
                                                                        "r."
                                                                        "last"
                                                                        "_err"
                                                                        "or, "
                                                                        "r."
                                                                        "sour"
                                                                        "ce_"
                                                                        "topi"
                                                                        "c,"
                                                                        "    "
                                                                        "    "
                                                                        "  "
                                                                        "r."
                                                                        "sour"
                                                                        "ce_"
                                                                        "part"
                                                                        "itio"
                                                                        "n, "
                                                                        "r."
                                                                        "sour"
                                                                        "ce_"
                                                                        "offs"
                                                                        "et,"
                                                                        "    "
                                                                        "    "
                                                                        " "
                                                                        " " DB_TS_US(
                                                                            "r."
                                                                            "cr"
                                                                            "ea"
                                                                            "te"
                                                                            "d_"
                                                                            "a"
                                                                            "t") " AS created_at,"
                                                                                 "          " DB_TS_US(
                                                                                     "r.updated_at") " AS updated_at,"
                                                                                                     "          " DB_TS_US(
                                                                                                         "r.completed_at") " AS completed_at,"
                                                                                                                           "          r.request, r.raw_input, r.output) x),"
                                                                                                                           "  'attempts', coalesce((SELECT json_agg(a ORDER BY a.attempt_no)"
                                                                                                                           "     FROM (SELECT attempt_no, lease_epoch, worker, idempotency_key,"
                                                                                                                           "                  " DB_TS_US("dispatched_at") " AS dispatched_at,"
                                                                                                                                                                          "                  outcome, http_status, upstream_request_id,"
                                                                                                                                                                          "                  prompt_tokens, completion_tokens, cached_tokens,"
                                                                                                                                                                          "                  latency_ms, error,"
                                                                                                                                                                          "                  " DB_TS_US("finished_at") " AS finished_at,"
"                  " DB_TS_US("reconciled_at") " AS reconciled_at,"
"                  reconciled_from, reconciled_attempt,"
"                  reconciled_generations"
                                                                                                                                                                                                                       "             FROM attempts WHERE run_id = $1) a), '[]'),"
                                                                                                                                                                                                                       "  'outbox', coalesce((SELECT json_agg(o ORDER BY o.channel)"
                                                                                                                                                                                                                       "     FROM (SELECT channel, false AS delivered,"
                                                                                                                                                                                                                       "                  " DB_TS_US("created_at") " AS created_at,"
                                                                                                                                                                                                                                                                   "                  NULL::text AS delivered_at, delivery_count,"
    "                  rl_payload_as_sent(run_id, channel,"
    "                                     explicit_payload)"
    "                    AS payload"
                                                                                                                                                                                                                                                                   "             FROM outbox WHERE run_id = $1"
                                                                                                                                                                                                                                                                   "           UNION ALL"
                                                                                                                                                                                                                                                                   "           SELECT channel, true, " DB_TS_US(
                                                                                                                                                                                                                                                                       "created_at") ","
                                                                                                                                                                                                                                                                                     "                  " DB_TS_US("delivered_at") ", delivery_count,"
    "                  rl_payload_as_sent(run_id, channel,"
    "                                     explicit_payload)"
    "                    AS payload"
                                                                                                                                                                                                                                                                                                                                   "             FROM outbox_delivered WHERE run_id = $1) o), '[]'),"
                                                                                                                                                                                                                                                                                                                                   "  'decisions', coalesce((SELECT json_agg(d ORDER BY d.decision_id)"
                                                                                                                                                                                                                                                                                                                                   "     FROM (SELECT decision_id, decision, actor, reason, prior_status,"
                                                                                                                                                                                                                                                                                                                                   "                  attempts, " DB_TS_US(
                                                                                                                                                                                                                                                                                                                                       "decided_at") " AS decided_at"
                                                                                                                                                                                                                                                                                                                                                     "             FROM run_decisions WHERE run_id = $1) d), '[]'),"
    /* A due pending run whose tenant (or job) is at its concurrency
     * limit waits for one of its runs to end: say so, naming the limit
     * (the tenant's first). */
    "  'waiting', (SELECT json_build_object("
    "      'tenant', l.tenant, 'job', nullif(l.job, ''),"
    "      'limit', l.concurrency, 'running', u.n,"
    "      'reason', CASE WHEN l.job = ''"
    "          THEN format('waiting for a slot: tenant %s at its limit of"
    " %s running', l.tenant, l.concurrency)"
    "          ELSE format('waiting for a slot: job %s of tenant %s at its"
    " limit of %s running', l.job, l.tenant, l.concurrency) END)"
    "     FROM run_limits l"
    "    CROSS JOIN LATERAL (SELECT count(*) AS n FROM runs x"
    "           WHERE x.status = 'running' AND x.tenant = l.tenant"
    "             AND (l.job = '' OR x.job = l.job)) u"
    "    WHERE r.status = 'pending' AND r.next_attempt_at <= now()"
    "      AND l.tenant = r.tenant AND l.job IN ('', r.job)"
    "      AND l.concurrency IS NOT NULL AND u.n >= l.concurrency"
    "    ORDER BY l.job LIMIT 1)"
                                                                                                                                                                                                                                                                                                                                                     ")::text"
                                                                                                                                                                                                                                                                                                                                                     "  FROM runs r WHERE r.run_id = $1";
/* clang-format on */

/* The operator's decisions on one run are functions
 * (schema/functions/rl_operator_*.sql): SECURITY DEFINER, so the console's
 * role changes runs only through them. */
static const char ops_retry_run[] =
    "SELECT * FROM rl_operator_retry($1, $2, $3, $4::int4)";
static const char ops_resolve_failed[] =
    "SELECT * FROM rl_operator_resolve_failed($1, $2, $3)";
static const char ops_cancel_run[] =
    "SELECT * FROM rl_operator_cancel($1, $2, $3)";

/* Cancel by filter (schema/015_cancel.sql): the statements of
 * rl_operator_cancel (schema/functions/rl_operator_cancel.sql) over a
 * batch of runs. The run's lease is cleared and its epoch bumped in the
 * statement that cancels it, so its worker's next write names a lease
 * that no longer exists and is refused as stale; the attempt in flight is
 * closed as cancelled. */
#define OPS_CANCEL_TAIL(actor, reason)                                         \
    "), upd AS ("                                                              \
    "  UPDATE runs r"                                                          \
    "     SET status = 'cancelled', lock_owner = NULL,"                        \
    "         lock_expires_at = NULL, next_attempt_at = NULL,"                 \
    "         lease_epoch = CASE WHEN cur.status = 'running'"                  \
    "                            THEN r.lease_epoch + 1"                       \
    "                            ELSE r.lease_epoch END,"                      \
    "         error_class = 'cancelled',"                                      \
    "         last_error = format('cancelled by %s: %s', " actor "::text,"     \
    "                             " reason "::text),"                          \
    "         updated_at = now()"                                              \
    "    FROM cur"                                                             \
    "   WHERE r.run_id = cur.run_id"                                           \
    "     AND cur.status IN ('pending', 'running', 'awaiting_approval')"       \
    "  RETURNING r.run_id"                                                     \
    "), closed AS ("                                                           \
    "  UPDATE attempts a"                                                      \
    "     SET outcome = 'cancelled', finished_at = now(),"                     \
    "         error = coalesce(a.error, format('run cancelled by %s while"     \
    " the call was in flight: %s', " actor "::text, " reason "::text))"        \
    "    FROM upd WHERE a.run_id = upd.run_id AND a.outcome IS NULL"           \
    "  RETURNING 1"                                                            \
    "), dec AS ("                                                              \
    "  INSERT INTO run_decisions (run_id, decision, actor, reason,"            \
    "                             prior_status, attempts)"                     \
    "  SELECT cur.run_id, 'cancel', " actor ", " reason ", cur.status,"        \
    "         cur.attempts"                                                    \
    "    FROM cur JOIN upd ON upd.run_id = cur.run_id"                         \
    "  RETURNING 1"                                                            \
    ")"

/* The runs of a filter cancel: $1 tenant, $2 job, $3 version (NULL: any),
 * $4 the statuses as a text[], registered before the cutoff parameter
 * `cut` (a filter that runs for minutes never catches what arrived after
 * it started). */
#define OPS_CANCEL_FILTER(cut)                                                 \
    "  FROM runs WHERE tenant = $1 AND ($2::text IS NULL OR job = $2)"         \
    "   AND ($3::text IS NULL OR version = $3) AND status = ANY ($4::text[])"  \
    "   AND created_at < " cut "::timestamptz"

static const char ops_cancel_count[] =
    "SELECT count(*)" OPS_CANCEL_FILTER("coalesce($5, now())");

static const char ops_now[] = "SELECT " DB_TS_US("now()");

/* One batch, in run_id order (the lock order of every claim): a row that
 * left the filter while this statement waited for its lock is re-checked
 * and dropped by PostgreSQL, never cancelled. */
static const char ops_cancel_batch[] =
    "WITH cur AS ("
    "  SELECT run_id, status, attempts" OPS_CANCEL_FILTER(
        "$8") "   ORDER BY run_id LIMIT $7"
              "     FOR NO KEY UPDATE" OPS_CANCEL_TAIL(
                  "$5", "$6") "SELECT (SELECT count(*) FROM upd), (SELECT "
                              "count(*) FROM cur)";

/* The operator takes a lease of its own (a new fencing token, so any
 * worker still holding an older one cannot write), then completes through
 * rl_complete_run exactly as a worker would: write-once output and the
 * outbox rows of the run's notify channels in this transaction. */
static const char ops_operator_lease[] =
    "UPDATE runs"
    "   SET status = 'running', lock_owner = $2,"
    "       lock_expires_at = now() + interval '5 minutes',"
    "       lease_epoch = lease_epoch + 1, next_attempt_at = NULL,"
    "       updated_at = now()"
    " WHERE run_id = $1 AND status = 'unknown'"
    " RETURNING lease_epoch, attempts";
static const char ops_run_status[] =
    "SELECT status FROM runs WHERE run_id = $1";
static const char ops_operator_complete[] =
    "SELECT c.result, c.outbox_rows"
    "  FROM rl_complete_run($1, $2, $3::int8, $4::jsonb,"
    "       ARRAY(SELECT jsonb_array_elements_text("
    "                    coalesce(r.request -> 'notify', '[]'::jsonb))"
    "               FROM runs r WHERE r.run_id = $1),"
    "       NULL::jsonb[]) c";
static const char ops_record_decision[] =
    "INSERT INTO run_decisions (run_id, decision, actor, reason,"
    "                           prior_status, attempts)"
    "VALUES ($1, $2, $3, $4, $5, $6::int4)";

int
rl_db_runs_list_json(struct rl_db *db, const struct rl_runs_filter *filter,
                     char **json, char *errstr, size_t errstr_size)
{
    char limit[24];
    const char *params[5];

    snprintf(limit, sizeof(limit), "%d",
             filter->limit > 0 ? filter->limit : 50);
    params[0] = filter->status ? rl_run_status_name(*filter->status) : NULL;
    params[1] = filter->tenant;
    params[2] = filter->job;
    params[3] = filter->since;
    params[4] = limit;
    return db_one_text(db, ops_list_runs, 5, params, "list runs", json, errstr,
                       errstr_size);
}

int
rl_db_run_report_json(struct rl_db *db, const char *run_id, char **json,
                      char *errstr, size_t errstr_size)
{
    const char *params[1] = {run_id};

    return db_one_text(db, ops_run_report, 1, params, "read run", json, errstr,
                       errstr_size);
}

/* Runs a retry/resolve statement whose row is (prior status, attempts,
 * updated, decided, attempts closed). */
static int
ops_decide(struct rl_db *db, const char *sql, const char *what,
           const char *run_id, const char *actor, const char *reason,
           const char *extra, const char *allowed, struct rl_decision *out,
           char *errstr, size_t errstr_size)
{
    const char *params[4] = {run_id, actor, reason, extra};
    PGresult *res;
    int err = RL_ERR_DB;

    memset(out, 0, sizeof(*out));
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, sql, extra ? 4 : 3, params, &err, errstr,
                         errstr_size, what);
    if (!res)
        return err;
    if (PQntuples(res) == 0) {
        PQclear(res);
        rl_set_err(errstr, errstr_size, "could not %s %s: no such run", what,
                   run_id);
        return RL_ERR_NOTFOUND;
    }
    db_copy_value(res, 0, 0, out->prior_status, sizeof(out->prior_status));
    out->attempts = (int)db_int_value(res, 0, 1, 0);
    out->attempts_closed = (int)db_int_value(res, 0, 4, 0);
    if (db_int_value(res, 0, 2, 0) != 1 || db_int_value(res, 0, 3, 0) != 1) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "refused to %s %s: it is %s, only %s runs qualify", what,
                   run_id, out->prior_status, allowed);
        return RL_ERR_CONFLICT;
    }
    PQclear(res);
    return 0;
}

int
rl_db_run_retry(struct rl_db *db, const char *run_id, const char *actor,
                const char *reason, struct rl_decision *out, char *errstr,
                size_t errstr_size)
{
    return rl_db_run_retry_attempts(db, run_id, actor, reason, 0, out, errstr,
                                    errstr_size);
}

int
rl_db_run_retry_attempts(struct rl_db *db, const char *run_id,
                         const char *actor, const char *reason,
                         int extra_attempts, struct rl_decision *out,
                         char *errstr, size_t errstr_size)
{
    char extra[16];

    snprintf(extra, sizeof(extra), "%d",
             extra_attempts > 0 ? extra_attempts : 0);
    return ops_decide(db, ops_retry_run, "retry", run_id, actor, reason, extra,
                      "failed or unknown", out, errstr, errstr_size);
}

int
rl_db_run_resolve_failed(struct rl_db *db, const char *run_id,
                         const char *actor, const char *reason,
                         struct rl_decision *out, char *errstr,
                         size_t errstr_size)
{
    return ops_decide(db, ops_resolve_failed, "resolve", run_id, actor, reason,
                      NULL, "unknown", out, errstr, errstr_size);
}

void
db_refresh_model_horizons(struct rl_db *db)
{
    char errstr[512];
    PGresult *res;
    int err = RL_ERR_DB;

    res = db_exec_simple(db, "SELECT rl_model_horizon_refresh()", 0, NULL, &err,
                         errstr, sizeof(errstr),
                         "refresh the models' rate-limit horizons");
    if (!res) {
        rl_log_warn(NULL, "%s; the next cancel or purge tries again", errstr);
        return;
    }
    PQclear(res);
}

int
rl_db_run_cancel(struct rl_db *db, const char *run_id, const char *actor,
                 const char *reason, struct rl_decision *out, char *errstr,
                 size_t errstr_size)
{
    int err = ops_decide(db, ops_cancel_run, "cancel", run_id, actor, reason,
                         NULL, "pending, running or awaiting_approval", out,
                         errstr, errstr_size);

    /* A cancelled run that waited for its model's bucket no longer holds
     * a place in its queue. The cancel has committed: a failure here only
     * leaves the horizon for the next cancel or purge to bring back.
     * Inside a caller's transaction the refresh waits for its commit
     * (rl_db_model_horizons_refresh): a failure here would abort the
     * cancel, and COMMIT would then answer ROLLBACK. */
    if (err == 0 && PQtransactionStatus(db->conn) == PQTRANS_IDLE)
        db_refresh_model_horizons(db);
    return err;
}

void
rl_db_model_horizons_refresh(struct rl_db *db)
{
    db_refresh_model_horizons(db);
}

/* The statuses of a filter cancel as a text[] literal in buf. Returns 0
 * or RL_ERR_INVALID with errstr filled. */
static int
cancel_statuses(const struct rl_cancel_filter *filter, char *buf, size_t size,
                char *errstr, size_t errstr_size)
{
    static const enum rl_run_status by_default[] = {RL_RUN_PENDING,
                                                    RL_RUN_AWAITING_APPROVAL};
    const enum rl_run_status *list =
        filter->statuses ? filter->statuses : by_default;
    size_t n = filter->statuses ? filter->nstatuses
                                : sizeof(by_default) / sizeof(by_default[0]);
    size_t used = 0;

    if (!filter->tenant || !*filter->tenant) {
        rl_set_err(errstr, errstr_size,
                   "refused to cancel by filter without a tenant");
        return RL_ERR_INVALID;
    }
    buf[used++] = '{';
    for (size_t i = 0; i < n; i++) {
        const char *name = rl_run_status_name(list[i]);
        size_t len = strlen(name);

        if ((list[i] != RL_RUN_PENDING && list[i] != RL_RUN_RUNNING &&
             list[i] != RL_RUN_AWAITING_APPROVAL) ||
            used + len + 2 >= size) {
            rl_set_err(errstr, errstr_size,
                       "could not cancel runs: status \"%s\" cannot be "
                       "cancelled (pending, running or awaiting_approval)",
                       name);
            return RL_ERR_INVALID;
        }
        if (used > 1)
            buf[used++] = ',';
        memcpy(buf + used, name, len);
        used += len;
    }
    if (used == 1) {
        rl_set_err(errstr, errstr_size, "could not cancel runs: no status");
        return RL_ERR_INVALID;
    }
    buf[used++] = '}';
    buf[used] = '\0';
    return 0;
}

int
rl_db_runs_cancel_count(struct rl_db *db, const struct rl_cancel_filter *filter,
                        int64_t *count, char *errstr, size_t errstr_size)
{
    char statuses[128];
    const char *params[5];
    PGresult *res;
    int err;

    *count = 0;
    err = cancel_statuses(filter, statuses, sizeof(statuses), errstr,
                          errstr_size);
    if (err)
        return err;
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    params[0] = filter->tenant;
    params[1] = filter->job;
    params[2] = filter->version;
    params[3] = statuses;
    params[4] = filter->created_before;
    err = RL_ERR_DB;
    res = db_exec_simple(db, ops_cancel_count, 5, params, &err, errstr,
                         errstr_size, "count the runs to cancel");
    if (!res)
        return err;
    *count = db_int_value(res, 0, 0, 0);
    PQclear(res);
    return 0;
}

int
rl_db_runs_cancel(struct rl_db *db, const struct rl_cancel_filter *filter,
                  const char *actor, const char *reason, int batch,
                  int64_t *cancelled, char *errstr, size_t errstr_size)
{
    char statuses[128], limit[16], cutoff[RL_DB_TIME_SIZE];
    const char *params[8];
    PGresult *res;
    int64_t picked;
    int err;

    *cancelled = 0;
    err = cancel_statuses(filter, statuses, sizeof(statuses), errstr,
                          errstr_size);
    if (err)
        return err;
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    snprintf(limit, sizeof(limit), "%d", batch > 0 ? batch : 500);
    params[0] = filter->tenant;
    params[1] = filter->job;
    params[2] = filter->version;
    params[3] = statuses;
    params[4] = actor;
    params[5] = reason;
    params[6] = limit;
    params[7] = filter->created_before;
    if (!params[7]) {
        /* One cutoff for every batch: the runs registered before the
         * cancel started, on the server's clock. */
        err = RL_ERR_DB;
        res = db_exec_simple(db, ops_now, 0, NULL, &err, errstr, errstr_size,
                             "read the cancel's cutoff");
        if (!res)
            return err;
        db_copy_value(res, 0, 0, cutoff, sizeof(cutoff));
        PQclear(res);
        params[7] = cutoff;
    }
    /* Each batch is its own transaction: a big cancel never holds the
     * locks of every run it cancels, and the claims it races wait at
     * most one batch. */
    do {
        err = RL_ERR_DB;
        res = db_exec_simple(db, ops_cancel_batch, 8, params, &err, errstr,
                             errstr_size, "cancel runs");
        if (!res)
            return err;
        *cancelled += db_int_value(res, 0, 0, 0);
        picked = db_int_value(res, 0, 1, 0);
        PQclear(res);
    } while (picked > 0);
    if (*cancelled > 0)
        db_refresh_model_horizons(db);
    return 0;
}

int
rl_db_run_resolve_completed(struct rl_db *db, const char *run_id,
                            const char *actor, const char *reason,
                            const char *output_json, struct rl_decision *out,
                            char *errstr, size_t errstr_size)
{
    char owner[300], epoch[24], attempts[24];
    const char *params[6];
    PGresult *res = NULL;
    int err = RL_ERR_DB;
    int in_tx = 0;

    memset(out, 0, sizeof(*out));
    snprintf(owner, sizeof(owner), "operator:%s", actor);
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, "BEGIN", 0, NULL, &err, errstr, errstr_size,
                         "resolve run");
    if (!res)
        return err;
    PQclear(res);
    in_tx = 1;

    params[0] = run_id;
    params[1] = owner;
    res = db_exec_simple(db, ops_operator_lease, 2, params, &err, errstr,
                         errstr_size, "resolve run");
    if (!res)
        goto done;
    if (PQntuples(res) == 0) {
        PQclear(res);
        res = db_exec_simple(db, ops_run_status, 1, params, &err, errstr,
                             errstr_size, "resolve run");
        if (!res)
            goto done;
        if (PQntuples(res) == 0) {
            rl_set_err(errstr, errstr_size, "could not resolve %s: no such run",
                       run_id);
            err = RL_ERR_NOTFOUND;
        } else {
            db_copy_value(res, 0, 0, out->prior_status,
                          sizeof(out->prior_status));
            rl_set_err(errstr, errstr_size,
                       "refused to resolve %s: it is %s, only unknown runs "
                       "qualify",
                       run_id, out->prior_status);
            err = RL_ERR_CONFLICT;
        }
        goto done;
    }
    snprintf(out->prior_status, sizeof(out->prior_status), "unknown");
    db_copy_value(res, 0, 0, epoch, sizeof(epoch));
    db_copy_value(res, 0, 1, attempts, sizeof(attempts));
    out->attempts = atoi(attempts);
    PQclear(res);

    params[2] = epoch;
    params[3] = output_json;
    res = db_exec_simple(db, ops_operator_complete, 4, params, &err, errstr,
                         errstr_size, "store the operator's output");
    if (!res)
        goto done;
    if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 0), "completed")) {
        rl_set_err(errstr, errstr_size,
                   "could not resolve %s: completion "
                   "returned %s",
                   run_id, PQntuples(res) ? PQgetvalue(res, 0, 0) : "nothing");
        err = RL_ERR_CONFLICT;
        goto done;
    }
    out->outbox_rows = (int)db_int_value(res, 0, 1, 0);
    PQclear(res);

    params[0] = run_id;
    params[1] = "resolve_completed";
    params[2] = actor;
    params[3] = reason;
    params[4] = rl_run_status_name(RL_RUN_UNKNOWN);
    params[5] = attempts;
    res = db_exec_simple(db, ops_record_decision, 6, params, &err, errstr,
                         errstr_size, "record the decision");
    if (!res)
        goto done;
    PQclear(res);
    res = db_exec_simple(db, "COMMIT", 0, NULL, &err, errstr, errstr_size,
                         "commit the resolution");
    if (!res)
        goto done;
    in_tx = 0;
    err = 0;

done:
    PQclear(res);
    if (in_tx)
        PQclear(
            PQexecParams(db->conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0));
    return err;
}
