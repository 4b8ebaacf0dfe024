package relock_test

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/leases"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/internal/script"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/rlock"
)

// The tests in this file guard the lease-truth rule (docs/design.md): a hold's context is
// live only while Redis keeps the owner's field with an expiry no earlier than the
// context's deadline, and it ends with ErrLeaseLost only once Redis has lost the hold.
// Each one is a case in which relock once broke the rule.

// sleepUntil sleeps until at, which is a point the test computed from a lease.
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

// live fails the test unless the hold's context is live.
func live(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	if ctx.Err() != nil {
		t.Fatalf("%s: the hold's context ended: %v", what, context.Cause(ctx))
	}
}

// A re-entry with a shorter fixed lease must not cut short the lease the first hold was
// promised: the lock stays held (another owner gets ErrLocked) past the short lease, for
// the plain lock and the read-write lock's write side. (It once set the key's expiry to
// the new lease, and another client got in while both contexts were live.)
func TestReentryWithShorterLeaseKeepsLonger(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		type kind struct {
			name string
			lock func(ctx context.Context, lease time.Duration) (context.Context, error)
			try  func(ctx context.Context) error
		}
		mu, rw := c.Lock("truth:short"), c.RWLock("truth:short-rw")
		kinds := []kind{
			{"rlock", func(ctx context.Context, d time.Duration) (context.Context, error) {
				return mu.Lock(ctx, rlock.WithLease(d))
			}, func(ctx context.Context) error { return keep(other.Lock("truth:short").TryLock(ctx)) }},
			{"write", func(ctx context.Context, d time.Duration) (context.Context, error) {
				return rw.Lock(ctx, rlock.WithLease(d))
			}, func(ctx context.Context) error { return keep(other.RWLock("truth:short-rw").TryLock(ctx)) }},
		}
		for _, k := range kinds {
			t.Run(k.name, func(t *testing.T) {
				first, err := k.lock(redistest.Context(t, time.Minute), 20*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				second, err := k.lock(first, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				sleepUntil(start.Add(2500 * time.Millisecond)) // 1.5s past the short lease
				if err := k.try(context.Background()); !errors.Is(err, relock.ErrLocked) {
					t.Fatalf("another owner's TryLock after the short lease: %v; want ErrLocked", err)
				}
				live(t, first, "first hold")
				live(t, second, "re-entry")
			})
		}
	})
}

// A re-entry with a later-ending fixed lease extends the hold: the first hold's context
// must not end at its own lease while Redis still holds the lock for the re-entry. (It
// once ended with ErrLeaseLost at the first lease, with HoldCount 2 and other owners
// still refused.)
func TestReentryWithLaterLeaseExtendsHold(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("truth:later")
		start := time.Now()
		first, err := mu.Lock(redistest.Context(t, time.Minute), rlock.WithLease(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		sleepUntil(start.Add(1500 * time.Millisecond))
		second, err := mu.Lock(first, rlock.WithLease(6*time.Second)) // ends at 7.5s at the earliest
		if err != nil {
			t.Fatal(err)
		}
		sleepUntil(start.Add(4500 * time.Millisecond)) // 1.5s past the first lease
		if n, err := mu.HoldCount(first); err != nil || n != 2 {
			t.Fatalf("HoldCount = %d, %v; want 2", n, err)
		}
		live(t, first, "first hold, while Redis keeps the re-entry's lease")
		live(t, second, "re-entry")
		if err := mu.Unlock(second); err != nil {
			t.Fatal(err)
		}
		if err := mu.Unlock(first); err != nil {
			t.Fatal(err)
		}
	})
}

// A reader's renewal touches only its own timeout keys: a crashed reader's key runs out
// while a live reader on another client keeps renewing, and once the live reader leaves
// the lock is free at once. (Renewal once renewed every reader's keys, so a crashed
// reader's share lived on, and the hash outlived the last live reader by up to a lease.)
func TestRenewalTouchesOnlyOwnReadHolds(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		alive := relocktest.New(t, b, relock.WithWatchdogTimeout(3*time.Second))
		crashing := relocktest.New(t, b, relock.WithWatchdogTimeout(1500*time.Millisecond))
		ctx := redistest.Context(t, time.Minute)
		r1, err := alive.RWLock("truth:readers").RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := crashing.RWLock("truth:readers").RLock(ctx); err != nil {
			t.Fatal(err)
		}
		crashed := "{truth:readers}:" + crashing.ID() + ":1:rwlock_timeout:1"
		crashing.Close() // renewal stops; the read hold is left to run out
		// The crashed reader's key had 1.5s; the live reader renews every second.
		sleepUntil(start.Add(4 * time.Second))
		if p, _ := redistest.Do(t, side, "PTTL", crashed).AsInt64(); p != -2 {
			t.Fatalf("the crashed reader's timeout key has PTTL %d at 4s; want it gone (its lease was 1.5s)", p)
		}
		live(t, r1, "live reader")
		if err := alive.RWLock("truth:readers").RUnlock(r1); err != nil {
			t.Fatal(err)
		}
		if n, _ := redistest.Do(t, side, "EXISTS", "truth:readers").AsInt64(); n != 0 {
			t.Fatalf("the lock hash outlives its last live reader: %s", redistest.Snapshot(t, side, "truth:readers"))
		}
		w, err := relocktest.New(t, b).RWLock("truth:readers").TryLock(context.Background())
		if err != nil {
			t.Fatalf("a writer after the last live reader left: %v", err)
		}
		live(t, w, "writer")
	})
}

// A reader with a short lease whose client goes away must not shorten the lock under a
// reader with a long one: no writer gets in while the long reader's context is live.
// (A renewal once set the hash and every reader's key to the renewer's lease.)
func TestShortReaderDoesNotShortenLongReader(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		long := relocktest.New(t, b, relock.WithWatchdogTimeout(30*time.Second))
		short := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Second))
		ctx := redistest.Context(t, time.Minute)
		r1, err := long.RWLock("truth:mixed").RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := short.RWLock("truth:mixed").RLock(ctx); err != nil {
			t.Fatal(err)
		}
		sleepUntil(start.Add(800 * time.Millisecond)) // the short client renews at 333ms and 667ms
		short.Close()
		sleepUntil(start.Add(3 * time.Second)) // the short reader's lease ran out
		if err := keep(relocktest.New(t, b).RWLock("truth:mixed").TryLock(context.Background())); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("a writer's TryLock beside the long reader: %v; want ErrLocked", err)
		}
		live(t, r1, "long reader")
	})
}

