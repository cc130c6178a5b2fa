-- one_call.lua: design 1 on the spine (lua/spine.lua, docs/runtime-designs.md):
-- fully specified input and output, one model call, context computed by code.
--
--   prepare (the input checked: lua/types/one_call_input.schema.json)
--   -> context (files, text and the artifacts of earlier sessions, read by
--      code into the model's one message: context.built says what went in)
--   -> model (one call with the result schema; an answer that does not match
--      it is sent back with its violations, at most limits.maxRepairs times)
--   -> validate (the answer, or the session fails naming the violations)
--   -> persist (result.json kept as an artifact, and the workflow's result)
--
--   engine start workflows/one_call.lua --input @examples/one-call.json
--
-- No sandbox and no tools: the model sees only what the code put in front of
-- it. Every step is recorded: a crash resumes after the last completed one,
-- and a replay gives the same result.
--
-- input schema: ../lua/types/one_call_input.schema.json
local wf = require "workflow"
local caps = require "caps"
local json = require "json"
local jsonschema = require "jsonschema"
local spine = require("spine").new(wf)

-- --------------------------------------------------------- prepare --

-- The input checked and resolved (one_call_steps.prepare): the session's state.
local function prepare(input)
  local s = spine.prepared("one_call_steps.prepare", input)
  local prep = s.prep
  wf.emit("session.created", { design = "one_call", objective = input.objective, model = prep.model.name,
    limits = s.limits, identity = input.identity, caps = prep.caps })
  return s
end

-- --------------------------------------------------------- context --

-- The model's one message, computed by code and recorded: the system prompt
-- and the message are the transcript the model call reads (lua/transcript.lua).
local function context(s)
  spine.status("CONTEXT")
  local ctx = spine.in_time(s, wf.activity, "one_call_steps.context",
    { prep = s.prep, objective = s.input.objective },
    spine.step_opts(s, 300, { retry = { max_attempts = 3 } }))
  if not ctx then return end -- the time ran out: the model step says so
  local files, artifacts = 0, 0
  for _, src in ipairs(ctx.sources) do
    if src.kind == "file" then files = files + 1 else artifacts = artifacts + 1 end
  end
  wf.emit("context.built", { bytes = ctx.bytes, files = files, artifacts = artifacts, sources = ctx.sources })
  wf.checkpoint("system", function() return s.prep.system end)
  wf.checkpoint("message", function() return { role = "user", content = ctx.message } end)
end

-- ----------------------------------------------------------- model --

-- The answer's problems against the result schema: nil when it matches.
-- A pure check, in the workflow: the schema was checked with the input.
local function problems_of(s, text)
  local ok, v = pcall(json.decode, (text or ""):match("^%s*(.-)%s*$"))
  if not ok or type(v) ~= "table" then
    local inner = (text or ""):match("```json%s*(.-)%s*```")
    if inner then ok, v = pcall(json.decode, inner) end
  end
  if not ok or type(v) ~= "table" then return nil, { "the answer is not a JSON object" } end
  local valid, errors = jsonschema.validate(s.prep.result_schema, v, "result")
  if not valid then return nil, errors end
  return v
end

-- One model call through the provider's caps (lua/caps.lua), within the
-- session's time; nil when the time ran out waiting for a slot or the rate,
-- or during the call.
local function call_model(s)
  local opts = { response_schema = { name = "result", schema = s.prep.result_schema } }
  return spine.in_time(s, s.gate.turn, s.gate, opts, function(o)
    return wf.activity("model.turn", { model = spine.fork_with("model") or s.prep.model, from_history = true,
      options = o }, spine.step_opts(s, 600, { retry = { max_attempts = 3 } }))
  end, function() return spine.remaining(s) end)
end

-- The call, and its repairs: an answer that does not match the schema goes
-- back with its violations (result.invalid), at most maxRepairs times.
local function model(s)
  s.turns, s.tokens, s.cost, s.repairs, s.outcome = 0, 0, 0, 0, "completed"
  s.prices, s.quota = s.prep.model.prices, s.caps.quota
  s.gate = caps.gate(wf, s.caps, s.provider, 0)
  spine.status("RUNNING")
  while not spine.limit_reached(s) do
    local turn = call_model(s)
    if not turn then spine.over_time(s) return end
    s.turns = s.turns + 1
    local u = turn.usage or {}
    spine.spend(s, u)
    wf.emit("agent.message", { text = turn.text, turn = s.turns, usage = u, tool_calls = 0 })
    local result, problems = problems_of(s, turn.text)
    s.result, s.problems = result, problems
    if result then return end
    wf.emit("result.invalid", { turn = s.turns, problems = problems,
      repair = s.repairs < s.limits.maxRepairs and s.repairs + 1 or nil })
    if s.repairs >= s.limits.maxRepairs then return end
    s.repairs = s.repairs + 1
    spine.status("REPAIRING", { repair = s.repairs, problems = #problems })
    wf.checkpoint("message", function()
      local lines = { "Your answer does not match the result schema:" }
      for _, p in ipairs(problems) do lines[#lines + 1] = "- " .. p end
      lines[#lines + 1] = "Reply with the corrected JSON object only."
      return { role = "user", content = table.concat(lines, "\n") }
    end)
  end
end

-- -------------------------------------------------------- validate --

-- The result, or the session fails: naming the schema's violations after its
-- repairs, or the limit that ended it first.
local function validate(s)
  if s.result then return s.result end
  if s.exceeded then
    error({ type = "LimitExceeded", message = string.format("limit %s reached (%s of %s) before an answer matched "
      .. "the result schema", s.exceeded.limit, tostring(s.exceeded.value), tostring(s.exceeded.max)),
      limit = s.exceeded }, 0)
  end
  spine.status("RESULT_INVALID", { repairs = s.repairs })
  error({ type = "InvalidResult", message = string.format("the answer does not match the result schema after %d "
    .. "repair%s: %s", s.repairs, s.repairs == 1 and "" or "s", table.concat(s.problems or {}, "; ")),
    problems = s.problems, repairs = s.repairs }, 0)
end

-- --------------------------------------------------------- persist --

-- result.json kept as an artifact; the workflow's result.
local function persist(s, result)
  local saved = spine.persist("one_call_steps.persist", { result = result }, { start_to_close = 60,
    retry = { max_attempts = 3 } })
  return { summary = type(result.summary) == "string" and result.summary or nil, result = result,
    outcome = s.outcome, turns = s.turns, repairs = s.repairs, tokens = s.tokens,
    cost_usd = s.prices and s.cost or nil, artifacts = saved }
end

local DESIGN = {
  name = "one_call", prepare = prepare, context = context, model = model, validate = validate, persist = persist,
}

return function(input)
  return spine.run(DESIGN, input)
end
