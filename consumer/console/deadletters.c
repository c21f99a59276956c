/* deadletters.c: the console's dead letters: the page that lists them,
 * newest first, and an operator's replay of one, confirmed first. Both
 * read the dead-letter topic and replay exactly as `runledger dlq` does
 * (cli/dlq.c, the same code). A page reads at most the last page's worth
 * of records of each partition before its cursor, so its cost and memory
 * do not grow with the topic. Every value from the topic goes into the
 * page through html_esc. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/dlq.h"
#include "console_int.h"
#include "rl/db_console.h"
#include "rl/log.h"
#include "rl/timefmt.h"

/* Dead letters per page, and the partitions of the dead-letter topic a
 * page's cursor can carry (the records of any further partition are not
 * listed; the page says so). */
#define DL_PAGE 50
#define DL_PARTITIONS 64
/* Bytes of a dead letter's value a page shows. */
#define DL_VALUE_SHOWN 300

/* One dead letter as a page shows it: copied out of the record. */
struct dl_row {
    int32_t partition;
    int64_t offset;
    int64_t ts; /* broker timestamp, ms; -1 unknown */
    char at[40];
    char reason[96];
    char detail[256];
    char source[16];
    char run_id[72];
    char job[128];
    char tenant[128];
    char why[256]; /* "" when replayable */
    char value[DL_VALUE_SHOWN + 1];
    size_t value_len; /* the whole value's */
};

/* What one page's read collected: per partition, in offset order. */
struct dl_read {
    struct dl_row *rows[DL_PARTITIONS];
    int count[DL_PARTITIONS];
    int cap;    /* rows per partition */
    int beyond; /* records of partitions past DL_PARTITIONS */
    int no_memory;
};

static void
row_fill(struct dl_row *row, const rd_kafka_message_t *rkm)
{
    rd_kafka_timestamp_type_t tstype;
    size_t n = rkm->payload ? rkm->len : 0;

    memset(row, 0, sizeof(*row));
    row->partition = rkm->partition;
    row->offset = rkm->offset;
    row->ts = rd_kafka_message_timestamp(rkm, &tstype);
    rl_cli_dlq_header(rkm, "dead_lettered_at", row->at, sizeof(row->at));
    rl_cli_dlq_header(rkm, "reason", row->reason, sizeof(row->reason));
    rl_cli_dlq_header(rkm, "detail", row->detail, sizeof(row->detail));
    rl_cli_dlq_header(rkm, "source", row->source, sizeof(row->source));
    rl_cli_dlq_header(rkm, "run_id", row->run_id, sizeof(row->run_id));
    rl_cli_dlq_header(rkm, "job", row->job, sizeof(row->job));
    rl_cli_dlq_header(rkm, "tenant", row->tenant, sizeof(row->tenant));
    rl_cli_dlq_not_replayable(rkm, row->why, sizeof(row->why));
    row->value_len = n;
    if (n > DL_VALUE_SHOWN)
        n = DL_VALUE_SHOWN;
    if (n)
        memcpy(row->value, rkm->payload, n);
    row->value[n] = '\0';
}

static int
collect(const rd_kafka_message_t *rkm, void *opaque)
{
    struct dl_read *rd = opaque;
    int32_t p = rkm->partition;

    if (p < 0 || p >= DL_PARTITIONS) {
        rd->beyond = 1;
        return 0;
    }
    if (!rd->rows[p]) {
        rd->rows[p] = calloc((size_t)rd->cap, sizeof(struct dl_row));
        if (!rd->rows[p]) {
            rd->no_memory = 1;
            return 1;
        }
    }
    /* A window holds at most cap records; any more would be a broker
     * answering past the end asked for. */
    if (rd->count[p] < rd->cap)
        row_fill(&rd->rows[p][rd->count[p]++], rkm);
    return 0;
}

static void
read_free(struct dl_read *rd)
{
    for (int p = 0; p < DL_PARTITIONS; p++)
        free(rd->rows[p]);
}

static enum MHD_Result
kafka_failed(struct console_req *r, const char *errstr)
{
    rl_log_warn(NULL, "console: dead letters: %s", errstr);
    return console_send_message(r, MHD_HTTP_SERVICE_UNAVAILABLE, "Unavailable",
                                0,
                                "the dead-letter topic could not be read; try "
                                "again");
}