// Releasing one of an owner's two read holds leaves the other one what it was promised:
// the remaining hold's context stays live past the released hold's lease while Redis keeps
// it, writers stay out, and releasing it frees the lock. (The hold's context once ended at
// the first lease while the hash and the owner's field lived on.)
func TestPartialReadReleaseKeepsPromise(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		rw := c.RWLock("truth:partial")
		start := time.Now()
		first, err := rw.RLock(redistest.Context(t, time.Minute), rlock.WithLease(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		second, err := rw.RLock(first, rlock.WithLease(8*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := rw.RUnlock(second); err != nil {
			t.Fatal(err)
		}
		sleepUntil(start.Add(3500 * time.Millisecond)) // 1.5s past the first lease
		live(t, first, "remaining read hold")
		if err := keep(other.RWLock("truth:partial").TryLock(context.Background())); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("a writer while a read hold remains: %v; want ErrLocked", err)
		}
		if err := rw.RUnlock(first); err != nil {
			t.Fatalf("RUnlock of the remaining hold: %v", err)
		}
		if _, err := other.RWLock("truth:partial").TryLock(context.Background()); err != nil {
			t.Fatalf("a writer after the last read hold left: %v", err)
		}
	})
}

// A read release leaves the lock as long as the read holds that remain, the longest of
// them, and no longer: after the release of a long read hold, a reader's two short ones
// are what the lock lasts for, and a writer gets it once their lease has run out.
func TestReadReleaseLeavesTheLockTheRemainingHoldsLease(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, other, writer := relocktest.New(t, b), relocktest.New(t, b), relocktest.New(t, b)
		const name = "truth:remaining"
		const short = 2 * time.Second
		ctx := redistest.Context(t, time.Minute)
		first, err := c.RWLock(name).RLock(ctx, rlock.WithLease(short))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.RWLock(name).RLock(first, rlock.WithLease(short)); err != nil {
			t.Fatal(err)
		}
		long, err := other.RWLock(name).RLock(ctx, rlock.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if err := other.RWLock(name).RUnlock(long); err != nil {
			t.Fatal(err)
		}
		if p := redistest.PTTL(t, b.Client(t), name); p <= 0 || p > short.Milliseconds() {
			t.Fatalf("the lock's PTTL after the long read hold's release = %dms; want the remaining holds' lease, at most %v", p, short)
		}
		held, err := writer.RWLock(name).Lock(redistest.Context(t, 30*time.Second))
		if err != nil {
			t.Fatalf("a writer once the remaining read holds ran out: %v", err)
		}
		if err := writer.RWLock(name).Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// A read field whose timeout keys all ran out is a hold that is gone: its owner asking for
// the write lock waits like any writer (ErrLocked from TryLock while the lock is held by
// others), not ErrUpgrade.
func TestDeadReadHoldIsNoUpgrade(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		held, err := other.RWLock("truth:dead-read").RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mine, err := c.RWLock("truth:dead-read").RLock(ctx, rlock.WithLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-mine.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the 1s read hold's context did not end")
		}
		// The other reader keeps the hash alive, so the dead hold's field is still there.
		fields, err := redistest.Do(t, side, "HKEYS", "truth:dead-read").AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		stale := ""
		for _, f := range fields {
			if strings.HasPrefix(f, c.ID()+":") {
				stale = f
			}
		}
		if stale == "" {
			t.Fatalf("the dead read hold's field is not in the hash: %v", fields)
		}
		// The context ends at the local deadline, a little before Redis lets the key go.
		timeout := "{truth:dead-read}:" + stale + ":rwlock_timeout:1"
		redistest.Eventually(t, 15*time.Second, "the dead read hold's timeout key ran out", func() bool {
			n, err := redistest.Do(t, side, "EXISTS", timeout).AsInt64()
			return err == nil && n == 0
		})
		// The ended hold's context names the owner; a live context is needed to lock with.
		if err := keep(c.RWLock("truth:dead-read").TryLock(context.WithoutCancel(mine))); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("TryLock by the owner of a dead read hold: %v; want ErrLocked (not an upgrade)", err)
		}
		live(t, held, "other reader")
	})
}

// The fair lock hands over without a stall after a holder's lease runs out: a waiter
// behind one that takes the lock and never unlocks gets the lock when that hold's lease
// ends, not at its own refresh. (It once slept until its refresh period, up to 5s a
// hand-over by default, and waiters with a wait bound lost their turn.)
func TestFairHandoverAfterLeaseRunsOut(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		holderC, firstC, secondC := relocktest.New(t, b), relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		holder, err := holderC.FairLock("truth:fair").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		const lease = time.Second
		firstGot, secondGot := make(chan time.Time, 1), make(chan time.Time, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		go func() {
			// Takes the lock in its turn and never unlocks: its lease runs out.
			first := firstC.FairLock("truth:fair", fairlock.WithRefreshPeriod(time.Minute))
			if _, err := first.Lock(ctx, rlock.WithLease(lease)); err == nil {
				firstGot <- time.Now()
			}
			close(firstGot)
		}()
		redistest.Eventually(t, 15*time.Second, "first waiter queued", func() bool { return len(redistest.FairQueue(t, side, "truth:fair")) == 1 })
		go func() {
			// A refresh period far longer than the lease: a stall would show.
			if held, err := secondC.FairLock("truth:fair", fairlock.WithRefreshPeriod(time.Minute)).Lock(ctx); err == nil {
				secondGot <- time.Now()
				_ = secondC.FairLock("truth:fair").Unlock(held)
			}
			close(secondGot)
		}()
		redistest.Eventually(t, 15*time.Second, "second waiter queued", func() bool { return len(redistest.FairQueue(t, side, "truth:fair")) == 2 })
		if err := holderC.FairLock("truth:fair").Unlock(holder); err != nil {
			t.Fatal(err)
		}
		at, ok := <-firstGot
		if !ok {
			t.Fatal("the first waiter did not get the lock")
		}
		select {
		case got, ok := <-secondGot:
			if !ok {
				t.Fatal("the second waiter did not get the lock")
			}
			t.Logf("second waiter acquired %v after the first (lease %v)", got.Sub(at).Round(time.Millisecond), lease)
		case <-time.After(lease + 10*time.Second):
			t.Fatalf("the second waiter still waits %v after the first one's %v lease began", lease+10*time.Second, lease)
		}
	})
}

// A live fair waiter whose refresh is late (a busy process) keeps its place while the lock
// is held: only a waiter whose turn comes while its entry has run out is skipped. (A late
// refresh once counted as death whenever anybody looked at the queue, and the waiter was
// queued anew at the back.)
func TestLateFairWaiterKeepsItsPlace(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		holder, err := c.FairLock("truth:late").Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		order := make(chan string, 2)
		queueUp := func(who string) {
			go func() {
				m := c.FairLock("truth:late")
				held, err := m.Lock(ctx)
				if err != nil {
					order <- who + " failed: " + err.Error()
					return
				}
				order <- who
				_ = m.Unlock(held)
			}()
		}
		queueUp("late")
		redistest.Eventually(t, 15*time.Second, "late waiter queued", func() bool { return len(redistest.FairQueue(t, side, "truth:late")) == 1 })
		late := redistest.FairQueue(t, side, "truth:late")[0]
		queueUp("next")
		redistest.Eventually(t, 15*time.Second, "next waiter queued", func() bool { return len(redistest.FairQueue(t, side, "truth:late")) == 2 })
		// Make the first waiter's entry look as if its refresh were late: its deadline passed.
		redistest.MustDo(t, side, "ZADD", "redisson_lock_timeout:{truth:late}", "1", late)
		// Anybody's attempt looks at the queue; the lock is held, so nobody's turn passes.
		if err := keep(relocktest.New(t, b).FairLock("truth:late").TryLock(context.Background())); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("TryLock: %v; want ErrLocked", err)
		}
		if q := redistest.FairQueue(t, side, "truth:late"); len(q) != 2 || q[0] != late {
			t.Fatalf("queue after a late refresh while the lock is held: %v; want %s first", q, late)
		}
		// The late waiter comes back (its next refresh, at most 5s away by default) before
		// the holder lets go.
		redistest.Eventually(t, 15*time.Second, "late waiter refreshed", func() bool {
			s, err := redistest.Do(t, side, "ZSCORE", "redisson_lock_timeout:{truth:late}", late).AsFloat64()
			return err == nil && s > 1
		})
		if err := c.FairLock("truth:late").Unlock(holder); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"late", "next"} {
			select {
			case got := <-order:
				if got != want {
					t.Fatalf("granted to %q; want %q (arrival order)", got, want)
				}
			case <-ctx.Done():
				t.Fatal("waiters not granted")
			}
		}
	})
}

