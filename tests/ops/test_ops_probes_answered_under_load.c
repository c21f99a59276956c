/* The probes of a real consumer are answered at peak load: with more than
 * 1,100 descriptors open in the process (a thousand model calls in flight
 * are a thousand sockets, so every new descriptor is above select()'s
 * FD_SETSIZE of 1024), and while 300 idle connections from the probes' own
 * address are held open on the port. The consumer inherits the
 * descriptors from this test, so the production server is what answers. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ops.h"
#include "rltest.h"

#define INHERITED_FDS 1200
#define IDLE_CONNECTIONS 300
#define PROBES 10

static void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Probes path PROBES times, 100 ms apart; returns how many answered
 * want. */
static int
probe(int port, const char *path, long want)
{
    int answered = 0;

    for (int i = 0; i < PROBES; i++) {
        if (ops_http_get(port, path, NULL, 0) == want)
            answered++;
        sleep_ms(100);
    }
    return answered;
}

/* A TCP connection to the port that never sends a byte; -1 on failure. */
static int
idle_connection(int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Starts `runledger consume` with its health server on port, waits until
 * it is ready. */
static int
start_consumer(struct e2e *t, int port)
{
    char port_env[64];
    const char *consume_args[] = {"consume", NULL};
    const char *env[] = {port_env, "RUNLEDGER_HEALTH_INTERVAL_SECONDS=1", NULL};
    int slot;

    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    slot = ops_spawn(t, consume_args, env);
    /* Up and in the group; with select() the server may not start. */
    RL_CHECK(ops_wait_http(port, "/readyz", 200, 60000));
    return slot;
}

static void
stop_consumer(struct e2e *t, int slot)
{
    int status = e2e_signal(t, slot, SIGTERM, 1);

    RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int
main(void)
{
    struct e2e t;
    int port = ops_free_port();
    int fds[INHERITED_FDS], idle[IDLE_CONNECTIONS];
    int nfds = 0, nidle = 0, consumer, healthz, readyz;
    struct rlimit rl;

    e2e_setup(&t, "opsload", 2);

    /* 300 idle connections from 127.0.0.1, the address the probes come
     * from, held while probing. */
    consumer = start_consumer(&t, port);
    while (nidle < IDLE_CONNECTIONS) {
        int fd = idle_connection(port);

        if (fd < 0) {
            fprintf(stderr, "idle connection %d: %s\n", nidle, strerror(errno));
            break;
        }
        idle[nidle++] = fd;
    }
    RL_CHECK_INTEQ(nidle, IDLE_CONNECTIONS);
    sleep_ms(500); /* let the server accept them all */
    healthz = probe(port, "/healthz", 200);
    readyz = probe(port, "/readyz", 200);
    printf("with %d idle connections held: /healthz %d/%d, /readyz %d/%d\n",
           nidle, healthz, PROBES, readyz, PROBES);
    RL_CHECK_INTEQ(healthz, PROBES);
    RL_CHECK_INTEQ(readyz, PROBES);
    for (int i = 0; i < nidle; i++)
        close(idle[i]);
    stop_consumer(&t, consumer);

    /* Descriptors the next consumer inherits (no FD_CLOEXEC): everything
     * it opens itself, the listening socket and each accepted connection
     * included, lands above 1024, as with a thousand model calls in
     * flight. */
    RL_REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    RL_REQUIRE(rl.rlim_max >= INHERITED_FDS + 1024);
    rl.rlim_cur = rl.rlim_max;
    RL_REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    while (nfds < INHERITED_FDS) {
        int fd = open("/dev/null", O_RDONLY);

        RL_REQUIRE(fd >= 0);
        fds[nfds++] = fd;
    }
    port = ops_free_port();
    {
        char port_env[64];
        const char *consume_args[] = {"consume", NULL};
        const char *env[] = {port_env, "RUNLEDGER_HEALTH_INTERVAL_SECONDS=1",
                             NULL};

        snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
        consumer = ops_spawn(&t, consume_args, env);
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    RL_CHECK(ops_wait_http(port, "/readyz", 200, 60000));
    healthz = probe(port, "/healthz", 200);
    readyz = probe(port, "/readyz", 200);
    printf("with %d inherited descriptors: /healthz %d/%d, /readyz %d/%d\n",
           INHERITED_FDS, healthz, PROBES, readyz, PROBES);
    RL_CHECK_INTEQ(healthz, PROBES);
    RL_CHECK_INTEQ(readyz, PROBES);
    stop_consumer(&t, consumer);

    e2e_teardown(&t);
    RL_TEST_END();
}
