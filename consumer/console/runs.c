/* runs.c: the runs list: filters, a page of runs, and the link to the
 * next page (keyset, so every run is listed once). Every value from the
 * ledger goes into the page through html_esc. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "console_int.h"
#include "rl/db_console.h"
#include "rl/err.h"
#include "rl/run_status.h"

#define RUNS_PAGE 50

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
        .viewer = r->user,
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
        return console_ledger_failed(r, errstr);
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
        html_member(&b, row, "run_id");
        rl_buf_puts(&b, "\"><code>");
        html_esc_n(&b, json_str(row, "run_id"), 16);
        rl_buf_puts(&b, "</code></a></td><td>");
        html_member(&b, row, "job");
        rl_buf_puts(&b, "</td><td>");
        html_member(&b, row, "tenant");
        rl_buf_puts(&b, "</td><td>");
        html_member(&b, row, "scheduled_at");
        rl_buf_puts(&b, "</td><td>");
        html_member(&b, row, "status");
        rl_buf_puts(&b, "</td><td>");
        html_member(&b, row, "attempts");
        rl_buf_puts(&b, "</td><td>");
        html_member(&b, row, "error_class");
        rl_buf_puts(&b, "</td><td>");
        html_member(&b, row, "created");
        rl_buf_puts(&b, "</td></tr>");
    }
    rl_buf_puts(&b, "</tbody></table>");
    next = json_str(page, "next");
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
