-- The hostile text of tests/integration/test_terminal_output.sh, made on the
-- activity side (where sandbox output enters the engine). Each piece sits in
-- brackets with its name, so the test can find how each one was shown.
local M = {}

M.pieces = {
  { "title", "\27]0;pwned\7" },      -- OSC: sets the terminal title
  { "clear", "\27[2J" },             -- CSI: clears the screen
  { "red", "\27[31m" },
  { "c1", "\194\155" },              -- U+009B (CSI) as UTF-8
  { "c1raw", "\155" },               -- 0x9B alone: CSI on 8-bit terminals
  { "bidi", "\226\128\174" },        -- U+202E RIGHT-TO-LEFT OVERRIDE
  { "invalid", "\255\254" },
  { "truncated", "\226\128" },       -- a 3-byte sequence cut after 2
  { "del", "\127" },
  { "cr", "\r" },
  { "newline", "\n" },
  { "nul", "\0" },                  -- last: C strings end here
}

function M.texts()
  local all = {}
  for _, p in ipairs(M.pieces) do all[#all + 1] = "[" .. p[1] .. ":" .. p[2] .. "]" end
  return {
    all = table.concat(all),
    name = "evil\27]0;pwned\7\27[2J\226\128\174name\255",
    long = string.rep("L", 20000) .. "\27[2J",
  }
end

function M.fail(args)
  error({ type = "Hostile", message = args.message, non_retryable = true })
end

return M
