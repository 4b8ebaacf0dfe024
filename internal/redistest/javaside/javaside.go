// Package javaside plays, in relock's tests, a Java service whose Redisson client shares
// locks, semaphores and latches with relock. Each exported method does to the shared data
// what one Redisson operation does, in one script call, as Redisson's operation is one
// script: the layout is the one docs/migration-from-redisson.md ("Sharing locks with Java
// services") and docs/design.md describe, and this package is written from that
// description, not from Redisson's code.
//
// Names of the shared keys and channels. A name that holds a hash tag ("{…}") is used as it
// is; another is wrapped in braces, so that every key of one name lands in one slot:
//
//   - RLock: the hash <name>, one field per owner "<client uuid>:<thread>" holding its
//     hold count, the lease as the hash's expiry. The last unlock of an owner deletes the
//     hash and publishes "0" on redisson_lock__channel:{<name>}.
//   - RReadWriteLock: the hash <name> with the field mode ("read" or "write"). A reader's
//     field is its owner, with its hold count; each read hold k also has the key
//     {<name>}:<owner>:rwlock_timeout:<k>, expiring with that hold's lease, and the hash
//     lives as long as its longest read hold. A writer's field is "<owner>:write". A write
//     unlock that leaves no holder deletes the hash and publishes "1" on
//     redisson_rwlock:{<name>}; a read unlock that leaves no holder, "0". A read unlock
//     that leaves other holds sets the hash to expire with the longest read hold left.
//   - RFairLock: the RLock's hash, with the list redisson_lock_queue:{<name>} of the
//     waiting owners in arrival order and the zset redisson_lock_timeout:{<name>} of
//     their deadlines, the Unix time in milliseconds on the client's clock by which each
//     must come back or be dropped when it is at the head. A newcomer's deadline is the
//     last waiter's (or, with nobody waiting, now plus the lock's PTTL) plus the thread
//     wait time. An attempt first drops the waiters at the head whose deadline passed; it
//     takes a free lock when the queue is empty or the owner is at its head, leaving the
//     queue and taking the thread wait time off every other waiter's deadline. A waiter
//     listens on redisson_lock__channel:{<name>}:<owner>; the unlock that frees the lock
//     publishes "0" there for the owner at the head of the queue, and so does an unlock
//     that finds the lock free already (which Redisson's unlock takes for a success).
//   - RSemaphore: the string <name> of available permits. A release adds to it and
//     publishes the new count on redisson_sc:{<name>}.
//   - RPermitExpirableSemaphore: the same count, and the zset {<name>}:timeout of the
//     leased permits' ids (16 bytes each), each scored by the Unix time in milliseconds,
//     on the client's clock, when its lease runs out; a permit leased without a lease time
//     is scored Forever. An acquire first puts back up to as many run-out permits as it
//     asks for (publishing the count if it is then above zero), and gives the zset the
//     count's remaining expiry, if the count has one. A release by id puts one permit back
//     and publishes the count.
//   - RCountDownLatch: the string <name> with the count (no expiry), channel
//     redisson_countdownlatch__channel__{<name>} (the whole name in braces, tag or not). A
//     new count publishes "1"; the count down that reaches zero deletes the key and
//     publishes "0"; a count down below zero deletes the key and publishes nothing.
//
// Messages go out with PUBLISH, or with SPUBLISH in sharded mode (Redisson's
// shardedSubscriptionMode on a Redis 7 cluster, which relock follows by default).
//
// Where that description is silent, this package does what Redisson's own scripts do:
// an unlock of a read-write lock that is gone publishes its message all the same ("0" for
// a reader, "1" for a writer), and a fair unlock of a free lock answers as a release.
//
// Only what relock's tests need is here: an unlock that leaves holds does not reset the
// lock's expiry, and the answers are reduced to what the tests read.
package javaside

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Forever is the score a permit leased without a lease time gets in {<name>}:timeout: the
// largest Java long divided by 10 000, a time in the year 31197.
const Forever int64 = 922337203685477

// Java is a Java service's Redisson client on a raw rueidis client.
type Java struct {
	rc      rueidis.Client
	publish string
}

// New returns a Java side that sends through rc and publishes with SPUBLISH if sharded,
// else with PUBLISH.
func New(rc rueidis.Client, sharded bool) *Java {
	j := &Java{rc: rc, publish: "publish"}
	if sharded {
		j.publish = "spublish"
	}
	return j
}

