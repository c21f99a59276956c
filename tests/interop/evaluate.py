#!/usr/bin/env python3
"""Helpers of tests/interop/run.sh: HTTP probes, the settle test, the summary.

Standard library only, so it runs with the system python3 and never inside
LiteLLM's venv. Commands:

  free-ports N                 N loopback ports nobody listens on now
  http-ok URL                  exit 0 when GET URL answers 200
  get URL / post URL           print the body of GET / POST (empty) URL
  probe PROXY STUB KEY_FILE    an ok, a 400 and an always-429 request through
                               the proxy with an Idempotency-Key: status,
                               time, stub calls, id headers, key arrival
  settled OUT MAX [--why]      exit 0 when the runs in OUT/runs.txt are final
                               and the topics hold their records
  sockets PID                  non-loopback TCP peers of PID and its children
                               (one line, - for none)
  evaluate OUT MAX VERSION     the checks and the facts; exit 1 on a failed check
"""

import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request

COMPLETING = ("plain", "429-once")
FAILING = ("400", "429-always")
CHANNELS = ("email", "slack")


def http(url, data=None, headers=None, timeout=10):
    req = urllib.request.Request(url, data=data, headers=headers or {},
                                 method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers.items()), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers.items()), e.read()


def load_runs(out):
    runs = []
    with open(os.path.join(out, "runs.txt")) as f:
        for line in f:
            if line.strip():
                run_id, role = line.split()
                runs.append((run_id, role))
    return runs


def load_json(path, default):
    try:
        with open(path) as f:
            text = f.read().strip()
        return json.loads(text) if text else default
    except (OSError, ValueError):
        return default


def load_records(path):
    recs = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    recs.append(json.loads(line))
    except OSError:
        pass
    return recs


def headers_of(rec):
    h = rec.get("headers") or []
    return {h[i]: h[i + 1] for i in range(0, len(h) - 1, 2)}


def short(run_id):
    return run_id[:12] + "…"


class Evidence:
    """The ledger rows and topic records of one run.sh output folder."""

    def __init__(self, out):
        self.runs = load_runs(out)
        self.ledger = {r["run_id"]: r
                       for r in load_json(os.path.join(out, "ledger.json"), [])}
        self.notes = {}
        for rec in load_records(os.path.join(out, "notifications.jsonl")):
            key = headers_of(rec).get("idempotency-key", "")
            self.notes[key] = self.notes.get(key, 0) + 1
        self.dlq = {}
        for rec in load_records(os.path.join(out, "dlq.jsonl")):
            h = headers_of(rec)
            if "run_id" in h:
                self.dlq.setdefault(h["run_id"], []).append(h)

    def pending(self):
        """Why each run is not settled yet ([] when all are)."""
        why = []
        for run_id, role in self.runs:
            row = self.ledger.get(run_id)
            if row is None:
                why.append("%s %s: not in the ledger" % (role, short(run_id)))
            elif row["status"] not in ("completed", "failed"):
                why.append("%s %s: %s" % (role, short(run_id), row["status"]))
            elif row["outbox"]:
                why.append("%s %s: %d outbox rows" % (role, short(run_id),
                                                      row["outbox"]))
            elif row["status"] == "completed" and any(
                    ("%s:%s" % (run_id, c)) not in self.notes
                    for c in CHANNELS):
                why.append("%s %s: notifications missing" % (role,
                                                             short(run_id)))
            elif row["status"] == "failed" and run_id not in self.dlq:
                why.append("%s %s: no dead letter yet" % (role, short(run_id)))
        return why


def cmd_free_ports(n):
    socks = [socket.socket() for _ in range(int(n))]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    print(" ".join(str(s.getsockname()[1]) for s in socks))


def cmd_http_ok(url):
    try:
        status, _, _ = http(url, timeout=3)
    except Exception:
        return 1
    return 0 if status == 200 else 1


