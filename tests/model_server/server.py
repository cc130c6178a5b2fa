#!/usr/bin/env python3
"""Scripted local model server for the engine's tests.

Speaks three provider wire formats over plain HTTP/1.1 on 127.0.0.1:
  POST /v1/chat/completions   OpenAI Chat Completions (JSON or SSE)
  POST /v1/responses          OpenAI Responses        (JSON or SSE)
  POST /v1/messages           Anthropic Messages      (JSON or SSE)
and a few control endpoints:
  GET /_requests   DELETE /_requests   GET|POST /_scenario   GET /_health
  POST /_release?gate=NAME (the requests held at gate NAME go on)

Every model request consumes the next step of the scenario (see README.md).
Python 3.11 standard library only; asyncio, so thousands of slow streams cost
no threads.
"""

import argparse
import asyncio
import http
import json
import os
import re
import resource
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FIXTURES = os.path.normpath(os.path.join(HERE, "..", "fixtures", "model"))

ENDPOINTS = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "anthropic",
}
CONTROL_PATHS = ("/_requests", "/_scenario", "/_health", "/_release")

JSON_CT = "application/json"
SSE_CT = "text/event-stream; charset=utf-8"
SYSTEM_FINGERPRINT = "fp_mock0000"
MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024

STEP_KEYS = {
    "reply", "status", "headers", "body", "content_type", "delay", "chunk_delay",
    "cut_after_events", "cut_after_bytes", "raw", "fixture", "bad_arguments",
    "expect", "stream_error", "fragment_size", "comment",
    "chunk_bytes", "line_endings", "end_after_events", "framing", "hold",
    "hold_after_events",
}
LINE_ENDINGS = {"lf": b"\n", "crlf": b"\r\n", "cr": b"\r"}
FIXTURE_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*$")
EXPECT_KEYS = {"path", "method", "has_header", "header", "stream", "model", "body_contains"}
REPLY_KEYS = {"text", "tool_calls", "finish_reason", "usage"}
FINISH_REASONS = ("stop", "tool_calls", "length")
ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


class ScenarioError(ValueError):
    pass


