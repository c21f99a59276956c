/* pages.c: the console's pages: the approvals queue, the approval page
 * and the decision on it, the runs list and a run's page. Every value
 * from the ledger goes into the page through html_esc. The approval page
 * shows the proposal as rl_approval_canonical derives it from the stored
 * proposal: the bytes the digest covers, which the worker hashed when it
 * stored the proposal and `runs approve` checks. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_int.h"
#include "rl/approval.h"
#include "rl/db_console.h"
#include "rl/db_runs.h"
#include "rl/err.h"
#include "rl/json.h"
#include "rl/log.h"
#include "rl/runid.h"

#define QUEUE_LIMIT 500
#define RUNS_PAGE 50

int
console_role_decides(const char *role)
{
    return strcmp(role, "approver") == 0 || strcmp(role, "operator") == 0;
}

static const char *
str_of(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A member as text: a string as is, a number, a boolean; "" otherwise. */
static void
put_member(struct rl_buf *b, const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

    if (cJSON_IsString(v))
        html_esc(b, v->valuestring);
    else if (cJSON_IsNumber(v))
        rl_buf_printf(b, "%.0f", v->valuedouble);
    else if (cJSON_IsBool(v))
        rl_buf_puts(b, cJSON_IsTrue(v) ? "yes" : "no");
}

static enum MHD_Result
ledger_failed(struct console_req *r, const char *errstr)
{
    rl_log_warn(NULL, "console: %s", errstr);
    return console_send_message(r, MHD_HTTP_SERVICE_UNAVAILABLE, "Unavailable",
                                0, "the ledger could not answer; try again");
}

/* ---- the approvals queue ------------------------------------------------ */

enum MHD_Result
console_approvals(struct console_req *r)
{
    struct rl_buf b = {0};
    char errstr[512], *json = NULL;
    cJSON *rows;
    const cJSON *row;
    int err;

    err = rl_db_console_approvals_json(r->db, QUEUE_LIMIT, &json, errstr,
                                       sizeof(errstr));
    if (err)
        return ledger_failed(r, errstr);
    rows = cJSON_Parse(json);
    free(json);
    html_begin(&b, r, "Approvals");
    rl_buf_printf(&b,
                  "<h1>Approvals</h1><p>%d runs wait for a decision, "
                  "oldest first.</p>",
                  cJSON_GetArraySize(rows));
    rl_buf_puts(&b, "<table id=\"approvals\"><thead><tr><th>Run</th>"
                    "<th>Job</th><th>Tenant</th><th>Scheduled</th>"
                    "<th>Waiting since</th><th>Age</th></tr></thead><tbody>");
    cJSON_ArrayForEach(row, rows)
    {
        const char *run_id = str_of(row, "run_id");
        const cJSON *age = cJSON_GetObjectItemCaseSensitive(row, "age_seconds");
        double s = cJSON_IsNumber(age) ? age->valuedouble : 0;

        rl_buf_puts(&b, "<tr class=\"pending\"><td><a class=\"approval\" "
                        "href=\"/approvals/");
        html_esc(&b, run_id);
        rl_buf_puts(&b, "\"><code>");
        html_esc_n(&b, run_id, 16);
        rl_buf_puts(&b, "</code></a></td><td>");
        put_member(&b, row, "job");
        rl_buf_puts(&b, "</td><td>");
        put_member(&b, row, "tenant");
        rl_buf_puts(&b, "</td><td>");
        put_member(&b, row, "scheduled_at");
        rl_buf_puts(&b, "</td><td>");
        put_member(&b, row, "waiting_since");
        if (s >= 86400)
            rl_buf_printf(&b, "</td><td>%.0f d", s / 86400);
        else if (s >= 3600)
            rl_buf_printf(&b, "</td><td>%.0f h", s / 3600);
        else if (s >= 60)
            rl_buf_printf(&b, "</td><td>%.0f min", s / 60);
        else
            rl_buf_printf(&b, "</td><td>%.0f s", s);
        rl_buf_puts(&b, "</td></tr>");
    }
    rl_buf_puts(&b, "</tbody></table>");
    cJSON_Delete(rows);
    html_end(&b);
    return console_send_page(r, MHD_HTTP_OK, &b);
}

