#!/usr/bin/env python3
"""Checks the shape of a trace the engine exported: which spans, how they
nest, what they carry. decode.mjs says each request is valid OTLP; this says
the spans across all requests make the trace the engine promised.

  check_trace.py --spans SOURCE --expect EXPECT.json [--tree]

SOURCE: the receiver's --out file, its GET /_spans (a file or the URL), or
one ExportTraceServiceRequest. Prints each difference on a line starting
"- "; exit 0 when none, 1 when some, 2 when a file cannot be read.

Always checked, whatever EXPECT says:
  - ids are hex of the right length, not all zero (any case: OTLP/JSON
    hex is case-insensitive), every span has a name
  - no span id appears twice, across every request (a retried export or an
    engine restart must not send a span again)
  - one trace id among all spans (EXPECT's trace_id, when given)
  - each span's parent is a span of the set, or one of external_parents
    ("" in that list: a span with no parent); no cycle of parents
  - start and end times set, start <= end; a child lies within its parent
    (give or take time_slack_ns)
  - no attribute key twice in one span

EXPECT (every key optional):
  {"trace_id": "HEX",
   "external_parents": ["HEX", ""],        default [""]: only true roots
   "roots": 1,                             spans whose parent is outside the set
   "time_slack_ns": 0,
   "allow_other_spans": true,              false: every span must match a rule
   "spans": [                              rules; a span may match several
     {"name": "invoke_agent"} or {"name_re": "^chat "},
      "count": 4 | "min": 1 | "max": 9,    default "min": 1
      "kind": "CLIENT" | 3 | ["CLIENT", "INTERNAL"],
      "attributes": {"gen_ai.usage.input_tokens": "int",
                     "gen_ai.request.model": {"type": "string", "value": "m"},
                     "gen_ai.tool.name": {"re": "^(shell|write_file)$"}},
      "absent_attributes": ["gen_ai.prompt"],
      "resource_attributes": {"service.name": {"value": "engine"}},
      "scope": {"name": "engine"},
      "status_code": 0,
      "parent": "external" | {"name": ...} | {"name_re": ...},
      "ancestor": {"name": ...} | {"name_re": ...}}
   ],
   "values": [                             per-span values, compared as a multiset
     {"name_re": "^chat ", "attributes": ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"],
      "equals": [[1850, 96], [2210, 88]]}],
   "sums": [{"name_re": "^chat ", "attribute": "gen_ai.usage.input_tokens", "equals": 4060}]}

An attribute's type is one of string, bool, int, double, array, kvlist,
bytes (OTLP's AnyValue members: gen_ai.usage.input_tokens must be an
intValue, not a string that looks like a number).
"""

import argparse
import json
import os
import re
import sys
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import otlp_json  # noqa: E402

KIND_BY_NAME = {v: k for k, v in otlp_json.SPAN_KINDS.items()}
TOP_KEYS = {"trace_id", "external_parents", "roots", "time_slack_ns", "allow_other_spans", "spans", "values", "sums", "comment"}
RULE_KEYS = {"name", "name_re", "count", "min", "max", "kind", "attributes", "absent_attributes",
             "resource_attributes", "scope", "status_code", "parent", "ancestor", "comment"}
VALUES_KEYS = {"name", "name_re", "attributes", "equals"}
SUMS_KEYS = {"name", "name_re", "attribute", "equals"}
HEX = re.compile(r"^[0-9a-fA-F]*$")


def hex_id(v, digits):
    """The lowercase id, or None when it is not `digits` hex digits, not all zero."""
    if not isinstance(v, str) or len(v) != digits or not HEX.match(v) or set(v) == {"0"}:
        return None
    return v.lower()


def label(s):
    return f"'{s.get('name')}' ({str(s.get('spanId', '?')).lower()})"


def kind_of(v):
    if isinstance(v, str):
        return KIND_BY_NAME.get(v.upper().replace("SPAN_KIND_", ""), v)
    return v


def matches_name(rule, span):
    if "name" in rule:
        return span.get("name") == rule["name"]
    if "name_re" in rule:
        return isinstance(span.get("name"), str) and re.search(rule["name_re"], span["name"]) is not None
    return True


def rule_label(rule):
    if "name" in rule:
        return f"spans named '{rule['name']}'"
    if "name_re" in rule:
        return f"spans named /{rule['name_re']}/"
    return "every span"


