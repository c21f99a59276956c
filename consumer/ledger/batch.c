/* Batch mode (docs/batch.md): the hand-off of a batch-mode run's recorded
 * dispatch to the batcher (on the ledger thread), and the batcher thread:
 * intents formed in the ledger before any upload, the request file
 * uploaded, the batch created with its local id in metadata, an
 * unanswered create looked up at the provider before another, polls with
 * backoff, and every line of the output and error files turned into the
 * run's one durable state through the same guarded completion as a live
 * answer. Every batch step is written under the batch's lease (owner,
 * epoch); every run write under the run's (RL_BATCH_OWNER, its epoch).
 * @locality ledger thread (ledger_batch_*), batcher thread (the rest) */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "ledger_int.h"
#include "rl/approval.h"
#include "rl/clock.h"
#include "rl/db_batch.h"
#include "rl/db_complete.h"
#include "rl/db_dispatch.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/log.h"
#include "rl/model.h"
#include "rl/model_batch.h"

/* How often the ledger rereads which jobs are in batch mode. */
#define MODES_REFRESH_MS 2000
/* The batcher's turn: forming intents and taking due batches. */
#define TICK_MS 250
/* Batches taken per turn. */
#define TAKE_MAX 4
/* The longest wait between two polls of a batch. */
#define POLL_MAX_MS 600000
/* A line of an output file held at most. */
#define LINE_MAX_BYTES ((size_t)16 * 1024 * 1024)
/* Answered lines stored by one statement at most, and their outputs'
 * bytes (a longer output goes alone): the batcher holds no more of a
 * file's answers than this, whatever the file's size. */
#define STORE_LINES_MAX 256
#define STORE_BYTES_MAX ((size_t)4 * 1024 * 1024)
/* A failed step is tried again after this long. */
#define RETRY_STEP_MS 2000
/* Uploads or creates the provider refused (4xx) before the batch's runs
 * are given back to their policy. */
#define REFUSALS_MAX 3

struct ledger_batch {
    const struct rl_config *cfg;
    struct rl_http *http;   /* /metrics (may be NULL) */
    struct rl_pipeline *pl; /* dead letters of the runs it fails */
    char *modes;            /* "job\ttenant" lines; ledger thread */
    int64_t modes_due;      /* next reread (monotonic ms); ledger thread */
    pthread_t thread;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;         /* @locks lock */
    struct rl_db *db; /* batcher thread */
    struct rl_model_batches *mb;
    char provider[512]; /* the poll slots' key: the base URL, bare */
    int64_t poll_spacing_ms;
};

/* ---- the hand-off (ledger thread) ------------------------------------- */

