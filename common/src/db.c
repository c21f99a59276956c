/* db.c: the only file that talks to PostgreSQL (libpq).
 *
 * Every statement the process runs is below, once, as a named static string
 * called after what it guarantees, prepared lazily per connection and run
 * with PQexecPrepared. The claim and complete logic lives in plpgsql
 * functions of schema/001_init.sql so each is one round trip. */
#include "rl/db.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/buf.h"
#include "rl/err.h"
#include "rl/log.h"
#include "rl/migrations.h"

struct rl_db {
    PGconn *conn;
    char *schema;        /* NULL: the server's search_path */
    unsigned prepared;   /* bit per enum stmt: prepared on this session */
    int schema_set;      /* search_path applied on this session */
    int in_tx;           /* a relay transaction is open */
    char *outbox_schema; /* rl_db_outbox_listen: where outbox resolved */
    int outbox_vacuum;   /* may vacuum the outbox: 0 unchecked, 1 yes, -1 no */
    int vacuuming;       /* rl_db_outbox_vacuum_start sent, result pending */
};

/* ---- statements --------------------------------------------------------- */

/* Register + claim a batch: see rl_claim_runs in schema/001_init.sql. */
static const char claim_runs[] =
    "SELECT * FROM rl_claim_runs($1::text[], $2::text[], $3::text[], "
    "$4::timestamptz[], $5::text[], $6::text[], $7::jsonb[], $8::jsonb[], "
    "$9::float8[], $10::text[], $11::int4[], $12::int8[], $13::text, "
    "$14::float8)";

/* Sweeper: due retries and expired leases, each row claimed by exactly one
 * sweeper (SKIP LOCKED); the result has rl_claim_runs' columns. */
static const char claim_due_runs[] =
    "WITH retry AS ("
    "  SELECT r.run_id FROM runs r"
    "   WHERE r.status = 'pending' AND r.next_attempt_at <= now()"
    "   ORDER BY r.next_attempt_at LIMIT $3"
    "     FOR NO KEY UPDATE SKIP LOCKED"
    "), expired AS ("
    "  SELECT r.run_id FROM runs r"
    "   WHERE r.status = 'running' AND r.lock_expires_at < now()"
    "   ORDER BY r.lock_expires_at LIMIT $3"
    "     FOR NO KEY UPDATE SKIP LOCKED"
    "), due AS ("
    "  SELECT d.run_id FROM (SELECT run_id FROM retry"
    "                        UNION ALL SELECT run_id FROM expired) d"
    "   LIMIT $3"
    "), c AS ("
    "  UPDATE runs r"
    "     SET status = 'running', lock_owner = $1::text,"
    "         lock_expires_at = now() + make_interval(secs => $2::float8),"
    "         lease_epoch = r.lease_epoch + 1, next_attempt_at = NULL,"
    "         updated_at = now()"
    "    FROM due WHERE r.run_id = due.run_id"
    "  RETURNING r.*"
    ")"
    "SELECT row_number() OVER (), c.run_id, 'won', c.status, c.fingerprint,"
    "       c.lease_epoch, c.attempts, rl_ambiguous_prior(c.run_id),"
    "       rl_ambiguous_attempts(c.run_id),"
    "       coalesce(c.deadline_at <= now(), false), c.job, c.tenant,"
    "       to_char(c.scheduled_at AT TIME ZONE 'UTC',"
    "               'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"'),"
    "       c.version, c.request, c.raw_input, NULL::jsonb, c.source_topic,"
    "       c.source_partition, c.source_offset"
    "  FROM c";

static const char store_raw_input_once[] =
    "UPDATE runs"
    "   SET raw_input = coalesce(raw_input, nullif($4::jsonb, 'null')),"
    "       updated_at = now()"
    " WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "   AND status = 'running'"
    " RETURNING raw_input";

/* attempt_no is the run's attempt count after the increment, so the two
 * can never disagree; no row at all when the lease is gone. One lease epoch
 * dispatches at most once (every retry is a new claim), so a dispatch this
 * (worker, epoch) already recorded and that has no outcome is returned
 * instead of a new one: redoing the statement after a connection lost
 * around its COMMIT must not leave a phantom attempt without an outcome,
 * which the next claimer would count as ambiguous. */
static const char record_dispatch_under_lease[] =
    "WITH lease AS ("
    "  SELECT run_id FROM runs"
    "   WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "     AND status = 'running'"
    "), prior AS ("
    "  SELECT a.attempt_no FROM attempts a JOIN lease l USING (run_id)"
    "   WHERE a.lease_epoch = $3::int8 AND a.worker = $2"
    "     AND a.outcome IS NULL"
    "   ORDER BY a.attempt_no DESC LIMIT 1"
    "), r AS ("
    "  UPDATE runs SET attempts = attempts + 1, updated_at = now()"
    "   WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "     AND status = 'running' AND NOT EXISTS (SELECT 1 FROM prior)"
    "  RETURNING run_id, attempts"
    "), ins AS ("
    "  INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker,"
    "                        idempotency_key)"
    "  SELECT r.run_id, r.attempts, $3::int8, $2::text, $4::text FROM r"
    "  RETURNING attempt_no"
    ")"
    "SELECT attempt_no FROM ins UNION ALL SELECT attempt_no FROM prior";

static const char record_outcome_once[] =
    "UPDATE attempts"
    "   SET outcome = $3, http_status = $4::int4,"
    "       upstream_request_id = $5, prompt_tokens = $6::int8,"
    "       completion_tokens = $7::int8, cached_tokens = $8::int8,"
    "       latency_ms = $9::int8, error = $10, finished_at = now()"
    " WHERE run_id = $1 AND attempt_no = $2::int4 AND outcome IS NULL";

/* Rows are locked in run_id order, as rl_claim_runs locks them, so a
 * renewal and a claim batch sharing runs cannot deadlock. The lease is
 * owner and epoch: no status condition, which would let the planner read
 * every leased run through the partial index on running runs instead of
 * looking these up by run_id (a lock owner implies status running, see
 * schema/010_leases_by_run_id.sql). */
static const char renew_leases_of_owner[] =
    "UPDATE runs r"
    "   SET lock_expires_at = now() + make_interval(secs => $2::float8),"
    "       updated_at = now()"
    "  FROM (SELECT l.run_id, u.ord"
    "          FROM runs l"
    "          JOIN unnest($3::text[], $4::int8[]) WITH ORDINALITY"
    "               AS u(run_id, epoch, ord)"
    "            ON l.run_id = u.run_id AND l.lease_epoch = u.epoch"
    "         WHERE l.lock_owner = $1"
    "         ORDER BY l.run_id"
    "           FOR NO KEY UPDATE OF l) held"
    " WHERE r.run_id = held.run_id AND r.lock_owner = $1"
    " RETURNING held.ord";

static const char release_run_under_lease[] =
    "UPDATE runs"
    "   SET status = 'pending', lock_owner = NULL, lock_expires_at = NULL,"
    "       next_attempt_at = now() + $4::int8 * interval '1 millisecond',"
    "       error_class = $5, last_error = $6, updated_at = now()"
    " WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "   AND status = 'running'";

static const char park_run_under_lease[] =
    "UPDATE runs"
    "   SET status = $4, lock_owner = NULL, lock_expires_at = NULL,"
    "       next_attempt_at = NULL, error_class = $5, last_error = $6,"
    "       updated_at = now()"
    " WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "   AND status = 'running' AND $4 IN ('failed', 'unknown')";

/* See rl_complete_run in schema/001_init.sql. */
static const char complete_run_with_outbox[] =
    "SELECT result, output, outbox_rows"
    "  FROM rl_complete_run($1, $2, $3::int8, $4::jsonb, $5::text[],"
    "                       $6::jsonb[])";

/* Batches of the per-run writes (schema/007_batches.sql): the dispatches
 * of many runs, each under its own lease and within its budgets, and
 * their completions, each with the outcome of the attempt that produced
 * the output in the same transaction (a worker that dies before this
 * statement leaves the attempt without an outcome, the evidence the
 * ambiguity policy needs, never an "ok" attempt whose answer was lost). */
static const char dispatch_runs[] =
    "SELECT ord, result, attempt_no, next_window, detail"
    "  FROM rl_dispatch_runs($1::text[], $2::int8[], $3::text[], $4::int8[],"
    "                        $5, $6::int8)";

static const char complete_runs[] =
    "SELECT ord, result, outbox_rows, outcome_recorded"
    "  FROM rl_complete_runs($1::text[], $2::int8[], $3, $4::jsonb[],"
    "                        $5::text[], $6::text[], $7::int4[], $8::int4[],"
    "                        $9::text[], $10::int8[], $11::int8[],"
    "                        $12::int8[], $13::int8[])";

/* Issue 6, approval gates: an approval-required run stores its answer as
 * an immutable proposal and waits (rl_propose_run in
 * schema/006_approval.sql) instead of completing; the attempt's outcome is
 * recorded in the same statement, as complete_attempt_with_outbox does. */
static const char propose_attempt_awaiting_approval[] =
    "WITH o AS ("
    "  UPDATE attempts"
    "     SET outcome = 'ok', http_status = $7::int4,"
    "         upstream_request_id = $8, prompt_tokens = $9::int8,"
    "         completion_tokens = $10::int8, cached_tokens = $11::int8,"
    "         latency_ms = $12::int8, error = NULL, finished_at = now()"
    "   WHERE run_id = $1 AND attempt_no = $6::int4 AND outcome IS NULL"
    "  RETURNING 1"
    ")"
    "SELECT p.result, p.digest, (SELECT count(*) FROM o)"
    "  FROM rl_propose_run($1, $2, $3::int8, $4::jsonb, $5) p";

#define TS_UTC_US(col)                                                         \
    "to_char(" col " AT TIME ZONE 'UTC', "                                     \
    "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"

static const char
    get_run[] = "SELECT run_id, job, tenant,"
                "       to_char(scheduled_at AT TIME ZONE 'UTC',"
                "               'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"'),"
                "       version, fingerprint, status, lock_owner,"
                "       coalesce(lock_expires_at > now(), false), lease_epoch, "
                "attempts,"
                "       rl_ambiguous_prior(run_id), "
                "rl_ambiguous_attempts(run_id),"
                "       request, raw_input, output,"
                "       last_error, error_class, " TS_UTC_US("next_attempt_at") ", " TS_UTC_US("lock_expires_at") ", " TS_UTC_US(
                    "deadline_at") ", " TS_UTC_US("completed_at") ","
                                                                  "       "
                                                                  "source_"
                                                                  "topic, "
                                                                  "source_"
                                                                  "partition, "
                                                                  "source_"
                                                                  "offset"
                                                                  "  FROM runs "
                                                                  "WHERE "
                                                                  "run_id = $1";

/* Oldest first; rows another relay holds are skipped, not waited for.
 *
 * The outbox is a queue: its row count swings between a few hundred and
 * a backlog, and the statistics say whatever it held at the last vacuum.
 * Both statements are written so that no estimate can make them cost more
 * than the batch: the inner query locks at most $1 rows through
 * outbox_pending_by_age_idx, and only those rows look up their run. The
 * join form (outbox JOIN runs ... ORDER BY ... LIMIT ... FOR UPDATE) was
 * planned, with the outbox believed to hold one row, as every pending row
 * joined to its run and sorted before the limit: in a soak each batch
 * then read 160,000 rows, 1.4 s, and the backlog fed itself to 270,000. */
static const char lock_pending_outbox[] =
    "SELECT o.run_id, o.channel, r.job, r.tenant, o.payload,"
    "       o.delivery_count, o.ctid"
    "  FROM (SELECT ob.ctid, ob.run_id, ob.channel, ob.payload,"
    "               ob.delivery_count, ob.created_at"
    "          FROM outbox ob"
    "         ORDER BY ob.created_at"
    "         LIMIT $1::int8"
    "           FOR UPDATE SKIP LOCKED) o"
    "  JOIN runs r ON r.run_id = o.run_id"
    " ORDER BY o.created_at";

/* Delivered rows leave the pending set for the insert-only audit table;
 * the others stay with their delivery count raised. The rows are the ones
 * this transaction locked, named by ctid (stable while locked) and checked
 * against their run ids: a TID scan, whatever the statistics say. A join
 * of the batch against the outbox was planned, with the outbox believed
 * to hold one row, as a nested loop comparing every pending row with
 * every row of the batch: 71 million comparisons, 18.6 s, in one soak. */
static const char move_delivered_outbox[] =
    "WITH moved AS ("
    "  DELETE FROM outbox o"
    "   WHERE $3::bool AND o.ctid = ANY ($1::tid[])"
    "     AND o.run_id = ANY ($2::text[])"
    "  RETURNING o.run_id, o.channel, o.payload, o.created_at,"
    "            o.delivery_count"
    "), audit AS ("
    "  INSERT INTO outbox_delivered (run_id, channel, payload, created_at,"
    "                                delivered_at, delivery_count)"
    "  SELECT m.run_id, m.channel, m.payload, m.created_at, now(),"
    "         m.delivery_count + 1"
    "    FROM moved m"
    "      ON CONFLICT DO NOTHING"
    "  RETURNING 1"
    "), retry AS ("
    "  UPDATE outbox o SET delivery_count = o.delivery_count + 1"
    "   WHERE NOT $3::bool AND o.ctid = ANY ($1::tid[])"
    "     AND o.run_id = ANY ($2::text[])"
    "  RETURNING 1"
    ")"
    "SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM retry)";

enum stmt {
    STMT_CLAIM_RUNS,
    STMT_CLAIM_DUE_RUNS,
    STMT_STORE_RAW_INPUT_ONCE,
    STMT_RECORD_DISPATCH_UNDER_LEASE,
    STMT_RECORD_OUTCOME_ONCE,
    STMT_RENEW_LEASES_OF_OWNER,
    STMT_RELEASE_RUN_UNDER_LEASE,
    STMT_PARK_RUN_UNDER_LEASE,
    STMT_COMPLETE_RUN_WITH_OUTBOX,
    STMT_COMPLETE_RUNS,
    STMT_GET_RUN,
    STMT_LOCK_PENDING_OUTBOX,
    STMT_MOVE_DELIVERED_OUTBOX,
    STMT_DISPATCH_RUNS,
    STMT_PROPOSE_ATTEMPT_AWAITING_APPROVAL,
    STMT_COUNT
};

struct statement {
    const char *name;
    const char *sql;
    int nparams;
};