// A fenced acquisition whose token counter cannot be incremented fails with nothing left
// behind, for every kind that takes tokens. (The hold was once written before the INCR
// failed: the caller got ErrWrongType and the lock stayed held for a full lease.)
func TestFailedFencedAcquireLeavesNothing(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		kinds := map[string]func(ctx context.Context) error{
			"rlock": func(ctx context.Context) error { return keep(c.Lock("truth:fence-r", rlock.WithFencing()).Lock(ctx)) },
			"fair": func(ctx context.Context) error {
				return keep(c.FairLock("truth:fence-f", rlock.WithFencing()).Lock(ctx))
			},
			"write": func(ctx context.Context) error {
				return keep(c.RWLock("truth:fence-w", rlock.WithFencing()).Lock(ctx))
			},
		}
		names := map[string]string{"rlock": "truth:fence-r", "fair": "truth:fence-f", "write": "truth:fence-w"}
		for kind, lock := range kinds {
			t.Run(kind, func(t *testing.T) {
				name := names[kind]
				token := "redisson_lock_token:{" + name + "}"
				redistest.MustDo(t, side, "RPUSH", token, "not a counter")
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := lock(ctx); !errors.Is(err, relock.ErrWrongType) {
					t.Fatalf("fenced Lock with a list as the counter: %v; want ErrWrongType", err)
				}
				if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
					t.Fatalf("the failed acquisition left the lock behind: %s", redistest.Snapshot(t, side, name))
				}
				if got, _ := redistest.Do(t, side, "LRANGE", token, "0", "-1").AsStrSlice(); len(got) != 1 || got[0] != "not a counter" {
					t.Fatalf("the foreign counter key changed: %v", got)
				}
			})
		}
	})
}

// After Redis restarts without persistence (every lock is gone), a holder learns it when
// its client's subscriber reconnects, not at its next renewal: its context ends soon after
// a waiter on another client has taken the lock, well within a third of the lease. (With a
// 30s watchdog timeout the old holder's context once stayed live up to 10s beside the new
// holder.)
func TestRestartEndsHoldsAtReconnect(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		holderC := relocktest.New(t, b) // default 30s lease: renewals every 10s
		waiterC := relocktest.New(t, b)
		held, err := holderC.Lock("truth:restart").Lock(context.Background(), rlock.WithWaitTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		go func() {
			h, err := waiterC.Lock("truth:restart").Lock(ctx)
			if err != nil {
				close(got)
				return
			}
			got <- time.Now()
			_ = waiterC.Lock("truth:restart").Unlock(h)
		}()
		redistest.Eventually(t, 15*time.Second, "waiter parked", func() bool { return waiterC.PubSubStats().Waiting > 0 })
		// The restart comes well before the holder's first renewal (10s).
		b.Server.Restart(t)
		var acquired time.Time
		select {
		case at, ok := <-got:
			if !ok {
				t.Fatal("the waiter did not get the lock after the restart")
			}
			acquired = at
		case <-time.After(30 * time.Second):
			t.Fatal("the waiter did not get the lock within 30s of the restart")
		}
		select {
		case <-held.Done():
			if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
				t.Fatalf("cause %v; want ErrLeaseLost", context.Cause(held))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the old holder context is still live 5s after another client took the lock; want it ended at reconnect")
		}
		t.Logf("the old hold ended %v after the new holder got the lock", time.Since(acquired).Round(time.Millisecond))
	})
}

// A first-level acquisition made with the context of a hold that Redis lost but the client
// has not yet noticed (ForceUnlock by someone else, before the next renewal) gets a live
// context: the new hold must not derive from the old one, which ends now. (Its context
// was once born ended, with ErrLeaseLost, while Redis held the new hold for its lease.)
func TestNewHoldThroughLostHoldsContext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		mu := c.Lock("truth:relocked")
		old, err := mu.Lock(redistest.Context(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := other.Lock("truth:relocked").ForceUnlock(context.Background()); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		// The next renewal is 10s away: the client still takes old for live.
		again, err := mu.Lock(old, rlock.WithLease(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		live(t, again, "the new hold")
		if !errors.Is(context.Cause(old), relock.ErrLeaseLost) {
			t.Fatalf("the lost hold's context: %v; want ended with ErrLeaseLost", context.Cause(old))
		}
		if err := mu.Unlock(again); err != nil {
			t.Fatalf("Unlock of the new hold: %v", err)
		}
	})
}

// A downgrade made with the context a write re-entry returned keeps its read hold when the
// write hold ends, as one made with the write hold's own context does. (The read hold once
// derived from the write hold's re-entry context and ended with it, while Redis kept it.)
func TestDowngradeThroughReentryContext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		rw := c.RWLock("truth:downgrade")
		// A context that carries the owner without deriving from the write hold: that of
		// another lock the owner holds.
		bounded, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ctx, err := c.Lock("truth:downgrade-other").Lock(bounded)
		if err != nil {
			t.Fatal(err)
		}
		w, err := rw.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w2, err := rw.Lock(ctx) // a re-entry through ctx: a child context of ctx's
		if err != nil {
			t.Fatal(err)
		}
		r, err := rw.RLock(w2)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := rw.Unlock(w); err != nil {
				t.Fatal(err)
			}
		}
		live(t, r, "the downgraded read hold")
		if n, err := rw.RHoldCount(r); err != nil || n != 1 {
			t.Fatalf("RHoldCount = %d, %v; want 1", n, err)
		}
		if err := rw.RUnlock(r); err != nil {
			t.Fatal(err)
		}
	})
}

// A writer's fixed-lease write hold lives on while its owner's read hold of the same lock
// keeps the shared hash, and with it the write field, alive: its context stays live as long
// as Redis keeps the lock in write mode, and ends once Redis lets it go. (It once ended at
// its own lease while the read hold's renewals kept the lock write-locked, with nobody
// knowing.)
func TestWriteHoldLivesWithItsReadHold(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(3*time.Second))
		other := relocktest.New(t, b)
		side := b.Client(t)
		rw := c.RWLock("truth:coupled")
		start := time.Now()
		w, err := rw.Lock(redistest.Context(t, time.Minute), rlock.WithLease(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		r, err := rw.RLock(w) // renewed by the watchdog
		if err != nil {
			t.Fatal(err)
		}
		sleepUntil(start.Add(2500 * time.Millisecond)) // 1.5s past the write lease
		field := ""
		fields, _ := redistest.Do(t, side, "HKEYS", "truth:coupled").AsStrSlice()
		for _, f := range fields {
			if strings.HasSuffix(f, ":write") {
				field = f
			}
		}
		// The read hold's renewals keep the hash, so Redis still holds the lock in write
		// mode, and the write hold's context must say so.
		if field == "" {
			t.Fatalf("the write field is gone while the read hold keeps the hash: %v", fields)
		}
		live(t, w, "write hold kept by the shared hash")
		if err := keep(other.RWLock("truth:coupled").TryRLock(context.Background())); !errors.Is(err, relock.ErrLocked) {
			t.Fatalf("another reader beside the write hold: %v; want ErrLocked", err)
		}
		if err := rw.RUnlock(r); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.Done():
		case <-time.After(15 * time.Second):
			t.Fatal("the write hold's context did not end after its read hold left")
		}
		redistest.Eventually(t, 15*time.Second, "Redis let the write hold go when its context ended", func() bool {
			n, err := redistest.Do(t, side, "EXISTS", "truth:coupled").AsInt64()
			return err == nil && n == 0
		})
	})
}

