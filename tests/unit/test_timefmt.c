/* rl/timefmt.h: RFC 3339 parsing, the run-ID time form, schedule windows.
 * Expected epochs come from Python's calendar.timegm(). */
#include "rl/err.h"
#include "rl/timefmt.h"
#include "rltest.h"

static int64_t
parse_ok(const char *text)
{
    int64_t epoch = INT64_MIN;
    const char *reason = "unset";
    char errstr[256] = "";
    int rc = rl_time_parse(text, &epoch, &reason, errstr, sizeof(errstr));

    if (rc != RL_OK)
        fprintf(stderr, "unexpected rejection of \"%s\": %s\n", text, errstr);
    RL_CHECK_INTEQ(rc, RL_OK);
    return epoch;
}

static void
check_rejected(const char *text, const char *want_reason)
{
    int64_t epoch = 42;
    const char *reason = NULL;
    char errstr[256] = "";
    int rc = rl_time_parse(text, &epoch, &reason, errstr, sizeof(errstr));

    RL_CHECK_INTEQ(rc, RL_ERR_INVALID);
    RL_CHECK_STREQ(reason, want_reason);
    /* The message says what failed, PostgreSQL style. */
    RL_CHECK(strncmp(errstr, "timestamp ", 10) == 0);
    RL_CHECK(errstr[strlen(errstr) - 1] != '.');
    RL_CHECK_INTEQ(epoch, 42);
}

static void
test_offsets_convert_to_utc(void)
{
    RL_CHECK_INTEQ(parse_ok("2026-08-07T09:00:00+00:00"), 1786093200);
    RL_CHECK_INTEQ(parse_ok("2026-08-07T09:00:00Z"), 1786093200);
    RL_CHECK_INTEQ(parse_ok("2026-08-07t09:00:00z"), 1786093200);
    RL_CHECK_INTEQ(parse_ok("2026-08-07T14:30:00+05:30"), 1786093200);
    RL_CHECK_INTEQ(parse_ok("2026-08-07T01:00:00-08:00"), 1786093200);
    /* RFC 3339 -00:00: the time is UTC, the local offset unknown. */
    RL_CHECK_INTEQ(parse_ok("2026-08-07T09:00:00-00:00"), 1786093200);
    RL_CHECK_INTEQ(parse_ok("2026-08-07T09:00:00+23:59"),
                   1786093200 - 23 * 3600 - 59 * 60);
}

static void
test_offsets_roll_the_day_over(void)
{
    char out[RL_TIME_UTC_SIZE];

    rl_time_format_utc(parse_ok("2026-08-07T02:00:00+05:30"), out);
    RL_CHECK_STREQ(out, "2026-08-06T20:30:00+00:00");
    rl_time_format_utc(parse_ok("2026-08-06T20:00:00-08:00"), out);
    RL_CHECK_STREQ(out, "2026-08-07T04:00:00+00:00");
    rl_time_format_utc(parse_ok("2024-12-31T23:30:00-01:00"), out);
    RL_CHECK_STREQ(out, "2025-01-01T00:30:00+00:00");
    rl_time_format_utc(parse_ok("2024-02-29T23:59:59-00:30"), out);
    RL_CHECK_STREQ(out, "2024-03-01T00:29:59+00:00");
    rl_time_format_utc(parse_ok("2024-03-01T00:15:00+01:00"), out);
    RL_CHECK_STREQ(out, "2024-02-29T23:15:00+00:00");
}

static void
test_fraction_is_truncated_not_rounded(void)
{
    RL_CHECK_INTEQ(parse_ok("2026-08-07T09:00:00.999+00:00"), 1786093200);
    RL_CHECK_INTEQ(parse_ok("2026-08-07T09:00:00.999999999Z"), 1786093200);
    RL_CHECK_INTEQ(parse_ok("2026-08-07T09:00:00.5-08:00"),
                   1786093200 + 8 * 3600);
    RL_CHECK_INTEQ(parse_ok("2026-08-07T08:59:59.999999+00:00"), 1786093199);
}