def dumps(obj):
    """Compact JSON, UTF-8 kept as is (both providers send raw UTF-8)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------
# scenario validation

def validate_step(step, where, fixtures_dir):
    if not isinstance(step, dict):
        raise ScenarioError(f"{where}: a step must be an object, got {type(step).__name__}")
    unknown = set(step) - STEP_KEYS
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(STEP_KEYS)}")
    kinds = [k for k in ("reply", "raw", "fixture") if k in step]
    if len(kinds) > 1:
        raise ScenarioError(f"{where}: only one of reply/raw/fixture per step, got {kinds}")
    if not kinds and "status" not in step:
        raise ScenarioError(f"{where}: a step needs one of reply, status, raw or fixture")
    if "status" in step:
        st = step["status"]
        if not isinstance(st, int) or not 100 <= st <= 999:
            raise ScenarioError(f"{where}: status must be an integer 100..999")
    if "reply" in step:
        r = step["reply"]
        if not isinstance(r, dict):
            raise ScenarioError(f"{where}: reply must be an object")
        unknown = set(r) - REPLY_KEYS
        if unknown:
            raise ScenarioError(f"{where}: reply has unknown key(s) {sorted(unknown)}")
        if r.get("text") is not None and not isinstance(r["text"], str):
            raise ScenarioError(f"{where}: reply.text must be a string")
        tcs = r.get("tool_calls") or []
        if not isinstance(tcs, list):
            raise ScenarioError(f"{where}: reply.tool_calls must be an array")
        for i, tc in enumerate(tcs):
            if not isinstance(tc, dict) or not isinstance(tc.get("name"), str):
                raise ScenarioError(f"{where}: reply.tool_calls[{i}] needs a string 'name'")
            a = tc.get("arguments", "{}")
            if not isinstance(a, (str, dict, list)):
                raise ScenarioError(f"{where}: reply.tool_calls[{i}].arguments must be a JSON string or an object")
        fr = r.get("finish_reason")
        if fr is not None and fr not in FINISH_REASONS:
            raise ScenarioError(f"{where}: reply.finish_reason must be one of {FINISH_REASONS}")
        u = r.get("usage")
        if u is not None and not isinstance(u, dict):
            raise ScenarioError(f"{where}: reply.usage must be an object")
    if "raw" in step and not isinstance(step["raw"], str):
        raise ScenarioError(f"{where}: raw must be a string")
    if "fixture" in step:
        name = step["fixture"]
        if not isinstance(name, str) or not FIXTURE_NAME.match(name):
            raise ScenarioError(f"{where}: fixture must be a file name or a relative path "
                                f"(like recorded/x.sse) with no '.'-led parts")
        path = os.path.join(fixtures_dir, name)
        if not os.path.isfile(path):
            raise ScenarioError(f"{where}: fixture {path} does not exist")
    if "headers" in step:
        h = step["headers"]
        if not isinstance(h, dict) or not all(isinstance(v, (str, int, float)) for v in h.values()):
            raise ScenarioError(f"{where}: headers must be an object of strings")
    if "hold" in step and (not isinstance(step["hold"], str) or not step["hold"]):
        raise ScenarioError(f"{where}: hold must be a gate's name (a non-empty string)")
    if "hold_after_events" in step:
        holds = step["hold_after_events"]
        holds = [holds] if isinstance(holds, dict) else holds
        if not (isinstance(holds, list) and holds and all(
                isinstance(h, dict) and set(h) == {"events", "gate"} and isinstance(h["events"], int)
                and h["events"] >= 1 and isinstance(h["gate"], str) and h["gate"] for h in holds)
                and all(a["events"] < b["events"] for a, b in zip(holds, holds[1:]))):
            raise ScenarioError(f"{where}: hold_after_events must be {{\"events\": N >= 1, \"gate\": NAME}} "
                                "or a list of them with N increasing")
        if "chunk_bytes" in step:
            raise ScenarioError(f"{where}: hold_after_events and chunk_bytes exclude each other")
    for k in ("delay", "chunk_delay"):
        if k in step and (not isinstance(step[k], (int, float)) or step[k] < 0):
            raise ScenarioError(f"{where}: {k} must be a number >= 0")
    for k in ("cut_after_events", "cut_after_bytes", "fragment_size", "end_after_events"):
        if k in step and (not isinstance(step[k], int) or step[k] < 0):
            raise ScenarioError(f"{where}: {k} must be an integer >= 0")
    if step.get("fragment_size") == 0:
        raise ScenarioError(f"{where}: fragment_size must be >= 1")
    if "cut_after_events" in step and "end_after_events" in step:
        raise ScenarioError(f"{where}: cut_after_events and end_after_events exclude each other")
    if "chunk_bytes" in step:
        cb = step["chunk_bytes"]
        sizes = cb if isinstance(cb, list) else [cb]
        if not sizes or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes):
            raise ScenarioError(f"{where}: chunk_bytes must be an integer >= 1 or a non-empty array of them")
    if "framing" in step and step["framing"] not in ("chunked", "close"):
        raise ScenarioError(f"{where}: framing must be \"chunked\" or \"close\"")
    if "line_endings" in step and step["line_endings"] not in LINE_ENDINGS:
        raise ScenarioError(f"{where}: line_endings must be one of {sorted(LINE_ENDINGS)}")
    if "expect" in step:
        e = step["expect"]
        if not isinstance(e, dict):
            raise ScenarioError(f"{where}: expect must be an object")
        unknown = set(e) - EXPECT_KEYS
        if unknown:
            raise ScenarioError(f"{where}: expect has unknown key(s) {sorted(unknown)}; allowed: {sorted(EXPECT_KEYS)}")
    if "stream_error" in step:
        se = step["stream_error"]
        if not isinstance(se, dict) or not isinstance(se.get("after_events", 0), int):
            raise ScenarioError(f"{where}: stream_error must be an object with integer after_events")


def validate_scenario(sc, fixtures_dir):
    if not isinstance(sc, dict):
        raise ScenarioError("scenario must be a JSON object {\"steps\": [...], \"default\": STEP}")
    unknown = set(sc) - {"steps", "default", "routes", "comment"}
    if unknown:
        raise ScenarioError(f"scenario has unknown key(s) {sorted(unknown)}")
    routes = sc.get("routes", [])
    if not isinstance(routes, list):
        raise ScenarioError("scenario.routes must be an array")
    for i, r in enumerate(routes):
        if not isinstance(r, dict) or set(r) - {"body_has", "step", "comment"} or \
                not isinstance(r.get("body_has"), str) or not r["body_has"]:
            raise ScenarioError(f"routes[{i}] must be {{\"body_has\": \"text\", \"step\": STEP}}")
        validate_step(r.get("step"), f"routes[{i}].step", fixtures_dir)
    steps = sc.get("steps", [])
    if not isinstance(steps, list):
        raise ScenarioError("scenario.steps must be an array")
    for i, st in enumerate(steps):
        validate_step(st, f"steps[{i}]", fixtures_dir)
    if sc.get("default") is not None:
        validate_step(sc["default"], "default", fixtures_dir)
    return {"steps": steps, "default": sc.get("default"), "routes": routes}


# --------------------------------------------------------------------------
# the normalized reply

TEXT_PIECE = re.compile(r"\s*\S+|\s+")


def split_text(text):
    """Word-ish pieces whose concatenation is exactly text."""
    return TEXT_PIECE.findall(text) if text else []


def split_fixed(s, n):
    return [s[i:i + n] for i in range(0, len(s), n)]


def break_json(s):
    """Make valid JSON text invalid the way a truncated model output looks."""
    s = s.rstrip()
    if len(s) > 1:
        return s[:-1]
    return "{"


class Reply:
    def __init__(self, step, ctx):
        r = step["reply"]
        self.text = r.get("text") or ""
        self.tool_calls = []
        for i, tc in enumerate(r.get("tool_calls") or []):
            args = tc.get("arguments", "{}")
            if not isinstance(args, str):
                args = dumps(args)
            if step.get("bad_arguments"):
                args = break_json(args)
            self.tool_calls.append({
                "id": tc.get("id") or ctx.default_tool_id(i),
                "name": tc["name"],
                "arguments": args,
            })
        self.finish = r.get("finish_reason") or ("tool_calls" if self.tool_calls else "stop")
        self.frag = step.get("fragment_size", 8)
        self.text_pieces = split_text(self.text)
        u = r.get("usage") or {}
        guess = max(1, len(self.text_pieces) + sum(
            len(split_fixed(t["arguments"], self.frag)) for t in self.tool_calls))
        self.input_tokens = int(u.get("input_tokens", 10))
        self.output_tokens = int(u.get("output_tokens", guess))

    def arg_pieces(self, tc):
        return split_fixed(tc["arguments"], self.frag)


class Ctx:
    """Per-request identity: endpoint, ids, model, request body."""

    def __init__(self, seq, kind, body):
        self.seq = seq
        self.kind = kind
        self.body = body if isinstance(body, dict) else {}
        self.stream = self.body.get("stream") is True
        self.created = int(time.time())
        default_model = "claude-sonnet-4-5-20250929" if kind == "anthropic" else "gpt-4o-2024-08-06"
        m = self.body.get("model")
        self.model = m if isinstance(m, str) and m else default_model
        self.tag = f"mock{seq:06d}"

    def default_tool_id(self, i):
        if self.kind == "anthropic":
            return f"toolu_{self.tag}_{i}"
        return f"call_{self.tag}_{i}"


# --------------------------------------------------------------------------
# OpenAI Chat Completions

def chat_usage(r):
    return {
        "prompt_tokens": r.input_tokens,
        "completion_tokens": r.output_tokens,
        "total_tokens": r.input_tokens + r.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0,
                                      "rejected_prediction_tokens": 0},
    }


def chat_json(ctx, r):
    msg = {"role": "assistant", "content": r.text if r.text else None, "refusal": None,
           "annotations": []}
    if r.tool_calls:
        msg["tool_calls"] = [{"id": t["id"], "type": "function",
                              "function": {"name": t["name"], "arguments": t["arguments"]}}
                             for t in r.tool_calls]
    return {
        "id": f"chatcmpl-{ctx.tag}",
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": r.finish}],
        "usage": chat_usage(r),
        "service_tier": "default",
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }


def chat_sse(ctx, r):
    so = ctx.body.get("stream_options")
    include_usage = isinstance(so, dict) and so.get("include_usage") is True
    out = []

    def chunk(delta=None, finish=None, choices=None, usage=None):
        d = {"id": f"chatcmpl-{ctx.tag}", "object": "chat.completion.chunk",
             "created": ctx.created, "model": ctx.model, "service_tier": "default",
             "system_fingerprint": SYSTEM_FINGERPRINT}
        d["choices"] = choices if choices is not None else [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        if include_usage:
            d["usage"] = usage
        out.append(("data: " + dumps(d) + "\n\n").encode())

    if r.text or not r.tool_calls:
        chunk({"role": "assistant", "content": "", "refusal": None})
    else:
        chunk({"role": "assistant", "content": None})
    for p in r.text_pieces:
        chunk({"content": p})
    for i, t in enumerate(r.tool_calls):
        chunk({"tool_calls": [{"index": i, "id": t["id"], "type": "function",
                               "function": {"name": t["name"], "arguments": ""}}]})
        for p in r.arg_pieces(t):
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
    chunk({}, r.finish)
    if include_usage:
        chunk(choices=[], usage=chat_usage(r))
    out.append(b"data: [DONE]\n\n")
    return out


def openai_error(status, message=None):
    table = {
        400: ("invalid_request_error", None, "Invalid request."),
        401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
        403: ("invalid_request_error", "unsupported_country_region_territory",
              "Country, region, or territory not supported."),
        404: ("invalid_request_error", "model_not_found",
              "The model does not exist or you do not have access to it."),
        429: ("requests", "rate_limit_exceeded",
              "Rate limit reached for requests per min (RPM). Please try again in 1s."),
        500: ("server_error", None,
              "The server had an error while processing your request. Sorry about that!"),
        503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    }
    if status in table:
        typ, code, msg = table[status]
    elif status >= 500:
        typ, code, msg = "server_error", None, "The server had an error while processing your request."
    else:
        typ, code, msg = "invalid_request_error", None, "Invalid request."
    return {"error": {"message": message or msg, "type": typ, "param": None, "code": code}}


# --------------------------------------------------------------------------
# OpenAI Responses

def responses_usage(r):
    return {"input_tokens": r.input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": r.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": r.input_tokens + r.output_tokens}


def responses_object(ctx, r, status, output, usage):
    b = ctx.body
    return {
        "id": f"resp_{ctx.tag}",
        "object": "response",
        "created_at": ctx.created,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": b.get("instructions"),
        "max_output_tokens": b.get("max_output_tokens"),
        "model": ctx.model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": b.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": b.get("store", True),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": b.get("tool_choice", "auto"),
        "tools": b.get("tools", []),
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def responses_items(ctx, r):
    """(final item, item id) list in output order."""
    items = []
    idx = 0
    final_status = "incomplete" if r.finish == "length" else "completed"
    if r.text:
        items.append({"id": f"msg_{ctx.tag}_{idx}", "type": "message", "status": final_status,
                      "content": [{"type": "output_text", "annotations": [], "text": r.text}],
                      "role": "assistant"})
        idx += 1
    for t in r.tool_calls:
        items.append({"id": f"fc_{ctx.tag}_{idx}", "type": "function_call", "status": "completed",
                      "arguments": t["arguments"], "call_id": t["id"], "name": t["name"]})
        idx += 1
    return items


def responses_json(ctx, r):
    status = "incomplete" if r.finish == "length" else "completed"
    return responses_object(ctx, r, status, responses_items(ctx, r), responses_usage(r))


def responses_sse(ctx, r):
    out = []
    seq = [0]

    def ev(typ, **fields):
        d = {"type": typ, "sequence_number": seq[0]}
        d.update(fields)
        seq[0] += 1
        out.append(f"event: {typ}\ndata: {dumps(d)}\n\n".encode())

    ev("response.created", response=responses_object(ctx, r, "in_progress", [], None))
    ev("response.in_progress", response=responses_object(ctx, r, "in_progress", [], None))
    items = responses_items(ctx, r)
    tools = iter(r.tool_calls)
    for oi, item in enumerate(items):
        if item["type"] == "message":
            iid = item["id"]
            ev("response.output_item.added", output_index=oi,
               item={"id": iid, "type": "message", "status": "in_progress", "content": [],
                     "role": "assistant"})
            ev("response.content_part.added", item_id=iid, output_index=oi, content_index=0,
               part={"type": "output_text", "annotations": [], "text": ""})
            for p in r.text_pieces:
                ev("response.output_text.delta", item_id=iid, output_index=oi, content_index=0,
                   delta=p)
            ev("response.output_text.done", item_id=iid, output_index=oi, content_index=0,
               text=r.text)
            ev("response.content_part.done", item_id=iid, output_index=oi, content_index=0,
               part={"type": "output_text", "annotations": [], "text": r.text})
            ev("response.output_item.done", output_index=oi, item=item)
        else:
            t = next(tools)
            iid = item["id"]
            ev("response.output_item.added", output_index=oi,
               item={"id": iid, "type": "function_call", "status": "in_progress",
                     "arguments": "", "call_id": t["id"], "name": t["name"]})
            for p in r.arg_pieces(t):
                ev("response.function_call_arguments.delta", item_id=iid, output_index=oi,
                   delta=p)
            ev("response.function_call_arguments.done", item_id=iid, output_index=oi,
               arguments=t["arguments"])
            ev("response.output_item.done", output_index=oi, item=item)
    if r.finish == "length":
        ev("response.incomplete",
           response=responses_object(ctx, r, "incomplete", items, responses_usage(r)))
    else:
        ev("response.completed",
           response=responses_object(ctx, r, "completed", items, responses_usage(r)))
    return out


# --------------------------------------------------------------------------
# Anthropic Messages

def anthropic_tool_input(args):
    """tool_use.input is a JSON object; arguments that do not parse to one are
    passed as the raw string (an invalid shape, on purpose: bad_arguments)."""
    try:
        v = json.loads(args)
    except ValueError:
        return args
    return v if isinstance(v, dict) else args


def anthropic_json(ctx, r):
    content = []
    if r.text:
        content.append({"type": "text", "text": r.text})
    for t in r.tool_calls:
        content.append({"type": "tool_use", "id": t["id"], "name": t["name"],
                        "input": anthropic_tool_input(t["arguments"])})
    return {
        "id": f"msg_{ctx.tag}",
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": ANTHROPIC_STOP[r.finish],
        "stop_sequence": None,
        "usage": {"input_tokens": r.input_tokens, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": r.output_tokens,
                  "service_tier": "standard"},
    }


ANTHROPIC_PING = b'event: ping\ndata: {"type": "ping"}\n\n'


def anthropic_sse(ctx, r):
    out = []

    def ev(typ, **fields):
        d = {"type": typ}
        d.update(fields)
        out.append(f"event: {typ}\ndata: {dumps(d)}\n\n".encode())

    ev("message_start", message={
        "id": f"msg_{ctx.tag}", "type": "message", "role": "assistant", "model": ctx.model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": r.input_tokens, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 1,
                  "service_tier": "standard"}})
    pinged = False
    idx = 0
    if r.text:
        ev("content_block_start", index=idx, content_block={"type": "text", "text": ""})
        out.append(ANTHROPIC_PING)
        pinged = True
        for p in r.text_pieces:
            ev("content_block_delta", index=idx, delta={"type": "text_delta", "text": p})
        ev("content_block_stop", index=idx)
        idx += 1
    for t in r.tool_calls:
        ev("content_block_start", index=idx,
           content_block={"type": "tool_use", "id": t["id"], "name": t["name"], "input": {}})
        if not pinged:
            out.append(ANTHROPIC_PING)
            pinged = True
        ev("content_block_delta", index=idx, delta={"type": "input_json_delta", "partial_json": ""})
        for p in r.arg_pieces(t):
            ev("content_block_delta", index=idx,
               delta={"type": "input_json_delta", "partial_json": p})
        ev("content_block_stop", index=idx)
        idx += 1
    if not pinged:
        out.append(ANTHROPIC_PING)
    ev("message_delta", delta={"stop_reason": ANTHROPIC_STOP[r.finish], "stop_sequence": None},
       usage={"output_tokens": r.output_tokens})
    ev("message_stop")
    return out


ANTHROPIC_ERRORS = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


def anthropic_error(status, message=None, seq=0):
    if status in ANTHROPIC_ERRORS:
        typ, msg = ANTHROPIC_ERRORS[status]
    elif status >= 500:
        typ, msg = "api_error", "Internal server error"
    else:
        typ, msg = "invalid_request_error", "Invalid request."
    return {"type": "error", "error": {"type": typ, "message": message or msg},
            "request_id": f"req_mock{seq:06d}"}


def error_body(kind, status, message=None, seq=0):
    if kind == "anthropic":
        return anthropic_error(status, message, seq)
    return openai_error(status, message)


def stream_error_event(ctx, se, seq_no):
    typ = se.get("type")
    msg = se.get("message")
    if ctx.kind == "anthropic":
        typ = typ or "overloaded_error"
        d = {"type": "error", "error": {"type": typ, "message": msg or "Overloaded"}}
        return f"event: error\ndata: {dumps(d)}\n\n".encode()
    if ctx.kind == "responses":
        d = {"type": "error", "sequence_number": seq_no, "code": se.get("code", typ or "server_error"),
             "message": msg or "The server had an error while processing your request.",
             "param": None}
        return f"event: error\ndata: {dumps(d)}\n\n".encode()
    d = {"error": {"message": msg or "The server had an error while processing your request.",
                   "type": typ or "server_error", "param": None, "code": se.get("code")}}
    return f"data: {dumps(d)}\n\n".encode()


RENDER = {
    "chat": (chat_json, chat_sse),
    "responses": (responses_json, responses_sse),
    "anthropic": (anthropic_json, anthropic_sse),
}


def split_sse(data):
    """Split SSE bytes after each blank-line separator, keeping every byte."""
    parts = re.split(rb"(?<=\n\n)", data)
    return [p for p in parts if p]


# --------------------------------------------------------------------------
# HTTP plumbing

class BadRequest(Exception):
    pass


class Request:
    def __init__(self, method, target, version, headers, raw_headers, body):
        self.method = method
        self.target = target
        self.path, _, self.query = target.partition("?")
        self.version = version
        self.headers = headers          # lower-cased name -> value
        self.raw_headers = raw_headers  # [(name, value)] as received
        self.body = body

    def keep_alive(self):
        conn = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in conn
        return "close" not in conn


async def read_request(reader, writer):
    try:
        line = await reader.readline()
    except (ConnectionError, ValueError):
        return None
    if not line:
        return None
    while line in (b"\r\n", b"\n"):  # tolerate stray CRLF between requests
        line = await reader.readline()
        if not line:
            return None
    try:
        method, target, version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    except ValueError:
        raise BadRequest(f"malformed request line {line[:100]!r}")
    if not version.startswith("HTTP/1."):
        raise BadRequest(f"unsupported protocol {version!r}")
    headers, raw = {}, []
    total = 0
    while True:
        h = await reader.readline()
        total += len(h)
        if total > MAX_HEADER_BYTES:
            raise BadRequest("headers too large")
        if not h:
            return None
        if h in (b"\r\n", b"\n"):
            break
        name, sep, value = h.decode("latin-1").partition(":")
        if not sep:
            raise BadRequest(f"malformed header line {h[:100]!r}")
        name = name.strip()
        value = value.strip()
        raw.append((name, value))
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    body = b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        size_total = 0
        while True:
            sl = await reader.readline()
            if not sl:
                return None
            try:
                size = int(sl.split(b";")[0].strip(), 16)
            except ValueError:
                raise BadRequest(f"bad chunk size line {sl[:40]!r}")
            if size == 0:
                while True:  # trailers
                    t = await reader.readline()
                    if t in (b"\r\n", b"\n", b""):
                        break
                break
            size_total += size
            if size_total > MAX_BODY_BYTES:
                raise BadRequest("body too large")
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(parts)
    elif "content-length" in headers:
        try:
            n = int(headers["content-length"])
        except ValueError:
            raise BadRequest("bad content-length")
        if n < 0 or n > MAX_BODY_BYTES:
            raise BadRequest("bad content-length")
        body = await reader.readexactly(n)
    return Request(method, target, version, headers, raw, body)


def reason_phrase(status):
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return {529: "Site Overloaded"}.get(status, "Unknown")


def http_date():
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())


def head_bytes(status, headers):
    lines = [f"HTTP/1.1 {status} {reason_phrase(status)}"]
    for k, v in headers:
        lines.append(f"{k}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Cut(Exception):
    """The step asked to drop the connection."""


class ModelServer:
    def __init__(self, scenario, fixtures_dir, verbose=False):
        self.fixtures_dir = fixtures_dir
        self.scenario = scenario
        self.cursor = 0
        self.requests = []
        self.seq = 0
        self.active = 0
        self.peak = 0
        self.served = 0
        self.gates = {}  # name -> asyncio.Event, set once POST /_release opened it
        self.held = 0
        self.verbose = verbose

    def log(self, msg):
        if self.verbose:
            print(f"model_server: {msg}", file=sys.stderr, flush=True)

    # -- connection loop ----------------------------------------------------
    async def handle(self, reader, writer):
        try:
            while True:
                try:
                    req = await read_request(reader, writer)
                except BadRequest as e:
                    await self.send_simple(writer, 400, {"error": {"message": str(e), "type":
                                           "invalid_request_error", "param": None, "code": None}},
                                           keep=False)
                    break
                if req is None:
                    break
                keep = req.keep_alive()
                try:
                    keep = await self.dispatch(req, writer) and keep
                except Cut:
                    keep = False
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        except Exception:
            traceback.print_exc()
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def send_simple(self, writer, status, body, keep=True, extra=(), ctype=JSON_CT):
        data = body if isinstance(body, bytes) else (dumps(body) + "\n").encode() \
            if not isinstance(body, str) else body.encode()
        hdrs = [("date", http_date()), ("content-type", ctype), ("content-length", str(len(data))),
                ("connection", "keep-alive" if keep else "close")] + list(extra)
        writer.write(head_bytes(status, hdrs) + data)
        await writer.drain()
        return keep

    # -- routing --------------------------------------------------------------
    async def dispatch(self, req, writer):
        path = req.path
        if path not in CONTROL_PATHS:
            entry = self.log_request(req)
            if path not in ENDPOINTS:
                return await self.send_simple(writer, 404, openai_error(404, f"model_server: no route for {req.method} {path}"))
            if req.method != "POST":
                return await self.send_simple(writer, 405, openai_error(405, f"Method {req.method} not allowed on {path}; use POST"))
            return await self.model_request(req, writer, ENDPOINTS[path], entry)
        if path == "/_health" and req.method == "GET":
            return await self.send_simple(writer, 200, {
                "ok": True, "cursor": self.cursor, "steps": len(self.scenario["steps"]),
                "has_default": self.scenario.get("default") is not None,
                "requests": len(self.requests), "active": self.active, "peak_active": self.peak,
                "served": self.served, "held": self.held})
        if path == "/_release" and req.method == "POST":
            name = dict(p.split("=", 1) for p in (req.query or "").split("&") if "=" in p).get("gate", "")
            self.gate(name).set()
            return await self.send_simple(writer, 200, {"ok": True, "gate": name, "held": self.held})
        if path == "/_requests":
            if req.method == "GET":
                return await self.send_simple(writer, 200, self.requests)
            if req.method == "DELETE":
                n = len(self.requests)
                self.requests = []
                return await self.send_simple(writer, 200, {"ok": True, "cleared": n})
        if path == "/_scenario":
            if req.method == "GET":
                return await self.send_simple(writer, 200, {"scenario": self.scenario, "cursor": self.cursor})
            if req.method in ("POST", "PUT"):
                try:
                    sc = validate_scenario(json.loads(req.body.decode("utf-8")), self.fixtures_dir)
                except (ValueError, UnicodeDecodeError) as e:
                    return await self.send_simple(writer, 400, {"ok": False, "error": f"bad scenario: {e}"})
                self.scenario = sc
                self.cursor = 0
                if "peak=reset" in req.query:
                    self.peak = self.active
                self.log(f"scenario replaced: {len(sc['steps'])} steps")
                return await self.send_simple(writer, 200, {"ok": True, "steps": len(sc["steps"])})
        return await self.send_simple(writer, 405, {"error": f"method {req.method} not allowed on {path}"})

    def gate(self, name):
        if name not in self.gates:
            self.gates[name] = asyncio.Event()
        return self.gates[name]

    # -- model endpoints -------------------------------------------------------
    def next_step(self, raw=b""):
        # a request whose body holds a route's text takes that route's step,
        # and the steps stay where they are
        for i, r in enumerate(self.scenario.get("routes") or []):
            if r["body_has"].encode("utf-8") in raw:
                return f"routes[{i}]", r["step"]
        steps = self.scenario["steps"]
        if self.cursor < len(steps):
            i = self.cursor
            self.cursor += 1
            return i, steps[i]
        if self.scenario.get("default") is not None:
            return "default", self.scenario["default"]
        return None, None

    def log_request(self, req):
        """Record a non-control request in the /_requests log and return its entry."""
        self.seq += 1
        body = None
        entry = {"seq": self.seq, "method": req.method, "path": req.path,
                 "headers": dict(req.headers), "body": None, "step": None, "time": time.time()}
        if req.query:
            entry["query"] = req.query
        if req.body:
            try:
                body = json.loads(req.body.decode("utf-8"))
                entry["body"] = body
            except (ValueError, UnicodeDecodeError) as e:
                entry["body_raw"] = req.body.decode("utf-8", "replace")
                entry["body_error"] = str(e)
        self.requests.append(entry)
        return entry

    async def model_request(self, req, writer, kind, entry):
        seq = entry["seq"]
        body = entry["body"]
        if not isinstance(body, dict):
            why = entry.get("body_error") or "body must be a JSON object"
            return await self.send_simple(writer, 400, error_body(
                kind, 400, f"model_server: bad request body (not consumed a step): {why}", seq))
        ctx = Ctx(seq, kind, body)
        idx, step = self.next_step(req.body or b"")
        entry["step"] = idx
        self.log(f"#{seq} {req.path} stream={ctx.stream} -> step {idx}")
        if step is None:
            msg = (f"model_server: scenario exhausted: request #{seq} ({req.method} {req.path}) "
                   f"found no step left ({len(self.scenario['steps'])} steps used) and no 'default'")
            return await self.send_simple(writer, 500, error_body(kind, 500, msg, seq),
                                          extra=[("x-model-server-error", "scenario-exhausted")])
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            keep = await self.run_step(req, writer, ctx, idx, step)
            self.served += 1
            return keep
        finally:
            self.active -= 1

    def check_expect(self, req, ctx, exp):
        problems = []
        if "path" in exp and req.path != exp["path"]:
            problems.append(f"path is {req.path!r}, expected {exp['path']!r}")
        if "method" in exp and req.method != exp["method"]:
            problems.append(f"method is {req.method!r}, expected {exp['method']!r}")
        hh = exp.get("has_header")
        if hh is not None:
            for name in ([hh] if isinstance(hh, str) else hh):
                if name.lower() not in req.headers:
                    problems.append(f"header {name!r} missing")
        for name, val in (exp.get("header") or {}).items():
            got = req.headers.get(name.lower())
            if got != val:
                problems.append(f"header {name!r} is {got!r}, expected {val!r}")
        if "stream" in exp and ctx.stream != exp["stream"]:
            problems.append(f"stream is {ctx.stream}, expected {exp['stream']}")
        if "model" in exp and ctx.body.get("model") != exp["model"]:
            problems.append(f"model is {ctx.body.get('model')!r}, expected {exp['model']!r}")
        if "body_contains" in exp:
            where = subset_mismatch(exp["body_contains"], ctx.body, "body")
            if where:
                problems.append(where)
        return problems

    async def run_step(self, req, writer, ctx, idx, step):
        kind = ctx.kind
        if step.get("expect"):
            problems = self.check_expect(req, ctx, step["expect"])
            if problems:
                msg = f"model_server: expectation failed for step {idx}: " + "; ".join(problems)
                print(msg, file=sys.stderr, flush=True)
                return await self.send_simple(writer, 400, error_body(kind, 400, msg, ctx.seq),
                                              extra=[("x-model-server-error", "expectation-failed")])
        if step.get("hold"):  # waits for POST /_release?gate=NAME: slow, deterministically
            self.held += 1
            try:
                await self.gate(step["hold"]).wait()
            finally:
                self.held -= 1
        if step.get("delay"):
            await asyncio.sleep(step["delay"])
        extra = [(k, str(v)) for k, v in (step.get("headers") or {}).items()]
        if kind == "anthropic":
            extra.append(("request-id", f"req_mock{ctx.seq:06d}"))
        else:
            extra.append(("x-request-id", f"req_mock{ctx.seq:06d}"))
        keep = req.keep_alive()

        if "reply" in step:
            r = Reply(step, ctx)
            to_json, to_sse = RENDER[kind]
            if ctx.stream:
                return await self.send_sse(writer, step, ctx, step.get("status", 200), extra,
                                           to_sse(ctx, r), keep)
            return await self.send_body(writer, step, step.get("status", 200), extra,
                                        dumps(to_json(ctx, r)).encode(),
                                        JSON_CT, keep)
        if "raw" in step:
            data = step["raw"].encode("utf-8")
            status = step.get("status", 200)
            if ctx.stream:
                return await self.send_sse(writer, step, ctx, status, extra, split_sse(data), keep,
                                           ctype=step.get("content_type", SSE_CT))
            return await self.send_body(writer, step, status, extra, data,
                                        step.get("content_type", JSON_CT), keep)
        if "fixture" in step:
            path = os.path.join(self.fixtures_dir, step["fixture"])
            with open(path, "rb") as f:
                data = f.read()
            status = step.get("status", 200)
            if path.endswith(".sse"):
                return await self.send_sse(writer, step, ctx, status, extra, split_sse(data), keep,
                                           ctype=step.get("content_type", SSE_CT))
            ctype = step.get("content_type", JSON_CT if path.endswith(".json") else "text/plain; charset=utf-8")
            return await self.send_body(writer, step, status, extra, data, ctype, keep)
        # error / plain status step
        status = step["status"]
        body = step.get("body")
        if body is None:
            body = error_body(kind, status, None, ctx.seq)
        if isinstance(body, str):
            data = body.encode("utf-8")
            ctype = step.get("content_type", "text/plain; charset=utf-8")
        else:
            data = dumps(body).encode("utf-8")
            ctype = step.get("content_type", JSON_CT)
        return await self.send_body(writer, step, status, extra, data, ctype, keep)

    async def send_body(self, writer, step, status, extra, data, ctype, keep):
        hdrs = [("date", http_date()), ("content-type", ctype), ("content-length", str(len(data)))]
        cut = step.get("cut_after_bytes")
        hdrs.append(("connection", "close" if (cut is not None or not keep) else "keep-alive"))
        hdrs += extra
        writer.write(head_bytes(status, hdrs))
        if cut is not None:
            writer.write(data[:cut])
            await writer.drain()
            raise Cut()
        writer.write(data)
        await writer.drain()
        return keep

    async def send_sse(self, writer, step, ctx, status, extra, events, keep, ctype=SSE_CT):
        cut = step.get("cut_after_events")
        end = step.get("end_after_events")
        se = step.get("stream_error")
        # framing "close": no Transfer-Encoding, the body ends with the
        # connection (a close then looks like a clean end to the client)
        chunked = step.get("framing", "chunked") == "chunked"
        keep = keep and chunked
        hdrs = [("date", http_date()), ("content-type", ctype)] + \
            ([("transfer-encoding", "chunked")] if chunked else []) + \
            [("cache-control", "no-cache"), ("connection", "keep-alive" if keep else "close")]
        hdrs += extra
        writer.write(head_bytes(status, hdrs))
        await writer.drain()
        delay = step.get("chunk_delay") or 0
        if se is not None:
            n = se.get("after_events", 0)
            events = events[:n] + [stream_error_event(ctx, se, n)]
        if end is not None:
            events = events[:end]
        # cut_after_events N: N events, then the connection drops (a stream of
        # fewer events is sent whole and ends normally)
        if cut is not None and cut > len(events):
            cut = None
        send = events if cut is None else events[:cut]
        if "line_endings" in step:
            eol = LINE_ENDINGS[step["line_endings"]]
            send = [ev.replace(b"\r\n", b"\n").replace(b"\n", eol) for ev in send]
        if "chunk_bytes" in step:
            send = split_bytes(b"".join(send), step["chunk_bytes"])
        # cut_after_bytes N: the stream's first N bytes (mid-event, as likely
        # as not), then the connection drops
        cut_bytes = step.get("cut_after_bytes")
        if cut_bytes is not None:
            kept, n = [], 0
            for piece in send:
                if n + len(piece) >= cut_bytes:
                    kept.append(piece[:cut_bytes - n])
                    break
                kept.append(piece)
                n += len(piece)
            send, cut = [p for p in kept if p], 0
        # hold_after_events {events: N, gate} (or a list of them): N events
        # sent, the rest waits for POST /_release?gate=NAME (a stream that is
        # mid-way, deterministically)
        holds = step.get("hold_after_events") or []
        holds = {h["events"]: h["gate"] for h in ([holds] if isinstance(holds, dict) else holds)}
        for i, piece in enumerate(send):
            if i in holds:
                self.held += 1
                try:
                    await self.gate(holds[i]).wait()
                finally:
                    self.held -= 1
            if i and delay:
                await asyncio.sleep(delay)
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            await writer.drain()
        if cut is not None:
            raise Cut()
        if not chunked:
            raise Cut()  # the close ends the body
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return keep


def split_bytes(data, sizes):
    """data in pieces of sizes[0], sizes[1], ... bytes, the sizes repeating."""
    sizes = sizes if isinstance(sizes, list) else [sizes]
    out, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        out.append(data[i:i + n])
        i += n
        k += 1
    return out


def subset_mismatch(want, got, where):
    """None when want is a (recursive) subset of got, else a description."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{where} is {type(got).__name__}, expected an object"
        for k, v in want.items():
            if k not in got:
                return f"{where}.{k} missing"
            m = subset_mismatch(v, got[k], f"{where}.{k}")
            if m:
                return m
        return None
    if want != got:
        return f"{where} is {dumps(got)[:200]}, expected {dumps(want)[:200]}"
    return None


