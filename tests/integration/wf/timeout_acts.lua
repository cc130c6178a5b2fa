-- Activities that try to outlive their start_to_close timeout by catching it.
local M = {}

-- catches the timeout once and returns normally
function M.caught()
  local ok, err = pcall(function() while true do end end)
  return { caught = not ok, err = tostring(err) }
end

-- catches it again and again for a while (os.clock: CPU time of this process)
function M.caught_loop(args)
  local t0 = os.clock()
  while os.clock() - t0 < (args.seconds or 2) do pcall(function() while true do end end) end
  return "kept going"
end

-- spins in a coroutine of its own (the timeout's hook is per coroutine)
function M.nested()
  local ok, err = coroutine.resume(coroutine.create(function() while true do end end))
  return { ok = ok, err = tostring(err) }
end

-- runs inside its time: not a timeout
function M.quick() return "in time" end
return M
