/* Invariant: every grant and revoke of a right in the console or over a
 * tenant's proposals leaves an audit row naming who made it, written in
 * the statement that makes the change: `users add` (add_user, also when
 * a revoked user is added again), `users revoke` (revoke_user),
 * `approvers add` (add_approver) and `approvers remove`
 * (remove_approver, one row per approver row removed). A refused change
 * (an active user added again, an approver already there or absent)
 * writes none. */
#include <string.h>

#include "rl/db_approval.h"
#include "rl/db_conn.h"
#include "rl/db_console.h"
#include "rl/err.h"
#include "rltest.h"
#include "test_db_fixture.h"

static int64_t
audit_rows(struct rl_db *db, const char *action)
{
    return fixture_int(db, "SELECT count(*) FROM audit WHERE action = $1",
                       action);
}

static int64_t
audit_by(struct rl_db *db, const char *action, const char *actor_detail)
{
    return fixture_int(db,
                       "SELECT count(*) FROM audit"
                       " WHERE action || ' ' || actor || ' ' || detail = $1",
                       actor_detail ? actor_detail : action);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    const char sum[] =
        "0000000000000000000000000000000000000000000000000000000000000000";
    char errstr[512];
    int added = 0;

    RL_REQUIRE(rl_db_console_user_add(db, "bob", "approver", sum, NULL, "carol",
                                      errstr, sizeof(errstr)) == 0);
    RL_CHECK(audit_rows(db, "add_user") == 1);
    RL_CHECK(audit_by(db, "add_user", "add_user carol bob as approver") == 1);
    RL_CHECK(fixture_int(db,
                         "SELECT count(*) FROM audit WHERE action = $1"
                         " AND via = 'cli'",
                         "add_user") == 1);

    /* An active user is not added twice, nor audited twice. */
    RL_CHECK(rl_db_console_user_add(db, "bob", "operator", sum, NULL, "carol",
                                    errstr, sizeof(errstr)) == RL_ERR_CONFLICT);
    RL_CHECK(audit_rows(db, "add_user") == 1);

    RL_REQUIRE(rl_db_console_user_revoke(db, "bob", "dave", errstr,
                                         sizeof(errstr)) == 0);
    RL_CHECK(audit_by(db, "revoke_user", "revoke_user dave bob") == 1);
    RL_REQUIRE(rl_db_console_user_add(db, "bob", "operator", sum, NULL, "erin",
                                      errstr, sizeof(errstr)) == 0);
    RL_CHECK(audit_by(db, "add_user", "add_user erin bob as operator") == 1);
    RL_CHECK(audit_rows(db, "add_user") == 2);

    RL_REQUIRE(rl_db_approver_add(db, "workspace-acme", "bob", NULL, "carol",
                                  &added, errstr, sizeof(errstr)) == 0);
    RL_CHECK(added == 1);
    RL_CHECK(audit_by(db, "add_approver",
                      "add_approver carol bob of tenant workspace-acme") == 1);
    RL_REQUIRE(rl_db_approver_add(db, "workspace-acme", "bob", "slack", "carol",
                                  &added, errstr, sizeof(errstr)) == 0);
    RL_CHECK(audit_by(db, "add_approver",
                      "add_approver carol bob of tenant workspace-acme for "
                      "channel slack") == 1);
    /* Already an approver: nothing changes, nothing is recorded. */
    RL_REQUIRE(rl_db_approver_add(db, "workspace-acme", "bob", NULL, "carol",
                                  &added, errstr, sizeof(errstr)) == 0);
    RL_CHECK(added == 0);
    RL_CHECK(audit_rows(db, "add_approver") == 2);

    /* Without a channel, both rows go: one audit row each. */
    RL_REQUIRE(rl_db_approver_remove(db, "workspace-acme", "bob", NULL, "dave",
                                     errstr, sizeof(errstr)) == 0);
    RL_CHECK(audit_rows(db, "remove_approver") == 2);
    RL_CHECK(audit_by(db, "remove_approver",
                      "remove_approver dave bob of tenant workspace-acme "
                      "for channel slack") == 1);
    RL_CHECK(rl_db_approver_remove(db, "workspace-acme", "bob", NULL, "dave",
                                   errstr, sizeof(errstr)) == RL_ERR_NOTFOUND);
    RL_CHECK(audit_rows(db, "remove_approver") == 2);

    fixture_drop(db, schema);
    RL_TEST_END();
}
