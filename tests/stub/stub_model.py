#!/usr/bin/env python3
"""OpenAI-compatible stub model server for Runledger's tests.

A real HTTP/1.1 server (asyncio streams, keep-alive, Content-Length and
chunked request bodies, Expect: 100-continue) that answers
POST /v1/chat/completions with a chat.completion, counts billable
generations per Idempotency-Key, optionally deduplicates by that key, and
injects faults chosen per request so parallel tests never interfere.

Standard library only. See README.md beside this file for the knobs,
the fault directives and /stats.
"""

import argparse
import asyncio
import collections
import hashlib
import hmac
import http
import json
import os
import random
import re
import resource
import signal
import socket
import struct
import sys
import time
import traceback
from urllib.parse import parse_qs, unquote_plus

import records

MAX_HEADER_BYTES = 256 * 1024
DEFAULT_OVERSIZE_BYTES = 10 * 1024 * 1024

# Kinds a directive or /admin/fault may name besides a 3-digit HTTP status.
ACTION_KINDS = frozenset((
    "hang", "close_mid_body", "close", "reset", "oversize", "empty",
    "invalid_json", "latency", "tool_call", "no_content", "drop",
))

DIRECTIVE_RE = re.compile(r"\[\[fault:\s*([A-Za-z0-9_]+)([^\]]*)\]\]")
BARE_DIRECTIVE_RE = re.compile(r"^\s*([A-Za-z0-9_]+)((?:\s+\S+=\S+)*)\s*$")

ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("not_found_error", None),
    409: ("conflict_error", None),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "overloaded"),
    504: ("server_error", "gateway_timeout"),
}


def status_line(code):
    try:
        phrase = http.HTTPStatus(code).phrase
    except ValueError:
        phrase = "Status"
    return ("HTTP/1.1 %d %s\r\n" % (code, phrase)).encode("latin-1")


STATUS_LINES = {}
for _c in list(range(100, 600)):
    STATUS_LINES[_c] = status_line(_c)

SERVER_HDR = b"Server: runledger-stub\r\n"
CT_JSON = b"application/json"
CT_TEXT = b"text/plain; charset=utf-8"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

# An answer that calls a tool: content null, the call in tool_calls.
TOOL_CALL_TMPL = (
    '{"id":"chatcmpl-%d","object":"chat.completion","created":%d,'
    '"model":%s,"system_fingerprint":"fp_runledger_stub","choices":[{'
    '"index":0,"message":{"role":"assistant","content":null,'
    '"tool_calls":[{"id":"call_%d","type":"function","function":{'
    '"name":"lookup","arguments":%s}}],"refusal":null},'
    '"logprobs":null,"finish_reason":"tool_calls"}],"usage":{'
    '"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,'
    '"prompt_tokens_details":{"cached_tokens":0},'
    '"completion_tokens_details":{"reasoning_tokens":0}}}'
)

COMPLETION_TMPL = (
    '{"id":"chatcmpl-%d","object":"chat.completion","created":%d,'
    '"model":%s,"system_fingerprint":"fp_runledger_stub","choices":[{'
    '"index":0,"message":{"role":"assistant","content":%s,"refusal":null},'
    '"logprobs":null,"finish_reason":"stop"}],"usage":{'
    '"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,'
    '"prompt_tokens_details":{"cached_tokens":0},'
    '"completion_tokens_details":{"reasoning_tokens":0}}}'
)


def build_response(status, body, ctype=CT_JSON, extra=b"", close=False):
    """Whole HTTP/1.1 response as one bytes object (one send syscall)."""
    return b"".join((
        STATUS_LINES[status], SERVER_HDR,
        b"Content-Type: ", ctype,
        b"\r\nContent-Length: ", str(len(body)).encode("ascii"), b"\r\n",
        extra,
        b"Connection: close\r\n" if close else b"",
        b"\r\n", body,
    ))


def error_body(status, message, etype=None, code=None):
    if etype is None:
        etype, dcode = ERROR_TYPES.get(
            status, ("server_error" if status >= 500 else
                     "invalid_request_error", None))
        if code is None:
            code = dcode
    return json.dumps({"error": {"message": message, "type": etype,
                                 "param": None, "code": code}}).encode()


def env_int(name, default):
    raw = os.environ.get(name, "")
    if raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        sys.exit("stub_model: %s must be an integer" % name)


def go_duration(seconds):
    """A reset as OpenAI writes it: "6m0s", "1s", "20ms"."""
    ms = max(0, int(seconds * 1000 + 0.999))
    if ms < 1000:
        return b"%dms" % ms
    if ms < 60000:
        return (b"%gs" % (ms / 1000.0))
    return b"%dm%gs" % (ms // 60000, (ms % 60000) / 1000.0)


def env_flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes",
                                                         "on")


