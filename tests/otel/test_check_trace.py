#!/usr/bin/env python3
"""check_trace.py's own test: fixtures/trace_agent.json passes
fixtures/expect_agent.json; each broken copy fails, naming its fault.
Python 3 standard library only.

  python3 tests/otel/test_check_trace.py [-v]
"""

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_trace  # noqa: E402
import otlp_json  # noqa: E402

with open(os.path.join(HERE, "fixtures", "trace_agent.json")) as f:
    REQUEST = json.load(f)
with open(os.path.join(HERE, "fixtures", "expect_agent.json")) as f:
    EXPECT = json.load(f)
# the spans of trace_agent.json, in order
RUN, AGENT, CHAT1, TOOL, CHAT2 = range(5)


def spans():
    return otlp_json.flatten(copy.deepcopy(REQUEST), 1)


def attr(span, key):
    return next(kv for kv in span["attributes"] if kv["key"] == key)


class CheckTraceTest(unittest.TestCase):
    def assertFinds(self, ss, *fragments, expect=None):
        """check() reports at least one difference holding every fragment."""
        diffs = check_trace.check(ss, EXPECT if expect is None else expect)
        self.assertTrue(diffs, "no difference found")
        for d in diffs:
            if all(f in d for f in fragments):
                return diffs
        self.fail(f"no difference holds {fragments}: {diffs}")

    def test_the_fixture_passes(self):
        self.assertEqual(check_trace.check(spans(), EXPECT), [])
        self.assertEqual(check_trace.check(spans(), {}), ["span 'invoke_workflow agent_session' (5fb397be34d26b51): "
                                                         "its parent 00f067aa0ba902b7 is neither a span of the set "
                                                         "nor an expected external parent ((none))"])

    def test_no_spans(self):
        self.assertEqual(check_trace.check([], EXPECT), ["no spans at all"])

    def test_two_traces(self):
        ss = spans()
        ss[TOOL]["traceId"] = "0af7651916cd43dd8448eb211c80319c"
        self.assertFinds(ss, "1 span(s) in trace 0af7651916cd43dd8448eb211c80319c", "expected every span in")
        self.assertFinds(ss, "2 traces, expected one", expect={"external_parents": ["00f067aa0ba902b7"]})

    def test_a_span_sent_twice(self):
        # the same span again in a later request, as a resend after a restart would
        again = otlp_json.flatten(copy.deepcopy(REQUEST), 2)[CHAT1]
        self.assertFinds(spans() + [again], "span id e3a9b1c2d4f50617 appears 2 times",
                         "'chat gpt-4.1' in request 1", "'chat gpt-4.1' in request 2")

    def test_same_id_in_another_case_is_the_same_span(self):
        again = spans()[CHAT1]
        again["spanId"] = again["spanId"].upper()
        self.assertFinds(spans() + [again], "span id e3a9b1c2d4f50617 appears 2 times")

    def test_a_parent_nowhere(self):
        ss = spans()
        ss[CHAT2]["parentSpanId"] = "1111111111111111"
        self.assertFinds(ss, "'chat gpt-4.1' (0d9f8e7c6b5a4931): its parent 1111111111111111 is neither a span of the set")
        self.assertFinds(ss, "2 span(s) whose parent is outside the set, expected 1")

    def test_the_run_span_without_the_sent_parent(self):
        ss = spans()
        ss[RUN]["parentSpanId"] = ""
        self.assertFinds(ss, "'invoke_workflow agent_session'", "its parent (none: a root) is neither")

    def test_parents_in_a_loop(self):
        ss = spans()
        ss[RUN]["parentSpanId"] = ss[CHAT1]["spanId"]
        self.assertFinds(ss, "its parents form a loop")

    def test_bad_ids(self):
        ss = spans()
        ss[TOOL]["spanId"] = "b84c2d9e1f3a560"  # 15 hex digits
        self.assertFinds(ss, "spanId 'b84c2d9e1f3a560' is not 16 hex digits")
        ss = spans()
        ss[TOOL]["traceId"] = "S/kvNXezTaajzpKdDg5HNg=="
        self.assertFinds(ss, "traceId 'S/kvNXezTaajzpKdDg5HNg==' is not 32 hex digits")
        ss = spans()
        ss[TOOL]["parentSpanId"] = "0000000000000000"
        self.assertFinds(ss, "parentSpanId '0000000000000000' is not 16 hex digits (not all zero), nor empty")

    def test_tokens_as_a_string(self):
        ss = spans()
        attr(ss[CHAT1], "gen_ai.usage.input_tokens")["value"] = {"stringValue": "1850"}
        self.assertFinds(ss, "'chat gpt-4.1' (e3a9b1c2d4f50617): gen_ai.usage.input_tokens is string ('1850'), expected int")

    def test_tokens_wrong(self):
        ss = spans()
        attr(ss[CHAT2], "gen_ai.usage.output_tokens")["value"] = {"intValue": "89"}
        diffs = self.assertFinds(ss, "spans named /^chat /: (gen_ai.usage.input_tokens, gen_ai.usage.output_tokens)",
                                 "missing [[2210, 88]]", "extra [[2210, 89]]")
        self.assertFalse(any("adds up" in d for d in diffs))  # the input tokens still add up
        attr(ss[CHAT2], "gen_ai.usage.input_tokens")["value"] = {"intValue": 2211}
        self.assertFinds(ss, "gen_ai.usage.input_tokens adds up to 4061, expected 4060")

    def test_a_missing_attribute_and_one_that_must_be_absent(self):
        ss = spans()
        ss[TOOL]["attributes"] = [kv for kv in ss[TOOL]["attributes"] if kv["key"] != "gen_ai.tool.call.id"]
        self.assertFinds(ss, "'execute_tool shell'", "no attribute gen_ai.tool.call.id")
        ss = spans()
        ss[CHAT1]["attributes"].append({"key": "gen_ai.input.messages", "value": {"stringValue": "[...]"}})
        self.assertFinds(ss, "has attribute gen_ai.input.messages, expected none")

    def test_attribute_values(self):
        ss = spans()
        attr(ss[RUN], "engine.workflow.id")["value"] = {"stringValue": "pr-2"}
        attr(ss[TOOL], "gen_ai.tool.name")["value"] = {"stringValue": "rm"}
        self.assertFinds(ss, "engine.workflow.id is 'pr-2', expected 'pr-1'")
        self.assertFinds(ss, "gen_ai.tool.name is 'rm', expected to match")

    def test_an_attribute_twice(self):
        ss = spans()
        ss[CHAT1]["attributes"].append({"key": "gen_ai.request.model", "value": {"stringValue": "other"}})
        self.assertFinds(ss, "attribute gen_ai.request.model appears 2 times")

    def test_resource_and_scope(self):
        ss = spans()
        ss[RUN]["resource"] = {"attributes": [{"key": "service.name", "value": {"stringValue": "other"}}]}
        ss[RUN]["scope"] = {"name": "x"}
        self.assertFinds(ss, "resource: service.name is 'other', expected 'engine'")
        self.assertFinds(ss, "scope name is 'x', expected 'engine'")

    def test_kinds(self):
        ss = spans()
        ss[CHAT1]["kind"] = 1
        self.assertFinds(ss, "'chat gpt-4.1' (e3a9b1c2d4f50617): kind INTERNAL, expected CLIENT")
        del ss[AGENT]["kind"]  # absent: UNSPECIFIED
        self.assertFinds(ss, "'invoke_agent' (7c1e4a2f9d3b8e60): kind UNSPECIFIED, expected INTERNAL/CLIENT")

    def test_counts_and_other_spans(self):
        ss = spans()
        del ss[TOOL]
        self.assertFinds(ss, "0 spans named /^execute_tool /, expected 1")
        ss = spans()
        extra = copy.deepcopy(ss[TOOL])
        extra["spanId"], extra["name"] = "abababababababab", "sandbox.provision"
        self.assertFinds(ss + [extra], "span 'sandbox.provision' (abababababababab) matches no rule")
        self.assertEqual(check_trace.check(ss + [extra], dict(EXPECT, allow_other_spans=True)), [])

    def test_parent_and_ancestor_rules(self):
        ss = spans()
        ss[AGENT]["parentSpanId"] = "00f067aa0ba902b7"  # beside the run span, not under it
        self.assertFinds(ss, "'invoke_agent'", "its parent is outside the set, expected one of the spans named 'invoke_workflow agent_session'")
        ss = spans()
        ss[CHAT2]["parentSpanId"] = ss[RUN]["spanId"]
        self.assertFinds(ss, "'chat gpt-4.1' (0d9f8e7c6b5a4931): none of its ancestors is among the spans named 'invoke_agent'")

    def test_times(self):
        ss = spans()
        ss[TOOL]["endTimeUnixNano"] = "1765000001000000000"
        self.assertFinds(ss, "'execute_tool shell'", "ends 600000000 ns before it starts")
        ss = spans()
        ss[TOOL]["endTimeUnixNano"] = str(int(ss[AGENT]["endTimeUnixNano"]) + 1)
        self.assertFinds(ss, "'execute_tool shell' (b84c2d9e1f3a5607) ends 1 ns after its parent 'invoke_agent'")
        self.assertEqual(check_trace.check(ss, dict(EXPECT, time_slack_ns=1000)), [])
        ss = spans()
        ss[CHAT1]["startTimeUnixNano"] = str(int(ss[AGENT]["startTimeUnixNano"]) - 5)
        self.assertFinds(ss, "starts 5 ns before its parent")
        ss = spans()
        del ss[CHAT1]["startTimeUnixNano"]
        self.assertFinds(ss, "no start or end time")
        ss = spans()
        ss[CHAT1]["startTimeUnixNano"] = int(ss[CHAT1]["startTimeUnixNano"])  # a number is as good
        self.assertEqual(check_trace.check(ss, EXPECT), [])

    def test_a_misspelt_expectation_is_refused(self):
        with self.assertRaisesRegex(ValueError, r"expect.spans\[0\]: unknown key\(s\) \['cout'\]"):
            check_trace.check(spans(), {"spans": [{"name": "invoke_agent", "cout": 1}]})
        with self.assertRaisesRegex(ValueError, r"expect: unknown key\(s\) \['trace'\]"):
            check_trace.check(spans(), {"trace": "x"})
        with self.assertRaisesRegex(ValueError, r"expect.spans\[0\].parent"):
            check_trace.check(spans(), {"spans": [{"name": "invoke_agent", "parent": "outside"}]})

    def test_the_command(self):
        """Every form of --spans gives the same verdict; the exit codes."""
        with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
            lines = os.path.join(d, "out.jsonl")
            with open(lines, "w") as f:  # the receiver's --out: two requests
                half = copy.deepcopy(REQUEST)
                rest = copy.deepcopy(REQUEST)
                half["resourceSpans"][0]["scopeSpans"][0]["spans"] = half["resourceSpans"][0]["scopeSpans"][0]["spans"][:2]
                rest["resourceSpans"][0]["scopeSpans"][0]["spans"] = rest["resourceSpans"][0]["scopeSpans"][0]["spans"][2:]
                for n, r in enumerate((half, rest), 1):
                    f.write(json.dumps({"seq": n, "request": r, "body": json.dumps(r)}) + "\n")
            flat = os.path.join(d, "spans.json")
            with open(flat, "w") as f:  # GET /_spans
                json.dump(spans(), f)
            bad = os.path.join(d, "expect_bad.json")
            with open(bad, "w") as f:
                json.dump(dict(EXPECT, trace_id="0af7651916cd43dd8448eb211c80319c"), f)
            run = lambda *a: subprocess.run(  # noqa: E731
                [sys.executable, os.path.join(HERE, "check_trace.py"), *a], capture_output=True, text=True, timeout=120)
            good = os.path.join(HERE, "fixtures", "expect_agent.json")
            for src in (lines, flat, os.path.join(HERE, "fixtures", "trace_agent.json")):
                p = run("--spans", src, "--expect", good, "--tree")
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertIn("check_trace: ok", p.stdout)
                self.assertIn("      chat gpt-4.1 [CLIENT] e3a9b1c2d4f50617 1300.0 ms", p.stdout)
            p = run("--spans", lines, "--expect", bad)
            self.assertEqual(p.returncode, 1)
            self.assertIn("- 5 span(s) in trace 4bf92f3577b34da6a3ce929d0e0e4736, expected every span in 0af7651916cd43dd8448eb211c80319c", p.stdout)
            self.assertIn("check_trace: 1 difference(s)", p.stdout)
            p = run("--spans", os.path.join(d, "nothing"), "--expect", good)
            self.assertEqual(p.returncode, 2)
            self.assertIn("check_trace:", p.stderr)
            with open(bad, "w") as f:
                json.dump({"spans": [{"nmae": "x"}]}, f)
            p = run("--spans", lines, "--expect", bad)
            self.assertEqual(p.returncode, 2)
            self.assertIn("unknown key(s) ['nmae']", p.stderr)


if __name__ == "__main__":
    unittest.main()