/* rl_cli_dlq_read for r, one at a time across the console and without
 * a ledger connection held: a broker that does not answer holds its
 * reader for the metadata wait, and a second reader is answered at once
 * (-2: busy) rather than queued behind it. */
static int
dl_read(struct console_req *r, const struct rl_cli_dlq_filter *f,
        rl_cli_dlq_fn *each, void *opaque, char *errstr, size_t errstr_size)
{
    int err;

    if (pthread_mutex_trylock(&r->c->kafka_lock) != 0)
        return -2;
    console_pool_give(r->c, r);
    err = rl_cli_dlq_read(r->c->cfg, f, each, opaque, errstr, errstr_size);
    pthread_mutex_unlock(&r->c->kafka_lock);
    return err;
}

static enum MHD_Result
kafka_busy(struct console_req *r)
{
    return console_send_message(r, MHD_HTTP_SERVICE_UNAVAILABLE, "Busy", 0,
                                "the dead-letter topic is being read for "
                                "another page; try again in a moment");
}

/* "E0,E1,...": the end (exclusive) of each partition a page reads to. */
static int
cursor_parse(const char *text, int64_t *ends)
{
    const char *p = text;

    for (int i = 0; i < DL_PARTITIONS; i++)
        ends[i] = -1;
    for (int i = 0; *p; i++) {
        char *endp;
        long long v;

        if (i >= DL_PARTITIONS || *p < '0' || *p > '9')
            return -1;
        v = strtoll(p, &endp, 10);
        if (v < 0 || (*endp && *endp != ','))
            return -1;
        ends[i] = v;
        p = *endp ? endp + 1 : endp;
    }
    return 0;
}

static void
put_row(struct rl_buf *b, const struct console_req *r, const struct dl_row *row,
        int with_form)
{
    char ts[RL_TIME_UTC_SIZE];

    /* data-ts: the broker's timestamp, the order of the page (the time
     * shown is the dead letter's own, stamped by its producer). */
    rl_buf_printf(b,
                  "<tr class=\"deadletter\" id=\"dl-%d-%" PRId64
                  "\" data-ts=\"%" PRId64 "\">"
                  "<td><code>%d/%" PRId64 "</code></td><td>",
                  (int)row->partition, row->offset, row->ts,
                  (int)row->partition, row->offset);
    if (row->at[0]) {
        html_esc(b, row->at);
    } else if (row->ts >= 0) {
        rl_time_format_utc(row->ts / 1000, ts);
        html_esc(b, ts);
    }
    rl_buf_puts(b, "</td><td class=\"reason\">");
    html_esc(b, row->reason);
    rl_buf_puts(b, "</td><td>");
    html_esc(b, row->source);
    rl_buf_puts(b, "</td><td>");
    if (row->run_id[0]) {
        rl_buf_puts(b, "<a href=\"/runs/");
        html_esc(b, row->run_id);
        rl_buf_puts(b, "\"><code>");
        html_esc_n(b, row->run_id, 16);
        rl_buf_puts(b, "</code></a>");
    }
    rl_buf_puts(b, "</td><td>");
    html_esc(b, row->job);
    rl_buf_puts(b, "</td><td>");
    html_esc(b, row->tenant);
    rl_buf_puts(b, "</td><td class=\"detail\">");
    html_esc(b, row->detail);
    rl_buf_puts(b, "</td><td><pre class=\"value\">");
    html_esc(b, row->value);
    if (row->value_len > strlen(row->value))
        rl_buf_printf(b, "\xE2\x80\xA6 (%zu bytes)", row->value_len);
    rl_buf_puts(b, "</pre></td><td>");
    if (row->why[0]) {
        rl_buf_puts(b, "<span class=\"not-replayable\">");
        html_esc(b, row->why);
        rl_buf_puts(b, "</span>");
    } else if (with_form) {
        rl_buf_printf(b,
                      "<form method=\"post\" action=\"/deadletters/%d-%" PRId64
                      "/replay\"><input type=\"hidden\" name=\"csrf\" "
                      "value=\"",
                      (int)row->partition, row->offset);
        html_esc(b, r->csrf);
        rl_buf_puts(b, "\"><button type=\"submit\" class=\"replay\">Replay"
                       "</button></form>");
    } else {
        rl_buf_puts(b, "replayable");
    }
    rl_buf_puts(b, "</td></tr>");
}

