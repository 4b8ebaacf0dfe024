// Package semaphore is relock's distributed semaphore, with Redisson's RSemaphore data: the
// semaphore is a string key holding the available permits, and a release publishes the new
// count on redisson_sc:{name}, which wakes waiters of relock and of Redisson alike. A Go
// service and a Java service share one semaphore by its name.
//
// Its shape follows golang.org/x/sync/semaphore: a context first and a number of permits,
// waits that end with the context, and first come, first served among waiters (exactly
// within a client, by client across clients: see Order). Semaphores are made by
// relock.Client.Semaphore.
//
// # Order
//
// relock's waiters are served in turn, so that a large request is never starved by a
// stream of small ones (Redisson's clients take any permits they find, and a request for
// many can wait forever behind requests for few). The order has two levels:
//
//   - Within a client, first come, first served. An Acquire that finds none of its
//     client's waiters queued tries at once, beside the client's other attempts; once one
//     waits, the client's later Acquires queue behind it in memory.
//   - Across clients, by the client's place in Redis's queue (relock_semaphore_queue:{name},
//     relock_semaphore_timeout:{name}), which only the first of a client's waiters holds.
//     When it is served, the client's next waiter takes the client's place anew, at the end
//     of the line: behind every client that queued meanwhile, even one whose waiter came
//     after it. So once its client has queued it in Redis, a waiter is served after at
//     most one waiter of each client in line before it, and no client passes it twice.
//
// While a live waiter is ahead, nobody of relock takes permits, even permits enough for a
// smaller request: as with x/sync's semaphore, a request for more permits than there will
// ever be blocks those behind it until its context ends. A waiting client refreshes its
// entry every third of its watchdog timeout, and one that died is skipped once its entry
// runs out, within one watchdog timeout. Redisson's clients do not see the queue.
//
// # Permits held
//
// A client counts the permits it took, and Release gives back only those: releasing more
// is refused with ErrNotHeld. To put in permits that nobody took (Redisson's release
// without an acquire), use AddPermits. A process that dies with plain permits loses them,
// as with Redisson's RSemaphore, and so does a client that closes (Close gives back
// leased permits only); set the count again with AddPermits, or take leases.
//
// # Leased permits
//
// AcquireLease takes permits that come back by themselves when their holder dies, and
// stay taken as long as it lives. They are kept as Redisson's RPermitExpirableSemaphore
// keeps its permits: each under an id of its own in the zset {<name>}:timeout, scored by
// the Unix time in milliseconds when it runs out, so that a Java service's
// RPermitExpirableSemaphore of the same name sees them, and its permits are theirs. The
// client's watchdog renews a lease every third of its watchdog timeout, as it renews a
// lock's hold, and the lease's context ends with ErrLeaseLost when a renewal finds one of
// its permits gone (or when the client cannot renew it in time); ReleaseLease gives the
// permits back. A lease taken while the count has an expiry (an application's, or
// Redisson's expire) goes with the semaphore, as Redisson's does: its permits take the
// count's expiry, and its context ends by then, however it is renewed. A lease of a
// process that dies, or whose context is dropped without ReleaseLease (it is then
// abandoned, as a lock's hold is), runs out within one watchdog timeout. Every call of the semaphore's that counts the permits first puts back those
// whose lease ran out, as Redisson's calls do (but an acquisition that finds enough
// permits free without them, which leaves them for the next call that counts), and a
// waiter first in line tries again when the next lease runs out, so no release is needed
// to bring them back.
//
// Plain and leased permits are one count: a semaphore may hand out both, and AddPermits,
// AvailablePermits and Drain see them alike.
//
// # Counts
//
// A semaphore counts exactly from -(2^53-1) to 2^53-1 (about nine quadrillion): its scripts
// add and compare counts as Lua numbers, which are exact that far. A call that asks for more
// permits than that, or an AddPermits that would take the count out of that range, is
// refused with ErrInvalidCount and changes nothing (permits leased count with the count
// there, as they come back to it: an AddPermits or TrySetPermits that a lease given back
// would take beyond 2^53-1 is refused too); so is every call on a key that holds a
// whole number beyond it, which something else wrote (Redisson's RSemaphore counts in 32
// bits, far inside it).
package semaphore

import (
	"context"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/permits"
)

// Weighted is a distributed semaphore, made by relock.Client.Semaphore. Its methods are safe
// for concurrent use. Errors name the semaphore and match relock's error values with
// errors.Is: ErrInvalidCount for a count out of range (see Counts), ErrNotHeld for a
// release of permits the client does not hold, ErrWrongType when the key holds anything
// but a whole number (it is left untouched), ErrInvalidName, ErrClosed.
//
// A Weighted with an invalid name is still returned by relock.Client.Semaphore, so that the
// constructor needs no error; every method then fails with ErrInvalidName.
type Weighted permits.Semaphore

func (s *Weighted) s() *permits.Semaphore { return lockerr.OrZero((*permits.Semaphore)(s)) }

// Name returns the semaphore's name, which is also its Redis key.
func (s *Weighted) Name() string { return s.s().Name() }

// Acquire takes n permits (n from 1 to 2^53-1), waiting until they are available and every
// waiter that came before has been served, or until ctx ends. While waiting it sends nothing to
// Redis but a refresh of its client's queue entry every third of the watchdog timeout: it
// is woken by the release that makes permits available. When ctx ends first (or has ended
// before the call), Acquire takes nothing and returns an error for which errors.Is(err,
// ctx.Err()) holds; an attempt already sent is finished, and if it took the permits,
// Acquire returns nil.
func (s *Weighted) Acquire(ctx context.Context, n int64) error { return s.s().Acquire(ctx, n) }

