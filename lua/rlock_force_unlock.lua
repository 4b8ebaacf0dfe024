-- Delete a lock whoever holds it, and wake its waiters.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's channel
-- ARGV[1] the message to publish ("0")
-- ARGV[2] the publish command
-- Returns 1 when a lock was deleted, 0 when there was none. A key that is not a hash is
-- refused with WRONGTYPE and left untouched: force unlock must never delete foreign data.
local t = redis.call('type', KEYS[1])['ok']
if t == 'none' then
  return 0
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE the key does not hold a lock')
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
