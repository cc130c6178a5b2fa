-- 20-publish: every tool that publishes anything outside the session (a review
-- file, a POST to an endpoint) needs a human's approval.
return {
  name = "publish",
  decide = function(req)
    if req.publishes == true then
      return "approve", "the tool '" .. tostring(req.tool) .. "' publishes outside the session"
    end
    return nil
  end,
}
