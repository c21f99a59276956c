/* claim.c: how a run comes to be held. Registering a batch of runs and
 * claiming each one that is due (rl_db_register_claim_some, one round trip
 * through rl_claim_runs of schema/020_claim_new_runs_at_insert.sql), and
 * the sweeper's claim of expired leases and due runs (rl_db_claim_due).
 * Both return the lease epoch every later write must name. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_claim.h"
#include "rl/err.h"

/* Register + claim a batch: see rl_claim_runs in
 * schema/020_claim_new_runs_at_insert.sql. */
static const struct db_stmt claim_runs = {
    DB_STMT_CLAIM_RUNS, "claim_runs",
    "SELECT * FROM rl_claim_runs($1::text[], $2::text[], $3::text[], "
    "$4::timestamptz[], $5::text[], $6::text[], $7::jsonb[], $8::jsonb[], "
    "$9::float8[], $10::text[], $11::int4[], $12::int8[], $15::text[], "
    "$13::text, $14::float8, $16::int4)",
    16};

/* Sweeper: expired leases, then due pending runs in a fair order within
 * the concurrency limits, each row claimed by exactly one sweeper; see
 * rl_claim_due in schema/018_fair_claims.sql. The result has
 * rl_claim_runs' columns. */
static const struct db_stmt claim_due_runs = {
    DB_STMT_CLAIM_DUE_RUNS, "claim_due_runs",
    "SELECT * FROM rl_claim_due($1::text, $2::float8, $3::int4)", 3};

static const char *const claim_names[] = {
    [RL_CLAIM_WON] = "won",       [RL_CLAIM_COMPLETED] = "completed",
    [RL_CLAIM_LEASED] = "leased", [RL_CLAIM_CONFLICT] = "conflict",
    [RL_CLAIM_PARKED] = "parked", [RL_CLAIM_NOT_DUE] = "not_due",
    [RL_CLAIM_QUEUED] = "queued", [RL_CLAIM_PURGED] = "purged",
};

void
rl_claim_clear(struct rl_claim *claim)
{
    if (!claim)
        return;
    free(claim->job);
    free(claim->tenant);
    free(claim->version);
    free(claim->request_json);
    free(claim->raw_input);
    free(claim->output_json);
    free(claim->source_topic);
    free(claim->traceparent);
    memset(claim, 0, sizeof(*claim));
}

/* Column order shared by rl_claim_runs() and claim_due_runs. */
enum claim_col {
    CC_ORD,
    CC_RUN_ID,
    CC_CLAIM,
    CC_STATUS,
    CC_FINGERPRINT,
    CC_LEASE_EPOCH,
    CC_ATTEMPTS,
    CC_AMBIGUOUS_PRIOR,
    CC_AMBIGUOUS_COUNT,
    CC_DEADLINE_PASSED,
    CC_JOB,
    CC_TENANT,
    CC_SCHEDULED_AT,
    CC_VERSION,
    CC_REQUEST,
    CC_RAW_INPUT,
    CC_OUTPUT,
    CC_SOURCE_TOPIC,
    CC_SOURCE_PARTITION,
    CC_SOURCE_OFFSET,
    CC_TRACEPARENT,
    CC_COUNT
};

/* Fills claim from one result row. Returns 0, RL_ERR_NOMEM or RL_ERR_DB
 * (an unknown claim word). */
