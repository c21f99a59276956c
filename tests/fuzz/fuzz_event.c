/* libFuzzer target: rl_event_parse() on arbitrary bytes with the default
 * limits. Whatever a producer writes to the topic, the parser returns, frees
 * what it allocated, and either refuses with a documented reason and a
 * printable message, or yields an event whose identity and request are in
 * canonical form and are the same every time the bytes are parsed. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rl/err.h"
#include "rl/event.h"
#include "rl/json.h"
#include "rl/runid.h"
#include "rl/timefmt.h"

/* event.h asks for at least this much room for a reason: a reason that
 * does not fit is cut and then fails the check against the list below. */
#define REASON_SIZE 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The reasons event.h documents, plus invalid_field (a '|' in job, tenant
 * or version, see event.c check_no_separator). */
static int
is_documented_reason(const char *reason)
{
    static const char *const plain[] = {
        "too_large",       "invalid_utf8",      "nul_byte",
        "too_deep",        "invalid_json",      "not_object",
        "naive_timestamp", "invalid_timestamp", "invalid_window",
        "invalid_notify",  "invalid_request",   "invalid_approval"};
    static const struct {
        const char *prefix;
        const char *fields[6];
    } per_field[] = {
        {"missing_field:",
         {"job", "tenant", "scheduled_at", "version", "request"}},
        {"wrong_type:", {"job", "tenant", "scheduled_at", "version", "window"}},
        {"field_too_long:",
         {"job", "tenant", "scheduled_at", "version", "window"}},
        {"empty_field:",
         {"job", "tenant", "scheduled_at", "version", "window"}},
        {"invalid_field:", {"job", "tenant", "version"}},
    };

    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        if (strcmp(reason, plain[i]) == 0)
            return 1;
    }
    for (size_t i = 0; i < sizeof(per_field) / sizeof(per_field[0]); i++) {
        size_t n = strlen(per_field[i].prefix);

        if (strncmp(reason, per_field[i].prefix, n) != 0)
            continue;
        for (size_t k = 0; k < 6 && per_field[i].fields[k]; k++) {
            if (strcmp(reason + n, per_field[i].fields[k]) == 0)
                return 1;
        }
    }
    return 0;
}

static int
is_channel_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '.' || s[i] == '-'))
            return 0;
    }
    return 1;
}

/* An identity field as the event keeps it: stripped, bounded, no '|'. */
static void
check_identity_field(const char *text, const struct rl_event_limits *limits)
{
    size_t len;

    FUZZ_CHECK(text != NULL);
    FUZZ_CHECK(rl_strip(text, &len) == text);
    FUZZ_CHECK(len == strlen(text));
    FUZZ_CHECK(len > 0 && len <= limits->max_field_len);
    FUZZ_CHECK(strchr(text, '|') == NULL);
}

/* text parses back with cJSON and is its own canonical form. */
static void
check_canonical(const char *text)
{
    cJSON *root = cJSON_Parse(text);
    char errstr[256] = "";
    char *again;

    FUZZ_CHECK(root != NULL);
    again = rl_json_canonical(root, errstr, sizeof(errstr));
    FUZZ_CHECK(again != NULL);
    FUZZ_CHECK(strcmp(again, text) == 0);
    free(again);
    cJSON_Delete(root);
}

/* 1 when any object at any depth of item repeats a key. */
static int
has_duplicate_key(const cJSON *item)
{
    const cJSON *a, *b;

    if (!cJSON_IsObject(item) && !cJSON_IsArray(item))
        return 0;
    for (a = item->child; a; a = a->next) {
        if (cJSON_IsObject(item)) {
            for (b = a->next; b; b = b->next) {
                if (strcmp(a->string, b->string) == 0)
                    return 1;
            }
        }
        if (has_duplicate_key(a))
            return 1;
    }
    return 0;
}

/* An accepted envelope means one thing to every reader: no object in it,
 * at any depth, repeats a key (a reader that takes the last member of
 * "approval" must not see another gate than the parser). */
static void
check_no_duplicate_key(const uint8_t *data, size_t size)
{
    cJSON *root = cJSON_ParseWithLength((const char *)data, size);

    FUZZ_CHECK(root != NULL);
    FUZZ_CHECK(!has_duplicate_key(root));
    cJSON_Delete(root);
}

