/* The provider's rate-limit headers on a response (x-ratelimit-*,
 * Retry-After, retry-after-ms), read into struct rl_ratelimit_headers.
 * Not the ledger's model rate limits (rl/db_model_limits.h), which
 * these headers feed when a model is throttled. */
#include "rl/ratelimit_headers.h"
#include "model_int.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Retry-After is delta-seconds or an HTTP-date (RFC 9110 10.2.3). */
long
model_parse_retry_after(const char *value)
{
    long long ms;

    if (*value >= '0' && *value <= '9') {
        char *end;
        long long s = strtoll(value, &end, 10);

        if (*end != '\0' || s < 0)
            return -1;
        ms = s > RETRY_AFTER_MAX_MS / 1000 ? RETRY_AFTER_MAX_MS : s * 1000;
    } else {
        time_t when = curl_getdate(value, NULL);

        if (when == (time_t)-1)
            return -1;
        ms = ((long long)when - (long long)time(NULL)) * 1000;
        if (ms < 0)
            ms = 0;
        if (ms > RETRY_AFTER_MAX_MS)
            ms = RETRY_AFTER_MAX_MS;
    }
    return (long)ms;
}

void
rl_ratelimit_headers_init(struct rl_ratelimit_headers *rl)
{
    rl->remaining_requests = rl->remaining_tokens = -1;
    rl->reset_requests_ms = rl->reset_tokens_ms = -1;
    rl->retry_after_ms = -1;
    rl->retry_after_ms_seen = 0;
}

long
rl_ratelimit_headers_duration_ms(const char *value)
{
    const double day_ms = 86400000.0;
    double total = 0;
    const char *p = value;
    int parts = 0;

    if (!p)
        return -1;
    while (*p == ' ')
        p++;
    while (*p) {
        char *end;
        double v = strtod(p, &end);
        double unit;

        if (end == p || v < 0 || v != v)
            return -1;
        p = end;
        if (strncmp(p, "ms", 2) == 0) {
            unit = 1;
            p += 2;
        } else if (strncmp(p, "us", 2) == 0 ||
                   strncmp(p, "\xc2\xb5s", 3) == 0) {
            unit = 0.001;
            p += p[0] == 'u' ? 2 : 3;
        } else if (strncmp(p, "ns", 2) == 0) {
            unit = 0.000001;
            p += 2;
        } else if (*p == 'h') {
            unit = 3600000;
            p++;
        } else if (*p == 'm') {
            unit = 60000;
            p++;
        } else if (*p == 's' || (*p == '\0' && parts == 0)) {
            /* a bare number is seconds, as in Retry-After */
            unit = 1000;
            if (*p == 's')
                p++;
        } else {
            return -1;
        }
        total += v * unit;
        parts++;
        if (total > day_ms)
            total = day_ms;
    }
    if (parts == 0)
        return -1;
    /* Round up: waiting a fraction of a millisecond too long is harmless,
     * too short earns another 429. */
    return (long)(total + 0.999);
}

static long long
parse_count(const char *value)
{
    char *end;
    long long n;

    if (*value < '0' || *value > '9')
        return -1;
    n = strtoll(value, &end, 10);
    return *end == '\0' && n >= 0 ? n : -1;
}

int
rl_ratelimit_headers_read(struct rl_ratelimit_headers *rl, const char *name,
                          const char *value)
{
    if (strcasecmp(name, "x-ratelimit-remaining-requests") == 0) {
        rl->remaining_requests = parse_count(value);
    } else if (strcasecmp(name, "x-ratelimit-remaining-tokens") == 0) {
        rl->remaining_tokens = parse_count(value);
    } else if (strcasecmp(name, "x-ratelimit-reset-requests") == 0) {
        rl->reset_requests_ms = rl_ratelimit_headers_duration_ms(value);
    } else if (strcasecmp(name, "x-ratelimit-reset-tokens") == 0) {
        rl->reset_tokens_ms = rl_ratelimit_headers_duration_ms(value);
    } else if (strcasecmp(name, "retry-after-ms") == 0) {
        char *end;
        double ms = strtod(value, &end);

        if (end != value && *end == '\0' && ms >= 0) {
            rl->retry_after_ms = ms > (double)RETRY_AFTER_MAX_MS
                                     ? (long)RETRY_AFTER_MAX_MS
                                     : (long)(ms + 0.999);
            rl->retry_after_ms_seen = 1;
        }
    } else if (strcasecmp(name, "retry-after") == 0) {
        if (!rl->retry_after_ms_seen)
            rl->retry_after_ms = model_parse_retry_after(value);
    } else {
        return 0;
    }
    return 1;
}

int
rl_ratelimit_headers_published(const struct rl_ratelimit_headers *rl)
{
    return rl->remaining_requests >= 0 || rl->remaining_tokens >= 0 ||
           rl->reset_requests_ms >= 0 || rl->reset_tokens_ms >= 0;
}
