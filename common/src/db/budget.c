/* budget.c: token budgets as the operator sets, reads and wakes them
 * (`runledger budgets`) and the cost report (`runledger report`), over
 * schema/004_budgets.sql. Dispatching within budgets is part of
 * recording a dispatch (dispatch.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_budgets.h"
#include "rl/err.h"

#define OPS_DAY "(now() AT TIME ZONE 'UTC')::date"

static const char ops_budget_set[] =
    "INSERT INTO budgets (tenant, job, daily_tokens, updated_by)"
    "VALUES ($1, coalesce($2, ''), $3::int8, $4)"
    "    ON CONFLICT (tenant, job) DO UPDATE"
    "   SET daily_tokens = EXCLUDED.daily_tokens,"
    "       updated_by = EXCLUDED.updated_by, updated_at = now()";

static const char ops_budget_remove[] =
    "DELETE FROM budgets WHERE tenant = $1 AND job = coalesce($2, '')";

static const char ops_budgets_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.tenant, x.job), '[]')::text"
    "  FROM (SELECT b.tenant, b.job, b.daily_tokens,"
    "               to_char(" OPS_DAY ", 'YYYY-MM-DD') AS day,"
    "               coalesce(u.reserved, 0) AS reserved,"
    "               coalesce(u.spent, 0) AS spent,"
    "               greatest(b.daily_tokens - coalesce(u.reserved, 0)"
    "                        - coalesce(u.spent, 0), 0) AS \"left\","
    "               coalesce(u.deferrals, 0) AS deferrals,"
    "               (SELECT count(*) FROM runs r"
    "                 WHERE r.status = 'pending'"
    "                   AND r.error_class = 'budget'"
    "                   AND r.tenant = b.tenant"
    "                   AND (b.job = '' OR r.job = b.job)) AS deferred_runs"
    "          FROM budgets b"
    "          LEFT JOIN budget_usage u"
    "            ON u.tenant = b.tenant AND u.job = b.job"
    "           AND u.day = " OPS_DAY
    "         WHERE $1::text IS NULL OR b.tenant = $1) x";

/* Wake (`budgets wake`): budget-deferred runs not yet due become due now,
 * in batches in run_id order (the lock order of every claim). A deferral
 * to the next window moved the deadline by the wait (rl_dispatch_within_
 * budget); the part of the wait the wake skips is taken back, so the run
 * keeps the deadline it would have had. A run waiting for calls in flight
 * to settle (also error_class budget, due within milliseconds) is made
 * due too, its deadline untouched. Each woken run gets a 'wake' decision
 * (schema/015_cancel.sql). */
static const char ops_budget_wake[] =
    "WITH cur AS ("
    "  SELECT run_id, attempts, next_attempt_at FROM runs"
    "   WHERE tenant = $1 AND ($2::text IS NULL OR job = $2)"
    "     AND status = 'pending' AND error_class = 'budget'"
    "     AND next_attempt_at > now()"
    "   ORDER BY run_id LIMIT 500"
    "     FOR NO KEY UPDATE"
    "), upd AS ("
    "  UPDATE runs r"
    "     SET next_attempt_at = now(),"
    "         deadline_at = CASE WHEN cur.next_attempt_at"
    "                                 = rl_next_budget_window()"
    "                            THEN r.deadline_at"
    "                                 - (cur.next_attempt_at - now())"
    "                            ELSE r.deadline_at END,"
    "         updated_at = now()"
    "    FROM cur WHERE r.run_id = cur.run_id"
    "  RETURNING r.run_id"
    "), dec AS ("
    "  INSERT INTO run_decisions (run_id, decision, actor, reason,"
    "                             prior_status, attempts)"
    "  SELECT cur.run_id, 'wake', $3, $4, 'pending', cur.attempts"
    "    FROM cur JOIN upd ON upd.run_id = cur.run_id"
    "  RETURNING 1"
    ")"
    "SELECT (SELECT count(*) FROM upd), (SELECT count(*) FROM dec)";

/* Extra generations: per run, the attempts that may have generated (ok,
 * ambiguous, lease lost, or no outcome: a worker died after sending) beyond
 * the first. */
