-- Renew many leases of permits in one call (the watchdog's batch), or check them.
-- KEYS[2i-1] a semaphore's permits, KEYS[2i] its leased permits (a zset id -> when it runs
--            out); in a cluster all keys of one call share a slot
-- ARGV[1]    lease in milliseconds; "0" checks the leases without renewing them
-- ARGV[i+1]  the permit ids of lease i in hex (permit.lua)
-- Returns an array: 1 where every permit of the lease is still leased (and was renewed), 0
-- where the lease is lost: one of its permits ran out or was taken out of the zset. A lost
-- lease's other permits are left as they are: they run out within a lease and are put back
-- by the next script that reads the count.
--
-- A renewal never shortens a permit's lease. A key of another type counts as a lost
-- lease (pcall) instead of failing the call, so that one foreign key cannot stop the
-- renewal of the others.
local lease = tonumber(ARGV[1])
local now = clock()
local renewed = {}
for i = 1, #KEYS / 2 do
  local leases = KEYS[2 * i]
  local list = ids(ARGV[i + 1]) or {}
  local scores, whole = {}, #list > 0
  for k, id in ipairs(list) do
    local s = redis.pcall('zscore', leases, id)
    if type(s) ~= 'string' or tonumber(s) <= now then
      whole = false
      break
    end
    scores[k] = tonumber(s)
  end
  if whole and lease > 0 then
    for k, id in ipairs(list) do
      redis.call('zadd', leases, math.max(scores[k], now + lease), id)
    end
  end
  renewed[i] = whole and 1 or 0
end
return renewed
