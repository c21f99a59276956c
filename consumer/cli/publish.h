#ifndef RL_CLI_PUBLISH_H
#define RL_CLI_PUBLISH_H

#include <stddef.h>

struct rl_config;
struct rl_event;

/* What `publish` and `dlq replay` share: the consumer's validation of a
 * schedule event and the producer that sends events to the schedule
 * topic (cmd_publish.c). */

/* One event to send: its text (malloc'd) and what validation made of it. */
struct rl_cli_event {
    char *value;
    struct rl_event *ev;
};

/* A flag value "@path" is the file's content, else the text itself.
 * Returns a malloc'd string or NULL with errstr set. */
char *rl_cli_value_or_file(const char *arg, char *errstr, size_t errstr_size);

/* Validates len bytes of text exactly as the consumer does (rl_event_parse
 * with the default limits and max_bytes, RUNLEDGER_MAX_EVENT_BYTES).
 * Returns the event (free with rl_event_destroy) or NULL with reason and
 * errstr set. */
struct rl_event *rl_cli_event_validate(const char *text, size_t len,
                                       size_t max_bytes, char *reason,
                                       size_t reason_size, char *errstr,
                                       size_t errstr_size);

/* Produces the n events to topic with the idempotent producer, key =
 * tenant, with a traceparent header when traceparent is not NULL, and
 * waits for every acknowledgement. Messages start with
 * "runledger <command>: ". Returns RL_EXIT_OK, RL_EXIT_USAGE (bad Kafka
 * settings) or RL_EXIT_FAILURE (not every event acknowledged). */
int rl_cli_events_send(const char *command, const struct rl_config *cfg,
                       const char *topic, const struct rl_cli_event *evs,
                       size_t n, const char *traceparent);

#endif /* RL_CLI_PUBLISH_H */
