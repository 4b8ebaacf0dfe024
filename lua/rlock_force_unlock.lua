-- Delete a lock whoever holds it, and wake its waiters.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's channel
-- ARGV[1] the message to publish ("0")
-- ARGV[2] the publish command
-- ARGV[3] the lock's kind: "rlock" (a plain lock) or "rwlock" (a read-write lock)
-- Returns 1 when a lock was deleted, 0 when there was none. A key that is not a hash is
-- refused with WRONGTYPE and left untouched: force unlock must never delete foreign data.
-- So is a hash without the shape of a lock of ARGV[3]'s kind (see shape.lua).

local t = redis.call('type', KEYS[1])['ok']
if t == 'none' then
  return 0
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE the key does not hold a lock')
end
local kind = shape(KEYS[1])
if kind == 'gone' then
  return 0
end
if kind ~= ARGV[3] then
  return wrongtype(kind)
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
