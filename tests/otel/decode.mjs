#!/usr/bin/env node
// decode.mjs: proves that what the engine's exporter sent is a valid OTLP/JSON
// ExportTraceServiceRequest, with the OpenTelemetry JavaScript SDK's own
// protobuf definitions (the protobufjs code @opentelemetry/otlp-transformer
// generates from opentelemetry-proto; versions in package.json).
//
//   node tests/otel/decode.mjs [--seq N] [--quiet] FILE...
//
// FILE: the receiver's --out file (JSON lines, one stored request each; the
// body as received is decoded, not the receiver's re-encoding), or one
// request as a JSON file. Exit 0 when every request is valid, 1 when one is
// not (each problem printed with its path), 2 when a file cannot be read.
//
// OTLP/JSON is the proto3 JSON mapping with the deviations the OTLP spec
// lists (opentelemetry-proto docs/specification.md, "JSON Protobuf
// Encoding"): traceId/spanId are hex, not base64; enums are integers only;
// keys are lowerCamelCase only. protobufjs reads the plain proto3 mapping,
// so each request is first checked and converted here, field by field,
// against a table of the trace messages (which must match the generated
// classes, checked at start); then protobufjs verify()s it, builds the
// message (fromObject), encodes it to binary protobuf, decodes that and
// converts it back, and the result must equal what was sent.
//
// Stricter than a collector on purpose: the spec tells receivers to ignore
// unknown fields, but an unknown field in the engine's output is a
// misspelling, so it fails here; so do empty envelopes (the spec: senders
// SHOULD NOT send them), duplicate JSON keys, and spans without ids, name or
// times. A null value passes: the proto3 mapping reads it as the default.
import { createRequire } from "node:module";
import { readFileSync, realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";

const require = createRequire(import.meta.url);
const root = require("@opentelemetry/otlp-transformer/build/src/generated/root.js");
// the protobufjs (and long) the generated code itself loads, not another copy
const fromRoot = createRequire(require.resolve("@opentelemetry/otlp-transformer/build/src/generated/root.js"));
const $protobuf = fromRoot("protobufjs/minimal");
const Long = $protobuf.util.Long;
const pb = root.opentelemetry.proto;

// ---- the trace messages, as OTLP/JSON names their fields
// A field is a type name, or [type, "repeated"]. Scalars: string bool uint32
// fixed32 int64 fixed64 double bytes (base64); traceid/spanid/parentid (hex,
// 16/8/8-or-empty bytes); enum:NAME. Anything else is a message below.
const R = "repeated";
const KIND_NAMES = pb.trace.v1.Span.SpanKind;
const STATUS_NAMES = pb.trace.v1.Status.StatusCode;
const ENUMS = { SpanKind: KIND_NAMES, StatusCode: STATUS_NAMES };
const SCHEMA = {
  ExportTraceServiceRequest: { cls: pb.collector.trace.v1.ExportTraceServiceRequest,
    fields: { resourceSpans: ["ResourceSpans", R] } },
  ResourceSpans: { cls: pb.trace.v1.ResourceSpans,
    fields: { resource: "Resource", scopeSpans: ["ScopeSpans", R], schemaUrl: "string" } },
  Resource: { cls: pb.resource.v1.Resource,
    fields: { attributes: ["KeyValue", R], droppedAttributesCount: "uint32", entityRefs: ["EntityRef", R] } },
  EntityRef: { cls: pb.common.v1.EntityRef,
    fields: { schemaUrl: "string", type: "string", idKeys: ["string", R], descriptionKeys: ["string", R] } },
  ScopeSpans: { cls: pb.trace.v1.ScopeSpans,
    fields: { scope: "InstrumentationScope", spans: ["Span", R], schemaUrl: "string" } },
  InstrumentationScope: { cls: pb.common.v1.InstrumentationScope,
    fields: { name: "string", version: "string", attributes: ["KeyValue", R], droppedAttributesCount: "uint32" } },
  Span: { cls: pb.trace.v1.Span,
    fields: { traceId: "traceid", spanId: "spanid", traceState: "string", parentSpanId: "parentid",
      flags: "fixed32", name: "string", kind: "enum:SpanKind", startTimeUnixNano: "fixed64",
      endTimeUnixNano: "fixed64", attributes: ["KeyValue", R], droppedAttributesCount: "uint32",
      events: ["Event", R], droppedEventsCount: "uint32", links: ["Link", R], droppedLinksCount: "uint32",
      status: "Status" } },
  Event: { cls: pb.trace.v1.Span.Event,
    fields: { timeUnixNano: "fixed64", name: "string", attributes: ["KeyValue", R], droppedAttributesCount: "uint32" } },
  Link: { cls: pb.trace.v1.Span.Link,
    fields: { traceId: "traceid", spanId: "spanid", traceState: "string", attributes: ["KeyValue", R],
      droppedAttributesCount: "uint32", flags: "fixed32" } },
  Status: { cls: pb.trace.v1.Status, fields: { message: "string", code: "enum:StatusCode" } },
  KeyValue: { cls: pb.common.v1.KeyValue, fields: { key: "string", value: "AnyValue" } },
  AnyValue: { cls: pb.common.v1.AnyValue, oneof: true,
    fields: { stringValue: "string", boolValue: "bool", intValue: "int64", doubleValue: "double",
      arrayValue: "ArrayValue", kvlistValue: "KeyValueList", bytesValue: "bytes" } },
  ArrayValue: { cls: pb.common.v1.ArrayValue, fields: { values: ["AnyValue", R] } },
  KeyValueList: { cls: pb.common.v1.KeyValueList, fields: { values: ["KeyValue", R] } },
};
const PROTO_NAME = {
  ExportTraceServiceRequest: "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest",
  Event: "opentelemetry.proto.trace.v1.Span.Event", Link: "opentelemetry.proto.trace.v1.Span.Link",
};
const protoName = (t) => PROTO_NAME[t] ||
  (["Resource"].includes(t) ? "opentelemetry.proto.resource.v1." + t
    : ["EntityRef", "InstrumentationScope", "KeyValue", "AnyValue", "ArrayValue", "KeyValueList"].includes(t)
      ? "opentelemetry.proto.common.v1." + t : "opentelemetry.proto.trace.v1." + t);

// The table must name exactly the fields the generated classes have: a
// field the SDK's definitions lack, or one they have and the table lacks,
// stops everything here rather than judging payloads wrongly.
for (const [t, s] of Object.entries(SCHEMA)) {
  const gen = Object.keys(s.cls.prototype).filter((k) => k !== "toJSON").sort();
  const mine = Object.keys(s.fields).sort();
  if (gen.join() !== mine.join()) {
    console.error(`decode.mjs: the field table of ${t} (${mine}) differs from the generated ${protoName(t)} (${gen})`);
    process.exit(2);
  }
}
if (!Long) {
  console.error("decode.mjs: protobufjs found no 'long': 64-bit values would lose precision");
  process.exit(2);
}

// ---- exact JSON: integers past 2^53 stay exact (BigInt), repeated keys are seen
// (JSON.parse first, for its syntax errors; this parser then reads the same text)
class DupKeys { constructor() { this.list = []; } }
function parseExact(text, dups) {
  let i = 0;
  const ws = () => { while (" \t\n\r".includes(text[i]) && i < text.length) i++; };
  const val = (path) => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++; const o = {}; ws();
      if (text[i] === "}") { i++; return o; }
      for (;;) {
        ws(); const k = str(); ws(); i++; // ':'
        if (Object.prototype.hasOwnProperty.call(o, k)) dups.list.push(`${path}.${k}`.replace(/^\./, ""));
        Object.defineProperty(o, k, { value: val(`${path}.${k}`), enumerable: true, writable: true, configurable: true });
        ws(); if (text[i++] === "}") return o;
      }
    }
    if (c === "[") {
      i++; const a = []; ws();
      if (text[i] === "]") { i++; return a; }
      for (;;) { a.push(val(`${path}[${a.length}]`)); ws(); if (text[i++] === "]") return a; }
    }
    if (c === '"') return str();
    if (text.startsWith("true", i)) { i += 4; return true; }
    if (text.startsWith("false", i)) { i += 5; return false; }
    if (text.startsWith("null", i)) { i += 4; return null; }
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    i += m[0].length;
    if (!m[2] && !m[3]) {
      const n = Number(m[0]);
      return Number.isSafeInteger(n) ? n : BigInt(m[0]);
    }
    return Number(m[0]);
  };
  const str = () => {
    let j = i + 1;
    while (text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
    const s = JSON.parse(text.slice(i, j + 1));
    i = j + 1;
    return s;
  };
  return val("");
}

