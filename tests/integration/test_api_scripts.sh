#!/usr/bin/env bash
# GET /v1/workflow-scripts and /v1/workflow-scripts/{name} over real HTTP:
# the scripts of the server's --workflows directory, each with its
# description (its opening comment block) and the input schema it declares
# (`-- input schema: PATH`, docs/workflows.md); the shipped agent_session and
# pr_review declare the schemas their own checks use. Hostile names and
# hostile schema files, table-driven: every one answered with a clear
# message, none a 500, none a file outside the directory.
source "$(dirname "$0")/lib.sh"

WF="$T/wf"
mkdir -p "$WF/sub" "$T/outside"
cp "$SRC/workflows/agent_session.lua" "$SRC/workflows/pr_review.lua" "$SRC/workflows/pr_review.input.schema.json" "$WF/"
mkdir -p "$T/lua/types" && cp "$SRC/lua/types/agent_session_input.schema.json" "$T/lua/types/" # ../lua/types beside it
script() { # script NAME SCHEMA-LINE: a tiny workflow declaring SCHEMA-LINE
  printf -- '-- %s: a test workflow.\n-- It says hello.\n--\n-- input schema: %s\nreturn function(input) return input end\n' "$1" "$2" >"$WF/$1"
}
printf '{"type":"object","required":["who"],"properties":{"who":{"type":"string","default":"Ada"}}}' >"$WF/ok.schema.json"
script good.lua ok.schema.json
printf '{"type": "object", nope' >"$WF/broken.schema.json"
script broken.lua broken.schema.json
printf '[1, 2]' >"$WF/array.schema.json"
script array.lua array.schema.json
head -c $((2 << 20)) /dev/zero | tr '\0' ' ' >"$WF/huge.schema.json"
script huge.lua huge.schema.json
script missing.lua nothing.schema.json
script absolute.lua /etc/passwd
script escape.lua '../outside/x;rm -rf $HOME.json'
script notjson.lua ok.schema.txt
printf '{"type":"object"}' >"$T/outside/secret.schema.json"
script traversal.lua ../outside/secret.schema.json # the operator's own choice: read, as written
printf '\xff\xfe{}' >"$WF/binary.schema.json"
script binary.lua binary.schema.json
mkfifo "$WF/fifo.schema.json"
script fifo.lua fifo.schema.json
printf 'return function() end\n' >"$WF/bare.lua"
script sub/nested.lua ../ok.schema.json
mkfifo "$WF/pipe.lua"
ln -s /etc/hostname "$WF/link.lua"
printf 'not a script' >"$WF/readme.txt"

TOKEN="$(engine token create reader --scopes read)"
NOREAD="$(engine token create starter --scopes start)"
serve_api --workflows "$WF"
get() { curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$URL$1"; }

assert_eq "the list needs a token" 401 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/workflow-scripts")"
assert_eq "and the read scope" 403 "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $NOREAD" "$URL/v1/workflow-scripts")"
assert_eq "the list" 200 "$(get /v1/workflow-scripts)"
L="$(cat "$T/body")"
names="$(lua5.4 -e 'local j=require"cjson".decode(io.read("a")); local t={} for _,s in ipairs(j.scripts) do t[#t+1]=s.name end io.write(table.concat(t," "))' <<<"$L")"
assert_eq "the .lua files at the top, by name (no FIFO, no link outside, no other file, no folder)" \
  "absolute.lua agent_session.lua array.lua bare.lua binary.lua broken.lua escape.lua fifo.lua good.lua huge.lua missing.lua notjson.lua pr_review.lua traversal.lua" "$names"
item() { NAME="$1" lua5.4 -e 'local j=require"cjson".decode(io.read("a")); for _,s in ipairs(j.scripts) do if s.name==os.getenv("NAME") then io.write(require"cjson".encode(s)) end end' <<<"$L"; }
G="$(item good.lua)"
assert_eq "a description: the opening comment without its dashes or the schema line" \
  "good.lua: a test workflow.|It says hello." "$(jget description <<<"$G" | tr '\n' '|')"
assert_eq "the declared schema, as written" "Ada ok.schema.json" "$(jget input_schema.properties.who.default <<<"$G") $(jget input_schema_file <<<"$G")"
assert_contains "no error" '"input_schema_error":null' "$G"
B="$(item bare.lua)"
assert_eq "a script that declares nothing: null" "nil nil nil" \
  "$(jget input_schema_file <<<"$B") $(jget input_schema <<<"$B") $(jget input_schema_error <<<"$B")"
