#include "rltest.h"

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