// Sharded reports whether j publishes with SPUBLISH.
func (j *Java) Sharded() bool { return j.publish == "spublish" }

// tagged is the key "<prefix>:<name>" with name in braces unless it has a tag already.
func tagged(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// suffixed is the key "<name>:<suffix>" with name in braces unless it has a tag already.
func suffixed(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// LockChannel is the channel of the RLock name.
func LockChannel(name string) string { return tagged("redisson_lock__channel", name) }

// RWLockChannel is the channel of the RReadWriteLock name.
func RWLockChannel(name string) string { return tagged("redisson_rwlock", name) }

// SemaphoreChannel is the channel of the RSemaphore or RPermitExpirableSemaphore name.
func SemaphoreChannel(name string) string { return tagged("redisson_sc", name) }

// LeasesKey is the zset of the RPermitExpirableSemaphore name's leased permits.
func LeasesKey(name string) string { return suffixed(name, "timeout") }

// LatchChannel is the channel of the RCountDownLatch name.
func LatchChannel(name string) string { return "redisson_countdownlatch__channel__{" + name + "}" }

// Unlocked is what an unlock found.
type Unlocked int

const (
	NotHeld   Unlocked = iota // the owner held nothing: nothing changed
	StillHeld                 // one of several holds of the owner was released
	Released                  // the owner's last hold was released; the message was published if the lock is free
)

func (u Unlocked) String() string {
	switch u {
	case NotHeld:
		return "not held"
	case StillHeld:
		return "still held"
	case Released:
		return "released"
	}
	return fmt.Sprintf("Unlocked(%d)", int(u))
}

// newID is a new permit id: 16 random bytes.
func newID() ([]byte, error) {
	id := make([]byte, 16)
	_, err := rand.Read(id)
	return id, err
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// run runs script with keys and args, and gives its reply.
func (j *Java) run(ctx context.Context, script *rueidis.Lua, keys, args []string) rueidis.RedisResult {
	return script.Exec(ctx, j.rc, keys, args)
}

// granted reads a {granted, pttl} reply.
func granted(r rueidis.RedisResult) (bool, time.Duration, error) {
	v, err := r.AsIntSlice()
	if err != nil {
		return false, 0, err
	}
	if len(v) != 2 {
		return false, 0, fmt.Errorf("javaside: reply %v", v)
	}
	return v[0] == 1, time.Duration(v[1]) * time.Millisecond, nil
}

// unlocked reads the reply of an unlock: the owner's holds left, or -1 if it held none.
func unlocked(r rueidis.RedisResult) (Unlocked, error) {
	left, err := r.AsInt64()
	switch {
	case err != nil:
		return NotHeld, err
	case left < 0:
		return NotHeld, nil
	case left > 0:
		return StillHeld, nil
	}
	return Released, nil
}

// RLock.

// lockScript: KEYS[1] the hash; ARGV[1] the owner, ARGV[2] the lease in ms.
// Replies {1, 0} when the owner holds it now, {0, the hash's PTTL} when another does.
var lockScript = rueidis.NewLuaScript(`
local reentry = redis.call('hexists', KEYS[1], ARGV[1]) == 1
if not reentry and redis.call('exists', KEYS[1]) == 1 then
  return {0, redis.call('pttl', KEYS[1])}
end
redis.call('hincrby', KEYS[1], ARGV[1], 1)
redis.call('pexpire', KEYS[1], ARGV[2])
return {1, 0}`)

// Lock is RLock.tryLock with a lease, for owner ("<client uuid>:<thread>"): it takes the
// lock, or a further hold of it, and sets the lease as the hash's expiry. When another
// owner holds it, it reports false and the lock's remaining time to live.
func (j *Java) Lock(ctx context.Context, name, owner string, lease time.Duration) (bool, time.Duration, error) {
	return granted(j.run(ctx, lockScript, []string{name}, []string{owner, ms(lease)}))
}

// unlockScript: KEYS[1] the hash, KEYS[2] the channel; ARGV[1] the owner's field, ARGV[2]
// the publish command, ARGV[3] the message. Replies the owner's holds left, -1 if none.
var unlockScript = rueidis.NewLuaScript(`
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if holds < 1 then return -1 end
if holds > 1 then return redis.call('hincrby', KEYS[1], ARGV[1], -1) end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[3])
return 0`)

// Unlock is RLock.unlock by owner: it releases one of its holds; the last one deletes the
// hash and publishes "0" on the lock's channel.
func (j *Java) Unlock(ctx context.Context, name, owner string) (Unlocked, error) {
	return unlocked(j.run(ctx, unlockScript, []string{name, LockChannel(name)}, []string{owner, j.publish, "0"}))
}

// RFairLock.

// FairQueue and FairTimeouts are the RFairLock name's queue and waiters' deadlines.
func FairQueue(name string) string    { return tagged("redisson_lock_queue", name) }
func FairTimeouts(name string) string { return tagged("redisson_lock_timeout", name) }

// FairChannel is the channel on which the RFairLock name's waiter owner is told its turn.
func FairChannel(name, owner string) string { return LockChannel(name) + ":" + owner }

// dropStale is the part of both fair scripts that drops the waiters at the head of the
// queue KEYS[2] whose deadline in KEYS[3] is not after now.
const dropStale = `
local function dropStale(now)
  while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then return end
    local deadline = tonumber(redis.call('zscore', KEYS[3], head))
    if deadline and deadline > now then return end
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
  end
end
`

// fairLockScript: KEYS[1] the hash, KEYS[2] the queue, KEYS[3] the deadlines; ARGV[1] the
// owner, ARGV[2] the lease in ms, ARGV[3] the thread wait time in ms, ARGV[4] now (ms).
// Replies {1, 0} when the owner holds it now, {0, ms to wait} otherwise.
var fairLockScript = rueidis.NewLuaScript(dropStale + `
local now, wait = tonumber(ARGV[4]), tonumber(ARGV[3])
dropStale(now)
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (not head or head == ARGV[1]) then
  if head then redis.call('lpop', KEYS[2]) end
  redis.call('zrem', KEYS[3], ARGV[1])
  for _, other in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -wait, other)
  end
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, 0}
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, 0}
end
local mine = redis.call('zscore', KEYS[3], ARGV[1])
if mine then
  return {0, tonumber(mine) - wait - now}
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last and last ~= ARGV[1] then
  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - now
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + wait + now, ARGV[1]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[1])
end
return {0, ttl}`)

// FairLock is one attempt of RFairLock.tryLock(wait, lease) by owner at now on the Java
// service's clock: it takes the lock, or a further hold of it, or else queues owner (once)
// and reports how long it may wait for its turn before trying again: for a newcomer the
// time to the deadline of the waiter ahead of it (or the lock's PTTL), for an owner queued
// already its own deadline less the thread wait time, as Redisson before 3.32 answers
// (3.32 and later answer the lock's PTTL there, or 0 when it is free). Redisson's default
// thread wait time is five minutes (Config.fairLockWaitTimeout).
func (j *Java) FairLock(ctx context.Context, name, owner string, lease, threadWait time.Duration, now time.Time) (bool, time.Duration, error) {
	return granted(j.run(ctx, fairLockScript, []string{name, FairQueue(name), FairTimeouts(name)},
		[]string{owner, ms(lease), ms(threadWait), strconv.FormatInt(now.UnixMilli(), 10)}))
}

// fairUnlockScript: KEYS[1] the hash, KEYS[2] the queue, KEYS[3] the deadlines, KEYS[4]
// the lock's channel; ARGV[1] the owner, ARGV[2] now (ms), ARGV[3] the publish command.
// Replies as unlockScript, and 0 when the lock was free already.
var fairUnlockScript = rueidis.NewLuaScript(dropStale + `
dropStale(tonumber(ARGV[2]))
local function tellNext()
  local head = redis.call('lindex', KEYS[2], 0)
  if head then redis.call(ARGV[3], KEYS[4] .. ':' .. head, '0') end
end
if redis.call('exists', KEYS[1]) == 0 then
  tellNext()
  return 0
end
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if holds < 1 then return -1 end
if holds > 1 then return redis.call('hincrby', KEYS[1], ARGV[1], -1) end
redis.call('del', KEYS[1])
tellNext()
return 0`)

// FairUnlock is RFairLock.unlock by owner at now on the Java service's clock: it drops
// the stale waiters at the head, releases one of owner's holds, and when the lock is free
// (by this unlock or before it) tells the waiter at the head of the queue. An unlock that
// finds the lock free reports Released, whoever held it: Redisson's fair unlock returns
// quietly there, where its RLock's throws.
func (j *Java) FairUnlock(ctx context.Context, name, owner string, now time.Time) (Unlocked, error) {
	return unlocked(j.run(ctx, fairUnlockScript, []string{name, FairQueue(name), FairTimeouts(name), LockChannel(name)},
		[]string{owner, strconv.FormatInt(now.UnixMilli(), 10), j.publish}))
}

// RReadWriteLock.

// readLockScript: KEYS[1] the hash, KEYS[2] the prefix of the owner's read holds' keys;
// ARGV[1] the owner, ARGV[2] its write field, ARGV[3] the lease in ms. Replies as
// lockScript.
var readLockScript = rueidis.NewLuaScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
local shares = mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1)
if mode and not shares then
  return {0, redis.call('pttl', KEYS[1])}
end
if not mode then redis.call('hset', KEYS[1], 'mode', 'read') end
local k = redis.call('hincrby', KEYS[1], ARGV[1], 1)
redis.call('set', KEYS[2] .. ':' .. k, 1, 'px', ARGV[3])
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('pexpire', KEYS[1], ARGV[3])
end
return {1, 0}`)

// ReadLock is RReadWriteLock.readLock().tryLock with a lease, for owner: it joins a lock
// held for reading, or one that owner holds for writing, or takes a free one for reading.
// Each hold writes its own key, expiring with the lease, and the hash lives at least as
// long as the lease. When a writer other than owner holds the lock, it reports false and
// the lock's remaining time to live.
func (j *Java) ReadLock(ctx context.Context, name, owner string, lease time.Duration) (bool, time.Duration, error) {
	prefix := suffixed(name, owner+":rwlock_timeout")
	return granted(j.run(ctx, readLockScript, []string{name, prefix}, []string{owner, owner + ":write", ms(lease)}))
}

// writeLockScript: KEYS[1] the hash; ARGV[1] the write field, ARGV[2] the lease in ms.
// Replies as lockScript.
var writeLockScript = rueidis.NewLuaScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, 0}
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return {0, redis.call('pttl', KEYS[1])}
end
redis.call('hincrby', KEYS[1], ARGV[1], 1)
redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + tonumber(ARGV[2]))
return {1, 0}`)

// WriteLock is RReadWriteLock.writeLock().tryLock with a lease, for owner: it takes a free
// lock for writing, with the field "<owner>:write", or a further hold when owner holds it
// for writing already (the lease is then added to the remaining time). Otherwise it
// reports false and the lock's remaining time to live.
func (j *Java) WriteLock(ctx context.Context, name, owner string, lease time.Duration) (bool, time.Duration, error) {
	return granted(j.run(ctx, writeLockScript, []string{name}, []string{owner + ":write", ms(lease)}))
}

// writeUnlockScript: KEYS[1] the hash, KEYS[2] the channel; ARGV[1] the write field,
// ARGV[2] the publish command, ARGV[3] the message. Replies as unlockScript.
var writeUnlockScript = rueidis.NewLuaScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  redis.call(ARGV[2], KEYS[2], ARGV[3])
  return -1
end
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if mode ~= 'write' or holds < 1 then return -1 end
if holds > 1 then return redis.call('hincrby', KEYS[1], ARGV[1], -1) end
redis.call('hdel', KEYS[1], ARGV[1])
if redis.call('hlen', KEYS[1]) > 1 then
  redis.call('hset', KEYS[1], 'mode', 'read')
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], ARGV[3])
return 0`)

// WriteUnlock is RReadWriteLock.writeLock().unlock by owner: it releases one of its write
// holds. The last one leaves the lock to owner's own read holds, if it has any (mode
// "read", nothing published), or deletes the hash and publishes "1" on the lock's channel.
// When the lock is gone (its lease ran out, or it was forced) it publishes "1" all the
// same and reports NotHeld (Redisson before 3.32 answered a success).
func (j *Java) WriteUnlock(ctx context.Context, name, owner string) (Unlocked, error) {
	return unlocked(j.run(ctx, writeUnlockScript, []string{name, RWLockChannel(name)}, []string{owner + ":write", j.publish, "1"}))
}

// readUnlockScript: KEYS[1] the hash, KEYS[2] the channel, KEYS[3] the prefix "{<name>}"
// (or the tagged name) of every reader's hold keys; ARGV[1] the owner, ARGV[2] the publish
// command. Replies as unlockScript.
var readUnlockScript = rueidis.NewLuaScript(`
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  redis.call(ARGV[2], KEYS[2], '0')
  return -1
