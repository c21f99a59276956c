/* libFuzzer target: rl_time_parse(), rl_window_parse(), rl_window_floor(),
 * rl_strip() and rl_runid_compute() on arbitrary NUL-terminated text. A
 * timestamp that parses formats back to the same instant; a window that parses
 * floors every instant to an aligned start no later than the instant; every
 * refusal has a stable reason and a printable message. The input is also split
 * at its first '\n' into a scheduled_at and a window for the run ID. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rl/err.h"
#include "rl/runid.h"
#include "rl/timefmt.h"

#define SECONDS_PER_DAY 86400
#define SECONDS_PER_WEEK (7 * SECONDS_PER_DAY)
/* Limits of timefmt.c: 10,000 years. */
#define MAX_WINDOW_MONTHS (12 * 10000)
#define MAX_WINDOW_SECONDS ((int64_t)10000 * 366 * SECONDS_PER_DAY)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int64_t
floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static int
is_time_reason(const char *reason)
{
    return reason && (strcmp(reason, "naive_timestamp") == 0 ||
                      strcmp(reason, "invalid_timestamp") == 0);
}

/* Returns 1 and sets *epoch when text is a timestamp. */
static int
check_time(const char *text, int64_t *epoch)
{
    const char *reason = NULL;
    char errstr[256] = "";
    char utc[RL_TIME_UTC_SIZE], again_utc[RL_TIME_UTC_SIZE];
    int64_t t = 0, again = 0;
    int rc = rl_time_parse(text, &t, &reason, errstr, sizeof(errstr));

    if (rc != RL_OK) {
        FUZZ_CHECK(rc == RL_ERR_INVALID);
        FUZZ_CHECK(is_time_reason(reason));
        FUZZ_CHECK(fuzz_is_message(errstr));
        /* runid.c replaces this word with the field name. */
        FUZZ_CHECK(strncmp(errstr, "timestamp", 9) == 0);
        return 0;
    }
    FUZZ_CHECK(t >= FUZZ_MIN_EPOCH && t < FUZZ_END_EPOCH);
    rl_time_format_utc(t, utc);
    FUZZ_CHECK(fuzz_is_utc_form(utc));
    FUZZ_CHECK(rl_time_parse(utc, &again, NULL, NULL, 0) == RL_OK);
    FUZZ_CHECK(again == t);
    rl_time_format_utc(again, again_utc);
    FUZZ_CHECK(strcmp(utc, again_utc) == 0);

    /* With a zero offset the UTC form is the input's own date and time. */
    {
        const char *p = text + 19;

        if (*p == '.') {
            p++;
            while (*p >= '0' && *p <= '9')
                p++;
        }
        if (strcmp(p, "Z") == 0 || strcmp(p, "z") == 0 ||
            strcmp(p, "+00:00") == 0 || strcmp(p, "-00:00") == 0) {
            FUZZ_CHECK(memcmp(utc, text, 10) == 0);
            FUZZ_CHECK(memcmp(utc + 11, text + 11, 8) == 0);
        }
    }
    *epoch = t;
    return 1;
}

static void
check_floor(const struct rl_window *win, int64_t t)
{
    int64_t start = rl_window_floor(win, t);

    FUZZ_CHECK(start <= t);
    FUZZ_CHECK(rl_window_floor(win, start) == start);
    if (win->months > 0) {
        char utc[RL_TIME_UTC_SIZE];

        /* The first day of a month at 00:00, less than the window (at most
         * 31 days a month) before t. */
        FUZZ_CHECK(t - start < (int64_t)win->months * 31 * SECONDS_PER_DAY);
        FUZZ_CHECK(
            start - floor_div(start, SECONDS_PER_DAY) * SECONDS_PER_DAY == 0);
        if (start >= FUZZ_MIN_EPOCH) {
            rl_time_format_utc(start, utc);
            FUZZ_CHECK(memcmp(utc + 8, "01T00:00:00", 11) == 0);
        }
    } else {
        FUZZ_CHECK(t - start < win->seconds);
        if (win->seconds % SECONDS_PER_WEEK == 0)
            /* Day 0 (1970-01-01) was a Thursday: Mondays are day -3 + 7k. */
            FUZZ_CHECK((floor_div(start, SECONDS_PER_DAY) + 3) % 7 == 0 &&
                       start % SECONDS_PER_DAY == 0);
        else
            FUZZ_CHECK(start - floor_div(start, win->seconds) * win->seconds ==
                       0);
    }
}

