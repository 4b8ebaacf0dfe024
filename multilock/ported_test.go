package multilock_test

// Redisson's multilock tests, method by method, as relock sequences: a Java "other
// thread" is another owner (relock.NewOwner), a second Redisson instance is a second
// relock client. RedissonMultiLock has no isLocked or getHoldCount and relock's MultiLock
// no IsHeld: the members are asked, through the hold's context, which carries the owner of
// every member (docs/migration-from-redisson.md, the RedissonMultiLock table).
//
// These tests wait on leases and wake-ups most of their time, so they run in parallel with
// each other (t.Parallel): each has servers of its own, and the shared cluster takes turns.
//
// RedissonMultiLockTest:
//   testLockUnlock: ported as TestMultiLockLeaseOnEveryMember (below).
//   testWaitAndLeaseTimeouts: covered by TestMultiTryLockOneOfManyWins (ten owners try
//     with a fixed lease at once, one gets all, the others ErrLocked; Redisson's wait of -1
//     is one attempt per member, TryLock) and TestMultiLockLeaseOnEveryMember (the lease).
//   testMultiThreads: TestPortedMultiLockWaitsForAnotherOwner
//   test: covered by TestMultiLockAcrossServers (three servers, one client each; another
//     owner's TryLock fails twice and leaves the holds; all free after Unlock).
//
// RedissonFasterMultiLockTest: Redisson's multilock on the fields of one hash
// (getMultiLock(group, fields)) is not offered (docs/migration-from-redisson.md, "Locks
// relock does not offer"), so its key layout (fields of the group hash, :lock_count and
// :expire_time fields) is not applicable. Its sequences about any multilock are ported on
// a MultiLock of locks, as that doc suggests:
//   testSimpleLock: covered by TestMultiLockLeaseOnEveryMember (a 30s lease is that test's
//     10s; every member held once, none left after Unlock).
//   testReentrantLock: TestPortedMultiLockReentry
//   testForceUnLock: not applicable: a MultiLock has no ForceUnlock (Redisson's
//     RedissonMultiLock throws UnsupportedOperationException); members are forced one by one.
//   testRenewExpiration: TestPortedMultiLockWatchdogRenewsEveryMember
//   testTryLock: covered by TestMultiLockAcrossServers (TryLock, another owner's TryLock
//     ErrLocked, Unlock) and TestMultiTryLock.
//   testTryLockWait: TestPortedMultiLockFixedLeaseLetsTheWaiterIn/bounded
//   testIsHeldAndIsLockedByThread: covered by TestMultiLockAllOrNothing (every member
//     locked and held once by the owner after Lock, none locked after Unlock).
//   testSubscriptionsPerConnection: covered by rlock.TestPortedNoChannelLeftAfterBusyLocks:
//     a MultiLock waits through its members' own waits, whose channels that test checks.
//   testSinglePubSub: covered by rlock.TestPortedWaitOnTwoLocksAtOnce (the members' waits)
//     and TestMultiLockOrderPreventsDeadlock (bounded MultiLock waits on one client, all met).
//   testLockIsNotRenewedAfterInterruptedTryLock: TestPortedMultiTryLockCancelledLeavesNoHold
//   testRedisFailed: TestPortedMultiLockRedisDown
//   testLockUnInterruptibly: not applicable: Go has no thread interrupt; an uninterruptible
//     lock() is Lock(context.Background()), and a cancelled ctx ends the wait
//     (TestMultiLockAllOrNothing, TestMultiLockWaitBoundIsTheCalls).
//   testExpire: TestPortedMultiLockFixedLeaseLetsTheWaiterIn/unbounded
//   testInCluster: covered by the "cluster" subtests (the members of these tests live in
//     the three shards of the test cluster).
//   testAutoExpire: TestPortedMultiLockClosedClientsHoldRunsOut
//   testIsHeldByCurrentThreadOtherThread, testIsHeldByCurrentThread, testIsLockedOtherThread,
//     testIsLocked: TestPortedMultiLockHeldAndLocked
//   testUnlockFail: TestPortedMultiUnlockByAnotherOwner
//   testReentrancy: TestPortedMultiLockReentry
//   testConcurrency_SingleInstance, testConcurrencyLoop_MultiInstance,
//     testConcurrency_MultiInstance: TestPortedMultiLockExcludes

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// RedissonMultiLockTest's testLockUnlock and testWaitAndLeaseTimeouts: a lease given to
// the call applies to every member, for Lock and for TryLock alike. Each member's key
// expires within the lease (10s) and no sooner than 5s, every member is held by the
// owner, and after Unlock none is held. A hold of the watchdog's would have the client's
// watchdog timeout, a minute here.
//
// Guards against a MultiLock that takes some members without the call's lease (the
// watchdog would renew them for as long as the client lives).
func TestMultiLockLeaseOnEveryMember(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const lease = 10 * time.Second
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(time.Minute))
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		for _, try := range []bool{false, true} {
			ml := c.MultiLock(members(c)...)
			lock, what := ml.Lock, "Lock"
			if try {
				lock, what = ml.TryLock, "TryLock"
			}
			held, err := lock(ctx, rlock.WithLease(lease))
			if err != nil {
				t.Fatalf("%s with a lease: %v", what, err)
			}
			for _, name := range memberNames {
				if ms := pttl(t, side, name); ms <= 5000 || ms > lease.Milliseconds() {
					t.Errorf("%s: PTTL %s = %dms; want the lease of %v on every member", what, name, ms, lease)
				}
			}
			if ok, err := c.Lock(memberNames[0]).IsHeld(held); !ok || err != nil {
				t.Errorf("%s: IsHeld %s = %v, %v; want true", what, memberNames[0], ok, err)
			}
			if ok, err := c.FairLock(memberNames[1]).IsHeld(held); !ok || err != nil {
				t.Errorf("%s: IsHeld %s = %v, %v; want true", what, memberNames[1], ok, err)
			}
			if n, err := c.RWLock(memberNames[2]).HoldCount(held); n != 1 || err != nil {
				t.Errorf("%s: HoldCount %s = %d, %v; want 1", what, memberNames[2], n, err)
			}
			if err := ml.Unlock(held); err != nil {
				t.Fatalf("%s: Unlock: %v", what, err)
			}
			if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
				t.Fatalf("%s: after Unlock, locked = %v; want none", what, got)
			}
		}
	})
}

