-- api_bench hooks: a signed GitHub-shaped delivery starts api_noop.lua, one
-- workflow per body key (the secret is BENCH_WEBHOOK_SECRET in api_bench.sh).
return {
  verify = { kind = "github", secret = "BENCH_WEBHOOK_SECRET" },
  map = function(req) return { workflow = "api_noop.lua", id = req.json.key, input = { number = req.json.number } } end,
}
