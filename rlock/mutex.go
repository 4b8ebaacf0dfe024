// Package rlock is relock's reentrant mutex, with Redisson's RLock data layout: the lock is
// a hash from owner ("<client uuid>:<n>") to hold count, with the lease as the key's expiry,
// and an unlock publishes "0" on redisson_lock__channel:{name}. A Go service and a Java
// service using Redisson exclude each other on the same name and wake each other's waiters.
//
// Mutexes are made by relock.Client.Lock. The owner is carried in the context: Lock
// returns a context that carries it, and passing that context (or one derived from it)
// to Lock again re-enters the lock, to Unlock releases one hold.
package rlock

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
)

// Mutex is a reentrant distributed lock. Its methods are safe for concurrent use; who
// holds it is decided by the owner in the context, not by the goroutine.
//
// A Mutex with an invalid name is still returned by relock.Client.Lock, so that the
// constructor needs no error; every method then fails with ErrInvalidName.
type Mutex struct {
	c        *core.Client
	name     string
	channel  string
	latch    string // unlock latch key without the request id
	defaults settings
	err      error // ErrInvalidName, or nil
}

// New returns the mutex named name on c. Use relock.Client.Lock instead: it is the same
// with a public client.
func New(c *core.Client, name string, opts ...Option) *Mutex {
	m := &Mutex{c: c, name: name}
	m.defaults.apply(opts)
	if !keys.Valid(name) {
		m.err = lockerr.ErrInvalidName
		return m
	}
	m.channel = keys.LockChannel(name)
	m.latch = keys.UnlockLatchPrefix(name)
	return m
}

// Name returns the lock's name, which is also its Redis key.
func (m *Mutex) Name() string { return m.name }

// Lock acquires the lock, waiting until it is free or ctx is done, and returns a context
// derived from ctx that carries the owner. If ctx already carries an owner of this client
// that holds the lock, Lock re-enters it and the hold count grows by one.
//
// While waiting Lock sends nothing to Redis: it is woken by the unlock message, or at
// the latest when the holder's lease runs out. When ctx ends first, Lock returns ctx
// unchanged and an error for which errors.Is(err, ctx.Err()) holds. The attempt already
// sent when ctx ends is finished (bounded by the client's timeout) rather than abandoned,
// so that a lock acquired at that moment is never left behind unknown to the caller; if
// ctx is already done Lock may therefore still succeed when the lock is free.
//
// Without WithLease the lease is the client's watchdog timeout.
func (m *Mutex) Lock(ctx context.Context, opts ...Option) (context.Context, error) {
	return m.lock(ctx, "lock", true, opts)
}

// TryLock makes one attempt. If another owner holds the lock it returns ctx unchanged and
// an error for which errors.Is(err, ErrLocked) holds.
func (m *Mutex) TryLock(ctx context.Context, opts ...Option) (context.Context, error) {
	return m.lock(ctx, "trylock", false, opts)
}

func (m *Mutex) lock(ctx context.Context, op string, wait bool, opts []Option) (context.Context, error) {
	s := m.defaults
	s.apply(opts)
	if err := m.check(s.err); err != nil {
		return ctx, m.fail(op, err)
	}
	lease := s.lease
	if lease == 0 {
		lease = m.c.Lease
	}
	held, owner := m.c.Owners.Ensure(ctx)
	a := attempt{m: m, owner: owner, lease: strconv.FormatInt(lease.Milliseconds(), 10)}

	// The uncontended path is this one round trip.
	ttl, ok, err := a.try(ctx)
	if err != nil {
		return ctx, m.fail(op, err)
	}
	if ok {
		return held, nil
	}
	if !wait {
		return ctx, m.fail(op, lockerr.ErrLocked)
	}
	if err := a.wait(ctx, ttl); err != nil {
		return ctx, m.fail(op, err)
	}
	return held, nil
}

// attempt is one Lock call's acquisition: who asks, and for how long.
type attempt struct {
	m     *Mutex
	owner string
	lease string // milliseconds
}

// try runs the acquire script once. It reports whether the owner now holds the lock and,
// if not, the holder's remaining lease, which bounds the next wait.
func (a *attempt) try(ctx context.Context) (time.Duration, bool, error) {
	m := a.m
	dctx, cancel := m.c.Detached(ctx)
	defer cancel()
	pttl, err := lua.RLockAcquire().Exec(dctx, m.c.Redis, []string{m.name}, []string{a.lease, a.owner}).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	return m.waitBound(pttl), false, nil
}

// wait subscribes to the lock's channel and retries on every wake-up until the lock is
// acquired or ctx ends. See package pubsub for why it tries once more after subscribing.
func (a *attempt) wait(ctx context.Context, ttl time.Duration) error {
	sub, err := a.m.c.Hub.Subscribe(a.m.channel)
	if err != nil {
		return err
	}
	defer sub.Release()
	if err := sub.Ready(ctx, ttl); err != nil {
		return err
	}
	for {
		var ok bool
		if ttl, ok, err = a.try(ctx); err != nil || ok {
			return err
		}
		if err := sub.Wait(ctx, ttl); err != nil {
			return err
		}
	}
}

