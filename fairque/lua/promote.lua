-- promote: make scheduled tasks whose execute_after has come ready.
-- ARGV[6] = batch limit. Returns the number promoted.
--@include maintenance

local promoted = promote_due(clock_now(), tonumber(ARGV[FIRST_ARG]))
save_ticks()
return promoted
