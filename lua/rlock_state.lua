-- Read a reentrant lock's state in one round trip.
-- KEYS[1] the lock hash
-- ARGV[1] owner field, or '' for none
-- Returns {1 if the lock exists else 0, the owner's hold count, PTTL in milliseconds}.
-- A key of another type is refused with WRONGTYPE.
local t = redis.call('type', KEYS[1])['ok']
if t == 'none' then
  return {0, 0, -2}
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE the key does not hold a lock')
end
local count = 0
if ARGV[1] ~= '' then
  count = tonumber(redis.call('hget', KEYS[1], ARGV[1])) or 0
end
return {1, count, redis.call('pttl', KEYS[1])}
