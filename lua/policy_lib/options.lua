-- policy_lib.options (policylib.options for policies): reads a command's
-- arguments the way its own option parser would (GNU getopt_long style), from
-- a spec that lists every option the command is allowed to have. An option
-- the spec does not list is an error, so a checker built on a spec fails
-- closed on anything it was not written for.
--
--   local spec = { short = "nrs", short_arg = { o = "output", k = "key" },
--                  long = { output = true, key = true, reverse = false, check = "optional" },
--                  abbrev = true }
--   local r, why = options.parse(words, spec)
--   -- r.opts = {{name = "output", value = word, word = word}, ...} (short options
--   -- with a long alias carry the long name, other short flags their letter);
--   -- r.operands = {word, ...}; r.has.output = the last such option
--
-- Spec fields: short (flags, a string of letters), short_arg (letter -> name:
-- takes a value, attached or the next word), short_opt (letter -> name: an
-- optional value, attached only), long (name -> false | true | "optional"),
-- abbrev (unambiguous prefixes of long names count, as getopt_long allows),
-- stop (options end at the first operand, as with a "+" optstring), digits
-- (-5 style numbers are options), dynamic_ok (a word that may expand into an
-- option is fine; otherwise it is an error: "*" or "$x" could become
-- "--output=/etc/x").
local M = {}

-- Whether a word may turn into an option (or several words) when the shell expands it.
function M.may_be_option(word)
  return type(word) == "table" and (word.lead or word.split) and true or false
end

local function part(word, text)
  return { text = text, expand = word.expand, glob = word.glob, quoted = word.quoted, split = word.split }
end

local function long_name(spec, given)
  local long = spec.long or {}
  if long[given] ~= nil then return given end
  if not spec.abbrev then return nil, "unknown option '--" .. given .. "'" end
  local found
  for name in pairs(long) do
    if name:sub(1, #given) == given then
      if found then return nil, "ambiguous option '--" .. given .. "'" end
      found = name
    end
  end
  if not found then return nil, "unknown option '--" .. given .. "'" end
  return found
end

function M.parse(words, spec)
  local opts, operands, has = {}, {}, {}
  local function push(name, value, word)
    local o = { name = name, value = value, word = word }
    opts[#opts + 1] = o
    has[name] = o
  end
  local i, done = 1, false
  local short_arg, short_opt = spec.short_arg or {}, spec.short_opt or {}
  while i <= #words do
    local w = words[i]
    local t = w.text
    if not done and not spec.dynamic_ok and M.may_be_option(w) then
      return nil, "the word '" .. t .. "' may expand into an option"
    end
    if done or t == "-" or t:sub(1, 1) ~= "-" then
      operands[#operands + 1] = w
      if spec.stop then done = true end
    elseif t == "--" then
      done = true
    elseif t:sub(1, 2) == "--" then
      local given, value = t:match("^%-%-([^=]*)=(.*)$")
      given = given or t:sub(3)
      local name, why = long_name(spec, given)
      if not name then return nil, why end
      local arity = spec.long[name]
      if value ~= nil then
        if arity == false then return nil, "option '--" .. name .. "' takes no value" end
        push(name, part(w, value), w)
      elseif arity == true then
        local v = words[i + 1]
        if not v then return nil, "option '--" .. name .. "' needs a value" end
        if v.split and not spec.dynamic_ok then
          return nil, "the value '" .. v.text .. "' may expand into several words"
        end
        push(name, v, w)
        i = i + 1
      else
        push(name, nil, w)
      end
    elseif spec.digits and t:match("^%-%d+$") then
      push("number", part(w, t:sub(2)), w)
    else
      local j = 2
      while j <= #t do
        local c = t:sub(j, j)
        if short_arg[c] then
          local rest = t:sub(j + 1)
          if rest ~= "" then
            push(short_arg[c], part(w, rest), w)
          else
            local v = words[i + 1]
            if not v then return nil, "option '-" .. c .. "' needs a value" end
            if v.split and not spec.dynamic_ok then
              return nil, "the value '" .. v.text .. "' may expand into several words"
            end
            push(short_arg[c], v, w)
            i = i + 1
          end
          break
        elseif short_opt[c] then
          local rest = t:sub(j + 1)
          push(short_opt[c], rest ~= "" and part(w, rest) or nil, w)
          break
        elseif (spec.short or ""):find(c, 1, true) and c ~= "-" then
          push(c, nil, w)
        else
          return nil, "unknown option '-" .. c .. "'"
        end
        j = j + 1
      end
    end
    i = i + 1
  end
  return { opts = opts, operands = operands, has = has }
end

return M
