#ifndef RL_DB_MIGRATE_H
#define RL_DB_MIGRATE_H

#include <stddef.h>
#include <stdint.h>

/* Migrations of the ledger (common/src/db/migrate.c). Conventions:
 * rl/db_conn.h. */

struct rl_db;

/* Key of the session advisory lock that serialises `runledger migrate`
 * across processes: the bytes "runledgr" as a big-endian int64. */
#define RL_DB_MIGRATE_LOCK_KEY INT64_C(0x72756e6c65646772)

/* Applies the migrations compiled into this build (rl_migrations[], from
 * schema/NNN_*.sql, in name order). Creates schema_migrations(name,
 * checksum, applied_at) if missing, holds the advisory lock
 * RL_DB_MIGRATE_LOCK_KEY for the whole call, and applies each pending file
 * in its own transaction. Before anything else it prepares the database
 * roles (runledger_owner, _worker, _console, _relay, _readonly: created
 * where missing, or an error when they are missing and the user may not
 * create roles) and works as runledger_owner, which owns every object
 * once it returns; the session's role is reset before it returns.
 * Running it again is a no-op.
 * Sets *applied (may be NULL) to the number applied by this call.
 * An applied migration whose stored SHA-256 is a superseded one of its
 * file (an earlier text that differs in comments only, listed in
 * common/src/db/migrate.c) gets this build's checksum, logged at info.
 * Returns 0, RL_ERR_CHECKSUM when an applied migration's SHA-256 is
 * neither this build's nor a superseded one (errstr names the file;
 * nothing is changed or applied), or RL_ERR_DB. */
int rl_db_migrate(struct rl_db *db, int *applied, char *errstr,
                  size_t errstr_size);

#endif /* RL_DB_MIGRATE_H */
