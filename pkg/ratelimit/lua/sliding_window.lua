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
--     S = (tag * M + previous) * M + current,  M = 2^21
-- where tag is the window index modulo 2048 (2^53 / M^2), so S stays exact
-- in Lua's doubles. The base M is fixed, not the limit's: the state is the
-- units spent in each window whatever the count, and the count is applied
-- when deciding, so a count changed (configuration, plan, scale control)
-- keeps every caller's counts. M is above twice MaxCount: a committed
-- count is at most the count it was admitted under (<= 1,000,000), and
-- INCRBY adds a cost of at most the deciding count before the admission
-- is decided, so the current field never overflows into the previous one.
-- The key expires when the window after the one it was written in ends, so
-- on the Redis clock a live key is never more than two windows old and the
-- tag names its window without ambiguity. A stored S is never 0 (a write
-- always holds cost >= 1 units).

-- The fixed window (FixedWindow: the baseline whose boundary burst the
-- other algorithms fix, up to twice the count in a span across an edge) is
-- this script with its rule: the same function, told by fixed (below),
-- decides on the count of the current window alone, and keeps the fixed
-- window's own layout:
--     S = tag * M + count,  tag the window index modulo 2^32
-- a key that expires when its window ends. Its admission compares counts,
-- not products, so any count x window is exact.
--
-- A spend increments first: INCRBY cost is the whole write when the key
-- already holds this window (the common case: one command besides TIME).
-- When the key is new or holds an older window, it is rewritten once with
-- SET PX (the expiry only changes with the window). A denial puts every
-- key back as it was (DECRBY, or DEL of a key INCRBY created).
--
-- KEYS[i]   one key per limit; all share one hash tag (one cluster slot).
-- ARGV[1]   cost: units this request spends on every limit; negative to
--           peek (never writes) at -cost.
-- ARGV[2i], ARGV[2i+1]
--           limit i: count, window in microseconds. A negative count
--           -c marks a shadow limit of count c: decided and reported, never
--           enforced (see the shadow rule below). A negative window -w
--           marks a long limit, whose window is w milliseconds (see below).
-- ARGV[2n+2] (optional) now in microseconds; absent: Redis TIME (production).
--
-- Returns { allowed (1|0), now_us, then per limit v }: allowed is the
-- request's answer, admitted iff every enforced limit admits it; v =
-- previous * M + current, the limit's counts as of now before this request,
-- when the limit admits the cost on its own, and -1 - that when it does not.
-- The caller works out remaining, reset and retry-after from them (they are
-- functions of the counts, the cost and now).
-- Shadow rule: nothing is changed unless the request is admitted and the
-- cost is positive; then every enforced limit spends, and every shadow limit
-- that admits the cost on its own spends too (its state is what enforcing it
-- would have left).
--
-- Long limits: the admission compares products of a count and the window
-- (limit * window), exact only below 2^53. For a limit whose count x window
-- in microseconds would pass 2^50 (a daily quota of 100,000), the caller
-- sends the window in milliseconds, negated, and the limit is decided on
-- the millisecond clock floor(now / 1000): elapsed and window in ms. Its
-- window index is the same (floor(now_us / window_us) = floor(floor(now_us
-- / 1000) / window_ms) for a whole-ms window), so its key and state are
-- those of the microsecond rule; only the weight of the previous window
-- moves in steps of 1 ms, never below the exact weight. The caller keeps
-- count x window in milliseconds below 2^50, so the products stay exact.
-- Ordinary limits pay one comparison for this.
--
-- SET is given the new value as a Lua number: Redis 7 writes it with %.17g,
-- the plain digits of an integer below 2^53, so the key stays
-- integer-encoded.
--
-- Complexity: O(number of limits); one INCRBY per limit on a spend (a GET on
-- a peek), plus a SET when a limit's window changed and an undo on a denial.

