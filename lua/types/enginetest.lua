---@meta enginetest
-- LuaLS annotations for the API of `engine test` files (lua/enginetest.lua).

---@class EngineTestStubInfo
---@field attempt integer 1 for the first attempt
---@field seq integer the ActivityScheduled event
---@field name string the activity's name
---@field workflow_id string

--- A stub: returns the activity's result, or raises (a string, or a table
--- {type, message, non_retryable}) to fail the attempt; the call's retry
--- policy decides what comes next. Any other value is the result of every call.
---@alias EngineTestStub fun(args: any, info: EngineTestStubInfo): any

---@class EngineTestStartOptions
---@field activities? table<string, EngineTestStub|any> stubs by activity name; an activity without one fails the case
---@field id? string the workflow id (default: generated as `engine start` does)
---@field identity? string the input's identity, as `engine start` sets it (default "local:test")

---@class EngineTestWait
---@field kind "activity"|"timer"|"signal"|"slot"|"release"|"counter"|"rate"|"ratecharge"
---@field name string
---@field seq integer
---@field timeout? number a signal wait's timeout in seconds
---@field seconds? number a timer's length in seconds
---@field remaining? number seconds until the timer or the timeout fires, on the virtual clock
---@field args? any an activity's arguments

---@class EngineTestEvent
---@field seq integer
---@field type string
---@field payload any decoded
---@field time integer epoch ms on the virtual clock

---@class EngineTestCall
---@field name string
---@field args any
---@field attempt integer
---@field seq integer

---@class EngineTestRun
---@field id string
local Run = {}

--- Runs until want holds (a status, a list of them, or a predicate), skipping
--- the clock to each next due timer, retry or timeout; fails the case when the
--- run ends or waits with nothing due first. Returns the status.
---@param want string|string[]|fun(run: EngineTestRun): boolean
---@return string
function Run:wait_until(want) end

--- Runs until the run waits on a signal (name: a Lua pattern, anchored).
---@param name? string
---@return EngineTestWait
function Run:wait_for_signal(name) end

--- Moves the virtual clock forward; what falls due fires, in order.
---@param seconds number
function Run:advance(seconds) end

---@return string status running | waiting | queued | completed | failed | cancelled | stuck
function Run:status() end
---@return any result decoded, nil unless completed
function Run:result() end
---@return table|nil error {type, message, ...} of a failed run
function Run:error() end
--- What the run waits on, or nil.
---@return EngineTestWait|nil
function Run:waits() end
---@param name string
---@param payload? any
function Run:signal(name, payload) end
function Run:cancel() end
---@param type? string
---@return EngineTestEvent[]
function Run:events(type) end
---@return table[] the history of the current run, payloads decoded
function Run:history() end
--- The stub calls made for this run, every attempt.
---@param name? string
---@return EngineTestCall[]
function Run:calls(name) end
--- engine replay's check of the run against its own code or script.
---@param script? string
---@return boolean ok, string report
function Run:replay(script) end

local t = {}

--- Registers a case; it runs with a fresh engine, database and virtual clock.
---@param name string
---@param fn fun()
function t.case(name, fn) end

--- Starts a workflow (script from the current directory, else beside the test file).
---@param script string
---@param input? any
---@param opts? EngineTestStartOptions
---@return EngineTestRun
function t.start(script, input, opts) end

---@param seconds number
function t.advance(seconds) end
--- A stub whose every attempt takes seconds of the virtual clock; past the
--- attempt's start_to_close it ends at that deadline as Timeout.
---@param seconds number
---@param stub any a stub: function(args, info) or a plain value
function t.taking(seconds, stub) end
--- The virtual clock in seconds since the epoch, as wf.now() sees it.
---@return number
function t.now() end
---@param msg string
function t.fail(msg) end
--- Deep equality of plain values.
function t.assert_eq(actual, expected, msg) end
function t.assert_true(value, msg) end
---@param s string
---@param pattern string a Lua pattern
function t.assert_match(s, pattern, msg) end
--- A domain event of the run of that type whose payload contains fields.
---@param run EngineTestRun
---@param type string
---@param fields? table
---@return EngineTestEvent
function t.assert_event(run, type, fields) end
---@param run EngineTestRun
---@param type string
function t.assert_no_event(run, type) end
--- Fails the case unless the run's history replays (against script when given).
---@param run EngineTestRun
---@param script? string
function t.assert_replays(run, script) end

return t
