#!/usr/bin/env python3
"""Webhook deliveries a sender or an attacker would make, against
`engine serve --listen` with the triggers in tests/integration/hooks/triggers.

usage: hooks_suite.py BASE_URL   (secrets from TEST_GH_SECRET, TEST_STD_SECRET,
TEST_STRIPE_SECRET, TEST_BEARER_TOKEN). Prints "ok - ..." or "FAIL: ..." per
check and exits 1 when any failed."""
import base64
import hashlib
import hmac
import json
import os
import sys
import threading
import time
import urllib.request
import uuid

BASE = sys.argv[1]
GH = os.environ["TEST_GH_SECRET"].encode()
STD = os.environ["TEST_STD_SECRET"]
STRIPE = os.environ["TEST_STRIPE_SECRET"].encode()
BEARER = os.environ["TEST_BEARER_TOKEN"]
FAILS = 0


def check(name, cond, detail=""):
    global FAILS
    if cond:
        print("ok - " + name)
    else:
        FAILS += 1
        print("FAIL: %s %s" % (name, detail), file=sys.stderr)


def post(path, body, headers):
    req = urllib.request.Request(BASE + path, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null"), dict(r.headers)
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw), dict(e.headers)
        except ValueError:
            return e.code, {"raw": raw.decode("latin-1")}, dict(e.headers)


def gh_sig(body, secret=GH):
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def gh(body, delivery=None, event="push", sig=None, extra=None):
    h = {"Content-Type": "application/json", "X-GitHub-Event": event,
         "X-GitHub-Delivery": delivery or str(uuid.uuid4()), "X-Hub-Signature-256": sig or gh_sig(body)}
    h.update(extra or {})
    return post("/hooks/gh", body, h)


def std_headers(body, msg_id, ts=None, secrets=None):
    ts = str(int(time.time()) if ts is None else ts)
    sigs = []
    for s in secrets or [STD]:
        key = base64.b64decode(s[len("whsec_"):])
        mac = hmac.new(key, ("%s.%s." % (msg_id, ts)).encode() + body, hashlib.sha256).digest()
        sigs.append("v1," + base64.b64encode(mac).decode())
    return {"Content-Type": "application/json", "webhook-id": msg_id, "webhook-timestamp": ts,
            "webhook-signature": " ".join(sigs)}


def stripe_header(body, ts=None, secret=STRIPE):
    ts = str(int(time.time()) if ts is None else ts)
    return "t=%s,v1=%s" % (ts, hmac.new(secret, ts.encode() + b"." + body, hashlib.sha256).hexdigest())


def outcome(r):
    return (r[1] or {}).get("outcome")


# ---- GitHub: accepted once, durable, deduplicated
body = json.dumps({"key": "k1"}).encode()
r = gh(body, delivery="d-k1")
check("a signed delivery is accepted (202 started)", r[0] == 202 and outcome(r) == "started", r)
check("it names the workflow it started", r[1].get("workflow_id") == "gh:k1", r)
check("with its Location", r[2].get("Location") == "/v1/workflows/gh:k1", r[2])
r = gh(body, delivery="d-k1")
check("the same delivery again starts nothing (200 duplicate)", r[0] == 200 and outcome(r) == "duplicate", r)
check("and names the workflow it started before", r[1].get("workflow_id") == "gh:k1", r)
r = gh(body, delivery="d-k1-other")
check("another delivery of the same work starts nothing (200 existing)", r[0] == 200 and outcome(r) == "existing", r)
r = gh(body, delivery="d-k1-other")
check("and its redelivery is a duplicate", r[0] == 200 and outcome(r) == "duplicate", r)

# a redelivery storm: 50 at once of one new delivery -> one start
storm = json.dumps({"key": "storm"}).encode()
results = []
lock = threading.Lock()


def deliver_storm():
    res = gh(storm, delivery="d-storm")
    with lock:
        results.append(res)


threads = [threading.Thread(target=deliver_storm) for _ in range(50)]
for t in threads:
    t.start()
