#!/usr/bin/env bash
# The configuration file (engine/base/config.c): every bad file a person could
# write is refused at start with the file, the line and the key, and nothing is
# written; the environment overrides the file and a flag both, each shown by
# `engine config` with where it came from; secrets never printed; a file's
# settings really steer the engine (its database, serve's listen address).
source "$(dirname "$0")/lib.sh"
unset ENGINE_DB ENGINE_CONFIG
cd "$T"
CONF="$T/engine.conf"

# --- a bad file: each row is FILE CONTENT | what the error must name
while IFS='|' read -r body want; do
  [ -n "$body" ] || continue
  printf '%b\n' "$body" >"$CONF"
  assert_exit "refused: $body" 2 engine --config "$CONF" start "$SRC/workflows/hello.lua" --input '{}' --db "$T/bad.db"
  assert_contains "names it: $body" "$want" "$ERR"
  [ -e "$T/bad.db" ] && fail "a refused configuration still wrote $T/bad.db"
done <<'ROWS'
lese_ms = 5000|engine.conf:1: unknown key 'lese_ms' (did you mean 'lease_ms'?)
ENGINE_DB = "x.db"|engine.conf:1: unknown key 'ENGINE_DB' (did you mean 'db'?)
db = "a.db"\nfoo_bar_baz = 1|engine.conf:2: unknown key 'foo_bar_baz'
lease_ms = "5000"|engine.conf:1: lease_ms must be a whole number, not string
lease_ms = 1.5|lease_ms must be a whole number, not 1.5
lease_ms = 5|engine.conf:1: lease_ms = 5 is out of range (100 to 3600000)
max_payload_bytes = 1e12|max_payload_bytes = 1000000000000 is out of range
child_max_fanout = 0|engine.conf:1: child_max_fanout = 0 is out of range (1 to 100000)
db = 3|engine.conf:1: db must be a string, not an integer
db = ""|engine.conf:1: db is an empty path
no_sweep = "yes"|engine.conf:1: no_sweep must be true or false, not string
log_format = "xml"|engine.conf:1: log_format = "xml" is not one of text|json
db = "a.db"\ndb = "b.db"|engine.conf:2: db is set twice (first on line 1)
db = os.getenv("HOME")|engine.conf:1: 'os' is not defined: the configuration file holds values only
while true do end|the configuration file runs too long
x = string.rep("x", 1e9)|'string' is not defined
db = "a.db" ..|engine.conf:2: unexpected symbol
context_roots = { "/a", 3 }|engine.conf:1: context_roots[2] must be a path
\x1bLua|engine.conf
ROWS
assert_exit "a missing file named by --config is an error" 2 engine --config "$T/nope.conf" list
assert_contains "names the file" "cannot read the configuration file $T/nope.conf" "$ERR"
ENGINE_CONFIG="$T/nope.conf" assert_exit "so is one named by ENGINE_CONFIG" 2 engine list
assert_exit "a directory is not a configuration file" 2 engine --config "$T" list
assert_contains "says it is a directory" "is a directory" "$ERR"

# --- a home that is named must hold the engine's files
mkdir -p "$T/emptyhome"
ENGINE_HOME="$T/emptyhome" assert_exit "an ENGINE_HOME without lua/ is refused" 2 engine list --db "$T/h.db"
assert_contains "names it" "ENGINE_HOME=$T/emptyhome has no lua/ folder" "$ERR"
printf 'home = "%s"\n' "$T/emptyhome" >"$CONF"
assert_exit "so is the file's home" 2 engine --config "$CONF" list --db "$T/h.db"
[ -e "$T/h.db" ] && fail "a refused home still wrote $T/h.db"

