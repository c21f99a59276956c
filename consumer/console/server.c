/* server.c: `runledger console`: the web console's process. Arguments,
 * the HTTP server (libmicrohttpd, a thread per connection, so /healthz
 * never waits behind a page) and the routes: which page answers which
 * request. The pages are a file each by what
 * they show (approvals.c, runs.c, run.c, deadletters.c, reports.c,
 * schedules.c),
 * sign-in is auth.c; they answer through respond.c and borrow ledger
 * connections from pool.c, and never call back into this file. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "console_int.h"
#include "mhd_log.h"
#include "rl/config.h"
#include "rl/db_conn.h"
#include "rl/db_console.h"
#include "rl/log.h"
#include "rl/runid.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger console --listen ADDR:PORT [--base-url URL]\n"
"                         [--secure-cookies] [--session-ttl SECONDS]\n"
"                         [--trusted-user-header H --trusted-proxy CIDR[,CIDR]\n"
"                          [--force]]\n"
"\n"
"Serves the web console: the approvals queue and the approval page, runs\n"
"and run pages, and the schedules with their windows. People sign in with\n"
"the token `runledger users add` printed, or through an authenticating\n"
"proxy (--trusted-user-header, only from --trusted-proxy addresses). Runs\n"
"until SIGTERM or SIGINT.\n"
"\n"
"  --listen ADDR:PORT      address to serve on ([::1]:8090 for IPv6)\n"
"  --base-url URL          the console's public URL (scheme://host[:port]);\n"
"                          POSTs must come from its origin (default: the\n"
"                          request's Host over http)\n"
"  --secure-cookies        mark the session cookie Secure (behind TLS)\n"
"  --session-ttl SECONDS   how long a sign-in lasts (default 43200)\n"
"  --trusted-user-header H the header an authenticating proxy names the\n"
"                          user in (e.g. X-Forwarded-User)\n"
"  --trusted-proxy CIDRS   the proxy's networks; the header is ignored from\n"
"                          any other address. Wider than a /8 (IPv4) or a\n"
"                          /32 (IPv6) is refused without --force\n"
"  --force                 accept a trusted proxy network that wide\n"
"\n"
"The ledger is DATABASE_URL (see `runledger config`); docs/console.md.\n"
"Exit status: 0 stopped by a signal; 1 could not serve; 2 bad usage.\n";
/* clang-format on */

/* ---- routes ------------------------------------------------------------ */

/* The state of one request across libmicrohttpd's calls: the body read
 * so far. */
struct console_upload {
    struct rl_buf body;
    int too_big;
};

/* "/deadletters/P-O/replay" into its partition and offset. */
static int
dead_letter_id(const char *url, int32_t *partition, int64_t *offset)
{
    static const char prefix[] = "/deadletters/";
    const char *p = url + sizeof(prefix) - 1;
    char *end;
    long long part, off;

    if (strncmp(url, prefix, sizeof(prefix) - 1) != 0 || *p < '0' || *p > '9')
        return -1;
    errno = 0;
    part = strtoll(p, &end, 10);
    if (errno || *end != '-' || part > INT32_MAX || end[1] < '0' ||
        end[1] > '9')
        return -1;
    off = strtoll(end + 1, &end, 10);
    if (errno || strcmp(end, "/replay") != 0)
        return -1;
    *partition = (int32_t)part;
    *offset = off;
    return 0;
}

