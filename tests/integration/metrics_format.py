#!/usr/bin/python3
"""The metrics registry's output (engine/server/metrics.c, GET /metrics) read by a
real parser: metrics_sample prints a registry using every feature; this
checks it line by line against the grammar of text format 0.0.4, then parses
it with the Prometheus client's parser (Debian: python3-prometheus-client)
and checks the values, labels and help it reads back.

usage: metrics_format.py PATH/TO/metrics_sample
"""
import math
import re
import subprocess
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    sys.exit("metrics_format.py: the Prometheus client's parser is missing: "
             "install python3-prometheus-client (scripts/install-deps)")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


raw = subprocess.run([sys.argv[1]], check=True, stdout=subprocess.PIPE).stdout
try:
    text = raw.decode("utf-8", errors="strict")
except UnicodeDecodeError as e:
    sys.exit(f"metrics_format.py: the output is not UTF-8: {e}")

# ---- the grammar, strictly (the client's parser is lax) ----
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
LVALUE = r'(?:[^"\\\n]|\\[\\"n])*'
NUMBER = r"(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]Inf|NaN)"
HELP_RE = re.compile(rf"# HELP ({NAME}) ((?:[^\\\n]|\\[\\n])*)")
TYPE_RE = re.compile(rf"# TYPE ({NAME}) (counter|gauge|histogram)")
SAMPLE_RE = re.compile(rf'({NAME})(?:\{{((?:{LABEL}="{LVALUE}")(?:,{LABEL}="{LVALUE}")*)\}})? ({NUMBER})')

check(text.endswith("\n"), "the output does not end with a newline")
families, family, typ, last_series = [], None, None, None
for n, line in enumerate(text.split("\n")[:-1], 1):
    if m := HELP_RE.fullmatch(line):
        family, typ, last_series = m.group(1), None, None
        families.append(family)
        continue
    if m := TYPE_RE.fullmatch(line):
        if m.group(1) != family:
            family = m.group(1)
            families.append(family)
        check(typ is None, f"line {n}: a second # TYPE for {family}")
        typ, last_series = m.group(2), None
        continue
    m = SAMPLE_RE.fullmatch(line)
    if not m:
        failures.append(f"line {n} is not a 0.0.4 line: {line!r}")
        continue
    name, labels = m.group(1), m.group(2) or ""
    allowed = [family + s for s in (("_bucket", "_sum", "_count") if typ == "histogram" else ("",))]
    check(name in allowed, f"line {n}: sample {name} outside its family {family} ({typ})")
    series = re.sub(r',?le="[^"]*"', "", labels)  # a histogram's series, without its bucket
    if last_series is not None and series != last_series:
        check(last_series < series, f"line {n}: series {series!r} after {last_series!r}: not sorted")
    last_series = series
check(families == sorted(families), f"families not sorted: {families}")
check(len(families) == len(set(families)), f"a family appears twice: {families}")

# ---- the client's parser ----
parsed = {f.name: f for f in text_string_to_metric_families(text)}


def samples(family, suffix=""):
    return {tuple(sorted(s.labels.items())): s.value for s in parsed[family].samples if s.name == family + suffix}


check(set(parsed) == {"engine_activities", "engine_escapes", "engine_values", "engine_latency_seconds",
                      "engine_empty", "engine_capped"}, f"families parsed: {sorted(parsed)}")

acts = samples("engine_activities", "_total")
FFFD = "\ufffd"
want = {
    (("activity", "sandbox.provision"), ("status", "ok")): 3,
    (("activity", 'quote"back\\slash\nnewline'), ("status", "ok")): 1,  # the escapes read back as the bytes
    (("activity", f"bad{FFFD}{FFFD}end{FFFD}"), ("status", "error")): 2,  # invalid UTF-8 replaced
    (("activity", "na\u00efve \u2713"), ("status", "ok")): 4,  # valid UTF-8 kept
    (("activity", f"{FFFD}[31mred{FFFD}"), ("status", "ok")): 5,  # control characters replaced
}
check(acts == want, f"engine_activities_total read back as {acts}")
check(parsed["engine_activities"].type == "counter", "engine_activities_total is no counter")

check(parsed["engine_escapes"].documentation == 'Help with a back\\slash, "quotes" and a\nsecond line.',
      f"help read back as {parsed['engine_escapes'].documentation!r}")

vals = {dict(k)["v"]: v for k, v in samples("engine_values").items()}
check(math.isnan(vals.get("nan", 0)), f"nan read back as {vals.get('nan')}")
check(vals.get("pinf") == math.inf and vals.get("ninf") == -math.inf, f"infinities read back as {vals}")
check(vals.get("neg") == -2.5, f"neg read back as {vals.get('neg')}")
check(vals.get("sum") == 0.1 + 0.2, f"0.1 + 0.2 read back as {vals.get('sum')!r}: not the same double")
check(vals.get("big") == 1e300, f"1e300 read back as {vals.get('big')!r}")

check(parsed["engine_latency_seconds"].type == "histogram", "engine_latency_seconds is no histogram")
buckets = samples("engine_latency_seconds", "_bucket")
bounds = ["0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "+Inf"]
# model observed 0.001 0.0005 0.3 1 60 120: a value equal to a bound is in that bucket
want_model = [2, 2, 2, 2, 2, 2, 2, 3, 4, 4, 4, 4, 4, 5, 6]
got_model = [buckets.get((("kind", "model"), ("le", b))) for b in bounds]
check(got_model == want_model, f"model buckets {got_model}, wanted {want_model}")
got_tool = [buckets.get((("kind", "tool"), ("le", b))) for b in bounds]
check(got_tool == [0] * 9 + [1] * 6, f"tool buckets {got_tool}")
check(len(buckets) == 2 * len(bounds), f"{len(buckets)} bucket samples, wanted {2 * len(bounds)}")
sums, counts = samples("engine_latency_seconds", "_sum"), samples("engine_latency_seconds", "_count")
check(sums.get((("kind", "model"),)) == 0.001 + 0.0005 + 0.3 + 1 + 60 + 120, f"model sum {sums}")
check(counts == {(("kind", "model"),): 6, (("kind", "tool"),): 1}, f"counts {counts}")

check(parsed["engine_empty"].samples == [] and parsed["engine_empty"].documentation == "Declared, never set.",
      "engine_empty is not an empty family with its help")

capped = samples("engine_capped", "_total")
check(len(capped) == 1001, f"engine_capped_total has {len(capped)} series, wanted 1000 and _other")
check(capped.get((("activity", "_other"),)) == 7, f"_other is {capped.get((('activity', '_other'),))}, wanted 7")

if failures:
    print("\n".join(failures))
    print(f"--- the output ({len(text)} chars), first 3000:\n{text[:3000]}")
    sys.exit(1)
print(f"ok: {len(text.splitlines())} lines, {len(parsed)} families parsed")
