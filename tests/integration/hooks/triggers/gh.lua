-- GitHub-signed deliveries; the body's "key" names the workflow, so two
-- deliveries of one key start it once.
return {
  verify = { kind = "github", secret = "TEST_GH_SECRET" },
  map = function(req)
    if req.headers["x-github-event"] == "ping" then return nil, "ping" end
    if type(req.json) ~= "table" or type(req.json.key) ~= "string" then error("no key in the body") end
    return { workflow = "record.lua", id = "gh:" .. req.json.key, input = { key = req.json.key, delivery = req.delivery } }
  end,
}
