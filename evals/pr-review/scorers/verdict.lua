-- The review's verdict is the one the case expects (expect.verdict).
return {
  description = "the verdict is the expected one",
  score = function(case, run)
    if case.expect.verdict == nil then return nil end
    return run.verdict == case.expect.verdict, "verdict " .. tostring(run.verdict)
  end,
}
