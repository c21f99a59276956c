#ifndef RL_CLUSTER_H
#define RL_CLUSTER_H

/* Support for the cluster tests: a three-node Kafka cluster of the test's
 * own (tests/harness/kafka_cluster.sh), its nodes killed and restarted one
 * at a time, and what the tests need to know about it through the Admin
 * API and metadata: who leads which partition, which node coordinates the
 * consumer group, whether every replica is back in sync. */

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "e2e.h"

#define CLUSTER_NODES 3
#define CLUSTER_MAX_PARTITIONS 64

/* Starts the cluster in dir and copies its bootstrap list into servers.
 * Every node is killed and dir removed at process exit. Skips the test
 * (or fails it under RL_REQUIRE_SERVICES) when no Kafka is configured. */
void cluster_start(const char *dir, char *servers, size_t size);

/* kafka_cluster.sh kill|restart <dir> <node>; returns its exit status. */
int cluster_node(const char *cmd, int node);

/* Leader and in-sync replica count of each partition of topic, from a
 * metadata request through rk. Returns the partition count, or -1 when
 * the metadata could not be read. */
int cluster_leaders(rd_kafka_t *rk, const char *topic, int *leader, int *isr,
                    int max);

/* The node that leads most of the schedule topic's messages: the sum of
 * high watermarks of the partitions it leads is the largest. Fills
 * high[] (per partition, at the time of the call). Returns the node id. */
int cluster_busiest_leader(struct e2e *t, int64_t *high, int *npart);

/* Waits up to timeout_ms until every partition of the test's topics and
 * of __consumer_offsets has all three replicas in sync; 1 when they do. */
int cluster_wait_in_sync(struct e2e *t, long timeout_ms);

/* The node coordinating consumer group group (DescribeConsumerGroups),
 * -1 when it cannot be found within timeout_ms. */
int cluster_coordinator(struct e2e *t, const char *group, int timeout_ms);

/* Replaces the test's idempotent producer with a plain one (acks=all,
 * retried): the publisher of schedule events must outlive a leader
 * change, and librdkafka before 2.3.0 can turn an idempotent producer's
 * NOT_LEADER_FOR_PARTITION into a fatal sequence error that no further
 * message survives. A scheduler publishing at least once is what run IDs
 * are for: a redelivered event finds its run. */
void cluster_plain_publisher(struct e2e *t);

/* Adds partitions to topic until it has n (CreatePartitions). */
void cluster_grow_topic(struct e2e *t, const char *topic, int n);

/* Sum of the group's committed offsets on the schedule topic through a
 * handle kept for the process, -1 when they cannot be read within
 * timeout_ms (e.g. while the group has no coordinator). */
int64_t cluster_committed_sum(struct e2e *t, int timeout_ms);

/* Reads the notification topic to its end and counts notifications by
 * their idempotency-key header (<run_id>:<channel>, which the relay sets
 * and every redelivery repeats): *total messages, *distinct keys,
 * *doubled keys seen more than once. */
void cluster_count_notifications(struct e2e *t, long *total, long *distinct,
                                 long *doubled);

/* The stub's whole generations figure minus the runs completed in the
 * ledger: model calls beyond one per run (-1 when unreadable). */
int64_t cluster_extra_generations(struct e2e *t);

/* Paces the schedule events: produces event i (tenant i % 17, which
 * spreads them unevenly over the partitions) until `due` were produced. */
void cluster_produce_until(struct e2e *t, const char *job, int *produced,
                           int due);

#endif /* RL_CLUSTER_H */
