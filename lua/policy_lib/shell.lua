-- policy_lib.shell (policylib.shell for policies): splits a POSIX shell
-- command line (sh -c, as the shell tool runs it; bash's extras where they
-- matter) into words, operators and redirections, and those into simple
-- commands. What cannot be split without running anything (command and
-- process substitution, arithmetic, parameter expansions that assign or
-- evaluate, unterminated quotes) is refused with a reason, never guessed.
--
--   shell.split("ls -l 'a b' >out; echo $HOME") -> tokens, or nil, reason
--   shell.commands("a | b && c")              -> {{words=, redirs=}, ...}, or nil, reason
--   shell.words("git log -p")                 -> {"git", "log", "-p"}, or nil, reason (one literal command only)
--
-- A word is {text=, quoted=, expand=, split=, glob=, lead=, assign=}: text with
-- the quotes removed; quoted: some of it was quoted; expand: its value depends
-- on the shell ($var, ~, {a,b}); split: it may become several words (an
-- unquoted expansion, "$@", braces); glob: an unquoted * ? or [; lead: its
-- first character comes from an expansion or a glob (so it may turn into an
-- option); assign: NAME when it is an unquoted NAME=value. An operator is
-- {op=}; a redirection {redir=, fd=, target=word} (a here-document also has
-- body= and literal=, true when its delimiter was quoted).
local M = {}

local SPECIAL_PARAMS = "[@*#?$!%-0-9]"

-- ${...}: checks the head of a parameter expansion starting at s[i] == "$"
-- (s[i+1] == "{"). Plain names, lengths, defaults, alternatives, errors,
-- pattern removal and replacement are fine; assignment (:= =), substrings
-- (arithmetic), subscripts, indirection and transformations (@P runs
-- prompt expansion) are refused. Returns the index after the head, or nil, reason.
local function param_head(s, i)
  local j = i + 2
  if s:sub(j, j) == "!" then return nil, "indirect parameter expansion (${!...})" end
  if s:sub(j, j) == "#" and s:sub(j + 1, j + 1) ~= "}" then j = j + 1 end -- ${#name}
  local name = s:match("^[%a_][%w_]*", j) or s:match("^%d+", j) or s:sub(j, j):match("^" .. SPECIAL_PARAMS .. "$")
  if not name or name == "" then return nil, "a parameter expansion that is not analysed" end
  j = j + #name
  local c = s:sub(j, j)
  if c == "}" then return j end
  if c == "[" then return nil, "array subscripts in a parameter expansion" end
  if c == "@" then return nil, "parameter transformations (${name@...})" end
  if c == "=" then return nil, "assignments in a parameter expansion (${name=...})" end
  if c == ":" then
    local d = s:sub(j + 1, j + 1)
    if d == "-" or d == "+" or d == "?" then return j + 2 end
    if d == "=" then return nil, "assignments in a parameter expansion (${name:=...})" end
    return nil, "substring expansions (${name:offset})"
  end
  if c == "-" or c == "+" or c == "?" or c == "#" or c == "%" or c == "/" or c == "^" or c == "," then
    return j + 1
  end
  return nil, "a parameter expansion that is not analysed"
end

local REDIRS = { "<<<", "<<-", "<<", "<>", "<&", "<(", ">>", ">&", ">|", ">(", "<", ">" }

-- Reads the bodies of the here-documents in queue from s at i (the start of
-- the line after their operator). Returns the index after them, or nil, reason.
local function heredoc_bodies(s, i, queue)
  for _, h in ipairs(queue) do
    local delim = h.target.text
    local body = {}
    while true do
      if i > #s then return nil, "an unterminated here-document (no line '" .. delim .. "')" end
      local eol = s:find("\n", i, true) or (#s + 1)
      local line = s:sub(i, eol - 1)
      i = eol + 1
      if h.redir == "<<-" then line = line:gsub("^\t+", "") end
      if line == delim then break end
      -- bash joins an unquoted body's lines at a trailing backslash, so the
      -- delimiter could hide across two lines
      if not h.literal and line:sub(-1) == "\\" then
        return nil, "a backslash at the end of a line in a here-document with an unquoted delimiter"
      end
      body[#body + 1] = line
    end
    h.body = table.concat(body, "\n")
    if not h.literal and (h.body:find("$(", 1, true) or h.body:find("`", 1, true) or h.body:find("$[", 1, true)
        or h.body:find("${", 1, true)) then
      return nil, "expansions in a here-document with an unquoted delimiter"
    end
  end
  return i
end

-- Splits s into tokens; nil, reason for what is not analysed.
function M.split(s)
  if type(s) ~= "string" then return nil, "no command line" end
  if s:find("%z") then return nil, "a NUL byte" end
  local tokens = {}
  local i, n = 1, #s
  local buf, w -- the word being read: its characters, and its flags
  local pending -- a redirection waiting for its target word
  local heredocs = {} -- here-documents whose bodies follow the next newline

  local function start()
    if not buf then
      buf = {}
      w = { quoted = false, expand = false, split = false, glob = false, lead = false }
    end
  end
  local function add(text) start(); buf[#buf + 1] = text end
  -- marks the word's value as shell-dependent; first: at the word's first character
  local function dynamic(split)
    start()
    w.expand = true
    if split then w.split = true end
    if #buf == 0 then w.lead = true end
  end
  local function finish()
    if not buf then return true end
    w.text = table.concat(buf)
    buf = nil
    if w.bracket and w.text:find("]", 1, true) then
      w.glob = true
      if w.bracket == "lead" then w.lead = true end
    end
    w.bracket = nil
    local tok = w
    if pending then
      pending.target = tok
      if pending.redir == "<<" or pending.redir == "<<-" then
        pending.literal = tok.quoted
        heredocs[#heredocs + 1] = pending
      end
      tokens[#tokens + 1] = pending
      pending = nil
    else
      tokens[#tokens + 1] = tok
    end
    return true
  end
  local function operator(op)
    finish()
    if pending then return nil, "a redirection without a target" end
    tokens[#tokens + 1] = { op = op }
    return true
  end

  while i <= n do
    local c = s:sub(i, i)
    if c == " " or c == "\t" then
      finish()
      i = i + 1
    elseif c == "\\" then
      if s:sub(i + 1, i + 1) == "\n" then
        i = i + 2
      elseif i == n then
        add("\\")
        i = i + 1
      else
        start(); w.quoted = true
        add(s:sub(i + 1, i + 1))
        i = i + 2
      end
    elseif c == "'" then
      local j = s:find("'", i + 1, true)
      if not j then return nil, "an unterminated quote" end
      start(); w.quoted = true
      add(s:sub(i + 1, j - 1))
      i = j + 1
    elseif c == '"' or (c == "$" and s:sub(i + 1, i + 1) == '"') then
      if c == "$" then dynamic(false); i = i + 1 end -- $"..." (a translation)
      start(); w.quoted = true
      local j = i + 1
      local parts = {}
      while true do
        if j > n then return nil, "an unterminated quote" end
        local d = s:sub(j, j)
        if d == '"' then break end
        if d == "\\" and j < n then
          local e = s:sub(j + 1, j + 1)
          if e == "$" or e == "`" or e == '"' or e == "\\" then
            parts[#parts + 1] = e
          elseif e ~= "\n" then
            parts[#parts + 1] = d .. e
          end
          j = j + 2
        elseif d == "`" then
          return nil, "command substitution"
        elseif d == "$" then
          local e = s:sub(j + 1, j + 1)
          if e == "(" then return nil, "command substitution" end
          if e == "[" then return nil, "arithmetic expansion" end
          if e == "{" then
            local _, why = param_head(s, j)
            if why then return nil, why end
          end
          if e:match("^[%a_{]") or e:match("^" .. SPECIAL_PARAMS .. "$") then
            if #buf == 0 and #parts == 0 then w.lead = true end
            w.expand = true
            if e == "@" or s:sub(j + 1, j + 2) == "{@" then w.split = true end
          end
          parts[#parts + 1] = d
          j = j + 1
        else
          parts[#parts + 1] = d
          j = j + 1
        end
      end
      add(table.concat(parts))
      i = j + 1
    elseif c == "`" then
      return nil, "command substitution"
    elseif c == "$" then
      local d = s:sub(i + 1, i + 1)
      if d == "(" then return nil, "command substitution" end
      if d == "[" then return nil, "arithmetic expansion" end
      if d == "'" then
        -- $'...' (ANSI-C quoting): its value is not the literal text
        local j = i + 2
        while j <= n and s:sub(j, j) ~= "'" do
          if s:sub(j, j) == "\\" then j = j + 1 end
          j = j + 1
        end
        if j > n then return nil, "an unterminated quote" end
        dynamic(false); w.quoted = true
        add(s:sub(i + 2, j - 1))
        i = j + 1
      elseif d == "{" then
        local _, why = param_head(s, i)
        if why then return nil, why end
        dynamic(true)
        add("$")
        i = i + 1
      elseif d:match("^[%a_]") or d:match("^" .. SPECIAL_PARAMS .. "$") then
        dynamic(true)
        add("$")
        i = i + 1
      else
        add("$") -- a lone $ is literal
        i = i + 1
      end
    elseif c == "#" and not buf then
      local j = s:find("\n", i, true)
      i = j or (n + 1)
    elseif c == "\n" then
      local ok, why = operator("\n")
      if not ok then return nil, why end
      i = i + 1
      if #heredocs > 0 then
        i, why = heredoc_bodies(s, i, heredocs)
        if not i then return nil, why end
        heredocs = {}
      end
    elseif c == ";" or c == "(" or c == ")" then
      local op = c
      if c == ";" then
        op = (s:sub(i, i + 2) == ";;&" and ";;&") or (s:sub(i, i + 1) == ";;" and ";;") or
          (s:sub(i, i + 1) == ";&" and ";&") or ";"
      elseif c == "(" and s:sub(i + 1, i + 1) == "(" then
        return nil, "arithmetic commands"
      end
      local ok, why = operator(op)
      if not ok then return nil, why end
      i = i + #op
    elseif c == "|" or c == "&" then
      if c == "&" and s:sub(i + 1, i + 1) == ">" then
        finish()
        if pending then return nil, "a redirection without a target" end
        local op = s:sub(i, i + 2) == "&>>" and "&>>" or "&>"
        pending = { redir = op }
        i = i + #op
      else
        local two = s:sub(i, i + 1)
        local op = (two == "||" or two == "&&" or two == "|&") and two or c
        local ok, why = operator(op)
        if not ok then return nil, why end
        i = i + #op
      end
    elseif c == "<" or c == ">" then
      -- a word of digits right before is the file descriptor: 2>file
      local fd
      if buf and not w.quoted and not w.expand and table.concat(buf):match("^%d+$") then
        fd = tonumber(table.concat(buf))
        buf = nil
      end
      finish()
      if pending then return nil, "a redirection without a target" end
      local op
      for _, cand in ipairs(REDIRS) do
        if s:sub(i, i + #cand - 1) == cand then op = cand break end
      end
      if op == "<(" or op == ">(" then return nil, "process substitution" end
      pending = { redir = op, fd = fd }
      i = i + #op
    else
      if c == "*" or c == "?" then
        start()
        w.glob = true
        if #buf == 0 then w.lead = true end
      elseif c == "[" then
        -- a bracket glob if a "]" follows in the word ("[" and "[[" alone are the test commands)
        start()
        w.bracket = w.bracket or (#buf == 0 and "lead" or "inside")
      elseif c == "~" and (not buf or buf[#buf] == "=" or buf[#buf] == ":") then
        start()
        w.expand = true -- a home directory: a path, never an option
      elseif c == "{" and (buf or s:sub(i + 1, i + 1):match("^[^%s;&|<>()]$")) then
        dynamic(true) -- brace expansion {a,b} / {1..3}; a lone "{" is the grouping keyword
      elseif c == "=" and buf and not w.quoted and not w.expand and not w.assign then
        local name = table.concat(buf):match("^([%a_][%w_]*)%+?$")
        if name then w.assign = name end
      end
      add(c)
      i = i + 1
    end
  end
  finish()
  if pending then return nil, "a redirection without a target" end
  if #heredocs > 0 then return nil, "an unterminated here-document" end
  return tokens
end

-- Simple commands of a line: {words = {...}, redirs = {...}, op = the operator
-- before it ("" for the first)}. nil, reason for a function definition (its
-- body would run later, where it is called).
function M.commands(line)
  local tokens, why = M.split(line)
  if not tokens then return nil, why end
  local out, cur, before = {}, { words = {}, redirs = {} }, ""
  for _, t in ipairs(tokens) do
    if t.op then
      if t.op == "(" and #cur.words > 0 then
        return nil, "function definitions"
      end
      if #cur.words > 0 or #cur.redirs > 0 then
        cur.op = before
        out[#out + 1] = cur
      end
      cur, before = { words = {}, redirs = {} }, t.op
    elseif t.redir then
      cur.redirs[#cur.redirs + 1] = t
    else
      cur.words[#cur.words + 1] = t
    end
  end
  if #cur.words > 0 or #cur.redirs > 0 then
    cur.op = before
    out[#out + 1] = cur
  end
  return out
end

-- The words of a line that is one simple command of literal words (no
-- operators, redirections or expansions), as strings.
function M.words(line)
  local tokens, why = M.split(line)
  if not tokens then return nil, why end
  local out = {}
  for _, t in ipairs(tokens) do
    if t.op or t.redir then return nil, "more than one simple command" end
    if t.expand or t.glob then return nil, "the word '" .. t.text .. "' is not literal" end
    out[#out + 1] = t.text
  end
  return out
end

return M
