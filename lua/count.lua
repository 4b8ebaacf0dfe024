-- Prepended by package script (the functions that each calls) to the scripts of the
-- counting kinds (semaphore, count-down latch), whose key is a string holding a whole
-- number, as Redisson's RSemaphore and RCountDownLatch keep it. KEYS, ARGV: none of its
-- own. It defines these functions:
--
-- count(key) returns the number the key holds, or 0 when there is no key, or nil and the
-- WRONGTYPE error to return when it holds anything else: another type (GET's own error),
-- or a string that is not a whole number as Redis writes one (INCRBY and DECR take only
-- those: no sign but '-', no leading zero, within 64 bits). Nothing is written before it
-- is called.
local function count(key)
  local v = redis.pcall('get', key)
  if type(v) == 'table' and v.err then return nil, redis.error_reply('WRONGTYPE the key holds data that is not a count') end
  if v == false or v == '0' then return 0 end
  local sign, digits = string.match(v, '^(%-?)([1-9]%d*)$')
  local most = '9223372036854775807'
  if sign == '-' then most = '9223372036854775808' end
  if not digits or #digits > #most or (#digits == #most and digits > most) then
    return nil, redis.error_reply('WRONGTYPE the key holds a string that is not a count')
  end
  return tonumber(v)
end

-- within(n) returns n when a semaphore's scripts count it exactly: Lua's numbers are
-- doubles, whole only from -(2^53-1) to 2^53-1. Beyond that it returns nil and the RANGE
-- error to return, which the client turns into ErrInvalidCount.
local function within(n)
  if n > most_whole or n < -most_whole then
    return nil, redis.error_reply('RANGE the count, or what this call would make it, is beyond 2^53-1 either way, which a semaphore does not count exactly')
  end
  return n
end

-- exact(key) is count(key) for a semaphore, whose scripts add to and compare the count: a
-- count beyond within's range (which a latch, that only counts down, may hold) is refused
-- rather than read wrong.
local function exact(key)
  local n, err = count(key)
  if err then return nil, err end
  return within(n)
end
