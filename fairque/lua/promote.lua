-- promote: make scheduled tasks whose execute_after has come ready.
-- ARGV[6] = batch limit. Returns the number promoted.
--@include maintenance

local now = clock_now()
return flush(now, promote_due(now, tonumber(ARGV[FIRST_ARG])))
