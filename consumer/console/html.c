/* html.c: the console's HTML: the one escaping function, a ledger
 * value as text, the frame of every page and the stylesheet. Pages are written
 * server-side, with no script and no inline style, so the
 * Content-Security-Policy can forbid both. */
#include <cjson/cJSON.h>
#include <string.h>

#include "console_int.h"

void
html_esc_n(struct rl_buf *b, const char *s, size_t n)
{
    size_t start = 0;

    if (!s)
        return;
    for (size_t i = 0; i < n && s[i]; i++) {
        const char *ent = NULL;

        switch (s[i]) {
        case '&':
            ent = "&amp;";
            break;
        case '<':
            ent = "&lt;";
            break;
        case '>':
            ent = "&gt;";
            break;
        case '"':
            ent = "&quot;";
            break;
        case '\'':
            ent = "&#39;";
            break;
        default:
            continue;
        }
        rl_buf_put(b, s + start, i - start);
        rl_buf_puts(b, ent);
        start = i + 1;
    }
    rl_buf_put(b, s + start, strnlen(s + start, n - start));
}

void
html_esc(struct rl_buf *b, const char *s)
{
    if (s)
        html_esc_n(b, s, strlen(s));
}

void
html_begin(struct rl_buf *b, const struct console_req *r, const char *title)
{
    rl_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head>"
                   "<meta charset=\"utf-8\">"
                   "<meta name=\"viewport\" "
                   "content=\"width=device-width, initial-scale=1\">"
                   "<title>");
    html_esc(b, title);
    rl_buf_puts(b, " - Runledger</title>"
                   "<link rel=\"stylesheet\" href=\"/static/console.css\">"
                   "</head><body><header><nav>"
                   "<span class=\"brand\">Runledger</span>");
    if (r->user[0]) {
        rl_buf_puts(b, "<a href=\"/approvals\">Approvals</a>"
                       "<a href=\"/runs\">Runs</a>"
                       "<a href=\"/schedules\">Schedules</a>"
                       "<a href=\"/costs\">Costs</a>"
                       "<a href=\"/limits\">Limits</a>"
                       "<a href=\"/deadletters\">Dead letters</a>"
                       "<span class=\"who\" id=\"who\">");
        html_esc(b, r->user);
        rl_buf_puts(b, " (");
        html_esc(b, r->role);
        rl_buf_puts(b, ")</span>"
                       "<form method=\"post\" action=\"/signout\" "
                       "class=\"signout\">"
                       "<input type=\"hidden\" name=\"csrf\" value=\"");
        html_esc(b, r->csrf);
        rl_buf_puts(b, "\"><button type=\"submit\" id=\"signout\">Sign "
                       "out</button></form>");
    }
    rl_buf_puts(b, "</nav></header><main>");
}

void
html_end(struct rl_buf *b)
{
    rl_buf_puts(b, "</main></body></html>\n");
}

void
html_message(struct rl_buf *b, int ok, const char *text)
{
    rl_buf_puts(b, ok ? "<p id=\"message\" class=\"ok\">"
                      : "<p id=\"message\" class=\"error\">");
    html_esc(b, text);
    rl_buf_puts(b, "</p>");
}

const char *
json_str(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

void
html_member(struct rl_buf *b, const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

    if (cJSON_IsString(v))
        html_esc(b, v->valuestring);
    else if (cJSON_IsNumber(v))
        rl_buf_printf(b, "%.0f", v->valuedouble);
    else if (cJSON_IsBool(v))
        rl_buf_puts(b, cJSON_IsTrue(v) ? "yes" : "no");
}

/* clang-format off */
const char console_css[] =
"body{font-family:system-ui,sans-serif;margin:0;color:#1b1f24;"
"background:#fafafa}\n"
"header{background:#1b1f24;color:#fff;padding:.5rem 1rem}\n"
"nav{display:flex;gap:1rem;align-items:center;flex-wrap:wrap}\n"
"nav a{color:#fff}\n"
".brand{font-weight:bold}\n"
".who{margin-left:auto}\n"
".signout{display:inline;margin:0}\n"
"main{padding:1rem;max-width:70rem;overflow-x:auto}\n"
"table{border-collapse:collapse;width:100%}\n"
"th,td{text-align:left;padding:.25rem .5rem;border-bottom:1px solid #ddd;"
"vertical-align:top}\n"
"pre{white-space:pre-wrap;word-break:break-word;background:#fff;"
"border:1px solid #ccc;padding:.75rem;max-height:40rem;overflow:auto}\n"
"code{word-break:break-all}\n"
".hidden-char{background:#fde7a9;color:#5c3d00;border:1px solid #b07d00;"
"border-radius:2px;font-size:.8em;padding:0 .15rem}\n"
".field-name{font-size:1em;margin:.75rem 0 .25rem}\n"
".field-length{margin:0;color:#555;font-size:.9em}\n"
".ok{color:#11631f;font-weight:bold}\n"
".error{color:#a0121a;font-weight:bold}\n"
".decide{display:flex;gap:1rem;align-items:end;flex-wrap:wrap}\n"
"button{padding:.4rem 1rem}\n"
"#approve{background:#11631f;color:#fff}\n"
"#reject{background:#a0121a;color:#fff}\n"
"dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}\n"
"dt{font-weight:bold}\n"
"dd{margin:0}\n"
".timeline-axis{max-width:100%;height:auto;background:#fff;"
"border:1px solid #ddd}\n"
".timeline-axis text{font-size:11px;fill:#1b1f24}\n"
".timeline-axis .axis-note{fill:#555}\n"
".timeline-axis .lane{stroke:#e3e3e3}\n"
".timeline-axis .axis,.timeline-axis .tick{stroke:#555}\n"
".timeline-axis .span{stroke:#8a8f98;stroke-width:3}\n"
".mark{stroke:#1b1f24;stroke-width:1}\n"
".mark.tone-ok{fill:#2b8a3e}\n"
".mark.tone-error{fill:#c92a2a}\n"
".mark.tone-wait{fill:#f0a202}\n"
".mark.tone-info{fill:#fff}\n"
"ol.timeline{list-style:none;padding-left:1rem;"
"border-left:3px solid #ccc}\n"
".timeline li{margin:.35rem 0}\n"
".timeline time{font-family:monospace}\n"
".timeline .offset{color:#555;display:inline-block;min-width:6rem}\n"
".timeline .lane-name{font-weight:bold;display:inline-block;"
"min-width:7rem}\n"
".timeline .detail{color:#444}\n"
".tag{border:1px solid;border-radius:3px;padding:0 .3rem;font-size:.85em}\n"
".tag.tone-ok{color:#11631f}\n"
".tag.tone-error{color:#a0121a}\n"
".tag.tone-wait{color:#7a5200}\n"
"tr.window.missing td,tr.window.conflict td{background:#fdecec}\n";
/* clang-format on */
