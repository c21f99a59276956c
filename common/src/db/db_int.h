/* db_int.h: what the files of common/src/db/ share and nothing outside
 * them sees: the connection, the prepared statements' registry, execution
 * and error translation, and the text helpers that build parameters and read
 * results. Only the files that include this header include libpq-fe.h. */
#ifndef RL_DB_INT_H
#define RL_DB_INT_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "rl/buf.h"
#include "rl/db_conn.h"

/* Session settings a connection carries at most: ours and the connection
 * string's own -c settings. */
#define DB_SETTINGS_MAX 32

struct rl_db {
    PGconn *conn;
    char *schema;        /* NULL: the server's search_path */
    unsigned prepared;   /* bit per enum db_stmt_id: prepared here */
    int schema_set;      /* search_path applied on this session */
    char *outbox_schema; /* rl_db_outbox_listen: where outbox resolved */
    int outbox_vacuum;   /* may vacuum the outbox: 0 unchecked, 1 yes, -1 no */
    int vacuuming;       /* rl_db_outbox_vacuum_start sent, result pending */
    char *user_options;  /* options sent: ours, then the string's own */
    /* Session settings applied with set_config after each connect (and
     * reconnect) when startup options cannot carry them: a pooler refused
     * or dropped them, or RUNLEDGER_PG_POOL_MODE=session. Ours first, then
     * the connection string's own -c settings, so those win as they do as
     * startup options. */
    char *set_names[DB_SETTINGS_MAX];
    char *set_values[DB_SETTINGS_MAX];
    int n_settings;
    int set_after_connect; /* 1: apply them after each connect */
    int settings_set;      /* applied on this session */
};

/* ---- statements ---------------------------------------------------------
 *
 * Every statement the service runs is a named prepared statement, its SQL
 * in the file of its concern as a struct db_stmt. The ids below are the
 * registry: one per statement, each the bit of struct rl_db.prepared that
 * says the session has prepared it, and each the lowercase of the
 * statement's name, which a session cannot hold twice. A statement is
 * prepared on its first use in a session (a session that never claims
 * never prepares the claim). */
enum db_stmt_id {
    DB_STMT_CLAIM_RUNS,                        /* claim.c */
    DB_STMT_CLAIM_DUE_RUNS,                    /* claim.c */
    DB_STMT_STORE_RAW_INPUT_ONCE,              /* lease.c */
    DB_STMT_RECORD_OUTCOME_ONCE,               /* dispatch.c */
    DB_STMT_RENEW_LEASES_OF_OWNER,             /* lease.c */
    DB_STMT_CHECK_LEASES_OF_OWNER,             /* lease.c */
    DB_STMT_RELEASE_RUN_UNDER_LEASE,           /* lease.c */
    DB_STMT_RELEASE_RUN_FOR_PROVIDER_WAIT,     /* lease.c */
    DB_STMT_RELEASE_RUN_AFTER_BATCH,           /* lease.c */
    DB_STMT_PARK_RUN_UNDER_LEASE,              /* lease.c */
    DB_STMT_RELEASE_LEASES_OF_OWNER,           /* lease.c */
    DB_STMT_DISPATCH_RUNS,                     /* dispatch.c */
    DB_STMT_COMPLETE_RUNS,                     /* complete.c */
    DB_STMT_LOCK_PENDING_OUTBOX,               /* outbox.c */
    DB_STMT_FINISH_OUTBOX_ROWS,                /* outbox.c */
    DB_STMT_PROPOSE_ATTEMPT_AWAITING_APPROVAL, /* approval.c */
    DB_STMT_LATEST_ATTEMPT_WITHOUT_OUTCOME,    /* dispatch.c */
    DB_STMT_MARK_ATTEMPT_RECONCILED,           /* dispatch.c */
    DB_STMT_AMBIGUOUS_ATTEMPT_NOS,             /* dispatch.c */
    DB_STMT_INSTALLATION_ID,                   /* dispatch.c */
    DB_STMT_CLUSTER_ID,                        /* dispatch.c */
    DB_STMT_COUNT
};

struct db_stmt {
    enum db_stmt_id id;
    const char *name; /* the id in lowercase, without DB_STMT_ */
    const char *sql;  /* parameterised: $1 .. $nparams */
    int nparams;
};

/* Timestamps as the ledger prints them: UTC with microseconds
 * ("YYYY-MM-DDTHH:MM:SS.ffffff+00:00", RL_DB_TIME_SIZE) or whole seconds
 * (RL_TIME_UTC_SIZE, as scheduled_at is). */
#define DB_TS_US(col)                                                          \
    "to_char(" col " AT TIME ZONE 'UTC', "                                     \
    "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"
#define DB_TS_S(col)                                                           \
    "to_char(" col " AT TIME ZONE 'UTC', "                                     \
    "'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"')"

/* ---- execution and errors (conn.c) -------------------------------------- */

/* "could not <what>: <message>" into errstr, message from res when it has
 * one, else from the connection; on one line, the password scrubbed. */
