-- zset_log.lua: baseline, the sorted-set sliding log as the design slidegate
-- grew from describes it, written here from that description.
--
-- One sorted set per identity, scored by a CLIENT-SIDE timestamp in
-- milliseconds.
--
-- KEYS[1]   the identity's key.
-- ARGV[1]   now, Unix milliseconds, from the client's clock.
-- ARGV[2]   window in milliseconds.
-- ARGV[3]   limit.
-- ARGV[4]   a member suffix unique to this request (so that two requests
--           in the same millisecond stay two members).
-- Returns 1 when admitted (and logged), 0 when denied.
-- Complexity: O(log n + k) for k expired members.

local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now, ARGV[1] .. '-' .. ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(window / 1000))
return 1