// holders are the members of members(c) as each answers about its holds, in the order of
// memberNames.
func holders(c *relock.Client) []relocktest.Holds {
	return []relocktest.Holds{c.Lock(memberNames[0]), c.FairLock(memberNames[1]), c.RWLock(memberNames[2])}
}

// wantCounts checks that the owner ctx carries holds every member count times.
func wantCounts(t *testing.T, c *relock.Client, ctx context.Context, count int, what string) {
	t.Helper()
	for i, h := range holders(c) {
		if n, err := h.HoldCount(ctx); n != count || err != nil {
			t.Errorf("%s: HoldCount of %s = %d, %v; want %d", what, memberNames[i], n, err, count)
		}
	}
}

// wantNoKeys checks that no member's key exists.
func wantNoKeys(t *testing.T, side rueidis.Client, what string) {
	t.Helper()
	for _, name := range memberNames {
		if n, err := redistest.Do(t, side, "EXISTS", name).AsInt64(); n != 0 || err != nil {
			t.Errorf("%s: EXISTS %s = %d, %v; want 0", what, name, n, err)
		}
	}
}

// Another owner takes the MultiLock and gives it back 2s later; the owner's Lock, asked
// meanwhile, waits and gets every member once it has, not before.
func TestPortedMultiLockWaitsForAnotherOwner(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		var released atomic.Bool
		taken, done := make(chan error, 1), make(chan error, 1)
		go func() {
			ml := c.MultiLock(members(c)...)
			theirs, err := ml.Lock(relock.NewOwner(ctx))
			taken <- err
			if err != nil {
				return
			}
			time.Sleep(2 * time.Second)
			released.Store(true)
			done <- ml.Unlock(theirs)
		}()
		if err := redistest.Recv(t, taken, 20*time.Second, "the other owner's Lock"); err != nil {
			t.Fatal(err)
		}
		ml := c.MultiLock(members(c)...)
		held, err := ml.Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatalf("Lock behind another owner's MultiLock: %v", err)
		}
		if !released.Load() {
			t.Error("Lock returned while the other owner still held the MultiLock")
		}
		if err := redistest.Recv(t, done, 20*time.Second, "the other owner's Unlock"); err != nil {
			t.Errorf("the other owner's Unlock: %v", err)
		}
		wantCounts(t, c, held, 1, "after Lock")
		if err := ml.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
			t.Errorf("after Unlock, locked = %v; want none", got)
		}
	})
}

