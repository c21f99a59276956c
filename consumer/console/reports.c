/* reports.c: the console's read-only reports: budgets and the cost report
 * with a chart drawn on the server (SVG: no script, no inline style), and
 * the concurrency and model limits. Values from the ledger go through
 * html_esc like every page's. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console_int.h"
#include "rl/db_budgets.h"
#include "rl/db_console.h"
#include "rl/db_limits.h"
#include "rl/db_model_limits.h"
#include "rl/db_prices.h"
#include "rl/log.h"

#define CHART_DAYS 14
#define CHART_TENANTS 8
#define CHART_W 760
#define CHART_H 260
#define CHART_LEFT 70
#define CHART_BOTTOM 40

/* A JSON array of flat objects as a table: the members of the first row
 * are the columns. */
static void
json_table(struct rl_buf *b, const char *id, const cJSON *rows)
{
    const cJSON *first = cJSON_GetArrayItem(rows, 0), *col, *row;

    if (!first) {
        rl_buf_printf(b, "<p id=\"%s\">None.</p>", id);
        return;
    }
    rl_buf_printf(b, "<table id=\"%s\"><thead><tr>", id);
    cJSON_ArrayForEach(col, first)
    {
        rl_buf_puts(b, "<th>");
        html_esc(b, col->string);
        rl_buf_puts(b, "</th>");
    }
    rl_buf_puts(b, "</tr></thead><tbody>");
    cJSON_ArrayForEach(row, rows)
    {
        rl_buf_puts(b, "<tr>");
        cJSON_ArrayForEach(col, first)
        {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, col->string);

            rl_buf_puts(b, "<td>");
            if (cJSON_IsString(v)) {
                html_esc(b, v->valuestring);
            } else if (v && !cJSON_IsNull(v)) {
                char *text = cJSON_PrintUnformatted(v);

                html_esc(b, text);
                cJSON_free(text);
            }
            rl_buf_puts(b, "</td>");
        }
        rl_buf_puts(b, "</tr>");
    }
    rl_buf_puts(b, "</tbody></table>");
}

/* The chart of tokens a day per tenant: a bar per tenant and day, a red
 * mark over a bar whose runs made extra generations (each with a
 * <title> saying how many). */
