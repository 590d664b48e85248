-- control_index_set.lua: adds an identity's tag to the index of live
-- controls (controls_admin.go), within a bound, before its record is
-- written. The index is a sorted set of tags scored by each control's end
-- in Unix milliseconds; entries whose end has passed are removed first, so
-- the index never holds more than the controls in force, and the key
-- itself expires when the last of them ends: nobody has to clean up.
--
-- KEYS[1]  the index (no hash tag: one key, one slot).
-- ARGV[1]  now, Unix ms: entries scored at or before it are pruned.
-- ARGV[2]  the tag to add (or whose end to move: one control per identity).
-- ARGV[3]  the control's end, Unix ms (its record's PXAT).
-- ARGV[4]  the most live entries allowed.
--
-- Returns {live entries after the add}, or {-1, live} when the tag is new
-- and the index already holds ARGV[4] live entries (nothing written).
--
-- Complexity: O(log N + M), M the entries pruned.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local live = redis.call('ZCARD', KEYS[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) and live >= tonumber(ARGV[4]) then
  return {-1, live}
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', tonumber(last[2])))
return {redis.call('ZCARD', KEYS[1])}
