package rlock_test

// Redisson's lock tests (RLock, its watchdog renewal, RFencedLock), method by method, as
// relock sequences: a Java "other thread" is another owner (a fresh context, or
// relock.NewOwner), the "same thread" locking again after an unlock is one owner context
// from relock.NewOwner, a second Redisson instance is a second relock client.
//
// These tests wait on leases and wake-ups most of their time, so they run in parallel with
// each other (t.Parallel): each has servers of its own, and the shared cluster takes turns.
//
// Already checked elsewhere, not repeated here:
//   testRedisFailed: covered by relock.TestBadInput ("Redis down": Lock, TryLock and the
//     other kinds fail with a *relock.Error naming the lock on a killed server, no hang).
//   testUnlockFail: covered by TestOtherOwner (Unlock by another owner of the same or
//     another client is ErrNotHeld while the holder keeps the lock).
//   testLockUnlock: covered by TestNoRenewalAfterUnlock (twelve Lock/Unlock cycles of one
//     owner) and TestReentrancy.
//   testConcurrency_SingleInstance, testConcurrencyLoop_MultiInstance,
//     testConcurrency_MultiInstance: covered by TestMutualExclusion (2 clients x 16
//     goroutines x 50 sections, one holder at a time, no lost section).
//   RedissonLockHeavyTest's lockUnlockRLock and tryLockUnlockRLock (threads that lock or
//     try many locks, each around a semaphore's release and acquire; Redisson asserts
//     nothing but that they end): covered by TestMutualExclusion and, for the semaphore,
//     semaphore.TestRedissonConcurrencyLoopClients.
//   testLockIsNotRenewedAfterInterruptedTryLock: covered by
//     TestPortedCancelledTryLockLeavesNoHold (a TryLock cancelled in flight leaves no
//     renewed hold: the lock is free past three watchdog timeouts).
//   testLockFailoverInCluster (thirty TryLock and Unlock on a cluster, no failover made):
//     covered by the "cluster" subtests of TestPortedIsLocked and TestPortedTTL.
//   testExpirationRenewalIsWorkingAfterTimeout (RedissonLockExpirationRenewalTest, the name
//     testLockAfterTimeout had before): covered by TestPortedLockAfterRestartLoss.
//   testDelete (Redisson's delete(), since dropped from its suite): relock offers no Delete;
//     ForceUnlock deletes the lock, answering false for a free lock and true for a held one:
//     covered by TestPortedForceUnlock and TestQueries.
//   testTokenIncrease (fenced lock): covered by relock.TestFencingTokensCountFromOne (Lock,
//     Lock, Lock with a lease, TryLock give tokens 1, 2, 3, 4 and move the counter so) and
//     TestFencingTokensIncrease (tokens strictly grow across owners and clients; a re-entry
//     keeps its token: Redisson's re-entry takes a new one, docs/migration-from-redisson.md).
//
// Not applicable:
//   testLockListener: Redisson's object listeners (keyspace events) are not offered; the
//     hold's context reports the loss of one's own hold (docs/migration-from-redisson.md,
//     addListener row).
//   testLockUninterruptibly: Go has no thread interrupt. lock() that ignores interrupts is
//     Lock(context.Background()), which nothing can end; the interruptible form is the
//     cancelled context, checked by TestLockContextTimeout and TestLockContextEndsInFlight.
//
// Ported below (Redisson method: test):
//   testIsLocked, testInCluster: TestPortedIsLocked (its "cluster" subtest is testInCluster)
//   testIsLockedOtherThread: TestPortedIsLockedSeenByAnotherOwner
//   testIsHeldByCurrentThread: TestPortedIsHeld
//   testIsHeldByCurrentThreadOtherThread: TestPortedIsHeldByAnotherOwner
//   testGetHoldCount: TestPortedHoldCount
//   testReentrancy: TestPortedTryLockReentry
//   testForceUnlock: TestPortedForceUnlock
//   testExpire: TestPortedFixedLeaseLetsTheWaiterIn
//   testRemainTimeToLive: TestPortedTTL
//   testRemainTimeToLive2: TestPortedPartialUnlocksKeepTheLease
//   testAutoExpire: TestPortedClosedClientsHoldRunsOut
//   testTryLockWait: TestPortedWaitTimeoutRunsItsCourse
//   testSinglePubSub: TestPortedWaitOnTwoLocksAtOnce
//   testSubscriptionsPerConnection: TestPortedNoChannelLeftAfterBusyLocks
//   testLockAfterTimeout: TestPortedLockAfterRestartLoss
//   testWriteLockAfterTimeout: TestPortedWriteLockAfterRestartLoss
//   testReadLockAfterTimeout: TestPortedReadLockAfterRestartLoss
//   testLockReentrantRenew: TestPortedRenewalAfterAReentrantCycle
//   testWatchdogDoesNotOutliveInterruptedAcquire: TestPortedCancelStormLeavesNoHold
//   testCancelledTryLockAsyncDoesNotLeaveWatchdog: TestPortedCancelledTryLockLeavesNoHold
//   testConcurrencyTryLockUnLock: TestPortedTryLockStormKeepsTheHolderWatched
//   testFailoverInSentinel: TestPortedLocksThroughASentinelFailover

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
)

