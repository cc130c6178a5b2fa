#!/usr/bin/python3
"""engine/server/openapi.json against the OpenAPI 3.1 rules and against the server
that serves it (tests/integration/test_api_openapi.sh drives it).

Debian has no OpenAPI 3.1 validator, so the document's structure is checked
here: the fixed fields of each OpenAPI object, required fields, path
templates against path parameters, unique operationIds, that every $ref
resolves, that every Schema Object is valid JSON Schema 2020-12 (the dialect
of OpenAPI 3.1; python3-jsonschema), and the project's own rule that an
operation's x-scope is the role of its bearer security requirement (x-scope-also: the scopes
it needs besides, as a fork needs read).

Answers of the server are validated against the document strictly: an
object schema that lists properties is closed (additionalProperties false)
for the check, so a field the server sends and the document does not name is
a failure, while the document itself stays open for future fields.

usage:
  openapi_check.py validate DOC
  openapi_check.py routes DOC URL
      every documented operation is answered (never 405, a 404 only for an
      unknown workflow, with a documented status and body); every other
      method on a documented path is 405 with Allow = the documented methods
  openapi_check.py call DOC URL METHOD PATH [-H 'Name: value']... [-d BODY]
      prints the status, then the body; exit 1 when the answer is not as
      documented
  openapi_check.py sse DOC URL PATH [-H ...] [--seconds N] [--until-heartbeat]
      reads an event stream until it ends (or N seconds, or its first
      heartbeat comment), checks each frame
      against the x-sse-events of its operation, prints one line per frame
  openapi_check.py scopes DOC URL TOKENS_JSON
      TOKENS_JSON maps each scope to a token holding only it: every
      operation answers 401 without a token, 403 with another scope's, and
      neither with its own (or admin's)
"""
import copy
import http.client
import json
import re
import sys
import time
import urllib.parse

try:
    from jsonschema import Draft202012Validator, RefResolver
    from jsonschema.exceptions import SchemaError
except ImportError:
    sys.exit("openapi_check.py: python3-jsonschema is missing (scripts/install-deps)")

METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
LIBRARY_ANSWERS = (400, 413, 414, 431)  # may be answered by libmicrohttpd, not by engine/server/api.c
UNKNOWN = {"id": "no-such-workflow", "name": "no-such-signal", "request_id": "no-such-request"}

problems = []


def problem(what):
    problems.append(what)


def done(ok_line=None):
    for p in problems:
        print("FAIL: " + p, file=sys.stderr)
    if problems:
        sys.exit(1)
    if ok_line:
        print(ok_line)
    sys.exit(0)


# ------------------------------------------------------------ structure ---

def fields(obj, where, allowed, required=()):
    """obj is an object of only the allowed fixed fields (and x- extensions)."""
    if not isinstance(obj, dict):
        problem(f"{where}: not an object")
        return False
    for k in obj:
        if k not in allowed and not k.startswith("x-"):
            problem(f"{where}: unknown field {k!r}")
    for k in required:
        if k not in obj:
            problem(f"{where}: required field {k!r} is missing")
    return True


