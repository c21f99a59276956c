/* `runledger purge`: removes finished runs older than a retention period,
 * with their attempts, decisions and delivered notifications, one small
 * transaction per batch (common/src/db/purge.c says which runs qualify),
 * leaving a tombstone of each; and removes tombstones once the topics an
 * event can come back from no longer hold it. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/config.h"
#include "rl/db_conn.h"
#include "rl/db_purge.h"
#include "rl/err.h"
#include "rl/kafka.h"
#include "rl/run_status.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger purge [--older-than DURATION] [--status S[,S...]]\n"
"                       [--tombstones-older-than DURATION] [--force]\n"
"                       [--batch N] [--dry-run]\n"
"\n"
"--older-than: removes finished runs last updated more than DURATION ago\n"
"  (30d, 12h, 90m) with their attempts, operator decisions, approval\n"
"  decisions, delivered notifications and counted model calls, --batch\n"
"  runs per transaction (default 1000), and leaves a tombstone of each\n"
"  (run ID, fingerprint, final status): its event, delivered again, is\n"
"  acknowledged and never run again.\n"
"--status: the statuses removed, of completed, failed and cancelled\n"
"  (default: all). Runs that may still change (pending, running,\n"
"  unknown, awaiting_approval) and runs with a notification not\n"
"  delivered yet (pending or dead-lettered) are kept.\n"
"--tombstones-older-than DURATION|retention: removes the tombstones of\n"
"  runs that finished more than DURATION ago; tombstones are removed\n"
"  only when asked. Its floor, and the value `retention` stands for, is\n"
"  the longest retention.ms of RUNLEDGER_TOPIC and RUNLEDGER_DLQ_TOPIC\n"
"  read from the broker (7d when it cannot be read). Below the floor, or\n"
"  with a topic that keeps events forever, it is refused without\n"
"  --force. Keep them longer where producers may backfill old events.\n"
"--dry-run prints what would be removed and removes nothing.\n"
"Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage or refused.\n";
/* clang-format on */

#define MAX_STATUSES 8

/* "30d", "12h", "90m": a positive whole number and its unit, into
 * seconds. Returns 0, or -1 on anything else (and beyond 100 years). */
static int
parse_duration(const char *text, int64_t *seconds)
{
    char *end;
    long long n;
    int64_t unit;

    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    n = strtoll(text, &end, 10);
    if (errno || n <= 0 || end[0] == '\0' || end[1] != '\0')
        return -1;
    switch (end[0]) {
    case 'd':
        unit = 86400;
        break;
    case 'h':
        unit = 3600;
        break;
    case 'm':
        unit = 60;
        break;
    default:
        return -1;
    }
    if (n > 100LL * 366 * 86400 / unit)
        return -1;
    *seconds = (int64_t)n * unit;
    return 0;
}

/* Splits the comma-separated list (copied into buf) into statuses.
 * Returns the number of statuses, or -1 with the bad one in *bad (a
 * pointer into buf). */
static int
parse_statuses(const char *list, char *buf, size_t size,
               enum rl_run_status *statuses, const char **bad)
{
    char *p, *comma;
    enum rl_run_status status;
    int n = 0;

    snprintf(buf, size, "%s", list);
    *bad = list;
    for (p = buf;; p = comma + 1) {
        comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        *bad = p;
        if (n == MAX_STATUSES || rl_run_status_parse(p, &status) != 0 ||
            !rl_db_purge_status_known(status))
            return -1;
        for (int i = 0; i < n; i++) {
            if (statuses[i] == status)
                return -1;
        }
        statuses[n++] = status;
        if (!comma)
            return n;
    }
}

/* The statuses a purge may remove, comma-separated, into buf. */
static const char *
final_statuses(char *buf, size_t size)
{
    size_t n, len = 0;
    const enum rl_run_status *all = rl_db_purge_statuses(&n);

    buf[0] = '\0';
    for (size_t i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "",
                                rl_run_status_name(all[i]));
    return buf;
}

/* Tombstones must outlive every copy of their event in the topics it can
 * come back from; below this nothing is known about the broker. */
#define TOMBSTONE_FLOOR_UNKNOWN_S (7 * 86400)
#define RETENTION_TIMEOUT_MS 10000

/* The longest retention of the source and dead-letter topics in seconds
 * into *longest (-1: one keeps events forever), as the broker reports
 * them. Returns 0, or -1 with errstr. */