for t in threads:
    t.join()
started = [x for x in results if x[0] == 202]
dups = [x for x in results if x[0] == 200 and outcome(x) == "duplicate"]
check("50 parallel deliveries of one id: exactly one started", len(started) == 1, [x[0] for x in results])
check("the other 49 were told duplicate", len(dups) == 49, [outcome(x) for x in results])

r = gh(b"", event="ping", delivery="d-ping")
check("a ping is ignored (200), with the trigger's reason", r[0] == 200 and outcome(r) == "ignored" and r[1].get("message") == "ping", r)

# ---- bad deliveries: each refused with its status, nothing started
cases = [
    ("bad signature", lambda: gh(body, sig=gh_sig(body, b"wrong secret")), 401),
    ("signature of another body", lambda: gh(json.dumps({"key": "k2"}).encode(), sig=gh_sig(body)), 401),
    ("body changed by one byte", lambda: gh(body[:-1] + b" ", sig=gh_sig(body)), 401),
    ("trailing newline added", lambda: gh(body + b"\n", sig=gh_sig(body)), 401),
    ("no signature header", lambda: post("/hooks/gh", body, {"X-GitHub-Event": "push", "X-GitHub-Delivery": "x1"}), 401),
    ("empty signature", lambda: gh(body, sig="sha256="), 401),
    ("sha1 signature", lambda: gh(body, sig="sha1=" + hmac.new(GH, body, hashlib.sha1).hexdigest()), 401),
    ("truncated hex", lambda: gh(body, sig=gh_sig(body)[:-2]), 401),
    ("two signature headers, one valid",
     lambda: post("/hooks/gh", body, {"X-GitHub-Event": "push", "X-GitHub-Delivery": "x2",
                                      "X-Hub-Signature-256": gh_sig(body) + ", " + gh_sig(body, b"x")}), 401),
    ("malformed JSON, validly signed", lambda: gh(b"{not json", event="push"), 400),
    ("not UTF-8, validly signed", lambda: gh(b'{"key":"\xff"}', event="push"), 400),
    ("unknown trigger", lambda: post("/hooks/nosuch", body, {"X-Hub-Signature-256": gh_sig(body)}), 404),
    ("a route no trigger can have", lambda: post("/hooks/..%2Fetc", body, {}), 404),
    ("GET on a hook", lambda: (lambda req: urllib.request.urlopen(req))(urllib.request.Request(BASE + "/hooks/gh")) and None, None),
]
for name, fn, want in cases:
    if want is None:
        try:
            fn()
            check(name + " -> 405", False)
        except urllib.error.HTTPError as e:
            check(name + " -> 405", e.code == 405, e.code)
        continue
    r = fn()
    check("%s -> %d" % (name, want), r[0] == want, r)
    check("%s starts nothing" % name, (r[1] or {}).get("workflow_id") is None, r)

# the trigger's own failures: 500, nothing started, nothing leaked
for how, want, needle in [("error", 500, "boom"), ("loop", 500, "instruction budget"), ("io", 500, "io"),
                          ("os", 500, "os"), ("traversal", 500, "invalid script"), ("badid", 500, "invalid workflow id"), ("longid", 500, "id is too long"), ("utf8", 500, "é"),
                          ("list", 500, "list"), ("number", 500, "number"), ("rep", 500, "too large"),
                          ("nothing", 200, "nothing asked")]:
    b = json.dumps({"how": how}).encode()
    r = post("/hooks/hostile", b, {"X-Hub-Signature-256": gh_sig(b), "X-GitHub-Delivery": "h-" + how,
                                   "Content-Type": "application/json"})
    msg = json.dumps(r[1], ensure_ascii=False)
    check("hostile trigger (%s) -> %d" % (how, want), r[0] == want, r)
    check("hostile trigger (%s) says why" % how, needle in msg, msg[:300])
    check("hostile trigger (%s) leaks no secret" % how, os.environ["TEST_GH_SECRET"] not in msg)

