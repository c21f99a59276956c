"""The provider's records, as the stub keeps them: uploaded files, batches
and stored completions and responses (OpenAI's /v1/files, /v1/batches,
`store: true` chat completions listed by metadata, /v1/responses).

Imported by stub_model.py, which routes these paths here. A batch create
sent with `X-Stub-Fault: drop_reply` is made and then answered by a closed
connection, as when the caller dies between create and reply; a
`POST /v1/responses` sent with `X-Stub-Fault: close_mid_body` is answered
with half its body, then the connection closes. Standard library
only. Each record is kept in memory for the stub's life; a batch advances
when it is read (no background task): validating -> in_progress after
STUB_BATCH_START_MS, completed after STUB_BATCH_SECONDS, expired after
STUB_BATCH_EXPIRE_SECONDS when that is set and shorter. The first
STUB_BATCH_CREATE_DELAY_TIMES (1) creates are made and answered
STUB_BATCH_CREATE_DELAY_MS late; a file's content is sent in pieces
over STUB_FILE_CONTENT_SECONDS. A line whose
url is not its batch's endpoint, or whose body is not that endpoint's
request, comes back in the error file with a 400; a line whose body
holds `[[fault:NNN]]` comes back with status NNN; a batch with a line
holding `[[fault:batch_expire]]` expires instead of completing. A stored
completion becomes visible to list calls STUB_STORE_LAG_MS after it was
made (eventual consistency, as the provider's is).

Batch faults set at run time (POST /admin/batch_fault, served through
stub_model.py), each counted down per use: create_late (the next N
creates made and answered M ms late), create_drop_reply (the next N
creates made, their connection closed unanswered), list_lag (the next N
batches missing from GET /v1/batches for M ms after their creation),
poll_404 (the next N GET /v1/batches/ID answered 404), expire_partial
(the next N batches expire with the first half of their lines answered
and the rest refused batch_expired). GET /admin/batches lists every batch
held, read-only, for a checker.
"""

import json
import os
import re
import time
from urllib.parse import parse_qs

POLL_TIMES_MAX = 10000
# The batch faults /admin/batch_fault may set.
BATCH_FAULT_MODES = ("create_late", "create_drop_reply", "list_lag",
                     "poll_404", "expire_partial")

DIRECTIVE_RE = re.compile(r"\[\[fault:\s*([A-Za-z0-9_]+)([^\]]*)\]\]")


def _env_float(name, default):
    try:
        return float(os.environ.get(name) or default)
    except ValueError:
        return default


