/* console.c: the web console's statements (rl/db_console.h): console users
 * and sessions (stored as SHA-256 digests only), the audit trail, the
 * reads of the console's pages and its decision on a proposal. Unprepared:
 * the console runs few statements per page, on connections of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_console.h"
#include "rl/err.h"

/* The console user named by the parameter may read a run of the tenant
 * (schema/functions/rl_console_may_read.sql). */
#define SCOPE_OK(user, tenant) "rl_console_may_read(" user ", " tenant ")"

/* clang-format off */
/* The grant and its audit row in one statement, as the revoke below. */
static const char ops_user_add[] =
    "WITH u AS ("
    "  INSERT INTO console_users AS u (name, role, token_sha256, tenants)"
    "       VALUES ($1, $2, $3,"
    "               (SELECT array_agg(t ORDER BY t)"
    "                  FROM jsonb_array_elements_text($4::jsonb) t))"
    "  ON CONFLICT (name) DO UPDATE"
    "          SET role = EXCLUDED.role, token_sha256 = EXCLUDED.token_sha256,"
    "              tenants = EXCLUDED.tenants,"
    "              created_at = now(), revoked_at = NULL"
    "        WHERE u.revoked_at IS NOT NULL"
    "  RETURNING u.name, u.role, u.tenants),"
    " a AS (INSERT INTO audit (actor, action, via, detail)"
    "       SELECT $5, 'add_user', 'cli',"
    "              format('%s as %s', name, role)"
    "              || coalesce(' for ' || array_to_string(tenants, ','), '')"
    "         FROM u)"
    "SELECT count(*) FROM u";

/* The revoke, the end of its sessions and the audit row in one
 * statement, so none happens without the others. */
static const char ops_user_revoke[] =
    "WITH u AS ("
    "  UPDATE console_users SET revoked_at = now()"
    "   WHERE name = $1 AND revoked_at IS NULL RETURNING name),"
    " s AS (DELETE FROM console_sessions"
    "        WHERE user_name IN (SELECT name FROM u)),"
    " a AS (INSERT INTO audit (actor, action, via, detail)"
    "       SELECT $2, 'revoke_user', 'cli', name FROM u)"
    "SELECT count(*) FROM u";

static const char ops_users_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.name), '[]')::text"
    "  FROM (SELECT u.name, u.role,"
    "               " DB_TS_US("u.created_at") " AS created_at,"
    "               " DB_TS_US("u.revoked_at") " AS revoked_at,"
    "               (SELECT count(*) FROM console_sessions s"
    "                 WHERE s.user_name = u.name"
    "                   AND s.expires_at > now()) AS sessions"
    "          FROM console_users u) x";

static const char ops_user_get[] =
    "SELECT json_build_object('name', name, 'role', role,"
    "                         'token_sha256', token_sha256,"
    "                         'tenants', tenants)::text"
    "  FROM console_users WHERE name = $1 AND revoked_at IS NULL";

static const char ops_session_open[] =
    "WITH gone AS (DELETE FROM console_sessions WHERE expires_at < now())"
    "INSERT INTO console_sessions (session_sha256, user_name, address,"
    "                              expires_at)"
    "SELECT $1, u.name, $3, now() + make_interval(secs => $4::int)"
    "  FROM console_users u WHERE u.name = $2 AND u.revoked_at IS NULL";

/* The session's user while the session is neither expired nor idle past
 * $2 seconds; its last use moves at most every 15 seconds, so that a
 * reader's pages do not each write a row version. */
static const char ops_session_get[] =
    "WITH s AS ("
    "  SELECT s.session_sha256, s.last_seen_at, u.name, u.role, u.tenants"
    "    FROM console_sessions s JOIN console_users u ON u.name = s.user_name"
    "   WHERE s.session_sha256 = $1 AND s.expires_at > now()"
    "     AND s.last_seen_at > now() - make_interval(secs => $2::int)"
    "     AND u.revoked_at IS NULL),"
    " touched AS ("
    "  UPDATE console_sessions t SET last_seen_at = now() FROM s"
    "   WHERE t.session_sha256 = s.session_sha256"
    "     AND s.last_seen_at < now() - interval '15 seconds')"
    "SELECT json_build_object('name', s.name, 'role', s.role,"
    "                         'tenants', s.tenants)::text FROM s";

