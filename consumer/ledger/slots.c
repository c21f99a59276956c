/* Model slots: how many calls may start now, the runs the sweeper claimed
 * ahead of a free slot, and the sweep of due runs that fills them within
 * the bounds on held runs and held bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_int.h"
#include "rl/clock.h"
#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/log.h"

/* Model calls the ledger may start now: RUNLEDGER_MAX_IN_FLIGHT caps the
 * calls in flight, not the runs the process holds. A slot is free again
 * as soon as its answer is back, while the answer waits for its
 * completion: with long calls, a cap on every held run would leave the
 * model idle while a wave of answers is completed, and the next wave of
 * claims would start only after it (bench slow5s: 5,000 calls of 5 s came
 * back and went out in waves, 0.65 of the calls' throughput). */
static long
free_slots(const struct ledger *lg)
{
    return (long)lg->cfg->max_in_flight - (long)lg->in_model;
}

/* The slots new claims may take: the free ones less the runs claimed
 * ahead, which go first. */
long
ledger_model_room(const struct ledger *lg)
{
    long room = free_slots(lg) - (long)lg->ready_count;

    return room > 0 ? room : 0;
}

/* Runs the sweeper claims ahead of the free slots while a backlog waits:
 * an eighth of RUNLEDGER_MAX_IN_FLIGHT (at least one, at most 256), about
 * what the slots free between two sweeps with short calls. They are
 * handed out in the fair order of the sweep that claimed them; a run of
 * another tenant that arrives meanwhile waits behind at most these. */
long
ledger_reserve_target(const struct ledger *lg)
{
    long r = (long)lg->cfg->max_in_flight / 8;

    if (lg->backlog_until <= rl_clock_ms())
        return 0;
    if (r < 1)
        r = 1;
    return r < 256 ? r : 256;
}

/* Starts the runs claimed ahead, oldest first, as many as there are free
 * model slots. */
void
ledger_start_ready(struct ledger *lg)
{
    long free = free_slots(lg);
    struct rl_item *list = NULL, **tail = &list;

    while (lg->ready && free > 0) {
        struct rl_item *it = lg->ready;

        lg->ready = it->next;
        lg->ready_count--;
        it->next = NULL;
        *tail = it;
        tail = &it->next;
        free--;
    }
    if (!lg->ready)
        lg->ready_tail = &lg->ready;
    if (list)
        ledger_start_attempts(lg, list);
}

/* Gives back the runs claimed ahead (once the process is stopping): each
 * lease is released, or, while PostgreSQL is away, kept for a later turn
 * (ledger_drop_ready once the grace period is over). */
void
ledger_release_ready(struct ledger *lg)
{
    struct rl_item *list = lg->ready;

    lg->ready = NULL;
    lg->ready_tail = &lg->ready;
    lg->ready_count = 0;
    if (list)
        ledger_start_attempts(lg, list);
}

/* Gives up the runs claimed ahead (once the grace period is over): their
 * leases expire and a sweeper, of this worker or another, claims them. */
void
ledger_drop_ready(struct ledger *lg)
{
    while (lg->ready) {
        struct rl_item *it = lg->ready;

        lg->ready = it->next;
        it->next = NULL;
        ledger_finish(lg, it);
    }
    lg->ready_tail = &lg->ready;
    lg->ready_count = 0;
}

/* Runs the sweeper may claim under RUNLEDGER_MAX_HELD_BYTES: none once
 * the runs held are charged the limit, else as many as fit in what is
 * left at the average charge of the runs held now (at
 * RUNLEDGER_MAX_EVENT_BYTES when none is), and at least one. A claim's
 * size is known only once it is claimed: runs larger than the average
 * may take the held bytes past the limit, and the Kafka thread then
 * pauses until they are back under it. */
static long
held_bytes_room(const struct ledger *lg)
{
    long long held = atomic_load(&lg->pl->counters.held_bytes);
    long runs = atomic_load(&lg->pl->in_flight);
    long long left = (long long)lg->cfg->max_held_bytes - held;
    long long each = lg->cfg->max_event_bytes;

    if (left <= 0)
        return 0;
    if (held > 0 && runs > 0 && held / runs > 0)
        each = held / runs;
    if (left / each < 1)
        return 1;
    return left / each < 256 ? (long)(left / each) : 256;
}

void
ledger_sweep(struct ledger *lg)
{
    /* The free slots and the reserve, less what was claimed ahead. */
    long room =
        free_slots(lg) + ledger_reserve_target(lg) - (long)lg->ready_count;
    long held =
        RL_PIPELINE_LIVE_MAX(lg->cfg->max_in_flight) - (long)lg->live_count;
    long bytes_room = held_bytes_room(lg);
    struct rl_claim claims[SWEEP_MAX];
    int64_t leased_at;
    size_t n = 0;
    char errstr[512];
    int err;

    /* The sweeper's runs are new to the process: they also need room
     * under its bounds on held runs and held bytes. */
    if (held < room)
        room = held;
    if (bytes_room < room)
        room = bytes_room;
    if (room <= 0)
        return;
    if (room > SWEEP_MAX)
        room = SWEEP_MAX;
    leased_at = rl_clock_ms();
    lg->sweep_soon = 0;
    lg->last_sweep = leased_at;
    err = rl_db_claim_due(
        lg->db,
        &(struct rl_claim_opts){.worker = lg->cfg->worker_id,
                                .lease_seconds = lg->cfg->lease_seconds,
                                .max = room},
        claims, &n, errstr, sizeof(errstr));
    if (err == 0 && n == (size_t)room) {
        /* Every slot asked for was filled: more may wait. */
        lg->backlog_until = leased_at + BACKLOG_MS;
        lg->sweep_soon = 1;
    }
    if (err) {
        rl_log_warn(NULL, "sweeper could not claim: %s", errstr);
        ledger_drop_db(lg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct rl_claim *c = &claims[i];
        struct rl_item *it = calloc(1, sizeof(*it));

        if (!it) {
            rl_claim_clear(c);
            continue;
        }
        atomic_fetch_add(&lg->pl->in_flight, 1);
        atomic_fetch_add(&lg->pl->counters.swept, 1);
        memcpy(it->run_id, c->run_id, sizeof(it->run_id));
        it->job = c->job;
        it->tenant = c->tenant;
        it->request_json = c->request_json;
        it->raw_input = c->raw_input;
        c->job = c->tenant = c->request_json = c->raw_input = NULL;
        /* What its dead letter needs to rebuild the event and name where
         * it was read, should the run fail for good. */
        memcpy(it->scheduled_at, c->scheduled_at, sizeof(it->scheduled_at));
        it->version = c->version;
        it->origin_topic = c->source_topic;
        c->version = c->source_topic = NULL;
        it->origin_partition = c->source_partition;
        it->origin_offset = c->source_offset;
        it->lease_epoch = c->lease_epoch;
        it->leased_at = leased_at;
        it->attempts_before = c->attempts;
        it->ambiguous_prior = c->ambiguous_prior;
        it->ambiguous_count = c->ambiguous_count;
        memcpy(it->fingerprint, c->fingerprint, sizeof(it->fingerprint));
        it->deadline_passed = c->deadline_passed;
        ledger_trace_claimed(it, c->traceparent);
        rl_claim_clear(c);
        rl_item_charge(it, &lg->pl->counters.held_bytes,
                       (size_t)lg->cfg->max_request_bytes);
        ledger_live_add(lg, it);
        *lg->ready_tail = it;
        lg->ready_tail = &it->next;
        lg->ready_count++;
    }
    ledger_start_ready(lg);
}