/* 1 when url names a page of the console for a GET (get) or a POST. */
static int
is_page(const char *url, int get)
{
    int32_t partition;
    int64_t offset;

    if (strcmp(url, "/signin") == 0 || strcmp(url, "/signout") == 0)
        return 1;
    if (strncmp(url, "/approvals/", 11) == 0 && rl_sha256_hex_valid(url + 11))
        return 1;
    if (strncmp(url, "/runs/", 6) == 0 && strlen(url) > 6 + 64) {
        char run_id[65];

        memcpy(run_id, url + 6, 64);
        run_id[64] = '\0';
        return !get && rl_sha256_hex_valid(run_id) &&
               strcmp(url + 70, "/action") == 0;
    }
    if (!get)
        return dead_letter_id(url, &partition, &offset) == 0;
    return strcmp(url, "/") == 0 || strcmp(url, "/approvals") == 0 ||
           strcmp(url, "/runs") == 0 || strcmp(url, "/costs") == 0 ||
           strcmp(url, "/limits") == 0 || strcmp(url, "/deadletters") == 0 ||
           strcmp(url, "/schedules") == 0 ||
           (strncmp(url, "/schedules/", 11) == 0 &&
            console_schedule_name_valid(url + 11)) ||
           (strncmp(url, "/runs/", 6) == 0 && rl_sha256_hex_valid(url + 6));
}

static enum MHD_Result
route(struct console_req *r)
{
    const char *url = r->url;
    int get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
    int post = strcmp(r->method, "POST") == 0;

    if (get && strcmp(url, "/healthz") == 0)
        return console_send(r, MHD_HTTP_OK, "text/plain; charset=utf-8",
                            strdup("ok\n"), 3, NULL);
    if (get && strcmp(url, "/static/console.css") == 0)
        return console_send(r, MHD_HTTP_OK, "text/css", strdup(console_css),
                            strlen(console_css), NULL);
    /* Browsers ask for it on every first visit; a 404 would be noise in
     * their console. */
    if (get && strcmp(url, "/favicon.ico") == 0)
        return console_send(r, MHD_HTTP_NO_CONTENT, "image/x-icon", NULL, 0,
                            NULL);
    if (!get && !post)
        return console_send_message(r, MHD_HTTP_METHOD_NOT_ALLOWED,
                                    "Not allowed", 0,
                                    "this method is not allowed here");
    if (r->body_too_big)
        return console_send_message(r, MHD_HTTP_CONTENT_TOO_LARGE, "Too large",
                                    0, "the form is too large");
    /* Only a request for a page takes a ledger connection: a path that
     * names no page is answered without one. */
    if (!is_page(url, 1) && !is_page(url, 0))
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "no such page");
    if (console_pool_take(r->c, r) != 0)
        return console_send_message(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                                    "Unavailable", 0,
                                    "the ledger cannot be reached; try again");
    if (console_user_header_repeated(r))
        return console_send_message(r, MHD_HTTP_BAD_REQUEST, "Bad request", 0,
                                    "refused: the request names its user "
                                    "more than once");
    if (strcmp(url, "/signin") == 0)
        return get ? console_signin_form(r) : console_signin(r);
    if (console_identify(r) != 0)
        return console_send_message(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                                    "Unavailable", 0,
                                    "the ledger cannot be reached; try again");
    if (!r->user[0] && r->c->trusted_header[0]) {
        /* Behind the proxy the token sign-in cannot help: say why. */
        char text[CONSOLE_NAME_MAX + 160];

        if (r->refused_name[0])
            snprintf(text, sizeof(text),
                     "signed in at the proxy as %s, who is no console user "
                     "(an operator adds the name with runledger users add)",
                     r->refused_name);
        else
            snprintf(text, sizeof(text),
                     "this console signs people in through its "
                     "authenticating proxy: open it through the proxy");
        return console_send_message(r, MHD_HTTP_FORBIDDEN, "Forbidden", 0,
                                    text);
    }
    if (!r->user[0]) {
        if (post)
            return console_send_message(r, MHD_HTTP_FORBIDDEN, "Forbidden", 0,
                                        "sign in first");
        return console_send(r, MHD_HTTP_SEE_OTHER, "text/plain",
                            strdup("sign in\n"), 8, "/signin");
    }
    if (post) {
        char reason[160];
        int32_t partition;
        int64_t offset;

        if (!console_post_allowed(r, reason, sizeof(reason)))
            return console_send_message(r, MHD_HTTP_FORBIDDEN, "Forbidden", 0,
                                        reason);
        if (strcmp(url, "/signout") == 0)
            return console_signout(r);
        if (strncmp(url, "/approvals/", 11) == 0 &&
            rl_sha256_hex_valid(url + 11))
            return console_decide(r, url + 11);
        if (dead_letter_id(url, &partition, &offset) == 0)
            return console_deadletter_replay(r, partition, offset);
        if (strncmp(url, "/runs/", 6) == 0 && strlen(url) == 6 + 64 + 7 &&
            strcmp(url + 70, "/action") == 0) {
            char run_id[65];

            memcpy(run_id, url + 6, 64);
            run_id[64] = '\0';
            if (rl_sha256_hex_valid(run_id))
                return console_run_action(r, run_id);
        }
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "no such page");
    }
    if (strcmp(url, "/") == 0)
        return console_send(r, MHD_HTTP_SEE_OTHER, "text/plain",
                            strdup("approvals\n"), 10, "/approvals");
    if (strcmp(url, "/approvals") == 0)
        return console_approvals(r);
    if (strncmp(url, "/approvals/", 11) == 0 && rl_sha256_hex_valid(url + 11))
        return console_approval(r, url + 11);
    if (strcmp(url, "/runs") == 0)
        return console_runs(r);
    if (strcmp(url, "/costs") == 0)
        return console_costs(r);
    if (strcmp(url, "/limits") == 0)
        return console_limits(r);
    if (strcmp(url, "/deadletters") == 0)
        return console_deadletters(r);
    if (strcmp(url, "/schedules") == 0)
        return console_schedules(r);
    if (strncmp(url, "/schedules/", 11) == 0 &&
        console_schedule_name_valid(url + 11))
        return console_schedule(r, url + 11);
    if (strncmp(url, "/runs/", 6) == 0 && rl_sha256_hex_valid(url + 6))
        return console_run(r, url + 6);
    return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                "no such page");
}

