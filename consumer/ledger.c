/* The ledger stage of `runledger consume`: everything that talks to
 * PostgreSQL for runs in flight. It claims runs (from Kafka intake or the
 * sweeper) in batches, stores the collected input write-once, records each
 * dispatch before the model call, renews every held lease in one statement,
 * and turns model results into exactly one durable state: completed (with
 * its outbox rows, one transaction), pending again with next_attempt_at,
 * failed, or unknown. Every write after the claim carries (worker,
 * lease_epoch); a refused write means the lease is gone and the run is
 * abandoned, never completed. @locality ledger thread */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "pipeline.h"
#include "rl/approval.h"
#include "rl/clock.h"
#include "rl/db.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/log.h"
#include "rl/otlp.h"
#include "rl/ratelimit.h"

/* Which step of a run to redo after the connection came back. */
enum { REDO_NONE, REDO_CLAIM, REDO_START, REDO_RESULT };

struct ledger {
    struct rl_pipeline *pl;
    const struct rl_config *cfg;
    struct rl_db *db;
    struct rl_item *live; /* runs this worker holds a lease on */
    size_t live_count;
    struct rl_item *retry; /* results whose ledger write must be redone */
    /* The renewer thread walks live and writes the renewal fields of its
     * items (renewed_at, renew_lost) under live_lock; the ledger thread
     * changes the list under it too, and reads the list without it. */
    pthread_mutex_t live_lock;
    pthread_cond_t renew_wake;
    pthread_t renewer;
    int renewer_started;
    int renew_stop;          /* @locks live_lock */
    atomic_long leases_gone; /* renew_lost set, not yet seen by ledger */
    int64_t next_sweep;
    int64_t next_connect;
    long connect_backoff;
    int abandoned;
    size_t in_model;   /* live runs whose call the model thread holds */
    size_t completing; /* live runs the completer holds */
    /* Until then the ledger has seen runs wait for a slot (registered
     * pending, or a sweep that filled its room): the slots are handed out
     * by the fair claim of the sweeper, the intake claims only those a
     * sweep cannot take (intake_room), and a slot that frees is refilled
     * at once (sweep_soon) rather than at the next sweep. */
    int64_t backlog_until;
    int sweep_soon;
    int64_t last_sweep;
    /* Runs the sweeper claimed ahead, leased and live, waiting for a model
     * slot, oldest first: a slot that frees while runs wait in the ledger
     * is refilled from here in the same turn of the loop, without waiting
     * for the next sweep and its statement. */
    struct rl_item *ready;
    struct rl_item **ready_tail;
    size_t ready_count;
    unsigned int seed;
};

/* How long a backlog seen keeps slots handed out by the sweeper, and the
 * shortest time between two sweeps it asks for. */
#define BACKLOG_MS 10000
#define SWEEP_SOON_MS 20

/* Runs one registration statement carries at most. */
#define REGISTER_MAX 512

/* Runs one sweep claims at most. */
#define SWEEP_MAX 256

static size_t
count(const struct rl_item *list)
{
    size_t n = 0;

    for (; list; list = list->next)
        n++;
    return n;
}

static void
log_ctx(const struct rl_item *item, struct rl_log_ctx *ctx)
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
static int64_t
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A claim was won: the run span of this epoch starts. stored is the
 * traceparent the claim returned (NULL: none). */
static void
trace_claimed(struct rl_item *item, const char *stored)
{
    /* The stored value wins over the event's: every claim of the run,
     * here or elsewhere, must name the same trace. */
    snprintf(item->traceparent, sizeof(item->traceparent), "%s",
             stored ? stored : "");
    rl_trace_for_run(item->run_id, item->traceparent, &item->trace);
    rl_trace_run_span_id(item->run_id, item->lease_epoch, item->run_span_id);
    item->attempt_span_id[0] = '\0';
    item->run_start_ns = now_ns();
}

static void
live_add(struct ledger *lg, struct rl_item *item)
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

static void
live_remove(struct ledger *lg, struct rl_item *item)
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
static void
trace_run_end(struct ledger *lg, struct rl_item *item, const char *outcome)
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
            .end_ns = now_ns(),
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
static void
finish(struct ledger *lg, struct rl_item *item)
{
    trace_run_end(lg, item,
                  item->trace_outcome ? item->trace_outcome : "released");
    if (lg->backlog_until > rl_clock_ms())
        lg->sweep_soon = 1;
    live_remove(lg, item);
    rl_pipeline_finish(lg->pl, item);
}

/* Puts item on the retry list: its step is redone once a connection is
 * back. */
static void
requeue(struct ledger *lg, struct rl_item *item, int redo)
{
    item->redo = redo;
    item->next = lg->retry;
    lg->retry = item;
}

/* A DB error that is not a refusal: the connection is suspect. The item
 * waits on the retry list and its step is redone after reconnecting; every
 * step is safe to redo (guarded by owner and epoch, write-once columns). */
static void
defer(struct ledger *lg, struct rl_item *item, int redo, const char *what,
      const char *errstr)
{
    struct rl_log_ctx ctx;

    log_ctx(item, &ctx);
    rl_log_warn(&ctx, "could not %s: %s; will retry", what, errstr);
    rl_db_destroy(lg->db);
    lg->db = NULL;
    requeue(lg, item, redo);
}

/* Full-jitter exponential backoff, never shorter than Retry-After. */
static long
backoff_ms(struct ledger *lg, int attempt, long retry_after_ms)
{
    long cap = lg->cfg->backoff_base_ms;
    long delay;

    for (int i = 1; i < attempt && cap < lg->cfg->backoff_max_ms; i++)
        cap *= 2;
    if (cap > lg->cfg->backoff_max_ms)
        cap = lg->cfg->backoff_max_ms;
    delay = (long)((double)rand_r(&lg->seed) / RAND_MAX * (double)cap);
    if (retry_after_ms > delay)
        delay = retry_after_ms;
    return delay;
}

/* Terminal failure: the run is failed (or unknown), which is durable, and
 * a dead letter tells whoever watches the topic. */
static void
give_up(struct ledger *lg, struct rl_item *item, const char *status,
        const char *error_class, const char *detail)
{
    char errstr[512];
    struct rl_log_ctx ctx;
    int err;

    err =
        rl_db_fail(lg->db, item->run_id, lg->cfg->worker_id, item->lease_epoch,
                   status, error_class, detail, errstr, sizeof(errstr));
    if (err == RL_ERR_DB) {
        defer(lg, item, item->in_result ? REDO_RESULT : REDO_START,
              "record the failure", errstr);
        return;
    }
    log_ctx(item, &ctx);
    if (err == RL_ERR_STALE) {
        atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
        rl_log_warn(&ctx, "lease lost before recording %s", status);
        item->trace_outcome = "lease_lost";
        finish(lg, item);
        return;
    }
    if (strcmp(status, "unknown") == 0) {
        item->trace_outcome = "unknown";
        atomic_fetch_add(&lg->pl->counters.unknown, 1);
        rl_log_warn(&ctx, "run is unknown (%s): waiting for an operator",
                    detail);
        finish(lg, item);
        return;
    }
    atomic_fetch_add(&lg->pl->counters.failed, 1);
    rl_log_warn(&ctx, "run failed: %s: %s", error_class, detail);
    trace_run_end(lg, item, "failed");
    live_remove(lg, item);
    rl_pipeline_dead_letter(lg->pl, item, RL_DEADLETTER_RUN, error_class,
                            detail);
}

