/* `runledger runs`: the operator's view of the ledger and the changes an
 * operator may make: re-open a parked run (retry), decide an unknown one
 * (resolve), decide a proposal (approve, reject) and stop runs that should
 * not run (cancel). Every change is one transaction that also records
 * who decided and why (run_decisions, schema/003). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/approval.h"
#include "rl/db_approval.h"
#include "rl/db_batch.h"
#include "rl/db_conn.h"
#include "rl/db_purge.h"
#include "rl/db_runs.h"
#include "rl/err.h"
#include "rl/runid.h"
#include "rl/timefmt.h"
#include "table.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger runs list [--status S] [--tenant T] [--job J]\n"
"                           [--since RFC3339] [--limit N] [--json]\n"
"       runledger runs show RUN_ID [--json]\n"
"       runledger runs retry RUN_ID [--attempts N] [--actor NAME]\n"
"                            [--reason TEXT]\n"
"       runledger runs resolve RUN_ID (--failed | --completed-from FILE)\n"
"                              --actor NAME --reason TEXT\n"
"       runledger runs approve RUN_ID --digest D --actor NAME [--reason TEXT]\n"
"       runledger runs reject RUN_ID --digest D --actor NAME [--reason TEXT]\n"
"       runledger runs cancel RUN_ID --actor NAME --reason TEXT\n"
"       runledger runs cancel --tenant T [--job J] [--version V]\n"
"                             [--status S[,S...]] [--created-before T]\n"
"                             [--dry-run]\n"
"                             --actor NAME --reason TEXT\n"
"\n"
"  list     runs, newest scheduled first (default limit 50); --status is\n"
"           pending, running, awaiting_approval, completed, failed, unknown\n"
"           or cancelled;\n"
"           --since keeps\n"
"           runs scheduled at or after the time\n"
"  show     one run with its attempts (outcome, HTTP status, tokens,\n"
"           latency), outbox rows (delivered or pending) and operator\n"
"           decisions\n"
"  retry    re-open a failed or unknown run for a new attempt under the\n"
"           same run ID (status pending, due now). An attempt without an\n"
"           outcome is closed as ambiguous: you accept that it may have\n"
"           generated. A run whose attempts ran out gets --attempts N\n"
"           more (default 1). --actor defaults to $USER.\n"
"  resolve  decide an unknown run: --failed, or --completed-from FILE\n"
"           (a JSON output, stored write-once; the run's notifications\n"
"           are queued in the same transaction, as a completion would)\n"
"  cancel   stop a pending (budget-deferred too), running or\n"
"           awaiting_approval run for good: status cancelled, nothing is\n"
"           published. A running run's lease is fenced (its worker can no\n"
"           longer write), its attempt closed as cancelled, and its worker\n"
"           cancels the call. With --tenant instead of RUN_ID, every run of\n"
"           the tenant (and job, version) in --status (default\n"
"           pending,awaiting_approval) registered before --created-before\n"
"           (RFC 3339; default: when the cancel starts), in batches of 500;\n"
"           --dry-run prints how many runs match and changes nothing\n"
"\n"
"The ledger is DATABASE_URL (see `runledger config`).\n"
"Exit status: 0 ok; 1 PostgreSQL unreachable or failed; 2 bad usage or\n"
"invalid input; 3 no such run, or its status refuses the change.\n";
/* clang-format on */

static const struct rl_cli_column list_columns[] = {
    {"RUN_ID", "run_id", -64},
    {"STATUS", "status", -17},
    {"ERROR_CLASS", "error_class", -18},
    {"ATT", "attempts", 3},
    {"SCHEDULED_AT", "scheduled_at", -25},
    {"JOB / TENANT / VERSION", "job / tenant / version", 0}};

static const struct rl_cli_table list_table = {"", "  ", "-", list_columns,
                                               RL_CLI_NCOLUMNS(list_columns)};

static const struct rl_cli_column attempt_columns[] = {
    {"NO", "attempt_no", -3},
    {"OUTCOME", "outcome", -14},
    {"HTTP", "http_status", -4},
    {"PROMPT", "prompt_tokens", -7},
    {"COMPL", "completion_tokens", -7},
    {"CACHED", "cached_tokens", -7},
    {"LAT_MS", "latency_ms", -8},
    {"DISPATCHED_AT", "dispatched_at", -26},
    {"WORKER / EPOCH / ERROR", "worker / lease_epoch / error", 0}};

static const struct rl_cli_table attempt_table = {
    "  ", " ", "-", attempt_columns, RL_CLI_NCOLUMNS(attempt_columns)};

