-- 00-allowlist: a tool the session's permissions.tools does not list is denied,
-- whatever any other policy says (deny beats approval beats allow).
return {
  name = "allowlist",
  decide = function(req)
    local tools = type(req.permissions) == "table" and req.permissions.tools or nil
    if type(tools) == "table" then
      for _, name in ipairs(tools) do
        if name == req.tool then return nil end
      end
    end
    return "deny", "the tool '" .. tostring(req.tool) .. "' is not in this session's permissions.tools"
  end,
}