/* Pending again, due after delay_ms; the sweeper of any worker takes it. */
static void
retry_later(struct ledger *lg, struct rl_item *item, long delay_ms,
            const char *error_class, const char *detail)
{
    char errstr[512];
    int err;

    err = rl_db_release(lg->db, item->run_id, lg->cfg->worker_id,
                        item->lease_epoch, delay_ms, error_class, detail,
                        errstr, sizeof(errstr));
    if (err == RL_ERR_DB) {
        defer(lg, item, item->in_result ? REDO_RESULT : REDO_START,
              "release the lease", errstr);
        return;
    }
    if (err == RL_ERR_STALE)
        atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
    else
        atomic_fetch_add(&lg->pl->counters.retried, 1);
    item->trace_outcome = err == RL_ERR_STALE ? "lease_lost" : "retry";
    finish(lg, item);
}

/* Tokens a dispatch reserves against the run's budgets: the prompt
 * estimated at 4 bytes a token over the body that is sent (after
 * {{input}} substitution, measured by prepare_attempt), plus the completion's
 * cap (max_tokens or max_completion_tokens of the request, else
 * RUNLEDGER_BUDGET_DEFAULT_MAX_TOKENS). Only consulted when a budget
 * covers the run. */
static int64_t
budget_estimate(const struct ledger *lg, const struct rl_item *item)
{
    size_t bytes = item->request_bytes;
    int64_t completion = lg->cfg->budget_default_max_tokens;
    cJSON *root = cJSON_Parse(item->request_json ? item->request_json : "");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    const cJSON *max = cJSON_GetObjectItemCaseSensitive(req, "max_tokens");

    if (!cJSON_IsNumber(max))
        max = cJSON_GetObjectItemCaseSensitive(req, "max_completion_tokens");
    if (cJSON_IsNumber(max) && max->valuedouble >= 0 && max->valuedouble < 1e12)
        completion = (int64_t)max->valuedouble;
    cJSON_Delete(root);
    return (int64_t)((bytes + 3) / 4) + completion;
}

/* The pause of a model answered 429 without Retry-After nor reset
 * headers. */
#define RL_THROTTLE_DEFAULT_MS 1000

/* Puts the n items of a batch whose statement failed (not a refusal) on
 * the retry list, as defer() does for one. */
static void
defer_batch(struct ledger *lg, struct rl_item **items, size_t n, int redo,
            const char *what, const char *errstr)
{
    if (n == 1) {
        defer(lg, items[0], redo, what, errstr);
        return;
    }
    rl_log_warn(NULL, "could not %s of %zu runs: %s; will retry", what, n,
                errstr);
    rl_db_destroy(lg->db);
    lg->db = NULL;
    for (size_t i = n; i-- > 0;)
        requeue(lg, items[i], redo);
}

static int store_input(struct ledger *lg, struct rl_item *item);
static int within_request_limit(struct ledger *lg, struct rl_item *item);

/* The checks before a dispatch, and the collect step: returns 1 when item
 * is ready to be dispatched, 0 when it was handled here (finished, given
 * up, or waiting for a connection). */
static int
prepare_attempt(struct ledger *lg, struct rl_item *item)
{

    /* An earlier item of the same batch lost the connection: this one
     * waits for the next one instead of writing through none. */
    if (!lg->db) {
        requeue(lg, item, REDO_START);
        return 0;
    }
    if (item->deadline_passed) {
        /* Checked before the ambiguity policy: past its deadline a run is
         * failed whatever an earlier dispatch did. */
        give_up(lg, item, "failed", "deadline",
                "the run's deadline passed before it completed");
        return 0;
    }
    if (item->ambiguous_prior) {
        /* The last dispatch has no outcome: an earlier worker died after
         * sending. Never re-dispatch blindly. */
        enum rl_ambiguous_policy policy = lg->cfg->ambiguous_policy;

        if (policy == RL_AMBIGUOUS_PARK ||
            (policy == RL_AMBIGUOUS_RETRY_ONCE && item->ambiguous_count >= 2)) {
            give_up(lg, item, "unknown", "ambiguous",
                    "an earlier dispatch has no recorded outcome");
            return 0;
        }
    }
    if (item->attempts_before >= lg->cfg->max_attempts) {
        give_up(lg, item, "failed", "attempts_exhausted", "no attempts left");
        return 0;
    }
    if (!item->raw_input && store_input(lg, item) != 0)
        return 0;
    return within_request_limit(lg, item);
}

/* The collect step: the input is stored write-once; returns 0, or -1 when
 * the item was handled here (deferred or lease lost). */
static int
store_input(struct ledger *lg, struct rl_item *item)
{
    char errstr[512];
    char *stored = NULL;
    int err;

    err = rl_db_store_raw_input(lg->db, item->run_id, lg->cfg->worker_id,
                                item->lease_epoch,
                                item->ev ? item->ev->input_json : "null",
                                &stored, errstr, sizeof(errstr));
    if (err == RL_ERR_DB) {
        defer(lg, item, REDO_START, "store the collected input", errstr);
        return -1;
    }
    if (err) {
        atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
        finish(lg, item);
        return -1;
    }
    /* Use what the ledger holds, not the local copy: a concurrent worker
     * may have collected first. */
    item->raw_input = stored;
    rl_item_recount(item);
    return 0;
}

/* Measures the body the run would send, before any of it is built: a
 * prompt that repeats "{{input}}" thousands of times over a large input
 * would otherwise allocate gigabytes on this thread, and stall the lease
 * renewals of every other run while it copies them. Over
 * RUNLEDGER_MAX_REQUEST_BYTES the run fails at once (no dispatch is
 * recorded, nothing is sent) and is dead-lettered; under it, building the
 * body later costs at most that many bytes copied. Returns 1 when the run
 * may go on, 0 when it was failed here. */
static int
within_request_limit(struct ledger *lg, struct rl_item *item)
{
    char errstr[512], detail[256];
    size_t size = 0;

    if (rl_model_body_size(item->request_json, item->raw_input, &size, errstr,
                           sizeof(errstr)) != RL_OK) {
        /* send_call() fails it as invalid_request with the builder's
         * reason; the estimate meanwhile counts what the ledger holds. */
        item->request_bytes =
            strlen(item->request_json ? item->request_json : "") +
            strlen(item->raw_input ? item->raw_input : "");
        return 1;
    }
    item->request_bytes = size;
    /* The body is charged as measured now, and only one that is built. */
    item->body_reserve = size <= (size_t)lg->cfg->max_request_bytes ? size : 0;
    rl_item_recount(item);
    if (size <= (size_t)lg->cfg->max_request_bytes)
        return 1;
    if (size == SIZE_MAX)
        snprintf(detail, sizeof(detail),
                 "the model request after {{input}} substitution would be "
                 "larger than the address space; the limit is %d bytes",
                 lg->cfg->max_request_bytes);
    else
        snprintf(detail, sizeof(detail),
                 "the model request after {{input}} substitution would be "
                 "%zu bytes, over RUNLEDGER_MAX_REQUEST_BYTES (%d)",
                 size, lg->cfg->max_request_bytes);
    give_up(lg, item, "failed", "request_too_large", detail);
    return 0;
}