static void
table_begin(struct rl_buf *b)
{
    rl_buf_puts(b, "<table id=\"deadletters\"><thead><tr><th>Position</th>"
                   "<th>Dead-lettered</th><th>Reason</th><th>Source</th>"
                   "<th>Run</th><th>Job</th><th>Tenant</th><th>Detail</th>"
                   "<th>Event</th><th>Replay</th></tr></thead><tbody>");
}

/* GET /deadletters?before=CURSOR: newest first (broker timestamps merged
 * across partitions, each partition newest offset first), DL_PAGE a page;
 * "next" carries, per partition, the oldest offset shown. */
enum MHD_Result
console_deadletters(struct console_req *r)
{
    const char *before = console_query_value(r, "before");
    struct rl_cli_dlq_filter f = RL_CLI_DLQ_ALL;
    struct dl_read rd;
    struct rl_buf b = {0};
    int64_t ends[DL_PARTITIONS];
    int next_idx[DL_PARTITIONS];
    char errstr[512];
    int shown = 0, more = 0, nparts = 0, err;
    int operator_ = strcmp(r->role, "operator") == 0;

    if (cursor_parse(before ? before : "", ends) != 0)
        return console_send_message(r, MHD_HTTP_BAD_REQUEST, "Dead letters", 0,
                                    "the page cursor is not one this console "
                                    "wrote");
    memset(&rd, 0, sizeof(rd));
    rd.cap = DL_PAGE + 1;
    /* One record more than a page per partition: whether an older page
     * exists is known without another read. */
    f.tail = DL_PAGE + 1;
    f.ends = ends;
    f.nends = DL_PARTITIONS;
    err = dl_read(r, &f, collect, &rd, errstr, sizeof(errstr));
    if (err == -2)
        return kafka_busy(r);
    if (err || rd.no_memory) {
        read_free(&rd);
        return kafka_failed(r, err ? errstr : "out of memory");
    }
    for (int p = 0; p < DL_PARTITIONS; p++) {
        if (ends[p] >= 0)
            nparts = p + 1;
        next_idx[p] = rd.count[p] - 1;
    }

    html_begin(&b, r, "Dead letters");
    rl_buf_puts(&b, "<h1>Dead letters</h1><p>The dead-letter topic, newest "
                    "first, as <code>runledger dlq list</code> lists it.");
    if (operator_)
        rl_buf_puts(&b, " Replay re-publishes a dead letter's event to the "
                        "schedule topic, as <code>runledger dlq "
                        "replay</code> does, after a confirmation.");
    rl_buf_puts(&b, "</p>");
    if (errstr[0])
        html_message(&b, 1, errstr);
    if (rd.beyond)
        html_message(&b, 0,
                     "the topic has more than 64 partitions; only the first "
                     "64 are listed: use runledger dlq list");
    table_begin(&b);
    while (shown < DL_PAGE) {
        int best = -1;

        for (int p = 0; p < DL_PARTITIONS; p++) {
            if (next_idx[p] < 0)
                continue;
            if (best < 0 ||
                rd.rows[p][next_idx[p]].ts > rd.rows[best][next_idx[best]].ts)
                best = p;
        }
        if (best < 0)
            break;
        /* A dead letter of a tenant the user may not read is skipped
         * (its tenant header names it; none: not shown to a scoped
         * user). */
        if (console_tenant_visible(r, rd.rows[best][next_idx[best]].tenant)) {
            put_row(&b, r, &rd.rows[best][next_idx[best]], operator_);
            shown++;
        }
        next_idx[best]--;
    }
    rl_buf_puts(&b, "</tbody></table>");
    if (shown == 0)
        rl_buf_puts(&b, "<p id=\"empty\">No dead letters.</p>");
    for (int p = 0; p < DL_PARTITIONS; p++) {
        if (next_idx[p] >= 0)
            more = 1;
    }
    if (more) {
        rl_buf_puts(&b, "<p><a id=\"next\" href=\"/deadletters?before=");
        for (int p = 0; p < nparts; p++) {
            int64_t e = ends[p];

            /* The oldest shown of the partition; what was read and not
             * shown is older and comes on the next page. */
            if (rd.count[p] > 0 && next_idx[p] + 1 < rd.count[p])
                e = rd.rows[p][next_idx[p] + 1].offset;
            rl_buf_printf(&b, "%s%" PRId64, p ? "%2C" : "", e < 0 ? 0 : e);
        }
        rl_buf_puts(&b, "\">Older dead letters</a></p>");
    }
    html_end(&b);
    read_free(&rd);
    return console_send_page(r, MHD_HTTP_OK, &b);
}

