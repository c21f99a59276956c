/* approvals.c: the approvals queue, a run's approval page and the
 * decision on it. Every value from the ledger goes into the page through
 * html_esc. The approval page shows the proposal as rl_approval_canonical
 * derives it from the stored proposal: the bytes the digest covers, which
 * the worker hashed when it stored the proposal and `runs approve`
 * checks. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_int.h"
#include "rl/approval.h"
#include "rl/db_console.h"
#include "rl/err.h"
#include "rl/json.h"
#include "rl/log.h"
#include "rl/runid.h"

#define QUEUE_LIMIT 500

int
console_role_decides(const char *role)
{
    return strcmp(role, "approver") == 0 || strcmp(role, "operator") == 0;
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

    err = rl_db_console_approvals_json(r->db, QUEUE_LIMIT, r->user, &json,
                                       errstr, sizeof(errstr));
    if (err)
        return console_ledger_failed(r, errstr);
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
        const char *run_id = json_str(row, "run_id");
        const cJSON *age = cJSON_GetObjectItemCaseSensitive(row, "age_seconds");
        double s = cJSON_IsNumber(age) ? age->valuedouble : 0;

        rl_buf_puts(&b, "<tr class=\"pending\"><td><a class=\"approval\" "
                        "href=\"/approvals/");
        html_esc(&b, run_id);
        rl_buf_puts(&b, "\"><code>");
        html_esc_n(&b, run_id, 16);
        rl_buf_puts(&b, "</code></a></td><td>");
        html_member(&b, row, "job");
        rl_buf_puts(&b, "</td><td>");
        html_member(&b, row, "tenant");
        rl_buf_puts(&b, "</td><td>");
        html_member(&b, row, "scheduled_at");
        rl_buf_puts(&b, "</td><td>");
        html_member(&b, row, "waiting_since");
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

/* ---- the content as a person reads it ----------------------------------- */

/* The name of a character the readable view marks instead of showing, or
 * NULL: characters that are invisible or that change the direction of
 * the text after them, so that what is shown would not be what is
 * sent. */
static const char *
hidden_name(uint32_t cp)
{
    switch (cp) {
    case 0x0d:
        return "CR";
    case 0x061c:
        return "ALM";
    case 0x200b:
        return "ZWSP";
    case 0x200c:
        return "ZWNJ";
    case 0x200d:
        return "ZWJ";
    case 0x200e:
        return "LRM";
    case 0x200f:
        return "RLM";
    case 0x202a:
        return "LRE";
    case 0x202b:
        return "RLE";
    case 0x202c:
        return "PDF";
    case 0x202d:
        return "LRO";
    case 0x202e:
        return "RLO";
    case 0x2060:
        return "WJ";
    case 0x2066:
        return "LRI";
    case 0x2067:
        return "RLI";
    case 0x2068:
        return "FSI";
    case 0x2069:
        return "PDI";
    case 0xfeff:
        return "ZWNBSP";
    default:
        break;
    }
    if (cp < 0x20 && cp != '\n' && cp != '\t')
        return "control";
    if (cp == 0x7f || (cp >= 0x80 && cp < 0xa0))
        return "control";
    return NULL;
}

/* The code point at s (n bytes left) and its length in *len; an invalid
 * sequence is one byte of U+FFFD. */
static uint32_t
utf8_next(const unsigned char *s, size_t n, size_t *len)
{
    uint32_t cp;
    size_t want;

    if (s[0] < 0x80) {
        *len = 1;
        return s[0];
    }
    if ((s[0] & 0xe0) == 0xc0) {
        cp = s[0] & 0x1f;
        want = 2;
    } else if ((s[0] & 0xf0) == 0xe0) {
        cp = s[0] & 0x0f;
        want = 3;
    } else if ((s[0] & 0xf8) == 0xf0) {
        cp = s[0] & 0x07;
        want = 4;
    } else {
        *len = 1;
        return 0xfffd;
    }
    if (want > n) {
        *len = 1;
        return 0xfffd;
    }
    for (size_t i = 1; i < want; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            *len = 1;
            return 0xfffd;
        }
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    *len = want;
    return cp;
}

/* One text field as a person reads it: its name, its length in
 * characters and bytes, and its text with line breaks kept and each
 * hidden character (hidden_name) shown as a mark where it is. A leading
 * line break is marked too: a reader would not see an empty first line. */
