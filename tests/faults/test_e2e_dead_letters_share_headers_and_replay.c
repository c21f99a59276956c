/* Dead letters of every kind carry the same header set, `runledger dlq
 * list` lists them, and `dlq replay` brings a fixable event back.
 *
 * Six dead letters: an invalid event (intake, wrong_type:job), an event
 * the ledger refuses (intake, rejected_by_ledger: a test-only CHECK on the
 * tenant), a run the model rejects at once (run, model_rejected: a 400),
 * a run that exhausts its 3 attempts on 503s (run, attempts_exhausted:
 * its last attempt is the sweeper's, so its event is rebuilt from the
 * ledger row) and a run's two notifications the producer refuses
 * (outbox, 1.5 MB each).
 * Then: every one carries each header of rl/deadletter.h exactly once;
 * `dlq list --json` lists all six with their reasons; `dlq replay
 * --dry-run` sends nothing; once the CHECK is dropped, `dlq replay
 * --reason rejected_by_ledger` re-publishes the refused event and its run
 * completes; replaying it again adds no run and no attempt; the invalid
 * event is reported and skipped (exit 2), the outbox one is not
 * replayable (exit 3), and the exhausted run's rebuilt event validates to
 * the same run ID. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "faults.h"
#include "ops.h"
#include "rl/deadletter.h"
#include "rltest.h"

static char out[1 << 20], err[1 << 16];

struct seen {
    long n;
    long bad; /* records missing a header or carrying one twice */
    char kinds[8][160];
};

static void
on_dead_letter(const rd_kafka_message_t *rkm, void *opaque)
{
    struct seen *s = opaque;
    rd_kafka_headers_t *hdrs = NULL;
    char source[32], reason[64], kind[16];

    RL_CHECK(rd_kafka_message_headers(rkm, &hdrs) == 0);
    for (int i = 0; hdrs && i < RL_DEADLETTER_NHEADERS; i++) {
        const char *name = rl_deadletter_header_names[i];
        const void *val;
        size_t len, count = 0;

        for (size_t k = 0; rd_kafka_header_get(hdrs, k, name, &val, &len) == 0;
             k++)
            count++;
        if (count != 1) {
            fprintf(stderr, "dead letter at %d/%lld has header %s %zu times\n",
                    (int)rkm->partition, (long long)rkm->offset, name, count);
            s->bad++;
        }
    }
    e2e_header(rkm, "source", source, sizeof(source));
    e2e_header(rkm, "reason", reason, sizeof(reason));
    e2e_header(rkm, "value_kind", kind, sizeof(kind));
    if (s->n < 8)
        snprintf(s->kinds[s->n], sizeof(s->kinds[s->n]), "%s/%.60s/%s", source,
                 reason, kind);
    s->n++;
}

static int
has_kind(const struct seen *s, const char *want)
{
    for (long i = 0; i < s->n && i < 8; i++) {
        if (strncmp(s->kinds[i], want, strlen(want)) == 0)
            return 1;
    }
    return 0;
}

static void
count_msg(const rd_kafka_message_t *rkm, void *opaque)
{
    (void)rkm;
    ++*(long *)opaque;
}

static long
schedule_events(struct e2e *t)
{
    long n = 0;

    e2e_read_topic(t, t->topic, count_msg, &n);
    return n;
}

static int
run_cli(struct e2e *t, const char *const *args)
{
    int rc;

    out[0] = err[0] = '\0';
    rc = ops_run(t, args, NULL, NULL, out, sizeof(out), err, sizeof(err));
    fprintf(stderr, "$ runledger %s %s ... -> %d\n%s%s", args[0], args[1], rc,
            out, err);
    return rc;
}