static const struct statement statements[STMT_COUNT] = {
    [STMT_CLAIM_RUNS] = {"claim_runs", claim_runs, 14},
    [STMT_CLAIM_DUE_RUNS] = {"claim_due_runs", claim_due_runs, 3},
    [STMT_STORE_RAW_INPUT_ONCE] = {"store_raw_input_once", store_raw_input_once,
                                   4},
    [STMT_RECORD_DISPATCH_UNDER_LEASE] = {"record_dispatch_under_lease",
                                          record_dispatch_under_lease, 4},
    [STMT_RECORD_OUTCOME_ONCE] = {"record_outcome_once", record_outcome_once,
                                  10},
    [STMT_RENEW_LEASES_OF_OWNER] = {"renew_leases_of_owner",
                                    renew_leases_of_owner, 4},
    [STMT_RELEASE_RUN_UNDER_LEASE] = {"release_run_under_lease",
                                      release_run_under_lease, 6},
    [STMT_PARK_RUN_UNDER_LEASE] = {"park_run_under_lease", park_run_under_lease,
                                   6},
    [STMT_COMPLETE_RUNS] = {"complete_runs", complete_runs, 13},
    [STMT_COMPLETE_RUN_WITH_OUTBOX] = {"complete_run_with_outbox",
                                       complete_run_with_outbox, 6},
    [STMT_GET_RUN] = {"get_run", get_run, 1},
    [STMT_LOCK_PENDING_OUTBOX] = {"lock_pending_outbox", lock_pending_outbox,
                                  1},
    [STMT_MOVE_DELIVERED_OUTBOX] = {"move_delivered_outbox",
                                    move_delivered_outbox, 3},
    [STMT_DISPATCH_RUNS] = {"dispatch_runs", dispatch_runs, 6},
    [STMT_PROPOSE_ATTEMPT_AWAITING_APPROVAL] =
        {"propose_attempt_awaiting_approval", propose_attempt_awaiting_approval,
         12},
};

/* Migrations bookkeeping (run by rl_db_migrate only). */
static const char create_schema_migrations[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "  name text PRIMARY KEY,"
    "  checksum text NOT NULL,"
    "  applied_at timestamptz NOT NULL DEFAULT now())";
static const char lock_migrations[] = "SELECT pg_advisory_lock($1::int8)";
static const char unlock_migrations[] = "SELECT pg_advisory_unlock($1::int8)";
static const char list_applied_migrations[] =
    "SELECT name, checksum FROM schema_migrations ORDER BY name";
static const char record_migration[] =
    "INSERT INTO schema_migrations (name, checksum) VALUES ($1, $2)";
static const char set_search_path[] =
    "SELECT set_config('search_path', quote_ident($1), false)";

/* ---- errors ------------------------------------------------------------- */

/* Replaces every occurrence of the connection's password in msg by "***":
 * server messages do not carry it, but a libpq message quoting a malformed
 * parameter could. */
static void
scrub_password(PGconn *conn, char *msg)
{
    const char *pass = conn ? PQpass(conn) : NULL;
    size_t plen;
    char *hit;

    if (!pass || !*pass)
        return;
    plen = strlen(pass);
    while ((hit = strstr(msg, pass)) != NULL) {
        size_t rest = strlen(hit + plen);

        memmove(hit + 3, hit + plen, rest + 1);
        memcpy(hit, "***", 3);
        if (plen < 3) /* the replacement could contain it again */
            break;
    }
}

/* "could not <what>: <message>" into errstr, message from res when it has
 * one, else from the connection; trailing newlines dropped. */
static void fail_msg(struct rl_db *db, const PGresult *res, char *errstr,
                     size_t errstr_size, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void
fail_msg(struct rl_db *db, const PGresult *res, char *errstr,
         size_t errstr_size, const char *fmt, ...)
{
    char what[256];
    char msg[1024];
    const char *text = NULL;
    size_t len;
    va_list ap;

    if (!errstr || errstr_size == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);

    if (res)
        text = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    if (!text || !*text)
        text = db && db->conn ? PQerrorMessage(db->conn) : "";
    if (!text || !*text)
        text = "unknown error";
    snprintf(msg, sizeof(msg), "%s", text);
    len = strlen(msg);
    while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == '\r'))
        msg[--len] = '\0';
    /* libpq adds hint lines ("\n\tIs the server running..."): keep the
     * message on one line for the log. */
    for (char *p = msg; *p; p++) {
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    }
    scrub_password(db ? db->conn : NULL, msg);
    snprintf(errstr, errstr_size, "could not %s: %s", what, msg);
}

/* Data exceptions (class 22) and integrity violations (23) are the
 * caller's input: retrying as is cannot help. Everything else may be
 * transient. */
static int
err_from_result(const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

    if (state && (strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0))
        return RL_ERR_INVALID;
    return RL_ERR_DB;
}

/* ---- text helpers ------------------------------------------------------- */

/* Appends one element to a PostgreSQL array literal being built in b
 * ("{" first, "}" after the last): quoted, with '"' and '\' escaped, or
 * NULL. */
static void
array_add(struct rl_buf *b, const char *elem)
{
    const char *p;
    const char *run;

    rl_buf_put(b, b->len > 1 ? "," : "", b->len > 1 ? 1 : 0);
    if (!elem) {
        rl_buf_put(b, "NULL", 4);
        return;
    }
    rl_buf_put(b, "\"", 1);
    for (p = run = elem; *p; p++) {
        if (*p == '"' || *p == '\\') {
            rl_buf_put(b, run, (size_t)(p - run));
            rl_buf_put(b, "\\", 1);
            run = p;
        }
    }
    rl_buf_put(b, run, (size_t)(p - run));
    rl_buf_put(b, "\"", 1);
}

static void
array_add_int(struct rl_buf *b, int64_t value, int null_if_negative)
{
    char num[32];

    if (null_if_negative && value < 0) {
        array_add(b, NULL);
        return;
    }
    snprintf(num, sizeof(num), "%" PRId64, value);
    array_add(b, num);
}

/* Copies column col of row into a new string; NULL for SQL NULL. Sets
 * *oom when the copy fails. */
static char *
dup_value(const PGresult *res, int row, int col, int *oom)
{
    char *copy;

    if (PQgetisnull(res, row, col))
        return NULL;
    copy = strdup(PQgetvalue(res, row, col));
    if (!copy)
        *oom = 1;
    return copy;
}

static void
copy_value(const PGresult *res, int row, int col, char *out, size_t size)
{
    snprintf(out, size, "%s",
             PQgetisnull(res, row, col) ? "" : PQgetvalue(res, row, col));
}

static int64_t
int_value(const PGresult *res, int row, int col, int64_t if_null)
{
    if (PQgetisnull(res, row, col))
        return if_null;
    return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

static int
bool_value(const PGresult *res, int row, int col)
{
    return !PQgetisnull(res, row, col) && PQgetvalue(res, row, col)[0] == 't';
}

static int
is_json_null(const char *json)
{
    return !json || strcmp(json, "null") == 0;
}

/* ---- connection --------------------------------------------------------- */

/* Server notices (e.g. "relation already exists, skipping") would go to
 * stderr unformatted; the log carries them as debug lines instead. */
static void
notice_to_log(void *arg, const char *message)
{
    size_t len = strlen(message);

    (void)arg;
    while (len > 0 && message[len - 1] == '\n')
        len--;
    rl_log_debug(NULL, "postgresql: %.*s", (int)len, message);
}

static int
valid_schema_name(const char *schema)
{
    size_t len = strlen(schema);

    if (len == 0 || len > RL_DB_SCHEMA_MAX || isdigit((unsigned char)*schema))
        return 0;
    for (const char *p = schema; *p; p++) {
        if (!(*p >= 'a' && *p <= 'z') && !(*p >= '0' && *p <= '9') && *p != '_')
            return 0;
    }
    return 1;
}

/* Runs a statement without parameters (PQexecParams still refuses a second
 * statement in the string). Returns the result or NULL with errstr set. */
static PGresult *
exec_simple(struct rl_db *db, const char *sql, int nparams,
            const char *const *params, int *err, char *errstr,
            size_t errstr_size, const char *what)
{
    PGresult *res;
    ExecStatusType status;

    res = PQexecParams(db->conn, sql, nparams, NULL, params, NULL, NULL, 0);
    status = PQresultStatus(res);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
        fail_msg(db, res, errstr, errstr_size, "%s", what);
        *err = err_from_result(res);
        PQclear(res);
        return NULL;
    }
    return res;
}

/* Applies the configured schema to a fresh session. */
static int
apply_schema(struct rl_db *db, char *errstr, size_t errstr_size)
{
    const char *params[1];
    PGresult *res;
    int err = RL_ERR_DB;

    if (!db->schema || db->schema_set)
        return 0;
    params[0] = db->schema;
    res = exec_simple(db, set_search_path, 1, params, &err, errstr, errstr_size,
                      "set the schema search path");
    if (!res)
        return err;
    PQclear(res);
    db->schema_set = 1;
    return 0;
}

struct rl_db *
rl_db_connect_schema(const char *conninfo, const char *schema, char *errstr,
                     size_t errstr_size)
{
    /* Earlier entries are defaults the connection string may override.
     * Statements are planned for the values they are given (custom plans):
     * a generic plan cached while the ledger was small keeps sequential
     * scans as the tables grow (see schema/007_batches.sql). */
    const char *keys[] = {"connect_timeout",
                          "fallback_application_name",
                          "keepalives",
                          "keepalives_idle",
                          "options",
                          "dbname",
                          NULL};
    const char *values[] = {
        "10", "runledger", "1", "30", "-c plan_cache_mode=force_custom_plan",
        NULL, NULL};
    struct rl_db *db = NULL;
    PQconninfoOption *opts;
    char *parse_err = NULL;

    if (schema && !valid_schema_name(schema)) {
        rl_set_err(errstr, errstr_size,
                   "could not connect to postgresql: schema name must be 1 to "
                   "%d of [a-z0-9_], not starting with a digit",
                   RL_DB_SCHEMA_MAX);
        return NULL;
    }
    if (!conninfo) {
        conninfo = getenv("DATABASE_URL");
        if (!conninfo)
            conninfo = "";
    }
    /* libpq's parse error may quote the offending text, which can be the
     * password: report only that the syntax is wrong. */
    if (*conninfo) {
        opts = PQconninfoParse(conninfo, &parse_err);
        if (!opts) {
            PQfreemem(parse_err);
            rl_set_err(errstr, errstr_size,
                       "could not connect to postgresql: the connection string "
                       "is malformed (not shown: it may hold a password)");
            return NULL;
        }
        PQconninfoFree(opts);
    }
    values[5] = conninfo;

    db = calloc(1, sizeof(*db));
    if (!db)
        goto oom;
    if (schema) {
        db->schema = strdup(schema);
        if (!db->schema)
            goto oom;
    }
    db->conn = PQconnectdbParams(keys, values, 1);
    if (!db->conn)
        goto oom;
    if (PQstatus(db->conn) != CONNECTION_OK) {
        fail_msg(db, NULL, errstr, errstr_size, "connect to postgresql");
        rl_db_destroy(db);
        return NULL;
    }
    PQsetNoticeProcessor(db->conn, notice_to_log, NULL);
    if (apply_schema(db, errstr, errstr_size) != 0) {
        rl_db_destroy(db);
        return NULL;
    }
    return db;

oom:
    rl_db_destroy(db);
    rl_set_err(errstr, errstr_size,
               "could not connect to postgresql: out of memory");
    return NULL;
}

struct rl_db *
rl_db_connect(const char *conninfo, char *errstr, size_t errstr_size)
{
    return rl_db_connect_schema(conninfo, NULL, errstr, errstr_size);
}

void
rl_db_destroy(struct rl_db *db)
{
    if (!db)
        return;
    if (db->conn)
        PQfinish(db->conn);
    free(db->schema);
    free(db->outbox_schema);
    free(db);
}

int
rl_db_ping(struct rl_db *db, char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;

    if (PQstatus(db->conn) != CONNECTION_OK) {
        PQreset(db->conn);
        db->prepared = 0;
        db->schema_set = 0;
        db->in_tx = 0;
        if (PQstatus(db->conn) != CONNECTION_OK) {
            fail_msg(db, NULL, errstr, errstr_size, "reconnect to postgresql");
            return RL_ERR_DB;
        }
    }
    err = apply_schema(db, errstr, errstr_size);
    if (err != 0)
        return err;
    res = exec_simple(db, "SELECT 1", 0, NULL, &err, errstr, errstr_size,
                      "ping postgresql");
    if (!res)
        return err;
    PQclear(res);
    return 0;
}

/* Prepares statement id on first use in this session and runs it.
 * Returns the result (PQclear it) or NULL with *err and errstr set,
 * errstr reading "could not <what>[ <subject>]: <message>". */
static PGresult *
exec_stmt(struct rl_db *db, enum stmt id, const char *const *params,
          const char *what, const char *subject, int *err, char *errstr,
          size_t errstr_size)
{
    const struct statement *st = &statements[id];
    PGresult *res;
    ExecStatusType status;

    *err = RL_ERR_DB;
    if (!db->schema_set && db->schema &&
        apply_schema(db, errstr, errstr_size) != 0)
        return NULL;
    if (!(db->prepared & (1u << id))) {
        res = PQprepare(db->conn, st->name, st->sql, st->nparams, NULL);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            fail_msg(db, res, errstr, errstr_size, "%s%s%s", what,
                     subject ? " " : "", subject ? subject : "");
            PQclear(res);
            return NULL;
        }
        PQclear(res);
        db->prepared |= 1u << id;
    }
    res =
        PQexecPrepared(db->conn, st->name, st->nparams, params, NULL, NULL, 0);
    status = PQresultStatus(res);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
        fail_msg(db, res, errstr, errstr_size, "%s%s%s", what,
                 subject ? " " : "", subject ? subject : "");
        *err = err_from_result(res);
        PQclear(res);
        return NULL;
    }
    return res;
}

/* ---- migrations --------------------------------------------------------- */

