/* RFC 3339 timestamps and ISO-8601 schedule windows, in UTC only.
 *
 * The calendar arithmetic is done here with integer days-from-civil
 * conversions (proleptic Gregorian), not with timegm()/mktime(): those read
 * the process time zone and locale, and a run ID must not depend on where
 * the consumer happens to run.
 *
 * Every errstr written by rl_time_parse() starts with the word "timestamp";
 * runid.c relies on that to name the field ("scheduled_at ...") instead. */
#include "rl/timefmt.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rl/err.h"

#define SECONDS_PER_DAY 86400
#define SECONDS_PER_WEEK (7 * SECONDS_PER_DAY)

/* 1969-12-29, the Monday before the Unix epoch (a Thursday). */
#define MONDAY_EPOCH (-3 * SECONDS_PER_DAY)

/* Python's datetime, which the reference function uses, only knows
 * years 1..9999; a run ID outside that range could never be reproduced. */
#define MIN_YEAR 1
#define MAX_YEAR 9999

/* Caps a window so the arithmetic below cannot overflow: 10,000 years. */
#define MAX_WINDOW_MONTHS (12 * 10000)
#define MAX_WINDOW_SECONDS ((int64_t)10000 * 366 * SECONDS_PER_DAY)

static int64_t
floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

static int
is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int
days_in_month(int64_t y, int m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30,
                                 31, 31, 30, 31, 30, 31};

    if (m == 2 && is_leap(y))
        return 29;
    return days[m - 1];
}