// ---- checking and converting one request
const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const show = (v) => typeof v === "bigint" ? v.toString() : JSON.stringify(v).slice(0, 80);
const camel = (s) => s.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
const U32 = 0xffffffff;
const U64 = (1n << 64n) - 1n, I64MIN = -(1n << 63n), I64MAX = (1n << 63n) - 1n;

// checkValue returns [pbValue, canonValue] or records an error and returns null.
// canon: the value as the comparison after the round trip sees it.
function checkScalar(type, v, path, errs) {
  const bad = (why) => { errs.push(`${path}: ${why}`); return null; };
  switch (type) {
    case "string":
      if (typeof v !== "string") return bad(`${show(v)} is not a string`);
      // a lone surrogate (legal in JSON text) has no UTF-8 form: protobuf would garble it
      return v.isWellFormed() ? [v, v] : bad(`${show(v)} is not well-formed Unicode (a lone surrogate has no UTF-8 form)`);
    case "bool":
      return typeof v === "boolean" ? [v, v] : bad(`${show(v)} is not true or false`);
    case "uint32": case "fixed32": {
      const n = typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v;
      if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > U32)
        return bad(`${show(v)} is not a ${type} (an integer 0..${U32})`);
      return [n, n];
    }
    case "int64": case "fixed64": {
      let b;
      if (typeof v === "bigint") b = v;
      else if (typeof v === "number" && Number.isInteger(v)) b = BigInt(v);
      else if (typeof v === "string" && /^-?\d+$/.test(v)) b = BigInt(v);
      else return bad(`${show(v)} is not an ${type} (a decimal string, or an integer number)`);
      const [lo, hi] = type === "fixed64" ? [0n, U64] : [I64MIN, I64MAX];
      if (b < lo || b > hi) return bad(`${b} is out of range for a ${type}`);
      return [Long.fromString(b.toString(), type === "fixed64"), b.toString()];
    }
    case "double": {
      if (typeof v === "number") return [v, v];
      if (typeof v === "bigint") return [Number(v), Number(v)];
      if (v === "NaN" || v === "Infinity" || v === "-Infinity") return [Number(v), v];
      if (typeof v === "string" && /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(v)) return [Number(v), Number(v)];
      return bad(`${show(v)} is not a double`);
    }
    case "bytes": {
      if (typeof v !== "string" || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(v) || v.replace(/=+$/, "").length % 4 === 1)
        return bad(`${show(v)} is not base64 (bytes values are base64 in OTLP/JSON; only ids are hex)`);
      const buf = Buffer.from(v, "base64");
      return [buf, buf.toString("base64")];
    }
    case "traceid": case "spanid": case "parentid": {
      const want = type === "traceid" ? 32 : 16;
      const what = type === "traceid" ? "a trace id is 32 (16 bytes)" : "a span id is 16 (8 bytes)";
      if (typeof v !== "string") return bad(`${show(v)} is not a string of hex digits`);
      if (v === "" && type === "parentid") return [Buffer.alloc(0), ""];
      if (!/^[0-9a-fA-F]*$/.test(v)) {
        const b64 = /^[A-Za-z0-9+/]+={0,2}$/.test(v) && Buffer.from(v, "base64").length === want / 2;
        return bad(`${show(v)} is not hex` + (b64 ? ": it is base64 (the plain proto3 mapping); OTLP/JSON writes ids in hex" : ""));
      }
      if (v.length !== want) return bad(`${v.length} hex digits (${show(v)}); ${what}`);
      if (/^0+$/.test(v)) return bad(`all zeros: an invalid id`);
      return [Buffer.from(v, "hex"), v.toLowerCase()];
    }
  }
  if (type.startsWith("enum:")) {
    const names = ENUMS[type.slice(5)];
    if (typeof v === "string") {
      const hint = Object.hasOwn(names, v) ? ` (${v} is ${names[v]})` : "";
      return bad(`${show(v)} is a string: OTLP/JSON writes enums as integers${hint}`);
    }
    if (typeof v !== "number" || !Number.isInteger(v)) return bad(`${show(v)} is not an integer enum value`);
    return [v, v];
  }
  throw new Error(`no scalar type ${type}`);
}

