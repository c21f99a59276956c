#ifndef RL_FUZZ_H
#define RL_FUZZ_H

/* Shared by the libFuzzer targets in tests/fuzz (built by run_fuzz.sh with
 * clang, -fsanitize=fuzzer,address,undefined). An invariant that does not
 * hold aborts, so libFuzzer stops and keeps the input as a crash artifact. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__,         \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* 0001-01-01T00:00:00Z and 10000-01-01T00:00:00Z: the instants
 * rl_time_parse() accepts lie in [FUZZ_MIN_EPOCH, FUZZ_END_EPOCH). */
#define FUZZ_MIN_EPOCH (-62135596800LL)
#define FUZZ_END_EPOCH 253402300800LL

/* 64 lowercase hex digits and nothing else: a run ID or fingerprint. */
static inline int
fuzz_is_hex64(const char *s)
{
    size_t i;

    for (i = 0; s[i]; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    }
    return i == 64;
}

/* "YYYY-MM-DDTHH:MM:SS+00:00", the run-ID form of scheduled_at. */
static inline int
fuzz_is_utc_form(const char *s)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd+00:00";

    if (strlen(s) != sizeof(shape) - 1)
        return 0;
    for (size_t i = 0; shape[i]; i++) {
        if (shape[i] == 'd' ? s[i] < '0' || s[i] > '9' : s[i] != shape[i])
            return 0;
    }
    return 1;
}

/* errstr and reason end up in log lines and dead-letter headers: no control
 * characters (CR/LF header injection), no bytes from an untrusted event
 * beyond printable ASCII. */
static inline int
fuzz_is_printable(const char *s)
{
    for (; *s; s++) {
        if (*s < 0x20 || *s > 0x7e)
            return 0;
    }
    return 1;
}

/* The house form of an error message: not empty, printable, no capital
 * first letter, no trailing period. */
static inline int
fuzz_is_message(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && fuzz_is_printable(s) && !(s[0] >= 'A' && s[0] <= 'Z') &&
           s[n - 1] != '.';
}

#endif /* RL_FUZZ_H */
