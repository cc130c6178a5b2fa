-- The scorers of an eval suite (docs/evals.md): user Lua, run in an
-- environment of their own in the activity VM, with no io, os, require,
-- load or debug, and a budget of instructions per call. A scorer file
-- returns a table:
--
--   return {
--     description = "a finding names each expected file:line",
--     score = function(case, run) return true | false | nil, "detail" end,
--   }
--
-- nil means the scorer does not apply to the case (shown as "-"). A
-- model-graded scorer asks a model instead (its answer recorded like any
-- model turn: offline, a replay: recording):
--
--   return {
--     kind = "model",
--     model = function(case) return {name = "replay:graders/x.jsonl"} end, -- or a table; nil: n/a
--     prompt = function(case, run) return "..." end,
--     verdict = function(answer_text, case) return true | false, "detail" end,
--   }
--
-- case = {name, description, expect, input}; run = {id, status, error,
-- outcome, summary, verdict, findings, result, turns, tool_calls, tokens,
-- cost_usd, limit, wall_seconds, events = {{seq, type, time, payload}}}.
local M = {}

local BUDGET = 50000000 -- instructions per call of a scorer's function
local SAFE = { "assert", "error", "ipairs", "next", "pairs", "pcall", "select", "tonumber", "tostring", "type",
  "xpcall", "rawequal", "rawget", "rawlen", "rawset", "setmetatable", "getmetatable" }

-- The call that runs now under bounded(): once past its budget, every
-- pcall of the scorer raises again, so the scorer cannot catch the stop.
local over_budget = false

local function copy(t, without)
  local c = {}
  for k, v in pairs(t) do if not (without and without[k]) then c[k] = v end end
  return c
end

-- A fresh environment: the safe globals, copies of string, table, math
-- (without random), utf8, and json.
local function environment()
  local env = {}
  for _, n in ipairs(SAFE) do env[n] = _G[n] end
  -- the string metatable is the activity VM's own: a scorer sees only tables'
  env.getmetatable = function(v) if type(v) == "table" then return getmetatable(v) end end
  local function checked(...)
    if over_budget then error(over_budget, 0) end
    return ...
  end
  env.pcall = function(...) return checked(pcall(...)) end
  env.xpcall = function(...) return checked(xpcall(...)) end
  env.string = copy(string, { dump = true })
  env.table = copy(table)
  env.math = copy(math, { random = true, randomseed = true })
  env.utf8 = copy(utf8)
  local json = require "json"
  env.json = { encode = json.encode, decode = json.decode, null = json.null }
  env._G = env
  return env
end

-- Calls fn(...) under the instruction budget; ok, results... or false, why.
local function bounded(what, fn, ...)
  local co = coroutine.create(fn)
  over_budget = false
  debug.sethook(co, function()
    over_budget = what .. ": ran past its budget of " .. BUDGET .. " instructions"
    debug.sethook(co, function() error(over_budget, 0) end, "", 1000) -- and again soon, wherever it is
    error(over_budget, 0)
  end, "", BUDGET)
  local r = table.pack(coroutine.resume(co, ...))
  over_budget = false
  if not r[1] then return false, tostring(r[2]) end
  if coroutine.status(co) ~= "dead" then return false, what .. ": yielded (a scorer may not wait)" end
  return true, table.unpack(r, 2, r.n)
end

-- The scorer of file's source (name: the file's, without .lua): its table,
-- or nil and the problem naming the file.
function M.compile(name, file, src)
  local chunk, err = load(src, "@" .. file, "t", environment())
  if not chunk then return nil, tostring(err) end
  local ok, sc = bounded(file, chunk)
  if not ok then return nil, sc end
  if type(sc) ~= "table" then return nil, file .. ": must return a table ({score = function(case, run) ... end})" end
  if sc.kind ~= nil and sc.kind ~= "check" and sc.kind ~= "model" then
    return nil, file .. ": kind: must be \"check\" (the default) or \"model\""
  end
  if sc.description ~= nil and type(sc.description) ~= "string" then return nil, file .. ": description: must be a string" end
  if sc.kind == "model" then
    if type(sc.model) ~= "table" and type(sc.model) ~= "function" then
      return nil, file .. ": model: a model-graded scorer needs model (a table, or a function of the case)"
    end
    for _, f in ipairs({ "prompt", "verdict" }) do
      if type(sc[f]) ~= "function" then return nil, file .. ": " .. f .. ": a model-graded scorer needs a function" end
    end
  elseif type(sc.score) ~= "function" then
    return nil, file .. ": score: must be a function(case, run)"
  end
  sc.kind = sc.kind or "check"
  sc.name = name
  return sc
end

local function result_of(ok, pass, detail)
  if not ok then return { result = "error", detail = tostring(pass) } end
  detail = detail ~= nil and tostring(detail):sub(1, 500) or nil
  if pass == nil then return { result = "skip", detail = detail } end
  return { result = pass and "pass" or "fail", detail = detail }
end

-- Runs the check scorers over one case's run: {name = {result, detail}}, and
-- the model-graded ones that apply, as {{scorer, model, prompt}} for
-- grade(). wanted: the names the case runs (nil: all).
function M.score(scorers, case, run, suite_dir)
  local scores, graders = {}, {}
  for _, s in ipairs(scorers) do
    if not case.scorers or require("util").contains(case.scorers, s.name) then
      local sc, err = M.compile(s.name, s.file, s.source)
      if not sc then
        scores[s.name] = { result = "error", detail = err }
      elseif sc.kind == "check" then
        scores[s.name] = result_of(bounded(s.file, sc.score, case, run))
      else
        local model = sc.model
        local ok = true
        if type(model) == "function" then ok, model = bounded(s.file, model, case) end
        if not ok then
          scores[s.name] = { result = "error", detail = tostring(model) }
        elseif type(model) ~= "table" then
          scores[s.name] = { result = "skip" }
        else
          local pok, prompt = bounded(s.file, sc.prompt, case, run)
          if not pok or type(prompt) ~= "string" then
            scores[s.name] = { result = "error", detail = pok and (s.file .. ": prompt must return a string") or prompt }
          else
            local m = copy(model)
            if type(m.name) == "string" and m.name:match("^replay:[^/]") then
              m.name = "replay:" .. suite_dir .. "/" .. m.name:sub(#"replay:" + 1)
            end
            graders[#graders + 1] = { scorer = s.name, model = m, prompt = prompt }
          end
        end
      end
    end
  end
  return scores, graders
end

-- A model-graded scorer's verdict on the model's answer.
function M.verdict(s, text, case)
  local sc, err = M.compile(s.name, s.file, s.source)
  if not sc then return { result = "error", detail = err } end
  return result_of(bounded(s.file, sc.verdict, text, case))
end

return M
