---@meta activity
-- LuaLS annotations for the bindings available to activity code.

---@class ActivityInfo
---@field workflow_id string
---@field seq integer the ActivityScheduled event
---@field attempt integer 1 for the first attempt
---@field name string
---@field idempotency_key string "workflow_id/run/seq", stable across attempts, distinct between runs

local activity = {}

--- Reports progress; required within `heartbeat` seconds when that option is set.
function activity.heartbeat() end

--- Suspends this activity without blocking the engine.
---@param seconds number
function activity.sleep(seconds) end

---@return ActivityInfo
function activity.info() end

--- Another workflow of the database: its status, result and error (decoded,
--- nil when none) and its domain events (as `engine events ID --json` prints
--- them). Raises when there is no such workflow. An eval scores its sessions
--- with it (docs/evals.md).
---@param id string
---@return {id: string, status: string, result: any, error: any, events: {session_id: string, seq: integer, type: string, time: integer, payload: any}[]}
function activity.workflow(id) end

--- Whether this attempt's span is exported (tracing on, its trace sampled):
--- build a span's description only then.
---@return boolean
function activity.traced() end

--- Describes this attempt's span in a trace (docs/tracing.md, Spans): a later
--- name, kind or error replaces the earlier, attributes merge key by key. A
--- no-op unless activity.traced().
---@param d {name?: string, kind?: "client"|"internal", attributes?: table<string, any>, error?: {type: string, message?: string}}
function activity.span(d) end

--- The crash tests' fault injection (ENGINE_CRASH="name:n", engine/base/crash.h):
--- the n-th pass of the named point kills the process with SIGKILL. A no-op
--- without ENGINE_CRASH.
---@param name string
function activity.crash_point(name) end

return activity