void db_fail_msg(struct rl_db *db, const PGresult *res, char *errstr,
                 size_t errstr_size, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Replaces every occurrence of pass (NULL or "": nothing to do) in the
 * string msg, a buffer of size bytes (at most 1024 are used), by "***",
 * cutting what no longer fits: a libpq message quoting a malformed
 * parameter could carry the password. */
void db_scrub_password(const char *pass, char *msg, size_t size);

/* RL_ERR_INVALID for data exceptions (class 22) and integrity violations
 * (23), the caller's input; RL_ERR_DB for anything else. */
int db_err_from_result(const PGresult *res);

/* Runs sql unprepared with nparams text parameters. Returns the result
 * (PQclear it) or NULL with *err and errstr ("could not <what>: ...") set. */
PGresult *db_exec_simple(struct rl_db *db, const char *sql, int nparams,
                         const char *const *params, int *err, char *errstr,
                         size_t errstr_size, const char *what);

/* Brings every model's rate-limit horizon back to the runs still waiting
 * for it (rl_model_horizon_refresh), after a cancel or a purge that has
 * committed: a failure is logged, never the caller's, and the next cancel
 * or purge tries again. */
void db_refresh_model_horizons(struct rl_db *db);

/* Prepares st on its first use in this session and runs it. Returns the
 * result (PQclear it) or NULL with *err and errstr set, errstr reading
 * "could not <what>[ <subject>]: <message>". */
PGresult *db_exec_stmt(struct rl_db *db, const struct db_stmt *st,
                       const char *const *params, const char *what,
                       const char *subject, int *err, char *errstr,
                       size_t errstr_size);

/* Applies the configured schema to a session that has not got it yet.
 * Returns 0 or an rl_err. */
int db_apply_schema(struct rl_db *db, char *errstr, size_t errstr_size);

/* Applies the session settings with set_config when the connection needs
 * them after a connect (struct rl_db.set_after_connect); 0 or an rl_err. */
int db_apply_settings(struct rl_db *db, char *errstr, size_t errstr_size);

/* ---- database roles (roles.c) ------------------------------------------ */

/* Makes the ledger's group roles ready for a migrate on this session's
 * schema: creates runledger_owner, _worker, _console, _relay and _readonly
 * where missing (an error naming the role when the user may not), makes
 * the user a member of runledger_owner, grants every role USAGE on the
 * schema (the owner CREATE too) and hands what the user owns in the
 * schema to runledger_owner. The caller holds the migration lock.
 * Returns 0 or RL_ERR_DB with errstr set (and the server's hint). */
int db_roles_prepare(struct rl_db *db, char *errstr, size_t errstr_size);

/* SET ROLE runledger_owner (on) or RESET ROLE (off) for the session.
 * Returns 0 or an rl_err. */
int db_roles_act_as_owner(struct rl_db *db, int on, char *errstr,
                          size_t errstr_size);

/* ---- parameters and results (text.c) ------------------------------------ */

/* Appends one element to a PostgreSQL array literal being built in b
 * ("{" first, "}" after the last): quoted, with '"' and '\' escaped, or
 * NULL. */
void db_array_add(struct rl_buf *b, const char *elem);
void db_array_add_int(struct rl_buf *b, int64_t value, int null_if_negative);

/* The arrays of a batch statement, built in step: open each with "{",
 * close each with "}" pointing params[a] at it (0, or RL_ERR_NOMEM),
 * free them. */
void db_arrays_open(struct rl_buf *arrays, size_t n);
int db_arrays_close(struct rl_buf *arrays, size_t n, const char **params);
void db_arrays_free(struct rl_buf *arrays, size_t n);

/* Checks that res has one row of ncols columns per input element, the
 * first column naming a distinct element by its 1-based ord, and sets
 * index[row] to that element's 0-based index. Returns 0, RL_ERR_NOMEM or
 * RL_ERR_DB (errstr: "could not <what>: ..."). */
int db_batch_rows(const PGresult *res, size_t n, int ncols, long *index,
                  const char *what, char *errstr, size_t errstr_size);

/* Column col of row: a new string (NULL for SQL NULL; *oom set when the
 * copy fails), into a fixed buffer ("" for NULL), as an integer, as a
 * boolean. */
char *db_dup_value(const PGresult *res, int row, int col, int *oom);
void db_copy_value(const PGresult *res, int row, int col, char *out,
                   size_t size);
int64_t db_int_value(const PGresult *res, int row, int col, int64_t if_null);
int db_bool_value(const PGresult *res, int row, int col);

/* 1 when json is NULL or the JSON null. */
int db_is_json_null(const char *json);

/* value formatted into buf, or NULL (SQL NULL) when negative. */
const char *db_int_or_null(int64_t value, char *buf, size_t size);

/* errstr for a write refused because the lease (owner, epoch) is gone. */
void db_stale_msg(char *errstr, size_t errstr_size, const char *what,
                  const char *run_id, int64_t epoch);

/* ---- batches (batch_lease.c) -------------------------------------------- */

struct rl_batch;

/* A row of a take of batches (batch_take, rl_batch_take_poll: batch_id,
 * lock_epoch, state, endpoint, model, completion_window, input_file_id,
 * provider_batch_id, upload_tries, create_tries, lookup ms, polls, runs)
 * into *b. */
void db_batch_row(const PGresult *res, int row, struct rl_batch *b);

/* ---- one-off statements (exec.c) ---------------------------------------- */

/* The text of the first column of a one-row result, malloc'd into *out.
 * Returns 0, RL_ERR_NOTFOUND (no row: "could not <what>: no such run"),
 * RL_ERR_NOMEM or the statement's error. */
int db_one_text(struct rl_db *db, const char *sql, int nparams,
                const char *const *params, const char *what, char **out,
                char *errstr, size_t errstr_size);

/* An operator's write: one statement; *rows (may be NULL) receives the
 * rows it touched. Returns 0 or the error, errstr "could not <what>: ...". */
int db_write(struct rl_db *db, const char *sql, int nparams,
             const char *const *params, const char *what, int *rows,
             char *errstr, size_t errstr_size);

/* Entry points only tests call, defined in conn.c and exec.c and declared
 * for the tests in tests/support/rltest_db.h (keep the two alike). */
int rl_db_ping(struct rl_db *db, char *errstr, size_t errstr_size);
int rl_db_exec(struct rl_db *db, const char *sql, int nparams,
               const char *const *params, char *value, size_t value_size,
               char *errstr, size_t errstr_size);

#endif /* RL_DB_INT_H */
