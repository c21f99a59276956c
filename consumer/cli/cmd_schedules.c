/* `runledger schedules`: schedules the ledger knows (set, list, show,
 * pause, resume, remove), the windows that never got their run (gaps), and
 * publishing those again (backfill). The scheduler that publishes the
 * windows on time is consumer/scheduler.c; the audit is
 * common/src/schedule_audit.c. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "publish.h"
#include "rl/config.h"
#include "rl/db_conn.h"
#include "rl/db_schedules.h"
#include "rl/err.h"
#include "rl/event.h"
#include "rl/schedule.h"
#include "rl/schedule_audit.h"
#include "rl/timefmt.h"
#include "table.h"

/* Windows one gaps or backfill call looks at, at most. */
#define SCHEDULES_MAX_WINDOWS 100000

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger schedules set NAME --job J --tenant T --cron EXPR\n"
"                           [--timezone TZ] --version V --window DUR\n"
"                           --request JSON|@FILE [--input JSON|@FILE]\n"
"                           [--notify A,B] [--catchup skip|latest|all]\n"
"                           [--catchup-window DUR] [--audit-only]\n"
"       runledger schedules list [--json]\n"
"       runledger schedules show NAME\n"
"       runledger schedules pause|resume|remove NAME\n"
"       runledger schedules gaps [NAME] [--since RFC3339|DUR] [--grace DUR]\n"
"                                [--json]\n"
"       runledger schedules backfill NAME --from RFC3339 --to RFC3339\n"
"                                [--rate N] [--dry-run] [--topic TOPIC]\n"
"       runledger schedules sync --from JSON|@FILE [--prune]\n"
"\n"
"  set       create or replace a schedule: `runledger scheduler` publishes\n"
"            the event of each window (as `runledger publish --at START\n"
"            --window DUR ...` would) when it starts. --cron: five fields\n"
"            or @hourly/@daily/@weekly/@monthly/@yearly, read in --timezone\n"
"            (tz database name, default UTC). --catchup: which windows\n"
"            missed while no scheduler ran are published when one runs\n"
"            again: skip (none), latest (default: the last one), all;\n"
"            --catchup-window (default P1D): none older than this.\n"
"            --audit-only: someone else publishes; only the audit counts\n"
"            the windows. A new schedule starts with the next window.\n"
"  list      every schedule; show: one, as JSON\n"
"  pause     publish nothing and expect nothing until resume; resume goes\n"
"            on with the next window (the paused ones are not caught up)\n"
"  remove    forget the schedule (its runs stay)\n"
"  gaps      windows since --since (default P7D ago) up to --grace (default\n"
"            PT5M) ago with no run, or whose run has another fingerprint\n"
"  backfill  publish the missing windows starting in [--from, --to] at\n"
"            --rate events a second (default 10), with progress on stderr;\n"
"            a window whose run has another fingerprint is reported, not\n"
"            published again\n"
"  sync      set every schedule of a JSON array (the chart's schedules:\n"
"            name, cron, timeZone, job, tenant, version, window, request,\n"
"            input, notify, catchup, catchupWindow, auditOnly, suspend);\n"
"            --prune removes the schedules the array does not name\n"
"\n"
"Exit status: 0 ok; 1 PostgreSQL or Kafka failed; 2 bad usage; 3 no such\n"
"schedule, or backfill found windows whose run has another fingerprint.\n";
/* clang-format on */

static const struct rl_cli_column schedule_columns[] = {
    {"NAME", "name", -20},
    {"JOB / TENANT / VERSION", "job / tenant / version", -32},
    {"CRON", "cron", -16},
    {"TIMEZONE", "timezone", -16},
    {"WINDOW", "window", -7},
    {"CATCHUP", "catchup", -7},
    {"AUDIT_ONLY", "audit_only", -10},
    {"PAUSED", "paused", -6},
    {"PUBLISHED_THROUGH", "published_through", -25}};

