/* auth.c: who is signed in to the console. Built-in sign-in with the
 * token `runledger users add` printed ("NAME.SECRET"; the ledger holds
 * its SHA-256), sessions (a random cookie; the ledger holds its SHA-256
 * and expiry), the CSRF token every form carries (derived from the
 * session's secret, so it is per session and never stored), the Origin
 * check, the sign-in rate limits, proxy mode (a trusted header from a
 * trusted address names the user), and whether the user may read a run
 * (its tenant scope). */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "console_int.h"
#include "rl/clock.h"
#include "rl/db_console.h"
#include "rl/err.h"
#include "rl/log.h"
#include "rl/runid.h"

/* ---- rate limits -------------------------------------------------------- */

/* The slot of key, or a slot to take over (an empty one, else the one
 * whose window started first). @locks l->lock held */
static struct console_limit_slot *
limiter_slot(struct console_limiter *l, const char *key, int64_t now)
{
    struct console_limit_slot *oldest = &l->slots[0];

    for (int i = 0; i < CONSOLE_LIMITER_SLOTS; i++) {
        struct console_limit_slot *s = &l->slots[i];

        if (s->key[0] && strcmp(s->key, key) == 0) {
            if (now - s->window_start_ms >= CONSOLE_SIGNIN_WINDOW_MS) {
                s->window_start_ms = now;
                s->failures = 0;
            }
            return s;
        }
        if (!s->key[0] || s->window_start_ms < oldest->window_start_ms)
            oldest = s;
    }
    snprintf(oldest->key, sizeof(oldest->key), "%s", key);
    oldest->window_start_ms = now;
    oldest->failures = 0;
    return oldest;
}

/* 1 when key used up its failures of the current window. */
static int
limiter_blocked(struct console_limiter *l, const char *key)
{
    int blocked;

    pthread_mutex_lock(&l->lock);
    blocked = limiter_slot(l, key, rl_clock_ms())->failures >= l->max;
    pthread_mutex_unlock(&l->lock);
    return blocked;
}

static void
limiter_fail(struct console_limiter *l, const char *key)
{
    pthread_mutex_lock(&l->lock);
    limiter_slot(l, key, rl_clock_ms())->failures++;
    pthread_mutex_unlock(&l->lock);
}

/* ---- cookies, CSRF, Origin ---------------------------------------------- */

/* CSRF token of a session: SHA-256 of a label and the session's secret.
 * A page can print it; it tells nothing about the cookie. */
static void
csrf_of(const char *session, char *csrf)
{
    char buf[16 + RL_TOKEN_HEX_SIZE];

    snprintf(buf, sizeof(buf), "csrf:%s", session);
    if (rl_sha256_hex(buf, strlen(buf), csrf) != 0)
        csrf[0] = '\0';
    OPENSSL_cleanse(buf, sizeof(buf));
}

/* The session cookie's name. Over https it carries the __Host- prefix:
 * browsers then take it only when Secure, for Path=/ and without a
 * Domain, so a sibling subdomain cannot plant or shadow it. */
static const char *
cookie_name(const struct console *c)
{
    return c->secure_cookies ? "__Host-rl_session" : "rl_session";
}

static void
set_session_cookie(struct console_req *r, const char *value, int max_age)
{
    snprintf(r->set_cookie, sizeof(r->set_cookie),
             "%s=%s; HttpOnly; SameSite=Strict; Path=/; "
             "Max-Age=%d%s",
             cookie_name(r->c), value, max_age,
             r->c->secure_cookies ? "; Secure" : "");
}

/* Reads user, role and tenants of a {"name","role","tenants"} object into
 * r. */
static int
take_user(struct console_req *r, const char *json)
{
    cJSON *obj = cJSON_Parse(json);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(obj, "name");
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(obj, "role");
    int ok = cJSON_IsString(name) && cJSON_IsString(role);

    const cJSON *tenants = cJSON_GetObjectItemCaseSensitive(obj, "tenants");

    if (ok) {
        snprintf(r->user, sizeof(r->user), "%s", name->valuestring);
        snprintf(r->role, sizeof(r->role), "%s", role->valuestring);
        r->tenants[0] = '\0';
        if (cJSON_IsArray(tenants)) {
            char *text = cJSON_PrintUnformatted(tenants);

            /* A scope too long to keep would read as no scope: refuse. */
            ok = text && strlen(text) < sizeof(r->tenants);
            if (ok)
                snprintf(r->tenants, sizeof(r->tenants), "%s", text);
            cJSON_free(text);
        }
    }
    cJSON_Delete(obj);
    return ok ? 0 : -1;
}