# --- a good file steers the engine: its database, with each value's source
cat >"$CONF" <<CONF
-- the engine's configuration
db = "$T/from-file.db"
lease_ms = 5000
context_roots = { "$T", "/srv/repos" }
publish_token = "s3cret-token-value"
synchronous = "normal"
CONF
printf 'return function(input) return input end\n' >"$T/echo.lua"
assert_exit "a start with the file's database" 0 engine --config "$CONF" start "$T/echo.lua" --input '{"x":1}' --id cf1 --quiet
[ -s "$T/from-file.db" ] && pass "the database is where the file says" || fail "no $T/from-file.db"
assert_exit "engine config --json" 0 engine --config "$CONF" config --json
J="$OUT"
src() { K="$1" lua5.4 -e 'local c=require"cjson"; local j=c.decode(io.read("a")); for _,s in ipairs(j.settings) do if s.key==os.getenv("K") then io.write(s.source, "|", s.value == c.null and "nil" or s.value) end end' <<<"$J"; }
assert_eq "db from the file, with its line" "$CONF:2|$T/from-file.db" "$(src db)"
assert_eq "a list joined with ':'" "$CONF:4|$T:/srv/repos" "$(src context_roots)"
assert_eq "a choice in its own spelling" "$CONF:6|NORMAL" "$(src synchronous)"
assert_eq "an unset one is the default" "default|nil" "$(src max_leases)"
assert_eq "the file in use" "$CONF" "$(jget file <<<"$J")"
assert_eq "a secret is masked" "$CONF:5|(set)" "$(src publish_token)"
[[ "$J" == *s3cret* ]] && fail "the secret's value is in engine config --json"
assert_exit "engine config (table)" 0 engine --config "$CONF" config
[[ "$OUT" == *s3cret* ]] && fail "the secret's value is in engine config"
assert_contains "the table shows the source" "$CONF:3" "$(grep '^lease_ms ' <<<"$OUT")"
# the environment over the file, a flag over both
J="$(ENGINE_LEASE_MS=7000 engine --config "$CONF" config --json)"
assert_eq "the environment overrides the file" "environment (over the file)|7000" "$(src lease_ms)"
J="$(ENGINE_DB="$T/env.db" engine --config "$CONF" config --json --db "$T/flag.db")"
assert_eq "a flag overrides both" "flag|$T/flag.db" "$(src db)"
J="$(ENGINE_CONFIG="$CONF" engine config --json)"
assert_eq "ENGINE_CONFIG chooses the file" "$CONF:2|$T/from-file.db" "$(src db)"
J="$(ENGINE_CONFIG=none engine config --json)"
assert_contains "ENGINE_CONFIG=none reads none" '"file":null' "$J"

# --- every key is in the operations manual's table
for k in $(engine --config none config --json | lua5.4 -e 'for _,s in ipairs(require"cjson".decode(io.read("a")).settings) do print(s.key) end'); do
  grep -q "^| \`$k\` " "$SRC/docs/operations.md" || fail "docs/operations.md has no row for the key $k"
done

# --- serve takes its listen address and database from the file
cat >"$CONF" <<CONF
db = "$T/served.db"
listen = "127.0.0.1:0"
CONF
: >"$T/serve.log"
bg S engine --config "$CONF" serve 2>>"$T/serve.log"
wait_for 30 "serve announces the API from the file's listen" 'grep -q "API on" "$T/serve.log"'
URL="$(sed -n 's/.*API on \(http:[^ ]*\).*/\1/p' "$T/serve.log")"
assert_contains "it serves the file's database" "serving $T/served.db" "$(cat "$T/serve.log")"
[ -n "$URL" ] && assert_eq "the API answers" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/workflows")"
# --- the online backup operations.md gives, taken while serve runs: a
# consistent copy the engine reads
engine start "$T/echo.lua" --db "$T/served.db" --input '{"b":1}' --id bk1 --detach >/dev/null 2>&1 || true
ENGINE_DB="$T/served.db" wait_status bk1 completed 30 || fail "bk1 did not complete under the served database"
assert_exit "sqlite3 .backup while serving" 0 sqlite3 "$T/served.db" ".backup '$T/backup.db'"
assert_contains "the copy holds the workflow, completed" "completed" "$(engine list --db "$T/backup.db" | grep bk1)"

# --- SIGHUP: the reloadable settings change, the others wait for a restart,
# and a broken file changes nothing
cat >"$CONF" <<CONF
db = "$T/served.db"
listen = "127.0.0.1:0"
mcp_allow = "npx"
lease_ms = 5000
CONF
kill -HUP "$S"
wait_for 30 "the reload's lines" 'grep -q "reloaded the configuration: needs a restart" "$T/serve.log"' 'tail -5 "$T/serve.log"'
assert_contains "a reloadable setting is applied" "reloaded the configuration: changed mcp_allow" "$(cat "$T/serve.log")"
assert_contains "one that needs a restart is named" "needs a restart: lease_ms" "$(cat "$T/serve.log")"
printf 'db = "%s"\nlease_ms = "soon"\n' "$T/served.db" >"$CONF"
kill -HUP "$S"
wait_for 30 "the rejected reload" 'grep -q "cannot reload the configuration" "$T/serve.log"' 'tail -5 "$T/serve.log"'
assert_contains "names the file, line and key" "engine.conf:2: lease_ms must be a whole number" "$(grep "cannot reload" "$T/serve.log")"
assert_eq "and the API still answers" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/workflows")"
kill "$S"; wait "$S" 2>/dev/null || true
finish
