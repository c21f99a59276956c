/* `runledger check`: one GET of an HTTP endpoint, compared with what is
 * expected (status, and a line of the body). The chart's helm test pods
 * run it in the Runledger image, which has no shell and no HTTP client of
 * its own, so the tests need no third-party image. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/clock.h"

/* Longest body line --expect-line compares; a longer line is no match. */
#define CHECK_LINE_MAX 4096
/* Longest bearer token --bearer-file takes. */
#define CHECK_TOKEN_MAX 4096

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger check --url URL [--timeout SECONDS] [--expect-status CODE]\n"
"                       [--expect-line LINE] [--bearer-file PATH]\n"
"\n"
"Sends one GET to URL and compares the answer with what is expected. No\n"
"shell and no other tool is needed: the chart's helm test pods run it in\n"
"the Runledger image. A connection refused or a name not resolved is\n"
"tried again every half second until the timeout: a NetworkPolicy\n"
"controller may let a new pod's traffic through a moment after it starts.\n"
"\n"
"  --url URL             http:// or https:// URL (redirects are not followed)\n"
"  --timeout SECONDS     give up after this many seconds, connecting and\n"
"                        its retries included (1 to 3600, default 10)\n"
"  --expect-status CODE  the HTTP status that counts as success\n"
"                        (100 to 599, default 200)\n"
"  --expect-line LINE    also require a line of the body equal to LINE,\n"
"                        e.g. \"runledger_ready 1\" on /metrics\n"
"  --bearer-file PATH    send \"Authorization: Bearer <token>\", the token\n"
"                        being the first line of PATH (a metrics token)\n"
"  -h, --help            print this help\n"
"\n"
"Exit status: 0 the answer is as expected, 1 it is not or nothing\n"
"answered (the reason is on stderr), 2 bad usage.\n";
/* clang-format on */

/* What the body is searched for, line by line as it arrives, so a large
 * /metrics is never held in memory. */
struct body_scan {
    const char *want; /* NULL: nothing to look for */
    char line[CHECK_LINE_MAX + 1];
    size_t len;
    int too_long; /* the current line exceeds CHECK_LINE_MAX */
    int found;
};

/* A connection refused or a name not resolved: nothing was sent, and a
 * NetworkPolicy controller (kube-router programs a new pod's address
 * about a second after it starts) or a Service's DNS record may only be
 * late. Anything that reached the server is final. */
static int
retriable(CURLcode res)
{
    return res == CURLE_COULDNT_CONNECT || res == CURLE_COULDNT_RESOLVE_HOST;
}

/* The GET, tried again every half second while retriable and before
 * deadline (monotonic ms); each try is bounded by the time left. */
static CURLcode
perform_until(CURL *curl, int64_t deadline, const char *shown, char *errbuf)
{
    for (int tries = 1;; tries++) {
        int64_t left = deadline - rl_clock_ms();
        struct timespec pause = {0, 500 * 1000000L};
        CURLcode res;

        if (left < 1)
            left = 1;
        errbuf[0] = '\0';
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)left);
        res = curl_easy_perform(curl);
        if (!retriable(res) || rl_clock_ms() + 500 >= deadline)
            return res;
        if (tries == 1)
            fprintf(stderr,
                    "runledger check: GET %s: %s; trying again until the "
                    "timeout\n",
                    shown, errbuf[0] ? errbuf : curl_easy_strerror(res));
        nanosleep(&pause, NULL);
    }
}

static void
line_end(struct body_scan *scan)
{
    if (!scan->too_long) {
        if (scan->len > 0 && scan->line[scan->len - 1] == '\r')
            scan->len--;
        scan->line[scan->len] = '\0';
        if (strcmp(scan->line, scan->want) == 0)
            scan->found = 1;
    }
    scan->len = 0;
    scan->too_long = 0;
}

static size_t
on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct body_scan *scan = arg;
    size_t n = size * nmemb;

    if (!scan->want || scan->found)
        return n;
    for (size_t i = 0; i < n; i++) {
        if (data[i] == '\n') {
            line_end(scan);
        } else if (scan->len < CHECK_LINE_MAX) {
            scan->line[scan->len++] = data[i];
        } else {
            scan->too_long = 1;
        }
    }
    return n;
}

/* scheme://host[:port]/path of url for messages: no user, password or
 * query, which may carry a secret. */
static int
shown_url(const char *url, char *out, size_t size)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
    int rc = -1;

    if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK)
        goto done;
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
        goto done;
    if (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK)
        snprintf(out, size, "%s://%s:%s%s", scheme, host, port, path);
    else
        snprintf(out, size, "%s://%s%s", scheme, host, path);
    rc = 0;
done:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_url_cleanup(u);
    return rc;
}

/* A whole number in [min, max], or -1. */
static long
parse_bounded(const char *text, long min, long max)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
        return -1;
    return v;
}

/* The first line of path into header as "Authorization: Bearer <it>".
 * Returns 0, or -1 with the reason printed. */
