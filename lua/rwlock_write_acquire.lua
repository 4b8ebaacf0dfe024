-- Take or re-enter the write hold of a read-write lock (Redisson's layout).
-- KEYS[1] the lock hash
-- KEYS[2] the waiting writers (writer preference)
-- KEYS[3] this owner's read-hold timeout key prefix "{<name>}:<owner>:rwlock_timeout"
-- KEYS[4] the lock's wake registry, of clients with writers waiting (see wake.lua, prepended)
-- KEYS[5] the fencing counter, only for a fenced lock
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner's write field "<owner>:write"
-- ARGV[3] owner's read field "<owner>"
-- ARGV[4] "1" when the writer, if it must wait, registers as waiting (writer preference);
--         "0" otherwise
-- ARGV[5] how long a waiting writer's registration lives without a refresh, in ms
-- ARGV[6] the client's wake code, when the owner waits if it must ("" for TryLock)
-- ARGV[7] for a woken waiter, "1" when other waiters of this client remain on the lock and
--         "0" when none do (see settle in wake.lua); "" for a first attempt
-- ARGV[8] the lock's channel, and ARGV[9] the publish command: a first-level acquisition
--         announces its lease to the registered clients (see announce in wake.lua)
-- Returns {1, write hold count, token} when the owner now holds the write lock (the hold
-- count alone when there is no token to give, see package lua), {0, PTTL}
-- when it must wait, {2} when the owner holds live read holds only: an upgrade, which
-- would wait forever for itself.
--
-- A re-entry never moves the expiry earlier (see rlock_acquire.lua). A key that is not a
-- hash with a read-write lock's shape (see shape.lua) is refused with WRONGTYPE before anything
-- is written.

-- As in rlock_acquire.lua, a first attempt at a free lock that no writer and no client waits
-- for is one command to tell, has nobody to leave, settle or announce to, and returns
-- before the preludes' functions are made. A fenced lock takes its token before any write:
-- a counter of another type fails the script with nothing changed.
if ARGV[7] == '' and redis.call('exists', KEYS[1], KEYS[2], KEYS[4]) == 0 then
  local token = KEYS[5] and redis.call('incr', KEYS[5])
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  return token and {1, 1, token} or 1
end
-- preludes
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  if redis.call('exists', KEYS[1]) == 1 then
    local kind = shape(KEYS[1])
    if kind ~= 'gone' then
      return wrongtype(kind)
    end
  end
  -- The waiting writers and the registry before the lock: ZREM and settle read them
  -- before they write, so that either of another type fails the script with no hold
  -- taken.
  local token = KEYS[5] and redis.call('incr', KEYS[5])
  if redis.call('zrem', KEYS[2], ARGV[2]) == 1 and redis.call('zcard', KEYS[2]) == 0 then
    redis.call('del', KEYS[2])
  end
  settle(KEYS[4], ARGV[6], ARGV[7], tonumber(ARGV[1]))
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  announce(KEYS[4], ARGV[8], ARGV[9], ARGV[1])
  return token and {1, 1, token} or 1
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local count = redis.call('hincrby', KEYS[1], ARGV[2], '1')
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then -- as reenter in shape.lua
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return count
end
local kind = shape(KEYS[1])
if kind == 'gone' then
  -- Free now, the mode read above is stale: the attempt comes back at once (PTTL -2).
  return held(KEYS[1], KEYS[4], ARGV[6], ARGV[1])
elseif kind ~= 'rwlock' then
  return wrongtype(kind)
end
if mode == 'read' then
  -- A read hold counts while its newest timeout key lives; a field whose keys ran out is
  -- a hold that is gone, not an upgrade.
  local reads = tonumber(redis.call('hget', KEYS[1], ARGV[3]) or '0')
  if reads > 0 and redis.call('exists', KEYS[3] .. ':' .. reads) == 1 then
    return {2}
  end
end
if ARGV[4] == '1' then
  -- Both keys are read before either is written (ZSCORE here, and register's own read of
  -- the registry in held), so that either of another type fails the script with no entry
  -- left behind.
  redis.call('zscore', KEYS[2], ARGV[2])
  local reply = held(KEYS[1], KEYS[4], ARGV[6], ARGV[1])
  local time = redis.call('time')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('zadd', KEYS[2], now + tonumber(ARGV[5]), ARGV[2])
  -- The zset lives until its latest deadline: a writer with a short refresh period must
  -- not cut short the entry of one with a long period (each client sets its own).
  -- A deadline that no writer wrote (a fraction, or beyond what PEXPIRE takes) is taken as
  -- a whole number within 2^53 ms: the entry is already written, and a script that fails
  -- now would leave it behind.
  redis.call('pexpire', KEYS[2], math.min(math.ceil(tonumber(redis.call('zrange', KEYS[2], -1, -1, 'withscores')[2]) - now), most_whole))
  return reply
end
return held(KEYS[1], KEYS[4], ARGV[6], ARGV[1])
