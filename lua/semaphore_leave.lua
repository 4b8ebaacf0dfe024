-- Take a client that stops waiting out of a semaphore's queue. If it was first and permits
-- are left, the count is published, so that the next in line looks.
-- KEYS[1] the permits, KEYS[2] the queue, KEYS[3] the deadlines, KEYS[4] the channel (as
--         semaphore_acquire.lua)
-- ARGV[1] the client
-- ARGV[2] the publish command
-- Returns 1 when the client was in the queue, else 0.

local head = redis.call('zrange', KEYS[2], 0, 0)[1]
redis.call('zrem', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[2], ARGV[1]) == 0 then return 0 end
if head == ARGV[1] and redis.call('zcard', KEYS[2]) > 0 then
  local v = tonumber(redis.call('get', KEYS[1]))
  if v and v > 0 then redis.call(ARGV[2], KEYS[4], v) end
end
return 1
