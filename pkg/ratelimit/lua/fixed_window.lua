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
-- already holds this window. A
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

-- One path for one limit or several, a spend or a peek: the fixed window
-- is the baseline, not the default, and a lone limit's spend runs the same
-- commands here (INCRBY, then SET PX on a new window, or the undo).
local spend = cost > 0
if not spend then cost = -cost end
local reply = { 1, now }
-- olds[i]: key i's value before this call's INCRBY (0: none, -1: not
-- ours); writes[i]: its value for this window when it must be rewritten.
local olds, writes, ttls = {}, {}, {}

for i = 1, n do
  local limit, window = ARGV[2 * i] + 0, ARGV[2 * i + 1] + 0
  local shadow = limit < 0
  if shadow then limit = -limit end
  local elapsed = now % window
  local base = ((now - elapsed) / window % period) * m
  local s
  if spend then
    s = redis.pcall('INCRBY', KEYS[i], ARGV[1])
    s = type(s) == 'number' and s - cost or -1
  else
    s = tonumber(redis.call('GET', KEYS[i]) or 0) or -1
  end
  -- The count in this window: 0 when the key holds another window or
  -- nothing, and the key is then rewritten.
  local count = s - base
  if s <= 0 or count < 0 or count >= m then
    count = 0
    writes[i], ttls[i] = base + cost, math.ceil((window - elapsed) / 1000)
  end
  if count + cost <= limit then
    reply[i + 2] = count
  else
    reply[i + 2] = -1 - count
    if not shadow then reply[1] = 0 end
  end
  olds[i] = s
end

if not spend then return reply end
for i = 1, n do
  if reply[1] == 1 and reply[i + 2] >= 0 then
    if writes[i] then redis.call('SET', KEYS[i], writes[i], 'PX', ttls[i]) end
  elseif olds[i] > 0 then
    -- Put the key back as it was before this call's INCRBY (a shadow limit
    -- that denies on its own spends nothing either).
    redis.call('DECRBY', KEYS[i], ARGV[1])
  elseif olds[i] == 0 then
    redis.call('DEL', KEYS[i])
  end
end
return reply
