/* `runledger batch set|show|remove` against a real ledger: a job's batch
 * mode is stored with its defaults and the operator's values, replaced by
 * a second set, per tenant beside the job's, refused with exit 2 for a
 * value out of range (nothing stored), removed, and a second remove exits
 * 3. The run ID of a job's run is the same before and after. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ops.h"
#include "rltest.h"

static char out[65536], err[65536];

static int
batch(struct e2e *t, const char *const *args)
{
    return ops_run(t, args, NULL, NULL, out, sizeof(out), err, sizeof(err));
}

static const cJSON *
row_of(const cJSON *rows, const char *job, const char *tenant)
{
    const cJSON *row;

    cJSON_ArrayForEach(row, rows)
    {
        if (strcmp(cJSON_GetObjectItem(row, "job")->valuestring, job) == 0 &&
            strcmp(cJSON_GetObjectItem(row, "tenant")->valuestring, tenant) ==
                0)
            return row;
    }
    return NULL;
}

static double
num(const cJSON *row, const char *name)
{
    const cJSON *v = cJSON_GetObjectItem(row, name);

    return v && cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *
str(const cJSON *row, const char *name)
{
    const cJSON *v = cJSON_GetObjectItem(row, name);

    return v && cJSON_IsString(v) ? v->valuestring : "";
}

int
main(void)
{
    struct e2e t;
    static char id_before[sizeof(out)], id_after[sizeof(out)];
    const char *id_args[] = {"id",
                             "--job",
                             "nightly",
                             "--tenant",
                             "acme",
                             "--at",
                             "2026-08-07T09:00:00Z",
                             "--version",
                             "v1",
                             NULL};
    cJSON *rows;
    const cJSON *row;

    e2e_setup(&t, "batchset", 1);

    RL_REQUIRE(batch(&t, id_args) == 0);
    snprintf(id_before, sizeof(id_before), "%s", out);

    {
        const char *a[] = {"batch", "set", "--job", "nightly", NULL};
        RL_CHECK(batch(&t, a) == 0);
    }
    {
        const char *a[] = {"batch",       "set",  "--job",       "nightly",
                           "--tenant",    "acme", "--window",    "30s",
                           "--max-runs",  "1000", "--max-bytes", "2MiB",
                           "--on-expiry", "live", "--actor",     "ann",
                           NULL};
        RL_CHECK(batch(&t, a) == 0);
    }
    /* out of range, unknown policy, missing job: exit 2, nothing stored */
    {
        const char *a[] = {"batch",      "set",   "--job", "weekly",
                           "--max-runs", "50001", NULL};
        RL_CHECK(batch(&t, a) == 2);
    }
    {
        const char *a[] = {"batch",       "set",   "--job", "weekly",
                           "--on-expiry", "retry", NULL};
        RL_CHECK(batch(&t, a) == 2);
        RL_CHECK(strstr(err, "--on-expiry") != NULL);
    }
    {
        const char *a[] = {"batch",    "set",         "--job", "weekly",
                           "--window", "ten minutes", NULL};
        RL_CHECK(batch(&t, a) == 2);
    }
    {
        const char *a[] = {"batch", "set", "--max-bytes", "1MB", NULL};
        RL_CHECK(batch(&t, a) == 2);
    }

    {
        const char *a[] = {"batch", "show", "--json", NULL};
        RL_REQUIRE(batch(&t, a) == 0);
    }
    rows = cJSON_Parse(out);
    RL_REQUIRE(rows && cJSON_IsArray(rows));
    RL_CHECK(cJSON_GetArraySize(rows) == 2);
    row = row_of(rows, "nightly", "");
    RL_REQUIRE(row != NULL);
    RL_CHECK(num(row, "window_seconds") == 600);
    RL_CHECK(num(row, "max_runs") == 50000);
    RL_CHECK(num(row, "max_bytes") == 100000000);
    RL_CHECK_STREQ(str(row, "completion_window"), "24h");
    RL_CHECK_STREQ(str(row, "on_expiry"), "rebatch");
    row = row_of(rows, "nightly", "acme");
    RL_REQUIRE(row != NULL);
    RL_CHECK(num(row, "window_seconds") == 30);
    RL_CHECK(num(row, "max_runs") == 1000);
    RL_CHECK(num(row, "max_bytes") == 2097152);
    RL_CHECK_STREQ(str(row, "on_expiry"), "live");
    RL_CHECK_STREQ(str(row, "updated_by"), "ann");
    cJSON_Delete(rows);

    /* a second set replaces the row */
    {
        const char *a[] = {"batch", "set",      "--job", "nightly", "--tenant",
                           "acme",  "--window", "500ms", NULL};
        RL_CHECK(batch(&t, a) == 0);
    }
    RL_CHECK(e2e_intf(&t,
                      "SELECT window_ms * 1000 + max_runs FROM batch_settings"
                      " WHERE job = 'nightly' AND tenant = 'acme'") ==
             500 * 1000 + 50000);

    /* the table form names the columns */
    {
        const char *a[] = {"batch", "show", "--job", "nightly", NULL};
        RL_CHECK(batch(&t, a) == 0);
        RL_CHECK(strstr(out, "JOB") == out);
        RL_CHECK(strstr(out, "rebatch") != NULL);
    }

    {
        const char *a[] = {"batch",    "remove", "--job", "nightly",
                           "--tenant", "acme",   NULL};
        RL_CHECK(batch(&t, a) == 0);
        RL_CHECK(batch(&t, a) == 3);
    }
    RL_CHECK(e2e_intf(&t, "SELECT count(*) FROM batch_settings") == 1);

    RL_REQUIRE(batch(&t, id_args) == 0);
    snprintf(id_after, sizeof(id_after), "%s", out);
    RL_CHECK_STREQ(id_before, id_after);

    e2e_teardown(&t);
    RL_TEST_END();
}
