package multilock_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
)

func TestMain(m *testing.M) {
	// Main also stops the Redis Cluster the "cluster" subtests share, and checks for leaked goroutines.
	os.Exit(redistest.Main(m))
}

// members are three locks of three kinds whose names are in the three shards of the test
// cluster (slots 274, 8483, 14880).
var memberNames = []string{"ml:invoices", "ml:settings", "ml:catalog"}

func members(c *relock.Client) []multilock.Member {
	return []multilock.Member{
		relock.Member(c.Lock(memberNames[0])),
		relock.Member(c.FairLock(memberNames[1])),
		relock.WriteMember(c.RWLock(memberNames[2])),
	}
}

// locked reports which of the member names some owner holds.
func locked(t *testing.T, ctx context.Context, c *relock.Client) []bool {
	t.Helper()
	var out []bool
	for _, l := range []interface {
		IsLocked(context.Context) (bool, error)
	}{c.Lock(memberNames[0]), c.FairLock(memberNames[1]), c.RWLock(memberNames[2])} {
		ok, err := l.IsLocked(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ok)
	}
	return out
}

// A MultiLock is all or nothing: while another owner holds one member, Lock waits and,
// when its context ends, fails with the context's error naming that member, returns its
// context unchanged and leaves no member held; once that member is free, Lock takes all
// three (of three kinds, in three cluster slots) for one owner, and Unlock frees all
// three. Guards against a MultiLock that keeps the members it took before the one it
// could not take (no rollback), returns the context of the holds it gave back, or takes
// them for different owners.
func TestMultiLockAllOrNothing(t *testing.T) {
	if s := map[uint16]bool{keys.Slot(memberNames[0]): true, keys.Slot(memberNames[1]): true, keys.Slot(memberNames[2]): true}; len(s) != 3 {
		t.Fatalf("the member names share slots: %v", s)
	}
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		blocker, err := other.FairLock(memberNames[1]).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ml := c.MultiLock(members(c)...)
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		got, err := ml.Lock(wctx)
		wcancel()
		var e *relock.Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Name != memberNames[1] {
			t.Fatalf("Lock while %s is held: %v; want context.DeadlineExceeded naming it", memberNames[1], err)
		}
		if got != wctx {
			t.Error("the failed Lock returned another context than its ctx")
		}
		if got := locked(t, ctx, c); got[0] || got[2] {
			t.Errorf("after the failed Lock, locked = %v; want the members it took released again", got)
		}
		if err := other.FairLock(memberNames[1]).Unlock(blocker); err != nil {
			t.Fatal(err)
		}
		held, err := ml.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := locked(t, ctx, c); !got[0] || !got[1] || !got[2] {
			t.Errorf("after Lock, locked = %v; want all three", got)
		}
		for i, n := range []func() (int, error){
			func() (int, error) { return c.Lock(memberNames[0]).HoldCount(held) },
			func() (int, error) { return c.FairLock(memberNames[1]).HoldCount(held) },
			func() (int, error) { return c.RWLock(memberNames[2]).HoldCount(held) },
		} {
			if got, err := n(); err != nil || got != 1 {
				t.Errorf("member %s: hold count %d, %v for the hold's owner; want 1", memberNames[i], got, err)
			}
		}
		if _, err := other.Lock(memberNames[0]).TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("another owner's TryLock of a member: %v; want ErrLocked", err)
		}
		if err := ml.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
			t.Errorf("after Unlock, locked = %v; want none", got)
		}
		if held.Err() == nil {
			t.Error("the hold's context is live after Unlock")
		}
	})
}

// TryLock fails with ErrLocked naming the member another owner holds, returns ctx
// unchanged, and releases the members it took. Guards against a TryLock that waits, keeps
// what it took, or returns the context of the holds it gave back.
func TestMultiTryLock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		// The members are taken by name: ml:catalog, ml:invoices, then ml:settings, which
		// another owner holds.
		blocker, err := other.FairLock(memberNames[1]).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.MultiLock(members(c)...).TryLock(ctx)
		var e *relock.Error
		if !errors.Is(err, relock.ErrLocked) || !errors.As(err, &e) || e.Name != memberNames[1] {
			t.Fatalf("TryLock: %v; want ErrLocked naming %s", err, memberNames[1])
		}
		if got != ctx {
			t.Error("the failed TryLock returned another context than ctx")
		}
		if got := locked(t, ctx, c); got[0] || got[2] {
			t.Errorf("after the failed TryLock, locked = %v; want the members it took released", got)
		}
		if err := other.FairLock(memberNames[1]).Unlock(blocker); err != nil {
			t.Fatal(err)
		}
	})
}