/* @locality libmicrohttpd's worker threads */
static enum MHD_Result
handle(void *cls, struct MHD_Connection *conn, const char *url,
       const char *method, const char *version, const char *upload_data,
       size_t *upload_data_size, void **con_cls)
{
    struct console *c = cls;
    struct console_upload *up = *con_cls;
    struct console_req r;
    const union MHD_ConnectionInfo *ci;
    enum MHD_Result ret;

    (void)version;
    if (!up) {
        const char *length = MHD_lookup_connection_value(
            conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

        /* A body announced over the limit is refused before a byte of it
         * is read: libmicrohttpd answers and closes the connection. */
        if (length && strtoull(length, NULL, 10) > CONSOLE_BODY_MAX) {
            memset(&r, 0, sizeof(r));
            r.c = c;
            r.conn = conn;
            r.db_slot = -1;
            return console_send_message(&r, MHD_HTTP_CONTENT_TOO_LARGE,
                                        "Too large", 0,
                                        "the form is too large");
        }
        up = calloc(1, sizeof(*up));
        if (!up)
            return MHD_NO;
        *con_cls = up;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        /* A body sent without a length (chunked) is cut off at the
         * limit: the connection is closed rather than read to its end. */
        if (up->body.len + *upload_data_size > CONSOLE_BODY_MAX)
            return MHD_NO;
        rl_buf_put(&up->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }

    memset(&r, 0, sizeof(r));
    r.c = c;
    r.conn = conn;
    r.method = method;
    r.url = url;
    r.db_slot = -1;
    r.body = up->body.data ? up->body.data : (char *)"";
    r.body_len = up->body.len;
    r.body_too_big = up->too_big || up->body.failed;
    ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;

        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
                      r.address, sizeof(r.address));
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr,
                      r.address, sizeof(r.address));
    }
    snprintf(r.peer, sizeof(r.peer), "%s", r.address);
    console_forwarded_address(&r);
    ret = route(&r);
    console_pool_give(c, &r);
    return ret;
}

static void
completed(void *cls, struct MHD_Connection *conn, void **con_cls,
          enum MHD_RequestTerminationCode toe)
{
    struct console_upload *up = *con_cls;

    (void)cls;
    (void)conn;
    (void)toe;
    if (up) {
        rl_buf_free(&up->body);
        free(up);
        *con_cls = NULL;
    }
}

