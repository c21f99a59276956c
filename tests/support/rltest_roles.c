#include "rltest_roles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/err.h"
#include "rltest_db.h"

/* Grants by membership, as docs/deploying.md tells an operator to: the
 * login itself holds nothing. A DO block takes no parameters, so the
 * server quotes the name (format %I) into the statement that is run. A
 * concurrent test creating the same login is not an error
 * (duplicate_object, or unique_violation when both insert at once). */
static const char create_login[] =
    "SELECT format('DO $login$ BEGIN CREATE ROLE %I LOGIN; "
    "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; "
    "END $login$', $1::text)";
static const char grant_role[] =
    "SELECT format('GRANT %I TO %I', $1::text, $2::text)";

static const struct {
    const char *component;
    const char *roles[2];
} memberships[] = {
    {"worker", {"runledger_worker", NULL}},
    {"relay", {"runledger_relay", NULL}},
    {"console", {"runledger_console", NULL}},
    {"readonly", {"runledger_readonly", NULL}},
    {"worker_relay", {"runledger_worker", "runledger_relay"}},
};

int
rltest_roles_enabled(void)
{
    const char *v = getenv("RL_TEST_DB_ROLES");

    return v && strcmp(v, "1") == 0;
}

int
rltest_role_url(const char *admin_url, const char *url, const char *component,
                char *out, size_t out_size, char *errstr, size_t errstr_size)
{
    char login[64], sql[512];
    const char *params[1] = {login};
    struct rl_db *db;
    size_t k;
    int rc = 0;

    for (k = 0; k < sizeof(memberships) / sizeof(memberships[0]); k++) {
        if (strcmp(memberships[k].component, component) == 0)
            break;
    }
    if (k == sizeof(memberships) / sizeof(memberships[0])) {
        rl_set_err(errstr, errstr_size, "no database role for component %s",
                   component);
        return -1;
    }
    snprintf(login, sizeof(login), "rl_test_%s", component);
    db = rl_db_connect(admin_url, errstr, errstr_size);
    if (!db)
        return -1;
    if (rl_db_exec(db, create_login, 1, params, sql, sizeof(sql), errstr,
                   errstr_size) != 1 ||
        rl_db_exec(db, sql, 0, NULL, NULL, 0, errstr, errstr_size) < 0)
        rc = -1;
    for (int i = 0; rc == 0 && i < 2 && memberships[k].roles[i]; i++) {
        const char *grant[2] = {memberships[k].roles[i], login};

        if (rl_db_exec(db, grant_role, 2, grant, sql, sizeof(sql), errstr,
                       errstr_size) != 1 ||
            rl_db_exec(db, sql, 0, NULL, NULL, 0, errstr, errstr_size) < 0)
            rc = -1;
    }
    rl_db_destroy(db);
    if (rc != 0)
        return -1;
    if ((size_t)snprintf(out, out_size, "%s%cuser=%s", url,
                         strchr(url, '?') ? '&' : '?', login) >= out_size) {
        rl_set_err(errstr, errstr_size, "database url too long");
        return -1;
    }
    return 0;
}