/* Sends the call of a run whose dispatch is recorded. */
static void
send_call(struct ledger *lg, struct rl_item *item)
{
    char errstr[512];
    struct rl_log_ctx ctx;

    log_ctx(item, &ctx);
    /* The gate fails closed: a run whose approval cannot be read is not
     * sent, or its answer could reach the relay without a human. */
    if (rl_approval_required(item->request_json) < 0) {
        char dberr[512];

        rl_db_record_outcome(lg->db, item->run_id, item->attempt_no,
                             "permanent", 0, NULL, 0, 0, 0, 0,
                             "approval gate unreadable", dberr, sizeof(dberr));
        give_up(lg, item, "failed", "invalid_approval",
                "the approval of the effective request cannot be read: not "
                "dispatched");
        return;
    }
    item->call.body = rl_model_build_body(item->request_json, item->raw_input,
                                          errstr, sizeof(errstr));
    if (!item->call.body) {
        char why[512], dberr[512];

        /* The reason is both stored and reported: keep it apart from the
         * buffer the ledger call may overwrite. */
        snprintf(why, sizeof(why), "%s", errstr);
        rl_db_record_outcome(lg->db, item->run_id, item->attempt_no,
                             "permanent", 0, NULL, 0, 0, 0, 0, why, dberr,
                             sizeof(dberr));
        give_up(lg, item, "failed", "invalid_request", why);
        return;
    }
    item->call.run_id = item->run_id;
    item->call.opaque = item;
    /* Each attempt is a span of its own, the run span's child; the model
     * call carries it as the parent of whatever the endpoint traces. */
    rl_trace_new_span_id(item->attempt_span_id);
    rl_trace_format(item->trace.trace_id, item->attempt_span_id,
                    item->trace.flags, item->attempt_traceparent);
    item->attempt_start_ns = now_ns();
    item->call.traceparent = item->attempt_traceparent;
    log_ctx(item, &ctx);
    if (rl_model_submit(lg->pl->model, &item->call) != 0) {
        free(item->call.body);
        item->call.body = NULL;
        /* The dispatch is recorded but nothing left: say so, or the next
         * claimer would count it as an ambiguous attempt. */
        rl_db_record_outcome(lg->db, item->run_id, item->attempt_no, "not_sent",
                             0, NULL, 0, 0, 0, 0, "model client stopping",
                             errstr, sizeof(errstr));
        retry_later(lg, item, 0, "shutdown", "model client stopping");
        return;
    }
    item->in_model = 1;
    lg->in_model++;
    atomic_fetch_add(&lg->pl->counters.dispatches, 1);
    rl_log_debug(&ctx, "dispatched");
}

/* Records the dispatches of up to RL_PIPELINE_BATCH_MAX ready runs in one
 * statement, then sends their calls. */
static void
dispatch_batch(struct ledger *lg, struct rl_item **items, size_t n)
{
    struct rl_dispatch_req *reqs = calloc(n, sizeof(*reqs));
    struct rl_dispatch_res *res = calloc(n, sizeof(*res));
    char errstr[512];
    int err;

    if (!reqs || !res) {
        defer_batch(lg, items, n, REDO_START, "record the dispatch",
                    "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        reqs[i] = (struct rl_dispatch_req){
            .run_id = items[i]->run_id,
            .lease_epoch = items[i]->lease_epoch,
            .idempotency_key = items[i]->run_id,
            .estimate = budget_estimate(lg, items[i]),
        };
    }
    rl_failpoint("after_collect");
    err = rl_db_dispatch_runs(lg->db, reqs, n, lg->cfg->worker_id,
                              lg->cfg->backoff_base_ms / 2 +
                                  backoff_ms(lg, 1, -1) / 2,
                              res, errstr, sizeof(errstr));
    if (err) {
        defer_batch(lg, items, n, REDO_START, "record the dispatch", errstr);
        goto done;
    }
    rl_failpoint("after_dispatch_record");
    for (size_t i = 0; i < n; i++) {
        struct rl_item *item = items[i];
        struct rl_log_ctx ctx;

        if (res[i].err) {
            atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
            finish(lg, item);
            continue;
        }
        if (res[i].status == RL_DISPATCH_DEADLINE) {
            /* Claimed in time, but the deadline passed before this
             * statement: nothing was sent, nothing may be. */
            give_up(lg, item, "failed", "deadline",
                    "the run's deadline passed before it was dispatched");
            continue;
        }
        if (res[i].status == RL_DISPATCH_RATE_LIMITED) {
            /* Pending again until the model's bucket has room (or the
             * provider's pause ends), in the statement that refused it;
             * no attempt was spent. */
            atomic_fetch_add(&lg->pl->counters.rate_limit_waits, 1);
            log_ctx(item, &ctx);
            rl_log_debug(&ctx, "rate limit: %s", res[i].detail);
            finish(lg, item);
            continue;
        }
        if (res[i].status != RL_DISPATCH_RECORDED) {
            /* Already pending (until the next window, or until the calls
             * in flight settled), in the statement that refused the
             * reservation; no attempt was spent. */
            if (res[i].status == RL_DISPATCH_DEFERRED)
                atomic_fetch_add(&lg->pl->counters.budget_deferrals, 1);
            else
                atomic_fetch_add(&lg->pl->counters.budget_waits, 1);
            log_ctx(item, &ctx);
            rl_log_info(&ctx, "budget: %s", res[i].detail);
            finish(lg, item);
            continue;
        }
        item->attempt_no = res[i].attempt_no;
        send_call(lg, item);
    }
done:
    free(reqs);
    free(res);
}

/* An approval-required run's answer becomes its immutable proposal and the
 * run waits for a human (schema/006_approval.sql): nothing is queued for
 * the relay until `runs approve` records an approval bound to the
 * proposal's digest. The attempt's outcome is recorded by the same
 * statement, as for a completion. */
