-- Context compaction and bounded runs for the agent session
-- (workflows/agent_session.lua). Pure functions shared by the workflow and
-- its session.compact activity, and the workflow-side state (M.session).
--
-- The estimate of the transcript the next turn sends, in tokens, is the larger
-- of (a) the prompt tokens the provider reported for the last turn, plus that
-- turn's output tokens, plus bytes/4 of every message added since, and (b)
-- bytes/4 of the whole transcript (system prompt, tool definitions, messages),
-- which covers a provider that reports no usage. Before a turn whose estimate
-- reaches threshold x model.contextTokens (0.8 unless compaction.threshold),
-- the older turns are summarised by one model call (the session.compact
-- activity: recorded, so a replay gets the same summary) and the model sees
-- [task + summary, the last keepTurns turns verbatim]. A provider's
-- context-length error (ContextTooLong) compacts once and retries the turn.
--
-- A run whose history reaches compaction.runEvents events continues as new
-- between two turns, carrying what the session needs: the transcript, the
-- counters, the sandbox, the deadline. The domain event stream is the
-- session's, so it goes on across runs.
local M = {}

M.THRESHOLD = 0.8      -- of contextTokens
M.KEEP_TURNS = 4       -- the most recent turns kept verbatim
M.RUN_EVENTS = 5000    -- history events per run before continuing as new
M.KEEP_SHARE = 0.4     -- the kept turns take at most this share of contextTokens
M.FOLD_BYTES = 400000  -- what the summariser reads at most without contextTokens
M.CARRY_BYTES = 1000000 -- a larger transcript is compacted before it is carried
M.SUMMARY_HEADER = "[Summary of the earlier part of this session, written when its context was compacted]\n"
M.SUMMARISER = table.concat({
  "You are compacting the context of an agent session: the agent continues its task from your summary",
  "and the most recent turns, and will not see the turns you summarise again. Write a concise summary of",
  "what was done and found: files read or written, commands run and their outcomes, decisions, open",
  "questions, and what remains to do. Keep exact names, paths, numbers and error messages that matter.",
  "Answer with the summary only, as plain text.",
}, " ")

local function is_int(v) return math.type(v) == "integer" or (type(v) == "number" and v == math.floor(v)) end

-- The compaction options of a session: the defaults above, then
-- model.contextTokens and the input's compaction {threshold=, keepTurns=,
-- runEvents=}. session.prepare has checked them against the input's schema
-- (lua/types/agent_session_input.schema.json, which names a bad value); a
-- value that is not what the schema asks for is left out here.
function M.options(model, opts)
  local out = { threshold = M.THRESHOLD, keep_turns = M.KEEP_TURNS, run_events = M.RUN_EVENTS }
  local ct = type(model) == "table" and model.contextTokens or nil
  if type(ct) == "number" and is_int(ct) then out.context_tokens = math.tointeger(ct) end
  if type(opts) ~= "table" then return out end
  if type(opts.threshold) == "number" then out.threshold = opts.threshold end
  if type(opts.keepTurns) == "number" and is_int(opts.keepTurns) then out.keep_turns = math.tointeger(opts.keepTurns) end
  if type(opts.runEvents) == "number" and is_int(opts.runEvents) then out.run_events = math.tointeger(opts.runEvents) end
  return out
end

-- The bytes a message puts in the transcript: its text and its tool calls.
function M.bytes(m)
  if type(m) ~= "table" then return #tostring(m or "") end
  local n = #tostring(m.content or "") + 16
  for _, c in ipairs(type(m.tool_calls) == "table" and m.tool_calls or {}) do
    n = n + #tostring(c.name or "") + #tostring(c.arguments_json or "") + 16
  end
  return n
end

local function tokens_of(bytes) return (bytes + 3) // 4 end
M.tokens_of = tokens_of

-- The bytes of the system prompt and the tool definitions (sent every turn).
function M.fixed_bytes(system, tools)
  local n = #tostring(system or "")
  if type(tools) == "table" and next(tools) ~= nil then n = n + #require("json").encode(tools) end
  return n
