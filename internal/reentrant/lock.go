// Package reentrant is the machinery of relock's reentrant locks, shared by package rlock
// (Redisson's RLock) and package fairlock (FIFO): acquisition with its exactly-once retry,
// waiting through the hub, holds and the watchdog, unlock with its latch, and the state
// queries. The two kinds differ only in their scripts and in how waiters are woken.
package reentrant

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/core"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/watchdog"
)

// Kind is a kind of reentrant lock.
type Kind int

const (
	// Plain is Redisson's RLock: waiters share the lock's channel and an unlock wakes one
	// waiter per client, whichever wins the next attempt.
	Plain Kind = iota
	// Fair queues waiters in arrival order; each listens on a channel of its own, and an
	// unlock wakes exactly the next live waiter.
	Fair
	// Read is the read side of Redisson's RReadWriteLock: many owners may hold it at once;
	// each read hold has a timeout key of its own.
	Read
	// Write is the write side of Redisson's RReadWriteLock; its hash field is the owner's
	// with ":write" appended.
	Write
)

// DefaultRefresh is how often a fair lock's waiter refreshes its queue entry.
const DefaultRefresh = 5 * time.Second

// Lock is one reentrant lock. Its methods are safe for concurrent use; who holds it is
// decided by the owner in the context, not by the goroutine. A Lock with an invalid name
// fails every call with ErrInvalidName.
type Lock struct {
	c    *core.Client
	kind Kind
	name string
	// Plain: the lock's channel. Fair: the waiters' channel prefix, to which each
	// waiter's owner is appended.
	channel  string
	latch    string    // unlock latch key without the request id
	keys     [4]string // the scripts' keys: Plain name, token; Fair name, queue, deadlines, token; Write name, writers, token; Read name, writers
	nkeys    int       // how many of keys a call without fencing passes
	prefix   string    // Read, Write: the key prefix "{name}" of read holds' timeout keys
	defaults Settings
	err      error // ErrInvalidName with the reason, or nil
}

// New returns the lock of kind named name on c, with opts as defaults for every call.
func New(c *core.Client, kind Kind, name string, opts []Option) *Lock {
	m := &Lock{c: c, kind: kind, name: name}
	m.defaults.apply(opts)
	if err := keys.Check(name); err != nil {
		m.err = err
		return m
	}
	n := keys.Of(name)
	m.latch = n.Latch
	token := n.Token
	switch kind {
	case Read, Write:
		m.channel = n.RWChannel
		m.prefix = n.Tag
		writers := n.Writers
		if kind == Read {
			m.keys = [4]string{name, writers}
		} else {
			m.keys = [4]string{name, writers, token}
			m.nkeys = 2
		}
	case Fair:
		m.channel = n.FairChannel
		m.keys = [4]string{name, n.Queue, n.Deadlines, token}
		m.nkeys = 3
	default:
		m.channel = n.Channel
		m.keys = [4]string{name, token}
		m.nkeys = 1
	}
	return m
}

// field is the hash field that counts the owner's holds of this lock.
func (m *Lock) field(owner string) string {
	if m.kind == Write {
		return writeField(owner)
	}
	return owner
}

// shape is the shape of the lock's hash, as the scripts name it: "rwlock" for a
// read-write lock, "rlock" for a plain or fair lock.
func (m *Lock) shape() string {
	if m.kind == Read || m.kind == Write {
		return "rwlock"
	}
	return "rlock"
}

// writeField is the hash field that counts the owner's write holds of a read-write lock.
func writeField(owner string) string { return owner + ":write" }

// Name returns the lock's name, which is also its Redis key.
func (m *Lock) Name() string { return m.name }

// Lock acquires the lock, waiting until it is free (for a fair lock: until it is this
// owner's turn) or ctx is done, and returns the hold's context. The front ends (rlock,
// fairlock) document the contract.
func (m *Lock) Lock(ctx context.Context, opts ...Option) (context.Context, error) {
	return m.lock(ctx, "lock", true, opts)
}

// TryLock makes one attempt and never queues.
func (m *Lock) TryLock(ctx context.Context, opts ...Option) (context.Context, error) {
	return m.lock(ctx, "trylock", false, opts)
}

