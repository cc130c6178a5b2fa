-- Runs one case of test_retry_numbers.sh (input.case) under pcall and reports
-- how it ended: {ok, value} or {ok = false, type, message, attempts}.
local wf = require "workflow"

local cases = {
  sleep = function(i) return wf.sleep(i.seconds == "inf" and math.huge or i.seconds == "nan" and 0 / 0 or i.seconds) end,
  sleep_neg_inf = function() return wf.sleep(-math.huge) end,
  wait_inf = function() return wf.wait_signal("go", { timeout = math.huge }) end,
  wait_neg = function() return wf.wait_signal("go", { timeout = -1 }) end,
  activity = function(i)
    local o = i.options or {}
    if i.inf then -- JSON has no inf: "start_to_close" or "retry.backoff" is set to it here
      local top, sub = i.inf:match("^([^.]+)%.?(.*)$")
      if sub == "" then o[top] = math.huge else o[top] = o[top] or {}; o[top][sub] = math.huge end
    end
    return wf.activity(i.activity or "numbers_acts.raise", i.args or {}, o)
  end,
  name_nul = function() return wf.activity("numbers_acts.ok\0x", {}) end,
  signal_name_nul = function() return wf.wait_signal("go\0x") end,
}

return function(input)
  local ok, r = pcall(cases[input.case], input)
  if ok then return { ok = true, value = r } end
  if type(r) ~= "table" then return { ok = false, type = "string", message = tostring(r) } end
  return { ok = false, type = r.type, message = r.message, attempts = r.attempts, requests = r.requests }
end
