package permits

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime"
	"time"

	"github.com/relock-go/relock/internal/leases"
	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/retry"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/observe"
)

// A lease is permits taken under ids of their own, in Redisson's RPermitExpirableSemaphore
// layout: each id in the semaphore's zset of leased permits, scored by when it runs out.
// The client's watchdog renews a lease as it renews a lock's hold (lua/semaphore_renew.lua),
// and the lease's context ends with ErrLeaseLost when a renewal finds one of its permits
// gone. A lease is a hold of the watchdog's: its name is the semaphore's, and what stands
// for the owner is the ids, one string of 32 hex digits per permit.

// idLen is the length of a permit id in hex: 16 bytes, as Redisson makes them.
const idLen = 32

// leaseKey is the key under which a lease's context carries its ids: one per semaphore
// of one client.
type leaseKey struct {
	gates *Gates
	name  string
}

// maxLease is the most permits one lease takes: each has an id of its own that every
// renewal sends, so a lease of more is refused (ErrInvalidCount) rather than built.
const maxLease = 10000

// checkLease returns the error of a lease call asking for n permits, or nil: check's, with
// a count above maxLease refused as a count out of range is, after the context and the name.
func (s *Semaphore) checkLease(ctx context.Context, n int64) error {
	bad := taking(n, 1)
	if bad == nil && n > maxLease {
		bad = fmt.Errorf("%w: %d permits; a lease takes at most %d", lockerr.ErrInvalidCount, n, maxLease)
	}
	if err := s.valid(ctx, bad); err != nil {
		return err
	}
	return ctx.Err()
}

// newIDs returns n new permit ids, one string of hex.
func newIDs(n int64) string {
	b := make([]byte, 16*n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// LeaseSettings are the options of an AcquireLease call (package semaphore's LeaseOption).
type LeaseSettings struct {
	// Wait bounds the wait for the permits, never the lease; 0: only ctx bounds it.
	Wait time.Duration
	// Err is an invalid option's error, which fails the call.
	Err error
}

// AcquireLease takes n permits as a lease, waiting as Acquire does, and returns the
// lease's context. The package semaphore documents the contract.
func (s *Semaphore) AcquireLease(ctx context.Context, n int64, o LeaseSettings) (context.Context, error) {
	if err := s.checkLease(ctx, n); err != nil {
		return ctx, s.fail("acquirelease", err)
	}
	if o.Err != nil {
		return ctx, s.fail("acquirelease", o.Err)
	}
	// The bound applies to the wait alone: the lease's context derives from ctx, and a
	// lease taken as the bound runs out is kept (keep looks at ctx, not at the bound).
	wctx := ctx
	if o.Wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, o.Wait)
		defer cancel()
	}
	ids := newIDs(n)
	a, err := s.take(wctx, n, ids)
	if err != nil {
		return ctx, s.fail("acquirelease", err)
	}
	held, err := s.keep(ctx, ids, a)
	return held, s.fail("acquirelease", err)
}

// TryAcquireLease makes one attempt to take n permits as a lease.
func (s *Semaphore) TryAcquireLease(ctx context.Context, n int64) (context.Context, bool, error) {
	if err := s.checkLease(ctx, n); err != nil {
		return ctx, false, s.fail("tryacquirelease", err)
	}
	ids := newIDs(n)
	a, err := s.tryTake(ctx, n, ids)
	if err != nil || !a.ok {
		return ctx, false, s.fail("tryacquirelease", err)
	}
	held, err := s.keep(ctx, ids, a)
	if err != nil {
		return ctx, false, s.fail("tryacquirelease", err)
	}
	return held, true, nil
}

