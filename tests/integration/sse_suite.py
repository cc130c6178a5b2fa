#!/usr/bin/python3
"""The HTTP API's live streams and durability, over real HTTP on loopback,
against the real binary and a real SQLite file (run by test_api_sse.sh).

    sse_suite.py SECTION WORKDIR

SECTION is one of: framing, fanout, feed, delta, kill, slow. Each starts its
own `engine serve --listen 127.0.0.1:0` on a database of its own under
WORKDIR. ENGINE_BIN and ENGINE_SRC name the binary and the source tree.
Prints "ok - ..." and "FAIL: ..." lines like lib.sh; exits 1 on a failure.

The SSE client is a raw socket (not http.client) so that a test controls what
the kernel buffers (SO_RCVBUF), sees the chunked framing end, and sees the
connection close.
"""

import http.client
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time

# every deadline times TEST_TIMEOUT_SCALE (tests/integration/lib.sh exports it)
SCALE = float(os.environ.get("TEST_TIMEOUT_SCALE") or 1)

ENGINE = os.environ["ENGINE_BIN"]
SRC = os.environ["ENGINE_SRC"]
WF_DIR = os.path.join(SRC, "tests", "integration", "wf")
FAILS = 0


def ok(what):
    print(f"ok - {what}", flush=True)


def fail(what):
    global FAILS
    FAILS += 1
    print(f"FAIL: {what}", file=sys.stderr, flush=True)


def check(what, cond, detail=""):
    if cond:
        ok(what)
    else:
        fail(f"{what}{': ' + detail if detail else ''}")
    return cond


def wait_until(pred, secs, step=0.02):
    end = time.monotonic() + secs * SCALE
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


# ------------------------------------------------------------ the server ---

class Serve:
    """`engine serve --listen 127.0.0.1:0` on db; its port parsed from stderr."""

    def __init__(self, db, workflows=WF_DIR, env=None, log=None):
        self.db = db
        self.log = log or db + f".serve{random.randrange(1 << 30)}.log"
        e = dict(os.environ)
        e["ENGINE_SSE_HEARTBEAT_MS"] = e.get("ENGINE_SSE_HEARTBEAT_MS", "200")
        e.update(env or {})
        self.env = e
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen(
                [ENGINE, "serve", "--db", db, "--listen", "127.0.0.1:0", "--workflows", workflows],
                stdout=subprocess.DEVNULL, stderr=f, env=e)
        self.port = None

        def port():
            if self.proc.poll() is not None:
                return -1
            with open(self.log, "r", errors="replace") as f:
                for line in f:
                    if "API on http://127.0.0.1:" in line:
                        return int(line.rsplit(":", 1)[1].strip().rstrip("/"))
            return None

        p = wait_until(port, 20)
        if not p or p < 0:
            raise RuntimeError(f"engine serve did not start: {open(self.log).read()}")
        self.port = p

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        """SIGTERM; it must stop cleanly, with nothing from the sanitizers in its log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill9()
                fail("engine serve did not stop within 20 s of SIGTERM")
                return
            log = open(self.log, errors="replace").read()
            bad = [ln for ln in log.splitlines() if "Sanitizer" in ln or "runtime error:" in ln]
            if self.proc.returncode != 0 or bad:
                fail(f"engine serve stopped with exit {self.proc.returncode}: {' | '.join(bad[:5]) or log[-500:]}")

    def cli(self, *args):
        """The engine CLI on the same database: (exit code, stdout, stderr)."""
        r = subprocess.run([ENGINE, *args, "--db", self.db], capture_output=True, text=True, env=self.env,
                           timeout=60)
        return r.returncode, r.stdout, r.stderr


def api(port, method, path, body=None, headers=None, timeout=30):
    """One request on a fresh connection: (status, headers dict, decoded JSON or text)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout * SCALE)
    try:
        data = body if body is None or isinstance(body, (bytes, str)) else json.dumps(body)
        c.request(method, path, body=data, headers=headers or {})
        r = c.getresponse()
        raw = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        try:
            out = json.loads(raw) if raw else None
        except ValueError:
            out = raw.decode("utf-8", "replace")
        return r.status, hdrs, out
    finally:
        c.close()


def start(port, script, wf_id, inp=None):
    body = {"script": script, "id": wf_id}
    if inp is not None:
        body["input"] = inp
    return api(port, "POST", "/v1/workflows", body)


def sig(port, wf_id, name, payload):
    return api(port, "POST", f"/v1/workflows/{wf_id}/signals/{name}", payload)


def json_events(port, wf_id):
    st, _, j = api(port, "GET", f"/v1/workflows/{wf_id}/events?limit=10000")
    assert st == 200, (st, j)
    return j


def wait_seq(port, wf_id, n, secs=20):
    """Until event n is recorded: a page of the one event at n, not every
    event each look (section slow's were 25 MB a look, past 30 s under ASan
    and load)."""
    def there():
        st, _, j = api(port, "GET", f"/v1/workflows/{wf_id}/events?after={n - 1}&limit=1")
        return st == 200 and isinstance(j, dict) and len(j.get("events") or []) > 0
    return wait_until(there, secs)


