-- The session took at most expect.maxTurns model turns.
return {
  description = "at most expect.maxTurns model turns",
  score = function(case, run)
    local max = case.expect.maxTurns
    if not max then return nil end
    return run.turns <= max, string.format("%d of at most %d turns", run.turns, max)
  end,
}