def _page(items, query, page_max=100):
    """OpenAI's list page: after=ID (exclusive), limit (default 20, at most
    page_max)."""
    q = parse_qs(query)
    limit = 20
    try:
        limit = max(1, min(100, int(q.get("limit", ["20"])[0])))
    except ValueError:
        pass
    limit = min(limit, page_max)
    after = q.get("after", [None])[0]
    if after is not None:
        ids = [i["id"] for i in items]
        items = items[ids.index(after) + 1:] if after in ids else []
    page = items[:limit]
    return {"object": "list", "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > limit}


def _multipart(headers, body):
    """The fields of a multipart/form-data body: name -> (filename, bytes)."""
    ctype = headers.get("content-type", "")
    m = re.search(r'boundary="?([^";]+)"?', ctype)
    if not ctype.startswith("multipart/form-data") or not m:
        raise ValueError("expected multipart/form-data with a boundary")
    sep = b"--" + m.group(1).encode("latin-1")
    fields = {}
    for part in body.split(sep)[1:]:
        if part.startswith(b"--"):
            break
        head, _, data = part.lstrip(b"\r\n").partition(b"\r\n\r\n")
        if data.endswith(b"\r\n"):
            data = data[:-2]
        disp = re.search(rb'name="([^"]*)"(?:; filename="([^"]*)")?', head)
        if not disp:
            continue
        fields[disp.group(1).decode()] = (
            disp.group(2).decode() if disp.group(2) else None, data)
    return fields


class Records:
    def __init__(self, stub):
        self.stub = stub
        self.batch_start_ms = _env_float("STUB_BATCH_START_MS", 0)
        self.batch_seconds = _env_float("STUB_BATCH_SECONDS", 0.5)
        self.batch_expire = _env_float("STUB_BATCH_EXPIRE_SECONDS", 0)
        self.store_lag_ms = _env_float("STUB_STORE_LAG_MS", 0)
        # A create that reaches the provider late: the first
        # STUB_BATCH_CREATE_DELAY_TIMES (1) creates are made, and
        # answered, STUB_BATCH_CREATE_DELAY_MS after they arrive.
        self.create_delay_ms = _env_float("STUB_BATCH_CREATE_DELAY_MS", 0)
        self.create_delays_left = int(
            _env_float("STUB_BATCH_CREATE_DELAY_TIMES", 1))
        # A slow download: a file's content is sent in pieces over
        # STUB_FILE_CONTENT_SECONDS.
        self.content_seconds = _env_float("STUB_FILE_CONTENT_SECONDS", 0)
        self.file_reads = 0     # GET /v1/files/ID/content served
        # The most objects a list page holds, whatever `limit` asks: a
        # small value puts a caller's object past the first page.
        self.page_max = max(1, int(_env_float("STUB_LIST_PAGE_MAX", 100)))
        self.uploads = 0
        self.list_pages = {"files": 0, "batches": 0}
        # GET /v1/batches/ID: how many, and when (time.monotonic(), the
        # last POLL_TIMES_MAX), so a test can check how they were spaced.
        self.batch_polls = 0
        self.batch_poll_times = []
        self.seq = 0
        self.files = {}         # id -> (meta dict, bytes)
        self.batches = {}       # id -> dict (the batch object)
        self.completions = []   # stored chat completions, oldest first
        self.responses = {}     # id -> response object
        self.batches_created = 0
        # Lines of finished batches answered, by the endpoint they named,
        # and lines refused for their url or body.
        self.batch_lines = {"/v1/chat/completions": 0, "/v1/responses": 0}
        self.batch_lines_refused = 0
        # mode -> {"times": uses left, "ms": M}; /admin/batch_fault.
        self.batch_faults = {}
        self.batch_fault_uses = {m: 0 for m in BATCH_FAULT_MODES}
        # File ids whose content was served: a batch whose output or
        # error file is among them was read.
        self.files_read = set()

    # ---- batch faults (/admin/batch_fault) --------------------------------

    def take_batch_fault(self, mode):
        """The fault of mode, counted down by one use, or None."""
        f = self.batch_faults.get(mode)
        if f is None:
            return None
        f["times"] -= 1
        if f["times"] <= 0:
            del self.batch_faults[mode]
        self.batch_fault_uses[mode] += 1
        return f

    def admin_batch_fault(self, method, body):
        """(status, dict): GET the faults set, DELETE clears them all,
        POST {"mode", "times" (1), "ms" (0)} sets one (replacing the same
        mode's)."""
        if method == "GET":
            return 200, {"faults": self.batch_faults,
                         "uses": self.batch_fault_uses}
        if method == "DELETE":
            self.batch_faults = {}
            return 200, {"faults": {}}
        if method != "POST":
            return 405, {"error": {"message": "use GET, POST or DELETE"}}
        try:
            cfg = json.loads(body)
            if not isinstance(cfg, dict):
                raise ValueError("body must be a JSON object")
            mode = cfg.get("mode")
            if mode not in BATCH_FAULT_MODES:
                raise ValueError("mode must be one of %s"
                                 % ", ".join(BATCH_FAULT_MODES))
            times = int(cfg.get("times", 1))
            ms = int(cfg.get("ms", 0))
            if times < 1 or ms < 0:
                raise ValueError("times must be >= 1 and ms >= 0")
        except (ValueError, TypeError) as e:
            return 400, {"error": {"message": "bad batch fault: %s" % e}}
        self.batch_faults[mode] = {"times": times, "ms": ms}
        return 200, {"faults": self.batch_faults}

    def admin_batches(self):
        """Every batch held, as it stands (nothing advances): for a
        checker that groups them by their metadata."""
        out = []
        for b in self.batches.values():
            _, data = self.files.get(b["input_file_id"], (None, b""))
            cids = []
            for line in data.splitlines():
                try:
                    cids.append(json.loads(line).get("custom_id"))
                except ValueError:
                    pass
            out.append({
                "id": b["id"], "status": b["status"],
                "metadata": b["metadata"], "custom_ids": cids,
                "cancelled": b["cancelled_at"] is not None,
                "output_file_id": b["output_file_id"],
                "error_file_id": b["error_file_id"],
                "read": b["output_file_id"] in self.files_read or
                b["error_file_id"] in self.files_read,
                "answered": b["request_counts"]["completed"],
                "faults": b["_faults"]})
        return 200, {"batches": out}

    def _id(self, prefix):
        self.seq += 1
        return "%s-%06d" % (prefix, self.seq)

    # ---- dispatch -------------------------------------------------------

    def route(self, method, path, query, headers, body):
        """(status, dict) for a /v1/ path it serves, or None."""
        parts = path.strip("/").split("/")
        if parts[:2] == ["v1", "files"]:
            return self.files_route(method, parts[2:], query, headers, body)
        if parts[:2] == ["v1", "batches"]:
            return self.batches_route(method, parts[2:], query, body,
                                      headers)
        if parts[:3] == ["v1", "chat", "completions"] and method == "GET":
            return self.stored_route(parts[3:], query)
        if parts[:2] == ["v1", "responses"]:
            return self.responses_route(method, parts[2:], headers, body)
        return None

    # ---- files ------------------------------------------------------------

    def add_file(self, purpose, filename, data):
        fid = self._id("file")
        meta = {"id": fid, "object": "file", "bytes": len(data),
                "created_at": int(time.time()), "filename": filename,
                "purpose": purpose, "status": "processed"}
        self.files[fid] = (meta, data)
        return meta

    def files_route(self, method, rest, query, headers, body):
        if not rest and method == "POST":
            try:
                fields = _multipart(headers, body)
            except ValueError as e:
                return 400, {"error": {"message": str(e)}}
            if "file" not in fields or "purpose" not in fields:
                return 400, {"error": {"message": "file and purpose needed"}}
            purpose = fields["purpose"][1].decode()
            self.uploads += 1
            if purpose == "batch":
                for n, line in enumerate(fields["file"][1].splitlines(), 1):
                    if not line.strip():
                        continue
                    try:
                        json.loads(line)
                    except ValueError:
                        return 400, {"error": {
                            "message": "line %d is not JSON" % n}}
            return 200, self.add_file(purpose, fields["file"][0] or "upload",
                                      fields["file"][1])
        if not rest and method == "GET":
            q = parse_qs(query)
            items = [m for m, _ in self.files.values()
                     if "purpose" not in q or m["purpose"] == q["purpose"][0]]
            items.reverse()     # newest first, as the provider lists them
            self.list_pages["files"] += 1
            return 200, _page(items, query, self.page_max)
        if len(rest) >= 1 and rest[0] in self.files:
            meta, data = self.files[rest[0]]
            if len(rest) == 1 and method == "GET":
                return 200, meta
            if len(rest) == 2 and rest[1] == "content" and method == "GET":
                self.file_reads += 1
                self.files_read.add(rest[0])
                return 200, data
        return 404, {"error": {"message": "no such file"}}

    def create_delay(self, method, path):
        """Seconds a request waits before it is served: a create's
        STUB_BATCH_CREATE_DELAY_MS, while creates are left to delay."""
        if method != "POST" or path.rstrip("/") != "/v1/batches":
            return 0
        late = self.take_batch_fault("create_late")
        if late is not None:
            return late["ms"] / 1000.0
        if self.create_delay_ms <= 0 or self.create_delays_left <= 0:
            return 0
        self.create_delays_left -= 1
        return self.create_delay_ms / 1000.0

    # ---- batches ----------------------------------------------------------

    def batches_route(self, method, rest, query, body, headers):
        if not rest and method == "POST":
            try:
                req = json.loads(body)
            except ValueError:
                return 400, {"error": {"message": "body is not JSON"}}
            fid = req.get("input_file_id")
            if fid not in self.files:
                return 400, {"error": {"message": "no such input file"}}
            if req.get("endpoint") not in ("/v1/chat/completions",
                                           "/v1/responses"):
                return 400, {"error": {"message": "unsupported endpoint"}}
            now = time.time()
            bid = self._id("batch")
            batch = {
                "id": bid, "object": "batch", "endpoint": req["endpoint"],
                "input_file_id": fid, "status": "validating",
                "completion_window": req.get("completion_window", "24h"),
                "output_file_id": None, "error_file_id": None,
                "created_at": int(now), "in_progress_at": None,
                "completed_at": None, "expired_at": None,
                "cancelled_at": None,
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
                "metadata": req.get("metadata") or {}, "_t0": now,
                # A line asking for it makes the whole batch expire (at
                # STUB_BATCH_SECONDS), whatever the stub's expiry.
                "_expire": b"[[fault:batch_expire]]" in self.files[fid][1],
                "_hidden_until": 0, "_partial": False, "_faults": [],
            }
            lag = self.take_batch_fault("list_lag")
            if lag is not None:
                batch["_hidden_until"] = now + lag["ms"] / 1000.0
                batch["_faults"].append("list_lag")
            if self.take_batch_fault("expire_partial") is not None:
                batch["_partial"] = True
                batch["_faults"].append("expire_partial")
            self.batches[bid] = batch
            self.batches_created += 1
            drop = self.take_batch_fault("create_drop_reply")
            if drop is not None:
                batch["_faults"].append("create_drop_reply")
            if drop is not None or headers.get("x-stub-fault") == "drop_reply":
                # The batch exists; the caller never hears of it (a crash
                # or a cut connection between create and reply).
                return 0, None
            return 200, self._public(batch)
        if not rest and method == "GET":
            now = time.time()
            # A batch under list_lag is made but not listed yet.
            items = [self._public(self._advance(b))
                     for b in self.batches.values()
                     if b["_hidden_until"] <= now]
            items.reverse()     # newest first, as the provider lists them
            self.list_pages["batches"] += 1
            return 200, _page(items, query, self.page_max)
        if len(rest) == 1 and method == "GET" and \
                self.take_batch_fault("poll_404") is not None:
            return 404, {"error": {"message": "no such batch (stub fault "
                                              "poll_404)"}}
        if rest and rest[0] in self.batches:
            batch = self._advance(self.batches[rest[0]])
            if len(rest) == 1 and method == "GET":
                self.batch_polls += 1
                self.batch_poll_times.append(time.monotonic())
                del self.batch_poll_times[:-POLL_TIMES_MAX]
                return 200, self._public(batch)
            if len(rest) == 2 and rest[1] == "cancel" and method == "POST":
                if batch["status"] in ("validating", "in_progress"):
                    batch["status"] = "cancelled"
                    batch["cancelled_at"] = int(time.time())
                return 200, self._public(batch)
        return 404, {"error": {"message": "no such batch"}}

    @staticmethod
    def _public(batch):
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _advance(self, batch):
        if batch["status"] not in ("validating", "in_progress"):
            return batch
        age = time.time() - batch["_t0"]
        if (self.batch_expire and age >= self.batch_expire and
                (not self.batch_seconds or
                 self.batch_expire < self.batch_seconds)) or \
                ((batch["_expire"] or batch["_partial"]) and
                 age >= self.batch_seconds):
            batch["status"] = "expired"
            batch["expired_at"] = int(time.time())
            self._finish(batch, expired=True, partial=batch["_partial"])
            return batch
        if age * 1000 >= self.batch_start_ms and \
                batch["status"] == "validating":
            batch["status"] = "in_progress"
            batch["in_progress_at"] = int(time.time())
        if age >= self.batch_seconds:
            self._finish(batch, expired=False)
            batch["status"] = "completed"
            batch["completed_at"] = int(time.time())
        return batch

    def _finish(self, batch, expired, partial=False):
        """Answers every line of the input file (or, expired, refuses
        them; partial: the first half answered, the rest refused): the
        output file holds the answers, the error file the refused lines,
        each with its custom_id."""
        _, data = self.files[batch["input_file_id"]]
        out, err = [], []
        lines = [x for x in data.splitlines() if x.strip()]
        for i, line in enumerate(lines):
            req = json.loads(line)
            cid = req.get("custom_id")
            batch["request_counts"]["total"] += 1
            if expired and (not partial or i >= len(lines) // 2):
                err.append({"id": self._id("batch_req"), "custom_id": cid,
                            "response": None, "error": {
                                "code": "batch_expired",
                                "message": "the batch expired before this "
                                           "request was processed"}})
                continue
            body = req.get("body") or {}
            why = self._line_refusal(batch, req)
            if why is not None:
                self.batch_lines_refused += 1
                batch["request_counts"]["failed"] += 1
                err.append({"id": self._id("batch_req"), "custom_id": cid,
                            "response": {"status_code": 400,
                                         "request_id": self._id("req"),
                                         "body": {"error": {
                                             "message": why,
                                             "type": "invalid_request_error"
                                         }}},
                            "error": None})
                continue
            self.batch_lines[batch["endpoint"]] += 1
            text = json.dumps(body)
            m = DIRECTIVE_RE.search(text)
            if m and m.group(1).isdigit():
                status = int(m.group(1))
                batch["request_counts"]["failed"] += 1
                err.append({"id": self._id("batch_req"), "custom_id": cid,
                            "response": {"status_code": status,
                                         "request_id": self._id("req"),
                                         "body": {"error": {
                                             "message": "stub fault %d"
                                                        % status}}},
                            "error": None})
                continue
            kind, params = "", {}
            if m and m.group(1) == "oversize":
                # A long answer (bytes=N), as a live call gets it.
                kind = "oversize"
                params = dict(p.split("=", 1) for p in m.group(2).split()
                              if "=" in p)
            answer = self.stub.batch_generate(cid, body, batch["endpoint"],
                                              kind, params)
            batch["request_counts"]["completed"] += 1
            out.append({"id": self._id("batch_req"), "custom_id": cid,
                        "response": {"status_code": 200,
                                     "request_id": self._id("req"),
                                     "body": answer},
                        "error": None})
        if out:
            batch["output_file_id"] = self.add_file(
                "batch_output", "output.jsonl",
                b"".join(json.dumps(o).encode() + b"\n" for o in out))["id"]
        if err:
            batch["error_file_id"] = self.add_file(
                "batch_output", "errors.jsonl",
                b"".join(json.dumps(e).encode() + b"\n" for e in err))["id"]

    @staticmethod
    def _line_refusal(batch, req):
        """Why the provider refuses a line, or None: a line names the
        batch's endpoint as its url and carries that endpoint's request
        (a Responses body takes input, a chat body messages)."""
        url, body = req.get("url"), req.get("body")
        if url != batch["endpoint"]:
            return "line url %s is not the batch's endpoint %s" % (
                url, batch["endpoint"])
        if not isinstance(body, dict) or not isinstance(body.get("model"),
                                                        str):
            return "line body is not an object with a model"
        if url == "/v1/responses":
            if "input" not in body or "messages" in body:
                return "a /v1/responses body takes input, not messages"
        elif not isinstance(body.get("messages"), list):
            return "a /v1/chat/completions body takes messages"
        return None

    # ---- stored completions and responses --------------------------------

    def store_completion(self, request, answer):
        """A `store: true` chat completion, listed after the lag."""
        self.completions.append({
            "answer": answer, "metadata": request.get("metadata") or {},
            "visible_at": time.time() + self.store_lag_ms / 1000.0})

    def stored_route(self, rest, query):
        now = time.time()
        seen = [c for c in self.completions if c["visible_at"] <= now]
        if rest:
            for c in seen:
                if c["answer"].get("id") == rest[0]:
                    return 200, c["answer"]
            return 404, {"error": {"message": "no such stored completion"}}
        want = {}
        for k, v in parse_qs(query).items():
            m = re.fullmatch(r"metadata\[([^\]]+)\]", k)
            if m:
                want[m.group(1)] = v[0]
        items = [dict(c["answer"], metadata=c["metadata"]) for c in seen
                 if all(c["metadata"].get(k) == v for k, v in want.items())]
        return 200, _page(items, query)

    def responses_route(self, method, rest, headers, body):
        if not rest and method == "POST":
            try:
                req = json.loads(body)
            except ValueError:
                return 400, {"error": {"message": "body is not JSON"}}
            if not isinstance(req.get("model"), str):
                return 400, {"error": {"message": "missing 'model'"}}
            key = headers.get("idempotency-key")
            resp = self.stub.batch_generate(key, req, "/v1/responses")
            if req.get("store", True):
                self.responses[resp["id"]] = resp
            if headers.get("x-stub-fault") == "close_mid_body":
                # Generated and kept; the caller reads half the answer.
                return -1, resp
            return 200, resp
        if len(rest) == 1 and method == "GET":
            if rest[0] in self.responses:
                return 200, self.responses[rest[0]]
            return 404, {"error": {"message": "no such response"}}
        return 404, {"error": {"message": "no such path"}}
