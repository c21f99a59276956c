/* The output stage: a batch the provider ended, its output and error
 * files read line by line as they arrive, and every line turned into its
 * run's one durable state through the same guarded completion as a live
 * answer: answers stored many to a statement, error lines and the runs no
 * line named following their run's policy (retried, sent live, or failed
 * and dead-lettered as a live failure is), and the batch closed with its
 * counts. Every act on a line is fenced by the batch's lease (a worker
 * that lost it acts on nothing), the lease is renewed while the files
 * download (batch_tick), and a batch whose files cannot be read is given
 * up, not read again forever. It holds at most STORE_LINES_MAX answers
 * and one line of a file, whatever the file's size. @locality batcher
 * thread */
#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_int.h"
#include "http.h"
#include "rl/batch_state.h"
#include "rl/clock.h"
#include "rl/db_batch_lease.h"
#include "rl/db_batch_output.h"
#include "rl/db_complete.h"
#include "rl/db_dispatch.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/log.h"
#include "rl/model.h"
#include "rl/model_batch.h"
#include "rl/outcome.h"

/* A line of an output file held at most. */
#define LINE_MAX_BYTES ((size_t)16 * 1024 * 1024)
/* Answered lines stored by one statement at most, and their outputs'
 * bytes (a longer output goes alone): the batcher holds no more of a
 * file's answers than this, whatever the file's size. */
#define STORE_LINES_MAX 256
#define STORE_BYTES_MAX ((size_t)4 * 1024 * 1024)

/* The dead letter of a run failed inside a fence not yet committed. */
struct held_letter {
    struct rl_item *item; /* the dead letter's, as dead_letter built it */
    char *error_class;
    char *detail;
    struct held_letter *next;
};

/* What the lines of a finished batch came to. */
struct lines {
    struct rl_batcher *bt;
    struct rl_batch *b;
    int ok, failed, ignored;
    int unmatched; /* lines naming no run of the batch (also ignored) */
    int db_failed;
    /* Answered lines waiting for one statement (store_pending): at most
     * STORE_LINES_MAX of them and STORE_BYTES_MAX of outputs (one longer
     * output goes alone). */
    struct pending_answer *pending;
    size_t npending;
    size_t pending_bytes;
    size_t held_max; /* the most output bytes pending at once */
    /* The dead letters of the open fence, in the order their runs
     * failed: produced when it commits, dropped when it is rolled back
     * (its runs are then still in the batch, and dead-lettered when they
     * are acted on again). */
    struct held_letter *held, **held_tail;
};

static void letters_release(struct lines *ls, int produce);

/* Begins what a line does to its run, fenced by the batch's lease: a
 * worker whose lease another took acts on nothing (RL_ERR_STALE), so two
 * readers of one file never both dead-letter or count a line. */
static int
fence_begin(struct lines *ls)
{
    char errstr[512];
    int err = rl_db_batch_fence(ls->bt->db, ls->b, ls->bt->cfg->worker_id,
                                errstr, sizeof(errstr));

    if (err)
        batch_log(ls->b, RL_LOG_WARN, "acting on its lines: ", errstr);
    return err;
}

/* Ends it: committed when err is 0, else rolled back. Returns err, or
 * the commit's error. The fence's dead letters go out only once it has
 * committed: produced inside it, a dead letter whose fence was then
 * rolled back (a later statement failed, the commit failed, the process
 * died before it) was produced again when its line was acted on again.
 * A COMMIT that got no answer may have committed, and then nothing acts
 * on the line again: its dead letters go out (at least once, as every
 * dead letter). */
static int
fence_end(struct lines *ls, int err)
{
    char errstr[512];
    int end =
        rl_db_batch_fence_end(ls->bt->db, err == 0, errstr, sizeof(errstr));

    if (end && !err)
        batch_log(ls->b, RL_LOG_WARN, "acting on its lines: ", errstr);
    letters_release(ls, err == 0 && (end == 0 || end == RL_ERR_IO));
    return err ? err : end;
}

/* A run the batcher failed for good is dead-lettered as a live run that
 * fails for good is (ledger_give_up): source "run", its reason the error
 * class, its event rebuilt from the ledger row (the batcher never holds
 * the Kafka value), through the process's dead-letter producer, once the
 * fence that failed it has committed (fence_end). The item built here is
 * the dead letter's: freed once the broker has it, or when its fence is
 * rolled back. */
