-- sliding_log.lua: the exact sliding log.
--
-- Each limit keeps ONE sorted set of admitted units, scored by their time in
-- microseconds. A unit admitted at time s counts while now - window < s,
-- so the log holds at most `count` live members: memory grows with the limit,
-- which is the price of exactness.
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
-- Returns { allowed (1|0), now_us, then per limit: allowed (1|0), remaining,
--           reset_after_us, retry_after_us }.
-- retry_after is when enough of the oldest live units have aged out for
-- this cost to fit; reset_after is when the newest one has.
-- allowed (the first value) follows the enforced limits only.
-- Shadow rule: the request is admitted iff every enforced limit admits it.
-- Nothing is written unless it is admitted and the cost is positive; then
-- every enforced limit spends, and every shadow limit that admits the cost on
-- its own spends too (its state is what enforcing it would have left).
--
-- Complexity: O(log n) per limit to count, plus O(cost log n) to add and
-- O(k log n) to trim k expired members on a spend.

local n = #KEYS
local now = ARGV[2 * n + 2]
if now then
  now = now + 0
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local cost = ARGV[1] + 0
local spend = cost > 0
if not spend then cost = -cost end

local result = { 1, now }
for i = 1, n do
  local limit, window = ARGV[2 * i] + 0, ARGV[2 * i + 1] + 0
  local shadow = limit < 0
  if shadow then limit = -limit end
  local oldest_live = '(' .. string.format('%d', now - window)
  local count = redis.call('ZCOUNT', KEYS[i], oldest_live, '+inf')
  local ok = count + cost <= limit
  local retry, reset = 0, window
  if not ok then
    -- The k-th oldest live unit must age out for cost units to fit.
    local k = count + cost - limit
    local hit = redis.call('ZRANGEBYSCORE', KEYS[i], oldest_live, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
    -- No such unit: the cost exceeds the count (a scale control's), and
    -- never fits under it.
    retry = hit[2] and tonumber(hit[2]) + window - now or window
    if not shadow then result[1] = 0 end
  end
  if ok and spend then
    count = count + cost
  elseif count > 0 then
    local newest = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
    reset = tonumber(newest[2]) + window - now
  else
    reset = 0
  end
  result[4 * i - 1], result[4 * i], result[4 * i + 1], result[4 * i + 2] = ok and 1 or 0, math.max(limit - count, 0), reset, retry
end

if spend and result[1] == 0 then
  -- Nothing is spent: a limit that admitted the cost on its own reports
  -- what a peek would (its live units are count, so remaining gains cost).
  for i = 1, n do
    if result[4 * i - 1] == 1 then
      local newest = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')[2] or 0
      result[4 * i], result[4 * i + 1] = result[4 * i] + cost, math.max(newest + ARGV[2 * i + 1] - now, 0)
    end
  end
elseif spend then
  local stamp = string.format('%d', now)
  for i = 1, n do
    if result[4 * i - 1] == 1 then
      local window = ARGV[2 * i + 1] + 0
      redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', string.format('%d', now - window))
      -- Members are "<now>:<n>"; n continues after any member already at now,
      -- so units admitted in the same microsecond stay distinct.
      local seq = redis.call('ZCOUNT', KEYS[i], stamp, stamp)
      local batch = {}
      for u = seq, seq + cost - 1 do
        batch[#batch + 1] = stamp
        batch[#batch + 1] = stamp .. ':' .. u
        if #batch >= 200 or u == seq + cost - 1 then
          redis.call('ZADD', KEYS[i], unpack(batch))
          batch = {}
        end
      end
      redis.call('PEXPIRE', KEYS[i], math.ceil(window / 1000))
    end
  end
end
return result
