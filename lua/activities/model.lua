-- Activity: one model turn. wf.activity("model.turn", {model=, system=,
-- messages=, tools=, options=}) -> the normalized turn (with token usage), so
-- each turn is its own durable step and its usage lands in the history.
local activity = require "activity"
local runners = require "runners"

local M = {}

function M.turn(args)
  local deltas = 0
  local opts = args.options or {}
  opts.on_delta = function() deltas = deltas + 1; activity.heartbeat() end
  local turn = runners.turn(args.model or {}, {
    system = args.system, messages = args.messages or {}, tools = args.tools,
  }, opts)
  turn.deltas = deltas
  return turn
end

return M
