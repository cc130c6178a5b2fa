#!/usr/bin/env python3
"""The receiver's own test: what it stores, how it answers, and every
scripted misbehaviour the exporter's tests will lean on. Starts receiver.py
on a free loopback port; Python 3 standard library only.

  python3 tests/otel/test_receiver.py [-v]
"""

import gzip
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "trace_agent.json")
SCALE = float(os.environ.get("TEST_TIMEOUT_SCALE", "1") or 1)


def until(cond, what, secs=30):
    """Polls cond() until it is true, at most secs (scaled by
    TEST_TIMEOUT_SCALE); fails naming what it waited for."""
    end = time.monotonic() + secs * SCALE
    pause = 0.02
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timeout waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 1.5, 0.25)


class Receiver:
    def __init__(self, tmp, *args):
        self.tmp = tmp
        self.out = os.path.join(tmp, "out.jsonl")
        port_file = os.path.join(tmp, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.err = open(os.path.join(tmp, "receiver.err"), "w")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "receiver.py"), "--port", "0", "--port-file", port_file,
             "--out", self.out, *args], stderr=self.err)
        until(lambda: os.path.exists(port_file) or self.proc.poll() is not None, "the receiver's port file")
        if self.proc.poll() is not None:
            with open(self.err.name) as f:
                raise AssertionError("the receiver did not start: " + f.read())
        with open(port_file) as f:
            self.port = int(f.read())

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60 * SCALE)

    def call(self, method, path, body=None, headers=None):
        c = self.conn()
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def post(self, body, ctype="application/json", **headers):
        h = dict(headers)
        if ctype is not None:
            h["Content-Type"] = ctype
        return self.call("POST", "/v1/traces", body, h)

    def get(self, path):
        status, _, body = self.call("GET", path)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def script(self, rules):
        return self.call("POST", "/_script", json.dumps(rules))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30 * SCALE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()


