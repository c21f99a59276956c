/* Unit tests of the body one attempt sends (rl_model_body_prepare): the
 * record's store and metadata, the Responses API's shape for the models
 * configured to speak it, and the API map's checks. No service. */

#include "rl/err.h"
#include "rl/model.h"
#include "rltest.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static const char *const CHAT =
    "{\"model\":\"gpt-x\",\"temperature\":0,\"max_tokens\":64,"
    "\"metadata\":{\"team\":\"a\"},\"stream\":false,"
    "\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"},"
    "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/i.png\"}}]},"
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"yo\"}]}"
    "],"
    "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{"
    "\"name\":\"s\",\"strict\":true,\"schema\":{\"type\":\"object\"}}},"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"lookup\","
    "\"parameters\":{\"type\":\"object\"}}}],"
    "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"lookup\"}}"
    "}";

static cJSON *
prepare(const struct rl_model_body_opts *opts, enum rl_model_api *api)
{
    char errstr[256] = "";
    char *body = rl_model_body_prepare(CHAT, opts, api, errstr, sizeof(errstr));
    cJSON *root;

    if (!body)
        fprintf(stderr, "prepare: %s\n", errstr);
    RL_REQUIRE(body);
    root = cJSON_Parse(body);
    free(body);
    RL_REQUIRE(root);
    return root;
}

static const char *
str_at(const cJSON *obj, const char *a, const char *b)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, a);

    if (b)
        item = cJSON_GetObjectItemCaseSensitive(item, b);
    return cJSON_IsString(item) ? item->valuestring : "(none)";
}

static void
test_store_adds_metadata_and_keeps_the_requests_own(void)
{
    struct rl_model_body_opts opts = {.api = RL_MODEL_API_CHAT,
                                      .store = 1,
                                      .run_id = "r1",
                                      .attempt_no = 3,
                                      .installation_id = "inst-1",
                                      .fingerprint = "fp-1"};
    enum rl_model_api api = RL_MODEL_API_RESPONSES;
    cJSON *body = prepare(&opts, &api);

    RL_CHECK_INTEQ(api, RL_MODEL_API_CHAT);
    RL_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "store")));
    RL_CHECK_STREQ(str_at(body, "metadata", RL_MODEL_META_RUN_ID), "r1");
    RL_CHECK_STREQ(str_at(body, "metadata", RL_MODEL_META_ATTEMPT), "3");
    /* What tells this ledger's record from another's with the same run
     * ID: its installation, the run's request and model. */
    RL_CHECK_STREQ(str_at(body, "metadata", RL_MODEL_META_INSTALLATION),
                   "inst-1");
    RL_CHECK_STREQ(str_at(body, "metadata", RL_MODEL_META_FINGERPRINT), "fp-1");
    RL_CHECK_STREQ(str_at(body, "metadata", RL_MODEL_META_MODEL), "gpt-x");
    RL_CHECK_STREQ(str_at(body, "metadata", "team"), "a");
    /* The chat shape is untouched. */
    RL_CHECK(cJSON_HasObjectItem(body, "messages"));
    RL_CHECK(cJSON_HasObjectItem(body, "max_tokens"));
    cJSON_Delete(body);
}

static void
test_without_store_the_chat_body_passes_unchanged(void)
{
    struct rl_model_body_opts opts = {.api = RL_MODEL_API_CHAT};
    enum rl_model_api api;
    cJSON *body = prepare(&opts, &api), *want = cJSON_Parse(CHAT);

    RL_CHECK(cJSON_Compare(body, want, 1));
    RL_CHECK(!cJSON_HasObjectItem(body, "store"));
    cJSON_Delete(body);
    cJSON_Delete(want);
}

