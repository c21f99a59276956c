/* `runledger runs`: the operator's view of the ledger and the two repairs
 * an operator may make: re-open a parked run (retry) and decide an
 * unknown one (resolve). Every change is one transaction that also records
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
#include "rl/config.h"
#include "rl/db.h"
#include "rl/err.h"
#include "rl/runid.h"
#include "rl/timefmt.h"

static void
usage(FILE *out)
{
    fprintf(
        out,
        "usage: runledger runs list [--status S] [--tenant T] [--job J]\n"
        "                           [--since RFC3339] [--limit N] [--json]\n"
        "       runledger runs show RUN_ID [--json]\n"
        "       runledger runs retry RUN_ID [--actor NAME] [--reason TEXT]\n"
        "       runledger runs resolve RUN_ID (--failed | --completed-from "
        "FILE)\n"
        "                              --actor NAME --reason TEXT\n"
        "       runledger runs approve RUN_ID --digest D --actor NAME "
        "[--reason TEXT]\n"
        "       runledger runs reject RUN_ID --digest D --actor NAME "
        "[--reason TEXT]\n"
        "\n"
        "  list     runs, newest scheduled first (default limit 50); "
        "--status is\n"
        "           pending, running, awaiting_approval, completed, failed or "
        "unknown;\n"
        "           --since "
        "keeps\n"
        "           runs scheduled at or after the time\n"
        "  show     one run with its attempts (outcome, HTTP status, "
        "tokens,\n"
        "           latency), outbox rows (delivered or pending) and "
        "operator\n"
        "           decisions\n"
        "  retry    re-open a failed or unknown run for a new attempt under "
        "the\n"
        "           same run ID (status pending, due now). An attempt "
        "without an\n"
        "           outcome is closed as ambiguous: you accept that it may "
        "have\n"
        "           generated. --actor defaults to $USER.\n"
        "  resolve  decide an unknown run: --failed, or --completed-from "
        "FILE\n"
        "           (a JSON output, stored write-once; the run's "
        "notifications\n"
        "           are queued in the same transaction, as a completion "
        "would)\n"
        "\n"
        "The ledger is DATABASE_URL (see `runledger config`).\n"
        "Exit status: 0 ok; 1 PostgreSQL unreachable or failed; 2 bad usage "
        "or\n"
        "invalid input; 3 no such run, or its status refuses the change.\n");
}

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

/* A JSON member as display text into buf: strings as is, null as "-". */
static const char *
text_of(const cJSON *obj, const char *name, char *buf, size_t size)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
    char *json;

    if (!item || cJSON_IsNull(item))
        return "-";
    if (cJSON_IsString(item))
        return item->valuestring;
    if (cJSON_IsBool(item))
        return cJSON_IsTrue(item) ? "yes" : "no";
    if (cJSON_IsNumber(item)) {
        snprintf(buf, size, "%.0f", item->valuedouble);
        return buf;
    }
    json = cJSON_PrintUnformatted(item);
    snprintf(buf, size, "%s", json ? json : "?");
    cJSON_free(json);
    return buf;
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
    static const char *const statuses[] = {"pending",   "running",
                                           "completed", "failed",
                                           "unknown",   "awaiting_approval"};
    struct rl_runs_filter filter = {NULL, NULL, NULL, NULL, 50};
    char errstr[512];
    char *json = NULL, *end;
    cJSON *arr, *row;
    struct rl_db *db;
    int as_json = 0, rc, err, opt, known;
    int64_t epoch;

    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (opt) {
        case OPT_STATUS:
            known = 0;
            for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++)
                known |= strcmp(optarg, statuses[i]) == 0;
            if (!known)
                return rl_cli_usage_error(
                    "runs", "--status must be pending, running, "
                            "awaiting_approval, completed, failed or "
                            "unknown");
            filter.status = optarg;
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
        case 'h':
            usage(stdout);
            return RL_EXIT_OK;
        default:
            return rl_cli_usage_error("runs", "bad option %s",
                                      argv[optind - 1]);
        }
    }
    if (optind < argc)
        return rl_cli_usage_error("runs", "unexpected argument \"%s\"",
                                  argv[optind]);

    db = rl_cli_open_ledger(errstr, sizeof(errstr), &rc);
    if (!db) {
        fprintf(stderr, "runledger runs list: %s\n", errstr);
        return rc;
    }
    err = rl_db_runs_list_json(db, &filter, &json, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err) {
        fprintf(stderr, "runledger runs list: %s\n", errstr);
        return rl_cli_exit_code(err);
    }
    if (as_json) {
        printf("%s\n", json);
        free(json);
        return RL_EXIT_OK;
    }
    arr = cJSON_Parse(json);
    free(json);
    printf("%-64s  %-17s  %-18s  %3s  %-25s  %s\n", "RUN_ID", "STATUS",
           "ERROR_CLASS", "ATT", "SCHEDULED_AT", "JOB / TENANT / VERSION");
    cJSON_ArrayForEach(row, arr)
    {
        char b[6][64];

        printf("%-64s  %-17s  %-18s  %3s  %-25s  %s / %s / %s\n",
               text_of(row, "run_id", b[0], 64),
               text_of(row, "status", b[1], 64),
               text_of(row, "error_class", b[5], 64),
               text_of(row, "attempts", b[2], 64),
               text_of(row, "scheduled_at", b[3], 64),
               text_of(row, "job", b[4], 64), text_of(row, "tenant", b[0], 64),
               text_of(row, "version", b[1], 64));
    }
    cJSON_Delete(arr);
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
        printf("%-17s %s\n", fields[i], text_of(run, fields[i], b[0], 8192));

    printf("\nattempts:\n  %-3s %-14s %-4s %-7s %-7s %-7s %-8s %-26s %s\n",
           "NO", "OUTCOME", "HTTP", "PROMPT", "COMPL", "CACHED", "LAT_MS",
           "DISPATCHED_AT", "WORKER / EPOCH / ERROR");
    cJSON_ArrayForEach(item,
                       cJSON_GetObjectItemCaseSensitive(report, "attempts"))
    {
        printf("  %-3s %-14s %-4s %-7s ", text_of(item, "attempt_no", b[0], 64),
               text_of(item, "outcome", b[1], 64),
               text_of(item, "http_status", b[2], 64),
               text_of(item, "prompt_tokens", b[3], 64));
        printf("%-7s %-7s %-8s %-26s ",
               text_of(item, "completion_tokens", b[0], 64),
               text_of(item, "cached_tokens", b[1], 64),
               text_of(item, "latency_ms", b[2], 64),
               text_of(item, "dispatched_at", b[3], 64));
        printf("%s / %s / %s\n", text_of(item, "worker", b[0], 256),
               text_of(item, "lease_epoch", b[1], 64),
               text_of(item, "error", b[2], 512));
    }
    printf("\noutbox:\n  %-16s %-9s %-6s %-33s %s\n", "CHANNEL", "DELIVERED",
           "COUNT", "CREATED_AT", "DELIVERED_AT");
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(report, "outbox"))
    {
        printf("  %-16s %-9s %-6s %-33s %s\n",
               text_of(item, "channel", b[0], 256),
               text_of(item, "delivered", b[1], 64),
               text_of(item, "delivery_count", b[2], 64),
               text_of(item, "created_at", b[3], 64),
               text_of(item, "delivered_at", b[0], 64));
    }
    printf("\ndecisions:\n");
    cJSON_ArrayForEach(item,
                       cJSON_GetObjectItemCaseSensitive(report, "decisions"))
    {
        printf("  %s %s by %s (was %s after %s attempts): %s\n",
               text_of(item, "decided_at", b[0], 64),
               text_of(item, "decision", b[1], 64),
               text_of(item, "actor", b[2], 256),
               text_of(item, "prior_status", b[3], 64),
               text_of(item, "attempts", b[0] + 64, 64),
               text_of(item, "reason", b[3] + 64, 4096));
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
    else if (strcmp(prop->status, "awaiting_approval") == 0)
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
            usage(stdout);
            return RL_EXIT_OK;
        } else if (argv[i][0] == '-' || run_id)
            return rl_cli_usage_error("runs", "unexpected argument \"%s\"",
                                      argv[i]);
        else
            run_id = argv[i];
    }
    if (!run_id)
        return rl_cli_usage_error("runs", "runs show needs a RUN_ID");
    if (!valid_run_id(run_id))
        return rl_cli_usage_error(
            "runs", "\"%s\" is not a run ID (64 lowercase hex)", run_id);
    db = rl_cli_open_ledger(errstr, sizeof(errstr), &rc);
    if (!db) {
        fprintf(stderr, "runledger runs show: %s\n", errstr);
        return rc;
    }
    err = rl_db_run_report_json(db, run_id, &json, errstr, sizeof(errstr));
    if (!err)
        err = rl_db_run_proposal(db, run_id, &prop, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err) {
        free(json);
        fprintf(stderr, "runledger runs show: %s\n", errstr);
        return rl_cli_exit_code(err);
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

/* retry and resolve */
static int
cmd_decide(int argc, char **argv, int resolve)
{
    enum { OPT_ACTOR = 1, OPT_REASON, OPT_FAILED, OPT_COMPLETED_FROM };
    static const struct option options[] = {
        {"actor", required_argument, NULL, OPT_ACTOR},
        {"reason", required_argument, NULL, OPT_REASON},
        {"failed", no_argument, NULL, OPT_FAILED},
        {"completed-from", required_argument, NULL, OPT_COMPLETED_FROM},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *actor = NULL, *reason = NULL, *from = NULL, *run_id;
    const char *what = resolve ? "resolve" : "retry";
    int failed = 0, rc, err, opt;
    char errstr[512];
    char *output = NULL;
    struct rl_decision dec;
    struct rl_db *db;
    cJSON *parsed;

    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (opt) {
        case OPT_ACTOR:
            actor = optarg;
            break;
        case OPT_REASON:
            reason = optarg;
            break;
        case OPT_FAILED:
            failed = 1;
            break;
        case OPT_COMPLETED_FROM:
            from = optarg;
            break;
        case 'h':
            usage(stdout);
            return RL_EXIT_OK;
        default:
            return rl_cli_usage_error("runs", "bad option %s",
                                      argv[optind - 1]);
        }
    }
    if (optind + 1 != argc)
        return rl_cli_usage_error("runs", "runs %s needs exactly one RUN_ID",
                                  what);
    run_id = argv[optind];
    if (!valid_run_id(run_id))
        return rl_cli_usage_error(
            "runs", "\"%s\" is not a run ID (64 lowercase hex)", run_id);
    if (!resolve) {
        if (failed || from)
            return rl_cli_usage_error("runs",
                                      "--failed and --completed-from belong to "
                                      "runs resolve");
        if (!actor)
            actor = getenv("USER");
        if (!actor || !*actor)
            actor = "operator";
        if (!reason)
            reason = "re-opened for a new attempt";
    } else {
        if (failed == !!from)
            return rl_cli_usage_error(
                "runs", "runs resolve needs exactly one of --failed "
                        "and --completed-from");
        if (!actor || !*actor || !reason || !*reason)
            return rl_cli_usage_error(
                "runs", "runs resolve needs --actor and --reason: "
                        "the decision is recorded with who and why");
    }
    if (from) {
        output = read_file(from, errstr, sizeof(errstr));
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
                    from);
            return RL_EXIT_USAGE;
        }
        cJSON_Delete(parsed);
    }

    db = rl_cli_open_ledger(errstr, sizeof(errstr), &rc);
    if (!db) {
        fprintf(stderr, "runledger runs %s: %s\n", what, errstr);
        free(output);
        return rc;
    }
    if (!resolve)
        err = rl_db_run_retry(db, run_id, actor, reason, &dec, errstr,
                              sizeof(errstr));
    else if (failed)
        err = rl_db_run_resolve_failed(db, run_id, actor, reason, &dec, errstr,
                                       sizeof(errstr));
    else
        err = rl_db_run_resolve_completed(db, run_id, actor, reason, output,
                                          &dec, errstr, sizeof(errstr));
    rl_db_destroy(db);
    free(output);
    if (err) {
        fprintf(stderr, "runledger runs %s: %s\n", what, errstr);
        return rl_cli_exit_code(err);
    }
    if (!resolve)
        printf("run %s re-opened (was %s after %d attempts%s); the next "
               "sweep claims it\n",
               run_id, dec.prior_status, dec.attempts,
               dec.attempts_closed ? ", an attempt without outcome closed as "
                                     "ambiguous"
                                   : "");
    else if (failed)
        printf("run %s resolved failed by %s\n", run_id, actor);
    else
        printf("run %s resolved completed by %s; %d notifications queued\n",
               run_id, actor, dec.outbox_rows);
    return RL_EXIT_OK;
}

