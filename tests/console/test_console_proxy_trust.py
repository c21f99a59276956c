"""Invariant: proxy trust cannot be spoofed. A request that names its
user on more than one header line is refused (400), whichever line a
proxy checked; a --trusted-proxy network wider than a /8 (IPv4) or /32
(IPv6) is refused at start (exit 2) unless --force; the client address
is read from the right of X-Forwarded-For across all its header lines
(HAProxy adds a line of its own), so an entry the client wrote never
becomes the audited address."""

import socket
import subprocess
import sys

import harness
from harness import BIN, check, csrf_of


def raw(console, method, path, lines, body=""):
    """One request with header lines exactly as given (repeats kept)."""
    head = ["%s %s HTTP/1.1" % (method, path),
            "Host: 127.0.0.1:%d" % console.port, "Connection: close"]
    head += ["%s: %s" % kv for kv in lines]
    if body:
        head += ["Content-Type: application/x-www-form-urlencoded",
                 "Content-Length: %d" % len(body)]
    data = ("\r\n".join(head) + "\r\n\r\n" + body).encode()
    with socket.create_connection(("127.0.0.1", console.port), 30) as s:
        s.sendall(data)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    reply = b"".join(chunks).decode("utf-8", "replace")
    status = int(reply.split(" ", 2)[1])
    return status, reply


def start_fails(ledger, *args, env=None):
    out = subprocess.run([BIN, "console", "--listen",
                          "127.0.0.1:%d" % harness.free_port()] + list(args),
                         env=dict(ledger.env, **(env or {})),
                         capture_output=True, text=True, timeout=30)
    return out.returncode, out.stderr


def test(ledger):
    ledger.add_user("ivy", "operator")
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "ivy")
    run_id, digest, _ = ledger.waiting_run("acme", "j", "proxied")
    hdr = "X-Forwarded-User"

    for wide in ("0.0.0.0/0", "10.0.0.0/7", "::/0", "2001:db8::/31"):
        rc, err = start_fails(ledger, "--trusted-user-header", hdr,
                              "--trusted-proxy", "127.0.0.0/8," + wide)
        check(rc == 2 and "--force" in err,
              "--trusted-proxy %s is refused at start without --force (%d)"
              % (wide, rc))
    forced = harness.Console(ledger, "--trusted-user-header", hdr,
                             "--trusted-proxy", "0.0.0.0/0", "--force")
    check(forced.healthy(), "with --force a /0 is accepted")
    forced.stop()
    # The settings the chart passes are held to the same rule.
    rc, err = start_fails(ledger, env={
        "RUNLEDGER_CONSOLE_TRUSTED_USER_HEADER": hdr,
        "RUNLEDGER_CONSOLE_TRUSTED_PROXY": "0.0.0.0/0"})
    check(rc == 2 and "--force" in err,
          "RUNLEDGER_CONSOLE_TRUSTED_PROXY=0.0.0.0/0 is refused too (%d)" % rc)

    console = harness.Console(ledger, "--trusted-user-header", hdr,
                              "--trusted-proxy", "127.0.0.0/8")
    try:
        status, _ = raw(console, "GET", "/approvals", [(hdr, "ivy")])
        check(status == 200, "one user header line: ivy is in (%d)" % status)
        status, reply = raw(console, "GET", "/approvals",
                            [(hdr, "ivy"), (hdr, "mallory")])
        check(status == 400 and "more than once" in reply,
              "two user header lines are refused (%d)" % status)
        status, _ = raw(console, "GET", "/approvals",
                        [(hdr, "ivy"), (hdr.lower(), "ivy")])
        check(status == 400, "the same header in another case is a repeat "
              "too (%d)" % status)

        status, page = raw(console, "GET", "/approvals/" + run_id,
                           [(hdr, "ivy")])
        cookie = page.split("rl_session=", 1)[1].split(";", 1)[0]
        csrf = csrf_of(page)
        body = "csrf=%s&digest=%s&decision=approve" % (csrf, digest)
        status, reply = raw(
            console, "POST", "/approvals/" + run_id,
            [(hdr, "ivy"), ("Cookie", "rl_session=" + cookie),
             ("Origin", console.origin),
             ("X-Forwarded-For", "203.0.113.9"),
             ("X-Forwarded-For", "6.6.6.6, 192.0.2.44")], body)
        check(status == 200, "the decision through the proxy (%d)" % status)
        address = ledger.sql("SELECT address FROM audit")
        check(address == "192.0.2.44",
              "the audited address is the rightmost entry of the last "
              "X-Forwarded-For line (%s)" % address)
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "trust"))