static const char ops_session_close[] =
    "DELETE FROM console_sessions WHERE session_sha256 = $1";

#define AUDIT_ROW(a)                                                           \
    "json_build_object('id', " a ".id, 'at', " DB_TS_US(a ".at") ","          \
    " 'actor', " a ".actor, 'action', " a ".action, 'run_id', " a ".run_id,"  \
    " 'address', " a ".address, 'digest', " a ".digest, 'via', " a ".via,"    \
    " 'detail', " a ".detail)"

static const char ops_audit_list[] =
    "SELECT coalesce(json_agg(x.j ORDER BY x.id DESC), '[]')::text"
    "  FROM (SELECT a.id, " AUDIT_ROW("a") " AS j"
    "          FROM audit a"
    "         WHERE $1::text IS NULL OR a.run_id = $1"
    "         ORDER BY a.id DESC LIMIT $2::int) x";

/* Oldest first through runs_awaiting_approval_idx; a run already decided
 * is no longer awaiting. */
static const char ops_approvals_queue[] =
    "SELECT coalesce(json_agg(x ORDER BY x.since, x.run_id), '[]')::text"
    "  FROM (SELECT r.run_id, r.job, r.tenant,"
    "               " DB_TS_S("r.scheduled_at") " AS scheduled_at,"
    "               r.updated_at AS since,"
    "               " DB_TS_S("r.updated_at") " AS waiting_since,"
    "               extract(epoch FROM now() - r.updated_at)::int8"
    "                 AS age_seconds,"
    "               r.proposal_digest AS digest"
    "          FROM runs r"
    "         WHERE r.status = 'awaiting_approval'"
    "           AND " SCOPE_OK("$2", "r.tenant") ""
    "         ORDER BY r.created_at LIMIT $1::int) x";

/* At most this many events of a run's timeline (rl_run_timeline): the
 * page's bound on memory. */
#define TIMELINE_MAX "1000"