// Lock with a context that has already ended fails with its error and takes nothing, for
// every kind: a hold taken then would get a context that is born ended, while Redis kept
// the lock for a full lease. (Lock once took a free lock with such a context.)
func TestLockWithEndedContextTakesNothing(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		for _, k := range []holdKind{kindRLock, kindFair, kindWrite, kindRead} {
			name := "truth:ended-" + k.name
			if _, err := k.lock(c, ended, name, 0); !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: Lock with an ended context: %v; want context.Canceled", k.name, err)
			}
			if n, _ := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 {
				t.Fatalf("%s: Lock with an ended context left the lock held: %s", k.name, redistest.Snapshot(t, side, name))
			}
		}
	})
}

// A lease that is not a whole number of milliseconds is taken in whole ones, as Redis
// keeps it: another owner that gets the lock once Redis let the lease run out finds the
// first hold's context ended, for a lease given to Lock, to Extend, and as the client's
// watchdog timeout (its renewals cut off by a blackhole). (The client once sent Redis the
// lease rounded down and kept the whole of it, fraction and all, for the hold's context:
// up to a millisecond in which both owners' contexts were live.)
func TestFractionalLeaseEndsWithRedis(t *testing.T) {
	t.Parallel()
	const lease = 50*time.Millisecond + 900*time.Microsecond
	for _, via := range []string{"WithLease", "Extend", "WithWatchdogTimeout"} {
		t.Run(via, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				c, other := relocktest.New(t, b), relocktest.New(t, b)
				var proxy *redistest.Proxy
				if via == "WithWatchdogTimeout" {
					proxy = redistest.StartProxy(t, b.Addr)
					c = relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()}, relock.WithWatchdogTimeout(lease), relock.WithLogger(nil))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				checked := 0
				for trial := 0; trial < 60 && checked < 20; trial++ {
					name := "frac-" + via + "-" + strconv.Itoa(trial)
					mu := c.Lock(name)
					var held context.Context
					var err error
					switch via {
					case "WithLease":
						held, err = mu.Lock(ctx, rlock.WithLease(lease))
					case "WithWatchdogTimeout":
						if held, err = mu.Lock(ctx); err == nil {
							proxy.Blackhole() // no renewal reaches Redis any more
						}
					default:
						// A shorter fixed lease, then Extend to the fractional one. On a loaded
						// machine the first may run out before the Extend: try again.
						if held, err = mu.Lock(ctx, rlock.WithLease(40*time.Millisecond)); err == nil {
							if err = mu.Extend(held, lease); errors.Is(err, relock.ErrNotHeld) {
								continue
							}
						}
					}
					if err != nil {
						t.Fatal(err)
					}
					checked++
					start := time.Now()
					sleepUntil(start.Add(lease - 5*time.Millisecond))
					// Ask until the other owner gets in, at the latest a second on.
					for time.Since(start) < time.Second {
						got, err := other.Lock(name).TryLock(ctx)
						if errors.Is(err, relock.ErrLocked) {
							continue
						}
						if err != nil {
							t.Fatal(err)
						}
						if held.Err() == nil {
							t.Fatalf("trial %d: another owner got the lock while the first hold's context (lease %v via %s) was live", trial, lease, via)
						}
						_ = other.Lock(name).Unlock(got)
						break
					}
					if proxy != nil {
						proxy.Unblackhole()
					}
				}
				if checked < 20 {
					t.Fatalf("%d trials checked of 60; want 20", checked)
				}
			})
		})
	}
}

// lateRenewal is a Redis client whose first renewal batch of reentrant locks runs at once
// but is answered late (the reply held back d on its way), and whose later renewals never
// reach Redis (they fail as a cancelled call does): after answered closes, the lock's
// expiry in Redis is the one that late-answered renewal set.
type lateRenewal struct {
	rueidis.Client
	d        time.Duration
	sha      string
	n        atomic.Int32
	answered chan struct{}
}

func (l *lateRenewal) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	renewal := false
	for _, cmd := range cmds {
		renewal = renewal || slices.Contains(cmd.Commands(), l.sha)
	}
	if !renewal {
		return l.Client.DoMulti(ctx, cmds...)
	}
	if l.n.Add(1) > 1 {
		gone, cancel := context.WithCancel(ctx)
		cancel()
		return l.Client.DoMulti(gone, cmds...)
	}
	res := l.Client.DoMulti(ctx, cmds...)
	time.Sleep(l.d)
	close(l.answered)
	return res
}

// A renewal counts the lease from when it was sent, not from when its reply came: the
// reply of one that ran at once but was heard a second late must not move the hold's
// deadline past the expiry Redis set. When Redis lets the lock go, the hold's context has
// ended.
func TestLateRenewalReplyCountsFromTheSend(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		side := b.Client(t)
		redistest.MustDo(t, side, "SCRIPT", "LOAD", script.RLockRenew().Source) // no NOSCRIPT round
		rc := &lateRenewal{Client: b.Client(t), d: time.Second, sha: script.RLockRenew().SHA1, answered: make(chan struct{})}
		c := relocktest.On(t, rc, relock.WithWatchdogTimeout(2*time.Second), relock.WithLogger(nil))
		held, err := c.Lock("late-renewal").Lock(redistest.Context(t, 20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		redistest.Recv(t, rc.answered, 10*time.Second, "the late-answered renewal")
		redistest.Eventually(t, 10*time.Second, "the lock never ran out in Redis", func() bool {
			n, _ := redistest.Do(t, side, "EXISTS", "late-renewal").AsInt64()
			return n == 0
		})
		if held.Err() == nil {
			t.Fatal("the hold's context is live after Redis let the lock go")
		}
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("the hold's context ended with %v; want ErrLeaseLost", cause)
		}
	})
}

// A check of every hold (the subscriber connection came back, and Redis may have restarted)
// looks at a fixed-lease hold without extending it: a WithLease hold is not renewed, so the
// lock still expires at its own lease, and its context ends then.
func TestCheckLeavesAFixedLease(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b) // 30s watchdog: a renewal would carry the key far past its lease
		side := b.Client(t)
		const lease = 3 * time.Second
		held, err := c.Lock("truth:check-fixed").Lock(context.Background(), rlock.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		// Cut every connection of the client: the subscriber's comes back, and the watchdog
		// checks every hold then, the fixed one alone among them (a check round is a tick).
		redistest.MustDo(t, side, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
		redistest.Eventually(t, 10*time.Second, "no check round after the reconnect", func() bool {
			return c.WatchdogStats().Ticks > 0
		})
		if p := redistest.PTTL(t, side, "truth:check-fixed"); p > lease.Milliseconds() {
			t.Fatalf("PTTL %dms after the check; want at most the fixed lease's %v", p, lease)
		}
		select {
		case <-held.Done():
			if !errors.Is(context.Cause(held), relock.ErrLeaseLost) {
				t.Errorf("cause %v; want ErrLeaseLost", context.Cause(held))
			}
		case <-time.After(lease + 5*time.Second):
			t.Fatalf("the fixed lease's context is live %v after a %v lease", lease+5*time.Second, lease)
		}
		// The context ends at the lease counted from the acquisition's send; Redis counts
		// from when it ran, a moment later.
		redistest.Eventually(t, 2*time.Second, "the key outlived the fixed lease", func() bool {
			n, _ := redistest.Do(t, side, "EXISTS", "truth:check-fixed").AsInt64()
			return n == 0
		})
	})
}

