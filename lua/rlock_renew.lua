-- Renew many reentrant locks in one call (the watchdog's batch).
-- KEYS[i]   a lock hash; in a cluster all keys of one call share a slot
-- ARGV[1]   lease in milliseconds
-- ARGV[i+1] the owner whose hold of KEYS[i] is renewed
-- Returns an array: 1 where the owner still held the lock and its lease was renewed,
-- 0 where the owner's field is gone (the hold is lost).
--
-- A key that now holds another type counts as lost for its owner (pcall) instead of
-- failing the call, so one foreign key cannot stop the renewal of the others.
local renewed = {}
for i = 1, #KEYS do
  local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
  if held == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
