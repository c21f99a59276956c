"""Invariant: every response of the console carries the strict headers
(CSP without inline script or style, nosniff, same-origin referrer, frame
denial; no-store on pages with run content), and every ledger value is
shown as text: a model output holding <script> and "><img onerror> and a
job name holding markup come out escaped, never as elements."""

import re
import sys

import harness
from harness import HEADERS, check, element, unescape

EVIL = ('<script>alert(1)</script>"><img src=x onerror=alert(2)>'
        "\n  indented line kept\n")
EVIL_JOB = 'job"><svg onload=alert(3)>'


def check_headers(r, what, store=True):
    for name, value in HEADERS.items():
        check(r.header(name) == value, "%s: %s" % (what, name))
    if store:
        check(r.header("cache-control") == "no-store",
              "%s: Cache-Control no-store" % what)


def test(ledger):
    token = ledger.add_user("erin", "approver")
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "erin")
    run_id, digest, _ = ledger.waiting_run("acme", EVIL_JOB, EVIL)
    console = harness.Console(ledger)
    try:
        check_headers(console.request("GET", "/healthz"), "/healthz")
        css = console.request("GET", "/static/console.css")
        check(css.status == 200 and css.header("content-type") == "text/css",
              "the stylesheet is served as text/css")
        check_headers(css, "/static/console.css", store=False)
        check_headers(console.request("GET", "/signin"), "GET /signin")
        check_headers(console.request("GET", "/approvals"),
                      "303 to /signin")
        check_headers(console.request("POST", "/signin",
                                      form={"token": "x.y"}), "401 sign-in")
        cookie = console.sign_in(token)
        for path in ("/approvals", "/approvals/" + run_id, "/runs",
                     "/runs/" + run_id, "/runs/" + "0" * 64, "/nowhere"):
            r = console.request("GET", path, cookie=cookie)
            check_headers(r, "GET %s (%d)" % (path, r.status))
        r = console.request("POST", "/approvals/" + run_id, cookie=cookie,
                            form={"decision": "approve"})
        check_headers(r, "POST refused (%d)" % r.status)

        page = console.request("GET", "/approvals/" + run_id,
                               cookie=cookie).body
        check("<script>" not in page and "<img" not in page and
              "<svg" not in page, "no markup from the ledger in the page")
        check("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img"
              in page, "the output's markup is shown escaped")
        check("job&quot;&gt;&lt;svg onload=alert(3)&gt;" in page,
              "the job name is shown escaped")
        content = element(page, "pre", "content")
        check(content is not None and unescape(content) == EVIL,
              "#content is the output exactly, whitespace kept")
        check(element(page, "code", "digest") == digest,
              "#digest is the proposal's digest")
        queue = console.request("GET", "/approvals", cookie=cookie).body
        check("<svg" not in queue and "&lt;svg onload" in queue,
              "the queue shows the job name escaped")
        run_page = console.request("GET", "/runs/" + run_id,
                                   cookie=cookie).body
        # The run page's one SVG element is its own timeline axis.
        check(re.findall(r"<svg[^>]*>", run_page) ==
              re.findall(r'<svg id="timeline-axis"[^>]*>', run_page) and
              run_page.count("<svg") == 1 and
              "&lt;svg onload" in run_page and "onload" not in
              re.sub(r"&lt;svg onload", "", run_page),
              "the run page shows the job name escaped")
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "headers"))