func (m *Lock) lock(ctx context.Context, op string, wait bool, opts []Option) (context.Context, error) {
	s := &m.defaults
	if len(opts) > 0 {
		// Only a call with options pays for a copy: the options see its address.
		own := *s
		own.apply(opts)
		s = &own
	}
	if err := m.check(s.Err); err != nil {
		return ctx, m.fail(op, err)
	}
	lease := s.Lease
	if lease == 0 {
		lease = m.c.Lease
	}
	held, owner := m.c.Owners.Ensure(ctx)
	var writer string // Read: the owner's write field
	if m.kind == Read {
		writer = writeField(owner)
		// A read hold taken with the context of the owner's write hold is the first step
		// of a downgrade: it must outlive the write hold, so it does not derive from it.
		held = m.c.Watchdog.Outside(held, m.name, writer)
	}
	a := attempt{m: m, owner: m.field(owner), lease: lease, leaseMs: m.c.LeaseMs(), renew: s.Lease == 0, refresh: s.refresh()}
	if !a.renew {
		a.leaseMs = strconv.FormatInt(lease.Milliseconds(), 10)
	}
	a.fenced = s.Fencing && m.kind != Read
	a.keys = m.keys[:m.nkeys]
	if a.fenced {
		a.keys = m.keys[:m.nkeys+1]
	}
	switch m.kind {
	case Fair:
		a.args = []string{a.leaseMs, owner, a.entryMs(), flag(wait), m.c.Publish, m.channel, pubsub.Recheck}
	case Read:
		a.keys = []string{m.name, readTimeouts(m.name, owner), m.keys[1]}
		a.args = []string{a.leaseMs, owner, writer, flag(s.WriterPreference)}
	case Write:
		a.preferred = wait && s.WriterPreference
		a.keys = []string{m.name, m.keys[1], readTimeouts(m.name, owner)}
		if a.fenced {
			a.keys = append(a.keys, m.keys[2])
		}
		a.args = []string{a.leaseMs, a.owner, owner, flag(a.preferred), a.entryMs()}
	default:
		a.args = []string{a.leaseMs, owner}
	}

	// A wait bound applies to the attempts and the wait, never to the hold, which derives
	// from ctx: a lock held past the bound stays held, and its context live.
	wctx := ctx
	if s.Wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, s.Wait)
		defer cancel()
	}

	// A caller whose context has ended gets its error, and nothing is sent.
	if err := ctx.Err(); err != nil {
		return ctx, m.fail(op, err)
	}
	// The uncontended path is this one round trip.
	ttl, err := a.try(wctx)
	if err != nil {
		return ctx, m.fail(op, err)
	}
	if ttl == 0 {
		return a.keep(ctx, held, op)
	}
	if !wait {
		return ctx, m.fail(op, lockerr.ErrLocked)
	}
	if err := a.wait(wctx, ttl); err != nil {
		a.leave(ctx)
		return ctx, m.fail(op, err)
	}
	return a.keep(ctx, held, op)
}

// keep registers an acquisition with the watchdog and returns the hold's context; unless
// the caller's context ended while the attempt was in flight (it was finished rather than
// abandoned, so that no hold is left behind unknown): then the hold it took is released
// again, and the caller gets its context's error.
func (a *attempt) keep(ctx, held context.Context, op string) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		dctx, cancel := a.m.c.Detached(ctx)
		defer cancel()
		_, _ = a.m.release(dctx, a.owner)
		return ctx, a.m.fail(op, err)
	}
	return a.hold(held), nil
}

// entryMs is how long the queue entry of a fair waiter or a preferred writer lives without
// a refresh: two refresh periods, so that one missed refresh is not taken for death.
func (a *attempt) entryMs() string {
	return strconv.FormatInt(2*a.refresh.Milliseconds(), 10)
}

