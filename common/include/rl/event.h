#ifndef RL_EVENT_H
#define RL_EVENT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "rl/runid.h"

/* Limits applied to a schedule event before anything else reads it. */
struct rl_event_limits {
    size_t max_bytes;     /* whole message; default 1 MiB */
    size_t max_field_len; /* job, tenant, version, window, channel: 200 */
    int max_depth;        /* JSON nesting; default 64 */
    int max_notify;       /* notify channels; default 16 */
};

/* Fills limits with the defaults above. */
void rl_event_limits_default(struct rl_event_limits *limits);

/* A validated schedule event (docs/design.md, "Schedule event").
 * Strings are stripped copies; all members are owned by the event. */
struct rl_event {
    char *job;
    char *tenant;
    char *version;
    char *window;                        /* NULL when absent */
    char scheduled_at[RL_TIME_UTC_SIZE]; /* UTC, floored to the window */
    int64_t scheduled_epoch;
    char run_id[RL_HEX_SIZE];
    char fingerprint[RL_HEX_SIZE]; /* of request_json */
    char *input_json;   /* canonical JSON of "input" ("null" if absent) */
    char *request_json; /* canonical effective request:
                           {"notify":[...sorted, unique],"request":{...}},
                           plus "approval":{"required":true} when
                           approval_required (absent otherwise, so events
                           without approval keep their fingerprint) */
    char **notify;      /* sorted, unique channel names */
    size_t notify_count;
    int approval_required; /* "approval": {"required": true} */
};

/* Parses and validates one Kafka message value.
 * Returns a new event (free with rl_event_destroy), or NULL with reason set
 * to a stable machine-readable code and errstr to a human sentence:
 *   too_large, invalid_utf8, nul_byte, too_deep, invalid_json (also a
 *   byte order mark, a raw control character inside a string or between
 *   tokens other than space, tab, CR, LF, or a key repeated in any object
 *   at any depth, unknown members included), not_object,
 *   missing_field:<name>, wrong_type:<name>, field_too_long:<name> (bytes),
 *   empty_field:<name>, invalid_field:<name> ('|' in job, tenant or
 *   version: it separates the run-ID fields), naive_timestamp,
 *   invalid_timestamp, invalid_window,
 *   invalid_notify, invalid_request (request lacks "model" or "messages"),
 *   invalid_approval ("approval" is not {"required": <boolean>})
 * reason must hold at least 64 bytes. */
struct rl_event *rl_event_parse(const void *value, size_t len,
                                const struct rl_event_limits *limits,
                                char *reason, size_t reason_size, char *errstr,
                                size_t errstr_size);

/* Frees ev and everything it owns; NULL is accepted. */
void rl_event_destroy(struct rl_event *ev);

/* Adds "notify": the channels of a comma-separated list (channels, not
 * NULL; "" gives an empty array) to the event object ev being built, as
 * `runledger publish` and the scheduler write it. Returns 0,
 * RL_ERR_INVALID (a channel name of 256 bytes or more: "invalid_notify:
 * ..." in errstr) or RL_ERR_NOMEM. */
int rl_event_add_notify(cJSON *ev, const char *channels, char *errstr,
                        size_t errstr_size);

#endif /* RL_EVENT_H */
