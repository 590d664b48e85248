-- mixed.lua: one call for the limits of one identity that use different
-- algorithms (a login route's sliding log under a sliding-window tier).
-- It decides one group too: the fixed window's, and any group of an
-- identity that may hold a live control (the controlled script).
-- Before this part, scripts.go puts the table algorithms: by code (a
-- string: '1' sliding window, '2' sliding log, '3' GCRA, '4' fixed window,
-- '5' sliding buckets, '6' GCRA again for the leaky bucket), the
-- algorithm's script as a function of its KEYS and ARGV, each script once;
-- and record, nil, or in the controlled script the identity's control
-- record, which control_read.lua read (below: Live control).
--
-- Every group is decided before anything is written: every group but one
-- runs as a peek (which never writes); only when they all admit does that
-- one spend (a group's script spends only when it admits), and only when
-- it admits do the others spend. All run at one now in one script, so
-- nothing comes in between and a spend after an admitting peek on the
-- same state admits too (keys are never shared: the caller refuses two
-- checks on one key; should it happen, the answer is a denial and what the
-- earlier spends took stays spent, the stricter side). No journal, no
-- undo: a denial by any group spends nothing anywhere. The group spent
-- first is the last that is not a counter (whose peek would cost as much
-- as its spend), else the last group; a counter's reply is the same for a
-- spend as for a peek.
--
-- KEYS      the keys of every group, group after group; one hash tag.
-- ARGV[1]   cost: units this request spends on every limit; negative to
--           peek (never writes) at -cost.
-- ARGV[2]   g, the number of groups (one digit: a group is one
--           algorithm's); then per group: its algorithm's code, its number
--           of limits k, the number of arguments per limit a, then its k*a
--           limit arguments as its script takes them.
-- ARGV[last] (optional, after the groups) now in microseconds; absent:
--           Redis TIME (production).
--
-- Returns { allowed (1|0), now_us, then the reply of every group's script,
-- group after group, each whole, flat in the one array }: a reply's length
-- is known from its algorithm and its number of limits (2 + k for the
-- counters, 2 + 4k for the others). allowed: every enforced limit of every
-- group admits the cost. When the request is denied, every group's reply
-- is one that spent nothing. (Flat: Redis pays for every array of a
-- reply, a nested one about a quarter of a redis.call.)
--
-- Live control (control.go): the controlled script sends the identity's
-- control key as the last of KEYS, which control_read.lua reads into
-- record and takes off KEYS. With no record, the reply is the one above.
-- With a record, it ends with one more value, the control: { kind,
-- until_us, factor in thousandths }:
--   kind 0  the record could not be read (what parseControlRecord refuses):
--           ignored, the reply is the decision's as with no record;
--   kind 1  block, in force: the reply is { 0, now_us, control } and no
--           algorithm ran;
--   kind 2  exempt, in force: the decision ran as a peek (nothing spent),
--           its first value set to 1;
--   kind 3  scale, in force: the decision ran with every limit's count
--           scaled (below).
-- A record whose end is not after now is ignored: no extra value.
-- Scale: a limit of count c becomes s = floor(c * factor / 1000), at least
-- 1, at most 1,000,000 and at most what keeps count x window exact for its
-- algorithm (as Limit.Validate bounds it: count x window in ms below 2^50
-- for the sliding window, in us for the others but the fixed window); a
-- token bucket's burst is s, a leaky bucket's stays 1; a sliding-window
-- limit whose s x window in us passes 2^50 is decided on the millisecond
-- clock. The keys stay those of c: every algorithm's state records what
-- was spent whatever the count, so a scale set, changed, lifted or ended
-- leaves the caller where its counts say.
--
-- Complexity: that of every group's script, twice (a peek, then the
-- spend) for every group but one on an admitted spend; a record costs one
-- GET (control_read.lua) and its reading.

local cost = ARGV[1]
local g = ARGV[2]
-- groups: three slots a group, its code, KEYS and ARGV (now last).
local groups, at, first = {}, 3, 1
g = g + 0
for i = 1, 3 * g, 3 do
  local k, n = ARGV[at + 1] + 0, ARGV[at + 1] * ARGV[at + 2]
  local args = { cost, unpack(ARGV, at + 3, at + 2 + n) }
  args[n + 2] = false
  groups[i], groups[i + 1], groups[i + 2] = ARGV[at], { unpack(KEYS, first, first + k - 1) }, args
  first, at = first + k, at + 3 + n
end
local now = ARGV[at]
if now then
  now = now + 0
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
for i = 3, 3 * g, 3 do
  local args = groups[i]
  args[#args] = now
end

-- The record: v1 <b|e|s> <until us> <factor thousandths> <metadata JSON>,
-- read as parseControlRecord reads it.
local control
if record then
  local kind, until_s, milli_s, meta = string.match(record, '^v1 ([bes]) (%d+) (%d+) (.*)$')
  local valid = kind ~= nil and #until_s <= 16 and #milli_s <= 16
  local milli = valid and milli_s + 0
  if valid and kind == 's' and (milli < 1 or milli > 1000000) then valid = false end
  if valid then
    local ok, m = pcall(cjson.decode, meta)
    -- An object or null: cjson reads [] as {}, so look at the text.
    if ok and type(m) == 'table' and string.match(meta, '^[ \t\n\r]*{') then
      -- reason and by strings, at an integer, each when present.
      for f, want in pairs({ reason = 'string', by = 'string', at = 'number' }) do
        local v = m[f]
        if v ~= nil and v ~= cjson.null and (type(v) ~= want or f == 'at' and v ~= math.floor(v)) then ok = false end
      end
    elseif not (ok and m == cjson.null) then
      ok = false
    end
    valid = ok
  end
  local until_us = valid and until_s + 0
  if not valid then
    control = { 0, 0, 0 }
  elseif until_us <= now then
    -- Ended: ignored, no extra value.
  elseif kind == 'b' then
    return { 0, now, { 1, until_us, 0 } }
  elseif kind == 'e' then
    if string.sub(cost, 1, 1) ~= '-' then cost = '-' .. cost end
    control = { 2, until_us, 0 }
  else
    -- Every limit's count (and a long limit's window, a token bucket's
    -- burst) in its group's arguments: count at args[j], window at
    -- args[j + 1], the GCRA's burst at args[j + 2].
    for i = 1, g do
      local code, args = groups[3 * i - 2], groups[3 * i]
      local stride = (code == '3' or code == '6') and 3 or 2
      for j = 2, #args - 1, stride do
        local c, w = args[j] + 0, args[j + 1] + 0
        local wus = w < 0 and -w * 1000 or w
        local s = math.max(1, math.min(math.floor(math.abs(c) * milli / 1000), 1000000))
        if code == '1' then
          s = math.min(s, math.floor(1125899906842624 / (wus / 1000)))
          w = s > math.floor(1125899906842624 / wus) and -(wus / 1000) or wus
        elseif code ~= '4' then
          s = math.min(s, math.floor(1125899906842624 / wus))
        end
        args[j], args[j + 1] = c < 0 and -s or s, w
        if code == '3' then args[j + 2] = s end
      end
    end
    control = { 3, until_us, milli }
  end
end

-- run decides group i with ARGV[1] = c (the cost, or its peek).
local function run(i, c)
  local args = groups[3 * i]
  args[1] = c
  return algorithms[groups[3 * i - 2]](groups[3 * i - 1], args)
end

-- A peek request runs every group as a peek, once.
local reply, allowed = {}, 1
local peek, first = string.sub(cost, 1, 1) == '-' and cost or '-' .. cost, g
for i = g, 1, -1 do
  local code = groups[3 * i - 2]
  if code ~= '1' and code ~= '4' then
    first = i
    break
  end
end
for i = 1, g do
  if i ~= first then
    reply[i] = run(i, peek)
    if reply[i][1] ~= 1 then allowed = 0 end
  end
end
reply[first] = run(first, allowed == 1 and cost or peek)
if reply[first][1] ~= 1 then allowed = 0 end
if allowed == 1 and cost ~= peek then
  for i = 1, g do
    if i ~= first then
      reply[i] = run(i, cost)
      if reply[i][1] ~= 1 then allowed = 0 end
    end
  end
end

local out = { allowed, now }
for i = 1, g do
  for _, v in ipairs(reply[i]) do out[#out + 1] = v end
end
if control then
  -- An exemption admits what its peek found.
  if control[1] == 2 then out[1] = 1 end
  out[#out + 1] = control
end
return out
