return {
  route = "ci",
  verify = { kind = "bearer", secret = "TEST_BEARER_TOKEN" },
  delivery_header = "X-Request-Id",
  map = function(req) return { workflow = "record.lua", input = { from = "ci" } } end,
}
