/* The runs this worker holds a lease on: the live list the renewer walks,
 * the run span of each claim, and leaving the ledger stage (finish). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ledger_int.h"
#include "rl/clock.h"
#include "rl/log.h"
#include "rl/otlp.h"

size_t
ledger_count(const struct rl_item *list)
{
    size_t n = 0;

    for (; list; list = list->next)
        n++;
    return n;
}

void
ledger_log_ctx(const struct rl_item *item, struct rl_log_ctx *ctx)
{
    *ctx = (struct rl_log_ctx)RL_LOG_CTX_INIT;
    ctx->run_id = item->run_id;
    ctx->job = item->job;
    ctx->tenant = item->tenant;
    ctx->attempt = item->attempt_no > 0 ? item->attempt_no : -1;
    ctx->lease_epoch = item->lease_epoch > 0 ? item->lease_epoch : -1;
    if (item->src.from_kafka) {
        ctx->partition = item->src.partition;
        ctx->offset = item->src.offset;
    }
    if (item->trace.trace_id[0]) {
        ctx->trace_id = item->trace.trace_id;
        ctx->span_id = item->attempt_span_id[0] ? item->attempt_span_id
                                                : item->run_span_id;
    }
}

/* Wall clock in ns, for span times. */
int64_t
ledger_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A claim was won: the run span of this epoch starts. stored is the
 * traceparent the claim returned (NULL: none). */
void
ledger_trace_claimed(struct rl_item *item, const char *stored)
{
    /* The stored value wins over the event's: every claim of the run,
     * here or elsewhere, must name the same trace. */
    snprintf(item->traceparent, sizeof(item->traceparent), "%s",
             stored ? stored : "");
    rl_trace_for_run(item->run_id, item->traceparent, &item->trace);
    rl_trace_run_span_id(item->run_id, item->lease_epoch, item->run_span_id);
    item->attempt_span_id[0] = '\0';
    item->run_start_ns = ledger_now_ns();
}

void
ledger_live_add(struct ledger *lg, struct rl_item *item)
{
    pthread_mutex_lock(&lg->live_lock);
    item->renewed_at = item->leased_at;
    item->renew_lost = 0;
    item->live_prev = NULL;
    item->live_next = lg->live;
    if (lg->live)
        lg->live->live_prev = item;
    lg->live = item;
    lg->live_count++;
    pthread_mutex_unlock(&lg->live_lock);
}

void
ledger_live_remove(struct ledger *lg, struct rl_item *item)
{
    pthread_mutex_lock(&lg->live_lock);
    if (item->live_prev)
        item->live_prev->live_next = item->live_next;
    else if (lg->live == item)
        lg->live = item->live_next;
    else
        goto done; /* not in the list */
    if (item->live_next)
        item->live_next->live_prev = item->live_prev;
    item->live_prev = item->live_next = NULL;
    lg->live_count--;
done:
    pthread_mutex_unlock(&lg->live_lock);
}

/* Ends the run span of this claim (once). Runs whose trace is not
 * sampled are propagated but not exported. */
void
ledger_trace_run_end(struct ledger *lg, struct rl_item *item,
                     const char *outcome)
{
    struct rl_otlp_span span;

    if (!item->run_start_ns)
        return;
    if (lg->pl->otlp && (item->trace.flags & RL_TRACE_FLAG_SAMPLED)) {
        span = (struct rl_otlp_span){
            .name = "runledger.run",
            .trace_id = item->trace.trace_id,
            .span_id = item->run_span_id,
            .parent_span_id = item->trace.parent_id,
            .kind = 2, /* SERVER: the run serves the event */
            .start_ns = item->run_start_ns,
            .end_ns = ledger_now_ns(),
            .error = strcmp(outcome, "failed") == 0 ||
                     strcmp(outcome, "unknown") == 0,
            .run_id = item->run_id,
            .tenant = item->tenant,
            .job = item->job,
            .outcome = outcome,
            .attempt = item->attempt_no > 0 ? item->attempt_no : -1,
            .lease_epoch = item->lease_epoch,
        };
        rl_otlp_export(lg->pl->otlp, &span);
    }
    item->run_start_ns = 0;
}

/* Leaves the ledger stage: the run reached a durable state (or is someone
 * else's), so its offset may be committed. */
void
ledger_finish(struct ledger *lg, struct rl_item *item)
{
    ledger_trace_run_end(
        lg, item, item->trace_outcome ? item->trace_outcome : "released");
    if (lg->backlog_until > rl_clock_ms())
        lg->sweep_soon = 1;
    ledger_live_remove(lg, item);
    rl_pipeline_finish(lg->pl, item);
}

/* The lease item runs under, as every write after its claim names it. */
struct rl_lease
ledger_lease_of(const struct ledger *lg, const struct rl_item *item)
{
    return (struct rl_lease){.run_id = item->run_id,
                             .worker = lg->cfg->worker_id,
                             .epoch = item->lease_epoch};
}
