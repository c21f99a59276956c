/* The model tests' private stub: forked with its settings, its port read
 * from the first line it prints. */
#include "model_stub.h"

#include "rltest.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARGS_MAX 16

pid_t
model_stub_start(const char *const *args, const char *const *env, int *port)
{
    const char *src = getenv("RL_SOURCE_DIR");
    const char *argv[ARGS_MAX + 6];
    char script[1024], line[32];
    int out[2], argc = 0;
    pid_t pid;
    FILE *fp;

    RL_REQUIRE(src);
    snprintf(script, sizeof(script), "%s/tests/stub/stub_model.py", src);
    argv[argc++] = "python3";
    argv[argc++] = script;
    argv[argc++] = "--port";
    argv[argc++] = "0";
    for (int i = 0; args && args[i]; i++) {
        RL_REQUIRE(i < ARGS_MAX);
        argv[argc++] = args[i];
    }
    argv[argc] = NULL;
    RL_REQUIRE(pipe(out) == 0);
    pid = fork();
    RL_REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        for (int i = 0; env && env[i]; i++) {
            char name[64];
            const char *eq = strchr(env[i], '=');

            if (!eq || (size_t)(eq - env[i]) >= sizeof(name))
                _exit(126);
            snprintf(name, sizeof(name), "%.*s", (int)(eq - env[i]), env[i]);
            setenv(name, eq + 1, 1);
        }
        execvp("python3", (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    fp = fdopen(out[0], "r");
    RL_REQUIRE(fp && fgets(line, sizeof(line), fp));
    fclose(fp);
    *port = atoi(line);
    RL_REQUIRE(*port > 0);
    return pid;
}

void
model_stub_stop(pid_t pid)
{
    int status;

    kill(pid, SIGTERM);
    waitpid(pid, &status, 0);
}
