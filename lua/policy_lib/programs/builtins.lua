-- policy_lib.programs.builtins: the shell's built-ins (printf -v, test, [[ ]],
-- set, unset, export, declare, read, wait, cd). One family of
-- policy_lib.programs' table (lua/policy_lib/programs.lua says what an entry is
-- and what its checkers get).
local lib = require "policy_lib.programs.lib"
local options = require "policy_lib.options"

local parse = lib.parse
local longs = lib.longs
local literal = lib.literal
local SET_O = lib.SET_O

local P = {}

-- printf -v NAME (bash) assigns a variable.
P.printf = function(ctx, args)
  if args[1] and args[1].text == "-v" then
    if not literal(args[2]) then return "'printf -v' assigns a variable that is not named literally" end
    return ctx:shell_var(args[2].text)
  end
end

-- test -v NAME evaluates an array subscript in bash (arithmetic, which can run commands).
local function check_test(ctx, args, name)
  for _, w in ipairs(args) do
    if w.text == "-v" or w.text == "-R" then return "'" .. name .. " " .. w.text .. "' is not analysed" end
    if w.split then return "the " .. name .. " operand '" .. w.text .. "' may expand into -v (quote it)" end
  end
end
P.test = check_test
P["["] = check_test

-- [[ ]] (bash) evaluates the operands of -eq and friends as arithmetic, which
-- can run commands from a variable's value: only integer literals there.
local ARITH = longs({ "-eq", "-ne", "-lt", "-le", "-gt", "-ge" }, true)
P["[["] = function(ctx, args)
  for k, w in ipairs(args) do
    if w.text == "-v" or w.text == "-R" then return "'[[ " .. w.text .. "' is not analysed" end
    if ARITH[w.text] then
      for _, o in ipairs({ args[k - 1], args[k + 1] }) do
        if not literal(o) or not o.text:match("^%-?%d+$") then
          return "'[[ ... " .. w.text .. " ... ]]' with operands that are not integers (bash evaluates them)"
        end
      end
    end
  end
end

local SET_LETTERS = "euxvfCn"
P.set = function(ctx, args)
  local k = 1
  for _, w in ipairs(args) do
    if not literal(w) then return "'set " .. w.text .. "' may expand into options" end
  end
  while args[k] do
    local t = args[k].text
    if t == "--" or t == "-" then return nil end
    if (t == "-o" or t == "+o") then
      local o = args[k + 1]
      if o and not SET_O[o.text] then return "'set " .. t .. " " .. o.text .. "' is not analysed" end
      k = k + 2
    elseif t:match("^[-+]") then
      -- a cluster such as -euo pipefail: o last, with its name next
      local letters, o = t:sub(2):match("^([" .. SET_LETTERS .. "]*)(o?)$")
      if not letters or letters .. o == "" then return "'set " .. t .. "' is not analysed" end
      if o == "o" then
        local name = args[k + 1]
        if not name or not SET_O[name.text] then return "'set " .. t .. "' is not analysed" end
        k = k + 1
      end
      k = k + 1
    else
      return nil -- positional parameters
    end
  end
end

P.unset = function(ctx, args)
  for _, w in ipairs(args) do
    if not literal(w) or w.text:find("[", 1, true) then return "'unset " .. w.text .. "' is not analysed" end
  end
end

P.export = function(ctx, args)
  for _, w in ipairs(args) do
    if w.split or w.lead then return "'export " .. w.text .. "' may expand into other names" end
    if w.text == "-p" or w.text == "-n" then
      -- printing, or removing the export mark
    else
      local name = w.text:match("^([%a_][%w_]*)=") or (literal(w) and w.text:match("^([%a_][%w_]*)$"))
      if not name then return "'export " .. w.text .. "' is not analysed" end
      local why = ctx:exported(name)
      if why then return why end
    end
  end
end

-- declare/typeset/local/readonly NAME[=value] without options (-n, -x, -i ... change what names mean).
local function check_declare(ctx, args, name)
  for _, w in ipairs(args) do
    if w.text == "-p" then
      -- printing
    elseif w.text:sub(1, 1) == "-" or w.text:sub(1, 1) == "+" or w.lead or w.split then
      return "'" .. name .. " " .. w.text .. "' is not analysed"
    else
      local var = w.text:match("^([%a_][%w_]*)=") or w.text:match("^([%a_][%w_]*)$")
      if not var then return "'" .. name .. " " .. w.text .. "' is not analysed" end
      local why = ctx:shell_var(var)
      if why then return why end
    end
  end
end
P.declare, P.typeset, P["local"], P.readonly = check_declare, check_declare, check_declare, check_declare

local READ = { short = "rs", short_arg = { a = "a", d = "d", n = "n", N = "N", p = "p", t = "t", u = "u", i = "i" } }
P.read = function(ctx, args)
  local r, why = parse("read", args, READ)
  if not r then return why end
  local names = {}
  for _, w in ipairs(r.operands) do names[#names + 1] = w end
  if r.has.a then names[#names + 1] = r.has.a.value end
  for _, w in ipairs(names) do
    if not literal(w) or not w.text:match("^[%a_][%w_]*$") then
      return "'read' into '" .. w.text .. "' is not analysed"
    end
    local bad = ctx:shell_var(w.text)
    if bad then return bad end
  end
end

P.wait = function(ctx, args)
  for _, w in ipairs(args) do
    if not literal(w) or not (w.text:match("^%%?%d+$") or w.text == "-n" or w.text == "-f") then
      return "'wait " .. w.text .. "' is not analysed"
    end
  end
end

local function check_cd(ctx, args, name)
  if name == "popd" then ctx:cd(nil) return nil end
  local k = 1
  while args[k] and (args[k].text == "-P" or args[k].text == "-L" or args[k].text == "-e" or args[k].text == "-@") do
    k = k + 1
  end
  if args[k] and args[k].text == "--" then k = k + 1 end
  local target = args[k]
  if not target or target.text:match("^[-+]") then ctx:cd(nil) else ctx:cd(target) end
end
P.cd, P.pushd, P.popd = check_cd, check_cd, check_cd

return { table = P }
