#!/usr/bin/env bash
# Artifacts and redaction, with the real sandboxes (docker and bwrap), through
# the agent session and the offline replay model:
#   - output/ holding a 40-deep chain, paths of 4 KiB and of 250 KB, a symlink
#     (an escape sequence in its name), a FIFO, a socket, a 9 MiB file and
#     5,000 small files: each entry not saved is an artifact.skipped event with
#     its reason, no artifact is saved empty, the database grows by a bounded
#     amount, and no long path is quoted past a bounded prefix;
#   - credential-shaped strings in sandbox tool results (shell, read_file) are
#     not in the database (file, WAL, dump) and `engine events` shows
#     [redacted]; the artifact holding them stays byte-exact, outside the
#     database; a replay of the session agrees with its history.
# Prints a table: attempt | driver | result.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine answers on /var/run/docker.sock (scripts/start-dockerd starts one)"; finish
fi
cd "$SRC" # the recordings and the context file are named relative to the repository
WF="$SRC/workflows/agent_session.lua"
chmod 0711 "$T" # as root, the bwrap driver runs sandboxes as uid 10001, which must reach the workspace
export ENGINE_CONTEXT_ROOTS="$SRC:$T" ENGINE_ARTIFACTS="$T/artifacts" ENGINE_POLICIES_DIR="$T/policies"
mkdir -p "$T/policies"
printf '%s\n' '-- test: every call is allowed (this test is about what the tools return)' \
  'return function(req) return "allow", "test" end' >"$T/policies/00-allow.lua"

# the strings the sandbox prints (the recorded command builds them from pieces)
GH="ghp_A1b2C3d4A1b2C3d4A1b2C3d4A1b2C3d4E5f6"
SK="sk-Z9y8X7w6Z9y8X7w6Z9y8X7w6Z9y8X7w6Z9y8X7w6"
AK="AKIAQWERTY2345ZXCVBN"
L250="$(printf 'L%.0s' $(seq 250))" # one directory name of the long chains

session_input() { # RECORDING -> an AgentSessionInput file
  local f="$T/input-$(basename "$1" .jsonl).json"
  printf '%s\n' '{"objective": "Produce the output.",' \
    ' "context": {"files": ["tests/integration/wf/hostile_output.py"]},' \
    ' "permissions": {"tools": ["shell", "read_file", "list_files"]},' \
    ' "limits": {"timeoutSeconds": 900, "maxModelTurns": 5, "maxToolCalls": 5, "memoryMb": 512, "cpu": 1},' \
    ' "model": {"name": "replay:'"$1"'"}}' >"$f"
  echo "$f"
}
HOSTILE="$(session_input tests/fixtures/replay/hostile_output.jsonl)"
SECRETS="$(session_input tests/fixtures/replay/sandbox_secrets.jsonl)"

TABLE=()
attempt() { A_NAME="$1"; A_DRIVER="$2"; A_FAILS=$FAILS; }
done_attempt() { TABLE+=("$A_NAME|$A_DRIVER|$([ "$FAILS" -eq "$A_FAILS" ] && echo held || echo FAILED)"); }
db_bytes() { # the database's size with its WAL folded in (no engine runs meanwhile)
  sqlite3 "$ENGINE_DB" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
  du -b "$ENGINE_DB" | cut -f1
}
skipped() { grep '"type":"artifact.skipped"' "$T/$1.events" || true; } # ID -> its artifact.skipped lines
reason() { grep "\"reason\":\"$2\"" <<<"$(skipped "$1")" || true; }  # ID REASON -> those lines

