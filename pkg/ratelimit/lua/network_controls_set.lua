-- network_controls_set.lua: writes one network control into the hash of
-- network controls (controls_admin.go), within a bound. Fields whose
-- control has ended are removed first; the hash expires when the last
-- live control in it ends, so an ended control is gone without anyone
-- cleaning up (readers filter by end in between).
--
-- A field whose record does not start "v1 <kind> <end µs> " is kept and
-- counted (readers skip it and say so; only lifting it, or the hash's
-- expiry, removes it): the bound holds whatever the hash contains.
--
-- KEYS[1]  the hash: field = the network's CIDR, value = a control record.
-- ARGV[1]  now, Unix µs: controls that end at or before it are removed.
-- ARGV[2]  the field (the network's canonical CIDR).
-- ARGV[3]  the record.
-- ARGV[4]  the record's end, Unix ms, rounded up.
-- ARGV[5]  the most live fields allowed.
--
-- Returns {live fields after the write}, or {-1, live} when the field is
-- new and the hash already holds ARGV[5] live fields (nothing written).
--
-- Complexity: O(N), N the fields: HGETALL. N is bounded by ARGV[5].
local now = tonumber(ARGV[1])
local fields = redis.call('HGETALL', KEYS[1])
local live, present = 0, false
local last = tonumber(ARGV[4])
for i = 1, #fields, 2 do
  local ends = tonumber(string.match(fields[i + 1], '^v1 %a (%d+) '))
  if ends and ends <= now then
    redis.call('HDEL', KEYS[1], fields[i])
  else
    live = live + 1
    if fields[i] == ARGV[2] then
      present = true
    elseif ends and math.floor((ends + 999) / 1000) > last then
      last = math.floor((ends + 999) / 1000)
    end
  end
end
if not present and live >= tonumber(ARGV[5]) then
  return {-1, live}
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', last))
if not present then
  live = live + 1
end
return {live}