/* Whether item's job (and tenant) is in batch mode, as last read. */
static int
in_batch_mode(struct ledger *lg, const struct rl_item *item)
{
    struct ledger_batch *bt = lg->batch;
    size_t jl, tl;
    const char *p;

    if (!bt || !item->job || !item->tenant)
        return 0;
    if (lg->db && rl_clock_ms() >= bt->modes_due) {
        char errstr[512], *text = NULL;

        if (rl_db_batch_modes(lg->db, &text, errstr, sizeof(errstr)) == 0) {
            free(bt->modes);
            bt->modes = text;
        }
        bt->modes_due = rl_clock_ms() + MODES_REFRESH_MS;
    }
    if (!bt->modes || !*bt->modes)
        return 0;
    jl = strlen(item->job);
    tl = strlen(item->tenant);
    for (p = bt->modes; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        if (len > jl && strncmp(p, item->job, jl) == 0 && p[jl] == '\t' &&
            (len == jl + 1 || (len == jl + 1 + tl &&
                               strncmp(p + jl + 1, item->tenant, tl) == 0)))
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* The body of item's request line, its endpoint and model; NULL when it
 * cannot be built (the live path then fails it as it would). */
static char *
line_body(struct ledger *lg, const struct rl_item *item, const char **endpoint,
          char *model, size_t model_size)
{
    char errstr[512];
    char *chat = rl_model_build_body(item->request_json, item->raw_input,
                                     errstr, sizeof(errstr));
    const struct rl_model_body_opts opts = {
        .api = (enum rl_model_api)lg->cfg->model_api,
        .api_by_model = lg->cfg->model_api_by_model,
        .run_id = item->run_id,
        .attempt_no = item->attempt_no,
    };
    enum rl_model_api api = RL_MODEL_API_CHAT;
    char *body;
    cJSON *root;
    const cJSON *m;

    if (!chat)
        return NULL;
    body = rl_model_body_prepare(chat, &opts, &api, errstr, sizeof(errstr));
    free(chat);
    if (!body)
        return NULL;
    root = cJSON_Parse(body);
    m = cJSON_GetObjectItemCaseSensitive(root, "model");
    snprintf(model, model_size, "%s", cJSON_IsString(m) ? m->valuestring : "");
    cJSON_Delete(root);
    *endpoint = api == RL_MODEL_API_RESPONSES ? "/v1/responses"
                                              : "/v1/chat/completions";
    return body;
}

size_t
ledger_batch_take_over(struct ledger *lg, struct rl_item **items, size_t n)
{
    struct rl_batch_park_req reqs[RL_PIPELINE_BATCH_MAX];
    enum rl_batch_park_status status[RL_PIPELINE_BATCH_MAX];
    struct rl_item *mine[RL_PIPELINE_BATCH_MAX];
    char *bodies[RL_PIPELINE_BATCH_MAX];
    char models[RL_PIPELINE_BATCH_MAX][256];
    char errstr[512];
    size_t live = 0, m = 0;
    int err;

    for (size_t i = 0; i < n; i++) {
        const char *endpoint = NULL;
        char *body = NULL;

        /* Approval-required runs propose their answer: they stay live. */
        if (m < RL_PIPELINE_BATCH_MAX && in_batch_mode(lg, items[i]) &&
            rl_approval_required(items[i]->request_json) == 0)
            body = line_body(lg, items[i], &endpoint, models[m],
                             sizeof(models[m]));
        if (!body) {
            items[live++] = items[i];
            continue;
        }
        mine[m] = items[i];
        bodies[m] = body;
        reqs[m] = (struct rl_batch_park_req){
            .run_id = items[i]->run_id,
            .lease_epoch = items[i]->lease_epoch,
            .attempt_no = items[i]->attempt_no,
            .endpoint = endpoint,
            .model = models[m],
            .body = body,
        };
        m++;
    }
    if (m == 0)
        return live;
    err = rl_db_batch_park(lg->db, lg->cfg->worker_id, reqs, m, status, errstr,
                           sizeof(errstr));
    for (size_t i = 0; i < m; i++) {
        struct rl_item *item = mine[i];
        struct rl_log_ctx ctx;

        free(bodies[i]);
        ledger_log_ctx(item, &ctx);
        if (err) {
            char dberr[512];

            /* Recorded, never sent: say so, or the next claimer would
             * count it as an ambiguous attempt. */
            rl_db_record_outcome(lg->db, item->run_id,
                                 &(struct rl_attempt_outcome){
                                     .outcome = RL_OUTCOME_NOT_SENT,
                                     .call = {.attempt_no = item->attempt_no},
                                     .error = "could not hand to the batcher"},
                                 dberr, sizeof(dberr));
            ledger_retry_later(lg, item, 0, "batch", errstr);
        } else if (status[i] == RL_BATCH_PARKED) {
            /* The batcher holds its lease now: done for this worker and
             * for Kafka (the ledger has it). */
            rl_log_debug(&ctx, "waiting for a batch");
            item->trace_outcome = "batched";
            ledger_finish(lg, item);
        } else if (status[i] == RL_BATCH_LOST) {
            atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
            ledger_finish(lg, item);
        } else {
            items[live++] = item;
        }
    }
    return live;
}

/* ---- the batcher thread ----------------------------------------------- */

static void
blog(const struct rl_batch *b, enum rl_log_level level, const char *prefix,
     const char *msg)
{
    if (level == RL_LOG_WARN)
        rl_log_warn(NULL, "batch %s (provider %s): %s%s", b->batch_id,
                    *b->provider_batch_id ? b->provider_batch_id : "-", prefix,
                    msg);
    else
        rl_log_info(NULL, "batch %s (provider %s): %s%s", b->batch_id,
                    *b->provider_batch_id ? b->provider_batch_id : "-", prefix,
                    msg);
}

static int64_t
lease_ms(const struct ledger_batch *bt)
{
    return (int64_t)bt->cfg->batch_lease_seconds * 1000;
}

/* A step's failure: the batch is released for a later try, unless its
 * lease is gone already. */
static void
step_failed(struct ledger_batch *bt, const struct rl_batch *b, int err,
            const char *why)
{
    char errstr[512];

    if (err == RL_ERR_STALE)
        return;
    blog(b, RL_LOG_WARN, "", why);
    rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_RELEASE, why,
                     RETRY_STEP_MS, errstr, sizeof(errstr));
}

static void refused(struct ledger_batch *bt, struct rl_batch *b,
                    const char *why);

/* The request file uploaded (or, after an upload that got no answer,
 * the one the provider holds adopted). Returns 0 when b has its file. */
static int
upload(struct ledger_batch *bt, struct rl_batch *b)
{
    char errstr[512], filename[96], why[600];
    int64_t bytes = 0;
    FILE *f;
    int err;

    snprintf(filename, sizeof(filename), "%s.jsonl", b->batch_id);
    if (b->upload_tries > 0 &&
        rl_model_batches_find_file(bt->mb, filename, b->input_file_id,
                                   sizeof(b->input_file_id), errstr,
                                   sizeof(errstr)) == RL_OK) {
        err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id,
                               RL_BATCH_STEP_UPLOADED, b->input_file_id,
                               lease_ms(bt), errstr, sizeof(errstr));
        if (err)
            step_failed(bt, b, err, errstr);
        return err;
    }
    err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_UPLOAD,
                           "uploading", lease_ms(bt), errstr, sizeof(errstr));
    if (err) {
        step_failed(bt, b, err, errstr);
        return err;
    }
    /* On disk, not in memory: a file may be 200 MB. */
    f = tmpfile();
    if (!f) {
        step_failed(bt, b, RL_ERR_IO, "could not create a temporary file");
        return RL_ERR_IO;
    }
    err = rl_db_batch_write_requests(bt->db, b, f, &bytes, errstr,
                                     sizeof(errstr));
    if (!err) {
        rewind(f);
        err = rl_model_batches_upload(bt->mb, f, filename, b->input_file_id,
                                      sizeof(b->input_file_id), errstr,
                                      sizeof(errstr));
    }
    fclose(f);
    if (!err) {
        rl_failpoint("batch_after_upload");
        err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id,
                               RL_BATCH_STEP_UPLOADED, b->input_file_id,
                               lease_ms(bt), errstr, sizeof(errstr));
    }
    if (err) {
        snprintf(why, sizeof(why), "upload: %s", errstr);
        if (err == RL_ERR_INVALID && b->upload_tries + 1 >= REFUSALS_MAX)
            refused(bt, b, why);
        else
            step_failed(bt, b, err, why);
        return err;
    }
    snprintf(why, sizeof(why), "uploaded %d runs, %lld bytes, file %s", b->runs,
             (long long)bytes, b->input_file_id);
    blog(b, RL_LOG_INFO, "", why);
    return 0;
}

