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
