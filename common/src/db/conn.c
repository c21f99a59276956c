/* conn.c: a connection to the ledger and how statements run on it:
 * connect (with the session's schema), ping and reconnect, destroy, the
 * server's notices into the log, error translation (libpq's messages
 * become "could not <what>: <message>" without the password) and the two
 * ways a statement is run, prepared by name or unprepared. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/config.h"
#include "rl/err.h"
#include "rl/log.h"

static const char set_search_path[] =
    "SELECT set_config('search_path', quote_ident($1), false)";

void
db_scrub_password(const char *pass, char *msg, size_t size)
{
    char out[1024];
    size_t plen, o = 0;
    const char *in = msg;
    const char *hit;

    if (!pass || !*pass || !msg || size == 0)
        return;
    plen = strlen(pass);
    if (size > sizeof(out))
        size = sizeof(out);
    /* Built in a copy, left to right: "***" is longer than a password of
     * one or two characters, so replacing in place would move the tail
     * past the end of msg, and a rescan could find the password inside
     * what was just written. What does not fit is cut. */
    while ((hit = strstr(in, pass)) != NULL && o + 1 < size) {
        size_t keep = (size_t)(hit - in);

        if (keep > size - 1 - o)
            keep = size - 1 - o;
        memcpy(out + o, in, keep);
        o += keep;
        for (int i = 0; i < 3 && o + 1 < size; i++)
            out[o++] = '*';
        in = hit + plen;
    }
    while (*in && o + 1 < size)
        out[o++] = *in++;
    out[o] = '\0';
    memcpy(msg, out, o + 1);
}

void
db_fail_msg(struct rl_db *db, const PGresult *res, char *errstr,
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
    db_scrub_password(db && db->conn ? PQpass(db->conn) : NULL, msg,
                      sizeof(msg));
    snprintf(errstr, errstr_size, "could not %s: %s", what, msg);
}

/* Data exceptions (class 22) and integrity violations (23) are the
 * caller's input: retrying as is cannot help. Everything else may be
 * transient. */
int
db_err_from_result(const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

    if (state && (strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0))
        return RL_ERR_INVALID;
    return RL_ERR_DB;
}

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

/* Unprepared, through PQexecParams, which refuses a second statement in
 * the string even without parameters. */
PGresult *
db_exec_simple(struct rl_db *db, const char *sql, int nparams,
               const char *const *params, int *err, char *errstr,
               size_t errstr_size, const char *what)
{
    PGresult *res;
    ExecStatusType status;

    res = PQexecParams(db->conn, sql, nparams, NULL, params, NULL, NULL, 0);
    status = PQresultStatus(res);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
        db_fail_msg(db, res, errstr, errstr_size, "%s", what);
        *err = db_err_from_result(res);
        PQclear(res);
        return NULL;
    }
    return res;
}

/* Applies the configured schema to a fresh session. */
int
db_apply_schema(struct rl_db *db, char *errstr, size_t errstr_size)
{
    const char *params[1];
    PGresult *res;
    int err = RL_ERR_DB;

    if (!db->schema || db->schema_set)
        return 0;
    params[0] = db->schema;
    res = db_exec_simple(db, set_search_path, 1, params, &err, errstr,
                         errstr_size, "set the schema search path");
    if (!res)
        return err;
    PQclear(res);
    db->schema_set = 1;
    return 0;
}

/* What a session is given besides the connection string; NULL for the
 * connections of operator commands and tests. */
struct session {
    const char *application_name;
    long statement_timeout_ms; /* -1: not set */
    long lock_timeout_ms;
    long idle_in_tx_timeout_ms;
    long tcp_user_timeout_ms;
};

