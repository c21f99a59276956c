/* rl/cron.h and rl/tz.h: cron syntax, refusals, and window starts across
 * the DST transitions of the zones the scheduler documents. Expected
 * instants are written as RFC 3339 UTC and were checked by hand against
 * the tz database (zdump -v). */
#include "rl/cron.h"
#include "rl/err.h"
#include "rl/timefmt.h"
#include "rl/tz.h"
#include "rltest.h"

static int64_t
at(const char *rfc3339)
{
    int64_t epoch = 0;
    char errstr[128];

    RL_REQUIRE(rl_time_parse(rfc3339, &epoch, NULL, errstr, sizeof(errstr)) ==
               0);
    return epoch;
}

static struct rl_tz *
zone(const char *name)
{
    char errstr[256];
    struct rl_tz *tz = rl_tz_load(name, errstr, sizeof(errstr));

    if (!tz)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(tz != NULL);
    return tz;
}

/* Checks that the window starts of expr in zone after `from` are want[]. */
static void
check_next(const char *expr, const char *tzname, const char *from,
           const char *const *want, int n)
{
    struct rl_cron cron;
    char errstr[256];
    struct rl_tz *tz = zone(tzname);
    int64_t t = at(from);

    RL_REQUIRE(rl_cron_parse(expr, 0, &cron, errstr, sizeof(errstr)) == 0);
    for (int i = 0; i < n; i++) {
        char got[RL_TIME_UTC_SIZE];

        t = rl_cron_next(&cron, tz, t);
        rl_time_format_utc(t, got);
        if (strcmp(got, want[i]) != 0)
            fprintf(stderr, "%s in %s after %s, #%d\n", expr, tzname, from, i);
        RL_CHECK_STREQ(got, want[i]);
    }
    rl_tz_destroy(tz);
}