static const struct rl_cli_table schedule_table = {
    "", " ", "-", schedule_columns, RL_CLI_NCOLUMNS(schedule_columns)};

static const struct rl_cli_column gap_columns[] = {
    {"SCHEDULE", "schedule", -20},
    {"WINDOW", "window", -25},
    {"RUN_ID", "run_id", -64},
    {"PROBLEM", "problem", 0}};

static const struct rl_cli_table gap_table = {"", " ", "-", gap_columns,
                                              RL_CLI_NCOLUMNS(gap_columns)};

struct flags {
    const char *job, *tenant, *cron, *timezone, *version, *window;
    const char *request, *input, *notify, *catchup, *catchup_window;
    const char *since, *grace, *from, *to, *rate, *topic;
    int audit_only, as_json, dry_run, prune;
};

/* Seconds of a fixed ISO-8601 duration (PT0S allowed), or -1. */
static int64_t
duration_seconds(const char *text)
{
    struct rl_window win;
    char errstr[128];

    if (strcmp(text, "PT0S") == 0 || strcmp(text, "P0D") == 0)
        return 0;
    if (rl_window_parse(text, &win, errstr, sizeof(errstr)) != 0 || win.months)
        return -1;
    return win.seconds;
}

/* An RFC 3339 time, or a duration back from now; -1 when neither. */
static int
time_or_ago(const char *text, int64_t now, int64_t *out)
{
    int64_t secs;
    char errstr[128];

    if (rl_time_parse(text, out, NULL, errstr, sizeof(errstr)) == 0)
        return 0;
    secs = duration_seconds(text);
    if (secs < 0)
        return -1;
    *out = now - secs;
    return 0;
}

static int
name_ok(const char *name)
{
    size_t len = strlen(name);

    if (len == 0 || len > 63 ||
        strspn(name, "abcdefghijklmnopqrstuvwxyz"
                     "0123456789_.-") != len)
        return 0;
    return name[0] != '_' && name[0] != '.' && name[0] != '-';
}

