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
-- ARGV[5] the publish command
-- ARGV[6] the waiters' channel prefix "redisson_lock__channel:{<name>}:"; a waiter
--         listens on the prefix followed by its owner
-- ARGV[7] the message that tells a waiter to try again ("2"): the turn was taken, or it is
--         now first because the waiters ahead of it were found dead
-- Returns {1, hold count, token} when the owner now holds the lock (token as for an RLock;
-- the hold count alone when there is no token to give, see package lua), or {0, ms}: how
-- long the caller may wait before it tries again: the lock's PTTL, or, when another live
-- waiter is first and its entry runs out sooner, the time until it does: should that
-- waiter be dead, nobody publishes when its turn passes, so the waiter behind it comes back
-- by itself.
--
-- A waiter whose entry ran out is skipped only when the lock is free, that is when its
-- turn would come: while the lock is held, a waiter that refreshes late (a busy process)
-- keeps its place. When a queued waiter takes the lock, the next live waiter is told: it
-- was sleeping until the previous hold's lease or its own refresh, and must sleep until
-- the new hold's lease ends instead, or a new holder that never unlocks (a crash, a
-- fixed lease) would stall the queue.
--
-- A key that is not a hash with a plain lock's shape (see shape.lua) is refused with WRONGTYPE
-- before anything is written.

-- Most acquisitions find neither the lock nor a queue: one command tells, and the lock is
-- taken with nobody to pass over or tell, before the preludes' functions are made (see
-- rlock_acquire.lua). A fenced lock takes its token before any write: a counter of another
-- type fails the script with nothing changed.
if redis.call('exists', KEYS[1], KEYS[2]) == 0 then
  local token = KEYS[4] and redis.call('incr', KEYS[4])
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  return token and {1, 1, token} or 1
end
-- preludes
local reentered = reenter(KEYS[1], ARGV[2], ARGV[1])
if reentered then
  return reentered
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local free = redis.call('exists', KEYS[1]) == 0
local head = redis.call('lindex', KEYS[2], 0)
local deadline -- the head's, once read
if free then
  -- The turn passes: waiters at the head whose entries ran out are gone (a killed process).
  -- The loop reads the head's deadline, which the rest needs.
  local skipped = false
  while head do
    deadline = redis.call('zscore', KEYS[3], head)
    if deadline and tonumber(deadline) > now then
      break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
    head = redis.call('lindex', KEYS[2], 0)
    skipped = true
  end
  if skipped and head and head ~= ARGV[2] then
    -- Its turn came when the dead ones' ran out, and nobody told it: a message for a
    -- dead waiter reaches nobody.
    redis.call(ARGV[5], ARGV[6] .. head, ARGV[7])
  end
else
  local kind = shape(KEYS[1])
  if kind ~= 'rlock' and kind ~= 'gone' then
    return wrongtype(kind)
  end
  if head then
    deadline = redis.call('zscore', KEYS[3], head)
  end
end

if free and (not head or head == ARGV[2]) then
  local token = KEYS[4] and redis.call('incr', KEYS[4])
  -- Touch the queue only when there is one: a script that has written runs to its end even
  -- when Redis is out of memory, so a needless write here would let the acquisition
  -- through where it must fail with OOM, as the RLock's does.
  if head then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
    local waiting = redis.call('lrange', KEYS[2], 0, 15)
    if #waiting == 0 then
      redis.call('del', KEYS[2], KEYS[3])
    end
    for _, w in ipairs(waiting) do
      local d = redis.call('zscore', KEYS[3], w)
      if d and tonumber(d) > now then
        redis.call(ARGV[5], ARGV[6] .. w, ARGV[7])
        break
      end
    end
  end
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  return token and {1, 1, token} or 1
end

if ARGV[4] == '1' then
  -- Join the queue, or refresh the entry of a waiter already in it: a live waiter is
  -- never evicted, however long it waits.
  if not redis.call('zscore', KEYS[3], ARGV[2]) then
    redis.call('rpush', KEYS[2], ARGV[2])
  end
  redis.call('zadd', KEYS[3], now + tonumber(ARGV[3]), ARGV[2])
  -- The queue lives until the latest deadline in it, and no longer: no keys are left
  -- behind when every waiter is gone. Waiters may refresh at different periods (each
  -- client sets its own), so the expiry follows the latest entry, not the caller's: a
  -- waiter with a short period must not cut short the entry of one with a long period.
  -- A deadline that no waiter wrote (another writer's: a fraction, or beyond what PEXPIRE
  -- takes) is taken as a whole number within 2^53 ms, which PEXPIRE takes: the entry is
  -- already written, and a script that fails now would leave it behind.
  local life = math.min(math.ceil(tonumber(redis.call('zrange', KEYS[3], -1, -1, 'withscores')[2]) - now), most_whole)
  redis.call('pexpire', KEYS[2], life)
  redis.call('pexpire', KEYS[3], life)
end
local pttl = redis.call('pttl', KEYS[1])
if head and head ~= ARGV[2] and deadline and tonumber(deadline) > now then
  -- Another waiter is first. Should it be dead, nobody publishes when its turn passes: come
  -- back by the time its entry runs out.
  local left = math.min(math.floor(tonumber(deadline) - now) + 1, most_whole)
  if free or pttl < 0 or left < pttl then
    return {0, left}
  end
end
return {0, pttl}
