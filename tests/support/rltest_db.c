#include "rltest_db.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_complete.h"
#include "rl/db_dispatch.h"
#include "rl/db_outbox.h"
#include "rl/err.h"
#include "rl/timefmt.h"

/* The batch reports a lost lease per run, without a message. */
static int
stale(char *errstr, size_t errstr_size, const char *what, const char *run_id)
{
    rl_set_err(errstr, errstr_size, "could not %s %s: lease lost", what,
               run_id);
    return RL_ERR_STALE;
}

int
rltest_db_claim(struct rl_db *db, const struct rl_run_reg *reg,
                const char *worker, int lease_seconds, struct rl_claim *claim,
                char *errstr, size_t errstr_size)
{
    return rl_db_register_claim_some(
        db, reg, 1,
        &(struct rl_claim_opts){
            .worker = worker, .lease_seconds = lease_seconds, .max = -1},
        claim, errstr, errstr_size);
}

int
rltest_db_dispatch_budget(struct rl_db *db, const char *run_id,
                          const char *worker, int64_t lease_epoch,
                          const char *idempotency_key, int64_t estimate,
                          int64_t wait_ms, enum rl_dispatch_status *status,
                          int *attempt_no, char *next_window, char *errstr,
                          size_t errstr_size)
{
    struct rl_dispatch_req req = {
        .run_id = run_id,
        .lease_epoch = lease_epoch,
        .idempotency_key = idempotency_key,
        .estimate = estimate,
    };
    struct rl_dispatch_res res;
    int err;

    *attempt_no = 0;
    *status = RL_DISPATCH_RECORDED;
    if (next_window)
        next_window[0] = '\0';
    err = rl_db_dispatch_runs(db, &req, 1, worker, wait_ms, &res, errstr,
                              errstr_size);
    if (err)
        return err;
    if (res.err == RL_ERR_STALE)
        return stale(errstr, errstr_size, "record dispatch of run", run_id);
    *status = res.status;
    *attempt_no = res.attempt_no;
    if (res.status == RL_DISPATCH_DEADLINE) {
        rl_set_err(
            errstr, errstr_size,
            "could not record dispatch of run %s: its deadline has passed",
            run_id);
    } else if (res.status != RL_DISPATCH_RECORDED) {
        if (next_window)
            snprintf(next_window, RL_TIME_UTC_SIZE, "%s", res.next_window);
        rl_set_err(errstr, errstr_size, "%s", res.detail);
    }
    return 0;
}

int
rltest_db_dispatch(struct rl_db *db, const char *run_id, const char *worker,
                   int64_t lease_epoch, const char *idempotency_key,
                   int *attempt_no, char *errstr, size_t errstr_size)
{
    enum rl_dispatch_status status;
    int err;

    err = rltest_db_dispatch_budget(db, run_id, worker, lease_epoch,
                                    idempotency_key, 0, 1, &status, attempt_no,
                                    NULL, errstr, errstr_size);
    if (err == 0 && status != RL_DISPATCH_RECORDED)
        return RL_ERR_CONFLICT;
    return err;
}

int
rltest_db_complete(struct rl_db *db, const char *run_id, const char *worker,
                   int64_t lease_epoch, const struct rl_attempt_ok *oc,
                   const char *output_json, const char *const *channels,
                   size_t n_channels, int *completed, char *errstr,
                   size_t errstr_size)
{
    struct rl_complete_req req = {
        .run_id = run_id,
        .lease_epoch = lease_epoch,
        .output_json = output_json,
        .channels = channels,
        .n_channels = n_channels,
        .oc = {0, -1, NULL, -1, -1, -1, -1},
    };
    struct rl_complete_res res;
    int err;

    if (completed)
        *completed = 0;
    if (oc)
        req.oc = *oc;
    err = rl_db_complete_runs(db, &req, 1, worker, &res, errstr, errstr_size);
    if (err)
        return err;
    if (res.err == RL_ERR_STALE)
        return stale(errstr, errstr_size, "complete run", run_id);
    if (res.err == RL_ERR_NOTFOUND) {
        rl_set_err(errstr, errstr_size,
                   "could not complete run %s: no such run", run_id);
        return RL_ERR_NOTFOUND;
    }
    if (completed)
        *completed = res.completed;
    return 0;
}

#define TS_US(col)                                                             \
    "to_char(" col " AT TIME ZONE 'UTC', "                                     \
    "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"

/* The row as one JSON object, so that rl_db_exec's single value carries
 * every column. */
static const char get_run_sql[] =
    "SELECT json_build_object("
    " 'run_id', run_id, 'job', job, 'tenant', tenant,"
    " 'scheduled_at', to_char(scheduled_at AT TIME ZONE 'UTC',"
    "                         'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"'),"
    " 'version', version, 'fingerprint', fingerprint, 'status', status,"
    " 'lock_owner', lock_owner,"
    " 'lease_live', coalesce(lock_expires_at > now(), false),"
    " 'lease_epoch', lease_epoch, 'attempts', attempts,"
    " 'ambiguous_prior', rl_ambiguous_prior(run_id),"
    " 'ambiguous_count', rl_ambiguous_attempts(run_id),"
    " 'request', request::text, 'raw_input', raw_input::text,"
    " 'output', output::text, 'last_error', last_error,"
    " 'error_class', error_class,"
    " 'next_attempt_at', " TS_US(
        "next_attempt_at") ","
                           " 'lock_expires_at', " TS_US(
                               "lock_expires_at") ","
                                                  " 'deadline_at', " TS_US(
                                                      "deadline_at") ","
                                                                     " '"
                                                                     "completed"
                                                                     "_at',"
                                                                     " " TS_US(
                                                                         "compl"
                                                                         "eted_"
                                                                         "at") ","
                                                                               " 'source_topic', source_topic, 'source_partition', source_partition,"
                                                                               " 'source_offset', source_offset)::text"
                                                                               "  FROM runs WHERE run_id = $1";