static const struct rl_cli_column outbox_columns[] = {
    {"CHANNEL", "channel", -16},
    {"DELIVERED", "delivered", -9},
    {"COUNT", "delivery_count", -6},
    {"CREATED_AT", "created_at", -33},
    {"DELIVERED_AT", "delivered_at", 0}};

static const struct rl_cli_table outbox_table = {
    "  ", " ", "-", outbox_columns, RL_CLI_NCOLUMNS(outbox_columns)};

static int
valid_run_id(const char *s)
{
    size_t i;

    for (i = 0; s[i]; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    }
    return i == RL_HEX_SIZE - 1;
}

/* Returns RL_EXIT_OK for a run ID, else reports it and returns
 * RL_EXIT_USAGE. */
static int
check_run_id(const char *run_id)
{
    if (!valid_run_id(run_id))
        return rl_cli_usage_error(
            "runs", "\"%s\" is not a run ID (64 lowercase hex)", run_id);
    return RL_EXIT_OK;
}

static int
cmd_list(int argc, char **argv)
{
    enum {
        OPT_STATUS = 1,
        OPT_TENANT,
        OPT_JOB,
        OPT_SINCE,
        OPT_LIMIT,
        OPT_JSON
    };
    static const struct option options[] = {
        {"status", required_argument, NULL, OPT_STATUS},
        {"tenant", required_argument, NULL, OPT_TENANT},
        {"job", required_argument, NULL, OPT_JOB},
        {"since", required_argument, NULL, OPT_SINCE},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "runs",
        .usage = usage_text,
        .options = options,
    };
    struct rl_runs_filter filter = {NULL, NULL, NULL, NULL, 50};
    char errstr[512];
    char *json = NULL, *end;
    struct rl_db *db;
    enum rl_run_status status;
    int as_json = 0, rc, err, opt;
    int64_t epoch;

    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc, argv, &rc)) > 0) {
        switch (opt) {
        case OPT_STATUS:
            if (rl_run_status_parse(optarg, &status) != 0)
                return rl_cli_usage_error(
                    "runs", "--status must be pending, running, "
                            "awaiting_approval, completed, failed, "
                            "unknown or cancelled");
            filter.status = &status;
            break;
        case OPT_TENANT:
            filter.tenant = optarg;
            break;
        case OPT_JOB:
            filter.job = optarg;
            break;
        case OPT_SINCE:
            if (rl_time_parse(optarg, &epoch, NULL, errstr, sizeof(errstr)) !=
                0)
                return rl_cli_usage_error("runs", "--since: %s", errstr);
            filter.since = optarg;
            break;
        case OPT_LIMIT:
            errno = 0;
            filter.limit = (int)strtol(optarg, &end, 10);
            if (errno || *end || filter.limit < 1 || filter.limit > 100000)
                return rl_cli_usage_error("runs", "--limit must be 1..100000");
            break;
        case OPT_JSON:
            as_json = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;

    rc = rl_cli_db_open("runs list", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    err = rl_db_runs_list_json(db, &filter, &json, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err)
        return rl_cli_error("runs list", err, errstr);
    rl_cli_table_print_json(&list_table, json, as_json);
    free(json);
    return RL_EXIT_OK;
}

static void
print_run(const cJSON *report)
{
    static const char *const fields[] = {"run_id",          "job",
                                         "tenant",          "scheduled_at",
                                         "version",         "status",
                                         "attempts",        "lease_epoch",
                                         "lock_owner",      "lock_expires_at",
                                         "next_attempt_at", "deadline_at",
                                         "error_class",     "last_error",
                                         "source_topic",    "source_partition",
                                         "source_offset",   "fingerprint",
                                         "created_at",      "updated_at",
                                         "completed_at",    "request",
                                         "raw_input",       "output"};
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(report, "run");
    const cJSON *item;
    char b[4][8192];

    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        printf("%-17s %s\n", fields[i],
               rl_cli_json_text(run, fields[i], "-", b[0], 8192));
    /* A pending run held back by a concurrency limit, not by a fault. */
    item = cJSON_GetObjectItemCaseSensitive(report, "waiting");
    if (cJSON_IsObject(item))
        printf("%-17s %s\n", "waiting",
               rl_cli_json_text(item, "reason", "-", b[0], 8192));

    printf("\nattempts:\n");
    rl_cli_table_print(&attempt_table,
                       cJSON_GetObjectItemCaseSensitive(report, "attempts"));
    /* An answer read back from the endpoint's record was no new
     * generation: say which attempt it was. */
    cJSON_ArrayForEach(item,
                       cJSON_GetObjectItemCaseSensitive(report, "attempts"))
    {
        const cJSON *at =
            cJSON_GetObjectItemCaseSensitive(item, "reconciled_at");
        const cJSON *no = cJSON_GetObjectItemCaseSensitive(item, "attempt_no");
        const cJSON *from =
            cJSON_GetObjectItemCaseSensitive(item, "reconciled_attempt");
        const cJSON *gens =
            cJSON_GetObjectItemCaseSensitive(item, "reconciled_generations");

        if (!cJSON_IsString(at))
            continue;
        printf("  attempt %s: answer read back from the endpoint's record "
               "(%s) at %s, no new generation",
               rl_cli_json_text(item, "attempt_no", "-", b[0], 64),
               rl_cli_json_text(item, "reconciled_from", "-", b[1], 256),
               at->valuestring);
        /* The generation of an earlier ambiguous attempt, and every
         * generation the record held, each charged to this attempt. */
        if (cJSON_IsNumber(from) && cJSON_IsNumber(no) &&
            from->valueint != no->valueint)
            printf("; generated by attempt %d", from->valueint);
        if (cJSON_IsNumber(gens) && gens->valueint > 1)
            printf("; %d generations in the record, all charged",
                   gens->valueint);
        printf("\n");
    }
    printf("\noutbox:\n");
    rl_cli_table_print(&outbox_table,
                       cJSON_GetObjectItemCaseSensitive(report, "outbox"));
    printf("\ndecisions:\n");
    cJSON_ArrayForEach(item,
                       cJSON_GetObjectItemCaseSensitive(report, "decisions"))
    {
        printf("  %s %s by %s (was %s after %s attempts): %s\n",
               rl_cli_json_text(item, "decided_at", "-", b[0], 64),
               rl_cli_json_text(item, "decision", "-", b[1], 64),
               rl_cli_json_text(item, "actor", "-", b[2], 256),
               rl_cli_json_text(item, "prior_status", "-", b[3], 64),
               rl_cli_json_text(item, "attempts", "-", b[0] + 64, 64),
               rl_cli_json_text(item, "reason", "-", b[3] + 64, 4096));
    }
}

/* The proposal section of `runs show`: the canonical text and its digest,
 * the same bytes `runs approve` checks the digest against. A stored digest
 * that does not match its proposal is reported and fails the command. */
static int
print_proposal(const struct rl_run_proposal *prop)
{
    char digest[RL_HEX_SIZE], errstr[512];
    char *canonical = NULL;

    if (!prop->proposal_json)
        return RL_EXIT_OK;
    if (rl_approval_canonical(prop->proposal_json, &canonical, digest, errstr,
                              sizeof(errstr)) != RL_OK) {
        fprintf(stderr, "runledger runs show: %s\n", errstr);
        return RL_EXIT_FAILURE;
    }
    printf("\nproposal:\n  digest   %s\n  content  %s\n", prop->digest,
           canonical);
    free(canonical);
    if (prop->decision)
        printf("  decision %s by %s at %s (digest %s)%s%s\n", prop->decision,
               prop->actor ? prop->actor : "-", prop->decided_at,
               prop->approved_digest, prop->reason ? ": " : "",
               prop->reason ? prop->reason : "");
    else if (prop->status == RL_RUN_AWAITING_APPROVAL)
        printf("  decision none: runledger runs approve|reject RUN_ID "
               "--digest %s --actor NAME\n",
               prop->digest);
    if (strcmp(digest, prop->digest) != 0) {
        fprintf(stderr,
                "runledger runs show: the stored proposal does not match its "
                "digest (computed %s)\n",
                digest);
        return RL_EXIT_FAILURE;
    }
    return RL_EXIT_OK;
}

/* `runs show --json` of a run with a proposal: the report plus
 * "proposal": {digest, canonical (the text the digest covers), decision,
 * actor, reason, decided_at}. */
static int
print_json_with_proposal(const char *json, const struct rl_run_proposal *prop)
{
    cJSON *report = cJSON_Parse(json);
    cJSON *obj = cJSON_CreateObject();
    char digest[RL_HEX_SIZE], errstr[512];
    char *canonical = NULL, *text = NULL;
    int rc = RL_EXIT_FAILURE;

    if (rl_approval_canonical(prop->proposal_json, &canonical, digest, errstr,
                              sizeof(errstr)) != RL_OK) {
        fprintf(stderr, "runledger runs show: %s\n", errstr);
        goto done;
    }
    if (!report || !obj ||
        !cJSON_AddStringToObject(obj, "digest", prop->digest) ||
        !cJSON_AddStringToObject(obj, "canonical", canonical) ||
        !(prop->decision
              ? cJSON_AddStringToObject(obj, "decision", prop->decision)
              : cJSON_AddNullToObject(obj, "decision")) ||
        !(prop->actor ? cJSON_AddStringToObject(obj, "actor", prop->actor)
                      : cJSON_AddNullToObject(obj, "actor")) ||
        !(prop->reason ? cJSON_AddStringToObject(obj, "reason", prop->reason)
                       : cJSON_AddNullToObject(obj, "reason")) ||
        !(prop->decided_at[0]
              ? cJSON_AddStringToObject(obj, "decided_at", prop->decided_at)
              : cJSON_AddNullToObject(obj, "decided_at"))) {
        fprintf(stderr, "runledger runs show: out of memory\n");
        goto done;
    }
    cJSON_AddItemToObject(report, "proposal", obj);
    obj = NULL;
    text = cJSON_PrintUnformatted(report);
    if (!text) {
        fprintf(stderr, "runledger runs show: out of memory\n");
        goto done;
    }
    printf("%s\n", text);
    if (strcmp(digest, prop->digest) != 0) {
        fprintf(stderr,
                "runledger runs show: the stored proposal does not match its "
                "digest (computed %s)\n",
                digest);
        goto done;
    }
    rc = RL_EXIT_OK;

done:
    cJSON_free(text);
    free(canonical);
    cJSON_Delete(obj);
    cJSON_Delete(report);
    return rc;
}

static int
print_tombstone(const struct rl_tombstone *t, int as_json)
{
    if (as_json) {
        cJSON *o = cJSON_CreateObject();
        char *text;

        if (!o || !cJSON_AddStringToObject(o, "run_id", t->run_id) ||
            !cJSON_AddStringToObject(o, "status", "purged") ||
            !cJSON_AddStringToObject(o, "final_status", t->final_status) ||
            !cJSON_AddStringToObject(o, "fingerprint", t->fingerprint) ||
            !cJSON_AddStringToObject(o, "job", t->job) ||
            !cJSON_AddStringToObject(o, "tenant", t->tenant) ||
            !cJSON_AddStringToObject(o, "scheduled_at", t->scheduled_at) ||
            !cJSON_AddStringToObject(o, "version", t->version) ||
            !cJSON_AddStringToObject(o, "finished_at", t->finished_at) ||
            !cJSON_AddStringToObject(o, "purged_at", t->purged_at) ||
            !(text = cJSON_PrintUnformatted(o))) {
            cJSON_Delete(o);
            return rl_cli_error("runs show", RL_ERR_NOMEM, "out of memory");
        }
        printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(o);
        return RL_EXIT_OK;
    }
    printf("run          %s\n", t->run_id);
    printf("status       purged (a tombstone: the run ended %s and its rows "
           "were removed)\n",
           t->final_status);
    printf("job          %s\n", t->job);
    printf("tenant       %s\n", t->tenant);
    printf("scheduled_at %s\n", t->scheduled_at);
    printf("version      %s\n", t->version);
    printf("fingerprint  %s\n", t->fingerprint);
    printf("finished_at  %s\n", t->finished_at);
    printf("purged_at    %s\n", t->purged_at);
    printf("Its event, delivered again, is acknowledged without a model "
           "call.\n");
    return RL_EXIT_OK;
}

/* The run's batch (batch mode, docs/batch.md) added to its report as
 * "batch": null when it never waited for one. */
static int
with_batch(struct rl_db *db, const char *run_id, char **json, char *errstr,
           size_t errstr_size)
{
    char *batch = NULL, *merged;
    cJSON *report, *item;
    int err = rl_db_batch_of_run(db, run_id, &batch, errstr, errstr_size);

    if (err)
        return err;
    report = cJSON_Parse(*json);
    item = cJSON_Parse(batch);
    free(batch);
    if (!report || !item) {
        cJSON_Delete(report);
        cJSON_Delete(item);
        return 0;
    }
    cJSON_AddItemToObject(report, "batch", item);
    merged = cJSON_PrintUnformatted(report);
    cJSON_Delete(report);
    if (merged) {
        free(*json);
        *json = strdup(merged);
        cJSON_free(merged);
    }
    return 0;
}

/* One line naming the run's batch, when it waited for one. */
static void
print_batch(const cJSON *report)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(report, "batch");
    char buf[4][128];

    if (!cJSON_IsObject(b))
        return;
    printf(
        "batch: %s (provider %s, %s%s%s); attempt %s of the run: %s\n",
        rl_cli_json_text(b, "batch_id", "-", buf[0], sizeof(buf[0])),
        rl_cli_json_text(b, "provider_batch_id", "not created yet", buf[1],
                         sizeof(buf[1])),
        rl_cli_json_text(b, "batch_state", "waiting", buf[2], sizeof(buf[2])),
        cJSON_IsString(cJSON_GetObjectItemCaseSensitive(b, "provider_status"))
            ? ", provider says "
            : "",
        cJSON_IsString(cJSON_GetObjectItemCaseSensitive(b, "provider_status"))
            ? cJSON_GetObjectItemCaseSensitive(b, "provider_status")
                  ->valuestring
            : "",
        rl_cli_json_text(b, "attempt_no", "-", buf[3], sizeof(buf[3])),
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "run_state"))
            ? cJSON_GetStringValue(
                  cJSON_GetObjectItemCaseSensitive(b, "run_state"))
            : "-");
}

