#include "faults.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rl/runid.h"
#include "rltest.h"

static const char *const defaults[] = {
    "RUNLEDGER_LEASE_SECONDS=2",
    "RUNLEDGER_SWEEP_INTERVAL_MS=100",
    "RUNLEDGER_BACKOFF_BASE_MS=100",
    "RUNLEDGER_BACKOFF_MAX_MS=400",
    "RUNLEDGER_MAX_ATTEMPTS=5",
    "RUNLEDGER_RELAY_INTERVAL_MS=50",
    "RUNLEDGER_RELAY_LEASE_SECONDS=5",
    "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3",
    "RUNLEDGER_KAFKA_SESSION_TIMEOUT_MS=6000",
    "RUNLEDGER_KAFKA_HEARTBEAT_INTERVAL_MS=500",
    "RUNLEDGER_KAFKA_AUTO_COMMIT_INTERVAL_MS=200",
    "MODEL_TIMEOUT_MS=1500",
    "MODEL_CONNECT_TIMEOUT_MS=500",
    NULL,
};

int
fx_spawn(struct e2e *t, const char *cmd, ...)
{
    const char *env[64];
    size_t n = 0;
    va_list ap;
    const char *e;

    va_start(ap, cmd);
    while ((e = va_arg(ap, const char *)) != NULL && n < 40)
        env[n++] = e;
    va_end(ap);
    for (size_t i = 0; defaults[i]; i++) {
        size_t len = (size_t)(strchr(defaults[i], '=') - defaults[i]) + 1;
        int shadowed = 0;

        for (size_t k = 0; k < n && !shadowed; k++)
            shadowed = strncmp(env[k], defaults[i], len) == 0;
        if (!shadowed && n < 63)
            env[n++] = defaults[i];
    }
    env[n] = NULL;
    return e2e_spawn(t, cmd, env);
}

int
fx_reconcile_settled(struct e2e *t, int settle_ms)
{
    char http[64], settle[64];
    int port = rltest_free_port();

    snprintf(http, sizeof(http), "RUNLEDGER_HTTP_PORT=%d", port);
    snprintf(settle, sizeof(settle), "RUNLEDGER_RECONCILE_SETTLE_MS=%d",
             settle_ms);
    fx_spawn(t, "consume", "RUNLEDGER_AMBIGUOUS_POLICY=retry_once",
             "RUNLEDGER_MODEL_STORED_COMPLETIONS=true", settle,
             "RUNLEDGER_RECONCILE_LOOKUP_TIMEOUT_MS=2000", http, NULL);
    RL_REQUIRE(fx_settled(t, 60000));
    return port;
}

int
fx_settled(struct e2e *t, long timeout_ms)
{
    int64_t deadline = rltest_now_ms() + timeout_ms;

    while (rltest_now_ms() < deadline) {
        struct timespec ts = {0, 100000000L};

        if (e2e_int(t, "SELECT count(*) FROM runs WHERE status NOT IN "
                       "('completed', 'failed', 'unknown')") == 0 &&
            e2e_int(t, "SELECT count(*) FROM outbox") == 0 &&
            e2e_group_lag(t) == 0)
            return 1;
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "not settled after %ld ms: %s\n", timeout_ms,
            e2e_text(t, "SELECT string_agg(status || '=' || n, ' ') FROM "
                        "(SELECT status, count(*) n FROM runs GROUP BY "
                        "status) s"));
    return 0;
}

void
fx_check_completed_once(struct e2e *t, const char *run_id)
{
    RL_CHECK_INTEQ(
        e2e_intf(t, "SELECT count(*) FROM runs WHERE run_id='%s'", run_id), 1);
    RL_CHECK_STREQ(
        e2e_textf(t, "SELECT status FROM runs WHERE run_id='%s'", run_id),
        "completed");
    RL_CHECK_INTEQ(e2e_intf(t,
                            "SELECT count(*) FROM outbox_delivered WHERE "
                            "run_id='%s'",
                            run_id),
                   2);
    RL_CHECK_INTEQ(
        e2e_intf(t, "SELECT count(*) FROM outbox WHERE run_id='%s'", run_id),
        0);
    /* The accepted output is the answer of an attempt that ended ok. */
    RL_CHECK_INTEQ(
        e2e_intf(t,
                 "SELECT count(*) FROM runs r JOIN attempts a USING (run_id) "
                 "WHERE r.run_id='%s' AND a.outcome='ok' AND "
                 "a.upstream_request_id = r.output->>'upstream_request_id'",
                 run_id),
        1);
}

int64_t
fx_attempts(struct e2e *t, const char *run_id, const char *outcome)
{
    if (!outcome)
        return e2e_intf(t,
                        "SELECT count(*) FROM attempts WHERE run_id='%s' "
                        "AND outcome IS NULL",
                        run_id);
    if (strcmp(outcome, "*") == 0)
        return e2e_intf(t, "SELECT count(*) FROM attempts WHERE run_id='%s'",
                        run_id);
    return e2e_intf(t,
                    "SELECT count(*) FROM attempts WHERE run_id='%s' AND "
                    "outcome='%s'",
                    run_id, outcome);
}

struct dl_count {
    const char *reason;
    const char *run_id;
    long n;
};

static void
on_dead_letter(const rd_kafka_message_t *rkm, void *opaque)
{
    struct dl_count *c = opaque;
    char reason[128], run_id[RL_HEX_SIZE + 8];

    e2e_header(rkm, "reason", reason, sizeof(reason));
    e2e_header(rkm, "run_id", run_id, sizeof(run_id));
    if ((!c->reason || strcmp(reason, c->reason) == 0) &&
        (!c->run_id || strcmp(run_id, c->run_id) == 0))
        c->n++;
}

long
fx_dead_letters_now(struct e2e *t, const char *reason, const char *run_id)
{
    struct dl_count c = {reason, run_id, 0};

    e2e_read_topic(t, t->dlq, on_dead_letter, &c);
    return c.n;
}

long
fx_dead_letters(struct e2e *t, const char *reason, const char *run_id)
{
    int64_t deadline = rltest_now_ms() + 10000;
    long n;

    while ((n = fx_dead_letters_now(t, reason, run_id)) == 0 &&
           rltest_now_ms() < deadline) {
        struct timespec ts = {0, 200000000L};

        nanosleep(&ts, NULL);
    }
    return n;
}