static void
test_calendar_edges(void)
{
    RL_CHECK_INTEQ(parse_ok("2000-02-29T00:00:00Z"), 951782400);
    RL_CHECK_INTEQ(parse_ok("2024-02-29T12:00:00Z"), 1709208000);
    RL_CHECK_INTEQ(parse_ok("1900-03-01T00:00:00Z"), -2203891200LL);
    RL_CHECK_INTEQ(parse_ok("1969-12-31T23:59:59Z"), -1);
    RL_CHECK_INTEQ(parse_ok("1970-01-01T00:00:00Z"), 0);
    RL_CHECK_INTEQ(parse_ok("0001-01-01T00:00:00Z"), -62135596800LL);
    RL_CHECK_INTEQ(parse_ok("9999-12-31T23:59:59Z"), 253402300799LL);
}

static void
test_format_round_trips(void)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30,
                                  31, 31, 30, 31, 30, 31};
    char out[RL_TIME_UTC_SIZE], want[64];
    int64_t day = -719162; /* 0001-01-01, days before 1970-01-01 */
    int failures = 0;

    /* Walk every day of years 1..9999 with a plain counter, independent of
     * the days-from-civil arithmetic, and check parse and format against
     * it: densely around now, sparsely elsewhere to stay fast. */
    for (int y = 1; y <= 9999; y++) {
        int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

        for (int m = 1; m <= 12; m++) {
            int n = mdays[m - 1] + (m == 2 && leap);

            for (int d = 1; d <= n; d++, day++) {
                int64_t t = day * 86400 + 3723, back = 0;

                if ((y < 1900 || y > 2100) && day % 37 != 0 && d != 29)
                    continue;
                snprintf(want, sizeof(want), "%04d-%02d-%02dT01:02:03+00:00", y,
                         m, d);
                rl_time_format_utc(t, out);
                if (strcmp(out, want) != 0 ||
                    rl_time_parse(want, &back, NULL, NULL, 0) != RL_OK ||
                    back != t)
                    failures++;
            }
        }
    }
    RL_CHECK_INTEQ(day, 2932897); /* 10000-01-01 */
    RL_CHECK_INTEQ(failures, 0);
    rl_time_format_utc(1786093200, out);
    RL_CHECK_STREQ(out, "2026-08-07T09:00:00+00:00");
    rl_time_format_utc(-1, out);
    RL_CHECK_STREQ(out, "1969-12-31T23:59:59+00:00");
}