/* ---- the approval page -------------------------------------------------- */

/* What the page shows of a proposal, from its canonical text. */
struct shown_proposal {
    char *canonical; /* the bytes the digest covers */
    char digest[RL_HEX_SIZE];
    cJSON *parsed; /* canonical, parsed */
    char *content; /* the content as shown: a string's text, else JSON */
};

static void
shown_clear(struct shown_proposal *p)
{
    free(p->canonical);
    cJSON_Delete(p->parsed);
    free(p->content);
    memset(p, 0, sizeof(*p));
}

static int
shown_from(const char *proposal_json, struct shown_proposal *p, char *errstr,
           size_t errstr_size)
{
    const cJSON *content;

    memset(p, 0, sizeof(*p));
    if (rl_approval_canonical(proposal_json, &p->canonical, p->digest, errstr,
                              errstr_size) != 0)
        return -1;
    p->parsed = cJSON_Parse(p->canonical);
    content = cJSON_GetObjectItemCaseSensitive(p->parsed, "content");
    if (cJSON_IsString(content))
        p->content = strdup(content->valuestring);
    else if (content)
        p->content = rl_json_canonical(content, errstr, errstr_size);
    if (!p->parsed || !p->content) {
        snprintf(errstr, errstr_size, "could not read the proposal");
        shown_clear(p);
        return -1;
    }
    return 0;
}

static void
put_decision(struct rl_buf *b, const cJSON *decision)
{
    rl_buf_puts(b, "<p id=\"decision\">Decided: ");
    put_member(b, decision, "decision");
    rl_buf_puts(b, " by ");
    put_member(b, decision, "actor");
    rl_buf_puts(b, " at ");
    put_member(b, decision, "decided_at");
    if (str_of(decision, "reason")) {
        rl_buf_puts(b, " (");
        put_member(b, decision, "reason");
        rl_buf_puts(b, ")");
    }
    rl_buf_puts(b, ", digest <code>");
    put_member(b, decision, "digest");
    rl_buf_puts(b, "</code></p>");
}

/* The page of a run's proposal, with the decision form when r's user may
 * decide it; message (may be NULL) on top. */
