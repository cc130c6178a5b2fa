-- Activities of an eval run (workflows/eval_suite.lua; docs/evals.md): read
-- the suite, score a case's session, ask a model-graded scorer's model,
-- store suite_result.json. Each result is recorded, so a run that resumes
-- after a crash scores each case once, with what it recorded.
local activity = require "activity"
local json = require "json"
local util = require "util"

local M = {}

local function repo_dir() return (activity.worker().lua_dir:gsub("/lua/?$", "")) end

-- The suite as the run uses it (lua/eval/suite.lua): every case's input and
-- every scorer's source, recorded. A suite that does not load fails the run
-- with every problem named (InvalidInput, not retried).
function M.load(args)
  local suite, problems = require("eval.suite").load(args.dir, { live = args.live, repo = repo_dir() })
  if not suite then
    util.raise("InvalidInput", "the suite " .. tostring(args.dir) .. " does not load: " .. table.concat(problems, "; "),
      { problems = problems, non_retryable = true })
  end
  return suite
end

local function findings_of(res)
  local r = type(res) == "table" and type(res.result) == "table" and res.result or {}
  return type(r.findings) == "table" and r.findings or {}, r.verdict
end

-- What a scorer sees of a case's session: its result and its domain events
-- (activity.workflow: the session is the eval's child, ended).
local function run_view(args)
  local res = args.ok and type(args.value) == "table" and args.value or {}
  local findings, verdict = findings_of(res)
  local ok, w = pcall(activity.workflow, args.session)
  return { id = args.session, status = args.ok and "completed" or "failed",
    error = not args.ok and args.value or nil, outcome = res.outcome, summary = res.summary, verdict = verdict,
    findings = findings, result = res, turns = res.turns or 0, tool_calls = res.tool_calls or 0, tokens = res.tokens or 0,
    cost_usd = res.cost_usd or 0, limit = res.limit, wall_seconds = args.wall_seconds, events = ok and w.events or {} }
end

local function case_view(c) return { name = c.name, description = c.description, expect = c.expect, input = c.input } end

-- The check scorers over one case: {scores, graders} (lua/eval/scoring.lua).
function M.score(args)
  local scores, graders = require("eval.scoring").score(args.scorers, case_view(args.case), run_view(args), args.dir)
  return { scores = scores, graders = graders }
end

-- One model-graded scorer: the model answers the prompt (one turn, no
-- tools; a replay: recording offline), the scorer's verdict reads it.
function M.grade(args)
  local runners = require "runners"
  local turn = runners.turn(args.model, { system = "You grade the work of a code-review agent. Answer PASS or FAIL, " ..
    "then one sentence why.", messages = { { role = "user", content = args.prompt } } }, {})
  local usage = turn.usage or {}
  activity.usage(turn.provider or "openai", tonumber(usage.input_tokens) or 0, tonumber(usage.output_tokens) or 0)
  local v = require("eval.scoring").verdict(args.scorer, tostring(turn.text or ""), case_view(args.case))
  v.tokens = (tonumber(usage.input_tokens) or 0) + (tonumber(usage.output_tokens) or 0)
  return v
end

-- Waits until workflow args.session has ended (a fork of a variants eval,
-- which is no child of the eval: engine fork made it), reading its row now
-- and then; its status, result and error. Heartbeats while it waits.
local ENDED = { completed = true, failed = true, cancelled = true, stuck = true }
function M.wait(args)
  while true do
    local w = activity.workflow(args.session)
    if ENDED[w.status] then return { status = w.status, result = w.result, error = w.error } end
    activity.heartbeat()
    activity.sleep(0.25)
  end
end

-- suite_result.json, stored as an artifact (lua/artifacts.lua).
function M.save(args)
  local artifacts = require "artifacts"
  return artifacts.store(artifacts.root(), "suite_result.json", json.encode(args.result))
end

return M
