/* timeline.c: a run's timeline on its page: every event the ledger keeps
 * of the run (rl_db_console_run_json's "timeline") on one time axis, drawn
 * server-side as SVG, then as an ordered list with each event's time, its
 * offset from the first, its lane and what happened. The SVG is an
 * overview; the list is the accessible form and carries every value. Both
 * say an outcome in words and by a marker's shape as well as by colour,
 * and take their colours from the stylesheet's classes: the CSP forbids
 * inline style. Every value from the ledger goes through html_esc. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "console_int.h"

#define TL_W 880
#define TL_LEFT 110
#define TL_RIGHT 20
#define TL_TOP 8
#define TL_LANE_H 24
#define TL_AXIS_H 40

/* The lanes in the order they are drawn, with their headings. */
static const char *const lanes[][2] = {
    {"run", "Run"},           {"lease", "Leases"},
    {"attempt", "Attempts"},  {"batch", "Batch"},
    {"approval", "Approval"}, {"notification", "Notifications"},
    {"operator", "Operators"}};
#define NLANES (sizeof(lanes) / sizeof(lanes[0]))

static const char *
member(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double
ms_of(const cJSON *ev)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ev, "ms");

    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static int
lane_of(const cJSON *ev)
{
    const char *lane = member(ev, "lane");

    for (size_t i = 0; lane && i < NLANES; i++) {
        if (strcmp(lane, lanes[i][0]) == 0)
            return (int)i;
    }
    return (int)NLANES - 1;
}

/* A tone the stylesheet knows ("info" otherwise): the value becomes part
 * of a class name, so it is never taken from the ledger as is. */
static const char *
tone_of(const cJSON *ev)
{
    const char *tone = member(ev, "tone");

    if (tone && strcmp(tone, "ok") == 0)
        return "ok";
    if (tone && strcmp(tone, "error") == 0)
        return "error";
    if (tone && strcmp(tone, "wait") == 0)
        return "wait";
    return "info";
}

/* The word that says a tone, for readers who do not see colour. */
static const char *
tone_word(const char *tone)
{
    if (strcmp(tone, "ok") == 0)
        return "ok";
    if (strcmp(tone, "error") == 0)
        return "failed";
    if (strcmp(tone, "wait") == 0)
        return "waiting";
    return "";
}

/* A duration as people read it: 812 ms, 1.2 s, 3 min 2 s, 2 h 5 min. */
static void
put_duration(struct rl_buf *b, double ms)
{
    double s = ms / 1000;

    if (ms < 1000)
        rl_buf_printf(b, "%.0f ms", ms);
    else if (s < 60)
        rl_buf_printf(b, "%.1f s", s);
    else if (s < 3600)
        rl_buf_printf(b, "%.0f min %.0f s", floor(s / 60), fmod(s, 60));
    else if (s < 86400)
        rl_buf_printf(b, "%.0f h %.0f min", floor(s / 3600),
                      floor(fmod(s, 3600) / 60));
    else
        rl_buf_printf(b, "%.0f d %.0f h", floor(s / 86400),
                      floor(fmod(s, 86400) / 3600));
}

/* An event's time as shown: "2026-12-04 08:00:00.123456 UTC" from the
 * ledger's "2026-12-04T08:00:00.123456+00:00". */
static void
put_time(struct rl_buf *b, const char *at)
{
    char shown[40];
    size_t n;

    if (!at)
        return;
    n = strcspn(at, "+");
    if (n >= sizeof(shown) - 1)
        n = sizeof(shown) - 1;
    memcpy(shown, at, n);
    shown[n] = '\0';
    if (shown[0] && strlen(shown) > 10 && shown[10] == 'T')
        shown[10] = ' ';
    html_esc(b, shown);
    rl_buf_puts(b, " UTC");
}

/* A marker of tone at (x, y): a circle (ok), a square (failed), a diamond
 * (waiting), a ring (anything else), titled with the event. */