// inOtherOwner runs fn in another goroutine with a context of a new owner, as Redisson's
// tests run a step in another thread, and waits for it at most 20s.
func inOtherOwner(t *testing.T, ctx context.Context, fn func(other context.Context)) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(relock.NewOwner(ctx))
	}()
	redistest.Recv(t, done, 20*time.Second, "the other owner's step")
}

func wantLocked(t *testing.T, mu *rlock.Mutex, ctx context.Context, want bool, what string) {
	t.Helper()
	if locked, err := mu.IsLocked(ctx); locked != want || err != nil {
		t.Errorf("%s: IsLocked = %v, %v; want %v", what, locked, err, want)
	}
}

func wantHeld(t *testing.T, mu *rlock.Mutex, ctx context.Context, want bool, what string) {
	t.Helper()
	if held, err := mu.IsHeld(ctx); held != want || err != nil {
		t.Errorf("%s: IsHeld = %v, %v; want %v", what, held, err, want)
	}
}

func wantCount(t *testing.T, mu *rlock.Mutex, ctx context.Context, want int, what string) {
	t.Helper()
	if n, err := mu.HoldCount(ctx); n != want || err != nil {
		t.Errorf("%s: HoldCount = %d, %v; want %d", what, n, err, want)
	}
}

func TestPortedIsLocked(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		mu := relocktest.New(t, b).Lock("lock")
		ctx := redistest.Context(t, time.Minute)
		wantLocked(t, mu, ctx, false, "before Lock")
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantLocked(t, mu, ctx, true, "after Lock")
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		wantLocked(t, mu, ctx, false, "after Unlock")
	})
}

func TestPortedIsLockedSeenByAnotherOwner(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		held, err := c.Lock("lock").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inOtherOwner(t, ctx, func(other context.Context) { wantLocked(t, c.Lock("lock"), other, true, "while held") })
		if err := c.Lock("lock").Unlock(held); err != nil {
			t.Fatal(err)
		}
		inOtherOwner(t, ctx, func(other context.Context) { wantLocked(t, c.Lock("lock"), other, false, "after Unlock") })
	})
}

func TestPortedIsHeld(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		mu := relocktest.New(t, b).Lock("lock")
		owner := relock.NewOwner(redistest.Context(t, time.Minute))
		wantHeld(t, mu, owner, false, "before Lock")
		held, err := mu.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		wantHeld(t, mu, held, true, "after Lock")
		wantHeld(t, mu, owner, true, "after Lock, asked with the owner's context")
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		wantHeld(t, mu, owner, false, "after Unlock")
		wantHeld(t, mu, held, false, "after Unlock, asked with the ended hold's context")
	})
}

func TestPortedIsHeldByAnotherOwner(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		held, err := c.Lock("lock").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inOtherOwner(t, held, func(other context.Context) { wantHeld(t, c.Lock("lock"), other, false, "while held") })
		if err := c.Lock("lock").Unlock(held); err != nil {
			t.Fatal(err)
		}
		inOtherOwner(t, ctx, func(other context.Context) { wantHeld(t, c.Lock("lock"), other, false, "after Unlock") })
	})
}

func TestPortedHoldCount(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		mu := relocktest.New(t, b).Lock("lock")
		// One owner throughout, as one Java thread: Lock after an Unlock passes the owner's
		// context, not the ended hold's (docs/migration-from-redisson.md).
		owner := relock.NewOwner(redistest.Context(t, time.Minute))
		wantCount(t, mu, owner, 0, "before Lock")
		held, err := mu.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		wantCount(t, mu, held, 1, "after Lock")
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		wantCount(t, mu, owner, 0, "after Unlock")

		held, err = mu.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mu.Lock(owner); err != nil {
			t.Fatal(err)
		}
		wantCount(t, mu, held, 2, "after two Locks")
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		wantCount(t, mu, held, 1, "after one Unlock of two")
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		wantCount(t, mu, owner, 0, "after the second Unlock")
	})
}