// Two MultiLocks over the same two locks, given in opposite orders, taken again and again
// by workers on two clients, never deadlock: both take the locks in one order. Guards
// against taking members in the order given, where each worker holds the lock the other
// waits for (the wait would run to its bound).
func TestMultiLockOrderPreventsDeadlock(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		mls := []*multilock.MultiLock{
			c1.MultiLock(relock.Member(c1.Lock("ml:x")), relock.Member(c1.Lock("ml:y"))),
			c2.MultiLock(relock.Member(c2.Lock("ml:y")), relock.Member(c2.Lock("ml:x"))),
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					if err := mls[w%2].Do(ctx, func(context.Context) error { time.Sleep(time.Millisecond); return nil },
						rlock.WithWaitTimeout(20*time.Second)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// The hold's context ends when any member's hold is lost, with ErrLeaseLost, and not
// before. Guards against a MultiLock whose context follows one member only.
func TestMultiLockContextEndsWithAnyMember(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second))
		for i := range memberNames {
			ml := c.MultiLock(members(c)...)
			held, err := ml.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			if held.Err() != nil {
				t.Fatalf("the hold ended before any member was lost: %v", context.Cause(held))
			}
			rc := b.Client(t)
			if err := rc.Do(ctx, rc.B().Del().Key(memberNames[i]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-held.Done():
			case <-ctx.Done():
				t.Fatalf("member %s deleted: the hold's context did not end", memberNames[i])
			}
			if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
				t.Errorf("member %s deleted: the hold ended with %v; want ErrLeaseLost", memberNames[i], cause)
			}
			_ = ml.Unlock(held) // the others; the lost one reports ErrNotHeld
			if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
				t.Fatalf("after Unlock, locked = %v", got)
			}
		}
	})
}

// A MultiLock's bad input fails every call with an error that says what, and nothing is
// written: no members, a zero Member, a member made of a nil lock, a member with an
// invalid name. Guards against a
// panic on a nil lock and against a MultiLock that takes the valid members of a list
// with an invalid one.
func TestMultiLockBadInput(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := relocktest.New(t, b)
		cases := []struct {
			ml   *multilock.MultiLock
			want error
		}{
			{c.MultiLock(), relock.ErrInvalidOption},
			{c.MultiLock(relock.Member(c.Lock("ml:ok")), multilock.Member{}), relock.ErrInvalidOption},
			{c.MultiLock(relock.Member(c.Lock("ml:ok")), relock.Member((*rlock.Mutex)(nil))), relock.ErrInvalidOption},
			{c.MultiLock(relock.Member(c.Lock("ml:ok")), relock.ReadMember(nil)), relock.ErrInvalidOption},
			{c.MultiLock(relock.Member(c.Lock("ml:ok")), relock.WriteMember(nil)), relock.ErrInvalidOption},
			{c.MultiLock(relock.Member(c.Lock("ml:ok")), relock.Member(c.Lock("{x}"))), relock.ErrInvalidName},
			// The zero value, which no constructor makes (a struct field, say): a multilock
			// of no locks, which Do ran fn under with nothing held.
			{new(multilock.MultiLock), relock.ErrInvalidOption},
		}
		var nilCtx context.Context
		for i, tc := range cases {
			if _, err := tc.ml.Lock(ctx); !errors.Is(err, tc.want) {
				t.Errorf("case %d: Lock: %v; want %v", i, err, tc.want)
			}
			if _, err := tc.ml.TryLock(ctx); !errors.Is(err, tc.want) {
				t.Errorf("case %d: TryLock: %v; want %v", i, err, tc.want)
			}
			if err := tc.ml.Unlock(ctx); !errors.Is(err, tc.want) {
				t.Errorf("case %d: Unlock: %v; want %v", i, err, tc.want)
			}
			ran := false
			if err := tc.ml.Do(ctx, func(context.Context) error { ran = true; return nil }); !errors.Is(err, tc.want) || ran {
				t.Errorf("case %d: Do: %v, ran %v; want %v and fn not run", i, err, ran, tc.want)
			}
			// Bad arguments too: the multilock's own error, and no panic.
			if err := tc.ml.Do(ctx, nil); !errors.Is(err, tc.want) {
				t.Errorf("case %d: Do(ctx, nil): %v; want %v", i, err, tc.want)
			}
			if err := tc.ml.Unlock(nilCtx); !errors.Is(err, tc.want) {
				t.Errorf("case %d: Unlock(nil): %v; want %v", i, err, tc.want)
			}
		}
		if n, err := b.Client(t).Do(ctx, b.Client(t).B().Exists().Key("ml:ok").Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("ml:ok exists (%d, %v): a MultiLock with a bad member took its valid ones", n, err)
		}
	})
}

