-- Read a reentrant lock's state in one round trip.
-- KEYS[1] the lock hash
-- ARGV[1] owner field, or '' for none
-- ARGV[2] the lock's kind: "rlock" (a plain or fair lock) or "rwlock" (a read-write lock)
-- Returns {1 if the lock exists else 0, the owner's hold count, PTTL in milliseconds}.
-- A key of another type is refused with WRONGTYPE, and so is a hash without the shape of
-- a lock of ARGV[2]'s kind (see shape.lua).

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
-- The owner's own field of the right kind of lock vouches for the hash; else look at all.
if count <= 0 or (redis.call('hexists', KEYS[1], 'mode') == 1) ~= (ARGV[2] == 'rwlock') then
  local kind = shape(KEYS[1])
  if kind == 'gone' then
    return {0, 0, -2}
  end
  if kind ~= ARGV[2] then
    return wrongtype(kind)
  end
end
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then -- gone since the owner's field was read (see shape.lua)
  return {0, 0, -2}
end
return {1, count, pttl}
