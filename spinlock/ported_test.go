package spinlock_test

// Redisson's spin lock tests, method by method, as relock sequences: a Java "other thread"
// is another owner (relock.NewOwner), a second Redisson instance is a second relock client.
//
// These tests wait on leases and back-offs most of their time, so they run in parallel
// with each other (t.Parallel): each has servers of its own, and the shared cluster takes
// turns.
//
// RedissonSpinLockTest:
//   testRedisFailed: TestPortedSpinRedisDown
//   testTryLockWait: ported as TestSpinWaitTimeout (below).
//   testLockUninterruptibly: not applicable: Go has no thread interrupt; an uninterruptible
//     lock() is Lock(context.Background()), and a cancelled ctx ends the wait
//     (TestSpinWaiterContextEndsTheSleep).
//   testForceUnlock: covered by TestSpinHoldsLikeRLock (ForceUnlock, then the lock is free).
//   testExpire: covered by TestSpinHoldsLikeRLock (a fixed lease runs out under its holder,
//     another owner's waiter gets in, the holder's Unlock is ErrNotHeld) and
//     TestSpinSleepsNoLongerThanTheLease (the waiter gets in when the lease runs out).
//   testInCluster: covered by TestSpinHoldsLikeRLock's "cluster" subtest.
//   testAutoExpire: TestPortedSpinClosedClientsHoldRunsOut
//   testGetHoldCount: covered by TestSpinHoldsLikeRLock (counts 0, 1, 2, 1, 0).
//   testIsHeldByCurrentThreadOtherThread, testIsHeldByCurrentThread, testIsLockedOtherThread,
//     testIsLocked: covered by TestSpinHoldsLikeRLock (IsHeld of the owner and of another
//     owner, IsLocked seen by another client, before, while and after holding).
//   testUnlockFail: covered by TestSpinHoldsLikeRLock (Unlock by another owner while the
//     lock is held: ErrNotHeld, the holder keeps its count).
//   testLockUnlock: covered by TestSpinHoldsLikeRLock (Lock and Unlock, again and again).
//   testReentrancy: TestPortedSpinTryLockReentry
//   testConcurrency_SingleInstance: TestPortedSpinConcurrencyOneClient
//   testConcurrencyLoop_MultiInstance: TestPortedSpinConcurrencyLoopClients
//   testConcurrency_MultiInstance: TestPortedSpinConcurrencyClientsOnce
//   testTryLockAsync: TestPortedSpinWaiterGetsInOnceUnlocked/unbounded
//   testTimedTryLockAsync: TestPortedSpinWaiterGetsInOnceUnlocked/bounded
//   testTryLockAsyncWaitTime: covered by TestSpinWaitTimeout (another owner's bounded wait
//     behind a renewed holder fails at its bound, holding nothing).
//   testTryLockAsyncFailed: covered by TestSpinHoldsLikeRLock (another owner's TryLock of a
//     held lock: ErrLocked). The *Async forms are the blocking calls in a goroutine.
//   testTryLockAsyncSucceed: covered by TestSpinHoldsLikeRLock (TryLock of a free lock).

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/spinlock"
)

// RedissonSpinLockTest's testTryLockWait: behind a holder of another client whose hold
// the watchdog renews, a spin Lock bounded by WithWaitTimeout (Redisson's tryLock(wait,
// unit)) fails once the bound runs out with context.DeadlineExceeded naming the lock,
// holds nothing, and leaves the holder's hold as it was. Once the lock is free, a Lock
// with a bound takes it, and its hold outlives the bound (the bound is the wait's, not the
// hold's: docs/migration-from-redisson.md). ctx allows a minute, so only the bound can
// end the first wait within the 15s the test gives it.
//
// Guards against a spin waiter that ignores the bound (it spins until ctx ends), and a
// bound that passes to the hold's context.
func TestSpinWaitTimeout(t *testing.T) {
	t.Parallel()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const name = "spin:wait"
		ctx := redistest.Context(t, time.Minute)
		holder, waiter := relocktest.New(t, b), relocktest.New(t, b)
		held, err := holder.SpinLock(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			_, err := waiter.SpinLock(name).Lock(ctx, rlock.WithWaitTimeout(500*time.Millisecond))
			got <- err
		}()
		err = redistest.Recv(t, got, 15*time.Second, "the spin Lock past its wait bound of 500ms (ctx allows a minute)")
		var e *relock.Error
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &e) || e.Name != name {
			t.Fatalf("Lock behind a holder, bounded = %v; want context.DeadlineExceeded naming %s", err, name)
		}
		if n, err := holder.SpinLock(name).HoldCount(held); n != 1 || err != nil {
			t.Fatalf("the holder's HoldCount after the bounded wait = %d, %v; want 1", n, err)
		}
		if err := holder.SpinLock(name).Unlock(held); err != nil {
			t.Fatal(err)
		}

		mine, err := waiter.SpinLock(name).Lock(ctx, rlock.WithWaitTimeout(300*time.Millisecond))
		if err != nil {
			t.Fatalf("bounded Lock of a free lock: %v", err)
		}
		select {
		case <-mine.Done():
			t.Fatalf("the hold's context ended after the wait bound: %v", context.Cause(mine))
		case <-time.After(time.Second):
		}
		if ok, err := waiter.SpinLock(name).IsHeld(mine); !ok || err != nil {
			t.Fatalf("IsHeld after the bound = %v, %v; want true", ok, err)
		}
		if err := waiter.SpinLock(name).Unlock(mine); err != nil {
			t.Fatal(err)
		}
	})
}