// A holder that Redis no longer hears from (its process gone, or cut off) frees the lock
// within a lease, as Redisson's testAutoExpire has it: a waiter of another client, parked
// before the holder went silent, gets the lock with no unlock to wake it, within the
// holder's lease and a margin, and by then the holder's context has ended with
// ErrLeaseLost. For each kind: a reader's silence lets a writer in.
func TestSilentHolderFreesWithinALease(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, tc := range []struct{ holder, waiter holdKind }{
			{kindRLock, kindRLock},
			{kindSpin, kindSpin},
			{kindFair, kindFair},
			{kindWrite, kindWrite},
			{kindRead, kindWrite},
		} {
			t.Run(tc.holder.name, func(t *testing.T) {
				proxy := redistest.StartProxy(t, b.Addr)
				silent := relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()}, relock.WithWatchdogTimeout(lease), relock.WithLogger(nil))
				other := relocktest.New(t, b)
				ctx := redistest.Context(t, time.Minute)
				name := "truth:silent-" + tc.holder.name
				held, err := tc.holder.lock(silent, relock.NewOwner(ctx), name, 0)
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan error, 1)
				var cause error
				go func() {
					// Bounded: two of the holder's leases and a margin for a loaded machine.
					wctx, cancel := context.WithTimeout(relock.NewOwner(ctx), 2*lease+5*time.Second)
					defer cancel()
					h, err := tc.waiter.lock(other, wctx, name, 0)
					if err == nil {
						// What the holder's context said the moment another owner held the lock.
						cause = context.Cause(held)
						err = tc.waiter.unlock(other, h, name)
					}
					got <- err
				}()
				// Most often the waiter has found the lock held and parked by now; if not, it
				// finds it held when it tries, until the holder's lease runs out.
				time.Sleep(lease / 10)
				proxy.Blackhole()
				if err := redistest.Recv(t, got, 2*lease+10*time.Second, "the waiter's Lock"); err != nil {
					t.Fatalf("the waiter, after the holder went silent: %v", err)
				}
				if !errors.Is(cause, relock.ErrLeaseLost) {
					t.Fatalf("another owner got the lock while the silent holder's context said %v; want it ended with ErrLeaseLost", cause)
				}
				proxy.Unblackhole()
			})
		}
	})
}

// A lock that another owner holds with a lease longer than a time.Duration counts in
// milliseconds (about 292 years: a Redisson client may set any lease) is held: every kind
// waits for it, and TryLock fails with ErrLocked, leaving the other owner's data as it
// was. (The PTTL, turned into how long to sleep, once overflowed to a negative duration,
// which the attempt took for a grant: Lock returned a hold, already lost, while the other
// owner held the lock.) A real server only: miniredis keeps expiries as a time.Duration
// too, and drops a key given such a lease at once.
func TestForeignLeaseBeyondDurationRange(t *testing.T) {
	const lease = "10000000000000" // ms: 317 years
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		for _, k := range []holdKind{kindRLock, kindSpin, kindFair, kindWrite, kindRead} {
			t.Run(k.name, func(t *testing.T) {
				n := "truth:centuries:" + k.name
				want := heldFor(t, side, k, n, lease)
				waitsItsBound(t, c, k, n)
				var err error
				switch k.name {
				case "rlock":
					_, err = c.Lock(n).TryLock(context.Background())
				case "spin":
					_, err = c.SpinLock(n).TryLock(context.Background())
				case "fair":
					_, err = c.FairLock(n).TryLock(context.Background())
				case "write":
					_, err = c.RWLock(n).TryLock(context.Background())
				case "read":
					_, err = c.RWLock(n).TryRLock(context.Background())
				}
				if !errors.Is(err, relock.ErrLocked) {
					t.Fatalf("TryLock = %v; want ErrLocked", err)
				}
				if got, err := redistest.Do(t, side, "HGETALL", n).AsStrMap(); err != nil || !maps.Equal(got, want) {
					t.Fatalf("the other owner's lock = %v, %v; want %v", got, err, want)
				}
			})
		}
	})
}

// heldFor writes a hold of a Redisson client's owner on the lock n of kind k (a write hold
// for either hold of a read-write lock), with an expiry of lease ms, as a Redisson client
// may set it, and returns the lock's hash as written.
func heldFor(t *testing.T, side rueidis.Client, k holdKind, n, lease string) map[string]string {
	t.Helper()
	hash := map[string]string{javaOwner: "1"}
	if k.name == "write" || k.name == "read" {
		hash = map[string]string{"mode": "write", javaOwner + ":write": "1"}
	}
	for f, v := range hash {
		redistest.MustDo(t, side, "HSET", n, f, v)
	}
	redistest.MustDo(t, side, "PEXPIRE", n, lease)
	return hash
}

// waitsItsBound checks that a Lock of kind k on n, held by another owner, waits until the
// bound of its own context, 300 ms, which the lock outlives.
func waitsItsBound(t *testing.T, c *relock.Client, k holdKind, n string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(redistest.Context(t, 30*time.Second), 300*time.Millisecond)
	defer cancel()
	if _, err := k.lock(c, ctx, n, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a lock held by another owner = %v; want the wait bound", err)
	}
}