// Re-entry: two MultiLocks over the same locks, taken by one owner with a 30s lease, hold
// every member twice; one Unlock leaves one hold of each, the second leaves no key. A
// TryLock by the holder re-enters too, and while one hold of two is left another owner's
// TryLock fails with ErrLocked and leaves the holder's hold.
func TestPortedMultiLockReentry(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c, other := relocktest.New(t, b), relocktest.New(t, b)
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		owner := relock.NewOwner(ctx)
		ml1, ml2 := c.MultiLock(members(c)...), c.MultiLock(members(c)...)
		outer, err := ml1.Lock(owner, rlock.WithLease(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		inner, err := ml2.Lock(outer, rlock.WithLease(30*time.Second))
		if err != nil {
			t.Fatalf("the holder's second Lock: %v; want a re-entry", err)
		}
		wantCounts(t, c, inner, 2, "after two Locks")
		if err := ml1.Unlock(inner); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, c, outer, 1, "after one Unlock of two")
		if err := ml1.Unlock(outer); err != nil {
			t.Fatal(err)
		}
		wantNoKeys(t, side, "after both Unlocks")

		// testReentrancy, with TryLock.
		held, err := ml1.TryLock(owner)
		if err != nil {
			t.Fatalf("first TryLock: %v", err)
		}
		again, err := ml1.TryLock(held)
		if err != nil {
			t.Fatalf("TryLock by the holder: %v; want a re-entry", err)
		}
		if err := ml1.Unlock(again); err != nil {
			t.Fatal(err)
		}
		if _, err := other.MultiLock(members(other)...).TryLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("another owner's TryLock while one hold of two is left: %v; want ErrLocked", err)
		}
		wantCounts(t, c, held, 1, "after another owner's failed TryLock")
		if err := ml1.Unlock(held); err != nil {
			t.Fatal(err)
		}
		wantNoKeys(t, side, "after the last Unlock")
	})
}

// A MultiLock taken without a lease is renewed by the watchdog, every member: two watchdog
// timeouts later each is still held, and expires later than it did just after Lock.
func TestPortedMultiLockWatchdogRenewsEveryMember(t *testing.T) {
	t.Parallel()
	const wd = 1500 * time.Millisecond
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(wd))
		side := b.Client(t)
		ctx := redistest.Context(t, time.Minute)
		ml := c.MultiLock(members(c)...)
		held, err := ml.Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		var first []int64
		for _, name := range memberNames {
			first = append(first, redistest.ExpireTime(t, side, name))
		}
		time.Sleep(2 * wd)
		wantCounts(t, c, held, 1, "two watchdog timeouts later")
		for i, name := range memberNames {
			if at := redistest.ExpireTime(t, side, name); at <= first[i] {
				t.Errorf("%s expires at %d, two watchdog timeouts later; want after %d, as it did after Lock", name, at, first[i])
			}
		}
		if err := ml.Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// A holder with a 2s fixed lease that never unlocks: another owner's Lock waits and gets
