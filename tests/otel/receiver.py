#!/usr/bin/env python3
"""A local OTLP/HTTP trace receiver for the engine's tests: a stand-in for an
OpenTelemetry collector that keeps what it receives, and misbehaves on cue.

  POST /v1/traces   an ExportTraceServiceRequest in OTLP/JSON
                    (Content-Type: application/json, optionally
                    Content-Encoding: gzip). Stored (in memory and, with
                    --out, appended to a JSON-lines file) and answered 200
                    {"partialSuccess":{}}, unless a scripted rule says otherwise.

Control endpoints (for the tests, never part of OTLP):
  GET    /_health     counts: requests, stored, spans, held, by status, rules left
  GET    /_spans      every stored span, flattened (its resource and scope
                      beside it); ?traceId=HEX and ?name=NAME filter
  GET    /_requests   every POST /v1/traces seen: arrival time, what it was
                      answered, its headers, its size (stored or not)
  GET    /_script     the rules still queued
  POST   /_script     queues rules: one object or an array of them (below)
  DELETE /_script     drops the queued rules
  POST   /_release    answers the held requests (?then=answer|close overrides
                      each hold's own "then")
  POST   /_reset      forgets everything in memory (the --out file is kept:
                      it is append-only) and closes the held requests

A rule applies to the next "count" requests (default 1; -1: every one until
the rules are replaced), in the order queued:
  {"status": 503, "retry_after": 2, "count": 3}   answer 503 with Retry-After: 2
                                                  ("retry_after" may be an HTTP-date string)
  {"status": 400, "message": "bad"}               any 4xx/5xx, with a Status body
  {"hang": true, "then": "close"|"answer"}        accept the request and answer nothing
                                                  until POST /_release; then close
                                                  the connection unanswered (default;
                                                  nothing stored) or answer it as usual
  {"close": true}                                 close the connection unanswered
  {"partial": {"rejectedSpans": 2, "errorMessage": "x"}}
                                                  store it, answer 200 with that partialSuccess
A request a rule answers with an error, or closes, is not stored. --script
queues rules at start (JSON, or @FILE).

The receiver is lenient like a collector (OTLP/JSON receivers must ignore
unknown fields): it checks only that the body is a JSON object whose
resourceSpans, if present, is an array. Strict validation is decode.mjs's.
Non-JSON content types are refused with 415, bodies that are not JSON with
400, bodies over --max-body (64 MiB, the spec's recommendation, also after
decompression) with 413.

--port 0 binds a free port; --port-file receives it once listening (written
whole, by rename). Python 3 standard library only.
"""

import argparse
import http.server
import json
import os
import signal
import socketserver
import sys
import threading
import time
import urllib.parse
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import otlp_json  # noqa: E402

MAX_BODY = 64 * 1024 * 1024
RULE_KEYS = {"status", "retry_after", "message", "count", "hang", "then", "close", "partial", "comment"}
# what a collector's Status.code says for the statuses tests script (gRPC codes;
# the spec lets clients ignore it, but a real body is what they must parse)
GRPC_CODE = {400: 3, 413: 8, 415: 3, 429: 8, 500: 13, 502: 14, 503: 14, 504: 14}


class RuleError(ValueError):
    pass


def check_rule(r, where="rule"):
    if not isinstance(r, dict):
        raise RuleError(f"{where}: a rule is an object, got {type(r).__name__}")
    unknown = set(r) - RULE_KEYS
    if unknown:
        raise RuleError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(RULE_KEYS)}")
    kinds = [k for k in ("status", "hang", "close", "partial") if k in r]
    if len(kinds) != 1:
        raise RuleError(f"{where}: exactly one of status, hang, close, partial; got {kinds or 'none'}")
    if "status" in r and (not isinstance(r["status"], int) or not 400 <= r["status"] <= 599):
        raise RuleError(f"{where}: status must be an integer 400..599 (a success is the default)")
    if "retry_after" in r and not isinstance(r["retry_after"], (int, str)):
        raise RuleError(f"{where}: retry_after is seconds (an integer) or an HTTP-date (a string)")
    count = r.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or (count < 1 and count != -1):
        raise RuleError(f"{where}: count must be an integer >= 1, or -1 (for ever)")
    if r.get("then", "close") not in ("close", "answer"):
        raise RuleError(f"{where}: then must be \"close\" or \"answer\"")
    if "partial" in r:
        p = r["partial"]
        if not isinstance(p, dict) or set(p) - {"rejectedSpans", "errorMessage"}:
            raise RuleError(f"{where}: partial is {{rejectedSpans, errorMessage}}")
    return dict(r, count=count)


