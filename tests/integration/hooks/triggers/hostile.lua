-- A trigger that misbehaves in each way the body asks for: none of it may
-- start anything or reach outside its sandbox.
return {
  verify = { kind = "github", secret = "TEST_GH_SECRET" },
  map = function(req)
    local how = req.json and req.json.how
    if how == "error" then error("boom") end
    if how == "loop" then while true do end end
    if how == "io" then return { workflow = "record.lua", input = { f = io.open("/etc/passwd"):read("a") } } end
    if how == "os" then return { workflow = "record.lua", input = { f = os.getenv("TEST_GH_SECRET") } } end
    if how == "traversal" then return { workflow = "../../hello.lua" } end
    if how == "badid" then return { workflow = "record.lua", id = "../x" } end
    if how == "longid" then return { workflow = "record.lua", id = ("a"):rep(300) } end
    if how == "utf8" then error(("é"):rep(600)) end
    if how == "list" then return { workflow = "record.lua", input = { 1, 2, 3 } } end
    if how == "number" then return 42 end
    if how == "rep" then return { workflow = "record.lua", input = { s = ("x"):rep(1e9) } } end
    return nil, "nothing asked"
  end,
}