static const char ops_run_page[] =
    "SELECT json_build_object("
    "  'run_id', r.run_id, 'job', r.job, 'tenant', r.tenant,"
    "  'version', r.version, 'status', r.status,"
    "  'scheduled_at', " DB_TS_S("r.scheduled_at") ","
    "  'created_at', " DB_TS_US("r.created_at") ","
    "  'updated_at', " DB_TS_US("r.updated_at") ","
    "  'completed_at', " DB_TS_US("r.completed_at") ","
    "  'attempts_count', r.attempts, 'error_class', r.error_class,"
    "  'last_error', r.last_error, 'traceparent', r.traceparent,"
    "  'output', r.output::text,"
    "  'proposal', r.proposal::text, 'proposal_digest', r.proposal_digest,"
    "  'may_decide', CASE WHEN $2::text IS NULL OR r.proposal IS NULL"
    "                     THEN false"
    "                     ELSE rl_may_approve(r.tenant, $2, r.proposal) END,"
    "  'decision', (SELECT json_build_object('actor', a.actor,"
    "                  'decision', a.decision, 'reason', a.reason,"
    "                  'digest', a.digest,"
    "                  'decided_at', " DB_TS_US("a.decided_at") ")"
    "                FROM approvals a WHERE a.run_id = r.run_id),"
    "  'attempts', (SELECT coalesce(json_agg(json_build_object("
    "                  'attempt_no', t.attempt_no, 'outcome', t.outcome,"
    "                  'http_status', t.http_status, 'error', t.error,"
    "                  'latency_ms', t.latency_ms,"
    "                  'prompt_tokens', t.prompt_tokens,"
    "                  'completion_tokens', t.completion_tokens,"
    /* at the model's price (a batch's line at the batch discount);
     * NULL without a price */
    "                  'cost', (SELECT round((coalesce(t.prompt_tokens, 0)"
    "                                 * p.input_per_mtok"
    "                               + coalesce(t.completion_tokens, 0)"
    "                                 * p.output_per_mtok)"
    "                             * CASE WHEN EXISTS (SELECT 1"
    "                               FROM batch_runs b"
    "                              WHERE b.run_id = t.run_id"
    "                                AND b.attempt_no = t.attempt_no"
    "                                AND b.state = 'completed')"
    "                               THEN 1 - p.batch_discount"
    "                               ELSE 1 END / 1e6, 6)::text"
    "                             FROM model_prices p"
    "                            WHERE p.model ="
    "                                  r.request->'request'->>'model'),"
    "                  'dispatched_at', " DB_TS_US("t.dispatched_at") ","
    "                  'finished_at', " DB_TS_US("t.finished_at") ")"
    "                  ORDER BY t.attempt_no), '[]')"
    "                FROM attempts t WHERE t.run_id = r.run_id),"
    "  'notifications', (SELECT coalesce(json_agg(n ORDER BY n.channel),"
    "                                    '[]')"
    "      FROM (SELECT o.channel, 'pending' AS state, o.delivery_count,"
    "                   " DB_TS_US("o.created_at") " AS created_at,"
    "                   NULL::text AS delivered_at, o.last_error"
    "              FROM outbox o WHERE o.run_id = r.run_id"
    "            UNION ALL"
    "            SELECT d.channel, 'delivered', d.delivery_count,"
    "                   " DB_TS_US("d.created_at") ","
    "                   " DB_TS_US("d.delivered_at") ", NULL"
    "              FROM outbox_delivered d WHERE d.run_id = r.run_id) n),"
    "  'audit', (SELECT coalesce(json_agg(" AUDIT_ROW("a") " ORDER BY a.id),"
    "                            '[]')"
    "              FROM audit a WHERE a.run_id = r.run_id),"
    "  'timeline', (SELECT coalesce(json_agg(e ORDER BY e.at,"
    " e.seq, e.what), '[]')"
    "                 FROM (SELECT * FROM rl_run_timeline(r.run_id)"
    "                        LIMIT " TIMELINE_MAX ") e)"
    ")::text"
    "  FROM runs r WHERE r.run_id = $1"
    "   AND " SCOPE_OK("$2", "r.tenant");

/* Newest first on (created_at, run_id); the cursor is the last row's
 * pair, so a page costs the same however deep it is (never OFFSET). One
 * row more than the page says whether there is a next one. The rows are
 * read in a window of creation time ending at the cursor (or at `to`, or
 * now): the last $9 seconds ($9 NULL: no window), found by the BRIN index
 * runs_created_brin, so the workers maintain no index for this page; the
 * caller widens the window until it holds a page (rl_db_console_runs_json).
 * $10, for a tenant with few runs, is the list of its jobs: the page then
 * reads the tenant's runs through runs_one_row_per_logical_run with no
 * window. Returns the page, the rows found (up to $8 + 1) and whether the
 * window covered the whole filtered range (no window, or one reaching
 * `from`). */
#define RUNS_SINCE                                                             \
    "(coalesce(least($6::timestamptz, $5::timestamptz), now())"                \
    " - make_interval(secs => $9::float8))"

