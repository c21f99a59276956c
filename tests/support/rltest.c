#include "rltest.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int rltest_failures;
int rltest_checks;

const char *
rltest_service_env(const char *name)
{
    const char *value = getenv(name);
    const char *require = getenv("RL_REQUIRE_SERVICES");

    if (value && *value)
        return value;
    if (require && *require && strcmp(require, "0") != 0) {
        fprintf(stderr,
                "%s is not set but RL_REQUIRE_SERVICES is: the service this "
                "test needs is missing (run `make services-up`)\n",
                name);
        exit(1);
    }
    fprintf(stderr, "%s is not set: skipping (partial local run)\n", name);
    exit(77);
}

int64_t
rltest_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *
rltest_unique(const char *prefix)
{
    static char bufs[8][128];
    static unsigned counter;
    char *buf = bufs[counter % 8];
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(buf, sizeof(bufs[0]), "%s_%ld_%u_%lld", prefix, (long)getpid(),
             counter++, (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    return buf;
}

/* The range rltest_free_port draws from: under 32768, where Linux's
 * ephemeral range starts by default, and past the bases the harness's
 * PostgreSQL (25432), pgbouncer (26432), stub (28080) and Kafka (29092)
 * count up from. */
#define OPS_PORT_LOW 30000
#define OPS_PORT_HIGH 32700

/* Returns a descriptor holding port's lock, -1 when another process holds
 * it, -2 when no lock can be taken here at all (a folder of another user):
 * the bind check alone then decides. */
static int
port_lock(int port)
{
    const char *tmp = getenv("TMPDIR");
    char dir[512], path[600];
    int fd;

    snprintf(dir, sizeof(dir), "%s/rl-test-ports", tmp && *tmp ? tmp : "/tmp");
    if (mkdir(dir, 0777) == 0)
        (void)chmod(dir, 01777);
    snprintf(path, sizeof(path), "%s/%d.lock", dir, port);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return -2;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int
port_bindable(int port)
{
    struct sockaddr_in addr;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, ok;

    RL_REQUIRE(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((uint16_t)port);
    ok = bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0;
    close(fd);
    return ok;
}

int
rltest_free_port(void)
{
    /* A port drawn from the ephemeral range and released again (bind to
     * 0, close) can be handed to another process's bind to port 0 before
     * the server the test starts binds it: that server then exits at start
     * and the test waits out its timeouts for nothing. */
    int span = OPS_PORT_HIGH - OPS_PORT_LOW;
    /* Start where this process's pid points, so tests starting together
     * do not all contend for the first ports. */
    int first = (int)((unsigned)getpid() * 7919u % (unsigned)span);

    for (int i = 0; i < span; i++) {
        int port = OPS_PORT_LOW + (first + i) % span;
        int fd = port_lock(port);

        if (fd == -1)
            continue;
        if (port_bindable(port))
            return port; /* the lock is held until this process exits */
        if (fd >= 0)
            close(fd);
    }
    RL_REQUIRE(!"no free port in the test range");
    return -1;
}