static int
apply_migration(struct rl_db *db, const struct rl_migration *m,
                const char *checksum, char *errstr, size_t errstr_size)
{
    const char *params[2] = {m->name, checksum};
    PGresult *res;
    char what[200];
    int err = RL_ERR_DB;

    snprintf(what, sizeof(what), "apply migration %s", m->name);
    res = exec_simple(db, "BEGIN", 0, NULL, &err, errstr, errstr_size, what);
    if (!res)
        return err;
    PQclear(res);

    /* A migration is a script of many statements: the one place that runs
     * SQL text through PQexec. It is compiled in, never user input. */
    res = PQexec(db->conn, m->sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK &&
        PQresultStatus(res) != PGRES_TUPLES_OK) {
        fail_msg(db, res, errstr, errstr_size, "%s", what);
        PQclear(res);
        goto rollback;
    }
    PQclear(res);

    res = exec_simple(db, record_migration, 2, params, &err, errstr,
                      errstr_size, what);
    if (!res)
        goto rollback;
    PQclear(res);

    res = exec_simple(db, "COMMIT", 0, NULL, &err, errstr, errstr_size, what);
    if (!res)
        return RL_ERR_DB;
    PQclear(res);
    return 0;

rollback:
    PQclear(PQexecParams(db->conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0));
    return RL_ERR_DB;
}

int
rl_db_migrate(struct rl_db *db, int *applied, char *errstr, size_t errstr_size)
{
    char key[32];
    const char *key_param[1] = {key};
    char(*checksums)[RL_HEX_SIZE] = NULL;
    char *applied_flags = NULL;
    PGresult *res = NULL;
    int locked = 0;
    int count = 0;
    int err = RL_ERR_DB;

    if (applied)
        *applied = 0;
    snprintf(key, sizeof(key), "%" PRId64, RL_DB_MIGRATE_LOCK_KEY);

    checksums = calloc(rl_migrations_count + 1, sizeof(*checksums));
    applied_flags = calloc(rl_migrations_count + 1, 1);
    if (!checksums || !applied_flags) {
        rl_set_err(errstr, errstr_size, "could not migrate: out of memory");
        err = RL_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < rl_migrations_count; i++) {
        const struct rl_migration *m = &rl_migrations[i];

        if (rl_sha256_hex(m->sql, strlen(m->sql), checksums[i]) != 0) {
            rl_set_err(errstr, errstr_size,
                       "could not migrate: could not hash %s", m->name);
            err = RL_ERR_NOMEM;
            goto done;
        }
    }

    /* Two deployments starting at once must not both apply a file (nor
     * both create the schema). */
    res = exec_simple(db, lock_migrations, 1, key_param, &err, errstr,
                      errstr_size, "take the migration lock");
    if (!res)
        goto done;
    PQclear(res);
    locked = 1;

    if (db->schema) {
        char *ident =
            PQescapeIdentifier(db->conn, db->schema, strlen(db->schema));
        char sql[RL_DB_SCHEMA_MAX * 2 + 64];

        if (!ident) {
            fail_msg(db, NULL, errstr, errstr_size, "create schema %s",
                     db->schema);
            goto done;
        }
        /* An identifier cannot be a parameter; it was validated to
         * [a-z0-9_] and quoted. */
        snprintf(sql, sizeof(sql), "CREATE SCHEMA IF NOT EXISTS %s", ident);
        PQfreemem(ident);
        res = exec_simple(db, sql, 0, NULL, &err, errstr, errstr_size,
                          "create the ledger schema");
        if (!res)
            goto done;
        PQclear(res);
    }

    res = exec_simple(db, create_schema_migrations, 0, NULL, &err, errstr,
                      errstr_size, "create schema_migrations");
    if (!res)
        goto done;
    PQclear(res);

    res = exec_simple(db, list_applied_migrations, 0, NULL, &err, errstr,
                      errstr_size, "read schema_migrations");
    if (!res)
        goto done;
    for (int row = 0; row < PQntuples(res); row++) {
        const char *name = PQgetvalue(res, row, 0);
        const char *sum = PQgetvalue(res, row, 1);
        size_t i;

        for (i = 0; i < rl_migrations_count; i++) {
            if (strcmp(rl_migrations[i].name, name) == 0)
                break;
        }
        if (i == rl_migrations_count) {
            /* Applied by a newer build: nothing for this one to do. */
            rl_log_warn(NULL,
                        "migration %s is applied but unknown to this build "
                        "(a newer runledger applied it)",
                        name);
            continue;
        }
        if (strcmp(checksums[i], sum) != 0) {
            rl_set_err(errstr, errstr_size,
                       "migration %s was changed after it was applied: "
                       "checksum %s in the database, %s in this build; add a "
                       "new migration instead",
                       name, sum, checksums[i]);
            err = RL_ERR_CHECKSUM;
            goto done;
        }
        applied_flags[i] = 1;
    }
    PQclear(res);
    res = NULL;

    for (size_t i = 0; i < rl_migrations_count; i++) {
        if (applied_flags[i])
            continue;
        err = apply_migration(db, &rl_migrations[i], checksums[i], errstr,
                              errstr_size);
        if (err != 0)
            goto done;
        count++;
        rl_log_info(NULL, "applied migration %s", rl_migrations[i].name);
    }
    err = 0;

done:
    PQclear(res);
    if (locked) {
        PQclear(PQexecParams(db->conn, unlock_migrations, 1, NULL, key_param,
                             NULL, NULL, 0));
    }
    free(checksums);
    free(applied_flags);
    if (applied)
        *applied = count;
    return err;
}

/* ---- claims ------------------------------------------------------------- */

static const char *const claim_names[] = {
    [RL_CLAIM_WON] = "won",       [RL_CLAIM_COMPLETED] = "completed",
    [RL_CLAIM_LEASED] = "leased", [RL_CLAIM_CONFLICT] = "conflict",
    [RL_CLAIM_PARKED] = "parked", [RL_CLAIM_NOT_DUE] = "not_due",
};

