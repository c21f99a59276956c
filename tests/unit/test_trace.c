/* rl/trace.h: W3C traceparent parsing, the trace a run without one gets,
 * and the header values written. */
#include <string.h>

#include "rl/err.h"
#include "rl/trace.h"
#include "rltest.h"

#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT "00f067aa0ba902b7"
#define RUN_ID                                                                 \
    "70130901deca1ba5c508cd0730a67be6cb7bf82aa4ad3d766d68a219acb42719"

static int
parses(const char *v)
{
    struct rl_trace_ctx tc;
    char errstr[128];

    return rl_trace_parse(v, strlen(v), &tc, errstr, sizeof(errstr)) == 0;
}

static void
test_valid_traceparent_parsed(void)
{
    struct rl_trace_ctx tc;
    char errstr[128];
    const char *v = "00-" TRACE "-" PARENT "-01";

    RL_CHECK_INTEQ(rl_trace_parse(v, strlen(v), &tc, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_STREQ(tc.trace_id, TRACE);
    RL_CHECK_STREQ(tc.parent_id, PARENT);
    RL_CHECK_INTEQ(tc.flags, 1);
    RL_CHECK(parses("00-" TRACE "-" PARENT "-00"));
}

static void
test_invalid_traceparents_refused(void)
{
    RL_CHECK(!parses(""));
    RL_CHECK(!parses("01-" TRACE "-" PARENT "-01")); /* version */
    RL_CHECK(!parses("ff-" TRACE "-" PARENT "-01")); /* version */
    RL_CHECK(!parses("00-00000000000000000000000000000000-" PARENT "-01"));
    RL_CHECK(!parses("00-" TRACE "-0000000000000000-01"));
    RL_CHECK(!parses("00-4BF92F3577B34DA6A3CE929D0E0E4736-" PARENT "-01"));
    RL_CHECK(!parses("00-" TRACE "-" PARENT "-0g"));
    RL_CHECK(!parses("00-" TRACE "-" PARENT "-01-extra"));
    RL_CHECK(!parses("00-" TRACE "_" PARENT "-01"));
    RL_CHECK(!parses("00-" TRACE "-" PARENT "-1"));
}

static void
test_run_without_traceparent_derives_trace_from_run_id(void)
{
    struct rl_trace_ctx tc;

    rl_trace_for_run(RUN_ID, NULL, &tc);
    RL_CHECK_STREQ(tc.trace_id, "70130901deca1ba5c508cd0730a67be6");
    RL_CHECK_STREQ(tc.parent_id, "");
    RL_CHECK_INTEQ(tc.flags, RL_TRACE_FLAG_SAMPLED);
    rl_trace_for_run(RUN_ID, "00-" TRACE "-" PARENT "-00", &tc);
    RL_CHECK_STREQ(tc.trace_id, TRACE);
    RL_CHECK_STREQ(tc.parent_id, PARENT);
    RL_CHECK_INTEQ(tc.flags, 0);
}

static void
test_run_span_id_stable_per_epoch(void)
{
    char a[RL_TRACE_SPAN_ID_SIZE], b[RL_TRACE_SPAN_ID_SIZE],
        c[RL_TRACE_SPAN_ID_SIZE], tp[RL_TRACEPARENT_SIZE];

    rl_trace_run_span_id(RUN_ID, 1, a);
    rl_trace_run_span_id(RUN_ID, 1, b);
    rl_trace_run_span_id(RUN_ID, 2, c);
    RL_CHECK_STREQ(a, b);
    RL_CHECK(strcmp(a, c) != 0);
    RL_CHECK_INTEQ(strlen(a), 16);
    rl_trace_new_span_id(b);
    rl_trace_new_span_id(c);
    RL_CHECK(strcmp(b, c) != 0);
    rl_trace_format(TRACE, a, 1, tp);
    RL_CHECK(parses(tp));
    RL_CHECK_INTEQ(strlen(tp), 55);
}

int
main(void)
{
    test_valid_traceparent_parsed();
    test_invalid_traceparents_refused();
    test_run_without_traceparent_derives_trace_from_run_id();
    test_run_span_id_stable_per_epoch();
    RL_TEST_END();
}
