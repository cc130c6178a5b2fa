#!/usr/bin/env bash
# Text from a sandbox or a model never reaches the operator's terminal raw:
# every human output of the CLI shows control characters, C1 controls, bidi
# overrides and invalid UTF-8 as visible escapes (\x1b, \u009b, \u202e, \xff),
# and every --json output is strict JSON (valid UTF-8, controls escaped,
# invalid bytes as U+FFFD). What the engine records is UTF-8 already (an
# invalid part is U+FFFD in the log, as PostgreSQL's text needs): the \xff
# escapes show what was never recorded so (an old database's ids). The hostile text comes from an activity
# (tests/integration/wf/hostile_text*.lua): in event payloads, an event type, a
# signal name, the result and an error; and from an old database whose ids
# predate the id rules. Prints a table: attempt | output | result.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/hostile_text.lua"
ACTS="$SRC/tests/integration/wf/hostile_text_acts.lua"

# What one output looks like: for each attempt (a piece of hostile text), its
# raw bytes must be absent and, where the output shows that text, its visible
# form present. Kinds: text (a string rendered for people), jsontext (JSON
# text rendered for people: controls already \u-escaped by the encoder), json
# (machine output: strict JSON). Spec: "attempt:kind,..."; "pieces" = all
# twelve bracketed pieces; "-attempt" leaves one out again. Prints "attempt | output | result" rows and, last,
# "FAILS n".
CHECK="$(cat <<'PY'
import json, re, sys
label, path, spec = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(path, "rb").read()
pieces = ["title", "clear", "red", "c1", "c1raw", "bidi", "invalid", "truncated", "del", "cr", "newline", "nul"]
raw = {"title": b"[title:\x1b]0;pwned\x07]", "clear": b"[clear:\x1b[2J]", "red": b"[red:\x1b[31m]",
       "c1": b"[c1:\xc2\x9b]", "c1raw": b"[c1raw:\x9b]", "bidi": b"[bidi:\xe2\x80\xae]",
       "invalid": b"[invalid:\xff\xfe]", "truncated": b"[truncated:\xe2\x80]", "nul": b"[nul:\x00]",
       "del": b"[del:\x7f]", "cr": b"[cr:\r]", "newline": b"[newline:\n]",
       "name": b"\xe2\x80\xaename", "long": b"LLLL\x1b[2J"}
B = "\\"
def forms(kind):
    x = "x" if kind == "text" else "u00"
    f = {"title": "[title:%s1b]0;pwned%s07]" % (B + x, B + x), "clear": "[clear:%s1b[2J]" % (B + x),
         "red": "[red:%s1b[31m]" % (B + x), "c1": "[c1:\\u009b]", "c1raw": "[c1raw:\\x9b]", "bidi": "[bidi:\\u202e]",
         "invalid": "[invalid:\\xff\\xfe]", "truncated": "[truncated:\\xe2\\x80]", "nul": "[nul:%s00]" % (B + x),
         "del": "[del:\\x7f]", "cr": "[cr:\\r]", "newline": "[newline:\\n]",
         "name": "evil%s1b]0;pwned%s07%s1b[2J\\u202ename\\xff" % (B + x, B + x, B + x)}
    if kind == "json":
        f.update({"c1raw": "[c1raw:\\ufffd]", "invalid": "[invalid:\\ufffd\\ufffd]",
                  "truncated": "[truncated:\\ufffd]", "del": "[del:\\u007f]",
                  "name": "evil\\u001b]0;pwned\\u0007\\u001b[2J\\u202ename\\ufffd"})
    # what the engine records is UTF-8: an invalid part is U+FFFD in the log
    # (so in every output); the escapes above are how text that was never
    # recorded (an old database's ids) is shown
    alt = {"c1raw": "[c1raw:\ufffd]", "invalid": "[invalid:\ufffd\ufffd]", "truncated": "[truncated:\ufffd]",
           "name": f["name"][:f["name"].rindex("name") + 4] + "\ufffd"}
    return {k: (v, alt[k]) if k in alt else (v,) for k, v in f.items()}
want = {}
for item in filter(None, spec.split(",")):
    if item.startswith("-"):
        want.pop(item[1:], None)
        continue
    a, k = item.split(":")
    for n in (pieces if a == "pieces" else [a]):
        want[n] = k
fails = 0
def row(attempt, result, bad):
    global fails
    fails += bad
    print("%-22s | %-30s | %s" % (attempt, label, result))