const char *
rl_claim_status_name(enum rl_claim_status status)
{
    if ((unsigned)status < sizeof(claim_names) / sizeof(claim_names[0]))
        return claim_names[status];
    return "invalid";
}

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
    copy_value(res, row, CC_RUN_ID, claim->run_id, sizeof(claim->run_id));
    copy_value(res, row, CC_STATUS, claim->run_status,
               sizeof(claim->run_status));
    copy_value(res, row, CC_FINGERPRINT, claim->fingerprint,
               sizeof(claim->fingerprint));
    claim->lease_epoch = int_value(res, row, CC_LEASE_EPOCH, 0);
    claim->attempts = (int)int_value(res, row, CC_ATTEMPTS, 0);
    claim->ambiguous_prior = bool_value(res, row, CC_AMBIGUOUS_PRIOR);
    claim->ambiguous_count = (int)int_value(res, row, CC_AMBIGUOUS_COUNT, 0);
    claim->deadline_passed = bool_value(res, row, CC_DEADLINE_PASSED);
    claim->job = dup_value(res, row, CC_JOB, &oom);
    claim->tenant = dup_value(res, row, CC_TENANT, &oom);
    copy_value(res, row, CC_SCHEDULED_AT, claim->scheduled_at,
               sizeof(claim->scheduled_at));
    claim->version = dup_value(res, row, CC_VERSION, &oom);
    claim->request_json = dup_value(res, row, CC_REQUEST, &oom);
    claim->raw_input = dup_value(res, row, CC_RAW_INPUT, &oom);
    claim->output_json = dup_value(res, row, CC_OUTPUT, &oom);
    claim->source_topic = dup_value(res, row, CC_SOURCE_TOPIC, &oom);
    claim->source_partition =
        (int32_t)int_value(res, row, CC_SOURCE_PARTITION, -1);
    claim->source_offset = int_value(res, row, CC_SOURCE_OFFSET, -1);
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
rl_db_register_claim(struct rl_db *db, const struct rl_run_reg *regs, size_t n,
                     const char *worker, int lease_seconds,
                     struct rl_claim *claims, char *errstr, size_t errstr_size)
{
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
        A_COUNT
    };
    struct rl_buf arrays[A_COUNT];
    const char *params[14];
    char lease[32];
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

        array_add(&arrays[A_RUN_ID], reg->run_id);
        array_add(&arrays[A_JOB], reg->job);
        array_add(&arrays[A_TENANT], reg->tenant);
        array_add(&arrays[A_SCHEDULED_AT], reg->scheduled_at);
        array_add(&arrays[A_VERSION], reg->version);
        array_add(&arrays[A_FINGERPRINT], reg->fingerprint);
        array_add(&arrays[A_REQUEST], reg->request_json);
        array_add(&arrays[A_INPUT],
                  is_json_null(reg->input_json) ? NULL : reg->input_json);
        array_add_int(&arrays[A_DEADLINE], reg->deadline_seconds, 0);
        array_add(&arrays[A_TOPIC], reg->source_topic);
        array_add_int(&arrays[A_PARTITION], reg->source_partition, 1);
        array_add_int(&arrays[A_OFFSET], reg->source_offset, 1);
    }
    for (a = 0; a < A_COUNT; a++) {
        rl_buf_put(&arrays[a], "}", 1);
        if (arrays[a].failed) {
            rl_set_err(errstr, errstr_size,
                       "could not claim runs: out of memory");
            err = RL_ERR_NOMEM;
            goto done;
        }
        params[a] = arrays[a].data;
    }
    snprintf(lease, sizeof(lease), "%d", lease_seconds);
    params[12] = worker;
    params[13] = lease;

    res = exec_stmt(db, STMT_CLAIM_RUNS, params, what, subject, &err, errstr,
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
        int64_t ord = int_value(res, row, CC_ORD, 0);

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
rl_db_claim_run(struct rl_db *db, const struct rl_run_reg *reg,
                const char *worker, int lease_seconds, struct rl_claim *claim,
                char *errstr, size_t errstr_size)
{
    return rl_db_register_claim(db, reg, 1, worker, lease_seconds, claim,
                                errstr, errstr_size);
}

int
rl_db_claim_due(struct rl_db *db, const char *worker, int lease_seconds,
                size_t limit, struct rl_claim *claims, size_t *n_claimed,
                char *errstr, size_t errstr_size)
{
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
    res = exec_stmt(db, STMT_CLAIM_DUE_RUNS, params, "claim due runs", NULL,
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

/* ---- writes under a lease ----------------------------------------------- */

static void
stale_msg(char *errstr, size_t errstr_size, const char *what,
          const char *run_id, int64_t epoch)
{
    rl_set_err(errstr, errstr_size,
               "could not %s %s: lease lost (another worker owns the run, or "
               "lease epoch %" PRId64 " is no longer current)",
               what, run_id, epoch);
}

int
rl_db_store_raw_input(struct rl_db *db, const char *run_id, const char *worker,
                      int64_t lease_epoch, const char *input_json,
                      char **stored, char *errstr, size_t errstr_size)
{
    char epoch[32];
    const char *params[4] = {run_id, worker, epoch,
                             is_json_null(input_json) ? NULL : input_json};
    PGresult *res;
    int err = RL_ERR_DB;
    int oom = 0;

    *stored = NULL;
    snprintf(epoch, sizeof(epoch), "%" PRId64, lease_epoch);
    res =
        exec_stmt(db, STMT_STORE_RAW_INPUT_ONCE, params,
                  "store raw input of run", run_id, &err, errstr, errstr_size);
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        stale_msg(errstr, errstr_size, "store raw input of run", run_id,
                  lease_epoch);
        return RL_ERR_STALE;
    }
    *stored = dup_value(res, 0, 0, &oom);
    PQclear(res);
    if (oom) {
        rl_set_err(errstr, errstr_size,
                   "could not store raw input of run %s: out of memory",
                   run_id);
        return RL_ERR_NOMEM;
    }
    return 0;
}

int
rl_db_record_dispatch(struct rl_db *db, const char *run_id, const char *worker,
                      int64_t lease_epoch, const char *idempotency_key,
                      int *attempt_no, char *errstr, size_t errstr_size)
{
    char epoch[32];
    const char *params[4] = {run_id, worker, epoch, idempotency_key};
    PGresult *res;
    int err = RL_ERR_DB;

    *attempt_no = 0;
    if (!idempotency_key) {
        rl_set_err(errstr, errstr_size,
                   "could not record dispatch of run %s: no idempotency key",
                   run_id);
        return RL_ERR_INVALID;
    }
    snprintf(epoch, sizeof(epoch), "%" PRId64, lease_epoch);
    res =
        exec_stmt(db, STMT_RECORD_DISPATCH_UNDER_LEASE, params,
                  "record dispatch of run", run_id, &err, errstr, errstr_size);
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        stale_msg(errstr, errstr_size, "record dispatch of run", run_id,
                  lease_epoch);
        return RL_ERR_STALE;
    }
    *attempt_no = (int)int_value(res, 0, 0, 0);
    PQclear(res);
    return 0;
}

/* Formats value into buf, or returns NULL (SQL NULL) when negative. */
static const char *
int_or_null(int64_t value, char *buf, size_t size)
{
    if (value < 0)
        return NULL;
    snprintf(buf, size, "%" PRId64, value);
    return buf;
}

int
rl_db_record_outcome(struct rl_db *db, const char *run_id, int attempt_no,
                     const char *outcome, int http_status,
                     const char *upstream_request_id, int64_t prompt_tokens,
                     int64_t completion_tokens, int64_t cached_tokens,
                     int64_t latency_ms, const char *error, char *errstr,
                     size_t errstr_size)
{
    char attempt[16], http[16], prompt[32], completion[32], cached[32],
        latency[32];
    const char *params[10];
    PGresult *res;
    int err = RL_ERR_DB;
    int rows;

    if (!outcome || !*outcome) {
        rl_set_err(errstr, errstr_size,
                   "could not record outcome of run %s: no outcome", run_id);
        return RL_ERR_INVALID;
    }
    snprintf(attempt, sizeof(attempt), "%d", attempt_no);
    params[0] = run_id;
    params[1] = attempt;
    params[2] = outcome;
    params[3] = int_or_null(http_status, http, sizeof(http));
    params[4] = upstream_request_id;
    params[5] = int_or_null(prompt_tokens, prompt, sizeof(prompt));
    params[6] = int_or_null(completion_tokens, completion, sizeof(completion));
    params[7] = int_or_null(cached_tokens, cached, sizeof(cached));
    params[8] = int_or_null(latency_ms, latency, sizeof(latency));
    params[9] = error;
    res = exec_stmt(db, STMT_RECORD_OUTCOME_ONCE, params,
                    "record outcome of run", run_id, &err, errstr, errstr_size);
    if (!res)
        return err;
    rows = atoi(PQcmdTuples(res));
    PQclear(res);
    if (rows != 1) {
        rl_set_err(errstr, errstr_size,
                   "could not record outcome of run %s: attempt %d does not "
                   "exist or already has an outcome",
                   run_id, attempt_no);
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_renew_leases(struct rl_db *db, const char *worker, int lease_seconds,
                   const char *const *run_ids, const int64_t *epochs, size_t n,
                   int *held, char *errstr, size_t errstr_size)
{
    struct rl_buf ids = {0}, eps = {0};
    char lease[32];
    const char *params[4];
    PGresult *res = NULL;
    int err = RL_ERR_DB;
    int count = 0;

    if (n == 0)
        return 0;
    memset(held, 0, n * sizeof(*held));
    if (!worker || !*worker || lease_seconds <= 0) {
        rl_set_err(
            errstr, errstr_size,
            "could not renew leases: need a worker and a positive lease");
        return RL_ERR_INVALID;
    }
    rl_buf_put(&ids, "{", 1);
    rl_buf_put(&eps, "{", 1);
    for (size_t i = 0; i < n; i++) {
        array_add(&ids, run_ids[i]);
        array_add_int(&eps, epochs[i], 0);
    }
    rl_buf_put(&ids, "}", 1);
    rl_buf_put(&eps, "}", 1);
    if (ids.failed || eps.failed) {
        rl_set_err(errstr, errstr_size,
                   "could not renew leases: out of memory");
        err = RL_ERR_NOMEM;
        goto done;
    }
    snprintf(lease, sizeof(lease), "%d", lease_seconds);
    params[0] = worker;
    params[1] = lease;
    params[2] = ids.data;
    params[3] = eps.data;
    res = exec_stmt(db, STMT_RENEW_LEASES_OF_OWNER, params,
                    n == 1 ? "renew lease of run" : "renew leases",
                    n == 1 ? run_ids[0] : NULL, &err, errstr, errstr_size);
    if (!res)
        goto done;
    for (int row = 0; row < PQntuples(res); row++) {
        int64_t ord = int_value(res, row, 0, 0);

        if (ord >= 1 && (size_t)ord <= n && !held[ord - 1]) {
            held[ord - 1] = 1;
            count++;
        }
    }
    err = count;

done:
    PQclear(res);
    rl_buf_free(&ids);
    rl_buf_free(&eps);
    return err;
}

/* Runs a lease-guarded UPDATE; no row means the lease is gone. */
static int
update_under_lease(struct rl_db *db, enum stmt id, const char *const *params,
                   const char *what, const char *run_id, int64_t epoch,
                   char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;
    int rows;

    res = exec_stmt(db, id, params, what, run_id, &err, errstr, errstr_size);
    if (!res)
        return err;
    rows = atoi(PQcmdTuples(res));
    PQclear(res);
    if (rows != 1) {
        stale_msg(errstr, errstr_size, what, run_id, epoch);
        return RL_ERR_STALE;
    }
    return 0;
}

int
rl_db_release(struct rl_db *db, const char *run_id, const char *worker,
              int64_t lease_epoch, int64_t delay_ms, const char *error_class,
              const char *error, char *errstr, size_t errstr_size)
{
    char epoch[32], delay[32];
    const char *params[6] = {run_id, worker, epoch, delay, error_class, error};

    snprintf(epoch, sizeof(epoch), "%" PRId64, lease_epoch);
    snprintf(delay, sizeof(delay), "%" PRId64, delay_ms > 0 ? delay_ms : 0);
    return update_under_lease(db, STMT_RELEASE_RUN_UNDER_LEASE, params,
                              "release run", run_id, lease_epoch, errstr,
                              errstr_size);
}

int
rl_db_fail(struct rl_db *db, const char *run_id, const char *worker,
           int64_t lease_epoch, const char *status, const char *error_class,
           const char *error, char *errstr, size_t errstr_size)
{
    char epoch[32];
    const char *params[6] = {run_id, worker, epoch, status, error_class, error};

    if (!status ||
        (strcmp(status, "failed") != 0 && strcmp(status, "unknown") != 0)) {
        rl_set_err(errstr, errstr_size,
                   "could not park run %s: status must be failed or unknown",
                   run_id);
        return RL_ERR_INVALID;
    }
    snprintf(epoch, sizeof(epoch), "%" PRId64, lease_epoch);
    return update_under_lease(db, STMT_PARK_RUN_UNDER_LEASE, params, "park run",
                              run_id, lease_epoch, errstr, errstr_size);
}

void
rl_completion_clear(struct rl_completion *completion)
{
    if (!completion)
        return;
    free(completion->output_json);
    memset(completion, 0, sizeof(*completion));
}

/* rl_db_complete_run, and with oc the attempt's outcome in the same
 * statement (complete_attempt_with_outbox). */
int
rl_db_complete_run(struct rl_db *db, const char *run_id, const char *worker,
                   int64_t lease_epoch, const char *output_json,
                   const struct rl_outbox_msg *msgs, size_t n_msgs,
                   struct rl_completion *out, char *errstr, size_t errstr_size)
{
    struct rl_buf channels = {0}, payloads = {0};
    char epoch[32];
    const char *params[6];
    PGresult *res = NULL;
    const char *result;
    int err = RL_ERR_DB;
    int oom = 0;

    memset(out, 0, sizeof(*out));
    if (is_json_null(output_json)) {
        rl_set_err(errstr, errstr_size, "could not complete run %s: no output",
                   run_id);
        return RL_ERR_INVALID;
    }
    rl_buf_put(&channels, "{", 1);
    rl_buf_put(&payloads, "{", 1);
    for (size_t i = 0; i < n_msgs; i++) {
        if (!msgs[i].channel) {
            rl_set_err(errstr, errstr_size,
                       "could not complete run %s: an outbox message has no "
                       "channel",
                       run_id);
            err = RL_ERR_INVALID;
            goto done;
        }
        array_add(&channels, msgs[i].channel);
        array_add(&payloads, msgs[i].payload_json);
    }
    rl_buf_put(&channels, "}", 1);
    rl_buf_put(&payloads, "}", 1);
    if (channels.failed || payloads.failed) {
        rl_set_err(errstr, errstr_size,
                   "could not complete run %s: out of memory", run_id);
        err = RL_ERR_NOMEM;
        goto done;
    }
    snprintf(epoch, sizeof(epoch), "%" PRId64, lease_epoch);
    params[0] = run_id;
    params[1] = worker;
    params[2] = epoch;
    params[3] = output_json;
    params[4] = channels.data;
    params[5] = payloads.data;
    res = exec_stmt(db, STMT_COMPLETE_RUN_WITH_OUTBOX, params, "complete run",
                    run_id, &err, errstr, errstr_size);
    if (!res)
        goto done;
    if (PQntuples(res) != 1) {
        rl_set_err(errstr, errstr_size,
                   "could not complete run %s: unexpected result", run_id);
        err = RL_ERR_DB;
        goto done;
    }
    result = PQgetvalue(res, 0, 0);
    if (strcmp(result, "stale") == 0) {
        stale_msg(errstr, errstr_size, "complete run", run_id, lease_epoch);
        err = RL_ERR_STALE;
        goto done;
    }
    if (strcmp(result, "not_found") == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not complete run %s: no such run", run_id);
        err = RL_ERR_NOTFOUND;
        goto done;
    }
    out->status = strcmp(result, "completed") == 0 ? RL_COMPLETE_DONE
                                                   : RL_COMPLETE_ALREADY;
    out->output_json = dup_value(res, 0, 1, &oom);
    out->outbox_rows = (int)int_value(res, 0, 2, 0);
    if (oom) {
        /* The run is completed either way; only the copy failed. */
        rl_set_err(errstr, errstr_size,
                   "could not complete run %s: out of memory", run_id);
        err = RL_ERR_NOMEM;
        goto done;
    }
    err = 0;

done:
    if (err != 0)
        rl_completion_clear(out);
    PQclear(res);
    rl_buf_free(&channels);
    rl_buf_free(&payloads);
    return err;
}

int
rl_db_complete(struct rl_db *db, const char *run_id, const char *worker,
               int64_t lease_epoch, const char *output_json,
               const char *const *channels, size_t n_channels, int *completed,
               char *errstr, size_t errstr_size)
{
    struct rl_outbox_msg *msgs = NULL;
    struct rl_completion done;
    int err;

    if (completed)
        *completed = 0;
    if (n_channels > 0) {
        msgs = calloc(n_channels, sizeof(*msgs));
        if (!msgs) {
            rl_set_err(errstr, errstr_size,
                       "could not complete run %s: out of memory", run_id);
            return RL_ERR_NOMEM;
        }
        for (size_t i = 0; i < n_channels; i++)
            msgs[i].channel = channels[i];
    }
    err = rl_db_complete_run(db, run_id, worker, lease_epoch, output_json, msgs,
                             n_channels, &done, errstr, errstr_size);
    free(msgs);
    if (err == 0 && completed)
        *completed = done.status == RL_COMPLETE_DONE;
    rl_completion_clear(&done);
    return err;
}

int
rl_db_complete_attempt(struct rl_db *db, const char *run_id, const char *worker,
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
    };
    struct rl_complete_res res;
    int err;

    if (!oc)
        return rl_db_complete(db, run_id, worker, lease_epoch, output_json,
                              channels, n_channels, completed, errstr,
                              errstr_size);
    if (completed)
        *completed = 0;
    req.oc = *oc;
    err = rl_db_complete_runs(db, &req, 1, worker, &res, errstr, errstr_size);
    if (err)
        return err;
    if (res.err == RL_ERR_STALE) {
        stale_msg(errstr, errstr_size, "complete run", run_id, lease_epoch);
        return RL_ERR_STALE;
    }
    if (res.err == RL_ERR_NOTFOUND) {
        rl_set_err(errstr, errstr_size,
                   "could not complete run %s: no such run", run_id);
        return RL_ERR_NOTFOUND;
    }
    if (completed)
        *completed = res.completed;
    return 0;
}

/* The text arrays of a batch statement, built in step: one buffer per
 * parameter, each an array literal. */
static void
arrays_open(struct rl_buf *arrays, size_t n)
{
    for (size_t a = 0; a < n; a++)
        rl_buf_put(&arrays[a], "{", 1);
}

/* Closes every array and points params[a] at it; 0, or RL_ERR_NOMEM. */
static int
arrays_close(struct rl_buf *arrays, size_t n, const char **params)
{
    int err = 0;

    for (size_t a = 0; a < n; a++) {
        rl_buf_put(&arrays[a], "}", 1);
        if (arrays[a].failed)
            err = RL_ERR_NOMEM;
        params[a] = arrays[a].data;
    }
    return err;
}

static void
arrays_free(struct rl_buf *arrays, size_t n)
{
    for (size_t a = 0; a < n; a++)
        rl_buf_free(&arrays[a]);
}

/* Checks that res has one row of ncols columns per input element, the
 * first column naming a distinct element by its 1-based ord, and sets
 * index[row] to that element's 0-based index. Returns 0, RL_ERR_NOMEM or
 * RL_ERR_DB (errstr: "could not <what>: ..."). */
static int
batch_rows(const PGresult *res, size_t n, int ncols, long *index,
           const char *what, char *errstr, size_t errstr_size)
{
    unsigned char *seen;

    if ((size_t)PQntuples(res) != n || PQnfields(res) != ncols) {
        rl_set_err(
            errstr, errstr_size,
            "could not %s: expected %zu rows of %d columns, got %d of %d "
            "(is the schema migrated?)",
            what, n, ncols, PQntuples(res), PQnfields(res));
        return RL_ERR_DB;
    }
    seen = calloc(n, 1);
    if (!seen) {
        rl_set_err(errstr, errstr_size, "could not %s: out of memory", what);
        return RL_ERR_NOMEM;
    }
    for (int row = 0; row < PQntuples(res); row++) {
        int64_t ord = int_value(res, row, 0, 0);

        if (ord < 1 || (size_t)ord > n || seen[ord - 1]) {
            rl_set_err(errstr, errstr_size,
                       "could not %s: bad row order in the result", what);
            free(seen);
            return RL_ERR_DB;
        }
        seen[ord - 1] = 1;
        index[row] = (long)(ord - 1);
    }
    free(seen);
    return 0;
}

int
rl_db_complete_runs(struct rl_db *db, const struct rl_complete_req *reqs,
                    size_t n, const char *worker, struct rl_complete_res *out,
                    char *errstr, size_t errstr_size)
{
    enum {
        A_RUN_ID,
        A_EPOCH,
        A_WORKER, /* not an array: the slot keeps params in order */
        A_OUTPUT,
        A_CH_RUN,
        A_CH_NAME,
        A_ATTEMPT,
        A_HTTP,
        A_UPSTREAM,
        A_PROMPT,
        A_COMPLETION,
        A_CACHED,
        A_LATENCY,
        A_COUNT
    };
    struct rl_buf arrays[A_COUNT];
    const char *params[A_COUNT];
    long *index = NULL;
    const char *subject;
    PGresult *res = NULL;
    int err = RL_ERR_DB;

    memset(arrays, 0, sizeof(arrays));
    if (n == 0 || !reqs || !out || !worker || !*worker) {
        rl_set_err(errstr, errstr_size,
                   "could not complete runs: need at least one run and a "
                   "worker");
        return RL_ERR_INVALID;
    }
    memset(out, 0, n * sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        if (!reqs[i].run_id || is_json_null(reqs[i].output_json)) {
            rl_set_err(errstr, errstr_size,
                       "could not complete run %s: no output",
                       reqs[i].run_id ? reqs[i].run_id : "(null)");
            return RL_ERR_INVALID;
        }
    }
    subject = n == 1 ? reqs[0].run_id : NULL;
    arrays_open(arrays, A_COUNT);
    for (size_t i = 0; i < n; i++) {
        const struct rl_complete_req *r = &reqs[i];
        const struct rl_attempt_ok *oc = &r->oc;

        array_add(&arrays[A_RUN_ID], r->run_id);
        array_add_int(&arrays[A_EPOCH], r->lease_epoch, 0);
        array_add(&arrays[A_OUTPUT], r->output_json);
        for (size_t c = 0; c < r->n_channels; c++) {
            if (!r->channels[c])
                continue;
            array_add(&arrays[A_CH_RUN], r->run_id);
            array_add(&arrays[A_CH_NAME], r->channels[c]);
        }
        array_add_int(&arrays[A_ATTEMPT], oc->attempt_no, 0);
        array_add_int(&arrays[A_HTTP], oc->http_status, 1);
        array_add(&arrays[A_UPSTREAM],
                  oc->upstream_request_id && *oc->upstream_request_id
                      ? oc->upstream_request_id
                      : NULL);
        array_add_int(&arrays[A_PROMPT], oc->prompt_tokens, 1);
        array_add_int(&arrays[A_COMPLETION], oc->completion_tokens, 1);
        array_add_int(&arrays[A_CACHED], oc->cached_tokens, 1);
        array_add_int(&arrays[A_LATENCY], oc->latency_ms, 1);
    }
    index = calloc(n, sizeof(*index));
    if (arrays_close(arrays, A_COUNT, params) != 0 || !index) {
        rl_set_err(errstr, errstr_size,
                   "could not complete runs: out of memory");
        err = RL_ERR_NOMEM;
        goto done;
    }
    params[A_WORKER] = worker;
    res = exec_stmt(db, STMT_COMPLETE_RUNS, params,
                    n == 1 ? "complete run" : "complete runs", subject, &err,
                    errstr, errstr_size);
    if (!res)
        goto done;
    err = batch_rows(res, n, 4, index, "complete runs", errstr, errstr_size);
    if (err)
        goto done;
    for (int row = 0; row < PQntuples(res); row++) {
        long k = index[row];
        const char *result = PQgetvalue(res, row, 1);

        out[k].completed = strcmp(result, "completed") == 0;
        out[k].err = strcmp(result, "stale") == 0       ? RL_ERR_STALE
                     : strcmp(result, "not_found") == 0 ? RL_ERR_NOTFOUND
                                                        : 0;
        out[k].outbox_rows = (int)int_value(res, row, 2, 0);
        out[k].outcome_set = bool_value(res, row, 3);
    }
    err = 0;

done:
    PQclear(res);
    free(index);
    arrays_free(arrays, A_COUNT);
    return err;
}

int
rl_db_dispatch_runs(struct rl_db *db, const struct rl_dispatch_req *reqs,
                    size_t n, const char *worker, int64_t wait_ms,
                    struct rl_dispatch_res *out, char *errstr,
                    size_t errstr_size)
{
    enum { A_RUN_ID, A_EPOCH, A_KEY, A_ESTIMATE, A_COUNT };
    struct rl_buf arrays[A_COUNT];
    const char *params[A_COUNT + 2];
    char wait[32];
    long *index = NULL;
    const char *subject;
    PGresult *res = NULL;
    int err = RL_ERR_DB;

    memset(arrays, 0, sizeof(arrays));
    if (n == 0 || !reqs || !out || !worker || !*worker) {
        rl_set_err(errstr, errstr_size,
                   "could not record dispatches: need at least one run and a "
                   "worker");
        return RL_ERR_INVALID;
    }
    memset(out, 0, n * sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        if (!reqs[i].run_id || !reqs[i].idempotency_key) {
            rl_set_err(
                errstr, errstr_size,
                "could not record dispatch of run %s: no idempotency key",
                reqs[i].run_id ? reqs[i].run_id : "(null)");
            return RL_ERR_INVALID;
        }
    }
    subject = n == 1 ? reqs[0].run_id : NULL;
    arrays_open(arrays, A_COUNT);
    for (size_t i = 0; i < n; i++) {
        array_add(&arrays[A_RUN_ID], reqs[i].run_id);
        array_add_int(&arrays[A_EPOCH], reqs[i].lease_epoch, 0);
        array_add(&arrays[A_KEY], reqs[i].idempotency_key);
        array_add_int(&arrays[A_ESTIMATE],
                      reqs[i].estimate > 0 ? reqs[i].estimate : 0, 0);
    }
    index = calloc(n, sizeof(*index));
    if (arrays_close(arrays, A_COUNT, params) != 0 || !index) {
        rl_set_err(errstr, errstr_size,
                   "could not record dispatches: out of memory");
        err = RL_ERR_NOMEM;
        goto done;
    }
    snprintf(wait, sizeof(wait), "%" PRId64, wait_ms > 0 ? wait_ms : 1);
    params[A_COUNT] = worker;
    params[A_COUNT + 1] = wait;
    res = exec_stmt(db, STMT_DISPATCH_RUNS, params,
                    n == 1 ? "record dispatch of run" : "record dispatches",
                    subject, &err, errstr, errstr_size);
    if (!res)
        goto done;
    err =
        batch_rows(res, n, 5, index, "record dispatches", errstr, errstr_size);
    if (err)
        goto done;
    for (int row = 0; row < PQntuples(res); row++) {
        long k = index[row];
        const char *result = PQgetvalue(res, row, 1);

        if (strcmp(result, "dispatched") == 0) {
            out[k].status = RL_DISPATCH_RECORDED;
            out[k].attempt_no = (int)int_value(res, row, 2, 0);
        } else if (strcmp(result, "deadline") == 0) {
            out[k].status = RL_DISPATCH_DEADLINE;
        } else if (strcmp(result, "deferred") == 0 ||
                   strcmp(result, "wait") == 0) {
            out[k].status =
                result[0] == 'd' ? RL_DISPATCH_DEFERRED : RL_DISPATCH_WAIT;
            copy_value(res, row, 3, out[k].next_window,
                       sizeof(out[k].next_window));
            copy_value(res, row, 4, out[k].detail, sizeof(out[k].detail));
        } else {
            out[k].err = RL_ERR_STALE;
        }
    }
    err = 0;

done:
    PQclear(res);
    free(index);
    arrays_free(arrays, A_COUNT);
    return err;
}

/* ---- reading ------------------------------------------------------------ */

void
rl_run_clear(struct rl_run *run)
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
rl_db_get_run(struct rl_db *db, const char *run_id, struct rl_run *run,
              char *errstr, size_t errstr_size)
{
    const char *params[1] = {run_id};
    PGresult *res;
    int err = RL_ERR_DB;
    int oom = 0;
    int c = 0;

    memset(run, 0, sizeof(*run));
    res = exec_stmt(db, STMT_GET_RUN, params, "read run", run_id, &err, errstr,
                    errstr_size);
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        rl_set_err(errstr, errstr_size, "could not read run %s: no such run",
                   run_id);
        return RL_ERR_NOTFOUND;
    }
    copy_value(res, 0, c++, run->run_id, sizeof(run->run_id));
    run->job = dup_value(res, 0, c++, &oom);
    run->tenant = dup_value(res, 0, c++, &oom);
    copy_value(res, 0, c++, run->scheduled_at, sizeof(run->scheduled_at));
    run->version = dup_value(res, 0, c++, &oom);
    copy_value(res, 0, c++, run->fingerprint, sizeof(run->fingerprint));
    copy_value(res, 0, c++, run->status, sizeof(run->status));
    run->lock_owner = dup_value(res, 0, c++, &oom);
    run->lease_live = bool_value(res, 0, c++);
    run->lease_epoch = int_value(res, 0, c++, 0);
    run->attempts = (int)int_value(res, 0, c++, 0);
    run->ambiguous_prior = bool_value(res, 0, c++);
    run->ambiguous_count = (int)int_value(res, 0, c++, 0);
    run->request_json = dup_value(res, 0, c++, &oom);
    run->raw_input = dup_value(res, 0, c++, &oom);
    run->output_json = dup_value(res, 0, c++, &oom);
    run->last_error = dup_value(res, 0, c++, &oom);
    run->error_class = dup_value(res, 0, c++, &oom);
    copy_value(res, 0, c++, run->next_attempt_at, sizeof(run->next_attempt_at));
    copy_value(res, 0, c++, run->lock_expires_at, sizeof(run->lock_expires_at));
    copy_value(res, 0, c++, run->deadline_at, sizeof(run->deadline_at));
    copy_value(res, 0, c++, run->completed_at, sizeof(run->completed_at));
    run->source_topic = dup_value(res, 0, c++, &oom);
    run->source_partition = (int32_t)int_value(res, 0, c++, -1);
    run->source_offset = int_value(res, 0, c++, -1);
    PQclear(res);
    if (oom) {
        rl_run_clear(run);
        rl_set_err(errstr, errstr_size, "could not read run %s: out of memory",
                   run_id);
        return RL_ERR_NOMEM;
    }
    return 0;
}

/* ---- outbox relay ------------------------------------------------------- */

void
rl_db_outbox_rows_free(struct rl_outbox_row *rows, size_t n)
{
    if (!rows)
        return;
    for (size_t i = 0; i < n; i++) {
        free(rows[i].channel);
        free(rows[i].job);
        free(rows[i].tenant);
        free(rows[i].payload);
    }
    free(rows);
}

/* The schema the session's outbox resolves to: the payload of its
 * wake-ups. */
static const char outbox_schema_sql[] =
    "SELECT n.nspname FROM pg_catalog.pg_class c"
    "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.oid = 'outbox'::regclass";

/* The relay's session plans by index only. Its statements touch a batch
 * of rows that outbox_pending_by_age_idx (the oldest, in order) or their
 * ctids name, and nothing else; the planner's alternatives (a sequential
 * scan, or the primary key, then a sort of every pending row) look cheaper
 * only when the statistics say the outbox is nearly empty, which a queue's
 * statistics often do: a vacuum that met a few live rows, or index entries
 * a long transaction kept from being removed. Off, they cost so much that
 * the index path wins whatever the estimates. That inflated cost (10^10
 * for the sort of the batch, which every plan keeps) would pass
 * jit_above_cost and have each batch compiled: 300 ms a statement, so
 * JIT is off for this session too. */
static const char relay_session_sql[] =
    "SELECT set_config('enable_seqscan', 'off', false),"
    "       set_config('enable_sort', 'off', false),"
    "       set_config('jit', 'off', false)";

int
rl_db_outbox_listen(struct rl_db *db, char *errstr, size_t errstr_size)
{
    int err = RL_ERR_DB;
    PGresult *res = exec_simple(db, "LISTEN runledger_outbox", 0, NULL, &err,
                                errstr, errstr_size, "listen for the outbox");

    if (!res)
        return err;
    PQclear(res);
    res = exec_simple(db, relay_session_sql, 0, NULL, &err, errstr, errstr_size,
                      "set up the relay session");
    if (!res)
        return err;
    PQclear(res);
    res = exec_simple(db, outbox_schema_sql, 0, NULL, &err, errstr, errstr_size,
                      "find the outbox");
    if (!res)
        return err;
    free(db->outbox_schema);
    db->outbox_schema =
        PQntuples(res) == 1 ? strdup(PQgetvalue(res, 0, 0)) : NULL;
    PQclear(res);
    if (!db->outbox_schema) {
        rl_set_err(errstr, errstr_size,
                   "could not find the outbox: no outbox table on the path");
        return RL_ERR_DB;
    }
    return 0;
}

/* VACUUM is allowed to the table's owner and the database's owner
 * (superusers included); anyone else gets a warning and nothing done. */
static const char outbox_vacuum_allowed_sql[] =
    "SELECT pg_has_role(c.relowner, 'USAGE')"
    "       OR pg_has_role(d.datdba, 'USAGE')"
    "  FROM pg_class c, pg_database d"
    " WHERE c.oid = 'outbox'::regclass AND d.datname = current_database()";

/* TRUNCATE false: the truncation at the end of a vacuum holds an ACCESS
 * EXCLUSIVE lock on the outbox, which every completion (its INSERT) would
 * queue behind; autovacuum still gives back the pages a backlog left. */
static const char outbox_vacuum_sql[] =
    "VACUUM (SKIP_LOCKED, TRUNCATE false) outbox";

int
rl_db_outbox_vacuum_start(struct rl_db *db, char *errstr, size_t errstr_size)
{
    int err = RL_ERR_DB;
    PGresult *res;

    if (db->in_tx || db->vacuuming) {
        rl_set_err(errstr, errstr_size,
                   "could not vacuum the outbox: the session is busy");
        return RL_ERR_INVALID;
    }
    if (db->outbox_vacuum == 0) {
        res = exec_simple(db, outbox_vacuum_allowed_sql, 0, NULL, &err, errstr,
                          errstr_size, "check who may vacuum the outbox");
        if (!res)
            return err;
        db->outbox_vacuum =
            PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0 ? 1
                                                                           : -1;
        PQclear(res);
    }
    if (db->outbox_vacuum < 0)
        return 0;
    if (!PQsendQuery(db->conn, outbox_vacuum_sql)) {
        fail_msg(db, NULL, errstr, errstr_size, "vacuum the outbox");
        return RL_ERR_DB;
    }
    db->vacuuming = 1;
    return 1;
}

int
rl_db_outbox_vacuum_poll(struct rl_db *db, char *errstr, size_t errstr_size)
{
    PGresult *res;
    int failed = 0;

    if (!db->vacuuming)
        return 0;
    if (!PQconsumeInput(db->conn)) {
        db->vacuuming = 0;
        fail_msg(db, NULL, errstr, errstr_size, "vacuum the outbox");
        return RL_ERR_DB;
    }
    if (PQisBusy(db->conn))
        return 1;
    while ((res = PQgetResult(db->conn))) {
        if (!failed && PQresultStatus(res) != PGRES_COMMAND_OK) {
            fail_msg(db, res, errstr, errstr_size, "vacuum the outbox");
            failed = 1;
        }
        PQclear(res);
    }
    db->vacuuming = 0;
    return failed ? RL_ERR_DB : 0;
}

/* Drops the notifications received so far; 1 if one was for this
 * session's outbox. */
static int
drain_notifies(struct rl_db *db)
{
    PGnotify *nf;
    int got = 0;

    while ((nf = PQnotifies(db->conn))) {
        if (db->outbox_schema && strcmp(nf->extra, db->outbox_schema) == 0)
            got = 1;
        PQfreemem(nf);
    }
    return got;
}

int
rl_db_outbox_wait(struct rl_db *db, long timeout_ms, char *errstr,
                  size_t errstr_size)
{
    struct pollfd pfd = {.fd = PQsocket(db->conn), .events = POLLIN};
    int ready;

    if (!PQconsumeInput(db->conn)) {
        fail_msg(db, NULL, errstr, errstr_size, "wait for the outbox");
        return RL_ERR_DB;
    }
    if (drain_notifies(db))
        return 1;
    ready = poll(&pfd, 1, timeout_ms < 0 ? 0 : (int)timeout_ms);
    if (ready < 0 && errno != EINTR) {
        rl_set_err(errstr, errstr_size, "could not wait for the outbox: %s",
                   strerror(errno));
        return RL_ERR_DB;
    }
    if (ready <= 0)
        return 0;
    if (!PQconsumeInput(db->conn)) {
        fail_msg(db, NULL, errstr, errstr_size, "wait for the outbox");
        return RL_ERR_DB;
    }
    return drain_notifies(db);
}

static void
end_tx(struct rl_db *db, const char *sql)
{
    PQclear(PQexecParams(db->conn, sql, 0, NULL, NULL, NULL, NULL, 0));
    db->in_tx = 0;
}

int
rl_db_outbox_lock_batch(struct rl_db *db, int limit,
                        struct rl_outbox_row **rows, size_t *n_rows,
                        char *errstr, size_t errstr_size)
{
    char lim[32];
    const char *params[1] = {lim};
    struct rl_outbox_row *out = NULL;
    PGresult *res;
    int err = RL_ERR_DB;
    int n;
    int oom = 0;

    *rows = NULL;
    *n_rows = 0;
    if (limit <= 0) {
        rl_set_err(errstr, errstr_size,
                   "could not lock outbox rows: limit must be positive");
        return RL_ERR_INVALID;
    }
    if (db->in_tx)
        end_tx(db, "ROLLBACK"); /* a batch left open by a failed caller */
    res = exec_simple(db, "BEGIN", 0, NULL, &err, errstr, errstr_size,
                      "lock outbox rows");
    if (!res)
        return err;
    PQclear(res);
    db->in_tx = 1;

    snprintf(lim, sizeof(lim), "%d", limit);
    res = exec_stmt(db, STMT_LOCK_PENDING_OUTBOX, params, "lock outbox rows",
                    NULL, &err, errstr, errstr_size);
    if (!res) {
        end_tx(db, "ROLLBACK");
        return err;
    }
    n = PQntuples(res);
    if (n > 0) {
        out = calloc((size_t)n, sizeof(*out));
        if (!out)
            oom = 1;
    }
    for (int row = 0; out && row < n; row++) {
        struct rl_outbox_row *r = &out[row];

        copy_value(res, row, 0, r->run_id, sizeof(r->run_id));
        r->channel = dup_value(res, row, 1, &oom);
        r->job = dup_value(res, row, 2, &oom);
        r->tenant = dup_value(res, row, 3, &oom);
        r->payload = dup_value(res, row, 4, &oom);
        r->delivery_count = (int)int_value(res, row, 5, 0);
        copy_value(res, row, 6, r->ctid, sizeof(r->ctid));
    }
    PQclear(res);
    if (oom) {
        rl_db_outbox_rows_free(out, (size_t)n);
        end_tx(db, "ROLLBACK");
        rl_set_err(errstr, errstr_size,
                   "could not lock outbox rows: out of memory");
        return RL_ERR_NOMEM;
    }
    *rows = out;
    *n_rows = (size_t)n;
    return 0;
}

int
rl_db_outbox_finish_batch(struct rl_db *db, const struct rl_outbox_row *rows,
                          size_t n, int delivered, char *errstr,
                          size_t errstr_size)
{
    struct rl_buf ids = {0}, tids = {0};
    const char *params[3];
    PGresult *res = NULL;
    int err = RL_ERR_DB;

    if (!db->in_tx)
        return 0;
    if (n == 0) {
        res = exec_simple(db, "COMMIT", 0, NULL, &err, errstr, errstr_size,
                          "close outbox batch");
        db->in_tx = 0;
        if (!res)
            return err;
        PQclear(res);
        return 0;
    }
    rl_buf_put(&ids, "{", 1);
    rl_buf_put(&tids, "{", 1);
    for (size_t i = 0; i < n; i++) {
        array_add(&ids, rows[i].run_id);
        array_add(&tids, rows[i].ctid);
    }
    rl_buf_put(&ids, "}", 1);
    rl_buf_put(&tids, "}", 1);
    if (ids.failed || tids.failed) {
        rl_set_err(errstr, errstr_size,
                   "could not finish outbox batch: out of memory");
        err = RL_ERR_NOMEM;
        goto done;
    }
    params[0] = tids.data;
    params[1] = ids.data;
    params[2] = delivered ? "t" : "f";
    res = exec_stmt(db, STMT_MOVE_DELIVERED_OUTBOX, params,
                    "finish outbox batch", NULL, &err, errstr, errstr_size);
    if (!res)
        goto done;
    PQclear(res);
    res = exec_simple(db, "COMMIT", 0, NULL, &err, errstr, errstr_size,
                      "commit outbox batch");
    if (!res)
        goto done;
    db->in_tx = 0;
    err = 0;

done:
    if (err != 0 && db->in_tx)
        end_tx(db, "ROLLBACK");
    PQclear(res);
    rl_buf_free(&ids);
    rl_buf_free(&tids);
    return err;
}

/* ---- ad hoc ------------------------------------------------------------- */

int
rl_db_exec(struct rl_db *db, const char *sql, int nparams,
           const char *const *params, char *value, size_t value_size,
           char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;
    int rows;

    if (value && value_size)
        value[0] = '\0';
    res = exec_simple(db, sql, nparams, params, &err, errstr, errstr_size,
                      "run statement");
    if (!res)
        return err;
    if (PQresultStatus(res) == PGRES_TUPLES_OK) {
        rows = PQntuples(res);
        if (value && value_size && rows > 0 && PQnfields(res) > 0)
            copy_value(res, 0, 0, value, value_size);
    } else {
        rows = atoi(PQcmdTuples(res));
    }
    PQclear(res);
    return rows;
}

/* ==== operations: health, metrics and the operator CLI ===================
 *
 * Statements of `runledger runs ...` and of the health thread behind
 * /readyz and /metrics. Kept in their own section (and schema/003) so the
 * pipeline's statements above stay the ones it runs. */

#define OPS_TS(col)                                                            \
    "to_char(" col " AT TIME ZONE 'UTC', "                                     \
    "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"
#define OPS_SCHED(col)                                                         \
    "to_char(" col " AT TIME ZONE 'UTC', "                                     \
    "'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"')"

/* Backlog counted exactly up to 100,000 rows; above that pg_class's
 * estimate (refreshed by autovacuum) stands in, so a huge backlog never
 * makes the health thread scan it. The count walks
 * outbox_pending_by_age_idx (the ORDER BY asks for it): a sequential scan
 * would read every page the churn left behind since the last vacuum,
 * 20,000 pages for 130 pending rows in one soak. The oldest pending row
 * comes from the same index; unknown runs from runs_unknown_idx. */
static const char ops_gauges[] =
    "SELECT (SELECT count(*) FROM (SELECT 1 FROM outbox"
    "                               ORDER BY created_at LIMIT 100000) s),"
    "       (SELECT greatest(c.reltuples, 0)::int8 FROM pg_class c"
    "         WHERE c.oid = to_regclass('outbox')),"
    "       (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)"
    "          FROM outbox),"
    "       (SELECT count(*) FROM runs WHERE status = 'unknown')";

static const char ops_list_runs[] =
    "SELECT coalesce(json_agg(x ORDER BY x.scheduled_at DESC, x.run_id),"
    "                '[]')::text"
    "  FROM (SELECT r.run_id, r.job, r.tenant,"
    "               " OPS_SCHED(
        "r.scheduled_at") " AS scheduled_at,"
                          "               r.version, r.status, r.attempts, "
                          "r.lease_epoch,"
                          "               r.lock_owner, r.error_class, "
                          "r.last_error,"
                          "               " OPS_TS(
                              "r.created_at") " AS created_at,"
                                              "               " OPS_TS(
                                                  "r.completed_at") " AS "
                                                                    "completed_"
                                                                    "at"
                                                                    "          "
                                                                    "FROM runs "
                                                                    "r"
                                                                    "         "
                                                                    "WHERE "
                                                                    "($1::text "
                                                                    "IS NULL "
                                                                    "OR "
                                                                    "r.status "
                                                                    "= $1)"
                                                                    "          "
                                                                    " AND "
                                                                    "($2::text "
                                                                    "IS NULL "
                                                                    "OR "
                                                                    "r.tenant "
                                                                    "= $2)"
                                                                    "          "
                                                                    " AND "
                                                                    "($3::text "
                                                                    "IS NULL "
                                                                    "OR r.job "
                                                                    "= $3)"
                                                                    "          "
                                                                    " AND "
                                                                    "($4::"
                                                                    "timestampt"
                                                                    "z IS NULL "
                                                                    "OR "
                                                                    "r."
                                                                    "scheduled_"
                                                                    "at >= $4)"
                                                                    "         "
                                                                    "ORDER BY "
                                                                    "r."
                                                                    "scheduled_"
                                                                    "at DESC, "
                                                                    "r.run_id"
                                                                    "         "
                                                                    "LIMIT "
                                                                    "$5::int8) "
                                                                    "x";

static const char ops_run_report[] =
    "SELECT json_build_object("
    "  'run', (SELECT row_to_json(x) FROM "
    "(SELECT r.run_id, r.job, r.tenant,"
    "          " OPS_SCHED(
        "r.scheduled_at") " AS scheduled_at, "
                          "r.version,"
                          "          "
                          "r.fingerprint, "
                          "r.status, "
                          "r.lock_owner,"
                          "          " OPS_TS(
                              "r.lock_expires_"
                              "at") " AS "
                                    "lock_"
                                    "expires_"
                                    "at,"
                                    "         "
                                    " r.lease_"
                                    "epoch, "
                                    "r."
                                    "attempts,"
                                    "         "
                                    " " OPS_TS("r."
                                               "next_"
                                               "attem"
                                               "pt_"
                                               "at") " AS next_attempt_at,"
                                                     "          " OPS_TS(
                                                         "r.deadline_at") " AS "
                                                                          "dead"
                                                                          "line"
                                                                          "_at,"
                                                                          "    "
                                                                          "    "
                                                                          "  "
                                                                          "r."
                                                                          "erro"
                                                                          "r_"
                                                                          "clas"
                                                                          "s, "
                                                                          "r."
                                                                          "last"
                                                                          "_err"
                                                                          "or, "
                                                                          "r."
                                                                          "sour"
                                                                          "ce_"
                                                                          "topi"
                                                                          "c,"
                                                                          "    "
                                                                          "    "
                                                                          "  "
                                                                          "r."
                                                                          "sour"
                                                                          "ce_"
                                                                          "part"
                                                                          "itio"
                                                                          "n, "
                                                                          "r."
                                                                          "sour"
                                                                          "ce_"
                                                                          "offs"
                                                                          "et,"
                                                                          "    "
                                                                          "    "
                                                                          " "
                                                                          " " OPS_TS("r.created_at") " AS created_at,"
                                                                                                     "          " OPS_TS("r.updated_at") " AS updated_at,"
                                                                                                                                         "          " OPS_TS("r.completed_at") " AS completed_at,"
                                                                                                                                                                               "          r.request, r.raw_input, r.output) x),"
                                                                                                                                                                               "  'attempts', coalesce((SELECT json_agg(a ORDER BY a.attempt_no)"
                                                                                                                                                                               "     FROM (SELECT attempt_no, lease_epoch, worker, idempotency_key,"
                                                                                                                                                                               "                  " OPS_TS("dispatched_at") " AS dispatched_at,"
                                                                                                                                                                                                                            "                  outcome, http_status, upstream_request_id,"
                                                                                                                                                                                                                            "                  prompt_tokens, completion_tokens, cached_tokens,"
                                                                                                                                                                                                                            "                  latency_ms, error,"
                                                                                                                                                                                                                            "                  " OPS_TS("finished_at") " AS finished_at"
                                                                                                                                                                                                                                                                       "             FROM attempts WHERE run_id = $1) a), '[]'),"
                                                                                                                                                                                                                                                                       "  'outbox', coalesce((SELECT json_agg(o ORDER BY o.channel)"
                                                                                                                                                                                                                                                                       "     FROM (SELECT channel, false AS delivered,"
                                                                                                                                                                                                                                                                       "                  " OPS_TS("created_at") " AS created_at,"
                                                                                                                                                                                                                                                                                                                 "                  NULL::text AS delivered_at, delivery_count, payload"
                                                                                                                                                                                                                                                                                                                 "             FROM outbox WHERE run_id = $1"
                                                                                                                                                                                                                                                                                                                 "           UNION ALL"
                                                                                                                                                                                                                                                                                                                 "           SELECT channel, true, " OPS_TS("created_at") ","
                                                                                                                                                                                                                                                                                                                                                                          "                  " OPS_TS(
                                                                                                                                                                                                                                                                                                                                                                              "delivered_at") ", delivery_count, payload"
                                                                                                                                                                                                                                                                                                                                                                                              "             FROM outbox_delivered WHERE run_id = $1) o), '[]'),"
                                                                                                                                                                                                                                                                                                                                                                                              "  'decisions', coalesce((SELECT json_agg(d ORDER BY d.decision_id)"
                                                                                                                                                                                                                                                                                                                                                                                              "     FROM (SELECT decision_id, decision, actor, reason, prior_status,"
                                                                                                                                                                                                                                                                                                                                                                                              "                  attempts, " OPS_TS(
                                                                                                                                                                                                                                                                                                                                                                                                  "decided_at") " AS decided_at"
                                                                                                                                                                                                                                                                                                                                                                                                                "             FROM run_decisions WHERE run_id = $1) d), '[]')"
                                                                                                                                                                                                                                                                                                                                                                                                                ")::text"
                                                                                                                                                                                                                                                                                                                                                                                                                "  FROM runs r WHERE r.run_id = $1";

/* Re-open a parked run. An attempt left without an outcome is closed as
 * ambiguous (its result is unknowable, which is what the operator accepted
 * by retrying), so the next claim does not park the run again on that
 * evidence alone; a spent deadline is extended by its original length. */
static const char ops_retry_run[] =
    "WITH cur AS ("
    "  SELECT run_id, status, attempts FROM runs WHERE run_id = $1"
    "     FOR NO KEY UPDATE"
    "), upd AS ("
    "  UPDATE runs r"
    "     SET status = 'pending', next_attempt_at = now(),"
    "         lock_owner = NULL, lock_expires_at = NULL,"
    "         deadline_at = CASE WHEN r.deadline_at <= now()"
    "                            THEN now() + (r.deadline_at - r.created_at)"
    "                            ELSE r.deadline_at END,"
    "         updated_at = now()"
    "    FROM cur"
    "   WHERE r.run_id = cur.run_id AND cur.status IN ('failed', 'unknown')"
    "  RETURNING r.run_id"
    "), closed AS ("
    "  UPDATE attempts a"
    "     SET outcome = 'ambiguous', finished_at = now(),"
    "         error = coalesce(a.error, 'no outcome recorded; run re-opened"
    " by an operator')"
    "    FROM upd WHERE a.run_id = upd.run_id AND a.outcome IS NULL"
    "  RETURNING 1"
    "), dec AS ("
    "  INSERT INTO run_decisions (run_id, decision, actor, reason,"
    "                             prior_status, attempts)"
    "  SELECT cur.run_id, 'retry', $2, $3, cur.status, cur.attempts"
    "    FROM cur JOIN upd ON upd.run_id = cur.run_id"
    "  RETURNING 1"
    ")"
    "SELECT cur.status, cur.attempts, (SELECT count(*) FROM upd),"
    "       (SELECT count(*) FROM dec), (SELECT count(*) FROM closed)"
    "  FROM cur";

static const char ops_resolve_failed[] =
    "WITH cur AS ("
    "  SELECT run_id, status, attempts FROM runs WHERE run_id = $1"
    "     FOR NO KEY UPDATE"
    "), upd AS ("
    "  UPDATE runs r"
    "     SET status = 'failed', error_class = 'operator',"
    "         last_error = format('resolved failed by %s: %s', $2::text,"
    "                             $3::text),"
    "         updated_at = now()"
    "    FROM cur WHERE r.run_id = cur.run_id AND cur.status = 'unknown'"
    "  RETURNING r.run_id"
    "), dec AS ("
    "  INSERT INTO run_decisions (run_id, decision, actor, reason,"
    "                             prior_status, attempts)"
    "  SELECT cur.run_id, 'resolve_failed', $2, $3, cur.status, cur.attempts"
    "    FROM cur JOIN upd ON upd.run_id = cur.run_id"
    "  RETURNING 1"
    ")"
    "SELECT cur.status, cur.attempts, (SELECT count(*) FROM upd),"
    "       (SELECT count(*) FROM dec), 0"
    "  FROM cur";

/* The operator takes a lease of its own (a new fencing token, so any
 * worker still holding an older one cannot write), then completes through
 * rl_complete_run exactly as a worker would: write-once output and the
 * outbox rows of the run's notify channels in this transaction. */
static const char ops_operator_lease[] =
    "UPDATE runs"
    "   SET status = 'running', lock_owner = $2,"
    "       lock_expires_at = now() + interval '5 minutes',"
    "       lease_epoch = lease_epoch + 1, next_attempt_at = NULL,"
    "       updated_at = now()"
    " WHERE run_id = $1 AND status = 'unknown'"
    " RETURNING lease_epoch, attempts";
static const char ops_run_status[] =
    "SELECT status FROM runs WHERE run_id = $1";
static const char ops_operator_complete[] =
    "SELECT c.result, c.outbox_rows"
    "  FROM rl_complete_run($1, $2, $3::int8, $4::jsonb,"
    "       ARRAY(SELECT jsonb_array_elements_text("
    "                    coalesce(r.request -> 'notify', '[]'::jsonb))"
    "               FROM runs r WHERE r.run_id = $1),"
    "       NULL::jsonb[]) c";
static const char ops_record_decision[] =
    "INSERT INTO run_decisions (run_id, decision, actor, reason,"
    "                           prior_status, attempts)"
    "VALUES ($1, $2, $3, $4, $5, $6::int4)";

int
rl_db_ops_gauges(struct rl_db *db, struct rl_db_gauges *g, char *errstr,
                 size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;
    int64_t counted, estimate;

    memset(g, 0, sizeof(*g));
    if (apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = exec_simple(db, ops_gauges, 0, NULL, &err, errstr, errstr_size,
                      "read ledger gauges");
    if (!res)
        return err;
    counted = int_value(res, 0, 0, 0);
    estimate = int_value(res, 0, 1, 0);
    g->outbox_backlog = counted;
    if (counted >= 100000) {
        g->backlog_estimated = 1;
        if (estimate > counted)
            g->outbox_backlog = estimate;
    }
    g->oldest_pending_seconds =
        PQgetisnull(res, 0, 2) ? 0 : strtod(PQgetvalue(res, 0, 2), NULL);
    g->unknown_runs = int_value(res, 0, 3, 0);
    PQclear(res);
    return 0;
}

/* One text value of a one-row result into a malloc'd string. */
static int
ops_one_text(struct rl_db *db, const char *sql, int nparams,
             const char *const *params, const char *what, char **out,
             char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;
    int oom = 0;

    *out = NULL;
    if (apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res =
        exec_simple(db, sql, nparams, params, &err, errstr, errstr_size, what);
    if (!res)
        return err;
    if (PQntuples(res) == 0) {
        PQclear(res);
        rl_set_err(errstr, errstr_size, "could not %s: no such run", what);
        return RL_ERR_NOTFOUND;
    }
    *out = dup_value(res, 0, 0, &oom);
    PQclear(res);
    if (oom || !*out) {
        free(*out);
        *out = NULL;
        rl_set_err(errstr, errstr_size, "could not %s: out of memory", what);
        return RL_ERR_NOMEM;
    }
    return 0;
}

int
rl_db_runs_list_json(struct rl_db *db, const struct rl_runs_filter *filter,
                     char **json, char *errstr, size_t errstr_size)
{
    char limit[24];
    const char *params[5];

    snprintf(limit, sizeof(limit), "%d",
             filter->limit > 0 ? filter->limit : 50);
    params[0] = filter->status;
    params[1] = filter->tenant;
    params[2] = filter->job;
    params[3] = filter->since;
    params[4] = limit;
    return ops_one_text(db, ops_list_runs, 5, params, "list runs", json, errstr,
                        errstr_size);
}

int
rl_db_run_report_json(struct rl_db *db, const char *run_id, char **json,
                      char *errstr, size_t errstr_size)
{
    const char *params[1] = {run_id};

    return ops_one_text(db, ops_run_report, 1, params, "read run", json, errstr,
                        errstr_size);
}

/* Runs a retry/resolve statement whose row is (prior status, attempts,
 * updated, decided, attempts closed). */
static int
ops_decide(struct rl_db *db, const char *sql, const char *what,
           const char *run_id, const char *actor, const char *reason,
           const char *allowed, struct rl_decision *out, char *errstr,
           size_t errstr_size)
{
    const char *params[3] = {run_id, actor, reason};
    PGresult *res;
    int err = RL_ERR_DB;

    memset(out, 0, sizeof(*out));
    if (apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = exec_simple(db, sql, 3, params, &err, errstr, errstr_size, what);
    if (!res)
        return err;
    if (PQntuples(res) == 0) {
        PQclear(res);
        rl_set_err(errstr, errstr_size, "could not %s %s: no such run", what,
                   run_id);
        return RL_ERR_NOTFOUND;
    }
    copy_value(res, 0, 0, out->prior_status, sizeof(out->prior_status));
    out->attempts = (int)int_value(res, 0, 1, 0);
    out->attempts_closed = (int)int_value(res, 0, 4, 0);
    if (int_value(res, 0, 2, 0) != 1 || int_value(res, 0, 3, 0) != 1) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "refused to %s %s: it is %s, only %s runs qualify", what,
                   run_id, out->prior_status, allowed);
        return RL_ERR_CONFLICT;
    }
    PQclear(res);
    return 0;
}

int
rl_db_run_retry(struct rl_db *db, const char *run_id, const char *actor,
                const char *reason, struct rl_decision *out, char *errstr,
                size_t errstr_size)
{
    return ops_decide(db, ops_retry_run, "retry", run_id, actor, reason,
                      "failed or unknown", out, errstr, errstr_size);
}

int
rl_db_run_resolve_failed(struct rl_db *db, const char *run_id,
                         const char *actor, const char *reason,
                         struct rl_decision *out, char *errstr,
                         size_t errstr_size)
{
    return ops_decide(db, ops_resolve_failed, "resolve", run_id, actor, reason,
                      "unknown", out, errstr, errstr_size);
}

int
rl_db_run_resolve_completed(struct rl_db *db, const char *run_id,
                            const char *actor, const char *reason,
                            const char *output_json, struct rl_decision *out,
                            char *errstr, size_t errstr_size)
{
    char owner[300], epoch[24], attempts[24];
    const char *params[6];
    PGresult *res = NULL;
    int err = RL_ERR_DB;
    int in_tx = 0;

    memset(out, 0, sizeof(*out));
    snprintf(owner, sizeof(owner), "operator:%s", actor);
    if (apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = exec_simple(db, "BEGIN", 0, NULL, &err, errstr, errstr_size,
                      "resolve run");
    if (!res)
        return err;
    PQclear(res);
    in_tx = 1;

    params[0] = run_id;
    params[1] = owner;
    res = exec_simple(db, ops_operator_lease, 2, params, &err, errstr,
                      errstr_size, "resolve run");
    if (!res)
        goto done;
    if (PQntuples(res) == 0) {
        PQclear(res);
        res = exec_simple(db, ops_run_status, 1, params, &err, errstr,
                          errstr_size, "resolve run");
        if (!res)
            goto done;
        if (PQntuples(res) == 0) {
            rl_set_err(errstr, errstr_size, "could not resolve %s: no such run",
                       run_id);
            err = RL_ERR_NOTFOUND;
        } else {
            copy_value(res, 0, 0, out->prior_status, sizeof(out->prior_status));
            rl_set_err(errstr, errstr_size,
                       "refused to resolve %s: it is %s, only unknown runs "
                       "qualify",
                       run_id, out->prior_status);
            err = RL_ERR_CONFLICT;
        }
        goto done;
    }
    snprintf(out->prior_status, sizeof(out->prior_status), "unknown");
    copy_value(res, 0, 0, epoch, sizeof(epoch));
    copy_value(res, 0, 1, attempts, sizeof(attempts));
    out->attempts = atoi(attempts);
    PQclear(res);

    params[2] = epoch;
    params[3] = output_json;
    res = exec_simple(db, ops_operator_complete, 4, params, &err, errstr,
                      errstr_size, "store the operator's output");
    if (!res)
        goto done;
    if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 0), "completed")) {
        rl_set_err(errstr, errstr_size,
                   "could not resolve %s: completion "
                   "returned %s",
                   run_id, PQntuples(res) ? PQgetvalue(res, 0, 0) : "nothing");
        err = RL_ERR_CONFLICT;
        goto done;
    }
    out->outbox_rows = (int)int_value(res, 0, 1, 0);
    PQclear(res);

    params[0] = run_id;
    params[1] = "resolve_completed";
    params[2] = actor;
    params[3] = reason;
    params[4] = "unknown";
    params[5] = attempts;
    res = exec_simple(db, ops_record_decision, 6, params, &err, errstr,
                      errstr_size, "record the decision");
    if (!res)
        goto done;
    PQclear(res);
    res = exec_simple(db, "COMMIT", 0, NULL, &err, errstr, errstr_size,
                      "commit the resolution");
    if (!res)
        goto done;
    in_tx = 0;
    err = 0;

done:
    PQclear(res);
    if (in_tx)
        PQclear(
            PQexecParams(db->conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0));
    return err;
}

