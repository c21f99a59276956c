/* `runledger publish`: from flags and from stdin it produces what the
 * consumer accepts (key = tenant) and prints the run IDs `runledger id`
 * computes; --dry-run sends nothing; --now with --window gives the same
 * run ID however often the scheduler fires within the window; an invalid
 * event exits 2 and nothing at all is produced, even when other events in
 * the same batch are valid. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops.h"
#include "rl/runid.h"
#include "rl/timefmt.h"
#include "rltest.h"

#define REQUEST                                                                \
    "{\"model\":\"stub-1\",\"messages\":[{\"role\":\"user\",\"content\":"      \
    "\"summarise {{input}}\"}]}"

static int keys_ok;

static void
check_key(const rd_kafka_message_t *rkm, void *opaque)
{
    (void)opaque;
    if (rkm->key_len == 8 && memcmp(rkm->key, "tenant-x", 8) == 0)
        keys_ok++;
    else if (rkm->key_len == 8 && memcmp(rkm->key, "tenant-y", 8) == 0)
        keys_ok++;
}

static long
on_topic(struct e2e *t)
{
    keys_ok = 0;
    return e2e_read_topic(t, t->topic, check_key, NULL);
}

int
main(void)
{
    struct e2e t;
    static char out[65536], err[65536], out2[65536];
    char expected[RL_HEX_SIZE], errstr[256], path[256], line[2048];
    struct rl_run_identity id = {"ops-pub", "tenant-x",
                                 "2026-08-07T09:00:00+00:00", NULL, "v1"};
    const char *reason;
    FILE *fp;

    e2e_setup(&t, "opspub", 2);

    {
        const char *args[] = {"publish", "--help", NULL};
        RL_CHECK(ops_run(&t, args, NULL, NULL, out, sizeof(out), NULL, 0) == 0);
        RL_CHECK(strstr(out, "Exit status") != NULL);
    }
    {
        const char *args[] = {"publish", NULL};
        RL_CHECK(ops_run(&t, args, NULL, NULL, NULL, 0, err, sizeof(err)) == 2);
    }

    /* Flags; --input from a file. */
    snprintf(path, sizeof(path), "%s.input.json", t.name);
    fp = fopen(path, "w");
    RL_REQUIRE(fp);
    fputs("{\"doc\": 1}\n", fp);
    fclose(fp);
    snprintf(line, sizeof(line), "@%s", path);
    {
        const char *args[] = {"publish",
                              "--job",
                              "ops-pub",
                              "--tenant",
                              "tenant-x",
                              "--at",
                              "2026-08-07T09:00:00Z",
                              "--version",
                              "v1",
                              "--request",
                              REQUEST,
                              "--input",
                              line,
                              "--notify",
                              "email,slack",
                              NULL};
        RL_CHECK(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                         sizeof(err)) == 0);
    }
    RL_REQUIRE(rl_runid_compute(&id, expected, NULL, &reason, errstr,
                                sizeof(errstr)) == 0);
    RL_CHECK(strncmp(out, expected, 64) == 0 && out[64] == '\n');
    RL_CHECK(on_topic(&t) == 1);
    RL_CHECK(keys_ok == 1);

    /* --dry-run: the same ID, nothing sent. */
    {
        const char *args[] = {"publish",
                              "--job",
                              "ops-pub",
                              "--tenant",
                              "tenant-x",
                              "--at",
                              "2026-08-07T11:00:00+02:00",
                              "--version",
                              "v1",
                              "--request",
                              REQUEST,
                              "--dry-run",
                              NULL};
        RL_CHECK(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                         sizeof(err)) == 0);
    }
    RL_CHECK(strncmp(out, expected, 64) == 0);
    RL_CHECK(on_topic(&t) == 1);

    /* --now --window: a scheduler firing twice in one window. */
    {
        const char *args[] = {"publish",   "--job", "ops-pub",   "--tenant",
                              "tenant-y",  "--now", "--window",  "P1D",
                              "--version", "v1",    "--request", REQUEST,
                              NULL};
        char day[RL_TIME_UTC_SIZE];
        struct rl_run_identity wid = {"ops-pub", "tenant-y", day, NULL, "v1"};

        rl_time_format_utc((int64_t)time(NULL) / 86400 * 86400, day);
        RL_REQUIRE(rl_runid_compute(&wid, expected, NULL, &reason, errstr,
                                    sizeof(errstr)) == 0);
        RL_CHECK(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                         sizeof(err)) == 0);
        RL_CHECK(ops_run(&t, args, NULL, NULL, out2, sizeof(out2), err,
                         sizeof(err)) == 0);
        RL_CHECK(strlen(out) == 65 && strcmp(out, out2) == 0);
        /* Unless the day turned between the two calls and this check. */
        RL_CHECK(strncmp(out, expected, 64) == 0);
    }
    RL_CHECK(on_topic(&t) == 3);
    RL_CHECK(keys_ok == 3);

    /* stdin: JSON lines (blank lines skipped). */
    {
        const char *args[] = {"publish", "--stdin", NULL};
        char in[4096];
        int n = 0;

        for (int i = 0; i < 3; i++) {
            e2e_event(line, sizeof(line), "ops-pub-stdin", "tenant-x", i, NULL,
                      NULL);
            n += snprintf(in + n, sizeof(in) - (size_t)n, "%s\n\n", line);
        }
        RL_CHECK(ops_run(&t, args, NULL, in, out, sizeof(out), err,
                         sizeof(err)) == 0);
        RL_CHECK(strlen(out) == 3 * 65);
    }
    RL_CHECK(on_topic(&t) == 6);

    /* Invalid input: exit 2 with the reason, nothing produced. */
    {
        const char *args[] = {"publish",
                              "--job",
                              "ops-pub",
                              "--tenant",
                              "tenant-x",
                              "--at",
                              "2026-08-07T09:00:00",
                              "--version",
                              "v1",
                              "--request",
                              REQUEST,
                              NULL};
        RL_CHECK(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                         sizeof(err)) == 2);
        RL_CHECK(strstr(err, "naive_timestamp") != NULL);
        RL_CHECK(out[0] == '\0');
    }
    {
        const char *args[] = {"publish",
                              "--job",
                              "ops-pub",
                              "--tenant",
                              "tenant-x",
                              "--at",
                              "2026-08-07T09:00:00Z",
                              "--version",
                              "v1",
                              "--request",
                              "{\"model\":\"m\"}",
                              NULL};
        RL_CHECK(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                         sizeof(err)) == 2);
        RL_CHECK(strstr(err, "invalid_request") != NULL);
    }
    {
        const char *args[] = {"publish", "--stdin", NULL};
        char in[4096];

        e2e_event(line, sizeof(line), "ops-pub-bad", "tenant-x", 9, NULL, NULL);
        snprintf(in, sizeof(in), "%s\n{\"job\":\"x\"}\n", line);
        RL_CHECK(ops_run(&t, args, NULL, in, out, sizeof(out), err,
                         sizeof(err)) == 2);
        RL_CHECK(strstr(err, "line 2") != NULL);
        RL_CHECK(strstr(err, "missing_field") != NULL);
    }
    {
        const char *args[] = {"publish", "--stdin", "--job", "x", NULL};
        RL_CHECK(ops_run(&t, args, NULL, "", out, sizeof(out), err,
                         sizeof(err)) == 2);
    }
    RL_CHECK(on_topic(&t) == 6);

    /* A broker that is not there: exit 1. */
    {
        const char *args[] = {"publish",
                              "--job",
                              "ops-pub",
                              "--tenant",
                              "tenant-x",
                              "--at",
                              "2026-08-07T09:00:00Z",
                              "--version",
                              "v1",
                              "--request",
                              REQUEST,
                              NULL};
        const char *env[] = {"KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1",
                             "RUNLEDGER_KAFKA_MESSAGE_TIMEOUT_MS=2000", NULL};
        RL_CHECK(ops_run(&t, args, env, NULL, out, sizeof(out), err,
                         sizeof(err)) == 1);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