// readTimeouts is the prefix of the owner's read holds' timeout keys: hold k lives in
// "<prefix>:k".
func readTimeouts(name, owner string) string {
	return keys.Of(name).ReadTimeouts(owner)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// attempt is one Lock call's acquisition: who asks, for how long, and what it got.
type attempt struct {
	m         *Lock
	owner     string // the hash field: the owner, or its write field
	preferred bool   // Write: registered as a waiting writer (writer preference)
	fenced    bool   // a first-level acquisition takes a fencing token
	lease     time.Duration
	leaseMs   string
	renew     bool
	refresh   time.Duration // Fair, preferred writers: how often a waiter refreshes its entry
	keys      []string
	args      []string
	grant     watchdog.Grant
}

// try makes one acquisition attempt. It returns 0 when the owner now holds the lock, and
// otherwise the holder's remaining lease, which bounds the next wait.
//
// A request whose reply is lost (a dropped connection) may or may not have run. Sending
// it again blindly could count a hold twice, which the owner would never release. So
// after such a failure try asks Redis for the owner's hold count: if it grew beyond what
// this client knew, the request ran and the acquisition stands; if not, it is sent again.
func (a *attempt) try(ctx context.Context) (time.Duration, error) {
	m := a.m
	script := m.acquireScript()
	dctx, cancel := m.c.Detached(ctx)
	defer cancel()
	known := m.c.Watchdog.Count(m.name, a.owner)
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 200*time.Millisecond) {
		sent := time.Now()
		var v []int64
		var err error
		if m.c.SyncReplicas > 0 {
			v, err = a.execSynced(dctx, script)
		} else {
			var buf [3]int64 // the longest reply: read it without allocating
			v, err = ints(buf[:0], script.Exec(dctx, m.c.Redis, a.keys, a.args))
		}
		if err == nil {
			return a.reply(v, sent)
		}
		if !retryable(err) || !sleep(dctx, backoff) {
			return 0, err
		}
		var ran bool
		var rerr error
		ran, known, rerr = a.ran(dctx, known, sent)
		if rerr != nil {
			return 0, err // still unknown: report the failure, never send blindly
		}
		if ran {
			return 0, nil
		}
	}
}

func (m *Lock) acquireScript() *lua.Script {
	switch m.kind {
	case Fair:
		return lua.FairAcquire()
	case Read:
		return lua.RWLockReadAcquire()
	case Write:
		return lua.RWLockWriteAcquire()
	}
	return lua.RLockAcquire()
}

// execSynced runs the acquire script and WAIT in one round trip (in a cluster WAIT goes to
// the node of the script's keys). If the owner got the lock and no replica has it by the
// timeout, the acquisition is rolled back and the attempt fails with ErrNotSynced.
func (a *attempt) execSynced(ctx context.Context, script *lua.Script) ([]int64, error) {
	m := a.m
	rc := m.c.Redis
	send := func(sha bool) []rueidis.RedisResult {
		var eval rueidis.Completed
		if sha {
			eval = rc.B().Evalsha().Sha1(script.SHA1).Numkeys(int64(len(a.keys))).Key(a.keys...).Arg(a.args...).Build()
		} else {
			eval = rc.B().Eval().Script(script.Source).Numkeys(int64(len(a.keys))).Key(a.keys...).Arg(a.args...).Build()
		}
		wait := rc.B().Wait().Numreplicas(int64(m.c.SyncReplicas)).Timeout(m.c.SyncTimeout.Milliseconds()).Build()
		return rc.DoMulti(ctx, eval, wait)
	}
	res := send(true)
	if err, ok := rueidis.IsRedisErr(res[0].Error()); ok && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		res = send(false)
	}
	v, err := res[0].AsIntSlice()
	if err != nil || len(v) != 3 || v[0] != 1 {
		return v, err // not acquired: nothing to sync
	}
	if replicas, err := res[1].AsInt64(); err == nil && replicas > 0 {
		return v, nil
	}
	// Nobody has the grant but the master: a failover now would lose it. Undo it.
	if _, err := m.release(ctx, a.owner); err != nil {
		return nil, errors.Join(lockerr.ErrNotSynced, err)
	}
	return nil, lockerr.ErrNotSynced
}

// ints appends the integers of an array reply to dst, as AsIntSlice would return them.
func ints(dst []int64, r rueidis.RedisResult) ([]int64, error) {
	arr, err := r.ToArray()
	if err != nil {
		return nil, err
	}
	for _, e := range arr {
		n, err := e.AsInt64()
		if err != nil {
			return nil, err
		}
		dst = append(dst, n)
	}
	return dst, nil
}

// reply reads the acquire script's reply.
func (a *attempt) reply(v []int64, sent time.Time) (time.Duration, error) {
	switch {
	case len(v) == 1 && v[0] == 2:
		return 0, lockerr.ErrUpgrade
	case len(v) == 3 && v[0] == 1:
		a.granted(v[1], v[2], sent)
		return 0, nil
	case len(v) == 2 && v[0] == 0:
		return a.m.waitBound(v[1]), nil
	}
	return 0, errors.New("unexpected reply from the acquire script")
}