// The server is killed under a client: a spin Lock with a wait bound and a lease fails
// with the connection's error naming the lock, instead of spinning on until the bound.
func TestPortedSpinRedisDown(t *testing.T) {
	t.Parallel()
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		const name = "myLock"
		c := relocktest.New(t, b, relock.WithTimeout(300*time.Millisecond))
		ctx := redistest.Context(t, time.Minute)
		b.Server.Kill(t)
		done := make(chan error, 1)
		go func() {
			_, err := c.SpinLock(name).Lock(ctx, rlock.WithWaitTimeout(5*time.Second), rlock.WithLease(10*time.Second))
			done <- err
		}()
		err := redistest.Recv(t, done, 30*time.Second, "a spin Lock on a dead server")
		var e *relock.Error
		// Redisson's throws the connection error (docs/migration-from-redisson.md: a
		// RedisException is an error wrapped with the lock's name), not the false of a wait
		// that ran out.
		if err == nil || !errors.As(err, &e) || e.Name != name || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("spin Lock on a dead server: %v; want the connection's error naming %s", err, name)
		}
	})
}

// A client that closes while its owner holds a spin lock taken without a lease, with
// Redisson's behaviour at shutdown (relock.WithReleaseOnClose(false)): its renewals stop,
// and another client sees the lock free within one watchdog timeout.
func TestPortedSpinClosedClientsHoldRunsOut(t *testing.T) {
	t.Parallel()
	const name, wd = "lock", 1500 * time.Millisecond
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		r := relocktest.New(t, b, relock.WithWatchdogTimeout(wd), relock.WithReleaseOnClose(false))
		c := relocktest.New(t, b)
		ctx := redistest.Context(t, time.Minute)
		held, err := r.SpinLock(name).Lock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * wd) // the renewals keep it
		if ok, err := c.SpinLock(name).IsLocked(ctx); !ok || err != nil {
			t.Fatalf("after two watchdog timeouts of holding, IsLocked = %v, %v; want true", ok, err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		redistest.Eventually(t, wd+3*time.Second, "the closed client's hold to run out", func() bool {
			ok, err := c.SpinLock(name).IsLocked(ctx)
			return err == nil && !ok
		})
		runtime.KeepAlive(held) // nameable to the end: the lock frees because Close stopped the renewals
	})
}

// TryLock re-enters for the holder; after one Unlock of two, another owner's TryLock
// fails with ErrLocked and the holder keeps its hold; the second Unlock frees the lock.
func TestPortedSpinTryLockReentry(t *testing.T) {
	t.Parallel()
	const name = "lock1"
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := relocktest.New(t, b)
		mu := c.SpinLock(name)
		ctx := redistest.Context(t, time.Minute)
		held, err := mu.TryLock(relock.NewOwner(ctx))
		if err != nil {
			t.Fatalf("first TryLock: %v", err)
		}
		if _, err := mu.TryLock(held); err != nil {
			t.Fatalf("TryLock by the holder: %v; want a re-entry", err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SpinLock(name).TryLock(relock.NewOwner(ctx)); !errors.Is(err, relock.ErrLocked) {
			t.Errorf("another owner's TryLock while one hold of two is left: %v; want ErrLocked", err)
		}
		if n, err := mu.HoldCount(held); n != 1 || err != nil {
			t.Errorf("the holder's HoldCount after another owner's TryLock = %d, %v; want 1", n, err)
		}
		if err := mu.Unlock(held); err != nil {
			t.Fatalf("the second Unlock: %v", err)
		}
		if ok, err := mu.IsLocked(ctx); ok || err != nil {
			t.Errorf("after both Unlocks, IsLocked = %v, %v; want false", ok, err)
		}
	})
}

