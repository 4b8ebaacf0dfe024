-- Release one hold of a reentrant lock: compare-and-decrement against the hold count the
-- client expects (expect.lua), so that a release sent again after its reply was lost never
-- releases a newer hold of the same owner.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's channel
-- KEYS[3] the lock's wake registry (see wake.lua, prepended)
-- ARGV[1] the message to publish on release ("0"); "" publishes nothing and wakes nobody (a
--         spin lock, whose waiters look by themselves, as Redisson's RSpinLock)
-- ARGV[2] owner field
-- ARGV[3] the owner's hold count as the client knows it before this release; "" when the
--         client knows of no hold (then one hold is released whatever the count)
-- ARGV[4] the publish command: "publish", or "spublish" under sharded pub/sub
-- Returns nil when the owner does not hold the lock with that count, 0 when it still holds
-- it (re-entered, or this release already ran), 1 when the lock was released, 3 when the
-- release already ran or the hold was lost (see expect.lua, prepended). A read-write lock's
-- hash in which the owner's field counts holds (a reader's) is refused with WRONGTYPE and
-- left as it is.
--
-- The last hold's release writes nothing before the wake-up, whose first command reads
-- the registry: a registry of another type fails the script there, with the lock still
-- held. (The messages go out before the lock is deleted, but nobody can act on them
-- before the script has run to its end.)
local last, reply = release(KEYS[1], ARGV[2], ARGV[3], true)
if not last then
  return reply
end
if ARGV[1] ~= '' then
  wake(KEYS[3], KEYS[2], ARGV[4], ARGV[1])
end
redis.call('del', KEYS[1])
return 1
