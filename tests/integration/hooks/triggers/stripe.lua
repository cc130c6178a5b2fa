return {
  verify = { kind = "stripe", secret = "TEST_STRIPE_SECRET" },
  map = function(req) return { workflow = "record.lua", id = "stripe:" .. req.json.id, input = { type = req.json.type } } end,
}
