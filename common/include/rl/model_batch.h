#ifndef RL_MODEL_BATCH_H
#define RL_MODEL_BATCH_H

/* The provider's batch API (OpenAI's /files and /batches, as Azure OpenAI
 * and the vLLM- and LiteLLM-based gateways serve it), for the batcher
 * (consumer/ledger/batch.c): synchronous calls on the calling thread, with
 * the model client's base URL, key, auth header, query and extra headers
 * (struct rl_model_config). Errors never hold the key nor a header's
 * value. One client per thread. Return codes: RL_OK; RL_ERR_INVALID when
 * the provider refused the request (a 4xx other than 408 and 429: the
 * same request is refused again; nothing was made); RL_ERR_HTTP when it
 * answered with another error (nothing was made); RL_ERR_IO when no
 * answer arrived (a create or upload may have been made anyway);
 * RL_ERR_NOTFOUND where said; RL_ERR_NOMEM. @locality one thread */

#include <stddef.h>
#include <stdio.h>

#include "rl/model.h"

/* The metadata key of a provider batch that names its intent's local id
 * (the batches row); RL_MODEL_META_INSTALLATION and RL_MODEL_META_CLUSTER
 * beside it name the ledger that made it and its database cluster. */
#define RL_MODEL_META_BATCH "runledger_batch"

struct rl_model_batches;

/* A client for cfg (copied). Returns it (rl_model_batches_destroy) or
 * NULL with errstr set. */
struct rl_model_batches *rl_model_batches_new(const struct rl_model_config *cfg,
                                              char *errstr, size_t errstr_size);

/* Frees mb (NULL accepted); the key's copy is wiped. */
void rl_model_batches_destroy(struct rl_model_batches *mb);

/* tick(arg) is called about once a second while any call of mb runs
 * (NULL: none); a call for which it returns nonzero ends at once with
 * RL_ERR_IO ("given up"): a create or upload so ended may have been made
 * anyway. The batcher renews its batch's lease there and stops a call
 * when the lease is gone or its worker stops. */
void rl_model_batches_set_tick(struct rl_model_batches *mb,
                               int (*tick)(void *arg), void *arg);

/* POST /files (multipart/form-data, purpose "batch") of the JSON lines
 * in jsonl (read from its current position to its end) named filename;
 * the provider's file id into file_id. */
int rl_model_batches_upload(struct rl_model_batches *mb, FILE *jsonl,
                            const char *filename, char *file_id,
                            size_t file_id_size, char *errstr,
                            size_t errstr_size);

/* The newest file of purpose "batch" named filename (GET /files, every
 * page) into file_id; RL_ERR_NOTFOUND when there is none. */
int rl_model_batches_find_file(struct rl_model_batches *mb,
                               const char *filename, char *file_id,
                               size_t file_id_size, char *errstr,
                               size_t errstr_size);

/* POST /batches: input_file_id, endpoint (e.g. "/v1/chat/completions"),
 * completion_window, and metadata {RL_MODEL_META_BATCH: local_id,
 * RL_MODEL_META_INSTALLATION: installation_id, RL_MODEL_META_CLUSTER:
 * cluster_id (each NULL or "": not sent)}; the provider's batch id into
 * batch_id. fault (NULL: none) is sent as X-Stub-Fault, for the fault
 * tests' stub. */
int rl_model_batches_create(struct rl_model_batches *mb,
                            const char *input_file_id, const char *endpoint,
                            const char *completion_window, const char *local_id,
                            const char *installation_id, const char *cluster_id,
                            const char *fault, char *batch_id,
                            size_t batch_id_size, char *errstr,
                            size_t errstr_size);

/* The batch whose metadata names local_id (GET /batches, every page) into
 * batch_id; RL_ERR_NOTFOUND when none does. */
int rl_model_batches_find(struct rl_model_batches *mb, const char *local_id,
                          char *batch_id, size_t batch_id_size, char *errstr,
                          size_t errstr_size);

