-- policy_lib.programs.test_runners: test runners (pytest, python -m pytest,
-- make test, npm test): the project's own code, run only when the policy lets
-- tests run. One family of policy_lib.programs' table
-- (lua/policy_lib/programs.lua says what an entry is and what its checkers
-- get).
local lib = require "policy_lib.programs.lib"

local parse = lib.parse
local longs = lib.longs
local merge = lib.merge
local literal = lib.literal

local P = {}

-- They run the project's own code (as the run_tests tool does), so only when
-- the policy lets tests run, from a writable directory, with options that
-- neither load other code nor write elsewhere.

local PYTEST = {
  short = "qvxslh", short_arg = { r = "report-chars", k = "keyword", m = "markexpr", p = "plugin" },
  long = merge(longs({ "quiet", "verbose", "exitfirst", "showlocals", "full-trace", "help", "version", "lf",
    "last-failed", "ff", "failed-first", "nf", "new-first", "sw", "stepwise", "sw-skip", "stepwise-skip", "co",
    "collect-only", "no-header", "no-summary", "disable-warnings", "disable-pytest-warnings", "strict-markers",
    "runxfail", "setup-show", "fixtures", "markers", "continue-on-collection-errors", "doctest-modules" }, false),
    longs({ "tb", "maxfail", "durations", "durations-min", "color", "code-highlight", "deselect", "ignore",
      "ignore-glob", "capture", "junit-xml", "junitxml", "basetemp" }, true)),
}
local function check_pytest(ctx, args, who)
  if not ctx.test_runners then
    return "'" .. who .. "' runs the project's code (the policy does not allow test runs)"
  end
  if not ctx:cwd_confined() then return "'" .. who .. "' outside working/output writes caches there" end
  local r, why = parse(who, args, PYTEST)
  if not r then return why end
  for _, o in ipairs(r.opts) do
    if o.name == "plugin" and not (literal(o.value) and o.value.text:match("^no:")) then
      return "'" .. who .. " -p' loads a plugin"
    end
    if o.name == "junit-xml" or o.name == "junitxml" or o.name == "basetemp" then
      local bad = ctx:writes(o.value, who .. " --" .. o.name)
      if bad then return bad end
    end
  end
  for _, w in ipairs(r.operands) do
    local path = w.text:match("^(.-)::") or w.text
    local bad = ctx:writes({ text = path, expand = w.expand, glob = w.glob }, who)
    if bad then return bad end
  end
end
P.pytest = check_pytest
P["py.test"] = check_pytest
local function check_python(ctx, args, name)
  if args[1] and args[1].text == "-m" and args[2] and args[2].text == "pytest" and literal(args[2]) then
    local rest = {}
    for k = 3, #args do rest[#rest + 1] = args[k] end
    return check_pytest(ctx, rest, name .. " -m pytest")
  end
  return "'" .. name .. "' runs arbitrary code"
end
P.python, P.python3 = check_python, check_python

P.make = function(ctx, args)
  if #args == 1 and literal(args[1]) and args[1].text == "test" then
    if not ctx.test_runners then return "'make test' runs the project's code (the policy does not allow test runs)" end
    if not ctx:cwd_confined() then return "'make test' outside working/output" end
    return nil
  end
  return "'make' runs build recipes"
end

P.npm = function(ctx, args)
  local t = {}
  for k, w in ipairs(args) do
    if not literal(w) then return "'npm' runs package scripts" end
    t[k] = w.text
  end
  local line = table.concat(t, " ")
  if line == "test" or line == "run test" then
    if not ctx.test_runners then return "'npm test' runs the project's code (the policy does not allow test runs)" end
    if not ctx:cwd_confined() then return "'npm test' outside working/output" end
    return nil
  end
  return "'npm' runs package scripts"
end

return { table = P }
