-- policy_lib.programs.wrappers: programs that run another command (env, nice,
-- timeout, nohup, stdbuf, time, command, builtin, exec, xargs): that command is
-- checked in turn. One family of policy_lib.programs' table
-- (lua/policy_lib/programs.lua says what an entry is and what its checkers
-- get).
local lib = require "policy_lib.programs.lib"
-- xargs runs only what reads whatever its arguments
local READ_ONLY = require("policy_lib.programs.readers").table

local parse = lib.parse
local longs = lib.longs
local merge = lib.merge
local literal = lib.literal
local HV = lib.HV

local P = {}

-- Programs that run another command: that command is checked in turn.

local function run_rest(ctx, r, from, who)
  local rest = {}
  for k = from, #r.operands do rest[#rest + 1] = r.operands[k] end
  if #rest == 0 then return nil end
  return ctx:run(rest, who)
end

local ENV = { short = "i0v", short_arg = { u = "unset" },
  long = merge(longs({ "ignore-environment", "null", "debug" }, false), { unset = true }, HV),
  abbrev = true, stop = true }
-- env [-i] [-u NAME] [NAME=VALUE]... [COMMAND]: -C, -S and signal options are not analysed.
P.env = function(ctx, args)
  local r, why = parse("env", args, ENV)
  if not r then return why end
  local k = 1
  while r.operands[k] do
    local w = r.operands[k]
    local name = w.text:match("^([%a_][%w_]*)=")
    if not name then break end
    local bad = ctx:exported(name)
    if bad then return bad end
    k = k + 1
  end
  return run_rest(ctx, r, k, "env")
end

local NICE = { short_arg = { n = "adjustment" }, long = merge({ adjustment = true }, HV), abbrev = true, stop = true,
  digits = true }
P.nice = function(ctx, args)
  local r, why = parse("nice", args, NICE)
  if not r then return why end
  return run_rest(ctx, r, 1, "nice")
end

local TIMEOUT = { short = "v", short_arg = { s = "signal", k = "kill-after" },
  long = merge(longs({ "preserve-status", "foreground", "verbose" }, false),
    { signal = true, ["kill-after"] = true }, HV),
  abbrev = true, stop = true }
P.timeout = function(ctx, args)
  local r, why = parse("timeout", args, TIMEOUT)
  if not r then return why end
  return run_rest(ctx, r, 2, "timeout")
end

P.nohup = function(ctx, args)
  local r, why = parse("nohup", args, { long = HV, abbrev = true, stop = true })
  if not r then return why end
  return run_rest(ctx, r, 1, "nohup")
end

local STDBUF = { short_arg = { i = "input", o = "output", e = "error" },
  long = merge({ input = true, output = true, error = true }, HV), abbrev = true, stop = true }
P.stdbuf = function(ctx, args)
  local r, why = parse("stdbuf", args, STDBUF)
  if not r then return why end
  return run_rest(ctx, r, 1, "stdbuf")
end

-- time [-p] COMMAND (the shell's keyword; /usr/bin/time -o would write a file).
P.time = function(ctx, args)
  local r, why = parse("time", args, { short = "p", stop = true })
  if not r then return why end
  return run_rest(ctx, r, 1, "time")
end

P.command = function(ctx, args)
  local r, why = parse("command", args, { short = "pvV", stop = true })
  if not r then return why end
  if r.has.v or r.has.V then return nil end -- a lookup: nothing runs
  return run_rest(ctx, r, 1, "command")
end

P.builtin = function(ctx, args)
  if #args == 0 then return nil end
  return ctx:run(args, "builtin")
end

P.exec = function(ctx, args)
  local r, why = parse("exec", args, { short = "cl", short_arg = { a = "name" }, stop = true })
  if not r then return why end
  return run_rest(ctx, r, 1, "exec")
end

local XARGS = {
  short = "0prtx",
  short_arg = { a = "arg-file", d = "delimiter", E = "eof", I = "replace", L = "max-lines", n = "max-args",
    P = "max-procs", s = "max-chars" },
  short_opt = { e = "eof", i = "replace", l = "max-lines" },
  long = merge(longs({ "null", "interactive", "no-run-if-empty", "verbose", "show-limits", "exit" }, false),
    longs({ "arg-file", "delimiter", "max-args", "max-chars", "max-procs" }, true),
    { eof = "optional", replace = "optional", ["max-lines"] = "optional" }, HV),
  abbrev = true, stop = true,
}
-- xargs builds a command line from its input, so whatever arguments arrive:
-- only programs that are read-only whatever their arguments.
P.xargs = function(ctx, args)
  local r, why = parse("xargs", args, XARGS)
  if not r then return why end
  local prog = r.operands[1]
  if not prog then return nil end -- echo
  local name = literal(prog) and prog.text
  if name then
    local dir, base = name:match("^(.*)/([^/]+)$")
    if dir == "/bin" or dir == "/usr/bin" or dir == "/usr/local/bin" then name = base end
  end
  if not name or READ_ONLY[name] ~= "any" or name == "shift" or name == "exit" or name == "return" or name == "break"
      or name == "continue" or name == "type" then
    return "'xargs " .. prog.text .. "' runs a program with arguments from its input; only programs that are " ..
      "read-only whatever their arguments are analysed"
  end
end

return { table = P }
