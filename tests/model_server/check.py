#!/usr/bin/env python3
"""Strict checker for model responses, used by selftest.sh (stdlib only).

  check.py events FILE             print the SSE event names, one a line
                                   ("data" for unnamed events, "[DONE]" for the sentinel)
  check.py stream PROVIDER FILE    validate an SSE body and print the assembled turn as JSON
  check.py json PROVIDER FILE      validate a JSON body and print the assembled turn as JSON

PROVIDER is chat | responses | anthropic. The assembled turn is
{"text", "tool_calls": [{"id","name","arguments"}], "finish_reason", "usage": {"input_tokens","output_tokens"}}
with finish_reason normalized to stop | tool_calls | length. Any violation of the
documented sequence exits 1 with a message.
"""

import json
import sys


class Bad(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Bad(msg)


def parse_sse(data):
    """Parse per the SSE spec; also insist on LF line ends and a final blank line."""
    need(b"\r" not in data, "CR in SSE body (providers use LF only)")
    text = data.decode("utf-8")
    need(text.endswith("\n\n"), "SSE body does not end with a blank line")
    events = []
    name, buf = None, []
    for line in text.split("\n")[:-1]:
        if line == "":
            if buf or name:
                events.append((name, "\n".join(buf)))
            name, buf = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            name = value
        elif field == "data":
            buf.append(value)
        else:
            raise Bad(f"unexpected SSE field {field!r}")
    return events


def chat_stream(events):
    text, calls, finish, usage, cid, done = "", {}, None, None, None, False
    for i, (name, data) in enumerate(events):
        need(name is None, f"chat chunks carry no event name, got {name!r}")
        need(not done, "data after [DONE]")
        if data == "[DONE]":
            done = True
            continue
        d = json.loads(data)
        need(d.get("object") == "chat.completion.chunk", f"chunk {i}: object is {d.get('object')!r}")
        cid = cid or d["id"]
        need(d["id"] == cid, "chunk ids differ")
        if d["choices"] == []:
            need("usage" in d and d["usage"], "empty choices but no usage")
            usage = {"input_tokens": d["usage"]["prompt_tokens"], "output_tokens": d["usage"]["completion_tokens"]}
            continue
        ch = d["choices"][0]
        need(ch["index"] == 0, "choice index != 0")
        need(finish is None, "chunk after finish_reason other than the usage chunk")
        delta = ch["delta"]
        if i == 0:
            need(delta.get("role") == "assistant", "first chunk has no role=assistant")
        if delta.get("content"):
            text += delta["content"]
        for tc in delta.get("tool_calls") or []:
            k = tc["index"]
            if k not in calls:
                need("id" in tc and tc.get("type") == "function" and "name" in tc["function"],
                     "first tool_call delta lacks id/type/function.name")
                need(tc["function"].get("arguments") == "", "first tool_call delta has non-empty arguments")
                calls[k] = {"id": tc["id"], "name": tc["function"]["name"], "arguments": ""}
            else:
                need("id" not in tc, "later tool_call delta repeats id")
                calls[k]["arguments"] += tc["function"].get("arguments", "")
        if ch.get("finish_reason"):
            finish = ch["finish_reason"]
            need(delta == {}, "finish chunk has a non-empty delta")
    need(done, "no data: [DONE]")
    need(finish is not None, "no finish_reason")
    return {"text": text, "tool_calls": [calls[k] for k in sorted(calls)], "finish_reason": finish, "usage": usage}


def chat_json(d):
    need(d.get("object") == "chat.completion", "object is not chat.completion")
    ch = d["choices"][0]
    m = ch["message"]
    need(m["role"] == "assistant", "role")
    calls = [{"id": t["id"], "name": t["function"]["name"], "arguments": t["function"]["arguments"]}
             for t in m.get("tool_calls") or []]
    for t in m.get("tool_calls") or []:
        need(t["type"] == "function", "tool call type")
    u = d["usage"]
    need(u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], "total_tokens")
    return {"text": m.get("content") or "", "tool_calls": calls, "finish_reason": ch["finish_reason"],
            "usage": {"input_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"]}}


def responses_turn(resp):
    text, calls = "", []
    for item in resp["output"]:
        if item["type"] == "message":
            for part in item["content"]:
                if part["type"] == "output_text":
                    text += part["text"]
        elif item["type"] == "function_call":
            calls.append({"id": item["call_id"], "name": item["name"], "arguments": item["arguments"]})
    if resp["status"] == "incomplete":
        need(resp["incomplete_details"]["reason"] == "max_output_tokens", "incomplete reason")
        finish = "length"
    else:
        need(resp["status"] == "completed", f"status {resp['status']!r}")
        finish = "tool_calls" if calls else "stop"
    u = resp["usage"]
    return {"text": text, "tool_calls": calls, "finish_reason": finish,
            "usage": {"input_tokens": u["input_tokens"], "output_tokens": u["output_tokens"]}}


