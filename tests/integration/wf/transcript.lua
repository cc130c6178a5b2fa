-- A session's transcript without a model or a sandbox (for the terminal
-- tests of `engine events`): an assistant message (input.text), a tool call
-- whose result is input.content (long, many lines), an approval that waits for
-- `engine approve ID --request publish-1`, its answer, and the end.
local wf = require "workflow"
return function(input)
  wf.emit("session.created", { objective = input.objective or "Review the change" })
  wf.emit("agent.message", { text = input.text, turn = 1, usage = { input_tokens = 1200, output_tokens = 80 } })
  wf.emit("tool.requested", { id = "c1", tool = "shell", args = { command = "cat notes.txt" } })
  wf.emit("tool.result", { id = "c1", tool = "shell", ok = true, content = input.content })
  wf.emit("tool.requested", { id = "c2", tool = "publish_review", args = { body = "LGTM with two nits" } })
  wf.emit("approval.requested", { request_id = "publish-1", tool = "publish_review",
    args = { body = "LGTM with two nits" }, reason = "publishing needs a person" })
  local answer = wf.wait_signal("approval:publish-1", { timeout = 600 })
  local approved = type(answer) == "table" and answer.approved == true
  wf.emit("approval.decided", { request_id = "publish-1", approved = approved,
    reason = type(answer) == "table" and answer.reason or nil, approver = type(answer) == "table" and answer.approver or nil })
  wf.emit("tool.result", { id = "c2", tool = "publish_review", ok = approved, content = approved and "published" or "denied" })
  wf.emit("session.completed", { outcome = "completed", summary = "reviewed" })
  return { approved = approved }
end