// Another owner's Lock (in a goroutine, as Redisson's lockAsync and tryLockAsync) waits
// while the lock is held: it has not returned a second later; once the holder unlocks it
// gets the lock, with its lease when it gives one (Redisson's tryLockAsync(1, 30,
// SECONDS); its wait bound of 1s here 20s, for a loaded machine). ForceUnlock frees it.
func TestPortedSpinWaiterGetsInOnceUnlocked(t *testing.T) {
	t.Parallel()
	const name, theirLease = "lock", 30 * time.Second
	for _, tc := range []struct {
		name string
		opts []spinlock.Option
	}{
		{"unbounded", nil},
		{"bounded", []spinlock.Option{rlock.WithWaitTimeout(20 * time.Second), rlock.WithLease(theirLease)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
				c := relocktest.New(t, b)
				mu := c.SpinLock(name)
				ctx := redistest.Context(t, time.Minute)
				held, err := mu.Lock(relock.NewOwner(ctx))
				if err != nil {
					t.Fatal(err)
				}
				type result struct {
					held context.Context
					err  error
				}
				got := make(chan result, 1)
				go func() {
					h, err := mu.Lock(relock.NewOwner(ctx), tc.opts...)
					got <- result{h, err}
				}()
				select {
				case r := <-got:
					t.Fatalf("the waiter's Lock returned while the lock was held: %v", r.err)
				case <-time.After(time.Second):
				}
				if err := mu.Unlock(held); err != nil {
					t.Fatal(err)
				}
				r := redistest.Recv(t, got, 20*time.Second, "the waiter's Lock after the Unlock")
				if r.err != nil {
					t.Fatalf("the waiter's Lock: %v", r.err)
				}
				if ok, err := mu.IsHeld(r.held); !ok || err != nil {
					t.Errorf("the waiter's IsHeld = %v, %v; want true", ok, err)
				}
				if tc.opts != nil {
					if d, err := mu.TTL(r.held); err != nil || d <= 0 || d > theirLease {
						t.Errorf("the waiter's TTL = %v, %v; want its lease of %v", d, err, theirLease)
					}
				}
				if ok, err := mu.ForceUnlock(ctx); !ok || err != nil {
					t.Errorf("ForceUnlock = %v, %v; want true", ok, err)
				}
			})
		})
	}
}

// spinInTurns runs relocktest.InTurns on mus (one spin lock, through one client or
// several, with the default back-off): each round a Lock as an owner of its own and an
// Unlock. It leaves the lock free.
func spinInTurns(t *testing.T, mus []*spinlock.Mutex, rounds int, hold time.Duration) {
	t.Helper()
	relocktest.InTurns(t, mus, rounds, hold, func(ctx context.Context, mu *spinlock.Mutex) (func() error, error) {
		held, err := mu.Lock(relock.NewOwner(ctx))
		return func() error { return mu.Unlock(held) }, err
	})
	if ok, err := mus[0].IsLocked(redistest.Context(t, 10*time.Second)); ok || err != nil {
		t.Fatalf("after every round, IsLocked = %v, %v; want false", ok, err)
	}
}

// RedissonSpinLockTest's testConcurrency_SingleInstance: 15 goroutines of one client,
// each an owner of its own, take the lock once, count, and unlock: all 15 count, never
// two inside at once.
//
// Guards against a spin Lock that lets in an owner while another of the same client
// holds, and a waiter that stops trying after an unlock it was not told of.
func TestPortedSpinConcurrencyOneClient(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		mu := relocktest.New(t, b).SpinLock("testConcurrency_SingleInstance")
		spinInTurns(t, slices.Repeat([]*spinlock.Mutex{mu}, 15), 1, 0)
	})
}

// RedissonSpinLockTest's testConcurrencyLoop_MultiInstance: several clients loop, each
// taking the lock, holding it a moment, counting, and unlocking: every round of every
// client counts, never two inside at once. Redisson runs 16 clients of 100 rounds holding
// 10ms each; here 4 clients of 25 rounds hold 5ms.
//
// Guards against a spin Lock that lets in an owner of one client while another client's
// holds, and a waiter starved for good by owners that keep coming back.
func TestPortedSpinConcurrencyLoopClients(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		var mus []*spinlock.Mutex
		for range 4 {
			mus = append(mus, relocktest.New(t, b).SpinLock("testConcurrency_MultiInstance1"))
		}
		spinInTurns(t, mus, 25, 5*time.Millisecond)
	})
}

// RedissonSpinLockTest's testConcurrency_MultiInstance: clients each take the lock once,
// count, and unlock: every one counts, never two inside at once. Redisson runs 100
// clients; here 30.
//
// Guards against a spin Lock that lets in two clients at once when many start together.
func TestPortedSpinConcurrencyClientsOnce(t *testing.T) {
	t.Parallel()
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		var mus []*spinlock.Mutex
		for range 30 {
			mus = append(mus, relocktest.New(t, b).SpinLock("testConcurrency_MultiInstance2"))
		}
		spinInTurns(t, mus, 1, 0)
	})
}
