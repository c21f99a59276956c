/* Time zones from the system's TZif files (RFC 8536): the offset changes of
 * a zone as one sorted array, the file's POSIX TZ footer expanded into it up
 * to RL_TZ_LAST_YEAR, and the wall-clock to UTC rule of schedules
 * (rl_tz_from_local). No call here reads TZ or calls localtime(): a
 * scheduler holds many zones at once. */
#include "rl/tz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/err.h"

#define RL_TZ_LAST_YEAR 2200
#define RL_TZ_MAX_FILE (1 << 20)

struct rl_tz {
    char *name;
    int32_t off0; /* before the first change */
    size_t n;
    int64_t *at;  /* UTC instant of each change, ascending */
    int32_t *off; /* offset from that instant on */
};

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
    int64_t era;
    int64_t yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int
is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int
days_in_month(int64_t y, int m)
{
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    return m == 2 && is_leap(y) ? 29 : dm[m - 1];
}

static int64_t
year_of(int64_t epoch)
{
    int64_t z = (epoch >= 0 ? epoch : epoch - 86399) / 86400 + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;

    return yoe + era * 400 + (m <= 2);
}

static int64_t
be(const unsigned char *p, int bytes)
{
    uint64_t v = 0;

    for (int i = 0; i < bytes; i++)
        v = (v << 8) | p[i];
    if (bytes == 4)
        return (int64_t)(int32_t)(uint32_t)v;
    return (int64_t)v;
}

/* One POSIX TZ date rule: "Jn", "n" or "Mm.w.d", with its time of day. */
struct posix_rule {
    char kind; /* 'J', 'D' (zero-based day), 'M' */
    int a, b, c;
    int32_t secs; /* local time of day of the change */
};

struct posix_tz {
    int32_t std_off, dst_off; /* east positive */
    int has_dst;
    struct posix_rule start, end;
};

static const char *
posix_name(const char *p)
{
    if (*p == '<') {
        const char *q = strchr(p, '>');

        return q ? q + 1 : NULL;
    }
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')))
        return NULL;
    while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))
        p++;
    return p;
}

/* [+-]hh[:mm[:ss]] into seconds; NULL when malformed. */
static const char *
posix_hms(const char *p, int32_t *secs, int max_hours)
{
    int sign = 1;
    long h = 0, m = 0, s = 0;
    char *end;

    if (*p == '+' || *p == '-')
        sign = *p++ == '-' ? -1 : 1;
    if (*p < '0' || *p > '9')
        return NULL;
    h = strtol(p, &end, 10);
    p = end;
    if (*p == ':') {
        m = strtol(p + 1, &end, 10);
        p = end;
        if (*p == ':') {
            s = strtol(p + 1, &end, 10);
            p = end;
        }
    }
    if (h > max_hours || m > 59 || s > 59)
        return NULL;
    *secs = (int32_t)(sign * (h * 3600 + m * 60 + s));
    return p;
}

static const char *
posix_date(const char *p, struct posix_rule *r)
{
    char *end;

    r->secs = 7200;
    if (*p == 'M') {
        r->kind = 'M';
        r->a = (int)strtol(p + 1, &end, 10);
        if (*end != '.')
            return NULL;
        r->b = (int)strtol(end + 1, &end, 10);
        if (*end != '.')
            return NULL;
        r->c = (int)strtol(end + 1, &end, 10);
        if (r->a < 1 || r->a > 12 || r->b < 1 || r->b > 5 || r->c < 0 ||
            r->c > 6)
            return NULL;
    } else if (*p == 'J') {
        r->kind = 'J';
        r->a = (int)strtol(p + 1, &end, 10);
        if (r->a < 1 || r->a > 365)
            return NULL;
    } else if (*p >= '0' && *p <= '9') {
        r->kind = 'D';
        r->a = (int)strtol(p, &end, 10);
        if (r->a > 365)
            return NULL;
    } else {
        return NULL;
    }
    p = end;
    if (*p == '/')
        p = posix_hms(p + 1, &r->secs, 167);
    return p;
}

static int
posix_parse(const char *s, struct posix_tz *ptz)
{
    const char *p = posix_name(s);
    int32_t v;

    memset(ptz, 0, sizeof(*ptz));
    if (!p || !(p = posix_hms(p, &v, 24)))
        return -1;
    ptz->std_off = -v;
    if (*p == '\0')
        return 0;
    if (!(p = posix_name(p)))
        return -1;
    ptz->has_dst = 1;
    ptz->dst_off = ptz->std_off + 3600;
    if (*p != ',' && *p != '\0') {
        if (!(p = posix_hms(p, &v, 24)))
            return -1;
        ptz->dst_off = -v;
    }
    if (*p == '\0') {
        /* POSIX leaves the default rule to the implementation; the tz
         * database never writes a DST zone without one. */
        return -1;
    }
    if (*p != ',' || !(p = posix_date(p + 1, &ptz->start)) || *p != ',' ||
        !(p = posix_date(p + 1, &ptz->end)) || *p != '\0')
        return -1;
    return 0;
}

