-- Prepended by package script (the functions that each calls) to the semaphore's scripts
-- that touch leased permits, which keep Redisson's RPermitExpirableSemaphore layout: a
-- zset of permit ids (16 bytes each) scored by the Unix time in milliseconds when each
-- runs out. A permit id is spelt in hex outside Redis, as Redisson's API spells it. KEYS,
-- ARGV: none of its own. It defines:
--
-- ids(hex) returns the raw ids that hex spells, 32 hex digits each, or nil when hex is not
-- such a list.
-- clock() returns Redis's time in milliseconds.
-- reclaim(permits, leases, now) puts the permits whose lease ran out by now back into the
-- count, as Redisson's scripts do before they read it, and returns how many: those scored
-- below zero too (written by hand), which Redisson's leave leased for ever, and which would
-- otherwise be the next to run out, at once, for ever. The caller has vetted the permits
-- key (count.lua) before.
local function ids(hex)
  if #hex == 0 or #hex % 32 ~= 0 or string.find(hex, '[^0-9a-f]') then return nil end
  local out = {}
  for i = 1, #hex, 32 do
    out[#out + 1] = (string.gsub(string.sub(hex, i, i + 31), '..', function(h) return string.char(tonumber(h, 16)) end))
  end
  return out
end

local function clock()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function reclaim(permits, leases, now)
  local gone = redis.call('zrangebyscore', leases, '-inf', now)
  for i = 1, #gone, 1000 do
    redis.call('zrem', leases, unpack(gone, i, math.min(i + 999, #gone)))
  end
  if #gone > 0 then redis.call('incrby', permits, #gone) end
  return #gone
end
