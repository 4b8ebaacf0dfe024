package multilock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// A fixed lease counts from when the last member is taken, as Redisson's
// RedissonMultiLock.tryLock(wait, lease) resets every member's expiry to the lease once it
// has them all: a wait for a later member longer than the lease loses no member taken
// before it (nobody else can take one meanwhile, and the call does not fail with the
// expired hold's error), and once Lock returns, every member expires no sooner than the
// last one taken. With and without a bound on the call's wait. Guards against members
// taken with the lease and left to run out while the call waits (the wait, under their
// hold's context, then ended with context.Canceled), and against earlier members that
// keep the expiry they had when the wait ended.
func TestMultiLockLeaseCountsFromTheLastMember(t *testing.T) {
	const lease = 2 * time.Second
	for _, bounded := range []bool{false, true} {
		name := "unbounded"
		opts := []rlock.Option{rlock.WithLease(lease)}
		if bounded {
			name = "WithWaitTimeout"
			opts = append(opts, rlock.WithWaitTimeout(20*time.Second))
		}
		t.Run(name, func(t *testing.T) {
			redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				c, other := relocktest.New(t, b), relocktest.New(t, b)
				side := b.Client(t)
				// ml:settings is taken last; the call waits for it for a lease and a half.
				last, err := other.FairLock(memberNames[1]).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				freed := time.AfterFunc(lease*3/2, func() { _ = other.FairLock(memberNames[1]).Unlock(last) })
				defer freed.Stop()

				type result struct {
					held context.Context
					err  error
				}
				done := make(chan result, 1)
				ml := c.MultiLock(members(c)...)
				go func() {
					held, err := ml.Lock(ctx, opts...)
					done <- result{held, err}
				}()
				// Past the lease of the members taken first, the call still holds them.
				time.Sleep(lease + lease/4)
				if _, err := other.RWLock(memberNames[2]).TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
					t.Errorf("another owner's TryLock of %s, a lease after the MultiLock took it: %v; want ErrLocked", memberNames[2], err)
				}
				if _, err := other.Lock(memberNames[0]).TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
					t.Errorf("another owner's TryLock of %s, a lease after the MultiLock took it: %v; want ErrLocked", memberNames[0], err)
				}
				r := redistest.Recv(t, done, 20*time.Second, "the MultiLock's Lock")
				if r.err != nil {
					t.Fatalf("Lock with a %v lease and a longer wait for its last member: %v", lease, r.err)
				}
				// Expiries as points in time (every server of the backend runs on this
				// machine's clock), which a slow read does not move.
				lastAt := redistest.ExpireTime(t, side, memberNames[1])
				for _, n := range []string{memberNames[2], memberNames[0]} {
					if at := redistest.ExpireTime(t, side, n); at < lastAt-20 {
						t.Errorf("%s expires %dms before the last member taken; want its lease (%v) from when the last was taken", n, lastAt-at, lease)
					}
					if ms := pttl(t, side, n); ms > lease.Milliseconds() {
						t.Errorf("%s expires in %dms; want at most its lease (%v)", n, ms, lease)
					}
				}
				if err := r.held.Err(); err != nil {
					t.Errorf("the MultiLock's hold ended: %v", context.Cause(r.held))
				}
				if err := ml.Unlock(r.held); err != nil {
					t.Fatal(err)
				}
				if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
					t.Errorf("after Unlock, locked = %v", got)
				}
			})
		})
	}
}

// pttl is the key's remaining expiry in milliseconds.
func pttl(t *testing.T, side rueidis.Client, key string) int64 {
	t.Helper()
	ms, err := redistest.Do(t, side, "PTTL", key).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// A member taken with a fixed lease that is lost while the call waits for a later member
// (forced here) fails the call with ErrLeaseLost naming that member, not with the
// context.Canceled of its hold's context, and the other members are released again. Each
// member taken before the one waited for is forced in turn: the first in order
// (ml:catalog) and the second (ml:invoices); and in a MultiLock of two (ml:invoices, then
// ml:settings) the first, while the call waits for the second. Guards against an error
// that names another member than the one lost (the first taken, say, or the one waited
// for), and against a wait for the second member that is not told from the others.
func TestMultiLockMemberLostWhileWaiting(t *testing.T) {
	for _, tc := range []struct {
		forced string
		of     int // how many of members(c) the MultiLock has
	}{{memberNames[2], 3}, {memberNames[0], 3}, {memberNames[0], 2}} {
		forced := tc.forced
		t.Run(fmt.Sprintf("%s_of_%d", forced, tc.of), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				c, other := relocktest.New(t, b), relocktest.New(t, b)
				last, err := other.FairLock(memberNames[1]).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = other.FairLock(memberNames[1]).Unlock(last) }()
				done := make(chan error, 1)
				go func() {
					_, err := c.MultiLock(members(c)[:tc.of]...).Lock(ctx, rlock.WithLease(3*time.Second))
					done <- err
				}()
				redistest.Eventually(t, 10*time.Second, "the MultiLock never took its first members", func() bool {
					got := locked(t, ctx, c)
					return got[0] && (got[2] || tc.of == 2)
				})
				force := map[string]func(context.Context) (bool, error){
					memberNames[2]: other.RWLock(memberNames[2]).ForceUnlock,
					memberNames[0]: other.Lock(memberNames[0]).ForceUnlock,
				}[forced]
				if ok, err := force(ctx); !ok || err != nil {
					t.Fatalf("ForceUnlock of %s: %v, %v", forced, ok, err)
				}
				err = redistest.Recv(t, done, 10*time.Second, "the MultiLock's Lock after a member it held was lost")
				// The first error is the lost member's, named: the rollback's may follow.
				var first *relock.Error
				if !errors.Is(err, relock.ErrLeaseLost) || errors.Is(err, context.Canceled) || !errors.As(err, &first) ||
					first.Name != forced || !errors.Is(first, relock.ErrLeaseLost) {
					t.Errorf("Lock: %v; want ErrLeaseLost naming %s first", err, forced)
				}
				if got := locked(t, ctx, c); got[0] || got[2] {
					t.Errorf("after the failed Lock, locked = %v; want the members it took released", got)
				}
			})
		})
	}
}

