-- promote: make scheduled tasks whose execute_after has come ready.
-- KEYS: scheduled stats clock strict:partitions constraints running shares sleeping turns ready:total stats:tenants settings lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the batch limit
-- Returns the number promoted.
--@include maintenance

local now = clock_now()
return flush(now, promote_due(now, tonumber(ARGV[2])))
