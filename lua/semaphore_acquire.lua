-- Take permits from a semaphore (Redisson's RSemaphore: a string of available permits), in
-- the order relock's clients came: a client that cannot take what it asks for joins a
-- queue, and nobody else of relock takes permits while a live client waits ahead of it,
-- so a large request is never starved by a stream of small ones. Each client keeps one
-- entry (its own waiters queue in the process); the entry must be refreshed (every call
-- with ARGV[3] = "1" does) before its deadline, or the client is taken for dead and
-- skipped, as is one with no deadline once it comes first. Times come from Redis (TIME).
--
-- Only the client first in line can take permits, so only it listens for releases on the
-- semaphore's channel; the others listen on a channel of their own, the queue's name, ':'
-- and the client, and are told there when they come first: when the client ahead of them
-- takes its permits (with the count left), and when it is found dead.
-- KEYS[1] the permits, a string
-- KEYS[2] the queue, a zset client -> arrival number
-- KEYS[3] the deadlines, a zset client -> Redis time (ms) by which it must come back
-- ARGV[1] permits asked for, at least 1
-- ARGV[2] the client
-- ARGV[3] "1" to join the queue (or stay in it) when the permits cannot be taken, "0" for a
--         single attempt (TryAcquire), which also fails while a live client waits
-- ARGV[4] how long an entry lives without a refresh, in milliseconds
-- ARGV[5] the publish command
-- ARGV[6] the prefix of the waiting clients' own channels, the queue's name and ':'
-- ARGV[7] for leased permits, their lease in milliseconds; "0" for plain permits
-- ARGV[8] for leased permits, their ids in hex (permit.lua), one per permit asked for
-- KEYS[4] the leased permits, a zset id -> when it runs out (RPermitExpirableSemaphore's)
-- KEYS[5] the semaphore's channel, redisson_sc:{<name>}
-- Returns {1, permits left} when the permits were taken, {1, permits left, expiry} when
-- they were leased while the permits key has an expiry (expiry: its PTTL, which the leased
-- permits take: they go with the semaphore then, whatever their lease), or {0, permits
-- available, first, wait}: first is 1 when the client is now first in line (it listens on
-- the semaphore's channel), else 0 (it listens on its own); wait is how many milliseconds
-- until the next leased permit runs out, or -1 when none is leased.
--
-- Leased permits whose lease ran out are put back before the count is read, as Redisson
-- does, on every path but the one that finds enough without them; when that leaves some
-- available, the count is published, which wakes Redisson's waiters too.
-- A key that is not a whole number, a queue or deadlines key of another type, and for
-- leased permits a zset key of another type, is refused with WRONGTYPE, and a count beyond
-- 2^53-1 either way with RANGE (count.lua), before anything is written.

local avail, err = exact(KEYS[1])
if err then return err end
local n, me, lease = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[7])
local leased = nil
if lease > 0 then
  leased = ids(ARGV[8])
  if not leased or #leased ~= n then return redis.error_reply('ERR the permit ids do not match the permits asked for') end
  local t = redis.call('type', KEYS[4]).ok
  if t ~= 'zset' and t ~= 'none' then return redis.error_reply('WRONGTYPE the leased permits key holds data that is not a zset') end
end
-- take takes the permits; leased ones are recorded with the time they run out, in a zset
-- that expires with the permits when they have an expiry (as Redisson's acquire does), so
-- that no ids outlive their semaphore to be put back into one set up anew. It returns the
-- reply of a success: with that expiry, when leased permits got one.
local function take(now)
  redis.call('decrby', KEYS[1], n)
  if leased then
    now = now or clock()
    for _, id in ipairs(leased) do redis.call('zadd', KEYS[4], now + lease, id) end
    -- A PTTL of 0 is an expiry too: the count's last millisecond, which it ends.
    local ttl = redis.call('pttl', KEYS[1])
    if ttl >= 0 then
      redis.call('pexpire', KEYS[4], ttl)
      return {1, avail - n, ttl}
    end
  end
  return {1, avail - n}
end
local was = redis.call('zrange', KEYS[2], 0, 0)[1]
if was == nil and avail >= n then
  -- Nobody waits: the permits are taken without the queue's upkeep.
  return take(nil)
end
-- The queue was read above; the deadlines are vetted before the upkeep below writes
-- anything, so that a refused call leaves the count and the leases as they were.
local t = redis.call('type', KEYS[3]).ok
if t ~= 'zset' and t ~= 'none' then return redis.error_reply('WRONGTYPE the waiting clients\' deadlines key holds data that is not a zset') end
local now = clock()
local back = reclaim(KEYS[1], KEYS[4], now)
if back > 0 then
  avail = avail + back
  if avail > 0 then redis.call(ARGV[5], KEYS[5], avail) end
end
for _, dead in ipairs(redis.call('zrangebyscore', KEYS[3], '-inf', '(' .. now)) do
  redis.call('zrem', KEYS[2], dead)
  redis.call('zrem', KEYS[3], dead)
end
-- A client queued with no deadline (the deadlines key lost beside the queue: evicted, or
-- restored without it) would never run out: ahead of this one, it is taken for dead too.
local head = redis.call('zrange', KEYS[2], 0, 0)[1]
while head and head ~= me and not redis.call('zscore', KEYS[3], head) do
  redis.call('zrem', KEYS[2], head)
  head = redis.call('zrange', KEYS[2], 0, 0)[1]
end
if avail >= n and (head == nil or head == me) then
  local taken = take(now)
  if head then
    redis.call('zrem', KEYS[2], me)
    redis.call('zrem', KEYS[3], me)
    -- The next in line listens on its own channel until told it is first.
    local next = redis.call('zrange', KEYS[2], 0, 0)[1]
    if next then
      redis.call(ARGV[5], ARGV[6] .. next, math.max(avail - n, 1))
    end
  end
  return taken
end
-- A client that came first because the ones ahead of it were found dead is told.
if head and head ~= was and head ~= me then
  redis.call(ARGV[5], ARGV[6] .. head, math.max(avail, 1))
end
if ARGV[3] == '1' then
  if not redis.call('zscore', KEYS[2], me) then
    local last = redis.call('zrange', KEYS[2], -1, -1, 'withscores')
    redis.call('zadd', KEYS[2], (tonumber(last[2]) or 0) + 1, me)
  end
  redis.call('zadd', KEYS[3], now + tonumber(ARGV[4]), me)
  local latest = redis.call('zrange', KEYS[3], -1, -1, 'withscores')
  local life = tonumber(latest[2]) - now
  redis.call('pexpire', KEYS[2], life)
  redis.call('pexpire', KEYS[3], life)
  head = head or me
end
local first = 0
if head == me then first = 1 end
local wait = -1
local next = redis.call('zrange', KEYS[4], 0, 0, 'withscores')[2]
if next then wait = math.max(tonumber(next) - now, 0) end
return {0, avail, first, wait}
