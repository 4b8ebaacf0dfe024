package rlock

import (
	"time"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/lockopt"
)

// Option changes how a lock is taken. Options given to relock.Client.Lock apply to every
// acquisition of that Mutex; options given to Lock, TryLock or Do apply to that call and
// take precedence.
//
// This package's options apply to every kind of lock: packages fairlock and rwlock take
// them as well as their own. An option of another kind (rwlock.WithWriterPreference, say)
// does not compile where a Mutex's option is expected.
type Option = lockopt.Shared

// WithLease takes the lock for a fixed lease that is not renewed: if the holder has not
// unlocked it by then, the lock expires and another owner may take it, and the hold's
// context ends with cause ErrLeaseLost: a hundredth of the lease and 2ms before the lease,
// counted from when the request was sent, runs out, so that it ends first while the
// server's clock runs at most a hundredth fast. The lease must be at least a millisecond (Redis
// counts leases in milliseconds); otherwise the call fails with ErrInvalidLease and
// nothing is sent to Redis. A fraction of a millisecond is dropped, for Redis and for the
// hold's context alike.
//
// A re-entry never shortens what an earlier hold of the same owner was promised: the lock
// then expires at the later of the two ends (Redisson's RLock sets the new lease, which
// may cut the first hold short), and a hold that any of its acquisitions took without
// WithLease is renewed until it is fully released. A partial Unlock leaves the expiry as
// it is.
func WithLease(d time.Duration) Option {
	return func(s *lockopt.Settings) {
		lease, ok := lockopt.Lease(d)
		if !ok {
			s.Invalid(lockerr.ErrInvalidLease)
			return
		}
		s.Lease = lease
	}
}

// WithFencing makes every first-level acquisition take a fencing token: the next value of
// the counter redisson_lock_token:{name}, which never expires (though a restart without
// persistence resets it, as docs/operations.md explains). A re-entry keeps its hold's
// token. Read it with Mutex.Token and send it with every write to the resource the lock
// guards; the resource rejects a token lower than the highest it has seen, which turns
// away a holder that lost its lease without knowing it (a long pause, a failover). See
// ExampleWithFencing.
func WithFencing() Option {
	return func(s *lockopt.Settings) { s.Fencing = true }
}

// WithWaitTimeout bounds how long Lock waits for the lock, and only that, as Redisson's
// tryLock(waitTime, ...) does: when it runs out Lock fails with an error for which
// errors.Is(err, context.DeadlineExceeded) holds. A deadline on the context given to Lock
// bounds the wait too, but the hold's context derives from it and would end at that
// deadline while the lock is still held; WithWaitTimeout's bound does not pass to the
// hold. d must be positive, or the call fails with ErrInvalidOption.
func WithWaitTimeout(d time.Duration) Option {
	return func(s *lockopt.Settings) {
		if d <= 0 {
			s.Invalid(lockerr.ErrInvalidOption)
			return
		}
		s.Wait = d
	}
}
