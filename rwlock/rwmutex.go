// Package rwlock is relock's reentrant read-write lock, with Redisson's RReadWriteLock data
// layout, so that Go and Java readers and writers share one lock:
//
//   - the hash <name> with mode = read | write, a field "<owner>" counting the owner's read
//     holds and a field "<owner>:write" counting its write holds;
//   - one key per read hold, {<name>}:<owner>:rwlock_timeout:<k>, expiring with the lease,
//     so that a reader that dies releases its share by itself;
//   - the channel redisson_rwlock:{<name>}: "1" when the writer leaves (every waiter may
//     try: readers can all enter), "0" when the last reader leaves (one may try).
//
// Many owners may hold the read lock at once; the write lock excludes everyone else. A
// writer may take read holds too (downgrade: after it releases the write hold it is a
// reader). A reader asking for the write lock gets ErrUpgrade at once, where Redisson
// would block until its timeout: two readers upgrading would wait for each other forever.
//
// With WithWriterPreference, once a writer waits, new relock readers wait behind it, so a
// stream of readers cannot starve writers. It is off by default because Redisson's readers
// do not know of it: a Java reader would still enter.
package rwlock

import (
	"context"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/engine"
	"github.com/relock-go/relock/internal/lockopt"
)

// Option changes how a read or write hold is taken: package rlock's options (WithLease,
// WithFencing, WithWaitTimeout), which apply to every kind of lock, and this package's
// own. A fair lock's option does not compile here.
//
// Of rlock's options: a fixed lease (rlock.WithLease) ends all read holds of one owner
// together, at the latest end any of them was promised; a write hold shares the lock's hash
// with its owner's read holds of the lock, so it lasts at least as long as they do, and
// its context ends only once Redis lets it go. rlock.WithFencing makes every first-level
// write acquisition take a fencing token; read holds carry no token.
type Option = lockopt.ForRW

// WithWriterPreference makes new readers wait while a writer is waiting (a re-entering
// reader and a writer taking read holds never wait). A waiting writer registers in the
// zset relock_rwlock_writers:{name} and refreshes its entry every refresh period
// (WithRefreshPeriod); a writer that dies stops holding readers back within two periods.
// Give the option to the readers and the writers of a lock: readers decide to give way,
// writers decide to register.
func WithWriterPreference() Option {
	return lockopt.RW(func(s *lockopt.Settings) { s.WriterPreference = true })
}

// WithRefreshPeriod sets how often a waiting writer under writer preference refreshes its
// entry (default 5s, at least 10ms, or the call fails with ErrInvalidOption; a period over
// a hundred years is taken as a hundred years).
func WithRefreshPeriod(d time.Duration) Option {
	return lockopt.RW(lockopt.Refresh(d))
}

// RWMutex is a reentrant distributed read-write lock, made by relock.Client.RWLock. Its
// methods are safe for concurrent use; who holds it is decided by the owner in the
// context. An RWMutex with an invalid name fails every call with ErrInvalidName.
//
// (An RWMutex is the engine's pair of read and write sides under this kind's name and
// documentation: the client converts one into the other, so that this package exports no
// constructor.)
type RWMutex engine.RW

func (m *RWMutex) r() *engine.Lock { return (*engine.RW)(m).Read() }
func (m *RWMutex) w() *engine.Lock { return (*engine.RW)(m).Write() }

// Name returns the lock's name, which is also its Redis key.
func (m *RWMutex) Name() string { return m.w().Name() }

// RLock takes a read hold, waiting while a writer holds the lock (or, with writer
// preference, while a writer waits), and returns the hold's context; see rlock.Mutex.Lock
// for when it ends. The owner in ctx may take read holds again (re-entry), and may take
// them while it holds the write lock. A read hold taken with the write hold's own context
// is the first step of a downgrade: its context derives from what the write hold's
// derives from, not from the write hold's, so that it lives on after Unlock.
func (m *RWMutex) RLock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.LockWith(m.r(), ctx, opts)
}

// TryRLock makes one attempt at a read hold; it fails with ErrLocked when another owner
// writes.
func (m *RWMutex) TryRLock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.TryLockWith(m.r(), ctx, opts)
}

// RUnlock releases one read hold of the owner ctx carries. When the last reader leaves,
// one waiting writer (or reader) is woken. It returns ErrNotHeld when the owner has no
// read hold. Failures are as for rlock.Mutex.Unlock: the hold is not renewed after one.
func (m *RWMutex) RUnlock(ctx context.Context) error { return m.r().Unlock(ctx) }

// RDo takes a read hold, runs fn with the hold's context, and releases it, also when fn
// panics.
func (m *RWMutex) RDo(ctx context.Context, fn func(ctx context.Context) error, opts ...Option) error {
	return engine.DoWith(m.r(), ctx, fn, opts)
}

