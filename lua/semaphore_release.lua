-- Add permits to a semaphore and publish the count now available, as Redisson's release
-- and addPermits do: its clients and relock's wake waiters by that message.
-- KEYS[1] the permits, a string
-- KEYS[2] the channel, redisson_sc:{<name>}
-- KEYS[3] the leased permits, a zset id -> when it runs out: they come back to the count
--         (given back, or put back as they run out), so a count they would take beyond
--         2^53-1 then is refused now (a key of another type counts none)
-- ARGV[1] permits to add; below 0 takes them away (AddPermits)
-- ARGV[2] the publish command
-- ARGV[3] "1": only if the semaphore has no permits key yet (TrySetPermits), else "0"
-- Nothing is published when no permit is available: Redisson's clients wake as many
-- waiters as the message says, and a count below one wakes none.
-- Returns the count now available, or -1 when ARGV[3] is "1" and the key exists. The
-- key's expiry, if any, is kept. A key that is not a whole number is refused with
-- WRONGTYPE, and a count beyond 2^53-1 either way, or one that the addition would take
-- there, with RANGE (count.lua), before anything is written.

local avail, err = exact(KEYS[1])
if err then return err end
if ARGV[3] == '1' and redis.call('exists', KEYS[1]) == 1 then return -1 end
-- Both are within range, so their sum is either exact or beyond it. Permits added count
-- with the leased ones, which will come back on top of them; a count taken away, alone.
local add, leased = tonumber(ARGV[1]), 0
if add > 0 and redis.call('type', KEYS[3]).ok == 'zset' then leased = redis.call('zcard', KEYS[3]) end
local _, beyond = within(avail + add + leased)
if beyond then return beyond end
local now = redis.call('incrby', KEYS[1], ARGV[1])
if now > 0 then
  redis.call(ARGV[2], KEYS[2], now)
end
return now
