"""Invariant: in a real browser, the approval page shows each text of the
content as a person reads it exactly: line breaks kept, a leading line
break shown, and every invisible or direction-changing character (U+202E,
CR of a CRLF, zero-width characters) marked visibly where it is, never
rendered raw; with the text's length in characters and bytes, and the
canonical JSON and its digest below. A reason cut to the ledger's 500
bytes never splits a UTF-8 character: 499 x "a" + "é" approves with the
499 "a"s kept."""

import os
import sys

import harness
from harness import check, wait_for
from webdriver import Browser, find_browser

ARTIFACTS = os.path.join(os.getcwd(), "artifacts")

CASES = [
    # (content, the readable text's textContent, characters, bytes)
    ("\u202eabc", "[U+202E RLO]abc", 4, 6),
    ("\nX", "[LF]\nX", 2, 2),
    ("a\r\nb", "a[U+000D CR]\nb", 4, 4),
    ("zero\u200bwidth", "zero[U+200B ZWSP]width", 10, 12),
]


def readable(browser):
    return browser.script(
        "return Array.from(document.querySelectorAll("
        "'#readable pre.readable')).map(e => e.textContent)")


def test(ledger):
    paths = find_browser()
    harness.require_service("chromium and chromedriver", paths is not None)
    runs = [ledger.waiting_run("acme", "exact%d" % i, content)
            for i, (content, _, _, _) in enumerate(CASES)]
    token = ledger.add_user("ada", "approver")
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "ada")
    console = harness.Console(ledger)
    browser = None
    try:
        browser = Browser(paths[0], paths[1], harness.free_port(),
                          "chromedriver-exact.log")
        browser.go(console.origin + "/signin")
        browser.type(browser.one("#token"), token)
        browser.click(browser.one("#signin"))
        wait_for(lambda: browser.url() == console.origin + "/approvals",
                 "the queue after sign-in", 15)
        for i, (content, want, chars, nbytes) in enumerate(CASES):
            run_id, digest, canonical = runs[i]
            browser.go(console.origin + "/approvals/" + run_id)
            texts = readable(browser)
            check(texts == [want], "case %d: the text reads %r (shown %r)"
                  % (i, want, texts))
            raw = browser.script(
                "return document.getElementById('readable').textContent")
            hidden = [c for c in raw if c in "\u202e\u200b\r"]
            check(hidden == [], "case %d: no hidden character is rendered "
                  "raw (%r)" % (i, hidden))
            lengths = browser.script(
                "return Array.from(document.querySelectorAll("
                "'#readable .field-length')).map(e => e.textContent)")
            check(lengths == ["%d characters, %d bytes" % (chars, nbytes)],
                  "case %d: its length is shown (%r)" % (i, lengths))
            if "\n" in content:
                lines = browser.text(browser.one("#readable pre.readable"))
                check("\n" in lines, "case %d: the line break is rendered"
                      % i)
            check(browser.text(browser.one("#digest")) == digest,
                  "case %d: the digest stays below" % i)
            check(browser.script(
                "return document.getElementById('canonical').textContent")
                == canonical, "case %d: the canonical JSON stays below" % i)
            browser.screenshot(os.path.join(ARTIFACTS, "exact-%d.png" % i))

        run_id = runs[1][0]
        browser.go(console.origin + "/approvals/" + run_id)
        browser.type(browser.one("#reason"), "a" * 499 + "\u00e9")
        browser.click(browser.one("#approve"))
        message = wait_for(lambda: browser.find("#message"),
                           "the outcome of the approval", 15)[0]
        check(browser.attr(message, "class") == "ok",
              "a 501-byte reason approves: " + browser.text(message))
        check(ledger.sql("SELECT reason FROM approvals WHERE run_id = '%s'"
                         % run_id) == "a" * 499,
              "the reason is cut before the 2-byte character, not inside it")
    finally:
        if browser:
            browser.quit()
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "exact"))
