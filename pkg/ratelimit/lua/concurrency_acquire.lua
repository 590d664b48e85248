-- concurrency_acquire.lua: takes one of an identity's max slots, or says
-- when the earliest one held ends.
--
-- State: ONE sorted set per identity and concurrency limit. A member is a
-- slot: its random token, scored by its lease deadline in microseconds on
-- the Redis clock. A slot whose deadline has passed is free: its holder
-- crashed or timed out without releasing it. The key expires with its
-- longest lease, so an identity that stops calling leaves nothing behind.
--
-- Deadlines are microseconds since the epoch (about 2^51 today), exact in
-- the doubles sorted-set scores and Lua numbers both are.
--
-- KEYS[1]   the identity's slot set (the identity's hash tag).
-- ARGV[1]   max: how many slots may be held at once, 1 or more.
-- ARGV[2]   lease in microseconds, 1000 or more.
-- ARGV[3]   token of the new slot: random, unique per acquire; empty to
--           peek (nothing is written, expired slots included).
-- ARGV[4]   (optional) now in microseconds; absent: Redis TIME (production).
--
-- Returns { acquired (1|0), now_us, held, earliest_end_us, latest_end_us }:
--   held          live slots after the call (counting the new one when
--                 acquired);
--   earliest_end  the soonest lease end of the live slots, 0 when none;
--   latest_end    the latest one, 0 when none.
-- On a peek, acquired says whether an acquire would have succeeded, and
-- held counts the live slots without the one that acquire would add.
--
-- Complexity: O(log(M) + E) where M is the set's size (at most max, plus
-- any slots left when max was lowered) and E the expired slots removed.

local max, lease, token = ARGV[1] + 0, ARGV[2] + 0, ARGV[3]
local now = ARGV[4]
if now then
  now = now + 0
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local key = KEYS[1]

local function ends()
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #first == 0 then return 0, 0 end
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return tonumber(first[2]), tonumber(last[2])
end

if token == '' then
  -- Formatted with %d: Lua's own number-to-string keeps 14 digits only.
  local after = string.format('(%d', now)
  local held = redis.call('ZCOUNT', key, after, '+inf')
  local live = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local earliest = 0
  if #live > 0 then earliest = tonumber(live[2]) end
  local _, latest = ends()
  if held == 0 then latest = 0 end
  return { held < max and 1 or 0, now, held, earliest, latest }
end

-- A slot whose deadline is now or earlier is free.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local held = redis.call('ZCARD', key)
if held >= max then
  local earliest, latest = ends()
  return { 0, now, held, earliest, latest }
end

local deadline = now + lease
if redis.call('ZADD', key, 'NX', deadline, token) == 0 then
  return redis.error_reply('ERR concurrency_acquire: token already holds a slot')
end
local earliest, latest = ends()
redis.call('PEXPIRE', key, math.ceil((latest - now) / 1000))
return { 1, now, held + 1, earliest, latest }