// Members with fixed leases of their own, of different lengths, are each kept from running
// out while the call waits for a later member: the extensions come every third of the
// shortest lease, not of the longest. ml:mix:a has a lease of 6s, ml:mix:b one of 1.5s,
// and ml:mix:c is held elsewhere for 3s. Past ml:mix:b's lease another owner still cannot
// take it, the call gets all three, and once it has, each member expires within its own
// lease. Guards against extensions paced by the longest lease (every 2s here, after
// ml:mix:b ran out) and against members extended to another member's lease at the end.
func TestMultiLockMembersOwnLeasesKeptWhileWaiting(t *testing.T) {
	const long, short = 6 * time.Second, 1500 * time.Millisecond
	const a, bb, last = "ml:mix:a", "ml:mix:b", "ml:mix:c"
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, 30*time.Second)
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		blocker, err := other.Lock(last).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		freed := time.AfterFunc(2*short, func() { _ = other.Lock(last).Unlock(blocker) })
		defer freed.Stop()
		ml := c.MultiLock(
			relock.Member(c.Lock(last)),
			relock.Member(c.Lock(bb, rlock.WithLease(short))),
			relock.Member(c.Lock(a, rlock.WithLease(long))),
		)
		type result struct {
			held context.Context
			err  error
		}
		done := make(chan result, 1)
		go func() {
			held, err := ml.Lock(ctx)
			done <- result{held, err}
		}()
		redistest.Eventually(t, 10*time.Second, "the MultiLock never took "+bb, func() bool {
			ok, err := other.Lock(bb).IsLocked(ctx)
			return ok && err == nil
		})
		time.Sleep(short + short/4)
		if _, err := other.Lock(bb).TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("another owner's TryLock of %s, past its lease of %v while the MultiLock waits: %v; want ErrLocked", bb, short, err)
		}
		r := redistest.Recv(t, done, 20*time.Second, "the MultiLock's Lock")
		if r.err != nil {
			t.Fatalf("Lock of members with leases of %v and %v and a longer wait for the last: %v", long, short, r.err)
		}
		if err := r.held.Err(); err != nil {
			t.Errorf("the MultiLock's hold ended: %v", context.Cause(r.held))
		}
		if ms := pttl(t, side, bb); ms <= 0 || ms > short.Milliseconds() {
			t.Errorf("%s expires in %dms; want within its own lease (%v)", bb, ms, short)
		}
		if ms := pttl(t, side, a); ms <= short.Milliseconds() || ms > long.Milliseconds() {
			t.Errorf("%s expires in %dms; want within its own lease (%v), past %v", a, ms, long, short)
		}
		if err := ml.Unlock(r.held); err != nil {
			t.Fatal(err)
		}
	})
}

// A member taken with a fixed lease that is gone by the time the last member is taken
// (forced here while the last member's request is on its way) fails TryLock: the extension
// of its lease from the last member on finds nothing to extend, and the call returns
// ErrNotHeld naming that member, its context unchanged, with the last member released
// again. Guards against a TryLock that ignores the failed extension and returns a hold of
// which one member is held by nobody.
func TestMultiLockMemberGoneBeforeTheLastIsTaken(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, 30*time.Second)
		late := redistest.NewLateRequests(b.Client(t))
		c := relocktest.On(t, late)
		other := relocktest.New(t, b)
		ml := c.MultiLock(relock.Member(c.Lock("ml:gone-a")), relock.Member(c.Lock("ml:gone-b")))
		names := ml.Names()
		first, last := names[0], names[1]
		arrived, send := late.Hold(last)
		defer send()
		owner := relock.NewOwner(ctx)
		done := make(chan error, 1)
		var held context.Context
		go func() {
			h, err := ml.TryLock(owner, rlock.WithLease(time.Minute))
			held = h
			done <- err
		}()
		redistest.Recv(t, arrived, 10*time.Second, "the TryLock's request for "+last)
		if ok, err := other.Lock(first).ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock of %s: %v, %v", first, ok, err)
		}
		send()
		err := redistest.Recv(t, done, 10*time.Second, "the TryLock whose first member was forced")
		var named *relock.Error
		if !errors.Is(err, relock.ErrNotHeld) || !errors.As(err, &named) || named.Name != first {
			t.Errorf("TryLock: %v; want ErrNotHeld naming %s first", err, first)
		}
		if held != owner {
			t.Errorf("the failed TryLock returned a context other than the one it was given")
		}
		for _, name := range names {
			if ok, err := other.Lock(name).IsLocked(ctx); err != nil || ok {
				t.Errorf("after the failed TryLock, %s locked: %v, %v; want free", name, ok, err)
			}
		}
	})
}