def wait_status(port, wf_id, want, secs=30):
    return wait_until(lambda: api(port, "GET", f"/v1/workflows/{wf_id}")[2].get("status") == want, secs, 0.05)


# ------------------------------------------------------------ SSE client ---

class SSE:
    """A Server-Sent Events client on a raw socket. frames() yields each frame
    (dict: id, event, data, retry, comment) as it is completed by a blank line."""

    def __init__(self, port, path, headers=None, rcvbuf=None, timeout=30, read_head=True):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        h = {"Host": f"127.0.0.1:{port}", "Accept": "text/event-stream"}
        h.update(headers or {})
        req = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
        self.sock.sendall(req.encode())
        self.raw = b""  # bytes from the socket not yet decoded
        self.body = b""  # decoded body bytes not yet parsed into frames
        self.eof = False  # the peer closed the connection
        self.ended = False  # the response body ended (last chunk)
        self.status = None
        self.headers = {}
        self.chunked = False
        if read_head:
            self.read_head()

    def _recv(self):
        d = self.sock.recv(65536)
        if not d:
            self.eof = True
        self.raw += d
        return d

    def read_head(self):
        while b"\r\n\r\n" not in self.raw:
            if not self._recv():
                raise ConnectionError("closed before the response head")
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()

    def _decode(self):
        """Moves what is complete from raw into body (de-chunking)."""
        if not self.chunked:
            self.body += self.raw
            self.raw = b""
            if self.eof:
                self.ended = True
            return
        while not self.ended:
            if b"\r\n" not in self.raw:
                return
            size_line, rest = self.raw.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                if b"\r\n" not in rest:
                    return
                self.raw = rest.split(b"\r\n", 1)[1]  # no trailers are sent
                self.ended = True
                return
            if len(rest) < size + 2:
                return
            self.body += rest[:size]
            self.raw = rest[size + 2:]

    def next_frame(self):
        """The next frame, or None when the stream ended (or the peer closed).
        Raises socket.timeout when nothing comes for the socket's timeout."""
        while True:
            if b"\n\n" in self.body:
                block, self.body = self.body.split(b"\n\n", 1)
                return parse_frame(block)
            if self.ended or self.eof:
                return None
            self._recv()
            self._decode()

    def frames(self):
        while True:
            f = self.next_frame()
            if f is None:
                return
            yield f

    def closed_by_peer(self, secs=3):
        """After the end: whether the server closes the connection within secs."""
        end = time.monotonic() + secs
        self.sock.settimeout(0.2)
        while time.monotonic() < end:
            try:
                if not self.sock.recv(65536):
                    return True
            except socket.timeout:
                continue
            except ConnectionError:
                return True
        return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def parse_frame(block):
    f = {"id": None, "event": None, "data": None, "retry": None, "comment": False}
    lines = block.decode("utf-8").split("\n")
    data = []
    for line in lines:
        if line.startswith(":"):
            continue
        k, _, v = line.partition(":")
        if v.startswith(" "):
            v = v[1:]
        if k == "data":
            data.append(v)
        elif k in ("id", "event", "retry"):
            f[k] = v
        else:
            raise ValueError(f"unknown SSE field in {block!r}")
    if data:
        f["data"] = "\n".join(data)
    f["comment"] = all(x.startswith(":") for x in lines)
    return f


def read_events(cli, want=None, secs=30):
    """Events (frames with an id) of cli, as (id, decoded data), until want of
    them (or the end); the end frame's data is returned too (None without one)."""
    out, end = [], None
    deadline = time.monotonic() + secs * SCALE
    while time.monotonic() < deadline:
        f = cli.next_frame()
        if f is None:
            break
        if f["event"] == "end":
            end = json.loads(f["data"])
            continue
        if f["id"] is not None:
            out.append((int(f["id"]), json.loads(f["data"])))
            if want is not None and len(out) >= want:
                break
    return out, end


# ------------------------------------------------------------- sections ---

