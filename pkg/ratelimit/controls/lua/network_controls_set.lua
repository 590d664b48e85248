-- network_controls_set.lua: writes one field of the hash of network
-- controls (controls_admin.go), within a bound: a network control, or the
-- mirror of an identity control that the instances' control watch reads
-- (control_watch.go). Fields whose control has ended are removed first,
-- of both kinds; the hash expires when the last live control in it ends,
-- so an ended control is gone without anyone cleaning up (readers filter
-- by end in between).
--
-- A network field is a CIDR holding a record, "v1 <kind> <end µs> ...";
-- an identity field is "i:<tag>" holding the end in µs. A field whose
-- value does not read so is kept and counted (readers skip it, or watch
-- its identity, and say so; only lifting it, or the hash's expiry, removes
-- it): the bound holds whatever the hash contains. The bound counts the
-- fields of ARGV[2]'s kind only; the overflow field (ARGV[6]) is not
-- counted.
--
-- A new network past the bound is refused. A new identity past it is not
-- (its control is bounded by the index, control_index_set.lua): its end is
-- written instead to the one overflow field ARGV[6], "i:*", which holds
-- the latest end of every control so mirrored (a later end extends it, an
-- earlier one leaves it; no lift shortens it). Readers in which that field
-- is live read every identity's control key until its end, so no control
-- is missed, and the hash holds at most ARGV[5] + 1 identity fields. A
-- field already present is rewritten in place, and a new one takes a
-- freed place, even while the overflow field is live.
--
-- KEYS[1]  the hash.
-- ARGV[1]  now, Unix µs: controls that end at or before it are removed.
-- ARGV[2]  the field (a network's canonical CIDR, or "i:<tag>").
-- ARGV[3]  the value (a record, or the end in Unix µs).
-- ARGV[4]  the control's end, Unix ms, rounded up.
-- ARGV[5]  the most live fields of ARGV[2]'s kind allowed.
-- ARGV[6]  the overflow field, "i:*".
--
-- Returns {live fields of that kind after the write, 0}, or
-- {live fields, 1} when an identity's end went to the overflow field, or
-- {-1, live} when a network is new and the hash already holds ARGV[5]
-- live networks (nothing written).
--
-- Complexity: O(N), N the fields: HGETALL. N is bounded by the bounds of
-- both kinds, plus the overflow field.
local now = tonumber(ARGV[1])
local overflowField = ARGV[6]
local identity = string.sub(ARGV[2], 1, 2) == 'i:'
local fields = redis.call('HGETALL', KEYS[1])
local live, present = 0, false
local last = tonumber(ARGV[4])
local overflowValue
for i = 1, #fields, 2 do
  local name, value = fields[i], fields[i + 1]
  local mine = string.sub(name, 1, 2) == 'i:'
  local ends
  if mine then
    ends = tonumber(string.match(value, '^(%d+)$'))
  else
    ends = tonumber(string.match(value, '^v1 %a (%d+) '))
  end
  if ends and ends <= now then
    redis.call('HDEL', KEYS[1], name)
  else
    if name == overflowField then
      overflowValue = value
    elseif mine == identity then
      live = live + 1
    end
    if name == ARGV[2] then
      present = true
    elseif ends and math.floor((ends + 999) / 1000) > last then
      last = math.floor((ends + 999) / 1000)
    end
  end
end
local field, value, overflowed = ARGV[2], ARGV[3], 0
if not present and live >= tonumber(ARGV[5]) then
  if not identity then
    return {-1, live}
  end
  field, overflowed = overflowField, 1
  -- Extend, never shorten: an unreadable value is replaced (it is
  -- malformed, and readers already read every control key for it).
  local held = overflowValue and tonumber(string.match(overflowValue, '^(%d+)$'))
  if held and held > tonumber(value) then
    value = overflowValue
  end
end
redis.call('HSET', KEYS[1], field, value)
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', last))
if not present and overflowed == 0 then
  live = live + 1
end
return {live, overflowed}