static void
propose(struct ledger *lg, struct rl_item *item, const struct rl_log_ctx *ctx)
{
    struct rl_model_call *call = &item->call;
    char *output = rl_model_output_json(call);
    char *proposal = NULL;
    char digest[RL_HEX_SIZE];
    char errstr[512];
    enum rl_propose_status status = RL_PROPOSE_WAITING;
    struct rl_attempt_ok oc = rl_item_attempt_ok(item);
    int err;

    rl_failpoint("after_model_response");
    if (!output) {
        defer(lg, item, REDO_RESULT, "store the proposal", "out of memory");
        return;
    }
    if (rl_approval_required(item->request_json) < 0) {
        free(output);
        rl_db_record_outcome(lg->db, item->run_id, item->attempt_no,
                             "permanent", (int)call->http_status,
                             call->upstream_request_id, call->prompt_tokens,
                             call->completion_tokens, call->cached_tokens,
                             call->latency_ms, "approval gate unreadable",
                             errstr, sizeof(errstr));
        give_up(lg, item, "failed", "invalid_approval",
                "the approval of the effective request cannot be read: "
                "output not published");
        return;
    }
    err = rl_approval_proposal(item->request_json, output, &proposal, digest,
                               errstr, sizeof(errstr));
    free(output);
    if (err == RL_OK)
        err = rl_db_propose_attempt(lg->db, item->run_id, lg->cfg->worker_id,
                                    item->lease_epoch, &oc, proposal, digest,
                                    &status, errstr, sizeof(errstr));
    free(proposal);
    if (err == RL_ERR_DB || err == RL_ERR_NOMEM) {
        defer(lg, item, REDO_RESULT, "store the proposal", errstr);
        return;
    }
    if (err == RL_ERR_STALE) {
        atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
        rl_log_warn(ctx, "lease lost: proposal discarded");
    } else if (err != RL_OK) {
        give_up(lg, item, "failed", "invalid_output", errstr);
        return;
    } else if (status == RL_PROPOSE_SUPERSEDED) {
        atomic_fetch_add(&lg->pl->counters.failed, 1);
        rl_log_warn(ctx, "%s", errstr);
    } else if (status == RL_PROPOSE_WAITING) {
        rl_log_info(ctx, "awaiting approval");
    }
    rl_failpoint("after_complete_commit");
    finish(lg, item);
}

/* The model thread gave the call back: the attempt span ends. */
static void
result_arrived(struct ledger *lg, struct rl_item *item)
{
    if (item->in_model) {
        item->in_model = 0;
        lg->in_model--;
        /* Its slot is free now, while the answer waits for its
         * completion: with runs waiting in the ledger the slot is handed
         * out at once, not after the completion. */
        if (lg->backlog_until > rl_clock_ms())
            lg->sweep_soon = 1;
    }
    item->in_result = 1;
    rl_item_recount(item); /* the body went, the answer came */
    if (item->attempt_start_ns && lg->pl->otlp &&
        (item->trace.flags & RL_TRACE_FLAG_SAMPLED)) {
        const struct rl_model_call *call = &item->call;
        struct rl_otlp_span span = {
            .name = "runledger.attempt",
            .trace_id = item->trace.trace_id,
            .span_id = item->attempt_span_id,
            .parent_span_id = item->run_span_id,
            .kind = 3, /* CLIENT: the model call */
            .start_ns = item->attempt_start_ns,
            .end_ns = now_ns(),
            .error = call->outcome != RL_MODEL_OK,
            .run_id = item->run_id,
            .tenant = item->tenant,
            .job = item->job,
            .outcome = rl_model_outcome_name(call->outcome),
            .attempt = item->attempt_no,
            .lease_epoch = item->lease_epoch,
            .http_status = call->http_status,
        };

        rl_otlp_export(lg->pl->otlp, &span);
    }
    item->attempt_start_ns = 0;
}
/* Walks a list of claimed runs: prepare_attempt() handles a run that
 * cannot be dispatched on its own and returns 0, or returns 1; the
 * dispatches of the rest are recorded RL_PIPELINE_BATCH_MAX runs to a statement
 * (or wait on the retry list when the connection went while they were being
 * gathered). */
static void
flush_dispatches(struct ledger *lg, struct rl_item **ready, size_t n)
{
    if (n > 0 && !lg->db) {
        for (size_t i = 0; i < n; i++)
            requeue(lg, ready[i], REDO_START);
    } else if (n > 0) {
        dispatch_batch(lg, ready, n);
    }
}

/* Collect, record the dispatch, call the model: for a list of claimed
 * runs. */
static void
start_attempts(struct ledger *lg, struct rl_item *list)
{
    struct rl_item *ready[RL_PIPELINE_BATCH_MAX];
    size_t n = 0;

    while (list) {
        struct rl_item *item = list;

        list = item->next;
        item->next = NULL;
        if (!prepare_attempt(lg, item))
            continue;
        ready[n++] = item;
        if (n == RL_PIPELINE_BATCH_MAX) {
            flush_dispatches(lg, ready, n);
            n = 0;
        }
    }
    flush_dispatches(lg, ready, n);
}

/* Hands an answer to the completer thread; it comes back on pl->landed
 * (land()). The run stays live: its lease is renewed meanwhile. */
static void
to_completer(struct ledger *lg, struct rl_item *item)
{
    item->completing = 1;
    lg->completing++;
    rl_queue_push(&lg->pl->answers, item);
}

/* The "model" of the run's request into buf ("" when it has none). */
static void
model_of(const struct rl_item *item, char *buf, size_t size)
{
    cJSON *root = cJSON_Parse(item->request_json ? item->request_json : "");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(req, "model");

    snprintf(buf, size, "%s", cJSON_IsString(model) ? model->valuestring : "");
    cJSON_Delete(root);
}

/* How long the provider asked the whole model to wait, from a response
 * that was a 429 or said nothing is left: Retry-After, else the reset of
 * what ran out (of both when neither did), else -1 (nothing to pause for:
 * a response with room left). */
static long
provider_pause_ms(const struct rl_model_call *call)
{
    const struct rl_model_ratelimit *rl = &call->ratelimit;
    int out_r = rl->remaining_requests == 0;
    int out_t = rl->remaining_tokens == 0;
    long pause = -1;

    if (call->http_status != 429 && !out_r && !out_t)
        return -1;
    if (call->retry_after_ms >= 0)
        return call->retry_after_ms;
    if ((out_r || !out_t) && rl->reset_requests_ms > pause)
        pause = rl->reset_requests_ms;
    if ((out_t || !out_r) && rl->reset_tokens_ms > pause)
        pause = rl->reset_tokens_ms;
    if (pause < 0 && call->http_status == 429)
        pause = RL_THROTTLE_DEFAULT_MS;
    return pause;
}

/* The calls of model this worker has in flight: the live runs whose call
 * the model thread holds, plus item, whose refused call was one of them
 * until its result arrived. The ledger thread owns the live list. */
static int
model_calls_in_flight(const struct ledger *lg, const struct rl_item *item,
                      const char *model)
{
    char other[256];
    int n = 1;

    for (const struct rl_item *it = lg->live; it; it = it->live_next) {
        if (it == item || !it->in_model)
            continue;
        model_of(it, other, sizeof(other));
        if (strcmp(other, model) == 0)
            n++;
    }
    return n;
}

/* The provider throttled this run's model (429, or no requests or tokens
 * left): pause the model for every worker of the group in the ledger
 * (rl_model_throttled), not only this run. A failure is logged and
 * otherwise ignored: the run's own retry still honours Retry-After. */