/* Cancels every batch whose metadata names local_id other than keep_id
 * (GET /batches, every page; POST /batches/{id}/cancel for those not
 * ended yet): a create whose worker lost the batch's lease made them, and
 * nobody reads their lines. The number cancelled into *cancelled. */
int rl_model_batches_cancel_strays(struct rl_model_batches *mb,
                                   const char *local_id, const char *keep_id,
                                   int *cancelled, char *errstr,
                                   size_t errstr_size);

/* A provider batch as the orphan sweep lists it. */
struct rl_model_batch_ref {
    char id[128];      /* the provider's batch id */
    char local_id[64]; /* its metadata's RL_MODEL_META_BATCH */
};

/* The batches not ended yet (validating, in_progress, finalizing) whose
 * metadata names installation_id as RL_MODEL_META_INSTALLATION,
 * cluster_id as RL_MODEL_META_CLUSTER and a local id (GET /batches, page
 * by page), into *refs (malloc'd, the caller frees it; NULL when *n is
 * 0), newest first. The provider lists newest first: the pages end at
 * the first whose every batch was created before created_after (Unix
 * seconds; 0: every page is read). A batch naming no installation or no
 * cluster (created by a release that sent none), or another of either, is
 * never listed. Returns 0, RL_ERR_INVALID (installation_id or cluster_id
 * NULL or "") or the request's error. */
int rl_model_batches_list_live(struct rl_model_batches *mb,
                               const char *installation_id,
                               const char *cluster_id, long long created_after,
                               struct rl_model_batch_ref **refs, size_t *n,
                               char *errstr, size_t errstr_size);

/* What GET /batches/{id} says. */
struct rl_model_batch_state {
    char status[32];          /* validating, in_progress, finalizing, completed,
                                 failed, expired, cancelling, cancelled */
    char output_file_id[128]; /* "" when none */
    char error_file_id[128];  /* "" when none */
};

/* GET /batches/{batch_id} into *st. */
int rl_model_batches_get(struct rl_model_batches *mb, const char *batch_id,
                         struct rl_model_batch_state *st, char *errstr,
                         size_t errstr_size);

/* POST /batches/{batch_id}/cancel. */
int rl_model_batches_cancel(struct rl_model_batches *mb, const char *batch_id,
                            char *errstr, size_t errstr_size);

/* GET /files/{file_id}/content, line by line as it arrives: on_line gets
 * each line (NUL-terminated, without its newline; borrowed for the call)
 * and returns 0 to go on, anything else to stop (returned as RL_ERR_IO
 * with errstr "stopped"). At most max_line bytes are held (a longer line
 * ends the read with RL_ERR_INVALID, as does a file the provider refuses
 * to serve: both are refused again), whatever the file's size. */
int rl_model_batches_read(struct rl_model_batches *mb, const char *file_id,
                          size_t max_line,
                          int (*on_line)(char *line, size_t len, void *arg),
                          void *arg, char *errstr, size_t errstr_size);

/* Reads one line's answer (the JSON text of its response "body", as a
 * live call of api would have got it) into call as a live call's result:
 * outcome RL_MODEL_OK with text or tool calls, or RL_MODEL_INVALID_OUTPUT;
 * usage, model and id either way. Release with rl_model_call_clear(). */
void rl_model_batches_answer(const struct rl_model_batches *mb,
                             const char *body, size_t len,
                             enum rl_model_api api, struct rl_model_call *call);

/* Reads one line's error answer (its response "status_code", not 2xx,
 * and the JSON text of its "body", NULL when none) into call as a live
 * call that got that reply: outcome RL_MODEL_TRANSIENT (408, 429, 5xx)
 * or RL_MODEL_PERMANENT, http_status, and the error a live call would
 * carry, redacted. Release with rl_model_call_clear(). */
void rl_model_batches_line_error(const struct rl_model_batches *mb, long status,
                                 const char *body, size_t len,
                                 struct rl_model_call *call);

#endif /* RL_MODEL_BATCH_H */