func TestPortedTryLockReentry(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("lock1")
		owner := relock.NewOwner(redistest.Context(t, time.Minute))
		held, err := mu.TryLock(owner)
		if err != nil {
			t.Fatalf("first TryLock: %v", err)
		}
		if _, err := mu.TryLock(held); err != nil {
			t.Fatalf("TryLock by the holder: %v; want a re-entry", err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		inOtherOwner(t, owner, func(other context.Context) {
			if _, err := c.Lock("lock1").TryLock(other); !errors.Is(err, relock.ErrLocked) {
				t.Errorf("another owner's TryLock while one hold of two is left: %v; want ErrLocked", err)
			}
		})
		if err := mu.Unlock(held); err != nil {
			t.Fatalf("the second Unlock: %v", err)
		}
		wantLocked(t, mu, owner, false, "after both Unlocks")
	})
}

func TestPortedForceUnlock(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("lock")
		ctx := redistest.Context(t, time.Minute)
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := mu.ForceUnlock(ctx); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v; want true", ok, err)
		}
		wantLocked(t, mu, ctx, false, "after ForceUnlock")
		wantLocked(t, c.Lock("lock"), ctx, false, "after ForceUnlock, a new Mutex")
		runtime.KeepAlive(held) // the hold stays nameable: a renewal must not bring it back
	})
}

// A holder with a 2s fixed lease that never unlocks: another owner waiting on the lock
// gets it once the lease runs out (not before), and the first holder's Unlock then fails.
func TestPortedFixedLeaseLetsTheWaiterIn(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("lock")
		ctx := redistest.Context(t, time.Minute)
		start := time.Now() // before the lease starts in Redis
		held, err := mu.Lock(ctx, rlock.WithLease(lease))
		if err != nil {
			t.Fatal(err)
		}
		inOtherOwner(t, ctx, func(other context.Context) {
			wctx, cancel := context.WithTimeout(other, 15*time.Second)
			defer cancel()
			got, err := c.Lock("lock").Lock(wctx)
			if err != nil {
				t.Errorf("the waiter behind a %v lease: %v", lease, err)
				return
			}
			// Time is read on this machine, where Redis runs too: the waiter cannot be
			// let in before the lease, which began after start, ran out.
			if took := time.Since(start); took < lease-50*time.Millisecond {
				t.Errorf("the waiter got the lock %v after a %v lease began", took, lease)
			}
			if err := c.Lock("lock").Unlock(got); err != nil {
				t.Errorf("the waiter's Unlock: %v", err)
			}
		})
		if err := mu.Unlock(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("Unlock after the lease ran out and another owner held the lock: %v; want ErrNotHeld", err)
		}
	})
}

