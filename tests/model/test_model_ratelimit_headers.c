/* The provider's rate-limit headers are read into the call's result:
 * remaining requests and tokens, Go-style reset durations ("1s", "6m0s",
 * "20ms"), retry-after-ms over Retry-After (seconds or HTTP-date), and
 * unreadable values left absent (-1). */
#include <string.h>

#include "rl/ratelimit_headers.h"
#include "rltest.h"

int
main(void)
{
    struct rl_ratelimit_headers rl;

    RL_CHECK_INTEQ(rl_ratelimit_headers_duration_ms("1s"), 1000);
    RL_CHECK_INTEQ(rl_ratelimit_headers_duration_ms("6m0s"), 360000);
    RL_CHECK_INTEQ(rl_ratelimit_headers_duration_ms("20ms"), 20);
    RL_CHECK_INTEQ(rl_ratelimit_headers_duration_ms("1.5s"), 1500);
    RL_CHECK_INTEQ(rl_ratelimit_headers_duration_ms("1h2m3s"), 3723000);
    RL_CHECK_INTEQ(rl_ratelimit_headers_duration_ms("7"), 7000);
    RL_CHECK_INTEQ(rl_ratelimit_headers_duration_ms("250us"), 1);
    RL_CHECK_INTEQ(rl_ratelimit_headers_duration_ms("soon"), -1);
    RL_CHECK_INTEQ(rl_ratelimit_headers_duration_ms(""), -1);
    RL_CHECK_INTEQ(rl_ratelimit_headers_duration_ms("5x"), -1);

    rl_ratelimit_headers_init(&rl);
    RL_CHECK(!rl_ratelimit_headers_published(&rl));
    RL_CHECK(
        rl_ratelimit_headers_read(&rl, "X-RateLimit-Remaining-Requests", "0"));
    RL_CHECK(
        rl_ratelimit_headers_read(&rl, "x-ratelimit-remaining-tokens", "5890"));
    RL_CHECK(
        rl_ratelimit_headers_read(&rl, "x-ratelimit-reset-requests", "6m0s"));
    RL_CHECK(
        rl_ratelimit_headers_read(&rl, "x-ratelimit-reset-tokens", "20ms"));
    RL_CHECK(!rl_ratelimit_headers_read(&rl, "x-request-id", "abc"));
    RL_CHECK_INTEQ(rl.remaining_requests, 0);
    RL_CHECK_INTEQ(rl.remaining_tokens, 5890);
    RL_CHECK_INTEQ(rl.reset_requests_ms, 360000);
    RL_CHECK_INTEQ(rl.reset_tokens_ms, 20);
    RL_CHECK(rl_ratelimit_headers_published(&rl));

    rl_ratelimit_headers_read(&rl, "retry-after", "3");
    RL_CHECK_INTEQ(rl.retry_after_ms, 3000);
    rl_ratelimit_headers_read(&rl, "retry-after-ms", "1234.5");
    RL_CHECK_INTEQ(rl.retry_after_ms, 1235);
    rl_ratelimit_headers_read(&rl, "Retry-After", "9");
    RL_CHECK_INTEQ(rl.retry_after_ms, 1235); /* retry-after-ms wins */

    rl_ratelimit_headers_init(&rl);
    rl_ratelimit_headers_read(&rl, "retry-after",
                              "Wed, 21 Oct 2015 07:28:00 GMT");
    RL_CHECK_INTEQ(rl.retry_after_ms, 0); /* a date past: now */
    rl_ratelimit_headers_read(&rl, "x-ratelimit-remaining-requests", "-3");
    RL_CHECK_INTEQ(rl.remaining_requests, -1);
    RL_TEST_END();
}
