/* The model client's configuration checked before anything is built:
 * RUNLEDGER_MODEL_HEADERS parsed and refused when it would override a
 * header the client owns, and the endpoint's query string. */
#include "model_int.h"

#include <string.h>
#include <strings.h>

#include "rl/err.h"

/* RFC 9110 token: what a header name may be made of. */
static int
is_token(const char *s, size_t len)
{
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c)))
            return 0;
    }
    return 1;
}

static int
name_is(const char *name, size_t len, const char *other)
{
    return strlen(other) == len && strncasecmp(name, other, len) == 0;
}

/* Headers the client sets itself: a second copy would confuse endpoints
 * (or, for Idempotency-Key, break deduplication). */
static const char *const own_headers[] = {
    "Content-Type",      "Accept",         "Expect",
    "Idempotency-Key",   "Content-Length", "Host",
    "Transfer-Encoding", "Connection",     "User-Agent",
};

static int
is_own_header(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(own_headers) / sizeof(own_headers[0]); i++) {
        if (name_is(name, len, own_headers[i]))
            return 1;
    }
    return 0;
}

/* The name the API key goes in; "Authorization" (with "Bearer ") when
 * unset. */
const char *
model_auth_header_name(const struct rl_model_config *cfg)
{
    return cfg->auth_header && *cfg->auth_header ? cfg->auth_header
                                                 : "Authorization";
}

/* Splits cfg->headers into out (EXTRA_HEADERS_MAX entries); sets *n.
 * Returns 0 or RL_ERR_INVALID with errstr naming the entry by position
 * (and by name once the name is known to be one), never by its value: a
 * value may be a credential. */
int
model_parse_headers(const struct rl_model_config *cfg, struct header_entry *out,
                    size_t *n, char *errstr, size_t errstr_size)
{
    const char *p = cfg->headers ? cfg->headers : "";
    const char *auth = model_auth_header_name(cfg);
    int has_key = cfg->api_key && *cfg->api_key;
    int pos = 0;

    *n = 0;
    while (*p) {
        const char *end = p + strcspn(p, ",\n");
        const char *colon;
        struct header_entry e;

        pos++;
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
            p++;
        if (p == end) { /* empty entry: "a: b," */
            p = *end ? end + 1 : end;
            continue;
        }
        colon = memchr(p, ':', (size_t)(end - p));
        if (!colon) {
            rl_set_err(errstr, errstr_size, "entry %d is not \"Name: value\"",
                       pos);
            return RL_ERR_INVALID;
        }
        e.name = p;
        e.name_len = (size_t)(colon - p);
        while (e.name_len > 0 &&
               (p[e.name_len - 1] == ' ' || p[e.name_len - 1] == '\t'))
            e.name_len--;
        if (!is_token(e.name, e.name_len)) {
            rl_set_err(errstr, errstr_size, "entry %d has no valid header name",
                       pos);
            return RL_ERR_INVALID;
        }
        e.value = colon + 1;
        e.value_len = (size_t)(end - e.value);
        while (e.value_len > 0 && (*e.value == ' ' || *e.value == '\t')) {
            e.value++;
            e.value_len--;
        }
        while (e.value_len > 0 && (e.value[e.value_len - 1] == ' ' ||
                                   e.value[e.value_len - 1] == '\t' ||
                                   e.value[e.value_len - 1] == '\r'))
            e.value_len--;
        if (e.value_len == 0) {
            rl_set_err(errstr, errstr_size, "header %.*s has an empty value",
                       (int)e.name_len, e.name);
            return RL_ERR_INVALID;
        }
        for (size_t i = 0; i < e.value_len; i++) {
            unsigned char c = (unsigned char)e.value[i];

            if ((c < 0x20 && c != '\t') || c >= 0x7f) {
                rl_set_err(errstr, errstr_size,
                           "header %.*s has a value that is not printable "
                           "ascii",
                           (int)e.name_len, e.name);
                return RL_ERR_INVALID;
            }
        }
        if (is_own_header(e.name, e.name_len) ||
            (has_key && name_is(e.name, e.name_len, auth))) {
            rl_set_err(errstr, errstr_size,
                       "header %.*s is one runledger sets itself",
                       (int)e.name_len, e.name);
            return RL_ERR_INVALID;
        }
        for (size_t k = 0; k < *n; k++) {
            if (out[k].name_len == e.name_len &&
                strncasecmp(out[k].name, e.name, e.name_len) == 0) {
                rl_set_err(errstr, errstr_size, "header %.*s is given twice",
                           (int)e.name_len, e.name);
                return RL_ERR_INVALID;
            }
        }
        if (*n == EXTRA_HEADERS_MAX) {
            rl_set_err(errstr, errstr_size, "more than %d headers",
                       EXTRA_HEADERS_MAX);
            return RL_ERR_INVALID;
        }
        out[(*n)++] = e;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* Checks cfg->query: name=value pairs joined by '&', each name non-empty,
 * no control characters (they are percent-encoded, never sent raw). */
static int
check_query(const char *query, char *errstr, size_t errstr_size)
{
    const char *p = query ? query : "";
    int pos = 0;

    while (*p) {
        size_t len = strcspn(p, "&");
        const char *eq = memchr(p, '=', len);

        pos++;
        if (!eq || eq == p) {
            rl_set_err(errstr, errstr_size, "parameter %d is not name=value",
                       pos);
            return RL_ERR_INVALID;
        }
        for (size_t i = 0; i < len; i++) {
            if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) {
                rl_set_err(errstr, errstr_size,
                           "parameter %d has a control character", pos);
                return RL_ERR_INVALID;
            }
        }
        p += len;
        if (*p == '&')
            p++;
    }
    return 0;
}

int
rl_model_config_check(const struct rl_model_config *cfg, char *errstr,
                      size_t errstr_size)
{
    struct header_entry entries[EXTRA_HEADERS_MAX];
    char why[200];
    size_t n;
    const char *auth;

    if (!cfg) {
        rl_set_err(errstr, errstr_size, "model config is not set");
        return RL_ERR_INVALID;
    }
    if (cfg->api_key) {
        for (const char *p = cfg->api_key; *p; p++) {
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                /* Never print the key itself, not even in part. */
                rl_set_err(errstr, errstr_size,
                           "model api_key contains control characters");
                return RL_ERR_INVALID;
            }
        }
    }
    auth = model_auth_header_name(cfg);
    if (!is_token(auth, strlen(auth)) || is_own_header(auth, strlen(auth))) {
        rl_set_err(errstr, errstr_size,
                   "model auth header \"%s\" is not a header name runledger "
                   "can send the key in",
                   auth);
        return RL_ERR_INVALID;
    }
    if (check_query(cfg->query, why, sizeof(why)) != 0) {
        rl_set_err(errstr, errstr_size, "model query: %s", why);
        return RL_ERR_INVALID;
    }
    if (model_parse_headers(cfg, entries, &n, why, sizeof(why)) != 0) {
        rl_set_err(errstr, errstr_size, "model headers: %s", why);
        return RL_ERR_INVALID;
    }
    return 0;
}
