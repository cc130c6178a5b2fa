-- Asks for the approvals in input.requests one after another, the way
-- agent_session.lua does (approval.requested, then the signal approval:RID
-- with a timeout), and returns how each ended.
local wf = require "workflow"
return function(input)
  local out = {}
  for _, r in ipairs(input.requests) do
    wf.emit("approval.requested", { request_id = r.id, tool = r.tool })
    local answer, why = wf.wait_signal("approval:" .. r.id, { timeout = r.timeout })
    local approved = type(answer) == "table" and answer.approved == true
    wf.emit("approval.decided", { request_id = r.id, approved = approved })
    out[#out + 1] = { id = r.id, approved = approved, why = why,
      approver = type(answer) == "table" and answer.approver or nil }
  end
  return out
end
