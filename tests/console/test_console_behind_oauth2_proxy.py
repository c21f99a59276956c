"""Invariant: behind the real oauth2-proxy, run with the configuration
docs/console.md shows (read from it), the console answers only users
signed in at the proxy: without a sign-in the proxy's sign-in page comes
back and the console is not reached; a user signed in at the proxy who is
an approver in `runledger users` approves a run, and the decision's actor
in the audit is the name the proxy passed, never a form field or a header
the client sent; a name the proxy passes that `runledger users` does not
know is refused; X-Forwarded-User sent to the console directly, from an
address outside --trusted-proxy, is not honoured.

The proxy's users come from its htpasswd file; the OIDC provider of the
documented configuration is a discovery document on loopback (oauth2-proxy
reads it at start) that no sign-in uses. The client connects from
127.0.0.2, the proxy from 127.0.0.1 (the documented --trusted-proxy), so
the audit's address shows which one the console took."""

import base64
import hashlib
import http.client
import http.server
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse

import harness
from harness import Failed, check, csrf_of, element, wait_for

SOURCE = os.environ.get("RL_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
CLIENT = "127.0.0.2"
PASSWORD = "correct horse battery staple"


def oauth2_proxy_bin():
    out = subprocess.run(
        ["bash", os.path.join(SOURCE, "tests/harness/oauth2_proxy.sh"),
         "path"], capture_output=True, text=True, timeout=30)
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.strip()
    sys.stdout.write(out.stderr)
    if os.environ.get("RL_REQUIRE_SERVICES") == "1":
        raise Failed("no oauth2-proxy binary and RL_REQUIRE_SERVICES=1")
    print("skip: no oauth2-proxy binary", flush=True)
    sys.exit(harness.SKIP)


def documented_commands():
    """The oauth2-proxy and `runledger console` command lines of
    docs/console.md's oauth2-proxy example, each as an argument list."""
    with open(os.path.join(SOURCE, "docs/console.md")) as fp:
        text = fp.read()
    m = re.search(r"\n((?:    .*\n)*    oauth2-proxy [^\n]*\n(?:    .*\n)*)",
                  text)
    if not m:
        raise Failed("docs/console.md has no indented oauth2-proxy example")
    joined = re.sub(r"\\\n\s*", " ", m.group(1))
    commands = {}
    for line in joined.splitlines():
        argv = shlex.split(line)
        if argv[:1] == ["oauth2-proxy"]:
            commands["proxy"] = argv[1:]
        elif argv[:2] == ["runledger", "console"]:
            commands["console"] = argv[2:]
    if set(commands) != {"proxy", "console"}:
        raise Failed("the example names no oauth2-proxy or no runledger"
                     " console command: %r" % joined)
    return commands["proxy"], commands["console"]


def flag_value(args, name):
    """The value of --name=V or --name V in args, or None."""
    for i, a in enumerate(args):
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return None


def with_flags(args, values):
    """args with the value of each flag in values replaced (both the
    --flag=V and the --flag V forms); a flag args lacks is an error."""
    out, seen, i = [], set(), 0
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0]
        if name in values:
            seen.add(name)
            out.append("%s=%s" % (name, values[name]) if "=" in a
                       else name)
            if "=" not in a:
                out.append(values[name])
                i += 1
        else:
            out.append(a)
        i += 1
    missing = set(values) - seen
    if missing:
        raise Failed("the documented command lacks %s" % sorted(missing))
    return out


class Issuer:
    """The OIDC provider's discovery document, which oauth2-proxy reads
    when it starts; no sign-in goes to it."""

    def __init__(self):
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                base = issuer.url
                doc = {"issuer": base,
                       "authorization_endpoint": base + "/auth",
                       "token_endpoint": base + "/token",
                       "jwks_uri": base + "/jwks",
                       "userinfo_endpoint": base + "/userinfo",
                       "response_types_supported": ["code"],
                       "subject_types_supported": ["public"],
                       "id_token_signing_alg_values_supported": ["RS256"]}
                if self.path != "/.well-known/openid-configuration":
                    doc = {"keys": []}
                body = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def htpasswd_line(name, password):
    """A bcrypt entry, as `htpasswd -B` writes; {SHA} where Python has no
    crypt module (3.13 dropped it). oauth2-proxy takes both."""
    try:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt
        hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))
        if hashed and hashed.startswith("$2"):
            return "%s:%s\n" % (name, hashed)
    except ImportError:
        pass
    sha = base64.b64encode(hashlib.sha1(password.encode()).digest())
    return "%s:{SHA}%s\n" % (name, sha.decode())


