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

-- pending[i]: when limit i admits the cost, its bucket b, counts, stored
-- length and reset after a spend.
local result, pending = { 1, now }, {}
for i = 1, n do
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
      local d = math.max(b - tonumber(si), 0)
      for c in string.gmatch(list, '%d+') do
        if d > K then break end
        counts[d + 1] = counts[d + 1] + tonumber(c)
        d = d + 1
      end
    end
  end
  local sum_b = 0
  for d = 1, K do sum_b = sum_b + counts[d] end
  local sum_a = sum_b + counts[K + 1]

  -- (A), then (B): the units of buckets b-K+1 .. b and cost, plus those of
  -- bucket b-K weighted by the left/len of the rolling window it still
  -- overlaps, within count.
  local ok = sum_a + cost <= cap_a and (sum_b + cost) * len + counts[K + 1] * left <= limit * len
  local retry = 0
  if not ok then
    if not shadow then result[1] = 0 end
    -- In bucket b+j (j >= 0), (A) sees buckets b-K+j .. b of what is
    -- stored (a units), (B) sees b-K+1+j .. b in full (a - old) and b-K+j
    -- (old) weighted: the first instant in it at which both admit cost.
    for j = 0, K + 1 do
      local a, old = 0, counts[K - j + 1] or 0
      for d = 1, K - j + 1 do a = a + counts[d] end
      local room = limit - (a - old) - cost
      if a + cost <= cap_a and room >= 0 then
        local start, to = edge(wi, sub, window, j), edge(wi, sub, window, j + 1)
        local t = math.max(start, now)
        -- Otherwise (B) admits once old * (to - t) <= room * (to - start).
        if room < old then t = math.max(t, to - math.floor(room * (to - start) / old)) end
        retry = t - now
        break
      end
    end
  end

  -- The reply is a peek's: a denied request spends nothing (see below).
  local remaining = math.min(limit - sum_b - math.ceil(counts[K + 1] * left / len), cap_a - sum_a)
  -- The newest non-empty bucket b-d leaves (A) at the start of b-d+K+1;
  -- the stored list ends at the oldest.
  local newest, last = nil, 0
  for d = K + 1, 1, -1 do
    if counts[d] > 0 then
      newest = d
      if last == 0 then last = d end
    end
  end
  local reset = newest and edge(wi, sub, window, K + 2 - newest) - now or 0
  result[4 * i - 1], result[4 * i], result[4 * i + 1], result[4 * i + 2] = ok and 1 or 0, math.max(remaining, 0), reset, retry
  if ok then pending[i] = { b, counts, math.max(last, 1), edge(wi, sub, window, K + 1) - now } end
end

if spend and result[1] == 1 then
  -- Admitted: each limit that admits the cost on its own spends it in
  -- bucket b, which then leaves (A) last, and reports what it has left.
  for i = 1, n do
    local p = pending[i]
    if p then
      local counts = p[2]
      counts[1] = counts[1] + cost
      result[4 * i], result[4 * i + 1] = result[4 * i] - cost, p[4]
      for d = 1, p[3] do counts[d] = string.format('%d', counts[d]) end
      redis.call('SET', KEYS[i], string.format('%d', p[1]) .. ':' .. table.concat(counts, ',', 1, p[3]), 'PX', math.max(math.ceil(p[4] / 1000), 1))
    end
  end
end
return result