// WithWaitTimeout bounds the whole call, not each member: the first member in order is
// held for a second and then freed, the last is held throughout, and a bound of 1.5s ends
// the call after about 1.5s; a bound given to each member anew would end it after about
// 2.5s (the second plus a bound of its own). Guards against a per-member bound.
func TestMultiLockWaitBoundIsTheCalls(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		first, err := other.RWLock(memberNames[2]).Lock(ctx) // ml:catalog, taken first
		if err != nil {
			t.Fatal(err)
		}
		last, err := other.FairLock(memberNames[1]).Lock(ctx) // ml:settings, taken last
		if err != nil {
			t.Fatal(err)
		}
		freed := time.AfterFunc(time.Second, func() { _ = other.RWLock(memberNames[2]).Unlock(first) })
		defer freed.Stop()
		start := time.Now()
		_, err = c.MultiLock(members(c)...).Lock(ctx, rlock.WithWaitTimeout(1500*time.Millisecond))
		took := time.Since(start)
		var e *relock.Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Name != memberNames[1] {
			t.Fatalf("Lock: %v; want DeadlineExceeded naming %s", err, memberNames[1])
		}
		if took >= 2200*time.Millisecond {
			t.Errorf("Lock took %v with a 1.5s bound: the bound is the call's, not each member's", took)
		}
		if got := locked(t, ctx, c); got[0] {
			t.Errorf("after the failed Lock, locked = %v; want ml:invoices released again", got)
		}
		_ = other.FairLock(memberNames[1]).Unlock(last)
	})
}

// order is an observer that notes the locks a client acquires and releases, in order, as
// "<name> <kind>".
type order struct {
	observe.Base
	mu                 sync.Mutex
	acquired, released []string
}

func (o *order) Acquired(a observe.Acquisition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.acquired = append(o.acquired, a.Lock+" "+string(a.Kind))
}

func (o *order) Released(h observe.Hold) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.released = append(o.released, h.Lock+" "+string(h.Kind))
}

// take returns what o noted since the last call, and forgets it.
func (o *order) take() (acquired, released []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	acquired, released = o.acquired, o.released
	o.acquired, o.released = nil, nil
	return acquired, released
}

