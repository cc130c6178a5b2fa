#!/usr/bin/env bash
# scripts/check-layers, on objects made for the purpose: it passes the engine's
# own build, and it fails, naming the symbol and both files, on a planted
# upward call, a backend header outside the store, and an unnamed loop.
set -euo pipefail
SRC="${ENGINE_SRC:?ENGINE_SRC must point at the source tree}"
BUILD="${ENGINE_BUILD:?ENGINE_BUILD must point at the build directory}"
CHECK="$SRC/scripts/check-layers"
T="$(mktemp -d "${TMPDIR:-/tmp}/check-layers.XXXXXX")"
source "$SRC/tests/debian_python.sh"
use_debian_python "$T/.bin"
trap 'rm -rf "$T"' EXIT
FAILS=0
pass() { echo "ok - $1"; }
fail() { echo "FAIL: $1" >&2; FAILS=$((FAILS + 1)); }
# expect NAME WANT_EXIT NEEDLE... -- ARGS: check-layers ARGS exits WANT_EXIT and says every NEEDLE
expect() {
  local name="$1" want="$2"; shift 2
  local needles=()
  while [ "$1" != -- ]; do needles+=("$1"); shift; done
  shift
  local out rc=0
  out="$("$CHECK" "$@" 2>&1)" || rc=$?
  [ "$rc" = "$want" ] || { fail "$name: exit $rc, wanted $want: $out"; return; }
  for n in "${needles[@]}"; do
    [[ "$out" == *"$n"* ]] || { fail "$name: [$n] not in [$out]"; return; }
  done
  pass "$name"
}

# a tree of objects: base/util.o, store/store.o, each from a C file
obj() { # obj LAYER NAME 'C source'
  mkdir -p "$T/$5/objs/$1" "$T/$5/src/$1"
  printf '%s\n' "$3" >"$T/$5/src/$1/$2.c"
  cc -c -o "$T/$5/objs/$1/$2.c.o" "$T/$5/src/$1/$2.c"
  [ -z "$4" ] || printf '%s\n' "$4" >"$T/$5/src/$1/README.md"
}

expect "the engine's own build holds its layers" 0 "no upward call" -- "$BUILD"

# sound: the store uses base, the worker uses the store
obj base util 'int util_add(int a, int b) { return a + b; }' "" good
obj store store 'int util_add(int, int); int store_get(void) { return util_add(1, 2); }' "" good
obj worker run 'int store_get(void); int run_once(void) { return store_get(); }' "" good
expect "calls down only" 0 "3 files in 3 layers" -- --objects "$T/good/objs" --sources "$T/good/src"

# planted: base calls up into the worker
obj base util 'int run_once(void); int util_add(int a, int b) { return a + b + run_once(); }' "" up
obj worker run 'int run_once(void) { return 1; }' "" up
expect "an upward call fails, naming the symbol and both files" 1 \
  "engine/base/util.c (base) uses run_once, defined in engine/worker/run.c (worker), a layer above" -- \
  --objects "$T/up/objs" --sources "$T/up/src"

# planted: a loop between two files of one layer, unnamed, then named
obj worker a 'int b_go(int); int a_go(int n) { return n ? b_go(n - 1) : 0; }' "" loop
obj worker b 'int a_go(int); int b_go(int n) { return n ? a_go(n - 1) : 1; }' "" loop
expect "a loop no README names fails" 1 "a loop in worker: engine/worker/a.c <-> engine/worker/b.c" "does not name a.c, b.c" -- \
  --objects "$T/loop/objs" --sources "$T/loop/src"
printf '# worker\n\n## Loops\n\n- a.c and b.c: each hands the other what is left (why, said here).\n' >"$T/loop/src/worker/README.md"
expect "a loop the folder's README names passes" 0 "every loop named" -- --objects "$T/loop/objs" --sources "$T/loop/src"

# planted: the worker includes a store backend's header
obj worker run 'int run_once(void) { return 1; }' "" hdr
printf '#include "backend.h"\n' >"$T/hdr/src/worker/run.c"
expect "a backend header outside the store fails" 1 "engine/worker/run.c:1 includes backend.h" -- \
  --objects "$T/hdr/objs" --sources "$T/hdr/src"

expect "a directory that is no build is a usage error" 2 "not a CMake build directory" -- "$T"
[ "$FAILS" -eq 0 ] || { echo "$FAILS check(s) failed" >&2; exit 1; }