def check_attr(where, attrs, key, spec, diffs):
    """One expected attribute: spec is a type name, or {type?, value?, re?}."""
    if isinstance(spec, str):
        spec = {"type": spec}
    if key not in attrs:
        diffs.append(f"{where}: no attribute {key}")
        return
    t, v = attrs[key]
    if "type" in spec and t != spec["type"]:
        diffs.append(f"{where}: {key} is {t} ({v!r}), expected {spec['type']}")
        return
    if "value" in spec and v != spec["value"]:
        diffs.append(f"{where}: {key} is {v!r}, expected {spec['value']!r}")
    if "re" in spec and not (isinstance(v, str) and re.search(spec["re"], v)):
        diffs.append(f"{where}: {key} is {v!r}, expected to match /{spec['re']}/")


def check_expect(expect):
    """Refuses an expectation file with a key it does not know: a misspelt
    rule would otherwise check nothing, silently."""
    def keys(obj, allowed, where):
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: an object expected")
        unknown = set(obj) - allowed
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    keys(expect, TOP_KEYS, "expect")
    for i, r in enumerate(expect.get("spans", [])):
        keys(r, RULE_KEYS, f"expect.spans[{i}]")
        for k in ("parent", "ancestor"):
            if k not in r:
                continue
            if isinstance(r[k], dict):
                keys(r[k], {"name", "name_re"}, f"expect.spans[{i}].{k}")
            elif not (k == "parent" and r[k] == "external"):
                raise ValueError(f"expect.spans[{i}].{k}: {{name|name_re}}" + (' or "external"' if k == "parent" else ""))
    for i, v in enumerate(expect.get("values", [])):
        keys(v, VALUES_KEYS, f"expect.values[{i}]")
    for i, v in enumerate(expect.get("sums", [])):
        keys(v, SUMS_KEYS, f"expect.sums[{i}]")


