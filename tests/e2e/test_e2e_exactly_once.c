/* End to end on the real broker, PostgreSQL and stub model: 1,000 schedule
 * events of which 30% are duplicates of other events (re-published later,
 * extra whitespace, another UTC offset, reordered request keys), plus
 * malformed events, consumed by two consumer processes while a third joins
 * and one leaves mid-stream. Asserts docs/design.md's invariants:
 *   one runs row per logical run, all completed, outputs never change on
 *   re-delivery; one outbox row per (run, channel), each on the
 *   notification topic; committed offsets reach the end of every
 *   partition; one generation per run at the model; every malformed event
 *   on the dead-letter topic with its reason.
 * Built twice: with the eager range assignor and, as ASSIGNOR, with the
 * cooperative-sticky one, whose incremental assign (the third joining)
 * and revoke (one leaving) must keep the same invariants; a consumer's
 * log then shows an incremental assignment. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "e2e.h"
#include "rl/runid.h"
#include "rl/timefmt.h"
#include "rltest.h"

#ifndef ASSIGNOR
#define ASSIGNOR "range"
#endif

#define DISTINCT 700
#define DUPLICATES 300
#define CHANNELS 2

static char job[128];
static char run_ids[DISTINCT][RL_HEX_SIZE];

/* variant 0: canonical; 1: whitespace around names; 2: same instant at
 * +02:00; 3: request keys reordered (same fingerprint). */
static void
event_json(int i, int variant, char *buf, size_t size)
{
    char utc[RL_TIME_UTC_SIZE], shifted[RL_TIME_UTC_SIZE];
    int64_t epoch = 1786093200 + (int64_t)i * 3600; /* 2026-08-07T09:00Z */
    char at[40];

    rl_time_format_utc(epoch, utc);
    rl_time_format_utc(epoch + 7200, shifted);
    if (variant == 2)
        snprintf(at, sizeof(at), "%.19s+02:00", shifted);
    else
        snprintf(at, sizeof(at), "%s", utc);
    if (variant == 3)
        snprintf(buf, size,
                 "{\"version\":\"v1\",\"notify\":[\"slack\",\"email\"],"
                 "\"request\":{\"messages\":[{\"content\":\"summarise "
                 "{{input}}\",\"role\":\"user\"}],\"temperature\":0,"
                 "\"model\":\"stub-1\"},\"input\":{\"doc\":%d},"
                 "\"scheduled_at\":\"%s\",\"tenant\":\"tenant-%d\","
                 "\"job\":\"%s\"}",
                 i, at, i % 7, job);
    else
        snprintf(buf, size,
                 "{\"job\":\"%s%s%s\",\"tenant\":\"%stenant-%d\","
                 "\"scheduled_at\":\"%s\",\"version\":\"v1\","
                 "\"input\":{\"doc\":%d},\"request\":{\"model\":\"stub-1\","
                 "\"temperature\":0,\"messages\":[{\"role\":\"user\","
                 "\"content\":\"summarise {{input}}\"}]},"
                 "\"notify\":[\"email\",\"slack\"]}",
                 variant == 1 ? "  " : "", job, variant == 1 ? "\\t" : "",
                 variant == 1 ? " " : "", i % 7, at, i);
}

static void
produce_run(struct e2e *t, int i, int variant)
{
    char buf[1024], tenant[32];

    event_json(i, variant, buf, sizeof(buf));
    snprintf(tenant, sizeof(tenant), "tenant-%d", i % 7);
    e2e_produce(t, tenant, buf);
}

static int
completed_at_least(struct e2e *t, void *opaque)
{
    return e2e_int(t, "SELECT count(*) FROM runs WHERE status = "
                      "'completed'") >= *(int *)opaque;
}

static int
settled(struct e2e *t, void *opaque)
{
    (void)opaque;
    return e2e_int(t, "SELECT count(*) FROM runs WHERE status = "
                      "'completed'") == DISTINCT &&
           e2e_int(t, "SELECT count(*) FROM outbox") == 0 &&
           e2e_group_lag(t) == 0;
}

struct notifications {
    long total;
    char (*keys)[RL_HEX_SIZE + 16];
    long distinct;
    long bad_header;
};

