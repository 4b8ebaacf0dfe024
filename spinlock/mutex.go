// Package spinlock is relock's spin lock, with Redisson's RSpinLock semantics: a reentrant
// mutex with the same data as package rlock (a hash from owner to hold count, the lease as
// its expiry), whose waiters subscribe to nothing. A waiter tries again after a back-off
// that starts at 1ms and doubles, with a random part, up to 128ms (Redisson's defaults;
// WithBackOff sets others), and an unlock publishes nothing. Use it where pub/sub is
// unwanted, such as a large cluster on classic pub/sub, whose PUBLISH reaches every node.
//
// Holding works as in package rlock: leases, the watchdog, lease loss, fencing, re-entry.
// A spin lock and an rlock.Mutex (or a Redisson RLock or RSpinLock) of the same name
// exclude each other. Since a spin lock's unlock publishes nothing, a waiter of rlock or
// Redisson's RLock on the same name learns of it only when it looks again, at the latest
// when the holder's lease would have run out.
package spinlock

import (
	"context"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/engine"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/lockopt"
)

// Option changes how a spin lock is taken: package rlock's options (WithLease,
// WithFencing, WithWaitTimeout), which apply to every kind of lock, and this package's
// own. Another kind's option does not compile here.
type Option = lockopt.ForSpin

// The back-off by default, Redisson's: the first wait between tries and the most it grows to.
const (
	DefaultFirstBackOff = lockopt.DefaultSpinFirst
	DefaultMostBackOff  = lockopt.DefaultSpinMost
)

// WithBackOff sets the back-off between a waiter's tries: first, at least 1ms, and
// doubling with a random part up to most, at least first (else the call fails with
// ErrInvalidOption). A waiter never sleeps past the holder's remaining lease as its last
// try saw it.
func WithBackOff(first, most time.Duration) Option {
	return lockopt.Spin(lockopt.BackOff(first, most))
}

// Mutex is a reentrant distributed spin lock, made by relock.Client.SpinLock. Its methods
// are safe for concurrent use; who holds it is decided by the owner in the context, not by
// the goroutine. A Mutex with an invalid name fails every call with ErrInvalidName.
//
// (A Mutex is the engine's lock under this kind's name and documentation: the client
// converts one into the other, so that this package exports no constructor.)
type Mutex engine.Lock

func (m *Mutex) l() *engine.Lock { return lockerr.OrZero((*engine.Lock)(m)) }

// Name returns the lock's name, which is also its Redis key.
func (m *Mutex) Name() string { return m.l().Name() }

// Lock acquires the lock, trying again after each back-off until it is free or ctx is
// done, and returns the hold's context, which ends as described at rlock.Mutex.Lock. A
// re-entry by the owner ctx carries succeeds at once. When ctx ends first, Lock returns
// ctx unchanged and an error for which errors.Is(err, ctx.Err()) holds; when the client
// closes first, ErrClosed.
func (m *Mutex) Lock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.LockWith(m.l(), ctx, opts)
}

// TryLock makes one attempt. It fails with ErrLocked when another owner holds the lock.
func (m *Mutex) TryLock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.TryLockWith(m.l(), ctx, opts)
}

// Unlock releases one hold of the owner ctx carries, and publishes nothing. Otherwise as
// rlock.Mutex.Unlock.
func (m *Mutex) Unlock(ctx context.Context) error { return m.l().Unlock(ctx) }

// Locker returns a sync.Locker on the lock, as rlock.Mutex.Locker.
func (m *Mutex) Locker(ctx context.Context) (sync.Locker, error) { return m.l().Locker(ctx) }

// Extend makes a fixed-lease hold last at least d from now, as rlock.Mutex.Extend.
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

// ForceUnlock deletes the lock whoever holds it and publishes the unlock message, so that
// pub/sub waiters on the name (rlock's, Redisson's) look at once. It reports whether there
// was a lock to delete; a key that holds other data is left untouched (ErrWrongType).
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) { return m.l().ForceUnlock(ctx) }