def deref(doc, node):
    """node with a local $ref followed (Reference Objects)."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node:
        node = pointer(doc, node["$ref"])
        seen += 1
        if node is None or seen > 20:
            return None
    return node


def pointer(doc, ref):
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node = doc
    for part in ref[1:].split("/")[1:]:
        part = urllib.parse.unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def all_refs(node, where="#"):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield where, v
            else:
                yield from all_refs(v, f"{where}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from all_refs(v, f"{where}/{i}")


def check_ref_object(obj, where):
    return fields(obj, where, {"$ref", "summary", "description"}, ["$ref"])


def check_schema(schema, where):
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        problem(f"{where}: not a valid JSON Schema 2020-12: {e.message}")


def check_media_types(content, where):
    if not isinstance(content, dict) or not content:
        problem(f"{where}: content must be a non-empty map of media types")
        return
    for mt, m in content.items():
        if not re.match(r"^[a-z*]+/[a-z0-9.+*-]+(;.*)?$", mt):
            problem(f"{where}: {mt!r} is not a media type")
        if fields(m, f"{where}/{mt}", {"schema", "example", "examples", "encoding"}):
            if "schema" in m:
                check_schema(m["schema"], f"{where}/{mt}/schema")
            for name, s in (m.get("x-sse-events") or {}).items():
                check_schema(s, f"{where}/{mt}/x-sse-events/{name}")


def check_parameter(doc, p, where):
    if "$ref" in p:
        check_ref_object(p, where)
        p = deref(doc, p)
        if p is None:
            return None
    if not fields(p, where, {"name", "in", "description", "required", "deprecated", "allowEmptyValue", "style",
                             "explode", "allowReserved", "schema", "example", "examples", "content"},
                  ["name", "in"]):
        return None
    if p.get("in") not in ("query", "header", "path", "cookie"):
        problem(f"{where}: 'in' is {p.get('in')!r}, not query, header, path or cookie")
    if p.get("in") == "path" and p.get("required") is not True:
        problem(f"{where}: a path parameter must be required: true")
    if ("schema" in p) == ("content" in p):
        problem(f"{where}: exactly one of schema and content")
    if "schema" in p:
        check_schema(p["schema"], f"{where}/schema")
    return p


def check_header(doc, h, where):
    if "$ref" in h:
        check_ref_object(h, where)
        h = deref(doc, h)
        if h is None:
            return
    if fields(h, where, {"description", "required", "deprecated", "allowEmptyValue", "style", "explode",
                         "allowReserved", "schema", "example", "examples", "content"}):
        if ("schema" in h) == ("content" in h):
            problem(f"{where}: exactly one of schema and content")
        if "schema" in h:
            check_schema(h["schema"], f"{where}/schema")


def check_response(doc, r, where):
    if "$ref" in r:
        check_ref_object(r, where)
        r = deref(doc, r)
        if r is None:
            return
    if fields(r, where, {"description", "headers", "content", "links"}, ["description"]):
        for name, h in (r.get("headers") or {}).items():
            if name.lower() == "content-type":
                problem(f"{where}: a Content-Type header is ignored by OpenAPI (use content)")
            check_header(doc, h, f"{where}/headers/{name}")
        if "content" in r:
            check_media_types(r["content"], f"{where}/content")


def check_security(doc, req, where):
    schemes = (doc.get("components") or {}).get("securitySchemes") or {}
    if not isinstance(req, list):
        problem(f"{where}: security must be a list")
        return
    for i, r in enumerate(req):
        if not isinstance(r, dict):
            problem(f"{where}/{i}: not a security requirement object")
            continue
        for name, roles in r.items():
            if name not in schemes:
                problem(f"{where}/{i}: no security scheme named {name!r}")
            if not isinstance(roles, list) or not all(isinstance(x, str) for x in roles):
                problem(f"{where}/{i}/{name}: roles must be a list of strings")


def validate(doc):
    if not fields(doc, "#", {"openapi", "info", "jsonSchemaDialect", "servers", "paths", "webhooks", "components",
                             "security", "tags", "externalDocs"}, ["openapi", "info"]):
        return
    if not re.match(r"^3\.1\.\d+$", str(doc.get("openapi"))):
        problem(f"#/openapi is {doc.get('openapi')!r}, not 3.1.x")
    if not any(k in doc for k in ("paths", "components", "webhooks")):
        problem("#: one of paths, components, webhooks is required")
    fields(doc.get("info"), "#/info", {"title", "summary", "description", "termsOfService", "contact", "license",
                                       "version"}, ["title", "version"])
    tags = set()
    for i, t in enumerate(doc.get("tags") or []):
        if fields(t, f"#/tags/{i}", {"name", "description", "externalDocs"}, ["name"]):
            tags.add(t.get("name"))
    if "security" in doc:
        check_security(doc, doc["security"], "#/security")
    for where, ref in all_refs(doc):
        if pointer(doc, ref) is None:
            problem(f"{where}: $ref {ref!r} does not resolve")

    comps = doc.get("components") or {}
    fields(comps, "#/components", {"schemas", "responses", "parameters", "examples", "requestBodies", "headers",
                                   "securitySchemes", "links", "callbacks", "pathItems"})
    for kind, entries in comps.items():
        if kind.startswith("x-") or not isinstance(entries, dict):
            continue
        for name in entries:
            if not re.match(r"^[a-zA-Z0-9._-]+$", name):
                problem(f"#/components/{kind}/{name}: not a valid component name")
    for name, s in (comps.get("schemas") or {}).items():
        check_schema(s, f"#/components/schemas/{name}")
    for name, p in (comps.get("parameters") or {}).items():
        check_parameter(doc, p, f"#/components/parameters/{name}")
    for name, r in (comps.get("responses") or {}).items():
        check_response(doc, r, f"#/components/responses/{name}")
    for name, h in (comps.get("headers") or {}).items():
        check_header(doc, h, f"#/components/headers/{name}")
    for name, s in (comps.get("securitySchemes") or {}).items():
        w = f"#/components/securitySchemes/{name}"
        if fields(s, w, {"type", "description", "name", "in", "scheme", "bearerFormat", "flows", "openIdConnectUrl"},
                  ["type"]):
            if s.get("type") not in ("apiKey", "http", "mutualTLS", "oauth2", "openIdConnect"):
                problem(f"{w}: type {s.get('type')!r} is not a security scheme type")
            if s.get("type") == "http" and "scheme" not in s:
                problem(f"{w}: an http scheme needs 'scheme'")

    op_ids, shapes = {}, {}
    paths = doc.get("paths") or {}
    for path, item in paths.items():
        w = f"#/paths/{path}"
        if not path.startswith("/"):
            problem(f"{w}: a path must start with /")
        shape = re.sub(r"\{[^}/]*\}", "{}", path)
        if shape in shapes:
            problem(f"{w}: the same template as {shapes[shape]}")
        shapes[shape] = path
        if not fields(item, w, {"$ref", "summary", "description", "servers", "parameters", *METHODS}):
            continue
        templated = re.findall(r"\{([^}/]+)\}", path)
        if len(templated) != len(set(templated)):
            problem(f"{w}: a template name is used twice")
        common = [check_parameter(doc, p, f"{w}/parameters/{i}") for i, p in enumerate(item.get("parameters") or [])]
        ops = [m for m in METHODS if m in item]
        if not ops:
            problem(f"{w}: no operation")
        for m in ops:
            op, ow = item[m], f"{w}/{m}"
            if not fields(op, ow, {"tags", "summary", "description", "externalDocs", "operationId", "parameters",
                                   "requestBody", "responses", "callbacks", "deprecated", "security", "servers"},
                          ["responses"]):
                continue
            oid = op.get("operationId")
            if oid in op_ids:
                problem(f"{ow}: operationId {oid!r} is also {op_ids[oid]}")
            op_ids[oid] = ow
            for t in op.get("tags") or []:
                if t not in tags:
                    problem(f"{ow}: tag {t!r} is not declared in #/tags")
            own = [check_parameter(doc, p, f"{ow}/parameters/{i}") for i, p in enumerate(op.get("parameters") or [])]
            params = {}
            for p in common + own:  # an operation's own parameter replaces the path's
                if p:
                    params[(p.get("name"), p.get("in"))] = p
            in_path = {n for (n, i) in params if i == "path"}
            for n in templated:
                if n not in in_path:
                    problem(f"{ow}: path template {{{n}}} has no path parameter")
            for n in in_path - set(templated):
                problem(f"{ow}: path parameter {n!r} is not in the path template")
            rb = op.get("requestBody")
            if rb is not None:
                if "$ref" in rb:
                    check_ref_object(rb, f"{ow}/requestBody")
                    rb = deref(doc, rb)
                if rb and fields(rb, f"{ow}/requestBody", {"description", "content", "required"}, ["content"]):
                    check_media_types(rb.get("content"), f"{ow}/requestBody/content")
            responses = op.get("responses")
            if not isinstance(responses, dict) or not [k for k in responses if not k.startswith("x-")]:
                problem(f"{ow}/responses: at least one response")
            else:
                for code, r in responses.items():
                    if code.startswith("x-"):
                        continue
                    if not re.match(r"^([1-5](\d\d|XX)|default)$", code):
                        problem(f"{ow}/responses/{code}: not a status code, 1XX-5XX or default")
                    check_response(doc, r, f"{ow}/responses/{code}")
            security = op.get("security", doc.get("security"))
            if "security" in op:
                check_security(doc, op["security"], f"{ow}/security")
            scope = op.get("x-scope")
            if scope is None:
                if security != []:
                    problem(f"{ow}: without x-scope, an operation must say security: [] (no token)")
            elif security != [{"bearer": [scope]}]:
                problem(f"{ow}: x-scope {scope!r} but security is {security!r}")


# -------------------------------------------------------------- answers ---

def strict_copy(node):
    """The document with every object schema that lists properties closed."""
    if isinstance(node, dict):
        out = {k: strict_copy(v) for k, v in node.items()}
        if isinstance(out.get("properties"), dict) and "additionalProperties" not in out \
                and "unevaluatedProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [strict_copy(v) for v in node]
    return node


class Doc:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.doc = json.load(f)
        self.strict = strict_copy(self.doc)
        self.resolver = RefResolver(base_uri="", referrer=self.strict)

    def schema_problems(self, schema, value):
        v = Draft202012Validator(schema, resolver=self.resolver)
        return ["{} (at {})".format(e.message, "/".join(str(p) for p in e.absolute_path) or "the top")
                for e in v.iter_errors(value)]

    def resolve(self, node):
        return deref(self.strict, node)

    def template_of(self, path):
        """The documented path template a concrete path is answered by."""
        segs = path.split("/")
        best = None
        for t in self.doc["paths"]:
            ts = t.split("/")
            if len(ts) != len(segs):
                continue
            if all(a == b or (a.startswith("{") and a.endswith("}") and b) for a, b in zip(ts, segs)):
                literal = sum(1 for a in ts if not a.startswith("{"))
                if best is None or literal > best[0]:
                    best = (literal, t)
        return best[1] if best else None


def fetch(url, method, path, headers=None, body=None, timeout=10):
    """(status, {lower-case name: [values]}, body). A HEAD is sent as GET too:
    its answer must be the GET's without the body (the status, the
    Content-Type, a Content-Length), and the GET's body is returned for the
    checks of the documented content."""
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        hdrs = {}
        for k, v in r.getheaders():
            hdrs.setdefault(k.lower(), []).append(v)
    finally:
        c.close()
    if method == "HEAD":
        gst, ghd, gdata = fetch(url, "GET", path, headers, body, timeout)
        same = lambda h: (h.get("content-type"), "content-length" in h or "transfer-encoding" in h)
        if data or gst != r.status or same(ghd) != same(hdrs):
            problem(f"HEAD {path}: {r.status} {same(hdrs)} {data[:60]!r}, not GET's answer without the body "
                    f"({gst} {same(ghd)})")
        return r.status, hdrs, gdata
    return r.status, hdrs, data


def answer_problems(d, template, method, status, headers, data):
    """What is wrong with an answer, measured against the operation's documented response."""
    op = d.doc["paths"][template].get(method.lower())
    what = f"{method} {template} -> {status}"
    if op is None:
        return [f"{what}: the method is not documented for this path"]
    resp = op["responses"].get(str(status)) or op["responses"].get(f"{str(status)[0]}XX") \
        or op["responses"].get("default")
    if resp is None:
        return [f"{what}: status {status} is not documented for this operation "
                f"(documented: {', '.join(k for k in op['responses'] if not k.startswith('x-'))})"]
    return response_problems(d, d.resolve(resp), what, method, headers, data, status)


