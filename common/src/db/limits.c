/* limits.c: concurrency limits and weights per tenant and per job as the
 * operator sets, reads and removes them (`runledger limits`), over
 * schema/018_fair_claims.sql. The claim that honours them is
 * rl_claim_due (claim.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_limits.h"
#include "rl/err.h"

/* A value not given ($3 or $4 NULL) keeps what the row holds. */
static const char ops_limit_set[] =
    "INSERT INTO run_limits (tenant, job, concurrency, weight)"
    "VALUES ($1, coalesce($2, ''), $3::int4, coalesce($4::int4, 1))"
    "    ON CONFLICT (tenant, job) DO UPDATE"
    "   SET concurrency = CASE WHEN $3::int4 IS NULL"
    "                          THEN run_limits.concurrency"
    "                          ELSE EXCLUDED.concurrency END,"
    "       weight = coalesce($4::int4, run_limits.weight),"
    "       updated_at = now()";

static const char ops_limit_remove[] =
    "DELETE FROM run_limits WHERE tenant = $1 AND job = coalesce($2, '')";

static const char ops_limits_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.tenant, x.job), '[]')::text"
    "  FROM (SELECT l.tenant, l.job, l.concurrency, l.weight,"
    "               (SELECT count(*) FROM runs r"
    "                 WHERE r.status = 'running' AND r.tenant = l.tenant"
    "                   AND (l.job = '' OR r.job = l.job)) AS running,"
    "               (SELECT count(*) FROM runs r"
    "                 WHERE r.status = 'pending' AND r.tenant = l.tenant"
    "                   AND (l.job = '' OR r.job = l.job)"
    "                   AND r.next_attempt_at <= now()) AS waiting"
    "          FROM run_limits l"
    "         WHERE $1::text IS NULL OR l.tenant = $1) x";

int
rl_db_limit_set(struct rl_db *db, const char *tenant, const char *job,
                int concurrency, int weight, char *errstr, size_t errstr_size)
{
    char conc[32], w[32];
    const char *params[4] = {tenant, job && *job ? job : NULL,
                             concurrency >= 0 ? conc : NULL,
                             weight > 0 ? w : NULL};

    if (!tenant || !*tenant || (concurrency < 0 && weight <= 0) ||
        (job && *job && weight > 0)) {
        rl_set_err(errstr, errstr_size,
                   "could not set the limit: need a tenant and a concurrency "
                   "or a weight (a weight is per tenant, not per job)");
        return RL_ERR_INVALID;
    }
    snprintf(conc, sizeof(conc), "%d", concurrency);
    snprintf(w, sizeof(w), "%d", weight);
    return db_write(db, ops_limit_set, 4, params, "set the limit", NULL, errstr,
                    errstr_size);
}

int
rl_db_limit_remove(struct rl_db *db, const char *tenant, const char *job,
                   char *errstr, size_t errstr_size)
{
    const char *params[2] = {tenant, job && *job ? job : NULL};
    int rows = 0;
    int err = db_write(db, ops_limit_remove, 2, params, "remove the limit",
                       &rows, errstr, errstr_size);

    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not remove the limit of %s%s%s: there is none",
                   tenant, job && *job ? " job " : "", job && *job ? job : "");
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_limits_json(struct rl_db *db, const char *tenant, char **json,
                  char *errstr, size_t errstr_size)
{
    const char *params[1] = {tenant};

    return db_one_text(db, ops_limits_list, 1, params, "list limits", json,
                       errstr, errstr_size);
}