def check(spans, expect):
    """The list of differences (strings) between spans and expect."""
    check_expect(expect)
    diffs = []
    if not spans:
        return ["no spans at all"]
    ext = {("" if p == "" else p.lower()) for p in expect.get("external_parents", [""])}
    slack = int(expect.get("time_slack_ns", 0))

    # ---- ids, names, duplicates
    by_id = {}
    seen = Counter()
    for s in spans:
        sid = hex_id(s.get("spanId"), 16)
        if sid is None:
            diffs.append(f"span {label(s)}: spanId {s.get('spanId')!r} is not 16 hex digits (not all zero)")
            continue
        seen[sid] += 1
        by_id.setdefault(sid, s)
        if not s.get("name"):
            diffs.append(f"span {sid}: no name")
    for sid, n in seen.items():
        if n > 1:
            copies = [s for s in spans if str(s.get("spanId", "")).lower() == sid]
            where = ", ".join(f"'{c.get('name')}' in request {c.get('request_seq', '?')}" for c in copies)
            diffs.append(f"span id {sid} appears {n} times: {where}")

    # ---- one trace
    traces = Counter()
    for s in spans:
        tid = hex_id(s.get("traceId"), 32)
        if tid is None:
            diffs.append(f"span {label(s)}: traceId {s.get('traceId')!r} is not 32 hex digits (not all zero)")
        else:
            traces[tid] += 1
    want = expect.get("trace_id")
    if want is not None:
        for tid, n in traces.items():
            if tid != want.lower():
                diffs.append(f"{n} span(s) in trace {tid}, expected every span in {want.lower()}")
    elif len(traces) > 1:
        diffs.append(f"{len(traces)} traces, expected one: " + ", ".join(f"{t} ({n} spans)" for t, n in traces.items()))

    # ---- parents
    parent = {}
    outside = []
    for sid, s in by_id.items():
        p = s.get("parentSpanId", "") or ""
        if p != "" and hex_id(p, 16) is None:
            diffs.append(f"span {label(s)}: parentSpanId {p!r} is not 16 hex digits (not all zero), nor empty")
            continue
        p = p.lower()
        parent[sid] = p
        if p not in by_id:
            outside.append(sid)
            if p not in ext:
                diffs.append(f"span {label(s)}: its parent {p or '(none: a root)'} is neither a span of the set"
                             f" nor an expected external parent ({', '.join(sorted(x or '(none)' for x in ext))})")
    if "roots" in expect and len(outside) != expect["roots"]:
        diffs.append(f"{len(outside)} span(s) whose parent is outside the set, expected {expect['roots']}: "
                     + ", ".join(label(by_id[s]) for s in outside))
    for sid in by_id:  # a loop of parents never reaches a root
        hops, p = 0, parent.get(sid)
        while p in by_id and hops <= len(by_id):
            p, hops = parent.get(p), hops + 1
        if hops > len(by_id):
            diffs.append(f"span {label(by_id[sid])}: its parents form a loop")
            break

    # ---- times
    for sid, s in by_id.items():
        st, en = otlp_json.nanos(s.get("startTimeUnixNano")), otlp_json.nanos(s.get("endTimeUnixNano"))
        if st is None or en is None:
            diffs.append(f"span {label(s)}: no start or end time ({s.get('startTimeUnixNano')!r}, {s.get('endTimeUnixNano')!r})")
            continue
        if st > en:
            diffs.append(f"span {label(s)}: ends {st - en} ns before it starts")
        ps = by_id.get(parent.get(sid))
        if ps is None:
            continue
        pst, pen = otlp_json.nanos(ps.get("startTimeUnixNano")), otlp_json.nanos(ps.get("endTimeUnixNano"))
        if pst is not None and st < pst - slack:
            diffs.append(f"span {label(s)} starts {pst - st} ns before its parent {label(ps)}")
        if pen is not None and en > pen + slack:
            diffs.append(f"span {label(s)} ends {en - pen} ns after its parent {label(ps)}")

    # ---- attribute keys once
    for s in spans:
        keys = Counter(kv.get("key") for kv in s.get("attributes", []) if isinstance(kv, dict))
        for k, n in keys.items():
            if n > 1:
                diffs.append(f"span {label(s)}: attribute {k} appears {n} times")

    # ---- the rules
    matched = set()
    for rule in expect.get("spans", []):
        chosen = [s for s in by_id.values() if matches_name(rule, s)]
        matched.update(id(s) for s in chosen)
        what = rule_label(rule)
        n = len(chosen)
        if "count" in rule and n != rule["count"]:
            diffs.append(f"{n} {what}, expected {rule['count']}")
        if n < rule.get("min", 1 if "count" not in rule else 0):
            diffs.append(f"{n} {what}, expected at least {rule.get('min', 1)}")
        if "max" in rule and n > rule["max"]:
            diffs.append(f"{n} {what}, expected at most {rule['max']}")
        for s in chosen:
            where = f"span {label(s)}"
            if "kind" in rule:
                kinds = rule["kind"] if isinstance(rule["kind"], list) else [rule["kind"]]
                kinds = [kind_of(k) for k in kinds]
                if s.get("kind", 0) not in kinds:
                    names = "/".join(otlp_json.SPAN_KINDS.get(k, str(k)) for k in kinds)
                    diffs.append(f"{where}: kind {otlp_json.SPAN_KINDS.get(s.get('kind', 0), s.get('kind'))}, expected {names}")
            attrs = otlp_json.attributes(s)
            for key, spec in rule.get("attributes", {}).items():
                check_attr(where, attrs, key, spec, diffs)
            for key in rule.get("absent_attributes", []):
                if key in attrs:
                    diffs.append(f"{where}: has attribute {key}, expected none")
            rattrs = otlp_json.attributes(s.get("resource", {}))
            for key, spec in rule.get("resource_attributes", {}).items():
                check_attr(f"{where}'s resource", rattrs, key, spec, diffs)
            for key, v in rule.get("scope", {}).items():
                if s.get("scope", {}).get(key) != v:
                    diffs.append(f"{where}: scope {key} is {s.get('scope', {}).get(key)!r}, expected {v!r}")
            if "status_code" in rule:
                code = (s.get("status") or {}).get("code", 0)
                if code != rule["status_code"]:
                    diffs.append(f"{where}: status code {code}, expected {rule['status_code']}")
            if "parent" in rule:
                p = by_id.get(parent.get(str(s.get("spanId", "")).lower()))
                if rule["parent"] == "external":
                    if p is not None:
                        diffs.append(f"{where}: its parent is {label(p)}, expected one outside the trace")
                elif p is None or not matches_name(rule["parent"], p):
                    diffs.append(f"{where}: its parent is {label(p) if p else 'outside the set'},"
                                 f" expected one of the {rule_label(rule['parent'])}")
            if "ancestor" in rule:
                p, found, hops = parent.get(str(s.get("spanId", "")).lower()), False, 0
                while p in by_id and hops <= len(by_id):
                    if matches_name(rule["ancestor"], by_id[p]):
                        found = True
                        break
                    p, hops = parent.get(p), hops + 1
                if not found:
                    diffs.append(f"{where}: none of its ancestors is among the {rule_label(rule['ancestor'])}")
    if expect.get("allow_other_spans", True) is False:
        for s in by_id.values():
            if id(s) not in matched:
                diffs.append(f"span {label(s)} matches no rule")

    for v in expect.get("values", []):
        chosen = [s for s in by_id.values() if matches_name(v, s)]
        got = []
        for s in chosen:
            attrs = otlp_json.attributes(s)
            got.append([attrs.get(k, (None, None))[1] for k in v["attributes"]])
        key = lambda row: json.dumps(row, sort_keys=True)  # noqa: E731
        if sorted(got, key=key) != sorted(v["equals"], key=key):
            missing = Counter(map(key, v["equals"])) - Counter(map(key, got))
            extra = Counter(map(key, got)) - Counter(map(key, v["equals"]))
            diffs.append(f"{rule_label(v)}: ({', '.join(v['attributes'])}) are {sorted(got, key=key)}, expected "
                         f"{sorted(v['equals'], key=key)}"
                         + (f"; missing {[json.loads(m) for m in sorted(missing.elements())]}" if missing else "")
                         + (f"; extra {[json.loads(x) for x in sorted(extra.elements())]}" if extra else ""))
    for sm in expect.get("sums", []):
        total = 0
        for s in by_id.values():
            if matches_name(sm, s):
                t, x = otlp_json.attributes(s).get(sm["attribute"], (None, 0))
                total += x if t in ("int", "double") else 0
        if total != sm["equals"]:
            diffs.append(f"{rule_label(sm)}: {sm['attribute']} adds up to {total}, expected {sm['equals']}")
    return diffs


