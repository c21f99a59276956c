#ifndef RL_COMMANDS_H
#define RL_COMMANDS_H

/* Subcommands of the runledger binary. Each takes argv with argv[0] the
 * subcommand name, and returns the process exit code:
 *   0 success, 1 runtime failure (service unreachable, ...),
 *   2 bad usage or invalid input (the reason is on stderr),
 *   3 not found, or refused by the run's state (`runs`). */

#define RL_EXIT_OK 0
#define RL_EXIT_FAILURE 1
#define RL_EXIT_USAGE 2
#define RL_EXIT_REFUSED 3

int rl_cmd_id(int argc, char **argv);
int rl_cmd_migrate(int argc, char **argv);
int rl_cmd_consume(int argc, char **argv);
int rl_cmd_relay(int argc, char **argv);
int rl_cmd_config(int argc, char **argv);
int rl_cmd_publish(int argc, char **argv);
int rl_cmd_runs(int argc, char **argv);
int rl_cmd_budgets(int argc, char **argv);
int rl_cmd_report(int argc, char **argv);
int rl_cmd_receive(int argc, char **argv);
int rl_cmd_approvers(int argc, char **argv);

#endif /* RL_COMMANDS_H */