const isDefault = (c) => c === "" || c === 0 || c === false || c === "0" ||
  (Array.isArray(c) && c.length === 0);

// Walks one message: returns [pbObject, canonObject] (null on a type error,
// after recording it). Unknown keys, misplaced types and the OTLP/JSON rules
// are all checked here.
function checkMessage(type, v, path, errs) {
  const s = SCHEMA[type];
  const here = path || "(the request)";
  if (!isObj(v)) { errs.push(`${here}: ${show(v)} is not an object (${protoName(type)})`); return null; }
  const pbo = {}, canon = {};
  let ok = true, members = [];
  for (const [k, raw] of Object.entries(v)) {
    const p = path ? `${path}.${k}` : k;
    const f = Object.hasOwn(s.fields, k) ? s.fields[k] : null; // not "constructor" & co.
    if (!f) {
      const c = camel(k);
      errs.push(Object.hasOwn(s.fields, c) && c !== k
        ? `${p}: '${k}' is the proto field name; OTLP/JSON keys are lowerCamelCase: '${c}'`
        : `${p}: unknown field '${k}' of ${protoName(type)} (it has: ${Object.keys(s.fields).join(", ")})`);
      ok = false; continue;
    }
    if (raw === null) continue; // proto3 JSON: null is the field's default
    const [ft, rep] = Array.isArray(f) ? f : [f, null];
    const one = (x, pp) => SCHEMA[ft] ? checkMessage(ft, x, pp, errs) : checkScalar(ft, x, pp, errs);
    let got;
    if (rep) {
      if (!Array.isArray(raw)) { errs.push(`${p}: ${show(raw)} is not an array`); ok = false; continue; }
      const items = raw.map((x, i) => one(x, `${p}[${i}]`));
      if (items.some((r) => r === null)) { ok = false; continue; }
      got = [items.map((r) => r[0]), items.map((r) => r[1])];
    } else {
      got = one(raw, p);
      if (got === null) { ok = false; continue; }
    }
    pbo[k] = got[0];
    if (s.oneof) members.push(k);
    // proto3 leaves defaults off the wire; a oneof member and a message are kept (they have presence)
    if (s.oneof || SCHEMA[ft] && !rep || !isDefault(got[1])) canon[k] = got[1];
  }
  if (s.oneof && members.length > 1) {
    errs.push(`${here}: more than one value (${members.join(", ")}); an AnyValue holds one`); ok = false;
  }
  return ok ? [pbo, canon] : null;
}

