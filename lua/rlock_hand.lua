-- Release an owner's last hold of a reentrant lock and hand the lock, in the same step, to
-- a waiter of the same client: the lock is never free in between, so no other client is
-- woken and nobody else can take it. The client sends it instead of rlock_unlock.lua when
-- one of its own waiters is parked on the lock (see the engine's handoff); the lock's data
-- is Redisson's, one owner's field and the lease, as if the waiter had acquired it.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's channel
-- KEYS[3] the lock's wake registry (see wake.lua, prepended)
-- KEYS[4] the fencing counter, only when the waiter's lock is fenced
-- ARGV[1] the releasing owner's field
-- ARGV[2] its hold count as the client knows it: "1" (compared as in expect.lua, prepended)
-- ARGV[3] the publish command: "publish", or "spublish" under sharded pub/sub
-- ARGV[4] the waiter's owner field
-- ARGV[5] the waiter's lease in milliseconds
-- ARGV[6] the client's wake code: the client stays registered to be woken for the lock, in
--         its place, or joins at the back (see register in wake.lua). Its other waiters,
--         some of which may have joined without an attempt of their own, are woken by the
--         releases that pick it; one that finds none passes the wake-up on.
-- Returns {1, token} when the lock was released and handed: token is the fencing counter's
-- new value for a fenced waiter, else 0. Otherwise nothing was written, and the reply is
-- expect.lua's: nil when the owner does not hold the lock with that count, 0 when it holds
-- it once less (never, with a count of 1), and 3 when its field is gone: this release and
-- handoff already ran (sent again after its reply was lost), or the hold was lost; or 4
-- when the fenced waiter's counter cannot be incremented (not an integer, or at its most):
-- the client then releases the lock as rlock_unlock.lua does, since a release needs no
-- token (Redisson's never reads the counter), and the waiter meets the counter in its own
-- attempt.
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
local go, reply = expect(count, ARGV[2])
if not go then
  return reply
end
local token = 0
if KEYS[4] then
  -- First, before any write: a counter that cannot be incremented is answered with
  -- nothing changed.
  token = redis.pcall('incr', KEYS[4])
  if type(token) == 'table' then
    return 4
  end
end
-- The registry before the lock: register reads it first, so that a registry of another
-- type fails the script with the lock as it was.
register(KEYS[3], ARGV[6], tonumber(ARGV[5]))
redis.call('del', KEYS[1])
redis.call('hincrby', KEYS[1], ARGV[4], '1')
redis.call('pexpire', KEYS[1], ARGV[5])
announce(KEYS[3], KEYS[2], ARGV[3], ARGV[5])
return {1, token}