/* The local midnight (naive seconds) of the rule's day in year y. */
static int64_t
rule_day(const struct posix_rule *r, int64_t y)
{
    int64_t jan1 = days_from_civil(y, 1, 1);

    if (r->kind == 'J') {
        int64_t d = r->a - 1;

        if (is_leap(y) && r->a >= 60)
            d++;
        return (jan1 + d) * 86400;
    }
    if (r->kind == 'D')
        return (jan1 + r->a) * 86400;
    {
        int64_t first = days_from_civil(y, r->a, 1);
        int wd = (int)(((first % 7) + 7 + 4) % 7); /* 1970-01-01: Thu */
        int64_t d = first + ((r->c - wd + 7) % 7) + 7 * (r->b - 1);

        while (d >= first + days_in_month(y, r->a))
            d -= 7;
        return d * 86400;
    }
}

static int
push(struct rl_tz *tz, size_t *cap, int64_t at, int32_t off)
{
    if (tz->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        int64_t *nat = realloc(tz->at, ncap * sizeof(*nat));
        int32_t *noff;

        if (!nat)
            return -1;
        tz->at = nat;
        noff = realloc(tz->off, ncap * sizeof(*noff));
        if (!noff)
            return -1;
        tz->off = noff;
        *cap = ncap;
    }
    tz->at[tz->n] = at;
    tz->off[tz->n] = off;
    tz->n++;
    return 0;
}

/* Appends the changes the footer rule makes after the file's last one. */
static int
expand_posix(struct rl_tz *tz, size_t *cap, const struct posix_tz *ptz)
{
    int64_t last = tz->n ? tz->at[tz->n - 1] : INT64_MIN;
    int32_t cur = tz->n ? tz->off[tz->n - 1] : tz->off0;
    int64_t y0 = tz->n ? year_of(last) : 1900;

    if (!ptz->has_dst) {
        if (cur != ptz->std_off &&
            push(tz, cap, tz->n ? last + 1 : INT64_MIN / 2, ptz->std_off))
            return -1;
        return 0;
    }
    for (int64_t y = y0; y <= RL_TZ_LAST_YEAR; y++) {
        int64_t s = rule_day(&ptz->start, y) + ptz->start.secs - ptz->std_off;
        int64_t e = rule_day(&ptz->end, y) + ptz->end.secs - ptz->dst_off;
        int64_t first = s < e ? s : e, second = s < e ? e : s;
        int32_t off1 = s < e ? ptz->dst_off : ptz->std_off;
        int32_t off2 = s < e ? ptz->std_off : ptz->dst_off;

        if (first > last && off1 != cur) {
            if (push(tz, cap, first, off1))
                return -1;
            cur = off1;
            last = first;
        }
        if (second > last && off2 != cur) {
            if (push(tz, cap, second, off2))
                return -1;
            cur = off2;
            last = second;
        }
    }
    return 0;
}

static int
name_ok(const char *name)
{
    if (!name[0] || name[0] == '/' || strstr(name, "..") || strlen(name) > 255)
        return 0;
    for (const char *p = name; *p; p++) {
        char c = *p;

        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '+' ||
              c == '/'))
            return 0;
    }
    return 1;
}

static unsigned char *
read_all(const char *path, size_t *len, char *errstr, size_t errstr_size)
{
    FILE *fp = fopen(path, "rb");
    unsigned char *buf;

    if (!fp) {
        rl_set_err(errstr, errstr_size, "could not open %s: %s", path,
                   strerror(errno));
        return NULL;
    }
    buf = malloc(RL_TZ_MAX_FILE);
    if (!buf) {
        fclose(fp);
        rl_set_err(errstr, errstr_size, "out of memory");
        return NULL;
    }
    *len = fread(buf, 1, RL_TZ_MAX_FILE, fp);
    fclose(fp);
    return buf;
}

struct tzif_counts {
    int64_t isut, isstd, leap, time, type, chr;
};

static int
read_counts(const unsigned char *p, size_t avail, struct tzif_counts *c)
{
    if (avail < 44 || memcmp(p, "TZif", 4) != 0)
        return -1;
    c->isut = be(p + 20, 4);
    c->isstd = be(p + 24, 4);
    c->leap = be(p + 28, 4);
    c->time = be(p + 32, 4);
    c->type = be(p + 36, 4);
    c->chr = be(p + 40, 4);
    if (c->isut < 0 || c->isstd < 0 || c->leap < 0 || c->time < 0 ||
        c->type < 1 || c->type > 256 || c->chr < 0)
        return -1;
    return 0;
}

static size_t
block_size(const struct tzif_counts *c, int tbytes)
{
    return (size_t)(c->time * tbytes + c->time + c->type * 6 + c->chr +
                    c->leap * (tbytes + 4) + c->isstd + c->isut);
}

