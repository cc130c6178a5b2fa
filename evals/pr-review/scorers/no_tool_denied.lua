-- No tool call of the session was denied (by a policy, a limit, or an
-- approval nobody gave), and none waited for an approval.
return {
  description = "no tool was denied",
  score = function(case, run)
    for _, e in ipairs(run.events) do
      if e.type == "tool.result" and e.payload.denied then
        return false, "denied: " .. tostring(e.payload.tool) .. ": " .. tostring(e.payload.content)
      end
      if e.type == "approval.requested" then return false, "asked for approval of " .. tostring(e.payload.tool) end
    end
    return true
  end,
}
