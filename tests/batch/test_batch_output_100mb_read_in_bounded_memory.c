/* The batcher reads an output file of 100 MB or more holding a bounded
 * number of bytes, whatever the file's size: 1,000 runs of a batch-mode
 * job (no notification channels, so the test moves no 100 MB through the
 * broker) whose lines the stub answers with 100,000 bytes of content each
 * ([[fault:oversize bytes=100000]]), one batch. Every run completes once
 * with its 100,000-byte answer; the stub's output file is 100 MB or more;
 * the consumer's peak resident set (VmHWM) stays under 64 MiB, well under
 * the file's size (not checked under AddressSanitizer, whose quarantine
 * keeps freed memory resident); and the batcher's own log says it held
 * at most 4 MiB of answers plus one line's at once. The test prints the
 * figures. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "batch_test.h"
#include "faults.h"
#include "rl/timefmt.h"
#include "rltest.h"

#define RUNS 1000
#define ANSWER_BYTES 100000
#define HWM_MAX_KB (64L * 1024)
#define HELD_MAX ((long)4 * 1024 * 1024 + 2 * ANSWER_BYTES)

/* The most "at most N bytes of answers held" the consumer of slot logged,
 * or -1 when it logged none. */
static long
held_logged(struct e2e *t, int slot)
{
    char path[160], line[4096];
    const char *key = "at most ";
    long most = -1;
    FILE *f;

    snprintf(path, sizeof(path), "%s.%d.log", t->name, slot);
    f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, key);

        if (p && strstr(p, "bytes of answers held")) {
            long n = strtol(p + strlen(key), NULL, 10);

            if (n > most)
                most = n;
        }
    }
    fclose(f);
    return most;
}

int
main(void)
{
    struct e2e t;
    char job[160], event[1024], utc[RL_TIME_UTC_SIZE], path[256];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0.5", NULL};
    long hwm, held, file_bytes = -1;
    int slot;
    cJSON *stats;

    e2e_setup(&t, "batchbig", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "1000", NULL);
    for (int i = 0; i < RUNS; i++) {
        rl_time_format_utc(1786093200 + (int64_t)i * 3600, utc);
        snprintf(event, sizeof(event),
                 "{\"job\":\"%s\",\"tenant\":\"tenant-a\","
                 "\"scheduled_at\":\"%s\",\"version\":\"v1\","
                 "\"input\":{\"doc\":%d},\"request\":{\"model\":\"stub-1\","
                 "\"messages\":[{\"role\":\"user\",\"content\":\"summarise "
                 "{{input}} [[fault:oversize bytes=%d]]\"}]}}",
                 job, utc, i, ANSWER_BYTES);
        e2e_produce(&t, "tenant-a", event);
    }
    e2e_flush(&t);
    slot = bt_spawn(&t, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 240000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    hwm = e2e_status_kb(t.procs[slot], "VmHWM:");
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), 1);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE status = "
                               "'completed' AND length(output->>'text') = "
                               "100000"),
                   RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts WHERE outcome "
                               "= 'ok'"),
                   RUNS);
    RL_CHECK_STREQ(e2e_text(&t, "SELECT state || '/' || lines_ok FROM "
                                "batches"),
                   "completed/1000");

    /* The output file's size, as the stub lists it. */
    snprintf(path, sizeof(path), "%s",
             e2e_text(&t, "SELECT output_file_id FROM batches"));
    stats = bt_stub_file(&t, path);
    if (stats) {
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(stats, "bytes");

        file_bytes = cJSON_IsNumber(b) ? (long)b->valuedouble : -1;
        cJSON_Delete(stats);
    }
    held = held_logged(&t, slot);
    printf("output file %ld bytes; consumer VmHWM %ld kB (bound %ld kB); "
           "answers held at most %ld bytes (bound %ld)\n",
           file_bytes, hwm, HWM_MAX_KB, held, HELD_MAX);
    RL_CHECK(file_bytes >= 100000000L);
    RL_CHECK(held > 0 && held <= HELD_MAX);
#ifndef __SANITIZE_ADDRESS__
    RL_CHECK(hwm > 0 && hwm < HWM_MAX_KB);
#endif
    e2e_teardown(&t);
    RL_TEST_END();
}
