-- Each finding the case expects (expect.findings: {file, line, severity?})
-- is named by one of the review's findings: the same file, the line within
-- expect.lineTolerance (default 0), and at least the severity when given.
local RANK = { info = 1, nit = 1, minor = 2, major = 3, critical = 4, blocker = 4 }
return {
  description = "a finding names each expected file:line",
  score = function(case, run)
    local want = case.expect.findings
    if type(want) ~= "table" or #want == 0 then return nil end
    local tol = tonumber(case.expect.lineTolerance) or 0
    local missing = {}
    for _, w in ipairs(want) do
      local hit = false
      for _, f in ipairs(run.findings) do
        if f.file == w.file and math.abs((tonumber(f.line) or -1e9) - w.line) <= tol
            and (not w.severity or (RANK[f.severity] or 0) >= (RANK[w.severity] or 0)) then
          hit = true
        end
      end
      if not hit then missing[#missing + 1] = w.file .. ":" .. w.line .. (w.severity and (" (" .. w.severity .. ")") or "") end
    end
    if #missing > 0 then return false, "no finding names " .. table.concat(missing, ", ") end
    return true, #want .. " expected finding(s) named"
  end,
}
