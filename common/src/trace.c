#include "rl/trace.h"

#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rl/err.h"

static int
lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    }
    return 1;
}

static int
all_zero(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '0')
            return 0;
    }
    return 1;
}

int
rl_trace_parse(const char *value, size_t len, struct rl_trace_ctx *ctx,
               char *errstr, size_t errstr_size)
{
    const char *why = NULL;
    unsigned flags = 0;

    if (!value || len != RL_TRACEPARENT_SIZE - 1)
        why = "not 55 characters";
    else if (value[0] != '0' || value[1] != '0' || value[2] != '-')
        why = "version is not 00";
    else if (value[35] != '-' || value[52] != '-')
        why = "fields are not separated by '-'";
    else if (!lower_hex(value + 3, 32) || all_zero(value + 3, 32))
        why = "trace id is not 32 lowercase hex digits, not all zero";
    else if (!lower_hex(value + 36, 16) || all_zero(value + 36, 16))
        why = "parent id is not 16 lowercase hex digits, not all zero";
    else if (!lower_hex(value + 53, 2))
        why = "flags are not 2 lowercase hex digits";
    if (why) {
        rl_set_err(errstr, errstr_size, "invalid traceparent: %s", why);
        return RL_ERR_INVALID;
    }
    sscanf(value + 53, "%2x", &flags);
    memcpy(ctx->trace_id, value + 3, 32);
    ctx->trace_id[32] = '\0';
    memcpy(ctx->parent_id, value + 36, 16);
    ctx->parent_id[16] = '\0';
    ctx->flags = flags;
    return 0;
}

void
rl_trace_for_run(const char *run_id, const char *traceparent,
                 struct rl_trace_ctx *ctx)
{
    char errstr[8];

    if (traceparent && *traceparent &&
        rl_trace_parse(traceparent, strlen(traceparent), ctx, errstr,
                       sizeof(errstr)) == 0)
        return;
    memset(ctx, 0, sizeof(*ctx));
    snprintf(ctx->trace_id, sizeof(ctx->trace_id), "%.32s", run_id);
    /* A run_id is 64 hex digits; anything shorter or all zero still needs
     * a valid trace id. */
    if (strlen(ctx->trace_id) != 32 || !lower_hex(ctx->trace_id, 32) ||
        all_zero(ctx->trace_id, 32)) {
        char a[RL_TRACE_SPAN_ID_SIZE], b[RL_TRACE_SPAN_ID_SIZE];

        rl_trace_new_span_id(a);
        rl_trace_new_span_id(b);
        snprintf(ctx->trace_id, sizeof(ctx->trace_id), "%s%s", a, b);
    }
    ctx->flags = RL_TRACE_FLAG_SAMPLED;
}

static void
hex16(const unsigned char *bytes, char out[RL_TRACE_SPAN_ID_SIZE])
{
    static const char digits[] = "0123456789abcdef";

    for (int i = 0; i < 8; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[16] = '\0';
    if (all_zero(out, 16))
        out[15] = '1';
}

void
rl_trace_run_span_id(const char *run_id, int64_t epoch,
                     char out[RL_TRACE_SPAN_ID_SIZE])
{
    char text[160];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    int n = snprintf(text, sizeof(text), "run-span:%s:%" PRId64,
                     run_id ? run_id : "", epoch);

    if (n < 0 || (size_t)n >= sizeof(text) ||
        !EVP_Digest(text, (size_t)n, md, &md_len, EVP_sha256(), NULL) ||
        md_len < 8) {
        rl_trace_new_span_id(out);
        return;
    }
    hex16(md, out);
}

void
rl_trace_new_span_id(char out[RL_TRACE_SPAN_ID_SIZE])
{
    unsigned char bytes[8];

    if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
        /* Span ids need to be unique, not secret. */
        struct timespec ts;
        uint64_t v;

        clock_gettime(CLOCK_REALTIME, &ts);
        v = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^
            (uint64_t)(uintptr_t)out;
        memcpy(bytes, &v, sizeof(bytes));
    }
    hex16(bytes, out);
}

void
rl_trace_format(const char *trace_id, const char *span_id, unsigned flags,
                char out[RL_TRACEPARENT_SIZE])
{
    snprintf(out, RL_TRACEPARENT_SIZE, "00-%.32s-%.16s-%02x", trace_id, span_id,
             flags & 0xffu);
}
