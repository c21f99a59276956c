/* respond.c: what every page answers with and reads from: the response
 * with the console's headers, the message and error pages, and the values
 * of a form or a query string. The pages call it; it calls none of them. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_int.h"
#include "rl/log.h"

enum MHD_Result
console_send(struct console_req *r, unsigned status, const char *type,
             char *body, size_t len, const char *location)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;

    resp = MHD_create_response_from_buffer(len, body ? body : (char *)"",
                                           body ? MHD_RESPMEM_MUST_FREE
                                                : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(
        resp, "Content-Security-Policy",
        "default-src 'none'; style-src 'self'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "same-origin");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
                            strcmp(type, "text/css") == 0 ? "max-age=3600"
                                                          : "no-store");
    if (r->set_cookie[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE,
                                r->set_cookie);
    if (location)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, location);
    ret = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result
console_send_page(struct console_req *r, unsigned status, struct rl_buf *b)
{
    size_t len = b->len;
    char *body = rl_buf_take(b);

    if (!body) {
        static const char oom[] = "out of memory\n";

        return console_send(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain",
                            strdup(oom), sizeof(oom) - 1, NULL);
    }
    return console_send(r, status, "text/html; charset=utf-8", body, len, NULL);
}

enum MHD_Result
console_send_message(struct console_req *r, unsigned status, const char *title,
                     int ok, const char *text)
{
    struct rl_buf b = {0};

    html_begin(&b, r, title);
    rl_buf_puts(&b, "<h1>");
    html_esc(&b, title);
    rl_buf_puts(&b, "</h1>");
    html_message(&b, ok, text);
    html_end(&b);
    return console_send_page(r, status, &b);
}

enum MHD_Result
console_ledger_failed(struct console_req *r, const char *errstr)
{
    rl_log_warn(NULL, "console: %s", errstr);
    return console_send_message(r, MHD_HTTP_SERVICE_UNAVAILABLE, "Unavailable",
                                0, "the ledger could not answer; try again");
}

/* ---- form and query values -------------------------------------------- */

static int
hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

char *
console_form_value(const struct console_req *r, const char *name)
{
    size_t nlen = strlen(name);
    const char *p = r->body;

    while (p && *p) {
        const char *end = strchr(p, '&');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
            const char *v = p + nlen + 1;
            size_t vlen = len - nlen - 1, o = 0;
            char *out = malloc(vlen + 1);

            if (!out)
                return NULL;
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] == '+') {
                    out[o++] = ' ';
                } else if (v[i] == '%' && i + 2 < vlen &&
                           hexval(v[i + 1]) >= 0 && hexval(v[i + 2]) >= 0) {
                    out[o++] = (char)(hexval(v[i + 1]) * 16 + hexval(v[i + 2]));
                    i += 2;
                } else {
                    out[o++] = v[i];
                }
            }
            out[o] = '\0';
            /* A value with a NUL byte in it is no value. */
            if (strlen(out) != o) {
                free(out);
                return NULL;
            }
            return out;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

const char *
console_query_value(const struct console_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

void
console_cut_utf8(char *s, size_t max)
{
    size_t n = strlen(s);

    if (n <= max)
        return;
    /* Back to the first byte of the character that would be split: a
     * continuation byte is 10xxxxxx. */
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    s[n] = '\0';
}

int
console_tenant_visible(const struct console_req *r, const char *tenant)
{
    cJSON *scope, *t;
    int ok = 0;

    if (!r->tenants[0])
        return 1;
    if (!tenant)
        return 0;
    scope = cJSON_Parse(r->tenants);
    cJSON_ArrayForEach(t, scope)
    {
        if (cJSON_IsString(t) && strcmp(t->valuestring, tenant) == 0)
            ok = 1;
    }
    cJSON_Delete(scope);
    return ok;
}

void
console_tenant_filter(const struct console_req *r, cJSON *rows)
{
    int i = 0;

    if (!r->tenants[0] || !cJSON_IsArray(rows))
        return;
    while (i < cJSON_GetArraySize(rows)) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(rows, i), "tenant");

        if (console_tenant_visible(r,
                                   cJSON_IsString(t) ? t->valuestring : NULL))
            i++;
        else
            cJSON_DeleteItemFromArray(rows, i);
    }
}