static int
longest_retention(const struct rl_config *cfg, int64_t *longest, char *errstr,
                  size_t errstr_size)
{
    const char *topics[2] = {cfg->topic, cfg->dlq_topic};
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk = NULL;
    int rc = 0;

    *longest = 0;
    conf = rl_kafka_conf_new(cfg, errstr, errstr_size);
    if (conf)
        rk = rl_kafka_producer_new(conf, 0, errstr, errstr_size);
    if (!rk)
        return -1;
    for (size_t i = 0; i < 2 && *longest >= 0; i++) {
        int64_t ms = 0;

        if (rl_kafka_topic_retention_ms(rk, topics[i], RETENTION_TIMEOUT_MS,
                                        &ms, errstr, errstr_size) != 0) {
            rc = -1;
            break;
        }
        if (ms < 0) {
            printf("topic %s keeps events forever\n", topics[i]);
            *longest = -1;
        } else {
            printf("topic %s keeps events %lld s\n", topics[i],
                   (long long)(ms / 1000));
            if (ms / 1000 > *longest)
                *longest = ms / 1000;
        }
    }
    rd_kafka_destroy(rk);
    return rc;
}

/* The tombstones' floor in seconds into *floor_s: the longest retention
 * of the source and dead-letter topics, -1 when one is kept forever, and
 * at least TOMBSTONE_FLOOR_UNKNOWN_S (the whole floor, with a warning,
 * when the broker does not say). */
static void
tombstone_floor(const struct rl_config *cfg, int64_t *floor_s)
{
    char errstr[512];
    int64_t longest;

    *floor_s = TOMBSTONE_FLOOR_UNKNOWN_S;
    if (longest_retention(cfg, &longest, errstr, sizeof(errstr)) != 0) {
        fprintf(stderr,
                "runledger purge: warning: %s; the tombstones' floor is "
                "7d\n",
                errstr);
        return;
    }
    if (longest < 0 || longest > TOMBSTONE_FLOOR_UNKNOWN_S)
        *floor_s = longest;
}

static double
now_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
add_counts(struct rl_purge_counts *sum, const struct rl_purge_counts *c)
{
    sum->runs += c->runs;
    sum->attempts += c->attempts;
    sum->decisions += c->decisions;
    sum->approvals += c->approvals;
    sum->delivered += c->delivered;
    sum->reservations += c->reservations;
    sum->model_calls += c->model_calls;
    sum->tombstones += c->tombstones;
}

static void
print_counts(const struct rl_purge_counts *c)
{
    printf("  %-20s %12" PRId64 "\n", "runs", c->runs);
    printf("  %-20s %12" PRId64 "\n", "attempts", c->attempts);
    printf("  %-20s %12" PRId64 "\n", "run_decisions", c->decisions);
    printf("  %-20s %12" PRId64 "\n", "approvals", c->approvals);
    printf("  %-20s %12" PRId64 "\n", "outbox_delivered", c->delivered);
    printf("  %-20s %12" PRId64 "\n", "budget_reservations", c->reservations);
    printf("  %-20s %12" PRId64 "\n", "model_calls", c->model_calls);
    printf("  %-20s %12" PRId64 "\n", "tombstones written", c->tombstones);
}

/* Removes (or with dry_run counts) the tombstones of runs finished more
 * than older seconds ago, batch by batch. */
static int
purge_tombstones(struct rl_db *db, int64_t older, long batch, int dry_run,
                 char *errstr, size_t errstr_size)
{
    char cutoff[RL_DB_TIME_SIZE];
    int64_t removed = 0, total = 0;
    int err;

    err = rl_db_purge_cutoff(db, older, cutoff, sizeof(cutoff), errstr,
                             errstr_size);
    if (err)
        return err;
    do {
        err = rl_db_purge_tombstones(db, cutoff, (int)batch, dry_run, &removed,
                                     errstr, errstr_size);
        if (err)
            break;
        total += removed;
    } while (!dry_run && removed > 0);
    printf("%s %" PRId64 " tombstones of runs finished before %s\n",
           dry_run ? "dry run: a purge would remove" : "removed", total,
           cutoff);
    return err;
}

