-- eval_suite.lua: an eval run (`engine eval SUITE`; docs/evals.md).
--
--   load the suite (recorded) -> each case as a child session, several at
--   once -> score it (recorded) -> suite_result.json -> the result
--
-- Every case is a durable session of its own, a child of this run (id
-- RUN.CASE), and every step here is recorded: after a kill -9 the engine
-- replays this script, so a case that ended is never run or scored again,
-- and one in flight carries on where its own log stops.
--
-- input: {suite = the suite's folder (absolute), live = bool,
--         baseline = {run, result} | nil}
--     or, for engine eval --fork ID --at SEQ --variants FILE:
--        {mode = "variants", fork = {source, at | turn}, variants = {{name,
--         session = the fork's id}}, suite = folder | nil, case = name | nil}
local wf = require "workflow"
local report = require "eval.report"

local function child_error(e)
  if type(e) == "table" then return { type = e.type, message = e.message } end
  return { type = "Error", message = tostring(e) }
end

-- A case's scores once its session ended: the checks, then each
-- model-graded scorer that applies, each its own activity. Its row.
local function score(suite, case, session, ok, value, order, wall)
  local scored = wf.activity("eval.score", { dir = suite.dir, scorers = suite.scorers, case = case, session = session,
    ok = ok, value = value, wall_seconds = wall }, { start_to_close = 120, retry = { max_attempts = 3 } })
  local scores = scored.scores
  for _, g in ipairs(scored.graders or {}) do
    local entry
    for _, s in ipairs(suite.scorers) do if s.name == g.scorer then entry = s end end
    local gok, v = pcall(wf.activity, "eval.grade", { scorer = entry, model = g.model, prompt = g.prompt, case = case },
      { start_to_close = 300, retry = { max_attempts = 3 } })
    scores[g.scorer] = gok and v or { result = "error", detail = type(v) == "table" and v.message or tostring(v) }
  end
  local row = report.case_row(case, session, ok, value, scores, order, wall)
  wf.emit("eval.case.scored", { case = case.name, session = session, pass = row.pass, failed = row.failed,
    status = row.status, turns = row.turns, tokens = row.tokens, cost_usd = row.cost_usd, wall_seconds = wall })
  return row
end

local function seconds_since(t0) return math.floor((wf.now() - t0) * 1000 + 0.5) / 1000 end

-- One case: its session, a child of this run started as whoever started
-- the eval (its identity, for the policies; what it holds, as its
-- sessions' starter: docs/grants.md), then its scores.
local function run_case(suite, case, order, identity, starter)
  local session = wf.info().id .. "." .. case.name
  wf.emit("eval.case.started", { case = case.name, session = session })
  local input = {}
  for k, v in pairs(case.input) do input[k] = v end
  input.identity = identity or input.identity
  -- an eval started before grants passed none (its children's inputs stay as recorded)
  if starter ~= nil then input.starterGrants = starter end
  local t0 = wf.now()
  local ok, value = pcall(wf.child, suite.workflow, input,
    { id = session, parent_close = "request_cancel", timeout = case.timeout })
  if not ok then value = child_error(value) end
  return score(suite, case, session, ok, value, order, seconds_since(t0))
end

-- One variant (engine eval --fork): its fork, made by the command before
-- this run started, waited for; then scored like a case, with the case the
-- variants file names (or none: its numbers only).
local function run_variant(suite, case, v, order)
  wf.emit("eval.case.started", { case = v.name, session = v.session, variant = true })
  local t0 = wf.now()
  local w = wf.activity("eval.wait", { session = v.session }, { start_to_close = 86400, heartbeat = 60 })
  local ok = w.status == "completed"
  local vcase = { name = v.name, description = case and case.description, expect = case and case.expect or {},
    input = case and case.input, scorers = case and case.scorers }
  return score(suite, vcase, v.session, ok, ok and w.result or w.error, order, seconds_since(t0))
end

-- The suite of a variants run: the suite the variants file names (its
-- scorers, and the case whose expectations score them), or none.
local function variants_suite(input)
  if not input.suite then return { name = "fork of " .. input.fork.source, scorers = {}, concurrency = 8, live = false }, nil end
  local suite = wf.activity("eval.load", { dir = input.suite }, { start_to_close = 60, retry = { max_attempts = 2 } })
  for _, c in ipairs(suite.cases) do
    if c.name == input.case then return suite, c end
  end
  error({ type = "InvalidInput", message = "the suite " .. input.suite .. " has no case " .. tostring(input.case) }, 0)
end

return function(input)
  local t0 = wf.now()
  local variants = input.mode == "variants"
  local suite, vcase
  if variants then
    suite, vcase = variants_suite(input)
    suite.cases = {}
    for i, v in ipairs(input.variants) do suite.cases[i] = v end
  else
    suite = wf.activity("eval.load", { dir = input.suite, live = input.live == true },
      { start_to_close = 60, retry = { max_attempts = 2 } })
  end
  local order = {}
  for i, s in ipairs(suite.scorers) do order[i] = s.name end
  wf.emit("eval.started", { suite = suite.name, dir = suite.dir, cases = #suite.cases, scorers = order,
    live = suite.live, concurrency = suite.concurrency, baseline = input.baseline and input.baseline.run or nil,
    fork = input.fork })
  -- lanes: each takes the next case until none is left, so at most
  -- `concurrency` sessions run at once (the workflow's coroutines run one at
  -- a time, in a fixed order: the same cases go the same way on replay)
  local rows, next_case = {}, 0
  local function lane()
    while true do
      next_case = next_case + 1
      local i = next_case
      if i > #suite.cases then return true end
      if variants then rows[i] = run_variant(suite, vcase, suite.cases[i], order)
      else rows[i] = run_case(suite, suite.cases[i], order, input.identity, input.starterGrants) end
    end
  end
  local lanes = {}
  for k = 1, math.min(suite.concurrency, #suite.cases) do lanes[k] = wf.spawn(lane) end
  wf.all(lanes)
  local result = report.build(wf.info().id, suite, rows, input.baseline, seconds_since(t0))
  if variants then result.fork, result.case = input.fork, input.case end
  local art = wf.activity("eval.save", { result = result }, { retry = { max_attempts = 5 } })
  wf.emit("artifact.saved", art)
  result.artifact = art
  wf.emit("eval.completed", { passed = result.totals.passed, failed = result.totals.failed,
    regressions = result.baseline and #result.baseline.regressions or nil })
  return result
end
