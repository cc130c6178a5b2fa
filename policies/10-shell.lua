-- 10-shell: shell commands that may write outside /workspace/working or
-- /workspace/output need a human's approval. The command line is tokenized
-- (quotes, operators, redirections) and every simple command is checked:
-- known read-only commands (ls, cat, grep, rg, git log/diff, pytest, ...) are
-- allowed; writers (redirections, tee, cp, mv, rm, mkdir, touch, ln, chmod,
-- sed -i, dd, ...) are allowed only when every path they write is provably
-- under working/ or output/; git commit/push, interpreters, unknown programs,
-- command substitution, heredocs, variables in written paths and anything
-- else that cannot be proven read-only or confined need approval. This policy
-- never denies, and abstains for every other tool.

local WORKDIR = "/workspace/working"
local CONFINED = { "/workspace/working", "/workspace/output" }
local MAX_DEPTH = 3

-- --------------------------------------------------------------- paths --

local function normalize(path)
  local parts = {}
  for seg in path:gmatch("[^/]+") do
    if seg == ".." then
      if #parts == 0 then return nil end
      parts[#parts] = nil
    elseif seg ~= "." then
      parts[#parts + 1] = seg
    end
  end
  return "/" .. table.concat(parts, "/")
end

local function under(path, root)
  return path == root or path:sub(1, #root + 1) == root .. "/"
end

-- Absolute path of a literal word, or nil when it cannot be known.
local function resolve(word, cwd)
  if word.expand or word.text == "" then return nil end
  local t = word.text
  if t:sub(1, 1) == "/" then return normalize(t) end
  if not cwd then return nil end
  return normalize(cwd .. "/" .. t)
end

local DEVICES = { ["/dev/null"] = true, ["/dev/stdout"] = true, ["/dev/stderr"] = true, ["/dev/tty"] = true }

local function confined(word, cwd)
  local abs = resolve(word, cwd)
  if not abs then return false end
  if DEVICES[abs] or abs:match("^/dev/fd/%d+$") then return true end
  for _, root in ipairs(CONFINED) do
    if under(abs, root) then return true end
  end
  return false
end

-- ----------------------------------------------------------- tokenizer --

-- Words are {text=, expand=} (expand: the word's value depends on the shell:
-- $var, ~, {a,b}); operators {op=}; redirections {redir=, target=word}.
-- Returns tokens or nil, reason for what this policy does not analyse.
local function tokenize(s)
  local tokens = {}
  local i, n = 1, #s
  local word, quoted, expand = nil, false, false
  local assign -- NAME when the word began with an unquoted NAME= (a variable assignment)
  local pending -- a redirection waiting for its target word

  local function emit(tok)
    if pending then
      if tok.text ~= nil then
        pending.target = tok
        tokens[#tokens + 1] = pending
        pending = nil
        return true
      end
      return false
    end
    tokens[#tokens + 1] = tok
    return true
  end
  local function finish()
    if word then
      local ok = emit({ text = word, expand = expand, quoted = quoted, assign = assign })
      word, quoted, expand, assign = nil, false, false, nil
      return ok
    end
    return true
  end
  local function add(ch)
    word = (word or "") .. ch
  end

  while i <= n do
    local c = s:sub(i, i)
    if c == " " or c == "\t" then
      if not finish() then return nil, "a redirection without a target" end
      i = i + 1
    elseif c == "\\" then
      if s:sub(i + 1, i + 1) == "\n" then
        i = i + 2
      else
        add(s:sub(i + 1, i + 1))
        quoted = true
        i = i + 2
      end
    elseif c == "'" then
      local j = s:find("'", i + 1, true)
      if not j then return nil, "an unterminated quote" end
      add(s:sub(i + 1, j - 1))
      quoted = true
      i = j + 1
    elseif c == '"' then
      local j = i + 1
      local buf = {}
      while true do
        if j > n then return nil, "an unterminated quote" end
        local d = s:sub(j, j)
        if d == '"' then break end
        if d == "\\" and j < n then
          local e = s:sub(j + 1, j + 1)
          if e == "$" or e == "`" or e == '"' or e == "\\" then
            buf[#buf + 1] = e
          elseif e ~= "\n" then
            buf[#buf + 1] = d .. e
          end
          j = j + 2
        else
          if d == "`" or (d == "$" and s:sub(j + 1, j + 1) == "(") then
            return nil, "command substitution"
          end
          if d == "$" then expand = true end
          buf[#buf + 1] = d
          j = j + 1
        end
      end
      add(table.concat(buf))
      quoted = true
      i = j + 1
    elseif c == "`" then
      return nil, "command substitution"
    elseif c == "$" then
      local d = s:sub(i + 1, i + 1)
      if d == "(" then return nil, "command substitution" end
      if d == "'" then
        -- $'...' (ANSI-C quoting): its value is not literal text
        local j = i + 2
        while j <= n and s:sub(j, j) ~= "'" do
          if s:sub(j, j) == "\\" then j = j + 1 end
          j = j + 1
        end
        if j > n then return nil, "an unterminated quote" end
        add(s:sub(i + 2, j - 1))
        expand = true
        i = j + 1
      else
        add("$")
        expand = true
        i = i + 1
      end
    elseif c == "#" and not word then
      local j = s:find("\n", i, true)
      i = j or (n + 1)
    elseif c == "\n" or c == ";" or c == "(" or c == ")" then
      if not finish() then return nil, "a redirection without a target" end
      if pending then return nil, "a redirection without a target" end
      if c == "(" and s:sub(i + 1, i + 1) == "(" then return nil, "arithmetic commands" end
      emit({ op = c == ";" and (s:sub(i + 1, i + 1) == ";" and ";;" or ";") or c })
      i = i + ((c == ";" and s:sub(i + 1, i + 1) == ";") and 2 or 1)
    elseif c == "|" or c == "&" then
      local two = s:sub(i, i + 1)
      if c == "&" and s:sub(i + 1, i + 1) == ">" then
        if not finish() then return nil, "a redirection without a target" end
        if pending then return nil, "a redirection without a target" end
        local op = s:sub(i, i + 2) == "&>>" and "&>>" or "&>"
        pending = { redir = op }
        i = i + #op
      else
        if not finish() then return nil, "a redirection without a target" end
        if pending then return nil, "a redirection without a target" end
        local op = (two == "||" or two == "&&" or two == "|&") and two or c
        emit({ op = op })
        i = i + #op
      end
    elseif c == "<" or c == ">" then
      -- a word of digits right before is the file descriptor: 2>file
      if word and not quoted and word:match("^%d+$") then word, expand = nil, false end
      if not finish() then return nil, "a redirection without a target" end
      if pending then return nil, "a redirection without a target" end
      local op
      for _, cand in ipairs({ "<<<", "<<-", "<<", "<>", "<&", "<(", ">>", ">&", ">|", ">(", "<", ">" }) do
        if s:sub(i, i + #cand - 1) == cand then op = cand break end
      end
      if op == "<<" or op == "<<-" then return nil, "a here-document" end
      if op == "<(" or op == ">(" then return nil, "process substitution" end
      pending = { redir = op }
      i = i + #op
    else
      if not word then
        if c == "~" then expand = true end
      end
      if c == "{" and (word or s:sub(i + 1, i + 1):match("^%S$")) then
        -- brace expansion {a,b} / {1..3}; a lone "{" is the grouping keyword
        expand = true
      end
      if c == "=" and not quoted and not assign and word and word:match("^[%a_][%w_]*%+?$") then
        assign = word:gsub("%+$", "")
      end
      add(c)
      i = i + 1
    end
  end
  if not finish() then return nil, "a redirection without a target" end
  if pending then return nil, "a redirection without a target" end
  return tokens
end

-- Splits tokens into simple commands: {words = {...}, redirs = {...}}.
local function commands(tokens)
  local out, cur = {}, { words = {}, redirs = {} }
  for _, t in ipairs(tokens) do
    if t.op then
      if #cur.words > 0 or #cur.redirs > 0 then out[#out + 1] = cur end
      cur = { words = {}, redirs = {} }
    elseif t.redir then
      cur.redirs[#cur.redirs + 1] = t
    else
      cur.words[#cur.words + 1] = t
    end
  end
  if #cur.words > 0 or #cur.redirs > 0 then out[#out + 1] = cur end
  return out
end

-- ------------------------------------------------------------ commands --

-- Commands that only read (whatever their arguments, apart from the checks below).
local READ_ONLY = {}
for _, c in ipairs({ "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "echo", "printf", "pwd",
  "true", "false", "test", "[", "[[", "]]", "stat", "file", "du", "df", "which", "type", "date", "whoami", "id",
  "uname", "diff", "cmp", "tr", "cut", "paste", "nl", "od", "hexdump", "basename", "dirname", "realpath",
  "readlink", "seq", "jq", "column", "comm", "fold", "fmt", "rev", "tac", "expand", "unexpand", "md5sum",
  "sha1sum", "sha256sum", "sha512sum", "cksum", "b2sum", "base64", "strings", "less", "more", "ps",
  "nproc", "free", "uptime", "printenv", "locale", "getconf", "expr", "sleep", "yes", ":", "exit", "set", "unset",
  "export", "declare", "typeset", "readonly", "read", "wait", "shift", "local", "return", "break", "continue",
  "tree", "sort", "uniq", "xxd", "find", "awk", "gawk", "mawk", "sed", "env", "pytest", "py.test", "diff3", "look",
  "numfmt", "tsort", "join", "cal", "lscpu", "lsblk", "pgrep" }) do
  READ_ONLY[c] = true
end

-- Variables that change which programs run or where "cd" goes.
local function dangerous_var(name)
  return name == "PATH" or name:match("^LD_") ~= nil or name == "BASH_ENV" or name == "ENV" or name == "IFS"
    or name:match("^GIT_") ~= nil or name:match("PAGER$") ~= nil or name == "PROMPT_COMMAND" or name == "SHELLOPTS"
    or name == "BASHOPTS" or name == "PS4" or name == "CDPATH" or name == "EDITOR" or name == "VISUAL"
end
local function assignment(word)
  return word.assign
end

-- Wrappers that run the rest of the line as a command. The value is the set of
-- their options that take an argument.
local WRAPPERS = {
  command = {}, builtin = {}, exec = {}, nohup = {}, time = {}, stdbuf = { ["-i"] = true, ["-o"] = true, ["-e"] = true },
  nice = { ["-n"] = true }, timeout = { ["-s"] = true, ["-k"] = true, ["--signal"] = true, ["--kill-after"] = true },
  xargs = { ["-n"] = true, ["-I"] = true, ["-d"] = true, ["-P"] = true, ["-L"] = true, ["-s"] = true, ["-E"] = true,
    ["-a"] = true },
}

local KEYWORDS = { ["if"] = true, ["then"] = true, ["else"] = true, ["elif"] = true, ["do"] = true, ["while"] = true,
  ["until"] = true, ["!"] = true, ["{"] = true, ["}"] = true, ["fi"] = true, ["done"] = true, ["time"] = true }

local GIT_READ = {}
for _, c in ipairs({ "log", "diff", "show", "status", "blame", "grep", "ls-files", "ls-tree", "rev-parse", "describe",
  "shortlog", "cat-file", "rev-list", "whatchanged", "version", "help", "annotate", "name-rev", "merge-base",
  "for-each-ref", "show-ref", "count-objects", "cherry", "range-diff" }) do
  GIT_READ[c] = true
end

local SHELLS = { sh = true, bash = true, dash = true, zsh = true, ksh = true, ash = true, busybox_sh = true }

-- Options (per writer) whose next word is an argument, not a path.
local OPT_ARGS = {
  cp = { ["-S"] = true, ["--suffix"] = true }, mv = { ["-S"] = true, ["--suffix"] = true },
  mkdir = { ["-m"] = true, ["--mode"] = true }, touch = { ["-d"] = true, ["-t"] = true, ["-r"] = true },
  truncate = { ["-s"] = true, ["-r"] = true, ["--size"] = true, ["--reference"] = true },
  install = { ["-m"] = true, ["-o"] = true, ["-g"] = true, ["-S"] = true, ["--mode"] = true, ["--owner"] = true,
    ["--group"] = true },
  ln = { ["-S"] = true }, rm = {}, rmdir = {}, tee = {}, shred = { ["-n"] = true, ["-s"] = true },
  chmod = {}, chown = {}, chgrp = {},
  gzip = { ["-S"] = true }, gunzip = { ["-S"] = true }, bzip2 = {}, bunzip2 = {}, xz = {}, unxz = {}, zstd = { ["-o"] = true },
}

-- Splits args into options and operands ("--" ends the options). Returns
-- operands (words), options (list of {text, value}).
local function split_args(args, opt_args)
  local operands, options = {}, {}
  local i, done = 1, false
  while i <= #args do
    local w = args[i]
    if not done and w.text == "--" and not w.quoted then
      done = true
    elseif not done and w.text:sub(1, 1) == "-" and w.text ~= "-" then
      local name, value = w.text:match("^(%-%-[^=]+)=(.*)$")
      if name then
        options[#options + 1] = { text = name, value = { text = value, expand = w.expand } }
      elseif opt_args and opt_args[w.text] then
        options[#options + 1] = { text = w.text, value = args[i + 1] }
        i = i + 1
      else
        options[#options + 1] = { text = w.text }
      end
    else
      operands[#operands + 1] = w
    end
    i = i + 1
  end
  return operands, options
end

local function has_option(options, ...)
  for _, o in ipairs(options) do
    for _, want in ipairs({ ... }) do
      if o.text == want then return o end
      -- a short flag inside a cluster: -rf has -f
      if #want == 2 and want:sub(1, 1) == "-" and o.text:sub(1, 1) == "-" and o.text:sub(2, 2) ~= "-"
          and o.text:find(want:sub(2, 2), 2, true) then
        return o
      end
    end
  end
  return nil
end

-- A sed script is read-only when it uses only addresses and p d q n = l P D N
-- h H g G x b t : { } commands, y///, and s/// with flags from [gpiImM0-9].
local function sed_script_safe(script)
  local i, n = 1, #script
  local function skip_ws()
    while i <= n and script:sub(i, i):match("[%s;]") do i = i + 1 end
  end
  local function delimited(delim)
    -- reads up to the next unescaped delim; false if none
    while i <= n do
      local c = script:sub(i, i)
      if c == "\\" then
        i = i + 2
      elseif c == delim then
        i = i + 1
        return true
      else
        i = i + 1
      end
    end
    return false
  end
  local function address()
    local c = script:sub(i, i)
    if c:match("%d") then
      while i <= n and script:sub(i, i):match("[%d~]") do i = i + 1 end
    elseif c == "$" then
      i = i + 1
    elseif c == "/" then
      i = i + 1
      if not delimited("/") then return false end
      while i <= n and script:sub(i, i):match("[IM]") do i = i + 1 end
    elseif c == "\\" then
      local d = script:sub(i + 1, i + 1)
      i = i + 2
      if not delimited(d) then return false end
    end
    return true
  end
  while true do
    skip_ws()
    if i > n then return true end
    if not address() then return false end
    if script:sub(i, i) == "," then
      i = i + 1
      if script:sub(i, i) == "+" or script:sub(i, i) == "~" then i = i + 1 end
      if not address() then return false end
    end
    while script:sub(i, i):match("[%s!]") and i <= n do i = i + 1 end
    local cmd = script:sub(i, i)
    i = i + 1
    if cmd == "s" then
      local d = script:sub(i, i)
      if d == "" or d == "\\" or d == "\n" then return false end
      i = i + 1
      if not delimited(d) or not delimited(d) then return false end
      local flags = script:match("^[%w]*", i)
      if flags:find("[^gpiImM%d]") then return false end
      i = i + #flags
    elseif cmd == "y" then
      local d = script:sub(i, i)
      i = i + 1
      if not delimited(d) or not delimited(d) then return false end
    elseif cmd == "b" or cmd == "t" or cmd == "T" or cmd == ":" then
      while i <= n and not script:sub(i, i):match("[;\n}]") do i = i + 1 end
    elseif cmd ~= "" and ("pdqQn=lPDNhHgGxz{}"):find(cmd, 1, true) then
      -- read-only
    else
      return false
    end
  end
end

local analyze -- forward

-- Checks one simple command. Returns nil when it is fine, or a reason for
-- approval. state.cwd is the working directory (nil once unknown).
local function check_command(cmd, state, depth)
  -- redirections first: every output target must be confined
  for _, r in ipairs(cmd.redirs) do
    local op = r.redir
    if op == ">" or op == ">>" or op == ">|" or op == "&>" or op == "&>>" or op == "<>" or op == ">&" then
      local t = r.target
      local dup = (op == ">&") and (t.text:match("^%d+$") or t.text == "-") and not t.expand
      if not dup and not confined(t, state.cwd) then
        return "output redirected to '" .. t.text .. "', outside /workspace/working and /workspace/output"
      end
    end
  end

  local words = cmd.words
  local k = 1
  -- keywords and variable assignments in front
  while k <= #words do
    local w = words[k]
    if not w.quoted and KEYWORDS[w.text] then
      k = k + 1
    elseif assignment(w) then
      if dangerous_var(assignment(w)) then return "setting " .. assignment(w) .. " changes what runs" end
      k = k + 1
    else
      break
    end
  end
  if k > #words then return nil end
  local first = words[k]
  if not first.quoted and (first.text == "for" or first.text == "select") then
    return nil -- "for x in words": no command here; the body is checked on its own
  end
  if not first.quoted and (first.text == "case" or first.text == "function" or first.text == "coproc") then
    return "'" .. first.text .. "' constructs are not analysed"
  end
  if first.expand then return "the command name '" .. first.text .. "' is not literal" end
  local name = first.text
  local dir, base = name:match("^(.*)/([^/]+)$")
  if dir then
    if dir == "/bin" or dir == "/usr/bin" or dir == "/usr/local/bin" or dir == "/sbin" or dir == "/usr/sbin" then
      name = base
    else
      return "runs the program '" .. first.text .. "' by path"
    end
  end
  local args = {}
  for j = k + 1, #words do args[#args + 1] = words[j] end

  -- wrappers: check what they run
  if name == "command" and args[1] and (args[1].text == "-v" or args[1].text == "-V") then
    return nil -- a lookup, nothing runs
  end
  if WRAPPERS[name] then
    local rest, j = {}, 1
    while j <= #args and args[j].text:sub(1, 1) == "-" do
      if WRAPPERS[name][args[j].text] then j = j + 1 end
      j = j + 1
    end
    if name == "timeout" and j <= #args then j = j + 1 end -- the duration
    if name == "nice" and j <= #args and args[j].text:match("^%-?%d+$") then j = j + 1 end
    for x = j, #args do rest[#rest + 1] = args[x] end
    if #rest == 0 then return nil end
    local inner = { words = rest, redirs = {} }
    if name == "xargs" then
      -- its arguments come from the input: only read-only commands are known safe
      local inner_name = rest[1].text:match("([^/]+)$") or ""
      if not READ_ONLY[inner_name] or inner_name == "uniq" or inner_name == "xxd" or inner_name == "env"
          or SHELLS[inner_name] then
        return "'xargs " .. rest[1].text .. "' runs with arguments from its input"
      end
      state = { cwd = nil }
    end
    return check_command(inner, state, depth)
  end
  if name == "sudo" or name == "su" or name == "doas" then return "'" .. name .. "' changes the user" end

  if name == "cd" or name == "pushd" or name == "popd" then
    local j = 1
    while args[j] and (args[j].text == "-P" or args[j].text == "-L" or args[j].text == "-e" or args[j].text == "-@") do
      j = j + 1
    end
    if args[j] and args[j].text == "--" then j = j + 1 end
    local target = args[j]
    if name == "popd" or not target or target.text:match("^[-+]") then
      state.cwd = nil
    else
      local abs = resolve(target, state.cwd)
      state.cwd = abs
    end
    return nil
  end

  if SHELLS[name] then
    local j = 1
    local script
    while j <= #args do
      local t = args[j].text
      if t:sub(1, 1) == "-" and t:find("c", 2, true) and t:sub(2, 2) ~= "-" then
        script = args[j + 1]
        break
      elseif t == "-o" or t == "+o" then
        j = j + 2
      elseif t:sub(1, 1) == "-" or t:sub(1, 1) == "+" then
        j = j + 1
      else
        break
      end
    end
    if not script then return "'" .. name .. "' runs a script that is not shown" end
    if script.expand then return "'" .. name .. " -c' runs a command built from variables" end
    if depth >= MAX_DEPTH then return "shell commands nested too deeply" end
    return analyze(script.text, state, depth + 1)
  end

  if name == "python" or name == "python3" then
    if args[1] and args[1].text == "-m" and args[2] and args[2].text == "pytest" then return nil end
    return "'" .. name .. "' runs arbitrary code"
  end
  if name == "make" then
    if #args == 1 and args[1].text == "test" then return nil end
    return "'make' runs build recipes"
  end
  if name == "npm" then
    if (#args == 1 and args[1].text == "test") or (#args == 2 and args[1].text == "run" and args[2].text == "test") then
      return nil
    end
    return "'npm' runs package scripts"
  end

  if name == "git" then
    local j = 1
    while j <= #args do
      local t = args[j].text
      if t == "-C" then
        j = j + 2
      elseif t == "--no-pager" or t == "-P" or t == "--no-optional-locks" or t == "--bare"
          or t:match("^%-%-git%-dir=") or t:match("^%-%-work%-tree=") then
        j = j + 1
      elseif t:sub(1, 1) == "-" then
        return "git option '" .. t .. "' is not analysed"
      else
        break
      end
    end
    local sub = args[j]
    if not sub then return nil end
    if not sub.expand and sub.text == "clone" then
      -- a clone into working/ or output/ writes only there (the sandbox has no
      -- network, and hooks do not travel with a clone)
      local operands, x = {}, j + 1
      while x <= #args do
        local t = args[x].text
        if t == "-b" or t == "--branch" or t == "--depth" or t == "-o" or t == "--origin" then
          x = x + 2
        elseif t == "-q" or t == "--quiet" or t == "-n" or t == "--no-checkout" or t == "--single-branch"
            or t:match("^%-%-depth=") or t:match("^%-%-branch=") then
          x = x + 1
        elseif t:sub(1, 1) == "-" then
          return "'git clone " .. t .. "' is not analysed"
        else
          operands[#operands + 1] = args[x]
          x = x + 1
        end
      end
      if #operands == 2 and not operands[1].expand and confined(operands[2], state.cwd) then return nil end
      return "'git clone' writes outside working/output"
    end
    if sub.expand or not GIT_READ[sub.text] then
      return "'git " .. sub.text .. "' changes the repository or its remotes"
    end
    for x = j + 1, #args do
      local t = args[x].text
      if t:match("^%-%-output") then
        return "'git " .. sub.text .. " " .. t .. "' writes a file"
      end
      if t:match("^%-%-ext%-diff") or t:match("^%-%-textconv") then
        return "'git " .. sub.text .. " " .. t .. "' runs external programs"
      end
    end
    return nil
  end

  if READ_ONLY[name] then
    local operands, options = split_args(args, name == "sort" and { ["-o"] = true, ["-k"] = true, ["-t"] = true,
      ["-S"] = true, ["-T"] = true } or name == "tree" and { ["-o"] = true, ["-L"] = true, ["-P"] = true, ["-I"] = true }
      or name == "xxd" and { ["-c"] = true, ["-g"] = true, ["-l"] = true, ["-s"] = true, ["-o"] = true }
      or name == "uniq" and { ["-f"] = true, ["-s"] = true, ["-w"] = true } or nil)
    if name == "find" then
      for _, w in ipairs(args) do
        local t = w.text
        if t == "-delete" or t == "-exec" or t == "-execdir" or t == "-ok" or t == "-okdir" or t == "-fprint"
            or t == "-fprint0" or t == "-fprintf" or t == "-fls" then
          return "'find " .. t .. "' writes or runs commands"
        end
      end
    elseif name == "sort" or name == "tree" then
      local o = has_option(options, "-o", "--output")
      if o then
        local target = o.value or (o.text:match("^%-o(.+)$") and { text = o.text:sub(3) })
        if not target or not confined(target, state.cwd) then return "'" .. name .. " -o' writes outside working/output" end
      end
      if name == "sort" and has_option(options, "-T", "--temporary-directory") then
        return "'sort -T' writes temporary files elsewhere"
      end
    elseif name == "export" or name == "declare" or name == "typeset" or name == "readonly" or name == "local" then
      for _, w in ipairs(operands) do
        local var = assignment(w) or (not w.quoted and w.text:match("^([%a_][%w_]*)$"))
        if var and assignment(w) and dangerous_var(var) then return "setting " .. var .. " changes what runs" end
      end
    elseif name == "uniq" or name == "xxd" then
      if #operands >= 2 and not confined(operands[2], state.cwd) then
        return "'" .. name .. "' writes its second operand '" .. operands[2].text .. "'"
      end
    elseif name == "rg" then
      for _, o in ipairs(options) do
        if o.text:match("^%-%-pre") then return "'rg --pre' runs a command" end
      end
    elseif name == "date" then
      if has_option(options, "-s", "--set") then return "'date --set' changes the clock" end
    elseif name == "env" then
      -- env NAME=value ... cmd: check the command it runs
      local j = 1
      while j <= #args and (args[j].text:sub(1, 1) == "-" or args[j].text:match("^[%a_][%w_]*=")) do
        local var = args[j].text:match("^([%a_][%w_]*)=")
        if var and dangerous_var(var) then return "setting " .. var .. " changes what runs" end
        if args[j].text == "-u" or args[j].text == "-C" or args[j].text == "-S" then
          if args[j].text ~= "-u" then return "'env " .. args[j].text .. "' is not analysed" end
          j = j + 1
        end
        j = j + 1
      end
      if j <= #args then
        local rest = {}
        for x = j, #args do rest[#rest + 1] = args[x] end
        return check_command({ words = rest, redirs = {} }, state, depth)
      end
    elseif name == "awk" or name == "gawk" or name == "mawk" then
      for _, o in ipairs(options) do
        if o.text == "-f" or o.text:match("^%-%-file") or o.text == "-i" or o.text:match("^%-%-include")
            or o.text == "-E" or o.text:match("^%-%-exec") then
          return "'" .. name .. " " .. o.text .. "' is not analysed"
        end
      end
      local program = operands[1]
      if program and (program.text:find("system", 1, true) or program.text:find(">", 1, true)
          or program.text:find("|", 1, true) or program.text:find("inplace", 1, true)) then
        return "the awk program may write files or run commands"
      end
    elseif name == "sed" then
      local scripts, j, inplace = {}, 1, false
      local files = {}
      while j <= #args do
        local t = args[j].text
        if t == "-e" or t == "--expression" then
          scripts[#scripts + 1] = args[j + 1] and args[j + 1].text or ""
          j = j + 2
        elseif t:match("^%-%-expression=") then
          scripts[#scripts + 1] = t:match("=(.*)$")
          j = j + 1
        elseif t == "-f" or t:match("^%-%-file") then
          return "'sed -f' runs a script that is not shown"
        elseif t == "-i" or t:match("^%-%-in%-place") or (t:match("^%-[%a]+") and t:sub(2, 2) ~= "-" and t:find("i", 2, true)) then
          inplace = true
          j = j + 1
        elseif t:sub(1, 1) == "-" and t ~= "-" then
          if t:sub(1, 2) ~= "--" and t:find("[ef]", 2) then return "sed option '" .. t .. "' is not analysed" end
          j = j + 1
        else
          files[#files + 1] = args[j]
          j = j + 1
        end
      end
      if #scripts == 0 then
        if #files == 0 then return nil end
        scripts[1] = table.remove(files, 1).text
      end
      for _, sc in ipairs(scripts) do
        if not sed_script_safe(sc) then return "the sed script may write files or run commands" end
      end
      if inplace then
        if #files == 0 then return "'sed -i' without files" end
        for _, f in ipairs(files) do
          if not confined(f, state.cwd) then return "'sed -i' edits '" .. f.text .. "', outside working/output" end
        end
      end
    end
    return nil
  end

  -- writers: allowed when every path they write is confined
  if OPT_ARGS[name] then
    local operands, options = split_args(args, OPT_ARGS[name])
    local targets = {}
    if name == "cp" or name == "install" then
      local t = has_option(options, "-t", "--target-directory")
      if t and t.value then
        targets[1] = t.value
      elseif t then
        return "'" .. name .. " -t' is not analysed in this form"
      else
        targets[1] = operands[#operands]
      end
    elseif name == "chmod" or name == "chown" or name == "chgrp" then
      local ref = false
      for _, o in ipairs(options) do if o.text:match("^%-%-reference") then ref = true end end
      for x = ref and 1 or 2, #operands do targets[#targets + 1] = operands[x] end
    elseif name == "gzip" or name == "gunzip" or name == "bzip2" or name == "bunzip2" or name == "xz"
        or name == "unxz" or name == "zstd" then
      if has_option(options, "-c", "--stdout", "-t", "--test", "-l", "--list") then return nil end
      targets = operands
    else
      targets = operands -- rm, rmdir, mkdir, touch, truncate, mv, ln, tee, shred
      if name == "mv" or name == "ln" then
        local t = has_option(options, "-t", "--target-directory")
        if t and t.value then targets[#targets + 1] = t.value end
      end
    end
    for _, w in ipairs(targets) do
      if not confined(w, state.cwd) then
        return "'" .. name .. "' writes '" .. w.text .. "', outside /workspace/working and /workspace/output"
      end
    end
    return nil
  end

  if name == "dd" then
    for _, w in ipairs(args) do
      local of = w.text:match("^of=(.*)$")
      if of and not confined({ text = of, expand = w.expand }, state.cwd) then
        return "'dd' writes '" .. of .. "', outside /workspace/working and /workspace/output"
      end
    end
    return nil
  end

  if name == "tar" then
    -- only listing an archive (tar tf x.tar, tar -tzvf x.tgz, tar --list -f x.tar) is read-only
    local listing = false
    for x, w in ipairs(args) do
      local t = w.text
      local cluster = t:match("^%-(%a+)$") or (x == 1 and t:match("^(%a+)$"))
      if t == "--list" then
        listing = true
      elseif cluster then
        if not cluster:match("^[tvzjJfO]+$") then return "'tar -" .. cluster .. "' is not a listing" end
        if cluster:find("t", 1, true) then listing = true end
      elseif t:sub(1, 2) == "--" and not (t == "--verbose" or t:match("^%-%-file=") or t == "--gzip"
          or t == "--bzip2" or t == "--xz") then
        return "'tar " .. t .. "' is not analysed"
      end
    end
    if listing then return nil end
    return "'tar' extracts or creates archives"
  end

  return "'" .. name .. "' is not known to be read-only"
end

-- Analyses a command line; returns nil (fine) or a reason for approval.
function analyze(line, state, depth)
  local tokens, why = tokenize(line)
  if not tokens then return "the command uses " .. why .. ", which is not analysed" end
  for _, cmd in ipairs(commands(tokens)) do
    local reason = check_command(cmd, state, depth)
    if reason then return reason end
  end
  return nil
end

return {
  name = "shell",
  analyze = function(command) return analyze(command, { cwd = WORKDIR }, 0) end,
  decide = function(req)
    if req.tool ~= "shell" then return nil end
    local command = type(req.args) == "table" and req.args.command or nil
    if type(command) ~= "string" then return "approve", "shell: no command string to analyse" end
    local reason = analyze(command, { cwd = WORKDIR }, 0)
    if reason then
      return "approve", "shell: " .. reason
    end
    return "allow", "shell: read-only or confined to /workspace/working and /workspace/output"
  end,
}
