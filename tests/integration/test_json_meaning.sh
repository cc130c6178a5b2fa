#!/usr/bin/env bash
# `require "cjson"` means one thing in both VMs: the engine's json module, so
# integers stay integers (a 64-bit id is exact) and encoding is canonical. Before,
# the activity VM gave Debian's lua-cjson: every number a float, 2^53+1 rounded.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/json_meaning.lua"
out="$("$ENGINE" start "$WF" --id jm --quiet --input '{"text":"{\"int\":3,\"big\":9007199254740993}"}' 2>"$T/jm.err")"
for vm in workflow activity; do
  for m in json cjson; do
    assert_eq "$vm VM, $m: an integer decodes as an integer" integer "$(jget "$vm.$m.int_type" <<<"$out")"
    assert_eq "$vm VM, $m: 2^53+1 is exact" 9007199254740993 "$(jget "$vm.$m.big" <<<"$out")"
    assert_eq "$vm VM, $m: canonical encoding" '{"a":[3,2.5],"b":1}' "$(jget "$vm.$m.encoded" <<<"$out")"
    assert_eq "$vm VM, $m: one module" true "$(jget "$vm.$m.same_module" <<<"$out")"
  done
done
finish
