-- sliding_buckets.lua: the sliding-bucket window, a bounded-memory sliding
-- window whose worst case is provable: never more than floor(count*(K+1)/K)
-- units in ANY rolling window (1.1x the limit for K = 10), and never more
-- than count units in any K aligned consecutive buckets (so a burst from
-- idle admits exactly count).
--
-- Time is cut into aligned buckets of window/K; bucket b covers
-- [b*window/K, (b+1)*window/K) microseconds. Each limit keeps ONE string key
-- "<newest bucket index>:<c0>,<c1>,...,<cK>", the units admitted in the newest
-- bucket and the K before it, newest first (trailing zeros omitted). A request
-- of cost n at time now, in bucket b, is admitted when BOTH
--   (B) units in buckets b-K+1 .. b  +  units in bucket b-K * f  + n <= count
--   (A) units in buckets b-K   .. b (K+1 buckets, all in full)  + n
--                                               <= floor(count*(K+1)/K)
-- where f is the share of bucket b-K still inside the rolling window
-- (now-window, now]: the time left in bucket b over the bucket's length.
-- (B) is the sliding-window counter at a granularity of window/K, which keeps
-- it close to the exact log; (A) is what bounds the worst case.
--
-- Why the bound holds: a rolling window (s, s+window] meets at most K+1
-- consecutive buckets. Take any K+1 consecutive buckets j..j+K and the last
-- unit admitted in them, in bucket m. Its check (A) summed buckets m-K..m,
-- which contain j..m, and every unit of j..j+K had been admitted by then
-- (none lies after it). So j..j+K hold at most floor(count*(K+1)/K) units.
-- The same argument with (B) bounds any K consecutive buckets by count.
-- (B) only adds a non-negative term to that sum, so the argument holds for
-- it too. This needs a non-decreasing clock per key; a clock that steps back is
-- treated as the newest stored bucket, which only counts more, never less.
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
-- reset_after: time until every admitted unit has left check (A).
-- retry_after: for a limit that does not admit the cost now, the wait until
--              the first bucket edge at which it would (0 otherwise).
-- allowed (the first value) follows the enforced limits only.
-- Shadow rule: the request is admitted iff every enforced limit admits it.
-- Nothing is written unless it is admitted and the cost is positive; then
-- every enforced limit spends, and every shadow limit that admits the cost on
-- its own spends too (its state is what enforcing it would have left).
--
-- Complexity: O(K * number of limits); one GET per limit, one SET per limit
-- on a spend. Memory: one string of at most K+1 small counters per limit.
-- Products such as units * bucket length stay exact below 2^53, which holds
-- for every count up to 1,000,000 with windows up to a day.

local K = 10

-- Start, in microseconds, of bucket sub+j of window wi (sub + j may pass K).
local function edge(wi, sub, window, j)
  local s = sub + j
  return (wi + math.floor(s / K)) * window + math.ceil((s % K) * window / K)
end

-- Whether (B) admits cost in a bucket of length len with left microseconds
-- to go, given the units of the K-1 buckets before it and this one (sum) and
-- of the bucket K back (old).
local function fits_b(sum, old, cost, limit, len, left)
  return (sum + cost) * len + old * left <= limit * len
end

-- Earliest time, not before from, in the bucket [start, to) at which (B)
-- admits cost, or nil when it does not within that bucket.
local function earliest_b(sum, old, cost, limit, start, to, from)
  local room = limit - sum - cost
  if room < 0 then return nil end
  if room >= old then return from end
  -- old * left <= room * len, with left = to - t
  return math.max(from, to - math.floor(room * (to - start) / old))
end

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

local result = { 1, now }
local pending = {}
local all_ok = true

for i = 1, #KEYS do
  local limit = ARGV[2 * i] + 0
  local shadow = limit < 0
  if shadow then limit = -limit end
  local window = ARGV[2 * i + 1] + 0
  local cap_a = math.floor(limit * (K + 1) / K)

  -- The bucket of now, computed relative to its window so that every
  -- product stays an exact integer.
  local wi = math.floor(now / window)
  local sub = math.floor((now - wi * window) * K / window)
  local b = wi * K + sub

  local here, next_edge = edge(wi, sub, window, 0), edge(wi, sub, window, 1)
  local len, left = next_edge - here, next_edge - now

  -- counts[d + 1] holds the units of bucket b - d, for d = 0..K.
  local counts = {}
  for d = 1, K + 1 do counts[d] = 0 end
  local stored = redis.call('GET', KEYS[i])
  if stored then
    local si, list = string.match(stored, '^(%d+):([%d,]*)$')
    if si then
      local shift = b - tonumber(si)
      if shift < 0 then shift = 0 end
      local d = shift
      for c in string.gmatch(list, '%d+') do
        if d > K then break end
        counts[d + 1] = counts[d + 1] + tonumber(c)
        d = d + 1
      end
    end
  end

  local sum_b, sum_a = 0, 0
  for d = 1, K do sum_b = sum_b + counts[d] end
  sum_a = sum_b + counts[K + 1]

  local ok = sum_a + cost <= cap_a and fits_b(sum_b, counts[K + 1], cost, limit, len, left)
  local retry = 0
  if not ok then
    if not shadow then all_ok = false end
    -- In bucket b+j (j >= 0), (A) sees buckets b-K+j .. b of what is
    -- stored, (B) sees b-K+1+j .. b in full and b-K+j weighted.
    for j = 0, K + 1 do
      local a, bb = 0, 0
      for d = 0, K - j do
        a = a + counts[d + 1]
        if d <= K - 1 - j then bb = bb + counts[d + 1] end
      end
      local old = 0
      if K - j >= 0 then old = counts[K - j + 1] end
      if a + cost <= cap_a then
        local start, to = edge(wi, sub, window, j), edge(wi, sub, window, j + 1)
        local t = earliest_b(bb, old, cost, limit, start, to, math.max(start, now))
        if t then
          retry = t - now
          break
        end
      end
    end
  end

  -- The reply is a peek's: a denied request spends nothing (see below).
  local remaining = math.min(limit - sum_b - math.ceil(counts[K + 1] * left / len), cap_a - sum_a)
  if remaining < 0 then remaining = 0 end

  -- The newest non-empty bucket b-d leaves (A) at the start of b-d+K+1.
  local reset = 0
  local last = 0
  for d = 0, K do
    if counts[d + 1] > 0 then
      reset = edge(wi, sub, window, K + 1 - d) - now
      break
    end
  end
  for d = K + 1, 1, -1 do
    if counts[d] > 0 then last = d break end
  end

  result[#result + 1] = ok and 1 or 0
  result[#result + 1] = remaining
  result[#result + 1] = reset
  result[#result + 1] = retry
  pending[i] = ok and { b, counts, math.max(last, 1), edge(wi, sub, window, K + 1) - now }
end

if not all_ok then
  result[1] = 0
elseif spend then
  -- Admitted: each limit that admits the cost on its own spends it in
  -- bucket b, which then leaves (A) last, and reports what it has left.
  for i = 1, #KEYS do
    local p = pending[i]
    if p then
      p[2][1] = p[2][1] + cost
      result[4 * i], result[4 * i + 1] = result[4 * i] - cost, p[4]
      local parts = {}
      for d = 1, p[3] do parts[d] = string.format('%d', p[2][d]) end
      local ttl_ms = math.ceil(p[4] / 1000)
      if ttl_ms < 1 then ttl_ms = 1 end
      redis.call('SET', KEYS[i], string.format('%d', p[1]) .. ':' .. table.concat(parts, ','), 'PX', ttl_ms)
    end
  end
end
return result
