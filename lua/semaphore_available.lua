-- Read a semaphore's available permits, putting back first the leased permits whose lease
-- ran out, as Redisson's availablePermits does (and publishing the count when it did).
-- KEYS[1] the permits, a string
-- KEYS[2] the leased permits, a zset id -> when it runs out
-- KEYS[3] the semaphore's channel, redisson_sc:{<name>}
-- ARGV[1] the publish command
-- Returns the permits available (0 when there is no key). A key that is not a whole number
-- is refused with WRONGTYPE, and a count beyond 2^53-1 either way with RANGE (count.lua),
-- before anything is written.

local avail, err = exact(KEYS[1])
if err then return err end
if redis.call('exists', KEYS[2]) == 0 then return avail end
local back = reclaim(KEYS[1], KEYS[2], clock())
if back > 0 then
  avail = avail + back
  if avail > 0 then redis.call(ARGV[1], KEYS[3], avail) end
end
return avail