def raise_nofile():
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass


async def main_async(args):
    fixtures_dir = os.path.abspath(args.fixtures_dir)
    try:
        with open(args.scenario, "r", encoding="utf-8") as f:
            scenario = validate_scenario(json.load(f), fixtures_dir)
    except (OSError, ValueError) as e:
        print(f"model_server: cannot load scenario {args.scenario}: {e}", file=sys.stderr)
        return 2
    srv = ModelServer(scenario, fixtures_dir, verbose=args.verbose)
    server = await asyncio.start_server(srv.handle, args.host, args.port, backlog=4096,
                                        limit=MAX_HEADER_BYTES, reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    print(port, flush=True)
    print(f"model_server: listening on http://{args.host}:{port} "
          f"({len(scenario['steps'])} steps, fixtures {fixtures_dir})", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    async with server:
        await stop.wait()
    return 0


def main():
    ap = argparse.ArgumentParser(description="Scripted local model server (OpenAI Chat, OpenAI Responses, Anthropic Messages).")
    ap.add_argument("--scenario", required=True, help="scenario JSON file")
    ap.add_argument("--port", type=int, default=0, help="port to bind (0: any free port)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port-file", help="write the bound port to this file once listening")
    ap.add_argument("--fixtures-dir", default=DEFAULT_FIXTURES,
                    help=f"where 'fixture' steps read files (default {DEFAULT_FIXTURES})")
    ap.add_argument("--verbose", "-v", action="store_true", help="log each request to stderr")
    args = ap.parse_args()
    raise_nofile()
    sys.exit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