-- fixed: true when the mixed script runs this as the fixed window's
-- function (lua/mixed.lua's code '4'); nil when this is a script of its own.
local fixed = ...
local n = #KEYS
local now = ARGV[2 * n + 2]
if now then
  now = now + 0
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- A cost of 1, the common case, is recognised without a conversion.
local cost = 1
if ARGV[1] ~= '1' then cost = ARGV[1] + 0 end
local spend = cost > 0
if not spend then cost = -cost end

-- decide reads limit i (INCRBY on a spend, GET on a peek) at now and returns
-- whether it admits the cost on its own, its reply value, whether it is a
-- shadow, the key's value before this call (0: none, -1: not ours) and,
-- when the key must be rewritten for this window, its value and TTL in ms.
-- It takes what it needs as arguments: a function's upvalues cost the
-- lone limit's call about a tenth of its Redis time.
local function decide(i, now, cost, spend, fixed)
  -- The layout's constants: M, the tag's multiplier and period (see State).
  local m, pm, period = 2097152, 4398046511104, 2048
  if fixed then pm, period = m, 4294967296 end
  local limit, window = ARGV[2 * i] + 0, ARGV[2 * i + 1] + 0
  local shadow = limit < 0
  if shadow then limit = -limit end
  local clock, unit = now, 1
  if window < 0 then window, clock, unit = -window, (now - now % 1000) / 1000, 1000 end
  local elapsed = clock % window
  local index = (clock - elapsed) / window
  local base = (index % period) * pm
  local s
  if spend then
    s = redis.pcall('INCRBY', KEYS[i], ARGV[1])
    -- An integer, or a value not ours (then -1).
    s = type(s) == 'number' and s - cost or -1
  else
    s = tonumber(redis.call('GET', KEYS[i]) or 0) or -1
  end
  local current, previous, v = 0, 0, s - base
  if s > 0 and v >= 0 and v < pm then
    -- The key holds this window: on a spend, the INCRBY was the whole write.
    current = v % m
    previous = (v - current) / m
    if fixed then return current + cost <= limit, v, shadow, s end
    return previous * (window - elapsed) + (current + cost) * window <= limit * window, v, shadow, s
  end
  if s > 0 and not fixed then
    -- The key holds an older window: the count of the window just before
    -- this one becomes the previous count.
    local old = s % pm
    if (index - (s - old) / pm) % period == 1 then previous = old % m end
  end
  v = previous * m
  -- A sliding-window key lives until the window after this one ends, a
  -- fixed-window key until this one does.
  local ok, ends = cost <= limit, window
  if not fixed then ok, ends = previous * (window - elapsed) + cost * window <= limit * window, 2 * window end
  return ok, v, shadow, s, base + v + cost, math.ceil((ends - elapsed) * unit / 1000)
end

-- One limit and a spend, the common case: it spends exactly when it
-- admits, whether it is enforced or a shadow.
if n == 1 and spend then
  local ok, v, shadow, s, write, ttl = decide(1, now, cost, spend, fixed)
  if ok then
    if write then redis.call('SET', KEYS[1], write, 'PX', ttl) end
    return { 1, now, v }
  end
  -- Put the key back as it was before this call's INCRBY.
  if s > 0 then redis.call('DECRBY', KEYS[1], ARGV[1]) elseif s == 0 then redis.call('DEL', KEYS[1]) end
  return { shadow and 1 or 0, now, -1 - v }
end

-- Several limits, or a peek: decide every limit, then write or undo.
-- olds[i]: key i's value before this call; writes[i], writes[-i]: its
-- value and TTL for this window when it must be rewritten.
local reply, olds, writes = { 1, now }, {}, {}
for i = 1, n do
  local ok, v, shadow, s, write, ttl = decide(i, now, cost, spend, fixed)
  if ok then
    reply[i + 2] = v
  else
    reply[i + 2] = -1 - v
    if not shadow then reply[1] = 0 end
  end
  olds[i], writes[i], writes[-i] = s, write, ttl
end
if not spend then return reply end
for i = 1, n do
  if reply[1] == 1 and reply[i + 2] >= 0 then
    if writes[i] then redis.call('SET', KEYS[i], writes[i], 'PX', writes[-i]) end
  elseif olds[i] > 0 then
    -- A shadow limit that denies on its own spends nothing either.
    redis.call('DECRBY', KEYS[i], ARGV[1])
  elseif olds[i] == 0 then
    redis.call('DEL', KEYS[i])
  end
end
return reply