// The members are taken in the order the package promises whatever order they were given
// in, by name and on one name the write side of a read-write lock before its read side
// (a downgrade, which the lock allows), and released in the reverse order, the last taken
// first: by Unlock, and by the rollback of a TryLock that finds the last member held.
// Names reports that order. Guards against members taken in another order than by name
// (any fixed order prevents deadlocks, but it is not the one documented), the read side
// of a lock taken before its write side (an upgrade, refused with ErrUpgrade), and
// releases that do not start with the last member taken.
func TestMultiLockTakesByNameAndReleasesLastFirst(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rec := &order{}
		c, other := relocktest.New(t, b, relock.WithObserver(rec)), relocktest.New(t, b)
		rw := c.RWLock("ml:order:a")
		ml := c.MultiLock(
			relock.Member(c.Lock("ml:order:b")),
			relock.ReadMember(rw),
			relock.Member(c.FairLock("ml:order:c")),
			relock.WriteMember(rw),
		)
		if got, want := ml.Names(), []string{"ml:order:a", "ml:order:a", "ml:order:b", "ml:order:c"}; !slices.Equal(got, want) {
			t.Fatalf("Names() = %q; want %q", got, want)
		}
		taken := []string{"ml:order:a write", "ml:order:a read", "ml:order:b lock", "ml:order:c fairlock"}
		backwards := slices.Clone(taken)
		slices.Reverse(backwards)

		held, err := ml.Lock(ctx)
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		if n, err := rw.HoldCount(held); n != 1 || err != nil {
			t.Errorf("write holds of ml:order:a: %d, %v; want 1", n, err)
		}
		if n, err := rw.RHoldCount(held); n != 1 || err != nil {
			t.Errorf("read holds of ml:order:a: %d, %v; want 1", n, err)
		}
		if err := ml.Unlock(held); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if acquired, released := rec.take(); !slices.Equal(acquired, taken) || !slices.Equal(released, backwards) {
			t.Fatalf("Lock and Unlock acquired %q and released %q; want %q and %q", acquired, released, taken, backwards)
		}

		// The last member held by another owner: TryLock gives back the three it took,
		// last first.
		blocker, err := other.FairLock("ml:order:c").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ml.TryLock(ctx); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("TryLock with ml:order:c held by another owner: %v; want ErrLocked", err)
		}
		if acquired, released := rec.take(); !slices.Equal(acquired, taken[:3]) || !slices.Equal(released, backwards[1:]) {
			t.Fatalf("the failed TryLock acquired %q and released %q; want %q and %q", acquired, released, taken[:3], backwards[1:])
		}
		if err := other.FairLock("ml:order:c").Unlock(blocker); err != nil {
			t.Fatal(err)
		}
	})
}

// A wait bound that runs out between two members, while the attempt that took the first
// was in flight, ends the call with DeadlineExceeded naming the member not taken, and the
// member already taken is released again: all or nothing. The first member's attempt
// takes it at once, but its reply comes 3s late, past the bound of 1s.
//
// Guards against a MultiLock that, finding the bound used up before a member, returns
// its error without releasing the members it took.
func TestMultiLockBoundSpentBetweenMembers(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const first, second = "ml:spent:a", "ml:spent:b"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := relocktest.On(t, redistest.LateReply(b.Client(t), first, 3*time.Second))
		other := relocktest.New(t, b)
		ml := c.MultiLock(relock.Member(c.Lock(second)), relock.Member(c.Lock(first)))
		got, err := ml.Lock(ctx, rlock.WithWaitTimeout(time.Second))
		var e *relock.Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Name != second {
			t.Fatalf("Lock: %v; want DeadlineExceeded naming %s", err, second)
		}
		if got != ctx {
			t.Error("the failed Lock returned another context than ctx")
		}
		for _, name := range []string{first, second} {
			if ok, err := other.Lock(name).IsLocked(ctx); ok || err != nil {
				t.Errorf("after the failed Lock, %s locked = %v, %v; want it released again", name, ok, err)
			}
		}
	})
}

// A member's own WithWaitTimeout, given when it was made, bounds that member's wait, as it
// would bound its own Lock, when the call gives no bound of its own: "a member's own
// options apply under them". Wherever the member comes in the order, two free members are
// taken; a member that another owner holds fails the call with its own bound, long before
// ctx's, naming it, and the member taken before it is released again.
//
// Guards against a multilock that reads a member's own bound as a bound on the call that
// started with the first member, which fails at once for any member after the first.
func TestMultiLockMemberOwnWaitBound(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const first, second = "ml:own:a", "ml:own:b"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		ml := c.MultiLock(relock.Member(c.Lock(first)), relock.Member(c.Lock(second, rlock.WithWaitTimeout(2*time.Second))))
		held, err := ml.Lock(ctx)
		if err != nil {
			t.Fatalf("Lock of two free members, the second with a bound of its own: %v", err)
		}
		if err := ml.Unlock(held); err != nil {
			t.Fatalf("Unlock: %v", err)
		}

		taken, err := other.Lock(second).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = ml.Lock(ctx)
		took := time.Since(start)
		var e *relock.Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Name != second {
			t.Fatalf("Lock with %s held elsewhere: %v; want DeadlineExceeded naming %s", second, err, second)
		}
		// ctx allows 30s: only the member's own bound of 2s ends the call this soon.
		if took >= 20*time.Second {
			t.Errorf("Lock took %v: the member's own bound of 2s did not bound its wait", took)
		}
		if ok, err := other.Lock(first).IsLocked(ctx); ok || err != nil {
			t.Errorf("after the failed Lock, %s locked = %v, %v; want it released again", first, ok, err)
		}
		if err := other.Lock(second).Unlock(taken); err != nil {
			t.Fatal(err)
		}

		// The first member's own bound is its own too: it does not bound the wait for the
		// second, held elsewhere for 1s, beyond the first's bound of 300ms.
		ml = c.MultiLock(relock.Member(c.Lock(first, rlock.WithWaitTimeout(300*time.Millisecond))), relock.Member(c.Lock(second)))
		if taken, err = other.Lock(second).Lock(ctx); err != nil {
			t.Fatal(err)
		}
		freed := time.AfterFunc(time.Second, func() { _ = other.Lock(second).Unlock(taken) })
		defer freed.Stop()
		if held, err = ml.Lock(ctx); err != nil {
			t.Fatalf("Lock with the first member's own bound of 300ms, the second freed after 1s: %v", err)
		}
		if err := ml.Unlock(held); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	})
}

