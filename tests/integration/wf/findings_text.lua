-- A result shaped like an agent session's (summary, usage, findings) whose
-- text a model wrote: control sequences in a title, a file name and the
-- summary, which the terminal layout must show as escapes.
return function(input)
  return {
    summary = "Two findings.\27[2J The screen was not cleared.",
    turns = 2, tool_calls = 1, tokens = 1234,
    outcome = "completed",
    result = {
      verdict = "comment",
      findings = {
        { severity = "high", file = "src/a\27[31m.c", line = 7, title = "\27]0;pwned\7title set \27[2J and cleared" },
        { severity = "nit", title = input.title or "A plain one" },
      },
    },
  }
end