def section_framing(work):
    srv = Serve(os.path.join(work, "framing.db"))
    port = srv.port
    try:
        st, hdr, j = start(port, "sse_emitter.lua", "f1", {})
        check("POST start: 201 with Location", st == 201 and hdr.get("location") == "/v1/workflows/f1", f"{st} {hdr}")

        # A reads k = 2 live events, B (?after=0) k = 5; both drop and resume.
        a = SSE(port, "/v1/workflows/f1/events")
        b = SSE(port, "/v1/workflows/f1/events?after=0")
        check("SSE answer: 200 text/event-stream, chunked",
              a.status == 200 and a.headers.get("content-type", "").startswith("text/event-stream") and a.chunked,
              f"{a.status} {a.headers}")
        first = a.next_frame()
        check("the stream opens with retry: 2000", first and first["retry"] == "2000", str(first))
        sig(port, "f1", "cmd", {"op": "emit", "n": 6, "tag": "one"})
        a1, _ = read_events(a, want=2)
        a.close()
        b1, _ = read_events(b, want=5)
        b.close()
        check("live ids are the domain seq, dense from 1", [i for i, _ in a1] == [1, 2], str(a1))
        check("the event's seq is its id", all(e["seq"] == i for i, e in a1 + b1))
        # each signal adds its own event first (signal.sent, who sent it): the
        # stream is 1 signal.sent + 6 ticks, then 1 + 4, then 1 + 3, then 1 (stop)
        sig(port, "f1", "cmd", {"op": "emit", "n": 4, "tag": "two"})  # while both are away
        wait_seq(port, "f1", 12)

        # heartbeats while idle (ENGINE_SSE_HEARTBEAT_MS=200): three come, and
        # nothing else; the third not sooner than two intervals after the
        # stream began (the first comes at the server's next beat, which is
        # shared by the streams): a bound a slow machine only makes safer, not
        # a count in a window of time
        t0 = time.monotonic()
        hb = SSE(port, "/v1/workflows/f1/events?after=12")
        hb.next_frame()  # retry
        beats, other, deadline = 0, [], t0 + 30 * SCALE
        hb.sock.settimeout(0.3)
        while beats < 3 and time.monotonic() < deadline:
            try:
                f = hb.next_frame()
            except socket.timeout:
                continue
            if f is None:
                break
            if f["comment"]:
                beats += 1
            else:
                other.append(f)
        took = time.monotonic() - t0
        hb.close()
        check(f"heartbeats while idle (':' comment lines): {beats}, the third after {took:.2f} s",
              beats == 3 and not other and took >= 0.3, f"{beats} beats, other frames {other}")

        a = SSE(port, "/v1/workflows/f1/events", headers={"Last-Event-ID": str(a1[-1][0])})
        b = SSE(port, f"/v1/workflows/f1/events?after={b1[-1][0]}")
        a2, _ = read_events(a, want=8)
        b2, _ = read_events(b, want=5)
        check("Last-Event-ID resumes right after that id (backlog)", [i for i, _ in a2] == list(range(3, 11)),
              str([i for i, _ in a2]))
        check("?after= resumes the same way", [i for i, _ in b2] == list(range(6, 11)), str([i for i, _ in b2]))
        sig(port, "f1", "cmd", {"op": "emit", "n": 3, "tag": "three"})
        sig(port, "f1", "cmd", {"op": "stop"})
        a3, aend = read_events(a)
        b3, bend = read_events(b)
        check("then live events, and the end",
              [i for i, _ in a3] == list(range(11, 18)) and aend == {"status": "completed"}, f"{a3} {aend}")
        check("?after=: the same", [i for i, _ in b3] == list(range(11, 18)) and bend == {"status": "completed"})
        check("the response ends after event: end (last chunk)", a.ended and a.next_frame() is None)
        closed = a.closed_by_peer(3)
        check("and the server closes the connection", closed)
        a.close()
        b.close()

        j = json_events(port, "f1")
        want = [(e["seq"], e) for e in j["events"]]
        check("JSON: 17 events, completed", len(want) == 17 and j["status"] == "completed" and j["last_seq"] == 17,
              json.dumps(j)[:300])
        check("JSON: each signal recorded who sent it", [e["payload"]["by"] for _, e in want
                                                          if e["type"] == "signal.sent"] == ["anonymous"] * 4)
        ua, ub = a1 + a2 + a3, b1 + b2 + b3
        check("Last-Event-ID client: every event exactly once, as in the JSON", ua == want,
              f"ids {[i for i, _ in ua]}")
        check("?after= client: every event exactly once, as in the JSON", ub == want, f"ids {[i for i, _ in ub]}")

        # after the end: the backlog then the end at once; a resume past the last id: only the end
        c = SSE(port, "/v1/workflows/f1/events")
        cev, cend = read_events(c, secs=10)
        check("a stream of a finished workflow: all events then the end", cev == want and cend == {"status": "completed"})
        c.close()
        c = SSE(port, "/v1/workflows/f1/events", headers={"Last-Event-ID": "17"})
        cev, cend = read_events(c, secs=10)
        check("resumed at the last id: nothing, then the end", cev == [] and cend == {"status": "completed"})
        c.close()
        c = SSE(port, "/v1/workflows/f1/events?after=1", headers={"Last-Event-ID": "11"})
        cev, _ = read_events(c, secs=10)
        check("Last-Event-ID wins over ?after=", [i for i, _ in cev] == list(range(12, 18)), str([i for i, _ in cev]))
        c.close()
        for bad in ("abc", "-1", "3x"):
            c = SSE(port, "/v1/workflows/f1/events", headers={"Last-Event-ID": bad})
            check(f"Last-Event-ID {bad!r}: 400", c.status == 400, str(c.status))
            c.close()
        c = SSE(port, "/v1/workflows/nope/events")
        check("a stream of an unknown workflow: 404", c.status == 404, str(c.status))
        c.close()

        # latency: a write is answered at its commit, an event reaches a subscriber at once
        start(port, "sse_emitter.lua", "f3", {})
        c = SSE(port, "/v1/workflows/f3/events")
        c.next_frame()  # retry
        acks, seen = [], []
        for k in range(10):
            t0 = time.monotonic()
            sig(port, "f3", "cmd", {"op": "emit", "n": 1, "tag": f"lat{k}"})
            acks.append(time.monotonic() - t0)
            f = c.next_frame()
            while f is not None and f["id"] is None:
                f = c.next_frame()
            seen.append(time.monotonic() - t0)
        c.close()
        acks.sort()
        seen.sort()
        # how fast is measured, not asserted (a busy machine is slower; the
        # loop's latency is tests/bench's: api_bench, pg_loop_bench)
        check("each of 10 signals is answered and its event reaches the subscriber", len(seen) == 10)
        print(f"# a signal answered in {acks[5] * 1000:.0f} ms (median; worst {acks[-1] * 1000:.0f} ms), "
              f"its event at the subscriber in {seen[5] * 1000:.0f} ms (median)", flush=True)
        sig(port, "f3", "cmd", {"op": "stop"})

        # a cancelled workflow's stream ends with its status
        start(port, "sse_emitter.lua", "f2", {})
        c = SSE(port, "/v1/workflows/f2/events")
        st, _, _ = api(port, "POST", "/v1/workflows/f2/cancel")
        cev, cend = read_events(c)
        check("cancel: 202, the stream ends with status cancelled", st == 202 and cend == {"status": "cancelled"},
              f"{st} {cend}")
        c.close()
    finally:
        srv.stop()


