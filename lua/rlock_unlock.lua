-- Release one hold of a reentrant lock, at most once per request id.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's channel
-- KEYS[3] the unlock latch "redisson_unlock_latch:{<name>}:<request id>"
-- ARGV[1] the message to publish on release ("0")
-- ARGV[2] owner field
-- ARGV[3] latch lifetime in milliseconds
-- ARGV[4] the publish command: "publish", or "spublish" under sharded pub/sub
-- Returns nil when the owner does not hold the lock, 0 when it still holds it (re-entered),
-- 1 when the lock was released.
--
-- The latch makes a retried unlock safe: if the first reply was lost, the retry returns the
-- first result instead of releasing a hold the owner took in the meantime.
local done = redis.call('get', KEYS[3])
if done then
  return tonumber(done)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
-- The lease is left as it is: a watchdog hold is renewed anyway, and a fixed lease stays
-- fixed rather than growing with every partial release.
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('set', KEYS[3], 0, 'px', ARGV[3])
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[3])
return 1
