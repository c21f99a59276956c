/* migrate.c: applying the migrations compiled into this build, once each,
 * under an advisory lock, each file checked against the SHA-256 recorded
 * when it was applied; then re-creating the schema/functions/ files whose
 * text changed since they were last applied. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_migrate.h"
#include "rl/err.h"
#include "rl/log.h"
#include "rl/migrations.h"
#include "rl/runid.h"

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
static const char create_schema_functions[] =
    "CREATE TABLE IF NOT EXISTS schema_functions ("
    "  name text PRIMARY KEY,"
    "  checksum text NOT NULL,"
    "  applied_at timestamptz NOT NULL DEFAULT now())";
static const char list_applied_functions[] =
    "SELECT name, checksum FROM schema_functions";
static const char record_function[] =
    "INSERT INTO schema_functions (name, checksum) VALUES ($1, $2)"
    " ON CONFLICT (name) DO UPDATE"
    " SET checksum = EXCLUDED.checksum, applied_at = now()";
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

/* Migrations released with their function definitions inline, whose
 * definitions now live in schema/functions/. A ledger keeps the checksum
 * the release recorded, and this build records that same checksum on a
 * fresh ledger, so a released binary still accepts every file it knows
 * during a rolling upgrade or a rollback. `text` pins this build's bytes:
 * such a file can change no further. */
