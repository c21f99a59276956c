#!/usr/bin/env python3
"""Self-test of the stub model server (stdlib only).

    python3 tests/stub/test_stub.py            # the unittest suite
    python3 tests/stub/test_stub.py --bench    # throughput / held connections

Each test starts nothing itself: the suite shares one stub (port 0, in a
subprocess) and isolates tests by giving each its own Idempotency-Key; tests
that need other start-time knobs start their own stub.
"""

import argparse
import asyncio
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
STUB = os.path.join(HERE, "stub_model.py")
PATH = "/v1/chat/completions"


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass


class StubProcess:
    """The stub in a subprocess on a free port; env overrides STUB_*."""

    def __init__(self, cpu=None, args=(), **env):
        self.tmp = tempfile.TemporaryDirectory(prefix="rl-stub-")
        self.port_file = os.path.join(self.tmp.name, "port")
        child_env = {k: v for k, v in os.environ.items()
                     if not k.startswith("STUB_")}
        child_env.update({k: str(v) for k, v in env.items()})
        self.proc = subprocess.Popen(
            [sys.executable, STUB, "--host", "127.0.0.1", "--port", "0",
             "--port-file", self.port_file] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env)
        if cpu is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(self.proc.pid, {cpu})
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            _, err = self.proc.communicate()
            raise RuntimeError("stub did not start: %r %r" % (line, err))
        self.port = int(line)
        with open(self.port_file) as f:
            if int(f.read()) != self.port:
                raise RuntimeError("port file disagrees with stdout")
        self.stderr = b""
        self.stdout = b""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        self.stdout += out
        self.stderr += err
        self.tmp.cleanup()
        return self.proc.returncode


def chat(content, model="stub-model", **extra):
    req = {"model": model,
           "messages": [{"role": "system", "content": "You summarise."},
                        {"role": "user", "content": content}]}
    req.update(extra)
    return req


