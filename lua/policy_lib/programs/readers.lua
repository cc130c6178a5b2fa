-- policy_lib.programs.readers: programs that read: those read-only whatever
-- their arguments ("any"), and the readers whose options can write files or run
-- programs (sort -o, uniq OUTPUT, find -exec, rg --pre, sed w and e, awk
-- system(), tar without -t, date --set). One family of policy_lib.programs'
-- table (lua/policy_lib/programs.lua says what an entry is and what its
-- checkers get).
local lib = require "policy_lib.programs.lib"
local options = require "policy_lib.options"

local parse = lib.parse
local longs = lib.longs
local merge = lib.merge
local literal = lib.literal
local has_slash = lib.has_slash

local P = {}

-- read-only whatever their arguments
for _, n in ipairs({ "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "echo", "pwd", "true", "false", ":",
  "stat", "du", "df", "which", "whoami", "id", "groups", "uname", "arch", "tty", "diff", "cmp", "tr", "cut", "paste",
  "nl", "od", "hexdump", "basename", "dirname", "realpath", "readlink", "seq", "jq", "column", "comm", "fold", "fmt",
  "rev", "tac", "expand", "unexpand", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum",
  "cksum", "b2sum", "base64", "base32", "strings", "ps", "nproc", "free", "uptime", "printenv", "locale", "getconf",
  "expr", "sleep", "yes", "numfmt", "tsort", "join", "cal", "lscpu", "lsblk", "pgrep", "look", "type",
  "shift", "exit", "return", "break", "continue" }) do
  P[n] = "any"
end

-- checked readers: the options that write files or run programs are refused

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

return { table = P, sed_script_safe = sed_script_safe, awk_program_safe = awk_program_safe }
