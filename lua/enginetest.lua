-- enginetest: the API of `engine test` files (engine/worker/wftest.c runs them).
--
--   local t = require "enginetest"
--   t.case("NAME", function() ... end)
--
-- Each case gets a fresh engine over a throwaway database and a virtual
-- clock starting at the wall time; the workflows run on the engine's own
-- workflow VM, store, dispatch and retry code, with their activities stubbed:
--
--   local run = t.start(script, input, { activities = { [name] = stub }, id = ID,
--                                        identity = "local:test" })
--
-- A stub is function(args, info) -> result (info: attempt, seq, name,
-- workflow_id), raising to fail the attempt (a string, or a table {type,
-- message, non_retryable}: the retry policy of the call decides), or a plain
-- value returned every time. t.taking(seconds, stub): each attempt takes that
-- long on the virtual clock; one past its start_to_close ends at that
-- deadline as Timeout, as a real one does. An activity without a stub fails
-- the case. The input's identity is set as `engine start` sets it (opts.identity, else
-- "local:test"). The run object:
--
--   run:wait_until(status)  runs until the status ("waiting", "completed",
--                           "failed", {"completed","failed"}... or a function
--                           (run) -> bool), skipping the clock to each next
--                           timer while it does not hold
--   run:wait_for_signal([name])  the same until it waits on a signal (name: a
--                           Lua pattern); returns run:waits()
--   run:advance(seconds)    the clock forward: what falls due fires, in order
--   run:status(), run:result(), run:error()   (the last two decoded)
--   run:waits()             what it waits on: {kind="signal", name, timeout,
--                           remaining} | {kind="timer", seconds, remaining} | nil
--   run:signal(name, payload), run:cancel()
--   run:events([type]), run:history()   payloads decoded
--   run:calls([name])       the stub calls made: {name, args, attempt, seq}
--   run:replay([script])    ok, report: engine replay's check
--
-- t.advance(seconds), t.now() (seconds, as wf.now() sees it), t.fail(msg),
-- t.assert_eq(actual, expected [, msg]) (deep), t.assert_true(v [, msg]),
-- t.assert_match(s, pattern), t.assert_event(run, type [, fields]) -> event,
-- t.assert_no_event(run, type), t.assert_replays(run [, script]).
-- At the end of a case every run it started must replay its own history.
local core = require "enginetest.core"
local json = require "json"

local M = {}

local file          -- the test file being run, as given
local cases = {}    -- {name, fn, line}
local current       -- the running case: {env, runs, stub_error}

-- ---------------------------------------------------------------- failing

local Failure = {}
Failure.__index = Failure
Failure.__tostring = function(f) return f.message end

local function fail(msg, location) error(setmetatable({ message = msg, location = location }, Failure), 0) end
M.fail = function(msg) fail(tostring(msg)) end

-- The line of the test file nearest the top of the stack, "file:line".
local function test_location(level)
  local want = "@" .. file
  for l = level or 2, 200 do
    local info = debug.getinfo(l, "Sl")
    if not info then break end
    if info.source == want and info.currentline and info.currentline > 0 then
      return info.short_src .. ":" .. info.currentline
    end
  end
  return nil
end

