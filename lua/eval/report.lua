-- An eval run's result, suite_result.json (docs/evals.md): one row per case
-- (its session, status, each scorer's result, turns, tokens, cost, wall
-- time), the totals and, against a baseline run's result, the cases that
-- regressed: a scorer that passed in the baseline and does not now. Pure
-- functions of their arguments: the eval workflow builds it in its
-- deterministic VM.
local M = {}

-- One case's row. child: {ok, value} as pcall(wf.child) gave it; scores:
-- {scorer = {result, detail}}; order: the suite's scorer names.
function M.case_row(case, session, ok, value, scores, order, wall)
  local res = ok and type(value) == "table" and value or {}
  local row = { case = case.name, session = session, status = ok and "completed" or "failed",
    outcome = res.outcome, turns = res.turns or 0, tool_calls = res.tool_calls or 0, tokens = res.tokens or 0,
    cost_usd = res.cost_usd or 0, wall_seconds = wall, scores = scores, pass = true, failed = {} }
  if not ok then
    row.error = type(value) == "table" and { type = value.type, message = value.message } or { message = tostring(value) }
    if row.error.type == "ChildCancelled" then row.status = "cancelled" end
  end
  for _, name in ipairs(order) do
    local s = scores[name]
    if s and (s.result == "fail" or s.result == "error") then
      row.pass = false
      row.failed[#row.failed + 1] = name
    end
  end
  if #row.failed == 0 then row.failed = nil end -- (an empty list would be written as {})
  return row
end

-- baseline: a suite result (another run's, or a file's): {run, cases =
-- {{case, scorer}}} of the scorers that passed there and do not now, and
-- the baseline's cases this run lacks.
function M.regressions(rows, baseline)
  local before = {}
  for _, c in ipairs(type(baseline) == "table" and type(baseline.cases) == "table" and baseline.cases or {}) do
    if type(c) == "table" and type(c.case) == "string" then before[c.case] = c end
  end
  local out = {}
  for _, row in ipairs(rows) do
    local b = before[row.case]
    if b and type(b.scores) == "table" then
      local lost = {}
      local names = {}
      for name in pairs(b.scores) do names[#names + 1] = name end
      table.sort(names)
      for _, name in ipairs(names) do
        local was, now = b.scores[name], row.scores[name]
        if type(was) == "table" and was.result == "pass" and (not now or now.result ~= "pass") then
          lost[#lost + 1] = { scorer = name, now = now and now.result or "missing", detail = now and now.detail or nil }
        end
      end
      if #lost > 0 then out[#out + 1] = { case = row.case, scorers = lost } end
    end
  end
  return out
end

-- The whole result. suite: what eval.load gave; rows: case_row's, in the
-- suite's order; baseline: {run, result} or nil; wall: the run's seconds.
function M.build(run_id, suite, rows, baseline, wall)
  local names = {}
  for i, s in ipairs(suite.scorers) do names[i] = s.name end
  local t = { cases = #rows, passed = 0, failed = 0, turns = 0, tool_calls = 0, tokens = 0, cost_usd = 0,
    wall_seconds = wall }
  for _, r in ipairs(rows) do
    if r.pass then t.passed = t.passed + 1 else t.failed = t.failed + 1 end
    t.turns, t.tool_calls, t.tokens = t.turns + r.turns, t.tool_calls + r.tool_calls, t.tokens + r.tokens
    t.cost_usd = t.cost_usd + r.cost_usd
  end
  local out = { suite = suite.name, dir = suite.dir, run = run_id, live = suite.live, scorers = names, cases = rows,
    totals = t, pass = t.failed == 0 }
  if baseline then
    local reg = M.regressions(rows, baseline.result)
    out.baseline = { run = baseline.run, regressions = reg }
    out.regressed = #reg > 0
  end
  return out
end

return M
