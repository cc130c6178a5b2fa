-- Tests of workflows/agent_session.lua's approval path:
--   engine test tests/workflows/agent_session_test.lua
-- The model asks for one tool call that the policy sends to a person.
local t = require "enginetest"

local DAY = 86400

local function session_stubs(opts)
  local turns = 0
  return {
    ["session.prepare"] = function(args)
      return { ok = true, first_message = { role = "user", content = args.input.objective },
        limits = { timeoutSeconds = 90 * DAY, maxModelTurns = 5, maxTokens = 100000, maxToolCalls = 5,
          maxCostUsd = 0, diskMb = 100 },
        permissions = { tools = { "shell" } }, model = { name = "stub-model" }, provider = "stub",
        approval_timeout = opts.approval_timeout or 30 * DAY, task = {}, files = {}, skills = {} }
    end,
    ["sandbox.provision"] = { driver = "stub", container_id = "c-1" },
    ["sandbox.snapshot"] = { tree = "t-1", files = 0, bytes = 0, new_bytes = 0 },
    ["model.turn"] = function()
      turns = turns + 1
      if turns == 1 then
        return { text = "", usage = { input_tokens = 10, output_tokens = 5 },
          tool_calls = { { id = "call1", name = "shell", arguments = { cmd = "make deploy" },
            arguments_json = '{"cmd":"make deploy"}' } } }
      end
      return { text = '{"summary":"done","result":{}}', usage = { input_tokens = 20, output_tokens = 5 } }
    end,
    ["session.decide"] = function(args)
      if args.approval then return { decision = "allow", reason = "approved", hash = "h1" } end
      return { decision = "approve", reason = "deploys need a person", hash = "h1" }
    end,
    ["session.tool"] = { ok = true, content = "deployed" },
    ["session.persist"] = { saved = {}, skipped = {} },
    ["sandbox.destroy"] = {},
  }
end

local INPUT = { objective = "deploy the site" }

t.case("an approval nobody answers times out after 30 days: the tool is denied", function()
  local run = t.start("workflows/agent_session.lua", INPUT, { activities = session_stubs({}) })
  local w = run:wait_for_signal("approval:.*")
  t.assert_eq(w.timeout, 30 * DAY)
  t.assert_event(run, "approval.requested", { tool = "shell", reason = "deploys need a person" })
  run:advance(30 * DAY - 1)
  t.assert_eq(run:status(), "waiting", "a second before the timeout")
  run:advance(1)
  t.assert_eq(run:status(), "completed")
  t.assert_event(run, "approval.decided", { approved = false, reason = "no answer before the approval timeout" })
  t.assert_event(run, "tool.result", { denied = true })
  t.assert_eq(#run:calls("session.tool"), 0, "the tool never ran")
  t.assert_eq(run:result().outcome, "completed")
  t.assert_eq(#run:calls("sandbox.destroy"), 1)
  t.assert_eq(run:calls("session.prepare")[1].args.input.identity, "local:test", "as engine start sets it")
end)

t.case("an approval answered on day 3 runs the tool", function()
  local run = t.start("workflows/agent_session.lua", INPUT,
    { activities = session_stubs({}), identity = "token:ci" })
  t.assert_eq(run:calls("session.prepare")[1].args.input.identity, "token:ci")
  local w = run:wait_for_signal("approval:.*")
  run:advance(3 * DAY)
  run:signal(w.name, { approved = true, approver = "local:ada" })
  t.assert_eq(run:status(), "completed")
  t.assert_event(run, "approval.decided", { approved = true, approver = "local:ada" })
  t.assert_eq(#run:calls("session.decide"), 2, "asked the policy again with the approval")
  t.assert_eq(run:calls("session.tool")[1].args.args, { cmd = "make deploy" })
  t.assert_event(run, "tool.result", { ok = true, content = "deployed" })
  t.assert_event(run, "session.completed", { turns = 2, tool_calls = 1 })
end)

-- The session's time runs out while a step runs: a step is bounded by the time
-- left (start_to_close, and schedule_to_close for its retries), so its Timeout
-- is the time limit reached, and the session ends with its partial result
-- (limit.exceeded), as when the time runs out between steps, never failed by
-- the step's error. The step's stub takes a minute of the session's 30 s.
local function timing_out(name)
  local stubs = session_stubs({})
  local prepare = stubs["session.prepare"]
  stubs["session.prepare"] = function(args)
    local p = prepare(args)
    p.limits.timeoutSeconds = 30
    return p
  end
  stubs["session.decide"] = { decision = "allow", reason = "allowed", hash = "h1" }
  stubs[name] = t.taking(60, stubs[name])
  return stubs
end

t.case("the time runs out during a tool call: limit.exceeded, the session ends with its partial result", function()
  local run = t.start("workflows/agent_session.lua", INPUT, { activities = timing_out("session.tool") })
  local started = t.now()
  run:wait_until({ "completed", "failed" })
  t.assert_eq(run:status(), "completed", tostring(run:error() and run:error().message))
  t.assert_event(run, "limit.exceeded", { limit = "timeoutSeconds" })
  t.assert_event(run, "tool.result", { ok = false, content = "error: the session's time ran out while the call ran" })
  t.assert_eq(#run:events("limit.exceeded"), 1, "said once")
  t.assert_eq(#run:calls("session.tool"), 1, "no retry past the session's time")
  t.assert_eq(#run:calls("model.turn"), 1, "no turn after the time ran out")
  t.assert_eq(run:result().outcome, "limit")
  t.assert_eq(#run:calls("sandbox.destroy"), 1)
  t.assert_true(t.now() - started <= 31, "it ended with its time, not a retry later")
end)

t.case("the time runs out during a model call: limit.exceeded, no tool runs", function()
  local run = t.start("workflows/agent_session.lua", INPUT, { activities = timing_out("model.turn") })
  run:wait_until({ "completed", "failed" })
  t.assert_eq(run:status(), "completed", tostring(run:error() and run:error().message))
  t.assert_event(run, "limit.exceeded", { limit = "timeoutSeconds" })
  t.assert_eq(#run:events("limit.exceeded"), 1, "said once")
  t.assert_eq(#run:calls("model.turn"), 1, "no retry past the session's time")
  t.assert_eq(#run:calls("session.tool"), 0)
  t.assert_eq(run:result().outcome, "limit")
end)

t.case("a step's Timeout with time left still fails the session", function()
  local stubs = session_stubs({})
  stubs["session.decide"] = { decision = "allow", reason = "allowed", hash = "h1" }
  stubs["session.tool"] = t.taking(1000, stubs["session.tool"]) -- past its own 900 s, in a 90-day session
  local run = t.start("workflows/agent_session.lua", INPUT, { activities = stubs })
  run:wait_until({ "completed", "failed" })
  t.assert_eq(run:status(), "failed")
  t.assert_eq(run:error().type, "Timeout")
  t.assert_eq(#run:calls("session.tool"), 2, "retried once, as its policy says")
  t.assert_no_event(run, "limit.exceeded")
  t.assert_eq(#run:calls("sandbox.destroy"), 1, "cleaned up all the same")
end)
