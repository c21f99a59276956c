/* Two consumers share one tenant's daily token budget on the real broker,
 * PostgreSQL and stub model. Invariants: the tenant's settled spend never
 * passes its budget by a reservation or more; every run that did not fit
 * is pending until the next UTC midnight with error_class budget and no
 * attempt spent, shown by `runs list` and counted by
 * runledger_budget_deferrals_total; a tenant without a budget runs as
 * before; `runledger report` and `budgets show` give the ledger's figures. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"
#include "ops.h"
#include "rltest.h"

enum { LIMITED = 30, FREE = 5, LIMIT = 600, DEFAULT_MAX = 100 };

static char out[1 << 18], err[65536];

static int64_t
json_sum(const char *json, const char *field)
{
    cJSON *arr = cJSON_Parse(json);
    const cJSON *row;
    int64_t sum = 0;

    RL_REQUIRE(cJSON_IsArray(arr));
    cJSON_ArrayForEach(row, arr)
    {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, field);

        if (cJSON_IsNumber(v))
            sum += (int64_t)v->valuedouble;
    }
    cJSON_Delete(arr);
    return sum;
}

/* Value of field in the row of arr whose "tenant" is tenant. */
static int64_t
json_row(const char *json, const char *tenant, const char *field)
{
    cJSON *arr = cJSON_Parse(json);
    const cJSON *row;
    int64_t value = -1;

    RL_REQUIRE(cJSON_IsArray(arr));
    cJSON_ArrayForEach(row, arr)
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(row, "tenant");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, field);

        if (cJSON_IsString(t) && strcmp(t->valuestring, tenant) == 0 &&
            cJSON_IsNumber(v))
            value = (int64_t)v->valuedouble;
    }
    cJSON_Delete(arr);
    return value;
}

