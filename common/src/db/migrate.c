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
static const char restamp_migration[] =
    "UPDATE schema_migrations SET checksum = $3"
    " WHERE name = $1 AND checksum = $2";

/* Checksums an applied migration may hold from an earlier text of its file
 * that differs from the current one in comments only: the database holds
 * what the current text would create, so it needs nothing but the new
 * checksum, which migrate records in place of the old one. A file whose
 * statements changed never belongs here; that change is a new migration. */
static const struct superseded_checksum {
    const char *name;
    const char *checksum;
} superseded_checksums[] = {
    /* Header comments that cited files outside the repository and ticket
     * numbers. */
    {"001_init.sql",
     "812a088b84f5b8dc4c7a7e123dc7c785fc0c7882e913ef24189d5db54f2d0b3a"},
    {"004_budgets.sql",
     "8e608a9b94b133d7c4513cf3cf210b9b38c68391c74c5bba16ffadd4b0e8b40a"},
    {"006_approval.sql",
     "e62373f8ae7d3229bcc7c7ae3829f45af2b91865ea648019207f3a18c301c5cf"},
};

/* What schema_migrations says of a migration of this build. */
enum applied_state {
    NOT_APPLIED,
    APPLIED,           /* with this build's checksum */
    APPLIED_SUPERSEDED /* with a superseded checksum of its file */
};

static int
is_superseded(const char *name, const char *checksum)
{
    for (size_t k = 0;
         k < sizeof(superseded_checksums) / sizeof(superseded_checksums[0]);
         k++) {
        if (strcmp(superseded_checksums[k].name, name) == 0 &&
            strcmp(superseded_checksums[k].checksum, checksum) == 0)
            return 1;
    }
    return 0;
}

/* Replaces each superseded checksum by this build's, in one transaction
 * (the caller holds the migration lock). Each UPDATE names the checksum it
 * replaces, so a row another build changed meanwhile is left alone. */
static int
restamp_migrations(struct rl_db *db, const char *states,
                   char (*stored)[RL_HEX_SIZE], char (*checksums)[RL_HEX_SIZE],
                   char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;

    res = db_exec_simple(db, "BEGIN", 0, NULL, &err, errstr, errstr_size,
                         "record superseded checksums");
    if (!res)
        return err;
    PQclear(res);
    for (size_t i = 0; i < rl_migrations_count; i++) {
        const char *params[3] = {rl_migrations[i].name, stored[i],
                                 checksums[i]};

        if (states[i] != APPLIED_SUPERSEDED)
            continue;
        res = db_exec_simple(db, restamp_migration, 3, params, &err, errstr,
                             errstr_size, "record superseded checksums");
        if (!res)
            goto rollback;
        PQclear(res);
    }
    res = db_exec_simple(db, "COMMIT", 0, NULL, &err, errstr, errstr_size,
                         "record superseded checksums");
    if (!res)
        return err;
    PQclear(res);
    for (size_t i = 0; i < rl_migrations_count; i++) {
        if (states[i] == APPLIED_SUPERSEDED)
            rl_log_info(NULL,
                        "migration %s: checksum %s superseded by %s (its "
                        "file changed in comments only)",
                        rl_migrations[i].name, stored[i], checksums[i]);
    }
    return 0;

rollback:
    PQclear(PQexecParams(db->conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0));
    return err;
}

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
    char(*stored)[RL_HEX_SIZE] = NULL;
    char *states = NULL;
    int restamp = 0;
    PGresult *res = NULL;
    int locked = 0;
    int count = 0;
    int err = RL_ERR_DB;

    if (applied)
        *applied = 0;
    snprintf(key, sizeof(key), "%" PRId64, RL_DB_MIGRATE_LOCK_KEY);

    checksums = calloc(rl_migrations_count + 1, sizeof(*checksums));
    stored = calloc(rl_migrations_count + 1, sizeof(*stored));
    states = calloc(rl_migrations_count + 1, 1);
    if (!checksums || !stored || !states) {
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
        snprintf(stored[i], sizeof(stored[i]), "%s", sum);
        if (strcmp(checksums[i], sum) != 0 && is_superseded(name, sum)) {
            states[i] = APPLIED_SUPERSEDED;
            restamp = 1;
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
        states[i] = APPLIED;
    }
    PQclear(res);
    res = NULL;

    /* Only once every applied migration checked out: a refusal changes
     * nothing. */
    if (restamp) {
        err = restamp_migrations(db, states, stored, checksums, errstr,
                                 errstr_size);
        if (err != 0)
            goto done;
    }
    for (size_t i = 0; i < rl_migrations_count; i++) {
        if (states[i] != NOT_APPLIED)
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
    free(stored);
    free(states);
    if (applied)
        *applied = count;
    return err;
}