/* ---- replay ------------------------------------------------------------ */

struct replay_outcome {
    char outcome[32];
    char run_id[72];
    char detail[640];
    int failed_run;
};

static void
on_outcome(void *opaque, const char *pos, const char *outcome,
           const char *run_id, const char *detail)
{
    struct replay_outcome *o = opaque;

    (void)pos;
    if (strcmp(outcome, "failed-run") == 0) {
        o->failed_run = 1;
        return;
    }
    snprintf(o->outcome, sizeof(o->outcome), "%s", outcome);
    snprintf(o->run_id, sizeof(o->run_id), "%s", run_id ? run_id : "");
    snprintf(o->detail, sizeof(o->detail), "%s", detail ? detail : "");
}

/* The page of one dead letter with message on top and, for confirm, the
 * form that replays it. */
static enum MHD_Result
replay_page(struct console_req *r, unsigned status, const struct dl_row *row,
            int ok, const char *message, int confirm)
{
    struct rl_buf b = {0};

    html_begin(&b, r, "Replay a dead letter");
    rl_buf_puts(&b, "<h1>Replay a dead letter</h1>");
    if (message)
        html_message(&b, ok, message);
    if (row) {
        table_begin(&b);
        put_row(&b, r, row, 0);
        rl_buf_puts(&b, "</tbody></table>");
    }
    if (confirm) {
        rl_buf_printf(&b,
                      "<p>Replaying re-publishes this dead letter's event to "
                      "the schedule topic, as <code>runledger dlq replay "
                      "--partition %d --offset %" PRId64
                      "</code> does. A run ID depends only on the event: a "
                      "run that exists already is not run again.</p>"
                      "<form method=\"post\" class=\"decide\" "
                      "action=\"/deadletters/%d-%" PRId64 "/replay\">"
                      "<input type=\"hidden\" name=\"csrf\" value=\"",
                      (int)row->partition, row->offset, (int)row->partition,
                      row->offset);
        html_esc(&b, r->csrf);
        rl_buf_puts(&b, "\"><button type=\"submit\" id=\"confirm\" "
                        "name=\"confirm\" value=\"yes\">Replay it</button>"
                        "</form>");
    }
    rl_buf_puts(&b, "<p><a href=\"/deadletters\">Back to the dead "
                    "letters</a></p>");
    html_end(&b);
    return console_send_page(r, status, &b);
}

static int
read_one(const rd_kafka_message_t *rkm, void *opaque)
{
    struct dl_row *row = opaque;

    row_fill(row, rkm);
    return 1;
}

/* POST /deadletters/P-O/replay: operators only. Without confirm=yes, the
 * dead letter and the confirmation form; with it, the audit row (written
 * first, so no replay goes unaudited even if the console stops halfway:
 * the ledger and the broker share no transaction), then the replay as
 * `runledger dlq replay --partition P --offset O` runs it. */
