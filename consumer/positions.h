#ifndef RL_POSITIONS_H
#define RL_POSITIONS_H

/* Where the Kafka thread reads each partition from, beyond the group's
 * committed offsets (positions.c): the partitions' epochs and the seeks
 * back the ledger asks for. */

#include <stddef.h>
#include <stdint.h>

struct rl_pipeline;

/* A partition the ledger is behind on: its consumed position (offset) is
 * before offsets the Kafka thread read in epoch, so registrations were
 * lost (a failover to a standby that had not received them) and the
 * events from offset on must be read again. */
struct rl_seek {
    int32_t partition;
    uint64_t epoch;
    int64_t offset;
    int64_t since_ms; /* RL_SEEK_SINCE: the time the offset is found for */
    int64_t below;    /* RL_SEEK_SINCE: seek only to an offset before it */
};

/* The offset of a seek back to a partition's beginning (librdkafka's
 * RD_KAFKA_OFFSET_BEGINNING), when the ledger has no position of it. */
#define RL_SEEK_BEGINNING (-2)
/* The offset of a seek to the first event stamped at or after since_ms,
 * when that event is before below: found by the Kafka thread. */
#define RL_SEEK_SINCE (-3)

/* Asks the Kafka thread to read partition again from offset, unless its
 * epoch has moved on since. A second request for a partition replaces
 * the first. @locality any thread */
void rl_pipeline_seek_back(struct rl_pipeline *pl, int32_t partition,
                           uint64_t epoch, int64_t offset);

/* Asks the Kafka thread to read partition again from its first event
 * stamped at or after since_ms, when that event is before below (the
 * group committed it: the ledger registered it once), unless the
 * partition's epoch has moved on. Replaces an earlier request for the
 * partition, as rl_pipeline_seek_back does. @locality any thread */
void rl_pipeline_seek_since(struct rl_pipeline *pl, int32_t partition,
                            uint64_t epoch, int64_t since_ms, int64_t below);

/* Takes the pending seek requests: a malloc'd array (free it) and its
 * length in *n, or NULL with *n 0. @locality kafka thread */
struct rl_seek *rl_pipeline_take_seeks(struct rl_pipeline *pl, size_t *n);

/* What the Kafka thread knows the ledger held of an assigned partition
 * in epoch: every offset before next was registered (or noted) in the
 * ledger, as the group's committed offset at the assignment and the
 * offsets stored for commit since show (both only follow the ledger's
 * writes). The ledger thread compares it with the ledger's consumed
 * position after each new connection and periodically, so that a quiet
 * partition is compared too. */
struct rl_read_floor {
    int32_t partition;
    uint64_t epoch;
    int64_t next; /* -1: nothing known yet */
};

/* Sets partition's floor: a new epoch starts it at next, the same epoch
 * only raises it. @locality kafka thread */
void rl_pipeline_floor_set(struct rl_pipeline *pl, int32_t partition,
                           uint64_t epoch, int64_t next);
/* Forgets partition's floor (revoked). @locality kafka thread */
void rl_pipeline_floor_forget(struct rl_pipeline *pl, int32_t partition);
/* A malloc'd copy of the floors (free it), its length in *n; NULL with
 * *n 0 when there are none or out of memory. @locality any thread */
struct rl_read_floor *rl_pipeline_floors_copy(struct rl_pipeline *pl,
                                              size_t *n);

/* Each partition's epoch, on the Kafka thread (positions.c). Epochs come
 * from one counter, so no two partitions or assignments share one. */
struct rl_epochs {
    uint64_t *by_partition; /* 0: never assigned */
    /* Where reading starts in the epoch (a seek's offset, the group's
     * committed offset), then one past the last offset read; -1 unknown. */
    int64_t *read_next;
    size_t count;
    uint64_t last;
};

uint64_t rl_epochs_get(const struct rl_epochs *e, int32_t partition);
/* Starts a new epoch for partition. Returns it, or 0 when out of memory
 * (the partition then keeps epoch 0, which no offset read carries). */
uint64_t rl_epochs_bump(struct rl_epochs *e, int32_t partition);
void rl_epochs_free(struct rl_epochs *e);
/* Sets where reading partition starts in its epoch, before anything of
 * it is read (later calls are ignored once an offset was read). */
void rl_epochs_start_at(struct rl_epochs *e, int32_t partition, int64_t offset);
/* The first offset an event read at offset covers in its epoch: one past
 * the last read before it, or where reading started, so that the offsets
 * Kafka never delivers (transaction markers, compacted or aborted
 * records) count as handled; offset itself when unknown. Records offset
 * as read. */
int64_t rl_epochs_covers_from(struct rl_epochs *e, int32_t partition,
                              int64_t offset);

#endif /* RL_POSITIONS_H */
