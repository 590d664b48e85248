-- sliding_window.lua: the approximated sliding-window counter.
--
-- Each limit keeps ONE string key "<window index>:<current count>:<previous count>".
-- The estimate at time now is
--     previous * (window - elapsed) / window + current
-- where elapsed is the time since the current window began: the previous
-- window is weighted by how much of it still overlaps the rolling window that
-- ends now. All arithmetic is scaled by the window length, so it stays in
-- exact integers (every product is below 2^53).
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
-- reset_after: time until the counter would be empty with no more traffic.
-- retry_after: for a limit that does not admit the cost now, the smallest
--              wait after which it would (0 otherwise).
-- Nothing is written unless every limit admits and ARGV[2] is "1".
--
-- Complexity: O(number of limits); one GET per limit, one SET per limit on
-- a spend.

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
  local elapsed = now - index * window
  local left = window - elapsed

  local current, previous = 0, 0
  local stored = redis.call('GET', KEYS[i])
  if stored then
    local si, sc, sp = string.match(stored, '^(%d+):(%d+):(%d+)$')
    if si then
      si = tonumber(si)
      if si == index then
        current, previous = tonumber(sc), tonumber(sp)
      elseif si == index - 1 then
        previous = tonumber(sc)
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
    all_ok = false
  end

  local after = used
  if ok and spend then after = used + cost * window end
  local remaining = math.floor((capacity - after) / window)
  if remaining < 0 then remaining = 0 end

  local new_current = current
  if ok and spend then new_current = current + cost end
  local reset = 0
  if new_current > 0 then
    reset = left + window
  elseif previous > 0 then
    reset = left
  end

  result[#result + 1] = ok and 1 or 0
  result[#result + 1] = remaining
  result[#result + 1] = reset
  result[#result + 1] = retry
  pending[i] = { index, new_current, previous, left + window }
end

if not all_ok then
  result[1] = 0
elseif spend then
  for i = 1, #KEYS do
    local p = pending[i]
    local ttl_ms = math.ceil(p[4] / 1000)
    redis.call('SET', KEYS[i], string.format('%d:%d:%d', p[1], p[2], p[3]), 'PX', ttl_ms)
  end
end
return result
