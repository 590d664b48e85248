-- fixed_window.lua: the fixed-window counter, kept as the baseline whose
-- boundary burst the other algorithms fix: up to 2x the limit can pass in a
-- short span that straddles a window edge. Windows are aligned to multiples
-- of the window length.
--
-- State: each limit keeps ONE integer-encoded string key
--     S = tag * M + count,  M = 2*limit + 1
-- where tag is the window index modulo N = floor(2^53 / M), so S stays
-- exact in Lua's doubles. The key expires when its window ends, so on the
-- Redis clock a live key always holds the current or the previous window.
--
-- A spend increments first: INCRBY cost is the whole write when the key
-- already holds this window. A new key, or one left from an older window,
-- is rewritten once with SET PX; a denial puts every key back (DECRBY, or
-- DEL of a key INCRBY created).
--
-- Rolling deploys: a new key imports, once, the state of the same limit
-- under the previous layout (<prefix>:{tag}:fw:<name>:<count>:<window ms>,
-- "<index>:<count>"), in the same slot.
--
-- KEYS[i]   one key per limit; all share one hash tag (one cluster slot).
-- ARGV[1]   cost: units this request spends on every limit; negative to
--           peek (never writes) at -cost.
-- ARGV[2i], ARGV[2i+1]
--           limit i: count, window in microseconds.
-- ARGV[2n+2] (optional) now in microseconds; absent: Redis TIME (production).
--
-- Returns { allowed (1|0), now_us, then per limit: allowed (1|0), remaining,
--           reset_after_us, retry_after_us }.
-- Nothing is changed unless every limit admits and the cost is positive.
--
-- Complexity: O(number of limits); one INCRBY per limit on a spend (a GET on
-- a peek), plus a SET when a limit's window changed and an undo on a denial.

local n = #KEYS
local now = ARGV[2 * n + 2]
if now then
  now = tonumber(now)
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local cost = tonumber(ARGV[1])
local spend = cost > 0
if not spend then cost = -cost end

-- decide works out limit i: whether it admits the cost, what the reply
-- says of it, the value before this call's INCRBY (s), and the value to
-- store with its expiry when the key must be rewritten (false when the
-- INCRBY already holds it).
local function decide(i)
  local limit = tonumber(ARGV[2 * i])
  local window = tonumber(ARGV[2 * i + 1])
  local index = math.floor(now / window)
  local left = window - (now - index * window)
  local m = 2 * limit + 1
  local period = math.floor(9007199254740992 / m)

  local s
  if spend then
    s = redis.pcall('INCRBY', KEYS[i], ARGV[1])
    if type(s) == 'number' then
      s = s - cost
    else
      s = -1 -- not an integer: not ours, replaced below
    end
  else
    s = tonumber(redis.call('GET', KEYS[i]) or 0) or -1
  end

  local count, fresh = 0, s <= 0
  if s > 0 then
    count = s % m
    if (s - count) / m ~= index % period then
      count, fresh = 0, true
    end
  elseif s == 0 then
    -- A new key: carry over the previous layout's state.
    local head = string.match(KEYS[i], '^(.*)/')
    local legacy = head and redis.call('GET', head .. ':' .. (window / 1000))
    if legacy then
      local si, sc = string.match(legacy, '^(%d+):(%d+)$')
      if si and tonumber(si) == index then
        count = tonumber(sc)
      end
    end
  end

  local ok = count + cost <= limit
  local retry = 0
  if not ok then
    retry = left
  end
  local after = count
  if ok and spend then after = count + cost end
  local remaining = limit - after
  if remaining < 0 then remaining = 0 end
  local reset = 0
  if after > 0 then reset = left end

  local rewrite, ttl = false, 0
  if spend and fresh then
    rewrite = (index % period) * m + after
    ttl = math.ceil(left / 1000)
  end
  return ok, remaining, reset, retry, s, rewrite, ttl
end

-- undo puts key i back as it was before this call's INCRBY.
local function undo(i, s)
  if s > 0 then
    redis.call('DECRBY', KEYS[i], ARGV[1])
  elseif s == 0 then
    redis.call('DEL', KEYS[i])
  end
end

if n == 1 then
  local ok, remaining, reset, retry, s, rewrite, ttl = decide(1)
  if not ok then
    if spend then undo(1, s) end
    return { 0, now, 0, remaining, reset, retry }
  end
  if rewrite then
    redis.call('SET', KEYS[1], string.format('%d', rewrite), 'PX', ttl)
  end
  return { 1, now, 1, remaining, reset, retry }
end

local result = { 1, now }
local all_ok = true
local olds, rewrites, ttls = {}, {}, {}
for i = 1, n do
  local ok, remaining, reset, retry, s, rewrite, ttl = decide(i)
  if not ok then all_ok = false end
  result[4 * i - 1] = ok and 1 or 0
  result[4 * i] = remaining
  result[4 * i + 1] = reset
  result[4 * i + 2] = retry
  olds[i], rewrites[i], ttls[i] = s, rewrite, ttl
end

if not all_ok then
  result[1] = 0
  if spend then
    for i = 1, n do undo(i, olds[i]) end
  end
elseif spend then
  for i = 1, n do
    if rewrites[i] then
      redis.call('SET', KEYS[i], string.format('%d', rewrites[i]), 'PX', ttls[i])
    end
  end
end
return result
