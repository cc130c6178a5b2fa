-- Tests for lua/caps.lua, the engine's limits file (caps, rates, quotas).
-- Plain lua5.4:   lua5.4 tests/unit/test_caps.lua   (from any directory)

local script = arg and arg[0] or "tests/unit/test_caps.lua"
local repo = script:match("^(.*)/tests/unit/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. package.path
local caps = require "caps"

local t = dofile(repo .. "/tests/lua_test.lua")
local ok, eq, has, test = t.ok, t.eq, t.has, t.test

local function refused(text, want)
  local cfg, err = caps.parse(text, "=limits")
  ok(cfg == nil, "refused: " .. text)
  has(err, want)
end

test("fields set as assignments or in a returned table", function()
  local a = assert(caps.parse("sessions = 3\nsandboxes = 4\nmodel_calls = {default = 2, anthropic = 1}"))
  eq(a.sessions, 3)
  eq(a.sandboxes, 4)
  eq(a.model_calls.anthropic, 1)
  eq(math.type(a.sessions), "integer")
  local b = assert(caps.parse("return {sessions = 3.0, rate = {openai = {requests_per_minute = 60}}}"))
  eq(math.type(b.sessions), "integer", "3.0 is the whole number 3")
  eq(b.rate.openai.requests_per_minute, 60)
  eq(next(assert(caps.parse("-- nothing limited\n"))), nil, "an empty file limits nothing")
end)

test("the file sees no globals", function()
  refused("sessions = math.floor(2.5)", "attempt to index a nil value (global 'math')")
  refused("os.exit(1)", "global 'os'")
  refused("sessions = tonumber('3')", "global 'tonumber'")
end)

test("a syntax error names the line", function()
  refused("sessions = 3\nsandboxes = = 4", "2:")
end)

test("a loop in the file is stopped", function()
  refused("while true do end", "runs too long")
end)

test("bad values name the field and the value", function()
  refused("sessions = 0", "sessions must be a whole number from 1 to 1000000 (got 0)")
  refused("sandboxes = 2.5", "sandboxes must be a whole number from 1 to 1000000 (got 2.5)")
  refused("sessions = 'four'", 'sessions must be a whole number from 1 to 1000000 (got "four")')
  refused("sesions = 4", 'unknown field "sesions"')
  refused("model_calls = 3", "model_calls must be a table")
  refused("model_calls = {openai = -1}", "model_calls.openai must be a whole number from 1 to 1000000 (got -1)")
  refused("rate = {openai = {requests_per_minute = 0}}", "rate.openai.requests_per_minute must be a positive number (got 0)")
  refused("rate = {openai = {rpm = 10}}", 'rate.openai: unknown field "rpm"')
  refused("rate = {openai = {window_seconds = 1e9}}", "rate.openai.window_seconds must be at most 86400")
  refused("quotas = {['local:ada'] = {tokens_per_week = 5}}", 'quotas["local:ada"]: unknown field "tokens_per_week"')
  refused("quotas = {default = {tokens_per_day = -1}}", 'quotas["default"].tokens_per_day must be a number >= 0 (got -1)')
  refused("quotas = {default = {cost_usd_per_day = 0/0}}", "must be a number >= 0")
  refused("return 4", "the file returns number, not a table")
  refused("sessions = 2 return {sandboxes = 1}", "both sets fields and returns a table")
end)

test("load names the file; path prefers ENGINE_LIMITS, else the database's directory", function()
  local dir = t.tmpdir("limits")
  local f = assert(io.open(dir .. "/limits.lua", "w"))
  f:write("sessions = 2\nsandboxes = 'x'\n")
  f:close()
  if (os.getenv("ENGINE_LIMITS") or "") == "" then eq(caps.path(dir), dir .. "/limits.lua") end
  local cfg, err = caps.load(dir .. "/limits.lua")
  eq(cfg, nil)
  eq(err, "limits file " .. dir .. "/limits.lua: sandboxes must be a whole number from 1 to 1000000 (got \"x\")")
  f = assert(io.open(dir .. "/bad.lua", "w"))
  f:write("sessions = 2\n}\n")
  f:close()
  cfg, err = caps.load(dir .. "/bad.lua")
  has(err, "limits file " .. dir .. "/bad.lua: line 2:")
  cfg, err = caps.load(dir .. "/missing.lua")
  has(err, "limits file " .. dir .. "/missing.lua: cannot read it")
  if (os.getenv("ENGINE_LIMITS") or "") == "" then eq(caps.path(dir .. "/nothing-here"), nil, "no file, no limits") end
end)

test("caps for one session: its provider, else default; its identity, else default", function()
  local cfg = assert(caps.parse([[
    sessions = 5
    model_calls = { default = 4, anthropic = 2 }
    rate = { openai = { requests_per_minute = 300, tokens_per_minute = 6000, window_seconds = 2 } }
    quotas = { ["token:ci"] = { tokens_per_day = 100 }, default = { cost_usd_per_month = 5 } }
  ]]))
  local c = caps.caps(cfg, "openai", "token:ci")
  eq(c.sessions, 5)
  eq(c.sandboxes, nil)
  eq(c.model_calls, 4, "the default")
  eq(c.rate.window, 2)
  eq(c.rate.requests, 10, "300/min in 2 s windows")
  eq(c.rate.tokens, 200)
  eq(c.quota.identity, "token:ci")
  eq(c.quota.tokens_per_day, 100)
  eq(c.quota.cost_usd_per_month, nil, "its own entry, not merged with the default")
  c = caps.caps(cfg, "anthropic", "local:bob")
  eq(c.model_calls, 2)
  eq(c.rate, nil)
  eq(c.quota.cost_usd_per_month, 5)
  eq(caps.caps(assert(caps.parse("rate = {x = {requests_per_minute = 10, window_seconds = 1}}")), "x", "a").rate.requests, 1,
    "at least one request per window")
  eq(caps.caps(assert(caps.parse("model_calls = {openai = 1}")), "replay", "a"), nil, "nothing for this session")
  eq(caps.caps(nil, "openai", "a"), nil)
end)

test("UTC day and month with integer arithmetic", function()
  eq(select(1, caps.period(0)), "1970-01-01")
  eq(select(1, caps.period(951782400)), "2000-02-29", "a leap day of a century divisible by 400")
  eq(select(1, caps.period(4107542399)), "2100-02-28", "2100 is no leap year")
  eq(select(1, caps.period(4107542400)), "2100-03-01")
  local day, month = caps.period(1796169599.9)
  eq(day, "2026-12-01")
  eq(month, "2026-12")
  -- every day of four years against os.date
  for d = 19000, 19000 + 4 * 366 do
    local want = os.date("!%Y-%m-%d", d * 86400 + 43210)
    local got = caps.period(d * 86400 + 43210)
    if got ~= want then eq(got, want, "day " .. d) end
  end
end)

test("counter names parse back, with colons in the identity", function()
  local n = caps.counter_name("local:ada", "tokens_per_day", 1796169599)
  eq(n, "quota:local:ada:tokens_per_day:2026-12-01")
  local id, q, p = caps.parse_counter_name(n)
  eq(id, "local:ada")
  eq(q, "tokens_per_day")
  eq(p, "2026-12-01")
  id, q, p = caps.parse_counter_name(caps.counter_name("token:ci", "cost_usd_per_month", 1796169599))
  eq(id .. "|" .. q .. "|" .. p, "token:ci|cost_usd_per_month|2026-12")
  local long = caps.counter_name(string.rep("x", 300), "tokens_per_day", 0)
  ok(#long <= 256, "fits a counter name: " .. #long)
  ok(long ~= caps.counter_name(string.rep("x", 299) .. "y", "tokens_per_day", 0), "long identities stay apart")
end)

-- ------------------------------------------------------- workflow side --

-- a stand-in for the workflow API that records each durable call
local function fake_wf(t0)
  local wf = { calls = {}, counters = {} }
  local function rec(...) wf.calls[#wf.calls + 1] = table.concat({ ... }, " ") end
  function wf.now() return t0 end
  function wf.acquire(name, o) rec("acquire", name, tostring(o.key), tostring(o.limit)) return true end
  function wf.release(name, o) rec("release", name, o and tostring(o.key) or "") end
  function wf.rate(name, o)
    rec("rate", name, tostring(o.limit), tostring(o.per), tostring(o.cost), tostring(o.charge), tostring(o.pause))
  end
  function wf.counter(name, delta)
    rec("counter", name, tostring(delta))
    wf.counters[name] = (wf.counters[name] or 0) + delta
    return wf.counters[name]
  end
  return wf
end

test("hold and release: a slot only for a cap that is set", function()
  local wf = fake_wf(0)
  eq(caps.hold(wf, { sandboxes = 2 }, "sandboxes"), true)
  eq(caps.hold(wf, { sandboxes = 2 }, "sessions"), false)
  eq(caps.hold(wf, nil, "sessions"), false)
  caps.release(wf, { sandboxes = 2 }, "sandboxes")
  caps.release(wf, {}, "sandboxes")
  eq(table.concat(wf.calls, "|"), "acquire sandboxes nil 2|release sandboxes ")
end)

test("quotas: the first one used up, and the use counted", function()
  local day = 86400 * 20000
  local wf = fake_wf(day)
  local quota = { identity = "token:ci", tokens_per_day = 100, cost_usd_per_month = 5 }
  eq(caps.quota_reached(wf, nil), nil)
  eq(#wf.calls, 0, "no quota: no call")
  eq(caps.quota_reached(wf, quota), nil)
  caps.count_quota(wf, quota, 120, 0)
  local q = caps.quota_reached(wf, quota)
  eq(q.quota, "tokens_per_day")
  eq(q.limit, 100)
  eq(q.used, 120)
  eq(q.identity, "token:ci")
  local day_name = caps.counter_name("token:ci", "tokens_per_day", day)
  eq(wf.calls[3], "counter " .. day_name .. " 120", "a cost of 0 is not counted")
end)

test("the gate: slots and rate windows around a model call", function()
  local wf = fake_wf(0)
  local calls = 0
  local function call(opts)
    calls = calls + 1
    if calls == 1 then error({ type = "RateLimited", retry_after = 30 }, 0) end
    return { usage = { input_tokens = 70, output_tokens = 30 } }
  end
  local g = caps.gate(wf, { model_calls = 2, rate = { window = 60, tokens = 1000 } }, "openai", 40)
  eq(g:capped(), true)
  local opts = {}
  local turn = g:turn(opts, call, function() return 100 end)
  eq(turn.usage.input_tokens, 70)
  eq(opts.defer_rate_limit, true, "a 429 comes back at once")
  eq(g.last_tokens, 100)
  eq(table.concat(wf.calls, "|"), table.concat({
    "acquire model-calls openai 2", "rate tokens:openai 1000 60 40 nil nil", "release model-calls openai",
    "rate tokens:openai nil 60 nil 0 30",
    "acquire model-calls openai 2", "rate tokens:openai 1000 60 40 nil nil", "release model-calls openai",
    "rate tokens:openai nil 60 nil 20 nil" }, "|"), "reserves the last turn's tokens, is charged the rest")
  local plain = caps.gate(wf, nil, "openai")
  eq(plain:capped(), false)
  local n0 = #wf.calls
  eq(plain:turn({}, function() return "t" end, function() return 0 end), "t", "no caps: just the call")
  eq(#wf.calls, n0)
  local late = caps.gate(wf, { model_calls = 1 }, "openai")
  eq(late:turn({}, call, function() return 0 end), nil, "out of time waiting: nil, the slot given back")
  eq(wf.calls[#wf.calls], "release model-calls openai")
end)

t.finish()
