-- The first next step is the mitigation: it mentions every word of
-- expect.nextStepsFirst (case-insensitive).
return {
  description = "the first next step is the mitigation (expect.nextStepsFirst)",
  score = function(case, run)
    local words = case.expect.nextStepsFirst
    if not words then return nil end
    local steps = type(run.result.result) == "table" and run.result.result.next_steps or nil
    local first = type(steps) == "table" and tostring(steps[1] or ""):lower() or ""
    for _, w in ipairs(words) do
      if not first:find(w:lower(), 1, true) then return false, "the first step does not mention " .. w end
    end
    return true, first:sub(1, 60)
  end,
}