check_driver() {
  local driver="$1" id="art-$1" sid="sec-$1"

  # ---------------------------------------------------------- artifacts ---
  local before after
  before="$(db_bytes)"
  ENGINE_SANDBOX_DRIVER="$driver" "$ENGINE" start "$WF" --id "$id" --quiet --input @"$HOSTILE" \
    >"$T/$id.out" 2>"$T/$id.err" || true
  after="$(db_bytes)"
  engine events "$id" --json >"$T/$id.events"
  assert_eq "$driver: the session with the hostile output completed" completed "$(status "$id")"
  assert_contains "$driver: the sandbox made it" "made the hostile output" "$(grep tool.result "$T/$id.events")"

  attempt "40-deep directory chain" "$driver"
  local deep; deep="$(reason "$id" too_deep)"
  assert_eq "$driver: one too_deep skip" 1 "$(grep -c . <<<"$deep")"
  assert_contains "$driver: at the depth limit" "\"path\":\"output/deep$(printf '/d%.0s' $(seq 31))\"" "$deep"
  done_attempt

  attempt "paths of 4 KiB and 250 KB" "$driver"
  local long; long="$(reason "$id" path_too_long)"
  assert_eq "$driver: both long paths are reported" 2 "$(grep -c . <<<"$long")"
  assert_contains "$driver: with their length" '"path_bytes":' "$long"
  assert_contains "$driver: shown as a bounded prefix" ' bytes)"' "$long"
  local widest; widest="$(lua5.4 -e 'local m = 0
    for l in io.lines() do if l ~= "" then m = math.max(m, #require"cjson".decode(l).payload.path) end end
    print(m)' <<<"$long" || echo 999999)"
  [ "$widest" -le 240 ] && pass "$driver: no skipped path shown past 200 bytes (+ its length): $widest" ||
    fail "$driver: a skipped path is shown with $widest bytes"
  done_attempt

  attempt "symlink (escape sequence in its name)" "$driver"
  local link; link="$(reason "$id" symlink)"
  assert_eq "$driver: one symlink skip" 1 "$(grep -c . <<<"$link")"
  assert_contains "$driver: its name rendered, not raw" 'output/link\\x1b[2J' "$link"
  done_attempt

  attempt "fifo and unix socket" "$driver"
  local special; special="$(reason "$id" special_file)"
  assert_contains "$driver: the fifo" '"path":"output/fifo"' "$special"
  assert_contains "$driver: is a fifo" '"type":"fifo"' "$(grep output/fifo <<<"$special")"
  assert_contains "$driver: the socket" '"type":"socket"' "$(grep output/sock <<<"$special")"
  done_attempt

  attempt "9 MiB file" "$driver"
  assert_contains "$driver: too_large, with its size" '"size":9437184' "$(reason "$id" too_large | grep big.bin)"
  [ -z "$(grep '"type":"artifact.saved"' "$T/$id.events" | grep big.bin)" ] && pass "$driver: not saved cut short" ||
    fail "$driver: big.bin was saved"
  done_attempt

  attempt "5,000 small files" "$driver"
  local saved; saved="$(grep -c '"type":"artifact.saved"' "$T/$id.events" || true)"
  assert_eq "$driver: 1,000 artifacts saved" 1000 "$saved"
  local many; many="$(reason "$id" too_many)"
  assert_eq "$driver: the rest in one summary" 1 "$(grep -c . <<<"$many")"
  assert_contains "$driver: with their count" '"count":4001' "$many"
  assert_contains "$driver: output/report.md is among the saved" '"path":"output/report.md"' \
    "$(grep '"type":"artifact.saved"' "$T/$id.events")"
  local stored; stored="$(grep '"type":"artifact.saved"' "$T/$id.events" | grep '"path":"output/report.md"' |
    jget payload.stored || true)"
  assert_eq "$driver: saved byte-exact" "the report" "$(cat "$stored" 2>/dev/null)"
  done_attempt

  attempt "cut paths, empty artifacts" "$driver"
  [ -z "$(grep '"type":"artifact.saved"' "$T/$id.events" | grep -e '"size":0' -e end.txt -e lost.txt)" ] &&
    pass "$driver: no empty artifact, nothing saved under a cut path" || fail "$driver: an empty or cut artifact was saved"
  assert_contains "$driver: the 10 MB name was refused by the kernel" "10 MB name refused" "$(grep tool.result "$T/$id.events")"
  done_attempt

  attempt "list_files tool on the hostile output" "$driver"
  local listing; listing="$(engine history "$id" --json | grep ActivityCompleted | grep '"tool_call_id":"a2"' || true)"
  assert_contains "$driver: list_files ran" '"ok":true' "$listing"
  assert_contains "$driver: it says where it stopped descending" "(contents not listed: too deep)" "$listing"
  assert_contains "$driver: a path too long is shown cut, with its length" "path too long to list: " "$listing"
  assert_contains "$driver: the fifo is a fifo" "/workspace/output/fifo  (fifo)" "$listing"
  done_attempt

  attempt "log growth and bounded quoting" "$driver"
  local grown=$((after - before))
  echo "# $driver: the database grew by $grown bytes for the hostile session"
  [ "$grown" -lt $((4 * 1024 * 1024)) ] && pass "$driver: database growth bounded ($grown bytes < 4 MiB)" ||
    fail "$driver: the database grew by $grown bytes"
  local widest_skip; widest_skip="$(skipped "$id" | awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }')"
  [ "$widest_skip" -lt 1024 ] && pass "$driver: every artifact.skipped event is under 1 KiB ($widest_skip)" ||
    fail "$driver: an artifact.skipped event has $widest_skip bytes"
  # (the list_files result shows the paths under 4 KiB in full, as it should)
  local quoted; quoted="$(sqlite3 "$ENGINE_DB" .dump | grep -v '"tool_call_id":"a2"' | grep -c "$L250" || true)"
  assert_eq "$driver: no 250-byte name of the long chains is quoted in any event, error or other row" 0 "$quoted"
  done_attempt

  # --------------------------------------------------------- redaction ---
  ENGINE_SANDBOX_DRIVER="$driver" "$ENGINE" start "$WF" --id "$sid" --quiet --input @"$SECRETS" \
    >"$T/$sid.out" 2>"$T/$sid.err" || true
  assert_eq "$driver: the session with credential-shaped output completed" completed "$(status "$sid")"
  engine events "$sid" --json >"$T/$sid.events"
  engine events "$sid" >"$T/$sid.human"
  sqlite3 "$ENGINE_DB" .dump >"$T/dump.sql"
  local where
  for what in shell read_file; do
    attempt "credentials in $what output" "$driver"
    assert_contains "$driver: $what's tool.result says [redacted]" "[redacted]" \
      "$(grep '"type":"tool.result"' "$T/$sid.events" | grep "\"tool\":\"$what\"")"
    done_attempt
  done
  attempt "credentials in the database and engine events" "$driver"
  for s in "$GH" "$SK" "$AK" "${GH#ghp_}" "${SK#sk-}"; do
    where=""
    for f in "$ENGINE_DB" "$ENGINE_DB-wal" "$T/dump.sql" "$T/$sid.human" "$T/$sid.events"; do
      [ -f "$f" ] && grep -aq -- "$s" "$f" && where="$where $(basename "$f")"
    done
    [ -z "$where" ] && pass "$driver: ${s:0:6}... is in no database file, dump or event output" ||
      fail "$driver: ${s:0:6}... found in:$where"
  done
  assert_contains "$driver: engine events shows [redacted]" "[redacted]" "$(grep '<- ' "$T/$sid.human")"
  done_attempt
  attempt "artifact holding credentials" "$driver"
  local cstored; cstored="$(grep '"type":"artifact.saved"' "$T/$sid.events" | grep creds.txt | jget payload.stored || true)"
  assert_eq "$driver: the artifact is byte-exact (outside the database)" "$(printf '%s\n' "$GH" "$SK" "$AK")" \
    "$(cat "$cstored" 2>/dev/null)"
  done_attempt
  attempt "replay of the redacted session" "$driver"
  assert_exit "$driver: engine replay agrees with the recorded (redacted) history" 0 engine replay "$sid"
  done_attempt
}

