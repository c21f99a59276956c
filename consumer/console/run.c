/* run.c: a run's page (its fields, timeline, output, attempts,
 * notifications and audit) and an operator's action on it. Every value
 * from the ledger goes into the page through html_esc. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_int.h"
#include "rl/db_console.h"
#include "rl/db_runs.h"
#include "rl/err.h"
#include "rl/log.h"

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
            html_member(b, row, members[i]);
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
        return console_ledger_failed(r, errstr);
    run = cJSON_Parse(json);
    free(json);
    html_begin(&b, r, "Run");
    rl_buf_puts(&b, "<h1>Run <code>");
    html_esc(&b, run_id);
    rl_buf_puts(&b, "</code></h1><dl id=\"run\">");
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        rl_buf_printf(&b, "<dt>%s</dt><dd id=\"run-%s\">", fields[i][1],
                      fields[i][0]);
        html_member(&b, run, fields[i][0]);
        rl_buf_puts(&b, "</dd>");
    }
    rl_buf_puts(&b, "</dl>");
    if (json_str(run, "proposal")) {
        rl_buf_puts(&b, "<p><a href=\"/approvals/");
        html_esc(&b, run_id);
        rl_buf_puts(&b, "\">The proposal and its approval</a></p>");
    }
    decision = cJSON_GetObjectItemCaseSensitive(run, "decision");
    if (cJSON_IsObject(decision))
        console_put_decision(&b, decision);
    console_put_timeline(&b, cJSON_GetObjectItemCaseSensitive(run, "timeline"));
    if (json_str(run, "output")) {
        rl_buf_puts(&b, "<h2>Output</h2><pre id=\"output\">");
        html_member(&b, run, "output");
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
    if (reason)
        console_cut_utf8(reason, CONSOLE_REASON_MAX);
    if (!reason || !*reason) {
        /* The ledger wants a reason for every decision on a run. */
        free(reason);
        reason = strdup("(no reason given in the console)");
    }
    /* A run of a tenant the user may not read does not exist for it. */
    err = console_run_visible(r, run_id, errstr, sizeof(errstr));
    if (err == RL_ERR_NOTFOUND) {
        free(action);
        free(reason);
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "no such run");
    }
    if (err) {
        free(action);
        free(reason);
        return console_ledger_failed(r, errstr);
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
    }
    if (err == 0)
        err = rl_db_console_tx(r->db, "COMMIT", errstr, sizeof(errstr));
    if (err) {
        char ignored[256];

        /* Every failure after BEGIN ends the transaction here, so the
         * pooled connection goes back outside one. */
        rl_db_console_tx(r->db, "ROLLBACK", ignored, sizeof(ignored));
    } else if (strcmp(action, "cancel") == 0) {
        rl_db_model_horizons_refresh(r->db);
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
        return console_ledger_failed(r, errstr);
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