struct rl_tz *
rl_tz_load(const char *name, char *errstr, size_t errstr_size)
{
    const char *dir = getenv("TZDIR");
    char path[1024];
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0, off;
    struct tzif_counts c;
    struct rl_tz *tz = NULL;
    const unsigned char *times, *idx, *types;
    int tbytes = 4;
    char footer[256] = "";

    if (!name_ok(name)) {
        rl_set_err(errstr, errstr_size, "invalid time zone name \"%.64s\"",
                   name);
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/%s",
             dir && dir[0] ? dir : "/usr/share/zoneinfo", name);
    buf = read_all(path, &len, errstr, errstr_size);
    if (!buf)
        return NULL;
    if (read_counts(buf, len, &c) != 0)
        goto bad;
    off = 44;
    if (buf[4] >= '2') {
        off += block_size(&c, 4);
        if (off > len || read_counts(buf + off, len - off, &c) != 0)
            goto bad;
        off += 44;
        tbytes = 8;
    }
    if (off + block_size(&c, tbytes) > len)
        goto bad;
    times = buf + off;
    idx = times + c.time * tbytes;
    types = idx + c.time;
    if (tbytes == 8) {
        size_t f = off + block_size(&c, tbytes);
        const unsigned char *nl;

        if (f < len && buf[f] == '\n' &&
            (nl = memchr(buf + f + 1, '\n', len - f - 1)) != NULL &&
            (size_t)(nl - (buf + f + 1)) < sizeof(footer)) {
            memcpy(footer, buf + f + 1, (size_t)(nl - (buf + f + 1)));
            footer[nl - (buf + f + 1)] = '\0';
        }
    }

    tz = calloc(1, sizeof(*tz));
    if (!tz || !(tz->name = strdup(name)))
        goto nomem;
    tz->off0 = (int32_t)be(types, 4);
    for (int64_t i = 0; i < c.time; i++) {
        int64_t at = be(times + i * tbytes, tbytes);
        unsigned t = idx[i];
        int32_t o;

        if (t >= c.type)
            goto bad;
        o = (int32_t)be(types + 6 * t, 4);
        /* Only the offset matters here: a change of name or of the DST
         * flag alone moves no wall clock. */
        if (o == (tz->n ? tz->off[tz->n - 1] : tz->off0))
            continue;
        if (tz->n && at <= tz->at[tz->n - 1])
            goto bad;
        if (push(tz, &cap, at, o))
            goto nomem;
    }
    if (footer[0]) {
        struct posix_tz ptz;

        if (posix_parse(footer, &ptz) != 0) {
            rl_set_err(errstr, errstr_size,
                       "could not read time zone %s: rule \"%s\" not "
                       "understood",
                       name, footer);
            goto fail;
        }
        if (expand_posix(tz, &cap, &ptz))
            goto nomem;
    }
    free(buf);
    return tz;

bad:
    rl_set_err(errstr, errstr_size, "could not read time zone %s: %s", name,
               "not a TZif file");
    goto fail;
nomem:
    rl_set_err(errstr, errstr_size, "out of memory");
fail:
    free(buf);
    rl_tz_destroy(tz);
    return NULL;
}

void
rl_tz_destroy(struct rl_tz *tz)
{
    if (!tz)
        return;
    free(tz->name);
    free(tz->at);
    free(tz->off);
    free(tz);
}

const char *
rl_tz_name(const struct rl_tz *tz)
{
    return tz->name;
}

/* Index of the last change at or before utc, or -1. */
static long
change_at(const struct rl_tz *tz, int64_t utc)
{
    size_t lo = 0, hi = tz->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (tz->at[mid] <= utc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

int32_t
rl_tz_offset(const struct rl_tz *tz, int64_t utc)
{
    long i = change_at(tz, utc);

    return i < 0 ? tz->off0 : tz->off[i];
}

int64_t
rl_tz_to_local(const struct rl_tz *tz, int64_t utc)
{
    return utc + rl_tz_offset(tz, utc);
}

int64_t
rl_tz_from_local(const struct rl_tz *tz, int64_t local, int *kind)
{
    /* Every change within two days of local on either side: no zone moves
     * its clock by more than a day at once, nor twice within two days. */
    long first = change_at(tz, local - 2 * 86400);
    long last = change_at(tz, local + 2 * 86400);
    int64_t best = INT64_MAX, other = INT64_MAX;
    int found = 0;

    for (long i = first; i <= last; i++) {
        int32_t o = i < 0 ? tz->off0 : tz->off[i];
        int64_t u = local - o;

        if (rl_tz_offset(tz, u) != o || u == best || u == other)
            continue;
        found++;
        if (u < best) {
            other = best;
            best = u;
        } else {
            other = u;
        }
    }
    if (found) {
        if (kind)
            *kind = found > 1 ? 1 : 0;
        return best;
    }
    /* A gap: the clock jumped from before local to after it at change i,
     * the first change whose new offset puts its instant past local. */
    if (kind)
        *kind = 2;
    for (long i = first + 1; i <= last; i++) {
        int32_t before = i - 1 < 0 ? tz->off0 : tz->off[i - 1];

        if (tz->at[i] + before <= local && tz->at[i] + tz->off[i] > local)
            return tz->at[i];
    }
    /* Unreachable for a well-formed zone; stay monotonic regardless. */
    return local - rl_tz_offset(tz, local);
}