static void
test_rejections(void)
{
    /* naive_timestamp: a valid date-time without any offset. */
    check_rejected("2026-08-07T09:00:00", "naive_timestamp");
    check_rejected("2026-08-07T09:00:00.123", "naive_timestamp");

    /* invalid_timestamp: syntax. */
    check_rejected("", "invalid_timestamp");
    check_rejected("2026-08-07", "invalid_timestamp");
    check_rejected("2026-08-07 09:00:00Z", "invalid_timestamp");
    check_rejected("2026-8-7T09:00:00Z", "invalid_timestamp");
    check_rejected("26-08-07T09:00:00Z", "invalid_timestamp");
    check_rejected("2026-08-07T09:00Z", "invalid_timestamp");
    check_rejected("2026-08-07T09:00:00.Z", "invalid_timestamp");
    check_rejected("2026-08-07T09:00:00+0000", "invalid_timestamp");
    check_rejected("2026-08-07T09:00:00+00", "invalid_timestamp");
    check_rejected("2026-08-07T09:00:00 +00:00", "invalid_timestamp");
    check_rejected("2026-08-07T09:00:00UTC", "invalid_timestamp");
    check_rejected(" 2026-08-07T09:00:00Z", "invalid_timestamp");
    check_rejected("+2026-08-07T09:00:00Z", "invalid_timestamp");
    /* trailing garbage */
    check_rejected("2026-08-07T09:00:00Zjunk", "invalid_timestamp");
    check_rejected("2026-08-07T09:00:00+00:00 ", "invalid_timestamp");
    check_rejected("2026-08-07T09:00:00+00:00:00", "invalid_timestamp");
    /* impossible dates and out of range fields */
    check_rejected("2026-02-30T09:00:00Z", "invalid_timestamp");
    check_rejected("2026-02-29T09:00:00Z", "invalid_timestamp");
    check_rejected("1900-02-29T09:00:00Z", "invalid_timestamp");
    check_rejected("2026-04-31T09:00:00Z", "invalid_timestamp");
    check_rejected("2026-13-01T09:00:00Z", "invalid_timestamp");
    check_rejected("2026-00-01T09:00:00Z", "invalid_timestamp");
    check_rejected("2026-01-00T09:00:00Z", "invalid_timestamp");
    check_rejected("2026-01-32T09:00:00Z", "invalid_timestamp");
    check_rejected("2026-08-07T24:00:00Z", "invalid_timestamp");
    check_rejected("2026-08-07T09:60:00Z", "invalid_timestamp");
    check_rejected("2026-08-07T09:00:60Z", "invalid_timestamp");
    check_rejected("2026-08-07T09:00:00+24:00", "invalid_timestamp");
    check_rejected("2026-08-07T09:00:00+05:60", "invalid_timestamp");
    check_rejected("0000-06-01T00:00:00Z", "invalid_timestamp");
    /* in range locally, out of range in UTC */
    check_rejected("9999-12-31T23:00:00-05:00", "invalid_timestamp");
    check_rejected("0001-01-01T00:00:00+01:00", "invalid_timestamp");
    /* an impossible date is invalid even without an offset */
    check_rejected("2026-02-30T09:00:00", "invalid_timestamp");
}

static void
test_null_reason_is_allowed(void)
{
    int64_t epoch;
    char errstr[128];

    RL_CHECK_INTEQ(rl_time_parse("2026-08-07T09:00:00", &epoch, NULL, errstr,
                                 sizeof(errstr)),
                   RL_ERR_INVALID);
    RL_CHECK_STREQ(errstr, "timestamp has no utc offset");
}

static void
check_window(const char *text, int months, int64_t seconds)
{
    struct rl_window win = {-1, -1};
    char errstr[256] = "";

    RL_CHECK_INTEQ(rl_window_parse(text, &win, errstr, sizeof(errstr)), RL_OK);
    RL_CHECK_INTEQ(win.months, months);
    RL_CHECK_INTEQ(win.seconds, seconds);
}