static int
cmd_set(const char *name, const struct flags *f, const char *actor)
{
    struct rl_schedule s;
    struct rl_config *cfg = NULL;
    struct rl_db *db = NULL;
    char errstr[512], reason[96];
    int flags = 0, rc = RL_EXIT_USAGE, err;
    const char *test_seconds = getenv("RL_TEST_CRON_SECONDS");

    memset(&s, 0, sizeof(s));
    if (!f->job || !f->tenant || !f->cron || !f->version || !f->window ||
        !f->request)
        return rl_cli_usage_error("schedules", "set needs --job, --tenant, "
                                               "--cron, --version, --window "
                                               "and --request");
    s.catchup = RL_CATCHUP_LATEST;
    if (f->catchup && (s.catchup = rl_catchup_parse(f->catchup)) < 0)
        return rl_cli_usage_error("schedules",
                                  "--catchup must be skip, latest or all");
    s.catchup_window = 86400;
    if (f->catchup_window &&
        (s.catchup_window = duration_seconds(f->catchup_window)) < 0)
        return rl_cli_usage_error("schedules", "--catchup-window must be a "
                                               "duration such as PT6H or P1D");
    /* Windows of seconds are for tests (a scheduler test cannot wait
     * minutes per window); a schedule in production has five fields. */
    if (test_seconds && strcmp(test_seconds, "1") == 0)
        flags |= RL_CRON_SECONDS;
    s.name = strdup(name);
    s.job = strdup(f->job);
    s.tenant = strdup(f->tenant);
    s.cron = strdup(f->cron);
    s.timezone = strdup(f->timezone ? f->timezone : "UTC");
    s.version = strdup(f->version);
    s.window = strdup(f->window);
    s.notify = f->notify ? strdup(f->notify) : NULL;
    s.audit_only = f->audit_only;
    s.request = rl_cli_value_or_file(f->request, errstr, sizeof(errstr));
    if (!s.request) {
        rl_cli_usage_error("schedules", "--request: %s", errstr);
        goto done;
    }
    if (f->input) {
        s.input = rl_cli_value_or_file(f->input, errstr, sizeof(errstr));
        if (!s.input) {
            rl_cli_usage_error("schedules", "--input: %s", errstr);
            goto done;
        }
    }
    if (rl_schedule_prepare(&s, flags, errstr, sizeof(errstr)) != 0) {
        rl_cli_usage_error("schedules", "%s", errstr);
        goto done;
    }
    if (rl_cli_config_load("schedules", &cfg) != RL_EXIT_OK)
        goto done;
    /* The event of the next window must be one the consumer accepts, or
     * every window would be dead-lettered. */
    {
        int64_t next = rl_cron_next(&s.parsed, s.tz, (int64_t)time(NULL));
        char *text =
            rl_schedule_event(&s, next > 0 ? next : 0, errstr, sizeof(errstr));
        struct rl_event *ev = NULL;

        if (text)
            ev = rl_cli_event_validate(text, strlen(text),
                                       (size_t)cfg->max_event_bytes, reason,
                                       sizeof(reason), errstr, sizeof(errstr));
        free(text);
        if (!ev) {
            fprintf(stderr, "runledger schedules: invalid event: %s\n", errstr);
            goto done;
        }
        rl_event_destroy(ev);
    }
    rc = rl_cli_db_open("schedules", &db);
    if (rc != RL_EXIT_OK)
        goto done;
    err = rl_db_schedule_set(db, &s, actor, errstr, sizeof(errstr));
    if (err) {
        rc = rl_cli_error("schedules set", err, errstr);
        goto done;
    }
    printf("schedule %s: %s in %s, window %s, catch-up %s%s\n", name, s.cron,
           s.timezone, s.window, rl_catchup_name(s.catchup),
           s.audit_only ? ", audit only" : "");
    rc = RL_EXIT_OK;
done:
    rl_db_destroy(db);
    rl_config_destroy(cfg);
    rl_schedule_clear(&s);
    return rc;
}

static void
add_gap_row(cJSON *rows, const char *schedule, const struct rl_schedule_gap *g)
{
    cJSON *row = cJSON_CreateObject();
    char at[RL_TIME_UTC_SIZE];

    rl_time_format_utc(g->start, at);
    cJSON_AddStringToObject(row, "schedule", schedule);
    cJSON_AddStringToObject(row, "window", at);
    cJSON_AddStringToObject(row, "run_id", g->run_id);
    cJSON_AddStringToObject(row, "problem",
                            g->conflict ? "run has another fingerprint"
                                        : "missing");
    cJSON_AddItemToArray(rows, row);
}

