/* A rolling upgrade as `helm upgrade` runs it: the previous release's
 * consumers (the last release, built by tests/harness/prev_release.sh and
 * cached under the build folder) work on a ledger migrated by that
 * release; this build's migrations are applied while they have runs in
 * flight (expand); this build's consumers join the group beside them;
 * then the old ones get SIGTERM and leave (contract).
 *
 * Nothing is lost (every event's run completes, once, with one distinct
 * notification per channel), no run is stuck (the ledger settles, no
 * attempt without its outcome), the old consumers exit cleanly, and no
 * process loops on an error (warn and error lines per process log are
 * counted and printed; none may be an error, few a warning).
 *
 * The previous release's consumers connect as the migrating user, also
 * under RL_TEST_DB_ROLES=1: a ledger that release migrated grants the
 * component roles nothing (not even the schema), so, as in a deployment
 * that adopts the roles with this upgrade, they keep the one URL they
 * had. This build's consumers, started after its migrations, connect as
 * their role's login under RL_TEST_DB_ROLES=1. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "faults.h"
#include "rl/db_migrate.h"
#include "rltest.h"
#include "rltest_db.h"

#define WAVE 80
#define WAVES 4
#define RUNS (WAVE * WAVES)
#define CHANNELS 2
#define OLD 2
#define NEW 2
#define WARN_MAX 10

struct notes {
    long total;
    long distinct;
    char (*keys)[RL_HEX_SIZE + 16];
};

static void
on_note(const rd_kafka_message_t *rkm, void *opaque)
{
    struct notes *n = opaque;

    if (n->total < RUNS * CHANNELS * 4)
        e2e_header(rkm, "idempotency-key", n->keys[n->total],
                   sizeof(n->keys[0]));
    n->total++;
}

static int
cmp_key(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void
produce_wave(struct e2e *t, const char *job, int from, const char *fault)
{
    char run_id[RL_HEX_SIZE];

    for (int i = 0; i < WAVE; i++)
        e2e_produce_event(t, job, i % 2 ? "tenant-a" : "tenant-b", from + i,
                          fault, run_id);
    e2e_flush(t);
}

/* The previous release's binary: built once, then taken from the cache. */
static void
previous_release(char *bin, size_t size)
{
    const char *src = getenv("RL_SOURCE_DIR");
    char cmd[PATH_MAX * 2];
    FILE *p;

    snprintf(cmd, sizeof(cmd),
             "'%s/tests/harness/prev_release.sh' ../../prev-release "
             "2>prev-release.log",
             src ? src : ".");
    p = popen(cmd, "r");
    RL_REQUIRE(p);
    if (!fgets(bin, (int)size, p))
        bin[0] = '\0';
    if (pclose(p) != 0 || !bin[0]) {
        FILE *log = fopen("prev-release.log", "r");
        char line[512];

        fprintf(stderr, "could not build the previous release:\n");
        while (log && fgets(line, sizeof(line), log))
            fputs(line, stderr);
        if (log)
            fclose(log);
        RL_REQUIRE(0);
    }
    bin[strcspn(bin, "\r\n")] = '\0';
}

/* Warn and error lines of a process's log, less librdkafka's
 * configuration warnings (consumer settings given to its producer). */
static void
count_log(struct e2e *t, int slot, long *warn, long *error)
{
    char name[200], line[4096];
    FILE *f;

    *warn = *error = 0;
    snprintf(name, sizeof(name), "%s.%d.log", t->name, slot);
    f = fopen(name, "r");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, "CONFWARN"))
            continue;
        if (strstr(line, "\"level\":\"error\""))
            (*error)++;
        else if (strstr(line, "\"level\":\"warn\""))
            (*warn)++;
    }
    fclose(f);
}

