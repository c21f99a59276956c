#ifndef RL_CONSOLE_INT_H
#define RL_CONSOLE_INT_H

/* What the files of consumer/console/ share: the router (server.c), the
 * ledger connections (pool.c), responses and form values (respond.c), who
 * is signed in and what a form must carry (auth.c), the pages by what
 * they show (approvals.c, runs.c, run.c, deadletters.c, reports.c,
 * schedules.c, with timeline.c for a run's timeline) and the HTML they are
 * written in (html.c). The pages are called by server.c and never call it back.
 * The console is a process of its own (`runledger console`) on connections of
 * its own: it adds no load to the workers' hot path. */

#include <microhttpd.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rl/buf.h"
#include "rl/token.h"

struct cJSON;
struct rl_config;
struct rl_db;

/* A body bigger than this is refused: every form of the console is a few
 * hundred bytes. */
#define CONSOLE_BODY_MAX 16384
#define CONSOLE_DB_POOL 4
#define CONSOLE_NAME_MAX 65
/* Bytes of a reason the ledger keeps (the forms' maxlength). */
#define CONSOLE_REASON_MAX 500
#define CONSOLE_ADDRESS_MAX 64

/* Failed sign-ins allowed per window, per client address and per user
 * name, before a wrong token is answered 429 until the window ends (the
 * right token still signs in). */
#define CONSOLE_SIGNIN_WINDOW_MS 60000
#define CONSOLE_SIGNIN_PER_ADDRESS 10
#define CONSOLE_SIGNIN_PER_USER 5
/* Entries each limiter tracks: its memory is bounded whatever the
 * traffic; when full, the entry whose window started first is reused. */
#define CONSOLE_LIMITER_SLOTS 1024

struct console_limit_slot {
    char key[CONSOLE_NAME_MAX + 8];
    int64_t window_start_ms;
    int failures;
};

struct console_limiter {
    pthread_mutex_t lock;
    int max;
    struct console_limit_slot slots[CONSOLE_LIMITER_SLOTS]; /* @locks lock */
};

/* One trusted proxy network (--trusted-proxy). */
struct console_cidr {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    int bits;
};

#define CONSOLE_CIDR_MAX 16

/* Proxy mode: the session this process last opened per user, reused by
 * requests that bring no cookie. */
#define CONSOLE_PROXY_SESSIONS 256

struct console_proxy_session {
    char user[CONSOLE_NAME_MAX];
    char session[RL_TOKEN_HEX_SIZE]; /* the secret; "" none */
    int64_t opened_ms;
};
/* The widest trusted proxy network accepted without --force: a /8 of
 * IPv4, a /32 of IPv6. Wider, the user header is anyone's to send. */
#define CONSOLE_CIDR_MIN_BITS_V4 8
#define CONSOLE_CIDR_MIN_BITS_V6 32

struct console {
    char listen_address[64];
    int port;
    char base_url[256]; /* "": none; origin of POSTs then from Host */
    char origin[256];   /* scheme://host[:port] of base_url, or "" */
    int secure_cookies;
    int session_ttl;
    int session_idle;        /* seconds a session lasts unused */
    char trusted_header[64]; /* "": proxy mode off */
    struct console_cidr proxies[CONSOLE_CIDR_MAX];
    int nproxies;
    const char *database_url;
    const struct rl_config *cfg; /* Kafka settings (dead letters) */
    struct console_limiter by_address;
    struct console_limiter by_user;
    pthread_mutex_t proxy_lock;
    struct console_proxy_session
        proxy_sessions[CONSOLE_PROXY_SESSIONS]; /* @locks proxy_lock */

    /* Connections to the ledger, each used by one request at a time. */
    pthread_mutex_t pool_lock;
    pthread_cond_t pool_free;
    struct rl_db *db[CONSOLE_DB_POOL]; /* @locks pool_lock (handing out) */
    int busy[CONSOLE_DB_POOL];         /* @locks pool_lock */
    /* One read of the dead-letter topic at a time: a broker that does not
     * answer holds its reader for the metadata wait (10 s). */
    pthread_mutex_t kafka_lock;
    struct MHD_Daemon *daemon;
};