/* Days since 1970-01-01 of y-m-d (H. Hinnant's days_from_civil). */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = floor_div(y, 400);
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* Inverse of days_from_civil. */
static void
civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    int64_t era, doe, yoe, doy, mp;

    z += 719468;
    era = floor_div(z, 146097);
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* Reads exactly n ASCII digits at *p; returns -1 if any is not a digit. */
static int
read_digits(const char **p, int n)
{
    int v = 0;

    for (int i = 0; i < n; i++) {
        char c = (*p)[i];

        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    *p += n;
    return v;
}

static int fail(const char **reason, const char *why, char *errstr,
                size_t errstr_size, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int
fail(const char **reason, const char *why, char *errstr, size_t errstr_size,
     const char *fmt, ...)
{
    va_list ap;

    if (reason)
        *reason = why;
    if (errstr && errstr_size) {
        va_start(ap, fmt);
        vsnprintf(errstr, errstr_size, fmt, ap);
        va_end(ap);
    }
    return RL_ERR_INVALID;
}

int
rl_time_parse(const char *text, int64_t *epoch, const char **reason,
              char *errstr, size_t errstr_size)
{
    static const char syntax[] = "timestamp is not in rfc 3339 form "
                                 "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+hh:mm|"
                                 "-hh:mm)";
    const char *p = text;
    int year, month, day, hour, minute, second;
    int off_sign = 0, off_h = 0, off_m = 0;
    int64_t days, t;

    if (!text)
        return fail(reason, "invalid_timestamp", errstr, errstr_size,
                    "timestamp is missing");

    /* Fixed-width fields: this is the RFC 3339 grammar, nothing looser, so
     * two spellings of one instant cannot slip past as different inputs. */
    if ((year = read_digits(&p, 4)) < 0 || *p++ != '-' ||
        (month = read_digits(&p, 2)) < 0 || *p++ != '-' ||
        (day = read_digits(&p, 2)) < 0 || (*p != 'T' && *p != 't'))
        return fail(reason, "invalid_timestamp", errstr, errstr_size, "%s",
                    syntax);
    p++;
    if ((hour = read_digits(&p, 2)) < 0 || *p++ != ':' ||
        (minute = read_digits(&p, 2)) < 0 || *p++ != ':' ||
        (second = read_digits(&p, 2)) < 0)
        return fail(reason, "invalid_timestamp", errstr, errstr_size, "%s",
                    syntax);

    /* Fractional seconds are truncated, never rounded: 09:00:00.999 is
     * still the 09:00:00 run, as in the reference function. */
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return fail(reason, "invalid_timestamp", errstr, errstr_size,
                        "timestamp has a '.' without fractional digits");
        while (*p >= '0' && *p <= '9')
            p++;
    }

    if (year < MIN_YEAR || year > MAX_YEAR)
        return fail(reason, "invalid_timestamp", errstr, errstr_size,
                    "timestamp year %04d is out of range (0001-9999)", year);
    if (month < 1 || month > 12)
        return fail(reason, "invalid_timestamp", errstr, errstr_size,
                    "timestamp month %02d is out of range", month);
    if (day < 1 || day > days_in_month(year, month))
        return fail(reason, "invalid_timestamp", errstr, errstr_size,
                    "timestamp day %02d is out of range for %04d-%02d", day,
                    year, month);
    if (hour > 23)
        return fail(reason, "invalid_timestamp", errstr, errstr_size,
                    "timestamp hour %02d is out of range", hour);
    if (minute > 59)
        return fail(reason, "invalid_timestamp", errstr, errstr_size,
                    "timestamp minute %02d is out of range", minute);
    /* A leap second (:60) has no Python datetime, hence no reference ID. */
    if (second > 59)
        return fail(reason, "invalid_timestamp", errstr, errstr_size,
                    "timestamp second %02d is out of range", second);

    if (*p == '\0')
        return fail(reason, "naive_timestamp", errstr, errstr_size,
                    "timestamp has no utc offset");
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        off_sign = *p == '-' ? -1 : 1;
        p++;
        if ((off_h = read_digits(&p, 2)) < 0 || *p++ != ':' ||
            (off_m = read_digits(&p, 2)) < 0)
            return fail(reason, "invalid_timestamp", errstr, errstr_size,
                        "timestamp utc offset is not in the form +hh:mm or "
                        "-hh:mm");
        if (off_h > 23 || off_m > 59)
            return fail(reason, "invalid_timestamp", errstr, errstr_size,
                        "timestamp utc offset %c%02d:%02d is out of range",
                        off_sign < 0 ? '-' : '+', off_h, off_m);
    } else {
        return fail(reason, "invalid_timestamp", errstr, errstr_size,
                    "timestamp has no valid utc offset (Z, +hh:mm or "
                    "-hh:mm)");
    }
    if (*p != '\0')
        return fail(reason, "invalid_timestamp", errstr, errstr_size,
                    "timestamp has trailing characters after the utc offset");

    days = days_from_civil(year, month, day);
    t = days * SECONDS_PER_DAY + hour * 3600 + minute * 60 + second;
    t -= (int64_t)off_sign * (off_h * 3600 + off_m * 60);

    /* The offset can move the instant out of the representable years. */
    if (t < days_from_civil(MIN_YEAR, 1, 1) * SECONDS_PER_DAY ||
        t >= days_from_civil(MAX_YEAR + 1, 1, 1) * SECONDS_PER_DAY)
        return fail(reason, "invalid_timestamp", errstr, errstr_size,
                    "timestamp is out of range (0001-9999) in utc");

    *epoch = t;
    return RL_OK;
}

void
rl_time_format_utc(int64_t epoch, char *out)
{
    int64_t days = floor_div(epoch, SECONDS_PER_DAY);
    int64_t secs = epoch - days * SECONDS_PER_DAY;
    int64_t y;
    int m, d;
    char text[64];

    civil_from_days(days, &y, &m, &d);
    /* Years outside 0000-9999 (never produced by rl_time_parse) would not
     * fit; they are cut rather than written past out. */
    snprintf(text, sizeof(text), "%04lld-%02d-%02dT%02d:%02d:%02d+00:00",
             (long long)y, m, d, (int)(secs / 3600), (int)(secs / 60 % 60),
             (int)(secs % 60));
    memcpy(out, text, RL_TIME_UTC_SIZE - 1);
    out[RL_TIME_UTC_SIZE - 1] = '\0';
}

/* Reads a run of digits as a non-negative number; -1 when there is none or
 * it exceeds limit (which keeps the sums below from overflowing). */
static int64_t
read_number(const char **p, int64_t limit)
{
    int64_t v = 0;

    if (**p < '0' || **p > '9')
        return -1;
    while (**p >= '0' && **p <= '9') {
        v = v * 10 + (**p - '0');
        if (v > limit)
            return -1;
        (*p)++;
    }
    return v;
}

