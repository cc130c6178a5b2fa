-- pr_input.lua PAYLOAD.json DELIVERY: what the shipped GitHub trigger
-- (workflows/triggers/github.lua) maps a pull_request delivery to, printed as
-- {"id": ..., "workflow": ..., "input": {...}}: the start that
-- tests/integration/test_pr_review.sh makes directly, while the webhook
-- verifiers are not there yet.
local json = require "cjson"
local src = assert(os.getenv("ENGINE_SRC"), "ENGINE_SRC")
local f = assert(io.open(arg[1], "rb"))
local body = f:read("a")
f:close()
local trigger = dofile(src .. "/workflows/triggers/github.lua")
local start, why = trigger.map({ headers = { ["x-github-event"] = "pull_request", ["x-github-delivery"] = arg[2] },
  body = body, json = json.decode(body), delivery = arg[2] })
if not start then io.stderr:write("ignored: " .. tostring(why) .. "\n") os.exit(1) end
start.input.identity = "trigger:github"
io.write(json.encode(start), "\n")