/* The request being answered: who asks, from where, and what it sent. */
struct console_req {
    struct console *c;
    struct MHD_Connection *conn;
    const char *method;
    const char *url;
    char address[CONSOLE_ADDRESS_MAX]; /* the client's (audit, limits) */
    char peer[CONSOLE_ADDRESS_MAX];    /* the connection's other end */
    struct rl_db *db; /* borrowed from the pool for this request */
    int db_slot;
    /* The signed-in user ("" none), its role, its session secret (the
     * cookie value) and the CSRF token forms carry. */
    char user[CONSOLE_NAME_MAX];
    char role[16];
    /* The tenants the user may read as a JSON array, "" every tenant
     * (`runledger users add --tenants`). The ledger's queries check it
     * by user name; pages filled from elsewhere (Kafka, budgets) check
     * it with console_tenant_visible. */
    char tenants[1024];
    char session[RL_TOKEN_HEX_SIZE];
    char csrf[65];
    char set_cookie[256]; /* "" none: a Set-Cookie to send */
    /* The name the trusted proxy passed when it is no console user. */
    char refused_name[CONSOLE_NAME_MAX];
    char *body; /* the POST body, NUL-terminated */
    size_t body_len;
    int body_too_big;
};

/* ---- html.c ------------------------------------------------------------ */

/* The one function every value from the ledger, the request or the user
 * goes through on its way into a page: & < > " ' become entities, so a
 * value is text in an element and in a quoted attribute alike. NULL puts
 * nothing. */
void html_esc(struct rl_buf *b, const char *s);

/* html_esc of at most n bytes of s. */
void html_esc_n(struct rl_buf *b, const char *s, size_t n);

/* A page's start (title escaped, stylesheet, navigation with the user and
 * a sign-out form carrying its CSRF token) and end. */
void html_begin(struct rl_buf *b, const struct console_req *r,
                const char *title);
void html_end(struct rl_buf *b);

/* <p id="message" class="ok|error">text</p>, the text escaped. */
void html_message(struct rl_buf *b, int ok, const char *text);

/* The string member name of obj, or NULL (borrowed from obj). */
const char *json_str(const struct cJSON *obj, const char *name);

/* Member name of obj as text, escaped: a string as is, a number, a
 * boolean as yes or no; nothing otherwise. */
void html_member(struct rl_buf *b, const struct cJSON *obj, const char *name);

/* The stylesheet served at /static/console.css. */
extern const char console_css[];

/* ---- pool.c ------------------------------------------------------------ */

/* Lends r a ledger connection (r->db, r->db_slot) for the rest of the
 * request, reconnecting a dropped one; waits up to a few seconds for a
 * free one. Returns 0, or -1 (none free, or the ledger unreachable).
 * @locality libmicrohttpd's worker threads */
int console_pool_take(struct console *c, struct console_req *r);

/* Gives r's connection back; nothing when r holds none. */
void console_pool_give(struct console *c, struct console_req *r);

/* ---- respond.c --------------------------------------------------------- */

/* Queues a response with the console's headers (CSP, nosniff, referrer
 * policy, frame denial, no-store) and the request's Set-Cookie. body is
 * taken (freed here). location: a redirect target, or NULL. */
enum MHD_Result console_send(struct console_req *r, unsigned status,
                             const char *type, char *body, size_t len,
                             const char *location);

/* An HTML page of status with the message as <p id="message">. */
enum MHD_Result console_send_message(struct console_req *r, unsigned status,
                                     const char *title, int ok,
                                     const char *text);

/* The page in b (taken) as text/html; a failed buffer answers 500. */
enum MHD_Result console_send_page(struct console_req *r, unsigned status,
                                  struct rl_buf *b);

/* The ledger's failure (errstr, logged) as a 503 page that names none of
 * it. */
enum MHD_Result console_ledger_failed(struct console_req *r,
                                      const char *errstr);

/* The value of a urlencoded form field of the request body (a new string,
 * NULL when absent) or of the query string (borrowed, NULL when absent). */
char *console_form_value(const struct console_req *r, const char *name);
const char *console_query_value(const struct console_req *r, const char *name);

/* Cuts s to at most max bytes without splitting a UTF-8 character. */
void console_cut_utf8(char *s, size_t max);

/* ---- auth.c ------------------------------------------------------------ */