// TTL answers the lease left of the owner's hold: an hour's lease just taken, and the
// watchdog timeout for a hold without a lease. After the Unlock Redisson answers -2 (the
// key's PTTL); relock answers ErrNotHeld (docs/migration-from-redisson.md, TTL row).
func TestPortedTTL(t *testing.T) {
	t.Parallel()
	const margin = 5 * time.Second // a loaded machine's delay between the call and the read
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		mu := relocktest.New(t, b).Lock("test-lock:1")
		owner := relock.NewOwner(redistest.Context(t, time.Minute))
		held, err := mu.Lock(owner, rlock.WithLease(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if ttl, err := mu.TTL(held); err != nil || ttl <= time.Hour-margin || ttl > time.Hour {
			t.Errorf("TTL of an hour's lease = %v, %v; want just under an hour", ttl, err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if ttl, err := mu.TTL(held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("TTL after Unlock = %v, %v; want ErrNotHeld", ttl, err)
		}
		held, err = mu.Lock(owner)
		if err != nil {
			t.Fatal(err)
		}
		wd := relock.DefaultWatchdogTimeout
		if ttl, err := mu.TTL(held); err != nil || ttl <= wd-margin || ttl > wd {
			t.Errorf("TTL of a hold without a lease = %v, %v; want just under the watchdog timeout %v", ttl, err, wd)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// One owner takes a lock three times, each with a fixed lease of 10s, and unlocks twice:
// it still holds the lock, whose time left is within the lease, as Redisson's answers.
// Redisson's partial unlock sets the lease again; relock's keeps the expiry as it was
// (docs/migration-from-redisson.md, "An unlock that leaves holds keeps the expiry"), so
// the owner pauses before the unlocks, and the time left after them is no more than
// before them.
//
// Guards against a partial unlock that sets the key's expiry again (to the lease, or to
// the watchdog timeout as Redisson's does without a lease).
func TestPortedPartialUnlocksKeepTheLease(t *testing.T) {
	t.Parallel()
	const (
		lease  = 10 * time.Second
		pause  = 2 * time.Second
		margin = 5 * time.Second // a loaded machine's delay between the calls
	)
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		const name = "ported:partial-unlocks"
		mu := relocktest.New(t, b).Lock(name)
		side := b.Client(t)
		holds := []context.Context{relock.NewOwner(redistest.Context(t, time.Minute))}
		for range 3 {
			held, err := mu.Lock(holds[len(holds)-1], rlock.WithLease(lease))
			if err != nil {
				t.Fatal(err)
			}
			holds = append(holds, held)
		}
		time.Sleep(pause)
		before := redistest.PTTL(t, side, name)
		for i := 3; i > 1; i-- {
			if err := mu.Unlock(holds[i]); err != nil {
				t.Fatalf("Unlock of hold %d: %v", i, err)
			}
		}
		if n, err := mu.HoldCount(holds[1]); n != 1 || err != nil {
			t.Fatalf("HoldCount after two of three unlocks = %d, %v; want 1", n, err)
		}
		after := redistest.PTTL(t, side, name)
		if after <= 0 || after > before {
			t.Errorf("PTTL after two of three unlocks = %dms, %dms before them; want it kept (no more than before)", after, before)
		}
		if ttl, err := mu.TTL(holds[1]); err != nil || ttl <= lease-pause-margin || ttl > lease {
			t.Errorf("TTL after two of three unlocks = %v, %v; want within the %v lease", ttl, err, lease)
		}
		if err := mu.Unlock(holds[1]); err != nil {
			t.Fatal(err)
		}
		if p := redistest.PTTL(t, side, name); p != -2 {
			t.Errorf("PTTL after the last unlock = %d; want -2 (no key)", p)
		}
	})
}

// A client that closes while its owner still holds a lock taken without a lease, with
// Redisson's behaviour at shutdown (relock.WithReleaseOnClose(false)): its renewals stop,
// and another client sees the lock free within one watchdog timeout.
func TestPortedClosedClientsHoldRunsOut(t *testing.T) {
	t.Parallel()
	const wd = 1500 * time.Millisecond
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		r := relocktest.New(t, b, relock.WithWatchdogTimeout(wd), relock.WithReleaseOnClose(false))
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		heldCh := make(chan context.Context, 1)
		go func() {
			held, err := r.Lock("lock").Lock(relock.NewOwner(ctx))
			if err != nil {
				t.Errorf("Lock: %v", err)
			}
			heldCh <- held
		}()
		held := redistest.Recv(t, heldCh, 10*time.Second, "the holder's Lock")
		// Held for two watchdog timeouts: the renewals keep it.
		time.Sleep(2 * wd)
		wantLocked(t, c.Lock("lock"), ctx, true, "after two watchdog timeouts of holding")
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		closed := time.Now()
		redistest.Eventually(t, wd+3*time.Second, "the closed client's hold to run out", func() bool {
			locked, err := c.Lock("lock").IsLocked(ctx)
			return err == nil && !locked
		})
		t.Logf("the lock freed %v after Close (watchdog timeout %v)", time.Since(closed).Round(time.Millisecond), wd)
		runtime.KeepAlive(held) // nameable to the end: the lock frees because Close stopped the renewals
	})
}

// A lock held by another client for as long as the test runs: Lock bounded by
// WithWaitTimeout gives up with DeadlineExceeded, not before the bound.
func TestPortedWaitTimeoutRunsItsCourse(t *testing.T) {
	t.Parallel()
	const wait = time.Second
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		other, c := relocktest.New(t, b), relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		held, err := other.Lock("lock").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.Lock("lock").Lock(ctx, rlock.WithWaitTimeout(wait))
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock with a %v wait on a held lock: %v; want DeadlineExceeded", wait, err)
		}
		if took < wait {
			t.Errorf("Lock gave up after %v, before its %v wait bound", took, wait)
		}
		runtime.KeepAlive(held)
	})
}

// Two locks, each wanted by two owners of one client at once, twice over: every Lock
// bounded by a wait gets its lock (the holders release it at once).
func TestPortedWaitOnTwoLocksAtOnce(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		var fails atomic.Int32
		for i := 0; i < 2; i++ {
			var wg sync.WaitGroup
			for _, name := range []string{"Lock1_", "Lock1_", "Lock2_", "Lock2_"} {
				mu := c.Lock(name + string(rune('0'+i)))
				wg.Add(1)
				go func() {
					defer wg.Done()
					held, err := mu.Lock(context.Background(), rlock.WithWaitTimeout(10*time.Second))
					if err == nil {
						err = mu.Unlock(held)
					}
					if err != nil {
						t.Errorf("%s: %v", mu.Name(), err)
						fails.Add(1)
					}
				}()
			}
			wg.Wait()
		}
		if n := fails.Load(); n != 0 {
			t.Errorf("%d of 8 bounded Locks failed", n)
		}
	})
}