static int
cmd_gaps(const char *name, const struct flags *f)
{
    struct rl_config *cfg = NULL;
    struct rl_db *db = NULL;
    struct rl_schedule *s = NULL;
    size_t n = 0;
    int64_t now = 0, grace = 300, since;
    char errstr[512];
    cJSON *rows = cJSON_CreateArray();
    int rc, err = 0;

    if (f->grace && (grace = duration_seconds(f->grace)) < 0) {
        cJSON_Delete(rows);
        return rl_cli_usage_error("schedules", "--grace must be a duration");
    }
    if (rl_cli_config_load("schedules", &cfg) != RL_EXIT_OK) {
        cJSON_Delete(rows);
        return RL_EXIT_USAGE;
    }
    rc = rl_cli_db_open("schedules", &db);
    if (rc != RL_EXIT_OK)
        goto done;
    err = rl_db_schedules_load(db, name, &s, &n, &now, errstr, sizeof(errstr));
    if (err) {
        rc = rl_cli_error("schedules gaps", err, errstr);
        goto done;
    }
    if (name && n == 0) {
        rc =
            rl_cli_error("schedules gaps", RL_ERR_NOTFOUND, "no such schedule");
        goto done;
    }
    if (time_or_ago(f->since ? f->since : "P7D", now, &since) != 0) {
        rc = rl_cli_usage_error("schedules",
                                "--since must be RFC 3339 or a duration");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        struct rl_schedule_gap *gaps = NULL;
        size_t ngaps = 0;
        int64_t from = since > s[i].created_at ? since : s[i].created_at;

        if (rl_schedule_prepare(&s[i], RL_CRON_SECONDS, errstr,
                                sizeof(errstr)) != 0) {
            fprintf(stderr, "runledger schedules gaps: schedule %s: %s\n",
                    s[i].name, errstr);
            rc = RL_EXIT_FAILURE;
            continue;
        }
        err = rl_schedule_gaps(db, &s[i], from, now - grace,
                               SCHEDULES_MAX_WINDOWS,
                               (size_t)cfg->max_event_bytes, &gaps, &ngaps,
                               errstr, sizeof(errstr));
        if (err) {
            rc = rl_cli_error("schedules gaps", err, errstr);
            goto done;
        }
        for (size_t g = 0; g < ngaps; g++)
            add_gap_row(rows, s[i].name, &gaps[g]);
        free(gaps);
    }
    {
        char *json = cJSON_PrintUnformatted(rows);

        if (json)
            rl_cli_table_print_json(&gap_table, json, f->as_json);
        cJSON_free(json);
    }
done:
    for (size_t i = 0; i < n; i++)
        rl_schedule_clear(&s[i]);
    free(s);
    cJSON_Delete(rows);
    rl_db_destroy(db);
    rl_config_destroy(cfg);
    return rc;
}

static void
sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (ms > 0 && nanosleep(&ts, &ts) != 0)
        ;
}

