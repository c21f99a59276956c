/* A schedule's windows and events: the catch-up policy as a pure function
 * of the cursor and the clock (rl_schedule_due), and the event in the
 * format `runledger publish` sends (consumer/cli/cmd_publish.c). */
#include "rl/schedule.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/err.h"
#include "rl/event.h"
#include "rl/timefmt.h"
#include "rl/tz.h"

int
rl_catchup_parse(const char *text)
{
    if (!text)
        return -1;
    if (strcmp(text, "skip") == 0)
        return RL_CATCHUP_SKIP;
    if (strcmp(text, "latest") == 0)
        return RL_CATCHUP_LATEST;
    if (strcmp(text, "all") == 0)
        return RL_CATCHUP_ALL;
    return -1;
}

const char *
rl_catchup_name(int catchup)
{
    switch (catchup) {
    case RL_CATCHUP_SKIP:
        return "skip";
    case RL_CATCHUP_ALL:
        return "all";
    default:
        return "latest";
    }
}

int
rl_schedule_prepare(struct rl_schedule *s, int flags, char *errstr,
                    size_t errstr_size)
{
    struct rl_window win;

    if (rl_cron_parse(s->cron ? s->cron : "", flags, &s->parsed, errstr,
                      errstr_size) != 0)
        return RL_ERR_INVALID;
    if (!s->window ||
        rl_window_parse(s->window, &win, errstr, errstr_size) != 0) {
        if (!s->window)
            rl_set_err(errstr, errstr_size, "a schedule needs a window");
        return RL_ERR_INVALID;
    }
    rl_tz_destroy(s->tz);
    s->tz = rl_tz_load(s->timezone && *s->timezone ? s->timezone : "UTC",
                       errstr, errstr_size);
    return s->tz ? 0 : RL_ERR_INVALID;
}

void
rl_schedule_clear(struct rl_schedule *s)
{
    free(s->name);
    free(s->job);
    free(s->tenant);
    free(s->cron);
    free(s->timezone);
    free(s->version);
    free(s->window);
    free(s->request);
    free(s->input);
    free(s->notify);
    rl_tz_destroy(s->tz);
    memset(s, 0, sizeof(*s));
}

char *
rl_schedule_event(const struct rl_schedule *s, int64_t start, char *errstr,
                  size_t errstr_size)
{
    cJSON *ev = cJSON_CreateObject();
    cJSON *item;
    char at[RL_TIME_UTC_SIZE];
    char *text = NULL, *copy = NULL;

    if (!ev)
        goto nomem;
    rl_time_format_utc(start, at);
    cJSON_AddStringToObject(ev, "job", s->job);
    cJSON_AddStringToObject(ev, "tenant", s->tenant);
    cJSON_AddStringToObject(ev, "scheduled_at", at);
    cJSON_AddStringToObject(ev, "version", s->version);
    cJSON_AddStringToObject(ev, "window", s->window);
    if (s->input) {
        item = cJSON_Parse(s->input);
        if (!item) {
            rl_set_err(errstr, errstr_size,
                       "invalid_json:input: the schedule's input is not JSON");
            goto done;
        }
        cJSON_AddItemToObject(ev, "input", item);
    }
    item = cJSON_Parse(s->request);
    if (!item) {
        rl_set_err(errstr, errstr_size,
                   "invalid_json:request: the schedule's request is not JSON");
        goto done;
    }
    cJSON_AddItemToObject(ev, "request", item);
    if (s->notify && *s->notify) {
        if (rl_event_add_notify(ev, s->notify, errstr, errstr_size) != 0)
            goto done;
    }
    text = cJSON_PrintUnformatted(ev);
    if (!text)
        goto nomem;
    copy = strdup(text);
    cJSON_free(text);
    if (!copy)
        goto nomem;
    goto done;
nomem:
    rl_set_err(errstr, errstr_size, "out of memory");
done:
    cJSON_Delete(ev);
    return copy;
}

size_t
rl_schedule_due(const struct rl_schedule *s, int64_t now, int64_t missed_before,
                int64_t *starts, size_t max, int64_t *through)
{
    int64_t oldest =
        s->catchup_window > 0 ? now - s->catchup_window : INT64_MIN;
    int64_t from = s->published_through;
    int64_t pending = -1;
    size_t n = 0;

    /* Nothing older than the catch-up window is published: start there
     * rather than walk years of windows one by one. */
    if (oldest != INT64_MIN && from < oldest - 1)
        from = oldest - 1;
    if (s->catchup != RL_CATCHUP_ALL && missed_before > from &&
        s->catchup == RL_CATCHUP_SKIP)
        from = missed_before;
    *through = s->published_through > from ? s->published_through : from;
    while (n < max) {
        int64_t t = rl_cron_next(&s->parsed, s->tz, from);

        if (t < 0 || t > now)
            break;
        if (t > missed_before) {
            if (pending >= 0) {
                starts[n++] = pending;
                pending = -1;
                if (n == max)
                    break; /* t is looked at again next time */
            }
            starts[n++] = t;
        } else if (t >= oldest) {
            if (s->catchup == RL_CATCHUP_ALL)
                starts[n++] = t;
            else if (s->catchup == RL_CATCHUP_LATEST)
                pending = t;
        }
        from = t;
        *through = t;
    }
    if (pending >= 0 && n < max)
        starts[n++] = pending;
    else if (pending >= 0)
        *through = pending - 1;
    return n;
}