/* An intent: uploaded, then created once. A create that may have been
 * made is looked up by its local id first, for the settle period. */
static void
submit(struct ledger_batch *bt, struct rl_batch *b)
{
    char errstr[512], why[600];
    int err;

    if (!*b->input_file_id && upload(bt, b) != 0)
        return;
    if (b->create_tries > 0) {
        err = rl_model_batches_find(bt->mb, b->batch_id, b->provider_batch_id,
                                    sizeof(b->provider_batch_id), errstr,
                                    sizeof(errstr));
        if (err == RL_OK) {
            blog(b, RL_LOG_INFO, "", "adopted: the provider holds it");
            err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id,
                                   RL_BATCH_STEP_SUBMITTED,
                                   b->provider_batch_id, bt->cfg->batch_poll_ms,
                                   errstr, sizeof(errstr));
            if (err)
                step_failed(bt, b, err, errstr);
            return;
        }
        if (err != RL_ERR_NOTFOUND) {
            snprintf(why, sizeof(why), "lookup: %s", errstr);
            step_failed(bt, b, err, why);
            return;
        }
        if (b->lookup_ms < 0 || b->lookup_ms < bt->cfg->batch_settle_ms) {
            /* The provider's list is eventually consistent: not found yet
             * is not "not made". */
            int64_t next = bt->cfg->batch_settle_ms / 5;

            rl_db_batch_step(bt->db, b, bt->cfg->worker_id,
                             RL_BATCH_STEP_LOOKUP, "not found yet",
                             next < 100 ? 100 : next, errstr, sizeof(errstr));
            return;
        }
        blog(b, RL_LOG_WARN, "",
             "not found at the provider after the settle period: created "
             "again");
    }
    err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_CREATE,
                           "creating", lease_ms(bt), errstr, sizeof(errstr));
    if (err) {
        step_failed(bt, b, err, errstr);
        return;
    }
    err = rl_model_batches_create(
        bt->mb, b->input_file_id, b->endpoint, b->completion_window,
        b->batch_id,
        rl_failpoint("batch_create_drop_reply") ? "drop_reply" : NULL,
        b->provider_batch_id, sizeof(b->provider_batch_id), errstr,
        sizeof(errstr));
    if (err == RL_OK) {
        rl_failpoint("batch_after_create");
        err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id,
                               RL_BATCH_STEP_SUBMITTED, b->provider_batch_id,
                               bt->cfg->batch_poll_ms, errstr, sizeof(errstr));
        if (err)
            step_failed(bt, b, err, errstr);
        else
            blog(b, RL_LOG_INFO, "", "created");
        return;
    }
    /* No answer, or refused: the next turn looks it up before any other
     * create. */
    snprintf(why, sizeof(why), "create: %s", errstr);
    if (err == RL_ERR_INVALID && b->create_tries + 1 >= REFUSALS_MAX) {
        refused(bt, b, why);
        return;
    }
    blog(b, RL_LOG_WARN, "", why);
    rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_LOOKUP, why,
                     200, errstr, sizeof(errstr));
}

/* What the lines of a finished batch came to. */
struct lines {
    struct ledger_batch *bt;
    struct rl_batch *b;
    int ok, failed, ignored;
    int db_failed;
    /* Answered lines waiting for one statement (store_pending): at most
     * STORE_LINES_MAX of them and STORE_BYTES_MAX of outputs (one longer
     * output goes alone). */
    struct pending_answer *pending;
    size_t npending;
    size_t pending_bytes;
    size_t held_max; /* the most output bytes pending at once */
};

/* A run the batcher failed for good is dead-lettered as a live run that
 * fails for good is (ledger_give_up): source "run", its reason the error
 * class, its event rebuilt from the ledger row (the batcher never holds
 * the Kafka value), through the process's dead-letter producer. The item
 * built here is the dead letter's: freed once the broker has it. */