// Many owners of one client take and release five locks in turn, with short sections:
// none fails, and once they are done the server has no channel subscribed (after the
// lingering of the last ones, a second).
func TestPortedNoChannelLeftAfterBusyLocks(t *testing.T) {
	t.Parallel()
	const workers, ops = 16, 400
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		side := b.Client(t)
		var (
			errs, done atomic.Int32
			next       atomic.Int32
			wg         sync.WaitGroup
		)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= ops {
					mu := c.Lock("lock-" + string(rune('0'+rand.IntN(5))))
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					held, err := mu.Lock(ctx)
					if err == nil {
						time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
						err = mu.Unlock(held)
					}
					cancel()
					if err != nil {
						t.Errorf("%s: %v", mu.Name(), err)
						errs.Add(1)
						continue
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		if errs.Load() != 0 || done.Load() != ops {
			t.Fatalf("%d of %d cycles done, %d failed", done.Load(), ops, errs.Load())
		}
		var channels []string
		redistest.Eventually(t, 10*time.Second, "the server's channels to be unsubscribed", func() bool {
			var err error
			channels, err = redistest.Do(t, side, "PUBSUB", "CHANNELS").AsStrSlice()
			return err == nil && len(channels) == 0
		})
		// The client counts a channel until it has read the server's confirmation of the
		// unsubscription, which may come a moment after the server has dropped it.
		if !redistest.Await(10*time.Second, func() bool { return c.PubSubStats().Channels == 0 }) {
			st := c.PubSubStats()
			t.Errorf("the client still counts %d channels: %+v", st.Channels, st)
		}
	})
}

// restartKind takes and releases one kind of hold on the name "LOCK_KEY" of c.
type restartKind struct {
	take    func(c *relock.Client, ctx context.Context) (context.Context, error)
	release func(c *relock.Client, held context.Context) error
	cycles  int // holds taken after the lost one
}

// afterRestartLoss holds a lock without a lease (watchdog timeout 1s) while Redis restarts
// without persistence: the hold is lost and its release is ErrNotHeld. The same owner
// then takes the lock again, cycles times (a second apart), keeps it for two watchdog
// timeouts, renewed, and releases it.
func afterRestartLoss(t *testing.T, k restartKind) {
	const wd = time.Second
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(wd))
		owner := relock.NewOwner(redistest.Context(t, time.Minute))
		held, err := k.take(c, owner)
		if err != nil {
			t.Fatal(err)
		}
		b.Server.Restart(t)
		waitDone(t, held, 10*time.Second, "the hold Redis lost at its restart")
		if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
			t.Errorf("the lost hold's cause: %v; want ErrLeaseLost", cause)
		}
		if err := k.release(c, held); !errors.Is(err, relock.ErrNotHeld) {
			t.Errorf("release of the lost hold: %v; want ErrNotHeld", err)
		}
		for i := 0; i < k.cycles; i++ {
			if i > 0 {
				time.Sleep(time.Second)
			}
			again, err := k.take(c, owner)
			if err != nil {
				t.Fatalf("hold %d after the restart: %v", i+1, err)
			}
			time.Sleep(2 * wd)
			if again.Err() != nil {
				t.Errorf("hold %d after the restart ended within two watchdog timeouts: %v", i+1, context.Cause(again))
			}
			if err := k.release(c, again); err != nil {
				t.Errorf("release of hold %d after the restart: %v", i+1, err)
			}
		}
	})
}

func TestPortedLockAfterRestartLoss(t *testing.T) {
	t.Parallel()
	afterRestartLoss(t, restartKind{
		take: func(c *relock.Client, ctx context.Context) (context.Context, error) {
			return c.Lock("LOCK_KEY").Lock(ctx)
		},
		release: func(c *relock.Client, held context.Context) error { return c.Lock("LOCK_KEY").Unlock(held) },
		cycles:  1,
	})
}

func TestPortedWriteLockAfterRestartLoss(t *testing.T) {
	t.Parallel()
	afterRestartLoss(t, restartKind{
		take: func(c *relock.Client, ctx context.Context) (context.Context, error) {
			return c.RWLock("LOCK_KEY").Lock(ctx)
		},
		release: func(c *relock.Client, held context.Context) error { return c.RWLock("LOCK_KEY").Unlock(held) },
		cycles:  2,
	})
}

