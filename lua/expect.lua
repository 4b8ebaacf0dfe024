-- Prepended by package script (the functions that each calls) to every script that
-- releases one hold (the rlock, fair and read-write unlock scripts). KEYS, ARGV: none of
-- its own. It defines three functions:
--
-- expect(count, arg) compares the owner's hold count in the hash (count; nil when its field
-- is absent) with arg, the count the client expects before this release ("" when it knows
-- of no hold). It returns true when the release may go ahead, else false and the reply:
--   - arg "": go ahead when the owner holds the lock at all, else nil (not held);
--   - count = expected: go ahead;
--   - count = expected - 1: 0, the owner still holds the lock and this release already ran
--     (sent again after its reply was lost);
--   - field absent and expected = 1: 3, the release already ran, or the hold was lost;
--   - otherwise nil: the owner does not hold the lock with the count the client knows.
-- The client sends one owner's releases and re-entries of one lock one at a time, so
-- between a release and its resending only that release can have changed the count.
local function expect(count, arg)
  if arg == '' then
    return count ~= nil, nil
  end
  local expected = tonumber(arg)
  if count == nil then
    if expected == 1 then return false, 3 end
    return false, nil
  end
  if count == expected then return true, nil end
  if count == expected - 1 then return false, 0 end
  return false, nil
end

-- gone(key, field, arg) undoes a decrement that found the hash gone, and returns the reply
-- for a hold that is no more: a server whose clock moves while a script runs (miniredis)
-- can expire the lock between the read of the count and its decrement, and the decrement
-- then made a hash of its own, of field alone at -1 and with no expiry, that nobody holds
-- and nobody could take. A real server's clock stands still during a script.
local function gone(key, field, arg)
  redis.call('hdel', key, field)
  local _, reply = expect(nil, arg)
  return reply
end

-- release(key, field, arg, exclusive) releases one hold of field in the lock hash key,
-- compared with arg as expect compares: it returns true when that was the field's last
-- hold (the caller deletes the lock and wakes a waiter), else false and the reply: expect's,
-- or 0 when a hold is left (the count is decremented; the lease is left as it is: a
-- watchdog hold is renewed anyway, and a fixed lease stays fixed rather than growing with
-- every partial release). The commonest release, of the last hold with the client knowing
-- so, is told apart by comparing the texts: reading them as numbers costs the server more.
-- exclusive (the plain and fair locks): a read-write lock's hash in which the field counts
-- holds (a reader's field is its bare owner, as a plain lock's is) is refused with
-- WRONGTYPE and left as it is; its "mode" is read in the same command as the owner's
-- count. Without the field the owner holds nothing, whatever the hash is.
local function release(key, field, arg, exclusive)
  local held
  if exclusive then
    local v = redis.call('hmget', key, field, 'mode')
    if v[1] and v[2] then
      return false, wrongtype('rwlock')
    end
    held = v[1]
  else
    held = redis.call('hget', key, field)
  end
  if held == '1' and arg == '1' then
    return true
  end
  local count = tonumber(held)
  local go, reply = expect(count, arg)
  if not go then
    return false, reply
  end
  if count > 1 then
    if redis.call('hincrby', key, field, '-1') > 0 then
      return false, 0
    end
    return false, gone(key, field, arg)
  end
  return true
end