def response_problems(d, resp, what, method, headers, data, status=None):
    out = []
    for name, h in (resp.get("headers") or {}).items():
        h = d.resolve(h)
        if h.get("required") and name.lower() not in headers:
            out.append(f"{what}: the documented header {name} is missing")
    content = resp.get("content") or {}
    ctype = (headers.get("content-type") or [""])[0]
    if method == "HEAD":
        return out
    norm = lambda s: re.sub(r"\s*;\s*", ";", s.strip().lower())
    media = next((m for m in content if norm(m) == norm(ctype)), None)
    if media is None and not ctype and status in LIBRARY_ANSWERS:
        return out  # libmicrohttpd's own HTML pages carry no Content-Type
    if media is None:
        if content or data:
            out.append(f"{what}: Content-Type {ctype!r} is not a documented media type ({', '.join(content)})")
        return out
    schema = content[media].get("schema")
    if schema is None:
        return out
    if norm(media).startswith("application/json"):
        try:
            value = json.loads(data)
        except ValueError as e:
            return out + [f"{what}: the body is not JSON: {e}"]
    else:
        value = data.decode("utf-8", "replace")
    out += [f"{what}: {p}" for p in d.schema_problems(schema, value)]
    return out


def concrete(template):
    return re.sub(r"\{([^}/]+)\}", lambda m: UNKNOWN.get(m.group(1), "x"), template)