int
main(void)
{
    struct e2e t;
    struct notes notes = {0, 0, NULL};
    char old_bin[PATH_MAX], new_bin[PATH_MAX], sql[256], errstr[512];
    char job[WAVES][160];
    const char *params[1];
    int old[OLD], slot, status, applied = 0;
    long warn, error, errors = 0, warn_worst = 0;
    char owner_url[1100];

    RL_REQUIRE(getenv("RUNLEDGER_BIN"));
    snprintf(new_bin, sizeof(new_bin), "%s", getenv("RUNLEDGER_BIN"));
    previous_release(old_bin, sizeof(old_bin));
    e2e_setup(&t, "upgrade", 4);
    for (int i = 0; i < WAVES; i++)
        snprintf(job[i], sizeof(job[i]), "job-%s-%d", t.name, i);

    /* The ledger as the previous release left it: its own migrations
     * only. A schema name is an identifier: the server quotes it. */
    params[0] = t.schema;
    for (int i = 0; i < 2; i++) {
        RL_REQUIRE(rl_db_exec(t.db,
                              i == 0
                                  ? "SELECT format('DROP SCHEMA %I CASCADE', "
                                    "$1::text)"
                                  : "SELECT format('CREATE SCHEMA %I', "
                                    "$1::text)",
                              1, params, sql, sizeof(sql), errstr,
                              sizeof(errstr)) == 1);
        RL_REQUIRE(rl_db_exec(t.db, sql, 0, NULL, NULL, 0, errstr,
                              sizeof(errstr)) >= 0);
    }
    setenv("RUNLEDGER_BIN", old_bin, 1);
    snprintf(owner_url, sizeof(owner_url), "DATABASE_URL=%s", t.database_url);
    slot = e2e_spawn(&t, "migrate", NULL);
    status = e2e_wait_exit(&t, slot, 60000);
    RL_REQUIRE(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);

    for (int i = 0; i < OLD; i++)
        old[i] = fx_spawn(&t, "consume", "RUNLEDGER_LEASE_SECONDS=10",
                          owner_url, NULL);
    produce_wave(&t, job[0], 0, "[[fault:latency ms=50]]");
    RL_REQUIRE(e2e_wait_completed(&t, job[0], WAVE, 90000));

    /* Expand: this build's migrations, with the old consumers' runs in
     * flight. */
    produce_wave(&t, job[1], WAVE, "[[fault:latency ms=400]]");
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT (count(*) > 0)::int FROM runs WHERE "
                             "job = '%s' AND status = 'running'",
                             job[1]));
    if (rl_db_migrate(t.db, &applied, errstr, sizeof(errstr)) != 0)
        fprintf(stderr, "migrating under the old consumers: %s\n", errstr);
    RL_REQUIRE(applied > 0);
    fprintf(stderr, "applied %d migrations while %d old consumers ran\n",
            applied, OLD);

    /* Both versions side by side in one group. */
    setenv("RUNLEDGER_BIN", new_bin, 1);
    for (int i = 0; i < NEW; i++)
        fx_spawn(&t, "consume", "RUNLEDGER_LEASE_SECONDS=10", NULL);
    produce_wave(&t, job[2], 2 * WAVE, "[[fault:latency ms=400]]");
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT (count(*) > 0)::int FROM runs WHERE "
                             "job = '%s' AND status = 'completed'",
                             job[2]));

    /* Contract: the old consumers leave, runs of theirs in flight. */
    for (int i = 0; i < OLD; i++)
        RL_CHECK(e2e_stop(&t, old[i], 60000));
    produce_wave(&t, job[3], 3 * WAVE, "[[fault:latency ms=50]]");
    RL_CHECK(fx_settled(&t, 120000));

    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE "
                               "status = 'completed'"),
                   RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts WHERE "
                               "outcome IS NULL"),
                   0);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   RUNS * CHANNELS);
    notes.keys = calloc(RUNS * CHANNELS * 4, sizeof(notes.keys[0]));
    RL_REQUIRE(notes.keys);
    e2e_read_topic(&t, t.notify, on_note, &notes);
    if (notes.total <= RUNS * CHANNELS * 4) {
        qsort(notes.keys, (size_t)notes.total, sizeof(notes.keys[0]), cmp_key);
        for (long i = 0; i < notes.total; i++) {
            if (i == 0 || strcmp(notes.keys[i], notes.keys[i - 1]) != 0)
                notes.distinct++;
        }
    }
    RL_CHECK_INTEQ(notes.distinct, RUNS * CHANNELS);
    for (int i = 0; i < t.nprocs; i++) {
        count_log(&t, i, &warn, &error);
        fprintf(stderr, "process %d (%s): %ld warn, %ld error lines\n", i,
                i == slot || (i > slot && i <= slot + OLD) ? "previous"
                                                           : "this build",
                warn, error);
        errors += error;
        if (warn > warn_worst)
            warn_worst = warn;
    }
    fprintf(stderr,
            "upgrade: %lld of %d runs completed, %ld notifications "
            "doubled, %lld runs generated twice\n",
            (long long)e2e_int(&t, "SELECT count(*) FROM runs WHERE "
                                   "status = 'completed'"),
            RUNS, notes.total - notes.distinct,
            (long long)e2e_int(&t, "SELECT count(DISTINCT run_id) FROM "
                                   "attempts WHERE attempt_no > 1"));
    RL_CHECK_INTEQ(errors, 0);
    RL_CHECK(warn_worst <= WARN_MAX);
    free(notes.keys);
    e2e_teardown(&t);
    RL_TEST_END();
}
