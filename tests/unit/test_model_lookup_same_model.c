/* A stored completion is adopted by a lookup only when it answered the
 * model the run asked for. A record that names it (runledger_model
 * metadata) matches that name exactly, whatever model answered; one
 * without it matches the model asked for or a dated snapshot of it
 * ("gpt-4o" answered as "gpt-4o-2024-08-06"), never another model whose
 * name shares the prefix ("gpt-4o-mini") or a suffix that is no date. */
#include <cjson/cJSON.h>
#include <string.h>

#include "rl/model.h"
#include "rl/testing.h"
#include "rltest.h"

#define RUN "9d5577810000000000000000000000000000000000000000000000000000abcd"

/* Whether the one record of run RUN, attempt 1, answered by model got
 * (NULL: no "model" field) and naming asked in its metadata (NULL: no
 * runledger_model), is adopted for a run that asked for want. A record
 * not adopted must be counted foreign, not dropped silently. */
static int
adopted(const char *want, const char *got, const char *asked)
{
    cJSON *data = cJSON_CreateArray();
    cJSON *rec = cJSON_CreateObject();
    cJSON *meta = cJSON_CreateObject();
    struct rl_model_call call;
    const cJSON *best;
    int attempts[1] = {1};

    cJSON_AddStringToObject(meta, RL_MODEL_META_RUN_ID, RUN);
    cJSON_AddStringToObject(meta, RL_MODEL_META_ATTEMPT, "1");
    if (asked)
        cJSON_AddStringToObject(meta, RL_MODEL_META_MODEL, asked);
    cJSON_AddItemToObject(rec, "metadata", meta);
    if (got)
        cJSON_AddStringToObject(rec, "model", got);
    cJSON_AddNumberToObject(rec, "created", 1700000000);
    cJSON_AddItemToArray(data, rec);

    memset(&call, 0, sizeof(call));
    call.run_id = RUN;
    call.attempt_no = 1;
    call.lookup_attempts = attempts;
    call.lookup_nattempts = 1;
    call.lookup_model = want;
    best = rl_model_pick_stored(data, &call);
    RL_CHECK_INTEQ(call.found_records + call.foreign_records, 1);
    RL_CHECK_INTEQ(best != NULL, call.found_records == 1);
    cJSON_Delete(data);
    return best != NULL;
}

int
main(void)
{
    /* No runledger_model: the answering model's name decides. */
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o", NULL), 1);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o-2024-08-06", NULL), 1);
    RL_CHECK_INTEQ(adopted("gpt-4o-mini", "gpt-4o-mini-2024-07-18", NULL), 1);
    RL_CHECK_INTEQ(adopted("gpt-4", "gpt-4-0613", NULL), 1);
    RL_CHECK_INTEQ(
        adopted("claude-3-5-sonnet", "claude-3-5-sonnet-20241022", NULL), 1);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o-mini", NULL), 0);
    RL_CHECK_INTEQ(adopted("claude-3", "claude-3-5-sonnet-20241022", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4", "gpt-4-32k", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o-2024-08-06x", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o-2024-08-06-", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o-2024-08-06 ", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o-mini-2024-07-18", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4", "gpt-4o", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o-", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o-latest", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o-x2024", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o_2024-08-06", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o2024-08-06", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "GPT-4O", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "", NULL), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", NULL, NULL), 0);
    /* Nothing asked for: any record of the run. */
    RL_CHECK_INTEQ(adopted(NULL, "anything", NULL), 1);
    RL_CHECK_INTEQ(adopted("", NULL, NULL), 1);

    /* runledger_model present: it alone decides, exactly (an endpoint
     * answers a deployment's request with the model behind it). */
    RL_CHECK_INTEQ(
        adopted("my-deployment", "gpt-4o-2024-08-06", "my-deployment"), 1);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o", "gpt-4o-mini"), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o-2024-08-06", "gpt-4o-mini"), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o-mini", "gpt-4o"), 1);
    RL_CHECK_INTEQ(adopted("gpt-4o", "gpt-4o", "gpt-4o-2024-08-06"), 0);
    RL_CHECK_INTEQ(adopted("gpt-4o", NULL, "gpt-4o"), 1);
    RL_TEST_END();
}
