-- Renew many read-write locks' holds in one call (the watchdog's batch).
-- KEYS[2i-1] a lock hash, KEYS[2i] its key prefix "{<name>}"; in a cluster all keys of
--            one call share a slot
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  the field ("<owner>" or "<owner>:write") whose hold of lock i is renewed
-- Returns an array: 1 where the field still holds the lock and the hash and every read
-- hold's timeout key were renewed, 0 where the hold is gone.
local renewed = {}
for i = 1, #KEYS / 2 do
  local name, prefix, field = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
  local held = redis.pcall('hexists', name, field)
  if held == 1 then
    redis.call('pexpire', name, ARGV[1])
    for _, f in ipairs(redis.call('hkeys', name)) do
      local n = tonumber(redis.call('hget', name, f))
      if n then
        for k = n, 1, -1 do
          redis.call('pexpire', prefix .. ':' .. f .. ':rwlock_timeout:' .. k, ARGV[1])
        end
      end
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