static const char ops_report[] =
    "WITH r AS ("
    "  SELECT run_id, tenant, job, status, error_class FROM runs"
    "   WHERE scheduled_at >= $1::timestamptz"
    "), a AS ("
    "  SELECT a.run_id, count(*) AS dispatches,"
    "         count(*) FILTER (WHERE a.outcome = 'ok') AS generations,"
    "         count(*) FILTER (WHERE a.outcome IS NULL OR a.outcome IN"
    "                          ('ok', 'ambiguous', 'lease_lost')) AS maybe,"
    "         coalesce(sum(a.prompt_tokens), 0) AS prompt_tokens,"
    "         coalesce(sum(a.completion_tokens), 0) AS completion_tokens,"
    "         coalesce(sum(a.cached_tokens), 0) AS cached_tokens"
    "    FROM attempts a JOIN r USING (run_id)"
    "   GROUP BY a.run_id"
    "), g AS ("
    "  SELECT CASE WHEN $2 IN ('tenant', 'job') THEN r.tenant END AS tenant,"
    "         CASE WHEN $2 = 'job' THEN r.job END AS job,"
    "         count(*) AS runs,"
    "         count(*) FILTER (WHERE r.status = 'completed') AS completed,"
    "         coalesce(sum(a.generations), 0)::int8 AS generations,"
    "         coalesce(sum(greatest(a.maybe - 1, 0)), 0)::int8"
    "             AS extra_generations,"
    "         coalesce(sum(a.dispatches), 0)::int8 AS dispatches,"
    "         count(*) FILTER (WHERE r.status = 'pending'"
    "                            AND r.error_class = 'budget')"
    "             AS budget_deferred,"
    "         coalesce(sum(a.prompt_tokens), 0)::int8 AS prompt_tokens,"
    "         coalesce(sum(a.completion_tokens), 0)::int8"
    "             AS completion_tokens,"
    "         coalesce(sum(a.cached_tokens), 0)::int8 AS cached_tokens"
    "    FROM r LEFT JOIN a USING (run_id)"
    "   GROUP BY 1, 2"
    ")"
    "SELECT coalesce(json_agg(g ORDER BY g.tenant, g.job), '[]')::text FROM g";

int
rl_db_budget_set(struct rl_db *db, const char *tenant, const char *job,
                 int64_t daily_tokens, const char *actor, char *errstr,
                 size_t errstr_size)
{
    char tokens[32];
    const char *params[4] = {tenant, job, tokens, actor};

    snprintf(tokens, sizeof(tokens), "%" PRId64, daily_tokens);
    return db_write(db, ops_budget_set, 4, params, "set the budget", NULL,
                    errstr, errstr_size);
}

int
rl_db_budget_remove(struct rl_db *db, const char *tenant, const char *job,
                    char *errstr, size_t errstr_size)
{
    const char *params[2] = {tenant, job};
    int rows = 0;
    int err = db_write(db, ops_budget_remove, 2, params, "remove the budget",
                       &rows, errstr, errstr_size);

    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not remove the budget of %s%s%s: there is none",
                   tenant, job && *job ? " job " : "", job && *job ? job : "");
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_budgets_json(struct rl_db *db, const char *tenant, char **json,
                   char *errstr, size_t errstr_size)
{
    const char *params[1] = {tenant};

    return db_one_text(db, ops_budgets_list, 1, params, "list budgets", json,
                       errstr, errstr_size);
}

int
rl_db_report_json(struct rl_db *db, const char *since, const char *by,
                  char **json, char *errstr, size_t errstr_size)
{
    const char *params[2] = {since, by};

    return db_one_text(db, ops_report, 2, params, "report", json, errstr,
                       errstr_size);
}

int
rl_db_budget_wake(struct rl_db *db, const char *tenant, const char *job,
                  const char *actor, const char *reason, int64_t *woken,
                  char *errstr, size_t errstr_size)
{
    const char *params[4] = {tenant, job && *job ? job : NULL, actor, reason};
    PGresult *res;
    int64_t n;
    int err;

    *woken = 0;
    if (!tenant || !*tenant) {
        rl_set_err(errstr, errstr_size,
                   "could not wake deferred runs: no tenant");
        return RL_ERR_INVALID;
    }
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    do {
        err = RL_ERR_DB;
        res = db_exec_simple(db, ops_budget_wake, 4, params, &err, errstr,
                             errstr_size, "wake deferred runs");
        if (!res)
            return err;
        n = db_int_value(res, 0, 0, 0);
        PQclear(res);
        *woken += n;
    } while (n > 0);
    return 0;
}
