#!/usr/bin/env bash
# engine doctor (engine/cli/cmd_doctor.c, lua/doctor.lua): a healthy host
# (Docker and the sandbox image here) is exit 0 with every row and --json
# ok true, and nothing is created or changed; each broken thing is exit 1
# with its row FAIL and the fix: a policy set with a syntax error (naming the
# file), a DOCKER_HOST with nobody on it, a sandbox image that is not there,
# a database whose folder is missing or read-only, an ENGINE_HOME without the
# engine's files. A key in the credentials file is "set (credentials file)"
# and no key's value is ever printed. On PostgreSQL the server's clock is
# compared with ours. The config file is named and its settings are the
# ones checked. --server is refused.
source "$(dirname "$0")/lib.sh"
unset ENGINE_SERVER ENGINE_TOKEN ENGINE_SANDBOX_DRIVER ENGINE_SANDBOX_IMAGE ENGINE_POLICIES_DIR ENGINE_TRIGGERS_DIR \
  ENGINE_CREDENTIALS_FILE ENGINE_HOME DOCKER_HOST OPENAI_API_KEY ANTHROPIC_API_KEY GITHUB_WEBHOOK_SECRET
cd "$T"

if ! curl -s --max-time 2 --unix-socket /var/run/docker.sock http://d/_ping 2>/dev/null | has_line OK; then
  fail "no Docker engine answers on /var/run/docker.sock (scripts/start-dockerd starts one)"; finish
fi
if ! curl -sf --max-time 5 --unix-socket /var/run/docker.sock http://d/images/engine-sandbox:latest/json >/dev/null; then
  fail "no engine-sandbox:latest image (scripts/build-sandbox-image)"; finish
fi

# doctor [ARGS...]: engine doctor --json ARGS, its exit code in RC and output in OUT
doctor() { set +e; OUT="$("$ENGINE" doctor --json "$@" 2>"$T/stderr")"; RC=$?; set -e; ERR="$(cat "$T/stderr")"; }
# field CHECK KEY: KEY (state, detail, fix) of the row CHECK in $OUT ("" when there is none)
field() {
  printf '%s' "$OUT" | C="$1" K="$2" lua5.4 -e '
    local ok, j = pcall(require("cjson").decode, io.read("a"))
    if not ok then return end
    for _, r in ipairs(j.checks or {}) do if r.check == os.getenv("C") then io.write(r[os.getenv("K")]) return end end'
}
okflag() { printf '%s' "$OUT" | lua5.4 -e 'local ok, j = pcall(require("cjson").decode, io.read("a")); io.write(ok and tostring(j.ok) or "not JSON")'; }
# row_is WHAT CHECK STATE [DETAIL_PART [FIX_PART]]
row_is() {
  assert_eq "$1: $2 is $3" "$3" "$(field "$2" state)"
  [ -z "${4:-}" ] || assert_contains "$1: $2 says" "$4" "$(field "$2" detail)"
  [ -z "${5:-}" ] || assert_contains "$1: $2's fix" "$5" "$(field "$2" fix)"
}

ROWS=("config file" "engine files" "database" "schema" "writable" "disk space" "clock skew" "sandbox driver" "docker"
  "sandbox image" "bubblewrap" "user namespaces" "sandbox rootfs" "workspace file system" "mount namespace" "policies" "triggers"
  "credentials: openai" "credentials: anthropic")

# --- a healthy host, with a database still to be made ---
doctor
assert_eq "healthy: exit 0" 0 "$RC"
assert_eq "healthy: ok true" "true" "$(okflag)"
for r in "${ROWS[@]}"; do
  s="$(field "$r" state)"
  case "$s" in ok | warn) pass "healthy: row $r ($s)" ;; *) fail "healthy: row $r is [$s]: $(field "$r" detail)" ;; esac
done
row_is healthy database ok "does not exist yet: it will be created at first start"
row_is healthy "engine files" ok "$SRC"
row_is healthy "sandbox driver" ok "docker"
row_is healthy docker ok "API 1."
row_is healthy "sandbox image" ok "engine-sandbox:latest"
row_is healthy "clock skew" ok "not used (SQLite)"
row_is healthy bubblewrap ok "not used"
row_is healthy policies ok "$SRC/policies"
row_is healthy "config file" ok "none (defaults and environment)"
row_is healthy "credentials: openai" warn "OPENAI_API_KEY not set" "ENGINE_CREDENTIALS_FILE"
[ ! -e "$T/engine.db" ] && pass "healthy: no database was made" || fail "doctor made $T/engine.db"

# for people: a table with the states and a last line; exit 0 with warnings
set +e; TABLE="$("$ENGINE" doctor)"; rc=$?; set -e
assert_eq "table: exit 0" 0 "$rc"
assert_contains "table: header" "CHECK" "$(printf '%s' "$TABLE" | sed -n 1p)"
assert_contains "table: a docker row" "docker" "$(printf '%s' "$TABLE" | grep '^docker ')"
assert_contains "table: the fix under a warning" "fix: set OPENAI_API_KEY" "$TABLE"
assert_contains "table: the summary" "ready: 0 failed" "$(printf '%s' "$TABLE" | tail -1)"

