-- Release a fair lock, or leave its queue, and wake exactly the next live waiter.
-- KEYS[1] the lock hash
-- KEYS[2] the queue
-- KEYS[3] the waiters' deadlines
-- ARGV[1] mode: "unlock" (one hold of ARGV[2]), "leave" (ARGV[2] stops waiting), or
--         "force" (delete the lock whoever holds it)
-- ARGV[2] owner ("" for force)
-- ARGV[3] unlock: the owner's hold count as the client knows it before this release, or
--         "" when it knows of no hold (see expect.lua); otherwise unused
-- ARGV[4] the publish command
-- ARGV[5] the waiters' channel prefix "redisson_lock__channel:{<name>}:"; a waiter
--         listens on the prefix followed by its owner
-- ARGV[6] the message ("0")
-- Returns, for unlock, nil (not held with that count), 0 (still held) or 1 (released), or
-- 3 when it already ran or the hold was lost (see expect.lua, prepended); for leave, 1; for
-- force, 1 if a lock was deleted.
-- Unlock refuses a read-write lock's hash in which the owner's field counts holds (a
-- reader's) with WRONGTYPE, as rlock_unlock.lua does.
-- Force refuses a key that is not a hash with a plain lock's shape (see shape.lua) with
-- WRONGTYPE and leaves it untouched.

local mode = ARGV[1]
if mode == 'unlock' then
  local last, reply = release(KEYS[1], ARGV[2], ARGV[3], true)
  if not last then
    return reply
  end
elseif mode == 'leave' then
  -- The queue is read before the deadlines are written: a queue of another type fails
  -- the script with nothing changed.
  redis.call('lindex', KEYS[2], 0)
  redis.call('zrem', KEYS[3], ARGV[2])
  redis.call('lrem', KEYS[2], 0, ARGV[2])
  if redis.call('exists', KEYS[1]) == 1 then
    if redis.call('llen', KEYS[2]) == 0 then
      redis.call('del', KEYS[2], KEYS[3])
    end
    return 1
  end
  -- The lock is free: the leaver may have been the one whose turn it was.
else
  local t = redis.call('type', KEYS[1])['ok']
  if t ~= 'hash' and t ~= 'none' then
    return redis.error_reply('WRONGTYPE the key does not hold a lock')
  end
  if t == 'none' then
    return 0
  end
  local kind = shape(KEYS[1])
  if kind ~= 'rlock' and kind ~= 'gone' then
    return wrongtype(kind)
  end
end

-- Wake the first waiter whose entry is still live; skip (and drop) the dead ones. The
-- queue and its head's deadline are read before the lock is deleted: either of another
-- type fails the script here, with the lock as it was.
local head = redis.call('lindex', KEYS[2], 0)
local deadline = head and redis.call('zscore', KEYS[3], head)
if mode ~= 'leave' then
  redis.call('del', KEYS[1])
end
local now = 0
if head then
  -- Only a queue's entries need the time (most releases find none).
  local time = redis.call('time')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
while head do
  if deadline and tonumber(deadline) > now then
    redis.call(ARGV[4], ARGV[5] .. head, ARGV[6])
    break
  end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], head)
  head = redis.call('lindex', KEYS[2], 0)
  deadline = head and redis.call('zscore', KEYS[3], head)
end
-- With nobody left in line, the deadlines go too, if there are any (entries whose owners
-- left the queue): a zset, never data of another type, which the queue's absence did not
-- vet.
if not head and redis.call('type', KEYS[3])['ok'] == 'zset' then
  redis.call('del', KEYS[3])
end
return 1