static int
read_bearer(const char *path, char *header, size_t size)
{
    char token[CHECK_TOKEN_MAX + 2];
    FILE *fp = fopen(path, "r");
    size_t len;

    if (!fp) {
        fprintf(stderr,
                "runledger check: could not open --bearer-file %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    if (!fgets(token, sizeof(token), fp))
        token[0] = '\0';
    fclose(fp);
    len = strcspn(token, "\r\n");
    token[len] = '\0';
    if (len == 0 || len > CHECK_TOKEN_MAX) {
        fprintf(stderr,
                "runledger check: --bearer-file %s holds no token on its "
                "first line (or one over %d bytes)\n",
                path, CHECK_TOKEN_MAX);
        return -1;
    }
    snprintf(header, size, "Authorization: Bearer %s", token);
    /* Not left in memory longer than needed. */
    memset(token, 0, sizeof(token));
    return 0;
}

int
rl_cmd_check(int argc, char **argv)
{
    enum { OPT_URL = 1, OPT_TIMEOUT, OPT_STATUS, OPT_LINE, OPT_BEARER };
    static const struct option options[] = {
        {"url", required_argument, NULL, OPT_URL},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"expect-status", required_argument, NULL, OPT_STATUS},
        {"expect-line", required_argument, NULL, OPT_LINE},
        {"bearer-file", required_argument, NULL, OPT_BEARER},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "check",
        .usage = usage_text,
        .options = options,
        .name_errors = 1,
    };
    struct body_scan scan;
    const char *url = NULL, *bearer_file = NULL;
    char shown[2048], errbuf[CURL_ERROR_SIZE];
    char auth[CHECK_TOKEN_MAX + 32];
    struct curl_slist *headers = NULL;
    long timeout = 10, want = 200, status = 0;
    CURL *curl = NULL;
    CURLcode res;
    int curl_started = 0;
    int opt, rc;

    memset(&scan, 0, sizeof(scan));
    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc, argv, &rc)) > 0) {
        switch (opt) {
        case OPT_URL:
            url = optarg;
            break;
        case OPT_TIMEOUT:
            timeout = parse_bounded(optarg, 1, 3600);
            if (timeout < 0)
                return rl_cli_usage_error(
                    "check", "--timeout must be 1 to 3600 seconds");
            break;
        case OPT_STATUS:
            want = parse_bounded(optarg, 100, 599);
            if (want < 0)
                return rl_cli_usage_error(
                    "check", "--expect-status must be an HTTP status, 100 to "
                             "599");
            break;
        case OPT_LINE:
            if (!*optarg || strlen(optarg) > CHECK_LINE_MAX ||
                strchr(optarg, '\n'))
                return rl_cli_usage_error(
                    "check", "--expect-line must be one line of 1 to %d bytes",
                    CHECK_LINE_MAX);
            scan.want = optarg;
            break;
        case OPT_BEARER:
            bearer_file = optarg;
            break;
        }
    }
    if (opt < 0)
        return rc;
    if (!url)
        return rl_cli_usage_error("check", "missing --url");
    if (shown_url(url, shown, sizeof(shown)) != 0)
        return rl_cli_usage_error("check",
                                  "--url must be an http:// or https:// URL");
    if (bearer_file && read_bearer(bearer_file, auth, sizeof(auth)) != 0)
        return RL_EXIT_USAGE;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK) {
        curl_started = 1;
        curl = curl_easy_init();
    }
    if (!curl) {
        fprintf(stderr, "runledger check: could not start libcurl\n");
        rc = RL_EXIT_FAILURE;
        goto done;
    }
    if (bearer_file) {
        headers = curl_slist_append(NULL, auth);
        memset(auth, 0, sizeof(auth));
        if (!headers) {
            fprintf(stderr, "runledger check: out of memory\n");
            rc = RL_EXIT_FAILURE;
            goto done;
        }
    }
    errbuf[0] = '\0';
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "runledger-check/" RL_VERSION);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &scan);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    res = perform_until(curl, rl_clock_ms() + timeout * 1000, shown, errbuf);
    if (res != CURLE_OK) {
        /* The error buffer says more ("Failed to connect to ... port
         * ... after 0 ms: Couldn't connect to server") when filled. */
        fprintf(stderr, "runledger check: GET %s: %s\n", shown,
                errbuf[0] ? errbuf : curl_easy_strerror(res));
        rc = RL_EXIT_FAILURE;
        goto done;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (scan.want && scan.len > 0)
        line_end(&scan);
    if (status != want) {
        fprintf(stderr, "runledger check: GET %s answered %ld, expected %ld\n",
                shown, status, want);
        rc = RL_EXIT_FAILURE;
    } else if (scan.want && !scan.found) {
        fprintf(stderr,
                "runledger check: GET %s answered %ld without the line "
                "\"%s\"\n",
                shown, status, scan.want);
        rc = RL_EXIT_FAILURE;
    } else {
        printf("GET %s answered %ld%s\n", shown, status,
               scan.want ? " with the expected line" : "");
        rc = RL_EXIT_OK;
    }
done:
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (curl_started)
        curl_global_cleanup();
    return rc;
}