def probe_body(op):
    """A body for a probe: {} for an operation that takes JSON (refused as incomplete, never a change)."""
    rb = op.get("requestBody")
    return b"{}" if rb and "application/json" in (rb.get("content") or {}) else None


def routes(d, url):
    doc = d.doc
    n_ops = n_405 = 0
    for template, item in doc["paths"].items():
        path = concrete(template)
        documented = [m for m in METHODS if m in item]
        for m in documented:
            op = item[m]
            status, headers, data = fetch(url, m.upper(), path, body=probe_body(op))
            n_ops += 1
            what = f"{m.upper()} {path}"
            if status == 405:
                problem(f"{what}: 405, but the document has this operation")
                continue
            if status == 404:
                msg = ""
                try:
                    msg = json.loads(data)["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    pass
                hook = (template.startswith("/hooks/") and msg.startswith("no trigger")) or \
                    (template.startswith("/v1/schedules/") and msg.startswith("unknown schedule")) or \
                    (template.startswith("/v1/memory/") and msg.startswith("no memory entry")) or \
                    (template.startswith("/web/") and msg.startswith("no such file of the web page"))
                if not msg.startswith("unknown workflow") and not hook:
                    problem(f"{what}: 404 that is not about an unknown workflow: {msg!r}")
            for p in answer_problems(d, template, m.upper(), status, headers, data):
                problem(p)
        allowed = [m.upper() for m in documented]
        for m in METHODS:
            if m in item:
                continue
            status, headers, data = fetch(url, m.upper(), path)
            n_405 += 1
            what = f"{m.upper()} {path} (not documented)"
            if status != 405:
                problem(f"{what}: {status}, not 405")
                continue
            allow = [a.strip() for v in headers.get("allow", []) for a in v.split(",") if a.strip()]
            if sorted(allow) != sorted(allowed):
                problem(f"{what}: Allow is {', '.join(allow)!r}, the document has {', '.join(allowed)!r}")
            resp = d.resolve({"$ref": "#/components/responses/MethodNotAllowed"})
            for p in response_problems(d, resp, what, m.upper(), headers, data):
                problem(p)
    # and a path the document does not have is no route at all
    resp = d.resolve({"$ref": "#/components/responses/NoSuchRoute"})
    for path in ("/v1/no-such-route", "/v1/workflows/x/no-such-route", "/v1"):
        status, headers, data = fetch(url, "GET", path)
        if status != 404 or not data.startswith(b'{"error":{"status":404,"message":"no such route'):
            problem(f"GET {path}: {status} {data[:120]!r}, not a route 404")
        for p in response_problems(d, resp, f"GET {path}", "GET", headers, data):
            problem(p)
    return n_ops, n_405


def parse_call_args(args):
    headers, body, rest, i = {}, None, [], 0
    while i < len(args):
        if args[i] == "-H":
            k, _, v = args[i + 1].partition(":")
            headers[k.strip()] = v.strip()
            i += 2
        elif args[i] == "-d":
            body = args[i + 1].encode()
            i += 2
        elif args[i] == "--seconds":
            headers["__seconds"] = float(args[i + 1])
            i += 2
        elif args[i] == "--until-heartbeat":
            headers["__until_heartbeat"] = True
            i += 1
        else:
            rest.append(args[i])
            i += 1
    return headers, body, rest


def call(d, url, method, path, args):
    headers, body, _ = parse_call_args(args)
    template = d.template_of(urllib.parse.urlsplit(path).path)
    status, hdrs, data = fetch(url, method, path, headers=headers, body=body)
    if template is None:
        problem(f"{method} {path}: no documented path answers it")
    else:
        for p in answer_problems(d, template, method, status, hdrs, data):
            problem(p)
    sys.stdout.write(f"{status}\n{data.decode('utf-8', 'replace')}")
    done()


def sse(d, url, path, args):
    headers, _, _ = parse_call_args(args)
    seconds = headers.pop("__seconds", 10.0)
    until_heartbeat = headers.pop("__until_heartbeat", False)
    headers["Accept"] = "text/event-stream"
    template = d.template_of(urllib.parse.urlsplit(path).path)
    if template is None:
        problem(f"GET {path}: no documented path answers it")
        done()
    resp = d.resolve(d.doc["paths"][template]["get"]["responses"]["200"])
    media = (resp.get("content") or {}).get("text/event-stream")
    if media is None:
        problem(f"GET {template}: the 200 answer has no text/event-stream")
        done()
    events = media.get("x-sse-events") or {}
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=seconds)
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    if r.status != 200 or not (r.getheader("Content-Type") or "").startswith("text/event-stream"):
        problem(f"GET {path}: {r.status} {r.getheader('Content-Type')!r}, not a 200 event stream")
        done()
    deadline = time.monotonic() + seconds
    raw = b""
    ended = False
    try:
        while time.monotonic() < deadline:
            chunk = r.read1(65536)
            if not chunk:
                ended = True
                break
            raw += chunk
            if until_heartbeat and re.search(rb"(^|\n\n):[^\n]*\n\n", raw):
                break
    except TimeoutError:
        pass
    except OSError as e:  # socket.timeout is an OSError subclass
        if "timed out" not in str(e):
            raise
    c.close()
    text = raw.decode("utf-8")
    if ended and not text.endswith("\n\n"):
        problem(f"GET {path}: the stream ended inside a frame: {text[-80:]!r}")
    frames = [f for f in text.split("\n\n") if f != ""]
    if not ended and frames and not text.endswith("\n\n"):
        frames.pop()  # cut by our own timeout
    last_id, out = None, []
    for i, f in enumerate(frames):
        fl = {}
        lines = f.split("\n")
        if all(line.startswith(":") for line in lines):
            out.append("heartbeat")
            continue
        for line in lines:
            k, _, v = line.partition(":")
            if v.startswith(" "):
                v = v[1:]
            if k in fl and k != "data":
                problem(f"frame {i}: field {k} twice: {f!r}")
            fl[k] = fl[k] + "\n" + v if k in fl else v
        if set(fl) == {"retry"}:
            if i != 0:
                problem(f"frame {i}: retry is not the first frame")
            out.append("retry " + fl["retry"])
            continue
        unknown = set(fl) - {"id", "event", "data"}
        if unknown or "data" not in fl:
            problem(f"frame {i}: not an id/event/data frame: {f!r}")
            continue
        name = fl.get("event", "message")
        if name not in events:
            problem(f"frame {i}: event {name!r} is not documented (x-sse-events: {', '.join(events)})")
            continue
        if (name == "message") != ("id" in fl):
            problem(f"frame {i}: an id belongs to (and only to) event frames without a name: {f!r}")
        if "id" in fl:
            if not fl["id"].isdigit():
                problem(f"frame {i}: id {fl['id']!r} is not a whole number")
            elif last_id is not None and int(fl["id"]) <= last_id:
                problem(f"frame {i}: id {fl['id']} after {last_id}")
            else:
                last_id = int(fl["id"])
        try:
            data = json.loads(fl["data"])
        except ValueError as e:
            problem(f"frame {i}: data is not JSON: {e}")
            continue
        for p in d.schema_problems(events[name], data):
            problem(f"frame {i} ({name}): {p}")
        if name == "message":
            out.append(f"message {fl['id']} {data.get('type')}")
        elif name == "end":
            out.append(f"end {data.get('status')}")
            if i != len(frames) - 1:
                problem(f"frame {i}: frames after the end")
        else:
            out.append(name)
    if ended and events.get("end") is not None and not any(o.startswith("end ") for o in out):
        problem(f"GET {path}: the stream closed without an end frame")
    if ended:
        out.append("closed")
    print("\n".join(out))
    done()