static const char ops_runs_page[] =
    "WITH page AS ("
    "  SELECT r.run_id, r.job, r.tenant, r.status, r.attempts,"
    "         r.error_class, r.created_at,"
    "         " DB_TS_S("r.scheduled_at") " AS scheduled_at,"
    "         " DB_TS_US("r.created_at") " AS created"
    "    FROM runs r"
    "   WHERE ($1::text IS NULL OR r.tenant = $1)"
    "     AND ($2::text IS NULL OR r.job = $2)"
    "     AND ($3::text[] IS NULL OR r.status = ANY ($3::text[]))"
    "     AND ($4::timestamptz IS NULL OR r.created_at >= $4)"
    "     AND ($5::timestamptz IS NULL OR r.created_at < $5)"
    "     AND ($6::timestamptz IS NULL"
    "          OR (r.created_at, r.run_id) < ($6::timestamptz, $7::text))"
    "     AND ($9::float8 IS NULL OR r.created_at >= " RUNS_SINCE ")"
    "     AND ($10::text[] IS NULL OR r.job = ANY ($10::text[]))"
    "     AND " SCOPE_OK("$11", "r.tenant") ""
    "   ORDER BY r.created_at DESC, r.run_id DESC"
    "   LIMIT $8::int + 1)"
    "SELECT json_build_object("
    "  'runs', coalesce((SELECT json_agg(p ORDER BY p.created_at DESC,"
    "                                    p.run_id DESC)"
    "                      FROM (SELECT * FROM page"
    "                             ORDER BY created_at DESC, run_id DESC"
    "                             LIMIT $8::int) p), '[]'),"
    "  'next', CASE WHEN (SELECT count(*) FROM page) > $8::int THEN"
    "            (SELECT q.created || '|' || q.run_id"
    "               FROM (SELECT * FROM page"
    "                      ORDER BY created_at DESC, run_id DESC"
    "                      OFFSET $8::int - 1 LIMIT 1) q) END)::text,"
    "       (SELECT count(*) FROM page),"
    "       $9::float8 IS NULL"
    "       OR ($4::timestamptz IS NOT NULL"
    "           AND " RUNS_SINCE " <= $4::timestamptz)";

/* Tokens and extra generations a day per tenant, counted as `runledger
 * report` counts them (by the runs' scheduled day, UTC; an extra
 * generation is an attempt beyond a run's first that may have generated). */
static const char ops_costs_daily[] =
    "WITH r AS ("
    "  SELECT run_id, tenant,"
    "         (scheduled_at AT TIME ZONE 'UTC')::date AS day"
    "    FROM runs"
    "   WHERE scheduled_at >= (now() AT TIME ZONE 'UTC')::date"
    "                         - ($1::int - 1)"
    "     AND " SCOPE_OK("$2", "runs.tenant") ""
    "), a AS ("
    "  SELECT a.run_id,"
    "         count(*) FILTER (WHERE a.outcome IS NULL OR a.outcome IN"
    "                          ('ok', 'ambiguous', 'lease_lost')) AS maybe,"
    "         coalesce(sum(a.prompt_tokens), 0)"
    "           + coalesce(sum(a.completion_tokens), 0) AS tokens,"
    /* at the model's price, a batch's answers at the batch discount;
     * NULL when the model has no price (model_prices) */
    "         sum((coalesce(a.prompt_tokens, 0) * p.input_per_mtok"
    "              + coalesce(a.completion_tokens, 0) * p.output_per_mtok)"
    "             * CASE WHEN b.run_id IS NULL THEN 1"
    "                    ELSE 1 - p.batch_discount END / 1e6) AS cost"
    "    FROM attempts a JOIN r USING (run_id)"
    "    JOIN runs x ON x.run_id = a.run_id"
    "    LEFT JOIN model_prices p"
    "           ON p.model = x.request->'request'->>'model'"
    "    LEFT JOIN batch_runs b ON b.run_id = a.run_id"
    "          AND b.attempt_no = a.attempt_no AND b.state = 'completed'"
    "   GROUP BY a.run_id"
    "), g AS ("
    "  SELECT r.tenant, to_char(r.day, 'YYYY-MM-DD') AS day,"
    "         coalesce(sum(a.tokens), 0)::int8 AS tokens,"
    "         round(sum(a.cost), 6)::float8 AS cost,"
    "         coalesce(sum(greatest(a.maybe - 1, 0)), 0)::int8"
    "           AS extra_generations"
    "    FROM r LEFT JOIN a USING (run_id)"
    "   GROUP BY 1, 2"
    ")"
    "SELECT coalesce(json_agg(g ORDER BY g.tenant, g.day), '[]')::text FROM g";

/* Read by the trigger run_decisions_audited for the rest of the
 * transaction: the operator's decisions it records are the console's. */
static const char ops_audit_as_console[] =
    "SELECT set_config('runledger.audit_via', 'console', true),"
    "       set_config('runledger.audit_address', coalesce($1, ''), true)";

/* An operator action that is not a decision on a run (a dead letter's
 * replay): its own audit row, as the console's. */
