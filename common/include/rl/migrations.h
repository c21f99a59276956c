#ifndef RL_MIGRATIONS_H
#define RL_MIGRATIONS_H

#include <stddef.h>

/* One file compiled from schema/: a forward-only migration
 * (schema/NNN_<what>.sql) or a repeatable definition of one function, view
 * or trigger (schema/functions/<name>.sql). */
struct rl_migration {
    const char *name; /* file name, e.g. "001_init.sql" */
    const char *sql;  /* its full text */
};

/* All migrations in name order; generated at build time. */
extern const struct rl_migration rl_migrations[];
extern const size_t rl_migrations_count;

/* All schema/functions/ files in name order; generated at build time.
 * rl_db_migrate re-creates each one whose text changed since it was last
 * applied, after the migrations. */
extern const struct rl_migration rl_schema_functions[];
extern const size_t rl_schema_functions_count;

/* Writes the checksum a ledger records for migration m into out (at least
 * 65 bytes): the SHA-256 (lowercase hex) of its text, or, for a released
 * file whose function definitions moved to schema/functions/, the
 * checksum its release recorded. Returns 0, or with errstr set
 * RL_ERR_CHECKSUM (m's text is not the one this build pins for it) or
 * RL_ERR_NOMEM (it cannot be hashed). */
int rl_migration_checksum(const struct rl_migration *m, char *out, size_t size,
                          char *errstr, size_t errstr_size);

#endif /* RL_MIGRATIONS_H */