/* ---- arguments ---------------------------------------------------------- */

static int usage_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int
usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "runledger console: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see runledger console --help)\n");
    return RL_EXIT_USAGE;
}

/* "ADDR:PORT" or "[V6]:PORT" into c. */
static int
parse_listen(struct console *c, const char *text)
{
    const char *colon = strrchr(text, ':');
    const char *host = text;
    size_t hlen;
    char *end;
    long port;

    if (!colon)
        return -1;
    hlen = (size_t)(colon - text);
    if (hlen >= 2 && text[0] == '[' && text[hlen - 1] == ']') {
        host = text + 1;
        hlen -= 2;
    }
    if (hlen == 0 || hlen >= sizeof(c->listen_address))
        return -1;
    memcpy(c->listen_address, host, hlen);
    c->listen_address[hlen] = '\0';
    errno = 0;
    port = strtol(colon + 1, &end, 10);
    if (errno || *end || colon[1] == '\0' || port < 0 || port > 65535)
        return -1;
    c->port = (int)port;
    return 0;
}

/* The origin of a base URL: scheme://host[:port], without a path. */
static int
parse_base_url(struct console *c, const char *url)
{
    const char *rest;
    size_t n;

    if (strncmp(url, "http://", 7) == 0)
        rest = url + 7;
    else if (strncmp(url, "https://", 8) == 0)
        rest = url + 8;
    else
        return -1;
    n = strcspn(rest, "/?#");
    if (n == 0 || strlen(url) >= sizeof(c->base_url))
        return -1;
    snprintf(c->base_url, sizeof(c->base_url), "%s", url);
    while (strlen(c->base_url) > 0 &&
           c->base_url[strlen(c->base_url) - 1] == '/')
        c->base_url[strlen(c->base_url) - 1] = '\0';
    snprintf(c->origin, sizeof(c->origin), "%.*s", (int)(rest - url + n), url);
    return 0;
}

static int
parse_proxies(struct console *c, const char *list)
{
    char buf[1024], *save = NULL, *tok;

    if (strlen(list) >= sizeof(buf))
        return -1;
    snprintf(buf, sizeof(buf), "%s", list);
    for (tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (c->nproxies >= CONSOLE_CIDR_MAX ||
            console_cidr_parse(tok, &c->proxies[c->nproxies]) != 0)
            return -1;
        c->nproxies++;
    }
    return c->nproxies > 0 ? 0 : -1;
}

/* Ends the command on bad usage with the configuration freed. */
static int
done_usage(struct rl_config *cfg, int rc)
{
    rl_config_destroy(cfg);
    return rc;
}

/* The RUNLEDGER_CONSOLE_* settings into c; *listen borrows cfg's. */
static int
settings_apply(struct console *c, const struct rl_config *cfg,
               const char **listen)
{
    c->session_ttl = cfg->console_session_ttl;
    c->session_idle = cfg->console_session_idle;
    c->secure_cookies = cfg->console_secure_cookies;
    if (cfg->console_listen && *cfg->console_listen)
        *listen = cfg->console_listen;
    if (cfg->console_base_url && *cfg->console_base_url &&
        parse_base_url(c, cfg->console_base_url) != 0)
        return usage_error("RUNLEDGER_CONSOLE_BASE_URL %s is not an http(s) "
                           "URL",
                           cfg->console_base_url);
    if (cfg->console_trusted_header && *cfg->console_trusted_header) {
        if (strlen(cfg->console_trusted_header) >= sizeof(c->trusted_header))
            return usage_error("%s", "RUNLEDGER_CONSOLE_TRUSTED_USER_HEADER "
                                     "is too long");
        snprintf(c->trusted_header, sizeof(c->trusted_header), "%s",
                 cfg->console_trusted_header);
    }
    if (cfg->console_trusted_proxies && *cfg->console_trusted_proxies &&
        parse_proxies(c, cfg->console_trusted_proxies) != 0)
        return usage_error("RUNLEDGER_CONSOLE_TRUSTED_PROXY \"%s\" is not a "
                           "list of CIDRs (at most 16)",
                           cfg->console_trusted_proxies);
    return RL_EXIT_OK;
}

