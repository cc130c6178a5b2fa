#!/usr/bin/env python3
"""Writes the replay recordings (one normalized model turn per line) that the
agent session tests use, into the directory given as the only argument."""
import json
import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def turn(text="", calls=(), after=None, tokens=(100, 20)):
    t = {"turn": {"text": text, "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]}}}
    if calls:
        t["turn"]["tool_calls"] = [{"id": c[0], "name": c[1], "arguments": c[2]} for c in calls]
    if after:
        t["after"] = {"role": "tool", "name": after}
    return t


def final(summary, after):
    return turn(json.dumps({"summary": summary, "result": {"ok": True}}), after=after)


def write(name, turns):
    with open(os.path.join(out, name), "w") as f:
        for t in turns:
            f.write(json.dumps(t) + "\n")


# a policy edited while the session waits: the first shell call was allowed
# (and must stay so on replay), the one after the edit is decided anew
write("policy_edit.jsonl", [
    turn("Looking around.", [("c1", "shell", {"command": "ls /workspace"})]),
    turn("Publishing.", [("c2", "publish_review", {"summary": "s", "findings": [], "verdict": "comment"})], after="shell"),
    turn("One more look.", [("c3", "shell", {"command": "ls /workspace/input"})], after="publish_review"),
    final("done after the policy edit", after="shell"),
])

# forbidden and hostile tool calls: a tool outside the allowlist, a path
# traversal, a huge output; each comes back to the model as a result
write("hostile.jsonl", [
    turn("Trying things.", [
        ("h1", "http_fetch", {"url": "https://example.test/"}),
        ("h2", "write_file", {"path": "/workspace/working/../../../etc/evil", "content": "x"}),
        ("h3", "shell", {"command": "head -c 20000000 /dev/zero | tr '\\0' y"}),
    ]),
    final("survived", after="shell"),
])

# a tool call that takes a while, to kill the engine in the middle of it
write("slow_tool.jsonl", [
    turn("Running a slow command.", [("s1", "shell", {"command": "sleep 3; echo slept"})]),
    final("finished after the slow command", after="shell"),
])

# a session that moves between hosts (test_sandbox_hosts.sh): a slow command
# to kill its worker in, a publish that waits for an approval, then a look at
# what the first sandbox held
write("moved.jsonl", [
    turn("Writing, then a slow command.", [("m1", "shell", {
        "command": "echo before > /workspace/output/before.txt; sleep 4; echo slept"})]),
    turn("Publishing.", [("m2", "publish_review", {"summary": "s", "findings": [], "verdict": "comment"})],
         after="shell"),
    turn("Looking again.", [("m3", "shell", {
        "command": "cat /workspace/output/before.txt; echo after > /workspace/output/after.txt; echo wrote"})],
         after="publish_review"),
    final("finished on another host", after="shell"),
])

# an answer that proposes a memory update (needs an approval before it is applied)
write("memory.jsonl", [
    turn(json.dumps({"summary": "noted", "result": {}, "memory_updates": ["the bucket must stay capped"]})),
])

# a long session: 200 turns, each reading a file; the history must grow linearly
long = [turn("Turn 1.", [("r1", "read_file", {"path": "/workspace/simple.md"})])]
for i in range(2, 201):
    long.append(turn("Turn %d." % i, [("r%d" % i, "read_file", {"path": "/workspace/simple.md"})], after="read_file"))
long.append(final("read it 200 times", after="read_file"))
write("long.jsonl", long)
