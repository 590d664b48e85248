-- plan_key.lua: a measurement prototype, not used by slidegate. One key per
-- plan of three sliding-window limits (20/1s, 600/1m, 10000/24h), read
-- with GET and written back whole with one SET ... PX when the request is
-- admitted; the three limits' window index, previous and current counts
-- are packed with Redis's struct library. It decides as sliding_window.lua
-- does (same estimate), without the tag, the shadow and long-limit forms,
-- the scale controls' import or a rolling-deploy import, and with a
-- constant two-day expiry: it shows what the layout itself costs Redis,
-- against one limit's sliding_window.lua and the three-key floor
-- (plan_key.cases). KEYS[1] the plan's key; ARGV[1] the cost.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local cost = 1
if ARGV[1] ~= '1' then cost = ARGV[1] + 0 end
local raw = redis.call('GET', KEYS[1])
local i1, p1, c1, i2, p2, c2, i3, p3, c3 = 0, 0, 0, 0, 0, 0, 0, 0, 0
if raw then i1, p1, c1, i2, p2, c2, i3, p3, c3 = struct.unpack('>I4I2I2I4I2I2I4I2I2', raw) end
local e1 = now % 1000000
local x1 = (now - e1) / 1000000
if x1 ~= i1 then
  if x1 == i1 + 1 then p1 = c1 else p1 = 0 end
  c1, i1 = 0, x1
end
local e2 = now % 60000000
local x2 = (now - e2) / 60000000
if x2 ~= i2 then
  if x2 == i2 + 1 then p2 = c2 else p2 = 0 end
  c2, i2 = 0, x2
end
local ms = (now - now % 1000) / 1000
local e3 = ms % 86400000
local x3 = (ms - e3) / 86400000
if x3 ~= i3 then
  if x3 == i3 + 1 then p3 = c3 else p3 = 0 end
  c3, i3 = 0, x3
end
local a1 = p1 * (1000000 - e1) + (c1 + cost) * 1000000 <= 20000000
local a2 = p2 * (60000000 - e2) + (c2 + cost) * 60000000 <= 36000000000
local a3 = p3 * (86400000 - e3) + (c3 + cost) * 86400000 <= 864000000000
if a1 and a2 and a3 then
  redis.call('SET', KEYS[1], struct.pack('>I4I2I2I4I2I2I4I2I2', i1, p1, c1 + cost, i2, p2, c2 + cost, i3, p3, c3 + cost), 'PX', '172800000')
  return { 1, now, p1 * 41 + c1, p2 * 1201 + c2, p3 * 20001 + c3 }
end
return { 0, now, p1 * 41 + c1, p2 * 1201 + c2, p3 * 20001 + c3 }
