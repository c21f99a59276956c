/* Schedule events: one Kafka message value in, one validated run out.
 *
 * The value comes from anyone who can produce to the topic, so it is
 * checked in order of cost and danger: size, encoding, NUL bytes and
 * nesting depth are settled by linear scans before cJSON (which recurses
 * once per nesting level) ever sees the bytes. Every rejection carries a
 * stable reason for the dead-letter headers (docs/design.md, "Schedule event").
 */
#include "rl/event.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/err.h"
#include "rl/json.h"
#include "rl/runid.h"
#include "rl/timefmt.h"

#define DEFAULT_MAX_BYTES (1024 * 1024)
#define DEFAULT_MAX_FIELD_LEN 200
#define DEFAULT_MAX_DEPTH 64
#define DEFAULT_MAX_NOTIFY 16
#define MAX_CHANNEL_LEN 64

void
rl_event_limits_default(struct rl_event_limits *limits)
{
    limits->max_bytes = DEFAULT_MAX_BYTES;
    limits->max_field_len = DEFAULT_MAX_FIELD_LEN;
    limits->max_depth = DEFAULT_MAX_DEPTH;
    limits->max_notify = DEFAULT_MAX_NOTIFY;
}

void
rl_event_destroy(struct rl_event *ev)
{
    if (!ev)
        return;
    free(ev->job);
    free(ev->tenant);
    free(ev->version);
    free(ev->window);
    free(ev->input_json);
    free(ev->request_json);
    for (size_t i = 0; i < ev->notify_count; i++)
        free(ev->notify[i]);
    free(ev->notify);
    free(ev);
}

/* Where a rejection is written: the caller's reason and errstr buffers. */
struct verdict {
    char *reason;
    size_t reason_size;
    char *errstr;
    size_t errstr_size;
};

static int reject(const struct verdict *v, const char *reason,
                  const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
reject(const struct verdict *v, const char *reason, const char *field,
       const char *fmt, ...)
{
    va_list ap;

    if (v->reason && v->reason_size) {
        if (field)
            snprintf(v->reason, v->reason_size, "%s:%s", reason, field);
        else
            snprintf(v->reason, v->reason_size, "%s", reason);
    }
    if (v->errstr && v->errstr_size) {
        va_start(ap, fmt);
        vsnprintf(v->errstr, v->errstr_size, fmt, ap);
        va_end(ap);
    }
    return RL_ERR_INVALID;
}

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above
 * U+10FFFF. A raw NUL is valid UTF-8 but would cut every C string cJSON
 * makes of the value, so it is refused here too. */
static int
check_encoding(const unsigned char *s, size_t len, const struct verdict *v)
{
    size_t i = 0;

    while (i < len) {
        unsigned char c = s[i];
        unsigned char lo = 0x80, hi = 0xbf;
        size_t n;

        if (c == 0)
            return reject(v, "nul_byte", NULL,
                          "event contains a nul byte at offset %zu", i);
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            if (c == 0xe0)
                lo = 0xa0; /* overlong below U+0800 */
            else if (c == 0xed)
                hi = 0x9f; /* surrogates U+D800..U+DFFF */
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            if (c == 0xf0)
                lo = 0x90; /* overlong below U+10000 */
            else if (c == 0xf4)
                hi = 0x8f; /* above U+10FFFF */
        } else {
            return reject(v, "invalid_utf8", NULL,
                          "event is not valid utf-8 at offset %zu", i);
        }
        if (len - i <= n || s[i + 1] < lo || s[i + 1] > hi)
            return reject(v, "invalid_utf8", NULL,
                          "event is not valid utf-8 at offset %zu", i);
        for (size_t k = 2; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return reject(v, "invalid_utf8", NULL,
                              "event is not valid utf-8 at offset %zu", i);
        }
        i += n + 1;
    }
    return RL_OK;
}

/* One pass that knows only where strings are: it bounds the nesting depth
 * before cJSON recurses into it, and finds the escaped NUL (\u0000) that
 * cJSON would otherwise turn into a silently truncated string or key. */
