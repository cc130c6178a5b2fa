#!/usr/bin/env bash
# A sub-session's read-only view of its parent's workspace
# (delegation.workspace "parent"; workflows/agent_session.lua, lua/sandbox.lua):
# against the local model server, a parent writes files into its working/,
# then delegates. The sub-session, in a sandbox of its own, reads the
# parent's bytes at /workspace/parent (cat in the sandbox, read_file,
# list_files; read_file follows no symlink there); its writes there fail: a shell command a person approved (the
# mount is read-only whatever the policies say) and the write_file tool (the
# trusted side refuses parent/). The parent's working/ is the same tree after
# (hash of names, types, modes and contents). A session started by a person
# whose input names that parent (subSession.parent) fails before anything is
# provisioned: the parent must be the one the engine recorded (wf.child).
# Docker, then bubblewrap when its rootfs is there.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
WF="$SRC/workflows/agent_session.lua"
chmod 0711 "$T" # as root, the bwrap driver's sandboxes run as unprivileged host uids below it
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_ARTIFACTS="$T/artifacts"

printf '{"steps":[]}' >"$T/scenario.json"
start_model_server "$T/scenario.json"

# The parent's three turns are the scenario's steps: it writes notes.txt
# (write_file) and sub/deep.txt (shell); its second turn (held at gate
# before-$1) delegates; its third (held at after-$1) answers. The child's two
# turns are routes: its first by its objective, its second by a tool call id
# only its own requests carry (listed first: that request holds both).
PARENT_BYTES='parent bytes: caf\u00e9 \u00a7 7f3a'
scenario_for() { # TAG
  cat >"$T/scenario.json" <<EOF
{"steps": [
  {"reply": {"tool_calls": [
     {"id": "w1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "$PARENT_BYTES\n"}},
     {"id": "w2", "name": "shell", "arguments": {"command": "mkdir -p sub && printf 'deep\\\\n' > sub/deep.txt"}}]}},
  {"hold": "before-$1", "reply": {"tool_calls": [
     {"id": "d1", "name": "delegate", "arguments": {"objective": "Check the notes of the delegating session",
      "tools": ["shell", "read_file", "write_file", "list_files"]}}]}},
  {"hold": "after-$1", "reply": {"text": "{\"summary\": \"checked\", \"result\": {}}"}}],
 "routes": [
  {"body_has": "vw-cat", "step": {"reply": {"text": "{\"summary\": \"seen\", \"result\": {}}"}}},
  {"body_has": "Check the notes of the delegating session\\\\n\\\\nThe full task", "step": {"reply": {"tool_calls": [
     {"id": "vw-cat", "name": "shell", "arguments": {"command": "cat /workspace/parent/notes.txt"}},
     {"id": "vw-touch", "name": "shell", "arguments": {"command":
        "touch /workspace/parent/x; rm -f /workspace/parent/notes.txt; echo more >> /workspace/parent/sub/deep.txt; mkdir /workspace/parent/d; id -u"}},
     {"id": "vw-write", "name": "write_file", "arguments": {"path": "/workspace/parent/x", "content": "no"}},
     {"id": "vw-climb", "name": "write_file", "arguments": {"path": "../parent/y", "content": "no"}},
     {"id": "vw-read", "name": "read_file", "arguments": {"path": "/workspace/parent/sub/deep.txt"}},
     {"id": "vw-list", "name": "list_files", "arguments": {"path": "/workspace/parent"}},
     {"id": "vw-all", "name": "list_files", "arguments": {}},
     {"id": "vw-link", "name": "read_file", "arguments": {"path": "/workspace/parent/link"}},
     {"id": "vw-through", "name": "read_file", "arguments": {"path": "/workspace/parent/rootlink/etc/hostname"}},
     {"id": "vw-own", "name": "write_file", "arguments": {"path": "/workspace/working/mine.txt", "content": "mine"}}]}}}]}
EOF
  curl -sf -X POST "$MURL/_scenario" -d @"$T/scenario.json" >/dev/null || fail "scenario"
  curl -sf -X DELETE "$MURL/_requests" >/dev/null
}
cat >"$T/input.json" <<EOF
{"objective": "Write notes, then have them checked",
 "permissions": {"tools": ["shell", "read_file", "write_file", "list_files"]},
 "delegation": {"enabled": true, "workspace": "parent"},
 "limits": {"maxModelTurns": 10, "maxTokens": 100000},
 "model": {"name": "m", "provider": "openai", "baseUrl": "$MURL/v1"}}
EOF
# the host directory of session $1's workspace: the one whose marker names it last
workspace_of() {
  local f
  for f in "$T"/workspaces/*.session; do
    [ -e "$f" ] && [ "$(tail -n 1 "$f")" == "$1" ] && { echo "${f%.session}"; return 0; }
  done
  return 1
}
# what a tree is: every entry's name, type, mode and size, and every file's bytes
tree_hash() {
  (cd "$1" && find . -printf '%p %y %m %s\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z |
    xargs -0 -r sha256sum) | sha256sum | cut -d' ' -f1
}
# the tool messages of the child's second model request, as id:content (one line each, newlines as |)
child_tool_msgs() {
  curl -sf "$MURL/_requests" | lua5.4 -e 'local last
    for _, r in ipairs(require"cjson".decode(io.read("a"))) do
      local raw = require"cjson".encode(r.body or {})
      if raw:find("vw-cat", 1, true) then last = r.body.messages end
    end
    for _, m in ipairs(last or {}) do
      if m.role == "tool" then io.write(m.tool_call_id, ":", (tostring(m.content):gsub("\n", "|")), "\n") end
    end'
}
# the first model request of the session whose first message is $1: {system=, delegate= its description}
first_request_of() {
  curl -sf "$MURL/_requests" | OBJ="$1" lua5.4 -e 'local cjson = require "cjson"
    for _, r in ipairs(cjson.decode(io.read("a"))) do
      local m = r.body and r.body.messages or {}
      if m[2] and tostring(m[2].content):find(os.getenv("OBJ"), 1, true) == 1 and #m == 2 then
        local out = { system = m[1].content }
        for _, t in ipairs(r.body.tools or {}) do
          if t["function"] and t["function"].name == "delegate" then out.delegate = t["function"].description end
        end
        print(cjson.encode(out))
        return
      end
    end'
}
msg() { grep "^$2:" <<<"$1" || true; }
pending() { engine events "$1" --json 2>/dev/null | grep -c '"type":"approval.requested"' || true; }
containers() { # live containers of session $1 (this test's database)
  local inst; inst="$(sqlite3 "$ENGINE_DB" "SELECT value FROM meta WHERE key='instance_id'" 2>/dev/null)"
  docker ps -q --filter label=engine.managed=true --filter "label=engine.instance=$inst" \
    --filter "label=engine.session=$1" | wc -l
}

check_driver() { # DRIVER ID
  local driver="$1" id="$2" ws before after msgs
  scenario_for "$id"
  engine start "$WF" --input @"$T/input.json" --id "$id" --detach >/dev/null 2>&1 || true
  wait_true 120 '[ "$(model_health held)" -ge 1 ]' 'statuses; model_health held' || true
  ws="$(workspace_of "$id")" || { fail "$driver: no workspace for $id"; return; }
  assert_eq "$driver: the parent wrote its files" "$(printf 'parent bytes: caf\xc3\xa9 \xc2\xa7 7f3a')|deep" \
    "$(cat "$ws/working/notes.txt")|$(cat "$ws/working/sub/deep.txt")"
  # symlinks the parent's sandbox could have made: the trusted side never follows them
  ln -s /etc/hostname "$ws/working/link"; ln -s / "$ws/working/rootlink"
  before="$(tree_hash "$ws/working")"
  release "before-$id"
  # the child's shell command that writes under /workspace/parent asks a person (policies/10-shell.lua)
  wait_true 180 '[ "$(pending "$id.1")" -ge 1 ]' 'statuses; engine show "$id.1" 2>&1 | sed -n 1,5p' || true
  if [ "$driver" == docker ]; then
    local binds
    binds="$(docker inspect -f '{{json .HostConfig.Binds}}' \
      "$(engine events "$id.1" --json | grep '"sandbox.ready"' | jget payload.container)")"
    assert_contains "docker: the parent's working/ is bound read-only at /workspace/parent" \
      "$ws/working:/workspace/parent:ro" "$binds"
  fi
  local cws; cws="$(workspace_of "$id.1")"
  assert_contains "$driver: the sub-session's task.md says where its parent's files are" \
    "/workspace/parent is the working directory of the session that delegated this task ($id), as it is now: read-only." \
    "$(tr '\n' ' ' <"$cws/task.md")"
  assert_contains "$driver: and its system prompt" \
    "/workspace/parent holds the working files of the session that delegated this task to you (read-only)." \
    "$(first_request_of "Check the notes of the delegating session" | jget system)"
  assert_contains "$driver: the parent's delegate tool says what its sub-sessions see" \
    "It also sees your /workspace/working, read-only, at /workspace/parent" \
    "$(first_request_of "Write notes, then have them checked" | jget delegate)"
  # a person's session naming that parent, while it is live: refused before anything is provisioned
  printf '%s' "{\"objective\": \"peek\", \"subSession\": {\"parent\": \"$id\", \"workspace\": \"parent\"},
    \"permissions\": {\"tools\": [\"shell\"]}, \"model\": {\"name\": \"m\", \"provider\": \"openai\",
    \"baseUrl\": \"$MURL/v1\"}}" >"$T/evil.json"
  engine start "$WF" --input @"$T/evil.json" --id "evil-$id" --detach >/dev/null 2>&1 || true
  wait_status "evil-$id" failed 120 || fail "evil-$id: $(status "evil-$id")"
  assert_contains "$driver: a session whose input names a parent that did not start it fails, naming it" \
    "this session was not started by session $id (its parent is none)" "$(engine show "evil-$id" --json | jget error.message)"
  assert_eq "$driver: it provisioned nothing" "0 0" \
    "$(engine history "evil-$id" --json | grep -c sandbox.provision || true) $(workspace_of "evil-$id" | wc -l)"
  assert_exit "$driver: the write the person approved" 0 approve_pending "$id.1" --reason "the mount decides"
  wait_true 180 '[ "$(model_health held)" -ge 1 ] && [ "$(status "$id.1")" == completed ]' \
    'statuses; model_health held' || true
  assert_eq "$driver: the sub-session completed" completed "$(status "$id.1")"
  msgs="$(child_tool_msgs)"
  assert_contains "$driver: cat in the sub-session's sandbox sees the parent's bytes" \
    "vw-cat:exit code: 0|--- stdout ---|$(printf 'parent bytes: caf\xc3\xa9 \xc2\xa7 7f3a')" "$(msg "$msgs" vw-cat)"
  local touch; touch="$(msg "$msgs" vw-touch)"
  assert_contains "$driver: touch there fails: read-only" "touch: cannot touch '/workspace/parent/x': Read-only file system" "$touch"
  assert_contains "$driver: rm there fails" "Read-only file system" "$(grep -o "rm: [^|]*" <<<"$touch")"
  assert_contains "$driver: appending there fails" "/workspace/parent/sub/deep.txt: Read-only file system" "$touch"
  assert_contains "$driver: mkdir there fails" "Read-only file system" "$(grep -o "mkdir: [^|]*/workspace/parent/d[^|]*" <<<"$touch")"
  assert_contains "$driver: write_file there is refused" \
    "vw-write:PermissionDenied: /workspace/parent/x is not under a writable path" "$(msg "$msgs" vw-write)"
  assert_contains "$driver: and by a path that climbs to it" \
    "vw-climb:PermissionDenied: /workspace/parent/y is not under a writable path" "$(msg "$msgs" vw-climb)"
  assert_eq "$driver: read_file reads the parent's file" "vw-read:deep|" "$(msg "$msgs" vw-read)"
  assert_contains "$driver: list_files lists the parent's files" "/workspace/parent/notes.txt  (" "$(msg "$msgs" vw-list)"
  assert_contains "$driver: and its directories" "/workspace/parent/sub/deep.txt  (5 bytes)" "$(msg "$msgs" vw-list)"
  assert_contains "$driver: a listing of the whole workspace has the parent's files" "/workspace/parent/sub/deep.txt  (5 bytes)" \
    "$(msg "$msgs" vw-all)"
  assert_contains "$driver: beside its own" "/workspace/task.md  (" "$(msg "$msgs" vw-all)"
  assert_contains "$driver: read_file refuses a symlink there" "vw-link:FileError: /workspace/parent/link: the file is a symlink" \
    "$(msg "$msgs" vw-link)"
  assert_contains "$driver: and a path through one" \
    "vw-through:FileError: /workspace/parent/rootlink/etc/hostname: the path goes through a symlink" "$(msg "$msgs" vw-through)"
  assert_contains "$driver: list_files shows it as a symlink" "/workspace/parent/link  (symlink)" "$(msg "$msgs" vw-list)"
  assert_contains "$driver: its own working/ is writable" "vw-own:wrote 4 bytes to /workspace/working/mine.txt" \
    "$(msg "$msgs" vw-own)"
  after="$(tree_hash "$ws/working")"
  assert_eq "$driver: the parent's working/ is the same tree after the sub-session" "$before" "$after"
  [ ! -e "$ws/working/x" ] && [ ! -e "$ws/working/mine.txt" ] && pass "$driver: nothing new in the parent's working/" ||
    fail "$driver: the parent's working/: $(ls -la "$ws/working")"
  release "after-$id"
  wait_status "$id" completed 120 || fail "$id: $(status "$id")"
  local answer
  answer="$(engine events "$id" --json | grep '"tool.result"' | grep '"delegate"' | jget payload.content)"
  assert_contains "$driver: the sub-session's answer came back" "sub-session $id.1 (completed): " "$answer"
  assert_contains "$driver: with its summary" '"summary":"seen"' "$answer"
  [ "$driver" != docker ] || assert_eq "docker: the sandboxes are gone" "0 0" "$(containers "$id") $(containers "$id.1")"
  verify_history "$id" >/dev/null || fail "$id history"
  for w in "$id" "$id.1"; do # the parent's log and its child's replay against the script
    engine replay "$w" >"$T/replay.out" 2>&1 && pass "$driver: replay of $w" || fail "replay of $w: $(cat "$T/replay.out")"
  done
}

serve_api
check_driver docker vd
kill "$S"; wait "$S" 2>/dev/null || true
if command -v bwrap >/dev/null && [ -d "${ENGINE_SANDBOX_ROOTFS:-/var/cache/engine/sandbox-rootfs}/usr" ]; then
  ENGINE_SANDBOX_DRIVER=bwrap serve_api
  check_driver bwrap vb
else
  echo "   (no bubblewrap rootfs: the bwrap driver is not run)"
fi
finish
