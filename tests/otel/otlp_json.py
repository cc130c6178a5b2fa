"""What the receiver and check_trace.py share about OTLP/JSON trace payloads.

A stored request is one ExportTraceServiceRequest as the OTLP spec's JSON
encoding writes it (docs/specification.md, "JSON Protobuf Encoding" of
opentelemetry-proto): lowerCamelCase keys, ids as hex strings, enums as
integers, 64-bit integers as decimal strings or numbers. This module reads
such payloads; it judges nothing (decode.mjs does, against the real protobuf
definitions).

Python 3 standard library only.
"""

import json
import urllib.request

SPAN_KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
ANY_VALUE_TYPES = {
    "stringValue": "string", "boolValue": "bool", "intValue": "int", "doubleValue": "double",
    "arrayValue": "array", "kvlistValue": "kvlist", "bytesValue": "bytes",
}


def flatten(request, request_seq=None):
    """The spans of one ExportTraceServiceRequest, each a copy of the span's
    JSON object plus "resource" and "scope" (those of its envelope, {} when
    absent), their schema URLs when set, and "request_seq" (the receiver's
    number of the request that carried it, when known). Tolerates a malformed
    request: what is not a list or an object is skipped (decode.mjs says why)."""
    out = []
    if not isinstance(request, dict):
        return out
    for rs in _list(request.get("resourceSpans")):
        if not isinstance(rs, dict):
            continue
        resource = rs.get("resource") if isinstance(rs.get("resource"), dict) else {}
        for ss in _list(rs.get("scopeSpans")):
            if not isinstance(ss, dict):
                continue
            scope = ss.get("scope") if isinstance(ss.get("scope"), dict) else {}
            for span in _list(ss.get("spans")):
                if not isinstance(span, dict):
                    continue
                flat = dict(span)
                flat["resource"] = resource
                flat["scope"] = scope
                if "schemaUrl" in rs:
                    flat["resourceSchemaUrl"] = rs["schemaUrl"]
                if "schemaUrl" in ss:
                    flat["scopeSchemaUrl"] = ss["schemaUrl"]
                if request_seq is not None:
                    flat["request_seq"] = request_seq
                out.append(flat)
    return out


def _list(v):
    return v if isinstance(v, list) else []


def any_value(v):
    """An AnyValue as (type, python value): ("int", 5), ("string", "x"),
    ("array", [...]) with the members' python values, ("kvlist", {...});
    ("empty", None) for {}; ("invalid", v) for what is not one AnyValue."""
    if not isinstance(v, dict):
        return "invalid", v
    keys = [k for k in v if k in ANY_VALUE_TYPES]
    if len(keys) != 1 or len(v) != 1:
        return ("empty", None) if not v else ("invalid", v)
    k = keys[0]
    t, x = ANY_VALUE_TYPES[k], v[k]
    try:
        if t == "int":
            # proto3 JSON: an int64 is a decimal string or a number
            if isinstance(x, bool) or not isinstance(x, (int, str)):
                return "invalid", v
            return t, int(x)
        if t == "double":
            return t, float(x)
        if t == "array":
            return t, [any_value(m)[1] for m in _list((x or {}).get("values"))]
        if t == "kvlist":
            return t, {kv.get("key"): any_value(kv.get("value"))[1] for kv in _list((x or {}).get("values"))
                       if isinstance(kv, dict)}
    except (TypeError, ValueError, AttributeError):
        return "invalid", v
    return t, x


def attributes(obj):
    """An object's "attributes" list as {key: (type, value)}; a key seen twice
    keeps its first value (check_trace.py reports the repeat)."""
    out = {}
    for kv in _list(obj.get("attributes") if isinstance(obj, dict) else None):
        if isinstance(kv, dict) and isinstance(kv.get("key"), str) and kv["key"] not in out:
            out[kv["key"]] = any_value(kv.get("value"))
    return out


def nanos(v):
    """A fixed64 time (decimal string or number) as an int; None when absent,
    zero (proto3's unset) or not an integer."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v or None
    if isinstance(v, str) and v.isdigit():
        return int(v) or None
    return None


def read_spans(source):
    """Every span in SOURCE, flattened: the receiver's --out file (JSON lines,
    one stored request each), a JSON array of flattened spans (its GET
    /_spans), one ExportTraceServiceRequest (a fixture), or an http:// URL
    answering one of those."""
    if source.startswith(("http://", "https://")):
        with urllib.request.urlopen(source, timeout=30) as r:
            text = r.read().decode("utf-8")
    else:
        with open(source, encoding="utf-8") as f:
            text = f.read()
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, list):
        return whole
    if isinstance(whole, dict) and not ("seq" in whole and "request" in whole):
        return flatten(whole)
    spans = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{source}:{n}: not JSON: {e}") from None
        if not isinstance(rec, dict) or "request" not in rec:
            raise ValueError(f"{source}:{n}: not a stored request (no \"request\")")
        spans.extend(flatten(rec["request"], rec.get("seq")))
    return spans
