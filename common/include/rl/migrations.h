#ifndef RL_MIGRATIONS_H
#define RL_MIGRATIONS_H

#include <stddef.h>

/* One forward-only migration compiled from schema/NNN_<what>.sql. */
struct rl_migration {
    const char *name; /* file name, e.g. "001_init.sql" */
    const char *sql;  /* its full text */
};

/* All migrations in name order; generated at build time. */
extern const struct rl_migration rl_migrations[];
extern const size_t rl_migrations_count;

#endif /* RL_MIGRATIONS_H */
