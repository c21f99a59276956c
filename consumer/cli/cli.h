#ifndef RL_CLI_H
#define RL_CLI_H

/* The operator commands of the runledger binary (the rl_cli library).
 * Each takes argv with argv[0] the subcommand name, prints its result on
 * stdout and its errors on stderr, never exits, and returns the process
 * exit code documented in commands.h. */

/* `runs`: list and show runs; retry, resolve, approve or reject one. */
int rl_cmd_runs(int argc, char **argv);

/* `approvers`: add, remove or list who may approve a tenant's runs. */
int rl_cmd_approvers(int argc, char **argv);

/* `users`: add, list or revoke console users (consumer/cli/cmd_users.c). */
int rl_cmd_users(int argc, char **argv);

/* `audit`: the audit trail of decisions and operator actions. */
int rl_cmd_audit(int argc, char **argv);

/* `budgets`: set, show or remove daily token budgets. */
int rl_cmd_budgets(int argc, char **argv);

/* `limits`: set, show or remove concurrency limits and weights per
 * tenant and job; with --model, the model rate limits. */
int rl_cmd_limits(int argc, char **argv);

/* `limits set|show|remove --model`: requests and tokens per minute per
 * model (consumer/cli/cmd_limits_model.c). argv[0] is the command name its
 * messages carry ("limits", or the "model-limits" alias), argv[1] the
 * action. */
int rl_cmd_limits_model(int argc, char **argv);

/* `batch`: set, show or remove a job's batch mode (cmd_batch.c). */
int rl_cmd_batch(int argc, char **argv);

/* `prices`: set, show or remove a model's token prices (cmd_prices.c). */
int rl_cmd_prices(int argc, char **argv);

/* `report`: runs, generations and tokens of a period. */
int rl_cmd_report(int argc, char **argv);

/* `schedules`: schedules in the ledger, their gaps and backfill
 * (cmd_schedules.c). */
int rl_cmd_schedules(int argc, char **argv);

/* `publish`: validate schedule events and produce them to Kafka. */
int rl_cmd_publish(int argc, char **argv);

/* `dlq`: list the dead-letter topic; replay dead letters' events. */
int rl_cmd_dlq(int argc, char **argv);

/* `receive`: the reference receiver of the notification topic. Runs until
 * SIGTERM or SIGINT. */
int rl_cmd_receive(int argc, char **argv);

/* `config`: the configuration settings, or the values in force. */
int rl_cmd_config(int argc, char **argv);

/* `id`: the run ID of one logical run. */
int rl_cmd_id(int argc, char **argv);

/* `purge`: remove finished runs older than a retention period. */
int rl_cmd_purge(int argc, char **argv);

/* `check`: one GET of an HTTP endpoint against an expected status and
 * body line (consumer/cli/cmd_check.c); the chart's helm tests. */
int rl_cmd_check(int argc, char **argv);

/* `migrate`: apply the pending ledger migrations. */
int rl_cmd_migrate(int argc, char **argv);

#endif /* RL_CLI_H */