static int
cmd_backfill(const char *name, const struct flags *f)
{
    struct rl_config *cfg = NULL;
    struct rl_db *db = NULL;
    struct rl_schedule *s = NULL;
    struct rl_schedule_gap *gaps = NULL;
    size_t n = 0, ngaps = 0, conflicts = 0, missing = 0, sent = 0;
    int64_t now = 0, from, to, rate = 10;
    char errstr[512];
    int rc, err;

    if (!f->from || !f->to)
        return rl_cli_usage_error("schedules", "backfill needs --from and "
                                               "--to");
    if (rl_time_parse(f->from, &from, NULL, errstr, sizeof(errstr)) != 0 ||
        rl_time_parse(f->to, &to, NULL, errstr, sizeof(errstr)) != 0 ||
        to < from)
        return rl_cli_usage_error("schedules", "--from and --to must be RFC "
                                               "3339 times, --from first");
    if (f->rate) {
        char *end;

        rate = strtoll(f->rate, &end, 10);
        if (*end || rate < 1 || rate > 10000)
            return rl_cli_usage_error("schedules",
                                      "--rate must be 1..10000 events a "
                                      "second");
    }
    if (rl_cli_config_load("backfill", &cfg) != RL_EXIT_OK)
        return RL_EXIT_USAGE;
    rl_cli_log_init(cfg);
    rc = rl_cli_db_open("schedules", &db);
    if (rc != RL_EXIT_OK)
        goto done;
    err = rl_db_schedules_load(db, name, &s, &n, &now, errstr, sizeof(errstr));
    if (!err && n == 0) {
        err = RL_ERR_NOTFOUND;
        snprintf(errstr, sizeof(errstr), "no such schedule %s", name);
    }
    if (!err)
        err =
            rl_schedule_prepare(&s[0], RL_CRON_SECONDS, errstr, sizeof(errstr));
    /* A window not started yet is the scheduler's, not a gap; one from
     * before the schedule existed was never expected. */
    if (to > now)
        to = now;
    from -= 1;
    if (!err && from < s[0].created_at)
        from = s[0].created_at;
    if (!err)
        err = rl_schedule_gaps(db, &s[0], from, to, SCHEDULES_MAX_WINDOWS,
                               (size_t)cfg->max_event_bytes, &gaps, &ngaps,
                               errstr, sizeof(errstr));
    if (err) {
        rc = rl_cli_error("schedules backfill", err, errstr);
        goto done;
    }
    for (size_t i = 0; i < ngaps; i++) {
        char at[RL_TIME_UTC_SIZE];

        rl_time_format_utc(gaps[i].start, at);
        if (gaps[i].conflict) {
            conflicts++;
            fprintf(stderr,
                    "runledger schedules backfill: window %s: run %s has "
                    "another fingerprint; not published again\n",
                    at, gaps[i].run_id);
        } else {
            missing++;
            if (f->dry_run)
                printf("%s %s\n", at, gaps[i].run_id);
        }
    }
    rc = RL_EXIT_OK;
    /* One batch of `rate` events a second: a backfill of a year of
     * minutes must not flood the consumers ahead of live windows. */
    for (size_t i = 0; !f->dry_run && i < ngaps;) {
        struct rl_cli_event evs[10000];
        size_t k = 0;
        struct timespec ts0, ts1;

        clock_gettime(CLOCK_MONOTONIC, &ts0);
        while (i < ngaps && k < (size_t)rate) {
            char reason[96];
            char *text;

            if (gaps[i].conflict) {
                i++;
                continue;
            }
            text =
                rl_schedule_event(&s[0], gaps[i].start, errstr, sizeof(errstr));
            evs[k].value = text;
            evs[k].ev =
                text ? rl_cli_event_validate(
                           text, strlen(text), (size_t)cfg->max_event_bytes,
                           reason, sizeof(reason), errstr, sizeof(errstr))
                     : NULL;
            if (!evs[k].ev) {
                free(text);
                for (size_t j = 0; j < k; j++) {
                    free(evs[j].value);
                    rl_event_destroy(evs[j].ev);
                }
                rc = rl_cli_error("schedules backfill", RL_ERR_INVALID, errstr);
                goto done;
            }
            k++;
            i++;
        }
        if (k)
            rc = rl_cli_events_send("schedules backfill", cfg,
                                    f->topic ? f->topic : cfg->topic, evs, k,
                                    NULL);
        for (size_t j = 0; j < k; j++) {
            printf("%s\n", evs[j].ev->run_id);
            free(evs[j].value);
            rl_event_destroy(evs[j].ev);
        }
        if (rc != RL_EXIT_OK)
            goto done;
        sent += k;
        fprintf(stderr,
                "runledger schedules backfill: %s: %zu of %zu "
                "missing windows published\n",
                name, sent, missing);
        clock_gettime(CLOCK_MONOTONIC, &ts1);
        if (i < ngaps)
            sleep_ms(1000 - ((ts1.tv_sec - ts0.tv_sec) * 1000 +
                             (ts1.tv_nsec - ts0.tv_nsec) / 1000000));
    }
    fprintf(stderr,
            "runledger schedules backfill: %s: %zu missing windows %s, %zu "
            "with another fingerprint\n",
            name, missing, f->dry_run ? "found" : "published", conflicts);
    if (conflicts)
        rc = RL_EXIT_REFUSED;
done:
    for (size_t i = 0; i < n; i++)
        rl_schedule_clear(&s[i]);
    free(s);
    free(gaps);
    rl_db_destroy(db);
    rl_config_destroy(cfg);
    return rc;
}

