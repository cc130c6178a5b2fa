-- Tests for lua/eval/: the scorers' sandbox and budget (scoring.lua), a
-- baseline's regressions (report.lua) and the input merge (suite.lua).
-- Plain lua5.4:   LUA_CPATH_5_4="build/?.so;;" lua5.4 tests/unit/test_eval.lua

local script = arg and arg[0] or "tests/unit/test_eval.lua"
local repo = script:match("^(.*)/tests/unit/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. package.path
package.loaded.json = package.loaded.json or require "cjson" -- the engine's json in its VMs
local scoring = require "eval.scoring"
local report = require "eval.report"

local t = dofile(repo .. "/tests/lua_test.lua")
local ok, eq, has, test = t.ok, t.eq, t.has, t.test

local function scorer(name, src) return { name = name, file = "scorers/" .. name .. ".lua", source = src } end
local function score_one(src, case, run)
  local s = scoring.score({ scorer("x", src) }, case or { name = "c", expect = {} }, run or {}, "/suite")
  return s.x
end

test("a scorer passes, fails, skips, with its detail", function()
  eq(score_one("return {score = function(c, r) return r.turns <= 6, r.turns .. ' turns' end}", nil, { turns = 2 }).result, "pass")
  local f = score_one("return {score = function(c, r) return false, 'no finding names x:1' end}")
  eq(f.result, "fail")
  eq(f.detail, "no finding names x:1")
  eq(score_one("return {score = function() return nil end}").result, "skip")
end)

test("a scorer's error is its ERR, with the file and line", function()
  local e = score_one("return {score = function() local x = nil; return x.y end}")
  eq(e.result, "error")
  has(e.detail, "scorers/x.lua:1")
end)

test("a scorer sees no io, os, require, load or debug", function()
  for _, name in ipairs({ "io", "os", "require", "load", "debug", "dofile", "package", "collectgarbage" }) do
    eq(score_one("return {score = function() return " .. name .. " == nil end}").result, "pass", name)
  end
  eq(score_one("return {score = function() return math.random == nil and json.encode({1}) == '[1]' end}").result, "pass")
end)

test("a scorer cannot reach the string metatable the activities share", function()
  local e = score_one("return {score = function() getmetatable('').__index = {} return true end}")
  eq(e.result, "error")
  eq(("abc"):upper(), "ABC")
end)

test("a runaway scorer stops at its budget, even inside pcall", function()
  local e = score_one("return {score = function() while true do pcall(function() while true do end end) end end}")
  eq(e.result, "error")
  has(e.detail, "ran past its budget")
  eq(score_one("return {score = function() return true end}").result, "pass", "the next call has its own budget")
end)

test("compile names what a scorer lacks", function()
  local _, err = scoring.compile("x", "scorers/x.lua", "return {score = 3}")
  has(err, "scorers/x.lua: score: must be a function")
  _, err = scoring.compile("x", "scorers/x.lua", "return {kind = 'model', model = {}}")
  has(err, "prompt: a model-graded scorer needs a function")
  _, err = scoring.compile("x", "scorers/x.lua", "return {")
  has(err, "scorers/x.lua:1:")
end)

test("a model-graded scorer gives its prompt and model, the suite's path made absolute", function()
  local src = "return {kind = 'model', model = function(c) return c.expect.g and {name = 'replay:' .. c.expect.g} end," ..
    " prompt = function(c, r) return 'summary: ' .. r.summary end, verdict = function(a) return a:match('^PASS') ~= nil, a end}"
  local s, graders = scoring.score({ scorer("g", src) }, { name = "c", expect = { g = "graders/c.jsonl" } },
    { summary = "it drops the last item" }, "/suite")
  eq(s.g, nil)
  eq(graders[1].model.name, "replay:/suite/graders/c.jsonl")
  eq(graders[1].prompt, "summary: it drops the last item")
  eq(scoring.verdict(scorer("g", src), "PASS: yes", {}).result, "pass")
  eq(scoring.verdict(scorer("g", src), "FAIL: no", {}).result, "fail")
  s = scoring.score({ scorer("g", src) }, { name = "c", expect = {} }, {}, "/suite")
  eq(s.g.result, "skip", "no model for the case: does not apply")
end)

test("regressions: a scorer that passed in the baseline and does not now", function()
  local order = { "a", "b" }
  local rows = {
    report.case_row({ name = "one" }, "r.one", true, { turns = 1 }, { a = { result = "fail" }, b = { result = "pass" } }, order, 1),
    report.case_row({ name = "two" }, "r.two", true, {}, { a = { result = "fail" }, b = { result = "pass" } }, order, 1),
    report.case_row({ name = "new" }, "r.new", true, {}, { a = { result = "fail" } }, order, 1),
  }
  eq(rows[1].pass, false)
  eq(rows[1].failed[1], "a")
  local base = { suite = "s", cases = {
    { case = "one", scores = { a = { result = "pass" }, b = { result = "pass" } } },
    { case = "two", scores = { a = { result = "fail" }, b = { result = "pass" } } },
  } }
  local reg = report.regressions(rows, base)
  eq(#reg, 1, "a case failing in both is no regression, a new case neither")
  eq(reg[1].case, "one")
  eq(reg[1].scorers[1].scorer, "a")
  eq(reg[1].scorers[1].now, "fail")
  local r = report.build("r", { name = "s", scorers = { { name = "a" }, { name = "b" } } }, rows, { run = "b1", result = base }, 3)
  eq(r.regressed, true)
  eq(r.totals.failed, 3)
  eq(r.pass, false)
end)

test("a failed session's row carries its error", function()
  local row = report.case_row({ name = "x" }, "r.x", false, { type = "Timeout", message = "past 600 s" }, {}, {}, 600)
  eq(row.status, "failed")
  eq(row.error.type, "Timeout")
end)

test("the input merge is RFC 7386", function()
  local ok_fs = pcall(require, "fs")
  if not ok_fs then return end -- suite.lua needs the engine's fs module (build/fs.so)
  local suite = require "eval.suite"
  local m = suite.merge({ a = 1, b = { c = 2, d = 3 }, l = { 1, 2 } }, { b = { c = 5 }, l = { 9 }, e = "x" })
  eq(m.a, 1)
  eq(m.b.c, 5)
  eq(m.l[1], 9)
  eq(m.l[2], nil, "a list replaces")
  eq(m.e, "x")
  local n = suite.merge({ a = 1, b = 2 }, { a = require("json").null })
  eq(n.a, nil, "null removes")
  eq(n.b, 2)
end)

t.finish()
