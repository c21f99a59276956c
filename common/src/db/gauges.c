/* gauges.c: what the health thread reads of the ledger for /metrics and
 * /readyz (rl/db_gauges.h): backlog, unknown, waiting and cancelled runs,
 * table sizes, and the runs under each concurrency limit. Every read is
 * bounded, so a scrape never scans a table. */
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_gauges.h"
#include "rl/err.h"

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
