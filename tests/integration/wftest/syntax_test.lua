local t = require "enginetest"

t.case("broken" function() end)
