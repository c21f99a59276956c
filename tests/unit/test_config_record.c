/* The settings of the endpoint's record and API (rl_config_load): their
 * defaults, and the values refused at start with a reason naming the
 * setting: an unknown API, a malformed per-model map, and stored
 * completions with the dedupe policy (a retry's body names another
 * attempt, which a deduplicating endpoint refuses). */
#include <stdlib.h>
#include <string.h>

#include "rl/config.h"
#include "rl/model.h"
#include "rltest.h"

static struct rl_config *
load(char *errstr, size_t size)
{
    errstr[0] = '\0';
    return rl_config_load(errstr, size);
}

static void
clear_env(void)
{
    unsetenv("RUNLEDGER_MODEL_STORED_COMPLETIONS");
    unsetenv("RUNLEDGER_RECONCILE_SETTLE_MS");
    unsetenv("RUNLEDGER_RECONCILE_LOOKUP_TIMEOUT_MS");
    unsetenv("RUNLEDGER_MODEL_API");
    unsetenv("RUNLEDGER_MODEL_API_BY_MODEL");
    unsetenv("RUNLEDGER_AMBIGUOUS_POLICY");
    unsetenv("RUNLEDGER_CONFIG_FILE");
}

static void
test_defaults(void)
{
    char errstr[512];
    struct rl_config *cfg;

    clear_env();
    cfg = load(errstr, sizeof(errstr));
    RL_REQUIRE(cfg);
    RL_CHECK_INTEQ(cfg->model_stored_completions, 0);
    RL_CHECK_INTEQ(cfg->reconcile_settle_ms, 30000);
    RL_CHECK_INTEQ(cfg->reconcile_lookup_timeout_ms, 10000);
    RL_CHECK_INTEQ(cfg->model_api, RL_MODEL_API_CHAT);
    RL_CHECK(cfg->model_api_by_model == NULL);
    rl_config_destroy(cfg);
}

static void
test_values_taken(void)
{
    char errstr[512];
    struct rl_config *cfg;

    clear_env();
    setenv("RUNLEDGER_MODEL_STORED_COMPLETIONS", "true", 1);
    setenv("RUNLEDGER_RECONCILE_SETTLE_MS", "5000", 1);
    setenv("RUNLEDGER_MODEL_API", "responses", 1);
    setenv("RUNLEDGER_MODEL_API_BY_MODEL", "gpt-4o=chat", 1);
    cfg = load(errstr, sizeof(errstr));
    RL_REQUIRE(cfg);
    RL_CHECK_INTEQ(cfg->model_stored_completions, 1);
    RL_CHECK_INTEQ(cfg->reconcile_settle_ms, 5000);
    RL_CHECK_INTEQ(cfg->model_api, RL_MODEL_API_RESPONSES);
    RL_CHECK_STREQ(cfg->model_api_by_model, "gpt-4o=chat");
    rl_config_destroy(cfg);
}

static void
test_refusals_name_the_setting(void)
{
    char errstr[512];

    clear_env();
    setenv("RUNLEDGER_MODEL_API", "batch", 1);
    RL_CHECK(load(errstr, sizeof(errstr)) == NULL);
    RL_CHECK(strstr(errstr, "RUNLEDGER_MODEL_API must be chat or responses"));

    clear_env();
    setenv("RUNLEDGER_MODEL_API_BY_MODEL", "gpt-5", 1);
    RL_CHECK(load(errstr, sizeof(errstr)) == NULL);
    RL_CHECK(strstr(errstr, "RUNLEDGER_MODEL_API_BY_MODEL"));

    clear_env();
    setenv("RUNLEDGER_MODEL_STORED_COMPLETIONS", "true", 1);
    setenv("RUNLEDGER_AMBIGUOUS_POLICY", "dedupe", 1);
    RL_CHECK(load(errstr, sizeof(errstr)) == NULL);
    RL_CHECK(strstr(errstr, "RUNLEDGER_MODEL_STORED_COMPLETIONS"));
    RL_CHECK(strstr(errstr, "dedupe"));

    clear_env();
    setenv("RUNLEDGER_RECONCILE_SETTLE_MS", "-1", 1);
    RL_CHECK(load(errstr, sizeof(errstr)) == NULL);
    RL_CHECK(strstr(errstr, "RUNLEDGER_RECONCILE_SETTLE_MS"));
    clear_env();
}

int
main(void)
{
    test_defaults();
    test_values_taken();
    test_refusals_name_the_setting();
    RL_TEST_END();
}