// A read hold's TTL is the lock's, which another reader may have been promised for
// longer than a time.Duration counts in milliseconds (about 292 years: a Redisson client
// may set any lease): it reports the longest duration there is, never a negative one,
// which TTL keeps for a lock without expiry. (It once overflowed to minus 267 years.)
func TestTTLBeyondDurationRange(t *testing.T) {
	const lease = "10000000000000" // ms: 317 years
	// A real server only: miniredis keeps expiries as a time.Duration too, and drops a key
	// given such a lease at once.
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		const n = "truth:centuries-ttl"
		redistest.MustDo(t, side, "HSET", n, "mode", "read", javaOwner, "1")
		redistest.MustDo(t, side, "SET", "{"+n+"}:"+javaOwner+":rwlock_timeout:1", "1", "PX", lease)
		redistest.MustDo(t, side, "PEXPIRE", n, lease)
		rw := c.RWLock(n)
		held, err := rw.RLock(redistest.Context(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := rw.TTL(held); err != nil || d != math.MaxInt64 {
			t.Fatalf("TTL = %v, %v; want the longest duration", d, err)
		}
		if err := rw.RUnlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// A waiter of a lock that another owner holds with a lease of millions of years (beyond
// what a Lua number prints as a whole number, 10^17 ms) registers its client for as long
// as it may sleep, within what PEXPIRE takes, and waits: the registration is never left
// without expiry. (The registry's expiry, the lease and a second, reached PEXPIRE as
// "4.0000000000000010e+18", which it refused after the client was registered: the
// waiter failed with ErrWrongType and its registration stayed for ever.)
func TestWaiterBehindALeaseOfMillionsOfYears(t *testing.T) {
	const lease = "4000000000000000000" // ms
	// A real server only: miniredis keeps expiries as a time.Duration.
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		for _, k := range []holdKind{kindRLock, kindWrite, kindRead} {
			t.Run(k.name, func(t *testing.T) {
				n := keys.Of("truth:millions:" + k.name)
				heldFor(t, side, k, n.Lock, lease)
				waitsItsBound(t, c, k, n.Lock)
				for _, key := range []string{n.Wake, n.Readers} {
					if ttl, err := redistest.Do(t, side, "PTTL", key).AsInt64(); err != nil || ttl == -1 {
						t.Fatalf("%s: PTTL = %d, %v; want no key, or one that expires", key, ttl, err)
					}
				}
			})
		}
	})
}

// The watchdog renews a client's holds in batches, one script call for many locks: a
// lock of the batch that someone gave an expiry of millions of years (beyond what a Lua
// number prints as a whole number, 10^17 ms; its hash, and a read hold's timeout keys too)
// must not stop the renewal of the others, for
// the plain and the read-write lock's renewal alike. (Its renewal reached PEXPIRE as
// "4.0000000000000010e+18", which failed the whole call: every other hold of the batch
// ran out in Redis.)
func TestRenewalBesideALockOfMillionsOfYears(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	// A real server only: miniredis keeps expiries as a time.Duration.
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(lease))
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		for _, k := range []holdKind{kindRLock, kindRead} {
			t.Run(k.name, func(t *testing.T) {
				far, kept := "truth:renew-far:"+k.name, "truth:renew-kept:"+k.name
				if _, err := k.lock(c, ctx, far, 0); err != nil {
					t.Fatal(err)
				}
				held, err := k.lock(c, ctx, kept, 0)
				if err != nil {
					t.Fatal(err)
				}
				redistest.MustDo(t, side, "PEXPIRE", far, "4000000000000000000")
				farTimeouts(t, side, k, far)
				sleepUntil(time.Now().Add(lease * 5 / 2))
				live(t, held, "the other hold of the batch")
				if p := redistest.PTTL(t, side, kept); p <= 0 {
					t.Fatalf("the other hold of the batch lapsed in Redis: PTTL %d", p)
				}
				if err := k.unlock(c, held, kept); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

// farTimeouts gives the timeout keys of a read hold of lock name the expiry of millions of
// years its hash was given (Redisson's read lock sets both when taken with such a lease),
// and fails the test when a read hold has none to give; other kinds have no timeout keys.
func farTimeouts(t *testing.T, side rueidis.Client, k holdKind, name string) {
	t.Helper()
	if k.name != "read" {
		return
	}
	ks, err := redistest.Do(t, side, "KEYS", "{"+name+"}:*:rwlock_timeout:*").AsStrSlice()
	if err != nil || len(ks) == 0 {
		t.Fatalf("the read hold's timeout keys: %v, %v; want at least one", ks, err)
	}
	for _, key := range ks {
		redistest.MustDo(t, side, "PEXPIRE", key, "4000000000000000000")
	}
}

// A hold whose lock someone gave an expiry of millions of years (beyond what a Lua number
// prints as a whole number, 10^17 ms; its hash, and a read hold's timeout keys too) is
// re-entered and released like any other, for every kind: the scripts never hand PEXPIRE
// or SET an expiry longer than 2^53 ms.
// (A re-entry incremented the count and then failed on PEXPIRE of
// "4.0000000000000010e+18": a hold was left in Redis that its owner was told it had not
// got.)
func TestReentryOfALockOfMillionsOfYears(t *testing.T) {
	// A real server only: miniredis keeps expiries as a time.Duration.
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, 30*time.Second)
		for _, k := range []holdKind{kindRLock, kindSpin, kindFair, kindWrite, kindRead} {
			t.Run(k.name, func(t *testing.T) {
				n := "truth:millions-reentry:" + k.name
				held, err := k.lock(c, ctx, n, 0)
				if err != nil {
					t.Fatal(err)
				}
				redistest.MustDo(t, side, "PEXPIRE", n, "4000000000000000000")
				farTimeouts(t, side, k, n)
				again, err := k.lock(c, held, n, 0)
				if err != nil {
					t.Fatalf("re-entry: %v", err)
				}
				if got, err := k.count(c, again, n); err != nil || got != 2 {
					t.Fatalf("hold count after the re-entry = %d, %v; want 2", got, err)
				}
				for i := range 2 {
					if err := k.unlock(c, again, n); err != nil {
						t.Fatalf("unlock %d: %v", i+1, err)
					}
				}
				if e, _ := redistest.Do(t, side, "EXISTS", n).AsInt64(); e != 0 {
					t.Fatal("the lock is still there after both unlocks")
				}
			})
		}
	})
}

// A server whose clock gains on the client's lets a lease run out early by the client's
// measure. A hold's context allows for that, as Redlock's validity does: it ends a
// hundredth of its lease (and 2ms) early, so that it has ended before Redis lets another
// owner in while the server's clock runs up to a hundredth fast. Here miniredis's clock runs
// 0.8% fast, and another client asks for the lock every millisecond from before Redis lets
// the lease go: a lease given to Lock (every kind), one given to Extend or to a re-entry,
// the watchdog's lease renewed and then cut off, and a semaphore's leased permits. (The context once
// ended at exactly the lease from the send, which such a server undercut by 16ms of the
// 2s lease: both owners' contexts were live at once.)
func TestServerClockAheadEndsHoldFirst(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	type hold func(t *testing.T, c *relock.Client, proxy *redistest.Proxy, ctx context.Context, n string) context.Context
	withLease := func(k holdKind) hold {
		return func(t *testing.T, c *relock.Client, _ *redistest.Proxy, ctx context.Context, n string) context.Context {
			held, err := k.lock(c, ctx, n, lease)
			if err != nil {
				t.Fatal(err)
			}
			return held
		}
	}
	cases := []struct {
		name string
		hold hold
		take func(c *relock.Client, ctx context.Context, n string) (bool, error)
		// renewed: the holding client's watchdog timeout is the lease, behind a proxy
		renewed bool
	}{
		{name: "rlock", hold: withLease(kindRLock), take: takeLock},
		{name: "spin", hold: withLease(kindSpin), take: takeLock},
		{name: "fair", hold: withLease(kindFair), take: takeLock},
		{name: "write", hold: withLease(kindWrite), take: takeWrite},
		{name: "read", hold: withLease(kindRead), take: takeWrite},
		{name: "Extend", take: takeLock, hold: func(t *testing.T, c *relock.Client, _ *redistest.Proxy, ctx context.Context, n string) context.Context {
			held, err := c.Lock(n).Lock(ctx, rlock.WithLease(lease/2))
			if err == nil {
				err = c.Lock(n).Extend(held, lease)
			}
			if err != nil {
				t.Fatal(err)
			}
			return held
		}},
		{name: "re-entry", take: takeLock, hold: func(t *testing.T, c *relock.Client, _ *redistest.Proxy, ctx context.Context, n string) context.Context {
			held, err := c.Lock(n).Lock(ctx, rlock.WithLease(lease/2))
			if err == nil {
				_, err = c.Lock(n).Lock(held, rlock.WithLease(lease))
			}
			if err != nil {
				t.Fatal(err)
			}
			return held
		}},
		{name: "renewal", take: takeLock, renewed: true, hold: func(t *testing.T, c *relock.Client, proxy *redistest.Proxy, ctx context.Context, n string) context.Context {
			held, err := c.Lock(n).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The watchdog renews every third of the lease: cut it off after a renewal.
			time.Sleep(lease / 2)
			proxy.Blackhole()
			return held
		}},
		{name: "semaphore", renewed: true,
			take: func(c *relock.Client, ctx context.Context, n string) (bool, error) {
				_, ok, err := c.Semaphore(n).TryAcquireLease(ctx, 1)
				return ok, err
			},
			hold: func(t *testing.T, c *relock.Client, proxy *redistest.Proxy, ctx context.Context, n string) context.Context {
				if ok, err := c.Semaphore(n).TrySetPermits(ctx, 1); err != nil || !ok {
					t.Fatalf("TrySetPermits = %v, %v", ok, err)
				}
				held, err := c.Semaphore(n).AcquireLease(ctx, 1)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(lease / 2)
				proxy.Blackhole()
				return held
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := redistest.Mini(t)
			redistest.ClockAhead(t, b, 1.008)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, other := relocktest.New(t, b), relocktest.New(t, b)
			var proxy *redistest.Proxy
			if tc.renewed {
				proxy = redistest.StartProxy(t, b.Addr)
				c = relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: proxy.Addr()}, relock.WithWatchdogTimeout(lease), relock.WithLogger(nil))
			}
			const name = "clock-ahead"
			owner := relock.NewOwner(ctx)
			start := time.Now() // before the hold's last request: its deadline runs from later
			held := tc.hold(t, c, proxy, owner, name)
			if tc.renewed {
				start = time.Now().Add(-lease / 2) // the last renewal was sent after this
			}
			endsBeforeTaken(t, held, start, lease, func() (bool, error) { return tc.take(other, ctx, name) })
		})
	}
}

