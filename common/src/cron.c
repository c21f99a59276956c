/* Cron expressions: parsing into one bitmap per field, and the next window
 * start after an instant in a time zone (rl_tz_from_local decides what a
 * repeated or skipped wall-clock time means). */
#include "rl/cron.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rl/err.h"
#include "rl/tz.h"

#define TEN_YEARS (10LL * 366 * 86400)

struct field {
    const char *what;
    int lo, hi;
    const char *const *names; /* names[i] stands for lo + i, or NULL */
};

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may",
                                          "jun", "jul", "aug", "sep", "oct",
                                          "nov", "dec", NULL};
static const char *const dow_names[] = {"sun", "mon", "tue", "wed",
                                        "thu", "fri", "sat", NULL};

static const struct field fields[] = {
    {"second", 0, 59, NULL},       {"minute", 0, 59, NULL},
    {"hour", 0, 23, NULL},         {"day-of-month", 1, 31, NULL},
    {"month", 1, 12, month_names}, {"day-of-week", 0, 7, dow_names},
};

static int
value(const struct field *f, const char **p, int *out)
{
    const char *s = *p;

    if (isdigit((unsigned char)*s)) {
        long v = 0;

        while (isdigit((unsigned char)*s) && v < 1000)
            v = v * 10 + (*s++ - '0');
        if (isdigit((unsigned char)*s) || v < f->lo || v > f->hi)
            return -1;
        *out = (int)v;
        *p = s;
        return 0;
    }
    if (f->names) {
        for (int i = 0; f->names[i]; i++) {
            if (strncasecmp(s, f->names[i], 3) == 0 &&
                !isalpha((unsigned char)s[3])) {
                *out = (f->lo == 1 ? 1 : 0) + i;
                *p = s + 3;
                return 0;
            }
        }
    }
    return -1;
}

/* Parses one field of len bytes at s into *bits; *any when it is '*'/'?'. */
static int
parse_field(const struct field *f, const char *s, size_t len, uint64_t *bits,
            int *any, char *errstr, size_t errstr_size)
{
    char buf[256];
    char *save = NULL, *item;

    if (len == 0 || len >= sizeof(buf))
        goto bad;
    memcpy(buf, s, len);
    buf[len] = '\0';
    /* strtok_r would skip an empty item silently. */
    if (buf[0] == ',' || buf[len - 1] == ',' || strstr(buf, ",,"))
        goto bad;
    *bits = 0;
    *any = strcmp(buf, "*") == 0 || strcmp(buf, "?") == 0;
    for (item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        const char *p = item;
        int a, b, step = 1;

        /* Day-of-week 7 is Sunday again: '*' and "x/n" stop at 6. */
        int top = f->hi == 7 ? 6 : f->hi;

        if (*p == '*' || *p == '?') {
            a = f->lo;
            b = top;
            p++;
        } else {
            if (value(f, &p, &a) != 0)
                goto bad;
            b = a;
            if (*p == '-') {
                p++;
                if (value(f, &p, &b) != 0 || b < a)
                    goto bad;
            } else if (*p == '/') {
                b = top;
            }
        }
        if (*p == '/') {
            long st = 0;

            p++;
            if (!isdigit((unsigned char)*p))
                goto bad;
            while (isdigit((unsigned char)*p) && st < 1000)
                st = st * 10 + (*p++ - '0');
            if (st < 1 || st > f->hi - f->lo + 1)
                goto bad;
            step = (int)st;
        }
        if (*p != '\0')
            goto bad;
        for (int v = a; v <= b; v += step)
            *bits |= 1ULL << v;
    }
    if (*bits == 0)
        goto bad;
    return 0;
bad:
    rl_set_err(errstr, errstr_size, "invalid cron %s field \"%.*s\"", f->what,
               (int)(len < 64 ? len : 64), s);
    return RL_ERR_INVALID;
}