/* Opens a new session of user: the cookie to set and the CSRF token of
 * the page being answered. */
static int
open_session(struct console_req *r, const char *user, char *errstr,
             size_t errstr_size)
{
    char session[RL_TOKEN_HEX_SIZE], sum[RL_HEX_SIZE];
    int err;

    if (rl_token_new(session) != 0) {
        snprintf(errstr, errstr_size, "the CSPRNG failed");
        return RL_ERR_IO;
    }
    if (rl_sha256_hex(session, strlen(session), sum) != 0) {
        snprintf(errstr, errstr_size, "could not hash the session id");
        return RL_ERR_NOMEM;
    }
    err = rl_db_console_session_open(r->db, sum, user, r->address,
                                     r->c->session_ttl, errstr, errstr_size);
    if (err) {
        OPENSSL_cleanse(session, sizeof(session));
        return err;
    }
    snprintf(r->session, sizeof(r->session), "%s", session);
    csrf_of(session, r->csrf);
    set_session_cookie(r, session, r->c->session_ttl);
    OPENSSL_cleanse(session, sizeof(session));
    return 0;
}

/* The session cookie's value into out (RL_TOKEN_HEX_SIZE), or "". */
static void
session_cookie(const struct console_req *r, char *out)
{
    const char *v = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND,
                                                cookie_name(r->c));

    out[0] = '\0';
    if (v && rl_sha256_hex_valid(v))
        snprintf(out, RL_TOKEN_HEX_SIZE, "%s", v);
}

/* ---- proxy mode --------------------------------------------------------- */

int
console_cidr_parse(const char *text, struct console_cidr *cidr)
{
    char addr[64];
    const char *slash = strchr(text, '/');
    size_t n = slash ? (size_t)(slash - text) : strlen(text);
    char *end;
    long bits;

    if (n == 0 || n >= sizeof(addr))
        return -1;
    memcpy(addr, text, n);
    addr[n] = '\0';
    memset(cidr, 0, sizeof(*cidr));
    if (inet_pton(AF_INET, addr, cidr->addr) == 1) {
        cidr->family = AF_INET;
        bits = 32;
    } else if (inet_pton(AF_INET6, addr, cidr->addr) == 1) {
        cidr->family = AF_INET6;
        bits = 128;
    } else {
        return -1;
    }
    if (slash) {
        long max = bits;

        bits = strtol(slash + 1, &end, 10);
        if (slash[1] == '\0' || *end || bits < 0 || bits > max)
            return -1;
    }
    cidr->bits = (int)bits;
    return 0;
}

