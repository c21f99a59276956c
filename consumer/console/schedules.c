/* schedules.c: the schedules page: each schedule the user may read with
 * its last and next window and the windows of its recent past that have
 * no run, and a schedule's page with those windows one by one, each
 * linked to its run. The windows and their runs come from the
 * completeness audit's own check (rl_schedule_windows_check), so the page
 * and `runledger schedules gaps` cannot disagree. Every value from the
 * ledger goes into the page through html_esc. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_int.h"
#include "rl/config.h"
#include "rl/cron.h"
#include "rl/db_schedules.h"
#include "rl/err.h"
#include "rl/schedule.h"
#include "rl/schedule_audit.h"
#include "rl/timefmt.h"

/* Schedules per page of the list. */
#define SCHEDULES_PAGE 20
/* Windows looked at per schedule: the most recent ones, within the
 * audit's default reach (`schedules gaps` looks back P7D). */
#define WINDOWS_SHOWN 50
#define WINDOWS_REACH_S (7 * 86400)
/* A window this recent without its run is due, not missing yet: the
 * default grace of `schedules gaps` and of the scheduler's audit. */
#define WINDOWS_GRACE_S 300
/* The first span looked back for recent windows; it grows fourfold until
 * it holds WINDOWS_SHOWN windows or reaches WINDOWS_REACH_S, so a
 * schedule firing every minute is not walked back over a week. */
#define WINDOWS_FIRST_SPAN_S 60

/* A schedule as the page shows it. */
struct schedule_view {
    struct rl_schedule_window w[WINDOWS_SHOWN]; /* oldest first */
    size_t n;
    size_t missing;    /* past the grace, without a run */
    int64_t next;      /* the next window start, -1 none (or paused) */
    char invalid[256]; /* why the schedule cannot be read, "" none */
};

int
console_schedule_name_valid(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                 (i > 0 && (ch == '_' || ch == '.' || ch == '-'));

        if (!ok)
            return 0;
    }
    return 1;
}

/* The last (at most max) window starts of s in (from, to], oldest first,
 * into starts, which holds 2 * max. */
static size_t
last_windows(const struct rl_schedule *s, int64_t from, int64_t to,
             const int64_t *pauses, size_t npauses, int64_t *starts, size_t max)
{
    size_t held = 0;

    for (;;) {
        size_t k = rl_schedule_windows(s, from, to, pauses, npauses,
                                       starts + held, max);
        size_t total = held + k;

        if (total > max) {
            memmove(starts, starts + total - max, max * sizeof(*starts));
            total = max;
        }
        held = total;
        if (k < max)
            return held;
        from = starts[held - 1];
    }
}

/* Fills v for s at now (the ledger's clock). Returns 0 (v->invalid says
 * when s cannot be read) or RL_ERR_DB / RL_ERR_NOMEM with errstr. */
static int
schedule_view_fill(struct console_req *r, struct rl_schedule *s, int64_t now,
                   struct schedule_view *v, char *errstr, size_t errstr_size)
{
    int64_t starts[2 * WINDOWS_SHOWN], *pauses = NULL;
    int64_t lower = now - WINDOWS_REACH_S, span = WINDOWS_FIRST_SPAN_S;
    size_t npauses = 0;
    int err;