static int
cmd_show(int argc, char **argv)
{
    const char *run_id = NULL;
    int as_json = 0, rc, err;
    char errstr[512];
    char *json = NULL;
    struct rl_db *db;
    cJSON *report;
    struct rl_run_proposal prop;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_text, stdout);
            return RL_EXIT_OK;
        } else if (argv[i][0] == '-' || run_id)
            return rl_cli_usage_error("runs", "unexpected argument \"%s\"",
                                      argv[i]);
        else
            run_id = argv[i];
    }
    if (!run_id)
        return rl_cli_usage_error("runs", "runs show needs a RUN_ID");
    rc = check_run_id(run_id);
    if (rc != RL_EXIT_OK)
        return rc;
    rc = rl_cli_db_open("runs show", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    err = rl_db_run_report_json(db, run_id, &json, errstr, sizeof(errstr));
    if (err == RL_ERR_NOTFOUND) {
        /* A purged run: what its tombstone keeps. */
        struct rl_tombstone tomb;
        char terr[512];

        if (rl_db_tombstone_get(db, run_id, &tomb, terr, sizeof(terr)) == 0) {
            rl_db_destroy(db);
            return print_tombstone(&tomb, as_json);
        }
    }
    if (!err)
        err = rl_db_run_proposal(db, run_id, &prop, errstr, sizeof(errstr));
    if (!err)
        err = with_batch(db, run_id, &json, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err) {
        free(json);
        return rl_cli_error("runs show", err, errstr);
    }
    if (as_json) {
        rc = prop.proposal_json ? print_json_with_proposal(json, &prop)
                                : (printf("%s\n", json), RL_EXIT_OK);
        free(json);
        rl_run_proposal_clear(&prop);
        return rc;
    }
    report = cJSON_Parse(json);
    free(json);
    print_run(report);
    print_batch(report);
    cJSON_Delete(report);
    rc = print_proposal(&prop);
    rl_run_proposal_clear(&prop);
    return rc;
}