static void
put_marker(struct rl_buf *b, const char *tone, double x, double y,
           const cJSON *ev)
{
    if (strcmp(tone, "error") == 0)
        rl_buf_printf(b,
                      "<rect class=\"mark tone-error\" x=\"%.1f\" y=\"%.1f\" "
                      "width=\"10\" height=\"10\">",
                      x - 5, y - 5);
    else if (strcmp(tone, "wait") == 0)
        rl_buf_printf(b,
                      "<polygon class=\"mark tone-wait\" "
                      "points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\">",
                      x, y - 6, x + 6, y, x, y + 6, x - 6, y);
    else
        rl_buf_printf(b,
                      "<circle class=\"mark tone-%s\" cx=\"%.1f\" "
                      "cy=\"%.1f\" r=\"5\">",
                      tone, x, y);
    rl_buf_puts(b, "<title>");
    put_time(b, member(ev, "at"));
    rl_buf_puts(b, ": ");
    html_esc(b, member(ev, "what"));
    rl_buf_puts(b, "</title>");
    rl_buf_puts(b, strcmp(tone, "error") == 0  ? "</rect>"
                   : strcmp(tone, "wait") == 0 ? "</polygon>"
                                               : "</circle>");
}

/* The overview: one row per lane that has events, the events placed on
 * one axis in time order. A run's events come in bursts milliseconds
 * apart separated by waits of hours (a retry's backoff, an approval), so
 * the axis gives each gap between consecutive events a width growing with
 * its logarithm: every event stays apart and in order, and the list below
 * gives the exact times. */
static void
put_axis(struct rl_buf *b, const cJSON *events, int n)
{
    int row[NLANES], nrows = 0, i = 0, j;
    double *x, u = 0, prev = 0, first = 0, last = 0;
    double plot_w = TL_W - TL_LEFT - TL_RIGHT;
    const cJSON *ev, *other;
    int h;

    for (size_t l = 0; l < NLANES; l++)
        row[l] = -1;
    cJSON_ArrayForEach(ev, events) row[lane_of(ev)] = 0;
    for (size_t l = 0; l < NLANES; l++) {
        if (row[l] == 0)
            row[l] = nrows++;
    }
    x = calloc((size_t)n, sizeof(*x));
    if (!x)
        return;
    cJSON_ArrayForEach(ev, events)
    {
        double ms = ms_of(ev);

        if (i == 0)
            first = ms;
        else if (ms > prev)
            u += log1p(ms - prev);
        x[i++] = u;
        prev = ms > prev || i == 1 ? ms : prev;
        last = prev;
    }
    for (i = 0; i < n; i++)
        x[i] = TL_LEFT + (u > 0 ? x[i] / u * plot_w : plot_w / 2);
    h = TL_TOP + nrows * TL_LANE_H + TL_AXIS_H;
    rl_buf_printf(b,
                  "<svg id=\"timeline-axis\" class=\"timeline-axis\" "
                  "xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                  "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
                  "aria-labelledby=\"timeline-axis-title\">"
                  "<title id=\"timeline-axis-title\">The run's %d events on "
                  "one time axis over ",
                  TL_W, h, TL_W, h, n);
    put_duration(b, last - first);
    rl_buf_puts(b, "; each is listed with its time below</title>");
    for (size_t l = 0; l < NLANES; l++) {
        double y;

        if (row[l] < 0)
            continue;
        y = TL_TOP + row[l] * TL_LANE_H + TL_LANE_H / 2.0;
        rl_buf_printf(b,
                      "<line class=\"lane\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" "
                      "y2=\"%.1f\"/><text class=\"lane-name\" x=\"4\" "
                      "y=\"%.1f\">%s</text>",
                      TL_LEFT - 6, y, TL_W - TL_RIGHT + 6, y, y + 4,
                      lanes[l][1]);
    }
    /* A span (an attempt from dispatch to end, a notification from queue
     * to delivery) as a bar from its first event to its last. */
    i = 0;
    cJSON_ArrayForEach(ev, events)
    {
        const char *span = member(ev, "span");
        int end = -1;

        if (span) {
            j = 0;
            cJSON_ArrayForEach(other, events)
            {
                const char *s2 = member(other, "span");

                if (j > i && s2 && strcmp(s2, span) == 0 &&
                    lane_of(other) == lane_of(ev))
                    end = j;
                j++;
            }
            /* Only from a span's first event. */
            j = 0;
            cJSON_ArrayForEach(other, events)
            {
                const char *s2 = member(other, "span");

                if (j < i && s2 && strcmp(s2, span) == 0 &&
                    lane_of(other) == lane_of(ev))
                    end = -1;
                j++;
            }
        }
        if (end > 0) {
            double y = TL_TOP + row[lane_of(ev)] * TL_LANE_H + TL_LANE_H / 2.0;

            rl_buf_printf(b,
                          "<line class=\"span\" x1=\"%.1f\" y1=\"%.1f\" "
                          "x2=\"%.1f\" y2=\"%.1f\"/>",
                          x[i], y, x[end], y);
        }
        i++;
    }
    i = 0;
    cJSON_ArrayForEach(ev, events)
    {
        double y = TL_TOP + row[lane_of(ev)] * TL_LANE_H + TL_LANE_H / 2.0;
        double axis_y = TL_TOP + nrows * TL_LANE_H + 4;

        rl_buf_printf(b,
                      "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" "
                      "x2=\"%.1f\" y2=\"%.1f\"/>",
                      x[i], axis_y, x[i], axis_y + 6);
        put_marker(b, tone_of(ev), x[i], y, ev);
        i++;
    }
    {
        double axis_y = TL_TOP + nrows * TL_LANE_H + 4;

        rl_buf_printf(b,
                      "<line class=\"axis\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" "
                      "y2=\"%.1f\"/><text class=\"axis-label\" x=\"%d\" "
                      "y=\"%.1f\">",
                      TL_LEFT, axis_y, TL_W - TL_RIGHT, axis_y, TL_LEFT,
                      axis_y + 20);
        put_time(b, member(cJSON_GetArrayItem(events, 0), "at"));
        rl_buf_printf(b,
                      "</text><text class=\"axis-label\" x=\"%d\" "
                      "y=\"%.1f\" text-anchor=\"end\">+",
                      TL_W - TL_RIGHT, axis_y + 20);
        put_duration(b, last - first);
        rl_buf_printf(b,
                      "</text><text class=\"axis-note\" x=\"%d\" "
                      "y=\"%.1f\">gaps between events drawn on a log "
                      "scale</text>",
                      TL_LEFT, axis_y + 34);
    }
    rl_buf_puts(b, "</svg>");
    free(x);
}