int
rl_cmd_purge(int argc, char **argv)
{
    enum { OPT_OLDER = 1, OPT_STATUS, OPT_BATCH, OPT_DRY, OPT_TOMB, OPT_FORCE };
    static const struct option options[] = {
        {"older-than", required_argument, NULL, OPT_OLDER},
        {"tombstones-older-than", required_argument, NULL, OPT_TOMB},
        {"force", no_argument, NULL, OPT_FORCE},
        {"status", required_argument, NULL, OPT_STATUS},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"dry-run", no_argument, NULL, OPT_DRY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "purge",
        .usage = usage_text,
        .options = options,
        .name_errors = 1,
    };
    enum rl_run_status statuses[MAX_STATUSES];
    const char *older_text = NULL, *bad;
    char status_buf[256], list[128], cutoff[RL_DB_TIME_SIZE], errstr[512], *end;
    struct rl_purge_counts sum = {0}, batch_counts;
    struct rl_db *db = NULL;
    struct rl_config *cfg = NULL;
    const char *tomb_text = NULL;
    int64_t older = 0, tomb_older = 0, floor_s = 0;
    int force = 0;
    long batch = 1000, batches = 0;
    double started, t0, dt, longest = 0, elapsed;
    int nstatuses = 0, dry_run = 0, opt, err, rc;

    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc, argv, &rc)) > 0) {
        switch (opt) {
        case OPT_OLDER:
            if (parse_duration(optarg, &older) != 0)
                return rl_cli_usage_error(
                    "purge",
                    "--older-than %s: not a duration such as 30d, 12h or "
                    "90m",
                    optarg);
            older_text = optarg;
            break;
        case OPT_STATUS:
            nstatuses = parse_statuses(optarg, status_buf, sizeof(status_buf),
                                       statuses, &bad);
            if (nstatuses < 0)
                return rl_cli_usage_error(
                    "purge", "--status: %s is not one of %s (or given twice)",
                    bad, final_statuses(list, sizeof(list)));
            break;
        case OPT_BATCH:
            errno = 0;
            batch = strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || batch < 1 || batch > 100000)
                return rl_cli_usage_error(
                    "purge", "--batch %s: not a number from 1 to 100000",
                    optarg);
            break;
        case OPT_DRY:
            dry_run = 1;
            break;
        case OPT_TOMB:
            if (strcmp(optarg, "retention") != 0 &&
                parse_duration(optarg, &tomb_older) != 0)
                return rl_cli_usage_error(
                    "purge",
                    "--tombstones-older-than %s: not a duration such as 90d, "
                    "12h or 90m, nor retention",
                    optarg);
            tomb_text = optarg;
            break;
        case OPT_FORCE:
            force = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;
    if (!older_text && !tomb_text)
        return rl_cli_usage_error(
            "purge", "--older-than or --tombstones-older-than is required");

    rc = rl_cli_db_open("purge", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    /* The tombstones' floor is checked before anything is removed: a
     * refusal changes nothing. */
    if (tomb_text) {
        rc = rl_cli_config_load("purge", &cfg);
        if (rc != RL_EXIT_OK) {
            rl_db_destroy(db);
            return rc;
        }
        tombstone_floor(cfg, &floor_s);
        rl_config_destroy(cfg);
        if (strcmp(tomb_text, "retention") == 0)
            tomb_older = floor_s;
    }
    if (tomb_text && !force && (floor_s < 0 || tomb_older < floor_s)) {
        rl_db_destroy(db);
        if (floor_s < 0)
            return rl_cli_usage_error(
                "purge",
                "refused to remove tombstones: a topic keeps events forever, "
                "so a purged run's event can always come back (--force to "
                "remove them anyway)");
        return rl_cli_usage_error(
            "purge",
            "refused --tombstones-older-than %s: below the floor of %lld s "
            "(the longest retention of the topics an event can come back "
            "from); --force to remove them anyway",
            tomb_text, (long long)floor_s);
    }
    if (nstatuses == 0) {
        size_t n;
        const enum rl_run_status *all = rl_db_purge_statuses(&n);

        for (size_t i = 0; i < n && i < MAX_STATUSES; i++)
            statuses[nstatuses++] = all[i];
    }

    if (!older_text)
        goto tombstones;
    err = rl_db_purge_cutoff(db, older, cutoff, sizeof(cutoff), errstr,
                             sizeof(errstr));
    if (err)
        goto done;
    printf("%s runs in status", dry_run ? "counting" : "purging");
    for (int i = 0; i < nstatuses; i++)
        printf("%s%s", i ? "," : " ", rl_run_status_name(statuses[i]));
    printf(" last updated before %s (older than %s)\n", cutoff, older_text);

    started = now_seconds();
    if (dry_run) {
        err = rl_db_purge_count(db, statuses, (size_t)nstatuses, cutoff, &sum,
                                errstr, sizeof(errstr));
        if (err)
            goto done;
        printf("dry run: nothing removed; a purge would remove:\n");
        print_counts(&sum);
        goto tombstones;
    }
    /* A batch that removes nothing ends the purge: every run left either
     * does not qualify or is locked by another session right now. */
    do {
        t0 = now_seconds();
        err = rl_db_purge_batch(db, statuses, (size_t)nstatuses, cutoff,
                                (int)batch, &batch_counts, errstr,
                                sizeof(errstr));
        if (err)
            break;
        dt = now_seconds() - t0;
        if (batch_counts.runs > 0) {
            batches++;
            if (dt > longest)
                longest = dt;
        }
        add_counts(&sum, &batch_counts);
    } while (batch_counts.runs > 0);
    elapsed = now_seconds() - started;
    printf("%s:\n", err ? "removed before the failure" : "removed");
    print_counts(&sum);
    printf("%ld batches of at most %ld runs in %.3f s: %.0f runs/s, longest "
           "batch %.3f s\n",
           batches, batch, elapsed,
           elapsed > 0 ? (double)sum.runs / elapsed : 0.0, longest);
    if (err)
        goto done;

tombstones:
    if (tomb_text && tomb_older > 0)
        err = purge_tombstones(db, tomb_older, batch, dry_run, errstr,
                               sizeof(errstr));

done:
    rl_db_destroy(db);
    if (err)
        return rl_cli_error("purge", err, errstr);
    return RL_EXIT_OK;
}