static char *
dup_member(const cJSON *obj, const char *name, int *oom)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
    char *copy;

    if (!cJSON_IsString(item))
        return NULL;
    copy = strdup(item->valuestring);
    if (!copy)
        *oom = 1;
    return copy;
}

static void
copy_member(const cJSON *obj, const char *name, char *out, size_t size)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);

    snprintf(out, size, "%s", cJSON_IsString(item) ? item->valuestring : "");
}

static int64_t
int_member(const cJSON *obj, const char *name, int64_t if_null)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);

    return cJSON_IsNumber(item) ? (int64_t)item->valuedouble : if_null;
}

static int
bool_member(const cJSON *obj, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, name));
}

int
rltest_db_get_run(struct rl_db *db, const char *run_id, struct rltest_run *run,
                  char *errstr, size_t errstr_size)
{
    const char *params[1] = {run_id};
    size_t size = 1 << 20;
    char *text = malloc(size);
    cJSON *row = NULL;
    int oom = 0;
    int rows;

    memset(run, 0, sizeof(*run));
    if (!text) {
        rl_set_err(errstr, errstr_size, "could not read run %s: out of memory",
                   run_id);
        return RL_ERR_NOMEM;
    }
    rows =
        rl_db_exec(db, get_run_sql, 1, params, text, size, errstr, errstr_size);
    if (rows <= 0) {
        free(text);
        if (rows < 0)
            return rows;
        rl_set_err(errstr, errstr_size, "could not read run %s: no such run",
                   run_id);
        return RL_ERR_NOTFOUND;
    }
    row = cJSON_Parse(text);
    free(text);
    if (!row) {
        rl_set_err(errstr, errstr_size,
                   "could not read run %s: the row is not JSON", run_id);
        return RL_ERR_INVALID;
    }
    copy_member(row, "run_id", run->run_id, sizeof(run->run_id));
    run->job = dup_member(row, "job", &oom);
    run->tenant = dup_member(row, "tenant", &oom);
    copy_member(row, "scheduled_at", run->scheduled_at,
                sizeof(run->scheduled_at));
    run->version = dup_member(row, "version", &oom);
    copy_member(row, "fingerprint", run->fingerprint, sizeof(run->fingerprint));
    copy_member(row, "status", run->status, sizeof(run->status));
    run->lock_owner = dup_member(row, "lock_owner", &oom);
    run->lease_live = bool_member(row, "lease_live");
    run->lease_epoch = int_member(row, "lease_epoch", 0);
    run->attempts = (int)int_member(row, "attempts", 0);
    run->ambiguous_prior = bool_member(row, "ambiguous_prior");
    run->ambiguous_count = (int)int_member(row, "ambiguous_count", 0);
    run->request_json = dup_member(row, "request", &oom);
    run->raw_input = dup_member(row, "raw_input", &oom);
    run->output_json = dup_member(row, "output", &oom);
    run->last_error = dup_member(row, "last_error", &oom);
    run->error_class = dup_member(row, "error_class", &oom);
    copy_member(row, "next_attempt_at", run->next_attempt_at,
                sizeof(run->next_attempt_at));
    copy_member(row, "lock_expires_at", run->lock_expires_at,
                sizeof(run->lock_expires_at));
    copy_member(row, "deadline_at", run->deadline_at, sizeof(run->deadline_at));
    copy_member(row, "completed_at", run->completed_at,
                sizeof(run->completed_at));
    run->source_topic = dup_member(row, "source_topic", &oom);
    run->source_partition = (int32_t)int_member(row, "source_partition", -1);
    run->source_offset = int_member(row, "source_offset", -1);
    cJSON_Delete(row);
    if (oom) {
        rltest_run_clear(run);
        rl_set_err(errstr, errstr_size, "could not read run %s: out of memory",
                   run_id);
        return RL_ERR_NOMEM;
    }
    return 0;
}

void
rltest_run_clear(struct rltest_run *run)
{
    if (!run)
        return;
    free(run->job);
    free(run->tenant);
    free(run->version);
    free(run->lock_owner);
    free(run->request_json);
    free(run->raw_input);
    free(run->output_json);
    free(run->last_error);
    free(run->error_class);
    free(run->source_topic);
    memset(run, 0, sizeof(*run));
}

int
rltest_db_outbox_finish(struct rl_db *db, const struct rl_outbox_row *rows,
                        size_t n, int delivered, char *errstr,
                        size_t errstr_size)
{
    struct rl_outbox_outcome *outcomes = NULL;
    int err;

    if (n > 0) {
        outcomes = calloc(n, sizeof(*outcomes));
        if (!outcomes) {
            /* The rows stay leased: the test fails anyway. */
            snprintf(errstr, errstr_size,
                     "could not finish outbox batch: out of memory");
            return RL_ERR_NOMEM;
        }
    }
    for (size_t i = 0; i < n; i++)
        outcomes[i].fate = delivered ? RL_OUTBOX_DELIVERED : RL_OUTBOX_RETRY;
    /* Due again at once: the caller said nothing about backing off. */
    err = rl_db_outbox_finish_rows(db, rows, n, outcomes, 0, 0, errstr,
                                   errstr_size);
    free(outcomes);
    return err;
}