static void
check_refused(const char *expr, int flags)
{
    struct rl_cron cron;
    char errstr[256] = "";

    RL_CHECK_INTEQ(rl_cron_parse(expr, flags, &cron, errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    RL_CHECK(errstr[0] != '\0');
}

static void
test_syntax_refusals(void)
{
    check_refused("", 0);
    check_refused("* * * *", 0);
    check_refused("0 * * * * *", 0); /* seconds only with the flag */
    check_refused("60 * * * *", 0);
    check_refused("* 24 * * *", 0);
    check_refused("* * 0 * *", 0);
    check_refused("* * * 13 *", 0);
    check_refused("* * * * 8", 0);
    check_refused("5-1 * * * *", 0);
    check_refused("*/0 * * * *", 0);
    check_refused("1,,2 * * * *", 0);
    check_refused("a * * * *", 0);
    check_refused("* * * JANUARY *", 0);
    check_refused("0 0 30 2 *", 0);   /* never matches */
    check_refused("0 0 31 4,6 *", 0); /* never matches */
    check_refused("@reboot", 0);
    check_refused("60 * * * * *", RL_CRON_SECONDS);
}

static void
test_fields_lists_ranges_steps_names(void)
{
    struct rl_cron c;
    char errstr[256];

    RL_REQUIRE(rl_cron_parse("1,5-7,*/20 */6 1/10 jan-Mar,DEC mon-FRI", 0, &c,
                             errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(c.second, 1);
    RL_CHECK_INTEQ(c.minute, (1ULL << 0) | (1ULL << 1) | (1ULL << 5) |
                                 (1ULL << 6) | (1ULL << 7) | (1ULL << 20) |
                                 (1ULL << 40));
    RL_CHECK_INTEQ(c.hour, (1u << 0) | (1u << 6) | (1u << 12) | (1u << 18));
    RL_CHECK_INTEQ(c.dom, (1u << 1) | (1u << 11) | (1u << 21) | (1u << 31));
    RL_CHECK_INTEQ(c.month, (1u << 1) | (1u << 2) | (1u << 3) | (1u << 12));
    RL_CHECK_INTEQ(c.dow, 0x3e);
    RL_CHECK(!c.dom_any && !c.dow_any);
    /* 7 is Sunday; "*" and x/n stop at 6. */
    RL_REQUIRE(rl_cron_parse("0 0 * * 5-7", 0, &c, errstr, sizeof(errstr)) ==
               0);
    RL_CHECK_INTEQ(c.dow, 0x61);
    RL_REQUIRE(rl_cron_parse("0 0 * * 1/2", 0, &c, errstr, sizeof(errstr)) ==
               0);
    RL_CHECK_INTEQ(c.dow, 0x2a);
    RL_REQUIRE(rl_cron_parse("@weekly", 0, &c, errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(c.dow, 1);
    RL_CHECK(c.dom_any);
    RL_REQUIRE(rl_cron_parse("15 * * * * *", RL_CRON_SECONDS, &c, errstr,
                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(c.second, 1ULL << 15);
    RL_CHECK_INTEQ(c.minute, (1ULL << 60) - 1);
}

static void
test_macros_in_utc(void)
{
    static const char *const hourly[] = {"2026-05-04T11:00:00+00:00",
                                         "2026-05-04T12:00:00+00:00"};
    static const char *const daily[] = {"2026-05-05T00:00:00+00:00",
                                        "2026-05-06T00:00:00+00:00"};
    static const char *const weekly[] = {"2026-05-10T00:00:00+00:00",
                                         "2026-05-17T00:00:00+00:00"};
    static const char *const monthly[] = {"2026-06-01T00:00:00+00:00",
                                          "2026-07-01T00:00:00+00:00"};
    static const char *const yearly[] = {"2027-01-01T00:00:00+00:00"};

    check_next("@hourly", "UTC", "2026-05-04T10:00:00Z", hourly, 2);
    check_next("@daily", "UTC", "2026-05-04T10:00:00Z", daily, 2);
    check_next("@weekly", "UTC", "2026-05-04T10:00:00Z", weekly, 2);
    check_next("@monthly", "UTC", "2026-05-04T10:00:00Z", monthly, 2);
    check_next("@yearly", "UTC", "2026-05-04T10:00:00Z", yearly, 1);
}

static void
test_day_of_month_or_day_of_week(void)
{
    /* Both restricted: Fridays and the 13th. */
    static const char *const either[] = {
        "2026-02-06T00:00:00+00:00", "2026-02-13T00:00:00+00:00",
        "2026-02-20T00:00:00+00:00", "2026-02-27T00:00:00+00:00",
        "2026-03-06T00:00:00+00:00", "2026-03-13T00:00:00+00:00"};
    /* Day-of-month '*': only Fridays. */
    static const char *const fridays[] = {"2026-02-06T00:00:00+00:00",
                                          "2026-02-13T00:00:00+00:00"};

    check_next("0 0 13 * 5", "UTC", "2026-02-01T00:00:00Z", either, 6);
    check_next("0 0 * * fri", "UTC", "2026-02-01T00:00:00Z", fridays, 2);
}

static void
test_berlin_spring_forward_runs_at_the_jump(void)
{
    /* 2026-03-29 01:00 UTC: 02:00 CET becomes 03:00 CEST. */
    static const char *const daily[] = {"2026-03-28T01:30:00+00:00",
                                        "2026-03-29T01:00:00+00:00",
                                        "2026-03-30T00:30:00+00:00"};
    /* Every 15 minutes: 02:00-02:45 do not exist and run once at 03:00. */
    static const char *const quarter[] = {"2026-03-29T00:45:00+00:00",
                                          "2026-03-29T01:00:00+00:00",
                                          "2026-03-29T01:15:00+00:00"};

    check_next("30 2 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z", daily, 3);
    check_next("*/15 * * * *", "Europe/Berlin", "2026-03-29T00:40:00Z", quarter,
               3);
}

static void
test_berlin_fall_back_runs_once(void)
{
    /* 2026-10-25 01:00 UTC: 03:00 CEST becomes 02:00 CET; 02:30 occurs
     * twice and runs at the first. */
    static const char *const daily[] = {"2026-10-25T00:30:00+00:00",
                                        "2026-10-26T01:30:00+00:00"};
    /* Hourly: 02:00 CEST runs, 02:00 CET does not; 03:00 CET next. */
    static const char *const hourly[] = {
        "2026-10-24T23:00:00+00:00", "2026-10-25T00:00:00+00:00",
        "2026-10-25T02:00:00+00:00", "2026-10-25T03:00:00+00:00"};

    check_next("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", daily, 2);
    check_next("0 * * * *", "Europe/Berlin", "2026-10-24T22:30:00Z", hourly, 4);
}

static void
test_new_york_transitions(void)
{
    static const char *const spring[] = {"2026-03-08T07:00:00+00:00",
                                         "2026-03-09T06:00:00+00:00"};
    static const char *const fall[] = {"2026-11-01T05:30:00+00:00",
                                       "2026-11-02T06:30:00+00:00"};

    check_next("0 2 * * *", "America/New_York", "2026-03-08T00:00:00Z", spring,
               2);
    check_next("30 1 * * *", "America/New_York", "2026-11-01T00:00:00Z", fall,
               2);
}

static void
test_half_hour_and_quarter_hour_zones(void)
{
    /* Lord Howe: 2026-10-04 02:00 +10:30 becomes 02:30 +11. */
    static const char *const lord_howe[] = {"2026-10-03T15:30:00+00:00",
                                            "2026-10-04T15:15:00+00:00"};
    /* Kathmandu +05:45: local midnight is 18:15 UTC. */
    static const char *const kathmandu[] = {"2026-01-01T18:15:00+00:00",
                                            "2026-01-02T18:15:00+00:00"};

    check_next("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z",
               lord_howe, 2);
    check_next("@daily", "Asia/Kathmandu", "2026-01-01T12:00:00Z", kathmandu,
               2);
}

static void
test_apia_skipped_day_runs_at_the_jump(void)
{
    /* 2011-12-29 24:00 -10 became 2011-12-31 00:00 +14: the noon of the
     * 30th never happened and runs at the jump (10:00 UTC). */
    static const char *const noon[] = {"2011-12-29T22:00:00+00:00",
                                       "2011-12-30T10:00:00+00:00",
                                       "2011-12-30T22:00:00+00:00"};

    check_next("0 12 * * *", "Pacific/Apia", "2011-12-29T00:00:00Z", noon, 3);
}

static void
test_zone_names_refused(void)
{
    char errstr[256];

    RL_CHECK(rl_tz_load("../etc/passwd", errstr, sizeof(errstr)) == NULL);
    RL_CHECK(rl_tz_load("/etc/localtime", errstr, sizeof(errstr)) == NULL);
    RL_CHECK(rl_tz_load("Mars/Olympus_Mons", errstr, sizeof(errstr)) == NULL);
    RL_CHECK(rl_tz_load("Europe", errstr, sizeof(errstr)) == NULL);
}

static void
test_far_future_follows_the_zone_rule(void)
{
    struct rl_tz *tz = zone("Europe/Berlin");

    /* 2150-07-01 is past every explicit change: the POSIX rule applies. */
    RL_CHECK_INTEQ(rl_tz_offset(tz, at("2150-07-01T00:00:00Z")), 7200);
    RL_CHECK_INTEQ(rl_tz_offset(tz, at("2150-01-01T00:00:00Z")), 3600);
    rl_tz_destroy(tz);
}

int
main(void)
{
    test_syntax_refusals();
    test_fields_lists_ranges_steps_names();
    test_macros_in_utc();
    test_day_of_month_or_day_of_week();
    test_berlin_spring_forward_runs_at_the_jump();
    test_berlin_fall_back_runs_once();
    test_new_york_transitions();
    test_half_hour_and_quarter_hour_zones();
    test_apia_skipped_day_runs_at_the_jump();
    test_zone_names_refused();
    test_far_future_follows_the_zone_rule();
    RL_TEST_END();
}
