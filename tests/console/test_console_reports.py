"""Invariant: the costs page draws tokens a day per tenant as a server-side
SVG chart (no script, no inline style: the CSP allows neither) with extra
generations marked and each bar's cost at the model's price, beside the
cost per model (live and batch), the prices, the cost report and the
budgets, and the limits
page lists tenant and model limits; both read only, with tenant names
escaped."""

import re
import secrets
import sys

import harness
from harness import check, lit

TENANT = 'acme<img src=x onerror=alert(1)>'


def test(ledger):
    token = ledger.add_user("vic", "viewer")
    run_id = secrets.token_hex(32)
    ledger.sql(
        "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
        " fingerprint, request, status, output, completed_at, attempts)"
        " VALUES (%s, 'digest', %s, now(), 'v1', %s,"
        " '{\"request\": {\"model\": \"m-priced\"}}'::jsonb,"
        " 'completed', '\"ok\"'::jsonb, now(), 2)"
        % (lit(run_id), lit(TENANT), lit(secrets.token_hex(32))))
    for no, outcome, tokens in ((1, "ambiguous", 300), (2, "ok", 700)):
        ledger.sql(
            "INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker,"
            " idempotency_key, outcome, prompt_tokens, completion_tokens,"
            " finished_at) VALUES (%s, %d, 1, 'w', %s, '%s', %d, 0, now())"
            % (lit(run_id), no, lit("%s:%d" % (run_id, no)), outcome, tokens))
    ledger.run("budgets", "set", "--tenant", TENANT, "--tokens", "50000")
    # 1,000 prompt tokens at 1.5 per million: 0.0015.
    ledger.run("prices", "set", "--model", "m-priced", "--input", "1.5",
               "--output", "8")
    ledger.run("limits", "set", "--tenant", TENANT, "--concurrency", "3")
    console = harness.Console(ledger)
    try:
        cookie = console.sign_in(token)
        r = console.request("GET", "/costs", cookie=cookie)
        check(r.status == 200 and r.header("cache-control") == "no-store",
              "the costs page answers 200, no-store")
        svg = re.search(r'<svg id="cost-chart".*?</svg>', r.body, re.S)
        check(svg is not None, "the page holds the inline SVG chart")
        svg = svg.group(0)
        check("<script" not in svg and "style=" not in svg,
              "the chart has no script and no inline style")
        check(re.search(r'<rect class="bar"[^>]*><title>acme&lt;img src=x '
                        r'onerror=alert\(1\)&gt; [0-9-]+: 1000 tokens, '
                        r'cost 0\.001500</title>',
                        svg) is not None,
              "today's bar carries the tenant's 1000 tokens and their "
              "cost, escaped")
        check('id="cost-by-model"' in r.body and "m-priced" in r.body and
              "0.001500" in r.body, "the cost per model is listed")
        check('id="prices"' in r.body and "1.5" in r.body,
              "the prices are listed")
        check('<circle class="extra"' in svg and
              "1 extra generations" in svg,
              "the extra generation is marked")
        check("<img" not in r.body, "no markup from the ledger in the page")
        check('id="report"' in r.body and 'id="budgets"' in r.body and
              "50000" in r.body, "the report and the budget are listed")
        r = console.request("GET", "/limits", cookie=cookie)
        check(r.status == 200 and 'id="limits"' in r.body and
              "acme&lt;img" in r.body and "<img" not in r.body,
              "the limits page lists the tenant's limit, escaped")
        r = console.request("POST", "/limits", cookie=cookie, form={})
        check(r.status == 403, "a POST to the limits page is refused")
        run = console.request("GET", "/runs/" + run_id, cookie=cookie)
        check(run.status == 200 and "<th>Cost</th>" in run.body and
              "<td>0.000450</td>" in run.body and
              "<td>0.001050</td>" in run.body,
              "the run page gives each attempt's cost at the model's price")
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "reports"))