// keep hands the lease just taken by the attempt a to the watchdog and returns its context;
// unless ctx ended while the attempt was in flight, or the client is closing: then the
// permits are given back, and keep returns ctx's error or ErrClosed. When the semaphore's
// count has an expiry, the permits go with it (lua/semaphore_acquire.lua): the lease's
// context ends by then, however it is renewed.
//
// The lease's context is the anchor of an owner of its own, so that a lease whose context
// is dropped without ReleaseLease is abandoned and runs out within a lease. It answers for
// the owner of ctx when ctx carries one, so that a lock taken with it is the same owner's
// as one taken with ctx; otherwise the lease's owner is the owner its context carries.
func (s *Semaphore) keep(ctx context.Context, ids string, a attempted) (context.Context, error) {
	c := s.c
	err := ctx.Err()
	if err == nil {
		who, carried, fresh := c.Owners.Own(ctx)
		if carried != nil {
			who, _, _ = c.Owners.Own(context.Background())
		}
		lc := &leased{key: leaseKey{s.gates, s.n.Permits}, ids: ids}
		g := leases.Grant{Name: s.n.Permits, Owner: ids, Count: 1, Sent: a.sent, Lease: c.Lease, Renew: true,
			Renewal: script.SemaphoreRenew(), Extra: s.n.Leases, Who: who, Kind: string(observe.Lease),
			Carried: carried, Fresh: fresh, Anchor: true, Lock: s}
		if a.expires >= 0 {
			g.Ends = leases.Until(a.sent, a.expires)
		}
		// A lease is always a first-level hold (its ids are new), whose context the
		// watchdog makes in place.
		if _, ok := c.Watchdog.Acquired(&lc.Context, ctx, g); ok {
			return lc, nil
		}
		err = lockerr.ErrClosed
	}
	_, _, _, _ = s.giveBack(c.Detached(ctx), ids)
	return ctx, err
}

// leased is a lease's context: the watchdog's hold context, which answers for the lease's
// ids too. It is one allocation with the hold's context, whose methods it has (AfterFunc
// among them, so that contexts derived from it need no goroutine each).
type leased struct {
	leases.Context
	key leaseKey
	ids string
}

func (l *leased) Value(key any) any {
	if k, ok := key.(leaseKey); ok && k == l.key {
		return l.ids
	}
	return l.Context.Value(key)
}

// lease returns the ids of the lease of this semaphore that held carries.
func (s *Semaphore) lease(held context.Context) (ids string, ok bool) {
	if held == nil {
		return "", false
	}
	ids, ok = held.Value(leaseKey{s.gates, s.n.Permits}).(string)
	return ids, ok
}

// errNoLease is the ErrNotHeld of a ReleaseLease whose context carries no lease.
var errNoLease = fmt.Errorf("%w (this context carries no lease of the semaphore: pass the one AcquireLease returned)", lockerr.ErrNotHeld)

// ReleaseLease gives back the permits of the lease held carries.
func (s *Semaphore) ReleaseLease(held context.Context) error {
	switch {
	case held == nil:
		return s.fail("releaselease", lockerr.ErrNilContext)
	case s.err != nil:
		return s.fail("releaselease", s.err)
	case s.c == nil:
		return s.fail("releaselease", lockerr.ErrNotMade)
	case s.c.Closed():
		// Close gave the lease back, or leaves it to run out (WithReleaseOnClose(false)).
		return s.fail("releaselease", lockerr.ErrClosed)
	}
	ids, ok := s.lease(held)
	if !ok {
		return s.fail("releaselease", errNoLease)
	}
	// held names the lease's owner until the watchdog has heard how the release went, so
	// that a collection meanwhile does not take the lease for abandoned.
	defer runtime.KeepAlive(held)
	return s.fail("releaselease", s.end(s.c.Detached(held), ids, nil))
}

// ReleaseAll gives back the lease whose ids are owner: the client does it for each lease it
// holds as it closes (leases.Releaser). The lease's context ends with ErrClosed.
func (s *Semaphore) ReleaseAll(ctx context.Context, owner string) error {
	return s.fail("close", s.end(ctx, owner, lockerr.ErrClosed))
}

