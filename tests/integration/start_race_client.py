# The clients of test_pg_start_race.sh: THREADS threads work through one
# queue of operations on ids r-0..r-(N-1), each id's operations next to each
# other (so several threads race on one id): three starts with input variant
# "a", two with variant "b", a signal "go", and on every tenth id a cancel.
# Each operation goes to one of the APIs (in turn) and is sent again to the
# next when the connection fails (a worker killed) or the answer is a 503,
# until it has a final answer. Prints one line per operation:
# "<op> <id> <variant or -> <final status> <run> <created_at> <tries>".
# Progress (operations done) goes to the file PROGRESS.
import http.client, json, random, sys, threading, queue

apis, n, threads, progress = sys.argv[1].split(","), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
random.seed(7)
ops = queue.Queue()
for i in range(n):
    mine = [("start", "a")] * 3 + [("start", "b")] * 2 + [("signal", "-")] + ([("cancel", "-")] if i % 10 == 0 else [])
    random.shuffle(mine)
    for op, v in mine:
        ops.put((op, "r-%d" % i, v))
out, lock, done = [], threading.Lock(), [0]


def request(k, method, path, body):
    host, port = apis[k % len(apis)].rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        c.request(method, path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def one(op, wid, v, k):
    tries = 0
    while True:
        tries += 1
        try:
            if op == "start":
                st, body = request(k + tries, "POST", "/v1/workflows",
                                   {"script": "start_race.lua", "id": wid, "input": {"n": int(wid[2:]), "variant": v}})
            elif op == "signal":
                st, body = request(k + tries, "POST", "/v1/workflows/%s/signals/go" % wid, {"k": wid})
            else:
                st, body = request(k + tries, "POST", "/v1/workflows/%s/cancel" % wid, {})
        except OSError:
            continue  # the worker died mid-request: the next one
        # not there yet (its start is later in the queue), or a batch lost: again
        if st == 503 or (op != "start" and st == 404):
            continue
        run = created = "-"
        if op == "start" and st in (200, 201):
            j = json.loads(body)
            run, created = j.get("run", "-"), j.get("created_at", "-")
        return "%s %s %s %d %s %s %d" % (op, wid, v, st, run, created, tries)


def worker(k):
    while True:
        try:
            op, wid, v = ops.get_nowait()
        except queue.Empty:
            return
        line = one(op, wid, v, k)
        with lock:
            out.append(line)
            done[0] += 1
            if done[0] % 20 == 0:
                with open(progress, "w") as f:
                    f.write("%d\n" % done[0])


ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
with open(progress, "w") as f:
    f.write("%d\n" % done[0])
print("\n".join(out))