static char *
read_file(const char *path, char *errstr, size_t errstr_size)
{
    FILE *fp = fopen(path, "rb");
    char *buf;
    long len;

    if (!fp) {
        snprintf(errstr, errstr_size, "could not open %s: %s", path,
                 strerror(errno));
        return NULL;
    }
    if (fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) < 0 ||
        fseek(fp, 0, SEEK_SET) != 0) {
        snprintf(errstr, errstr_size, "could not read %s", path);
        fclose(fp);
        return NULL;
    }
    buf = malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, fp) != (size_t)len) {
        snprintf(errstr, errstr_size, "could not read %s", path);
        free(buf);
        fclose(fp);
        return NULL;
    }
    buf[len] = '\0';
    fclose(fp);
    return buf;
}

/* The options and RUN_ID of a decision on one run: retry, resolve,
 * approve or reject. */
struct decision {
    const char *run_id, *actor, *reason, *from, *digest;
    int failed;
    int attempts; /* retry --attempts N (0: not given) */
};

enum {
    OPT_ACTOR = 1,
    OPT_REASON,
    OPT_FAILED,
    OPT_COMPLETED_FROM,
    OPT_DIGEST,
    OPT_ATTEMPTS
};

static const struct option decide_options[] = {
    {"attempts", required_argument, NULL, OPT_ATTEMPTS},
    {"actor", required_argument, NULL, OPT_ACTOR},
    {"reason", required_argument, NULL, OPT_REASON},
    {"failed", no_argument, NULL, OPT_FAILED},
    {"completed-from", required_argument, NULL, OPT_COMPLETED_FROM},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const struct option approve_options[] = {
    {"digest", required_argument, NULL, OPT_DIGEST},
    {"actor", required_argument, NULL, OPT_ACTOR},
    {"reason", required_argument, NULL, OPT_REASON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Parses `runs <what>` with options into d. Returns 0, or -1 when the
 * command ends here with exit code *rc (help printed, or bad usage
 * reported). */
static int
parse_decision(int argc, char **argv, const char *what,
               const struct option *options, struct decision *d, int *rc)
{
    const struct rl_cli_opts opts = {
        .command = "runs",
        .usage = usage_text,
        .options = options,
        .operands = 1,
    };
    int opt;

    memset(d, 0, sizeof(*d));
    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc, argv, rc)) > 0) {
        switch (opt) {
        case OPT_ACTOR:
            d->actor = optarg;
            break;
        case OPT_REASON:
            d->reason = optarg;
            break;
        case OPT_FAILED:
            d->failed = 1;
            break;
        case OPT_COMPLETED_FROM:
            d->from = optarg;
            break;
        case OPT_DIGEST:
            d->digest = optarg;
            break;
        case OPT_ATTEMPTS: {
            char *end;
            long n;

            errno = 0;
            n = strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || n < 1 || n > 1000) {
                *rc = rl_cli_usage_error(
                    "runs", "--attempts %s: not a number from 1 to 1000",
                    optarg);
                return -1;
            }
            d->attempts = (int)n;
            break;
        }
        }
    }
    if (opt < 0)
        return -1;
    if (optind + 1 != argc) {
        *rc = rl_cli_usage_error("runs", "runs %s needs exactly one RUN_ID",
                                 what);
        return -1;
    }
    d->run_id = argv[optind];
    *rc = check_run_id(d->run_id);
    return *rc == RL_EXIT_OK ? 0 : -1;
}

