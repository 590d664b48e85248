-- time_only.lua: ceiling, a script that reads the Redis clock and returns
-- it: the floor of any limiter that takes its time from Redis TIME.
--
-- Returns { seconds, microseconds } as TIME does.

local t = redis.call('TIME')
return { tonumber(t[1]), tonumber(t[2]) }
