/* batch.c: batch mode as the operator sets, reads and removes it
 * (`runledger batch`), over schema/060_batch_mode.sql. */
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
