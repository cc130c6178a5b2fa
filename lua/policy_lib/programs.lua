-- policy_lib.programs: the audited table of the programs a shell command may
-- run without a human's approval, and how each one's arguments are checked.
-- A program that is not here, or an option a checker does not know, is not
-- read-only (policy_lib.commands turns that into "ask a human").
--
-- Every entry is one of:
--   "any"      read-only whatever its arguments: none of its options writes a
--              file, runs a program or changes what later commands do;
--   checker    function(ctx, args, name) -> nil (fine) or the reason it is not,
--              for programs with options that write files or run programs.
--
-- ctx (built by policy_lib.commands) gives the checkers:
--   ctx:writes(word, who)  nil, or why word is not a path under the writable roots
--   ctx:sink(word, who)    the same, but /dev/null, /dev/stdout, /dev/stderr, /dev/fd/N are fine
--   ctx:dirs(word, base)   the absolute directories word names from base (or from each
--                          directory the shell may be in), or nil when unknown
--   ctx:cwd_confined()     whether every directory the shell may be in is writable
--   ctx:run(words, who)    checks a command another program runs (env, nice, timeout, ...)
--   ctx:script(text, who)  checks a shell script given on the command line (sh -c)
--   ctx:shell_var(name)    nil, or why setting the shell variable name is not fine
--   ctx:exported(name, cmd) nil, or why exporting name (to cmd) is not fine
--   ctx:cd(word)           records a change of directory (nil word: unknown)
--   ctx.test_runners       the policy lets the project's own tests run (pytest, make test, npm test)
local options = require "policy_lib.options"

local P = {}

-- Reads args by spec; returns r or nil, the reason naming the program.
local function parse(name, args, spec)
  local r, why = options.parse(args, spec)
  if not r then return nil, "'" .. name .. "': " .. why end
  return r
end

local function longs(list, arity)
  local t = {}
  for _, n in ipairs(list) do t[n] = arity end
  return t
end
local function merge(...)
  local out = {}
  for _, t in ipairs({ ... }) do for k, v in pairs(t) do out[k] = v end end
  return out
end

local function literal(word) return word and not word.expand and not word.glob end
local function has_slash(word) return word and word.text:find("/", 1, true) ~= nil end

-- ------------------------------------------------------ read-only, any args --

for _, n in ipairs({ "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "echo", "pwd", "true", "false", ":",
  "stat", "du", "df", "which", "whoami", "id", "groups", "uname", "arch", "tty", "diff", "cmp", "tr", "cut", "paste",
  "nl", "od", "hexdump", "basename", "dirname", "realpath", "readlink", "seq", "jq", "column", "comm", "fold", "fmt",
  "rev", "tac", "expand", "unexpand", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum",
  "cksum", "b2sum", "base64", "base32", "strings", "ps", "nproc", "free", "uptime", "printenv", "locale", "getconf",
  "expr", "sleep", "yes", "numfmt", "tsort", "join", "cal", "lscpu", "lsblk", "pgrep", "look", "type",
  "shift", "exit", "return", "break", "continue" }) do
  P[n] = "any"
end

-- ------------------------------------------------------- shell built-ins --

-- printf -v NAME (bash) assigns a variable.
P.printf = function(ctx, args)
  if args[1] and args[1].text == "-v" then
    if not literal(args[2]) then return "'printf -v' assigns a variable that is not named literally" end
    return ctx:shell_var(args[2].text)
  end
end

-- test -v NAME evaluates an array subscript in bash (arithmetic, which can run commands).
local function check_test(ctx, args, name)
  for _, w in ipairs(args) do
    if w.text == "-v" or w.text == "-R" then return "'" .. name .. " " .. w.text .. "' is not analysed" end
    if w.split then return "the " .. name .. " operand '" .. w.text .. "' may expand into -v (quote it)" end
  end
end
P.test = check_test
P["["] = check_test

-- [[ ]] (bash) evaluates the operands of -eq and friends as arithmetic, which
-- can run commands from a variable's value: only integer literals there.
local ARITH = longs({ "-eq", "-ne", "-lt", "-le", "-gt", "-ge" }, true)
P["[["] = function(ctx, args)
  for k, w in ipairs(args) do
    if w.text == "-v" or w.text == "-R" then return "'[[ " .. w.text .. "' is not analysed" end
    if ARITH[w.text] then
      for _, o in ipairs({ args[k - 1], args[k + 1] }) do
        if not literal(o) or not o.text:match("^%-?%d+$") then
          return "'[[ ... " .. w.text .. " ... ]]' with operands that are not integers (bash evaluates them)"
        end
      end
    end
  end
end

local SET_LETTERS = "euxvfCn"
local SET_O = longs({ "pipefail", "errexit", "nounset", "xtrace", "verbose", "noglob", "noclobber", "noexec" }, true)
P.set = function(ctx, args)
  local k = 1
  for _, w in ipairs(args) do
    if not literal(w) then return "'set " .. w.text .. "' may expand into options" end
  end
  while args[k] do
    local t = args[k].text
    if t == "--" or t == "-" then return nil end
    if (t == "-o" or t == "+o") then
      local o = args[k + 1]
      if o and not SET_O[o.text] then return "'set " .. t .. " " .. o.text .. "' is not analysed" end
      k = k + 2
    elseif t:match("^[-+]") then
      -- a cluster such as -euo pipefail: o last, with its name next
      local letters, o = t:sub(2):match("^([" .. SET_LETTERS .. "]*)(o?)$")
      if not letters or letters .. o == "" then return "'set " .. t .. "' is not analysed" end
      if o == "o" then
        local name = args[k + 1]
        if not name or not SET_O[name.text] then return "'set " .. t .. "' is not analysed" end
        k = k + 1
      end
      k = k + 1
    else
      return nil -- positional parameters
    end
  end
