-- The one model interface: require "runners". runners.turn(model, request, opts) -> turn
--
--   model   = {name=, baseUrl=, provider= "openai"|"openai-responses"|"anthropic"
--              (else inferred), api_key_env=, max_tokens=, temperature=}
--             name "replay:PATH" answers from a recording (runners/replay.lua)
--   request = {system=, messages={{role="user"|"assistant"|"tool", content=,
--              tool_calls={{id=,name=,arguments=}}, tool_call_id=, name=}},
--              tools={{name=, description=, parameters=<JSON schema>}}}
--   opts    = {stream=true, on_delta=function(d) end, timeout=, idle_timeout=,
--              max_retries=2, response_schema={name=, schema=<JSON schema>}
--              (structured output: OpenAI's response_format / text.format,
--              strict off; Anthropic and replay have none, the prompt says it)}
--   turn    = {text=, tool_calls={{id=, name=, arguments=<table>,
--              arguments_json=}}, finish_reason= "stop"|"tool_calls"|"length"|...,
--              usage={input_tokens=, output_tokens=, cache_read_input_tokens=,
--              cache_creation_input_tokens= (the cache's share of input_tokens,
--              when the API reports it)}, model=, provider=, id= (the
--              response's id, when the API gives one)}
--
-- Errors are tables {type=, message=, status=, requests=, non_retryable=}:
-- RateLimited, Overloaded, ServerError, Timeout, Conflict, ConnectionError,
-- TruncatedStream, InvalidResponse (retried, then raised); BadRequest,
-- Unauthorized, Forbidden, NotFound, InvalidToolArguments, UnknownTool,
-- InvalidModelSpec, ReplayDiverged, ContextTooLong (the prompt is longer than
-- the model's context: a 400 saying so; not retried).
local M = {}

local RUNNERS = {
  openai = "runners.openai_chat", ["openai-chat"] = "runners.openai_chat",
  ["openai-responses"] = "runners.openai_responses", anthropic = "runners.anthropic",
}

-- The runner module's name for a model spec.
local function module_for(model)
  if type(model) ~= "table" or type(model.name) ~= "string" or model.name == "" then
    error({ type = "InvalidModelSpec", message = "model.name is required", non_retryable = true }, 0)
  end
  if model.name:sub(1, 7) == "replay:" then return "runners.replay" end
  local p = model.provider
  if p then
    local mod = RUNNERS[p]
    if not mod then
      error({ type = "InvalidModelSpec", message = "unknown model provider '" .. tostring(p) ..
        "' (openai, openai-responses, anthropic)", non_retryable = true }, 0)
    end
    return mod
  end
  if model.name:match("^claude") or (model.baseUrl or ""):match("anthropic") then return "runners.anthropic" end
  return "runners.openai_chat"
end

function M.runner_for(model) return require(module_for(model)) end

-- The provider whose limits a model's calls count against (the engine's
-- limits file, lua/caps.lua): the API it speaks to, openai for both of
-- OpenAI's wire formats, anthropic, or replay for a recording.
local PROVIDER = { ["runners.openai_chat"] = "openai", ["runners.openai_responses"] = "openai",
  ["runners.anthropic"] = "anthropic", ["runners.replay"] = "replay" }
function M.provider_of(model) return PROVIDER[module_for(M.resolve(model))] end

-- model.live = {name=, provider=, ...}: used instead of model when its
-- provider's API key is in the engine's environment (a demo that replays a
-- recording offline and talks to the real model when a key is there).
local KEY_ENV = { openai = "OPENAI_API_KEY", ["openai-chat"] = "OPENAI_API_KEY", ["openai-responses"] = "OPENAI_API_KEY",
  anthropic = "ANTHROPIC_API_KEY" }
M.KEY_ENV = KEY_ENV -- engine doctor reports each one
function M.resolve(model)
  local live = type(model) == "table" and model.live
  if type(live) == "table" then
    local env = live.api_key_env or KEY_ENV[live.provider or "openai"]
    local key = env and os.getenv(env)
    if key and key ~= "" then return live end
  end
  return model
end

function M.turn(model, request, opts)
  model = M.resolve(model)
  return M.runner_for(model).turn(model, request, opts)
end

return M
