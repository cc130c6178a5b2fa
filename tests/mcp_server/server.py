#!/usr/bin/env python3
"""A small MCP server for the engine's tests (standard library only).

    server.py --stdio [--mode MODE] [--log FILE]
    server.py --http --port-file FILE [--mode MODE] [--log FILE]

Tools: echo {text}, add {a, b}, slow {seconds} (a negative number: it never
answers, a hang that no machine's speed turns into an answer), crash {}, fail {} (isError),
rpcerror {} (a JSON-RPC error), garbage {} (non-JSON on stdout), secret {}
(returns its MCP_TEST_SECRET env value), big {bytes}, badutf8 {}, fds {} (its
open descriptors), admin.tools.list {} (a dotted name), fancy {v} (a schema
with anyOf and $defs; answers structuredContent only).
tools/list pages 3 tools at a time (nextCursor). Over HTTP it assigns an
Mcp-Session-Id, refuses requests without it, answers tools/call as an SSE
stream (a notification first) and the rest as JSON, and requires
"Authorization: Bearer $MCP_TEST_TOKEN" when that is set.

Hostile list modes (--mode): pathname (a tool named ../x), many (10,000
tools), schema (an inputSchema that is a string), garbage (non-JSON answer
to tools/list), listerror (a JSON-RPC error for tools/list), hanglist (never
answers tools/list), noinit (exits at once). Each request's method (and, over HTTP, whether it carried the session
id and the protocol version) is appended to --log."""
import argparse
import json
import os
import sys
import threading
import time

OBJ = {"type": "object", "additionalProperties": False}


def schema(props, required=()):
    return dict(OBJ, properties=props, required=list(required))


TOOLS = [
    {"name": "echo", "description": "Echoes text.", "inputSchema": schema({"text": {"type": "string"}}, ["text"])},
    {"name": "add", "description": "Adds two numbers.",
     "inputSchema": schema({"a": {"type": "number"}, "b": {"type": "number"}}, ["a", "b"])},
    {"name": "slow", "description": "Sleeps.", "inputSchema": schema({"seconds": {"type": "number"}}, ["seconds"])},
    {"name": "crash", "description": "Exits mid-call.", "inputSchema": schema({})},
    {"name": "fail", "description": "Fails (isError).", "inputSchema": schema({})},
    {"name": "rpcerror", "description": "Answers a JSON-RPC error.", "inputSchema": schema({})},
    {"name": "garbage", "description": "Writes garbage.", "inputSchema": schema({})},
    {"name": "secret", "description": "Tells its secret.", "inputSchema": schema({})},
    {"name": "big", "description": "A large text.", "inputSchema": schema({"bytes": {"type": "integer"}}, ["bytes"])},
    {"name": "badutf8", "description": "Invalid UTF-8.", "inputSchema": schema({})},
    {"name": "fds", "description": "Lists its open descriptors.", "inputSchema": schema({})},
    {"name": "admin.tools.list", "description": "A dotted name.", "inputSchema": {"type": "object"}},
    {"name": "fancy", "description": "A schema beyond the engine's validator.",
     "inputSchema": {"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                     "required": ["v"], "$defs": {"unused": {"type": "string"}}}},
]
PAGE = 3


class Garbage(Exception):
    pass


def log(args, line):
    if args.log:
        with open(args.log, "a") as f:
            f.write(line + "\n")


def tools_for(mode):
    if mode == "pathname":
        return TOOLS[:1] + [{"name": "../../etc/passwd", "inputSchema": schema({})}]
    if mode == "many":
        return [{"name": "t%d" % i, "inputSchema": schema({})} for i in range(10000)]
    if mode == "schema":
        return TOOLS[:1] + [{"name": "weird", "inputSchema": "string"}]
    return TOOLS


def text(t, is_error=False):
    r = {"content": [{"type": "text", "text": t}]}
    if is_error:
        r["isError"] = True
    return r


def handle(args, msg, out_raw):
    """The answer to one request (a result or an error dict), or None."""
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        return {"result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                           "serverInfo": {"name": "test", "version": "1"}}}
    if method == "tools/list":
        if args.mode == "garbage":
            raise Garbage()
        if args.mode == "hanglist":
            time.sleep(60)
        if args.mode == "listerror":
            return {"error": {"code": -32001, "message": "listing is broken"}}
        tools = tools_for(args.mode)
        start = int(params.get("cursor") or 0)
        page = 1000 if args.mode == "many" else PAGE
        r = {"tools": tools[start:start + page]}
        if start + page < len(tools):
            r["nextCursor"] = str(start + page)
        return {"result": r}
    if method == "tools/call":
        name, a = params.get("name"), params.get("arguments") or {}
        if name == "echo":
            return {"result": text("echo: " + str(a.get("text")))}
        if name == "add":
            return {"result": text(str(a["a"] + a["b"]))}
        if name == "slow":
            if float(a.get("seconds", 1)) < 0:
                threading.Event().wait()  # until the process is stopped
            time.sleep(float(a.get("seconds", 1)))
            return {"result": text("slept")}
        if name == "crash":
            sys.stderr.write("test server: crashing on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        if name == "fail":
            return {"result": text("the thing failed", True)}
        if name == "rpcerror":
            return {"error": {"code": -32000, "message": "the backend is down"}}
        if name == "garbage":
            raise Garbage()
        if name == "secret":
            return {"result": text("my secret is " + os.environ.get("MCP_TEST_SECRET", "unset") +
                                   " and my path is " + os.environ.get("PATH", "") +
                                   " and HOME is " + os.environ.get("HOME", "unset"))}
        if name == "big":
            return {"result": text("x" * int(a["bytes"]))}
        if name == "fds":  # the descriptors it started with (not listdir's own)
            fds = []
            for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
                try:
                    if "/fd" not in os.readlink("/proc/self/fd/%d" % fd):
                        fds.append(str(fd))
                except OSError:
                    pass
            return {"result": text("fds: " + " ".join(fds))}
        if name == "admin.tools.list":
            return {"result": text("dotted ok")}
        if name == "fancy":
            return {"result": {"content": [], "structuredContent": {"got": a}}}
        if name == "badutf8":
            out_raw(b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"bad \xff\xfe bytes"}]}}'
                    % msg["id"])
            return "raw"
        return {"error": {"code": -32602, "message": "unknown tool " + str(name)}}
    if method == "ping":
        return {"result": {}}
    return {"error": {"code": -32601, "message": "method not found"}}


