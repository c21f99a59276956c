#include "rl/offsets.h"

#include <stdlib.h>
#include <string.h>

#include "rl/err.h"
#include "rl/testing.h"

struct entry {
    int64_t offset;
    int done;
};

/* A ring of in-flight offsets in consumption order. */
struct part {
    int32_t partition;
    struct entry *ring;
    size_t cap, head, len;
    int64_t committable; /* -1: nothing new to store */
};

struct rl_offsets {
    struct part *parts;
    size_t count, cap;
    size_t in_flight;
};

struct rl_offsets *
rl_offsets_new(void)
{
    return calloc(1, sizeof(struct rl_offsets));
}

void
rl_offsets_destroy(struct rl_offsets *tracker)
{
    if (!tracker)
        return;
    for (size_t i = 0; i < tracker->count; i++)
        free(tracker->parts[i].ring);
    free(tracker->parts);
    free(tracker);
}

static struct part *
part_find(struct rl_offsets *tracker, int32_t partition)
{
    for (size_t i = 0; i < tracker->count; i++) {
        if (tracker->parts[i].partition == partition)
            return &tracker->parts[i];
    }
    return NULL;
}

static struct entry *
ring_at(struct part *p, size_t i)
{
    return &p->ring[(p->head + i) % p->cap];
}

int
rl_offsets_add(struct rl_offsets *tracker, int32_t partition, int64_t offset)
{
    struct part *p = part_find(tracker, partition);

    if (!p) {
        if (tracker->count == tracker->cap) {
            size_t ncap = tracker->cap ? tracker->cap * 2 : 8;
            struct part *grown = realloc(tracker->parts, ncap * sizeof(*grown));

            if (!grown)
                return RL_ERR_NOMEM;
            tracker->parts = grown;
            tracker->cap = ncap;
        }
        p = &tracker->parts[tracker->count++];
        memset(p, 0, sizeof(*p));
        p->partition = partition;
        p->committable = -1;
    }
    if (p->len > 0 && ring_at(p, p->len - 1)->offset >= offset)
        return RL_ERR_INVALID;
    if (p->len == p->cap) {
        size_t ncap = p->cap ? p->cap * 2 : 64;
        struct entry *ring = malloc(ncap * sizeof(*ring));

        if (!ring)
            return RL_ERR_NOMEM;
        for (size_t i = 0; i < p->len; i++)
            ring[i] = *ring_at(p, i);
        free(p->ring);
        p->ring = ring;
        p->cap = ncap;
        p->head = 0;
    }
    *ring_at(p, p->len) = (struct entry){offset, 0};
    p->len++;
    tracker->in_flight++;
    return 0;
}

int
rl_offsets_done(struct rl_offsets *tracker, int32_t partition, int64_t offset)
{
    struct part *p = part_find(tracker, partition);
    size_t lo = 0, hi;
    int moved = 0;

    if (!p || p->len == 0)
        return 0;
    /* The ring is sorted by offset: binary search. */
    hi = p->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (ring_at(p, mid)->offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == p->len || ring_at(p, lo)->offset != offset)
        return 0;
    ring_at(p, lo)->done = 1;
    while (p->len > 0 && ring_at(p, 0)->done) {
        p->committable = ring_at(p, 0)->offset + 1;
        p->head = (p->head + 1) % p->cap;
        p->len--;
        tracker->in_flight--;
        moved = 1;
    }
    return moved;
}

int64_t
rl_offsets_take_committable(struct rl_offsets *tracker, int32_t partition)
{
    struct part *p = part_find(tracker, partition);
    int64_t pos;

    if (!p)
        return -1;
    pos = p->committable;
    p->committable = -1;
    return pos;
}

size_t
rl_offsets_in_flight(const struct rl_offsets *tracker)
{
    return tracker->in_flight;
}

void
rl_offsets_forget(struct rl_offsets *tracker, int32_t partition)
{
    for (size_t i = 0; i < tracker->count;) {
        struct part *p = &tracker->parts[i];

        if (partition >= 0 && p->partition != partition) {
            i++;
            continue;
        }
        tracker->in_flight -= p->len;
        free(p->ring);
        tracker->parts[i] = tracker->parts[--tracker->count];
    }
}
