#!/usr/bin/env python3
"""A minimal OTLP/HTTP trace receiver for tests.

POST /v1/traces with Content-Type application/json is parsed with the
official OpenTelemetry protocol classes (opentelemetry-proto) through
google.protobuf.json_format.Parse into ExportTraceServiceRequest: a body
that does not follow the OTLP JSON mapping gets 400 and is counted as a
rejection. The one place where OTLP/JSON departs from the standard
protobuf JSON mapping is handled first, as the OTLP specification says:
traceId, spanId and parentSpanId (also in links) are hex strings, not
base64; they must be 32 / 16 hex digits (parentSpanId may be empty) and
are turned into base64 for Parse. Every accepted span is appended, as one JSON object per line,
to --out: {"service", "trace_id", "span_id", "parent_span_id", "name",
"kind", "start", "end", "status", "attributes": {key: value}} with the
ids in lowercase hex as decoded by protobuf.

  receiver.py --port-file F --out SPANS.jsonl [--delay-ms N]

--delay-ms makes every answer that late (a slow collector). GET /stats
returns {"requests", "accepted", "rejected", "spans"}.
"""
import argparse
import base64
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest)

LOCK = threading.Lock()
STATS = {"requests": 0, "accepted": 0, "rejected": 0, "spans": 0}


class BadIds(ValueError):
    pass


def hex_to_b64(obj, key, size, optional=False):
    v = obj.get(key)
    if v is None or (optional and v == ""):
        return
    if not isinstance(v, str) or len(v) != size * 2:
        raise BadIds("%s is not %d hex digits: %r" % (key, size * 2, v))
    try:
        raw = bytes.fromhex(v)
    except ValueError:
        raise BadIds("%s is not hex: %r" % (key, v))
    obj[key] = base64.b64encode(raw).decode()


def otlp_ids_to_proto_json(doc):
    """OTLP/JSON (hex ids) -> protobuf JSON (base64 ids), in place."""
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                if "traceId" not in sp or "spanId" not in sp:
                    raise BadIds("a span needs traceId and spanId")
                hex_to_b64(sp, "traceId", 16)
                hex_to_b64(sp, "spanId", 8)
                hex_to_b64(sp, "parentSpanId", 8, optional=True)
                for ln in sp.get("links", []):
                    hex_to_b64(ln, "traceId", 16)
                    hex_to_b64(ln, "spanId", 8)
    return doc


def any_value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def spans_of(req):
    for rs in req.resource_spans:
        res = {a.key: any_value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                yield {
                    "service": res.get("service.name"),
                    "scope": ss.scope.name,
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex(),
                    "name": s.name,
                    "kind": s.kind,
                    "start": s.start_time_unix_nano,
                    "end": s.end_time_unix_nano,
                    "status": s.status.code,
                    "attributes": {a.key: any_value(a.value)
                                   for a in s.attributes},
                }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/stats":
            with LOCK:
                self.reply(200, dict(STATS))
        else:
            self.reply(404, {})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with LOCK:
            STATS["requests"] += 1
        if self.server.delay_ms:
            time.sleep(self.server.delay_ms / 1000)
        ctype = self.headers.get("Content-Type", "")
        if self.path != "/v1/traces" or \
                ctype.split(";")[0].strip() != "application/json":
            with LOCK:
                STATS["rejected"] += 1
            self.reply(415 if self.path == "/v1/traces" else 404, {})
            return
        req = ExportTraceServiceRequest()
        try:
            doc = otlp_ids_to_proto_json(json.loads(body))
            json_format.Parse(json.dumps(doc), req)
        except (ValueError, json_format.ParseError) as e:
            with LOCK:
                STATS["rejected"] += 1
            print("receiver: rejected: %s" % e, file=sys.stderr)
            self.reply(400, {"error": str(e)})
            return
        lines = [json.dumps(s) for s in spans_of(req)]
        with LOCK:
            with open(self.server.out, "a") as f:
                for line in lines:
                    f.write(line + "\n")
            STATS["accepted"] += 1
            STATS["spans"] += len(lines)
        self.reply(200, {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--delay-ms", type=int, default=0)
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    srv.out = args.out
    srv.delay_ms = args.delay_ms
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
