-- Model-graded: a model reads the case and the review's summary and answers
-- PASS or FAIL. Offline its answers are recorded (expect.grader, a replay:
-- recording per case); with engine eval --live, the case's live model grades.
return {
  kind = "model",
  description = "a model agrees the summary names the problem",
  model = function(case)
    if not case.expect.grader then return nil end
    return { name = "replay:" .. case.expect.grader }
  end,
  prompt = function(case, run)
    return "The change under review: " .. tostring(case.description) .. "\n\nThe review's summary: " ..
      tostring(run.summary) .. "\n\nDoes the summary name the change's problem (or, for a correct change, " ..
      "approve it)? Answer PASS or FAIL, then one sentence."
  end,
  verdict = function(answer)
    local word = answer:match("^%s*(%u+)")
    if word ~= "PASS" and word ~= "FAIL" then return false, "the grader answered neither PASS nor FAIL: " .. answer:sub(1, 80) end
    return word == "PASS", answer:sub(1, 200)
  end,
}
