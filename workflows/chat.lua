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
-- tool calls), the first message as `message`; without one, the chat waits
-- for it before the session starts (nothing held but the wait). Any other
-- field of an agent session's input goes through as it is and is checked there.
--
-- input schema: chat.input.schema.json
local wf = require "workflow"
local compaction = require "compaction"
local spine = require("spine").new(wf)
local agent_session = require "agent_session"

-- A conversation's bounds (chat.input.schema.json's defaults), where the
-- input does not set them.
local LIMITS = { timeoutSeconds = 604800, maxModelTurns = 1000, maxToolCalls = 1000 }
local IDLE = 3600 -- idleTimeoutSeconds's default (the agent session's)

-- A chat started without a message waits for its first one, holding
-- nothing but the wait (no slot, no sandbox): its text, or nil and "closed"
-- or "idle" when the chat is closed or idle first. An interrupt has nothing
-- to stop yet.
local function first_message(idle)
  wf.emit("session.status", { status = "WAITING_FOR_MESSAGE" })
  while true do
    local v = wf.wait_signal("session:input", { timeout = idle })
    if v == nil then
      wf.emit("session.idle", { seconds = math.floor(idle) })
      return nil, "idle"
    elseif type(v) == "table" and v.kind == "close" then
      wf.emit("session.closing", { by = v.sender })
      return nil, "closed"
    elseif type(v) == "table" and v.kind == "message" then
      wf.emit("user.message", { text = v.text, sender = v.sender })
      return v.text
    end
  end
end

return function(input)
  -- a later run of a long chat (continued as new): the agent session's own state
  if compaction.carried(wf, input) then return agent_session(input) end
  if type(input) ~= "table" then spine.refuse({ "the input must be a JSON object" }) end
  local problems = {}
  if input.message ~= nil and (type(input.message) ~= "string" or not input.message:find("%S")) then
    problems[#problems + 1] = "message must be text (the chat's first message), or left out to wait for one"
  end
  local idle = input.idleTimeoutSeconds == nil and IDLE or input.idleTimeoutSeconds
  if math.type(idle) == nil or idle <= 0 or idle > 2592000 then -- checked here too: it bounds the first wait
    problems[#problems + 1] = "idleTimeoutSeconds must be a number of seconds above 0, at most 30 days"
  end
  if input.objective ~= nil then problems[#problems + 1] = "a chat has no objective: its first message is 'message'" end
  if input.waitForMessages ~= nil then problems[#problems + 1] = "a chat always waits for messages (no waitForMessages)" end
  if #problems > 0 then spine.refuse(problems) end
  local message, ended = input.message, nil
  if message == nil then message, ended = first_message(idle) end
  if not message then return { outcome = ended, turns = 0, tool_calls = 0, tokens = 0 } end
  local session = {}
  for k, v in pairs(input) do session[k] = v end
  session.objective, session.message, session.waitForMessages = message, nil, true
  local limits = {}
  for k, v in pairs(LIMITS) do limits[k] = v end
  if type(input.limits) == "table" then for k, v in pairs(input.limits) do limits[k] = v end end
  if input.limits == nil or type(input.limits) == "table" then session.limits = limits end
  return agent_session(session)
end