// endsBeforeTaken has another owner ask for a lock (take) every millisecond, from shortly
// before the lease of a hold that began at start runs out on a server whose clock runs 0.8%
// fast (16ms early on a 2s lease), until it gets it; and fails the test unless the hold's
// context had ended by then, with ErrLeaseLost.
func endsBeforeTaken(t *testing.T, held context.Context, start time.Time, lease time.Duration, take func() (bool, error)) {
	t.Helper()
	sleepUntil(start.Add(lease - lease/50))
	for {
		if time.Since(start) > lease+10*time.Second {
			t.Fatalf("another owner never got the lock, %v after the hold", time.Since(start))
		}
		got, err := take()
		if err != nil {
			t.Fatal(err)
		}
		if got {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if held.Err() == nil {
		t.Fatalf("another owner got the lock %v after the hold began, while the hold's context (lease %v, server clock 0.8%% fast) was live", time.Since(start), lease)
	}
	if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
		t.Errorf("the hold's cause = %v; want ErrLeaseLost", cause)
	}
}

// takeLock is what another owner of a plain, fair or spin lock's data tries: whether it got
// the lock n.
func takeLock(c *relock.Client, ctx context.Context, n string) (bool, error) {
	_, err := c.Lock(n).TryLock(ctx)
	return err == nil, ignoreLocked(err)
}

// takeWrite is what another owner of a read-write lock's data tries: whether it got the
// write lock n.
func takeWrite(c *relock.Client, ctx context.Context, n string) (bool, error) {
	_, err := c.RWLock(n).TryLock(ctx)
	return err == nil, ignoreLocked(err)
}

// ignoreLocked is err, or nil for ErrLocked.
func ignoreLocked(err error) error {
	if errors.Is(err, relock.ErrLocked) {
		return nil
	}
	return err
}

// grantEnv is what a grantPath's hold works with.
type grantEnv struct {
	b      *redistest.Backend
	c      *relock.Client   // the holding client, observed by rec
	proxy  *redistest.Proxy // c's, when the path is proxied
	rec    *recorder
	ctx    context.Context
	holder *relock.Client // a third client, for holds the path needs beside c's
}

// grantPath is a way a hold gets its lease other than its own Lock, Extend or renewal.
type grantPath struct {
	name    string
	proxied bool // c goes through a proxy, with the lease as its watchdog timeout
	// renewed: the lease comes from a renewal before a time the path can only estimate
	renewed bool
	// take is another owner's attempt at what the hold holds, named n.
	take func(c *relock.Client, ctx context.Context, n string) (bool, error)
	// hold returns the hold and a time before any request that set its lease was sent.
	hold func(t *testing.T, e *grantEnv, n string) (context.Context, time.Time)
}

// grantPaths are the ways a hold of a lease gets it other than its own uncontended Lock,
// Extend or renewal: a waiter's attempt once another client unlocked (a plain lock's, and
// a fair lock's in its turn); a lock handed to a waiter of the unlocking client (the hand call sent by the
// releaser, or passed to the waiter when another waits behind it); a write hold whose field
// lives on in a hash whose expiry its owner's read hold raised (a fixed read hold, and a
// renewed one cut off); a MultiLock's first member kept while the call waited for a later
// one; an acquisition whose reply was lost, which the client learns of by asking; and a
// semaphore's lease cut off before its first renewal.
func grantPaths(lease time.Duration) []grantPath {
	// handed parks waiters of c on n (behind of them after the first, which asks for the
	// lease), unlocks c's hold so that the first is handed the lock, and returns its hold
	// and when the unlock began.
	handed := func(t *testing.T, e *grantEnv, n string, behind int) (context.Context, time.Time) {
		mu := e.c.Lock(n)
		holder, err := mu.Lock(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan context.Context, 1)
		go func() {
			h, err := mu.Lock(relock.NewOwner(e.ctx), rlock.WithLease(lease))
			if err != nil {
				t.Errorf("the first waiter: %v", err)
			}
			got <- h
		}()
		redistest.Eventually(t, 10*time.Second, "the first waiter parked", func() bool { return relocktest.Waiting(e.c) == 1 })
		wctx, cancel := context.WithCancel(e.ctx)
		t.Cleanup(cancel)
		for i := range behind {
			go func() { _, _ = mu.Lock(relock.NewOwner(wctx)) }()
			redistest.Eventually(t, 10*time.Second, "a waiter parked behind", func() bool { return relocktest.Waiting(e.c) == 2+i })
		}
		e.rec.reset()
		start := time.Now()
		if err := mu.Unlock(holder); err != nil {
			t.Fatal(err)
		}
		held := redistest.Recv(t, got, 10*time.Second, "the first waiter's Lock")
		if held == nil {
			t.FailNow()
		}
		if acq := e.rec.snapshot().acquired; len(acq) == 0 || acq[0].Woken != observe.ByHandoff {
			t.Fatalf("the waiter's acquisition = %+v; want one handed the lock", acq)
		}
		cancel() // the waiters behind give up
		return held, start
	}
	// woken parks a waiter of c on n, held by another client, for half a lease, has that
	// client unlock, and returns the waiter's hold and when the unlock began.
	woken := func(t *testing.T, e *grantEnv, n string, k holdKind) (context.Context, time.Time) {
		holder, err := k.lock(e.holder, e.ctx, n, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan context.Context, 1)
		go func() {
			h, err := k.lock(e.c, e.ctx, n, lease)
			if err != nil {
				t.Errorf("the waiter: %v", err)
			}
			got <- h
		}()
		redistest.Eventually(t, 10*time.Second, "the waiter parked", func() bool { return relocktest.Waiting(e.c) == 1 })
		time.Sleep(lease / 2) // a lease counted from the wait's start would end that much early
		start := time.Now()
		if err := k.unlock(e.holder, holder, n); err != nil {
			t.Fatal(err)
		}
		held := redistest.Recv(t, got, 10*time.Second, "the waiter's Lock")
		if held == nil {
			t.FailNow()
		}
		return held, start
	}
	return []grantPath{
		{name: "woken", take: takeLock, hold: func(t *testing.T, e *grantEnv, n string) (context.Context, time.Time) {
			return woken(t, e, n, kindRLock)
		}},
		{name: "fair turn", take: takeLock, hold: func(t *testing.T, e *grantEnv, n string) (context.Context, time.Time) {
			return woken(t, e, n, kindFair)
		}},
		{name: "handed", take: takeLock, hold: func(t *testing.T, e *grantEnv, n string) (context.Context, time.Time) {
			return handed(t, e, n, 0)
		}},
		{name: "handed by the waiter", take: takeLock, hold: func(t *testing.T, e *grantEnv, n string) (context.Context, time.Time) {
			return handed(t, e, n, 1)
		}},
		{name: "write kept by a fixed read hold", take: takeWrite, hold: func(t *testing.T, e *grantEnv, n string) (context.Context, time.Time) {
			rw := e.c.RWLock(n)
			w, err := rw.Lock(e.ctx, rlock.WithLease(lease/4))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := rw.RLock(w, rlock.WithLease(lease)); err != nil {
				t.Fatal(err)
			}
			return w, start
		}},
		{name: "write kept by a renewed read hold", proxied: true, renewed: true, take: takeWrite, hold: func(t *testing.T, e *grantEnv, n string) (context.Context, time.Time) {
			rw := e.c.RWLock(n)
			w, err := rw.Lock(e.ctx, rlock.WithLease(lease/4))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rw.RLock(w); err != nil {
				t.Fatal(err)
			}
			// The watchdog renews every third of the lease: cut it off after a renewal,
			// which raised the hash's expiry past the write hold's own lease.
			time.Sleep(lease / 2)
			e.proxy.Blackhole()
			return w, time.Now().Add(-lease / 2)
		}},
		{name: "multilock kept while waiting", take: takeLock, hold: func(t *testing.T, e *grantEnv, n string) (context.Context, time.Time) {
			// n is taken first, and kept past its lease while the call waits for n+"-b".
			last, err := e.holder.Lock(n + "-b").Lock(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan context.Context, 1)
			go func() {
				h, err := e.c.MultiLock(relock.Member(e.c.Lock(n)), relock.Member(e.c.Lock(n+"-b"))).Lock(e.ctx, rlock.WithLease(lease))
				if err != nil {
					t.Errorf("MultiLock: %v", err)
				}
				got <- h
			}()
			redistest.Eventually(t, 10*time.Second, "the MultiLock waits for its last member", func() bool { return relocktest.Waiting(e.c) == 1 })
			time.Sleep(lease * 3 / 2)
			start := time.Now()
			if err := e.holder.Lock(n + "-b").Unlock(last); err != nil {
				t.Fatal(err)
			}
			held := redistest.Recv(t, got, 10*time.Second, "the MultiLock")
			if held == nil {
				t.FailNow()
			}
			return held, start
		}},
		{name: "reply lost", proxied: true, take: takeLock, hold: func(t *testing.T, e *grantEnv, n string) (context.Context, time.Time) {
			start := time.Now()
			e.proxy.LoseReplyTo(n)
			held, err := e.c.Lock(n).Lock(e.ctx, rlock.WithLease(lease))
			if err != nil {
				t.Fatal(err)
			}
			if e.proxy.Armed() != 0 {
				t.Fatal("the acquisition's reply was not lost")
			}
			return held, start
		}},
		{name: "semaphore grant", proxied: true,
			take: func(c *relock.Client, ctx context.Context, n string) (bool, error) {
				_, ok, err := c.Semaphore(n).TryAcquireLease(ctx, 1)
				return ok, err
			},
			hold: func(t *testing.T, e *grantEnv, n string) (context.Context, time.Time) {
				if ok, err := e.c.Semaphore(n).TrySetPermits(e.ctx, 1); err != nil || !ok {
					t.Fatalf("TrySetPermits = %v, %v", ok, err)
				}
				start := time.Now()
				held, err := e.c.Semaphore(n).AcquireLease(e.ctx, 1)
				if err != nil {
					t.Fatal(err)
				}
				e.proxy.Blackhole() // before the first renewal
				return held, start
			}},
	}
}

// onGrantPath runs the hold of path p, on lock n of b, with ctx as its parent and clients
// of its own, and returns the hold and its start (see grantPath.hold).
func onGrantPath(t *testing.T, b *redistest.Backend, ctx context.Context, p grantPath, lease time.Duration, n string) (context.Context, time.Time) {
	t.Helper()
	e := &grantEnv{b: b, rec: &recorder{}, ctx: ctx, holder: relocktest.New(t, b)}
	if p.proxied {
		e.proxy = redistest.StartProxy(t, b.Addr)
		e.c = relocktest.New(t, &redistest.Backend{Name: b.Name, Addr: e.proxy.Addr()}, relock.WithWatchdogTimeout(lease),
			relock.WithLogger(nil), relock.WithObserver(e.rec))
	} else {
		e.c = relocktest.New(t, b, relock.WithObserver(e.rec))
	}
	return p.hold(t, e, n)
}

// The same server, 0.8% fast, under the holds of every grant path: each hold's context
// must have ended when another owner gets in. (A path that computed its deadline as the
// send plus the lease, as every path did before the allowance, lets the other owner in
// while the context is live.)
func TestServerClockAheadEndsEveryGrantFirst(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	for _, p := range grantPaths(lease) {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			b := redistest.Mini(t)
			redistest.ClockAhead(t, b, 1.008)
			ctx := redistest.Context(t, time.Minute)
			other := relocktest.New(t, b)
			const name = "clock-ahead"
			held, start := onGrantPath(t, b, ctx, p, lease, name)
			endsBeforeTaken(t, held, start, lease, func() (bool, error) { return p.take(other, ctx, name) })
		})
	}
}

