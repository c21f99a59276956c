/* batch_poll.c: the poll stage's statements: a submitted batch leased
 * only together with a slot of its provider's poll bound
 * (rl_batch_take_poll), and the count of its runs anyone still waits
 * for, which decides whether it is cancelled at the provider. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_batch_lease.h"
#include "rl/db_batch_poll.h"

static const char batch_take_poll[] =
    "SELECT * FROM rl_batch_take_poll($1, $2::int8, $3, $4::int8)";

static const char batch_live_runs[] =
    "SELECT count(*) FROM batch_runs b JOIN runs r ON r.run_id = b.run_id"
    " WHERE b.batch_id = $1 AND b.state = 'in_batch'"
    "   AND r.status = 'running' AND r.lock_owner = '" RL_BATCH_OWNER "'"
    "   AND r.lease_epoch = b.lease_epoch";

int
rl_db_batch_take_poll(struct rl_db *db, const char *owner, int64_t lease_ms,
                      const char *provider, int64_t spacing_ms,
                      struct rl_batch *out, int *taken, char *errstr,
                      size_t errstr_size)
{
    char lease[32], spacing[32];
    const char *params[4] = {owner, lease, provider, spacing};
    PGresult *res;
    int err = 0;

    *taken = 0;
    snprintf(lease, sizeof(lease), "%" PRId64, lease_ms);
    snprintf(spacing, sizeof(spacing), "%" PRId64, spacing_ms);
    res = db_exec_simple(db, batch_take_poll, 4, params, &err, errstr,
                         errstr_size, "take a batch to poll");
    if (!res)
        return err;
    if (PQntuples(res) == 1) {
        db_batch_row(res, 0, out);
        *taken = 1;
    }
    PQclear(res);
    return 0;
}

int
rl_db_batch_live_runs(struct rl_db *db, const char *batch_id, int *live,
                      char *errstr, size_t errstr_size)
{
    const char *params[1] = {batch_id};
    char *text = NULL;
    int err = db_one_text(db, batch_live_runs, 1, params,
                          "count the batch's runs", &text, errstr, errstr_size);

    *live = text ? atoi(text) : 0;
    free(text);
    return err;
}
