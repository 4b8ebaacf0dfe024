-- Take every available permit of a semaphore, as Redisson's drainPermits does.
-- KEYS[1] the permits, a string
-- KEYS[2] the leased permits, a zset id -> when it runs out: those whose lease ran out are
--         put back first, and taken too
-- Returns the permits taken (0 when there were none, or fewer than none). The key's expiry,
-- if any, is kept, as by every relock write of the count (Redisson's drain drops it). A key
-- that is not a whole number is refused with WRONGTYPE, and a count beyond 2^53-1 either
-- way with RANGE (count.lua), before anything is written.

local avail, err = exact(KEYS[1])
if err then return err end
if redis.call('exists', KEYS[2]) == 1 then
  avail = avail + reclaim(KEYS[1], KEYS[2], clock())
end
if avail <= 0 then return 0 end
redis.call('set', KEYS[1], 0, 'keepttl')
return avail