static const struct released_checksum {
    const char *name;
    const char *released; /* what the ledger records */
    const char *text;     /* SHA-256 of this build's text of the file */
} released_checksums[] = {
    {"001_init.sql",
     "ca1d41892fc0ef92fd69c4df8725c0d9f53378fdc3c9536580abfdf779c56901",
     "029ef402699533a2bc3e9901f8fb1252795a8d865c409cc7f7e5766190525fea"},
    {"004_budgets.sql",
     "48eb56293f72864481ee7168fa2c00c4a8fd771d307b60c362438dd5e45fe8c0",
     "5ddee9f97144adee73f710a0e454ecf031b432a637a885e9d1381e724938c77e"},
    {"006_approval.sql",
     "2fdc3e8e41c88073e79292123b53a53675a14ea6878b19dada4495fd61d1191b",
     "a2d29402213ed49a9c2c393a5b3824e52880f47ab2f4c02307616f8cc4acda47"},
    {"007_batches.sql",
     "d61f15f1ee104c016e8a3798311d7580596a055e0282938b1147bcd2281e02fb",
     "211bc30b985ef7fafe7e18c24d96d8d337b7b8cd9b00e8a697431befa521a6e0"},
    {"008_claim_on_insert.sql",
     "4f57a5a7ced07d94bf4054301cc2c869a29c0eef6d046e1447a24b8c1fd8f6f4",
     "fac464b872961eb21357b8366b4526be46c6ec3f363fe97e0978dcee6a639308"},
    {"009_outbox_wakeup.sql",
     "0cee99b2010e320275f1f6087c45d625e522d7870fd41159c45cdf317cc940aa",
     "4557546b1b22d87d1b224239a6da3ce6cf3a7ed9a5f483113a2ee8b50cc4a148"},
    {"010_leases_by_run_id.sql",
     "55d72ce5704e59d3796e5a1570b898fbc4944e7af861adc4a507f03c034c4bab",
     "64121741b29631831c4816486deca9a6a8f05f09f72dbfc97bedf40f3d61e6fc"},
    {"014_dispatch_requires_live_lease.sql",
     "9233b720e21a7340c39c448a5507a834724efb80bb5c2ef91cff72a4adb2d886",
     "969806288cd314ace86bb0ea0507e7b309036b20bd7e78f8c165c342c1b36883"},
    {"015_cancel.sql",
     "7760c208a3282065f5e8534ad4de6c21c52b2e8f3c890cc7f2e0d615a8c5bdeb",
     "c274510368ebf3ac685367952e5fd1462d6d9a305686b3ef56541838d0a0198c"},
    {"017_traceparent.sql",
     "8c1d05ee78d664490894baedcdb33d98e7e549f0e4818cb65c628be7d5ea8d2b",
     "fe7610721d9838f5bcfdb7e2513f10f3763c2ec12bae30f8e08f7e56e9fb8f22"},
    {"018_fair_claims.sql",
     "760cab6982989cb3a649ac23e5fdbaad453a7388dc621a63888ccacb6df0cb04",
     "89aea86f03ae3a01b2833e7020efc0d8fd50bbf89ef3d4c2d30ed571e128c166"},
    {"019_model_rate_limits.sql",
     "373bc8b0e2735e1b06e9929646cd669821dbd3bf5a1b8ab29690d01f5be1fac6",
     "e87d3c3536f1f7965b14ef35142ee782deaecac4e0e3971aeb00e63608818476"},
    {"020_claim_new_runs_at_insert.sql",
     "9b37d8784a877cfa0e23fa0a1679495a8ed41b733508d0b404b12cbc4f950690",
     "d13de00959753ad3c3132fc981e0e41e7ca9f585424fa8536aeedf48f4d5fa7a"},
    {"021_rate_limit_queue.sql",
     "dd03be2eb5d05fb342d106315634a6028abde7297341265e460032e558ef4cd7",
     "8e920f4181a0acf059b336f69cef5043da9e37ec25a3e4822c8570794b346271"},
    {"022_cached_plans.sql",
     "0810ae747c487e7ca6acad22dc929af910eb7874518c388856d8ac1f1f05267c",
     "a975becbe8f7c456fb162da18017eee32c3d43e7dbf921d6f7b68d4c9a8eec89"},
    {"024_cheap_row_checks.sql",
     "1101dea70a326ebbe0c6e7aa47cf73a7f1ebe7cfe906d61bf42d5eaca6f6550a",
     "bf77d738de82d080d9d52e48d771e649427f882fd45aeb341ec05f77c1416394"},
    {"026_envelope_by_reference.sql",
     "abbfac05bc7efebca080eb5369000391d91c6b6d423ae8dca03d40fc98d0e9df",
     "57db8eb068335b99b44d9624f833ddfa8f81c7653583239dde98554ba3b7c926"},
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

static int exec_script(struct rl_db *db, const char *sql, const char *what,
                       char *errstr, size_t errstr_size);

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

    /* A migration whose definitions moved to schema/functions/ may hold
     * comments only: an empty query is applied like any other. */
    if (exec_script(db, m->sql, what, errstr, errstr_size) != 0)
        goto rollback;

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

static const struct released_checksum *
find_released(const char *name)
{
    for (size_t k = 0;
         k < sizeof(released_checksums) / sizeof(released_checksums[0]); k++) {
        if (strcmp(released_checksums[k].name, name) == 0)
            return &released_checksums[k];
    }
    return NULL;
}

int
rl_migration_checksum(const struct rl_migration *m, char *out, size_t size,
                      char *errstr, size_t errstr_size)
{
    char sum[RL_HEX_SIZE];
    const struct released_checksum *rel = find_released(m->name);

    if (size < RL_HEX_SIZE || rl_sha256_hex(m->sql, strlen(m->sql), sum) != 0) {
        rl_set_err(errstr, errstr_size, "could not migrate: could not hash %s",
                   m->name);
        return RL_ERR_NOMEM;
    }
    if (rel && strcmp(rel->text, sum) != 0) {
        rl_set_err(errstr, errstr_size,
                   "migration %s differs from the text this build "
                   "pins (checksum %s, pinned %s): a released migration "
                   "never changes; add a new migration instead",
                   m->name, sum, rel->text);
        return RL_ERR_CHECKSUM;
    }
    snprintf(out, size, "%s", rel ? rel->released : sum);
    return 0;
}

/* What a schema/functions/ file defines, in the order they are created:
 * functions first (their bodies unchecked until all exist), then views
 * (which parse the functions they call), then triggers (which name their
 * function). */
enum object_kind { KIND_FUNCTION, KIND_VIEW, KIND_TRIGGER, KIND_UNKNOWN };

static int
starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The kind named by the file's first statement that is not a DROP (a file
 * may first drop an old signature of its function). Comment lines start
 * with "--"; statements start at the beginning of a line. */
