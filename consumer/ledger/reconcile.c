/* Reconciliation: an ambiguous attempt (sent, then a timeout, a reset or a
 * cut body; or dispatched by an owner that died before recording what came
 * back) is looked up in the endpoint's own record of the calls it answered
 * (RUNLEDGER_MODEL_STORED_COMPLETIONS: every call is stored with metadata
 * naming its run, its attempt and this ledger) before the ambiguity policy
 * applies. The record is eventually consistent, so a lookup that finds nothing
 * is repeated with backoff until RUNLEDGER_RECONCILE_SETTLE_MS has passed; only
 * then does "not found" count. Found, the stored answer becomes that attempt's
 * result and goes through the same guarded completion as a live answer: no new
 * generation.
 *
 * A lookup lists every record naming the run and adopts the earliest of
 * those that name this ledger's installation id, the run's request
 * fingerprint and an attempt looked up (the ambiguous one and every
 * earlier ambiguous attempt of the run, whose generation may have shown
 * up since), and were answered by the run's model: run IDs are
 * deterministic, so another ledger using the same provider project
 * stores records under the same run ID and attempt, and those are counted
 * as foreign, never adopted. Every matching record is a generation the
 * endpoint billed (an attempt sent twice by a transport or a gateway
 * stores two): the attempt is charged with all of them and
 * runledger_reconciled_generations_total counts each.
 *
 * Lookups are model calls (GETs on the model thread, each bounded by
 * RUNLEDGER_RECONCILE_LOOKUP_TIMEOUT_MS), so waiting for the record never
 * holds up other runs; between two lookups a run waits on the ledger's
 * reconcile_wait list, leased and renewed like any live run.
 * @locality ledger thread */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "ledger_int.h"
#include "rl/clock.h"
#include "rl/db_dispatch.h"
#include "rl/err.h"
#include "rl/log.h"

/* The first wait between two lookups, and the longest. */
#define LOOKUP_BACKOFF_MIN_MS 250L
#define LOOKUP_BACKOFF_MAX_MS 5000L

/* The API the run's model speaks, from its stored request; with model
 * set, the model's name too (malloc'd, NULL when none or out of
 * memory). */
static enum rl_model_api
api_of_run(const struct ledger *lg, const struct rl_item *item, char **model)
{
    cJSON *root = cJSON_Parse(item->request_json ? item->request_json : "");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(root, "request"), "model");
    enum rl_model_api api = rl_model_api_for(
        lg->cfg->model_api_by_model, (enum rl_model_api)lg->cfg->model_api,
        cJSON_IsString(m) ? m->valuestring : NULL);

    if (model)
        *model = cJSON_IsString(m) ? strdup(m->valuestring) : NULL;
    cJSON_Delete(root);
    return api;
}

/* The attempts whose records a lookup of attempt_no of item may adopt:
 * attempt_no, and with earlier ambiguous attempts (has_earlier) every one
 * of them, read from the ledger. Returns 0 or RL_ERR_DB (the connection
 * failed: ask again); any other failure looks up attempt_no alone. */
static int
attempts_to_look_up(struct ledger *lg, struct rl_item *item, int attempt_no,
                    int has_earlier, char *errstr, size_t errstr_size)
{
    int *nos = NULL, n = 0, err, have = 0;

    free(item->reconcile_attempts);
    item->reconcile_attempts = NULL;
    item->reconcile_nattempts = 0;
    if (has_earlier) {
        err = rl_db_ambiguous_attempt_nos(lg->db, item->run_id, &nos, &n,
                                          errstr, errstr_size);
        if (err == RL_ERR_DB)
            return err;
        if (err) {
            struct rl_log_ctx ctx;

            ledger_log_ctx(item, &ctx);
            rl_log_warn(&ctx, "%s: looking up attempt %d alone", errstr,
                        attempt_no);
        }
    }
    for (int i = 0; i < n; i++)
        have |= nos[i] == attempt_no;
    if (!have) {
        int *grown = realloc(nos, (size_t)(n + 1) * sizeof(*nos));

        if (!grown) {
            free(nos); /* attempt_no alone (rl_model_call.attempt_no) */
            return 0;
        }
        nos = grown;
        nos[n++] = attempt_no;
    }
    item->reconcile_attempts = nos;
    item->reconcile_nattempts = n;
    return 0;
}

