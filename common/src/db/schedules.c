/* Schedules, their pauses and the scheduler's fenced lease
 * (rl/db_schedules.h, schema/080_schedules.sql). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_schedules.h"
#include "rl/err.h"

static const char schedule_set[] =
    "INSERT INTO schedules AS s (name, job, tenant, cron, timezone, version,"
    "    window_duration, request, input, notify, catchup, catchup_window_s,"
    "    audit_only, updated_by)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::bigint,"
    "         $13::boolean, $14)"
    " ON CONFLICT (name) DO UPDATE SET job = EXCLUDED.job,"
    "    tenant = EXCLUDED.tenant, cron = EXCLUDED.cron,"
    "    timezone = EXCLUDED.timezone, version = EXCLUDED.version,"
    "    window_duration = EXCLUDED.window_duration,"
    "    request = EXCLUDED.request, input = EXCLUDED.input,"
    "    notify = EXCLUDED.notify, catchup = EXCLUDED.catchup,"
    "    catchup_window_s = EXCLUDED.catchup_window_s,"
    "    audit_only = EXCLUDED.audit_only, updated_at = now(),"
    "    updated_by = EXCLUDED.updated_by";

static const char schedule_remove[] = "DELETE FROM schedules WHERE name = $1";

/* One statement: the flag, and the pause's row opened or closed. */
static const char schedule_pause[] =
    "WITH s AS (UPDATE schedules SET paused = true, updated_at = now(),"
    "             updated_by = $2"
    "           WHERE name = $1 AND NOT paused RETURNING name),"
    " p AS (INSERT INTO schedule_pauses (schedule, paused_at)"
    "       SELECT name, now() FROM s)"
    " SELECT (SELECT count(*) FROM schedules WHERE name = $1)";

static const char schedule_resume[] =
    "WITH s AS (UPDATE schedules SET paused = false, updated_at = now(),"
    "             updated_by = $2,"
    "             published_through = greatest(published_through, now())"
    "           WHERE name = $1 AND paused RETURNING name),"
    " p AS (UPDATE schedule_pauses SET resumed_at = now()"
    "       WHERE schedule IN (SELECT name FROM s) AND resumed_at IS NULL)"
    " SELECT (SELECT count(*) FROM schedules WHERE name = $1)";