def cmd_probe(proxy_url, stub_url, key_file):
    """One ok, one 400 and one always-429 request through the proxy."""
    with open(key_file) as f:
        key = f.read().strip()
    worst = 0
    for label, content in (("ok", "interop probe"),
                           ("400", "interop probe [[fault:400]]"),
                           ("429", "interop probe [[fault:429 retry_after=1]]")):
        before = json.loads(http(stub_url + "/stats")[2])["requests"]
        body = json.dumps({"model": "stub-1", "messages": [
            {"role": "user", "content": content}]}).encode()
        t0 = time.monotonic()
        status, hdrs, raw = http(proxy_url + "/v1/chat/completions", body, {
            "Content-Type": "application/json",
            "Authorization": "Bearer " + key,
            "Idempotency-Key": "interop-probe"}, timeout=120)
        took = time.monotonic() - t0
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = {}
        calls = json.loads(http(stub_url + "/stats")[2])["requests"] - before
        print("   %s: proxy answered HTTP %d in %.1f s after %d stub call(s)"
              "%s" % (label, status, took, calls,
                      ", body id %s" % answer.get("id") if status == 200
                      else ""))
        names = sorted(n.lower() for n in hdrs)
        for name, value in sorted(hdrs.items(), key=lambda kv: kv[0].lower()):
            low = name.lower()
            if "request-id" in low or "call-id" in low or low == "retry-after":
                print("      header %s: %s" % (low, value))
        print("      (x-request-id %s, retry-after %s)" % (
            "present" if "x-request-id" in names else "absent",
            "present" if "retry-after" in names else "absent"))
        if label == "ok" and status != 200:
            worst = 1
    keyed = json.loads(http(stub_url + "/stats?key=interop-probe")[2])
    print("   stub calls that carried Idempotency-Key interop-probe: %d" %
          keyed["requests"])
    return worst


def cmd_settled(out, max_attempts, why=False):
    ev = Evidence(out)
    pending = ev.pending()
    if why:
        for line in pending:
            print("  not settled: " + line)
    return 0 if not pending else 1


def loopback(addr):
    return addr.startswith("127.") or addr in ("::1", "0.0.0.0", "::")


def cmd_sockets(pid):
    """Non-loopback remote peers of PID's process tree, from /proc."""
    pids, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p in pids:
            continue
        pids.add(p)
        try:
            for task in os.listdir("/proc/%s/task" % p):
                with open("/proc/%s/task/%s/children" % (p, task)) as f:
                    todo.extend(f.read().split())
        except OSError:
            pass
    inodes = set()
    for p in pids:
        try:
            for fd in os.listdir("/proc/%s/fd" % p):
                try:
                    target = os.readlink("/proc/%s/fd/%s" % (p, fd))
                except OSError:
                    continue
                m = re.match(r"socket:\[(\d+)\]", target)
                if m:
                    inodes.add(m.group(1))
        except OSError:
            pass
    peers = []
    for table, fam in (("/proc/net/tcp", socket.AF_INET),
                       ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[9] not in inodes:
                continue
            hexaddr, hexport = cols[2].split(":")
            raw = bytes.fromhex(hexaddr)
            if fam == socket.AF_INET:
                addr = socket.inet_ntop(fam, raw[::-1])
            else:
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                addr = socket.inet_ntop(fam, raw)
                if addr.startswith("::ffff:"):
                    addr = addr[7:]
            if not loopback(addr):
                peers.append("%s:%d" % (addr, int(hexport, 16)))
    print(" ".join(sorted(set(peers))) or "-")
    return 0


def id_form(rid):
    if rid is None or rid == "":
        return "none"
    if re.fullmatch(r"chatcmpl-\d+", rid):
        return "chatcmpl-<n> (the stub's body id, passed through)"
    if rid.startswith("chatcmpl-"):
        return "chatcmpl-… (a body id the gateway made)"
    if re.fullmatch(r"req-(err-)?\d+", rid):
        return "req-… (the stub's x-request-id, relayed as request-id)"
    if re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                    r"[0-9a-f]{12}", rid):
        return "uuid (LiteLLM's x-litellm-call-id)"
    return "other"