class Client:
    """A browser's cookie jar and requests, from CLIENT's address."""

    def __init__(self, port):
        self.port = port
        self.origin = "http://127.0.0.1:%d" % port
        self.cookies = {}

    def request(self, method, path, form=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30,
                                          source_address=(CLIENT, 0))
        h = dict(headers or {})
        if self.cookies:
            h["Cookie"] = "; ".join("%s=%s" % kv
                                    for kv in self.cookies.items())
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            h["Content-Type"] = "application/x-www-form-urlencoded"
        if method == "POST":
            h.setdefault("Origin", self.origin)
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        data = resp.read().decode("utf-8", "replace")
        hdrs = {}
        for k, v in resp.getheaders():
            if k.lower() == "set-cookie":
                name, value = v.split(";", 1)[0].split("=", 1)
                self.cookies[name.strip()] = value
            hdrs.setdefault(k.lower(), v)
        conn.close()
        return harness.Response(resp.status, hdrs, data)

    def sign_in_at_proxy(self, name, password, rd="/"):
        r = self.request("POST", "/oauth2/sign_in",
                         form={"username": name, "password": password,
                               "rd": rd})
        check(r.status == 302 and "_oauth2_proxy" in self.cookies,
              "%s signs in at oauth2-proxy with its htpasswd entry (%d)"
              % (name, r.status))
        return r


