-- Prepended by package script (the functions that each calls) to every script that must
-- tell a lock from other data (Redis scripts cannot include one another): the acquire,
-- state, force and fair release scripts. KEYS, ARGV: none of its own. It defines three
-- functions:
--
-- shape(key) reads the whole hash (callers use it only where the caller's own field is
-- absent) and returns 'rlock' when every field is an owner "<uuid>:<n>" holding a positive
-- count, 'rwlock' when there is also "mode" (read or write) and writers'
-- "<uuid>:<n>:write", else nil: other data, which is never touched. n is a whole number,
-- negative too: Redisson's thread id is any Java long (its async API takes one). A
-- read-write lock has a holder: a hash of "mode" alone, which no lock leaves (the last
-- release deletes the hash), is other data. It returns 'gone' for a hash of no fields,
-- which Redis never keeps: what a server whose clock moves during a script (miniredis)
-- shows of a lock whose lease ran out since the script's first read of it. Each caller
-- goes on as at a key that is not there, whatever the kind it read before.
--
-- wrongtype(kind) returns the WRONGTYPE error for a key of that shape.
local function shape(key)
  local id = '^' .. string.rep('%x', 8) .. string.rep('%-' .. string.rep('%x', 4), 3) .. '%-' .. string.rep('%x', 12) .. ':%-?%d+'
  local h, kind, writes, holders = redis.call('hgetall', key), 'rlock', false, false
  if #h == 0 then return 'gone' end
  for i = 1, #h, 2 do
    local f, v = h[i], h[i + 1]
    if f == 'mode' then
      if v ~= 'read' and v ~= 'write' then return nil end
      kind = 'rwlock'
    elseif not string.find(v, '^[1-9]%d*$') then
      return nil
    elseif string.find(f, id .. ':write$') then
      writes, holders = true, true
    elseif string.find(f, id .. '$') then
      holders = true
    else
      return nil
    end
  end
  if kind == 'rwlock' and not holders or writes and kind ~= 'rwlock' then return nil end
  return kind
end
local function wrongtype(kind)
  if kind == 'rwlock' then return redis.error_reply('WRONGTYPE the key holds a read-write lock') end
  if kind == 'rlock' then return redis.error_reply('WRONGTYPE the key holds a lock that is not a read-write lock') end
  return redis.error_reply('WRONGTYPE the key holds a hash that is not a lock')
end

-- reenter(key, field, lease, pttl) re-enters the hold of an exclusive lock (plain or fair)
-- whose owner field is in the hash key: it adds one to the count, sets the expiry to the
-- longer of what is left (pttl, the hash's, or nil to read it here) and lease, and returns
-- the new count. A read-write lock's hash is refused with WRONGTYPE and left as it is: a
-- reader's field is its bare owner, as an exclusive lock's is; "mode" is read in the same
-- command as the field. It returns nil, writing nothing, when the field is absent.
local function reenter(key, field, lease, pttl)
  local v = redis.call('hmget', key, field, 'mode')
  if not v[1] then
    return nil
  end
  if v[2] then
    return wrongtype('rwlock')
  end
  local count = redis.call('hincrby', key, field, '1')
  -- Only an expiry sooner than the lease is moved: a longer one, which another writer may
  -- have made too long for a Lua number to reach PEXPIRE whole, is left alone.
  if (pttl or redis.call('pttl', key)) < tonumber(lease) then
    redis.call('pexpire', key, lease)
  end
  return count
end
