-- Delete a lock whoever holds it, and wake its waiters.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's channel
-- ARGV[1] the message to publish ("0")
-- ARGV[2] the publish command
-- ARGV[3] the lock's kind: "rlock" (a plain lock) or "rwlock" (a read-write lock)
-- Returns 1 when a lock was deleted, 0 when there was none. A key that is not a hash is
-- refused with WRONGTYPE and left untouched: force unlock must never delete foreign data.
-- So is a hash without the shape of a lock of ARGV[3]'s kind (see shape).

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
  return 0
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE the key does not hold a lock')
end
local kind = shape(KEYS[1])
if kind ~= ARGV[3] then
  return wrongtype(kind)
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