static enum MHD_Result
approval_page(struct console_req *r, const char *run_id, unsigned status,
              int ok, const char *message)
{
    struct rl_buf b = {0};
    struct shown_proposal shown;
    char errstr[512], *json = NULL;
    const cJSON *decision, *dest;
    const char *stored, *run_status, *proposal;
    cJSON *run;
    int err, may;

    err = rl_db_console_run_json(r->db, run_id, r->user, &json, errstr,
                                 sizeof(errstr));
    if (err == RL_ERR_NOTFOUND)
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "no such run");
    if (err)
        return ledger_failed(r, errstr);
    run = cJSON_Parse(json);
    free(json);
    proposal = str_of(run, "proposal");
    if (!proposal) {
        cJSON_Delete(run);
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "this run has no proposal to approve");
    }
    if (shown_from(proposal, &shown, errstr, sizeof(errstr)) != 0) {
        cJSON_Delete(run);
        return ledger_failed(r, errstr);
    }
    stored = str_of(run, "proposal_digest");
    run_status = str_of(run, "status");
    decision = cJSON_GetObjectItemCaseSensitive(run, "decision");

    html_begin(&b, r, "Approval");
    rl_buf_puts(&b, "<h1>Approval of run <code>");
    html_esc_n(&b, run_id, 16);
    rl_buf_puts(&b, "</code></h1>");
    if (message)
        html_message(&b, ok, message);
    rl_buf_puts(&b, "<dl><dt>Run</dt><dd><a href=\"/runs/");
    html_esc(&b, run_id);
    rl_buf_puts(&b, "\"><code>");
    html_esc(&b, run_id);
    rl_buf_puts(&b, "</code></a></dd><dt>Job</dt><dd>");
    put_member(&b, run, "job");
    rl_buf_puts(&b, "</dd><dt>Tenant</dt><dd>");
    put_member(&b, run, "tenant");
    rl_buf_puts(&b, "</dd><dt>Status</dt><dd id=\"status\">");
    html_esc(&b, run_status);
    rl_buf_puts(&b, "</dd></dl><h2>Destinations</h2><ul id=\"destinations\">");
    cJSON_ArrayForEach(
        dest, cJSON_GetObjectItemCaseSensitive(shown.parsed, "destination"))
    {
        rl_buf_puts(&b, "<li>");
        put_member(&b, dest, "channel");
        rl_buf_puts(&b, "</li>");
    }
    rl_buf_puts(&b, "</ul><h2>Operation</h2><p id=\"operation\">");
    put_member(&b, shown.parsed, "operation");
    rl_buf_puts(&b, "</p><h2>Content that will be sent</h2>"
                    "<pre id=\"content\">");
    html_esc(&b, shown.content);
    rl_buf_puts(&b, "</pre><h2>Digest</h2><p>SHA-256 of the canonical "
                    "proposal below: <code id=\"digest\">");
    html_esc(&b, shown.digest);
    rl_buf_puts(&b, "</code></p><details><summary>Canonical proposal"
                    "</summary><pre id=\"canonical\">");
    html_esc(&b, shown.canonical);
    rl_buf_puts(&b, "</pre></details>");

    /* A stored digest that is not the digest of the stored proposal is a
     * ledger fault: nothing here may be approved. */
    if (!stored || strcmp(stored, shown.digest) != 0) {
        html_message(&b, 0,
                     "the stored proposal does not match its stored digest; "
                     "it cannot be approved here");
    } else if (cJSON_IsObject(decision)) {
        put_decision(&b, decision);
    } else if (!run_status || strcmp(run_status, "awaiting_approval") != 0) {
        rl_buf_puts(&b, "<p id=\"decision\">Not awaiting approval.</p>");
    } else {
        may = console_role_decides(r->role) &&
              cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(run, "may_decide"));
        if (may) {
            rl_buf_puts(&b, "<form method=\"post\" class=\"decide\" "
                            "id=\"decide\" action=\"/approvals/");
            html_esc(&b, run_id);
            rl_buf_puts(&b, "\"><input type=\"hidden\" name=\"csrf\" "
                            "value=\"");
            html_esc(&b, r->csrf);
            rl_buf_puts(&b, "\"><input type=\"hidden\" name=\"digest\" "
                            "value=\"");
            html_esc(&b, shown.digest);
            rl_buf_puts(&b, "\"><label>Reason (optional)<br><input "
                            "type=\"text\" name=\"reason\" id=\"reason\" "
                            "maxlength=\"500\"></label>"
                            "<button type=\"submit\" id=\"approve\" "
                            "name=\"decision\" value=\"approve\">Approve"
                            "</button><button type=\"submit\" id=\"reject\" "
                            "name=\"decision\" value=\"reject\">Reject"
                            "</button></form>");
        } else {
            rl_buf_puts(&b, "<p id=\"not-allowed\">You may not decide this "
                            "run: ");
            rl_buf_puts(&b, console_role_decides(r->role)
                                ? "you are not an approver of its tenant "
                                  "for every destination."
                                : "your role does not decide runs.");
            rl_buf_puts(&b, "</p>");
        }
    }
    html_end(&b);
    shown_clear(&shown);
    cJSON_Delete(run);
    return console_send_page(r, status, &b);
}

enum MHD_Result
console_approval(struct console_req *r, const char *run_id)
{
    return approval_page(r, run_id, MHD_HTTP_OK, 1, NULL);
}