static const char schedules_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.name), '[]')::text FROM ("
    "  SELECT name, job, tenant, cron, timezone, version,"
    "         window_duration AS window, request::json AS request,"
    "         input::json AS input, notify, catchup,"
    "         catchup_window_s AS catchup_window_seconds, audit_only,"
    "         paused, " DB_TS_S(
        "published_through") " AS published_through,"
                             "         " DB_TS_S(
                                 "created_at") " AS created_at,"
                                               "         " DB_TS_S(
                                                   "updated_at") " AS "
                                                                 "updated_at, "
                                                                 "updated_by"
                                                                 "    FROM "
                                                                 "schedules "
                                                                 "WHERE "
                                                                 "$1::text IS "
                                                                 "NULL OR name "
                                                                 "= $1) x";

static const char schedules_load[] =
    "SELECT name, job, tenant, cron, timezone, version, window_duration,"
    "       request, input, notify, catchup, catchup_window_s, audit_only,"
    "       paused, floor(extract(epoch FROM published_through))::bigint,"
    "       floor(extract(epoch FROM created_at))::bigint,"
    "       floor(extract(epoch FROM now()))::bigint"
    "  FROM schedules WHERE $1::text IS NULL OR name = $1 ORDER BY name "
    "COLLATE \"C\"";

/* The console's page of them: those the console user $1 may read
 * (schema/functions/rl_console_may_read.sql), one ($2) or those after $3
 * in name order, at most $4. */
static const char schedules_load_viewer[] =
    "SELECT name, job, tenant, cron, timezone, version, window_duration,"
    "       request, input, notify, catchup, catchup_window_s, audit_only,"
    "       paused, floor(extract(epoch FROM published_through))::bigint,"
    "       floor(extract(epoch FROM created_at))::bigint,"
    "       floor(extract(epoch FROM now()))::bigint"
    "  FROM schedules"
    " WHERE rl_console_may_read($1, tenant)"
    "   AND ($2::text IS NULL OR name = $2)"
    "   AND ($3::text IS NULL OR name COLLATE \"C\" > $3)"
    " ORDER BY name COLLATE \"C\" LIMIT $4::int";

static const char schedule_pauses[] =
    "SELECT floor(extract(epoch FROM paused_at))::bigint,"
    "       floor(extract(epoch FROM resumed_at))::bigint"
    "  FROM schedule_pauses WHERE schedule = $1 ORDER BY paused_at";

/* A live lease of another holder stays; otherwise the caller takes it, and
 * the epoch grows when the holder changes. */
static const char scheduler_lease[] =
    "INSERT INTO scheduler_lease AS l (id, holder, epoch, expires_at)"
    " VALUES (1, $1, 1, now() + $2::bigint * interval '1 millisecond')"
    " ON CONFLICT (id) DO UPDATE"
    "   SET holder = $1,"
    "       epoch = l.epoch + CASE WHEN l.holder = $1 THEN 0 ELSE 1 END,"
    "       expires_at = now() + $2::bigint * interval '1 millisecond'"
    "   WHERE l.holder = $1 OR l.expires_at <= now()"
    " RETURNING epoch";

static const char scheduler_release[] =
    "UPDATE scheduler_lease SET expires_at = now()"
    " WHERE id = 1 AND holder = $1 AND epoch = $2::bigint";

/* The cursors move only under the live lease at the caller's epoch: a
 * scheduler that lost it finds the first column false and stops. */
static const char schedules_mark[] =
    "WITH l AS (SELECT 1 FROM scheduler_lease"
    "           WHERE id = 1 AND holder = $3 AND epoch = $4::bigint"
    "             AND expires_at > now()),"
    " m AS (SELECT * FROM unnest($1::text[], $2::bigint[]) AS m (name, t)),"
    " u AS (UPDATE schedules s SET published_through = to_timestamp(m.t)"
    "       FROM m WHERE s.name = m.name AND EXISTS (SELECT 1 FROM l)"
    "         AND s.published_through < to_timestamp(m.t)"
    "       RETURNING 1)"
    " SELECT EXISTS (SELECT 1 FROM l), (SELECT count(*) FROM u)";

static const char runs_fingerprints[] =
    "SELECT run_id, fingerprint FROM runs WHERE run_id = ANY($1::text[])"
    " UNION ALL "
    "SELECT run_id, fingerprint FROM run_tombstones"
    " WHERE run_id = ANY($1::text[])";

int
rl_db_schedule_set(struct rl_db *db, const struct rl_schedule *s,
                   const char *actor, char *errstr, size_t errstr_size)
{
    char cw[24];
    const char *params[14];

    if (!s->name || !s->job || !s->tenant || !s->cron || !s->version ||
        !s->window || !s->request) {
        rl_set_err(errstr, errstr_size,
                   "could not set the schedule: a field is missing");
        return RL_ERR_INVALID;
    }
    snprintf(cw, sizeof(cw), "%" PRId64, s->catchup_window);
    params[0] = s->name;
    params[1] = s->job;
    params[2] = s->tenant;
    params[3] = s->cron;
    params[4] = s->timezone && *s->timezone ? s->timezone : "UTC";
    params[5] = s->version;
    params[6] = s->window;
    params[7] = s->request;
    params[8] = s->input;
    params[9] = s->notify && *s->notify ? s->notify : NULL;
    params[10] = rl_catchup_name(s->catchup);
    params[11] = cw;
    params[12] = s->audit_only ? "true" : "false";
    params[13] = actor && *actor ? actor : "operator";
    return db_write(db, schedule_set, 14, params, "set the schedule", NULL,
                    errstr, errstr_size);
}

int
rl_db_schedule_remove(struct rl_db *db, const char *name, char *errstr,
                      size_t errstr_size)
{
    const char *params[1] = {name};
    int rows = 0;
    int err = db_write(db, schedule_remove, 1, params, "remove the schedule",
                       &rows, errstr, errstr_size);

    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not remove schedule %s: there is none", name);
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_schedule_pause(struct rl_db *db, const char *name, int pause,
                     const char *actor, char *errstr, size_t errstr_size)
{
    const char *params[2] = {name, actor && *actor ? actor : "operator"};
    char *count = NULL;
    int err =
        db_one_text(db, pause ? schedule_pause : schedule_resume, 2, params,
                    pause ? "pause" : "resume", &count, errstr, errstr_size);

    if (err)
        return err;
    err = strcmp(count, "0") == 0 ? RL_ERR_NOTFOUND : 0;
    free(count);
    if (err)
        rl_set_err(errstr, errstr_size,
                   "could not %s schedule %s: there is "
                   "none",
                   pause ? "pause" : "resume", name);
    return err;
}

int
rl_db_schedules_json(struct rl_db *db, const char *name, char **json,
                     char *errstr, size_t errstr_size)
{
    const char *params[1] = {name};

    return db_one_text(db, schedules_list, 1, params, "list the schedules",
                       json, errstr, errstr_size);
}

static int
schedules_load_rows(struct rl_db *db, const char *stmt, int nparams,
                    const char *const *params, struct rl_schedule **out,
                    size_t *n, int64_t *now, char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB, oom = 0, rows;
    struct rl_schedule *s;

    *out = NULL;
    *n = 0;
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, stmt, nparams, params, &err, errstr, errstr_size,
                         "load the schedules");
    if (!res)
        return err;
    rows = PQntuples(res);
    s = calloc(rows ? (size_t)rows : 1, sizeof(*s));
    if (!s) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "could not load the schedules: out "
                   "of memory");
        return RL_ERR_NOMEM;
    }
    for (int i = 0; i < rows; i++) {
        s[i].name = db_dup_value(res, i, 0, &oom);
        s[i].job = db_dup_value(res, i, 1, &oom);
        s[i].tenant = db_dup_value(res, i, 2, &oom);
        s[i].cron = db_dup_value(res, i, 3, &oom);
        s[i].timezone = db_dup_value(res, i, 4, &oom);
        s[i].version = db_dup_value(res, i, 5, &oom);
        s[i].window = db_dup_value(res, i, 6, &oom);
        s[i].request = db_dup_value(res, i, 7, &oom);
        s[i].input = db_dup_value(res, i, 8, &oom);
        s[i].notify = db_dup_value(res, i, 9, &oom);
        {
            char cu[16];

            db_copy_value(res, i, 10, cu, sizeof(cu));
            s[i].catchup = rl_catchup_parse(cu);
        }
        s[i].catchup_window = db_int_value(res, i, 11, 0);
        s[i].audit_only = db_bool_value(res, i, 12);
        s[i].paused = db_bool_value(res, i, 13);
        s[i].published_through = db_int_value(res, i, 14, 0);
        s[i].created_at = db_int_value(res, i, 15, 0);
        if (now)
            *now = db_int_value(res, i, 16, 0);
    }
    if (rows == 0 && now) {
        PGresult *r2;

        PQclear(res);
        r2 = db_exec_simple(db,
                            "SELECT floor(extract(epoch FROM now()))::bigint",
                            0, NULL, &err, errstr, errstr_size,
                            "read the "
                            "clock");
        if (!r2) {
            free(s);
            return err;
        }
        *now = db_int_value(r2, 0, 0, 0);
        PQclear(r2);
    } else {
        PQclear(res);
    }
    if (oom) {
        for (int i = 0; i < rows; i++)
            rl_schedule_clear(&s[i]);
        free(s);
        rl_set_err(errstr, errstr_size,
                   "could not load the schedules: out "
                   "of memory");
        return RL_ERR_NOMEM;
    }
    *out = s;
    *n = (size_t)rows;
    return 0;
}