def raise_nofile():
    """Raise RLIMIT_NOFILE's soft limit to the hard limit (5k+ sockets)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if target == resource.RLIM_INFINITY:
        target = 1 << 20
    if soft != resource.RLIM_INFINITY and soft >= target:
        return soft
    for want in (target, 65536, 16384):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            return want
        except (ValueError, OSError):
            continue
    return soft


class Fault:
    """One fault to apply: kind is a status string ("429") or an action."""

    __slots__ = ("kind", "params", "spec", "status")

    def __init__(self, kind, params, spec):
        self.kind = kind
        self.params = params
        self.spec = spec
        self.status = int(kind) if kind.isdigit() else 0


class BadDirective(Exception):
    pass


def parse_params(text):
    params = {}
    for tok in text.split():
        k, sep, v = tok.partition("=")
        if not sep or not k:
            raise BadDirective("bad fault parameter %r" % tok)
        params[k.lower()] = v
    return params


def make_fault(kind, params, spec):
    kind = kind.lower()
    if kind.isdigit():
        if len(kind) != 3 or not 400 <= int(kind) <= 599:
            raise BadDirective("fault status must be 400..599, got %s" % kind)
    elif kind not in ACTION_KINDS:
        raise BadDirective("unknown fault kind %r" % kind)
    for name in ("times", "ms", "bytes", "retry_after", "generations"):
        if name in params:
            try:
                if int(params[name]) < 0:
                    raise ValueError
            except ValueError:
                raise BadDirective("fault parameter %s must be a "
                                   "non-negative integer" % name) from None
    return Fault(kind, params, spec)


def parse_directive(text, bare_ok=False):
    """The first [[fault:...]] in text as a Fault, or None."""
    m = DIRECTIVE_RE.search(text)
    if m is None and bare_ok:
        m = BARE_DIRECTIVE_RE.match(text)
    if m is None:
        return None
    return make_fault(m.group(1), parse_params(m.group(2)), m.group(0))


def content_text(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                t = part.get("text")
                if isinstance(t, str):
                    out.append(t)
            elif isinstance(part, str):
                out.append(part)
        return "".join(out)
    return ""


class Entry:
    """Dedupe store entry for one Idempotency-Key."""

    __slots__ = ("body_hash", "future", "reply")

    def __init__(self, body_hash, future):
        self.body_hash = body_hash
        self.future = future
        self.reply = None


class Reply:
    """A complete HTTP answer: status, body, extra header lines."""

    __slots__ = ("status", "body", "extra", "ctype", "more")

    def __init__(self, status, body, extra=b"", ctype=CT_JSON):
        self.status = status
        self.body = body
        self.extra = extra
        self.ctype = ctype
        # Bodies of further generations of the same request (a gateway
        # that re-sent it upstream): stored, never sent.
        self.more = ()


def parse_pairs(values, flag):
    """["name=value", ...] from the command line as [(name, value)]."""
    pairs = []
    for v in values or ():
        name, sep, value = v.partition("=")
        if not sep or not name:
            sys.exit("stub_model: %s wants NAME=VALUE, got %r" % (flag, v))
        pairs.append((name, value))
    return pairs


def is_chat_path(path):
    """/v1/chat/completions, or Azure OpenAI's per-deployment path."""
    if path == "/v1/chat/completions":
        return True
    parts = path.split("/")
    return (len(parts) == 6 and parts[1] == "openai" and
            parts[2] == "deployments" and parts[3] != "" and
            parts[4:] == ["chat", "completions"])