static int
cidr_contains(const struct console_cidr *cidr, const char *address)
{
    unsigned char a[16];
    int full, rest;

    if (inet_pton(cidr->family, address, a) != 1)
        return 0;
    full = cidr->bits / 8;
    rest = cidr->bits % 8;
    if (memcmp(a, cidr->addr, (size_t)full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    return (a[full] >> (8 - rest)) == (cidr->addr[full] >> (8 - rest));
}

static int
from_trusted_proxy(const struct console_req *r)
{
    for (int i = 0; i < r->c->nproxies; i++) {
        if (cidr_contains(&r->c->proxies[i], r->peer))
            return 1;
    }
    return 0;
}

/* The slot of r's user in the proxy session cache, or a slot to take
 * over (an empty one, else the oldest). @locks c->proxy_lock held */
static struct console_proxy_session *
proxy_slot(struct console *c, const char *user)
{
    struct console_proxy_session *oldest = &c->proxy_sessions[0];

    for (int i = 0; i < CONSOLE_PROXY_SESSIONS; i++) {
        struct console_proxy_session *p = &c->proxy_sessions[i];

        if (p->user[0] && strcmp(p->user, user) == 0)
            return p;
        if (!p->user[0] || p->opened_ms < oldest->opened_ms)
            oldest = p;
    }
    return oldest;
}

/* Proxy mode: takes the session this process last opened for r->user
 * when the ledger still honours it. Returns 0, or -1 (none). */
static int
proxy_session_reuse(struct console_req *r)
{
    struct console *c = r->c;
    struct console_proxy_session *p;
    char session[RL_TOKEN_HEX_SIZE] = "", sum[RL_HEX_SIZE], errstr[512];
    char *json = NULL;
    int err;

    pthread_mutex_lock(&c->proxy_lock);
    p = proxy_slot(c, r->user);
    if (p->user[0] && strcmp(p->user, r->user) == 0)
        snprintf(session, sizeof(session), "%s", p->session);
    pthread_mutex_unlock(&c->proxy_lock);
    if (!session[0] || rl_sha256_hex(session, strlen(session), sum) != 0) {
        OPENSSL_cleanse(session, sizeof(session));
        return -1;
    }
    err = rl_db_console_session_json(r->db, sum, c->session_idle, &json, errstr,
                                     sizeof(errstr));
    free(json);
    if (err) {
        OPENSSL_cleanse(session, sizeof(session));
        return -1;
    }
    snprintf(r->session, sizeof(r->session), "%s", session);
    csrf_of(session, r->csrf);
    set_session_cookie(r, session, c->session_ttl);
    OPENSSL_cleanse(session, sizeof(session));
    return 0;
}

/* Proxy mode: remembers r's new session as its user's. */
static void
proxy_session_keep(struct console_req *r)
{
    struct console *c = r->c;
    struct console_proxy_session *p;

    pthread_mutex_lock(&c->proxy_lock);
    p = proxy_slot(c, r->user);
    snprintf(p->user, sizeof(p->user), "%s", r->user);
    snprintf(p->session, sizeof(p->session), "%s", r->session);
    p->opened_ms = rl_clock_ms();
    pthread_mutex_unlock(&c->proxy_lock);
}

/* Proxy mode: the user the proxy names gets the role `runledger users`
 * gives it, and a session of its own (for the CSRF token) when the
 * cookie holds none of that user. */
static int
identify_by_proxy(struct console_req *r, const char *name)
{
    char errstr[512], *json = NULL;
    int err;

    if (r->user[0] && strcmp(r->user, name) == 0)
        return 0;
    r->user[0] = r->role[0] = r->csrf[0] = r->session[0] = '\0';
    err = rl_db_console_user_json(r->db, name, &json, errstr, sizeof(errstr));
    if (err == RL_ERR_NOTFOUND) {
        rl_log_warn(NULL,
                    "console: the proxy named %s, who is no console "
                    "user; refused",
                    name);
        snprintf(r->refused_name, sizeof(r->refused_name), "%s", name);
        return 0;
    }
    if (err)
        goto failed;
    err = take_user(r, json);
    free(json);
    if (err)
        return -1;
    /* A client of the proxy that keeps no cookie (a script, a health
     * check) reuses the session this process opened for the user last,
     * rather than adding a row per request. */
    if (proxy_session_reuse(r) == 0)
        return 0;
    err = open_session(r, r->user, errstr, sizeof(errstr));
    if (err)
        goto failed;
    proxy_session_keep(r);
    return 0;

failed:
    rl_log_warn(NULL, "console: %s", errstr);
    r->user[0] = r->role[0] = '\0';
    return -1;
}

/* The header lines of one name, as libmicrohttpd received them. */
struct header_lines {
    const char *name;
    const char *last; /* the value of the last line */
    int count;
};

static enum MHD_Result
header_line(void *cls, enum MHD_ValueKind kind, const char *key,
            const char *value)
{
    struct header_lines *h = cls;

    (void)kind;
    if (key && strcasecmp(key, h->name) == 0) {
        h->count++;
        h->last = value;
    }
    return MHD_YES;
}

static struct header_lines
header_lines_of(const struct console_req *r, const char *name)
{
    struct header_lines h = {.name = name};

    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, header_line, &h);
    return h;
}

int
console_user_header_repeated(const struct console_req *r)
{
    return r->c->trusted_header[0] &&
           header_lines_of(r, r->c->trusted_header).count > 1;
}

int
console_cidr_too_wide(const struct console_cidr *cidr)
{
    return cidr->bits < (cidr->family == AF_INET ? CONSOLE_CIDR_MIN_BITS_V4
                                                 : CONSOLE_CIDR_MIN_BITS_V6);
}

void
console_forwarded_address(struct console_req *r)
{
    const char *xff, *last;
    char addr[CONSOLE_ADDRESS_MAX];
    unsigned char bin[16];
    size_t len;

    if (!r->c->trusted_header[0] || !from_trusted_proxy(r))
        return;
    /* A proxy that adds its own line (HAProxy) leaves the client's lines
     * before it: the last line holds the entry the trusted proxy wrote. */
    xff = header_lines_of(r, "X-Forwarded-For").last;
    if (!xff)
        return;
    /* The entry the trusted proxy appended is the last one; any before it
     * came from the client and may be anything. */
    last = strrchr(xff, ',');
    last = last ? last + 1 : xff;
    while (*last == ' ')
        last++;
    len = strcspn(last, " ");
    if (len == 0 || len >= sizeof(addr))
        return;
    memcpy(addr, last, len);
    addr[len] = '\0';
    if (inet_pton(AF_INET, addr, bin) == 1 ||
        inet_pton(AF_INET6, addr, bin) == 1)
        snprintf(r->address, sizeof(r->address), "%s", addr);
}

int
console_identify(struct console_req *r)
{
    char session[RL_TOKEN_HEX_SIZE], sum[RL_HEX_SIZE], errstr[512];
    char *json = NULL;
    const char *proxied = NULL;
    int err;

    if (r->c->trusted_header[0]) {
        const char *v = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                    r->c->trusted_header);

        /* From any other address the header is anyone's to send. */
        if (v && *v && from_trusted_proxy(r))
            proxied = v;
    }
    session_cookie(r, session);
    if (session[0]) {
        if (rl_sha256_hex(session, strlen(session), sum) != 0)
            return -1;
        err = rl_db_console_session_json(r->db, sum, r->c->session_idle, &json,
                                         errstr, sizeof(errstr));
        if (err == 0) {
            err = take_user(r, json);
            free(json);
            if (err)
                return -1;
            snprintf(r->session, sizeof(r->session), "%s", session);
            csrf_of(session, r->csrf);
        } else if (err != RL_ERR_NOTFOUND) {
            rl_log_warn(NULL, "console: %s", errstr);
            return -1;
        }
    }
    OPENSSL_cleanse(session, sizeof(session));
    if (proxied)
        return identify_by_proxy(r, proxied);
    /* Behind the proxy only the proxy's word counts: a session cookie
     * without the header is not honoured. */
    if (r->c->trusted_header[0] && !proxied)
        r->user[0] = r->role[0] = r->csrf[0] = r->session[0] = '\0';
    return 0;
}