    memset(v, 0, sizeof(*v));
    v->next = -1;
    /* Windows of seconds exist only where the ledger accepted them
     * (`schedules set` under its test switch). */
    if (rl_schedule_prepare(s, RL_CRON_SECONDS, v->invalid,
                            sizeof(v->invalid)) != 0)
        return 0;
    if (lower < s->created_at)
        lower = s->created_at;
    err = rl_db_schedule_pauses(r->db, s->name, &pauses, &npauses, errstr,
                                errstr_size);
    if (err)
        return err;
    for (;;) {
        int64_t from = now - span < lower ? lower : now - span;

        v->n =
            last_windows(s, from, now, pauses, npauses, starts, WINDOWS_SHOWN);
        if (v->n >= WINDOWS_SHOWN || from == lower)
            break;
        span *= 4;
    }
    free(pauses);
    err = rl_schedule_windows_check(r->db, s, starts, v->n,
                                    (size_t)r->c->cfg->max_event_bytes, v->w,
                                    errstr, errstr_size);
    if (err == RL_ERR_INVALID) {
        snprintf(v->invalid, sizeof(v->invalid), "%s", errstr);
        v->n = 0;
        return 0;
    }
    if (err)
        return err;
    for (size_t i = 0; i < v->n; i++)
        v->missing += v->w[i].state == RL_WINDOW_MISSING &&
                      v->w[i].start <= now - WINDOWS_GRACE_S;
    if (!s->paused)
        v->next = rl_cron_next(&s->parsed, s->tz, now);
    return 0;
}

static void
put_time(struct rl_buf *b, int64_t t)
{
    char at[RL_TIME_UTC_SIZE];

    rl_time_format_utc(t, at);
    rl_buf_printf(b, "<time datetime=\"%s\">%s</time>", at, at);
}

/* What the ledger holds for w: the run's link, or why there is none. */
static void
put_window_state(struct rl_buf *b, const struct rl_schedule_window *w,
                 int64_t now)
{
    switch (w->state) {
    case RL_WINDOW_RUN:
        rl_buf_printf(b,
                      "<a class=\"window-run\" href=\"/runs/%s\">"
                      "<code>%.16s</code></a>",
                      w->run_id, w->run_id);
        break;
    case RL_WINDOW_CONFLICT:
        rl_buf_printf(b,
                      "<span class=\"tag tone-error\">conflict</span> "
                      "<a class=\"window-run\" href=\"/runs/%s\">"
                      "<code>%.16s</code></a> has another fingerprint",
                      w->run_id, w->run_id);
        break;
    default:
        if (w->start > now - WINDOWS_GRACE_S)
            rl_buf_puts(b, "<span class=\"tag tone-wait\">due</span>");
        else
            rl_buf_puts(b, "<span class=\"tag tone-error missing\">"
                           "missing</span>");
        break;
    }
}

static const char *
window_class(const struct rl_schedule_window *w, int64_t now)
{
    if (w->state == RL_WINDOW_RUN)
        return "run";
    if (w->state == RL_WINDOW_CONFLICT)
        return "conflict";
    return w->start > now - WINDOWS_GRACE_S ? "due" : "missing";
}

static void
put_state(struct rl_buf *b, const struct rl_schedule *s)
{
    rl_buf_puts(b, s->paused ? "<span class=\"tag tone-wait paused\">"
                               "paused</span>"
                             : "active");
    if (s->audit_only)
        rl_buf_puts(b, ", audit only");
}

static void
put_next(struct rl_buf *b, const struct rl_schedule *s,
         const struct schedule_view *v)
{
    if (s->paused)
        rl_buf_puts(b, "none while paused");
    else if (v->next >= 0)
        put_time(b, v->next);
    else
        rl_buf_puts(b, "none");
}

static void
put_last(struct rl_buf *b, const struct schedule_view *v, int64_t now)
{
    const struct rl_schedule_window *w;

    if (v->n == 0) {
        rl_buf_puts(b, "none yet");
        return;
    }
    w = &v->w[v->n - 1];
    put_time(b, w->start);
    rl_buf_puts(b, " ");
    put_window_state(b, w, now);
}

static void
free_schedules(struct rl_schedule *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        rl_schedule_clear(&s[i]);
    free(s);
}

