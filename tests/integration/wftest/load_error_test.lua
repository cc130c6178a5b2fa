local t = require "enginetest"
t.case("fine", function() end)
error("cannot set up")
