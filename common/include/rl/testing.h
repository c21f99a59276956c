#ifndef RL_TESTING_H
#define RL_TESTING_H

/* The library's functions that only its tests call: a module's state a
 * test reads, and what a test sets up with the library's own code. They
 * are defined beside the module they serve (json.c, kafka.c, model/,
 * offsets.c) and kept out of the module's header, so a reader of that
 * header sees what the service uses. */

#include <cjson/cJSON.h>
#include <librdkafka/rdkafka.h>
#include <stddef.h>

struct rl_model;
struct rl_model_call;
struct rl_offsets;

/* SHA-256 hex of the canonical text of item into out (65 bytes).
 * Returns 0 or a negative rl_err with errstr set. */
int rl_json_fingerprint(const cJSON *item, char *out, char *errstr,
                        size_t errstr_size);

/* Creates topic with partitions if it does not exist (replication factor
 * -1: the broker default). Returns 0 also when it already exists. */
int rl_kafka_topic_ensure(rd_kafka_t *rk, const char *topic, int partitions,
                          int timeout_ms, char *errstr, size_t errstr_size);

/* Calls submitted whose done() has not yet returned. Approximate while other
 * threads submit.
 * @locality any thread */
size_t rl_model_in_flight(const struct rl_model *m);

/* Of data, the "data" array of a chat lookup's list of stored
 * completions, the record the lookup adopts for call (its run_id and
 * lookup_* fields), as a lookup's answer is read: found_records,
 * foreign_records and found_attempt are set in call. Returns a borrowed
 * item of data, or NULL when no record matches. */
const cJSON *rl_model_pick_stored(const cJSON *data,
                                  struct rl_model_call *call);

/* Offsets in flight (added, not yet popped as done) over all partitions. */
size_t rl_offsets_in_flight(const struct rl_offsets *tracker);

#endif /* RL_TESTING_H */