/* Returns 1 and fills *win when text is a window. */
static int
check_window(const char *text, int64_t epoch, int have_epoch,
             struct rl_window *win)
{
    static const int64_t instants[] = {FUZZ_MIN_EPOCH,
                                       FUZZ_MIN_EPOCH + 1,
                                       -SECONDS_PER_WEEK,
                                       -1,
                                       0,
                                       1,
                                       1786093200 /* 2026-08-07T09:00:00Z */,
                                       FUZZ_END_EPOCH - 1};
    char errstr[256] = "";
    int rc = rl_window_parse(text, win, errstr, sizeof(errstr));

    if (rc != RL_OK) {
        FUZZ_CHECK(rc == RL_ERR_INVALID);
        FUZZ_CHECK(fuzz_is_message(errstr));
        FUZZ_CHECK(strncmp(errstr, "window", 6) == 0);
        return 0;
    }
    /* Positive, and either calendar or fixed, never both. */
    FUZZ_CHECK((win->months > 0) != (win->seconds > 0));
    FUZZ_CHECK(win->months >= 0 && win->months <= MAX_WINDOW_MONTHS);
    FUZZ_CHECK(win->seconds >= 0 && win->seconds <= MAX_WINDOW_SECONDS);
    for (size_t i = 0; i < sizeof(instants) / sizeof(instants[0]); i++)
        check_floor(win, instants[i]);
    if (have_epoch)
        check_floor(win, epoch);
    return 1;
}

/* rl_strip() on any bytes, valid UTF-8 or not (`runledger id` passes
 * command-line arguments to it unchecked): a slice of the text, and
 * stripping it again changes nothing. */
static void
check_strip(const char *text)
{
    size_t len, again_len, n = strlen(text);
    const char *start = rl_strip(text, &len);
    char *copy;

    FUZZ_CHECK(start >= text && start + len <= text + n);
    copy = malloc(len + 1);
    if (!copy)
        return;
    memcpy(copy, start, len);
    copy[len] = '\0';
    FUZZ_CHECK(rl_strip(copy, &again_len) == copy && again_len == len);
    free(copy);
}

static void
check_run_id(const char *scheduled_at, const char *window)
{
    struct rl_run_identity id = {"job", "tenant", scheduled_at,
                                 *window ? window : NULL, "v1"};
    char run_id[RL_HEX_SIZE], utc[RL_TIME_UTC_SIZE], want[RL_TIME_UTC_SIZE];
    char errstr[256] = "";
    const char *reason = NULL;
    struct rl_window win;
    int64_t epoch = 0, start;
    int have_time, have_window;
    int rc =
        rl_runid_compute(&id, run_id, utc, &reason, errstr, sizeof(errstr));

    have_time = rl_time_parse(scheduled_at, &epoch, NULL, NULL, 0) == RL_OK;
    have_window =
        !id.window || rl_window_parse(id.window, &win, NULL, 0) == RL_OK;
    if (rc != RL_OK) {
        FUZZ_CHECK(rc == RL_ERR_INVALID);
        FUZZ_CHECK(fuzz_is_message(errstr));
        FUZZ_CHECK(is_time_reason(reason) ||
                   (reason && strcmp(reason, "invalid_window") == 0));
        /* Only a window that floors into year 0 makes a good pair fail. */
        if (have_time && have_window)
            FUZZ_CHECK(id.window && reason &&
                       strcmp(reason, "invalid_timestamp") == 0 &&
                       rl_window_floor(&win, epoch) < FUZZ_MIN_EPOCH);
        return;
    }
    FUZZ_CHECK(have_time && have_window);
    FUZZ_CHECK(fuzz_is_hex64(run_id));
    FUZZ_CHECK(fuzz_is_utc_form(utc));
    start = id.window ? rl_window_floor(&win, epoch) : epoch;
    FUZZ_CHECK(start >= FUZZ_MIN_EPOCH);
    rl_time_format_utc(start, want);
    FUZZ_CHECK(strcmp(utc, want) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    struct rl_window win;
    int64_t epoch = 0;
    int have_epoch;
    char *newline;

    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    have_epoch = check_time(text, &epoch);
    check_window(text, epoch, have_epoch, &win);
    check_strip(text);

    newline = strchr(text, '\n');
    if (newline) {
        *newline = '\0';
        have_epoch = check_time(text, &epoch);
        check_window(newline + 1, epoch, have_epoch, &win);
        check_run_id(text, newline + 1);
    }
    free(text);
    return 0;
}
