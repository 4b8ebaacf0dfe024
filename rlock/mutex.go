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
	"sync"
	"time"

	"github.com/relock-go/relock/internal/engine"
	"github.com/relock-go/relock/internal/lockerr"
)

// Mutex is a reentrant distributed lock, made by relock.Client.Lock. Its methods are safe
// for concurrent use; who holds it is decided by the owner in the context, not by the
// goroutine.
//
// A Mutex with an invalid name is still returned by relock.Client.Lock, so that the
// constructor needs no error; every method then fails with ErrInvalidName.
//
// (A Mutex is the engine's lock under this kind's name and documentation: the client
// converts one into the other, so that this package exports no constructor.)
type Mutex engine.Lock

func (m *Mutex) l() *engine.Lock { return lockerr.OrZero((*engine.Lock)(m)) }

// Name returns the lock's name, which is also its Redis key.
func (m *Mutex) Name() string { return m.l().Name() }

// Lock acquires the lock, waiting until it is free or ctx is done, and returns the hold's
// context: derived from ctx, carrying the owner. If ctx already carries an owner of this
// client that holds the lock, Lock re-enters it and the hold count grows by one.
//
// The hold's context ends when the hold does: with cause ErrLeaseLost (context.Cause) as
// soon as the client learns the hold is gone (a renewal found the owner's field missing,
// renewals could not reach Redis before the lease ran out, or a fixed lease ran out), and
// with context.Canceled at the Unlock that releases it. Its Err reads the hold's deadline
// at every call; its Done channel, and the contexts derived from it, close when the
// client's timer runs, which a stalled process runs late: check Err before each write the
// lock guards (or send a fencing token, WithFencing). Do work that must stop with the
// lock under it; keep ctx for work after the lock. Since it derives from ctx, a hold
// taken with the context of another hold ends when that one does: release nested locks
// in the reverse order of taking them. (A read-write lock's downgrade is the exception:
// see rwlock.RWMutex.RLock.)
//
// While waiting Lock sends nothing to Redis: it is woken by the unlock message, or at
// the latest when the holder's lease runs out; or an Unlock of the same client hands it
// the lock, and it returns holding it without a call of its own. While other waiters of
// the client are in line for the lock, Lock joins them without an attempt, and they get
// it in the order they came (a re-entry never waits). A client hands the lock on at most
// a few times in a row before a release frees it for every client. When ctx ends first (or has ended before
// the call), Lock returns ctx unchanged and an error for which errors.Is(err, ctx.Err())
// holds. The attempt already sent when ctx ends is finished (bounded by the client's
// timeout) rather than abandoned, and if it took the lock, the hold is released again:
// a lock is never left behind unknown to the caller.
//
// Without WithLease the lease is the client's watchdog timeout, renewed until Unlock, or
// until the hold is abandoned: once no reachable context carries its owner (the hold's
// context, one derived from it, the ctx that carried the owner, a relock.NewOwner context),
// nobody can unlock it, so a garbage collection that finds this stops its renewal, and the
// lock frees within one lease. Keep the hold's context until Unlock.
func (m *Mutex) Lock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.LockWith(m.l(), ctx, opts)
}

// TryLock makes one attempt. If another owner holds the lock it returns ctx unchanged and
// an error for which errors.Is(err, ErrLocked) holds.
func (m *Mutex) TryLock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.TryLockWith(m.l(), ctx, opts)
}

// Unlock releases one hold of the owner ctx carries; the lock is free when the hold count
// reaches zero, and then one waiter is woken, the hold's context ends, and no renewal of
// it is sent any more. When a waiter of the same client is parked on the lock, the lock
// is handed to it instead, in the same call: it is never free, and nobody else is woken. It returns an error for which errors.Is(err, ErrNotHeld) holds when
// that owner does not hold the lock, including when ctx carries no owner (then the error
// says to pass the context Lock returned) and when the hold's lease ran out.
//
// The client's view of a lease errs early: a hold's context may end at its local deadline
// a little before the lease runs out in Redis, and an Unlock in that gap still finds the
// hold and releases it.
//
// Unlock uses ctx only to find the owner: it works when ctx is already cancelled, bounded
// by the client's timeout. A call whose reply is lost is sent again, carrying the hold
// count the client expects, which the script compares before it decrements: a retry never
// releases a hold the owner took in the meantime. A retry that finds the hold gone counts
// as released when the first send went out before the hold's local deadline (see
// docs/design.md, "Safe unlock retries without a latch").
//
// When Unlock fails for another reason (Redis unreachable for the whole timeout, an error
// reply), the hold is no longer renewed and its context ends with ErrLeaseLost: the lock
// frees itself when its lease runs out, instead of staying held for a holder that has
// moved on.
func (m *Mutex) Unlock(ctx context.Context) error { return m.l().Unlock(ctx) }

// Locker returns a sync.Locker on the lock, as etcd's concurrency.NewLocker, for code
// that takes one (sync.Cond, a library's hook). Each Lock is taken by a new owner, so
// goroutines that share the Locker exclude each other as with a sync.Mutex; it is not
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
// taken WithFencing. Tokens grow with every first-level acquisition of the lock, by any
// owner of any client; a re-entry keeps its hold's token. It asks nothing of Redis. It
// answers false once the hold has ended (released, lost, or past its lease's local
// deadline, whether or not its context has been told yet): a fenced write must not use the
// token of a hold that may no longer be the owner's.
func (m *Mutex) Token(ctx context.Context) (int64, bool) { return m.l().Token(ctx) }

// HoldCount returns how many times the owner ctx carries holds the lock: 0 when it does
// not hold it or ctx carries no owner.
//
// HoldCount, IsHeld, IsLocked and TTL, like Unlock, use ctx only to find the owner: asked
// with the context of a hold that has ended (released, or its lease lost) they answer for
// that owner rather than fail with the context's error. Their one call to Redis is bounded
// by the client's timeout.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) { return m.l().HoldCount(ctx) }

// IsHeld reports whether the owner ctx carries holds the lock.
func (m *Mutex) IsHeld(ctx context.Context) (bool, error) { return m.l().IsHeld(ctx) }

// IsLocked reports whether any owner holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) { return m.l().IsLocked(ctx) }

// TTL returns the remaining lease of the hold ctx carries. It returns an error for which
// errors.Is(err, ErrNotHeld) holds when that owner does not hold the lock. A lock without
// expiry, which neither relock nor Redisson makes, reports a negative duration.
func (m *Mutex) TTL(ctx context.Context) (time.Duration, error) { return m.l().TTL(ctx) }

// ForceUnlock deletes the lock whoever holds it and wakes a waiter. It reports whether
// there was a lock to delete. A key that holds other data (a hash without a lock's
// shape, or a read-write lock's hash) is left untouched and the call fails with
// ErrWrongType. The former holders learn of it at their next renewal (their
// contexts end with ErrLeaseLost) or when they unlock (ErrNotHeld).
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) { return m.l().ForceUnlock(ctx) }
