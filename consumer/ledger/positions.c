/* Positions: what the ledger handled of each partition, compared with the
 * ledger's own consumed positions (consumed_positions), which move in the
 * transactions that register the runs, over contiguous offsets only
 * (rl_advance_positions). The ledger is behind what this process knows
 * it held only when it lost transactions it had committed: a failover to
 * a standby that had not received them. The events of those
 * registrations are then read again (rl_pipeline_seek_back); their run
 * IDs make that idempotent. Compared at the first events of a partition
 * in each epoch (an assignment: the group's committed offset may be past
 * what the ledger kept), and for every assigned partition, quiet ones
 * too, after every new connection and every POSITIONS_CHECK_MS: with what
 * this process registered and with the Kafka thread's floors (the
 * group's committed offset at the assignment, the offsets stored for
 * commit since), each of which only follows the ledger's writes. */
#include <stdlib.h>
#include <string.h>

#include "ledger_int.h"
#include "rl/clock.h"
#include "rl/db_positions.h"
#include "rl/err.h"
#include "rl/log.h"

/* How often every assigned partition is compared with the ledger: one
 * read of the assigned partitions' rows by primary key. */
#define POSITIONS_CHECK_MS 2000

static struct ledger_position *
position_of(struct ledger *lg, int32_t partition)
{
    for (size_t i = 0; i < lg->npositions; i++) {
        if (lg->positions[i].partition == partition)
            return &lg->positions[i];
    }
    if (lg->npositions == lg->positions_cap) {
        size_t cap = lg->positions_cap ? lg->positions_cap * 2 : 16;
        struct ledger_position *grown =
            realloc(lg->positions, cap * sizeof(*grown));

        if (!grown)
            return NULL;
        lg->positions = grown;
        lg->positions_cap = cap;
    }
    lg->positions[lg->npositions] = (struct ledger_position){
        .partition = partition, .epoch = 0, .handled_next = -1};
    return &lg->positions[lg->npositions++];
}

/* The entry of item's partition in item's epoch, started afresh when the
 * epoch is newer; NULL for an item of an older epoch (read before a seek
 * or a revocation: not this process's to account) or out of memory. */
static struct ledger_position *
position_for(struct ledger *lg, const struct rl_item *it)
{
    struct ledger_position *p;

    if (!it->src.from_kafka || it->src.epoch == 0)
        return NULL;
    p = position_of(lg, it->src.partition);
    if (!p || it->src.epoch < p->epoch)
        return NULL;
    if (it->src.epoch > p->epoch) {
        p->epoch = it->src.epoch;
        p->handled_next = -1;
        p->checked = 0;
    }
    return p;
}

/* A partition the ledger has no row of, which this process registered
 * nothing of, although offsets before expected were read or committed:
 * the Kafka thread looks up its first event stamped after the ledger
 * began keeping positions (positions_kept), and when the group committed
 * it, the ledger lost that registration, and the row written with it, so
 * the partition is read again from there. Once per partition and epoch.
 * Returns 0 or the read's error (logged). */
static int
seek_since_kept(struct ledger *lg, int32_t part, uint64_t epoch,
                int64_t expected)
{
    struct ledger_position *p = position_of(lg, part);
    char errstr[512];
    int err;

    if (!p || p->since_epoch == epoch)
        return 0;
    if (lg->positions_kept_since == 0) {
        err = rl_db_positions_kept_since(lg->db, &lg->positions_kept_since,
                                         errstr, sizeof(errstr));
        if (err) {
            rl_log_warn(NULL, "ledger: %s; will retry", errstr);
            return err;
        }
        if (lg->positions_kept_since == 0)
            return 0; /* no row: nothing to go by */
    }
    p->since_epoch = epoch;
    rl_pipeline_seek_since(lg->pl, part, epoch, lg->positions_kept_since,
                           expected);
    return 0;
}

/* Reads the ledger's positions of parts[0..n) and asks for a seek back
 * where one is before what was read or handled: expected[i] is the offset
 * the ledger should be at least at. registered[i] (NULL: none) says this
 * process registered events of parts[i]: a ledger without its row then
 * lost every registration of it (the row is written with the first), and
 * the partition is read again from its beginning. Without it, a missing
 * row is compared by time (seek_since_kept): it may be a partition last
 * read before the ledger kept positions. Returns 0, RL_ERR_NOMEM, or the
 * read's error (logged). */
