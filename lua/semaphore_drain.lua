-- Take every available permit of a semaphore, as Redisson's drainPermits does.
-- KEYS[1] the permits, a string
-- Returns the permits taken (0 when there were none, or fewer than none). A key that is not
-- a whole number is refused with WRONGTYPE before anything is written.

local avail, err = count(KEYS[1])
if err then return err end
if avail <= 0 then return 0 end
redis.call('set', KEYS[1], 0, 'keepttl')
return avail