/* Hands item's lookup to the model thread; at shutdown (the model takes
 * no more calls) the run goes back with its attempt still unsettled. */
static void
submit_lookup(struct ledger *lg, struct rl_item *item)
{
    struct rl_model_call *lk = &item->lookup;
    enum rl_model_api api = lk->api;

    rl_model_call_clear(lk);
    lk->run_id = item->run_id;
    lk->opaque = item;
    lk->lookup = 1;
    lk->api = api;
    lk->attempt_no = item->reconcile_attempt;
    lk->lookup_attempts = item->reconcile_attempts;
    lk->lookup_nattempts = item->reconcile_nattempts;
    lk->lookup_installation = lg->installation_id;
    lk->lookup_fingerprint = item->fingerprint;
    lk->lookup_model = item->reconcile_model;
    /* A response is looked up by its id, which the ambiguous call's reply
     * named before it was cut. */
    lk->lookup_id =
        api == RL_MODEL_API_RESPONSES ? item->call.upstream_request_id : NULL;
    lk->timeout_ms = lg->cfg->reconcile_lookup_timeout_ms;
    if (rl_model_submit(lg->pl->model, lk) != 0) {
        ledger_retry_later(lg, item, 0, "shutdown",
                           "released at shutdown while reconciling");
        return;
    }
    item->reconcile_lookups++;
    atomic_fetch_add(&lg->pl->counters.reconcile_lookups, 1);
    item->in_lookup = 1;
    item->in_model = 1;
    lg->in_model++;
}

/* Starts looking up attempt_no of item with api. */
static void
start(struct ledger *lg, struct rl_item *item, int kind, int attempt_no,
      enum rl_model_api api)
{
    struct rl_log_ctx ctx;

    item->reconcile = kind;
    item->reconcile_attempt = attempt_no;
    item->reconcile_lookups = 0;
    item->reconcile_until = rl_clock_ms() + lg->cfg->reconcile_settle_ms;
    item->lookup.api = api;
    ledger_log_ctx(item, &ctx);
    rl_log_info(&ctx,
                "attempt %d is ambiguous: looking it up in the endpoint's "
                "record for up to %d ms",
                attempt_no, lg->cfg->reconcile_settle_ms);
    submit_lookup(lg, item);
}

int
ledger_reconcile_live(struct ledger *lg, struct rl_item *item)
{
    char errstr[512];

    if (!lg->cfg->model_stored_completions || item->reconcile_done ||
        item->lease_lost)
        return 0;
    /* Without an id nothing names a response in the record. */
    if (item->call.api == RL_MODEL_API_RESPONSES &&
        strncmp(item->call.upstream_request_id, "resp_", 5) != 0)
        return 0;
    if (item->call.api == RL_MODEL_API_CHAT) {
        /* An earlier attempt that ended ambiguous may have generated, its
         * record too late for its own lookup: adopting it now saves
         * generating again. ambiguous_count counts them at the claim. */
        int err = attempts_to_look_up(lg, item, item->attempt_no,
                                      item->ambiguous_count > 0, errstr,
                                      sizeof(errstr));

        if (err) {
            ledger_defer(lg, item, REDO_RESULT,
                         "read the ambiguous attempts to reconcile", errstr);
            return 1;
        }
        free(item->reconcile_model);
        api_of_run(lg, item, &item->reconcile_model);
    }
    start(lg, item, RL_RECONCILE_LIVE, item->attempt_no, item->call.api);
    return 1;
}

int
ledger_reconcile_prior(struct ledger *lg, struct rl_item *item)
{
    char errstr[512];
    int attempt_no = 0, err;

    if (!lg->cfg->model_stored_completions || item->reconcile_done ||
        !item->ambiguous_prior)
        return 0;
    item->reconcile_done = 1; /* once per claim, found or not */
    free(item->reconcile_model);
    item->reconcile_model = NULL;
    if (api_of_run(lg, item, &item->reconcile_model) != RL_MODEL_API_CHAT)
        return 0;
    err = rl_db_unsettled_attempt(lg->db, item->run_id, &attempt_no, errstr,
                                  sizeof(errstr));
    if (err) {
        item->reconcile_done = 0;
        ledger_defer(lg, item, REDO_START, "read the attempt to reconcile",
                     errstr);
        return 1;
    }
    if (attempt_no <= 0)
        return 0;
    /* The unsettled attempt and every earlier one that ended ambiguous. */
    err = attempts_to_look_up(lg, item, attempt_no, 1, errstr, sizeof(errstr));
    if (err) {
        item->reconcile_done = 0;
        ledger_defer(lg, item, REDO_START,
                     "read the ambiguous attempts to reconcile", errstr);
        return 1;
    }
    start(lg, item, RL_RECONCILE_PRIOR, attempt_no, RL_MODEL_API_CHAT);
    return 1;
}

