#ifndef RL_CLI_HELPERS_H
#define RL_CLI_HELPERS_H

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stddef.h>

struct rl_config;
struct rl_db;

/* What the operator commands share, so that every command reports bad
 * usage, configuration and ledger errors, and maps them to exit codes,
 * the same way. `command` is the name the messages start with after
 * "runledger ", e.g. "budgets" or "runs show". */

/* Prints "runledger <command>: <message> (see runledger <command> --help)"
 * on stderr and returns RL_EXIT_USAGE. */
int rl_cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Maps an rl_err to the documented exit code: 0 ok, RL_ERR_NOTFOUND and
 * RL_ERR_CONFLICT 3 (not found, or refused by the run's state),
 * RL_ERR_INVALID 2 (bad input), anything else 1. */
int rl_cli_exit_code(int err);

/* Prints "runledger <command>: <errstr>" on stderr and returns the exit
 * code of err (rl_cli_exit_code). */
int rl_cli_error(const char *command, int err, const char *errstr);

/* The action of a `COMMAND ACTION [options]` command: argv[1], one of
 * actions (NULL-terminated), into *action. Returns -1 to go on, or the
 * exit code the command ends with: RL_EXIT_OK after printing usage on
 * stdout for -h or --help, RL_EXIT_USAGE after printing it on stderr for
 * a missing action or reporting an unknown one. */
int rl_cli_action(const char *command, const char *usage, int argc, char **argv,
                  const char *const *actions, const char **action);

/* How a command's options are parsed: the name its messages carry, the
 * text -h and --help print on stdout, and getopt_long's table (with
 * {"help", no_argument, NULL, 'h'}). A missing value or an unknown option
 * is reported as "bad option --x", or with name_errors as "--x needs a
 * value" and "unknown option --x". Without operands, an argument after
 * the options is reported as unexpected. */
struct rl_cli_opts {
    const char *command;
    const char *usage;
    const struct option *options;
    int name_errors;
    int operands;
};

/* Starts parsing the options of argv (argv[0] is the command's name and
 * skipped); getopt's own messages are off. */
void rl_cli_opts_begin(void);

/* The next option of argv as getopt_long returns it (optarg set), 0 when
 * none is left (argv[optind] is the first operand, if operands are
 * taken), or -1 when the
 * command ends here with exit code *rc: RL_EXIT_OK after printing the
 * usage for -h or --help, RL_EXIT_USAGE after reporting a bad option. */
int rl_cli_next_opt(const struct rl_cli_opts *opts, int argc, char **argv,
                    int *rc);

/* Loads the configuration from the environment into *cfg (the caller
 * destroys it with rl_config_destroy). Returns RL_EXIT_OK, or
 * RL_EXIT_USAGE with the reason printed as rl_cli_error does. */
int rl_cli_config_load(const char *command, struct rl_config **cfg);

/* Sets the log level the configuration names (info when it names none
 * the logger knows). */
void rl_cli_log_init(const struct rl_config *cfg);

/* Connects to the ledger the configuration names (DATABASE_URL) and sets
 * *db (the caller destroys it with rl_db_destroy). Returns RL_EXIT_OK;
 * else *db is NULL, the reason is printed as rl_cli_error does, and the
 * exit code is RL_EXIT_USAGE (bad configuration) or RL_EXIT_FAILURE
 * (PostgreSQL unreachable or refused the connection). */
int rl_cli_db_open(const char *command, struct rl_db **db);

/* A JSON member as display text: a string as is, a number as an integer
 * and any other value but null as compact JSON (both written into buf,
 * cut to size), a boolean as "yes" or "no", an absent or null member as
 * missing. */
const char *rl_cli_json_text(const cJSON *obj, const char *name,
                             const char *missing, char *buf, size_t size);

#endif /* RL_CLI_HELPERS_H */