static int
claim_from_row(const PGresult *res, int row, struct rl_claim *claim)
{
    const char *word = PQgetvalue(res, row, CC_CLAIM);
    int oom = 0;
    size_t k;

    memset(claim, 0, sizeof(*claim));
    for (k = 0; k < sizeof(claim_names) / sizeof(claim_names[0]); k++) {
        if (strcmp(word, claim_names[k]) == 0)
            break;
    }
    if (k == sizeof(claim_names) / sizeof(claim_names[0]))
        return RL_ERR_DB;
    claim->status = (enum rl_claim_status)k;
    db_copy_value(res, row, CC_RUN_ID, claim->run_id, sizeof(claim->run_id));
    if (!PQgetisnull(res, row, CC_STATUS) &&
        rl_run_status_parse(PQgetvalue(res, row, CC_STATUS),
                            &claim->run_status) != 0)
        return RL_ERR_DB;
    db_copy_value(res, row, CC_FINGERPRINT, claim->fingerprint,
                  sizeof(claim->fingerprint));
    claim->lease_epoch = db_int_value(res, row, CC_LEASE_EPOCH, 0);
    claim->attempts = (int)db_int_value(res, row, CC_ATTEMPTS, 0);
    claim->ambiguous_prior = db_bool_value(res, row, CC_AMBIGUOUS_PRIOR);
    claim->ambiguous_count = (int)db_int_value(res, row, CC_AMBIGUOUS_COUNT, 0);
    claim->deadline_passed = db_bool_value(res, row, CC_DEADLINE_PASSED);
    claim->job = db_dup_value(res, row, CC_JOB, &oom);
    claim->tenant = db_dup_value(res, row, CC_TENANT, &oom);
    db_copy_value(res, row, CC_SCHEDULED_AT, claim->scheduled_at,
                  sizeof(claim->scheduled_at));
    claim->version = db_dup_value(res, row, CC_VERSION, &oom);
    claim->request_json = db_dup_value(res, row, CC_REQUEST, &oom);
    claim->raw_input = db_dup_value(res, row, CC_RAW_INPUT, &oom);
    claim->output_json = db_dup_value(res, row, CC_OUTPUT, &oom);
    claim->source_topic = db_dup_value(res, row, CC_SOURCE_TOPIC, &oom);
    claim->source_partition =
        (int32_t)db_int_value(res, row, CC_SOURCE_PARTITION, -1);
    claim->source_offset = db_int_value(res, row, CC_SOURCE_OFFSET, -1);
    claim->traceparent = db_dup_value(res, row, CC_TRACEPARENT, &oom);
    if (oom) {
        rl_claim_clear(claim);
        return RL_ERR_NOMEM;
    }
    return 0;
}

static int
valid_reg(const struct rl_run_reg *reg)
{
    return reg->run_id && reg->job && reg->tenant && reg->scheduled_at &&
           reg->version && reg->fingerprint && reg->request_json;
}

int
rl_db_register_claim_some(struct rl_db *db, const struct rl_run_reg *regs,
                          size_t n, const struct rl_claim_opts *opts,
                          struct rl_claim *claims, char *errstr,
                          size_t errstr_size)
{
    const char *worker = opts->worker;
    int lease_seconds = opts->lease_seconds;
    long claim_max = opts->max;
    enum {
        A_RUN_ID,
        A_JOB,
        A_TENANT,
        A_SCHEDULED_AT,
        A_VERSION,
        A_FINGERPRINT,
        A_REQUEST,
        A_INPUT,
        A_DEADLINE,
        A_TOPIC,
        A_PARTITION,
        A_OFFSET,
        A_TRACEPARENT,
        A_COUNT
    };
    struct rl_buf arrays[A_COUNT];
    const char *params[16];
    char lease[32];
    char max[32];
    const char *subject = n == 1 ? regs[0].run_id : NULL;
    const char *what = n == 1 ? "claim run" : "claim runs";
    PGresult *res = NULL;
    int err = RL_ERR_DB;
    int a;

    memset(arrays, 0, sizeof(arrays));
    if (claims)
        memset(claims, 0, n * sizeof(*claims));
    if (n == 0 || !regs || !claims || !worker || !*worker ||
        lease_seconds <= 0) {
        rl_set_err(errstr, errstr_size,
                   "could not claim runs: need at least one run, a worker and "
                   "a positive lease");
        return RL_ERR_INVALID;
    }
    for (size_t i = 0; i < n; i++) {
        if (!valid_reg(&regs[i])) {
            rl_set_err(errstr, errstr_size,
                       "could not claim run %s: run_id, job, tenant, "
                       "scheduled_at, version, fingerprint and request are "
                       "required",
                       regs[i].run_id ? regs[i].run_id : "(null)");
            return RL_ERR_INVALID;
        }
    }

    for (a = 0; a < A_COUNT; a++)
        rl_buf_put(&arrays[a], "{", 1);
    for (size_t i = 0; i < n; i++) {
        const struct rl_run_reg *reg = &regs[i];

        db_array_add(&arrays[A_RUN_ID], reg->run_id);
        db_array_add(&arrays[A_JOB], reg->job);
        db_array_add(&arrays[A_TENANT], reg->tenant);
        db_array_add(&arrays[A_SCHEDULED_AT], reg->scheduled_at);
        db_array_add(&arrays[A_VERSION], reg->version);
        db_array_add(&arrays[A_FINGERPRINT], reg->fingerprint);
        db_array_add(&arrays[A_REQUEST], reg->request_json);
        db_array_add(&arrays[A_INPUT],
                     db_is_json_null(reg->input_json) ? NULL : reg->input_json);
        db_array_add_int(&arrays[A_DEADLINE], reg->deadline_seconds, 0);
        db_array_add(&arrays[A_TOPIC], reg->source_topic);
        db_array_add_int(&arrays[A_PARTITION], reg->source_partition, 1);
        db_array_add_int(&arrays[A_OFFSET], reg->source_offset, 1);
        db_array_add(&arrays[A_TRACEPARENT],
                     reg->traceparent && *reg->traceparent ? reg->traceparent
                                                           : NULL);
    }
    for (a = 0; a < A_COUNT; a++) {
        rl_buf_put(&arrays[a], "}", 1);
        if (arrays[a].failed) {
            rl_set_err(errstr, errstr_size,
                       "could not claim runs: out of memory");
            err = RL_ERR_NOMEM;
            goto done;
        }
        params[a < A_TRACEPARENT ? a : 14] = arrays[a].data;
    }
    snprintf(lease, sizeof(lease), "%d", lease_seconds);
    params[12] = worker;
    params[13] = lease;
    snprintf(max, sizeof(max), "%ld", claim_max);
    params[15] = claim_max < 0 ? NULL : max;

    res = db_exec_stmt(db, &claim_runs, params, what, subject, &err, errstr,
                       errstr_size);
    if (!res)
        goto done;
    if ((size_t)PQntuples(res) != n || PQnfields(res) != CC_COUNT) {
        rl_set_err(errstr, errstr_size,
                   "could not claim runs: expected %zu rows of %d columns, got "
                   "%d of %d (is the schema migrated?)",
                   n, CC_COUNT, PQntuples(res), PQnfields(res));
        err = RL_ERR_DB;
        goto done;
    }
    for (int row = 0; row < PQntuples(res); row++) {
        int64_t ord = db_int_value(res, row, CC_ORD, 0);

        if (ord < 1 || (size_t)ord > n || claims[ord - 1].run_id[0]) {
            rl_set_err(errstr, errstr_size,
                       "could not claim runs: bad row order in the result");
            err = RL_ERR_DB;
            goto done;
        }
        err = claim_from_row(res, row, &claims[ord - 1]);
        if (err != 0) {
            rl_set_err(errstr, errstr_size, "could not claim run %s: %s",
                       PQgetvalue(res, row, CC_RUN_ID),
                       err == RL_ERR_NOMEM ? "out of memory"
                                           : "unknown claim result");
            goto done;
        }
    }
    err = 0;

done:
    if (err != 0) {
        for (size_t i = 0; i < n; i++)
            rl_claim_clear(&claims[i]);
    }
    PQclear(res);
    for (a = 0; a < A_COUNT; a++)
        rl_buf_free(&arrays[a]);
    return err;
}