void
console_put_timeline(struct rl_buf *b, const cJSON *events)
{
    const cJSON *ev;
    double first = 0;
    int n = cJSON_GetArraySize(events), i = 0;

    rl_buf_puts(b, "<h2 id=\"timeline-heading\">Timeline</h2>");
    if (n == 0) {
        rl_buf_puts(b, "<p id=\"timeline-empty\">No events.</p>");
        return;
    }
    put_axis(b, events, n);
    rl_buf_puts(b, "<ol id=\"timeline\" class=\"timeline\" "
                   "aria-labelledby=\"timeline-heading\">");
    cJSON_ArrayForEach(ev, events)
    {
        const char *tone = tone_of(ev);
        const char *detail = member(ev, "detail");
        int lane = lane_of(ev);

        if (i++ == 0)
            first = ms_of(ev);
        rl_buf_printf(b,
                      "<li class=\"event lane-%s tone-%s\"><time "
                      "datetime=\"",
                      lanes[lane][0], tone);
        html_esc(b, member(ev, "at"));
        rl_buf_puts(b, "\">");
        put_time(b, member(ev, "at"));
        rl_buf_puts(b, "</time> <span class=\"offset\">+");
        put_duration(b, ms_of(ev) - first);
        rl_buf_printf(b,
                      "</span> <span class=\"lane-name\">%s</span> "
                      "<span class=\"what\">",
                      lanes[lane][1]);
        html_esc(b, member(ev, "what"));
        rl_buf_puts(b, "</span>");
        if (tone_word(tone)[0])
            rl_buf_printf(b, " <span class=\"tag tone-%s\">%s</span>", tone,
                          tone_word(tone));
        if (detail && *detail) {
            rl_buf_puts(b, " <span class=\"detail\">");
            html_esc(b, detail);
            rl_buf_puts(b, "</span>");
        }
        rl_buf_puts(b, "</li>");
    }
    rl_buf_puts(b, "</ol>");
}