static void
cost_chart(struct rl_buf *b, const cJSON *rows)
{
    static const char *const colors[CHART_TENANTS] = {
        "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
        "#8c564b", "#e377c2", "#7f7f7f", "#17becf"};
    const char *tenants[CHART_TENANTS];
    char days[CHART_DAYS][11];
    int ntenants = 0, plot_w = CHART_W - CHART_LEFT - 10;
    int plot_h = CHART_H - CHART_BOTTOM - 10;
    double max = 0, slot, bar;
    time_t now = time(NULL);
    const cJSON *row;

    for (int d = 0; d < CHART_DAYS; d++) {
        time_t t = now - (time_t)(CHART_DAYS - 1 - d) * 86400;
        struct tm tm;

        gmtime_r(&t, &tm);
        strftime(days[d], sizeof(days[d]), "%Y-%m-%d", &tm);
    }
    cJSON_ArrayForEach(row, rows)
    {
        const cJSON *tenant = cJSON_GetObjectItemCaseSensitive(row, "tenant");
        const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(row, "tokens");
        int known = 0;

        if (!cJSON_IsString(tenant))
            continue;
        for (int i = 0; i < ntenants; i++)
            known |= strcmp(tenants[i], tenant->valuestring) == 0;
        if (!known && ntenants < CHART_TENANTS)
            tenants[ntenants++] = tenant->valuestring;
        if (cJSON_IsNumber(tokens) && tokens->valuedouble > max)
            max = tokens->valuedouble;
    }
    if (max <= 0)
        max = 1;
    slot = (double)plot_w / CHART_DAYS;
    bar = (slot - 4) / (ntenants > 0 ? ntenants : 1);
    rl_buf_printf(b,
                  "<svg id=\"cost-chart\" xmlns=\"http://www.w3.org/2000/svg\" "
                  "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                  "role=\"img\" aria-label=\"tokens a day per tenant\">",
                  CHART_W, CHART_H, CHART_W, CHART_H);
    rl_buf_printf(b,
                  "<line x1=\"%d\" y1=\"10\" x2=\"%d\" y2=\"%d\" "
                  "stroke=\"#333\"/><line x1=\"%d\" y1=\"%d\" x2=\"%d\" "
                  "y2=\"%d\" stroke=\"#333\"/>",
                  CHART_LEFT, CHART_LEFT, 10 + plot_h, CHART_LEFT, 10 + plot_h,
                  CHART_LEFT + plot_w, 10 + plot_h);
    rl_buf_printf(b,
                  "<text x=\"%d\" y=\"16\" text-anchor=\"end\" "
                  "font-size=\"11\">%.0f</text><text x=\"%d\" y=\"%d\" "
                  "text-anchor=\"end\" font-size=\"11\">0</text>",
                  CHART_LEFT - 4, max, CHART_LEFT - 4, 10 + plot_h);
    for (int d = 0; d < CHART_DAYS; d++) {
        double x0 = CHART_LEFT + d * slot + 2;

        if (d % 2 == 0)
            rl_buf_printf(b,
                          "<text x=\"%.1f\" y=\"%d\" font-size=\"10\">%s"
                          "</text>",
                          x0, CHART_H - 22, days[d] + 5);
        cJSON_ArrayForEach(row, rows)
        {
            const cJSON *day = cJSON_GetObjectItemCaseSensitive(row, "day");
            const cJSON *tenant =
                cJSON_GetObjectItemCaseSensitive(row, "tenant");
            const cJSON *tokens =
                cJSON_GetObjectItemCaseSensitive(row, "tokens");
            const cJSON *extra =
                cJSON_GetObjectItemCaseSensitive(row, "extra_generations");
            const cJSON *cost = cJSON_GetObjectItemCaseSensitive(row, "cost");
            int t = -1;
            double h, x;

            if (!cJSON_IsString(day) || strcmp(day->valuestring, days[d]) ||
                !cJSON_IsString(tenant) || !cJSON_IsNumber(tokens))
                continue;
            for (int i = 0; i < ntenants; i++) {
                if (strcmp(tenants[i], tenant->valuestring) == 0)
                    t = i;
            }
            if (t < 0)
                continue;
            h = tokens->valuedouble / max * plot_h;
            x = x0 + t * bar;
            rl_buf_printf(b,
                          "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" "
                          "width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                          "<title>",
                          x, 10 + plot_h - h, bar > 1 ? bar - 1 : bar, h,
                          colors[t]);
            html_esc(b, tenant->valuestring);
            rl_buf_printf(b, " %s: %.0f tokens", days[d], tokens->valuedouble);
            if (cJSON_IsNumber(cost))
                rl_buf_printf(b, ", cost %.6f", cost->valuedouble);
            rl_buf_puts(b, "</title></rect>");
            if (cJSON_IsNumber(extra) && extra->valuedouble > 0) {
                rl_buf_printf(b,
                              "<circle class=\"extra\" cx=\"%.1f\" "
                              "cy=\"%.1f\" r=\"4\" fill=\"#c00\"><title>",
                              x + bar / 2, 10 + plot_h - h - 6);
                html_esc(b, tenant->valuestring);
                rl_buf_printf(b,
                              " %s: %.0f extra generations</title>"
                              "</circle>",
                              days[d], extra->valuedouble);
            }
        }
    }
    for (int i = 0; i < ntenants; i++) {
        rl_buf_printf(b,
                      "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" "
                      "fill=\"%s\"/><text x=\"%d\" y=\"%d\" "
                      "font-size=\"11\">",
                      CHART_LEFT + i * 90, CHART_H - 12, colors[i],
                      CHART_LEFT + i * 90 + 14, CHART_H - 3);
        html_esc_n(b, tenants[i], 12);
        rl_buf_puts(b, "</text>");
    }
    rl_buf_puts(b, "</svg>");
}