// the MultiLock once the lease has run out (not before), with its own lease when it gives
// one and a wait bound longer than the holder's lease (Redisson's tryLock(3, 5, SECONDS);
// here 20s, with room for a loaded machine). The first holder's Unlock then fails with
// ErrNotHeld.
func TestPortedMultiLockFixedLeaseLetsTheWaiterIn(t *testing.T) {
	t.Parallel()
	const lease, theirLease = 2 * time.Second, 5 * time.Second
	for _, tc := range []struct {
		name string
		opts []rlock.Option
	}{
		{"unbounded", nil},
		{"bounded", []rlock.Option{rlock.WithWaitTimeout(20 * time.Second), rlock.WithLease(theirLease)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
				c := relocktest.New(t, b)
				side := b.Client(t)
				ctx := redistest.Context(t, time.Minute)
				ml := c.MultiLock(members(c)...)
				start := time.Now() // before the lease starts in Redis
				held, err := ml.Lock(relock.NewOwner(ctx), rlock.WithLease(lease))
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.MultiLock(members(c)...).Lock(relock.NewOwner(ctx), tc.opts...)
				if err != nil {
					t.Fatalf("the waiter behind a %v lease: %v", lease, err)
				}
				// Every server runs on this machine's clock: the waiter cannot be let in
				// before the lease, which began after start, ran out.
				if took := time.Since(start); took < lease-50*time.Millisecond {
					t.Errorf("the waiter got the MultiLock %v after a %v lease began", took, lease)
				}
				wantCounts(t, c, got, 1, "the waiter")
				if tc.opts != nil {
					for _, name := range memberNames {
						if ms := pttl(t, side, name); ms <= 0 || ms > theirLease.Milliseconds() {
							t.Errorf("PTTL %s = %dms; want the waiter's lease of %v", name, ms, theirLease)
						}
					}
				}
				if err := ml.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
					t.Errorf("the first holder's Unlock after its lease ran out: %v; want ErrNotHeld", err)
				}
				wantCounts(t, c, got, 1, "the waiter, after the first holder's Unlock")
				if err := ml.Unlock(got); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TryLocks whose context is cancelled while they run (at varied moments) leave no member
// held once they return, and none held two watchdog timeouts later: no renewal outlives
// the cancelled call. A TryLock that got through first is unlocked, as Redisson's thread
// does.
func TestPortedMultiTryLockCancelledLeavesNoHold(t *testing.T) {
	t.Parallel()
	const wd = time.Second
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(wd))
		ctx := redistest.Context(t, time.Minute)
		ml := c.MultiLock(members(c)...)
		var cancelled int
		for i := range 12 {
			cctx, cancel := context.WithCancel(relock.NewOwner(ctx))
			done := make(chan error, 1)
			var held context.Context
			go func() {
				var err error
				held, err = ml.TryLock(cctx)
				done <- err
			}()
			time.Sleep(time.Duration(i) * 500 * time.Microsecond)
			cancel()
			if err := redistest.Recv(t, done, 20*time.Second, "the cancelled TryLock"); err == nil {
				if err := ml.Unlock(held); err != nil {
					t.Fatalf("Unlock of a TryLock that got through: %v", err)
				}
			} else if !errors.Is(err, context.Canceled) {
				t.Fatalf("a cancelled TryLock: %v; want context.Canceled", err)
			} else {
				cancelled++
			}
			if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
				t.Fatalf("round %d: after the TryLock returned, locked = %v; want none", i, got)
			}
		}
		t.Logf("%d of 12 TryLocks cancelled", cancelled)
		time.Sleep(2 * wd)
		if got := locked(t, ctx, c); got[0] || got[1] || got[2] {
			t.Errorf("two watchdog timeouts after the cancelled TryLocks, locked = %v; want none", got)
		}
	})
}

// The server is killed under a client: a MultiLock's Lock with a wait bound and a lease
// fails with the connection's error naming a member, instead of waiting on until the bound.
func TestPortedMultiLockRedisDown(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithTimeout(300*time.Millisecond))
		ctx := redistest.Context(t, time.Minute)
		ml := c.MultiLock(members(c)...)
		b.Server.Kill(t)
		done := make(chan error, 1)
		go func() {
			_, err := ml.Lock(ctx, rlock.WithWaitTimeout(5*time.Second), rlock.WithLease(10*time.Second))
			done <- err
		}()
		err := redistest.Recv(t, done, 30*time.Second, "Lock on a dead server")
		var e *relock.Error
		// Redisson's throws the connection error (docs/migration-from-redisson.md: a
		// RedisException is an error wrapped with the lock's name), not the false of a wait
		// that ran out.
		if err == nil || !errors.As(err, &e) || !slices.Contains(memberNames, e.Name) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock on a dead server: %v; want the connection's error naming a member", err)
		}
	})
}

