#ifndef RL_DEADLETTERS_H
#define RL_DEADLETTERS_H

/* The dead-letter producer of `runledger consume` (deadletters.c). */

#include <librdkafka/rdkafka.h>
#include <stddef.h>

#include "rl/deadletter.h"

struct rl_item;
struct rl_pipeline;

/* Produces item's dead letter with the headers of rl/deadletter.h; its
 * value is the original event (item->value), or for a swept run the event
 * rebuilt from the ledger row (job, tenant, scheduled_at, version,
 * request_json, raw_input). The item (if any) is finished once the broker
 * acknowledged the record: its offset must not be committed before the
 * dead letter is durable. Ownership of item passes to the producer.
 * @locality any thread */
void rl_pipeline_dead_letter(struct rl_pipeline *pl, struct rl_item *item,
                             enum rl_deadletter_source source,
                             const char *reason, const char *detail);

/* The dead-letter producer's delivery report (deadletters.c): set on
 * pl->dlq's configuration, served by rd_kafka_poll on it. */
void rl_pipeline_dlq_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkm,
                           void *opaque);

/* A new dead-letter producer configured for pl (its reports to
 * rl_pipeline_dlq_dr_cb), or NULL with errstr. */
rd_kafka_t *rl_pipeline_dlq_new(struct rl_pipeline *pl, char *errstr,
                                size_t errstr_size);

/* Replaces pl->dlq when it failed for good (deadletters.c). @locality
 * kafka thread */
void rl_pipeline_dlq_renew_if_fatal(struct rl_pipeline *pl);

/* Produces again the dead letters the broker did not take whose backoff
 * is over (abandon: every one, once, as the process stops). @locality
 * kafka thread */
void rl_pipeline_retry_dead_letters(struct rl_pipeline *pl, int abandon);

#endif /* RL_DEADLETTERS_H */
