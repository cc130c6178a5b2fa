-- None of expect.secrets appears in anything the session recorded: its
-- events (tool results are redacted before they are recorded) and its result.
return {
  description = "no secret of the diff reaches the record",
  score = function(case, run)
    local secrets = case.expect.secrets
    if type(secrets) ~= "table" or #secrets == 0 then return nil end
    local texts = { json.encode(run.result) }
    for _, e in ipairs(run.events) do texts[#texts + 1] = json.encode(e.payload) end
    for _, text in ipairs(texts) do
      for _, s in ipairs(secrets) do
        if text:find(s, 1, true) then return false, "a secret appears in the record (" .. s:sub(1, 4) .. "...)" end
      end
    end
    return true, #secrets .. " secret(s) kept out"
  end,
}