// waitBound turns a holder's PTTL into how long a waiter may sleep before trying again. A
// lock without expiry (not one relock or Redisson made) is looked at again every lease.
func (m *Mutex) waitBound(pttl int64) time.Duration {
	if pttl < 0 {
		return m.c.Lease
	}
	return time.Duration(max(pttl, 1)) * time.Millisecond
}

// Unlock releases one hold of the owner ctx carries; the lock is free when the hold count
// reaches zero, and then one waiter is woken. It returns an error for which
// errors.Is(err, ErrNotHeld) holds when that owner does not hold the lock, including when
// ctx carries no owner and when the hold's lease ran out.
//
// Unlock uses ctx only to find the owner: it works when ctx is already cancelled, bounded
// by the client's timeout. A call whose reply is lost is retried with the same request id,
// and the unlock script answers a retry with the first result, so a retry never releases
// a hold the owner took in the meantime.
func (m *Mutex) Unlock(ctx context.Context) error {
	if err := m.check(nil); err != nil {
		return m.fail("unlock", err)
	}
	owner, ok := m.c.Owners.Of(ctx)
	if !ok {
		return m.fail("unlock", lockerr.ErrNotHeld)
	}
	dctx, cancel := m.c.Detached(ctx)
	defer cancel()
	keys := []string{m.name, m.channel, m.latch + m.c.RequestID()}
	args := []string{pubsub.WakeOne, owner, m.latchTTL(), "publish"}
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 200*time.Millisecond) {
		_, err := lua.RLockUnlock().Exec(dctx, m.c.Redis, keys, args).AsInt64()
		switch {
		case err == nil:
			return nil
		case rueidis.IsRedisNil(err):
			return m.fail("unlock", lockerr.ErrNotHeld)
		case !retryable(err) || !sleep(dctx, backoff):
			return m.fail("unlock", err)
		}
	}
}

// latchTTL keeps an unlock's result for as long as that unlock may be retried.
func (m *Mutex) latchTTL() string {
	return strconv.FormatInt(max(2*m.c.Timeout.Milliseconds(), 1000), 10)
}

// Do locks, runs fn with the lock's context, and unlocks, also when fn panics. It returns
// fn's error joined with Unlock's.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...Option) (err error) {
	held, err := m.Lock(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Unlock(held)) }()
	return fn(held)
}

// HoldCount returns how many times the owner ctx carries holds the lock: 0 when it does
// not hold it or ctx carries no owner.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	st, err := m.state(ctx, "holdcount")
	return int(st.count), err
}

// IsHeld reports whether the owner ctx carries holds the lock.
func (m *Mutex) IsHeld(ctx context.Context) (bool, error) {
	st, err := m.state(ctx, "isheld")
	return st.count > 0, err
}

// IsLocked reports whether any owner holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	st, err := m.state(ctx, "islocked")
	return st.exists, err
}

// TTL returns the remaining lease of the hold ctx carries. It returns an error for which
// errors.Is(err, ErrNotHeld) holds when that owner does not hold the lock. A lock without
// expiry, which neither relock nor Redisson makes, reports a negative duration.
func (m *Mutex) TTL(ctx context.Context) (time.Duration, error) {
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
// there was a lock to delete. A key that holds other data is left untouched and the call
// fails with ErrWrongType. The former holders learn of it when they unlock (ErrNotHeld).
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.check(nil); err != nil {
		return false, m.fail("forceunlock", err)
	}
	n, err := lua.RLockForceUnlock().Exec(ctx, m.c.Redis, []string{m.name, m.channel}, []string{pubsub.WakeOne, "publish"}).AsInt64()
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

func (m *Mutex) state(ctx context.Context, op string) (state, error) {
	if err := m.check(nil); err != nil {
		return state{}, m.fail(op, err)
	}
	owner, _ := m.c.Owners.Of(ctx)
	v, err := lua.RLockState().Exec(ctx, m.c.Redis, []string{m.name}, []string{owner}).AsIntSlice()
	if err == nil && len(v) != 3 {
		err = errors.New("unexpected reply from the state script")
	}
	if err != nil {
		return state{}, m.fail(op, err)
	}
	return state{exists: v[0] == 1, count: v[1], pttl: v[2]}, nil
}

// check returns the error that stops any call before it reaches Redis.
func (m *Mutex) check(optErr error) error {
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
func (m *Mutex) fail(op string, err error) error {
	// Redis puts WRONGTYPE first; miniredis wraps script errors, so look anywhere.
	if re, ok := rueidis.IsRedisErr(err); ok && strings.Contains(re.Error(), "WRONGTYPE") {
		err = lockerr.ErrWrongType
	}
	return lockerr.New(op, m.name, err)
}

// retryable reports whether a call may be sent again: the request may not have reached
// Redis or its reply was lost. A Redis error is an answer, not a failure to get one.
func retryable(err error) bool {
	if _, ok := rueidis.IsRedisErr(err); ok {
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
