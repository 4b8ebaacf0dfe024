-- Set a count-down latch's count if it has none, as Redisson's trySetCount does: the key
-- is the count, a string, and the new count message ("1") is published on its channel.
-- KEYS[1] the count, a string
-- KEYS[2] the channel, redisson_countdownlatch__channel__{<name>}
-- ARGV[1] the count, at least 1
-- ARGV[2] the publish command
-- Returns 1 when set, 0 when the latch has a count above zero already. A key that is not
-- a whole number is refused with WRONGTYPE.

local c, err = count(KEYS[1])
if err then return err end
-- A count of zero or below (written by another client: a count down deletes the key) is
-- an open latch to every reader, and is set over.
if c > 0 then return 0 end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], '1')
return 1
