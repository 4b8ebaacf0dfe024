-- Acquire or re-enter a reentrant lock (Redisson's RLock layout).
-- KEYS[1] the lock hash
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner field "<uuid>:<n>"
-- Returns nil when the owner now holds the lock, else the lock's PTTL in milliseconds
-- (-1 when it has no expiry), which bounds how long a waiter sleeps before trying again.
-- A key of another type makes HEXISTS fail with WRONGTYPE and leaves the key untouched.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
-- A read-write lock's hash is a hash too; taking it for a plain lock held by somebody
-- else would make the caller wait forever.
if redis.call('hexists', KEYS[1], 'mode') == 1 then
  return redis.error_reply('WRONGTYPE the key holds a read-write lock')
end
return redis.call('pttl', KEYS[1])