// Ten owners try the same MultiLock at once, each with a fixed lease
// (RedissonMultiLockTest's testWaitAndLeaseTimeouts): exactly one gets it, every other
// fails with ErrLocked, and the winner holds every member while the losers hold none.
//
// Guards against a TryLock whose rollback releases a member the winner holds (a loser
// that took nothing must release nothing), and against two owners both taking the whole.
func TestMultiTryLockOneOfManyWins(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, time.Minute)
		c1, c2 := relocktest.New(t, b), relocktest.New(t, b)
		type result struct {
			held context.Context
			c    *relock.Client
			err  error
		}
		results := make(chan result, 10)
		start := make(chan struct{})
		for g := range 10 {
			c := []*relock.Client{c1, c2}[g%2]
			go func() {
				<-start
				held, err := c.MultiLock(members(c)...).TryLock(relock.NewOwner(ctx), rlock.WithLease(time.Minute))
				results <- result{held, c, err}
			}()
		}
		close(start)
		var won []result
		for range 10 {
			r := redistest.Recv(t, results, 30*time.Second, "a TryLock")
			switch {
			case r.err == nil:
				won = append(won, r)
			case !errors.Is(r.err, relock.ErrLocked):
				t.Errorf("a losing TryLock: %v; want ErrLocked", r.err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("%d owners got the MultiLock; want exactly one", len(won))
		}
		w := won[0]
		if ok, err := w.c.Lock(memberNames[0]).IsHeld(w.held); !ok || err != nil {
			t.Errorf("the winner's IsHeld of %s = %v, %v; want true", memberNames[0], ok, err)
		}
		if ok, err := w.c.FairLock(memberNames[1]).IsHeld(w.held); !ok || err != nil {
			t.Errorf("the winner's IsHeld of %s = %v, %v; want true", memberNames[1], ok, err)
		}
		if n, err := w.c.RWLock(memberNames[2]).HoldCount(w.held); n != 1 || err != nil {
			t.Errorf("the winner's HoldCount of %s = %d, %v; want 1", memberNames[2], n, err)
		}
		if err := w.c.MultiLock(members(w.c)...).Unlock(w.held); err != nil {
			t.Fatal(err)
		}
		if got := locked(t, ctx, c1); got[0] || got[1] || got[2] {
			t.Errorf("after the winner's Unlock, locked = %v; want none", got)
		}
	})
}