static const char *
member_text(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The chart's `schedules:` into the ledger: each element set as `set`
 * would (the same checks), suspend as a pause, and with prune every other
 * schedule removed, so the chart and the ledger cannot disagree. */
static int
cmd_sync(const struct flags *f, const char *actor)
{
    char errstr[512];
    char *text;
    cJSON *arr, *el;
    int rc = RL_EXIT_OK;

    if (!f->from)
        return rl_cli_usage_error("schedules", "sync needs --from");
    text = rl_cli_value_or_file(f->from, errstr, sizeof(errstr));
    if (!text)
        return rl_cli_usage_error("schedules", "--from: %s", errstr);
    arr = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        return rl_cli_usage_error("schedules",
                                  "--from must be a JSON array of schedules");
    }
    cJSON_ArrayForEach(el, arr)
    {
        struct flags one;
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(el, "request");
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(el, "input");
        const cJSON *notify = cJSON_GetObjectItemCaseSensitive(el, "notify");
        const cJSON *cw = cJSON_GetObjectItemCaseSensitive(el, "catchupWindow");
        const char *name = member_text(el, "name");
        char *req_text = req ? cJSON_PrintUnformatted(req) : NULL;
        char *in_text =
            in && !cJSON_IsNull(in) ? cJSON_PrintUnformatted(in) : NULL;
        char notify_buf[1024] = "", version[64];
        const cJSON *ver = cJSON_GetObjectItemCaseSensitive(el, "version");
        int one_rc;

        memset(&one, 0, sizeof(one));
        one.job = member_text(el, "job");
        one.tenant = member_text(el, "tenant");
        one.cron = member_text(el, "cron");
        one.timezone = member_text(el, "timeZone");
        one.window = member_text(el, "window");
        one.catchup = member_text(el, "catchup");
        one.catchup_window = cJSON_IsString(cw) ? cw->valuestring : NULL;
        one.audit_only =
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(el, "auditOnly"));
        /* YAML reads version: 1 as a number. */
        if (cJSON_IsNumber(ver)) {
            snprintf(version, sizeof(version), "%g", ver->valuedouble);
            one.version = version;
        } else {
            one.version = member_text(el, "version");
        }
        if (cJSON_IsArray(notify)) {
            const cJSON *ch;

            cJSON_ArrayForEach(ch, notify)
            {
                if (!cJSON_IsString(ch))
                    continue;
                if (notify_buf[0])
                    strncat(notify_buf, ",",
                            sizeof(notify_buf) - strlen(notify_buf) - 1);
                strncat(notify_buf, ch->valuestring,
                        sizeof(notify_buf) - strlen(notify_buf) - 1);
            }
            one.notify = notify_buf[0] ? notify_buf : NULL;
        }
        one.request = req_text;
        one.input = in_text;
        if (!name || !name_ok(name)) {
            one_rc = rl_cli_usage_error("schedules",
                                        "sync: a schedule without a valid "
                                        "name");
        } else {
            one_rc = cmd_set(name, &one, actor);
        }
        if (one_rc == RL_EXIT_OK) {
            int suspend =
                cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(el, "suspend"));
            struct rl_db *db;

            one_rc = rl_cli_db_open("schedules", &db);
            if (one_rc == RL_EXIT_OK) {
                int err = rl_db_schedule_pause(db, name, suspend, actor, errstr,
                                               sizeof(errstr));

                if (err)
                    one_rc = rl_cli_error("schedules sync", err, errstr);
                rl_db_destroy(db);
            }
        }
        cJSON_free(req_text);
        cJSON_free(in_text);
        if (one_rc != RL_EXIT_OK && rc == RL_EXIT_OK)
            rc = one_rc;
    }
    if (f->prune && rc == RL_EXIT_OK) {
        struct rl_db *db;
        struct rl_schedule *s = NULL;
        size_t n = 0;
        int64_t now;

        rc = rl_cli_db_open("schedules", &db);
        if (rc == RL_EXIT_OK) {
            int err = rl_db_schedules_load(db, NULL, &s, &n, &now, errstr,
                                           sizeof(errstr));

            for (size_t i = 0; !err && i < n; i++) {
                int named = 0;

                cJSON_ArrayForEach(el, arr)
                {
                    const char *nm = member_text(el, "name");

                    named |= nm && strcmp(nm, s[i].name) == 0;
                }
                if (!named) {
                    err = rl_db_schedule_remove(db, s[i].name, errstr,
                                                sizeof(errstr));
                    if (!err)
                        printf("schedule %s removed\n", s[i].name);
                }
            }
            if (err)
                rc = rl_cli_error("schedules sync", err, errstr);
            for (size_t i = 0; i < n; i++)
                rl_schedule_clear(&s[i]);
            free(s);
            rl_db_destroy(db);
        }
    }
    cJSON_Delete(arr);
    return rc;
}