static void
put_readable(struct rl_buf *b, const char *name, const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text), chars = 0, len;

    for (size_t i = 0; i < n; i += len, chars++)
        (void)utf8_next(s + i, n - i, &len);
    rl_buf_puts(b, "<div class=\"field\"><h3 class=\"field-name\">");
    html_esc(b, name);
    rl_buf_printf(b,
                  "</h3><p class=\"field-length\">%zu characters, %zu "
                  "bytes</p>",
                  chars, n);
    /* The HTML parser drops one line break right after <pre>: this one,
     * so that the text's own first line break is kept. */
    rl_buf_puts(b, "<pre class=\"readable\">\n");
    for (size_t i = 0; i < n; i += len) {
        uint32_t cp = utf8_next(s + i, n - i, &len);
        const char *hidden = hidden_name(cp);

        if (i == 0 && cp == '\n')
            rl_buf_puts(b, "<span class=\"hidden-char\" title=\"line break "
                           "at the start\">[LF]</span>");
        if (hidden)
            rl_buf_printf(b,
                          "<span class=\"hidden-char\" title=\"%s\">"
                          "[U+%04X %s]</span>",
                          hidden, (unsigned)cp, hidden);
        else
            html_esc_n(b, text + i, len);
    }
    rl_buf_puts(b, "</pre></div>");
}

/* Each string of the content, depth first, named by its path
 * ("content", "content.text", "content.items[0]"). */
static void
put_readable_fields(struct rl_buf *b, const cJSON *v, const char *path,
                    int depth)
{
    const cJSON *child;
    char sub[256];
    int i = 0;

    if (cJSON_IsString(v)) {
        put_readable(b, path, v->valuestring);
        return;
    }
    if (depth > 16)
        return;
    cJSON_ArrayForEach(child, v)
    {
        if (cJSON_IsArray(v))
            snprintf(sub, sizeof(sub), "%s[%d]", path, i++);
        else
            snprintf(sub, sizeof(sub), "%s.%s", path, child->string);
        put_readable_fields(b, child, sub, depth + 1);
    }
}

void
console_put_decision(struct rl_buf *b, const cJSON *decision)
{
    rl_buf_puts(b, "<p id=\"decision\">Decided: ");
    html_member(b, decision, "decision");
    rl_buf_puts(b, " by ");
    html_member(b, decision, "actor");
    rl_buf_puts(b, " at ");
    html_member(b, decision, "decided_at");
    if (json_str(decision, "reason")) {
        rl_buf_puts(b, " (");
        html_member(b, decision, "reason");
        rl_buf_puts(b, ")");
    }
    rl_buf_puts(b, ", digest <code>");
    html_member(b, decision, "digest");
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
        return console_ledger_failed(r, errstr);
    run = cJSON_Parse(json);
    free(json);
    proposal = json_str(run, "proposal");
    if (!proposal) {
        cJSON_Delete(run);
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "this run has no proposal to approve");
    }
    if (shown_from(proposal, &shown, errstr, sizeof(errstr)) != 0) {
        cJSON_Delete(run);
        return console_ledger_failed(r, errstr);
    }
    stored = json_str(run, "proposal_digest");
    run_status = json_str(run, "status");
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
    html_member(&b, run, "job");
    rl_buf_puts(&b, "</dd><dt>Tenant</dt><dd>");
    html_member(&b, run, "tenant");
    rl_buf_puts(&b, "</dd><dt>Status</dt><dd id=\"status\">");
    html_esc(&b, run_status);
    rl_buf_puts(&b, "</dd></dl><h2>Destinations</h2><ul id=\"destinations\">");
    cJSON_ArrayForEach(
        dest, cJSON_GetObjectItemCaseSensitive(shown.parsed, "destination"))
    {
        rl_buf_puts(&b, "<li>");
        html_member(&b, dest, "channel");
        rl_buf_puts(&b, "</li>");
    }
    rl_buf_puts(&b, "</ul><h2>Operation</h2><p id=\"operation\">");
    html_member(&b, shown.parsed, "operation");
    rl_buf_puts(&b, "</p><h2>Content that will be sent</h2>"
                    "<p>Each text as it reads, line breaks kept; invisible "
                    "and direction-changing characters are marked "
                    "<span class=\"hidden-char\">[U+XXXX]</span> where "
                    "they are.</p><div id=\"readable\">");
    put_readable_fields(
        &b, cJSON_GetObjectItemCaseSensitive(shown.parsed, "content"),
        "content", 0);
    rl_buf_puts(&b, "</div><h3>Exactly as sent</h3><pre id=\"content\">");
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
        console_put_decision(&b, decision);
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
    if (reason)
        console_cut_utf8(reason, CONSOLE_REASON_MAX);
    /* A run of a tenant the user may not read does not exist for it. */
    err = console_run_visible(r, run_id, errstr, sizeof(errstr));
    if (err == RL_ERR_NOTFOUND) {
        free(digest);
        free(decision);
        free(reason);
        return console_send_message(r, MHD_HTTP_NOT_FOUND, "Not found", 0,
                                    "no such run");
    }
    if (err == 0)
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
        return console_ledger_failed(r, errstr);
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