for a in pieces + ["name", "long"]:
    if raw[a] in data:
        row(a, "RAW", 1)
    elif a in want:
        vs = [v.encode() for v in forms(want[a])[a]]
        seen = any(v in data for v in vs)
        row(a, "escaped" if seen else "MISSING " + " or ".join(v.decode() for v in vs), not seen)
    else:
        row(a, "not shown", 0)
# whatever else is in the output: no control byte but newline, no C1, valid UTF-8, no bidi control
bad = [m.group() for m in re.finditer(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]", data)]
try:
    text = data.decode("utf-8")
    bad += re.findall("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]", text)
except UnicodeDecodeError as e:
    bad.append("invalid UTF-8 at byte %d" % e.start)
    text = None
row("any control/invalid", "clean" if not bad else "RAW %r" % bad[:3], bool(bad))
if "json" in spec.split(":")[-1] and any(k == "json" for k in want.values()):
    ok = text is not None
    try:
        for line in (text or "").split("\n"):
            if line.strip(): json.loads(line)
    except ValueError as e:
        ok = False
    row("strict JSON parse", "valid" if ok else "INVALID", not ok)
print("FAILS %d" % fails)
PY
)"
echo "attempt                | output                         | result"
check() { # LABEL FILE SPEC
  local out; out="$(python3 -c "$CHECK" "$1" "$2" "$3")"
  printf '%s\n' "$out" | grep -v '^FAILS'
  local n; n="$(printf '%s\n' "$out" | sed -n 's/^FAILS //p')"
  [ "$n" == 0 ] || fail "$1: $n attempt(s) reached the output raw or not shown"
}

# --- a session that completes, one that fails, one that waits on a signal
engine start "$WF" --id hostile-ok >"$T/start-ok.out" 2>"$T/start-ok.err" || fail "hostile-ok: start exited $?"
check "start stderr (events)" "$T/start-ok.err" "pieces:text,name:text"
check "start stdout (result)" "$T/start-ok.out" "pieces:json"
set +e
engine start "$WF" --id hostile-fail --input '{"fail":true}' >/dev/null 2>"$T/start-fail.err"
rc=$?
set -e
assert_eq "the failing session exits 1" 1 "$rc"
grep -a 'hostile-fail failed' "$T/start-fail.err" >"$T/start-fail.line" || fail "start names the failure"
# (an activity's error message ends at its first NUL: the engine keeps errors as C strings)
check "start stderr (failure)" "$T/start-fail.line" "pieces:jsontext,-nul"

"$ENGINE" start "$WF" --id hostile-wait --input '{"wait":true}' >/dev/null 2>"$T/start-wait.err" &
W=$!; PIDS+=("$W")
wait_status hostile-wait waiting:signal 60 || fail "hostile-wait never waited"
engine show hostile-wait >"$T/show-wait.out"
check "show (waits on)" "$T/show-wait.out" "name:text"
engine cancel hostile-wait 2>/dev/null
wait "$W" 2>/dev/null || true
check "start stderr (waiting)" "$T/start-wait.err" "name:text"

# --- the log holds UTF-8 only: every text column of what the sessions recorded
assert_eq "no invalid UTF-8 in the log" "clean" "$(python3 - "$ENGINE_DB" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.text_factory = bytes
bad = []
for table, cols in (("history", "wf_id, type, name, payload"), ("domain_events", "session_id, type, payload"),
                    ("workflows", "id, status, input, result, error"), ("signals", "wf_id, name, payload")):
    for row in db.execute("SELECT %s FROM %s" % (cols, table)):
        for v in row:
            try:
                if isinstance(v, bytes): v.decode("utf-8")
            except UnicodeDecodeError:
                bad.append("%s: %r" % (table, v[:40]))
print("clean" if not bad else "; ".join(bad[:3]))
PY
)"