func TestPortedReadLockAfterRestartLoss(t *testing.T) {
	t.Parallel()
	afterRestartLoss(t, restartKind{
		take: func(c *relock.Client, ctx context.Context) (context.Context, error) {
			return c.RWLock("LOCK_KEY").RLock(ctx)
		},
		release: func(c *relock.Client, held context.Context) error { return c.RWLock("LOCK_KEY").RUnlock(held) },
		cycles:  1,
	})
}

// An owner takes the lock twice and releases it twice; another owner of the same client
// then takes it and keeps it: its hold is renewed for five watchdog timeouts.
func TestPortedRenewalAfterAReentrantCycle(t *testing.T) {
	t.Parallel()
	const wd = time.Second
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(wd))
		side := b.Client(t)
		mu := c.Lock("LOCK_KEY")
		ctx := redistest.Context(t, time.Minute)
		held, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mu.Lock(held); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := mu.Unlock(held); err != nil {
				t.Fatal(err)
			}
		}
		heldCh := make(chan context.Context, 1)
		go func() {
			h, err := c.Lock("LOCK_KEY").Lock(relock.NewOwner(ctx))
			if err != nil {
				t.Errorf("the second owner's Lock: %v", err)
			}
			heldCh <- h
		}()
		second := redistest.Recv(t, heldCh, 10*time.Second, "the second owner's Lock")
		time.Sleep(5 * wd)
		if n, _ := redistest.Do(t, side, "EXISTS", "LOCK_KEY").AsInt64(); n != 1 {
			t.Errorf("the second owner's hold is gone after five watchdog timeouts")
		}
		if second.Err() != nil {
			t.Errorf("the second owner's hold ended: %v", context.Cause(second))
		}
	})
}

// Four owners take and release one lock in a loop while their contexts are cancelled
// without pause, for 3s. Every Lock either fails, leaving its owner holding nothing (and
// the Unlock after it finds nothing), or returns a hold that its Unlock releases: once they stop, nothing is held, nothing was
// abandoned, and the key is still gone three watchdog timeouts later (no renewal of a
// hold nobody knows brought it back).
func TestPortedCancelStormLeavesNoHold(t *testing.T) {
	t.Parallel()
	const (
		wd      = time.Second
		workers = 4
		storm   = 3 * time.Second
	)
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(wd))
		side := b.Client(t)
		const name = "test:watchdog:interrupt-leak"
		var (
			stop                atomic.Bool
			cancels             [workers]atomic.Pointer[context.CancelFunc]
			taken, interrupted  atomic.Int32
			wg                  sync.WaitGroup
			unexpectedUnlockErr atomic.Int32
			leftover            atomic.Int32 // failed Locks that left the owner holding
		)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mu := c.Lock(name)
				owner := relock.NewOwner(context.Background()) // the worker's thread
				for !stop.Load() {
					ctx, cancel := context.WithCancel(owner)
					cancels[w].Store(&cancel)
					held, err := mu.Lock(ctx)
					cancel()
					switch {
					case err == nil:
						taken.Add(1)
					case errors.Is(err, context.Canceled):
						interrupted.Add(1)
						// A Lock that failed holds nothing, even when its attempt had taken
						// the lock by the time ctx ended: the finally block below would
						// release such a hold and hide it, so it is looked for first.
						if h, err := mu.IsHeld(owner); h || err != nil {
							leftover.Add(1)
						}
					default:
						t.Errorf("Lock: %v", err)
					}
					// The finally block: released whatever the Lock did.
					if err := mu.Unlock(held); err != nil && !errors.Is(err, relock.ErrNotHeld) {
						unexpectedUnlockErr.Add(1)
						t.Errorf("Unlock: %v", err)
					}
				}
			}()
		}
		redistest.CancelStorm(storm, cancels[:])
		stop.Store(true)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		redistest.Recv(t, done, 20*time.Second, "the workers' end")
		t.Logf("%d holds taken, %d Locks cancelled", taken.Load(), interrupted.Load())
		if interrupted.Load() == 0 {
			t.Fatal("no Lock was cancelled: the test proved nothing")
		}
		if n := leftover.Load(); n > 0 {
			t.Errorf("%d cancelled Locks left their owner holding the lock (or IsHeld failed)", n)
		}
		if st := c.WatchdogStats(); st.Holds != 0 || st.Abandoned != 0 {
			t.Errorf("after the storm the watchdog knows %d holds and abandoned %d; want none", st.Holds, st.Abandoned)
		}
		// Every Lock that returned a hold was unlocked, and one that failed took nothing:
		// the lock is free as soon as the workers are done.
		if locked, err := c.Lock(name).IsLocked(context.Background()); locked || err != nil {
			t.Errorf("IsLocked once the workers are done = %v, %v; want false", locked, err)
		}
		time.Sleep(3 * wd)
		if locked, err := c.Lock(name).IsLocked(context.Background()); locked || err != nil {
			t.Errorf("IsLocked three watchdog timeouts after the storm = %v, %v; want false", locked, err)
		}
		if p := redistest.PTTL(t, side, name); p > 0 {
			t.Errorf("the lock key is still there, PTTL %dms, three watchdog timeouts after the storm", p)
		}
	})
}

