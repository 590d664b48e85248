-- gcra.lua: the generic cell rate algorithm, serving two algorithms:
--   token-bucket: burst = count  (up to count at once, refilling evenly)
--   leaky-bucket: burst = 1      (requests evenly spaced, no burst)
--
-- The emission interval is T = window / count. Arithmetic below is
-- relative to now and scaled by count: one unit of "scaled" time is 1/count
-- us, T is `window` scaled units, and the backlog max(TAT - now, 0) in
-- scaled units is B = the units outstanding x window, a number that does
-- not depend on the count. Each limit keeps ONE string key "<t>:<B>": the
-- time in microseconds it was written at and the backlog B then. At time
-- now the backlog is max(B - (now - t) * count, 0): the units outstanding
-- drain at the count decided with, so a count changed (configuration,
-- plan, scale control) keeps what a caller spent and drains it at the new
-- rate. Every value stays below 2^53.
--
-- A request of cost n is admitted when  TAT' - burst*T <= now, where
-- TAT' = max(TAT, now) + n*T.
--
-- The key expires when its backlog has drained at the count it was written
-- with: a count lowered later finds it gone sooner than its own rate would
-- drain it, never sooner than the count it was spent under allows.
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
  now = now + 0
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local cost = ARGV[1] + 0
local spend = cost > 0
if not spend then cost = -cost end

-- writes[i]: when limit i admits the cost, the backlog it would leave,
-- its reply's remaining and reset after that spend, and its key's TTL in
-- ms (the backlog drained at the count decided with, 1 ms later).
local reply, writes = { 1, now }, {}
for i = 1, n do
  local count, window, burst = ARGV[3 * i - 1] + 0, ARGV[3 * i] + 0, ARGV[3 * i + 1] + 0
  local shadow = count < 0
  if shadow then count = -count end

  -- backlog: max(TAT - now, 0) in scaled units
  local backlog = 0
  local st, sb = string.match(redis.call('GET', KEYS[i]) or '', '^(%d+):(%d+)$')
  if st then backlog = math.max(sb - (now - st) * count, 0) end

  local tolerance = burst * window
  local next_backlog = backlog + cost * window
  local ok, retry = next_backlog <= tolerance, 0
  if ok then
    local room = tolerance - next_backlog
    writes[i] = { next_backlog, (room - room % window) / window, math.ceil(next_backlog / count),
      math.ceil(((next_backlog - next_backlog % count) / count + 1) / 1000) }
  else
    retry = math.ceil((next_backlog - tolerance) / count)
    if not shadow then reply[1] = 0 end
  end
  local room = math.max(tolerance - backlog, 0)
  reply[4 * i - 1], reply[4 * i], reply[4 * i + 1], reply[4 * i + 2] = ok and 1 or 0, (room - room % window) / window, math.ceil(backlog / count), retry
end

-- The replies above are a peek's: a denied request spends nothing. An
-- admitted one spends on every limit that admits it on its own, which then
-- reports what it has left after the spend.
if spend and reply[1] == 1 then
  for i = 1, n do
    local w = writes[i]
    if w then
      reply[4 * i], reply[4 * i + 1] = w[2], w[3]
      redis.call('SET', KEYS[i], string.format('%d:%d', now, w[1]), 'PX', w[4])
    end
  end
end
return reply
