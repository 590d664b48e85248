-- control_index_lift.lua: removes a lifted control's tag from the index of
-- live controls, only if the index still holds the end of the control that
-- was lifted. A control set again meanwhile (its ZADD came between the
-- lift's GETDEL and this script) moved the score, and its entry stays:
-- a control in force is never dropped from the list.
--
-- KEYS[1]  the index.
-- ARGV[1]  the tag.
-- ARGV[2]  the lifted control's end, Unix ms, as control_index_set.lua
--          scored it.
--
-- Returns {1} when the entry was removed, {0} otherwise.
--
-- Complexity: O(log N).
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return {1}
end
return {0}
