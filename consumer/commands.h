#ifndef RL_COMMANDS_H
#define RL_COMMANDS_H

/* The exit status every subcommand of the runledger binary returns, and
 * the entry points of the service's own subcommands (the operator
 * commands are in cli/cli.h). Each entry point takes argv with argv[0]
 * the subcommand name and returns the process exit code:
 *   0 success, 1 runtime failure (service unreachable, ...),
 *   2 bad usage or invalid input (the reason is on stderr),
 *   3 not found, or refused by the run's state (`runs`). */

#define RL_EXIT_OK 0
#define RL_EXIT_FAILURE 1
#define RL_EXIT_USAGE 2
#define RL_EXIT_REFUSED 3

/* The consumer: Kafka schedule events to ledger runs to model calls. */
int rl_cmd_consume(int argc, char **argv);

/* The outbox relay on its own, without the consumer. */
int rl_cmd_relay(int argc, char **argv);

/* The scheduler (consumer/scheduler.c): publishes the windows of the
 * ledger's schedules, one active among its replicas. */
int rl_cmd_scheduler(int argc, char **argv);

/* The web console (consumer/console/): runs until SIGTERM or SIGINT. */
int rl_cmd_console(int argc, char **argv);

#endif /* RL_COMMANDS_H */
