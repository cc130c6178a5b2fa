-- The call and its repairs cost less than expect.maxCostUsd (the model's
-- prices in the input make its cost).
return {
  description = "cost under expect.maxCostUsd",
  score = function(case, run)
    local max = case.expect.maxCostUsd
    if not max then return nil end
    return run.cost_usd < max, string.format("$%.4f of $%.2f", run.cost_usd, max)
  end,
}