/* Records of the run that another ledger (or another request or model)
 * made, seen by the last lookup: counted and said once, never adopted. */
static void
foreign(struct ledger *lg, struct rl_item *item)
{
    struct rl_log_ctx ctx;
    int n = item->lookup.foreign_records;

    if (n <= 0)
        return;
    atomic_fetch_add(&lg->pl->counters.reconcile_foreign, n);
    ledger_log_ctx(item, &ctx);
    rl_log_warn(&ctx,
                "%d record%s in the endpoint's record name%s this run but "
                "another installation, request fingerprint or model "
                "(another ledger using the same provider project?): not "
                "adopted",
                n, n == 1 ? "" : "s", n == 1 ? "s" : "");
}

/* The lookup found the attempt's answer: it becomes the call's result. */
static void
adopt(struct ledger *lg, struct rl_item *item)
{
    struct rl_model_call *call = &item->call, *lk = &item->lookup;
    struct rl_log_ctx ctx;

    rl_model_call_clear(call);
    call->outcome = RL_MODEL_OK;
    call->http_status = lk->http_status;
    snprintf(call->upstream_request_id, sizeof(call->upstream_request_id), "%s",
             lk->upstream_request_id);
    call->text = lk->text;
    call->tool_calls = lk->tool_calls;
    call->model_name = lk->model_name;
    lk->text = lk->tool_calls = lk->model_name = NULL;
    call->prompt_tokens = lk->prompt_tokens;
    call->completion_tokens = lk->completion_tokens;
    call->cached_tokens = lk->cached_tokens;
    call->latency_ms = lk->latency_ms;
    call->request_sent = 1;
    /* The answer is recorded under the attempt looked up, whose outcome
     * is still open, even when the record is an earlier attempt's. */
    item->attempt_no = item->reconcile_attempt;
    item->reconciled = 1;
    item->reconcile_marked = 0;
    item->reconcile = RL_RECONCILE_NONE;
    if (lk->found_records < 1)
        lk->found_records = 1;
    if (lk->found_attempt <= 0)
        lk->found_attempt = item->reconcile_attempt;
    rl_item_recount(item);
    atomic_fetch_add(&lg->pl->counters.reconciled, 1);
    atomic_fetch_add(&lg->pl->counters.reconciled_generations,
                     lk->found_records);
    foreign(lg, item);
    {
        /* The tokens of every generation found, as the attempt is
         * charged (rl_item_attempt_ok). */
        struct rl_model_call billed = {
            .prompt_tokens =
                call->prompt_tokens + lk->found_extra_prompt_tokens,
            .completion_tokens =
                call->completion_tokens + lk->found_extra_completion_tokens,
            .cached_tokens =
                call->cached_tokens + lk->found_extra_cached_tokens,
        };

        rl_http_reconciled(lg->pl->http, &billed);
    }
    ledger_log_ctx(item, &ctx);
    if (lk->found_records > 1)
        rl_log_warn(&ctx,
                    "attempt %d: the endpoint's record holds %d generations "
                    "of the run's ambiguous attempts; the earliest (%s, "
                    "attempt %d) adopted, every one charged",
                    item->attempt_no, lk->found_records,
                    call->upstream_request_id, lk->found_attempt);
    rl_log_info(&ctx,
                "attempt %d answered in the endpoint's record (%s, attempt "
                "%d) after %d lookups: adopted, no new generation",
                item->attempt_no, call->upstream_request_id, lk->found_attempt,
                item->reconcile_lookups);
}

/* Nothing found within the settle window: the ambiguity policy applies
 * as if no lookup had been made (the caller applies it). */
static void
not_found(struct ledger *lg, struct rl_item *item)
{
    struct rl_log_ctx ctx;

    item->reconcile = RL_RECONCILE_NONE;
    item->reconcile_done = 1;
    atomic_fetch_add(&lg->pl->counters.reconcile_missed, 1);
    foreign(lg, item);
    ledger_log_ctx(item, &ctx);
    rl_log_info(&ctx,
                "attempt %d not in the endpoint's record after %d lookups "
                "(%s): the ambiguity policy applies",
                item->reconcile_attempt, item->reconcile_lookups,
                item->lookup.error[0] ? item->lookup.error : "not found");
}