/* ==== budgets, cost report, reference receiver (issue 6) =================
 *
 * The operator statements of schema/004_budgets.sql and 005_receiver.sql
 * (`runledger budgets`, `report`, `receive`). The pipeline's own budget
 * statement (dispatch_within_budget) is prepared with the others above. */

#define OPS_DAY "(now() AT TIME ZONE 'UTC')::date"

static const char ops_budget_set[] =
    "INSERT INTO budgets (tenant, job, daily_tokens, updated_by)"
    "VALUES ($1, coalesce($2, ''), $3::int8, $4)"
    "    ON CONFLICT (tenant, job) DO UPDATE"
    "   SET daily_tokens = EXCLUDED.daily_tokens,"
    "       updated_by = EXCLUDED.updated_by, updated_at = now()";

static const char ops_budget_remove[] =
    "DELETE FROM budgets WHERE tenant = $1 AND job = coalesce($2, '')";

static const char ops_budgets_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.tenant, x.job), '[]')::text"
    "  FROM (SELECT b.tenant, b.job, b.daily_tokens,"
    "               to_char(" OPS_DAY ", 'YYYY-MM-DD') AS day,"
    "               coalesce(u.reserved, 0) AS reserved,"
    "               coalesce(u.spent, 0) AS spent,"
    "               greatest(b.daily_tokens - coalesce(u.reserved, 0)"
    "                        - coalesce(u.spent, 0), 0) AS \"left\","
    "               coalesce(u.deferrals, 0) AS deferrals,"
    "               (SELECT count(*) FROM runs r"
    "                 WHERE r.status = 'pending'"
    "                   AND r.error_class = 'budget'"
    "                   AND r.tenant = b.tenant"
    "                   AND (b.job = '' OR r.job = b.job)) AS deferred_runs"
    "          FROM budgets b"
    "          LEFT JOIN budget_usage u"
    "            ON u.tenant = b.tenant AND u.job = b.job"
    "           AND u.day = " OPS_DAY
    "         WHERE $1::text IS NULL OR b.tenant = $1) x";