/* retry and resolve */
static int
cmd_decide(int argc, char **argv, int resolve)
{
    const char *what = resolve ? "resolve" : "retry";
    struct decision d;
    int rc, err;
    char errstr[512], command[32];
    char *output = NULL;
    struct rl_decision dec;
    struct rl_db *db;
    cJSON *parsed;

    if (parse_decision(argc, argv, what, decide_options, &d, &rc) != 0)
        return rc;
    if (resolve && d.attempts)
        return rl_cli_usage_error("runs", "--attempts belongs to runs retry");
    if (!resolve) {
        if (d.failed || d.from)
            return rl_cli_usage_error("runs",
                                      "--failed and --completed-from belong to "
                                      "runs resolve");
        if (!d.actor)
            d.actor = getenv("USER");
        if (!d.actor || !*d.actor)
            d.actor = "operator";
        if (!d.reason)
            d.reason = "re-opened for a new attempt";
    } else {
        if (d.failed == !!d.from)
            return rl_cli_usage_error(
                "runs", "runs resolve needs exactly one of --failed "
                        "and --completed-from");
        if (!d.actor || !*d.actor || !d.reason || !*d.reason)
            return rl_cli_usage_error(
                "runs", "runs resolve needs --actor and --reason: "
                        "the decision is recorded with who and why");
    }
    if (d.from) {
        output = read_file(d.from, errstr, sizeof(errstr));
        if (!output) {
            fprintf(stderr, "runledger runs resolve: %s\n", errstr);
            return RL_EXIT_USAGE;
        }
        parsed = cJSON_Parse(output);
        if (!parsed || cJSON_IsNull(parsed)) {
            cJSON_Delete(parsed);
            free(output);
            fprintf(stderr,
                    "runledger runs resolve: %s is not a JSON output "
                    "(null is not an output either)\n",
                    d.from);
            return RL_EXIT_USAGE;
        }
        cJSON_Delete(parsed);
    }

    snprintf(command, sizeof(command), "runs %s", what);
    rc = rl_cli_db_open(command, &db);
    if (rc != RL_EXIT_OK) {
        free(output);
        return rc;
    }
    if (!resolve)
        err =
            rl_db_run_retry_attempts(db, d.run_id, d.actor, d.reason,
                                     d.attempts, &dec, errstr, sizeof(errstr));
    else if (d.failed)
        err = rl_db_run_resolve_failed(db, d.run_id, d.actor, d.reason, &dec,
                                       errstr, sizeof(errstr));
    else
        err = rl_db_run_resolve_completed(db, d.run_id, d.actor, d.reason,
                                          output, &dec, errstr, sizeof(errstr));
    rl_db_destroy(db);
    free(output);
    if (err)
        return rl_cli_error(command, err, errstr);
    if (!resolve)
        printf("run %s re-opened (was %s after %d attempts%s); the next "
               "sweep claims it\n",
               d.run_id, dec.prior_status, dec.attempts,
               dec.attempts_closed ? ", an attempt without outcome closed as "
                                     "ambiguous"
                                   : "");
    else if (d.failed)
        printf("run %s resolved failed by %s\n", d.run_id, d.actor);
    else
        printf("run %s resolved completed by %s; %d notifications queued\n",
               d.run_id, d.actor, dec.outbox_rows);
    return RL_EXIT_OK;
}