// The same server, 0.8% fast, under a semaphore's lease taken while its count has an
// expiry: the leased permits go with the count (Redisson's expire), however far off the
// lease's renewal, and the lease's context must have ended, by the allowance for clocks,
// when another client has set the semaphore up again and leased its permit. (A lease whose
// context ends at the count's expiry as the client measures it, without the allowance,
// is live when such a server lets the permit go.)
func TestServerClockAheadEndsExpiringSemaphoreLeaseFirst(t *testing.T) {
	t.Parallel()
	const expiry = 2 * time.Second
	b := redistest.Mini(t)
	redistest.ClockAhead(t, b, 1.008)
	ctx := redistest.Context(t, time.Minute)
	// The watchdog's renewals (a minute's timeout) are far off: only the count's expiry
	// ends the lease.
	c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute), relock.WithLogger(nil))
	other := relocktest.New(t, b)
	const name = "clock-ahead-semaphore"
	if ok, err := c.Semaphore(name).TrySetPermits(ctx, 1); err != nil || !ok {
		t.Fatalf("TrySetPermits = %v, %v", ok, err)
	}
	start := time.Now() // before the count's expiry is set: the lease's deadline runs from later
	redistest.MustDo(t, b.Client(t), "PEXPIRE", name, strconv.FormatInt(expiry.Milliseconds(), 10))
	held, err := c.Semaphore(name).AcquireLease(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	endsBeforeTaken(t, held, start, expiry, func() (bool, error) {
		// Sets the count only once the first is gone.
		if _, err := other.Semaphore(name).TrySetPermits(ctx, 1); err != nil {
			return false, err
		}
		_, ok, err := other.Semaphore(name).TryAcquireLease(ctx, 1)
		return ok, err
	})
}

// With the server's clock on time, the allowance is all a hold of any grant path loses: its
// context stays live until its lease, counted from before the request that set it, less
// leases.Allowance. (An allowance taken twice, or a lease counted from an earlier request,
// would end it sooner.)
func TestGrantLiveUntilLeaseLessAllowance(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, p := range grantPaths(lease) {
			if p.renewed {
				continue // its start is no bound on the renewal's send
			}
			t.Run(p.name, func(t *testing.T) {
				t.Parallel()
				name := "allowance:" + p.name
				held, start := onGrantPath(t, b, redistest.Context(t, time.Minute), p, lease, name)
				end := start.Add(lease - leases.Allowance(lease))
				// Looked at just before the end: a wake-up later than that asserts nothing.
				sleepUntil(end.Add(-5 * time.Millisecond))
				if at, err := time.Now(), held.Err(); at.Before(end) && err != nil {
					t.Fatalf("the hold's context ended %v before its lease less the allowance (%v): %v", end.Sub(at), lease-leases.Allowance(lease), context.Cause(held))
				}
			})
		}
	})
}