def cmd_evaluate(out, max_attempts, version):
    max_attempts = int(max_attempts)
    ev = Evidence(out)
    s1 = load_json(os.path.join(out, "stub-phase1.json"), {})
    s2 = load_json(os.path.join(out, "stub-phase2.json"), {})
    keyed = {}
    for name in ("stub-keys-phase1.jsonl", "stub-keys-phase2.jsonl"):
        try:
            with open(os.path.join(out, name)) as f:
                for line in f:
                    if line.strip():
                        k = json.loads(line)
                        prev = keyed.get(k["key"], {"requests": 0,
                                                    "generations": 0})
                        keyed[k["key"]] = {
                            "requests": prev["requests"] + k["requests"],
                            "generations": prev["generations"]
                            + k["generations"]}
        except OSError:
            pass
    checks = []

    def check(ok, text):
        checks.append((ok, text))

    print("== Runs (ledger, topics)")
    print("   %-10s %-14s %-10s %-19s %-8s %-6s %s" % (
        "role", "run", "status", "error_class", "attempts", "notes",
        "dead letters"))
    by_role = {}
    for run_id, role in ev.runs:
        by_role.setdefault(role, []).append(run_id)
        row = ev.ledger.get(run_id, {})
        atts = row.get("attempts", [])
        n_notes = sum(ev.notes.get("%s:%s" % (run_id, c), 0)
                      for c in CHANNELS)
        print("   %-10s %-14s %-10s %-19s %-8d %-6d %d" % (
            role, short(run_id), row.get("status"), row.get("error_class")
            or "-", len(atts), n_notes, len(ev.dlq.get(run_id, []))))
        for a in atts:
            print("      attempt %d: %-10s http %-4s request id %s" % (
                a["no"], a["outcome"], a["http_status"],
                a["upstream_request_id"]))
            if a["outcome"] not in ("ok",) and a.get("error"):
                print("                 error %s" % a["error"][:110])

    # -- checks ------------------------------------------------------------
    for run_id, role in ev.runs:
        row = ev.ledger.get(run_id, {})
        atts = row.get("attempts", [])
        tag = "%s run %s" % (role, short(run_id))
        if role in COMPLETING:
            oks = [a for a in atts if a["outcome"] == "ok"]
            counts = [ev.notes.get("%s:%s" % (run_id, c), 0)
                      for c in CHANNELS]
            check(row.get("status") == "completed" and len(oks) == 1
                  and counts == [1] * len(CHANNELS)
                  and run_id not in ev.dlq,
                  "%s completed once: %d ok attempt(s), notifications "
                  "email=%d slack=%d, no dead letter" % (
                      tag, len(oks), counts[0], counts[1]))
        else:
            dl = ev.dlq.get(run_id, [])
            want = "model_rejected" if role == "400" else "attempts_exhausted"
            extra = ""
            if role == "429-always":
                extra = ", %d/%d attempts" % (len(atts), max_attempts)
            check(row.get("status") == "failed" and len(dl) == 1
                  and row.get("error_class") == want
                  and (role != "429-always" or len(atts) == max_attempts)
                  and not any(ev.notes.get("%s:%s" % (run_id, c))
                              for c in CHANNELS),
                  "%s failed (%s, want %s%s) to one dead letter (%s), "
                  "no notification" % (
                      tag, row.get("error_class"), want, extra,
                      ", ".join(h.get("reason", "?") for h in dl) or "none"))
    finished = [a for r in ev.ledger.values() for a in r.get("attempts", [])
                if a["outcome"] in ("ok", "transient", "permanent")]
    missing = [a for a in finished if not a["upstream_request_id"]]
    check(finished and not missing,
          "every answered attempt recorded an upstream request id "
          "(%d of %d)" % (len(finished) - len(missing), len(finished)))
    forms = {}
    for a in finished:
        f = "%s %s" % (a["outcome"], id_form(a["upstream_request_id"]))
        forms.setdefault(f, []).append(a["upstream_request_id"])

    # -- facts ---------------------------------------------------------------
    print()
    print("== Upstream request ids recorded (attempts.upstream_request_id)")
    for f, ids in sorted(forms.items()):
        print("   %-3d %s, e.g. %s" % (len(ids), f, ids[0]))

    n_plain = len(by_role.get("plain", []))
    print()
    print("== 429 behind the gateway (LiteLLM %s, default settings)" % version)
    once = by_role.get("429-once", [])
    if once:
        row = ev.ledger.get(once[0], {})
        atts = row.get("attempts", [])
        f429 = s1.get("faults", {}).get("429", 0)
        gens = s1.get("generations", 0) - n_plain
        who = ("the gateway retried it: Runledger saw one attempt, answered ok"
               if len(atts) == 1 and atts[0]["outcome"] == "ok" else
               "passed through: Runledger recorded %s" % ", ".join(
                   "%s/%s" % (a["outcome"], a["http_status"]) for a in atts))
        print("   one 429 (Retry-After: 1) then success: %s" % who)
        print("     stub: %d call(s) answered 429, %d generation(s) for the "
              "run (phase 1: %d generations for %d plain runs + this one)" % (
                  f429, gens, s1.get("generations", 0), n_plain))
    always = by_role.get("429-always", [])
    if always:
        atts = ev.ledger.get(always[0], {}).get("attempts", [])
        calls = s2.get("requests", 0)
        f429 = s2.get("faults", {}).get("429", 0)
        per = calls / len(atts) if atts else 0
        print("   429 on every call: Runledger made %d attempt(s) "
              "(RUNLEDGER_MAX_ATTEMPTS=%d), each answered %s" % (
                  len(atts), max_attempts, ", ".join(
                      sorted({str(a["http_status"]) for a in atts}))))
        print("     stub: %d upstream call(s), %d answered 429, %d "
              "generation(s): %.1f upstream calls per Runledger attempt" % (
                  calls, f429, s2.get("generations", 0), per))
        if per > 1:
            print("     -> the gateway's retries multiply attempts: one "
                  "Runledger attempt cost %.0f upstream calls" % per)
    rej = by_role.get("400", [])
    if rej:
        f400 = s1.get("faults", {}).get("400", 0)
        print("   400: the stub answered 400 %d time(s) for the run "
              "(%s)" % (f400, "not retried by the gateway" if f400 == 1
                        else "the gateway retried it"))

    print()
    print("== Idempotency-Key through the gateway")
    total_calls = s1.get("requests", 0) + s2.get("requests", 0)
    with_key = sum(k["requests"] for k in keyed.values())
    print("   Runledger sent Idempotency-Key: <run_id> on every attempt; the "
          "stub saw it on %d of %d upstream call(s)" % (with_key,
                                                         total_calls))
    print("   -> %s" % ("forwarded" if with_key and with_key == total_calls
                        else "partly forwarded" if with_key
                        else "not forwarded (LiteLLM's default)"))
    try:
        with open(os.path.join(out, "sockets.log")) as f:
            samples = [line.split() for line in f if line.strip()]
        peers = sorted({p for s in samples for p in s if p != "-"})
        print()
        print("== The proxy's TCP peers, sampled %d times while the runs "
              "settled: %s" % (len(samples), ", ".join(peers) or
                               "loopback only"))
    except OSError:
        pass

    print()
    print("== Checks")
    for ok, text in checks:
        print("   %s  %s" % ("PASS" if ok else "FAIL", text))
    failed = sum(1 for ok, _ in checks if not ok)
    print()
    print("interop: %d of %d checks passed" % (len(checks) - failed,
                                               len(checks)))
    return 1 if failed else 0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "free-ports":
        cmd_free_ports(args[0])
    elif cmd == "http-ok":
        sys.exit(cmd_http_ok(args[0]))
    elif cmd in ("get", "post"):
        status, _, raw = http(args[0], b"" if cmd == "post" else None)
        sys.stdout.write(raw.decode() + "\n")
        sys.exit(0 if status == 200 else 1)
    elif cmd == "probe":
        sys.exit(cmd_probe(args[0], args[1], args[2]))
    elif cmd == "settled":
        sys.exit(cmd_settled(args[0], args[1], "--why" in args))
    elif cmd == "sockets":
        sys.exit(cmd_sockets(args[0]))
    elif cmd == "evaluate":
        sys.exit(cmd_evaluate(args[0], args[1], args[2]))
    else:
        sys.exit("evaluate.py: unknown command %s" % cmd)


if __name__ == "__main__":
    main()
