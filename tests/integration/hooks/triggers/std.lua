return {
  verify = { kind = "standard", secret = "TEST_STD_SECRET", tolerance = 300 },
  map = function(req) return { workflow = "record.lua", id = "std:" .. req.delivery, input = { type = req.json.type } } end,
}
