/* An answer that calls a tool (content null, tool_calls set) completes the
 * run: the stored output and every notification carry the tool calls, the
 * model the endpoint named and the answer's id. An answer with neither
 * content nor tool calls fails the run as invalid_output. A failed attempt
 * keeps the endpoint's request id. */
#include <stdio.h>

#include "faults.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char tool[RL_HEX_SIZE], none[RL_HEX_SIZE], flaky[RL_HEX_SIZE], job[160];

    e2e_setup(&t, "ftool", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0, "[[fault:tool_call]]", tool);
    e2e_produce_event(&t, job, "tenant-a", 1, "[[fault:no_content]]", none);
    e2e_produce_event(&t, job, "tenant-a", 2, "[[fault:503 times=1]]", flaky);
    e2e_flush(&t);
    fx_spawn(&t, "consume", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));

    fx_check_completed_once(&t, tool);
    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT jsonb_typeof(output->'text') || '/' || "
                             "(output->'tool_calls'->0->'function'->>'name') "
                             "|| '/' || (output->>'model') FROM runs WHERE "
                             "run_id='%s'",
                             tool),
                   "null/lookup/stub-1");
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts WHERE run_id='%s' "
                            "AND outcome='ok' AND upstream_request_id LIKE "
                            "'chatcmpl-%%'",
                            tool),
                   1);
    /* Each notification carries the tool calls. */
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM outbox_delivered WHERE "
                            "run_id='%s' AND rl_payload_as_sent(run_id, "
                            "channel, explicit_payload)->'output'->'tool_calls'"
                            "->0->'function'->>'name' = 'lookup'",
                            tool),
                   2);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, tool), 1);

    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT status || '/' || error_class FROM runs "
                             "WHERE run_id='%s' AND output IS NULL",
                             none),
                   "failed/invalid_output");
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts WHERE run_id='%s' "
                            "AND outcome='invalid_output' AND "
                            "upstream_request_id LIKE 'chatcmpl-%%'",
                            none),
                   1);
    RL_CHECK_INTEQ(fx_dead_letters(&t, "invalid_output", none), 1);

    /* The 503's attempt names the endpoint's request, then it completes. */
    fx_check_completed_once(&t, flaky);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts WHERE run_id='%s' "
                            "AND outcome='transient' AND http_status=503 AND "
                            "upstream_request_id LIKE 'req-err-%%'",
                            flaky),
                   1);
    e2e_teardown(&t);
    RL_TEST_END();
}