static enum object_kind
object_kind(const char *sql)
{
    const char *line = sql;
    int in_drop = 0;

    while (*line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);

        if (in_drop) {
            if (memchr(line, ';', len))
                in_drop = 0;
        } else if (starts_with(line, "CREATE OR REPLACE FUNCTION ")) {
            return KIND_FUNCTION;
        } else if (starts_with(line, "CREATE OR REPLACE VIEW ")) {
            return KIND_VIEW;
        } else if (starts_with(line, "CREATE OR REPLACE TRIGGER ")) {
            return KIND_TRIGGER;
        } else if (starts_with(line, "DROP ")) {
            in_drop = memchr(line, ';', len) == NULL;
        } else if (len > 0 && !starts_with(line, "--")) {
            return KIND_UNKNOWN;
        }
        if (!end)
            break;
        line = end + 1;
    }
    return KIND_UNKNOWN;
}

static int
exec_script(struct rl_db *db, const char *sql, const char *what, char *errstr,
            size_t errstr_size)
{
    /* Compiled-in schema text, never user input: the one kind of SQL run
     * through PQexec, as a script of several statements. */
    PGresult *res = PQexec(db->conn, sql);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK &&
        st != PGRES_EMPTY_QUERY) {
        db_fail_msg(db, res, errstr, errstr_size, "%s", what);
        PQclear(res);
        return RL_ERR_DB;
    }
    PQclear(res);
    return 0;
}

/* Re-creates, in one transaction, every schema/functions/ file whose text
 * differs from the one recorded in schema_functions (all of them on a
 * ledger that has none recorded), and records the new checksums. Bodies
 * are created with check_function_bodies off, so a function may call one
 * created after it, then created once more with the check on, so a body
 * that does not compile is refused here and not at its first call. The
 * caller holds the migration lock. */
