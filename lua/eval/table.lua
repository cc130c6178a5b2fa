-- An eval run's result for people (`engine eval` on a terminal): a table of
-- the cases (pass or fail per scorer, turns, tokens, cost, wall time), the
-- totals, the failures' details and the regressions against the baseline.
-- The CLI prints the lines through its terminal-safe output.
local M = {}

local MARK = { pass = "ok", fail = "FAIL", error = "ERR", skip = "-" }

local function pad(s, w, right)
  s = tostring(s)
  local n = utf8.len(s) or #s
  if n >= w then return s end
  return right and (string.rep(" ", w - n) .. s) or (s .. string.rep(" ", w - n))
end

local function money(v) return string.format("$%.4f", tonumber(v) or 0) end
local function secs(v) return string.format("%.1fs", tonumber(v) or 0) end

-- The result's lines (a list of strings).
function M.render(r)
  local names = r.scorers or {}
  local heads = { r.fork and "variant" or "case" }
  for i, n in ipairs(names) do heads[#heads + 1] = "s" .. i end
  for _, h in ipairs({ "outcome", "turns", "tokens", "cost", "wall", "result" }) do heads[#heads + 1] = h end
  local rows = {}
  for _, c in ipairs(r.cases or {}) do
    local row = { c.case }
    for _, n in ipairs(names) do
      local s = (c.scores or {})[n]
      row[#row + 1] = s and MARK[s.result] or "?"
    end
    local outcome = c.status == "completed" and tostring(c.outcome or "completed") or tostring(c.status)
    for _, v in ipairs({ outcome, c.turns, c.tokens, money(c.cost_usd), secs(c.wall_seconds), c.pass and "PASS" or "FAIL" }) do
      row[#row + 1] = v
    end
    rows[#rows + 1] = row
  end
  local t = r.totals or {}
  rows[#rows + 1] = { "total", table.unpack((function()
    local cells = {}
    for _ = 1, #names do cells[#cells + 1] = "" end
    for _, v in ipairs({ "", t.turns, t.tokens, money(t.cost_usd), secs(t.wall_seconds),
      string.format("%d/%d", t.passed or 0, t.cases or 0) }) do cells[#cells + 1] = v end
    return cells
  end)()) }
  local widths = {}
  for i, h in ipairs(heads) do widths[i] = utf8.len(h) end
  for _, row in ipairs(rows) do
    for i, v in ipairs(row) do widths[i] = math.max(widths[i], utf8.len(tostring(v)) or #tostring(v)) end
  end
  local out = {}
  if r.fork then
    local f = r.fork
    out[#out + 1] = string.format("eval %s: %d variants of %s forked %s%s", tostring(r.run), #(r.cases or {}),
      tostring(f.source), f.turn and ("before turn " .. tostring(f.turn)) or ("at #" .. tostring(f.at)),
      r.case and (", scored as case " .. tostring(r.case) .. " of suite " .. tostring(r.suite)) or "")
  else
    out[#out + 1] = string.format("eval %s: suite %s%s, %d cases", tostring(r.run), tostring(r.suite),
      r.live and " (live models)" or " (recorded models)", #(r.cases or {}))
  end
  local function line(cells)
    local parts = {}
    for i, v in ipairs(cells) do parts[i] = pad(v, widths[i], i > 2 + #names and i < #heads) end
    out[#out + 1] = (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  line(heads)
  for i, row in ipairs(rows) do
    if i == #rows then
      local rule = {}
      for k = 1, #heads do rule[k] = string.rep("-", widths[k]) end
      out[#out + 1] = table.concat(rule, "  ")
    end
    line(row)
  end
  out[#out + 1] = ""
  for i, n in ipairs(names) do out[#out + 1] = string.format("s%d = %s", i, n) end
  local failed = false
  for _, c in ipairs(r.cases or {}) do
    if c.error then
      out[#out + 1] = string.format("%s: the session %s %s: %s", c.case, c.session, c.status,
        tostring(c.error.message or c.error.type))
    end
    for _, n in ipairs(names) do
      local s = (c.scores or {})[n]
      if s and (s.result == "fail" or s.result == "error") then
        if not failed then out[#out + 1] = "" failed = true end
        out[#out + 1] = string.format("%s: %s %s%s", c.case, n, s.result == "fail" and "failed" or "raised an error",
          s.detail and (": " .. s.detail) or "")
      end
    end
  end
  if r.baseline then
    out[#out + 1] = ""
    local reg = r.baseline.regressions or {}
    if #reg == 0 then
      out[#out + 1] = string.format("no regression against %s", tostring(r.baseline.run))
    else
      out[#out + 1] = string.format("%d case%s regressed against %s:", #reg, #reg == 1 and "" or "s",
        tostring(r.baseline.run))
      for _, g in ipairs(reg) do
        local what = {}
        for _, s in ipairs(g.scorers) do what[#what + 1] = s.scorer .. " (now " .. s.now .. ")" end
        out[#out + 1] = string.format("  %s: %s", g.case, table.concat(what, ", "))
      end
    end
  end
  if r.artifact then out[#out + 1] = string.format("suite_result.json: %s", tostring(r.artifact.stored)) end
  return out
end

return M