# an existing database: opened, its schema read, a write rolled back, nothing changed
engine start "$SRC/workflows/hello.lua" --id h1 --detach --input '{"name":"doctor"}' >/dev/null 2>&1 || true
[ -f "$T/engine.db" ] || fail "no database after a start"
before="$(sha256sum "$T/engine.db" | cut -c1-64)"
doctor
assert_eq "existing database: exit 0" 0 "$RC"
row_is "existing database" database ok "SQLite"
row_is "existing database" schema ok "(this engine's)"
row_is "existing database" writable ok "rolled back"
row_is "existing database" "disk space" ok "free of"
assert_eq "existing database: unchanged by doctor" "$before" "$(sha256sum "$T/engine.db" | cut -c1-64)"
[ ! -e "$T/engine.db-wal" ] && pass "existing database: no -wal left" || fail "doctor left $T/engine.db-wal"

# triggers whose secret is not set: a warning, still exit 0
ENGINE_TRIGGERS_DIR="$SRC/workflows/triggers" doctor
assert_eq "triggers without their secret: exit 0" 0 "$RC"
row_is "triggers without their secret" triggers warn "GITHUB_WEBHOOK_SECRET" "ENGINE_CREDENTIALS_FILE"
GITHUB_WEBHOOK_SECRET=s ENGINE_TRIGGERS_DIR="$SRC/workflows/triggers" doctor
row_is "triggers with their secret" triggers ok "/hooks/github"

