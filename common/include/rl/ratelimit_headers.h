#ifndef RL_RATELIMIT_HEADERS_H
#define RL_RATELIMIT_HEADERS_H

/* The provider's rate-limit headers on one model response, as the model
 * client reads them (common/src/model/ratelimit_headers.c). Not the
 * ledger's model rate limits that every worker shares
 * (rl/db_model_limits.h): a throttled response feeds those. */

/* What the provider said about its rate limits on one response (OpenAI's
 * x-ratelimit-* headers, Retry-After, retry-after-ms); -1 for each one
 * absent or unreadable. The reset durations are Go-style ("1s", "6m0s",
 * "20ms", "1h2m3.5s") or plain seconds. */
struct rl_ratelimit_headers {
    long long remaining_requests; /* x-ratelimit-remaining-requests */
    long long remaining_tokens;   /* x-ratelimit-remaining-tokens */
    long reset_requests_ms;       /* x-ratelimit-reset-requests */
    long reset_tokens_ms;         /* x-ratelimit-reset-tokens */
    long retry_after_ms;          /* retry-after-ms, else Retry-After
                                     (seconds or HTTP-date) */
    int retry_after_ms_seen;      /* retry-after-ms beats Retry-After */
};

/* Sets every field of rl to absent (-1). */
void rl_ratelimit_headers_init(struct rl_ratelimit_headers *rl);

/* Reads one response header (name case-insensitive, value without the
 * line end) into rl when it is one of the rate-limit headers. Returns 1
 * when the name was one of them (even with an unreadable value, which
 * leaves the field absent), else 0. @locality any thread */
int rl_ratelimit_headers_read(struct rl_ratelimit_headers *rl, const char *name,
                              const char *value);

/* A reset duration in milliseconds: Go-style ("6m0s", "1.5s", "20ms",
 * "1h", "250us") or plain seconds ("7", "0.5"); -1 when unreadable.
 * Saturates at one day. */
long rl_ratelimit_headers_duration_ms(const char *value);

/* 1 when rl carries any x-ratelimit-* value: the provider publishes its
 * limits. */
int rl_ratelimit_headers_published(const struct rl_ratelimit_headers *rl);

#endif /* RL_RATELIMIT_HEADERS_H */