static enum MHD_Result
replay_locked(struct console_req *r, int32_t partition, int64_t offset)
{
    struct rl_cli_dlq_filter f = RL_CLI_DLQ_ALL;
    struct rl_cli_dlq_replay_counts counts;
    struct replay_outcome out;
    struct dl_row row;
    char errstr[512], msg[1024], detail[256];
    char *confirm = console_form_value(r, "confirm");
    int confirmed = confirm && strcmp(confirm, "yes") == 0;
    int err, ok = 0;
    unsigned status = MHD_HTTP_OK;

    free(confirm);
    if (strcmp(r->role, "operator") != 0) {
        snprintf(msg, sizeof(msg),
                 "refused: %s has the role %s; only operators replay dead "
                 "letters",
                 r->user, r->role);
        return replay_page(r, MHD_HTTP_FORBIDDEN, NULL, 0, msg, 0);
    }
    f.partition = partition;
    f.offset = offset;
    memset(&row, 0, sizeof(row));
    row.offset = -1;
    err =
        rl_cli_dlq_read(r->c->cfg, &f, read_one, &row, errstr, sizeof(errstr));
    if (err)
        return kafka_failed(r, errstr);
    if (row.offset != offset || !console_tenant_visible(r, row.tenant))
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "no such dead letter (the topic's "
                                    "retention may have removed it)");
    if (row.why[0]) {
        snprintf(msg, sizeof(msg), "not replayable: %s", row.why);
        return replay_page(r, MHD_HTTP_CONFLICT, &row, 0, msg, 0);
    }
    if (!confirmed)
        return replay_page(r, MHD_HTTP_OK, &row, 1, NULL, 1);

    snprintf(detail, sizeof(detail), "dead letter %d/%" PRId64 " (%s, %s)",
             (int)partition, offset, row.source, row.reason);
    if (console_pool_take(r->c, r) != 0)
        return console_send_message(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                                    "Unavailable", 0,
                                    "the ledger cannot be reached; nothing "
                                    "was sent");
    err = rl_db_console_audit_add(r->db, r->user, "replay_dead_letter",
                                  row.run_id, r->address, detail, errstr,
                                  sizeof(errstr));
    if (err) {
        rl_log_warn(NULL, "console: %s", errstr);
        return console_send_message(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                                    "Unavailable", 0,
                                    "the ledger could not record the replay; "
                                    "nothing was sent");
    }
    memset(&out, 0, sizeof(out));
    err = rl_cli_dlq_replay("console dlq replay", r->c->cfg, &f, 0, on_outcome,
                            &out, &counts, errstr, sizeof(errstr));
    if (err || counts.failed) {
        status = MHD_HTTP_BAD_GATEWAY;
        snprintf(msg, sizeof(msg),
                 "the replay failed: %s; the broker did not acknowledge the "
                 "event (runledger dlq replay may retry it)",
                 err ? errstr : "not sent");
    } else if (strcmp(out.outcome, "sent") == 0) {
        ok = 1;
        snprintf(msg, sizeof(msg),
                 "sent by %s: dead letter %d/%" PRId64
                 " re-published as run %s%s",
                 r->user, (int)partition, offset, out.run_id,
                 out.failed_run
                     ? "; that run failed, and while it is failed the ledger "
                       "acknowledges its event as a duplicate: retry the run "
                       "itself"
                     : "");
    } else if (strcmp(out.outcome, "invalid") == 0) {
        status = MHD_HTTP_CONFLICT;
        snprintf(msg, sizeof(msg),
                 "refused: the event is invalid (%s); fix it and publish it "
                 "instead",
                 out.detail);
    } else if (strcmp(out.outcome, "not-replayable") == 0) {
        status = MHD_HTTP_CONFLICT;
        snprintf(msg, sizeof(msg), "not replayable: %s", out.detail);
    } else {
        status = MHD_HTTP_NOT_FOUND;
        snprintf(msg, sizeof(msg),
                 "nothing was replayed: the dead letter is gone");
    }
    rl_log_info(NULL,
                "console: %s replaying dead letter %d/%" PRId64 " from %s: %s",
                r->user, (int)partition, offset, r->address,
                out.outcome[0] ? out.outcome : "failed");
    return replay_page(r, status, &row, ok, msg, 0);
}

enum MHD_Result
console_deadletter_replay(struct console_req *r, int32_t partition,
                          int64_t offset)
{
    enum MHD_Result ret;

    /* The read, the audit row and the replay under the one lock: a replay
     * is never refused as busy after its audit row was written. */
    if (pthread_mutex_trylock(&r->c->kafka_lock) != 0)
        return kafka_busy(r);
    console_pool_give(r->c, r);
    ret = replay_locked(r, partition, offset);
    pthread_mutex_unlock(&r->c->kafka_lock);
    return ret;
}
