-- Read a reentrant lock's state in one round trip.
-- KEYS[1] the lock hash
-- ARGV[1] owner field, or '' for none
-- ARGV[2] the lock's kind: "rlock" (a plain or fair lock) or "rwlock" (a read-write lock)
-- Returns {1 if the lock exists else 0, the owner's hold count, PTTL in milliseconds}.
-- A key of another type is refused with WRONGTYPE, and so is a hash without the shape of
-- a lock of ARGV[2]'s kind (see shape).

-- Guard: a hash is a lock only if it has a lock's shape. shape(key) reads the whole hash
-- (only where the caller's own field is absent) and returns 'rlock' when every field is an
-- owner "<uuid>:<n>" holding a positive count, 'rwlock' when there is also "mode" (read or
-- write) and writers' "<uuid>:<n>:write", else nil: other data, which is never touched.
local function shape(key)
  local id = '^' .. string.rep('%x', 8) .. string.rep('%-' .. string.rep('%x', 4), 3) .. '%-' .. string.rep('%x', 12) .. ':%d+'
  local h, kind, writes = redis.call('hgetall', key), 'rlock', false
  for i = 1, #h, 2 do
    local f, v = h[i], h[i + 1]
    if f == 'mode' then
      if v ~= 'read' and v ~= 'write' then return nil end
      kind = 'rwlock'
    elseif not string.find(v, '^[1-9]%d*$') then
      return nil
    elseif string.find(f, id .. ':write$') then
      writes = true
    elseif not string.find(f, id .. '$') then
      return nil
    end
  end
  if writes and kind ~= 'rwlock' then return nil end
  return kind
end
local function wrongtype(kind)
  if kind == 'rwlock' then return redis.error_reply('WRONGTYPE the key holds a read-write lock') end
  if kind == 'rlock' then return redis.error_reply('WRONGTYPE the key holds a lock that is not a read-write lock') end
  return redis.error_reply('WRONGTYPE the key holds a hash that is not a lock')
end
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
  if kind ~= ARGV[2] then
    return wrongtype(kind)
  end
end
return {1, count, redis.call('pttl', KEYS[1])}
