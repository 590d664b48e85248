-- mixed.lua: one call for the limits of one identity that use different
-- algorithms (a login route's sliding log under a sliding-window tier).
-- Before this part, scripts.go puts the table algorithms: by code (a
-- string: '1' sliding window, '2' sliding log, '3' GCRA, '4' fixed window,
-- '5' sliding buckets, '6' GCRA again for the leaky bucket), the
-- algorithm's script as a function of its KEYS and ARGV, each script once;
-- and control, nil, or (the controlled script, control.lua) the identity's
-- control, appended to the reply.
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
--           limit arguments as its script takes them. Or the pair, two
--           groups of one limit of two arguments each: 'p' and the two
--           codes (the login path: 'p12'), then group 1's two limit
--           arguments, then group 2's.
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
-- Complexity: that of every group's script, twice (a peek, then the
-- spend) for every group but one on an admitted spend.

local cost = ARGV[1]
local g = ARGV[2]
-- groups: three slots a group, its code, KEYS and ARGV (now last).
local groups, at = {}, 3
if #g == 3 then
  -- The pair: 'p' and two codes, then each group's count and window.
  groups = { string.sub(g, 2, 2), { KEYS[1] }, { cost, ARGV[3], ARGV[4], false },
    string.sub(g, 3, 3), { KEYS[2] }, { cost, ARGV[5], ARGV[6], false } }
  g, at = 2, 7
else
  g = g + 0
  local first = 1
  for i = 1, 3 * g, 3 do
    local k, n = ARGV[at + 1] + 0, ARGV[at + 1] * ARGV[at + 2]
    local args = { cost, unpack(ARGV, at + 3, at + 2 + n) }
    args[n + 2] = false
    groups[i], groups[i + 1], groups[i + 2] = ARGV[at], { unpack(KEYS, first, first + k - 1) }, args
    first, at = first + k, at + 3 + n
  end
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

-- run decides group i with ARGV[1] = c (the cost, or its peek).
local function run(i, c)
  local args = groups[3 * i]
  args[1] = c
  return algorithms[groups[3 * i - 2]](groups[3 * i - 1], args)
end

local reply, allowed = {}, 1
if string.sub(cost, 1, 1) == '-' then
  for i = 1, g do
    reply[i] = run(i, cost)
    if reply[i][1] ~= 1 then allowed = 0 end
  end
else
  local peek, first = '-' .. cost, g
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
  if allowed == 1 then
    for i = 1, g do
      if i ~= first then
        reply[i] = run(i, cost)
        if reply[i][1] ~= 1 then allowed = 0 end
      end
    end
  end
end

local out, n = { allowed, now }, 2
for i = 1, g do
  local r = reply[i]
  for j = 1, #r do out[n + j] = r[j] end
  n = n + #r
end
if control then
  -- control.lua's: an exemption admits what its peek found.
  if control[1] == 2 then out[1] = 1 end
  out[#out + 1] = control
end
return out