def tree(spans):
    """The spans as an indented tree, for a failure's reader."""
    by_id = {str(s.get("spanId", "")).lower(): s for s in spans}
    kids = defaultdict(list)
    for sid, s in by_id.items():
        kids[str(s.get("parentSpanId", "") or "").lower()].append(sid)
    lines = []

    def show(sid, depth, seen):
        s = by_id[sid]
        st, en = otlp_json.nanos(s.get("startTimeUnixNano")), otlp_json.nanos(s.get("endTimeUnixNano"))
        dur = f"{(en - st) / 1e6:.1f} ms" if st and en else "?"
        kind = otlp_json.SPAN_KINDS.get(s.get("kind", 0), s.get("kind"))
        lines.append(f"{'  ' * depth}{s.get('name')} [{kind}] {sid} {dur}")
        for k in sorted(kids.get(sid, []), key=lambda k: otlp_json.nanos(by_id[k].get("startTimeUnixNano")) or 0):
            if k not in seen:
                show(k, depth + 1, seen | {k})

    for sid, s in by_id.items():
        p = str(s.get("parentSpanId", "") or "").lower()
        if p not in by_id:
            lines.append(f"(parent {p or 'none'})")
            show(sid, 1, {sid})
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description="Check the shape of an exported trace.")
    ap.add_argument("--spans", required=True, help="the receiver's --out file, its /_spans (file or URL), or one request")
    ap.add_argument("--expect", required=True, help="expectations (JSON file; see this script's docstring)")
    ap.add_argument("--tree", action="store_true", help="print the spans as a tree")
    args = ap.parse_args()
    try:
        spans = otlp_json.read_spans(args.spans)
        with open(args.expect) as f:
            expect = json.load(f)
    except (OSError, ValueError) as e:
        print(f"check_trace: {e}", file=sys.stderr)
        return 2
    try:
        check_expect(expect)
    except ValueError as e:
        print(f"check_trace: {args.expect}: {e}", file=sys.stderr)
        return 2
    if args.tree:
        print(tree(spans))
    diffs = check(spans, expect)
    ntraces = len({str(s.get("traceId", "")).lower() for s in spans})
    print(f"check_trace: {len(spans)} span(s) in {ntraces} trace(s)")
    for d in diffs:
        print(f"- {d}")
    print(f"check_trace: {len(diffs)} difference(s)" if diffs else "check_trace: ok")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
