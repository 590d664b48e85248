-- control_read.lua: the start of every controlled script (control.lua):
-- reads the identity's control key, the last of KEYS, and takes it off
-- KEYS, so that the decision sees its own keys only. With no record this
-- GET is all that a controlled decision costs beyond the plain one.
local nk = #KEYS
local record = redis.call('GET', KEYS[nk])
KEYS[nk] = nil
