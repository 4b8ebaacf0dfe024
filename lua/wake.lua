-- Prepended by package script (the functions that each calls) to the scripts that make a
-- lock's waiters wait or wake them (the rlock and read-write lock acquire and unlock
-- scripts, and pass.lua). KEYS, ARGV: none of its own. It defines the wake registry: a
-- zset per lock of the relock clients (processes) that have waiters parked on the lock's
-- shared channel, each under its client's wake code (a decimal number of at least 1000,
-- which Redisson's clients ignore as a message), in the order they registered: a client's
-- score is one more than the highest when it joins, and stays while it remains. No command
-- reads the clock: an entry counts while its client listens (see wake), not until a time.
--
-- register(registry, code, bound) records that code's client has a waiter that sleeps at
-- most bound ms before it tries again (and so registers again). A client already in the
-- registry keeps its place. The zset lives at least one second longer than bound, for
-- that try to arrive; its expiry is only ever pushed later, so one client's short bound
-- never cuts another's entry short. code "" registers nothing (a TryLock, which never
-- waits).
--
-- held(key, registry, code, lease) is the reply of an attempt that finds key held:
-- {0, PTTL}, after registering code for as long as the waiter may sleep, the PTTL or, for a
-- key without expiry, lease ms. waiting(registry, code, pttl, lease) is the same for a
-- caller that has read the PTTL already.
--
-- settle(registry, code, stay, bound) is what a woken waiter that got the lock does with
-- its client's entry, which the unlock that woke it took: stay "1" (other waiters of the
-- client remain) registers it again, at the back, for bound ms; "0" (none remain) makes
-- sure it is gone; "" (a first attempt, not a woken one) leaves the registry as it is.
--
-- wake(registry, channel, publish, message) tells the waiters that the lock was released:
-- it takes the first entry whose client listens out of the registry and publishes its
-- code, so that one waiter of that one client tries (the others sleep on), and then
-- publishes message as Redisson's unlock does, which wakes Redisson's waiters; a relock
-- client that has just seen a code ignores the message that follows it. With no such
-- entry only the message goes out, and every relock client wakes one waiter, as every
-- Redisson client does. A client listens while it subscribes to its presence channel, the
-- registry's name, ':' and its code: it does so while it has waiters on the lock, and the
-- subscription ends with its connection, so that a client that died or stopped listening
-- is never the one picked; its entry is dropped on the way. (Under sharded pub/sub the
-- presence channel is on the lock's node, in its slot; under classic pub/sub on a cluster
-- a client may subscribe on another node, where this node cannot see it, and is then taken
-- for absent: the message alone goes out, as before the registry.)
local function register(registry, code, bound)
  if code == '' then
    return
  end
  if not redis.call('zscore', registry, code) then
    local last = redis.call('zrange', registry, -1, -1, 'withscores')
    redis.call('zadd', registry, (tonumber(last[2]) or 0) + 1, code)
  end
  -- Within 2^53 ms: a bound of another client's lease of millions of years would reach
  -- PEXPIRE as no whole number, refused after the entry above was written.
  local life = math.min(bound + 1000, most_whole)
  if redis.call('pttl', registry) < life then
    redis.call('pexpire', registry, life)
  end
end
local function waiting(registry, code, pttl, lease)
  local bound = pttl
  if bound < 0 then
    bound = tonumber(lease)
  end
  register(registry, code, bound)
  return {0, pttl}
end
local function held(key, registry, code, lease)
  return waiting(registry, code, redis.call('pttl', key), lease)
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
-- holder whose lease ends in lease ms, if that is sooner than some of them would look: it
-- publishes "-" and lease, which a relock client takes as the latest its waiters may
-- sleep, without trying (Redisson's clients ignore it, a negative number). Only a woken
-- client's waiter tries at a release, so the others would otherwise sleep on past the new
-- hold's end if it ends without an unlock. Every waiter sleeps less than the registry
-- lives, less a second (see register): when the new lease is no shorter, each one looks
-- before it ends anyway, and nothing goes out. Nothing goes out either when no client is
-- registered, or channel is nil (a caller that sends none).
local function announce(registry, channel, publish, lease)
  if channel and redis.call('pttl', registry) - 1000 > tonumber(lease) then
    redis.call(publish, channel, '-' .. lease)
  end
end
local function wake(registry, channel, publish, message)
  local e = redis.call('zpopmin', registry)
  while e[1] and not listening(publish, registry .. ':' .. e[1]) do
    e = redis.call('zpopmin', registry)
  end
  if e[1] then
    redis.call(publish, channel, e[1])
  end
  redis.call(publish, channel, message)
end
