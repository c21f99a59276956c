#ifndef RL_CLI_HELPERS_H
#define RL_CLI_HELPERS_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "rl/db.h"

/* Helpers the operator subcommands share, so that every command reports
 * bad usage and maps errors to exit codes the same way. */

/* Prints "runledger <command>: <message> (see runledger <command> --help)"
 * on stderr and returns RL_EXIT_USAGE. */
int rl_cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Maps an rl_err to the documented exit code: 0 ok, RL_ERR_NOTFOUND and
 * RL_ERR_CONFLICT 3 (not found, or refused by the run's state),
 * RL_ERR_INVALID 2 (bad input), anything else 1. */
int rl_cli_exit_code(int err);

/* Connects to the ledger named by the configuration (DATABASE_URL).
 * Returns the connection, or NULL with errstr set and *rc the exit code
 * (2: bad configuration, 1: PostgreSQL unreachable). */
struct rl_db *rl_cli_open_ledger(char *errstr, size_t errstr_size, int *rc);

/* A JSON member as display text: a string as is, a number as an integer
 * (written into buf), anything else (absent, null) as missing. */
const char *rl_cli_json_text(const cJSON *obj, const char *name,
                             const char *missing, char *buf, size_t size);

#endif /* RL_CLI_HELPERS_H */
