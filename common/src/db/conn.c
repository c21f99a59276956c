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
    int pool_session; /* RUNLEDGER_PG_POOL_MODE=session */
};

/* What libpq and the server say (in English: the image's C locale, a
 * server's default lc_messages) when they refuse a connection for a
 * reason another attempt with the same string meets again: the
 * authentication (28P01, 28000), a missing role or database (3D000), TLS
 * required and refused or the server's certificate not trusted, a bad
 * parameter. The server sends no SQLSTATE libpq would keep for a failed
 * connection, so the words are all there is. A message not listed,
 * including one in another language, counts as one that may heal
 * (refused, timed out, host not found, the server starting up or full):
 * the caller retries until its deadline. */
static const char *const refused_for_good[] = {
    "authentication failed",
    "no pg_hba.conf entry",
    "pg_hba.conf rejects connection",
    "does not exist",
    "is not permitted to log in",
    "permission denied for database",
    "server does not support SSL",
    "certificate verify failed",
    "does not match host name",
    "no password supplied",
    "channel binding",
    "invalid connection option",
    "invalid sslmode value",
    "invalid port number",
    "invalid value for parameter",
    "unrecognized configuration parameter",
};

/* Fills errstr for the failed connection of db and returns
 * RL_ERR_INVALID when it cannot succeed as it is, else RL_ERR_DB. */
static int
connect_failed(struct rl_db *db, char *errstr, size_t errstr_size)
{
    const char *msg = PQerrorMessage(db->conn);
    int err = RL_ERR_DB;

    db_fail_msg(db, NULL, errstr, errstr_size, "connect to postgresql");
    if (PQconnectionNeedsPassword(db->conn))
        err = RL_ERR_INVALID;
    for (size_t i = 0;
         i < sizeof(refused_for_good) / sizeof(refused_for_good[0]); i++) {
        if (strstr(msg, refused_for_good[i]))
            err = RL_ERR_INVALID;
    }
    /* libpq's words do not say which part of the string asked for TLS. */
    if (errstr && errstr_size > 0 &&
        strstr(msg, "server does not support SSL")) {
        size_t len = strlen(errstr);

        snprintf(errstr + len, errstr_size - len, "%s",
                 " (the connection string's sslmode requires TLS, which this "
                 "server does not offer: enable TLS on the server, or use "
                 "sslmode=prefer or disable on a network you trust)");
    }
    return err;
}

/* PgBouncer's answer to a startup packet with `options` when its
 * ignore_startup_parameters does not list it. */
static const char options_refused[] = "unsupported startup parameter: options";

static int
add_setting(struct rl_db *db, const char *name, size_t name_len,
            const char *value)
{
    if (db->n_settings == DB_SETTINGS_MAX)
        return RL_ERR_INVALID;
    db->set_names[db->n_settings] = strndup(name, name_len);
    db->set_values[db->n_settings] = strdup(value);
    if (!db->set_names[db->n_settings] || !db->set_values[db->n_settings]) {
        free(db->set_names[db->n_settings]);
        free(db->set_values[db->n_settings]);
        return RL_ERR_NOMEM;
    }
    db->n_settings++;
    return 0;
}

/* Adds "name=value" (a -c argument) as a setting; '-' in the name is '_',
 * as the server reads it. */
static int
add_setting_arg(struct rl_db *db, char *arg)
{
    char *eq = strchr(arg, '=');

    if (!eq || eq == arg)
        return RL_ERR_INVALID;
    for (char *p = arg; p < eq; p++) {
        if (*p == '-')
            *p = '_';
    }
    return add_setting(db, arg, (size_t)(eq - arg), eq + 1);
}

/* Keeps the -c name=value, -cname=value and --name=value settings of a
 * startup options string, split as the server splits it (whitespace
 * between arguments, a backslash escaping the next character). Anything
 * else (another switch) cannot be sent with SET: RL_ERR_INVALID. */