static int
compare_with_ledger(struct ledger *lg, const int32_t *parts,
                    const uint64_t *epochs, const int64_t *expected,
                    const int *registered, size_t n, const char *when)
{
    int64_t *ledger;
    char errstr[512];
    int err;

    if (n == 0)
        return 0;
    ledger = calloc(n, sizeof(*ledger));
    if (!ledger) {
        rl_log_warn(NULL, "ledger: out of memory comparing positions; will "
                          "retry");
        return RL_ERR_NOMEM;
    }
    err = rl_db_read_positions(lg->db, lg->cfg->topic, parts, n, ledger, errstr,
                               sizeof(errstr));
    if (err) {
        rl_log_warn(NULL, "ledger: %s; will retry", errstr);
        free(ledger);
        return err;
    }
    for (size_t i = 0; i < n; i++) {
        if (ledger[i] < 0 && registered && registered[i] && expected[i] > 0) {
            rl_log_warn(NULL,
                        "ledger: partition %d has no consumed position in "
                        "the ledger but offset %lld was %s: the ledger lost "
                        "its registrations; reading the partition again "
                        "from its beginning",
                        (int)parts[i], (long long)expected[i], when);
            rl_pipeline_seek_back(lg->pl, parts[i], epochs[i],
                                  RL_SEEK_BEGINNING);
            continue;
        }
        if (ledger[i] < 0 && expected[i] > 0) {
            err = seek_since_kept(lg, parts[i], epochs[i], expected[i]);
            if (err)
                break;
            continue;
        }
        if (ledger[i] < 0 || ledger[i] >= expected[i])
            continue;
        rl_log_warn(NULL,
                    "ledger: partition %d is at offset %lld in the ledger "
                    "but offset %lld was %s: the ledger lost registrations; "
                    "reading the partition again from offset %lld",
                    (int)parts[i], (long long)ledger[i], (long long)expected[i],
                    when, (long long)ledger[i]);
        rl_pipeline_seek_back(lg->pl, parts[i], epochs[i], ledger[i]);
    }
    free(ledger);
    return err;
}

/* Before the first events of a partition in an epoch are handled: the
 * ledger's position must not be before the first of them (read from the
 * group's committed offset). Returns 0, or -1 when the ledger could not
 * be read (the caller treats it as a failed claim). */
int
ledger_positions_check(struct ledger *lg, const struct rl_item *batch)
{
    int32_t *parts = NULL;
    uint64_t *epochs = NULL;
    int64_t *first = NULL;
    size_t n = 0, count = 0;
    int rc = 0;

    for (const struct rl_item *it = batch; it; it = it->next) {
        const struct ledger_position *p = position_for(lg, it);

        count += p && !p->checked;
    }
    if (count == 0)
        return 0;
    parts = calloc(count, sizeof(*parts));
    epochs = calloc(count, sizeof(*epochs));
    first = calloc(count, sizeof(*first));
    if (!parts || !epochs || !first) {
        rl_log_warn(NULL, "ledger: out of memory comparing positions; will "
                          "retry");
        rc = -1;
        goto out;
    }
    for (const struct rl_item *it = batch; it; it = it->next) {
        struct ledger_position *p = position_for(lg, it);
        size_t i = 0;

        if (!p || p->checked)
            continue;
        while (i < n && parts[i] != p->partition)
            i++;
        if (i == n) {
            parts[n] = p->partition;
            epochs[n] = p->epoch;
            first[n] = it->src.offset;
            n++;
        } else if (it->src.offset < first[i]) {
            /* A batch put back after a failure may be out of order. */
            first[i] = it->src.offset;
        }
    }
    if (compare_with_ledger(lg, parts, epochs, first, NULL, n,
                            "read from the group's offset") != 0) {
        rc = -1;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct ledger_position *p = position_of(lg, parts[i]);

        if (p)
            p->checked = 1;
    }
out:
    free(parts);
    free(epochs);
    free(first);
    return rc;
}