class ReceiverTest(unittest.TestCase):
    def setUp(self):
        self.tmpdir = tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR"))
        self.r = Receiver(self.tmpdir.name)
        with open(FIXTURE, "rb") as f:
            self.body = f.read()

    def tearDown(self):
        self.r.stop()
        self.tmpdir.cleanup()

    def stored(self):
        if not os.path.exists(self.r.out):
            return []
        with open(self.r.out) as f:
            return [json.loads(line) for line in f]

    # ---- the happy path

    def test_stores_and_answers_like_a_collector(self):
        status, headers, body = self.r.post(self.body)
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Type"], "application/json")
        self.assertEqual(json.loads(body), {"partialSuccess": {}})
        recs = self.stored()
        self.assertEqual(len(recs), 1)
        self.assertEqual(recs[0]["seq"], 1)
        self.assertEqual(recs[0]["request"], json.loads(self.body))
        self.assertEqual(recs[0]["body"], self.body.decode())
        self.assertEqual(recs[0]["headers"]["content-type"], "application/json")
        spans = self.r.get("/_spans")
        self.assertEqual(len(spans), 5)
        self.assertEqual(spans[2]["name"], "chat gpt-4.1")
        self.assertEqual(spans[2]["scope"]["name"], "engine")
        self.assertEqual(spans[2]["resource"]["attributes"][0]["value"]["stringValue"], "engine")
        self.assertEqual(spans[2]["request_seq"], 1)
        h = self.r.get("/_health")
        self.assertEqual((h["requests"], h["stored"], h["spans"], h["by_status"]), (1, 1, 5, {"200": 1}))

    def test_span_filters(self):
        self.r.post(self.body)
        self.assertEqual(len(self.r.get("/_spans?name=chat%20gpt-4.1")), 2)
        self.assertEqual(len(self.r.get("/_spans?traceId=4BF92F3577B34DA6A3CE929D0E0E4736")), 5)
        self.assertEqual(self.r.get("/_spans?traceId=0af7651916cd43dd8448eb211c80319c"), [])

    def test_gzip_body(self):
        status, _, _ = self.r.post(gzip.compress(self.body), **{"Content-Encoding": "gzip"})
        self.assertEqual(status, 200)
        self.assertEqual(self.stored()[0]["request"], json.loads(self.body))

    def test_keep_alive_and_chunked(self):
        c = self.r.conn()
        for _ in range(2):  # two requests on one connection
            c.request("POST", "/v1/traces", body=self.body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            r.read()
        # a chunked body (no Content-Length)
        c.putrequest("POST", "/v1/traces")
        c.putheader("Content-Type", "application/json")
        c.putheader("Transfer-Encoding", "chunked")
        c.endheaders()
        for i in range(0, len(self.body), 500):
            part = self.body[i:i + 500]
            c.send(b"%x\r\n%s\r\n" % (len(part), part))
        c.send(b"0\r\n\r\n")
        r = c.getresponse()
        self.assertEqual(r.status, 200, r.read())
        c.close()
        self.assertEqual([x["seq"] for x in self.stored()], [1, 2, 3])
        self.assertEqual(self.stored()[2]["request"], json.loads(self.body))

    def test_expect_100_continue(self):
        # libcurl asks before sending a large body; the answer comes after "100 Continue"
        status, _, _ = self.r.post(self.body, **{"Expect": "100-continue"})
        self.assertEqual(status, 200)
        self.assertEqual(len(self.stored()), 1)

    def test_empty_request_is_a_success(self):
        # the spec: a server SHOULD answer an empty request with success
        self.assertEqual(self.r.post(b"{}")[0], 200)
        self.assertEqual(self.r.get("/_health")["spans"], 0)

    def test_success_body_empty(self):
        self.r.stop()
        self.r = Receiver(self.tmpdir.name, "--success-body", "empty")
        self.assertEqual(json.loads(self.r.post(self.body)[2]), {})

    # ---- what a collector refuses

    def test_refusals(self):
        cases = [
            (dict(ctype="application/x-protobuf"), self.body, 415, "binary protobuf"),
            (dict(ctype="text/plain"), self.body, 415, "application/json"),
            (dict(ctype=None), self.body, 415, "(none)"),
            ({}, b"{not json", 400, "not JSON"),
            ({}, b"\xff\xfe{}", 400, "not UTF-8"),
            ({}, b"[1, 2]", 400, "not a JSON object"),
            ({}, b'{"resourceSpans": {}}', 400, "resourceSpans is not an array"),
            ({"Content-Encoding": "gzip"}, b"not gzip at all", 400, "not valid gzip"),
            ({"Content-Encoding": "gzip"}, gzip.compress(self.body)[:-20], 400, "truncated"),
            ({"Content-Encoding": "deflate"}, self.body, 415, "deflate"),
        ]
        for kw, body, want, fragment in cases:
            ctype = kw.pop("ctype", "application/json")
            status, headers, answer = self.r.post(body, ctype, **kw)
            self.assertEqual(status, want, (kw, body[:20], answer))
            self.assertEqual(headers["Content-Type"], "application/json")
            self.assertIn(fragment, json.loads(answer)["message"])
        self.assertEqual(self.r.post(self.body, "application/json; charset=utf-8")[0], 200)
        self.assertEqual(len(self.stored()), 1)
        status, headers, _ = self.r.call("GET", "/v1/traces")
        self.assertEqual((status, headers.get("Allow")), (405, "POST"))
        self.assertEqual(self.r.call("POST", "/v1/metrics", b"{}")[0], 404)

    def test_body_limit(self):
        self.r.stop()
        self.r = Receiver(self.tmpdir.name, "--max-body", "4000")
        self.assertEqual(self.r.post(b" " * 5000 + b"{}")[0], 413)
        # within the limit on the wire, over it once unzipped
        bomb = gzip.compress(b"{" + b" " * 100000 + b"}")
        self.assertLess(len(bomb), 4000)
        self.assertEqual(self.r.post(bomb, **{"Content-Encoding": "gzip"})[0], 413)
        with open(os.path.join(HERE, "fixtures", "trace_minimal.json"), "rb") as f:
            small = f.read()
        self.assertLess(len(small), 4000)
        self.assertEqual(self.r.post(small)[0], 200)

    # ---- scripted misbehaviour

    def test_503_with_retry_after_then_success(self):
        self.assertEqual(self.r.script({"status": 503, "retry_after": 2, "count": 2})[0], 200)
        for _ in range(2):
            status, headers, body = self.r.post(self.body)
            self.assertEqual(status, 503)
            self.assertEqual(headers["Retry-After"], "2")
            self.assertEqual(json.loads(body)["code"], 14)
        self.assertEqual(self.r.post(self.body)[0], 200)
        log = self.r.get("/_requests")
        self.assertEqual([e["status"] for e in log], [503, 503, 200])
        self.assertTrue(log[0]["time_unix_nano"] <= log[1]["time_unix_nano"] <= log[2]["time_unix_nano"])
        self.assertEqual(log[2]["seq"], 1)
        self.assertEqual(len(self.stored()), 1)  # the refused ones are not stored
        self.assertEqual(self.r.get("/_health")["by_status"], {"503": 2, "200": 1})

    def test_429_400_and_a_date(self):
        self.r.script([{"status": 429, "retry_after": "Wed, 21 Oct 2015 07:28:00 GMT"},
                       {"status": 400, "message": "a bad span"}])
        status, headers, _ = self.r.post(self.body)
        self.assertEqual((status, headers["Retry-After"]), (429, "Wed, 21 Oct 2015 07:28:00 GMT"))
        status, headers, body = self.r.post(self.body)
        self.assertEqual((status, json.loads(body)["message"]), (400, "a bad span"))
        self.assertNotIn("Retry-After", headers)
        self.assertEqual(self.r.post(self.body)[0], 200)

    def test_a_rule_for_ever_and_clearing(self):
        self.r.script({"status": 502, "count": -1})
        for _ in range(3):
            self.assertEqual(self.r.post(self.body)[0], 502)
        self.assertEqual(len(self.r.get("/_script")), 1)
        self.assertEqual(self.r.call("DELETE", "/_script")[0], 200)
        self.assertEqual(self.r.post(self.body)[0], 200)

    def test_partial_success(self):
        self.r.script({"partial": {"rejectedSpans": 2, "errorMessage": "two spans too old"}})
        status, _, body = self.r.post(self.body)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body), {"partialSuccess": {"rejectedSpans": "2", "errorMessage": "two spans too old"}})
        self.assertEqual(len(self.stored()), 1)

    def test_bad_rules_are_refused(self):
        for rule, fragment in [({"status": 200}, "400..599"), ({"stauts": 503}, "unknown key"),
                               ({"status": 503, "hang": True}, "exactly one"), ({"status": 503, "count": 0}, "count"),
                               ({"hang": True, "then": "later"}, "then")]:
            status, _, body = self.r.script(rule)
            self.assertEqual(status, 400, rule)
            self.assertIn(fragment, json.loads(body)["message"])
        self.assertEqual(self.r.get("/_script"), [])

    def test_close_without_an_answer(self):
        self.r.script({"close": True})
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionResetError)):
            self.r.post(self.body)
        self.assertEqual(self.r.post(self.body)[0], 200)
        self.assertEqual([e["status"] for e in self.r.get("/_requests")], ["closed", 200])

    def post_in_thread(self):
        out = {}

        def run():
            try:
                out["status"] = self.r.post(self.body)[0]
            except (http.client.RemoteDisconnected, ConnectionResetError) as e:
                out["error"] = type(e).__name__
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, out

    def test_hang_until_released_then_close(self):
        self.r.script({"hang": True})
        t, out = self.post_in_thread()
        until(lambda: self.r.get("/_health")["held"] == 1, "the request to be held")
        self.assertTrue(t.is_alive())
        # another request is not held behind it
        self.assertEqual(self.r.post(self.body)[0], 200)
        self.assertEqual(json.loads(self.r.call("POST", "/_release")[2]), {"released": 1})
        t.join(30 * SCALE)
        self.assertEqual(out, {"error": "RemoteDisconnected"})
        self.assertEqual(self.r.get("/_health")["held"], 0)
        self.assertEqual([x["seq"] for x in self.stored()], [1])  # the held one was never stored

    def test_hang_then_answer(self):
        self.r.script({"hang": True, "then": "answer"})
        t, out = self.post_in_thread()
        until(lambda: self.r.get("/_health")["held"] == 1, "the request to be held")
        self.r.call("POST", "/_release")
        t.join(30 * SCALE)
        self.assertEqual(out, {"status": 200})
        self.assertEqual(len(self.stored()), 1)

    def test_release_can_override_then(self):
        self.r.script({"hang": True, "then": "close"})
        t, out = self.post_in_thread()
        until(lambda: self.r.get("/_health")["held"] == 1, "the request to be held")
        self.r.call("POST", "/_release?then=answer")
        t.join(30 * SCALE)
        self.assertEqual(out, {"status": 200})

    def test_reset_closes_held_and_forgets(self):
        self.r.post(self.body)
        self.r.script([{"hang": True}, {"status": 503, "count": 5}])
        t, out = self.post_in_thread()
        until(lambda: self.r.get("/_health")["held"] == 1, "the request to be held")
        self.assertEqual(json.loads(self.r.call("POST", "/_reset")[2]), {"reset": True, "closed_held": 1})
        t.join(30 * SCALE)
        self.assertEqual(out, {"error": "RemoteDisconnected"})
        h = self.r.get("/_health")
        self.assertEqual((h["requests"], h["spans"], h["rules"]), (0, 0, 0))
        self.assertEqual(self.r.post(self.body)[0], 200)
        self.assertEqual([x["seq"] for x in self.stored()], [1, 1])  # the file is append-only; seq restarts

    def test_stops_while_a_request_is_held(self):
        self.r.script({"hang": True})
        t, out = self.post_in_thread()
        until(lambda: self.r.get("/_health")["held"] == 1, "the request to be held")
        self.r.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.r.proc.wait(timeout=30 * SCALE), 0)
        t.join(30 * SCALE)
        self.assertIn("error", out)

    def test_script_at_start(self):
        self.r.stop()
        self.r = Receiver(self.tmpdir.name, "--script", '[{"status": 504}]')
        self.assertEqual(self.r.post(self.body)[0], 504)
        self.assertEqual(self.r.post(self.body)[0], 200)
        p = subprocess.run([sys.executable, os.path.join(HERE, "receiver.py"), "--script", '{"stauts": 1}'],
                           capture_output=True, text=True, timeout=60 * SCALE)
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown key", p.stderr)


if __name__ == "__main__":
    unittest.main()