int
main(void)
{
    struct e2e t;
    char job[160], port_env[2][64], url[64];
    int ports[2];
    int64_t spent, reserved, completed, deferred, deferrals;
    double metric = 0;
    char metrics[1 << 16];

    e2e_setup(&t, "budget", 4);
    snprintf(job, sizeof(job), "job-%s", t.name);
    {
        const char *args[] = {"budgets",  "set", "--tenant", "tenant-ltd",
                              "--tokens", "600", NULL};

        RL_REQUIRE(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                           sizeof(err)) == 0);
    }
    for (int i = 0; i < LIMITED; i++)
        e2e_produce_event(&t, job, "tenant-ltd", i, NULL, NULL);
    for (int i = 0; i < FREE; i++)
        e2e_produce_event(&t, job, "tenant-free", i, NULL, NULL);
    e2e_flush(&t);
    for (int i = 0; i < 2; i++) {
        ports[i] = ops_free_port();
        snprintf(port_env[i], sizeof(port_env[i]), "RUNLEDGER_HTTP_PORT=%d",
                 ports[i]);
        fx_spawn(&t, "consume", port_env[i],
                 "RUNLEDGER_BUDGET_DEFAULT_MAX_TOKENS=100", NULL);
    }

    /* Settled: every run completed or waiting for tomorrow's budget (runs
     * that waited for calls in flight to settle were claimed again), the
     * outbox drained, every offset committed. */
    RL_REQUIRE(e2e_wait_intf(&t, LIMITED + FREE, 60000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' OR (status = 'pending' AND "
                             "error_class = 'budget' AND next_attempt_at = "
                             "date_trunc('day', now() AT TIME ZONE 'UTC') "
                             "AT TIME ZONE 'UTC' + interval '1 day')") == 1);
    RL_REQUIRE(e2e_wait_intf(&t, 0, 30000, "SELECT count(*) FROM outbox") == 1);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT count(*) FROM budget_usage WHERE "
                             "reserved = 0") == 1);

    spent = e2e_int(&t, "SELECT spent FROM budget_usage");
    reserved = e2e_int(&t, "SELECT reserved FROM budget_usage");
    deferrals = e2e_int(&t, "SELECT deferrals FROM budget_usage");
    completed = e2e_int(&t, "SELECT count(*) FROM runs WHERE tenant = "
                            "'tenant-ltd' AND status = 'completed'");
    deferred = e2e_int(&t, "SELECT count(*) FROM runs WHERE tenant = "
                           "'tenant-ltd' AND status = 'pending' AND "
                           "error_class = 'budget'");
    fprintf(stderr,
            "budget %d tokens: %lld runs completed, %lld deferred "
            "(%lld deferrals), spent %lld, reserved %lld, largest "
            "reservation %lld\n",
            LIMIT, (long long)completed, (long long)deferred,
            (long long)deferrals, (long long)spent, (long long)reserved,
            (long long)e2e_int(&t, "SELECT max(length(request::text) + "
                                   "length(raw_input::text) + 3) / 4 + 100 "
                                   "FROM runs"));
    RL_CHECK_INTEQ(completed + deferred, LIMITED);
    RL_CHECK(completed >= 1);
    RL_CHECK(deferred >= 1);
    RL_CHECK(deferrals >= deferred);
    /* The spend is the ledger's usage of the tenant's attempts, and it
     * stays within the budget plus one reservation. */
    RL_CHECK_INTEQ(spent, e2e_int(&t, "SELECT sum(prompt_tokens + "
                                      "completion_tokens) FROM attempts a "
                                      "JOIN runs r USING (run_id) WHERE "
                                      "r.tenant = 'tenant-ltd'"));
    RL_CHECK(spent <= LIMIT + e2e_int(&t, "SELECT max(length(request::text)"
                                          " + length(raw_input::text) + 3) / 4"
                                          " + 100 FROM runs"));
    RL_CHECK_INTEQ(reserved, 0);
    /* Deferred: no attempt spent, due at the next UTC midnight. */
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE "
                               "error_class = 'budget' AND attempts = 0 AND "
                               "next_attempt_at = date_trunc('day', now() AT "
                               "TIME ZONE 'UTC') AT TIME ZONE 'UTC' + "
                               "interval '1 day'"),
                   deferred);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE tenant = "
                               "'tenant-free' AND status = 'completed'"),
                   FREE);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"),
                   completed + FREE);
    RL_CHECK_INTEQ(fx_dead_letters_now(&t, NULL, NULL), 0);

    /* Metrics: the two consumers' deferrals add up to the ledger's. */
    for (int i = 0; i < 2; i++) {
        RL_REQUIRE(ops_http_get(ports[i], "/metrics", metrics,
                                sizeof(metrics)) == 200);
        metric += ops_metric(
            metrics, "runledger_budget_deferrals_total{until=\"next_window\"}");
    }
    RL_CHECK_INTEQ((int64_t)metric, deferrals);

    /* runs list shows why the runs wait. */
    {
        const char *args[] = {"runs",       "list",     "--tenant",
                              "tenant-ltd", "--status", "pending",
                              "--limit",    "1000",     NULL};

        RL_REQUIRE(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                           sizeof(err)) == 0);
        RL_CHECK(strstr(out, "ERROR_CLASS") != NULL);
        {
            int64_t lines = 0;

            for (const char *p = out; (p = strstr(p, " budget ")); p++)
                lines++;
            RL_CHECK_INTEQ(lines, deferred);
        }
    }
    /* budgets show: today's spend and the waiting runs. */
    {
        const char *args[] = {"budgets", "show", "--json", NULL};

        RL_REQUIRE(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                           sizeof(err)) == 0);
        RL_CHECK_INTEQ(json_row(out, "tenant-ltd", "spent"), spent);
        RL_CHECK_INTEQ(json_row(out, "tenant-ltd", "daily_tokens"), LIMIT);
        RL_CHECK_INTEQ(json_row(out, "tenant-ltd", "deferred_runs"), deferred);
    }
    /* report: the ledger's figures, per tenant and in total. */
    {
        const char *args[] = {"report", "--since", "2026-01-01T00:00:00Z",
                              "--by",   "tenant",  "--json",
                              NULL};
        const char *total[] = {"report", "--since", "2026-01-01T00:00:00Z",
                               NULL};

        RL_REQUIRE(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                           sizeof(err)) == 0);
        RL_CHECK_INTEQ(json_row(out, "tenant-ltd", "runs"), LIMITED);
        RL_CHECK_INTEQ(json_row(out, "tenant-ltd", "completed"), completed);
        RL_CHECK_INTEQ(json_row(out, "tenant-ltd", "generations"), completed);
        RL_CHECK_INTEQ(json_row(out, "tenant-ltd", "extra_generations"), 0);
        RL_CHECK_INTEQ(json_row(out, "tenant-ltd", "budget_deferred"),
                       deferred);
        RL_CHECK_INTEQ(json_row(out, "tenant-ltd", "prompt_tokens") +
                           json_row(out, "tenant-ltd", "completion_tokens"),
                       spent);
        RL_CHECK_INTEQ(json_row(out, "tenant-free", "runs"), FREE);
        RL_CHECK_INTEQ(json_sum(out, "prompt_tokens"),
                       e2e_int(&t, "SELECT sum(prompt_tokens) FROM attempts"));
        RL_CHECK_INTEQ(json_sum(out, "completion_tokens"),
                       e2e_int(&t, "SELECT sum(completion_tokens) FROM "
                                   "attempts"));
        RL_REQUIRE(ops_run(&t, total, NULL, NULL, out, sizeof(out), err,
                           sizeof(err)) == 0);
        fprintf(stderr, "%s", out);
        RL_CHECK(strstr(out, "GENS") != NULL);
    }
    (void)url;
    e2e_teardown(&t);
    RL_TEST_END();
}
