-- two_key_counter.lua: baseline, the sliding-window counter as the design
-- slidegate grew from describes it, written here from that description.
--
-- Two string keys per identity, one per fixed window, named inside the
-- script from a CLIENT-SIDE timestamp in whole seconds (so the key names are
-- not declared in KEYS: not Redis Cluster safe, and instances with skewed
-- clocks disagree). The estimate is
--     previous * (window - elapsed) / window + current.
--
-- KEYS[1]   the identity's key prefix.
-- ARGV[1]   now, Unix seconds, from the client's clock.
-- ARGV[2]   window in seconds.
-- ARGV[3]   limit.
-- Returns 1 when admitted (and counted), 0 when denied.
-- Complexity: O(1): two GETs, then INCR and EXPIRE when admitted.

local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local current_window = math.floor(now / window)
local elapsed = now - current_window * window
local current_key = KEYS[1] .. ':' .. current_window
local previous_key = KEYS[1] .. ':' .. (current_window - 1)

local current = tonumber(redis.call('GET', current_key) or '0')
local previous = tonumber(redis.call('GET', previous_key) or '0')
local estimate = previous * (window - elapsed) / window + current
if estimate + 1 > limit then
  return 0
end
redis.call('INCR', current_key)
redis.call('EXPIRE', current_key, window * 2)
return 1
