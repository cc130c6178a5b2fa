#!/usr/bin/env bash
# API starts that arrive together (on PostgreSQL each start's insert goes out
# with the batch and is answered at its commit; on SQLite they run one after
# another), either store:
# - 48 clients start one id at once, half with one input and half with
#   another: exactly one 201, every other start with the 201's input 200,
#   every one with the other input 409; one workflow, one WorkflowStarted,
#   and the 201's page is that workflow's;
# - 32 clients start 240 ids while the server is killed with -9 and started
#   again: every start acknowledged (201 or 200) exists and ends, each id
#   once, with the input it was started with, its hash chain whole.
# Waits on the engine's state, never on time.
source "$(dirname "$0")/lib.sh"
export ENGINE_NO_SWEEP=1 ENGINE_NO_POLICY_WATCH=1
WF="$SRC/tests/integration/wf"
serve_api --workflows "$WF"

# the clients: POST /v1/workflows from threads, one line per answer
# ("STATUS ID V", or "lost ID V" when the connection went); "same" sends N
# starts of one id at once (a barrier), input v = i % 2; "many" sends ids
# b-0..b-(N-1) over the threads, each id's input {"v": its number}, and
# kills the server (-9) when a third of them are answered
cat >"$T/client.py" <<'EOF'
import http.client, json, os, signal, sys, threading
url, mode, n, threads, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
kill = int(sys.argv[6]) if len(sys.argv) > 6 else 0  # "many": kill -9 this pid at a third of the answers
host, port = url.split("//", 1)[1].rsplit(":", 1)
lines, lock = [], threading.Lock()
barrier = threading.Barrier(threads)
def post(c, wid, v):
    body = json.dumps({"script": "tiny.lua", "id": wid, "input": {"v": v}})
    c.request("POST", "/v1/workflows", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()
def run(k):
    c = http.client.HTTPConnection(host, int(port), timeout=120)
    if mode == "same":
        barrier.wait()
        try:
            st, body = post(c, "same-1", k % 2)
            if st == 201:
                open(out + ".page", "wb").write(body)
        except Exception:
            st = "lost"
        with lock: lines.append("%s same-1 %d" % (st, k % 2))
        return
    for i in range(k, n, threads):
        try:
            st, _ = post(c, "b-%d" % i, i)
        except Exception:
            st = "lost"
            c = http.client.HTTPConnection(host, int(port), timeout=120)
        with lock:
            lines.append("%s b-%d %d" % (st, i, i))
            if kill and len(lines) == n // 3:
                os.kill(kill, signal.SIGKILL)
ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
for t in ts: t.start()
for t in ts: t.join()
open(out, "w").write("\n".join(lines) + "\n")
EOF

# --- one id, 48 starts at once
python3 "$T/client.py" "$URL" same 48 48 "$T/same"
assert_eq "48 answers" 48 "$(wc -l <"$T/same")"
assert_eq "exactly one 201" 1 "$(grep -c '^201 ' "$T/same")"
won="$(awk '$1 == 201 { print $3 }' "$T/same")"
assert_eq "every start with the 201's input: 200" 23 "$(awk -v w="$won" '$1 == 200 && $3 == w' "$T/same" | wc -l)"
assert_eq "every start with the other input: 409" 24 "$(awk -v w="$won" '$1 == 409 && $3 != w' "$T/same" | wc -l)"
assert_eq "one workflow" 1 "$(sql "SELECT count(*) FROM workflows WHERE id='same-1'")"
assert_eq "one WorkflowStarted" 1 "$(sql "SELECT count(*) FROM history WHERE wf_id='same-1' AND type='WorkflowStarted'")"
page() { lua5.4 -e 'local j = require"cjson".decode(io.read("a")); print(j.id, math.tointeger(j.input.v), j.status, math.tointeger(j.history_events), math.tointeger(j.tasks))' <"$T/same.page" | tr '\t' ' '; }
assert_contains "the 201's page is that workflow's" "same-1 $won " "$(page)"
# on PostgreSQL the page is what the start wrote (its row, first event and task), committed before it runs
if on_postgres; then assert_eq "the 201's page: as the start wrote it" "same-1 $won running 1 1" "$(page)"; fi
wait_status same-1 completed
assert_eq "it ran with the 201's input" "$won" "$(engine show same-1 --json | lua5.4 -e 'print(math.tointeger(require"cjson".decode(io.read("a")).result.echo.v))')"

# --- 240 ids from 32 clients, the server killed with -9 while they run
N=240
python3 "$T/client.py" "$URL" many "$N" 32 "$T/many" "$S" || fail "the clients failed"
wait "$S" 2>/dev/null || true
acked="$(awk '$1 == 201 || $1 == 200 { print $2 }' "$T/many" | sort -u)"
n_acked="$(printf '%s\n' "$acked" | grep -c . || true)"
[ "$n_acked" -gt 0 ] && [ "$n_acked" -lt "$N" ] && pass "killed with -9 after $n_acked of $N starts acknowledged" ||
  fail "the kill did not fall among the starts ($n_acked of $N acknowledged)"
serve_api --workflows "$WF"
exist="$(sql "SELECT id FROM workflows WHERE id LIKE 'b-%'" | sort -u)"
missing="$(comm -23 <(printf '%s\n' "$acked") <(printf '%s\n' "$exist") | sed -n 1,5p)"
assert_eq "every acknowledged start exists" "" "$missing"
assert_eq "each id once" "$(sql "SELECT count(DISTINCT id) FROM workflows WHERE id LIKE 'b-%'")" \
  "$(sql "SELECT count(*) FROM workflows WHERE id LIKE 'b-%'")"
assert_eq "one WorkflowStarted each" "$(sql "SELECT count(*) FROM workflows WHERE id LIKE 'b-%'")" \
  "$(sql "SELECT count(*) FROM history WHERE wf_id LIKE 'b-%' AND type='WorkflowStarted'")"
ended() { sql "SELECT count(*) FROM workflows WHERE id LIKE 'b-%' AND status='completed'"; }
wait_true 120 '[ "$(ended)" -ge "$(sql "SELECT count(*) FROM workflows WHERE id LIKE '"'"'b-%'"'"'")" ]' \
  'sql "SELECT status, count(*) FROM workflows GROUP BY 1"' || true
assert_eq "every one ended" "$(sql "SELECT count(*) FROM workflows WHERE id LIKE 'b-%'")" "$(ended)"
if on_postgres; then v="result::json->'echo'->>'v'"; else v="json_extract(result, '\$.echo.v')"; fi
assert_eq "each with its own input" 0 "$(sql "SELECT count(*) FROM workflows WHERE id LIKE 'b-%' AND 'b-' || ($v) <> id")"
# their hash chains, begun by the starts' inserts (on PostgreSQL the head is written by the insert itself)
some="$(printf '%s\n' "$acked" | sed -n 1,20p | tr '\n' ' ')"
assert_exit "engine verify: the started workflows' chains" 0 engine verify same-1 $some
assert_contains "every one ok" "0 BAD" "$OUT"
kill "$S"; wait "$S" 2>/dev/null || true
finish
