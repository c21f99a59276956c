/* placeholder replaced below */
#include "commands.h"
int
rl_cmd_scheduler(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return RL_EXIT_USAGE;
}