void
ledger_positions_handled(struct ledger *lg, const struct rl_item *it)
{
    struct ledger_position *p = position_for(lg, it);

    if (p && it->src.offset + 1 > p->handled_next)
        p->handled_next = it->src.offset + 1;
    if (p)
        p->registered = 1;
    if (lg->round_open && it->src.from_kafka) {
        int64_t first = it->src.covers_from;

        if (first < 0 || first > it->src.offset)
            first = it->src.offset;
        if (lg->round_n == lg->round_cap) {
            size_t cap = lg->round_cap ? lg->round_cap * 2 : 64;
            int32_t *parts = realloc(lg->round_parts, cap * sizeof(*parts));
            int64_t *firsts = NULL, *offsets = NULL;

            if (parts) {
                lg->round_parts = parts;
                firsts = realloc(lg->round_firsts, cap * sizeof(*firsts));
            }
            if (firsts) {
                lg->round_firsts = firsts;
                offsets = realloc(lg->round_offsets, cap * sizeof(*offsets));
            }
            if (!offsets)
                return; /* the note stops short: the comparison reads
                           those events again */
            lg->round_offsets = offsets;
            lg->round_cap = cap;
        }
        lg->round_parts[lg->round_n] = it->src.partition;
        lg->round_firsts[lg->round_n] = first;
        lg->round_offsets[lg->round_n++] = it->src.offset;
        if (first < it->src.offset)
            lg->round_gaps = 1;
    }
}

int
ledger_positions_due(const struct ledger *lg)
{
    return lg->recheck_positions ||
           rl_clock_ms() - lg->positions_checked_at >= POSITIONS_CHECK_MS;
}

/* After a new connection, and every POSITIONS_CHECK_MS: the ledger must
 * hold, of every assigned partition, what this process registered and
 * what the Kafka thread's floors show it held (the group's committed
 * offset, the offsets stored for commit), quiet partitions included. A
 * failure leaves the check for the next turn (the statement that failed
 * drops this connection). */
void
ledger_positions_recheck(struct ledger *lg)
{
    struct rl_read_floor *floors;
    size_t nfloors, cap, n = 0;
    int32_t *parts;
    uint64_t *epochs;
    int64_t *expected;
    int *registered;
    int err;

    lg->recheck_positions = 0;
    lg->positions_checked_at = rl_clock_ms();
    floors = rl_pipeline_floors_copy(lg->pl, &nfloors);
    cap = nfloors + lg->npositions;
    if (cap == 0) {
        free(floors);
        return;
    }
    parts = calloc(cap, sizeof(*parts));
    epochs = calloc(cap, sizeof(*epochs));
    expected = calloc(cap, sizeof(*expected));
    registered = calloc(cap, sizeof(*registered));
    if (!parts || !epochs || !expected || !registered) {
        lg->recheck_positions = 1;
        goto out;
    }
    for (size_t i = 0; i < nfloors; i++) {
        const struct rl_read_floor *f = &floors[i];

        parts[n] = f->partition;
        epochs[n] = f->epoch;
        expected[n] = f->next;
        n++;
    }
    /* What this process registered, in the epoch the Kafka thread reads
     * the partition in (an older epoch's seek would be ignored). */
    for (size_t i = 0; i < lg->npositions; i++) {
        const struct ledger_position *p = &lg->positions[i];
        size_t k = 0;

        while (k < n && parts[k] != p->partition)
            k++;
        if (k == n) {
            if (p->handled_next < 0)
                continue;
            parts[n] = p->partition;
            epochs[n] = p->epoch;
            expected[n] = -1;
            n++;
        }
        registered[k] = p->registered;
        if (p->epoch == epochs[k] && p->handled_next > expected[k])
            expected[k] = p->handled_next;
    }
    /* Nothing known of a partition: nothing to compare. */
    for (size_t i = 0; i < n;) {
        if (expected[i] >= 0) {
            i++;
            continue;
        }
        n--;
        parts[i] = parts[n];
        epochs[i] = epochs[n];
        expected[i] = expected[n];
        registered[i] = registered[n];
    }
    err = compare_with_ledger(lg, parts, epochs, expected, registered, n,
                              "registered or committed before");
    if (err != 0 && err != RL_ERR_NOMEM)
        ledger_drop_db(lg);
    if (err != 0)
        lg->recheck_positions = 1;
out:
    free(floors);
    free(parts);
    free(epochs);
    free(expected);
    free(registered);
}