int
rl_cmd_schedules(int argc, char **argv)
{
    static const char *const actions[] = {
        "set",    "list", "show",     "pause", "resume",
        "remove", "gaps", "backfill", "sync",  NULL};
    enum {
        OPT_JOB = 1,
        OPT_TENANT,
        OPT_CRON,
        OPT_TIMEZONE,
        OPT_VERSION,
        OPT_WINDOW,
        OPT_REQUEST,
        OPT_INPUT,
        OPT_NOTIFY,
        OPT_CATCHUP,
        OPT_CATCHUP_WINDOW,
        OPT_AUDIT_ONLY,
        OPT_SINCE,
        OPT_GRACE,
        OPT_FROM,
        OPT_TO,
        OPT_RATE,
        OPT_TOPIC,
        OPT_DRY_RUN,
        OPT_ACTOR,
        OPT_JSON,
        OPT_PRUNE
    };
    static const struct option options[] = {
        {"job", required_argument, NULL, OPT_JOB},
        {"tenant", required_argument, NULL, OPT_TENANT},
        {"cron", required_argument, NULL, OPT_CRON},
        {"timezone", required_argument, NULL, OPT_TIMEZONE},
        {"version", required_argument, NULL, OPT_VERSION},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"request", required_argument, NULL, OPT_REQUEST},
        {"input", required_argument, NULL, OPT_INPUT},
        {"notify", required_argument, NULL, OPT_NOTIFY},
        {"catchup", required_argument, NULL, OPT_CATCHUP},
        {"catchup-window", required_argument, NULL, OPT_CATCHUP_WINDOW},
        {"audit-only", no_argument, NULL, OPT_AUDIT_ONLY},
        {"since", required_argument, NULL, OPT_SINCE},
        {"grace", required_argument, NULL, OPT_GRACE},
        {"from", required_argument, NULL, OPT_FROM},
        {"to", required_argument, NULL, OPT_TO},
        {"rate", required_argument, NULL, OPT_RATE},
        {"topic", required_argument, NULL, OPT_TOPIC},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"actor", required_argument, NULL, OPT_ACTOR},
        {"json", no_argument, NULL, OPT_JSON},
        {"prune", no_argument, NULL, OPT_PRUNE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "schedules",
        .usage = usage_text,
        .options = options,
        .name_errors = 1,
        .operands = 1,
    };
    struct flags f;
    const char *action, *name = NULL, *actor = getenv("USER");
    char errstr[512], what[40], *json = NULL;
    struct rl_db *db;
    int opt, rc, err = 0;

    memset(&f, 0, sizeof(f));
    rc = rl_cli_action("schedules", usage_text, argc, argv, actions, &action);
    if (rc >= 0)
        return rc;
    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc - 1, argv + 1, &rc)) > 0) {
        switch (opt) {
        case OPT_JOB:
            f.job = optarg;
            break;
        case OPT_TENANT:
            f.tenant = optarg;
            break;
        case OPT_CRON:
            f.cron = optarg;
            break;
        case OPT_TIMEZONE:
            f.timezone = optarg;
            break;
        case OPT_VERSION:
            f.version = optarg;
            break;
        case OPT_WINDOW:
            f.window = optarg;
            break;
        case OPT_REQUEST:
            f.request = optarg;
            break;
        case OPT_INPUT:
            f.input = optarg;
            break;
        case OPT_NOTIFY:
            f.notify = optarg;
            break;
        case OPT_CATCHUP:
            f.catchup = optarg;
            break;
        case OPT_CATCHUP_WINDOW:
            f.catchup_window = optarg;
            break;
        case OPT_AUDIT_ONLY:
            f.audit_only = 1;
            break;
        case OPT_SINCE:
            f.since = optarg;
            break;
        case OPT_GRACE:
            f.grace = optarg;
            break;
        case OPT_FROM:
            f.from = optarg;
            break;
        case OPT_TO:
            f.to = optarg;
            break;
        case OPT_RATE:
            f.rate = optarg;
            break;
        case OPT_TOPIC:
            f.topic = optarg;
            break;
        case OPT_DRY_RUN:
            f.dry_run = 1;
            break;
        case OPT_ACTOR:
            actor = optarg;
            break;
        case OPT_JSON:
            f.as_json = 1;
            break;
        case OPT_PRUNE:
            f.prune = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;
    /* getopt_long moved the operands behind the options of argv + 1. */
    if (optind < argc - 1)
        name = argv[1 + optind];
    if (optind + 1 < argc - 1)
        return rl_cli_usage_error("schedules", "one schedule name at most");
    if (strcmp(action, "list") == 0 && name)
        return rl_cli_usage_error("schedules", "list takes no name");
    if (strcmp(action, "sync") == 0)
        return name ? rl_cli_usage_error("schedules", "sync takes no name")
                    : cmd_sync(&f, actor);
    if (strcmp(action, "list") != 0 && strcmp(action, "gaps") != 0 && !name)
        return rl_cli_usage_error("schedules", "%s needs a schedule name",
                                  action);
    if (name && !name_ok(name))
        return rl_cli_usage_error("schedules",
                                  "a schedule name is 1-63 of a-z, 0-9, "
                                  "'_', '.' and '-', starting with a letter "
                                  "or digit");
    if (strcmp(action, "set") == 0)
        return cmd_set(name, &f, actor);
    if (strcmp(action, "gaps") == 0)
        return cmd_gaps(name, &f);
    if (strcmp(action, "backfill") == 0)
        return cmd_backfill(name, &f);

    rc = rl_cli_db_open("schedules", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    if (strcmp(action, "list") == 0 || strcmp(action, "show") == 0) {
        err = rl_db_schedules_json(db, name, &json, errstr, sizeof(errstr));
        if (!err && name && strcmp(json, "[]") == 0) {
            err = RL_ERR_NOTFOUND;
            snprintf(errstr, sizeof(errstr), "no such schedule %s", name);
        }
    } else if (strcmp(action, "remove") == 0) {
        err = rl_db_schedule_remove(db, name, errstr, sizeof(errstr));
        if (!err)
            printf("schedule %s removed\n", name);
    } else {
        int pause = strcmp(action, "pause") == 0;

        err = rl_db_schedule_pause(db, name, pause, actor, errstr,
                                   sizeof(errstr));
        if (!err)
            printf("schedule %s %s\n", name, pause ? "paused" : "resumed");
    }
    rl_db_destroy(db);
    if (err) {
        snprintf(what, sizeof(what), "schedules %s", action);
        free(json);
        return rl_cli_error(what, err, errstr);
    }
    if (json && strcmp(action, "show") == 0) {
        cJSON *arr = cJSON_Parse(json);
        char *one = arr ? cJSON_Print(cJSON_GetArrayItem(arr, 0)) : NULL;

        printf("%s\n", one ? one : json);
        cJSON_free(one);
        cJSON_Delete(arr);
    } else if (json) {
        rl_cli_table_print_json(&schedule_table, json, f.as_json);
    }
    free(json);
    return RL_EXIT_OK;
}