def stdio(args):
    out = sys.stdout.buffer

    def raw(b):
        out.write(b + b"\n")
        out.flush()

    if args.mode == "noinit":
        sys.stderr.write("test server: refusing to start\n")
        sys.exit(2)
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        msg = json.loads(line)
        log(args, msg.get("method") or "response")
        if "id" not in msg or "method" not in msg:
            continue  # a notification, or an answer to us
        try:
            r = handle(args, msg, raw)
        except Garbage:
            raw(b"this is not json at all")
            continue
        if r == "raw":
            continue
        r.update(jsonrpc="2.0", id=msg["id"])
        raw(json.dumps(r).encode())


def http(args):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    sessions = set()

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def send(self, status, body=b"", ctype="application/json", extra=None):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_DELETE(self):
            sessions.discard(self.headers.get("Mcp-Session-Id"))
            log(args, "DELETE")
            self.send(200)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            token = os.environ.get("MCP_TEST_TOKEN")
            if token and self.headers.get("Authorization") != "Bearer " + token:
                return self.send(401, b'{"error":"unauthorized"}')
            if "text/event-stream" not in self.headers.get("Accept", "") or \
                    "application/json" not in self.headers.get("Accept", ""):
                return self.send(406, b'{"error":"Accept must list both types"}')
            msg = json.loads(body)
            method = msg.get("method") or "response"
            sid = self.headers.get("Mcp-Session-Id")
            log(args, "%s sid=%s version=%s" % (method, "yes" if sid in sessions else "no",
                                                self.headers.get("MCP-Protocol-Version")))
            if method != "initialize" and sid not in sessions:
                return self.send(400, b'{"error":"no session"}')
            if "id" not in msg:
                return self.send(202)
            raws = []
            try:
                r = handle(args, msg, raws.append)
            except Garbage:
                return self.send(200, b"this is not json at all")
            if r == "raw":
                return self.send(200, raws[0])
            r.update(jsonrpc="2.0", id=msg["id"])
            extra = {}
            if method == "initialize":
                new = "s-%d" % (len(sessions) + 1)
                sessions.add(new)
                extra["Mcp-Session-Id"] = new
            data = json.dumps(r).encode()
            if method == "tools/call":
                note = json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                                   "params": {"progress": 1, "progressToken": 1}}).encode()
                sse = b"id: 1\ndata: \n\n" + b"event: message\ndata: " + note + b"\n\n" + \
                    b"event: message\ndata: " + data + b"\n\n"
                return self.send(200, sse, "text/event-stream", extra)
            return self.send(200, data, "application/json", extra)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, args.port_file)
    srv.serve_forever()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stdio", action="store_true")
    p.add_argument("--http", action="store_true")
    p.add_argument("--port-file")
    p.add_argument("--mode", default="")
    p.add_argument("--log")
    args = p.parse_args()
    (http if args.http else stdio)(args)


if __name__ == "__main__":
    main()