// 400 TryLocks of one owner, each cancelled right after it was started: a TryLock that
// returned a hold is released, one that was cancelled left nothing behind, so three
// watchdog timeouts later nothing holds the lock and nothing was abandoned.
func TestPortedCancelledTryLockLeavesNoHold(t *testing.T) {
	t.Parallel()
	const wd = time.Second
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b, relock.WithWatchdogTimeout(wd))
		side := b.Client(t)
		const name = "test:watchdog:cancel-async"
		mu := c.Lock(name)
		owner := relock.NewOwner(context.Background())
		type result struct {
			held context.Context
			err  error
		}
		cancelled := 0
		for i := 0; i < 400; i++ {
			ctx, cancel := context.WithCancel(owner)
			res := make(chan result, 1)
			go func() {
				held, err := mu.TryLock(ctx)
				res <- result{held, err}
			}()
			runtime.Gosched() // let the attempt go out, then cancel it
			cancel()
			r := redistest.Recv(t, res, 10*time.Second, "a cancelled TryLock")
			switch {
			case errors.Is(r.err, context.Canceled):
				cancelled++
			case r.err == nil:
				if err := mu.Unlock(r.held); err != nil {
					t.Fatalf("Unlock of a completed TryLock: %v", err)
				}
			default:
				t.Fatalf("TryLock: %v", r.err)
			}
		}
		t.Logf("%d of 400 TryLocks cancelled", cancelled)
		if cancelled == 0 {
			t.Fatal("no TryLock was cancelled: the test proved nothing")
		}
		if st := c.WatchdogStats(); st.Holds != 0 || st.Abandoned != 0 {
			t.Errorf("after the cancelled TryLocks the watchdog knows %d holds and abandoned %d; want none", st.Holds, st.Abandoned)
		}
		if locked, err := mu.IsLocked(context.Background()); locked || err != nil {
			t.Errorf("IsLocked just after the cancelled TryLocks = %v, %v; want false", locked, err)
		}
		time.Sleep(500*time.Millisecond + 3*wd)
		if locked, err := mu.IsLocked(context.Background()); locked || err != nil {
			t.Errorf("IsLocked after the cancelled TryLocks = %v, %v; want false", locked, err)
		}
		if p := redistest.PTTL(t, side, name); p > 0 {
			t.Errorf("the lock key is still there, PTTL %dms, after the cancelled TryLocks", p)
		}
	})
}