static const char *
macro(const char *expr)
{
    static const struct {
        const char *name, *expr;
    } m[] = {
        {"@yearly", "0 0 1 1 *"},  {"@annually", "0 0 1 1 *"},
        {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
        {"@daily", "0 0 * * *"},   {"@midnight", "0 0 * * *"},
        {"@hourly", "0 * * * *"},
    };

    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
        if (strcasecmp(expr, m[i].name) == 0)
            return m[i].expr;
    return NULL;
}

static int
month_days_max(int m)
{
    return m == 2 ? 29 : (m == 4 || m == 6 || m == 9 || m == 11) ? 30 : 31;
}

int
rl_cron_parse(const char *expr, int flags, struct rl_cron *cron, char *errstr,
              size_t errstr_size)
{
    const char *starts[7];
    size_t lens[7];
    int n = 0, first;
    const char *p;
    uint64_t bits[6];
    int any[6] = {0};

    memset(cron, 0, sizeof(*cron));
    while (isspace((unsigned char)*expr))
        expr++;
    if (expr[0] == '@') {
        const char *m = macro(expr);

        if (!m) {
            rl_set_err(errstr, errstr_size, "unknown cron macro \"%.32s\"",
                       expr);
            return RL_ERR_INVALID;
        }
        expr = m;
    }
    for (p = expr; *p;) {
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        if (n == 7)
            break;
        starts[n] = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        lens[n] = (size_t)(p - starts[n]);
        n++;
    }
    if (!(n == 5 || (n == 6 && (flags & RL_CRON_SECONDS)))) {
        rl_set_err(errstr, errstr_size,
                   "a cron expression has %s fields, not %d",
                   (flags & RL_CRON_SECONDS) ? "five (or six)" : "five", n);
        return RL_ERR_INVALID;
    }
    first = n == 6 ? 0 : 1;
    bits[0] = 1; /* second 0 */
    for (int i = 0; i < n; i++) {
        int rc =
            parse_field(&fields[first + i], starts[i], lens[i],
                        &bits[first + i], &any[first + i], errstr, errstr_size);

        if (rc)
            return rc;
    }
    cron->second = bits[0];
    cron->minute = bits[1];
    cron->hour = (uint32_t)bits[2];
    cron->dom = (uint32_t)bits[3];
    cron->month = (uint16_t)bits[4];
    cron->dow = (uint8_t)((bits[5] | (bits[5] >> 7)) & 0x7f);
    cron->dom_any = (unsigned char)any[3];
    cron->dow_any = (unsigned char)any[5];
    if (!cron->dom_any && cron->dow_any) {
        int possible = 0;

        for (int m = 1; m <= 12; m++)
            for (int d = 1; d <= month_days_max(m); d++)
                possible |= (cron->month >> m & 1) && (cron->dom >> d & 1);
        if (!possible) {
            rl_set_err(errstr, errstr_size,
                       "cron expression \"%.64s\" never matches", expr);
            return RL_ERR_INVALID;
        }
    }
    return 0;
}

/* Civil date of a day count since 1970-01-01 (H. Hinnant). */
static void
civil(int64_t days, int64_t *y, int *m, int *d)
{
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;

    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int64_t
days_of(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int
day_matches(const struct rl_cron *c, int64_t days, int d)
{
    int wd = (int)(((days % 7) + 7 + 4) % 7); /* 1970-01-01: Thursday */
    int dom = (int)(c->dom >> d & 1), dow = c->dow >> wd & 1;

    if (c->dom_any || c->dow_any)
        return dom && dow;
    return dom || dow;
}

int64_t
rl_cron_next_local(const struct rl_cron *c, int64_t local)
{
    int64_t t = local + 1, limit = local + TEN_YEARS;

    while (t <= limit) {
        int64_t days = (t >= 0 ? t : t - 86399) / 86400;
        int64_t sod = t - days * 86400;
        int64_t y;
        int m, d, h = (int)(sod / 3600), mi = (int)(sod / 60 % 60);
        int s = (int)(sod % 60);

        civil(days, &y, &m, &d);
        if (!(c->month >> m & 1)) {
            t = days_of(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) * 86400;
            continue;
        }
        if (!day_matches(c, days, d)) {
            t = (days + 1) * 86400;
            continue;
        }
        if (!(c->hour >> h & 1)) {
            t = days * 86400 + (int64_t)(h + 1) * 3600;
            continue;
        }
        if (!(c->minute >> mi & 1)) {
            t = days * 86400 + h * 3600 + (int64_t)(mi + 1) * 60;
            continue;
        }
        if (!(c->second >> s & 1)) {
            t++;
            continue;
        }
        return t;
    }
    return -1;
}

int64_t
rl_cron_next(const struct rl_cron *c, const struct rl_tz *tz, int64_t after)
{
    int32_t o1 = rl_tz_offset(tz, after - 2 * 86400);
    int32_t o2 = rl_tz_offset(tz, after);
    int32_t o3 = rl_tz_offset(tz, after + 2 * 86400);
    int32_t lo = o1 < o2 ? o1 : o2;
    int64_t local;

    if (o3 < lo)
        lo = o3;
    /* A wall-clock time never stands for an instant later than itself
     * minus the smallest offset around it, so nothing at or before
     * after + lo can be the answer. */
    local = after + lo;
    for (;;) {
        int64_t u;

        local = rl_cron_next_local(c, local);
        if (local < 0)
            return -1;
        u = rl_tz_from_local(tz, local, NULL);
        if (u > after)
            return u;
    }
}