enum MHD_Result
console_costs(struct console_req *r)
{
    struct rl_buf b = {0};
    char errstr[512], since[32], *budgets = NULL, *report = NULL;
    char *daily = NULL, *costs = NULL, *prices = NULL;
    cJSON *jb = NULL, *jr = NULL, *jd = NULL, *jc = NULL, *jp = NULL;
    time_t t = time(NULL) - (time_t)(CHART_DAYS - 1) * 86400;
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(since, sizeof(since), "%Y-%m-%dT00:00:00Z", &tm);
    if (rl_db_budgets_json(r->db, NULL, &budgets, errstr, sizeof(errstr)) ||
        rl_db_report_json(r->db, since, "tenant", &report, errstr,
                          sizeof(errstr)) ||
        rl_db_console_costs_daily_json(r->db, CHART_DAYS, r->user, &daily,
                                       errstr, sizeof(errstr)) ||
        rl_db_cost_report_json(r->db, since, &costs, errstr, sizeof(errstr)) ||
        rl_db_prices_json(r->db, &prices, errstr, sizeof(errstr))) {
        free(budgets);
        free(report);
        free(daily);
        free(costs);
        return console_ledger_failed(r, errstr);
    }
    jb = cJSON_Parse(budgets);
    jr = cJSON_Parse(report);
    jd = cJSON_Parse(daily);
    jc = cJSON_Parse(costs);
    jp = cJSON_Parse(prices);
    console_tenant_filter(r, jb);
    console_tenant_filter(r, jr);
    /* The cost per model adds up every tenant's runs: not for a user
     * scoped to some of them. */
    if (r->tenants[0]) {
        cJSON_Delete(jc);
        jc = cJSON_CreateArray();
    }
    free(budgets);
    free(report);
    free(daily);
    free(costs);
    free(prices);
    html_begin(&b, r, "Costs");
    rl_buf_printf(&b,
                  "<h1>Costs</h1><h2>Tokens a day per tenant, last %d "
                  "days</h2><p>Red marks: runs of that day made extra "
                  "generations (attempts beyond the first that may have "
                  "generated).</p>",
                  CHART_DAYS);
    cost_chart(&b, jd);
    rl_buf_printf(
        &b,
        "<h2>Live and batch cost since %s, per model</h2><p>At "
        "the prices below (per million tokens; <code>runledger prices "
        "set</code>), a batch's answers at the batch discount; no "
        "price, no cost.</p>",
        since);
    json_table(&b, "cost-by-model", jc);
    rl_buf_puts(&b, "<h2>Prices</h2>");
    json_table(&b, "prices", jp);
    rl_buf_printf(&b, "<h2>Report since %s, per tenant</h2>", since);
    json_table(&b, "report", jr);
    rl_buf_puts(&b, "<h2>Budgets</h2>");
    json_table(&b, "budgets", jb);
    html_end(&b);
    cJSON_Delete(jb);
    cJSON_Delete(jr);
    cJSON_Delete(jd);
    cJSON_Delete(jc);
    cJSON_Delete(jp);
    return console_send_page(r, MHD_HTTP_OK, &b);
}

enum MHD_Result
console_limits(struct console_req *r)
{
    struct rl_buf b = {0};
    char errstr[512], *limits = NULL, *models = NULL;
    cJSON *jl, *jm;

    if (rl_db_limits_json(r->db, NULL, &limits, errstr, sizeof(errstr)) ||
        rl_db_model_limits_json(r->db, NULL, &models, errstr, sizeof(errstr))) {
        free(limits);
        return console_ledger_failed(r, errstr);
    }
    jl = cJSON_Parse(limits);
    jm = cJSON_Parse(models);
    console_tenant_filter(r, jl);
    free(limits);
    free(models);
    html_begin(&b, r, "Limits");
    rl_buf_puts(&b, "<h1>Limits</h1><p>Read only: `runledger limits` sets "
                    "them.</p><h2>Tenants and jobs</h2>");
    json_table(&b, "limits", jl);
    rl_buf_puts(&b, "<h2>Models</h2>");
    json_table(&b, "model-limits", jm);
    html_end(&b);
    cJSON_Delete(jl);
    cJSON_Delete(jm);
    return console_send_page(r, MHD_HTTP_OK, &b);
}