// ran finds out whether an acquisition whose reply was lost took effect: the owner's hold
// count in Redis is above known, the count before the attempt. If so it records the grant,
// with the fencing token of a first-level hold: the counter's value, since nobody else can
// have taken the lock since. It asks until it gets an answer or ctx ends (a read is safe to
// repeat), and returns the count it found, which is what the next attempt must beat.
func (a *attempt) ran(ctx context.Context, known int64, sent time.Time) (bool, int64, error) {
	m := a.m
	var v []int64
	var err error
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 200*time.Millisecond) {
		v, err = lua.RLockState().Exec(ctx, m.c.Redis, []string{m.name}, []string{a.owner, m.shape()}).AsIntSlice()
		if err == nil && len(v) != 3 {
			err = errors.New("unexpected reply from the state script")
		}
		if err == nil {
			break
		}
		if !retryable(err) || !sleep(ctx, backoff) {
			return false, known, err
		}
	}
	if v[1] <= known {
		return false, v[1], nil
	}
	var token int64
	if a.fenced && v[1] == 1 {
		if token, err = m.c.Redis.Do(ctx, m.c.Redis.B().Get().Key(m.keys[m.nkeys]).Build()).AsInt64(); err != nil {
			return false, known, err
		}
	}
	a.granted(v[1], token, sent)
	return true, v[1], nil
}

// granted records what the acquisition got.
func (a *attempt) granted(count, token int64, sent time.Time) {
	a.grant = watchdog.Grant{Name: a.m.name, Owner: a.owner, Count: count, Token: token, Fenced: a.fenced,
		Sent: sent, Lease: a.lease, Renew: a.renew, Prefix: a.m.prefix}
	if a.m.kind == Read {
		// The read acquire script's third value says whether the hold was taken beside
		// the owner's write hold.
		a.grant.Token, a.grant.KeepsWrite = 0, token == 1
	}
}

// hold registers the acquisition with the watchdog and returns the hold's context.
func (a *attempt) hold(held context.Context) context.Context {
	return a.m.c.Watchdog.Acquired(held, a.grant)
}

// wait subscribes to the channel that announces this waiter's chance and retries on every
// wake-up until the lock is acquired or ctx ends. See package pubsub for why it tries once
// more after subscribing. A fair waiter comes back at least every refresh period, which
// refreshes its queue entry, so that it is never taken for dead.
func (a *attempt) wait(ctx context.Context, ttl time.Duration) error {
	channel := a.m.channel
	refreshes := a.m.kind == Fair || a.preferred
	if a.m.kind == Fair {
		channel += a.owner
	}
	if refreshes {
		ttl = min(ttl, a.refresh)
	}
	sub, err := a.m.c.Hub.Subscribe(channel)
	if err != nil {
		return err
	}
	defer sub.Release()
	if err := sub.Ready(ctx, ttl); err != nil {
		return err
	}
	for {
		if ttl, err = a.try(ctx); err != nil || ttl == 0 {
			if err == nil && a.m.kind != Fair {
				sub.PassOn() // a fair waiter's channel is its own
			}
			return err
		}
		if refreshes {
			ttl = min(ttl, a.refresh)
		}
		if err := sub.Wait(ctx, ttl); err != nil {
			return err
		}
	}
}

// leave takes a waiter that gives up out of the queue at once: a fair waiter passes its
// turn on if it had come, a preferred writer stops holding readers back. Best effort: an
// entry left behind is skipped once it runs out.
func (a *attempt) leave(ctx context.Context) {
	m := a.m
	if m.kind != Fair && !a.preferred {
		return
	}
	dctx, cancel := m.c.Detached(ctx)
	defer cancel()
	if m.kind == Fair {
		_ = lua.FairRelease().Exec(dctx, m.c.Redis, m.keys[:3],
			[]string{"leave", a.owner, "0", m.c.Publish, m.channel, pubsub.WakeOne}).Error()
		return
	}
	_ = m.c.Redis.Do(dctx, m.c.Redis.B().Zrem().Key(m.keys[1]).Member(a.owner).Build()).Error()
}

// waitBound turns a holder's PTTL into how long a waiter may sleep before trying again. A
// lock without expiry (not one relock or Redisson made) is looked at again every lease.
//
// A lock that is gone (-2) ran out between the script's look and its PTTL, which a server
// whose clock moves during a script (miniredis) lets happen: try again at once. (A waiter
// that gives way to another while the lock is free is told how long instead.)
func (m *Lock) waitBound(pttl int64) time.Duration {
	switch {
	case pttl == -2:
		return time.Millisecond
	case pttl < 0:
		return m.c.Lease
	}
	return time.Duration(max(pttl, 1)) * time.Millisecond
}

