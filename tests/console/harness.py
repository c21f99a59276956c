"""What the console tests share: a private ledger schema, the runledger
binary (the CLI and `runledger console` as a process), an HTTP client
that never follows redirects, sign-in, and runs waiting for approval.

Every test runs against the real PostgreSQL of DATABASE_URL in a schema of
its own. Without DATABASE_URL a test skips (exit 77), unless
RL_REQUIRE_SERVICES=1, when it fails."""

import fcntl
import http.client
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.parse

SKIP = 77
BIN = os.environ.get("RUNLEDGER_BIN", "")
PROPOSAL_BIN = os.environ.get("CONSOLE_PROPOSAL_BIN", "")

HEADERS = {
    "content-security-policy":
        "default-src 'none'; style-src 'self'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
}


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)
    print("ok: " + what, flush=True)


def require_service(name, value):
    if value:
        return
    if os.environ.get("RL_REQUIRE_SERVICES") == "1":
        print("FAIL: %s is not set and RL_REQUIRE_SERVICES=1" % name)
        sys.exit(1)
    print("skip: %s is not set" % name)
    sys.exit(SKIP)


def wait_for(cond, what, timeout=30.0):
    """Awaits cond() (truthy) for at most timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise Failed("timed out waiting for " + what)
        time.sleep(0.05)


# The C tests' rltest_free_port, the same range and lock files: a port
# drawn from the ephemeral range and released (bind to 0, close) can be
# handed to another process's bind to port 0 before the server the test
# starts binds it. These lie below that range, and a lock per port, held
# until this process exits, keeps tests running at once apart.
_PORT_LOW, _PORT_HIGH = 30000, 32700
_port_locks = []


def free_port():
    d = os.path.join(os.environ.get("TMPDIR") or "/tmp", "rl-test-ports")
    try:
        os.mkdir(d, 0o777)
        os.chmod(d, 0o1777)
    except OSError:
        pass
    span = _PORT_HIGH - _PORT_LOW
    first = os.getpid() * 7919 % span
    for i in range(span):
        port = _PORT_LOW + (first + i) % span
        lock = None
        try:
            lock = open(os.path.join(d, "%d.lock" % port), "a")
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        except OSError:
            lock = None  # no lock can be taken here: the bind alone decides
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            if lock:
                lock.close()
            continue
        finally:
            s.close()
        if lock:
            _port_locks.append(lock)
        return port
    raise Failed("no free port in %d..%d" % (_PORT_LOW, _PORT_HIGH))


class Ledger:
    """A private schema of the shared PostgreSQL, migrated by runledger."""

    def __init__(self, name):
        base = os.environ.get("DATABASE_URL", "")
        require_service("DATABASE_URL", base)
        if not BIN:
            raise Failed("RUNLEDGER_BIN is not set")
        self.base = base
        self.schema = ("console_%s_%d" % (name, os.getpid()))[:60]
        sep = "&" if "?" in base else "?"
        self.url = "%s%soptions=-csearch_path%%3D%s" % (base, sep,
                                                        self.schema)
        self.env = dict(os.environ, DATABASE_URL=self.url,
                        RUNLEDGER_HTTP_PORT="0")
        self.sql("DROP SCHEMA IF EXISTS %s CASCADE" % self.schema, base)
        out = subprocess.run([BIN, "migrate", "--schema", self.schema],
                             env=dict(os.environ, DATABASE_URL=base),
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise Failed("migrate failed: " + out.stderr)

    def role_url(self, component):
        """This ledger's URL as the login rl_test_<component>, a member of
        runledger_<component> only (created once per cluster; the
        harness's PostgreSQL trusts loopback), as a deployment grants a
        component its role (docs/deploying.md, Database roles)."""
        login = "rl_test_" + component
        # "worker_relay": `runledger consume` with its relay thread, a
        # member of both roles (tests/support/rltest_roles.h).
        roles = (("runledger_worker", "runledger_relay")
                 if component == "worker_relay"
                 else ("runledger_" + component,))
        self.sql("DO $l$ BEGIN CREATE ROLE %s LOGIN; EXCEPTION WHEN"
                 " duplicate_object OR unique_violation THEN NULL; END $l$"
                 % login, self.base)
        self.sql("GRANT %s TO %s" % (", ".join(roles), login), self.base)
        return "%s&user=%s" % (self.url, login)

    def component_env(self, component, env=None):
        """env (default self.env) for a component the test starts itself:
        with RL_TEST_DB_ROLES=1 its DATABASE_URL is the login of the
        component's role (role_url), as tests/e2e/e2e.c gives the
        processes it spawns; else unchanged."""
        env = dict(self.env if env is None else env)
        if os.environ.get("RL_TEST_DB_ROLES") == "1":
            env["DATABASE_URL"] = self.role_url(component)
        return env

    def drop(self):
        self.sql("DROP SCHEMA IF EXISTS %s CASCADE" % self.schema, self.base)

    def sql(self, statement, url=None, check_rc=True, timeout=60):
        """Runs one statement with psql; returns its output, unaligned."""
        out = subprocess.run(
            ["psql", "-XAtq", "-v", "ON_ERROR_STOP=1", url or self.url,
             "-c", statement],
            capture_output=True, text=True, timeout=timeout)
        if check_rc and out.returncode != 0:
            raise Failed("psql failed: %s: %s" % (statement, out.stderr))
        if not check_rc:
            return out
        return out.stdout.strip()

    def run(self, *args, check_rc=True, env=None):
        out = subprocess.run([BIN] + list(args), env=env or self.env,
                             capture_output=True, text=True, timeout=60)
        if check_rc and out.returncode != 0:
            raise Failed("runledger %s failed (%d): %s" %
                         (" ".join(args), out.returncode, out.stderr))
        return out

    def add_user(self, name, role):
        out = self.run("users", "add", name, "--role", role)
        return out.stdout.strip().splitlines()[-1]

    def waiting_run(self, tenant, job, content, channels=("slack",)):
        """Stores a run awaiting approval whose model output was content
        (a JSON string), with the proposal the worker would store
        (rl_approval_proposal through console_proposal). Returns (run_id,
        digest, canonical)."""
        import json
        request = json.dumps({"model": "m", "messages": [
            {"role": "user", "content": "hi"}],
            "approval": {"required": True},
            "notify": list(channels)})
        output = json.dumps(content)
        out = subprocess.run([PROPOSAL_BIN, request, output],
                             capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise Failed("console_proposal failed: " + out.stderr)
        digest, canonical = out.stdout.split("\n", 1)
        canonical = canonical.rstrip("\n")
        run_id = secrets.token_hex(32)
        fingerprint = secrets.token_hex(32)
        self.sql(
            "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
            " fingerprint, request, status, proposal, proposal_digest,"
            " attempts) VALUES (%s, %s, %s, now(), 'v1', %s, %s::jsonb,"
            " 'awaiting_approval', %s::jsonb, %s, 1)" %
            (lit(run_id), lit(job), lit(tenant), lit(fingerprint),
             lit(request), lit(canonical), lit(digest)))
        return run_id, digest, canonical


def lit(s):
    return "'" + s.replace("'", "''") + "'"


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name):
        return self.headers.get(name.lower())


class Console:
    """`runledger console` as a process on a free port."""

    def __init__(self, ledger, *extra, env=None, port=None):
        self.ledger = ledger
        self.port = port or free_port()
        self.origin = "http://127.0.0.1:%d" % self.port
        self.log = open("console-%d.log" % self.port, "w+")
        # The console with only its role's privileges under the roles.
        base = ledger.component_env("console")
        self.proc = subprocess.Popen(
            [BIN, "console", "--listen", "127.0.0.1:%d" % self.port] +
            list(extra), env=dict(base, **(env or {})), stdout=self.log,
            stderr=subprocess.STDOUT)
        wait_for(self.healthy, "the console to answer /healthz")

    def healthy(self):
        if self.proc.poll() is not None:
            raise Failed("the console exited with %d" % self.proc.returncode)
        try:
            return self.request("GET", "/healthz").status == 200
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.seek(0)
        return self.log.read()

    def request(self, method, path, cookie=None, form=None, origin=True,
                headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                          timeout=30)
        h = dict(headers or {})
        body = None
        if cookie:
            h["Cookie"] = "rl_session=" + cookie
        if form is not None:
            body = urllib.parse.urlencode(form)
            h["Content-Type"] = "application/x-www-form-urlencoded"
        if origin is True and method == "POST":
            h["Origin"] = self.origin
        elif isinstance(origin, str):
            h["Origin"] = origin
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        data = resp.read().decode("utf-8", "replace")
        hdrs = {}
        for k, v in resp.getheaders():
            hdrs.setdefault(k.lower(), v)
        conn.close()
        return Response(resp.status, hdrs, data)

    def sign_in(self, token):
        r = self.request("POST", "/signin", form={"token": token})
        if r.status != 303:
            raise Failed("sign-in answered %d: %s" % (r.status, r.body))
        m = re.match(r"rl_session=([0-9a-f]{64});", r.header("set-cookie"))
        if not m:
            raise Failed("no session cookie: %r" % r.header("set-cookie"))
        return m.group(1)


def csrf_of(page):
    m = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    return m.group(1) if m else None


def element(page, tag, ident):
    """The inner HTML of the element <tag id="ident" ...>."""
    m = re.search(r'<%s id="%s"[^>]*>(.*?)</%s>' % (tag, ident, tag), page,
                  re.S)
    return m.group(1) if m else None


def unescape(text):
    import html
    return html.unescape(text)


def main(test, name):
    """Runs test(ledger) in a private schema; exit status for CTest."""
    ledger = None
    try:
        ledger = Ledger(name)
        test(ledger)
    except Failed as e:
        print("FAIL: %s" % e, flush=True)
        return 1
    finally:
        if ledger is not None and os.environ.get("RL_KEEP_SCHEMA") != "1":
            try:
                ledger.drop()
            except Exception:
                pass
    print("PASS", flush=True)
    return 0