// TryAcquire makes one attempt to take n permits (n from 1 to 2^53-1), without waiting,
// and reports whether it took them. It fails (false, nil) when fewer are available, and also
// when relock waiters are queued for the semaphore, in this process or another, as
// x/sync's TryAcquire does.
func (s *Weighted) TryAcquire(ctx context.Context, n int64) (bool, error) {
	return s.s().TryAcquire(ctx, n)
}

// Release gives back n permits (n from 1 to 2^53-1) that this client took, and publishes
// the new count, which wakes waiters. It returns ErrNotHeld, and changes nothing, when the
// client holds fewer. It works when ctx has ended: its call is bounded by the client's
// timeout.
//
// Every call that takes or gives back permits is sent again, within the client's timeout,
// while Redis refuses it unrun (LOADING after a restart, CLUSTERDOWN or TRYAGAIN in a
// failover); one whose reply was lost is not, since it may have run, and returns the
// connection's error.
func (s *Weighted) Release(ctx context.Context, n int64) error { return s.s().Release(ctx, n) }

// TrySetPermits sets the available permits to n (n from 0 to 2^53-1) if the semaphore has
// no count yet, as Redisson's trySetPermits does, and reports whether it did.
func (s *Weighted) TrySetPermits(ctx context.Context, n int64) (bool, error) {
	return s.s().TrySetPermits(ctx, n)
}

// AddPermits adds n permits that nobody took, or takes -n away when n is negative (the
// count may then fall below zero, and acquisitions wait until it is back), as Redisson's
// addPermits does. A count above zero is published, which wakes waiters. n must not be 0,
// and the count must stay within ±(2^53-1) (see Counts).
func (s *Weighted) AddPermits(ctx context.Context, n int64) error { return s.s().AddPermits(ctx, n) }

// AvailablePermits returns the permits available now, after putting back leased permits
// whose lease ran out: 0 when the semaphore has no count.
func (s *Weighted) AvailablePermits(ctx context.Context) (int64, error) {
	return s.s().AvailablePermits(ctx)
}

// Drain takes every available permit (leased permits whose lease ran out included) and
// returns how many it took, as Redisson's drainPermits does. They are not the client's to release: add them back with AddPermits.
func (s *Weighted) Drain(ctx context.Context) (int64, error) { return s.s().Drain(ctx) }

// AcquireLease takes n permits (n from 1 to 10,000: each has an id) as a lease, waiting as Acquire does (in the
// same order as the semaphore's other waiters), and returns the lease's context, derived
// from ctx. The watchdog renews the lease until ReleaseLease; the context ends when the
// lease does: with cause ErrLeaseLost when it is lost, ErrClosed when the client closes
// (which gives the permits back), or when ctx ends. Keep the context until ReleaseLease: a
// lease whose context became unreachable is abandoned, and runs out within a watchdog
// timeout. When ctx ends first, AcquireLease takes nothing and returns ctx and an error for
// which errors.Is(err, ctx.Err()) holds. To bound the wait without ending the lease's
// context with it, use WithWaitTimeout rather than a deadline on ctx. An attempt whose
// reply was lost is not sent again: AcquireLease returns the connection's error, and gives
// back whatever permits the lost request took under the lease's ids, so that none stay
// leased behind an error (plain permits cannot be told apart: see Release).
//
// The context answers for the owner of ctx, so that a lock taken with it re-enters a lock
// held through ctx.
func (s *Weighted) AcquireLease(ctx context.Context, n int64, opts ...LeaseOption) (context.Context, error) {
	var o permits.LeaseSettings
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return s.s().AcquireLease(ctx, n, o)
}

// TryAcquireLease makes one attempt to take n permits (n from 1 to 10,000) as a lease, without
// waiting. It returns the lease's context and true when it took them, and ctx and false
// when fewer are available or relock waiters are queued, as TryAcquire does.
func (s *Weighted) TryAcquireLease(ctx context.Context, n int64) (context.Context, bool, error) {
	return s.s().TryAcquireLease(ctx, n)
}

// ReleaseLease gives back the permits of the lease that held carries (the context
// AcquireLease returned, or one derived from it) and publishes the new count, which wakes
// waiters; the lease's context ends with context.Canceled and no cause. It returns
// ErrNotHeld when held carries no lease of this semaphore, and when the lease was lost
// (its permits that were still there are given back all the same). It works when held
// has ended: its call is bounded by the client's timeout. Unlike the other calls that give
// back permits, one whose reply was lost is sent again, within that timeout: it gives
// back only the lease's own ids, so it cannot give back twice, and a resend that finds
// none of them left, after a first send made while the lease was live, reports the
// release that first send made. After Close it returns ErrClosed and sends nothing: Close
// gave the lease back (or, with WithReleaseOnClose(false), leaves it to run out).
func (s *Weighted) ReleaseLease(held context.Context) error { return s.s().ReleaseLease(held) }

// PermitIDs returns the ids of the lease's permits that held carries, as Redisson's
// RPermitExpirableSemaphore spells them (32 hex digits each), so that a Java service can
// name them; nil when held carries no lease of this semaphore.
func (s *Weighted) PermitIDs(held context.Context) []string { return s.s().PermitIDs(held) }
