/* Where the process reads each partition from, beyond the group's
 * committed offsets: the partitions' epochs, and the seeks back the ledger
 * asks for when its consumed positions (consumed_positions) are behind
 * what was read, as after a failover to an asynchronous standby that had
 * not received the last registrations (docs/design.md, "Offsets"). */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "positions.h"
#include "rl/log.h"

static void
seek_request(struct rl_pipeline *pl, const struct rl_seek *sk)
{
    pthread_mutex_lock(&pl->seek_lock);
    for (size_t i = 0; i < pl->seek_count; i++) {
        if (pl->seeks[i].partition == sk->partition) {
            pl->seeks[i] = *sk;
            pthread_mutex_unlock(&pl->seek_lock);
            return;
        }
    }
    if (pl->seek_count == pl->seek_cap) {
        size_t cap = pl->seek_cap ? pl->seek_cap * 2 : 16;
        struct rl_seek *grown = realloc(pl->seeks, cap * sizeof(*grown));

        if (!grown) {
            pthread_mutex_unlock(&pl->seek_lock);
            /* The next check (another reconnection, or the partition's
             * next assignment) asks again. */
            rl_log_error(NULL,
                         "out of memory: partition %d is not read again "
                         "from offset %lld",
                         (int)sk->partition, (long long)sk->offset);
            return;
        }
        pl->seeks = grown;
        pl->seek_cap = cap;
    }
    pl->seeks[pl->seek_count++] = *sk;
    pthread_mutex_unlock(&pl->seek_lock);
}

void
rl_pipeline_seek_back(struct rl_pipeline *pl, int32_t partition, uint64_t epoch,
                      int64_t offset)
{
    struct rl_seek sk = {
        .partition = partition, .epoch = epoch, .offset = offset};

    seek_request(pl, &sk);
}

void
rl_pipeline_seek_since(struct rl_pipeline *pl, int32_t partition,
                       uint64_t epoch, int64_t since_ms, int64_t below)
{
    struct rl_seek sk = {.partition = partition,
                         .epoch = epoch,
                         .offset = RL_SEEK_SINCE,
                         .since_ms = since_ms,
                         .below = below};

    seek_request(pl, &sk);
}

struct rl_seek *
rl_pipeline_take_seeks(struct rl_pipeline *pl, size_t *n)
{
    struct rl_seek *taken;

    *n = 0;
    pthread_mutex_lock(&pl->seek_lock);
    taken = pl->seeks;
    if (taken) {
        *n = pl->seek_count;
        pl->seeks = NULL;
        pl->seek_count = 0;
        pl->seek_cap = 0;
    }
    pthread_mutex_unlock(&pl->seek_lock);
    return taken;
}

void
rl_pipeline_floor_set(struct rl_pipeline *pl, int32_t partition, uint64_t epoch,
                      int64_t next)
{
    struct rl_read_floor *f = NULL;

    pthread_mutex_lock(&pl->seek_lock);
    for (size_t i = 0; i < pl->floor_count; i++) {
        if (pl->floors[i].partition == partition)
            f = &pl->floors[i];
    }
    if (!f && pl->floor_count == pl->floor_cap) {
        size_t cap = pl->floor_cap ? pl->floor_cap * 2 : 16;
        struct rl_read_floor *grown = realloc(pl->floors, cap * sizeof(*grown));

        if (!grown) {
            pthread_mutex_unlock(&pl->seek_lock);
            /* The ledger compares what it registered itself. */
            rl_log_error(NULL,
                         "out of memory: partition %d is compared with the "
                         "ledger only for what this process registered",
                         (int)partition);
            return;
        }
        pl->floors = grown;
        pl->floor_cap = cap;
    }
    if (!f) {
        f = &pl->floors[pl->floor_count++];
        *f = (struct rl_read_floor){
            .partition = partition, .epoch = epoch, .next = -1};
    }
    if (f->epoch != epoch) {
        f->epoch = epoch;
        f->next = -1;
    }
    if (next > f->next)
        f->next = next;
    pthread_mutex_unlock(&pl->seek_lock);
}

void
rl_pipeline_floor_forget(struct rl_pipeline *pl, int32_t partition)
{
    pthread_mutex_lock(&pl->seek_lock);
    for (size_t i = 0; i < pl->floor_count; i++) {
        if (pl->floors[i].partition == partition) {
            pl->floors[i] = pl->floors[--pl->floor_count];
            break;
        }
    }
    pthread_mutex_unlock(&pl->seek_lock);
}

struct rl_read_floor *
rl_pipeline_floors_copy(struct rl_pipeline *pl, size_t *n)
{
    struct rl_read_floor *copy = NULL;

    *n = 0;
    pthread_mutex_lock(&pl->seek_lock);
    if (pl->floor_count > 0)
        copy = malloc(pl->floor_count * sizeof(*copy));
    if (copy) {
        memcpy(copy, pl->floors, pl->floor_count * sizeof(*copy));
        *n = pl->floor_count;
    }
    pthread_mutex_unlock(&pl->seek_lock);
    return copy;
}

uint64_t
rl_epochs_get(const struct rl_epochs *e, int32_t partition)
{
    if (partition < 0 || (size_t)partition >= e->count)
        return 0;
    return e->by_partition[partition];
}

uint64_t
rl_epochs_bump(struct rl_epochs *e, int32_t partition)
{
    if (partition < 0)
        return 0;
    if ((size_t)partition >= e->count) {
        size_t count = (size_t)partition + 1;
        uint64_t *grown;

        if (count < e->count * 2)
            count = e->count * 2;
        int64_t *next;

        grown = realloc(e->by_partition, count * sizeof(*grown));
        if (!grown) {
            rl_log_error(NULL, "out of memory: partition %d has no epoch",
                         (int)partition);
            return 0;
        }
        memset(grown + e->count, 0, (count - e->count) * sizeof(*grown));
        e->by_partition = grown;
        next = realloc(e->read_next, count * sizeof(*next));
        if (!next) {
            rl_log_error(NULL, "out of memory: partition %d has no epoch",
                         (int)partition);
            return 0;
        }
        memset(next + e->count, 0xff, (count - e->count) * sizeof(*next));
        e->read_next = next;
        e->count = count;
    }
    e->by_partition[partition] = ++e->last;
    e->read_next[partition] = -1;
    return e->last;
}

void
rl_epochs_start_at(struct rl_epochs *e, int32_t partition, int64_t offset)
{
    if (partition < 0 || (size_t)partition >= e->count || offset < 0)
        return;
    if (e->read_next[partition] < 0)
        e->read_next[partition] = offset;
}

int64_t
rl_epochs_covers_from(struct rl_epochs *e, int32_t partition, int64_t offset)
{
    int64_t from = offset;

    if (partition < 0 || (size_t)partition >= e->count)
        return offset;
    if (e->read_next[partition] >= 0 && e->read_next[partition] < offset)
        from = e->read_next[partition];
    e->read_next[partition] = offset + 1;
    return from;
}

void
rl_epochs_free(struct rl_epochs *e)
{
    free(e->by_partition);
    free(e->read_next);
    memset(e, 0, sizeof(*e));
}
