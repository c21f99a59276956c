/* `runledger config`: the configuration table, and with --effective the
 * values this environment gives (secrets shown only as "(set)"). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/config.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger config [--effective]\n"
"\n"
"Prints every setting (environment variable) with its default; --effective adds\n"
"the value in force, secrets shown as \"(set)\".\n";
/* clang-format on */

int
rl_cmd_config(int argc, char **argv)
{
    struct rl_config *cfg;
    int rc;

    if (argc > 1 && strcmp(argv[1], "--effective") == 0) {
        rc = rl_cli_config_load("config", &cfg);
        if (rc != RL_EXIT_OK)
            return rc;
        rl_config_print(stdout, cfg);
        rl_config_destroy(cfg);
        return RL_EXIT_OK;
    }
    if (argc > 1) {
        FILE *out = strcmp(argv[1], "--help") == 0 ? stdout : stderr;

        fputs(usage_text, out);
        return out == stdout ? RL_EXIT_OK : RL_EXIT_USAGE;
    }
    rl_config_print(stdout, NULL);
    return RL_EXIT_OK;
}