# --- a policy set with a syntax error ---
mkdir -p "$T/badpol"
cp "$SRC"/policies/*.lua "$T/badpol/"
printf 'return {\n  rules = = {}\n}\n' >"$T/badpol/zz_broken.lua"
ENGINE_POLICIES_DIR="$T/badpol" doctor
assert_eq "broken policies: exit 1" 1 "$RC"
assert_eq "broken policies: ok false" "false" "$(okflag)"
row_is "broken policies" policies FAIL "zz_broken.lua:2" "engine policy check"
row_is "broken policies" docker ok
set +e; TABLE="$(ENGINE_POLICIES_DIR="$T/badpol" "$ENGINE" doctor)"; rc=$?; set -e
assert_eq "broken policies, table: exit 1" 1 "$rc"
assert_contains "broken policies, table: the row" "FAIL" "$(printf '%s' "$TABLE" | grep '^policies ')"
assert_contains "broken policies, table: the summary" "not ready: 1 failed" "$TABLE"

# --- DOCKER_HOST with nobody on it (a socket file whose server has gone) ---
python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$T/dead.sock"
DOCKER_HOST="unix://$T/dead.sock" doctor
assert_eq "dead DOCKER_HOST: exit 1" 1 "$RC"
row_is "dead DOCKER_HOST" docker FAIL "$T/dead.sock" "DOCKER_HOST"
row_is "dead DOCKER_HOST" "sandbox image" warn "not checked"
DOCKER_HOST="tcp://127.0.0.1:2375" doctor
row_is "tcp DOCKER_HOST" docker FAIL "only unix:// sockets" "DOCKER_HOST=unix://"

# --- a sandbox image that is not there ---
ENGINE_SANDBOX_IMAGE=engine-sandbox:does-not-exist doctor
assert_eq "missing image: exit 1" 1 "$RC"
row_is "missing image" "sandbox image" FAIL "engine-sandbox:does-not-exist" "scripts/build-sandbox-image"
row_is "missing image" docker ok

# --- the config file: named, and its settings are what doctor checks ---
printf 'sandbox_image = "engine-sandbox:from-the-config-file"\n' >"$T/engine.conf"
set +e; OUT="$("$ENGINE" --config "$T/engine.conf" doctor --json 2>"$T/stderr")"; RC=$?; set -e
assert_eq "config file: exit 1 (its image is not there)" 1 "$RC"
row_is "config file" "config file" ok "$T/engine.conf"
row_is "config file" "sandbox image" FAIL "engine-sandbox:from-the-config-file"

# --- as root in a mount namespace of its own, the Docker driver's workspaces
# are not the daemon's: a warning with the fix (compared with the local dockerd's)
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  set +e; OUT="$(unshare --mount "$ENGINE" doctor --json 2>"$T/stderr")"; set -e
  row_is "own mount namespace" "mount namespace" warn "a mount namespace other than the Docker daemon's" "User=engine"
  doctor
  row_is "the daemon's mount namespace" "mount namespace" ok "the Docker daemon's: the daemon sees"
  set +e; OUT="$(ENGINE_SANDBOX_DRIVER=bwrap unshare --mount "$ENGINE" doctor --json 2>"$T/stderr")"; set -e
  row_is "bubblewrap mounts in its own namespace" "mount namespace" ok "nothing to share"
fi

# --- the database's folder: missing, read-only ---
doctor --db "$T/nowhere/sub/engine.db"
assert_eq "missing folder: exit 1" 1 "$RC"
row_is "missing folder" database FAIL "$T/nowhere/sub does not exist" "mkdir -p"
row_is "missing folder" schema warn "not checked"
mkdir -p "$T/ro"
if mount -t tmpfs -o size=8m tmpfs "$T/ro" 2>/dev/null; then
  cp "$T/engine.db" "$T/ro/engine.db"
  mount -o remount,ro "$T/ro"
  doctor --db "$T/ro/new.db"
  assert_eq "read-only folder, new database: exit 1" 1 "$RC"
  row_is "read-only folder, new database" database FAIL "not writable (Read-only file system)"
  doctor --db "$T/ro/engine.db"
  assert_eq "read-only file system, a database there: exit 1" 1 "$RC"
  assert_contains "read-only file system: says so" "read-only" "$(field database detail) $(field writable detail)"
  umount "$T/ro"
elif [ "$(id -u)" != 0 ]; then
  chmod 555 "$T/ro"
  doctor --db "$T/ro/new.db"
  assert_eq "read-only folder, new database: exit 1" 1 "$RC"
  row_is "read-only folder, new database" database FAIL "not writable"
  chmod 755 "$T/ro"
else
  echo "skip - a read-only folder (root, and no tmpfs mount)"
fi

# --- ENGINE_HOME without the engine's files ---
mkdir -p "$T/emptyhome"
ENGINE_HOME="$T/emptyhome" doctor
assert_eq "empty ENGINE_HOME: exit 1" 1 "$RC"
row_is "empty ENGINE_HOME" "engine files" FAIL "$T/emptyhome has no lua/" "ENGINE_HOME"
# without ENGINE_LUA_DIR (which the tests set) nothing can run the Lua checks: said, not failed twice
set +e; OUT="$(env -u ENGINE_LUA_DIR ENGINE_HOME="$T/emptyhome" "$ENGINE" doctor --json 2>/dev/null)"; RC=$?; set -e
assert_eq "empty ENGINE_HOME, no Lua library: exit 1" 1 "$RC"
row_is "empty ENGINE_HOME, no Lua library" policies warn "not checked" "engine files"
row_is "empty ENGINE_HOME, no Lua library" docker warn "not checked"

# --- credentials: where a key is set, never its value ---
KEY_FILE=sk-doctor-file-5ecret-0123456789 KEY_ENV=anthropic-doctor-env-5ecret-9876
printf '{"OPENAI_API_KEY": "%s"}\n' "$KEY_FILE" >"$T/creds.json"
ENGINE_CREDENTIALS_FILE="$T/creds.json" ANTHROPIC_API_KEY="$KEY_ENV" doctor
assert_eq "credentials: exit 0" 0 "$RC"
row_is "credentials" "credentials: openai" ok "OPENAI_API_KEY set (credentials file)"
row_is "credentials" "credentials: anthropic" ok "ANTHROPIC_API_KEY set (environment)"
set +e; TABLE="$(ENGINE_CREDENTIALS_FILE="$T/creds.json" ANTHROPIC_API_KEY="$KEY_ENV" "$ENGINE" doctor --color always 2>&1)"; set -e
for k in "$KEY_FILE" "$KEY_ENV" 5ecret; do
  [[ "$OUT$ERR$TABLE" != *"$k"* ]] && pass "credentials: $k is not printed" || fail "credentials: $k was printed"
done
printf 'not json' >"$T/creds.json"
ENGINE_CREDENTIALS_FILE="$T/creds.json" doctor
row_is "credentials file not JSON" "credentials: openai" warn "is not a JSON object"

# --- local only ---
assert_exit "--server is refused" 2 "$ENGINE" --server http://127.0.0.1:9 doctor
assert_contains "--server: says why" "doctor does not work with --server" "$ERR"
assert_exit "--help" 0 "$ENGINE" doctor --help
assert_contains "--help: the JSON shape" '"checks"' "$OUT"
assert_exit "an unknown option" 2 "$ENGINE" doctor --frobnicate

# --- PostgreSQL: the database before and after its tables, and the server's clock ---
own_pg_cluster
doctor --db "$URL"
row_is "PostgreSQL, empty" database ok "holds no engine data yet"
row_is "PostgreSQL, empty" schema ok "none yet"
engine migrate --db "$URL" >/dev/null
# the cluster trusts local connections: a password in the URL is taken and ignored
URL="$(printf '%s' "$URL" | sed 's#://engine@#://engine:hunter2pw@#')"
doctor --db "$URL"
assert_eq "PostgreSQL: exit 0" 0 "$RC"
row_is "PostgreSQL" database ok "(PostgreSQL)"
row_is "PostgreSQL" schema ok "(this engine's)"
row_is "PostgreSQL" writable ok "rolled back"
row_is "PostgreSQL" "clock skew" ok "the server's clock is"
[[ "$OUT$ERR" != *hunter2pw* ]] && pass "PostgreSQL: the URL's password is not shown" || fail "PostgreSQL: the password was shown: $OUT"
"$SRC/scripts/start-postgres" --stop "$T/pg" >/dev/null 2>&1 || true
doctor --db "$URL"
assert_eq "PostgreSQL down: exit 1" 1 "$RC"
row_is "PostgreSQL down" database FAIL "" "that the server runs"
row_is "PostgreSQL down" "clock skew" warn "not checked"

finish
