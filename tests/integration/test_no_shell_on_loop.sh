#!/usr/bin/env bash
# Activities run as coroutines on the engine's one loop thread, so a program
# started with io.popen or os.execute (realpath, sha256sum, mkdir -p, ls,
# find, id -u) stalls every session until it exits. Here the engine's PATH
# starts with shims of those programs (and of sh and bash) that write their
# name to a log and sleep 3 s before running the real one; a whole agent
# session (context and memory files, a skill, a policy set, a sandbox, a
# published review, artifacts), `engine policy check` and `engine gc` must
# leave the log empty. Programs the engine runs on the loop (proc.run) are
# not affected: they get a PATH of their own.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
WF="$SRC/workflows/agent_session.lua"
chmod 0711 "$T" # as root, the bwrap driver runs sandboxes as uid 10001, which must reach the workspace

# --- the shims: only the engine runs with them first on its PATH
SHIMS="$T/shims" LOG="$T/shelled-out.log"
mkdir -p "$SHIMS"
: >"$LOG"
SLEEP="$(command -v sleep)"
for prog in realpath sha256sum mkdir ls find id sh bash; do
  real="$(command -v "$prog")" || { fail "no $prog on this machine"; continue; }
  printf '#!/bin/sh\necho %s "$*" >>%s\n%s 3\nexec %s "$@"\n' "$prog" "$LOG" "$SLEEP" "$real" >"$SHIMS/$prog"
  chmod 0755 "$SHIMS/$prog"
done
shimmed() { PATH="$SHIMS:$PATH" "$@"; }
# the shims are found and log (else an empty log would prove nothing)
shimmed sh -c 'realpath / >/dev/null'
assert_eq "a shim logs what runs it" "sh -c realpath / >/dev/null|realpath /" "$(paste -sd '|' "$LOG")"
: >"$LOG"

# --- what the session reads and writes
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_POLICIES_DIR="$T/policies"
export ENGINE_REVIEWS_DIR="$T/out/reviews" ENGINE_ARTIFACTS="$T/out/artifacts" # made by the engine (mkdir -p)
mkdir -p "$T/policies" "$T/ctx"
printf '%s\n' 'return { name = "all", decide = function() return "allow", "test" end }' >"$T/policies/00-all.lua"
echo "def add(a, b): return a - b" >"$T/ctx/calc.py"
printf '# Memory\n- prefers small patches\n' >"$T/ctx/simple.md"
printf '%s\n' '{"steps": [' \
  '{"reply": {"tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "ls /workspace/skills/code-review /workspace/input && printf \"# Review\\nadd subtracts\\n\" >/workspace/output/review.md"}}]}},' \
  '{"reply": {"tool_calls": [{"id": "c2", "name": "publish_review", "arguments": {"summary": "add subtracts", "findings": [{"title": "add returns a - b", "severity": "major"}], "verdict": "request_changes"}}]}}],' \
  '"default": {"reply": {"text": "{\"summary\": \"add subtracts\", \"verdict\": \"request_changes\"}"}}}' >"$T/scenario.json"
start_model_server "$T/scenario.json"
printf '{"objective": "review calc.py", "context": {"files": ["%s"]}, "memoryFile": "%s", "skills": ["code-review"],
  "permissions": {"tools": ["shell", "publish_review"]}, "limits": {"maxModelTurns": 5, "memoryMb": 512},
  "model": {"name": "m", "provider": "openai", "baseUrl": "%s/v1"}}' "$T/ctx/calc.py" "$T/ctx/simple.md" "$MURL" \
  >"$T/input.json"

# session DRIVER: one session through the shimmed engine, then what it left
session() {
  local driver="$1" id="nb-$1" started elapsed
  scenario "$(cat "$T/scenario.json")" # from its first step again
  : >"$LOG"
  started="$(date +%s)"
  ENGINE_SANDBOX_DRIVER="$driver" shimmed "$ENGINE" start "$WF" --input @"$T/input.json" --id "$id" --quiet \
    >"$T/$id.out" 2>"$T/$id.err" || true
  elapsed=$(($(date +%s) - started))
  assert_eq "$driver: the session completed" completed "$(status "$id")"
  assert_eq "$driver: nothing was run through a shell or PATH (log: $(paste -sd '|' "$LOG"))" 0 "$(grep -c . "$LOG" || true)"
  local ev; ev="$(engine events "$id" --json)"
  assert_contains "$driver: the skill was mounted" "SKILL.md" "$(grep '"type":"tool.result"' <<<"$ev" | sed -n 1p)"
  assert_contains "$driver: the context file was copied in" "calc.py" "$(grep '"type":"tool.result"' <<<"$ev" | sed -n 1p)"
  assert_contains "$driver: the review was published (its directory made)" "add returns a - b" \
    "$(cat "$ENGINE_REVIEWS_DIR/$id.md" 2>/dev/null)"
  local saved; saved="$(grep '"type":"artifact.saved"' <<<"$ev" | grep '"path":"output/review.md"' || true)"
  local hash; hash="$(printf '# Review\nadd subtracts\n' | sha256sum | cut -d' ' -f1)"
  assert_contains "$driver: review.md saved as an artifact, by its SHA-256" "\"sha256\":\"$hash\"" "$saved"
  assert_eq "$driver: stored byte-exact under that name" "$hash" \
    "$(sha256sum "$ENGINE_ARTIFACTS/$hash" 2>/dev/null | cut -d' ' -f1)"
  echo "   ($driver session: ${elapsed}s)"
}

session docker
if command -v bwrap >/dev/null && [ -d "${ENGINE_SANDBOX_ROOTFS:-/var/cache/engine/sandbox-rootfs}/usr" ]; then
  session bwrap
else
  echo "   (no bubblewrap rootfs: the bwrap driver is not run)"
fi

# --- the maintenance commands run the same activities standalone
: >"$LOG"
assert_exit "engine policy check" 0 shimmed "$ENGINE" policy check "$T/policies"
assert_exit "engine gc" 0 shimmed "$ENGINE" gc
assert_eq "neither ran a program through a shell (log: $(paste -sd '|' "$LOG"))" 0 "$(grep -c . "$LOG" || true)"
finish