static int
cmp_key(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void
on_notification(const rd_kafka_message_t *rkm, void *opaque)
{
    struct notifications *n = opaque;
    char key[RL_HEX_SIZE + 16], run_id[RL_HEX_SIZE + 4];

    e2e_header(rkm, "idempotency-key", key, sizeof(key));
    e2e_header(rkm, "run_id", run_id, sizeof(run_id));
    if (strncmp(key, run_id, RL_HEX_SIZE - 1) != 0 || !rkm->key ||
        rkm->key_len != RL_HEX_SIZE - 1)
        n->bad_header++;
    if (n->total < DISTINCT * CHANNELS * 4)
        snprintf(n->keys[n->total], sizeof(n->keys[0]), "%s", key);
    n->total++;
}

/* Dead letters are delivered at least once: an event re-consumed after a
 * rebalance (its offset not yet committed) is dead-lettered again, with
 * the same source partition and offset, which is the consumer's key to
 * deduplicate them. The invariant is one distinct source per bad event. */
struct dead_letters {
    long total;
    long by_reason[8];
    char sources[64][32];
    int nsources;
};

static const char *const expected_reasons[] = {
    "invalid_json", "naive_timestamp", "missing_field:tenant", "too_deep",
    "invalid_utf8"};

static void
on_dead_letter(const rd_kafka_message_t *rkm, void *opaque)
{
    struct dead_letters *d = opaque;
    char reason[96], src[16];

    char part[16], source[32];
    int seen = 0;

    e2e_header(rkm, "reason", reason, sizeof(reason));
    e2e_header(rkm, "source_offset", src, sizeof(src));
    e2e_header(rkm, "source_partition", part, sizeof(part));
    snprintf(source, sizeof(source), "%s/%s", part, src);
    d->total++;
    for (int i = 0; i < d->nsources; i++)
        seen |= strcmp(d->sources[i], source) == 0;
    if (seen || !src[0] || d->nsources == 64)
        return;
    snprintf(d->sources[d->nsources++], sizeof(d->sources[0]), "%s", source);
    for (int i = 0; i < 5; i++) {
        if (strcmp(reason, expected_reasons[i]) == 0)
            d->by_reason[i]++;
    }
}

static void
produce_malformed(struct e2e *t)
{
    char deep[20000];
    const char bad_utf8[] = "{\"job\":\"\xff\xfe\"}";

    e2e_produce(t, NULL, "this is not json");
    e2e_produce(t, NULL,
                "{\"job\":\"j\",\"tenant\":\"t\",\"scheduled_at\":"
                "\"2026-08-07T09:00:00\",\"version\":\"v1\",\"request\":"
                "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                "\"content\":\"x\"}]}}");
    e2e_produce(t, NULL,
                "{\"job\":\"j\",\"scheduled_at\":\"2026-08-07T09:00:00Z\","
                "\"version\":\"v1\",\"request\":{\"model\":\"m\","
                "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}}");
    memset(deep, '[', 10000);
    memset(deep + 10000, ']', 9999);
    deep[19999] = '\0';
    e2e_produce(t, NULL, deep);
    e2e_produce(t, NULL, bad_utf8);
}

int
main(void)
{
    struct e2e t;
    const char *env[] = {"RUNLEDGER_PARTITION_ASSIGNOR=" ASSIGNOR, NULL};
    static char value[1024];
    int target;
    int64_t started;
    char before[64], after[64];
    struct notifications notes = {0, NULL, 0, 0};
    static struct dead_letters dead;
    long one_generation = 0;
    int status;

    e2e_setup(&t, "e2e_once", 4);
    snprintf(job, sizeof(job), "summary-%s", t.name);
    for (int i = 0; i < DISTINCT; i++) {
        struct rl_run_identity id = {0};
        char utc[RL_TIME_UTC_SIZE];
        const char *reason;
        char errstr[128];

        rl_time_format_utc(1786093200 + (int64_t)i * 3600, utc);
        snprintf(value, sizeof(value), "tenant-%d", i % 7);
        id.job = job;
        id.tenant = value;
        id.scheduled_at = utc;
        id.version = "v1";
        RL_REQUIRE(rl_runid_compute(&id, run_ids[i], NULL, &reason, errstr,
                                    sizeof(errstr)) == 0);
    }

    /* First half of the stream, two consumers. */
    for (int i = 0; i < 400; i++)
        produce_run(&t, i, 0);
    for (int i = 0; i < 150; i++)
        produce_run(&t, i * 2, 1 + i % 3);
    e2e_flush(&t);
    started = rltest_now_ms();
    e2e_spawn(&t, "consume", env);
    e2e_spawn(&t, "consume", env);

    /* A third consumer joins mid-stream. */
    target = 150;
    RL_CHECK(e2e_wait(completed_at_least, &t, &target, 60000));
    e2e_spawn(&t, "consume", env);

    for (int i = 400; i < DISTINCT; i++)
        produce_run(&t, i, 0);
    produce_malformed(&t);
    for (int i = 0; i < 150; i++)
        produce_run(&t, 399 + i * 2, 1 + i % 3);
    e2e_flush(&t);

    /* One consumer leaves mid-stream, cleanly. */
    target = 450;
    RL_CHECK(e2e_wait(completed_at_least, &t, &target, 60000));
    status = e2e_signal(&t, 0, SIGTERM, 1);
    RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    RL_CHECK(e2e_wait(settled, &t, NULL, 120000));
    fprintf(stderr, "settled in %lld ms\n",
            (long long)(rltest_now_ms() - started));

    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), DISTINCT);
    RL_CHECK_INTEQ(
        e2e_int(&t, "SELECT count(*) FROM runs WHERE status='completed'"),
        DISTINCT);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   DISTINCT * CHANNELS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox"), 0);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), DISTINCT);
    RL_CHECK_INTEQ(
        e2e_int(&t, "SELECT count(*) FROM attempts WHERE outcome='ok'"),
        DISTINCT);
    snprintf(before, sizeof(before), "%s",
             e2e_text(&t, "SELECT md5(string_agg(output::text, ',' ORDER BY "
                          "run_id)) FROM runs"));

    /* Re-delivery never changes a stored output. */
    for (int i = 0; i < 50; i++)
        produce_run(&t, i * 13, i % 4);
    e2e_flush(&t);
    RL_CHECK(e2e_wait(settled, &t, NULL, 60000));
    snprintf(after, sizeof(after), "%s",
             e2e_text(&t, "SELECT md5(string_agg(output::text, ',' ORDER BY "
                          "run_id)) FROM runs"));
    RL_CHECK(before[0] != '\0');
    RL_CHECK_STREQ(before, after);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), DISTINCT);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   DISTINCT * CHANNELS);

    /* Every outbox row is on the notification topic, keyed for dedupe. */
    notes.keys = calloc(DISTINCT * CHANNELS * 4, sizeof(notes.keys[0]));
    RL_REQUIRE(notes.keys);
    e2e_read_topic(&t, t.notify, on_notification, &notes);
    if (notes.total <= DISTINCT * CHANNELS * 4) {
        qsort(notes.keys, (size_t)notes.total, sizeof(notes.keys[0]), cmp_key);
        for (long i = 0; i < notes.total; i++) {
            if (i == 0 || strcmp(notes.keys[i], notes.keys[i - 1]) != 0)
                notes.distinct++;
        }
    }
    RL_CHECK(notes.total >= DISTINCT * CHANNELS);
    RL_CHECK_INTEQ(notes.distinct, DISTINCT * CHANNELS);
    RL_CHECK_INTEQ(notes.bad_header, 0);

    /* Malformed events: dead-lettered with their reason and source. */
    e2e_read_topic(&t, t.dlq, on_dead_letter, &dead);
    RL_CHECK(dead.total >= 5);
    RL_CHECK_INTEQ(dead.nsources, 5);
    for (int i = 0; i < 5; i++) {
        if (dead.by_reason[i] != 1)
            fprintf(stderr, "dead letters with reason %s: %ld\n",
                    expected_reasons[i], dead.by_reason[i]);
        RL_CHECK_INTEQ(dead.by_reason[i], 1);
    }

    /* One billable generation per logical run. */
    for (int i = 0; i < DISTINCT; i++) {
        if (e2e_stub_generations(&t, run_ids[i]) == 1)
            one_generation++;
    }
    RL_CHECK_INTEQ(one_generation, DISTINCT);

    fprintf(stderr,
            "e2e: events=%d runs=%lld duplicates_suppressed=%d "
            "generations=%ld notifications=%ld distinct_notifications=%ld "
            "dead_letters=%ld distinct_dead_letters=%d\n",
            DISTINCT + DUPLICATES + 50 + 5,
            (long long)e2e_int(&t, "SELECT count(*) FROM runs"),
            DUPLICATES + 50, one_generation, notes.total, notes.distinct,
            dead.total, dead.nsources);

    for (int i = 1; i < t.nprocs; i++) {
        if (e2e_alive(&t, i)) {
            status = e2e_signal(&t, i, SIGTERM, 1);
            RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
    }
    /* The incremental path was taken: a consumer's log shows an
     * incremental assignment (which one depends on the assignor: one
     * that joins when the others hold every partition may get none). */
    if (strcmp(ASSIGNOR, "cooperative-sticky") == 0) {
        int incremental = 0;

        for (int i = 0; i < t.nprocs; i++)
            incremental |= e2e_log_has(&t, i, "more partitions");
        RL_CHECK(incremental);
    }
    free(notes.keys);
    e2e_teardown(&t);
    RL_TEST_END();
}