enum MHD_Result
console_schedules(struct console_req *r)
{
    const char *after = console_query_value(r, "after");
    struct rl_schedule *s = NULL;
    struct schedule_view *v = NULL;
    struct rl_buf b = {0};
    size_t n = 0;
    int64_t now = 0;
    char errstr[512];
    int err;

    if (after && !*after)
        after = NULL;
    /* One more than a page: whether a next page exists. */
    err = rl_db_console_schedules_load(r->db, r->user, NULL, after,
                                       SCHEDULES_PAGE + 1, &s, &n, &now, errstr,
                                       sizeof(errstr));
    if (err)
        return console_ledger_failed(r, errstr);
    v = malloc(sizeof(*v));
    if (!v) {
        free_schedules(s, n);
        return console_ledger_failed(r, "out of memory");
    }
    html_begin(&b, r, "Schedules");
    rl_buf_printf(&b,
                  "<h1>Schedules</h1><p>Each schedule's last and next "
                  "window, and how many of its last %d windows (of the "
                  "last 7 days) are missing: they started more than %d "
                  "minutes ago and no run was registered for them. "
                  "<code>runledger schedules gaps</code> audits every "
                  "window.</p>",
                  WINDOWS_SHOWN, WINDOWS_GRACE_S / 60);
    rl_buf_puts(&b, "<table id=\"schedules\"><thead><tr><th>Schedule</th>"
                    "<th>Job</th><th>Tenant</th><th>Cron</th><th>State</th>"
                    "<th>Last window</th><th>Next window</th>"
                    "<th>Missing</th></tr></thead><tbody>");
    for (size_t i = 0; i < n && i < SCHEDULES_PAGE; i++) {
        err = schedule_view_fill(r, &s[i], now, v, errstr, sizeof(errstr));
        if (err) {
            rl_buf_free(&b);
            free(v);
            free_schedules(s, n);
            return console_ledger_failed(r, errstr);
        }
        rl_buf_puts(&b, "<tr class=\"schedule\" data-name=\"");
        html_esc(&b, s[i].name);
        rl_buf_puts(&b, "\"><td><a href=\"/schedules/");
        html_esc(&b, s[i].name);
        rl_buf_puts(&b, "\">");
        html_esc(&b, s[i].name);
        rl_buf_puts(&b, "</a></td><td>");
        html_esc(&b, s[i].job);
        rl_buf_puts(&b, "</td><td class=\"tenant\">");
        html_esc(&b, s[i].tenant);
        rl_buf_puts(&b, "</td><td><code>");
        html_esc(&b, s[i].cron);
        rl_buf_puts(&b, "</code> ");
        html_esc(&b, s[i].timezone);
        rl_buf_puts(&b, "</td><td class=\"state\">");
        put_state(&b, &s[i]);
        if (v->invalid[0]) {
            rl_buf_puts(&b, "</td><td colspan=\"3\" class=\"error\">"
                            "cannot be read: ");
            html_esc(&b, v->invalid);
            rl_buf_puts(&b, "</td></tr>");
            continue;
        }
        rl_buf_puts(&b, "</td><td class=\"last\">");
        put_last(&b, v, now);
        rl_buf_puts(&b, "</td><td class=\"next\">");
        put_next(&b, &s[i], v);
        rl_buf_printf(&b, "</td><td class=\"missing-count\">%zu</td></tr>",
                      v->missing);
    }
    rl_buf_puts(&b, "</tbody></table>");
    if (n == 0)
        rl_buf_puts(&b, "<p id=\"none\">No schedules.</p>");
    if (n > SCHEDULES_PAGE) {
        rl_buf_puts(&b, "<p><a id=\"next\" href=\"/schedules?after=");
        html_esc(&b, s[SCHEDULES_PAGE - 1].name);
        rl_buf_puts(&b, "\">Next page</a></p>");
    }
    html_end(&b);
    free(v);
    free_schedules(s, n);
    return console_send_page(r, MHD_HTTP_OK, &b);
}