enum ledger_lookup
ledger_reconcile_result(struct ledger *lg, struct rl_item *item)
{
    struct rl_model_call *lk = &item->lookup;
    int64_t now = rl_clock_ms();
    long delay;

    item->in_lookup = 0;
    if (item->in_model) {
        item->in_model = 0;
        lg->in_model--;
    }
    if (item->lease_lost) {
        atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
        item->trace_outcome = "lease_lost";
        ledger_finish(lg, item);
        return LEDGER_LOOKUP_HANDLED;
    }
    if (lk->outcome == RL_MODEL_OK) {
        adopt(lg, item);
        return LEDGER_LOOKUP_FOUND;
    }
    if (lk->outcome == RL_MODEL_CANCELLED) {
        /* Shutdown: the attempt keeps no outcome, so the next claimer
         * looks it up again. */
        ledger_retry_later(lg, item, 0, "shutdown",
                           "released at shutdown while reconciling");
        return LEDGER_LOOKUP_HANDLED;
    }
    /* Not found, or the lookup failed (the endpoint busy, the record not
     * reachable): asked again while the settle window lasts. */
    if (now >= item->reconcile_until) {
        not_found(lg, item);
        return LEDGER_LOOKUP_MISSED;
    }
    delay = LOOKUP_BACKOFF_MIN_MS;
    for (int i = 1;
         i < item->reconcile_lookups && delay < LOOKUP_BACKOFF_MAX_MS; i++)
        delay *= 2;
    if (delay > LOOKUP_BACKOFF_MAX_MS)
        delay = LOOKUP_BACKOFF_MAX_MS;
    /* A last lookup at the window's end, not after it. */
    item->reconcile_due = now + delay < item->reconcile_until
                              ? now + delay
                              : item->reconcile_until;
    item->next = lg->reconcile_wait;
    lg->reconcile_wait = item;
    return LEDGER_LOOKUP_HANDLED;
}

int
ledger_reconcile_mark(struct ledger *lg, struct rl_item *item)
{
    char errstr[512];
    struct rl_log_ctx ctx;
    int err;

    if (!lg->db) {
        ledger_requeue(lg, item, REDO_RESULT);
        return 0;
    }
    err = rl_db_mark_reconciled(
        lg->db, item->run_id, item->attempt_no, item->call.upstream_request_id,
        item->lookup.found_attempt, item->lookup.found_records, errstr,
        sizeof(errstr));
    if (err == RL_ERR_DB) {
        ledger_defer(lg, item, REDO_RESULT, "mark the reconciled attempt",
                     errstr);
        return 0;
    }
    if (err) {
        /* The attempt has an outcome already (a completion that committed
         * before a lost reply): the completion below says what holds. */
        ledger_log_ctx(item, &ctx);
        rl_log_warn(&ctx, "%s", errstr);
    }
    item->reconcile_marked = 1;
    return 1;
}

void
ledger_reconcile_tick(struct ledger *lg)
{
    struct rl_item *list = lg->reconcile_wait, *keep = NULL;
    int64_t now = rl_clock_ms();
    int stopping = atomic_load(&lg->pl->stopping);

    lg->reconcile_wait = NULL;
    while (list) {
        struct rl_item *item = list;

        list = item->next;
        item->next = NULL;
        if (item->lease_lost) {
            atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
            item->trace_outcome = "lease_lost";
            ledger_finish(lg, item);
        } else if (stopping && !lg->db) {
            ledger_requeue(lg, item, REDO_START);
        } else if (stopping) {
            /* The attempt keeps no outcome: whoever claims the run next
             * looks it up again. */
            ledger_retry_later(lg, item, 0, "shutdown",
                               "released at shutdown while reconciling");
        } else if (now >= item->reconcile_due) {
            submit_lookup(lg, item);
        } else {
            item->next = keep;
            keep = item;
        }
    }
    /* Whatever was handled above may have added to the list again. */
    while (keep) {
        struct rl_item *item = keep;

        keep = item->next;
        item->next = lg->reconcile_wait;
        lg->reconcile_wait = item;
    }
}