# ---- Standard Webhooks
b = json.dumps({"type": "invoice.paid"}).encode()
r = post("/hooks/std", b, std_headers(b, "msg_1"))
check("standard webhooks: signed -> 202", r[0] == 202 and r[1].get("workflow_id") == "std:msg_1", r)
r = post("/hooks/std", b, std_headers(b, "msg_1"))
check("standard webhooks: same webhook-id -> duplicate", r[0] == 200 and outcome(r) == "duplicate", r)
other = "whsec_" + base64.b64encode(b"an old key that was rotated out").decode()
r = post("/hooks/std", b, std_headers(b, "msg_2", secrets=[other, STD]))
check("standard webhooks: several signatures, the second valid -> 202", r[0] == 202, r)
r = post("/hooks/std", b, std_headers(b, "msg_3", secrets=[other]))
check("standard webhooks: only a rotated-out key -> 401", r[0] == 401, r)
r = post("/hooks/std", b, std_headers(b, "msg_4", ts=int(time.time()) - 3600))
check("standard webhooks: an hour old -> 401", r[0] == 401, r)
r = post("/hooks/std", b, std_headers(b, "msg_5", ts=int(time.time()) + 3600))
check("standard webhooks: an hour ahead -> 401", r[0] == 401, r)
h = std_headers(b, "msg_6")
h["webhook-id"] = "msg_7"
r = post("/hooks/std", b, h)
check("standard webhooks: signature of another id -> 401", r[0] == 401, r)

# ---- Stripe-style
b = json.dumps({"id": "evt_1", "type": "charge.succeeded"}).encode()
r = post("/hooks/stripe", b, {"Stripe-Signature": stripe_header(b), "Content-Type": "application/json"})
check("stripe: signed -> 202", r[0] == 202 and r[1].get("workflow_id") == "stripe:evt_1", r)
r = post("/hooks/stripe", b, {"Stripe-Signature": stripe_header(b), "Content-Type": "application/json"})
check("stripe: the same event id -> duplicate", r[0] == 200 and outcome(r) == "duplicate", r)
r = post("/hooks/stripe", b, {"Stripe-Signature": stripe_header(b, ts=int(time.time()) - 1000)})
check("stripe: stale timestamp -> 401", r[0] == 401, r)

# ---- bearer
r = post("/hooks/ci", b"{}", {"Authorization": "Bearer " + BEARER, "X-Request-Id": "ci-1"})
check("bearer: the token -> 202", r[0] == 202, r)
r = post("/hooks/ci", b"{}", {"Authorization": "Bearer " + BEARER, "X-Request-Id": "ci-1"})
check("bearer: the same X-Request-Id -> duplicate", r[0] == 200 and outcome(r) == "duplicate", r)
r = post("/hooks/ci", b"{}", {"Authorization": "Bearer " + BEARER[:-1], "X-Request-Id": "ci-2"})
check("bearer: another token -> 401", r[0] == 401, r)
r = post("/hooks/ci", b"{}", {"X-Request-Id": "ci-3"})
check("bearer: no token -> 401", r[0] == 401, r)

# ---- the deliveries, over the API
with urllib.request.urlopen(BASE + "/v1/triggers/gh/deliveries?limit=500", timeout=30) as resp:
    listed = json.loads(resp.read())["deliveries"]
outcomes = [d["outcome"] for d in listed]
check("GET deliveries lists gh's outcomes", {"started", "duplicate", "existing", "ignored", "rejected"} <= set(outcomes),
      sorted(set(outcomes)))
check("newest first", listed[0]["received_at"] >= listed[-1]["received_at"], (listed[0], listed[-1]))
check("with each refusal's reason", any(d["status"] == 401 and d["detail"] for d in listed))
with urllib.request.urlopen(BASE + "/v1/triggers/nosuch/deliveries", timeout=30) as resp:
    check("a trigger with none: an empty list", json.loads(resp.read()) == {"deliveries": []})

sys.exit(1 if FAILS else 0)