static int
check_structure(const char *s, size_t len, int max_depth,
                const struct verdict *v)
{
    int in_string = 0;
    int depth = 0;

    /* RFC 8259: no byte order mark, no raw control characters in strings,
     * and only space, tab, CR and LF between tokens. cJSON is laxer; an
     * envelope other readers would refuse is refused here too. */
    if (len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
        return reject(v, "invalid_json", NULL,
                      "event starts with a byte order mark");
    for (size_t i = 0; i < len; i++) {
        char c = s[i];

        if ((unsigned char)c < 0x20 &&
            (in_string || (c != ' ' && c != '\t' && c != '\n' && c != '\r')))
            return reject(v, "invalid_json", NULL,
                          "event has a raw control character 0x%02x at "
                          "offset %zu",
                          (unsigned)(unsigned char)c, i);
        if (in_string) {
            if (c == '"') {
                in_string = 0;
            } else if (c == '\\' && i + 1 < len) {
                if (s[i + 1] == 'u' && len - i >= 6 &&
                    memcmp(s + i + 2, "0000", 4) == 0)
                    return reject(v, "nul_byte", NULL,
                                  "event contains an escaped nul character "
                                  "(\\u0000) at offset %zu",
                                  i);
                i++; /* the escaped character cannot end the string */
            }
            continue;
        }
        if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[') {
            if (++depth > max_depth)
                return reject(v, "too_deep", NULL,
                              "event nests deeper than %d levels", max_depth);
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        }
    }
    return RL_OK;
}

static int
compare_members(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a;
    const cJSON *y = *(const cJSON *const *)b;

    return strcmp(x->string, y->string);
}

/* Refuses obj when two of its members share a key. */
static int
check_object_keys(const cJSON *obj, const struct verdict *v)
{
    const cJSON **members;
    const cJSON *child;
    size_t n = 0, i;
    int err = RL_OK;

    for (child = obj->child; child; child = child->next)
        n++;
    if (n < 2)
        return RL_OK;
    members = malloc(n * sizeof(*members));
    if (!members)
        return reject(v, "out_of_memory", NULL,
                      "could not allocate while checking the event");
    for (i = 0, child = obj->child; child; child = child->next)
        members[i++] = child;
    qsort(members, n, sizeof(*members), compare_members);
    for (i = 1; i < n; i++) {
        if (strcmp(members[i - 1]->string, members[i]->string) == 0) {
            const char *key = members[i]->string;
            size_t k, key_len = strlen(key);

            /* Echo the key only if it is short and plain: errstr goes to
             * logs and dead-letter headers. */
            for (k = 0; k < key_len && key_len <= 64; k++) {
                if (key[k] < 0x20 || key[k] > 0x7e || key[k] == '"')
                    break;
            }
            if (key_len <= 64 && k == key_len)
                err = reject(v, "invalid_json", NULL,
                             "event has a duplicate key \"%s\"", key);
            else
                err = reject(v, "invalid_json", NULL,
                             "event has a duplicate key");
            break;
        }
    }
    free(members);
    return err;
}

/* cJSON keeps both members of a repeated key and lookups find the first;
 * another reader may take the last. An envelope that means different
 * things to different readers is refused, at every depth: a repeated
 * "required" inside "approval" decides whether a human sees the output.
 * The recursion is bounded by check_structure's depth limit. */
static int
check_duplicate_keys(const cJSON *item, const struct verdict *v)
{
    const cJSON *child;

    if (cJSON_IsObject(item) && check_object_keys(item, v) != RL_OK)
        return RL_ERR_INVALID;
    if (!cJSON_IsObject(item) && !cJSON_IsArray(item))
        return RL_OK;
    for (child = item->child; child; child = child->next) {
        if (check_duplicate_keys(child, v) != RL_OK)
            return RL_ERR_INVALID;
    }
    return RL_OK;
}

/* Looks up a string member and strips it (unless raw).
 * Returns 1 when found (*out, *out_len set), 0 when absent or null and
 * optional, or a negative rl_err after rejecting. */
static int
get_string(const cJSON *root, const char *name, int required, int raw,
           size_t max_len, const char **out, size_t *out_len,
           const struct verdict *v)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, name);
    const char *text;
    size_t len;

    if (!item || (!required && cJSON_IsNull(item))) {
        if (required)
            return reject(v, "missing_field", name, "%s is missing", name);
        return 0;
    }
    if (!cJSON_IsString(item) || !item->valuestring)
        return reject(v, "wrong_type", name, "%s is not a string", name);
    if (raw) {
        text = item->valuestring;
        len = strlen(text);
    } else {
        text = rl_strip(item->valuestring, &len);
    }
    if (len == 0)
        return reject(v, "empty_field", name, "%s is empty", name);
    if (len > max_len)
        return reject(v, "field_too_long", name,
                      "%s is %zu bytes, more than the limit of %zu", name, len,
                      max_len);
    *out = text;
    *out_len = len;
    return 1;
}

