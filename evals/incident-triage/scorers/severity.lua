-- The severity the case expects (expect.severity: sev1 .. sev4).
return {
  description = "the severity is expect.severity",
  score = function(case, run)
    local want = case.expect.severity
    if not want then return nil end
    local got = type(run.result.result) == "table" and run.result.result.severity or nil
    return got == want, string.format("%s, expected %s", tostring(got), want)
  end,
}