end

function M.transcript_bytes(system, tools, messages)
  local n = M.fixed_bytes(system, tools)
  for _, m in ipairs(messages) do n = n + M.bytes(m) end
  return n
end

-- Splits a transcript (messages[1] is the task) into turn groups: a group
-- starts at every message that is not a tool result, so a tool call is never
-- split from its results. Returns the index where the kept part starts
-- (messages first..#messages stay verbatim; 2..first-1 are folded), or nil
-- when there is nothing to fold. At most keep_turns groups are kept, within
-- keep_bytes, and at least one group is folded.
function M.split(messages, keep_turns, keep_bytes)
  local starts = {}
  for i = 2, #messages do
    if messages[i].role ~= "tool" or #starts == 0 then starts[#starts + 1] = i end
  end
  if #starts == 0 then return nil end
  local keep = math.min(keep_turns, #starts - 1)
  while keep > 0 do
    local first, bytes = starts[#starts - keep + 1], 0
    for i = first, #messages do bytes = bytes + M.bytes(messages[i]) end
    if not keep_bytes or bytes <= keep_bytes then break end
    keep = keep - 1
  end
  return keep > 0 and starts[#starts - keep + 1] or #messages + 1
end

-- What the summariser reads: the task, the summary of an earlier compaction,
-- and the folded messages (each tool result cut to 2,000 bytes; the oldest
-- left out when the whole is over max_bytes).
function M.render(task, previous, folded, max_bytes)
  local parts = {}
  for i, m in ipairs(folded) do
    local text
    if m.role == "tool" then
      local c = tostring(m.content or "")
      if #c > 2000 then c = c:sub(1, 2000) .. " [... cut]" end
      text = string.format("[tool result %s]\n%s", tostring(m.name or m.tool_call_id or ""), c)
    else
      text = string.format("[%s]\n%s", tostring(m.role), tostring(m.content or ""))
      for _, c in ipairs(type(m.tool_calls) == "table" and m.tool_calls or {}) do
        text = text .. string.format("\n[calls %s %s]", tostring(c.name), tostring(c.arguments_json or ""):sub(1, 2000))
      end
    end
    parts[i] = text
  end
  local head = "The task:\n" .. tostring(task) .. "\n\n"
  if previous and previous ~= "" then head = head .. "The summary of the part before:\n" .. previous .. "\n\n" end
  head = head .. "The conversation to summarise:\n"
  local total, from = #head, #parts + 1
  while from > 1 and total + #parts[from - 1] + 2 <= max_bytes do
    from = from - 1
    total = total + #parts[from] + 2
  end
  if from > 1 then head = head .. string.format("[... %d earlier messages left out ...]\n\n", from - 1) end
  return head .. table.concat(parts, "\n\n", from)
end

-- ------------------------------------------------------- workflow side --

-- The state a continued run picks up (the input wf.continue_as_new gave it),
-- or nil on a session's first run. Only a later run of this workflow is
-- given one: a first run's input with this field is refused by prepare.
M.CARRIED = "continuedSession"
function M.carried(wf, input)
  if type(input) == "table" and type(input[M.CARRIED]) == "table" and wf.info().run > 1 then
    return input[M.CARRIED]
  end
  return nil
end

local function context_error(e) return type(e) == "table" and e.type == "ContextTooLong" end

local Session = {}
Session.__index = Session

-- args: {wf=, prep=, model_options=, state= (carried), on_usage=function(usage),
-- remaining=function() -> the session's seconds left}
function M.session(args)
  local prep = args.prep
  local s = setmetatable({ wf = args.wf, prep = prep, opts = prep.compaction or M.options(prep.model),
    model_options = args.model_options, on_usage = args.on_usage, remaining = args.remaining }, Session)
  local st = args.state
  if st then
    s.prompt, s.added, s.total, s.fresh = st.prompt, st.added, st.total, false
  else
    s.prompt, s.added, s.fresh = 0, 0, false
    s.total = M.fixed_bytes(prep.system, prep.tool_definitions) + M.bytes(prep.first_message)
  end
  return s
end

-- A message of this text (or message table) joined the transcript.
function Session:add(m)
  local n = type(m) == "table" and M.bytes(m) or #tostring(m or "") + 16
  self.added, self.total, self.fresh = self.added + n, self.total + n, false
end

-- A model turn came back: the provider's count of what it read and wrote.
function Session:turned(turn)
  local u = turn.usage or {}
  local msg = { content = turn.text, tool_calls = turn.tool_calls }
  self.total = self.total + M.bytes(msg)
  self.prompt = (tonumber(u.input_tokens) or 0) + (tonumber(u.output_tokens) or 0)
  self.added, self.fresh = 0, false
end

function Session:estimate()
  return math.max(self.prompt + tokens_of(self.added), tokens_of(self.total))
end

-- Compacts now (reason "threshold", "context_length" or "carry"); false when
-- there was nothing to fold.
function Session:compact(reason)
  local wf, before = self.wf, self:estimate()
  local r = wf.activity("session.compact", { model = self.prep.model, options = self.model_options,
    keep_turns = self.opts.keep_turns, context_tokens = self.opts.context_tokens, tokens_before = before,
    reason = reason }, { start_to_close = math.max(1, math.min(600, self.remaining and self.remaining() or 600)),
    retry = { max_attempts = 3 } })
  if r.skipped then return false end
  if self.on_usage then self.on_usage(r.usage or {}) end
  self.prompt, self.added, self.total, self.fresh = 0, 0, r.bytes_after, true
  wf.emit("context.compacted", { reason = reason, tokens_before = before, tokens_after = r.tokens_after,
    tokens_saved = math.max(0, before - r.tokens_after), turns_folded = r.turns_folded,
    messages_folded = r.messages_folded, messages_kept = r.messages_kept, context_tokens = self.opts.context_tokens })
  return true
end

-- Before a turn: compacts when the estimate reaches the threshold.
function Session:before_turn()
  local ct = self.opts.context_tokens
  if ct and not self.fresh and self:estimate() >= self.opts.threshold * ct then self:compact("threshold") end
end

-- Runs one model turn (call() -> turn). A context-length error compacts and
-- tries once more; one right after a compaction ends the session.
function Session:turn(call)
  local ok, turn = pcall(call)
  if ok then
    if turn then self:turned(turn) end
    return turn
  end
  if not context_error(turn) then error(turn, 0) end
  local function too_long(why)
    error({ type = "ContextTooLong", message = "the model's context is too small for this session: " .. why ..
      " (the provider said: " .. tostring(turn.message) .. ")" }, 0)
  end
  if self.fresh then too_long("the transcript was just compacted and is still too long") end
  if not self:compact("context_length") then too_long("there is nothing left to compact") end
  ok, turn = pcall(call)
  if ok then
    if turn then self:turned(turn) end
    return turn
  end
  if context_error(turn) then too_long("the transcript is still too long after compaction") end
  error(turn, 0)
end

-- Between two turns: when this run's history has reached runEvents, ends the
-- run and continues as new with carry (the workflow's own state) plus the
-- transcript. Returns only when the run goes on.
function Session:maybe_continue(carry)
  local wf = self.wf
  if wf.info().history_length < self.opts.run_events then return end
  if self.total > M.CARRY_BYTES then self:compact("carry") end
  local t = wf.activity("session.transcript", {}, { start_to_close = 120, retry = { max_attempts = 3 } })
  carry.transcript = t
  carry.context = { prompt = self.prompt, added = self.added, total = self.total }
  wf.continue_as_new({ [M.CARRIED] = carry })
end

-- A continued run's first step: the carried transcript, recorded where the
-- model turns read it (lua/transcript.lua).
function M.resume(wf, carried)
  wf.checkpoint("transcript", function() return carried.transcript end)
end

return M