int
rl_db_schedules_load(struct rl_db *db, const char *name,
                     struct rl_schedule **out, size_t *n, int64_t *now,
                     char *errstr, size_t errstr_size)
{
    const char *params[1] = {name};

    return schedules_load_rows(db, schedules_load, 1, params, out, n, now,
                               errstr, errstr_size);
}

int
rl_db_console_schedules_load(struct rl_db *db, const char *viewer,
                             const char *name, const char *after, int limit,
                             struct rl_schedule **out, size_t *n, int64_t *now,
                             char *errstr, size_t errstr_size)
{
    char lim[16];
    const char *params[4] = {viewer, name, after, lim};

    snprintf(lim, sizeof(lim), "%d", limit);
    return schedules_load_rows(db, schedules_load_viewer, 4, params, out, n,
                               now, errstr, errstr_size);
}

int
rl_db_schedule_pauses(struct rl_db *db, const char *name, int64_t **pairs,
                      size_t *n, char *errstr, size_t errstr_size)
{
    const char *params[1] = {name};
    PGresult *res;
    int err = RL_ERR_DB, rows;

    *pairs = NULL;
    *n = 0;
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, schedule_pauses, 1, params, &err, errstr,
                         errstr_size, "read the pauses");
    if (!res)
        return err;
    rows = PQntuples(res);
    *pairs = malloc(2 * (rows ? (size_t)rows : 1) * sizeof(**pairs));
    if (!*pairs) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "could not read the pauses: out of "
                   "memory");
        return RL_ERR_NOMEM;
    }
    for (int i = 0; i < rows; i++) {
        (*pairs)[2 * i] = db_int_value(res, i, 0, 0);
        (*pairs)[2 * i + 1] = db_int_value(res, i, 1, INT64_MAX);
    }
    *n = (size_t)rows;
    PQclear(res);
    return 0;
}