end

P.unset = function(ctx, args)
  for _, w in ipairs(args) do
    if not literal(w) or w.text:find("[", 1, true) then return "'unset " .. w.text .. "' is not analysed" end
  end
end

P.export = function(ctx, args)
  for _, w in ipairs(args) do
    if w.split or w.lead then return "'export " .. w.text .. "' may expand into other names" end
    if w.text == "-p" or w.text == "-n" then
      -- printing, or removing the export mark
    else
      local name = w.text:match("^([%a_][%w_]*)=") or (literal(w) and w.text:match("^([%a_][%w_]*)$"))
      if not name then return "'export " .. w.text .. "' is not analysed" end
      local why = ctx:exported(name)
      if why then return why end
    end
  end
end

-- declare/typeset/local/readonly NAME[=value] without options (-n, -x, -i ... change what names mean).
local function check_declare(ctx, args, name)
  for _, w in ipairs(args) do
    if w.text == "-p" then
      -- printing
    elseif w.text:sub(1, 1) == "-" or w.text:sub(1, 1) == "+" or w.lead or w.split then
      return "'" .. name .. " " .. w.text .. "' is not analysed"
    else
      local var = w.text:match("^([%a_][%w_]*)=") or w.text:match("^([%a_][%w_]*)$")
      if not var then return "'" .. name .. " " .. w.text .. "' is not analysed" end
      local why = ctx:shell_var(var)
      if why then return why end
    end
  end
end
P.declare, P.typeset, P["local"], P.readonly = check_declare, check_declare, check_declare, check_declare

