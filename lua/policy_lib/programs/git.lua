-- policy_lib.programs.git: git: the subcommands that only read, the options of
-- theirs that write a file or run a program, and git clone from a local source.
-- One family of policy_lib.programs' table (lua/policy_lib/programs.lua says
-- what an entry is and what its checkers get).
local lib = require "policy_lib.programs.lib"
local options = require "policy_lib.options"

local parse = lib.parse
local longs = lib.longs
local merge = lib.merge
local literal = lib.literal

local P = {}

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

return { table = P }
