/* Invariant: `runledger migrate --require-secret NAME/KEY=env:VAR|file:PATH`
 * (the chart's pre-install hook, whose Secrets are mounted optional)
 * checks every required secret before it connects: each one missing or
 * empty is named, as `secret "NAME" (key KEY) not found` or `is empty`,
 * and it exits 4 at once, without a connection attempt and without
 * printing a value; with all of them present it migrates. A malformed
 * --require-secret is bad usage (2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rl/db_conn.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

#define VALUE "s3cret-value-0123"

static char out[1 << 16];

static void
write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");

    RL_REQUIRE(fp && fputs(text, fp) >= 0 && fclose(fp) == 0);
}

int
main(void)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char key_file[512], empty_file[512], missing_file[512];
    char model_spec[600], empty_spec[600], missing_spec[600];
    char schema[RL_DB_SCHEMA_MAX + 1];
    const char *url = rltest_service_env("DATABASE_URL");
    int64_t took = -1;
    struct rl_db *db;

    snprintf(key_file, sizeof(key_file), "%s/rl-secret-key-%d", tmp,
             (int)getpid());
    snprintf(empty_file, sizeof(empty_file), "%s/rl-secret-empty-%d", tmp,
             (int)getpid());
    snprintf(missing_file, sizeof(missing_file), "%s/rl-secret-none-%d/api-key",
             tmp, (int)getpid());
    write_file(key_file, VALUE "\n");
    write_file(empty_file, "");
    snprintf(model_spec, sizeof(model_spec), "rl-model/api-key=file:%s",
             key_file);
    snprintf(empty_spec, sizeof(empty_spec), "rl-ca/ca.crt=file:%s",
             empty_file);
    snprintf(missing_spec, sizeof(missing_spec), "rl-model/api-key=file:%s",
             missing_file);

    /* Missing and empty ones, named one by one; nothing is connected to
     * (the URL's port refuses, and --wait 30 would retry it). */
    {
        const char *args[] = {"migrate",
                              "--database-url",
                              "postgresql://rl@127.0.0.1:1/none",
                              "--wait",
                              "30",
                              "--require-secret",
                              missing_spec,
                              "--require-secret",
                              "rl-db/database-url=env:RL_TEST_DATABASE_URL",
                              "--require-secret",
                              empty_spec,
                              "--require-secret",
                              "rl-sasl/password=env:RL_TEST_SASL_PASSWORD",
                              NULL};
        const char *env[] = {"RL_TEST_DATABASE_URL",
                             "RL_TEST_SASL_PASSWORD=", NULL};

        RL_CHECK_INTEQ(fixture_run_cli(args, env, out, sizeof(out), &took), 4);
        fprintf(stderr, "missing (%lld ms): %s", (long long)took, out);
        RL_CHECK(strstr(out, "secret \"rl-model\" (key api-key) not found") !=
                 NULL);
        RL_CHECK(strstr(out, "secret \"rl-db\" (key database-url) not "
                             "found") != NULL);
        RL_CHECK(strstr(out, "secret \"rl-ca\" (key ca.crt) is empty") != NULL);
        RL_CHECK(strstr(out, "secret \"rl-sasl\" (key password) is empty") !=
                 NULL);
        RL_CHECK(strstr(out, "connect") == NULL);
        RL_CHECK(took < 5000);
    }

    /* One present among missing ones is not named, and no value shows. */
    {
        const char *args[] = {"migrate",
                              "--database-url",
                              "postgresql://rl@127.0.0.1:1/none",
                              "--require-secret",
                              model_spec,
                              "--require-secret",
                              "rl-db/database-url=env:RL_TEST_DATABASE_URL",
                              NULL};
        const char *env[] = {"RL_TEST_DATABASE_URL", NULL};

        RL_CHECK_INTEQ(fixture_run_cli(args, env, out, sizeof(out), &took), 4);
        RL_CHECK(strstr(out, "rl-model") == NULL);
        RL_CHECK(strstr(out, "secret \"rl-db\" (key database-url) not "
                             "found") != NULL);
        RL_CHECK(strstr(out, VALUE) == NULL);
    }

    /* All present: it migrates. */
    snprintf(schema, sizeof(schema), "%s", rltest_unique("rl_test_sec"));
    {
        const char *args[] = {"migrate",
                              "--database-url",
                              url,
                              "--schema",
                              schema,
                              "--require-secret",
                              model_spec,
                              "--require-secret",
                              "rl-db/database-url=env:RL_TEST_DATABASE_URL",
                              NULL};
        const char *env[] = {"RL_TEST_DATABASE_URL=" VALUE, NULL};

        RL_CHECK_INTEQ(fixture_run_cli(args, env, out, sizeof(out), &took), 0);
        fprintf(stderr, "all present: %s", out);
        RL_CHECK(strstr(out, "applied ") != NULL);
        RL_CHECK(strstr(out, VALUE) == NULL);
    }
    db = fixture_connect(schema);
    fixture_drop(db, schema);

    /* Malformed: bad usage. */
    {
        const char *bad[][3] = {
            {"migrate", "--require-secret", "no-slash=env:X"},
            {"migrate", "--require-secret", "a/b"},
            {"migrate", "--require-secret", "a/b=disk:/x"},
            {"migrate", "--require-secret", "/b=env:X"},
            {"migrate", "--require-secret", "a/b=env:"},
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            const char *args[] = {bad[i][0], bad[i][1], bad[i][2], NULL};

            RL_CHECK_INTEQ(fixture_run_cli(args, NULL, out, sizeof(out), &took),
                           2);
        }
    }
    unlink(key_file);
    unlink(empty_file);
    RL_TEST_END();
}