def request(port, method, path, body=None, headers=None, timeout=10.0):
    """(status, headers with lower-case names, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def post(port, body, key=None, headers=None, timeout=10.0):
    h = dict(headers or {})
    if key is not None:
        h["Idempotency-Key"] = key
    return request(port, "POST", PATH, body, h, timeout)


def stats(port, key=None):
    path = "/stats" if key is None else "/stats?key=" + key
    status, _, data = request(port, "GET", path)
    assert status == 200, status
    return json.loads(data)


def stats_query(port, query):
    status, _, data = request(port, "GET", "/stats?" + query)
    assert status == 200, status
    return json.loads(data)


def new_key():
    return "run-" + uuid.uuid4().hex


class StubTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise_nofile()
        cls.stub = StubProcess()
        cls.port = cls.stub.port

    @classmethod
    def tearDownClass(cls):
        cls.stub.stop()
        # Quiet by default: no per-request lines without STUB_VERBOSE=1.
        assert cls.stub.stderr == b"", cls.stub.stderr[:2000]

    # ---- normal completions ------------------------------------------------

    def test_completion_has_openai_shape(self):
        text = "x" * 400
        status, hdrs, data = post(self.port, chat(text, model="m-echo"),
                                  key=new_key())
        self.assertEqual(status, 200)
        self.assertTrue(hdrs["content-type"].startswith("application/json"))
        doc = json.loads(data)
        n = int(doc["id"].split("-")[1])
        self.assertEqual(doc["id"], "chatcmpl-%d" % n)
        self.assertEqual(hdrs["x-request-id"], "req-%d" % n)
        self.assertEqual(doc["object"], "chat.completion")
        self.assertEqual(doc["model"], "m-echo")
        self.assertIsInstance(doc["created"], int)
        choice = doc["choices"][0]
        self.assertEqual(choice["finish_reason"], "stop")
        self.assertEqual(choice["message"]["role"], "assistant")
        self.assertIn(str(n), choice["message"]["content"])
        usage = doc["usage"]
        self.assertEqual(usage["prompt_tokens"],
                         (len(text) + len("You summarise.")) // 4)
        self.assertGreater(usage["completion_tokens"], 0)
        self.assertEqual(usage["total_tokens"],
                         usage["prompt_tokens"] + usage["completion_tokens"])
        self.assertEqual(usage["prompt_tokens_details"]["cached_tokens"], 0)

    def test_prompt_tokens_at_least_one(self):
        body = {"model": "m", "messages": [{"role": "user", "content": ""}]}
        status, _, data = post(self.port, body)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(data)["usage"]["prompt_tokens"], 1)

    def test_content_parts_are_accepted(self):
        body = {"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "abcd" * 10}]}]}
        status, _, data = post(self.port, body)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(data)["usage"]["prompt_tokens"], 10)

    def test_every_generation_counts_per_key_without_dedupe(self):
        k1, k2 = new_key(), new_key()
        contents = set()
        for _ in range(3):
            status, _, data = post(self.port, chat("same"), key=k1)
            self.assertEqual(status, 200)
            contents.add(json.loads(data)["choices"][0]["message"]["content"])
        post(self.port, chat("same"), key=k2)
        # Two generations of the same request must differ.
        self.assertEqual(len(contents), 3)
        self.assertEqual(stats(self.port, k1)["generations"], 3)
        self.assertEqual(stats(self.port, k1)["requests"], 3)
        self.assertEqual(stats(self.port, k2)["generations"], 1)
        by_key = stats(self.port)["by_key"]
        self.assertEqual(by_key[k1], 3)
        self.assertEqual(by_key[k2], 1)

    def test_keep_alive_and_pipelining(self):
        body = json.dumps(chat("pipelined")).encode()
        one = (b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\n"
               b"Content-Type: application/json\r\nContent-Length: "
               + str(len(body)).encode() + b"\r\n\r\n" + body)
        with socket.create_connection(("127.0.0.1", self.port), 5) as s:
            s.sendall(one * 3)
            f = s.makefile("rb")
            ids = set()
            for _ in range(3):
                self.assertEqual(f.readline(), b"HTTP/1.1 200 OK\r\n")
                length = None
                while True:
                    line = f.readline()
                    if line == b"\r\n":
                        break
                    name, _, value = line.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                ids.add(json.loads(f.read(length))["id"])
            self.assertEqual(len(ids), 3)

    def test_expect_100_continue(self):
        body = json.dumps(chat("expect")).encode()
        with socket.create_connection(("127.0.0.1", self.port), 5) as s:
            s.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                      b"Expect: 100-continue\r\nContent-Length: "
                      + str(len(body)).encode() + b"\r\n\r\n")
            self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 100"))
            s.sendall(body)
            resp = http.client.HTTPResponse(s)
            resp.begin()
            self.assertEqual(resp.status, 200)

    def test_chunked_request_body(self):
        body = json.dumps(chat("chunked")).encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        conn.request("POST", PATH, body=iter([body[:10], body[10:]]),
                     encode_chunked=True,
                     headers={"Transfer-Encoding": "chunked"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        json.loads(resp.read())
        conn.close()

    # ---- deduplication -----------------------------------------------------

    def test_dedupe_replays_one_generation_for_two_requests(self):
        key = new_key()
        h = {"X-Stub-Dedupe": "1"}
        s1, h1, d1 = post(self.port, chat("dd"), key=key, headers=h)
        s2, h2, d2 = post(self.port, chat("dd"), key=key, headers=h)
        self.assertEqual((s1, s2), (200, 200))
        self.assertEqual(d1, d2)
        self.assertEqual(h1["x-request-id"], h2["x-request-id"])
        self.assertEqual(h2.get("x-stub-replayed"), "1")
        self.assertEqual(stats(self.port, key)["generations"], 1)
        self.assertEqual(stats(self.port, key)["requests"], 2)

    def test_dedupe_waits_for_in_flight_first_request(self):
        key = new_key()
        h = {"X-Stub-Dedupe": "1"}
        body = chat("slow [[fault:latency ms=600]]")
        results = []

        def one():
            results.append(post(self.port, body, key=key, headers=h))

        threads = [threading.Thread(target=one) for _ in range(5)]
        for t in threads:
            t.start()
            time.sleep(0.02)
        for t in threads:
            t.join(10)
        self.assertEqual(len(results), 5)
        self.assertEqual({r[0] for r in results}, {200})
        self.assertEqual(len({r[2] for r in results}), 1)
        self.assertEqual(stats(self.port, key)["generations"], 1)

    def test_dedupe_conflict_is_422(self):
        key = new_key()
        h = {"X-Stub-Dedupe": "1"}
        self.assertEqual(post(self.port, chat("a"), key=key, headers=h)[0],
                         200)
        status, _, data = post(self.port, chat("b"), key=key, headers=h)
        self.assertEqual(status, 422)
        self.assertEqual(json.loads(data)["error"]["type"],
                         "idempotency_conflict")
        self.assertEqual(stats(self.port, key)["generations"], 1)

    def test_dedupe_replays_after_hang(self):
        key = new_key()
        h = {"X-Stub-Dedupe": "1"}
        body = chat("[[fault:hang]]")
        with self.assertRaises((TimeoutError, socket.timeout)):
            post(self.port, body, key=key, headers=h, timeout=0.5)
        # The upstream finished generating; the retry gets that answer.
        status, _, data = post(self.port, body, key=key, headers=h)
        self.assertEqual(status, 200)
        json.loads(data)
        self.assertEqual(stats(self.port, key)["generations"], 1)

    def test_dedupe_replays_after_close_mid_body(self):
        key = new_key()
        h = {"X-Stub-Dedupe": "1"}
        body = chat("[[fault:close_mid_body]]")
        with self.assertRaises(http.client.IncompleteRead):
            post(self.port, body, key=key, headers=h)
        status, _, data = post(self.port, body, key=key, headers=h)
        self.assertEqual(status, 200)
        json.loads(data)
        self.assertEqual(stats(self.port, key)["generations"], 1)

    def test_dedupe_errors_are_not_stored(self):
        key = new_key()
        h = {"X-Stub-Dedupe": "1"}
        body = chat("[[fault:503 times=1]]")
        self.assertEqual(post(self.port, body, key=key, headers=h)[0], 503)
        self.assertEqual(post(self.port, body, key=key, headers=h)[0], 200)
        self.assertEqual(post(self.port, body, key=key, headers=h)[0], 200)
        self.assertEqual(stats(self.port, key)["generations"], 1)

    # ---- faults ------------------------------------------------------------

    def test_429_carries_retry_after(self):
        key = new_key()
        status, hdrs, data = post(
            self.port, chat("[[fault:429 retry_after=2]]"), key=key)
        self.assertEqual(status, 429)
        self.assertEqual(hdrs["retry-after"], "2")
        self.assertTrue(hdrs["x-request-id"].startswith("req-err-"))
        self.assertEqual(json.loads(data)["error"]["code"],
                         "rate_limit_exceeded")
        self.assertEqual(stats(self.port, key)["generations"], 0)

    def test_status_faults(self):
        for code in (400, 401, 403, 404, 422, 500, 502, 503, 504):
            key = new_key()
            status, hdrs, data = post(
                self.port, chat("[[fault:%d]]" % code), key=key)
            self.assertEqual(status, code)
            self.assertEqual(hdrs["x-stub-fault"], str(code))
            self.assertIn("error", json.loads(data))
            self.assertEqual(stats(self.port, key)["generations"], 0)

    def test_fault_by_header(self):
        status, _, _ = post(self.port, chat("plain"),
                            headers={"X-Stub-Fault": "[[fault:503]]"})
        self.assertEqual(status, 503)
        status, _, _ = post(self.port, chat("plain"),
                            headers={"X-Stub-Fault": "500"})
        self.assertEqual(status, 500)

    def test_times_k_then_recovery(self):
        key = new_key()
        body = chat("[[fault:500 times=2]]")
        got = [post(self.port, body, key=key)[0] for _ in range(4)]
        self.assertEqual(got, [500, 500, 200, 200])
        self.assertEqual(stats(self.port, key)["generations"], 2)
        self.assertEqual(stats(self.port, key)["requests"], 4)

    def test_close_mid_body_gives_incomplete_read(self):
        key = new_key()
        with self.assertRaises(http.client.IncompleteRead):
            post(self.port, chat("[[fault:close_mid_body]]"), key=key)
        self.assertEqual(stats(self.port, key)["generations"], 1)

    def test_hang_times_out_and_counts(self):
        key = new_key()
        t0 = time.monotonic()
        with self.assertRaises((TimeoutError, socket.timeout)):
            post(self.port, chat("[[fault:hang]]"), key=key, timeout=1.0)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(stats(self.port, key)["generations"], 1)
        deadline = time.monotonic() + 5
        while stats(self.port)["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.05)   # the stub notices the client left
        self.assertEqual(stats(self.port)["in_flight"], 0)

    def test_client_leaving_during_latency_is_counted_and_quiet(self):
        key = new_key()
        with self.assertRaises((TimeoutError, socket.timeout)):
            post(self.port, chat("[[fault:latency ms=800]]"), key=key,
                 timeout=0.2)
        deadline = time.monotonic() + 5
        while stats(self.port)["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(stats(self.port)["in_flight"], 0)
        self.assertEqual(stats(self.port, key)["generations"], 1)
        # tearDownClass checks that the late write left stderr empty.

    def test_reset_and_close_without_answer(self):
        with self.assertRaises(ConnectionResetError):
            post(self.port, chat("[[fault:reset]]"))
        with self.assertRaises(http.client.RemoteDisconnected):
            post(self.port, chat("[[fault:close]]"))

    def test_oversize_default_10_mib(self):
        key = new_key()
        status, _, data = post(self.port, chat("[[fault:oversize]]"),
                               key=key, timeout=30)
        self.assertEqual(status, 200)
        content = json.loads(data)["choices"][0]["message"]["content"]
        self.assertEqual(len(content), 10 * 1024 * 1024)
        status, _, data = post(self.port,
                               chat("[[fault:oversize bytes=1000]]"))
        self.assertEqual(
            len(json.loads(data)["choices"][0]["message"]["content"]), 1000)
        self.assertEqual(stats(self.port, key)["generations"], 1)

    def test_empty_and_invalid_json(self):
        status, _, data = post(self.port, chat("[[fault:empty]]"))
        self.assertEqual(status, 200)
        self.assertEqual(
            json.loads(data)["choices"][0]["message"]["content"], "")
        status, _, data = post(self.port, chat("[[fault:invalid_json]]"))
        self.assertEqual(status, 200)
        with self.assertRaises(ValueError):
            json.loads(data)

    def test_tool_call_and_no_content(self):
        status, hdrs, data = post(self.port, chat("[[fault:tool_call]] x"))
        self.assertEqual(status, 200)
        msg = json.loads(data)["choices"][0]["message"]
        self.assertIsNone(msg["content"])
        self.assertEqual(msg["tool_calls"][0]["type"], "function")
        self.assertEqual(msg["tool_calls"][0]["function"]["name"], "lookup")
        json.loads(msg["tool_calls"][0]["function"]["arguments"])
        self.assertEqual(json.loads(data)["choices"][0]["finish_reason"],
                         "tool_calls")
        self.assertEqual(hdrs["x-stub-fault"], "tool_call")
        status, _, data = post(self.port, chat("[[fault:no_content]]"))
        self.assertEqual(status, 200)
        msg = json.loads(data)["choices"][0]["message"]
        self.assertIsNone(msg["content"])
        self.assertNotIn("tool_calls", msg)

    def test_latency_fault(self):
        t0 = time.monotonic()
        self.assertEqual(
            post(self.port, chat("[[fault:latency ms=300]]"))[0], 200)
        self.assertGreaterEqual(time.monotonic() - t0, 0.29)

    def test_unknown_directive_is_rejected(self):
        status, _, data = post(self.port, chat("[[fault:bogus]]"))
        self.assertEqual(status, 400)
        self.assertIn("unknown fault", json.loads(data)["error"]["message"])

    def test_global_fault(self):
        self.addCleanup(request, self.port, "DELETE", "/admin/fault")
        status, _, _ = request(self.port, "POST", "/admin/fault",
                               {"mode": "503", "times": 2,
                                "retry_after": 1})
        self.assertEqual(status, 200)
        got = [post(self.port, chat("g"))[0] for _ in range(3)]
        self.assertEqual(got, [503, 503, 200])
        request(self.port, "POST", "/admin/fault",
                {"mode": "500", "times": 1, "per_key": True})
        k1, k2 = new_key(), new_key()
        got = [post(self.port, chat("g"), key=k)[0] for k in (k1, k1, k2)]
        self.assertEqual(got, [500, 200, 500])
        request(self.port, "POST", "/admin/fault", {"mode": "429"})
        self.assertEqual(post(self.port, chat("g"))[0], 429)
        # A per-request directive wins over the global fault.
        self.assertEqual(post(self.port, chat("[[fault:latency ms=1]]"))[0],
                         200)
        self.assertEqual(request(self.port, "DELETE", "/admin/fault")[0],
                         200)
        self.assertEqual(post(self.port, chat("g"))[0], 200)
        self.assertEqual(request(self.port, "POST", "/admin/fault",
                                 {"mode": "nope"})[0], 400)

    # ---- request validation and other paths -------------------------------

    def test_bad_requests(self):
        self.assertEqual(post(self.port, b"{not json")[0], 400)
        self.assertEqual(post(self.port, {"messages": [
            {"role": "user", "content": "x"}]})[0], 400)
        self.assertEqual(post(self.port, {"model": "m"})[0], 400)
        self.assertEqual(post(self.port, {"model": "m", "messages": []})[0],
                         400)
        self.assertEqual(request(self.port, "POST", "/v1/completions",
                                 chat("x"))[0], 404)
        self.assertEqual(request(self.port, "GET", "/nope")[0], 404)
        # GET lists stored completions, as the provider's does
        # (RecordsTest); other methods are still refused.
        self.assertEqual(request(self.port, "PUT", PATH, chat("x"))[0], 405)
        self.assertEqual(request(self.port, "DELETE", PATH)[0], 405)

    def test_healthz(self):
        status, _, data = request(self.port, "GET", "/healthz")
        self.assertEqual((status, data), (200, b"ok"))

    def test_stats_shape(self):
        doc = stats(self.port)
        for field in ("requests", "generations", "by_key", "in_flight",
                      "max_in_flight", "faults"):
            self.assertIn(field, doc)
        post(self.port, chat("[[fault:503]]"))
        self.assertGreaterEqual(stats(self.port)["faults"]["503"], 1)
        self.assertEqual(stats(self.port, "never-used"),
                         {"key": "never-used", "generations": 0,
                          "requests": 0, "stored": False})


class IsolatedStubTest(unittest.TestCase):
    """Tests that need their own stub (start-time knobs or a reset)."""

    def start(self, args=(), **env):
        stub = StubProcess(args=args, **env)
        self.addCleanup(stub.stop)
        return stub

    def test_reset_clears_counters_and_stored_responses(self):
        stub = self.start(STUB_DEDUPE="1")
        key = new_key()
        _, _, d1 = post(stub.port, chat("r"), key=key)
        _, _, d2 = post(stub.port, chat("r"), key=key)
        self.assertEqual(d1, d2)        # STUB_DEDUPE=1 without the header
        self.assertEqual(stats(stub.port)["generations"], 1)
        # X-Stub-Dedupe: 0 opts one request out of dedupe mode.
        _, _, d3 = post(stub.port, chat("r"), key=key,
                        headers={"X-Stub-Dedupe": "0"})
        self.assertNotEqual(d1, d3)
        self.assertEqual(request(stub.port, "POST", "/admin/reset")[0], 200)
        doc = stats(stub.port)
        self.assertEqual((doc["requests"], doc["generations"], doc["by_key"],
                          doc["faults"]), (0, 0, {}, {}))
        _, _, d4 = post(stub.port, chat("r"), key=key)
        self.assertNotIn(d4, (d1, d3))  # ids stay unique across resets
        self.assertEqual(stats(stub.port, key)["generations"], 1)

    def test_rate_limit_429_with_provider_headers_until_window_passes(self):
        stub = self.start(args=["--rpm", "3", "--window-seconds", "1"])
        seen = []
        for i in range(4):
            seen.append(post(stub.port, chat("r%d" % i), key=new_key()))
        for status, hdrs, _ in seen[:3]:
            self.assertEqual(status, 200)
            self.assertEqual(hdrs["x-ratelimit-limit-requests"], "3")
        self.assertEqual([h["x-ratelimit-remaining-requests"]
                          for _, h, _ in seen[:3]], ["2", "1", "0"])
        status, hdrs, body = seen[3]
        self.assertEqual(status, 429)
        self.assertEqual(json.loads(body)["error"]["code"],
                         "rate_limit_exceeded")
        self.assertEqual(hdrs["x-ratelimit-remaining-requests"], "0")
        self.assertRegex(hdrs["x-ratelimit-reset-requests"], r"^\d+ms$")
        wait_ms = int(hdrs["retry-after-ms"])
        self.assertTrue(0 < wait_ms <= 1000, wait_ms)
        self.assertEqual(hdrs["retry-after"], "1")
        # Another model has a window of its own.
        self.assertEqual(post(stub.port, chat("x", model="other"))[0], 200)
        time.sleep(wait_ms / 1000.0 + 0.05)
        self.assertEqual(post(stub.port, chat("r4"), key=new_key())[0], 200)
        doc = stats(stub.port)["rate_limit"]
        self.assertEqual((doc["rpm"], doc["accepted"], doc["limited"],
                          doc["max_requests_per_window"]), (3, 5, 1, 3))
        self.assertEqual(stats(stub.port)["requests_429"], 1)

    def test_token_limit_counts_body_quarter_plus_max_tokens(self):
        stub = self.start(STUB_TPM="1000", STUB_WINDOW_SECONDS="30")
        body = json.dumps(chat("t", max_tokens=400)).encode()
        cost = (len(body) + 3) // 4 + 400
        s1, h1, _ = post(stub.port, body)
        self.assertEqual(s1, 200)
        self.assertEqual(int(h1["x-ratelimit-remaining-tokens"]), 1000 - cost)
        self.assertEqual(post(stub.port, body)[0], 200)
        s3, h3, _ = post(stub.port, body)
        self.assertEqual(s3, 429)
        self.assertRegex(h3["x-ratelimit-reset-tokens"], r"^\d+(\.\d+)?s$")
        doc = stats(stub.port)["rate_limit"]
        self.assertEqual(doc["max_tokens_per_window"], 2 * cost)
        self.assertEqual(doc["limited"], 1)

    def test_requests_during_a_429_pause_are_counted(self):
        stub = self.start(STUB_RPM="1", STUB_WINDOW_SECONDS="2")
        self.assertEqual(post(stub.port, chat("a"))[0], 200)
        self.assertEqual(post(stub.port, chat("b"))[0], 429)
        self.assertEqual(post(stub.port, chat("c"))[0], 429)
        self.assertEqual(post(stub.port, chat("d", model="m2"))[0], 200)
        doc = stats(stub.port)
        self.assertEqual(doc["requests_during_pause"], 1)  # "c", same model
        self.assertEqual(doc["rate_limit"]["limited"], 2)

    def test_required_header_and_query_refuse_until_sent(self):
        secret = "azure-" + uuid.uuid4().hex
        stub = self.start(args=["--require-header", "api-key=" + secret,
                                "--require-header", "X-Team=a",
                                "--require-query", "api-version=2024-10-21"],
                          STUB_VERBOSE="1")
        azure = "/openai/deployments/gpt4o/chat/completions"
        good_q = "?api-version=2024-10-21"
        hdrs = {"api-key": secret, "X-Team": "a"}
        body = json.dumps(chat("a")).encode()

        def call(path, headers):
            return request(stub.port, "POST", path, body, headers)[0]

        self.assertEqual(call(PATH + good_q, {"X-Team": "a"}), 401)
        self.assertEqual(call(PATH + good_q, {"api-key": "wrong",
                                              "X-Team": "a"}), 401)
        self.assertEqual(call(PATH + good_q, {"api-key": secret}), 401)
        self.assertEqual(call(PATH, hdrs), 404)
        self.assertEqual(call(PATH + "?api-version=2023-01-01", hdrs), 404)
        self.assertEqual(call(PATH + good_q, hdrs), 200)
        self.assertEqual(call(azure + good_q + "&x=%20y", hdrs), 200)
        self.assertEqual(call("/openai/deployments//chat/completions" +
                              good_q, hdrs), 404)
        doc = stats(stub.port)
        self.assertEqual((doc["refused"], doc["generations"]), (5, 2))
        stub.stop()
        self.assertNotIn(secret.encode(), stub.stdout + stub.stderr)

    def test_sigterm_exits_promptly_with_a_hung_connection(self):
        stub = self.start()
        conn = socket.create_connection(("127.0.0.1", stub.port), 5)
        self.addCleanup(conn.close)
        body = json.dumps(chat("[[fault:hang]]")).encode()
        conn.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: " + str(len(body)).encode() +
                     b"\r\n\r\n" + body)
        deadline = time.monotonic() + 5
        while stats(stub.port)["in_flight"] == 0:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.02)
        t0 = time.monotonic()
        self.assertEqual(stub.stop(), 0)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(stub.stderr, b"")

    def test_api_key_required_and_never_printed(self):
        secret = "sk-stub-" + uuid.uuid4().hex
        stub = self.start(STUB_API_KEY=secret, STUB_VERBOSE="1")
        self.assertEqual(post(stub.port, chat("a"))[0], 401)
        self.assertEqual(post(stub.port, chat("a"), headers={
            "Authorization": "Bearer wrong"})[0], 401)
        status, _, data = post(stub.port, chat("a"), headers={
            "Authorization": "Bearer " + secret})
        self.assertEqual(status, 200)
        self.assertEqual(stats(stub.port)["generations"], 1)
        stub.stop()
        self.assertNotIn(secret.encode(), stub.stdout + stub.stderr)
        # STUB_VERBOSE=1: one line per request (3 completions, 1 /stats).
        lines = stub.stderr.splitlines()
        self.assertEqual(len(lines), 4, stub.stderr)
        self.assertEqual(sum(b"/v1/chat/completions" in x for x in lines), 3)

    def test_concurrency_counted_per_key_from_the_prompt(self):
        stub = self.start(STUB_LATENCY_MS="300",
                          STUB_CONCURRENCY_KEY=r"tenant=(\S+)")
        contents = ["run tenant=a"] * 3 + ["run tenant=b", "no key here"]
        threads = [threading.Thread(
            target=post, args=(stub.port, chat(c)), daemon=True)
            for c in contents]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        # One after another: the key's count goes back to 0 in between.
        post(stub.port, chat("run tenant=b"))
        doc = stats(stub.port)
        self.assertEqual(doc["max_concurrent_by_key"], {"a": 3, "b": 1})
        self.assertEqual(doc["in_flight_by_key"], {})
        self.assertEqual(doc["max_in_flight"], 5)
        one = stats_query(stub.port, "concurrency_key=a")
        self.assertEqual((one["in_flight"], one["max_concurrent"]), (0, 3))

    def test_500_concurrent_requests_overlap(self):
        raise_nofile()
        stub = self.start(STUB_LATENCY_MS="200", STUB_LATENCY_JITTER_MS="20")
        n = 500
        barrier = threading.Barrier(n + 1)
        statuses = []
        lock = threading.Lock()
        body = json.dumps(chat("concurrent")).encode()

        def one(i):
            conn = http.client.HTTPConnection("127.0.0.1", stub.port,
                                              timeout=30)
            try:
                conn.connect()
                barrier.wait(30)
                conn.request("POST", PATH, body=body, headers={
                    "Idempotency-Key": "c-%d" % i,
                    "Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
                with lock:
                    statuses.append(resp.status)
            finally:
                conn.close()

        threads = [threading.Thread(target=one, args=(i,), daemon=True)
                   for i in range(n)]
        for t in threads:
            t.start()
        barrier.wait(30)
        t0 = time.monotonic()
        for t in threads:
            t.join(60)
        elapsed = time.monotonic() - t0
        self.assertEqual(statuses, [200] * n)
        doc = stats(stub.port)
        self.assertEqual(doc["generations"], n)
        self.assertEqual(len(doc["by_key"]), n)
        # Serially this would take n * 0.2 s = 100 s.
        self.assertLess(elapsed, 15.0)
        self.assertGreaterEqual(doc["max_in_flight"], 100)
        sys.stderr.write("\n  500 x 200 ms requests in %.2f s, "
                         "max_in_flight %d\n" % (elapsed,
                                                 doc["max_in_flight"]))


# ---- benchmark (not part of the unittest run) -------------------------------

async def _read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    i = head.lower().find(b"content-length:")
    j = head.find(b"\r\n", i)
    n = int(head[i + 15:j])
    await reader.readexactly(n)
    return int(head[9:12])


async def bench_throughput(port, conns, total, unique_keys=False):
    body = json.dumps(chat("Summarise the week for workspace-acme.",
                           temperature=0)).encode()
    remaining = [total]
    bad = [0]

    async def worker(w):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = (b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: bench\r\n"
                b"Content-Type: application/json\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\nIdempotency-Key: bench-")
        req = head + str(w).encode() + b"\r\n\r\n" + body
        while remaining[0] > 0:
            remaining[0] -= 1
            if unique_keys:
                req = head + str(remaining[0]).encode() + b"\r\n\r\n" + body
            writer.write(req)
            if await _read_response(reader) != 200:
                bad[0] += 1
        writer.close()

    t0 = time.monotonic()
    await asyncio.gather(*(worker(w) for w in range(conns)))
    return time.monotonic() - t0, bad[0]


async def bench_hold(port, conns):
    body = json.dumps(chat("hold")).encode()
    done = [0]
    seen = [0]

    async def one(i):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: b\r\n"
                     b"Idempotency-Key: hold-" + str(i).encode() +
                     b"\r\nContent-Length: " + str(len(body)).encode() +
                     b"\r\n\r\n" + body)
        if await _read_response(reader) == 200:
            done[0] += 1
        writer.close()

    async def poll():
        while True:
            await asyncio.sleep(0.5)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /stats HTTP/1.1\r\nHost: b\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            i = head.lower().find(b"content-length:")
            n = int(head[i + 15:head.find(b"\r\n", i)])
            doc = json.loads(await reader.readexactly(n))
            writer.close()
            seen[0] = max(seen[0], doc["in_flight"])

    poller = asyncio.ensure_future(poll())
    t0 = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(conns)))
    elapsed = time.monotonic() - t0
    poller.cancel()
    return elapsed, done[0], seen[0]


def bench(args):
    raise_nofile()
    ncpu = os.cpu_count() or 1
    server_cpu = 0 if ncpu > 1 else None
    if server_cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(range(1, ncpu)))   # client off cpu 0
    env = {"STUB_DEDUPE": "1"} if args.dedupe else {}
    stub = StubProcess(cpu=server_cpu, **env)
    try:
        for _ in range(args.rounds):
            elapsed, bad = asyncio.run(bench_throughput(
                stub.port, args.conns, args.requests, args.unique_keys))
            print("throughput%s: %d requests over %d keep-alive connections "
                  "in %.2f s = %.0f req/s (non-200: %d)"
                  % (" (STUB_DEDUPE=1)" if args.dedupe else "",
                     args.requests, args.conns, elapsed,
                     args.requests / elapsed, bad))
    finally:
        stub.stop()
    if args.hold <= 0:
        return
    stub = StubProcess(cpu=server_cpu, STUB_LATENCY_MS=args.hold_ms)
    try:
        elapsed, ok, seen = asyncio.run(bench_hold(stub.port, args.hold))
        doc = stats(stub.port)
        print("hold: %d connections, STUB_LATENCY_MS=%d: %d ok in %.2f s; "
              "in_flight seen %d, max_in_flight %d, max_connections %d"
              % (args.hold, args.hold_ms, ok, elapsed, seen,
                 doc["max_in_flight"], doc["max_connections"]))
    finally:
        stub.stop()


def upload(port, data, purpose="batch"):
    """POST /v1/files as multipart/form-data; the file object."""
    boundary = "rlstub" + uuid.uuid4().hex
    body = b"".join([
        b"--", boundary.encode(), b"\r\n",
        b'Content-Disposition: form-data; name="purpose"\r\n\r\n',
        purpose.encode(), b"\r\n",
        b"--", boundary.encode(), b"\r\n",
        b'Content-Disposition: form-data; name="file"; '
        b'filename="in.jsonl"\r\n',
        b"Content-Type: application/jsonl\r\n\r\n", data, b"\r\n",
        b"--", boundary.encode(), b"--\r\n"])
    status, _, out = request(
        port, "POST", "/v1/files", body,
        {"Content-Type": "multipart/form-data; boundary=" + boundary})
    assert status == 200, (status, out)
    return json.loads(out)


def batch_lines(n, tag, fault_at=None):
    lines = []
    for i in range(n):
        content = "%s line %d" % (tag, i)
        if i == fault_at:
            content += " [[fault:500]]"
        lines.append(json.dumps({
            "custom_id": "%s-%d:1" % (tag, i), "method": "POST",
            "url": "/v1/chat/completions",
            "body": chat(content)}).encode())
    return b"\n".join(lines) + b"\n"


class RecordsTest(unittest.TestCase):
    """The provider's records: files, batches, stored completions and
    responses, each stub with its own timing knobs."""

    def start(self, **env):
        stub = StubProcess(**env)
        self.addCleanup(stub.stop)
        return stub

    def wait_batch(self, port, bid, want, timeout=10.0):
        end = time.monotonic() + timeout
        while True:
            status, _, data = request(port, "GET", "/v1/batches/" + bid)
            self.assertEqual(status, 200)
            doc = json.loads(data)
            if doc["status"] == want or time.monotonic() > end:
                return doc
            time.sleep(0.05)

    def test_batch_answers_every_line_once_with_its_custom_id(self):
        stub = self.start(STUB_BATCH_SECONDS="0.2")
        f = upload(stub.port, batch_lines(5, "b1", fault_at=3))
        status, _, data = request(stub.port, "POST", "/v1/batches", {
            "input_file_id": f["id"], "endpoint": "/v1/chat/completions",
            "completion_window": "24h", "metadata": {"local_id": "L1"}})
        self.assertEqual(status, 200)
        bid = json.loads(data)["id"]
        doc = self.wait_batch(stub.port, bid, "completed")
        self.assertEqual(doc["status"], "completed")
        self.assertEqual(doc["request_counts"],
                         {"total": 5, "completed": 4, "failed": 1})
        _, _, out = request(stub.port, "GET",
                            "/v1/files/%s/content" % doc["output_file_id"])
        ids = [json.loads(x)["custom_id"] for x in out.splitlines()]
        self.assertEqual(sorted(ids), ["b1-0:1", "b1-1:1", "b1-2:1",
                                       "b1-4:1"])
        _, _, err = request(stub.port, "GET",
                            "/v1/files/%s/content" % doc["error_file_id"])
        self.assertEqual(json.loads(err.splitlines()[0])["custom_id"],
                         "b1-3:1")
        self.assertEqual(stats(stub.port)["generations"], 4)
        # Reading it again generates nothing more.
        request(stub.port, "GET", "/v1/batches/" + bid)
        self.assertEqual(stats(stub.port)["generations"], 4)
        # Listed with its metadata, paginated.
        _, _, page = request(stub.port, "GET", "/v1/batches?limit=1")
        page = json.loads(page)
        self.assertEqual(page["data"][0]["metadata"], {"local_id": "L1"})

    def test_dropped_reply_leaves_a_batch_to_adopt(self):
        stub = self.start(STUB_BATCH_SECONDS="30")
        f = upload(stub.port, batch_lines(2, "b2"))
        with self.assertRaises((http.client.HTTPException, OSError)):
            request(stub.port, "POST", "/v1/batches", {
                "input_file_id": f["id"],
                "endpoint": "/v1/chat/completions",
                "metadata": {"local_id": "L2"}},
                {"X-Stub-Fault": "drop_reply"})
        _, _, page = request(stub.port, "GET", "/v1/batches")
        found = [b for b in json.loads(page)["data"]
                 if b["metadata"].get("local_id") == "L2"]
        self.assertEqual(len(found), 1)
        self.assertEqual(stats(stub.port)["batches_created"], 1)

    def test_first_create_made_and_answered_late(self):
        stub = self.start(STUB_BATCH_SECONDS="30",
                          STUB_BATCH_CREATE_DELAY_MS="600")
        f = upload(stub.port, batch_lines(2, "b5"))
        req = {"input_file_id": f["id"],
               "endpoint": "/v1/chat/completions"}
        t0 = time.monotonic()
        status, _, _ = request(stub.port, "POST", "/v1/batches", req)
        self.assertEqual(status, 200)
        self.assertGreaterEqual(time.monotonic() - t0, 0.6)
        # Only the first: the next is made at once.
        t0 = time.monotonic()
        status, _, _ = request(stub.port, "POST", "/v1/batches", req)
        self.assertEqual(status, 200)
        self.assertLess(time.monotonic() - t0, 0.5)
        self.assertEqual(stats(stub.port)["batches_created"], 2)

    def test_content_sent_slowly_and_reads_counted(self):
        stub = self.start(STUB_BATCH_SECONDS="0.1",
                          STUB_FILE_CONTENT_SECONDS="1")
        f = upload(stub.port, batch_lines(3, "b6"))
        _, _, data = request(stub.port, "POST", "/v1/batches", {
            "input_file_id": f["id"], "endpoint": "/v1/chat/completions"})
        doc = self.wait_batch(stub.port, json.loads(data)["id"], "completed")
        t0 = time.monotonic()
        status, _, out = request(
            stub.port, "GET", "/v1/files/%s/content" % doc["output_file_id"])
        self.assertEqual(status, 200)
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        self.assertEqual(len(out.splitlines()), 3)
        self.assertEqual(stats(stub.port)["file_reads"], 1)

    def batch_fault(self, port, mode, times=1, ms=0):
        status, _, out = request(port, "POST", "/admin/batch_fault",
                                 {"mode": mode, "times": times, "ms": ms})
        self.assertEqual(status, 200, out)

    def create(self, port, fid, local_id, expect=200):
        status, _, data = request(port, "POST", "/v1/batches", {
            "input_file_id": fid, "endpoint": "/v1/chat/completions",
            "metadata": {"runledger_batch": local_id}})
        self.assertEqual(status, expect, data)
        return json.loads(data)["id"]

    def admin_batches(self, port):
        status, _, out = request(port, "GET", "/admin/batches")
        self.assertEqual(status, 200)
        return {b["id"]: b for b in json.loads(out)["batches"]}

    def test_batch_fault_create_late_counted_down(self):
        stub = self.start(STUB_BATCH_SECONDS="30")
        f = upload(stub.port, batch_lines(1, "bf1"))
        self.batch_fault(stub.port, "create_late", times=2, ms=400)
        for _ in range(2):
            t0 = time.monotonic()
            self.create(stub.port, f["id"], "L1")
            self.assertGreaterEqual(time.monotonic() - t0, 0.4)
        t0 = time.monotonic()
        self.create(stub.port, f["id"], "L1")
        self.assertLess(time.monotonic() - t0, 0.3)
        self.assertEqual(stats(stub.port)["batch_fault_uses"]["create_late"],
                         2)

    def test_batch_fault_create_drop_reply_makes_the_batch(self):
        stub = self.start(STUB_BATCH_SECONDS="30")
        f = upload(stub.port, batch_lines(2, "bf2"))
        self.batch_fault(stub.port, "create_drop_reply")
        with self.assertRaises((http.client.HTTPException, OSError)):
            self.create(stub.port, f["id"], "L2")
        self.create(stub.port, f["id"], "L2")     # the next is answered
        held = list(self.admin_batches(stub.port).values())
        self.assertEqual(len(held), 2)
        self.assertEqual({b["metadata"]["runledger_batch"] for b in held},
                         {"L2"})
        self.assertEqual(held[0]["custom_ids"], ["bf2-0:1", "bf2-1:1"])

    def test_batch_fault_list_lag_hides_a_new_batch(self):
        stub = self.start(STUB_BATCH_SECONDS="30")
        f = upload(stub.port, batch_lines(1, "bf3"))
        self.batch_fault(stub.port, "list_lag", ms=500)
        bid = self.create(stub.port, f["id"], "L3")

        def listed():
            _, _, page = request(stub.port, "GET", "/v1/batches")
            return [b["id"] for b in json.loads(page)["data"]]
        self.assertNotIn(bid, listed())
        status, _, _ = request(stub.port, "GET", "/v1/batches/" + bid)
        self.assertEqual(status, 200)
        time.sleep(0.6)
        self.assertIn(bid, listed())

    def test_batch_fault_poll_404_then_answered(self):
        stub = self.start(STUB_BATCH_SECONDS="30")
        f = upload(stub.port, batch_lines(1, "bf4"))
        bid = self.create(stub.port, f["id"], "L4")
        self.batch_fault(stub.port, "poll_404", times=2)
        for want in (404, 404, 200):
            status, _, _ = request(stub.port, "GET", "/v1/batches/" + bid)
            self.assertEqual(status, want)

    def test_batch_fault_expire_partial_answers_half(self):
        stub = self.start(STUB_BATCH_SECONDS="0.2")
        f = upload(stub.port, batch_lines(4, "bf5"))
        self.batch_fault(stub.port, "expire_partial")
        bid = self.create(stub.port, f["id"], "L5")
        doc = self.wait_batch(stub.port, bid, "expired")
        self.assertEqual(doc["status"], "expired")
        _, _, out = request(stub.port, "GET",
                            "/v1/files/%s/content" % doc["output_file_id"])
        self.assertEqual([json.loads(x)["custom_id"]
                          for x in out.splitlines()], ["bf5-0:1", "bf5-1:1"])
        _, _, err = request(stub.port, "GET",
                            "/v1/files/%s/content" % doc["error_file_id"])
        self.assertEqual([(json.loads(x)["custom_id"],
                           json.loads(x)["error"]["code"])
                          for x in err.splitlines()],
                         [("bf5-2:1", "batch_expired"),
                          ("bf5-3:1", "batch_expired")])
        self.assertEqual(stats(stub.port)["generations"], 2)
        held = self.admin_batches(stub.port)[bid]
        self.assertTrue(held["read"])
        self.assertEqual(held["faults"], ["expire_partial"])
        # The next batch completes.
        bid = self.create(stub.port, f["id"], "L6")
        self.assertEqual(self.wait_batch(stub.port, bid, "completed")
                         ["status"], "completed")

    def test_batch_fault_refused_and_cleared(self):
        stub = self.start()
        status, _, _ = request(stub.port, "POST", "/admin/batch_fault",
                               {"mode": "nope"})
        self.assertEqual(status, 400)
        self.batch_fault(stub.port, "poll_404", times=3)
        status, _, out = request(stub.port, "DELETE", "/admin/batch_fault")
        self.assertEqual(status, 200)
        _, _, out = request(stub.port, "GET", "/admin/batch_fault")
        self.assertEqual(json.loads(out)["faults"], {})

    def test_admin_batches_shows_cancelled_unread(self):
        stub = self.start(STUB_BATCH_SECONDS="30")
        f = upload(stub.port, batch_lines(1, "bf7"))
        bid = self.create(stub.port, f["id"], "L7")
        request(stub.port, "POST", "/v1/batches/%s/cancel" % bid)
        held = self.admin_batches(stub.port)[bid]
        self.assertEqual((held["status"], held["cancelled"], held["read"]),
                         ("cancelled", True, False))

    def test_batch_expires_with_every_line_refused(self):
        stub = self.start(STUB_BATCH_SECONDS="30",
                          STUB_BATCH_EXPIRE_SECONDS="0.2")
        f = upload(stub.port, batch_lines(3, "b3"))
        _, _, data = request(stub.port, "POST", "/v1/batches", {
            "input_file_id": f["id"], "endpoint": "/v1/chat/completions"})
        doc = self.wait_batch(stub.port, json.loads(data)["id"], "expired")
        self.assertEqual(doc["status"], "expired")
        self.assertIsNone(doc["output_file_id"])
        _, _, err = request(stub.port, "GET",
                            "/v1/files/%s/content" % doc["error_file_id"])
        codes = {json.loads(x)["error"]["code"] for x in err.splitlines()}
        self.assertEqual(codes, {"batch_expired"})
        self.assertEqual(stats(stub.port)["generations"], 0)

    def test_responses_batch_answers_lines_with_responses_bodies(self):
        stub = self.start(STUB_BATCH_SECONDS="0.2")
        lines = [json.dumps({
            "custom_id": "r-%d:1" % i, "method": "POST",
            "url": "/v1/responses",
            "body": {"model": "stub-1", "input": [{
                "role": "user", "content": "responses line %d" % i}]}})
            for i in range(3)]
        # A chat line in a Responses batch, and a chat body under the
        # Responses url: each refused with a 400, never generated.
        lines.append(json.dumps({
            "custom_id": "r-3:1", "method": "POST",
            "url": "/v1/chat/completions", "body": chat("wrong url")}))
        lines.append(json.dumps({
            "custom_id": "r-4:1", "method": "POST", "url": "/v1/responses",
            "body": chat("wrong body")}))
        f = upload(stub.port, "\n".join(lines).encode() + b"\n")
        _, _, data = request(stub.port, "POST", "/v1/batches", {
            "input_file_id": f["id"], "endpoint": "/v1/responses",
            "completion_window": "24h"})
        doc = self.wait_batch(stub.port, json.loads(data)["id"], "completed")
        self.assertEqual(doc["request_counts"],
                         {"total": 5, "completed": 3, "failed": 2})
        _, _, out = request(stub.port, "GET",
                            "/v1/files/%s/content" % doc["output_file_id"])
        for x in out.splitlines():
            body = json.loads(x)["response"]["body"]
            self.assertEqual(body["object"], "response")
            self.assertEqual(body["output"][0]["content"][0]["type"],
                             "output_text")
            self.assertGreater(body["usage"]["input_tokens"], 0)
            self.assertGreater(body["usage"]["output_tokens"], 0)
        _, _, err = request(stub.port, "GET",
                            "/v1/files/%s/content" % doc["error_file_id"])
        refused = {json.loads(x)["custom_id"]:
                   json.loads(x)["response"]["status_code"]
                   for x in err.splitlines()}
        self.assertEqual(refused, {"r-3:1": 400, "r-4:1": 400})
        doc = stats(stub.port)
        self.assertEqual((doc["generations"], doc["batch_lines_responses"],
                          doc["batch_lines_chat"],
                          doc["batch_lines_refused"]), (3, 3, 0, 2))

    def test_batch_with_an_expire_line_expires_whole(self):
        stub = self.start(STUB_BATCH_SECONDS="0.2")
        data = batch_lines(2, "b5") + json.dumps({
            "custom_id": "b5-2:1", "method": "POST",
            "url": "/v1/chat/completions",
            "body": chat("b5 line 2 [[fault:batch_expire]]")}).encode()
        f = upload(stub.port, data)
        _, _, made = request(stub.port, "POST", "/v1/batches", {
            "input_file_id": f["id"], "endpoint": "/v1/chat/completions"})
        doc = self.wait_batch(stub.port, json.loads(made)["id"], "expired")
        self.assertEqual(doc["status"], "expired")
        _, _, err = request(stub.port, "GET",
                            "/v1/files/%s/content" % doc["error_file_id"])
        self.assertEqual(len(err.splitlines()), 3)
        self.assertEqual(stats(stub.port)["generations"], 0)

    def test_stored_completion_listed_by_metadata_after_its_lag(self):
        stub = self.start(STUB_STORE_LAG_MS="300")
        key = new_key()
        status, _, data = post(stub.port, chat("stored", store=True,
                                               metadata={"run": key}),
                               key=key)
        self.assertEqual(status, 200)
        answer = json.loads(data)
        path = "/v1/chat/completions?metadata%5Brun%5D=" + key
        _, _, early = request(stub.port, "GET", path)
        self.assertEqual(json.loads(early)["data"], [])
        end = time.monotonic() + 5
        found = []
        while not found and time.monotonic() < end:
            time.sleep(0.05)
            _, _, later = request(stub.port, "GET", path)
            found = json.loads(later)["data"]
        self.assertEqual([c["id"] for c in found], [answer["id"]])
        self.assertEqual(found[0]["choices"][0]["message"]["content"],
                         answer["choices"][0]["message"]["content"])

    def test_stored_completion_kept_when_the_reply_is_cut(self):
        stub = self.start()
        key = new_key()
        with self.assertRaises(http.client.IncompleteRead):
            post(stub.port, chat("[[fault:close_mid_body]]", store=True,
                                 metadata={"run": key, "attempt": "1"}),
                 key=key)
        path = ("/v1/chat/completions?metadata%5Brun%5D=" + key +
                "&metadata%5Battempt%5D=1")
        _, _, data = request(stub.port, "GET", path)
        found = json.loads(data)["data"]
        self.assertEqual(len(found), 1)
        self.assertTrue(found[0]["choices"][0]["message"]["content"])
        _, _, other = request(stub.port, "GET", path[:-1] + "2")
        self.assertEqual(json.loads(other)["data"], [])
        self.assertEqual(stats(stub.port, key)["generations"], 1)

    def test_generations_n_stores_each_and_drop_generates_none(self):
        stub = self.start()
        key = new_key()
        # A gateway that re-sent the request: two generations, two
        # records, each its own id, then a cut reply; the next request
        # (then=drop) is dropped before the upstream sees it.
        body = chat("[[fault:close_mid_body times=1 generations=2 "
                    "then=drop]]", store=True,
                    metadata={"run": key, "attempt": "1"})
        with self.assertRaises(http.client.IncompleteRead):
            post(stub.port, body, key=key)
        self.assertEqual(stats(stub.port, key)["generations"], 2)
        path = "/v1/chat/completions?metadata%5Brun%5D=" + key
        _, _, data = request(stub.port, "GET", path)
        found = json.loads(data)["data"]
        self.assertEqual(len(found), 2)
        self.assertNotEqual(found[0]["id"], found[1]["id"])
        with self.assertRaises((http.client.RemoteDisconnected,
                                ConnectionError)):
            post(stub.port, body, key=key)
        self.assertEqual(stats(stub.port, key)["generations"], 2)
        self.assertEqual(stats(stub.port, key)["requests"], 2)

    def test_responses_api_answers_and_keeps_a_stored_response(self):
        stub = self.start()
        key = new_key()
        status, _, data = request(stub.port, "POST", "/v1/responses", {
            "model": "stub-1", "input": "hello", "store": True,
            "metadata": {"run": key}}, {"Idempotency-Key": key})
        self.assertEqual(status, 200)
        resp = json.loads(data)
        self.assertEqual(resp["object"], "response")
        self.assertGreater(resp["usage"]["output_tokens"], 0)
        _, _, again = request(stub.port, "GET", "/v1/responses/" + resp["id"])
        self.assertEqual(json.loads(again)["id"], resp["id"])
        self.assertEqual(stats(stub.port, key)["generations"], 1)


def main():
    if "--bench" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--bench", action="store_true")
        ap.add_argument("--conns", type=int, default=64)
        ap.add_argument("--requests", type=int, default=20000)
        ap.add_argument("--rounds", type=int, default=2)
        ap.add_argument("--hold", type=int, default=5000)
        ap.add_argument("--hold-ms", type=int, default=5000)
        ap.add_argument("--dedupe", action="store_true",
                        help="start the stub with STUB_DEDUPE=1")
        ap.add_argument("--unique-keys", action="store_true",
                        help="a new Idempotency-Key per request (with "
                        "--dedupe: every request generates and is stored)")
        bench(ap.parse_args())
        return
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
