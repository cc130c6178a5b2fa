-- The session transcript, rebuilt from the workflow's history so that every
-- message is stored once: a model turn is the result of its model.turn
-- activity, a tool result the result of its session.tool activity, and every
-- other message (the task, calls that did not run) a checkpoint named
-- "message"; the system prompt and the tool definitions come from the
-- session.prepare result. A model-turn step reads the history
-- up to itself (activity.history) instead of carrying the whole prompt in its
-- arguments, so a long session's history grows linearly.
--
-- A compaction (lua/compaction.lua) replaces the messages so far: the result
-- of a session.compact activity, or a continued run's "transcript"
-- checkpoint, is the transcript from there on.
local M = {}

local function copy(list)
  local out = {}
  for i, m in ipairs(list) do out[i] = m end
  return out
end

-- The transcript as events build it: apply(st, events) takes them in order.
local function new_state()
  -- call_of/abandoned: a model call an interrupt abandoned ("abandoned"
  -- {call}): its answer, when it comes, is not part of the conversation
  return { messages = {}, call_of = {}, abandoned = {} }
end

local function apply(st, events)
  for _, e in ipairs(events) do
    if e.type == "ActivityScheduled" and e.name == "model.turn" and type(e.payload) == "table"
        and type(e.payload.args) == "table" then
      st.call_of[e.seq] = e.payload.args.call
    elseif e.type == "CheckpointRecorded" and e.name == "abandoned" and type(e.payload) == "table" then
      st.abandoned[e.payload.call or false] = true
    elseif e.type == "ActivityCompleted" and e.name == "model.turn" and st.call_of[e.ref] ~= nil
        and st.abandoned[st.call_of[e.ref]] then
      -- left out
    elseif e.type == "CheckpointRecorded" then
      if e.name == "message" and type(e.payload) == "table" then
        st.messages[#st.messages + 1] = e.payload
      elseif e.name == "transcript" and type(e.payload) == "table" then
        local t = e.payload
        st.system, st.tools, st.messages = t.system, t.tools, copy(t.messages or {})
        st.compacted = type(t.compacted) == "table" and t.compacted or nil
      elseif e.name == "system" then
        st.system = e.payload
      elseif e.name == "tools" then
        st.tools = e.payload
      end
    elseif e.type == "ActivityCompleted" and e.name == "session.prepare" and type(e.payload) == "table" then
      st.system, st.tools = e.payload.system, e.payload.tool_definitions
    elseif e.type == "ActivityCompleted" and e.name == "session.compact" and type(e.payload) == "table"
        and type(e.payload.messages) == "table" then
      st.messages = copy(e.payload.messages)
      st.compacted = { task = e.payload.task, summary = e.payload.summary }
    elseif e.type == "ActivityCompleted" and e.name == "session.tool" and type(e.payload) == "table"
        and not e.payload.sandbox_lost then -- a call that found no sandbox ran again in a new one
      local r = e.payload
      st.messages[#st.messages + 1] = { role = "tool", tool_call_id = r.tool_call_id, name = r.tool,
        content = r.content or "" }
    elseif e.type == "ActivityCompleted" and e.name == "model.turn" and type(e.payload) == "table" then
      local t = e.payload
      local calls = {}
      for i, c in ipairs(type(t.tool_calls) == "table" and t.tool_calls or {}) do
        calls[i] = { id = c.id, name = c.name, arguments = c.arguments, arguments_json = c.arguments_json }
      end
      st.messages[#st.messages + 1] = { role = "assistant", content = t.text or "",
        tool_calls = #calls > 0 and calls or nil }
    end
  end
end

local function finish(st)
  local tools = st.tools
  if type(tools) ~= "table" or next(tools) == nil then tools = nil end
  return st.system, tools, M.in_call_order(copy(st.messages)), st.compacted
end

-- events: activity.history() output. Returns system, tools, messages, and
-- the last compaction ({task=, summary=}, nil when there was none).
function M.from_history(events)
  local st = new_state()
  apply(st, events)
  return finish(st)
end

-- The same for the calling step, read incrementally: a model turn of a long
-- session would otherwise read and decode the whole run again (quadratic in
-- the run's length). The transcript so far is kept per run in this worker's
-- activity VM; each step reads only the events after the last one it saw
-- (read(from, to): activity.history). The run's log is append-only; the
-- event the cache ended at is read again and compared, so a log that is not
-- what the cache saw starts over. key: the run ("id/run"), upto: the last seq.
local cache, cached_keys, CACHE_RUNS = {}, {}, 64

local function same(a, b)
  return a and b and a.seq == b.seq and a.type == b.type and a.name == b.name and a.ref == b.ref
end

function M.for_step(read, key, upto)
  local c = cache[key]
  if c and (c.upto > upto or (c.upto > 0 and not same((read(c.upto, c.upto) or {})[1], c.last))) then c = nil end
  if not c then
    c = { st = new_state(), upto = 0 }
    if not cache[key] then
      cached_keys[#cached_keys + 1] = key
      if #cached_keys > CACHE_RUNS then cache[table.remove(cached_keys, 1)] = nil end
    end
    cache[key] = c
  end
  if upto > c.upto then
    local events = read(c.upto + 1, upto)
    apply(c.st, events)
    local e = events[#events]
    if e then c.last = { seq = e.seq, type = e.type, name = e.name, ref = e.ref } end
    c.upto = upto
  end
  return finish(c.st)
end

-- Calls of one turn run together and finish in any order: the results after
-- an assistant message go back in the order of its calls (a stable sort;
-- results of no call of it keep their place after them).
function M.in_call_order(messages)
  local i = 1
  while i <= #messages do
    local m = messages[i]
    if m.role == "assistant" and m.tool_calls then
      local order = {}
      for k, c in ipairs(m.tool_calls) do order[c.id] = order[c.id] or k end
      local j = i + 1
      while messages[j] and messages[j].role == "tool" do j = j + 1 end
      local run = {}
      for k = i + 1, j - 1 do run[#run + 1] = { m = messages[k], at = k } end
      local n = #m.tool_calls
      table.sort(run, function(a, b)
        local ka, kb = order[a.m.tool_call_id] or n + a.at, order[b.m.tool_call_id] or n + b.at
        if ka ~= kb then return ka < kb end
        return a.at < b.at
      end)
      for k, r in ipairs(run) do messages[i + k] = r.m end
      i = j
    else
      i = i + 1
    end
  end
  return messages
end

return M
