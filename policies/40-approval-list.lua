-- 40-approval-list: tools named in permissions.requiresApproval (or every tool,
-- with "*" or true) need a human's approval for each call.
return {
  name = "approval-list",
  decide = function(req)
    local list = type(req.permissions) == "table" and req.permissions.requiresApproval or nil
    if list == true then return "approve", "every tool call in this session requires approval" end
    if type(list) ~= "table" then return nil end
    for _, name in ipairs(list) do
      if name == req.tool or name == "*" then
        return "approve", "the session requires approval for '" .. tostring(req.tool) .. "'"
      end
    end
    return nil
  end,
}