static void
check_event(const struct rl_event *ev, const struct rl_event_limits *limits)
{
    struct rl_run_identity id;
    char run_id[RL_HEX_SIZE], utc[RL_TIME_UTC_SIZE], hex[RL_HEX_SIZE];
    char errstr[256] = "";
    const char *why = NULL;
    int64_t epoch = 0;
    cJSON *request, *notify, *item;
    size_t i;

    check_identity_field(ev->job, limits);
    check_identity_field(ev->tenant, limits);
    check_identity_field(ev->version, limits);

    FUZZ_CHECK(fuzz_is_hex64(ev->run_id));
    FUZZ_CHECK(fuzz_is_hex64(ev->fingerprint));

    FUZZ_CHECK(fuzz_is_utc_form(ev->scheduled_at));
    FUZZ_CHECK(rl_time_parse(ev->scheduled_at, &epoch, NULL, NULL, 0) == RL_OK);
    FUZZ_CHECK(epoch == ev->scheduled_epoch);
    rl_time_format_utc(epoch, utc);
    FUZZ_CHECK(strcmp(utc, ev->scheduled_at) == 0);

    if (ev->window) {
        struct rl_window win;
        size_t len;

        FUZZ_CHECK(rl_strip(ev->window, &len) == ev->window &&
                   len == strlen(ev->window));
        FUZZ_CHECK(rl_window_parse(ev->window, &win, errstr, sizeof(errstr)) ==
                   RL_OK);
        /* scheduled_at is already the start of its window. */
        FUZZ_CHECK(rl_window_floor(&win, epoch) == epoch);
    }

    /* The stored fields alone give the run ID back: nothing the event
     * carried besides them went into it. */
    id.job = ev->job;
    id.tenant = ev->tenant;
    id.scheduled_at = ev->scheduled_at;
    id.window = ev->window;
    id.version = ev->version;
    FUZZ_CHECK(rl_runid_compute(&id, run_id, utc, &why, errstr,
                                sizeof(errstr)) == RL_OK);
    FUZZ_CHECK(strcmp(run_id, ev->run_id) == 0);
    FUZZ_CHECK(strcmp(utc, ev->scheduled_at) == 0);

    FUZZ_CHECK(ev->request_json != NULL);
    FUZZ_CHECK(rl_sha256_hex(ev->request_json, strlen(ev->request_json), hex) ==
               RL_OK);
    FUZZ_CHECK(strcmp(hex, ev->fingerprint) == 0);
    check_canonical(ev->request_json);
    FUZZ_CHECK(ev->input_json != NULL);
    check_canonical(ev->input_json);

    FUZZ_CHECK(ev->notify_count <= (size_t)limits->max_notify);
    for (i = 0; i < ev->notify_count; i++) {
        FUZZ_CHECK(is_channel_name(ev->notify[i]));
        FUZZ_CHECK(i == 0 || strcmp(ev->notify[i - 1], ev->notify[i]) < 0);
    }

    /* request_json is {"notify":[the same channels],"request":{...}}. */
    request = cJSON_Parse(ev->request_json);
    FUZZ_CHECK(cJSON_IsObject(request));
    FUZZ_CHECK(cJSON_GetArraySize(request) == 2 + !!ev->approval_required);
    FUZZ_CHECK(
        cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(request, "request")));
    notify = cJSON_GetObjectItemCaseSensitive(request, "notify");
    FUZZ_CHECK(cJSON_IsArray(notify));
    FUZZ_CHECK((size_t)cJSON_GetArraySize(notify) == ev->notify_count);
    i = 0;
    cJSON_ArrayForEach(item, notify)
    {
        FUZZ_CHECK(cJSON_IsString(item));
        FUZZ_CHECK(strcmp(item->valuestring, ev->notify[i]) == 0);
        i++;
    }
    cJSON_Delete(request);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rl_event_limits limits;
    struct rl_event *ev, *again;
    char reason[REASON_SIZE], reason2[REASON_SIZE];
    char errstr[256], errstr2[256];

    rl_event_limits_default(&limits);
    /* data is exactly size bytes on the heap and not NUL-terminated, so
     * ASan sees any read past the message. */
    ev = rl_event_parse(data, size, NULL, reason, sizeof(reason), errstr,
                        sizeof(errstr));
    again = rl_event_parse(data, size, &limits, reason2, sizeof(reason2),
                           errstr2, sizeof(errstr2));
    if (!ev) {
        if (!is_documented_reason(reason))
            fprintf(stderr, "undocumented reason \"%s\" (%s)\n", reason,
                    errstr);
        FUZZ_CHECK(is_documented_reason(reason));
        FUZZ_CHECK(fuzz_is_message(errstr));
        /* The same bytes are refused for the same reason every time. */
        FUZZ_CHECK(again == NULL);
        FUZZ_CHECK(strcmp(reason, reason2) == 0);
        FUZZ_CHECK(strcmp(errstr, errstr2) == 0);
        rl_event_destroy(again);
        return 0;
    }
    check_event(ev, &limits);
    check_no_duplicate_key(data, size);
    FUZZ_CHECK(again != NULL);
    FUZZ_CHECK(strcmp(ev->run_id, again->run_id) == 0);
    FUZZ_CHECK(strcmp(ev->fingerprint, again->fingerprint) == 0);
    FUZZ_CHECK(strcmp(ev->request_json, again->request_json) == 0);
    FUZZ_CHECK(strcmp(ev->input_json, again->input_json) == 0);
    rl_event_destroy(ev);
    rl_event_destroy(again);
    return 0;
}