A="$(item agent_session.lua)"
assert_eq "agent_session declares the schema session.prepare checks" "objective model" \
  "$(jget input_schema.required.1 <<<"$A") $(jget input_schema.required.2 <<<"$A")"
P="$(item pr_review.lua)"
assert_eq "pr_review declares its own" "pr pr.repo is missing (owner/name)" \
  "$(jget input_schema.required.1 <<<"$P") $(jget input_schema.properties.pr.errorMessage.required.repo <<<"$P")"
# the shipped schemas are schemas the engine's own checker accepts
for f in "$SRC/lua/types/agent_session_input.schema.json" "$SRC/workflows/pr_review.input.schema.json"; do
  assert_eq "$(basename "$f") is a schema lua/jsonschema.lua accepts" "true" \
    "$(F="$f" LUA_PATH="$SRC/lua/?.lua;;" lua5.4 -e 'local j=require"cjson"; local ok,e=require"jsonschema".check_schema(j.decode(io.open(os.getenv("F")):read("a"))); io.write(tostring(ok), e and table.concat(e,"; ") or "")')"
done

# ---- hostile schema files: each said in input_schema_error, the list still 200
while IFS='|' read -r name want; do
  got="$(item "$name" | jget input_schema_error)"
  assert_contains "$name: $want" "$want" "$got"
  assert_contains "$name: no schema" '"input_schema":null' "$(item "$name")"
done <<'EOF2'
broken.lua|the input schema broken.schema.json is not a JSON object: the input schema is not valid JSON
array.lua|the input schema array.schema.json is not a JSON object
huge.lua|the input schema huge.schema.json is 2097152 bytes, over the limit of 1048576
missing.lua|the input schema nothing.schema.json is not a file beside the script
absolute.lua|the path is absolute
escape.lua|only A-Z a-z 0-9 . _ - and / are allowed
notjson.lua|does not end in .json
binary.lua|the input schema binary.schema.json is not a JSON object
fifo.lua|the input schema fifo.schema.json is not a file beside the script
EOF2
assert_eq "a path the operator wrote to outside the folder is theirs to choose: read" object \
  "$(item traversal.lua | jget input_schema.type)"

# ---- one script; hostile names, table-driven
assert_eq "one script" 200 "$(get /v1/workflow-scripts/good.lua)"
assert_eq "is the list's item" "good.lua ok.schema.json Ada" \
  "$(jget name <"$T/body") $(jget input_schema_file <"$T/body") $(jget input_schema.properties.who.default <"$T/body")"
assert_eq "one in a folder, its schema beside it" "Ada" "$(get /v1/workflow-scripts/sub%2Fnested.lua >/dev/null; jget input_schema.properties.who.default <"$T/body")"
while IFS='|' read -r path code want; do
  got="$(get "/v1/workflow-scripts/$path")"
  assert_eq "$path: $code" "$code" "$got"
  assert_contains "$path: says why" "$want" "$(cat "$T/body")"
  if grep -q 'root:' "$T/body"; then fail "$path: a file outside leaked"; fi
done <<'EOF2'
..%2F..%2F..%2Fetc%2Fpasswd|400|it does not end in .lua
..%2Foutside%2Fx.lua|400|'.', '..' or empty segment
%2e%2e|400|it does not end in .lua
%2e%2e%2fwf%2fgood.lua|400|'.', '..' or empty segment
good.lua%00|400|a path segment is not valid
good%00.lua|400|a path segment is not valid
%2Fetc%2Fhostname.lua|400|it is an absolute path
nope.lua|404|unknown workflow script 'nope.lua'
link.lua|400|it resolves outside the workflows directory
pipe.lua|404|is not a readable file
good.lua%25|400|it does not end in .lua
a%20b.lua|400|only A-Z a-z 0-9
EOF2
assert_eq "a name of 600 bytes: 400" 400 "$(get "/v1/workflow-scripts/$(printf 'a%.0s' {1..600}).lua")"
assert_eq "POST is not a method of it" 405 "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" "$URL/v1/workflow-scripts")"
assert_eq "HEAD answers as GET" 200 "$(curl -s -I -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$URL/v1/workflow-scripts/good.lua")"
# an edit shows at the next request, no restart
printf '{"type":"object","properties":{"who":{"type":"string","default":"Grace"}}}' >"$WF/ok.schema.json"
get /v1/workflow-scripts/good.lua >/dev/null
assert_eq "an edited schema shows at once" Grace "$(jget input_schema.properties.who.default <"$T/body")"
finish
