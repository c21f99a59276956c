/* The port a test gives a server it starts stays free for that server.
 *
 * Asserts: rltest_free_port's port lies outside the kernel's ephemeral
 * range (no bind to port 0 and no outgoing connection can take it before
 * the server binds it), a second process asking meanwhile gets another
 * port, and 200 binds to port 0 while it is held never return it. Fails
 * on the bind-to-0-and-close helper the tests used before, whose port
 * another process could be handed before the test's server bound it. */
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rltest.h"

static int
bound_to_zero(int *fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);

    *fd = socket(AF_INET, SOCK_STREAM, 0);
    RL_REQUIRE(*fd >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    RL_REQUIRE(bind(*fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    RL_REQUIRE(getsockname(*fd, (struct sockaddr *)&a, &len) == 0);
    return ntohs(a.sin_port);
}

int
main(void)
{
    int low = 32768, high = 60999, port, fds[200], pipefd[2], other = 0;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    pid_t pid;

    if (f) {
        RL_REQUIRE(fscanf(f, "%d %d", &low, &high) == 2);
        fclose(f);
    }
    port = rltest_free_port();
    printf("# port %d, ephemeral range %d-%d\n", port, low, high);
    RL_CHECK(port > 0 && (port < low || port > high));

    for (int i = 0; i < 200; i++)
        RL_CHECK(bound_to_zero(&fds[i]) != port);
    for (int i = 0; i < 200; i++)
        close(fds[i]);

    /* Another test process, running at the same time. */
    fflush(stdout);
    RL_REQUIRE(pipe(pipefd) == 0);
    pid = fork();
    RL_REQUIRE(pid >= 0);
    if (pid == 0) {
        int p = rltest_free_port();

        close(pipefd[0]);
        _exit(write(pipefd[1], &p, sizeof(p)) == (ssize_t)sizeof(p) ? 0 : 1);
    }
    close(pipefd[1]);
    RL_CHECK(read(pipefd[0], &other, sizeof(other)) == (ssize_t)sizeof(other));
    close(pipefd[0]);
    waitpid(pid, NULL, 0);
    printf("# another process got port %d\n", other);
    RL_CHECK(other > 0 && other != port);
    RL_TEST_END();
}