/* job, tenant and version are joined with '|' into the run identity, so a
 * '|' inside one of them could make two different runs hash alike
 * ("a|b" + "c" and "a" + "b|c"). */
static int
check_no_separator(const char *text, size_t len, const char *name,
                   const struct verdict *v)
{
    if (memchr(text, '|', len))
        return reject(v, "invalid_field", name,
                      "%s contains '|', the run identity separator", name);
    return RL_OK;
}

static char *
copy_field(const char *text, size_t len, const struct verdict *v)
{
    char *copy = strndup(text, len);

    if (!copy)
        reject(v, "out_of_memory", NULL, "could not allocate the event");
    return copy;
}

static int
is_channel_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > MAX_CHANNEL_LEN)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

static int
compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Fills ev->notify with the sorted, unique channel names: the order and
 * repetition of channels in the event must not change the fingerprint. */
static int
parse_notify(const cJSON *root, const struct rl_event_limits *limits,
             struct rl_event *ev, const struct verdict *v)
{
    const cJSON *notify = cJSON_GetObjectItemCaseSensitive(root, "notify");
    const cJSON *item;
    const char **names;
    int count, i;
    size_t n = 0;

    if (!notify || cJSON_IsNull(notify))
        return RL_OK;
    if (!cJSON_IsArray(notify))
        return reject(v, "invalid_notify", NULL,
                      "notify is not an array of channel names");
    count = cJSON_GetArraySize(notify);
    if (count > limits->max_notify)
        return reject(v, "invalid_notify", NULL,
                      "notify has %d channels, more than the limit of %d",
                      count, limits->max_notify);
    if (count == 0)
        return RL_OK;
    i = 0;
    cJSON_ArrayForEach(item, notify)
    {
        if (!cJSON_IsString(item) || !item->valuestring ||
            !is_channel_name(item->valuestring))
            return reject(v, "invalid_notify", NULL,
                          "notify entry %d is not a channel name of 1 to %d "
                          "characters a-z 0-9 _ . -",
                          i, MAX_CHANNEL_LEN);
        i++;
    }

    names = malloc((size_t)count * sizeof(*names));
    ev->notify = calloc((size_t)count, sizeof(*ev->notify));
    if (!names || !ev->notify) {
        free(names);
        return reject(v, "out_of_memory", NULL, "could not allocate the event");
    }
    i = 0;
    cJSON_ArrayForEach(item, notify) names[i++] = item->valuestring;
    qsort(names, (size_t)count, sizeof(*names), compare_strings);
    for (i = 0; i < count; i++) {
        if (n > 0 && strcmp(names[i], ev->notify[n - 1]) == 0)
            continue;
        ev->notify[n] = strdup(names[i]);
        if (!ev->notify[n]) {
            free(names);
            return reject(v, "out_of_memory", NULL,
                          "could not allocate the event");
        }
        ev->notify_count = ++n;
    }
    free(names);
    return RL_OK;
}

static int
check_request(const cJSON *request, const struct verdict *v)
{
    const cJSON *model, *messages;

    if (!request)
        return reject(v, "missing_field", "request", "request is missing");
    if (!cJSON_IsObject(request))
        return reject(v, "invalid_request", NULL, "request is not an object");
    model = cJSON_GetObjectItemCaseSensitive(request, "model");
    if (!cJSON_IsString(model) || !model->valuestring || !model->valuestring[0])
        return reject(v, "invalid_request", NULL,
                      "request has no non-empty string \"model\"");
    messages = cJSON_GetObjectItemCaseSensitive(request, "messages");
    if (!cJSON_IsArray(messages) || !messages->child)
        return reject(v, "invalid_request", NULL,
                      "request has no non-empty array \"messages\"");
    return RL_OK;
}

/* "approval": absent, null or {"required": <boolean>}. Sets
 * ev->approval_required. Unknown members are refused: a typo must not
 * silently publish what was meant to wait for a human. */