def scopes(d, url, tokens):
    n = 0
    for template, item in d.doc["paths"].items():
        path = concrete(template)
        for m in METHODS:
            if m not in item:
                continue
            op, what = item[m], f"{m.upper()} {template}"
            body = probe_body(op)
            scope = op.get("x-scope")
            if scope is None:
                status, headers, data = fetch(url, m.upper(), path, body=body)
                if status in (401, 403):
                    problem(f"{what}: {status} without a token, but the document says no token is needed")
                continue
            if scope not in tokens:
                problem(f"{what}: x-scope {scope!r} is not a scope tokens have")
                continue
            n += 1
            # x-scope-also: scopes it needs besides its route's (a fork reads its source): a token
            # with the route's scope alone is 403 naming the first of them
            also = op.get("x-scope-also") or []
            other = next(s for s in tokens if s not in (scope, "admin", *also))
            tries = [("no token", {}, 401), ("a token that is not valid", {"Authorization": "Bearer eng_nope"}, 401),
                     (f"a {other} token", {"Authorization": "Bearer " + tokens[other]}, 403),
                     (f"a {scope} token", {"Authorization": "Bearer " + tokens[scope]}, 403 if also else None),
                     ("an admin token", {"Authorization": "Bearer " + tokens["admin"]}, None)]
            for who, hdrs, want in tries:
                status, headers, data = fetch(url, m.upper(), path, headers=hdrs, body=body)
                for p in answer_problems(d, template, m.upper(), status, headers, data):
                    problem(f"{p} (with {who})")
                if want is None and status in (401, 403):
                    problem(f"{what} with {who}: {status} {data[:100]!r}")
                elif want is not None and status != want:
                    problem(f"{what} with {who}: {status}, not {want}")
                elif want == 401 and "bearer" not in " ".join(headers.get("www-authenticate", [])).lower():
                    problem(f"{what} with {who}: 401 without WWW-Authenticate: Bearer")
                elif want == 403 and f"'{also[0] if also and who == f'a {scope} token' else scope}' scope".encode() not in data:
                    problem(f"{what} with {who}: the 403 does not name the scope it lacks: {data[:100]!r}")
    return n


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    cmd, d = argv[1], Doc(argv[2])
    if cmd == "validate":
        validate(d.doc)
        n = sum(1 for item in d.doc.get("paths", {}).values() for m in METHODS if m in item)
        done(f"an OpenAPI {d.doc.get('openapi')} document: {len(d.doc.get('paths', {}))} paths, {n} operations")
    elif cmd == "routes" and len(argv) == 4:
        n_ops, n_405 = routes(d, argv[3])
        done(f"{n_ops} documented operations answered; {n_405} undocumented methods answered 405")
    elif cmd == "call" and len(argv) >= 6:
        call(d, argv[3], argv[4], argv[5], argv[6:])
    elif cmd == "sse" and len(argv) >= 5:
        sse(d, argv[3], argv[4], argv[5:])
    elif cmd == "scopes" and len(argv) == 5:
        n = scopes(d, argv[3], json.loads(argv[4]))
        done(f"{n} operations need exactly their documented scope")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
