-- chat.lua: a chat, a long-lived agent session that answers each message.
--
--   {message, model, permissions, idleTimeoutSeconds, limits, ...}
--   -> an agent session (agent_session.lua) with waitForMessages: the first
--      message is its objective; each answer is a reply in the transcript,
--      then it waits (WAITING_FOR_MESSAGE) for the next message: engine
--      message, the page's message form, or POST /v1/workflows/{id}/messages,
--      each the durable signal session:input. Tools, policies and approvals
--      are the agent session's; the conversation is bounded by its compaction
--      (model.contextTokens) and a long one continues as new (compaction.runEvents).
--   -> ends on a close message (engine close), or after idleTimeoutSeconds
--      with no message, with the last reply as its result ({summary}).
--
-- A chat is the agent session's own loop with other defaults, not a loop of
-- its own: limits sized for a conversation (a week, 1,000 model turns and
-- tool calls), the first message as `message`. Any other field of an agent
-- session's input goes through as it is and is checked there.
--
-- input schema: chat.input.schema.json
local wf = require "workflow"
local compaction = require "compaction"
local spine = require("spine").new(wf)
local agent_session = require "agent_session"

-- A conversation's bounds (chat.input.schema.json's defaults), where the
-- input does not set them.
local LIMITS = { timeoutSeconds = 604800, maxModelTurns = 1000, maxToolCalls = 1000 }

return function(input)
  -- a later run of a long chat (continued as new): the agent session's own state
  if compaction.carried(wf, input) then return agent_session(input) end
  if type(input) ~= "table" then spine.refuse({ "the input must be a JSON object" }) end
  local problems = {}
  if type(input.message) ~= "string" or not input.message:find("%S") then
    problems[#problems + 1] = "message is missing (the chat's first message)"
  end
  if input.objective ~= nil then problems[#problems + 1] = "a chat has no objective: its first message is 'message'" end
  if input.waitForMessages ~= nil then problems[#problems + 1] = "a chat always waits for messages (no waitForMessages)" end
  if #problems > 0 then spine.refuse(problems) end
  local session = {}
  for k, v in pairs(input) do session[k] = v end
  session.objective, session.message, session.waitForMessages = input.message, nil, true
  local limits = {}
  for k, v in pairs(LIMITS) do limits[k] = v end
  if type(input.limits) == "table" then for k, v in pairs(input.limits) do limits[k] = v end end
  if input.limits == nil or type(input.limits) == "table" then session.limits = limits end
  return agent_session(session)
end