static void
throttle_model(struct ledger *lg, struct rl_item *item)
{
    const struct rl_model_call *call = &item->call;
    long pause = provider_pause_ms(call);
    char model[256], reason[160], until[40], errstr[512];
    struct rl_log_ctx ctx;
    int cap = 0, adaptive, in_flight = 0;

    if (pause < 0 || !lg->db)
        return;
    model_of(item, model, sizeof(model));
    if (!*model)
        return;
    log_ctx(item, &ctx);
    if (call->http_status == 429)
        snprintf(reason, sizeof(reason), "429 from the provider (%s)",
                 call->upstream_request_id[0] ? call->upstream_request_id
                                              : "no request id");
    else
        snprintf(reason, sizeof(reason),
                 "the provider has no %s left in this window",
                 call->ratelimit.remaining_requests == 0 ? "requests"
                                                         : "tokens");
    if (call->http_status == 429)
        atomic_fetch_add(&lg->pl->counters.model_throttles, 1);
    /* The first cap halves the calls in flight. The ledger counts the
     * group's only once a cap exists, so this worker's own count is what
     * keeps it from starting at one call for the whole group. */
    adaptive = lg->cfg->model_adaptive_cap &&
               !rl_model_ratelimit_published(&call->ratelimit);
    if (adaptive)
        in_flight = model_calls_in_flight(lg, item, model);
    if (rl_db_model_throttled(lg->db, model, pause, adaptive, in_flight, reason,
                              until, sizeof(until), &cap, errstr,
                              sizeof(errstr)) != 0) {
        rl_log_warn(&ctx, "could not pause model %s: %s", model, errstr);
        return;
    }
    rl_log_info(&ctx, "model %s paused for every worker until %s: %s%s", model,
                until, reason,
                cap > 0 ? " (adaptive concurrency cap lowered)" : "");
}

/* Turns a model result into one durable state: every result but the
 * answer of a run without an approval gate (handle_results). */
static void
handle_result(struct ledger *lg, struct rl_item *item)
{
    struct rl_model_call *call = &item->call;
    const char *outcome = rl_model_outcome_name(call->outcome);
    char errstr[512];
    struct rl_log_ctx ctx;
    int err;

    result_arrived(lg, item);
    if (!lg->db) {
        requeue(lg, item, REDO_RESULT);
        return;
    }
    log_ctx(item, &ctx);

    throttle_model(lg, item);
    if (call->outcome == RL_MODEL_CANCELLED)
        outcome = item->lease_lost     ? "lease_lost"
                  : call->request_sent ? "ambiguous"
                                       : "not_sent";
    /* An answer's outcome is recorded by the statement that stores it
     * (rl_db_complete_runs): dying in between must leave the attempt
     * without an outcome, which the next claimer treats as ambiguous. */
    if (call->outcome != RL_MODEL_OK) {
        err = rl_db_record_outcome(
            lg->db, item->run_id, item->attempt_no, outcome, call->http_status,
            call->upstream_request_id, call->prompt_tokens,
            call->completion_tokens, call->cached_tokens, call->latency_ms,
            call->error, errstr, sizeof(errstr));
        if (err == RL_ERR_DB) {
            defer(lg, item, REDO_RESULT, "record the attempt outcome", errstr);
            return;
        }
    }

    switch (call->outcome) {
    case RL_MODEL_OK:
        /* Only the answers of runs that need an approval come here; the
         * others went to the completer (handle_results). */
        propose(lg, item, &ctx);
        return;
    case RL_MODEL_TRANSIENT:
    case RL_MODEL_NOT_SENT:
        if (item->attempt_no >= lg->cfg->max_attempts) {
            give_up(lg, item, "failed", "attempts_exhausted", call->error);
            return;
        }
        retry_later(lg, item,
                    backoff_ms(lg, item->attempt_no, call->retry_after_ms),
                    outcome, call->error);
        return;
    case RL_MODEL_AMBIGUOUS:
        if (lg->cfg->ambiguous_policy == RL_AMBIGUOUS_PARK ||
            (lg->cfg->ambiguous_policy == RL_AMBIGUOUS_RETRY_ONCE &&
             item->ambiguous_count >= 1)) {
            give_up(lg, item, "unknown", "ambiguous", call->error);
            return;
        }
        if (item->attempt_no >= lg->cfg->max_attempts) {
            give_up(lg, item, "unknown", "ambiguous", call->error);
            return;
        }
        retry_later(lg, item, backoff_ms(lg, item->attempt_no, -1), "ambiguous",
                    call->error);
        return;
    case RL_MODEL_PERMANENT:
        give_up(lg, item, "failed", "model_rejected", call->error);
        return;
    case RL_MODEL_INVALID_OUTPUT:
        give_up(lg, item, "failed", "invalid_output", call->error);
        return;
    case RL_MODEL_CANCELLED:
        if (item->lease_lost) {
            atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
            rl_log_warn(&ctx, "lease lost during the call: abandoned");
            finish(lg, item);
            return;
        }
        /* Shutdown: hand the run back at once; the next claimer sees the
         * outcome recorded above and follows the ambiguity policy. */
        retry_later(lg, item, 0, "shutdown", "abandoned at shutdown");
        return;
    }
}

/* Results of a list of calls: answers of runs without an approval gate
 * go to the completer, which needs no connection of the ledger's; every
 * other result is handled here. */
static void
handle_results(struct ledger *lg, struct rl_item *list)
{
    while (list) {
        struct rl_item *item = list;

        list = item->next;
        item->next = NULL;
        /* Only a request that says "no gate" skips the proposal; an
         * unreadable one is failed by propose (fail closed). */
        if (item->call.outcome == RL_MODEL_OK &&
            rl_approval_required(item->request_json) == 0) {
            result_arrived(lg, item);
            if (lg->db)
                throttle_model(lg, item);
            to_completer(lg, item);
        } else {
            handle_result(lg, item);
        }
    }
}

/* Runs the completer handed back: finished once their completion
 * committed, failed when the database refused the output, redone when the
 * completer could not reach the database before the grace period ended. */