static void
dead_letter(struct ledger_batch *bt, const struct rl_batch_run *r,
            struct rl_batch_failed_run *f, const char *error_class,
            const char *detail)
{
    struct rl_item *item = bt->pl ? calloc(1, sizeof(*item)) : NULL;
    struct rl_log_ctx ctx;

    if (!item) {
        rl_log_error(NULL, "run %s failed (%s) but could not be dead-lettered",
                     r->run_id, error_class);
        rl_batch_failed_run_clear(f);
        return;
    }
    memcpy(item->run_id, r->run_id,
           strnlen(r->run_id, sizeof(item->run_id) - 1));
    item->job = f->job;
    item->tenant = f->tenant;
    item->version = f->version;
    item->request_json = f->request_json;
    item->raw_input = f->raw_input;
    item->origin_topic = f->source_topic;
    f->job = f->tenant = f->version = f->request_json = f->raw_input =
        f->source_topic = NULL;
    memcpy(item->scheduled_at, f->scheduled_at, sizeof(item->scheduled_at));
    item->origin_partition = f->source_partition;
    item->origin_offset = f->source_offset;
    item->lease_epoch = r->lease_epoch;
    item->attempt_no = r->attempt_no;
    rl_batch_failed_run_clear(f);
    /* Counted as every item the process holds until its dead letter is
     * acknowledged (rl_pipeline_finish takes it off). */
    atomic_fetch_add(&bt->pl->in_flight, 1);
    atomic_fetch_add(&bt->pl->counters.failed, 1);
    ledger_log_ctx(item, &ctx);
    rl_log_warn(&ctx, "run failed: %s: %s", error_class, detail);
    rl_pipeline_dead_letter(bt->pl, item, RL_DEADLETTER_RUN, error_class,
                            detail);
}

/* A line (or a run no line named) that brought no answer: the attempt's
 * outcome (with the line's status, 0 when none), then the run's policy: a
 * refusal (4xx) or on_expiry "fail" fails it and dead-letters it, as a
 * live failure; otherwise it is pending again, for the next batch
 * ("rebatch") or a live call ("live"), one attempt spent. */
static int
line_failed(struct lines *ls, struct rl_batch_run *r, enum rl_outcome outcome,
            int permanent, const char *error_class, int http_status,
            const char *detail)
{
    struct ledger_batch *bt = ls->bt;
    const struct rl_lease lease = {
        .run_id = r->run_id, .worker = RL_BATCH_OWNER, .epoch = r->lease_epoch};
    const char *state;
    char errstr[512];
    int err;

    err = rl_db_record_outcome(
        bt->db, r->run_id,
        &(struct rl_attempt_outcome){
            .outcome = outcome,
            .call = {.attempt_no = r->attempt_no, .http_status = http_status},
            .error = detail},
        errstr, sizeof(errstr));
    if (err == RL_ERR_DB)
        return err;
    if (permanent || strcmp(r->on_expiry, "fail") == 0) {
        struct rl_batch_failed_run f;

        err =
            rl_db_batch_fail_run(bt->db, r->run_id, r->lease_epoch, error_class,
                                 detail, &f, errstr, sizeof(errstr));
        /* Out of memory after the update: read again later, the run is
         * found failed and its dead letter produced then. */
        if (err == RL_ERR_NOMEM)
            return err;
        if (err == 0)
            dead_letter(bt, r, &f, error_class, detail);
        state = "failed";
    } else {
        err = rl_db_release(bt->db, &lease, 0, error_class, detail, errstr,
                            sizeof(errstr));
        state = strcmp(r->on_expiry, "live") == 0 ? "go_live" : "retried";
    }
    if (err == RL_ERR_DB)
        return err;
    if (err) {
        /* Cancelled (or finished) meanwhile: nothing to retry. */
        state = "ignored";
        ls->ignored++;
    } else {
        ls->failed++;
    }
    return rl_db_batch_run_state(bt->db, ls->b->batch_id, r->run_id,
                                 r->attempt_no, state, errstr, sizeof(errstr));
}

/* An answered line whose answer is not stored as it came: the parser of
 * live answers refused it (or the database refused its output), and the
 * run follows its policy as for an invalid live answer, unless the line
 * was handled before or names no run of the batch. */
static int
line_invalid(struct lines *ls, const char *run_id, int attempt, const char *why)
{
    struct rl_batch_run r;
    char errstr[512];
    int err = rl_db_batch_run(ls->bt->db, ls->b->batch_id, run_id, attempt, &r,
                              errstr, sizeof(errstr));

    if (err == RL_ERR_NOTFOUND) {
        ls->ignored++;
        return 0;
    }
    if (err)
        return err;
    if (strcmp(r.state, "in_batch") == 0)
        err = line_failed(ls, &r, RL_OUTCOME_INVALID_OUTPUT, 0,
                          "invalid_output", 200, why);
    free(r.request_json);
    return err;
}

/* One answered line waiting to be stored. */
struct pending_answer {
    char run_id[96];
    int attempt_no;
    char *output_json;
    char upstream_request_id[128];
    int64_t prompt_tokens, completion_tokens, cached_tokens;
};

static void
pending_clear(struct lines *ls)
{
    for (size_t i = 0; i < ls->npending; i++)
        free(ls->pending[i].output_json);
    ls->npending = 0;
    ls->pending_bytes = 0;
}

/* Stores pending answers [from, from + n) in one statement; counts what
 * became of each. A statement the database refuses for a value is
 * split down to the line it refuses, which is then an invalid answer. */
