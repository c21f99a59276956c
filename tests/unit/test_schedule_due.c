/* rl/schedule.h: which windows a tick publishes (rl_schedule_due) under
 * each catch-up policy, the cursor after them, the bound per tick, and the
 * event a window gets (the format of `runledger publish`). */
#include <stdlib.h>

#include "rl/err.h"
#include "rl/schedule.h"
#include "rltest.h"

/* A schedule every minute from t0, cursor at t0. */
static void
minutely(struct rl_schedule *s, int catchup, int64_t catchup_window, int64_t t0)
{
    char errstr[256];

    memset(s, 0, sizeof(*s));
    s->name = strdup("m");
    s->job = strdup("j");
    s->tenant = strdup("t");
    s->cron = strdup("* * * * *");
    s->timezone = strdup("UTC");
    s->version = strdup("v1");
    s->window = strdup("PT1M");
    s->request = strdup("{\"model\":\"m\",\"messages\":[]}");
    s->catchup = catchup;
    s->catchup_window = catchup_window;
    s->published_through = t0;
    RL_REQUIRE(rl_schedule_prepare(s, 0, errstr, sizeof(errstr)) == 0);
}

#define T0 1800000000 /* a whole minute: 2027-01-15T08:00:00Z */

static void
test_on_time_windows_published_under_every_policy(void)
{
    for (int p = RL_CATCHUP_SKIP; p <= RL_CATCHUP_ALL; p++) {
        struct rl_schedule s;
        int64_t starts[8], through = 0;
        size_t n;

        minutely(&s, p, 0, T0);
        /* Previous tick at T0 + 59: the window at T0 + 60 is on time. */
        n = rl_schedule_due(&s, T0 + 60, T0 + 59, starts, 8, &through);
        RL_CHECK_INTEQ(n, 1);
        RL_CHECK_INTEQ(starts[0], T0 + 60);
        RL_CHECK_INTEQ(through, T0 + 60);
        rl_schedule_clear(&s);
    }
}

static void
test_missed_windows_follow_the_policy(void)
{
    struct rl_schedule s;
    int64_t starts[16], through = 0;
    size_t n;

    /* Down from T0 to T0 + 330: windows at +60 .. +300 were missed, the
     * one at +360 is due at now = +360 with missed_before = +359. */
    minutely(&s, RL_CATCHUP_ALL, 0, T0);
    n = rl_schedule_due(&s, T0 + 360, T0 + 359, starts, 16, &through);
    RL_CHECK_INTEQ(n, 6);
    RL_CHECK_INTEQ(starts[0], T0 + 60);
    RL_CHECK_INTEQ(starts[5], T0 + 360);
    RL_CHECK_INTEQ(through, T0 + 360);
    rl_schedule_clear(&s);

    minutely(&s, RL_CATCHUP_LATEST, 0, T0);
    n = rl_schedule_due(&s, T0 + 360, T0 + 359, starts, 16, &through);
    RL_CHECK_INTEQ(n, 2);
    RL_CHECK_INTEQ(starts[0], T0 + 300);
    RL_CHECK_INTEQ(starts[1], T0 + 360);
    RL_CHECK_INTEQ(through, T0 + 360);
    rl_schedule_clear(&s);

    minutely(&s, RL_CATCHUP_SKIP, 0, T0);
    n = rl_schedule_due(&s, T0 + 360, T0 + 359, starts, 16, &through);
    RL_CHECK_INTEQ(n, 1);
    RL_CHECK_INTEQ(starts[0], T0 + 360);
    RL_CHECK_INTEQ(through, T0 + 360);
    rl_schedule_clear(&s);

    /* Only missed windows, none on time: latest publishes the last. */
    minutely(&s, RL_CATCHUP_LATEST, 0, T0);
    n = rl_schedule_due(&s, T0 + 330, T0 + 330, starts, 16, &through);
    RL_CHECK_INTEQ(n, 1);
    RL_CHECK_INTEQ(starts[0], T0 + 300);
    RL_CHECK_INTEQ(through, T0 + 300);
    rl_schedule_clear(&s);
}

static void
test_catchup_window_bounds_the_age(void)
{
    struct rl_schedule s;
    int64_t starts[16], through = 0;
    size_t n;

    /* all, but none older than 150 s: +180 .. +300 of +60 .. +300. */
    minutely(&s, RL_CATCHUP_ALL, 150, T0);
    n = rl_schedule_due(&s, T0 + 330, T0 + 330, starts, 16, &through);
    RL_CHECK_INTEQ(n, 3);
    RL_CHECK_INTEQ(starts[0], T0 + 180);
    RL_CHECK_INTEQ(through, T0 + 300);
    rl_schedule_clear(&s);

    /* latest whose last missed window is too old: nothing, and the
     * cursor passes every window older than the catch-up window. */
    minutely(&s, RL_CATCHUP_LATEST, 10, T0);
    n = rl_schedule_due(&s, T0 + 330, T0 + 330, starts, 16, &through);
    RL_CHECK_INTEQ(n, 0);
    RL_CHECK_INTEQ(through, T0 + 319);
    rl_schedule_clear(&s);
}

static void
test_bound_per_tick_resumes_where_it_stopped(void)
{
    struct rl_schedule s;
    int64_t starts[4], through = 0, seen = 0;
    size_t n;

    minutely(&s, RL_CATCHUP_ALL, 0, T0);
    /* 10 missed windows, 4 a tick: the cursor stops at the 4th. */
    do {
        n = rl_schedule_due(&s, T0 + 600, T0 + 600, starts, 4, &through);
        for (size_t i = 0; i < n; i++)
            RL_CHECK_INTEQ(starts[i], T0 + 60 * (++seen));
        s.published_through = through;
    } while (n == 4);
    RL_CHECK_INTEQ(seen, 10);
    RL_CHECK_INTEQ(through, T0 + 600);
    rl_schedule_clear(&s);
}

static void
test_event_is_the_publish_format(void)
{
    struct rl_schedule s;
    char errstr[256];
    char *text;

    minutely(&s, RL_CATCHUP_ALL, 0, T0);
    free(s.notify);
    s.notify = strdup("email,slack");
    s.input = strdup("{\"a\":1}");
    text = rl_schedule_event(&s, T0 + 60, errstr, sizeof(errstr));
    RL_REQUIRE(text != NULL);
    RL_CHECK_STREQ(text, "{\"job\":\"j\",\"tenant\":\"t\",\"scheduled_at\":"
                         "\"2027-01-15T08:01:00+00:00\",\"version\":\"v1\","
                         "\"window\":\"PT1M\",\"input\":{\"a\":1},\"request\":"
                         "{\"model\":\"m\",\"messages\":[]},\"notify\":"
                         "[\"email\",\"slack\"]}");
    free(text);
    rl_schedule_clear(&s);
}

int
main(void)
{
    test_on_time_windows_published_under_every_policy();
    test_missed_windows_follow_the_policy();
    test_catchup_window_bounds_the_age();
    test_bound_per_tick_resumes_where_it_stopped();
    test_event_is_the_publish_format();
    RL_TEST_END();
}
