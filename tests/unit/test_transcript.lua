-- Tests for lua/transcript.lua in plain lua5.4: the transcript a model turn
-- sees, rebuilt from the session's history: results in call order whatever
-- order they finished in, an abandoned call's late answer left out, a
-- compaction replacing what came before, and the incremental reading
-- (for_step) giving at every step exactly what a full read gives.
--   lua5.4 tests/unit/test_transcript.lua   (ctest runs it)
local script = arg and arg[0] or "tests/unit/test_transcript.lua"
local repo = script:match("^(.*)/tests/unit/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. package.path
local T = require "transcript"

local t = dofile(repo .. "/tests/lua_test.lua")
local eq, test = t.eq, t.test

-- a session's log: prepare, then turns with two tool calls that finish in reverse order
local function log(turns)
  local ev, seq = {}, 0
  local function add(e) seq = seq + 1; e.seq = seq; ev[#ev + 1] = e; return seq end
  add({ type = "WorkflowStarted" })
  local p = add({ type = "ActivityScheduled", name = "session.prepare", payload = { args = {} } })
  add({ type = "ActivityCompleted", name = "session.prepare", ref = p,
    payload = { system = "sys", tool_definitions = { { name = "read_file" } } } })
  add({ type = "CheckpointRecorded", name = "message", payload = { role = "user", content = "task" } })
  for i = 1, turns do
    local m = add({ type = "ActivityScheduled", name = "model.turn", payload = { args = { call = i } } })
    add({ type = "ActivityCompleted", name = "model.turn", ref = m, payload = { text = "t" .. i,
      tool_calls = { { id = i .. "a", name = "read_file" }, { id = i .. "b", name = "read_file" } } } })
    local a = add({ type = "ActivityScheduled", name = "session.tool", payload = { args = {} } })
    local b = add({ type = "ActivityScheduled", name = "session.tool", payload = { args = {} } })
    add({ type = "ActivityCompleted", name = "session.tool", ref = b, payload = { tool_call_id = i .. "b", content = "B" } })
    add({ type = "ActivityCompleted", name = "session.tool", ref = a, payload = { tool_call_id = i .. "a", content = "A" } })
  end
  return ev
end

local function reader(ev)
  local reads = 0
  return function(from, to)
    local out = {}
    for _, e in ipairs(ev) do if e.seq >= from and e.seq <= to then out[#out + 1] = e; reads = reads + 1 end end
    return out
  end, function() return reads end
end

local function shape(system, tools, messages)
  local out = { tostring(system), tools and #tools or 0 }
  for _, m in ipairs(messages) do out[#out + 1] = m.role .. ":" .. (m.tool_call_id or m.content or "") end
  return table.concat(out, " ")
end

test("results go back in call order", function()
  eq(shape(T.from_history(log(1))), "sys 1 user:task assistant:t1 tool:1a tool:1b")
end)

test("for_step equals a full read at every step, reading each event once", function()
  local ev = log(20)
  local read, reads = reader(ev)
  for upto = 1, #ev do
    local full = { T.from_history((reader(ev))(1, upto)) }
    eq(shape(T.for_step(read, "w/1", upto)), shape(table.unpack(full)), "at " .. upto)
  end
  -- each step reads its new events plus the one it ended at, never the whole log again
  eq(reads() <= 2 * #ev, true, "events read: " .. reads())
end)

test("a log that is not what the cache saw starts over", function()
  local ev = log(2)
  local read = reader(ev)
  T.for_step(read, "w/2", #ev)
  local other = log(3)
  other[#ev].type = "EventEmitted" -- the event the cache ended at differs
  eq(shape(T.for_step(reader(other), "w/2", #other)), shape(T.from_history(other)))
  eq(shape(T.for_step(reader(ev), "w/2", 4)), shape(T.from_history((reader(ev))(1, 4))), "an earlier point")
end)

test("an abandoned call's late answer is left out; a compaction replaces what came before", function()
  local ev = log(1)
  local n = #ev
  ev[#ev + 1] = { seq = n + 1, type = "ActivityScheduled", name = "model.turn", payload = { args = { call = 2 } } }
  ev[#ev + 1] = { seq = n + 2, type = "CheckpointRecorded", name = "abandoned", payload = { call = 2 } }
  ev[#ev + 1] = { seq = n + 3, type = "ActivityCompleted", name = "model.turn", ref = n + 1, payload = { text = "late" } }
  eq(shape(T.from_history(ev)), "sys 1 user:task assistant:t1 tool:1a tool:1b")
  ev[#ev + 1] = { seq = n + 4, type = "ActivityCompleted", name = "session.compact", ref = 0,
    payload = { messages = { { role = "user", content = "summary" } }, task = "task", summary = "s" } }
  local system, tools, messages, compacted = T.from_history(ev)
  eq(shape(system, tools, messages), "sys 1 user:summary")
  eq(compacted.summary, "s")
end)

t.finish()