local READ = { short = "rs", short_arg = { a = "a", d = "d", n = "n", N = "N", p = "p", t = "t", u = "u", i = "i" } }
P.read = function(ctx, args)
  local r, why = parse("read", args, READ)
  if not r then return why end
  local names = {}
  for _, w in ipairs(r.operands) do names[#names + 1] = w end
  if r.has.a then names[#names + 1] = r.has.a.value end
  for _, w in ipairs(names) do
    if not literal(w) or not w.text:match("^[%a_][%w_]*$") then
      return "'read' into '" .. w.text .. "' is not analysed"
    end
    local bad = ctx:shell_var(w.text)
    if bad then return bad end
  end
end

P.wait = function(ctx, args)
  for _, w in ipairs(args) do
    if not literal(w) or not (w.text:match("^%%?%d+$") or w.text == "-n" or w.text == "-f") then
      return "'wait " .. w.text .. "' is not analysed"
    end
  end
end

local function check_cd(ctx, args, name)
  if name == "popd" then ctx:cd(nil) return nil end
  local k = 1
  while args[k] and (args[k].text == "-P" or args[k].text == "-L" or args[k].text == "-e" or args[k].text == "-@") do
    k = k + 1
  end
  if args[k] and args[k].text == "--" then k = k + 1 end
  local target = args[k]
  if not target or target.text:match("^[-+]") then ctx:cd(nil) else ctx:cd(target) end
end
P.cd, P.pushd, P.popd = check_cd, check_cd, check_cd

-- ------------------------------------------------------ checked readers --

local SORT = {
  short = "bdfgiMhnRrVcCmsuz",
  short_arg = { k = "key", t = "field-separator", o = "output", S = "buffer-size", T = "temporary-directory" },
  long = merge(longs({ "ignore-leading-blanks", "dictionary-order", "ignore-case", "general-numeric-sort",
    "ignore-nonprinting", "month-sort", "human-numeric-sort", "numeric-sort", "random-sort", "reverse",
    "version-sort", "debug", "merge", "stable", "unique", "zero-terminated", "help", "version" }, false),
    longs({ "random-source", "sort", "batch-size", "compress-program", "files0-from", "key", "output", "buffer-size",
      "field-separator", "temporary-directory", "parallel" }, true), { check = "optional" }),
  abbrev = true,
}
P.sort = function(ctx, args)
  local r, why = parse("sort", args, SORT)
  if not r then return why end
  if r.has["compress-program"] then return "'sort --compress-program' runs a program" end
  if r.has["temporary-directory"] then return "'sort -T' writes temporary files in a directory of its own" end
  if r.has.output then return ctx:sink(r.has.output.value, "sort -o") end
end

local UNIQ = {
  short = "cdDiuz", short_arg = { f = "skip-fields", s = "skip-chars", w = "check-chars" },
  long = merge(longs({ "count", "repeated", "ignore-case", "unique", "zero-terminated", "help", "version" }, false),
    longs({ "skip-fields", "skip-chars", "check-chars" }, true), { ["all-repeated"] = "optional", group = "optional" }),
  abbrev = true,
}
-- uniq [INPUT [OUTPUT]] writes OUTPUT.
P.uniq = function(ctx, args)
  local r, why = parse("uniq", args, UNIQ)
  if not r then return why end
  for k = 2, #r.operands do
    local bad = ctx:sink(r.operands[k], "uniq")
    if bad then return bad end
  end
end

local FIND_ACTIONS = longs({ "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf",
  "-fls" }, true)
P.find = function(ctx, args)
  for _, w in ipairs(args) do
    if FIND_ACTIONS[w.text] then return "'find " .. w.text .. "' deletes, writes files or runs commands" end
    if options.may_be_option(w) then return "the find argument '" .. w.text .. "' may expand into an action" end
  end
end

-- ripgrep: --pre and --pre-glob run a program on every file; --hostname-bin runs one.
P.rg = function(ctx, args)
  for _, w in ipairs(args) do
    if w.text == "--" then return nil end
    if options.may_be_option(w) then return "the rg argument '" .. w.text .. "' may expand into an option" end
    if w.text:match("^%-%-pre") or w.text:match("^%-%-hostname") then return "'rg " .. w.text .. "' runs a program" end
  end
end

-- A sed script is read-only when it uses only addresses, comments, text
-- output (a i c), the commands p P l = d D n N g G h H x b t T : { } q Q z F,
-- y///, and s/// with flags from [gpiImM0-9] (no e, no w). e, w, W, r and R
-- (run, write, read files) are refused.
local function sed_script_safe(script)
  local i, n = 1, #script
  local function skip_ws()
    while i <= n and script:sub(i, i):match("[%s;]") do i = i + 1 end
  end
  -- reads up to the next unescaped delim; in a regex (regex = true) a
  -- bracket expression ends only at its "]" and holds the delimiter and
  -- backslashes literally, as GNU sed reads it
  local function delimited(delim, regex)
    while i <= n do
      local c = script:sub(i, i)
      if c == "\\" then
        i = i + 2
      elseif regex and c == "[" then
        local j = i + 1
        if script:sub(j, j) == "^" then j = j + 1 end
        if script:sub(j, j) == "]" then j = j + 1 end
        while j <= n and script:sub(j, j) ~= "]" do
          local d = script:sub(j + 1, j + 1)
          if script:sub(j, j) == "[" and (d == ":" or d == "." or d == "=") then
            local close = script:find(d .. "]", j + 2, true)
            if not close then return false end
            j = close + 2
          else
            j = j + 1
          end
        end
        if j > n then return false end
        i = j + 1
      elseif c == delim then
        i = i + 1
        return true
      elseif c == "\n" and delim ~= "\n" then
        return false
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
      if not delimited("/", true) then return false end
      while i <= n and script:sub(i, i):match("[IM]") do i = i + 1 end
    elseif c == "\\" then
      local d = script:sub(i + 1, i + 1)
      i = i + 2
      if d == "" or d == "\n" or not delimited(d, true) then return false end
      while i <= n and script:sub(i, i):match("[IM]") do i = i + 1 end
    end
    return true
  end
  local function to_eol() -- text of a i c, and comments: to an unescaped newline
    while i <= n do
      local c = script:sub(i, i)
      if c == "\\" then
        i = i + 2
      elseif c == "\n" then
        return
      else
        i = i + 1
      end
    end
  end
  while true do
    skip_ws()
    if i > n then return true end
    if script:sub(i, i) == "#" then
      to_eol()
    else
      if not address() then return false end
      if script:sub(i, i) == "," then
        i = i + 1
        if script:sub(i, i) == "+" or script:sub(i, i) == "~" then i = i + 1 end
        if not address() then return false end
      end
      while i <= n and script:sub(i, i):match("[ \t!]") do i = i + 1 end
      local cmd = script:sub(i, i)
      i = i + 1
      if cmd == "s" then
        local d = script:sub(i, i)
        if d == "" or d == "\\" or d == "\n" then return false end
        i = i + 1
        if not delimited(d, true) or not delimited(d) then return false end
        local flags = script:match("^[%w]*", i)
        if flags:find("[^gpiImM%d]") then return false end
        i = i + #flags
      elseif cmd == "y" then
        local d = script:sub(i, i)
        if d == "" or d == "\\" or d == "\n" then return false end
        i = i + 1
        if not delimited(d) or not delimited(d) then return false end
      elseif cmd == "a" or cmd == "i" or cmd == "c" then
        to_eol()
      elseif cmd == "b" or cmd == "t" or cmd == "T" or cmd == ":" then
        while i <= n and not script:sub(i, i):match("[;\n}]") do i = i + 1 end
      elseif cmd == "q" or cmd == "Q" or cmd == "l" or cmd == "L" then
        while i <= n and script:sub(i, i):match("[%d ]") do i = i + 1 end
      elseif cmd ~= "" and ("pdnPDNgGhHxz=F{}"):find(cmd, 1, true) then
        -- read-only
      else
        return false
      end
    end
  end
end

local SED = {
  short = "nrEsuzb", short_arg = { e = "expression", f = "file", l = "line-length" }, short_opt = { i = "in-place" },
  long = merge(longs({ "quiet", "silent", "debug", "follow-symlinks", "null-data", "zero-terminated", "posix",
    "regexp-extended", "separate", "sandbox", "unbuffered", "binary", "help", "version" }, false),
    longs({ "expression", "file", "line-length" }, true), { ["in-place"] = "optional" }),
  abbrev = true,
}
P.sed = function(ctx, args)
  local r, why = parse("sed", args, SED)
  if not r then return why end
  if r.has.file then return "'sed -f' runs a script that is not shown" end
  local scripts, files = {}, {}
  for _, o in ipairs(r.opts) do
    if o.name == "expression" then scripts[#scripts + 1] = o.value end
  end
  for _, w in ipairs(r.operands) do files[#files + 1] = w end
  if #scripts == 0 then
    if #files == 0 then return nil end
    scripts[1] = table.remove(files, 1)
  end
  for _, sc in ipairs(scripts) do
    if not literal(sc) then return "the sed script '" .. sc.text .. "' is not literal" end
    if not sed_script_safe(sc.text) then return "the sed script may write files or run commands" end
  end
  local inplace = r.has["in-place"]
  if inplace then
    if inplace.value and (not literal(inplace.value) or has_slash(inplace.value)) then
      return "'sed -i' with a backup suffix that names another directory"
    end
    if #files == 0 then return "'sed -i' without files" end
    for _, f in ipairs(files) do
      local bad = ctx:writes(f, "sed -i")
      if bad then return bad end
    end
  end
end

-- awk: only -F and -v; the program must not run commands (system, pipes),
-- write files (print or printf with a redirection) or load code (@load,
-- @include, extension). Conservative: any ">" after a print counts.
local function awk_program_safe(p)
  local flat = p:gsub("||", "  ")
  if flat:find("|", 1, true) then return false, "pipes to or from commands" end
  for _, bad in ipairs({ "system", "@", "extension", "/inet" }) do
    if p:find(bad, 1, true) then return false, "'" .. bad .. "'" end
  end
  local first_print = p:find("print", 1, true)
  if first_print and p:find(">", first_print, true) then return false, "output redirected from print" end
  return true
end
local AWK = { short_arg = { F = "field-separator", v = "assign" }, long = { ["field-separator"] = true, assign = true },
  stop = true }
local function check_awk(ctx, args, name)
  local r, why = parse(name, args, AWK)
  if not r then return why end
  local program = r.operands[1]
  if not program then return "'" .. name .. "' without a program" end
  if not literal(program) then return "the " .. name .. " program is not literal" end
  local ok, what = awk_program_safe(program.text)
  if not ok then return "the " .. name .. " program may run commands or write files (" .. what .. ")" end
end
P.awk, P.gawk, P.mawk, P.nawk = check_awk, check_awk, check_awk, check_awk

-- tar: only listing an archive (t), from a local file.
local TAR = {
  short = "tvzjJ", short_arg = { f = "file" },
  long = merge(longs({ "list", "verbose", "gzip", "gunzip", "bzip2", "xz", "numeric-owner", "full-time", "utc" },
    false), { file = true }),
  abbrev = true,
}
P.tar = function(ctx, args)
  local words = args
  if args[1] and args[1].text:sub(1, 1) ~= "-" then
    -- old style, tar tzf a.tgz: one option per letter, each letter that takes
    -- a value taking the next word in turn
    if not literal(args[1]) then return "the tar options '" .. args[1].text .. "' are not literal" end
    words = {}
    local next_value = 2
    for c in args[1].text:gmatch(".") do
      words[#words + 1] = { text = "-" .. c }
      if TAR.short_arg[c] then
        if not args[next_value] then return "'tar " .. args[1].text .. "' without a value for " .. c end
        words[#words + 1] = args[next_value]
        next_value = next_value + 1
      end
    end
    for k = next_value, #args do words[#words + 1] = args[k] end
  end
  local r, why = parse("tar", words, TAR)
  if not r then return "only listing an archive is read-only (" .. why .. ")" end
  if not (r.has.t or r.has.list) then return "'tar' without -t extracts or creates archives" end
  local f = r.has.file and r.has.file.value
  if f and (not literal(f) or f.text:find(":", 1, true)) then
    return "'tar -f " .. f.text .. "' may name a remote archive (host:file), which runs a remote shell"
  end
end

local DATE = {
  short = "uR", short_arg = { d = "date", f = "file", r = "reference", s = "set" }, short_opt = { I = "iso-8601" },
  long = merge(longs({ "debug", "rfc-email", "utc", "universal", "help", "version", "resolution" }, false),
    longs({ "date", "file", "reference", "set", "rfc-3339" }, true), { ["iso-8601"] = "optional" }),
  abbrev = true,
}
P.date = function(ctx, args)
  local r, why = parse("date", args, DATE)
  if not r then return why end
  if r.has.set then return "'date --set' changes the clock" end
  for _, w in ipairs(r.operands) do
    if w.text:sub(1, 1) ~= "+" then return "'date " .. w.text .. "' sets the clock" end
  end
end

-- ------------------------------------------------------------- git --

-- Subcommands that only read the repository (an alias or any other
-- subcommand is not here; git's own help runs man, a pager or a browser).
local GIT_READ = {}
for _, c in ipairs({ "log", "diff", "show", "status", "blame", "annotate", "grep", "ls-files", "ls-tree", "rev-parse",
  "describe", "shortlog", "cat-file", "rev-list", "whatchanged", "version", "name-rev", "merge-base", "for-each-ref",
  "show-ref", "count-objects", "cherry", "range-diff", "show-branch" }) do
  GIT_READ[c] = true
end
-- Subcommands that may rewrite .git/index (an opportunistic refresh) unless --no-optional-locks.
local GIT_INDEX = { status = true, diff = true, describe = true }

-- Long options that write a file (--output), run programs (--ext-diff,
-- --textconv, --open-files-in-pager, --filters, gpg for --show-signature) or
-- open help. git accepts unambiguous prefixes, so a prefix of one counts too.
local DIFF_DANGER = { "output", "ext-diff", "textconv", "show-signature", "help" }
local GIT_DANGER = {
  log = DIFF_DANGER, show = DIFF_DANGER, diff = DIFF_DANGER, whatchanged = DIFF_DANGER, ["range-diff"] = DIFF_DANGER,
  shortlog = DIFF_DANGER, blame = { "textconv", "help" }, annotate = { "textconv", "help" },
  grep = { "open-files-in-pager", "textconv", "ext-grep", "help" }, ["cat-file"] = { "textconv", "filters", "help" },
}
-- Exact options that share a prefix with a dangerous one but are safe.
local GIT_SAFE_EXACT = longs({ "text", "output-indicator-new", "output-indicator-old", "output-indicator-context" },
  true)

local function git_option_danger(sub, text)
  local given = text:match("^%-%-([^=]*)")
  if not given or given == "" then return nil end
  if GIT_SAFE_EXACT[given] then return nil end
  for _, d in ipairs(GIT_DANGER[sub] or { "help" }) do
    if #given >= 2 and d:sub(1, #given) == given then return d end
  end
  return nil
end

-- git grep -O[pager] (attached, or inside a cluster such as -nO) opens the matches in a pager: any program.
local GREP_SHORT_ARG = "efABCm"
local function git_grep_cluster_danger(text)
  if text:sub(1, 1) ~= "-" or text:sub(2, 2) == "-" then return false end
  for j = 2, #text do
    local c = text:sub(j, j)
    if c == "O" then return true end
    if GREP_SHORT_ARG:find(c, 1, true) then return false end
  end
  return false
end

local CLONE = {
  short = "qvnls", short_arg = { b = "branch", o = "origin" },
  long = merge(longs({ "quiet", "verbose", "progress", "no-checkout", "local", "no-local", "shared", "no-hardlinks",
    "single-branch", "no-single-branch", "no-tags", "reject-shallow", "no-reject-shallow" }, false),
    longs({ "branch", "origin", "depth", "shallow-since", "shallow-exclude" }, true)),
  abbrev = true,
}
-- git clone SRC DEST: a local source (no URL: "ext::", "host:path" and the
-- like reach transports that run programs), into a writable directory; the
-- clone's hooks do not come with it.
local function git_clone(ctx, args)
  local r, why = parse("git clone", args, CLONE)
  if not r then return why end
  if #r.operands ~= 2 then return "'git clone' without an explicit destination in working/ or output/" end
  local src, dest = r.operands[1], r.operands[2]
  if not literal(src) or src.text:find(":", 1, true) then
    return "'git clone " .. src.text .. "': only a local path or bundle is analysed"
  end
  return ctx:writes(dest, "git clone")
end

local GIT_GLOBAL_FLAGS = longs({ "--no-pager", "-P", "--no-optional-locks", "--no-replace-objects",
  "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-lazy-fetch",
  "--no-advice" }, true)
local GIT_PRINTS = longs({ "--version", "--exec-path", "--html-path", "--man-path", "--info-path" }, true)

P.git = function(ctx, args)
  local k, no_locks = 1, false
  local dirs = ctx:dirs(nil) -- where git runs: the shell's directories, or -C's
  while args[k] do
    local w = args[k]
    local t = w.text
    if options.may_be_option(w) then return "the git argument '" .. t .. "' may expand into an option" end
    if GIT_GLOBAL_FLAGS[t] then
      if t == "--no-optional-locks" then no_locks = true end
      k = k + 1
    elseif t == "-C" then
      local d = args[k + 1]
      if not d then return "'git -C' without a directory" end
      if d.split then return "the git -C directory '" .. d.text .. "' may expand into several words" end
      local new
      if dirs and literal(d) then
        new = {}
        for _, base in ipairs(dirs) do
          local abs = ctx:dirs(d, base)
          if not abs then new = nil break end
          for _, x in ipairs(abs) do new[#new + 1] = x end
        end
      end
      dirs = new
      k = k + 2
    elseif GIT_PRINTS[t] then
      return nil
    elseif t:sub(1, 1) == "-" then
      -- -c, --config-env, --exec-path=, --git-dir, --work-tree, -p, --bare, --help, ...
      return "git option '" .. t .. "' is not analysed (it can configure programs git runs)"
    else
      break
    end
  end
  local sub = args[k]
  if not sub then return nil end
  if not literal(sub) then return "the git subcommand '" .. sub.text .. "' is not literal" end
  local rest = {}
  for x = k + 1, #args do rest[#rest + 1] = args[x] end
  if sub.text == "clone" then return git_clone(ctx, rest) end
  if not GIT_READ[sub.text] then
    return "'git " .. sub.text .. "' is not known to be read-only (it may change the repository, or be an alias)"
  end
  local value_next = false -- the pattern or file after git grep -e / -f
  for _, w in ipairs(rest) do
    if w.text == "--" then break end
    if value_next then
      value_next = false
    elseif sub.text == "grep" and (w.text == "-e" or w.text == "-f") then
      value_next = true
    else
      if options.may_be_option(w) then return "the git argument '" .. w.text .. "' may expand into an option" end
      if w.text:find("%G", 1, true) then
        return "'git " .. sub.text .. " " .. w.text .. "': signature placeholders (%G) run gpg"
      end
      local d = git_option_danger(sub.text, w.text)
      if d then return "'git " .. sub.text .. " " .. w.text .. "' (--" .. d .. ") writes a file or runs a program" end
      if sub.text == "grep" and git_grep_cluster_danger(w.text) then
        return "'git grep " .. w.text .. "' (-O) opens the matches with a program"
      end
    end
  end
  if GIT_INDEX[sub.text] and not no_locks then
    local confined = dirs ~= nil
    for _, d in ipairs(dirs or {}) do
      if ctx:writes({ text = d }) then confined = false end
    end
    if not confined then
      return "'git " .. sub.text .. "' may rewrite the index of a repository outside working/output " ..
        "(use git --no-optional-locks)"
    end
  end
end

-- ------------------------------------------------------------ writers --
-- Allowed when every path they write is under the writable roots.

local function check_all(ctx, words, who, sink)
  for _, w in ipairs(words) do
    local bad = sink and ctx:sink(w, who) or ctx:writes(w, who)
    if bad then return bad end
  end
end

local function suffix_bad(r)
  local s = r.has.suffix
  if s and (not literal(s.value) or has_slash(s.value)) then return "a backup suffix that names another directory" end
end

local BACKUP = { backup = "optional", suffix = true, ["target-directory"] = true, ["no-target-directory"] = false }
local CP = {
  short = "abdfHiLnPpRrTuvx", short_arg = { S = "suffix", t = "target-directory" },
  long = merge(longs({ "archive", "attributes-only", "copy-contents", "force", "interactive", "dereference",
    "no-dereference", "no-clobber", "recursive", "remove-destination", "strip-trailing-slashes", "verbose",
    "one-file-system", "help", "version", "debug" }, false),
    { preserve = "optional", ["no-preserve"] = true, reflink = "optional", sparse = true, update = "optional" },
    BACKUP),
  abbrev = true,
}
P.cp = function(ctx, args)
  local r, why = parse("cp", args, CP)
  if not r then return why end
  local bad = suffix_bad(r)
  if bad then return "'cp': " .. bad end
  local dest = r.has["target-directory"] and r.has["target-directory"].value or r.operands[#r.operands]
  if not dest then return nil end
  return ctx:sink(dest, "cp")
end

local MV = {
  short = "bfinTuv", short_arg = { S = "suffix", t = "target-directory" },
  long = merge(longs({ "force", "interactive", "no-clobber", "strip-trailing-slashes", "verbose", "help", "version",
    "debug", "no-copy" }, false), { update = "optional" }, BACKUP),
  abbrev = true,
}
-- A program that writes every operand (and --target-directory): mv writes its
-- destination and removes its sources; install writes its destination.
local function writes_operands(name, spec)
  return function(ctx, args)
    local r, why = parse(name, args, spec)
    if not r then return why end
    local bad = suffix_bad(r)
    if bad then return "'" .. name .. "': " .. bad end
    if r.has["target-directory"] then
      bad = ctx:writes(r.has["target-directory"].value, name)
      if bad then return bad end
    end
    return check_all(ctx, r.operands, name)
  end
end
P.mv = writes_operands("mv", MV)

local LN = {
  short = "bdFfinLPrsTv", short_arg = { S = "suffix", t = "target-directory" },
  long = merge(longs({ "directory", "force", "interactive", "logical", "no-dereference", "physical", "relative",
    "symbolic", "verbose", "help", "version" }, false), BACKUP),
  abbrev = true,
}
-- ln: the links and what they point to must all be writable paths, so a link
-- never leads a later (lexically confined) write elsewhere. A relative
-- symlink target is read from the link's directory: no "..", so it stays there.
P.ln = function(ctx, args)
  local r, why = parse("ln", args, LN)
  if not r then return why end
  local bad = suffix_bad(r)
  if bad then return "'ln': " .. bad end
  local symbolic = r.has.s or r.has.symbolic
  local targets = r.operands
  if r.has["target-directory"] then
    bad = ctx:writes(r.has["target-directory"].value, "ln")
    if bad then return bad end
  end
  for k, w in ipairs(targets) do
    local is_link = r.has["target-directory"] == nil and k == #targets and #targets > 1
    if symbolic and not is_link and w.text:sub(1, 1) ~= "/" and not r.has.relative then
      for seg in w.text:gmatch("[^/]+") do
        if seg == ".." then return "'ln -s " .. w.text .. "': a relative link target that climbs with '..'" end
      end
    end
    bad = ctx:writes(w, "ln")
    if bad then return bad end
  end
end

local function simple_writer(name, spec, skip_first)
  spec.abbrev = true
  spec.dynamic_ok = spec.dynamic_ok ~= false
  P[name] = function(ctx, args)
    local r, why = parse(name, args, spec)
    if not r then return why end
    local targets = {}
    for k = (skip_first and 2 or 1), #r.operands do targets[#targets + 1] = r.operands[k] end
    return check_all(ctx, targets, name, name == "tee")
  end
end
local HV = { help = false, version = false }
simple_writer("rm", { short = "fiIrRdv",
  long = merge(longs({ "force", "one-file-system", "recursive", "dir", "verbose" }, false),
    { interactive = "optional", ["preserve-root"] = "optional" }, HV) })
simple_writer("rmdir", { short = "v", long = merge(longs({ "ignore-fail-on-non-empty", "verbose" }, false), HV) })
simple_writer("mkdir", { short = "pv", short_arg = { m = "mode" },
  long = merge({ mode = true, parents = false, verbose = false }, HV) })
simple_writer("touch", { short = "acfhm", short_arg = { d = "date", r = "reference", t = "stamp" },
  long = merge({ date = true, reference = true, ["no-create"] = false, ["no-dereference"] = false, time = true }, HV) })
simple_writer("tee", { short = "aip",
  long = merge({ append = false, ["ignore-interrupts"] = false, ["output-error"] = "optional" }, HV) })
simple_writer("truncate", { short = "co", short_arg = { r = "reference", s = "size" },
  long = merge({ ["no-create"] = false, ["io-blocks"] = false, reference = true, size = true }, HV) })
simple_writer("shred", { short = "fuvxz", short_arg = { n = "iterations", s = "size" },
  long = merge({ force = false, iterations = true, ["random-source"] = true, size = true, remove = "optional",
    verbose = false, exact = false, zero = false }, HV) })

-- chmod/chown/chgrp MODE|OWNER FILE...; a mode may look like an option (-x).
local CH_OPTS = longs({ "-c", "-f", "-v", "-R", "-h", "-H", "-L", "-P", "--changes", "--silent", "--quiet", "--verbose",
  "--recursive", "--dereference", "--no-dereference", "--preserve-root" }, true)
local function check_ch(ctx, args, name)
  local operands, reference = {}, false
  for _, w in ipairs(args) do
    if CH_OPTS[w.text] then
      -- a flag
    elseif w.text:match("^%-%-reference=") then
      reference = true
    elseif w.text:match("^%-%-from=") and name == "chown" then
      -- a filter
    elseif w.text:sub(1, 2) == "--" and w.text ~= "--" then
      return "'" .. name .. " " .. w.text .. "' is not analysed"
    elseif w.text ~= "--" then
      operands[#operands + 1] = w
    end
  end
  for k = reference and 1 or 2, #operands do
    local bad = ctx:writes(operands[k], name)
    if bad then return bad end
  end
end
P.chmod, P.chown, P.chgrp = check_ch, check_ch, check_ch

local INSTALL = {
  short = "bcCdDpv", short_arg = { g = "group", m = "mode", o = "owner", S = "suffix", t = "target-directory" },
  long = merge(longs({ "compare", "directory", "preserve-timestamps", "verbose", "help", "version" }, false),
    { group = true, mode = true, owner = true }, BACKUP),
  abbrev = true,
}
P.install = writes_operands("install", INSTALL)

-- dd of=FILE.
P.dd = function(ctx, args)
  for _, w in ipairs(args) do
    if options.may_be_option(w) then return "the dd argument '" .. w.text .. "' may expand into of=" end
    local of = w.text:match("^of=(.*)$")
    if of then
      local bad = ctx:sink({ text = of, expand = w.expand, glob = w.glob }, "dd")
      if bad then return bad end
    end
  end
end

-- gzip family: compresses (or expands) each file in place, unless it only writes to stdout, tests or lists.
local GZIP = {
  short = "cdfklLnNqrtvV123456789", short_arg = { S = "suffix" },
  long = merge(longs({ "stdout", "to-stdout", "decompress", "uncompress", "force", "help", "keep", "list", "license",
    "no-name", "name", "quiet", "recursive", "rsyncable", "synchronous", "test", "verbose", "version", "fast",
    "best" }, false), { suffix = true }),
  abbrev = true,
}
local BZIP2 = {
  short = "cdzkftsqvLV123456789",
  long = longs({ "stdout", "decompress", "compress", "keep", "force", "test", "small", "quiet", "verbose", "license",
    "version", "fast", "best", "help" }, false),
  abbrev = true,
}
local function check_compress(spec)
  return function(ctx, args, name)
    local r, why = parse(name, args, spec)
    if not r then return why end
    local bad = suffix_bad(r)
    if bad then return "'" .. name .. "': " .. bad end
    local h = r.has
    if h.c or h.stdout or h["to-stdout"] or h.t or h.test or h.l or h.list then return nil end
    return check_all(ctx, r.operands, name)
  end
end
P.gzip, P.gunzip = check_compress(GZIP), check_compress(GZIP)
P.bzip2, P.bunzip2 = check_compress(BZIP2), check_compress(BZIP2)

-- ----------------------------------------------------------- wrappers --
-- Programs that run another command: that command is checked in turn.

local function run_rest(ctx, r, from, who)
  local rest = {}
  for k = from, #r.operands do rest[#rest + 1] = r.operands[k] end
  if #rest == 0 then return nil end
  return ctx:run(rest, who)
end

local ENV = { short = "i0v", short_arg = { u = "unset" },
  long = merge(longs({ "ignore-environment", "null", "debug" }, false), { unset = true }, HV),
  abbrev = true, stop = true }
-- env [-i] [-u NAME] [NAME=VALUE]... [COMMAND]: -C, -S and signal options are not analysed.
P.env = function(ctx, args)
  local r, why = parse("env", args, ENV)
  if not r then return why end
  local k = 1
  while r.operands[k] do
    local w = r.operands[k]
    local name = w.text:match("^([%a_][%w_]*)=")
    if not name then break end
    local bad = ctx:exported(name)
    if bad then return bad end
    k = k + 1
  end
  return run_rest(ctx, r, k, "env")
end

local NICE = { short_arg = { n = "adjustment" }, long = merge({ adjustment = true }, HV), abbrev = true, stop = true,
  digits = true }
P.nice = function(ctx, args)
  local r, why = parse("nice", args, NICE)
  if not r then return why end
  return run_rest(ctx, r, 1, "nice")
end

local TIMEOUT = { short = "v", short_arg = { s = "signal", k = "kill-after" },
  long = merge(longs({ "preserve-status", "foreground", "verbose" }, false),
    { signal = true, ["kill-after"] = true }, HV),
  abbrev = true, stop = true }
P.timeout = function(ctx, args)
  local r, why = parse("timeout", args, TIMEOUT)
  if not r then return why end
  return run_rest(ctx, r, 2, "timeout")
end

P.nohup = function(ctx, args)
  local r, why = parse("nohup", args, { long = HV, abbrev = true, stop = true })
  if not r then return why end
  return run_rest(ctx, r, 1, "nohup")
end

local STDBUF = { short_arg = { i = "input", o = "output", e = "error" },
  long = merge({ input = true, output = true, error = true }, HV), abbrev = true, stop = true }
P.stdbuf = function(ctx, args)
  local r, why = parse("stdbuf", args, STDBUF)
  if not r then return why end
  return run_rest(ctx, r, 1, "stdbuf")
end

-- time [-p] COMMAND (the shell's keyword; /usr/bin/time -o would write a file).
P.time = function(ctx, args)
  local r, why = parse("time", args, { short = "p", stop = true })
  if not r then return why end
  return run_rest(ctx, r, 1, "time")
end

P.command = function(ctx, args)
  local r, why = parse("command", args, { short = "pvV", stop = true })
  if not r then return why end
  if r.has.v or r.has.V then return nil end -- a lookup: nothing runs
  return run_rest(ctx, r, 1, "command")
end

P.builtin = function(ctx, args)
  if #args == 0 then return nil end
  return ctx:run(args, "builtin")
end

P.exec = function(ctx, args)
  local r, why = parse("exec", args, { short = "cl", short_arg = { a = "name" }, stop = true })
  if not r then return why end
  return run_rest(ctx, r, 1, "exec")
end

local XARGS = {
  short = "0prtx",
  short_arg = { a = "arg-file", d = "delimiter", E = "eof", I = "replace", L = "max-lines", n = "max-args",
    P = "max-procs", s = "max-chars" },
  short_opt = { e = "eof", i = "replace", l = "max-lines" },
  long = merge(longs({ "null", "interactive", "no-run-if-empty", "verbose", "show-limits", "exit" }, false),
    longs({ "arg-file", "delimiter", "max-args", "max-chars", "max-procs" }, true),
    { eof = "optional", replace = "optional", ["max-lines"] = "optional" }, HV),
  abbrev = true, stop = true,
}
-- xargs builds a command line from its input, so whatever arguments arrive:
-- only programs that are read-only whatever their arguments.
P.xargs = function(ctx, args)
  local r, why = parse("xargs", args, XARGS)
  if not r then return why end
  local prog = r.operands[1]
  if not prog then return nil end -- echo
  local name = literal(prog) and prog.text
  if name then
    local dir, base = name:match("^(.*)/([^/]+)$")
    if dir == "/bin" or dir == "/usr/bin" or dir == "/usr/local/bin" then name = base end
  end
  if not name or P[name] ~= "any" or name == "shift" or name == "exit" or name == "return" or name == "break"
      or name == "continue" or name == "type" then
    return "'xargs " .. prog.text .. "' runs a program with arguments from its input; only programs that are " ..
      "read-only whatever their arguments are analysed"
  end
end

-- ------------------------------------------------------------- shells --

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

-- ------------------------------------------------------- test runners --
-- They run the project's own code (as the run_tests tool does), so only when
-- the policy lets tests run, from a writable directory, with options that
-- neither load other code nor write elsewhere.

local PYTEST = {
  short = "qvxslh", short_arg = { r = "report-chars", k = "keyword", m = "markexpr", p = "plugin" },
  long = merge(longs({ "quiet", "verbose", "exitfirst", "showlocals", "full-trace", "help", "version", "lf",
    "last-failed", "ff", "failed-first", "nf", "new-first", "sw", "stepwise", "sw-skip", "stepwise-skip", "co",
    "collect-only", "no-header", "no-summary", "disable-warnings", "disable-pytest-warnings", "strict-markers",
    "runxfail", "setup-show", "fixtures", "markers", "continue-on-collection-errors", "doctest-modules" }, false),
    longs({ "tb", "maxfail", "durations", "durations-min", "color", "code-highlight", "deselect", "ignore",
      "ignore-glob", "capture", "junit-xml", "junitxml", "basetemp" }, true)),
}
local function check_pytest(ctx, args, who)
  if not ctx.test_runners then
    return "'" .. who .. "' runs the project's code (the policy does not allow test runs)"
  end
  if not ctx:cwd_confined() then return "'" .. who .. "' outside working/output writes caches there" end
  local r, why = parse(who, args, PYTEST)
  if not r then return why end
  for _, o in ipairs(r.opts) do
    if o.name == "plugin" and not (literal(o.value) and o.value.text:match("^no:")) then
      return "'" .. who .. " -p' loads a plugin"
    end
    if o.name == "junit-xml" or o.name == "junitxml" or o.name == "basetemp" then
      local bad = ctx:writes(o.value, who .. " --" .. o.name)
      if bad then return bad end
    end
  end
  for _, w in ipairs(r.operands) do
    local path = w.text:match("^(.-)::") or w.text
    local bad = ctx:writes({ text = path, expand = w.expand, glob = w.glob }, who)
    if bad then return bad end
  end
end
P.pytest = check_pytest
P["py.test"] = check_pytest
local function check_python(ctx, args, name)
  if args[1] and args[1].text == "-m" and args[2] and args[2].text == "pytest" and literal(args[2]) then
    local rest = {}
    for k = 3, #args do rest[#rest + 1] = args[k] end
    return check_pytest(ctx, rest, name .. " -m pytest")
  end
  return "'" .. name .. "' runs arbitrary code"
end
P.python, P.python3 = check_python, check_python

P.make = function(ctx, args)
  if #args == 1 and literal(args[1]) and args[1].text == "test" then
    if not ctx.test_runners then return "'make test' runs the project's code (the policy does not allow test runs)" end
    if not ctx:cwd_confined() then return "'make test' outside working/output" end
    return nil
  end
  return "'make' runs build recipes"
end

P.npm = function(ctx, args)
  local t = {}
  for k, w in ipairs(args) do
    if not literal(w) then return "'npm' runs package scripts" end
    t[k] = w.text
  end
  local line = table.concat(t, " ")
  if line == "test" or line == "run test" then
    if not ctx.test_runners then return "'npm test' runs the project's code (the policy does not allow test runs)" end
    if not ctx:cwd_confined() then return "'npm test' outside working/output" end
    return nil
  end
  return "'npm' runs package scripts"
end

return { table = P, sed_script_safe = sed_script_safe, awk_program_safe = awk_program_safe }