// The semantic rules the proto cannot say (opentelemetry-proto's comments,
// the spec's "senders SHOULD NOT create empty envelopes").
function checkMeaning(req, errs) {
  const rss = req.resourceSpans || [];
  if (rss.length === 0) errs.push("resourceSpans: missing or empty: the request carries no spans");
  rss.forEach((rs, i) => {
    const p = `resourceSpans[${i}]`;
    const sss = rs.scopeSpans || [];
    if (sss.length === 0) errs.push(`${p}.scopeSpans: missing or empty: an empty envelope`);
    sss.forEach((ss, j) => {
      const spans = ss.spans || [];
      if (spans.length === 0) errs.push(`${p}.scopeSpans[${j}].spans: missing or empty: an empty envelope`);
      spans.forEach((sp, k) => {
        const q = `${p}.scopeSpans[${j}].spans[${k}]`;
        for (const f of ["traceId", "spanId"]) if (!sp[f]) errs.push(`${q}.${f}: missing (required)`);
        if (!sp.name) errs.push(`${q}.name: missing or empty (required)`);
        const st = sp.startTimeUnixNano, en = sp.endTimeUnixNano;
        if (!st || st === "0") errs.push(`${q}.startTimeUnixNano: missing (required)`);
        if (!en || en === "0") errs.push(`${q}.endTimeUnixNano: missing (required)`);
        if (st && en && BigInt(en) < BigInt(st)) errs.push(`${q}: ends (${en}) before it starts (${st})`);
        (sp.links || []).forEach((l, m) => {
          for (const f of ["traceId", "spanId"]) if (!l[f]) errs.push(`${q}.links[${m}].${f}: missing (required)`);
        });
        const keys = new Set();
        (sp.attributes || []).forEach((kv, m) => {
          if (!kv.key) errs.push(`${q}.attributes[${m}].key: missing or empty`);
          else if (keys.has(kv.key)) errs.push(`${q}.attributes[${m}]: key '${kv.key}' appears twice in the span`);
          keys.add(kv.key);
        });
      });
    });
  });
}