int
rl_db_scheduler_lease(struct rl_db *db, const char *holder, int64_t ttl_ms,
                      int64_t *epoch, char *errstr, size_t errstr_size)
{
    char ttl[24];
    const char *params[2] = {holder, ttl};
    PGresult *res;
    int err = RL_ERR_DB;

    snprintf(ttl, sizeof(ttl), "%" PRId64, ttl_ms);
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, scheduler_lease, 2, params, &err, errstr,
                         errstr_size, "take the scheduler lease");
    if (!res)
        return err;
    if (PQntuples(res) == 0) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "could not take the scheduler lease: another scheduler "
                   "holds it");
        return RL_ERR_STALE;
    }
    *epoch = db_int_value(res, 0, 0, 0);
    PQclear(res);
    return 0;
}

int
rl_db_scheduler_release(struct rl_db *db, const char *holder, int64_t epoch,
                        char *errstr, size_t errstr_size)
{
    char ep[24];
    const char *params[2] = {holder, ep};

    snprintf(ep, sizeof(ep), "%" PRId64, epoch);
    return db_write(db, scheduler_release, 2, params,
                    "release the scheduler lease", NULL, errstr, errstr_size);
}

int
rl_db_schedules_mark(struct rl_db *db, const char *const *names,
                     const int64_t *throughs, size_t n, const char *holder,
                     int64_t epoch, char *errstr, size_t errstr_size)
{
    struct rl_buf a = {0}, b = {0};
    char ep[24];
    const char *params[4];
    PGresult *res;
    int err = RL_ERR_DB, ok;

    if (n == 0)
        return 0;
    rl_buf_put(&a, "{", 1);
    rl_buf_put(&b, "{", 1);
    for (size_t i = 0; i < n; i++) {
        db_array_add(&a, names[i]);
        db_array_add_int(&b, throughs[i], 0);
    }
    rl_buf_put(&a, "}", 1);
    rl_buf_put(&b, "}", 1);
    snprintf(ep, sizeof(ep), "%" PRId64, epoch);
    if (a.failed || b.failed) {
        rl_buf_free(&a);
        rl_buf_free(&b);
        rl_set_err(errstr, errstr_size,
                   "could not mark the schedules: out "
                   "of memory");
        return RL_ERR_NOMEM;
    }
    params[0] = a.data;
    params[1] = b.data;
    params[2] = holder;
    params[3] = ep;
    if (db_apply_schema(db, errstr, errstr_size) != 0) {
        rl_buf_free(&a);
        rl_buf_free(&b);
        return RL_ERR_DB;
    }
    res = db_exec_simple(db, schedules_mark, 4, params, &err, errstr,
                         errstr_size, "mark the schedules");
    rl_buf_free(&a);
    rl_buf_free(&b);
    if (!res)
        return err;
    ok = PQntuples(res) == 1 && db_bool_value(res, 0, 0);
    PQclear(res);
    if (!ok) {
        rl_set_err(errstr, errstr_size,
                   "could not mark the schedules: the scheduler lease at "
                   "epoch %" PRId64 " is no longer held",
                   epoch);
        return RL_ERR_STALE;
    }
    return 0;
}

int
rl_db_runs_fingerprints(struct rl_db *db, const char *const *run_ids, size_t n,
                        char **fingerprints, char *errstr, size_t errstr_size)
{
    struct rl_buf arr = {0};
    const char *params[1];
    PGresult *res;
    int err = RL_ERR_DB, oom = 0;

    for (size_t i = 0; i < n; i++)
        fingerprints[i] = NULL;
    if (n == 0)
        return 0;
    rl_buf_put(&arr, "{", 1);
    for (size_t i = 0; i < n; i++)
        db_array_add(&arr, run_ids[i]);
    rl_buf_put(&arr, "}", 1);
    if (arr.failed) {
        rl_buf_free(&arr);
        rl_set_err(errstr, errstr_size,
                   "could not read the runs: out of "
                   "memory");
        return RL_ERR_NOMEM;
    }
    params[0] = arr.data;
    if (db_apply_schema(db, errstr, errstr_size) != 0) {
        rl_buf_free(&arr);
        return RL_ERR_DB;
    }
    res = db_exec_simple(db, runs_fingerprints, 1, params, &err, errstr,
                         errstr_size, "read the runs");
    rl_buf_free(&arr);
    if (!res)
        return err;
    for (int r = 0; r < PQntuples(res); r++) {
        const char *id = PQgetvalue(res, r, 0);

        for (size_t i = 0; i < n; i++) {
            if (!fingerprints[i] && strcmp(run_ids[i], id) == 0) {
                fingerprints[i] = db_dup_value(res, r, 1, &oom);
                break;
            }
        }
    }
    PQclear(res);
    if (oom) {
        for (size_t i = 0; i < n; i++) {
            free(fingerprints[i]);
            fingerprints[i] = NULL;
        }
        rl_set_err(errstr, errstr_size,
                   "could not read the runs: out of "
                   "memory");
        return RL_ERR_NOMEM;
    }
    return 0;
}