enum MHD_Result
console_decide(struct console_req *r, const char *run_id)
{
    struct rl_console_decision out;
    char errstr[512], msg[512];
    char *digest = console_form_value(r, "digest");
    char *decision = console_form_value(r, "decision");
    char *reason = console_form_value(r, "reason");
    unsigned status = MHD_HTTP_OK;
    int approve = decision && strcmp(decision, "approve") == 0;
    int ok = 0, err;

    if (!console_role_decides(r->role)) {
        snprintf(msg, sizeof(msg),
                 "refused: %s has the role %s, which does not decide runs",
                 r->user, r->role);
        status = MHD_HTTP_FORBIDDEN;
        goto done;
    }
    if (!decision || (!approve && strcmp(decision, "reject") != 0)) {
        snprintf(msg, sizeof(msg),
                 "refused: the decision must be approve "
                 "or reject");
        status = MHD_HTTP_BAD_REQUEST;
        goto done;
    }
    if (reason && strlen(reason) > 500)
        reason[500] = '\0';
    err = rl_db_console_decide(
        r->db,
        &(struct rl_console_decision_req){.run_id = run_id,
                                          .digest = digest ? digest : "",
                                          .actor = r->user,
                                          .approve = approve,
                                          .reason = reason,
                                          .address = r->address},
        &out, errstr, sizeof(errstr));
    if (err) {
        free(digest);
        free(decision);
        free(reason);
        return ledger_failed(r, errstr);
    }
    if (strcmp(out.result, "approved") == 0) {
        ok = 1;
        snprintf(msg, sizeof(msg),
                 "approved by %s: digest %s, %d notifications queued", r->user,
                 out.digest, out.outbox_rows);
    } else if (strcmp(out.result, "rejected") == 0) {
        ok = 1;
        snprintf(msg, sizeof(msg),
                 "rejected by %s: digest %s; nothing will be sent", r->user,
                 out.digest);
    } else if (strcmp(out.result, "not_found") == 0) {
        free(digest);
        free(decision);
        free(reason);
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "no such run");
    } else if (strcmp(out.result, "not_waiting") == 0) {
        status = MHD_HTTP_CONFLICT;
        if (out.decided_by[0])
            snprintf(msg, sizeof(msg),
                     "refused: already decided (%s) by %s at %s", out.decision,
                     out.decided_by, out.decided_at);
        else
            snprintf(msg, sizeof(msg),
                     "refused: the run is %s, not awaiting approval",
                     out.status);
    } else if (strcmp(out.result, "digest_mismatch") == 0) {
        status = MHD_HTTP_CONFLICT;
        snprintf(msg, sizeof(msg),
                 "refused: the proposal is not the one shown (digest shown "
                 "%.64s, current %s); review it again",
                 digest ? digest : "(none)", out.digest);
    } else if (strcmp(out.result, "not_allowed") == 0) {
        status = MHD_HTTP_FORBIDDEN;
        snprintf(msg, sizeof(msg),
                 "refused: %s may not decide runs (revoked, or no approver "
                 "role)",
                 r->user);
    } else {
        status = MHD_HTTP_FORBIDDEN;
        snprintf(msg, sizeof(msg),
                 "refused: %s is not an approver of this run's tenant for "
                 "every destination",
                 r->user);
    }
    rl_log_info(NULL, "console: %s %s run %s from %s: %s", r->user,
                approve ? "approving" : "rejecting", run_id, r->address,
                out.result);

done:
    free(digest);
    free(decision);
    free(reason);
    return approval_page(r, run_id, status, ok, msg);
}

/* ---- runs --------------------------------------------------------------- */

static void
put_query_link(struct rl_buf *b, const char *name, const char *value)
{
    static const char hex[] = "0123456789ABCDEF";

    if (!value || !*value)
        return;
    rl_buf_printf(b, "&amp;%s=", name);
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.')
            rl_buf_put(b, p, 1);
        else
            rl_buf_printf(b, "%%%c%c", hex[*p >> 4], hex[*p & 15]);
    }
}

static void
filter_input(struct rl_buf *b, const char *name, const char *label,
             const char *value)
{
    rl_buf_printf(b, "<label>%s <input type=\"text\" name=\"%s\" value=\"",
                  label, name);
    html_esc(b, value);
    rl_buf_puts(b, "\"></label> ");
}

