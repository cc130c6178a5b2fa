-- api_bench: the smallest durable start (a workflow that returns its input).
return function(input) return input end