def responses_stream(events):
    items, text_acc, args_acc, final = {}, {}, {}, None
    for i, (name, data) in enumerate(events):
        d = json.loads(data)
        need(name == d["type"], f"event name {name!r} != data.type {d['type']!r}")
        need(d["sequence_number"] == i, f"sequence_number {d['sequence_number']} at position {i}")
        need(final is None, "event after the terminal event")
        t = d["type"]
        if i == 0:
            need(t == "response.created", "first event is not response.created")
        if t == "response.output_item.added":
            items[d["output_index"]] = d["item"]
            need(d["item"]["status"] == "in_progress", "added item not in_progress")
        elif t == "response.output_text.delta":
            text_acc[d["item_id"]] = text_acc.get(d["item_id"], "") + d["delta"]
        elif t == "response.output_text.done":
            need(text_acc.get(d["item_id"], "") == d["text"], "output_text.done != sum of deltas")
        elif t == "response.function_call_arguments.delta":
            args_acc[d["item_id"]] = args_acc.get(d["item_id"], "") + d["delta"]
        elif t == "response.function_call_arguments.done":
            need(args_acc.get(d["item_id"], "") == d["arguments"], "arguments.done != sum of deltas")
        elif t == "response.output_item.done":
            need(d["output_index"] in items, "item done before added")
            it = d["item"]
            if it["type"] == "function_call":
                need(it["arguments"] == args_acc.get(it["id"], ""), "item arguments != deltas")
        elif t in ("response.completed", "response.incomplete", "response.failed"):
            final = d["response"]
    need(final is not None, "no response.completed/incomplete")
    return responses_turn(final)


def anthropic_stream(events):
    need(events and events[0][0] == "message_start", "first event is not message_start")
    need(events[-1][0] == "message_stop", "last event is not message_stop")
    blocks, open_idx, stop, usage, inp = [], None, None, None, None
    for name, data in events:
        d = json.loads(data)
        need(name == d["type"], f"event name {name!r} != data.type {d['type']!r}")
        t = d["type"]
        if t == "message_start":
            m = d["message"]
            need(m["content"] == [] and m["stop_reason"] is None, "message_start not empty")
            inp = m["usage"]["input_tokens"]
        elif t == "content_block_start":
            need(open_idx is None, "block started while another is open")
            need(d["index"] == len(blocks), "block index not sequential")
            cb = dict(d["content_block"])
            if cb["type"] == "tool_use":
                need(cb["input"] == {}, "tool_use start input not {}")
                cb["_json"] = ""
            blocks.append(cb)
            open_idx = d["index"]
        elif t == "content_block_delta":
            need(d["index"] == open_idx, "delta for a block that is not open")
            dl = d["delta"]
            b = blocks[open_idx]
            if dl["type"] == "text_delta":
                need(b["type"] == "text", "text_delta on non-text block")
                b["text"] += dl["text"]
            elif dl["type"] == "input_json_delta":
                need(b["type"] == "tool_use", "input_json_delta on non-tool block")
                b["_json"] += dl["partial_json"]
            else:
                raise Bad(f"unknown delta type {dl['type']}")
        elif t == "content_block_stop":
            need(d["index"] == open_idx, "stop for a block that is not open")
            open_idx = None
        elif t == "message_delta":
            stop = d["delta"]["stop_reason"]
            usage = d["usage"]["output_tokens"]
        elif t in ("ping", "message_stop"):
            pass
        else:
            raise Bad(f"unexpected event {t}")
    need(open_idx is None, "block left open")
    text = "".join(b["text"] for b in blocks if b["type"] == "text")
    calls = [{"id": b["id"], "name": b["name"], "arguments": b["_json"]} for b in blocks if b["type"] == "tool_use"]
    return {"text": text, "tool_calls": calls, "finish_reason": anthropic_finish(stop),
            "usage": {"input_tokens": inp, "output_tokens": usage}}


def anthropic_finish(stop):
    table = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
    need(stop in table, f"stop_reason {stop!r}")
    return table[stop]


def anthropic_json(d):
    need(d["type"] == "message" and d["role"] == "assistant", "not an assistant message")
    text = "".join(b["text"] for b in d["content"] if b["type"] == "text")
    calls = [{"id": b["id"], "name": b["name"],
              "arguments": b["input"] if isinstance(b["input"], str) else json.dumps(b["input"], separators=(",", ":"))}
             for b in d["content"] if b["type"] == "tool_use"]
    return {"text": text, "tool_calls": calls, "finish_reason": anthropic_finish(d["stop_reason"]),
            "usage": {"input_tokens": d["usage"]["input_tokens"], "output_tokens": d["usage"]["output_tokens"]}}


def main(argv):
    try:
        if argv[1] == "events":
            for name, data in parse_sse(open(argv[2], "rb").read()):
                print("[DONE]" if data == "[DONE]" else (name or "data"))
            return 0
        prov, path = argv[2], argv[3]
        raw = open(path, "rb").read()
        if argv[1] == "stream":
            ev = parse_sse(raw)
            turn = {"chat": chat_stream, "responses": responses_stream, "anthropic": anthropic_stream}[prov](ev)
        elif argv[1] == "json":
            d = json.loads(raw)
            turn = {"chat": chat_json, "responses": responses_turn, "anthropic": anthropic_json}[prov](d)
        else:
            raise Bad(f"unknown command {argv[1]}")
        print(json.dumps(turn, sort_keys=True, separators=(",", ":")))
        return 0
    except (Bad, KeyError, IndexError, TypeError, ValueError) as e:
        print(f"check.py: {' '.join(argv[1:])}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