// The canonical form of what protobufjs decoded, shaped like checkMessage's canon.
function canonOut(type, v) {
  const s = SCHEMA[type], out = {};
  for (const [k, f] of Object.entries(s.fields)) {
    if (v[k] === undefined || v[k] === null) continue;
    const [ft, rep] = Array.isArray(f) ? f : [f, null];
    const one = (x) => {
      if (SCHEMA[ft]) return canonOut(ft, x);
      if (["traceid", "spanid", "parentid"].includes(ft)) return Buffer.from(x).toString("hex");
      if (ft === "bytes") return Buffer.from(x).toString("base64");
      if (ft === "int64" || ft === "fixed64") return String(x);
      if (ft === "double" && !Number.isFinite(x)) return String(x);
      return x;
    };
    const c = rep ? v[k].map(one) : one(v[k]);
    if (s.oneof || SCHEMA[ft] && !rep || !isDefault(c)) out[k] = c;
  }
  return out;
}

// Where protobufjs's verify() failed (its message names fields, not indices):
// the deepest message that fails verify() on its own.
function locate(type, v, path) {
  const s = SCHEMA[type];
  if (s.cls.verify(v) === null) return null;
  for (const [k, f] of Object.entries(s.fields)) {
    const [ft, rep] = Array.isArray(f) ? f : [f, null];
    if (!SCHEMA[ft] || v[k] == null) continue;
    const items = rep ? v[k].map((x, i) => [x, `${path ? path + "." : ""}${k}[${i}]`]) : [[v[k], `${path ? path + "." : ""}${k}`]];
    for (const [x, p] of items) {
      const deeper = locate(ft, x, p);
      if (deeper) return deeper;
    }
  }
  return path || null;
}

function diff(a, b, path, out) {
  if (out.length > 20) return;
  if (isObj(a) && isObj(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) diff(a[k], b[k], path ? `${path}.${k}` : k, out);
  } else if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) out.push(`${path}: ${a.length} items sent, ${b.length} after the round trip`);
    else a.forEach((x, i) => diff(x, b[i], `${path}[${i}]`, out));
  } else if (!(a === b || Number.isNaN(a) && Number.isNaN(b))) {
    out.push(`${path}: sent ${show(a)}, the protobuf round trip gives ${show(b)}`);
  }
}

