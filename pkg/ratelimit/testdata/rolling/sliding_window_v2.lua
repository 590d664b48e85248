-- sliding_window.lua: the approximated sliding-window counter.
--
-- The estimate at time now is
--     previous * (window - elapsed) / window + current
-- where elapsed is the time since the current window began: the previous
-- window is weighted by how much of it still overlaps the rolling window that
-- ends now. All arithmetic is scaled by the window length, so it stays in
-- exact integers (every product is below 2^53).
--
-- State: each limit keeps ONE integer-encoded string key (Redis stores it
-- inside the key's object, with no separate allocation):
--     S = (tag * P + previous) * M + current,  M = 2*count + 1, P = count + 1
-- where tag is the window index modulo N = floor(2^53 / (P*M)) (at least
-- 4,503 for the largest count), so S stays exact in Lua's doubles. The key
-- expires when the window after the one it was written in ends, so on the
-- Redis clock a live key is never more than two windows old and the tag
-- names its window without ambiguity. current never exceeds count, so
-- INCRBY cost (cost <= count) only ever adds to the current field.
--
-- A spend increments first: INCRBY cost is the whole write when the key
-- already holds this window (the common case: one command besides TIME).
-- When the key is new or holds an older window, it is rewritten once with
-- SET PX (the expiry only changes with the window). When a limit denies,
-- every key is put back as it was (DECRBY, or DEL of a key INCRBY created).
--
-- Rolling deploys: a key this script creates imports, once, the state of
-- the same limit under the previous layout (<prefix>:{tag}:sw:<name>:<count>:
-- <window ms>, "<index>:<current>:<previous>"), which lives in the same slot
-- (same hash tag), so that a caller keeps its count across the upgrade.
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
-- reset_after: time until the counter would be empty with no more traffic.
-- retry_after: for a limit that does not admit the cost now, the smallest
--              wait after which it would (0 otherwise).
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
  local elapsed = now - index * window
  local left = window - elapsed
  local m = 2 * limit + 1
  local p = limit + 1
  local period = math.floor(9007199254740992 / (p * m))

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

  local current, previous, fresh = 0, 0, s <= 0
  if s > 0 then
    current = s % m
    local rest = (s - current) / m
    previous = rest % p
    local d = (index - (rest - previous) / p) % period
    if d == 1 then
      current, previous = 0, current
    elseif d ~= 0 then
      current, previous = 0, 0
    end
    if d ~= 0 then fresh = true end
  elseif s == 0 then
    -- A new key (created by this INCRBY, or missing on a peek): carry over
    -- the previous layout's state.
    local head = string.match(KEYS[i], '^(.*)/')
    local legacy = head and redis.call('GET', head .. ':' .. (window / 1000))
    if legacy then
      local si, sc, sp = string.match(legacy, '^(%d+):(%d+):(%d+)$')
      if si then
        si = tonumber(si)
        if si == index then
          current, previous = tonumber(sc), tonumber(sp)
        elseif si == index - 1 then
          previous = tonumber(sc)
        end
      end
    end
  end

  -- used and capacity in units of 1/window requests
  local used = previous * left + current * window
  local capacity = limit * window
  local ok = used + cost * window <= capacity

  local retry = 0
  if not ok then
    -- Smallest elapsed e in this window with previous*(window-e) <= room*window.
    local room = limit - cost - current
    local need = window
    if room >= 0 and previous > 0 then
      need = window - math.floor(room * window / previous)
    end
    if need < window then
      retry = need - elapsed
    else
      -- Not in this window: in the next one, this window's count becomes the
      -- previous one and nothing is current yet.
      local room_next = limit - cost
      local need_next = 0
      if current > 0 then
        need_next = window - math.floor(room_next * window / current)
        if need_next < 0 then need_next = 0 end
      end
      if need_next < window then
        retry = left + need_next
      else
        retry = left + window
      end
    end
  end

  local after = used
  local new_current = current
  if ok and spend then
    after = used + cost * window
    new_current = current + cost
  end
  local remaining = math.floor((capacity - after) / window)
  if remaining < 0 then remaining = 0 end

  local reset = 0
  if new_current > 0 then
    reset = left + window
  elseif previous > 0 then
    reset = left
  end

  local rewrite, ttl = false, 0
  if spend and fresh then
    rewrite = ((index % period) * p + previous) * m + new_current
    ttl = math.ceil((left + window) / 1000)
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