static void
land(struct ledger *lg, struct rl_item *list)
{
    while (list) {
        struct rl_item *item = list;
        struct rl_log_ctx ctx;

        list = item->next;
        item->next = NULL;
        item->completing = 0;
        lg->completing--;
        log_ctx(item, &ctx);
        if (item->landed == RL_LANDED_DEFERRED ||
            (item->landed == RL_LANDED_INVALID && !lg->db)) {
            requeue(lg, item, REDO_RESULT);
        } else if (item->landed == RL_LANDED_INVALID) {
            char why[512], dberr[512];

            /* The answer is not what PostgreSQL stores (jsonb refused
             * it): the attempt's outcome says so and the run fails. */
            snprintf(why, sizeof(why), "%s",
                     item->landed_error ? item->landed_error : "refused");
            rl_db_record_outcome(
                lg->db, item->run_id, item->attempt_no, "invalid_output",
                (int)item->call.http_status, item->call.upstream_request_id, -1,
                -1, -1, item->call.latency_ms, why, dberr, sizeof(dberr));
            give_up(lg, item, "failed", "invalid_output", why);
        } else {
            if (item->landed_err) {
                atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
                rl_log_warn(&ctx, "lease lost: result discarded");
                item->trace_outcome = "lease_lost";
            } else if (item->landed_completed) {
                atomic_fetch_add(&lg->pl->counters.completed, 1);
                rl_log_debug(&ctx, "completed");
                item->trace_outcome = "completed";
            } else {
                item->trace_outcome = "completed_elsewhere";
            }
            finish(lg, item);
        }
    }
}

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

            requeue(lg, batch, REDO_CLAIM);
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
    err = rl_db_register_claim_some(lg->db, regs, n, lg->cfg->worker_id,
                                    lg->cfg->lease_seconds, *room, claims,
                                    errstr, sizeof(errstr));
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
        atomic_fetch_add(&lg->pl->counters.invalid, 1);
        rl_pipeline_dead_letter(lg->pl, items[0], RL_DEADLETTER_INTAKE,
                                "rejected_by_ledger", errstr);
        return rest;
    }
    if (err) {
        /* Nothing was claimed: put the batch back in front. */
        rl_log_warn(NULL, "could not claim %zu runs: %s; will retry", n,
                    errstr);
        rl_db_destroy(lg->db);
        lg->db = NULL;
        for (size_t i = n; i-- > 0;)
            requeue(lg, items[i], REDO_CLAIM);
        while (rest) {
            struct rl_item *next = rest->next;

            requeue(lg, rest, REDO_CLAIM);
            rest = next;
        }
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        struct rl_item *it = items[i];
        struct rl_claim *c = &claims[i];

        it->next = NULL;
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
            it->deadline_passed = c->deadline_passed;
            it->request_json = strdup(it->ev->request_json);
            it->raw_input = c->raw_input; /* stored one wins */
            c->raw_input = NULL;
            rl_item_recount(it);
            trace_claimed(it, c->traceparent);
            live_add(lg, it);
            *won_tail = it;
            won_tail = &it->next;
            break;
        case RL_CLAIM_QUEUED:
            /* Durable and due: any worker's sweeper claims it when a slot
             * (of its tenant) is free. */
            atomic_fetch_add(&lg->pl->counters.queued, 1);
            lg->backlog_until = rl_clock_ms() + BACKLOG_MS;
            lg->sweep_soon = 1;
            finish(lg, it);
            break;
        case RL_CLAIM_CONFLICT:
            atomic_fetch_add(&lg->pl->counters.conflicts, 1);
            rl_pipeline_dead_letter(lg->pl, it, RL_DEADLETTER_INTAKE,
                                    "fingerprint_conflict",
                                    "same run id, different request "
                                    "fingerprint; stored run untouched");
            break;
        default:
            /* Completed, leased by a live owner, parked, or not due: the
             * ledger already holds this run; the sweeper guarantees a
             * leased or pending one still finishes. */
            atomic_fetch_add(&lg->pl->counters.claims_lost, 1);
            atomic_fetch_add(&lg->pl->counters.duplicates, 1);
            finish(lg, it);
            break;
        }
        rl_claim_clear(c);
    }
    if (won) {
        rl_failpoint("after_claim");
        start_attempts(lg, won);
    }
    return rest;
}

static long intake_room(const struct ledger *lg, long room);

/* Registers a list of Kafka runs, 512 per round trip, and claims up to
 * room of them (the model slots free), less what the sweeper hands out
 * while runs wait in the ledger (intake_room). */
static void
claim_intake(struct ledger *lg, struct rl_item *batch, long room)
{
    room = intake_room(lg, room);
    while (batch)
        batch = claim_chunk(lg, batch, &room);
}

/* How many intake runs the next statement takes: RUNLEDGER_DB_BATCH while
 * it may claim them, a whole statement's worth (REGISTER_MAX) when it only
 * registers them (no slot free, or a backlog the sweeper hands the slots
 * to). A burst of one tenant is then registered at the speed of
 * PostgreSQL, and the events behind it in its partitions, another
 * tenant's, are read sooner. */
static size_t
intake_take(const struct ledger *lg, long room)
{
    size_t take = (size_t)lg->cfg->db_batch;

    if (intake_room(lg, room) <= 0 && take < REGISTER_MAX)
        take = REGISTER_MAX;
    return take;
}

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
static long
model_room(const struct ledger *lg)
{
    long room = free_slots(lg) - (long)lg->ready_count;

    return room > 0 ? room : 0;
}

/* Runs the sweeper claims ahead of the free slots while a backlog waits:
 * an eighth of RUNLEDGER_MAX_IN_FLIGHT (at least one, at most 256), about
 * what the slots free between two sweeps with short calls. They are
 * handed out in the fair order of the sweep that claimed them; a run of
 * another tenant that arrives meanwhile waits behind at most these. */
static long
reserve_target(const struct ledger *lg)
{
    long r = (long)lg->cfg->max_in_flight / 8;

    if (lg->backlog_until <= rl_clock_ms())
        return 0;
    if (r < 1)
        r = 1;
    return r < 256 ? r : 256;
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
    room -= SWEEP_MAX + reserve_target(lg);
    return room > 0 ? room : 0;
}

/* Starts the runs claimed ahead, oldest first, as many as there are free
 * model slots. */
static void
start_ready(struct ledger *lg)
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
        start_attempts(lg, list);
}

/* Gives up the runs claimed ahead (once the grace period is over): their
 * leases expire and a sweeper, of this worker or another, claims them. */
