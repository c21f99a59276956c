#!/usr/bin/env python3
"""A Kubernetes API server stub for the chart's `lookup` checks.

Usage: stub_apiserver.py OBJECTS_JSON

Serves, on 127.0.0.1 at a free port (printed on stdout once listening),
what helm's `lookup` asks for: the discovery document of the core group
(/api/v1) and GETs of namespaced core objects by name. OBJECTS_JSON is a
list of objects (apiVersion v1: ServiceAccount, Secret, ConfigMap), read
again for every request, so a test's fake kubectl can add to it; a GET of
one not listed answers 404 with a Status, as the API server does. Every
request line is printed on stderr. `helm template --dry-run=server` with a
kubeconfig pointing here renders with lookups, so check.sh can see the
chart refuse a Secret the cluster lacks without a cluster.
"""
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RESOURCES = {
    "secrets": "Secret",
    "serviceaccounts": "ServiceAccount",
    "configmaps": "ConfigMap",
}


def main():
    objects_path = sys.argv[1]

    def load():
        store = {}
        for obj in json.load(open(objects_path)):
            plural = next(p for p, k in RESOURCES.items() if k == obj["kind"])
            meta = obj["metadata"]
            store[(meta["namespace"], plural, meta["name"])] = obj
        return store

    class Handler(BaseHTTPRequestHandler):
        def send_json(self, status, doc):
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def not_found(self, what, name):
            self.send_json(404, {
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "NotFound", "code": 404,
                "message": '%s "%s" not found' % (what, name),
                "details": {"name": name, "kind": what}})

        def do_GET(self):
            print("GET %s" % self.path, file=sys.stderr, flush=True)
            path = self.path.split("?", 1)[0]
            if path == "/api/v1":
                self.send_json(200, {
                    "kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": "v1",
                    "resources": [
                        {"name": p, "singularName": k.lower(), "namespaced": True,
                         "kind": k, "verbs": ["get", "list"]}
                        for p, k in RESOURCES.items()]})
                return
            if path == "/api":
                self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                     "serverAddressByClientCIDRs": []})
                return
            m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/([^/]+)/([^/]+)", path)
            store = load() if m else {}
            if m and (m.group(1), m.group(2), m.group(3)) in store:
                self.send_json(200, store[(m.group(1), m.group(2), m.group(3))])
            elif m:
                self.not_found(m.group(2), m.group(3))
            else:
                self.not_found("path", path)

        def log_message(self, fmt, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
