-- Count a count-down latch down by one, as Redisson's countDown does: at zero the key is
-- deleted and "0" is published on the latch's channel, which opens it for every waiter.
-- An open latch (no key) stays open.
-- KEYS[1] the count, a string
-- KEYS[2] the channel, redisson_countdownlatch__channel__{<name>}
-- ARGV[1] the publish command
-- Returns the count left (0 when open). A key that is not a whole number is refused with
-- WRONGTYPE before anything is written.

local c, err = count(KEYS[1])
if err then return err end
if c <= 0 then
  if redis.call('exists', KEYS[1]) == 1 then redis.call('del', KEYS[1]) end
  return 0
end
local v = redis.call('decr', KEYS[1])
if v <= 0 then
  redis.call('del', KEYS[1])
  redis.call(ARGV[1], KEYS[2], '0')
end
return math.max(v, 0)