enum MHD_Result
console_schedule(struct console_req *r, const char *name)
{
    struct rl_schedule *s = NULL;
    struct schedule_view *v = NULL;
    struct rl_buf b = {0};
    size_t n = 0;
    int64_t now = 0;
    char errstr[512];
    int err;

    err = rl_db_console_schedules_load(r->db, r->user, name, NULL, 1, &s, &n,
                                       &now, errstr, sizeof(errstr));
    if (err)
        return console_ledger_failed(r, errstr);
    /* Another tenant's schedule is as absent as one that does not
     * exist. */
    if (n == 0) {
        free_schedules(s, n);
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "no such schedule");
    }
    v = malloc(sizeof(*v));
    if (!v) {
        free_schedules(s, n);
        return console_ledger_failed(r, "out of memory");
    }
    err = schedule_view_fill(r, &s[0], now, v, errstr, sizeof(errstr));
    if (err) {
        free(v);
        free_schedules(s, n);
        return console_ledger_failed(r, errstr);
    }
    html_begin(&b, r, s[0].name);
    rl_buf_puts(&b, "<h1>Schedule <span id=\"name\">");
    html_esc(&b, s[0].name);
    rl_buf_puts(&b, "</span></h1><dl id=\"schedule\"><dt>Job</dt><dd>");
    html_esc(&b, s[0].job);
    rl_buf_puts(&b, "</dd><dt>Tenant</dt><dd id=\"tenant\">");
    html_esc(&b, s[0].tenant);
    rl_buf_puts(&b, "</dd><dt>Cron</dt><dd><code>");
    html_esc(&b, s[0].cron);
    rl_buf_puts(&b, "</code> ");
    html_esc(&b, s[0].timezone);
    rl_buf_puts(&b, "</dd><dt>Version</dt><dd>");
    html_esc(&b, s[0].version);
    rl_buf_puts(&b, "</dd><dt>Window</dt><dd>");
    html_esc(&b, s[0].window);
    rl_buf_printf(&b, "</dd><dt>Catch-up</dt><dd>%s</dd>",
                  rl_catchup_name(s[0].catchup));
    rl_buf_puts(&b, "<dt>State</dt><dd id=\"state\">");
    put_state(&b, &s[0]);
    if (v->invalid[0]) {
        rl_buf_puts(&b, "</dd></dl>");
        html_message(&b, 0, v->invalid);
        goto end;
    }
    rl_buf_puts(&b, "</dd><dt>Last window</dt><dd id=\"last\">");
    put_last(&b, v, now);
    rl_buf_puts(&b, "</dd><dt>Next window</dt><dd id=\"next-window\">");
    put_next(&b, &s[0], v);
    rl_buf_printf(&b,
                  "</dd><dt>Missing</dt><dd id=\"missing-count\">%zu of "
                  "the windows below</dd></dl>",
                  v->missing);
    rl_buf_printf(&b,
                  "<h2>The last %d windows</h2><p>Newest first, of the "
                  "last 7 days, outside the schedule's pauses. A window "
                  "is missing when it started more than %d minutes ago "
                  "and no run was registered for it; <code>runledger "
                  "schedules backfill</code> publishes it.</p>",
                  WINDOWS_SHOWN, WINDOWS_GRACE_S / 60);
    rl_buf_puts(&b, "<table id=\"windows\"><thead><tr><th>Window start "
                    "(UTC)</th><th>Run</th></tr></thead><tbody>");
    for (size_t i = v->n; i-- > 0;) {
        const struct rl_schedule_window *w = &v->w[i];
        char at[RL_TIME_UTC_SIZE];

        rl_time_format_utc(w->start, at);
        rl_buf_printf(&b, "<tr class=\"window %s\" data-start=\"%s\"><td>",
                      window_class(w, now), at);
        put_time(&b, w->start);
        rl_buf_puts(&b, "</td><td>");
        put_window_state(&b, w, now);
        rl_buf_puts(&b, "</td></tr>");
    }
    rl_buf_puts(&b, "</tbody></table>");
    if (v->n == 0)
        rl_buf_puts(&b, "<p id=\"no-windows\">No window has started "
                        "yet.</p>");
end:
    html_end(&b);
    free(v);
    free_schedules(s, n);
    return console_send_page(r, MHD_HTTP_OK, &b);
}