# redaction is a pure function: the same text gives the same result
attempt "redaction is deterministic" "-"
det="$(GH="$GH" SK="$SK" AK="$AK" lua5.4 -e 'local src = os.getenv("ENGINE_SRC")
  package.path = src .. "/lua/?.lua;" .. src .. "/lua/?/init.lua;" .. package.path
  local c = require "tools.common"
  local t = "key " .. os.getenv("GH") .. " and " .. os.getenv("SK") .. " and " .. os.getenv("AK") ..
    " risk-assessment-notes.md token = tokenize(s)"
  local a, b = c.redact(t), c.redact(t)
  io.write(a == b and "same " or "different ", a)')"
assert_contains "the same text is redacted the same way" "same key ghp_[redacted] and sk-[redacted] and AKIA[redacted]" "$det"
done_attempt
attempt "file names and code are not redacted" "-"
assert_contains "a file name is no key, code is no credential" "risk-assessment-notes.md token = tokenize(s)" "$det"
done_attempt

check_driver docker
if command -v bwrap >/dev/null && [ -d "${ENGINE_SANDBOX_ROOTFS:-/var/cache/engine/sandbox-rootfs}/usr" ]; then
  check_driver bwrap
else
  fail "bubblewrap or its rootfs is missing (scripts/build-sandbox-image keeps the rootfs)"
fi

echo
printf '%-48s | %-6s | %s\n' attempt driver result
for row in "${TABLE[@]}"; do IFS='|' read -r a d r <<<"$row"; printf '%-48s | %-6s | %s\n' "$a" "$d" "$r"; done
finish