/* Dead-letters the refused events of the list (each with its refusal
 * reason and detail), noting their positions in the ledger first, so
 * that reading them again after a rebalance is not taken for lost
 * registrations. The note names the offsets this intake turn registered
 * too (committed before it), each with the offsets before it that Kafka
 * never delivered (transaction markers, compacted records), so that the
 * position moves over a refused event between two registered ones and
 * over those gaps; it never moves past an offset in none of them
 * (rl_advance_positions). refused may be NULL: the turn's gaps alone. */
void
ledger_dead_letter_refused(struct ledger *lg, struct rl_item *refused)
{
    size_t count = lg->round_n, n = 0;
    int32_t *parts;
    int64_t *first, *next;
    int noted = 1;
    char errstr[512];

    for (struct rl_item *it = refused; it; it = it->next)
        count++;
    parts = calloc(count ? count : 1, sizeof(*parts));
    first = calloc(count ? count : 1, sizeof(*first));
    next = calloc(count ? count : 1, sizeof(*next));
    if (parts && first && next) {
        for (size_t i = 0; i < lg->round_n; i++) {
            parts[n] = lg->round_parts[i];
            first[n] = lg->round_firsts[i];
            next[n++] = lg->round_offsets[i] + 1;
        }
        for (struct rl_item *it = refused; it; it = it->next) {
            if (!position_for(lg, it))
                continue;
            parts[n] = it->src.partition;
            first[n] = it->src.covers_from >= 0 &&
                               it->src.covers_from <= it->src.offset
                           ? it->src.covers_from
                           : it->src.offset;
            next[n++] = it->src.offset + 1;
        }
    } else {
        n = 0;
        noted = 0;
    }
    /* The dead letter is what matters: without the note, a second one
     * after a rebalance is the cost. */
    if (n > 0 && !lg->db)
        noted = 0;
    else if (n > 0 &&
             rl_db_note_positions(lg->db, lg->cfg->topic, parts, first, next, n,
                                  errstr, sizeof(errstr)) != 0) {
        rl_log_warn(NULL, "ledger: %s", errstr);
        noted = 0;
    }
    free(parts);
    free(first);
    free(next);
    while (refused) {
        struct rl_item *it = refused;

        refused = it->next;
        it->next = NULL;
        if (noted)
            ledger_positions_handled(lg, it);
        rl_pipeline_dead_letter(lg->pl, it, RL_DEADLETTER_INTAKE,
                                it->refusal_reason ? it->refusal_reason
                                                   : "invalid_event",
                                it->refusal_detail ? it->refusal_detail : "");
    }
}

/* Takes the events the intake refused (no parsed event) out of batch
 * into *refused, in order, for ledger_dead_letter_refused after the
 * registrations of the rest. Returns the rest of batch, in order. */
struct rl_item *
ledger_refuse_intake(struct ledger *lg, struct rl_item *batch,
                     struct rl_item **refused_out)
{
    struct rl_item *rest = NULL, **rest_tail = &rest;
    struct rl_item *refused = NULL, **refused_tail = &refused;

    while (batch) {
        struct rl_item *it = batch;

        batch = it->next;
        it->next = NULL;
        if (it->ev) {
            *rest_tail = it;
            rest_tail = &it->next;
        } else {
            *refused_tail = it;
            refused_tail = &it->next;
        }
    }
    (void)lg;
    *refused_out = refused;
    return rest;
}

void
ledger_positions_free(struct ledger *lg)
{
    free(lg->positions);
    lg->positions = NULL;
    lg->npositions = lg->positions_cap = 0;
    free(lg->round_parts);
    free(lg->round_firsts);
    free(lg->round_offsets);
    lg->round_parts = NULL;
    lg->round_firsts = NULL;
    lg->round_offsets = NULL;
    lg->round_n = lg->round_cap = 0;
}