static int
parse_approval(const cJSON *root, struct rl_event *ev, const struct verdict *v)
{
    const cJSON *approval = cJSON_GetObjectItemCaseSensitive(root, "approval");
    const cJSON *item;

    if (!approval || cJSON_IsNull(approval))
        return RL_OK;
    if (!cJSON_IsObject(approval))
        return reject(v, "invalid_approval", NULL, "approval is not an object");
    cJSON_ArrayForEach(item, approval)
    {
        if (!item->string || strcmp(item->string, "required") != 0)
            return reject(v, "invalid_approval", NULL,
                          "approval has an unknown member");
        if (!cJSON_IsBool(item))
            return reject(v, "invalid_approval", NULL,
                          "approval.required is not a boolean");
        ev->approval_required = cJSON_IsTrue(item);
    }
    return RL_OK;
}

/* request_json = canonical {"notify": [...], "request": {...}}: the
 * effective request whose fingerprint decides whether a redelivered event
 * is the same run or a conflicting one. */
static int
build_request_json(cJSON *request, struct rl_event *ev, const struct verdict *v)
{
    cJSON *wrapper = cJSON_CreateObject();
    cJSON *channels = cJSON_CreateArray();
    char detail[256];
    int err = RL_OK;

    if (!wrapper || !channels) {
        cJSON_Delete(channels);
        err = reject(v, "out_of_memory", NULL, "could not allocate the event");
        goto done;
    }
    cJSON_AddItemToObject(wrapper, "notify", channels);
    /* Approval changes the side effects, so it is part of the fingerprint;
     * only added when required, so every other event keeps the
     * fingerprint it always had. */
    if (ev->approval_required) {
        cJSON *approval = cJSON_AddObjectToObject(wrapper, "approval");

        if (!approval || !cJSON_AddTrueToObject(approval, "required")) {
            err = reject(v, "out_of_memory", NULL,
                         "could not allocate the event");
            goto done;
        }
    }
    for (size_t i = 0; i < ev->notify_count; i++) {
        cJSON *name = cJSON_CreateString(ev->notify[i]);

        if (!name) {
            err = reject(v, "out_of_memory", NULL,
                         "could not allocate the event");
            goto done;
        }
        cJSON_AddItemToArray(channels, name);
    }
    /* A reference: deleting the wrapper leaves the parsed tree alone. */
    if (!cJSON_AddItemReferenceToObject(wrapper, "request", request)) {
        err = reject(v, "out_of_memory", NULL, "could not allocate the event");
        goto done;
    }
    ev->request_json = rl_json_canonical(wrapper, detail, sizeof(detail));
    if (!ev->request_json) {
        err = reject(v, "invalid_request", NULL, "request: %s", detail);
        goto done;
    }
    if (rl_sha256_hex(ev->request_json, strlen(ev->request_json),
                      ev->fingerprint) != RL_OK)
        err = reject(v, "out_of_memory", NULL, "could not compute sha-256");

done:
    cJSON_Delete(wrapper);
    return err;
}

static int
parse_identity(const cJSON *root, const struct rl_event_limits *limits,
               struct rl_event *ev, const struct verdict *v)
{
    static const char *const names[] = {"job", "tenant", "version"};
    char **copies[] = {&ev->job, &ev->tenant, &ev->version};
    struct rl_run_identity id;
    const char *text, *reason = NULL;
    size_t len;
    int64_t epoch;
    int rc;

    for (size_t i = 0; i < 3; i++) {
        rc = get_string(root, names[i], 1, 0, limits->max_field_len, &text,
                        &len, v);
        if (rc < 0)
            return rc;
        if (check_no_separator(text, len, names[i], v) != RL_OK)
            return RL_ERR_INVALID;
        *copies[i] = copy_field(text, len, v);
        if (!*copies[i])
            return RL_ERR_NOMEM;
    }

    /* Not stripped: a timestamp is either exactly RFC 3339 or refused. */
    rc = get_string(root, "scheduled_at", 1, 1, limits->max_field_len,
                    &id.scheduled_at, &len, v);
    if (rc < 0)
        return rc;

    rc =
        get_string(root, "window", 0, 0, limits->max_field_len, &text, &len, v);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        ev->window = copy_field(text, len, v);
        if (!ev->window)
            return RL_ERR_NOMEM;
    }

    id.job = ev->job;
    id.tenant = ev->tenant;
    id.version = ev->version;
    id.window = ev->window;
    if (rl_runid_compute(&id, ev->run_id, ev->scheduled_at, &reason, v->errstr,
                         v->errstr_size) != RL_OK) {
        if (v->reason && v->reason_size)
            snprintf(v->reason, v->reason_size, "%s",
                     reason ? reason : "invalid_timestamp");
        return RL_ERR_INVALID;
    }
    /* The canonical form always parses; it yields the floored epoch. */
    if (rl_time_parse(ev->scheduled_at, &epoch, NULL, NULL, 0) != RL_OK)
        return reject(v, "invalid_timestamp", NULL,
                      "scheduled_at could not be normalised");
    ev->scheduled_epoch = epoch;
    return RL_OK;
}

