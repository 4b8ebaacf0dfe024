// Package fairlock is relock's fair lock: a reentrant mutex that grants the lock in the
// order waiters arrived. Holding works as in package rlock (the same hash, leases,
// watchdog, lease loss, fencing); only waiting differs:
//
//   - Waiters queue in a list, redisson_lock_queue:{name}, in arrival order. Each has its
//     own channel, redisson_lock__channel:{name}:<owner>, and an unlock wakes exactly the
//     next live waiter: no herd, one message per unlock.
//   - A waiter's queue entry carries a deadline in a zset, redisson_lock_timeout:{name}, in
//     Redis time (TIME inside the scripts; client clocks play no part). A live waiter
//     comes back every refresh period (default 5s, WithRefreshPeriod), which pushes its
//     deadline on, so it is never evicted however long it waits. A waiter that died
//     misses its refreshes and is skipped within two refresh periods.
//   - A waiter whose ctx ends leaves the queue at once, passing its turn on if it had
//     come. The queue's keys are deleted when it empties, and expire by themselves if
//     every waiter is gone.
//
// These are relock's own semantics, not Redisson's RedissonFairLock: do not use both on
// one name.
package fairlock

import (
	"context"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/engine"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/lockopt"
)

// Option changes how a fair lock is taken: package rlock's options (WithLease,
// WithFencing, WithWaitTimeout), which apply to every kind of lock, and this package's
// own. A read-write lock's option does not compile here.
type Option = lockopt.ForFair

// DefaultRefreshPeriod is how often a waiter refreshes its queue entry by default.
const DefaultRefreshPeriod = lockopt.DefaultRefresh

// WithRefreshPeriod sets how often a waiter comes back to refresh its queue entry; an
// entry not refreshed for two periods is taken for a dead waiter's and skipped. Shorter
// periods find dead waiters sooner for one small script call per waiter and period. It
// must be at least 10ms, or the call fails with ErrInvalidOption; a period over a hundred
// years is taken as a hundred years.
func WithRefreshPeriod(d time.Duration) Option {
	return lockopt.Fair(lockopt.Refresh(d))
}

// Mutex is a fair, reentrant distributed lock, made by relock.Client.FairLock. Its methods
// are safe for concurrent use; who holds it is decided by the owner in the context, not by
// the goroutine. A Mutex with an invalid name fails every call with ErrInvalidName.
//
// (A Mutex is the engine's lock under this kind's name and documentation: the client
// converts one into the other, so that this package exports no constructor.)
type Mutex engine.Lock

func (m *Mutex) l() *engine.Lock { return lockerr.OrZero((*engine.Lock)(m)) }

// Name returns the lock's name, which is also its Redis key.
func (m *Mutex) Name() string { return m.l().Name() }

// Lock acquires the lock in its turn: it joins the queue and waits until every owner that
// arrived before it has had the lock (or left, or died), or until ctx is done. It returns
// the hold's context, which ends as described at rlock.Mutex.Lock. A re-entry by the
// owner ctx carries does not queue.
//
// When ctx ends first, Lock leaves the queue at once and returns ctx unchanged and an
// error for which errors.Is(err, ctx.Err()) holds.
func (m *Mutex) Lock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.LockWith(m.l(), ctx, opts)
}

// TryLock makes one attempt and never queues. It fails with ErrLocked when another owner
// holds the lock or when others are queued for it: a TryLock does not jump the queue.
func (m *Mutex) TryLock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.TryLockWith(m.l(), ctx, opts)
}

// Unlock releases one hold of the owner ctx carries; when the lock is free it wakes
// exactly the next live waiter. Otherwise as rlock.Mutex.Unlock.
func (m *Mutex) Unlock(ctx context.Context) error { return m.l().Unlock(ctx) }

// Locker returns a sync.Locker on the lock, as etcd's concurrency.NewLocker, for code
// that takes one (sync.Cond, a library's hook). Each Lock is taken by a new owner, so
// goroutines that share the Locker exclude each other as with a sync.Mutex, in their turn; it is not
// reentrant. Lock waits until the lock is taken or ctx ends, and panics with the *Error
// when it cannot take it (ctx ended, the client closed, Redis kept failing): sync.Locker
// has no error to return, and returning without the lock would break mutual exclusion
// unseen. Unlock releases the hold the Locker took, from any goroutine; it panics when the
// Locker holds nothing, as sync.Mutex's does, but not when the release fails: the hold is
// then no longer renewed and frees when its lease runs out. An invalid name is an error
// here, never a panic.
func (m *Mutex) Locker(ctx context.Context) (sync.Locker, error) { return m.l().Locker(ctx) }

// Extend makes the hold of the owner ctx carries last at least d from now, in Redis and in
// the hold's context (less its allowance for clocks, as WithLease says), as
// bsm/redislock's Refresh: for a hold taken WithLease, which the watchdog does not renew.
// It never shortens a lease. It fails with ErrNotHeld when the owner holds nothing (the
// hold's context then ends with ErrLeaseLost, if the client knew of the hold),
// ErrWrongType when the name holds data that is not this kind of lock, and ErrInvalidLease
// for d under a millisecond.
func (m *Mutex) Extend(ctx context.Context, d time.Duration) error { return m.l().Extend(ctx, d) }

// Do locks, runs fn with the hold's context, and unlocks, also when fn panics. It returns
// fn's error joined with Unlock's.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...Option) error {
	return engine.DoWith(m.l(), ctx, fn, opts)
}

// Token returns the fencing token of the hold that the owner in ctx has, when the lock was
// taken WithFencing; false once the hold has ended (see rlock.Mutex.Token).
func (m *Mutex) Token(ctx context.Context) (int64, bool) { return m.l().Token(ctx) }

// HoldCount returns how many times the owner ctx carries holds the lock.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) { return m.l().HoldCount(ctx) }

// IsHeld reports whether the owner ctx carries holds the lock.
func (m *Mutex) IsHeld(ctx context.Context) (bool, error) { return m.l().IsHeld(ctx) }

// IsLocked reports whether any owner holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) { return m.l().IsLocked(ctx) }

// TTL returns the remaining lease of the hold ctx carries, or ErrNotHeld.
func (m *Mutex) TTL(ctx context.Context) (time.Duration, error) { return m.l().TTL(ctx) }

// ForceUnlock deletes the lock whoever holds it and wakes the next live waiter. It reports
// whether there was a lock to delete; a key that holds other data (a hash without a
// lock's shape, or a read-write lock's hash) is left untouched (ErrWrongType).
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) { return m.l().ForceUnlock(ctx) }
