/* runledger: the daemon and its operator CLI, one binary with subcommands.
 * This file parses the subcommand and is the only place that exits. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "commands.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static int cmd_version(int argc, char **argv);

static const struct command commands[] = {
    {"consume", rl_cmd_consume, "run the consumer (the service)"},
    {"relay", rl_cmd_relay, "deliver outbox rows to the notification topic"},
    {"publish", rl_cmd_publish, "produce schedule events (flags or stdin)"},
    {"schedules", rl_cmd_schedules,
     "set, list, pause or remove schedules; their gaps; backfill"},
    {"scheduler", rl_cmd_scheduler,
     "publish each schedule's windows when due (active/standby)"},
    {"runs", rl_cmd_runs, "list, show, retry, resolve, approve or reject runs"},
    {"approvers", rl_cmd_approvers,
     "add, remove or list who may approve a tenant's runs"},
    {"users", rl_cmd_users,
     "add, list or revoke the people who sign in to the console"},
    {"audit", rl_cmd_audit, "list the audit trail of decisions and actions"},
    {"console", rl_cmd_console, "serve the web console"},
    {"budgets", rl_cmd_budgets, "set, show or remove daily token budgets"},
    {"limits", rl_cmd_limits,
     "set, show or remove concurrency limits per tenant and job"},
    {"model-limits", rl_cmd_limits_model,
     "set, show or remove requests/tokens per minute of a model"},
    {"batch", rl_cmd_batch,
     "set, show or remove a job's batch mode (the provider's batch API)"},
    {"prices", rl_cmd_prices,
     "set, show or remove a model's token prices, live and batch"},
    {"report", rl_cmd_report, "runs, generations and tokens of a period"},
    {"dlq", rl_cmd_dlq, "list dead letters; replay their events"},
    {"receive", rl_cmd_receive,
     "reference receiver: apply each notification once"},
    {"config", rl_cmd_config, "print the configuration settings"},
    {"id", rl_cmd_id, "print the run ID of one logical run"},
    {"migrate", rl_cmd_migrate, "apply pending ledger migrations"},
    {"purge", rl_cmd_purge, "remove finished runs past their retention"},
    {"check", rl_cmd_check, "GET an HTTP endpoint, e.g. /readyz (helm test)"},
    {"version", cmd_version, "print the version"},
};

static int
cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("runledger %s\n", RL_VERSION);
    return RL_EXIT_OK;
}

static void
usage(FILE *out)
{
    fputs("usage: runledger <command> [options]\n"
          "\n"
          "commands:\n",
          out);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fputs("\n"
          "`runledger <command> --help` describes one command.\n",
          out);
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return RL_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return RL_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0)
        return cmd_version(0, NULL);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "runledger: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return RL_EXIT_USAGE;
}
