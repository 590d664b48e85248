-- incrby_floor.lua: floor of a layout with one integer key per limit on
-- the Redis clock, what sliding_window.lua cannot go below: TIME, then one
-- INCRBY per key, and the reply { allowed, now_us, one value per key } the
-- scripts send. No arithmetic, no window change, no expiry: the cost of
-- the commands and of the reply alone.
--
-- KEYS      one key per limit.
-- ARGV[1]   the increment.

local t = redis.call('TIME')
local reply = { 1, t[1] * 1000000 + t[2] }
for i = 1, #KEYS do
  reply[i + 2] = redis.call('INCRBY', KEYS[i], ARGV[1])
end
return reply
