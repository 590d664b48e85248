-- control.lua: the live control of one identity (control.go), read by the
-- identity's own decision script: one round trip, atomic with the decision,
-- in the identity's hash slot.
--
-- scripts.go builds the controlled script as control_read.lua (the
-- record, or nil, and KEYS without the control key), the table algorithms
-- (each algorithm's script as a function of its KEYS and ARGV, by its
-- mixed.lua code), this part, then mixed.lua, which decides. This part
-- only reads the record and changes the decision's inputs: with no record
-- it does nothing, and the script decides as the mixed script does. It
-- sets control, the value mixed.lua appends to its reply.
--
-- KEYS      the decision's keys, then the identity's control key, last.
-- ARGV      mixed.lua's, unchanged (one group, or several).
--
-- Returns, with no control record: exactly the decision's reply. With a
-- record, that reply (or a block's) with one more value at its end, the
-- control: { kind, until_us, factor in thousandths }:
--   kind 0  the record could not be read (what parseControlRecord refuses):
--           ignored, the reply is the decision's as with no record;
--   kind 1  block, in force: the reply is { 0, now_us, control } and no
--           algorithm ran;
--   kind 2  exempt, in force: the decision ran as a peek (nothing spent),
--           its first value set to 1;
--   kind 3  scale, in force: the decision ran with every limit's count
--           scaled (below).
-- A record whose end is not after now is ignored: no extra value.
--
-- Scale: a limit of count c becomes s = floor(c * factor / 1000), at least
-- 1, at most 1,000,000 and at most what keeps count x window exact for its
-- algorithm (as Limit.Validate bounds it: count x window in ms below 2^50
-- for the sliding window, in us for the others but the fixed window); a
-- token bucket's burst is s, a leaky bucket's stays 1; a sliding-window
-- limit whose s x window in us passes 2^50 is decided on the millisecond
-- clock. The keys stay those of c: every algorithm's state records what
-- was spent whatever the count, so the scale only changes the count the
-- decision applies, and a scale set, changed, lifted or ended leaves the
-- caller where its counts say. ARGV's counts are rewritten in place.
--
-- Complexity: one GET with no record (control_read.lua), and nothing
-- else. With one, the decision's own.

if record then
  -- Now, on the decision's clock: ARGV's after the limits (or the groups)
  -- when the caller sent it, else TIME, then sent on to the decision.
  local at
  if #ARGV[2] == 3 then
    -- mixed.lua's pair: 'p' and two codes, then two counts and windows.
    at = 7
  else
    at = 3
    for _ = 1, ARGV[2] + 0 do at = at + 3 + ARGV[at + 1] * ARGV[at + 2] end
  end
  local now = ARGV[at]
  if now then
    now = now + 0
  else
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
    ARGV[at] = string.format('%d', now)
  end

  -- The record: v1 <b|e|s> <until us> <factor thousandths> <metadata JSON>,
  -- read as parseControlRecord reads it.
  local kind, until_s, milli_s, meta = string.match(record, '^v1 ([bes]) (%d+) (%d+) (.*)$')
  local valid = kind ~= nil and #until_s <= 16 and #milli_s <= 16
  local milli = valid and milli_s + 0
  if valid and kind == 's' and (milli < 1 or milli > 1000000) then valid = false end
  if valid then
    local ok, m = pcall(cjson.decode, meta)
    -- An object or null: cjson reads [] as {}, so look at the text.
    if ok and type(m) == 'table' and string.match(meta, '^[ \t\n\r]*{') then
      for _, f in ipairs({ 'reason', 'by' }) do
        local v = m[f]
        if v ~= nil and v ~= cjson.null and type(v) ~= 'string' then ok = false end
      end
      local a = m.at
      if a ~= nil and a ~= cjson.null and (type(a) ~= 'number' or a ~= math.floor(a)) then ok = false end
    elseif not (ok and m == cjson.null) then
      ok = false
    end
    valid = ok
  end
  if not valid then
    control = { 0, 0, 0 }
  else
    local until_us = until_s + 0
    if until_us <= now then
      -- Ended: ignored, no extra value.
    elseif kind == 'b' then
      return { 0, now, { 1, until_us, 0 } }
    elseif kind == 'e' then
      if string.sub(ARGV[1], 1, 1) ~= '-' then ARGV[1] = '-' .. ARGV[1] end
      control = { 2, until_us, 0 }
    else
      -- scale rewrites the count (and the window, the burst) of the limit
      -- whose arguments start at ARGV[j], of algorithm code.
      local function scale(code, j)
        local c, w = ARGV[j] + 0, ARGV[j + 1] + 0
        local shadow = c < 0
        if shadow then c = -c end
        local wus = w
        if w < 0 then wus = -w * 1000 end
        local s = math.floor(c * milli / 1000)
        if s < 1 then s = 1 elseif s > 1000000 then s = 1000000 end
        if code == '1' then
          s = math.min(s, math.floor(1125899906842624 / (wus / 1000)))
          if s > math.floor(1125899906842624 / wus) then w = -(wus / 1000) else w = wus end
        elseif code ~= '4' then
          s = math.min(s, math.floor(1125899906842624 / wus))
        end
        ARGV[j], ARGV[j + 1] = shadow and -s or s, w
        if code == '3' then ARGV[j + 2] = s end
      end
      if #ARGV[2] == 3 then
        scale(string.sub(ARGV[2], 2, 2), 3)
        scale(string.sub(ARGV[2], 3, 3), 5)
      else
        local j = 3
        for _ = 1, ARGV[2] + 0 do
          local code, k, a = ARGV[j], ARGV[j + 1] + 0, ARGV[j + 2] + 0
          for i = 0, k - 1 do scale(code, j + 3 + i * a) end
          j = j + 3 + k * a
        end
      end
      control = { 3, until_us, milli }
    end
  end
end
