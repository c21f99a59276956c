/* ops.c: the operator's statements of `runledger runs ...` (list, show,
 * retry, resolve, cancel) and of the health thread (ledger gauges), the ad hoc
 * statement of tests (rl_db_exec), and the two shapes most
 * operator statements take (one JSON text, one write). Unprepared: a
 * command runs each once. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_gauges.h"
#include "rl/db_runs.h"
#include "rl/err.h"
#include "rl/log.h"
#include "rl/run_status.h"

int
rl_db_exec(struct rl_db *db, const char *sql, int nparams,
           const char *const *params, char *value, size_t value_size,
           char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;
    int rows;

    if (value && value_size)
        value[0] = '\0';
    res = db_exec_simple(db, sql, nparams, params, &err, errstr, errstr_size,
                         "run statement");
    if (!res)
        return err;
    if (PQresultStatus(res) == PGRES_TUPLES_OK) {
        rows = PQntuples(res);
        if (value && value_size && rows > 0 && PQnfields(res) > 0)
            db_copy_value(res, 0, 0, value, value_size);
    } else {
        rows = atoi(PQcmdTuples(res));
    }
    PQclear(res);
    return rows;
}

/* Backlog counted exactly up to 100,000 rows; above that pg_class's
 * estimate (refreshed by autovacuum) stands in, so a huge backlog never
 * makes the health thread scan it. The count walks
 * outbox_pending_by_age_idx (the ORDER BY asks for it): a sequential scan
 * would read every page the churn left behind since the last vacuum,
 * 20,000 pages for 130 pending rows in one soak. The oldest pending row
 * comes from the same index; unknown runs from runs_unknown_idx, runs
 * awaiting approval from runs_awaiting_approval_idx, cancelled runs from
 * runs_cancelled_idx. The ledger's size is the statistics collector's live-row
 * estimate (what autovacuum goes by, kept current by every insert and delete),
 * never a count: a count of runs would read the whole table on every scrape.
 * Runs waiting (pending and due) are counted up to 100,000 through
 * runs_due_retries_idx, index only, like the outbox backlog. */
static const char ops_gauges[] =
    "SELECT (SELECT count(*) FROM (SELECT 1 FROM outbox"
    "                               ORDER BY created_at LIMIT 100000) s),"
    "       (SELECT greatest(c.reltuples, 0)::int8 FROM pg_class c"
    "         WHERE c.oid = to_regclass('outbox')),"
    "       (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)"
    "          FROM outbox),"
    "       (SELECT count(*) FROM runs WHERE status = 'unknown'),"
    "       (SELECT count(*) FROM runs WHERE status = 'awaiting_approval'),"
    "       (SELECT count(*) FROM runs WHERE status = 'cancelled'),"
    "       pg_stat_get_live_tuples(to_regclass('runs')),"
    "       pg_stat_get_live_tuples(to_regclass('attempts')),"
    "       pg_stat_get_live_tuples(to_regclass('outbox_delivered')),"
    "       (SELECT count(*) FROM (SELECT 1 FROM runs"
    "                               WHERE status = 'pending'"
    "                                 AND next_attempt_at <= now()"
    "                               ORDER BY next_attempt_at"
    "                               LIMIT 100000) s)";

/* The runs running under each concurrency limit: one index-only count per
 * limit row through runs_running_by_tenant_idx (schema/018), at most
 * RL_DB_GAUGE_LIMITS_MAX rows. */
static const char ops_limit_gauges[] =
    "SELECT l.tenant, l.job, l.concurrency,"
    "       (SELECT count(*) FROM runs x"
    "         WHERE x.status = 'running' AND x.tenant = l.tenant"
    "           AND (l.job = '' OR x.job = l.job))"
    "  FROM run_limits l"
    " WHERE l.concurrency IS NOT NULL"
    " ORDER BY l.tenant, l.job LIMIT 1000";

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
"                  reconciled_from"
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
rl_db_ops_gauges(struct rl_db *db, struct rl_db_gauges *g, char *errstr,
                 size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;
    int64_t counted, estimate;
    int n, oom = 0;

    memset(g, 0, sizeof(*g));
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, ops_gauges, 0, NULL, &err, errstr, errstr_size,
                         "read ledger gauges");
    if (!res)
        return err;
    counted = db_int_value(res, 0, 0, 0);
    estimate = db_int_value(res, 0, 1, 0);
    g->outbox_backlog = counted;
    if (counted >= 100000) {
        g->backlog_estimated = 1;
        if (estimate > counted)
            g->outbox_backlog = estimate;
    }
    g->oldest_pending_seconds =
        PQgetisnull(res, 0, 2) ? 0 : strtod(PQgetvalue(res, 0, 2), NULL);
    g->unknown_runs = db_int_value(res, 0, 3, 0);
    g->awaiting_approval_runs = db_int_value(res, 0, 4, 0);
    g->cancelled_runs = db_int_value(res, 0, 5, 0);
    g->runs_rows = db_int_value(res, 0, 6, 0);
    g->attempts_rows = db_int_value(res, 0, 7, 0);
    g->delivered_rows = db_int_value(res, 0, 8, 0);
    g->waiting_runs = db_int_value(res, 0, 9, 0);
    PQclear(res);

    res = db_exec_simple(db, ops_limit_gauges, 0, NULL, &err, errstr,
                         errstr_size, "read limit gauges");
    if (!res)
        return err;
    n = PQntuples(res);
    if (n > 0)
        g->limits = calloc((size_t)n, sizeof(*g->limits));
    if (n > 0 && !g->limits)
        oom = 1;
    for (int i = 0; !oom && i < n && i < RL_DB_GAUGE_LIMITS_MAX; i++) {
        struct rl_db_limit_use *u = &g->limits[i];

        u->tenant = db_dup_value(res, i, 0, &oom);
        u->job = db_dup_value(res, i, 1, &oom);
        u->concurrency = db_int_value(res, i, 2, 0);
        u->running = db_int_value(res, i, 3, 0);
        g->nlimits = (size_t)i + 1;
    }
    PQclear(res);
    if (oom) {
        rl_set_err(errstr, errstr_size,
                   "could not read limit gauges: out of memory");
        return RL_ERR_NOMEM;
    }
    return 0;
}

