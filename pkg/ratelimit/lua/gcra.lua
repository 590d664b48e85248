-- gcra.lua: the generic cell rate algorithm, serving two algorithms:
--   token-bucket: burst = count  (up to count at once, refilling evenly)
--   leaky-bucket: burst = 1      (requests evenly spaced, no burst)
--
-- The emission interval is T = window / count. Each limit keeps ONE string
-- key holding the theoretical arrival time (TAT) as "<us>:<fraction>",
-- meaning us + fraction/count microseconds, so T stays exact even when it
-- is not a whole number of microseconds. Arithmetic below is relative to
-- now and scaled by count: one unit of "scaled" time is 1/count us, and T
-- is `window` scaled units. Every value stays below 2^53.
--
-- A request of cost n is admitted when  TAT' - burst*T <= now, where
-- TAT' = max(TAT, now) + n*T.
--
-- KEYS[i]   one key per limit; all share one hash tag (one cluster slot).
-- ARGV[1]   cost: units this request spends on every limit; negative to
--           peek (never writes) at -cost.
-- ARGV[3i-1], ARGV[3i], ARGV[3i+1]
--           limit i: count, window in microseconds, burst. A negative
--           count -c marks a shadow limit of count c: decided and reported,
--           never enforced (see the shadow rule below).
-- ARGV[3n+2] (optional) now in microseconds; absent: Redis TIME (production).
--
-- Returns { allowed (1|0), now_us, then per limit: allowed (1|0), remaining,
--           reset_after_us, retry_after_us }.
-- reset_after: time until the bucket is full again (TAT reached).
-- allowed (the first value) follows the enforced limits only.
-- Shadow rule: the request is admitted iff every enforced limit admits it.
-- Nothing is written unless it is admitted and the cost is positive; then
-- every enforced limit spends, and every shadow limit that admits the cost on
-- its own spends too (its state is what enforcing it would have left).
--
-- Complexity: O(number of limits).

local n = #KEYS
local now = ARGV[3 * n + 2]
if now then
  now = tonumber(now)
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local cost = tonumber(ARGV[1])
local spend = cost > 0
if not spend then cost = -cost end

local result = { 1, now }
local pending = {}
local all_ok = true

for i = 1, #KEYS do
  local count = tonumber(ARGV[3 * i - 1])
  local shadow = count < 0
  if shadow then count = -count end
  local window = tonumber(ARGV[3 * i])
  local burst = tonumber(ARGV[3 * i + 1])

  -- backlog: max(TAT - now, 0) in scaled units
  local backlog = 0
  local stored = redis.call('GET', KEYS[i])
  if stored then
    local su, sf = string.match(stored, '^(%d+):(%d+)$')
    if su then
      su, sf = tonumber(su), tonumber(sf)
      if su >= now then
        backlog = (su - now) * count + sf
      end
    end
  end

  local tolerance = burst * window
  local next_backlog = backlog + cost * window
  local ok = next_backlog <= tolerance

  local retry = 0
  if not ok then
    retry = math.ceil((next_backlog - tolerance) / count)
    if not shadow then all_ok = false end
  end

  local after = backlog
  if ok and spend then after = next_backlog end
  local remaining = math.floor((tolerance - after) / window)
  if remaining < 0 then remaining = 0 end

  result[#result + 1] = ok and 1 or 0
  result[#result + 1] = remaining
  result[#result + 1] = math.ceil(after / count)
  result[#result + 1] = retry
  pending[i] = ok and { count, next_backlog }
end

if not all_ok then
  result[1] = 0
elseif spend then
  for i = 1, #KEYS do
    if pending[i] then
      local count, backlog = pending[i][1], pending[i][2]
      local whole = math.floor(backlog / count)
      local fraction = backlog - whole * count
      local ttl_ms = math.ceil((whole + 1) / 1000)
      redis.call('SET', KEYS[i], string.format('%d:%d', now + whole, fraction), 'PX', ttl_ms)
    end
  end
end
return result