static const char ops_audit_add[] =
    "INSERT INTO audit (actor, action, run_id, address, via, detail)"
    "     VALUES ($1, $2, nullif($3, ''), nullif($4, ''), 'console', $5)";

static const char ops_decide[] =
    "SELECT d.result, d.status, d.digest, d.outbox_rows, d.decided_by,"
    "       " DB_TS_US("d.decided_at") ", d.decision"
    "  FROM rl_decide_proposal($1, $2, $3, $4, $5, 'console', $6) d";

/* A tenant's jobs and runs, counted up to $2, through the (job, tenant)
 * prefix of runs_one_row_per_logical_run: the distinct jobs are walked by
 * one index descent each (a loose index scan), then the tenant's runs of
 * each job read, until $2 of them. Fewer than $2: the tenant is small,
 * and the array holds every job it has a run of. */
static const char ops_runs_tenant_probe[] =
    "WITH RECURSIVE j AS ("
    "  SELECT min(job) AS job FROM runs"
    "  UNION ALL"
    "  SELECT (SELECT min(r.job) FROM runs r WHERE r.job > j.job)"
    "    FROM j WHERE j.job IS NOT NULL)"
    "SELECT count(*), coalesce(array_agg(DISTINCT y.job), '{}')::text"
    "  FROM (SELECT j.job FROM j, LATERAL (SELECT 1 FROM runs r"
    "         WHERE r.job = j.job AND r.tenant = $1 LIMIT $2::int) x"
    "         WHERE j.job IS NOT NULL LIMIT $2::int) y";
/* clang-format on */

int
rl_db_console_user_add(struct rl_db *db, const char *name, const char *role,
                       const char *token_sha256, const char *tenants_json,
                       const char *actor, char *errstr, size_t errstr_size)
{
    const char *params[5] = {name, role, token_sha256, tenants_json, actor};
    char *count = NULL;
    int added;
    int err = db_one_text(db, ops_user_add, 5, params, "add the console user",
                          &count, errstr, errstr_size);

    if (err)
        return err;
    added = strcmp(count, "0") != 0;
    free(count);
    if (!added) {
        rl_set_err(errstr, errstr_size,
                   "could not add console user %s: an active user of that "
                   "name exists (revoke it first)",
                   name);
        return RL_ERR_CONFLICT;
    }
    return 0;
}

int
rl_db_console_user_revoke(struct rl_db *db, const char *name, const char *actor,
                          char *errstr, size_t errstr_size)
{
    const char *params[2] = {name, actor};
    char *count = NULL;
    int err =
        db_one_text(db, ops_user_revoke, 2, params, "revoke the console user",
                    &count, errstr, errstr_size);

    if (err)
        return err;
    if (strcmp(count, "0") == 0) {
        free(count);
        rl_set_err(errstr, errstr_size,
                   "could not revoke console user %s: no active user of that "
                   "name",
                   name);
        return RL_ERR_NOTFOUND;
    }
    free(count);
    return 0;
}

int
rl_db_console_users_json(struct rl_db *db, char **json, char *errstr,
                         size_t errstr_size)
{
    return db_one_text(db, ops_users_list, 0, NULL, "list console users", json,
                       errstr, errstr_size);
}

/* A one-row read whose absence is "not found" rather than an error of the
 * ledger's. */
static int
read_one(struct rl_db *db, const char *sql, int nparams,
         const char *const *params, const char *what, char **json, char *errstr,
         size_t errstr_size)
{
    int err =
        db_one_text(db, sql, nparams, params, what, json, errstr, errstr_size);

    if (err == RL_ERR_NOTFOUND)
        rl_set_err(errstr, errstr_size, "could not %s: none", what);
    return err;
}

int
rl_db_console_user_json(struct rl_db *db, const char *name, char **json,
                        char *errstr, size_t errstr_size)
{
    const char *params[1] = {name};

    return read_one(db, ops_user_get, 1, params, "read the console user", json,
                    errstr, errstr_size);
}