/* approve and reject: one decision on the proposal of a run awaiting
 * approval, bound to the digest the operator reviewed. */
static int
cmd_approve(int argc, char **argv, int approve)
{
    const char *what = approve ? "approve" : "reject";
    struct rl_approval_decision dec;
    struct decision d;
    char errstr[1024], command[32];
    struct rl_db *db;
    int rc, err;

    if (parse_decision(argc, argv, what, approve_options, &d, &rc) != 0)
        return rc;
    if (!d.digest || !valid_run_id(d.digest))
        return rl_cli_usage_error(
            "runs",
            "runs %s needs --digest: the 64 hex digest of the "
            "proposal (runs show)",
            what);
    if (!d.actor || !*d.actor)
        return rl_cli_usage_error(
            "runs",
            "runs %s needs --actor: the decision is recorded "
            "with who took it",
            what);

    snprintf(command, sizeof(command), "runs %s", what);
    rc = rl_cli_db_open(command, &db);
    if (rc != RL_EXIT_OK)
        return rc;
    err = rl_db_decide_run(db,
                           &(struct rl_decision_req){.run_id = d.run_id,
                                                     .digest = d.digest,
                                                     .actor = d.actor,
                                                     .approve = approve,
                                                     .reason = d.reason},
                           &dec, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err)
        return rl_cli_error(command, err, errstr);
    if (approve)
        printf("run %s approved by %s (digest %s); %d notifications "
               "queued\n",
               d.run_id, d.actor, dec.digest, dec.outbox_rows);
    else
        printf("run %s rejected by %s (digest %s); nothing is published\n",
               d.run_id, d.actor, dec.digest);
    return RL_EXIT_OK;
}