end
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if holds < 1 then return -1 end
redis.call('del', KEYS[3] .. ':' .. ARGV[1] .. ':rwlock_timeout:' .. holds)
if holds > 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], -1)
else
  redis.call('hdel', KEYS[1], ARGV[1])
end
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local n = tonumber(redis.call('hget', KEYS[1], field))
    for k = 1, n or 0 do
      longest = math.max(longest, redis.call('pttl', KEYS[3] .. ':' .. field .. ':rwlock_timeout:' .. k))
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    return holds - 1
  end
  if mode == 'write' then return holds - 1 end
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], '0')
return holds - 1`)

// ReadUnlock is RReadWriteLock.readLock().unlock by owner: it releases the owner's newest
// read hold and deletes that hold's key. While other holds remain (of any reader, or the
// writer's), the hash is set to expire with the longest read hold key left and nothing is
// published; in read mode with no read hold key left alive, or with no hold left at all,
// it deletes the hash and publishes "0" on the lock's channel. When the lock is gone it
// publishes "0" all the same and reports NotHeld (Redisson before 3.32 answered a success).
func (j *Java) ReadUnlock(ctx context.Context, name, owner string) (Unlocked, error) {
	prefix := strings.TrimSuffix(suffixed(name, "x"), ":x")
	return unlocked(j.run(ctx, readUnlockScript, []string{name, RWLockChannel(name), prefix}, []string{owner, j.publish}))
}

// RCountDownLatch.

// trySetCountScript: KEYS[1] the latch, KEYS[2] its channel; ARGV[1] the count, ARGV[2]
// the publish command. Replies 1 if it set the count, else 0.
var trySetCountScript = rueidis.NewLuaScript(`
if not redis.call('set', KEYS[1], ARGV[1], 'nx') then return 0 end
redis.call(ARGV[2], KEYS[2], '1')
return 1`)

// TrySetCount is RCountDownLatch.trySetCount: on an open latch (no key) it sets count and
// publishes "1", and reports true; on a latch with a count it changes nothing.
func (j *Java) TrySetCount(ctx context.Context, name string, count int64) (bool, error) {
	n, err := j.run(ctx, trySetCountScript, []string{name, LatchChannel(name)}, []string{strconv.FormatInt(count, 10), j.publish}).AsInt64()
	return n == 1, err
}

// countDownScript: KEYS[1] the latch, KEYS[2] its channel; ARGV[1] the publish command.
// Replies the count left.
var countDownScript = rueidis.NewLuaScript(`
local left = redis.call('decr', KEYS[1])
if left > 0 then return left end
redis.call('del', KEYS[1])
if left == 0 then redis.call(ARGV[1], KEYS[2], '0') end
return left`)

// CountDown is RCountDownLatch.countDown: it takes one from the count; at zero it deletes
// the key and publishes "0", below zero (a latch that was open) it deletes the key and
// publishes nothing. It returns the count left.
func (j *Java) CountDown(ctx context.Context, name string) (int64, error) {
	return j.run(ctx, countDownScript, []string{name, LatchChannel(name)}, []string{j.publish}).AsInt64()
}

// RSemaphore.

// tryAcquireScript: KEYS[1] the permits; ARGV[1] how many. Replies 1 if it took them.
var tryAcquireScript = rueidis.NewLuaScript(`
local want = tonumber(ARGV[1])
local free = redis.call('get', KEYS[1])
if not free or tonumber(free) < want then return 0 end
redis.call('decrby', KEYS[1], want)
return 1`)

// TryAcquire is RSemaphore.tryAcquire(permits): it takes them if as many are available,
// and reports whether it did.
func (j *Java) TryAcquire(ctx context.Context, name string, permits int64) (bool, error) {
	n, err := j.run(ctx, tryAcquireScript, []string{name}, []string{strconv.FormatInt(permits, 10)}).AsInt64()
	return n == 1, err
}

// releaseScript: KEYS[1] the permits, KEYS[2] the channel; ARGV[1] how many, ARGV[2] the
// publish command. Replies the new count.
var releaseScript = rueidis.NewLuaScript(`
local count = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], tostring(count))
return count`)

// Release is RSemaphore.release(permits): it adds them to the count and publishes the new
// count, which it returns.
func (j *Java) Release(ctx context.Context, name string, permits int64) (int64, error) {
	return j.run(ctx, releaseScript, []string{name, SemaphoreChannel(name)}, []string{strconv.FormatInt(permits, 10), j.publish}).AsInt64()
}

// RPermitExpirableSemaphore.

// leaseAcquireScript: KEYS[1] the permits, KEYS[2] the leases, KEYS[3] the channel;
// ARGV[1] the client's time in ms, ARGV[2] the leases' score, ARGV[3] the publish command,
// ARGV[4…] the new ids, one per permit. Replies 1 if it leased them.
var leaseAcquireScript = rueidis.NewLuaScript(`
local want = #ARGV - 3
local gone = redis.call('zrangebyscore', KEYS[2], '-inf', ARGV[1], 'limit', 0, want)
if #gone > 0 then
  for _, id in ipairs(gone) do redis.call('zrem', KEYS[2], id) end
  local count = redis.call('incrby', KEYS[1], #gone)
  if count > 0 then redis.call(ARGV[3], KEYS[3], tostring(count)) end
end
local free = redis.call('get', KEYS[1])
if not free or tonumber(free) < want then return 0 end
redis.call('decrby', KEYS[1], want)
for i = 4, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]) end
local ttl = redis.call('pttl', KEYS[1])
if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
return 1`)

// LeaseAcquire is RPermitExpirableSemaphore.tryAcquire(0, lease) (acquire() for a lease of
// 0, which never runs out): it leases one permit under a new random id and returns the
// id in hex, as relock's PermitIDs gives ids, or "" when no permit is available.
func (j *Java) LeaseAcquire(ctx context.Context, name string, lease time.Duration) (string, error) {
	now := time.Now().UnixMilli()
	until := Forever
	if lease > 0 {
		until = now + lease.Milliseconds()
	}
	return j.LeaseAcquireUntil(ctx, name, now, until)
}

// LeaseAcquireUntil is LeaseAcquire for a lease that runs out at the Unix time until (ms),
// asked at now (ms): a lease that no time.Duration can say, such as one beyond 292 years.
func (j *Java) LeaseAcquireUntil(ctx context.Context, name string, now, until int64) (string, error) {
	id, err := newID()
	if err != nil {
		return "", err
	}
	ok, err := j.run(ctx, leaseAcquireScript, []string{name, LeasesKey(name), SemaphoreChannel(name)},
		[]string{strconv.FormatInt(now, 10), strconv.FormatInt(until, 10), j.publish, string(id)}).AsInt64()
	if err != nil || ok != 1 {
		return "", err
	}
	return hex.EncodeToString(id), nil
}

// leaseReleaseScript: KEYS[1] the permits, KEYS[2] the leases, KEYS[3] the channel;
// ARGV[1] the id, ARGV[2] the client's time in ms, ARGV[3] the publish command. Replies 1
// if the id was leased and its lease had not run out, else 0.
var leaseReleaseScript = rueidis.NewLuaScript(`
local until_ms = redis.call('zscore', KEYS[2], ARGV[1])
if not until_ms then return 0 end
redis.call('zrem', KEYS[2], ARGV[1])
local count = redis.call('incrby', KEYS[1], 1)
redis.call(ARGV[3], KEYS[3], tostring(count))
if tonumber(until_ms) > tonumber(ARGV[2]) then return 1 end
return 0`)

// LeaseRelease is RPermitExpirableSemaphore.tryRelease(id) for an id in hex: if the id is
// leased it puts its permit back and publishes the count, and it reports whether the id
// was leased and its lease had not run out.
func (j *Java) LeaseRelease(ctx context.Context, name, id string) (bool, error) {
	raw, err := hex.DecodeString(id)
	if err != nil {
		return false, err
	}
	n, err := j.run(ctx, leaseReleaseScript, []string{name, LeasesKey(name), SemaphoreChannel(name)},
		[]string{string(raw), strconv.FormatInt(time.Now().UnixMilli(), 10), j.publish}).AsInt64()
	return n == 1, err
}