enum MHD_Result
console_runs(struct console_req *r)
{
    const char *status = console_query_value(r, "status");
    enum rl_run_status st;
    struct rl_console_runs_filter f = {
        .tenant = console_query_value(r, "tenant"),
        .job = console_query_value(r, "job"),
        .from = console_query_value(r, "from"),
        .to = console_query_value(r, "to"),
        .after = console_query_value(r, "after"),
        .limit = RUNS_PAGE,
    };
    struct rl_buf b = {0};
    char errstr[512], *json = NULL;
    cJSON *page;
    const cJSON *row;
    const char *next;
    int err;

    /* A status the ledger does not know matches no run. */
    if (status && *status) {
        f.statuses = &st;
        f.nstatuses = rl_run_status_parse(status, &st) == 0 ? 1 : 0;
    }
    err = rl_db_console_runs_json(r->db, &f, &json, errstr, sizeof(errstr));
    if (err == RL_ERR_INVALID)
        return console_send_message(r, MHD_HTTP_BAD_REQUEST, "Runs", 0, errstr);
    if (err)
        return ledger_failed(r, errstr);
    page = cJSON_Parse(json);
    free(json);
    html_begin(&b, r, "Runs");
    rl_buf_puts(&b, "<h1>Runs</h1><form method=\"get\" action=\"/runs\" "
                    "id=\"filters\">");
    filter_input(&b, "tenant", "Tenant", f.tenant);
    filter_input(&b, "job", "Job", f.job);
    filter_input(&b, "status", "Status", status);
    filter_input(&b, "from", "From", f.from);
    filter_input(&b, "to", "To", f.to);
    rl_buf_puts(&b, "<button type=\"submit\">Filter</button></form>"
                    "<table id=\"runs\"><thead><tr><th>Run</th><th>Job</th>"
                    "<th>Tenant</th><th>Scheduled</th><th>Status</th>"
                    "<th>Attempts</th><th>Error class</th><th>Created</th>"
                    "</tr></thead><tbody>");
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(page, "runs"))
    {
        rl_buf_puts(&b, "<tr class=\"run\"><td><a href=\"/runs/");
        put_member(&b, row, "run_id");
        rl_buf_puts(&b, "\"><code>");
        html_esc_n(&b, str_of(row, "run_id"), 16);
        rl_buf_puts(&b, "</code></a></td><td>");
        put_member(&b, row, "job");
        rl_buf_puts(&b, "</td><td>");
        put_member(&b, row, "tenant");
        rl_buf_puts(&b, "</td><td>");
        put_member(&b, row, "scheduled_at");
        rl_buf_puts(&b, "</td><td>");
        put_member(&b, row, "status");
        rl_buf_puts(&b, "</td><td>");
        put_member(&b, row, "attempts");
        rl_buf_puts(&b, "</td><td>");
        put_member(&b, row, "error_class");
        rl_buf_puts(&b, "</td><td>");
        put_member(&b, row, "created");
        rl_buf_puts(&b, "</td></tr>");
    }
    rl_buf_puts(&b, "</tbody></table>");
    next = str_of(page, "next");
    if (next) {
        rl_buf_puts(&b, "<p><a id=\"next\" href=\"/runs?x=1");
        put_query_link(&b, "tenant", f.tenant);
        put_query_link(&b, "job", f.job);
        put_query_link(&b, "status", status);
        put_query_link(&b, "from", f.from);
        put_query_link(&b, "to", f.to);
        put_query_link(&b, "after", next);
        rl_buf_puts(&b, "\">Next page</a></p>");
    }
    cJSON_Delete(page);
    html_end(&b);
    return console_send_page(r, MHD_HTTP_OK, &b);
}

static void
put_table(struct rl_buf *b, const char *id, const cJSON *rows,
          const char *const *members, const char *const *headings, int n)
{
    const cJSON *row;

    rl_buf_printf(b, "<table id=\"%s\"><thead><tr>", id);
    for (int i = 0; i < n; i++)
        rl_buf_printf(b, "<th>%s</th>", headings[i]);
    rl_buf_puts(b, "</tr></thead><tbody>");
    cJSON_ArrayForEach(row, rows)
    {
        rl_buf_puts(b, "<tr>");
        for (int i = 0; i < n; i++) {
            rl_buf_puts(b, "<td>");
            put_member(b, row, members[i]);
            rl_buf_puts(b, "</td>");
        }
        rl_buf_puts(b, "</tr>");
    }
    rl_buf_puts(b, "</tbody></table>");
}

