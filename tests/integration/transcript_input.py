# The input of tests/integration/wf/transcript.lua for test_terminal_progress.sh:
# a long assistant message (two paragraphs, to wrap) and a tool result of 120
# lines (longer than a screen, to fold), with a tab and an escape sequence in it.
import json, sys
text = ("The change splits the token bucket into two halves. " * 12).strip() + \
    "\n\nSecond paragraph: the refill path is not tested."
content = "\n".join("line %03d: %s" % (i, "x" * (i % 50)) for i in range(1, 121)) + \
    "\n\tindented\x1b[2J after a tab\n"
json.dump({"text": text, "content": content}, sys.stdout)
