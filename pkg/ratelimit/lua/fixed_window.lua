-- fixed_window.lua: the fixed-window counter, kept as the baseline whose
-- boundary burst the other algorithms fix: up to 2x the limit can pass in a
-- short span that straddles a window edge. Windows are aligned to multiples
-- of the window length.
--
-- State: each limit keeps ONE integer-encoded string key
--     S = tag * M + count,  M = 2^21
-- where tag is the window index modulo 2^32 (2^53 / M), so S stays exact in
-- Lua's doubles. M is fixed, not the limit's: the state is the units spent
-- whatever the count, and the count is applied when deciding (a count
-- changed keeps every caller's count). M is above twice MaxCount, so a
-- count and a cost INCRBY adds before the admission is decided fit. The key expires when its window ends, so on the
-- Redis clock a live key always holds the current or the previous window.
--
-- A spend increments first: INCRBY cost is the whole write when the key
-- already holds this window (the fast path below, for a lone limit). A
-- stored S is never 0 (a write always holds cost >= 1 units). A new key, or one left from an older window,
-- is rewritten once with SET PX; a denial puts every key back (DECRBY, or
-- DEL of a key INCRBY created).
--
-- KEYS[i]   one key per limit; all share one hash tag (one cluster slot).
-- ARGV[1]   cost: units this request spends on every limit; negative to
--           peek (never writes) at -cost.
-- ARGV[2i], ARGV[2i+1]
--           limit i: count, window in microseconds. A negative count
--           -c marks a shadow limit of count c: decided and reported, never
--           enforced (see the shadow rule below).
-- ARGV[2n+2] (optional) now in microseconds; absent: Redis TIME (production).
--
-- Returns { allowed (1|0), now_us, then per limit v }: allowed is the
-- request's answer, admitted iff every enforced limit admits it; v is the
-- limit's count in this window before this request when the limit admits
-- the cost on its own, and -1 - that count when it does not. The caller
-- works out remaining, reset and retry-after from it.
-- Shadow rule: nothing is changed unless the request is admitted and the
-- cost is positive; then every enforced limit spends, and every shadow limit
-- that admits the cost on its own spends too (its state is what enforcing it
-- would have left).
--
-- SET is given the new value as a Lua number: Redis 7 writes it with %.17g,
-- the plain digits of an integer below 2^53, so the key stays
-- integer-encoded.
--
-- Complexity: O(number of limits); one INCRBY per limit on a spend (a GET on
-- a peek), plus a SET when a limit's window changed and an undo on a denial.

local n = #KEYS
local now = ARGV[2 * n + 2]
if now then
  now = now + 0
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- The layout's constants: M and the tag period (see State).
local m, period = 2097152, 4294967296
-- A cost of 1, the common case, is recognised without a conversion.
local cost = 1
if ARGV[1] ~= '1' then cost = ARGV[1] + 0 end

-- settle reads s, the value a key held before this call (0 when missing, -1
-- when not an integer): its count in this window (0 when it holds another
-- window or nothing), and whether the key must be rewritten.
local function settle(s, base, m)
  if s > 0 and s - base >= 0 and s - base < m then return s - base, false end
  return 0, true
end

-- The fast path: one limit and a spend. A lone limit spends exactly when it
-- admits, whether it is enforced or a shadow.
if n == 1 and cost > 0 then
  local limit, window = ARGV[2] + 0, ARGV[3] + 0
  local shadow = limit < 0
  if shadow then limit = -limit end
  local elapsed = now % window
  local index = (now - elapsed) / window
  local base = (index % period) * m
  local s = redis.pcall('INCRBY', KEYS[1], ARGV[1])
  if type(s) == 'number' then
    s = s - cost
    local v = s - base
    if s > 0 and v >= 0 and v < m then
      -- The key holds this window: the INCRBY was the whole write.
      if v + cost <= limit then return { 1, now, v } end
      redis.call('DECRBY', KEYS[1], ARGV[1])
      return { shadow and 1 or 0, now, -1 - v }
    end
  else
    s = -1 -- not an integer: not ours, replaced below
  end
  -- The key must be rewritten for this window, or put back.
  local count = settle(s, base, m)
  if count + cost <= limit then
    redis.call('SET', KEYS[1], base + count + cost, 'PX', math.ceil((window - elapsed) / 1000))
    return { 1, now, count }
  end
  if s > 0 then
    redis.call('DECRBY', KEYS[1], ARGV[1])
  elseif s == 0 then
    redis.call('DEL', KEYS[1])
  end
  return { shadow and 1 or 0, now, -1 - count }
end

-- The general path: several limits, or a peek.
local spend = cost > 0
if not spend then cost = -cost end
local reply = { 1, now }
local all_ok = true
local oks, olds, rewrites, ttls = {}, {}, {}, {}

for i = 1, n do
  local limit, window = ARGV[2 * i] + 0, ARGV[2 * i + 1] + 0
  local shadow = limit < 0
  if shadow then limit = -limit end
  local elapsed = now % window
  local index = (now - elapsed) / window
  local base = (index % period) * m

  local s
  if spend then
    s = redis.pcall('INCRBY', KEYS[i], ARGV[1])
    if type(s) == 'number' then
      s = s - cost
    else
      s = -1
    end
  else
    local raw = redis.call('GET', KEYS[i]) or 0
    s = tonumber(raw) or -1
  end
  local count, fresh = settle(s, base, m)

  local ok = count + cost <= limit
  if ok then
    reply[i + 2] = count
  else
    reply[i + 2] = -1 - count
    if not shadow then
      all_ok = false
      reply[1] = 0
    end
  end
  oks[i], olds[i] = ok, s
  if fresh then
    rewrites[i] = base + count + cost
    ttls[i] = math.ceil((window - elapsed) / 1000)
  end
end

if not spend then return reply end

-- undo puts key i back as it was before this call's INCRBY.
local function undo(i)
  if olds[i] > 0 then
    redis.call('DECRBY', KEYS[i], ARGV[1])
  elseif olds[i] == 0 then
    redis.call('DEL', KEYS[i])
  end
end

for i = 1, n do
  if not all_ok or not oks[i] then
    undo(i) -- a shadow limit that denies on its own spends nothing either
  elseif rewrites[i] then
    redis.call('SET', KEYS[i], rewrites[i], 'PX', ttls[i])
  end
end
return reply
