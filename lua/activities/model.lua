-- Activity: one model turn. wf.activity("model.turn", {model=, system=,
-- messages=, tools=, options=}) -> the normalized turn (with token usage), so
-- each turn is its own durable step and its usage lands in the history.
-- With from_history = true the step takes the system prompt, the tools and the
-- transcript from the workflow's own history up to itself (lua/transcript.lua)
-- instead of from its arguments.
local activity = require "activity"
local runners = require "runners"

local M = {}

function M.turn(args)
  local deltas = 0
  local opts = args.options or {}
  local step = activity.info()
  opts.on_delta = function(d)
    deltas = deltas + 1
    activity.heartbeat()
    -- watchers see the text as it is written (never logged: agent.message is)
    activity.live("agent.delta", { step = step.seq, attempt = step.attempt, n = deltas, delta = d })
  end
  local system, tools, messages = args.system, args.tools, args.messages
  if args.from_history then
    local transcript = require "transcript"
    system, tools, messages = transcript.from_history(activity.history(1, activity.info().seq - 1))
  end
  local turn = runners.turn(args.model or {}, { system = system, messages = messages or {}, tools = tools }, opts)
  turn.deltas = deltas
  local usage = turn.usage or {}
  activity.usage(turn.provider or (args.model or {}).provider or "openai", tonumber(usage.input_tokens) or 0,
    tonumber(usage.output_tokens) or 0)
  return turn
end

return M
