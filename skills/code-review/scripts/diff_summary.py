#!/usr/bin/env python3
"""Summarize a change in a git repository for code review.

Finds the base (or uses --base), then prints the commits, the changed files with
their line counts, the changed line ranges on the new side (for file:line in
findings), risk flags per file and warnings for the whole change. Read-only:
it never writes to the repository, and it runs git with options that keep a
repository's own config from running programs (no external diff, no textconv,
no fsmonitor). Works offline; python3 standard library and git only.

  diff_summary.py [--repo PATH] [--base REF] [--head REF] [--worktree] [--json]

Exit status: 0 on success, 2 on a usage or repository problem.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys

GIT_BASE = ["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "-c", "core.quotePath=false",
            "-c", "diff.renameLimit=2000", "--no-optional-locks"]
DIFF_SAFE = ["--no-ext-diff", "--no-textconv", "--no-color"]
BASE_CANDIDATES = ["origin/main", "origin/master", "main", "master", "develop", "origin/develop", "trunk"]
MAX_RANGES_FILES = 300
LARGE_FILE_LINES = 400

TEST_RE = re.compile(r"(^|/)(tests?|spec|specs|__tests__|testdata|test_data|e2e|fixtures)/|(^|/)test_[^/]*$"
                     r"|_test\.[A-Za-z0-9]+$|\.(test|spec)\.[A-Za-z0-9]+$|(^|/)[^/]*Tests?\.(java|kt|cs|swift)$"
                     r"|(^|/)conftest\.py$")
LOCKFILES = {"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "Pipfile.lock", "Cargo.lock",
             "go.sum", "Gemfile.lock", "composer.lock", "uv.lock", "packages.lock.json", "mix.lock"}
MANIFESTS = re.compile(r"(^|/)(package\.json|requirements[^/]*\.(txt|in)|pyproject\.toml|setup\.py|setup\.cfg"
                       r"|Pipfile|go\.mod|Cargo\.toml|Gemfile|[^/]*\.gemspec|pom\.xml|build\.gradle(\.kts)?"
                       r"|[^/]*\.csproj|composer\.json|CMakeLists\.txt|Makefile|meson\.build)$")
MIGRATION_RE = re.compile(r"(^|/)(migrations?|migrate|alembic|flyway|liquibase|schema)/|\.sql$", re.I)
CI_RE = re.compile(r"(^|/)(\.github/workflows/|\.gitlab-ci\.yml$|Jenkinsfile$|\.circleci/|azure-pipelines\.ya?ml$"
                   r"|\.buildkite/|\.travis\.yml$|\.ci/)")
INFRA_RE = re.compile(r"(^|/)(Dockerfile[^/]*|docker-compose[^/]*\.ya?ml|[^/]*\.tf|[^/]*\.tfvars|Chart\.yaml"
                      r"|values[^/]*\.ya?ml|kustomization\.ya?ml)$|(^|/)(k8s|kubernetes|helm|deploy|terraform)/")
CONFIG_RE = re.compile(r"\.(ya?ml|toml|ini|conf|cfg|properties|env)$|(^|/)\.env[^/]*$")
DOCS_RE = re.compile(r"\.(md|rst|adoc|txt)$|(^|/)docs?/", re.I)
GENERATED_RE = re.compile(r"(^|/)(dist|build|vendor|node_modules|third_party|__generated__)/|\.min\.(js|css)$"
                          r"|\.pb\.go$|_pb2(_grpc)?\.py$|\.generated\.|\.g\.dart$|\.designer\.cs$")
SOURCE_RE = re.compile(r"\.(c|h|cc|cpp|hpp|cxx|go|rs|py|js|jsx|ts|tsx|mjs|cjs|java|kt|scala|rb|php|cs|swift|m|mm"
                       r"|lua|sh|bash|pl|ex|exs|erl|hs|ml|clj|dart|vue|svelte|sql)$")

SECRET_PATTERNS = [
    ("private key", re.compile(r"-----BEGIN (RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY")),
    ("AWS access key id", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b")),
    ("Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("API key (sk-...)", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("hard-coded credential", re.compile(
        r"(?i)\b(password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret)\b"
        r"\s*[:=]\s*['\"][^'\"\s]{8,}['\"]")),
    ("credentials in URL", re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]{3,}@", re.I)),
]
CONFLICT_RE = re.compile(r"^(<{7}|>{7}|={7})( |$)")
DEBUG_RE = re.compile(r"\b(pdb\.set_trace|ipdb\.set_trace|breakpoint\(\)|binding\.pry|byebug|dbg!\(|debugger;"
                      r"|var_dump\(|dd\(|System\.out\.println\(|fmt\.Println\(\"DEBUG)")
TODO_RE = re.compile(r"\b(TODO|FIXME|XXX|HACK)\b")
HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class GitError(Exception):
    pass


class Git:
    def __init__(self, repo):
        self.repo = repo
        self.env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", PAGER="cat", LC_ALL="C",
                        GIT_OPTIONAL_LOCKS="0", GIT_CONFIG_NOSYSTEM="1")

    def run(self, *args, check=True, text=True):
        cmd = GIT_BASE + ["-C", self.repo] + list(args)
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env, timeout=300)
        except subprocess.TimeoutExpired:
            raise GitError("git %s timed out" % args[0])
        if check and p.returncode != 0:
            raise GitError("git %s failed: %s" % (" ".join(args[:3]), p.stderr.decode("utf-8", "replace").strip()))
        out = p.stdout
        return out.decode("utf-8", "replace") if text else out

    def ok(self, *args):
        try:
            return self.run(*args).strip()
        except GitError:
            return None

    def commit(self, ref):
        return self.ok("rev-parse", "--verify", "--quiet", ref + "^{commit}")


def find_repo(path):
    if path:
        return os.path.abspath(path)
    here = os.getcwd()
    if Git(here).ok("rev-parse", "--show-toplevel"):
        return Git(here).ok("rev-parse", "--show-toplevel")
    found = []
    root = "/workspace/input"
    for dirpath, dirnames, _ in os.walk(root):
        depth = dirpath[len(root):].count(os.sep)
        if ".git" in dirnames or os.path.isfile(os.path.join(dirpath, ".git")):
            found.append(dirpath)
            dirnames[:] = []
            continue
        if depth >= 3:
            dirnames[:] = []
        dirnames[:] = [d for d in dirnames if d not in ("node_modules", ".venv", "venv")]
    if len(found) == 1:
        return found[0]
    if not found:
        raise GitError("no git repository found in the current directory or under /workspace/input; pass --repo")
    raise GitError("several repositories under /workspace/input, pass --repo: " + ", ".join(sorted(found)))


def choose_base(git, head, head_sha, explicit):
    """Returns (base_label, merge_base_sha, how, warnings)."""
    warnings = []
    if explicit:
        sha = git.commit(explicit)
        if not sha:
            raise GitError("base %r is not a commit in this repository (no network: it cannot be fetched)" % explicit)
        mb = git.ok("merge-base", sha, head_sha)
        if not mb:
            warnings.append("no merge base between %s and %s (unrelated histories or a shallow clone); "
                            "diffing the two commits directly" % (explicit, head))
            return explicit, sha, "given (--base), direct diff", warnings
        if mb != sha:
            warnings.append("%s has moved on since the branch point; reviewing from the merge base %s"
                            % (explicit, mb[:12]))
        return explicit, mb, "given (--base)", warnings
    candidates = []
    if head == "HEAD":
        up = git.ok("rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
        if up:
            candidates.append((up, "upstream of the current branch"))
    origin_head = git.ok("symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD")
    if origin_head:
        candidates.append((origin_head, "origin/HEAD"))
    candidates += [(c, "default branch name") for c in BASE_CANDIDATES]
    seen = set()
    for ref, how in candidates:
        if ref in seen:
            continue
        seen.add(ref)
        sha = git.commit(ref)
        if not sha or sha == head_sha:
            continue
        mb = git.ok("merge-base", sha, head_sha)
        if not mb or mb == head_sha:
            continue  # unrelated, or HEAD is behind this ref: nothing of ours to review
        return ref, mb, how, warnings
    return None, None, None, warnings


def parse_z_pairs(out, with_score):
    """Parses `git diff --name-status -z -M` into [(status, old, new)]."""
    parts = out.split("\0")
    res, i = [], 0
    while i < len(parts) and parts[i]:
        status = parts[i]
        if status[0] in "RC":
            res.append((status, parts[i + 1], parts[i + 2]))
            i += 3
        else:
            res.append((status, parts[i + 1], parts[i + 1]))
            i += 2
    return res


def parse_numstat(out):
    """Parses `git diff --numstat -z -M` into {new_path: (added, deleted)} (None for binary)."""
    parts = out.split("\0")
    res, i = {}, 0
    while i < len(parts) and parts[i]:
        fields = parts[i].split("\t")
        if len(fields) >= 3 and fields[2] == "":
            path = parts[i + 2]  # rename: "a\td\t" NUL old NUL new
            i += 3
        else:
            path = fields[2] if len(fields) >= 3 else ""
            i += 1
        a, d = fields[0], fields[1]
        res[path] = (None, None) if a == "-" else (int(a), int(d))
    return res


def compress(lines):
    ranges = []
    for n in sorted(set(lines)):
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1][1] = n
        else:
            ranges.append([n, n])
    return ranges


def scan_hunks(patch):
    """From a -U0 patch of one file: changed new-side lines, deletion points and added-line checks."""
    added, deletions, notes = [], [], []
    new_line = 0
    in_hunk = False
    for raw in patch.split("\n"):
        m = HUNK_RE.match(raw)
        if m:
            start, count = int(m.group(3)), int(m.group(4) or "1")
            old_count = int(m.group(2) or "1")
            if count == 0 and old_count > 0:
                deletions.append(start)  # lines removed after new line `start`
            new_line = start
            in_hunk = True
            continue
        if not in_hunk or not raw:
            continue
        c = raw[0]
        if c == "+":
            text = raw[1:]
            added.append(new_line)
            for label, rx in SECRET_PATTERNS:
                if rx.search(text):
                    notes.append(("secret", new_line, "possible %s (value not shown)" % label))
                    break
            if CONFLICT_RE.match(text):
                notes.append(("conflict", new_line, "merge conflict marker"))
            if DEBUG_RE.search(text):
                notes.append(("debug", new_line, "debugging leftover"))
            if TODO_RE.search(text):
                notes.append(("todo", new_line, "new TODO/FIXME"))
            new_line += 1
        elif c == " ":
            new_line += 1
        elif c == "\\" or c == "-":
            continue
        elif raw.startswith("diff --git"):
            in_hunk = False
    return compress(added), deletions, notes


def classify(path, status, added, deleted):
    flags = []
    base = path.rsplit("/", 1)[-1]
    if TEST_RE.search(path):
        flags.append("test")
    if base in LOCKFILES:
        flags.append("lockfile")
    elif MANIFESTS.search(path):
        flags.append("dependencies/build")
    if MIGRATION_RE.search(path):
        flags.append("migration/schema")
    if CI_RE.search(path):
        flags.append("ci")
    if INFRA_RE.search(path):
        flags.append("infra")
    elif CONFIG_RE.search(path) and base not in LOCKFILES:
        flags.append("config")
    if DOCS_RE.search(path) and "test" not in flags:
        flags.append("docs")
    if GENERATED_RE.search(path):
        flags.append("generated/vendored")
    if added is None:
        flags.append("binary")
    elif added + deleted > LARGE_FILE_LINES:
        flags.append("large")
    if status.startswith("D"):
        flags.append("deleted")
    if status.startswith("T"):
        flags.append("type-changed")
    return flags


def count_lines(path):
    try:
        with open(path, "rb") as f:
            data = f.read(5 * 1024 * 1024 + 1)
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def summarize(args):
    repo = find_repo(args.repo)
    git = Git(repo)
    top = git.ok("rev-parse", "--show-toplevel")
    if not top:
        raise GitError("%s is not inside a git repository" % repo)
    git = Git(top)
    head = args.head or "HEAD"
    head_sha = git.commit(head)
    if not head_sha:
        raise GitError("%s is not a commit (is the repository empty?)" % head)
    branch = git.ok("rev-parse", "--abbrev-ref", "HEAD") if head == "HEAD" else head
    warnings = []
    if git.ok("rev-parse", "--is-shallow-repository") == "true":
        warnings.append("shallow clone: history may be incomplete and the merge base missing (no network to fetch)")
    dirty = git.run("status", "--porcelain", "-z", "--untracked-files=all", check=False)
    dirty_entries = [e for e in dirty.split("\0") if e]

    base_label, mb, how, w = choose_base(git, head, head_sha, args.base)
    warnings += w
    worktree = bool(args.worktree)
    if mb is None:
        if dirty_entries and head == "HEAD":
            base_label, mb, how, worktree = "HEAD", head_sha, "no base branch found; uncommitted changes", True
        else:
            parent = git.commit(head_sha + "~1")
            if not parent:
                shallow = any(w.startswith("shallow") for w in warnings)
                raise GitError("no base branch found and %s has no parent%s; pass --base, or review the files "
                               "the task names directly" % (head, " in this shallow clone" if shallow else ""))
            base_label, mb, how = head + "~1", parent, "no base branch found; reviewing the last commit only"
            warnings.append("no base branch found: reviewing only the last commit; pass --base for a longer range")
    if worktree and head != "HEAD":
        raise GitError("--worktree compares with the working tree, so it needs --head HEAD")

    revs = [mb] if worktree else [mb, head_sha]
    commits = []
    if mb != head_sha:
        log = git.run("log", "--no-color", "--format=%H%x00%P%x00%an%x00%ad%x00%s", "--date=short",
                      "-n", "200", "%s..%s" % (mb, head_sha), check=False)
        for line in log.splitlines():
            f = line.split("\0")
            if len(f) == 5:
                commits.append({"sha": f[0][:12], "merge": len(f[1].split()) > 1, "author": f[2], "date": f[3],
                                "subject": f[4]})
    if any(c["merge"] for c in commits):
        warnings.append("the range contains merge commits: review the net diff, not each merge")
    if not worktree and dirty_entries and head == "HEAD":
        warnings.append("%d uncommitted/untracked paths are not included (use --worktree to include them)"
                        % len(dirty_entries))

    ns = parse_z_pairs(git.run("diff", "--name-status", "-z", "-M", *DIFF_SAFE, *revs), True)
    stats = parse_numstat(git.run("diff", "--numstat", "-z", "-M", *DIFF_SAFE, *revs))
    files = []
    for idx, (status, old, new) in enumerate(ns):
        added, deleted = stats.get(new, (None, None))
        entry = {"status": status[0], "path": new, "added": added, "deleted": deleted}
        if status[0] in "RC":
            entry["old_path"] = old
            entry["similarity"] = int(status[1:] or "0")
        entry["flags"] = classify(new, status, added, deleted)
        if idx < MAX_RANGES_FILES and added is not None and not status.startswith("D"):
            specs = [":(literal)" + new] + ([":(literal)" + old] if old != new else [])
            patch = git.run("diff", "-U0", "-M", *DIFF_SAFE, *revs, "--", *specs, check=False)
            ranges, dels, notes = scan_hunks(patch)
            entry["changed_lines"] = ranges
            if dels:
                entry["deleted_after_lines"] = dels
            if notes:
                entry["notes"] = [{"kind": k, "line": ln, "note": t} for k, ln, t in notes[:20]]
        files.append(entry)
    untracked = []
    if worktree:
        out = git.run("ls-files", "--others", "--exclude-standard", "-z", check=False)
        for p in [x for x in out.split("\0") if x][:500]:
            n = count_lines(os.path.join(top, p))
            untracked.append({"status": "?", "path": p, "added": n, "deleted": 0,
                              "flags": classify(p, "A", n, 0) + ["untracked"]})

    everything = files + untracked
    src_changed = [f for f in everything if SOURCE_RE.search(f["path"]) and "test" not in f["flags"]
                   and "generated/vendored" not in f["flags"] and f["status"] != "D"]
    tests_changed = [f for f in everything if "test" in f["flags"]]
    if src_changed and not tests_changed:
        warnings.append("source files changed but no test files changed: check whether the new behaviour is tested")
    lockonly = [f for f in everything if "lockfile" in f["flags"]]
    manifests = [f for f in everything if "dependencies/build" in f["flags"]]
    if lockonly and not manifests:
        warnings.append("a lockfile changed without its manifest: check that the dependency change is intended")
    if manifests and not lockonly and any(f["path"].endswith(("package.json", "Cargo.toml", "go.mod", "pyproject.toml"))
                                          for f in manifests):
        warnings.append("a dependency manifest changed without its lockfile (if the project keeps one)")
    if any(n["kind"] == "secret" for f in files for n in f.get("notes", [])):
        warnings.append("possible secrets in added lines: see the notes; never copy the values into the review")
    if any(n["kind"] == "conflict" for f in files for n in f.get("notes", [])):
        warnings.append("merge conflict markers in added lines")
    if len(files) > MAX_RANGES_FILES:
        warnings.append("more than %d files: changed line ranges shown for the first %d only"
                        % (MAX_RANGES_FILES, MAX_RANGES_FILES))

    total_add = sum(f["added"] or 0 for f in everything)
    total_del = sum(f["deleted"] or 0 for f in everything)
    diff_cmd = ("git -c safe.directory='*' -c core.fsmonitor=false --no-optional-locks -C %s diff --no-ext-diff "
                "--no-textconv -U10 %s" % (shquote(top), " ".join(revs)))
    return {
        "repo": top,
        "head": {"ref": head, "sha": head_sha[:12], "branch": branch},
        "base": {"ref": base_label, "merge_base": mb[:12], "how": how},
        "mode": "worktree" if worktree else "commits",
        "diff_command": diff_cmd + " -- PATH",
        "commits": commits,
        "files": everything,
        "totals": {"files": len(everything), "added": total_add, "deleted": total_del, "commits": len(commits)},
        "warnings": warnings,
    }


def shquote(s):
    if re.fullmatch(r"[A-Za-z0-9_./:@%+=-]+", s):
        return s
    return "'" + s.replace("'", "'\\''") + "'"


def fmt_ranges(ranges):
    return ", ".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in ranges)


def print_text(s):
    out = []
    out.append("repository: %s" % s["repo"])
    h, b = s["head"], s["base"]
    out.append("head:       %s %s%s" % (h["ref"], h["sha"], " (branch %s)" % h["branch"] if h["branch"] and
                                         h["branch"] not in ("HEAD", h["ref"]) else ""))
    out.append("base:       %s, merge base %s (%s)" % (b["ref"], b["merge_base"], b["how"]))
    if s["mode"] == "worktree":
        out.append("mode:       working tree (committed + uncommitted + untracked) against the merge base")
    else:
        out.append("mode:       commits from the merge base to head")
    t = s["totals"]
    out.append("")
    out.append("commits (%d):" % t["commits"])
    for c in s["commits"][:50]:
        out.append("  %s %s%s  (%s, %s)" % (c["sha"][:8], "[merge] " if c["merge"] else "", c["subject"],
                                            c["author"], c["date"]))
    if len(s["commits"]) > 50:
        out.append("  ... %d more" % (len(s["commits"]) - 50))
    out.append("")
    out.append("files (%d, +%d -%d):" % (t["files"], t["added"], t["deleted"]))
    for f in s["files"]:
        name = f["path"] if "old_path" not in f else "%s -> %s (%d%%)" % (f["old_path"], f["path"], f["similarity"])
        counts = "binary" if f["added"] is None else "+%d -%d" % (f["added"], f["deleted"] or 0)
        out.append("  %s %s  %s%s" % (f["status"], name, counts,
                                      ("  [" + ", ".join(f["flags"]) + "]") if f["flags"] else ""))
        if f.get("changed_lines"):
            out.append("      new-side lines: %s" % fmt_ranges(f["changed_lines"]))
        if f.get("deleted_after_lines"):
            out.append("      lines deleted after: %s" % ", ".join(map(str, f["deleted_after_lines"])))
        for n in f.get("notes", []):
            out.append("      line %d: %s" % (n["line"], n["note"]))
    if s["warnings"]:
        out.append("")
        out.append("warnings:")
        for w in s["warnings"]:
            out.append("  - " + w)
    out.append("")
    out.append("read a file's diff with context:")
    out.append("  " + s["diff_command"])
    print("\n".join(out))


def main(argv=None):
    ap = argparse.ArgumentParser(description="Summarize a git change for code review (read-only, offline).")
    ap.add_argument("--repo", help="repository path (default: the current one, or the only one under /workspace/input)")
    ap.add_argument("--base", help="base branch or commit (default: detected)")
    ap.add_argument("--head", help="head commit (default: HEAD)")
    ap.add_argument("--worktree", action="store_true",
                    help="include uncommitted and untracked changes (compare the working tree with the base)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = ap.parse_args(argv)
    try:
        s = summarize(args)
    except GitError as e:
        print("diff_summary: %s" % e, file=sys.stderr)
        return 2
    except FileNotFoundError:
        print("diff_summary: git is not installed", file=sys.stderr)
        return 2
    if args.json:
        json.dump(s, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_text(s)
    return 0


if __name__ == "__main__":
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet exit when piped into head
    sys.exit(main())
