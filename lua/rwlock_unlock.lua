-- Release one read or write hold of a read-write lock: compare-and-decrement against the
-- hold count the client expects (expect.lua, prepended), as rlock_unlock.lua does.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's channel "redisson_rwlock:{<name>}"
-- KEYS[3] the key prefix "{<name>}" of the read holds' timeout keys
-- KEYS[4] the waiting writers (writer preference)
-- KEYS[5] the lock's wake registry, of clients with writers waiting (see wake.lua, prepended)
-- KEYS[6] the lock's reader registry, of clients with readers waiting
-- ARGV[1] the field whose hold is released: "<owner>" (read) or "<owner>:write" (write)
-- ARGV[2] "read" or "write"
-- ARGV[3] the field's hold count as the client knows it before this release; "" when the
--         client knows of no hold
-- ARGV[4] the publish command
-- Returns nil when the owner holds no such hold (with that count), 0 when this owner still
-- holds it, 1 when the lock is free, 2 when this hold is gone but others hold the lock
-- (other readers, or this owner's read holds after its write hold: a downgrade), 3 when
-- this release already ran or the hold was lost (see expect.lua).
--
-- Expiry, as Redisson's read unlock: while holds remain, the hash is set to the longest
-- remaining read timeout key (and "0" is published when that is sooner than before, so
-- that a waiter's time bound follows); in read mode with no live timeout key left, the
-- lock is free. While a writer holds the lock its expiry is never shortened.
--
-- Messages as Redisson's: "1" when the writer leaves and no reader remains (everyone may
-- try: readers can all enter), "0" when the last reader leaves (one may try). When writers
-- wait under writer preference, the last reader sends "1", so that a woken reader that
-- gives way does not swallow the wake-up the writer needs.
local fields = redis.call('hmget', KEYS[1], 'mode', ARGV[1])
local mode, holds = fields[1], nil
if mode then
  holds = tonumber(fields[2])
end
local go, reply = expect(holds, ARGV[3])
if not go then
  return reply
end
-- The waiting writers and the two registries are read before anything is written: one of
-- another type fails the script here, with the hold as it was. When none of them exists
-- (the common case) one EXISTS tells.
local aux = redis.call('exists', KEYS[4], KEYS[5], KEYS[6]) > 0
if aux then
  for i = 4, 6 do
    local t = redis.call('type', KEYS[i])['ok']
    if t ~= 'zset' and t ~= 'none' then
      return redis.error_reply('WRONGTYPE ' .. KEYS[i] .. ' holds data that is not the lock\'s')
    end
  end
end
-- holds is the field's count in Redis (expect let it through): the count after this
-- release is known without asking, and a field whose last hold goes is deleted at once.
local count = holds - 1
local result = 0
if count > 0 then
  if redis.call('hincrby', KEYS[1], ARGV[1], '-1') <= 0 then
    return gone(KEYS[1], ARGV[1], ARGV[3])
  end
else
  redis.call('hdel', KEYS[1], ARGV[1])
  result = 2
end
if ARGV[2] == 'read' then
  redis.call('del', KEYS[3] .. ':' .. ARGV[1] .. ':rwlock_timeout:' .. holds)
end
local free = redis.call('hlen', KEYS[1]) <= 1
local downgraded = false
if ARGV[2] == 'write' and count <= 0 and not free then
  -- The writer is gone, and what is left are its own read holds: the lock is read now.
  -- (A lock left with nothing is deleted below, mode and all.)
  redis.call('hset', KEYS[1], 'mode', 'read')
  mode = 'read'
  downgraded = true
end
if not free then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local n = tonumber(redis.call('hget', KEYS[1], field))
    if n and n > 1000 then
      -- No reader re-enters so often (each re-entry adds a timeout key): walking the keys
      -- of a count that high (tampered data, or debris) could keep the server in this
      -- script for ever. The hash, which never expires before the longest of them, stands
      -- for them: its expiry is left as it is.
      longest = math.max(longest, redis.call('pttl', KEYS[1]))
    elseif n then
      for i = n, 1, -1 do
        longest = math.max(longest, redis.call('pttl', KEYS[3] .. ':' .. field .. ':rwlock_timeout:' .. i))
      end
    end
  end
  -- Within 2^53 ms: a longer expiry, which another writer may have set, would reach
  -- PEXPIRE as no whole number, and fail the release half-way.
  longest = math.min(longest, most_whole)
  if mode == 'write' then
    if longest > 0 and redis.call('pttl', KEYS[1]) < longest then
      redis.call('pexpire', KEYS[1], longest)
    end
  elseif longest > 0 then
    local before = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], longest)
    if downgraded then
      -- The writer kept read holds: the lock is in read mode now, and waiting readers may
      -- join them at once (Redisson leaves them to their time bound).
      redis.call(ARGV[4], KEYS[2], '1')
    elseif longest < before then
      -- The lock now ends sooner than waiters were told when they last tried: one of them
      -- tries again and sleeps until the new end, lest the lock stand free meanwhile.
      redis.call(ARGV[4], KEYS[2], '0')
    end
  else
    -- Read mode and every read hold has run out: nobody holds the lock.
    free = true
  end
end
if free then
  result = 1
  redis.call('del', KEYS[1])
  -- Whether writers wait in line, and whether clients have readers waiting: when neither
  -- does (the common case) the EXISTS above told.
  local writers, readers = false, false
  if aux then
    writers = redis.call('exists', KEYS[4]) == 1
    readers = redis.call('exists', KEYS[6]) == 1
  end
  local message = '0'
  if ARGV[2] == 'write' or writers then
    message = '1'
  end
  -- Readers that wait may all enter: every client hears the message. Otherwise one
  -- client with a writer waiting is woken (wake.lua), and Redisson's waiters hear the
  -- message as from Redisson. (A reader's entry whose client died stays until the
  -- registry runs out: until then releases go to every client, as before the registry.)
  if readers then
    redis.call(ARGV[4], KEYS[2], message)
  else
    wake(KEYS[5], KEYS[2], ARGV[4], message)
  end
end
return result
