-- control_read.lua: the start of the controlled script, after the table
-- algorithms (scripts.go): reads the identity's control key, the last of
-- KEYS, into record, and takes it off KEYS, so that mixed.lua sees its
-- groups' keys only. With no record this GET is all that a controlled
-- decision costs beyond the plain one.
record = redis.call('GET', KEYS[#KEYS])
KEYS[#KEYS] = nil
