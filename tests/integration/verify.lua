-- Checks the event log or the domain event stream read as JSON lines on stdin.
--   verify.lua history : seq dense from 1; every outcome refers to an earlier
--                        command; no command has two outcomes; no gaps.
--   verify.lua events  : seq dense from 1; prints the types the workflow
--                        emitted, in order (the audit events a client writes
--                        when it sends a signal or asks to cancel, signal.sent
--                        and cancel.requested, land whenever it sends: they are
--                        left out, after the density check).
local cjson = require "cjson"
local mode = arg[1]
local rows = {}
for line in io.lines() do rows[#rows + 1] = cjson.decode(line) end
local function die(msg) io.stderr:write("verify: ", msg, "\n"); os.exit(1) end
for i, r in ipairs(rows) do
  if r.seq ~= i then die(string.format("seq gap or duplicate at line %d: seq %s", i, tostring(r.seq))) end
end
if mode == "history" then
  local outcome_of, commands, completed = {}, {}, 0
  for _, r in ipairs(rows) do
    if r.type == "ActivityScheduled" or r.type == "TimerStarted" or r.type == "SignalWaitStarted"
        or r.type == "ChildStarted" -- child workflows
        or (r.type:match("Requested$") and r.type ~= "CancelRequested") then -- slots, counters, rates
      commands[r.seq] = r
    end
    if r.ref and r.ref > 0 then
      if not commands[r.ref] then die("outcome #" .. r.seq .. " refers to #" .. r.ref .. ", not a command") end
      if outcome_of[r.ref] then die("command #" .. r.ref .. " has two outcomes: #" .. outcome_of[r.ref] .. " and #" .. r.seq) end
      outcome_of[r.ref] = r.seq
      if r.type == "ActivityCompleted" then completed = completed + 1 end
    end
  end
  local open = 0
  for seq in pairs(commands) do if not outcome_of[seq] then open = open + 1 end end
  print(string.format("events=%d activities_completed=%d open_commands=%d last=%s", #rows, completed, open,
    rows[#rows] and rows[#rows].type or "none"))
elseif mode == "events" then
  local types = {}
  for _, r in ipairs(rows) do
    if r.type ~= "signal.sent" and r.type ~= "cancel.requested" then types[#types + 1] = r.type end
  end
  print(table.concat(types, ","))
else
  die("usage: verify.lua history|events")
end
