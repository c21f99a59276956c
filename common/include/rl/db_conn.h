#ifndef RL_DB_CONN_H
#define RL_DB_CONN_H

#include <stddef.h>

/* The ledger in PostgreSQL: opening, checking and closing a connection
 * of the service or of a tool (common/src/db/conn.c). Each concern of the
 * ledger has its own header: rl/db_migrate.h, rl/db_claim.h,
 * rl/db_lease.h, rl/db_dispatch.h, rl/db_complete.h, rl/db_outbox.h,
 * rl/db_gauges.h, rl/db_model_limits.h, and the operator's rl/db_runs.h,
 * rl/db_limits.h, rl/db_budgets.h, rl/db_receive.h, rl/db_approval.h and
 * rl/db_purge.h.
 *
 * Functions return 0 (or a count) on success, or a negative enum rl_err and
 * fill errstr with a lowercase sentence such as
 * "could not claim run <id>: <server message>". Messages never carry the
 * password of the connection string.
 *
 * @locality a struct rl_db is one PostgreSQL connection: use it from one
 * thread at a time. Open one per thread (they are cheap to hold, not to
 * open). */

struct rl_db;

/* Length of "YYYY-MM-DDTHH:MM:SS.ffffff+00:00" plus NUL: a timestamp as
 * the ledger prints it. */
#define RL_DB_TIME_SIZE 33

/* Longest schema name rl_db_connect_schema accepts. */
#define RL_DB_SCHEMA_MAX 63

/* Opens a connection. conninfo is a libpq URL or key=value string; NULL
 * means the environment variable DATABASE_URL, or when that is unset or
 * empty, libpq's own PG* variables and defaults. Returns a new connection
 * (free with rl_db_destroy) or NULL with errstr set. */
struct rl_db *rl_db_connect(const char *conninfo, char *errstr,
                            size_t errstr_size);

/* As rl_db_connect, and sets the session's search_path to schema (1 to
 * RL_DB_SCHEMA_MAX of [a-z0-9_], not starting with a digit), so one
 * database can hold several independent ledgers (tests use one each).
 * rl_db_migrate creates the schema if it is missing. schema NULL is
 * rl_db_connect. */
struct rl_db *rl_db_connect_schema(const char *conninfo, const char *schema,
                                   char *errstr, size_t errstr_size);

/* As rl_db_connect_schema, and says whether another attempt can succeed
 * (`runledger migrate --wait` retries only those that can). Returns 0 with
 * *out set (free with rl_db_destroy), or with *out NULL and errstr set:
 * RL_ERR_INVALID when retrying the same string cannot help until the
 * string, the server's users, databases or TLS change (authentication
 * failed or no pg_hba.conf entry, the role or database does not exist,
 * TLS required and not offered or the server's certificate not trusted,
 * a malformed string or bad parameter); RL_ERR_NOMEM; RL_ERR_DB when it
 * may (refused, timed out, host not found, the server starting up or
 * full, or a server message in a language other than English). */
int rl_db_connect_try(struct rl_db **out, const char *conninfo,
                      const char *schema, char *errstr, size_t errstr_size);

struct rl_config;

/* What a connection of the service is for: its application_name
 * (runledger-<role>, in pg_stat_activity) and its timeouts. */
enum rl_db_role {
    RL_DB_ROLE_LEDGER,    /* claims, dispatches, the sweeper */
    RL_DB_ROLE_RENEW,     /* lease renewals */
    RL_DB_ROLE_COMPLETER, /* completions and their outbox rows */
    RL_DB_ROLE_RELAY,     /* the outbox relay's batches */
    RL_DB_ROLE_VACUUM,    /* the relay's vacuums of the outbox */
    RL_DB_ROLE_HEALTH,    /* /readyz checks and gauges */
    RL_DB_ROLE_BATCHER,   /* provider batches: intents, uploads, results */
    RL_DB_ROLE_CONSOLE    /* the web console's pages (short timeouts) */
};

/* Opens a service connection to cfg->database_url (as rl_db_connect) for
 * role. The session gets statement_timeout, lock_timeout and
 * idle_in_transaction_session_timeout from cfg (RUNLEDGER_PG_*_MS; the
 * renewal session at most a third and a sixth of the lease, the console's
 * at most 5 s and 2 s, the vacuum session no statement_timeout, the relay's no
 * idle-in-transaction timeout), libpq's TCP keepalives and tcp_user_timeout,
 * and application_name runledger-<role>. Every connection parameter the
 * connection string sets wins, and its `options` are applied after these
 * settings, so its own -c statement_timeout=... wins as well. Returns a
 * new connection (rl_db_destroy) or NULL with errstr set. */
struct rl_db *rl_db_connect_role(const struct rl_config *cfg,
                                 enum rl_db_role role, char *errstr,
                                 size_t errstr_size);

/* Closes the connection and frees db; NULL is accepted. An open relay
 * transaction is rolled back by the server. */
void rl_db_destroy(struct rl_db *db);

#endif /* RL_DB_CONN_H */
