-- Give back leased permits (RPermitExpirableSemaphore's release of permit ids): each id
-- still in the zset is taken out and its permit added to the count, which is published,
-- as Redisson's release does. An id whose lease ran out but that nobody put back yet
-- counts as given back, not as held.
-- KEYS[1] the permits, a string
-- KEYS[2] the leased permits, a zset id -> when it runs out
-- KEYS[3] the semaphore's channel, redisson_sc:{<name>}
-- ARGV[1] the permit ids in hex (permit.lua)
-- ARGV[2] the publish command
-- Returns {given back, of them still leased}: the lease was whole when both equal the
-- number of ids. A permits key that is not a whole number is refused with WRONGTYPE, and a
-- count beyond 2^53-1 either way with RANGE (count.lua), before anything is written.

local _, err = exact(KEYS[1])
if err then return err end
local list = ids(ARGV[1])
if not list then return redis.error_reply('ERR malformed permit ids') end
local now = clock()
local back, live = 0, 0
for _, id in ipairs(list) do
  local until_ = redis.call('zscore', KEYS[2], id)
  if until_ then
    redis.call('zrem', KEYS[2], id)
    back = back + 1
    if tonumber(until_) > now then live = live + 1 end
  end
end
if back > 0 then
  local v = redis.call('incrby', KEYS[1], back)
  if v > 0 then redis.call(ARGV[2], KEYS[3], v) end
end
return {back, live}