int
rl_window_parse(const char *text, struct rl_window *win, char *errstr,
                size_t errstr_size)
{
    /* Designators in the only order ISO 8601 allows; "M" appears twice and
     * means months before 'T' and minutes after it. */
    static const char date_units[] = "YMWD";
    static const int64_t date_seconds[] = {0, 0, SECONDS_PER_WEEK,
                                           SECONDS_PER_DAY};
    static const char time_units[] = "HMS";
    static const int64_t time_seconds[] = {3600, 60, 1};
    const char *p = text;
    int64_t months = 0, seconds = 0;
    size_t next = 0;
    int parts = 0;

    if (!text || *p++ != 'P')
        return fail(NULL, NULL, errstr, errstr_size,
                    "window is not an iso 8601 duration such as PT15M, PT1H, "
                    "P1D, P1W or P1M");

    while (*p && *p != 'T') {
        int64_t n = read_number(&p, MAX_WINDOW_SECONDS);
        const char *unit;

        if (n < 0 || !*p || !(unit = strchr(date_units + next, *p)))
            return fail(NULL, NULL, errstr, errstr_size,
                        "window has a malformed or out of order date part "
                        "(PnYnMnWnD)");
        next = (size_t)(unit - date_units);
        if (next <= 1)
            months += n * (next == 0 ? 12 : 1);
        else
            seconds += n * date_seconds[next];
        next++;
        parts++;
        p++;
        if (months > MAX_WINDOW_MONTHS || seconds > MAX_WINDOW_SECONDS)
            return fail(NULL, NULL, errstr, errstr_size,
                        "window is longer than 10000 years");
    }
    if (*p == 'T') {
        int time_parts = 0;

        p++;
        next = 0;
        while (*p) {
            int64_t n = read_number(&p, MAX_WINDOW_SECONDS);
            const char *unit;

            if (n < 0 || !*p || !(unit = strchr(time_units + next, *p)))
                return fail(NULL, NULL, errstr, errstr_size,
                            "window has a malformed or out of order time part "
                            "(TnHnMnS)");
            next = (size_t)(unit - time_units);
            seconds += n * time_seconds[next];
            next++;
            time_parts++;
            p++;
            if (seconds > MAX_WINDOW_SECONDS)
                return fail(NULL, NULL, errstr, errstr_size,
                            "window is longer than 10000 years");
        }
        if (time_parts == 0)
            return fail(NULL, NULL, errstr, errstr_size,
                        "window has a 'T' without a time part");
        parts += time_parts;
    }
    if (parts == 0)
        return fail(NULL, NULL, errstr, errstr_size,
                    "window has no duration after 'P'");
    /* "P1M1D" has no single start: a month boundary and a day boundary do
     * not line up, so such a window could not be floored consistently. */
    if (months > 0 && seconds > 0)
        return fail(NULL, NULL, errstr, errstr_size,
                    "window mixes calendar (Y, M) and fixed (W, D, H, M, S) "
                    "parts");
    if (months == 0 && seconds == 0)
        return fail(NULL, NULL, errstr, errstr_size,
                    "window must be longer than zero");

    win->months = (int)months;
    win->seconds = seconds;
    return RL_OK;
}

int64_t
rl_window_floor(const struct rl_window *win, int64_t epoch)
{
    if (win->months > 0) {
        int64_t days = floor_div(epoch, SECONDS_PER_DAY);
        int64_t y, idx;
        int m, d;

        civil_from_days(days, &y, &m, &d);
        /* Month index since 0000-01, floored to a multiple of months. */
        idx = floor_div(y * 12 + (m - 1), win->months) * win->months;
        y = floor_div(idx, 12);
        m = (int)(idx - y * 12) + 1;
        return days_from_civil(y, m, 1) * SECONDS_PER_DAY;
    }
    if (win->seconds > 0) {
        /* ISO weeks start on Monday, so whole-week windows are aligned to a
         * Monday rather than to the Thursday the Unix epoch fell on. */
        int64_t base = win->seconds % SECONDS_PER_WEEK == 0 ? MONDAY_EPOCH : 0;

        return base + floor_div(epoch - base, win->seconds) * win->seconds;
    }
    return epoch;
}