static int
add_options_settings(struct rl_db *db, const char *options)
{
    size_t len = strlen(options);
    char *arg = malloc(len + 1);
    const char *p = options;
    int want_value = 0;
    int err = 0;

    if (!arg)
        return RL_ERR_NOMEM;
    while (err == 0) {
        size_t n = 0;

        while (*p && isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        while (*p && !isspace((unsigned char)*p)) {
            if (*p == '\\' && p[1])
                p++;
            arg[n++] = *p++;
        }
        arg[n] = '\0';
        if (want_value) {
            err = add_setting_arg(db, arg);
            want_value = 0;
        } else if (strcmp(arg, "-c") == 0) {
            want_value = 1;
        } else if (strncmp(arg, "-c", 2) == 0) {
            err = add_setting_arg(db, arg + 2);
        } else if (strncmp(arg, "--", 2) == 0) {
            err = add_setting_arg(db, arg + 2);
        } else {
            err = RL_ERR_INVALID;
        }
    }
    if (err == 0 && want_value)
        err = RL_ERR_INVALID;
    free(arg);
    return err;
}

int
db_apply_settings(struct rl_db *db, char *errstr, size_t errstr_size)
{
    char sql[DB_SETTINGS_MAX * 48 + 16];
    const char *params[DB_SETTINGS_MAX * 2];
    size_t o;
    PGresult *res;
    int err = RL_ERR_DB;

    if (!db->set_after_connect || db->settings_set || db->n_settings == 0)
        return 0;
    o = (size_t)snprintf(sql, sizeof(sql), "SELECT ");
    for (int i = 0; i < db->n_settings; i++) {
        o += (size_t)snprintf(sql + o, sizeof(sql) - o,
                              "%sset_config($%d, $%d, false)", i ? ", " : "",
                              2 * i + 1, 2 * i + 2);
        params[2 * i] = db->set_names[i];
        params[2 * i + 1] = db->set_values[i];
    }
    res = db_exec_simple(db, sql, 2 * db->n_settings, params, &err, errstr,
                         errstr_size, "apply the session settings");
    if (!res)
        return err;
    PQclear(res);
    db->settings_set = 1;
    return 0;
}

/* 1 when the settings sent as startup options are in force: a pooler with
 * options in ignore_startup_parameters accepts the connection and drops
 * them without a word. plan_cache_mode is sent on every connection; the
 * value expected is the last one given (the string's own may change it). */
static int
startup_options_in_force(struct rl_db *db)
{
    const char *want = NULL;
    PGresult *res;
    int ok;

    for (int i = 0; i < db->n_settings; i++) {
        if (strcmp(db->set_names[i], "plan_cache_mode") == 0)
            want = db->set_values[i];
    }
    res = PQexecParams(db->conn, "SELECT current_setting('plan_cache_mode')", 0,
                       NULL, NULL, NULL, NULL, 0);
    ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
         want && strcmp(PQgetvalue(res, 0, 0), want) == 0;
    PQclear(res);
    return ok;
}

/* Opens a connection for ss (NULL: an operator's or a test's). On failure
 * returns NULL with errstr and *err_out (when not NULL) set: RL_ERR_INVALID
 * when retrying the same string cannot help, RL_ERR_NOMEM, else
 * RL_ERR_DB. */
static struct rl_db *
connect_session(const char *conninfo, const char *schema,
                const struct session *ss, int *err_out, char *errstr,
                size_t errstr_size)
{
    /* Entries before dbname are defaults the connection string may
     * override; options comes after it, with the string's own options
     * appended (the server applies -c settings in order, so the string's
     * win there too). Statements are planned for the values they are given
     * (custom plans): a generic plan cached while the ledger was small
     * keeps sequential scans as the tables grow (see
     * schema/007_batches.sql). The relay's session, whose settings fix
     * its plans whatever the statistics, keeps generic ones (outbox.c).
     *
     * A pooler (PgBouncer) either refuses startup options or, told to
     * ignore them, drops them: then the connection string is sent as its
     * parsed parameters without options, and the same settings, in the
     * same order, are applied with set_config once connected (and after
     * each reconnect). RUNLEDGER_PG_POOL_MODE=session goes that way at
     * once. See docs/pgbouncer.md. */
    const char *keys[12];
    const char *values[12];
    const char **pkeys = NULL, **pvalues = NULL;
    char tcp_user[24], options[512], app[64], num[3][24];
    const char *user_options = NULL;
    struct rl_db *db = NULL;
    PQconninfoOption *opts = NULL;
    char *parse_err = NULL;
    int k = 0, nbase, pooled = ss && ss->pool_session;
    int opts_err = 0;
    int err = RL_ERR_DB;
    size_t o, nopts = 0;

    if (schema && !valid_schema_name(schema)) {
        rl_set_err(errstr, errstr_size,
                   "could not connect to postgresql: schema name must be 1 to "
                   "%d of [a-z0-9_], not starting with a digit",
                   RL_DB_SCHEMA_MAX);
        if (err_out)
            *err_out = RL_ERR_INVALID;
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
            if (err_out)
                *err_out = RL_ERR_INVALID;
            return NULL;
        }
        for (PQconninfoOption *opt = opts; opt->keyword; opt++) {
            nopts++;
            if (strcmp(opt->keyword, "options") == 0 && opt->val && *opt->val)
                user_options = opt->val;
        }
    }

    db = calloc(1, sizeof(*db));
    if (!db)
        goto oom;
    o = (size_t)snprintf(options, sizeof(options), "%s",
                         "-c plan_cache_mode=force_custom_plan");
    if (add_setting(db, "plan_cache_mode", 15, "force_custom_plan") != 0)
        goto oom;
    keys[k] = "connect_timeout";
    values[k++] = "10";
    keys[k] = "fallback_application_name";
    values[k++] = "runledger";
    keys[k] = "keepalives";
    values[k++] = "1";
    if (ss) {
        const char *names[3] = {"statement_timeout", "lock_timeout",
                                "idle_in_transaction_session_timeout"};
        long ms[3] = {ss->statement_timeout_ms, ss->lock_timeout_ms,
                      ss->idle_in_tx_timeout_ms};

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
        for (int i = 0; i < 3; i++) {
            if (ms[i] < 0)
                continue;
            snprintf(num[i], sizeof(num[i]), "%ld", ms[i]);
            o += (size_t)snprintf(options + o, sizeof(options) - o, " -c %s=%s",
                                  names[i], num[i]);
            if (add_setting(db, names[i], strlen(names[i]), num[i]) != 0)
                goto oom;
        }
    } else {
        keys[k] = "keepalives_idle";
        values[k++] = "30";
    }
    nbase = k;
    /* Needed only when the settings go by SET; a switch other than -c is
     * fine as a startup option. */
    if (user_options)
        opts_err = add_options_settings(db, user_options);
    if (opts_err == RL_ERR_NOMEM)
        goto oom;
    keys[k] = "dbname";
    values[k++] = conninfo;
    keys[k] = "options";
    values[k++] = options;
    keys[k] = NULL;
    values[k] = NULL;

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
    if (!pooled) {
        db->conn = PQconnectdbParams(keys, values, 1);
        if (!db->conn)
            goto oom;
        if (PQstatus(db->conn) != CONNECTION_OK) {
            if (!strstr(PQerrorMessage(db->conn), options_refused)) {
                err = connect_failed(db, errstr, errstr_size);
                goto fail;
            }
            rl_log_warn(NULL, "postgresql: the server (a pooler) refused "
                              "startup options: connecting without them and "
                              "applying the session settings with SET; "
                              "RUNLEDGER_PG_POOL_MODE=session skips the "
                              "first attempt");
            PQfinish(db->conn);
            db->conn = NULL;
            pooled = 1;
        } else if (!startup_options_in_force(db)) {
            rl_log_debug(NULL, "postgresql: startup options were dropped (a "
                               "pooler's ignore_startup_parameters): "
                               "applying the session settings with SET");
            db->set_after_connect = 1;
        }
    }
    if (pooled) {
        /* The string's parameters one by one, after our defaults (a later
         * entry wins), without options. */
        pkeys = calloc((size_t)nbase + nopts + 1, sizeof(*pkeys));
        pvalues = calloc((size_t)nbase + nopts + 1, sizeof(*pvalues));
        if (!pkeys || !pvalues)
            goto oom;
        k = 0;
        for (int i = 0; i < nbase; i++, k++) {
            pkeys[k] = keys[i];
            pvalues[k] = values[i];
        }
        for (size_t i = 0; i < nopts; i++) {
            if (!opts[i].val || strcmp(opts[i].keyword, "options") == 0)
                continue;
            pkeys[k] = opts[i].keyword;
            pvalues[k++] = opts[i].val;
        }
        db->conn = PQconnectdbParams(pkeys, pvalues, 0);
        if (!db->conn)
            goto oom;
        if (PQstatus(db->conn) != CONNECTION_OK) {
            err = connect_failed(db, errstr, errstr_size);
            goto fail;
        }
        db->set_after_connect = 1;
    }
    if (db->set_after_connect && opts_err != 0) {
        rl_set_err(errstr, errstr_size,
                   "could not connect to postgresql: startup options do not "
                   "reach the server (a pooler), and the connection string's "
                   "options hold more than %d settings or something other "
                   "than -c name=value, which cannot be applied with SET",
                   DB_SETTINGS_MAX - 4);
        err = RL_ERR_INVALID;
        goto fail;
    }
    PQsetNoticeProcessor(db->conn, notice_to_log, NULL);
    err = db_apply_settings(db, errstr, errstr_size);
    if (err == 0)
        err = db_apply_schema(db, errstr, errstr_size);
    if (err != 0)
        goto fail;
    PQconninfoFree(opts);
    free(pkeys);
    free(pvalues);
    return db;

oom:
    rl_set_err(errstr, errstr_size,
               "could not connect to postgresql: out of memory");
    err = RL_ERR_NOMEM;
fail:
    if (err_out)
        *err_out = err;
    PQconninfoFree(opts);
    free(pkeys);
    free(pvalues);
    rl_db_destroy(db);
    return NULL;
}

