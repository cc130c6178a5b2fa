# Sourced by selftest.sh and tests/integration/test_otel.sh. otel_node_deps:
# node, npm and tests/otel/package.json's exact versions, installed into
# tests/otel/node_modules when one differs (npm install --no-package-lock,
# as tests/integration/test_web.sh does: a lock file would name a registry).
# Under a lock: two tests installing into one folder at once would corrupt it.
# Prints why and returns 1 when they cannot be had.
otel_node_deps() {
  local dir lock
  dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  command -v node >/dev/null && command -v npm >/dev/null || { echo "no node/npm (scripts/install-deps)"; return 1; }
  lock="${TMPDIR:-/tmp}/engine-otel-npm-$(id -u).lock"
  (
    flock 9
    cd "$dir" || exit 1
    node -e 'const p=require("./package.json");for(const [n,v] of Object.entries(p.dependencies)){if(require(n+"/package.json").version!==v)process.exit(1)}' 2>/dev/null && exit 0
    npm install --no-package-lock --no-audit --no-fund --loglevel=error >/dev/null
  ) 9>"$lock" || { echo "npm install in $dir failed"; return 1; }
}
