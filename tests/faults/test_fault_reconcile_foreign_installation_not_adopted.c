/* A stored completion of another ledger is never adopted.
 *
 * Run IDs are deterministic: a staging ledger or a second installation
 * sending the same schedule to the same provider project stores its calls
 * under the same run ID and attempt number. Before the run's worker
 * starts, the endpoint's record (the stub's stored completions) is given
 * three records naming the run and attempt 1: one of another installation
 * (its fingerprint and model this run's), one of this installation with
 * another request fingerprint, one of this installation and fingerprint
 * answered by another model. The run's attempt 1 is dropped before the
 * upstream sees it ([[fault:drop times=1]]: ambiguous, no generation), so
 * the only records of attempt 1 are those three: none is adopted, the
 * lookup comes to nothing, retry_once sends attempt 2, which answers. The
 * run completes with its own answer (one generation of its own, two
 * attempts, nothing reconciled) and /metrics counts the three foreign
 * records and no record found. */
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#include "faults.h"
#include "ops.h"
#include "rl/event.h"
#include "rl/runid.h"
#include "rltest.h"

static size_t
discard(char *ptr, size_t size, size_t nmemb, void *opaque)
{
    (void)ptr;
    (void)opaque;
    return size * nmemb;
}

/* Stores a chat completion in the stub's record with this metadata, as
 * another ledger's call would (no Idempotency-Key: not the run's). */
static void
plant(struct e2e *t, const char *model, const char *run_id,
      const char *installation, const char *fingerprint)
{
    char url[512], body[1024];
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: "
                                                   "application/json");
    CURL *curl = curl_easy_init();
    long status = 0;

    snprintf(url, sizeof(url), "%s/chat/completions", t->model_base_url);
    snprintf(body, sizeof(body),
             "{\"model\":\"%s\",\"store\":true,\"messages\":[{\"role\":"
             "\"user\",\"content\":\"another ledger's request\"}],"
             "\"metadata\":{\"runledger_run_id\":\"%s\","
             "\"runledger_attempt\":\"1\",\"runledger_installation\":\"%s\","
             "\"runledger_fingerprint\":\"%s\"}}",
             model, run_id, installation, fingerprint);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    RL_REQUIRE(curl_easy_perform(curl) == CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    RL_REQUIRE(status == 200);
    curl_easy_cleanup(curl);
    curl_slist_free_all(h);
}

int
main(void)
{
    struct e2e t;
    char run[RL_HEX_SIZE], job[160], buf[2048], reason[64];
    char errstr[256], installation[128];
    const char *const stub_env[] = {"STUB_STORE_LAG_MS=0", NULL};
    const char *directive = "[[fault:drop times=1]]";
    struct rl_event_limits limits;
    struct rl_event *ev;
    int port;

    e2e_setup(&t, "frfor", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    /* The event as the worker will read it: its run ID and fingerprint
     * are what any ledger computes from it. */
    e2e_event(buf, sizeof(buf), job, "tenant-a", 0, directive, run);
    rl_event_limits_default(&limits);
    ev = rl_event_parse(buf, strlen(buf), &limits, reason, sizeof(reason),
                        errstr, sizeof(errstr));
    RL_REQUIRE(ev != NULL);
    RL_REQUIRE(strcmp(ev->run_id, run) == 0);
    snprintf(installation, sizeof(installation), "%s",
             e2e_text(&t, "SELECT installation_id FROM installation"));
    RL_REQUIRE(installation[0] != '\0');

    plant(&t, "stub-1", run, "staging-ledger", ev->fingerprint);
    plant(&t, "stub-1", run, installation,
          "0000000000000000000000000000000000000000000000000000000000000000");
    plant(&t, "another-model", run, installation, ev->fingerprint);
    rl_event_destroy(ev);
    RL_REQUIRE(e2e_stub_stat(&t, "stored_completions") == 3);

    e2e_produce_event(&t, job, "tenant-a", 0, directive, run);
    e2e_flush(&t);
    port = fx_reconcile_settled(&t, 1500);

    fx_check_completed_once(&t, run);
    RL_CHECK_INTEQ(fx_attempts(&t, run, "*"), 2);
    RL_CHECK_INTEQ(fx_attempts(&t, run, "ambiguous"), 1);
    RL_CHECK_INTEQ(fx_attempts(&t, run, "ok"), 1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts WHERE run_id='%s' "
                            "AND reconciled_at IS NOT NULL",
                            run),
                   0);
    /* The output is the run's own generation, not a planted record (the
     * stub numbered those 1 to 3). */
    RL_CHECK_INTEQ(e2e_stub_generations(&t, run), 1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id='%s' AND "
                            "output->>'upstream_request_id' = 'chatcmpl-4'",
                            run),
                   1);
    RL_CHECK(ops_scrape(port, "runledger_reconcile_foreign_records_total") ==
             3);
    RL_CHECK(ops_scrape(port, "runledger_reconciled_attempts_total{result="
                              "\"found\"}") == 0);
    RL_CHECK(ops_scrape(port, "runledger_reconciled_attempts_total{result="
                              "\"not_found\"}") == 1);
    e2e_teardown(&t);
    RL_TEST_END();
}