static void
drop_ready(struct ledger *lg)
{
    while (lg->ready) {
        struct rl_item *it = lg->ready;

        lg->ready = it->next;
        it->next = NULL;
        finish(lg, it);
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

static void
sweep(struct ledger *lg)
{
    /* The free slots and the reserve, less what was claimed ahead. */
    long room = free_slots(lg) + reserve_target(lg) - (long)lg->ready_count;
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
    err = rl_db_claim_due(lg->db, lg->cfg->worker_id, lg->cfg->lease_seconds,
                          (size_t)room, claims, &n, errstr, sizeof(errstr));
    if (err == 0 && n == (size_t)room) {
        /* Every slot asked for was filled: more may wait. */
        lg->backlog_until = leased_at + BACKLOG_MS;
        lg->sweep_soon = 1;
    }
    if (err) {
        rl_log_warn(NULL, "sweeper could not claim: %s", errstr);
        rl_db_destroy(lg->db);
        lg->db = NULL;
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
        it->deadline_passed = c->deadline_passed;
        trace_claimed(it, c->traceparent);
        rl_claim_clear(c);
        rl_item_charge(it, &lg->pl->counters.held_bytes,
                       (size_t)lg->cfg->max_request_bytes);
        live_add(lg, it);
        *lg->ready_tail = it;
        lg->ready_tail = &it->next;
        lg->ready_count++;
    }
    start_ready(lg);
}

/* ---- the renewer --------------------------------------------------------
 * Renews, in one statement, every held lease that is a third of its term
 * old, on a thread and a connection of its own (runledger-renew): a ledger
 * statement stalled on PostgreSQL (a failover without a reset, a row lock
 * held elsewhere, a backend stopped) must not let the leases of the runs
 * in flight run out. The renewer runs every sixth of the term (at least
 * every second), so a lease is renewed before half of it has passed; in
 * between it only checks, read-only, that the leases are still held, so
 * a run an operator cancelled (`runs cancel` fences its lease) has its
 * call cancelled within about a second. A run that finishes within
 * a third of the term is never renewed: a renewal rewrites the run's row
 * and every index entry of it (lock_expires_at is indexed). Its session's
 * statement and lock timeouts are at most a third and a sixth of the
 * lease, so one stuck renewal gives way to the next. A run whose lease is
 * gone is marked renew_lost; the ledger thread cancels its call and never
 * completes it. @locality renewer thread */

struct renewal {
    char run_id[RL_HEX_SIZE];
    int64_t epoch;
    int renew; /* due: extended; else only checked */
};

static int
renewal_cmp(const void *a, const void *b)
{
    return strcmp(((const struct renewal *)a)->run_id,
                  ((const struct renewal *)b)->run_id);
}

/* One statement over the renewals of batch[0..n) whose renew flag is
 * renew: extends those leases (renew) or only reads whether they are
 * still held. held[k] is set for batch[k]. Returns the number held or a
 * negative error. */
static int
renew_some(struct ledger *lg, struct rl_db *db, const struct renewal *batch,
           size_t n, int renew, const char **ids, int64_t *epochs, int *held,
           size_t *idx, char *errstr, size_t errstr_size)
{
    size_t m = 0;
    int *got = held + n; /* scratch: the second half of held */
    int err;

    for (size_t i = 0; i < n; i++) {
        if (batch[i].renew != renew)
            continue;
        ids[m] = batch[i].run_id;
        epochs[m] = batch[i].epoch;
        idx[m++] = i;
    }
    if (m == 0)
        return 0;
    err = renew ? rl_db_renew_leases(db, lg->cfg->worker_id,
                                     lg->cfg->lease_seconds, ids, epochs, m,
                                     got, errstr, errstr_size)
                : rl_db_check_leases(db, lg->cfg->worker_id, ids, epochs, m,
                                     got, errstr, errstr_size);
    if (err < 0)
        return err;
    for (size_t k = 0; k < m; k++)
        held[idx[k]] = got[k];
    return err;
}

/* One round: what is held, copied under the lock; the statements without
 * it; the answers applied to the runs still live. Leases a third of their
 * term old are renewed; the others are only checked, read-only, so a
 * lease an operator's cancel fenced is seen within a round (a second),
 * not when its renewal falls due. Returns the connection to use next time
 * (NULL after an error). */
static struct rl_db *
renew_round(struct ledger *lg, struct rl_db *db)
{
    int64_t now = rl_clock_ms();
    int64_t due = now - lg->cfg->lease_seconds * 1000LL / 3;
    struct renewal *batch = NULL;
    const char **ids = NULL;
    int64_t *epochs = NULL;
    int *held = NULL;
    size_t *idx = NULL;
    size_t n = 0, cap = lg->live_count;
    char errstr[512];
    int err;

    if (cap == 0)
        return db;
    batch = calloc(cap, sizeof(*batch));
    ids = calloc(cap, sizeof(*ids));
    epochs = calloc(cap, sizeof(*epochs));
    held = calloc(2 * cap, sizeof(*held));
    idx = calloc(cap, sizeof(*idx));
    if (!batch || !ids || !epochs || !held || !idx) {
        rl_log_warn(NULL, "could not renew %zu leases: out of memory", cap);
        goto done;
    }
    for (struct rl_item *it = lg->live; it && n < cap; it = it->live_next) {
        if (it->renew_lost)
            continue;
        memcpy(batch[n].run_id, it->run_id, sizeof(batch[n].run_id));
        batch[n].renew = it->renewed_at <= due;
        batch[n++].epoch = it->lease_epoch;
    }
    if (n == 0)
        goto done;
    pthread_mutex_unlock(&lg->live_lock);

    qsort(batch, n, sizeof(*batch), renewal_cmp);
    if (!db) {
        db = rl_db_connect_role(lg->cfg, RL_DB_ROLE_RENEW, errstr,
                                sizeof(errstr));
        if (!db)
            rl_log_warn(NULL, "renewer: %s", errstr);
    }
    /* Renewals first: they are what keeps the leases. Each returns a
     * count of the leases still held, or a negative error. */
    err = db ? renew_some(lg, db, batch, n, 1, ids, epochs, held, idx, errstr,
                          sizeof(errstr))
             : RL_ERR_DB;
    if (err >= 0)
        err = renew_some(lg, db, batch, n, 0, ids, epochs, held, idx, errstr,
                         sizeof(errstr));
    if (err < 0 && db) {
        rl_log_warn(NULL, "could not renew %zu leases: %s", n, errstr);
        rl_db_destroy(db);
        db = NULL;
    }

    pthread_mutex_lock(&lg->live_lock);
    if (err < 0)
        goto done;
    for (struct rl_item *it = lg->live; it; it = it->live_next) {
        struct renewal key;
        struct renewal *hit;

        memcpy(key.run_id, it->run_id, sizeof(key.run_id));
        hit = bsearch(&key, batch, n, sizeof(*batch), renewal_cmp);
        if (!hit || hit->epoch != it->lease_epoch)
            continue;
        if (held[hit - batch]) {
            if (hit->renew)
                it->renewed_at = now;
        } else if (!it->renew_lost) {
            it->renew_lost = 1;
            atomic_fetch_add(&lg->leases_gone, 1);
        }
    }
done:
    free(batch);
    free(ids);
    free(epochs);
    free(held);
    free(idx);
    return db;
}

static void *
renewer_main(void *arg)
{
    struct ledger *lg = arg;
    long period = lg->cfg->lease_seconds * 1000L / 6 < 1000
                      ? lg->cfg->lease_seconds * 1000L / 6
                      : 1000;
    struct rl_db *db = NULL;
    struct timespec ts;

    rl_thread_name("rl-renewer");
    pthread_mutex_lock(&lg->live_lock);
    while (!lg->renew_stop) {
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += period / 1000;
        ts.tv_nsec += (period % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&lg->renew_wake, &lg->live_lock, &ts);
        if (lg->renew_stop)
            break;
        db = renew_round(lg, db);
    }
    pthread_mutex_unlock(&lg->live_lock);
    rl_db_destroy(db);
    return NULL;
}

/* The leases the renewer found gone: their calls are cancelled, and they
 * are never completed by this worker. A completing run is not held once
 * its completion committed; a lease really lost shows in the completion's
 * answer. @locality ledger thread */
static void
leases_gone(struct ledger *lg)
{
    if (atomic_load(&lg->leases_gone) == 0)
        return;
    atomic_store(&lg->leases_gone, 0);
    pthread_mutex_lock(&lg->live_lock);
    for (struct rl_item *it = lg->live; it; it = it->live_next) {
        struct rl_log_ctx ctx;

        if (!it->renew_lost || it->lease_lost || it->completing)
            continue;
        it->lease_lost = 1;
        log_ctx(it, &ctx);
        rl_log_warn(&ctx, "lease lost: cancelling the model call");
        if (it->in_model)
            rl_model_cancel(lg->pl->model, &it->call);
    }
    pthread_mutex_unlock(&lg->live_lock);
}

static int
ensure_db(struct ledger *lg)
{
    char errstr[512];

    if (lg->db)
        return 1;
    if (rl_clock_ms() < lg->next_connect)
        return 0;
    lg->db =
        rl_db_connect_role(lg->cfg, RL_DB_ROLE_LEDGER, errstr, sizeof(errstr));
    if (!lg->db) {
        rl_log_warn(NULL, "ledger: %s", errstr);
        lg->next_connect = rl_clock_ms() + lg->connect_backoff;
        lg->connect_backoff =
            lg->connect_backoff < 5000 ? lg->connect_backoff * 2 : 5000;
        return 0;
    }
    lg->connect_backoff = 100;
    return 1;
}

static void
redo_deferred(struct ledger *lg)
{
    struct rl_item *list = lg->retry;
    struct rl_item *claim_again = NULL, *start_again = NULL,
                   *results_again = NULL;

    lg->retry = NULL;
    while (list) {
        struct rl_item *it = list;
        struct rl_item **to = it->redo == REDO_CLAIM   ? &claim_again
                              : it->redo == REDO_START ? &start_again
                                                       : &results_again;

        list = it->next;
        it->next = *to;
        *to = it;
    }
    /* Each step requeues what it cannot write when the connection goes
     * again, so nothing is lost between them. */
    handle_results(lg, results_again);
    start_attempts(lg, start_again);
    if (claim_again)
        claim_intake(lg, claim_again, model_room(lg));
}

/* Sleeps up to ms unless there is work: results, runs back from the
 * completer, or (when claiming) intake. */
static void
wait_for_work(struct ledger *lg, long ms, int claiming)
{
    struct rl_pipeline *pl = lg->pl;
    struct timespec ts;

    /* The queues are read under their own locks, inside wake_lock: a push
     * after these reads is followed by rl_pipeline_wake(), which waits for
     * wake_lock and so cannot signal before the wait below begins. */
    pthread_mutex_lock(&pl->wake_lock);
    if ((!claiming || rl_queue_empty(&pl->intake)) &&
        rl_queue_empty(&pl->results) && rl_queue_empty(&pl->landed)) {
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&pl->wake, &pl->wake_lock, &ts);
    }
    pthread_mutex_unlock(&pl->wake_lock);
}

void *
rl_ledger_main(void *arg)
{
    struct rl_pipeline *pl = arg;
    struct ledger lg;

    rl_thread_name("rl-ledger");
    memset(&lg, 0, sizeof(lg));
    lg.pl = pl;
    lg.cfg = pl->cfg;
    lg.connect_backoff = 100;
    lg.seed = (unsigned int)rl_clock_ms();
    lg.ready_tail = &lg.ready;
    pthread_mutex_init(&lg.live_lock, NULL);
    pthread_cond_init(&lg.renew_wake, NULL);
    atomic_init(&lg.leases_gone, 0);
    if (pthread_create(&lg.renewer, NULL, renewer_main, &lg) == 0)
        lg.renewer_started = 1;
    else
        rl_log_error(NULL, "ledger: could not start the lease renewer thread; "
                           "leases will expire under runs in flight");

    for (;;) {
        int64_t now;
        struct rl_item *batch;
        int stopping = atomic_load(&pl->stopping);
        int claimed = 0;
        long room;

        /* Once the grace period is over nothing is redone: the leases of
         * what waits expire, and another worker's sweeper takes over. */
        rl_http_ledger_turned(pl->http);
        leases_gone(&lg);
        if (ensure_db(&lg) && lg.retry && !atomic_load(&pl->abandon))
            redo_deferred(&lg);

        /* Results first: they free capacity and finish runs. */
        while ((batch = rl_queue_take(&pl->landed, 0)))
            land(&lg, batch);
        while (lg.db && (batch = rl_queue_take(&pl->results, 0))) {
            handle_results(&lg, batch);
        }
        /* Claims go on while answers wait for their completion: a run
         * the intake does not claim is registered pending and claimed
         * later by a sweep, a second write of its row, where one claimed
         * at registration is written once (a burst of fast answers in
         * `make bench` zero: WAL 8.0 -> 7.4 kB a run, and a run's median
         * overhead 2 s -> 50 ms, as runs no longer wait pending behind
         * the burst). What the process holds stays bounded by the Kafka
         * thread's pause (RL_PIPELINE_HOLD_MAX). */
        if (lg.db)
            start_ready(&lg);
        room = model_room(&lg);
        if (stopping) {
            /* Not claimed yet: not ours to start. Their offsets stay
             * uncommitted and the events are consumed again. */
            while ((batch = rl_queue_take(&pl->intake, 0))) {
                while (batch) {
                    struct rl_item *next = batch->next;

                    atomic_fetch_sub(&pl->in_flight, 1);
                    rl_item_destroy(batch);
                    batch = next;
                }
            }
        } else if (lg.db && (batch = rl_queue_take(&pl->intake,
                                                   intake_take(&lg, room)))) {
            /* Registered whether or not a slot is free: admission never
             * waits for the model, and the offsets move on. */
            claim_intake(&lg, batch, room);
            claimed = 1;
        }

        /* The sweeper runs on time even while a backlog keeps the intake
         * busy (leases are renewed by the renewer thread), and at once
         * when a slot frees while runs wait for one. */
        now = rl_clock_ms();
        if (lg.db && !stopping &&
            (now >= lg.next_sweep ||
             (lg.sweep_soon &&
              (room > 0 || (long)lg.ready_count < reserve_target(&lg)) &&
              now >= lg.last_sweep + SWEEP_SOON_MS))) {
            sweep(&lg);
            lg.next_sweep = now + lg.cfg->sweep_interval_ms;
        }
        if (atomic_load(&pl->abandon) && !lg.abandoned) {
            lg.abandoned = 1;
            drop_ready(&lg);
            for (struct rl_item *it = lg.live; it; it = it->live_next) {
                if (it->in_model)
                    rl_model_cancel(pl->model, &it->call);
            }
        }
        /* Done when nothing is left, or, once the grace period is over,
         * when no model call is outstanding: runs whose writes still wait
         * for PostgreSQL keep their lease until it expires, and then the
         * sweeper of another worker takes them over. */
        if (stopping && rl_queue_empty(&pl->results) &&
            rl_queue_empty(&pl->intake) && lg.in_model == 0 &&
            (lg.live_count == 0 ||
             (atomic_load(&pl->abandon) && lg.live_count == count(lg.retry))))
            break;
        if (!claimed)
            wait_for_work(&lg, lg.sweep_soon && room > 0 ? SWEEP_SOON_MS : 50,
                          lg.db != NULL);
    }
    /* Deferred writes that never found a connection: their leases expire
     * and the sweeper of another worker takes the runs over. */
    while (lg.retry) {
        struct rl_item *it = lg.retry;

        lg.retry = it->next;
        live_remove(&lg, it);
        atomic_fetch_sub(&pl->in_flight, 1);
        rl_item_destroy(it);
    }
    if (lg.renewer_started) {
        pthread_mutex_lock(&lg.live_lock);
        lg.renew_stop = 1;
        pthread_cond_signal(&lg.renew_wake);
        pthread_mutex_unlock(&lg.live_lock);
        pthread_join(lg.renewer, NULL);
    }
    pthread_cond_destroy(&lg.renew_wake);
    pthread_mutex_destroy(&lg.live_lock);
    rl_db_destroy(lg.db);
    return NULL;
}