enum MHD_Result
console_run(struct console_req *r, const char *run_id)
{
    static const char *const attempt_members[] = {
        "attempt_no",        "outcome", "http_status", "prompt_tokens",
        "completion_tokens", "cost",    "latency_ms",  "dispatched_at",
        "finished_at",       "error"};
    static const char *const attempt_headings[] = {
        "#",    "Outcome",    "HTTP", "Prompt tokens", "Completion tokens",
        "Cost", "Latency ms", "Sent", "Finished",      "Error"};
    static const char *const note_members[] = {"channel",        "state",
                                               "delivery_count", "created_at",
                                               "delivered_at",   "last_error"};
    static const char *const note_headings[] = {
        "Channel", "State", "Deliveries", "Queued", "Delivered", "Last error"};
    static const char *const audit_members[] = {
        "at", "actor", "action", "via", "address", "digest", "detail"};
    static const char *const audit_headings[] = {
        "At", "Who", "What", "Via", "Address", "Digest", "Detail"};
    static const char *const fields[][2] = {{"job", "Job"},
                                            {"tenant", "Tenant"},
                                            {"version", "Version"},
                                            {"status", "Status"},
                                            {"scheduled_at", "Scheduled"},
                                            {"created_at", "Created"},
                                            {"updated_at", "Updated"},
                                            {"completed_at", "Completed"},
                                            {"attempts_count", "Attempts"},
                                            {"error_class", "Error class"},
                                            {"last_error", "Last error"},
                                            {"traceparent", "Trace"}};
    struct rl_buf b = {0};
    char errstr[512], *json = NULL;
    const cJSON *decision;
    cJSON *run;
    int err;

    err = rl_db_console_run_json(r->db, run_id, r->user, &json, errstr,
                                 sizeof(errstr));
    if (err == RL_ERR_NOTFOUND)
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "no such run");
    if (err)
        return ledger_failed(r, errstr);
    run = cJSON_Parse(json);
    free(json);
    html_begin(&b, r, "Run");
    rl_buf_puts(&b, "<h1>Run <code>");
    html_esc(&b, run_id);
    rl_buf_puts(&b, "</code></h1><dl id=\"run\">");
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        rl_buf_printf(&b, "<dt>%s</dt><dd id=\"run-%s\">", fields[i][1],
                      fields[i][0]);
        put_member(&b, run, fields[i][0]);
        rl_buf_puts(&b, "</dd>");
    }
    rl_buf_puts(&b, "</dl>");
    if (str_of(run, "proposal")) {
        rl_buf_puts(&b, "<p><a href=\"/approvals/");
        html_esc(&b, run_id);
        rl_buf_puts(&b, "\">The proposal and its approval</a></p>");
    }
    decision = cJSON_GetObjectItemCaseSensitive(run, "decision");
    if (cJSON_IsObject(decision))
        put_decision(&b, decision);
    console_put_timeline(&b, cJSON_GetObjectItemCaseSensitive(run, "timeline"));
    if (str_of(run, "output")) {
        rl_buf_puts(&b, "<h2>Output</h2><pre id=\"output\">");
        put_member(&b, run, "output");
        rl_buf_puts(&b, "</pre>");
    }
    if (strcmp(r->role, "operator") == 0) {
        rl_buf_puts(&b, "<form method=\"post\" id=\"actions\" "
                        "class=\"decide\" action=\"/runs/");
        html_esc(&b, run_id);
        rl_buf_puts(&b, "/action\"><input type=\"hidden\" name=\"csrf\" "
                        "value=\"");
        html_esc(&b, r->csrf);
        rl_buf_puts(&b, "\"><label>Reason<br><input type=\"text\" "
                        "name=\"reason\" maxlength=\"500\"></label>"
                        "<button type=\"submit\" id=\"cancel\" "
                        "name=\"action\" value=\"cancel\">Cancel</button>"
                        "<button type=\"submit\" id=\"retry\" "
                        "name=\"action\" value=\"retry\">Retry</button>"
                        "<button type=\"submit\" id=\"resolve\" "
                        "name=\"action\" value=\"resolve\">Resolve as "
                        "failed</button></form>");
    }
    rl_buf_puts(&b, "<h2>Attempts</h2>");
    put_table(&b, "attempts", cJSON_GetObjectItemCaseSensitive(run, "attempts"),
              attempt_members, attempt_headings, 10);
    rl_buf_puts(&b, "<h2>Notifications</h2>");
    put_table(&b, "notifications",
              cJSON_GetObjectItemCaseSensitive(run, "notifications"),
              note_members, note_headings, 6);
    rl_buf_puts(&b, "<h2>Audit</h2>");
    put_table(&b, "audit", cJSON_GetObjectItemCaseSensitive(run, "audit"),
              audit_members, audit_headings, 7);
    cJSON_Delete(run);
    html_end(&b);
    return console_send_page(r, MHD_HTTP_OK, &b);
}