/* approve and reject: one decision on the proposal of a run awaiting
 * approval, bound to the digest the operator reviewed. */
static int
cmd_approve(int argc, char **argv, int approve)
{
    enum { OPT_DIGEST = 1, OPT_ACTOR, OPT_REASON };
    static const struct option options[] = {
        {"digest", required_argument, NULL, OPT_DIGEST},
        {"actor", required_argument, NULL, OPT_ACTOR},
        {"reason", required_argument, NULL, OPT_REASON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *digest = NULL, *actor = NULL, *reason = NULL, *run_id;
    const char *what = approve ? "approve" : "reject";
    struct rl_approval_decision dec;
    char errstr[1024];
    struct rl_db *db;
    int rc, err, opt;

    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (opt) {
        case OPT_DIGEST:
            digest = optarg;
            break;
        case OPT_ACTOR:
            actor = optarg;
            break;
        case OPT_REASON:
            reason = optarg;
            break;
        case 'h':
            usage(stdout);
            return RL_EXIT_OK;
        default:
            return rl_cli_usage_error("runs", "bad option %s",
                                      argv[optind - 1]);
        }
    }
    if (optind + 1 != argc)
        return rl_cli_usage_error("runs", "runs %s needs exactly one RUN_ID",
                                  what);
    run_id = argv[optind];
    if (!valid_run_id(run_id))
        return rl_cli_usage_error(
            "runs", "\"%s\" is not a run ID (64 lowercase hex)", run_id);
    if (!digest || !valid_run_id(digest))
        return rl_cli_usage_error(
            "runs",
            "runs %s needs --digest: the 64 hex digest of the "
            "proposal (runs show)",
            what);
    if (!actor || !*actor)
        return rl_cli_usage_error(
            "runs",
            "runs %s needs --actor: the decision is recorded "
            "with who took it",
            what);

    db = rl_cli_open_ledger(errstr, sizeof(errstr), &rc);
    if (!db) {
        fprintf(stderr, "runledger runs %s: %s\n", what, errstr);
        return rc;
    }
    err = rl_db_decide_run(db, run_id, digest, actor, approve, reason, &dec,
                           errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err) {
        fprintf(stderr, "runledger runs %s: %s\n", what, errstr);
        return rl_cli_exit_code(err);
    }
    if (approve)
        printf("run %s approved by %s (digest %s); %d notifications "
               "queued\n",
               run_id, actor, dec.digest, dec.outbox_rows);
    else
        printf("run %s rejected by %s (digest %s); nothing is published\n",
               run_id, actor, dec.digest);
    return RL_EXIT_OK;
}

int
rl_cmd_runs(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return RL_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
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
    return rl_cli_usage_error("runs", "unknown runs command \"%s\"", argv[1]);
}