void
rl_db_gauges_clear(struct rl_db_gauges *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->nlimits; i++) {
        free(g->limits[i].tenant);
        free(g->limits[i].job);
    }
    free(g->limits);
    g->limits = NULL;
    g->nlimits = 0;
}

/* One text value of a one-row result into a malloc'd string. */
int
db_one_text(struct rl_db *db, const char *sql, int nparams,
            const char *const *params, const char *what, char **out,
            char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;
    int oom = 0;

    *out = NULL;
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, sql, nparams, params, &err, errstr, errstr_size,
                         what);
    if (!res)
        return err;
    if (PQntuples(res) == 0) {
        PQclear(res);
        rl_set_err(errstr, errstr_size, "could not %s: no such run", what);
        return RL_ERR_NOTFOUND;
    }
    *out = db_dup_value(res, 0, 0, &oom);
    PQclear(res);
    if (oom || !*out) {
        free(*out);
        *out = NULL;
        rl_set_err(errstr, errstr_size, "could not %s: out of memory", what);
        return RL_ERR_NOMEM;
    }
    return 0;
}

int
rl_db_runs_list_json(struct rl_db *db, const struct rl_runs_filter *filter,
                     char **json, char *errstr, size_t errstr_size)
{
    char limit[24];
    const char *params[5];

    snprintf(limit, sizeof(limit), "%d",
             filter->limit > 0 ? filter->limit : 50);
    params[0] = filter->status;
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
     * leaves the horizon for the next cancel or purge to bring back. */
    if (err == 0)
        db_refresh_model_horizons(db);
    return err;
}

/* The statuses of a filter cancel as a text[] literal in buf. Returns 0
 * or RL_ERR_INVALID with errstr filled. */
static int
cancel_statuses(const struct rl_cancel_filter *filter, char *buf, size_t size,
                char *errstr, size_t errstr_size)
{
    const char *list =
        filter->statuses ? filter->statuses : "pending,awaiting_approval";
    const char *p = list;
    size_t used = 0;

    if (!filter->tenant || !*filter->tenant) {
        rl_set_err(errstr, errstr_size,
                   "refused to cancel by filter without a tenant");
        return RL_ERR_INVALID;
    }
    buf[used++] = '{';
    while (*p) {
        size_t len = strcspn(p, ",");
        enum rl_run_status status;
        char word[32];
        int known = 0;

        if (len < sizeof(word)) {
            memcpy(word, p, len);
            word[len] = '\0';
            known = rl_run_status_parse(word, &status) == 0 &&
                    (status == RL_RUN_PENDING || status == RL_RUN_RUNNING ||
                     status == RL_RUN_AWAITING_APPROVAL);
        }
        if (!known || used + len + 2 >= size) {
            rl_set_err(errstr, errstr_size,
                       "could not cancel runs: status \"%.*s\" cannot be "
                       "cancelled (pending, running or awaiting_approval)",
                       (int)len, p);
            return RL_ERR_INVALID;
        }
        if (used > 1)
            buf[used++] = ',';
        memcpy(buf + used, p, len);
        used += len;
        p += len;
        if (*p == ',')
            p++;
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

/* An operator's write: the configured schema, then one statement. *rows
 * (may be NULL) receives the rows it touched. Returns 0 or the error, with
 * errstr "could not <what>: ...". */
int
db_write(struct rl_db *db, const char *sql, int nparams,
         const char *const *params, const char *what, int *rows, char *errstr,
         size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;

    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, sql, nparams, params, &err, errstr, errstr_size,
                         what);
    if (!res)
        return err;
    if (rows)
        *rows = atoi(PQcmdTuples(res));
    PQclear(res);
    return 0;
}
