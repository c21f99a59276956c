#ifndef RL_TEST_H
#define RL_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Minimal assertions for the test executables. A failed check prints where
 * and what, counts the failure, and the test goes on; RL_TEST_END returns
 * 1 if anything failed. */

extern int rltest_failures;
extern int rltest_checks;

#define RL_CHECK(cond)                                                         \
    do {                                                                       \
        rltest_checks++;                                                       \
        if (!(cond)) {                                                         \
            rltest_failures++;                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
        }                                                                      \
    } while (0)

#define RL_CHECK_STREQ(a, b)                                                   \
    do {                                                                       \
        const char *rl_a_ = (a), *rl_b_ = (b);                                 \
        rltest_checks++;                                                       \
        if (!rl_a_ || !rl_b_ || strcmp(rl_a_, rl_b_) != 0) {                   \
            rltest_failures++;                                                 \
            fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n",      \
                    __FILE__, __LINE__, #a, #b, rl_a_ ? rl_a_ : "(null)",      \
                    rl_b_ ? rl_b_ : "(null)");                                 \
        }                                                                      \
    } while (0)

#define RL_CHECK_INTEQ(a, b)                                                   \
    do {                                                                       \
        long long rl_a_ = (long long)(a), rl_b_ = (long long)(b);              \
        rltest_checks++;                                                       \
        if (rl_a_ != rl_b_) {                                                  \
            rltest_failures++;                                                 \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n",          \
                    __FILE__, __LINE__, #a, #b, rl_a_, rl_b_);                 \
        }                                                                      \
    } while (0)

/* Aborts the test at once (for a broken precondition). */
#define RL_REQUIRE(cond)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: requirement failed: %s\n", __FILE__,       \
                    __LINE__, #cond);                                          \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

#define RL_TEST_END()                                                          \
    do {                                                                       \
        fprintf(stderr, "%d checks, %d failed\n", rltest_checks,               \
                rltest_failures);                                              \
        return rltest_failures ? 1 : 0;                                        \
    } while (0)

/* Returns the value of the environment variable a test's service is reached
 * by. When it is unset: exits 77 (skip) for a partial local run, or fails
 * the test (exit 1) when RL_REQUIRE_SERVICES is set, as `make test` does. */
const char *rltest_service_env(const char *name);

/* Milliseconds on a monotonic clock. */
int64_t rltest_now_ms(void);

/* A name unique to this process and call, for topics, groups and schemas:
 * "<prefix>_<pid>_<counter>_<ms>". Returns a static buffer per call slot of
 * 8 (do not keep more than 8 at once without copying). */
const char *rltest_unique(const char *prefix);

/* A TCP port on 127.0.0.1 for a server the test starts, free now and
 * kept from every other test until this process exits. It lies below the
 * kernel's ephemeral range (net.ipv4.ip_local_port_range), so no bind to
 * port 0 and no outgoing connection of any process takes it meanwhile,
 * and above the harness's service port bases; a lock file per port under
 * the temporary directory keeps two tests running at once apart. */
int rltest_free_port(void);

#endif /* RL_TEST_H */
