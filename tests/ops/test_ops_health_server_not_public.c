/* The health and metrics server is not a public API, against a running
 * consumer. With RUNLEDGER_METRICS_TOKEN_FILE set, /metrics answers 401
 * without the bearer token and with a wrong one, 200 with it, and the
 * probes need none; the token never reaches the log. With
 * RUNLEDGER_HTTP_PER_ADDRESS_CONNECTIONS=4, a fifth connection from the
 * same address is closed unanswered while four idle ones are held, and
 * the probes answer again once they go. A client that sends half a
 * request is disconnected after RUNLEDGER_HTTP_CLIENT_TIMEOUT_SECONDS.
 * With RUNLEDGER_METRICS_TENANT_LABELS=hashed, a tenant's limit series
 * name the first 12 hex digits of the tenant's SHA-256, never the tenant.
 * The server binds RUNLEDGER_HTTP_ADDRESS (127.0.0.1 here). */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ops.h"
#include "rl/runid.h"
#include "rltest.h"

#define TOKEN "s3cr3t-metrics-token-0123456789"

static char body[1 << 20];
static int server_port; /* the consumer's health server */

/* GET path with header (NULL: none) into body; the status, 0 on no
 * answer. */
static long
get_with(int port, const char *path, const char *header)
{
    char url[256];
    struct curl_slist *hdrs = NULL;
    CURL *curl = curl_easy_init();
    long status = 0;
    FILE *sink = fmemopen(body, sizeof(body) - 1, "w");

    RL_REQUIRE(curl && sink);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    if (header)
        hdrs = curl_slist_append(NULL, header);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, sink);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    fputc('\0', sink);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(curl);
    fclose(sink);
    return status;
}

/* Whether /metrics, read with the token, holds the text opaque. */
static int
metrics_hold(struct e2e *t, void *opaque)
{
    (void)t;
    get_with(server_port, "/metrics", "Authorization: Bearer " TOKEN);
    return strstr(body, opaque) != NULL;
}

static int
connect_to(int port)
{
    struct sockaddr_in addr;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    RL_REQUIRE(fd >= 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    RL_REQUIRE(connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
    return fd;
}

/* Milliseconds until the server closes fd (reads EOF or a reset), or -1
 * after timeout_ms. */
static long
closed_within(int fd, long timeout_ms)
{
    int64_t start = rltest_now_ms();
    char buf[256];

    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        long left = timeout_ms - (long)(rltest_now_ms() - start);

        if (left <= 0)
            return -1;
        if (poll(&p, 1, (int)left) > 0 && read(fd, buf, sizeof(buf)) <= 0)
            return (long)(rltest_now_ms() - start);
    }
}

int
main(void)
{
    struct e2e t;
    char token_file[512], port_env[64], token_env[600], hashed[RL_HEX_SIZE];
    char want[96], *log;
    const char *consume_args[] = {"consume", NULL};
    int port, slot, fds[4], extra, slow;
    FILE *fp;

    port = server_port = ops_free_port();
    e2e_setup(&t, "opshealthpriv", 1);
    snprintf(token_file, sizeof(token_file), "%s/metrics-token-%d",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    fp = fopen(token_file, "w");
    RL_REQUIRE(fp && fputs(TOKEN "\n", fp) >= 0 && fclose(fp) == 0);
    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    snprintf(token_env, sizeof(token_env), "RUNLEDGER_METRICS_TOKEN_FILE=%s",
             token_file);
    {
        const char *args[] = {"limits",        "set", "--tenant", "acme-corp",
                              "--concurrency", "3",   NULL};

        RL_REQUIRE(ops_run(&t, args, NULL, NULL, body, sizeof(body), body,
                           sizeof(body)) == 0);
    }
    {
        const char *env[] = {port_env,
                             token_env,
                             "RUNLEDGER_HTTP_ADDRESS=127.0.0.1",
                             "RUNLEDGER_HTTP_PER_ADDRESS_CONNECTIONS=4",
                             "RUNLEDGER_HTTP_CLIENT_TIMEOUT_SECONDS=1",
                             "RUNLEDGER_METRICS_TENANT_LABELS=hashed",
                             "RUNLEDGER_HEALTH_INTERVAL_SECONDS=1",
                             NULL};

        slot = ops_spawn(&t, consume_args, env);
    }
    RL_REQUIRE(ops_wait_http(port, "/healthz", 200, 30000));

    /* The token. */
    RL_CHECK_INTEQ(get_with(port, "/metrics", NULL), 401);
    RL_CHECK_INTEQ(get_with(port, "/metrics", "Authorization: Bearer nope"),
                   401);
    RL_CHECK_INTEQ(get_with(port, "/metrics", "Authorization: Basic " TOKEN),
                   401);
    RL_CHECK_INTEQ(get_with(port, "/metrics", "Authorization: Bearer " TOKEN),
                   200);
    RL_CHECK_INTEQ(get_with(port, "/readyz", NULL) > 0, 1);

    /* Hashed labels: the limit's series name the digest, not acme-corp. */
    RL_REQUIRE(rl_sha256_hex("acme-corp", 9, hashed) == 0);
    hashed[12] = '\0';
    snprintf(want, sizeof(want), "tenant=\"%s\"", hashed);
    RL_CHECK(e2e_wait(metrics_hold, &t, want, 10000));
    RL_CHECK(strstr(body, "acme-corp") == NULL);

    /* Four idle connections from this address: a fifth is closed
     * unanswered; once they go, the probes answer again. */
    for (int i = 0; i < 4; i++)
        fds[i] = connect_to(port);
    extra = connect_to(port);
    RL_CHECK(closed_within(extra, 3000) >= 0);
    close(extra);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    RL_CHECK(ops_wait_http(port, "/healthz", 200, 10000));

    /* Half a request, then nothing: dropped after the 1 s timeout. */
    slow = connect_to(port);
    RL_REQUIRE(write(slow, "GET /metr", 9) == 9);
    {
        long ms = closed_within(slow, 10000);

        fprintf(stderr, "slow client dropped after %ld ms\n", ms);
        RL_CHECK(ms >= 500 && ms <= 5000);
    }
    close(slow);

    RL_CHECK(e2e_stop(&t, slot, 30000));
    log = ops_slurp(ops_log_path(&t, slot));
    RL_REQUIRE(log);
    RL_CHECK(strstr(log, TOKEN) == NULL);
    RL_CHECK(strstr(log, "127.0.0.1 port") != NULL);
    free(log);
    unlink(token_file);
    e2e_teardown(&t);
    RL_TEST_END();
}