int
main(void)
{
    struct e2e t;
    struct seen s;
    char job[160], poison[RL_HEX_SIZE], rejected[RL_HEX_SIZE];
    char exhausted[RL_HEX_SIZE], big[RL_HEX_SIZE];
    long before;

    memset(&s, 0, sizeof(s));
    e2e_setup(&t, "dlqreplay", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    RL_REQUIRE(e2e_int(&t, "ALTER TABLE runs ADD CONSTRAINT test_poison "
                           "CHECK (tenant <> 'poison')") == 0);
    e2e_produce(&t, "tenant-a", "{\"job\": 1}");
    e2e_produce_event(&t, job, "poison", 0, NULL, poison);
    e2e_produce_event(&t, job, "tenant-a", 1, "[[fault:400]]", rejected);
    e2e_produce_event(&t, job, "tenant-a", 2, "[[fault:503]]", exhausted);
    e2e_produce_event(&t, job, "tenant-a", 3,
                      "[[fault:oversize bytes=1500000]]", big);
    e2e_flush(&t);
    fx_spawn(&t, "consume", "RUNLEDGER_MAX_ATTEMPTS=3", NULL);
    RL_REQUIRE(fx_settled(&t, 60000));
    RL_REQUIRE(e2e_wait_intf(&t, 2, 20000,
                             "SELECT count(*) FROM outbox_dead WHERE "
                             "run_id='%s'",
                             big));
    for (int i = 0; i < 100 && fx_dead_letters_now(&t, NULL, NULL) < 6; i++) {
        struct timespec ts = {0, 200000000L};

        nanosleep(&ts, NULL);
    }

    /* The same header set on every dead letter, whatever produced it. */
    e2e_read_topic(&t, t.dlq, on_dead_letter, &s);
    RL_CHECK_INTEQ(s.n, 6);
    RL_CHECK_INTEQ(s.bad, 0);
    RL_CHECK(has_kind(&s, "intake/wrong_type:job/event"));
    RL_CHECK(has_kind(&s, "intake/rejected_by_ledger/event"));
    RL_CHECK(has_kind(&s, "run/model_rejected/event"));
    RL_CHECK(has_kind(&s, "run/attempts_exhausted/rebuilt"));
    RL_CHECK(has_kind(&s, "outbox/"));

    /* list --json: one line per dead letter, with its reason and run. */
    {
        const char *args[] = {"dlq", "list", "--json", NULL};

        RL_CHECK_INTEQ(run_cli(&t, args), 0);
        RL_CHECK(strstr(out, "\"reason\":\"wrong_type:job\"") != NULL);
        RL_CHECK(strstr(out, "\"reason\":\"rejected_by_ledger\"") != NULL);
        RL_CHECK(strstr(out, "\"reason\":\"model_rejected\"") != NULL);
        RL_CHECK(strstr(out, "\"reason\":\"attempts_exhausted\"") != NULL);
        RL_CHECK(strstr(out, "\"source\":\"outbox\"") != NULL);
        RL_CHECK(strstr(out, exhausted) != NULL);
        /* The run's stored source position, though the sweeper ran it. */
        RL_CHECK(strstr(out, "\"source_topic\":\"") != NULL);
    }
    {
        const char *args[] = {"dlq", "list", "--reason", "attempts_exhausted",
                              NULL};

        RL_CHECK_INTEQ(run_cli(&t, args), 0);
        RL_CHECK(strstr(out, exhausted) != NULL);
        RL_CHECK(strstr(out, poison) == NULL);
    }

    /* --dry-run sends nothing. */
    before = schedule_events(&t);
    {
        const char *args[] = {"dlq",       "replay",
                              "--reason",  "rejected_by_ledger",
                              "--dry-run", NULL};

        RL_CHECK_INTEQ(run_cli(&t, args), 0);
        RL_CHECK(strstr(out, "would-send") != NULL);
        RL_CHECK(strstr(out, poison) != NULL);
    }
    RL_CHECK_INTEQ(schedule_events(&t), before);

    /* The rebuilt event of the exhausted run is the same logical run. */
    {
        const char *args[] = {"dlq",     "replay",    "--run-id",
                              exhausted, "--dry-run", NULL};

        RL_CHECK_INTEQ(run_cli(&t, args), 0);
        RL_CHECK(strstr(out, "would-send") != NULL);
        RL_CHECK(strstr(out, exhausted) != NULL);
    }

    /* Invalid: reported and skipped. Outbox: not replayable. */
    {
        const char *args[] = {"dlq", "replay", "--reason", "wrong_type", NULL};

        RL_CHECK_INTEQ(run_cli(&t, args), 2);
        RL_CHECK(strstr(out, "invalid") != NULL);
    }
    {
        const char *args[] = {"dlq", "replay", "--run-id", big, NULL};

        RL_CHECK_INTEQ(run_cli(&t, args), 3);
        RL_CHECK(strstr(out, "not-replayable") != NULL);
    }
    RL_CHECK_INTEQ(schedule_events(&t), before);

    /* Fixed, replayed: the refused event becomes a run that completes. */
    RL_REQUIRE(e2e_int(&t, "ALTER TABLE runs DROP CONSTRAINT test_poison") ==
               0);
    {
        const char *args[] = {"dlq", "replay", "--reason", "rejected_by_ledger",
                              NULL};

        RL_CHECK_INTEQ(run_cli(&t, args), 0);
        RL_CHECK(strstr(out, "sent") != NULL);
        RL_CHECK(strstr(out, poison) != NULL);
    }
    RL_CHECK_INTEQ(schedule_events(&t), before + 1);
    RL_CHECK(e2e_wait_intf(&t, 1, 30000,
                           "SELECT count(*) FROM runs WHERE run_id='%s' AND "
                           "status='completed'",
                           poison));
    RL_REQUIRE(fx_settled(&t, 30000));

    /* Again: the same run ID, acknowledged as a duplicate. */
    {
        const char *args[] = {"dlq", "replay", "--reason", "rejected_by_ledger",
                              NULL};

        RL_CHECK_INTEQ(run_cli(&t, args), 0);
    }
    RL_CHECK_INTEQ(schedule_events(&t), before + 2);
    RL_REQUIRE(fx_settled(&t, 30000));
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT count(*) FROM runs WHERE tenant='poison'"), 1);
    RL_CHECK_INTEQ(fx_attempts(&t, poison, "*"), 1);
    RL_CHECK_INTEQ(fx_dead_letters_now(&t, NULL, NULL), 6);
    e2e_teardown(&t);
    RL_TEST_END();
}