int
rl_db_console_session_open(struct rl_db *db, const char *session_sha256,
                           const char *user, const char *address,
                           int ttl_seconds, char *errstr, size_t errstr_size)
{
    char ttl[16];
    const char *params[4] = {session_sha256, user, address, ttl};
    int rows = 0;
    int err;

    snprintf(ttl, sizeof(ttl), "%d", ttl_seconds);
    err = db_write(db, ops_session_open, 4, params, "open a console session",
                   &rows, errstr, errstr_size);
    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not open a console session: no active user %s", user);
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_console_session_json(struct rl_db *db, const char *session_sha256,
                           int idle_seconds, char **json, char *errstr,
                           size_t errstr_size)
{
    char idle[16];
    const char *params[2] = {session_sha256, idle};

    snprintf(idle, sizeof(idle), "%d", idle_seconds);
    return read_one(db, ops_session_get, 2, params, "read the console session",
                    json, errstr, errstr_size);
}

int
rl_db_console_session_close(struct rl_db *db, const char *session_sha256,
                            char *errstr, size_t errstr_size)
{
    const char *params[1] = {session_sha256};

    return db_write(db, ops_session_close, 1, params,
                    "close the console session", NULL, errstr, errstr_size);
}

int
rl_db_audit_json(struct rl_db *db, const char *run_id, int limit, char **json,
                 char *errstr, size_t errstr_size)
{
    char lim[16];
    const char *params[2] = {run_id, lim};

    snprintf(lim, sizeof(lim), "%d", limit);
    return db_one_text(db, ops_audit_list, 2, params, "list the audit trail",
                       json, errstr, errstr_size);
}

int
rl_db_console_approvals_json(struct rl_db *db, int limit, const char *viewer,
                             char **json, char *errstr, size_t errstr_size)
{
    char lim[16];
    const char *params[2] = {lim, viewer};

    snprintf(lim, sizeof(lim), "%d", limit);
    return db_one_text(db, ops_approvals_queue, 2, params,
                       "list the approvals queue", json, errstr, errstr_size);
}

int
rl_db_console_run_json(struct rl_db *db, const char *run_id, const char *actor,
                       char **json, char *errstr, size_t errstr_size)
{
    const char *params[2] = {run_id, actor};

    return db_one_text(db, ops_run_page, 2, params, "read the run", json,
                       errstr, errstr_size);
}

static const char *
or_null(const char *s)
{
    return s && *s ? s : NULL;
}

/* The statuses of the runs page's filter as a text[] literal in buf (160
 * bytes hold every status once), or NULL for every status. */
static const char *
statuses_param(const struct rl_console_runs_filter *f, char *buf, size_t size)
{
    size_t used;

    if (!f->statuses)
        return NULL;
    used = (size_t)snprintf(buf, size, "{");
    for (size_t i = 0; i < f->nstatuses && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? "," : "",
                                 rl_run_status_name(f->statuses[i]));
    if (used + 2 <= size)
        snprintf(buf + used, size - used, "}");
    return buf;
}

/* The runs page's windows: the first is RUNS_WINDOW_FIRST seconds; each
 * next one is wider by how far the last fell short of a page (at least
 * RUNS_WINDOW_GROWTH_MIN times, at most RUNS_WINDOW_GROWTH_MAX), and after
 * RUNS_WINDOWS of them the page is read with no window. A page thus costs
 * at most RUNS_WINDOWS + 1 statements, and a window reads about the rows
 * of one to RUNS_WINDOW_GROWTH_MAX pages: at 3,000 runs a second the
 * first window holds 3,000 runs, at one run a second the second or third
 * holds a page. */
#define RUNS_WINDOW_FIRST 1.0
#define RUNS_WINDOW_GROWTH_MIN 2.0
#define RUNS_WINDOW_GROWTH_MAX 32.0
#define RUNS_WINDOWS 8
/* A tenant with fewer runs than this is read by its jobs, windowless. */
#define RUNS_TENANT_SMALL "2000"

int
rl_db_console_runs_json(struct rl_db *db,
                        const struct rl_console_runs_filter *f, char **json,
                        char *errstr, size_t errstr_size)
{
    char lim[16], after_ts[64] = "", window[32], statuses[160], *bar,
                  *jobs = NULL;
    const char *params[11];
    const char *after_id = NULL;
    double seconds = RUNS_WINDOW_FIRST;
    int err = RL_ERR_DB, oom = 0;

    *json = NULL;
    if (f->after && *f->after) {
        bar = strchr(f->after, '|');
        if (!bar || (size_t)(bar - f->after) >= sizeof(after_ts)) {
            rl_set_err(errstr, errstr_size,
                       "could not list runs: the cursor is not one this "
                       "console wrote");
            return RL_ERR_INVALID;
        }
        memcpy(after_ts, f->after, (size_t)(bar - f->after));
        after_ts[bar - f->after] = '\0';
        after_id = bar + 1;
    }
    snprintf(lim, sizeof(lim), "%d", f->limit);
    params[0] = or_null(f->tenant);
    params[1] = or_null(f->job);
    params[2] = statuses_param(f, statuses, sizeof(statuses));
    params[3] = or_null(f->from);
    params[4] = or_null(f->to);
    params[5] = after_id ? after_ts : NULL;
    params[6] = after_id;
    params[7] = lim;
    params[9] = NULL;
    params[10] = f->viewer;
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    /* No index leads with tenant: a tenant whose runs are few (or none)
     * would have every window read the whole table. Such a tenant's page
     * reads its runs by job instead, in one statement. */
    if (params[0]) {
        const char *probe[2] = {params[0], RUNS_TENANT_SMALL};
        PGresult *res;

        res = db_exec_simple(db, ops_runs_tenant_probe, 2, probe, &err, errstr,
                             errstr_size, "list runs");
        if (!res)
            return err;
        if (strtol(PQgetvalue(res, 0, 0), NULL, 10) <
            strtol(RUNS_TENANT_SMALL, NULL, 10)) {
            jobs = db_dup_value(res, 0, 1, &oom);
            if (oom || !jobs) {
                PQclear(res);
                free(jobs);
                rl_set_err(errstr, errstr_size,
                           "could not list runs: out of memory");
                return RL_ERR_NOMEM;
            }
        }
        PQclear(res);
        params[9] = jobs;
    }
    for (int i = jobs ? RUNS_WINDOWS : 0; i <= RUNS_WINDOWS; i++) {
        PGresult *res;
        double growth;
        long found;
        int covered;

        snprintf(window, sizeof(window), "%.0f", seconds);
        params[8] = i < RUNS_WINDOWS ? window : NULL;
        res = db_exec_simple(db, ops_runs_page, 11, params, &err, errstr,
                             errstr_size, "list runs");
        if (!res)
            break;
        found = strtol(PQgetvalue(res, 0, 1), NULL, 10);
        covered = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
        if (found > f->limit || covered || i == RUNS_WINDOWS) {
            *json = db_dup_value(res, 0, 0, &oom);
            PQclear(res);
            err = 0;
            if (oom || !*json) {
                free(*json);
                *json = NULL;
                rl_set_err(errstr, errstr_size,
                           "could not list runs: out of memory");
                err = RL_ERR_NOMEM;
            }
            break;
        }
        PQclear(res);
        growth = found > 0 ? 2.0 * (f->limit + 1) / (double)found
                           : RUNS_WINDOW_GROWTH_MAX;
        if (growth < RUNS_WINDOW_GROWTH_MIN)
            growth = RUNS_WINDOW_GROWTH_MIN;
        if (growth > RUNS_WINDOW_GROWTH_MAX)
            growth = RUNS_WINDOW_GROWTH_MAX;
        seconds *= growth;
    }
    free(jobs);
    return err;
}

int
rl_db_console_decide(struct rl_db *db,
                     const struct rl_console_decision_req *req,
                     struct rl_console_decision *out, char *errstr,
                     size_t errstr_size)
{
    const char *params[6] = {req->run_id, req->digest,
                             req->actor,  req->approve ? "approve" : "reject",
                             req->reason, req->address};
    PGresult *res;
    int err = RL_ERR_DB;

    memset(out, 0, sizeof(*out));
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, ops_decide, 6, params, &err, errstr, errstr_size,
                         "decide the run");
    if (!res)
        return err;
    if (PQntuples(res) != 1 || PQnfields(res) != 7) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "could not decide run %s: unexpected result", req->run_id);
        return RL_ERR_DB;
    }
    db_copy_value(res, 0, 0, out->result, sizeof(out->result));
    db_copy_value(res, 0, 1, out->status, sizeof(out->status));
    db_copy_value(res, 0, 2, out->digest, sizeof(out->digest));
    out->outbox_rows = (int)db_int_value(res, 0, 3, 0);
    db_copy_value(res, 0, 4, out->decided_by, sizeof(out->decided_by));
    db_copy_value(res, 0, 5, out->decided_at, sizeof(out->decided_at));
    db_copy_value(res, 0, 6, out->decision, sizeof(out->decision));
    PQclear(res);
    return 0;
}