static int
store_some(struct lines *ls, size_t from, size_t n)
{
    struct rl_batch_answer answers[STORE_LINES_MAX];
    enum rl_batch_answer_result results[STORE_LINES_MAX];
    char errstr[512];
    int err;

    if (n == 0 || n > STORE_LINES_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const struct pending_answer *p = &ls->pending[from + i];

        answers[i] = (struct rl_batch_answer){
            .run_id = p->run_id,
            .attempt_no = p->attempt_no,
            .output_json = p->output_json,
            .upstream_request_id = p->upstream_request_id,
            .prompt_tokens = p->prompt_tokens,
            .completion_tokens = p->completion_tokens,
            .cached_tokens = p->cached_tokens,
        };
    }
    err = rl_db_batch_store_answers(ls->bt->db, ls->b->batch_id, answers, n,
                                    results, errstr, sizeof(errstr));
    if (err == RL_ERR_INVALID && n > 1) {
        err = store_some(ls, from, n / 2);
        return err ? err : store_some(ls, from + n / 2, n - n / 2);
    }
    if (err == RL_ERR_INVALID)
        return line_invalid(ls, answers[0].run_id, answers[0].attempt_no,
                            errstr);
    if (err) {
        blog(ls->b, RL_LOG_WARN, "storing answers: ", errstr);
        return err;
    }
    for (size_t i = 0; i < n; i++) {
        if (results[i] == RL_BATCH_ANSWER_HANDLED)
            continue;
        if (results[i] == RL_BATCH_ANSWER_NOT_FOUND) {
            ls->ignored++;
            continue;
        }
        /* The line's generation and tokens count as a live answer's do,
         * whether or not the run took it. */
        rl_http_model_call(
            ls->bt->http, &(struct rl_model_call){
                              .outcome = RL_MODEL_OK,
                              .prompt_tokens = answers[i].prompt_tokens,
                              .completion_tokens = answers[i].completion_tokens,
                              .cached_tokens = answers[i].cached_tokens,
                              .latency_ms = -1});
        if (results[i] == RL_BATCH_ANSWER_COMPLETED)
            ls->ok++;
        else
            ls->ignored++;
    }
    return 0;
}

/* Every pending answer stored: many lines a statement, as live answers
 * are completed, instead of one. */
static int
store_pending(struct lines *ls)
{
    int err = ls->npending ? store_some(ls, 0, ls->npending) : 0;

    pending_clear(ls);
    return err;
}

/* One answered line: read by the parser of live answers and queued for
 * store_pending, which completes its run as a live answer is, under the
 * run's lease; refused (cancelled, completed before) it is counted
 * ignored. */
static int
line_answered(struct lines *ls, const char *run_id, int attempt,
              const cJSON *body)
{
    struct ledger_batch *bt = ls->bt;
    struct rl_model_call call;
    struct pending_answer *p;
    char *text = cJSON_PrintUnformatted(body), *output;
    enum rl_model_api api = strcmp(ls->b->endpoint, "/v1/responses") == 0
                                ? RL_MODEL_API_RESPONSES
                                : RL_MODEL_API_CHAT;
    size_t len;
    int err = 0;

    if (!text)
        return RL_ERR_NOMEM;
    memset(&call, 0, sizeof(call));
    rl_model_batches_answer(bt->mb, text, strlen(text), api, &call);
    cJSON_free(text);
    if (call.outcome != RL_MODEL_OK) {
        /* In line order: what is pending is stored first. */
        err = store_pending(ls);
        if (!err)
            err = line_invalid(ls, run_id, attempt, call.error);
        rl_model_call_clear(&call);
        return err;
    }
    output = rl_model_output_json(&call);
    if (!output) {
        rl_model_call_clear(&call);
        return RL_ERR_NOMEM;
    }
    len = strlen(output);
    /* One statement names a run once; the bounds hold before it is
     * added, so a longer output goes alone. */
    for (size_t i = 0; i < ls->npending && !err; i++) {
        if (strcmp(ls->pending[i].run_id, run_id) == 0)
            err = store_pending(ls);
    }
    if (!err && ls->npending > 0 &&
        (ls->npending >= STORE_LINES_MAX ||
         ls->pending_bytes + len > STORE_BYTES_MAX))
        err = store_pending(ls);
    if (err) {
        free(output);
        rl_model_call_clear(&call);
        return err;
    }
    p = &ls->pending[ls->npending++];
    memset(p, 0, sizeof(*p));
    snprintf(p->run_id, sizeof(p->run_id), "%s", run_id);
    p->attempt_no = attempt;
    p->output_json = output;
    snprintf(p->upstream_request_id, sizeof(p->upstream_request_id), "%s",
             call.upstream_request_id);
    p->prompt_tokens = call.prompt_tokens;
    p->completion_tokens = call.completion_tokens;
    p->cached_tokens = call.cached_tokens;
    ls->pending_bytes += len;
    if (ls->pending_bytes > ls->held_max)
        ls->held_max = ls->pending_bytes;
    rl_model_call_clear(&call);
    return 0;
}