def append_lines(path, objs):
    """objs as JSON lines, in one write with O_APPEND: a reader never sees half
    a record. ASCII: a lone surrogate a client sent must not stop the write."""
    if not objs:
        return
    data = "".join(json.dumps(o, separators=(",", ":")) + "\n" for o in objs).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class State:
    """Everything the receiver remembers; one lock guards it all."""

    def __init__(self, out_path, success_body, max_body, spans_out=None):
        self.lock = threading.Lock()
        self.released = threading.Condition(self.lock)
        self.out_path = out_path
        self.spans_out = spans_out
        self.success_body = success_body
        self.max_body = max_body
        self.reset_locked()
        self.epoch = 0  # bumped by /_reset, so holds taken before it end
        self.stopping = False

    def reset_locked(self):
        self.rules = []
        self.stored = []      # (seq, request)
        self.spans = []       # flattened
        self.log = []         # every POST /v1/traces
        self.by_status = {}
        self.held = 0
        self.release_gen = 0  # bumped by /_release
        self.release_then = None
        self.seq = 0

    def next_rule(self):
        """The rule for the request arriving now (consumed), or None."""
        if not self.rules:
            return None
        r = self.rules[0]
        if r["count"] != -1:
            r["count"] -= 1
            if r["count"] == 0:
                self.rules.pop(0)
        return r


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as OTLP clients expect
    server_version = "otel-test-receiver"
    state: State = None
    verbose = False

    def log_message(self, fmt, *args):
        if self.verbose:
            sys.stderr.write("receiver: %s %s\n" % (self.address_string(), fmt % args))

    # ---- replies

    def reply(self, status, obj, headers=None):
        body = json.dumps(obj, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(body)

    def fail(self, status, message, headers=None):
        """A failure answered as the spec asks: a Status message (JSON)."""
        self.reply(status, {"code": GRPC_CODE.get(status, 2), "message": message}, headers)

    def drop(self):
        """Closes the connection with no answer at all."""
        self.close_connection = True

    # ---- reading the request

    def read_body(self):
        """The request's body, unzipped; or (status, message) on a failure
        (the connection is then closed: what is left unread is unknown)."""
        te = self.headers.get("Transfer-Encoding", "").lower()
        st = self.state
        if te == "chunked":
            raw = bytearray()
            while True:
                line = self.rfile.readline(1024)
                try:
                    n = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    self.close_connection = True
                    return 400, "bad chunked encoding"
                if n == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                if len(raw) + n > st.max_body:
                    self.close_connection = True
                    return 413, f"body over {st.max_body} bytes"
                raw += self.rfile.read(n)
                self.rfile.readline(16)
            raw = bytes(raw)
        elif te and te != "identity":
            self.close_connection = True
            return 501, f"Transfer-Encoding {te} not supported"
        else:
            try:
                n = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                self.close_connection = True
                return 400, "bad Content-Length"
            if n < 0:
                self.close_connection = True
                return 400, "bad Content-Length"
            if n > st.max_body:
                self.close_connection = True
                return 413, f"body of {n} bytes is over the limit of {st.max_body}"
            raw = self.rfile.read(n)
        enc = self.headers.get("Content-Encoding", "identity").strip().lower()
        if enc == "gzip":
            try:
                d = zlib.decompressobj(wbits=31)
                out = d.decompress(raw, st.max_body + 1)
                if len(out) > st.max_body:
                    return 413, f"body over {st.max_body} bytes once unzipped"
                if not d.eof:
                    return 400, "gzip body is truncated"
                raw = out
            except zlib.error as e:
                return 400, f"body is not valid gzip: {e}"
        elif enc not in ("", "identity"):
            return 415, f"Content-Encoding {enc} not supported (gzip or none)"
        return raw

    # ---- routes

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        st = self.state
        with st.lock:
            if u.path == "/_health":
                return self.reply(200, {
                    "ok": True, "pid": os.getpid(), "requests": len(st.log), "stored": len(st.stored),
                    "spans": len(st.spans), "held": st.held, "rules": len(st.rules),
                    "by_status": st.by_status,
                })
            if u.path == "/_spans":
                spans = st.spans
                if "traceId" in q:
                    want = q["traceId"][0].lower()
                    spans = [s for s in spans if str(s.get("traceId", "")).lower() == want]
                if "name" in q:
                    spans = [s for s in spans if s.get("name") == q["name"][0]]
                return self.reply(200, spans)
            if u.path == "/_requests":
                return self.reply(200, st.log)
            if u.path == "/_script":
                return self.reply(200, st.rules)
        if u.path == "/v1/traces":
            return self.fail(405, "POST only", {"Allow": "POST"})
        return self.fail(404, f"no route {u.path}")

    def do_DELETE(self):
        u = urllib.parse.urlsplit(self.path)
        if u.path == "/_script":
            with self.state.lock:
                self.state.rules = []
            return self.reply(200, [])
        return self.fail(404, f"no route {u.path}")

    def do_POST(self):
        u = urllib.parse.urlsplit(self.path)
        if u.path == "/v1/traces":
            return self.traces()
        body = self.read_body()
        if isinstance(body, tuple):
            return self.fail(*body)
        st = self.state
        if u.path == "/_script":
            try:
                rules = json.loads(body or b"null")
                rules = rules if isinstance(rules, list) else [rules]
                rules = [check_rule(r, f"rule {i + 1}") for i, r in enumerate(rules)]
            except (ValueError, RuleError) as e:
                return self.fail(400, str(e))
            with st.lock:
                st.rules.extend(rules)
                return self.reply(200, st.rules)
        if u.path == "/_release":
            then = urllib.parse.parse_qs(u.query).get("then", [None])[0]
            if then not in (None, "close", "answer"):
                return self.fail(400, "then must be close or answer")
            with st.lock:
                n = st.held
                st.release_gen += 1
                st.release_then = then
                st.released.notify_all()
            return self.reply(200, {"released": n})
        if u.path == "/_reset":
            with st.lock:
                n = st.held
                st.reset_locked()
                st.epoch += 1
                st.released.notify_all()
            return self.reply(200, {"reset": True, "closed_held": n})
        return self.fail(404, f"no route {u.path}")

    def traces(self):
        st = self.state
        arrived = time.time_ns()
        entry = {"time_unix_nano": arrived, "headers": {k.lower(): v for k, v in self.headers.items()}}
        body = self.read_body()
        with st.lock:
            st.log.append(entry)
            rule = st.next_rule()
        entry["bytes"] = len(body) if isinstance(body, bytes) else None
        if rule:
            entry["rule"] = {k: v for k, v in rule.items() if k != "count"}
        then = "answer"
        if rule and rule.get("hang"):
            then = self.hold(entry, rule.get("then", "close"))
        if rule and rule.get("close") or then == "close":
            return self.answered(entry, "closed", self.drop)
        if isinstance(body, tuple):
            return self.answered(entry, body[0], self.fail, *body)
        if rule and "status" in rule:
            hdrs = {"Retry-After": rule["retry_after"]} if "retry_after" in rule else None
            msg = rule.get("message", f"scripted {rule['status']}")
            return self.answered(entry, rule["status"], self.fail, rule["status"], msg, hdrs)
        ctype = self.headers.get("Content-Type", "")
        media = ctype.split(";")[0].strip().lower()
        if media != "application/json":
            why = ("binary protobuf is not decoded here: send OTLP/JSON" if media == "application/x-protobuf"
                   else f"Content-Type {ctype or '(none)'}: OTLP/JSON needs application/json")
            return self.answered(entry, 415, self.fail, 415, why)
        try:
            request = json.loads(body.decode("utf-8"))
        except UnicodeDecodeError:
            return self.answered(entry, 400, self.fail, 400, "body is not UTF-8")
        except json.JSONDecodeError as e:
            return self.answered(entry, 400, self.fail, 400, f"body is not JSON: {e}")
        if not isinstance(request, dict):
            return self.answered(entry, 400, self.fail, 400, "body is not a JSON object")
        if not isinstance(request.get("resourceSpans", []), list):
            return self.answered(entry, 400, self.fail, 400, "resourceSpans is not an array")
        with st.lock:
            st.seq += 1
            seq = st.seq
            rec = {"seq": seq, "time_unix_nano": arrived, "headers": entry["headers"],
                   "request": request, "body": body.decode("utf-8")}
            if st.out_path:
                append_lines(st.out_path, [rec])
            if st.spans_out:  # each span's own JSON, one a line, as the request had it
                append_lines(st.spans_out, [sp for rs in request.get("resourceSpans", [])
                                            for ss in rs.get("scopeSpans", []) for sp in ss.get("spans", [])])
            flat = otlp_json.flatten(request, seq)
            st.stored.append((seq, request))
            st.spans.extend(flat)
            entry["seq"], entry["spans"] = seq, len(flat)
        if rule and "partial" in rule:
            ps = dict(rule["partial"])
            if "rejectedSpans" in ps:
                ps["rejectedSpans"] = str(ps["rejectedSpans"])  # int64: a decimal string in proto3 JSON
            return self.answered(entry, 200, self.reply, 200, {"partialSuccess": ps})
        ok = {"partialSuccess": {}} if st.success_body == "collector" else {}
        return self.answered(entry, 200, self.reply, 200, ok)

    def answered(self, entry, status, fn, *args):
        with self.state.lock:
            entry["status"] = status
            key = str(status)
            self.state.by_status[key] = self.state.by_status.get(key, 0) + 1
        fn(*args)

    def hold(self, entry, then):
        """Waits for /_release (or /_reset); returns what to do then."""
        st = self.state
        with st.lock:
            gen, epoch = st.release_gen, st.epoch
            st.held += 1
            entry["held"] = True
            try:
                while st.release_gen == gen and st.epoch == epoch and not st.stopping:
                    st.released.wait()
            finally:
                st.held = max(0, st.held - 1)  # a reset zeroed it already
            if st.epoch != epoch or st.stopping:
                return "close"
            return st.release_then or then


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True  # a held request never keeps the process alive
    allow_reuse_address = True
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser(description="Local OTLP/HTTP (JSON) trace receiver for tests.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="port to bind (0: a free one)")
    ap.add_argument("--port-file", help="write the bound port here once listening")
    ap.add_argument("--out", help="append each stored request to this JSON-lines file")
    ap.add_argument("--spans-out", help="append each stored span's JSON to this file, one a line")
    ap.add_argument("--script", help="rules to queue at start: JSON, or @FILE")
    ap.add_argument("--success-body", choices=("collector", "empty"), default="collector",
                    help='a full success answers {"partialSuccess":{}} (collector) or {} (empty)')
    ap.add_argument("--max-body", type=int, default=MAX_BODY, help="largest body accepted, in bytes")
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args()

    st = State(args.out, args.success_body, args.max_body, args.spans_out)
    if args.out:  # there from the start: a reader sees "no request yet", not a missing file
        os.close(os.open(args.out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    if args.script:
        try:
            text = open(args.script[1:]).read() if args.script.startswith("@") else args.script
            rules = json.loads(text)
            st.rules = [check_rule(r, f"rule {i + 1}") for i, r in enumerate(rules if isinstance(rules, list) else [rules])]
        except (OSError, ValueError, RuleError) as e:
            print(f"receiver: bad --script: {e}", file=sys.stderr)
            return 2
    Handler.state, Handler.verbose = st, args.verbose
    srv = Server((args.host, args.port), Handler)
    port = srv.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    print(f"receiver: listening on http://{args.host}:{port}", file=sys.stderr, flush=True)

    def stop(*_):
        with st.lock:
            st.stopping = True
            st.released.notify_all()
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    srv.serve_forever(poll_interval=0.2)
    srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
