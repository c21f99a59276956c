/* batch.c: batch mode as the operator sets, reads and removes it
 * (`runledger batch`, schema/060_batch_mode.sql), the batch a run waited
 * in (`runs show`) and the gauges /metrics reports. The batcher's own
 * statements are in batch_<stage>.c, a file a stage. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_batch.h"
#include "rl/err.h"

static const char batch_setting_set[] =
    "INSERT INTO batch_settings (job, tenant, window_ms, max_runs, max_bytes,"
    "                            completion_window, on_expiry, updated_by)"
    "VALUES ($1, coalesce($2, ''), $3::int4, $4::int4, $5::int8, $6, $7, $8)"
    "    ON CONFLICT (job, tenant) DO UPDATE"
    "   SET window_ms = EXCLUDED.window_ms, max_runs = EXCLUDED.max_runs,"
    "       max_bytes = EXCLUDED.max_bytes,"
    "       completion_window = EXCLUDED.completion_window,"
    "       on_expiry = EXCLUDED.on_expiry,"
    "       updated_by = EXCLUDED.updated_by, updated_at = now()";

static const char batch_setting_remove[] =
    "DELETE FROM batch_settings WHERE job = $1 AND tenant = coalesce($2, '')";

static const char batch_settings_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.job, x.tenant), '[]')::text"
    "  FROM (SELECT s.job, s.tenant, s.window_ms / 1000.0 AS window_seconds,"
    "               s.max_runs, s.max_bytes, s.completion_window,"
    "               s.on_expiry, s.updated_by, " DB_TS_S(
        "s.updated_at") "                   AS updated_at"
                        "          FROM batch_settings s"
                        "         WHERE $1::text IS NULL OR s.job = $1) x";

int
rl_db_batch_setting_set(struct rl_db *db, const struct rl_batch_setting *s,
                        const char *actor, char *errstr, size_t errstr_size)
{
    char window[32], runs[32], bytes[32];
    const char *params[8];

    if (!s->job || !*s->job || s->window_ms < 100 || s->max_runs < 1 ||
        s->max_runs > 50000 || s->max_bytes < 1024 ||
        s->max_bytes > 209715200 || !s->completion_window ||
        !*s->completion_window || !s->on_expiry ||
        (strcmp(s->on_expiry, "live") && strcmp(s->on_expiry, "rebatch") &&
         strcmp(s->on_expiry, "fail"))) {
        rl_set_err(errstr, errstr_size,
                   "could not set the batch mode: need a job, a window of "
                   "0.1 s or more, 1..50000 runs, 1 KiB..200 MiB and "
                   "on_expiry live, rebatch or fail");
        return RL_ERR_INVALID;
    }
    snprintf(window, sizeof(window), "%" PRId64, s->window_ms);
    snprintf(runs, sizeof(runs), "%" PRId64, s->max_runs);
    snprintf(bytes, sizeof(bytes), "%" PRId64, s->max_bytes);
    params[0] = s->job;
    params[1] = s->tenant && *s->tenant ? s->tenant : NULL;
    params[2] = window;
    params[3] = runs;
    params[4] = bytes;
    params[5] = s->completion_window;
    params[6] = s->on_expiry;
    params[7] = actor && *actor ? actor : "operator";
    return db_write(db, batch_setting_set, 8, params, "set the batch mode",
                    NULL, errstr, errstr_size);
}

int
rl_db_batch_setting_remove(struct rl_db *db, const char *job,
                           const char *tenant, char *errstr, size_t errstr_size)
{
    const char *params[2] = {job, tenant && *tenant ? tenant : NULL};
    int rows = 0;
    int err = db_write(db, batch_setting_remove, 2, params,
                       "remove the batch mode", &rows, errstr, errstr_size);

    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not remove the batch mode of job %s%s%s: there is "
                   "none",
                   job, tenant && *tenant ? " tenant " : "",
                   tenant && *tenant ? tenant : "");
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_batch_settings_json(struct rl_db *db, const char *job, char **json,
                          char *errstr, size_t errstr_size)
{
    const char *params[1] = {job && *job ? job : NULL};

    return db_one_text(db, batch_settings_list, 1, params,
                       "list the batch modes", json, errstr, errstr_size);
}

/* ---- what operators read -------------------------------------------- */

static const char batch_of_run[] =
    "SELECT coalesce((SELECT json_build_object("
    "    'batch_id', b.batch_id, 'provider_batch_id', b.provider_batch_id,"
    "    'batch_state', b.state, 'provider_status', b.provider_status,"
    "    'attempt_no', r.attempt_no, 'run_state', r.state,"
    "    'parked_at', " DB_TS_S(
        "r.parked_at") ","
                       "    'submitted_at', " DB_TS_S(
                           "b.submitted_at") ")"
                                             "  FROM batch_runs r LEFT JOIN "
                                             "batches b ON b.batch_id = "
                                             "r.batch_id"
                                             " WHERE r.run_id = $1 ORDER BY "
                                             "r.attempt_no DESC LIMIT 1), "
                                             "'null')::text";

/* Batches by state (a row per batch, far fewer than runs), in the order
 * of enum rl_batch_state, and the open ones' runs and age through the
 * partial indexes. */
static const char batch_gauges[] =
    "SELECT count(*) FILTER (WHERE state = 'intent'),"
    "       count(*) FILTER (WHERE state = 'submitted'),"
    "       count(*) FILTER (WHERE state = 'completed'),"
    "       count(*) FILTER (WHERE state = 'failed'),"
    "       count(*) FILTER (WHERE state = 'expired'),"
    "       count(*) FILTER (WHERE state = 'cancelled'),"
    "       (SELECT count(*) FROM batch_runs"
    "         WHERE state IN ('waiting', 'in_batch')),"
    "       coalesce(extract(epoch FROM now() - min(created_at)"
    "                FILTER (WHERE state IN ('intent', 'submitted'))), 0)"
    "  FROM batches";

int
rl_db_batch_of_run(struct rl_db *db, const char *run_id, char **json,
                   char *errstr, size_t errstr_size)
{
    const char *params[1] = {run_id};

    return db_one_text(db, batch_of_run, 1, params, "read the run's batch",
                       json, errstr, errstr_size);
}

int
rl_db_batch_gauges(struct rl_db *db, struct rl_db_batch_gauges *g, char *errstr,
                   size_t errstr_size)
{
    PGresult *res;
    int err = 0;

    memset(g, 0, sizeof(*g));
    res = db_exec_simple(db, batch_gauges, 0, NULL, &err, errstr, errstr_size,
                         "read the batch gauges");
    if (!res)
        return err;
    if (PQntuples(res) == 1) {
        for (int i = 0; i < RL_BATCH_STATE_COUNT; i++)
            g->by_state[i] = db_int_value(res, 0, i, 0);
        g->runs_waiting = db_int_value(res, 0, RL_BATCH_STATE_COUNT, 0);
        g->oldest_open_seconds =
            strtod(PQgetvalue(res, 0, RL_BATCH_STATE_COUNT + 1), NULL);
    }
    PQclear(res);
    return 0;
}
