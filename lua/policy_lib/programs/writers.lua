-- policy_lib.programs.writers: programs that write files (cp, mv, ln, rm,
-- rmdir, mkdir, touch, tee, truncate, shred, chmod/chown/chgrp, install, dd,
-- gzip and bzip2): allowed when every path they write is under the writable
-- roots. One family of policy_lib.programs' table (lua/policy_lib/programs.lua
-- says what an entry is and what its checkers get).
local lib = require "policy_lib.programs.lib"
local options = require "policy_lib.options"

local parse = lib.parse
local longs = lib.longs
local merge = lib.merge
local literal = lib.literal
local has_slash = lib.has_slash
local HV = lib.HV

local P = {}

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

return { table = P }
