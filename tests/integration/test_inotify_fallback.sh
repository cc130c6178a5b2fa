#!/usr/bin/env bash
# Without inotify (every instance of the user taken, as on a machine whose
# other programs used them up), a worker still notices what it watches: it
# says so once and polls. A commit by another process (a signal) wakes the
# waiting workflow, and an edit of the policies directory is loaded. Before,
# the policy watch failed silently: edits were never loaded.
source "$(dirname "$0")/lib.sh"
if [ "$(id -u)" != 0 ]; then echo "skip: needs root (runs the engine as a user of its own)"; exit 0; fi
U=23457 # a user of its own: the inotify limit is per user
AS_U=(setpriv --reuid=$U --regid=$U --clear-groups) # exec'd: $! is the program itself
as_u() { "${AS_U[@]}" "$@"; }
chmod 755 "$T"
mkdir -p "$T/db" "$T/policies"
cp "$SRC"/policies/*.lua "$T/policies/"
chown -R $U:$U "$T/db" "$T/policies"
ln -s "$T/policies" "$T/policies-link" # reached through a symlink, as a deployment may do
export ENGINE_DB="$T/db/engine.db" ENGINE_POLICIES_DIR="$T/policies-link" ENGINE_NO_SWEEP=1
printf '%s\n' 'local wf = require "workflow"' \
  'return function() return { got = wf.wait_signal("go", { timeout = 120 }) } end' >"$T/wait.lua"

"${AS_U[@]}" /usr/bin/python3 "$SRC/tests/integration/hold_inotify.py" "$T/db/held" </dev/null >/dev/null 2>&1 &
PIDS+=("$!")
wait_true 30 '[ -s "$T/db/held" ]' || true
held="$(cat "$T/db/held" 2>/dev/null || echo 0)"
[ "$held" -gt 0 ] && pass "holding all $held inotify instances of uid $U" || fail "could not take inotify instances"

as_u "$ENGINE" start "$T/wait.lua" --id w1 --detach >/dev/null 2>&1 || true
"${AS_U[@]}" "$ENGINE" serve </dev/null >/dev/null 2>"$T/serve.log" &
S=$!; PIDS+=("$S")
wait_true 30 'grep -q "polling it every" "$T/serve.log"' || true
log="$(cat "$T/serve.log")"
assert_contains "the policy watch says it polls" "cannot watch $T/policies-link with inotify" "$log"
assert_contains "the commit watch says it polls" "cannot watch $T/db for commits" "$log"

wait_true 30 'engine history w1 | tail -1 | has_line SignalWaitStarted' 'engine history w1 | tail -3'
as_u "$ENGINE" signal w1 go '{"n":7}' >/dev/null
wait_status w1 completed 10 && pass "a signal from another process wakes the workflow" || fail "w1 did not complete"
assert_eq "with its payload" 7 "$(engine show w1 --json | jget result.got.n)"

printf '%s\n' '-- test: one more file' 'return function(req) end' >"$T/policies/90-extra.lua"
chown $U:$U "$T/policies/90-extra.lua"
wait_true 30 'grep -q "policies reloaded" "$T/serve.log"' || true
assert_contains "an edit of the policies is loaded by polling" "policies reloaded" "$(cat "$T/serve.log")"
kill "$S"; wait "$S" 2>/dev/null || true
finish
