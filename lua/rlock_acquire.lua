-- Acquire or re-enter a reentrant lock (Redisson's RLock layout).
-- KEYS[1] the lock hash
-- KEYS[2] the lock's wake registry (see wake.lua, prepended)
-- KEYS[3] the fencing counter, only for a fenced lock
-- ARGV[1] lease in milliseconds
-- ARGV[2] owner field "<uuid>:<n>"
-- ARGV[3] the client's wake code, when the owner waits if it must ("" for TryLock)
-- ARGV[4] for a woken waiter, "1" when other waiters of this client remain on the lock and
--         "0" when none do (see settle in wake.lua); "" for a first attempt
-- ARGV[5] the lock's channel, and ARGV[6] the publish command: a first-level acquisition
--         announces its lease to the registered clients (see announce in wake.lua)
-- Returns {1, hold count, token} when the owner now holds the lock: token is the fencing
-- counter's new value on a first-level acquisition of a fenced lock; without one (0: the
-- lock is not fenced, or a re-entry, which keeps its hold's token) the reply is the hold
-- count alone, an integer, which the server sends for less than an array. Returns {0,
-- PTTL} when another owner holds it; the PTTL (-1 when the lock has no expiry) bounds how
-- long a waiter sleeps before trying again, and the client is registered to be woken for
-- that long.
-- A key of another type makes HEXISTS fail with WRONGTYPE and leaves the key untouched. A
-- hash without a plain lock's shape (see shape.lua) is refused with WRONGTYPE too, on a
-- first attempt (ARGV[4] "") or when it has no expiry, as no lock lacks one: a woken
-- waiter's attempt found a lock before, and is spared reading the whole hash again.
--
-- A re-entry (reenter in shape.lua) is refused with WRONGTYPE when the hash is a
-- read-write lock's: a reader's field is its bare owner, as a plain lock's is.
--
-- The expiry never moves earlier: a re-entry sets it to the longer of what is left and
-- the new lease, so a re-entry with a short lease cannot cut short what an earlier hold
-- of the same owner was promised.

-- Most acquisitions are a first attempt at a free lock that no client waits for: then one
-- command tells that the lock and its registry are both absent, and there is nobody to
-- settle or announce to. Such an attempt returns before the preludes' functions, which
-- package script puts at the "-- preludes" line below: every function a script defines is
-- made anew each time the script gets to its definition.
--
-- A fenced lock takes its token first, before any write: a counter that cannot be
-- incremented (another type) fails the script with nothing changed. The counter never
-- expires: a token is never handed out twice.
if ARGV[4] == '' and redis.call('exists', KEYS[1], KEYS[2]) == 0 then
  local token = KEYS[3] and redis.call('incr', KEYS[3])
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  return token and {1, 1, token} or 1
end
-- preludes
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
  -- The registry before the lock: settle reads it before it writes, so that a registry of
  -- another type fails the script with no hold taken.
  local token = KEYS[3] and redis.call('incr', KEYS[3])
  settle(KEYS[2], ARGV[3], ARGV[4], tonumber(ARGV[1]))
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  announce(KEYS[2], ARGV[5], ARGV[6], ARGV[1])
  return token and {1, 1, token} or 1
end
local reentered = reenter(KEYS[1], ARGV[2], ARGV[1], pttl)
if reentered then
  return reentered
end
-- Another owner's lock, a read-write lock's hash or an application's hash: only the first
-- may be waited for (taking the others for a held lock would wait forever).
if ARGV[4] == '' or pttl == -1 then
  local kind = shape(KEYS[1])
  if kind ~= 'rlock' and kind ~= 'gone' then
    return wrongtype(kind)
  end
end
return waiting(KEYS[2], ARGV[3], pttl, ARGV[1])
