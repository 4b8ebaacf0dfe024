-- Acquire or re-enter a reentrant lock (Redisson's RLock layout).
-- KEYS[1] the lock hash
-- KEYS[2] the fencing counter, only for a fenced lock
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner field "<uuid>:<n>"
-- Returns {1, hold count, token} when the owner now holds the lock: token is the fencing
-- counter's new value on a first-level acquisition of a fenced lock, else 0 (a re-entry
-- keeps its hold's token). Returns {0, PTTL} when another owner holds it; the PTTL (-1
-- when the lock has no expiry) bounds how long a waiter sleeps before trying again.
-- A key of another type makes HEXISTS fail with WRONGTYPE and leaves the key untouched.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  local token = 0
  if count == 1 and KEYS[2] then
    -- The counter never expires: a token must never be handed out twice.
    token = redis.call('incr', KEYS[2])
  end
  return {1, count, token}
end
-- A read-write lock's hash is a hash too; taking it for a plain lock held by somebody
-- else would make the caller wait forever.
if redis.call('hexists', KEYS[1], 'mode') == 1 then
  return redis.error_reply('WRONGTYPE the key holds a read-write lock')
end
return {0, redis.call('pttl', KEYS[1])}