// Unlock releases one hold of the owner ctx carries.
func (m *Lock) Unlock(ctx context.Context) error {
	if err := m.check(nil); err != nil {
		return m.fail("unlock", err)
	}
	owner, ok := m.c.Owners.Of(ctx)
	if !ok {
		return m.fail("unlock", lockerr.ErrNotHeld)
	}
	owner = m.field(owner)
	dctx, cancel := m.c.Detached(ctx)
	defer cancel()
	switch released, err := m.release(dctx, owner); {
	case err == nil:
		if released != 0 {
			m.c.Watchdog.Released(m.name, owner)
		} else {
			m.c.Watchdog.Unlocked(m.name, owner)
		}
		return nil
	default:
		// Not held, or unknown: the unlock may not have run. Either way renewal stops, so
		// that a lock whose unlock failed frees itself when its lease runs out rather than
		// being kept alive by a holder that has moved on; the hold's context ends.
		m.c.Watchdog.Lost(m.name, owner)
		return m.fail("unlock", err)
	}
}

// release runs the kind's unlock script for one hold of field, retrying lost replies with
// one request id, and returns 0 when field still holds the lock, 1 when the lock is free,
// 2 when field's holds are gone but others hold the lock (a read-write lock's other
// readers, or the owner's read holds after its write hold), and ErrNotHeld when field
// holds nothing.
func (m *Lock) release(ctx context.Context, field string) (int64, error) {
	// The latch key, "redisson_unlock_latch:{name}:<request id>", built in one allocation
	// (a stack buffer, unless the name is long).
	var buf [160]byte
	latch := string(m.c.AppendRequestID(append(buf[:0], m.latch...)))
	script := lua.RLockUnlock()
	keys := []string{m.name, m.channel, latch}
	args := []string{pubsub.WakeOne, field, m.latchTTL(), m.c.Publish}
	switch m.kind {
	case Fair:
		script = lua.FairRelease()
		keys = []string{m.keys[0], m.keys[1], m.keys[2], latch}
		args = []string{"unlock", field, m.latchTTL(), m.c.Publish, m.channel, pubsub.WakeOne}
	case Read, Write:
		side := "read"
		if m.kind == Write {
			side = "write"
		}
		script = lua.RWLockUnlock()
		keys = []string{m.name, m.channel, latch, m.prefix, m.keys[1]}
		args = []string{field, side, m.latchTTL(), m.c.Publish}
	}
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 200*time.Millisecond) {
		released, err := script.Exec(ctx, m.c.Redis, keys, args).AsInt64()
		switch {
		case err == nil:
			return released, nil
		case rueidis.IsRedisNil(err):
			return 0, lockerr.ErrNotHeld
		case !retryable(err) || !sleep(ctx, backoff):
			return 0, err
		}
	}
}

// latchTTL keeps an unlock's result for as long as that unlock may be retried.
func (m *Lock) latchTTL() string {
	return strconv.FormatInt(max(2*m.c.Timeout.Milliseconds(), 1000), 10)
}

// Do locks, runs fn with the hold's context, and unlocks, also when fn panics.
func (m *Lock) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...Option) (err error) {
	held, err := m.Lock(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Unlock(held)) }()
	return fn(held)
}

// Token returns the fencing token of the hold that the owner in ctx has, when the lock was
// taken WithFencing. Tokens grow with every first-level acquisition of the lock, by any
// owner of any client; a re-entry keeps its hold's token. It asks nothing of Redis.
func (m *Lock) Token(ctx context.Context) (int64, bool) {
	owner, ok := m.c.Owners.Of(ctx)
	if !ok || m.err != nil {
		return 0, false
	}
	return m.c.Watchdog.Token(m.name, m.field(owner))
}

// HoldCount returns how many times the owner ctx carries holds the lock: 0 when it does
// not hold it or ctx carries no owner.
func (m *Lock) HoldCount(ctx context.Context) (int, error) {
	st, err := m.state(ctx, "holdcount")
	return int(st.count), err
}

// IsHeld reports whether the owner ctx carries holds the lock.
func (m *Lock) IsHeld(ctx context.Context) (bool, error) {
	st, err := m.state(ctx, "isheld")
	return st.count > 0, err
}