static void
check_window_rejected(const char *text)
{
    struct rl_window win = {-1, -1};
    char errstr[256] = "";

    RL_CHECK_INTEQ(rl_window_parse(text, &win, errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    RL_CHECK(strncmp(errstr, "window ", 7) == 0);
    RL_CHECK_INTEQ(win.months, -1);
}

static void
test_window_parse(void)
{
    check_window("PT15M", 0, 900);
    check_window("PT1H", 0, 3600);
    check_window("PT1H30M", 0, 5400);
    check_window("PT30S", 0, 30);
    check_window("PT1H0M10S", 0, 3610);
    check_window("P1D", 0, 86400);
    check_window("P1W", 0, 604800);
    check_window("P2W", 0, 2 * 604800);
    check_window("P1DT12H", 0, 86400 + 12 * 3600);
    check_window("P1M", 1, 0);
    check_window("P3M", 3, 0);
    check_window("P1Y", 12, 0);
    check_window("P1Y6M", 18, 0);

    check_window_rejected("");
    check_window_rejected("P");
    check_window_rejected("PT");
    check_window_rejected("P1DT");
    check_window_rejected("1D");
    check_window_rejected("p1d");
    check_window_rejected("P0D");
    check_window_rejected("PT0S");
    check_window_rejected("P-1D");
    check_window_rejected("P1.5D");
    check_window_rejected("P1");
    check_window_rejected("P1H");
    check_window_rejected("PT1D");
    check_window_rejected("P1D1M");
    check_window_rejected("PT1M1H");
    check_window_rejected("P1D1D");
    check_window_rejected("P1M1D");
    check_window_rejected("P1YT1H");
    check_window_rejected("P1D ");
    check_window_rejected(" P1D");
    check_window_rejected("P99999999999999999999D");
    check_window_rejected("P20000Y");
}

static int64_t
floored(const char *window, const char *at, char *out)
{
    struct rl_window win;
    int64_t epoch = parse_ok(at);

    RL_REQUIRE(rl_window_parse(window, &win, NULL, 0) == RL_OK);
    epoch = rl_window_floor(&win, epoch);
    rl_time_format_utc(epoch, out);
    return epoch;
}

static void
test_window_floor(void)
{
    static const char at[] = "2026-08-07T09:37:12+02:00";
    char out[RL_TIME_UTC_SIZE];

    floored("PT15M", at, out);
    RL_CHECK_STREQ(out, "2026-08-07T07:30:00+00:00");
    floored("PT1H", at, out);
    RL_CHECK_STREQ(out, "2026-08-07T07:00:00+00:00");
    floored("PT1H30M", at, out);
    RL_CHECK_STREQ(out, "2026-08-07T07:30:00+00:00");
    floored("P1D", at, out);
    RL_CHECK_STREQ(out, "2026-08-07T00:00:00+00:00");
    /* 2026-08-07 is a Friday; ISO weeks start on Monday. */
    floored("P1W", at, out);
    RL_CHECK_STREQ(out, "2026-08-03T00:00:00+00:00");
    floored("P1W", "2026-08-03T00:00:00Z", out);
    RL_CHECK_STREQ(out, "2026-08-03T00:00:00+00:00");
    floored("P1W", "2026-08-02T23:59:59Z", out);
    RL_CHECK_STREQ(out, "2026-07-27T00:00:00+00:00");
    floored("P1M", at, out);
    RL_CHECK_STREQ(out, "2026-08-01T00:00:00+00:00");
    floored("P3M", at, out);
    RL_CHECK_STREQ(out, "2026-07-01T00:00:00+00:00");
    floored("P1Y", at, out);
    RL_CHECK_STREQ(out, "2026-01-01T00:00:00+00:00");
    /* The window is floored in UTC, after the offset is applied. */
    floored("P1D", "2026-08-07T01:00:00+05:30", out);
    RL_CHECK_STREQ(out, "2026-08-06T00:00:00+00:00");
    floored("P1M", "2026-03-01T00:30:00+01:00", out);
    RL_CHECK_STREQ(out, "2026-02-01T00:00:00+00:00");
    /* Before the epoch the floor still goes down, never toward zero. */
    floored("P1D", "1969-12-31T23:59:59Z", out);
    RL_CHECK_STREQ(out, "1969-12-31T00:00:00+00:00");
    floored("P1W", "1969-12-31T12:00:00Z", out);
    RL_CHECK_STREQ(out, "1969-12-29T00:00:00+00:00");
    floored("P1M", "1969-12-31T12:00:00Z", out);
    RL_CHECK_STREQ(out, "1969-12-01T00:00:00+00:00");
    /* Flooring is idempotent: a window start is its own floor. */
    RL_CHECK_INTEQ(floored("PT15M", "2026-08-07T07:30:00Z", out),
                   parse_ok("2026-08-07T07:30:00Z"));
}

int
main(void)
{
    test_offsets_convert_to_utc();
    test_offsets_roll_the_day_over();
    test_fraction_is_truncated_not_rounded();
    test_calendar_edges();
    test_format_round_trips();
    test_rejections();
    test_null_reason_is_allowed();
    test_window_parse();
    test_window_floor();
    RL_TEST_END();
}