// A client that closes while its owner holds a MultiLock taken without a lease, with
// Redisson's behaviour at shutdown (relock.WithReleaseOnClose(false)): its renewals stop,
// and another client sees every member free within one watchdog timeout.
func TestPortedMultiLockClosedClientsHoldRunsOut(t *testing.T) {
	t.Parallel()
	const wd = 1500 * time.Millisecond
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		r := relocktest.New(t, b, relock.WithWatchdogTimeout(wd), relock.WithReleaseOnClose(false))
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		held, err := r.MultiLock(members(r)...).Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * wd) // the renewals keep it
		if got := locked(t, ctx, c); !got[0] || !got[1] || !got[2] {
			t.Fatalf("after two watchdog timeouts of holding, locked = %v; want all", got)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, wd+3*time.Second, "the closed client's members to run out", func() bool {
			got := locked(t, ctx, c)
			return !got[0] && !got[1] && !got[2]
		})
		runtime.KeepAlive(held) // nameable to the end: the members free because Close stopped the renewals
	})
}

// Every member answers for the owner and for another owner (of another client): before
// Lock none is held or locked; after it each is held by the owner, not by the other, and
// locked as the other sees it; after Unlock none again.
func TestPortedMultiLockHeldAndLocked(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c, c2 := relocktest.New(t, b), relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		owner, stranger := relock.NewOwner(ctx), relock.NewOwner(ctx)
		check := func(what string, hold context.Context, count int) {
			t.Helper()
			for i, h := range holders(c) {
				relocktest.CheckHolds(t, what+", "+memberNames[i], h, hold, count, holders(c2)[i], stranger, count > 0)
			}
		}
		ml := c.MultiLock(members(c)...)
		check("before Lock", owner, 0)
		held, err := ml.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		check("after Lock", held, 1)
		if err := ml.Unlock(held); err != nil {
			t.Fatal(err)
		}
		check("after Unlock", owner, 0)
	})
}

// Unlock by an owner that holds nothing, while another owner holds the MultiLock, fails
// with ErrNotHeld naming every member, and the holder keeps all of them.
func TestPortedMultiUnlockByAnotherOwner(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		ml := c.MultiLock(members(c)...)
		held, err := ml.Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Sorted(slices.Values(memberNames))
		if got := relocktest.Named(ml.Unlock(relock.NewOwner(ctx)), relock.ErrNotHeld); !slices.Equal(got, want) {
			t.Errorf("Unlock by another owner names %q; want ErrNotHeld naming each of %q", got, want)
		}
		wantCounts(t, c, held, 1, "the holder, after another owner's Unlock")
		if err := ml.Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// Owners on two clients take the same MultiLock again and again: one at a time inside,
// and every section runs.
func TestPortedMultiLockExcludes(t *testing.T) {
	t.Parallel()
	const workers, rounds = 6, 5
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		clients := []*relock.Client{relocktest.New(t, b), relocktest.New(t, b)}
		ctx := redistest.Context(t, 2*time.Minute)
		var inside, sections atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := clients[w%2]
				for range rounds {
					if err := c.MultiLock(members(c)...).Do(ctx, func(context.Context) error {
						if inside.Add(1) > 1 {
							return errors.New("two owners inside the MultiLock at once")
						}
						time.Sleep(2 * time.Millisecond)
						inside.Add(-1)
						sections.Add(1)
						return nil
					}); err != nil {
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
		if n := sections.Load(); n != workers*rounds {
			t.Errorf("%d sections ran; want %d", n, workers*rounds)
		}
	})
}
