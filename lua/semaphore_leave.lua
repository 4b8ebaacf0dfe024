-- Take a client that stops waiting out of a semaphore's queue. If it was first, the client
-- now first is told on its own channel (see semaphore_acquire.lua), so that it listens for
-- releases and looks at once.
-- KEYS[1] the permits, KEYS[2] the queue, KEYS[3] the deadlines (as semaphore_acquire.lua)
-- ARGV[1] the client
-- ARGV[2] the publish command
-- ARGV[3] the prefix of the waiting clients' own channels
-- Returns 1 when the client was in the queue, else 0.

local head = redis.call('zrange', KEYS[2], 0, 0)[1]
redis.call('zrem', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[2], ARGV[1]) == 0 then return 0 end
if head == ARGV[1] then
  local next = redis.call('zrange', KEYS[2], 0, 0)[1]
  if next then redis.call(ARGV[2], ARGV[3] .. next, 1) end
end
return 1
