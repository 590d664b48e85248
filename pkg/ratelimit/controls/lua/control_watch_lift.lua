-- control_watch_lift.lua: removes a lifted identity control's field from
-- the hash of network controls (network_controls_set.lua), only if it
-- still holds the end of the control that was lifted. A control set again
-- meanwhile wrote its own end, and its field stays: a control in force is
-- never dropped from the instances' watch.
--
-- A control mirrored in the overflow field "i:*" (network_controls_set.lua)
-- has no field of its own, and nothing is removed: lifting never shortens
-- the overflow field, whose end is the latest of every control it stands
-- for, none of which is listed there.
--
-- KEYS[1]  the hash.
-- ARGV[1]  the field, "i:<tag>".
-- ARGV[2]  the lifted control's end, Unix µs.
--
-- Returns {1} when the field was removed, {0} otherwise.
--
-- Complexity: O(1).
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return {1}
end
return {0}
