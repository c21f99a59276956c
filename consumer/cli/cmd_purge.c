/* `runledger purge`: removes finished runs older than a retention period,
 * with their attempts, decisions and delivered notifications, one small
 * transaction per batch (common/src/db/purge.c says which runs qualify). */
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
#include "rl/db_ops.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger purge --older-than DURATION [--status S[,S...]]\n"
"                       [--batch N] [--dry-run]\n"
"\n"
"Removes finished runs last updated more than DURATION ago (30d, 12h,\n"
"90m) with their attempts, operator decisions, approval decisions and\n"
"delivered notifications, --batch runs per transaction (default 1000).\n"
"--status: the statuses removed, of completed, failed and cancelled\n"
"          (default: all).\n"
"Runs that may still change (pending, running, unknown,\n"
"awaiting_approval) and runs with a notification not delivered yet\n"
"(pending or dead-lettered) are\n"
"kept. --dry-run prints what would be removed and removes nothing.\n"
"Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage.\n";
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

/* Splits the comma-separated list into statuses (pointers into buf, a copy
 * of list). Returns the number of statuses, or -1 with the bad one in
 * *bad. */
static int
parse_statuses(const char *list, char *buf, size_t size, const char **statuses,
               const char **bad)
{
    char *p, *comma;
    int n = 0;

    snprintf(buf, size, "%s", list);
    *bad = list;
    for (p = buf;; p = comma + 1) {
        comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        *bad = p;
        if (n == MAX_STATUSES || !rl_db_purge_status_known(p))
            return -1;
        for (int i = 0; i < n; i++) {
            if (strcmp(statuses[i], p) == 0)
                return -1;
        }
        statuses[n++] = p;
        if (!comma)
            return n;
    }
}

/* The statuses a purge may remove, comma-separated, into buf. */
static const char *
final_statuses(char *buf, size_t size)
{
    size_t n, len = 0;
    const char *const *all = rl_db_purge_statuses(&n);

    buf[0] = '\0';
    for (size_t i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "",
                                all[i]);
    return buf;
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
}

int
rl_cmd_purge(int argc, char **argv)
{
    enum { OPT_OLDER = 1, OPT_STATUS, OPT_BATCH, OPT_DRY };
    static const struct option options[] = {
        {"older-than", required_argument, NULL, OPT_OLDER},
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
    const char *statuses[MAX_STATUSES], *older_text = NULL, *bad;
    char status_buf[256], list[128], cutoff[RL_DB_TIME_SIZE], errstr[512], *end;
    struct rl_purge_counts sum = {0}, batch_counts;
    struct rl_db *db = NULL;
    int64_t older = 0;
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
        }
    }
    if (opt < 0)
        return rc;
    if (!older_text)
        return rl_cli_usage_error("purge", "--older-than is required");
    if (nstatuses == 0) {
        size_t n;
        const char *const *all = rl_db_purge_statuses(&n);

        for (size_t i = 0; i < n && i < MAX_STATUSES; i++)
            statuses[nstatuses++] = all[i];
    }

    rc = rl_cli_db_open("purge", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    err = rl_db_purge_cutoff(db, older, cutoff, sizeof(cutoff), errstr,
                             sizeof(errstr));
    if (err)
        goto done;
    printf("%s runs in status", dry_run ? "counting" : "purging");
    for (int i = 0; i < nstatuses; i++)
        printf("%s%s", i ? "," : " ", statuses[i]);
    printf(" last updated before %s (older than %s)\n", cutoff, older_text);

    started = now_seconds();
    if (dry_run) {
        err = rl_db_purge_count(db, statuses, (size_t)nstatuses, cutoff, &sum,
                                errstr, sizeof(errstr));
        if (err)
            goto done;
        printf("dry run: nothing removed; a purge would remove:\n");
        print_counts(&sum);
        goto done;
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

done:
    rl_db_destroy(db);
    if (err)
        return rl_cli_error("purge", err, errstr);
    return RL_EXIT_OK;
}
