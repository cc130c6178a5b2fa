-- policy_lib.programs.lib: what the program families of policy_lib.programs
-- share: reading a program's arguments by its option spec, and small tables.
local options = require "policy_lib.options"

local L = {}

-- Reads args by spec; returns r or nil, the reason naming the program.
function L.parse(name, args, spec)
  local r, why = options.parse(args, spec)
  if not r then return nil, "'" .. name .. "': " .. why end
  return r
end

function L.longs(list, arity)
  local t = {}
  for _, n in ipairs(list) do t[n] = arity end
  return t
end

function L.merge(...)
  local out = {}
  for _, t in ipairs({ ... }) do for k, v in pairs(t) do out[k] = v end end
  return out
end

function L.literal(word) return word and not word.expand and not word.glob end
function L.has_slash(word) return word and word.text:find("/", 1, true) ~= nil end

-- --help and --version, which most GNU programs take.
L.HV = { help = false, version = false }

-- The shell options set -o / sh -o may name (the others are not analysed).
L.SET_O = L.longs({ "pipefail", "errexit", "nounset", "xtrace", "verbose", "noglob", "noclobber", "noexec" }, true)

return L