int
rl_db_console_check(struct rl_db *db, char *errstr, size_t errstr_size)
{
    PGresult *res;

    if (PQstatus(db->conn) != CONNECTION_OK)
        return rl_db_ping(db, errstr, errstr_size);
    if (PQtransactionStatus(db->conn) == PQTRANS_IDLE)
        return 0;
    /* A request that left its transaction open must not hand it to the
     * next one, whose writes would then commit or vanish with it. */
    res = PQexec(db->conn, "ROLLBACK");
    PQclear(res);
    if (PQtransactionStatus(db->conn) == PQTRANS_IDLE)
        return 0;
    rl_set_err(errstr, errstr_size,
               "could not roll back a transaction left open: %s",
               PQerrorMessage(db->conn));
    return RL_ERR_DB;
}

int
rl_db_console_costs_daily_json(struct rl_db *db, int days, const char *viewer,
                               char **json, char *errstr, size_t errstr_size)
{
    char n[16];
    const char *params[2] = {n, viewer};

    snprintf(n, sizeof(n), "%d", days);
    return db_one_text(db, ops_costs_daily, 2, params, "read the daily costs",
                       json, errstr, errstr_size);
}

/* COMMIT, and what it answered: PostgreSQL answers COMMIT of a
 * transaction an error aborted with the command tag ROLLBACK, and no
 * error at all. */