static int
apply_functions(struct rl_db *db, int *applied, char *errstr,
                size_t errstr_size)
{
    size_t n = rl_schema_functions_count;
    char(*sums)[RL_HEX_SIZE] = NULL;
    char *changed = NULL;
    unsigned char *kinds = NULL;
    PGresult *res = NULL;
    int err = RL_ERR_DB;
    int count = 0;
    int in_tx = 0;

    *applied = 0;
    sums = calloc(n + 1, sizeof(*sums));
    changed = calloc(n + 1, 1);
    kinds = calloc(n + 1, 1);
    if (!sums || !changed || !kinds) {
        rl_set_err(errstr, errstr_size, "could not migrate: out of memory");
        err = RL_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const struct rl_migration *f = &rl_schema_functions[i];

        kinds[i] = (unsigned char)object_kind(f->sql);
        if (kinds[i] == KIND_UNKNOWN) {
            rl_set_err(errstr, errstr_size,
                       "could not migrate: schema/functions/%s defines no "
                       "function, view or trigger (its first statement must "
                       "be CREATE OR REPLACE FUNCTION, VIEW or TRIGGER, at "
                       "the start of a line, after any DROP)",
                       f->name);
            err = RL_ERR_INVALID;
            goto done;
        }
        if (rl_sha256_hex(f->sql, strlen(f->sql), sums[i]) != 0) {
            rl_set_err(errstr, errstr_size,
                       "could not migrate: could not hash %s", f->name);
            err = RL_ERR_NOMEM;
            goto done;
        }
        changed[i] = 1;
    }

    res = db_exec_simple(db, create_schema_functions, 0, NULL, &err, errstr,
                         errstr_size, "create schema_functions");
    if (!res)
        goto done;
    PQclear(res);
    res = db_exec_simple(db, list_applied_functions, 0, NULL, &err, errstr,
                         errstr_size, "read schema_functions");
    if (!res)
        goto done;
    for (int row = 0; row < PQntuples(res); row++) {
        const char *name = PQgetvalue(res, row, 0);
        const char *sum = PQgetvalue(res, row, 1);

        for (size_t i = 0; i < n; i++) {
            if (strcmp(rl_schema_functions[i].name, name) == 0 &&
                strcmp(sums[i], sum) == 0)
                changed[i] = 0;
        }
    }
    PQclear(res);
    res = NULL;
    for (size_t i = 0; i < n; i++)
        count += changed[i];
    if (count == 0) {
        err = 0;
        goto done;
    }

    res = db_exec_simple(db, "BEGIN", 0, NULL, &err, errstr, errstr_size,
                         "re-create schema functions");
    if (!res)
        goto done;
    PQclear(res);
    res = NULL;
    in_tx = 1;
    err = exec_script(db, "SET LOCAL check_function_bodies = off",
                      "re-create schema functions", errstr, errstr_size);
    if (err != 0)
        goto done;
    for (int kind = KIND_FUNCTION; kind <= KIND_TRIGGER; kind++) {
        for (size_t i = 0; i < n; i++) {
            const char *params[2] = {rl_schema_functions[i].name, sums[i]};
            char what[200];

            if (!changed[i] || kinds[i] != kind)
                continue;
            snprintf(what, sizeof(what), "apply schema/functions/%s",
                     rl_schema_functions[i].name);
            err = exec_script(db, rl_schema_functions[i].sql, what, errstr,
                              errstr_size);
            if (err != 0)
                goto done;
            res = db_exec_simple(db, record_function, 2, params, &err, errstr,
                                 errstr_size, what);
            if (!res)
                goto done;
            PQclear(res);
            res = NULL;
        }
    }
    err = exec_script(db, "SET LOCAL check_function_bodies = on",
                      "re-create schema functions", errstr, errstr_size);
    if (err != 0)
        goto done;
    for (size_t i = 0; i < n; i++) {
        char what[200];

        if (!changed[i] || kinds[i] != KIND_FUNCTION)
            continue;
        snprintf(what, sizeof(what), "check schema/functions/%s",
                 rl_schema_functions[i].name);
        err = exec_script(db, rl_schema_functions[i].sql, what, errstr,
                          errstr_size);
        if (err != 0)
            goto done;
    }
    res = db_exec_simple(db, "COMMIT", 0, NULL, &err, errstr, errstr_size,
                         "re-create schema functions");
    in_tx = 0;
    if (!res)
        goto done;
    PQclear(res);
    res = NULL;
    for (size_t i = 0; i < n; i++) {
        if (changed[i])
            rl_log_info(NULL, "applied schema/functions/%s",
                        rl_schema_functions[i].name);
    }
    *applied = count;
    err = 0;

done:
    PQclear(res);
    if (in_tx)
        PQclear(
            PQexecParams(db->conn, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0));
    free(sums);
    free(changed);
    free(kinds);
    return err;
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
    int functions = 0;
    PGresult *res = NULL;
    int locked = 0;
    int as_owner = 0;
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
        err = rl_migration_checksum(&rl_migrations[i], checksums[i],
                                    sizeof(checksums[i]), errstr, errstr_size);
        if (err != 0)
            goto done;
    }
    err = RL_ERR_DB;

    /* Two deployments starting at once must not both apply a file (nor
     * both create the schema). */
    res = db_exec_simple(db, lock_migrations, 1, key_param, &err, errstr,
                         errstr_size, "take the migration lock");
    if (!res)
        goto done;
    PQclear(res);
    res = NULL;
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
        res = NULL;
    }

    /* Each object is runledger_owner's, and the other roles get only
     * the grants the migrations give them (docs/deploying.md, Database
     * roles). */
    err = db_roles_prepare(db, errstr, errstr_size);
    if (err != 0)
        goto done;
    err = db_roles_act_as_owner(db, 1, errstr, errstr_size);
    if (err != 0)
        goto done;
    as_owner = 1;
    err = RL_ERR_DB;

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
    err = apply_functions(db, &functions, errstr, errstr_size);
    if (err != 0)
        goto done;
    if (functions > 0)
        rl_log_info(NULL, "re-created %d schema function file(s)", functions);

done:
    PQclear(res);
    if (as_owner) {
        char reset_err[256];

        /* The caller's session goes on as the user it connected as. */
        if (db_roles_act_as_owner(db, 0, reset_err, sizeof(reset_err)) != 0)
            rl_log_warn(NULL, "%s", reset_err);
    }
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
