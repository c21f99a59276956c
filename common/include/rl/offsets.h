#ifndef RL_OFFSETS_H
#define RL_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

/* Tracks the offsets of one topic's assigned partitions that are in flight,
 * so that only the contiguous prefix of offsets whose runs are durable in
 * PostgreSQL is ever stored for commit (docs/design.md, "Offsets").
 * @locality the consumer's Kafka thread only; not thread-safe. */

struct rl_offsets;

/* Returns a new empty tracker, or NULL when out of memory. */
struct rl_offsets *rl_offsets_new(void);

/* Frees tracker; NULL is accepted. */
void rl_offsets_destroy(struct rl_offsets *tracker);

/* Records that offset of partition was consumed and is now in flight.
 * Offsets of one partition must be added in increasing order.
 * Returns 0 or RL_ERR_NOMEM / RL_ERR_INVALID (out of order). */
int rl_offsets_add(struct rl_offsets *tracker, int32_t partition,
                   int64_t offset);

/* Marks offset done (its run reached a durable state). Unknown offsets are
 * ignored (a partition revoked since). Returns 1 when the committable
 * position of the partition moved, else 0. */
int rl_offsets_done(struct rl_offsets *tracker, int32_t partition,
                    int64_t offset);

/* The offset to commit for partition: one past the last offset of the
 * contiguous done prefix, or -1 when nothing was done since the last
 * call. Each position is returned once. */
int64_t rl_offsets_take_committable(struct rl_offsets *tracker,
                                    int32_t partition);

/* Forgets one partition (revoked) or all of them (partition -1). */
void rl_offsets_forget(struct rl_offsets *tracker, int32_t partition);

#endif /* RL_OFFSETS_H */