int
console_origin_ok(const struct console_req *r)
{
    const char *origin =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
    const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_HOST);
    char want[320];

    if (!origin)
        return 0;
    if (r->c->origin[0])
        return strcmp(origin, r->c->origin) == 0;
    if (!host)
        return 0;
    snprintf(want, sizeof(want), "%s://%s",
             r->c->secure_cookies ? "https" : "http", host);
    return strcmp(origin, want) == 0;
}

int
console_post_allowed(struct console_req *r, char *reason, size_t reason_size)
{
    char *csrf = console_form_value(r, "csrf");
    int ok;

    if (!console_origin_ok(r)) {
        free(csrf);
        snprintf(reason, reason_size,
                 "refused: the form was not sent from this console (its "
                 "Origin is missing or foreign)");
        return 0;
    }
    ok = csrf && r->csrf[0] && rl_token_equal(csrf, r->csrf);
    free(csrf);
    if (!ok)
        snprintf(reason, reason_size,
                 "refused: the form carries no valid CSRF token; reload the "
                 "page and try again");
    return ok;
}

/* ---- sign-in and sign-out ----------------------------------------------- */

static void
signin_page(struct rl_buf *b, const struct console_req *r, const char *error)
{
    html_begin(b, r, "Sign in");
    rl_buf_puts(b, "<h1>Sign in</h1>");
    if (error)
        html_message(b, 0, error);
    rl_buf_puts(
        b, "<form method=\"post\" action=\"/signin\">"
           "<p><label for=\"token\">Sign-in token</label><br>"
           "<input type=\"password\" id=\"token\" name=\"token\" size=\"80\" "
           "autocomplete=\"off\" required></p>"
           "<p><button type=\"submit\" id=\"signin\">Sign in</button></p>"
           "</form><p>The token is the last line `runledger users add` "
           "printed.</p>");
    html_end(b);
}

enum MHD_Result
console_signin_form(struct console_req *r)
{
    struct rl_buf b = {0};

    signin_page(&b, r, NULL);
    return console_send_page(r, MHD_HTTP_OK, &b);
}

