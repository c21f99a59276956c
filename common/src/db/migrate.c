/* migrate.c: applying the migrations compiled into this build, once each,
 * under an advisory lock, each file checked against the SHA-256 recorded
 * when it was applied. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/err.h"
#include "rl/log.h"
#include "rl/migrations.h"

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

static int
apply_migration(struct rl_db *db, const struct rl_migration *m,
                const char *checksum, char *errstr, size_t errstr_size)
{
    const char *params[2] = {m->name, checksum};
    PGresult *res;
    char what[200];
    int err = RL_ERR_DB;

    snprintf(what, sizeof(what), "apply migration %s", m->name);
    res = db_exec_simple(db, "BEGIN", 0, NULL, &err, errstr, errstr_size, what);
    if (!res)
        return err;
    PQclear(res);

    /* A migration is a script of many statements: the one place that runs
     * SQL text through PQexec. It is compiled in, never user input. */
    res = PQexec(db->conn, m->sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK &&
        PQresultStatus(res) != PGRES_TUPLES_OK) {
        db_fail_msg(db, res, errstr, errstr_size, "%s", what);
        PQclear(res);
        goto rollback;
    }
    PQclear(res);

    res = db_exec_simple(db, record_migration, 2, params, &err, errstr,
                         errstr_size, what);
    if (!res)
        goto rollback;
    PQclear(res);

    res =
        db_exec_simple(db, "COMMIT", 0, NULL, &err, errstr, errstr_size, what);
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
    res = db_exec_simple(db, lock_migrations, 1, key_param, &err, errstr,
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
            db_fail_msg(db, NULL, errstr, errstr_size, "create schema %s",
                        db->schema);
            goto done;
        }
        /* An identifier cannot be a parameter; it was validated to
         * [a-z0-9_] and quoted. */
        snprintf(sql, sizeof(sql), "CREATE SCHEMA IF NOT EXISTS %s", ident);
        PQfreemem(ident);
        res = db_exec_simple(db, sql, 0, NULL, &err, errstr, errstr_size,
                             "create the ledger schema");
        if (!res)
            goto done;
        PQclear(res);
    }

    res = db_exec_simple(db, create_schema_migrations, 0, NULL, &err, errstr,
                         errstr_size, "create schema_migrations");
    if (!res)
        goto done;
    PQclear(res);

    res = db_exec_simple(db, list_applied_migrations, 0, NULL, &err, errstr,
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
