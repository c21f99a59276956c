/*
 * pause.c — the pod sandbox's process for the test cluster (tests/k8s/):
 * it holds the pod's namespaces, reaps orphans and exits on SIGTERM or
 * SIGINT. No registry is reachable here, so the sandbox image is this
 * program, built static and put in a scratch image by cluster.sh.
 */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void
on_stop(int sig)
{
    (void)sig;
    _exit(0);
}

static void
on_child(int sig)
{
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int
main(void)
{
    struct sigaction sa = {0};

    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_child;
    sa.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    for (;;)
        pause();
    return 0;
}
