-- Started by the test triggers: returns what it was started with.
return function(input) return { got = input } end