/* cancel: one run by RUN_ID, or every run a filter names (tenant
 * required), each a recorded decision. */

/* The most statuses --status of `runs cancel` names. */
#define CANCEL_STATUSES_MAX 16

/* Reads --status of `runs cancel` (comma-separated) into statuses, *n of
 * them. Returns 0, or RL_ERR_INVALID with errstr naming the word that is
 * no status, in the words rl_db_runs_cancel uses for a status it does not
 * cancel. */
static int
cancel_statuses_parse(const char *list, enum rl_run_status *statuses, size_t *n,
                      char *errstr, size_t errstr_size)
{
    const char *p = list;

    *n = 0;
    while (*p) {
        size_t len = strcspn(p, ",");
        char word[32];
        int known = 0;

        if (len < sizeof(word) && *n < CANCEL_STATUSES_MAX) {
            memcpy(word, p, len);
            word[len] = '\0';
            known = rl_run_status_parse(word, &statuses[*n]) == 0;
        }
        if (!known) {
            snprintf(errstr, errstr_size,
                     "could not cancel runs: status \"%.*s\" cannot be "
                     "cancelled (pending, running or awaiting_approval)",
                     (int)len, p);
            return RL_ERR_INVALID;
        }
        (*n)++;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

static int
cmd_cancel(int argc, char **argv)
{
    enum {
        OPT_C_ACTOR = 1,
        OPT_C_REASON,
        OPT_C_TENANT,
        OPT_C_JOB,
        OPT_C_VERSION,
        OPT_C_STATUS,
        OPT_C_DRY_RUN,
        OPT_C_BEFORE
    };
    static const struct option options[] = {
        {"actor", required_argument, NULL, OPT_C_ACTOR},
        {"reason", required_argument, NULL, OPT_C_REASON},
        {"tenant", required_argument, NULL, OPT_C_TENANT},
        {"job", required_argument, NULL, OPT_C_JOB},
        {"version", required_argument, NULL, OPT_C_VERSION},
        {"status", required_argument, NULL, OPT_C_STATUS},
        {"dry-run", no_argument, NULL, OPT_C_DRY_RUN},
        {"created-before", required_argument, NULL, OPT_C_BEFORE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "runs",
        .usage = usage_text,
        .options = options,
        .operands = 1,
    };
    struct rl_cancel_filter filter = {NULL, NULL, NULL, NULL, NULL, 0};
    enum rl_run_status statuses[CANCEL_STATUSES_MAX];
    const char *actor = NULL, *reason = NULL, *run_id = NULL;
    const char *status_list = NULL;
    struct rl_decision dec;
    struct rl_db *db;
    char errstr[512];
    int64_t n = 0;
    int dry_run = 0, rc, err, opt;

    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc, argv, &rc)) > 0) {
        switch (opt) {
        case OPT_C_ACTOR:
            actor = optarg;
            break;
        case OPT_C_REASON:
            reason = optarg;
            break;
        case OPT_C_TENANT:
            filter.tenant = optarg;
            break;
        case OPT_C_JOB:
            filter.job = optarg;
            break;
        case OPT_C_VERSION:
            filter.version = optarg;
            break;
        case OPT_C_STATUS:
            status_list = optarg;
            break;
        case OPT_C_DRY_RUN:
            dry_run = 1;
            break;
        case OPT_C_BEFORE: {
            int64_t epoch;
            char why[200];

            if (rl_time_parse(optarg, &epoch, NULL, why, sizeof(why)) != 0)
                return rl_cli_usage_error("runs", "--created-before %s: %s",
                                          optarg, why);
            filter.created_before = optarg;
            break;
        }
        }
    }
    if (opt < 0)
        return rc;
    if (optind + 1 < argc)
        return rl_cli_usage_error("runs", "runs cancel takes one RUN_ID");
    if (optind < argc)
        run_id = argv[optind];
    if (run_id) {
        if (filter.tenant || filter.job || filter.version || status_list ||
            filter.created_before || dry_run)
            return rl_cli_usage_error("runs",
                                      "runs cancel takes a RUN_ID or a filter "
                                      "(--tenant ...), not both");
        rc = check_run_id(run_id);
        if (rc != RL_EXIT_OK)
            return rc;
    } else if (!filter.tenant || !*filter.tenant) {
        return rl_cli_usage_error(
            "runs", "runs cancel needs a RUN_ID or --tenant: a filter "
                    "cancel is refused without a tenant");
    }
    if (!dry_run && (!actor || !*actor || !reason || !*reason))
        return rl_cli_usage_error("runs",
                                  "runs cancel needs --actor and --reason: "
                                  "the decision is recorded with who and why");

    rc = rl_cli_db_open("runs cancel", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    err = 0;
    if (!run_id && status_list) {
        filter.statuses = statuses;
        err = cancel_statuses_parse(status_list, statuses, &filter.nstatuses,
                                    errstr, sizeof(errstr));
    }
    if (err)
        ; /* reported below, as the ledger's refusal of a status */
    else if (run_id)
        err = rl_db_run_cancel(db, run_id, actor, reason, &dec, errstr,
                               sizeof(errstr));
    else if (dry_run)
        err = rl_db_runs_cancel_count(db, &filter, &n, errstr, sizeof(errstr));
    else
        err = rl_db_runs_cancel(db, &filter, actor, reason, 0, &n, errstr,
                                sizeof(errstr));
    rl_db_destroy(db);
    if (err) {
        if (!run_id && n > 0)
            fprintf(stderr,
                    "runledger runs cancel: %lld runs cancelled "
                    "before the error\n",
                    (long long)n);
        return rl_cli_error("runs cancel", err, errstr);
    }
    if (run_id)
        printf("run %s cancelled by %s (was %s after %d attempts%s)\n", run_id,
               actor, dec.prior_status, dec.attempts,
               dec.attempts_closed ? "; the call in flight is cancelled and "
                                     "its attempt closed as cancelled"
                                   : "");
    else if (dry_run)
        printf("%lld runs would be cancelled (dry run; nothing changed)\n",
               (long long)n);
    else
        printf("%lld runs cancelled by %s\n", (long long)n, actor);
    return RL_EXIT_OK;
}

int
rl_cmd_runs(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return RL_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage_text, stdout);
        return RL_EXIT_OK;
    }
    if (strcmp(argv[1], "list") == 0)
        return cmd_list(argc - 1, argv + 1);
    if (strcmp(argv[1], "show") == 0)
        return cmd_show(argc - 1, argv + 1);
    if (strcmp(argv[1], "retry") == 0)
        return cmd_decide(argc - 1, argv + 1, 0);
    if (strcmp(argv[1], "resolve") == 0)
        return cmd_decide(argc - 1, argv + 1, 1);
    if (strcmp(argv[1], "approve") == 0)
        return cmd_approve(argc - 1, argv + 1, 1);
    if (strcmp(argv[1], "reject") == 0)
        return cmd_approve(argc - 1, argv + 1, 0);
    if (strcmp(argv[1], "cancel") == 0)
        return cmd_cancel(argc - 1, argv + 1);
    return rl_cli_usage_error("runs", "unknown runs command \"%s\"", argv[1]);
}