enum MHD_Result
console_signin(struct console_req *r)
{
    /* Compared against when the name is unknown, so a wrong name and a
     * wrong secret take the same time. */
    static const char no_user_sha[] =
        "0000000000000000000000000000000000000000000000000000000000000000";
    struct rl_buf b = {0};
    char name[CONSOLE_NAME_MAX] = "", sum[RL_HEX_SIZE], errstr[512];
    char *token = NULL, *json = NULL, *dot;
    const char *stored = no_user_sha;
    cJSON *obj = NULL;
    int ok = 0, err;

    if (!console_origin_ok(r))
        return console_send_message(r, MHD_HTTP_FORBIDDEN, "Forbidden", 0,
                                    "refused: the form was not sent from "
                                    "this console");
    token = console_form_value(r, "token");
    dot = token ? strrchr(token, '.') : NULL;
    if (dot && (size_t)(dot - token) < sizeof(name) &&
        rl_sha256_hex_valid(dot + 1)) {
        memcpy(name, token, (size_t)(dot - token));
        name[dot - token] = '\0';
    }
    if (name[0]) {
        err =
            rl_db_console_user_json(r->db, name, &json, errstr, sizeof(errstr));
        if (err && err != RL_ERR_NOTFOUND) {
            rl_log_warn(NULL, "console: %s", errstr);
            goto unavailable;
        }
        obj = json ? cJSON_Parse(json) : NULL;
        if (cJSON_IsString(
                cJSON_GetObjectItemCaseSensitive(obj, "token_sha256")))
            stored = cJSON_GetObjectItemCaseSensitive(obj, "token_sha256")
                         ->valuestring;
    }
    if (token && rl_sha256_hex(token, strlen(token), sum) == 0)
        ok = rl_token_equal(sum, stored) && stored != no_user_sha;
    if (token)
        OPENSSL_cleanse(token, strlen(token));
    free(token);
    token = NULL;
    /* The limits count failures only and never refuse the right token:
     * every client behind the Ingress shares one address, so refusing it
     * would let anyone's bad tries lock every user out. */
    if (!ok && (limiter_blocked(&r->c->by_address, r->address) ||
                (name[0] && limiter_blocked(&r->c->by_user, name)))) {
        cJSON_Delete(obj);
        free(json);
        goto limited;
    }
    if (!ok) {
        limiter_fail(&r->c->by_address, r->address);
        if (name[0])
            limiter_fail(&r->c->by_user, name);
        rl_log_warn(NULL, "console: sign-in refused from %s%s%s", r->address,
                    name[0] ? " for user " : "", name);
        cJSON_Delete(obj);
        free(json);
        signin_page(&b, r, "sign-in refused: the token is not valid");
        return console_send_page(r, MHD_HTTP_UNAUTHORIZED, &b);
    }
    cJSON_Delete(obj);
    free(json);
    json = NULL;
    obj = NULL;
    err = open_session(r, name, errstr, sizeof(errstr));
    if (err) {
        rl_log_warn(NULL, "console: %s", errstr);
        goto unavailable;
    }
    rl_log_info(NULL, "console: %s signed in from %s", name, r->address);
    return console_send(r, MHD_HTTP_SEE_OTHER, "text/plain",
                        strdup("signed in\n"), 10, "/approvals");

limited:
    if (token)
        OPENSSL_cleanse(token, strlen(token));
    free(token);
    rl_log_warn(NULL, "console: sign-in rate-limited from %s%s%s", r->address,
                name[0] ? " for user " : "", name);
    signin_page(&b, r, "too many failed sign-ins; wait a minute and try again");
    return console_send_page(r, MHD_HTTP_TOO_MANY_REQUESTS, &b);

unavailable:
    cJSON_Delete(obj);
    free(json);
    return console_send_message(r, MHD_HTTP_SERVICE_UNAVAILABLE, "Unavailable",
                                0, "the ledger cannot be reached; try again");
}

enum MHD_Result
console_signout(struct console_req *r)
{
    char sum[RL_HEX_SIZE], errstr[512];

    if (r->session[0] &&
        rl_sha256_hex(r->session, strlen(r->session), sum) == 0 &&
        rl_db_console_session_close(r->db, sum, errstr, sizeof(errstr)) != 0)
        rl_log_warn(NULL, "console: %s", errstr);
    rl_log_info(NULL, "console: %s signed out", r->user);
    set_session_cookie(r, "", 0);
    return console_send(r, MHD_HTTP_SEE_OTHER, "text/plain",
                        strdup("signed out\n"), 11, "/signin");
}

int
console_run_visible(struct console_req *r, const char *run_id, char *errstr,
                    size_t errstr_size)
{
    char *json = NULL;
    int err = rl_db_console_run_json(r->db, run_id, r->user, &json, errstr,
                                     errstr_size);

    free(json);
    return err;
}