/* A line that came back with an error. A line with a status is read as a
 * live reply with that status and body is (the same outcome, the same
 * redacted error), and a refusal (a 4xx other than 408 and 429) fails
 * the run as a live refusal does (model_rejected); a line without one
 * (the batch expired or failed before it) is transient. */
static int
line_error(struct lines *ls, struct rl_batch_run *r, const cJSON *status,
           const cJSON *body, const cJSON *error)
{
    const cJSON *ecode = cJSON_GetObjectItemCaseSensitive(error, "code");
    int code = cJSON_IsNumber(status) ? status->valueint : 0;
    struct rl_model_call call;
    char detail[256], *text;
    int permanent, err;

    if (code < 300) {
        snprintf(detail, sizeof(detail), "batch line: %s %d",
                 cJSON_IsString(ecode) ? ecode->valuestring : "status", code);
        return line_failed(ls, r, RL_OUTCOME_TRANSIENT, 0,
                           cJSON_IsString(ecode) && strcmp(ecode->valuestring,
                                                           "batch_expired") == 0
                               ? "batch_expired"
                               : "batch_line",
                           code, detail);
    }
    text = body ? cJSON_PrintUnformatted(body) : NULL;
    memset(&call, 0, sizeof(call));
    rl_model_batches_line_error(ls->bt->mb, code, text, text ? strlen(text) : 0,
                                &call);
    cJSON_free(text);
    permanent = call.outcome == RL_MODEL_PERMANENT;
    err = line_failed(ls, r,
                      permanent ? RL_OUTCOME_PERMANENT : RL_OUTCOME_TRANSIENT,
                      permanent, permanent ? "model_rejected" : "batch_line",
                      code, call.error[0] ? call.error : "batch line failed");
    rl_model_call_clear(&call);
    return err;
}

/* A line with an error (or no answer) whose run still waits in the
 * batch: line_error, its run's policy. */
static int
line_not_answered(struct lines *ls, const char *run_id, int attempt,
                  const cJSON *status, const cJSON *body, const cJSON *error)
{
    struct rl_batch_run r;
    char errstr[512];
    int err = rl_db_batch_run(ls->bt->db, ls->b->batch_id, run_id, attempt, &r,
                              errstr, sizeof(errstr));

    if (err == RL_ERR_NOTFOUND) {
        ls->ignored++;
        return 0;
    }
    if (err)
        return err;
    /* Not in_batch: handled by an earlier read of this file. */
    if (strcmp(r.state, "in_batch") == 0)
        err = line_error(ls, &r, status, body, error);
    free(r.request_json);
    return err;
}

/* One line of an output or error file. */
static int
on_line(char *line, size_t len, void *arg)
{
    struct lines *ls = arg;
    cJSON *root = cJSON_ParseWithLength(line, len);
    const cJSON *cid = cJSON_GetObjectItemCaseSensitive(root, "custom_id");
    const cJSON *resp = cJSON_GetObjectItemCaseSensitive(root, "response");
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(resp, "status_code");
    const cJSON *body = cJSON_GetObjectItemCaseSensitive(resp, "body");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "error");
    char run_id[96];
    const char *colon;
    int attempt, err = 0;

    if (!cJSON_IsString(cid) || !(colon = strrchr(cid->valuestring, ':')) ||
        (size_t)(colon - cid->valuestring) >= sizeof(run_id)) {
        ls->ignored++;
        goto done;
    }
    memcpy(run_id, cid->valuestring, (size_t)(colon - cid->valuestring));
    run_id[colon - cid->valuestring] = '\0';
    attempt = atoi(colon + 1);
    if (cJSON_IsNumber(status) && status->valueint == 200 &&
        cJSON_IsObject(body)) {
        err = line_answered(ls, run_id, attempt, body);
    } else {
        /* In line order: what is pending is stored first. */
        err = store_pending(ls);
        if (!err)
            err = line_not_answered(ls, run_id, attempt, status, body, error);
    }
done:
    cJSON_Delete(root);
    if (err)
        ls->db_failed = 1;
    return err ? 1 : 0;
}

/* One output or error file read line by line, its answers stored as
 * they come, many to a statement, and the last of them when it ends
 * (also after a read that broke off: they are answers all the same). */
static int
read_file(struct lines *ls, const char *file_id, char *errstr,
          size_t errstr_size)
{
    int err = rl_model_batches_read(ls->bt->mb, file_id, LINE_MAX_BYTES,
                                    on_line, ls, errstr, errstr_size);
    int stored = ls->db_failed ? 0 : store_pending(ls);

    pending_clear(ls);
    if (!err && stored) {
        ls->db_failed = 1;
        rl_set_err(errstr, errstr_size, "could not store the answers of %s",
                   file_id);
        err = stored;
    }
    return err;
}

/* A finished batch: every line read, the runs no line named retried per
 * their policy, the batch closed. */