/* An operator's action on a run (cancel, retry, resolve an unknown run as
 * failed), as `runledger runs` takes it, recorded with the signed-in
 * user as actor; its audit row (trigger run_decisions_audited, marked as
 * the console's and with the client's address) commits with it. */
enum MHD_Result
console_run_action(struct console_req *r, const char *run_id)
{
    struct rl_decision dec;
    struct rl_buf b = {0};
    char errstr[512], msg[640];
    char *action = console_form_value(r, "action");
    char *reason = console_form_value(r, "reason");
    unsigned status = MHD_HTTP_OK;
    int err = 0, ok = 0;

    if (strcmp(r->role, "operator") != 0) {
        snprintf(msg, sizeof(msg),
                 "refused: %s has the role %s; only operators act on runs",
                 r->user, r->role);
        status = MHD_HTTP_FORBIDDEN;
        goto done;
    }
    if (!action ||
        (strcmp(action, "cancel") != 0 && strcmp(action, "retry") != 0 &&
         strcmp(action, "resolve") != 0)) {
        snprintf(msg, sizeof(msg),
                 "refused: the action must be cancel, retry or resolve");
        status = MHD_HTTP_BAD_REQUEST;
        goto done;
    }
    if (reason && strlen(reason) > 500)
        reason[500] = '\0';
    if (!reason || !*reason) {
        /* The ledger wants a reason for every decision on a run. */
        free(reason);
        reason = strdup("(no reason given in the console)");
    }
    err = rl_db_console_tx(r->db, "BEGIN", errstr, sizeof(errstr));
    if (err == 0)
        err = rl_db_console_audit_as_console(r->db, r->address, errstr,
                                             sizeof(errstr));
    if (err == 0) {
        if (strcmp(action, "cancel") == 0)
            err = rl_db_run_cancel(r->db, run_id, r->user, reason, &dec, errstr,
                                   sizeof(errstr));
        else if (strcmp(action, "retry") == 0)
            err = rl_db_run_retry(r->db, run_id, r->user, reason, &dec, errstr,
                                  sizeof(errstr));
        else
            err = rl_db_run_resolve_failed(r->db, run_id, r->user, reason, &dec,
                                           errstr, sizeof(errstr));
        if (err == 0)
            err = rl_db_console_tx(r->db, "COMMIT", errstr, sizeof(errstr));
        else {
            char ignored[256];

            rl_db_console_tx(r->db, "ROLLBACK", ignored, sizeof(ignored));
        }
    }
    if (err == RL_ERR_NOTFOUND) {
        free(action);
        free(reason);
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "no such run");
    }
    if (err == RL_ERR_CONFLICT) {
        status = MHD_HTTP_CONFLICT;
        snprintf(msg, sizeof(msg), "refused: %s", errstr);
    } else if (err) {
        free(action);
        free(reason);
        return ledger_failed(r, errstr);
    } else {
        ok = 1;
        snprintf(msg, sizeof(msg), "%s by %s: done (the run was %s)", action,
                 r->user, dec.prior_status);
    }
    rl_log_info(NULL, "console: %s %s run %s from %s: %s", r->user, action,
                run_id, r->address, ok ? "done" : "refused");

done:
    free(action);
    free(reason);
    html_begin(&b, r, "Run");
    html_message(&b, ok, msg);
    rl_buf_puts(&b, "<p><a href=\"/runs/");
    html_esc(&b, run_id);
    rl_buf_puts(&b, "\">Back to the run</a></p>");
    html_end(&b);
    return console_send_page(r, status, &b);
}
