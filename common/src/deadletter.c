/* The dead-letter record: one header set for every producer of dead
 * letters (consume.c's intake, ledger/'s failed runs, relay.c's refused
 * notifications), and the event of a run rebuilt from its ledger row when
 * the original bytes are no longer in memory. */
#include "rl/deadletter.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rl/err.h"

const char *const rl_deadletter_header_names[RL_DEADLETTER_NHEADERS] = {
    "reason",       "detail",           "source",        "value_kind",
    "source_topic", "source_partition", "source_offset", "run_id",
    "job",          "tenant",           "channel",       "dead_lettered_at",
};

const char *
rl_deadletter_source_name(enum rl_deadletter_source source)
{
    switch (source) {
    case RL_DEADLETTER_INTAKE:
        return "intake";
    case RL_DEADLETTER_RUN:
        return "run";
    case RL_DEADLETTER_OUTBOX:
        return "outbox";
    }
    return "";
}

const char *
rl_deadletter_value_name(enum rl_deadletter_value kind)
{
    switch (kind) {
    case RL_DEADLETTER_VALUE_NONE:
        return "none";
    case RL_DEADLETTER_VALUE_EVENT:
        return "event";
    case RL_DEADLETTER_VALUE_REBUILT:
        return "rebuilt";
    }
    return "none";
}

static void
add(rd_kafka_headers_t *hdrs, const char *name, const char *value)
{
    rd_kafka_header_add(hdrs, name, -1, value ? value : "", -1);
}

rd_kafka_headers_t *
rl_deadletter_headers_new(const struct rl_deadletter *dl)
{
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(RL_DEADLETTER_NHEADERS + 2);
    char part[16] = "", off[24] = "", at[80];
    struct timespec ts;
    struct tm tm;

    if (dl->source_partition >= 0)
        snprintf(part, sizeof(part), "%" PRId32, dl->source_partition);
    if (dl->source_offset >= 0)
        snprintf(off, sizeof(off), "%" PRId64, dl->source_offset);
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(at, sizeof(at), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int)(ts.tv_nsec / 1000000L % 1000));
    /* The order of rl_deadletter_header_names. */
    add(hdrs, "reason", dl->reason);
    add(hdrs, "detail", dl->detail);
    add(hdrs, "source", rl_deadletter_source_name(dl->source));
    add(hdrs, "value_kind", rl_deadletter_value_name(dl->value_kind));
    add(hdrs, "source_topic", dl->source_topic);
    add(hdrs, "source_partition", part);
    add(hdrs, "source_offset", off);
    add(hdrs, "run_id", dl->run_id);
    add(hdrs, "job", dl->job);
    add(hdrs, "tenant", dl->tenant);
    add(hdrs, "channel", dl->channel);
    add(hdrs, "dead_lettered_at", at);
    return hdrs;
}

char *
rl_deadletter_event_rebuild(const char *job, const char *tenant,
                            const char *scheduled_at, const char *version,
                            const char *request, const char *raw_input,
                            size_t *len, char *errstr, size_t errstr_size)
{
    cJSON *ev = NULL, *wrapper = NULL, *input = NULL;
    char *text = NULL, *out = NULL;
    static const char *const moved[] = {"request", "notify", "approval"};

    if (!job || !tenant || !scheduled_at || !scheduled_at[0] || !version ||
        !request) {
        rl_set_err(errstr, errstr_size,
                   "could not rebuild the event: the run's identity or "
                   "request is not known");
        return NULL;
    }
    wrapper = cJSON_Parse(request);
    if (!cJSON_IsObject(wrapper)) {
        rl_set_err(errstr, errstr_size,
                   "could not rebuild the event: the stored request is not "
                   "a JSON object");
        goto done;
    }
    if (raw_input && strcmp(raw_input, "null") != 0) {
        input = cJSON_Parse(raw_input);
        if (!input) {
            rl_set_err(errstr, errstr_size,
                       "could not rebuild the event: the stored input is not "
                       "JSON");
            goto done;
        }
    }
    ev = cJSON_CreateObject();
    if (!ev || !cJSON_AddStringToObject(ev, "job", job) ||
        !cJSON_AddStringToObject(ev, "tenant", tenant) ||
        !cJSON_AddStringToObject(ev, "scheduled_at", scheduled_at) ||
        !cJSON_AddStringToObject(ev, "version", version))
        goto nomem;
    if (input) {
        cJSON_AddItemToObject(ev, "input", input);
        input = NULL;
    }
    /* The effective request holds the event's request, notify and
     * approval as the parser canonicalised them: moved over as they are,
     * they give the same fingerprint. */
    for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++) {
        cJSON *item =
            cJSON_DetachItemFromObjectCaseSensitive(wrapper, moved[i]);

        if (item)
            cJSON_AddItemToObject(ev, moved[i], item);
    }
    text = cJSON_PrintUnformatted(ev);
    if (!text)
        goto nomem;
    out = strdup(text);
    cJSON_free(text);
    if (!out)
        goto nomem;
    *len = strlen(out);
    goto done;

nomem:
    rl_set_err(errstr, errstr_size,
               "could not rebuild the event: out of memory");
done:
    cJSON_Delete(input);
    cJSON_Delete(wrapper);
    cJSON_Delete(ev);
    return out;
}
