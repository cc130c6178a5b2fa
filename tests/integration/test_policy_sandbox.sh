#!/usr/bin/env bash
# Policies run sandboxed, also through the string metatable that every string
# shares with the activity VM: ("").dump is not string.dump, ("x"):rep(n) is
# capped like string.rep; the real metatable is back after every run, however
# it ended (a normal decision, an error, the instruction budget).
source "$(dirname "$0")/lib.sh"
mkdir -p "$T/p"
printf '%s\n' \
  'assert(("").dump == nil, "string.dump is reachable through the string metatable")' \
  'local ok, err = pcall(function() return ("x"):rep(1e8) end)' \
  'assert(not ok and tostring(err):find("too large", 1, true), "the method rep is not capped: " .. tostring(err))' \
  'return function(req)' \
  '  if req.tool == "spin" then while true do end end' \
  '  if req.tool == "boom" then error("boom") end' \
  '  local s = ("abc"):upper()' \
  '  return ("").dump == nil and "allow" or "deny", s' \
  'end' >"$T/p/10-probe.lua"
assert_exit "engine policy check: the probe policy loads" 0 engine policy check "$T/p"
assert_contains "and says ok" '"ok":true' "$OUT"
mkdir -p "$T/broken" && printf '%s\n' 'return function(req) this is not lua end' >"$T/broken/10-bad.lua"
assert_exit "engine policy check: a broken set is refused" 2 engine policy check "$T/broken"
assert_contains "naming the file and line" "10-bad.lua:1:" "$ERR"
assert_exit "engine policy check: a missing directory is refused" 2 engine policy check "$T/nowhere"

# the loader as a library: the real metatable is restored after each decision
out="$(cd "$SRC" && P="$T/p" lua5.4 -e '
  package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
  local policy = require "policy"
  local mt, real = getmetatable(""), getmetatable("").__index
  local set = assert(policy.load_dir(os.getenv("P")))
  local out = {}
  for _, tool in ipairs({ "read_file", "boom", "spin" }) do
    local d = policy.decide(set, { tool = tool, permissions = { tools = { tool } } })
    out[#out + 1] = tool .. "=" .. d.decision .. (mt.__index == real and "" or " (metatable NOT restored)")
  end
  out[#out + 1] = type(("").dump) == "function" and "dump outside: the real one" or "dump outside: missing"
  print(table.concat(out, " "))' 2>&1)" || true
assert_eq "decisions, and the real string methods outside policies" \
  "read_file=allow boom=deny spin=deny dump outside: the real one" "$out"
finish
