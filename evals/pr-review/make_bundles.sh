#!/usr/bin/env bash
# Builds the suite's git bundles (bundles/CASE.bundle): for each case a small
# repository whose branch 'feature' holds a change against 'main' with one
# known problem (or, for correct_change, none). Written here from scratch;
# fixed names and dates make the commits the same on every run:
#   evals/pr-review/make_bundles.sh      (git is the only dependency)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$HERE/bundles"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export GIT_AUTHOR_NAME="A Developer" GIT_AUTHOR_EMAIL="dev@example.test"
export GIT_COMMITTER_NAME="A Developer" GIT_COMMITTER_EMAIL="dev@example.test"
export GIT_AUTHOR_DATE="2026-11-30T10:00:00Z" GIT_COMMITTER_DATE="2026-11-30T10:00:00Z"
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_SYSTEM=/dev/null
mkdir -p "$OUT"

# put FILE: writes stdin to FILE in the current repository
put() { mkdir -p "$(dirname "$1")"; cat >"$1"; }
# repo NAME: a fresh repository on branch main
repo() { rm -rf "$WORK/$1"; git init -q -b main "$WORK/$1"; cd "$WORK/$1"; }
commit() { git add -A; git commit -q -m "$1"; }
feature() { git checkout -q -b feature; }
bundle() { git bundle create -q "$OUT/$1.bundle" main feature; }

# --- off_by_one: paginate() drops the last item of every page
repo off_by_one
put pager/__init__.py </dev/null
put pager/paginate.py <<'PY'
"""Pages over a list of items."""


def page_count(total, size):
    if size <= 0:
        raise ValueError("size must be positive")
    return (total + size - 1) // size


def paginate(items, page, size):
    """Items of page `page` (from 1), `size` per page."""
    if page < 1:
        raise ValueError("pages start at 1")
    start = (page - 1) * size
    return items[start:start + size]
PY
put tests/test_paginate.py <<'PY'
from pager.paginate import paginate, page_count


def test_pages():
    items = list(range(5))
    assert paginate(items, 1, 2) == [0, 1]
    assert paginate(items, 3, 2) == [4]
    assert page_count(5, 2) == 3
PY
commit "pager: paginate and page_count"
feature
put pager/paginate.py <<'PY'
"""Pages over a list of items."""


def page_count(total, size):
    if size <= 0:
        raise ValueError("size must be positive")
    return (total + size - 1) // size


def paginate(items, page, size):
    """Items of page `page` (from 1), `size` per page, copied one by one
    so that a caller may pass any sequence (a range, a tuple)."""
    if page < 1:
        raise ValueError("pages start at 1")
    start = (page - 1) * size
    end = min(start + size, len(items))
    out = []
    for i in range(start, end - 1):
        out.append(items[i])
    return out
PY
commit "paginate: accept any sequence"
bundle off_by_one

# --- missing_validation: transfer() no longer checks the amount
repo missing_validation
put bank/__init__.py </dev/null
put bank/transfer.py <<'PY'
"""Moves money between accounts."""


class InsufficientFunds(Exception):
    pass


def transfer(accounts, src, dst, amount):
    """Moves amount (in cents) from account src to dst."""
    if not isinstance(amount, int) or amount <= 0:
        raise ValueError("amount must be a positive whole number of cents")
    if src == dst:
        raise ValueError("source and destination are the same account")
    if accounts[src] < amount:
        raise InsufficientFunds(src)
    accounts[src] -= amount
    accounts[dst] += amount
PY
commit "bank: transfer"
feature
put bank/transfer.py <<'PY'
"""Moves money between accounts."""


class InsufficientFunds(Exception):
    pass


def transfer(accounts, src, dst, amount, fee=0):
    """Moves amount (in cents) from account src to dst; src pays the fee."""
    total = amount + fee
    if accounts[src] < total:
        raise InsufficientFunds(src)
    accounts[src] -= total
    accounts[dst] += amount
PY
commit "transfer: charge a fee"
bundle missing_validation