// One request's problems ([] when valid), and its numbers.
export function decodeRequest(text) {
  const errs = [];
  try { JSON.parse(text); } catch (e) { return { errs: [`not JSON: ${e.message}`] }; }
  const dups = new DupKeys();
  const req = parseExact(text, dups);
  for (const d of dups.list) errs.push(`${d}: the key appears twice in its object`);
  const T = SCHEMA.ExportTraceServiceRequest.cls;
  const checked = checkMessage("ExportTraceServiceRequest", req, "", errs);
  if (checked === null) return { errs };
  checkMeaning(req, errs);
  const [pbObj, canonIn] = checked;
  // protobufjs's own verdicts: on the converted object, then on the message it builds
  let why = T.verify(pbObj);
  if (why) return { errs: [...errs, `protobufjs verify: ${why} (at ${locate("ExportTraceServiceRequest", pbObj, "") || "the request"})`] };
  const msg = T.fromObject(pbObj);
  why = T.verify(msg);
  if (why) return { errs: [...errs, `protobufjs verify (message): ${why}`] };
  const bytes = T.encode(msg).finish();
  let back;
  try { back = T.decode(bytes); } catch (e) { return { errs: [...errs, `binary protobuf does not decode: ${e.message}`] }; }
  const obj = T.toObject(back, { longs: String, enums: Number });
  const d = [];
  diff(canonIn, canonOut("ExportTraceServiceRequest", obj), "", d);
  errs.push(...d);
  let spans = 0;
  for (const rs of obj.resourceSpans || []) for (const ss of rs.scopeSpans || []) spans += (ss.spans || []).length;
  return { errs, bytes: bytes.length, resources: (obj.resourceSpans || []).length, spans };
}

// ---- the command
function readRequests(file) {
  const text = readFileSync(file, "utf8");
  let whole;
  try { whole = JSON.parse(text); } catch { whole = undefined; }
  if (isObj(whole) && !("seq" in whole && ("body" in whole || "request" in whole))) return [{ label: "request", text }];
  const out = [];
  text.split("\n").forEach((line, n) => {
    if (!line.trim()) return;
    let rec;
    try { rec = JSON.parse(line); } catch (e) { throw new Error(`${file}:${n + 1}: not JSON: ${e.message}`); }
    if (!isObj(rec) || !("body" in rec || "request" in rec)) throw new Error(`${file}:${n + 1}: not a stored request`);
    // the body as received when the receiver kept it: its numbers and keys exactly
    const body = typeof rec.body === "string" ? rec.body : JSON.stringify(rec.request);
    out.push({ label: `request seq ${rec.seq}`, seq: rec.seq, text: body });
  });
  return out;
}

function main(argv) {
  let seq = null, quiet = false;
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--seq") seq = Number(argv[++i]);
    else if (argv[i] === "--quiet") quiet = true;
    else if (argv[i].startsWith("-")) { console.error(`decode.mjs: unknown option ${argv[i]}`); return 2; }
    else files.push(argv[i]);
  }
  if (!files.length) { console.error("usage: decode.mjs [--seq N] [--quiet] FILE..."); return 2; }
  let bad = 0, n = 0;
  for (const f of files) {
    let reqs;
    try { reqs = readRequests(f); } catch (e) { console.error(`decode.mjs: ${e.message}`); return 2; }
    for (const r of reqs) {
      if (seq !== null && r.seq !== seq) continue;
      n++;
      const res = decodeRequest(r.text);
      if (res.errs.length) {
        bad++;
        console.log(`${f}: ${r.label}: INVALID ExportTraceServiceRequest`);
        for (const e of res.errs) console.log(`  - ${e}`);
      } else if (!quiet) {
        console.log(`${f}: ${r.label}: ok (${res.resources} resource(s), ${res.spans} span(s); ${res.bytes} bytes as binary protobuf, decoded back the same)`);
      }
    }
  }
  if (n === 0) { console.log(`decode.mjs: no request${seq !== null ? ` with seq ${seq}` : ""} in ${files.join(", ")}`); return 1; }
  return bad ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) process.exitCode = main(process.argv.slice(2));