static struct rl_db *
connect_session(const char *conninfo, const char *schema,
                const struct session *ss, char *errstr, size_t errstr_size)
{
    /* Entries before dbname are defaults the connection string may
     * override; options comes after it, with the string's own options
     * appended (the server applies -c settings in order, so the string's
     * win there too). Statements are planned for the values they are given
     * (custom plans): a generic plan cached while the ledger was small
     * keeps sequential scans as the tables grow (see
     * schema/007_batches.sql). */
    const char *keys[12];
    const char *values[12];
    char tcp_user[24], options[512], app[64];
    const char *user_options = NULL;
    struct rl_db *db = NULL;
    PQconninfoOption *opts = NULL;
    char *parse_err = NULL;
    int k = 0;
    size_t o;

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
        for (PQconninfoOption *opt = opts; opt->keyword; opt++) {
            if (strcmp(opt->keyword, "options") == 0 && opt->val && *opt->val)
                user_options = opt->val;
        }
    }

    o = (size_t)snprintf(options, sizeof(options), "%s",
                         "-c plan_cache_mode=force_custom_plan");
    keys[k] = "connect_timeout";
    values[k++] = "10";
    keys[k] = "fallback_application_name";
    values[k++] = "runledger";
    keys[k] = "keepalives";
    values[k++] = "1";
    if (ss) {
        snprintf(app, sizeof(app), "%s", ss->application_name);
        keys[k] = "application_name";
        values[k++] = app;
        keys[k] = "keepalives_idle";
        values[k++] = "10";
        keys[k] = "keepalives_interval";
        values[k++] = "5";
        keys[k] = "keepalives_count";
        values[k++] = "3";
        if (ss->tcp_user_timeout_ms > 0) {
            snprintf(tcp_user, sizeof(tcp_user), "%ld",
                     ss->tcp_user_timeout_ms);
            keys[k] = "tcp_user_timeout";
            values[k++] = tcp_user;
        }
        if (ss->statement_timeout_ms >= 0)
            o += (size_t)snprintf(options + o, sizeof(options) - o,
                                  " -c statement_timeout=%ld",
                                  ss->statement_timeout_ms);
        if (ss->lock_timeout_ms >= 0)
            o += (size_t)snprintf(options + o, sizeof(options) - o,
                                  " -c lock_timeout=%ld", ss->lock_timeout_ms);
        if (ss->idle_in_tx_timeout_ms >= 0)
            o += (size_t)snprintf(options + o, sizeof(options) - o,
                                  " -c idle_in_transaction_session_timeout=%ld",
                                  ss->idle_in_tx_timeout_ms);
    } else {
        keys[k] = "keepalives_idle";
        values[k++] = "30";
    }
    keys[k] = "dbname";
    values[k++] = conninfo;
    keys[k] = "options";
    values[k++] = options;
    keys[k] = NULL;
    values[k] = NULL;

    db = calloc(1, sizeof(*db));
    if (!db)
        goto oom;
    if (user_options) {
        /* Kept out of options[] (and so out of every message): it is the
         * string's own text. */
        db->user_options = malloc(o + 1 + strlen(user_options) + 1);
        if (!db->user_options)
            goto oom;
        sprintf(db->user_options, "%s %s", options, user_options);
        values[k - 1] = db->user_options;
    }
    if (schema) {
        db->schema = strdup(schema);
        if (!db->schema)
            goto oom;
    }
    PQconninfoFree(opts);
    opts = NULL;
    db->conn = PQconnectdbParams(keys, values, 1);
    if (!db->conn)
        goto oom;
    if (PQstatus(db->conn) != CONNECTION_OK) {
        db_fail_msg(db, NULL, errstr, errstr_size, "connect to postgresql");
        rl_db_destroy(db);
        return NULL;
    }
    PQsetNoticeProcessor(db->conn, notice_to_log, NULL);
    if (db_apply_schema(db, errstr, errstr_size) != 0) {
        rl_db_destroy(db);
        return NULL;
    }
    return db;

oom:
    PQconninfoFree(opts);
    rl_db_destroy(db);
    rl_set_err(errstr, errstr_size,
               "could not connect to postgresql: out of memory");
    return NULL;
}

struct rl_db *
rl_db_connect_schema(const char *conninfo, const char *schema, char *errstr,
                     size_t errstr_size)
{
    return connect_session(conninfo, schema, NULL, errstr, errstr_size);
}

