local wf = require "workflow"
return function(input)
  wf.activity("acts.echo", { before = true })
  if input.kind == "loop" then
    local ok = pcall(function() while true do end end) -- pcall must not save it
    return { escaped = ok }
  else
    local t = {}
    local ok = pcall(function() for i = 1, 1e9 do t[i] = string.rep("x", 64) .. i end end)
    return { escaped = ok, n = #t }
  end
end