/* Extra generations: per run, the attempts that may have generated (ok,
 * ambiguous, lease lost, or no outcome: a worker died after sending) beyond
 * the first. */
static const char ops_report[] =
    "WITH r AS ("
    "  SELECT run_id, tenant, job, status, error_class FROM runs"
    "   WHERE scheduled_at >= $1::timestamptz"
    "), a AS ("
    "  SELECT a.run_id, count(*) AS dispatches,"
    "         count(*) FILTER (WHERE a.outcome = 'ok') AS generations,"
    "         count(*) FILTER (WHERE a.outcome IS NULL OR a.outcome IN"
    "                          ('ok', 'ambiguous', 'lease_lost')) AS maybe,"
    "         coalesce(sum(a.prompt_tokens), 0) AS prompt_tokens,"
    "         coalesce(sum(a.completion_tokens), 0) AS completion_tokens,"
    "         coalesce(sum(a.cached_tokens), 0) AS cached_tokens"
    "    FROM attempts a JOIN r USING (run_id)"
    "   GROUP BY a.run_id"
    "), g AS ("
    "  SELECT CASE WHEN $2 IN ('tenant', 'job') THEN r.tenant END AS tenant,"
    "         CASE WHEN $2 = 'job' THEN r.job END AS job,"
    "         count(*) AS runs,"
    "         count(*) FILTER (WHERE r.status = 'completed') AS completed,"
    "         coalesce(sum(a.generations), 0)::int8 AS generations,"
    "         coalesce(sum(greatest(a.maybe - 1, 0)), 0)::int8"
    "             AS extra_generations,"
    "         coalesce(sum(a.dispatches), 0)::int8 AS dispatches,"
    "         count(*) FILTER (WHERE r.status = 'pending'"
    "                            AND r.error_class = 'budget')"
    "             AS budget_deferred,"
    "         coalesce(sum(a.prompt_tokens), 0)::int8 AS prompt_tokens,"
    "         coalesce(sum(a.completion_tokens), 0)::int8"
    "             AS completion_tokens,"
    "         coalesce(sum(a.cached_tokens), 0)::int8 AS cached_tokens"
    "    FROM r LEFT JOIN a USING (run_id)"
    "   GROUP BY 1, 2"
    ")"
    "SELECT coalesce(json_agg(g ORDER BY g.tenant, g.job), '[]')::text FROM g";

