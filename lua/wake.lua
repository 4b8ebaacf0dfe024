-- Prepended by package lua to the scripts that make a lock's waiters wait or wake them (the
-- rlock and read-write lock acquire and unlock scripts, and pass.lua). KEYS, ARGV: none of
-- its own. It defines the wake registry: a zset per lock of the relock clients (processes)
-- that have waiters parked on the lock's shared channel, each under its client's wake code
-- (a decimal number of at least 1000, which Redisson's clients ignore as a message), scored
-- with the Redis time in ms until which the entry counts.
--
-- register(registry, code, bound) records that code's client has a waiter that sleeps at
-- most bound ms before it tries again (and so registers again); the entry counts one second
-- longer, for that try to arrive. code "" registers nothing (a TryLock, which never waits).
--
-- held(key, registry, code, lease) is the reply of an attempt that finds key held:
-- {0, PTTL}, after registering code for as long as the waiter may sleep, the PTTL or, for a
-- key without expiry, lease ms.
--
-- settle(registry, code, stay, bound) is what a woken waiter that got the lock does with
-- its client's entry, which the unlock that woke it took: stay "1" (other waiters of the
-- client remain) registers it again for bound ms, "0" (none remain) makes sure it is gone,
-- "" (a first attempt, not a woken one) leaves the registry as it is.
--
-- wake(registry, channel, publish, message) tells the waiters that the lock was released:
-- it takes the live entry that ends first out of the registry and publishes its code, so
-- that one waiter of that one client tries (the others sleep on), and then publishes
-- message as Redisson's unlock does, which wakes Redisson's waiters; a relock client that
-- has just seen a code ignores the message that follows it. With no live entry only the
-- message goes out, and every relock client wakes one waiter, as every Redisson client
-- does. An entry is live while its time has not run out and its client listens: a client
-- that waits on a lock also subscribes to its presence channel, the registry's name, ':'
-- and its code, which it drops with its connection, so that a client that died or stopped
-- listening is never the one picked. (Under sharded pub/sub the presence channel is on
-- the lock's node, in its slot; under classic pub/sub on a cluster a client may subscribe
-- on another node, where this node cannot see it, and is then taken for absent: the
-- message alone goes out, as before the registry.) Entries that are not live are dropped
-- on the way. The zset itself expires one entry's life after the last registration: an
-- entry it takes with it early leaves its client to that message.
local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function register(registry, code, bound)
  if code == '' then
    return
  end
  local life = bound + 1000
  redis.call('zadd', registry, now_ms() + life, code)
  redis.call('pexpire', registry, life)
end
local function held(key, registry, code, lease)
  local pttl = redis.call('pttl', key)
  local bound = pttl
  if bound < 0 then
    bound = tonumber(lease)
  end
  register(registry, code, bound)
  return {0, pttl}
end
local function settle(registry, code, stay, bound)
  if stay == '1' then
    register(registry, code, bound)
  elseif stay == '0' and code ~= '' then
    redis.call('zrem', registry, code)
  end
end
local function listening(publish, presence)
  local numsub = 'numsub'
  if publish == 'spublish' then
    numsub = 'shardnumsub'
  end
  return redis.call('pubsub', numsub, presence)[2] > 0
end
-- announce(registry, channel, publish, lease) tells the registered clients' waiters, who
-- were told to sleep until the previous holder's lease ran out, that the lock has a new
-- holder whose lease ends in lease ms: it publishes "-" and lease, which a relock client
-- takes as the latest its waiters may sleep, without trying (Redisson's clients ignore it,
-- a negative number). Only a woken client's waiter tries at a release, so the others would
-- otherwise sleep on past the new hold's end if it ends without an unlock. Nothing goes
-- out when no client is registered, or channel is nil (a caller that sends none).
local function announce(registry, channel, publish, lease)
  if channel and redis.call('exists', registry) == 1 then
    redis.call(publish, channel, '-' .. lease)
  end
end
local function wake(registry, channel, publish, message)
  local e = redis.call('zpopmin', registry)
  if e[1] then
    local now = now_ms()
    while e[1] and (tonumber(e[2]) <= now or not listening(publish, registry .. ':' .. e[1])) do
      e = redis.call('zpopmin', registry)
    end
    if e[1] then
      redis.call(publish, channel, e[1])
    end
  end
  redis.call(publish, channel, message)
end
