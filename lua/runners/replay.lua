-- Offline replay runner: model.name = "replay:PATH" answers from a recorded
-- conversation, one normalized turn per line (JSON Lines). Turn k of the
-- conversation is line k, where k - 1 is the number of assistant messages
-- already in the transcript, so a retried or replayed call gets the same
-- answer. A line may say what it answers: {"turn": {...}, "after": {"role":
-- "tool", "name": "read_file"}}; a transcript that does not match, a call for a
-- turn the recording lacks, or a recorded tool call the request did not offer
-- fails with ReplayDiverged. No network, no API key.
local json = require "json"
local C = require "runners.common"

local M = { name = "replay" }

local cache = {}

local function load(path)
  local f, err = io.open(path, "r")
  if not f then C.raise("ReplayDiverged", "cannot open the recording: " .. tostring(err), { non_retryable = true }) end
  local lines, n = {}, 0
  for line in f:lines() do
    n = n + 1
    if line:match("%S") then
      local ok, v = pcall(json.decode, line)
      if not ok or type(v) ~= "table" then
        f:close()
        C.raise("ReplayDiverged", string.format("%s:%d is not JSON", path, n), { non_retryable = true })
      end
      lines[#lines + 1] = v
    end
  end
  f:close()
  return lines
end

function M.turn(model, req, opts)
  opts = opts or {}
  local path = model.name:sub(#"replay:" + 1)
  if path == "" then C.raise("InvalidModelSpec", "replay: needs a path (replay:PATH)", { non_retryable = true }) end
  if model.dir and path:sub(1, 1) ~= "/" then path = model.dir .. "/" .. path end
  local lines = cache[path] or load(path)
  cache[path] = lines
  local k = 1
  for _, m in ipairs(req.messages or {}) do if m.role == "assistant" then k = k + 1 end end
  local line = lines[k]
  if not line then
    C.raise("ReplayDiverged", string.format("the recording %s has %d turns; the conversation asks for turn %d",
      path, #lines, k), { non_retryable = true })
  end
  local rec = line.turn or line
  if line.after then
    local last = req.messages and req.messages[#req.messages] or {}
    local name = last.name
    if last.role ~= line.after.role or (line.after.name and line.after.name ~= name) then
      C.raise("ReplayDiverged", string.format("turn %d of %s was recorded after a %s message%s, but the " ..
        "conversation ends with a %s message%s", k, path, tostring(line.after.role),
        line.after.name and (" from " .. line.after.name) or "", tostring(last.role), name and (" from " .. name) or ""),
        { non_retryable = true })
    end
  end
  local turn = { text = rec.text or "", tool_calls = {}, finish_reason = rec.finish_reason,
    usage = rec.usage or { input_tokens = 0, output_tokens = 0 }, model = model.name, provider = "replay" }
  for i, c in ipairs(rec.tool_calls or {}) do
    turn.tool_calls[i] = { id = c.id or ("call_" .. k .. "_" .. i), name = c.name,
      arguments = type(c.arguments) == "table" and c.arguments or nil,
      arguments_json = type(c.arguments) == "string" and c.arguments or nil }
  end
  turn.finish_reason = turn.finish_reason or (#turn.tool_calls > 0 and "tool_calls" or "stop")
  if opts.on_delta and turn.text ~= "" then opts.on_delta({ type = "text", text = turn.text }) end
  local ok, err = pcall(C.check_tool_calls, turn, req.tools, opts.lenient_tools)
  if not ok then
    if type(err) == "table" and err.type == "UnknownTool" then
      err.type = "ReplayDiverged"
      err.message = "the recording calls a tool this conversation does not offer: " .. tostring(err.tool)
    end
    error(err, 0)
  end
  return turn
end

return M