struct rl_db *
rl_db_connect_schema(const char *conninfo, const char *schema, char *errstr,
                     size_t errstr_size)
{
    return connect_session(conninfo, schema, NULL, NULL, errstr, errstr_size);
}

int
rl_db_connect_try(struct rl_db **out, const char *conninfo, const char *schema,
                  char *errstr, size_t errstr_size)
{
    int err = RL_ERR_DB;

    *out = connect_session(conninfo, schema, NULL, &err, errstr, errstr_size);
    return *out ? 0 : err;
}

/* "ledger", "renew", ...: the role in application_name. */
static const char *
role_name(enum rl_db_role role)
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
    case RL_DB_ROLE_BATCHER:
        return "batcher";
    case RL_DB_ROLE_CONSOLE:
        return "console";
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

    snprintf(app, sizeof(app), "runledger-%s", role_name(role));
    ss = (struct session){
        .application_name = app,
        .statement_timeout_ms = cfg->pg_statement_timeout_ms,
        .lock_timeout_ms = cfg->pg_lock_timeout_ms,
        .idle_in_tx_timeout_ms = cfg->pg_idle_in_tx_timeout_ms,
        .tcp_user_timeout_ms = cfg->pg_tcp_user_timeout_ms,
        .pool_session = cfg->pg_pool_mode == RL_PG_POOL_SESSION,
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
    case RL_DB_ROLE_CONSOLE:
        /* A person waits for each statement, on one of a few pooled
         * connections: a page's query that runs long (a filter over
         * millions of runs) or waits on a lock must end and free its
         * connection for the other pages. */
        ss.statement_timeout_ms = at_most(ss.statement_timeout_ms, 5000);
        ss.lock_timeout_ms = at_most(ss.lock_timeout_ms, 2000);
        break;
    default:
        break;
    }
    return connect_session(cfg->database_url, NULL, &ss, NULL, errstr,
                           errstr_size);
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
    for (int i = 0; i < db->n_settings; i++) {
        free(db->set_names[i]);
        free(db->set_values[i]);
    }
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
        db->settings_set = 0;
        if (PQstatus(db->conn) != CONNECTION_OK) {
            db_fail_msg(db, NULL, errstr, errstr_size,
                        "reconnect to postgresql");
            return RL_ERR_DB;
        }
    }
    err = db_apply_settings(db, errstr, errstr_size);
    if (err != 0)
        return err;
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
    if (db->set_after_connect && !db->settings_set &&
        db_apply_settings(db, errstr, errstr_size) != 0)
        return NULL;
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
