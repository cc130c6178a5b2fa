-- policy_lib.programs: the audited table of the programs a shell command may
-- run without a human's approval, and how each one's arguments are checked.
-- The table is assembled here from one file per program family
-- (lua/policy_lib/programs/*.lua); a name is in one family only.
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

-- The families (lua/policy_lib/programs/FAMILY.lua, each returning {table =
-- its entries}); a program named by two is an error here, so no family
-- silently overrides another.
local FAMILIES = { "readers", "builtins", "git", "writers", "wrappers", "shells", "test_runners" }

local P, from = {}, {}
for _, family in ipairs(FAMILIES) do
  for name, entry in pairs(require("policy_lib.programs." .. family).table) do
    if from[name] then
      error("policy_lib.programs: '" .. name .. "' is in both " .. from[name] .. " and " .. family, 0)
    end
    P[name], from[name] = entry, family
  end
end

local readers = require "policy_lib.programs.readers"
return { table = P, sed_script_safe = readers.sed_script_safe, awk_program_safe = readers.awk_program_safe }