static void
dead_letter(struct lines *ls, const struct rl_batch_run *r,
            struct rl_batch_failed_run *f, const char *error_class,
            const char *detail)
{
    struct rl_batcher *bt = ls->bt;
    struct rl_item *item = bt->pl ? calloc(1, sizeof(*item)) : NULL;
    struct held_letter *hl = item ? calloc(1, sizeof(*hl)) : NULL;

    if (hl) {
        hl->error_class = strdup(error_class);
        hl->detail = strdup(detail);
    }
    if (!hl || !hl->error_class || !hl->detail) {
        rl_log_error(NULL, "run %s failed (%s) but could not be dead-lettered",
                     r->run_id, error_class);
        rl_batch_failed_run_clear(f);
        if (hl) {
            free(hl->error_class);
            free(hl->detail);
            free(hl);
        }
        free(item);
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
    hl->item = item;
    if (!ls->held)
        ls->held_tail = &ls->held;
    *ls->held_tail = hl;
    ls->held_tail = &hl->next;
}

/* The fence's held dead letters produced (produce nonzero) or dropped
 * with their items. */
static void
letters_release(struct lines *ls, int produce)
{
    struct rl_batcher *bt = ls->bt;

    while (ls->held) {
        struct held_letter *hl = ls->held;
        struct rl_item *item = hl->item;

        ls->held = hl->next;
        if (produce) {
            struct rl_log_ctx ctx = RL_LOG_CTX_INIT;

            /* Counted as every item the process holds until its dead
             * letter is acknowledged (rl_pipeline_finish takes it off). */
            atomic_fetch_add(&bt->pl->in_flight, 1);
            atomic_fetch_add(&bt->pl->counters.failed, 1);
            /* The ledger's context of a run, as far as the batcher knows
             * it: the item comes from no Kafka record and carries no
             * trace. */
            ctx.run_id = item->run_id;
            ctx.job = item->job;
            ctx.tenant = item->tenant;
            ctx.attempt = item->attempt_no > 0 ? item->attempt_no : -1;
            ctx.lease_epoch = item->lease_epoch > 0 ? item->lease_epoch : -1;
            rl_log_warn(&ctx, "run failed: %s: %s", hl->error_class,
                        hl->detail);
            rl_pipeline_dead_letter(bt->pl, item, RL_DEADLETTER_RUN,
                                    hl->error_class, hl->detail);
        } else {
            rl_item_destroy(item);
        }
        free(hl->error_class);
        free(hl->detail);
        free(hl);
    }
    ls->held_tail = &ls->held;
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
    struct rl_batcher *bt = ls->bt;
    const struct rl_lease lease = {
        .run_id = r->run_id, .worker = RL_BATCH_OWNER, .epoch = r->lease_epoch};
    enum rl_batch_run_state state;
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
        if (err == 0) {
            dead_letter(ls, r, &f, error_class, detail);
            /* A fault test's failure of the fence after the run is
             * failed: it is rolled back, the run is in the batch again. */
            if (rl_failpoint("batch_after_fail_run"))
                return RL_ERR_DB;
        }
        state = RL_BATCH_RUN_FAILED;
    } else {
        err = rl_db_release_after_batch(bt->db, &lease, error_class, detail,
                                        errstr, sizeof(errstr));
        state = strcmp(r->on_expiry, "live") == 0 ? RL_BATCH_RUN_GO_LIVE
                                                  : RL_BATCH_RUN_RETRIED;
    }
    if (err == RL_ERR_DB)
        return err;
    if (err) {
        /* Cancelled (or finished) meanwhile: nothing to retry. */
        state = RL_BATCH_RUN_IGNORED;
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
    int err = fence_begin(ls);

    if (err)
        return err;
    err = rl_db_batch_run(ls->bt->db, ls->b->batch_id, run_id, attempt, &r,
                          errstr, sizeof(errstr));
    if (err == RL_ERR_NOTFOUND) {
        ls->ignored++;
        ls->unmatched++;
        return fence_end(ls, 0);
    }
    if (err)
        return fence_end(ls, err);
    if (r.state == RL_BATCH_RUN_IN_BATCH)
        err = line_failed(ls, &r, RL_OUTCOME_INVALID_OUTPUT, 0,
                          "invalid_output", 200, why);
    free(r.request_json);
    return fence_end(ls, err);
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
    err = fence_begin(ls);
    if (err)
        return err;
    err = fence_end(ls, rl_db_batch_store_answers(ls->bt->db, ls->b->batch_id,
                                                  answers, n, results, errstr,
                                                  sizeof(errstr)));
    if (err == RL_ERR_INVALID && n > 1) {
        err = store_some(ls, from, n / 2);
        return err ? err : store_some(ls, from + n / 2, n - n / 2);
    }
    if (err == RL_ERR_INVALID)
        return line_invalid(ls, answers[0].run_id, answers[0].attempt_no,
                            errstr);
    if (err) {
        batch_log(ls->b, RL_LOG_WARN, "storing answers: ", errstr);
        return err;
    }
    for (size_t i = 0; i < n; i++) {
        if (results[i] == RL_BATCH_ANSWER_HANDLED)
            continue;
        if (results[i] == RL_BATCH_ANSWER_NOT_FOUND) {
            ls->ignored++;
            ls->unmatched++;
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
    struct rl_batcher *bt = ls->bt;
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
    int err = fence_begin(ls);

    if (err)
        return err;
    err = rl_db_batch_run(ls->bt->db, ls->b->batch_id, run_id, attempt, &r,
                          errstr, sizeof(errstr));
    if (err == RL_ERR_NOTFOUND) {
        ls->ignored++;
        ls->unmatched++;
        return fence_end(ls, 0);
    }
    if (err)
        return fence_end(ls, err);
    /* Not in_batch: handled by an earlier read of this file. */
    if (r.state == RL_BATCH_RUN_IN_BATCH)
        err = line_error(ls, &r, status, body, error);
    free(r.request_json);
    return fence_end(ls, err);
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
        ls->unmatched++;
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
    } else if (ls->db_failed) {
        rl_set_err(errstr, errstr_size,
                   "a line of %s could not be written to the ledger", file_id);
    }
    return err;
}

void
batch_cancel_strays(struct rl_batcher *bt, const struct rl_batch *b)
{
    char errstr[512], why[600];
    int n = 0;

    if (!*b->provider_batch_id)
        return;
    if (rl_model_batches_cancel_strays(bt->mb, b->batch_id,
                                       b->provider_batch_id, &n, errstr,
                                       sizeof(errstr)) != RL_OK) {
        batch_log(b, RL_LOG_WARN, "looking for strays: ", errstr);
        return;
    }
    if (n > 0) {
        snprintf(why, sizeof(why),
                 "%d other batch%s of its id cancelled at the provider, "
                 "unread",
                 n, n == 1 ? "" : "es");
        batch_log(b, RL_LOG_WARN, "", why);
    }
}

/* b, ended with its adopted batch, watched for strays from now on when
 * a create of it got no answer (created more than once, or adopted by
 * its metadata, whose other create a failover may have lost from the
 * ledger): that create may reach the provider after the adopted batch
 * ended (later than the settle period and the adopted batch's whole
 * run), and no poll of b is left to find it. For a batch lease: a
 * create that reaches the provider later still is not this intent's to
 * find. A full table drops the watch whose time is nearest its end. */
static void
watch(struct rl_batcher *bt, const struct rl_batch *b)
{
    struct batch_watched *w = &bt->watched[0];
    int64_t now = rl_clock_ms();

    if ((b->create_tries < 2 && b->lookup_ms < 0) || !*b->provider_batch_id)
        return;
    for (int i = 0; i < BATCH_WATCHED_MAX; i++) {
        if (bt->watched[i].until_ms < w->until_ms)
            w = &bt->watched[i];
    }
    if (w->until_ms > now)
        batch_log(&w->b, RL_LOG_WARN, "",
                  "no longer watched for strays: too many intents watched");
    w->b = *b;
    w->next_ms = now + bt->cfg->batch_poll_ms;
    w->until_ms = now + batch_lease_ms(bt);
}

void
batch_watch_due(struct rl_batcher *bt)
{
    for (int i = 0; i < BATCH_WATCHED_MAX && !batch_stopping(bt); i++) {
        struct batch_watched *w = &bt->watched[i];
        int64_t now = rl_clock_ms();

        if (!w->until_ms || now < w->next_ms)
            continue;
        batch_cancel_strays(bt, &w->b);
        w->next_ms = rl_clock_ms() + bt->cfg->batch_poll_ms;
        /* The last look comes after the watch's end, not before. */
        if (now >= w->until_ms)
            w->until_ms = 0;
    }
}

/* A step of b's end that failed (err, why): counted in b's failures
 * (into *failures), 0. -1, b released as a failed step is, when the
 * lease is gone or the batcher stops (tried again later); -1 too when
 * the count cannot be written (the database away: not counted, the lease
 * runs out). */
static int
step_failure(struct lines *ls, int err, const char *why, int *failures)
{
    struct rl_batcher *bt = ls->bt;
    char dberr[512];

    if (bt->lease_lost || batch_stopping(bt)) {
        batch_step_failed(bt, ls->b, err, why);
        return -1;
    }
    return rl_db_batch_failure(bt->db, ls->b, bt->cfg->worker_id, why,
                               batch_lease_ms(bt), failures, dberr,
                               sizeof(dberr)) != 0
               ? -1
               : 0;
}

/* A read that failed (err, errstr): whether b is given up now, why into
 * gave_up. A file the provider refuses, or a line over the limit, is
 * refused again: given up at once, never downloaded again. Otherwise
 * given up after BATCH_FAILURES_MAX such reads, a line the ledger keeps
 * refusing among them (the database away, the failure is not counted);
 * -1 when the read is to be tried again later (or the lease is gone). */
static int
read_failed(struct lines *ls, int err, const char *errstr, char *gave_up,
            size_t gave_up_size)
{
    struct rl_batcher *bt = ls->bt;
    char why[600];
    int failures = 0;

    snprintf(why, sizeof(why), "reading the results: %s", errstr);
    if (step_failure(ls, err, why, &failures) != 0)
        return -1;
    if ((err != RL_ERR_INVALID || ls->db_failed) &&
        failures < BATCH_FAILURES_MAX) {
        batch_step_failed(bt, ls->b, err, why);
        return -1;
    }
    snprintf(gave_up, gave_up_size, "given up: %s%s", why,
             err == RL_ERR_INVALID && !ls->db_failed
                 ? " (refused again if read again)"
                 : " (failed too often)");
    batch_log(ls->b, RL_LOG_WARN, "", gave_up);
    return 0;
}

/* A run no line named whose policy could not be written, the batch's
 * last try: sent live (its lease handed back, due at once, its line
 * go_live), which needs neither its attempt's outcome nor a dead letter.
 * Returns 0, RL_ERR_STALE, or the error of the fence. */
static int
send_live(struct lines *ls, const struct rl_batch_run *r, const char *why)
{
    const struct rl_lease lease = {
        .run_id = r->run_id, .worker = RL_BATCH_OWNER, .epoch = r->lease_epoch};
    enum rl_batch_run_state state = RL_BATCH_RUN_GO_LIVE;
    char errstr[512];
    int err = fence_begin(ls);

    if (err)
        return err;
    err = rl_db_release_after_batch(ls->bt->db, &lease, "batch_unwritable", why,
                                    errstr, sizeof(errstr));
    if (err && err != RL_ERR_DB) {
        /* Cancelled (or finished) meanwhile: nothing to send. */
        state = RL_BATCH_RUN_IGNORED;
        err = 0;
    }
    if (!err)
        err =
            rl_db_batch_run_state(ls->bt->db, ls->b->batch_id, r->run_id,
                                  r->attempt_no, state, errstr, sizeof(errstr));
    err = fence_end(ls, err);
    if (!err && state == RL_BATCH_RUN_GO_LIVE)
        ls->failed++;
    else if (!err)
        ls->ignored++;
    return err;
}

/* The runs of b no line named, each by its run's policy (line_failed),
 * 64 read at a time. Stops at the first run whose policy cannot be
 * written, unless last: then that run is sent live (send_live), and one
 * that cannot be is left running under the batch, logged, and passed
 * over. Returns 0 or the error, with errstr set. */
static int
settle_unanswered(struct lines *ls, const struct rl_model_batch_state *st,
                  const char *gave_up, int last, char *errstr,
                  size_t errstr_size)
{
    struct rl_batch_run left[64];
    char why[800];
    size_t n, skip = 0;
    int err = 0;

    if (*gave_up)
        snprintf(why, sizeof(why), "the batch was %s", gave_up);
    else
        snprintf(why, sizeof(why),
                 "the batch ended %s with no line for this run", st->status);
    while (!err) {
        err = rl_db_batch_unanswered(ls->bt->db, ls->b->batch_id, skip, left,
                                     64, &n, errstr, errstr_size);
        if (err || n == 0)
            break;
        for (size_t i = 0; i < n; i++) {
            if (!err) {
                err = fence_begin(ls);
                /* A batch given up unread may have run at the provider
                 * all the same (its polls or its files failed, not its
                 * lines): the attempt may have generated, as a live call
                 * that got no answer. A batch that ended without a line
                 * for the run did not answer it. A fault test's write
                 * that the ledger keeps refusing comes first. */
                if (!err)
                    err = fence_end(
                        ls,
                        rl_failpoint("batch_unanswered_write")
                            ? RL_ERR_DB
                            : line_failed(ls, &left[i],
                                          *gave_up ? RL_OUTCOME_AMBIGUOUS
                                                   : RL_OUTCOME_TRANSIENT,
                                          0,
                                          *gave_up ? "batch_unreadable"
                                          : strcmp(st->status, "expired") == 0
                                              ? "batch_expired"
                                          : strcmp(st->status, "refused") == 0
                                              ? "batch_refused"
                                              : "batch_failed",
                                          0, why));
                if (err && err != RL_ERR_STALE && last) {
                    err = send_live(ls, &left[i], why);
                    if (err && err != RL_ERR_STALE) {
                        rl_log_error(NULL,
                                     "batch %s: run %s could not be sent "
                                     "live either and stays running under "
                                     "the batch",
                                     ls->b->batch_id, left[i].run_id);
                        skip++;
                        err = 0;
                    }
                }
                if (err)
                    rl_set_err(errstr, errstr_size,
                               "could not write the policy of run %s",
                               left[i].run_id);
            }
            free(left[i].request_json);
        }
    }
    return err;
}

/* A pass over the runs no line named that failed (err, errstr): counted
 * in b's failures as a failed read is, and b released to be tried again
 * (-1), logged at its first failure only; at BATCH_FAILURES_MAX, 0: the
 * pass is tried once more, its last (settle_unanswered), and b is given
 * up, why into gave_up. -1 too when the lease is gone or the batcher
 * stops (tried again later), and when the database is away (not
 * counted; the lease runs out). */
static int
unanswered_failed(struct lines *ls, int err, const char *errstr, char *gave_up,
                  size_t gave_up_size)
{
    struct rl_batcher *bt = ls->bt;
    char why[600];
    int failures = 0;

    snprintf(why, sizeof(why), "settling the runs no line named: %s", errstr);
    if (err == RL_ERR_STALE || step_failure(ls, err, why, &failures) != 0)
        return -1;
    if (failures < BATCH_FAILURES_MAX) {
        if (strcmp(bt->unsettled, ls->b->batch_id) != 0) {
            char line[700];

            snprintf(line, sizeof(line),
                     "%s; tried again every 2 s, given up after %d failures",
                     why, BATCH_FAILURES_MAX);
            batch_log(ls->b, RL_LOG_WARN, "", line);
            snprintf(bt->unsettled, sizeof(bt->unsettled), "%s",
                     ls->b->batch_id);
        }
        batch_step_again(bt, ls->b, why);
        return -1;
    }
    bt->unsettled[0] = '\0';
    if (!*gave_up)
        snprintf(gave_up, gave_up_size, "given up: %s (failed too often)", why);
    batch_log(ls->b, RL_LOG_WARN, "",
              "given up: settling the runs no line named failed too "
              "often: the runs whose policy still cannot be written are "
              "sent live");
    return 0;
}

/* The end of b: its files read (none when gave_up, the reason it is
 * given up, is set), the runs no line named retried per their policy,
 * b closed. */
static void
finish(struct rl_batcher *bt, struct rl_batch *b,
       const struct rl_model_batch_state *st, const char *why_given_up)
{
    struct lines ls = {.bt = bt, .b = b};
    char errstr[512], gave_up[700] = "", why[sizeof(gave_up) + 64];
    char unsettled[sizeof(gave_up)] = "";
    int err = 0;

    if (why_given_up)
        snprintf(gave_up, sizeof(gave_up), "given up: %s", why_given_up);
    ls.pending = calloc(STORE_LINES_MAX, sizeof(*ls.pending));
    if (!ls.pending) {
        batch_step_failed(bt, b, RL_ERR_NOMEM,
                          "reading the results: out of memory");
        return;
    }
    batch_cancel_strays(bt, b);
    if (!*gave_up && *st->output_file_id)
        err = read_file(&ls, st->output_file_id, errstr, sizeof(errstr));
    if (!*gave_up && !err && *st->error_file_id)
        err = read_file(&ls, st->error_file_id, errstr, sizeof(errstr));
    free(ls.pending);
    ls.pending = NULL;
    if (err) {
        if (read_failed(&ls, err, errstr, gave_up, sizeof(gave_up)) != 0)
            return;
        err = 0;
    }
    err = settle_unanswered(&ls, st, gave_up, 0, errstr, sizeof(errstr));
    if (err) {
        if (unanswered_failed(&ls, err, errstr, unsettled, sizeof(unsettled)) !=
            0)
            return;
        err = settle_unanswered(&ls, st, gave_up, 1, errstr, sizeof(errstr));
        if (err) {
            snprintf(why, sizeof(why), "settling the runs no line named: %s",
                     errstr);
            batch_step_failed(bt, b, err, why);
            return;
        }
        if (!*gave_up)
            snprintf(gave_up, sizeof(gave_up), "%s", unsettled);
    }
    if (strcmp(bt->unsettled, b->batch_id) == 0)
        bt->unsettled[0] = '\0';
    err = rl_db_batch_finish(
        bt->db, b, bt->cfg->worker_id,
        *gave_up                               ? RL_BATCH_FAILED
        : strcmp(st->status, "completed") == 0 ? RL_BATCH_COMPLETED
        : strcmp(st->status, "expired") == 0   ? RL_BATCH_EXPIRED
        : strcmp(st->status, "cancelled") == 0 ? RL_BATCH_CANCELLED
                                               : RL_BATCH_FAILED,
        st->status, st->output_file_id, st->error_file_id, ls.unmatched,
        gave_up, errstr, sizeof(errstr));
    if (!err)
        watch(bt, b);
    snprintf(why, sizeof(why),
             "%s: %d answers stored, %d lines failed, %d "
             "ignored; at most %zu bytes of answers held",
             st->status, ls.ok, ls.failed, ls.ignored, ls.held_max);
    batch_log(b, RL_LOG_INFO, "", why);
}

void
batch_finish(struct rl_batcher *bt, struct rl_batch *b,
             const struct rl_model_batch_state *st)
{
    finish(bt, b, st, NULL);
}

void
batch_give_up(struct rl_batcher *bt, struct rl_batch *b, const char *why)
{
    struct rl_model_batch_state st;
    char errstr[512];

    memset(&st, 0, sizeof(st));
    snprintf(st.status, sizeof(st.status), "unknown");
    batch_log(b, RL_LOG_WARN, "given up: its runs follow their policy: ", why);
    /* Nobody reads its lines: it may as well stop costing. */
    if (*b->provider_batch_id &&
        rl_model_batches_cancel(bt->mb, b->provider_batch_id, errstr,
                                sizeof(errstr)) != RL_OK)
        batch_log(b, RL_LOG_WARN, "cancel: ", errstr);
    finish(bt, b, &st, why);
}

void
batch_refused(struct rl_batcher *bt, struct rl_batch *b, const char *why)
{
    struct rl_model_batch_state st;

    memset(&st, 0, sizeof(st));
    snprintf(st.status, sizeof(st.status), "refused");
    batch_log(b, RL_LOG_WARN,
              "refused by the provider: its runs follow their "
              "policy: ",
              why);
    batch_finish(bt, b, &st);
}