# --- race: the progress counter lost its lock
repo race
put jobs/__init__.py </dev/null
put jobs/progress.py <<'PY'
"""Counts finished jobs across worker threads."""
import threading


class Progress:
    def __init__(self, total):
        self._lock = threading.Lock()
        self.total = total
        self.done = 0

    def finish(self):
        """Called by each worker thread when a job ends; True for the last one."""
        with self._lock:
            self.done += 1
            return self.done == self.total
PY
commit "jobs: progress across threads"
feature
put jobs/progress.py <<'PY'
"""Counts finished jobs across worker threads."""


class Progress:
    def __init__(self, total):
        self.total = total
        self.done = 0
        self.announced = False

    def finish(self):
        """Called by each worker thread when a job ends; True for the last one."""
        self.done += 1
        if self.done >= self.total and not self.announced:
            self.announced = True
            return True
        return False
PY
commit "progress: no lock on the hot path; announce the end once"
bundle race

# --- leaked_secret: a deployment key committed with the settings
repo leaked_secret
put deploy/__init__.py </dev/null
put deploy/settings.py <<'PY'
"""Deployment settings, read from the environment."""
import os

REGION = os.environ.get("DEPLOY_REGION", "eu-west-1")
BUCKET = os.environ.get("DEPLOY_BUCKET", "releases")
PY
commit "deploy: settings"
feature
put deploy/settings.py <<'PY'
"""Deployment settings, read from the environment."""
import os

REGION = os.environ.get("DEPLOY_REGION", "eu-west-1")
BUCKET = os.environ.get("DEPLOY_BUCKET", "releases")

# so the nightly job works without a configured environment
AWS_ACCESS_KEY_ID = "AKIAQX7EVALN0TREAL42"
AWS_SECRET_ACCESS_KEY = "evalOnlyN0tARealSecret/Q9sW2xY8zT4uR7pL0aB"
PY
commit "settings: default credentials for the nightly job"
bundle leaked_secret

# --- correct_change: a refactor with tests, nothing to flag
repo correct_change
put textutil/__init__.py </dev/null
put textutil/slug.py <<'PY'
"""URL slugs."""


def slugify(title):
    out = ""
    for ch in title.lower():
        if ch.isalnum():
            out += ch
        elif out and out[-1] != "-":
            out += "-"
    return out.strip("-")
PY
commit "textutil: slugify"
feature
put textutil/slug.py <<'PY'
"""URL slugs."""
import re

_SEPARATORS = re.compile(r"[^0-9a-z]+")


def slugify(title, max_length=None):
    """The title in lower case, runs of other characters as one '-', no '-'
    at either end; cut to max_length characters (at a '-' when it can be)."""
    slug = _SEPARATORS.sub("-", title.lower()).strip("-")
    if max_length is not None and len(slug) > max_length:
        cut = slug[:max_length]
        slug = cut.rsplit("-", 1)[0] if "-" in cut else cut
    return slug
PY
put tests/test_slug.py <<'PY'
from textutil.slug import slugify


def test_slugify():
    assert slugify("Hello, World!") == "hello-world"
    assert slugify("  --a  b--  ") == "a-b"


def test_max_length():
    assert slugify("one two three", max_length=9) == "one-two"
    assert slugify("abcdefgh", max_length=4) == "abcd"
PY
commit "slugify: a regular expression; max_length; tests"
bundle correct_change

# --- too_large: forty generated modules, more than the budget can read
repo too_large
put gen/__init__.py </dev/null
commit "gen: package"
feature
for i in $(seq -w 1 40); do
  {
    echo "\"\"\"Generated handlers, part $i.\"\"\""
    for j in $(seq 1 30); do
      printf '\n\ndef handler_%s_%s(event):\n    return {"part": %d, "handler": %d, "ok": event is not None}\n' "$i" "$j" "$((10#$i))" "$j"
    done
  } | put "gen/part_$i.py"
done
commit "gen: the handlers of every part"
bundle too_large

echo "bundles written to $OUT"
