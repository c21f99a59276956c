/* The service's threads carry names (top -H, perf and /proc tell them
 * apart): a consumer that is ready has a thread each named rl-ledger,
 * rl-renewer, rl-completer, rl-model, rl-relay and rl-health, read from
 * /proc/PID/task/TID/comm. Fails on threads that all inherit the
 * process's name. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "rltest.h"

static const char *const names[] = {"rl-ledger", "rl-renewer", "rl-completer",
                                    "rl-model",  "rl-relay",   "rl-health"};
#define N_NAMES (sizeof(names) / sizeof(names[0]))

/* Marks in seen[] the names the process's threads carry; returns how many
 * threads it read. */
static int
read_thread_names(pid_t pid, int *seen)
{
    char path[320], comm[64];
    struct dirent *d;
    DIR *dir;
    int threads = 0;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    dir = opendir(path);
    if (!dir)
        return -1;
    while ((d = readdir(dir))) {
        FILE *f;

        if (d->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid,
                 d->d_name);
        f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof(comm), f)) {
            comm[strcspn(comm, "\n")] = '\0';
            for (size_t i = 0; i < N_NAMES; i++) {
                if (strcmp(comm, names[i]) == 0)
                    seen[i] = 1;
            }
            threads++;
        }
        fclose(f);
    }
    closedir(dir);
    return threads;
}

int
main(void)
{
    struct e2e t;
    char port_env[64];
    int port = ops_free_port();
    const char *args[] = {"consume", NULL};
    int seen[N_NAMES] = {0};
    int slot;

    e2e_setup(&t, "opsthreads", 1);
    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    {
        const char *env[] = {port_env, NULL};

        slot = ops_spawn(&t, args, env);
    }
    RL_REQUIRE(ops_wait_http(port, "/readyz", 200, 60000));
    RL_CHECK(read_thread_names(t.procs[slot], seen) > (int)N_NAMES);
    for (size_t i = 0; i < N_NAMES; i++) {
        if (!seen[i])
            fprintf(stderr, "no thread named %s\n", names[i]);
        RL_CHECK(seen[i]);
    }
    RL_CHECK(e2e_stop(&t, slot, 30000));
    e2e_teardown(&t);
    RL_TEST_END();
}
