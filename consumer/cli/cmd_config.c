/* `runledger config`: the configuration table, and with --effective the
 * values this environment gives (secrets shown only as "(set)"). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "rl/config.h"

int
rl_cmd_config(int argc, char **argv)
{
    char errstr[512];
    struct rl_config *cfg;

    if (argc > 1 && strcmp(argv[1], "--effective") == 0) {
        cfg = rl_config_load(errstr, sizeof(errstr));
        if (!cfg) {
            fprintf(stderr, "runledger config: %s\n", errstr);
            return RL_EXIT_USAGE;
        }
        rl_config_print(stdout, cfg);
        rl_config_destroy(cfg);
        return RL_EXIT_OK;
    }
    if (argc > 1) {
        FILE *out = strcmp(argv[1], "--help") == 0 ? stdout : stderr;

        fprintf(out, "usage: runledger config [--effective]\n\n"
                     "Prints every setting (environment variable) with its "
                     "default; --effective adds\nthe value in force, secrets "
                     "shown as \"(set)\".\n");
        return out == stdout ? RL_EXIT_OK : RL_EXIT_USAGE;
    }
    rl_config_print(stdout, NULL);
    return RL_EXIT_OK;
}
