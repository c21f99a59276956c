/* Intake: runs read from Kafka are registered 512 to a statement and
 * claimed while a model slot is free; the rest stay pending in the ledger
 * for a sweeper. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_int.h"
#include "rl/clock.h"
#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/log.h"

/* Registers up to 512 runs of batch in one round trip and claims at most
 * *room of them (the model slots free), taking what it claimed off *room.
 * The runs not claimed are pending in the ledger, due now, and done here:
 * their offsets are committed and a sweeper claims them. Returns the rest
 * of the list, not yet registered. */
static struct rl_item *
claim_chunk(struct ledger *lg, struct rl_item *batch, long *room)
{
    struct rl_run_reg regs[REGISTER_MAX];
    struct rl_claim claims[REGISTER_MAX];
    struct rl_item *items[REGISTER_MAX];
    struct rl_item *rest = NULL;
    struct rl_item *won = NULL, **won_tail = &won;
    int64_t leased_at;
    size_t n = 0;
    char errstr[512];
    int err;

    if (!lg->db) {
        /* The connection went while redoing other steps: claim later. */
        while (batch) {
            struct rl_item *next = batch->next;

            ledger_requeue(lg, batch, REDO_CLAIM);
            batch = next;
        }
        return NULL;
    }
    for (struct rl_item *it = batch; it && n < REGISTER_MAX; it = it->next) {
        const struct rl_event *ev = it->ev;

        items[n] = it;
        regs[n] = (struct rl_run_reg){
            .run_id = ev->run_id,
            .job = ev->job,
            .tenant = ev->tenant,
            .scheduled_at = ev->scheduled_at,
            .version = ev->version,
            .fingerprint = ev->fingerprint,
            .request_json = ev->request_json,
            .input_json = ev->input_json,
            .deadline_seconds = lg->cfg->run_deadline_seconds,
            .source_topic = lg->cfg->topic,
            .source_partition = it->src.partition,
            .source_offset = it->src.offset,
            .traceparent = it->traceparent,
        };
        n++;
    }
    /* A batch larger than one statement (RUNLEDGER_DB_BATCH > 512) is
     * claimed in parts; none of it may be dropped. */
    rest = items[n - 1]->next;
    items[n - 1]->next = NULL;
    leased_at = rl_clock_ms(); /* before the statement: the lease runs from its
                             own start */
    err = rl_db_register_claim_some(
        lg->db, regs, n,
        &(struct rl_claim_opts){.worker = lg->cfg->worker_id,
                                .lease_seconds = lg->cfg->lease_seconds,
                                .max = *room},
        claims, errstr, sizeof(errstr));
    if (err == RL_ERR_INVALID && n > 1) {
        /* The database refused a value of one event (a constraint, or
         * JSON that jsonb rejects): it must not hold up the others, so
         * they are claimed one at a time and only it is refused. */
        rl_log_warn(NULL,
                    "could not claim %zu runs: %s; claiming them one "
                    "by one",
                    n, errstr);
        for (size_t i = 0; i < n; i++) {
            items[i]->next = NULL;
            claim_chunk(lg, items[i], room);
        }
        return rest;
    }
    if (err == RL_ERR_INVALID) {
        /* Retrying cannot help: the event is dead-lettered with the
         * database's reason, and its offset is committed after that. */
        struct rl_item *it = items[0];

        atomic_fetch_add(&lg->pl->counters.invalid, 1);
        it->next = NULL;
        free(it->refusal_reason);
        free(it->refusal_detail);
        it->refusal_reason = strdup("rejected_by_ledger");
        it->refusal_detail = strdup(errstr);
        ledger_dead_letter_refused(lg, it);
        return rest;
    }
    if (err) {
        /* Nothing was claimed: put the batch back in front. */
        rl_log_warn(NULL, "could not claim %zu runs: %s; will retry", n,
                    errstr);
        ledger_drop_db(lg);
        for (size_t i = n; i-- > 0;)
            ledger_requeue(lg, items[i], REDO_CLAIM);
        while (rest) {
            struct rl_item *next = rest->next;

            ledger_requeue(lg, rest, REDO_CLAIM);
            rest = next;
        }
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        struct rl_item *it = items[i];
        struct rl_claim *c = &claims[i];

        it->next = NULL;
        ledger_positions_handled(lg, it);
        it->job = strdup(it->ev->job);
        it->tenant = strdup(it->ev->tenant);
        rl_item_recount(it);
        switch (c->status) {
        case RL_CLAIM_WON:
            if (*room > 0)
                (*room)--;
            atomic_fetch_add(&lg->pl->counters.claims_won, 1);
            it->lease_epoch = c->lease_epoch;
            it->leased_at = leased_at;
            it->attempts_before = c->attempts;
            it->ambiguous_prior = c->ambiguous_prior;
            it->ambiguous_count = c->ambiguous_count;
            memcpy(it->fingerprint, c->fingerprint, sizeof(it->fingerprint));
            it->deadline_passed = c->deadline_passed;
            it->request_json = strdup(it->ev->request_json);
            it->raw_input = c->raw_input; /* stored one wins */
            c->raw_input = NULL;
            rl_item_recount(it);
            ledger_trace_claimed(it, c->traceparent);
            ledger_live_add(lg, it);
            *won_tail = it;
            won_tail = &it->next;
            break;
        case RL_CLAIM_QUEUED:
            /* Durable and due: any worker's sweeper claims it when a slot
             * (of its tenant) is free. */
            atomic_fetch_add(&lg->pl->counters.queued, 1);
            lg->backlog_until = rl_clock_ms() + BACKLOG_MS;
            lg->sweep_soon = 1;
            ledger_finish(lg, it);
            break;
        case RL_CLAIM_CONFLICT:
            atomic_fetch_add(&lg->pl->counters.conflicts, 1);
            rl_pipeline_dead_letter(lg->pl, it, RL_DEADLETTER_INTAKE,
                                    "fingerprint_conflict",
                                    "same run id, different request "
                                    "fingerprint; stored run untouched");
            break;
        case RL_CLAIM_PURGED: {
            /* Its run finished and was purged: the event is acknowledged
             * and never run again. */
            struct rl_log_ctx ctx;

            ledger_log_ctx(it, &ctx);
            atomic_fetch_add(&lg->pl->counters.purged_redelivered, 1);
            rl_log_info(&ctx, "event of a purged run acknowledged: its "
                              "tombstone has the same fingerprint");
            ledger_finish(lg, it);
            break;
        }
        default:
            /* Completed, leased by a live owner, parked, or not due: the
             * ledger already holds this run; the sweeper guarantees a
             * leased or pending one still finishes. */
            atomic_fetch_add(&lg->pl->counters.claims_lost, 1);
            atomic_fetch_add(&lg->pl->counters.duplicates, 1);
            ledger_finish(lg, it);
            break;
        }
        rl_claim_clear(c);
    }
    if (won) {
        rl_failpoint("after_claim");
        ledger_start_attempts(lg, won);
    }
    return rest;
}