def section_fanout(work):
    srv = Serve(os.path.join(work, "fanout.db"))
    port = srv.port
    n_clients = 100
    try:
        start(port, "sse_emitter.lua", "fan", {})
        results = [None] * n_clients
        errors = []

        def client(i):
            try:
                c = SSE(port, "/v1/workflows/fan/events", timeout=60)
                results[i] = read_events(c, secs=90)
                c.close()
            except Exception as ex:  # noqa: BLE001 - reported as a failure
                errors.append(f"client {i}: {ex!r}")

        threads = [threading.Thread(target=client, args=(i,)) for i in range(n_clients)]
        for t in threads[:50]:
            t.start()
        wait_until(lambda: metric(port, "engine_sse_streams") >= 50, 10)
        rnd = random.Random(7)
        for k in range(12):
            if k == 4:
                for t in threads[50:]:  # half join mid-session: backlog, then live
                    t.start()
            sig(port, "fan", "cmd", {"op": "emit", "n": rnd.randint(1, 12), "pad": rnd.randint(0, 3000),
                                     "tag": f"batch{k}"})
            time.sleep(rnd.uniform(0, 0.05))
        sig(port, "fan", "cmd", {"op": "stop"})
        for t in threads:
            t.join(120)
        check(f"{n_clients} clients ran without errors", not errors, "; ".join(errors[:5]))
        j = json_events(port, "fan")
        want = [(e["seq"], e) for e in j["events"]]
        same = sum(1 for r in results if r and r[0] == want and r[1] == {"status": "completed"})
        check(f"{n_clients} concurrent clients all saw the same {len(want)} events (ids and payloads) and the end",
              same == n_clients and len(want) > 12, f"{same} of {n_clients} matched")
        bad = next((r for r in results if not r or r[0] != want), None)
        if bad:
            print(f"   first mismatch: ids {[i for i, _ in bad[0]][:40]} end {bad[1]}", file=sys.stderr)
        check("all streams closed afterwards", wait_until(lambda: metric(port, "engine_sse_streams") == 0, 10))
    finally:
        srv.stop()


def metric(port, name):
    st, _, text = api(port, "GET", "/metrics")
    if st != 200:
        return -1
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return -1


