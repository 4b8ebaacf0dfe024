-- Renew many reentrant locks in one call (the watchdog's batch), or check them.
-- KEYS[i]   a lock hash; in a cluster all keys of one call share a slot
-- ARGV[1]   lease in milliseconds; "0" checks the holds without renewing them (fixed
--           leases, after a reconnect)
-- ARGV[i+1] the owner whose hold of KEYS[i] is renewed
-- Returns an array: 1 where the owner still holds the lock (and its lease was renewed),
-- 0 where the owner's field is gone, or the hash's mode is read (the hold is lost).
--
-- A renewal never shortens the expiry: a re-entry may have promised a longer fixed lease.
-- A key that now holds another type counts as lost for its owner (pcall) instead of
-- failing the call, so one foreign key cannot stop the renewal of the others. A hash that
-- another writer gave the mode read is a read-write lock in read mode, whose readers'
-- fields look like the owner's: readers of other owners get in, so the field is no
-- exclusive hold any more (the same HMGET reads both). Any other mode keeps them out.
local lease = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS do
  local v = redis.pcall('hmget', KEYS[i], ARGV[i + 1], 'mode')
  if v[1] and v[2] ~= 'read' then
    -- Only an expiry sooner than the lease is moved: a longer one, which another writer
    -- may have made too long for a Lua number to reach PEXPIRE whole, is left alone.
    if lease > 0 and redis.call('pttl', KEYS[i]) < lease then
      redis.call('pexpire', KEYS[i], ARGV[1])
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