// end gives back the lease ids and tells the watchdog: released with cause when Redis
// had every permit of it, lost otherwise, for which it returns ErrNotHeld.
func (s *Semaphore) end(ctx context.Context, ids string, cause error) error {
	w := s.c.Watchdog
	turn := w.Begin(s.n.Permits, ids)
	defer turn.End()
	if turn.Count == 0 && s.c.Closed() {
		// The client knows the lease no more: a ReleaseLease and Close raced, and the
		// other one gave it back (or found it lost). Close has nothing left to report;
		// the ReleaseLease did not complete, and says why.
		if cause != nil {
			return nil
		}
		return lockerr.ErrClosed
	}
	turn.Releasing()
	back, live, sent, err := s.giveBack(ctx, ids)
	n := int64(len(ids) / idLen)
	if err != nil && retry.Lost(err) && turn.Count > 0 {
		back, live, err = s.giveBackAgain(ctx, ids, n, sent, turn.Deadline, err)
	}
	switch {
	case err != nil:
		// Unknown: the permits may still be leased. They are not renewed any more, so they
		// run out within a lease.
		w.Lost(s.n.Permits, ids)
		return err
	case live == n:
		if cause == nil {
			w.Released(s.n.Permits, ids)
		} else {
			w.ReleasedAtClose(s.n.Permits, ids)
		}
		return nil
	default:
		w.Lost(s.n.Permits, ids)
		return fmt.Errorf("%w: the lease was lost: %d of its %d permits had run out or been taken away (%d given back)", lockerr.ErrNotHeld, n-live, n, back)
	}
}

// giveBack runs the return script for ids: how many permits it gave back, how many of
// them were still leased, and when its last request was sent.
func (s *Semaphore) giveBack(ctx context.Context, ids string) (back, live int64, sent time.Time, err error) {
	var reply []int64
	err = retry.Refusals(ctx, func() (err error) {
		sent = time.Now()
		reply, err = script.SemaphoreReturn().Exec(ctx, s.c.Redis, []string{s.n.Permits, s.n.Leases, s.n.Channel},
			[]string{ids, s.c.Publish}).AsIntSlice()
		return err
	})
	if err == nil && len(reply) != 2 {
		err = fmt.Errorf("relock: unexpected reply %v from the return script", reply)
	}
	if err != nil {
		return 0, 0, sent, err
	}
	return reply[0], reply[1], sent, nil
}

// giveBackAgain sends the return of the n permits ids again after the reply of a send made
// at sent was lost (failed), for a lease that the client knew live until deadline. The
// return is safe to send again: it takes only the ids it finds, and they are this lease's
// alone. A resend that gives permits back finds the lost send unrun (the script is one
// step), and its answer is the release's. One that finds none of them finds the lost send's
// work, as a lost unlock's resend does, when that send went out before the lease's
// deadline, while Redis kept every permit of it: the lease was released whole. Sent later,
// it may have found them run out, and the lease counts as lost. When the resend gets no
// answer either, the outcome stays unknown, and failed is returned.
func (s *Semaphore) giveBackAgain(ctx context.Context, ids string, n int64, sent, deadline time.Time, failed error) (back, live int64, err error) {
	// A context of its own: the lost send's may have run out waiting for its reply.
	dctx := s.c.Detached(ctx)
	err = retry.Do(dctx, func() (err error) {
		back, live, _, err = s.giveBack(dctx, ids)
		return err
	})
	switch {
	case err != nil:
		return 0, 0, failed
	case back > 0:
		return back, live, nil
	case sent.Before(deadline):
		return n, n, nil
	}
	return 0, 0, nil
}

// PermitIDs returns the ids of the permits of the lease held carries, as Redisson's
// RPermitExpirableSemaphore spells them (32 hex digits each); nil when it carries none.
func (s *Semaphore) PermitIDs(held context.Context) []string {
	ids, ok := s.lease(held)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(ids)/idLen)
	for len(ids) >= idLen {
		out = append(out, ids[:idLen])
		ids = ids[idLen:]
	}
	return out
}
