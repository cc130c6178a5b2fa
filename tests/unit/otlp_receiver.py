#!/usr/bin/python3
"""A stand-in OpenTelemetry collector for test_otel_export.c: OTLP/HTTP on
127.0.0.1, its port on the first line of stdout. Every POST to a path other
than /control is an export: it is recorded, checked against the shape of
OTLP's JSON ExportTraceServiceRequest, and answered as the plan says.

  POST /control {"plan": [ANSWER, ...]}   the answers to the next exports, in
                                          order; after them, 200 {}
                {"reset": true}           forgets the exports and the plan
  ANSWER        {"status": 503, "headers": {"Retry-After": "1"}, "body": "..."}
                {"status": 429, "retry_after_date": 1}: Retry-After as an
                    HTTP-date that many seconds from now
                {"hang": true}: reads the request and never answers
  GET /exports  {"count": N, "exports": [{"path", "headers" (lower-case
                names), "t" (seconds, monotonic), "status" (what it was
                answered, null while hanging), "problems" (what is wrong
                with the body's shape, [] when nothing), "span_ids",
                "resource" {key: value}, "scope" {name, version}}]}
"""
import email.utils
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
EXPORTS = []
PLAN = []
HEX = re.compile(r"^[0-9a-f]+$")


def shape_problems(body):
    """What makes body not an ExportTraceServiceRequest in OTLP/JSON (the
    fields the engine sends), and what was read of it."""
    problems, seen = [], {"span_ids": [], "resource": {}, "scope": {}}
    try:
        req = json.loads(body)
    except ValueError as e:
        return [f"not JSON: {e}"], seen
    if not isinstance(req, dict) or set(req) != {"resourceSpans"}:
        return ["the top level is not {resourceSpans: [...]}"], seen
    rss = req["resourceSpans"]
    if not isinstance(rss, list) or len(rss) != 1:
        return ["resourceSpans is not a list of one"], seen
    rs = rss[0]
    attrs = rs.get("resource", {}).get("attributes")
    if not isinstance(attrs, list):
        problems.append("resource.attributes is not a list")
        attrs = []
    for kv in attrs:
        value = kv.get("value", {}) if isinstance(kv, dict) else {}
        if not isinstance(kv.get("key"), str) or set(value) != {"stringValue"}:
            problems.append(f"a resource attribute is not a KeyValue of a string: {kv!r}")
            continue
        if kv["key"] in seen["resource"]:
            problems.append(f"resource attribute {kv['key']} twice")
        seen["resource"][kv["key"]] = value["stringValue"]
    sss = rs.get("scopeSpans")
    if not isinstance(sss, list) or len(sss) != 1:
        return problems + ["scopeSpans is not a list of one"], seen
    scope = sss[0].get("scope", {})
    seen["scope"] = scope
    if not isinstance(scope.get("name"), str) or not isinstance(scope.get("version"), str):
        problems.append(f"the scope has no name and version: {scope!r}")
    spans = sss[0].get("spans")
    if not isinstance(spans, list) or not spans:
        return problems + ["spans is not a list of at least one"], seen
    for s in spans:
        tid, sid = s.get("traceId", ""), s.get("spanId", "")
        if not (len(tid) == 32 and HEX.match(tid) and len(sid) == 16 and HEX.match(sid)):
            problems.append(f"a span without hex traceId and spanId: {s!r}")
        seen["span_ids"].append(sid)
    return problems, seen


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=None):
        body = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path != "/exports":
            return self.reply(404, "{}")
        with LOCK:
            out = json.dumps({"count": len(EXPORTS), "exports": EXPORTS}, separators=(",", ":"))
        self.reply(200, out)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/control":
            c = json.loads(body)
            with LOCK:
                if c.get("reset"):
                    EXPORTS.clear()
                    PLAN.clear()
                PLAN.extend(c.get("plan", []))
            return self.reply(200, "{}")
        problems, seen = shape_problems(body)
        record = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                  "t": time.monotonic(), "status": None, "problems": problems, **seen}
        with LOCK:
            EXPORTS.append(record)
            answer = PLAN.pop(0) if PLAN else {"status": 200, "body": "{}"}
        if answer.get("hang"):
            threading.Event().wait()  # until the process ends; the client times out
        headers = dict(answer.get("headers", {}))
        if "retry_after_date" in answer:
            headers["Retry-After"] = email.utils.formatdate(time.time() + answer["retry_after_date"], usegmt=True)
        with LOCK:
            record["status"] = answer["status"]
        self.reply(answer["status"], answer.get("body", "{}"), headers)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
