-- The session ends as the case expects: expect.outcome (completed, limit,
-- ...) and, for a limit, which one (expect.limit: maxTokens, maxModelTurns, ...).
return {
  description = "the session ends with the expected outcome",
  score = function(case, run)
    local want = case.expect.outcome or "completed"
    if run.status ~= "completed" then
      return false, "the session " .. run.status .. ": " .. tostring(run.error and run.error.message)
    end
    if run.outcome ~= want then return false, "outcome " .. tostring(run.outcome) .. ", expected " .. want end
    local limit = run.limit and run.limit.limit
    if case.expect.limit and limit ~= case.expect.limit then
      return false, "stopped by " .. tostring(limit) .. ", expected " .. case.expect.limit
    end
    return true, limit and ("stopped by " .. limit) or want
  end,
}
