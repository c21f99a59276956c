/* Request building shared by every call: the endpoint's URL (the
 * deployment and api-version of an Azure endpoint escaped into it) and
 * the header list every call carries. */
#include "model_int.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rl/buf.h"
#include "rl/err.h"

/* Appends s[0..len) to b percent-encoded: everything but RFC 3986's
 * unreserved characters, so '&', '=', '#' and spaces in a value cannot
 * change the query's meaning. */
static void
put_escaped(struct rl_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
            c == '~') {
            rl_buf_put(b, (const char *)&s[i], 1);
        } else {
            char pct[3] = {'%', hex[c >> 4], hex[c & 15]};

            rl_buf_put(b, pct, 3);
        }
    }
}

char *
model_build_url(const char *base_url, const char *path, const char *query,
                const char *extra, char *errstr, size_t errstr_size)
{
    size_t len = strlen(base_url);
    struct rl_buf b = {0};
    const char *p = query ? query : "";
    CURLU *u;
    CURLUcode uc;
    char *url;

    if (strpbrk(base_url, "?#")) {
        rl_set_err(errstr, errstr_size,
                   "invalid model base_url: it must not carry a query or "
                   "fragment (query parameters go in the model query "
                   "setting)");
        return NULL;
    }
    while (len > 0 && base_url[len - 1] == '/')
        len--;
    rl_buf_put(&b, base_url, len);
    rl_buf_puts(&b, path);
    if (extra && *extra) {
        rl_buf_put(&b, "?", 1);
        rl_buf_puts(&b, extra);
    }
    while (*p) {
        size_t n = strcspn(p, "&");
        const char *eq = memchr(p, '=', n);

        rl_buf_put(&b, p == query && !(extra && *extra) ? "?" : "&", 1);
        put_escaped(&b, p, (size_t)(eq - p));
        rl_buf_put(&b, "=", 1);
        put_escaped(&b, eq + 1, n - (size_t)(eq - p) - 1);
        p += n;
        if (*p == '&')
            p++;
    }
    url = rl_buf_take(&b);
    if (!url) {
        rl_set_err(errstr, errstr_size, "out of memory");
        return NULL;
    }

    u = curl_url();
    if (!u) {
        free(url);
        rl_set_err(errstr, errstr_size, "out of memory");
        return NULL;
    }
    uc = curl_url_set(u, CURLUPART_URL, url, 0);
    curl_url_cleanup(u);
    if (uc != CURLUE_OK ||
        (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)) {
        rl_set_err(errstr, errstr_size, "invalid model base_url: %s",
                   uc != CURLUE_OK ? curl_url_strerror(uc)
                                   : "scheme must be http or https");
        free(url);
        return NULL;
    }
    return url;
}

char *
model_lookup_url(const struct rl_model *m, const struct rl_model_call *call,
                 char *errstr, size_t errstr_size)
{
    struct rl_buf path = {0}, extra = {0};
    char *url = NULL, *p = NULL, *e = NULL;

    if (call->api == RL_MODEL_API_RESPONSES) {
        rl_buf_puts(&path, "/responses/");
        put_escaped(&path, call->lookup_id, strlen(call->lookup_id));
    } else {
        /* Every stored completion naming the run (rl_model_body_prepare
         * stores its metadata with each call), oldest first: the reply
         * picks those of the attempts looked up and of this ledger
         * (model_parse_completion), and sees another installation's and
         * a second generation of one attempt too. */
        rl_buf_puts(&path, "/chat/completions");
        put_escaped(&extra, "metadata[" RL_MODEL_META_RUN_ID "]",
                    sizeof("metadata[" RL_MODEL_META_RUN_ID "]") - 1);
        rl_buf_put(&extra, "=", 1);
        put_escaped(&extra, call->run_id, strlen(call->run_id));
        rl_buf_puts(&extra, "&limit=100&order=asc");
    }
    p = rl_buf_take(&path);
    e = rl_buf_take(&extra);
    if (!p || (call->api != RL_MODEL_API_RESPONSES && !e))
        rl_set_err(errstr, errstr_size, "out of memory");
    else
        url = model_build_url(m->base_url, p, m->query, e, errstr, errstr_size);
    free(p);
    free(e);
    return url;
}

/* Appends "<name>: <value>" to list, wiping the temporary copy (the value
 * may be a credential). Returns the new list, or NULL (list untouched). */
static struct curl_slist *
append_header(struct curl_slist *list, const char *name, size_t name_len,
              const char *prefix, const char *value, size_t value_len)
{
    size_t len = name_len + 2 + strlen(prefix) + value_len + 1;
    struct curl_slist *tmp;
    char *h = malloc(len);

    if (!h)
        return NULL;
    snprintf(h, len, "%.*s: %s%.*s", (int)name_len, name, prefix,
             (int)value_len, value);
    tmp = curl_slist_append(list, h);
    for (volatile char *v = h; *v; v++)
        *v = '\0';
    free(h);
    return tmp;
}

struct curl_slist *
model_build_headers(const struct rl_model_config *cfg,
                    const struct header_entry *extra, size_t n_extra)
{
    static const char *const fixed[] = {
        "Content-Type: application/json",
        "Accept: application/json",
        /* libcurl would wait up to 1 s for a 100-continue on large bodies */
        "Expect:",
    };
    struct curl_slist *list = NULL, *tmp;

    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        tmp = curl_slist_append(list, fixed[i]);
        if (!tmp)
            goto fail;
        list = tmp;
    }
    if (cfg->api_key && *cfg->api_key) {
        const char *name = model_auth_header_name(cfg);
        int bearer = strcasecmp(name, "Authorization") == 0;

        tmp = append_header(list, name, strlen(name), bearer ? "Bearer " : "",
                            cfg->api_key, strlen(cfg->api_key));
        if (!tmp)
            goto fail;
        list = tmp;
    }
    for (size_t i = 0; i < n_extra; i++) {
        tmp = append_header(list, extra[i].name, extra[i].name_len, "",
                            extra[i].value, extra[i].value_len);
        if (!tmp)
            goto fail;
        list = tmp;
    }
    return list;

fail:
    curl_slist_free_all(list);
    return NULL;
}