const char *
rl_db_role_name(enum rl_db_role role)
{
    switch (role) {
    case RL_DB_ROLE_LEDGER:
        return "ledger";
    case RL_DB_ROLE_RENEW:
        return "renew";
    case RL_DB_ROLE_COMPLETER:
        return "completer";
    case RL_DB_ROLE_RELAY:
        return "relay";
    case RL_DB_ROLE_VACUUM:
        return "vacuum";
    case RL_DB_ROLE_HEALTH:
        return "health";
    }
    return "unknown";
}

static long
at_most(long value, long cap)
{
    return value == 0 || value > cap ? cap : value;
}

struct rl_db *
rl_db_connect_role(const struct rl_config *cfg, enum rl_db_role role,
                   char *errstr, size_t errstr_size)
{
    struct session ss;
    char app[64];
    long lease_ms = (long)cfg->lease_seconds * 1000;

    snprintf(app, sizeof(app), "runledger-%s", rl_db_role_name(role));
    ss = (struct session){
        .application_name = app,
        .statement_timeout_ms = cfg->pg_statement_timeout_ms,
        .lock_timeout_ms = cfg->pg_lock_timeout_ms,
        .idle_in_tx_timeout_ms = cfg->pg_idle_in_tx_timeout_ms,
        .tcp_user_timeout_ms = cfg->pg_tcp_user_timeout_ms,
    };
    switch (role) {
    case RL_DB_ROLE_RENEW:
        /* A renewal that waits longer than a third of the lease is worth
         * less than the next one, due a sixth of the lease later. */
        ss.statement_timeout_ms =
            at_most(ss.statement_timeout_ms, lease_ms / 3);
        ss.lock_timeout_ms = at_most(ss.lock_timeout_ms, lease_ms / 6);
        break;
    case RL_DB_ROLE_VACUUM:
        /* VACUUM of a large outbox takes what it takes. */
        ss.statement_timeout_ms = 0;
        break;
    case RL_DB_ROLE_RELAY:
        /* The batch's transaction stays open while the broker
         * acknowledges its records. */
        ss.idle_in_tx_timeout_ms = 0;
        break;
    default:
        break;
    }
    return connect_session(cfg->database_url, NULL, &ss, errstr, errstr_size);
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
    free(db->user_options);
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
            db_fail_msg(db, NULL, errstr, errstr_size,
                        "reconnect to postgresql");
            return RL_ERR_DB;
        }
    }
    err = db_apply_schema(db, errstr, errstr_size);
    if (err != 0)
        return err;
    res = db_exec_simple(db, "SELECT 1", 0, NULL, &err, errstr, errstr_size,
                         "ping postgresql");
    if (!res)
        return err;
    PQclear(res);
    return 0;
}

/* Prepares statement id on first use in this session and runs it.
 * Returns the result (PQclear it) or NULL with *err and errstr set,
 * errstr reading "could not <what>[ <subject>]: <message>". */
PGresult *
db_exec_stmt(struct rl_db *db, const struct db_stmt *st,
             const char *const *params, const char *what, const char *subject,
             int *err, char *errstr, size_t errstr_size)
{
    PGresult *res;
    ExecStatusType status;

    *err = RL_ERR_DB;
    if (!db->schema_set && db->schema &&
        db_apply_schema(db, errstr, errstr_size) != 0)
        return NULL;
    if (!(db->prepared & (1u << st->id))) {
        res = PQprepare(db->conn, st->name, st->sql, st->nparams, NULL);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            db_fail_msg(db, res, errstr, errstr_size, "%s%s%s", what,
                        subject ? " " : "", subject ? subject : "");
            PQclear(res);
            return NULL;
        }
        PQclear(res);
        db->prepared |= 1u << st->id;
    }
    res =
        PQexecPrepared(db->conn, st->name, st->nparams, params, NULL, NULL, 0);
    status = PQresultStatus(res);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
        db_fail_msg(db, res, errstr, errstr_size, "%s%s%s", what,
                    subject ? " " : "", subject ? subject : "");
        *err = db_err_from_result(res);
        PQclear(res);
        return NULL;
    }
    return res;
}
