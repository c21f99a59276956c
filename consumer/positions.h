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
};

/* Asks the Kafka thread to read partition again from offset, unless its
 * epoch has moved on since. A second request for a partition replaces
 * the first. @locality any thread */
void rl_pipeline_seek_back(struct rl_pipeline *pl, int32_t partition,
                           uint64_t epoch, int64_t offset);

/* Takes the pending seek requests: a malloc'd array (free it) and its
 * length in *n, or NULL with *n 0. @locality kafka thread */
struct rl_seek *rl_pipeline_take_seeks(struct rl_pipeline *pl, size_t *n);

/* Each partition's epoch, on the Kafka thread (positions.c). Epochs come
 * from one counter, so no two partitions or assignments share one. */
struct rl_epochs {
    uint64_t *by_partition; /* 0: never assigned */
    size_t count;
    uint64_t last;
};

uint64_t rl_epochs_get(const struct rl_epochs *e, int32_t partition);
/* Starts a new epoch for partition. Returns it, or 0 when out of memory
 * (the partition then keeps epoch 0, which no offset read carries). */
uint64_t rl_epochs_bump(struct rl_epochs *e, int32_t partition);
void rl_epochs_free(struct rl_epochs *e);

#endif /* RL_POSITIONS_H */
