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
local wf = require "workflow"
local report = require "eval.report"

local function child_error(e)
  if type(e) == "table" then return { type = e.type, message = e.message } end
  return { type = "Error", message = tostring(e) }
end

-- One case: its session, then its scores (the checks, then each
-- model-graded scorer that applies, each its own activity).
local function run_case(suite, case, order)
  local session = wf.info().id .. "." .. case.name
  wf.emit("eval.case.started", { case = case.name, session = session })
  local t0 = wf.now()
  local ok, value = pcall(wf.child, suite.workflow, case.input,
    { id = session, parent_close = "request_cancel", timeout = case.timeout })
  local wall = math.floor((wf.now() - t0) * 1000 + 0.5) / 1000
  if not ok then value = child_error(value) end
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

return function(input)
  local t0 = wf.now()
  local suite = wf.activity("eval.load", { dir = input.suite, live = input.live == true },
    { start_to_close = 60, retry = { max_attempts = 2 } })
  local order = {}
  for i, s in ipairs(suite.scorers) do order[i] = s.name end
  wf.emit("eval.started", { suite = suite.name, dir = suite.dir, cases = #suite.cases, scorers = order,
    live = suite.live, concurrency = suite.concurrency, baseline = input.baseline and input.baseline.run or nil })
  -- lanes: each takes the next case until none is left, so at most
  -- `concurrency` sessions run at once (the workflow's coroutines run one at
  -- a time, in a fixed order: the same cases go the same way on replay)
  local rows, next_case = {}, 0
  local function lane()
    while true do
      next_case = next_case + 1
      local i = next_case
      if i > #suite.cases then return true end
      rows[i] = run_case(suite, suite.cases[i], order)
    end
  end
  local lanes = {}
  for k = 1, math.min(suite.concurrency, #suite.cases) do lanes[k] = wf.spawn(lane) end
  wf.all(lanes)
  local wall = math.floor((wf.now() - t0) * 1000 + 0.5) / 1000
  local result = report.build(wf.info().id, suite, rows, input.baseline, wall)
  local art = wf.activity("eval.save", { result = result }, { retry = { max_attempts = 5 } })
  wf.emit("artifact.saved", art)
  result.artifact = art
  wf.emit("eval.completed", { passed = result.totals.passed, failed = result.totals.failed,
    regressions = result.baseline and #result.baseline.regressions or nil })
  return result
end