static int
console_commit(struct rl_db *db, char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;

    res = db_exec_simple(db, "COMMIT", 0, NULL, &err, errstr, errstr_size,
                         "commit");
    if (!res)
        return err;
    if (strcmp(PQcmdStatus(res), "COMMIT") != 0) {
        rl_set_err(errstr, errstr_size,
                   "could not commit: the transaction was rolled back (%s)",
                   PQcmdStatus(res));
        PQclear(res);
        return RL_ERR_DB;
    }
    PQclear(res);
    return 0;
}

int
rl_db_console_tx(struct rl_db *db, const char *verb, char *errstr,
                 size_t errstr_size)
{
    if (strcmp(verb, "BEGIN") != 0 && strcmp(verb, "COMMIT") != 0 &&
        strcmp(verb, "ROLLBACK") != 0) {
        rl_set_err(errstr, errstr_size, "could not %s: not a transaction verb",
                   verb);
        return RL_ERR_INVALID;
    }
    if (strcmp(verb, "COMMIT") == 0)
        return console_commit(db, errstr, errstr_size);
    return db_write(db, verb, 0, NULL, verb, NULL, errstr, errstr_size);
}

int
rl_db_console_audit_as_console(struct rl_db *db, const char *address,
                               char *errstr, size_t errstr_size)
{
    const char *params[1] = {address};
    char *ignored = NULL;
    int err = db_one_text(db, ops_audit_as_console, 1, params,
                          "mark the audit rows as the console's", &ignored,
                          errstr, errstr_size);

    free(ignored);
    return err;
}

int
rl_db_console_audit_add(struct rl_db *db, const char *actor, const char *action,
                        const char *run_id, const char *address,
                        const char *detail, char *errstr, size_t errstr_size)
{
    const char *params[5] = {actor, action, run_id ? run_id : "",
                             address ? address : "", detail};

    return db_write(db, ops_audit_add, 5, params, "write the audit row", NULL,
                    errstr, errstr_size);
}