int
rl_db_claim_due(struct rl_db *db, const struct rl_claim_opts *opts,
                struct rl_claim *claims, size_t *n_claimed, char *errstr,
                size_t errstr_size)
{
    const char *worker = opts->worker;
    int lease_seconds = opts->lease_seconds;
    size_t limit = opts->max > 0 ? (size_t)opts->max : 0;
    char lease[32];
    char lim[32];
    const char *params[3] = {worker, lease, lim};
    PGresult *res;
    int err = RL_ERR_DB;
    int rows;

    *n_claimed = 0;
    if (!worker || !*worker || lease_seconds <= 0 || limit == 0 || !claims) {
        rl_set_err(errstr, errstr_size,
                   "could not claim due runs: need a worker, a positive lease "
                   "and a positive limit");
        return RL_ERR_INVALID;
    }
    snprintf(lease, sizeof(lease), "%d", lease_seconds);
    snprintf(lim, sizeof(lim), "%zu", limit);
    res = db_exec_stmt(db, &claim_due_runs, params, "claim due runs", NULL,
                       &err, errstr, errstr_size);
    if (!res)
        return err;
    rows = PQntuples(res);
    if ((size_t)rows > limit || PQnfields(res) != CC_COUNT) {
        rl_set_err(errstr, errstr_size,
                   "could not claim due runs: unexpected result shape");
        PQclear(res);
        return RL_ERR_DB;
    }
    for (int row = 0; row < rows; row++) {
        err = claim_from_row(res, row, &claims[row]);
        if (err != 0) {
            /* The leases are taken but unreported: they expire and the
             * next sweep reclaims them. */
            rl_set_err(errstr, errstr_size,
                       "could not claim due run %s: out of memory",
                       PQgetvalue(res, row, CC_RUN_ID));
            for (int k = 0; k < row; k++)
                rl_claim_clear(&claims[k]);
            PQclear(res);
            return err;
        }
    }
    PQclear(res);
    *n_claimed = (size_t)rows;
    return 0;
}