// Lock takes the write lock, waiting until no other owner holds the lock in any mode, and
// returns the hold's context. The owner in ctx may re-enter it. An owner that holds only
// read holds gets ErrUpgrade at once.
func (m *RWMutex) Lock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.LockWith(m.w(), ctx, opts)
}

// TryLock makes one attempt at the write lock; it fails with ErrLocked when another owner
// holds the lock, and with ErrUpgrade when the owner holds read holds only.
func (m *RWMutex) TryLock(ctx context.Context, opts ...Option) (context.Context, error) {
	return engine.TryLockWith(m.w(), ctx, opts)
}

// Unlock releases one write hold of the owner ctx carries. When the writer leaves and no
// reader remains, every waiter is woken; when it keeps read holds (downgrade), the lock
// turns to read mode and waiting readers are let in. Failures are as for
// rlock.Mutex.Unlock: the hold is not renewed after one.
func (m *RWMutex) Unlock(ctx context.Context) error { return m.w().Unlock(ctx) }

// Extend makes the write hold of the owner ctx carries last at least d from now, as
// rlock.Mutex.Extend does; RExtend does it for its read holds.
func (m *RWMutex) Extend(ctx context.Context, d time.Duration) error { return m.w().Extend(ctx, d) }

// RExtend makes the read holds of the owner ctx carries last at least d from now, as
// rlock.Mutex.Extend does.
func (m *RWMutex) RExtend(ctx context.Context, d time.Duration) error { return m.r().Extend(ctx, d) }

// Do takes the write lock, runs fn with the hold's context, and releases it, also when fn
// panics.
func (m *RWMutex) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...Option) error {
	return engine.DoWith(m.w(), ctx, fn, opts)
}

// Locker returns a sync.Locker on the write lock, as etcd's concurrency.NewLocker, for code
// that takes one (sync.Cond, a library's hook). Each Lock is taken by a new owner, so
// goroutines that share the Locker exclude each other as with a sync.Mutex; it is not
// reentrant. Lock waits until the lock is taken or ctx ends, and panics with the *Error
// when it cannot take it (ctx ended, the client closed, Redis kept failing): sync.Locker
// has no error to return, and returning without the lock would break mutual exclusion
// unseen. Unlock releases the hold the Locker took, from any goroutine; it panics when the
// Locker holds nothing, as sync.Mutex's does, but not when the release fails: the hold is
// then no longer renewed and frees when its lease runs out. An invalid name is an error
// here, never a panic.
func (m *RWMutex) Locker(ctx context.Context) (sync.Locker, error) { return m.w().Locker(ctx) }

// RLocker returns a sync.Locker on the read lock, as sync.RWMutex.RLocker: its Lock and
// Unlock take and release read holds, each by a new owner, so goroutines that share it
// read together. It panics as Locker's does.
func (m *RWMutex) RLocker(ctx context.Context) (sync.Locker, error) { return m.r().Locker(ctx) }

// RHoldCount returns how many read holds the owner ctx carries has.
func (m *RWMutex) RHoldCount(ctx context.Context) (int, error) { return m.r().HoldCount(ctx) }

// HoldCount returns how many write holds the owner ctx carries has.
func (m *RWMutex) HoldCount(ctx context.Context) (int, error) { return m.w().HoldCount(ctx) }

// IsHeld reports whether the owner ctx carries holds the write lock (as Redisson's
// writeLock().isHeldByCurrentThread()); RHoldCount tells of its read holds.
func (m *RWMutex) IsHeld(ctx context.Context) (bool, error) { return m.w().IsHeld(ctx) }

// IsLocked reports whether anyone holds the lock, in either mode.
func (m *RWMutex) IsLocked(ctx context.Context) (bool, error) { return m.w().IsLocked(ctx) }

// TTL returns the remaining lease of the lock while the owner ctx carries holds it in
// either mode, or ErrNotHeld.
func (m *RWMutex) TTL(ctx context.Context) (time.Duration, error) {
	if d, err := m.w().TTL(ctx); err == nil {
		return d, nil
	}
	return m.r().TTL(ctx)
}

// Token returns the fencing token of the owner's write hold, when taken WithFencing; false
// once the hold has ended (see rlock.Mutex.Token).
func (m *RWMutex) Token(ctx context.Context) (int64, bool) { return m.w().Token(ctx) }

// ForceUnlock deletes the lock whoever holds it, in either mode, and wakes every waiter.
// It reports whether there was a lock to delete. The read holds' timeout keys expire by
// themselves. A key that holds other data (a hash without a read-write lock's shape) is
// left untouched and the call fails with ErrWrongType.
func (m *RWMutex) ForceUnlock(ctx context.Context) (bool, error) { return m.w().ForceUnlock(ctx) }
