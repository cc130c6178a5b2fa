---@meta workflow
-- LuaLS annotations for the workflow API (the module is built into the engine;
-- this file only lets editors complete and check workflow scripts).
-- A workflow script returns `function(input) ... return result end`.

---@class WorkflowError
---@field type string      e.g. "Timeout", "Cancelled", "ActivityNotFound", or the type the activity raised
---@field message string
---@field attempts? integer attempts made, for activity failures

---@class RetryPolicy
---@field initial_interval? number seconds before the first retry (default 1)
---@field backoff? number multiplier per attempt (default 2)
---@field max_interval? number cap on the delay in seconds (default 100)
---@field max_attempts? integer 0 = unlimited (default 5)
---@field non_retryable? string[] error types that are never retried

---@class ActivityOptions
---@field start_to_close? number seconds one attempt may take (default 300)
---@field schedule_to_close? number seconds for all attempts together (default none)
---@field heartbeat? number seconds between activity.heartbeat() calls before the attempt times out
---@field retry? RetryPolicy
---@field span_attributes? table<string, any> added to the spans of its attempts in a trace (telemetry only)

---@class WorkflowInfo
---@field id string
---@field run integer
---@field replaying boolean
---@field history_length integer events of this run up to this point of the script (the same live and on replay)

local workflow = {}

--- Runs activity "module.function" (at least once) and returns its result. The
--- result is recorded; on replay it is returned without running the activity.
--- Failures raise a WorkflowError (catch with pcall).
---@param name string "module.function", module found beside the workflow or in lua/activities
---@param args? table JSON-encodable arguments
---@param options? ActivityOptions
---@return any
function workflow.activity(name, args, options) end

--- Waits for signal `name` (signals sent earlier are buffered). Returns its
--- payload, or nil, "timeout" when options.timeout seconds pass first.
---@param name string
---@param options? {timeout?: number}
---@return any payload
---@return "timeout"|nil
function workflow.wait_signal(name, options) end

--- A durable timer: fires after `seconds`, even across restarts.
---@param seconds number
function workflow.sleep(seconds) end

--- Runs fn once and records its (JSON-encodable) value; replays return it.
--- fn must not call workflow primitives. Its wf.random/wf.uuid draws come from
--- a stream of their own and do not change the draws outside it. If fn raises,
--- nothing is recorded and a replay runs it again.
---@generic T
---@param name string
---@param fn fun(): T
---@return T
function workflow.checkpoint(name, fn) end

--- Appends a domain event (session_id, seq, type, time, payload) exactly once per run.
---@param type string e.g. "agent.message"
---@param payload? table
function workflow.emit(type, payload) end

--- true when this point is reached by new code (records a marker); false when
--- replaying a run that passed this point before the patch existed.
---@param id string
---@return boolean
function workflow.patched(id) end

--- Ends this run and starts a new one with `input` and an empty history.
---@param input? table
function workflow.continue_as_new(input) end

--- Deterministic time in seconds (the time of the last recorded event).
---@return number
function workflow.now() end

--- Deterministic random, like math.random, seeded from the log (the run's
--- seed); draws inside a checkpoint function do not move the run's sequence.
---@param m? integer
---@param n? integer
---@return number
function workflow.random(m, n) end

--- Deterministic UUID v4 string.
---@return string
function workflow.uuid() end

---@return WorkflowInfo
function workflow.info() end

---@return boolean
function workflow.is_replaying() end

--- How the run's span in a trace describes it (telemetry only: nothing is
--- recorded; the last call wins). docs/tracing.md, Spans
---@param d {name?: string, attributes?: table<string, any>}
function workflow.span(d) end

--- A command started without waiting (or a wf.spawn coroutine): settles with
--- its outcome, in the order the log records outcomes.
---@class Future
local Future = {}

--- Waits until the future settles; returns what the blocking form returns
--- (wf.activity's result, wf.wait_signal's payload or nil, "timeout", ...)
--- or raises its error (a WorkflowError, Cancelled, a wf.spawn's error).
---@return any ...
function Future:wait() end

--- Whether it has settled (never waits).
---@return boolean
function Future:ready() end

--- wf.activity without waiting: recorded at once; activities started
--- together run at once.
---@param name string
---@param args? table
---@param options? ActivityOptions
---@return Future
function workflow.start_activity(name, args, options) end

--- wf.sleep without waiting.
---@param seconds number
---@return Future
function workflow.start_timer(seconds) end

--- wf.wait_signal without waiting.
---@param name string
---@param options? {timeout?: number}
---@return Future
function workflow.start_wait_signal(name, options) end

---@class ChildOptions
---@field id? string the child's workflow id (default: this workflow's id and a number, `P.1`)
---@field parent_close? "terminate"|"request_cancel"|"abandon" what this run's end does to the child still running (default terminate)
---@field timeout? number seconds: past them the wait raises Timeout and the child is cancelled
---@field max_depth? integer the child's depth at most (a root is 0), below the engine's child_max_depth: deeper raises ChildLimit
---@field max_fanout? integer this workflow's children running at once at most, the new one included, below the engine's child_max_fanout

--- Starts a child workflow and waits for it: its result, or raises its
--- error {type, message, child}. `script` is a path beside this script
--- (".lua" added to a bare name) or an absolute one. A start over the depth
--- or fan-out limit raises ChildLimit {type, message, child, limit, max,
--- depth or running}, and no child is created.
---@param script string
---@param input? table
---@param options? ChildOptions
---@return any
function workflow.child(script, input, options) end

--- wf.child without waiting.
---@param script string
---@param input? table
---@param options? ChildOptions
---@return Future
function workflow.start_child(script, input, options) end

--- Waits until every future settled: their first values in list order, or
--- the first error in list order (raised once all have settled).
---@param futures Future[]
---@return any[]
function workflow.all(futures) end

--- Waits until one settles: its index and values (the first to settle).
---@param futures Future[]
---@return integer index
---@return any ...
function workflow.any(futures) end

--- Runs fn(...) as a durable coroutine of the workflow, from when the caller
--- next waits; it may call every primitive. Errors it raises are raised by
--- waiting on its future.
---@param fn fun(...): any
---@param ... any
---@return Future
function workflow.spawn(fn, ...) end

return workflow