static const char ops_receive_insert[] =
    "INSERT INTO received_notifications (idempotency_key, payload, topic,"
    "                                    kafka_partition, kafka_offset)"
    "VALUES ($1, $2::jsonb, $3, $4::int4, $5::int8)"
    "    ON CONFLICT DO NOTHING"
    " RETURNING 1";

static const char ops_receive_duplicate[] =
    "UPDATE received_notifications SET duplicates = duplicates + 1"
    " WHERE idempotency_key = $1 AND payload = $2::jsonb"
    " RETURNING 1";

static const char ops_receive_conflict[] =
    "INSERT INTO receiver_conflicts (idempotency_key, payload, topic,"
    "                                kafka_partition, kafka_offset)"
    "VALUES ($1, $2::jsonb, $3, $4::int4, $5::int8)";

int
rl_db_dispatch_within_budget(struct rl_db *db, const char *run_id,
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
    if (res.err == RL_ERR_STALE) {
        stale_msg(errstr, errstr_size, "record dispatch of run", run_id,
                  lease_epoch);
        return RL_ERR_STALE;
    }
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

/* An operator's write: the configured schema, then one statement. *rows
 * (may be NULL) receives the rows it touched. Returns 0 or the error, with
 * errstr "could not <what>: ...". */
static int
ops_write(struct rl_db *db, const char *sql, int nparams,
          const char *const *params, const char *what, int *rows, char *errstr,
          size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;

    if (apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res =
        exec_simple(db, sql, nparams, params, &err, errstr, errstr_size, what);
    if (!res)
        return err;
    if (rows)
        *rows = atoi(PQcmdTuples(res));
    PQclear(res);
    return 0;
}

int
rl_db_budget_set(struct rl_db *db, const char *tenant, const char *job,
                 int64_t daily_tokens, const char *actor, char *errstr,
                 size_t errstr_size)
{
    char tokens[32];
    const char *params[4] = {tenant, job, tokens, actor};

    snprintf(tokens, sizeof(tokens), "%" PRId64, daily_tokens);
    return ops_write(db, ops_budget_set, 4, params, "set the budget", NULL,
                     errstr, errstr_size);
}

int
rl_db_budget_remove(struct rl_db *db, const char *tenant, const char *job,
                    char *errstr, size_t errstr_size)
{
    const char *params[2] = {tenant, job};
    int rows = 0;
    int err = ops_write(db, ops_budget_remove, 2, params, "remove the budget",
                        &rows, errstr, errstr_size);

    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not remove the budget of %s%s%s: there is none",
                   tenant, job && *job ? " job " : "", job && *job ? job : "");
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_budgets_json(struct rl_db *db, const char *tenant, char **json,
                   char *errstr, size_t errstr_size)
{
    const char *params[1] = {tenant};

    return ops_one_text(db, ops_budgets_list, 1, params, "list budgets", json,
                        errstr, errstr_size);
}

int
rl_db_report_json(struct rl_db *db, const char *since, const char *by,
                  char **json, char *errstr, size_t errstr_size)
{
    const char *params[2] = {since, by};

    return ops_one_text(db, ops_report, 2, params, "report", json, errstr,
                        errstr_size);
}

int
rl_db_receive(struct rl_db *db, const char *idempotency_key,
              const char *payload_json, const char *topic, int32_t partition,
              int64_t offset, enum rl_receive_status *status, char *errstr,
              size_t errstr_size)
{
    char part[16], off[32];
    const char *params[5] = {idempotency_key, payload_json, topic, part, off};
    PGresult *res;
    int err = RL_ERR_DB;
    int hit;

    *status = RL_RECEIVE_APPLIED;
    snprintf(part, sizeof(part), "%" PRId32, partition);
    snprintf(off, sizeof(off), "%" PRId64, offset);
    if (apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = exec_simple(db, ops_receive_insert, 5, params, &err, errstr,
                      errstr_size, "apply the notification");
    if (!res)
        return err;
    hit = PQntuples(res);
    PQclear(res);
    if (hit)
        return 0;
    /* A separate statement: it must see the row a concurrent receiver
     * committed after the insert's snapshot. */
    res = exec_simple(db, ops_receive_duplicate, 2, params, &err, errstr,
                      errstr_size, "compare the notification");
    if (!res)
        return err;
    hit = PQntuples(res);
    PQclear(res);
    if (hit) {
        *status = RL_RECEIVE_DUPLICATE;
        return 0;
    }
    *status = RL_RECEIVE_CONFLICT;
    res = exec_simple(db, ops_receive_conflict, 5, params, &err, errstr,
                      errstr_size, "record the conflicting notification");
    if (!res)
        return err;
    PQclear(res);
    return 0;
}

/* ==== approval gates (issue 6) ===========================================
 *
 * Statements of schema/006_approval.sql: the proposal an approval-required
 * run waits with, the decision on it, and the approvers list. The
 * pipeline's statement (propose_attempt_awaiting_approval) is prepared
 * with the others above. */

static const char ops_decide_run[] =
    "SELECT result, status, digest, outbox_rows"
    "  FROM rl_decide_run($1, $2, $3, $4, $5)";

static const char ops_run_proposal[] =
    "SELECT r.status, r.tenant, r.proposal::text, r.proposal_digest,"
    "       a.decision, a.actor, a.reason, a.digest,"
    "       " TS_UTC_US("a.decided_at") ""
                                        "  FROM runs r LEFT JOIN approvals a "
                                        "ON a.run_id = r.run_id"
                                        " WHERE r.run_id = $1";

static const char ops_approver_add[] =
    "INSERT INTO approvers (tenant, actor) VALUES ($1, $2)"
    "    ON CONFLICT DO NOTHING";

static const char ops_approver_remove[] =
    "DELETE FROM approvers WHERE tenant = $1 AND actor = $2";

static const char ops_approvers_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.tenant, x.actor), '[]')::text"
    "  FROM (SELECT tenant, actor, " TS_UTC_US(
        "added_at") " AS added_at"
                    "          FROM approvers"
                    "         WHERE $1::text IS NULL OR tenant = $1) x";

int
rl_db_propose_attempt(struct rl_db *db, const char *run_id, const char *worker,
                      int64_t lease_epoch, const struct rl_attempt_ok *oc,
                      const char *proposal_json, const char *digest,
                      enum rl_propose_status *status, char *errstr,
                      size_t errstr_size)
{
    char epoch[32], attempt[16], http[16], prompt[32], completion[32],
        cached[32], latency[32];
    const char *params[12];
    const char *result;
    PGresult *res;
    int err = RL_ERR_DB;

    *status = RL_PROPOSE_WAITING;
    if (!proposal_json || !digest) {
        rl_set_err(errstr, errstr_size,
                   "could not store the proposal of run %s: no proposal",
                   run_id);
        return RL_ERR_INVALID;
    }
    snprintf(epoch, sizeof(epoch), "%" PRId64, lease_epoch);
    snprintf(attempt, sizeof(attempt), "%d", oc ? oc->attempt_no : 0);
    params[0] = run_id;
    params[1] = worker;
    params[2] = epoch;
    params[3] = proposal_json;
    params[4] = digest;
    params[5] = attempt;
    params[6] = oc ? int_or_null(oc->http_status, http, sizeof(http)) : NULL;
    params[7] = oc && oc->upstream_request_id && *oc->upstream_request_id
                    ? oc->upstream_request_id
                    : NULL;
    params[8] =
        oc ? int_or_null(oc->prompt_tokens, prompt, sizeof(prompt)) : NULL;
    params[9] =
        oc ? int_or_null(oc->completion_tokens, completion, sizeof(completion))
           : NULL;
    params[10] =
        oc ? int_or_null(oc->cached_tokens, cached, sizeof(cached)) : NULL;
    params[11] =
        oc ? int_or_null(oc->latency_ms, latency, sizeof(latency)) : NULL;
    res = exec_stmt(db, STMT_PROPOSE_ATTEMPT_AWAITING_APPROVAL, params,
                    "store the proposal of run", run_id, &err, errstr,
                    errstr_size);
    if (!res)
        return err;
    result = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "stale";
    if (strcmp(result, "proposed") == 0)
        *status = RL_PROPOSE_WAITING;
    else if (strcmp(result, "already_proposed") == 0)
        *status = RL_PROPOSE_ALREADY;
    else if (strcmp(result, "already_completed") == 0)
        *status = RL_PROPOSE_COMPLETED;
    else if (strcmp(result, "superseded") == 0) {
        *status = RL_PROPOSE_SUPERSEDED;
        rl_set_err(errstr, errstr_size,
                   "could not store the proposal of run %s: it already holds "
                   "proposal %s and proposals are write-once",
                   run_id, PQgetvalue(res, 0, 1));
    } else {
        PQclear(res);
        stale_msg(errstr, errstr_size, "store the proposal of run", run_id,
                  lease_epoch);
        return RL_ERR_STALE;
    }
    PQclear(res);
    return 0;
}

int
rl_db_decide_run(struct rl_db *db, const char *run_id, const char *digest,
                 const char *actor, int approve, const char *reason,
                 struct rl_approval_decision *out, char *errstr,
                 size_t errstr_size)
{
    const char *params[5] = {run_id, digest, actor,
                             approve ? "approve" : "reject", reason};
    const char *what = approve ? "approve" : "reject";
    const char *result;
    PGresult *res;
    int err = RL_ERR_DB;

    memset(out, 0, sizeof(*out));
    if (apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = exec_simple(db, ops_decide_run, 5, params, &err, errstr, errstr_size,
                      approve ? "approve the run" : "reject the run");
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "could not %s run %s: unexpected result", what, run_id);
        return RL_ERR_DB;
    }
    result = PQgetvalue(res, 0, 0);
    copy_value(res, 0, 1, out->status, sizeof(out->status));
    copy_value(res, 0, 2, out->digest, sizeof(out->digest));
    out->outbox_rows = (int)int_value(res, 0, 3, 0);
    err = RL_ERR_CONFLICT;
    if (strcmp(result, "approved") == 0 || strcmp(result, "rejected") == 0)
        err = 0;
    else if (strcmp(result, "not_found") == 0) {
        rl_set_err(errstr, errstr_size, "could not %s run %s: no such run",
                   what, run_id);
        err = RL_ERR_NOTFOUND;
    } else if (strcmp(result, "not_waiting") == 0)
        rl_set_err(errstr, errstr_size,
                   "could not %s run %s: it is %s, not awaiting approval%s",
                   what, run_id, out->status,
                   strcmp(out->status, "awaiting_approval") == 0
                       ? " (already decided)"
                       : "");
    else if (strcmp(result, "digest_mismatch") == 0)
        rl_set_err(errstr, errstr_size,
                   "could not %s run %s: digest %s is not the digest of its "
                   "proposal (%s); review the proposal again",
                   what, run_id, digest ? digest : "(none)", out->digest);
    else if (strcmp(result, "not_approver") == 0)
        rl_set_err(errstr, errstr_size,
                   "could not %s run %s: %s is not an approver of its tenant",
                   what, run_id, actor ? actor : "(none)");
    else
        rl_set_err(errstr, errstr_size,
                   "could not %s run %s: unexpected result %s", what, run_id,
                   result);
    PQclear(res);
    return err;
}