class Stub:
    def __init__(self, require_headers=(), require_query=()):
        # What a gateway or Azure OpenAI insists on: a missing or wrong
        # header is 401, a missing or wrong query parameter 404.
        self.require_headers = [(n.lower(), v.encode("latin-1"))
                                for n, v in require_headers]
        self.require_query = list(require_query)
        self.latency_ms = env_int("STUB_LATENCY_MS", 0)
        self.jitter_ms = env_int("STUB_LATENCY_JITTER_MS", 0)
        self.dedupe = env_flag("STUB_DEDUPE")
        self.verbose = env_flag("STUB_VERBOSE")
        self.record_headers = [
            n.strip().lower()
            for n in os.environ.get("STUB_RECORD_HEADERS", "").split(",")
            if n.strip()]
        self.max_body = env_int("STUB_MAX_BODY", 64 * 1024 * 1024)
        self.max_entries = env_int("STUB_DEDUPE_MAX_ENTRIES", 200000)
        key = os.environ.get("STUB_API_KEY", "")
        self.auth = ("Bearer " + key).encode() if key else None
        seed = os.environ.get("STUB_SEED")
        self.rng = random.Random(seed)
        self.seq = 0                 # monotonic; never reset (ids stay unique)
        self.err_seq = 0
        self.global_fault = None
        self.global_times = None
        self.global_prob = 1.0
        self.global_per_key = False
        self.connections = 0
        self.max_connections = 0
        self.background = set()
        # Rate limit (0: none): requests and tokens per model within any
        # window_s sliding window; a request over either is answered 429
        # with the provider's headers and is not counted in the window.
        self.rpm = env_int("STUB_RPM", 0)
        self.tpm = env_int("STUB_TPM", 0)
        self.window_s = float(os.environ.get("STUB_WINDOW_SECONDS") or 60)
        self.pause_grace_ms = env_int("STUB_PAUSE_GRACE_MS", 0)
        # STUB_CONCURRENCY_KEY: a regular expression searched in the text
        # of the request's messages; its first group (or the whole match)
        # names the key whose calls in flight are counted apart, e.g.
        # "tenant=(\S+)" with events whose prompt ends "tenant=acme".
        spec = os.environ.get("STUB_CONCURRENCY_KEY", "")
        try:
            self.concurrency_re = re.compile(spec) if spec else None
        except re.error as e:
            sys.exit("stub_model: STUB_CONCURRENCY_KEY: %s" % e)
        self.in_flight_by_key = collections.Counter()
        self.reset()

    def reset(self):
        # /v1/files, /v1/batches, stored completions and responses
        self.records = records.Records(self)
        self.requests = 0
        self.refused = 0             # refused for a required header/query
        self.generations = 0
        self.by_key = {}
        self.req_by_key = {}
        # STUB_RECORD_HEADERS: request header values per key, in order
        self.headers_by_key = {}
        self.faults = {}
        self.replays = 0
        self.conflicts = 0
        self.times_used = {}
        self.store = {}
        self.in_flight = getattr(self, "in_flight", 0)
        self.max_in_flight = self.in_flight
        self.max_connections = self.connections
        self.windows = {}            # model -> deque of (time, tokens)
        self.rl_accepted = 0
        self.rl_limited = 0          # 429s of the rate limit
        self.rl_max_requests = 0     # most requests in any window
        self.rl_max_tokens = 0       # most tokens in any window
        self.pause_until = {}        # model -> (time of its 429, reset)
        self.during_pause = 0        # requests for a model between its
                                     # 429 (+ grace) and the reset told
        self.requests_429 = 0        # every 429 answered, fault or limit
        # STUB_CONCURRENCY_KEY: most calls of one key in flight at once
        self.max_concurrent_by_key = {
            k: n for k, n in self.in_flight_by_key.items() if n}

    # ---- connection loop -------------------------------------------------

    async def handle_conn(self, reader, writer):
        self.connections += 1
        if self.connections > self.max_connections:
            self.max_connections = self.connections
        try:
            await self.serve(reader, writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Shutdown. Not re-raised: Python 3.11's stream callback calls
            # task.exception() on a cancelled handler and logs a traceback.
            pass
        except Exception:
            traceback.print_exc(file=sys.stderr)
        finally:
            self.connections -= 1
            try:
                writer.close()
            except Exception:
                pass

    async def serve(self, reader, writer):
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return
            except asyncio.LimitOverrunError:
                writer.write(build_response(
                    431, error_body(431, "request headers too large"),
                    close=True))
                await writer.drain()
                return
            # One decode per request: latin-1 maps bytes 1:1, so nothing
            # is lost and per-line decodes stay off the hot path.
            lines = head[:-4].decode("latin-1").split("\r\n")
            while lines and not lines[0]:
                lines.pop(0)     # stray CRLFs before a request line
            if not lines:
                continue
            parts = lines[0].split(" ")
            if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                writer.write(build_response(
                    400, error_body(400, "malformed request line"),
                    close=True))
                await writer.drain()
                return
            method, target, version = parts
            headers = {}
            bad = False
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep or not name or name != name.strip():
                    bad = True
                    break
                headers[name.lower()] = value.strip()
            if bad:
                writer.write(build_response(
                    400, error_body(400, "malformed header line"),
                    close=True))
                await writer.drain()
                return
            conn_hdr = headers.get("connection", "").lower()
            if version == "HTTP/1.1":
                keep = "close" not in conn_hdr
            else:
                keep = "keep-alive" in conn_hdr

            # ---- body
            te = headers.get("transfer-encoding")
            if te is not None:
                if te.lower() != "chunked":
                    writer.write(build_response(
                        501, error_body(501, "unsupported transfer-encoding"),
                        close=True))
                    await writer.drain()
                    return
                if headers.get("expect", "").lower() == "100-continue":
                    writer.write(CONTINUE)
                body = await self.read_chunked(reader)
                if body is None:
                    writer.write(build_response(
                        413, error_body(413, "request body too large"),
                        close=True))
                    await writer.drain()
                    return
            else:
                cl = headers.get("content-length")
                n = 0
                if cl is not None:
                    if not cl.isdigit():
                        writer.write(build_response(
                            400, error_body(400, "bad content-length"),
                            close=True))
                        await writer.drain()
                        return
                    n = int(cl)
                if n > self.max_body:
                    writer.write(build_response(
                        413, error_body(413, "request body too large"),
                        close=True))
                    await writer.drain()
                    return
                if n and headers.get("expect", "").lower() == "100-continue":
                    writer.write(CONTINUE)
                body = await reader.readexactly(n) if n else b""

            path, _, query = target.partition("?")
            # GET of the chat path lists stored completions (records.py).
            if is_chat_path(path) and method != "GET":
                if method != "POST":
                    writer.write(build_response(
                        405, error_body(405, "use POST"),
                        extra=b"Allow: POST\r\n", close=not keep))
                    await writer.drain()
                    if not keep:
                        return
                    continue
                done = await self.completions(headers, body, writer, reader,
                                              keep, query)
                if not done or not keep:
                    return
                continue
            delay = self.records.create_delay(method, path)
            if delay:
                await asyncio.sleep(delay)
            reply = self.route_other(method, path, query, body, headers)
            if reply is None:
                return
            if self.verbose:
                sys.stderr.write("stub: %s %s status=%d\n"
                                 % (method, path, reply.status))
            full = build_response(reply.status, reply.body, reply.ctype,
                                  reply.extra, close=not keep)
            if b"x-stub-fault: close_mid_body" in reply.extra:
                # The headers and half the body, then the connection
                # closes: the caller cannot tell whether it generated.
                writer.write(full[:len(full) - len(reply.body) // 2])
                await writer.drain()
                return
            if reply.ctype == b"application/jsonl" and \
                    self.records.content_seconds > 0 and reply.body:
                # A slow download: the headers, then the body in pieces.
                head_len = len(full) - len(reply.body)
                writer.write(full[:head_len])
                pieces = 20
                step = max(1, -(-len(reply.body) // pieces))
                for i in range(0, len(reply.body), step):
                    await asyncio.sleep(
                        self.records.content_seconds / pieces)
                    writer.write(reply.body[i:i + step])
                    await writer.drain()
                if not keep:
                    return
                continue
            writer.write(full)
            await writer.drain()
            if not keep:
                return

    async def read_chunked(self, reader):
        chunks = []
        total = 0
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass         # trailers
                return b"".join(chunks)
            total += size
            if total > self.max_body:
                return None
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)

    # ---- /v1/chat/completions ---------------------------------------------

    async def completions(self, headers, body, writer, reader, keep,
                          query=""):
        """Serve one completion request; False means close the connection."""
        t0 = time.monotonic()
        self.requests += 1
        self.in_flight += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
        ckey = self.concurrency_key(body)
        if ckey is not None:
            n = self.in_flight_by_key[ckey] + 1
            self.in_flight_by_key[ckey] = n
            if n > self.max_concurrent_by_key.get(ckey, 0):
                self.max_concurrent_by_key[ckey] = n
        key = headers.get("idempotency-key") or None
        action = None
        fault_kind = ""
        replay = False
        try:
            if key is not None:
                self.req_by_key[key] = self.req_by_key.get(key, 0) + 1
                for name in self.record_headers:
                    if name in headers:
                        self.headers_by_key.setdefault(key, {}).setdefault(
                            name, []).append(headers[name])
            reply = self.refuse(headers, query)
            if reply is None:
                reply, action, fault_kind, replay = await self.complete(
                    headers, body, key)
                # Stored whether or not the caller hears of it: a hang, a
                # cut body or a reset still generated, and the provider
                # keeps what it generated.
                if (reply.status == 200 and not replay
                        and b'"store"' in body):
                    for extra in reply.more:
                        self.keep_stored(body, extra)
                    self.keep_stored(body, reply.body)
        except BadDirective as e:
            reply = Reply(400, error_body(400, "stub: %s" % e))
        except Exception:
            traceback.print_exc(file=sys.stderr)
            reply = Reply(500, error_body(500, "stub internal error"))
        if b"x-request-id:" not in reply.extra:
            # Errors carry a request id too, as real endpoints' do; it never
            # collides with a generation's req-<n>.
            self.err_seq += 1
            reply.extra += b"x-request-id: req-err-%d\r\n" % self.err_seq
        try:
            if action is None:
                writer.write(build_response(reply.status, reply.body,
                                            reply.ctype, reply.extra,
                                            close=not keep))
                await writer.drain()
                return True
            if action == "hang":
                # Never answer; hold the connection until the client leaves.
                while True:
                    try:
                        data = await reader.read(65536)
                    except (ConnectionError, OSError):
                        break
                    if not data:
                        break
                return False
            if action == "close_mid_body":
                full = build_response(reply.status, reply.body, reply.ctype,
                                      reply.extra)
                cut = len(full) - len(reply.body) + len(reply.body) // 2
                writer.write(full[:cut])
                await writer.drain()
                return False
            if action == "close":
                return False
            if action == "reset":
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    # SO_LINGER 0: close() sends RST instead of FIN.
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
                writer.transport.abort()
                return False
            raise AssertionError(action)
        finally:
            self.in_flight -= 1
            if ckey is not None:
                self.in_flight_by_key[ckey] -= 1
            if self.verbose:
                sys.stderr.write(
                    "stub: POST /v1/chat/completions status=%s key=%s "
                    "fault=%s replay=%d %.1fms\n" % (
                        action or reply.status, key or "-", fault_kind or "-",
                        replay, (time.monotonic() - t0) * 1000.0))

    def keep_stored(self, body, answer):
        """A chat completion asked to be stored (store: true), kept with
        its metadata for GET /v1/chat/completions?metadata[k]=v."""
        try:
            req = json.loads(body)
            if req.get("store") is True:
                self.records.store_completion(req, json.loads(answer))
        except (ValueError, AttributeError):
            pass

    def batch_generate(self, key, body, endpoint, kind="", params=None):
        """One generation outside a chat completion request: a line of a
        batch file, or POST /v1/responses. Counted per key like any
        other. Returns the answer as a dict in the endpoint's shape; kind
        "oversize" (params {"bytes": N}) makes a chat answer N bytes long."""
        self.seq += 1
        n = self.seq
        self.generations += 1
        if key is not None:
            self.by_key[key] = self.by_key.get(key, 0) + 1
        model = body.get("model") if isinstance(body, dict) else None
        model = model if isinstance(model, str) else "stub-1"
        if endpoint == "/v1/responses":
            given = body.get("input")
            text = given if isinstance(given, str) else json.dumps(given)
            content = "Stub model response %d (input %s)." % (
                n, hashlib.sha256(text.encode()).hexdigest()[:16])
            tin = max(1, len(text) // 4)
            tout = (len(content) + 3) // 4
            return {"id": "resp_%d" % n, "object": "response",
                    "created_at": int(time.time()), "model": model,
                    "status": "completed",
                    "output": [{"type": "message", "role": "assistant",
                                "content": [{"type": "output_text",
                                             "text": content}]}],
                    "usage": {"input_tokens": tin, "output_tokens": tout,
                              "total_tokens": tin + tout},
                    "store": body.get("store", True),
                    "metadata": body.get("metadata") or {}}
        messages = body.get("messages") or []
        last_user = ""
        chars = 0
        for m in messages:
            if isinstance(m, dict):
                t = content_text(m.get("content"))
                chars += len(t)
                if m.get("role") == "user":
                    last_user = t
        return json.loads(self.generate(n, model, key, chars, last_user,
                                        kind, params or {}).body)

    def concurrency_key(self, body):
        """The STUB_CONCURRENCY_KEY of a request body, or None."""
        if self.concurrency_re is None:
            return None
        try:
            req = json.loads(body)
            text = "\n".join(content_text(m.get("content"))
                             for m in req.get("messages") or ()
                             if isinstance(m, dict))
        except (ValueError, UnicodeDecodeError, AttributeError, TypeError):
            return None
        m = self.concurrency_re.search(text)
        if m is None:
            return None
        return m.group(1) if m.groups() else m.group(0)

    def refuse(self, headers, query):
        """The 401 or 404 for a missing required header or parameter."""
        for name, want in self.require_headers:
            got = headers.get(name, "").encode("latin-1")
            if not hmac.compare_digest(got, want):
                self.refused += 1
                # Names only: a required value may be a credential.
                return Reply(401, error_body(
                    401, "missing or wrong header %s" % name))
        got = {}
        for pair in query.split("&") if query else ():
            n, _, v = pair.partition("=")
            got.setdefault(unquote_plus(n), unquote_plus(v))
        for name, want in self.require_query:
            if got.get(name) != want:
                self.refused += 1
                return Reply(404, error_body(
                    404, "Resource not found: query parameter %s missing "
                    "or unsupported" % name, code="404"))
        return None

    async def complete(self, headers, body, key):
        """Returns (reply, action, fault_kind, replayed)."""
        if self.auth is not None:
            got = headers.get("authorization", "").encode("latin-1")
            if not hmac.compare_digest(got, self.auth):
                return (Reply(401, error_body(
                    401, "incorrect API key provided")), None, "", False)
        try:
            req = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return (Reply(400, error_body(400, "body is not valid JSON")),
                    None, "", False)
        if not isinstance(req, dict):
            return (Reply(400, error_body(400, "body must be a JSON object")),
                    None, "", False)
        model = req.get("model")
        messages = req.get("messages")
        if not isinstance(model, str) or not model:
            return (Reply(400, error_body(400, "missing required parameter: "
                                          "'model'")), None, "", False)
        if not isinstance(messages, list) or not messages:
            return (Reply(400, error_body(400, "missing required parameter: "
                                          "'messages'")), None, "", False)
        chars = 0
        last_user = ""
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                return (Reply(400, error_body(
                    400, "each message needs a string 'role'")),
                    None, "", False)
            text = content_text(m.get("content"))
            chars += len(text)
            if m["role"] == "user":
                last_user = text
        if req.get("stream"):
            return (Reply(400, error_body(
                400, "stub: stream=true is not supported")), None, "", False)

        hdr_dedupe = headers.get("x-stub-dedupe")
        if hdr_dedupe is None:
            dedupe = self.dedupe and key is not None
        else:
            dedupe = key is not None and hdr_dedupe.strip() in ("1", "true")

        # Dedupe: replay, conflict or wait happen before any fault so that a
        # retry of a request that already generated is never charged again.
        body_hash = None
        if dedupe:
            body_hash = hashlib.sha256(json.dumps(
                req, sort_keys=True, separators=(",", ":")).encode()).digest()
            while True:
                entry = self.store.get(key)
                if entry is None:
                    break
                if entry.body_hash != body_hash:
                    self.conflicts += 1
                    return (Reply(422, error_body(
                        422, "Idempotency-Key reused with a different "
                        "request body", etype="idempotency_conflict",
                        code="idempotency_conflict")), None, "", False)
                if entry.reply is not None:
                    self.replays += 1
                    r = entry.reply
                    return (Reply(r.status, r.body,
                                  r.extra + b"x-stub-replayed: 1\r\n",
                                  r.ctype), None, "", True)
                await asyncio.shield(entry.future)

        limited, rl_extra = self.take_rate_limit(model, req, body)
        if limited is not None:
            return limited, None, "rate_limit", False

        fault = self.pick_fault(headers, last_user, key, body)
        kind = fault.kind if fault is not None else ""
        if fault is not None:
            self.faults[kind] = self.faults.get(kind, 0) + 1
            if fault.status:
                ms = int(fault.params.get("ms", 0))
                if ms:
                    await asyncio.sleep(ms / 1000.0)
                extra = b"x-stub-fault: " + kind.encode() + b"\r\n"
                ra = fault.params.get("retry_after")
                if ra is not None:
                    extra += b"Retry-After: " + ra.encode() + b"\r\n"
                if fault.status == 429:
                    self.requests_429 += 1
                    if ra is not None:
                        now = time.monotonic()
                        self.pause_until[model] = (now, now + int(ra))
                return (Reply(fault.status, error_body(
                    fault.status, "stub injected fault %s" % kind),
                    extra), None, kind, False)

        if kind == "drop":
            # Read, then the connection closes before the upstream sees
            # it: the caller cannot tell, and nothing generated.
            return Reply(200, b""), "close", kind, False

        # A gateway that re-sent the request upstream (generations=N):
        # N - 1 generations before the one answered, each billed and
        # stored, none sent.
        more = []
        for _ in range(int(fault.params.get("generations", 1)) - 1
                       if fault is not None else 0):
            self.seq += 1
            more.append(self.generate(
                self.seq, model, key, chars, last_user, kind,
                fault.params).body)
            self.generations += 1
            if key is not None:
                self.by_key[key] = self.by_key.get(key, 0) + 1

        # From here on the upstream generates: count it now, before any
        # wait, so a client that gives up still sees it billed.
        n = self.seq + 1
        reply = self.generate(n, model, key, chars, last_user, kind,
                              fault.params if fault is not None else None)
        reply.more = tuple(more)
        reply.extra += rl_extra
        self.seq = n
        self.generations += 1
        if key is not None:
            self.by_key[key] = self.by_key.get(key, 0) + 1
        entry = None
        if dedupe:
            entry = Entry(body_hash,
                          asyncio.get_running_loop().create_future())
            self.store[key] = entry
        if fault is not None and "ms" in fault.params:
            delay = int(fault.params["ms"]) / 1000.0
        else:
            delay = self.latency_ms / 1000.0
            if self.jitter_ms > 0:
                delay += self.rng.uniform(0, self.jitter_ms) / 1000.0
        action = kind if kind in ("hang", "close_mid_body", "close",
                                  "reset") else None
        if action == "hang":
            # The upstream finishes in the background; only this client
            # never hears about it. A deduplicating retry replays it.
            if entry is not None:
                task = asyncio.get_running_loop().create_task(
                    self.finish_later(key, entry, reply, delay))
                self.background.add(task)   # the loop keeps weak refs only
                task.add_done_callback(self.background.discard)
            return reply, action, kind, False
        try:
            if delay > 0:
                await asyncio.sleep(delay)
        finally:
            if entry is not None:
                self.settle(key, entry, reply)
        return reply, action, kind, False

    def take_rate_limit(self, model, req, body):
        """(None, headers) when the request fits the window, else
        (the 429 Reply, b"").

        Counts the requests that arrive while a 429's reset, as told, has
        not passed (after STUB_PAUSE_GRACE_MS, for calls already on the
        way). Token cost: ceil(body bytes / 4) + max_tokens (or
        max_completion_tokens; 0 when absent), the estimate Runledger's
        budgets reserve."""
        now = time.monotonic()
        paused = self.pause_until.get(model)
        if paused is not None:
            if now >= paused[1]:
                del self.pause_until[model]
            elif now >= paused[0] + self.pause_grace_ms / 1000.0:
                self.during_pause += 1
        if self.rpm <= 0 and self.tpm <= 0:
            return None, b""
        cap = req.get("max_tokens", req.get("max_completion_tokens", 0))
        cost = (len(body) + 3) // 4 + (cap if isinstance(cap, int) else 0)
        win = self.windows.get(model)
        if win is None:
            win = self.windows[model] = collections.deque()
        while win and win[0][0] <= now - self.window_s:
            win.popleft()
        used_tokens = sum(t for _, t in win)
        over_r = self.rpm > 0 and len(win) + 1 > self.rpm
        over_t = self.tpm > 0 and used_tokens + cost > self.tpm
        left_r = max(self.rpm - len(win) - (0 if over_r or over_t else 1), 0)
        left_t = max(self.tpm - used_tokens - (0 if over_r or over_t
                                               else cost), 0)
        # When the oldest entries leave the window: the reset of each.
        reset_r = (win[0][0] + self.window_s - now) if win else 0.0
        reset_t = reset_r
        if over_t:
            need, acc = used_tokens + cost - self.tpm, 0
            for t0, tk in win:
                acc += tk
                if acc >= need:
                    reset_t = t0 + self.window_s - now
                    break
        extra = b""
        if self.rpm > 0:
            extra += (b"x-ratelimit-limit-requests: %d\r\n"
                      b"x-ratelimit-remaining-requests: %d\r\n"
                      b"x-ratelimit-reset-requests: %s\r\n" % (
                          self.rpm, left_r, go_duration(reset_r)))
        if self.tpm > 0:
            extra += (b"x-ratelimit-limit-tokens: %d\r\n"
                      b"x-ratelimit-remaining-tokens: %d\r\n"
                      b"x-ratelimit-reset-tokens: %s\r\n" % (
                          self.tpm, left_t, go_duration(reset_t)))
        if not (over_r or over_t):
            win.append((now, cost))
            self.rl_accepted += 1
            if len(win) > self.rl_max_requests:
                self.rl_max_requests = len(win)
            if used_tokens + cost > self.rl_max_tokens:
                self.rl_max_tokens = used_tokens + cost
            return None, extra
        self.rl_limited += 1
        self.requests_429 += 1
        wait = max(reset_r if over_r else 0.0, reset_t if over_t else 0.0)
        wait_ms = max(1, int(wait * 1000 + 0.999))
        self.pause_until[model] = (now, now + wait_ms / 1000.0)
        extra += (b"retry-after: %d\r\nretry-after-ms: %d\r\n"
                  % ((wait_ms + 999) // 1000, wait_ms))
        what = "requests" if over_r else "tokens"
        return Reply(429, error_body(
            429, "Rate limit reached for %s in stub on %s per %gs: "
            "Limit %d. Please try again in %dms." % (
                model, what, self.window_s,
                self.rpm if over_r else self.tpm, wait_ms),
            etype=what, code="rate_limit_exceeded"), extra), b""

    async def finish_later(self, key, entry, reply, delay):
        try:
            if delay > 0:
                await asyncio.sleep(delay)
        finally:
            self.settle(key, entry, reply)

    def settle(self, key, entry, reply):
        entry.reply = reply
        if not entry.future.done():
            entry.future.set_result(None)
        store = self.store
        if len(store) > self.max_entries:
            # Oldest completed keys are pruned, like a real endpoint's
            # retention window: a pruned key generates anew. Prune down to
            # 90% so the scan is amortised over many requests.
            excess = len(store) - self.max_entries * 9 // 10
            victims = []
            for k, e in store.items():
                if e.reply is not None:
                    victims.append(k)
                    if len(victims) >= excess:
                        break
            for k in victims:
                del store[k]

    def generate(self, n, model, key, chars, last_user, kind, params):
        prompt_tokens = max(1, chars // 4)
        if kind == "invalid_json":
            body = ('{"id":"chatcmpl-%d","object":"chat.completion",'
                    '"choices":[{"index":0,"message":{"role":"assistant",'
                    '"content":"truncated' % n).encode()
            return Reply(200, body, b"x-request-id: req-%d\r\n"
                         b"x-stub-fault: invalid_json\r\n" % n)
        if kind == "tool_call":
            args = json.dumps({"query": last_user[-40:], "generation": n})
            completion_tokens = (len(args) + 3) // 4 + 8
            body = (TOOL_CALL_TMPL % (
                n, int(time.time()), json.dumps(model), n, json.dumps(args),
                prompt_tokens, completion_tokens,
                prompt_tokens + completion_tokens)).encode()
            return Reply(200, body, b"x-request-id: req-%d\r\n"
                         b"x-stub-fault: tool_call\r\n" % n)
        if kind == "no_content":
            body = (COMPLETION_TMPL % (
                n, int(time.time()), json.dumps(model), "null",
                prompt_tokens, 0, prompt_tokens)).encode()
            return Reply(200, body, b"x-request-id: req-%d\r\n"
                         b"x-stub-fault: no_content\r\n" % n)
        if kind == "empty":
            content = ""
        elif kind == "oversize":
            size = int(params.get("bytes", DEFAULT_OVERSIZE_BYTES))
            unit = "stub oversize generation %d; " % n
            content = (unit * (size // len(unit) + 1))[:size]
        else:
            digest = hashlib.sha256(last_user.encode("utf-8", "replace")) \
                .hexdigest()[:16]
            content = ("Stub model answer, generation %d (input %s, key %s)."
                       % (n, digest, key if key is not None else "none"))
        completion_tokens = (len(content) + 3) // 4
        body = (COMPLETION_TMPL % (
            n, int(time.time()), json.dumps(model), json.dumps(content),
            prompt_tokens, completion_tokens,
            prompt_tokens + completion_tokens)).encode()
        extra = b"x-request-id: req-%d\r\n" % n
        if kind:
            extra += b"x-stub-fault: " + kind.encode() + b"\r\n"
        return Reply(200, body, extra)

    def pick_fault(self, headers, last_user, key, body):
        fault = None
        hdr = headers.get("x-stub-fault")
        if hdr:
            fault = parse_directive(hdr, bare_ok=True)
        elif "[[fault:" in last_user:
            fault = parse_directive(last_user)
        if fault is not None:
            times = fault.params.get("times")
            if times is None:
                return fault
            ident = key if key is not None else \
                hashlib.sha256(body).hexdigest()
            slot = (ident, fault.spec)
            used = self.times_used.get(slot, 0)
            if used >= int(times):
                # then=KIND: the requests after the first K get KIND.
                then = fault.params.get("then")
                return make_fault(then, {}, fault.spec) if then else None
            self.times_used[slot] = used + 1
            return fault
        g = self.global_fault
        if g is None:
            return None
        if self.global_prob < 1.0 and self.rng.random() >= self.global_prob:
            return None
        if self.global_per_key:
            if self.global_times is None:
                return g
            slot = (key, "\0global")
            used = self.times_used.get(slot, 0)
            if used >= self.global_times:
                return None
            self.times_used[slot] = used + 1
            return g
        if self.global_times is not None:
            self.global_times -= 1
            if self.global_times <= 0:
                self.global_fault = None
        return g

    # ---- other endpoints --------------------------------------------------

    def route_other(self, method, path, query, body, headers=None):
        served = self.records.route(method, path, query, headers or {}, body)
        if served is not None:
            status, payload = served
            if status == 0:
                return None     # close the connection unanswered
            if status == -1:    # answered, then cut mid-body
                return Reply(200, json.dumps(payload).encode(),
                             b"x-stub-fault: close_mid_body\r\n")
            if isinstance(payload, bytes):
                return Reply(status, payload, ctype=b"application/jsonl")
            return Reply(status, json.dumps(payload).encode())
        if path == "/healthz":
            if method == "GET":
                return Reply(200, b"ok", ctype=CT_TEXT)
            return Reply(405, error_body(405, "use GET"), b"Allow: GET\r\n")
        if path == "/stats":
            if method != "GET":
                return Reply(405, error_body(405, "use GET"),
                             b"Allow: GET\r\n")
            return Reply(200, json.dumps(self.stats(query)).encode())
        if path == "/admin/reset":
            if method != "POST":
                return Reply(405, error_body(405, "use POST"),
                             b"Allow: POST\r\n")
            self.reset()
            return Reply(200, b'{"reset":true}')
        if path == "/admin/fault":
            return self.admin_fault(method, body)
        if path == "/admin/batch_fault":
            status, doc = self.records.admin_batch_fault(method, body)
            return Reply(status, json.dumps(doc).encode())
        if path == "/admin/batches":
            if method != "GET":
                return Reply(405, error_body(405, "use GET"),
                             b"Allow: GET\r\n")
            status, doc = self.records.admin_batches()
            return Reply(status, json.dumps(doc).encode())
        return Reply(404, error_body(404, "no such path: %s" % path))

    def stats(self, query):
        q = parse_qs(query)
        if "concurrency_key" in q:
            k = q["concurrency_key"][0]
            return {"concurrency_key": k,
                    "in_flight": self.in_flight_by_key.get(k, 0),
                    "max_concurrent": self.max_concurrent_by_key.get(k, 0)}
        if "key" in q:
            k = q["key"][0]
            out = {"key": k, "generations": self.by_key.get(k, 0),
                   "requests": self.req_by_key.get(k, 0),
                   "stored": k in self.store}
            # Only when asked for: a caller that records nothing sees the
            # shape it always saw.
            if self.record_headers:
                out["headers"] = self.headers_by_key.get(k, {})
            return out
        return {
            "requests": self.requests,
            "refused": self.refused,            # before by_key: readers that scan a prefix find them
            "requests_429": self.requests_429,
            "rate_limited": self.rl_limited,
            "max_requests_per_window": self.rl_max_requests,
            "max_tokens_per_window": self.rl_max_tokens,
            "requests_during_pause": self.during_pause,
            "generations": self.generations,
            "by_key": self.by_key,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "in_flight_by_key": {k: n for k, n in
                                 self.in_flight_by_key.items() if n},
            "max_concurrent_by_key": self.max_concurrent_by_key,
            "faults": self.faults,
            "replays": self.replays,
            "conflicts": self.conflicts,
            "connections": self.connections,
            "max_connections": self.max_connections,
            "stored": len(self.store),
            "batches_created": self.records.batches_created,
            "batch_lines_chat":
                self.records.batch_lines["/v1/chat/completions"],
            "batch_lines_responses":
                self.records.batch_lines["/v1/responses"],
            "batch_lines_refused": self.records.batch_lines_refused,
            "files": len(self.records.files),
            "stored_completions": len(self.records.completions),
            "uploads": self.records.uploads,
            "file_reads": self.records.file_reads,
            "list_pages": self.records.list_pages,
            "batch_polls": self.records.batch_polls,
            "batch_poll_times": self.records.batch_poll_times,
            "batch_fault_uses": self.records.batch_fault_uses,
            "dedupe": self.dedupe,
            "rate_limit": {
                "rpm": self.rpm, "tpm": self.tpm,
                "window_seconds": self.window_s,
                "accepted": self.rl_accepted,
                "limited": self.rl_limited,
                "max_requests_per_window": self.rl_max_requests,
                "max_tokens_per_window": self.rl_max_tokens,
            },

            "global_fault": self.global_fault_json(),
        }

    def global_fault_json(self):
        g = self.global_fault
        if g is None:
            return None
        d = {"mode": g.kind, "times": self.global_times,
             "probability": self.global_prob, "per_key": self.global_per_key}
        d.update(g.params)
        return d

    def admin_fault(self, method, body):
        if method == "GET":
            return Reply(200, json.dumps(self.global_fault_json()).encode())
        if method == "DELETE":
            self.global_fault = None
            return Reply(200, b'{"fault":null}')
        if method != "POST":
            return Reply(405, error_body(405, "use GET, POST or DELETE"),
                         b"Allow: GET, POST, DELETE\r\n")
        try:
            cfg = json.loads(body)
            if not isinstance(cfg, dict):
                raise ValueError("body must be a JSON object")
            mode = str(cfg.get("mode", "")).strip()
            if not mode:
                raise ValueError("missing 'mode'")
            params = {}
            for k in ("ms", "bytes", "retry_after"):
                if cfg.get(k) is not None:
                    params[k] = str(int(cfg[k]))
            fault = make_fault(mode, params, "\0global")
            times = cfg.get("times")
            times = None if times is None else int(times)
            prob = float(cfg.get("probability", 1.0))
            if not 0.0 <= prob <= 1.0:
                raise ValueError("probability must be within 0..1")
        except (ValueError, TypeError, BadDirective) as e:
            return Reply(400, error_body(400, "bad fault config: %s" % e))
        self.global_fault = fault
        self.global_times = times
        self.global_prob = prob
        self.global_per_key = bool(cfg.get("per_key", False))
        # per_key times restart from zero for each new config.
        for slot in [s for s in self.times_used if s[1] == "\0global"]:
            del self.times_used[slot]
        return Reply(200, json.dumps(self.global_fault_json()).encode())


def write_port_file(path, port):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, path)    # readers never see a half-written file


async def main_async(args):
    stub = Stub(parse_pairs(args.require_header, "--require-header"),
                parse_pairs(args.require_query, "--require-query"))
    server = await asyncio.start_server(
        stub.handle_conn, args.host, args.port, limit=MAX_HEADER_BYTES,
        backlog=args.backlog, reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    if args.port_file:
        write_port_file(args.port_file, port)
    sys.stdout.write("%d\n" % port)
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    await stop.wait()
    # No wait_closed(): from Python 3.12 on it waits for every connection,
    # and a hung one never ends. asyncio.run() cancels the handlers.
    server.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0,
                    help="0 picks a free port (printed on stdout)")
    ap.add_argument("--port-file", help="write the bound port here")
    ap.add_argument("--backlog", type=int, default=4096)
    ap.add_argument("--require-header", action="append", metavar="NAME=VALUE",
                    help="answer 401 to a completion request without this "
                    "header (repeatable; the value is never printed)")
    ap.add_argument("--require-query", action="append", metavar="NAME=VALUE",
                    help="answer 404 to a completion request without this "
                    "query parameter (repeatable)")
    ap.add_argument("--rpm", type=int, help="requests per window and model "
                    "before 429 (STUB_RPM; 0: unlimited)")
    ap.add_argument("--tpm", type=int, help="tokens per window and model "
                    "before 429 (STUB_TPM): ceil(body bytes/4) + max_tokens")
    ap.add_argument("--window-seconds", type=float, help="the sliding "
                    "window of --rpm/--tpm (STUB_WINDOW_SECONDS, 60)")
    args = ap.parse_args()
    for flag, env in (("rpm", "STUB_RPM"), ("tpm", "STUB_TPM"),
                      ("window_seconds", "STUB_WINDOW_SECONDS")):
        if getattr(args, flag) is not None:
            os.environ[env] = str(getattr(args, flag))
    raise_nofile()
    try:
        asyncio.run(main_async(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
