#!/usr/bin/env python3
"""Writes the broken payloads of fixtures/bad_payloads.json: one edit each of
fixtures/trace_agent.json. For each case N (from 1): OUTDIR/N.json (the
payload) and OUTDIR/N.expect (the fragments decode.mjs must print, one a
line); prints "N<TAB>name" lines on stdout.

  python3 tests/otel/bad_payloads.py OUTDIR
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def walk(obj, path):
    """The container holding PATH's last part, and that part (an int for arrays)."""
    parts = path.split(".")
    for p in parts[:-1]:
        obj = obj[int(p)] if isinstance(obj, list) else obj[p]
    last = parts[-1]
    return obj, int(last) if isinstance(obj, list) else last


def build(text, case):
    if "replace_text" in case:
        old, new = case["replace_text"]
        if old not in text:
            raise SystemExit(f"bad_payloads: {case['name']}: text {old!r} not in the fixture")
        return text.replace(old, new, 1)
    doc = json.loads(text)
    if "set" in case:
        path, value = case["set"]
        parent, key = walk(doc, path)
        parent[key] = value
    elif "delete" in case:
        parent, key = walk(doc, case["delete"])
        del parent[key]
    elif "rename" in case:
        path, new = case["rename"]
        parent, key = walk(doc, path)
        # keep the key's place: rebuild the object in order
        items = [(new if k == key else k, v) for k, v in parent.items()]
        parent.clear()
        parent.update(items)
    else:
        raise SystemExit(f"bad_payloads: {case['name']}: no edit (set, delete, rename, replace_text)")
    return json.dumps(doc, indent=1)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(HERE, "fixtures", "trace_agent.json")) as f:
        text = f.read()
    with open(os.path.join(HERE, "fixtures", "bad_payloads.json")) as f:
        cases = json.load(f)["cases"]
    for n, case in enumerate(cases, 1):
        with open(os.path.join(out, f"{n}.json"), "w") as f:
            f.write(build(text, case))
        with open(os.path.join(out, f"{n}.expect"), "w") as f:
            f.write("".join(e + "\n" for e in case["expect"]))
        print(f"{n}\t{case['name']}")


if __name__ == "__main__":
    main()
