#ifndef RL_BATCH_TEST_H
#define RL_BATCH_TEST_H

/* Shared by the batch-mode tests (tests/batch/): the job put in batch
 * mode through the CLI, the consumer started with fast batch settings. */

#include <cjson/cJSON.h>

#include "e2e.h"

/* `runledger batch set --job job` with the extra arguments (NULL-
 * terminated, e.g. "--window", "1s"); fails the test when it fails. */
void bt_batch_set(struct e2e *t, const char *job, ...);

/* Starts `runledger consume` with the fault tests' fast settings and
 * batches polled every 200 ms (the group's bound 600 polls a minute),
 * looked up over a 1 s settle period and leased for 5 s; up to 7 extra
 * NAME=value entries (NULL-terminated) win. */
int bt_spawn(struct e2e *t, ...);

/* A GET of the stub's own path (not under /v1: /stats, /admin/batches,
 * /admin/batch_fault) as JSON; NULL on error. cJSON_Delete it. */
cJSON *bt_stub_get(struct e2e *t, const char *path);

/* The test's stub's /stats, parsed (cJSON_Delete it); NULL on error. */
cJSON *bt_stub_stats(struct e2e *t);

/* A whole-stub figure of the test's stub's /stats, read whole (its
 * by_key map outgrows e2e_stub_stat's buffer); -1 on error. */
long bt_stub_stat(struct e2e *t, const char *name);

/* POST /admin/reset of the test's stub: its files and batches forgotten,
 * as after a key change the provider serves none of them. Returns 0 or
 * -1. */
int bt_stub_reset(struct e2e *t);

/* method (GET, POST, DELETE) on path of the test's stub ("/v1/batches",
 * "/admin/batch_fault"), with body (POST) when not NULL. Returns the HTTP
 * status, or -1 when the stub did not answer. */
long bt_stub_call(struct e2e *t, const char *method, const char *path,
                  const char *body);

/* POST /v1/files of the test's stub: jsonl (purpose "batch") named
 * filename, as another client of the provider would; its id into
 * file_id. Returns 0, or -1 when the stub did not take it. */
int bt_stub_upload(struct e2e *t, const char *filename, const char *jsonl,
                   char *file_id, size_t file_id_size);

/* POST /v1/batches of the test's stub: file_id's lines as a chat batch
 * whose metadata names local_id; its id into batch_id. Returns 0 or -1. */
int bt_stub_create_batch(struct e2e *t, const char *file_id,
                         const char *local_id, char *batch_id,
                         size_t batch_id_size);

/* As bt_stub_create_batch, with metadata (a JSON object's text) as the
 * batch's metadata. */
int bt_stub_create_batch_meta(struct e2e *t, const char *file_id,
                              const char *metadata, char *batch_id,
                              size_t batch_id_size);

/* GET /v1/files/file_id of the test's stub (its "bytes", "filename" ...),
 * parsed (cJSON_Delete it); NULL on error. */
cJSON *bt_stub_file(struct e2e *t, const char *file_id);

/* GET /v1/batches/batch_id of the test's stub (its "status" ...), parsed
 * (cJSON_Delete it); NULL on error. */
cJSON *bt_stub_batch(struct e2e *t, const char *batch_id);

/* The provider batches in the stub's list (GET /v1/batches) other than
 * adopted, into *others, and how many of them are cancelled; each one
 * not cancelled is printed. */
void bt_count_strays(struct e2e *t, const char *adopted, int *others,
                     int *cancelled);

/* Each of the n runs ids[] completed once (fx_check_completed_once),
 * its first attempt generated once at the stub. */
void bt_check_answered_once(struct e2e *t, char (*ids)[RL_HEX_SIZE], int n);

#endif /* RL_BATCH_TEST_H */
