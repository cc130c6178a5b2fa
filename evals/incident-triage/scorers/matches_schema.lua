-- The call ended with a result that matches its schema (one_call fails the
-- session otherwise, naming the violations).
return {
  description = "the triage completed with a result matching the schema",
  score = function(case, run)
    if run.status ~= "completed" then
      return false, "the session " .. run.status .. ": " .. tostring(run.error and run.error.message)
    end
    return type(run.result.result) == "table", tostring(run.outcome)
  end,
}
