# The pull-request review's GitHub stand-in, shared by test_pr_review.sh and
# test_fork_workspace.sh (sourced after lib.sh): the repository (main, then the
# pull request's head), github_stub.py on loopback serving its metadata, files
# and git, the signed payload pointed at it. Sets WF, TOKEN, GH, W, BASE, HEAD,
# API, STUB and start_json (the trigger's start).
WF="$SRC/workflows/pr_review.lua"
TOKEN="ghp_test$RANDOM${RANDOM}secretvalue$RANDOM"
GH="$T/gh"
mkdir -p "$GH/git/Codertocat" "$T/creds"
# the token from the credentials file, not the environment
printf '{"GITHUB_TOKEN": "%s"}' "$TOKEN" >"$T/creds/credentials.json"
export ENGINE_CREDENTIALS_FILE="$T/creds/credentials.json"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_ARTIFACTS="$T/artifacts" ENGINE_PR_CHECKOUTS="$T/checkouts"
unset GITHUB_TOKEN ENGINE_GITHUB_API_URL

# --- the repository: main, then the pull request's head commit
W="$T/work"
g() { git -C "$W" -c user.name=t -c user.email=t@t.invalid "$@"; }
mkdir -p "$W/src" && git init -q -b main "$W"
printf '# Hello-World\n\nA bucket.\n' >"$W/README.md"
cat >"$W/src/bucket.py" <<'PY'
class Bucket:
    def __init__(self, capacity):
        self.capacity = capacity
        self.items = []

    def add(self, item):
        self.items.append(item)
        return True
PY
g add -A && g commit -qm base
BASE="$(g rev-parse HEAD)"
cat >"$W/src/bucket.py" <<'PY'
class Bucket:
    def __init__(self, capacity):
        self.capacity = capacity
        self.items = []

    def add(self, item):
        if len(self.items) > self.capacity:
            return False
        self.items.append(item)
        return True

    def drain(self):
        out, self.items = self.items, []
        return out
PY
mkdir -p "$W/tests" && printf 'from src.bucket import Bucket\n\n\ndef test_add():\n    assert Bucket(1).add(1)\n' >"$W/tests/test_bucket.py"
g add -A && g commit -qm "cap the bucket"
HEAD="$(g rev-parse HEAD)"
git clone -q --bare "$W" "$GH/git/Codertocat/private-Hello-World.git"
git -C "$GH/git/Codertocat/private-Hello-World.git" config uploadpack.allowAnySHA1InWant true
# a commit the pull request does not have is not reachable through it either
git -C "$GH/git/Codertocat/private-Hello-World.git" update-ref -d refs/heads/main 2>/dev/null || true
git -C "$GH/git/Codertocat/private-Hello-World.git" update-ref refs/pull/2/head "$HEAD"
# the same repository as a public one (no token needed, none sent)
git clone -q --bare "$W" "$GH/git/Codertocat/Hello-World.git"
git -C "$GH/git/Codertocat/Hello-World.git" config uploadpack.allowAnySHA1InWant true

# --- the stub, then the payload pointed at it
python3 "$SRC/tests/integration/github_stub.py" "$GH" "$TOKEN" 2>"$T/stub.log" &
STUB=$!; PIDS+=("$STUB")
wait_true 30 '[ -s "$GH/port" ]' || true
GPORT="$(cat "$GH/port")"
API="http://127.0.0.1:$GPORT"
python3 - "$SRC/tests/fixtures/github/pull_request.opened.payload.json" "$T/payload.json" "$GH" "$W" "$BASE" "$HEAD" "$API" <<'PY'
import json, subprocess, sys
src, out, gh, work, base, head, api = sys.argv[1:]
p = json.load(open(src))
pr = p["pull_request"]
clone = api + "/git/Codertocat/private-Hello-World.git"
pr["head"]["sha"], pr["base"]["sha"] = head, base
pr["head"]["repo"]["clone_url"] = clone
p["repository"]["private"] = True
pr["head"]["repo"]["private"] = True
json.dump(p, open(out, "w"))
json.dump(pr, open(gh + "/pr.json", "w"))
# the files as GitHub lists them: the patch is the diff from its first hunk
files = []
names = subprocess.run(["git", "-C", work, "diff", "--name-status", base, head], capture_output=True, text=True).stdout
for line in names.splitlines():
    status, name = line.split("\t")
    diff = subprocess.run(["git", "-C", work, "diff", base, head, "--", name], capture_output=True, text=True).stdout
    patch = diff[diff.index("@@"):].rstrip("\n")
    add = sum(1 for l in patch.splitlines() if l.startswith("+"))
    dele = sum(1 for l in patch.splitlines() if l.startswith("-"))
    files.append({"sha": "0" * 40, "filename": name, "status": {"A": "added", "M": "modified"}[status],
                  "additions": add, "deletions": dele, "changes": add + dele, "patch": patch})
json.dump(files, open(gh + "/files.json", "w"))
PY
start_json="$(lua5.4 "$SRC/tests/integration/pr_input.lua" "$T/payload.json" "delivery-1")"
