-- policy_lib.programs.shells: shells given a script on the command line
-- (sh/bash/dash -c 'SCRIPT'): the script is checked like the command line. One
-- family of policy_lib.programs' table (lua/policy_lib/programs.lua says what
-- an entry is and what its checkers get).
local lib = require "policy_lib.programs.lib"
local options = require "policy_lib.options"

local longs = lib.longs
local literal = lib.literal
local SET_O = lib.SET_O

local P = {}

-- sh/bash -c 'SCRIPT': the script is checked like the command line. Startup
-- files (-l, -i, --rcfile), a script file or stdin (sh x.sh, sh -s) are not shown.
local SHELL_LETTERS = "ceuxvfCn"
local SHELL_LONG = longs({ "--norc", "--noprofile", "--posix", "--noediting" }, true)
local function check_shell(ctx, args, name)
  local k, has_c = 1, false
  while args[k] do
    local t = args[k].text
    if t == "--" then k = k + 1 break end
    if t == "-o" or t == "+o" then
      local o = args[k + 1]
      if not o or not SET_O[o.text] then return "'" .. name .. " " .. t .. "' is not analysed" end
      k = k + 2
    elseif SHELL_LONG[t] and name == "bash" then
      k = k + 1
    elseif t:match("^[-+]") and t ~= "-" then
      if not t:sub(2):match("^[" .. SHELL_LETTERS .. "]+$") then
        return "'" .. name .. " " .. t .. "' is not analysed (startup files, stdin or options)"
      end
      if t:sub(1, 1) == "-" and t:find("c", 2, true) then has_c = true end
      k = k + 1
    else
      break
    end
  end
  if not has_c then return "'" .. name .. "' runs a script that is not shown" end
  local script = args[k]
  if not script then return "'" .. name .. " -c' without a script" end
  if not literal(script) then return "'" .. name .. " -c' runs a command built from variables" end
  return ctx:script(script.text, name .. " -c")
end
P.sh, P.dash, P.bash = check_shell, check_shell, check_shell

return { table = P }
