/* The hand-off, on the ledger thread: a run whose dispatch the ledger
 * recorded, of a job (and tenant) in batch mode, passes to the batcher
 * instead of a live call. Its request line is built as the live call's
 * body would be, and in one statement (rl_batch_park) its lease passes
 * from the worker to RL_BATCH_OWNER and the line waits in batch_runs for
 * an intent. What the ledger does with each run then is its callback's:
 * this file never calls the ledger. @locality ledger thread */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_int.h"
#include "rl/approval.h"
#include "rl/clock.h"
#include "rl/db_batch_handoff.h"
#include "rl/db_dispatch.h"
#include "rl/model.h"
#include "rl/outcome.h"

/* How often the ledger rereads which jobs are in batch mode. */
#define MODES_REFRESH_MS 2000

/* Whether item's job (and tenant) is in batch mode, as last read. */
static int
in_batch_mode(struct rl_batcher *bt, struct rl_db *db,
              const struct rl_item *item)
{
    size_t jl, tl;
    const char *p;

    if (!item->job || !item->tenant)
        return 0;
    if (db && rl_clock_ms() >= bt->modes_due) {
        char errstr[512], *text = NULL;

        if (rl_db_batch_modes(db, &text, errstr, sizeof(errstr)) == 0) {
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
line_body(const struct rl_config *cfg, const struct rl_item *item,
          const char **endpoint, char *model, size_t model_size)
{
    char errstr[512];
    char *chat = rl_model_build_body(item->request_json, item->raw_input,
                                     errstr, sizeof(errstr));
    const struct rl_model_body_opts opts = {
        .api = (enum rl_model_api)cfg->model_api,
        .api_by_model = cfg->model_api_by_model,
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
rl_batcher_hand_off(struct rl_batcher *bt, struct rl_db *db,
                    struct rl_item **items, size_t n,
                    void (*handed)(void *arg, struct rl_item *item,
                                   enum rl_batch_handoff what,
                                   const char *errstr),
                    void *arg)
{
    struct rl_batch_park_req reqs[RL_PIPELINE_BATCH_MAX];
    enum rl_batch_park_status status[RL_PIPELINE_BATCH_MAX];
    struct rl_item *mine[RL_PIPELINE_BATCH_MAX];
    char *bodies[RL_PIPELINE_BATCH_MAX];
    char models[RL_PIPELINE_BATCH_MAX][256];
    char errstr[512];
    size_t live = 0, m = 0;
    int err;

    if (!bt)
        return n;
    for (size_t i = 0; i < n; i++) {
        const char *endpoint = NULL;
        char *body = NULL;

        /* Approval-required runs propose their answer: they stay live. */
        if (m < RL_PIPELINE_BATCH_MAX && in_batch_mode(bt, db, items[i]) &&
            rl_approval_required(items[i]->request_json) == 0)
            body = line_body(bt->cfg, items[i], &endpoint, models[m],
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
    err = rl_db_batch_park(db, bt->cfg->worker_id, reqs, m, status, errstr,
                           sizeof(errstr));
    for (size_t i = 0; i < m; i++) {
        struct rl_item *item = mine[i];

        free(bodies[i]);
        if (err) {
            char dberr[512];

            /* Recorded, never sent: say so, or the next claimer would
             * count it as an ambiguous attempt. */
            rl_db_record_outcome(db, item->run_id,
                                 &(struct rl_attempt_outcome){
                                     .outcome = RL_OUTCOME_NOT_SENT,
                                     .call = {.attempt_no = item->attempt_no},
                                     .error = "could not hand to the batcher"},
                                 dberr, sizeof(dberr));
            handed(arg, item, RL_BATCH_HANDOFF_FAILED, errstr);
        } else if (status[i] == RL_BATCH_PARKED) {
            handed(arg, item, RL_BATCH_HANDOFF_PARKED, NULL);
        } else if (status[i] == RL_BATCH_LOST) {
            handed(arg, item, RL_BATCH_HANDOFF_LOST, NULL);
        } else {
            items[live++] = item;
        }
    }
    return live;
}
