-- incr_pexpire.lua: ceiling, the plainest Redis rate limiter: a fixed
-- window counted by INCR and expired by PEXPIRE, both on every call, with
-- the window's index in the key name from a CLIENT-SIDE clock. No Redis
-- clock, no Retry-After, no reply beyond the count: what a decision costs
-- Redis when it does nothing but count.
--
-- KEYS[1]   the identity's key for the current window.
-- ARGV[1]   window in milliseconds.
-- Returns the count after this request (the caller compares it with the
-- limit).

local count = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return count
