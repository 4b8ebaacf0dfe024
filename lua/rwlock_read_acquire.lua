-- Take or re-enter a read hold of a read-write lock (Redisson's RReadWriteLock layout).
-- KEYS[1] the lock hash: mode = read | write, "<owner>" -> read holds,
--         "<owner>:write" -> write holds
-- KEYS[2] this owner's timeout key prefix "{<name>}:<owner>:rwlock_timeout"; read hold k
--         lives in KEYS[2]:k
-- KEYS[3] the waiting writers (writer preference), a zset owner -> Redis-time deadline
-- KEYS[4] the lock's reader registry: clients with readers waiting (see wake.lua, prepended)
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner (the read field)
-- ARGV[3] owner's write field "<owner>:write"
-- ARGV[4] "1" when new readers give way to waiting writers
-- ARGV[5] the client's wake code, when the owner waits if it must ("" for TryLock)
-- ARGV[6] for a woken reader, "1" when other waiters of this client remain on the lock and
--         "0" when none do (see settle in wake.lua); "" for a first attempt
-- KEYS[5] the lock's wake registry, of clients with writers waiting; ARGV[7] the lock's
--         channel and ARGV[8] the publish command: a reader that takes a free lock
--         announces its lease to the registered clients (see announce in wake.lua)
-- Returns {1, read hold count, w} when the owner now holds a read hold, with w = 1 when it
-- was taken beside the owner's own write hold (a downgrade: the write field now lives as
-- long as this hold keeps the hash) and 0 otherwise (the reply of a first hold taken at a
-- free lock is 1 alone, see package lua); else {0, ms}: how
-- long to wait before trying again, the lock's PTTL, or, while a waiting writer goes first
-- and its entry runs out sooner, the time until it does (a writer that died never takes
-- the lock, so nobody would publish when its turn passes).
--
-- Expiries: all read holds of one owner share one expiry, the longest any of them was
-- promised, so that releasing one (the newest key goes first, as in Redisson) never cuts
-- short another; the hash never expires before its longest live timeout key.
--
-- A key that is not a hash with a read-write lock's shape (see shape.lua) is refused with
-- WRONGTYPE before anything is written.

-- As in rlock_acquire.lua, a first attempt at a free lock that no writer waits for and no
-- client is registered to hear of is one command to tell: the hold is taken with nothing to
-- give way to, settle or announce, before the preludes' functions are made.
if ARGV[6] == '' and redis.call('exists', KEYS[1], KEYS[3], KEYS[5]) == 0 then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('set', KEYS[2] .. ':1', '1', 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
-- preludes
local mode = redis.call('hget', KEYS[1], 'mode')
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
if holds == 0 and (mode or redis.call('exists', KEYS[1]) == 1) then
  local kind = shape(KEYS[1])
  if kind == 'gone' then
    mode = false
  elseif kind ~= 'rwlock' then
    return wrongtype(kind)
  end
end
-- A new reader gives way to a writer that is waiting (a re-entry or a writer taking read
-- holds never does: that could deadlock).
if ARGV[4] == '1' and holds == 0 and mode ~= 'write' then
  local time = redis.call('time')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local first = redis.call('zrangebyscore', KEYS[3], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first > 0 then
    local pttl = redis.call('pttl', KEYS[1])
    -- A whole number within 2^53 ms, whatever the writer's deadline is (a fraction, or
    -- beyond what PEXPIRE takes, are no writer's): register's PEXPIRE takes it.
    local left = math.min(math.ceil(tonumber(first[2]) - now) + 1, most_whole)
    if pttl < 0 or left < pttl then
      pttl = left
    end
    register(KEYS[4], ARGV[5], pttl)
    return {0, pttl}
  end
end
if mode == false then
  if redis.call('exists', KEYS[1]) == 1 then
    return redis.error_reply('WRONGTYPE the key holds a lock that is not a read-write lock')
  end
elseif not (mode == 'read' or redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  return held(KEYS[1], KEYS[4], ARGV[5], ARGV[1])
end
-- The registry before the lock: settle reads it before it writes, so that a registry of
-- another type fails the script with no hold taken.
settle(KEYS[4], ARGV[5], ARGV[6], tonumber(ARGV[1]))
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], '1')
local expiry = tonumber(ARGV[1])
if count > 1 then
  -- Within 2^53 ms: a longer expiry, which another writer may have set, would reach SET
  -- as no whole number.
  expiry = math.min(math.max(expiry, redis.call('pttl', KEYS[2] .. ':' .. (count - 1))), most_whole)
  for k = 1, count - 1 do
    redis.call('set', KEYS[2] .. ':' .. k, '1', 'px', expiry)
  end
end
redis.call('set', KEYS[2] .. ':' .. count, '1', 'px', expiry)
if redis.call('pttl', KEYS[1]) < expiry then -- as reenter in shape.lua
  redis.call('pexpire', KEYS[1], expiry)
end
local beside = 0
if mode == 'write' then
  beside = 1
end
if mode == false then
  announce(KEYS[5], ARGV[7], ARGV[8], ARGV[1])
end
return {1, count, beside}