static void
test_model_named_in_the_map_speaks_responses(void)
{
    struct rl_model_body_opts opts = {.api = RL_MODEL_API_CHAT,
                                      .api_by_model =
                                          "other=chat, gpt-x = responses",
                                      .store = 1,
                                      .run_id = "r2",
                                      .attempt_no = 1};
    enum rl_model_api api = RL_MODEL_API_CHAT;
    cJSON *body = prepare(&opts, &api);
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(body, "input");
    const cJSON *user = cJSON_GetArrayItem(input, 1);
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(user, "content");
    const cJSON *tool =
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(body, "tools"), 0);

    RL_CHECK_INTEQ(api, RL_MODEL_API_RESPONSES);
    RL_CHECK(!cJSON_HasObjectItem(body, "messages"));
    RL_CHECK_INTEQ(cJSON_GetArraySize(input), 3);
    RL_CHECK_STREQ(str_at(cJSON_GetArrayItem(input, 0), "content", NULL),
                   "Be brief.");
    RL_CHECK_STREQ(str_at(cJSON_GetArrayItem(parts, 0), "type", NULL),
                   "input_text");
    RL_CHECK_STREQ(str_at(cJSON_GetArrayItem(parts, 1), "type", NULL),
                   "input_image");
    RL_CHECK_STREQ(str_at(cJSON_GetArrayItem(parts, 1), "image_url", NULL),
                   "https://x/i.png");
    RL_CHECK_STREQ(
        str_at(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                                      cJSON_GetArrayItem(input, 2), "content"),
                                  0),
               "type", NULL),
        "output_text");
    RL_CHECK(!cJSON_HasObjectItem(body, "max_tokens"));
    RL_CHECK_INTEQ(
        cJSON_GetObjectItemCaseSensitive(body, "max_output_tokens")->valueint,
        64);
    RL_CHECK(!cJSON_HasObjectItem(body, "response_format"));
    {
        const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(body, "text"), "format");

        RL_CHECK_STREQ(str_at(fmt, "type", NULL), "json_schema");
        RL_CHECK_STREQ(str_at(fmt, "name", NULL), "s");
        RL_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fmt, "strict")));
        RL_CHECK(
            cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(fmt, "schema")));
    }
    RL_CHECK_STREQ(str_at(tool, "name", NULL), "lookup");
    RL_CHECK(!cJSON_HasObjectItem(tool, "function"));
    RL_CHECK_STREQ(str_at(body, "tool_choice", "name"), "lookup");
    RL_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "store")));
    RL_CHECK_STREQ(str_at(body, "metadata", RL_MODEL_META_RUN_ID), "r2");
    RL_CHECK_STREQ(str_at(body, "model", NULL), "gpt-x");
    cJSON_Delete(body);
}

static void
test_default_api_applies_to_models_not_named(void)
{
    struct rl_model_body_opts opts = {.api = RL_MODEL_API_RESPONSES,
                                      .api_by_model = "other=chat"};
    enum rl_model_api api = RL_MODEL_API_CHAT;
    cJSON *body = prepare(&opts, &api);

    RL_CHECK_INTEQ(api, RL_MODEL_API_RESPONSES);
    RL_CHECK(cJSON_HasObjectItem(body, "input"));
    cJSON_Delete(body);
    RL_CHECK_INTEQ(
        rl_model_api_for("a=responses,b=chat", RL_MODEL_API_CHAT, "a"),
        RL_MODEL_API_RESPONSES);
    RL_CHECK_INTEQ(rl_model_api_for("a=responses", RL_MODEL_API_CHAT, "ab"),
                   RL_MODEL_API_CHAT);
    RL_CHECK_INTEQ(rl_model_api_for(NULL, RL_MODEL_API_RESPONSES, "a"),
                   RL_MODEL_API_RESPONSES);
}

static void
test_bad_settings_are_refused_with_the_entry(void)
{
    char errstr[256] = "";
    enum rl_model_api api;
    struct rl_model_body_opts opts = {.api = RL_MODEL_API_CHAT,
                                      .api_by_model = "gpt-x=batch"};

    RL_CHECK_INTEQ(
        rl_model_api_map_check("a=chat,b=responses,", errstr, sizeof(errstr)),
        RL_OK);
    RL_CHECK_INTEQ(rl_model_api_map_check(NULL, errstr, sizeof(errstr)), RL_OK);
    RL_CHECK_INTEQ(rl_model_api_map_check("a=chat,b", errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
    RL_CHECK(strstr(errstr, "\"b\"") != NULL);
    RL_CHECK_INTEQ(
        rl_model_api_map_check("a=chat,b=batch", errstr, sizeof(errstr)),
        RL_ERR_INVALID);
    RL_CHECK(strstr(errstr, "batch") != NULL);
    RL_CHECK_INTEQ(rl_model_api_parse("responses", &api), RL_OK);
    RL_CHECK_INTEQ(api, RL_MODEL_API_RESPONSES);
    RL_CHECK_INTEQ(rl_model_api_parse("Chat", &api), RL_ERR_INVALID);
    RL_CHECK(rl_model_body_prepare(CHAT, &opts, &api, errstr, sizeof(errstr)) ==
             NULL);
    RL_CHECK(rl_model_body_prepare("[1]", &opts, &api, errstr,
                                   sizeof(errstr)) == NULL);
    RL_CHECK_STREQ(rl_model_outcome_name(RL_MODEL_NOT_FOUND), "not_found");
}

int
main(void)
{
    test_store_adds_metadata_and_keeps_the_requests_own();
    test_without_store_the_chat_body_passes_unchanged();
    test_model_named_in_the_map_speaks_responses();
    test_default_api_applies_to_models_not_named();
    test_bad_settings_are_refused_with_the_entry();
    RL_TEST_END();
}
