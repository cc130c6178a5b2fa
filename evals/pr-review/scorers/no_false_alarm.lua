-- A correct change (expect.clean) gets no finding of severity major or
-- worse, and no request for changes.
local SERIOUS = { major = true, critical = true, blocker = true }
return {
  description = "a correct change is not flagged",
  score = function(case, run)
    if not case.expect.clean then return nil end
    for _, f in ipairs(run.findings) do
      if SERIOUS[f.severity] then
        return false, string.format("flagged %s:%s (%s): %s", tostring(f.file), tostring(f.line), f.severity, tostring(f.title))
      end
    end
    if run.verdict == "request_changes" then return false, "asked for changes" end
    return true
  end,
}