def test(ledger):
    binary = oauth2_proxy_bin()
    proxy_doc, console_doc = documented_commands()
    # What the invariant rests on is in the example itself, not only in
    # oauth2-proxy's defaults.
    check(flag_value(proxy_doc, "--skip-auth-strip-headers") == "true"
          and flag_value(proxy_doc, "--pass-user-headers") == "true",
          "the example strips the client's user headers and passes its own")
    header = flag_value(console_doc, "--trusted-user-header")
    check(header == "X-Forwarded-User" and
          flag_value(console_doc, "--trusted-proxy") == "127.0.0.1/32",
          "the example's console trusts X-Forwarded-User from 127.0.0.1")

    ledger.add_user("alice", "approver")
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "alice")
    content = "Deploy window moved to 14:00 UTC.\n  (kept as is)"
    run_id, digest, _ = ledger.waiting_run("acme", "ops-digest", content)

    def waiting():
        return (ledger.sql("SELECT status FROM runs WHERE run_id = '%s'"
                           % run_id) == "awaiting_approval" and
                ledger.sql("SELECT count(*) FROM approvals") == "0" and
                ledger.sql("SELECT count(*) FROM audit"
                           " WHERE via = 'console'") == "0")

    work = tempfile.mkdtemp(prefix="rl-oauth2-proxy-")
    files = {}
    for name, data in (
            ("client-secret", "not-used-by-htpasswd-sign-ins"),
            ("cookie-secret",
             base64.urlsafe_b64encode(os.urandom(32)).decode()),
            ("htpasswd", htpasswd_line("alice", PASSWORD) +
             htpasswd_line("mallory", PASSWORD))):
        path = os.path.join(work, name)
        with open(path, "w") as fp:
            fp.write(data)
        files[name] = path

    proxy_port = harness.free_port()
    console_port = harness.free_port()
    public = "http://127.0.0.1:%d" % proxy_port
    issuer = Issuer()
    console = proxy = proxy_log = None
    try:
        # The documented console flags, with this test's public URL (the
        # proxy's address); harness.Console gives the listen address.
        extra = with_flags(console_doc, {"--listen": "-",
                                         "--base-url": public})
        for i, a in enumerate(extra):
            if a.split("=", 1)[0] == "--listen":
                del extra[i:i + (1 if "=" in a else 2)]
                break
        console = harness.Console(ledger, *extra, port=console_port)

        args = []
        for a in with_flags(proxy_doc, {
                "--http-address": "127.0.0.1:%d" % proxy_port,
                "--upstream": "http://127.0.0.1:%d/" % console_port,
                "--oidc-issuer-url": issuer.url}):
            name, _, value = a.partition("=")
            if value.startswith("/etc/oauth2-proxy/"):
                base = os.path.basename(value)
                if base not in files:
                    raise Failed("the example names %s, which this test"
                                 " does not write" % value)
                a = "%s=%s" % (name, files[base])
            args.append(a)
        proxy_log = open("oauth2-proxy-%d.log" % proxy_port, "w+")
        proxy = subprocess.Popen([binary] + args, stdout=proxy_log,
                                 stderr=subprocess.STDOUT)
        client = Client(proxy_port)

        def proxy_up():
            if proxy.poll() is not None:
                proxy_log.seek(0)
                raise Failed("oauth2-proxy exited with %d: %s"
                             % (proxy.returncode, proxy_log.read()))
            try:
                return client.request("GET", "/ping").status == 200
            except OSError:
                return False
        wait_for(proxy_up, "oauth2-proxy to answer /ping")

        # 1. No sign-in: the proxy's sign-in page, never the console.
        page = "/approvals/" + run_id
        r = client.request("GET", page)
        check(r.status == 403 and 'action="/oauth2/sign_in"' in r.body and
              'name="password"' in r.body,
              "without a sign-in the proxy answers with its sign-in page"
              " (%d)" % r.status)
        # Every console response carries its Content-Security-Policy.
        check(r.header("content-security-policy") is None and
              "rl_session" not in client.cookies and
              'id="digest"' not in r.body,
              "the console did not answer: not its headers, no console"
              " session, no run")
        r = client.request("POST", page, headers={header: "alice"},
                           form={"digest": digest, "decision": "approve"})
        check(r.status == 403 and "rl_session" not in client.cookies,
              "a POST with the user header but no sign-in stops at the"
              " proxy")
        check(waiting(), "nothing was decided")

        # 2. A name the proxy passes that `runledger users` does not know,
        # even with the client's own X-Forwarded-User claiming alice (the
        # proxy replaces it with its user's name).
        client.sign_in_at_proxy("mallory", PASSWORD, rd=page)
        r = client.request("GET", page, headers={header: "alice"})
        check(r.status == 403 and "signed in at the proxy as mallory, who is"
              " no console user" in r.body and 'id="digest"' not in r.body,
              "the console refuses mallory, whom the proxy passed and no"
              " console user is (%d)" % r.status)
        log = ""

        def logged():
            nonlocal log
            console.log.flush()
            with open(console.log.name) as fp:
                log = fp.read()
            return "the proxy named mallory, who is no console user" in log
        wait_for(logged, "the console to log the refused name", timeout=10)
        check("the proxy named alice" not in log and
              "the proxy named mallory" in log,
              "the console saw the proxy's name (mallory), not the client's"
              " header (alice)")
        r = client.request("POST", page, headers={header: "alice"},
                           form={"digest": digest, "decision": "approve",
                                 "actor": "alice"})
        check(r.status == 403, "mallory's approval through the proxy is"
              " refused (%d)" % r.status)
        check(waiting(), "nothing was decided")

        # 3. The header straight to the console, from CLIENT's address
        # (outside --trusted-proxy): ignored.
        direct = Client(console_port)
        r = direct.request("GET", page, headers={
            header: "alice", "X-Forwarded-For": "127.0.0.1"})
        check(r.status == 403 and "open it through the proxy" in r.body,
              "X-Forwarded-User sent to the console directly signs nobody"
              " in (%d)" % r.status)
        r = direct.request("POST", page, headers={header: "alice"},
                           form={"digest": digest, "decision": "approve"})
        check(r.status == 403, "a direct POST with the header is refused"
              " (%d)" % r.status)
        check(waiting(), "nothing was decided")

        # 4. alice, an approver of acme, signed in at the proxy.
        client = Client(proxy_port)
        r = client.request("GET", "/approvals")
        check(r.status == 403 and 'action="/oauth2/sign_in"' in r.body,
              "a new browser meets the proxy's sign-in page")
        client.sign_in_at_proxy("alice", PASSWORD, rd="/approvals")
        r = client.request("GET", "/approvals", headers={header: "mallory"})
        check(r.status == 200 and run_id in r.body,
              "through the proxy alice sees the approvals queue")
        r = client.request("GET", page)
        shown = element(r.body, "code", "digest")
        check(r.status == 200 and shown == digest and
              'id="approve"' in r.body and "rl_session" in client.cookies,
              "alice's approval page shows the digest and an Approve button"
              " (%d)" % r.status)
        check(harness.unescape(element(r.body, "pre", "content") or "")
              == content, "the page shows the content that will be sent,"
              " whitespace kept")
        csrf = csrf_of(r.body)
        r = client.request("POST", page,
                           headers={header: "mallory",
                                    "X-Forwarded-For": "192.0.2.66"},
                           form={"digest": digest, "decision": "approve",
                                 "csrf": csrf, "actor": "mallory"})
        check(r.status == 200 and 'id="message" class="ok"' in r.body,
              "alice approves through the proxy (%d %s)" %
              (r.status, re.findall(r'id="message"[^<]*', r.body)))
        check(ledger.sql("SELECT actor || ':' || decision || ':' || digest"
                         " FROM approvals WHERE run_id = '%s'" % run_id)
              == "alice:approve:" + digest,
              "the decision's actor is alice, the name the proxy passed,"
              " not the form's actor nor the client's header")
        check(ledger.sql("SELECT actor || '|' || action || '|' || address"
                         " || '|' || digest || '|' || via FROM audit"
                         " WHERE via = 'console'")
              == "alice|approve|%s|%s|console" % (CLIENT, digest),
              "one audit row: alice, approve, the client's own address"
              " (the entry the proxy appended), the digest")
        check(ledger.sql("SELECT status FROM runs WHERE run_id = '%s'"
                         % run_id) == "completed",
              "the approved run is completed")
    finally:
        if proxy is not None and proxy.poll() is None:
            proxy.terminate()
            try:
                proxy.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proxy.kill()
                proxy.wait()
        if proxy_log is not None:
            proxy_log.close()
        if console is not None:
            console.stop()
        issuer.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(harness.main(test, "oauth2proxy"))