static void
console_destroy(struct console *c)
{
    if (c->daemon)
        MHD_stop_daemon(c->daemon);
    for (int i = 0; i < CONSOLE_DB_POOL; i++)
        rl_db_destroy(c->db[i]);
    pthread_mutex_destroy(&c->pool_lock);
    pthread_cond_destroy(&c->pool_free);
    pthread_mutex_destroy(&c->by_address.lock);
    pthread_mutex_destroy(&c->by_user.lock);
    pthread_mutex_destroy(&c->proxy_lock);
    pthread_mutex_destroy(&c->kafka_lock);
    OPENSSL_cleanse(c->proxy_sessions, sizeof(c->proxy_sessions));
}

int
rl_cmd_console(int argc, char **argv)
{
    enum {
        OPT_LISTEN = 1,
        OPT_BASE_URL,
        OPT_SECURE,
        OPT_TTL,
        OPT_HEADER,
        OPT_PROXY,
        OPT_FORCE
    };
    static const struct option options[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"base-url", required_argument, NULL, OPT_BASE_URL},
        {"secure-cookies", no_argument, NULL, OPT_SECURE},
        {"session-ttl", required_argument, NULL, OPT_TTL},
        {"trusted-user-header", required_argument, NULL, OPT_HEADER},
        {"trusted-proxy", required_argument, NULL, OPT_PROXY},
        {"force", no_argument, NULL, OPT_FORCE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static struct console c;
    struct rl_config *cfg;
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    char errstr[1024], *end;
    const char *listen = NULL;
    sigset_t sigs;
    int family, opt, sig = 0, level, rc, force = 0;
    long ttl;

    memset(&c, 0, sizeof(c));
    cfg = rl_config_load(errstr, sizeof(errstr));
    if (!cfg) {
        fprintf(stderr, "runledger console: %s\n", errstr);
        return RL_EXIT_USAGE;
    }
    /* The settings first (RUNLEDGER_CONSOLE_*), then the flags over them. */
    rc = settings_apply(&c, cfg, &listen);
    if (rc != RL_EXIT_OK) {
        rl_config_destroy(cfg);
        return rc;
    }
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (opt) {
        case OPT_LISTEN:
            listen = optarg;
            break;
        case OPT_BASE_URL:
            if (parse_base_url(&c, optarg) != 0)
                return done_usage(
                    cfg,
                    usage_error("--base-url %s is not an http(s) URL", optarg));
            break;
        case OPT_SECURE:
            c.secure_cookies = 1;
            break;
        case OPT_TTL:
            errno = 0;
            ttl = strtol(optarg, &end, 10);
            if (errno || *end || ttl < 60 || ttl > 30 * 86400)
                return done_usage(
                    cfg, usage_error("--session-ttl must be 60 to 2592000 "
                                     "seconds, not \"%s\"",
                                     optarg));
            c.session_ttl = (int)ttl;
            break;
        case OPT_HEADER:
            if (!*optarg || strlen(optarg) >= sizeof(c.trusted_header))
                return done_usage(
                    cfg, usage_error("--trusted-user-header \"%s\" is not a "
                                     "header name",
                                     optarg));
            snprintf(c.trusted_header, sizeof(c.trusted_header), "%s", optarg);
            break;
        case OPT_PROXY:
            c.nproxies = 0;
            if (parse_proxies(&c, optarg) != 0)
                return done_usage(
                    cfg, usage_error("--trusted-proxy \"%s\" is not a list of "
                                     "CIDRs (at most 16)",
                                     optarg));
            break;
        case OPT_FORCE:
            force = 1;
            break;
        case 'h':
            fputs(usage_text, stdout);
            rl_config_destroy(cfg);
            return RL_EXIT_OK;
        default:
            return done_usage(cfg,
                              usage_error("bad option %s", argv[optind - 1]));
        }
    }
    if (optind < argc)
        return done_usage(
            cfg, usage_error("unexpected argument \"%s\"", argv[optind]));
    if (!listen || parse_listen(&c, listen) != 0)
        return done_usage(
            cfg, usage_error("--listen ADDR:PORT is required, not \"%s\"",
                             listen ? listen : ""));
    if (!!c.trusted_header[0] != (c.nproxies > 0))
        return done_usage(
            cfg, usage_error("%s", "--trusted-user-header and --trusted-proxy "
                                   "go together"));
    for (int i = 0; i < c.nproxies && !force; i++) {
        if (console_cidr_too_wide(&c.proxies[i]))
            return done_usage(
                cfg, usage_error("a trusted proxy network wider than a /%d "
                                 "(IPv4) or /%d (IPv6) trusts the user "
                                 "header from too many addresses; narrow it "
                                 "or add --force",
                                 CONSOLE_CIDR_MIN_BITS_V4,
                                 CONSOLE_CIDR_MIN_BITS_V6));
    }
    if (c.base_url[0] && strncmp(c.base_url, "https://", 8) == 0)
        c.secure_cookies = 1;

    level = rl_log_level_parse(cfg->log_level);
    rl_log_set_level(level >= 0 ? level : RL_LOG_INFO);
    c.database_url = cfg->database_url;
    c.cfg = cfg;
    pthread_mutex_init(&c.pool_lock, NULL);
    pthread_cond_init(&c.pool_free, NULL);
    pthread_mutex_init(&c.by_address.lock, NULL);
    pthread_mutex_init(&c.by_user.lock, NULL);
    pthread_mutex_init(&c.proxy_lock, NULL);
    pthread_mutex_init(&c.kafka_lock, NULL);
    c.by_address.max = CONSOLE_SIGNIN_PER_ADDRESS;
    c.by_user.max = CONSOLE_SIGNIN_PER_USER;

    /* The ledger must answer before the console does: a console that
     * listens without it would only serve 503s. */
    c.db[0] =
        rl_db_connect_role(cfg, RL_DB_ROLE_CONSOLE, errstr, sizeof(errstr));
    if (!c.db[0]) {
        fprintf(stderr, "runledger console: %s\n", errstr);
        goto fail;
    }

    memset(&v4, 0, sizeof(v4));
    memset(&v6, 0, sizeof(v6));
    if (inet_pton(AF_INET, c.listen_address, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons((uint16_t)c.port);
        family = AF_INET;
    } else if (inet_pton(AF_INET6, c.listen_address, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons((uint16_t)c.port);
        family = AF_INET6;
    } else {
        console_destroy(&c);
        return done_usage(
            cfg, usage_error("--listen: %s is not an IPv4 or IPv6 address",
                             c.listen_address));
    }

    /* Signals are taken by sigwait below; the server's threads inherit
     * the mask and never see them. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    c.daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
            MHD_USE_POLL | MHD_USE_ERROR_LOG |
            (family == AF_INET6 ? MHD_USE_IPv6 : 0),
        (uint16_t)c.port, NULL, NULL, handle, &c, MHD_OPTION_EXTERNAL_LOGGER,
        rl_mhd_log, "console http", MHD_OPTION_SOCK_ADDR,
        family == AF_INET6 ? (struct sockaddr *)&v6 : (struct sockaddr *)&v4,
        MHD_OPTION_CONNECTION_LIMIT, 1024u, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        64u, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
        MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
    if (!c.daemon) {
        fprintf(stderr,
                "runledger console: could not serve on %s port %d "
                "(taken?)\n",
                c.listen_address, c.port);
        goto fail;
    }
    rl_log_info(
        NULL, "console: serving on %s port %d%s", c.listen_address, c.port,
        c.trusted_header[0] ? " (trusting the proxy's user header)" : "");
    while (sigwait(&sigs, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
        ;
    rl_log_info(NULL, "console: stopping on signal %d", sig);
    console_destroy(&c);
    rl_config_destroy(cfg);
    return RL_EXIT_OK;

fail:
    console_destroy(&c);
    rl_config_destroy(cfg);
    return RL_EXIT_FAILURE;
}
