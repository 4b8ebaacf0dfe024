-- Renew many read-write locks' holds in one call (the watchdog's batch), or check them.
-- KEYS[2i-1] a lock hash, KEYS[2i] its key prefix "{<name>}"; in a cluster all keys of
--            one call share a slot
-- ARGV[1]    lease in milliseconds; "0" checks the holds without renewing them
-- ARGV[i+1]  the field ("<owner>" or "<owner>:write") whose hold of lock i is renewed
-- Returns an array: 1 where the field still holds the lock (and was renewed), 0 where the
-- hold is gone, 2 where a read hold was renewed while its owner also holds the write lock
-- (whose field lives as long as the hash, which this renewal kept, while the mode is not
-- read). A read hold is gone when its field is, or when its newest timeout key ran out (a
-- paused reader whose share others may already have counted as over). A write hold is
-- gone when its field is, or when the mode is read: another writer set it, and readers of
-- other owners get in beside the field (no other mode lets anyone in).
--
-- A renewal touches only the renewer's own keys, as Redisson's read-lock renewal does
-- now: a crashed reader's timeout keys run out however long the other readers stay. It
-- never shortens an expiry, and the hash lives at least as long as the renewed hold.
local lease = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS / 2 do
  local name, prefix, field = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
  local v = redis.pcall('hmget', name, field, 'mode')
  local n = v[1]
  local expiry = lease
  local held = type(n) == 'string'
  if held and string.sub(field, -6) == ':write' then
    held = v[2] ~= 'read'
  elseif held then
    local timeout = prefix .. ':' .. field .. ':rwlock_timeout:'
    n = tonumber(n) or 0
    held = n > 0 and redis.call('exists', timeout .. n) == 1
    if held and lease > 0 then
      -- Within 2^53 ms: an expiry that another writer made longer would reach PEXPIRE
      -- as no whole number, which would fail the whole batch.
      expiry = math.min(math.max(redis.call('pttl', timeout .. n), lease), most_whole)
      for k = 1, n do
        redis.call('pexpire', timeout .. k, expiry)
      end
    end
  end
  if held then
    if lease > 0 then
      if redis.call('pttl', name) < expiry then
        redis.call('pexpire', name, expiry)
      end
    end
    renewed[i] = 1
    if lease > 0 and string.sub(field, -6) ~= ':write' and v[2] ~= 'read' and redis.call('hexists', name, field .. ':write') == 1 then
      renewed[i] = 2
    end
  else
    renewed[i] = 0
  end
end
return renewed
