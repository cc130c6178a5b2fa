-- The smallest workflow: returns its input (the workflow id tests start many).
return function(input) return { echo = input } end