void
rl_run_proposal_clear(struct rl_run_proposal *p)
{
    if (!p)
        return;
    free(p->tenant);
    free(p->proposal_json);
    free(p->decision);
    free(p->actor);
    free(p->reason);
    memset(p, 0, sizeof(*p));
}

int
rl_db_run_proposal(struct rl_db *db, const char *run_id,
                   struct rl_run_proposal *out, char *errstr,
                   size_t errstr_size)
{
    const char *params[1] = {run_id};
    PGresult *res;
    int err = RL_ERR_DB;
    int oom = 0;

    memset(out, 0, sizeof(*out));
    if (apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = exec_simple(db, ops_run_proposal, 1, params, &err, errstr,
                      errstr_size, "read the proposal");
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        rl_set_err(errstr, errstr_size, "could not read run %s: no such run",
                   run_id);
        return RL_ERR_NOTFOUND;
    }
    copy_value(res, 0, 0, out->status, sizeof(out->status));
    out->tenant = dup_value(res, 0, 1, &oom);
    out->proposal_json = dup_value(res, 0, 2, &oom);
    copy_value(res, 0, 3, out->digest, sizeof(out->digest));
    out->decision = dup_value(res, 0, 4, &oom);
    out->actor = dup_value(res, 0, 5, &oom);
    out->reason = dup_value(res, 0, 6, &oom);
    copy_value(res, 0, 7, out->approved_digest, sizeof(out->approved_digest));
    copy_value(res, 0, 8, out->decided_at, sizeof(out->decided_at));
    PQclear(res);
    if (oom) {
        rl_run_proposal_clear(out);
        rl_set_err(errstr, errstr_size, "could not read run %s: out of memory",
                   run_id);
        return RL_ERR_NOMEM;
    }
    return 0;
}

int
rl_db_approver_add(struct rl_db *db, const char *tenant, const char *actor,
                   int *added, char *errstr, size_t errstr_size)
{
    const char *params[2] = {tenant, actor};
    int rows = 0;
    int err = ops_write(db, ops_approver_add, 2, params, "add the approver",
                        &rows, errstr, errstr_size);

    *added = err == 0 && rows > 0;
    return err;
}

int
rl_db_approver_remove(struct rl_db *db, const char *tenant, const char *actor,
                      char *errstr, size_t errstr_size)
{
    const char *params[2] = {tenant, actor};
    int rows = 0;
    int err = ops_write(db, ops_approver_remove, 2, params,
                        "remove the approver", &rows, errstr, errstr_size);

    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not remove approver %s of tenant %s: there is none",
                   actor, tenant);
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_approvers_json(struct rl_db *db, const char *tenant, char **json,
                     char *errstr, size_t errstr_size)
{
    const char *params[1] = {tenant};

    return ops_one_text(db, ops_approvers_list, 1, params, "list approvers",
                        json, errstr, errstr_size);
}
