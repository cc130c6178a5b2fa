-- At most expect.maxRepairs calls repaired an answer that did not match the schema.
return {
  description = "at most expect.maxRepairs repairs",
  score = function(case, run)
    local max = case.expect.maxRepairs
    if not max or run.status ~= "completed" then return nil end
    local n = run.result.repairs or 0
    return n <= max, string.format("%d of at most %d repairs", n, max)
  end,
}
