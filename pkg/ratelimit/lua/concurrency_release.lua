-- concurrency_release.lua: gives back one slot taken by
-- concurrency_acquire.lua.
--
-- Only the slot of this token is removed: tokens are random and unique per
-- acquire, so a release never frees another holder's slot, whatever
-- happened to the set meanwhile. A token that is gone (its lease ended and
-- an acquire cleared it, the key expired, or Redis lost it in a restart or
-- a failover) makes the release a no-op. Removing the last slot removes
-- the key; the key's expiry otherwise stays at the longest lease, which
-- still covers every slot left.
--
-- KEYS[1]   the identity's slot set.
-- ARGV[1]   the slot's token.
--
-- Returns { released (1|0) }: 1 when the token still held a slot (live or
-- expired but not yet cleared), 0 when it was already gone.
--
-- Complexity: O(log(M)), M the set's size.

return { redis.call('ZREM', KEYS[1], ARGV[1]) }
