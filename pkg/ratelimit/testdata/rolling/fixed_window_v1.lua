-- fixed_window.lua: the fixed-window counter, kept as the baseline whose
-- boundary burst the other algorithms fix: up to 2x the limit can pass in a
-- short span that straddles a window edge.
--
-- Each limit keeps ONE string key "<window index>:<count>", expiring when its
-- window ends. Windows are aligned to multiples of the window length.
--
-- KEYS[i]   one key per limit; all share one hash tag (one cluster slot).
-- ARGV[1]   now in microseconds, or "" to read Redis TIME (production).
-- ARGV[2]   "1" to spend when every limit admits, "0" to peek (never writes).
-- ARGV[3]   cost: units this request spends on every limit.
-- ARGV[4+3(i-1)], ARGV[5+3(i-1)], ARGV[6+3(i-1)]
--           limit i: count, window in microseconds, burst (unused here).
--
-- Returns { allowed (1|0), now_us, then per limit: allowed (1|0), remaining,
--           reset_after_us, retry_after_us }.
-- Nothing is written unless every limit admits and ARGV[2] is "1".
--
-- Complexity: O(number of limits).

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local spend = ARGV[2] == '1'
local cost = tonumber(ARGV[3])

local result = { 1, now }
local pending = {}
local all_ok = true

for i = 1, #KEYS do
  local base = 3 + (i - 1) * 3
  local limit = tonumber(ARGV[base + 1])
  local window = tonumber(ARGV[base + 2])
  local index = math.floor(now / window)
  local left = window - (now - index * window)

  local count = 0
  local stored = redis.call('GET', KEYS[i])
  if stored then
    local si, sc = string.match(stored, '^(%d+):(%d+)$')
    if si and tonumber(si) == index then
      count = tonumber(sc)
    end
  end

  local ok = count + cost <= limit
  local retry = 0
  if not ok then
    retry = left
    all_ok = false
  end
  local after = count
  if ok and spend then after = count + cost end
  local remaining = limit - after
  if remaining < 0 then remaining = 0 end
  local reset = 0
  if after > 0 then reset = left end

  result[#result + 1] = ok and 1 or 0
  result[#result + 1] = remaining
  result[#result + 1] = reset
  result[#result + 1] = retry
  pending[i] = { index, after, left }
end

if not all_ok then
  result[1] = 0
elseif spend then
  for i = 1, #KEYS do
    local p = pending[i]
    redis.call('SET', KEYS[i], string.format('%d:%d', p[1], p[2]), 'PX', math.ceil(p[3] / 1000))
  end
end
return result
