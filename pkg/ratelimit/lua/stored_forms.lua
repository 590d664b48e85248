-- stored_forms.lua: the one function that reads a key written under a
-- scale control (control.lua). scripts.go puts it before the scripts whose
-- state is sized by the count (sliding_window.lua, fixed_window.lua,
-- gcra.lua) and before the controlled scripts, which share it.
--
-- At rest a key of those algorithms holds the algorithm's own form, in the
-- layout of the limit's configured count (the count its key names), or,
-- only when it was last written under a scale of another count, the x form
--     x<count>:<the algorithm's own form, in the layout of that count>
-- The algorithms read the x form only off their hot path: when INCRBY
-- finds no integer (the counters' spend), when GET finds no number (the
-- counters' peek), or when GET finds no "<us>:<fraction>" (GCRA).
--
-- import_form(kind, raw, c, index[, key, incr])
--   kind   1 sliding window, 2 fixed window, 3 GCRA.
--   raw    the key's value.
--   c      the count the caller decides with: the layout wanted.
--   index  the counters: the window index of now (floor(now_us /
--          window_us)); GCRA: now, in microseconds.
-- Returns nil when raw is not an x form (not ours: the caller replaces it
-- as it always did). Otherwise, for the counters, the same state as an
-- integer in count c's layout for window index: the previous and current
-- counts, each capped at c, which is all c's layout holds (a caller over
-- the limit stays over it: the strictest reading that fits), keeping the
-- window the state belongs to (and with it the key's TTL); 0 when the state
-- is from a window too old to count. For GCRA the theoretical arrival time
-- as su, sf (microseconds and a fraction in 1/c) that leaves the same
-- units outstanding: the backlog B = (TAT - now) * count, in units of
-- 1/count us, is B/window units whatever the count, so it is kept as it is
-- and only re-encoded (exact, no rounding); a TAT already passed is 0, 0.
-- With key and incr (a counter's spend whose INCRBY failed), the integer is
-- stored back keeping the key's TTL and INCRBY incr done again: the reply
-- is INCRBY's, or false when there is nothing to import (the caller then
-- rewrites the key as for a foreign value; a stale state is one).
-- With key, for GCRA (any call, a peek's or a denial's too), the TAT is
-- stored back in c's form with gcra.lua's TTL: an x form left in place
-- would go on draining at its own count's rate.
--
-- Every product stays below 2^53: counts are at most 1,000,000.
--
-- Complexity: O(1).

local function import_form(kind, raw, c, index, key, incr)
  if type(raw) ~= 'string' then return nil end
  local l, inner = string.match(raw, '^x(%d+):(.+)$')
  if not l then return nil end
  l = l + 0
  if kind == 3 then
    local su, sf = string.match(inner, '^(%d+):(%d+)$')
    if not su then return nil end
    local b = (su - index) * l + sf
    if b <= 0 then
      if key then redis.call('DEL', key) end
      return 0, 0
    end
    sf = b % c
    su = (b - sf) / c
    if key then
      redis.call('SET', key, string.format('%d:%d', index + su, sf), 'PX', math.ceil((su + 1) / 1000))
    end
    return index + su, sf
  end
  local s = tonumber(inner)
  if not s then return nil end
  local out = 0
  if kind == 1 then
    -- S = (tag * P + previous) * M + current, M = 2l+1, P = l+1
    local m = 2 * l + 1
    local pm = (l + 1) * m
    local period = 9007199254740992 / pm
    period = period - period % 1
    local old = s % pm
    local d = (index - (s - old) / pm) % period
    if d <= 1 then
      local current = old % m
      local previous = (old - current) / m
      local m2 = 2 * c + 1
      local pm2 = (c + 1) * m2
      local period2 = 9007199254740992 / pm2
      period2 = period2 - period2 % 1
      out = ((index - d) % period2) * pm2 + math.min(previous, c) * m2 + math.min(current, c)
    end
  else
    -- S = tag * M + count, M = 2l+1
    local m = 2 * l + 1
    local period = 9007199254740992 / m
    period = period - period % 1
    local v = s - (index % period) * m
    if v >= 0 and v < m then
      local m2 = 2 * c + 1
      local period2 = 9007199254740992 / m2
      period2 = period2 - period2 % 1
      out = (index % period2) * m2 + math.min(v, c)
    end
  end
  if not key then return out end
  if out <= 0 then return false end
  redis.call('SET', key, out, 'KEEPTTL')
  return redis.call('INCRBY', key, incr)
end
