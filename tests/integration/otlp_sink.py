#!/usr/bin/env python3
"""A minimal OTLP/HTTP trace receiver on loopback, for tests/integration/test_otel_spans.sh.

  otlp_sink.py SPANS_FILE PORT_FILE

Answers POST /v1/traces (OTLP/HTTP, the JSON encoding) with 200 and {} after
appending each span of the request (resourceSpans[].scopeSpans[].spans[])
to SPANS_FILE, one span's JSON per line: the same file the branch's test
exporter writes, so the test reads either. A body that is not JSON gets 400.
The port goes to PORT_FILE once it listens.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SPANS, PORT_FILE = sys.argv[1], sys.argv[2]
LOCK = threading.Lock()


class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.split("?")[0] != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        try:
            req = json.loads(body)
        except ValueError:
            self.send_response(400)
            self.end_headers()
            return
        lines = [json.dumps(s, separators=(",", ":"))
                 for rs in req.get("resourceSpans", []) for ss in rs.get("scopeSpans", []) for s in ss.get("spans", [])]
        with LOCK, open(SPANS, "a") as f:
            for line in lines:
                f.write(line + "\n")
        out = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
with open(PORT_FILE, "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
