-- Futures, wf.all, wf.any and wf.spawn under the real engine (test_futures.sh).
local wf = require "workflow"

local modes = {}

-- n activities at once, each a window of `seconds`
function modes.fanout(input)
  local fs = {}
  for i = 1, input.n or 3 do fs[i] = wf.start_activity("acts.window", { n = i, seconds = input.seconds or 0.5 }) end
  local r = wf.all(fs)
  return { results = r, n = #r }
end

-- one quick activity beside slow ones (killed in between)
function modes.mixed(input)
  local quick = wf.start_activity("acts.echo", { quick = true })
  local slow1 = wf.start_activity("acts.window", { n = 1, seconds = input.seconds or 2, gate = input.gate })
  local slow2 = wf.start_activity("acts.window", { n = 2, seconds = input.seconds or 2, gate = input.gate })
  local r = wf.all({ quick, slow1, slow2 })
  return { quick = r[1].quick, slow = { r[2], r[3] } }
end

-- a signal or an activity, whichever comes first
function modes.race(input)
  local s = wf.start_wait_signal("go", { timeout = input.timeout or 60 })
  local a = wf.start_activity("acts.window", { n = 7, seconds = input.seconds or 30 })
  local i, v = wf.any({ s, a })
  return { first = i, value = v }
end

-- two durable coroutines, each a chain with a sleep
function modes.spawn(input)
  local function chain(name)
    local out = {}
    for k = 1, 2 do
      out[k] = wf.activity("acts.echo", { who = name, k = k }).k
      wf.sleep(0.05)
    end
    return name .. ":" .. table.concat(out, ",")
  end
  local r = wf.all({ wf.spawn(chain, "x"), wf.spawn(chain, "y") })
  return { r[1], r[2], wf.random(1000) }
end

-- waits on an activity and a timer: cancelled meanwhile
function modes.cancel(input)
  local a = wf.start_activity("acts.window", { n = 1, seconds = 30 })
  local t = wf.start_timer(60)
  local ok, e = pcall(wf.all, { a, t })
  wf.activity("acts.echo", { cleanup = true })
  error(e)
end

return function(input) return modes[input.mode](input) end
