# Sourced by the tests that run node packages (tests/web, tests/otel).
# node_deps DIR: node, npm and DIR/package.json's exact versions, installed
# into DIR/node_modules when one differs (npm install --no-package-lock: a
# lock file would name a registry). Under a lock: two tests installing into
# one folder at once (test_web and test_web_start start together on a fresh
# clone) corrupt it. Prints why and returns 1 when they cannot be had.
node_deps() {
  local dir="$1" lock
  command -v node >/dev/null && command -v npm >/dev/null || { echo "no node/npm (scripts/install-deps)"; return 1; }
  lock="${TMPDIR:-/tmp}/engine-npm-$(id -u)-$(printf '%s' "$dir" | cksum | cut -d' ' -f1).lock"
  (
    flock 9
    cd "$dir" || exit 1
    node -e 'const p=require("./package.json");for(const [n,v] of Object.entries(p.dependencies)){if(require(n+"/package.json").version!==v)process.exit(1)}' 2>/dev/null && exit 0
    npm install --no-package-lock --no-audit --no-fund --loglevel=error >/dev/null
  ) 9>"$lock" || { echo "npm install in $dir failed"; return 1; }
}