static long intake_room(const struct ledger *lg, long room);

/* Registers a list of Kafka runs, 512 per round trip, and claims up to
 * room of them (the model slots free), less what the sweeper hands out
 * while runs wait in the ledger (intake_room). */
void
ledger_claim_intake(struct ledger *lg, struct rl_item *batch, long room)
{
    struct rl_item *refused = NULL;

    if (lg->db && ledger_positions_check(lg, batch) != 0) {
        /* As a failed claim: put the batch back, reconnect. */
        ledger_drop_db(lg);
        while (batch) {
            struct rl_item *next = batch->next;

            ledger_requeue(lg, batch, REDO_CLAIM);
            batch = next;
        }
        return;
    }
    batch = ledger_refuse_intake(lg, batch, &refused);
    room = intake_room(lg, room);
    /* The refused events are noted after the registrations of their
     * turn, whose offsets the note names too: a failover that keeps the
     * note and loses a registration would otherwise leave the position
     * past a lost run. */
    lg->round_open = 1;
    lg->round_n = 0;
    lg->round_gaps = 0;
    while (batch)
        batch = claim_chunk(lg, batch, &room);
    lg->round_open = 0;
    /* Offsets Kafka never delivers (transaction markers, compacted
     * records) are in no registration: noted with the events after
     * them, or the position would stop before them for good. */
    if (refused || (lg->round_gaps && lg->db))
        ledger_dead_letter_refused(lg, refused);
    lg->round_n = 0;
}

/* How many intake runs the next statement takes: RUNLEDGER_DB_BATCH while
 * it may claim them, a whole statement's worth (REGISTER_MAX) when it only
 * registers them (no slot free, or a backlog the sweeper hands the slots
 * to). A burst of one tenant is then registered at the speed of
 * PostgreSQL, and the events behind it in its partitions, another
 * tenant's, are read sooner. */
size_t
ledger_intake_take(const struct ledger *lg, long room)
{
    size_t take = (size_t)lg->cfg->db_batch;

    if (intake_room(lg, room) <= 0 && take < REGISTER_MAX)
        take = REGISTER_MAX;
    return take;
}

/* The slots the intake may claim for its own runs. While runs wait in
 * the ledger, the free slots are the sweeper's, which hands them out in
 * the fair order of rl_claim_due, except those it cannot take: one sweep
 * claims at most SWEEP_MAX runs and the reserve, and a slot beyond that
 * would stay idle until the sweep after. Those the intake claims for its
 * own runs, which saves each of them a second write (registered pending,
 * then claimed) and a share of a sweep's statement. When the model is
 * what runs wait for, few slots are free at a time and the sweeper gets
 * them all (a burst of one tenant does not take a freed slot from
 * another tenant's waiting run); when PostgreSQL is, the model has slots
 * to spare, and leaving them all to the sweeper would send every new run
 * down the dearer path, which makes the ledger fall further behind (`make
 * bench` soak at the burst rate: every run pending from the first minute,
 * 72 % done by the end of the drain). */
static long
intake_room(const struct ledger *lg, long room)
{
    if (lg->backlog_until <= rl_clock_ms())
        return room;
    room -= SWEEP_MAX + ledger_reserve_target(lg);
    return room > 0 ? room : 0;
}