def section_feed(work):
    srv = Serve(os.path.join(work, "feed.db"))
    port = srv.port
    try:
        f1 = SSE(port, "/v1/events", timeout=30)
        f2 = SSE(port, "/v1/events?after=0", timeout=30)
        for s in ("s1", "s2"):
            start(port, "sse_emitter.lua", s, {})

        def driver(wf_id, seed):
            rnd = random.Random(seed)
            for k in range(15):
                sig(port, wf_id, "cmd", {"op": "emit", "n": rnd.randint(1, 6), "tag": f"{wf_id}-{k}"})
                time.sleep(rnd.uniform(0, 0.02))

        ds = [threading.Thread(target=driver, args=(s, i)) for i, s in enumerate(("s1", "s2"))]
        for t in ds:
            t.start()
        # f2 leaves after 7 events and comes back with Last-Event-ID
        part1, _ = read_events(f2, want=7)
        f2.close()
        for t in ds:
            t.join()
        for s in ("s1", "s2"):
            sig(port, s, "cmd", {"op": "stop"})
            wait_status(port, s, "completed")
        per = {s: json_events(port, s)["events"] for s in ("s1", "s2")}
        total = sum(len(v) for v in per.values())
        f2 = SSE(port, "/v1/events", headers={"Last-Event-ID": str(part1[-1][0])}, timeout=30)
        part2, _ = read_events(f2, want=total - 7)
        f2.close()
        got, _ = read_events(f1, want=total)
        f1.close()
        st, _, page = api(port, "GET", "/v1/events?after=0&limit=10000")
        ids = [i for i, _ in got]
        check("GET /v1/events (SSE): ids strictly increase", all(a < b for a, b in zip(ids, ids[1:])), str(ids[:50]))
        keys = [(e["session_id"], e["seq"]) for _, e in got]
        want_keys = sorted((s, e["seq"]) for s, v in per.items() for e in v)
        check(f"every event of both sessions exactly once ({total})",
              sorted(keys) == want_keys and len(set(keys)) == len(keys), f"{len(keys)} got, {len(want_keys)} wanted")
        inter = len({s for s, _ in keys[: total // 2]}) == 2
        check("the two sessions interleave in the feed", inter)
        for s in ("s1", "s2"):
            mine = [e for _, e in got if e["session_id"] == s]
            check(f"{s}: in seq order, payloads as in its JSON events", mine == per[s])
        check("the JSON feed page holds the same ids and events", st == 200 and
              [(x["id"], x["event"]) for x in page["events"]] == got and page["last_id"] == ids[-1])
        u = part1 + part2
        check("resumed with Last-Event-ID: every event exactly once", u == got, f"{[i for i, _ in u][:40]}")
        f3 = SSE(port, f"/v1/events?after={ids[9]}", timeout=30)
        p3, _ = read_events(f3, want=total - 10)
        f3.close()
        check("?after= resumes the feed the same way", p3 == got[10:])
        f4 = SSE(port, f"/v1/events?after={ids[-1]}", timeout=2)
        f4.next_frame()  # retry
        f = f4.next_frame()
        check("the feed stream stays open (heartbeats, no end) when caught up", f is not None and f["comment"], str(f))
        f4.close()
    finally:
        srv.stop()


def section_delta(work):
    """agent.delta from a model that streams slowly, through agent_session.lua."""
    driver = os.environ.get("SSE_SANDBOX_DRIVER", "")
    if not driver:
        print("   (no sandbox driver available: the agent.delta section is skipped)")
        return
    text = ('{"summary": "the streamed answer arrives in several pieces, slowly", '
            '"result": {"pieces": "one two three four five six"}}')
    scen = os.path.join(work, "delta_scenario.json")
    # turn 1: some text and a tool call; turn 2: the answer; both streamed in word pieces, 50 ms apart
    with open(scen, "w") as f:
        json.dump({"steps": [{"reply": {"text": "Let me look at the input first, then answer.",
                                        "tool_calls": [{"id": "c1", "name": "read_file",
                                                        "arguments": {"path": "/workspace/input/none.txt"}}]},
                              "chunk_delay": 0.05}],
                   "default": {"reply": {"text": text, "usage": {"input_tokens": 10, "output_tokens": 20}},
                               "chunk_delay": 0.05}}, f)
    pfile = os.path.join(work, "mport")
    ms = subprocess.Popen([sys.executable, os.path.join(SRC, "tests", "model_server", "server.py"), "--port", "0",
                           "--port-file", pfile, "--scenario", scen],
                          stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "mserver.log"), "wb"))
    srv = None
    try:
        wait_until(lambda: os.path.exists(pfile) and open(pfile).read().strip(), 10)
        mport = int(open(pfile).read())
        env = {"ENGINE_SANDBOX_DRIVER": driver, "ENGINE_CONTEXT_ROOTS": work,
               "ENGINE_REVIEWS_DIR": os.path.join(work, "reviews"),
               "ENGINE_ARTIFACTS": os.path.join(work, "artifacts")}
        db = os.path.join(work, "delta.db")
        srv = Serve(db, workflows=os.path.join(SRC, "workflows"), env=env)
        port = srv.port
        inp = {"objective": "answer", "context": {"files": []}, "skills": [], "permissions": {"tools": ["read_file"]},
               "limits": {"maxModelTurns": 3, "memoryMb": 256, "timeoutSeconds": 300},
               "model": {"name": "m", "provider": "openai", "baseUrl": f"http://127.0.0.1:{mport}/v1"}}
        st, _, j = start(port, "agent_session.lua", "ag1", inp)
        check("agent_session started over the API", st == 201, f"{st} {j}")
        c = SSE(port, "/v1/workflows/ag1/events", timeout=120)
        frames, at = [], []
        while True:
            f = c.next_frame()
            if f is None:
                break
            frames.append(f)
            at.append(time.monotonic())
        c.close()
        ended = [f for f in frames if f["event"] == "end"]
        check("the session's stream ended: completed", ended and json.loads(ended[0]["data"]) == {"status": "completed"},
              str(ended) + open(srv.log).read()[-2000:])
        deltas = [f for f in frames if f["event"] == "agent.delta"]
        check("agent.delta frames arrive, several per turn", len(deltas) >= 5, f"{len(deltas)} deltas")
        check("agent.delta frames have no id", all(f["id"] is None for f in deltas))
        # group the deltas by their step (one model.turn activity) in arrival order
        msgs = [(i, json.loads(f["data"])) for i, f in enumerate(frames)
                if f["id"] is not None and json.loads(f["data"])["type"] == "agent.message"]
        check("two turns, two agent.message events", len(msgs) == 2, str(len(msgs)))
        steps = []
        for i, f in enumerate(frames):
            if f["event"] != "agent.delta":
                continue
            d = json.loads(f["data"])
            check_shape = d.get("type") == "agent.delta" and d.get("session_id") == "ag1" and "delta" in d["payload"]
            if not check_shape:
                fail(f"agent.delta data shape: {d}")
                return
            p = d["payload"]
            if not steps or steps[-1]["step"] != p["step"] or steps[-1]["attempt"] != p["attempt"]:
                steps.append({"step": p["step"], "attempt": p["attempt"], "first": i, "last": i, "text": "", "n": [],
                              "tool": False})
            steps[-1]["last"] = i
            if p["delta"].get("type") == "text":  # {type = "text", text} or {type = "tool_call", ...}
                steps[-1]["text"] += p["delta"]["text"]
            elif p["delta"].get("type") == "tool_call":
                steps[-1]["tool"] = True
            steps[-1]["n"].append(p["n"])
        check("one group of deltas per agent.message (per turn)", len(steps) == len(msgs),
              f"{len(steps)} groups, {len(msgs)} messages")
        for k, (g, (mi, m)) in enumerate(zip(steps, msgs)):
            check(f"turn {k + 1}: its deltas all come before its agent.message", g["last"] < mi,
                  f"last delta at {g['last']}, message at {mi}")
            if k > 0:
                check(f"turn {k + 1}: and after the previous turn's message", g["first"] > msgs[k - 1][0])
            check(f"turn {k + 1}: deltas numbered 1..n", g["n"] == list(range(1, len(g["n"]) + 1)), str(g["n"]))
            spread = at[g["last"]] - at[g["first"]]
            check(f"turn {k + 1}: they arrive as the model writes ({len(g['n'])} over {spread:.2f} s)",
                  spread >= 0.025 * (len(g["n"]) - 1), f"{spread:.3f} s")
            check(f"turn {k + 1}: the deltas concatenated are the message text", g["text"] == m["payload"]["text"],
                  f"{g['text']!r} vs {m['payload']['text']!r}")
        check("turn 1's tool call streams as deltas too", steps and steps[0]["tool"], str(steps[:1]))
        j = json_events(port, "ag1")
        check("no agent.delta in GET .../events (JSON)", all(e["type"] != "agent.delta" for e in j["events"]) and
              any(e["type"] == "agent.message" for e in j["events"]))
        ids = [int(f["id"]) for f in frames if f["id"] is not None]
        check("the SSE ids are the JSON events' seqs", ids == [e["seq"] for e in j["events"]])
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        n_dom = con.execute("SELECT count(*) FROM domain_events WHERE type = 'agent.delta'").fetchone()[0]
        n_hist = con.execute("SELECT count(*) FROM history WHERE payload LIKE '%agent.delta%' "
                             "OR name = 'agent.delta'").fetchone()[0]
        piece = steps[0]["text"][:40] if steps else "x"
        n_text = con.execute("SELECT count(*) FROM domain_events WHERE type = 'agent.message'").fetchone()[0]
        con.close()
        check("no agent.delta in the database (domain events, history)", n_dom == 0 and n_hist == 0,
              f"{n_dom} {n_hist}")
        check("while agent.message is there", n_text == len(msgs) and piece)
    finally:
        if srv:
            srv.stop()
        ms.terminate()
        ms.wait()


def section_kill(work):
    """kill -9 of engine serve under load: nothing acknowledged is lost."""
    db = os.path.join(work, "kill.db")
    # each round kills the serve once this round has had so many starts and
    # signals acknowledged (a state, not a time: under ASan, 0.4 s held 6
    # starts and no signal), so each kill comes further into the load
    rounds = [(3, 1), (15, 10), (30, 30)]
    acked_starts, acked_signals = {}, {}  # id -> input k; tag -> workflow id
    for rnd_no, (want_starts, want_signals) in enumerate(rounds):
        srv = Serve(db)
        port = srv.port
        stop = threading.Event()
        lock = threading.Lock()
        live = [w for w in acked_starts]  # signal targets: acknowledged, not stopped
        counts = {"start": 0, "signal": 0, "errors": 0}
        cut = []  # how the requests in flight ended: not refused (that one was never sent)

        def starter(t):
            n = 0
            while not stop.is_set():
                wf_id = f"r{rnd_no}-t{t}-{n}"
                n += 1
                try:
                    st, _, _ = start(port, "sse_emitter.lua", wf_id, {"k": wf_id})
                except OSError as ex:
                    with lock:
                        counts["errors"] += 1
                        cut.append(type(ex).__name__)
                    return
                if st in (200, 201):
                    with lock:
                        acked_starts[wf_id] = wf_id
                        live.append(wf_id)
                        counts["start"] += 1

        def signaller(t):
            rnd = random.Random(t * 1000 + rnd_no)
            n = 0
            while not stop.is_set():
                with lock:
                    target = rnd.choice(live) if live else None
                if not target:
                    time.sleep(0.005)
                    continue
                tag = f"r{rnd_no}-s{t}-{n}"
                n += 1
                try:
                    st, _, _ = sig(port, target, "cmd", {"op": "emit", "n": 1, "tag": tag})
                except OSError as ex:
                    with lock:
                        counts["errors"] += 1
                        cut.append(type(ex).__name__)
                    return
                if st == 200:
                    with lock:
                        acked_signals[tag] = target
                        counts["signal"] += 1

        threads = [threading.Thread(target=starter, args=(t,)) for t in range(6)]
        threads += [threading.Thread(target=signaller, args=(t,)) for t in range(6)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120 * SCALE
        while time.monotonic() < deadline:
            with lock:
                if counts["start"] >= want_starts and counts["signal"] >= want_signals:
                    break
            time.sleep(0.01)
        srv.kill9()  # requests in flight
        stop.set()
        for t in threads:
            t.join(30)
        in_flight = [k for k in cut if k != "ConnectionRefusedError"]
        print(f"   round {rnd_no + 1}: kill -9 after {want_starts} starts and {want_signals} signals: {counts['start']} starts and {counts['signal']} signals "
              f"acknowledged; {len(in_flight)} requests cut off in flight ({', '.join(sorted(set(cut)))})")
        check(f"round {rnd_no + 1}: requests were in flight when the server died",
              counts["start"] > 0 and counts["signal"] > 0 and in_flight, str(counts))
        # the database as the crash left it, before any restart
        con = sqlite3.connect(db, timeout=10)
        rows = {w for (w,) in con.execute("SELECT id FROM workflows")}
        started = {w for (w,) in con.execute("SELECT wf_id FROM history WHERE seq = 1 AND type = 'WorkflowStarted'")}
        buffered = {json.loads(p or "{}").get("tag") for (p,) in con.execute("SELECT payload FROM signals")}
        received = {json.loads(p or "{}").get("tag") for (p,) in
                    con.execute("SELECT payload FROM history WHERE type = 'SignalReceived'")}
        con.close()
        check(f"round {rnd_no + 1}, right after the crash: every acknowledged start is in the database",
              set(acked_starts) <= rows, f"{len(set(acked_starts) - rows)} missing")
        check(f"round {rnd_no + 1}: every workflow row has its WorkflowStarted", rows <= started,
              f"{sorted(rows - started)[:10]}")
        check(f"round {rnd_no + 1}: every acknowledged signal is buffered or received",
              set(acked_signals) <= buffered | received, f"{len(set(acked_signals) - buffered - received)} missing")
    srv = Serve(db)  # the last restart, then the checks on everything acknowledged
    port = srv.port
    try:
        missing = [w for w in acked_starts if api(port, "GET", f"/v1/workflows/{w}")[0] != 200]
        check(f"every acknowledged start exists after the restarts ({len(acked_starts)})", not missing,
              f"missing: {missing[:10]}")
        sample = random.Random(1).sample(sorted(acked_starts), min(20, len(acked_starts)))
        bad = [w for w in sample if srv.cli("show", w)[0] not in (0, 3)]
        check("engine show finds them too (a sample of 20)", not bad, str(bad))
        # the workflows take their buffered signals; then each acknowledged one is in a history
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        drained = wait_until(lambda: con.execute("SELECT count(*) FROM signals").fetchone()[0] == 0, 120, 0.2)
        check("the buffered signals are all taken after the restart", drained)
        got = {}
        for wf_id, payload in con.execute("SELECT wf_id, payload FROM history WHERE type = 'SignalReceived'"):
            tag = json.loads(payload).get("tag") if payload else None
            got.setdefault(tag, []).append(wf_id)
        lost = [t for t, w in acked_signals.items() if w not in got.get(t, [])]
        check(f"every acknowledged signal is in its workflow's history ({len(acked_signals)})", not lost,
              f"lost: {lost[:10]}")
        twice = [t for t, ws in got.items() if t and len(ws) > 1]
        check("no signal was received twice", not twice, str(twice[:10]))
        ticks = {json.loads(p).get("tag") for (p,) in con.execute("SELECT payload FROM domain_events WHERE type='tick'")}
        check("each acknowledged signal's event was emitted", all(t in ticks for t in acked_signals))
        half = con.execute("SELECT id FROM workflows w WHERE NOT EXISTS (SELECT 1 FROM history h "
                           "WHERE h.wf_id = w.id AND h.run = w.run AND h.seq = 1 AND h.type = 'WorkflowStarted')"
                           ).fetchall()
        check("nothing half-written: every workflow row starts with WorkflowStarted", not half, str(half[:10]))
        nwf = con.execute("SELECT count(*) FROM workflows").fetchone()[0]
        dense = con.execute("SELECT count(*) FROM (SELECT wf_id, run, count(*) AS n, max(seq) AS m FROM history "
                            "GROUP BY wf_id, run) WHERE n != m").fetchone()[0]
        check("every history is dense (seq 1..n)", dense == 0, str(dense))
        con.close()
        rc, out, err = srv.cli("list")
        check(f"engine list: exit 0, every workflow listed, no error ({nwf})",
              rc == 0 and not err.strip() and len([ln for ln in out.splitlines() if ln.strip()]) >= nwf,
              f"rc {rc} err {err[:300]}")
        h = [srv.cli("history", w, "--json") for w in sample[:5]]
        check("engine history reads them", all(x[0] == 0 and "WorkflowStarted" in x[1] for x in h))
    finally:
        srv.stop()


def section_slow(work):
    """A reader that never reads: dropped at the queue cap, nobody else waits."""
    srv = Serve(os.path.join(work, "slow.db"))
    port = srv.port
    try:
        start(port, "sse_emitter.lua", "sl", {})
        slow = SSE(port, "/v1/workflows/sl/events", rcvbuf=4096, timeout=60)  # reads its head, then nothing
        fast = SSE(port, "/v1/workflows/sl/events", timeout=60 * SCALE)
        fast_out = []
        # it reads until the end (the stop below): a window of its own would
        # cut it off while a busy machine is still writing the 384 events
        fast_t = threading.Thread(target=lambda: fast_out.append(read_events(fast, secs=900)))
        fast_t.start()
        # 64 KiB events, 24 MiB in all: the kernel buffers a few MiB, the rest queues past the 8 MiB cap
        lat, answered = [], 0
        t0 = time.monotonic()
        for k in range(48):
            sig(port, "sl", "cmd", {"op": "emit", "n": 8, "pad": 64 << 10, "tag": f"b{k}"})
            t1 = time.monotonic()
            st, _, _ = api(port, "GET", "/healthz", timeout=10)  # a server blocked by the reader times out
            lat.append(time.monotonic() - t1)
            answered += st == 200
            if st != 200:
                fail(f"GET /healthz during the load: {st}")
        total = 48 * 9 + 1  # each signal's signal.sent, its 8 events; then the stop's signal.sent
        wait_seq(port, "sl", 48 * 9, 60)
        print(f"   384 events of 64 KiB written in {time.monotonic() - t0:.1f} s; "
              f"slowest /healthz {max(lat) * 1000:.0f} ms")
        # answered, not how fast (a speed is for tests/bench): the slowest is printed above
        check("other requests complete while a reader stalls (every /healthz answered)", answered == 48,
              f"{answered} of 48")
        dropped = wait_until(lambda: metric(port, "engine_sse_streams") <= 1, 15, 0.2)
        check("the stalled stream is dropped (it no longer counts as open) while its client still reads nothing",
              dropped, f"engine_sse_streams {metric(port, 'engine_sse_streams')}")
        # a client that catches up from far behind when the workflow ends: the end comes after its backlog
        lag = SSE(port, "/v1/workflows/sl/events?after=0", timeout=30)
        lag1, _ = read_events(lag, want=5)
        sig(port, "sl", "cmd", {"op": "stop"})
        wait_status(port, "sl", "completed")
        lag2, lagend = read_events(lag, secs=60)
        lag.close()
        check("the workflow ends while a client catches up: its whole backlog, then the end",
              [i for i, _ in lag1 + lag2] == list(range(1, total + 1)) and lagend == {"status": "completed"},
              f"{len(lag1 + lag2)} events, end {lagend}")
        fast_t.join(900 * SCALE)
        fev, fend = fast_out[0] if fast_out else ([], None)
        check("a client that reads gets every event and the end", len(fev) == total and fend == {"status": "completed"},
              f"{len(fev)} {fend}")
        # the stalled client now reads: some events, then the stream is cut (no end), no event twice or half
        slow.sock.settimeout(10)
        sev, send_, how = [], None, "the stream ended"
        try:
            for f in slow.frames():
                if f["event"] == "end":
                    send_ = f["data"]
                elif f["id"] is not None:
                    sev.append((int(f["id"]), json.loads(f["data"])))
        except (socket.timeout, ConnectionError) as ex:
            how = repr(ex)
        print(f"   the stalled client, reading at last: {len(sev)} events, then {how}")
        ids = [i for i, _ in sev]
        check(f"the dropped client got a prefix ({len(ids)} events) and no end: it resumes with Last-Event-ID",
              ids == list(range(1, len(ids) + 1)) and len(ids) < total and send_ is None, f"{len(ids)} {send_}")
        slow.close()
        if ids:
            r = SSE(port, "/v1/workflows/sl/events", headers={"Last-Event-ID": str(ids[-1])}, timeout=30)
            rev, rend = read_events(r, secs=60)
            r.close()
            rids = [i for i, _ in rev]
            check("and resuming gets the rest", rids == list(range(ids[-1] + 1, total + 1)) and
                  rend == {"status": "completed"}, f"{rids[:3]}..{rids[-3:]} ({len(rids)}) {rend}")
        fe = SSE(port, "/v1/events?after=0", timeout=30)
        fev, _ = read_events(fe, want=total, secs=60)
        fe.close()
        check("GET /v1/events from 0 (24 MiB behind) gets every event, in order",
              [e["seq"] for _, e in fev] == list(range(1, total + 1)), f"{len(fev)} events")
        st, _, _ = api(port, "GET", "/healthz")
        check("the server is well afterwards", st == 200)
    finally:
        srv.stop()


SECTIONS = {"framing": section_framing, "fanout": section_fanout, "feed": section_feed, "delta": section_delta,
            "kill": section_kill, "slow": section_slow}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SECTIONS:
        print(f"usage: sse_suite.py {{{'|'.join(SECTIONS)}}} WORKDIR", file=sys.stderr)
        return 2
    work = os.path.join(sys.argv[2], sys.argv[1])
    os.makedirs(work, exist_ok=True)
    bound = int(300 * SCALE)
    signal.signal(signal.SIGALRM, lambda *_: (fail(f"section {sys.argv[1]} took over {bound} s"), os._exit(1)))
    signal.alarm(bound)
    try:
        SECTIONS[sys.argv[1]](work)
    except Exception as ex:  # noqa: BLE001 - a crash of the suite is a failure
        import traceback
        traceback.print_exc()
        fail(f"section {sys.argv[1]} raised {ex!r}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