local function describe(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" then
    local ok, s = pcall(json.encode, v)
    if ok then return s end
  end
  return tostring(v)
end

-- ------------------------------------------------------------- assertions

local function deep_eq(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  for k, v in pairs(a) do if not deep_eq(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

-- Whether every field of want is in have (recursively): a partial match.
local function contains(have, want)
  if type(want) ~= "table" then return deep_eq(have, want) end
  if type(have) ~= "table" then return false end
  for k, v in pairs(want) do if not contains(have[k], v) then return false end end
  return true
end

function M.assert_eq(actual, expected, msg)
  if not deep_eq(actual, expected) then
    fail(string.format("%sexpected %s, got %s", msg and msg .. ": " or "", describe(expected), describe(actual)))
  end
end

function M.assert_true(v, msg)
  if not v then fail(msg or ("expected a true value, got " .. describe(v))) end
end

function M.assert_match(s, pattern, msg)
  if type(s) ~= "string" or not s:find(pattern) then
    fail(string.format("%sexpected a string matching %q, got %s", msg and msg .. ": " or "", pattern, describe(s)))
  end
end

-- ---------------------------------------------------------------- clock

local function env()
  if not current then fail("enginetest: call this inside t.case") end
  return current.env
end

-- A stub that failed the case (no stub, a result JSON cannot hold) is
-- reported once the engine is back, at the test's line.
local function check_stubs()
  local err = current and current.stub_error
  if err then
    current.stub_error = nil
    fail(err.message, err.location)
  end
end

-- What drives the engine may not run inside a stub (the engine is in the
-- middle of the attempt): it fails the case instead.
local function driving(what)
  local e = env()
  if current.in_stub then
    local msg = what .. " inside an activity stub: a stub only returns or raises"
    current.stub_error = current.stub_error or { message = msg, location = test_location(2) }
    fail(msg)
  end
  return e
end

local function settle()
  driving("driving the engine"):settle()
  check_stubs()
end

-- Moves the clock to `to` (epoch ms), firing what falls due on the way in order.
local function advance_to(to)
  local e = driving("t.advance")
  settle()
  while true do
    local due = e:next_due()
    if not due or due > to then break end
    if due > e:now() then e:set_now(due) end
    settle()
  end
  if to > e:now() then e:set_now(to) end
  settle()
end

function M.advance(seconds)
  if type(seconds) ~= "number" or seconds < 0 or seconds ~= seconds then
    fail("t.advance: seconds must be a number >= 0, not " .. describe(seconds))
  end
  advance_to(env():now() + math.ceil(seconds * 1000))
end

function M.now() return env():now() / 1000 end

-- ------------------------------------------------------------------ runs

local Run = {}
Run.__index = Run

local function decode(text)
  if text == nil then return nil end
  local ok, v = pcall(json.decode, text)
  if ok then return v end
  return text
end

-- The run an activity's workflow is, or whose child it is (wf.child's
-- derived ids are the parent's and ".N"): a child uses its root's stubs.
local function run_of(wf_id)
  local run = current and current.runs[wf_id]
  if run or not current then return run end
  local best
  for id, r in pairs(current.runs) do
    if wf_id:sub(1, #id + 1) == id .. "." and (not best or #id > #best) then best, run = id, r end
  end
  return run
end

-- A stub whose attempts take seconds of the virtual clock (t.taking).
local Taking = {}

function M.taking(seconds, stub)
  if type(seconds) ~= "number" or seconds <= 0 then fail("t.taking: seconds must be a positive number") end
  if stub == nil then fail("t.taking: no stub to take the time (a function or a value)") end
  return setmetatable({ seconds = seconds, stub = stub }, Taking)
end

-- The stub dispatcher the engine calls for every activity attempt
-- (wftest.c): returns ok, JSON of the result or of the error, and the ms the
-- attempt takes (t.taking; the engine ends it as Timeout past its
-- start_to_close).
local function call_activity(wf_id, seq, attempt, name, payload)
  local run = run_of(wf_id)
  local p = decode(payload) or {}
  local args = type(p) == "table" and p.args or nil
  if args == json.null then args = nil end
  local stubs = run and run._stubs or {}
  local stub = stubs[name]
  if run then
    run._calls[#run._calls + 1] = { name = name, args = args, attempt = attempt, seq = seq }
  end
  if stub == nil then
    local msg = string.format("activity '%s' has no stub (give it one in t.start's activities)", name)
    if current and not current.stub_error then current.stub_error = { message = msg } end
    return false, json.encode({ type = "NotStubbed", message = msg, non_retryable = true })
  end
  local took = 0
  if getmetatable(stub) == Taking then stub, took = stub.stub, math.ceil(stub.seconds * 1000) end
  local ok, res
  if type(stub) == "function" then
    current.in_stub = true
    ok, res = pcall(stub, args, { attempt = attempt, seq = seq, name = name, workflow_id = wf_id })
    current.in_stub = false
  else
    ok, res = true, stub
  end
  if not ok then
    local e = res
    if type(e) ~= "table" then e = { type = "Error", message = tostring(e) } end
    local fine, text = pcall(json.encode, e)
    if not fine then text = json.encode({ type = "Error", message = tostring(e.message or e) }) end
    return false, text, took
  end
  if res == nil then return true, "null", took end
  local fine, text = pcall(json.encode, res)
  if not fine then
    local msg = string.format("the stub of '%s' returns a value JSON cannot hold: %s", name, tostring(text))
    if not current.stub_error then current.stub_error = { message = msg } end
    return false, json.encode({ type = "BadStubResult", message = msg, non_retryable = true })
  end
  return true, text, took
end

-- A workflow script by the path given: from the current directory, else
-- from the test file's.
local function find_script(path)
  local function exists(p)
    local f = io.open(p, "r")
    if f then f:close() end
    return f ~= nil
  end
  if exists(path) then return path end
  local dir = file:match("^(.*)/[^/]*$")
  if dir and path:sub(1, 1) ~= "/" and exists(dir .. "/" .. path) then return dir .. "/" .. path end
  fail(string.format("no workflow script '%s' (looked in the current directory%s)", path,
    dir and " and in " .. dir or ""))
end

function M.start(script, input, opts)
  opts = opts or {}
  if type(script) ~= "string" then fail("t.start: the script path must be a string") end
  if opts.activities ~= nil and type(opts.activities) ~= "table" then
    fail("t.start: activities must be a table of name = stub")
  end
  local e = driving("t.start")
  local path = find_script(script)
  local id = opts.id or core.generate_id(path)
  if current.runs[id] then fail("t.start: a run with id '" .. id .. "' already started in this case") end
  local ok, text = pcall(json.encode, input == nil and {} or input)
  if not ok then fail("t.start: the input is not JSON: " .. tostring(text)) end
  local run = setmetatable({ id = id, script = path, _stubs = opts.activities or {}, _calls = {},
    where = test_location(3) }, Run)
  current.runs[id] = run
  current.order[#current.order + 1] = run
  local err = e:start(id, path, text, opts.identity or "local:test")
  if err then
    current.runs[id] = nil
    table.remove(current.order)
    fail("t.start: " .. err)
  end
  settle()
  return run
end

function Run:status() return (env():status(self.id)) end

function Run:result()
  local _, result = env():status(self.id)
  return decode(result)
end

function Run:error()
  local _, _, err = env():status(self.id)
  return decode(err)
end

local TERMINAL = { completed = true, failed = true, cancelled = true, stuck = true }
local SKIPS_MAX = 100000

local function status_line(run)
  local status, _, err = env():status(run.id)
  local w = run:waits()
  if w then
    status = status .. (w.kind == "activity" and " (an attempt of " .. w.name .. " pending)"
      or w.kind == "signal" and " on signal " .. w.name or " on a " .. w.kind)
  end
  if err then status = status .. ": " .. err end
  return status
end

-- Runs until want holds: a status ("waiting", "completed"...), a list of
-- them, or function(run) -> bool; while it does not, the clock skips to the
-- next due timer, retry or timeout (never past anything due). A run that
-- ends, or waits with nothing due, fails the case saying how it stands.
function Run:wait_until(want, label)
  local test = want
  if type(want) ~= "function" then
    local set = {}
    for _, s in ipairs(type(want) == "table" and want or { want }) do set[s] = true end
    test = function(run) return set[run:status()] end
    label = label or (type(want) == "table" and table.concat(want, " or ") or tostring(want))
  end
  label = label or "the condition"
  local e = driving("run:wait_until")
  settle()
  for _ = 1, SKIPS_MAX do
    if test(self) then return self:status() end
    if TERMINAL[self:status()] then
      fail(string.format("run %s never reaches %s: it ended %s", self.id, label, status_line(self)))
    end
    local due = e:next_due()
    if not due then
      fail(string.format("run %s never reaches %s: it is %s, with nothing due (send it a signal?)", self.id, label,
        status_line(self)))
    end
    if due > e:now() then e:set_now(due) end
    settle()
  end
  fail(string.format("run %s does not reach %s after %d timers", self.id, label, SKIPS_MAX))
end

-- Runs (skipping timers) until the run waits on a signal, named name (a
-- Lua pattern, anchored) when given; returns what run:waits() says.
function Run:wait_for_signal(name)
  self:wait_until(function(run)
    local w = run:waits()
    return w and w.kind == "signal" and (not name or w.name:find("^" .. name .. "$") ~= nil)
  end, name and "a wait for signal " .. name or "a wait for a signal")
  return self:waits()
end

function Run:advance(seconds) M.advance(seconds) end

local COMMANDS = { ActivityScheduled = "activity", TimerStarted = "timer", SignalWaitStarted = "signal",
  SlotRequested = "slot", SlotReleaseRequested = "release", CounterRequested = "counter",
  RateRequested = "rate", RateChargeRequested = "ratecharge" }

-- The command of the run without an outcome yet, or nil.
function Run:waits()
  local open = {}
  for _, ev in ipairs(env():history(self.id)) do
    if COMMANDS[ev.type] then open[ev.seq] = ev
    elseif ev.ref and ev.ref > 0 then open[ev.ref] = nil end
  end
  local last
  for seq, ev in pairs(open) do if not last or seq > last.seq then last = ev end end
  if not last then return nil end
  local kind, p = COMMANDS[last.type], decode(last.payload) or {}
  local now = env():now()
  local w = { kind = kind, name = last.name, seq = last.seq }
  if kind == "signal" then
    w.timeout = p.timeout
    if p.deadline then w.remaining = (p.deadline - now) / 1000 end
  elseif kind == "timer" then
    w.seconds = p.seconds
    if p.fire_at then w.remaining = (p.fire_at - now) / 1000 end
  elseif kind == "activity" then
    w.args = p.args
  end
  return w
end

function Run:signal(name, payload)
  local ok, text = pcall(json.encode, payload == nil and json.null or payload)
  if not ok then fail("run:signal: the payload is not JSON: " .. tostring(text)) end
  local err = driving("run:signal"):signal(self.id, name, text)
  if err then fail("run:signal: " .. err) end
  settle()
end

function Run:cancel()
  local err = driving("run:cancel"):cancel(self.id)
  if err then fail("run:cancel: " .. err) end
  settle()
end

function Run:events(type_)
  local out = {}
  for _, ev in ipairs(env():events(self.id)) do
    if not type_ or ev.type == type_ then
      ev.payload = decode(ev.payload)
      out[#out + 1] = ev
    end
  end
  return out
end

function Run:history()
  local h = env():history(self.id)
  for _, ev in ipairs(h) do ev.payload = decode(ev.payload) end
  return h
end

function Run:calls(name)
  local out = {}
  for _, c in ipairs(self._calls) do if not name or c.name == name then out[#out + 1] = c end end
  return out
end

function Run:replay(script)
  local rc, report = env():replay(self.id, script and find_script(script) or nil)
  return rc == 0, report
end

function M.assert_event(run, type_, fields)
  local seen = run:events(type_)
  for _, ev in ipairs(seen) do
    if fields == nil or contains(ev.payload, fields) then return ev end
  end
  if #seen == 0 then
    local types = {}
    for _, ev in ipairs(run:events()) do types[#types + 1] = ev.type end
    fail(string.format("no %s event (the run emitted: %s)", type_, #types > 0 and table.concat(types, ", ") or "none"))
  end
  local got = {}
  for _, ev in ipairs(seen) do got[#got + 1] = describe(ev.payload) end
  fail(string.format("no %s event with %s (there are: %s)", type_, describe(fields), table.concat(got, "; ")))
end

function M.assert_no_event(run, type_)
  local seen = run:events(type_)
  if #seen > 0 then fail(string.format("a %s event: %s", type_, describe(seen[1].payload))) end
end

function M.assert_replays(run, script)
  local ok, report = run:replay(script)
  if not ok then fail(report) end
end

-- ------------------------------------------------------------------ cases

function M.case(name, fn)
  if type(name) ~= "string" or type(fn) ~= "function" then
    error("t.case(NAME, function() ... end)", 2)
  end
  if current then error("t.case inside a case: cases do not nest", 2) end
  for _, c in ipairs(cases) do
    if c.name == name then error(string.format("two cases named %q", name), 2) end
  end
  cases[#cases + 1] = { name = name, fn = fn, line = test_location(3) or file }
end

-- The message handler: a failure or an error, with where in the test file.
local function on_error(err)
  if getmetatable(err) == Failure then return { message = err.message, location = err.location or test_location(2) } end
  local msg = tostring(err)
  local loc, rest = msg:match("^([^:\n]+:%d+): (.*)$")
  if loc and loc:sub(1, #file) == file then return { message = rest, location = loc } end
  return { message = msg, location = test_location(2) }
end

-- The determinism check: each run the case started replays its history.
local function check_replays()
  for _, run in ipairs(current.order) do
    local rc, report = current.env:replay(run.id)
    if rc ~= 0 then
      return { message = "run " .. run.id .. " does not replay its own history: " .. report, location = run.where }
    end
  end
end

local function run_case(c)
  local t0 = core.clock()
  local ok, e = pcall(core.env, call_activity)
  local why
  if not ok then
    why = { message = tostring(e) }
  else
    current = { env = e, runs = {}, order = {} }
    local fine, res = xpcall(c.fn, on_error)
    if fine and current.stub_error then res, fine = current.stub_error, false end
    if fine then
      local _, unreplayed = xpcall(check_replays, on_error)
      why = unreplayed
    else
      why = res
    end
    current = nil
    e:close()
  end
  return why, core.clock() - t0
end

-- Loads the chunk of the test file (its cases register) and runs them.
-- Returns passed, failed; or nil, message when the file does not load.
function M._run_file(path, chunk, as_json, filter)
  file = path
  local ok, err = xpcall(chunk, function(m) return debug.traceback(tostring(m), 2) end)
  if not ok then return nil, (tostring(err):gsub("\nstack traceback:.*", "")) end
  if #cases == 0 then return nil, "defines no cases (t.case)" end
  local passed, failed = 0, 0
  for _, c in ipairs(cases) do
    if not filter or c.name:find(filter, 1, true) then
      local why, secs = run_case(c)
      if why then failed = failed + 1 else passed = passed + 1 end
      if as_json then
        core.say_json(json.encode({ file = path, case = c.name, ok = why == nil, message = why and why.message or nil,
          location = why and why.location or nil, seconds = math.floor(secs * 1000 + 0.5) / 1000 }))
      elseif why then
        core.say(string.format("FAIL - %s: %s%s", c.name, why.message,
          why.location and " (" .. why.location .. ")" or ""))
      else
        core.say("ok - " .. c.name)
      end
    end
  end
  return passed, failed
end

return M
