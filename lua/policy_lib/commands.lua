-- policy_lib.commands (policylib.commands for policies): whether a shell
-- command line is proven read-only, or writes only under the roots a policy
-- names. Anything it cannot prove gives a reason instead: a policy turns that
-- into "ask a human" (fail closed).
--
--   local why = commands.analyze("cd repo && git log -p > /workspace/output/log.txt",
--     {cwd = "/workspace/working", writable = {"/workspace/working", "/workspace/output"}, test_runners = true})
--   -- nil: fine; otherwise a reason such as "'git grep -Oless' (-O) opens the matches with a program"
--   commands.READ_ONLY.cat   -> "any"      (read-only whatever its arguments)
--   commands.READ_ONLY.sort  -> "checked"  (allowed after its arguments are checked)
--   commands.exported_ok("LC_ALL") -> true  (VAR=value cmd, export, env: a short list of harmless names)
--
-- What is checked, simple command by simple command (policy_lib.shell splits them):
--   * every redirection that writes goes under a writable root (or /dev/null, /dev/stdout, ...);
--   * the program is named literally (no $var, glob or quoting tricks), by name or
--     as /bin/NAME, /usr/bin/NAME, /usr/local/bin/NAME (the sandbox's read-only PATH);
--   * the program is in policy_lib.programs' table, and its checker accepts the arguments
--     (wrappers such as env, nice, timeout, sh -c have what they run checked in turn);
--   * VAR=value in front of a command, export and env only set harmless variables;
--     plain assignments and read never set PATH, IFS and the like;
--   * cd is followed: a write relative to the directory must be confined from every
--     directory the shell may be in by then (a failed cd, a subshell, a pipeline or a
--     loop's next round included);
--   * function definitions, aliases, eval, source, traps, here-documents with expansions,
--     command/process substitution and arithmetic are refused.
-- Paths are checked as text (policy_lib.paths): a symlink under a writable root that
-- points elsewhere is not seen, which is why the sandbox stays the real boundary.
local shell = require "policy_lib.shell"
local paths = require "policy_lib.paths"
local options = require "policy_lib.options"
local programs = require "policy_lib.programs"

local M = {}

local MAX_DEPTH = 8 -- nested wrappers and sh -c
local MAX_DIRS = 16 -- possible working directories followed before the directory counts as unknown
local MAX_REASON = 300 -- characters of a reason
local PROGRAM_DIRS = { ["/bin"] = true, ["/usr/bin"] = true, ["/usr/local/bin"] = true }
local DEVICES = { ["/dev/null"] = true, ["/dev/stdout"] = true, ["/dev/stderr"] = true, ["/dev/tty"] = true }
local KEYWORDS = { ["if"] = true, ["then"] = true, ["else"] = true, ["elif"] = true, ["fi"] = true, ["do"] = true,
  ["done"] = true, ["while"] = true, ["until"] = true, ["!"] = true, ["{"] = true, ["}"] = true }
local LOOPS = { ["while"] = true, ["until"] = true, ["for"] = true, ["select"] = true }

M.READ_ONLY = {}
for name, entry in pairs(programs.table) do M.READ_ONLY[name] = entry == "any" and "any" or "checked" end

-- Variables that may be exported to a program (VAR=value cmd, export, env):
-- only these, whose values change formatting and nothing else.
local HARMLESS_ENV = {}
for _, n in ipairs({ "LANG", "LANGUAGE", "LC_ALL", "TZ", "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "CLICOLOR",
  "TERM", "CI", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONIOENCODING" }) do
  HARMLESS_ENV[n] = true
end
function M.exported_ok(name)
  return type(name) == "string" and (HARMLESS_ENV[name] == true or name:match("^LC_[A-Z]+$") ~= nil)
end

-- Shell variables a script must not set even without exporting them: the
-- shell's own (PATH, IFS, CDPATH, HOME, PS4, ...) and those the sandbox
-- exports, or programs read, whatever the shell.
local SHELL_SPECIAL = {}
for _, n in ipairs({ "PATH", "IFS", "CDPATH", "HOME", "OLDPWD", "PWD", "ENV", "PS1", "PS2", "PS3", "PS4",
  "PROMPT_COMMAND", "SHELLOPTS", "GLOBIGNORE", "TMPDIR", "EXECIGNORE", "FUNCNEST", "POSIXLY_CORRECT", "HISTFILE",
  "MAIL", "MAILPATH", "MAILCHECK", "OPTIND", "SHELL", "TERMINFO", "LOCPATH", "NLSPATH", "INPUTRC", "HOSTALIASES",
  "EDITOR", "VISUAL", "SHLVL", "HOSTNAME" }) do
  SHELL_SPECIAL[n] = true
end
local SPECIAL_PATTERNS = { "^BASH", "^LD_", "^GIT_", "^PYTHON", "^PYTEST", "^NODE_", "^NPM_", "^npm_", "^LESS",
  "^MAKE", "PAGER$", "^GCONV", "^MALLOC_", "^GLIBC_", "^XDG_", "^SSH_", "^RIPGREP", "^TAR_", "^GREP_", "^AWK",
  "^PERL", "^RUBY", "^LUA_" }
function M.shell_var_ok(name)
  if type(name) ~= "string" or not name:match("^[%a_][%w_]*$") or SHELL_SPECIAL[name] then return false end
  for _, p in ipairs(SPECIAL_PATTERNS) do
    if name:match(p) then return false end
  end
  return true
end

-- ---------------------------------------------------------------- ctx --

local Ctx = {}
Ctx.__index = Ctx

local function roots_text(state) return table.concat(state.writable, " and ") end

-- A glob can only stay under the directory it starts in when none of its
-- components could match "." or ".." (sh matches ".*" against both).
local function glob_safe(text)
  for seg in text:gmatch("[^/]+") do
    if seg:find("[*?[]") and seg:sub(1, 1):match("[.[?\\]") then return false end
  end
  return true
end

-- Whether every place word may name is under a writable root (or, for a
-- sink, a device that only takes output).
local function path_ok(state, word, sink)
  if type(word) ~= "table" or word.expand or type(word.text) ~= "string" or word.text == "" then return false end
  local text = word.text
  if word.glob and not glob_safe(text) then return false end
  if sink and text:sub(1, 1) == "/" then
    local abs = paths.normalize(text)
    if abs and (DEVICES[abs] or abs:match("^/dev/fd/%d+$")) then return true end
  end
  if text:sub(1, 1) == "/" then return (paths.confined(text, state.writable)) end
  if not state.cwds then return false end
  for _, cwd in ipairs(state.cwds) do
    if not paths.confined(text, state.writable, cwd) then return false end
  end
  return true
end

function Ctx:writes(word, who)
  if path_ok(self.state, word, false) then return nil end
  return "'" .. (who or "the command") .. "' writes '" .. tostring(word and word.text) .. "', outside " ..
    roots_text(self.state)
end

function Ctx:sink(word, who)
  if path_ok(self.state, word, true) then return nil end
  return "'" .. (who or "the command") .. "' writes '" .. tostring(word and word.text) .. "', outside " ..
    roots_text(self.state)
end

function Ctx:cwd_confined()
  if not self.state.cwds then return false end
  for _, cwd in ipairs(self.state.cwds) do
    if not paths.confined(cwd, self.state.writable) then return false end
  end
  return true
end

-- The absolute directories word names from base (or from each directory the
-- shell may be in); with no word, those directories. nil when unknown.
function Ctx:dirs(word, base)
  local bases = base and { base } or self.state.cwds
  if not bases then return nil end
  local out = {}
  for _, b in ipairs(bases) do
    if word == nil then
      out[#out + 1] = b
    else
      if word.expand or word.glob then return nil end
      local abs = paths.resolve(word.text, b)
      if not abs then return nil end
      out[#out + 1] = abs
    end
  end
  return out
end

function Ctx:cd(word)
  local state = self.state
  if not state.cwds then return end
  if not word or word.expand or word.glob then state.cwds = nil return end
  local seen, next_dirs = {}, {}
  for _, d in ipairs(state.cwds) do
    seen[d] = true
    next_dirs[#next_dirs + 1] = d
  end
  -- the cd may fail (or run in a subshell): the old directories stay possible
  for _, d in ipairs(state.cwds) do
    local abs = paths.resolve(word.text, d)
    if not abs then state.cwds = nil return end
    if not seen[abs] then
      seen[abs] = true
      next_dirs[#next_dirs + 1] = abs
    end
  end
  state.cwds = #next_dirs <= MAX_DIRS and next_dirs or nil
end

function Ctx:shell_var(name)
  if M.shell_var_ok(name) then return nil end
  return "setting " .. tostring(name) .. " changes what runs"
end

function Ctx:exported(name, cmd)
  if M.exported_ok(name) or (name == "IFS" and cmd == "read") then return nil end
  return "passing " .. tostring(name) .. " to a program is not known to be harmless"
end

local check_words, analyze_line -- forward

function Ctx:run(words, who)
  if self.depth >= MAX_DEPTH then return "commands nested too deeply" end
  local plain = {}
  for k, w in ipairs(words) do
    -- what a wrapper runs is a program name and its arguments; NAME=value there is not an assignment
    plain[k] = { text = w.text, quoted = w.quoted, expand = w.expand, split = w.split, glob = w.glob, lead = w.lead }
  end
  return check_words(plain, self.state, self.depth + 1)
end

function Ctx:script(text, who)
  if self.depth >= MAX_DEPTH then return "shell commands nested too deeply" end
  return analyze_line(text, self.state, self.depth + 1)
end

-- ------------------------------------------------------------ checking --

local OUTPUT_REDIRS = { [">"] = true, [">>"] = true, [">|"] = true, ["&>"] = true, ["&>>"] = true, ["<>"] = true,
  [">&"] = true }

local function check_redirs(redirs, state)
  for _, r in ipairs(redirs) do
    local target = r.target and paths.normalize(r.target.text)
    if target and (target:match("^/dev/tcp/") or target:match("^/dev/udp/")) then
      return "a redirection to '" .. r.target.text .. "' opens a network connection (bash)"
    end
    if OUTPUT_REDIRS[r.redir] then
      local t = r.target
      local dup = r.redir == ">&" and not t.expand and (t.text:match("^%d+$") or t.text == "-")
      if not dup and not path_ok(state, t, true) then
        return "output redirected to '" .. t.text .. "', outside " .. roots_text(state)
      end
    end
  end
  return nil
end

-- The program a word names: "git" for git, /usr/bin/git and the like; nil, reason otherwise.
local function program_name(word)
  if word.expand or word.glob or word.split then return nil, "the command name '" .. word.text .. "' is not literal" end
  local name = word.text
  local dir, base = name:match("^(.*)/([^/]*)$")
  if dir then
    if PROGRAM_DIRS[dir] and base ~= "" then return base end
    return nil, "runs the program '" .. name .. "' by path"
  end
  if name == "" then return nil, "an empty command name" end
  return name
end

-- Checks one simple command's words (keywords, assignments, the program and its arguments).
function check_words(words, state, depth)
  local k = 1
  local assigns = {}
  while words[k] do
    local w = words[k]
    if not w.quoted and KEYWORDS[w.text] then
      k = k + 1
    elseif w.assign then
      assigns[#assigns + 1] = w
      k = k + 1
    else
      break
    end
  end
  local first = words[k]
  if not first then
    -- assignments only: shell variables
    for _, a in ipairs(assigns) do
      if not M.shell_var_ok(a.assign) then return "setting " .. a.assign .. " changes what runs" end
    end
    return nil
  end
  if not first.quoted and (first.text == "for" or first.text == "select") then
    local var = words[k + 1]
    if not var or var.expand or not M.shell_var_ok(var.text) then
      return "the loop variable '" .. tostring(var and var.text) .. "' is not analysed"
    end
    return nil -- "for x in words": the body is checked on its own
  end
  if not first.quoted and (first.text == "case" or first.text == "function" or first.text == "coproc") then
    return "'" .. first.text .. "' constructs are not analysed"
  end
  local name, why = program_name(first)
  if not name then return why end
  for _, a in ipairs(assigns) do
    if not (M.exported_ok(a.assign) or (a.assign == "IFS" and name == "read")) then
      return "passing " .. a.assign .. " to '" .. name .. "' is not known to be harmless"
    end
  end
  local entry = programs.table[name]
  if entry == nil then return "'" .. name .. "' is not known to be read-only" end
  if entry == "any" then return nil end
  local args = {}
  for j = k + 1, #words do args[#args + 1] = words[j] end
  local ctx = setmetatable({ state = state, depth = depth, test_runners = state.test_runners }, Ctx)
  return entry(ctx, args, name)
end

local function starts_loop(cmd)
  for _, w in ipairs(cmd.words) do
    if w.quoted or not (KEYWORDS[w.text] or LOOPS[w.text]) then return false end
    if LOOPS[w.text] then return true end
  end
  return false
end

function analyze_line(line, state, depth)
  local cmds, why = shell.commands(line)
  if not cmds then return "the command uses " .. why .. ", which is not analysed" end
  local function pass()
    for _, c in ipairs(cmds) do
      local r = check_redirs(c.redirs, state) or check_words(c.words, state, depth)
      if r then return r end
    end
    return nil
  end
  local loops = false
  for _, c in ipairs(cmds) do
    if starts_loop(c) then loops = true end
  end
  if not loops then return pass() end
  -- a loop's next round starts wherever the last one cd'd to: go round until
  -- the directories the shell may be in stop growing
  for _ = 1, 3 do
    local before = state.cwds and #state.cwds or -1
    local r = pass()
    if r then return r end
    if (state.cwds and #state.cwds or -1) == before then return nil end
  end
  state.cwds = nil
  return pass()
end

-- nil when line is proven read-only or confined to opts.writable, else the reason.
function M.analyze(line, opts)
  opts = type(opts) == "table" and opts or {}
  if type(line) ~= "string" then return "no command line to analyse" end
  local writable = {}
  for _, r in ipairs(type(opts.writable) == "table" and opts.writable or {}) do
    local n = paths.normalize(r)
    if n then writable[#writable + 1] = n end
  end
  local cwd = paths.normalize(opts.cwd)
  local state = { cwds = cwd and { cwd } or nil, writable = writable, test_runners = opts.test_runners == true }
  local ok, r = pcall(analyze_line, line, state, 0)
  if ok then
    -- a reason quotes words of the line: keep it short enough to record
    if r and #r > MAX_REASON then r = r:sub(1, MAX_REASON) .. "..." end
    return r
  end
  if type(r) == "string" then return "the command could not be analysed (" .. r .. ")" end
  error(r, 0) -- not ours (the policy's instruction budget): let it through
end

M.sed_script_safe = programs.sed_script_safe
M.awk_program_safe = programs.awk_program_safe
M.options = options

return M