// A MultiLock's members may live on separate Redis deployments, one client each
// (RedissonMultiLockTest's test, on three servers): one owner takes all three, another
// owner's TryLock fails with ErrLocked twice and leaves the holder's three holds in place,
// and once the holder unlocks, every server is free and the other owner takes the whole.
//
// Guards against a MultiLock that sends a member's calls through another member's client
// (the lock would be taken on the wrong server), and a failed TryLock that releases holds
// it did not take.
func TestMultiLockAcrossServers(t *testing.T) {
	redistest.Real(t, func(t *testing.T, _ *redistest.Backend) {
		ctx := redistest.Context(t, time.Minute)
		names := []string{"ml:srv1", "ml:srv2", "ml:srv3"}
		var (
			clients []*relock.Client
			sides   []rueidis.Client
		)
		for range names {
			s := redistest.StartServer(t)
			clients = append(clients, relocktest.New(t, s))
			sides = append(sides, s.Client(t))
		}
		ml := func() *multilock.MultiLock {
			var ms []multilock.Member
			for i, n := range names {
				ms = append(ms, relock.Member(clients[i].Lock(n)))
			}
			return clients[0].MultiLock(ms...)
		}
		present := func(what string, want bool) {
			t.Helper()
			for i, n := range names {
				if got, _ := redistest.Do(t, sides[i], "EXISTS", n).AsInt64(); (got == 1) != want {
					t.Errorf("%s: %s on server %d exists = %v; want %v", what, n, i+1, got == 1, want)
				}
				for j, other := range sides {
					if j != i {
						if got, _ := redistest.Do(t, other, "EXISTS", n).AsInt64(); got != 0 {
							t.Errorf("%s: %s exists on server %d, not its own", what, n, j+1)
						}
					}
				}
			}
		}
		held, err := ml().Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		present("held", true)
		for i := range 2 {
			if _, err := ml().TryLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
				t.Errorf("another owner's TryLock %d: %v; want ErrLocked", i+1, err)
			}
		}
		present("after the failed TryLocks", true)
		for i, n := range names {
			if ok, err := clients[i].Lock(n).IsHeld(held); !ok || err != nil {
				t.Errorf("IsHeld of %s after the failed TryLocks = %v, %v; want true", n, ok, err)
			}
		}
		if err := ml().Unlock(held); err != nil {
			t.Fatal(err)
		}
		present("unlocked", false)
		next, err := ml().TryLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatalf("TryLock of the freed MultiLock: %v", err)
		}
		if err := ml().Unlock(next); err != nil {
			t.Fatal(err)
		}
	})
}

// Unlock reports each member it could not release, joined, each error naming its member
// (ErrNotHeld for one the owner no longer held), and releases the others all the same.
// Two of three members were deleted behind the hold's back. Guards against an Unlock
// that drops its members' errors (its caller would take every member for released) or
// reports only one of them.
func TestMultiUnlockNamesTheMembersNotReleased(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, 30*time.Second)
		c := relocktest.New(t, b)
		ml := c.MultiLock(members(c)...)
		held, err := ml.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		gone := []string{memberNames[2], memberNames[0]} // sorted, as Named returns them
		side := b.Client(t)
		for _, name := range gone {
			redistest.MustDo(t, side, "DEL", name)
		}
		err = ml.Unlock(held)
		if got := relocktest.Named(err, relock.ErrNotHeld); !slices.Equal(got, gone) {
			t.Errorf("Unlock = %v: it names %q; want ErrNotHeld naming each of %q", err, got, gone)
		}
		if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
			t.Errorf("after Unlock, locked = %v; want the member that was still held released", got)
		}

		// Do returns fn's error joined with Unlock's, which names the member lost under fn.
		boom := errors.New("boom")
		err = ml.Do(ctx, func(context.Context) error {
			redistest.MustDo(t, side, "DEL", memberNames[1])
			return boom
		})
		if !errors.Is(err, boom) || !errors.Is(err, relock.ErrNotHeld) || !strings.Contains(err.Error(), `"`+memberNames[1]+`"`) {
			t.Errorf("Do whose member %s was lost under fn = %v; want fn's error and ErrNotHeld naming it", memberNames[1], err)
		}
		if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
			t.Errorf("after Do, locked = %v; want every member released", got)
		}
	})
}

// Do releases every member when fn panics, and the panic goes on to Do's caller: "also
// when fn panics". Guards against a Do that unlocks only when fn returns, which left every
// member held (and renewed by the watchdog) after a panic under it.
func TestMultiDoReleasesWhenFnPanics(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, 30*time.Second)
		c := relocktest.New(t, b)
		ml := c.MultiLock(members(c)...)
		boom := errors.New("boom")
		var inside []bool
		got := func() (v any) {
			defer func() { v = recover() }()
			_ = ml.Do(ctx, func(held context.Context) error {
				inside = locked(t, held, c)
				panic(boom)
			})
			return nil
		}()
		if got != boom {
			t.Fatalf("Do's fn panicked with %v; Do's caller recovered %v", boom, got)
		}
		if !slices.Equal(inside, []bool{true, true, true}) {
			t.Fatalf("under fn, locked = %v; want every member", inside)
		}
		if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
			t.Errorf("after fn panicked under Do, locked = %v; want every member released", got)
		}
	})
}
