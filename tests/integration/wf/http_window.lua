-- Reads a streamed download with a lagging reader (tests/integration/test_http_window.sh).
local wf = require "workflow"
return function(input)
  return wf.activity("http_window_acts.read_slowly", input, { start_to_close = 120, retry = { max_attempts = 1 } })
end
