#ifndef RL_TEST_ROLES_H
#define RL_TEST_ROLES_H

#include <stddef.h>

/* Login users in the ledger's component roles (docs/deploying.md,
 * Database roles), for tests that run a component with only the
 * privileges its role grants. `runledger migrate` creates the group roles;
 * these are the login users a deployment would grant them to. */

/* Largest URL rltest_role_url writes, NUL included. */
#define RLTEST_ROLE_URL_SIZE 1024

/* Creates, once per cluster, the login user rl_test_<component> (no
 * password: the harness's PostgreSQL trusts loopback) as a member of
 * runledger_<component>, where component is "worker", "relay",
 * "console" or "readonly"; "worker_relay" is a member of both
 * runledger_worker and runledger_relay (`runledger consume` with its
 * relay thread). admin_url connects as a user that may create roles.
 * Writes to out url with the user replaced by the login (a `user` query
 * parameter, which libpq applies after the URI's own). Returns 0, or -1
 * with errstr set. */
int rltest_role_url(const char *admin_url, const char *url,
                    const char *component, char *out, size_t out_size,
                    char *errstr, size_t errstr_size);

/* 1 when RL_TEST_DB_ROLES is set to 1: the harness (tests/e2e/e2e.c,
 * tests/console/harness.py) then starts each component with a login of
 * its role instead of the migrating user. */
int rltest_roles_enabled(void);

#endif /* RL_TEST_ROLES_H */