struct rl_event *
rl_event_parse(const void *value, size_t len,
               const struct rl_event_limits *limits, char *reason,
               size_t reason_size, char *errstr, size_t errstr_size)
{
    const struct verdict v = {reason, reason_size, errstr, errstr_size};
    struct rl_event_limits defaults;
    struct rl_event *ev = NULL;
    cJSON *root = NULL;
    const char *end = NULL;
    char *text = NULL;
    char detail[256];
    int ok = 0;

    if (!limits) {
        rl_event_limits_default(&defaults);
        limits = &defaults;
    }
    if (reason && reason_size)
        reason[0] = '\0';
    if (errstr && errstr_size)
        errstr[0] = '\0';

    if (len > limits->max_bytes) {
        reject(&v, "too_large", NULL,
               "event is %zu bytes, more than the limit of %zu", len,
               limits->max_bytes);
        goto done;
    }
    if (!value || len == 0) {
        reject(&v, "invalid_json", NULL, "event is empty");
        goto done;
    }
    if (check_encoding(value, len, &v) != RL_OK ||
        check_structure(value, len, limits->max_depth, &v) != RL_OK)
        goto done;

    /* A NUL-terminated copy: a Kafka payload is not a C string, and a
     * parser bug must not read past the message. */
    text = malloc(len + 1);
    if (!text) {
        reject(&v, "out_of_memory", NULL, "could not allocate the event");
        goto done;
    }
    memcpy(text, value, len);
    text[len] = '\0';
    root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        reject(&v, "invalid_json", NULL,
               "event is not valid json at offset %zu",
               end && end >= text ? (size_t)(end - text) : (size_t)0);
        goto done;
    }
    /* cJSON stops after the first value; anything but whitespace after it
     * means the message is not one JSON document. */
    while (end < text + len &&
           (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
        end++;
    if (end != text + len) {
        reject(&v, "invalid_json", NULL,
               "event has data after the json value at offset %zu",
               (size_t)(end - text));
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        reject(&v, "not_object", NULL, "event is not a json object");
        goto done;
    }
    if (check_duplicate_keys(root, &v) != RL_OK)
        goto done;

    ev = calloc(1, sizeof(*ev));
    if (!ev) {
        reject(&v, "out_of_memory", NULL, "could not allocate the event");
        goto done;
    }
    if (parse_identity(root, limits, ev, &v) != RL_OK)
        goto done;
    if (check_request(cJSON_GetObjectItemCaseSensitive(root, "request"), &v) !=
        RL_OK)
        goto done;
    if (parse_notify(root, limits, ev, &v) != RL_OK)
        goto done;
    if (parse_approval(root, ev, &v) != RL_OK)
        goto done;
    if (build_request_json(cJSON_GetObjectItemCaseSensitive(root, "request"),
                           ev, &v) != RL_OK)
        goto done;

    {
        const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "input");

        ev->input_json = input
                             ? rl_json_canonical(input, detail, sizeof(detail))
                             : strdup("null");
        if (!ev->input_json) {
            if (input)
                reject(&v, "invalid_json", NULL, "input: %s", detail);
            else
                reject(&v, "out_of_memory", NULL,
                       "could not allocate the event");
            goto done;
        }
    }
    ok = 1;

done:
    cJSON_Delete(root);
    free(text);
    if (!ok) {
        rl_event_destroy(ev);
        return NULL;
    }
    return ev;
}

int
rl_event_add_notify(cJSON *ev, const char *channels, char *errstr,
                    size_t errstr_size)
{
    cJSON *arr = cJSON_AddArrayToObject(ev, "notify");
    const char *p = channels;

    while (arr && *p) {
        size_t len = strcspn(p, ",");
        char name[256];

        if (len >= sizeof(name)) {
            rl_set_err(errstr, errstr_size,
                       "invalid_notify: channel name too long");
            return RL_ERR_INVALID;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        cJSON_AddItemToArray(arr, cJSON_CreateString(name));
        p += len;
        if (*p == ',')
            p++;
    }
    if (!arr) {
        rl_set_err(errstr, errstr_size, "out of memory");
        return RL_ERR_NOMEM;
    }
    return 0;
}
