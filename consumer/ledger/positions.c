/* Positions: what the ledger handled of each partition, compared with the
 * ledger's own consumed positions (consumed_positions), which move in the
 * transactions that register the runs. The ledger is behind what this
 * process handled only when it lost transactions it had committed: a
 * failover to a standby that had not received them. The events of those
 * registrations are then read again (rl_pipeline_seek_back); their run
 * IDs make that idempotent. Compared at the first events of a partition
 * in each epoch (an assignment: the group's committed offset may be past
 * what the ledger kept) and after every new connection (the process's
 * own registrations). */
#include <stdlib.h>
#include <string.h>

#include "ledger_int.h"
#include "rl/db_positions.h"
#include "rl/err.h"
#include "rl/log.h"

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

/* Reads the ledger's positions of parts[0..n) and asks for a seek back
 * where one is before what was read or handled: expected[i] is the offset
 * the ledger should be at least at. Returns 0, RL_ERR_NOMEM, or the read's
 * error (logged). */
static int
compare_with_ledger(struct ledger *lg, const int32_t *parts,
                    const uint64_t *epochs, const int64_t *expected, size_t n,
                    const char *when)
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
    return 0;
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
    if (compare_with_ledger(lg, parts, epochs, first, n,
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
}

/* After a new connection: the ledger must hold what this process handled
 * on the connections before. A failure leaves the check for the next
 * connection (the statement that failed drops this one). */
void
ledger_positions_recheck(struct ledger *lg)
{
    int32_t *parts;
    uint64_t *epochs;
    int64_t *expected;
    size_t n = 0;
    int err;

    lg->recheck_positions = 0;
    if (lg->npositions == 0)
        return;
    parts = calloc(lg->npositions, sizeof(*parts));
    epochs = calloc(lg->npositions, sizeof(*epochs));
    expected = calloc(lg->npositions, sizeof(*expected));
    if (parts && epochs && expected) {
        for (size_t i = 0; i < lg->npositions; i++) {
            const struct ledger_position *p = &lg->positions[i];

            if (p->handled_next < 0)
                continue;
            parts[n] = p->partition;
            epochs[n] = p->epoch;
            expected[n] = p->handled_next;
            n++;
        }
        err = compare_with_ledger(lg, parts, epochs, expected, n,
                                  "registered on an earlier connection");
        if (err != 0 && err != RL_ERR_NOMEM)
            ledger_drop_db(lg);
        if (err != 0)
            lg->recheck_positions = 1;
    } else {
        lg->recheck_positions = 1;
    }
    free(parts);
    free(epochs);
    free(expected);
}

/* Dead-letters the refused events of the list (each with its refusal
 * reason and detail), noting their positions in the ledger first, so
 * that reading them again after a rebalance is not taken for lost
 * registrations. */
void
ledger_dead_letter_refused(struct ledger *lg, struct rl_item *refused)
{
    int32_t parts[64];
    int64_t next[64];
    size_t n = 0;
    int noted = 1;
    char errstr[512];

    for (struct rl_item *it = refused; it; it = it->next) {
        size_t i = 0;

        if (!position_for(lg, it))
            continue;
        while (i < n && parts[i] != it->src.partition)
            i++;
        if (i == sizeof(parts) / sizeof(parts[0]))
            continue;
        if (i == n) {
            parts[n] = it->src.partition;
            next[n++] = it->src.offset + 1;
        } else if (it->src.offset + 1 > next[i]) {
            next[i] = it->src.offset + 1;
        }
    }
    /* The dead letter is what matters: without the note, a second one
     * after a rebalance is the cost. */
    if (n > 0 && !lg->db)
        noted = 0;
    else if (n > 0 && rl_db_note_positions(lg->db, lg->cfg->topic, parts, next,
                                           n, errstr, sizeof(errstr)) != 0) {
        rl_log_warn(NULL, "ledger: %s", errstr);
        noted = 0;
    }
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

/* Takes the events the intake refused (no parsed event) out of batch and
 * dead-letters them. Returns the rest of batch, in order. */
struct rl_item *
ledger_refuse_intake(struct ledger *lg, struct rl_item *batch)
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
    if (refused)
        ledger_dead_letter_refused(lg, refused);
    return rest;
}

void
ledger_positions_free(struct ledger *lg)
{
    free(lg->positions);
    lg->positions = NULL;
    lg->npositions = lg->positions_cap = 0;
}
