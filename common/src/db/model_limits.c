/* model_limits.c: the model rate limits as the operator sets and reads them,
 * and a worker's report that the provider throttled a model, over
 * schema/019_model_rate_limits.sql and 021_rate_limit_queue.sql. Taking
 * the allowances is part of the dispatch statement (dispatch.c,
 * rl_dispatch_runs). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_model_limits.h"
#include "rl/err.h"

/* A changed limit starts from a full bucket (NULL allowances), an empty
 * queue and no pause: the runs queued behind the old limit keep their due
 * times, and the next deferral spaces from the new one; a provider that
 * still refuses pauses the model again at its next 429. */
static const char model_limit_set[] =
    "INSERT INTO model_limits (model, endpoint, rpm, tpm, window_ms,"
    "                          updated_by)"
    "VALUES ($1, coalesce($2, ''), $3::int8, $4::int8, $5::int4, $6)"
    "    ON CONFLICT (model) DO UPDATE"
    "   SET endpoint = EXCLUDED.endpoint, rpm = EXCLUDED.rpm,"
    "       tpm = EXCLUDED.tpm, window_ms = EXCLUDED.window_ms,"
    "       requests_left = NULL, tokens_left = NULL, refilled_at = NULL,"
    "       queued_until = NULL, paused_until = NULL, pause_reason = NULL,"
    "       implicit = false,"
    "       concurrency_cap = NULL, cap_successes = 0,"
    "       updated_by = EXCLUDED.updated_by, updated_at = now()";

/* The model's counted calls go with it: with no row, no dispatch
 * statement settles them any more. */
static const char model_limit_remove[] =
    "WITH calls AS (DELETE FROM model_calls WHERE model = $1)"
    "DELETE FROM model_limits WHERE model = $1";

static const char model_limits_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.model), '[]')::text"
    "  FROM (SELECT m.model, m.endpoint, m.rpm, m.tpm,"
    "               m.window_ms / 1000.0 AS window_seconds,"
    "               floor(m.requests_left) AS requests_left,"
    "               floor(m.tokens_left) AS tokens_left,"
    "               CASE WHEN m.paused_until > now()"
    "                    THEN " DB_TS_S(
        "m.paused_until") " END"
                          "                   AS paused_until,"
                          "               CASE WHEN m.paused_until > now() "
                          "THEN m.pause_reason END"
                          "                   AS pause_reason,"
                          "               m.concurrency_cap,"
                          "               (SELECT count(*) FROM model_calls c"
                          "                  JOIN attempts a"
                          "                    ON a.run_id = c.run_id"
                          "                   AND a.attempt_no = c.attempt_no"
                          "                 WHERE c.model = m.model"
                          "                   AND a.outcome IS NULL) AS "
                          "in_flight,"
                          "               m.waits, m.throttles,"
                          "               (SELECT count(*) FROM runs r"
                          "                 WHERE r.status = 'pending'"
                          "                   AND r.error_class = 'rate_limit'"
                          "                   AND "
                          "r.request->'request'->>'model' = m.model)"
                          "                   AS waiting_runs"
                          "          FROM model_limits m"
                          "         WHERE $1::text IS NULL OR m.model = $1) x";

static const char model_throttled[] =
    "SELECT paused_until, coalesce(concurrency_cap, 0)"
    "  FROM rl_model_throttled($1, $2::int8, $3::bool, $4::int4, $5, $6,"
    "                          $7::int4)";

int
rl_db_model_limit_set(struct rl_db *db, const struct rl_model_limit *lim,
                      const char *actor, char *errstr, size_t errstr_size)
{
    char rpm[32], tpm[32], window[32];
    const char *params[6];

    if (!lim || !lim->model || !*lim->model) {
        rl_set_err(errstr, errstr_size,
                   "could not set the model limits: no model");
        return RL_ERR_INVALID;
    }
    if (lim->rpm <= 0 && lim->tpm <= 0) {
        rl_set_err(errstr, errstr_size,
                   "could not set the limits of model %s: neither requests "
                   "nor tokens per window given",
                   lim->model);
        return RL_ERR_INVALID;
    }
    if (lim->window_ms < 100 || lim->window_ms > INT32_MAX) {
        rl_set_err(errstr, errstr_size,
                   "could not set the limits of model %s: the window must be "
                   "at least 100 ms",
                   lim->model);
        return RL_ERR_INVALID;
    }
    params[0] = lim->model;
    params[1] = lim->endpoint && *lim->endpoint ? lim->endpoint : NULL;
    params[2] = db_int_or_null(lim->rpm > 0 ? lim->rpm : -1, rpm, sizeof(rpm));
    params[3] = db_int_or_null(lim->tpm > 0 ? lim->tpm : -1, tpm, sizeof(tpm));
    snprintf(window, sizeof(window), "%" PRId64, lim->window_ms);
    params[4] = window;
    params[5] = actor;
    return db_write(db, model_limit_set, 6, params, "set the model limits",
                    NULL, errstr, errstr_size);
}

int
rl_db_model_limit_remove(struct rl_db *db, const char *model, char *errstr,
                         size_t errstr_size)
{
    const char *params[1] = {model};
    int rows = 0;
    int err = db_write(db, model_limit_remove, 1, params,
                       "remove the model limits", &rows, errstr, errstr_size);

    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not remove the limits of model %s: there are none",
                   model ? model : "(null)");
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_model_limits_json(struct rl_db *db, const char *model, char **json,
                        char *errstr, size_t errstr_size)
{
    const char *params[1] = {model && *model ? model : NULL};

    return db_one_text(db, model_limits_list, 1, params, "list model limits",
                       json, errstr, errstr_size);
}

int
rl_db_model_throttled(struct rl_db *db, const struct rl_model_throttle *t,
                      char *paused_until, size_t paused_until_size, int *cap,
                      char *errstr, size_t errstr_size)
{
    char pause[32], flight[32], attempt[16];
    const char *params[7] = {
        t->model,  pause,     t->adaptive ? "true" : "false", flight,
        t->reason, t->run_id, t->run_id ? attempt : NULL};
    PGresult *res;
    int err = RL_ERR_DB;

    if (!t->model || !*t->model) {
        rl_set_err(errstr, errstr_size, "could not pause the model: no model");
        return RL_ERR_INVALID;
    }
    snprintf(pause, sizeof(pause), "%" PRId64,
             t->pause_ms > 0 ? t->pause_ms : 0);
    snprintf(flight, sizeof(flight), "%d", t->in_flight > 0 ? t->in_flight : 0);
    snprintf(attempt, sizeof(attempt), "%d", t->attempt_no);
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, model_throttled, 7, params, &err, errstr,
                         errstr_size, "pause the model");
    if (!res)
        return err;
    if (paused_until && paused_until_size > 0)
        db_copy_value(res, 0, 0, paused_until, paused_until_size);
    if (cap)
        *cap = (int)db_int_value(res, 0, 1, 0);
    PQclear(res);
    return 0;
}