# --- the reading commands
engine events hostile-ok >"$T/events.out"
check "events" "$T/events.out" "pieces:text,name:text"
longest="$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$T/events.out")"
[ "$longest" -lt 2048 ] && r="max $longest bytes per line" || r="LINE OF $longest BYTES"
printf '%-22s | %-30s | %s\n' "long line" "events" "$r"
[ "$longest" -lt 2048 ] || fail "events prints a line of $longest bytes"
engine events hostile-ok --json >"$T/events.json"
check "events --json" "$T/events.json" "pieces:json,name:json"
engine show hostile-ok >"$T/show.out"
check "show" "$T/show.out" "pieces:jsontext,name:jsontext"
engine show hostile-ok --json >"$T/show.json"
check "show --json" "$T/show.json" "pieces:json"
engine show hostile-fail >"$T/show-fail.out"
check "show (error)" "$T/show-fail.out" "pieces:jsontext,-nul"
engine show hostile-fail --json >"$T/show-fail.json"
check "show --json (error)" "$T/show-fail.json" "pieces:json,-nul"
engine history hostile-ok >"$T/history.out"
check "history" "$T/history.out" "title:jsontext,name:text"
engine history hostile-ok --json >"$T/history.json"
check "history --json" "$T/history.json" "pieces:json,name:json"

# --- an old database: ids (and a script name) from before the id rules
# text(FIELD [hex]): a field of the activity's texts, as bytes or as hex
text() { WFDIR="$SRC/tests/integration/wf" FIELD="$1" HEX="${2:-}" lua5.4 -e '
  package.path = os.getenv("WFDIR") .. "/?.lua;" .. package.path
  local s = require("hostile_text_acts").texts()[os.getenv("FIELD")]
  if os.getenv("HEX") ~= "" then s = s:gsub(".", function(c) return string.format("%02x", c:byte()) end) end
  io.write(s)'; }
NAME="$(text name)"
for pair in "name:legacy-name" "all:legacy-all"; do
  col="${pair%%:*}"
  # rows as an older engine left them (before the hash chains: no link, the chains starting after them)
  sqlite3 "$ENGINE_DB" "
    INSERT INTO workflows(id, run, status, script_name, script_dir, code_hash, input, result, error, cancel, created_at,
      updated_at, parent, parent_close) SELECT CAST(X'$(text "$col" hex)' AS TEXT), run, status, script_name,
      script_dir, code_hash, input, result, error, cancel, created_at, updated_at, parent, parent_close
      FROM workflows WHERE id = 'hostile-ok';
    INSERT INTO history(wf_id, run, seq, type, ref, name, hash, payload, time) SELECT CAST(X'$(text "$col" hex)' AS TEXT),
      run, seq, type, ref, name, hash, payload, time FROM history WHERE wf_id = 'hostile-ok';
    INSERT INTO domain_events(session_id, seq, type, time, payload) SELECT CAST(X'$(text "$col" hex)' AS TEXT), seq,
      type, time, payload FROM domain_events WHERE session_id = 'hostile-ok';
    UPDATE workflows SET hist_from_run = run,
      hist_from_seq = (SELECT coalesce(max(seq), 0) + 1 FROM history h WHERE h.wf_id = workflows.id),
      dom_from = (SELECT coalesce(max(seq), 0) + 1 FROM domain_events d WHERE d.session_id = workflows.id)
      WHERE id = CAST(X'$(text "$col" hex)' AS TEXT);"
done
cp "$WF" "$T/$NAME.lua"; cp "$ACTS" "$T/"
engine start "$T/$NAME.lua" --quiet >/dev/null 2>"$T/start-genid.err" || fail "a script with a hostile name: start exited $?"
engine list >"$T/list.out"
# (the id stored with a NUL reads back cut there, as every C string does)
check "list" "$T/list.out" "pieces:text,-nul,name:text"
engine list --json >"$T/list.json"
check "list --json" "$T/list.json" "pieces:json,-nul,name:json"
genid="$(python3 -c 'import json,sys
for l in sys.stdin.buffer.read().decode("utf-8").split("\n"):
    if l and json.loads(l)["script"].endswith(".lua") and "evil" in json.loads(l)["script"]: print(json.loads(l)["id"])' <"$T/list.json")"
[[ "$genid" =~ ^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$ && "$genid" != *..* ]] && r="escaped" || r="BAD ID"
printf '%-22s | %-30s | %s (%s)\n' "script name" "generated id" "$r" "$genid"
[ "$r" == escaped ] || fail "the id generated from a hostile script name breaks the id rules: $genid"
assert_exit "an old id (control characters) can still be shown" 0 engine show "$NAME"
printf '%s\n' "$OUT" >"$T/show-legacy.out"
check "show OLD-ID" "$T/show-legacy.out" "name:text,pieces:jsontext"
assert_exit "its events can still be read" 0 engine events "$NAME"
printf '%s\n' "$ERR" >"$T/err-legacy.out"
check "events OLD-ID (stderr)" "$T/err-legacy.out" ""
finish
