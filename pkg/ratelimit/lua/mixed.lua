-- mixed.lua: one call for the limits of one identity that use different
-- algorithms (a login route's sliding log under a sliding-window tier).
-- Before this part, scripts.go puts every algorithm's script, each wrapped as
--     algorithms[code] = function(KEYS, ARGV) <the script> end
-- with code 1 sliding window, 2 sliding log, 3 GCRA, 4 fixed window, 5
-- sliding buckets. This part runs them, all at one now and in one script,
-- so that no other request comes in between: every group but the last as a
-- peek; when they all admit, the last group as a spend (a group's script
-- spends only when it admits); when that admits too, the other groups as
-- spends. A denial by any group thus spends nothing on any other, and only
-- the groups before the last run twice. Every spend's answer is read: the
-- request is admitted only when every group's spend admitted. (A spend can
-- deny after its peek admitted only if two groups shared a key, which the
-- caller refuses; should it happen, the answer is a denial, and what the
-- earlier spends took stays spent: the stricter side.)
--
-- KEYS      the keys of every group, group after group; one hash tag.
-- ARGV[1]   cost: units this request spends on every limit; negative to
--           peek (never writes) at -cost.
-- ARGV[2]   g, the number of groups; then per group: its algorithm's code,
--           its number of limits k, the number of arguments per limit a,
--           then its k*a limit arguments as its script takes them.
-- ARGV[last] (optional, after the groups) now in microseconds; absent:
--           Redis TIME (production).
--
-- Returns { allowed (1|0), now_us, then per group the reply of its script }.
-- allowed: every enforced limit of every group admits the cost. When the
-- request is denied, every group's reply is one that spent nothing.
--
-- Complexity: that of every group's script, once more for every group but
-- the last on a spend.

local cost = ARGV[1]
local g = ARGV[2] + 0
local groups = {}
local at, first = 3, 1
for i = 1, g do
  local code, k, a = ARGV[at] + 0, ARGV[at + 1] + 0, ARGV[at + 2] + 0
  local keys, args = {}, { cost }
  for j = 1, k do keys[j] = KEYS[first + j - 1] end
  for j = 1, k * a do args[j + 1] = ARGV[at + 2 + j] end
  groups[i] = { algorithms[code], keys, args }
  first = first + k
  at = at + 3 + k * a
end
-- now goes to every group as a number: each script reads its now as
-- ARGV's now + 0, which is then arithmetic, not a conversion per group.
local now = ARGV[at]
if now then
  now = now + 0
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
for i = 1, g do
  local args = groups[i][3]
  args[#args + 1] = now
end

-- run calls group i's script with cost c (a string).
local function run(i, c)
  local grp = groups[i]
  grp[3][1] = c
  return grp[1](grp[2], grp[3])
end

local spend = cost + 0 > 0
local peek = cost
if spend then peek = '-' .. cost end
local reply = { 1, now }
local last = spend and g or g + 1
for i = 1, last - 1 do
  local r = run(i, peek)
  reply[i + 2] = r
  if r[1] ~= 1 then reply[1] = 0 end
end
if last > g then return reply end
if reply[1] ~= 1 then
  reply[g + 2] = run(g, peek)
  return reply
end
local r = run(g, cost)
reply[g + 2] = r
if r[1] ~= 1 then
  reply[1] = 0
  return reply
end
for i = 1, g - 1 do
  r = run(i, cost)
  reply[i + 2] = r
  if r[1] ~= 1 then reply[1] = 0 end
end
return reply
