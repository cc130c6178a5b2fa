-- Activity: one model turn. wf.activity("model.turn", {model=, system=,
-- messages=, tools=, options=}) -> the normalized turn (with token usage), so
-- each turn is its own durable step and its usage lands in the history.
-- With from_history = true the step takes the system prompt, the tools and the
-- transcript from the workflow's own history up to itself (lua/transcript.lua)
-- instead of from its arguments. turn.rate_limited is the largest retry-after
-- (seconds) of the 429s the turn waited out; options.defer_rate_limit = true
-- raises such a 429 at once instead (lua/runners/common.lua). Traced, the
-- turn describes its span with the GenAI conventions (lua/otel_genai.lua).
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
  -- the largest retry-after honoured on the way (429s): the workflow makes
  -- every session that shares this provider's rate limit wait as well
  local rate_limited
  opts.on_rate_limited = function(seconds)
    if not rate_limited or seconds > rate_limited then rate_limited = seconds end
  end
  local system, tools, messages = args.system, args.tools, args.messages
  if args.from_history then
    local transcript = require "transcript"
    local info = activity.info()
    system, tools, messages = transcript.for_step(activity.history, info.idempotency_key:match("^(.*)/[^/]*$"),
      info.seq - 1)
  end
  -- the turn's span in a trace: described only when it is exported (the
  -- request first, so a turn that fails still names its model)
  local genai = activity.traced() and require "otel_genai"
  if genai then activity.span(genai.chat_request(args.model, opts, step.workflow_id)) end
  local turn = runners.turn(args.model or {}, { system = system, messages = messages or {}, tools = tools }, opts)
  if genai then
    activity.span(genai.chat_response(turn))
    if genai.capture_content() then activity.span(genai.chat_content(system, messages, turn)) end
  end
  turn.deltas = deltas
  turn.rate_limited = rate_limited
  local usage = turn.usage or {}
  activity.usage(turn.provider or (args.model or {}).provider or "openai", tonumber(usage.input_tokens) or 0,
    tonumber(usage.output_tokens) or 0)
  return turn
end

return M
