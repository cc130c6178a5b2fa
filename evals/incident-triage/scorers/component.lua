-- The component at fault names expect.component (case-insensitive).
return {
  description = "the component names expect.component",
  score = function(case, run)
    local want = case.expect.component
    if not want then return nil end
    local got = type(run.result.result) == "table" and tostring(run.result.result.component or "") or ""
    return got:lower():find(want:lower(), 1, true) ~= nil, string.format("%q", got)
  end,
}