static void
finish(struct ledger_batch *bt, struct rl_batch *b,
       const struct rl_model_batch_state *st)
{
    struct lines ls = {.bt = bt, .b = b};
    struct rl_batch_run left[64];
    char errstr[512], why[600];
    size_t n;
    int err = 0;

    ls.pending = calloc(STORE_LINES_MAX, sizeof(*ls.pending));
    if (!ls.pending) {
        step_failed(bt, b, RL_ERR_NOMEM, "reading the results: out of memory");
        return;
    }
    if (*st->output_file_id)
        err = read_file(&ls, st->output_file_id, errstr, sizeof(errstr));
    if (!err && *st->error_file_id)
        err = read_file(&ls, st->error_file_id, errstr, sizeof(errstr));
    free(ls.pending);
    ls.pending = NULL;
    while (!err) {
        err = rl_db_batch_unanswered(bt->db, b->batch_id, left, 64, &n, errstr,
                                     sizeof(errstr));
        if (err || n == 0)
            break;
        for (size_t i = 0; i < n; i++) {
            if (!err) {
                snprintf(why, sizeof(why),
                         "the batch ended %s with no line "
                         "for this run",
                         st->status);
                err = line_failed(
                    &ls, &left[i], RL_OUTCOME_TRANSIENT, 0,
                    strcmp(st->status, "expired") == 0   ? "batch_expired"
                    : strcmp(st->status, "refused") == 0 ? "batch_refused"
                                                         : "batch_failed",
                    0, why);
                if (err)
                    snprintf(errstr, sizeof(errstr),
                             "could not retry a run of the batch");
            }
            free(left[i].request_json);
        }
    }
    if (err) {
        snprintf(why, sizeof(why), "reading the results: %s", errstr);
        step_failed(bt, b, err, why);
        return;
    }
    err = rl_db_batch_finish(
        bt->db, b, bt->cfg->worker_id,
        strcmp(st->status, "completed") == 0   ? "completed"
        : strcmp(st->status, "expired") == 0   ? "expired"
        : strcmp(st->status, "cancelled") == 0 ? "cancelled"
                                               : "failed",
        st->status, st->output_file_id, st->error_file_id, ls.ok, ls.failed,
        ls.ignored, errstr, sizeof(errstr));
    snprintf(why, sizeof(why),
             "%s: %d answers stored, %d lines failed, %d "
             "ignored; at most %zu bytes of answers held",
             st->status, ls.ok, ls.failed, ls.ignored, ls.held_max);
    blog(b, RL_LOG_INFO, "", why);
}

/* The provider refused the batch's upload or create REFUSALS_MAX times:
 * its runs go back to their policy (their attempt spent, as an expired
 * batch's), and the batch ends failed, never to be created. */
static void
refused(struct ledger_batch *bt, struct rl_batch *b, const char *why)
{
    struct rl_model_batch_state st;

    memset(&st, 0, sizeof(st));
    snprintf(st.status, sizeof(st.status), "refused");
    blog(b, RL_LOG_WARN,
         "refused by the provider: its runs follow their "
         "policy: ",
         why);
    finish(bt, b, &st);
}

/* A submitted batch whose poll is due. */
static void
poll_batch(struct ledger_batch *bt, struct rl_batch *b)
{
    struct rl_model_batch_state st;
    char errstr[512];
    int64_t wait = bt->cfg->batch_poll_ms;
    int live = 1, err;

    for (int i = 0; i < b->polls && i < 12 && wait < POLL_MAX_MS; i++)
        wait *= 2;
    if (wait > POLL_MAX_MS)
        wait = POLL_MAX_MS;
    err = rl_model_batches_get(bt->mb, b->provider_batch_id, &st, errstr,
                               sizeof(errstr));
    if (err) {
        blog(b, RL_LOG_WARN, "poll: ", errstr);
        rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_POLL,
                         "poll failed", wait, errstr, sizeof(errstr));
        return;
    }
    if (strcmp(st.status, "completed") == 0 ||
        strcmp(st.status, "failed") == 0 || strcmp(st.status, "expired") == 0 ||
        strcmp(st.status, "cancelled") == 0) {
        finish(bt, b, &st);
        return;
    }
    /* Every run of it cancelled: nobody wants its answers. */
    if (strcmp(st.status, "cancelling") != 0 &&
        rl_db_batch_live_runs(bt->db, b->batch_id, &live, errstr,
                              sizeof(errstr)) == 0 &&
        live == 0) {
        if (rl_model_batches_cancel(bt->mb, b->provider_batch_id, errstr,
                                    sizeof(errstr)) == RL_OK)
            blog(b, RL_LOG_INFO, "",
                 "every run cancelled: cancelled at the provider");
        else
            blog(b, RL_LOG_WARN, "cancel: ", errstr);
        wait = bt->cfg->batch_poll_ms;
    }
    rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_POLL,
                     st.status, wait, errstr, sizeof(errstr));
}

/* The due polls of this turn, each with a slot of the group's bound
 * (RUNLEDGER_BATCH_MAX_POLLS_PER_MINUTE): a worker polls only what the
 * whole group may, however many workers and open batches there are.
 * Returns 0, or -1 when the connection is to be dropped. */
static int
polls(struct ledger_batch *bt)
{
    for (int i = 0; i < TAKE_MAX; i++) {
        struct rl_batch b;
        char errstr[512];
        int taken = 0;

        if (rl_db_batch_take_poll(bt->db, bt->cfg->worker_id, lease_ms(bt),
                                  bt->provider, bt->poll_spacing_ms, &b, &taken,
                                  errstr, sizeof(errstr)) != 0) {
            rl_log_warn(NULL, "batcher: %s", errstr);
            return -1;
        }
        if (!taken)
            break;
        poll_batch(bt, &b);
    }
    return 0;
}

