#ifndef RL_KAFKA_H
#define RL_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

#include "rl/config.h"

/* librdkafka helpers shared by the consumer, the relay and the tests.
 * Secrets in the configuration (sasl.password, ssl.key.password) never
 * reach a log: nothing here calls rd_kafka_conf_dump(). */

/* A new librdkafka configuration holding bootstrap.servers, the
 * RUNLEDGER_KAFKA_* pass-through properties of cfg, and a log callback
 * that writes through rl_log. Returns NULL with errstr set on a bad
 * property (the message names the property, never its value). */
rd_kafka_conf_t *rl_kafka_conf_new(const struct rl_config *cfg, char *errstr,
                                   size_t errstr_size);

/* The reason Runledger sets the librdkafka property name itself (a
 * static string), or NULL when an operator may set it. The list:
 * enable.auto.offset.store, enable.auto.commit (and its alias
 * auto.commit.enable), partition.assignment.strategy, auto.offset.reset,
 * enable.idempotence, acks (and request.required.acks). */
const char *rl_kafka_own_property(const char *name);

/* Refuses cfg when a RUNLEDGER_KAFKA_* property names one of Runledger's
 * own (rl_kafka_own_property): 0, or RL_ERR_INVALID with errstr naming
 * the property (never its value). rl_config_load calls it. */
int rl_kafka_props_check(const struct rl_config *cfg, char *errstr,
                         size_t errstr_size);

/* Sets name=value on conf; errstr names the property on failure. */
int rl_kafka_conf_set(rd_kafka_conf_t *conf, const char *name,
                      const char *value, char *errstr, size_t errstr_size);

/* A producer on conf (ownership of conf passes to it, also on failure).
 * idempotent: enable.idempotence=true and acks=all. */
rd_kafka_t *rl_kafka_producer_new(rd_kafka_conf_t *conf, int idempotent,
                                  char *errstr, size_t errstr_size);

/* A consumer configuration for group_id with the at-least-once settings
 * every Runledger consumer uses: enable.auto.offset.store=false (only
 * offsets stored after the durable write are committed by auto commit),
 * auto.offset.reset=earliest, and the assignor of rl_kafka_assignor().
 * Add callbacks, then hand it to rl_kafka_consumer_new(). NULL with
 * errstr on failure. */
/* The partition assignor RUNLEDGER_PARTITION_ASSIGNOR names; for auto,
 * cooperative-sticky with librdkafka 2.6.1 or later (incremental
 * rebalances: a consumer joining or leaving moves only the partitions
 * that change owner), else range. */
const char *rl_kafka_assignor(const struct rl_config *cfg);

rd_kafka_conf_t *rl_kafka_consumer_conf_new(const struct rl_config *cfg,
                                            const char *group_id, char *errstr,
                                            size_t errstr_size);

/* A consumer on conf (ownership passes to it, also on failure) subscribed
 * to topic, its poll queue redirected to rd_kafka_consumer_poll(). The
 * operator's RUNLEDGER_KAFKA_* properties are applied last, so they win
 * over callers' settings such as statistics.interval.ms; they cannot name
 * the settings above (rl_config_load refuses them). NULL with errstr on
 * failure. */
rd_kafka_t *rl_kafka_consumer_new(const struct rl_config *cfg,
                                  rd_kafka_conf_t *conf, const char *topic,
                                  char *errstr, size_t errstr_size);

/* The retention.ms of topic as the broker reports it (DescribeConfigs),
 * waiting at most timeout_ms: *retention_ms is -1 for a topic kept
 * forever. Returns 0, or RL_ERR_KAFKA with errstr (the broker unreachable,
 * the topic missing, the value not a number). */
int rl_kafka_topic_retention_ms(rd_kafka_t *rk, const char *topic,
                                int timeout_ms, int64_t *retention_ms,
                                char *errstr, size_t errstr_size);

#endif /* RL_KAFKA_H */
