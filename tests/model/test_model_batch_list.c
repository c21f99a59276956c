/* The orphan sweep's listing of the provider's batches
 * (rl_model_batches_list_live), against a private stub whose list pages
 * hold two batches (STUB_LIST_PAGE_MAX=2) and whose batches run 60 s:
 * - a create names the installation and the database cluster in the
 *   batch's metadata, and the listing finds every batch not ended of that
 *   installation and cluster, across pages, with its local id; never one
 *   of another installation, nor one of the same installation and
 *   another cluster (a copy of the ledger restored from a pg_dump), nor
 *   one naming no installation or no cluster (a release's that sent
 *   none), nor one cancelled;
 * - the pages end at the first that holds only batches created before
 *   the horizon: with the horizon ahead of every batch, only the first
 *   page is read. Needs python3 only. */

#include "model_stub.h"
#include "rl/err.h"
#include "rl/model_batch.h"
#include "rltest.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A batch of file_id created with local_id, installation and cluster
 * (NULL: none); its provider id into id. */
static void
create(struct rl_model_batches *mb, const char *file_id, const char *local_id,
       const char *installation, const char *cluster, char *id, size_t id_size)
{
    char errstr[256];

    RL_REQUIRE(rl_model_batches_create(mb, file_id, "/v1/chat/completions",
                                       "24h", local_id, installation, cluster,
                                       NULL, id, id_size, errstr,
                                       sizeof(errstr)) == 0);
}

/* Whether refs[0..n) holds provider batch id under local_id. */
static int
listed(const struct rl_model_batch_ref *refs, size_t n, const char *id,
       const char *local_id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(refs[i].id, id) == 0 &&
            strcmp(refs[i].local_id, local_id) == 0)
            return 1;
    return 0;
}

int
main(void)
{
    struct rl_model_config cfg;
    struct rl_model_batches *mb;
    struct rl_model_batch_ref *refs = NULL;
    char base_url[128], errstr[256], file[128];
    char a1[128], a2[128], a3[128], other[128], none[128], early[128];
    char copy[128];
    size_t n = 0;
    const char *const stub_env[] = {"STUB_LIST_PAGE_MAX=2",
                                    "STUB_BATCH_SECONDS=60", NULL};
    pid_t stub;
    int port = 0;
    FILE *f;

    stub = model_stub_start(NULL, stub_env, &port);
    snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d/v1", port);
    memset(&cfg, 0, sizeof(cfg));
    cfg.base_url = base_url;
    cfg.timeout_ms = 10000;
    mb = rl_model_batches_new(&cfg, errstr, sizeof(errstr));
    RL_REQUIRE(mb);
    f = tmpfile();
    RL_REQUIRE(f);
    fputs("{\"custom_id\":\"r:1\",\"method\":\"POST\",\"url\":"
          "\"/v1/chat/completions\",\"body\":{\"model\":\"m\",\"messages\":"
          "[{\"role\":\"user\",\"content\":\"hi\"}]}}\n",
          f);
    rewind(f);
    RL_REQUIRE(rl_model_batches_upload(mb, f, "list.jsonl", file, sizeof(file),
                                       errstr, sizeof(errstr)) == 0);
    fclose(f);

    /* Oldest first: the stub lists newest first, two a page. */
    create(mb, file, "rlb_a1", "inst-a", "1001", a1, sizeof(a1));
    create(mb, file, "rlb_a2", "inst-a", "1001", a2, sizeof(a2));
    create(mb, file, "rlb_a3", "inst-a", "1001", a3, sizeof(a3));
    create(mb, file, "rlb_a1", "inst-b", "1001", other, sizeof(other));
    create(mb, file, "rlb_a2", NULL, NULL, none, sizeof(none));
    /* A build's that named the installation only. */
    create(mb, file, "rlb_a4", "inst-a", NULL, early, sizeof(early));
    /* A copy's, restored from a pg_dump into another cluster. */
    create(mb, file, "rlb_a5", "inst-a", "2002", copy, sizeof(copy));
    RL_REQUIRE(rl_model_batches_cancel(mb, a3, errstr, sizeof(errstr)) == 0);

    RL_CHECK_INTEQ(rl_model_batches_list_live(mb, "inst-a", "1001", 0, &refs,
                                              &n, errstr, sizeof(errstr)),
                   RL_OK);
    RL_CHECK_INTEQ((long)n, 2);
    RL_CHECK(listed(refs, n, a1, "rlb_a1"));
    RL_CHECK(listed(refs, n, a2, "rlb_a2"));
    free(refs);

    RL_CHECK_INTEQ(rl_model_batches_list_live(mb, "inst-b", "1001", 0, &refs,
                                              &n, errstr, sizeof(errstr)),
                   RL_OK);
    RL_CHECK_INTEQ((long)n, 1);
    RL_CHECK(listed(refs, n, other, "rlb_a1"));
    free(refs);

    RL_CHECK_INTEQ(rl_model_batches_list_live(mb, "inst-a", "2002", 0, &refs,
                                              &n, errstr, sizeof(errstr)),
                   RL_OK);
    RL_CHECK_INTEQ((long)n, 1);
    RL_CHECK(listed(refs, n, copy, "rlb_a5"));
    free(refs);

    /* Every batch older than the horizon: the first page (copy's and
     * early's) is the last read, so the others are not reached. */
    RL_CHECK_INTEQ(rl_model_batches_list_live(
                       mb, "inst-a", "1001", (long long)time(NULL) + 3600,
                       &refs, &n, errstr, sizeof(errstr)),
                   RL_OK);
    RL_CHECK_INTEQ((long)n, 0);
    RL_CHECK(refs == NULL);
    RL_CHECK_INTEQ(rl_model_batches_list_live(
                       mb, "inst-a", "2002", (long long)time(NULL) + 3600,
                       &refs, &n, errstr, sizeof(errstr)),
                   RL_OK);
    RL_CHECK_INTEQ((long)n, 1);
    free(refs);

    RL_CHECK_INTEQ(rl_model_batches_list_live(mb, "", "1001", 0, &refs, &n,
                                              errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    RL_CHECK_INTEQ(rl_model_batches_list_live(mb, "inst-a", "", 0, &refs, &n,
                                              errstr, sizeof(errstr)),
                   RL_ERR_INVALID);

    rl_model_batches_destroy(mb);
    model_stub_stop(stub);
    RL_TEST_END();
}