// Sixteen owners of one client try a lock again and again, and unlock it when they got it.
// Whenever one holds it, its client's watchdog knows of the hold, until its own Unlock:
// another owner's Unlock that just went before never takes it with it. (Redisson checks
// its renewal table by reflection before each unlock; relock's counter of the holds its
// watchdog renews is WatchdogStats.) Every Unlock succeeds, and nothing is left after.
//
// Guards against a release that forgets every hold of the lock's name rather than the
// releasing owner's: when another owner took the lock between the release's script and
// the forgetting, that owner's hold would be left unrenewed.
func TestPortedTryLockStormKeepsTheHolderWatched(t *testing.T) {
	t.Parallel()
	const owners, tries = 16, 400
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.Lock("ported:trylock-storm")
		ctx := redistest.Context(t, 2*time.Minute)
		var got, unwatched atomic.Int64
		var wg sync.WaitGroup
		for range owners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := relock.NewOwner(ctx)
				for range tries {
					held, err := mu.TryLock(owner)
					if errors.Is(err, relock.ErrLocked) {
						continue
					}
					if err != nil {
						t.Errorf("TryLock: %v", err)
						return
					}
					got.Add(1)
					runtime.Gosched() // let the owner that went before finish its Unlock
					// The holder's context lives while the watchdog keeps its hold; the owner that
					// went before may still be on its way out of the table, so at least one.
					if st := c.WatchdogStats(); st.Holds < 1 || held.Err() != nil {
						unwatched.Add(1)
						t.Logf("before an Unlock: watchdog knows %d holds, hold context %v; want at least 1, live", st.Holds, context.Cause(held))
					}
					if err := mu.Unlock(held); err != nil {
						t.Errorf("Unlock: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		t.Logf("%d of %d TryLocks got the lock", got.Load(), owners*tries)
		if got.Load() == 0 {
			t.Fatal("no TryLock got the lock: the test proved nothing")
		}
		if n := unwatched.Load(); n > 0 {
			t.Errorf("%d holds were not watched (or had ended) before their Unlock; want none", n)
		}
		if st := c.WatchdogStats(); st.Holds != 0 || st.Lost != 0 {
			t.Errorf("after the storm the watchdog knows %d holds and lost %d; want none", st.Holds, st.Lost)
		}
		if locked, err := mu.IsLocked(context.Background()); locked || err != nil {
			t.Errorf("IsLocked after the storm = %v, %v; want false", locked, err)
		}
	})
}

// Five owners loop on one lock through a Sentinel failover, each attempt a Lock with a 3s
// wait and a 2s lease that, when it gets the lock, holds it a second, unlocks and pauses a
// second. Two seconds in, the master is killed; a replica takes over; later the old master
// comes back, empty, on its port. Redisson asserts nothing but that the loop goes on; here
// every attempt returns within its wait and the client's room, every error is a *relock.Error
// naming the lock, and each owner takes the lock again after the failover and again after
// the old master's return. Holds taken before the failover may be lost with it
// (docs/operations.md), so what an Unlock answers then is not checked.
func TestPortedLocksThroughASentinelFailover(t *testing.T) {
	const (
		owners = 5
		wait   = 3 * time.Second
		lease  = 2 * time.Second
		room   = 15 * time.Second // the client's own timeouts while the master is gone
	)
	s := redistest.StartSentinel(t)
	c := relocktest.On(t, s.Client(t))
	ctx := redistest.Context(t, 4*time.Minute)
	var (
		phase atomic.Int32         // 0 before the failover, 1 after it, 2 after the old master's return
		took  [owners]atomic.Int32 // the phase of each owner's last acquisition, plus one
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	for i := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu := c.Lock("lock")
			owner := relock.NewOwner(ctx)
			for !stop.Load() && ctx.Err() == nil {
				p := phase.Load()
				start := time.Now()
				held, err := mu.Lock(owner, rlock.WithWaitTimeout(wait), rlock.WithLease(lease))
				if d := time.Since(start); d > wait+room {
					t.Errorf("owner %d: an attempt with a %v wait returned after %v", i, wait, d)
				}
				if err != nil {
					var le *relock.Error
					if !errors.As(err, &le) || le.Name != "lock" {
						t.Errorf("owner %d: Lock: %v; want a *relock.Error naming the lock", i, err)
					}
					if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
						time.Sleep(100 * time.Millisecond) // Redis unreachable: do not spin
					}
					continue
				}
				took[i].Store(p + 1)
				time.Sleep(time.Second)
				_ = mu.Unlock(held) // checked below only once Redis is steady
				time.Sleep(time.Second)
			}
		}()
	}
	t.Cleanup(func() {
		stop.Store(true)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		redistest.Recv(t, done, wait+room+5*time.Second, "the owners' return")
	})
	everyOwnerTook := func(p int32, what string) {
		t.Helper()
		redistest.Eventually(t, time.Minute, "an owner did not take the lock "+what, func() bool {
			for i := range took {
				if took[i].Load() < p+1 {
					return false
				}
			}
			return true
		})
	}
	everyOwnerTook(0, "before the failover")
	old := s.Master()
	old.Kill(t)
	s.WaitFailover(t, old, 30*time.Second)
	phase.Store(1)
	everyOwnerTook(1, "after the failover")
	old.Restart(t)
	phase.Store(2)
	everyOwnerTook(2, "after the old master came back")

	// Redis is steady again: one more owner's hold excludes the others and its Unlock counts.
	stop.Store(true)
	held, err := c.Lock("lock").Lock(relock.NewOwner(ctx), rlock.WithWaitTimeout(time.Minute))
	if err != nil {
		t.Fatalf("a Lock once the loop stopped: %v", err)
	}
	if _, err := c.Lock("lock").TryLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
		t.Errorf("another owner's TryLock: %v; want ErrLocked", err)
	}
	if err := c.Lock("lock").Unlock(held); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}