// IsLocked reports whether any owner holds the lock.
func (m *Lock) IsLocked(ctx context.Context) (bool, error) {
	st, err := m.state(ctx, "islocked")
	return st.exists, err
}

// TTL returns the remaining lease of the hold ctx carries. It returns an error for which
// errors.Is(err, ErrNotHeld) holds when that owner does not hold the lock. A lock without
// expiry, which neither relock nor Redisson makes, reports a negative duration.
func (m *Lock) TTL(ctx context.Context) (time.Duration, error) {
	st, err := m.state(ctx, "ttl")
	if err != nil {
		return 0, err
	}
	if st.count == 0 {
		return 0, m.fail("ttl", lockerr.ErrNotHeld)
	}
	if st.pttl < 0 {
		return -1, nil
	}
	return time.Duration(st.pttl) * time.Millisecond, nil
}

// ForceUnlock deletes the lock whoever holds it and wakes a waiter. It reports whether
// there was a lock to delete.
func (m *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.check(nil); err != nil {
		return false, m.fail("forceunlock", err)
	}
	var n int64
	var err error
	if m.kind == Fair {
		n, err = lua.FairRelease().Exec(ctx, m.c.Redis, m.keys[:3],
			[]string{"force", "", "0", m.c.Publish, m.channel, pubsub.WakeOne}).AsInt64()
	} else {
		// A read-write lock's waiters may all try once it is gone: readers can all enter.
		msg := pubsub.WakeOne
		if m.kind == Read || m.kind == Write {
			msg = pubsub.WakeAll
		}
		n, err = lua.RLockForceUnlock().Exec(ctx, m.c.Redis, []string{m.name, m.channel}, []string{msg, m.c.Publish, m.shape()}).AsInt64()
	}
	if err != nil {
		return false, m.fail("forceunlock", err)
	}
	return n == 1, nil
}

type state struct {
	exists bool
	count  int64
	pttl   int64
}

func (m *Lock) state(ctx context.Context, op string) (state, error) {
	if err := m.check(nil); err != nil {
		return state{}, m.fail(op, err)
	}
	field := ""
	if owner, ok := m.c.Owners.Of(ctx); ok {
		field = m.field(owner)
	}
	// As Unlock, a query uses ctx only to find the owner: asked with the context of a hold
	// that has ended, it must answer "not held", not the context's error.
	dctx, cancel := m.c.Detached(ctx)
	defer cancel()
	v, err := lua.RLockState().Exec(dctx, m.c.Redis, []string{m.name}, []string{field, m.shape()}).AsIntSlice()
	if err == nil && len(v) != 3 {
		err = errors.New("unexpected reply from the state script")
	}
	if err != nil {
		return state{}, m.fail(op, err)
	}
	return state{exists: v[0] == 1, count: v[1], pttl: v[2]}, nil
}

// check returns the error that stops any call before it reaches Redis.
func (m *Lock) check(optErr error) error {
	switch {
	case m.err != nil:
		return m.err
	case optErr != nil:
		return optErr
	case m.c.Closed():
		return lockerr.ErrClosed
	}
	return nil
}

// fail wraps err with the operation and the lock's name, and turns Redis's WRONGTYPE
// into ErrWrongType.
func (m *Lock) fail(op string, err error) error {
	// Redis puts WRONGTYPE first; miniredis wraps script errors, so look anywhere.
	if re, ok := rueidis.IsRedisErr(err); ok && strings.Contains(re.Error(), "WRONGTYPE") {
		err = lockerr.ErrWrongType
	}
	return lockerr.New(op, m.name, err)
}

// retryable reports whether a call may be sent again: the request may not have reached
// Redis or its reply was lost. A Redis error is an answer, not a failure to get one, and
// so is a verdict of relock's own (ErrNotSynced); except the answers that say the command
// was refused unrun until the server or the cluster is ready (CLUSTERDOWN and TRYAGAIN
// during a failover, LOADING after a restart).
func retryable(err error) bool {
	if re, ok := rueidis.IsRedisErr(err); ok {
		return re.IsClusterDown() || re.IsTryAgain() || re.IsLoading()
	}
	if errors.Is(err, lockerr.ErrNotSynced) {
		return false
	}
	return !errors.Is(err, rueidis.ErrClosing) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// sleep waits d unless ctx ends first; it reports whether the full d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
