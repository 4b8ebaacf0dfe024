-- Acquire, re-enter, or queue for a fair (FIFO) lock. Times come from Redis (TIME), never
-- from client clocks.
-- KEYS[1] the lock hash (owner -> hold count, as an RLock)
-- KEYS[2] the queue, a list of waiting owners in arrival order
-- KEYS[3] the waiters' deadlines, a zset owner -> Redis time (ms) by which the owner must
--         come back (refresh), or be taken for dead and skipped
-- KEYS[4] the fencing counter, only for a fenced lock
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner
-- ARGV[3] how long a waiter's entry lives without a refresh, in milliseconds
-- ARGV[4] "1" to queue when the lock cannot be taken, "0" for a single attempt (TryLock)
-- Returns {1, hold count, token} when the owner now holds the lock (token as for an
-- RLock), or {0, ms}: how long the caller may wait before it tries again. That is the
-- lock's PTTL, or, when another waiter is first and its entry runs out sooner, the time
-- until it does. Should that waiter be dead, no unlock message reaches anyone when its
-- turn passes, so the waiter behind it comes back by itself the moment its entry runs
-- out. (A live first waiter refreshes its entry every period, so this bound only comes
-- into play when it is dead or has a shorter refresh period than the caller.)
-- A key that is not a hash with a plain lock's shape (see shape) is refused with WRONGTYPE
-- before anything is written.
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
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, count, 0}
end
if redis.call('exists', KEYS[1]) == 1 then
  local kind = shape(KEYS[1])
  if kind ~= 'rlock' then
    return wrongtype(kind)
  end
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- Waiters at the head whose entries ran out are gone (a killed process): skip them.
local head = redis.call('lindex', KEYS[2], 0)
local deadline
while head do
  deadline = redis.call('zscore', KEYS[3], head)
  if deadline and tonumber(deadline) > now then
    break
  end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], head)
  head = redis.call('lindex', KEYS[2], 0)
end

if redis.call('exists', KEYS[1]) == 0 and (not head or head == ARGV[2]) then
  -- Touch the queue only when there is one: a script that has written runs to its end even
  -- when Redis is out of memory, so a needless write here would let the acquisition
  -- through where it must fail with OOM, as the RLock's does.
  if head then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
    if redis.call('llen', KEYS[2]) == 0 then
      redis.call('del', KEYS[2], KEYS[3])
    end
  end
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  local token = 0
  if KEYS[4] then
    token = redis.call('incr', KEYS[4])
  end
  return {1, count, token}
end

if ARGV[4] == '1' then
  -- Join the queue, or refresh the entry of a waiter already in it: a live waiter is
  -- never evicted, however long it waits.
  if not redis.call('zscore', KEYS[3], ARGV[2]) then
    redis.call('rpush', KEYS[2], ARGV[2])
  end
  redis.call('zadd', KEYS[3], now + tonumber(ARGV[3]), ARGV[2])
  -- The queue outlives its last live waiter by one entry lifetime at most: no keys are
  -- left behind when every waiter is gone.
  redis.call('pexpire', KEYS[2], ARGV[3])
  redis.call('pexpire', KEYS[3], ARGV[3])
end
local pttl = redis.call('pttl', KEYS[1])
if head and head ~= ARGV[2] then
  local left = tonumber(deadline) - now + 1
  if pttl < 0 or left < pttl then
    return {0, left}
  end
end
return {0, pttl}