/* Reads the session cookie (or, in proxy mode, the trusted header from a
 * trusted address) and fills r->user, r->role and r->csrf; leaves them ""
 * when nobody is signed in. Returns 0, or -1 when the ledger failed. */
int console_identify(struct console_req *r);

/* Proxy mode, on a connection from a trusted proxy: r->address becomes
 * the client address the proxy appended to X-Forwarded-For (for the
 * audit trail and the sign-in limits); otherwise it stays the peer's. */
void console_forwarded_address(struct console_req *r);

/* 1 when the POST carries the session's CSRF token and an Origin of this
 * console, else 0 with why (for the 403 page) in reason. */
int console_post_allowed(struct console_req *r, char *reason,
                         size_t reason_size);

/* 1 when the request's Origin is this console's own. */
int console_origin_ok(const struct console_req *r);

/* GET /signin, POST /signin, POST /signout. */
enum MHD_Result console_signin_form(struct console_req *r);
enum MHD_Result console_signin(struct console_req *r);
enum MHD_Result console_signout(struct console_req *r);

/* 0 when r's user may read run_id (rl_db_console_run_json finds it for
 * that user), RL_ERR_NOTFOUND when not (another tenant's, or none), or
 * RL_ERR_DB with errstr. */
int console_run_visible(struct console_req *r, const char *run_id, char *errstr,
                        size_t errstr_size);

/* Parses "ADDR/BITS" into cidr; 0 or -1. */
int console_cidr_parse(const char *text, struct console_cidr *cidr);

/* 1 when cidr is wider than CONSOLE_CIDR_MIN_BITS_V4 / _V6. */
int console_cidr_too_wide(const struct console_cidr *cidr);

/* 1 when, in proxy mode, the request carries the trusted user header on
 * more than one line: which one a proxy checked is unknown, so the
 * request is refused. */
int console_user_header_repeated(const struct console_req *r);

/* 1 when r's user may read tenant (console_req.tenants). */
int console_tenant_visible(const struct console_req *r, const char *tenant);

/* Removes from rows (an array of objects) those whose "tenant" r's user
 * may not read. */
void console_tenant_filter(const struct console_req *r, struct cJSON *rows);

/* ---- approvals.c ------------------------------------------------------- */

/* GET /approvals, GET /approvals/RUN and POST /approvals/RUN. */
enum MHD_Result console_approvals(struct console_req *r);
enum MHD_Result console_approval(struct console_req *r, const char *run_id);
enum MHD_Result console_decide(struct console_req *r, const char *run_id);

/* 1 when role may decide proposals (approver, operator). */
int console_role_decides(const char *role);

/* <p id="decision"> of a run's decision (the run page's "decision"). */
void console_put_decision(struct rl_buf *b, const struct cJSON *decision);

/* ---- runs.c ------------------------------------------------------------ */

/* GET /runs. */
enum MHD_Result console_runs(struct console_req *r);

/* ---- run.c ------------------------------------------------------------- */

/* GET /runs/RUN and POST /runs/RUN/action. */
enum MHD_Result console_run(struct console_req *r, const char *run_id);
enum MHD_Result console_run_action(struct console_req *r, const char *run_id);

/* ---- timeline.c -------------------------------------------------------- */

/* A run's timeline section: its events (the run page's "timeline" array,
 * in time order) on one time axis as SVG, then as an ordered list
 * <ol id="timeline"> of <li> with a <time datetime> each. */
void console_put_timeline(struct rl_buf *b, const struct cJSON *events);

/* ---- deadletters.c ---------------------------------------------------- */

/* GET /deadletters and POST /deadletters/P-O/replay. */
enum MHD_Result console_deadletters(struct console_req *r);
enum MHD_Result console_deadletter_replay(struct console_req *r,
                                          int32_t partition, int64_t offset);

/* ---- schedules.c ------------------------------------------------------- */

/* GET /schedules and GET /schedules/NAME. */
enum MHD_Result console_schedules(struct console_req *r);
enum MHD_Result console_schedule(struct console_req *r, const char *name);

/* 1 when name has a schedule name's form (schema/080_schedules.sql). */
int console_schedule_name_valid(const char *name);

/* ---- reports.c --------------------------------------------------------- */

enum MHD_Result console_costs(struct console_req *r);
enum MHD_Result console_limits(struct console_req *r);

#endif /* RL_CONSOLE_INT_H */
