/* `runledger check` (the chart's helm tests) exits 0 only when the
 * endpoint answers as expected, against a running consumer's health
 * server: /readyz 200 passes, the same answer with --expect-status 503
 * fails; /metrics with --expect-line "runledger_ready 1" passes only with
 * the bearer token of RUNLEDGER_METRICS_TOKEN_FILE (--bearer-file), and a
 * line the body lacks fails; a refused port and a server that never
 * answers fail after --timeout, saying why, the refused port tried again
 * until then, so a server that begins to listen meanwhile passes; bad
 * usage exits 2. No message shows the URL's password or query. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ops.h"
#include "rltest.h"

#define TOKEN "check-metrics-token-0123456789"

static char out[1 << 16], err[1 << 16];

/* `runledger check <args...>`; the exit code, out and err filled. */
static int
check(struct e2e *t, const char *const *args)
{
    const char *argv[16] = {"check"};
    int n = 1;

    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return ops_run(t, argv, NULL, NULL, out, sizeof(out), err, sizeof(err));
}

/* A listening socket on a free port that accepts nothing: a connection
 * completes (the backlog) and the request is never answered. */
static int
silent_server(int *port)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    RL_REQUIRE(fd >= 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    RL_REQUIRE(bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
    RL_REQUIRE(listen(fd, 8) == 0);
    RL_REQUIRE(getsockname(fd, (struct sockaddr *)&addr, &len) == 0);
    *port = ntohs(addr.sin_port);
    return fd;
}

int
main(void)
{
    struct e2e t;
    char token_file[512], port_env[64], token_env[600];
    char readyz[128], metrics[128], refused[128], silent[128], secret[160];
    const char *consume_args[] = {"consume", NULL};
    int port = ops_free_port(), silent_port, silent_fd, slot;
    int64_t start;
    FILE *fp;

    e2e_setup(&t, "opscheck", 1);
    snprintf(token_file, sizeof(token_file), "%s/check-token-%d",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    fp = fopen(token_file, "w");
    RL_REQUIRE(fp && fputs(TOKEN "\n", fp) >= 0 && fclose(fp) == 0);
    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    snprintf(token_env, sizeof(token_env), "RUNLEDGER_METRICS_TOKEN_FILE=%s",
             token_file);
    {
        const char *env[] = {port_env, token_env,
                             "RUNLEDGER_HTTP_ADDRESS=127.0.0.1", NULL};

        slot = ops_spawn(&t, consume_args, env);
    }
    RL_REQUIRE(ops_wait_http(port, "/readyz", 200, 60000));
    snprintf(readyz, sizeof(readyz), "http://127.0.0.1:%d/readyz", port);
    snprintf(metrics, sizeof(metrics), "http://127.0.0.1:%d/metrics", port);

    /* /readyz: 200 is what is expected by default, and only that. */
    {
        const char *a[] = {"--url", readyz, NULL};

        RL_CHECK_INTEQ(check(&t, a), 0);
        RL_CHECK(strstr(out, "answered 200") != NULL);
    }
    {
        const char *a[] = {"--url", readyz, "--expect-status", "503", NULL};

        RL_CHECK_INTEQ(check(&t, a), 1);
        RL_CHECK(strstr(err, "answered 200, expected 503") != NULL);
    }

    /* /metrics: the ready gauge, behind the bearer token. */
    {
        const char *a[] = {"--url", metrics, "--expect-line",
                           "runledger_ready 1", NULL};

        RL_CHECK_INTEQ(check(&t, a), 1);
        RL_CHECK(strstr(err, "answered 401, expected 200") != NULL);
    }
    {
        const char *a[] = {"--url",
                           metrics,
                           "--expect-line",
                           "runledger_ready 1",
                           "--bearer-file",
                           token_file,
                           NULL};

        RL_CHECK_INTEQ(check(&t, a), 0);
        RL_CHECK(strstr(out, "with the expected line") != NULL);
    }
    {
        const char *a[] = {"--url",
                           metrics,
                           "--expect-line",
                           "runledger_ready 0",
                           "--bearer-file",
                           token_file,
                           NULL};

        RL_CHECK_INTEQ(check(&t, a), 1);
        RL_CHECK(strstr(err, "without the line \"runledger_ready 0\"") != NULL);
    }

    /* Nothing listening, and a server that never answers. */
    snprintf(refused, sizeof(refused), "http://127.0.0.1:%d/readyz",
             ops_free_port());
    {
        const char *a[] = {"--url", refused, "--timeout", "2", NULL};
        int64_t took;

        start = rltest_now_ms();
        RL_CHECK_INTEQ(check(&t, a), 1);
        took = rltest_now_ms() - start;
        RL_CHECK(strstr(err, "connect") != NULL);
        fprintf(stderr, "refused: %s(after %lld ms of retries)\n", err,
                (long long)took);
        /* Tried again until the timeout, not given up at the first. */
        RL_CHECK(took >= 1000 && took < 10000);
    }

    /* A server that begins to listen after the check began, as when a
     * NetworkPolicy controller lets a new pod's traffic through a moment
     * late: the check waits for it within its timeout. */
    {
        char late_url[128], late_env[64];
        int late_port = ops_free_port(), check_slot, status;
        const char *check_args[] = {"check",     "--url", late_url,
                                    "--timeout", "60",    NULL};
        const char *env[] = {late_env, "RUNLEDGER_HTTP_ADDRESS=127.0.0.1",
                             NULL};

        snprintf(late_url, sizeof(late_url), "http://127.0.0.1:%d/healthz",
                 late_port);
        snprintf(late_env, sizeof(late_env), "RUNLEDGER_HTTP_PORT=%d",
                 late_port);
        check_slot = ops_spawn(&t, check_args, NULL);
        for (int64_t end = rltest_now_ms() + 30000;
             !e2e_file_has(ops_log_path(&t, check_slot),
                           "trying again until the timeout") &&
             rltest_now_ms() < end;)
            nanosleep(&(struct timespec){0, 20000000L}, NULL);
        RL_CHECK(e2e_file_has(ops_log_path(&t, check_slot),
                              "trying again until the timeout"));
        ops_spawn(&t, consume_args, env);
        status = e2e_wait_exit(&t, check_slot, 60000);
        RL_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    silent_fd = silent_server(&silent_port);
    snprintf(silent, sizeof(silent), "http://127.0.0.1:%d/readyz", silent_port);
    {
        const char *a[] = {"--url", silent, "--timeout", "1", NULL};
        int64_t took;

        start = rltest_now_ms();
        RL_CHECK_INTEQ(check(&t, a), 1);
        took = rltest_now_ms() - start;
        fprintf(stderr, "silent server: %s(after %lld ms)\n", err,
                (long long)took);
        RL_CHECK(strstr(err, "timed out") != NULL);
        RL_CHECK(took >= 900 && took < 10000);
    }
    close(silent_fd);

    /* The password and the query of a URL stay out of the messages. */
    snprintf(secret, sizeof(secret),
             "http://user:pa55word@127.0.0.1:%d/readyz?token=qu3ry", port);
    {
        const char *a[] = {"--url", secret, "--expect-status", "204", NULL};

        RL_CHECK_INTEQ(check(&t, a), 1);
        RL_CHECK(strstr(err, "answered 200, expected 204") != NULL);
        RL_CHECK(strstr(err, "pa55word") == NULL);
        RL_CHECK(strstr(err, "qu3ry") == NULL);
    }

    /* Bad usage. */
    {
        const char *none[] = {NULL};
        const char *ftp[] = {"--url", "ftp://127.0.0.1/x", NULL};
        const char *status[] = {"--url", readyz, "--expect-status", "2000",
                                NULL};

        RL_CHECK_INTEQ(check(&t, none), 2);
        RL_CHECK(strstr(err, "missing --url") != NULL);
        RL_CHECK_INTEQ(check(&t, ftp), 2);
        RL_CHECK_INTEQ(check(&t, status), 2);
    }

    RL_CHECK(e2e_stop(&t, slot, 30000));
    unlink(token_file);
    e2e_teardown(&t);
    RL_TEST_END();
}