/* One turn: intents formed and moved on, due batches polled. Returns 0,
 * or -1 when the connection is to be dropped. */
static int
turn(struct ledger_batch *bt)
{
    struct rl_batch bs[TAKE_MAX];
    char errstr[512];
    size_t n = 0;
    int formed = 0;

    if (rl_db_batch_form(bt->db, TAKE_MAX, &formed, errstr, sizeof(errstr)) ||
        rl_db_batch_take(bt->db, bt->cfg->worker_id, lease_ms(bt), bs, TAKE_MAX,
                         &n, errstr, sizeof(errstr))) {
        rl_log_warn(NULL, "batcher: %s", errstr);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        submit(bt, &bs[i]);
    return polls(bt);
}

/* The key of the provider's poll slots: its base URL without what may
 * hold a secret or varies between workers of one provider (user
 * information, query, fragment), so the ledger never stores a key. */
static void
provider_key(const char *base_url, char *out, size_t size)
{
    const char *scheme = strstr(base_url, "://");
    const char *host = scheme ? scheme + 3 : base_url;
    const char *at = strchr(host, '@');
    const char *slash = strchr(host, '/');
    size_t len;

    if (at && (!slash || at < slash))
        host = at + 1;
    len = strcspn(host, "?#");
    while (len > 0 && host[len - 1] == '/')
        len--;
    snprintf(out, size, "%.*s%.*s", scheme ? (int)(scheme + 3 - base_url) : 0,
             base_url, (int)len, host);
}

static void *
batcher_main(void *arg)
{
    struct ledger_batch *bt = arg;
    char errstr[512];

    rl_thread_name("rl-batcher");
    for (;;) {
        struct timespec until;
        int stop;

        if (!bt->db)
            bt->db = rl_db_connect_role(bt->cfg, RL_DB_ROLE_BATCHER, errstr,
                                        sizeof(errstr));
        if (bt->db && turn(bt) != 0) {
            rl_db_destroy(bt->db);
            bt->db = NULL;
        }
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)TICK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&bt->lock);
        if (!bt->stop)
            pthread_cond_timedwait(&bt->wake, &bt->lock, &until);
        stop = bt->stop;
        pthread_mutex_unlock(&bt->lock);
        if (stop)
            break;
    }
    rl_db_destroy(bt->db);
    bt->db = NULL;
    return NULL;
}

void
ledger_batch_start(struct ledger *lg)
{
    struct ledger_batch *bt = calloc(1, sizeof(*bt));
    struct rl_model_config mcfg;
    char errstr[512];

    if (!bt) {
        rl_log_error(NULL, "batcher: out of memory; batch mode is off");
        return;
    }
    bt->cfg = lg->cfg;
    bt->http = lg->pl->http;
    bt->pl = lg->pl;
    provider_key(lg->cfg->model_base_url ? lg->cfg->model_base_url : "",
                 bt->provider, sizeof(bt->provider));
    /* Rounded up: never more than the bound in a minute. */
    bt->poll_spacing_ms =
        lg->cfg->batch_max_polls_per_minute > 0
            ? (60000 + lg->cfg->batch_max_polls_per_minute - 1) /
                  lg->cfg->batch_max_polls_per_minute
            : 1000;
    memset(&mcfg, 0, sizeof(mcfg));
    mcfg.base_url = lg->cfg->model_base_url;
    mcfg.api_key = lg->cfg->model_api_key;
    mcfg.connect_timeout_ms = lg->cfg->model_connect_timeout_ms;
    mcfg.timeout_ms = lg->cfg->model_timeout_ms;
    mcfg.max_response_bytes = (size_t)lg->cfg->max_response_bytes;
    mcfg.auth_header = lg->cfg->model_auth_header;
    mcfg.query = lg->cfg->model_query;
    mcfg.headers = lg->cfg->model_headers;
    bt->mb = rl_model_batches_new(&mcfg, errstr, sizeof(errstr));
    if (!bt->mb) {
        rl_log_error(NULL, "batcher: %s; batch mode is off", errstr);
        free(bt);
        return;
    }
    pthread_mutex_init(&bt->lock, NULL);
    pthread_cond_init(&bt->wake, NULL);
    if (pthread_create(&bt->thread, NULL, batcher_main, bt) == 0)
        bt->started = 1;
    else
        rl_log_error(NULL, "batcher: could not start its thread; batches "
                           "wait for another worker");
    lg->batch = bt;
}

void
ledger_batch_stop(struct ledger *lg)
{
    struct ledger_batch *bt = lg->batch;

    if (!bt)
        return;
    if (bt->started) {
        pthread_mutex_lock(&bt->lock);
        bt->stop = 1;
        pthread_cond_signal(&bt->wake);
        pthread_mutex_unlock(&bt->lock);
        pthread_join(bt->thread, NULL);
    }
    pthread_cond_destroy(&bt->wake);
    pthread_mutex_destroy(&bt->lock);
    rl_model_batches_destroy(bt->mb);
    free(bt->modes);
    free(bt);
    lg->batch = NULL;
}
